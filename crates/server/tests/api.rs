//! Every route through `app(state).oneshot(...)`: the seed demonstration,
//! idempotency, lifecycle, review, operations, and one test per error code.

mod common;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use common::{Resp, ADMIN, H};
use neardup_index::EngineOptions;
use neardup_server::{AppState, GatewayConfig, KeyStore, QuotaConfig};
use serde_json::json;

#[tokio::test]
async fn seed_demonstration() {
    let h = H::new();
    let key = h.tenant("t1", None).await;
    let a = h.put("t1", &key, "A", "red fox runs very fast").await;
    assert_eq!(a.status, StatusCode::CREATED);
    assert_eq!(a.json()["decision"], "distinct");
    assert_eq!(a.json()["candidates"], json!([]));
    let b = h.put("t1", &key, "B", "red fox runs very fast today").await;
    assert_eq!(b.status, StatusCode::CREATED);
    let v = b.json();
    assert_eq!(v["candidates"][0]["item_id"], "A");
    assert_eq!(v["candidates"][0]["score"], 0.8);
    assert_eq!(v["decision"], "near_duplicate", "{v}");
    assert_eq!(v["status"], "inserted");
    let c = h.put("t1", &key, "C", "database backup completed nightly").await;
    assert_eq!(c.json()["decision"], "distinct");
    assert_eq!(c.json()["candidates"], json!([]));

    let got = h.call(Method::GET, "/v1/tenants/t1/items/A", Some(&key), None).await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.json()["epoch"], 1);
    let cands = h.call(Method::GET, "/v1/tenants/t1/items/B/candidates?limit=5", Some(&key), None).await;
    assert_eq!(cands.json()["candidates"][0]["item_id"], "A");

    let del = h.call(Method::DELETE, "/v1/tenants/t1/items/A?epoch=1", Some(&key), None).await;
    assert_eq!(del.status, StatusCode::OK, "{}", String::from_utf8_lossy(&del.bytes));
    let gone = h.call(Method::GET, "/v1/tenants/t1/items/A", Some(&key), None).await;
    assert_eq!((gone.status, gone.code().as_str()), (StatusCode::NOT_FOUND, "item_not_found"));
    let cands = h.call(Method::GET, "/v1/tenants/t1/items/B/candidates", Some(&key), None).await;
    assert_eq!(cands.json()["candidates"], json!([]), "a tombstoned item is no candidate");
    let unknown = h.call(Method::GET, "/v1/tenants/t1/items/nope", Some(&key), None).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn idempotent_replay_returns_the_first_answer() {
    let h = H::new();
    let key = h.tenant("t1", None).await;
    h.put("t1", &key, "A", "red fox runs very fast").await;
    let body = json!({"content": "red fox runs very fast today", "idempotency_key": "k-1"});
    let first = h.call(Method::PUT, "/v1/tenants/t1/items/B", Some(&key), Some(body.clone())).await;
    assert_eq!(first.status, StatusCode::CREATED);
    let again = h.call(Method::PUT, "/v1/tenants/t1/items/B", Some(&key), Some(body)).await;
    assert_eq!(again.status, StatusCode::OK);
    let (f, a) = (first.json(), again.json());
    assert_eq!(a["status"], "replayed");
    assert_eq!(a["candidates"], f["candidates"]);
    assert_eq!(a["lsn"], f["lsn"]);
    let other = json!({"content": "something else", "idempotency_key": "k-1"});
    let conflict = h.call(Method::PUT, "/v1/tenants/t1/items/B", Some(&key), Some(other)).await;
    assert_eq!((conflict.status, conflict.code().as_str()), (StatusCode::CONFLICT, "idempotency_conflict"));
    // Same content, no key: unchanged, nothing written.
    let same = h.put("t1", &key, "A", "red fox runs very fast").await;
    assert_eq!((same.status, same.json()["status"].as_str()), (StatusCode::OK, Some("unchanged")));
    // A higher epoch replaces.
    let body = json!({"content": "a new text entirely", "epoch": 2});
    let rep = h.call(Method::PUT, "/v1/tenants/t1/items/A", Some(&key), Some(body)).await;
    assert_eq!((rep.status, rep.json()["status"].as_str()), (StatusCode::OK, Some("replaced")));
}

#[tokio::test]
async fn query_routes() {
    let h = H::new();
    let key = h.tenant("t1", None).await;
    h.put("t1", &key, "A", "red fox runs very fast").await;
    h.put("t1", &key, "C", "database backup completed nightly").await;
    let d = h
        .call(
            Method::POST,
            "/v1/tenants/t1/decide",
            Some(&key),
            Some(json!({"content": "red fox runs very fast today"})),
        )
        .await;
    assert_eq!(d.status, StatusCode::OK);
    assert_eq!(d.json()["decision"], "near_duplicate");
    let items = h.call(Method::GET, "/v1/tenants/t1/items", Some(&key), None).await.json();
    assert_eq!(items["items"].as_array().unwrap().len(), 2, "decide wrote nothing");
    let c = h
        .call(
            Method::POST,
            "/v1/tenants/t1/candidates",
            Some(&key),
            Some(json!({"content": "red fox runs very fast", "limit": 1})),
        )
        .await
        .json();
    assert_eq!(c["decision"], "duplicate");
    assert_eq!(c["candidates"][0]["score"], 1.0);
    let v = h.call(Method::POST, "/v1/tenants/t1/verify", Some(&key), Some(json!({"left": "A", "right": "C"}))).await;
    assert_eq!(v.status, StatusCode::OK);
    assert_eq!(v.json()["verdict"], "different");
    let page = h.call(Method::GET, "/v1/tenants/t1/items?limit=1", Some(&key), None).await.json();
    assert_eq!(page["next_after"], "A");
    let page = h.call(Method::GET, "/v1/tenants/t1/items?limit=1&after=A", Some(&key), None).await.json();
    assert_eq!(page["items"][0]["item_id"], "C");
    let batch = json!({"items": [
        {"item_id": "B", "content": "red fox runs very fast today"},
        {"item_id": "C", "content": "a different text for C"},
    ]});
    let b = h.call(Method::POST, "/v1/tenants/t1/items", Some(&key), Some(batch)).await;
    assert_eq!(b.status, StatusCode::OK);
    let r = b.json();
    assert_eq!(r["results"][0]["candidates"][0]["item_id"], "A");
    assert_eq!(r["results"][1]["error"]["code"], "item_exists");
    let detail = h.call(Method::GET, "/v1/tenants/t1", Some(&key), None).await.json();
    assert_eq!(detail["config"]["normalizer"], "seed-v1");
    assert_eq!(detail["config"]["policy"]["threshold_similar"], 0.75);
    assert_eq!(detail["stats"]["live_items"], 3);
    let log = h.call(Method::GET, "/v1/tenants/t1/decisions?limit=2", Some(&key), None).await.json();
    assert_eq!(log["decisions"].as_array().unwrap().len(), 2);
    assert_eq!(log["decisions"][0]["best_candidate"], "A");
}

#[tokio::test]
async fn lifecycle_routes() {
    let h = H::new();
    let key = h.tenant("t1", None).await;
    h.put("t1", &key, "A", "red fox runs very fast").await;
    h.put("t1", &key, "B", "red fox runs very fast today").await;
    // Snapshot, then change state, then restore: the change is undone.
    let snap = h.call(Method::GET, "/v1/tenants/t1/snapshot", Some(&key), None).await;
    assert_eq!(snap.status, StatusCode::OK);
    assert_eq!(snap.headers["content-type"], "application/octet-stream");
    assert_eq!(&snap.bytes[..8], b"NDUPSNAP");
    h.put("t1", &key, "C", "database backup completed nightly").await;
    let req = Request::put("/v1/tenants/t1/snapshot")
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", "application/octet-stream")
        .body(Body::from(snap.bytes.clone()))
        .unwrap();
    let r = h.send(req).await;
    assert_eq!(r.status, StatusCode::OK, "{}", String::from_utf8_lossy(&r.bytes));
    assert_eq!(r.json()["items"], 2);
    let c = h.call(Method::GET, "/v1/tenants/t1/items/C", Some(&key), None).await;
    assert_eq!(c.status, StatusCode::NOT_FOUND);

    // Shadow with a higher threshold: it disagrees on B's decision.
    let s =
        h.call(Method::POST, "/v1/tenants/t1/shadow", Some(&key), Some(json!({"config": {"threshold": 0.9}}))).await;
    assert_eq!(s.status, StatusCode::OK, "{}", String::from_utf8_lossy(&s.bytes));
    h.call(Method::POST, "/v1/tenants/t1/decide", Some(&key), Some(json!({"content": "red fox runs very fast today"})))
        .await;
    let rep = h.call(Method::GET, "/v1/tenants/t1/shadow", Some(&key), None).await.json();
    assert_eq!(rep["queries"], 1);
    assert_eq!(rep["match_set_disagreements"], 1, "{rep}");
    assert_eq!(rep["live_only_matches"], 1, "{rep}");
    let metrics = String::from_utf8(h.call(Method::GET, "/metrics", None, None).await.bytes).unwrap();
    assert!(metrics.contains("neardup_shadow_queries{tenant=\"t1\"} 1"), "{metrics}");
    let p = h.call(Method::POST, "/v1/tenants/t1/shadow/promote", Some(&key), None).await;
    assert_eq!(p.status, StatusCode::OK);
    let cfg = h.call(Method::GET, "/v1/tenants/t1", Some(&key), None).await.json();
    assert_eq!(cfg["config"]["threshold"], 0.9);
    let rb = h.call(Method::POST, "/v1/tenants/t1/rollback", Some(&key), None).await;
    assert_eq!(rb.status, StatusCode::OK);
    let cfg = h.call(Method::GET, "/v1/tenants/t1", Some(&key), None).await.json();
    assert_eq!(cfg["config"]["threshold"], 0.75);
    let s = h.call(Method::POST, "/v1/tenants/t1/shadow", Some(&key), Some(json!({}))).await;
    assert_eq!(s.status, StatusCode::OK);
    let d = h.call(Method::DELETE, "/v1/tenants/t1/shadow", Some(&key), None).await;
    assert_eq!(d.status, StatusCode::OK);
    let rebuild = json!({"config": {"shingle_width": 1}});
    let r = h.call(Method::POST, "/v1/tenants/t1/rebuild", Some(&key), Some(rebuild)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", String::from_utf8_lossy(&r.bytes));
    h.call(Method::DELETE, "/v1/tenants/t1/items/B", Some(&key), None).await;
    let c = h.call(Method::POST, "/v1/tenants/t1/compact", Some(&key), None).await;
    assert_eq!(c.status, StatusCode::OK);
    let audit = h.call(Method::GET, "/v1/tenants/t1/audit", Some(&key), None).await.json();
    let actions: Vec<_> = audit["events"].as_array().unwrap().iter().map(|e| e["action"].clone()).collect();
    for a in ["compact", "rebuild", "rollback", "shadow_promote", "restore", "snapshot_download", "create_tenant"] {
        assert!(actions.contains(&json!(a)), "{a} missing from {actions:?}");
    }
}

#[tokio::test]
async fn review_and_keys() {
    let h = H::new();
    let key = h.tenant("t1", None).await;
    let l = json!({"left": "A", "right": "B", "label": "near_duplicate", "rationale": "same sentence", "actor": "ann"});
    let r = h.call(Method::POST, "/v1/tenants/t1/labels", Some(&key), Some(l)).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", String::from_utf8_lossy(&r.bytes));
    assert!(r.json()["actor"].as_str().unwrap().starts_with("ann (key:"));
    let all = h.call(Method::GET, "/v1/tenants/t1/labels", Some(&key), None).await.json();
    assert_eq!(all["labels"][0]["label"], "near_duplicate");

    let minted = h.call(Method::POST, "/v1/tenants/t1/keys", Some(&key), Some(json!({"scopes": ["query"]}))).await;
    assert_eq!(minted.status, StatusCode::CREATED);
    let m = minted.json();
    let reader = m["api_key"].as_str().unwrap().to_string();
    let listed = h.call(Method::GET, "/v1/tenants/t1/keys", Some(&key), None).await;
    assert!(!String::from_utf8_lossy(&listed.bytes).contains(reader.rsplit('_').next().unwrap()));
    assert_eq!(listed.json()["keys"].as_array().unwrap().len(), 2);
    let ok = h.call(Method::GET, "/v1/tenants/t1/items", Some(&reader), None).await;
    assert_eq!(ok.status, StatusCode::OK);
    let forbidden = h.put("t1", &reader, "X", "text").await;
    assert_eq!((forbidden.status, forbidden.code().as_str()), (StatusCode::FORBIDDEN, "forbidden"));
    let path = format!("/v1/tenants/t1/keys/{}", m["key_id"].as_str().unwrap());
    assert_eq!(h.call(Method::DELETE, &path, Some(&key), None).await.status, StatusCode::NO_CONTENT);
    let revoked = h.call(Method::GET, "/v1/tenants/t1/items", Some(&reader), None).await;
    assert_eq!(revoked.status, StatusCode::UNAUTHORIZED);
    // Tenant keys cannot create tenants.
    let r = h.call(Method::POST, "/v1/tenants", Some(&key), Some(json!({"tenant_id": "t2"}))).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let list = h.call(Method::GET, "/v1/tenants", Some(ADMIN), None).await.json();
    assert_eq!(list["tenants"], json!(["t1"]));
}

#[tokio::test]
async fn ops_routes_need_no_auth() {
    let h = H::new();
    let key = h.tenant("t1", None).await;
    h.put("t1", &key, "A", "red fox runs very fast").await;
    h.put("t1", &key, "B", "red fox runs very fast today").await;
    assert_eq!(h.call(Method::GET, "/healthz", None, None).await.json()["status"], "ok");
    assert_eq!(h.call(Method::GET, "/readyz", None, None).await.status, StatusCode::OK);
    let m = h.call(Method::GET, "/metrics", None, None).await;
    assert!(m.headers["content-type"].to_str().unwrap().starts_with("text/plain"));
    let text = String::from_utf8(m.bytes).unwrap();
    for want in [
        "neardup_items{tenant=\"t1\"} 2",
        "neardup_ingest_seconds_count{tenant=\"t1\"} 2",
        "neardup_verification_score_bucket{tenant=\"t1\",le=\"0.8\"} 1",
        "neardup_candidates_per_query_count{tenant=\"t1\"} 2",
        "neardup_cap_rejections_total{tenant=\"t1\"} 0",
        "neardup_snapshot_age_seconds{tenant=\"t1\"}",
        "neardup_decisions_total{tenant=\"t1\",state=\"near_duplicate\"} 1",
    ] {
        assert!(text.contains(want), "{want} missing:\n{text}");
    }
    let doc = h.call(Method::GET, "/openapi.json", None, None).await.json();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    for path in ["/v1/tenants", "/v1/tenants/{tenant}/items/{item_id}", "/v1/tenants/{tenant}/snapshot", "/healthz"] {
        assert!(doc["paths"][path].is_object(), "{path}");
    }
    h.state.set_ready(false);
    let r = h.call(Method::GET, "/readyz", None, None).await;
    assert_eq!((r.status, r.code().as_str()), (StatusCode::SERVICE_UNAVAILABLE, "unavailable"));
}

fn assert_error(r: &Resp, status: StatusCode, code: &str) {
    assert_eq!(r.status, status, "{}", String::from_utf8_lossy(&r.bytes));
    let v = r.json();
    assert_eq!(v["error"]["code"], code, "{v}");
    assert!(v["error"]["message"].is_string());
}

#[tokio::test]
async fn every_gateway_error_code() {
    let h = H::with(GatewayConfig { max_body_bytes: 2048, ..GatewayConfig::default() }, EngineOptions::default());
    let key = h.tenant("t1", None).await;
    let r = h.call(Method::GET, "/v1/tenants/t1/items", None, None).await;
    assert_error(&r, StatusCode::UNAUTHORIZED, "unauthenticated");
    assert_eq!(r.headers["www-authenticate"], "Bearer");
    let r = h.call(Method::GET, "/v1/tenants/t1/items", Some("ndk_00_00"), None).await;
    assert_error(&r, StatusCode::UNAUTHORIZED, "unauthenticated");
    let r = h.call(Method::GET, "/v1/tenants/zz/items", Some(ADMIN), None).await;
    assert_error(&r, StatusCode::NOT_FOUND, "tenant_not_found");
    let r = h.call(Method::GET, "/v2/nothing", None, None).await;
    assert_error(&r, StatusCode::NOT_FOUND, "route_not_found");
    let r = h.call(Method::PATCH, "/v1/tenants/t1/items/A", Some(&key), None).await;
    assert_error(&r, StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
    let req = Request::put("/v1/tenants/t1/items/A")
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", "text/plain")
        .body(Body::from("hello"))
        .unwrap();
    assert_error(&h.send(req).await, StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type");
    let req = Request::put("/v1/tenants/t1/items/A")
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", "application/json")
        .body(Body::from("{not json"))
        .unwrap();
    assert_error(&h.send(req).await, StatusCode::BAD_REQUEST, "invalid_json");
    let r = h.call(Method::PUT, "/v1/tenants/t1/items/A", Some(&key), Some(json!({"content": 1}))).await;
    assert_error(&r, StatusCode::BAD_REQUEST, "invalid_json");
    let r = h.call(Method::GET, "/v1/tenants/t1/items?limit=0", Some(&key), None).await;
    assert_error(&r, StatusCode::BAD_REQUEST, "invalid_request");
    let r = h.call(Method::GET, "/v1/tenants/t1/items?limit=x", Some(&key), None).await;
    assert_error(&r, StatusCode::BAD_REQUEST, "invalid_request");
    let r = h
        .call(Method::POST, "/v1/tenants", Some(ADMIN), Some(json!({"tenant_id": "t9", "config": {"normalizer": "x"}})))
        .await;
    assert_error(&r, StatusCode::BAD_REQUEST, "invalid_config");
    let r = h
        .call(
            Method::POST,
            "/v1/tenants",
            Some(ADMIN),
            Some(json!({"tenant_id": "t9", "config": {"shingle_kind": "x"}})),
        )
        .await;
    assert_error(&r, StatusCode::BAD_REQUEST, "invalid_config");
    // Body over the limit, refused from Content-Length before reading.
    let big = json!({"content": "x".repeat(4096)});
    let r = h.call(Method::PUT, "/v1/tenants/t1/items/A", Some(&key), Some(big)).await;
    assert_error(&r, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
    // ... and while reading a body without Content-Length.
    let stream = futures_stream(vec![b"{\"content\":\"".to_vec(), vec![b'y'; 4096], b"\"}".to_vec()]);
    let req = Request::put("/v1/tenants/t1/items/A")
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", "application/json")
        .body(stream)
        .unwrap();
    assert_error(&h.send(req).await, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
}

fn futures_stream(chunks: Vec<Vec<u8>>) -> Body {
    use http_body_util::StreamBody;
    let frames = chunks.into_iter().map(|c| Ok::<_, std::io::Error>(hyper_frame(c)));
    Body::new(StreamBody::new(tokio_stream_iter(frames)))
}

fn hyper_frame(c: Vec<u8>) -> http_body::Frame<axum::body::Bytes> {
    http_body::Frame::data(axum::body::Bytes::from(c))
}

fn tokio_stream_iter<I: Iterator + Unpin>(it: I) -> IterStream<I> {
    IterStream(it)
}

struct IterStream<I>(I);

impl<I: Iterator + Unpin> futures_core::Stream for IterStream<I> {
    type Item = I::Item;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<I::Item>> {
        std::task::Poll::Ready(self.0.next())
    }
}

#[tokio::test]
async fn rate_limit_answers_429_with_retry_after() {
    let quotas = QuotaConfig { requests_per_sec: 0.5, request_burst: 2.0, ..QuotaConfig::default() };
    let h = H::with(GatewayConfig { quotas, ..GatewayConfig::default() }, EngineOptions::default());
    let key = h.tenant("t1", None).await;
    let other = h.tenant("t2", None).await;
    for _ in 0..2 {
        assert_eq!(h.call(Method::GET, "/v1/tenants/t1/items", Some(&key), None).await.status, StatusCode::OK);
    }
    let r = h.call(Method::GET, "/v1/tenants/t1/items", Some(&key), None).await;
    assert_error(&r, StatusCode::TOO_MANY_REQUESTS, "rate_limited");
    assert_eq!(r.headers["retry-after"], "2");
    // Another tenant is not throttled by t1's load.
    assert_eq!(h.call(Method::GET, "/v1/tenants/t2/items", Some(&other), None).await.status, StatusCode::OK);
    let m = String::from_utf8(h.call(Method::GET, "/metrics", None, None).await.bytes).unwrap();
    assert!(m.contains("neardup_rate_limited_total{tenant=\"t1\"} 1"));
    assert!(!m.contains("neardup_rate_limited_total{tenant=\"t2\"} 1"));
}

#[tokio::test]
async fn timeout_answers_408() {
    // Set up with the default timeout, then serve the same engine and keys
    // with a 1 ms timeout and ask for work that takes far longer (a 4 MB
    // document): the answer must be 408 whatever the machine's speed.
    let h = H::new();
    let key = h.tenant("t1", None).await;
    let keys = KeyStore::open(Some(h.dir.path().join("keys.json")), Some(ADMIN)).unwrap();
    let cfg = GatewayConfig { request_timeout: std::time::Duration::from_millis(1), ..GatewayConfig::default() };
    let slow = H { state: AppState::new(h.state.engines()[0].clone(), keys, cfg), dir: tempfile::tempdir().unwrap() };
    let big = "lorem ipsum dolor sit amet consectetur adipiscing elit ".repeat(72_000);
    let r = slow.put("t1", &key, "big", &big).await;
    assert_error(&r, StatusCode::REQUEST_TIMEOUT, "timeout");
}

#[tokio::test]
async fn every_engine_error_code() {
    let h = H::new();
    let key = h.tenant("t1", None).await;
    let r = h.call(Method::POST, "/v1/tenants", Some(ADMIN), Some(json!({"tenant_id": "t1"}))).await;
    assert_error(&r, StatusCode::CONFLICT, "tenant_exists");
    let r = h.call(Method::POST, "/v1/tenants", Some(ADMIN), Some(json!({"tenant_id": "-bad/"}))).await;
    assert_error(&r, StatusCode::BAD_REQUEST, "invalid_input");
    let r = h
        .call(Method::POST, "/v1/tenants", Some(ADMIN), Some(json!({"tenant_id": "t3", "config": {"threshold": 2.0}})))
        .await;
    assert_error(&r, StatusCode::BAD_REQUEST, "invalid_config");
    let r = h
        .call(
            Method::POST,
            "/v1/tenants",
            Some(ADMIN),
            Some(json!({"tenant_id": "t3", "config": {"limits": {"max_items": 0}}})),
        )
        .await;
    assert_error(&r, StatusCode::BAD_REQUEST, "invalid_config");
    h.put("t1", &key, "A", "red fox runs very fast").await;
    let r = h.put("t1", &key, "A", "other text").await;
    assert_error(&r, StatusCode::CONFLICT, "item_exists");
    let r = h.call(Method::PUT, "/v1/tenants/t1/items/A", Some(&key), Some(json!({"content": "x", "epoch": 1}))).await;
    assert_error(&r, StatusCode::CONFLICT, "stale_epoch");
    let r = h.call(Method::DELETE, "/v1/tenants/t1/items/A?epoch=0", Some(&key), None).await;
    assert_error(&r, StatusCode::CONFLICT, "stale_epoch");
    let r = h.call(Method::DELETE, "/v1/tenants/t1/items/nope", Some(&key), None).await;
    assert_error(&r, StatusCode::NOT_FOUND, "item_not_found");
    let r =
        h.call(Method::POST, "/v1/tenants/t1/verify", Some(&key), Some(json!({"left": "A", "right": "nope"}))).await;
    assert_error(&r, StatusCode::NOT_FOUND, "item_not_found");
    let body = json!({"content": "x", "normalization_version": "unicode-v1"});
    let r = h.call(Method::PUT, "/v1/tenants/t1/items/N", Some(&key), Some(body)).await;
    assert_error(&r, StatusCode::BAD_REQUEST, "invalid_input");
    let r = h.call(Method::GET, "/v1/tenants/t1/shadow", Some(&key), None).await;
    assert_error(&r, StatusCode::CONFLICT, "invalid_state");
    let r = h.call(Method::POST, "/v1/tenants/t1/rollback", Some(&key), None).await;
    assert_error(&r, StatusCode::CONFLICT, "invalid_state");

    // Budgets and sizes.
    let small = r#"{"normalizer":"seed","shingle_width":2,"threshold":0.75,"limits":{"max_items":1,"max_item_bytes":64},"retain_content":false}"#;
    let k2 = h.tenant("small", Some(small)).await;
    h.put("small", &k2, "A", "one").await;
    let r = h.put("small", &k2, "B", "two").await;
    assert_error(&r, StatusCode::UNPROCESSABLE_ENTITY, "budget_exceeded");
    let r = h.put("small", &k2, "C", &"long ".repeat(40)).await;
    assert_error(&r, StatusCode::PAYLOAD_TOO_LARGE, "too_large");
    let r = h
        .call(Method::POST, "/v1/tenants/small/rebuild", Some(&k2), Some(json!({"config": {"shingle_width": 3}})))
        .await;
    assert_error(&r, StatusCode::UNPROCESSABLE_ENTITY, "rebuild_needs_content");
    let m = String::from_utf8(h.call(Method::GET, "/metrics", None, None).await.bytes).unwrap();
    assert!(m.contains("neardup_budget_rejections_total{tenant=\"small\"} 2"), "{m}");
    assert!(m.contains("neardup_cross_version_attempts_total{tenant=\"t1\"} 1"), "{m}");

    // Snapshots: corrupt, unsupported format, other tenant's.
    let snap = h.call(Method::GET, "/v1/tenants/t1/snapshot", Some(&key), None).await.bytes;
    let upload = |bytes: Vec<u8>, tenant: &str, token: &str| {
        Request::put(format!("/v1/tenants/{tenant}/snapshot"))
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", "application/octet-stream")
            .body(Body::from(bytes))
            .unwrap()
    };
    let mut bad = snap.clone();
    let n = bad.len();
    bad[n - 10] ^= 0xff;
    assert_error(&h.send(upload(bad, "t1", &key)).await, StatusCode::UNPROCESSABLE_ENTITY, "corrupt");
    let mut v99 = snap.clone();
    v99[8..12].copy_from_slice(&99u32.to_le_bytes());
    assert_error(&h.send(upload(v99, "t1", &key)).await, StatusCode::UNPROCESSABLE_ENTITY, "unsupported_format");
    assert_error(
        &h.send(upload(snap.clone(), "small", &k2)).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "tenant_mismatch",
    );
    let r = h.call(Method::PUT, "/v1/tenants/t1/snapshot", Some(&key), Some(json!({}))).await;
    assert_error(&r, StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type");

    // An engine with a snapshot key refuses clear snapshots.
    let opts = EngineOptions { snapshot_key: Some([7; 32]), ..EngineOptions::default() };
    let enc = H::with(GatewayConfig::default(), opts);
    let ek = enc.tenant("t1", None).await;
    assert_error(&enc.send(upload(snap, "t1", &ek)).await, StatusCode::UNPROCESSABLE_ENTITY, "snapshot_auth");
}

/// Regression: axum's 2 MB default body limit used to cut requests well
/// below the configured `max_body_bytes` (8 MiB by default) with a 413.
#[tokio::test]
async fn bodies_up_to_the_configured_limit_are_accepted() {
    let h = H::new();
    let key = h.tenant("t1", None).await;
    let three_mb = "lorem ipsum dolor sit amet consectetur adipiscing elit ".repeat(54_000);
    let r = h.put("t1", &key, "big", &three_mb).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", String::from_utf8_lossy(&r.bytes));
    let nine_mb = "x".repeat(9 << 20);
    let r = h.put("t1", &key, "too-big", &nine_mb).await;
    assert_error(&r, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
}

/// A snapshot upload is refused on the caller's scope before a byte of its
/// body is read: the body here never ends, and the answer still comes.
#[tokio::test]
async fn snapshot_upload_checks_the_scope_before_reading() {
    let h = H::new();
    let key = h.tenant("t1", None).await;
    let minted = h.call(Method::POST, "/v1/tenants/t1/keys", Some(&key), Some(json!({"scopes": ["query"]}))).await;
    let query_key = minted.json()["api_key"].as_str().unwrap().to_string();
    let endless = futures_util::stream::pending::<Result<axum::body::Bytes, std::io::Error>>();
    let req = Request::put("/v1/tenants/t1/snapshot")
        .header("authorization", format!("Bearer {query_key}"))
        .header("content-type", "application/octet-stream")
        .body(Body::from_stream(endless))
        .unwrap();
    let r =
        tokio::time::timeout(std::time::Duration::from_secs(10), h.send(req)).await.expect("answered without reading");
    assert_error(&r, StatusCode::FORBIDDEN, "forbidden");
}

/// A snapshot is streamed both ways: a tenant of several snapshot frames
/// (over 4 MiB of records before compression) downloads whole, and
/// restores from an upload arriving in small pieces.
#[tokio::test]
async fn large_snapshots_stream_both_ways() {
    let h = H::new();
    let key = h.tenant("t1", None).await;
    // ~1.7 KB of words that repeat little, so the frames compress little.
    let word = |i: u64, j: u64| format!("w{:x}", (i * 7919 + j * 104_729).wrapping_mul(2_654_435_761) % 1_000_003);
    let items: Vec<_> = (0..3000u64)
        .map(|i| {
            let text: Vec<String> = (0..220).map(|j| word(i, j)).collect();
            json!({"item_id": format!("i{i}"), "content": text.join(" ")})
        })
        .collect();
    let r = h.call(Method::POST, "/v1/tenants/t1/items", Some(&key), Some(json!({ "items": items }))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", String::from_utf8_lossy(&r.bytes));
    let snap = h.call(Method::GET, "/v1/tenants/t1/snapshot", Some(&key), None).await;
    assert_eq!(snap.status, StatusCode::OK);
    assert!(snap.bytes.len() > 2 << 20, "{} bytes", snap.bytes.len());
    // Upload in small pieces.
    let pieces: Vec<Result<axum::body::Bytes, std::io::Error>> =
        snap.bytes.chunks(10_000).map(|c| Ok(axum::body::Bytes::copy_from_slice(c))).collect();
    let req = Request::put("/v1/tenants/t1/snapshot")
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", "application/octet-stream")
        .body(Body::from_stream(futures_util::stream::iter(pieces)))
        .unwrap();
    let r = h.send(req).await;
    assert_eq!(r.status, StatusCode::OK, "{}", String::from_utf8_lossy(&r.bytes));
    assert_eq!(r.json()["items"], 3000);
    let got = h.call(Method::GET, "/v1/tenants/t1/items/i2999", Some(&key), None).await;
    assert_eq!(got.status, StatusCode::OK);
}

/// Issue 15 item 8: a connection that sends half a request used to stay
/// open forever; it is closed once the header-read timeout passes, while a
/// whole request on another connection is answered meanwhile.
#[tokio::test]
async fn half_sent_requests_are_closed_after_the_header_timeout() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let h = H::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let timeout = std::time::Duration::from_millis(500);
    tokio::spawn(neardup_server::serve_with(listener, h.state.clone(), std::future::pending(), timeout));
    let mut slow = tokio::net::TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    // A whole request is still served.
    let mut ok = tokio::net::TcpStream::connect(addr).await.unwrap();
    ok.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut answer = Vec::new();
    ok.read_to_end(&mut answer).await.unwrap();
    assert!(answer.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&answer));
    // The half request: the server closes it (perhaps with a 408) well
    // before this test's own limit.
    let mut rest = Vec::new();
    let read = tokio::time::timeout(std::time::Duration::from_secs(5), slow.read_to_end(&mut rest)).await;
    assert!(read.is_ok(), "the half-sent request was still open after 5 s");
}

/// Waits (up to a minute, a guard against a hang) until item `id` of `t1`
/// is readable: a write that answered 408 lands once its store or log is
/// let go.
async fn until_readable(h: &H, key: &str, id: &str) {
    let path = format!("/v1/tenants/t1/items/{id}");
    for _ in 0..6_000 {
        if h.call(Method::GET, &path, Some(key), None).await.status == StatusCode::OK {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("{id} never landed");
}

/// Waits (up to a minute, a guard against a hang) until `gate` holds an
/// operation.
async fn until_held(gate: &neardup_index::Gate) {
    for _ in 0..6_000 {
        if gate.waiting() > 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("nothing reached the gate");
}

/// The seed's fault list: a slow store. A write slower than the request
/// timeout answers 408 at the deadline (not when the store is done); the
/// write still lands, as the 408 says it may, and a retry answers from
/// it; every acknowledged write is there.
///
/// "At the deadline, not when the store is done" is shown as an ordering:
/// the store holds the write at a closed gate until the answer is in hand,
/// so an answer at all is one that did not wait for the store — no
/// wall-clock bound that a busy machine could break.
#[tokio::test]
async fn a_slow_store_keeps_deadlines_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (store, faults) = neardup_index::FaultyStore::new();
    let engine = neardup_index::Engine::open_on_store(dir.path(), EngineOptions::default(), Box::new(store)).unwrap();
    let keys = KeyStore::open(None, Some(ADMIN)).unwrap();
    // Long enough that an ordinary write on a loaded machine is in time.
    let cfg = GatewayConfig { request_timeout: std::time::Duration::from_secs(2), ..GatewayConfig::default() };
    let h = H { state: AppState::new(std::sync::Arc::new(engine), keys, cfg), dir };
    let key = h.tenant("t1", None).await;
    for i in 0..5 {
        assert!(h
            .put("t1", &key, &format!("a{i}"), &format!("red fox number {i} runs very fast"))
            .await
            .status
            .is_success());
    }
    let gate = faults.write_gate();
    gate.close();
    let guard = std::time::Duration::from_secs(60);
    let r = tokio::time::timeout(guard, h.put("t1", &key, "slow", "a write the slow store holds"))
        .await
        .expect("answered while the store still holds the write");
    assert_error(&r, StatusCode::REQUEST_TIMEOUT, "timeout");
    assert!(gate.waiting() > 0, "the store still holds the write that answered 408");
    gate.open();
    until_readable(&h, &key, "slow").await;
    let r = h.put("t1", &key, "slow", "a write the slow store holds").await;
    assert_eq!(r.status, StatusCode::OK, "the retry answers from the write that landed");
    for i in 0..5 {
        let r = h.call(Method::GET, &format!("/v1/tenants/t1/items/a{i}"), Some(&key), None).await;
        assert_eq!(r.status, StatusCode::OK);
    }
}

/// The seed's fault list: a slow command log (its fsync stalls, injected
/// under `--fsync always`). A write answers 408 at its deadline and still
/// lands; queries of the same tenant keep answering meanwhile (the fsync
/// holds no tenant lock); a retry answers from the write; nothing
/// acknowledged is lost.
///
/// Shown as orderings, as above: the fsync is held at a closed gate until
/// both answers are in hand, and the query is sent only once the fsync is
/// held there.
#[tokio::test]
async fn a_slow_command_log_keeps_deadlines_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let opts = EngineOptions { fsync: neardup_index::FsyncPolicy::Always, ..EngineOptions::default() };
    let engine = std::sync::Arc::new(neardup_index::Engine::open(dir.path(), opts).unwrap());
    let keys = KeyStore::open(None, Some(ADMIN)).unwrap();
    let cfg = GatewayConfig { request_timeout: std::time::Duration::from_secs(2), ..GatewayConfig::default() };
    let h = H { state: AppState::new(engine.clone(), keys, cfg), dir };
    let key = h.tenant("t1", None).await;
    for i in 0..5 {
        let r = h.put("t1", &key, &format!("a{i}"), &format!("red fox number {i} runs very fast")).await;
        assert!(r.status.is_success());
    }
    let gate = engine.log_fsync_gate();
    gate.close();
    let decide = async {
        until_held(&gate).await;
        let body = json!({"content": "red fox number 3 runs very fast"});
        h.call(Method::POST, "/v1/tenants/t1/decide", Some(&key), Some(body)).await
    };
    let both = async { tokio::join!(h.put("t1", &key, "slow", "a write the slow log holds"), decide) };
    let (w, q) = tokio::time::timeout(std::time::Duration::from_secs(60), both)
        .await
        .expect("both answered while the log still holds the fsync");
    assert_error(&w, StatusCode::REQUEST_TIMEOUT, "timeout");
    assert_eq!(q.status, StatusCode::OK, "{}", q.json());
    assert_eq!(q.json()["decision"], "duplicate");
    assert!(gate.waiting() > 0, "the fsync was still held when both answered");
    gate.open();
    until_readable(&h, &key, "slow").await;
    let r = h.put("t1", &key, "slow", "a write the slow log holds").await;
    assert_eq!(r.status, StatusCode::OK, "the retry answers from the write that landed");
    assert_eq!(r.json()["status"], "unchanged");
    for i in 0..5 {
        let r = h.call(Method::GET, &format!("/v1/tenants/t1/items/a{i}"), Some(&key), None).await;
        assert_eq!(r.status, StatusCode::OK);
    }
    assert!(engine.durable_lsn() > 0);
}

/// Issue 15: a tombstone at the highest epoch fenced an id for good; a
/// tenant admin lifts it, an ingest key may not.
#[tokio::test]
async fn an_admin_unfences_an_id() {
    let h = H::new();
    let key = h.tenant("t1", None).await;
    h.put("t1", &key, "A", "red fox runs very fast").await;
    let max = neardup_index::MAX_EPOCH;
    let r = h.call(Method::DELETE, &format!("/v1/tenants/t1/items/A?epoch={max}"), Some(&key), None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json());
    let minted = h.call(Method::POST, "/v1/tenants/t1/keys", Some(&key), Some(json!({"scopes": ["ingest"]}))).await;
    let ingest = minted.json()["api_key"].as_str().unwrap().to_string();
    let r = h.call(Method::POST, "/v1/tenants/t1/items/A/unfence", Some(&ingest), None).await;
    assert_error(&r, StatusCode::FORBIDDEN, "forbidden");
    let r = h.call(Method::POST, "/v1/tenants/t1/items/A/unfence", Some(&key), None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json());
    assert_eq!(r.json()["epoch"], max);
    let r = h.put("t1", &ingest, "A", "red fox is back").await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.json());
    let r = h.call(Method::POST, "/v1/tenants/t1/items/A/unfence", Some(&key), None).await;
    assert_error(&r, StatusCode::CONFLICT, "invalid_state");
    let audit = h.call(Method::GET, "/v1/tenants/t1/audit", Some(&key), None).await.json();
    assert!(audit.to_string().contains("unfence"), "{audit}");
}

/// The review console's page and files: served without a key, with a
/// strict Content-Security-Policy; unknown files are 404.
#[tokio::test]
async fn the_console_is_served_with_a_strict_policy() {
    let h = H::new();
    let r = h.call(Method::GET, "/console", None, None).await;
    assert_eq!(r.status, StatusCode::PERMANENT_REDIRECT);
    assert_eq!(r.headers["location"], "/console/");
    for (path, kind, needle) in [
        ("/console/", "text/html", "<script src=\"console.js\">"),
        ("/console/console.js", "text/javascript", "textContent"),
        ("/console/console.css", "text/css", "mark.shared"),
    ] {
        let r = h.call(Method::GET, path, None, None).await;
        assert_eq!(r.status, StatusCode::OK, "{path}");
        assert!(r.headers["content-type"].to_str().unwrap().starts_with(kind), "{path}");
        let csp = r.headers["content-security-policy"].to_str().unwrap();
        assert!(csp.contains("default-src 'none'") && csp.contains("script-src 'self'"), "{csp}");
        assert!(!csp.contains("unsafe"), "{csp}");
        assert_eq!(r.headers["x-content-type-options"], "nosniff");
        assert!(String::from_utf8_lossy(&r.bytes).contains(needle), "{path}");
    }
    let r = h.call(Method::GET, "/console/secrets.txt", None, None).await;
    assert_error(&r, StatusCode::NOT_FOUND, "route_not_found");
}

/// The routes behind the console: the review queue, a pair compared with
/// its shared passage marked, the neighbourhood, and the dashboards'
/// figures — each with its scope.
#[tokio::test]
async fn review_console_routes() {
    let h = H::new();
    let key = h.tenant("t1", None).await;
    h.put("t1", &key, "A", "red fox runs very fast").await;
    h.put("t1", &key, "B", "red fox runs very fast today").await;
    h.put("t1", &key, "C", "database backup completed nightly").await;
    let q = h.call(Method::GET, "/v1/tenants/t1/queue", Some(&key), None).await;
    assert_eq!(q.status, StatusCode::OK, "{}", q.json());
    let q = q.json();
    assert_eq!(q["items"][0]["item"]["item_id"], "B");
    assert_eq!(q["items"][0]["item"]["decision"], "near_duplicate");
    assert_eq!(q["total"], 1);
    assert!(q["next_before"].is_null());
    let bad = h.call(Method::GET, "/v1/tenants/t1/queue?state=maybe", Some(&key), None).await;
    assert_error(&bad, StatusCode::BAD_REQUEST, "invalid_request");

    let c = h.call(Method::POST, "/v1/tenants/t1/compare", Some(&key), Some(json!({"left": "B", "right": "A"}))).await;
    assert_eq!(c.status, StatusCode::OK, "{}", c.json());
    let c = c.json();
    assert_eq!(c["verification"]["score"], 0.8);
    let runs = c["left"]["segments"].as_array().unwrap();
    let shared: Vec<_> = runs.iter().filter(|r| r["shared"] == true).map(|r| r["text"].as_str().unwrap()).collect();
    assert_eq!(shared, ["red fox runs very fast"]);
    let whole: String = runs.iter().map(|r| r["text"].as_str().unwrap()).collect();
    assert_eq!(whole, "red fox runs very fast today");

    let n = h.call(Method::GET, "/v1/tenants/t1/items/A/neighbourhood", Some(&key), None).await.json();
    assert_eq!(n["members"][0]["item_id"], "B");
    assert_eq!(n["members"][0]["hops"], 1);

    let label = json!({"left": "B", "right": "A", "label": "near_duplicate", "rationale": "same sentence"});
    assert_eq!(
        h.call(Method::POST, "/v1/tenants/t1/labels", Some(&key), Some(label)).await.status,
        StatusCode::CREATED
    );
    let d = h.call(Method::GET, "/v1/tenants/t1/dashboard", Some(&key), None).await;
    assert_eq!(d.status, StatusCode::OK, "{}", d.json());
    let d = d.json();
    assert!(d["candidates_per_query"]["count"].as_u64().unwrap() >= 3, "{d}");
    assert_eq!(d["decisions"]["near_duplicate"], 1);
    assert_eq!(d["s_curve"]["points"].as_array().unwrap().len(), 101);
    let (b, r) = (d["s_curve"]["bands"].as_f64().unwrap(), d["s_curve"]["rows"].as_f64().unwrap());
    let at_half = d["s_curve"]["points"][50][1].as_f64().unwrap();
    assert!((at_half - (1.0 - (1.0 - 0.5f64.powf(r)).powf(b))).abs() < 1e-12, "{}", d["s_curve"]);
    assert_eq!(d["s_curve"]["points"][100][1], 1.0);
    assert_eq!(d["labelled"]["true_positives"], 1);
    assert_eq!(d["labelled"]["precision"]["value"], 1.0);
    assert!(d["bucket_sizes"]["counts"].as_array().unwrap().iter().any(|c| c.as_u64() > Some(0)));
    assert_eq!(d["ingest_per_minute"].as_array().unwrap().iter().map(|m| m["items"].as_u64().unwrap()).sum::<u64>(), 3);
    assert!(d["shadow"].is_null());
    // During a migration the dashboard carries the shadow's report.
    let s =
        h.call(Method::POST, "/v1/tenants/t1/shadow", Some(&key), Some(json!({"config": {"threshold": 0.9}}))).await;
    assert_eq!(s.status, StatusCode::OK, "{}", s.json());
    h.call(Method::POST, "/v1/tenants/t1/decide", Some(&key), Some(json!({"content": "red fox runs very fast"}))).await;
    let d = h.call(Method::GET, "/v1/tenants/t1/dashboard", Some(&key), None).await.json();
    assert_eq!(d["shadow"]["queries"], 1, "{d}");

    // The queue and compare show content: review scope, not query.
    let minted = h.call(Method::POST, "/v1/tenants/t1/keys", Some(&key), Some(json!({"scopes": ["query"]}))).await;
    let query_key = minted.json()["api_key"].as_str().unwrap().to_string();
    let r = h.call(Method::GET, "/v1/tenants/t1/queue", Some(&query_key), None).await;
    assert_error(&r, StatusCode::FORBIDDEN, "forbidden");
    let r = h
        .call(Method::POST, "/v1/tenants/t1/compare", Some(&query_key), Some(json!({"left": "B", "right": "A"})))
        .await;
    assert_error(&r, StatusCode::FORBIDDEN, "forbidden");
    let r = h.call(Method::GET, "/v1/tenants/t1/dashboard", Some(&query_key), None).await;
    assert_eq!(r.status, StatusCode::OK);
}

/// Issue 11: SimHash as a tenant's signature. The tenant view says what it
/// is (one 64-bit SimHash, four bands, candidates within Hamming distance
/// 3); a real text and a copy with one word changed are found (and scored
/// by exact Jaccard, like every candidate); a revision with one word in 60
/// changed (Jaccard about 0.9) is no SimHash candidate — too many bits
/// differ — while the same tenant rebuilt under MinHash finds it: the
/// rebuild replaces the index, the two schemes never share one.
#[tokio::test]
async fn simhash_tenants_find_near_exact_copies_within_their_hamming_distance() {
    let paper = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/docs/paper.txt"),
    )
    .unwrap();
    let words: Vec<&str> = paper.split_whitespace().collect();
    let edited = |every: usize| {
        let w: Vec<&str> =
            words.iter().enumerate().map(|(i, w)| if i % every == every / 2 { "zebra" } else { w }).collect();
        w.join(" ")
    };
    let h = H::new();
    let key = h.tenant("s", Some(r#"{"signature": "simhash"}"#)).await;
    let cfg = h.call(Method::GET, "/v1/tenants/s", Some(&key), None).await.json();
    let c = &cfg["config"];
    assert_eq!(
        (&c["signature"], &c["num_perm"], &c["bands"], &c["rows"], &c["max_hamming"]),
        (&json!("simhash-v1"), &json!(64), &json!(4), &json!(16), &json!(3)),
        "{cfg}"
    );
    assert!(c["fingerprint_version"].as_str().unwrap().contains("simhash-v1x64"), "{cfg}");

    assert_eq!(h.put("s", &key, "A", &paper).await.json()["decision"], "distinct");
    let b = h.put("s", &key, "B", &edited(words.len())).await.json();
    assert_eq!(b["candidates"][0]["item_id"], "A", "{b}");
    assert!(b["candidates"][0]["score"].as_f64().unwrap() > 0.98, "{b}");
    assert_ne!(b["decision"], "distinct", "{b}");
    assert_eq!(b["method"], "simhash-hamming+exact-jaccard", "{b}");
    let revision = edited(60);
    let d = h.call(Method::POST, "/v1/tenants/s/decide", Some(&key), Some(json!({"content": revision}))).await.json();
    assert_eq!(d["candidates"], json!([]), "{d}");
    assert_eq!(d["decision"], "distinct", "{d}");

    let r =
        h.call(Method::POST, "/v1/tenants/s/rebuild", Some(&key), Some(json!({"config": {"signature": "oph"}}))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", String::from_utf8_lossy(&r.bytes));
    let cfg = h.call(Method::GET, "/v1/tenants/s", Some(&key), None).await.json();
    assert_eq!(
        (&cfg["config"]["signature"], &cfg["config"]["num_perm"]),
        (&json!("oph-dens-v1"), &json!(128)),
        "{cfg}"
    );
    assert!(cfg["config"]["max_hamming"].is_null(), "{cfg}");
    let d = h.call(Method::POST, "/v1/tenants/s/decide", Some(&key), Some(json!({"content": revision}))).await.json();
    assert_eq!(d["candidates"][0]["item_id"], "A", "{d}");
    let score = d["candidates"][0]["score"].as_f64().unwrap();
    assert!((0.8..0.98).contains(&score), "{d}");
}

/// Issue 11: a tenant with a membership screen decides as one without, and
/// `/metrics` reports what the screen answered.
#[tokio::test]
async fn a_screened_tenant_decides_alike_and_reports_its_screen() {
    let h = H::new();
    let plain = h.tenant("plain", None).await;
    let screened = h
        .tenant("screened", Some(r#"{"normalizer":"seed","shingle_width":2,"threshold":0.75,"screen_bits":12}"#))
        .await;
    let cfg = h.call(Method::GET, "/v1/tenants/screened", Some(&screened), None).await.json();
    assert_eq!(cfg["config"]["screen_bits"], 12, "{cfg}");
    for (t, key) in [("plain", &plain), ("screened", &screened)] {
        h.put(t, key, "A", "red fox runs very fast").await;
        h.put(t, key, "C", "database backup completed nightly").await;
    }
    for content in ["red fox runs very fast today", "an unrelated line of text about the weather"] {
        let body = json!({"content": content});
        let a = h.call(Method::POST, "/v1/tenants/plain/decide", Some(&plain), Some(body.clone())).await.json();
        let b = h.call(Method::POST, "/v1/tenants/screened/decide", Some(&screened), Some(body)).await.json();
        assert_eq!((&a["decision"], &a["candidates"]), (&b["decision"], &b["candidates"]), "{a} {b}");
    }
    let metrics = String::from_utf8(h.call(Method::GET, "/metrics", None, None).await.bytes).unwrap();
    let skipped = metrics
        .lines()
        .find_map(|l| l.strip_prefix("neardup_screen_skipped_lookups{tenant=\"screened\"} "))
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0);
    assert!(skipped > 0.0, "{metrics}");
    assert!(!metrics.contains("neardup_screen_skipped_lookups{tenant=\"plain\"}"), "{metrics}");
}

/// Issue 45, item 5: 600 reads asking a cluster node for a position the
/// stream never reached (`min_lsn=10^12`) each held a thread for the
/// request timeout, and an ordinary read waited 26.9 s behind them. A
/// position past the stream's end is now refused at once, as on one node,
/// and the reads in flight beside them are answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_reads_for_a_position_past_the_stream_is_refused_at_once() {
    use neardup_cluster::testkit::NatsCluster;
    use std::time::Duration;
    let nats = NatsCluster::start(3).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut c = neardup_cluster::ClusterOptions::new(&nats.urls(), "n1").unwrap();
    c.snapshot_interval = None;
    let cluster =
        std::sync::Arc::new(neardup_cluster::Cluster::start(dir.path(), EngineOptions::default(), c).await.unwrap());
    let keys = KeyStore::open(None, Some(ADMIN)).unwrap();
    let quotas = QuotaConfig { requests_per_sec: 1e9, request_burst: 1e9, bytes_per_sec: 1e12, byte_burst: 1e12 };
    // A request timeout far past the test's guard: a read that waits for
    // the position (today's behaviour) fails the test instead of passing late.
    let config = GatewayConfig { quotas, request_timeout: Duration::from_secs(600), ..GatewayConfig::default() };
    let h = H { state: AppState::clustered(cluster, keys, config), dir: tempfile::tempdir().unwrap() };
    h.tenant("t", None).await;
    let put = h.call(Method::PUT, "/v1/tenants/t/items/a", Some(ADMIN), Some(json!({"content": "red fox"}))).await;
    assert_eq!(put.status, StatusCode::CREATED, "{}", String::from_utf8_lossy(&put.bytes));
    let lsn = put.json()["lsn"].as_u64().unwrap();
    let h = std::sync::Arc::new(h);
    let flood: Vec<_> = (0..600)
        .map(|_| {
            let h = std::sync::Arc::clone(&h);
            tokio::spawn(async move {
                h.call(Method::GET, "/v1/tenants/t/items/a?min_lsn=1000000000000", Some(ADMIN), None).await
            })
        })
        .collect();
    let ordinary = h.call(Method::GET, &format!("/v1/tenants/t/items/a?min_lsn={lsn}"), Some(ADMIN), None).await;
    assert_eq!(ordinary.status, StatusCode::OK);
    let answers = tokio::time::timeout(Duration::from_secs(120), async {
        let mut all = Vec::new();
        for f in flood {
            all.push(f.await.unwrap());
        }
        all
    })
    .await
    .expect("every read past the stream is answered without waiting for the position");
    for r in answers {
        assert_eq!((r.status, r.code()), (StatusCode::BAD_REQUEST, "invalid_input".to_string()));
    }
}
