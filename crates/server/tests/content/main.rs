//! Items by `content_uri` (issue 43) against a real SeaweedFS on loopback,
//! started by each test, and against a scripted HTTP server where a test
//! must see exactly which requests reach the network.

#[path = "../common/mod.rs"]
mod common;
mod fake;
mod seaweed;

use std::sync::Arc;

use axum::http::{Method, StatusCode};
use common::{Resp, ADMIN, H};
use neardup_index::{Engine, EngineOptions};
use neardup_server::{parse_content_stores, AppState, GatewayConfig, KeyStore};
use serde_json::{json, Value};

const A: &str = "the quick brown fox jumps over the lazy dog near the river bank at dawn today";
const B: &str = "the quick brown fox jumps over the lazy dog near the river bank at dusk today";

/// A service over `dir` whose content stores are `stores` (TOML).
fn service(dir: tempfile::TempDir, stores: &str) -> H {
    let content_stores = parse_content_stores(stores, &seaweed::env).unwrap();
    let cfg = GatewayConfig { content_stores, ..GatewayConfig::default() };
    let engine = Arc::new(Engine::open(dir.path(), EngineOptions::default()).unwrap());
    let keys = KeyStore::open(Some(dir.path().join("keys.json")), Some(ADMIN)).unwrap();
    H { state: AppState::new(engine, keys, cfg), dir }
}

/// The same service stopped and opened again on its data (a replay).
fn reopen(h: H, stores: &str) -> H {
    let H { state, dir } = h;
    drop(state);
    service(dir, stores)
}

async fn put_uri(h: &H, tenant: &str, key: &str, id: &str, uri: &str) -> Resp {
    h.call(Method::PUT, &format!("/v1/tenants/{tenant}/items/{id}"), Some(key), Some(json!({"content_uri": uri}))).await
}

async fn get_item(h: &H, tenant: &str, key: &str, id: &str) -> Resp {
    h.call(Method::GET, &format!("/v1/tenants/{tenant}/items/{id}"), Some(key), None).await
}

/// What a decision is, without the bookkeeping that differs between runs.
fn decision(v: &Value) -> Value {
    json!({"decision": v["decision"], "candidates": v["candidates"], "candidates_seen": v["candidates_seen"]})
}

/// Each item's record and its candidates now.
async fn decisions(h: &H, tenant: &str, key: &str) -> Vec<(Value, Value)> {
    let mut out = Vec::new();
    for i in 0..3 {
        let q = h.call(Method::GET, &format!("/v1/tenants/{tenant}/items/i{i}/candidates"), Some(key), None).await;
        out.push((get_item(h, tenant, key, &format!("i{i}")).await.json(), q.json()));
    }
    out
}

async fn metrics(h: &H) -> String {
    String::from_utf8(h.call(Method::GET, "/metrics", None, None).await.bytes).unwrap()
}

fn metric(text: &str, series: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse().ok()))
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
}

#[tokio::test]
async fn an_item_by_uri_is_decided_as_the_same_text_inline() {
    let Some(weed) = seaweed::Weed::start().await else { return };
    weed.put("docs", "corpus/a.txt", A.as_bytes(), "text/plain").await;
    weed.put("docs", "corpus/b.txt", B.as_bytes(), "text/plain; charset=utf-8").await;
    let stores = weed.store_toml("corpus", "docs", &["byuri", "inline"], "prefix = \"corpus/\"");
    let h = service(tempfile::tempdir().unwrap(), &stores);
    let (k1, k2) = (h.tenant("byuri", None).await, h.tenant("inline", None).await);
    let detail = h.call(Method::GET, "/v1/tenants/byuri", Some(&k1), None).await.json();
    assert_eq!(detail["content_stores"], json!(["corpus"]), "{detail}");

    let a1 = put_uri(&h, "byuri", &k1, "a", "s3://docs/corpus/a.txt").await;
    assert_eq!(a1.status, StatusCode::CREATED, "{}", String::from_utf8_lossy(&a1.bytes));
    let b1 = put_uri(&h, "byuri", &k1, "b", "s3://docs/corpus/b.txt").await;
    assert_eq!(b1.status, StatusCode::CREATED, "{}", String::from_utf8_lossy(&b1.bytes));
    h.put("inline", &k2, "a", A).await;
    let b2 = h.put("inline", &k2, "b", B).await;
    assert_eq!(decision(&b1.json()), decision(&b2.json()));
    assert_eq!(b1.json()["decision"], "near_duplicate", "{}", b1.json());

    // The item records the object it was read from; the text is the same.
    let (v1, v2) = (get_item(&h, "byuri", &k1, "b").await.json(), get_item(&h, "inline", &k2, "b").await.json());
    assert_eq!(v1["content_hash"], v2["content_hash"]);
    assert_eq!(v1["media_type"], "text/plain");
    let src = &v1["content_source"];
    assert_eq!(src["uri"], "s3://docs/corpus/b.txt");
    assert_eq!(src["store"], "corpus");
    assert_eq!(src["blake3"], blake3::hash(B.as_bytes()).to_hex().to_string());
    assert!(src["etag"].as_str().is_some_and(|e| !e.is_empty()), "{src}");
    assert!(v2["content_source"].is_null());

    // A batch reads its items by URI too, each answered in order.
    weed.put("docs", "corpus/c.txt", A.as_bytes(), "text/plain").await;
    let batch = json!({"items": [
        {"item_id": "c", "content_uri": "s3://docs/corpus/c.txt"},
        {"item_id": "d", "content": B},
    ]});
    let r = h.call(Method::POST, "/v1/tenants/byuri/items", Some(&k1), Some(batch)).await;
    let results = r.json()["results"].clone();
    assert_eq!(results[0]["decision"], "duplicate", "{results}");
    assert_eq!(results[1]["decision"], "duplicate", "{results}");

    // Exactly one of content and content_uri; no forged provenance.
    for body in [
        json!({"content": A, "content_uri": "s3://docs/corpus/a.txt"}),
        json!({}),
        json!({"content": A, "media_type": "text/plain; content-source=\"s3://docs/corpus/a.txt\""}),
    ] {
        let r = h.call(Method::PUT, "/v1/tenants/byuri/items/x", Some(&k1), Some(body)).await;
        assert_eq!((r.status, r.code().as_str()), (StatusCode::BAD_REQUEST, "invalid_request"));
    }

    // Each read is an audit event naming the key, item, object and purpose.
    let audit = h.call(Method::GET, "/v1/tenants/byuri/audit", Some(ADMIN), None).await.json();
    let reads: Vec<&Value> =
        audit["events"].as_array().unwrap().iter().filter(|e| e["action"] == "content_read").collect();
    assert_eq!(reads.len(), 3, "{audit}");
    let b_read = reads.iter().find(|e| e["item_id"] == "b").unwrap();
    assert_eq!(b_read["object"], "s3://docs/corpus/b.txt");
    assert_eq!(b_read["purpose"], "ingest");
    assert!(b_read["actor"].as_str().unwrap().starts_with("key:"), "{b_read}");
    assert!(b_read["at_ms"].as_u64().unwrap() > 0);

    let m = metrics(&h).await;
    assert_eq!(metric(&m, "neardup_content_reads_total{store=\"corpus\"}"), 3);
    assert_eq!(metric(&m, "neardup_content_read_bytes_total{store=\"corpus\"}"), (2 * A.len() + B.len()) as u64);
}

#[tokio::test]
async fn limits_and_types_are_checked_before_the_body_is_read() {
    let Some(weed) = seaweed::Weed::start().await else { return };
    weed.put("docs", "big.txt", &[b'a'; 4096], "text/plain").await;
    weed.put("docs", "mid.txt", "word ".repeat(100).as_bytes(), "text/plain").await;
    weed.put("docs", "doc.pdf", b"%PDF-1.7 not text", "application/pdf").await;
    weed.put("docs", "bin.txt", &[0xff, 0xfe, 0x00, 0x80], "text/plain").await;
    let stores = weed.store_toml("corpus", "docs", &["t", "small"], "max_object_bytes = 1024");
    let h = service(tempfile::tempdir().unwrap(), &stores);
    let key = h.tenant("t", None).await;
    let small = h.tenant("small", Some(r#"{"normalizer":"seed","limits":{"max_item_bytes":100}}"#)).await;

    let cases = [
        ("t", &key, "s3://docs/big.txt", StatusCode::PAYLOAD_TOO_LARGE, "content_too_large"),
        ("small", &small, "s3://docs/mid.txt", StatusCode::PAYLOAD_TOO_LARGE, "content_too_large"),
        ("t", &key, "s3://docs/doc.pdf", StatusCode::UNSUPPORTED_MEDIA_TYPE, "content_type_not_allowed"),
        ("t", &key, "s3://docs/missing.txt", StatusCode::UNPROCESSABLE_ENTITY, "content_not_found"),
    ];
    for (tenant, key, uri, status, code) in cases {
        let r = put_uri(&h, tenant, key, "x", uri).await;
        assert_eq!((r.status, r.code().as_str()), (status, code), "{uri}: {}", String::from_utf8_lossy(&r.bytes));
    }
    // Not one byte of a body was received for any of them: each stopped at its HEAD.
    let m = metrics(&h).await;
    assert_eq!(metric(&m, "neardup_content_read_bytes_total{store=\"corpus\"}"), 0, "{m}");
    assert_eq!(metric(&m, "neardup_content_read_failures_total{store=\"corpus\",cause=\"too_large\"}"), 2);

    let r = put_uri(&h, "t", &key, "x", "s3://docs/bin.txt").await;
    assert_eq!((r.status, r.code().as_str()), (StatusCode::UNPROCESSABLE_ENTITY, "content_not_text"));
    for tenant in ["t", "small"] {
        let k = if tenant == "t" { &key } else { &small };
        assert_eq!(get_item(&h, tenant, k, "x").await.status, StatusCode::NOT_FOUND, "nothing was written");
    }
}

/// A 2 GiB object: its HEAD is the only request, answered 413.
#[tokio::test]
async fn a_huge_object_is_refused_at_its_head() {
    let s3 = fake::Server::start(|method, _| match method {
        "HEAD" => fake::object_head(2 << 30, "text/plain"),
        _ => "HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\n\r\n".into(),
    });
    let stores = seaweed::store_toml("fake", &s3.endpoint(), "docs", &["t"], "max_object_bytes = 1073741824");
    let h = service(tempfile::tempdir().unwrap(), &stores);
    let key = h.tenant("t", Some(r#"{"normalizer":"seed","limits":{"max_item_bytes":1073741824}}"#)).await;
    let r = put_uri(&h, "t", &key, "huge", "s3://docs/huge.txt").await;
    assert_eq!((r.status, r.code().as_str()), (StatusCode::PAYLOAD_TOO_LARGE, "content_too_large"));
    assert_eq!(s3.requests(), vec!["HEAD /docs/huge.txt".to_string()]);
}

/// Another scheme, host, bucket or prefix, a link-local or loopback URL,
/// a key that climbs out, a store of another tenant, a redirect: a 4xx
/// (or the store's 503 for the redirect) and no request anywhere else.
#[tokio::test]
async fn uris_outside_the_tenants_stores_reach_no_network() {
    let canary = fake::Server::start(|_, _| "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".into());
    let redirect_to = format!("{}/docs/allowed/elsewhere.txt", canary.endpoint());
    let s3 = fake::Server::start(move |_, path| {
        if path.ends_with("redirect.txt") {
            format!("HTTP/1.1 307 Temporary Redirect\r\nlocation: {redirect_to}\r\ncontent-length: 0\r\n\r\n")
        } else {
            "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n".into()
        }
    });
    let stores = format!(
        "{}{}",
        seaweed::store_toml("mine", &s3.endpoint(), "docs", &["t"], "prefix = \"allowed/\""),
        seaweed::store_toml("theirs", &canary.endpoint(), "private", &["other"], "")
    );
    let h = service(tempfile::tempdir().unwrap(), &stores);
    let key = h.tenant("t", None).await;
    let c = canary.endpoint();
    let cases = [
        (format!("{c}/docs/allowed/a.txt"), StatusCode::BAD_REQUEST),
        ("http://169.254.169.254/latest/meta-data/iam/".to_string(), StatusCode::BAD_REQUEST),
        ("https://docs.s3.amazonaws.com/allowed/a.txt".to_string(), StatusCode::BAD_REQUEST),
        ("file:///etc/passwd".to_string(), StatusCode::BAD_REQUEST),
        (format!("s3://{}/a.txt", c.trim_start_matches("http://")), StatusCode::BAD_REQUEST),
        ("s3://169.254.169.254/latest".to_string(), StatusCode::FORBIDDEN),
        ("s3://docs/allowed/../secret.txt".to_string(), StatusCode::BAD_REQUEST),
        ("s3://docs/secret.txt".to_string(), StatusCode::FORBIDDEN),
        ("s3://other-bucket/allowed/a.txt".to_string(), StatusCode::FORBIDDEN),
        ("s3://private/a.txt".to_string(), StatusCode::FORBIDDEN),
    ];
    for (uri, status) in &cases {
        let r = put_uri(&h, "t", &key, "x", uri).await;
        assert_eq!(r.status, *status, "{uri}: {}", String::from_utf8_lossy(&r.bytes));
        assert!(r.code().contains("content_uri"), "{uri}: {}", r.code());
    }
    assert_eq!(s3.requests(), Vec::<String>::new(), "no request reached the tenant's store");
    // A redirect from the store is not followed.
    let r = put_uri(&h, "t", &key, "x", "s3://docs/allowed/redirect.txt").await;
    assert!(r.status.is_client_error() || r.status.is_server_error(), "{:?}", r.status);
    assert_eq!(s3.requests().len(), 1, "{:?}", s3.requests());
    assert_eq!(canary.requests(), Vec::<String>::new(), "nothing reached anywhere else");
    assert_eq!(get_item(&h, "t", &key, "x").await.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_store_outage_answers_503_writes_nothing_and_a_retry_succeeds() {
    let Some(mut weed) = seaweed::Weed::start().await else { return };
    weed.put("docs", "a.txt", A.as_bytes(), "text/plain").await;
    weed.put("docs", "b.txt", B.as_bytes(), "text/plain").await;
    let stores = weed.store_toml("corpus", "docs", &["t"], "");
    let h = service(tempfile::tempdir().unwrap(), &stores);
    let key = h.tenant("t", None).await;
    let batch = json!({"items": [
        {"item_id": "inline", "content": "an unrelated text about the weather in the mountains this week"},
        {"item_id": "a", "content_uri": "s3://docs/a.txt", "idempotency_key": "a-1"},
        {"item_id": "b", "content_uri": "s3://docs/b.txt", "idempotency_key": "b-1"},
    ]});

    weed.stop();
    let r = h.call(Method::POST, "/v1/tenants/t/items", Some(&key), Some(batch.clone())).await;
    assert_eq!(r.status, StatusCode::OK);
    let results = r.json()["results"].clone();
    assert_eq!(results[0]["status"], "inserted", "{results}");
    for i in [1, 2] {
        assert_eq!(results[i]["error"]["code"], "content_store_unavailable", "{results}");
    }
    let one = put_uri(&h, "t", &key, "a", "s3://docs/a.txt").await;
    assert_eq!((one.status, one.code().as_str()), (StatusCode::SERVICE_UNAVAILABLE, "content_store_unavailable"));
    assert_eq!(one.headers["retry-after"], "1");
    for id in ["a", "b"] {
        assert_eq!(get_item(&h, "t", &key, id).await.status, StatusCode::NOT_FOUND, "{id} half-written");
    }
    let stats = h.call(Method::GET, "/v1/tenants/t", Some(&key), None).await.json();
    assert_eq!(stats["stats"]["live_items"], 1, "{stats}");
    let m = metrics(&h).await;
    assert!(metric(&m, "neardup_content_read_failures_total{store=\"corpus\",cause=\"unavailable\"}") >= 3, "{m}");

    weed.restart().await;
    let r = h.call(Method::POST, "/v1/tenants/t/items", Some(&key), Some(batch)).await;
    let results = r.json()["results"].clone();
    assert_eq!(results[0]["status"], "unchanged", "{results}");
    assert_eq!(results[1]["status"], "inserted", "{results}");
    assert_eq!(results[2]["decision"], "near_duplicate", "{results}");
}

/// The store dies in the middle of a batch's reads (a proxy kills it as
/// the HEAD of the ninth object passes): the items it had served are
/// written, every other answers 503 and is not written at all, and the
/// same batch sent again writes the rest.
#[tokio::test]
async fn a_store_stopped_mid_batch_fails_only_the_items_it_had_not_served() {
    let Some(mut weed) = seaweed::Weed::start().await else { return };
    let text = |i: usize| format!("document {i} on topic {i}: words alpha{i} beta{i} gamma{i} delta{i} epsilon{i}");
    for i in 0..16 {
        weed.put("docs", &format!("m{i:02}.txt"), text(i).as_bytes(), "text/plain").await;
    }
    let proxy = fake::tripwire(weed.s3_port(), "/docs/m08.txt", weed.killer());
    let stores = seaweed::store_toml("corpus", &proxy, "docs", &["t"], "");
    let h = service(tempfile::tempdir().unwrap(), &stores);
    let key = h.tenant("t", None).await;
    let items: Vec<Value> = (0..16)
        .map(|i| json!({"item_id": format!("m{i:02}"), "content_uri": format!("s3://docs/m{i:02}.txt"), "idempotency_key": format!("k{i}")}))
        .collect();
    let batch = json!({ "items": items });
    let r = h.call(Method::POST, "/v1/tenants/t/items", Some(&key), Some(batch.clone())).await;
    assert_eq!(r.status, StatusCode::OK);
    let results = r.json()["results"].as_array().unwrap().clone();
    let mut written = 0;
    for (i, res) in results.iter().enumerate() {
        let got = get_item(&h, "t", &key, &format!("m{i:02}")).await;
        if res["status"] == "inserted" {
            written += 1;
            let blake3 = blake3::hash(text(i).as_bytes()).to_hex().to_string();
            assert_eq!(got.json()["content_source"]["blake3"], blake3.as_str(), "m{i:02} written whole");
        } else {
            assert_eq!(res["error"]["code"], "content_store_unavailable", "m{i:02}: {res}");
            assert_eq!(got.status, StatusCode::NOT_FOUND, "m{i:02} failed, yet was written");
        }
    }
    // Reads run eight at a time in order, so the ninth starts only once the
    // first has been read: some were served, the ninth was not.
    assert!(written >= 1, "{results:?}");
    assert_eq!(results[8]["error"]["code"], "content_store_unavailable", "{results:?}");
    let stats = h.call(Method::GET, "/v1/tenants/t", Some(&key), None).await.json();
    assert_eq!(stats["stats"]["live_items"], written, "{stats}");

    weed.restart().await;
    let r = h.call(Method::POST, "/v1/tenants/t/items", Some(&key), Some(batch)).await;
    for (i, res) in r.json()["results"].as_array().unwrap().iter().enumerate() {
        let want = if results[i]["status"] == "inserted" { "replayed" } else { "inserted" };
        assert_eq!(res["status"], want, "m{i:02}: {res}");
    }
    let stats = h.call(Method::GET, "/v1/tenants/t", Some(&key), None).await.json();
    assert_eq!(stats["stats"]["live_items"], 16, "{stats}");
}

/// The command log holds what was read, so neither a replay (a restart)
/// nor a rebuild reads an object again: overwriting every object after
/// ingest changes no decision.
#[tokio::test]
async fn replay_and_rebuild_decide_as_before_after_objects_change() {
    let Some(weed) = seaweed::Weed::start().await else { return };
    let texts = [A, B, "a completely different text about cooking pasta with garlic and olive oil"];
    for (i, t) in texts.iter().enumerate() {
        weed.put("docs", &format!("{i}.txt"), t.as_bytes(), "text/plain").await;
    }
    let stores = weed.store_toml("corpus", "docs", &["t", "lean"], "");
    let h = service(tempfile::tempdir().unwrap(), &stores);
    let key = h.tenant("t", None).await;
    let lean = h
        .tenant("lean", Some(r#"{"normalizer":"seed","shingle_width":2,"threshold":0.75,"retain_content":false}"#))
        .await;
    for (tenant, k) in [("t", &key), ("lean", &lean)] {
        for i in 0..texts.len() {
            let r = put_uri(&h, tenant, k, &format!("i{i}"), &format!("s3://docs/{i}.txt")).await;
            assert!(r.status.is_success(), "{}", String::from_utf8_lossy(&r.bytes));
        }
    }
    let before = (decisions(&h, "t", &key).await, decisions(&h, "lean", &lean).await);
    for i in 0..texts.len() {
        weed.put("docs", &format!("{i}.txt"), format!("changed {i}").as_bytes(), "text/plain").await;
    }
    let h = reopen(h, &stores);
    assert_eq!(before, (decisions(&h, "t", &key).await, decisions(&h, "lean", &lean).await));
    // A rebuild under another policy reads nothing either: same items, same sources.
    for (tenant, k) in [("t", &key), ("lean", &lean)] {
        let r = h
            .call(
                Method::POST,
                &format!("/v1/tenants/{tenant}/rebuild"),
                Some(k),
                Some(json!({"config": {"policy": {"version": 2}}})),
            )
            .await;
        assert!(r.status.is_success(), "{tenant}: {}", String::from_utf8_lossy(&r.bytes));
    }
    let after = (decisions(&h, "t", &key).await, decisions(&h, "lean", &lean).await);
    let strip = |v: &Vec<(Value, Value)>| -> Vec<(Value, Value)> {
        v.iter()
            .map(|(item, q)| (item.clone(), json!({"candidates": q["candidates"], "decision": q["decision"]})))
            .collect()
    };
    assert_eq!(strip(&before.0), strip(&after.0));
    assert_eq!(strip(&before.1), strip(&after.1));
    let m = metrics(&h).await;
    assert!(!m.contains("neardup_content_reads_total{store=\"corpus\"} 1"), "the reopened service read nothing");
    assert_eq!(metric(&m, "neardup_content_reads_total{store=\"corpus\"}"), 0);
}

/// `retain_content: false`: no raw text in the item store, the log or a
/// snapshot; the same decisions; a reviewer sees the text read again
/// through the resolver (audited), or why not once the object changed.
#[tokio::test]
async fn without_retained_content_no_raw_text_is_kept_and_review_reads_again() {
    let Some(weed) = seaweed::Weed::start().await else { return };
    let marker = "zanzibarquokka";
    let left = format!("{A} {marker} one");
    let right = format!("{A} {marker} two");
    weed.put("docs", "l.txt", left.as_bytes(), "text/plain").await;
    weed.put("docs", "r.txt", right.as_bytes(), "text/plain").await;
    let stores = weed.store_toml("corpus", "docs", &["lean", "full"], "");
    let h = service(tempfile::tempdir().unwrap(), &stores);
    let lean_cfg = r#"{"normalizer":"seed","shingle_width":2,"threshold":0.75,"retain_content":false}"#;
    let (lean, full) = (h.tenant("lean", Some(lean_cfg)).await, h.tenant("full", None).await);
    let mut answers = Vec::new();
    for (tenant, k) in [("lean", &lean), ("full", &full)] {
        put_uri(&h, tenant, k, "l", "s3://docs/l.txt").await;
        answers.push(decision(&put_uri(&h, tenant, k, "r", "s3://docs/r.txt").await.json()));
    }
    assert_eq!(answers[0], answers[1], "decisions do not depend on retention");
    // Compare: the lean tenant's texts come from the store again.
    let cmp =
        h.call(Method::POST, "/v1/tenants/lean/compare", Some(&lean), Some(json!({"left": "l", "right": "r"}))).await;
    let v = cmp.json();
    let text = |side: &Value| {
        side["segments"].as_array().map(|r| r.iter().map(|s| s["text"].as_str().unwrap()).collect::<String>())
    };
    assert_eq!(text(&v["left"]).as_deref(), Some(left.as_str()), "{v}");
    assert!(v["left"]["segments"].as_array().unwrap().iter().any(|s| s["shared"] == true), "{v}");
    assert!(v["left"]["content_note"].as_str().unwrap().contains("read again"), "{v}");
    let audit = h.call(Method::GET, "/v1/tenants/lean/audit", Some(ADMIN), None).await.json();
    let purposes: Vec<&str> = audit["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "content_read")
        .map(|e| e["purpose"].as_str().unwrap())
        .collect();
    assert_eq!(purposes.iter().filter(|p| **p == "review").count(), 2, "{audit}");
    assert_eq!(purposes.iter().filter(|p| **p == "ingest").count(), 2, "{audit}");

    // Changed since ingest: not shown, and the answer says why.
    weed.put("docs", "r.txt", b"something else entirely", "text/plain").await;
    let v = h
        .call(Method::POST, "/v1/tenants/lean/compare", Some(&lean), Some(json!({"left": "l", "right": "r"})))
        .await
        .json();
    assert!(v["right"]["segments"].is_null(), "{v}");
    assert!(v["right"]["content_note"].as_str().unwrap().contains("changed"), "{v}");

    // The bytes: a data directory holding the lean tenant alone, and its
    // snapshot as downloaded, hold neither the marker nor any phrase.
    let only = service(tempfile::tempdir().unwrap(), &stores);
    let k = only.tenant("lean", Some(lean_cfg)).await;
    weed.put("docs", "r.txt", right.as_bytes(), "text/plain").await;
    for id in ["l", "r"] {
        assert!(put_uri(&only, "lean", &k, id, &format!("s3://docs/{id}.txt")).await.status.is_success());
    }
    let snap = only.call(Method::GET, "/v1/tenants/lean/snapshot", Some(&k), None).await;
    assert!(snap.status.is_success() && snap.bytes.len() > 64, "{:?}", snap.status);
    let mut files = seaweed::all_bytes(only.dir.path());
    files.push(("snapshot download".into(), snap.bytes));
    for (path, bytes) in &files {
        for phrase in [marker, "quick brown", "river bank"] {
            assert!(!contains(bytes, phrase.as_bytes()), "{} holds raw text ({phrase:?})", path.display());
        }
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}
