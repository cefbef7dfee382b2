//! Reading JSONL records robustly: bounded line length, invalid UTF-8,
//! malformed JSON and missing fields are reported per line, never fatal and
//! never silently dropped.

use std::borrow::Cow;
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::Context;
use bytes::Bytes;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};

/// One record of input: its number in the run (1-based; a JSONL line or a
/// Parquet row) and what it holds.
#[derive(Debug)]
pub struct Line {
    pub number: u64,
    pub body: Body,
}

/// What a record holds.
#[derive(Debug)]
pub enum Body {
    /// A JSONL line's raw bytes (without the newline): a slice of a mapped
    /// file, or a copy read from a stream.
    Json(Bytes),
    /// A Parquet row, by its position in the chunk's rows, with the values
    /// of the id and text columns.
    Row { row: usize, id: Option<String>, text: String },
}

impl Line {
    /// The record's id and text.
    pub fn record(&self, text_field: &str, id_field: &str) -> Result<Record<'_>, String> {
        match &self.body {
            Body::Json(bytes) => parse_record(bytes, text_field, id_field),
            Body::Row { id, text, .. } => {
                Ok(Record { id: id.as_deref().map(Cow::Borrowed), text: Cow::Borrowed(text) })
            }
        }
    }

    /// Bytes of input the record stands for: the line, or the row's id and text.
    pub fn len(&self) -> usize {
        match &self.body {
            Body::Json(bytes) => bytes.len(),
            Body::Row { id, text, .. } => text.len() + id.as_ref().map_or(0, String::len),
        }
    }
}

/// A line that could not be read as a record.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Reject {
    /// The input it is in, when a run reads several.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Its line: in `file` when set, else in the (single) input.
    pub line: u64,
    pub reason: String,
}

impl Reject {
    /// A reject at a line of the whole run's input.
    pub fn at(line: u64, reason: String) -> Reject {
        Reject { file: None, line, reason }
    }

    /// `FILE:LINE` or `line N`, for messages.
    pub fn place(&self) -> String {
        match &self.file {
            Some(f) => format!("{f}:{}", self.line),
            None => format!("line {}", self.line),
        }
    }
}

/// Where a JSONL input's lines come from.
pub enum JsonlReader {
    /// A plain file mapped into memory: each line is a slice of the
    /// mapping, with no copy and no memory of its own (see [`map_plain`]).
    Mapped(Mapped),
    /// A stream (standard input, a compressed file, a file that cannot be
    /// mapped), read through a buffer, each line copied out.
    Stream(Box<dyn BufRead + Send>),
}

impl fmt::Debug for JsonlReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonlReader::Mapped(m) => f.debug_struct("Mapped").field("len", &m.map.len()).field("pos", &m.pos).finish(),
            JsonlReader::Stream(_) => f.write_str("Stream"),
        }
    }
}

impl JsonlReader {
    /// Opens `path` (`-`: standard input) once: mapped when it is a plain,
    /// uncompressed regular file and `mmap` allows, else read as a stream
    /// ([`open_stream`]). `read` counts the bytes of the file taken, for
    /// progress.
    pub fn open(path: &str, mmap: bool, read: Arc<AtomicU64>) -> anyhow::Result<JsonlReader> {
        if path == "-" {
            return Ok(JsonlReader::Stream(open_stream(Box::new(Counted { inner: io::stdin(), read }), path)?));
        }
        let file = File::open(path).with_context(|| format!("cannot open {path}"))?;
        if mmap {
            if let Some(map) = map_plain(&file, path)? {
                return Ok(JsonlReader::Mapped(Mapped { map: Arc::new(map), pos: 0, read }));
            }
        }
        Ok(JsonlReader::Stream(open_stream(Box::new(Counted { inner: file, read }), path)?))
    }

    /// Reads a chunk of lines into `out` (empty), up to `limits`, skipping
    /// over-long lines (reported in `rejects`) and blank ones; lines are
    /// numbered on from `next_line`. Returns false at end of input.
    pub fn read_chunk(
        &mut self,
        next_line: &mut u64,
        limits: Limits,
        out: &mut Vec<Line>,
        rejects: &mut Vec<Reject>,
    ) -> io::Result<bool> {
        match self {
            JsonlReader::Mapped(m) => Ok(m.read_chunk(next_line, limits, out, rejects)),
            JsonlReader::Stream(r) => read_chunk(r, next_line, limits, out, rejects),
        }
    }
}

/// What one chunk may hold: `records` lines or `bytes` bytes of them,
/// whichever comes first; a line longer than `max_line` is skipped.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub records: usize,
    pub bytes: usize,
    pub max_line: usize,
}

/// A plain JSONL file mapped into memory, handed out a chunk at a time.
///
/// Each chunk's lines are slices of one [`ChunkPages`], which gives its
/// pages back to the kernel (`MADV_DONTNEED`) when the chunk's last line
/// is dropped: the run's memory holds the chunks in flight, not the file
/// read so far. Reading needs no copy of the text, and no memory of the
/// process's own to copy it into: that memory was ~35 % of the page
/// faults of a run on a corpus the size of `bench/work/real.jsonl`.
///
/// The file is read as long as it was when mapped. It must not shrink
/// while it is read: on Linux, reading a page past its new end stops the
/// process with SIGBUS, as does a read error of the device under it
/// (files on network file systems are not mapped: [`on_network_fs`]).
/// `--no-mmap` reads through a buffer instead.
pub struct Mapped {
    map: Arc<memmap2::Mmap>,
    pos: usize,
    read: Arc<AtomicU64>,
}

/// Maps `file` (opened from `path`) when it is a non-empty regular file
/// that is neither compressed nor Parquet (those are read as streams);
/// `None` when it is not, or when the system will not map it.
fn map_plain(file: &File, path: &str) -> anyhow::Result<Option<memmap2::Mmap>> {
    let meta = file.metadata().with_context(|| format!("cannot read {path}"))?;
    if !meta.is_file() || meta.len() == 0 || usize::try_from(meta.len()).is_err() || on_network_fs(file) {
        return Ok(None);
    }
    // SAFETY: the mapping is read only. A file changed while it is mapped
    // is the documented hazard of mapping (see `Mapped`); neardup reads
    // its inputs front to back and never writes them.
    let Ok(map) = (unsafe { memmap2::Mmap::map(file) }) else {
        return Ok(None);
    };
    if Head::of(&map) != Head::Plain {
        return Ok(None);
    }
    // The file is read front to back: more read-ahead, and the pages
    // behind the reader go first. A hint; its failure changes nothing.
    let _ = map.advise(memmap2::Advice::Sequential);
    Ok(Some(map))
}

/// Whether `file` is on a network or user-space file system (NFS, SMB,
/// FUSE, AFS, Ceph, 9P, cluster file systems): there a read error or a
/// server that goes away is more than a remote chance, and in a mapping
/// it would stop the run with SIGBUS instead of an error that names the
/// file, so such files are read through a buffer.
#[cfg(target_os = "linux")]
fn on_network_fs(file: &File) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: `statfs` is plain data, for which all zeroes is a value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: the descriptor is open for as long as `file` is borrowed,
    // and `st` is a `statfs` the call may write.
    if unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) } != 0 {
        return false;
    }
    // The type's width differs between targets; every magic fits 32 bits.
    is_network_fs(st.f_type as u32)
}

#[cfg(not(target_os = "linux"))]
fn on_network_fs(_: &File) -> bool {
    false
}

/// [`on_network_fs`] by a `statfs` type (the magic numbers of Linux's
/// `magic.h` and the file systems' own headers).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn is_network_fs(magic: u32) -> bool {
    const NETWORK: [u32; 13] = [
        0x0000_6969, // NFS
        0x0000_517B, // SMB
        0xFF53_4D42, // CIFS
        0xFE53_4D42, // SMB2
        0x6573_5546, // FUSE
        0x5346_414F, // AFS
        0x7375_7245, // Coda
        0x0102_1997, // 9P
        0x00C3_6400, // Ceph
        0x0116_1970, // GFS2
        0x7461_636F, // OCFS2
        0x0BD0_0BD0, // Lustre
        0x4750_4653, // GPFS
    ];
    NETWORK.contains(&magic)
}

impl Mapped {
    /// [`JsonlReader::read_chunk`] over the mapping.
    fn read_chunk(
        &mut self,
        next_line: &mut u64,
        limits: Limits,
        out: &mut Vec<Line>,
        rejects: &mut Vec<Reject>,
    ) -> bool {
        let from = self.pos;
        let data: &[u8] = &self.map;
        // Lines as (line number, start, length) first: the chunk's pages
        // are one owner, made once its end is known.
        let mut spans: Vec<(u64, usize, usize)> = Vec::new();
        let mut bytes = 0usize;
        let mut more = true;
        while out.len() + spans.len() < limits.records && bytes < limits.bytes {
            let rest = &data[self.pos..];
            if rest.is_empty() {
                more = false;
                break;
            }
            let raw = memchr::memchr(b'\n', rest).map_or(rest.len(), |i| i + 1);
            let start = self.pos;
            self.pos += raw;
            *next_line += 1;
            if raw > limits.max_line.saturating_add(1) {
                rejects.push(Reject::at(*next_line, too_long(limits.max_line)));
                continue;
            }
            let Some(len) = content_len(&rest[..raw]) else { continue };
            bytes += len;
            spans.push((*next_line, start - from, len));
        }
        self.read.store(self.pos as u64, Ordering::Relaxed);
        let pages = Bytes::from_owner(ChunkPages { map: Arc::clone(&self.map), range: from..self.pos });
        out.extend(
            spans.into_iter().map(|(number, at, len)| Line { number, body: Body::Json(pages.slice(at..at + len)) }),
        );
        more
    }
}

/// Pages are given back in whole blocks of this many bytes: a multiple of
/// every page size in use (4, 16 and 64 KiB), so the blocks start on a page.
const RELEASE_ALIGN: usize = 64 << 10;

/// One chunk's part of a mapped file; its whole pages go back to the
/// kernel when it is dropped (after the chunk's last line).
struct ChunkPages {
    map: Arc<memmap2::Mmap>,
    range: std::ops::Range<usize>,
}

impl AsRef<[u8]> for ChunkPages {
    fn as_ref(&self) -> &[u8] {
        &self.map[self.range.clone()]
    }
}

impl Drop for ChunkPages {
    fn drop(&mut self) {
        // From the block the range starts in to the block it ends in (to
        // the file's end for the last chunk): the block a chunk ends in is
        // given back by the next chunk, and a block given back while a
        // neighbour still reads it is mapped again on that read.
        #[cfg(unix)]
        {
            let start = self.range.start / RELEASE_ALIGN * RELEASE_ALIGN;
            let end = if self.range.end == self.map.len() {
                self.range.end
            } else {
                self.range.end / RELEASE_ALIGN * RELEASE_ALIGN
            };
            if end > start {
                // SAFETY: the mapping is a read-only shared mapping of a
                // file: giving pages back only drops them from this
                // process's page tables, and any later read of them —
                // by a line of this chunk (none is left) or of the one
                // beside it — maps the file's pages again, with the same
                // bytes.
                let _ =
                    unsafe { self.map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start) };
            }
        }
    }
}

/// Why an over-long line was skipped.
fn too_long(max_line: usize) -> String {
    format!("line longer than the {max_line}-byte limit (--max-line-bytes); skipped")
}

/// The length of a raw line (with its newline, if any) without its line
/// ending (`\n` or `\r\n`); `None` for a blank line, which is not a record.
fn content_len(raw: &[u8]) -> Option<usize> {
    let mut len = raw.len();
    if len > 0 && raw[len - 1] == b'\n' {
        len -= 1;
    }
    if len > 0 && raw[len - 1] == b'\r' {
        len -= 1;
    }
    (!raw[..len].iter().all(u8::is_ascii_whitespace)).then_some(len)
}

/// [`JsonlReader::read_chunk`] through a buffer, each line copied out.
fn read_chunk<R: BufRead>(
    reader: &mut R,
    next_line: &mut u64,
    limits: Limits,
    out: &mut Vec<Line>,
    rejects: &mut Vec<Reject>,
) -> io::Result<bool> {
    let mut bytes = 0usize;
    while out.len() < limits.records && bytes < limits.bytes {
        let mut buf = Vec::new();
        let (n, complete) = read_line_limited(reader, &mut buf, limits.max_line)?;
        if n == 0 {
            return Ok(false);
        }
        *next_line += 1;
        if !complete {
            rejects.push(Reject::at(*next_line, too_long(limits.max_line)));
            continue;
        }
        let Some(len) = content_len(&buf) else { continue };
        buf.truncate(len);
        bytes += len;
        out.push(Line { number: *next_line, body: Body::Json(Bytes::from(buf)) });
    }
    Ok(true)
}

/// Reads one line into `buf`, keeping at most `max` bytes of it; the rest of
/// an over-long line is consumed and discarded. Returns (bytes consumed,
/// whether the line fit).
fn read_line_limited<R: BufRead>(reader: &mut R, buf: &mut Vec<u8>, max: usize) -> io::Result<(usize, bool)> {
    let mut consumed = 0;
    let mut fits = true;
    loop {
        let available = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok((consumed, fits));
        }
        let (take, done) = match memchr::memchr(b'\n', available) {
            Some(i) => (i + 1, true),
            None => (available.len(), false),
        };
        if fits {
            if buf.len() + take > max.saturating_add(1) {
                fits = false;
                buf.clear();
                buf.shrink_to_fit();
            } else {
                buf.extend_from_slice(&available[..take]);
            }
        }
        reader.consume(take);
        consumed += take;
        if done {
            return Ok((consumed, fits));
        }
    }
}

/// A record's id and text, borrowed from the line where possible.
#[derive(Debug)]
pub struct Record<'a> {
    pub id: Option<Cow<'a, str>>,
    pub text: Cow<'a, str>,
}

/// Extracts `text_field` and `id_field` from a JSON object line. A field
/// name with dots is also a path into nested objects (`meta.body` is the
/// `body` of the object under `meta`), unless the record has a key spelled
/// exactly so.
pub fn parse_record<'a>(line: &'a [u8], text_field: &str, id_field: &str) -> Result<Record<'a>, String> {
    // A UTF-8 byte-order mark (editors put one before the first line) is not content.
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    // Validated with SIMD; std's validator, slower, only says where it fails.
    let s = simdutf8::basic::from_utf8(line).map_err(|_| match std::str::from_utf8(line) {
        Err(e) => format!("invalid UTF-8 at byte {}", e.valid_up_to()),
        Ok(_) => "invalid UTF-8".to_owned(),
    })?;
    let mut de = serde_json::Deserializer::from_str(s);
    let extract = Extract { text: Some(text_field), id: Some(id_field), text_field, id_field, top: true };
    let (id, text) = extract.deserialize(&mut de).map_err(|e| format!("malformed JSON: {e}"))?;
    de.end().map_err(|e| format!("malformed JSON: {e}"))?;
    let text = text.ok_or_else(|| format!("missing string field {text_field:?}"))?;
    Ok(Record { id, text })
}

/// Looks for the text and the id in one object: `text` and `id` are what
/// is left of each path at this depth (`None` once it cannot be here).
struct Extract<'f> {
    text: Option<&'f str>,
    id: Option<&'f str>,
    text_field: &'f str,
    id_field: &'f str,
    top: bool,
}

type Fields<'a> = (Option<Cow<'a, str>>, Option<Cow<'a, str>>);

impl<'de> DeserializeSeed<'de> for Extract<'_> {
    type Value = Fields<'de>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        if self.top {
            d.deserialize_map(self)
        } else {
            // A nested value on the way to a field: an object, or null (absent).
            d.deserialize_any(self)
        }
    }
}

/// The rest of `path` below `key`, when `path` goes through `key`.
fn below<'f>(path: Option<&'f str>, key: &str) -> Option<&'f str> {
    path?.strip_prefix(key)?.strip_prefix('.')
}

/// An id may be a JSON string or integer.
struct IdValue<'a>(Cow<'a, str>);

impl<'de> de::Deserialize<'de> for IdValue<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = IdValue<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or integer id")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(IdValue(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(IdValue(Cow::Owned(v.to_owned())))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
                Ok(IdValue(Cow::Owned(v.to_string())))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
                Ok(IdValue(Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Visitor<'de> for Extract<'_> {
    type Value = Fields<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok((None, None))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut id, mut text): Fields<'de> = (None, None);
        let twice = |field: &str| de::Error::custom(format!("field {field:?} appears twice"));
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            if self.text == Some(&*key) {
                if text.is_some() {
                    return Err(twice(self.text_field));
                }
                let v: Cow<'de, str> = map
                    .next_value::<Option<Cow<'de, str>>>()?
                    .ok_or_else(|| de::Error::custom(format!("field {:?} is null", self.text_field)))?;
                text = Some(v);
            } else if self.id == Some(&*key) {
                if id.is_some() {
                    return Err(twice(self.id_field));
                }
                id = Some(map.next_value::<IdValue<'de>>()?.0);
            } else if below(self.text, &key).is_some() || below(self.id, &key).is_some() {
                let nested = Extract { text: below(self.text, &key), id: below(self.id, &key), top: false, ..self };
                let (i, t) = map.next_value_seed(nested)?;
                if let Some(t) = t {
                    if text.replace(t).is_some() {
                        return Err(twice(self.text_field));
                    }
                }
                if let Some(i) = i {
                    if id.replace(i).is_some() {
                        return Err(twice(self.id_field));
                    }
                }
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok((id, text))
    }
}

/// What a JSONL input's first bytes say it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Head {
    Parquet,
    Zstd,
    Gzip,
    Plain,
}

impl Head {
    fn of(head: &[u8]) -> Head {
        if head.starts_with(b"PAR1") {
            Head::Parquet
        } else if head.starts_with(&[0x28, 0xB5, 0x2F, 0xFD]) {
            Head::Zstd
        } else if head.starts_with(&[0x1F, 0x8B]) {
            Head::Gzip
        } else {
            Head::Plain
        }
    }
}

/// `raw` (standard input, or the file at `path`) as a stream. JSONL
/// compressed with zstd or gzip is recognised by its first bytes, whatever
/// the file is called, and read as it decompresses; a read error (a
/// truncated or damaged stream) names the input.
fn open_stream(raw: Box<dyn io::Read + Send>, path: &str) -> anyhow::Result<Box<dyn BufRead + Send>> {
    let mut buffered = BufReader::with_capacity(1 << 20, raw);
    let head = buffered.fill_buf().with_context(|| format!("cannot read {path}"))?;
    let name = if path == "-" { "standard input".to_owned() } else { path.to_owned() };
    let decoded: Box<dyn io::Read + Send> = match Head::of(head) {
        Head::Parquet => {
            anyhow::bail!("{name} is Parquet, which is read from its end: give the file's path, not standard input")
        }
        Head::Zstd => {
            Box::new(zstd::stream::read::Decoder::with_buffer(buffered).with_context(|| format!("cannot read {path}"))?)
        }
        Head::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(buffered)),
        Head::Plain => return Ok(Box::new(Named { inner: buffered, name })),
    };
    Ok(Box::new(BufReader::with_capacity(1 << 20, Named { inner: decoded, name })))
}

/// A reader that counts the bytes it passes.
struct Counted<R> {
    inner: R,
    read: Arc<AtomicU64>,
}

impl<R: io::Read> io::Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// A reader whose errors name the input they came from.
struct Named<R> {
    inner: R,
    name: String,
}

impl<R> Named<R> {
    fn wrap(&self, e: io::Error) -> io::Error {
        io::Error::new(e.kind(), format!("{}: {e}", self.name))
    }
}

impl<R: io::Read> io::Read for Named<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf).map_err(|e| self.wrap(e))
    }
}

impl<R: BufRead> BufRead for Named<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        // The borrow checker cannot see that the error path does not hold
        // the buffer; ask twice on an error.
        if let Err(e) = self.inner.fill_buf() {
            return Err(self.wrap(e));
        }
        self.inner.fill_buf()
    }
    fn consume(&mut self, amt: usize) {
        self.inner.consume(amt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extracts_fields_and_reports_problems() {
        let r = parse_record(br#"{"id": 7, "text": "a\nb", "x": [1,{"y":2}]}"#, "text", "id").unwrap();
        assert_eq!(r.id.as_deref(), Some("7"));
        assert_eq!(r.text, "a\nb");
        assert!(parse_record(br#"{"id": 7}"#, "text", "id").unwrap_err().contains("missing"));
        assert!(parse_record(br#"{"text": 5}"#, "text", "id").unwrap_err().contains("malformed"));
        assert!(parse_record(b"{\"text\": \"\xff\"}", "text", "id").unwrap_err().contains("UTF-8"));
        assert!(parse_record(br#"{"text": "a"} x"#, "text", "id").unwrap_err().contains("malformed"));
        // Issue 15: a repeated field used to take its last value silently;
        // a byte-order mark made the first line malformed.
        let twice = parse_record(br#"{"text": "a", "text": "b"}"#, "text", "id").unwrap_err();
        assert!(twice.contains("appears twice"), "{twice}");
        assert!(parse_record(br#"{"id": 1, "id": 2, "text": "a"}"#, "text", "id").unwrap_err().contains("twice"));
        assert_eq!(parse_record(b"\xEF\xBB\xBF{\"text\": \"a\"}", "text", "id").unwrap().text, "a");
        // Issue 13: nested fields by a dotted path; a flat key spelled with
        // dots still matches itself.
        let nested = br#"{"meta": {"doc": {"id": 9}, "body": "deep"}, "text": "top"}"#;
        let r = parse_record(nested, "meta.body", "meta.doc.id").unwrap();
        assert_eq!((r.id.as_deref(), &*r.text), (Some("9"), "deep"));
        let r = parse_record(br#"{"meta.body": "flat", "x": 1}"#, "meta.body", "id").unwrap();
        assert_eq!(r.text, "flat");
        assert!(parse_record(br#"{"meta": null}"#, "meta.body", "id").unwrap_err().contains("missing"));
        assert!(parse_record(br#"{"meta": {"body": 5}}"#, "meta.body", "id").unwrap_err().contains("malformed"));
        let twice = parse_record(br#"{"meta": {"body": "a"}, "meta.body": "b"}"#, "meta.body", "id").unwrap_err();
        assert!(twice.contains("appears twice"), "{twice}");
        assert!(parse_record(br#"[1]"#, "text", "id").unwrap_err().contains("malformed"));
    }

    /// A chunk as read: (more to come, lines as (number, bytes), rejects as
    /// (line, reason)).
    type ChunkRead = (bool, Vec<(u64, Vec<u8>)>, Vec<(u64, String)>);

    /// Every chunk of `data` as (more, lines as (number, bytes), rejects as
    /// (line, reason)), read by the stream reader through a buffer of
    /// `buffer` bytes, or mapped from a file holding it.
    fn chunks(data: &[u8], mapped: bool, buffer: usize, limits: (usize, usize, usize)) -> Vec<ChunkRead> {
        let limits = Limits { records: limits.0, bytes: limits.1, max_line: limits.2 };
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), data).unwrap();
        let read = Arc::new(AtomicU64::new(0));
        let mut reader = if mapped {
            let reader = JsonlReader::open(file.path().to_str().unwrap(), true, Arc::clone(&read)).unwrap();
            assert!(matches!(reader, JsonlReader::Mapped(_)), "{reader:?}");
            reader
        } else {
            JsonlReader::Stream(Box::new(io::BufReader::with_capacity(buffer, io::Cursor::new(data.to_vec()))))
        };
        let (mut out, mut n) = (Vec::new(), 0);
        loop {
            let (mut lines, mut rejects) = (Vec::new(), Vec::new());
            let more = reader.read_chunk(&mut n, limits, &mut lines, &mut rejects).unwrap();
            let lines = lines
                .into_iter()
                .map(|l| match l.body {
                    Body::Json(b) => (l.number, b.to_vec()),
                    Body::Row { .. } => unreachable!("JSONL lines"),
                })
                .collect();
            out.push((more, lines, rejects.into_iter().map(|r| (r.line, r.reason)).collect()));
            if !more {
                break;
            }
        }
        if mapped {
            assert_eq!(read.load(Ordering::Relaxed), data.len() as u64, "progress counts the whole file");
        }
        out
    }

    #[test]
    fn mapped_files_read_as_streams_do() {
        let crafted: [&[u8]; 9] = [
            b"{\"text\":\"a\"}\n\n  \t\n{\"text\":\"b\"}",
            b"a\r\nb\r\n\r\n\r\nc",
            b"x\n",
            b"\n\n\n",
            b" ",
            b"\r",
            b"0123456789\n012345678\n01234567890\n0123456789",
            b"0123456789\r\n012345678\r\n",
            b"last line without its newline, and longer than the limit",
        ];
        let mut rng = neardup_core::hash::SplitMix64::new(11);
        let alphabet = b"ab {}\"\n\n\r\t";
        let random: Vec<Vec<u8>> = (0..300)
            .map(|_| {
                let len = 1 + rng.next() as usize % 120;
                (0..len).map(|_| alphabet[rng.next() as usize % alphabet.len()]).collect()
            })
            .collect();
        let mut cases = 0;
        for data in crafted.iter().copied().chain(random.iter().map(Vec::as_slice)) {
            for limits in [
                (1, 1 << 20, 10),
                (2, 1 << 20, 10),
                (100, 5, 10),
                (100, 1 << 20, 0),
                (3, 7, 1),
                (100, 1 << 20, 1 << 20),
                (4, 1 << 20, usize::MAX),
            ] {
                let expected = chunks(data, false, 4, limits);
                assert_eq!(chunks(data, true, 0, limits), expected, "{:?} {limits:?}", String::from_utf8_lossy(data));
                assert_eq!(chunks(data, false, 1 << 16, limits), expected, "buffer size");
                cases += 1;
            }
        }
        assert_eq!(cases, 309 * 7);
    }

    #[test]
    fn only_plain_files_are_mapped_and_only_when_asked() {
        let open = |path: &std::path::Path, mmap: bool| {
            JsonlReader::open(path.to_str().unwrap(), mmap, Arc::new(AtomicU64::new(0))).map(|r| format!("{r:?}"))
        };
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), b"{\"text\":\"a\"}\n").unwrap();
        assert!(open(file.path(), true).unwrap().starts_with("Mapped"));
        assert_eq!(open(file.path(), false).unwrap(), "Stream");
        let gz = {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            io::Write::write_all(&mut enc, b"{\"text\":\"a\"}\n").unwrap();
            enc.finish().unwrap()
        };
        let zst = zstd::stream::encode_all(&b"{\"text\":\"a\"}\n"[..], 3).unwrap();
        for (what, bytes) in [("gzip", gz), ("zstd", zst), ("empty", Vec::new())] {
            std::fs::write(file.path(), &bytes).unwrap();
            assert_eq!(open(file.path(), true).unwrap(), "Stream", "{what}");
        }
        std::fs::write(file.path(), b"PAR1....").unwrap();
        let e = open(file.path(), true).unwrap_err().to_string();
        assert!(e.contains("is Parquet"), "{e}");
        let e = open(&file.path().join("nothing"), true).unwrap_err().to_string();
        assert!(e.contains("cannot open"), "{e}");
    }

    #[test]
    fn network_file_systems_are_not_mapped() {
        for (magic, network) in [
            (0x6969, true),
            (0x6573_5546, true),
            (0xFE53_4D42, true),
            (0xEF53, false),
            (0x0102_1994, false),
            (0x9123_683E, false),
            (0x794C_7630, false),
        ] {
            assert_eq!(is_network_fs(magic), network, "{magic:x}");
        }
        // The file systems tests run on here are local: mapped.
        let file = tempfile::NamedTempFile::new().unwrap();
        assert!(!on_network_fs(file.as_file()));
    }

    /// The resident bytes of the mapping that holds `at`, from its entry in
    /// /proc/self/smaps (tests running beside this one do not count).
    #[cfg(target_os = "linux")]
    fn resident_at(at: *const u8) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let at = at as usize;
        let mut lines = smaps.lines().skip_while(|l| {
            let Some((range, _)) = l.split_once(' ') else { return true };
            let Some((lo, hi)) = range.split_once('-') else { return true };
            match (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16)) {
                (Ok(lo), Ok(hi)) => !(lo..hi).contains(&at),
                _ => true,
            }
        });
        assert!(lines.next().is_some(), "{at:x} is mapped");
        let rss = lines.find(|l| l.starts_with("Rss:")).unwrap();
        rss.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() << 10
    }

    /// A file of `line` repeated to about `bytes`, opened mapped: (its
    /// text, the file, the reader, where the mapping starts).
    #[cfg(target_os = "linux")]
    fn mapped_lines(line: &str, bytes: usize) -> (String, tempfile::NamedTempFile, JsonlReader, *const u8) {
        let data = line.repeat(bytes / line.len());
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), &data).unwrap();
        let reader = JsonlReader::open(file.path().to_str().unwrap(), true, Arc::new(AtomicU64::new(0))).unwrap();
        let JsonlReader::Mapped(m) = &reader else { panic!("{reader:?}") };
        let at = m.map.as_ptr();
        (data, file, reader, at)
    }

    /// Many small chunks whose ends fall anywhere in a block: once each is
    /// dropped, next to nothing of the file is resident.
    #[cfg(target_os = "linux")]
    #[test]
    fn small_chunks_give_back_the_blocks_they_share() {
        let line = format!("{{\"text\":\"{}\"}}\n", "v ".repeat(91));
        assert_ne!(line.len() % 64, 0, "lines that do not divide a block");
        let (data, _file, mut reader, at) = mapped_lines(&line, 24 << 20);
        let (mut n, mut rejects, mut lines) = (0, Vec::new(), 0);
        let limits = Limits { records: 97, bytes: usize::MAX, max_line: 1 << 20 };
        // Two chunks alive at a time, as in the pipeline: each is dropped
        // once the one after it is read.
        let mut held = None;
        let last = loop {
            let mut chunk = Vec::new();
            let more = reader.read_chunk(&mut n, limits, &mut chunk, &mut rejects).unwrap();
            lines += chunk.len();
            assert!(chunk
                .iter()
                .all(|l| matches!(&l.body, Body::Json(b) if b[..] == line.as_bytes()[..line.len() - 1])));
            if !more {
                break chunk;
            }
            held = Some(chunk);
        };
        drop(held);
        assert_eq!(lines, data.len() / line.len());
        let before = resident_at(at);
        drop(last);
        let after = resident_at(at);
        assert!(before > 0 && after <= 64 << 10, "resident {before} with the last chunk, {after} after");
    }

    /// A mapped chunk's pages leave the process's resident memory when its
    /// last line is dropped, and the chunks after it read as before.
    #[cfg(target_os = "linux")]
    #[test]
    fn mapped_chunks_give_their_pages_back() {
        let line = format!("{{\"text\":\"{}\"}}\n", "w ".repeat(500));
        let (data, _file, mut reader, at) = mapped_lines(&line, 48 << 20);
        let (mut n, mut rejects) = (0, Vec::new());
        let mut first = Vec::new();
        let limits = Limits { records: usize::MAX, bytes: 40 << 20, max_line: 1 << 20 };
        reader.read_chunk(&mut n, limits, &mut first, &mut rejects).unwrap();
        let touched: u64 = first.iter().map(|l| l.len() as u64).sum();
        let before = resident_at(at);
        drop(first);
        let after = resident_at(at);
        assert!(before > after + (32 << 20), "resident {before} -> {after} after {touched} bytes of lines dropped");
        let mut rest = Vec::new();
        assert!(!reader.read_chunk(&mut n, Limits { bytes: usize::MAX, ..limits }, &mut rest, &mut rejects).unwrap());
        assert!(rejects.is_empty());
        assert!(rest.iter().all(|l| l.len() == line.len() - 1
            && matches!(&l.body, Body::Json(b) if b[..] == line.as_bytes()[..line.len() - 1])));
        assert_eq!(rest.last().map(|l| l.number), Some((data.len() / line.len()) as u64));
    }

    #[test]
    fn long_lines_are_skipped_and_reported() {
        let input = format!("{}\n{{\"text\":\"ok\"}}\n", "x".repeat(100));
        let mut reader = io::BufReader::with_capacity(16, input.as_bytes());
        let (mut lines, mut rejects, mut n) = (Vec::new(), Vec::new(), 0);
        read_chunk(&mut reader, &mut n, Limits { records: 10, bytes: 1 << 20, max_line: 50 }, &mut lines, &mut rejects)
            .unwrap();
        assert_eq!(rejects.len(), 1);
        assert_eq!(rejects[0].line, 1);
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].number, 2);
    }
}
