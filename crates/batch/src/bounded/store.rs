//! The items of a batch on disk: one fixed-size record per item (its line,
//! input, content hash and sketch, and where its id and features are), the
//! ids, and the canonical features as in memory: little-endian `u64`s, read
//! in place. (Delta coding would save nothing: a document's few hundred
//! 64-bit hashes lie ~2^55 apart, eight bytes of varint each.) Written
//! once, in input order (under a keeper policy, each record at its place in
//! the policy's order); then read where they lie.
//!
//! Records and ids are mapped: their pages are the kernel's to keep or
//! drop, and [`Store::release`] takes them out of the process's resident
//! set, so the memory limit counts only what the batch itself holds.
//! Features, the bulk of the store (~2.3 KB of a 2 KB document's 2.6), are
//! read with `pread` instead: a candidate's features lie anywhere in a file
//! that can be larger than memory, and a fault on a mapping reads ~128 KB
//! around the page it needs (the kernel's read-around) and maps 64 KB of
//! it, where a read told the file is read at random fetches only the
//! pages it asks for and adds nothing to the resident set. A block's own
//! items, which lie together, are asked for ahead ([`Store::prefetch`]).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use memmap2::Mmap;
use neardup_core::ContentHash;

/// The buffer of a file that is mapped and read at random (records, ids,
/// buckets): written a page at a time. The page cache keeps a file in
/// folios as large as the writes that made it (Linux 6.x, ext4 and XFS),
/// and a fault on a mapping maps the whole folio: after 1 MB writes each
/// random read of a record mapped 1 MB into the resident set (measured
/// here: 993 KB per read), after 4 KB writes 64 KB (the fault-around).
pub const MAPPED_WRITE_BUFFER: usize = 4096;

/// Item flags.
pub const DEGRADED: u8 = 1;
pub const BANDED: u8 = 2;

/// Bytes before the sketch: line (8), features at (8) and count (4), id
/// at (8) and length (4), text bytes (4), content hash (16), flags (1),
/// three spare, input (4).
const HEAD: usize = 60;

/// A record's size, for a sketch of `sketch_len` bytes.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    pub sketch_len: usize,
    pub size: usize,
}

impl Layout {
    pub fn new(sketch_len: usize) -> Layout {
        Layout { sketch_len, size: (HEAD + sketch_len).next_multiple_of(8) }
    }
}

/// One item, as written.
pub struct NewItem<'a> {
    pub line: u64,
    pub input: u32,
    pub text_len: u32,
    pub id: &'a str,
    pub hash: ContentHash,
    pub flags: u8,
    /// The sketch (empty when the item has no band keys).
    pub sketch: &'a [u8],
    pub features: &'a [u64],
}

/// Writes the store's three files.
pub struct StoreWriter {
    layout: Layout,
    items: BufWriter<File>,
    /// With [`StoreWriter::create_numbered`]: records are written at their
    /// number's place, not appended.
    numbered: Option<File>,
    features: BufWriter<File>,
    ids: BufWriter<File>,
    feat_at: u64,
    id_at: u64,
    rec: Vec<u8>,
    raw: Vec<u8>,
    pub count: u32,
}

impl StoreWriter {
    pub fn create(dir: &Path, layout: Layout) -> io::Result<StoreWriter> {
        let open = |name: &str, buffer: usize| -> io::Result<BufWriter<File>> {
            Ok(BufWriter::with_capacity(buffer, File::create(dir.join(name))?))
        };
        Ok(StoreWriter {
            layout,
            items: open("items.bin", MAPPED_WRITE_BUFFER)?,
            numbered: None,
            // Read with pread, never mapped: written in large pieces.
            features: open("features.bin", 1 << 20)?,
            ids: open("ids.bin", MAPPED_WRITE_BUFFER)?,
            feat_at: 0,
            id_at: 0,
            rec: vec![0; layout.size],
            raw: Vec::new(),
            count: 0,
        })
    }

    /// A store of `count` items written in any order, each at the place
    /// of the number it is given ([`StoreWriter::push_at`]): under a
    /// keeper policy items are numbered in its order as they are read in
    /// input order.
    pub fn create_numbered(dir: &Path, layout: Layout, count: u32) -> io::Result<StoreWriter> {
        let mut w = StoreWriter::create(dir, layout)?;
        let file = std::fs::OpenOptions::new().write(true).open(dir.join("items.bin"))?;
        file.set_len(u64::from(count) * layout.size as u64)?;
        w.numbered = Some(file);
        Ok(w)
    }

    /// Writes an item as number `at` (a store made by
    /// [`StoreWriter::create_numbered`]) or the next one; returns its number.
    pub fn push_at(&mut self, at: Option<u32>, item: &NewItem<'_>) -> io::Result<u32> {
        if self.count == u32::MAX {
            return Err(io::Error::other("more than 4,294,967,295 records in one run"));
        }
        self.raw.clear();
        self.raw.extend(item.features.iter().flat_map(|f| f.to_le_bytes()));
        let r = &mut self.rec;
        r.fill(0);
        r[0..8].copy_from_slice(&item.line.to_le_bytes());
        r[8..16].copy_from_slice(&self.feat_at.to_le_bytes());
        r[16..20].copy_from_slice(&(item.features.len() as u32).to_le_bytes());
        r[20..28].copy_from_slice(&self.id_at.to_le_bytes());
        r[28..32].copy_from_slice(&(item.id.len() as u32).to_le_bytes());
        r[32..36].copy_from_slice(&item.text_len.to_le_bytes());
        r[36..52].copy_from_slice(&item.hash.0);
        r[52] = item.flags;
        r[56..60].copy_from_slice(&item.input.to_le_bytes());
        r[HEAD..HEAD + item.sketch.len()].copy_from_slice(item.sketch);
        let number = match (&self.numbered, at) {
            (Some(file), Some(at)) => {
                std::os::unix::fs::FileExt::write_all_at(file, r, u64::from(at) * self.layout.size as u64)?;
                at
            }
            (None, None) => {
                self.items.write_all(r)?;
                self.count
            }
            _ => return Err(io::Error::other("an item numbered in a store that appends, or the other way round")),
        };
        self.features.write_all(&self.raw)?;
        self.ids.write_all(item.id.as_bytes())?;
        self.feat_at += self.raw.len() as u64;
        self.id_at += item.id.len() as u64;
        self.count += 1;
        Ok(number)
    }

    /// Bytes written so far.
    pub fn disk_bytes(&self) -> u64 {
        self.count as u64 * self.layout.size as u64 + self.feat_at + self.id_at
    }

    /// Flushes the files to disk.
    pub fn finish(self) -> io::Result<()> {
        for w in [self.items, self.features, self.ids] {
            w.into_inner().map_err(|e| e.into_error())?;
        }
        Ok(())
    }
}

/// A read-only mapping of a file (an empty file maps to nothing).
pub struct Mapped(Option<Mmap>);

impl Mapped {
    pub fn open(path: &Path) -> io::Result<Mapped> {
        let file = File::open(path)?;
        if file.metadata()?.len() == 0 {
            return Ok(Mapped(None));
        }
        // SAFETY: the file is this run's own, in its work folder, written
        // and closed before it is mapped; nothing writes it while mapped.
        Ok(Mapped(Some(unsafe { Mmap::map(&file)? })))
    }

    /// A mapping read at random (written [`MAPPED_WRITE_BUFFER`] at a
    /// time): a page read back from disk is read alone, so it stays a
    /// small folio, not the start of a large read-ahead one.
    pub fn open_random(path: &Path) -> io::Result<Mapped> {
        let m = Mapped::open(path)?;
        if let Some(map) = &m.0 {
            let _ = map.advise(memmap2::Advice::Random);
        }
        Ok(m)
    }

    pub fn bytes(&self) -> &[u8] {
        self.0.as_deref().unwrap_or(&[])
    }

    /// Takes the mapping's pages out of the process's resident set; they
    /// stay in the page cache, and are mapped again when next read.
    pub fn release(&self) {
        if let Some(m) = &self.0 {
            // SAFETY: a read-only mapping of a file: dropped pages are read
            // back from the file, unchanged, when next touched.
            let _ = unsafe { m.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) };
        }
    }
}

/// The store, open for reading.
pub struct Store {
    pub layout: Layout,
    items: Mapped,
    /// Read at random with `pread` (see the module doc).
    features: File,
    features_bytes: u64,
    ids: Mapped,
    pub count: u32,
}

/// A view of one item's record.
#[derive(Clone, Copy)]
pub struct Rec<'a>(&'a [u8], Layout);

impl<'a> Rec<'a> {
    fn u64_at(&self, at: usize) -> u64 {
        u64::from_le_bytes(self.0[at..at + 8].try_into().expect("8 bytes"))
    }
    fn u32_at(&self, at: usize) -> u32 {
        u32::from_le_bytes(self.0[at..at + 4].try_into().expect("4 bytes"))
    }
    pub fn line(&self) -> u64 {
        self.u64_at(0)
    }
    pub fn text_len(&self) -> u32 {
        self.u32_at(32)
    }
    pub fn hash(&self) -> ContentHash {
        ContentHash(self.0[36..52].try_into().expect("16 bytes"))
    }
    pub fn flags(&self) -> u8 {
        self.0[52]
    }
    pub fn input(&self) -> u32 {
        self.u32_at(56)
    }
    pub fn sketch(&self) -> &'a [u8] {
        &self.0[HEAD..HEAD + self.1.sketch_len]
    }
}

impl Store {
    pub fn open(dir: &Path, layout: Layout) -> io::Result<Store> {
        let items = Mapped::open_random(&dir.join("items.bin"))?;
        let count = (items.bytes().len() / layout.size) as u32;
        let features = File::open(dir.join("features.bin"))?;
        let features_bytes = features.metadata()?.len();
        advise(&features, 0, 0, Advice::Random);
        Ok(Store { layout, items, features, features_bytes, ids: Mapped::open(&dir.join("ids.bin"))?, count })
    }

    /// Bytes of features on disk.
    pub fn features_bytes(&self) -> u64 {
        self.features_bytes
    }

    /// Where item `item`'s features lie in their file: offset and count.
    fn features_at(&self, item: u32) -> (u64, usize) {
        let r = self.rec(item);
        (r.u64_at(8), r.u32_at(16) as usize)
    }

    /// Asks the kernel to read the features of items `from..to` (which lie
    /// together) ahead of their reads: the reads it starts run while the
    /// caller does other work, many at once.
    pub fn prefetch(&self, from: u32, to: u32) {
        if from >= to || to > self.count {
            return;
        }
        let (start, _) = self.features_at(from);
        let (last, n) = self.features_at(to - 1);
        let end = last.saturating_add(n as u64 * 8).min(self.features_bytes);
        if end > start {
            advise(&self.features, start, end - start, Advice::WillNeed);
        }
    }

    pub fn rec(&self, item: u32) -> Rec<'_> {
        let at = item as usize * self.layout.size;
        Rec(&self.items.bytes()[at..at + self.layout.size], self.layout)
    }

    /// How many canonical features item `item` has (read from its record).
    pub fn features_len(&self, item: u32) -> usize {
        self.features_at(item).1
    }

    /// Item `item`'s canonical features, read from the file. None when the
    /// work folder was changed under the run (out of range, unreadable).
    pub fn features(&self, item: u32) -> Option<Vec<u64>> {
        use std::os::unix::fs::FileExt;
        let (at, n) = self.features_at(item);
        let bytes = n.checked_mul(8)?;
        if at.checked_add(bytes as u64)? > self.features_bytes {
            return None;
        }
        let mut v = vec![0u64; n];
        // SAFETY: the bytes of a `u64` slice, written whole by the read
        // (any bytes are a valid `u64`).
        let raw = unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), bytes) };
        self.features.read_exact_at(raw, at).ok()?;
        if cfg!(target_endian = "big") {
            for f in &mut v {
                *f = u64::from_le(*f);
            }
        }
        Some(v)
    }

    /// Item `item`'s id.
    pub fn id(&self, item: u32) -> &str {
        let r = self.rec(item);
        let (at, len) = (r.u64_at(20) as usize, r.u32_at(28) as usize);
        // Written from a `&str`; a damaged work folder reads as a lossy id.
        std::str::from_utf8(self.ids.bytes().get(at..at + len).unwrap_or(b"")).unwrap_or("\u{FFFD}")
    }

    /// Takes every mapped page out of the resident set (see [`Mapped::release`]).
    pub fn release(&self) {
        self.items.release();
        self.ids.release();
    }
}

/// How a file is about to be read.
enum Advice {
    /// At random: no read-ahead.
    Random,
    /// This range soon.
    WillNeed,
}

/// Tells the kernel how `file` is read (a hint: where it cannot be given,
/// reads are the same, only slower).
fn advise(file: &File, offset: u64, len: u64, advice: Advice) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let advice = match advice {
            Advice::Random => libc::POSIX_FADV_RANDOM,
            Advice::WillNeed => libc::POSIX_FADV_WILLNEED,
        };
        let (Ok(offset), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else { return };
        // SAFETY: a hint about an open file's descriptor, which it does
        // not change.
        unsafe { libc::posix_fadvise(file.as_raw_fd(), offset, len, advice) };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, offset, len, advice);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_read_back_as_written() {
        let dir = std::env::temp_dir().join(format!("neardup-store-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let layout = Layout::new(5);
        let mut w = StoreWriter::create(&dir, layout).unwrap();
        let feats: Vec<Vec<u64>> = vec![vec![], vec![1, 2, 300, u64::MAX], vec![0, 1 << 63]];
        for (i, f) in feats.iter().enumerate() {
            let item = NewItem {
                line: 10 + i as u64,
                input: i as u32,
                text_len: 7,
                id: &format!("id-{i}-é"),
                hash: ContentHash([i as u8; 16]),
                flags: if i == 0 { DEGRADED } else { BANDED },
                sketch: if i == 0 { &[] } else { &[9, 8, 7, 6, 5] },
                features: f,
            };
            assert_eq!(w.push_at(None, &item).unwrap(), i as u32);
        }
        w.finish().unwrap();
        let s = Store::open(&dir, layout).unwrap();
        assert_eq!(s.count, 3);
        for (i, f) in feats.iter().enumerate() {
            assert_eq!(s.features(i as u32).unwrap(), *f);
            assert_eq!(s.features_len(i as u32), f.len());
            assert_eq!(s.id(i as u32), format!("id-{i}-é"));
            let r = s.rec(i as u32);
            assert_eq!((r.line(), r.input(), r.text_len()), (10 + i as u64, i as u32, 7));
            assert_eq!(r.hash(), ContentHash([i as u8; 16]));
        }
        assert_eq!(s.rec(1).sketch(), &[9, 8, 7, 6, 5]);
        assert_eq!(s.rec(0).sketch(), &[0; 5], "no sketch reads as zeros");
        assert_eq!(s.rec(1).flags(), BANDED);
        s.prefetch(0, 3);
        s.release();
        // A damaged work folder: features past the file's end read as None.
        std::fs::OpenOptions::new().write(true).open(dir.join("features.bin")).unwrap().set_len(8).unwrap();
        let s = Store::open(&dir, layout).unwrap();
        assert_eq!(s.features(0).unwrap(), Vec::<u64>::new());
        assert!(s.features(1).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
