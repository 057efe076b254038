//! `destinations.<name>.*`: HTTP, RabbitMQ, Kafka, NATS and Redis destinations.

use super::auth::read_outbound;
use super::kind::{KindKeys, select};
use super::templates::{check_address, check_syntax};
use super::{
    Case, Floor, choice, flag, millis, opt_positive, required, secret, text, text_or, transform,
};
use crate::catalog::Doc;
use crate::model::{
    AddressColumn, DeliveryMode, Destination, DestinationKind, ExchangeType, HttpDestination,
    KafkaDestination, KafkaSecurity, NatsCredentials, NatsDestination, RabbitmqDestination,
    RedisDestination, SecurityProtocol,
};
use crate::reader::{Block, Reader};
use crate::secrets::SecretUrl;
use crate::url::{check_http_path, check_http_url};
use indexmap::IndexMap;
use queuebox_domain::template::address::AddressField;
use serde_json::Value;

/// The destination kinds, as [`select`] tells them apart.
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
        keys: &["baseUrl"],
    },
    KindKeys {
        kind: Kind::Rabbitmq,
        name: "rabbitmq",
        keys: &["url", "exchange"],
    },
    KindKeys {
        kind: Kind::Kafka,
        name: "kafka",
        keys: &["bootstrapServers", "topic"],
    },
    KindKeys {
        kind: Kind::Nats,
        name: "nats",
        keys: &["servers", "subject"],
    },
    KindKeys {
        kind: Kind::Redis,
        name: "redis",
        keys: &["url", "stream"],
    },
];

pub(super) fn read(r: &mut Reader, value: Option<&Value>) -> IndexMap<String, Destination> {
    let mut destinations = IndexMap::new();
    for (name, value) in r.named(value, "destinations") {
        let mut b = Block::open(r, Some(value), &format!("destinations.{name}"));
        let kind = select(r, &mut b, "a destination", KINDS).map(|kind| match kind {
            Kind::Http => DestinationKind::Http(read_http(r, &mut b)),
            Kind::Rabbitmq => DestinationKind::Rabbitmq(read_rabbitmq(r, &mut b, &name)),
            Kind::Kafka => DestinationKind::Kafka(read_kafka(r, &mut b, &name)),
            Kind::Nats => DestinationKind::Nats(read_nats(r, &mut b, &name)),
            Kind::Redis => DestinationKind::Redis(read_redis(r, &mut b, &name)),
        });
        let headers_value = b.get("headers");
        let headers = r.text_map(headers_value, &b.path_of("headers"));
        let transform = transform::read(r, &mut b);
        b.finish(r);
        if let Some(kind) = kind {
            destinations.insert(
                name,
                Destination {
                    kind,
                    headers,
                    transform,
                },
            );
        }
    }
    destinations
}

fn read_http(r: &mut Reader, b: &mut Block<'_>) -> HttpDestination {
    let base_url = required(r, b, "baseUrl");
    if !base_url.is_empty()
        && let Err(message) = check_http_url(&base_url)
    {
        r.problem(b.path_of("baseUrl"), message);
    }
    let path = text_or(r, b, "path", "/");
    if let Err(message) = check_http_path(&path) {
        r.problem(b.path_of("path"), message);
    }
    HttpDestination {
        base_url,
        path,
        timeout: millis(r, b, "timeoutMs", 30_000, Floor::AboveZero),
        auth: read_outbound(r, b),
        signing: super::signatures::read_signing(r, b),
    }
}

/// `exchangeFrom`, `topicFrom`, `subjectFrom`, `streamFrom`: a row column that holds the address.
fn address_column(r: &mut Reader, b: &mut Block<'_>, key: &'static str) -> Option<AddressColumn> {
    let path = b.path_of(key);
    r.describe(
        &path,
        Doc::default().allowed("`aggregate_type`, `topic`, `key`"),
    );
    let raw = text(r, b, key)?;
    let column = AddressColumn::from_name(&raw);
    if column.is_none() {
        r.problem(
            path,
            format!("must be one of aggregate_type, topic, key, got `{raw}`"),
        );
    }
    column
}

/// A required address (`exchange`, `topic`, `subject`, `stream`) checked as an address template.
fn address(r: &mut Reader, b: &mut Block<'_>, field: AddressField, destination: &str) -> String {
    let key = field.as_str();
    let value = required(r, b, key);
    if !value.is_empty() {
        check_address(r, &b.path_of(key), field, destination, &value);
    }
    value
}

fn read_rabbitmq(r: &mut Reader, b: &mut Block<'_>, name: &str) -> RabbitmqDestination {
    // `url` is not a credential field: `file:` stays literal.
    let url = SecretUrl::new(required(r, b, "url"));
    let exchange = address(r, b, AddressField::Exchange, name);
    let exchange_from = address_column(r, b, "exchangeFrom");
    let exchange_type = choice(
        r,
        b,
        "exchangeType",
        &[
            ("topic", ExchangeType::Topic),
            ("direct", ExchangeType::Direct),
            ("fanout", ExchangeType::Fanout),
        ],
        Case::Any,
        ExchangeType::Topic,
    );
    let routing_key_template = text_or(r, b, "routingKeyTemplate", "{{ topic }}");
    check_syntax(r, &b.path_of("routingKeyTemplate"), &routing_key_template);
    let delivery_mode = choice(
        r,
        b,
        "deliveryMode",
        &[
            ("persistent", DeliveryMode::Persistent),
            ("transient", DeliveryMode::Transient),
        ],
        Case::Any,
        DeliveryMode::Persistent,
    );
    RabbitmqDestination {
        url,
        exchange,
        exchange_from,
        exchange_type,
        routing_key_template,
        delivery_mode,
    }
}

/// The Kafka security keys, shared with the Kafka source.
pub(crate) fn kafka_security(r: &mut Reader, b: &mut Block<'_>) -> KafkaSecurity {
    let security_protocol = choice(
        r,
        b,
        "securityProtocol",
        &[
            ("PLAINTEXT", SecurityProtocol::Plaintext),
            ("SSL", SecurityProtocol::Ssl),
            ("SASL_PLAINTEXT", SecurityProtocol::SaslPlaintext),
            ("SASL_SSL", SecurityProtocol::SaslSsl),
        ],
        Case::Any,
        SecurityProtocol::Plaintext,
    );
    let sasl_mechanism = text(r, b, "saslMechanism").filter(|m| !m.trim().is_empty());
    let sasl_username = text(r, b, "saslUsername").filter(|u| !u.trim().is_empty());
    let sasl_password = secret(r, b, "saslPassword");
    if security_protocol.is_sasl() {
        let missing = [
            ("saslMechanism", sasl_mechanism.is_none()),
            ("saslUsername", sasl_username.is_none()),
            (
                "saslPassword",
                sasl_password.is_none() && !b.has("saslPassword"),
            ),
        ];
        for (key, is_missing) in missing {
            if is_missing {
                r.problem(b.path_of(key), "is required by a SASL_ securityProtocol");
            }
        }
    }
    KafkaSecurity {
        security_protocol,
        sasl_mechanism,
        sasl_username,
        sasl_password,
    }
}

fn read_kafka(r: &mut Reader, b: &mut Block<'_>, name: &str) -> KafkaDestination {
    let bootstrap_servers = required(r, b, "bootstrapServers");
    let topic = address(r, b, AddressField::Topic, name);
    let topic_from = address_column(r, b, "topicFrom");
    let key_template = text_or(r, b, "keyTemplate", "{{ key }}");
    check_syntax(r, &b.path_of("keyTemplate"), &key_template);
    // The producer's delivery budget must cover its own request timeout and a retry.
    let timeout = millis(r, b, "timeoutMs", 30_000, Floor::AtLeast(2000));
    let linger = millis(r, b, "lingerMs", 1, Floor::Zero);
    if linger >= timeout {
        r.problem(
            b.path_of("lingerMs"),
            format!(
                "must be below timeoutMs ({} ms), got {} ms",
                timeout.as_millis(),
                linger.as_millis()
            ),
        );
    }
    KafkaDestination {
        bootstrap_servers,
        topic,
        topic_from,
        key_template,
        timeout,
        linger,
        security: kafka_security(r, b),
    }
}

/// NATS credentials, shared with the NATS source: a user needs a password and the reverse, and a
/// token excludes a user.
pub(crate) fn nats_credentials(r: &mut Reader, b: &mut Block<'_>) -> NatsCredentials {
    let username = text(r, b, "username").filter(|u| !u.trim().is_empty());
    let password = secret(r, b, "password");
    let token = secret(r, b, "token");
    if username.is_some() && password.is_none() && !b.has("password") {
        r.problem(b.path_of("password"), "is required when username is set");
    }
    if password.is_some() && username.is_none() {
        r.problem(b.path_of("username"), "is required when password is set");
    }
    if token.is_some() && username.is_some() {
        r.problem(b.path_of("token"), "set a token or a username, not both");
    }
    NatsCredentials {
        username,
        password,
        token,
    }
}

fn read_nats(r: &mut Reader, b: &mut Block<'_>, name: &str) -> NatsDestination {
    let servers = SecretUrl::new(required(r, b, "servers"));
    let subject = address(r, b, AddressField::Subject, name);
    let subject_from = address_column(r, b, "subjectFrom");
    NatsDestination {
        servers,
        subject,
        subject_from,
        jet_stream: flag(r, b, "jetStream", true),
        timeout: millis(r, b, "timeoutMs", 30_000, Floor::AboveZero),
        credentials: nats_credentials(r, b),
    }
}

/// A Redis `url` (shared with the Redis source), checked without ever showing it: it may carry a
/// password.
pub(crate) fn redis_url(r: &mut Reader, b: &mut Block<'_>) -> SecretUrl {
    let url = required(r, b, "url");
    if !url.is_empty() {
        let problem = match url.trim().split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("redis") => {
                let authority = rest.split('/').next().unwrap_or_default();
                let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
                let db = rest.split_once('/').map(|(_, db)| db).unwrap_or_default();
                if host.is_empty() {
                    Some("names no host: expected redis://[user[:password]@]host[:port][/db]".to_owned())
                } else if !db.is_empty() && db.parse::<u32>().is_err() {
                    Some("the database after the host must be a number (redis://host:6379/0)".to_owned())
                } else {
                    None
                }
            }
            Some((scheme, _)) if scheme.eq_ignore_ascii_case("rediss") => Some(
                "rediss:// (TLS) is not supported in this version; use redis:// on a trusted network or through a TLS tunnel".to_owned(),
            ),
            _ => Some("must be a redis:// URL: redis://[user[:password]@]host[:port][/db]".to_owned()),
        };
        if let Some(problem) = problem {
            r.problem(b.path_of("url"), problem);
        }
    }
    SecretUrl::new(url)
}

fn read_redis(r: &mut Reader, b: &mut Block<'_>, name: &str) -> RedisDestination {
    let url = redis_url(r, b);
    let stream = address(r, b, AddressField::Stream, name);
    let stream_from = address_column(r, b, "streamFrom");
    let max_len_path = b.path_of("maxLen");
    r.describe(&max_len_path, Doc::default().default_text("no trimming"));
    let max_len = opt_positive(r, b, "maxLen");
    RedisDestination {
        url,
        stream,
        stream_from,
        max_len,
        max_len_approximate: flag(r, b, "maxLenApproximate", true),
        timeout: millis(r, b, "timeoutMs", 30_000, Floor::AboveZero),
    }
}
