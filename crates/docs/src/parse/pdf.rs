//! PDF text extraction with `pdf-extract` (on `lopdf`), page by page, then
//! [`clean_pages`](super::pdf_cleanup::clean_pages).
//!
//! `pdf-extract` can panic on malformed input (it unwraps inside), so each
//! call into it is wrapped in `catch_unwind` and a panic becomes a
//! [`Corrupt`](crate::ErrorKind::Corrupt) error: one bad PDF must never take
//! down a batch.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pdf_extract::{Document, Object, PlainTextOutput};

use super::pdf_cleanup::clean_pages;
use super::{Cancel, Extracted};
use crate::error::Error;
use crate::format::Format;
use crate::limits::Limits;

thread_local! {
    /// Set while this thread runs the PDF parser, whose panics are caught
    /// and reported as errors: the panic hook stays quiet for them.
    static IN_PARSER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Installs, once, a panic hook that prints nothing for panics inside the
/// PDF parser (they become `Corrupt` errors with the message) and passes
/// every other panic to the hook that was there before.
fn quiet_parser_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !IN_PARSER.with(std::cell::Cell::get) {
                previous(info);
            }
        }));
    });
}

pub(crate) fn extract(bytes: &[u8], limits: &Limits, cancel: &Cancel) -> Result<Extracted, Error> {
    quiet_parser_panics();
    IN_PARSER.with(|p| p.set(true));
    let result = catch_unwind(AssertUnwindSafe(|| extract_pages(bytes, limits, cancel)));
    IN_PARSER.with(|p| p.set(false));
    match result {
        Ok(Ok((pages, title))) => Ok(Extracted { text: clean_pages(&pages), title }),
        Ok(Err(e)) => Err(e),
        Err(panic) => {
            let msg = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            Err(Error::corrupt(Format::Pdf, format!("parser failed: {msg}")))
        }
    }
}

fn extract_pages(bytes: &[u8], limits: &Limits, cancel: &Cancel) -> Result<(Vec<String>, Option<String>), Error> {
    let mut doc = Document::load_mem(bytes).map_err(|e| Error::corrupt(Format::Pdf, e.to_string()))?;
    if doc.is_encrypted() {
        // Many "encrypted" PDFs only restrict printing and open with the
        // empty password; anything else we cannot read.
        doc.decrypt("").map_err(|e| Error::corrupt(Format::Pdf, format!("encrypted and needs a password ({e})")))?;
    }
    check_inflated_size(&doc, bytes.len() as u64, limits)?;
    let page_numbers: Vec<u32> = doc.get_pages().keys().copied().collect();
    if page_numbers.is_empty() {
        return Err(Error::corrupt(Format::Pdf, "no pages"));
    }
    let mut pages = Vec::with_capacity(page_numbers.len());
    let mut total = 0usize;
    for n in page_numbers {
        // Past the deadline the scan has moved on: stop here.
        cancel.check(limits)?;
        let mut text = String::new();
        {
            let mut out = PlainTextOutput::new(&mut text);
            pdf_extract::output_doc_page(&doc, &mut out, n)
                .map_err(|e| Error::corrupt(Format::Pdf, format!("page {n}: {e}")))?;
        }
        total += text.len();
        if total > limits.max_text_bytes {
            return Err(Error::new(crate::ErrorKind::TextTooLarge { limit: limits.max_text_bytes }));
        }
        pages.push(text);
    }
    Ok((pages, title(&doc)))
}

/// Before text extraction decodes any stream into memory, counts the
/// decoded size of every stream it may read (all but images: Flate
/// streams inflated into a counting sink, a buffer at a time; the others
/// as stored) and refuses the file past the limits: a 2 MB PDF can hold a
/// 1 GiB content stream, and padding a file lowers its ratio, not what
/// extraction holds in memory ([`Limits::max_pdf_stream_bytes`]).
fn check_inflated_size(doc: &Document, file_len: u64, limits: &Limits) -> Result<(), Error> {
    use std::io::Read;
    let cap = limits.max_decompressed_bytes.min(limits.max_pdf_stream_bytes);
    let mut total = 0u64;
    let mut flate_total = 0u64;
    for (id, obj) in &doc.objects {
        let Object::Stream(s) = obj else { continue };
        // Images and attached files are never read for text.
        if s.dict.get(b"Subtype").and_then(Object::as_name).is_ok_and(|n| n == b"Image")
            || s.dict.get(b"Type").and_then(Object::as_name).is_ok_and(|n| n == b"EmbeddedFile")
        {
            continue;
        }
        let flate = match s.dict.get(b"Filter") {
            Ok(Object::Name(n)) => n == b"FlateDecode",
            Ok(Object::Array(a)) => a.iter().any(|f| matches!(f, Object::Name(n) if n == b"FlateDecode")),
            _ => false,
        };
        if flate {
            let budget = cap.saturating_sub(total);
            let mut inflate = flate2::read::ZlibDecoder::new(&s.content[..]).take(budget.saturating_add(1));
            // A damaged stream counts what inflated before the damage; the
            // parser reports the damage itself.
            let mut buf = [0u8; 64 << 10];
            loop {
                match inflate.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        total += n as u64;
                        flate_total += n as u64;
                    }
                }
            }
        } else {
            total += s.content.len() as u64;
        }
        let bomb = |reason: String| Error::new(crate::ErrorKind::ZipBomb { reason });
        if total > cap {
            let limit =
                if cap == limits.max_pdf_stream_bytes { "max_pdf_stream_bytes" } else { "max_decompressed_bytes" };
            return Err(bomb(format!("PDF streams decode past {cap} bytes (object {} {}; limit {limit})", id.0, id.1)));
        }
        if flate_total >= limits.ratio_check_min_bytes && flate_total / file_len.max(1) > limits.max_compression_ratio {
            return Err(bomb(format!(
                "PDF streams inflate to {flate_total} bytes from a {file_len}-byte file, over the ratio limit of {}:1",
                limits.max_compression_ratio
            )));
        }
    }
    Ok(())
}

fn title(doc: &Document) -> Option<String> {
    let info = match doc.trailer.get(b"Info").ok()? {
        Object::Reference(id) => doc.get_object(*id).ok()?.as_dict().ok()?,
        Object::Dictionary(d) => d,
        _ => return None,
    };
    match info.get(b"Title").ok()? {
        Object::String(bytes, _) => decode_pdf_string(bytes),
        _ => None,
    }
}

/// PDF text strings are UTF-16BE with a BOM, or PDFDocEncoding (close enough
/// to Latin-1 for titles).
fn decode_pdf_string(bytes: &[u8]) -> Option<String> {
    let s = if let Some(body) = bytes.strip_prefix(b"\xfe\xff") {
        let units: Vec<u16> = body.chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]])).collect();
        String::from_utf16_lossy(&units)
    } else {
        bytes.iter().map(|&b| b as char).collect()
    };
    let s = s.trim().to_owned();
    (!s.is_empty()).then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_after_header_is_corrupt_not_panic() {
        for bytes in
            [&b"%PDF-1.4\n"[..], b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog >>\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF"]
        {
            let err = extract(bytes, &Limits::default(), &Cancel::default()).err().expect("must fail");
            assert!(err.to_string().contains("PDF"), "{err}");
        }
    }

    /// Issue 15 item 4: a small PDF whose content stream inflates far past
    /// its size used to be inflated whole (a 2 MB file took 18 GB); it is
    /// refused before extraction, with the limit named.
    #[test]
    fn flate_bombs_are_refused_before_extraction() {
        use pdf_extract::{dictionary, Stream};
        let pdf = |content_bytes: usize| {
            let mut doc = Document::with_version("1.5");
            let pages_id = doc.new_object_id();
            let mut content = b"BT /F1 12 Tf 72 712 Td (Hello) Tj ET\n".to_vec();
            content.resize(content_bytes, b' ');
            let mut stream = Stream::new(dictionary! {}, content);
            stream.compress().unwrap();
            let content_id = doc.add_object(stream);
            let page_id = doc.add_object(dictionary! {
                "Type" => "Page", "Parent" => pages_id, "Contents" => content_id,
                "MediaBox" => vec![0.into(), 0.into(), 612.into(), 792.into()],
            });
            doc.objects.insert(
                pages_id,
                Object::Dictionary(dictionary! { "Type" => "Pages", "Kids" => vec![page_id.into()], "Count" => 1 }),
            );
            let catalog_id = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
            doc.trailer.set("Root", catalog_id);
            let mut bytes = Vec::new();
            doc.save_to(&mut bytes).unwrap();
            bytes
        };
        // 16 MiB of content in a file of a few tens of KB: over 100:1.
        let bomb = pdf(16 << 20);
        assert!(bomb.len() < 100_000, "{}", bomb.len());
        let err = extract(&bomb, &Limits::default(), &Cancel::default()).err().expect("must be refused");
        assert!(err.to_string().contains("zip bomb"), "{err}");
        // Under the absolute limit too, with the ratio check relaxed.
        let limits = Limits { max_compression_ratio: u64::MAX, max_decompressed_bytes: 8 << 20, ..Limits::default() };
        let err = extract(&bomb, &limits, &Cancel::default()).err().expect("must be refused");
        assert!(err.to_string().contains("decode past"), "{err}");
        // The same page with a small stream is not refused by the check.
        let small = pdf(2_000);
        let doc = Document::load_mem(&small).unwrap();
        check_inflated_size(&doc, small.len() as u64, &Limits::default()).unwrap();

        // Padding a bomb with stored bytes lowers its ratio under 100:1 but
        // not what extraction decodes: 80 MiB of content beside a stored
        // 1 MiB stream is refused by the decoded size (before, it passed
        // the ratio and extraction took gigabytes).
        let mut doc = Document::load_mem(&pdf(80 << 20)).unwrap();
        doc.add_object(Stream::new(dictionary! {}, vec![b'%'; 1 << 20]));
        let mut padded = Vec::new();
        doc.save_to(&mut padded).unwrap();
        assert!((80u64 << 20) / padded.len() as u64 <= 100, "{} bytes", padded.len());
        let err = extract(&padded, &Limits::default(), &Cancel::default()).err().expect("must be refused");
        assert!(err.to_string().contains("max_pdf_stream_bytes"), "{err}");
        // Stored streams count as well: 70 MiB of uncompressed content.
        let mut doc = Document::load_mem(&small).unwrap();
        doc.add_object(Stream::new(dictionary! {}, vec![b' '; 70 << 20]));
        let mut stored = Vec::new();
        doc.save_to(&mut stored).unwrap();
        let doc = Document::load_mem(&stored).unwrap();
        let err = check_inflated_size(&doc, stored.len() as u64, &Limits::default()).unwrap_err();
        assert!(err.to_string().contains("decode past"), "{err}");
        // A cancelled extraction (its deadline passed) stops before a page.
        let cancelled = Cancel::default();
        cancelled.cancel();
        let err = extract(&small, &Limits::default(), &cancelled).err().expect("must stop");
        assert!(matches!(err.kind(), crate::ErrorKind::ParseTimeout { .. }), "{err}");
        let uncancelled = extract(&small, &Limits::default(), &Cancel::default());
        assert!(!uncancelled.is_err_and(|e| matches!(e.kind(), crate::ErrorKind::ParseTimeout { .. })));
        // An attached file is not read for text, whatever its size.
        let mut doc = Document::load_mem(&small).unwrap();
        doc.add_object(Stream::new(dictionary! { "Type" => "EmbeddedFile" }, vec![b' '; 70 << 20]));
        let mut attached = Vec::new();
        doc.save_to(&mut attached).unwrap();
        let doc = Document::load_mem(&attached).unwrap();
        check_inflated_size(&doc, attached.len() as u64, &Limits::default()).unwrap();
    }

    #[test]
    fn pdf_strings() {
        assert_eq!(decode_pdf_string(b"\xfe\xff\x00H\x00i").as_deref(), Some("Hi"));
        assert_eq!(decode_pdf_string(b"Caf\xe9").as_deref(), Some("Café"));
        assert_eq!(decode_pdf_string(b"  "), None);
    }
}
