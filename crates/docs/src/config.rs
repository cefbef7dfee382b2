//! Scan configuration: the `[dedup]` section of `neardup.toml`, environment
//! variables and command-line flags, merged in that order of precedence and
//! validated once into [`ScanSettings`].
//!
//! | key                     | type   | default                | environment (alias)                                              |
//! |-------------------------|--------|------------------------|------------------------------------------------------------------|
//! | `enabled`               | bool   | `true`                 | `NEARDUP_DEDUP_ENABLED` (`KOMP_DEDUP_ENABLED`)                   |
//! | `matchers`              | string | `"embedding,minhash"`  | `NEARDUP_DEDUP_MATCHERS` (`KOMP_DEDUP_MATCHERS`)                 |
//! | `threshold_identical`   | float  | `0.95`                 | `NEARDUP_DEDUP_THRESHOLD_IDENTICAL` (`KOMP_DEDUP_THRESHOLD_IDENTICAL`) |
//! | `threshold_similar`     | float  | `0.80`                 | `NEARDUP_DEDUP_THRESHOLD_SIMILAR` (`KOMP_DEDUP_THRESHOLD_SIMILAR`) |
//! | `model`                 | string | `""` (embedding off)   | `NEARDUP_DEDUP_MODEL` (`KOMP_DEDUP_MODEL`)                       |
//! | `minhash_lsh_threshold` | float  | the raw Jaccard at which calibrated MinHash reaches `threshold_similar` (0.45) | `NEARDUP_DEDUP_MINHASH_LSH_THRESHOLD` (`KOMP_DEDUP_MINHASH_LSH_THRESHOLD`) |
//! | `shingle_width`         | int    | `5` (word shingles)    | `NEARDUP_DEDUP_SHINGLE_WIDTH` (`KOMP_DEDUP_SHINGLE_WIDTH`)       |
//! | `normalizer`            | string | `"unicode"`            | `NEARDUP_DEDUP_NORMALIZER` (`KOMP_DEDUP_NORMALIZER`)             |
//! | `chunk_words`           | int    | `200`                  | `NEARDUP_DEDUP_CHUNK_WORDS` (`KOMP_DEDUP_CHUNK_WORDS`)           |
//! | `max_file_bytes`        | int    | `268435456` (256 MiB)  | `NEARDUP_DEDUP_MAX_FILE_BYTES` (`KOMP_DEDUP_MAX_FILE_BYTES`)     |
//! | `max_chunks`            | int    | `16`                   | `NEARDUP_DEDUP_MAX_CHUNKS` (`KOMP_DEDUP_MAX_CHUNKS`)             |
//! | `minhash_calibration`   | string | `"auto"`               | `NEARDUP_DEDUP_MINHASH_CALIBRATION` (`KOMP_DEDUP_MINHASH_CALIBRATION`) |
//! | `embedding_calibration` | string | `"auto"`               | `NEARDUP_DEDUP_EMBEDDING_CALIBRATION` (`KOMP_DEDUP_EMBEDDING_CALIBRATION`) |
//! | `boilerplate_weighting` | bool   | `true`                 | `NEARDUP_DEDUP_BOILERPLATE_WEIGHTING` (`KOMP_DEDUP_BOILERPLATE_WEIGHTING`) |
//!
//! Calibrations (see [`crate::calibrate`]) are `auto` (the shipped map:
//! for MinHash on word 5-grams, for an embedding model we have measured;
//! otherwise the raw score, with a note), `none` (the raw score) or knots
//! `RAW:CALIBRATED,…`.
//!
//! When both a `NEARDUP_` variable and its `KOMP_` alias are set, the
//! `NEARDUP_` one wins. The seed's default for `enabled` is `false` because
//! there dedup is one optional step of a larger ingest; `neardup scan` exists
//! to run it, so here it defaults to `true`, and `enabled = false` makes a
//! scan parse, cache and record documents without comparing them.

use std::path::Path;

use neardup_core::{Config as CoreConfig, Normalizer, Params, Policy};
use serde::{Deserialize, Serialize};

use crate::calibrate::{Calibration, MINHASH_WORD5};
use crate::embed::{DEFAULT_CHUNK_WORDS, DEFAULT_MAX_CHUNKS};
use crate::error::Error;
use crate::limits::Limits;

/// Writes the layer struct, its key list, its merge and its setter from one
/// list of fields, so that each `[dedup]` key is written once: its doc comment
/// is both the rustdoc and the flag's `--help` text, its name the TOML key,
/// the flag (`--shingle-width`) and the environment variable
/// (`NEARDUP_DEDUP_SHINGLE_WIDTH`).
macro_rules! layer {
    ($(#[$outer:meta])* pub struct $name:ident { $( $(#[$attr:meta])* pub $field:ident : Option<$ty:ty>, )* }) => {
        $(#[$outer])*
        pub struct $name { $( $(#[$attr])* pub $field: Option<$ty>, )* }

        /// The keys of [`ConfigLayer`], as spelt in TOML; the environment
        /// variable of key `k` is `NEARDUP_DEDUP_` + `k` in upper case.
        pub const CONFIG_KEYS: &[&str] = &[ $( stringify!($field), )* ];

        impl $name {
            /// `self` with every key that `over` sets replaced by `over`'s value.
            pub fn merge(mut self, over: $name) -> $name {
                $( if over.$field.is_some() { self.$field = over.$field; } )*
                self
            }

            /// Sets `key` from its string form (as in an environment variable).
            fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
                match key {
                    $( stringify!($field) => self.$field = Some(Setting::parse_setting(value)?), )*
                    _ => return Err(format!("unknown key {key}")),
                }
                Ok(())
            }
        }
    };
}

/// A value of a `[dedup]` key read from its string form.
trait Setting: Sized {
    fn parse_setting(text: &str) -> Result<Self, String>;
}

impl Setting for String {
    fn parse_setting(text: &str) -> Result<String, String> {
        Ok(text.to_owned())
    }
}

impl Setting for bool {
    fn parse_setting(text: &str) -> Result<bool, String> {
        parse_bool(text)
    }
}

macro_rules! numeric_setting {
    ($what:literal: $($t:ty),*) => {$(
        impl Setting for $t {
            fn parse_setting(text: &str) -> Result<$t, String> {
                text.trim().parse().map_err(|_| concat!("not ", $what).to_owned())
            }
        }
    )*};
}
numeric_setting!("a number": f64);
numeric_setting!("a whole number": u32, u64, usize);

/// A boolean as a flag or an environment variable spells it: true/false,
/// 1/0, yes/no or on/off, in any case.
pub fn parse_bool(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err("not a boolean (true/false, 1/0, yes/no, on/off)".into()),
    }
}

layer! {
    /// One layer of configuration: every key optional, so layers can be
    /// stacked (file, then environment, then flags) with
    /// [`ConfigLayer::merge`]. It is also the scan's flags (`clap::Args`,
    /// flattened into `neardup scan`), so a key is defined once.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, clap::Args)]
    #[serde(deny_unknown_fields)]
    #[non_exhaustive]
    pub struct ConfigLayer {
        /// Compare documents at all (false: parse, cache and record only) [default: true].
        #[arg(long, value_name = "BOOL", help_heading = "Configuration")]
        pub enabled: Option<bool>,
        /// Matchers: "minhash", "embedding" or "embedding,minhash" [default: embedding,minhash; embedding is
        /// skipped while --model is empty].
        #[arg(long, value_name = "LIST", help_heading = "Configuration")]
        pub matchers: Option<String>,
        /// Score at or above which a document is identical [default: 0.95].
        #[arg(long, value_name = "SCORE", help_heading = "Configuration")]
        pub threshold_identical: Option<f64>,
        /// Score at or above which a document is similar [default: 0.80].
        #[arg(long, value_name = "SCORE", help_heading = "Configuration")]
        pub threshold_similar: Option<f64>,
        /// Embedding model with provider prefix: ollama:MODEL, openai:MODEL or local:DIR; "" skips the
        /// embedding matcher [default: ""].
        #[arg(long, value_name = "MODEL", help_heading = "Configuration")]
        pub model: Option<String>,
        /// Jaccard threshold the MinHash LSH bands are tuned for [default: the raw Jaccard at which calibrated
        /// MinHash reaches --threshold-similar, 0.45 for the defaults].
        #[arg(long, value_name = "J", help_heading = "Configuration")]
        pub minhash_lsh_threshold: Option<f64>,
        /// Words per MinHash shingle [default: 5].
        #[arg(long, value_name = "N", help_heading = "Configuration")]
        pub shingle_width: Option<u32>,
        /// Text normalizer: unicode or seed [default: unicode].
        #[arg(long, value_name = "NAME", help_heading = "Configuration")]
        pub normalizer: Option<String>,
        /// Words per embedding chunk before mean-pooling [default: 200].
        #[arg(long, value_name = "N", help_heading = "Configuration")]
        pub chunk_words: Option<usize>,
        /// Largest file parsed, in bytes; larger files are skipped and reported [default: 268435456].
        #[arg(long, value_name = "BYTES", help_heading = "Configuration")]
        pub max_file_bytes: Option<u64>,
        /// Most chunks embedded per document, spread evenly over a longer one [default: 16].
        #[arg(long, value_name = "N", help_heading = "Configuration")]
        pub max_chunks: Option<usize>,
        /// MinHash score map onto the common scale: auto, none, or knots RAW:CAL,... [default: auto].
        #[arg(long, value_name = "MAP", help_heading = "Configuration")]
        pub minhash_calibration: Option<String>,
        /// Embedding score map onto the common scale: auto (the map shipped for the model), none, or knots
        /// RAW:CAL,... [default: auto].
        #[arg(long, value_name = "MAP", help_heading = "Configuration")]
        pub embedding_calibration: Option<String>,
        /// Discount MinHash scores for shingles that many other documents of the scan share (navigation,
        /// footers), so pages of one manual are not called similar for their template [default: on].
        #[arg(long, value_name = "on|off", value_parser = parse_bool, help_heading = "Configuration")]
        pub boilerplate_weighting: Option<bool>,
    }
}

#[derive(Deserialize)]
struct ConfigFile {
    // Other sections belong to other commands and are ignored here.
    #[serde(default)]
    dedup: Option<ConfigLayer>,
}

impl ConfigLayer {
    /// Parses the `[dedup]` section of a `neardup.toml` document (other
    /// sections are ignored; unknown keys inside `[dedup]` are errors).
    ///
    /// ```
    /// let layer = neardup_docs::ConfigLayer::from_toml("[dedup]\nmatchers = \"minhash\"\nthreshold_similar = 0.7\n")?;
    /// assert_eq!(layer.matchers.as_deref(), Some("minhash"));
    /// assert_eq!(layer.threshold_similar, Some(0.7));
    /// assert!(neardup_docs::ConfigLayer::from_toml("[dedup]\nthreshold = 0.7\n").is_err());
    /// # Ok::<(), neardup_docs::Error>(())
    /// ```
    pub fn from_toml(text: &str) -> Result<ConfigLayer, Error> {
        let file: ConfigFile = toml::from_str(text).map_err(|e| Error::config(format!("neardup.toml: {e}")))?;
        Ok(file.dedup.unwrap_or_default())
    }

    /// Reads and parses a TOML file; the error names the file.
    pub fn from_toml_file(path: &Path) -> Result<ConfigLayer, Error> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::config(format!("cannot read config file {}: {e}", path.display())))?;
        ConfigLayer::from_toml(&text).map_err(|e| Error::config(format!("{}: {e}", path.display())))
    }

    /// The layer the environment defines, reading variables through `var`
    /// (pass `|k| std::env::var(k).ok()`). `NEARDUP_DEDUP_KEY` is read first,
    /// then the seed's alias `KOMP_DEDUP_KEY`.
    ///
    /// ```
    /// use neardup_docs::ConfigLayer;
    /// let env = |k: &str| (k == "KOMP_DEDUP_THRESHOLD_SIMILAR").then(|| "0.7".to_owned());
    /// assert_eq!(ConfigLayer::from_env(env)?.threshold_similar, Some(0.7));
    /// # Ok::<(), neardup_docs::Error>(())
    /// ```
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Result<ConfigLayer, Error> {
        let mut layer = ConfigLayer::default();
        for key in CONFIG_KEYS {
            let upper = key.to_ascii_uppercase();
            let names = [format!("NEARDUP_DEDUP_{upper}"), format!("KOMP_DEDUP_{upper}")];
            let Some((name, value)) = names.iter().find_map(|n| var(n).map(|v| (n, v))) else {
                continue;
            };
            layer.set(key, &value).map_err(|reason| Error::config(format!("{name}={value:?}: {reason}")))?;
        }
        Ok(layer)
    }

    /// Validates the merged layer (defaults filling the gaps).
    ///
    /// ```
    /// use neardup_docs::ConfigLayer;
    /// let s = ConfigLayer::default().resolve()?;
    /// assert!(s.minhash && s.model.is_none()); // "" model: embedding skipped
    /// let mut bad = ConfigLayer::default();
    /// bad.threshold_similar = Some(0.99);
    /// assert!(bad.resolve().unwrap_err().to_string().contains("threshold_similar"));
    /// # Ok::<(), neardup_docs::Error>(())
    /// ```
    pub fn resolve(&self) -> Result<ScanSettings, Error> {
        let bad = |key: &str, reason: String| Error::config(format!("dedup.{key}: {reason}"));
        let ti = self.threshold_identical.unwrap_or(0.95);
        let ts = self.threshold_similar.unwrap_or(0.80);
        for (key, v) in [("threshold_identical", ti), ("threshold_similar", ts)] {
            if !(0.0..=1.0).contains(&v) {
                return Err(bad(key, format!("must be between 0 and 1, got {v}")));
            }
        }
        let shingle_width = self.shingle_width.unwrap_or(5);
        let mut notes = Vec::new();
        let minhash_calibration = match self.minhash_calibration.as_deref().map(str::trim) {
            None | Some("auto") if shingle_width == 5 => {
                Calibration::parse(MINHASH_WORD5).map_err(|e| bad("minhash_calibration", e))?
            }
            None | Some("auto") => {
                notes.push(format!(
                    "minhash scores are not calibrated for shingle_width {shingle_width} (the shipped map is for \
                     word 5-grams); raw Jaccard is used"
                ));
                Calibration::identity()
            }
            Some(text) => Calibration::parse(text).map_err(|e| bad("minhash_calibration", e))?,
        };
        let embedding_calibration = match self.embedding_calibration.as_deref().map(str::trim) {
            None | Some("auto") => None,
            Some(text) => Some(Calibration::parse(text).map_err(|e| bad("embedding_calibration", e))?),
        };
        // LSH must propose every pair that can reach `similar` on the
        // common scale: by default it is tuned to the raw Jaccard where the
        // MinHash calibration reaches threshold_similar (rounded down).
        let lsh = self
            .minhash_lsh_threshold
            .unwrap_or_else(|| ((minhash_calibration.raw_for(ts) * 100.0 + 1e-6).floor() / 100.0).clamp(0.05, 1.0));
        if !(lsh > 0.0 && lsh <= 1.0) {
            return Err(bad("minhash_lsh_threshold", format!("must be in (0, 1], got {lsh}")));
        }
        if ts > ti {
            return Err(bad("threshold_similar", format!("{ts} is above threshold_identical {ti}")));
        }

        let matchers_text = self.matchers.as_deref().unwrap_or("embedding,minhash");
        let (mut minhash, mut embedding) = (false, false);
        for name in matchers_text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match name.to_ascii_lowercase().as_str() {
                "minhash" => minhash = true,
                "embedding" => embedding = true,
                other => {
                    return Err(bad("matchers", format!("unknown matcher {other:?}; known: minhash, embedding")));
                }
            }
        }
        if !minhash && !embedding {
            return Err(bad("matchers", format!("{matchers_text:?} names no matcher; use minhash, embedding or both")));
        }

        let model_text = self.model.as_deref().unwrap_or("").trim();
        let model = if model_text.is_empty() {
            None
        } else {
            let Some((provider, name)) = model_text.split_once(':') else {
                return Err(bad(
                    "model",
                    format!("{model_text:?} has no provider prefix; use ollama:MODEL, openai:MODEL or local:DIR"),
                ));
            };
            if !matches!(provider, "ollama" | "openai" | "local") {
                return Err(bad("model", format!("unknown provider {provider:?}; known: ollama, openai, local")));
            }
            if name.trim().is_empty() {
                return Err(bad("model", format!("{model_text:?} names no model after the prefix")));
            }
            Some(model_text.to_owned())
        };
        let model = match (embedding, model) {
            (true, Some(m)) => Some(m),
            (true, None) if minhash => {
                notes.push("embedding matcher skipped: dedup.model is empty".to_owned());
                None
            }
            (true, None) => {
                return Err(bad(
                    "matchers",
                    "\"embedding\" is the only matcher but dedup.model is empty; set a model \
                     (ollama:MODEL, openai:MODEL or local:DIR) or add minhash"
                        .to_owned(),
                ));
            }
            (false, Some(_)) => {
                notes.push("dedup.model is ignored: the embedding matcher is not enabled".to_owned());
                None
            }
            (false, None) => None,
        };

        let normalizer_name = self.normalizer.as_deref().unwrap_or("unicode");
        let normalizer = Normalizer::from_name(normalizer_name)
            .map_err(|_| bad("normalizer", format!("unknown normalizer {normalizer_name:?}; known: unicode, seed")))?;
        let core = CoreConfig {
            normalizer,
            shingle_width,
            threshold: lsh,
            // A scan verifies every LSH candidate; the cap only guards memory.
            max_candidates: 10_000,
            ..CoreConfig::default()
        };
        let params = core.resolve().map_err(|e| bad("shingle_width/minhash_lsh_threshold", e.to_string()))?;
        let policy = Policy::new("scan", 1, ti, ts).map_err(|e| bad("thresholds", e.to_string()))?;

        let chunk_words = self.chunk_words.unwrap_or(DEFAULT_CHUNK_WORDS);
        if !(1..=100_000).contains(&chunk_words) {
            return Err(bad("chunk_words", format!("must be in 1..=100000, got {chunk_words}")));
        }
        let max_chunks = self.max_chunks.unwrap_or(DEFAULT_MAX_CHUNKS);
        if !(1..=100_000).contains(&max_chunks) {
            return Err(bad("max_chunks", format!("must be in 1..=100000, got {max_chunks}")));
        }
        let mut limits = Limits::default();
        if let Some(max) = self.max_file_bytes {
            if max == 0 {
                return Err(bad("max_file_bytes", "must be at least 1".to_owned()));
            }
            limits.max_file_bytes = max;
        }
        Ok(ScanSettings {
            enabled: self.enabled.unwrap_or(true),
            minhash,
            model,
            threshold_identical: ti,
            threshold_similar: ts,
            minhash_lsh_threshold: lsh,
            params,
            policy,
            chunk_words,
            max_chunks,
            minhash_calibration,
            embedding_calibration,
            boilerplate_weighting: self.boilerplate_weighting.unwrap_or(true),
            limits,
            notes,
        })
    }
}

/// A validated scan configuration, made by [`ConfigLayer::resolve`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ScanSettings {
    /// Compare documents at all (false: parse, cache and record only).
    pub enabled: bool,
    /// The MinHash matcher runs.
    pub minhash: bool,
    /// The embedding model, when the embedding matcher runs.
    pub model: Option<String>,
    /// See [`ConfigLayer::threshold_identical`].
    pub threshold_identical: f64,
    /// See [`ConfigLayer::threshold_similar`].
    pub threshold_similar: f64,
    /// See [`ConfigLayer::minhash_lsh_threshold`].
    pub minhash_lsh_threshold: f64,
    /// Core parameters: normalizer, shingles, MinHash and LSH bands.
    pub params: Params,
    /// Thresholds as a core policy.
    pub policy: Policy,
    /// Words per embedding chunk.
    pub chunk_words: usize,
    /// Most chunks embedded per document.
    pub max_chunks: usize,
    /// The MinHash score's map onto the common scale.
    pub minhash_calibration: Calibration,
    /// The embedding score's map, when set; `None` is `auto`: the map
    /// shipped for the model, resolved once the model is known
    /// ([`ScanSettings::embedding_calibration_for`]).
    pub embedding_calibration: Option<Calibration>,
    /// See [`ConfigLayer::boilerplate_weighting`].
    pub boilerplate_weighting: bool,
    /// Parser limits.
    pub limits: Limits,
    /// Notes for the user (e.g. a matcher skipped), not errors.
    pub notes: Vec<String>,
}

impl ScanSettings {
    /// The embedding calibration for the model `model_id`, and a note when
    /// `auto` finds no shipped map for it (the raw cosine is used then).
    pub fn embedding_calibration_for(&self, model_id: &str) -> (Calibration, Option<String>) {
        if let Some(c) = &self.embedding_calibration {
            return (c.clone(), None);
        }
        match crate::calibrate::known_embedding_map(model_id) {
            Some((_, c)) => (c, None),
            None => (
                Calibration::identity(),
                Some(format!(
                    "no calibration is shipped for {model_id}: its raw cosine is compared with the thresholds; \
                     fit one with `neardup scan CORPUS --labels pairs.tsv` (docs/scan.md) and set \
                     embedding_calibration"
                )),
            ),
        }
    }

    /// The matchers that run, as stored: `minhash`, `embedding` or
    /// `embedding,minhash`.
    pub fn matchers_label(&self) -> &'static str {
        match (self.model.is_some(), self.minhash) {
            (true, true) => "embedding,minhash",
            (true, false) => "embedding",
            _ => "minhash",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(toml: &str) -> ConfigLayer {
        ConfigLayer::from_toml(toml).unwrap()
    }

    #[test]
    fn seed_section_parses() {
        let l = layer(
            "[dedup]\nenabled = true\nmatchers = \"embedding,minhash\"\nthreshold_identical = 0.95\n\
             threshold_similar = 0.80\nmodel = \"\"\nminhash_lsh_threshold = 0.8\n[compile]\nwhatever = 1\n",
        );
        let s = l.resolve().unwrap();
        assert!(s.enabled && s.minhash && s.model.is_none());
        assert_eq!(s.notes, ["embedding matcher skipped: dedup.model is empty"]);
        assert_eq!(s.matchers_label(), "minhash");
    }

    #[test]
    fn precedence_file_env_flag() {
        let file = layer("[dedup]\nthreshold_similar = 0.5\nthreshold_identical = 0.9\nmatchers = \"minhash\"\n");
        let env = ConfigLayer::from_env(|k| match k {
            "KOMP_DEDUP_THRESHOLD_SIMILAR" => Some("0.6".into()),
            "KOMP_DEDUP_THRESHOLD_IDENTICAL" => Some("0.99".into()),
            "NEARDUP_DEDUP_THRESHOLD_IDENTICAL" => Some("0.97".into()),
            _ => None,
        })
        .unwrap();
        let flags = ConfigLayer { threshold_identical: Some(0.93), ..Default::default() };
        let merged = file.clone().merge(env.clone());
        assert_eq!(merged.threshold_similar, Some(0.6));
        assert_eq!(merged.threshold_identical, Some(0.97), "NEARDUP_ beats its KOMP_ alias");
        let merged = merged.merge(flags);
        assert_eq!(merged.threshold_identical, Some(0.93));
        assert_eq!(merged.matchers.as_deref(), Some("minhash"));
    }

    #[test]
    fn every_bad_value_has_a_clear_message() {
        let cases: &[(ConfigLayer, &str)] = &[
            (ConfigLayer { threshold_identical: Some(1.5), ..Default::default() }, "threshold_identical"),
            (ConfigLayer { threshold_similar: Some(-0.1), ..Default::default() }, "threshold_similar"),
            (ConfigLayer { threshold_similar: Some(f64::NAN), ..Default::default() }, "threshold_similar"),
            (ConfigLayer { threshold_similar: Some(0.96), ..Default::default() }, "above threshold_identical"),
            (ConfigLayer { matchers: Some("minhash,simhash".into()), ..Default::default() }, "unknown matcher"),
            (ConfigLayer { matchers: Some(" , ".into()), ..Default::default() }, "names no matcher"),
            (ConfigLayer { matchers: Some("embedding".into()), ..Default::default() }, "dedup.model is empty"),
            (ConfigLayer { model: Some("granite-embedding".into()), ..Default::default() }, "provider prefix"),
            (ConfigLayer { model: Some("hf:bert".into()), ..Default::default() }, "unknown provider"),
            (ConfigLayer { model: Some("ollama: ".into()), ..Default::default() }, "names no model"),
            (ConfigLayer { minhash_lsh_threshold: Some(0.0), ..Default::default() }, "minhash_lsh_threshold"),
            (ConfigLayer { shingle_width: Some(0), ..Default::default() }, "shingle_width"),
            (ConfigLayer { normalizer: Some("nfc".into()), ..Default::default() }, "unknown normalizer"),
            (ConfigLayer { chunk_words: Some(0), ..Default::default() }, "chunk_words"),
            (ConfigLayer { max_file_bytes: Some(0), ..Default::default() }, "max_file_bytes"),
            (ConfigLayer { max_chunks: Some(0), ..Default::default() }, "max_chunks"),
            (
                ConfigLayer { minhash_calibration: Some("0.9:0.8,0.5:0.9".into()), ..Default::default() },
                "minhash_calibration",
            ),
            (ConfigLayer { embedding_calibration: Some("high".into()), ..Default::default() }, "embedding_calibration"),
        ];
        for (layer, needle) in cases {
            let err = layer.resolve().unwrap_err().to_string();
            assert!(err.contains(needle), "{layer:?}: {err}");
        }
    }

    #[test]
    fn env_errors_name_the_variable() {
        let err = ConfigLayer::from_env(|k| (k == "KOMP_DEDUP_ENABLED").then(|| "maybe".into())).unwrap_err();
        assert!(err.to_string().contains("KOMP_DEDUP_ENABLED=\"maybe\""), "{err}");
        let err = layer_err("[dedup]\nthreshold_similar = \"high\"\n");
        assert!(err.contains("threshold_similar"), "{err}");
        let err = layer_err("[dedup]\nmodle = \"x\"\n");
        assert!(err.contains("modle"), "{err}");
    }

    fn layer_err(toml: &str) -> String {
        ConfigLayer::from_toml(toml).unwrap_err().to_string()
    }

    #[test]
    fn lsh_threshold_follows_the_minhash_calibration() {
        let s = ConfigLayer::default().resolve().unwrap();
        assert_eq!(s.minhash_lsh_threshold, 0.45);
        assert!((s.minhash_calibration.apply(0.45) - 0.80).abs() < 1e-12);
        let raw = ConfigLayer { minhash_calibration: Some("none".into()), ..Default::default() }.resolve().unwrap();
        assert_eq!(raw.minhash_lsh_threshold, 0.8);
        let set = ConfigLayer { minhash_lsh_threshold: Some(0.6), ..Default::default() }.resolve().unwrap();
        assert_eq!(set.minhash_lsh_threshold, 0.6);
        let w4 = ConfigLayer { shingle_width: Some(4), ..Default::default() }.resolve().unwrap();
        assert!(w4.minhash_calibration.is_identity() && w4.notes.iter().any(|n| n.contains("shingle_width 4")));
        let (c, note) = s.embedding_calibration_for("ollama:unknown");
        assert!(c.is_identity() && note.unwrap().contains("embedding_calibration"));
    }

    #[test]
    fn embedding_with_model() {
        let s = ConfigLayer { model: Some("ollama:nomic-embed-text".into()), ..Default::default() }.resolve().unwrap();
        assert_eq!(s.model.as_deref(), Some("ollama:nomic-embed-text"));
        assert_eq!(s.matchers_label(), "embedding,minhash");
        let s = ConfigLayer { model: Some("ollama:x".into()), matchers: Some("minhash".into()), ..Default::default() }
            .resolve()
            .unwrap();
        assert!(s.model.is_none() && !s.notes.is_empty());
    }
}
