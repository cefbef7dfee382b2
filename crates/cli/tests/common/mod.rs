//! What the tests that run `neardup serve` share: starting it, and a
//! minimal HTTP/1.1 client over loopback.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

pub const ADMIN: &str = "e2e-operator-token-0123456789";

/// The repository's root folder.
pub fn root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A file of the repository (`rel` from its root), read whole.
pub fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

pub struct Server {
    pub child: Child,
    pub addr: String,
}

pub fn start(dir: &Path) -> Server {
    start_with(dir, &["--fsync", "always", "--checkpoint-interval-secs", "0"])
}

impl Drop for Server {
    /// A server outlives no test: SIGKILLed (and reaped) when dropped.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `neardup serve` on a free loopback port with its data in
/// `dir/data` and its log appended to `dir/server.log`, and `args` added.
pub fn start_with(dir: &Path, args: &[&str]) -> Server {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("server.log")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["serve", "--listen", "127.0.0.1:0", "--log-format", "text", "--data-dir"])
        .arg(dir.join("data"))
        .args(args)
        .env("NEARDUP_ADMIN_TOKEN", ADMIN)
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log))
        .spawn()
        .expect("spawn neardup serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let Some(addr) = line.trim().strip_prefix("listening on ").map(str::to_string) else {
        let _ = child.wait();
        let log = std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
        panic!("neardup serve did not start ({line:?}); its log:\n{log}");
    };
    Server { child, addr }
}

/// A minimal HTTP/1.1 client: one request per connection.
pub fn http(
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    ctype: &str,
    body: &[u8],
) -> std::io::Result<(u16, Vec<u8>)> {
    http_with_headers(addr, method, path, token, ctype, body).map(|(status, _, body)| (status, body))
}

/// A response: status, headers (names lowercased) and body.
pub type Response = (u16, Vec<(String, String)>, Vec<u8>);

/// [`http`] with the response headers.
pub fn http_with_headers(
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    ctype: &str,
    body: &[u8],
) -> std::io::Result<Response> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut head =
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    if let Some(t) = token {
        head.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    if !body.is_empty() {
        head.push_str(&format!("Content-Type: {ctype}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes())?;
    s.write_all(body)?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").ok_or_else(|| std::io::Error::other("no header end"))?;
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other("bad status line"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    if headers.iter().any(|(k, v)| k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked")) {
        body = dechunk(&body);
    }
    Ok((status, headers, body))
}

pub fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(i) = b.windows(2).position(|w| w == b"\r\n") {
        let n = usize::from_str_radix(std::str::from_utf8(&b[..i]).unwrap().trim(), 16).unwrap();
        if n == 0 {
            break;
        }
        out.extend_from_slice(&b[i + 2..i + 2 + n]);
        b = &b[i + 4 + n..];
    }
    out
}

pub fn call(addr: &str, method: &str, path: &str, token: Option<&str>, body: Option<Value>) -> (u16, Value) {
    let bytes = body.map(|v| v.to_string().into_bytes()).unwrap_or_default();
    let (status, out) = http(addr, method, path, token, "application/json", &bytes).unwrap();
    let v = if out.is_empty() { Value::Null } else { serde_json::from_slice(&out).unwrap_or(Value::Null) };
    (status, v)
}
