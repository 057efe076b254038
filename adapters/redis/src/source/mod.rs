//! The Redis inbox source: one stream read through a consumer group, as a
//! [`SourceClient`] that the application's source driver runs.
//!
//! The driver owns the loop (store, settlement, waits, reconnects, health, drain); this client
//! does the Redis calls:
//!
//! - [`connect`](SourceClient::connect) opens two connections (one for the blocking reads, one
//!   for everything else) and creates the group at the start of the stream when it is missing
//!   (`XGROUP CREATE ... 0 MKSTREAM`; an existing group is kept as it is).
//! - [`receive`](SourceClient::receive) returns, in this order: the entries the driver handed back
//!   (`Retry`, kept in memory, so a store that keeps failing does not count as a delivery); this
//!   consumer's own pending entries (`XREADGROUP ... 0`) after a connect or a read the driver
//!   dropped; entries of consumers idle for `claimIdleMs` (`XAUTOCLAIM`, every half
//!   `claimIdleMs`); then new entries (`XREADGROUP ... >` with `BLOCK blockMs`).
//! - An entry read again or claimed whose delivery count (`XPENDING`) is above `maxDeliveries`
//!   is added to `deadLetterStream` with its fields and `x-dead-stream`, `x-dead-entry-id`,
//!   `x-dead-deliveries`, and acknowledged, in one `MULTI`/`EXEC`; it never reaches the pipeline.
//! - [`settle`](SourceClient::settle) acknowledges (`XACK`) the entries whose row committed
//!   (or that had nothing to store) and keeps the others for the next receive. A process that dies
//!   before its `XACK` leaves the entry pending; it is claimed after `claimIdleMs` and its
//!   idempotency key turns the copy into a duplicate.
//!
//! Each entry becomes a [`Received`](queuebox_ports::ingest::Received): the `payload` field is the
//! body, every other field a header, the entry id the broker's message id (see `fields`).

mod entries;
mod options;

pub use options::{
    DEFAULT_BATCH_SIZE, DEFAULT_BLOCK, DEFAULT_CLAIM_IDLE, DEFAULT_COMMAND_TIMEOUT,
    DEFAULT_DRAIN_TIMEOUT, DEFAULT_MAX_DELIVERIES, DEFAULT_RETRY_DELAY_MAX,
    DEFAULT_RETRY_DELAY_MIN, DEFAULT_STORE_RETRY_MAX, DEFAULT_STORE_RETRY_MIN, RedisSourceOptions,
};

use crate::connect::Endpoint;
use crate::error::RedisError;
use crate::fields::received;
use async_trait::async_trait;
use entries::{Entry, autoclaim_reply, pending_reply, read_reply};
use queuebox_ports::backoff::Backoff;
use queuebox_ports::source::{Delivery, Settle, SourceClient, SourceFailure, SourcePlan};
use redis::Value;
use redis::aio::MultiplexedConnection;
use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// How much of a failure reason is kept.
const MAX_REASON_BYTES: usize = 1024;

/// What settling one entry needs: the entry itself, so a handed-back entry can be returned again
/// without reading it from Redis (which would count a delivery).
#[derive(Debug)]
pub struct RedisToken(Entry);

/// One configured Redis inbox source.
///
/// Build it at start with [`RedisSource::new`] (no connection is made), then hand it to the
/// application's source driver, which names its health component `redis.<source name>`.
pub struct RedisSource {
    options: RedisSourceOptions,
    endpoint: Endpoint,
    reader: Option<MultiplexedConnection>,
    commands: Option<MultiplexedConnection>,
    state: Mutex<State>,
}

impl std::fmt::Debug for RedisSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisSource")
            .field("name", &self.options.name)
            .field("stream", &self.options.stream)
            .field("group", &self.options.group)
            .field("consumer", &self.options.consumer)
            .field("url", &self.endpoint.shown)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
struct State {
    /// Entries the driver handed back, returned first and in order.
    retry: VecDeque<Entry>,
    /// Read this consumer's pending entries before new ones (after a connect, and after a read
    /// whose future may have been dropped with entries already delivered to us).
    history: bool,
    /// Where the next `XAUTOCLAIM` starts, and when it is due.
    claim_cursor: String,
    claim_due: Instant,
}

impl RedisSource {
    /// Checks the options; opens no connection.
    ///
    /// The checks: `url` is a `redis://` URL; `stream`, `group`, `consumer` and
    /// `deadLetterStream` are not blank; the dead-letter stream is not the stream read;
    /// `batchSize`, `blockMs` and `claimIdleMs` are above zero.
    ///
    /// # Errors
    /// [`RedisError`] naming the source and the key; never the URL or a password.
    pub fn new(options: RedisSourceOptions) -> Result<Self, RedisError> {
        let owner = format!("sources.{}", options.name);
        let endpoint = Endpoint::new(&owner, &options.url, MAX_REASON_BYTES)?;
        let invalid = |what: String| RedisError::InvalidSetting {
            owner: owner.clone(),
            what,
        };
        for (key, value) in [
            ("stream", &options.stream),
            ("group", &options.group),
            ("consumer", &options.consumer),
            ("deadLetterStream", &options.dead_letter_stream),
        ] {
            if value.trim().is_empty() {
                return Err(invalid(format!("{key} must not be blank")));
            }
        }
        if options.dead_letter_stream == options.stream {
            return Err(invalid(
                "deadLetterStream must differ from stream (a dead entry would be read again)"
                    .to_owned(),
            ));
        }
        if options.batch_size == 0 {
            return Err(invalid("batchSize must be above 0".to_owned()));
        }
        if options.block.is_zero() || options.claim_idle.is_zero() {
            return Err(invalid(
                "blockMs and claimIdleMs must be above 0".to_owned(),
            ));
        }
        Ok(Self {
            options,
            endpoint,
            reader: None,
            commands: None,
            state: Mutex::new(State {
                retry: VecDeque::new(),
                history: true,
                claim_cursor: "0-0".to_owned(),
                claim_due: Instant::now(),
            }),
        })
    }

    /// The source name.
    pub fn name(&self) -> &str {
        &self.options.name
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn failure(&self, what: &str, error: &redis::RedisError) -> SourceFailure {
        SourceFailure::new(self.endpoint.reason(
            &format!(
                "{what} on stream `{}` (group `{}`) at {}",
                self.options.stream, self.options.group, self.endpoint.shown
            ),
            error,
        ))
    }

    fn not_connected(&self) -> SourceFailure {
        SourceFailure::new(format!("not connected to Redis at {}", self.endpoint.shown))
    }

    /// Runs `command` on `connection` within `limit`.
    async fn run(
        &self,
        connection: Option<&MultiplexedConnection>,
        command: &redis::Cmd,
        limit: Duration,
        what: &str,
    ) -> Result<Value, SourceFailure> {
        let mut connection = connection.cloned().ok_or_else(|| self.not_connected())?;
        match tokio::time::timeout(limit, command.query_async::<Value>(&mut connection)).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(self.failure(what, &error)),
            Err(_) => Err(SourceFailure::new(format!(
                "{what} on stream `{}` at {}: no answer within {} ms",
                self.options.stream,
                self.endpoint.shown,
                limit.as_millis()
            ))),
        }
    }

    async fn command(&self, command: &redis::Cmd, what: &str) -> Result<Value, SourceFailure> {
        self.run(
            self.commands.as_ref(),
            command,
            self.options.command_timeout,
            what,
        )
        .await
    }

    /// An open connection: `kept` when it still answers, else a new one.
    async fn reopen(
        &self,
        kept: Option<MultiplexedConnection>,
    ) -> Result<MultiplexedConnection, SourceFailure> {
        if let Some(connection) = kept
            && self
                .run(
                    Some(&connection),
                    &redis::cmd("PING"),
                    self.options.command_timeout,
                    "PING",
                )
                .await
                .is_ok()
        {
            return Ok(connection);
        }
        self.endpoint
            .connect(self.options.command_timeout)
            .await
            .map_err(|(_, reason)| SourceFailure::new(reason))
    }

    fn group_read(&self, max: usize, id: &str, block: Option<Duration>) -> redis::Cmd {
        let mut command = redis::cmd("XREADGROUP");
        command
            .arg("GROUP")
            .arg(&self.options.group)
            .arg(&self.options.consumer)
            .arg("COUNT")
            .arg(max);
        if let Some(block) = block {
            command
                .arg("BLOCK")
                .arg(u64::try_from(block.as_millis()).unwrap_or(u64::MAX));
        }
        command.arg("STREAMS").arg(&self.options.stream).arg(id);
        command
    }

    /// Acknowledges `ids` (entries with nothing to store, or stored).
    async fn ack(&self, ids: &[String]) -> Result<(), SourceFailure> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut command = redis::cmd("XACK");
        command
            .arg(&self.options.stream)
            .arg(&self.options.group)
            .arg(ids);
        self.command(&command, "XACK").await.map(|_| ())
    }

    /// Of `entries` read again or claimed: those to store. Entries deleted from the stream are
    /// acknowledged, and entries delivered more than `maxDeliveries` times dead-lettered.
    async fn screen(&self, entries: Vec<Entry>) -> Result<Vec<Entry>, SourceFailure> {
        let (live, deleted): (Vec<Entry>, Vec<Entry>) =
            entries.into_iter().partition(|e| e.fields.is_some());
        let deleted: Vec<String> = deleted.into_iter().map(|e| e.id).collect();
        self.ack(&deleted).await?;
        if self.options.max_deliveries == 0 || live.is_empty() {
            return Ok(live);
        }
        let (Some(first), Some(last)) = (live.first(), live.last()) else {
            return Ok(live);
        };
        let mut pending = redis::cmd("XPENDING");
        pending
            .arg(&self.options.stream)
            .arg(&self.options.group)
            .arg(&first.id)
            .arg(&last.id)
            .arg(live.len())
            .arg(&self.options.consumer);
        let counts = pending_reply(&self.command(&pending, "XPENDING").await?);
        let mut keep = Vec::with_capacity(live.len());
        for entry in live {
            let deliveries = counts
                .iter()
                .find(|(id, _)| *id == entry.id)
                .map_or(0, |(_, n)| *n);
            if deliveries > u64::from(self.options.max_deliveries) {
                self.dead_letter(&entry, deliveries).await?;
            } else {
                keep.push(entry);
            }
        }
        Ok(keep)
    }

    /// Adds `entry` to the dead-letter stream and acknowledges it, in one transaction.
    async fn dead_letter(&self, entry: &Entry, deliveries: u64) -> Result<(), SourceFailure> {
        let mut add = redis::cmd("XADD");
        add.arg(&self.options.dead_letter_stream).arg("*");
        for (name, value) in entry.fields.iter().flatten() {
            add.arg(name).arg(value.as_slice());
        }
        add.arg("x-dead-stream")
            .arg(&self.options.stream)
            .arg("x-dead-entry-id")
            .arg(&entry.id)
            .arg("x-dead-deliveries")
            .arg(deliveries);
        let mut transaction = redis::pipe();
        transaction
            .atomic()
            .add_command(add)
            .cmd("XACK")
            .arg(&self.options.stream)
            .arg(&self.options.group)
            .arg(&entry.id);
        let mut connection = self.commands.clone().ok_or_else(|| self.not_connected())?;
        let done = tokio::time::timeout(
            self.options.command_timeout,
            transaction.query_async::<Value>(&mut connection),
        )
        .await;
        match done {
            Ok(Ok(_)) => {
                tracing::warn!(
                    source = %self.options.name,
                    entry = %entry.id,
                    deliveries,
                    dead_letter_stream = %self.options.dead_letter_stream,
                    "a Redis entry was delivered more than maxDeliveries times; moved to the dead-letter stream"
                );
                Ok(())
            }
            Ok(Err(error)) => Err(self.failure("dead-lettering an entry", &error)),
            Err(_) => Err(SourceFailure::new(format!(
                "dead-lettering an entry of stream `{}`: no answer within {} ms",
                self.options.stream,
                self.options.command_timeout.as_millis()
            ))),
        }
    }

    fn deliveries(entries: Vec<Entry>) -> Vec<Delivery<RedisToken>> {
        entries
            .into_iter()
            .map(|entry| Delivery {
                received: received(&entry.id, entry.fields.clone().unwrap_or_default()),
                token: RedisToken(entry),
                order_key: None,
            })
            .collect()
    }

    /// Resets the idle time of `ids` without counting a delivery (`XCLAIM ... JUSTID`), so an
    /// entry this consumer still holds is not claimed by another.
    async fn touch(&self, ids: &[String]) -> Result<(), SourceFailure> {
        let mut command = redis::cmd("XCLAIM");
        command
            .arg(&self.options.stream)
            .arg(&self.options.group)
            .arg(&self.options.consumer)
            .arg(0)
            .arg(ids)
            .arg("JUSTID");
        self.command(&command, "XCLAIM").await.map(|_| ())
    }
}

#[async_trait]
impl SourceClient for RedisSource {
    type Token = RedisToken;

    fn plan(&self) -> SourcePlan {
        SourcePlan {
            kind: crate::BACKEND,
            source: self.options.name.clone(),
            consumes: format!(
                "stream `{}` as consumer `{}` of group `{}`",
                self.options.stream, self.options.consumer, self.options.group
            ),
            // One batch at a time: a receive never runs while entries of this consumer are
            // being stored, so the consumer's pending entries read back after a connect or a
            // dropped read are never ones the driver still holds.
            whole_batches: true,
            batch: usize::try_from(self.options.batch_size)
                .unwrap_or(usize::MAX)
                .max(1),
            reconnect: Backoff::new(self.options.retry_delay_min, self.options.retry_delay_max),
            retry: Backoff::new(self.options.store_retry_min, self.options.store_retry_max),
            drain_timeout: self.options.drain_timeout,
            check_every: None,
        }
    }

    async fn connect(&mut self) -> Result<(), SourceFailure> {
        let kept = self.commands.take();
        let commands = self.reopen(kept).await?;
        self.commands = Some(commands);
        let kept = self.reader.take();
        let reader = self.reopen(kept).await?;
        self.reader = Some(reader);
        let mut create = redis::cmd("XGROUP");
        create
            .arg("CREATE")
            .arg(&self.options.stream)
            .arg(&self.options.group)
            .arg("0")
            .arg("MKSTREAM");
        match self.command(&create, "XGROUP CREATE").await {
            Ok(_) => tracing::info!(
                source = %self.options.name,
                stream = %self.options.stream,
                group = %self.options.group,
                "created the Redis consumer group at the start of the stream"
            ),
            Err(failure) if failure.reason.contains("BUSYGROUP") => {}
            Err(failure) => return Err(failure),
        }
        let mut state = self.state();
        state.history = true;
        state.claim_due = Instant::now();
        Ok(())
    }

    async fn receive(&self, max: usize) -> Result<Vec<Delivery<RedisToken>>, SourceFailure> {
        let max = max.max(1);
        loop {
            // Handed back by the driver: returned first, their idle time reset so no other
            // consumer claims what this one still holds.
            let held: Vec<String> = self
                .state()
                .retry
                .iter()
                .take(max)
                .map(|e| e.id.clone())
                .collect();
            if !held.is_empty() {
                self.touch(&held).await?;
                let mut state = self.state();
                let take = held.len().min(state.retry.len());
                let batch: Vec<Entry> = state.retry.drain(..take).collect();
                return Ok(Self::deliveries(batch));
            }
            if self.state().history {
                let reply = self
                    .run(
                        self.commands.as_ref(),
                        &self.group_read(max, "0", None),
                        self.options.command_timeout,
                        "XREADGROUP (pending entries)",
                    )
                    .await?;
                let entries = read_reply(&reply);
                if entries.is_empty() {
                    self.state().history = false;
                } else {
                    let keep = self.screen(entries).await?;
                    if !keep.is_empty() {
                        return Ok(Self::deliveries(keep));
                    }
                }
                continue;
            }
            let claim_from = {
                let state = self.state();
                (Instant::now() >= state.claim_due).then(|| state.claim_cursor.clone())
            };
            if let Some(cursor) = claim_from {
                let mut claim = redis::cmd("XAUTOCLAIM");
                claim
                    .arg(&self.options.stream)
                    .arg(&self.options.group)
                    .arg(&self.options.consumer)
                    .arg(u64::try_from(self.options.claim_idle.as_millis()).unwrap_or(u64::MAX))
                    .arg(&cursor)
                    .arg("COUNT")
                    .arg(max);
                // Claimed entries are this consumer's from the answer on: read them again if
                // this call is dropped.
                self.state().history = true;
                let (next, claimed) = autoclaim_reply(&self.command(&claim, "XAUTOCLAIM").await?);
                {
                    let mut state = self.state();
                    state.history = false;
                    // A full turn over the pending entries ends at 0-0; the next is due later.
                    if next == "0-0" {
                        state.claim_due = Instant::now() + self.options.claim_idle / 2;
                    }
                    state.claim_cursor = next;
                }
                if !claimed.is_empty() {
                    tracing::info!(
                        source = %self.options.name,
                        claimed = claimed.len(),
                        "claimed Redis entries left pending by an idle consumer"
                    );
                    let keep = self.screen(claimed).await?;
                    if !keep.is_empty() {
                        return Ok(Self::deliveries(keep));
                    }
                }
                continue;
            }
            self.state().history = true;
            let reply = self
                .run(
                    self.reader.as_ref(),
                    &self.group_read(max, ">", Some(self.options.block)),
                    self.options.block + self.options.command_timeout,
                    "XREADGROUP",
                )
                .await?;
            self.state().history = false;
            let entries = read_reply(&reply);
            if !entries.is_empty() {
                return Ok(Self::deliveries(entries));
            }
        }
    }

    async fn settle(&self, settled: Vec<(RedisToken, Settle)>) {
        let mut acked = Vec::new();
        {
            let mut state = self.state();
            for (RedisToken(entry), settle) in settled {
                match settle {
                    Settle::Ack => acked.push(entry.id),
                    Settle::Retry => state.retry.push_back(entry),
                }
            }
        }
        if let Err(failure) = self.ack(&acked).await {
            tracing::warn!(
                source = %self.options.name,
                reason = %failure,
                entries = acked.len(),
                "acknowledging Redis entries failed; they stay pending and are claimed again after claimIdleMs"
            );
        }
    }

    async fn close(&mut self) {
        self.reader = None;
        self.commands = None;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use queuebox_domain::secret::Secret;

    fn options() -> RedisSourceOptions {
        RedisSourceOptions::new(
            "orders",
            Secret::new("redis://:pw-1@127.0.0.1:6379"),
            "s",
            "g",
            "c",
        )
    }

    #[test]
    fn settings_are_checked_at_build() {
        let source = RedisSource::new(options()).unwrap();
        let plan = source.plan();
        assert_eq!(plan.kind, "redis");
        assert_eq!(plan.batch, 100);
        assert_eq!(source.options.dead_letter_stream, "s:dead");
        let mut same = options();
        same.dead_letter_stream = "s".into();
        assert!(
            RedisSource::new(same)
                .unwrap_err()
                .to_string()
                .contains("deadLetterStream must differ")
        );
        let mut blank = options();
        blank.group = " ".into();
        assert_eq!(
            RedisSource::new(blank).unwrap_err().to_string(),
            "sources.orders: group must not be blank"
        );
        let mut zero = options();
        zero.batch_size = 0;
        assert!(RedisSource::new(zero).is_err());
    }
}
