//! The link to the broker: one connection and one confirm-mode channel per destination, opened on
//! first use and opened again after it breaks.
//!
//! Every publish of the destination shares the channel; each holds an `Arc` of the [`Session`] it
//! published on, so a session replaced after a failure stays alive until its last in-flight
//! publish has its answer. The state lock is held only to hand out the session or to build a new
//! one, never while a publish waits for its confirm, so publishes overlap on the channel.
//!
//! Reconnection: a connection found closed is replaced by the next publish. After a failed
//! attempt the next one waits `reconnect_delay_min`, doubling per further failure up to
//! `reconnect_delay_max`; a publish inside that wait fails at once as unreachable (the dispatcher
//! retries the row on its own schedule) rather than piling connection attempts on a broker that
//! is down. One attempt at a time: concurrent publishes wait for it under the lock and share its
//! outcome.

use crate::failure::{failure, from_lapin};
use lapin::options::ConfirmSelectOptions;
use lapin::types::LongString;
use lapin::uri::AMQPUri;
use lapin::{Channel, Connection, ConnectionProperties};
use queuebox_domain::redact::Redactor;
use queuebox_ports::backoff::Backoff;
use queuebox_ports::publish::{PublishError, PublishErrorKind};
use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::time::{Instant, timeout_at};

/// How many exchange names one session remembers as declared; past it the memory starts over
/// (a templated exchange over an unbounded set of values must not grow without end).
const MAX_DECLARED: usize = 10_000;

/// One open connection with its confirm-mode channel.
#[derive(Debug)]
pub(crate) struct Session {
    /// Counts sessions of this link, for logs.
    pub(crate) number: u64,
    connection: Arc<Connection>,
    pub(crate) channel: Channel,
    declared: Mutex<HashSet<String>>,
}

impl Session {
    fn new(number: u64, connection: Arc<Connection>, channel: Channel) -> Self {
        Self {
            number,
            connection,
            channel,
            declared: Mutex::new(HashSet::new()),
        }
    }

    /// True while both the connection and the channel are open.
    pub(crate) fn is_open(&self) -> bool {
        self.connection.status().connected() && self.channel.status().connected()
    }

    /// True when this session already declared `exchange`.
    pub(crate) fn has_declared(&self, exchange: &str) -> bool {
        self.declared
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(exchange)
    }

    /// Remembers that `exchange` is declared on this session.
    pub(crate) fn mark_declared(&self, exchange: &str) {
        let mut declared = self.declared.lock().unwrap_or_else(PoisonError::into_inner);
        if declared.len() >= MAX_DECLARED {
            declared.clear();
        }
        declared.insert(exchange.to_owned());
    }
}

#[derive(Debug, Default)]
struct State {
    session: Option<Arc<Session>>,
    sessions_opened: u64,
    failures: u32,
    retry_at: Option<Instant>,
    last_failure: Option<PublishError>,
}

/// The connection manager of one destination.
#[derive(Debug)]
pub(crate) struct Link {
    uri: AMQPUri,
    /// `host:port`, for reasons; never the user or the password.
    endpoint: String,
    connection_name: String,
    redactor: Redactor,
    /// The waits between connection attempts after a failure.
    backoff: Backoff,
    state: tokio::sync::Mutex<State>,
}

impl Link {
    pub(crate) fn new(
        uri: AMQPUri,
        connection_name: String,
        redactor: Redactor,
        delay_min: Duration,
        delay_max: Duration,
    ) -> Self {
        let endpoint = format!("{}:{}", uri.authority.host, uri.authority.port);
        Self {
            uri,
            endpoint,
            connection_name,
            redactor,
            backoff: Backoff::new(delay_min, delay_max),
            state: tokio::sync::Mutex::new(State::default()),
        }
    }

    /// An open session, connecting when there is none, by `deadline`.
    ///
    /// # Errors
    /// [`PublishErrorKind::Unreachable`] when no connection can be made (or the reconnect wait is
    /// not over), [`PublishErrorKind::Auth`] when the broker refuses the login or the vhost.
    pub(crate) async fn session(&self, deadline: Instant) -> Result<Arc<Session>, PublishError> {
        let Ok(mut state) = timeout_at(deadline, self.state.lock()).await else {
            return Err(self.fail(
                PublishErrorKind::Unreachable,
                &format!(
                    "no connection to the broker at {} before the publish timeout (another \
                     publish is still connecting)",
                    self.endpoint
                ),
            ));
        };
        if let Some(session) = &state.session {
            if session.is_open() {
                return Ok(Arc::clone(session));
            }
            if session.connection.status().connected() {
                // Only the channel closed (the broker closes a channel on a channel-level error,
                // such as publishing to an exchange that was deleted): open a new one on the
                // same connection. The new session declares its exchanges again.
                tracing::info!(
                    broker = %self.endpoint,
                    session = session.number,
                    "the RabbitMQ channel closed; opening a new one"
                );
                let connection = Arc::clone(&session.connection);
                state.session = None;
                match timeout_at(deadline, open_channel(&connection)).await {
                    Ok(Ok(channel)) => {
                        state.sessions_opened += 1;
                        let session =
                            Arc::new(Session::new(state.sessions_opened, connection, channel));
                        state.session = Some(Arc::clone(&session));
                        return Ok(session);
                    }
                    Ok(Err(error)) => {
                        tracing::warn!(broker = %self.endpoint, %error, "opening a RabbitMQ channel failed; reconnecting");
                    }
                    Err(_) => {
                        return Err(self.fail(
                            PublishErrorKind::Timeout,
                            &format!(
                                "opening a channel to the broker at {} got no answer before the \
                                 publish timeout",
                                self.endpoint
                            ),
                        ));
                    }
                }
            } else {
                tracing::warn!(
                    broker = %self.endpoint,
                    session = session.number,
                    "the RabbitMQ connection is closed; reconnecting"
                );
                state.session = None;
            }
        }

        if let Some(retry_at) = state.retry_at {
            let now = Instant::now();
            if now < retry_at {
                let wait = retry_at - now;
                let last = state
                    .last_failure
                    .as_ref()
                    .map_or("the last connection attempt failed", |f| f.reason.as_str());
                let kind = state
                    .last_failure
                    .as_ref()
                    .map_or(PublishErrorKind::Unreachable, |f| f.kind);
                return Err(self.fail(
                    kind,
                    &format!(
                        "{last} (next connection attempt in {} ms)",
                        wait.as_millis()
                    ),
                ));
            }
        }

        let outcome = match timeout_at(deadline, self.connect()).await {
            Ok(Ok((connection, channel))) => Ok((connection, channel)),
            Ok(Err(error)) => Err(from_lapin(
                &format!("connecting to the broker at {}", self.endpoint),
                &error,
                &self.redactor,
            )),
            Err(_) => Err(self.fail(
                PublishErrorKind::Unreachable,
                &format!(
                    "no connection to the broker at {} before the publish timeout",
                    self.endpoint
                ),
            )),
        };
        match outcome {
            Ok((connection, channel)) => {
                state.sessions_opened += 1;
                state.failures = 0;
                state.retry_at = None;
                state.last_failure = None;
                tracing::info!(
                    broker = %self.endpoint,
                    session = state.sessions_opened,
                    "connected to RabbitMQ"
                );
                let session = Arc::new(Session::new(
                    state.sessions_opened,
                    Arc::new(connection),
                    channel,
                ));
                state.session = Some(Arc::clone(&session));
                Ok(session)
            }
            Err(error) => {
                state.failures = state.failures.saturating_add(1);
                let delay = self.backoff.delay(state.failures);
                state.retry_at = Some(Instant::now() + delay);
                state.last_failure = Some(error.clone());
                tracing::warn!(
                    broker = %self.endpoint,
                    failures = state.failures,
                    retry_in_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                    reason = %error.reason,
                    "connecting to RabbitMQ failed"
                );
                Err(error)
            }
        }
    }

    async fn connect(&self) -> Result<(Connection, Channel), lapin::Error> {
        let properties = ConnectionProperties::default()
            .with_connection_name(LongString::from(self.connection_name.as_str()));
        let connection = Connection::connect_uri(self.uri.clone(), properties).await?;
        // On failure the connection is dropped here, which closes it.
        let channel = open_channel(&connection).await?;
        Ok((connection, channel))
    }

    fn fail(&self, kind: PublishErrorKind, reason: &str) -> PublishError {
        failure(kind, reason, &self.redactor)
    }
}

async fn open_channel(connection: &Connection) -> Result<Channel, lapin::Error> {
    let channel = connection.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    Ok(channel)
}
