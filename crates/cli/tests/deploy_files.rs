//! The operator files under `deploy/`: the Prometheus alert rules
//! (`deploy/prometheus/neardup-alerts.yml`, with their promtool unit tests)
//! and the Grafana dashboards (`deploy/grafana/*.json`).
//!
//! - Every metric name their queries use is exported: checked against the
//!   samples on `/metrics` of a real single-node server (after writes,
//!   queries, a delete and a shadow) and of a real cluster node (one NATS
//!   server on loopback), never against a list in the source. Every other
//!   identifier in a query must be a PromQL function or keyword, or a label
//!   the service exports (or `instance`/`job`, which Prometheus adds).
//! - Every alert points at a section of docs/runbook.md that exists, and
//!   the unit-test file has a firing and a non-firing case for it.
//! - `promtool check rules` and `promtool test rules` pass, and every
//!   dashboard query parses (checked as a recording rule). promtool comes
//!   from `NEARDUP_PROMTOOL` or `PATH` (CI installs it with
//!   scripts/install-promtool.sh); without it the test fails when `CI` is
//!   set and says it skipped otherwise.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{call, read, root, start_with, ADMIN};
use neardup_cluster::testkit::NatsCluster;
use serde_json::{json, Value};

const RULES: &str = "deploy/prometheus/neardup-alerts.yml";
const RULE_TESTS: &str = "deploy/prometheus/neardup-alerts.test.yml";

/// The alert rules: (alert name, its expression, its runbook_url).
/// Line-based: the file's own layout (`- alert:`, `expr:` inline or as a
/// `|` block, `runbook_url:`), which promtool validates as YAML.
fn alert_rules() -> Vec<(String, String, String)> {
    let text = read(RULES);
    let lines: Vec<&str> = text.lines().collect();
    let mut rules: Vec<(String, String, String)> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim_start();
        let indent = lines[i].len() - line.len();
        if let Some(name) = line.strip_prefix("- alert: ") {
            rules.push((name.trim().to_string(), String::new(), String::new()));
        } else if let Some(expr) = line.strip_prefix("expr:") {
            let rule = rules.last_mut().expect("expr before the first alert");
            let expr = expr.trim();
            if expr == "|" || expr == ">" {
                let mut block = Vec::new();
                while i + 1 < lines.len() {
                    let next = lines[i + 1];
                    let next_indent = next.len() - next.trim_start().len();
                    if !next.trim().is_empty() && next_indent <= indent {
                        break;
                    }
                    block.push(next.trim());
                    i += 1;
                }
                rule.1 = block.join(" ");
            } else {
                rule.1 = expr.to_string();
            }
        } else if let Some(url) = line.strip_prefix("runbook_url:") {
            rules.last_mut().expect("runbook_url before the first alert").2 = url.trim().trim_matches('"').to_string();
        }
        i += 1;
    }
    assert!(!rules.is_empty(), "no alert in {RULES}");
    for (name, expr, url) in &rules {
        assert!(!expr.is_empty(), "{name}: no expr");
        assert!(!url.is_empty(), "{name}: no runbook_url");
    }
    rules
}

fn dashboards() -> Vec<(String, Value)> {
    let dir = root().join("deploy/grafana");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            out.push((path.file_name().unwrap().to_string_lossy().into_owned(), v));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(out.len() >= 2, "the overview and cluster dashboards: {out:?}");
    out
}

/// Every query of a dashboard: each target's `expr`, and the template
/// variables' queries (`label_values(metric, label)`).
fn dashboard_queries(d: &Value) -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    match (k.as_str(), x) {
                        ("expr" | "definition", Value::String(s)) => out.push(s.clone()),
                        _ => walk(x, out),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(d, &mut out);
    out
}

/// A Grafana query as PromQL: its variables replaced by what they may
/// stand for.
fn as_promql(expr: &str) -> String {
    expr.replace("$__rate_interval", "5m").replace("$tenant", ".*").replace("$partition", ".*")
}

const PROMQL_WORDS: &[&str] = &[
    // Aggregations and their modifiers, binary operators, offset.
    "sum",
    "min",
    "max",
    "avg",
    "count",
    "topk",
    "bottomk",
    "by",
    "without",
    "and",
    "or",
    "unless",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "offset",
    // Functions.
    "rate",
    "irate",
    "increase",
    "delta",
    "deriv",
    "resets",
    "changes",
    "histogram_quantile",
    "min_over_time",
    "max_over_time",
    "avg_over_time",
    "clamp_min",
    "vector",
    "time",
    // Grafana's variable query.
    "label_values",
];

/// The identifiers of a PromQL query, outside string literals, numbers,
/// durations and Grafana variables.
fn identifiers(expr: &str) -> Vec<String> {
    let b = expr.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'"' || c == b'\'' || c == b'`' {
            i += 1;
            while i < b.len() && b[i] != c {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c.is_ascii_digit() || c == b'.' || c == b'$' {
            i += 1;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.') {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == b'_' || c == b':' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b':') {
                i += 1;
            }
            out.push(expr[start..i].to_string());
        } else {
            i += 1;
        }
    }
    out
}

/// What a scrape shows: sample names and the label names of samples.
#[derive(Debug, Default)]
struct Exported {
    samples: BTreeMap<String, &'static str>,
    labels: BTreeSet<String>,
}

impl Exported {
    fn add(&mut self, text: &str, whence: &'static str) {
        for line in text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            self.samples.entry(line[..end].to_string()).or_insert(whence);
            if let Some(labels) = line[end..].strip_prefix('{') {
                let labels = &labels[..labels.rfind('}').unwrap()];
                for name in identifiers(labels) {
                    self.labels.insert(name);
                }
            }
        }
    }
}

fn metrics(addr: &str) -> String {
    let (s, body) = common::http(addr, "GET", "/metrics", None, "", &[]).unwrap();
    assert_eq!(s, 200);
    String::from_utf8(body).unwrap()
}

/// A single node after writes, queries, a delete and a shadow; then a
/// cluster node (on one NATS server) once it wrote a snapshot set.
fn scrape_servers() -> Exported {
    let mut exported = Exported::default();

    let dir = tempfile::tempdir().unwrap();
    // A content store that does not answer (the discard port): a read of
    // it fails, so its failure series is exported.
    let (stores, creds) = (dir.path().join("stores.toml"), dir.path().join("creds.toml"));
    std::fs::write(&creds, "access_key_id = \"a\"\nsecret_access_key = \"b\"\n").unwrap();
    std::fs::write(
        &stores,
        format!(
            "[[store]]\nname = \"corpus\"\nendpoint = \"http://127.0.0.1:9\"\nbucket = \"docs\"\n\
             credentials_file = {:?}\ntimeout_ms = 2000\ntenants = [\"t\"]\n",
            creds.display().to_string()
        ),
    )
    .unwrap();
    let server = start_with(
        dir.path(),
        &["--fsync", "os", "--checkpoint-interval-secs", "1", "--content-stores", stores.to_str().unwrap()],
    );
    let addr = server.addr.clone();
    let (s, v) = call(&addr, "POST", "/v1/tenants", Some(ADMIN), Some(json!({"tenant_id": "t"})));
    assert_eq!(s, 201, "{v}");
    let (s, v) =
        call(&addr, "PUT", "/v1/tenants/t/items/u", Some(ADMIN), Some(json!({"content_uri": "s3://docs/a.txt"})));
    assert_eq!(s, 503, "{v}");
    let text = |i: u32| format!("the red fox runs very fast over the hill, item {i} of the series");
    for i in 0..4 {
        let (s, v) =
            call(&addr, "PUT", &format!("/v1/tenants/t/items/i{i}"), Some(ADMIN), Some(json!({"content": text(i)})));
        assert!(s == 200 || s == 201, "{s} {v}");
    }
    let (s, v) = call(&addr, "POST", "/v1/tenants/t/decide", Some(ADMIN), Some(json!({"content": text(1)})));
    assert_eq!(s, 200, "{v}");
    let (s, v) = call(&addr, "DELETE", "/v1/tenants/t/items/i3", Some(ADMIN), None);
    assert_eq!(s, 200, "{v}");
    let (s, v) =
        call(&addr, "POST", "/v1/tenants/t/shadow", Some(ADMIN), Some(json!({"config": {"shingle_width": 4}})));
    assert_eq!(s, 200, "{v}");
    let (s, v) = call(&addr, "POST", "/v1/tenants/t/decide", Some(ADMIN), Some(json!({"content": text(2)})));
    assert_eq!(s, 200, "{v}");
    exported.add(&metrics(&addr), "single node");
    drop(server);

    let nats = NatsCluster::start(1).expect("nats-server (scripts/install-nats.sh installs it)");
    let dir = tempfile::tempdir().unwrap();
    let urls = nats.urls();
    let node = start_with(
        dir.path(),
        &["--cluster", &urls, "--node-id", "n1", "--fsync", "os", "--cluster-snapshot-secs", "1"],
    );
    let addr = node.addr.clone();
    let deadline = Instant::now() + Duration::from_secs(60);
    while call(&addr, "GET", "/readyz", None, None).0 != 200 {
        assert!(Instant::now() < deadline, "cluster node not ready within 60 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (s, v) = call(&addr, "POST", "/v1/tenants", Some(ADMIN), Some(json!({"tenant_id": "c"})));
    assert_eq!(s, 201, "{v}");
    let (s, v) = call(&addr, "PUT", "/v1/tenants/c/items/a", Some(ADMIN), Some(json!({"content": text(0)})));
    assert!(s == 200 || s == 201, "{s} {v}");
    // The snapshot set's age has no sample before the first set.
    let deadline = Instant::now() + Duration::from_secs(30);
    let text = loop {
        let text = metrics(&addr);
        if text.contains("neardup_cluster_snapshot_age_seconds{") {
            break text;
        }
        assert!(Instant::now() < deadline, "no snapshot set within 30 s:\n{text}");
        std::thread::sleep(Duration::from_millis(200));
    };
    exported.add(&text, "cluster node");
    exported
}

#[test]
fn alert_rules_and_dashboards_use_only_exported_metrics_and_labels() {
    let exported = scrape_servers();
    let mut queries: Vec<(String, String)> =
        alert_rules().into_iter().map(|(name, expr, _)| (format!("{RULES}: {name}"), expr)).collect();
    for (file, d) in dashboards() {
        for q in dashboard_queries(&d) {
            queries.push((format!("deploy/grafana/{file}"), q));
        }
    }
    let mut used: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut problems = Vec::new();
    for (whence, expr) in &queries {
        for id in identifiers(expr) {
            if id.starts_with("neardup_") {
                if !exported.samples.contains_key(&id) {
                    problems.push(format!("{whence}: {id} is not on /metrics"));
                }
                used.entry(id).or_default().insert(whence.clone());
            } else if !(PROMQL_WORDS.contains(&id.as_str())
                || exported.labels.contains(&id)
                || id == "instance"
                || id == "job")
            {
                problems.push(format!("{whence}: {id:?} is neither a PromQL word nor an exported label ({expr})"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // Say where each name was found.
    for (name, whence) in &used {
        eprintln!("{name}: on /metrics of a {}, used by {}", exported.samples[name], whence.len());
    }
    // The dashboards show what the issue asks for; the rules cover the
    // runbook's symptoms (a few names each must use).
    let all: String = queries.iter().map(|(_, q)| q.as_str()).collect::<Vec<_>>().join("\n");
    for name in [
        "neardup_items_ingested_total",
        "neardup_decisions_total",
        "neardup_query_seconds_bucket",
        "neardup_ingest_seconds_bucket",
        "neardup_candidates_per_query_bucket",
        "neardup_cap_rejections_total",
        "neardup_verification_score_bucket",
        "neardup_cost_resident_bytes_per_million_items",
        "neardup_cost_disk_bytes_per_million_items",
        "neardup_cluster_lag_commands",
        "neardup_cluster_applied_commands_total",
        "neardup_cluster_snapshot_age_seconds",
        "neardup_cluster_partition_live_nodes",
        "neardup_shadow_disagreement_ratio",
        "neardup_tombstone_seconds_bucket",
        "neardup_snapshot_age_seconds",
        "neardup_http_responses_total",
        "neardup_content_read_failures_total",
    ] {
        assert!(all.contains(name), "no query uses {name}");
    }
}

/// GitHub's anchor for a heading.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

#[test]
fn every_alert_has_a_runbook_section_and_a_firing_and_a_quiet_test() {
    let runbook = read("docs/runbook.md");
    let anchors: BTreeSet<String> =
        runbook.lines().filter_map(|l| l.strip_prefix('#')).map(|l| slug(l.trim_start_matches('#'))).collect();
    // Links inside the runbook land too.
    for link in runbook.split("](#").skip(1) {
        let anchor = &link[..link.find(')').unwrap()];
        assert!(anchors.contains(anchor), "docs/runbook.md links to #{anchor}, which is no heading");
    }
    let rules = alert_rules();
    let mut names = BTreeSet::new();
    for (name, _, url) in &rules {
        assert!(names.insert(name.clone()), "{name} twice");
        let anchor = url.strip_prefix("docs/runbook.md#").unwrap_or_else(|| panic!("{name}: {url}"));
        assert!(anchors.contains(anchor), "{name}: docs/runbook.md has no section #{anchor}");
        assert_eq!(anchor, name.to_lowercase(), "{name}: its section is named after it");
        let section = &runbook[runbook.find(&format!("### {name}\n")).unwrap()..];
        let section = &section[..section[4..].find("\n#").map_or(section.len(), |i| i + 4)];
        assert!(section.contains("**Confirm**"), "{name}: no command to confirm it");
        assert!(section.contains("**Degrade safely**"), "{name}: no safe degradation");
    }
    // Each `alertname:` of the unit tests is followed by its `exp_alerts`:
    // `[]` (must not fire) or a list (fires).
    let tests = read(RULE_TESTS);
    let lines: Vec<&str> = tests.lines().map(str::trim).collect();
    let (mut fires, mut quiet) = (BTreeSet::new(), BTreeSet::new());
    for (i, line) in lines.iter().enumerate() {
        if let Some(name) = line.strip_prefix("alertname: ") {
            assert!(names.contains(name), "{RULE_TESTS} tests {name}, which is no rule");
            match lines.get(i + 1) {
                Some(&"exp_alerts: []") => quiet.insert(name.to_string()),
                Some(&"exp_alerts:") if lines.get(i + 2).is_some_and(|l| l.starts_with("- exp_labels:")) => {
                    fires.insert(name.to_string())
                }
                other => panic!("{RULE_TESTS}: {name} followed by {other:?}"),
            };
        }
    }
    for name in &names {
        assert!(fires.contains(name), "{RULE_TESTS}: no case where {name} fires");
        assert!(quiet.contains(name), "{RULE_TESTS}: no case where {name} stays quiet");
    }
}

#[test]
fn dashboards_are_grafana_dashboards() {
    let mut uids = BTreeSet::new();
    for (file, d) in dashboards() {
        for key in ["uid", "title", "schemaVersion", "panels", "templating"] {
            assert!(d.get(key).is_some(), "{file}: no {key}");
        }
        assert!(uids.insert(d["uid"].as_str().unwrap().to_string()), "{file}: uid twice");
        let mut ids = BTreeSet::new();
        for p in d["panels"].as_array().unwrap() {
            let title = p["title"].as_str().unwrap_or_default();
            assert!(ids.insert(p["id"].as_u64().unwrap()), "{file}: panel id twice ({title})");
            for k in ["x", "y", "w", "h"] {
                assert!(p["gridPos"][k].is_u64(), "{file}: {title}: gridPos.{k}");
            }
            if p["type"] == "row" {
                continue;
            }
            assert_eq!(p["datasource"]["uid"], "${datasource}", "{file}: {title}: the datasource variable");
            let targets = p["targets"].as_array().unwrap_or_else(|| panic!("{file}: {title}: no targets"));
            assert!(!targets.is_empty(), "{file}: {title}: no targets");
            for t in targets {
                assert!(t["expr"].as_str().is_some_and(|e| !e.is_empty()), "{file}: {title}: a target without expr");
                assert!(t["refId"].is_string(), "{file}: {title}: a target without refId");
            }
        }
    }
}

fn promtool() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("NEARDUP_PROMTOOL") {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| Path::new(d).join("promtool")).find(|p| p.is_file())
}

fn run_promtool(promtool: &Path, args: &[&str]) {
    let out = Command::new(promtool).args(args).current_dir(root()).output().expect("promtool runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "promtool {}:\n{text}", args.join(" "));
    eprintln!("promtool {}: {}", args.join(" "), text.trim());
}

#[test]
fn promtool_checks_the_rules_their_unit_tests_and_the_dashboard_queries() {
    let Some(promtool) = promtool() else {
        let in_ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
        assert!(!in_ci, "promtool not found in CI: scripts/install-promtool.sh installs it (or set NEARDUP_PROMTOOL)");
        // Past the test harness's capture (eprintln! is captured): a
        // developer sees the skip in `cargo test`'s output.
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: promtool not found (apt-get install prometheus, or bash scripts/install-promtool.sh, or set \
             NEARDUP_PROMTOOL); CI runs this check"
        );
        return;
    };
    run_promtool(&promtool, &["check", "rules", RULES]);
    run_promtool(&promtool, &["test", "rules", RULE_TESTS]);
    // Every dashboard query, as a recording rule, parses.
    let mut rules = Vec::new();
    for (file, d) in dashboards() {
        for (i, q) in dashboard_queries(&d).into_iter().filter(|q| !q.starts_with("label_values(")).enumerate() {
            rules.push(json!({"record": format!("dashboard:{}:{i}", file.trim_end_matches(".json").replace('-', "_")), "expr": as_promql(&q)}));
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dashboard-queries.yml");
    // JSON is YAML.
    std::fs::write(&path, json!({"groups": [{"name": "dashboards", "rules": rules}]}).to_string()).unwrap();
    run_promtool(&promtool, &["check", "rules", path.to_str().unwrap()]);
}
