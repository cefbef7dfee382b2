//! A node's NATS connections, and the retry loop for a NATS cluster that
//! may still be electing its leaders.

use std::time::Duration;

use async_nats::jetstream;

use crate::error::ClusterError;
use crate::options::ClusterOptions;

/// The NATS connections of a node, shared by its partitions: one for
/// writes and one for reads, so a slow applier never delays proposals'
/// acknowledgements.
#[derive(Clone)]
pub(crate) struct Connections {
    pub(crate) writes: async_nats::Client,
    pub(crate) reads: async_nats::Client,
    pub(crate) js: jetstream::Context,
}

impl Connections {
    pub(crate) async fn open(cluster: &ClusterOptions) -> Result<Connections, ClusterError> {
        let addrs: Vec<async_nats::ServerAddr> = cluster
            .servers
            .iter()
            .map(|s| s.parse().map_err(|e| ClusterError::option("--cluster", format!("{s}: {e}"))))
            .collect::<Result<_, _>>()?;
        let connect = |role: &str| {
            let name = format!("neardup-{}-{role}", cluster.node_id);
            let addrs = addrs.clone();
            async move {
                let options = || async {
                    Ok::<_, ClusterError>(cluster.nats.apply(async_nats::ConnectOptions::new()).await?.name(&name))
                };
                // Refused credentials or certificates end the start at once,
                // with NATS's reason; servers not up yet are waited for.
                match options().await?.connect(addrs.clone()).await {
                    Ok(client) => Ok(client),
                    Err(e) if refused(&e) => Err(ClusterError::connect(e)),
                    Err(_) => {
                        options().await?.retry_on_initial_connect().connect(addrs).await.map_err(ClusterError::connect)
                    }
                }
            }
        };
        let writes = connect("writes").await?;
        let reads = connect("reads").await?;
        Ok(Connections { js: jetstream::new(writes.clone()), writes, reads })
    }
}

/// Whether NATS refused the connection (credentials, authorization, or a
/// certificate that does not verify: rustls reports it as invalid data),
/// as opposed to no server answering yet.
fn refused(e: &async_nats::ConnectError) -> bool {
    use async_nats::ConnectErrorKind as K;
    let bad_certificate = std::error::Error::source(e)
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .is_some_and(|io| io.kind() == std::io::ErrorKind::InvalidData);
    bad_certificate || matches!(e.kind(), K::Authentication | K::AuthorizationViolation | K::Tls)
}

/// Runs `attempt` until NATS answers it, for up to a minute: right after
/// its servers start (or one restarts), a NATS cluster may still be
/// electing the leader of the meta layer or of a stream just created, and
/// answers `no responders` / `no stream found` meanwhile. Every node runs
/// its set-up (the stream, the buckets, its first registry entry) through
/// this, so nodes started together in any order all come up.
///
/// A request sent before JetStream is ready is often not answered at all,
/// and would wait out the client's whole timeout (5 s); so an attempt is
/// given [`FIRST_ATTEMPT`] and each one after a timeout twice as long, up
/// to [`LONGEST_ATTEMPT`]. Every attempt is safe to repeat (it gets or
/// creates, or puts the same value), also when one cut short took effect.
pub(crate) async fn until_answered<T, F, Fut>(mut attempt: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut limit = FIRST_ATTEMPT;
    let mut last = String::from("no attempt");
    while tokio::time::Instant::now() < deadline {
        match tokio::time::timeout(limit, attempt()).await {
            Ok(Ok(v)) => return Ok(v),
            Ok(Err(e)) => last = e,
            Err(_) => {
                last = format!("no answer within {limit:?}");
                limit = (limit * 2).min(LONGEST_ATTEMPT);
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Err(last)
}

/// How long a set-up attempt waits for NATS at first (see [`until_answered`]).
const FIRST_ATTEMPT: Duration = Duration::from_secs(1);
/// The longest a set-up attempt waits, after attempts that timed out.
const LONGEST_ATTEMPT: Duration = Duration::from_secs(8);
