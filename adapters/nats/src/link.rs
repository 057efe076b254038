//! The publisher's client: connected on first use, then kept, since async-nats reconnects on its
//! own after a drop. Only a failed first connection is retried here, with a growing wait during
//! which publishes fail at once (the dispatcher retries the rows on its own schedule) instead of
//! piling connection attempts on a server that is down.

use crate::connect::Endpoint;
use crate::failure::failure;
use async_nats::jetstream;
use queuebox_ports::backoff::Backoff;
use queuebox_ports::publish::{PublishError, PublishErrorKind};
use std::time::Duration;
use tokio::time::{Instant, timeout_at};

/// A connected client and its JetStream context.
#[derive(Debug, Clone)]
pub(crate) struct Connected {
    pub(crate) client: async_nats::Client,
    pub(crate) jetstream: jetstream::Context,
}

#[derive(Debug, Default)]
struct State {
    connected: Option<Connected>,
    failures: u32,
    retry_at: Option<Instant>,
    last_failure: Option<PublishError>,
}

/// The connection manager of one destination.
#[derive(Debug)]
pub(crate) struct Link {
    pub(crate) endpoint: Endpoint,
    client_name: String,
    timeout: Duration,
    delay_min: Duration,
    delay_max: Duration,
    state: tokio::sync::Mutex<State>,
}

impl Link {
    pub(crate) fn new(
        endpoint: Endpoint,
        client_name: String,
        timeout: Duration,
        delay_min: Duration,
        delay_max: Duration,
    ) -> Self {
        Self {
            endpoint,
            client_name,
            timeout,
            delay_min,
            delay_max: delay_max.max(delay_min),
            state: tokio::sync::Mutex::new(State::default()),
        }
    }

    fn fail(&self, kind: PublishErrorKind, reason: &str) -> PublishError {
        failure(kind, reason, &self.endpoint.redactor)
    }

    /// The client, connecting when there is none yet, by `deadline`. The state lock is held only
    /// while handing out the client or making the first connection, never during a publish.
    ///
    /// # Errors
    /// [`PublishErrorKind::Unreachable`] when no connection can be made (or the wait after a
    /// failed attempt is not over), [`PublishErrorKind::Auth`] when the server refuses the
    /// credentials.
    pub(crate) async fn connected(&self, deadline: Instant) -> Result<Connected, PublishError> {
        let Ok(mut state) = timeout_at(deadline, self.state.lock()).await else {
            return Err(self.fail(
                PublishErrorKind::Unreachable,
                &format!(
                    "no connection to NATS at {} before the publish timeout (another publish is \
                     still connecting)",
                    self.endpoint.shown
                ),
            ));
        };
        if let Some(connected) = &state.connected {
            return Ok(connected.clone());
        }
        if let Some(retry_at) = state.retry_at {
            let now = Instant::now();
            if now < retry_at {
                let last = state.last_failure.clone().unwrap_or_else(|| {
                    PublishError::new(
                        PublishErrorKind::Unreachable,
                        "the last connection attempt failed",
                    )
                });
                return Err(self.fail(
                    last.kind,
                    &format!(
                        "{} (next connection attempt in {} ms)",
                        last.reason,
                        (retry_at - now).as_millis()
                    ),
                ));
            }
        }
        let budget = deadline.saturating_duration_since(Instant::now());
        match self.endpoint.connect(&self.client_name, budget).await {
            Ok(client) => {
                let jetstream = jetstream::ContextBuilder::new()
                    .timeout(self.timeout)
                    .build(client.clone());
                tracing::info!(servers = %self.endpoint.shown, client = %self.client_name, "connected to NATS");
                let connected = Connected { client, jetstream };
                state.connected = Some(connected.clone());
                state.failures = 0;
                state.retry_at = None;
                state.last_failure = None;
                Ok(connected)
            }
            Err((kind, reason)) => {
                let error = PublishError::new(kind, reason);
                state.failures = state.failures.saturating_add(1);
                let delay = Backoff::new(self.delay_min, self.delay_max).delay(state.failures);
                state.retry_at = Some(Instant::now() + delay);
                state.last_failure = Some(error.clone());
                tracing::warn!(
                    servers = %self.endpoint.shown,
                    failures = state.failures,
                    retry_in_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                    reason = %error.reason,
                    "connecting to NATS failed"
                );
                Err(error)
            }
        }
    }
}
