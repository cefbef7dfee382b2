//! The release bundle's documents (issue 49): `release/manifest.toml`,
//! `release/security-review.md`, `release/migrations.md` and
//! `release/correctness.md`. Reads files, and runs the dossier's generator
//! once.
//!
//! - Every `[[artifact]]` of the manifest has exactly the keys `path`,
//!   `version`, `owner`, `command`, `reviewed` (a `YYYY-MM-DD` date) and
//!   `retention`, none empty, and its `path` exists. The manifest is read as
//!   the subset of TOML it documents (comments, blank lines, `[[artifact]]`
//!   headers, `key = "value"` lines); any other line fails the test.
//! - Every test the security review names — `FILE::NAME` in backticks, FILE
//!   a `.rs` or `.py` path from the repository root — exists: the file is
//!   there and holds `fn NAME` under `#[test]` or `#[tokio::test]` (and not
//!   `#[ignore]`), or, in Python, `def NAME` with NAME a pytest `test_*`
//!   function. Every fuzz target it names (`fuzz/fuzz_targets/NAME.rs` in
//!   backticks) exists and is a `[[bin]]` of `fuzz/Cargo.toml`.
//! - Each threat of the service spec's list, the cluster's shared state and
//!   the review console has a section whose **Tests** entry names a test or
//!   says "no test yet".
//! - Every test `release/correctness.md` names as evidence exists.
//! - Every persisted format has a section in `release/migrations.md`, and
//!   every row of its tables (a cell of the migration matrix) names, in its
//!   last column, tests that exist as above, or says "no test yet".
//!
//! - `release/correctness.md` is what `bench/correctness.py` gives now, in
//!   every section that depends only on the binary and the repository (the
//!   generator runs with this build's binary, in about 3 s).
//!
//! Stale artifacts elsewhere: `release/normalization.md` is held to its
//! generator by `crates/core/tests/release_normalization.rs`, the event
//! schemas by `crates/server/tests/events.rs`; benchmark results are
//! measurements, not regenerated.

mod common;

use std::collections::BTreeSet;

use common::{read, root};

const MANIFEST: &str = "release/manifest.toml";
const REVIEW: &str = "release/security-review.md";
const MIGRATIONS: &str = "release/migrations.md";
const DOSSIER: &str = "release/correctness.md";
const KEYS: [&str; 6] = ["path", "version", "owner", "command", "reviewed", "retention"];

/// The section headings the review must have: the spec's threat list, then
/// the cluster's shared state and the console.
const SECTIONS: [&str; 11] = [
    "Threat: adversarial token stuffing",
    "Threat: hash flooding",
    "Threat: oversized content",
    "Threat: crafted bucket explosions",
    "Threat: duplicate command replay",
    "Threat: malicious feedback",
    "Threat: poisoned thresholds",
    "Threat: snapshot tampering",
    "Threat: operator credential misuse",
    "Cluster shared state",
    "Review console",
];

/// The sections the migration matrix must have: one per persisted format.
const FORMATS: [&str; 8] = [
    "Command log",
    "Checkpoint",
    "Snapshot",
    "Tenant configuration (fingerprint version)",
    "Saved index",
    "Scan fingerprint store and parse cache",
    "Cluster entries",
    "Snapshot sets",
];

/// The manifest's artifacts, each as its (key, value) pairs in file order.
/// Errors name the line.
fn parse_manifest(text: &str) -> Result<Vec<Vec<(String, String)>>, String> {
    let mut artifacts: Vec<Vec<(String, String)>> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line == "[[artifact]]" {
            artifacts.push(Vec::new());
            continue;
        }
        let (key, value) = line.split_once('=').ok_or(format!("line {n}: not `key = \"value\"`: {raw}"))?;
        let (key, value) = (key.trim(), value.trim());
        let inner = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .filter(|v| !v.contains('"') && !v.contains('\\'))
            .ok_or(format!("line {n}: the value must be one plain \"string\": {raw}"))?;
        let entry = artifacts.last_mut().ok_or(format!("line {n}: a key before the first [[artifact]]"))?;
        if entry.iter().any(|(k, _)| k == key) {
            return Err(format!("line {n}: `{key}` twice in one artifact"));
        }
        entry.push((key.to_string(), inner.to_string()));
    }
    Ok(artifacts)
}

/// What is wrong with one artifact, if anything.
fn artifact_problems(entry: &[(String, String)]) -> Vec<String> {
    let get = |k: &str| entry.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    let name = get("path").unwrap_or("(no path)");
    let mut problems = Vec::new();
    for k in KEYS {
        match get(k) {
            None => problems.push(format!("{name}: no `{k}`")),
            Some(v) if v.trim().is_empty() => problems.push(format!("{name}: `{k}` is empty")),
            Some(_) => {}
        }
    }
    for (k, _) in entry {
        if !KEYS.contains(&k.as_str()) {
            problems.push(format!("{name}: unknown key `{k}`"));
        }
    }
    if let Some(date) = get("reviewed") {
        let b = date.as_bytes();
        let ok = b.len() == 10
            && b.iter().enumerate().all(|(i, c)| if i == 4 || i == 7 { *c == b'-' } else { c.is_ascii_digit() });
        if !ok {
            problems.push(format!("{name}: `reviewed` is not YYYY-MM-DD: {date}"));
        }
    }
    if let Some(path) = get("path") {
        if !root().join(path).is_file() {
            problems.push(format!("{path}: listed in {MANIFEST} but missing"));
        }
    }
    problems
}

#[test]
fn every_manifest_artifact_exists_and_states_every_field() {
    let artifacts = parse_manifest(&read(MANIFEST)).unwrap_or_else(|e| panic!("{MANIFEST}: {e}"));
    assert!(!artifacts.is_empty(), "{MANIFEST}: no [[artifact]]");
    let mut problems = Vec::new();
    let mut paths = BTreeSet::new();
    for entry in &artifacts {
        problems.extend(artifact_problems(entry));
        if let Some((_, p)) = entry.iter().find(|(k, _)| k == "path") {
            if !paths.insert(p.clone()) {
                problems.push(format!("{p}: listed twice"));
            }
        }
    }
    for must in [REVIEW, MANIFEST, "docs/runbook.md", "docs/cluster.md"] {
        if !paths.contains(must) {
            problems.push(format!("{must}: not listed"));
        }
    }
    assert!(problems.is_empty(), "{MANIFEST}:\n{}", problems.join("\n"));
}

/// The checker itself fails where it must: a missing field, an unknown
/// key, a bad date, a missing file, a stray line.
#[test]
fn the_manifest_checks_refuse_what_they_must() {
    let good = "[[artifact]]\npath = \"docs/runbook.md\"\nversion = \"1\"\nowner = \"service on-call\"\n\
                command = \"true\"\nreviewed = \"2026-12-05\"\nretention = \"forever\"\n";
    let parsed = parse_manifest(good).unwrap();
    assert_eq!(artifact_problems(&parsed[0]), Vec::<String>::new());
    let cases = [
        (good.replace("owner = \"service on-call\"\n", ""), "no `owner`"),
        (good.replace("retention = \"forever\"", "retention = \" \""), "`retention` is empty"),
        (good.replace("reviewed = \"2026-12-05\"", "reviewed = \"5 Dec 2026\""), "YYYY-MM-DD"),
        (good.replace("docs/runbook.md", "docs/no-such-file.md"), "missing"),
        (format!("{good}colour = \"blue\"\n"), "unknown key"),
    ];
    for (text, want) in cases {
        let problems = artifact_problems(&parse_manifest(&text).unwrap()[0]);
        assert!(problems.iter().any(|p| p.contains(want)), "{want}: {problems:?}");
    }
    for bad in ["path = \"x\"\n", "[[artifact]]\npath = x\n", "[[artifact]]\n[artifact]\n"] {
        assert!(parse_manifest(bad).is_err(), "{bad:?} parsed");
    }
}

/// A name the review gives: a test `FILE::NAME`, or a fuzz target file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Named {
    Test { file: String, name: String },
    Fuzz { file: String },
}

fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Every test and fuzz target named in backticks in `text`.
fn named(text: &str) -> Vec<Named> {
    let mut out = Vec::new();
    for span in text.split('`').skip(1).step_by(2) {
        let span = span.trim();
        if span.contains(char::is_whitespace) {
            continue;
        }
        if let Some((file, name)) = span.split_once("::") {
            if file.ends_with(".rs") || file.ends_with(".py") {
                out.push(Named::Test { file: file.to_string(), name: name.to_string() });
            }
        } else if span.starts_with("fuzz/fuzz_targets/") && span.ends_with(".rs") {
            out.push(Named::Fuzz { file: span.to_string() });
        }
    }
    out
}

/// Why `name` is not a test that runs in `source` (a file's text), if it is not.
fn test_problem(file: &str, source: &str, name: &str) -> Option<String> {
    if !is_ident(name) {
        return Some(format!("{file}::{name}: not a function name"));
    }
    let lines: Vec<&str> = source.lines().collect();
    if file.ends_with(".py") {
        if !name.starts_with("test_") {
            return Some(format!("{file}::{name}: pytest collects only test_* functions"));
        }
        let def = format!("def {name}(");
        return (!lines.iter().any(|l| l.trim_start().starts_with(&def) && !l.starts_with(' ')))
            .then(|| format!("{file}::{name}: no top-level `def {name}` in the file"));
    }
    let found = lines.iter().position(|l| {
        let l = l.trim_start();
        let l = l.strip_prefix("pub ").unwrap_or(l);
        let l = l.strip_prefix("async ").unwrap_or(l);
        l.strip_prefix("fn ").and_then(|r| r.strip_prefix(name)).is_some_and(|r| r.starts_with('('))
    });
    let Some(at) = found else {
        return Some(format!("{file}::{name}: no `fn {name}` in the file"));
    };
    // The attributes and doc comments right above the function.
    let mut is_test = false;
    for l in lines[..at].iter().rev().map(|l| l.trim()) {
        if l.starts_with("#[test]") || l.starts_with("#[tokio::test") {
            is_test = true;
        } else if l.starts_with("#[ignore") {
            return Some(format!("{file}::{name}: #[ignore]d, so CI does not run it"));
        } else if !(l.starts_with("#[") || l.starts_with("///") || l.starts_with("//")) {
            break;
        }
    }
    (!is_test).then(|| format!("{file}::{name}: `fn {name}` is not a #[test]"))
}

/// Why a named test does not exist or does not run in CI, reading its
/// file from the repository; `None` for a fuzz target (see [`fuzz_problem`]).
fn named_test_problem(n: &Named) -> Option<String> {
    let Named::Test { file, name } = n else { return None };
    match std::fs::read_to_string(root().join(file)) {
        Ok(source) => test_problem(file, &source, name),
        Err(e) => Some(format!("{file}::{name}: {e}")),
    }
}

/// Why `file` is not a fuzz target CI runs, if it is not.
fn fuzz_problem(file: &str, fuzz_manifest: &str) -> Option<String> {
    let rel = file.strip_prefix("fuzz/").unwrap_or(file);
    if !root().join(file).is_file() {
        return Some(format!("{file}: no such fuzz target"));
    }
    let declared = fuzz_manifest.lines().any(|l| l.replace(' ', "") == format!("path=\"{rel}\""));
    (!declared).then(|| format!("{file}: not a [[bin]] of fuzz/Cargo.toml"))
}

/// Each required section's **Tests** entry, or why there is none.
fn section_tests(review: &str, heading: &str) -> Result<String, String> {
    let start =
        review.lines().position(|l| l.trim() == format!("## {heading}")).ok_or(format!("no section `## {heading}`"))?;
    let body: Vec<&str> = review.lines().skip(start + 1).take_while(|l| !l.starts_with("## ")).collect();
    let at = body
        .iter()
        .position(|l| l.trim_start().starts_with("- **Tests**"))
        .ok_or(format!("`## {heading}` has no **Tests** entry"))?;
    let entry: Vec<&str> = body[at..]
        .iter()
        .enumerate()
        .take_while(|(i, l)| *i == 0 || !l.trim_start().starts_with("- **"))
        .map(|(_, l)| *l)
        .collect();
    Ok(entry.join("\n"))
}

#[test]
fn every_test_the_security_review_names_exists() {
    let review = read(REVIEW);
    let fuzz_manifest = read("fuzz/Cargo.toml");
    let names: BTreeSet<Named> = named(&review).into_iter().collect();
    // A floor, lest a change of format make the check vacuous.
    let tests = names.iter().filter(|n| matches!(n, Named::Test { .. })).count();
    let fuzz = names.len() - tests;
    assert!(tests >= 40 && fuzz >= 5, "{REVIEW}: only {tests} tests and {fuzz} fuzz targets found");
    let mut problems = Vec::new();
    for n in &names {
        match n {
            Named::Test { .. } => problems.extend(named_test_problem(n)),
            Named::Fuzz { file } => problems.extend(fuzz_problem(file, &fuzz_manifest)),
        }
    }
    for heading in SECTIONS {
        match section_tests(&review, heading) {
            Ok(entry) if !named(&entry).is_empty() || entry.to_lowercase().contains("no test yet") => {}
            Ok(_) => problems
                .push(format!("`## {heading}`: its **Tests** entry names no test and does not say \"no test yet\"")),
            Err(e) => problems.push(e),
        }
    }
    assert!(problems.is_empty(), "{REVIEW}:\n{}", problems.join("\n"));
}

/// The checker itself fails where it must: a renamed function, a helper
/// that is not a test, an ignored test, a Python function pytest does not
/// collect, a fuzz target that is not declared.
#[test]
fn the_review_checks_refuse_what_they_must() {
    let rust = "/// Doc.\n#[test]\nfn kept() {}\n\nfn helper() {}\n\n#[tokio::test]\nasync fn kept_async() {}\n\
                #[test]\n#[ignore]\nfn ignored() {}\n";
    assert_eq!(test_problem("a.rs", rust, "kept"), None);
    assert_eq!(test_problem("a.rs", rust, "kept_async"), None);
    for (name, want) in
        [("gone", "no `fn gone`"), ("helper", "not a #[test]"), ("ignored", "#[ignore]"), ("a-b", "not a function")]
    {
        let p = test_problem("a.rs", rust, name).unwrap_or_default();
        assert!(p.contains(want), "{name}: {p:?}");
    }
    let py = "def test_one(x):\n    pass\n\ndef helper():\n    pass\n";
    assert_eq!(test_problem("t.py", py, "test_one"), None);
    assert!(test_problem("t.py", py, "helper").is_some());
    assert!(test_problem("t.py", py, "test_two").is_some());
    let manifest = "[[bin]]\nname = \"snapshot\"\npath = \"fuzz_targets/snapshot.rs\"\n";
    assert_eq!(fuzz_problem("fuzz/fuzz_targets/snapshot.rs", manifest), None);
    assert!(fuzz_problem("fuzz/fuzz_targets/command_log.rs", manifest).is_some());
    assert!(fuzz_problem("fuzz/fuzz_targets/no_such.rs", manifest).is_some());
    let text = "see `a.rs::kept`, `fuzz/fuzz_targets/x.rs`, `Type::method`, `a b.rs::c` and `b.py::test_x`";
    assert_eq!(
        named(text),
        [
            Named::Test { file: "a.rs".into(), name: "kept".into() },
            Named::Fuzz { file: "fuzz/fuzz_targets/x.rs".into() },
            Named::Test { file: "b.py".into(), name: "test_x".into() },
        ]
    );
    let review = "## Threat: x\n\n- **Guard**: g\n- **Tests**: none here.\n- **Gaps**: `a.rs::kept`\n";
    let entry = section_tests(review, "Threat: x").unwrap();
    assert!(named(&entry).is_empty(), "{entry}");
    assert!(section_tests(review, "Threat: y").is_err());
}

/// The data rows of every Markdown table in `text`'s section `## heading`,
/// each as its cells (header and separator rows left out).
fn table_rows(text: &str, heading: &str) -> Result<Vec<Vec<String>>, String> {
    let start =
        text.lines().position(|l| l.trim() == format!("## {heading}")).ok_or(format!("no section `## {heading}`"))?;
    let lines: Vec<&str> = text.lines().skip(start + 1).take_while(|l| !l.starts_with("## ")).collect();
    let is_separator = |l: &str| l.trim().starts_with("|-") || l.trim().starts_with("| -");
    let mut rows = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let l = l.trim();
        if !l.starts_with('|') || is_separator(l) || lines.get(i + 1).is_some_and(|n| is_separator(n)) {
            continue;
        }
        rows.push(l.trim_matches('|').split('|').map(|c| c.trim().to_string()).collect());
    }
    Ok(rows)
}

/// Every cell of the migration matrix is a test: each row's last column
/// names tests that exist and run in CI, or says "no test yet".
#[test]
fn every_migration_cell_names_a_test_that_exists() {
    let matrix = read(MIGRATIONS);
    let mut problems = Vec::new();
    let mut named_tests = BTreeSet::new();
    for heading in FORMATS {
        let rows = match table_rows(&matrix, heading) {
            Ok(rows) if rows.is_empty() => {
                problems.push(format!("`## {heading}`: no row"));
                continue;
            }
            Ok(rows) => rows,
            Err(e) => {
                problems.push(e);
                continue;
            }
        };
        for row in rows {
            let last = row.last().cloned().unwrap_or_default();
            let tests = named(&last);
            if tests.is_empty() && !last.to_lowercase().contains("no test yet") {
                problems.push(format!("`## {heading}`, row `{}`: names no test", row[0]));
            }
            named_tests.extend(tests);
        }
    }
    assert!(named_tests.len() >= 30, "{MIGRATIONS}: only {} tests named", named_tests.len());
    for n in &named_tests {
        match n {
            Named::Test { .. } => problems.extend(named_test_problem(n)),
            Named::Fuzz { file } => problems.push(format!("{file}: a fuzz target is not a cell's test")),
        }
    }
    assert!(problems.is_empty(), "{MIGRATIONS}:\n{}", problems.join("\n"));
}

#[test]
fn matrix_rows_are_read_without_headers_or_separators() {
    let text = "## F\n\n| a | b |\n|---|---|\n| x | `t.rs::one` |\n| y | no test yet |\n\n## G\n| z | w |\n";
    let rows = table_rows(text, "F").unwrap();
    assert_eq!(rows, [vec!["x".to_string(), "`t.rs::one`".into()], vec!["y".into(), "no test yet".into()]]);
    assert!(table_rows(text, "H").is_err());
}

/// The correctness dossier's answers point at tests that exist.
#[test]
fn every_test_the_dossier_names_exists() {
    let dossier = read(DOSSIER);
    let names: BTreeSet<Named> = named(&dossier).into_iter().collect();
    assert!(names.len() >= 3, "{DOSSIER}: only {} tests named", names.len());
    let problems: Vec<String> = names.iter().filter_map(named_test_problem).collect();
    assert!(problems.is_empty(), "{DOSSIER}:\n{}", problems.join("\n"));
}

/// `release/correctness.md` split at its `## ` headings: (heading, body).
fn dossier_sections(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        match line.strip_prefix("## ") {
            Some(h) => out.push((h.to_owned(), String::new())),
            None => {
                if let Some((_, body)) = out.last_mut() {
                    body.push_str(line);
                    body.push('\n');
                }
            }
        }
    }
    out
}

/// The dossier is not stale: its generator, run again now with this build's
/// binary, gives the committed text in every section that depends only on
/// the binary and the repository (the differential fixture, the labelled
/// corpus, the kill campaigns, the demonstration, the reviewers'
/// questions). The real corpus's section is left out: it is built from the
/// documentation the machine has installed. A change to the algorithms that
/// moves a figure fails here until the dossier is regenerated.
#[test]
fn the_correctness_dossier_is_what_its_generator_gives_now() {
    let out = tempfile::NamedTempFile::new().unwrap();
    let run = std::process::Command::new("python3")
        .arg(root().join("bench/correctness.py"))
        .arg("--no-real")
        .arg("--out")
        .arg(out.path())
        .env("NEARDUP_BIN", env!("CARGO_BIN_EXE_neardup"))
        .output()
        .expect("python3 runs bench/correctness.py");
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let fresh = dossier_sections(&std::fs::read_to_string(out.path()).unwrap());
    let committed = dossier_sections(&read(DOSSIER));
    let headings = |s: &[(String, String)]| s.iter().map(|(h, _)| h.clone()).collect::<Vec<_>>();
    assert_eq!(headings(&fresh), headings(&committed), "the dossier's sections changed");
    let mut compared = 0;
    for ((heading, now), (_, then)) in fresh.iter().zip(&committed) {
        if heading.starts_with("3. ") {
            continue;
        }
        compared += 1;
        assert!(
            now == then,
            "release/correctness.md is stale in \"{heading}\": regenerate it with \
             NEARDUP_BIN=target/release/neardup python3 bench/correctness.py\n--- committed\n{then}\n--- now\n{now}"
        );
    }
    assert_eq!(compared, 5);
}
