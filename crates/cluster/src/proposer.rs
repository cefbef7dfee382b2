//! Proposing commands to a partition's stream: the engine's
//! [`Proposer`] in cluster mode.

use std::time::Duration;

use async_nats::jetstream::{self, stream};
use neardup_index::{Error as EngineError, Proposer};
use tokio::runtime::Handle;

use crate::partition::{tenant_subject, Partition};
use crate::secret::{Kind, Seal, TAG_BYTES};

fn unavailable(detail: impl Into<String>) -> EngineError {
    EngineError::unavailable(detail)
}

/// Proposes commands to the stream (see [`Proposer`]).
pub(crate) struct NatsProposer {
    pub(crate) partition: Partition,
    pub(crate) js: jetstream::Context,
    pub(crate) runtime: Handle,
    pub(crate) timeout: Duration,
    pub(crate) client: async_nats::Client,
    pub(crate) seal: Seal,
    /// Names this node's proposals (node id and start time) for the
    /// stream's duplicate detection; a counter tells them apart.
    pub(crate) ids: String,
    pub(crate) proposed: std::sync::atomic::AtomicU64,
}

/// How long one try of a proposal waits for the stream's acknowledgement
/// before it is published again (same message id). An acknowledgement is
/// lost when the server the node published through dies: waiting for the
/// whole timeout then stalled the tenant's writes that long.
const ATTEMPT: Duration = Duration::from_secs(1);

impl NatsProposer {
    async fn propose_async(&self, tenant: &str, after: u64, payload: &[u8]) -> Result<u64, EngineError> {
        use jetstream::context::PublishErrorKind as K;
        let subject = tenant_subject(self.partition, tenant);
        let payload = bytes::Bytes::from(self.seal.seal(Kind::Entry, &subject, payload));
        let deadline = tokio::time::Instant::now() + self.timeout;
        // Every try carries the same message id: the stream stores the
        // entry once, and answers a try after one that landed with the
        // first one's position (its duplicate window is two minutes).
        let n = self.proposed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = format!("{}-{n}", self.ids);
        // The stream is asked to refuse the entry unless the tenant's last
        // entry there is `after`. Once a trim removed the tenant's entries
        // up to `after`, the stream shows an older last entry (or none) for
        // the tenant: the entry is then proposed after that one, and the
        // replicas' own `after` check stays the rule.
        let mut expected = after;
        loop {
            let publish = jetstream::context::Publish::build()
                .payload(payload.clone())
                .expected_last_subject_sequence(expected)
                .message_id(&id);
            let ack = async {
                let fut = self.js.send_publish(subject.clone(), publish).await?;
                fut.await
            };
            let now = tokio::time::Instant::now();
            let e = match tokio::time::timeout_at(deadline.min(now + ATTEMPT), ack).await {
                Err(_) if tokio::time::Instant::now() < deadline => continue,
                Err(_) => {
                    return Err(unavailable(format!(
                        "the NATS stream did not acknowledge within {:?}; the write may still land",
                        self.timeout
                    )))
                }
                Ok(Ok(ack)) => return Ok(ack.sequence),
                Ok(Err(e)) => e,
            };
            match e.kind() {
                K::WrongLastSequence => {
                    let last = self.last_of(&subject).await?;
                    if last < expected && expected == after {
                        expected = last;
                        continue;
                    }
                    return Err(EngineError::log_conflict(tenant, last));
                }
                // No responders: the stream has no leader right now (an
                // election after a server died) or the client is between
                // servers. Nothing was stored, so trying again is safe.
                K::StreamNotFound | K::BrokenPipe if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                _ => return Err(unavailable(format!("the NATS stream refused or lost the write ({e})"))),
            }
        }
    }

    /// The position of the last command of `subject` (0: none).
    async fn last_of(&self, subject: &str) -> Result<u64, EngineError> {
        let stream = self
            .js
            .get_stream(self.partition.stream())
            .await
            .map_err(|e| unavailable(format!("reading the stream: {e}")))?;
        match stream.get_last_raw_message_by_subject(subject).await {
            Ok(m) => Ok(m.sequence),
            Err(e) if e.kind() == stream::LastRawMessageErrorKind::NoMessageFound => Ok(0),
            Err(e) => Err(unavailable(format!("reading the stream: {e}"))),
        }
    }
}

impl Proposer for NatsProposer {
    fn propose(&self, tenant: &str, after: u64, payload: &[u8]) -> neardup_index::Result<u64> {
        // The server's limit (1 MiB unless its max_payload says more); 0
        // until the first connection told it.
        let max = self.client.server_info().max_payload;
        if max > 0 && payload.len() + TAG_BYTES > max {
            return Err(EngineError::too_large("command bytes (the NATS server's max_payload)", max, payload.len()));
        }
        // Called from blocking threads (the service runs engine calls with
        // spawn_blocking), never from inside the runtime.
        self.runtime.block_on(self.propose_async(tenant, after, payload))
    }

    fn max_entry_bytes(&self) -> Option<usize> {
        Some(self.client.server_info().max_payload).filter(|&m| m > 0)
    }
}
