//! The event feed (`GET /v1/tenants/{t}/events`): a consumer cut off
//! mid-page resumes from its last position and sees every event once, in
//! order; a restart serves the same bytes; a consumer behind a trimmed log
//! gets `410` with where to resume; every line validates against the
//! published schema (`schemas/events/v1/events.json`) and every type's
//! frozen example does too.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::http::{Method, StatusCode};
use common::{Resp, ADMIN, H};
use neardup_index::{Engine, EngineOptions};
use neardup_server::{AppState, GatewayConfig, KeyStore};
use serde_json::{json, Value};

/// Writes one of every event type: inserts (one with a verified match), a
/// batch whose items share one log entry, a replacement, a tombstone, a
/// label, a rebuild and a rollback.
async fn every_kind_of_event(h: &H) -> String {
    let key = h.tenant("t1", None).await;
    assert_eq!(h.put("t1", &key, "A", "red fox runs very fast").await.status, StatusCode::CREATED);
    assert_eq!(h.put("t1", &key, "B", "red fox runs very fast today").await.status, StatusCode::CREATED);
    let batch = json!({"items": [
        {"item_id": "C", "content": "database backup completed nightly"},
        {"item_id": "D", "content": "quarterly revenue grew in every region"},
        {"item_id": "E", "content": "the ferry leaves at noon on sundays"},
    ]});
    let r = h.call(Method::POST, "/v1/tenants/t1/items", Some(&key), Some(batch)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", String::from_utf8_lossy(&r.bytes));
    let replace = json!({"content": "a fox that is red runs", "epoch": 2});
    let r = h.call(Method::PUT, "/v1/tenants/t1/items/A", Some(&key), Some(replace)).await;
    assert_eq!(r.json()["status"], "replaced", "{}", String::from_utf8_lossy(&r.bytes));
    let r = h.call(Method::DELETE, "/v1/tenants/t1/items/C?epoch=1", Some(&key), None).await;
    assert_eq!(r.status, StatusCode::OK);
    let l = json!({"left": "A", "right": "B", "label": "distinct", "rationale": "reworded", "actor": "ann"});
    let r = h.call(Method::POST, "/v1/tenants/t1/labels", Some(&key), Some(l)).await;
    assert_eq!(r.status, StatusCode::CREATED);
    let r =
        h.call(Method::POST, "/v1/tenants/t1/rebuild", Some(&key), Some(json!({"config": {"threshold": 0.9}}))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", String::from_utf8_lossy(&r.bytes));
    let r = h.call(Method::POST, "/v1/tenants/t1/rollback", Some(&key), None).await;
    assert_eq!(r.status, StatusCode::OK);
    key
}

async fn feed(h: &H, key: &str, query: &str) -> Resp {
    h.call(Method::GET, &format!("/v1/tenants/t1/events?{query}"), Some(key), None).await
}

fn lines(r: &Resp) -> Vec<Value> {
    assert_eq!(r.status, StatusCode::OK, "{}", String::from_utf8_lossy(&r.bytes));
    assert_eq!(r.headers["content-type"], "application/x-ndjson");
    String::from_utf8(r.bytes.clone()).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The query that resumes after event `ev`: past its whole entry when it
/// was the entry's last event, else within the entry.
fn resume_after(ev: &Value) -> String {
    let (lsn, i, n) = (ev["lsn"].as_u64().unwrap(), ev["i"].as_u64().unwrap(), ev["n"].as_u64().unwrap());
    if i + 1 == n {
        format!("after={lsn}")
    } else {
        format!("after={lsn}&after_i={i}")
    }
}

/// Drops the service and opens the same data directory again, as a
/// restart does (without a checkpoint unless the caller took one).
fn restart(h: H, opts: EngineOptions) -> H {
    let H { state, dir } = h;
    drop(state);
    let engine = Arc::new(Engine::open(dir.path(), opts).unwrap());
    let keys = KeyStore::open(Some(dir.path().join("keys.json")), Some(ADMIN)).unwrap();
    H { state: AppState::new(engine, keys, GatewayConfig::default()), dir }
}

#[tokio::test]
async fn a_consumer_cut_off_mid_page_resumes_and_sees_every_event_once_in_order() {
    let h = H::new();
    let key = every_kind_of_event(&h).await;
    let all = lines(&feed(&h, &key, "after=0&limit=1000").await);
    let types: BTreeSet<&str> = all.iter().map(|e| e["type"].as_str().unwrap()).collect();
    let want = ["item_inserted", "item_replaced", "item_tombstoned", "label_added", "rebuilt", "rolled_back"];
    assert_eq!(types, want.into_iter().collect(), "{all:?}");
    assert!(all.iter().any(|e| e["n"].as_u64().unwrap() > 1), "no batch entry of several events: {all:?}");
    let b = all.iter().find(|e| e["item_id"] == "B").unwrap();
    assert_eq!(
        (&b["state"], &b["closest"]["item_id"], &b["closest"]["score"]),
        (&json!("near_duplicate"), &json!("A"), &json!(0.8))
    );
    // Positions strictly increase: (lsn, i).
    let positions: Vec<(u64, u64)> =
        all.iter().map(|e| (e["lsn"].as_u64().unwrap(), e["i"].as_u64().unwrap())).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");

    // The consumer reads pages of 3 and loses each body at a different
    // byte (mid-line, or on a line's end); it keeps the whole lines it got
    // and asks again after the last one.
    let mut seen = Vec::new();
    let mut query = "after=0".to_string();
    for round in 0..100 {
        let page = feed(&h, &key, &format!("{query}&limit=3")).await;
        assert_eq!(page.status, StatusCode::OK);
        if page.bytes.is_empty() {
            break;
        }
        let cut = 1 + (round * 37) % page.bytes.len();
        let got = &page.bytes[..cut];
        let whole = &got[..got.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1)];
        for line in String::from_utf8(whole.to_vec()).unwrap().lines() {
            let ev: Value = serde_json::from_str(line).unwrap();
            query = resume_after(&ev);
            seen.push(ev);
        }
    }
    assert_eq!(seen, all, "every event exactly once, in order");
}

#[tokio::test]
async fn a_restart_serves_the_same_feed_byte_for_byte() {
    for checkpoint in [false, true] {
        let h = H::new();
        let key = every_kind_of_event(&h).await;
        if checkpoint {
            // What a graceful shutdown does; then two more events. The
            // checkpoint trimmed the log behind it, so the feed before it
            // is gone, the same way before and after the restart.
            h.state.run_each(|e| e.checkpoint()).await.unwrap();
            assert_eq!(h.put("t1", &key, "F", "a brand new sentence here").await.status, StatusCode::CREATED);
            assert_eq!(h.put("t1", &key, "G", "one more sentence to follow").await.status, StatusCode::CREATED);
        }
        let from_start = feed(&h, &key, "after=0&limit=1000").await;
        let oldest: u64 = match checkpoint {
            false => 0,
            true => {
                assert_eq!(from_start.status, StatusCode::GONE);
                from_start.headers["neardup-oldest-after"].to_str().unwrap().parse().unwrap()
            }
        };
        let before = feed(&h, &key, &format!("after={oldest}&limit=1000")).await;
        assert_eq!(lines(&before).len(), if checkpoint { 2 } else { 10 });
        let h = restart(h, EngineOptions::default());
        let again = feed(&h, &key, "after=0&limit=1000").await;
        assert_eq!(again.status, from_start.status, "checkpoint {checkpoint}");
        assert_eq!(again.headers.get("neardup-oldest-after"), from_start.headers.get("neardup-oldest-after"));
        assert_eq!(String::from_utf8_lossy(&again.bytes), String::from_utf8_lossy(&from_start.bytes));
        let after = feed(&h, &key, &format!("after={oldest}&limit=1000")).await;
        assert_eq!(String::from_utf8_lossy(&after.bytes), String::from_utf8_lossy(&before.bytes));
        // New events continue the same feed.
        let last = lines(&after).last().cloned().unwrap();
        assert_eq!(h.put("t1", &key, "H", "the last sentence of this test").await.status, StatusCode::CREATED);
        let next = lines(&feed(&h, &key, &resume_after(&last)).await);
        assert_eq!(next.len(), 1);
        assert_eq!((&next[0]["type"], &next[0]["item_id"]), (&json!("item_inserted"), &json!("H")));
    }
}

/// A quiet tenant's consumer, caught up before two checkpoints, is not
/// told it fell behind because other tenants wrote since (the checkpoint's
/// mark says where the tenant's own events end), before or after a
/// restart.
#[tokio::test]
async fn a_caught_up_consumer_of_a_quiet_tenant_resumes_across_checkpoints_and_restarts() {
    let h = H::new();
    let key = every_kind_of_event(&h).await;
    let last = lines(&feed(&h, &key, "after=0&limit=1000").await).last().cloned().unwrap();
    let busy = h.tenant("busy", None).await;
    for round in 0..2 {
        for i in 0..3 {
            let id = format!("r{round}i{i}");
            assert_eq!(h.put("busy", &busy, &id, &format!("busy text {id} here")).await.status, StatusCode::CREATED);
        }
        h.state.run_each(|e| e.checkpoint()).await.unwrap();
    }
    let r = feed(&h, &key, &resume_after(&last)).await;
    assert_eq!((r.status, r.bytes.len()), (StatusCode::OK, 0), "{}", String::from_utf8_lossy(&r.bytes));
    let h = restart(h, EngineOptions::default());
    let r = feed(&h, &key, &resume_after(&last)).await;
    assert_eq!((r.status, r.bytes.len()), (StatusCode::OK, 0), "{}", String::from_utf8_lossy(&r.bytes));
}

#[tokio::test]
async fn a_consumer_behind_the_trimmed_log_gets_410_with_where_to_resume() {
    let opts = EngineOptions { keep_snapshots: 1, ..EngineOptions::default() };
    let h = H::with(GatewayConfig::default(), opts.clone());
    let key = every_kind_of_event(&h).await;
    let all = lines(&feed(&h, &key, "after=0&limit=1000").await);
    // One snapshot kept: the checkpoint trims the log behind it.
    h.state.run_each(|e| e.checkpoint()).await.unwrap();
    assert_eq!(h.put("t1", &key, "F", "a brand new sentence here").await.status, StatusCode::CREATED);
    let oldest = trimmed(&h, &key, &all).await;
    // After a restart the same answer, from the same oldest position.
    let h = restart(h, opts);
    assert_eq!(trimmed(&h, &key, &all).await, oldest);
}

/// Checks the trimmed feed's answers; returns the oldest position.
async fn trimmed(h: &H, key: &str, all: &[Value]) -> u64 {
    let last = all.last().unwrap()["lsn"].as_u64().unwrap();
    let gone = feed(h, key, "after=0").await;
    assert_eq!(gone.status, StatusCode::GONE, "{}", String::from_utf8_lossy(&gone.bytes));
    assert_eq!(gone.code(), "events_trimmed");
    let oldest: u64 = gone.headers["neardup-oldest-after"].to_str().unwrap().parse().unwrap();
    assert!(oldest >= last, "the checkpoint covered every event so far: {oldest} < {last}");
    assert!(gone.json()["error"]["message"].as_str().unwrap().contains(&oldest.to_string()));
    let mid = feed(h, key, &format!("after={}&after_i=0", all[0]["lsn"])).await;
    assert_eq!(mid.status, StatusCode::GONE);
    // Resuming where the 410 says loses nothing the log still holds.
    let rest = lines(&feed(h, key, &format!("after={oldest}")).await);
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0]["item_id"], "F");
    oldest
}

#[tokio::test]
async fn long_poll_waits_for_the_next_event_and_bad_queries_are_400() {
    let h = H::new();
    let key = h.tenant("t1", None).await;
    let empty = feed(&h, &key, "after=1&wait=0").await;
    assert_eq!((empty.status, empty.bytes.len()), (StatusCode::OK, 0));
    let state = h.state.clone();
    let waiting = tokio::spawn(async move {
        let h = H { state, dir: tempfile::tempdir().unwrap() };
        let key = key.clone();
        lines(&h.call(Method::GET, "/v1/tenants/t1/events?after=1&wait=20", Some(&key), None).await)
    });
    // Give the read time to start waiting; it answers when the write lands
    // (the 20 s wait only guards against a hang).
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let key2 = h.tenant("t2", None).await;
    assert_eq!(h.put("t2", &key2, "X", "another tenant's item").await.status, StatusCode::CREATED);
    let key1 = h.call(Method::POST, "/v1/tenants/t1/keys", Some(ADMIN), Some(json!({"scopes": ["ingest"]}))).await;
    let key1 = key1.json()["api_key"].as_str().unwrap().to_string();
    assert_eq!(h.put("t1", &key1, "A", "red fox runs very fast").await.status, StatusCode::CREATED);
    let got = waiting.await.unwrap();
    assert_eq!(got.len(), 1, "only t1's event: {got:?}");
    assert_eq!((&got[0]["tenant"], &got[0]["item_id"]), (&json!("t1"), &json!("A")));

    // Another tenant's key, a key without the query scope, bad numbers.
    assert_eq!(h.call(Method::GET, "/v1/tenants/t1/events", Some(&key2), None).await.status, StatusCode::NOT_FOUND);
    let r = h.call(Method::GET, "/v1/tenants/t1/events", Some(&key1), None).await;
    assert_eq!((r.status, r.code()), (StatusCode::FORBIDDEN, "forbidden".into()));
    let admin = Some(ADMIN);
    for q in ["limit=0", "limit=1001", "wait=26", "wait=-1", "after=x", "after=99999", "after_i=x"] {
        let r = h.call(Method::GET, &format!("/v1/tenants/t1/events?{q}"), admin, None).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{q}: {}", String::from_utf8_lossy(&r.bytes));
    }
}

/// The subset of JSON Schema the published schema uses — `type`, `const`,
/// `enum`, `minimum`, `maximum`, `minLength`, `pattern` (only
/// `^[0-9a-f]{N}$`), `properties`, `required`, `additionalProperties:
/// false`, `oneOf`, local `$ref` — checked exactly; any other keyword
/// fails the test, so the schema cannot outgrow this check unnoticed. (The
/// Python tests validate the same lines with the `jsonschema` package.)
fn validate(root: &Value, schema: &Value, v: &Value, at: &str) -> Result<(), String> {
    let Some(obj) = schema.as_object() else { return Err(format!("{at}: schema is not an object")) };
    for (k, s) in obj {
        let ok = match k.as_str() {
            "$schema" | "$id" | "title" | "description" | "$defs" => true,
            "$ref" => {
                let name = s.as_str().and_then(|r| r.strip_prefix("#/$defs/")).ok_or(format!("{at}: $ref {s}"))?;
                validate(root, &root["$defs"][name], v, at)?;
                true
            }
            "type" => match s.as_str().unwrap_or_default() {
                "object" => v.is_object(),
                "string" => v.is_string(),
                "integer" => v.is_u64() || v.is_i64(),
                "number" => v.is_number(),
                "boolean" => v.is_boolean(),
                "null" => v.is_null(),
                other => return Err(format!("{at}: type {other}")),
            },
            "const" => v == s,
            "enum" => s.as_array().is_some_and(|a| a.contains(v)),
            "minimum" => v.as_f64().is_none_or(|x| x >= s.as_f64().unwrap()),
            "maximum" => v.as_f64().is_none_or(|x| x <= s.as_f64().unwrap()),
            "minLength" => v.as_str().is_none_or(|x| x.chars().count() as u64 >= s.as_u64().unwrap()),
            "pattern" => {
                let n: usize = s
                    .as_str()
                    .and_then(|p| p.strip_prefix("^[0-9a-f]{")?.strip_suffix("}$")?.parse().ok())
                    .ok_or(format!("{at}: pattern {s} is outside the checked subset"))?;
                v.as_str()
                    .is_none_or(|x| x.len() == n && x.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
            }
            "properties" => {
                for (name, ps) in s.as_object().unwrap() {
                    if let Some(x) = v.get(name) {
                        validate(root, ps, x, &format!("{at}.{name}"))?;
                    }
                }
                true
            }
            "required" => s.as_array().unwrap().iter().all(|n| v.get(n.as_str().unwrap()).is_some()),
            "additionalProperties" => {
                assert_eq!(s, &json!(false), "{at}: only additionalProperties: false is checked");
                let known = obj["properties"].as_object().unwrap();
                v.as_object().is_none_or(|o| o.keys().all(|k| known.contains_key(k)))
            }
            "oneOf" => {
                let passing = s.as_array().unwrap().iter().filter(|alt| validate(root, alt, v, at).is_ok()).count();
                passing == 1
            }
            other => return Err(format!("{at}: keyword {other} is outside the checked subset")),
        };
        if !ok {
            return Err(format!("{at}: {v} fails {k}: {s}"));
        }
    }
    Ok(())
}

fn repo_file(path: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[tokio::test]
async fn every_event_and_every_frozen_example_validates_against_the_served_schema() {
    let h = H::new();
    let key = every_kind_of_event(&h).await;
    let served = h.call(Method::GET, "/v1/schemas/events.json", None, None).await;
    assert_eq!(served.status, StatusCode::OK);
    let schema = served.json();
    assert_eq!(schema, serde_json::from_str::<Value>(&repo_file("schemas/events/v1/events.json")).unwrap());
    let defs: BTreeSet<String> = schema["$defs"].as_object().unwrap().keys().cloned().collect();
    let events = lines(&feed(&h, &key, "after=0&limit=1000").await);
    for ev in &events {
        validate(&schema, &schema, ev, "event").unwrap_or_else(|e| panic!("{e}\n{ev}"));
    }
    // A frozen example per type, each valid and of its own type; an event
    // that lost a required field, or gained one, fails.
    for t in &defs {
        let example: Value = serde_json::from_str(&repo_file(&format!("schemas/events/v1/examples/{t}.json"))).unwrap();
        assert_eq!(&example["type"], t);
        validate(&schema, &schema, &example, t).unwrap_or_else(|e| panic!("{e}"));
        let mut fewer = example.clone();
        fewer.as_object_mut().unwrap().remove("tenant");
        assert!(validate(&schema, &schema, &fewer, t).is_err(), "{t} without tenant passed");
        let mut more = example.clone();
        more["surprise"] = json!(1);
        assert!(validate(&schema, &schema, &more, t).is_err(), "{t} with an unknown field passed");
    }
    // The feed's own types are all published.
    for ev in &events {
        assert!(defs.contains(ev["type"].as_str().unwrap()), "{ev}");
    }
    // The OpenAPI document names the route and the schema's.
    let api = h.call(Method::GET, "/openapi.json", None, None).await.json();
    assert!(api["paths"]["/v1/tenants/{tenant}/events"]["get"].is_object());
    assert!(api["paths"]["/v1/schemas/events.json"]["get"].is_object());
}

/// A restored snapshot starts its tenant's feed afresh at the restore:
/// what came before is another history, before and after a restart.
#[tokio::test]
async fn a_restore_starts_the_tenant_feed_afresh_and_a_restart_keeps_it_so() {
    use axum::body::Body;
    use axum::http::Request;
    let h = H::new();
    let key = every_kind_of_event(&h).await;
    let snap = h.call(Method::GET, "/v1/tenants/t1/snapshot", Some(&key), None).await;
    assert_eq!(h.put("t1", &key, "F", "a brand new sentence here").await.status, StatusCode::CREATED);
    let req = Request::put("/v1/tenants/t1/snapshot")
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", "application/octet-stream")
        .body(Body::from(snap.bytes))
        .unwrap();
    assert_eq!(h.send(req).await.status, StatusCode::OK);
    assert_eq!(h.put("t1", &key, "G", "one more sentence to follow").await.status, StatusCode::CREATED);
    let before = after_restore(&h, &key).await;
    let h = restart(h, EngineOptions::default());
    assert_eq!(after_restore(&h, &key).await, before);
}

/// The restored tenant's feed: 410 from the start, then only what followed
/// the restore; returns the oldest position.
async fn after_restore(h: &H, key: &str) -> String {
    let gone = feed(h, key, "after=0").await;
    assert_eq!((gone.status, gone.code()), (StatusCode::GONE, "events_trimmed".to_string()));
    let oldest = gone.headers["neardup-oldest-after"].to_str().unwrap().to_string();
    let rest = lines(&feed(h, key, &format!("after={oldest}")).await);
    let ids: Vec<&str> = rest.iter().map(|e| e["item_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["G"], "only what followed the restore");
    oldest
}
