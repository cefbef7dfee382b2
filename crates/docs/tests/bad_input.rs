//! Broken, hostile and unsupported inputs each give a typed error with a
//! reason, and a batch over them still parses the good files.

use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};

use neardup_docs::{discover, parse_file, ErrorKind, Format, Limits, ParseCache};

struct Scratch {
    dir: tempfile::TempDir,
    cache: ParseCache,
}

impl Scratch {
    fn new() -> Scratch {
        let dir = tempfile::tempdir().unwrap();
        let cache = ParseCache::open(dir.path().join(".neardup/cache")).unwrap();
        Scratch { dir, cache }
    }

    fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    fn parse(&self, path: &Path, limits: &Limits) -> neardup_docs::Error {
        let err = parse_file(path, limits, &self.cache).expect_err("bad input must fail");
        assert!(err.is_document_error(), "{err}");
        assert_eq!(err.path(), Some(path), "error must name the file");
        err
    }
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/docs").join(name)).unwrap()
}

/// A DOCX-named zip whose document part is `size` bytes of one repeated byte.
fn zip_bomb(size: usize) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    zip.start_file("[Content_Types].xml", options).unwrap();
    zip.write_all(b"<Types/>").unwrap();
    zip.start_file("word/document.xml", options).unwrap();
    let block = vec![b' '; 1 << 20];
    for _ in 0..size / block.len() {
        zip.write_all(&block).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

#[test]
fn corrupt_pdf() {
    let s = Scratch::new();
    let mut truncated = fixture("paper.pdf");
    truncated.truncate(truncated.len() / 3);
    for (name, bytes) in
        [("truncated.pdf", truncated), ("garbage.pdf", b"%PDF-1.7\n\x01\x02garbage that is no PDF at all".to_vec())]
    {
        let err = s.parse(&s.write(name, &bytes), &Limits::default());
        assert!(matches!(err.kind(), ErrorKind::Corrupt { format: Format::Pdf, .. }), "{name}: {err}");
        assert!(err.to_string().contains("corrupt or unreadable PDF"), "{err}");
    }
}

#[test]
fn zip_bomb_named_docx() {
    let s = Scratch::new();
    // 400 MiB of spaces deflates to well under 1 MiB.
    let bomb = zip_bomb(400 << 20);
    assert!(bomb.len() < 2 << 20, "{} bytes", bomb.len());
    let path = s.write("report.docx", &bomb);

    let err = s.parse(&path, &Limits::default());
    assert!(matches!(err.kind(), ErrorKind::ZipBomb { .. }), "{err}");
    assert!(err.to_string().contains("compression ratio"), "{err}");

    // With the ratio check relaxed, the size cap still catches it.
    let mut limits = Limits::default();
    limits.max_compression_ratio = u64::MAX;
    limits.max_decompressed_bytes = 64 << 20;
    let err = s.parse(&path, &limits);
    assert!(matches!(err.kind(), ErrorKind::ZipBomb { .. }), "{err}");
    assert!(err.to_string().contains("over the limit of 67108864 bytes"), "{err}");
}

#[test]
fn binary_file_named_txt() {
    let s = Scratch::new();
    let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    png.extend((0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
    let err = s.parse(&s.write("photo.txt", &png), &Limits::default());
    assert!(matches!(err.kind(), ErrorKind::Binary { .. }), "{err}");
    assert!(err.to_string().contains("PNG image"), "{err}");

    // No signature at all: noise with NUL bytes.
    let noise: Vec<u8> = (0..8192u32).map(|i| (i.wrapping_mul(2_246_822_519) >> 11) as u8).collect();
    let err = s.parse(&s.write("noise.txt", &noise), &Limits::default());
    assert!(matches!(err.kind(), ErrorKind::Binary { .. }), "{err}");
}

#[test]
fn empty_file() {
    let s = Scratch::new();
    for name in ["empty.txt", "empty.pdf", "empty.docx", "empty"] {
        let err = s.parse(&s.write(name, b""), &Limits::default());
        assert!(matches!(err.kind(), ErrorKind::Empty), "{name}: {err}");
        assert!(err.to_string().ends_with("empty file"), "{err}");
    }
}

#[test]
fn file_over_the_size_limit() {
    let s = Scratch::new();
    let path = s.write("paper.txt", &fixture("paper.txt"));
    let mut limits = Limits::default();
    limits.max_file_bytes = 1000;
    let err = s.parse(&path, &limits);
    assert!(matches!(err.kind(), ErrorKind::TooLarge { limit: 1000, .. }), "{err}");
    assert!(err.to_string().contains("over the limit of 1000 bytes"), "{err}");
}

#[test]
fn unsupported_type() {
    let s = Scratch::new();
    let err = s.parse(&s.write("sheet.xlsx.gz", b"\x1f\x8b\x08\0\0\0\0\0"), &Limits::default());
    assert!(matches!(err.kind(), ErrorKind::Unsupported { .. }), "{err}");
    assert!(err.to_string().contains("gzip archive"), "{err}");
    let err = s.parse(&s.write("data.csv", b"a,b\n1,2\n"), &Limits::default());
    assert!(err.to_string().contains("file extension .csv"), "{err}");
}

#[test]
fn a_batch_reports_bad_files_and_parses_the_rest() {
    let s = Scratch::new();
    s.write("good.md", &fixture("paper.md"));
    s.write("good.html", &fixture("paper.html"));
    s.write("bad.pdf", b"%PDF-1.4\nnot really");
    s.write("bomb.docx", &zip_bomb(200 << 20));
    s.write("binary.txt", b"\x7fELF\x02\x01\x01\0\0\0");
    s.write("empty.txt", b"");
    let found = discover(&[s.dir.path()], &Default::default());
    assert!(found.errors.is_empty());
    let (mut ok, mut failed) = (Vec::new(), Vec::new());
    for path in &found.files {
        match parse_file(path, &Limits::default(), &s.cache) {
            Ok(outcome) => ok.push(outcome.doc.format),
            Err(e) if e.is_document_error() => failed.push(e.to_string()),
            Err(e) => panic!("fatal error in batch: {e}"),
        }
    }
    assert_eq!(ok, [Format::Html, Format::Markdown]);
    assert_eq!(failed.len(), 4, "{failed:#?}");
}
