//! The NATS inbox source: one JetStream stream read through a durable pull consumer into the
//! ingest pipeline.
//!
//! [`NatsSource::run`] connects, checks the stream, creates or updates the durable consumer (see
//! `setup` for why the consumer but never the stream), and pulls up to `batchSize` messages at a
//! time. Each message becomes a [`Received`](queuebox_ports::ingest::Received) (headers as pairs,
//! `Nats-Msg-Id` as the broker's message id) handed to [`Ingest::ingest`]; at most `batchSize`
//! are in the pipeline at once, two of one idempotency key one after the other in stream order
//! (see `order`), and each is settled once its outcome is known (see `settle`):
//! the acknowledgement always follows the committed row, so a crash in between lets JetStream
//! redeliver the message after `ackWaitMs`, and the idempotency key turns the copy into a
//! duplicate.

mod health;
mod options;
mod order;
mod settle;
mod setup;

pub use health::NatsSourceHealth;
pub use options::{
    DEFAULT_ACK_WAIT, DEFAULT_BATCH_SIZE, DEFAULT_DRAIN_TIMEOUT, DEFAULT_NAK_DELAY_MAX,
    DEFAULT_NAK_DELAY_MIN, DEFAULT_RETRY_DELAY_MAX, DEFAULT_RETRY_DELAY_MIN, DEFAULT_SETUP_TIMEOUT,
    NatsSourceOptions,
};

use crate::connect::{Endpoint, backoff};
use crate::error::NatsError;
use crate::headers::received;
use async_nats::jetstream::AckKind;
use async_nats::jetstream::consumer::pull::MessagesErrorKind;
use futures::StreamExt;
use order::{KeyOrder, Turn};
use queuebox_ports::ingest::{Ingest, Received};
use settle::{Settlement, settlement};
use setup::{Setup, SetupSettings};
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// How much of a failure reason is kept.
const MAX_REASON_BYTES: usize = 1024;
/// How long one pull request waits on the server for messages before the client renews it.
const PULL_EXPIRES: Duration = Duration::from_secs(30);
/// How often the server proves an idle pull request alive; two missed beats end the session.
const PULL_HEARTBEAT: Duration = Duration::from_secs(5);

/// One configured NATS inbox source.
///
/// Build it at start with [`NatsSource::new`] (no connection is made), register
/// [`NatsSource::health`] with the health registry, then drive [`NatsSource::run`] as a worker
/// until the shutdown.
pub struct NatsSource {
    name: String,
    batch_size: u32,
    retry_delay_min: Duration,
    retry_delay_max: Duration,
    drain_timeout: Duration,
    setup: Setup,
    health: NatsSourceHealth,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for NatsSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsSource")
            .field("name", &self.name)
            .field("stream", &self.setup.settings.stream)
            .field("durable", &self.setup.settings.durable)
            .field("servers", &self.setup.settings.endpoint.shown)
            .finish_non_exhaustive()
    }
}

/// What every message task of a source reads.
struct Shared {
    source: String,
    ingest: Arc<dyn Ingest>,
    /// One permit per message in the pipeline: `batchSize` in all.
    permits: Arc<Semaphore>,
    /// Consecutive messages whose store failed, for the redelivery delay of the next `-NAK`.
    storage_failures: AtomicU32,
    nak_delay_min: Duration,
    nak_delay_max: Duration,
}

/// How a consuming session ended.
enum SessionEnd {
    Stopped,
    Broken(String),
}

impl NatsSource {
    /// Checks the options; opens no connection.
    ///
    /// The checks: `servers` parses; `stream` and `durable` are valid JetStream names (not empty,
    /// no whitespace, `.`, `*` or `>`); `batchSize` and `ackWaitMs` are above zero.
    ///
    /// # Errors
    /// [`NatsError`] naming the source and the key; never a URL, password or token.
    pub fn new(options: NatsSourceOptions, ingest: Arc<dyn Ingest>) -> Result<Self, NatsError> {
        let owner = format!("sources.{}", options.name);
        let endpoint = Endpoint::new(
            &owner,
            &options.servers,
            options.credentials.clone(),
            MAX_REASON_BYTES,
        )?;
        let invalid = |what: String| NatsError::InvalidSetting {
            owner: owner.clone(),
            what,
        };
        for (key, value) in [("stream", &options.stream), ("durable", &options.durable)] {
            if value.is_empty()
                || value.contains(|c: char| c.is_whitespace() || matches!(c, '.' | '*' | '>'))
            {
                return Err(invalid(format!(
                    "{key} `{value}` is not a JetStream name (not empty, without spaces, `.`, \
                     `*` or `>`)"
                )));
            }
        }
        if options.batch_size == 0 {
            return Err(invalid("batchSize must be above 0".to_owned()));
        }
        if options.ack_wait.is_zero() || options.setup_timeout.is_zero() {
            return Err(invalid("ackWaitMs must be above 0".to_owned()));
        }
        let shared = Arc::new(Shared {
            source: options.name.clone(),
            ingest,
            permits: Arc::new(Semaphore::new(
                usize::try_from(options.batch_size).unwrap_or(usize::MAX),
            )),
            storage_failures: AtomicU32::new(0),
            nak_delay_min: options.nak_delay_min,
            nak_delay_max: options.nak_delay_max.max(options.nak_delay_min),
        });
        Ok(Self {
            health: health::component(&options.name),
            name: options.name.clone(),
            batch_size: options.batch_size,
            retry_delay_min: options.retry_delay_min,
            retry_delay_max: options.retry_delay_max.max(options.retry_delay_min),
            drain_timeout: options.drain_timeout,
            setup: Setup::new(SetupSettings {
                endpoint,
                source: options.name,
                stream: options.stream,
                durable: options.durable,
                filter_subject: options.filter_subject,
                ack_wait: options.ack_wait,
                setup_timeout: options.setup_timeout,
            }),
            shared,
        })
    }

    /// The source name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The health component `nats.<source name>`; it shares its state with the running source.
    pub fn health(&self) -> NatsSourceHealth {
        self.health.clone()
    }

    /// Consumes until `stop` completes, then settles and returns.
    ///
    /// While running it sets up again after any failure (a server restart, a missing stream, a
    /// refused login, a deleted consumer) with a wait of `retry_delay_min` doubling per further
    /// failure up to `retry_delay_max`; the health component is down meanwhile, with the reason.
    /// It never panics and never returns before `stop` completes.
    ///
    /// On stop: no more pulls; the messages being stored finish and are settled within
    /// `drain_timeout`; JetStream redelivers whatever was delivered but never acknowledged after
    /// `ackWaitMs`, and the idempotency key drops copies of rows that had committed.
    pub async fn run(mut self, stop: impl Future<Output = ()> + Send) {
        let mut stop = pin!(stop);
        let mut tasks: JoinSet<()> = JoinSet::new();
        let mut failures: u32 = 0;
        let mut last_reason: Option<String> = None;
        loop {
            while let Some(joined) = tasks.try_join_next() {
                log_join(&self.name, joined);
            }
            let setup = tokio::select! {
                biased;
                () = &mut stop => break,
                setup = self.setup.consumer() => setup,
            };
            let reason = match setup {
                Ok(consumer) => {
                    let pulled = consumer
                        .stream()
                        .max_messages_per_batch(usize::try_from(self.batch_size).unwrap_or(1))
                        .expires(PULL_EXPIRES)
                        .heartbeat(PULL_HEARTBEAT)
                        .messages()
                        .await;
                    match pulled {
                        Ok(messages) => {
                            self.health.up();
                            failures = 0;
                            last_reason = None;
                            tracing::info!(
                                source = %self.name,
                                stream = %self.setup.settings.stream,
                                durable = %self.setup.settings.durable,
                                batch_size = self.batch_size,
                                "consuming NATS JetStream stream"
                            );
                            match self.consume(messages, stop.as_mut(), &mut tasks).await {
                                SessionEnd::Stopped => break,
                                SessionEnd::Broken(reason) => {
                                    tracing::warn!(source = %self.name, %reason, "NATS source stopped consuming; setting up again");
                                    reason
                                }
                            }
                        }
                        Err(error) => self
                            .setup
                            .settings
                            .endpoint
                            .redactor
                            .redact(&format!("starting to pull messages: {error}")),
                    }
                }
                Err(reason) => reason,
            };
            failures = failures.saturating_add(1);
            let delay = backoff(self.retry_delay_min, self.retry_delay_max, failures);
            if last_reason.as_deref() == Some(reason.as_str()) {
                tracing::debug!(source = %self.name, %reason, failures, "NATS source still cannot consume");
            } else {
                tracing::error!(
                    source = %self.name,
                    %reason,
                    failures,
                    retry_in_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                    "NATS source cannot consume"
                );
            }
            self.health.down(reason.clone());
            last_reason = Some(reason);
            tokio::select! {
                biased;
                () = &mut stop => break,
                () = tokio::time::sleep(delay) => {}
            }
        }
        self.health.down("stopping");
        let drained = tokio::time::timeout(self.drain_timeout, async {
            while let Some(joined) = tasks.join_next().await {
                log_join(&self.name, joined);
            }
        })
        .await;
        if drained.is_err() {
            tracing::warn!(source = %self.name, left = tasks.len(), "NATS source stopped before every message settled; JetStream redelivers them after ackWaitMs");
            tasks.abort_all();
        }
        if let Some(client) = &self.setup.client {
            // Sends the last acknowledgements before the process goes on to stop.
            let _ = tokio::time::timeout(Duration::from_secs(2), client.flush()).await;
        }
        tracing::info!(source = %self.name, "NATS source stopped");
    }

    /// Reads messages of one session until the stop or a break.
    async fn consume(
        &self,
        mut messages: async_nats::jetstream::consumer::pull::Stream,
        mut stop: std::pin::Pin<&mut impl Future<Output = ()>>,
        tasks: &mut JoinSet<()>,
    ) -> SessionEnd {
        // Per session: a message JetStream delivers again after a break is read anew.
        let mut order = KeyOrder::new(usize::try_from(self.batch_size).unwrap_or(usize::MAX));
        loop {
            // A permit first, so no more than `batchSize` messages are in the pipeline.
            let permit = tokio::select! {
                biased;
                () = &mut stop => return SessionEnd::Stopped,
                permit = Arc::clone(&self.shared.permits).acquire_owned() => match permit {
                    Ok(permit) => permit,
                    Err(_) => return SessionEnd::Broken("the source's permits closed".to_owned()),
                },
            };
            let next = tokio::select! {
                biased;
                () = &mut stop => return SessionEnd::Stopped,
                Some(joined) = tasks.join_next(), if !tasks.is_empty() => {
                    log_join(&self.name, joined);
                    continue;
                }
                next = messages.next() => next,
            };
            match next {
                Some(Ok(message)) => {
                    let shared = Arc::clone(&self.shared);
                    let input = received(message.headers.as_ref(), &message.payload);
                    // Taken here, in stream order, so a later message of the same key waits.
                    let turn = order.turn(shared.ingest.idempotency_key(&shared.source, &input));
                    tasks.spawn(async move {
                        handle(&shared, message, input, turn).await;
                        drop(permit);
                    });
                }
                Some(Err(error)) => {
                    let reason = self.setup.settings.endpoint.redactor.redact(&format!(
                        "pulling from the durable consumer `{}`: {error}",
                        self.setup.settings.durable
                    ));
                    if error.kind() == MessagesErrorKind::ConsumerDeleted {
                        return SessionEnd::Broken(format!(
                            "the durable consumer `{}` was deleted; it is created again",
                            self.setup.settings.durable
                        ));
                    }
                    return SessionEnd::Broken(reason);
                }
                None => return SessionEnd::Broken("the message stream ended".to_owned()),
            }
        }
    }
}

/// Runs one message through the pipeline once the earlier messages of its key are done, and
/// settles it; `turn` ends (letting the next message of the key go) when this returns.
async fn handle(
    shared: &Shared,
    message: async_nats::jetstream::Message,
    input: Received,
    mut turn: Turn,
) {
    turn.wait().await;
    let ingested = shared.ingest.ingest(&shared.source, input).await;
    let (kind, what) = match settlement(&ingested.outcome) {
        Settlement::Ack => {
            shared.storage_failures.store(0, Ordering::Relaxed);
            (AckKind::Ack, "acknowledging")
        }
        Settlement::AckUnstored { reason } => {
            tracing::error!(source = %shared.source, %reason, "a NATS message was refused without a row; acknowledged so it is not redelivered for ever");
            (AckKind::Ack, "acknowledging")
        }
        Settlement::Nak {
            reason,
            storage_failed,
        } => {
            // The first failure after a success comes back at once (docs/how-to/bridge-*.md); while stores keep
            // failing, the server is asked to wait longer each time, so a database that is down
            // does not turn into a hot loop of redeliveries.
            let failures = if storage_failed {
                shared.storage_failures.fetch_add(1, Ordering::Relaxed)
            } else {
                0
            };
            let delay = (failures > 0)
                .then(|| backoff(shared.nak_delay_min, shared.nak_delay_max, failures));
            tracing::warn!(source = %shared.source, %reason, redeliver_in_ms = delay.map_or(0, |d| d.as_millis()), "a NATS message is handed back");
            (AckKind::Nak(delay), "handing back")
        }
    };
    if let Err(error) = message.ack_with(kind).await {
        tracing::warn!(source = %shared.source, %error, "{what} a NATS message failed; JetStream redelivers it after ackWaitMs");
    }
}

fn log_join(source: &str, joined: Result<(), tokio::task::JoinError>) {
    if let Err(error) = joined
        && error.is_panic()
    {
        tracing::error!(%source, %error, "a NATS message task panicked");
    }
}
