//! Where an item's content came from, recorded with the item.
//!
//! The record of an item read from a store keeps, beside its text or
//! features, the object it was read from: URI, store, ETag, version (when
//! the store versions objects) and the BLAKE3-256 of the bytes read. They
//! travel as parameters of the item's media type, which the command log,
//! the item store and snapshots already record verbatim, so no byte format
//! changes:
//!
//! ```text
//! text/plain; content-source="s3://docs/a.txt"; content-store="corpus";
//!     content-etag="\"9a0364b9e99bb480dd25e1f0284c8555\""; content-blake3="…"
//! ```
//!
//! Values are RFC 2045 quoted strings (`\` escapes `"` and `\`). The
//! gateway strips these parameters from the media type it shows, shows
//! them as the item's `content_source`, and refuses them on inline content,
//! so a producer cannot forge a provenance.

/// The parameters this module owns; all start with `content-`.
const PREFIX: &str = "content-";

/// The object an item's content was read from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct ContentSource {
    /// `s3://BUCKET/KEY`.
    pub uri: String,
    /// The operator's name for the store.
    pub store: String,
    /// The object's ETag when it was read.
    pub etag: Option<String>,
    /// The object's version when it was read (versioned buckets).
    pub version: Option<String>,
    /// BLAKE3-256 of the bytes read, hex.
    pub blake3: String,
}

impl ContentSource {
    /// `essence` (e.g. `text/plain`) with this source as parameters.
    pub fn media_type(&self, essence: &str) -> String {
        let mut out = essence.trim().to_string();
        let mut param = |name: &str, v: &str| {
            out.push_str("; ");
            out.push_str(PREFIX);
            out.push_str(name);
            out.push_str("=\"");
            for c in v.chars() {
                if c == '"' || c == '\\' {
                    out.push('\\');
                }
                out.push(c);
            }
            out.push('"');
        };
        param("source", &self.uri);
        param("store", &self.store);
        if let Some(e) = &self.etag {
            param("etag", e);
        }
        if let Some(v) = &self.version {
            param("version", v);
        }
        param("blake3", &self.blake3);
        out
    }

    /// Splits a recorded media type into what the producer sent and the
    /// source, if it has one.
    pub fn split(media_type: &str) -> (String, Option<ContentSource>) {
        let params = parameters(media_type);
        let essence = media_type.split(';').next().unwrap_or("").trim().to_string();
        let mut kept = essence.clone();
        let (mut uri, mut store, mut etag, mut version, mut blake3) = (None, None, None, None, None);
        for (name, value) in params {
            match name.strip_prefix(PREFIX) {
                Some("source") => uri = Some(value),
                Some("store") => store = Some(value),
                Some("etag") => etag = Some(value),
                Some("version") => version = Some(value),
                Some("blake3") => blake3 = Some(value),
                _ => {
                    kept.push_str("; ");
                    kept.push_str(&name);
                    kept.push('=');
                    kept.push_str(&value);
                }
            }
        }
        let source = match (uri, store, blake3) {
            (Some(uri), Some(store), Some(blake3)) => Some(ContentSource { uri, store, etag, version, blake3 }),
            _ => None,
        };
        (kept, source)
    }

    /// True when `media_type` names a parameter this module owns (refused
    /// on inline content).
    pub fn claims(media_type: &str) -> bool {
        parameters(media_type).iter().any(|(n, _)| n.starts_with(PREFIX))
    }
}

/// `name=value` parameters after the essence, names lowercased, quoted
/// values unescaped. Malformed ones are skipped.
fn parameters(media_type: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Some((_, mut rest)) = media_type.split_once(';') else { return out };
    loop {
        rest = rest.trim_start_matches([' ', '\t', ';']);
        if rest.is_empty() {
            return out;
        }
        let Some((name, after)) = rest.split_once('=') else { return out };
        let name = name.trim().to_ascii_lowercase();
        let after = after.trim_start();
        let (value, tail) = if let Some(q) = after.strip_prefix('"') {
            let mut v = String::new();
            let mut chars = q.char_indices();
            let mut end = q.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, n)) = chars.next() {
                            v.push(n);
                        }
                    }
                    '"' => {
                        end = i + 1;
                        break;
                    }
                    c => v.push(c),
                }
            }
            (v, &q[end.min(q.len())..])
        } else {
            let (v, t) = after.split_once(';').unwrap_or((after, ""));
            (v.trim().to_string(), t)
        };
        out.push((name, value));
        rest = tail;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source() -> ContentSource {
        ContentSource {
            uri: "s3://docs/a \"quoted\" \\ key;x=y.txt".into(),
            store: "corpus".into(),
            etag: Some("\"9a0364b9e99bb480dd25e1f0284c8555\"".into()),
            version: None,
            blake3: "ab".repeat(32),
        }
    }

    #[test]
    fn round_trips_through_the_media_type() {
        let s = source();
        let mt = s.media_type("text/plain");
        assert!(mt.starts_with("text/plain; content-source="), "{mt}");
        assert!(mt.trim().starts_with("text/"), "the engine still sees text/*");
        assert_eq!(ContentSource::split(&mt), ("text/plain".to_string(), Some(s.clone())));
        assert!(ContentSource::claims(&mt));
        let versioned = ContentSource { version: Some("3".into()), etag: None, ..s };
        assert_eq!(ContentSource::split(&versioned.media_type("text/markdown")).1, Some(versioned));
    }

    #[test]
    fn other_parameters_are_kept_and_not_claimed() {
        assert_eq!(ContentSource::split("text/plain; charset=utf-8"), ("text/plain; charset=utf-8".into(), None));
        assert!(!ContentSource::claims("text/plain; charset=utf-8"));
        assert!(ContentSource::claims("text/plain; Content-Source=\"s3://x/y\""));
        assert_eq!(ContentSource::split("text/plain"), ("text/plain".into(), None));
        // Malformed tails are not a panic.
        for mt in ["text/plain;", "text/plain; =", "text/plain; a=\"unterminated", "text/plain; a=\"x\\"] {
            let _ = ContentSource::split(mt);
        }
    }
}
