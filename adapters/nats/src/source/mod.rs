//! The NATS inbox source: the broker calls of one JetStream stream read through a durable pull
//! consumer, behind the [`SourceClient`] port. The application's source driver runs it: it
//! stores each message through the ingest pipeline, then settles it here (see
//! `queuebox_application::source`).
//!
//! [`SourceClient::connect`] connects (once; async-nats reconnects the client), checks the
//! stream, creates or updates the durable consumer (see `setup` for why the consumer but never
//! the stream) and starts pulling up to `batchSize` messages at a time. Each message becomes a
//! [`Received`](queuebox_ports::ingest::Received) (headers as pairs, `Nats-Msg-Id` as the
//! broker's message id). [`Settle::Ack`] is `+ACK`, [`Settle::Retry`] is `-NAK` (JetStream
//! delivers it again at once: the driver already waited). A message delivered but never settled
//! (a crash, a stop past the drain bound) is redelivered by JetStream after `ackWaitMs`.

mod options;
mod setup;

pub use options::{
    DEFAULT_ACK_WAIT, DEFAULT_BATCH_SIZE, DEFAULT_DRAIN_TIMEOUT, DEFAULT_NAK_DELAY_MAX,
    DEFAULT_NAK_DELAY_MIN, DEFAULT_RETRY_DELAY_MAX, DEFAULT_RETRY_DELAY_MIN, DEFAULT_SETUP_TIMEOUT,
    NatsSourceOptions,
};

use crate::connect::Endpoint;
use crate::error::NatsError;
use crate::headers::received;
use async_nats::jetstream::AckKind;
use async_nats::jetstream::Message;
use async_nats::jetstream::consumer::pull::{MessagesErrorKind, Stream as Pulled};
use async_trait::async_trait;
use futures::{FutureExt, StreamExt};
use queuebox_ports::backoff::Backoff;
use queuebox_ports::source::{Delivery, Settle, SourceClient, SourceFailure, SourcePlan};
use setup::{Setup, SetupSettings};
use std::time::Duration;

/// How much of a failure reason is kept.
const MAX_REASON_BYTES: usize = 1024;
/// How long one pull request waits on the server for messages before the client renews it.
const PULL_EXPIRES: Duration = Duration::from_secs(30);
/// How often the server proves an idle pull request alive; two missed beats end the session.
const PULL_HEARTBEAT: Duration = Duration::from_secs(5);
/// How long the stop waits for the last acknowledgements to leave.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(2);

/// One configured NATS inbox source: the client the source driver runs.
pub struct NatsSource {
    name: String,
    batch_size: u32,
    reconnect: Backoff,
    retry: Backoff,
    drain_timeout: Duration,
    setup: Setup,
    pulled: Option<tokio::sync::Mutex<Pulled>>,
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

impl NatsSource {
    /// Checks the options; opens no connection.
    ///
    /// The checks: `servers` parses; `stream` and `durable` are valid JetStream names (not empty,
    /// no whitespace, `.`, `*` or `>`); `batchSize` and `ackWaitMs` are above zero.
    ///
    /// # Errors
    /// [`NatsError`] naming the source and the key; never a URL, password or token.
    pub fn new(options: NatsSourceOptions) -> Result<Self, NatsError> {
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
        Ok(Self {
            name: options.name.clone(),
            batch_size: options.batch_size,
            reconnect: Backoff::new(options.retry_delay_min, options.retry_delay_max),
            retry: Backoff::new(options.nak_delay_min, options.nak_delay_max),
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
            pulled: None,
        })
    }

    /// The source name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn delivery(message: Message) -> Delivery<Message> {
        let received = received(message.headers.as_ref(), &message.payload);
        Delivery {
            token: message,
            received,
            order_key: None,
        }
    }

    fn pull_failed(
        &self,
        error: &async_nats::jetstream::consumer::pull::MessagesError,
    ) -> SourceFailure {
        let durable = &self.setup.settings.durable;
        if error.kind() == MessagesErrorKind::ConsumerDeleted {
            return SourceFailure::new(format!(
                "the durable consumer `{durable}` was deleted; it is created again"
            ));
        }
        SourceFailure::new(self.setup.settings.endpoint.redactor.redact(&format!(
            "pulling from the durable consumer `{durable}`: {error}"
        )))
    }
}

#[async_trait]
impl SourceClient for NatsSource {
    type Token = Message;

    fn plan(&self) -> SourcePlan {
        let s = &self.setup.settings;
        SourcePlan {
            kind: crate::BACKEND,
            source: self.name.clone(),
            consumes: format!(
                "stream `{}` (durable consumer `{}`) at {}",
                s.stream, s.durable, s.endpoint.shown
            ),
            batch: usize::try_from(self.batch_size).unwrap_or(usize::MAX),
            whole_batches: false,
            reconnect: self.reconnect,
            retry: self.retry,
            drain_timeout: self.drain_timeout,
            check_every: None,
        }
    }

    async fn connect(&mut self) -> Result<(), SourceFailure> {
        self.pulled = None;
        let consumer = self.setup.consumer().await.map_err(SourceFailure::new)?;
        let pulled = consumer
            .stream()
            .max_messages_per_batch(usize::try_from(self.batch_size).unwrap_or(1))
            .expires(PULL_EXPIRES)
            .heartbeat(PULL_HEARTBEAT)
            .messages()
            .await
            .map_err(|error| {
                SourceFailure::new(
                    self.setup
                        .settings
                        .endpoint
                        .redactor
                        .redact(&format!("starting to pull messages: {error}")),
                )
            })?;
        self.pulled = Some(tokio::sync::Mutex::new(pulled));
        Ok(())
    }

    async fn receive(&self, max: usize) -> Result<Vec<Delivery<Message>>, SourceFailure> {
        let Some(pulled) = &self.pulled else {
            return Err(SourceFailure::new("not connected"));
        };
        let mut pulled = pulled.lock().await;
        let mut batch = Vec::with_capacity(max.min(64));
        match pulled.next().await {
            Some(Ok(message)) => batch.push(Self::delivery(message)),
            Some(Err(error)) => return Err(self.pull_failed(&error)),
            None => return Err(SourceFailure::new("the message stream ended")),
        }
        while batch.len() < max {
            match pulled.next().now_or_never() {
                Some(Some(Ok(message))) => batch.push(Self::delivery(message)),
                // A failure after the first message shows on the next receive.
                _ => break,
            }
        }
        Ok(batch)
    }

    async fn settle(&self, settled: Vec<(Message, Settle)>) {
        for (message, settle) in settled {
            let (kind, what) = match settle {
                Settle::Ack => (AckKind::Ack, "acknowledging"),
                Settle::Retry => (AckKind::Nak(None), "handing back"),
            };
            if let Err(error) = message.ack_with(kind).await {
                tracing::warn!(source = %self.name, %error, "{what} a NATS message failed; JetStream redelivers it after ackWaitMs");
            }
        }
    }

    async fn close(&mut self) {
        self.pulled = None;
        if let Some(client) = &self.setup.client {
            // Sends the last acknowledgements before the process goes on to stop.
            let _ = tokio::time::timeout(FLUSH_TIMEOUT, client.flush()).await;
        }
    }
}
