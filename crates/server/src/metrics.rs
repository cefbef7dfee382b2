//! Prometheus metrics, rendered as text exposition format 0.0.4.
//!
//! Hand-rolled rather than a registry crate: a handful of per-tenant
//! counters and fixed-bucket histograms behind one mutex each, plus gauges
//! read from the engine at scrape time. Every per-tenant series carries a
//! `tenant` label and holds only that tenant's events.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::SystemTime;

const LATENCY_BOUNDS: &[f64] = &[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1.0, 2.5, 5.0];
const CANDIDATE_BOUNDS: &[f64] = &[0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0];
const SCORE_BOUNDS: &[f64] = &[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.99, 1.0];

#[derive(Debug, Clone)]
struct Histogram {
    bounds: &'static [f64],
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Histogram {
        Histogram { bounds, counts: vec![0; bounds.len()], sum: 0.0, count: 0 }
    }

    fn observe(&mut self, v: f64) {
        if let Some(i) = self.bounds.iter().position(|b| v <= *b) {
            self.counts[i] += 1;
        }
        self.sum += v;
        self.count += 1;
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let mut cumulative = 0;
        for (b, c) in self.bounds.iter().zip(&self.counts) {
            cumulative += c;
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{b}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", self.sum);
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", self.count);
    }
}

#[derive(Debug, Clone)]
struct TenantMetrics {
    ingest_seconds: Histogram,
    query_seconds: Histogram,
    candidates_per_query: Histogram,
    verification_score: Histogram,
    decisions: BTreeMap<&'static str, u64>,
    cap_rejections: u64,
    budget_rejections: u64,
    tombstones: u64,
    tombstone_seconds: Histogram,
    cross_version_attempts: u64,
    rate_limited: u64,
    items_ingested: u64,
    /// Items written per wall-clock minute, oldest first, the last
    /// [`INGEST_MINUTES`] minutes that saw a write: `(minute since the Unix
    /// epoch, items)`.
    ingest_minutes: std::collections::VecDeque<(u64, u64)>,
}

/// Minutes of ingest history kept per tenant for the dashboards.
const INGEST_MINUTES: usize = 60;

/// A fixed-bucket histogram as read: `counts[i]` observations at or below
/// `bounds[i]` (and above the bound before), `overflow` above the last.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramFigures {
    /// Upper bounds of the buckets.
    pub bounds: Vec<f64>,
    /// Observations per bucket (not cumulative).
    pub counts: Vec<u64>,
    /// Observations above the last bound.
    pub overflow: u64,
    /// Sum of all observations.
    pub sum: f64,
    /// Number of observations.
    pub count: u64,
}

impl From<&Histogram> for HistogramFigures {
    fn from(h: &Histogram) -> Self {
        let inside: u64 = h.counts.iter().sum();
        HistogramFigures {
            bounds: h.bounds.to_vec(),
            counts: h.counts.clone(),
            overflow: h.count.saturating_sub(inside),
            sum: h.sum,
            count: h.count,
        }
    }
}

/// One tenant's metrics as this process counted them since it started,
/// for the dashboards (`GET /v1/tenants/{tenant}/dashboard`).
#[derive(Debug, Clone, PartialEq)]
pub struct TenantFigures {
    pub ingest_seconds: HistogramFigures,
    pub query_seconds: HistogramFigures,
    pub candidates_per_query: HistogramFigures,
    pub verification_score: HistogramFigures,
    pub tombstone_seconds: HistogramFigures,
    pub decisions: BTreeMap<String, u64>,
    pub cap_rejections: u64,
    pub budget_rejections: u64,
    pub rate_limited: u64,
    pub tombstones: u64,
    pub items_ingested: u64,
    /// `(minute since the Unix epoch, items written)`, oldest first.
    pub ingest_minutes: Vec<(u64, u64)>,
    /// Seconds since the tenant's newest snapshot on disk.
    pub snapshot_age_seconds: Option<f64>,
}

impl TenantMetrics {
    fn new() -> TenantMetrics {
        TenantMetrics {
            ingest_seconds: Histogram::new(LATENCY_BOUNDS),
            query_seconds: Histogram::new(LATENCY_BOUNDS),
            candidates_per_query: Histogram::new(CANDIDATE_BOUNDS),
            verification_score: Histogram::new(SCORE_BOUNDS),
            decisions: BTreeMap::new(),
            cap_rejections: 0,
            budget_rejections: 0,
            tombstones: 0,
            tombstone_seconds: Histogram::new(LATENCY_BOUNDS),
            cross_version_attempts: 0,
            rate_limited: 0,
            items_ingested: 0,
            ingest_minutes: std::collections::VecDeque::new(),
        }
    }
}

/// Disk figures read from the engine for one exposition.
#[derive(Debug, Clone, Copy, Default)]
pub struct DiskGauges {
    /// Bytes in the command log.
    pub log_bytes: u64,
    /// Fsyncs of the command log since start (`--fsync always`).
    pub log_fsyncs: u64,
    /// Bytes under the data directory.
    pub data_dir_bytes: u64,
    /// Bytes the item store holds in memory (cache, memtables).
    pub store_resident_bytes: u64,
}

/// A cluster node's replication figures, read by the caller.
#[derive(Debug, Clone, Default)]
pub struct ClusterGauges {
    pub node: String,
    /// The partition, `index/count` (`0/1` unpartitioned).
    pub partition: String,
    /// Every command of the stream up to here is applied.
    pub applied_position: u64,
    /// The stream's last position as last seen.
    pub stream_last: u64,
    /// Commands between the two.
    pub lag: u64,
    /// Commands applied since the process started.
    pub applied_total: u64,
    /// Entries skipped since the process started (not a command of their
    /// tenant's subject).
    pub skipped_total: u64,
    /// Stream positions found deleted since the process started.
    pub gap_positions_total: u64,
    /// The applier runs (it stops on a command it cannot apply).
    pub applying: bool,
    /// Seconds since the newest snapshot set in the object store.
    pub snapshot_age_seconds: Option<f64>,
    /// The position of that set.
    pub snapshot_position: u64,
    /// Sets this node wrote since it started.
    pub snapshot_sets_written: u64,
}

/// Cluster mode: values of the shared state refused by this node because
/// their tag did not verify with the cluster secret.
pub fn render_refused_records(out: &mut String, node: &str, refused: u64) {
    let name = "neardup_cluster_refused_records_total";
    let _ = writeln!(
        out,
        "# HELP {name} Stream entries, key records, registry entries and manifests whose tag did not verify with the \
         cluster secret.\n# TYPE {name} counter\n{name}{{node=\"{}\"}} {refused}",
        escape(node)
    );
}

/// Cluster mode: live nodes serving each partition, as the node registry
/// shows them (this node included), for every partition of the cluster.
pub fn render_partition_nodes(out: &mut String, counts: &[(String, u64)]) {
    if counts.is_empty() {
        return;
    }
    let name = "neardup_cluster_partition_live_nodes";
    let _ = writeln!(
        out,
        "# HELP {name} Live nodes serving the partition (0: its tenants answer 503).\n# TYPE {name} gauge"
    );
    for (p, n) in counts {
        let _ = writeln!(out, "{name}{{partition=\"{}\"}} {n}", escape(p));
    }
}

impl ClusterGauges {
    /// The partitions' figures: each metric once, a line per partition.
    fn render(all: &[ClusterGauges], out: &mut String) {
        let rows: Vec<_> = all.iter().map(|g| (g.labels(), g.rows())).collect();
        let Some((_, first)) = rows.first() else { return };
        for (i, (name, kind, text, _)) in first.iter().enumerate() {
            let _ = writeln!(out, "# HELP {name} {text}\n# TYPE {name} {kind}");
            for (labels, values) in &rows {
                if let Some(v) = values[i].3 {
                    let _ = writeln!(out, "{name}{{{labels}}} {v}");
                }
            }
        }
    }

    fn labels(&self) -> String {
        format!("node=\"{}\",partition=\"{}\"", escape(&self.node), escape(&self.partition))
    }

    fn rows(&self) -> [(&'static str, &'static str, &'static str, Option<f64>); 10] {
        [
            (
                "neardup_cluster_applied_position",
                "gauge",
                "The command stream position this node applied up to.",
                Some(self.applied_position as f64),
            ),
            (
                "neardup_cluster_stream_last_position",
                "gauge",
                "The stream's last position as this node last saw it.",
                Some(self.stream_last as f64),
            ),
            (
                "neardup_cluster_lag_commands",
                "gauge",
                "Commands of the stream this node has not applied yet.",
                Some(self.lag as f64),
            ),
            (
                "neardup_cluster_applied_commands_total",
                "counter",
                "Commands applied since start (rate: the apply rate).",
                Some(self.applied_total as f64),
            ),
            (
                "neardup_cluster_skipped_entries_total",
                "counter",
                "Stream entries skipped since start: not a command of their tenant (garbage, forged or foreign).",
                Some(self.skipped_total as f64),
            ),
            (
                "neardup_cluster_stream_gap_positions_total",
                "counter",
                "Stream positions found deleted since start and read past.",
                Some(self.gap_positions_total as f64),
            ),
            (
                "neardup_cluster_applying",
                "gauge",
                "1 while the applier runs; 0 after it stopped on a command.",
                Some(f64::from(u8::from(self.applying))),
            ),
            (
                "neardup_cluster_snapshot_age_seconds",
                "gauge",
                "Seconds since the newest snapshot set in the object store was written.",
                self.snapshot_age_seconds,
            ),
            (
                "neardup_cluster_snapshot_position",
                "gauge",
                "The stream position the newest snapshot set covers.",
                Some(self.snapshot_position as f64),
            ),
            (
                "neardup_cluster_snapshot_sets_written_total",
                "counter",
                "Snapshot sets this node wrote since start.",
                Some(self.snapshot_sets_written as f64),
            ),
        ]
    }
}

/// The process's own resident memory and CPU time, where the platform
/// says (Linux `/proc/self`); `None` elsewhere.
#[derive(Debug, Clone, Copy, Default)]
struct ProcessUsage {
    resident_bytes: Option<u64>,
    cpu_seconds: Option<f64>,
}

impl ProcessUsage {
    fn read() -> ProcessUsage {
        ProcessUsage {
            resident_bytes: neardup_fs::usage::process_resident_bytes(),
            cpu_seconds: neardup_fs::usage::process_cpu_seconds(),
        }
    }
}

/// Gauges read from the engine at scrape time, per tenant.
#[derive(Debug, Clone, Default)]
pub struct TenantGauges {
    /// Live items.
    pub live_items: u64,
    /// Live content bytes.
    pub live_bytes: u64,
    /// Tombstone markers held.
    pub tombstones: u64,
    /// Largest LSH bucket.
    pub largest_bucket: u64,
    /// Estimated resident index bytes.
    pub resident_bytes: u64,
    /// Shadow decision disagreement rate, when a shadow is active.
    pub shadow_disagreement: Option<f64>,
    /// Shadow queries compared so far.
    pub shadow_queries: Option<u64>,
    /// Bucket lookups the membership screen answered, and its false
    /// positives, since start (absent without a screen).
    pub screen: Option<(u64, u64)>,
}

/// What one decision contributes to the metrics.
#[derive(Debug, Clone, Copy)]
pub struct DecisionSample<'a> {
    /// State name.
    pub state: &'static str,
    /// Candidates retrieved.
    pub candidates_seen: u64,
    /// Retrieval was capped.
    pub over_cap: bool,
    /// Verified scores.
    pub scores: &'a [f64],
}

/// The service's metrics.
#[derive(Debug, Default)]
pub struct Metrics {
    tenants: Mutex<BTreeMap<String, TenantMetrics>>,
    http: Mutex<BTreeMap<(String, u16), u64>>,
    snapshots: Mutex<BTreeMap<String, SystemTime>>,
}

impl Metrics {
    /// Empty metrics.
    pub fn new() -> Metrics {
        Metrics::default()
    }

    fn with(&self, tenant: &str, f: impl FnOnce(&mut TenantMetrics)) {
        if let Ok(mut m) = self.tenants.lock() {
            f(m.entry(tenant.to_string()).or_insert_with(TenantMetrics::new));
        }
    }

    /// An upsert's latency and decision.
    pub fn ingest(&self, tenant: &str, seconds: f64, wrote: bool, d: DecisionSample<'_>) {
        self.with(tenant, |m| {
            m.ingest_seconds.observe(seconds);
            if wrote {
                m.items_ingested += 1;
                let minute = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs() / 60);
                match m.ingest_minutes.back_mut() {
                    Some((at, n)) if *at == minute => *n += 1,
                    _ => {
                        m.ingest_minutes.push_back((minute, 1));
                        if m.ingest_minutes.len() > INGEST_MINUTES {
                            m.ingest_minutes.pop_front();
                        }
                    }
                }
            }
            record_decision(m, d);
        });
    }

    /// A query's (candidates, decide) latency and decision.
    pub fn query(&self, tenant: &str, seconds: f64, d: DecisionSample<'_>) {
        self.with(tenant, |m| {
            m.query_seconds.observe(seconds);
            record_decision(m, d);
        });
    }

    /// A verify call's score.
    pub fn verification(&self, tenant: &str, score: f64) {
        self.with(tenant, |m| m.verification_score.observe(score));
    }

    /// A tombstone and how long it took to apply.
    pub fn tombstone(&self, tenant: &str, seconds: f64) {
        self.with(tenant, |m| {
            m.tombstones += 1;
            m.tombstone_seconds.observe(seconds);
        });
    }

    /// An item or content refused by a size or budget cap.
    pub fn budget_rejection(&self, tenant: &str) {
        self.with(tenant, |m| m.budget_rejections += 1);
    }

    /// A request naming a normalization or format version the tenant does not use.
    pub fn cross_version(&self, tenant: &str) {
        self.with(tenant, |m| m.cross_version_attempts += 1);
    }

    /// A request refused by the tenant's quota.
    pub fn rate_limited(&self, tenant: &str) {
        self.with(tenant, |m| m.rate_limited += 1);
    }

    /// A snapshot of `tenant` was written to disk now (or at `at`).
    pub fn snapshot_written(&self, tenant: &str, at: SystemTime) {
        if let Ok(mut s) = self.snapshots.lock() {
            s.insert(tenant.to_string(), at);
        }
    }

    /// `tenant`'s figures since this process started (empty ones for a
    /// tenant it has seen nothing of).
    pub fn figures(&self, tenant: &str) -> TenantFigures {
        let m = self.tenants.lock().ok().and_then(|t| t.get(tenant).cloned()).unwrap_or_else(TenantMetrics::new);
        let snapshot_age_seconds = self.snapshots.lock().ok().and_then(|s| {
            let at = *s.get(tenant)?;
            Some(SystemTime::now().duration_since(at).map(|d| d.as_secs_f64()).unwrap_or(0.0))
        });
        TenantFigures {
            ingest_seconds: (&m.ingest_seconds).into(),
            query_seconds: (&m.query_seconds).into(),
            candidates_per_query: (&m.candidates_per_query).into(),
            verification_score: (&m.verification_score).into(),
            tombstone_seconds: (&m.tombstone_seconds).into(),
            decisions: m.decisions.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            cap_rejections: m.cap_rejections,
            budget_rejections: m.budget_rejections,
            rate_limited: m.rate_limited,
            tombstones: m.tombstones,
            items_ingested: m.items_ingested,
            ingest_minutes: m.ingest_minutes.iter().copied().collect(),
            snapshot_age_seconds,
        }
    }

    /// One HTTP response.
    pub fn http(&self, route: &str, status: u16) {
        if let Ok(mut h) = self.http.lock() {
            *h.entry((route.to_string(), status)).or_insert(0) += 1;
        }
    }

    /// The exposition text; `gauges` are read from the engine by the caller.
    pub fn render(
        &self,
        gauges: &BTreeMap<String, TenantGauges>,
        disk: DiskGauges,
        cluster: &[ClusterGauges],
    ) -> String {
        let log_bytes = disk.log_bytes;
        let mut out = String::with_capacity(8192);
        let tenants = self.tenants.lock().map(|t| t.clone()).unwrap_or_default();
        let help = |out: &mut String, name: &str, kind: &str, text: &str| {
            let _ = writeln!(out, "# HELP {name} {text}\n# TYPE {name} {kind}");
        };
        type Hist = fn(&TenantMetrics) -> &Histogram;
        let hists: [(&str, &str, Hist); 5] = [
            ("neardup_ingest_seconds", "Upsert latency (validate, fingerprint, decide, log, apply).", |m| {
                &m.ingest_seconds
            }),
            ("neardup_query_seconds", "Candidate and decide query latency.", |m| &m.query_seconds),
            ("neardup_candidates_per_query", "Candidates retrieved per query or upsert.", |m| &m.candidates_per_query),
            ("neardup_verification_score", "Exact Jaccard scores of verified candidates.", |m| &m.verification_score),
            ("neardup_tombstone_seconds", "Tombstone latency until the item stops being a candidate.", |m| {
                &m.tombstone_seconds
            }),
        ];
        for (name, text, get) in hists {
            help(&mut out, name, "histogram", text);
            for (t, m) in &tenants {
                get(m).render(&mut out, name, &format!("tenant=\"{}\"", escape(t)));
            }
        }
        type Count = fn(&TenantMetrics) -> u64;
        let counters: [(&str, &str, Count); 6] = [
            ("neardup_items_ingested_total", "Upserts that wrote an item.", |m| m.items_ingested),
            ("neardup_cap_rejections_total", "Queries whose candidate set hit the cap (decision: review).", |m| {
                m.cap_rejections
            }),
            ("neardup_budget_rejections_total", "Items refused by a size or tenant budget.", |m| m.budget_rejections),
            ("neardup_tombstones_total", "Tombstones applied.", |m| m.tombstones),
            ("neardup_cross_version_attempts_total", "Requests naming another normalization or format version.", |m| {
                m.cross_version_attempts
            }),
            ("neardup_rate_limited_total", "Requests refused by the tenant's quota.", |m| m.rate_limited),
        ];
        for (name, text, get) in counters {
            help(&mut out, name, "counter", text);
            for (t, m) in &tenants {
                let _ = writeln!(out, "{name}{{tenant=\"{}\"}} {}", escape(t), get(m));
            }
        }
        help(&mut out, "neardup_decisions_total", "counter", "Decisions by state.");
        for (t, m) in &tenants {
            for (state, n) in &m.decisions {
                let _ = writeln!(out, "neardup_decisions_total{{tenant=\"{}\",state=\"{state}\"}} {n}", escape(t));
            }
        }
        type Gauge = fn(&TenantGauges) -> Option<f64>;
        let gauge_defs: [(&str, &str, Gauge); 9] = [
            ("neardup_items", "Live items.", |g| Some(g.live_items as f64)),
            ("neardup_item_bytes", "Live content bytes.", |g| Some(g.live_bytes as f64)),
            ("neardup_tombstone_markers", "Tombstone markers held until compaction.", |g| Some(g.tombstones as f64)),
            ("neardup_largest_bucket", "Entries in the largest LSH bucket.", |g| Some(g.largest_bucket as f64)),
            ("neardup_index_resident_bytes", "Estimated resident bytes of the in-memory index.", |g| {
                Some(g.resident_bytes as f64)
            }),
            ("neardup_shadow_disagreement_ratio", "Shadow vs live decision disagreement rate.", |g| {
                g.shadow_disagreement
            }),
            ("neardup_shadow_queries", "Queries the shadow index answered alongside the live one.", |g| {
                g.shadow_queries.map(|q| q as f64)
            }),
            (
                "neardup_screen_skipped_lookups",
                "Bucket lookups the membership screen answered without reading a table, since start.",
                |g| g.screen.map(|s| s.0 as f64),
            ),
            (
                "neardup_screen_false_positives",
                "Bucket lookups the membership screen let through that found no bucket, since start.",
                |g| g.screen.map(|s| s.1 as f64),
            ),
        ];
        for (name, text, get) in gauge_defs {
            help(&mut out, name, "gauge", text);
            for (t, g) in gauges {
                if let Some(v) = get(g) {
                    let _ = writeln!(out, "{name}{{tenant=\"{}\"}} {v}", escape(t));
                }
            }
        }
        help(&mut out, "neardup_snapshot_age_seconds", "gauge", "Seconds since the tenant's newest snapshot on disk.");
        let now = SystemTime::now();
        if let Ok(snaps) = self.snapshots.lock() {
            for t in gauges.keys() {
                if let Some(at) = snaps.get(t) {
                    let age = now.duration_since(*at).map(|d| d.as_secs_f64()).unwrap_or(0.0);
                    let _ = writeln!(out, "neardup_snapshot_age_seconds{{tenant=\"{}\"}} {age:.3}", escape(t));
                }
            }
        }
        help(&mut out, "neardup_command_log_bytes", "gauge", "Bytes in the command log.");
        let _ = writeln!(out, "neardup_command_log_bytes {log_bytes}");
        help(
            &mut out,
            "neardup_command_log_fsyncs_total",
            "counter",
            "Fsyncs of the command log since start (group commit shares one among concurrent writes).",
        );
        let _ = writeln!(out, "neardup_command_log_fsyncs_total {}", disk.log_fsyncs);
        // What a million items cost on this node, from what it holds now:
        // resident memory and disk per live item, CPU per item ingested
        // since the process started (queries included).
        let live: u64 = gauges.values().map(|g| g.live_items).sum();
        let ingested: u64 = tenants.values().map(|m| m.items_ingested).sum();
        let process = ProcessUsage::read();
        let per_million = |v: f64, n: u64| (n > 0).then(|| v / n as f64 * 1e6);
        let costs = [
            (
                "neardup_cost_resident_bytes_per_million_items",
                "Resident memory of the process per million live items.",
                process.resident_bytes.and_then(|r| per_million(r as f64, live)),
            ),
            (
                "neardup_cost_disk_bytes_per_million_items",
                "Bytes under the data directory per million live items.",
                per_million(disk.data_dir_bytes as f64, live),
            ),
            (
                "neardup_cost_cpu_seconds_per_million_ingested",
                "CPU seconds of the process since start per million items ingested since start.",
                process.cpu_seconds.and_then(|c| per_million(c, ingested)),
            ),
        ];
        for (name, text, value) in costs {
            help(&mut out, name, "gauge", text);
            if let Some(v) = value {
                let _ = writeln!(out, "{name} {v:.0}");
            }
        }
        help(
            &mut out,
            "neardup_store_resident_bytes",
            "gauge",
            "Bytes the item store holds in memory (cache, memtables).",
        );
        let _ = writeln!(out, "neardup_store_resident_bytes {}", disk.store_resident_bytes);
        help(&mut out, "neardup_data_dir_bytes", "gauge", "Bytes under the data directory (store, log, checkpoints).");
        let _ = writeln!(out, "neardup_data_dir_bytes {}", disk.data_dir_bytes);
        ClusterGauges::render(cluster, &mut out);
        help(&mut out, "neardup_http_responses_total", "counter", "HTTP responses by route and status.");
        if let Ok(h) = self.http.lock() {
            for ((route, status), n) in h.iter() {
                let _ = writeln!(
                    out,
                    "neardup_http_responses_total{{route=\"{}\",status=\"{status}\"}} {n}",
                    escape(route)
                );
            }
        }
        out
    }
}

fn record_decision(m: &mut TenantMetrics, d: DecisionSample<'_>) {
    m.candidates_per_query.observe(d.candidates_seen as f64);
    for s in d.scores {
        m.verification_score.observe(*s);
    }
    if d.over_cap {
        m.cap_rejections += 1;
    }
    *m.decisions.entry(d.state).or_insert(0) += 1;
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_is_cumulative() {
        let m = Metrics::new();
        let d = DecisionSample { state: "distinct", candidates_seen: 3, over_cap: false, scores: &[0.8, 0.2] };
        m.ingest("t", 0.002, true, d);
        let text = m.render(&BTreeMap::new(), DiskGauges::default(), &[]);
        assert!(text.contains("neardup_verification_score_bucket{tenant=\"t\",le=\"0.8\"} 2"), "{text}");
        assert!(text.contains("neardup_verification_score_count{tenant=\"t\"} 2"));
        assert!(text.contains("neardup_decisions_total{tenant=\"t\",state=\"distinct\"} 1"));
        // No live items: no cost figure (never a division by zero).
        assert!(!text.lines().any(|l| l.starts_with("neardup_cost_disk_bytes_per_million_items ")), "{text}");
    }

    #[test]
    fn cost_per_million_items() {
        let m = Metrics::new();
        let d = DecisionSample { state: "distinct", candidates_seen: 0, over_cap: false, scores: &[] };
        for _ in 0..4 {
            m.ingest("t", 0.001, true, d);
        }
        let g = TenantGauges {
            live_items: 4,
            live_bytes: 0,
            tombstones: 0,
            largest_bucket: 0,
            resident_bytes: 0,
            shadow_disagreement: None,
            shadow_queries: None,
            screen: Some((17, 2)),
        };
        let gauges = BTreeMap::from([("t".to_string(), g)]);
        let cluster = ClusterGauges {
            node: "n1".into(),
            partition: "0/1".into(),
            applied_position: 90,
            stream_last: 100,
            lag: 10,
            applied_total: 40,
            skipped_total: 1,
            gap_positions_total: 2,
            applying: true,
            snapshot_age_seconds: None,
            snapshot_position: 0,
            snapshot_sets_written: 0,
        };
        let text = m.render(
            &gauges,
            DiskGauges { log_bytes: 10, log_fsyncs: 3, data_dir_bytes: 8_000, store_resident_bytes: 0 },
            &[cluster.clone(), ClusterGauges { partition: "1/2".into(), lag: 3, ..cluster }],
        );
        assert!(text.contains("neardup_cluster_lag_commands{node=\"n1\",partition=\"0/1\"} 10\n"), "{text}");
        assert!(text.contains("neardup_cluster_lag_commands{node=\"n1\",partition=\"1/2\"} 3\n"), "{text}");
        assert_eq!(text.matches("# TYPE neardup_cluster_lag_commands gauge").count(), 1, "{text}");
        assert!(text.contains("neardup_cluster_applied_commands_total{node=\"n1\",partition=\"0/1\"} 40\n"), "{text}");
        assert!(text.contains("neardup_cluster_skipped_entries_total{node=\"n1\",partition=\"0/1\"} 1\n"), "{text}");
        assert!(
            text.contains("neardup_cluster_stream_gap_positions_total{node=\"n1\",partition=\"0/1\"} 2\n"),
            "{text}"
        );
        // No set yet: the age has no sample (not a fake 0).
        assert!(!text.contains("neardup_cluster_snapshot_age_seconds{"), "{text}");
        assert!(text.contains("neardup_cost_disk_bytes_per_million_items 2000000000\n"), "{text}");
        assert!(text.contains("neardup_data_dir_bytes 8000\n"), "{text}");
        assert!(text.contains("neardup_command_log_fsyncs_total 3\n"), "{text}");
        assert!(text.contains("neardup_screen_skipped_lookups{tenant=\"t\"} 17\n"), "{text}");
        assert!(text.contains("neardup_screen_false_positives{tenant=\"t\"} 2\n"), "{text}");
        if cfg!(target_os = "linux") {
            let rss = text.lines().find(|l| l.starts_with("neardup_cost_resident_bytes_per_million_items "));
            let v: f64 = rss.and_then(|l| l.split(' ').nth(1)?.parse().ok()).expect("a resident cost on Linux");
            // This test process holds at least a few MB: over 1e12 bytes per million at 4 items.
            assert!(v > 1e12, "{v}");
            assert!(text.contains("neardup_cost_cpu_seconds_per_million_ingested "), "{text}");
        }
    }
}
