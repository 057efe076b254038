//! The RabbitMQ inbox source: one queue consumed into the ingest pipeline.
//!
//! [`RabbitmqSource::run`] connects, sets the prefetch (`basic.qos`), checks the queue (or
//! declares it, durable, with `declareQueue: true`) and consumes with manual acknowledgements.
//! Each delivery becomes a [`Received`](queuebox_ports::ingest::Received) (see `convert` for the
//! header rules) handed to [`Ingest::ingest`]; deliveries are handled concurrently, at most
//! `prefetchCount` at a time, and each is settled with its own delivery tag once its outcome is
//! known (see `settle`): the acknowledgement always follows the committed row, so a crash in
//! between redelivers the message and the idempotency key turns the copy into a duplicate.

mod broker;
mod convert;
mod health;
mod options;
mod settle;

pub use health::RabbitmqSourceHealth;
pub use options::{
    DEFAULT_DRAIN_TIMEOUT, DEFAULT_PREFETCH_COUNT, DEFAULT_REQUEUE_DELAY_MAX,
    DEFAULT_REQUEUE_DELAY_MIN, DEFAULT_SETUP_TIMEOUT, RabbitmqSourceOptions,
};

use crate::error::RabbitmqError;
use crate::link::backoff;
use crate::message::MAX_SHORT_STRING;
use crate::publisher::encoded_password;
use crate::tls::ensure_crypto_provider;
use broker::{Broker, BrokerSettings, Consuming, retry_delay};
use futures::{FutureExt, StreamExt};
use lapin::message::Delivery;
use lapin::options::{BasicAckOptions, BasicNackOptions};
use queuebox_domain::redact::Redactor;
use queuebox_ports::ingest::{Ingest, IngestOutcome};
use settle::{Settlement, settlement};
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::{Instant, timeout_at};

/// How much of a failure reason is kept.
const MAX_REASON_BYTES: usize = 1024;
/// How often a consuming source checks that its connection and channel are still open (lapin
/// reports a broken connection to the consumer too; this is the backstop).
const LINK_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// One configured RabbitMQ inbox source.
///
/// Build it at start with [`RabbitmqSource::new`] (no connection is made), register
/// [`RabbitmqSource::health`] with the health registry, then drive [`RabbitmqSource::run`] as a
/// worker until the shutdown.
pub struct RabbitmqSource {
    name: String,
    queue: String,
    prefetch: u16,
    reconnect_delay_min: Duration,
    reconnect_delay_max: Duration,
    drain_timeout: Duration,
    broker: Broker,
    health: RabbitmqSourceHealth,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for RabbitmqSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RabbitmqSource")
            .field("name", &self.name)
            .field("queue", &self.queue)
            .field("prefetch", &self.prefetch)
            .field("endpoint", &self.broker.endpoint)
            .finish_non_exhaustive()
    }
}

/// What every delivery task of a source reads.
struct Shared {
    source: String,
    queue: String,
    ingest: Arc<dyn Ingest>,
    /// One permit per delivery in the pipeline: `prefetchCount` in all. The broker already
    /// holds a session to the prefetch; the permits also cover deliveries of a broken session
    /// that are still being stored when the next session starts.
    permits: Arc<Semaphore>,
    /// Consecutive deliveries whose store failed, for the delay before the requeue.
    storage_failures: AtomicU32,
    requeue_delay_min: Duration,
    requeue_delay_max: Duration,
    redactor: Redactor,
}

/// How a consuming session ended.
enum SessionEnd {
    /// The stop completed; the session is still open for the settling.
    Stopped,
    /// The link broke (or the broker cancelled the consumer); reconnect.
    Broken(String),
}

impl RabbitmqSource {
    /// Checks the options; opens no connection.
    ///
    /// The checks: `url` parses as an AMQP URI; `queue_name` is not empty and fits an AMQP short
    /// string (255 bytes); `prefetch_count` is at least 1 (AMQP reads 0 as "no limit", which would
    /// let the broker push the whole queue into memory); the setup timeout is above zero.
    ///
    /// # Errors
    /// [`RabbitmqError::InvalidSourceUrl`] or [`RabbitmqError::InvalidSourceSetting`], naming the
    /// source and the key; never the URL or its password.
    pub fn new(
        options: RabbitmqSourceOptions,
        ingest: Arc<dyn Ingest>,
    ) -> Result<Self, RabbitmqError> {
        let name = options.name.clone();
        let raw_url = options.url.expose();
        let mut redactor = Redactor::new(MAX_REASON_BYTES).with_secret(raw_url);
        let uri: lapin::uri::AMQPUri =
            raw_url
                .parse()
                .map_err(|reason: String| RabbitmqError::InvalidSourceUrl {
                    name: name.clone(),
                    reason: redactor.redact(&reason),
                })?;
        redactor = redactor.with_secret(&uri.authority.userinfo.password);
        if let Some(encoded) = encoded_password(raw_url) {
            redactor = redactor.with_secret(encoded);
        }
        let invalid = |what: &str| RabbitmqError::InvalidSourceSetting {
            name: name.clone(),
            what: what.to_owned(),
        };
        if options.queue_name.is_empty() {
            return Err(invalid("queueName must not be empty"));
        }
        if options.queue_name.len() > MAX_SHORT_STRING {
            return Err(invalid(
                "queueName is longer than the 255 bytes AMQP allows",
            ));
        }
        if options.prefetch_count == 0 {
            return Err(invalid(
                "prefetchCount must be at least 1 (0 means no limit in AMQP, which lets the \
                 broker push the whole queue into memory)",
            ));
        }
        if options.setup_timeout.is_zero() {
            return Err(invalid("the setup timeout must be above 0"));
        }
        ensure_crypto_provider();
        let connection_name = options
            .connection_name
            .clone()
            .unwrap_or_else(|| format!("queuebox source {name}"));
        let broker = Broker::new(BrokerSettings {
            uri,
            connection_name,
            redactor: redactor.clone(),
            queue: options.queue_name.clone(),
            prefetch: options.prefetch_count,
            declare: options.declare_queue,
            setup_timeout: options.setup_timeout,
            source: name.clone(),
        });
        let shared = Arc::new(Shared {
            source: name.clone(),
            queue: options.queue_name.clone(),
            ingest,
            permits: Arc::new(Semaphore::new(usize::from(options.prefetch_count))),
            storage_failures: AtomicU32::new(0),
            requeue_delay_min: options.requeue_delay_min,
            requeue_delay_max: options.requeue_delay_max.max(options.requeue_delay_min),
            redactor,
        });
        Ok(Self {
            health: health::component(&name),
            name,
            queue: options.queue_name,
            prefetch: options.prefetch_count,
            reconnect_delay_min: options.reconnect_delay_min,
            reconnect_delay_max: options.reconnect_delay_max.max(options.reconnect_delay_min),
            drain_timeout: options.drain_timeout,
            broker,
            shared,
        })
    }

    /// The source name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The health component `rabbitmq.<source name>`; it shares its state with the running source.
    pub fn health(&self) -> RabbitmqSourceHealth {
        self.health.clone()
    }

    /// Consumes until `stop` completes, then settles and returns.
    ///
    /// While running it reconnects after any failure (a broker restart, a dropped connection, a
    /// missing queue, a refused login) with a wait of `reconnect_delay_min` doubling per further
    /// failure up to `reconnect_delay_max`; the health component is down meanwhile, with the
    /// reason. It never panics and never returns before `stop` completes.
    ///
    /// On stop: the consumer is cancelled (no new deliveries), the deliveries being stored finish
    /// and are acknowledged (or handed back) within `drain_timeout`, then the channel and the
    /// connection close; the broker hands back whatever is still unacknowledged. Dropping the
    /// future instead is safe too: the unacknowledged messages return to the queue, and the
    /// idempotency key drops the copies of any row that had already committed.
    pub async fn run(mut self, stop: impl Future<Output = ()> + Send) {
        let mut stop = pin!(stop.fuse());
        let (stopping, _) = watch::channel(false);
        let mut tasks: JoinSet<()> = JoinSet::new();
        let mut failures: u32 = 0;
        let mut last_reason: Option<String> = None;
        loop {
            reap_finished(&self.name, &mut tasks);
            let setup = tokio::select! {
                biased;
                () = &mut stop => break,
                setup = self.broker.consume() => setup,
            };
            match setup {
                Ok(mut consuming) => {
                    self.health.up();
                    tracing::info!(
                        source = %self.name,
                        queue = %self.queue,
                        broker = %self.broker.endpoint,
                        prefetch = self.prefetch,
                        "consuming RabbitMQ queue"
                    );
                    match self
                        .consume(&mut consuming, stop.as_mut(), &mut tasks, &stopping)
                        .await
                    {
                        SessionEnd::Stopped => {
                            self.health.down("stopping");
                            self.broker.cancel(&consuming).await;
                            self.settle_and_close(Some(&consuming), &mut tasks, &stopping)
                                .await;
                            return;
                        }
                        SessionEnd::Broken(reason) => {
                            tracing::warn!(
                                source = %self.name,
                                queue = %self.queue,
                                %reason,
                                "RabbitMQ source stopped consuming; reconnecting"
                            );
                            self.health.down(reason.clone());
                            // A channel the broker left open (it cancelled the consumer) is
                            // closed; the deliveries still being stored on it come back.
                            self.broker.close_channel(&consuming).await;
                            self.broker.drop_broken_connection();
                            // Start over from the shortest wait: the link worked until now.
                            failures = 1;
                            last_reason = Some(reason);
                        }
                    }
                }
                Err(failure) => {
                    failures = failures.saturating_add(1);
                    let delay =
                        retry_delay(self.reconnect_delay_min, self.reconnect_delay_max, failures);
                    let retry_in_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
                    // A missing queue is retried like a broker that is down rather than ending
                    // the source for good: the loop runs as a worker, and a worker that returned
                    // would leave the source dead until a restart even after someone creates the
                    // queue. Retrying keeps the health component down and naming the queue, logs
                    // the error once per new reason, and starts consuming as soon as it appears.
                    if last_reason.as_deref() == Some(failure.reason.as_str()) {
                        tracing::debug!(source = %self.name, reason = %failure.reason, failures, retry_in_ms, "RabbitMQ source still cannot consume");
                    } else {
                        tracing::error!(source = %self.name, queue = %self.queue, reason = %failure.reason, failures, retry_in_ms, "RabbitMQ source cannot consume");
                    }
                    self.health.down(failure.reason.clone());
                    last_reason = Some(failure.reason);
                }
            }
            let delay = retry_delay(self.reconnect_delay_min, self.reconnect_delay_max, failures);
            tokio::select! {
                biased;
                () = &mut stop => break,
                () = tokio::time::sleep(delay) => {}
            }
        }
        self.health.down("stopping");
        self.settle_and_close(None, &mut tasks, &stopping).await;
    }

    /// Reads deliveries of one session until the stop or a break.
    async fn consume(
        &self,
        consuming: &mut Consuming,
        mut stop: Pin<&mut futures::future::Fuse<impl Future<Output = ()>>>,
        tasks: &mut JoinSet<()>,
        stopping: &watch::Sender<bool>,
    ) -> SessionEnd {
        let mut link_check = tokio::time::interval(LINK_CHECK_INTERVAL);
        link_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                () = &mut stop => return SessionEnd::Stopped,
                Some(joined) = tasks.join_next(), if !tasks.is_empty() => log_join(&self.name, joined),
                delivery = consuming.consumer.next() => match delivery {
                    Some(Ok(delivery)) => {
                        let shared = Arc::clone(&self.shared);
                        let stopping = stopping.subscribe();
                        tasks.spawn(handle(shared, delivery, stopping));
                    }
                    Some(Err(error)) => {
                        return SessionEnd::Broken(self.shared.redactor.redact(&format!(
                            "the RabbitMQ consumer of queue `{}` failed: {error}",
                            self.queue
                        )));
                    }
                    None => {
                        return SessionEnd::Broken(format!(
                            "the broker cancelled the consumer of queue `{}` (was the queue deleted?)",
                            self.queue
                        ));
                    }
                },
                _ = link_check.tick() => {
                    if !self.broker.is_open(consuming) {
                        return SessionEnd::Broken(format!(
                            "the connection to the broker at {} closed",
                            self.broker.endpoint
                        ));
                    }
                }
            }
        }
    }

    /// The end of `run`: lets the deliveries being stored finish and settle within the drain
    /// bound, then closes the channel and the connection.
    async fn settle_and_close(
        &mut self,
        consuming: Option<&Consuming>,
        tasks: &mut JoinSet<()>,
        stopping: &watch::Sender<bool>,
    ) {
        // Cuts short any wait before a requeue: a stopping source hands messages back at once.
        stopping.send_replace(true);
        let deadline = Instant::now() + self.drain_timeout;
        while !tasks.is_empty() {
            match timeout_at(deadline, tasks.join_next()).await {
                Ok(Some(joined)) => log_join(&self.name, joined),
                Ok(None) => break,
                Err(_) => {
                    tracing::warn!(
                        source = %self.name,
                        in_flight = tasks.len(),
                        drain_timeout_ms = u64::try_from(self.drain_timeout.as_millis()).unwrap_or(u64::MAX),
                        "RabbitMQ source stopping with messages still being stored; the broker hands them back"
                    );
                    tasks.abort_all();
                    while tasks.join_next().await.is_some() {}
                    break;
                }
            }
        }
        if let Some(consuming) = consuming {
            self.broker.close_channel(consuming).await;
        }
        self.broker.close().await;
        self.health.down("stopped");
        tracing::info!(source = %self.name, queue = %self.queue, "RabbitMQ source stopped");
    }
}

/// Runs one delivery through the pipeline and settles it with its own delivery tag.
async fn handle(shared: Arc<Shared>, delivery: Delivery, mut stopping: watch::Receiver<bool>) {
    // The semaphore is never closed; without a permit the delivery still goes through.
    let _permit = Arc::clone(&shared.permits).acquire_owned().await.ok();
    let Delivery {
        delivery_tag,
        redelivered,
        properties,
        data,
        acker,
        ..
    } = delivery;
    let received = convert::received(&properties, data);
    let outcome = shared.ingest.ingest(&shared.source, received).await.outcome;
    let (ack, settled) = match settlement(&outcome) {
        Settlement::Ack => {
            if !matches!(outcome, IngestOutcome::Filtered) {
                shared.storage_failures.store(0, Ordering::Relaxed);
            }
            (true, "acknowledged")
        }
        Settlement::AckUnstored { reason } => {
            tracing::error!(
                source = %shared.source,
                queue = %shared.queue,
                delivery_tag,
                %reason,
                "the ingest pipeline refused a broker message without storing it; acknowledging \
                 it so it cannot loop on the queue (the message is dropped)"
            );
            (true, "acknowledged unstored")
        }
        Settlement::Requeue {
            reason,
            storage_failed,
            wait,
        } => {
            let delay = if storage_failed {
                let failures = shared
                    .storage_failures
                    .fetch_add(1, Ordering::Relaxed)
                    .saturating_add(1);
                backoff(shared.requeue_delay_min, shared.requeue_delay_max, failures)
            } else {
                wait.unwrap_or(shared.requeue_delay_min)
                    .min(shared.requeue_delay_max)
            };
            tracing::warn!(
                source = %shared.source,
                queue = %shared.queue,
                delivery_tag,
                redelivered,
                %reason,
                requeue_in_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                "handing the message back to the broker"
            );
            if !*stopping.borrow() {
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    _ = stopping.wait_for(|stopping| *stopping) => {}
                }
            }
            (false, "handed back")
        }
    };
    let answered = if ack {
        acker.ack(BasicAckOptions::default()).await
    } else {
        acker
            .nack(BasicNackOptions {
                multiple: false,
                requeue: true,
            })
            .await
    };
    match answered {
        Ok(true) => {
            tracing::debug!(source = %shared.source, delivery_tag, redelivered, settled, "RabbitMQ delivery settled");
        }
        Ok(false) => {
            tracing::debug!(
                source = %shared.source,
                delivery_tag,
                "the channel of this delivery closed before it was settled; the broker delivers \
                 it again"
            );
        }
        Err(error) => {
            tracing::warn!(
                source = %shared.source,
                delivery_tag,
                error = %shared.redactor.redact(&error.to_string()),
                "settling a RabbitMQ delivery failed; the broker delivers it again"
            );
        }
    }
}

/// Collects the delivery tasks that finished while no one was waiting for them.
fn reap_finished(source: &str, tasks: &mut JoinSet<()>) {
    while let Some(joined) = tasks.try_join_next() {
        log_join(source, joined);
    }
}

fn log_join(source: &str, joined: Result<(), tokio::task::JoinError>) {
    if let Err(error) = joined
        && error.is_panic()
    {
        tracing::error!(%source, "a RabbitMQ delivery task panicked; the broker delivers the message again");
    }
}
