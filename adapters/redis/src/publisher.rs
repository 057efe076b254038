//! The Redis publisher: one destination, one stream (or a template of them), the [`Publisher`]
//! port.

use crate::connect::{Endpoint, Link, breaks_connection, kind_of};
use crate::error::RedisError;
use crate::fields::outbound;
use crate::options::{RedisPublisherOptions, Trim};
use async_trait::async_trait;
use queuebox_domain::template::address::{Address, AddressField};
use queuebox_domain::template::row::RowFields;
use queuebox_ports::backoff::Backoff;
use queuebox_ports::publish::{OutboundMessage, PublishError, PublishErrorKind, Publisher};
use std::time::Duration;
use tokio::time::{Instant, timeout_at};

/// One configured Redis destination.
///
/// Build it once at start with [`RedisPublisher::new`] and share it (`Arc<dyn Publisher>`). It
/// connects on the first publish (or on [`RedisPublisher::connect`]) and keeps one multiplexed
/// connection on which concurrent publishes are pipelined; each waits for its own `XADD` answer,
/// the new entry's id, which is the proof that Redis holds the entry.
#[derive(Debug)]
pub struct RedisPublisher {
    name: String,
    stream: Address,
    trim: Option<Trim>,
    headers: Vec<(String, String)>,
    timeout: Duration,
    link: Link,
}

impl RedisPublisher {
    /// Checks the options; opens no connection.
    ///
    /// The checks: `url` is a `redis://` URL; `stream` is a valid address template; `maxLen` is
    /// above zero; the timeout is above zero.
    ///
    /// # Errors
    /// [`RedisError`] naming the destination and the key; never the URL or a password.
    pub fn new(options: RedisPublisherOptions) -> Result<Self, RedisError> {
        let owner = format!("destinations.{}", options.name);
        let endpoint = Endpoint::new(&owner, &options.url, options.max_reason_bytes)?;
        let stream = Address::new(
            &options.name,
            AddressField::Stream,
            &options.stream,
            options.stream_from,
        )?;
        let invalid = |what: &str| RedisError::InvalidSetting {
            owner: owner.clone(),
            what: what.to_owned(),
        };
        if options.timeout.is_zero() {
            return Err(invalid("timeoutMs must be above 0"));
        }
        if matches!(options.trim, Some(Trim::Approximate(0) | Trim::Exact(0))) {
            return Err(invalid("maxLen must be above 0"));
        }
        Ok(Self {
            name: options.name,
            stream,
            trim: options.trim,
            headers: options.headers,
            timeout: options.timeout,
            link: Link::new(
                endpoint,
                Backoff::new(options.reconnect_delay_min, options.reconnect_delay_max),
            ),
        })
    }

    /// The destination name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Connects now instead of on the first publish. A start can call it to report a server that
    /// is down early; failing it changes nothing (the next publish tries again).
    ///
    /// # Errors
    /// The [`PublishError`] a publish would return when connecting.
    pub async fn connect(&self) -> Result<(), PublishError> {
        self.link
            .connected(Instant::now() + self.timeout)
            .await
            .map(|_| ())
            .map_err(|(kind, reason)| PublishError::new(kind, reason))
    }

    /// The stream key of `message`. A route's `routingKeyTemplate` never changes it.
    fn stream_of(&self, message: &OutboundMessage) -> Result<String, PublishError> {
        let row = RowFields::new(
            &message.topic,
            message.key.as_deref(),
            message.aggregate_type.as_deref(),
            &message.payload,
        );
        Ok(self.stream.render(&row)?.into_owned())
    }

    /// The `XADD` of `message` to `stream`.
    fn command(&self, stream: &str, message: &OutboundMessage) -> redis::Cmd {
        let mut command = redis::cmd("XADD");
        command.arg(stream);
        match self.trim {
            Some(Trim::Approximate(max)) => {
                command.arg("MAXLEN").arg("~").arg(max);
            }
            Some(Trim::Exact(max)) => {
                command.arg("MAXLEN").arg("=").arg(max);
            }
            None => {}
        }
        command.arg("*");
        let attempt = message.attempt.to_string();
        for (name, value) in outbound(message, &self.headers, &attempt) {
            command.arg(name).arg(value);
        }
        command
    }
}

#[async_trait]
impl Publisher for RedisPublisher {
    fn destination_type(&self) -> &'static str {
        "redis"
    }

    async fn publish(&self, message: &OutboundMessage) -> Result<(), PublishError> {
        let deadline = Instant::now() + self.timeout;
        let stream = self.stream_of(message)?;
        let command = self.command(&stream, message);
        let mut connection = self
            .link
            .connected(deadline)
            .await
            .map_err(|(kind, reason)| PublishError::new(kind, reason))?;
        let endpoint = &self.link.endpoint;
        match timeout_at(deadline, command.query_async::<String>(&mut connection)).await {
            Ok(Ok(_entry_id)) => Ok(()),
            Ok(Err(error)) => {
                if breaks_connection(&error) {
                    self.link.reset().await;
                }
                Err(PublishError::new(
                    kind_of(&error),
                    endpoint.reason(
                        &format!("XADD to stream `{stream}` at {}", endpoint.shown),
                        &error,
                    ),
                ))
            }
            Err(_) => {
                // The connection may be stuck behind an answer that never comes: the next publish
                // opens a new one.
                self.link.reset().await;
                Err(PublishError::new(
                    PublishErrorKind::Timeout,
                    endpoint.redactor.redact(&format!(
                        "XADD to stream `{stream}` at {}: no answer within {} ms",
                        endpoint.shown,
                        self.timeout.as_millis()
                    )),
                ))
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use queuebox_domain::secret::Secret;

    fn options(stream: &str) -> RedisPublisherOptions {
        RedisPublisherOptions::new(
            "events",
            Secret::new("redis://:pw-secret@127.0.0.1:6379"),
            stream,
        )
    }

    fn args(command: &redis::Cmd) -> Vec<String> {
        command
            .args_iter()
            .map(|arg| match arg {
                redis::Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                _ => "<cursor>".to_owned(),
            })
            .collect()
    }

    #[test]
    fn settings_are_checked_at_build() {
        assert!(RedisPublisher::new(options("orders")).is_ok());
        let error = RedisPublisher::new(options("{{ nope }}")).unwrap_err();
        assert!(!error.to_string().contains("pw-secret"), "{error}");
        let mut zero = options("s");
        zero.timeout = Duration::ZERO;
        assert!(
            RedisPublisher::new(zero)
                .unwrap_err()
                .to_string()
                .contains("timeoutMs")
        );
        let mut trim = options("s");
        trim.trim = Some(Trim::Exact(0));
        assert_eq!(
            RedisPublisher::new(trim).unwrap_err().to_string(),
            "destinations.events: maxLen must be above 0"
        );
    }

    #[test]
    fn the_add_trims_as_configured_and_renders_the_stream_from_the_row() {
        let message = OutboundMessage {
            id: "id-1".to_owned(),
            topic: "order.created".to_owned(),
            aggregate_type: Some("order".to_owned()),
            payload: "{}".to_owned(),
            route_key: Some("from.route".to_owned()),
            ..OutboundMessage::default()
        };
        let mut approximate = options("events:{{ aggregateType }}");
        approximate.trim = Some(Trim::Approximate(1000));
        let publisher = RedisPublisher::new(approximate).unwrap();
        let stream = publisher.stream_of(&message).unwrap();
        assert_eq!(stream, "events:order");
        assert_eq!(
            args(&publisher.command(&stream, &message)),
            [
                "XADD",
                "events:order",
                "MAXLEN",
                "~",
                "1000",
                "*",
                "x-message-id",
                "id-1",
                "x-topic",
                "order.created",
                "x-attempt",
                "0",
                "payload",
                "{}"
            ]
        );
        let mut exact = options("s");
        exact.trim = Some(Trim::Exact(5));
        let publisher = RedisPublisher::new(exact).unwrap();
        assert_eq!(
            args(&publisher.command("s", &message))[2..5],
            ["MAXLEN", "=", "5"]
        );
        let untrimmed = RedisPublisher::new(options("s")).unwrap();
        assert_eq!(args(&untrimmed.command("s", &message))[2], "*");
        let bare = OutboundMessage {
            aggregate_type: None,
            ..message
        };
        let publisher = RedisPublisher::new(options("events:{{ aggregateType }}")).unwrap();
        assert_eq!(publisher.stream_of(&bare).unwrap(), "events:");
        assert_eq!(publisher.destination_type(), "redis");
    }
}
