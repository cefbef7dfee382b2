//! # neardup-server
//!
//! The neardup HTTP service: a multi-tenant JSON API over
//! [`neardup_index::Engine`] with per-tenant API keys (stored hashed, with
//! scopes), body-size and media-type guards, per-tenant quotas, request
//! timeouts, typed JSON errors with stable codes, Prometheus metrics and an
//! OpenAPI document generated from the code.
//!
//! ```
//! use std::sync::Arc;
//! use axum::body::Body;
//! use axum::http::Request;
//! use tower::ServiceExt;
//! use neardup_index::{Engine, EngineOptions};
//! use neardup_server::{app, AppState, GatewayConfig, KeyStore};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let dir = tempfile::tempdir().unwrap();
//! let engine = Arc::new(Engine::open(dir.path(), EngineOptions::default()).unwrap());
//! let keys = KeyStore::open(None, Some("operator-token-0123")).unwrap();
//! let state = AppState::new(engine, keys, GatewayConfig::default());
//! let req = Request::post("/v1/tenants")
//!     .header("authorization", "Bearer operator-token-0123")
//!     .header("content-type", "application/json")
//!     .body(Body::from(r#"{"tenant_id":"t1","config":{"normalizer":"seed","shingle_width":2,"threshold":0.75}}"#))
//!     .unwrap();
//! let resp = app(state).oneshot(req).await.unwrap();
//! assert_eq!(resp.status(), 201);
//! # });
//! ```
//!
//! Layers, lowest first: `auth`, `quota`, `metrics`, `journal` (the
//! gateway's own parts) → `state` → `extract` → `routes` (one module per
//! resource) → `serve` (socket, signals, checkpoints). Errors become HTTP
//! in exactly one place, [`ApiError::parts`]. `console` serves the review
//! console (`/console/`), a browser client of the same API.

mod auth;
mod config;
mod console;
mod content;
mod error;
mod extract;
mod journal;
mod metrics;
mod observe;
mod openapi;
mod quota;
mod routes;
mod serve;
mod state;
mod stream;
mod tenant_spec;
mod waiters;
mod wire;

pub use auth::{KeyStore, KeyStoreError, MintedKey, Principal, Scope};
pub use config::{FsyncSetting, ServeSettings, ServerConfig, StoreSetting};
pub use content::{
    load as load_content_stores, parse as parse_content_stores, ContentError, ContentErrorKind, ContentSource,
    ContentStores, Credentials as ContentCredentials, StoreConfig as ContentStoreConfig,
};
pub use error::{ApiError, ApiErrorKind, ApiResult, ErrorBody, ErrorDetail, GatewayKind, ServeError};
pub use journal::{AuditEntry, ContentAccess, DecisionEntry, Journal};
pub use metrics::Metrics;
pub use openapi::ApiDoc;
pub use quota::QuotaConfig;
pub use routes::app;
pub use serve::{init_logging, run, serve, serve_with, HEADER_READ_TIMEOUT};
pub use state::{AppState, GatewayConfig};
pub use tenant_spec::TenantSpec;
