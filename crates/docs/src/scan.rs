//! `neardup scan`: the batch pipeline of the seed, in its three phases.
//!
//! 1. **Parse.** Discover the files, read each one through the
//!    [`ParseCache`] (parsers run only on bytes not seen before). A file that
//!    is unsupported, broken or over a limit is reported in
//!    [`ScanSummary::skipped`] with its reason; the batch goes on.
//! 2. **Fingerprint.** A separate pass over the new documents: core MinHash
//!    fingerprints (normalized-text hash, shingle features), the MinHash
//!    index of every document (which finds the boilerplate) and, when the
//!    embedding matcher runs, one mean-pooled embedding per document of its
//!    text without its boilerplate. Embeddings already in the store for the
//!    same text embedded and model are reused, so a re-scan re-embeds only
//!    what new documents turned into boilerplate.
//! 3. **Compare.** One pass: each new document against every stored one and
//!    the rest of the batch (see [`crate::compare`]).
//!
//! The store's version stamp covers every setting that changes fingerprints
//! or verdicts. When it differs from the running configuration — or a stored
//! file's bytes changed — the whole store is rebuilt: texts come from the
//! parse cache (no parser runs), fingerprints and comparisons are redone.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use neardup_core::ContentHash;
use neardup_core::{Fingerprint, Fingerprinter, StoredFingerprint, Verdict};
use rayon::prelude::*;
use serde::Serialize;

use crate::boilerplate::{embedding_key, without_boilerplate};
use crate::cache::ParseCache;
use crate::calibrate::Calibration;
use crate::compare::{compare, Calibrations, Matchers, MinhashIndex};
use crate::config::ScanSettings;
use crate::embed::{embed_documents, embedder_from_model, Embedder, ProviderConfig};
use crate::error::Error;
use crate::ingest::parse_file;
use crate::parse::{ParsedDoc, PARSER_VERSION};
use crate::progress::{Phase, Progress};
use crate::slug::Slugs;
use crate::store::{Store, StoredDoc, STORE_FORMAT_VERSION};
use crate::walk::{discover, DiscoverOptions};

/// Everything a scan needs besides the paths.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ScanOptions {
    /// Validated configuration.
    pub settings: ScanSettings,
    /// State folder (default `./.neardup`): `cache/` and `dedup/` live here.
    pub state_root: PathBuf,
    /// Embedding provider settings (URLs, key, timeouts).
    pub provider: ProviderConfig,
    /// How folders are walked.
    pub discover: DiscoverOptions,
}

impl ScanOptions {
    /// Options with provider settings from the environment and default
    /// discovery.
    pub fn new(settings: ScanSettings, state_root: impl Into<PathBuf>) -> ScanOptions {
        ScanOptions {
            settings,
            state_root: state_root.into(),
            provider: ProviderConfig::from_env(),
            discover: DiscoverOptions::default(),
        }
    }
}

/// A file that was not scanned, and why.
#[derive(Clone, Debug, Serialize)]
pub struct Skipped {
    /// The file (or path given).
    pub path: PathBuf,
    /// One-line reason.
    pub reason: String,
}

/// Seconds spent per phase.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Timings {
    /// Discovery and parsing.
    pub parse_s: f64,
    /// Fingerprints and embeddings (including loading stored ones).
    pub fingerprint_s: f64,
    /// The comparison pass.
    pub compare_s: f64,
    /// Writing the store.
    pub save_s: f64,
}

/// Verdict counts.
#[derive(Clone, Debug, Default, Serialize)]
pub struct VerdictCounts {
    /// Identical documents.
    pub identical: usize,
    /// Similar documents.
    pub similar: usize,
    /// Different documents.
    pub different: usize,
}

impl VerdictCounts {
    fn add(&mut self, v: Verdict) {
        match v {
            Verdict::Identical => self.identical += 1,
            Verdict::Similar => self.similar += 1,
            Verdict::Different => self.different += 1,
        }
    }
}

/// What a scan did.
#[derive(Clone, Debug, Default, Serialize)]
#[non_exhaustive]
pub struct ScanSummary {
    /// The store file written.
    pub store: PathBuf,
    /// Files found.
    pub discovered: usize,
    /// Files whose parser ran (cache misses).
    pub parsed: usize,
    /// Files read back from the parse cache.
    pub cache_hits: usize,
    /// Files already in the store with the same bytes (not compared again).
    pub unchanged: usize,
    /// New documents compared in this scan (N).
    pub new_documents: usize,
    /// Stored documents they were compared against (M).
    pub stored_documents: usize,
    /// Why the store was rebuilt, when it was.
    pub rebuilt: Option<String>,
    /// Stored documents whose text came back from the parse cache in a rebuild.
    pub rebuilt_from_cache: usize,
    /// Stored documents that had to be re-parsed in a rebuild (cache lost).
    pub reparsed_for_rebuild: usize,
    /// Stored documents dropped in a rebuild (neither cache nor file left).
    pub dropped: Vec<String>,
    /// Embeddings computed.
    pub embedded: usize,
    /// Embeddings reused from the store (same bytes or same normalized
    /// text, same boilerplate left out, same model and chunking) or from an
    /// earlier document of the batch that embeds the same text.
    pub embeddings_reused: usize,
    /// Documents whose embedding left their boilerplate out (text that
    /// many unrelated documents of the scan share; docs/scan.md).
    pub embedded_without_boilerplate: usize,
    /// Chunks embedded (at most `max_chunks` per document).
    pub embedded_chunks: u64,
    /// Model input tokens embedded, when the provider counts them.
    pub embedded_tokens: Option<u64>,
    /// Seconds spent computing embeddings (part of the fingerprint phase).
    pub embedding_s: f64,
    /// The calibrations in force: MinHash, and the embedding model's.
    pub calibration: CalibrationSummary,
    /// The matchers that ran.
    pub matchers: String,
    /// Comparisons made (see [`ScanSummary::comparison_rule`]).
    pub comparisons: u64,
    /// `all-pairs` (N×M + N×(N−1)÷2) or `lsh-verified` (MinHash alone:
    /// only LSH candidates are compared, each by exact Jaccard).
    pub comparison_rule: &'static str,
    /// Slugs of earlier documents whose closest match a new one replaced.
    pub back_updated: Vec<String>,
    /// Verdicts of the new documents.
    pub verdicts: VerdictCounts,
    /// Files not scanned.
    pub skipped: Vec<Skipped>,
    /// Notes about the configuration.
    pub notes: Vec<String>,
    /// Time per phase.
    pub timings: Timings,
}

/// The score maps a scan used (see [`crate::calibrate`]).
#[derive(Clone, Debug, Default, Serialize)]
pub struct CalibrationSummary {
    /// The MinHash map, `none` for the raw Jaccard.
    pub minhash: String,
    /// The embedding map, `none` for the raw cosine; absent without a model.
    pub embedding: Option<String>,
}

/// A document entering the comparison pass.
struct Member {
    slug: Option<String>,
    path: String,
    doc: ParsedDoc,
}

/// The stamp over every setting that changes fingerprints or verdicts:
/// `(inputs, sha256(inputs))`.
pub fn stamp(
    settings: &ScanSettings,
    model_id: Option<&str>,
    embedding_calibration: Option<&Calibration>,
) -> (String, String) {
    let inputs = format!(
        "store=v{STORE_FORMAT_VERSION};parser=v{PARSER_VERSION};enabled={};matchers={};model={};\
         minhash_lsh_threshold={};core={};chunk_words={};max_chunks={};threshold_identical={};\
         threshold_similar={};minhash_calibration={};embedding_calibration={};boilerplate={}",
        settings.enabled,
        settings.matchers_label(),
        model_id.unwrap_or("none"),
        settings.minhash_lsh_threshold,
        settings.params.fingerprint_version(),
        settings.chunk_words,
        settings.max_chunks,
        settings.threshold_identical,
        settings.threshold_similar,
        settings.minhash_calibration,
        embedding_calibration.map_or("none".to_owned(), Calibration::to_string),
        // The discount's version: its rules and constants (boilerplate.rs).
        if settings.boilerplate_weighting { "groups-v2" } else { "off" },
    );
    let hash = crate::parse::sha256_hex(inputs.as_bytes());
    (inputs, hash)
}

/// Scans `paths` (files and folders) into the store under
/// `options.state_root`, and returns what happened.
///
/// Errors are environment problems (an unwritable cache, an unreachable
/// embedding provider, a damaged store); document problems never fail the
/// scan and are listed in [`ScanSummary::skipped`].
pub fn scan<P: AsRef<Path>>(paths: &[P], options: &ScanOptions, progress: &dyn Progress) -> Result<ScanSummary, Error> {
    let settings = &options.settings;
    let store_path = Store::path_in(&options.state_root);
    let old = Store::load(&store_path)?.unwrap_or_default();
    let cache = ParseCache::open(options.state_root.join("cache"))?;
    let embedder = match (&settings.model, settings.enabled) {
        (Some(model), true) => embedder_from_model(model, &options.provider)?,
        _ => None,
    };
    let model_id = embedder.as_ref().map(|e| e.model_id());
    let mut notes = settings.notes.clone();
    let embedding_calibration = model_id.as_deref().map(|id| {
        let (c, note) = settings.embedding_calibration_for(id);
        notes.extend(note);
        c
    });
    let (stamp_inputs, stamp_hash) = stamp(settings, model_id.as_deref(), embedding_calibration.as_ref());
    let calibrations = Calibrations {
        minhash: settings.minhash_calibration.clone(),
        embedding: embedding_calibration.clone().unwrap_or_else(Calibration::identity),
    };
    let mut summary = ScanSummary {
        store: store_path.clone(),
        matchers: if settings.enabled { settings.matchers_label().to_owned() } else { "none".to_owned() },
        comparison_rule: if embedder.is_some() { "all-pairs" } else { "lsh-verified" },
        notes,
        calibration: CalibrationSummary {
            minhash: settings.minhash_calibration.to_string(),
            embedding: embedding_calibration.as_ref().map(Calibration::to_string),
        },
        ..ScanSummary::default()
    };

    let started = Instant::now();
    let parsed = parse_phase(paths, options, &cache, progress, &mut summary)?;
    // The embedding matcher leaves out boilerplate, which the MinHash index
    // of the whole scan finds: new documents can turn a stored document's
    // text into boilerplate, and then its stored embedding is stale.
    let strips = embedder.is_some() && settings.minhash && settings.boilerplate_weighting;
    // (Only a scan that keeps stored documents as they are can need it:
    // another rebuilds them all anyway.)
    let again = (strips && !old.documents.is_empty() && old.stamp == stamp_hash).then(|| parsed.clone());
    let select = Select { old: &old, stamp_hash: &stamp_hash, stamp_inputs: &stamp_inputs, options, cache: &cache };
    let (mut base, mut members) = select_members(&select, parsed, None, &mut summary)?;
    summary.timings.parse_s = started.elapsed().as_secs_f64();

    let started = Instant::now();
    let index = |fps: Vec<Fingerprint>, m: usize| {
        MinhashIndex::build(fps, m, &settings.params, settings.minhash, settings.boilerplate_weighting)
    };
    let fps = fingerprint_phase(&base, &mut members, settings, embedder.is_none(), progress)?;
    let mut tokens: Vec<u32> = fps.iter().map(|f| f.tokens).collect();
    let mut minhash = index(fps, base.len())?;
    if let Some(parsed) = again {
        let stale = stale_embeddings(&base, &minhash, &cache, settings);
        if stale > 0 {
            let why = format!("new documents changed the boilerplate of {stale} stored documents' embeddings");
            (base, members) = select_members(&select, parsed, Some(why), &mut summary)?;
            let fps = fingerprint_phase(&base, &mut members, settings, false, progress)?;
            tokens = fps.iter().map(|f| f.tokens).collect();
            minhash = index(fps, base.len())?;
        }
    }
    let vectors = match (embedder.as_deref(), model_id.as_deref()) {
        (Some(e), Some(id)) => {
            let started = Instant::now();
            let tokens_before = e.tokens_embedded();
            let input = EmbedInput { members: &members, minhash: &minhash, base: base.len() };
            let v = embed_members(e, id, &input, &old, settings, progress, &mut summary)?;
            summary.embedding_s = started.elapsed().as_secs_f64();
            summary.embedded_tokens = e.tokens_embedded().zip(tokens_before).map(|(a, b)| a - b);
            v.into_iter().map(|(v, key)| (Some(v), Some(key))).collect()
        }
        _ => vec![(None, None); members.len()],
    };
    progress.finish(Phase::Fingerprint);
    let docs = assemble(base, &members, &minhash, &tokens, vectors, model_id.as_deref(), settings);
    summary.timings.fingerprint_s = started.elapsed().as_secs_f64();

    let started = Instant::now();
    let docs = compare_phase(
        docs,
        &minhash,
        summary.stored_documents,
        settings,
        &calibrations,
        embedder.is_some(),
        progress,
        &mut summary,
    )?;
    summary.timings.compare_s = started.elapsed().as_secs_f64();

    let started = Instant::now();
    let store = Store { stamp: stamp_hash, stamp_inputs, documents: docs };
    store.save(&store_path)?;
    summary.timings.save_s = started.elapsed().as_secs_f64();
    Ok(summary)
}

/// Phase 1: discovers and parses every file (through the cache). Document
/// problems are listed as skipped; environment problems end the scan.
fn parse_phase<P: AsRef<Path>>(
    paths: &[P],
    options: &ScanOptions,
    cache: &ParseCache,
    progress: &dyn Progress,
    summary: &mut ScanSummary,
) -> Result<Vec<(String, ParsedDoc)>, Error> {
    let files = discover_files(paths, options, summary);
    progress.start(Phase::Parse, files.len() as u64);
    let outcomes: Vec<_> = files
        .par_iter()
        .map(|(path, canonical)| {
            let outcome = parse_file(path, &options.settings.limits, cache);
            progress.advance(Phase::Parse, 1);
            (path, canonical, outcome)
        })
        .collect();
    progress.finish(Phase::Parse);
    let mut parsed = Vec::new();
    for (path, canonical, outcome) in outcomes {
        match outcome {
            Ok(o) => {
                if o.cache_hit {
                    summary.cache_hits += 1;
                } else {
                    summary.parsed += 1;
                }
                parsed.push((canonical.clone(), o.doc));
            }
            Err(e) if e.is_document_error() => {
                let reason = without_path(&e);
                summary.skipped.push(Skipped { path: path.clone(), reason });
            }
            Err(e) => return Err(e),
        }
    }
    Ok(parsed)
}

/// What [`select_members`] reads besides the parsed files.
#[derive(Clone, Copy)]
struct Select<'a> {
    old: &'a Store,
    stamp_hash: &'a str,
    stamp_inputs: &'a str,
    options: &'a ScanOptions,
    cache: &'a ParseCache,
}

/// Which documents are compared in this scan, and against which stored
/// ones: the stored documents that stay as they are (`base`) and the
/// members of the comparison pass. When the store's stamp differs from the
/// configuration, or a stored file changed, every stored document is
/// rebuilt (its text from the parse cache) and `base` is empty; so it is
/// when `force_rebuild` says why.
fn select_members(
    select: &Select<'_>,
    parsed: Vec<(String, ParsedDoc)>,
    force_rebuild: Option<String>,
    summary: &mut ScanSummary,
) -> Result<(Vec<StoredDoc>, Vec<Member>), Error> {
    let Select { old, stamp_hash, stamp_inputs, options, cache } = *select;
    // A second selection (a forced rebuild) counts from scratch.
    summary.unchanged = 0;
    summary.rebuilt_from_cache = 0;
    summary.reparsed_for_rebuild = 0;
    summary.dropped.clear();
    let by_path: HashMap<&str, &StoredDoc> = old.documents.iter().map(|d| (d.path.as_str(), d)).collect();
    let changed: Vec<&str> = parsed
        .iter()
        .filter(|(p, doc)| by_path.get(p.as_str()).is_some_and(|d| d.sha256 != doc.sha256))
        .map(|(p, _)| p.as_str())
        .collect();
    let rebuild = if old.documents.is_empty() {
        None
    } else if force_rebuild.is_some() {
        force_rebuild
    } else if old.stamp != stamp_hash {
        Some(format!("configuration changed (was: {}; now: {stamp_inputs})", old.stamp_inputs))
    } else {
        changed.first().map(|p| format!("{p} changed since it was scanned"))
    };
    let mut base: Vec<StoredDoc> = Vec::new();
    let mut members: Vec<Member> = Vec::new();
    let mut now: HashMap<String, ParsedDoc> = parsed.iter().cloned().collect();
    if rebuild.is_some() {
        for d in &old.documents {
            let doc = match now.remove(&d.path) {
                Some(doc) => {
                    summary.rebuilt_from_cache += 1;
                    doc
                }
                None => match cache.get(&d.sha256)? {
                    Some(doc) => {
                        summary.rebuilt_from_cache += 1;
                        doc
                    }
                    None => match parse_file(Path::new(&d.path), &options.settings.limits, cache) {
                        Ok(o) => {
                            summary.reparsed_for_rebuild += 1;
                            o.doc
                        }
                        Err(e) => {
                            summary.dropped.push(format!("{}: {}", d.slug, without_path(&e)));
                            continue;
                        }
                    },
                },
            };
            members.push(Member { slug: Some(d.slug.clone()), path: d.path.clone(), doc });
        }
    } else {
        base = old.documents.clone();
    }
    for (path, doc) in parsed {
        if !now.contains_key(&path) {
            continue; // consumed by the rebuild
        }
        if by_path.get(path.as_str()).is_some_and(|d| d.sha256 == doc.sha256) && rebuild.is_none() {
            summary.unchanged += 1;
            continue;
        }
        now.remove(&path);
        members.push(Member { slug: None, path, doc });
    }
    summary.rebuilt = rebuild;
    summary.stored_documents = base.len();
    summary.new_documents = members.len();
    Ok((base, members))
}

/// Phase 2a: slugs and MinHash fingerprints of the members; stored
/// documents re-enter from their stored features. Returns the fingerprint
/// of every document, `base` first. `done` moves the progress bar per
/// member (without a model, whose embeddings move it otherwise).
fn fingerprint_phase(
    base: &[StoredDoc],
    members: &mut [Member],
    settings: &ScanSettings,
    done: bool,
    progress: &dyn Progress,
) -> Result<Vec<Fingerprint>, Error> {
    let mut slugs = Slugs::new(base.iter().map(|d| d.slug.as_str()));
    for m in members.iter() {
        if let Some(s) = &m.slug {
            slugs.reserve(s);
        }
    }
    for m in members.iter_mut() {
        if m.slug.is_none() {
            m.slug = Some(slugs.assign(m.doc.title.as_deref(), Path::new(&m.path)));
        }
    }
    let fingerprinter = Fingerprinter::new(settings.params.clone())
        .map_err(|e| Error::config(format!("fingerprint parameters: {e}")))?;
    progress.start(Phase::Fingerprint, members.len() as u64);
    let mut fps: Vec<Fingerprint> =
        base.iter().map(|d| stored_fingerprint(d, &fingerprinter)).collect::<Result<_, _>>()?;
    fps.par_extend(members.par_iter().map_init(
        || fingerprinter.clone(),
        |f, m| {
            let fp = f.fingerprint(&m.doc.text);
            if done {
                progress.advance(Phase::Fingerprint, 1);
            }
            fp
        },
    ));
    Ok(fps)
}

/// Stored documents whose stored embedding is not of the text they would
/// embed now (the boilerplate [`MinhashIndex`] finds left out). A document
/// with boilerplate is read back from the parse cache to tell; one whose
/// text the cache no longer holds keeps its embedding (it cannot be made
/// again, and a rebuild would drop the document).
fn stale_embeddings(base: &[StoredDoc], minhash: &MinhashIndex, cache: &ParseCache, settings: &ScanSettings) -> usize {
    let config = settings.params.config();
    base.iter()
        .enumerate()
        .filter(|(i, d)| {
            if d.embedding.is_none() {
                return false;
            }
            let stored = d.embedding_key.as_deref().unwrap_or(&d.content_hash);
            let strip = minhash.embedding_strip(*i);
            let now = if strip.is_empty() {
                d.content_hash.clone()
            } else {
                match cache.get(&d.sha256) {
                    Ok(Some(doc)) => {
                        embedding_key(&d.content_hash, without_boilerplate(&doc.text, config, &strip).as_deref())
                    }
                    _ => return false,
                }
            };
            stored != now
        })
        .count()
}

/// Every document of the comparison pass: `base`, then the members with
/// their fingerprints (in `minhash`, with `tokens`, `base` first) and
/// embeddings.
fn assemble(
    base: Vec<StoredDoc>,
    members: &[Member],
    minhash: &MinhashIndex,
    tokens: &[u32],
    vectors: Vec<(Option<Vec<f32>>, Option<String>)>,
    model_id: Option<&str>,
    settings: &ScanSettings,
) -> Vec<StoredDoc> {
    let first = base.len();
    let mut docs = base;
    docs.reserve(members.len());
    for (k, (m, (vector, key))) in members.iter().zip(vectors).enumerate() {
        let content_hash = minhash.content_hash(first + k).to_hex();
        docs.push(StoredDoc {
            verdict: Verdict::Different,
            closest_match: None,
            closest_score: None,
            closest_method: None,
            embedding_score: None,
            minhash_score: None,
            embedding_calibrated: None,
            minhash_calibrated: None,
            duplicate_of: None,
            similar_to: None,
            similar_score: None,
            slug: m.slug.clone().unwrap_or_default(),
            path: m.path.clone(),
            sha256: m.doc.sha256.clone(),
            format: m.doc.format,
            title: m.doc.title.clone(),
            bytes: m.doc.bytes,
            tokens: tokens[first + k],
            features: if settings.minhash { minhash.features(first + k).to_vec() } else { Vec::new() },
            embedding_model: vector.as_ref().and(model_id.map(str::to_string)),
            embedding: vector,
            // Only a key that differs from the content hash is written.
            embedding_key: key.filter(|k| *k != content_hash),
            content_hash,
        });
    }
    docs
}

/// Phase 3: the comparison pass over `docs[m..]` (see [`crate::compare`]),
/// and the verdict counts of the new documents.
#[allow(clippy::too_many_arguments)]
fn compare_phase(
    mut docs: Vec<StoredDoc>,
    minhash: &MinhashIndex,
    m: usize,
    settings: &ScanSettings,
    calibrations: &Calibrations,
    embedding: bool,
    progress: &dyn Progress,
    summary: &mut ScanSummary,
) -> Result<Vec<StoredDoc>, Error> {
    if settings.enabled {
        let matchers = Matchers { policy: &settings.policy, calibrations, minhash: settings.minhash, embedding };
        let stats = compare(&mut docs, minhash, m, &matchers, progress)?;
        summary.comparisons = stats.comparisons;
        summary.back_updated = stats.back_updated.iter().filter(|&&j| j < m).map(|&j| docs[j].slug.clone()).collect();
    }
    for d in &docs[m..] {
        summary.verdicts.add(d.verdict);
    }
    Ok(docs)
}

/// Discovers files, canonicalises their paths (the store's identity of a
/// document), drops duplicates and anything inside the state folder.
fn discover_files<P: AsRef<Path>>(
    paths: &[P],
    options: &ScanOptions,
    summary: &mut ScanSummary,
) -> Vec<(PathBuf, String)> {
    let found = discover(paths, &options.discover);
    for e in &found.errors {
        let path = e.path().map(Path::to_path_buf).unwrap_or_default();
        summary.skipped.push(Skipped { path, reason: without_path(e) });
    }
    let state = std::fs::canonicalize(&options.state_root).ok();
    let mut seen = HashSet::new();
    let mut files = Vec::new();
    for path in found.files {
        let canonical = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        if state.as_ref().is_some_and(|s| canonical.starts_with(s)) {
            continue;
        }
        let key = canonical.to_string_lossy().into_owned();
        if seen.insert(key.clone()) {
            files.push((path, key));
        }
    }
    summary.discovered = files.len();
    files
}

/// Documents embedded per call of [`embed_documents`]: their chunks share
/// batches; the progress bar moves after each group.
const EMBED_GROUP: usize = 64;

/// What [`embed_members`] embeds: the members, their fingerprints, and
/// the scan's MinHash index (member `k` is its document `base + k`).
struct EmbedInput<'a> {
    members: &'a [Member],
    minhash: &'a MinhashIndex,
    base: usize,
}

/// The embedding of every member, in order, with its key (what it is of:
/// [`embedding_key`]). A member embeds its text without the boilerplate
/// the MinHash index finds ([`without_boilerplate`]). An embedding is
/// reused, not recomputed, when the store has one from the same model and
/// chunking with the same key (or, for a whole text, the same bytes), or
/// when an earlier member has the same key; the rest are embedded
/// together, [`EMBED_GROUP`] documents at a time.
fn embed_members(
    embedder: &dyn Embedder,
    model_id: &str,
    input: &EmbedInput<'_>,
    old: &Store,
    settings: &ScanSettings,
    progress: &dyn Progress,
    summary: &mut ScanSummary,
) -> Result<Vec<(Vec<f32>, String)>, Error> {
    let members = input.members;
    // The old store's embeddings are reusable only under the same chunking
    // (its stamp names it; a store without the setting predates it).
    let same_chunking = old.stamp_inputs.contains(&format!(";chunk_words={};", settings.chunk_words))
        && old.stamp_inputs.contains(&format!(";max_chunks={};", settings.max_chunks));
    let mut by_sha: HashMap<&str, &Vec<f32>> = HashMap::new();
    let mut by_key: HashMap<&str, &Vec<f32>> = HashMap::new();
    if same_chunking {
        for d in &old.documents {
            if let (Some(e), Some(m)) = (&d.embedding, &d.embedding_model) {
                if m == model_id {
                    let key = d.embedding_key.as_deref().unwrap_or(&d.content_hash);
                    if key == d.content_hash {
                        by_sha.insert(d.sha256.as_str(), e);
                    }
                    by_key.insert(key, e);
                }
            }
        }
    }
    let config = settings.params.config();
    let hashes: Vec<String> = (0..members.len()).map(|k| input.minhash.content_hash(input.base + k).to_hex()).collect();
    // What each member embeds: its text without its boilerplate, or whole.
    let stripped: Vec<Option<String>> = members
        .par_iter()
        .enumerate()
        .map(|(k, m)| without_boilerplate(&m.doc.text, config, &input.minhash.embedding_strip(input.base + k)))
        .collect();
    let keys: Vec<String> = hashes.iter().zip(&stripped).map(|(h, t)| embedding_key(h, t.as_deref())).collect();
    let mut out: Vec<Option<Vec<f32>>> = vec![None; members.len()];
    // Members to embed, one per key; the others copy it after.
    let mut todo: Vec<usize> = Vec::new();
    let mut first_with: HashMap<&str, usize> = HashMap::new();
    let mut copies: Vec<(usize, usize)> = Vec::new();
    for (k, m) in members.iter().enumerate() {
        let whole = keys[k] == hashes[k];
        let stored = by_key.get(keys[k].as_str()).or_else(|| match whole {
            true => by_sha.get(m.doc.sha256.as_str()),
            false => None,
        });
        if let Some(v) = stored {
            out[k] = Some((*v).clone());
            summary.embeddings_reused += 1;
            progress.advance(Phase::Fingerprint, 1);
        } else if let Some(&first) = first_with.get(keys[k].as_str()) {
            copies.push((k, first));
        } else {
            first_with.insert(keys[k].as_str(), k);
            todo.push(k);
        }
    }
    for group in todo.chunks(EMBED_GROUP) {
        summary.embedded_without_boilerplate += group.iter().filter(|&&k| stripped[k].is_some()).count();
        let texts: Vec<&str> =
            group.iter().map(|&k| stripped[k].as_deref().unwrap_or(members[k].doc.text.as_str())).collect();
        let vectors = embed_documents(embedder, &texts, settings.chunk_words, settings.max_chunks)?;
        for (&k, v) in group.iter().zip(vectors) {
            out[k] = Some(v);
        }
        summary.embedded += group.len();
        let per = settings.chunk_words.max(1);
        summary.embedded_chunks += texts
            .iter()
            .map(|t| t.split_whitespace().count().div_ceil(per).min(settings.max_chunks) as u64)
            .sum::<u64>();
        progress.advance(Phase::Fingerprint, group.len() as u64);
    }
    for (k, first) in copies {
        out[k] = out[first].clone();
        summary.embeddings_reused += 1;
        progress.advance(Phase::Fingerprint, 1);
    }
    out.into_iter()
        .zip(keys)
        .map(|(v, key)| v.map(|v| (v, key)).ok_or_else(|| Error::embedding("an embedding is missing")))
        .collect()
}

/// A stored document's fingerprint: signature and band keys are rebuilt
/// from the stored features under the current parameters (the stamp
/// guarantees they are the ones the features were made with).
fn stored_fingerprint(d: &StoredDoc, fingerprinter: &Fingerprinter) -> Result<Fingerprint, Error> {
    let bad = |what: &str| Error::store(format!("{}: {what}", d.slug));
    let content_hash =
        ContentHash::from_hex(&d.content_hash).ok_or_else(|| bad("content_hash is not 32 hex digits"))?;
    fingerprinter
        .rebuild(StoredFingerprint {
            content_hash,
            tokens: d.tokens,
            features: d.features.clone(),
            signature: None,
            degraded_shingles: None,
        })
        .map_err(|e| bad(&e.to_string()))
}

/// The reason of a document error without the path prefix (reports print
/// the path in their own column).
fn without_path(e: &Error) -> String {
    let text = e.to_string();
    match e.path() {
        Some(p) => text.strip_prefix(&format!("{}: ", p.display())).map(str::to_owned).unwrap_or(text),
        None => text,
    }
}
