//! The Kafka publisher: one destination, one topic (or a template of them), the [`Publisher`]
//! port.

use crate::client::{client_config, redactor};
use crate::context::LinkContext;
use crate::error::KafkaError;
use crate::failure::{budget_exceeded, produce_failure};
use crate::options::{KafkaPublisherOptions, MIN_TIMEOUT};
use crate::record::{record_headers, record_key, topic_name_problem};
use async_trait::async_trait;
use queuebox_domain::redact::Redactor;
use queuebox_domain::template::address::{Address, AddressField};
use queuebox_domain::template::routing_key::KafkaKeyTemplate;
use queuebox_domain::template::row::RowFields;
use queuebox_ports::publish::{OutboundMessage, PublishError, PublishErrorKind, Publisher};
use rdkafka::config::ClientConfig;
use rdkafka::error::KafkaError as RdKafkaError;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::util::Timeout;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

/// What librdkafka gets beyond the budget before the publish gives up on its own: librdkafka
/// normally reports the timeout first, with its cause.
const BUDGET_GRACE: Duration = Duration::from_millis(500);
/// The longest librdkafka waits for one request's answer (its default), capped by the budget.
const MAX_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

type Client = FutureProducer<LinkContext>;

/// One configured Kafka destination.
///
/// Build it once at start with [`KafkaPublisher::new`] and share it (`Arc<dyn Publisher>`). It
/// holds one idempotent producer (`acks=all`, `enable.idempotence=true`): publishes overlap
/// freely, librdkafka batches them per partition, and the idempotent producer keeps the records
/// of one partition in the order they were handed over, retries included. The producer connects
/// in the background; a broker that is down only fails the publishes made meanwhile.
pub struct KafkaPublisher {
    name: String,
    topic: Address,
    key: KafkaKeyTemplate,
    headers: Vec<(String, String)>,
    timeout: Duration,
    redactor: Redactor,
    config: ClientConfig,
    context: LinkContext,
    /// Replaced when librdkafka reports a fatal error, after which a producer accepts nothing.
    producer: RwLock<Arc<Client>>,
}

impl std::fmt::Debug for KafkaPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaPublisher")
            .field("name", &self.name)
            .field("topic", &self.topic)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl KafkaPublisher {
    /// Checks the options and creates the producer (which connects in the background).
    ///
    /// The checks: the brokers and security keys (see the crate docs); `topic` is a valid address
    /// template whose literal form is a valid topic name; `keyTemplate` is well formed; the
    /// timeout is at least [`MIN_TIMEOUT`].
    ///
    /// # Errors
    /// [`KafkaError`] naming the destination and the key; never the password.
    pub fn new(options: KafkaPublisherOptions) -> Result<Self, KafkaError> {
        let destination = options.name.clone();
        let owner = format!("destination `{destination}`");
        let invalid = |what: String| KafkaError::InvalidSetting {
            owner: owner.clone(),
            what,
        };
        if options.timeout < MIN_TIMEOUT {
            return Err(invalid(format!(
                "timeoutMs is {} and must be at least {}",
                options.timeout.as_millis(),
                MIN_TIMEOUT.as_millis()
            )));
        }
        let topic = Address::new(
            &destination,
            AddressField::Topic,
            &options.topic,
            options.topic_from,
        )?;
        if options.topic_from.is_none()
            && !options.topic.contains("{{")
            && let Some(problem) = topic_name_problem(&options.topic)
        {
            return Err(invalid(format!(
                "topic `{}` is not a Kafka topic name: {problem}",
                options.topic
            )));
        }
        let key = KafkaKeyTemplate::parse(&options.key_template).map_err(|source| {
            KafkaError::InvalidKeyTemplate {
                destination: destination.clone(),
                source,
            }
        })?;
        let mut connection = options.connection.clone();
        if connection.client_id.is_none() {
            connection.client_id = Some(format!("queuebox-{destination}"));
        }
        let mut config = client_config(&owner, &connection)?;
        let request_timeout = options.timeout.min(MAX_REQUEST_TIMEOUT);
        config
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set(
                "message.timeout.ms",
                options.timeout.as_millis().to_string(),
            )
            .set(
                "request.timeout.ms",
                request_timeout.as_millis().to_string(),
            )
            .set(
                "topic.metadata.propagation.max.ms",
                (options.timeout / 2).as_millis().to_string(),
            )
            .set("linger.ms", options.linger.as_millis().to_string());
        let redactor = redactor(&connection, options.max_reason_bytes);
        let context = LinkContext::default();
        let producer = create(&config, &context, &owner, &redactor)?;
        Ok(Self {
            name: options.name,
            topic,
            key,
            headers: options.headers,
            timeout: options.timeout,
            redactor,
            config,
            context,
            producer: RwLock::new(Arc::new(producer)),
        })
    }

    /// The destination name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn producer(&self) -> Arc<Client> {
        Arc::clone(&self.producer.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Replaces `failed` with a new producer when librdkafka declared it dead (a fatal error of
    /// the idempotent producer); the next publish uses the new one.
    fn replace_if_fatal(&self, failed: &Arc<Client>) {
        let Some((code, reason)) = failed.client().fatal_error() else {
            return;
        };
        let mut slot = self
            .producer
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if !Arc::ptr_eq(&slot, failed) {
            return;
        }
        tracing::warn!(
            destination = %self.name,
            ?code,
            "the Kafka producer hit a fatal error and is replaced: {}",
            self.redactor.redact(&reason)
        );
        match create(&self.config, &self.context, &self.name, &self.redactor) {
            Ok(producer) => *slot = Arc::new(producer),
            Err(error) => tracing::error!(destination = %self.name, "{error}"),
        }
    }
}

fn create(
    config: &ClientConfig,
    context: &LinkContext,
    owner: &str,
    redactor: &Redactor,
) -> Result<Client, KafkaError> {
    config
        .create_with_context(context.clone())
        .map_err(|error| KafkaError::Client {
            owner: owner.to_owned(),
            reason: redactor.redact(&error.to_string()),
        })
}

#[async_trait]
impl Publisher for KafkaPublisher {
    fn destination_type(&self) -> &'static str {
        "kafka"
    }

    async fn publish(&self, message: &OutboundMessage) -> Result<(), PublishError> {
        let row = RowFields::new(
            &message.topic,
            message.key.as_deref(),
            message.aggregate_type.as_deref(),
            &message.payload,
        );
        let topic = self.topic.render(&row)?;
        if let Some(problem) = topic_name_problem(&topic) {
            return Err(PublishError::new(
                PublishErrorKind::InvalidMessage,
                self.redactor.redact(&format!(
                    "the topic of destination {} renders `{topic}` for this row, which is not a Kafka topic name: {problem}",
                    self.name
                )),
            ));
        }
        let key = record_key(message, &self.key, &row);
        let mut record = FutureRecord::to(&topic)
            .payload(message.payload.as_bytes())
            .headers(record_headers(message, &self.headers));
        if let Some(key) = &key {
            record = record.key(key.as_bytes());
        }
        let started = Instant::now();
        let producer = self.producer();
        let sent = tokio::time::timeout(
            self.timeout + BUDGET_GRACE,
            producer.send(record, Timeout::After(self.timeout)),
        )
        .await;
        match sent {
            Ok(Ok(_delivery)) => {
                self.context.clear();
                Ok(())
            }
            Ok(Err((error, _record))) => {
                let link = self.context.error_since(started);
                let failure = match error {
                    RdKafkaError::MessageProduction(code) => {
                        produce_failure(&topic, code, link, &self.redactor)
                    }
                    other => PublishError::new(
                        PublishErrorKind::Other,
                        self.redactor
                            .redact(&format!("publishing to topic `{topic}` failed: {other}")),
                    ),
                };
                self.replace_if_fatal(&producer);
                Err(failure)
            }
            Err(_elapsed) => Err(budget_exceeded(
                &topic,
                self.context.error_since(started),
                &self.redactor,
            )),
        }
    }
}
