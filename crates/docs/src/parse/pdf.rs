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
use super::Extracted;
use crate::error::Error;
use crate::format::Format;
use crate::limits::Limits;

pub(crate) fn extract(bytes: &[u8], limits: &Limits) -> Result<Extracted, Error> {
    let result = catch_unwind(AssertUnwindSafe(|| extract_pages(bytes, limits)));
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

fn extract_pages(bytes: &[u8], limits: &Limits) -> Result<(Vec<String>, Option<String>), Error> {
    let mut doc = Document::load_mem(bytes).map_err(|e| Error::corrupt(Format::Pdf, e.to_string()))?;
    if doc.is_encrypted() {
        // Many "encrypted" PDFs only restrict printing and open with the
        // empty password; anything else we cannot read.
        doc.decrypt("").map_err(|e| Error::corrupt(Format::Pdf, format!("encrypted and needs a password ({e})")))?;
    }
    let page_numbers: Vec<u32> = doc.get_pages().keys().copied().collect();
    if page_numbers.is_empty() {
        return Err(Error::corrupt(Format::Pdf, "no pages"));
    }
    let mut pages = Vec::with_capacity(page_numbers.len());
    let mut total = 0usize;
    for n in page_numbers {
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
            let err = extract(bytes, &Limits::default()).err().expect("must fail");
            assert!(err.to_string().contains("PDF"), "{err}");
        }
    }

    #[test]
    fn pdf_strings() {
        assert_eq!(decode_pdf_string(b"\xfe\xff\x00H\x00i").as_deref(), Some("Hi"));
        assert_eq!(decode_pdf_string(b"Caf\xe9").as_deref(), Some("Café"));
        assert_eq!(decode_pdf_string(b"  "), None);
    }
}
