//! A harness: an engine in a temp dir, the app, and a JSON request helper.
#![allow(dead_code)]

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::BodyExt;
use neardup_index::{Engine, EngineOptions};
use neardup_server::{app, AppState, GatewayConfig, KeyStore};
use serde_json::{json, Value};
use tower::ServiceExt;

pub const ADMIN: &str = "operator-token-for-tests";
pub const SEED: &str = r#"{"normalizer":"seed","shingle_width":2,"threshold":0.75}"#;

pub struct H {
    pub state: AppState,
    pub dir: tempfile::TempDir,
}

pub struct Resp {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub bytes: Vec<u8>,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.bytes)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?} {}", self.status, String::from_utf8_lossy(&self.bytes)))
    }

    pub fn code(&self) -> String {
        self.json()["error"]["code"].as_str().unwrap_or_default().to_string()
    }
}

impl H {
    pub fn new() -> H {
        H::with(GatewayConfig::default(), EngineOptions::default())
    }

    pub fn with(cfg: GatewayConfig, opts: EngineOptions) -> H {
        let dir = tempfile::tempdir().unwrap();
        let engine = Arc::new(Engine::open(dir.path(), opts).unwrap());
        let keys = KeyStore::open(Some(dir.path().join("keys.json")), Some(ADMIN)).unwrap();
        H { state: AppState::new(engine, keys, cfg), dir }
    }

    pub async fn send(&self, req: Request<Body>) -> Resp {
        let resp = app(self.state.clone()).oneshot(req).await.unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes().to_vec();
        Resp { status, headers, bytes }
    }

    pub async fn call(&self, method: Method, uri: &str, token: Option<&str>, body: Option<Value>) -> Resp {
        let mut b = Request::builder().method(method).uri(uri);
        if let Some(t) = token {
            b = b.header("authorization", format!("Bearer {t}"));
        }
        let req = match body {
            Some(v) => b.header("content-type", "application/json").body(Body::from(v.to_string())).unwrap(),
            None => b.body(Body::empty()).unwrap(),
        };
        self.send(req).await
    }

    /// Creates a tenant (seed config unless `config` is given); returns its key.
    pub async fn tenant(&self, id: &str, config: Option<&str>) -> String {
        let config: Value = serde_json::from_str(config.unwrap_or(SEED)).unwrap();
        let r =
            self.call(Method::POST, "/v1/tenants", Some(ADMIN), Some(json!({"tenant_id": id, "config": config}))).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", String::from_utf8_lossy(&r.bytes));
        let v = r.json();
        assert_eq!(v["tenant_id"], id);
        v["api_key"].as_str().unwrap().to_string()
    }

    pub async fn put(&self, tenant: &str, key: &str, id: &str, content: &str) -> Resp {
        self.call(
            Method::PUT,
            &format!("/v1/tenants/{tenant}/items/{id}"),
            Some(key),
            Some(json!({"content": content})),
        )
        .await
    }
}
