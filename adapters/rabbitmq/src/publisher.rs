//! The RabbitMQ publisher: one destination, one exchange (or a template of them), the
//! [`Publisher`] port.

use crate::error::RabbitmqError;
use crate::failure::{breaks_channel, failure, from_lapin};
use crate::link::{Link, Session};
use crate::message::{MAX_SHORT_STRING, header_name_problem, properties};
use crate::options::{DeliveryMode, ExchangeType, RabbitmqPublisherOptions};
use crate::tls::ensure_crypto_provider;
use async_trait::async_trait;
use lapin::options::{BasicPublishOptions, ExchangeDeclareOptions};
use lapin::types::{FieldTable, ShortString};
use lapin::uri::AMQPUri;
use lapin::{Confirmation, ExchangeKind};
use queuebox_domain::redact::Redactor;
use queuebox_domain::template::Template;
use queuebox_domain::template::address::{Address, AddressField};
use queuebox_domain::template::routing_key::RoutingKeyTemplate;
use queuebox_domain::template::row::RowFields;
use queuebox_ports::publish::{OutboundMessage, PublishError, PublishErrorKind, Publisher};
use std::time::Duration;
use tokio::time::{Instant, timeout_at};

/// Exchange names with this prefix are the broker's own; declaring one is refused, so the
/// publisher only checks that it exists (a passive declare).
const RESERVED_PREFIX: &str = "amq.";

/// One configured RabbitMQ destination.
///
/// Build it once at start with [`RabbitmqPublisher::new`] and share it (`Arc<dyn Publisher>`).
/// It connects on the first publish (or on [`RabbitmqPublisher::connect`]), keeps one connection
/// and one confirm-mode channel, and lets publishes overlap on that channel: each publish waits
/// for its own broker confirm only.
#[derive(Debug)]
pub struct RabbitmqPublisher {
    name: String,
    exchange: Address,
    /// The exchange name when it is the same for every row.
    literal_exchange: Option<String>,
    exchange_type: ExchangeType,
    routing_key: RoutingKeyTemplate,
    delivery_mode: DeliveryMode,
    headers: Vec<(String, String)>,
    timeout: Duration,
    redactor: Redactor,
    link: Link,
}

impl RabbitmqPublisher {
    /// Checks the options; opens no connection.
    ///
    /// The checks: `url` parses as an AMQP URI; `exchange` is a valid address template (a name
    /// that is not a row field is refused); `routingKeyTemplate` is well formed; static header
    /// names fit an AMQP header table; the timeout is above zero.
    ///
    /// # Errors
    /// [`RabbitmqError`] naming the destination and the key; never the URL or its password.
    pub fn new(options: RabbitmqPublisherOptions) -> Result<Self, RabbitmqError> {
        let destination = options.name.clone();
        let raw_url = options.url.expose();
        let mut redactor = Redactor::new(options.max_reason_bytes.max(64)).with_secret(raw_url);
        let uri: AMQPUri = raw_url.parse().map_err(|reason: String| {
            // The parser quotes the URL it refused; the URL is masked as a whole.
            RabbitmqError::InvalidUrl {
                destination: destination.clone(),
                reason: redactor.redact(&reason),
            }
        })?;
        let password = uri.authority.userinfo.password.clone();
        redactor = redactor.with_secret(&password);
        if let Some(encoded) = encoded_password(raw_url) {
            redactor = redactor.with_secret(encoded);
        }

        let exchange = Address::new(
            &destination,
            AddressField::Exchange,
            &options.exchange,
            options.exchange_from,
        )?;
        let routing_key =
            RoutingKeyTemplate::parse(&options.routing_key_template).map_err(|source| {
                RabbitmqError::InvalidRoutingKeyTemplate {
                    destination: destination.clone(),
                    source,
                }
            })?;
        let invalid = |what: String| RabbitmqError::InvalidSetting {
            destination: destination.clone(),
            what,
        };
        if options.timeout.is_zero() {
            return Err(invalid("the publish timeout must be above 0".to_owned()));
        }
        for (name, _) in &options.headers {
            if let Some(problem) = header_name_problem(name) {
                return Err(invalid(format!(
                    "headers: `{name}` cannot be an AMQP header name: {problem}"
                )));
            }
        }
        let literal_exchange = match (options.exchange_from, Template::parse(&options.exchange)) {
            (None, Ok(template)) if template.placeholders().next().is_none() => {
                Some(options.exchange.clone())
            }
            _ => None,
        };
        let connection_name = options
            .connection_name
            .clone()
            .unwrap_or_else(|| format!("queuebox {destination}"));
        ensure_crypto_provider();
        let link = Link::new(
            uri,
            connection_name,
            redactor.clone(),
            options.reconnect_delay_min,
            options.reconnect_delay_max,
        );
        Ok(Self {
            name: options.name,
            exchange,
            literal_exchange,
            exchange_type: options.exchange_type,
            routing_key,
            delivery_mode: options.delivery_mode,
            headers: options.headers,
            timeout: options.timeout,
            redactor,
            link,
        })
    }

    /// The destination name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Opens the connection now instead of on the first publish, and declares the exchange when
    /// it is a literal name. A start can call it to report a broker that is down early; failing
    /// it changes nothing (the next publish tries again).
    ///
    /// # Errors
    /// The same [`PublishError`] a publish would return at that step.
    pub async fn connect(&self) -> Result<(), PublishError> {
        let deadline = Instant::now() + self.timeout;
        let session = self.link.session(deadline).await?;
        if let Some(exchange) = &self.literal_exchange {
            self.declare(&session, exchange, deadline).await?;
        }
        Ok(())
    }

    /// The exchange and routing key of `message`.
    fn address_of(&self, message: &OutboundMessage) -> Result<(String, String), PublishError> {
        let row = RowFields::new(
            &message.topic,
            message.key.as_deref(),
            message.aggregate_type.as_deref(),
            &message.payload,
        );
        let exchange = self.exchange.render(&row)?.into_owned();
        // The matched route's own template wins, as it rendered, even empty (docs/reference/transforms-and-templates.md).
        let routing_key = match &message.route_key {
            Some(key) => key.clone(),
            None => self
                .routing_key
                .render(&row, &message.missing_field_default),
        };
        if exchange.len() > MAX_SHORT_STRING {
            return Err(self.fail(
                PublishErrorKind::InvalidMessage,
                &format!(
                    "the exchange of destination {} renders {} bytes for this row; AMQP allows 255",
                    self.name,
                    exchange.len()
                ),
            ));
        }
        if routing_key.len() > MAX_SHORT_STRING {
            return Err(self.fail(
                PublishErrorKind::InvalidMessage,
                &format!(
                    "the routing key of destination {} renders {} bytes for this row; AMQP allows 255",
                    self.name,
                    routing_key.len()
                ),
            ));
        }
        Ok((exchange, routing_key))
    }

    /// Declares `exchange` (durable, of the configured type) once per session.
    async fn declare(
        &self,
        session: &Session,
        exchange: &str,
        deadline: Instant,
    ) -> Result<(), PublishError> {
        if session.has_declared(exchange) {
            return Ok(());
        }
        let passive = exchange.starts_with(RESERVED_PREFIX);
        let options = ExchangeDeclareOptions {
            passive,
            durable: true,
            ..ExchangeDeclareOptions::default()
        };
        let kind = match self.exchange_type {
            ExchangeType::Topic => ExchangeKind::Topic,
            ExchangeType::Direct => ExchangeKind::Direct,
            ExchangeType::Fanout => ExchangeKind::Fanout,
        };
        let what = if passive {
            format!("checking that exchange `{exchange}` exists")
        } else {
            format!(
                "declaring exchange `{exchange}` (durable, type {})",
                self.exchange_type.as_str()
            )
        };
        let name = short_string(exchange)?;
        let declared = timeout_at(
            deadline,
            session
                .channel
                .exchange_declare(name, kind, options, FieldTable::default()),
        )
        .await;
        match declared {
            Ok(Ok(())) => {
                session.mark_declared(exchange);
                Ok(())
            }
            Ok(Err(error)) => Err(from_lapin(&what, &error, &self.redactor)),
            Err(_) => Err(self.fail(
                PublishErrorKind::Timeout,
                &format!("{what}: no answer within {} ms", self.timeout.as_millis()),
            )),
        }
    }

    fn fail(&self, kind: PublishErrorKind, reason: &str) -> PublishError {
        failure(kind, reason, &self.redactor)
    }
}

#[async_trait]
impl Publisher for RabbitmqPublisher {
    fn destination_type(&self) -> &'static str {
        "rabbitmq"
    }

    /// Publishes with `mandatory` set and waits for the broker confirm.
    ///
    /// Outcomes:
    /// - an ack without a return: `Ok`;
    /// - an ack that follows a `basic.return` (no queue is bound for the routing key):
    ///   [`PublishErrorKind::Rejected`]. The broker answered and the message itself is fine: a
    ///   binding added later makes the same message routable, so it is not an invalid message;
    ///   the reason names the exchange, the routing key and the broker's reply;
    /// - a nack (a queue refused it, for example a full queue with `x-overflow: reject-publish`):
    ///   [`PublishErrorKind::Rejected`], the reason says nack;
    /// - a connection that cannot be made, or that breaks before the confirm:
    ///   [`PublishErrorKind::Unreachable`]; the next publish reconnects;
    /// - no confirm within the timeout: [`PublishErrorKind::Timeout`].
    ///
    /// Dropping the future at any point is safe: the message is then either not sent or sent
    /// without anyone waiting for its confirm (the row is retried and may arrive twice, which
    /// at-least-once delivery allows).
    async fn publish(&self, message: &OutboundMessage) -> Result<(), PublishError> {
        let deadline = Instant::now() + self.timeout;
        let (exchange, routing_key) = self.address_of(message)?;
        let properties = properties(message, &self.headers, self.delivery_mode.amqp_value())?;
        let session = self.link.session(deadline).await?;
        self.declare(&session, &exchange, deadline).await?;

        let target = format!("exchange `{exchange}` with routing key `{routing_key}`");
        let options = BasicPublishOptions {
            mandatory: true,
            immediate: false,
        };
        let sent = timeout_at(
            deadline,
            session.channel.basic_publish(
                short_string(&exchange)?,
                short_string(&routing_key)?,
                options,
                message.payload.as_bytes(),
                properties,
            ),
        )
        .await;
        let confirm = match sent {
            Ok(Ok(confirm)) => confirm,
            Ok(Err(error)) => {
                log_broken(&session, &error);
                return Err(from_lapin(
                    &format!("publishing to {target}"),
                    &error,
                    &self.redactor,
                ));
            }
            Err(_) => {
                return Err(self.fail(
                    PublishErrorKind::Timeout,
                    &format!(
                        "publishing to {target}: the message was not sent within {} ms",
                        self.timeout.as_millis()
                    ),
                ));
            }
        };
        match timeout_at(deadline, confirm).await {
            Ok(Ok(Confirmation::Ack(None))) => Ok(()),
            Ok(Ok(Confirmation::Ack(Some(returned)))) => Err(self.fail(
                PublishErrorKind::Rejected,
                &format!(
                    "the broker returned the message as unroutable: no queue is bound to {target} \
                     (reply {} {})",
                    returned.reply_code, returned.reply_text
                ),
            )),
            Ok(Ok(Confirmation::Nack(_))) => Err(self.fail(
                PublishErrorKind::Rejected,
                &format!(
                    "the broker refused the message with a nack (publishing to {target}); a queue \
                     it routes to may be full with x-overflow reject-publish"
                ),
            )),
            Ok(Ok(Confirmation::NotRequested)) => Err(self.fail(
                PublishErrorKind::Other,
                "the channel is not in confirm mode, so delivery cannot be proven",
            )),
            Ok(Err(error)) => {
                log_broken(&session, &error);
                Err(from_lapin(
                    &format!("waiting for the broker confirm of the message to {target}"),
                    &error,
                    &self.redactor,
                ))
            }
            Err(_) => Err(self.fail(
                PublishErrorKind::Timeout,
                &format!(
                    "the broker did not confirm the message to {target} within {} ms",
                    self.timeout.as_millis()
                ),
            )),
        }
    }
}

/// Logs a failure that took the session's channel down; the next publish opens a new one.
fn log_broken(session: &Session, error: &lapin::Error) {
    if breaks_channel(error) && !session.is_open() {
        tracing::debug!(session = session.number, %error, "the RabbitMQ session broke during a publish");
    }
}

/// `text` as an AMQP short string; callers check the length first, so a failure is a bug, not a
/// panic.
fn short_string(text: &str) -> Result<ShortString, PublishError> {
    ShortString::try_new(text).map_err(|error| {
        PublishError::new(
            PublishErrorKind::InvalidMessage,
            format!("a name is too long for AMQP: {error}"),
        )
    })
}

/// The password as written in the URL (percent-encoded), which the parser decodes.
pub(crate) fn encoded_password(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let userinfo = authority.rsplit_once('@')?.0;
    let password = userinfo.split_once(':')?.1;
    (!password.is_empty()).then_some(password)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use queuebox_domain::secret::Secret;

    fn options(url: &str, exchange: &str) -> RabbitmqPublisherOptions {
        RabbitmqPublisherOptions::new("events", Secret::new(url), exchange)
    }

    #[test]
    fn the_encoded_password_is_found() {
        assert_eq!(
            encoded_password("amqp://user:p%40ss@host:5672/%2f"),
            Some("p%40ss")
        );
        assert_eq!(encoded_password("amqp://host:5672/%2f"), None);
        assert_eq!(encoded_password("amqp://user@host/"), None);
    }

    #[test]
    fn a_bad_url_is_refused_without_echoing_it() {
        let error = RabbitmqPublisher::new(options("http://u:hunter2@host/", "x")).unwrap_err();
        let text = error.to_string();
        assert!(text.contains("destination `events`"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
        let error = RabbitmqPublisher::new(options("not a url hunter2", "x")).unwrap_err();
        assert!(!error.to_string().contains("hunter2"), "{error}");
    }

    #[test]
    fn templates_and_headers_are_checked_at_build() {
        let url = "amqp://guest:guest@127.0.0.1:5672/%2f";
        let error = RabbitmqPublisher::new(options(url, "ev.{{ source }}")).unwrap_err();
        assert!(
            matches!(error, RabbitmqError::InvalidExchange(_)),
            "{error}"
        );
        let mut bad_key = options(url, "ev");
        bad_key.routing_key_template = "{{ topic".to_owned();
        assert!(matches!(
            RabbitmqPublisher::new(bad_key).unwrap_err(),
            RabbitmqError::InvalidRoutingKeyTemplate { .. }
        ));
        let mut bad_header = options(url, "ev");
        bad_header.headers = vec![("h".repeat(300), "v".to_owned())];
        assert!(matches!(
            RabbitmqPublisher::new(bad_header).unwrap_err(),
            RabbitmqError::InvalidSetting { .. }
        ));
        let mut zero = options(url, "ev");
        zero.timeout = Duration::ZERO;
        assert!(RabbitmqPublisher::new(zero).is_err());
    }

    #[test]
    fn addresses_render_from_the_row() {
        let url = "amqp://guest:guest@127.0.0.1:5672/%2f";
        let mut templated = options(url, "events.{{ aggregateType }}");
        templated.routing_key_template = "{{ payload.region }}.{{ topic }}".to_owned();
        let publisher = RabbitmqPublisher::new(templated).unwrap();
        assert_eq!(publisher.literal_exchange, None);
        let message = OutboundMessage {
            id: "1".to_owned(),
            topic: "order.created".to_owned(),
            aggregate_type: Some("order".to_owned()),
            payload: "{}".to_owned(),
            missing_field_default: "unknown".to_owned(),
            ..OutboundMessage::default()
        };
        assert_eq!(
            publisher.address_of(&message).unwrap(),
            (
                "events.order".to_owned(),
                "unknown.order.created".to_owned()
            )
        );
        // A route's own key wins as it rendered, even empty.
        for route_key in ["from.route", ""] {
            let routed = OutboundMessage {
                route_key: Some(route_key.to_owned()),
                ..message.clone()
            };
            assert_eq!(publisher.address_of(&routed).unwrap().1, route_key);
        }
        let bare = OutboundMessage {
            aggregate_type: None,
            ..message
        };
        // A missing field renders empty inside a longer name...
        assert_eq!(publisher.address_of(&bare).unwrap().0, "events.");
        // ...and an exchange that renders empty as a whole fails the row (never the default
        // exchange).
        let by_column = RabbitmqPublisher::new(options(url, "{{ aggregateType }}")).unwrap();
        let error = by_column.address_of(&bare).unwrap_err();
        assert_eq!(error.kind, PublishErrorKind::InvalidMessage);
        let literal = RabbitmqPublisher::new(options(url, "events")).unwrap();
        assert_eq!(literal.literal_exchange.as_deref(), Some("events"));
        assert_eq!(literal.destination_type(), "rabbitmq");
    }
}
