//! `neardup._neardup`: neardup's core for Python (pyo3, abi3).
//!
//! The same parameters, names, defaults and error messages as the command
//! line (`neardup dedup --help`): a configuration is checked by
//! `neardup_core::Config::resolve`, and its error is the Python
//! `ValueError`'s message. Work on texts runs with the GIL released.

use std::collections::HashMap;

mod arrow;

use neardup_core::Greedy;
use neardup_core::{write_saved_index, FormatError, Header, Reader, SavedItem};
use neardup_core::{
    Config, Fingerprint, Fingerprinter as CoreFingerprinter, Match, MemoryIndex, Normalizer, Params, ShingleKind,
    SignatureScheme,
};
use numpy::{PyArray1, PyReadonlyArray1, ToPyArray};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// The pipeline configuration from keyword arguments (CLI names and defaults).
#[allow(clippy::too_many_arguments)]
fn params(
    threshold: f64,
    shingle_width: u32,
    char_shingles: bool,
    normalizer: &str,
    num_perm: Option<u32>,
    bands: Option<u32>,
    rows: Option<u32>,
    signature: &str,
    seed: u64,
    max_candidates: u32,
    max_bucket_read: u32,
) -> PyResult<Params> {
    let signature = SignatureScheme::from_name(signature).map_err(value_error)?;
    let config = Config {
        normalizer: Normalizer::from_name(normalizer).map_err(value_error)?,
        shingle_kind: if char_shingles { ShingleKind::Char } else { ShingleKind::Word },
        shingle_width,
        signature,
        // 64 SimHash bits or 128 MinHash values unless given, as the CLI.
        num_perm: num_perm.unwrap_or(signature.default_num_perm()),
        bands,
        rows,
        seed,
        threshold,
        max_candidates,
        max_bucket_read,
        ..Config::default()
    };
    config.resolve().map_err(value_error)
}

/// What one text became: content hash, token count, canonical features,
/// MinHash signature and LSH band keys (the last three as NumPy arrays).
#[pyclass(name = "Fingerprint", module = "neardup", frozen)]
#[derive(Debug, Clone)]
pub struct Fingerprint_ {
    /// BLAKE3-128 of the normalized text, hex.
    #[pyo3(get)]
    content_hash: String,
    /// Tokens in the normalized text.
    #[pyo3(get)]
    tokens: u32,
    features: Vec<u64>,
    signature: Vec<u32>,
    band_keys: Vec<u64>,
    /// True when the text had more shingles than the limit and is matched
    /// by exact content only.
    #[pyo3(get)]
    degraded: bool,
}

impl From<Fingerprint> for Fingerprint_ {
    fn from(fp: Fingerprint) -> Self {
        Fingerprint_ {
            content_hash: fp.content_hash.to_hex(),
            tokens: fp.tokens,
            degraded: fp.degraded.is_some(),
            features: fp.features,
            signature: fp.signature,
            band_keys: fp.band_keys,
        }
    }
}

#[pymethods]
impl Fingerprint_ {
    /// Sorted, unique 64-bit shingle hashes (empty when degraded), `uint64`.
    #[getter]
    fn features<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
        self.features.to_pyarray(py)
    }

    /// The MinHash (one-permutation by default) signature, `uint32`.
    #[getter]
    fn signature<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u32>> {
        self.signature.to_pyarray(py)
    }

    /// The LSH band keys, `uint64`.
    #[getter]
    fn band_keys<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
        self.band_keys.to_pyarray(py)
    }

    fn __repr__(&self) -> String {
        format!(
            "Fingerprint(content_hash='{}', tokens={}, features={}, signature={}, band_keys={})",
            self.content_hash,
            self.tokens,
            self.features.len(),
            self.signature.len(),
            self.band_keys.len()
        )
    }
}

/// Text → fingerprint under one configuration.
#[pyclass(module = "neardup")]
pub struct Fingerprinter {
    inner: CoreFingerprinter,
}

#[pymethods]
impl Fingerprinter {
    #[new]
    #[pyo3(signature = (*, threshold=0.8, shingle_width=5, char_shingles=false, normalizer="default", num_perm=None,
        bands=None, rows=None, signature="oph", seed=neardup_core::DEFAULT_SEED))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        threshold: f64,
        shingle_width: u32,
        char_shingles: bool,
        normalizer: &str,
        num_perm: Option<u32>,
        bands: Option<u32>,
        rows: Option<u32>,
        signature: &str,
        seed: u64,
    ) -> PyResult<Self> {
        let p = params(
            threshold,
            shingle_width,
            char_shingles,
            normalizer,
            num_perm,
            bands,
            rows,
            signature,
            seed,
            100,
            1000,
        )?;
        Ok(Fingerprinter { inner: CoreFingerprinter::new(p).map_err(value_error)? })
    }

    /// The fingerprint of `text`.
    fn fingerprint(&mut self, py: Python<'_>, text: &str) -> Fingerprint_ {
        let inner = &mut self.inner;
        py.detach(|| inner.fingerprint(text)).into()
    }

    /// The fingerprints of many texts, in order.
    fn fingerprint_many(&mut self, py: Python<'_>, texts: Vec<String>) -> Vec<Fingerprint_> {
        let inner = &mut self.inner;
        py.detach(|| texts.iter().map(|t| inner.fingerprint(t).into()).collect())
    }

    /// The LSH band keys and the first 64 bits of the content hash of many
    /// texts, read from an Arrow string array's two buffers with no Python
    /// object per text (the Spark job's key stage). `offsets` (`int64`,
    /// n + 1 non-decreasing positions into `data`) and `data` (`uint8`,
    /// UTF-8) are Arrow's; a null text is passed as an empty one. Returns
    /// `(key_offsets, keys, hashes)`: text `i`'s keys are
    /// `keys[key_offsets[i]:key_offsets[i + 1]]` (`int32` offsets, `uint64`
    /// keys), its hash `hashes[i]` (`uint64`, the digest's first 8 bytes
    /// big-endian, i.e. `int(content_hash[:16], 16)`). With `posting`, the
    /// 32-bit keys the single-machine index files items under instead (the
    /// folded band keys, the hash's first four bytes little-endian).
    #[allow(clippy::type_complexity)]
    #[pyo3(signature = (offsets, data, posting=false))]
    fn _band_keys_arrow<'py>(
        &mut self,
        py: Python<'py>,
        offsets: PyReadonlyArray1<'py, i64>,
        data: PyReadonlyArray1<'py, u8>,
        posting: bool,
    ) -> PyResult<(Bound<'py, PyArray1<i32>>, Bound<'py, PyArray1<u64>>, Bound<'py, PyArray1<u64>>)> {
        // Copied while the GIL is held: the work below runs without it, and
        // nothing can change these copies meanwhile.
        let offsets = offsets.as_slice().map_err(value_error)?.to_vec();
        let data = data.as_slice().map_err(value_error)?.to_vec();
        let inner = &mut self.inner;
        let (key_offsets, keys, hashes) = py.detach(|| arrow::band_keys_of(inner, &offsets, &data, posting))?;
        Ok((key_offsets.to_pyarray(py), keys.to_pyarray(py), hashes.to_pyarray(py)))
    }

    /// The configuration's fingerprint version: equal strings, compatible fingerprints.
    #[getter]
    fn fingerprint_version(&self) -> String {
        self.inner.params().fingerprint_version()
    }

    /// LSH bands and rows per band.
    #[getter]
    fn bands(&self) -> u32 {
        self.inner.params().lsh().bands
    }

    #[getter]
    fn rows(&self) -> u32 {
        self.inner.params().lsh().rows
    }
}

/// A near-duplicate index: MinHash-LSH candidates, every candidate verified
/// with exact Jaccard on canonical shingle sets.
#[pyclass(module = "neardup")]
pub struct Index {
    fingerprinter: CoreFingerprinter,
    index: MemoryIndex,
    ids: Vec<Option<String>>,
    by_id: HashMap<String, u32>,
}

impl Index {
    /// An empty index under `p`.
    fn empty(p: Params) -> PyResult<Index> {
        Ok(Index {
            fingerprinter: CoreFingerprinter::new(p.clone()).map_err(value_error)?,
            index: MemoryIndex::new(p),
            ids: Vec::new(),
            by_id: HashMap::new(),
        })
    }

    /// Names item number `n` (just inserted) `item_id`.
    fn name(&mut self, item_id: String, n: u32) {
        self.by_id.insert(item_id.clone(), n);
        self.ids.push(Some(item_id));
    }

    /// Verified live items for `fp` at or above the threshold, best first.
    fn matches(&self, fp: &Fingerprint) -> PyResult<Vec<(String, f64)>> {
        let cands = self.index.candidates(fp, None).map_err(value_error)?;
        Ok(self.named(&self.index.verify(fp, &cands.ids, self.index.params().threshold())))
    }

    /// Matches as `(item_id, score)`, those of removed items left out.
    fn named(&self, found: &[Match]) -> Vec<(String, f64)> {
        found.iter().filter_map(|m| Some((self.ids.get(m.id as usize)?.clone()?, m.score))).collect()
    }

    fn add_one(&mut self, item_id: String, text: &str) -> PyResult<Vec<(String, f64)>> {
        if self.by_id.contains_key(&item_id) {
            return Err(value_error(format!("item id {item_id:?} is already in the index")));
        }
        let fp = self.fingerprinter.fingerprint(text);
        let found = self.matches(&fp)?;
        let n = self.index.insert(fp).map_err(value_error)?;
        self.name(item_id, n);
        Ok(found)
    }
}

#[pymethods]
impl Index {
    #[new]
    #[pyo3(signature = (*, threshold=0.8, shingle_width=5, char_shingles=false, normalizer="default", num_perm=None,
        bands=None, rows=None, signature="oph", seed=neardup_core::DEFAULT_SEED, max_candidates=100,
        max_bucket_read=1000))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        threshold: f64,
        shingle_width: u32,
        char_shingles: bool,
        normalizer: &str,
        num_perm: Option<u32>,
        bands: Option<u32>,
        rows: Option<u32>,
        signature: &str,
        seed: u64,
        max_candidates: u32,
        max_bucket_read: u32,
    ) -> PyResult<Self> {
        let p = params(
            threshold,
            shingle_width,
            char_shingles,
            normalizer,
            num_perm,
            bands,
            rows,
            signature,
            seed,
            max_candidates,
            max_bucket_read,
        )?;
        Index::empty(p)
    }

    /// Adds `text` as `item_id`; returns the earlier items it verifies
    /// against at or above the threshold, as `(item_id, score)`, best first.
    fn add(&mut self, py: Python<'_>, item_id: String, text: &str) -> PyResult<Vec<(String, f64)>> {
        py.detach(|| self.add_one(item_id, text))
    }

    /// Adds many `(item_id, text)` pairs in order (each sees the earlier
    /// ones); returns each one's matches, as `add` does.
    fn add_many(&mut self, py: Python<'_>, items: Vec<(String, String)>) -> PyResult<Vec<Vec<(String, f64)>>> {
        py.detach(|| items.into_iter().map(|(id, text)| self.add_one(id, &text)).collect())
    }

    /// The items `text` verifies against at or above the threshold, best first.
    fn query(&self, py: Python<'_>, text: &str) -> PyResult<Vec<(String, f64)>> {
        py.detach(|| {
            let fp = self.fingerprinter.clone().fingerprint(text);
            self.matches(&fp)
        })
    }

    /// Removes `item_id`; False when it is not in the index.
    fn remove(&mut self, item_id: &str) -> bool {
        let Some(n) = self.by_id.remove(item_id) else { return false };
        self.ids[n as usize] = None;
        self.index.remove(n)
    }

    fn __len__(&self) -> usize {
        self.index.len()
    }

    fn __contains__(&self, item_id: &str) -> bool {
        self.by_id.contains_key(item_id)
    }

    /// The threshold.
    #[getter]
    fn threshold(&self) -> f64 {
        self.index.params().threshold()
    }

    /// What a saved index records of each of many texts, read from an
    /// Arrow string array's buffers as `Fingerprinter._band_keys_arrow`
    /// reads them: `(hashes, key_offsets, keys, sketch_offsets, sketches,
    /// feature_offsets, features)` — text `i`'s content hash is
    /// `hashes[16 i:16 i + 16]`, its folded band keys
    /// `keys[key_offsets[i]:key_offsets[i + 1]]` (none when it has none),
    /// likewise its ranking sketch and its canonical features. The Spark
    /// job's index rows; `_Dedup._add_prior` takes them back.
    #[allow(clippy::type_complexity)]
    fn _image_arrow<'py>(
        &mut self,
        py: Python<'py>,
        offsets: PyReadonlyArray1<'py, i64>,
        data: PyReadonlyArray1<'py, u8>,
    ) -> PyResult<(
        Bound<'py, PyArray1<u8>>,
        Bound<'py, PyArray1<i32>>,
        Bound<'py, PyArray1<u32>>,
        Bound<'py, PyArray1<i32>>,
        Bound<'py, PyArray1<u8>>,
        Bound<'py, PyArray1<i64>>,
        Bound<'py, PyArray1<u64>>,
    )> {
        let offsets = offsets.as_slice().map_err(value_error)?.to_vec();
        let data = data.as_slice().map_err(value_error)?.to_vec();
        let (f, params) = (&mut self.fingerprinter, self.index.params());
        let im = py.detach(|| arrow::images_of(f, params, &offsets, &data))?;
        Ok((
            im.hashes.to_pyarray(py),
            im.key_offsets.to_pyarray(py),
            im.keys.to_pyarray(py),
            im.sketch_offsets.to_pyarray(py),
            im.sketches.to_pyarray(py),
            im.feature_offsets.to_pyarray(py),
            im.features.to_pyarray(py),
        ))
    }

    /// Writes the index to `path` (the format `neardup dedup --index`
    /// uses), replacing the file atomically: a crash leaves the old file or
    /// the new one, whole.
    fn save(&self, py: Python<'_>, path: std::path::PathBuf) -> PyResult<()> {
        py.detach(|| {
            let live: Vec<u32> = (0..self.ids.len() as u32).filter(|&n| self.ids[n as usize].is_some()).collect();
            let sketch = self.index.candidate_index().sketch_len();
            let header = Header::new(
                self.index.params(),
                live.len() as u64,
                live.len() as u64,
                1,
                sketch,
                concat!("neardup-python ", env!("CARGO_PKG_VERSION")),
            );
            let view = self.index.candidate_index().view();
            neardup_fs::write_atomic_with(&path, |w: &mut dyn std::io::Write| -> Result<(), FormatError> {
                let items = live.iter().enumerate().map_while(|(k, &n)| {
                    Some(SavedItem {
                        id: self.ids[n as usize].as_deref()?,
                        kept: true,
                        first: k as u32,
                        row: view.row(n)?,
                        features: self.index.features(n).unwrap_or(&[]),
                    })
                });
                write_saved_index(w, &header, items).map(|_| ())
            })
            .map_err(|e| value_error(format!("cannot save the index {}: {e}", path.display())))
        })
    }

    /// An index read from `path` (written by `save` or `neardup dedup
    /// --index`), with the settings it was made under.
    #[staticmethod]
    fn load(py: Python<'_>, path: std::path::PathBuf) -> PyResult<Index> {
        py.detach(|| {
            let shown = path.display().to_string();
            let fail = |e: &dyn std::fmt::Display| value_error(format!("cannot load the index {shown}: {e}"));
            let file = std::fs::File::open(&path).map_err(|e| fail(&e))?;
            let reader = Reader::open(std::io::BufReader::with_capacity(4 << 20, file)).map_err(|e| fail(&e))?;
            let p = reader.header().config.resolve().map_err(|e| fail(&e))?;
            let mut index = Index::empty(p)?;
            let sketch = index.index.candidate_index().sketch_len();
            reader
                .read_items(sketch, |item| {
                    if index.by_id.contains_key(&item.id) {
                        return Err(FormatError(format!("the id {:?} is in it twice", item.id)));
                    }
                    let n = index.index.insert_row(item.row, item.features).map_err(|e| FormatError(e.to_string()))?;
                    index.name(item.id, n);
                    Ok(())
                })
                .map_err(|e| fail(&e))?;
            Ok(index)
        })
    }
}

/// Exact Jaccard similarity of the canonical shingle sets of `a` and `b`
/// (1.0 for texts that normalize to the same content).
#[pyfunction]
#[pyo3(signature = (a, b, *, shingle_width=5, char_shingles=false, normalizer="default"))]
fn jaccard(
    py: Python<'_>,
    a: &str,
    b: &str,
    shingle_width: u32,
    char_shingles: bool,
    normalizer: &str,
) -> PyResult<f64> {
    let p = params(
        0.8,
        shingle_width,
        char_shingles,
        normalizer,
        Some(128),
        None,
        None,
        "oph",
        neardup_core::DEFAULT_SEED,
        100,
        1000,
    )?;
    let mut f = CoreFingerprinter::new(p).map_err(value_error)?;
    py.detach(|| {
        let (x, y) = (f.fingerprint(a), f.fingerprint(b));
        Ok(neardup_core::verify_pair(&x.features, &x.content_hash, &y.features, &y.content_hash, 0.0)
            .map_or(0.0, |s| s.score))
    })
}

/// The exact score of two fingerprints from their features and content
/// hashes (`Fingerprint.features`, `.content_hash`): 1.0 for equal content,
/// else the Jaccard similarity of the feature sets (0.0 when either has
/// none) — the one rule every neardup face verifies with. Features may be
/// given as signed 64-bit values (as Spark's LongType holds them): only
/// their bits count.
#[pyfunction]
fn pair_score(py: Python<'_>, a: Vec<i128>, a_hash: &str, b: Vec<i128>, b_hash: &str) -> PyResult<f64> {
    let hash = |h: &str| {
        neardup_core::ContentHash::from_hex(h).ok_or_else(|| value_error(format!("not a content hash: {h:?}")))
    };
    let (ha, hb) = (hash(a_hash)?, hash(b_hash)?);
    // Unsigned or signed 64-bit: the same bits.
    let canonical = |v: Vec<i128>| -> PyResult<Vec<u64>> {
        let mut out = Vec::with_capacity(v.len());
        for x in v {
            if x < i128::from(i64::MIN) || x > i128::from(u64::MAX) {
                return Err(value_error(format!("{x} is not a 64-bit feature")));
            }
            out.push(x as u64);
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    };
    let (fa, fb) = (canonical(a)?, canonical(b)?);
    Ok(py.detach(|| neardup_core::verify_pair(&fa, &ha, &fb, &hb, 0.0).map_or(0.0, |s| s.score)))
}

/// Every pair of the given feature sets (e.g. `Fingerprint.features`) with
/// exact Jaccard at or above `threshold`, as `(i, j, score)` with `i < j`:
/// the all-pairs oracle neardup's own accuracy is measured against.
#[pyfunction]
fn exact_pairs(py: Python<'_>, sets: Vec<Vec<u64>>, threshold: f64) -> PyResult<Vec<(u32, u32, f64)>> {
    if !(0.0..=1.0).contains(&threshold) {
        return Err(value_error(format!("threshold must be in [0, 1], got {threshold}")));
    }
    let sets: Vec<Vec<u64>> = sets
        .into_iter()
        .map(|mut s| {
            s.sort_unstable();
            s.dedup();
            s
        })
        .collect();
    Ok(py.detach(|| neardup_core::all_pairs(&sets, threshold)))
}

/// The batch decision rule of `neardup dedup`, for `neardup.dedup`: the
/// core's [`Greedy`], the one implementation both call, over an [`Index`].
#[pyclass(module = "neardup", name = "_Dedup")]
pub struct Dedup {
    inner: Index,
    rule: Greedy,
    /// Items decided by `add_many` so far (earlier runs' items go first).
    decided: usize,
}

/// One record's outcome: kept, duplicate_of, its score, every match.
type Outcome = (bool, Option<String>, Option<f64>, Vec<(String, f64)>);

#[pymethods]
impl Dedup {
    /// A rule over an empty index made with `like`'s parameters (an
    /// `Index`, so that the parameters and their defaults are written once).
    #[new]
    fn new(like: PyRef<'_, Index>) -> PyResult<Self> {
        Ok(Dedup { inner: Index::empty(like.index.params().clone())?, rule: Greedy::new(), decided: 0 })
    }

    /// Adds items of an earlier run, already decided, before any item of
    /// this one (as `neardup dedup --index` loads its saved index): their
    /// ids, whether each was kept, and their images as
    /// `Index._image_arrow` gives them. Checked as a saved index is read.
    #[allow(clippy::too_many_arguments)]
    fn _add_prior(
        &mut self,
        ids: Vec<String>,
        kept: Vec<bool>,
        hashes: PyReadonlyArray1<'_, u8>,
        key_offsets: PyReadonlyArray1<'_, i32>,
        keys: PyReadonlyArray1<'_, u32>,
        sketch_offsets: PyReadonlyArray1<'_, i32>,
        sketches: PyReadonlyArray1<'_, u8>,
        feature_offsets: PyReadonlyArray1<'_, i64>,
        features: PyReadonlyArray1<'_, u64>,
    ) -> PyResult<()> {
        if self.decided > 0 {
            return Err(value_error("an earlier run's items go before any of this run's"));
        }
        let images = arrow::ImagesIn {
            hashes: hashes.as_slice().map_err(value_error)?,
            key_offsets: key_offsets.as_slice().map_err(value_error)?,
            keys: keys.as_slice().map_err(value_error)?,
            sketch_offsets: sketch_offsets.as_slice().map_err(value_error)?,
            sketches: sketches.as_slice().map_err(value_error)?,
            feature_offsets: feature_offsets.as_slice().map_err(value_error)?,
            features: features.as_slice().map_err(value_error)?,
        };
        let n = images.len()?;
        if ids.len() != n || kept.len() != n {
            return Err(value_error(format!("{} ids and {} verdicts for {n} index rows", ids.len(), kept.len())));
        }
        let most = self.inner.index.params().config().max_shingles as usize;
        for (i, (id, kept)) in ids.into_iter().zip(kept).enumerate() {
            if self.inner.by_id.contains_key(&id) {
                return Err(value_error(format!("item id {id:?} was seen before; ids must be unique")));
            }
            let (row, features) = images.item(i)?;
            if features.len() > most {
                return Err(value_error(format!("item {id:?}: {} features, over max_shingles {most}", features.len())));
            }
            let item = self.inner.index.insert_row(row, features).map_err(value_error)?;
            self.inner.name(id, item);
            self.rule.set_kept(item, kept);
        }
        Ok(())
    }

    /// Decides `(item_id, text)` pairs in order, each against every earlier
    /// one, as `neardup dedup` does. An id seen before is a ValueError, and
    /// then none of the pairs is added.
    fn add_many(&mut self, py: Python<'_>, items: Vec<(String, String)>) -> PyResult<Vec<Outcome>> {
        let mut fresh = std::collections::HashSet::new();
        for (id, _) in &items {
            if self.inner.by_id.contains_key(id) || !fresh.insert(id.as_str()) {
                return Err(value_error(format!("item id {id:?} was seen before; ids must be unique")));
            }
        }
        py.detach(|| {
            let inner = &mut self.inner;
            let mut added = Vec::with_capacity(items.len());
            for (id, text) in items {
                let n = inner.index.insert(inner.fingerprinter.fingerprint(&text)).map_err(value_error)?;
                inner.name(id, n);
                added.push(n);
            }
            self.decided += added.len();
            Ok(added
                .into_iter()
                .map(|n| {
                    let look = Greedy::look(&inner.index, n);
                    let d = self.rule.decide(&inner.index, n, look, &mut |_| {});
                    let best = d.duplicate_of.and_then(|m| inner.named(&[m]).pop());
                    let (dup, score) = best.map_or((None, None), |(id, score)| (Some(id), Some(score)));
                    (d.kept, dup, score, inner.named(&d.matches))
                })
                .collect())
        })
    }
}

/// A keeper policy (`first`, `longest`, `max:FIELD`, `min:FIELD`) for
/// `neardup.dedup` and the Spark job: the core's [`neardup_core::Keep`],
/// so order keys are the command line's.
#[pyclass(module = "neardup", name = "_Keep", frozen)]
pub struct KeepPolicy(neardup_core::Keep);

#[pymethods]
impl KeepPolicy {
    #[new]
    fn new(policy: &str) -> PyResult<Self> {
        neardup_core::Keep::parse(policy).map(KeepPolicy).map_err(value_error)
    }

    /// The field the policy reads (`max:FIELD`, `min:FIELD`), else None.
    #[getter]
    fn field(&self) -> Option<String> {
        self.0.field().map(str::to_owned)
    }

    /// Whether records are decided in input order (`first`).
    #[getter]
    fn is_first(&self) -> bool {
        self.0.is_first()
    }

    /// A record's order key (smaller is decided first; ties in input
    /// order) from its text and its field's value: an int or float, a
    /// string holding a number or an ISO 8601 date, or anything else
    /// (None, a bool, ...) for no value.
    #[pyo3(signature = (text, value=None))]
    fn order(&self, text: &str, value: Option<&Bound<'_, PyAny>>) -> u64 {
        use pyo3::types::{PyBool, PyFloat, PyInt, PyString};
        let value = value.and_then(|v| {
            if v.is_instance_of::<PyBool>() {
                None
            } else if v.is_instance_of::<PyInt>() || v.is_instance_of::<PyFloat>() {
                v.extract::<f64>().ok().and_then(neardup_core::Keep::value_of_number)
            } else if v.is_instance_of::<PyString>() {
                v.extract::<String>().ok().and_then(|t| neardup_core::Keep::value_of_text(&t))
            } else {
                None
            }
        });
        self.0.order(text.len(), value)
    }
}

#[pymodule]
fn _neardup(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Fingerprinter>()?;
    m.add_class::<Fingerprint_>()?;
    m.add_class::<Index>()?;
    m.add_class::<Dedup>()?;
    m.add_class::<KeepPolicy>()?;
    m.add_function(wrap_pyfunction!(jaccard, m)?)?;
    m.add_function(wrap_pyfunction!(exact_pairs, m)?)?;
    m.add_function(wrap_pyfunction!(pair_score, m)?)?;
    m.add("DEFAULT_SEED", neardup_core::DEFAULT_SEED)?;
    Ok(())
}
