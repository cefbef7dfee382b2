//! A small blocking JSON-over-HTTP client for the embedding providers, on
//! `ureq`: one timeout covering connect to last byte, retries with
//! exponential backoff, and errors that carry the status and a snippet of
//! the body.
//!
//! Retried: connection failures and resets, HTTP 429 and 5xx (honouring a
//! `Retry-After` of up to [`MAX_RETRY_AFTER`]). Not retried: other 4xx (the
//! request itself is wrong), and timeouts — a model too slow to answer once
//! is likely too slow again, and retrying would multiply the wait.

use std::io::Read;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::ProviderConfig;
use crate::error::{Error, ErrorKind};

/// Longest `Retry-After` honoured; longer values fall back to the backoff.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);
/// Largest response body read.
const MAX_BODY_BYTES: u64 = 256 << 20;
/// Characters of an error body quoted in an error message.
const SNIPPET_CHARS: usize = 300;

#[derive(Debug)]
pub(crate) struct JsonClient {
    agent: ureq::Agent,
    timeout: Duration,
    max_retries: u32,
    initial_backoff: Duration,
    bearer: Option<String>,
}

enum Attempt {
    Done(Vec<u8>),
    Retry(Error, Option<Duration>),
    Fail(Error),
}

impl JsonClient {
    pub(crate) fn new(config: &ProviderConfig, bearer: Option<String>) -> JsonClient {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(config.timeout))
            .http_status_as_error(false)
            .user_agent(concat!("neardup/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        JsonClient {
            agent,
            timeout: config.timeout,
            max_retries: config.max_retries,
            initial_backoff: config.initial_backoff,
            bearer,
        }
    }

    /// POSTs `body` as JSON to `url` and decodes the JSON answer.
    pub(crate) fn post<B: Serialize, R: DeserializeOwned>(&self, url: &str, body: &B) -> Result<R, Error> {
        let payload = serde_json::to_vec(body).map_err(|e| Error::embedding(format!("serialising request: {e}")))?;
        let mut attempt = 0u32;
        loop {
            match self.attempt(url, &payload) {
                Attempt::Done(bytes) => {
                    return serde_json::from_slice(&bytes).map_err(|e| {
                        Error::new(ErrorKind::Http {
                            url: url.to_owned(),
                            status: Some(200),
                            detail: format!("unexpected response ({e}): {}", snippet(&bytes)),
                        })
                    })
                }
                Attempt::Fail(err) => return Err(err),
                Attempt::Retry(err, retry_after) => {
                    if attempt >= self.max_retries {
                        return Err(err);
                    }
                    let backoff = self.initial_backoff.saturating_mul(1u32 << attempt.min(16));
                    std::thread::sleep(retry_after.unwrap_or(backoff));
                    attempt += 1;
                }
            }
        }
    }

    fn attempt(&self, url: &str, payload: &[u8]) -> Attempt {
        let mut request = self.agent.post(url).header("Content-Type", "application/json");
        if let Some(token) = &self.bearer {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        let mut response = match request.send(payload) {
            Ok(response) => response,
            Err(e) => return self.transport_error(url, e),
        };
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs)
            .filter(|d| *d <= MAX_RETRY_AFTER);
        let mut body = Vec::new();
        let read = response.body_mut().as_reader().take(MAX_BODY_BYTES).read_to_end(&mut body);
        if let Err(e) = read {
            return if is_timeout(&e) {
                Attempt::Fail(self.timeout_error(url))
            } else {
                Attempt::Retry(http_error(url, None, format!("reading response: {e}")), None)
            };
        }
        match status {
            200..=299 => Attempt::Done(body),
            429 | 500..=599 => Attempt::Retry(http_error(url, Some(status), snippet(&body)), retry_after),
            _ => Attempt::Fail(http_error(url, Some(status), snippet(&body))),
        }
    }

    fn transport_error(&self, url: &str, e: ureq::Error) -> Attempt {
        match e {
            ureq::Error::Timeout(_) => Attempt::Fail(self.timeout_error(url)),
            ureq::Error::Io(io) if is_timeout(&io) => Attempt::Fail(self.timeout_error(url)),
            ureq::Error::ConnectionFailed | ureq::Error::Io(_) | ureq::Error::Protocol(_) => {
                Attempt::Retry(http_error(url, None, e.to_string()), None)
            }
            other => Attempt::Fail(http_error(url, None, other.to_string())),
        }
    }

    fn timeout_error(&self, url: &str) -> Error {
        Error::new(ErrorKind::Timeout { url: url.to_owned(), timeout_ms: self.timeout.as_millis() })
    }
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(e.kind(), std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock)
        || e.get_ref().is_some_and(|inner| inner.to_string().contains("timeout"))
}

fn http_error(url: &str, status: Option<u16>, detail: String) -> Error {
    Error::new(ErrorKind::Http { url: url.to_owned(), status, detail })
}

/// The start of a body, lossily decoded, whitespace collapsed.
fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.is_empty() {
        return "(empty body)".to_owned();
    }
    let mut out: String = collapsed.chars().take(SNIPPET_CHARS).collect();
    if collapsed.chars().count() > SNIPPET_CHARS {
        out.push('…');
    }
    out
}

/// Joins a base URL and a path without doubling slashes.
pub(crate) fn join_url(base: &str, path: &str) -> String {
    format!("{}/{}", base.trim_end_matches('/'), path.trim_start_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets() {
        assert_eq!(snippet(b"  {\"error\":\n \"bad\"} "), "{\"error\": \"bad\"}");
        assert_eq!(snippet(b""), "(empty body)");
        assert_eq!(snippet("x ".repeat(400).as_bytes()).chars().count(), SNIPPET_CHARS + 1);
    }

    #[test]
    fn urls() {
        assert_eq!(join_url("http://h:1/", "/api/embed"), "http://h:1/api/embed");
        assert_eq!(join_url("http://h:1", "api/embed"), "http://h:1/api/embed");
    }
}
