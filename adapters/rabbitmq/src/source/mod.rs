//! The RabbitMQ inbox source: the broker calls of one queue's consumer, behind the
//! [`SourceClient`] port. The application's source driver runs it: it stores each batch through
//! the ingest pipeline, then settles it here (see `queuebox_application::source`).
//!
//! [`SourceClient::connect`] connects (keeping a connection that is still open), sets the
//! prefetch (`basic.qos`), checks the queue (or declares it, durable, with `declareQueue: true`)
//! and consumes with manual acknowledgements. Each delivery becomes a
//! [`Received`](queuebox_ports::ingest::Received) (see `convert` for the header rules); a batch
//! is what the broker has pushed, at most `prefetchCount`. [`Settle::Ack`] is `basic.ack` of the
//! delivery's own tag, [`Settle::Retry`] is `basic.nack` with requeue. Closing the channel (a
//! break, the stop) hands every unacknowledged delivery back to the queue.

mod broker;
mod convert;
mod options;

pub use options::{
    DEFAULT_DRAIN_TIMEOUT, DEFAULT_PREFETCH_COUNT, DEFAULT_REQUEUE_DELAY_MAX,
    DEFAULT_REQUEUE_DELAY_MIN, DEFAULT_SETUP_TIMEOUT, RabbitmqSourceOptions,
};

use crate::error::RabbitmqError;
use crate::message::MAX_SHORT_STRING;
use crate::publisher::encoded_password;
use crate::tls::ensure_crypto_provider;
use async_trait::async_trait;
use broker::{Broker, BrokerSettings, Consuming};
use futures::{FutureExt, StreamExt};
use lapin::Acker;
use lapin::message::Delivery as AmqpDelivery;
use lapin::options::{BasicAckOptions, BasicNackOptions};
use queuebox_domain::redact::Redactor;
use queuebox_ports::backoff::Backoff;
use queuebox_ports::source::{Delivery, Settle, SourceClient, SourceFailure, SourcePlan};
use std::time::Duration;

/// How much of a failure reason is kept.
const MAX_REASON_BYTES: usize = 1024;
/// How often the driver checks that the connection and the channel are still open (lapin
/// reports a broken connection to the consumer too; this is the backstop).
const LINK_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// One configured RabbitMQ inbox source: the client the source driver runs.
pub struct RabbitmqSource {
    name: String,
    queue: String,
    prefetch: u16,
    reconnect: Backoff,
    requeue: Backoff,
    drain_timeout: Duration,
    broker: Broker,
    consuming: Option<Consuming>,
    redactor: Redactor,
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

/// What settling one delivery needs.
pub struct RabbitmqToken {
    delivery_tag: u64,
    acker: Acker,
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
    pub fn new(options: RabbitmqSourceOptions) -> Result<Self, RabbitmqError> {
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
        Ok(Self {
            name,
            queue: options.queue_name,
            prefetch: options.prefetch_count,
            reconnect: Backoff::new(options.reconnect_delay_min, options.reconnect_delay_max),
            requeue: Backoff::new(options.requeue_delay_min, options.requeue_delay_max),
            drain_timeout: options.drain_timeout,
            broker,
            consuming: None,
            redactor,
        })
    }

    /// The source name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn delivery(&self, delivery: AmqpDelivery) -> Delivery<RabbitmqToken> {
        let AmqpDelivery {
            delivery_tag,
            properties,
            data,
            acker,
            ..
        } = delivery;
        Delivery {
            token: RabbitmqToken {
                delivery_tag,
                acker,
            },
            received: convert::received(&properties, data),
            order_key: None,
        }
    }

    fn consumer_failed(&self, error: &lapin::Error) -> SourceFailure {
        SourceFailure::new(self.redactor.redact(&format!(
            "the RabbitMQ consumer of queue `{}` failed: {error}",
            self.queue
        )))
    }

    fn consumer_cancelled(&self) -> SourceFailure {
        SourceFailure::new(format!(
            "the broker cancelled the consumer of queue `{}` (was the queue deleted?)",
            self.queue
        ))
    }
}

#[async_trait]
impl SourceClient for RabbitmqSource {
    type Token = RabbitmqToken;

    fn plan(&self) -> SourcePlan {
        SourcePlan {
            kind: crate::BACKEND,
            source: self.name.clone(),
            consumes: format!("queue `{}` at {}", self.queue, self.broker.endpoint),
            batch: usize::from(self.prefetch),
            whole_batches: false,
            reconnect: self.reconnect,
            retry: self.requeue,
            drain_timeout: self.drain_timeout,
            check_every: Some(LINK_CHECK_INTERVAL),
        }
    }

    async fn connect(&mut self) -> Result<(), SourceFailure> {
        if let Some(old) = self.consuming.take() {
            // A channel the broker left open (it cancelled the consumer) is closed; what was
            // delivered on it and not settled goes back to the queue.
            self.broker.close_channel(&old).await;
            self.broker.drop_broken_connection();
        }
        let consuming = self
            .broker
            .consume()
            .await
            .map_err(|failure| SourceFailure::new(failure.reason))?;
        self.consuming = Some(consuming);
        Ok(())
    }

    async fn receive(&self, max: usize) -> Result<Vec<Delivery<RabbitmqToken>>, SourceFailure> {
        let Some(consuming) = &self.consuming else {
            return Err(SourceFailure::new("not connected"));
        };
        let mut consumer = consuming.consumer.lock().await;
        let mut batch = Vec::with_capacity(max.min(usize::from(self.prefetch)));
        match consumer.next().await {
            Some(Ok(delivery)) => batch.push(self.delivery(delivery)),
            Some(Err(error)) => return Err(self.consumer_failed(&error)),
            None => return Err(self.consumer_cancelled()),
        }
        while batch.len() < max {
            match consumer.next().now_or_never() {
                Some(Some(Ok(delivery))) => batch.push(self.delivery(delivery)),
                // A failure after the first delivery shows on the next receive.
                _ => break,
            }
        }
        Ok(batch)
    }

    async fn settle(&self, settled: Vec<(RabbitmqToken, Settle)>) {
        for (token, settle) in settled {
            let answered = match settle {
                Settle::Ack => token.acker.ack(BasicAckOptions::default()).await,
                Settle::Retry => {
                    token
                        .acker
                        .nack(BasicNackOptions {
                            multiple: false,
                            requeue: true,
                        })
                        .await
                }
            };
            match answered {
                Ok(true) => {}
                Ok(false) => tracing::debug!(
                    source = %self.name,
                    delivery_tag = token.delivery_tag,
                    "the channel of this delivery closed before it was settled; the broker \
                     delivers it again"
                ),
                Err(error) => tracing::warn!(
                    source = %self.name,
                    delivery_tag = token.delivery_tag,
                    error = %self.redactor.redact(&error.to_string()),
                    "settling a RabbitMQ delivery failed; the broker delivers it again"
                ),
            }
        }
    }

    async fn check(&self) -> Result<(), SourceFailure> {
        match &self.consuming {
            Some(consuming) if self.broker.is_open(consuming) => Ok(()),
            _ => Err(SourceFailure::new(format!(
                "the connection to the broker at {} closed",
                self.broker.endpoint
            ))),
        }
    }

    async fn close(&mut self) {
        if let Some(consuming) = self.consuming.take() {
            self.broker.close_channel(&consuming).await;
        }
        self.broker.close().await;
    }
}
