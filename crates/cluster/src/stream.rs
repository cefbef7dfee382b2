//! A partition's command stream: created if missing, and read in order by
//! the node's applier, which hands each command to one blocking thread
//! that applies it to the engine.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, consumer, stream};
use futures_util::StreamExt;
use neardup_index::{Engine, Error as EngineError, ReplicatedEntry};

use crate::error::ClusterError;
use crate::nats::until_answered;
use crate::partition::{subject_tenant, Partition};
use crate::secret::{Kind, Seal};

/// What the applier has done, for readiness and metrics.
#[derive(Debug, Default)]
pub struct ApplierState {
    /// The stream's last position as last seen (for lag).
    pub stream_last: AtomicU64,
    /// The last position handed to the applying thread (a reconnect
    /// resumes after it).
    pub stream_last_handed: AtomicU64,
    /// Why the applier stopped (the node then answers 503 on /readyz).
    pub failed: Mutex<Option<String>>,
    /// Commands applied since the node started.
    pub applied_total: AtomicU64,
    /// Entries skipped since the node started: not a command of the
    /// tenant whose subject they were published to (see
    /// [`Engine::apply_replicated`]).
    pub skipped_total: AtomicU64,
    /// Positions found missing from the stream (deleted entries) since the
    /// node started: read past, and reported.
    pub gap_positions_total: AtomicU64,
}

/// The stream of `partition`, created if missing.
pub(crate) async fn ensure_stream(
    js: &jetstream::Context,
    replicas: usize,
    partition: Partition,
) -> Result<stream::Stream, ClusterError> {
    let name = partition.stream();
    let config = stream::Config {
        name: name.clone(),
        subjects: vec![format!("{}>", partition.subject_prefix())],
        storage: stream::StorageType::File,
        num_replicas: replicas,
        retention: stream::RetentionPolicy::Limits,
        discard: stream::DiscardPolicy::New,
        // Commands are the durable truth: nothing ages out; checkpoints
        // decide what may be trimmed.
        max_age: Duration::ZERO,
        ..Default::default()
    };
    until_answered(|| async { js.get_or_create_stream(config.clone()).await.map_err(|e| e.to_string()) })
        .await
        .map_err(|last| ClusterError::jetstream(format!("creating the JetStream stream {name}"), last))
}

/// Reads the stream from `from` and applies each command, in order, on one
/// blocking thread; a failed read starts again after the last command
/// handed over.
pub(crate) fn spawn_applier(
    js: jetstream::Context,
    engine: Arc<Engine>,
    state: Arc<ApplierState>,
    from: u64,
    partition: Partition,
    seal: Seal,
) -> tokio::task::AbortHandle {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(u64, async_nats::Subject, bytes::Bytes)>(1024);
    let apply_state = Arc::clone(&state);
    std::thread::Builder::new()
        .name(format!("neardup-applier-{}", partition.index))
        .spawn(move || {
            while let Some((seq, subject, payload)) = rx.blocking_recv() {
                // The stream takes only this partition's tenant subjects; an
                // entry under any other subject is nobody's command.
                let tenant = subject_tenant(partition, &subject).unwrap_or_default();
                let outcome = match seal.open(Kind::Entry, &subject, &payload) {
                    Ok(entry) => engine.apply_replicated(seq, &tenant, entry),
                    Err(why) => engine.skip_replicated(seq, &tenant, EngineError::corrupt("replicated log entry", why)),
                };
                match outcome {
                    Ok(ReplicatedEntry::Applied) => {
                        apply_state.applied_total.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(ReplicatedEntry::Skipped(reason)) => {
                        apply_state.skipped_total.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(seq, %subject, %reason, "skipped an entry of the stream that is not a command");
                    }
                    Err(e) => {
                        tracing::error!(seq, error = %e, "a command of the stream could not be applied; this node stops applying");
                        if let Ok(mut f) = apply_state.failed.lock() {
                            *f = Some(format!("command {seq} could not be applied: {e}"));
                        }
                        return;
                    }
                }
            }
        })
        .ok();
    tokio::spawn(async move {
        loop {
            match read_stream(&js, &tx, &state, from, partition).await {
                Ok(()) => return, // the applier thread stopped
                Err(e) if e.starts_with(TRIMMED) => {
                    tracing::error!(error = %e, "the stream was trimmed past this node; it stops applying");
                    if let Ok(mut f) = state.failed.lock() {
                        *f = Some(e);
                    }
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "reading the command stream failed; retrying");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
    })
    .abort_handle()
}

/// Positions `from..to` were not delivered. Trimmed (the stream now
/// starts past `from`): applying on would diverge, an error starting with
/// [`TRIMMED`]. Deleted one by one (each is missing from the stream): no
/// node can read them, so every node reads past them alike; counted and
/// logged. Still there (a delivery that skipped): an error, and the read
/// starts again where it stopped.
async fn account_for_gap(stream: &mut stream::Stream, from: u64, to: u64, state: &ApplierState) -> Result<(), String> {
    let first = stream.info().await.map_err(|e| format!("reading the stream: {e}"))?.state.first_sequence;
    if first > from {
        return Err(format!(
            "{TRIMMED}: this node needed command {from} but the stream now starts at {first}; restart it with an \
             empty data directory (it then starts from the newest snapshot set)"
        ));
    }
    // A bounded look: a gap wider than this is taken on the first ones' word.
    for seq in (from..to).take(64) {
        match stream.get_raw_message(seq).await {
            Err(e) if e.kind() == stream::LastRawMessageErrorKind::NoMessageFound => {}
            Ok(_) => return Err(format!("delivery gap: command {seq} is in the stream but was not delivered")),
            Err(e) => return Err(format!("checking a delivery gap at {seq}: {e}")),
        }
    }
    state.gap_positions_total.fetch_add(to - from, Ordering::Relaxed);
    tracing::error!(from, to = to - 1, "positions of the stream are missing (deleted); read past them");
    Ok(())
}

/// How the applier's error begins when the stream was trimmed past it.
const TRIMMED: &str = "trimmed past this node";

async fn read_stream(
    js: &jetstream::Context,
    tx: &tokio::sync::mpsc::Sender<(u64, async_nats::Subject, bytes::Bytes)>,
    state: &ApplierState,
    from: u64,
    partition: Partition,
) -> Result<(), String> {
    let mut stream = js.get_stream(partition.stream()).await.map_err(|e| e.to_string())?;
    // After a retry, resume after what was already handed over.
    let last = state.stream_last_handed.load(Ordering::Relaxed);
    let start = from.max(last + 1);
    // A plain pull consumer without acks, with a 1 s heartbeat: when its
    // server dies the missed heartbeats end the stream within seconds and
    // the loop above makes a new one where this one stopped. (The client's
    // ordered consumer waits 15 s heartbeats to notice.)
    let consumer = stream
        .create_consumer(consumer::pull::Config {
            deliver_policy: consumer::DeliverPolicy::ByStartSequence { start_sequence: start },
            ack_policy: consumer::AckPolicy::None,
            inactive_threshold: Duration::from_secs(60),
            ..Default::default()
        })
        .await
        .map_err(|e| e.to_string())?;
    let mut messages = consumer
        .stream()
        .max_messages_per_batch(500)
        .heartbeat(Duration::from_secs(1))
        .expires(Duration::from_secs(5))
        .messages()
        .await
        .map_err(|e| e.to_string())?;
    let mut expect = start;
    while let Some(m) = messages.next().await {
        let m = m.map_err(|e| e.to_string())?;
        let info = m.info().map_err(|e| e.to_string())?;
        let seq = info.stream_sequence;
        // In order, none missed: positions the consumer passed over must be
        // gone from the stream (trimmed, or deleted one by one).
        if seq > expect {
            account_for_gap(&mut stream, expect, seq, state).await?;
        } else if seq < expect {
            return Err(format!("delivery out of order: expected {expect}, got {seq}"));
        }
        expect = seq + 1;
        state.stream_last.fetch_max(seq + info.pending, Ordering::Relaxed);
        state.stream_last_handed.store(seq, Ordering::Relaxed);
        if tx.send((seq, m.subject.clone(), m.payload.clone())).await.is_err() {
            return Ok(());
        }
    }
    Err("the consumer ended".into())
}
