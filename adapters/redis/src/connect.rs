//! What publishers and sources share about reaching Redis: the `url`, its masking, one
//! connection that is opened again after it broke, and the kind of a failed command.
//!
//! The redis crate's multiplexed connection pipelines the commands of concurrent callers on one
//! socket but never reconnects, so [`Link`] keeps one and drops it when a command finds it broken
//! (or gets no answer in time); the next caller connects again, waiting by the reconnect
//! [`Backoff`] between failed attempts.

use crate::error::RedisError;
use queuebox_domain::redact::Redactor;
use queuebox_domain::secret::Secret;
use queuebox_ports::backoff::Backoff;
use queuebox_ports::publish::PublishErrorKind;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, ConnectionAddr, ErrorKind};
use std::time::Duration;
use tokio::sync::Mutex;
use tokio::time::{Instant, timeout_at};

/// The longest a single connection attempt may take, whatever the caller's budget.
const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A parsed `url` with the masking it needs.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    client: Client,
    /// `host:port/db`: what reasons and logs show.
    pub(crate) shown: String,
    pub(crate) redactor: Redactor,
}

impl Endpoint {
    /// Parses `url` (`redis://[user[:password]@]host[:port][/db]`).
    ///
    /// # Errors
    /// [`RedisError::InvalidUrl`] naming `owner`; the reason never holds the URL or a password.
    pub(crate) fn new(
        owner: &str,
        url: &Secret,
        max_reason_bytes: usize,
    ) -> Result<Self, RedisError> {
        let raw = url.expose().trim();
        let mut redactor = Redactor::new(max_reason_bytes.max(64)).with_secret(url.expose());
        let invalid = |reason: String| RedisError::InvalidUrl {
            owner: owner.to_owned(),
            reason,
        };
        let scheme = raw
            .split_once("://")
            .map(|(scheme, _)| scheme.to_ascii_lowercase());
        match scheme.as_deref() {
            Some("redis") => {}
            Some("rediss") => {
                return Err(invalid(
                    "rediss:// (TLS) is not supported in this version; use redis:// on a trusted \
                     network or a TLS tunnel"
                        .to_owned(),
                ));
            }
            Some(other) => {
                return Err(invalid(format!(
                    "the scheme must be redis://, got `{}://`",
                    other.chars().take(16).collect::<String>()
                )));
            }
            None => return Err(invalid("expected redis://host[:port][/db]".to_owned())),
        }
        let client =
            Client::open(raw).map_err(|error| invalid(redactor.redact(&error.to_string())))?;
        let info = client.get_connection_info();
        if let Some(password) = info.redis_settings().password().filter(|p| !p.is_empty()) {
            redactor = redactor.with_secret(password);
        }
        let shown = match info.addr() {
            ConnectionAddr::Tcp(host, port) => {
                format!("{host}:{port}/{}", info.redis_settings().db())
            }
            other => format!("{other}"),
        };
        Ok(Self {
            client,
            shown,
            redactor,
        })
    }

    /// Opens one connection within `budget` (at most [`MAX_CONNECT_TIMEOUT`]). The URL's user,
    /// password and database are sent on it before it is returned.
    pub(crate) async fn connect(
        &self,
        budget: Duration,
    ) -> Result<MultiplexedConnection, (PublishErrorKind, String)> {
        let budget = budget.clamp(Duration::from_millis(50), MAX_CONNECT_TIMEOUT);
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(budget))
            .set_response_timeout(None);
        let connected = tokio::time::timeout(
            budget,
            self.client
                .get_multiplexed_async_connection_with_config(&config),
        )
        .await;
        match connected {
            Ok(Ok(connection)) => Ok(connection),
            Ok(Err(error)) => Err((
                kind_of(&error),
                self.redactor
                    .redact(&format!("connecting to Redis at {}: {error}", self.shown)),
            )),
            Err(_) => Err((
                PublishErrorKind::Unreachable,
                format!(
                    "connecting to Redis at {}: no answer within {} ms",
                    self.shown,
                    budget.as_millis()
                ),
            )),
        }
    }

    /// The reason of a failed command: `what` and the error, masked and cut.
    pub(crate) fn reason(&self, what: &str, error: &redis::RedisError) -> String {
        self.redactor.redact(&format!("{what}: {error}"))
    }
}

/// The kind of a failed command or connection.
///
/// - An I/O failure, a refused or dropped connection: `Unreachable`.
/// - A refused login (`WRONGPASS`, `NOAUTH`) or a command the user's ACL forbids (`NOPERM`):
///   `Auth`.
/// - Any other error answer (`WRONGTYPE` when the key holds no stream, `OOM` under `maxmemory`):
///   `Rejected`.
pub(crate) fn kind_of(error: &redis::RedisError) -> PublishErrorKind {
    if error.is_io_error() || error.is_connection_dropped() || error.is_connection_refusal() {
        return PublishErrorKind::Unreachable;
    }
    if error.is_timeout() {
        return PublishErrorKind::Timeout;
    }
    if matches!(error.kind(), ErrorKind::AuthenticationFailed)
        || matches!(error.code(), Some("NOAUTH" | "WRONGPASS" | "NOPERM"))
    {
        return PublishErrorKind::Auth;
    }
    match error.kind() {
        ErrorKind::Server(_) | ErrorKind::Extension => PublishErrorKind::Rejected,
        _ => PublishErrorKind::Other,
    }
}

/// True when the connection a command failed on should be dropped and opened again.
pub(crate) fn breaks_connection(error: &redis::RedisError) -> bool {
    error.is_io_error() || error.is_connection_dropped() || error.is_unrecoverable_error()
}

/// One shared connection, opened on first use and again after it broke.
#[derive(Debug)]
pub(crate) struct Link {
    pub(crate) endpoint: Endpoint,
    reconnect: Backoff,
    state: Mutex<LinkState>,
}

#[derive(Debug, Default)]
struct LinkState {
    connection: Option<MultiplexedConnection>,
    failures: u32,
    /// No attempt before this instant, and the reason of the last failed one.
    retry_at: Option<(Instant, PublishErrorKind, String)>,
}

impl Link {
    pub(crate) fn new(endpoint: Endpoint, reconnect: Backoff) -> Self {
        Self {
            endpoint,
            reconnect,
            state: Mutex::new(LinkState::default()),
        }
    }

    /// The open connection, or a new one opened before `deadline`. Inside the wait after a failed
    /// attempt it fails at once with that attempt's reason.
    pub(crate) async fn connected(
        &self,
        deadline: Instant,
    ) -> Result<MultiplexedConnection, (PublishErrorKind, String)> {
        let timed_out = || {
            (
                PublishErrorKind::Timeout,
                format!(
                    "waiting for a connection to Redis at {}",
                    self.endpoint.shown
                ),
            )
        };
        let mut state = timeout_at(deadline, self.state.lock())
            .await
            .map_err(|_| timed_out())?;
        if let Some(connection) = &state.connection {
            return Ok(connection.clone());
        }
        if let Some((at, kind, reason)) = &state.retry_at
            && Instant::now() < *at
        {
            return Err((
                *kind,
                format!(
                    "{reason} (next attempt in {} ms)",
                    at.saturating_duration_since(Instant::now()).as_millis()
                ),
            ));
        }
        let budget = deadline.saturating_duration_since(Instant::now());
        match self.endpoint.connect(budget).await {
            Ok(connection) => {
                state.connection = Some(connection.clone());
                state.failures = 0;
                state.retry_at = None;
                Ok(connection)
            }
            Err((kind, reason)) => {
                state.failures = state.failures.saturating_add(1);
                let wait = self.reconnect.delay(state.failures);
                state.retry_at = Some((Instant::now() + wait, kind, reason.clone()));
                Err((kind, reason))
            }
        }
    }

    /// Drops the connection so the next caller opens a new one (it broke, or stopped answering).
    pub(crate) async fn reset(&self) {
        self.state.lock().await.connection = None;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_and_passwords_are_masked() {
        let endpoint = Endpoint::new(
            "destinations.d",
            &Secret::new("redis://u:pw-123@127.0.0.1:6390/2"),
            200,
        )
        .unwrap();
        assert_eq!(endpoint.shown, "127.0.0.1:6390/2");
        let masked = endpoint
            .redactor
            .redact("refused pw-123 at redis://u:pw-123@127.0.0.1:6390/2");
        assert!(!masked.contains("pw-123"), "{masked}");
        for (bad, says) in [
            ("rediss://h:6379", "not supported in this version"),
            ("http://h", "the scheme must be redis://"),
            ("h:6379", "expected redis://"),
        ] {
            let error = Endpoint::new("sources.s", &Secret::new(bad), 200).unwrap_err();
            let text = error.to_string();
            assert!(
                text.starts_with("sources.s: url is not a usable Redis URL"),
                "{text}"
            );
            assert!(text.contains(says), "{text}");
        }
    }
}
