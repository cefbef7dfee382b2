//! End to end over a real loopback socket: start `neardup serve`, walk the
//! seed's demonstration, SIGKILL it in the middle of a stream of upserts,
//! restart it on the same data directory and find every acknowledged item.

mod common;

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{call, http, start, ADMIN};
use serde_json::json;

#[test]
fn seed_demo_kill_restart_keeps_every_acknowledged_item() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start(dir.path());
    let addr = server.addr.clone();

    assert_eq!(call(&addr, "GET", "/healthz", None, None).0, 200);
    assert_eq!(call(&addr, "GET", "/openapi.json", None, None).0, 200);
    let (s, v) = call(
        &addr,
        "POST",
        "/v1/tenants",
        Some(ADMIN),
        Some(json!({"tenant_id": "t1", "config": {"normalizer": "seed", "shingle_width": 2, "threshold": 0.75}})),
    );
    assert_eq!(s, 201, "{v}");
    let key = v["api_key"].as_str().unwrap().to_string();
    let put = |id: &str, content: &str| {
        call(&addr, "PUT", &format!("/v1/tenants/t1/items/{id}"), Some(&key), Some(json!({"content": content})))
    };

    // The seed's A/B/C.
    let (s, a) = put("A", "red fox runs very fast");
    assert_eq!((s, a["decision"].as_str()), (201, Some("distinct")));
    let (s, b) = put("B", "red fox runs very fast today");
    assert_eq!(s, 201);
    assert_eq!(b["candidates"][0]["item_id"], "A");
    assert_eq!(b["candidates"][0]["score"], 0.8);
    assert_eq!(b["decision"], "near_duplicate");
    let (_, c) = put("C", "database backup completed nightly");
    assert_eq!(c["decision"], "distinct");
    assert_eq!(c["candidates"], json!([]));

    // Tombstone A: GET answers 404 and A is no longer B's candidate.
    assert_eq!(call(&addr, "DELETE", "/v1/tenants/t1/items/A?epoch=1", Some(&key), None).0, 200);
    assert_eq!(call(&addr, "GET", "/v1/tenants/t1/items/A", Some(&key), None).0, 404);
    assert_eq!(call(&addr, "GET", "/v1/tenants/t1/items/B", Some(&key), None).0, 200);

    // Snapshot download and restore upload.
    let (s, snap) = http(&addr, "GET", "/v1/tenants/t1/snapshot", Some(&key), "", &[]).unwrap();
    assert_eq!(s, 200);
    assert_eq!(&snap[..8], b"NDUPSNAP");
    let (s, body) =
        http(&addr, "PUT", "/v1/tenants/t1/snapshot", Some(&key), "application/octet-stream", &snap).unwrap();
    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(call(&addr, "GET", "/v1/tenants/t1/items/A", Some(&key), None).0, 404);
    assert_eq!(call(&addr, "GET", "/v1/tenants/t1/items/C", Some(&key), None).0, 200);

    // A stream of upserts, killed with SIGKILL in the middle.
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (acked, stop, addr, key) = (Arc::clone(&acked), Arc::clone(&stop), addr.clone(), key.clone());
        std::thread::spawn(move || {
            for i in 0.. {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let id = format!("s{i:05}");
                let body =
                    json!({"content": format!("stream document {i} about topic {} with words {}", i % 17, i * 7919)});
                match http(
                    &addr,
                    "PUT",
                    &format!("/v1/tenants/t1/items/{id}"),
                    Some(&key),
                    "application/json",
                    body.to_string().as_bytes(),
                ) {
                    Ok((201, _)) => acked.lock().unwrap().push(id),
                    Ok((status, b)) => panic!("unexpected {status}: {}", String::from_utf8_lossy(&b)),
                    Err(_) => break,
                }
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while acked.lock().unwrap().len() < 150 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    server.child.kill().unwrap(); // SIGKILL on Unix
    server.child.wait().unwrap();
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() >= 150, "only {} upserts acknowledged", acked.len());

    // Restart on the same data dir: every acknowledged item is there.
    let mut server = start(dir.path());
    let addr = server.addr.clone();
    for id in &acked {
        let (s, v) = call(&addr, "GET", &format!("/v1/tenants/t1/items/{id}"), Some(&key), None);
        assert_eq!(s, 200, "acknowledged {id} lost after SIGKILL: {v}");
    }
    assert_eq!(call(&addr, "GET", "/v1/tenants/t1/items/A", Some(&key), None).0, 404);
    let (_, b) = call(&addr, "GET", "/v1/tenants/t1/items/B/candidates", Some(&key), None);
    assert_eq!(b["candidates"], json!([]), "A stays tombstoned across restart");
    let (s, d) = call(
        &addr,
        "POST",
        "/v1/tenants/t1/decide",
        Some(&key),
        Some(json!({"content": "red fox runs very fast today"})),
    );
    assert_eq!(s, 200);
    assert_eq!(d["candidates"][0]["item_id"], "B");

    // Graceful stop: SIGTERM drains, flushes and exits 0.
    let pid = server.child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let status = server.child.wait().unwrap();
    assert!(status.success(), "exit after SIGTERM: {status:?}");
}

#[test]
fn bad_configuration_exits_2_with_a_clear_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["serve", "--listen", "not-an-address"])
        .env("NEARDUP_ADMIN_TOKEN", ADMIN)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--listen"));
    let out = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env_remove("NEARDUP_ADMIN_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("NEARDUP_ADMIN_TOKEN"));
    let help = Command::new(env!("CARGO_BIN_EXE_neardup")).args(["serve", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&help.stdout);
    for opt in [
        "--listen",
        "--data-dir",
        "--fsync",
        "--store",
        "--max-body-bytes",
        "--request-timeout-ms",
        "--rate-limit-rps",
        "--snapshot-key-file",
        "--config",
        "NEARDUP_ADMIN_TOKEN",
    ] {
        assert!(text.contains(opt), "{opt} undocumented");
    }
}

/// Issue 15: a client that sends a whole oversized body before reading the
/// answer (Python's urllib does) gets the 413, not a reset connection.
#[test]
fn an_oversized_body_sent_whole_still_gets_its_413() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let body = vec![b' '; 9 << 20];
    let mut s = std::net::TcpStream::connect(&server.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let head = format!(
        "PUT /v1/tenants/t/items/a HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(&body).expect("the server reads the body it refuses instead of resetting the connection");
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("payload_too_large"), "{answer}");
}

/// Issue 40: the documented precedence of `neardup serve`'s options, flag >
/// environment variable > `--config` file > default, through the binary.
/// Each layer sets an invalid value of its own, so the refusal names the
/// value that won; with none set, the default listen address is valid and
/// the run stops at the next check (no operator credential), never serving.
#[test]
fn serve_options_take_flag_then_environment_then_file_then_default() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("serve.toml");
    std::fs::write(&file, "listen = \"from-file\"\nlog_format = \"file-format\"\n").unwrap();
    let serve = |flag: bool, env: bool, config: bool| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_neardup"));
        c.arg("serve").env_remove("NEARDUP_ADMIN_TOKEN").env_remove("NEARDUP_CONFIG");
        for v in ["NEARDUP_LISTEN", "NEARDUP_LOG_FORMAT", "NEARDUP_ADMIN_TOKEN_FILE"] {
            c.env_remove(v);
        }
        if flag {
            c.args(["--listen", "from-flag", "--log-format", "flag-format"]);
        }
        if env {
            c.env("NEARDUP_LISTEN", "from-env").env("NEARDUP_LOG_FORMAT", "env-format");
        }
        if config {
            c.arg("--config").arg(&file);
        }
        let out = c.output().unwrap();
        assert_eq!(out.status.code(), Some(2), "a usage error");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert!(serve(true, true, true).contains("\"from-flag\""));
    assert!(serve(false, true, true).contains("\"from-env\""));
    assert!(serve(false, false, true).contains("\"from-file\""));
    let e = serve(false, false, false);
    assert!(e.contains("no operator credential"), "{e}");
    // The same order for a second option, checked after the credential.
    let with_token = |flag: bool, env: bool| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_neardup"));
        c.args(["serve", "--listen", "127.0.0.1:0", "--config"]).arg(&file);
        c.env("NEARDUP_ADMIN_TOKEN", "a-test-operator-token-0123").env_remove("NEARDUP_LOG_FORMAT");
        if flag {
            c.args(["--log-format", "flag-format"]);
        }
        if env {
            c.env("NEARDUP_LOG_FORMAT", "env-format");
        }
        let out = c.output().unwrap();
        assert_eq!(out.status.code(), Some(2), "a usage error");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert!(with_token(true, true).contains("\"flag-format\""));
    assert!(with_token(false, true).contains("\"env-format\""));
    assert!(with_token(false, false).contains("\"file-format\""));
}
