//! `sources.<name>.*`: HTTP, RabbitMQ, Kafka, NATS and Redis sources.

use super::destinations::{kafka_security, nats_credentials, redis_url};
use super::kind::{KindKeys, select};
use super::signatures;
use super::templates::check_source_topic;
use super::{
    Case, Floor, choice, filter, flag, millis, non_negative, opt_positive, positive, required,
    text, text_or, transform,
};
use crate::catalog::Doc;
use crate::jsonpath::check_definite;
use crate::model::{
    AttributeHeaders, AutoOffsetReset, Consumption, HttpSource, KafkaSource, NatsSource,
    RabbitmqSource, RateLimit, RedisSource, Source, SourceKind,
};
use crate::reader::{Block, Reader};
use crate::secrets::SecretUrl;
use indexmap::IndexMap;
use serde_json::Value;

/// The source kinds, as [`select`] tells them apart.
#[derive(Clone, Copy)]
enum Kind {
    Http,
    Rabbitmq,
    Kafka,
    Nats,
    Redis,
}

const KINDS: &[KindKeys<Kind>] = &[
    KindKeys {
        kind: Kind::Http,
        name: "http",
        // `idempotencyKeyPath` is required too unless the auth kind supplies the key
        // (`read_source`), so `path` alone selects the kind.
        keys: &["path"],
    },
    KindKeys {
        kind: Kind::Rabbitmq,
        name: "rabbitmq",
        keys: &["queueName", "connectionUrl"],
    },
    KindKeys {
        kind: Kind::Kafka,
        name: "kafka",
        keys: &["bootstrapServers", "topics", "groupId"],
    },
    KindKeys {
        kind: Kind::Nats,
        name: "nats",
        keys: &["servers", "stream", "durable"],
    },
    KindKeys {
        kind: Kind::Redis,
        name: "redis",
        keys: &["url", "stream", "group"],
    },
];

pub(super) fn read(r: &mut Reader, value: Option<&Value>) -> IndexMap<String, Source> {
    let mut sources = IndexMap::new();
    for (name, value) in r.named(value, "sources") {
        let mut b = Block::open(r, Some(value), &format!("sources.{name}"));
        if let Some(source) = read_source(r, &mut b) {
            sources.insert(name, source);
        }
        b.finish(r);
    }
    sources
}

fn read_source(r: &mut Reader, b: &mut Block<'_>) -> Option<Source> {
    let kind = match select(r, b, "a source", KINDS)? {
        Kind::Http => SourceKind::Http(read_http(r, b)),
        Kind::Rabbitmq => SourceKind::Rabbitmq(read_rabbitmq(r, b)),
        Kind::Kafka => SourceKind::Kafka(read_kafka(r, b)),
        Kind::Nats => SourceKind::Nats(read_nats(r, b)),
        Kind::Redis => SourceKind::Redis(read_redis(r, b)),
    };
    let is_http = matches!(kind, SourceKind::Http(_));
    let consumption = choice(
        r,
        b,
        "consumption",
        &[("push", Consumption::Push), ("pull", Consumption::Pull)],
        Case::Any,
        Consumption::Push,
    );
    let idempotency_key_path = if let SourceKind::Http(http) = &kind {
        signatures::http_key_path(r, b, http.auth.as_ref())
    } else {
        text_or(r, b, "idempotencyKeyPath", "$.id")
    };
    check_path(r, b, "idempotencyKeyPath", Some(&idempotency_key_path));
    let aggregate_id_path = text(r, b, "aggregateIdPath");
    check_path(r, b, "aggregateIdPath", aggregate_id_path.as_deref());
    let event_type_path = text(r, b, "eventTypePath");
    check_path(r, b, "eventTypePath", event_type_path.as_deref());

    let default_topic = if is_http {
        "{{ eventType }}"
    } else {
        "{{ source }}"
    };
    let topic = text_or(r, b, "topic", default_topic);
    let topic_path = b.path_of("topic");
    if consumption == Consumption::Push {
        if topic.trim().is_empty() {
            r.problem(
                topic_path.clone(),
                "must not be blank on a push source: the relay writes it as the outbox topic",
            );
        }
        let reads_event_type = check_source_topic(r, &topic_path, &topic);
        let from_header = match &kind {
            SourceKind::Http(s) => signatures::supplies_event_type(s.auth.as_ref()),
            SourceKind::Rabbitmq(s) => s.event_type_from_header,
            SourceKind::Kafka(s) => s.event_type_from_header,
            SourceKind::Nats(s) => s.event_type_from_header,
            SourceKind::Redis(s) => s.event_type_from_header,
        };
        // Without an event type the topic renders empty and the relay kills every row.
        if reads_event_type && event_type_path.is_none() && !from_header {
            let remedy = if is_http {
                "set eventTypePath"
            } else {
                "set eventTypePath or eventTypeFromHeader: true"
            };
            r.problem(
                topic_path,
                format!("reads {{{{ eventType }}}}, but the source has no event type: {remedy}"),
            );
        }
    } else {
        check_source_topic(r, &topic_path, &topic);
    }

    let transform = transform::read(r, b);
    let filter = filter::read(r, b);
    r.describe(&b.path_of("rateLimit"), Doc::ty("block"));
    let rate_value = b.get("rateLimit");
    let rate_limit = if rate_value.is_some() {
        let mut rate = Block::open(r, rate_value, &b.path_of("rateLimit"));
        let requests = opt_positive(r, &mut rate, "requestsPerMinute");
        rate.finish(r);
        requests.map(|requests_per_minute| RateLimit {
            requests_per_minute,
        })
    } else {
        None
    };
    Some(Source {
        kind,
        consumption,
        topic,
        idempotency_key_path,
        aggregate_id_path,
        event_type_path,
        transform,
        filter,
        rate_limit,
    })
}

fn check_path(r: &mut Reader, b: &Block<'_>, key: &str, path: Option<&str>) {
    r.describe(
        &b.path_of(key),
        Doc::ty("JSONPath").allowed("a definite path (no wildcard, filter or slice)"),
    );
    if let Some(path) = path.filter(|p| !p.is_empty())
        && let Err(message) = check_definite(path.trim())
    {
        r.problem(
            b.path_of(key),
            format!("must be a definite JSONPath: {message}"),
        );
    }
}

fn read_http(r: &mut Reader, b: &mut Block<'_>) -> HttpSource {
    let path = required(r, b, "path");
    if !path.is_empty() && !path.starts_with('/') {
        r.problem(
            b.path_of("path"),
            format!("must start with `/`, got `{path}`"),
        );
    }
    HttpSource {
        path,
        auth: signatures::read_source_auth(r, b),
    }
}

fn attribute_headers(r: &mut Reader, parent: &mut Block<'_>) -> AttributeHeaders {
    let value = parent.get("attributeHeaders");
    let mut b = Block::open(r, value, &parent.path_of("attributeHeaders"));
    let headers = AttributeHeaders {
        idempotency_key: text_or(r, &mut b, "idempotencyKey", "x-idempotency-key"),
        aggregate_id: text_or(r, &mut b, "aggregateId", "x-aggregate-id"),
        event_type: text_or(r, &mut b, "eventType", "x-event-type"),
    };
    b.finish(r);
    headers
}

fn read_rabbitmq(r: &mut Reader, b: &mut Block<'_>) -> RabbitmqSource {
    let queue_name = required(r, b, "queueName");
    // `connectionUrl` is not a credential field: `file:` stays literal.
    let connection_url = SecretUrl::new(required(r, b, "connectionUrl"));
    let prefetch_path = b.path_of("prefetchCount");
    let prefetch = non_negative(r, b, "prefetchCount", 10);
    r.describe(&prefetch_path, Doc::default().allowed("0 to 65535"));
    // AMQP carries the prefetch count in 16 bits.
    let prefetch_count = u16::try_from(prefetch).unwrap_or_else(|_| {
        r.problem(
            prefetch_path,
            format!("must be at most 65535, got {prefetch}"),
        );
        10
    });
    RabbitmqSource {
        queue_name,
        connection_url,
        prefetch_count,
        declare_queue: flag(r, b, "declareQueue", false),
        event_type_from_header: flag(r, b, "eventTypeFromHeader", false),
        attribute_headers: attribute_headers(r, b),
    }
}

fn read_kafka(r: &mut Reader, b: &mut Block<'_>) -> KafkaSource {
    let bootstrap_servers = required(r, b, "bootstrapServers");
    let topics_path = b.path_of("topics");
    let topics_value = b.get("topics");
    let topics = r.text_list(topics_value, &topics_path).unwrap_or_default();
    if topics.is_empty() && topics_value.is_some_and(Value::is_array) {
        r.problem(topics_path.clone(), "must list at least one topic");
    }
    for (i, topic) in topics.iter().enumerate() {
        if topic.trim().is_empty() {
            r.problem(format!("{topics_path}[{i}]"), "must not be blank");
        }
    }
    let group_id = required(r, b, "groupId");
    let auto_offset_reset = choice(
        r,
        b,
        "autoOffsetReset",
        &[
            ("earliest", AutoOffsetReset::Earliest),
            ("latest", AutoOffsetReset::Latest),
        ],
        Case::Any,
        AutoOffsetReset::Earliest,
    );
    KafkaSource {
        bootstrap_servers,
        topics,
        group_id,
        auto_offset_reset,
        max_poll_records: positive(r, b, "maxPollRecords", 100),
        event_type_from_header: flag(r, b, "eventTypeFromHeader", false),
        security: kafka_security(r, b),
        attribute_headers: attribute_headers(r, b),
    }
}

fn read_nats(r: &mut Reader, b: &mut Block<'_>) -> NatsSource {
    NatsSource {
        servers: SecretUrl::new(required(r, b, "servers")),
        stream: required(r, b, "stream"),
        durable: required(r, b, "durable"),
        filter_subject: text(r, b, "filterSubject").filter(|s| !s.trim().is_empty()),
        ack_wait: millis(r, b, "ackWaitMs", 30_000, Floor::AboveZero),
        batch_size: positive(r, b, "batchSize", 100),
        event_type_from_header: flag(r, b, "eventTypeFromHeader", false),
        credentials: nats_credentials(r, b),
        attribute_headers: attribute_headers(r, b),
    }
}

fn read_redis(r: &mut Reader, b: &mut Block<'_>) -> RedisSource {
    let url = redis_url(r, b);
    let stream = required(r, b, "stream");
    let group = required(r, b, "group");
    let consumer_path = b.path_of("consumer");
    r.describe(&consumer_path, Doc::default().default_text("the host name"));
    let consumer = text(r, b, "consumer");
    if consumer.as_ref().is_some_and(|c| c.trim().is_empty()) {
        r.problem(
            consumer_path,
            "must not be blank (leave it out for the host name)",
        );
    }
    let max_deliveries_path = b.path_of("maxDeliveries");
    let max_deliveries = non_negative(r, b, "maxDeliveries", 5);
    r.describe(
        &max_deliveries_path,
        Doc::default().allowed(format!("0 (never) to {}", u32::MAX)),
    );
    let max_deliveries = u32::try_from(max_deliveries).unwrap_or_else(|_| {
        r.problem(
            max_deliveries_path,
            format!("must be at most {}, got {max_deliveries}", u32::MAX),
        );
        5
    });
    let dead_path = b.path_of("deadLetterStream");
    r.describe(&dead_path, Doc::default().default_text("`<stream>:dead`"));
    let dead_letter_stream =
        text(r, b, "deadLetterStream").unwrap_or_else(|| format!("{stream}:dead"));
    if dead_letter_stream.trim().is_empty() {
        r.problem(dead_path, "must not be blank");
    } else if !stream.is_empty() && dead_letter_stream == stream {
        r.problem(
            dead_path,
            "must differ from stream: a dead-lettered entry would be read again",
        );
    }
    RedisSource {
        url,
        stream,
        group,
        consumer,
        batch_size: positive(r, b, "batchSize", 100),
        block: millis(r, b, "blockMs", 2_000, Floor::AboveZero),
        claim_idle: millis(r, b, "claimIdleMs", 30_000, Floor::AboveZero),
        max_deliveries,
        dead_letter_stream,
        event_type_from_header: flag(r, b, "eventTypeFromHeader", false),
        attribute_headers: attribute_headers(r, b),
    }
}
