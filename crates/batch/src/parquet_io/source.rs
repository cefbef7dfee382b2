//! Where a Parquet file's bytes come from: a local file, read where it
//! lies, or an object in a store ([`crate::remote::Object`]), read by byte
//! ranges — its footer, then each row group's column chunks, fetched once
//! when their pages are checked and held while they are decoded.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::sync::Arc;

use bytes::Bytes;
use parquet::errors::Result;
use parquet::file::reader::{ChunkReader, Length};

use crate::remote::Object;

/// A Parquet file's bytes.
#[derive(Debug, Clone)]
pub enum Source {
    File(Arc<File>),
    Object(Arc<Object>),
}

/// A reader that can also skip ahead.
pub trait ReadSeek: Read + Seek {}
impl<T: Read + Seek> ReadSeek for T {}

impl Source {
    /// Opens `name`: a path, or an `s3://` URL.
    pub fn open(name: &str) -> anyhow::Result<Source> {
        use anyhow::Context;
        if crate::remote::is_remote(name) {
            return Ok(Source::Object(Arc::new(Object::open(name)?)));
        }
        Ok(Source::File(Arc::new(File::open(name).with_context(|| format!("cannot open {name}"))?)))
    }

    /// Its length in bytes.
    pub fn size(&self) -> std::io::Result<u64> {
        match self {
            Source::File(f) => Ok(f.metadata()?.len()),
            Source::Object(o) => Ok(o.size),
        }
    }

    /// Bytes `start..start + len`.
    pub fn bytes(&self, start: u64, len: usize) -> std::io::Result<Bytes> {
        match self {
            Source::File(f) => {
                let mut buf = vec![0u8; len];
                std::os::unix::fs::FileExt::read_exact_at(f.as_ref(), &mut buf, start)?;
                Ok(Bytes::from(buf))
            }
            Source::Object(o) => o.range(start, len),
        }
    }

    /// A column chunk's bytes `start..start + len`, to walk its page
    /// headers: a file is read in place (skipping the pages); an object's
    /// range is fetched whole and held for the decoder that follows.
    pub fn chunk(&self, start: u64, len: u64) -> std::io::Result<Box<dyn ReadSeek + '_>> {
        match self {
            Source::File(f) => {
                let mut r = BufReader::with_capacity(1 << 10, f.as_ref());
                r.seek(SeekFrom::Start(start))?;
                Ok(Box::new(r))
            }
            Source::Object(o) => {
                let held = o.hold(start, len)?;
                // Positions stay the file's: the walk seeks by them.
                Ok(Box::new(Offset { inner: std::io::Cursor::new(held), start }))
            }
        }
    }

    /// Lets go of the column chunks held for the last row group.
    pub fn release(&self) {
        if let Source::Object(o) = self {
            o.release();
        }
    }
}

/// A cursor over bytes that begin at `start` of the file.
struct Offset {
    inner: std::io::Cursor<Bytes>,
    start: u64,
}

impl Read for Offset {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.inner.read(buf)
    }
}

impl Seek for Offset {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        let pos = match pos {
            SeekFrom::Start(p) => SeekFrom::Start(p.checked_sub(self.start).ok_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "a seek before the held range")
            })?),
            other => other,
        };
        Ok(self.inner.seek(pos)? + self.start)
    }
}

impl Length for Source {
    fn len(&self) -> u64 {
        self.size().unwrap_or(0)
    }
}

impl ChunkReader for Source {
    type T = Box<dyn Read + Send>;

    fn get_read(&self, start: u64) -> Result<Self::T> {
        match self {
            Source::File(f) => Ok(Box::new(f.as_ref().get_read(start)?)),
            // A page header, read from the held chunk when it is there.
            Source::Object(o) => Ok(Box::new(std::io::Cursor::new(o.from(start)?))),
        }
    }

    fn get_bytes(&self, start: u64, length: usize) -> Result<Bytes> {
        Ok(self.bytes(start, length)?)
    }
}
