//! Issue 12, process-level faults: `neardup serve --cluster` nodes as real
//! processes over a three-server NATS JetStream cluster on loopback. A node
//! is SIGKILLed mid-ingest and restarted (it catches up); a node is
//! SIGKILLed while it writes a snapshot set; a node started with an empty
//! data directory rebuilds from the object store and the stream. After
//! each, every acknowledged write is found on every node, the nodes answer
//! the same decision for the same probe and give the same snapshot bytes.
//!
//! Partitions: tenants spread over two partitions served by different
//! nodes; a request for a tenant served elsewhere is redirected (307) to a
//! node that serves it, a node serving both replicates both, a node or a
//! data directory with another partition count is refused, and redirects
//! move to a live node when the one they named dies.

mod common;

use std::time::{Duration, Instant};

use common::{call, http, http_with_headers, start_with, Server, ADMIN};
use neardup_cluster::testkit::NatsCluster;
use serde_json::{json, Value};

fn node(dir: &std::path::Path, nats: &NatsCluster, id: &str, snapshot_secs: &str) -> Server {
    node_with(dir, nats, id, &["--cluster-snapshot-secs", snapshot_secs])
}

/// A node on `nats` with `extra` arguments, once ready.
fn node_with(dir: &std::path::Path, nats: &NatsCluster, id: &str, extra: &[&str]) -> Server {
    let urls = nats.urls();
    let mut args = vec!["--cluster", &urls, "--node-id", id, "--fsync", "os", "--checkpoint-interval-secs", "0"];
    args.extend_from_slice(extra);
    let server = start_with(dir, &args);
    wait_ready(&server.addr);
    server
}

fn wait_ready(addr: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while call(addr, "GET", "/readyz", None, None).0 != 200 {
        assert!(Instant::now() < deadline, "{addr} not ready within 60 s");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits up to 10 s for `ok`.
fn eventually(ok: impl Fn() -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ok() {
        assert!(Instant::now() < deadline, "{what}: not within 10 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn text(i: u64) -> String {
    format!("family {} of the red fox that runs {} times very fast over the hill, item {i}", i % 13, i % 4)
}

fn put(addr: &str, id: &str, i: u64) -> Option<u64> {
    let path = format!("/v1/tenants/t/items/{id}");
    match http(addr, "PUT", &path, Some(ADMIN), "application/json", json!({"content": text(i)}).to_string().as_bytes())
    {
        Ok((200 | 201, body)) => serde_json::from_slice::<Value>(&body).ok()?["lsn"].as_u64(),
        _ => None,
    }
}

/// Every acknowledged id is on every node (read at or after `lsn`), the
/// nodes decide a probe alike and give the same snapshot bytes.
fn assert_agree(addrs: &[&str], acked: &[String], lsn: u64) {
    for addr in addrs {
        let mut found = 0;
        for id in acked {
            let (s, v) = call(addr, "GET", &format!("/v1/tenants/t/items/{id}?min_lsn={lsn}"), Some(ADMIN), None);
            assert_eq!(s, 200, "{addr}: acknowledged {id}: {v}");
            found += 1;
        }
        assert_eq!(found, acked.len(), "{addr}");
    }
    let probe = json!({"content": text(7)});
    let first = call(addrs[0], "POST", "/v1/tenants/t/decide", Some(ADMIN), Some(probe.clone())).1;
    let snap = http(addrs[0], "GET", "/v1/tenants/t/snapshot", Some(ADMIN), "", &[]).unwrap();
    assert_eq!(snap.0, 200);
    for addr in &addrs[1..] {
        assert_eq!(call(addr, "POST", "/v1/tenants/t/decide", Some(ADMIN), Some(probe.clone())).1, first, "{addr}");
        let other = http(addr, "GET", "/v1/tenants/t/snapshot", Some(ADMIN), "", &[]).unwrap();
        assert!(other.1 == snap.1, "{addr}: snapshot bytes differ ({} vs {} bytes)", other.1.len(), snap.1.len());
    }
}

#[test]
fn killed_nodes_catch_up_and_an_empty_node_rebuilds_from_the_object_store() {
    let nats = NatsCluster::start(3).unwrap();
    let dirs: Vec<tempfile::TempDir> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    let n1 = node(dirs[0].path(), &nats, "n1", "0");
    let mut n2 = node(dirs[1].path(), &nats, "n2", "0");
    let (a1, a2) = (n1.addr.clone(), n2.addr.clone());
    let (s, v) = call(&a1, "POST", "/v1/tenants", Some(ADMIN), Some(json!({"tenant_id": "t"})));
    assert_eq!(s, 201, "{v}");
    // Keys are shared: the key minted with the tenant on n1 works on n2;
    // one minted on n2 works on n1; one revoked on n1 stops working on n2.
    let key1 = v["api_key"].as_str().unwrap().to_string();
    let works = |addr: &str, key: &str| call(addr, "GET", "/v1/tenants/t", Some(key), None).0 == 200;
    eventually(|| works(&a2, &key1), "n1's key on n2");
    let (s, v) = call(&a2, "POST", "/v1/tenants/t/keys", Some(&key1), Some(json!({"scopes": ["query"]})));
    assert_eq!(s, 201, "{v}");
    let (key2, key2_id) = (v["api_key"].as_str().unwrap().to_string(), v["key_id"].as_str().unwrap().to_string());
    eventually(|| works(&a1, &key2), "n2's key on n1");
    let (s, v) = call(&a1, "DELETE", &format!("/v1/tenants/t/keys/{key2_id}"), Some(ADMIN), None);
    assert!(s == 200 || s == 204, "{s} {v}");
    eventually(|| call(&a2, "GET", "/v1/tenants/t", Some(&key2), None).0 == 401, "n1's revocation on n2");

    // Ingest on both nodes; n2 is SIGKILLed mid-ingest and restarted.
    let (mut acked, mut lsn, mut refused) = (Vec::new(), 0u64, 0);
    let mut a2_now = a2.clone();
    for i in 0..300u64 {
        if i == 100 {
            n2.child.kill().unwrap();
            n2.child.wait().unwrap();
        }
        if i == 200 {
            n2 = node(dirs[1].path(), &nats, "n2", "0");
            a2_now = n2.addr.clone();
        }
        let addr = if i % 2 == 0 { &a1 } else { &a2_now };
        match put(addr, &format!("i{i}"), i) {
            Some(l) => {
                acked.push(format!("i{i}"));
                lsn = lsn.max(l);
            }
            None => refused += 1,
        }
    }
    // Only the writes sent to the dead node went unanswered.
    assert!(refused <= 50, "{refused} writes refused");
    assert!(acked.len() >= 250, "{} acknowledged", acked.len());
    assert_agree(&[&a1, &a2_now], &acked, lsn);

    // A node that writes a snapshot set every second is SIGKILLed while it
    // writes one (its snapshot file on the way out is seen on disk).
    let mut caught = 0;
    for _attempt in 0..10 {
        let mut n3 = node(dirs[2].path(), &nats, "n3", "1");
        let upload = dirs[2].path().join("data").join("upload");
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut killed = false;
        while Instant::now() < deadline {
            let writing = std::fs::read_dir(&upload).is_ok_and(|mut d| d.next().is_some());
            if writing {
                n3.child.kill().unwrap();
                n3.child.wait().unwrap();
                killed = true;
                break;
            }
            std::thread::sleep(Duration::from_micros(300));
        }
        if !killed {
            n3.child.kill().unwrap();
            n3.child.wait().unwrap();
        }
        caught += usize::from(killed);
        // More writes between attempts, so each set has something new.
        for i in 0..20u64 {
            let n = 1000 + 20 * _attempt + i;
            if let Some(l) = put(&a1, &format!("i{n}"), n) {
                acked.push(format!("i{n}"));
                lsn = lsn.max(l);
            }
        }
        if caught >= 2 {
            break;
        }
    }
    assert!(caught >= 1, "never caught a node writing a snapshot set");

    // A complete set exists (n1 writes one now; the killed writer's
    // unfinished sets are ignored); a node with an empty data directory
    // starts from it and the stream tail, and agrees with the others.
    drop(n1);
    let n1 = node(dirs[0].path(), &nats, "n1", "1");
    let a1 = n1.addr.clone();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let metrics = http(&a1, "GET", "/metrics", None, "", &[]).unwrap().1;
        let text = String::from_utf8_lossy(&metrics).into_owned();
        if text.contains("neardup_cluster_snapshot_age_seconds{node=\"n1\",partition=\"0/1\"}") {
            assert!(text.contains("neardup_cluster_lag_commands{node=\"n1\",partition=\"0/1\"}"), "{text}");
            break;
        }
        assert!(Instant::now() < deadline, "no snapshot set within 30 s: {text}");
        std::thread::sleep(Duration::from_millis(200));
    }
    for i in 2000..2050u64 {
        if let Some(l) = put(&a2_now, &format!("i{i}"), i) {
            acked.push(format!("i{i}"));
            lsn = lsn.max(l);
        }
    }
    let n4 = node(dirs[3].path(), &nats, "n4", "0");
    let log = std::fs::read_to_string(dirs[3].path().join("server.log")).unwrap();
    assert!(log.contains("seeded from the newest snapshot set"), "{log}");
    assert_agree(&[&a1, &a2_now, &n4.addr], &acked, lsn);
    // The new node knows the shared keys too.
    eventually(|| works(&n4.addr, &key1), "the first key on the new node");
}

fn partition_node(dir: &std::path::Path, nats: &NatsCluster, id: &str, serve: &str) -> Server {
    node_with(dir, nats, id, &["--partitions", "2", "--serve-partitions", serve, "--cluster-snapshot-secs", "0"])
}

/// The status, the `Location` (if any) and the JSON body of a request.
fn ask(addr: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Option<String>, Value) {
    let bytes = body.map(|v| v.to_string().into_bytes()).unwrap_or_default();
    let (status, headers, out) =
        http_with_headers(addr, method, path, Some(ADMIN), "application/json", &bytes).unwrap();
    let location = headers.into_iter().find(|(k, _)| k == "location").map(|(_, v)| v);
    (status, location, serde_json::from_slice(&out).unwrap_or(Value::Null))
}

/// Sends a request to `addr` and follows one redirect, as a client would;
/// the status and body of the last answer.
fn follow(addr: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let (status, location, v) = ask(addr, method, path, body.clone());
    if status != 307 {
        return (status, v);
    }
    let location = location.expect("a 307 names a Location");
    let rest = location.strip_prefix("http://").expect("an http:// Location");
    let (host, target) = rest.split_at(rest.find('/').expect("a path"));
    let (status, _, v) = ask(host, method, target, body);
    (status, v)
}

/// The process's exit status and log when it stops within 60 s.
fn refused(dir: &std::path::Path, args: &[&str]) -> String {
    let log = dir.join("refused.log");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["serve", "--listen", "127.0.0.1:0", "--log-format", "text", "--data-dir"])
        .arg(dir.join("data"))
        .args(args)
        .env("NEARDUP_ADMIN_TOKEN", ADMIN)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("neardup serve {args:?} did not stop within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!status.success(), "{args:?} started");
    std::fs::read_to_string(&log).unwrap()
}

#[test]
fn partitions_are_served_by_their_nodes_and_redirected_elsewhere() {
    use neardup_cluster::partition::partition_of;
    let nats = NatsCluster::start(1).unwrap();
    let dirs: Vec<tempfile::TempDir> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    // A tenant in each of the two partitions.
    let name_in = |p: u32| (0..).map(|i| format!("tenant{i}")).find(|t| partition_of(t, 2).index == p).unwrap();
    let (ta, tb) = (name_in(0), name_in(1));
    let n1 = partition_node(dirs[0].path(), &nats, "n1", "0");
    let mut n2 = partition_node(dirs[1].path(), &nats, "n2", "1");
    let (a1, a2) = (n1.addr.clone(), n2.addr.clone());

    // Creating tb on n1: a redirect to n2 (once n1 has seen n2's entry),
    // which creates it; ta is created on n1 itself.
    let create_b = || ask(&a1, "POST", "/v1/tenants", Some(json!({"tenant_id": tb})));
    eventually(|| create_b().0 == 307, "n1 redirects to n2");
    let (_, location, v) = create_b();
    assert_eq!(location.as_deref(), Some(format!("http://{a2}/v1/tenants").as_str()), "{v}");
    assert_eq!(v["error"]["code"], "other_partition", "{v}");
    assert_eq!(follow(&a1, "POST", "/v1/tenants", Some(json!({"tenant_id": tb}))).0, 201);
    assert_eq!(follow(&a1, "POST", "/v1/tenants", Some(json!({"tenant_id": ta}))).0, 201);
    // Path and query are kept; nothing is read or charged on the way.
    let (s, location, _) = ask(&a1, "GET", &format!("/v1/tenants/{tb}/items/x?min_lsn=1"), None);
    assert_eq!((s, location), (307, Some(format!("http://{a2}/v1/tenants/{tb}/items/x?min_lsn=1"))));

    // Writes through n1 only, following redirects: each lands in its
    // tenant's partition, and only there.
    let mut lsn = [0u64; 2];
    for i in 0..40u64 {
        let (t, p) = if i % 2 == 0 { (&ta, 0) } else { (&tb, 1) };
        let (s, v) = follow(&a1, "PUT", &format!("/v1/tenants/{t}/items/i{i}"), Some(json!({"content": text(i)})));
        assert!(s == 200 || s == 201, "{s} {v}");
        lsn[p] = lsn[p].max(v["lsn"].as_u64().unwrap());
    }
    let list = |addr: &str| call(addr, "GET", "/v1/tenants", Some(ADMIN), None).1["tenants"].clone();
    assert_eq!(list(&a1), json!([ta]));
    assert_eq!(list(&a2), json!([tb]));
    let metrics = http(&a1, "GET", "/metrics", None, "", &[]).unwrap().1;
    let metrics = String::from_utf8(metrics).unwrap();
    assert!(metrics.contains("neardup_cluster_applied_position{node=\"n1\",partition=\"0/2\"}"), "{metrics}");
    assert!(!metrics.contains("neardup_cluster_applied_position{node=\"n1\",partition=\"1/2\"}"), "{metrics}");
    // Nothing of tb's requests was counted on n1, which redirected them.
    assert!(!metrics.contains(&format!("tenant=\"{tb}\"")), "{metrics}");

    // A node serving both partitions replicates both.
    let mut n3 = partition_node(dirs[2].path(), &nats, "n3", "0-1");
    let a3 = n3.addr.clone();
    for i in 0..40u64 {
        let (t, p) = if i % 2 == 0 { (&ta, 0) } else { (&tb, 1) };
        let (s, v) = call(&a3, "GET", &format!("/v1/tenants/{t}/items/i{i}?min_lsn={}", lsn[p]), Some(ADMIN), None);
        assert_eq!(s, 200, "n3: {t}/i{i}: {v}");
    }
    let mut both = vec![ta.clone(), tb.clone()];
    both.sort();
    assert_eq!(list(&a3), json!(both));

    // Another partition count: refused by the live nodes' entries, and by
    // a data directory written with two partitions.
    let urls = nats.urls();
    let log = refused(dirs[3].path(), &["--cluster", &urls, "--node-id", "n4", "--partitions", "3"]);
    assert!(log.contains("--partitions 2") && log.contains("same count"), "{log}");
    let log = refused(dirs[0].path(), &["--cluster", &urls, "--node-id", "n1b", "--partitions", "3"]);
    assert!(log.contains("2 partition(s)"), "{log}");

    // Two nodes serve tb's partition now (the registry, as n1's metrics
    // show it). The one n1 redirects to dies: once its entry expires, n1
    // sends tb's requests to the other.
    let live = |addr: &str, p: &str| {
        let m = String::from_utf8(http(addr, "GET", "/metrics", None, "", &[]).unwrap().1).unwrap();
        let line = format!("neardup_cluster_partition_live_nodes{{partition=\"{p}\"}} ");
        m.lines().find_map(|l| l.strip_prefix(line.as_str())?.parse::<u64>().ok())
    };
    eventually(|| live(&a1, "1/2") == Some(2) && live(&a1, "0/2") == Some(2), "n1 sees n2 and n3");
    let item = format!("/v1/tenants/{tb}/items/i1");
    let (s, named, _) = ask(&a1, "GET", &item, None);
    assert_eq!(s, 307);
    let (dead, other) = if named == Some(format!("http://{a2}{item}")) { (&mut n2, a3) } else { (&mut n3, a2) };
    assert_eq!(named, Some(format!("http://{}{item}", dead.addr)));
    dead.child.kill().unwrap();
    dead.child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let (s, location, _) = ask(&a1, "GET", &item, None);
        if s == 307 && location == Some(format!("http://{other}{item}")) {
            break;
        }
        assert!(Instant::now() < deadline, "n1 still redirects tb to {location:?} ({s})");
        std::thread::sleep(Duration::from_millis(250));
    }
    assert_eq!(live(&a1, "1/2"), Some(1));
    assert_eq!(follow(&a1, "GET", &format!("/v1/tenants/{tb}/items/i1"), None).0, 200);
}

/// Home redirects: with `--home-redirects true` a write of a tenant that
/// reaches a node other than the tenant's home is redirected there (307,
/// `other_home`, same path), for single upserts, batches and tombstones,
/// while reads are answered where they arrive; when the home dies, the
/// other node takes the tenant's writes once the registry lets the dead
/// node's entry expire.
#[test]
fn writes_go_to_the_tenant_home_and_move_when_it_dies() {
    let nats = NatsCluster::start(1).unwrap();
    let dirs: Vec<tempfile::TempDir> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let home = ["--home-redirects", "true", "--cluster-snapshot-secs", "0"];
    let mut nodes = vec![Some(node_with(dirs[0].path(), &nats, "n1", &home))];
    nodes.push(Some(node_with(dirs[1].path(), &nats, "n2", &home)));
    let addrs: Vec<String> = nodes.iter().map(|n| n.as_ref().unwrap().addr.clone()).collect();
    assert_eq!(call(&addrs[0], "POST", "/v1/tenants", Some(ADMIN), Some(json!({"tenant_id": "t"}))).0, 201);
    let put =
        |addr: &str, i: u64| ask(addr, "PUT", &format!("/v1/tenants/t/items/i{i}"), Some(json!({"content": text(i)})));
    // Once both nodes see both entries, exactly one of them redirects.
    let mut i = 0;
    let (home_at, other_at) = loop {
        i += 2;
        let (a, b) = (put(&addrs[0], i).0, put(&addrs[1], i + 1).0);
        match (a, b) {
            (307, 201) => break (1, 0),
            (201, 307) => break (0, 1),
            _ => {}
        }
        assert!(i < 2000, "no node redirected: {a} {b}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let (home, other) = (addrs[home_at].clone(), addrs[other_at].clone());
    // A single upsert, a batch and a tombstone: each redirected home.
    let path = "/v1/tenants/t/items/x1";
    let (s, location, v) = ask(&other, "PUT", path, Some(json!({"content": text(9001)})));
    assert_eq!((s, location.as_deref()), (307, Some(format!("http://{home}{path}").as_str())), "{v}");
    assert_eq!(v["error"]["code"], "other_home", "{v}");
    assert_eq!(follow(&other, "PUT", path, Some(json!({"content": text(9001)}))).0, 201);
    let batch = json!({"items": [{"item_id": "x2", "content": text(9002)}, {"item_id": "x3", "content": text(9003)}]});
    assert_eq!(ask(&other, "POST", "/v1/tenants/t/items", Some(batch.clone())).0, 307);
    let (s, v) = follow(&other, "POST", "/v1/tenants/t/items", Some(batch));
    assert_eq!(s, 200, "{v}");
    assert_eq!(ask(&other, "DELETE", "/v1/tenants/t/items/x3?epoch=1", None).0, 307);
    assert_eq!(follow(&other, "DELETE", "/v1/tenants/t/items/x3?epoch=1", None).0, 200);
    // Reads are served where they arrive.
    let lsn = v["results"][0]["lsn"].as_u64().unwrap();
    assert_eq!(ask(&other, "GET", &format!("/v1/tenants/t/items/x2?min_lsn={lsn}"), None).0, 200);
    assert_eq!(put(&home, 9004).0, 201);
    // The home dies: the other node takes the writes after the expiry.
    nodes[home_at] = None;
    let deadline = Instant::now() + neardup_cluster::registry::EXPIRY + Duration::from_secs(30);
    let mut i = 10_000;
    loop {
        i += 1;
        let (s, _, v) = put(&other, i);
        if s == 201 {
            break;
        }
        assert_eq!(s, 307, "{v}");
        assert!(Instant::now() < deadline, "the live node never took the tenant's writes");
        std::thread::sleep(Duration::from_millis(200));
    }
}
