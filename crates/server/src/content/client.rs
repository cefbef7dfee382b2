//! One store's S3 client (the `object_store` crate): HEAD, then a read
//! streamed under a byte cap.
//!
//! The HTTP client is built here, not by `object_store`'s defaults, so that
//! it follows no redirect (a `3xx` is an error, never a fetch elsewhere),
//! uses no proxy from the environment, and gives up after the store's
//! timeout. The builder is given its endpoint, bucket, region and keys and
//! reads nothing from the environment, so no metadata endpoint is ever
//! asked for credentials.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::client::{HttpClient, HttpConnector};
use object_store::path::Path as ObjectPath;
use object_store::{Attribute, BackoffConfig, ClientOptions, GetOptions, ObjectStore, RetryConfig};

use super::error::{ContentError, ContentErrorKind};
use super::settings::StoreConfig;

/// An HTTP client without redirects or proxies.
#[derive(Debug)]
struct Direct {
    timeout: Duration,
    /// Plain HTTP: the store's endpoint is `http://` (which settings
    /// accept only on loopback or with `allow_http`).
    allow_http: bool,
}

impl HttpConnector for Direct {
    fn connect(&self, _: &ClientOptions) -> object_store::Result<HttpClient> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .timeout(self.timeout)
            .connect_timeout(self.timeout)
            .https_only(!self.allow_http)
            .build()
            .map_err(|e| object_store::Error::Generic { store: "S3", source: Box::new(e) })?;
        Ok(HttpClient::new(client))
    }
}

/// What a HEAD said.
#[derive(Debug, Clone)]
pub(crate) struct Head {
    pub size: u64,
    pub etag: Option<String>,
    pub version: Option<String>,
    pub content_type: Option<String>,
}

/// A store's client.
#[derive(Debug)]
pub(crate) struct Client {
    store: Arc<dyn ObjectStore>,
    name: String,
    timeout: Duration,
}

impl Client {
    /// Builds the client (no network call).
    pub(crate) fn new(c: &StoreConfig) -> Result<Client, String> {
        let store = AmazonS3Builder::new()
            .with_endpoint(&c.endpoint)
            .with_bucket_name(&c.bucket)
            .with_region(&c.region)
            .with_access_key_id(&c.credentials.access_key_id)
            .with_secret_access_key(&c.credentials.secret_access_key)
            .with_allow_http(c.endpoint.starts_with("http://"))
            .with_virtual_hosted_style_request(false)
            .with_retry(RetryConfig {
                backoff: BackoffConfig {
                    init_backoff: Duration::from_millis(50),
                    max_backoff: Duration::from_millis(500),
                    base: 2.0,
                },
                max_retries: 2,
                retry_timeout: c.timeout,
            })
            .with_http_connector(Direct { timeout: c.timeout, allow_http: c.endpoint.starts_with("http://") })
            .build()
            .map_err(|e| format!("store {:?}: {e}", c.name))?;
        Ok(Client { store: Arc::new(store), name: c.name.clone(), timeout: c.timeout })
    }

    fn unavailable(&self, detail: impl Into<String>) -> ContentError {
        ContentError::new(ContentErrorKind::Unavailable { store: self.name.clone(), detail: detail.into() })
    }

    fn map(&self, uri: &str, e: object_store::Error) -> ContentError {
        use object_store::Error as E;
        match e {
            E::NotFound { .. } => ContentError::new(ContentErrorKind::NotFound { uri: super::uri::shorten(uri) }),
            E::Precondition { .. } | E::NotModified { .. } => ContentError::new(ContentErrorKind::Changed),
            E::PermissionDenied { .. } | E::Unauthenticated { .. } => {
                ContentError::new(ContentErrorKind::Refused { store: self.name.clone() })
            }
            other => self.unavailable(other.to_string()),
        }
    }

    /// The object's size, ETag, version and type; no body is read.
    pub(crate) async fn head(&self, uri: &str, key: &ObjectPath) -> Result<Head, ContentError> {
        let opts = GetOptions { head: true, ..GetOptions::default() };
        let r = tokio::time::timeout(self.timeout, self.store.get_opts(key, opts))
            .await
            .map_err(|_| self.unavailable("HEAD timed out"))?
            .map_err(|e| self.map(uri, e))?;
        Ok(Head {
            size: r.meta.size,
            etag: r.meta.e_tag.clone(),
            version: r.meta.version.clone(),
            content_type: r.attributes.get(&Attribute::ContentType).map(|v| v.to_string()),
        })
    }

    /// The object as its HEAD described it (the read is conditional on its
    /// ETag or version), stopped as soon as it passes `cap` bytes; every
    /// byte received is added to `received`, whatever the outcome.
    pub(crate) async fn read(
        &self,
        uri: &str,
        key: &ObjectPath,
        head: &Head,
        cap: u64,
        received: &AtomicU64,
    ) -> Result<Vec<u8>, ContentError> {
        let opts = GetOptions { if_match: head.etag.clone(), version: head.version.clone(), ..GetOptions::default() };
        let read = async {
            let r = self.store.get_opts(key, opts).await.map_err(|e| self.map(uri, e))?;
            let mut body = Vec::with_capacity(head.size.min(cap) as usize);
            let mut stream = r.into_stream();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|e| self.map(uri, e))?;
                received.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                if (body.len() + chunk.len()) as u64 > cap {
                    return Err(ContentError::new(ContentErrorKind::TooLarge {
                        size: (body.len() + chunk.len()) as u64,
                        max: cap,
                    }));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(body)
        };
        tokio::time::timeout(self.timeout, read).await.map_err(|_| self.unavailable("read timed out"))?
    }
}
