//! Per-tenant configuration: index parameters, policy and limits, validated
//! once, before anything is allocated for the tenant.

use neardup_core::{Config, Params, Policy};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Largest tenant id, in bytes.
pub const MAX_TENANT_ID: usize = 64;
/// Largest item id, in bytes.
pub const MAX_ITEM_ID: usize = 256;
/// Largest epoch: 2^53 − 1, the largest integer every JSON parser holds
/// exactly (JavaScript's `Number.MAX_SAFE_INTEGER`). A larger one would
/// reach a JavaScript client as another number, and 2^64 − 1 left an id
/// no write could ever follow.
pub const MAX_EPOCH: u64 = (1 << 53) - 1;

/// Refuses an epoch above [`MAX_EPOCH`].
pub(crate) fn check_epoch(epoch: u64) -> crate::Result<()> {
    if epoch > MAX_EPOCH {
        return Err(crate::Error::input("epoch", format!("{epoch} is over the largest epoch, {MAX_EPOCH} (2^53 - 1)")));
    }
    Ok(())
}

/// Thresholds of the tenant's decision policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// Stable policy id, recorded with every decision.
    pub id: String,
    /// Bumped whenever thresholds change.
    pub version: u32,
    /// Exact score at or above which an item is a duplicate.
    pub threshold_identical: f64,
    /// Exact score at or above which an item is a near duplicate.
    pub threshold_similar: f64,
}

/// Per-tenant resource budgets, checked before allocation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TenantLimits {
    /// Most live items.
    pub max_items: u64,
    /// Most bytes of live content (sum of content lengths).
    pub max_bytes: u64,
    /// Largest single item's content, in bytes.
    pub max_item_bytes: u64,
    /// Idempotency keys remembered; the oldest is forgotten beyond this.
    pub max_idempotency_keys: u64,
}

impl Default for TenantLimits {
    fn default() -> Self {
        TenantLimits {
            max_items: 10_000_000,
            max_bytes: 64 << 30,
            max_item_bytes: 4 << 20,
            max_idempotency_keys: 100_000,
        }
    }
}

/// Everything a tenant is configured with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    /// Pipeline parameters (normalizer, shingles, signature, LSH, guards).
    pub index: Config,
    /// Decision thresholds.
    pub policy: PolicyConfig,
    /// Budgets.
    #[serde(default)]
    pub limits: TenantLimits,
    /// Keep each item's original content with its record. Needed to rebuild
    /// under a different normalizer, shingling, seed or shingle cap (features
    /// cannot be recomputed from features); without it such rebuilds are
    /// refused with `rebuild_needs_content`.
    #[serde(default = "yes")]
    pub retain_content: bool,
}

fn yes() -> bool {
    true
}

impl TenantConfig {
    /// A configuration with `index` and the default policy: near duplicate at
    /// the index threshold, duplicate at score 1 (or equal content hashes).
    pub fn new(index: Config) -> TenantConfig {
        let similar = index.threshold;
        TenantConfig {
            index,
            policy: PolicyConfig {
                id: "default".into(),
                version: 1,
                threshold_identical: 1.0,
                threshold_similar: similar,
            },
            limits: TenantLimits::default(),
            retain_content: true,
        }
    }

    /// Validates everything and returns the resolved parts.
    pub(crate) fn resolve(&self) -> Result<(Params, Policy)> {
        let params = self.index.resolve()?;
        let p = &self.policy;
        let policy = Policy::new(p.id.clone(), p.version, p.threshold_identical, p.threshold_similar)?;
        let l = &self.limits;
        for (key, v) in [
            ("limits.max_items", l.max_items),
            ("limits.max_bytes", l.max_bytes),
            ("limits.max_item_bytes", l.max_item_bytes),
            ("limits.max_idempotency_keys", l.max_idempotency_keys),
        ] {
            if v == 0 {
                return Err(Error::config(key, "must be at least 1"));
            }
        }
        if l.max_items > u64::from(neardup_core::MAX_ITEM_ID) {
            return Err(Error::config("limits.max_items", format!("must be at most {}", neardup_core::MAX_ITEM_ID)));
        }
        if l.max_item_bytes > 1 << 30 {
            return Err(Error::config("limits.max_item_bytes", "must be at most 1 GiB"));
        }
        Ok((params, policy))
    }

    /// Stable JSON form (field names, not enum positions, reach the disk).
    pub(crate) fn to_json(&self) -> Result<String> {
        serde_json::to_string(self).map_err(|e| Error::state(format!("encoding a tenant configuration: {e}")))
    }

    pub(crate) fn from_json(s: &str) -> Result<TenantConfig> {
        serde_json::from_str(s).map_err(|e| Error::corrupt("tenant config", e.to_string()))
    }

    /// True when `other` computes the same canonical features for the same
    /// content (so a rebuild can reuse stored features).
    pub(crate) fn same_features(&self, other: &TenantConfig) -> bool {
        let (a, b) = (&self.index, &other.index);
        a.normalizer == b.normalizer
            && a.shingle_kind == b.shingle_kind
            && a.shingle_width == b.shingle_width
            && a.seed == b.seed
            && a.max_shingles == b.max_shingles
    }
}

/// Checks a tenant id: 1..=64 bytes of `[A-Za-z0-9_.-]`.
pub(crate) fn check_tenant_id(id: &str) -> Result<()> {
    if id.is_empty() || id.len() > MAX_TENANT_ID {
        return Err(Error::input("tenant_id", format!("must be 1..={MAX_TENANT_ID} bytes")));
    }
    // The id names a snapshot directory: it must not be `.` or `..`.
    if !id.as_bytes()[0].is_ascii_alphanumeric()
        || !id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    {
        return Err(Error::input("tenant_id", "must start with [A-Za-z0-9] and use only [A-Za-z0-9_.-]"));
    }
    Ok(())
}

/// Checks an item id: 1..=256 bytes, and no character that cannot be seen
/// (see [`refused_in_item_id`]), so that two different ids never look the
/// same and an id is never shown reordered.
pub(crate) fn check_item_id(id: &str) -> Result<()> {
    if id.is_empty() || id.len() > MAX_ITEM_ID {
        return Err(Error::input("item_id", format!("must be 1..={MAX_ITEM_ID} bytes")));
    }
    if let Some((at, c, why)) = id.char_indices().find_map(|(at, c)| refused_in_item_id(c).map(|why| (at, c, why))) {
        return Err(Error::input("item_id", format!("U+{:04X} at byte {at} is not allowed: {why}", c as u32)));
    }
    Ok(())
}

/// Why `c` may not stand in an item id, or `None` when it may: control
/// characters (Unicode general category `Cc`), format characters (`Cf`:
/// bidirectional controls, zero-width characters, the byte-order mark, the
/// soft hyphen, tag characters, ...), the line and paragraph separators
/// (`Zl`, `Zp`), and the other default-ignorable or blank code points
/// (fillers, variation selectors, the combining grapheme joiner, the
/// blank braille pattern). The categories come from the
/// `unicode-properties` tables; letters, marks, digits, punctuation,
/// symbols (emoji included) and spaces (`Zs`) are allowed.
fn refused_in_item_id(c: char) -> Option<&'static str> {
    use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};
    match c.general_category() {
        GeneralCategory::Control => Some("control characters (Unicode category Cc) are not allowed"),
        GeneralCategory::Format => Some(
            "invisible formatting characters (Unicode category Cf: bidirectional controls, zero-width \
             characters, tags, ...) are not allowed",
        ),
        GeneralCategory::LineSeparator => Some("the line separator (Unicode category Zl) is not allowed"),
        GeneralCategory::ParagraphSeparator => Some("the paragraph separator (Unicode category Zp) is not allowed"),
        _ if is_other_invisible(c) => Some(
            "invisible characters (fillers, variation selectors, the combining grapheme joiner, \
             the blank braille pattern, reserved default-ignorable code points) are not allowed",
        ),
        _ => None,
    }
}

/// Code points outside `Cc`, `Cf`, `Zl` and `Zp` that show nothing: the
/// rest of Unicode's `Default_Ignorable_Code_Point` (which the
/// `unicode-properties` crate does not carry) and U+2800, which renders
/// blank.
fn is_other_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{034F}' // COMBINING GRAPHEME JOINER
            | '\u{115F}' | '\u{1160}' // HANGUL CHOSEONG / JUNGSEONG FILLER
            | '\u{17B4}' | '\u{17B5}' // KHMER VOWEL INHERENT AQ / AA
            | '\u{180B}'..='\u{180F}' // MONGOLIAN FREE VARIATION SELECTORS, VOWEL SEPARATOR
            | '\u{2065}' // reserved, default-ignorable
            | '\u{2800}' // BRAILLE PATTERN BLANK
            | '\u{3164}' // HANGUL FILLER
            | '\u{FE00}'..='\u{FE0F}' // VARIATION SELECTORS
            | '\u{FFA0}' // HALFWIDTH HANGUL FILLER
            | '\u{FFF0}'..='\u{FFF8}' // reserved, default-ignorable
            | '\u{E0000}'..='\u{E0FFF}' // tags, VARIATION SELECTORS SUPPLEMENT, reserved
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip_and_unknown_fields_rejected() {
        let c = TenantConfig::new(Config::seed_example());
        let back = TenantConfig::from_json(&c.to_json().unwrap()).unwrap();
        assert_eq!(back, c);
        let mut v: serde_json::Value = serde_json::from_str(&c.to_json().unwrap()).unwrap();
        v["surprise"] = serde_json::json!(1);
        assert!(TenantConfig::from_json(&v.to_string()).is_err());
    }

    #[test]
    fn limits_validated() {
        let mut c = TenantConfig::new(Config::seed_example());
        c.limits.max_items = 0;
        assert_eq!(c.resolve().unwrap_err().code(), "invalid_config");
        let mut c = TenantConfig::new(Config::seed_example());
        c.policy.threshold_similar = 1.5;
        assert!(c.resolve().is_err());
    }

    #[test]
    fn ids_checked() {
        assert!(check_tenant_id("acme-1.prod_x").is_ok());
        assert!(check_tenant_id("").is_err());
        assert!(check_tenant_id("a/b").is_err());
        assert!(check_tenant_id("..").is_err());
        assert!(check_item_id("x").is_ok());
        assert!(check_item_id("a\nb").is_err());
        // Issue 15: ids that look alike or display reordered.
        for id in ["a\u{202E}gpj.exe", "a\u{200B}b", "\u{FEFF}a", "a\u{2066}b"] {
            let e = check_item_id(id).unwrap_err().to_string();
            assert!(e.contains("invisible"), "{e}");
        }
        assert!(check_item_id("café-ü-日本").is_ok());
        assert!(check_item_id(&"x".repeat(257)).is_err());
    }

    /// Issue 45 item 10: every format character (Cf) and both separators
    /// (Zl, Zp) is refused, wherever it stands, and the error names it.
    #[test]
    fn every_format_and_separator_character_refused() {
        use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};
        let mut tried = 0;
        for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
            let code = match c.general_category() {
                GeneralCategory::Format => "Cf",
                GeneralCategory::LineSeparator => "Zl",
                GeneralCategory::ParagraphSeparator => "Zp",
                _ => continue,
            };
            tried += 1;
            let name = format!("U+{:04X}", c as u32);
            for id in [format!("a{c}b"), format!("{c}a"), format!("a{c}"), c.to_string()] {
                let e = check_item_id(&id).expect_err(&name).to_string();
                assert!(e.contains(&name) && e.contains(code), "{name}: {e}");
            }
        }
        // Unicode 15.1 has 170 Cf code points; the crate's table must not be empty.
        assert!(tried >= 160, "only {tried} Cf/Zl/Zp code points");
    }

    /// Invisible or blank code points outside Cf (default-ignorable fillers,
    /// variation selectors, the combining grapheme joiner, the blank braille
    /// pattern) are refused too, with the reason.
    #[test]
    fn other_invisible_characters_refused() {
        let mut invisible = vec!['\u{034F}', '\u{115F}', '\u{1160}', '\u{17B4}', '\u{17B5}', '\u{2065}', '\u{2800}'];
        invisible.extend(['\u{3164}', '\u{FFA0}', '\u{FFF0}', '\u{FFF8}', '\u{E0000}', '\u{E0FFF}']);
        invisible.extend(('\u{180B}'..='\u{180F}').chain('\u{FE00}'..='\u{FE0F}').chain('\u{E0100}'..='\u{E01EF}'));
        // The examples: Arabic letter mark, the separators, a tag.
        invisible.extend(['\u{061C}', '\u{2028}', '\u{2029}', '\u{E0041}', '\u{E007F}']);
        for c in invisible {
            let name = format!("U+{:04X}", c as u32);
            let e = check_item_id(&format!("id{c}x")).expect_err(&name).to_string();
            assert!(e.contains(&name) && (e.contains("invisible") || e.contains("separator")), "{name}: {e}");
        }
    }

    /// Ordinary visible text in any script stays a valid id.
    #[test]
    fn visible_text_in_any_script_accepted() {
        for id in [
            "café-Ü-Ångström-ñ-Øre",
            "cafe\u{0301}",
            "日本語の文書-42",
            "中文文档_七",
            "문서-2024",
            "مستند-١٢",
            "العربية",
            "מסמך-7",
            "שָׁלוֹם",
            "दस्तावेज़-३",
            "हिन्दी",
            "เอกสาร",
            "Ελληνικά",
            "Документ №5",
            "🦀-👍🏽-🇫🇷-🎉",
            "report 2024 (final).pdf",
            "a/b:c@d#e?f=g&h",
        ] {
            assert!(check_item_id(id).is_ok(), "{id:?}: {:?}", check_item_id(id));
        }
    }
}
