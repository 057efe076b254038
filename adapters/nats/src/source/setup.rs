//! The source's link to JetStream: the client (connected once; async-nats reconnects it), the
//! stream check and the durable pull consumer.
//!
//! QueueBox never creates the stream: its subjects, retention and replication are the operator's
//! decisions, and a stream made up by QueueBox with a typo in its name would look healthy while
//! receiving nothing. The durable consumer is different: it is QueueBox's own reading position,
//! and `filterSubject` and `ackWaitMs` are its settings. So QueueBox creates it when it is missing
//! and otherwise brings it to the configuration (the create-or-update the server offers); a change
//! the server refuses (for example a push consumer of that name, or a new filter on an old server)
//! stops the source with the server's answer naming the consumer.

use crate::connect::Endpoint;
use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy, PullConsumer, pull};
use async_nats::jetstream::context::GetStreamErrorKind;
use async_nats::jetstream::{self, ErrorCode};
use std::future::Future;
use std::time::Duration;
use tokio::time::timeout;

/// The settings the link is built from.
pub(crate) struct SetupSettings {
    pub(crate) endpoint: Endpoint,
    pub(crate) source: String,
    pub(crate) stream: String,
    pub(crate) durable: String,
    pub(crate) filter_subject: Option<String>,
    pub(crate) ack_wait: Duration,
    pub(crate) setup_timeout: Duration,
}

/// The connection and consumer manager of one source.
pub(crate) struct Setup {
    pub(crate) settings: SetupSettings,
    pub(crate) client: Option<async_nats::Client>,
}

impl Setup {
    pub(crate) fn new(settings: SetupSettings) -> Self {
        Self {
            settings,
            client: None,
        }
    }

    /// The text the health component and the log show when the stream does not exist.
    pub(crate) fn missing_stream_reason(&self) -> String {
        format!(
            "stream `{}` does not exist on the NATS server at {}; create it (QueueBox never \
             creates streams)",
            self.settings.stream, self.settings.endpoint.shown
        )
    }

    /// Connects when needed, checks the stream and creates (or updates) the durable consumer.
    ///
    /// # Errors
    /// A masked reason for the log and the health component.
    pub(crate) async fn consumer(&mut self) -> Result<PullConsumer, String> {
        let s = &self.settings;
        let client = match &self.client {
            Some(client) => client.clone(),
            None => {
                let client = s
                    .endpoint
                    .connect(&format!("queuebox source {}", s.source), s.setup_timeout)
                    .await
                    .map_err(|(_, reason)| reason)?;
                tracing::info!(source = %s.source, servers = %s.endpoint.shown, "connected to NATS");
                self.client = Some(client.clone());
                client
            }
        };
        let context = jetstream::ContextBuilder::new()
            .timeout(s.setup_timeout)
            .build(client);
        let stream = self
            .step(&format!("reading stream `{}`", s.stream), async {
                context.get_stream(&s.stream).await
            })
            .await
            .map_err(|(error, text)| match error.kind() {
                GetStreamErrorKind::JetStream(e)
                    if e.error_code() == ErrorCode::STREAM_NOT_FOUND =>
                {
                    self.missing_stream_reason()
                }
                _ => text,
            })?;
        let config = pull::Config {
            durable_name: Some(s.durable.clone()),
            filter_subject: s.filter_subject.clone().unwrap_or_default(),
            ack_policy: AckPolicy::Explicit,
            ack_wait: s.ack_wait,
            deliver_policy: DeliverPolicy::All,
            ..pull::Config::default()
        };
        let consumer = self
            .step(
                &format!(
                    "creating or updating the durable consumer `{}` on stream `{}`",
                    s.durable, s.stream
                ),
                async { stream.create_consumer(config).await },
            )
            .await
            .map_err(|(_, text)| text)?;
        Ok(consumer)
    }

    /// Runs one setup step under the setup bound, turning its failure into a masked reason.
    async fn step<T, E: std::fmt::Display>(
        &self,
        what: &str,
        step: impl Future<Output = Result<T, E>>,
    ) -> Result<T, (StepError<E>, String)> {
        match timeout(self.settings.setup_timeout, step).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => {
                let text = self
                    .settings
                    .endpoint
                    .redactor
                    .redact(&format!("{what}: {error}"));
                Err((StepError::Failed(error), text))
            }
            Err(_) => Err((
                StepError::TimedOut,
                format!(
                    "{what}: no answer from NATS at {} within {} ms",
                    self.settings.endpoint.shown,
                    self.settings.setup_timeout.as_millis()
                ),
            )),
        }
    }
}

/// A failed setup step: the client's error, or no answer in time.
pub(crate) enum StepError<E> {
    Failed(E),
    TimedOut,
}

impl StepError<jetstream::context::GetStreamError> {
    fn kind(&self) -> GetStreamErrorKind {
        match self {
            StepError::Failed(error) => error.kind(),
            StepError::TimedOut => GetStreamErrorKind::Request,
        }
    }
}
