//! The NATS publisher: one destination, one subject (or a template of them), the [`Publisher`]
//! port.

use crate::connect::Endpoint;
use crate::error::NatsError;
use crate::failure::{failure, from_jetstream};
use crate::headers::{name_problem, outbound};
use crate::link::Link;
use crate::options::NatsPublisherOptions;
use crate::subject::publish_subject_problem;
use async_nats::connection::State;
use async_trait::async_trait;
use bytes::Bytes;
use queuebox_domain::template::Template;
use queuebox_domain::template::address::{Address, AddressField};
use queuebox_domain::template::row::RowFields;
use queuebox_ports::publish::{OutboundMessage, PublishError, PublishErrorKind, Publisher};
use std::time::Duration;
use tokio::time::{Instant, timeout_at};

/// One configured NATS destination.
///
/// Build it once at start with [`NatsPublisher::new`] and share it (`Arc<dyn Publisher>`). It
/// connects on the first publish (or on [`NatsPublisher::connect`]) and keeps one client, on which
/// publishes overlap: each waits for its own JetStream acknowledgement only.
#[derive(Debug)]
pub struct NatsPublisher {
    name: String,
    subject: Address,
    jet_stream: bool,
    headers: Vec<(String, String)>,
    timeout: Duration,
    link: Link,
}

impl NatsPublisher {
    /// Checks the options; opens no connection.
    ///
    /// The checks: `servers` holds at least one parsable URL; `subject` is a valid address
    /// template (a literal subject must also be a valid NATS subject without wildcards); static
    /// header names and values can travel as NATS headers; the timeout is above zero.
    ///
    /// # Errors
    /// [`NatsError`] naming the destination and the key; never a URL, password or token.
    pub fn new(options: NatsPublisherOptions) -> Result<Self, NatsError> {
        let owner = format!("destinations.{}", options.name);
        let endpoint = Endpoint::new(
            &owner,
            &options.servers,
            options.credentials.clone(),
            options.max_reason_bytes,
        )?;
        let subject = Address::new(
            &options.name,
            AddressField::Subject,
            &options.subject,
            options.subject_from,
        )?;
        let invalid = |what: String| NatsError::InvalidSetting {
            owner: owner.clone(),
            what,
        };
        if options.timeout.is_zero() {
            return Err(invalid("timeoutMs must be above 0".to_owned()));
        }
        if options.subject_from.is_none()
            && let Ok(template) = Template::parse(&options.subject)
            && template.placeholders().next().is_none()
            && let Some(problem) = publish_subject_problem(&options.subject)
        {
            return Err(invalid(format!(
                "subject `{}` cannot be published to: {problem}",
                options.subject
            )));
        }
        for (name, value) in &options.headers {
            if let Some(problem) = name_problem(name) {
                return Err(invalid(format!(
                    "headers: `{name}` cannot be a NATS header name: {problem}"
                )));
            }
            if value.contains(['\r', '\n']) {
                return Err(invalid(format!(
                    "headers: the value of `{name}` holds a line break"
                )));
            }
        }
        let link = Link::new(
            endpoint,
            format!("queuebox destination {}", options.name),
            options.timeout,
            options.reconnect_delay_min,
            options.reconnect_delay_max,
        );
        Ok(Self {
            name: options.name,
            subject,
            jet_stream: options.jet_stream,
            headers: options.headers,
            timeout: options.timeout,
            link,
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
    }

    /// The subject of `message`. A route's `routingKeyTemplate` never changes it (docs/how-to/bridge-*.md).
    fn subject_of(&self, message: &OutboundMessage) -> Result<String, PublishError> {
        let row = RowFields::new(
            &message.topic,
            message.key.as_deref(),
            message.aggregate_type.as_deref(),
            &message.payload,
        );
        let subject = self.subject.render(&row)?.into_owned();
        if let Some(problem) = publish_subject_problem(&subject) {
            let shown: String = subject.chars().take(128).collect();
            return Err(self.fail(
                PublishErrorKind::InvalidMessage,
                &format!(
                    "the subject of destination {} renders `{shown}` for this row, which NATS \
                     cannot publish to: {problem}",
                    self.name
                ),
            ));
        }
        Ok(subject)
    }

    fn fail(&self, kind: PublishErrorKind, reason: &str) -> PublishError {
        failure(kind, reason, &self.link.endpoint.redactor)
    }
}

#[async_trait]
impl Publisher for NatsPublisher {
    fn destination_type(&self) -> &'static str {
        "nats"
    }

    async fn publish(&self, message: &OutboundMessage) -> Result<(), PublishError> {
        let deadline = Instant::now() + self.timeout;
        let subject = self.subject_of(message)?;
        let headers = outbound(message, &self.headers)?;
        let payload = Bytes::from(message.payload.clone().into_bytes());
        let connected = self.link.connected(deadline).await?;
        // While async-nats is reconnecting, a publish would wait in its buffer until the timeout;
        // failing at once frees the dispatcher's slot and the row is retried on its schedule.
        if connected.client.connection_state() == State::Disconnected {
            return Err(self.fail(
                PublishErrorKind::Unreachable,
                &format!(
                    "not connected to NATS at {} (the client is reconnecting)",
                    self.link.endpoint.shown
                ),
            ));
        }
        let redactor = &self.link.endpoint.redactor;
        let timed_out = || {
            self.fail(
                PublishErrorKind::Timeout,
                &format!(
                    "publishing to subject `{subject}`: no {} within {} ms",
                    if self.jet_stream {
                        "JetStream acknowledgement"
                    } else {
                        "flush to the server"
                    },
                    self.timeout.as_millis()
                ),
            )
        };
        if self.jet_stream {
            let published = timeout_at(deadline, async {
                let ack = connected
                    .jetstream
                    .publish_with_headers(subject.clone(), headers, payload)
                    .await?;
                ack.await
            })
            .await;
            match published {
                Ok(Ok(_ack)) => Ok(()),
                Ok(Err(error)) => Err(from_jetstream(&subject, &error, redactor)),
                Err(_) => Err(timed_out()),
            }
        } else {
            // Core NATS: no acknowledgement exists. The flush proves only that the server read
            // the bytes, not that any subscriber received them (documented as unproven).
            let published = timeout_at(deadline, async {
                connected
                    .client
                    .publish_with_headers(subject.clone(), headers, payload)
                    .await
                    .map_err(|e| e.to_string())?;
                connected.client.flush().await.map_err(|e| e.to_string())
            })
            .await;
            match published {
                Ok(Ok(())) => Ok(()),
                Ok(Err(error)) => Err(self.fail(
                    PublishErrorKind::Unreachable,
                    &format!("publishing to subject `{subject}` on core NATS: {error}"),
                )),
                Err(_) => Err(timed_out()),
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use queuebox_domain::secret::Secret;

    fn options(subject: &str) -> NatsPublisherOptions {
        NatsPublisherOptions::new(
            "events",
            Secret::new("nats://u:pw-secret@127.0.0.1:4222"),
            subject,
        )
    }

    #[test]
    fn settings_are_checked_at_build() {
        assert!(NatsPublisher::new(options("orders.created")).is_ok());
        for bad in ["orders.*", "a b", "{{ nope }}"] {
            let error = NatsPublisher::new(options(bad)).unwrap_err();
            assert!(!error.to_string().contains("pw-secret"), "{error}");
        }
        let mut header = options("s");
        header.headers = vec![("bad:name".to_owned(), "v".to_owned())];
        assert!(matches!(
            NatsPublisher::new(header).unwrap_err(),
            NatsError::InvalidSetting { .. }
        ));
        let mut zero = options("s");
        zero.timeout = Duration::ZERO;
        assert!(NatsPublisher::new(zero).is_err());
    }

    #[test]
    fn subjects_render_from_the_row_and_ignore_the_route_key() {
        let publisher = NatsPublisher::new(options("events.{{ aggregateType }}")).unwrap();
        let message = OutboundMessage {
            id: "1".to_owned(),
            topic: "order.created".to_owned(),
            aggregate_type: Some("order".to_owned()),
            payload: "{}".to_owned(),
            route_key: Some("from.route".to_owned()),
            ..OutboundMessage::default()
        };
        assert_eq!(publisher.subject_of(&message).unwrap(), "events.order");
        let bare = OutboundMessage {
            aggregate_type: None,
            ..message
        };
        // `events.` has an empty last token: the row fails, it never goes to another subject.
        let error = publisher.subject_of(&bare).unwrap_err();
        assert_eq!(error.kind, PublishErrorKind::InvalidMessage);
        assert_eq!(publisher.destination_type(), "nats");
    }
}
