//! JSONL records, read robustly: bounded line length, invalid UTF-8,
//! malformed JSON and missing fields are reported per line, never fatal and
//! never silently dropped. This file holds what a record is and how a line
//! is parsed into one, and [`JsonlReader`], which reads an input's lines
//! mapped (`mapped.rs`) or through a buffer (`read.rs`).

use std::borrow::Cow;
use std::fmt;
use std::fs::File;
use std::io::BufRead;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use anyhow::Context;
use bytes::Bytes;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};

mod mapped;
mod read;

use mapped::Mapped;

pub use mapped::{is_unreadable_mapping, UNREADABLE};
pub use read::Limits;
#[cfg(fuzzing)]
pub(crate) use read::{every_chunk, ChunkRead};
pub(crate) use read::{stream, Head};

/// Where a JSONL input's lines come from.
pub enum JsonlReader {
    /// A plain file mapped into memory: each line is a slice of the
    /// mapping, with no copy and no memory of its own (see [`Mapped`]).
    Mapped(Mapped),
    /// A stream (standard input, a compressed file, a file that cannot be
    /// mapped), read through a buffer, each line copied out.
    Stream(Box<dyn BufRead + Send>),
}

impl fmt::Debug for JsonlReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonlReader::Mapped(m) => m.fmt(f),
            JsonlReader::Stream(_) => f.write_str("Stream"),
        }
    }
}

impl JsonlReader {
    /// Opens `path` (`-`: standard input) once: mapped when it is a plain,
    /// uncompressed regular file and `mmap` allows, else read as a stream
    /// ([`read::stream`]). `read` counts the bytes of the file taken, for
    /// progress.
    pub fn open(path: &str, mmap: bool, read: Arc<AtomicU64>) -> anyhow::Result<JsonlReader> {
        if path == "-" {
            return Ok(JsonlReader::Stream(read::stream(std::io::stdin(), read, path)?));
        }
        let file = File::open(path).with_context(|| format!("cannot open {path}"))?;
        if mmap {
            if let Some(map) = mapped::map_plain(&file, path)? {
                return Ok(JsonlReader::Mapped(Mapped::new(map, file, read)));
            }
        }
        Ok(JsonlReader::Stream(read::stream(file, read, path)?))
    }

    /// A stream of lines from `raw` (an object store's GET), decompressed
    /// as [`JsonlReader::open`] decompresses a file; errors name `name`.
    pub fn from_read(
        raw: impl std::io::Read + Send + 'static,
        read: Arc<AtomicU64>,
        name: &str,
    ) -> anyhow::Result<JsonlReader> {
        Ok(JsonlReader::Stream(read::stream(raw, read, name)?))
    }

    /// Reads a chunk of lines into `out` (empty), up to `limits`, skipping
    /// over-long lines (reported in `rejects`) and blank ones; lines are
    /// numbered on from `next_line`. Returns false at end of input.
    pub fn read_chunk(
        &mut self,
        next_line: &mut u64,
        limits: Limits,
        out: &mut Vec<Line>,
        rejects: &mut Vec<Reject>,
    ) -> std::io::Result<bool> {
        match self {
            JsonlReader::Mapped(m) => m.read_chunk(next_line, limits, out, rejects),
            JsonlReader::Stream(r) => read::read_chunk(r, next_line, limits, out, rejects),
        }
    }
}

/// One record of input: its number in the run (1-based; a JSONL line or a
/// Parquet row) and what it holds.
#[derive(Debug)]
pub struct Line {
    pub number: u64,
    pub body: Body,
}

/// What a record holds.
#[derive(Debug)]
pub enum Body {
    /// A JSONL line's raw bytes (without the newline): a slice of a mapped
    /// file, or a copy read from a stream.
    Json(Bytes),
    /// A Parquet row, by its position in the chunk's rows, with the values
    /// of the id and text columns (and of the keeper policy's column).
    Row { row: usize, id: Option<String>, text: String, key: Option<f64> },
}

impl Line {
    /// The record's id and text.
    pub fn record(&self, text_field: &str, id_field: &str) -> Result<Record<'_>, String> {
        match &self.body {
            Body::Json(bytes) => parse_record(bytes, text_field, id_field),
            Body::Row { .. } => self.record_keyed(text_field, id_field, None),
        }
    }

    /// [`Line::record`], with the keeper policy's field when given.
    pub fn record_keyed(
        &self,
        text_field: &str,
        id_field: &str,
        key_field: Option<&str>,
    ) -> Result<Record<'_>, String> {
        match &self.body {
            Body::Json(bytes) => parse_record_keyed(bytes, text_field, id_field, key_field),
            Body::Row { id, text, key, .. } => {
                Ok(Record { id: id.as_deref().map(Cow::Borrowed), text: Cow::Borrowed(text), key: *key })
            }
        }
    }

    /// Bytes of input the record stands for: the line, or the row's id and text.
    pub fn len(&self) -> usize {
        match &self.body {
            Body::Json(bytes) => bytes.len(),
            Body::Row { id, text, .. } => text.len() + id.as_ref().map_or(0, String::len),
        }
    }

    /// Whether the record stands for no bytes of input.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A line that could not be read as a record.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Reject {
    /// The input it is in, when a run reads several.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Its line: in `file` when set, else in the (single) input.
    pub line: u64,
    pub reason: String,
}

impl Reject {
    /// A reject at a line of the whole run's input.
    pub fn at(line: u64, reason: String) -> Reject {
        Reject { file: None, line, reason }
    }

    /// `FILE:LINE` or `line N`, for messages.
    pub fn place(&self) -> String {
        match &self.file {
            Some(f) => format!("{f}:{}", self.line),
            None => format!("line {}", self.line),
        }
    }
}

/// A record's id and text, borrowed from the line where possible.
#[derive(Debug)]
pub struct Record<'a> {
    pub id: Option<Cow<'a, str>>,
    pub text: Cow<'a, str>,
    /// The value of the keeper policy's field (`--keep max:FIELD`), when
    /// one is asked for and the record has a usable one.
    pub key: Option<f64>,
}

/// Extracts `text_field` and `id_field` from a JSON object line. A field
/// name with dots is also a path into nested objects (`meta.body` is the
/// `body` of the object under `meta`), unless the record has a key spelled
/// exactly so.
pub fn parse_record<'a>(line: &'a [u8], text_field: &str, id_field: &str) -> Result<Record<'a>, String> {
    parse_record_keyed(line, text_field, id_field, None)
}

/// [`parse_record`], also reading `key_field` (a number, a string holding
/// one, or an ISO 8601 date: [`neardup_core::Keep::value_of_text`]) when given.
/// A key that is missing, null or of another kind is no key, not an error.
pub fn parse_record_keyed<'a>(
    line: &'a [u8],
    text_field: &str,
    id_field: &str,
    key_field: Option<&str>,
) -> Result<Record<'a>, String> {
    // A UTF-8 byte-order mark (editors put one before the first line) is not content.
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    // Validated with SIMD; std's validator, slower, only says where it fails.
    let s = simdutf8::basic::from_utf8(line).map_err(|_| match std::str::from_utf8(line) {
        Err(e) => format!("invalid UTF-8 at byte {}", e.valid_up_to()),
        Ok(_) => "invalid UTF-8".to_owned(),
    })?;
    let mut de = serde_json::Deserializer::from_str(s);
    let extract = Extract {
        text: Some(text_field),
        id: Some(id_field),
        key: key_field,
        text_field,
        id_field,
        key_field: key_field.unwrap_or(""),
        top: true,
    };
    let Fields { id, text, key } = extract.deserialize(&mut de).map_err(|e| format!("malformed JSON: {e}"))?;
    de.end().map_err(|e| format!("malformed JSON: {e}"))?;
    let text = text.ok_or_else(|| format!("missing string field {text_field:?}"))?;
    Ok(Record { id, text, key: key.flatten() })
}

/// Looks for the text and the id in one object: `text` and `id` are what
/// is left of each path at this depth (`None` once it cannot be here).
struct Extract<'f> {
    text: Option<&'f str>,
    id: Option<&'f str>,
    key: Option<&'f str>,
    text_field: &'f str,
    id_field: &'f str,
    key_field: &'f str,
    top: bool,
}

/// What [`Extract`] found: `key` is `Some` once the key field was seen
/// (holding `None` when its value is not usable).
#[derive(Default)]
struct Fields<'a> {
    id: Option<Cow<'a, str>>,
    text: Option<Cow<'a, str>>,
    key: Option<Option<f64>>,
}

/// A keeper policy's value: a number, or a string holding a number or a
/// date; anything else (null, a boolean, an object) is no value.
struct KeyValue(Option<f64>);

impl<'de> de::Deserialize<'de> for KeyValue {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = KeyValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_f64<E>(self, v: f64) -> Result<KeyValue, E> {
                Ok(KeyValue(neardup_core::Keep::value_of_number(v)))
            }
            fn visit_u64<E>(self, v: u64) -> Result<KeyValue, E> {
                Ok(KeyValue(Some(v as f64)))
            }
            fn visit_i64<E>(self, v: i64) -> Result<KeyValue, E> {
                Ok(KeyValue(Some(v as f64)))
            }
            fn visit_str<E>(self, v: &str) -> Result<KeyValue, E> {
                Ok(KeyValue(neardup_core::Keep::value_of_text(v)))
            }
            fn visit_bool<E>(self, _: bool) -> Result<KeyValue, E> {
                Ok(KeyValue(None))
            }
            fn visit_unit<E>(self) -> Result<KeyValue, E> {
                Ok(KeyValue(None))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<KeyValue, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(KeyValue(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<KeyValue, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(KeyValue(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// The keeper policy's key at `path` inside a value: `Some(value)` once
/// found (`Some(None)`: found, not usable), `None` when the path is not
/// there — whatever the value is (an object, or anything else).
struct KeyAt<'f>(&'f str);

impl<'de> DeserializeSeed<'de> for KeyAt<'_> {
    type Value = Option<Option<f64>>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for KeyAt<'_> {
    type Value = Option<Option<f64>>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found: Option<Option<f64>> = None;
        while let Some(name) = map.next_key::<Cow<'de, str>>()? {
            let value = if *name == *self.0 {
                Some(map.next_value::<KeyValue>()?.0)
            } else if let Some(path) = below(Some(self.0), &name) {
                map.next_value_seed(KeyAt(path))?
            } else {
                map.next_value::<IgnoredAny>()?;
                None
            };
            if let Some(v) = value {
                if found.replace(v).is_some() {
                    return Err(de::Error::custom(format!("field {:?} appears twice", self.0)));
                }
            }
        }
        Ok(found)
    }
}

impl<'de> DeserializeSeed<'de> for Extract<'_> {
    type Value = Fields<'de>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        if self.top {
            d.deserialize_map(self)
        } else {
            // A nested value on the way to a field: an object, or null (absent).
            d.deserialize_any(self)
        }
    }
}

/// The rest of `path` below `key`, when `path` goes through `key`.
fn below<'f>(path: Option<&'f str>, key: &str) -> Option<&'f str> {
    path?.strip_prefix(key)?.strip_prefix('.')
}

/// An id may be a JSON string or integer.
struct IdValue<'a>(Cow<'a, str>);

impl<'de> de::Deserialize<'de> for IdValue<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = IdValue<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or integer id")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(IdValue(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(IdValue(Cow::Owned(v.to_owned())))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
                Ok(IdValue(Cow::Owned(v.to_string())))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
                Ok(IdValue(Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Visitor<'de> for Extract<'_> {
    type Value = Fields<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Fields::default())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let Fields { mut id, mut text, mut key } = Fields::default();
        let twice = |field: &str| de::Error::custom(format!("field {field:?} appears twice"));
        while let Some(name) = map.next_key::<Cow<'de, str>>()? {
            if self.text == Some(&*name) {
                if text.is_some() {
                    return Err(twice(self.text_field));
                }
                let v: Cow<'de, str> = map
                    .next_value::<Option<Cow<'de, str>>>()?
                    .ok_or_else(|| de::Error::custom(format!("field {:?} is null", self.text_field)))?;
                text = Some(v);
            } else if self.id == Some(&*name) {
                if id.is_some() {
                    return Err(twice(self.id_field));
                }
                id = Some(map.next_value::<IdValue<'de>>()?.0);
            } else if self.key == Some(&*name) {
                if key.is_some() {
                    return Err(twice(self.key_field));
                }
                key = Some(map.next_value::<KeyValue>()?.0);
            } else if below(self.text, &name).is_none() && below(self.id, &name).is_none() {
                // Only the policy's key may lie below: a value that is not
                // an object there is no key, not a malformed record.
                match below(self.key, &name) {
                    Some(path) => {
                        if let Some(k) = map.next_value_seed(KeyAt(path))? {
                            if key.replace(k).is_some() {
                                return Err(twice(self.key_field));
                            }
                        }
                    }
                    None => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            } else {
                let nested = Extract {
                    text: below(self.text, &name),
                    id: below(self.id, &name),
                    key: below(self.key, &name),
                    top: false,
                    ..self
                };
                let Fields { id: i, text: t, key: k } = map.next_value_seed(nested)?;
                if let Some(k) = k {
                    if key.replace(k).is_some() {
                        return Err(twice(self.key_field));
                    }
                }
                if let Some(t) = t {
                    if text.replace(t).is_some() {
                        return Err(twice(self.text_field));
                    }
                }
                if let Some(i) = i {
                    if id.replace(i).is_some() {
                        return Err(twice(self.id_field));
                    }
                }
            }
        }
        Ok(Fields { id, text, key })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_keeper_policys_field_and_never_rejects_for_it() {
        let key = |line: &[u8], field: &str| parse_record_keyed(line, "text", "id", Some(field)).map(|r| r.key);
        assert_eq!(key(br#"{"text": "a", "q": 0.5}"#, "q"), Ok(Some(0.5)));
        assert_eq!(key(br#"{"q": -3, "text": "a"}"#, "q"), Ok(Some(-3.0)));
        assert_eq!(key(br#"{"text": "a", "q": "7"}"#, "q"), Ok(Some(7.0)));
        assert_eq!(key(br#"{"text": "a", "q": "1970-01-02"}"#, "q"), Ok(Some(86_400.0)));
        // Nested, beside the text, or only the key below a name.
        assert_eq!(key(br#"{"meta": {"q": 2, "x": [1]}, "text": "a"}"#, "meta.q"), Ok(Some(2.0)));
        let r = parse_record_keyed(br#"{"doc": {"body": "b", "q": 4}}"#, "doc.body", "id", Some("doc.q")).unwrap();
        assert_eq!((&*r.text, r.key), ("b", Some(4.0)));
        assert_eq!(key(br#"{"text": "a", "meta.q": 9}"#, "meta.q"), Ok(Some(9.0)));
        // No usable value is no key, never a rejected record.
        for line in [
            &br#"{"text": "a"}"#[..],
            br#"{"text": "a", "q": null}"#,
            br#"{"text": "a", "q": true}"#,
            br#"{"text": "a", "q": "soon"}"#,
            br#"{"text": "a", "q": {"v": 1}}"#,
            br#"{"text": "a", "q": [1, 2]}"#,
        ] {
            assert_eq!(key(line, "q"), Ok(None), "{}", String::from_utf8_lossy(line));
        }
        for line in [
            &br#"{"text": "a", "meta": 5}"#[..],
            br#"{"text": "a", "meta": "x"}"#,
            br#"{"text": "a", "meta": [{"q": 1}]}"#,
            br#"{"text": "a", "meta": null}"#,
            br#"{"text": "a", "meta": {"r": 1}}"#,
        ] {
            assert_eq!(key(line, "meta.q"), Ok(None), "{}", String::from_utf8_lossy(line));
        }
        assert!(key(br#"{"text": "a", "q": 1, "q": 2}"#, "q").unwrap_err().contains("twice"));
    }

    #[test]
    fn extracts_fields_and_reports_problems() {
        let r = parse_record(br#"{"id": 7, "text": "a\nb", "x": [1,{"y":2}]}"#, "text", "id").unwrap();
        assert_eq!(r.id.as_deref(), Some("7"));
        assert_eq!(r.text, "a\nb");
        assert!(parse_record(br#"{"id": 7}"#, "text", "id").unwrap_err().contains("missing"));
        assert!(parse_record(br#"{"text": 5}"#, "text", "id").unwrap_err().contains("malformed"));
        assert!(parse_record(b"{\"text\": \"\xff\"}", "text", "id").unwrap_err().contains("UTF-8"));
        assert!(parse_record(br#"{"text": "a"} x"#, "text", "id").unwrap_err().contains("malformed"));
        // Issue 15: a repeated field used to take its last value silently;
        // a byte-order mark made the first line malformed.
        let twice = parse_record(br#"{"text": "a", "text": "b"}"#, "text", "id").unwrap_err();
        assert!(twice.contains("appears twice"), "{twice}");
        assert!(parse_record(br#"{"id": 1, "id": 2, "text": "a"}"#, "text", "id").unwrap_err().contains("twice"));
        assert_eq!(parse_record(b"\xEF\xBB\xBF{\"text\": \"a\"}", "text", "id").unwrap().text, "a");
        // Issue 13: nested fields by a dotted path; a flat key spelled with
        // dots still matches itself.
        let nested = br#"{"meta": {"doc": {"id": 9}, "body": "deep"}, "text": "top"}"#;
        let r = parse_record(nested, "meta.body", "meta.doc.id").unwrap();
        assert_eq!((r.id.as_deref(), &*r.text), (Some("9"), "deep"));
        let r = parse_record(br#"{"meta.body": "flat", "x": 1}"#, "meta.body", "id").unwrap();
        assert_eq!(r.text, "flat");
        assert!(parse_record(br#"{"meta": null}"#, "meta.body", "id").unwrap_err().contains("missing"));
        assert!(parse_record(br#"{"meta": {"body": 5}}"#, "meta.body", "id").unwrap_err().contains("malformed"));
        let twice = parse_record(br#"{"meta": {"body": "a"}, "meta.body": "b"}"#, "meta.body", "id").unwrap_err();
        assert!(twice.contains("appears twice"), "{twice}");
        assert!(parse_record(br#"[1]"#, "text", "id").unwrap_err().contains("malformed"));
    }
}
