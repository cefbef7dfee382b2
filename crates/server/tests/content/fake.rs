//! A scripted HTTP server on loopback that records every request line it
//! receives: for tests that must see exactly what reached the network (a
//! HEAD and nothing after it; nothing at all).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

pub struct Server {
    port: u16,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// Answers each request with `respond(method, path)`, a whole HTTP/1.1
    /// response; one request per connection. The thread lives as long as
    /// the test process.
    pub fn start(respond: impl Fn(&str, &str) -> String + Send + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&requests);
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut first = String::new();
                if reader.read_line(&mut first).is_err() {
                    continue;
                }
                // The rest of the head; these requests carry no body.
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let mut parts = first.split_whitespace();
                let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
                seen.lock().unwrap().push(format!("{method} {path}"));
                let mut resp = respond(method, path);
                resp = resp.replacen("\r\n", "\r\nconnection: close\r\n", 1);
                let _ = conn.write_all(resp.as_bytes());
            }
        });
        Server { port, requests }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `METHOD PATH` of each request so far.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

/// A HEAD answer for an object of `size` bytes.
pub fn object_head(size: u64, content_type: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-length: {size}\r\ncontent-type: {content_type}\r\netag: \"0123abcd\"\r\n\
         last-modified: Sat, 05 Dec 2026 12:00:00 GMT\r\n\r\n"
    )
}

/// A TCP proxy on loopback to `target`'s port that calls `trip` (once)
/// before it forwards a request whose bytes hold `trigger`: the test's
/// way to stop a store in the middle of a batch.
pub fn tripwire(target: u16, trigger: &'static str, trip: impl Fn() + Send + Sync + 'static) -> String {
    use std::io::Read;
    use std::net::TcpStream;
    use std::sync::atomic::{AtomicBool, Ordering};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let trip = Arc::new(trip);
    let tripped = Arc::new(AtomicBool::new(false));
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { continue };
            let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else { continue };
            let (trip, tripped) = (Arc::clone(&trip), Arc::clone(&tripped));
            let (mut c_in, mut s_out) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            std::thread::spawn(move || {
                let mut buf = [0u8; 16 << 10];
                while let Ok(n) = c_in.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let seen = buf[..n].windows(trigger.len()).any(|w| w == trigger.as_bytes());
                    if seen && !tripped.swap(true, Ordering::SeqCst) {
                        trip();
                    }
                    if s_out.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                let _ = s_out.shutdown(std::net::Shutdown::Write);
            });
            let (mut s_in, mut c_out) = (server, client);
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut s_in, &mut c_out);
                let _ = c_out.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    format!("http://127.0.0.1:{port}")
}
