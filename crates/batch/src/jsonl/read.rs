//! How a JSONL input's lines are read through a buffer, a chunk at a
//! time, with one rule for what a line is (its ending, blank lines, the
//! length limit), which the mapped reader (`mapped.rs`) follows too, and
//! one for what an input's first bytes say it is.

use std::io::{self, BufRead, BufReader};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::Context;
use bytes::Bytes;

use super::{Body, Line, Reject};

/// What one chunk may hold: `records` lines or `bytes` bytes of them,
/// whichever comes first; a line longer than `max_line` is skipped.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub records: usize,
    pub bytes: usize,
    pub max_line: usize,
}

/// Whether a raw line of `raw` bytes (its newline included, if any) is
/// longer than `max_line` bytes and a newline: the length rule of both
/// readers.
pub(super) fn over_limit(raw: usize, max_line: usize) -> bool {
    raw > max_line.saturating_add(1)
}

/// Why an over-long line was skipped.
pub(super) fn too_long(max_line: usize) -> String {
    format!("line longer than the {max_line}-byte limit (--max-line-bytes); skipped")
}

/// The length of a raw line (with its newline, if any) without its line
/// ending (`\n` or `\r\n`); `None` for a blank line, which is not a record.
pub(super) fn content_len(raw: &[u8]) -> Option<usize> {
    let mut len = raw.len();
    if len > 0 && raw[len - 1] == b'\n' {
        len -= 1;
    }
    if len > 0 && raw[len - 1] == b'\r' {
        len -= 1;
    }
    (!raw[..len].iter().all(u8::is_ascii_whitespace)).then_some(len)
}

/// A chunk as read: (more to come, lines as (number, bytes), rejects as
/// (line, reason)).
#[cfg(any(test, fuzzing))]
pub(crate) type ChunkRead = (bool, Vec<(u64, Vec<u8>)>, Vec<(u64, String)>);

/// Every chunk `reader` gives under `limits`, as plain values: what the
/// tests and the fuzz target that hold the two readers together compare.
#[cfg(any(test, fuzzing))]
pub(crate) fn every_chunk(reader: &mut super::JsonlReader, limits: Limits) -> Vec<ChunkRead> {
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
            return out;
        }
    }
}

/// [`super::JsonlReader::read_chunk`] through a buffer, each line copied out.
pub(super) fn read_chunk<R: BufRead>(
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
            if over_limit(buf.len() + take, max) {
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

/// What an input's first bytes say it is (the one place their magic
/// numbers are written).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Head {
    Parquet,
    Zstd,
    Gzip,
    Plain,
}

impl Head {
    pub(crate) fn of(head: &[u8]) -> Head {
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

/// `raw` (whose bytes taken are counted in `read`, for progress) as a
/// stream of lines: decompressed when its first bytes say it is gzip or
/// zstd, refused when they say Parquet.
pub(crate) fn stream(
    raw: impl io::Read + Send + 'static,
    read: Arc<AtomicU64>,
    path: &str,
) -> anyhow::Result<Box<dyn BufRead + Send>> {
    open_stream(Box::new(Counted { inner: raw, read }), path)
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
    use crate::jsonl::JsonlReader;

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
        let out = every_chunk(&mut reader, limits);
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
        let mut rng = neardup_core::SplitMix64::new(11);
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
