//! DOCX to text: `zip` for the container, `quick-xml` over
//! `word/document.xml`. Each `<w:p>` paragraph becomes one line; `<w:tab/>`
//! a tab, `<w:br/>` a line break. Deleted revisions (`<w:delText>`) and field
//! instructions are not text and are skipped; running page headers and
//! footers live in other parts and are never read.
//!
//! Zip-bomb defences, all before inflating anything: the entry count, the sum
//! of declared sizes against [`Limits::max_decompressed_bytes`], and the
//! declared ratio against [`Limits::max_compression_ratio`]. Declared sizes
//! can lie, so each part is also read through a `take` bounded by what is
//! left of the budget, and overrunning it is the same error.

use std::io::{Cursor, Read};

use quick_xml::events::Event;
use quick_xml::Reader;
use zip::ZipArchive;

use super::Extracted;
use crate::error::{Error, ErrorKind};
use crate::format::Format;
use crate::limits::Limits;

const DOCUMENT_PART: &str = "word/document.xml";
const CORE_PROPS_PART: &str = "docProps/core.xml";

pub(crate) fn extract(bytes: &[u8], limits: &Limits) -> Result<Extracted, Error> {
    let mut archive = ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| Error::corrupt(Format::Docx, format!("bad zip archive: {e}")))?;
    check_bomb(&mut archive, bytes.len() as u64, limits)?;
    let mut budget = limits.max_decompressed_bytes;
    let document = match read_part(&mut archive, DOCUMENT_PART, &mut budget)? {
        Some(xml) => xml,
        None => {
            return Err(Error::corrupt(
                Format::Docx,
                format!("zip archive without {DOCUMENT_PART} (not a Word document)"),
            ))
        }
    };
    let text = document_text(&document, limits.max_text_bytes)?;
    // The title is a nicety: a broken core.xml must not fail the document.
    let title = read_part(&mut archive, CORE_PROPS_PART, &mut budget).ok().flatten().and_then(|xml| core_title(&xml));
    Ok(Extracted { text, title })
}

fn bomb(reason: String) -> Error {
    Error::new(ErrorKind::ZipBomb { reason })
}

fn check_bomb(archive: &mut ZipArchive<Cursor<&[u8]>>, file_len: u64, limits: &Limits) -> Result<(), Error> {
    if archive.len() > limits.max_archive_entries {
        return Err(bomb(format!("{} entries, over the limit of {}", archive.len(), limits.max_archive_entries)));
    }
    let mut declared: u64 = 0;
    let mut compressed: u64 = 0;
    for i in 0..archive.len() {
        let entry =
            archive.by_index_raw(i).map_err(|e| Error::corrupt(Format::Docx, format!("bad zip entry {i}: {e}")))?;
        declared = declared.saturating_add(entry.size());
        compressed = compressed.saturating_add(entry.compressed_size());
    }
    if declared > limits.max_decompressed_bytes {
        return Err(bomb(format!(
            "entries declare {declared} bytes decompressed, over the limit of {} bytes",
            limits.max_decompressed_bytes
        )));
    }
    if declared >= limits.ratio_check_min_bytes {
        let ratio = declared / compressed.max(1).min(file_len.max(1));
        if ratio > limits.max_compression_ratio {
            return Err(bomb(format!(
                "compression ratio {ratio}:1 ({declared} bytes from {compressed}), over the limit of {}:1",
                limits.max_compression_ratio
            )));
        }
    }
    Ok(())
}

/// Reads one part, charging its real size against `budget`.
fn read_part(archive: &mut ZipArchive<Cursor<&[u8]>>, name: &str, budget: &mut u64) -> Result<Option<Vec<u8>>, Error> {
    let entry = match archive.by_name(name) {
        Ok(entry) => entry,
        Err(zip::result::ZipError::FileNotFound) => return Ok(None),
        Err(e) => return Err(Error::corrupt(Format::Docx, format!("{name}: {e}"))),
    };
    // Allocate for the declared size only when it is within budget.
    let mut buf = Vec::with_capacity(entry.size().min(*budget) as usize);
    let read = entry
        .take(budget.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|e| Error::corrupt(Format::Docx, format!("{name}: {e}")))? as u64;
    if read > *budget {
        return Err(bomb(format!(
            "{name} inflates past the decompressed-size budget (its header understated its size)"
        )));
    }
    *budget -= read;
    Ok(Some(buf))
}

/// Extracts paragraph text from WordprocessingML.
fn document_text(xml: &[u8], max_text_bytes: usize) -> Result<String, Error> {
    let mut reader = Reader::from_reader(xml);
    let mut buf = Vec::new();
    let mut out = String::new();
    let mut line = String::new();
    let mut in_text = 0usize; // depth inside <w:t>
    loop {
        let event = reader.read_event_into(&mut buf).map_err(|e| {
            Error::corrupt(Format::Docx, format!("{DOCUMENT_PART} at byte {}: {e}", reader.buffer_position()))
        })?;
        match event {
            Event::Start(e) if e.local_name().as_ref() == b"t" => in_text += 1,
            Event::End(e) => match e.local_name().as_ref() {
                b"t" => in_text = in_text.saturating_sub(1),
                b"p" => end_line(&mut out, &mut line),
                _ => {}
            },
            Event::Empty(e) => match e.local_name().as_ref() {
                b"tab" => line.push('\t'),
                b"br" | b"cr" => end_line(&mut out, &mut line),
                _ => {}
            },
            Event::Text(t) if in_text > 0 => {
                let text = t.decode().map_err(|e| Error::corrupt(Format::Docx, e.to_string()))?;
                line.push_str(&text);
            }
            Event::GeneralRef(r) if in_text > 0 => {
                if let Ok(Some(c)) = r.resolve_char_ref() {
                    line.push(c);
                } else if let Some(s) = r.decode().ok().and_then(|n| quick_xml::escape::resolve_predefined_entity(&n)) {
                    line.push_str(s);
                }
            }
            Event::Eof => break,
            _ => {}
        }
        if out.len() + line.len() > max_text_bytes {
            return Err(Error::new(ErrorKind::TextTooLarge { limit: max_text_bytes }));
        }
        buf.clear();
    }
    end_line(&mut out, &mut line);
    Ok(out.trim_end().to_owned())
}

fn end_line(out: &mut String, line: &mut String) {
    let trimmed = line.trim();
    if !trimmed.is_empty() {
        out.push_str(trimmed);
        out.push('\n');
    }
    line.clear();
}

/// `<dc:title>` from the core properties part.
fn core_title(xml: &[u8]) -> Option<String> {
    let mut reader = Reader::from_reader(xml);
    let mut buf = Vec::new();
    let mut in_title = false;
    let mut title = String::new();
    loop {
        match reader.read_event_into(&mut buf).ok()? {
            Event::Start(e) if e.local_name().as_ref() == b"title" => in_title = true,
            Event::End(e) if e.local_name().as_ref() == b"title" => break,
            Event::Text(t) if in_title => title.push_str(&t.decode().ok()?),
            Event::GeneralRef(r) if in_title => {
                let name = r.decode().ok()?;
                title.push_str(quick_xml::escape::resolve_predefined_entity(&name).unwrap_or(""));
            }
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    let title = title.trim().to_owned();
    (!title.is_empty()).then_some(title)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paragraphs_runs_tabs_and_entities() {
        let xml = br#"<?xml version="1.0"?><w:document xmlns:w="x"><w:body>
<w:p><w:r><w:t>Hello</w:t></w:r><w:r><w:t xml:space="preserve"> world &amp; more</w:t></w:r></w:p>
<w:p><w:r><w:t>a</w:t><w:tab/><w:t>b</w:t><w:br/><w:t>c&#233;</w:t></w:r></w:p>
<w:p><w:del><w:r><w:delText>gone</w:delText></w:r></w:del></w:p>
</w:body></w:document>"#;
        assert_eq!(document_text(xml, 1 << 20).unwrap(), "Hello world & more\na\tb\ncé");
    }

    #[test]
    fn malformed_xml_is_corrupt() {
        let err = document_text(b"<w:p><w:t>x</w:q></w:p>", 1 << 20).unwrap_err();
        assert!(matches!(err.kind(), ErrorKind::Corrupt { format: Format::Docx, .. }), "{err}");
    }

    #[test]
    fn title_from_core_props() {
        let xml = br#"<cp:coreProperties xmlns:dc="d"><dc:title>On &amp; Off</dc:title></cp:coreProperties>"#;
        assert_eq!(core_title(xml).as_deref(), Some("On & Off"));
    }
}
