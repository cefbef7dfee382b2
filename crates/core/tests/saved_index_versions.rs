//! Cells of the migration matrix (`release/migrations.md`, issue 49 item
//! 3) for the saved dedup index (`neardup dedup --index`, Python's
//! `Index.save`/`load`) and the pipeline configuration every persisted
//! format embeds: a file written by an earlier build keeps opening, and a
//! configuration naming a version this build does not know is refused
//! with the reason.

use std::path::PathBuf;

use neardup_core::{write_saved_index, Config, Fingerprinter, Header, MemoryIndex, Reader, SavedItem};

const TEXTS: [(&str, &str); 3] = [
    ("A", "the red fox runs very fast over the hill and far away"),
    ("B", "the red fox runs very fast over the hill and far away today"),
    ("C", "database backup completed nightly without any errors at all"),
];

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/saved-index-v1.ndx")
}

/// The fixture's index, as this build makes it: A and C kept, B dropped
/// as a near duplicate of A (cluster 0).
fn build() -> Vec<u8> {
    let params = Config::default().resolve().unwrap();
    let mut fp = Fingerprinter::new(params.clone()).unwrap();
    let mut index = MemoryIndex::new(params.clone());
    for (_, text) in TEXTS {
        index.insert(fp.fingerprint(text)).unwrap();
    }
    let view = index.candidate_index().view();
    let items = (0..3u32).map(|i| SavedItem {
        id: TEXTS[i as usize].0,
        kept: i != 1,
        first: if i == 1 { 0 } else { i },
        row: view.row(i).unwrap(),
        features: index.features(i).unwrap(),
    });
    let header = Header::new(&params, 3, 2, 1, index.candidate_index().sketch_len(), "neardup 0.1.0");
    let mut bytes = Vec::new();
    write_saved_index(&mut bytes, &header, items).unwrap();
    bytes
}

/// A saved index written by format version 1, committed: it opens under
/// the configuration it was written with, and the loaded index answers a
/// query as the one that was saved. `NEARDUP_WRITE_FIXTURES=1` writes it.
#[test]
fn a_frozen_version_1_saved_index_opens_and_answers() {
    if std::env::var_os("NEARDUP_WRITE_FIXTURES").is_some() {
        std::fs::create_dir_all(fixture().parent().unwrap()).unwrap();
        std::fs::write(fixture(), build()).unwrap();
    }
    let bytes = std::fs::read(fixture()).expect("fixture present");
    assert_eq!(u32::from_le_bytes(bytes[8..12].try_into().unwrap()), 1);
    let params = Config::default().resolve().unwrap();
    let reader = Reader::open(&bytes[..]).unwrap();
    reader.check(&params).unwrap();
    assert_eq!(reader.header().fingerprint_version, params.fingerprint_version());
    let mut index = MemoryIndex::new(params.clone());
    let mut seen = Vec::new();
    let sketch = index.candidate_index().sketch_len();
    reader
        .read_items(sketch, |it| {
            seen.push((it.id.clone(), it.kept, it.first));
            index.insert_row(it.row, it.features).map(|_| ()).map_err(|e| neardup_core::FormatError(e.to_string()))
        })
        .unwrap();
    assert_eq!(seen, [("A".into(), true, 0), ("B".into(), false, 0), ("C".into(), true, 2)]);
    let q = Fingerprinter::new(params).unwrap().fingerprint(TEXTS[1].1);
    let got = index.verify(&q, &index.candidates(&q, None).unwrap().ids, 0.8);
    let ids: Vec<u32> = got.iter().map(|m| m.id).collect();
    assert_eq!(ids, [1, 0], "B itself, then A");
    // This build writes the fixture's bytes exactly: the format is pinned.
    assert_eq!(build(), bytes, "the saved index format changed: that is a new format version");
}

/// A configuration naming a normalizer, signature or format version that
/// this build does not know (written by a newer one) is refused with the
/// name; the saved index's header, a tenant's configuration in the log
/// and snapshots, and `neardup.toml` all read it through this type.
#[test]
fn a_configuration_of_an_unknown_version_is_refused() {
    let default = serde_json::to_value(Config::default()).unwrap();
    for (field, value, want) in [
        ("normalizer", "unicode-v2", "unicode-v2"),
        ("signature", "oph-dens-v2", "oph-dens-v2"),
        ("shingle_kind", "sentence", "sentence"),
    ] {
        let mut v = default.clone();
        v[field] = serde_json::Value::from(value);
        let err = serde_json::from_value::<Config>(v).unwrap_err().to_string();
        assert!(err.contains(want) && err.contains("unknown variant"), "{field}: {err}");
    }
    let mut v = default.clone();
    v["format_version"] = serde_json::Value::from(2);
    let config: Config = serde_json::from_value(v).unwrap();
    let err = config.resolve().unwrap_err().to_string();
    assert!(err.contains("format_version"), "{err}");

    // In a saved index's header: refused when the header is read.
    let bytes = build();
    let len = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&bytes[16..16 + len]).unwrap();
    let newer = header.replace("\"unicode-v1\"", "\"unicode-v2\"");
    assert_ne!(newer, header);
    let mut edited = bytes[..12].to_vec();
    edited.extend_from_slice(&(newer.len() as u32).to_le_bytes());
    edited.extend_from_slice(newer.as_bytes());
    edited.extend_from_slice(&bytes[16 + len..]);
    let Err(err) = Reader::open(&edited[..]) else { panic!("a header naming unicode-v2 was read") };
    let err = err.to_string();
    assert!(err.contains("header is not valid") && err.contains("unicode-v2"), "{err}");
}
