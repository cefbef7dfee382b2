//! Pipeline flags shared by `dedup`, `eval` and `tune`.

use clap::Args;
use neardup_core::{Config, Normalizer, ShingleKind, SignatureScheme};

/// How text becomes fingerprints and candidates.
#[derive(Debug, Clone, Args)]
pub struct PipelineArgs {
    /// Jaccard threshold: pairs at or above it are near duplicates.
    #[arg(long, default_value_t = 0.8, help_heading = "Pipeline")]
    pub threshold: f64,
    /// Tokens per word shingle (characters with --char-shingles).
    #[arg(long, default_value_t = 5, help_heading = "Pipeline")]
    pub shingle_width: u32,
    /// Shingle characters instead of words (for text without spaces, or short texts).
    #[arg(long, help_heading = "Pipeline")]
    pub char_shingles: bool,
    /// Normalizer: `default` (Unicode NFKC, case folding, punctuation folding) or
    /// `seed` (the reference `[a-z0-9]+` tokenizer).
    #[arg(long, default_value = "default", help_heading = "Pipeline")]
    pub normalizer: String,
    /// Signature length: MinHash values (default 128), or SimHash bits
    /// (default 64, a multiple of 64).
    #[arg(long, help_heading = "Pipeline")]
    pub num_perm: Option<u32>,
    /// LSH bands (default: chosen by the calculator for --recall-target).
    #[arg(long, help_heading = "Pipeline")]
    pub bands: Option<u32>,
    /// Signature values per band (default: chosen by the calculator).
    #[arg(long, help_heading = "Pipeline")]
    pub rows: Option<u32>,
    /// Candidate probability the calculator must reach at --threshold.
    #[arg(long, default_value_t = neardup_core::DEFAULT_RECALL_TARGET, help_heading = "Pipeline")]
    pub recall_target: f64,
    /// Signature scheme: `oph` (one-permutation hashing with optimal
    /// densification: one hash per feature) or `minhash` (classic: one hash
    /// per feature and signature value, ~5x slower to sign; the earlier
    /// default), or `simhash` (64-bit SimHash; candidates are the items
    /// within Hamming distance --bands − 1, 3 by default: near-exact
    /// copies only). Recall against the exact oracle:
    /// bench/results/accuracy.md.
    #[arg(long, default_value = "oph", help_heading = "Pipeline")]
    pub signature: String,
    /// Seed of every hash; changing it changes every fingerprint.
    #[arg(long, default_value_t = neardup_core::DEFAULT_SEED, help_heading = "Pipeline")]
    pub seed: u64,
    /// Most candidates verified per item (more is reported, never dropped silently).
    #[arg(long, default_value_t = 100, help_heading = "Limits")]
    pub max_candidates: u32,
    /// Most entries read from one LSH bucket per query.
    #[arg(long, default_value_t = 1000, help_heading = "Limits")]
    pub max_bucket_read: u32,
    /// Bits of each signature value kept in memory to rank candidates
    /// before the cap: 8, 16 or 32 (num_perm x bits / 8 bytes per item).
    #[arg(long, default_value_t = 8, help_heading = "Limits")]
    pub rank_bits: u32,
    /// Most shingles per item; larger items are matched by exact hash only (reported).
    #[arg(long, default_value_t = 1_000_000, help_heading = "Limits")]
    pub max_shingles: u32,
    /// Bits per key of a membership screen in front of each LSH table
    /// (0: none). It changes no result, and with the tables in memory it
    /// saves no time (bench/results/kernels.md, "Membership screen").
    #[arg(long, default_value_t = 0, help_heading = "Limits")]
    pub screen_bits: u32,
}

impl PipelineArgs {
    pub fn config(&self) -> anyhow::Result<Config> {
        let signature = SignatureScheme::from_name(&self.signature)?;
        Ok(Config {
            normalizer: Normalizer::from_name(&self.normalizer)?,
            shingle_kind: if self.char_shingles { ShingleKind::Char } else { ShingleKind::Word },
            shingle_width: self.shingle_width,
            signature,
            num_perm: self.num_perm.unwrap_or(signature.default_num_perm()),
            bands: self.bands,
            rows: self.rows,
            seed: self.seed,
            threshold: self.threshold,
            recall_target: self.recall_target,
            max_shingles: self.max_shingles,
            max_candidates: self.max_candidates,
            max_bucket_read: self.max_bucket_read,
            rank_bits: self.rank_bits,
            screen_bits: self.screen_bits,
            ..Config::default()
        })
    }
}

/// Where records come from.
#[derive(Debug, Clone, Args)]
pub struct InputArgs {
    /// Inputs, read in the order given as one dataset: JSONL files (one
    /// object per line, plain or compressed with zstd or gzip) and Parquet
    /// files, each recognised by its content; a folder stands for its files
    /// (recursively, sorted by path, hidden names skipped); a quoted glob
    /// pattern (`'shards/*.parquet'`) for the files it matches, sorted;
    /// `-` reads standard input (JSONL). `s3://bucket/key`, a prefix
    /// (`s3://bucket/shards/`) or a glob (`'s3://bucket/shards/*.parquet'`)
    /// reads objects from an S3-compatible store, in key order (see
    /// --s3-endpoint).
    #[arg(default_value = "-", num_args = 1..)]
    pub inputs: Vec<String>,
    /// The S3-compatible store of `s3://` inputs (default: the environment's
    /// AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL or AWS_ENDPOINT, else AWS).
    /// Credentials come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
    /// AWS_SESSION_TOKEN, the region from AWS_REGION (default us-east-1).
    #[arg(long, value_name = "URL", help_heading = "Input")]
    pub s3_endpoint: Option<String>,
    /// Field (or Parquet column) holding the text; a dotted path reaches
    /// into nested objects and struct columns (`meta.body`).
    #[arg(long, default_value = neardup_batch::chunk::DEFAULT_TEXT_FIELD, help_heading = "Input")]
    pub text_field: String,
    /// Field (or Parquet column, of any type) holding the item id (string
    /// or integer; a dotted path reaches into nested objects); records without it are named by their line
    /// number (`FILE:LINE` when a run reads several inputs).
    #[arg(long, default_value = neardup_batch::chunk::DEFAULT_ID_FIELD, help_heading = "Input")]
    pub id_field: String,
    /// Longest accepted line (or Parquet text); longer ones are skipped
    /// and reported.
    #[arg(long, default_value_t = neardup_batch::chunk::DEFAULT_MAX_LINE, help_heading = "Input")]
    pub max_line_bytes: usize,
    /// Worker threads (default: all cores).
    ///
    /// They parse, fingerprint and verify. A reader thread and the thread
    /// that keeps the index and the results run beside them, so where a
    /// core is free `--threads 1` uses a little more than one (~1.1); to
    /// confine a run to one core, start it under `taskset -c 0`.
    #[arg(long, help_heading = "Input")]
    pub threads: Option<usize>,
    /// Read plain JSONL files through a buffer instead of mapping them into
    /// memory (the default).
    ///
    /// Mapped, a file's lines are read in place, with no copy, and the
    /// pages of each chunk are given back once it is done. A mapped file is
    /// read as long as it was when the run opened it, and must not change
    /// while the run reads it (copy a file that may): if it shrinks, or
    /// the disk under it fails, the run cannot go on from where it was,
    /// and on Linux ends with an error (status 1) that says so, its
    /// outputs incomplete (elsewhere, with a bus error). Through a buffer,
    /// a read error names its file. Standard
    /// input, pipes, compressed files and files on network or user-space
    /// file systems (NFS, SMB, FUSE, ...) are always read through a buffer.
    #[arg(long, help_heading = "Input")]
    pub no_mmap: bool,
}

impl InputArgs {
    /// The run's inputs, expanded ([`crate::input::expand`]).
    pub fn expand(&self) -> anyhow::Result<Vec<crate::chunk::Input>> {
        if let Some(endpoint) = &self.s3_endpoint {
            crate::remote::set_endpoint(endpoint);
        }
        crate::input::expand(&self.inputs)
    }

    /// How to read the inputs when no row is written out.
    pub fn read_options(&self) -> crate::chunk::ReadOptions {
        crate::chunk::ReadOptions {
            max_line: self.max_line_bytes,
            text_field: self.text_field.clone(),
            id_field: self.id_field.clone(),
            key_field: None,
            all_columns: false,
            mmap: !self.no_mmap,
        }
    }
}
