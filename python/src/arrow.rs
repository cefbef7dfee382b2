//! Arrow buffers in and out, for the Spark job: texts read from a string
//! array's offsets and bytes, results returned as flat arrays with offsets,
//! everything checked, no Python object per row.

use neardup_core::{
    content_key, fold_key, ContentHash, Fingerprinter as CoreFingerprinter, ImageRow, MemoryIndex, Params,
};
use pyo3::prelude::*;

use crate::value_error;

/// Value `i`'s place in a flat array of `len` values delimited by
/// `offsets` (n + 1 positions), when the offsets are in order and in range.
fn span<O: Copy + TryInto<usize>>(offsets: &[O], len: usize, i: usize) -> Option<std::ops::Range<usize>> {
    match (offsets[i].try_into(), offsets[i + 1].try_into()) {
        (Ok(a), Ok(b)) if a <= b && b <= len => Some(a..b),
        _ => None,
    }
}

/// Text `i` of an Arrow string array: `offsets` (n + 1 positions into
/// `data`) and `data` (UTF-8), checked.
pub(crate) fn text_at<'a>(offsets: &[i64], data: &'a [u8], i: usize) -> PyResult<&'a str> {
    let at = span(offsets, data.len(), i).ok_or_else(|| {
        value_error(format!(
            "text {i}: offsets {}..{} outside the {} bytes of data",
            offsets[i],
            offsets[i + 1],
            data.len()
        ))
    })?;
    std::str::from_utf8(&data[at]).map_err(|e| value_error(format!("text {i}: not UTF-8: {e}")))
}

/// The number of texts `offsets` delimits.
fn count(offsets: &[i64]) -> usize {
    offsets.len().saturating_sub(1)
}

/// An offset into a flat output array, as Arrow's `int32` offsets.
fn offset32(at: usize, what: &str) -> PyResult<i32> {
    i32::try_from(at).map_err(|_| value_error(format!("more than 2^31 {what} in one call")))
}

/// Each text's LSH band keys and content hash key: with `posting`, the
/// 32-bit keys the single-machine index files items under ([`fold_key`],
/// [`content_key`]); else the 64-bit band keys and the digest's first 8
/// bytes big-endian. Returns `(key_offsets, keys, hashes)`.
pub(crate) fn band_keys_of(
    f: &mut CoreFingerprinter,
    offsets: &[i64],
    data: &[u8],
    posting: bool,
) -> PyResult<(Vec<i32>, Vec<u64>, Vec<u64>)> {
    let n = count(offsets);
    let mut key_offsets = Vec::with_capacity(n + 1);
    let mut keys = Vec::new();
    let mut hashes = Vec::with_capacity(n);
    key_offsets.push(0i32);
    for i in 0..n {
        let fp = f.fingerprint(text_at(offsets, data, i)?);
        if posting {
            keys.extend(fp.band_keys.iter().map(|&k| u64::from(fold_key(k))));
            hashes.push(u64::from(content_key(&fp.content_hash)));
        } else {
            keys.extend_from_slice(&fp.band_keys);
            let mut first = [0u8; 8];
            first.copy_from_slice(&fp.content_hash.0[..8]);
            hashes.push(u64::from_be_bytes(first));
        }
        key_offsets.push(offset32(keys.len(), "band keys")?);
    }
    Ok((key_offsets, keys, hashes))
}

/// Items as a saved index holds them (what [`MemoryIndex::insert_row`]
/// takes back), flat: item `i`'s content hash is `hashes[16 i..16 i + 16]`,
/// its folded band keys `keys[key_offsets[i]..key_offsets[i + 1]]` (none
/// for an item without band keys), likewise its sketch and its canonical
/// features (`int64` offsets).
#[derive(Debug, Default)]
pub(crate) struct Images {
    pub hashes: Vec<u8>,
    pub key_offsets: Vec<i32>,
    pub keys: Vec<u32>,
    pub sketch_offsets: Vec<i32>,
    pub sketches: Vec<u8>,
    pub feature_offsets: Vec<i64>,
    pub features: Vec<u64>,
}

/// The images of texts: each fingerprinted and put in a scratch index made
/// under `params`, then read back as the index's own image row, so they are
/// exactly what a saved index records.
pub(crate) fn images_of(f: &mut CoreFingerprinter, params: &Params, offsets: &[i64], data: &[u8]) -> PyResult<Images> {
    let n = count(offsets);
    let mut scratch = MemoryIndex::new(params.clone());
    for i in 0..n {
        scratch.insert(f.fingerprint(text_at(offsets, data, i)?)).map_err(value_error)?;
    }
    let view = scratch.candidate_index().view();
    let mut out =
        Images { key_offsets: vec![0], sketch_offsets: vec![0], feature_offsets: vec![0], ..Images::default() };
    for id in 0..n as u32 {
        let row = view.row(id).ok_or_else(|| value_error(format!("text {id}: not in the scratch index")))?;
        out.hashes.extend_from_slice(&row.content_hash.0);
        out.keys.extend_from_slice(row.folded);
        out.key_offsets.push(offset32(out.keys.len(), "band keys")?);
        out.sketches.extend_from_slice(row.sketch);
        out.sketch_offsets.push(offset32(out.sketches.len(), "sketch bytes")?);
        out.features.extend_from_slice(scratch.features(id).unwrap_or(&[]));
        out.feature_offsets.push(out.features.len() as i64);
    }
    Ok(out)
}

/// [`Images`] read back (from an earlier run's index rows), checked as a
/// saved index's items are: every offset in order and in range, 16 bytes of
/// hash an item, features strictly increasing. Band key and sketch widths
/// are checked by the index they go into.
pub(crate) struct ImagesIn<'a> {
    pub hashes: &'a [u8],
    pub key_offsets: &'a [i32],
    pub keys: &'a [u32],
    pub sketch_offsets: &'a [i32],
    pub sketches: &'a [u8],
    pub feature_offsets: &'a [i64],
    pub features: &'a [u64],
}

/// Item `i`'s place among `data`, checked ([`span`]).
fn item_span<T, O>(offsets: &[O], data: &[T], i: usize, what: &str) -> PyResult<std::ops::Range<usize>>
where
    O: Copy + TryInto<usize> + std::fmt::Display,
{
    span(offsets, data.len(), i).ok_or_else(|| {
        value_error(format!(
            "item {i}: {what} offsets {}..{} outside the {} values",
            offsets[i],
            offsets[i + 1],
            data.len()
        ))
    })
}

impl ImagesIn<'_> {
    /// The number of items, when every array agrees on it.
    pub fn len(&self) -> PyResult<usize> {
        let n = self.key_offsets.len().saturating_sub(1);
        let agree = self.sketch_offsets.len() == n + 1
            && self.feature_offsets.len() == n + 1
            && self.hashes.len() == n * 16
            && self.key_offsets.len() == n + 1;
        if !agree {
            return Err(value_error(format!(
                "index rows disagree on their number: {} key offsets, {} sketch offsets, {} feature offsets, {} hash bytes",
                self.key_offsets.len(),
                self.sketch_offsets.len(),
                self.feature_offsets.len(),
                self.hashes.len()
            )));
        }
        Ok(n)
    }

    /// Item `i`: its image row and features.
    pub fn item(&self, i: usize) -> PyResult<(ImageRow<'_>, Vec<u64>)> {
        let keys = item_span(self.key_offsets, self.keys, i, "band key")?;
        let sketch = item_span(self.sketch_offsets, self.sketches, i, "sketch")?;
        let features = &self.features[item_span(self.feature_offsets, self.features, i, "feature")?];
        if features.windows(2).any(|w| w[0] >= w[1]) {
            return Err(value_error(format!("item {i}: its features are not in increasing order")));
        }
        let mut hash = [0u8; 16];
        hash.copy_from_slice(&self.hashes[16 * i..16 * i + 16]);
        let row =
            ImageRow { folded: &self.keys[keys], sketch: &self.sketches[sketch], content_hash: ContentHash(hash) };
        Ok((row, features.to_vec()))
    }
}
