//! What reading a Parquet row group may cost, known before it is decoded.
//!
//! A Parquet file says little about what its pages decode to: a page of a
//! few bytes can reference a dictionary entry of a megabyte a million
//! times. So before a row group is read, the page headers of each column
//! read are walked (not decoded), and
//!
//! - a page that decompresses to more than the budget is refused (a page is
//!   decompressed whole);
//! - a column whose values could decode to more than [`EXPANSION`] × its
//!   pages' bytes plus the budget is refused: the values that reference its
//!   dictionary, each counted at the dictionary's longest entry (read from
//!   the dictionary page), and for a repeated column, whose rows may hold
//!   any number of values, also its delta-encoded strings and its arrays;
//! - the rows decoded at a time are chosen so that one batch of the other
//!   columns decodes to at most [`BATCH_BYTES`] whatever the values are
//!   (one row at least), as a JSONL chunk holds a few megabytes or one line.
//!
//! The budget is the larger of 1 GiB and 4 × `--max-line-bytes`.

use std::io::{Seek, SeekFrom};
use std::sync::Arc;

use parquet::arrow::ProjectionMask;
use parquet::basic::Type as PhysicalType;
use parquet::column::page::{Page, PageReader};
use parquet::file::metadata::{ColumnChunkMetaData, ParquetMetaData};
use parquet::file::serialized_reader::SerializedPageReader;

use super::source::Source;
use super::thrift::{self, Compact};

/// Rows decoded at a time, at most.
const BATCH_ROWS: usize = 2048;
/// Most bytes a batch should decode to (when one row can take more, a
/// batch is one row). A few batches are held at once, each as rows and as
/// the texts taken from them.
const BATCH_BYTES: u64 = 64 << 20;
/// Bytes of arrays (offsets, validity, levels) a value may take beyond its
/// own bytes.
const PER_VALUE: u64 = 16;
/// Bytes of array structure a value of a repeated column may take (an
/// offset and two levels): such a column's values per row are unbounded,
/// so they count against the whole row group.
const PER_REPEATED_VALUE: u64 = 8;
/// How much larger than its stored (decompressed) bytes a column may
/// decode, before the budget counts.
const EXPANSION: u64 = 16;

/// The budget of a Parquet read: the larger of 1 GiB and 4 × the longest
/// accepted text (`--max-line-bytes`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Budget {
    /// Most bytes a page may decompress to, and most a column of a row
    /// group may decode to beyond [`EXPANSION`] × its pages.
    pub(super) bytes: u64,
}

impl Budget {
    pub(super) fn new(max_line: usize) -> Budget {
        Budget { bytes: (1u64 << 30).max(4 * max_line as u64) }
    }
}

/// How a row group is read.
#[derive(Debug)]
pub(super) struct Plan {
    pub(super) batch_rows: usize,
    /// Most bytes the values of the column at each leaf index may take in
    /// one batch (non-repeated columns).
    bounds: Vec<(usize, u64)>,
}

impl Plan {
    /// Most value bytes a batch may hold of the column at `leaf`.
    pub(super) fn bound(&self, leaf: usize) -> Option<u64> {
        self.bounds.iter().find(|(l, _)| *l == leaf).map(|&(_, b)| b)
    }
}

/// Most pages read of one column chunk (what a page says is kept while
/// the batch size is chosen).
const MAX_PAGES: usize = 1 << 20;

/// How a data page's values decode.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Values {
    /// To at most the page's bytes (plain and the like).
    Plain,
    /// Each to at most the dictionary's longest entry.
    Dictionary,
    /// Each to at most the page's bytes (delta-encoded strings, each of
    /// which may repeat the whole of the one before).
    Delta,
}

/// A data page: its values (one a row, in a column that is not repeated),
/// its decompressed bytes, and how its values decode.
#[derive(Debug, Clone, Copy)]
struct DataPage {
    values: u32,
    bytes: u32,
    kind: Values,
}

/// What the page headers of one column chunk say.
#[derive(Debug, Default)]
struct Pages {
    /// Largest page, decompressed (a page is decompressed whole).
    largest: u64,
    /// All pages, decompressed.
    stored: u64,
    /// The dictionary page's decompressed size, when there is one.
    dictionary: Option<u64>,
    /// Values of data pages that reference the dictionary.
    dictionary_values: u64,
    /// Values of all data pages (nulls included).
    values: u64,
    /// Most bytes delta-encoded strings may decode to.
    delta: u64,
    data: Vec<DataPage>,
}

fn sat(v: u128) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// Walks the page headers of a column chunk, checking each page against
/// the chunk's byte range and the budget.
fn walk_pages(source: &Source, file_len: u64, column: &ColumnChunkMetaData, budget: Budget) -> Result<Pages, String> {
    let (start, len) = column.byte_range();
    let end = start.checked_add(len).filter(|&e| e <= file_len).ok_or_else(|| {
        format!("its pages ({len} bytes at {start}) lie outside the file ({file_len} bytes): the file is damaged")
    })?;
    let mut r = source.chunk(start, len).map_err(|e| e.to_string())?;
    let mut pages = Pages::default();
    let mut at = start;
    while at < end {
        let mut p = Compact::new(&mut r);
        let h = thrift::page_header(&mut p).map_err(|e| format!("a page header at byte {at} is damaged ({e})"))?;
        let header = p.read;
        let (compressed, size, values) = (h.compressed as u64, h.uncompressed as u64, h.values as u64);
        let next = at.saturating_add(header).saturating_add(compressed);
        if next > end {
            return Err(format!("a page at byte {at} runs past the end of its column: the file is damaged"));
        }
        if size > budget.bytes {
            return Err(format!(
                "a page at byte {at} decompresses to {size} bytes, over the {}-byte budget{}",
                budget.bytes, RAISE
            ));
        }
        pages.largest = pages.largest.max(size);
        pages.stored += size;
        match h.kind {
            thrift::DICTIONARY_PAGE => pages.dictionary = Some(pages.dictionary.unwrap_or(0).max(size)),
            thrift::DATA_PAGE | thrift::DATA_PAGE_V2 => {
                if pages.data.len() == MAX_PAGES {
                    return Err(format!("more than {MAX_PAGES} pages"));
                }
                pages.values += values;
                let kind = match h.encoding {
                    thrift::PLAIN_DICTIONARY | thrift::RLE_DICTIONARY => {
                        pages.dictionary_values += values;
                        Values::Dictionary
                    }
                    thrift::DELTA_BYTE_ARRAY => {
                        pages.delta = pages.delta.saturating_add(sat(u128::from(values) * u128::from(size)));
                        Values::Delta
                    }
                    _ => Values::Plain,
                };
                pages.data.push(DataPage { values: h.values as u32, bytes: h.uncompressed as u32, kind });
            }
            _ => {}
        }
        r.seek(SeekFrom::Current(compressed as i64)).map_err(|e| e.to_string())?;
        at = next;
    }
    Ok(pages)
}

/// Most bytes the values of any `rows` consecutive rows of a column that is
/// not repeated can decode to: over the pages those rows overlap, a plain
/// page's bytes, each value read from a delta-encoded page at that page's
/// bytes, and each value that references the dictionary at its longest
/// entry (`entry`).
fn window_bound(pages: &[DataPage], rows: u64, entry: u64) -> u64 {
    // Bytes, and values that reference the dictionary.
    let cost = |p: &DataPage| -> (u64, u64) {
        let read = u64::from(p.values).min(rows);
        match p.kind {
            Values::Plain => (u64::from(p.bytes), 0),
            Values::Dictionary => (0, read),
            Values::Delta => (read.saturating_mul(u64::from(p.bytes)), 0),
        }
    };
    // The row each page ends before.
    let (mut end, mut ends) = (0u64, Vec::with_capacity(pages.len()));
    for p in pages {
        end += u64::from(p.values);
        ends.push(end);
    }
    // Rows starting in page i reach furthest starting at its last row; the
    // pages `i..j` are those rows' pages.
    let (mut j, mut bytes, mut referencing, mut most) = (0, 0u64, 0u64, 0u64);
    for i in 0..pages.len() {
        if j < i {
            (j, bytes, referencing) = (i, 0, 0);
        }
        let reach = ends[i].saturating_sub(1).saturating_add(rows);
        while j < pages.len() && (j == i || ends[j - 1] < reach) {
            let (b, r) = cost(&pages[j]);
            (bytes, referencing) = (bytes.saturating_add(b), referencing + r);
            j += 1;
        }
        most = most.max(bytes.saturating_add(referencing.min(rows).saturating_mul(entry)));
        let (b, r) = cost(&pages[i]);
        (bytes, referencing) = (bytes - b, referencing - r);
    }
    most
}

/// The longest entry of a column's dictionary, read from its dictionary
/// page (already checked against the budget).
fn longest_entry(
    source: &Source,
    column: &ColumnChunkMetaData,
    rows: usize,
    dictionary_bytes: u64,
) -> Result<u64, String> {
    let descr = column.column_descr();
    match descr.physical_type() {
        PhysicalType::BYTE_ARRAY => {}
        PhysicalType::FIXED_LEN_BYTE_ARRAY => return Ok(descr.type_length().max(0) as u64),
        PhysicalType::BOOLEAN => return Ok(1),
        PhysicalType::INT32 | PhysicalType::FLOAT => return Ok(4),
        PhysicalType::INT64 | PhysicalType::DOUBLE => return Ok(8),
        PhysicalType::INT96 => return Ok(12),
    }
    // A small dictionary bounds its entries well enough by its size.
    if dictionary_bytes <= 64 << 10 {
        return Ok(dictionary_bytes);
    }
    let read = || -> parquet::errors::Result<Option<Page>> {
        SerializedPageReader::new(Arc::new(source.clone()), column, rows, None)?.get_next_page()
    };
    let page = super::caught(read).map_err(|e| e.to_string())?.map_err(|e| e.to_string())?;
    let Some(Page::DictionaryPage { buf, num_values, .. }) = page else {
        return Err("its dictionary page is not where its metadata says".into());
    };
    Ok(entry_lengths(&buf, num_values)?.into_iter().max().map_or(0, u64::from))
}

/// The lengths of a PLAIN-encoded byte-array dictionary's entries.
fn entry_lengths(buf: &[u8], num_values: u32) -> Result<Vec<u32>, String> {
    let mut lens = Vec::with_capacity((num_values as usize).min(buf.len() / 4));
    let mut at = 0usize;
    for _ in 0..num_values {
        let len = buf
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
            .filter(|&n| at + 4 + n <= buf.len())
            .ok_or("its dictionary page is damaged")?;
        lens.push(len as u32);
        at += 4 + len;
    }
    Ok(lens)
}

/// What the values of a byte-array column chunk that reference its
/// dictionary decode to, exactly: each page read in turn (decompressed, one
/// at a time, each already checked against the budget), its dictionary
/// indices decoded and each counted at its entry's length — no value is
/// built. Asked only when counting every reference at the longest entry
/// would pass what the column may decode to: pyarrow dictionary-encodes a
/// row group's first values, and one long document among them made that
/// bound gigabytes for a file of megabytes. `None` where a page's levels
/// are in the deprecated BIT_PACKED encoding (the bound then stands).
fn referenced_bytes(source: &Source, column: &ColumnChunkMetaData, rows: usize) -> Result<Option<u64>, String> {
    use parquet::basic::Encoding;
    let descr = column.column_descr();
    let (repeated, defined) = (descr.max_rep_level() > 0, descr.max_def_level() > 0);
    let damaged = |e: parquet::errors::ParquetError| e.to_string();
    let mut reader = super::caught(|| SerializedPageReader::new(Arc::new(source.clone()), column, rows, None))
        .map_err(|e| e.to_string())?
        .map_err(damaged)?;
    let dictionary = |e: Encoding| matches!(e, Encoding::PLAIN_DICTIONARY | Encoding::RLE_DICTIONARY);
    let (mut lens, mut total) = (Vec::new(), 0u64);
    loop {
        let page = super::caught(|| reader.get_next_page()).map_err(|e| e.to_string())?.map_err(damaged)?;
        let (buf, at, count) = match page {
            None => return Ok(Some(total)),
            Some(Page::DictionaryPage { buf, num_values, .. }) => {
                lens = entry_lengths(&buf, num_values)?;
                continue;
            }
            Some(Page::DataPage { buf, num_values, encoding, def_level_encoding, rep_level_encoding, .. }) => {
                if !dictionary(encoding) {
                    continue;
                }
                // Repetition, then definition levels, each RLE-encoded
                // after a 4-byte length.
                let mut at = 0usize;
                for (present, enc) in [(repeated, rep_level_encoding), (defined, def_level_encoding)] {
                    if !present {
                        continue;
                    }
                    if enc != Encoding::RLE {
                        return Ok(None);
                    }
                    let n = buf
                        .get(at..at + 4)
                        .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
                        .ok_or("a data page's levels are damaged")?;
                    at += 4 + n;
                }
                (buf, at, num_values)
            }
            Some(Page::DataPageV2 {
                buf,
                num_values,
                num_nulls,
                encoding,
                def_levels_byte_len,
                rep_levels_byte_len,
                ..
            }) => {
                if !dictionary(encoding) {
                    continue;
                }
                (buf, (def_levels_byte_len + rep_levels_byte_len) as usize, num_values.saturating_sub(num_nulls))
            }
        };
        let values = buf.get(at..).ok_or("a data page's levels run past its end")?;
        total = total.saturating_add(indices_bytes(values, count, &lens)?);
    }
}

/// The bytes that up to `count` dictionary indices of an RLE/bit-packed
/// hybrid run (after its one-byte bit width) reference, at `lens`.
fn indices_bytes(data: &[u8], count: u32, lens: &[u32]) -> Result<u64, String> {
    let bad = || "a data page's dictionary indices are damaged".to_owned();
    let len_of = |i: u64| lens.get(usize::try_from(i).unwrap_or(usize::MAX)).map(|&l| u64::from(l)).ok_or_else(bad);
    let (&width, mut rest) = data.split_first().ok_or_else(bad)?;
    if width > 32 {
        return Err(bad());
    }
    let (width, mut left, mut total) = (u32::from(width), u64::from(count), 0u64);
    while left > 0 && !rest.is_empty() {
        // The run's header, an unsigned LEB128.
        let (mut header, mut shift) = (0u64, 0u32);
        loop {
            let (&b, r) = rest.split_first().ok_or_else(bad)?;
            rest = r;
            header |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift > 56 {
                return Err(bad());
            }
        }
        if header & 1 == 0 {
            // A run of one value repeated.
            let bytes = width.div_ceil(8) as usize;
            let v = rest.get(..bytes).ok_or_else(bad)?;
            rest = &rest[bytes..];
            let value = v.iter().rev().fold(0u64, |acc, &b| acc << 8 | u64::from(b));
            let n = (header >> 1).min(left);
            total = total.saturating_add(n.saturating_mul(len_of(value)?));
            left -= n;
        } else {
            // Groups of eight values, bit-packed least significant bit first.
            let values = (header >> 1).saturating_mul(8);
            let bytes = usize::try_from((header >> 1).saturating_mul(u64::from(width))).map_err(|_| bad())?;
            let packed = rest.get(..bytes).unwrap_or(rest);
            rest = &rest[packed.len()..];
            for i in 0..values.min(left) {
                let bit = i * u64::from(width);
                let mut value = 0u64;
                for b in 0..u64::from(width) {
                    let at = bit + b;
                    let byte = *packed.get((at / 8) as usize).ok_or_else(bad)?;
                    value |= u64::from(byte >> (at % 8) & 1) << b;
                }
                total = total.saturating_add(len_of(value)?);
            }
            left -= values.min(left);
        }
    }
    Ok(total)
}

/// How to raise the budget, for messages.
const RAISE: &str = " (the larger of 1 GiB and 4 × --max-line-bytes; raise --max-line-bytes to read it)";

/// Checks row group `group` of a file against the budget and chooses its
/// batch size. An error names the column and says why.
pub(super) fn plan(
    source: &Source,
    file_len: u64,
    metadata: &ParquetMetaData,
    group: usize,
    mask: &ProjectionMask,
    budget: Budget,
) -> Result<Plan, String> {
    let rg = metadata.row_group(group);
    let rows = usize::try_from(rg.num_rows()).unwrap_or(0);
    // The data pages of the columns read that are not repeated, with the
    // longest entry of their dictionaries.
    let mut read = Vec::new();
    for (leaf, column) in rg.columns().iter().enumerate() {
        if !mask.leaf_included(leaf) {
            continue;
        }
        let name = column.column_path().string();
        let at = |why: String| format!("row group {group}, column {name:?}: {why}");
        let pages = walk_pages(source, file_len, column, budget).map_err(at)?;
        let entry = match pages.dictionary {
            Some(bytes) if pages.dictionary_values > 0 => longest_entry(source, column, rows, bytes).map_err(at)?,
            _ => 0,
        };
        let repeated = column.column_descr().max_rep_level() > 0;
        // What the whole column could decode to beyond its pages' bytes: the
        // values that reference its dictionary, and for a repeated column
        // (whose rows may hold any number of values, so that one batch may
        // hold them all) its delta-encoded strings and its arrays too. (The
        // batch size bounds what the others decode at a time.)
        let repeated_values =
            if repeated { pages.delta.saturating_add(pages.values.saturating_mul(PER_REPEATED_VALUE)) } else { 0 };
        let mut expands = sat(u128::from(pages.dictionary_values) * u128::from(entry)).saturating_add(repeated_values);
        let allowed = budget.bytes.saturating_add(pages.stored.saturating_mul(EXPANSION));
        // Every reference at the longest entry is a bound; past it, count
        // what the references do reference.
        let mut referenced = None;
        if expands > allowed
            && pages.dictionary_values > 0
            && column.column_descr().physical_type() == PhysicalType::BYTE_ARRAY
        {
            referenced = referenced_bytes(source, column, rows).map_err(at)?;
            if let Some(r) = referenced {
                expands = r.saturating_add(repeated_values);
            }
        }
        if expands > allowed {
            let why = if let Some(r) = referenced {
                format!("{} values reference {r} bytes of dictionary entries", pages.dictionary_values)
            } else if pages.dictionary_values > 0 && entry > 0 {
                format!("{} values reference a dictionary entry of up to {entry} bytes", pages.dictionary_values)
            } else {
                format!("{} values in {} bytes of pages", pages.values, pages.stored)
            };
            return Err(at(format!(
                "its values could decode to {expands} bytes ({why}), more than {EXPANSION} × its pages' {} bytes plus \
                 the {}-byte budget{RAISE}",
                pages.stored, budget.bytes
            )));
        }
        if !repeated {
            read.push((leaf, pages.data, entry));
        }
    }
    // The most rows a batch, halved until what its rows of the columns
    // that are not repeated can decode to is within the batch budget (one
    // row at least).
    let bound = |rows: u64| -> Vec<(usize, u64)> {
        let per = |(leaf, data, entry): &(usize, Vec<DataPage>, u64)| {
            (*leaf, window_bound(data, rows, *entry).saturating_add(rows * PER_VALUE))
        };
        read.iter().map(per).collect()
    };
    let mut batch_rows = BATCH_ROWS;
    let mut bounds = bound(batch_rows as u64);
    while batch_rows > 1 && bounds.iter().fold(0u64, |t, (_, b)| t.saturating_add(*b)) > BATCH_BYTES {
        batch_rows /= 2;
        bounds = bound(batch_rows as u64);
    }
    Ok(Plan { batch_rows, bounds })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dictionary_indices_are_counted_at_their_entries() {
        let lens = [10, 1000, 7, 3];
        // Bit width 2; a run of five 1s; a bit-packed group of eight
        // (0, 1, 2, 3, 3, 2, 1, 0), least significant bit first.
        let data = [2u8, 5 << 1, 1, 0b11, 0b1110_0100, 0b0001_1011];
        let want = 5 * 1000 + (10 + 1000 + 7 + 3 + 3 + 7 + 1000 + 10);
        assert_eq!(indices_bytes(&data, 13, &lens), Ok(want));
        // Fewer values than the runs hold: only those are counted.
        assert_eq!(indices_bytes(&data, 6, &lens), Ok(5 * 1000 + 10));
        // An index past the dictionary, a bit width over 32, a cut run.
        assert!(indices_bytes(&[2, 1 << 1, 3], 1, &lens[..2]).is_err());
        assert!(indices_bytes(&[33, 2, 0], 1, &lens).is_err());
        assert!(indices_bytes(&[16, 4 << 1, 1], 4, &lens).is_err());
    }

    fn page(values: u32, bytes: u32, kind: Values) -> DataPage {
        DataPage { values, bytes, kind }
    }

    #[test]
    fn a_window_counts_the_pages_its_rows_can_touch() {
        // Rows 99..2147 touch pages 0 to 21 (page 21 starts at row 2100).
        let plain = vec![page(100, 1000, Values::Plain); 50];
        assert_eq!(window_bound(&plain, 2048, 0), 22 * 1000);
        assert_eq!(window_bound(&plain, 1, 0), 1000);
        assert_eq!(window_bound(&plain[..3], 2048, 0), 3000);
        // One large page among small ones is counted once.
        let mut mixed = plain.clone();
        mixed[30] = page(1, 2_000_000, Values::Plain);
        assert_eq!(window_bound(&mixed, 2048, 0), 2_000_000 + 22 * 1000);
        // Dictionary references count at the longest entry, a row each.
        let bomb = vec![page(20_000, 10, Values::Dictionary); 3];
        assert_eq!(window_bound(&bomb, 256, 600_000), 256 * 600_000);
        assert_eq!(window_bound(&[page(8, 10, Values::Dictionary)], 256, 600_000), 8 * 600_000);
        assert_eq!(window_bound(&[page(10, 100, Values::Delta)], 4, 0), 400);
        assert_eq!(window_bound(&[], 2048, 0), 0);
        assert_eq!(window_bound(&[page(0, 0, Values::Plain), page(5, 50, Values::Plain)], 2048, 0), 50);
    }

    #[test]
    fn the_budget_follows_the_longest_text() {
        assert_eq!(Budget::new(256 << 20).bytes, 1 << 30);
        assert_eq!(Budget::new(1 << 20).bytes, 1 << 30);
        assert_eq!(Budget::new(1 << 30).bytes, 4 << 30);
    }
}
