//! Tenant isolation through the HTTP API: two tenants hold identical
//! content; no candidate, count, error message or metric of one reveals the
//! other, and a key for one gets, on the other's paths, exactly the answer
//! for a tenant that does not exist.

mod common;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use common::{ADMIN, H};
use serde_json::json;

const DOCS: [(&str, &str); 3] = [
    ("A", "red fox runs very fast"),
    ("B", "red fox runs very fast today"),
    ("C", "database backup completed nightly"),
];

#[tokio::test]
async fn identical_content_in_two_tenants_never_meets() {
    let h = H::new();
    let ka = h.tenant("alpha", None).await;
    let kb = h.tenant("beta", None).await;
    for (id, text) in DOCS {
        let ra = h.put("alpha", &ka, id, text).await.json();
        let rb = h.put("beta", &kb, id, text).await.json();
        // Same answers: each tenant sees only its own items.
        assert_eq!(ra["candidates"], rb["candidates"], "{id}");
        assert_eq!(ra["candidates_seen"], rb["candidates_seen"], "{id}");
        assert_eq!(ra["decision"], rb["decision"], "{id}");
    }
    // Beta's extra item is invisible to alpha: no candidate, no count.
    h.put("beta", &kb, "D", "red fox runs very fast today again").await;
    let d = h
        .call(
            Method::POST,
            "/v1/tenants/alpha/decide",
            Some(&ka),
            Some(json!({"content": "red fox runs very fast today again"})),
        )
        .await
        .json();
    for c in d["candidates"].as_array().unwrap() {
        assert_ne!(c["item_id"], "D");
    }
    let cands = h.call(Method::GET, "/v1/tenants/alpha/items/B/candidates?limit=100", Some(&ka), None).await.json();
    assert_eq!(cands["candidates_seen"], 1, "only alpha's A: {cands}");
    let detail = h.call(Method::GET, "/v1/tenants/alpha", Some(&ka), None).await.json();
    assert_eq!(detail["stats"]["live_items"], 3);
    let items = h.call(Method::GET, "/v1/tenants/alpha/items", Some(&ka), None).await.json();
    assert_eq!(items["items"].as_array().unwrap().len(), 3);
    let list = h.call(Method::GET, "/v1/tenants", Some(&ka), None).await.json();
    assert_eq!(list["tenants"], json!(["alpha"]));
}

#[tokio::test]
async fn another_tenants_paths_look_like_no_tenant() {
    let h = H::new();
    let ka = h.tenant("alpha", None).await;
    let kb = h.tenant("beta", None).await;
    h.put("beta", &kb, "A", "red fox runs very fast").await;
    let routes: Vec<(Method, &str, Option<serde_json::Value>)> = vec![
        (Method::GET, "/v1/tenants/{t}", None),
        (Method::GET, "/v1/tenants/{t}/items", None),
        (Method::GET, "/v1/tenants/{t}/items/A", None),
        (Method::PUT, "/v1/tenants/{t}/items/A", Some(json!({"content": "x"}))),
        (Method::DELETE, "/v1/tenants/{t}/items/A?epoch=1", None),
        (Method::GET, "/v1/tenants/{t}/items/A/candidates", None),
        (Method::POST, "/v1/tenants/{t}/candidates", Some(json!({"content": "red fox"}))),
        (Method::POST, "/v1/tenants/{t}/decide", Some(json!({"content": "red fox"}))),
        (Method::POST, "/v1/tenants/{t}/verify", Some(json!({"left": "A", "right": "A"}))),
        (Method::GET, "/v1/tenants/{t}/snapshot", None),
        (Method::POST, "/v1/tenants/{t}/rebuild", Some(json!({}))),
        (Method::POST, "/v1/tenants/{t}/shadow", Some(json!({}))),
        (Method::GET, "/v1/tenants/{t}/shadow", None),
        (Method::POST, "/v1/tenants/{t}/shadow/promote", None),
        (Method::DELETE, "/v1/tenants/{t}/shadow", None),
        (Method::POST, "/v1/tenants/{t}/rollback", None),
        (Method::POST, "/v1/tenants/{t}/compact", None),
        (Method::GET, "/v1/tenants/{t}/labels", None),
        (
            Method::POST,
            "/v1/tenants/{t}/labels",
            Some(json!({"left": "A", "right": "B", "label": "distinct", "rationale": "r"})),
        ),
        (Method::GET, "/v1/tenants/{t}/decisions", None),
        (Method::GET, "/v1/tenants/{t}/audit", None),
        (Method::GET, "/v1/tenants/{t}/keys", None),
        (Method::POST, "/v1/tenants/{t}/keys", Some(json!({"scopes": ["query"]}))),
        (Method::POST, "/v1/tenants/{t}/items", Some(json!({"items": []}))),
    ];
    for (method, path, body) in routes {
        let theirs = h.call(method.clone(), &path.replace("{t}", "beta"), Some(&ka), body.clone()).await;
        let nobody = h.call(method.clone(), &path.replace("{t}", "gamma"), Some(&ka), body.clone()).await;
        assert_eq!(theirs.status, StatusCode::NOT_FOUND, "{method} {path}");
        // Byte-identical apart from the tenant id the caller itself sent.
        let t = String::from_utf8(theirs.bytes).unwrap().replace("beta", "X");
        let n = String::from_utf8(nobody.bytes).unwrap().replace("gamma", "X");
        assert_eq!(t, n, "{method} {path}");
    }
    // The snapshot upload too.
    let upload = |t: &str| {
        Request::put(format!("/v1/tenants/{t}/snapshot"))
            .header("authorization", format!("Bearer {ka}"))
            .header("content-type", "application/octet-stream")
            .body(Body::from(vec![0u8; 64]))
            .unwrap()
    };
    assert_eq!(h.send(upload("beta")).await.status, StatusCode::NOT_FOUND);
    // Beta is untouched.
    let b = h.call(Method::GET, "/v1/tenants/beta/items/A", Some(&kb), None).await;
    assert_eq!(b.status, StatusCode::OK);
    assert_eq!(b.json()["epoch"], 1);
}

#[tokio::test]
async fn metrics_count_each_tenant_alone() {
    let h = H::new();
    let ka = h.tenant("alpha", None).await;
    let kb = h.tenant("beta", None).await;
    for (id, text) in DOCS {
        h.put("alpha", &ka, id, text).await;
    }
    h.put("beta", &kb, "A", DOCS[0].1).await;
    let m = String::from_utf8(h.call(Method::GET, "/metrics", None, None).await.bytes).unwrap();
    for want in [
        "neardup_items{tenant=\"alpha\"} 3",
        "neardup_items{tenant=\"beta\"} 1",
        "neardup_items_ingested_total{tenant=\"alpha\"} 3",
        "neardup_items_ingested_total{tenant=\"beta\"} 1",
        "neardup_verification_score_count{tenant=\"beta\"} 0",
        "neardup_decisions_total{tenant=\"beta\",state=\"distinct\"} 1",
    ] {
        assert!(m.contains(want), "{want}\n{m}");
    }
    // The operator still reaches both.
    assert_eq!(h.call(Method::GET, "/v1/tenants/beta/items/A", Some(ADMIN), None).await.status, StatusCode::OK);
}
