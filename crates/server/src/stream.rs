//! Bridges between the blocking engine and streamed HTTP bodies, so that a
//! snapshot of any size goes out as it is written and comes in as it is
//! read, with a few buffers in flight and never the whole in memory.

use std::io::{Read, Write};
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use futures_util::StreamExt;
use tokio::sync::mpsc;

/// Bytes buffered before a chunk is handed to the response.
const CHUNK: usize = 256 << 10;

/// A `Write` for a blocking thread whose bytes become a streamed response
/// body (see [`response_body`]).
#[derive(Debug)]
pub(crate) struct BodyWriter {
    tx: mpsc::Sender<std::io::Result<Bytes>>,
    buf: Vec<u8>,
}

impl Write for BodyWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            self.flush()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
        self.tx
            .blocking_send(Ok(chunk))
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the client went away"))
    }
}

impl BodyWriter {
    /// Ends the body with an error: the client sees the connection cut
    /// before the end, never a complete-looking body.
    pub(crate) fn fail(self, e: &dyn std::fmt::Display) {
        let _ = self.tx.blocking_send(Err(std::io::Error::other(e.to_string())));
    }
}

struct Chunks(mpsc::Receiver<std::io::Result<Bytes>>);

impl futures_core::Stream for Chunks {
    type Item = std::io::Result<Bytes>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_recv(cx)
    }
}

/// A writer for a blocking task and the response body it feeds (four
/// chunks in flight at most: the writer waits for a slow client).
pub(crate) fn response_body() -> (BodyWriter, Body) {
    let (tx, rx) = mpsc::channel(4);
    (BodyWriter { tx, buf: Vec::with_capacity(CHUNK) }, Body::from_stream(Chunks(rx)))
}

/// A blocking `Read` over a request body that an async task pumps in
/// (see [`request_reader`]).
#[derive(Debug)]
pub(crate) struct BodyReader {
    rx: mpsc::Receiver<std::io::Result<Bytes>>,
    cur: Bytes,
}

impl Read for BodyReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.cur.is_empty() {
            match self.rx.blocking_recv() {
                Some(Ok(b)) => self.cur = b,
                Some(Err(e)) => return Err(e),
                None => return Ok(0),
            }
        }
        let n = out.len().min(self.cur.len());
        out[..n].copy_from_slice(&self.cur[..n]);
        let _ = self.cur.split_to(n);
        Ok(n)
    }
}

/// Starts pumping `body` into a reader for a blocking task; `on_chunk` sees
/// each chunk's length as it arrives (quotas, metrics).
pub(crate) fn request_reader(body: Body, on_chunk: impl Fn(usize) + Send + 'static) -> BodyReader {
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(async move {
        let mut stream = body.into_data_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(std::io::Error::other);
            if let Ok(b) = &chunk {
                on_chunk(b.len());
            }
            let failed = chunk.is_err();
            if tx.send(chunk).await.is_err() || failed {
                break;
            }
        }
    });
    BodyReader { rx, cur: Bytes::new() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn bytes_cross_both_ways_in_order() {
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let (mut w, body) = response_body();
        let copy = data.clone();
        let writer = tokio::task::spawn_blocking(move || {
            for part in copy.chunks(7777) {
                w.write_all(part).unwrap();
            }
            w.flush().unwrap();
        });
        let mut reader = request_reader(body, |_| {});
        let read = tokio::task::spawn_blocking(move || {
            let mut out = Vec::new();
            reader.read_to_end(&mut out).unwrap();
            out
        });
        writer.await.unwrap();
        assert_eq!(read.await.unwrap(), data);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_writer_cuts_the_body() {
        let (mut w, body) = response_body();
        tokio::task::spawn_blocking(move || {
            w.write_all(b"partial").unwrap();
            w.flush().unwrap();
            w.fail(&"disk on fire");
        })
        .await
        .unwrap();
        let mut reader = request_reader(body, |_| {});
        let err = tokio::task::spawn_blocking(move || {
            let mut out = Vec::new();
            reader.read_to_end(&mut out).unwrap_err()
        })
        .await
        .unwrap();
        assert!(err.to_string().contains("disk on fire"), "{err}");
    }
}
