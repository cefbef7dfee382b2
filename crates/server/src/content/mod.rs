//! Governed content: items whose text lives in an S3-compatible store and
//! arrives as a `content_uri` instead of inline `content`.
//!
//! - `settings.rs`: the operator's stores (`--content-stores FILE`): name,
//!   endpoint, bucket, prefix, credentials, limits, and the tenants that
//!   may read from each.
//! - `uri.rs`: `s3://BUCKET/KEY` taken apart, and refused unless it lies in
//!   one of the tenant's stores — before any network call.
//! - `client.rs`: HEAD (size and type checked against the limits before
//!   anything is read), then a read streamed under the byte cap,
//!   conditional on the ETag the HEAD saw; no redirects, no proxies.
//! - `source.rs`: the object's URI, store, ETag, version and BLAKE3,
//!   recorded with the item.
//! - `error.rs`: why a read failed.
//!
//! Replay and rebuild never read a store: the command log records what
//! was read (the text, or only its features under `retain_content:
//! false`) with its source, so a log replays to the same state whatever
//! has happened to the objects since. Only people reading an item's text
//! again (the review console's comparison) read the object again, and then
//! only if its digest still matches what was ingested.
//!
//! Every read is counted per store on `/metrics` and, through
//! [`ContentStores::read`]'s caller, is an audit event.

mod client;
mod error;
mod settings;
mod source;
mod uri;

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

pub use error::{ContentError, ContentErrorKind};
pub use settings::{load, parse, Credentials, StoreConfig};
pub use source::ContentSource;
pub use uri::{shorten, ContentUri};

/// Why content is read (audit events say it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// Resolving a `content_uri` for an upsert.
    Ingest,
    /// Showing an item's text to a reviewer.
    Review,
}

impl Purpose {
    /// The name audit events use.
    pub fn as_str(self) -> &'static str {
        match self {
            Purpose::Ingest => "ingest",
            Purpose::Review => "review",
        }
    }
}

/// A read of an item's content, for [`crate::AppState::read_content`].
#[derive(Debug, Clone, Copy)]
pub struct ReadRequest<'a> {
    /// The item whose content it is.
    pub item_id: &'a str,
    /// `s3://BUCKET/KEY`.
    pub uri: &'a str,
    /// Why.
    pub purpose: Purpose,
    /// The most bytes taken (the tenant's `max_item_bytes`; the store's
    /// own limit applies too).
    pub cap: u64,
    /// The object must still be this one (same digest).
    pub expect: Option<&'a ContentSource>,
}

/// Content as read.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The text.
    pub text: String,
    /// The object's media type essence (`text/plain` when it had none).
    pub media_type: String,
    /// Where it came from.
    pub source: ContentSource,
}

#[derive(Debug, Default)]
struct Counters {
    reads: AtomicU64,
    bytes: AtomicU64,
    failures: Mutex<BTreeMap<&'static str, u64>>,
}

#[derive(Debug)]
struct Store {
    config: StoreConfig,
    client: Result<client::Client, String>,
    counters: Counters,
}

/// The operator's content stores and their clients.
#[derive(Debug, Default)]
pub struct ContentStores {
    stores: Vec<Store>,
}

impl ContentStores {
    /// Clients for `configs` (no network call). A store whose client cannot
    /// be built answers every read `503` and says why in the log; config
    /// validation builds each once, so this is not expected.
    pub fn new(configs: Vec<StoreConfig>) -> ContentStores {
        let stores = configs
            .into_iter()
            .map(|config| {
                let client = client::Client::new(&config);
                if let Err(e) = &client {
                    tracing::error!(store = %config.name, error = %e, "content store client");
                }
                Store { config, client, counters: Counters::default() }
            })
            .collect();
        ContentStores { stores }
    }

    /// Checks that every store's client can be built (at start).
    pub fn check(configs: &[StoreConfig]) -> Result<(), String> {
        configs.iter().try_for_each(|c| client::Client::new(c).map(|_| ()))
    }

    /// The names of the stores `tenant` may read.
    pub fn names_for(&self, tenant: &str) -> Vec<String> {
        self.stores
            .iter()
            .filter(|s| s.config.tenants.iter().any(|t| t == tenant))
            .map(|s| s.config.name.clone())
            .collect()
    }

    /// The store and object key `uri` names for `tenant`, or why not; no
    /// network call.
    fn locate(&self, tenant: &str, uri: &str) -> Result<(&Store, object_store::path::Path), ContentError> {
        let u = ContentUri::parse(uri)?;
        let refused = || ContentError::new(ContentErrorKind::NotAllowed { uri: uri::shorten(uri) });
        let store = self
            .stores
            .iter()
            .find(|s| s.config.bucket == u.bucket && s.config.tenants.iter().any(|t| t == tenant))
            .ok_or_else(refused)?;
        if !u.key.starts_with(&store.config.prefix) {
            return Err(refused());
        }
        let key = object_store::path::Path::parse(&u.key).map_err(|e| {
            ContentError::new(ContentErrorKind::InvalidUri { uri: uri::shorten(uri), reason: e.to_string() })
        })?;
        Ok((store, key))
    }

    /// Reads `uri` for `tenant`: refused before any network call unless it
    /// lies in one of the tenant's stores; a HEAD checks size (against the
    /// store's limit and `cap`) and media type before the body is read;
    /// the body is read under the same cap, conditional on the ETag seen.
    /// With `expect`, the object must still be the one that was ingested
    /// (same digest), or the read is refused as [`ContentErrorKind::Changed`].
    pub async fn read(
        &self,
        tenant: &str,
        uri: &str,
        cap: u64,
        expect: Option<&ContentSource>,
    ) -> Result<Fetched, ContentError> {
        let (store, key) = self.locate(tenant, uri)?;
        let r = read_from(store, uri, &key, cap, expect).await;
        match &r {
            Ok(_) => {
                store.counters.reads.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                if let Ok(mut m) = store.counters.failures.lock() {
                    *m.entry(e.cause()).or_default() += 1;
                }
            }
        }
        r
    }

    /// Prometheus series per store: reads, bytes, failures by cause.
    pub fn render_metrics(&self, out: &mut String) {
        if self.stores.is_empty() {
            return;
        }
        type Counter = fn(&Counters) -> u64;
        let counters: [(&str, &str, Counter); 2] = [
            ("reads", "Objects read whole from a content store.", |c| c.reads.load(Ordering::Relaxed)),
            ("read_bytes", "Object bytes received from a content store, failed reads included.", |c| {
                c.bytes.load(Ordering::Relaxed)
            }),
        ];
        for (name, help, value) in counters {
            let _ = writeln!(
                out,
                "# HELP neardup_content_{name}_total {help}\n# TYPE neardup_content_{name}_total counter"
            );
            for s in &self.stores {
                let _ =
                    writeln!(out, "neardup_content_{name}_total{{store=\"{}\"}} {}", s.config.name, value(&s.counters));
            }
        }
        let _ = writeln!(
            out,
            "# HELP neardup_content_read_failures_total Reads refused or failed, by cause.\n# TYPE \
             neardup_content_read_failures_total counter"
        );
        for s in &self.stores {
            let Ok(m) = s.counters.failures.lock() else { continue };
            for (cause, n) in m.iter() {
                let _ = writeln!(
                    out,
                    "neardup_content_read_failures_total{{store=\"{}\",cause=\"{cause}\"}} {n}",
                    s.config.name
                );
            }
        }
    }
}

async fn read_from(
    store: &Store,
    uri: &str,
    key: &object_store::path::Path,
    cap: u64,
    expect: Option<&ContentSource>,
) -> Result<Fetched, ContentError> {
    let client = store.client.as_ref().map_err(|e| {
        ContentError::new(ContentErrorKind::Unavailable { store: store.config.name.clone(), detail: e.clone() })
    })?;
    let cap = cap.min(store.config.max_object_bytes);
    let head = client.head(uri, key).await?;
    if head.size > cap {
        return Err(ContentError::new(ContentErrorKind::TooLarge { size: head.size, max: cap }));
    }
    // An object stored without a type is taken as plain text (and still
    // has to be UTF-8).
    let content_type = head.content_type.clone().unwrap_or_else(|| "text/plain".into());
    if !store.config.allows_media_type(&content_type) {
        return Err(ContentError::new(ContentErrorKind::MediaType { found: content_type }));
    }
    let bytes = client.read(uri, key, &head, cap, &store.counters.bytes).await?;
    let blake3 = blake3::hash(&bytes).to_hex().to_string();
    if let Some(e) = expect {
        if e.blake3 != blake3 {
            return Err(ContentError::new(ContentErrorKind::Changed));
        }
    }
    let text = String::from_utf8(bytes).map_err(|_| ContentError::new(ContentErrorKind::NotText))?;
    let media_type = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    Ok(Fetched {
        text,
        media_type,
        source: ContentSource {
            uri: uri.to_string(),
            store: store.config.name.clone(),
            etag: head.etag,
            version: head.version,
            blake3,
        },
    })
}
