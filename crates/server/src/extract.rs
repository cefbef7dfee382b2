//! Extractors whose rejections are the service's own JSON errors.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::http::request::Parts;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use crate::auth::Principal;
use crate::error::{ApiError, GatewayKind};
use crate::state::AppState;

impl FromRequestParts<AppState> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let unauth = || ApiError::gateway(GatewayKind::Unauthenticated);
        let value = parts.headers.get(AUTHORIZATION).ok_or_else(unauth)?;
        let value = value.to_str().map_err(|_| unauth())?;
        let token = value
            .strip_prefix("Bearer ")
            .or_else(|| value.strip_prefix("bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(unauth)?;
        state.keys.authenticate(token).ok_or_else(unauth)
    }
}

fn has_media_type(req: &Request, want: &str) -> bool {
    req.headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case(want))
}

async fn read_body(req: Request, state: &AppState, max: usize) -> Result<Bytes, ApiError> {
    Bytes::from_request(req, state).await.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::gateway(GatewayKind::PayloadTooLarge { max: max as u64 })
        } else {
            ApiError::invalid_request(format!("could not read the body: {e}"))
        }
    })
}

/// A JSON body (`Content-Type: application/json` required) and its length.
#[derive(Debug)]
pub struct ApiJson<T>(pub T, pub usize);

impl<T: DeserializeOwned> FromRequest<AppState> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        if !has_media_type(&req, "application/json") {
            return Err(ApiError::gateway(GatewayKind::UnsupportedMediaType { expected: "application/json" }));
        }
        let bytes = read_body(req, state, state.config.max_body_bytes).await?;
        let value = serde_json::from_slice(&bytes)
            .map_err(|e| ApiError::gateway(GatewayKind::InvalidJson { detail: e.to_string() }))?;
        Ok(ApiJson(value, bytes.len()))
    }
}

/// A raw body (`Content-Type: application/octet-stream` required), not yet
/// read, with its declared length: snapshot uploads, streamed by the
/// handler only after it has checked the caller's scope.
#[derive(Debug)]
pub struct OctetStream(pub axum::body::Body, pub Option<u64>);

impl FromRequest<AppState> for OctetStream {
    type Rejection = ApiError;

    async fn from_request(req: Request, _state: &AppState) -> Result<Self, Self::Rejection> {
        if !has_media_type(&req, "application/octet-stream") {
            return Err(ApiError::gateway(GatewayKind::UnsupportedMediaType { expected: "application/octet-stream" }));
        }
        let len = req
            .headers()
            .get(axum::http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok());
        Ok(OctetStream(req.into_body(), len))
    }
}

/// Path parameters with a JSON rejection.
#[derive(Debug)]
pub struct P<T>(pub T);

impl<T: DeserializeOwned + Send> FromRequestParts<AppState> for P<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| P(p.0))
            .map_err(|e| ApiError::invalid_request(format!("bad path parameter: {}", e.body_text())))
    }
}

/// Query parameters with a JSON rejection.
#[derive(Debug)]
pub struct Q<T>(pub T);

impl<T: DeserializeOwned + Send> FromRequestParts<AppState> for Q<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| Q(q.0))
            .map_err(|e| ApiError::invalid_request(format!("bad query parameter: {}", e.body_text())))
    }
}
