//! Inputs in S3-compatible object stores: `s3://bucket/key`, a prefix
//! (`s3://bucket/shards/`) or a glob (`s3://bucket/shards/*.parquet`),
//! listed in key order and read as local files are: JSONL streamed by one
//! GET, Parquet by byte ranges (its footer, then each row group's column
//! chunks).
//!
//! The store is named the way S3 tools name it: `AWS_ENDPOINT_URL_S3`,
//! `AWS_ENDPOINT_URL` or `AWS_ENDPOINT` (or `--s3-endpoint`) for a store
//! other than AWS, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_SESSION_TOKEN`, `AWS_REGION` or `AWS_DEFAULT_REGION` (default
//! `us-east-1`); an `http://` endpoint is allowed plain HTTP. Requests are
//! made on a small runtime of this module's own, from the reading thread.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex, OnceLock};

use anyhow::Context;
use bytes::Bytes;
use futures_util::StreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::ObjectStore;

/// Whether an input names an object store (`s3://…`).
pub fn is_remote(name: &str) -> bool {
    name.starts_with("s3://")
}

/// The endpoint given by `--s3-endpoint`, which the environment's yields to.
static ENDPOINT: OnceLock<String> = OnceLock::new();

/// Sets the endpoint of every `s3://` input (`--s3-endpoint`).
pub fn set_endpoint(url: &str) {
    let _ = ENDPOINT.set(url.to_owned());
}

/// The runtime requests run on.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("neardup-s3")
            .enable_all()
            .build()
            .expect("a runtime for object store requests")
    })
}

/// Runs `f` to completion on the module's runtime.
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    runtime().block_on(f)
}

/// A bucket's client, made once per bucket.
fn bucket(name: &str) -> anyhow::Result<Arc<dyn ObjectStore>> {
    static BUCKETS: OnceLock<Mutex<HashMap<String, Arc<dyn ObjectStore>>>> = OnceLock::new();
    let mut buckets = BUCKETS.get_or_init(Mutex::default).lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(b) = buckets.get(name) {
        return Ok(Arc::clone(b));
    }
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let endpoint = ENDPOINT
        .get()
        .cloned()
        .or_else(|| var("AWS_ENDPOINT_URL_S3"))
        .or_else(|| var("AWS_ENDPOINT_URL"))
        .or_else(|| var("AWS_ENDPOINT"));
    let region = var("AWS_REGION").or_else(|| var("AWS_DEFAULT_REGION")).unwrap_or_else(|| "us-east-1".into());
    // A few quick retries of a failed request (a dropped connection, a
    // 503), not object_store's default three minutes of them.
    let retry = object_store::RetryConfig {
        backoff: object_store::BackoffConfig {
            init_backoff: std::time::Duration::from_millis(100),
            max_backoff: std::time::Duration::from_secs(5),
            base: 2.0,
        },
        max_retries: 5,
        retry_timeout: std::time::Duration::from_secs(60),
    };
    let mut b = AmazonS3Builder::from_env().with_bucket_name(name).with_region(region).with_retry(retry);
    if let Some(e) = &endpoint {
        b = b.with_endpoint(e).with_allow_http(e.starts_with("http://")).with_virtual_hosted_style_request(false);
    }
    let store: Arc<dyn ObjectStore> = Arc::new(b.build().with_context(|| format!("cannot use bucket {name:?}"))?);
    buckets.insert(name.to_owned(), Arc::clone(&store));
    Ok(store)
}

/// `s3://bucket/rest` as (bucket, rest).
fn split(url: &str) -> anyhow::Result<(&str, &str)> {
    let rest = url.strip_prefix("s3://").ok_or_else(|| anyhow::anyhow!("{url} is not an s3:// URL"))?;
    let (b, key) = rest.split_once('/').unwrap_or((rest, ""));
    if b.is_empty() {
        anyhow::bail!("{url} names no bucket");
    }
    Ok((b, key))
}

/// Every object `url` names, as (`s3://bucket/key`, size), in key order: an
/// object; a prefix ending in `/` (or the bucket), every object under it
/// whose name has no part starting with `.`; a key holding `*`, `?` or `[`,
/// the objects it matches (`*` does not cross `/`); a key that is neither
/// an object nor a glob, the objects under `key/`.
pub fn list(url: &str) -> anyhow::Result<Vec<(String, u64)>> {
    let (name, key) = split(url)?;
    let store = bucket(name)?;
    let under = |prefix: &str| -> anyhow::Result<Vec<(String, u64)>> {
        let prefix = prefix.trim_end_matches('/');
        let path = (!prefix.is_empty()).then(|| ObjectPath::from(prefix));
        let listed = block_on(store.list(path.as_ref()).collect::<Vec<_>>());
        let mut out = Vec::new();
        for meta in listed {
            let meta = meta.with_context(|| format!("cannot list {url}"))?;
            let k = meta.location.to_string();
            // Hidden below the prefix given, as in a local folder.
            let below = k.strip_prefix(prefix).unwrap_or(&k);
            if below.split('/').any(|part| part.starts_with('.')) {
                continue;
            }
            out.push((k, meta.size));
        }
        out.sort();
        Ok(out)
    };
    let named = |found: Vec<(String, u64)>| found.into_iter().map(|(k, n)| (format!("s3://{name}/{k}"), n)).collect();
    if let Some(glob_at) = key.find(['*', '?', '[']) {
        let pattern = glob::Pattern::new(key).with_context(|| format!("bad glob pattern {url}"))?;
        let options = glob::MatchOptions { require_literal_separator: true, ..glob::MatchOptions::new() };
        let base = &key[..key[..glob_at].rfind('/').map_or(0, |i| i + 1)];
        let found: Vec<_> = under(base)?.into_iter().filter(|(k, _)| pattern.matches_with(k, options)).collect();
        if found.is_empty() {
            anyhow::bail!("no objects match {url}");
        }
        return Ok(named(found));
    }
    if !key.is_empty() && !key.ends_with('/') {
        match block_on(store.head(&ObjectPath::from(key))) {
            Ok(meta) => return Ok(vec![(url.to_owned(), meta.size)]),
            Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(e).with_context(|| format!("cannot open {url}")),
        }
    }
    let found = under(key)?;
    if found.is_empty() {
        anyhow::bail!("no object {url}, and no objects under it");
    }
    Ok(named(found))
}

/// One object, read by byte ranges.
pub struct Object {
    store: Arc<dyn ObjectStore>,
    path: ObjectPath,
    url: String,
    pub size: u64,
    /// Ranges already fetched, kept while they are being read (a Parquet
    /// row group's column chunks: checked, then decoded).
    held: Mutex<Vec<(u64, Bytes)>>,
}

impl std::fmt::Debug for Object {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Object").field("url", &self.url).field("size", &self.size).finish()
    }
}

impl Object {
    /// The object at `url`, with its size (one HEAD request).
    pub fn open(url: &str) -> anyhow::Result<Object> {
        let object = Object::sized(url, 0)?;
        let meta = block_on(object.store.head(&object.path)).with_context(|| format!("cannot open {url}"))?;
        Ok(Object { size: meta.size, ..object })
    }

    /// The object at `url` of a size already known (from its listing).
    pub fn sized(url: &str, size: u64) -> anyhow::Result<Object> {
        let (name, key) = split(url)?;
        Ok(Object {
            store: bucket(name)?,
            path: ObjectPath::from(key),
            url: url.to_owned(),
            size,
            held: Mutex::default(),
        })
    }

    /// Bytes `start..start + len`: from a held range when one covers them,
    /// else fetched.
    pub fn range(&self, start: u64, len: usize) -> io::Result<Bytes> {
        let end = start + len as u64;
        if len == 0 {
            return Ok(Bytes::new());
        }
        if let Some(b) = self.held().iter().find_map(|(at, b)| {
            (*at <= start && end <= at + b.len() as u64).then(|| b.slice((start - at) as usize..(end - at) as usize))
        }) {
            return Ok(b);
        }
        self.fetch(start, end)
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Vec<(u64, Bytes)>> {
        self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn fetch(&self, start: u64, end: u64) -> io::Result<Bytes> {
        if end > self.size {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("{}: bytes {start}..{end} of an object of {}", self.url, self.size),
            ));
        }
        block_on(self.store.get_range(&self.path, start..end))
            .map_err(|e| io::Error::other(format!("{}: bytes {start}..{end}: {e}", self.url)))
    }

    /// The bytes from `start` to the end of the held range that covers it,
    /// else up to 1 MiB fetched (what a page header needs).
    pub fn from(&self, start: u64) -> io::Result<Bytes> {
        if let Some(b) = self
            .held()
            .iter()
            .find_map(|(at, b)| (*at <= start && start < at + b.len() as u64).then(|| b.slice((start - at) as usize..)))
        {
            return Ok(b);
        }
        self.fetch(start, self.size.min(start.saturating_add(1 << 20)))
    }

    /// Fetches `start..start + len` and holds it until [`Object::release`].
    pub fn hold(&self, start: u64, len: u64) -> io::Result<Bytes> {
        let bytes = self.range(start, len as usize)?;
        self.held().push((start, bytes.clone()));
        Ok(bytes)
    }

    /// Drops the held ranges.
    pub fn release(&self) {
        self.held().clear();
    }

    /// The whole object as a stream, by one GET.
    pub fn stream(&self) -> anyhow::Result<Stream> {
        let result = block_on(self.store.get(&self.path)).with_context(|| format!("cannot open {}", self.url))?;
        Ok(Stream { inner: result.into_stream(), chunk: Bytes::new(), url: self.url.clone() })
    }
}

/// An object's bytes in order, as `Read`.
pub struct Stream {
    inner: futures_util::stream::BoxStream<'static, object_store::Result<Bytes>>,
    chunk: Bytes,
    url: String,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream").field("url", &self.url).finish_non_exhaustive()
    }
}

impl io::Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.chunk.is_empty() {
            match block_on(self.inner.next()) {
                None => return Ok(0),
                Some(Ok(b)) => self.chunk = b,
                Some(Err(e)) => return Err(io::Error::other(format!("{}: {e}", self.url))),
            }
        }
        let n = buf.len().min(self.chunk.len());
        buf[..n].copy_from_slice(&self.chunk[..n]);
        self.chunk = self.chunk.slice(n..);
        Ok(n)
    }
}

/// Whether `e` (from this module) says the object is not there.
pub fn is_not_found(e: &anyhow::Error) -> bool {
    e.chain().any(|c| matches!(c.downcast_ref::<object_store::Error>(), Some(object_store::Error::NotFound { .. })))
}

/// Bytes a part of an upload holds before it is sent (S3 takes parts of
/// 5 MiB and more, the last one excepted).
const PART: usize = 8 << 20;

/// An object written as a stream (`-o`, `--pairs`, `--clusters` given an
/// `s3://bucket/key`): the bytes go up in parts of 8 MiB as they are
/// written (an S3 multipart upload), and the object appears only when
/// [`Upload::finish`] completes the upload — a run that fails or is killed
/// leaves nothing at the key (dropped unfinished, the upload is aborted;
/// killed, the store discards it when its incomplete uploads expire). An
/// object smaller than a part is one PUT, atomic too.
pub struct Upload {
    url: String,
    store: Arc<dyn ObjectStore>,
    key: ObjectPath,
    buf: Vec<u8>,
    upload: Option<Box<dyn object_store::MultipartUpload>>,
    done: bool,
}

impl std::fmt::Debug for Upload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upload").field("url", &self.url).field("done", &self.done).finish_non_exhaustive()
    }
}

impl Upload {
    /// An upload to `url` (`s3://bucket/key`); nothing is sent until a part
    /// fills or it is finished.
    pub fn create(url: &str) -> anyhow::Result<Upload> {
        let (name, key) = split(url)?;
        if key.is_empty() || key.ends_with('/') {
            anyhow::bail!("{url} names no object to write (s3://bucket/key)");
        }
        Ok(Upload {
            url: url.to_owned(),
            store: bucket(name)?,
            key: ObjectPath::from(key),
            buf: Vec::with_capacity(PART),
            upload: None,
            done: false,
        })
    }

    /// Sends what is buffered as the next part, starting the upload first.
    fn send_part(&mut self) -> io::Result<()> {
        let failed = |e: object_store::Error| io::Error::other(format!("writing {}: {e}", self.url));
        if self.upload.is_none() {
            self.upload = Some(block_on(self.store.put_multipart(&self.key)).map_err(failed)?);
        }
        let part = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(PART)));
        let upload = self.upload.as_mut().expect("started above");
        block_on(upload.put_part(part.into())).map_err(failed)
    }

    /// Sends the rest and makes the object appear whole.
    pub fn finish(mut self) -> anyhow::Result<()> {
        let url = self.url.clone();
        let context = || format!("cannot write {url}");
        if self.upload.is_none() {
            let body = Bytes::from(std::mem::take(&mut self.buf));
            block_on(self.store.put(&self.key, body.into())).with_context(context)?;
        } else {
            if !self.buf.is_empty() {
                self.send_part().with_context(context)?;
            }
            let upload = self.upload.as_mut().expect("started");
            block_on(upload.complete()).with_context(context)?;
        }
        self.done = true;
        Ok(())
    }
}

impl io::Write for Upload {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = data.len().min(PART - self.buf.len());
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == PART {
            self.send_part()?;
        }
        Ok(n)
    }

    /// Parts go when they are full: a flush sends nothing (the object
    /// appears only at [`Upload::finish`]).
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        if let (false, Some(upload)) = (self.done, self.upload.as_mut()) {
            let _ = block_on(upload.abort());
        }
    }
}
