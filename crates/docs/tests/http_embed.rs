//! The HTTP embedding providers against a loopback server that speaks the
//! Ollama (`POST /api/embed`) and OpenAI (`POST /v1/embeddings`) wire
//! formats, including error bodies, retries and timeouts.
//!
//! The server is a few lines of `std::net`: one thread, one scripted reply
//! per connection, bounded in count and in time (it gives up waiting for a
//! client after a few seconds), bound to 127.0.0.1 only.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use neardup_docs::{embed_document, embedder_from_model, Embedder, ErrorKind, ProviderConfig};
use serde_json::{json, Value};

#[derive(Clone, Debug)]
struct Request {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

struct Reply {
    status: u16,
    body: String,
    delay: Duration,
}

type Handler = Box<dyn Fn(&Request) -> Reply + Send>;

struct Server {
    base: String,
    seen: Arc<Mutex<Vec<Request>>>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Serves one connection per handler, in order, then stops.
    fn start(handlers: Vec<Handler>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let thread = std::thread::spawn(move || {
            for handler in handlers {
                let deadline = Instant::now() + Duration::from_secs(10);
                let stream = loop {
                    match listener.accept() {
                        Ok((stream, _)) => break stream,
                        Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
                        Err(_) => return, // the client stopped calling
                    }
                };
                serve_one(stream, &handler, &log);
            }
        });
        Server { base, seen, thread: Some(thread) }
    }

    fn requests(&mut self) -> Vec<Request> {
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        self.seen.lock().unwrap().clone()
    }
}

fn serve_one(stream: TcpStream, handler: &Handler, log: &Mutex<Vec<Request>>) {
    stream.set_nonblocking(false).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or("").to_owned(), parts.next().unwrap_or("").to_owned());
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_owned(), v.trim().to_owned()));
        }
    }
    let len: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    reader.read_exact(&mut body).unwrap();
    let request = Request { method, path, headers, body: serde_json::from_slice(&body).unwrap_or(Value::Null) };
    log.lock().unwrap().push(request.clone());
    let reply = handler(&request);
    std::thread::sleep(reply.delay);
    let mut stream = stream;
    let _ = write!(
        stream,
        "HTTP/1.1 {} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
        reply.status,
        reply.body.len(),
        reply.body
    );
    let _ = stream.flush();
}

/// A deterministic fake embedding: depends on the text, not normalised.
fn fake_vector(text: &str) -> Vec<f32> {
    let n = text.len() as f32;
    vec![n, 1.0, (n * 0.5).sin() + 2.0]
}

fn inputs(request: &Request) -> Vec<String> {
    request.body["input"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()).collect()
}

/// Ollama's real answer shape.
fn ollama_ok() -> Handler {
    Box::new(|r: &Request| {
        let embeddings: Vec<Vec<f32>> = inputs(r).iter().map(|t| fake_vector(t)).collect();
        let body = json!({
            "model": r.body["model"], "embeddings": embeddings,
            "total_duration": 14143917, "load_duration": 1019500, "prompt_eval_count": 8
        });
        Reply { status: 200, body: body.to_string(), delay: Duration::ZERO }
    })
}

/// OpenAI's real answer shape, with the data deliberately in reverse order.
fn openai_ok() -> Handler {
    Box::new(|r: &Request| {
        let mut data: Vec<Value> = inputs(r)
            .iter()
            .enumerate()
            .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": fake_vector(t)}))
            .collect();
        data.reverse();
        let body = json!({
            "object": "list", "data": data, "model": r.body["model"],
            "usage": {"prompt_tokens": 8, "total_tokens": 8}
        });
        Reply { status: 200, body: body.to_string(), delay: Duration::ZERO }
    })
}

fn fixed(status: u16, body: &str) -> Handler {
    let body = body.to_owned();
    Box::new(move |_: &Request| Reply { status, body: body.clone(), delay: Duration::ZERO })
}

fn config(server: &Server) -> ProviderConfig {
    let mut c = ProviderConfig::default();
    c.ollama_base_url = server.base.clone();
    c.openai_base_url = format!("{}/v1", server.base);
    c.openai_api_key = Some("sk-test-123".to_owned());
    c.timeout = Duration::from_secs(5);
    c.initial_backoff = Duration::from_millis(10);
    c.max_retries = 3;
    c
}

fn texts(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn assert_unit(v: &[f32]) {
    let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-5, "norm {norm}");
}

#[test]
fn ollama_wire_format() {
    let mut server = Server::start(vec![ollama_ok()]);
    let embedder = embedder_from_model("ollama:nomic-embed-text", &config(&server)).unwrap().unwrap();
    let out = embedder.embed(&texts(&["a", "bbbb"])).unwrap();
    assert_eq!(out.len(), 2);
    out.iter().for_each(|v| assert_unit(v));
    assert!(out[0] != out[1]);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!((reqs[0].method.as_str(), reqs[0].path.as_str()), ("POST", "/api/embed"));
    assert_eq!(reqs[0].body, json!({"model": "nomic-embed-text", "input": ["a", "bbbb"]}));
    assert!(reqs[0].header("content-type").unwrap().starts_with("application/json"));
    assert_eq!(reqs[0].header("authorization"), None, "no key is sent to Ollama");
}

#[test]
fn openai_wire_format_and_order() {
    let mut server = Server::start(vec![openai_ok()]);
    let embedder = embedder_from_model("openai:text-embedding-3-small", &config(&server)).unwrap().unwrap();
    let input = texts(&["one", "three", "fifteen chars.."]);
    let out = embedder.embed(&input).unwrap();
    // Reordered by `index` although the server sent them reversed.
    for (text, got) in input.iter().zip(&out) {
        let mut want = fake_vector(text);
        neardup_docs::normalize(&mut want);
        assert_eq!(got, &want);
    }
    let reqs = server.requests();
    assert_eq!(reqs[0].path, "/v1/embeddings", "a base URL ending in /v1 is not doubled");
    assert_eq!(reqs[0].header("authorization"), Some("Bearer sk-test-123"));
    assert_eq!(reqs[0].body["model"], "text-embedding-3-small");
    assert_eq!(reqs[0].body["input"], json!(input));
}

#[test]
fn requests_are_batched() {
    let mut server = Server::start(vec![ollama_ok(), ollama_ok(), ollama_ok()]);
    let mut c = config(&server);
    c.batch_size = 2;
    let embedder = embedder_from_model("ollama:m", &c).unwrap().unwrap();
    assert_eq!(embedder.embed(&texts(&["a", "b", "c", "d", "e"])).unwrap().len(), 5);
    let sizes: Vec<usize> = server.requests().iter().map(|r| inputs(r).len()).collect();
    assert_eq!(sizes, [2, 2, 1]);
}

#[test]
fn long_document_is_chunked_and_pooled() {
    let mut server = Server::start(vec![ollama_ok()]);
    let embedder = embedder_from_model("ollama:m", &config(&server)).unwrap().unwrap();
    let doc = "word ".repeat(450);
    let v = embed_document(embedder.as_ref(), &doc, 200).unwrap();
    assert_unit(&v);
    let reqs = server.requests();
    let chunk_words: Vec<usize> = inputs(&reqs[0]).iter().map(|c| c.split_whitespace().count()).collect();
    // Near-equal chunks: no 50-word tail weighing as much as a full chunk.
    assert_eq!(chunk_words, [150, 150, 150]);
}

/// A long document is embedded as at most `max_chunks` chunks spread over
/// it, and the chunks of several documents travel in shared requests.
#[test]
fn chunks_are_bounded_and_shared_across_documents() {
    let mut server = Server::start(vec![ollama_ok()]);
    let embedder = embedder_from_model("ollama:m", &config(&server)).unwrap().unwrap();
    let long = "word ".repeat(100_000);
    let short = "other text here";
    let v = neardup_docs::embed_documents(embedder.as_ref(), &[&long, short], 200, 4).unwrap();
    assert_eq!(v.len(), 2);
    v.iter().for_each(|v| assert_unit(v));
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1, "one request for both documents");
    let chunk_words: Vec<usize> = inputs(&reqs[0]).iter().map(|c| c.split_whitespace().count()).collect();
    assert_eq!(chunk_words, [200, 200, 200, 200, 3]);
    let err = neardup_docs::embed_documents(embedder.as_ref(), &["a", " \n "], 200, 4).unwrap_err();
    assert!(err.to_string().contains("no words"), "{err}");
}

#[test]
fn retries_500_then_succeeds() {
    let mut server = Server::start(vec![
        fixed(500, r#"{"error":"llama runner process has terminated"}"#),
        fixed(429, r#"{"error":"too many requests"}"#),
        ollama_ok(),
    ]);
    let embedder = embedder_from_model("ollama:m", &config(&server)).unwrap().unwrap();
    assert_eq!(embedder.embed(&texts(&["x"])).unwrap().len(), 1);
    assert_eq!(server.requests().len(), 3);
}

#[test]
fn persistent_5xx_gives_up_with_status_and_body() {
    let handlers = (0..3).map(|_| fixed(503, r#"{"error":"server overloaded, retry later"}"#)).collect();
    let mut server = Server::start(handlers);
    let mut c = config(&server);
    c.max_retries = 2;
    let embedder = embedder_from_model("ollama:m", &c).unwrap().unwrap();
    let err = embedder.embed(&texts(&["x"])).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Http { status: Some(503), .. }), "{err}");
    assert!(err.to_string().contains("server overloaded"), "{err}");
    assert_eq!(server.requests().len(), 3, "1 try + 2 retries");
}

#[test]
fn client_errors_surface_the_body_without_retry() {
    let mut server = Server::start(vec![fixed(400, r#"{"error":"model \"nope\" not found, try pulling it first"}"#)]);
    let embedder = embedder_from_model("ollama:nope", &config(&server)).unwrap().unwrap();
    let err = embedder.embed(&texts(&["x"])).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Http { status: Some(400), .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("HTTP 400") && msg.contains("not found, try pulling it first"), "{msg}");
    assert!(msg.contains("/api/embed"), "{msg}");
    assert_eq!(server.requests().len(), 1);

    let body = r#"{"error":{"message":"Incorrect API key provided: sk-test-***123.","type":"invalid_request_error","code":"invalid_api_key"}}"#;
    let mut server = Server::start(vec![fixed(401, body)]);
    let embedder = embedder_from_model("openai:text-embedding-3-small", &config(&server)).unwrap().unwrap();
    let err = embedder.embed(&texts(&["x"])).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Http { status: Some(401), .. }), "{err}");
    assert!(err.to_string().contains("Incorrect API key provided"), "{err}");
    assert_eq!(server.requests().len(), 1);
}

/// A server slower than the timeout: the call ends at its timeout, not when
/// the server answers. Shown as an ordering: the server holds its reply
/// until the error is in hand (a minute at most, the guard against a
/// hang), so an error at all is one that did not wait for the reply.
#[test]
fn slow_server_times_out() {
    let (release, held) = std::sync::mpsc::channel::<()>();
    let held = Mutex::new(held);
    let slow: Handler = Box::new(move |_: &Request| {
        let _ = held.lock().unwrap().recv_timeout(Duration::from_secs(60));
        Reply { status: 200, body: r#"{"embeddings":[[1.0]]}"#.to_owned(), delay: Duration::ZERO }
    });
    let mut server = Server::start(vec![slow]);
    let mut c = config(&server);
    c.timeout = Duration::from_millis(300);
    let embedder = embedder_from_model("ollama:m", &c).unwrap().unwrap();
    let err = embedder.embed(&texts(&["x"])).unwrap_err();
    let _ = release.send(());
    assert!(matches!(err.kind(), ErrorKind::Timeout { timeout_ms: 300, .. }), "{err}");
    assert!(err.to_string().contains("timed out after 300 ms"), "{err}");
    assert_eq!(server.requests().len(), 1, "timeouts are not retried");
}

#[test]
fn connection_refused_is_retried_then_reported() {
    // A port that was just free: nothing listens there.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut c = ProviderConfig::default();
    c.ollama_base_url = format!("http://127.0.0.1:{port}");
    c.initial_backoff = Duration::from_millis(10);
    c.max_retries = 2;
    let embedder = embedder_from_model("ollama:m", &c).unwrap().unwrap();
    let err = embedder.embed(&texts(&["x"])).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Http { status: None, .. }), "{err}");
    assert!(err.to_string().contains(&format!("127.0.0.1:{port}")), "{err}");
}

#[test]
fn malformed_answers_are_errors() {
    let mut server = Server::start(vec![
        fixed(200, "<html>proxy login</html>"),
        fixed(200, r#"{"embeddings":[[1.0, 2.0]]}"#), // one vector for two texts
        fixed(200, r#"{"data":[{"embedding":[1.0],"index":0},{"embedding":[1.0],"index":0}]}"#),
    ]);
    let c = config(&server);
    let ollama = embedder_from_model("ollama:m", &c).unwrap().unwrap();
    let err = ollama.embed(&texts(&["x"])).unwrap_err();
    assert!(err.to_string().contains("unexpected response") && err.to_string().contains("proxy login"), "{err}");
    let err = ollama.embed(&texts(&["x", "y"])).unwrap_err();
    assert!(err.to_string().contains("returned 1 vectors for 2 texts"), "{err}");
    let openai = embedder_from_model("openai:m", &c).unwrap().unwrap();
    let err = openai.embed(&texts(&["x", "y"])).unwrap_err();
    assert!(err.to_string().contains("duplicate or out-of-range index"), "{err}");
    server.requests();
}

#[test]
fn model_ids_name_provider_and_model() {
    let c = ProviderConfig::default();
    let ids: Vec<String> = ["ollama:granite-embedding:278m", "openai:text-embedding-3-large"]
        .iter()
        .map(|m| embedder_from_model(m, &c).unwrap().unwrap().model_id())
        .collect();
    assert_eq!(ids, ["ollama:granite-embedding:278m", "openai:text-embedding-3-large"]);
    let _: Option<Box<dyn Embedder>> = embedder_from_model("", &c).unwrap();
}
