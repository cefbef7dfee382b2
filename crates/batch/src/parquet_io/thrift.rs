//! Just enough of Thrift's compact protocol to read what a Parquet file
//! says about itself before the `parquet` crate builds anything from it:
//! the `num_children` of each element of the footer's schema (the crate
//! builds, converts and drops the schema tree recursively, so a deep one
//! overflows the stack) and the sizes and encodings in page headers (what
//! decoding a page will allocate). Nothing here allocates by what the bytes
//! claim or recurses by their nesting beyond [`MAX_NESTING`].

use std::io::{self, Read};

/// Deepest nesting of Thrift structs, lists and maps skipped (Parquet's
/// own structures nest a few levels).
const MAX_NESTING: usize = 32;

const BOOL_TRUE: u8 = 1;
const BOOL_FALSE: u8 = 2;
const I8: u8 = 3;
const I16: u8 = 4;
const I32: u8 = 5;
const I64: u8 = 6;
const DOUBLE: u8 = 7;
const BINARY: u8 = 8;
const LIST: u8 = 9;
const SET: u8 = 10;
const MAP: u8 = 11;
const STRUCT: u8 = 12;

fn bad(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

/// A compact-protocol reader over bytes, counting what it reads.
pub(super) struct Compact<R> {
    r: R,
    /// Bytes read so far.
    pub(super) read: u64,
}

impl<R: Read> Compact<R> {
    pub(super) fn new(r: R) -> Compact<R> {
        Compact { r, read: 0 }
    }

    fn byte(&mut self) -> io::Result<u8> {
        let mut b = [0u8; 1];
        self.r.read_exact(&mut b)?;
        self.read += 1;
        Ok(b[0])
    }

    fn varint(&mut self) -> io::Result<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(bad("a varint longer than 10 bytes"))
    }

    fn zigzag(&mut self) -> io::Result<i64> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// An `i32` field's value (its type checked).
    fn i32(&mut self, ty: u8) -> io::Result<i32> {
        if ty != I32 {
            return Err(bad(format!("an i32 field of type {ty}")));
        }
        i32::try_from(self.zigzag()?).map_err(|_| bad("an i32 out of range"))
    }

    /// The next field's id and type; `None` at the end of the struct.
    fn field(&mut self, last: &mut i16) -> io::Result<Option<(i16, u8)>> {
        let b = self.byte()?;
        if b == 0 {
            return Ok(None);
        }
        let (delta, ty) = (b >> 4, b & 0x0f);
        let id = if delta == 0 {
            i16::try_from(self.zigzag()?).map_err(|_| bad("a field id out of range"))?
        } else {
            last.checked_add(i16::from(delta)).ok_or_else(|| bad("a field id out of range"))?
        };
        *last = id;
        Ok(Some((id, ty)))
    }

    /// A list's (or set's) element type and length.
    fn list(&mut self) -> io::Result<(u8, u64)> {
        let b = self.byte()?;
        let n = if b >> 4 == 15 { self.varint()? } else { u64::from(b >> 4) };
        Ok((b & 0x0f, n))
    }

    fn skip_bytes(&mut self, n: u64) -> io::Result<()> {
        let skipped = io::copy(&mut (&mut self.r).take(n), &mut io::sink())?;
        self.read += skipped;
        if skipped != n {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        Ok(())
    }

    /// Skips a value of type `ty`.
    fn skip(&mut self, ty: u8) -> io::Result<()> {
        self.skip_nested(ty, 0)
    }

    fn skip_nested(&mut self, ty: u8, depth: usize) -> io::Result<()> {
        if depth > MAX_NESTING {
            return Err(bad(format!("Thrift values nested more than {MAX_NESTING} deep")));
        }
        match ty {
            BOOL_TRUE | BOOL_FALSE => Ok(()),
            I8 => self.byte().map(drop),
            I16 | I32 | I64 => self.varint().map(drop),
            DOUBLE => self.skip_bytes(8),
            BINARY => {
                let n = self.varint()?;
                self.skip_bytes(n)
            }
            LIST | SET => {
                let (elem, n) = self.list()?;
                for _ in 0..n {
                    // A boolean element is a byte of its own.
                    if matches!(elem, BOOL_TRUE | BOOL_FALSE) {
                        self.byte()?;
                    } else {
                        self.skip_nested(elem, depth + 1)?;
                    }
                }
                Ok(())
            }
            MAP => {
                let n = self.varint()?;
                if n == 0 {
                    return Ok(());
                }
                let types = self.byte()?;
                for _ in 0..n {
                    self.skip_nested(types >> 4, depth + 1)?;
                    self.skip_nested(types & 0x0f, depth + 1)?;
                }
                Ok(())
            }
            STRUCT => {
                let mut last = 0;
                while let Some((_, t)) = self.field(&mut last)? {
                    self.skip_nested(t, depth + 1)?;
                }
                Ok(())
            }
            other => Err(bad(format!("a value of unknown type {other}"))),
        }
    }
}

/// Walks a Parquet footer (its `FileMetaData`, Thrift compact) without
/// building anything from it, and returns how deep its schema nests: the
/// most elements on a path from the root (not counted) down to a column.
/// An error once that is more than `max`, or when the footer claims more
/// row groups than it has bytes left (the `parquet` crate reserves room for
/// the row groups a footer claims before it reads them).
pub(super) fn check_footer(footer: &[u8], max: usize) -> io::Result<usize> {
    let mut p = Compact::new(footer);
    let (mut last, mut depth, mut row_groups) = (0, None, false);
    while let Some((id, ty)) = p.field(&mut last)? {
        match (id, ty) {
            (2, LIST) => depth = Some(schema_depth(&mut p, max)?),
            (2, _) => return Err(bad("its schema is not a list")),
            (4, LIST) => {
                let (_, n) = p.list()?;
                let left = footer.len() as u64 - p.read;
                if n > left {
                    return Err(bad(format!("its footer claims {n} row groups in {left} bytes")));
                }
                row_groups = true;
                if depth.is_some() {
                    break;
                }
                for _ in 0..n {
                    p.skip(STRUCT)?;
                }
            }
            _ => p.skip(ty)?,
        }
        if depth.is_some() && row_groups {
            break;
        }
    }
    depth.ok_or_else(|| bad("its footer has no schema"))
}

/// The depth of the schema whose list of elements `p` is at.
fn schema_depth(p: &mut Compact<&[u8]>, max: usize) -> io::Result<usize> {
    let (elem, n) = p.list()?;
    if elem != STRUCT {
        return Err(bad("its schema is not a list of elements"));
    }
    // The children still to come of each group open on the current path
    // (the root first), so an element's depth is the length of the path.
    let mut open: Vec<u64> = Vec::new();
    let mut deepest = 0;
    for _ in 0..n {
        let children = schema_element_children(p)?;
        if let Some(left) = open.last_mut() {
            *left -= 1;
        }
        deepest = deepest.max(open.len());
        if deepest > max {
            return Err(bad(format!("its schema is nested more than {max} levels deep")));
        }
        if children > 0 {
            open.push(children);
        }
        while open.last() == Some(&0) {
            open.pop();
        }
    }
    Ok(deepest)
}

/// A `SchemaElement`'s `num_children` (0 for a column).
fn schema_element_children(p: &mut Compact<&[u8]>) -> io::Result<u64> {
    let (mut last, mut children) = (0, 0);
    while let Some((id, ty)) = p.field(&mut last)? {
        match id {
            5 => children = u64::try_from(p.i32(ty)?).unwrap_or(0),
            _ => p.skip(ty)?,
        }
    }
    Ok(children)
}

/// Page types.
pub(super) const DATA_PAGE: i32 = 0;
pub(super) const DICTIONARY_PAGE: i32 = 2;
pub(super) const DATA_PAGE_V2: i32 = 3;
/// Value encodings that expand: dictionary references, and delta-encoded
/// strings, each of which may repeat up to the whole of the previous one.
pub(super) const PLAIN_DICTIONARY: i32 = 2;
pub(super) const DELTA_BYTE_ARRAY: i32 = 7;
pub(super) const RLE_DICTIONARY: i32 = 8;

/// What a page header says about the page that follows it.
#[derive(Debug, Default)]
pub(super) struct PageHeader {
    pub(super) kind: i32,
    pub(super) uncompressed: i32,
    pub(super) compressed: i32,
    /// Values in a data page (nulls included), entries in a dictionary page.
    pub(super) values: i32,
    pub(super) encoding: i32,
}

/// Reads a `PageHeader`.
pub(super) fn page_header<R: Read>(p: &mut Compact<R>) -> io::Result<PageHeader> {
    let mut h = PageHeader { kind: -1, ..PageHeader::default() };
    let mut last = 0;
    while let Some((id, ty)) = p.field(&mut last)? {
        match (id, ty) {
            (1, _) => h.kind = p.i32(ty)?,
            (2, _) => h.uncompressed = p.i32(ty)?,
            (3, _) => h.compressed = p.i32(ty)?,
            // Data page, dictionary page and data page v2 headers: the
            // number of values is field 1 of each, the encoding field 2 of
            // the first two and field 4 of the third.
            (5 | 7 | 8, STRUCT) => {
                let encoding_field = if id == 8 { 4 } else { 2 };
                let mut inner = 0;
                while let Some((fid, fty)) = p.field(&mut inner)? {
                    if fid == 1 {
                        h.values = p.i32(fty)?;
                    } else if fid == encoding_field {
                        h.encoding = p.i32(fty)?;
                    } else {
                        p.skip(fty)?;
                    }
                }
            }
            _ => p.skip(ty)?,
        }
    }
    if h.kind < 0 || h.uncompressed < 0 || h.compressed < 0 || h.values < 0 {
        return Err(bad("a page header without its type or with a negative size"));
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A compact-protocol writer for the few shapes the tests need.
    struct W(Vec<u8>);

    impl W {
        fn varint(&mut self, mut v: u64) {
            while v >= 0x80 {
                self.0.push((v as u8 & 0x7f) | 0x80);
                v >>= 7;
            }
            self.0.push(v as u8);
        }
        fn field(&mut self, delta: u8, ty: u8) {
            self.0.push(delta << 4 | ty);
        }
        fn i32(&mut self, delta: u8, v: i32) {
            self.field(delta, I32);
            self.varint(((v << 1) ^ (v >> 31)) as u32 as u64);
        }
        fn string(&mut self, delta: u8, s: &str) {
            self.field(delta, BINARY);
            self.varint(s.len() as u64);
            self.0.extend_from_slice(s.as_bytes());
        }
    }

    /// A footer whose schema is a chain of `depth` groups over one column.
    fn chain(depth: usize) -> Vec<u8> {
        let mut w = W(Vec::new());
        w.i32(1, 2); // version
        w.field(1, LIST);
        let n = depth + 2;
        w.0.push(15 << 4 | STRUCT);
        w.varint(n as u64);
        for i in 0..n {
            // name (4), then num_children (5); the column has a type (1).
            if i + 1 < n {
                w.string(4, "g");
                w.i32(1, 1);
            } else {
                w.i32(1, 6);
                w.string(3, "leaf");
            }
            w.0.push(0);
        }
        w.0.push(0);
        w.0
    }

    #[test]
    fn schema_depth_is_counted_without_recursion() {
        assert_eq!(check_footer(&chain(0), 64).unwrap(), 1);
        assert_eq!(check_footer(&chain(63), 64).unwrap(), 64);
        let e = check_footer(&chain(64), 64).unwrap_err().to_string();
        assert!(e.contains("more than 64 levels"), "{e}");
        // A million levels: refused as quickly, with no stack to speak of.
        assert!(check_footer(&chain(1_000_000), 64).is_err());
        // Cut short, or a length that the bytes do not hold: an error.
        let c = chain(3);
        assert!(check_footer(&c[..c.len() - 3], 64).is_err());
        let mut w = W(Vec::new());
        w.field(2, BINARY);
        w.varint(u64::from(u32::MAX));
        assert!(check_footer(&w.0, 64).is_err());
    }

    #[test]
    fn more_row_groups_than_bytes_are_refused() {
        let mut c = chain(1);
        c.pop(); // the footer's stop
                 // Field 3 (num_rows), then field 4: a list of 2^31 - 1 row groups.
        let mut w = W(c);
        w.field(1, I64);
        w.varint(0);
        w.field(1, LIST);
        w.0.push(15 << 4 | STRUCT);
        w.varint(i32::MAX as u64);
        w.0.extend_from_slice(&[0; 16]);
        let e = check_footer(&w.0, 64).unwrap_err().to_string();
        assert!(e.contains("claims 2147483647 row groups in 16 bytes"), "{e}");
    }

    #[test]
    fn skipping_stops_at_the_nesting_limit() {
        // Lists of lists, 100 deep, in field 1 of the footer.
        let mut w = W(Vec::new());
        w.field(1, LIST);
        for _ in 0..100 {
            w.0.push(1 << 4 | LIST);
        }
        w.0.push(0);
        let e = check_footer(&w.0, 64).unwrap_err().to_string();
        assert!(e.contains("nested more than 32"), "{e}");
    }

    #[test]
    fn a_page_header_is_read() {
        let mut w = W(Vec::new());
        w.i32(1, DICTIONARY_PAGE);
        w.i32(1, 1000);
        w.i32(1, 100);
        w.field(4, STRUCT); // field 7: dictionary page header
        w.i32(1, 3);
        w.i32(1, 0);
        w.0.push(0);
        w.0.push(0);
        let mut p = Compact::new(&w.0[..]);
        let h = page_header(&mut p).unwrap();
        assert_eq!((h.kind, h.uncompressed, h.compressed, h.values), (DICTIONARY_PAGE, 1000, 100, 3));
        assert_eq!(p.read, w.0.len() as u64);
    }
}
