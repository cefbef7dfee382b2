//! A three-server NATS JetStream cluster on loopback, for tests and
//! benchmarks: `nats-server` (Debian's package) started as child processes
//! on ports chosen free at run time, each with its own store directory,
//! killed when dropped.
//!
//! [`NatsCluster::start`] returns once every server says it is healthy
//! (its monitoring port's `/healthz`: JetStream enabled and in contact
//! with a meta leader). A request sent before that is not answered, and
//! a client waits out its whole timeout for it (async-nats: 5 s for a
//! JetStream request) — seconds per test. [`NatsCluster::start_unsettled`]
//! returns as soon as the client ports accept, for tests of what a node
//! does when the servers came up a moment ago.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One server of the cluster.
#[derive(Debug)]
struct Server {
    name: String,
    client_port: u16,
    monitor_port: u16,
    child: Option<Child>,
    args: Vec<String>,
}

/// A NATS cluster of child processes.
#[derive(Debug)]
pub struct NatsCluster {
    servers: Vec<Server>,
    _dir: tempfile::TempDir,
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The `nats-server` binary: `NEARDUP_NATS_SERVER`, or on `PATH`.
pub fn nats_server_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("NEARDUP_NATS_SERVER") {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| Path::new(d).join("nats-server")).find(|p| p.is_file())
}

impl NatsCluster {
    /// Starts `n` JetStream servers clustered on loopback and waits until
    /// each is healthy.
    pub fn start(n: usize) -> std::io::Result<NatsCluster> {
        NatsCluster::start_with(n, &[])
    }

    /// Starts `n` servers as [`NatsCluster::start`] does, each also given
    /// `extra` arguments (e.g. `--user`, `--pass`, `--tls`, `--tlscert`).
    pub fn start_with(n: usize, extra: &[String]) -> std::io::Result<NatsCluster> {
        let c = NatsCluster::launch(n, extra)?;
        for s in &c.servers {
            wait_healthy(s.monitor_port, Duration::from_secs(30))?;
        }
        Ok(c)
    }

    /// Starts `n` servers and returns once each accepts client
    /// connections, which may be before JetStream answers requests.
    pub fn start_unsettled(n: usize) -> std::io::Result<NatsCluster> {
        NatsCluster::launch(n, &[])
    }

    fn launch(n: usize, extra: &[String]) -> std::io::Result<NatsCluster> {
        let bin = nats_server_binary().ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "nats-server not found: install Debian's nats-server (apt-get install nats-server) or set NEARDUP_NATS_SERVER",
            )
        })?;
        let dir = tempfile::tempdir()?;
        let ports: Vec<(u16, u16, u16)> =
            (0..n).map(|_| Ok((free_port()?, free_port()?, free_port()?))).collect::<std::io::Result<_>>()?;
        let routes: Vec<String> = ports.iter().map(|(_, c, _)| format!("nats://127.0.0.1:{c}")).collect();
        let mut servers = Vec::new();
        for (i, (client, cluster, monitor)) in ports.iter().enumerate() {
            let name = format!("n{}", i + 1);
            let store = dir.path().join(&name);
            std::fs::create_dir_all(&store)?;
            let mut args = vec![
                "-a".into(),
                "127.0.0.1".into(),
                "-p".into(),
                client.to_string(),
                "-m".into(),
                monitor.to_string(),
                "-js".into(),
                "-sd".into(),
                store.display().to_string(),
                "--server_name".into(),
                name.clone(),
            ];
            if n > 1 {
                args.extend([
                    "--cluster_name".into(),
                    "neardup-test".into(),
                    "--cluster".into(),
                    format!("nats://127.0.0.1:{cluster}"),
                    "--routes".into(),
                    routes.join(","),
                ]);
            }
            args.extend(extra.iter().cloned());
            let mut s = Server { name, client_port: *client, monitor_port: *monitor, child: None, args };
            s.spawn(&bin)?;
            servers.push(s);
        }
        let c = NatsCluster { servers, _dir: dir };
        for s in &c.servers {
            wait_port(s.client_port, Duration::from_secs(20))?;
        }
        Ok(c)
    }

    /// Client URLs, comma-separated (as `--cluster` takes them).
    pub fn urls(&self) -> String {
        self.servers.iter().map(|s| format!("nats://127.0.0.1:{}", s.client_port)).collect::<Vec<_>>().join(",")
    }

    /// SIGKILLs server `i` (0-based).
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.servers[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Restarts server `i` with its store and waits for its client port.
    pub fn restart(&mut self, i: usize) -> std::io::Result<()> {
        let bin = nats_server_binary().ok_or_else(|| std::io::Error::other("nats-server not found"))?;
        self.kill(i);
        self.servers[i].spawn(&bin)?;
        wait_port(self.servers[i].client_port, Duration::from_secs(20))
    }

    /// Server names, in order.
    pub fn names(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.name.clone()).collect()
    }
}

impl Server {
    fn spawn(&mut self, bin: &Path) -> std::io::Result<()> {
        let child = Command::new(bin).args(&self.args).stdout(Stdio::null()).stderr(Stdio::null()).spawn()?;
        self.child = Some(child);
        Ok(())
    }
}

fn wait_port(port: u16, within: Duration) -> std::io::Result<()> {
    poll(within, || match std::net::TcpStream::connect(("127.0.0.1", port)) {
        Ok(_) => Ok(()),
        Err(_) => Err(format!("nats-server on port {port}")),
    })
}

/// Waits until the server's `/healthz` answers `ok`.
fn wait_healthy(monitor_port: u16, within: Duration) -> std::io::Result<()> {
    use std::io::{Read, Write};
    poll(within, || {
        let answer = std::net::TcpStream::connect(("127.0.0.1", monitor_port)).and_then(|mut c| {
            c.set_read_timeout(Some(Duration::from_secs(2)))?;
            c.write_all(b"GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
            let mut body = String::new();
            c.read_to_string(&mut body)?;
            Ok(body)
        });
        let last = match answer {
            Ok(body) if body.contains(r#""status":"ok""#) => return Ok(()),
            Ok(body) => body.lines().last().unwrap_or_default().to_string(),
            Err(e) => e.to_string(),
        };
        Err(format!("nats-server with monitoring port {monitor_port} not healthy: {last}"))
    })
}

/// Calls `check` every 50 ms until it succeeds; past `within`, its last
/// error as a timeout.
fn poll(within: Duration, mut check: impl FnMut() -> Result<(), String>) -> std::io::Result<()> {
    let deadline = Instant::now() + within;
    loop {
        let last = match check() {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        if Instant::now() > deadline {
            return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, last));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Drop for NatsCluster {
    fn drop(&mut self) {
        for i in 0..self.servers.len() {
            self.kill(i);
        }
    }
}
