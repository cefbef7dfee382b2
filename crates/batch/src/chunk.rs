//! What the readers hand the pipeline: the inputs as found, how to read
//! them, and chunks of records. Shared by the reading loop (`input.rs`)
//! and the format readers (`jsonl.rs`, `parquet_io.rs`).

/// What an input holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// JSON lines, plain or compressed with zstd or gzip.
    Jsonl,
    /// An Apache Parquet file.
    Parquet,
}

/// One input, found and recognised.
#[derive(Debug, Clone)]
pub struct Input {
    /// Its path as given or found (`-` for standard input).
    pub name: String,
    pub kind: Kind,
    /// Its size on disk (unknown for standard input, pipes and FIFOs:
    /// what has none can be read only once).
    pub size: Option<u64>,
}

/// The longest line (or Parquet text) read by default: 256 MiB.
pub const DEFAULT_MAX_LINE: usize = 256 << 20;
/// The field or column holding the text, by default.
pub const DEFAULT_TEXT_FIELD: &str = "text";
/// The field or column holding the id, by default.
pub const DEFAULT_ID_FIELD: &str = "id";

/// How records are read.
#[derive(Debug, Clone)]
pub struct ReadOptions {
    /// Longest accepted JSONL line or Parquet text; longer ones are
    /// skipped and reported.
    pub max_line: usize,
    pub text_field: String,
    pub id_field: String,
    /// The field or column the keeper policy reads (`--keep max:FIELD`).
    pub key_field: Option<String>,
    /// Read every Parquet column (to write the rows out), not only the
    /// text and id.
    pub all_columns: bool,
    /// Map plain JSONL files into memory instead of reading them through a
    /// buffer (`crate::jsonl::Mapped`).
    pub mmap: bool,
}

impl Default for ReadOptions {
    /// `neardup dedup`'s defaults: the `text` and `id` fields, lines up to
    /// 256 MiB, plain files mapped, only the text and id columns read.
    fn default() -> Self {
        ReadOptions {
            max_line: DEFAULT_MAX_LINE,
            text_field: DEFAULT_TEXT_FIELD.to_owned(),
            id_field: DEFAULT_ID_FIELD.to_owned(),
            key_field: None,
            all_columns: false,
            mmap: true,
        }
    }
}

/// Records read together, all from one input.
#[derive(Debug)]
pub struct Chunk {
    pub lines: Vec<crate::jsonl::Line>,
    pub rejects: Vec<crate::jsonl::Reject>,
    /// The Parquet rows the lines came from (a line's `Body::Row` gives its
    /// position here).
    pub rows: Option<arrow_array::RecordBatch>,
    /// Index of its input in the run's inputs.
    pub input: usize,
    /// Bytes of the inputs' files this chunk accounts for (progress).
    pub progress: u64,
}
