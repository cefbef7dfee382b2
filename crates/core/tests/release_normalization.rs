//! `release/normalization.md` (issue 49, item 2): the normalization and
//! feature specification. Its tables between `<!-- generated: NAME -->` and
//! `<!-- end generated: NAME -->` are made here, from the code's constants
//! and from the real normalizer, shingler, signature, banding and policy;
//! the test fails when the file's copy differs (a stale artifact, or a
//! change of format that needs a new version). Regenerate with
//!
//! ```text
//! NEARDUP_WRITE_RELEASE=1 cargo test -p neardup-core --test release_normalization
//! ```
//!
//! The worked examples are frozen twice: each pair's expected relation
//! (erased: both inputs normalize to one string; kept: they differ) is
//! asserted here, and the normalized strings are in the file, so a change
//! of behaviour under an existing version name fails this test.

use std::path::{Path, PathBuf};

use neardup_core::{
    band_keys_into, content_hash, fold_key, hash_bytes, hash_u32s, Config, Fingerprinter, Normalizer, Policy,
    ShingleKind, SignatureScheme, Verdict, CONFIG_FORMAT_VERSION, CONTENT_HASH_VERSION, FEATURE_HASH_VERSION,
    SAVED_INDEX_FORMAT_VERSION, SIMHASH_VERSION,
};

const DOC: &str = "release/normalization.md";

/// The repository's root folder.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A file of the repository (`rel` from its root), read whole.
fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}
const WRITE_VAR: &str = "NEARDUP_WRITE_RELEASE";

/// One worked example: two inputs and whether the rule makes them equal.
struct Example {
    normalizer: Normalizer,
    rule: &'static str,
    a: &'static str,
    b: &'static str,
    /// `true`: the rule erases the difference (same normalized string).
    erased: bool,
}

const fn ex(normalizer: Normalizer, rule: &'static str, a: &'static str, b: &'static str, erased: bool) -> Example {
    Example { normalizer, rule, a, b, erased }
}

/// One example per rule of the table in `crates/core/src/normalize/mod.rs`,
/// then the differences neither version erases.
const EXAMPLES: &[Example] = &[
    ex(Normalizer::Seed, "case", "Red FOX Runs", "red fox runs", true),
    ex(Normalizer::Seed, "punctuation and whitespace", "red-fox,\truns!!", "red fox runs", true),
    ex(Normalizer::Seed, "non-ASCII letters split tokens", "café crème", "caf cr me", true),
    ex(Normalizer::Seed, "non-ASCII digits split tokens", "page ٣ of 7", "page of 7", true),
    ex(Normalizer::Seed, "digits kept", "route 66", "route 67", false),
    ex(Normalizer::Unicode, "compatibility forms: full-width", "ＦＵＬＬ width", "full width", true),
    ex(Normalizer::Unicode, "compatibility forms: ligature", "ﬁnd the ﬂow", "find the flow", true),
    ex(Normalizer::Unicode, "compatibility forms: superscript", "x² + y²", "x2 y2", true),
    ex(Normalizer::Unicode, "case", "Red FOX Runs", "red fox runs", true),
    ex(Normalizer::Unicode, "case: ß folds to ss", "STRASSE", "Straße", true),
    ex(Normalizer::Unicode, "case: final ς folds to σ", "ΛΟΓΟΣ", "λογος", true),
    ex(Normalizer::Unicode, "punctuation and whitespace", "red-fox,\truns!!", "red fox runs", true),
    ex(Normalizer::Unicode, "apostrophes inside words", "don't stop", "dont stop", true),
    ex(Normalizer::Unicode, "apostrophes inside words (typographic)", "don\u{2019}t stop", "dont stop", true),
    ex(Normalizer::Unicode, "soft hyphens", "co\u{ad}operate", "cooperate", true),
    ex(Normalizer::Unicode, "hyphenated line breaks", "an exam-\nple here", "an example here", true),
    ex(Normalizer::Unicode, "CJK: one token per character", "東京タワー", "東 京 タ ワ ー", true),
    ex(Normalizer::Unicode, "accents kept", "café", "cafe", false),
    ex(Normalizer::Unicode, "digits kept", "route 66", "route 67", false),
    ex(Normalizer::Unicode, "Thai not segmented: one token", "สวัสดีครับ", "สวัสดี ครับ", false),
    ex(Normalizer::Unicode, "non-ASCII letters kept (unlike seed-v1)", "café crème", "caf cr me", false),
];

/// `s` as it can sit in a Markdown code span inside a table: invisible and
/// control characters as `\u{..}`, a newline and a tab as `\n` and `\t`.
fn shown(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '|' => out.push_str("\\|"),
            '`' => out.push_str("\\u{60}"),
            c if c.is_control() || matches!(c, '\u{ad}' | '\u{200b}'..='\u{200f}' | '\u{2060}' | '\u{feff}') => {
                out.push_str(&format!("\\u{{{:x}}}", c as u32))
            }
            c => out.push(c),
        }
    }
    format!("`{out}`")
}

/// The erasure table of the normalizers' module docs, as it is there.
fn erasure_table() -> String {
    let source = read("crates/core/src/normalize/mod.rs");
    let rows: Vec<&str> = source.lines().filter_map(|l| l.strip_prefix("//! |")).collect();
    assert!(rows.len() >= 4, "no table found in crates/core/src/normalize/mod.rs");
    rows.iter().map(|r| format!("|{r}\n")).collect()
}

fn examples_table() -> String {
    let mut out = String::from(
        "| version | rule | input | other input | normalized input | relation |\n\
         |---|---|---|---|---|---|\n",
    );
    for e in EXAMPLES {
        let (na, nb) = (e.normalizer.normalize(e.a), e.normalizer.normalize(e.b));
        assert_eq!(
            na == nb,
            e.erased,
            "{} {}: {:?} -> {na:?}, {:?} -> {nb:?}",
            e.normalizer.version(),
            e.rule,
            e.a,
            e.b
        );
        let relation = if e.erased { "erased: same".to_string() } else { format!("kept: other is {}", shown(&nb)) };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} |\n",
            e.normalizer.version(),
            e.rule,
            shown(e.a),
            shown(e.b),
            shown(&na),
            relation
        ));
    }
    out
}

fn versions_table() -> String {
    let default = Config::default().resolve().expect("defaults resolve");
    let seed = Config::seed_example().resolve().expect("seed example resolves");
    let d = default.config();
    let mut rows = vec![
        ("configuration format (`format_version`)", CONFIG_FORMAT_VERSION.to_string()),
        ("normalizers", [Normalizer::Seed, Normalizer::Unicode].map(|n| format!("`{}`", n.version())).join(", ")),
        (
            "normalizer by default",
            format!("`{}` (`--normalizer default`; `seed` names `seed-v1`)", Normalizer::default().version()),
        ),
        ("shingle kinds", [ShingleKind::Word, ShingleKind::Char].map(|k| format!("`{}`", k.name())).join(", ")),
        ("shingle by default", format!("`{}`, width {}", d.shingle_kind.name(), d.shingle_width)),
        ("feature and band-key hash", format!("`{FEATURE_HASH_VERSION}` (seeded)")),
        ("exact content hash", format!("`{CONTENT_HASH_VERSION}` (of the normalized text)")),
        ("SimHash fingerprint", format!("`{SIMHASH_VERSION}`")),
    ];
    for s in [SignatureScheme::OnePermutation, SignatureScheme::MinHash, SignatureScheme::SimHash] {
        rows.push(("signature scheme", format!("`{}`, {} values by default", s.version(), s.default_num_perm())));
    }
    rows.extend([
        ("signature by default", format!("`{}`, {} values of `u32`", d.signature.version(), d.num_perm)),
        ("seed by default", format!("`{:#x}` (the bytes of \"neardup1\")", d.seed)),
        (
            "LSH bands by default",
            format!(
                "{} bands × {} rows (threshold {}, recall target {}: P(candidate at t) = {:.4})",
                default.lsh().bands,
                default.lsh().rows,
                d.threshold,
                d.recall_target,
                default.candidate_probability(d.threshold)
            ),
        ),
        (
            "ranking sketch by default",
            format!("low {} bits of each signature value: {} bytes an item", d.rank_bits, d.num_perm * d.rank_bits / 8),
        ),
        (
            "candidate guards by default",
            format!(
                "`max_shingles` {}, `max_candidates` {}, `max_bucket_read` {}",
                d.max_shingles, d.max_candidates, d.max_bucket_read
            ),
        ),
        ("saved index format (`dedup --index`)", SAVED_INDEX_FORMAT_VERSION.to_string()),
        ("fingerprint version, defaults", format!("`{}`", default.fingerprint_version())),
        ("fingerprint version, seed example", format!("`{}`", seed.fingerprint_version())),
    ]);
    let mut out = String::from("| what | version or value |\n|---|---|\n");
    for (k, v) in rows {
        out.push_str(&format!("| {k} | {v} |\n"));
    }
    out
}

fn hex64(v: &[u64]) -> String {
    v.iter().map(|x| format!("{x:016x}")).collect::<Vec<_>>().join(" ")
}

/// The seed example's text, stage by stage, each stage recomputed here by
/// its documented formula and held to what `Fingerprinter` makes.
fn pipeline_example() -> String {
    let params = Config::seed_example().resolve().expect("seed example resolves");
    let c = params.config().clone();
    let text = "Red fox runs very fast!";
    let fp = Fingerprinter::new(params.clone()).expect("fingerprinter").fingerprint(text);
    let normalized = c.normalizer.normalize(text);
    let tokens: Vec<&str> = normalized.split(' ').collect();
    let shingles: Vec<String> = tokens.windows(c.shingle_width as usize).map(|w| w.join(" ")).collect();
    let hashed: Vec<u64> = shingles.iter().map(|s| hash_bytes(s.as_bytes(), c.seed)).collect();
    let mut features = hashed.clone();
    features.sort_unstable();
    features.dedup();
    assert_eq!(fp.features, features, "feature = xxh3_64(shingle bytes, seed), sorted, unique");
    assert_eq!(fp.content_hash, content_hash(normalized.as_bytes()), "content hash = BLAKE3-128(normalized)");
    assert_eq!(fp.tokens as usize, tokens.len());
    let (b, r) = (params.lsh().bands as usize, params.lsh().rows as usize);
    let manual: Vec<u64> =
        (0..b).map(|i| hash_u32s(&fp.signature[i * r..(i + 1) * r], c.seed.wrapping_add(i as u64))).collect();
    let mut keys = Vec::new();
    band_keys_into(params.lsh(), c.seed, &fp.signature, &mut keys).expect("band keys");
    assert_eq!(keys, manual, "band key = xxh3_64(le bytes of the band's rows, seed + band)");
    assert_eq!(fp.band_keys, keys);
    let folded: Vec<String> = keys.iter().map(|&k| format!("{:08x}", fold_key(k))).collect();
    let sketch: Vec<String> = fp.signature.iter().map(|&v| format!("{:02x}", v as u8)).collect();
    let sig: Vec<String> = fp.signature.iter().map(|v| format!("{v:08x}")).collect();

    let mut out = String::new();
    out.push_str(&format!(
        "Configuration `Config::seed_example()`: `{}`, word {}-grams, `{}` with {} values, {} bands × {} rows, \
         seed {}, threshold {}.\n\n",
        c.normalizer.version(),
        c.shingle_width,
        c.signature.version(),
        c.num_perm,
        b,
        r,
        c.seed,
        c.threshold
    ));
    out.push_str("| stage | value |\n|---|---|\n");
    out.push_str(&format!("| input | {} |\n", shown(text)));
    out.push_str(&format!("| normalized | {} ({} tokens) |\n", shown(&normalized), fp.tokens));
    out.push_str(&format!("| content hash (`{CONTENT_HASH_VERSION}`) | `{}` |\n", fp.content_hash.to_hex()));
    for (s, h) in shingles.iter().zip(&hashed) {
        out.push_str(&format!("| shingle {} → feature | `{h:016x}` |\n", shown(s)));
    }
    out.push_str(&format!("| canonical feature set (sorted) | `{}` |\n", hex64(&features)));
    out.push_str(&format!("| signature ({} × `u32`, hex) | `{}` |\n", sig.len(), sig.join(" ")));
    out.push_str(&format!("| band keys ({b} × `u64`) | `{}` |\n", hex64(&keys)));
    out.push_str(&format!("| folded band keys (stored, {b} × `u32`) | `{}` |\n", folded.join(" ")));
    out.push_str(&format!("| ranking sketch ({} bits × {}) | `{}` |\n", c.rank_bits, sketch.len(), sketch.join("")));
    out
}

fn policy_examples() -> String {
    let p = Policy::new("default", 1, 1.0, 0.75).expect("valid policy");
    let mut out = String::from(
        "Policy `default` version 1, `threshold_identical` 1.0, `threshold_similar` 0.75 (the seed \
         example's tenant):\n\n| exact score | same content hash | verdict | explanation |\n|---|---|---|---|\n",
    );
    for (score, same) in [(1.0, true), (0.8, false), (0.75, false), (0.5, false)] {
        let v = p.classify(score, same);
        let why = p.explain(v, Some(score), Some("A"), "exact Jaccard");
        out.push_str(&format!("| {score} | {same} | `{}` | {} |\n", v.as_str(), shown(&why)));
    }
    let none = p.explain(Verdict::Different, None, None, "exact Jaccard");
    out.push_str(&format!("| — | — | `different` | {} |\n", shown(&none)));
    out.push_str("\nRefused at construction, with the reason:\n\n");
    for (id, identical, similar) in [("", 1.0, 0.8), ("p", 0.8, 0.9), ("p", 1.2, 0.9)] {
        let err = Policy::new(id, 1, identical, similar).expect_err("refused");
        let id = if id.is_empty() { "(empty)".to_string() } else { shown(id) };
        out.push_str(&format!("- id {id}, identical {identical}, similar {similar}: {}\n", shown(&err.to_string())));
    }
    out.push('\n');
    out
}

/// Every generated block: name and the text it must hold.
fn blocks() -> Vec<(&'static str, String)> {
    vec![
        ("erasures", erasure_table()),
        ("examples", examples_table()),
        ("versions", versions_table()),
        ("pipeline", pipeline_example()),
        ("policy", policy_examples()),
    ]
}

/// `doc` with block `name`'s contents replaced by `body`, or why not.
fn replace_block(doc: &str, name: &str, body: &str) -> Result<String, String> {
    let begin = format!("<!-- generated: {name} -->\n");
    let end = format!("<!-- end generated: {name} -->");
    let start = doc.find(&begin).ok_or(format!("no `{}` line", begin.trim()))? + begin.len();
    let stop = doc[start..].find(&end).ok_or(format!("no `{end}` line"))? + start;
    Ok(format!("{}{body}{}", &doc[..start], &doc[stop..]))
}

#[test]
fn normalization_spec_is_generated_from_the_code() {
    let doc = read(DOC);
    let mut fresh = doc.clone();
    for (name, body) in blocks() {
        fresh = replace_block(&fresh, name, &body).unwrap_or_else(|e| panic!("{DOC}: {e}"));
    }
    if std::env::var_os(WRITE_VAR).is_some() {
        std::fs::write(root().join(DOC), &fresh).expect("write");
        return;
    }
    if fresh != doc {
        let first = doc.lines().zip(fresh.lines()).position(|(a, b)| a != b).unwrap_or(0);
        panic!(
            "{DOC} is stale from line {}:\n  file: {:?}\n  code: {:?}\nregenerate: {WRITE_VAR}=1 cargo test -p neardup-core \
             --test release_normalization (a change under an existing version name needs a new version instead)",
            first + 1,
            doc.lines().nth(first).unwrap_or(""),
            fresh.lines().nth(first).unwrap_or("")
        );
    }
}

#[test]
fn block_replacement_needs_both_markers() {
    let doc = "a\n<!-- generated: x -->\nold\n<!-- end generated: x -->\nb\n";
    assert_eq!(
        replace_block(doc, "x", "new\n").unwrap(),
        "a\n<!-- generated: x -->\nnew\n<!-- end generated: x -->\nb\n"
    );
    assert!(replace_block(doc, "y", "").is_err());
    assert!(replace_block("<!-- generated: x -->\nold\n", "x", "").is_err());
}
