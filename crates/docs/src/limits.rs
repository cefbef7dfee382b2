//! Resource limits applied while reading and parsing untrusted documents.
//!
//! Every limit is checked before the memory it guards is allocated: the file
//! size from metadata before reading, declared zip entry sizes before
//! inflating (and actual sizes while inflating, since declarations can lie).

/// Limits for parsing one document. Construct with [`Limits::default`] and
/// override fields as needed.
///
/// ```
/// let mut limits = neardup_docs::Limits::default();
/// limits.max_file_bytes = 1 << 20;
/// assert_eq!(limits.max_file_bytes, 1_048_576);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Largest input file accepted, in bytes (default 256 MiB).
    pub max_file_bytes: u64,
    /// Largest total decompressed size of the entries read from a DOCX
    /// archive, or of the Flate streams of a PDF that text extraction reads,
    /// in bytes (default 512 MiB).
    pub max_decompressed_bytes: u64,
    /// Largest ratio of decompressed to compressed size for an archive, or
    /// for a PDF's Flate streams against the file (default 100). Only enforced once the decompressed size passes
    /// [`Limits::ratio_check_min_bytes`], since small XML parts routinely
    /// compress very well.
    pub max_compression_ratio: u64,
    /// Decompressed size from which the ratio check applies (default 1 MiB).
    pub ratio_check_min_bytes: u64,
    /// Largest total decoded size of a PDF's streams that text extraction
    /// may read (every stream but images: Flate streams inflated, the
    /// others as stored), in bytes (default 64 MiB). Extraction holds
    /// tens of times this in memory while it parses content, so this, not
    /// the compression ratio, is what bounds a PDF's memory: padding a file
    /// lowers its ratio but not its decoded size.
    pub max_pdf_stream_bytes: u64,
    /// Most entries a DOCX archive may have (default 10 000).
    pub max_archive_entries: usize,
    /// Largest extracted text accepted, in bytes of UTF-8 (default 64 MiB).
    pub max_text_bytes: usize,
    /// Longest time one document may take to parse (default 60 s). A file
    /// over it is reported and skipped while the scan goes on; its parser
    /// thread is left to finish or to end with the process.
    pub parse_timeout: std::time::Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_file_bytes: 256 << 20,
            max_decompressed_bytes: 512 << 20,
            max_compression_ratio: 100,
            ratio_check_min_bytes: 1 << 20,
            max_pdf_stream_bytes: 64 << 20,
            max_archive_entries: 10_000,
            max_text_bytes: 64 << 20,
            parse_timeout: std::time::Duration::from_secs(60),
        }
    }
}
