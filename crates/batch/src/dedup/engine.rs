//! Which engine a `neardup dedup` run uses: in memory, or its state on
//! disk under `--memory-limit` (see [`crate::bounded`]).

use crate::chunk::{Input, Kind};
use crate::UsageError;

use super::Options;

/// Which engine a run uses.
pub(super) enum Engine {
    /// Everything in memory, decided while reading (the fastest).
    Memory,
    /// State on disk under a memory limit ([`crate::bounded`]).
    Bounded(crate::bounded::Limits),
}

/// Bytes in a size such as `512M`, `4G`, `1.5G` or `800000` (powers of 1024).
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, unit) = match s.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((i, _)) => (&s[..i], s[i..].to_ascii_uppercase()),
        None => (s, String::new()),
    };
    let mult: u64 = match unit.trim_end_matches("IB").trim_end_matches('B') {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        "T" => 1 << 40,
        _ => return None,
    };
    let v: f64 = num.trim().parse().ok()?;
    (v.is_finite() && v > 0.0).then_some((v * mult as f64) as u64)
}

/// The inputs' text, estimated from their size: compressed JSONL by the
/// ratio of the first such input's first 64 MB ([`expansion`]; shards of
/// one dataset share a compressor, and one sample keeps start-up short);
/// Parquet, objects and what cannot be sampled counted as four times
/// their size. None for a stream.
fn text_estimate(inputs: &[Input]) -> Option<u64> {
    let mut ratio = None;
    inputs
        .iter()
        .map(|i| {
            let packed = i.kind == Kind::Parquet || [".zst", ".zstd", ".gz"].iter().any(|e| i.name.ends_with(e));
            let size = i.size?;
            if !packed {
                return Some(size);
            }
            let r = match i.kind {
                Kind::Jsonl => *ratio.get_or_insert_with(|| expansion(&i.name).unwrap_or(4.0)),
                Kind::Parquet => 4.0,
            };
            Some((size as f64 * r) as u64)
        })
        .sum()
}

/// How many bytes of text a compressed JSONL file holds per byte, from its
/// first 64 MB of text at most, decompressed as the reader does
/// ([`crate::jsonl::stream`]); None when it cannot be read here (an
/// object, a damaged file: the reading itself reports those). Never below
/// 1; a stream that compresses better than 50:1 counts as 50.
fn expansion(name: &str) -> Option<f64> {
    use std::io::Read;
    use std::sync::atomic::{AtomicU64, Ordering};
    const SAMPLE: u64 = 64 << 20;
    if crate::remote::is_remote(name) {
        return None;
    }
    let file = std::fs::File::open(name).ok()?;
    // Bytes taken from the file: all of a small one; of a large one, the
    // sample's share and at most the reader's buffer more.
    let packed = std::sync::Arc::new(AtomicU64::new(0));
    let text_reader = crate::jsonl::stream(file, packed.clone(), name).ok()?;
    let text = std::io::copy(&mut text_reader.take(SAMPLE), &mut std::io::sink()).ok()?;
    let packed = packed.load(Ordering::Relaxed);
    (packed > 0).then(|| (text as f64 / packed as f64).clamp(1.0, 50.0))
}

pub(super) fn choose_engine(a: &Options) -> anyhow::Result<Engine> {
    let inputs = &a.inputs[..];
    // What runs in memory only, for now.
    let in_memory_only = if a.index.is_some() || a.reference.is_some() {
        Some("--index and --reference run in memory for now")
    } else {
        None
    };
    let with_index = in_memory_only.is_some();
    let work_dir = a.work_dir.clone().unwrap_or_else(std::env::temp_dir);
    if a.memory_limit == "none" {
        return Ok(Engine::Memory);
    }
    // Estimated once: it reads a sample of a compressed input.
    let text = text_estimate(inputs);
    let limit = match a.memory_limit.as_str() {
        "auto" => {
            // The in-memory engine holds about 1.8 bytes per byte of text
            // (measured: 3.47 GB for 1.97 GB of text).
            let (Some(text), Some(avail)) = (text, crate::bounded::available_memory()) else {
                return Ok(Engine::Memory);
            };
            let need = text * 9 / 5;
            if need <= avail / 2 || with_index {
                return Ok(Engine::Memory);
            }
            avail / 2
        }
        s => parse_size(s).ok_or_else(|| {
            UsageError(format!("--memory-limit takes a size such as 512M or 4G, `auto` or `none`; got {s:?}"))
        })?,
    };
    if let Some(why) = in_memory_only {
        return Err(UsageError(format!("{why}: use --memory-limit none (or auto)")).into());
    }
    if limit < 64 << 20 && a.notes {
        eprintln!(
            "neardup: reading and fingerprinting hold about 64 MB whatever the limit: --memory-limit {} bounds the \
             sorts and verification blocks only",
            a.memory_limit
        );
    }
    if let (Some(size), Some(text), Some(free)) =
        (crate::input::total_size(inputs), text, crate::bounded::free_space(&work_dir))
    {
        // A run that continues has part of what it needs on disk already.
        let r = &a.read;
        let held = crate::bounded::RunKey {
            params: &a.params,
            text_field: &r.text_field,
            id_field: &r.id_field,
            max_line: r.max_line,
            keep: &a.keep,
            inputs,
        }
        .bytes_in_place(&work_dir);
        let need = crate::bounded::disk_estimate(text).saturating_sub(held);
        if need > free {
            return Err(UsageError(format!(
                "a bounded run of {:.1} GB of input needs about {:.1} GB in its work folder, and {} has {:.1} GB \
                 free: choose another with --work-dir",
                size as f64 / 1e9,
                need as f64 / 1e9,
                work_dir.display(),
                free as f64 / 1e9
            ))
            .into());
        }
    }
    Ok(Engine::Bounded(crate::bounded::Limits { memory: limit, work_dir }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compressed_input_is_estimated_by_its_own_ratio() {
        let dir = tempfile::tempdir().unwrap();
        let zst = |name: &str, text: &[u8]| {
            let path = dir.path().join(name);
            std::fs::write(&path, zstd::encode_all(text, 3).unwrap()).unwrap();
            let size = std::fs::metadata(&path).unwrap().len();
            Input { name: path.display().to_string(), kind: Kind::Jsonl, size: Some(size) }
        };
        // Records of numbers compress ~3:1, random bytes not at all: each
        // is estimated by its own ratio, not the fixed 4:1.
        let mixed = |i: u64| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
        let records: String =
            (0..20_000u64).map(|i| format!("{{\"id\": {i}, \"text\": \"{} {}\"}}\n", mixed(i), mixed(i + 7))).collect();
        let random: Vec<u8> = (0..400_000u64).map(|i| mixed(i) as u8).collect();
        for (name, text) in [("a.jsonl.zst", records.as_bytes()), ("b.jsonl.zst", &random[..])] {
            let estimate = text_estimate(&[zst(name, text)]).unwrap();
            let true_len = text.len() as u64;
            assert!(estimate.abs_diff(true_len) <= true_len / 100, "{name}: {estimate} for {true_len} bytes");
        }
        // A ratio over 50:1 counts as 50.
        let repetitive = "{\"id\": 1, \"text\": \"the same words\"}\n".repeat(20_000);
        let input = zst("c.jsonl.zst", repetitive.as_bytes());
        assert_eq!(text_estimate(std::slice::from_ref(&input)), Some(input.size.unwrap() * 50));
        let gz = dir.path().join("d.jsonl.gz");
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut e, records.as_bytes()).unwrap();
        std::fs::write(&gz, e.finish().unwrap()).unwrap();
        let size = std::fs::metadata(&gz).unwrap().len();
        let estimate =
            text_estimate(&[Input { name: gz.display().to_string(), kind: Kind::Jsonl, size: Some(size) }]).unwrap();
        assert!(estimate.abs_diff(records.len() as u64) <= records.len() as u64 / 100, "gzip: {estimate}");
        // What cannot be sampled counts as four times its size.
        let missing = Input { name: "gone.jsonl.zst".into(), kind: Kind::Jsonl, size: Some(1000) };
        assert_eq!(text_estimate(&[missing]), Some(4000));
    }
}
