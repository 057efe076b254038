//! One test per rule of destinations, routes, sources, auth blocks and transforms: each asserts
//! that the message names the key and its variable.
#![allow(clippy::unwrap_used)]

mod common;
use common::{assert_refused, ok, problems};
use queuebox_config::{
    Consumption, DestinationKind, FilterCondition, InboundAuth, OnError, SignaturePayloadFormat,
    SourceKind,
};

const HTTP_DEST: &str =
    "destinations:\n  api:\n    type: http\n    baseUrl: https://api.example.com\n";

fn hmac_source(auth_extra: &str) -> String {
    format!(
        "sources:\n  s:\n    path: /s\n    idempotencyKeyPath: $.id\n    eventTypePath: $.type\n    auth:\n      type: hmac\n      secret: k\n{auth_extra}"
    )
}

fn transform_on_dest(extra: &str) -> String {
    format!("{HTTP_DEST}    transform:\n      expression: $\n{extra}")
}

// --- destinations ---------------------------------------------------------------------------

#[test]
fn http_base_url_must_be_absolute_http() {
    assert_refused(
        "destinations:\n  api:\n    baseUrl: ftp://x\n",
        "destinations.api.baseUrl",
        "QUEUEBOX_DESTINATIONS_API_BASEURL",
        "absolute http:// or https://",
    );
    assert_refused(
        "destinations:\n  api:\n    baseUrl: /relative\n",
        "destinations.api.baseUrl",
        "QUEUEBOX_DESTINATIONS_API_BASEURL",
        "absolute",
    );
    assert_refused(
        "destinations:\n  api:\n    baseUrl: \"https://:80\"\n",
        "destinations.api.baseUrl",
        "QUEUEBOX_DESTINATIONS_API_BASEURL",
        "names no host",
    );
}

#[test]
fn http_base_url_must_not_hold_credentials() {
    assert_refused(
        "destinations:\n  my_api:\n    baseUrl: https://u:p@api.example.com\n",
        "destinations.my_api.baseUrl",
        "QUEUEBOX_DESTINATIONS_MY__API_BASEURL",
        "must not hold a user name or a password",
    );
}

#[test]
fn http_path_must_not_hold_dot_segments() {
    assert_refused(
        &format!("{HTTP_DEST}    path: /a/../admin\n"),
        "destinations.api.path",
        "QUEUEBOX_DESTINATIONS_API_PATH",
        "`..` segment",
    );
    assert_refused(
        &format!("{HTTP_DEST}    path: /a/./b\n"),
        "destinations.api.path",
        "QUEUEBOX_DESTINATIONS_API_PATH",
        "`.` segment",
    );
}

#[test]
fn oauth2_token_url_follows_the_base_url_rules() {
    let extra = format!(
        "{HTTP_DEST}    auth:\n      type: oauth2\n      clientId: c\n      clientSecret: s\n      tokenUrl: https://u:p@auth.example.com/token\n"
    );
    assert_refused(
        &extra,
        "destinations.api.auth.tokenUrl",
        "QUEUEBOX_DESTINATIONS_API_AUTH_TOKENURL",
        "must not hold a user name",
    );
}

#[test]
fn http_destination_defaults_and_auth_kinds() {
    let s = ok(&format!(
        "{HTTP_DEST}    auth:\n      type: header\n      headerValue: Bearer x\n"
    ))
    .settings;
    let DestinationKind::Http(http) = &s.destinations["api"].kind else {
        panic!("http")
    };
    assert_eq!(http.path, "/");
    assert_eq!(http.timeout.as_millis(), 30_000);
    assert!(
        matches!(&http.auth, Some(queuebox_config::OutboundAuth::Header { header_name, .. }) if header_name == "Authorization")
    );
}

#[test]
fn kafka_timeout_is_at_least_2000() {
    assert_refused(
        "destinations:\n  k:\n    bootstrapServers: b:9092\n    topic: t\n    timeoutMs: 1999\n",
        "destinations.k.timeoutMs",
        "QUEUEBOX_DESTINATIONS_K_TIMEOUTMS",
        "must be at least 2000, got 1999",
    );
}

#[test]
fn kafka_linger_defaults_to_1_ms_and_stays_below_the_timeout() {
    let s = ok("destinations:\n  k:\n    bootstrapServers: b:9092\n    topic: t\n").settings;
    let DestinationKind::Kafka(kafka) = &s.destinations["k"].kind else {
        panic!("kafka")
    };
    assert_eq!(kafka.linger.as_millis(), 1);
    let s =
        ok("destinations:\n  k:\n    bootstrapServers: b:9092\n    topic: t\n    lingerMs: 5\n")
            .settings;
    let DestinationKind::Kafka(kafka) = &s.destinations["k"].kind else {
        panic!("kafka")
    };
    assert_eq!(kafka.linger.as_millis(), 5);
    assert_refused(
        "destinations:\n  k:\n    bootstrapServers: b:9092\n    topic: t\n    timeoutMs: 2000\n    lingerMs: 2000\n",
        "destinations.k.lingerMs",
        "QUEUEBOX_DESTINATIONS_K_LINGERMS",
        "must be below timeoutMs (2000 ms), got 2000 ms",
    );
    assert_refused(
        "destinations:\n  k:\n    bootstrapServers: b:9092\n    topic: t\n    lingerMs: -1\n",
        "destinations.k.lingerMs",
        "QUEUEBOX_DESTINATIONS_K_LINGERMS",
        "must not be negative, got -1",
    );
}

#[test]
fn sasl_protocols_need_mechanism_username_and_password() {
    let lines = problems(
        "destinations:\n  k:\n    bootstrapServers: b:9092\n    topic: t\n    securityProtocol: SASL_SSL\n",
    );
    for key in ["SASLMECHANISM", "SASLUSERNAME", "SASLPASSWORD"] {
        assert!(
            lines.iter().any(|l| l.contains(&format!(
                "(QUEUEBOX_DESTINATIONS_K_{key}): is required by a SASL_ securityProtocol"
            ))),
            "{key}: {lines:?}"
        );
    }
    assert_refused(
        "sources:\n  k:\n    bootstrapServers: b\n    topics: [t]\n    groupId: g\n    consumption: pull\n    securityProtocol: SASL_PLAINTEXT\n    saslMechanism: PLAIN\n    saslUsername: u\n",
        "sources.k.saslPassword",
        "QUEUEBOX_SOURCES_K_SASLPASSWORD",
        "is required by a SASL_",
    );
}

#[test]
fn security_protocol_is_an_enumeration() {
    assert_refused(
        "destinations:\n  k:\n    bootstrapServers: b\n    topic: t\n    securityProtocol: TLS\n",
        "destinations.k.securityProtocol",
        "QUEUEBOX_DESTINATIONS_K_SECURITYPROTOCOL",
        "must be one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL",
    );
}

#[test]
fn nats_username_needs_password() {
    assert_refused(
        "destinations:\n  n:\n    servers: nats://n:4222\n    subject: s\n    username: u\n",
        "destinations.n.password",
        "QUEUEBOX_DESTINATIONS_N_PASSWORD",
        "is required when username is set",
    );
    assert_refused(
        "destinations:\n  n:\n    servers: nats://n:4222\n    subject: s\n    password: p\n",
        "destinations.n.username",
        "QUEUEBOX_DESTINATIONS_N_USERNAME",
        "is required when password is set",
    );
}

#[test]
fn nats_token_excludes_username() {
    assert_refused(
        "destinations:\n  n:\n    servers: nats://n:4222\n    subject: s\n    username: u\n    password: p\n    token: t\n",
        "destinations.n.token",
        "QUEUEBOX_DESTINATIONS_N_TOKEN",
        "set a token or a username, not both",
    );
}

#[test]
fn nats_timeout_must_be_above_zero() {
    assert_refused(
        "destinations:\n  n:\n    servers: nats://n:4222\n    subject: s\n    timeoutMs: 0\n",
        "destinations.n.timeoutMs",
        "QUEUEBOX_DESTINATIONS_N_TIMEOUTMS",
        "must be above 0",
    );
}

#[test]
fn address_columns_are_aggregate_type_topic_or_key() {
    assert_refused(
        "destinations:\n  r:\n    url: amqp://r\n    exchange: e\n    exchangeFrom: aggregateType\n",
        "destinations.r.exchangeFrom",
        "QUEUEBOX_DESTINATIONS_R_EXCHANGEFROM",
        "must be one of aggregate_type, topic, key",
    );
    assert_refused(
        "destinations:\n  k:\n    bootstrapServers: b\n    topic: t\n    topicFrom: payload\n",
        "destinations.k.topicFrom",
        "QUEUEBOX_DESTINATIONS_K_TOPICFROM",
        "must be one of aggregate_type, topic, key",
    );
    assert_refused(
        "destinations:\n  n:\n    servers: nats://n\n    subject: s\n    subjectFrom: id\n",
        "destinations.n.subjectFrom",
        "QUEUEBOX_DESTINATIONS_N_SUBJECTFROM",
        "must be one of aggregate_type, topic, key",
    );
    let s = ok("destinations:\n  r:\n    url: amqp://r\n    exchange: e\n    exchangeFrom: aggregate_type\n").settings;
    let DestinationKind::Rabbitmq(r) = &s.destinations["r"].kind else {
        panic!("rabbitmq")
    };
    assert_eq!(
        r.exchange_from,
        Some(queuebox_config::AddressColumn::AggregateType)
    );
    assert_eq!(r.routing_key_template, "{{ topic }}");
}

#[test]
fn exchange_type_and_delivery_mode_are_enumerations() {
    assert_refused(
        "destinations:\n  r:\n    url: amqp://r\n    exchange: e\n    exchangeType: headers\n",
        "destinations.r.exchangeType",
        "QUEUEBOX_DESTINATIONS_R_EXCHANGETYPE",
        "must be one of topic, direct, fanout",
    );
    assert_refused(
        "destinations:\n  r:\n    url: amqp://r\n    exchange: e\n    deliveryMode: durable\n",
        "destinations.r.deliveryMode",
        "QUEUEBOX_DESTINATIONS_R_DELIVERYMODE",
        "must be one of persistent, transient",
    );
}

#[test]
fn address_templates_allow_only_row_placeholders() {
    assert_refused(
        "destinations:\n  r:\n    url: amqp://r\n    exchange: \"ev.{{ source }}\"\n",
        "destinations.r.exchange",
        "QUEUEBOX_DESTINATIONS_R_EXCHANGE",
        "placeholder {{ source }} is not allowed in the exchange of destination r",
    );
    assert_refused(
        "destinations:\n  k:\n    bootstrapServers: b\n    topic: \"{{payload}}\"\n",
        "destinations.k.topic",
        "QUEUEBOX_DESTINATIONS_K_TOPIC",
        "is not allowed in the topic of destination k",
    );
    assert_refused(
        "destinations:\n  n:\n    servers: nats://n\n    subject: \"x.{{ region }}\"\n",
        "destinations.n.subject",
        "QUEUEBOX_DESTINATIONS_N_SUBJECT",
        "is not allowed in the subject of destination n",
    );
    ok(
        "destinations:\n  n:\n    servers: nats://n\n    subject: \"x.{{topic}}.{{ key }}.{{ aggregateType }}.{{ payload.a.b }}.{{ data.c }}\"\n",
    );
}

#[test]
fn an_unclosed_template_is_refused() {
    assert_refused(
        "destinations:\n  n:\n    servers: nats://n\n    subject: \"x.{{ topic\"\n",
        "destinations.n.subject",
        "QUEUEBOX_DESTINATIONS_N_SUBJECT",
        "is not a valid template",
    );
}

// --- routes ---------------------------------------------------------------------------------

#[test]
fn route_topic_pattern_is_required() {
    assert_refused(
        &format!("{HTTP_DEST}routes:\n  - destination: api\n"),
        "routes[0].topicPattern",
        "QUEUEBOX_ROUTES_0_TOPICPATTERN",
        "is required",
    );
}

#[test]
fn route_triple_star_is_refused() {
    assert_refused(
        &format!("{HTTP_DEST}routes:\n  - topicPattern: \"a.***\"\n    destination: api\n"),
        "routes[0].topicPattern",
        "QUEUEBOX_ROUTES_0_TOPICPATTERN",
        "`***`",
    );
}

#[test]
fn route_destination_must_exist() {
    assert_refused(
        &format!(
            "{HTTP_DEST}routes:\n  - topicPattern: \"**\"\n    destination: api\n  - topicPattern: \"**\"\n    destination: nope\n"
        ),
        "routes[1].destination",
        "QUEUEBOX_ROUTES_1_DESTINATION",
        "names unknown destination `nope` (known: api)",
    );
    assert_refused(
        "routes:\n  - topicPattern: \"**\"\n",
        "routes[0].destination",
        "QUEUEBOX_ROUTES_0_DESTINATION",
        "is required",
    );
}

#[test]
fn route_values_load_in_order() {
    let s = ok(&format!("{HTTP_DEST}routes:\n  - topicPattern: \"a.*\"\n    destination: api\n    routingKeyTemplate: \"{{{{ payload.region }}}}\"\n  - topicPattern: \"**\"\n    destination: api\n")).settings;
    assert_eq!(s.routes.len(), 2);
    assert_eq!(s.routes[0].topic_pattern, "a.*");
    assert_eq!(
        s.routes[0].routing_key_template.as_deref(),
        Some("{{ payload.region }}")
    );
    assert_eq!(s.routes[1].routing_key_missing_field_default, "");
}

// --- transform ------------------------------------------------------------------------------

#[test]
fn on_error_is_fail_skip_or_dead_in_that_case() {
    assert_refused(
        &transform_on_dest("      onError: fail\n"),
        "destinations.api.transform.onError",
        "QUEUEBOX_DESTINATIONS_API_TRANSFORM_ONERROR",
        "must be one of Fail, Skip, Dead (in this letter case), got `fail`",
    );
    let s = ok(&transform_on_dest("      onError: Dead\n")).settings;
    let t = s.destinations["api"].transform.as_ref().unwrap();
    assert_eq!(t.on_error, OnError::Dead);
    assert_eq!(t.timeout.as_millis(), 100);
    assert_eq!(t.max_depth, 100);
}

#[test]
fn transform_limits_must_be_above_zero() {
    assert_refused(
        &transform_on_dest("      timeoutMs: 0\n"),
        "destinations.api.transform.timeoutMs",
        "QUEUEBOX_DESTINATIONS_API_TRANSFORM_TIMEOUTMS",
        "must be above 0",
    );
    assert_refused(
        &format!(
            "{HTTP_DEST}routes:\n  - topicPattern: x\n    destination: api\n    transform:\n      expression: $\n      maxDepth: 0\n"
        ),
        "routes[0].transform.maxDepth",
        "QUEUEBOX_ROUTES_0_TRANSFORM_MAXDEPTH",
        "must be above 0",
    );
}

#[test]
fn transform_expression_is_required() {
    assert_refused(
        "sources:\n  s:\n    path: /s\n    idempotencyKeyPath: $.id\n    consumption: pull\n    transform:\n      onError: Skip\n",
        "sources.s.transform.expression",
        "QUEUEBOX_SOURCES_S_TRANSFORM_EXPRESSION",
        "is required",
    );
}

// --- sources --------------------------------------------------------------------------------

#[test]
fn http_source_needs_path_and_idempotency_key_path() {
    assert_refused(
        "sources:\n  s:\n    type: http\n    path: /s\n",
        "sources.s.idempotencyKeyPath",
        "QUEUEBOX_SOURCES_S_IDEMPOTENCYKEYPATH",
        "is required by a source of type http",
    );
    assert_refused(
        "sources:\n  s:\n    type: http\n    idempotencyKeyPath: $.id\n",
        "sources.s.path",
        "QUEUEBOX_SOURCES_S_PATH",
        "is required by a source of type http",
    );
}

#[test]
fn json_paths_must_be_definite() {
    for (path, reason) in [
        ("$..orderId", "deep scan"),
        ("$.items[*].id", "wildcard"),
        ("$.a[?(@.x)]", "filter"),
        ("$.a[0:2]", "slice"),
        ("$['a','b']", "union"),
    ] {
        assert_refused(
            &format!(
                "sources:\n  s:\n    path: /s\n    idempotencyKeyPath: \"{path}\"\n    consumption: pull\n"
            ),
            "sources.s.idempotencyKeyPath",
            "QUEUEBOX_SOURCES_S_IDEMPOTENCYKEYPATH",
            reason,
        );
    }
    assert_refused(
        "sources:\n  s:\n    path: /s\n    idempotencyKeyPath: $.id\n    aggregateIdPath: $..c\n    consumption: pull\n",
        "sources.s.aggregateIdPath",
        "QUEUEBOX_SOURCES_S_AGGREGATEIDPATH",
        "definite",
    );
    assert_refused(
        "sources:\n  s:\n    path: /s\n    idempotencyKeyPath: $.id\n    eventTypePath: $.*\n",
        "sources.s.eventTypePath",
        "QUEUEBOX_SOURCES_S_EVENTTYPEPATH",
        "definite",
    );
    ok(
        "sources:\n  s:\n    path: /s\n    idempotencyKeyPath: \"$['id']\"\n    eventTypePath: $.data.items[0].type\n",
    );
}

#[test]
fn consumption_is_push_or_pull() {
    assert_refused(
        "sources:\n  s:\n    path: /s\n    idempotencyKeyPath: $.id\n    consumption: poll\n",
        "sources.s.consumption",
        "QUEUEBOX_SOURCES_S_CONSUMPTION",
        "must be one of push, pull",
    );
}

#[test]
fn a_push_topic_must_not_be_blank() {
    assert_refused(
        "sources:\n  s:\n    path: /s\n    idempotencyKeyPath: $.id\n    topic: \"  \"\n",
        "sources.s.topic",
        "QUEUEBOX_SOURCES_S_TOPIC",
        "must not be blank on a push source",
    );
}

#[test]
fn an_http_push_source_reading_event_type_needs_event_type_path() {
    // The default topic of an HTTP source is {{ eventType }}.
    assert_refused(
        "sources:\n  s:\n    path: /s\n    idempotencyKeyPath: $.id\n",
        "sources.s.topic",
        "QUEUEBOX_SOURCES_S_TOPIC",
        "set eventTypePath",
    );
    // A pull source needs no topic.
    let s =
        ok("sources:\n  s:\n    path: /s\n    idempotencyKeyPath: $.id\n    consumption: pull\n")
            .settings;
    assert_eq!(s.sources["s"].consumption, Consumption::Pull);
}

#[test]
fn a_broker_push_source_reading_event_type_needs_a_path_or_the_header() {
    let base = "sources:\n  q:\n    queueName: q\n    connectionUrl: amqp://r\n    topic: \"{{ eventType }}\"\n";
    assert_refused(
        base,
        "sources.q.topic",
        "QUEUEBOX_SOURCES_Q_TOPIC",
        "set eventTypePath or eventTypeFromHeader: true",
    );
    ok(&format!("{base}    eventTypeFromHeader: true\n"));
    ok(&format!("{base}    eventTypePath: $.type\n"));
}

#[test]
fn a_source_topic_reads_only_source_and_event_type() {
    assert_refused(
        "sources:\n  q:\n    queueName: q\n    connectionUrl: amqp://r\n    topic: \"{{ topic }}\"\n",
        "sources.q.topic",
        "QUEUEBOX_SOURCES_Q_TOPIC",
        "placeholder {{ topic }} is not allowed in a source topic",
    );
}

#[test]
fn kafka_topics_are_a_non_empty_list_of_non_blank_names() {
    assert_refused(
        "sources:\n  k:\n    bootstrapServers: b\n    topics: [a, \"\"]\n    groupId: g\n",
        "sources.k.topics[1]",
        "QUEUEBOX_SOURCES_K_TOPICS_1",
        "must not be blank",
    );
    assert_refused(
        "sources:\n  k:\n    bootstrapServers: b\n    topics: []\n    groupId: g\n",
        "sources.k.topics",
        "QUEUEBOX_SOURCES_K_TOPICS",
        "at least one topic",
    );
}

#[test]
fn kafka_source_enumerations_and_limits() {
    let base = "sources:\n  k:\n    bootstrapServers: b\n    topics: [a]\n    groupId: g\n";
    assert_refused(
        &format!("{base}    autoOffsetReset: newest\n"),
        "sources.k.autoOffsetReset",
        "QUEUEBOX_SOURCES_K_AUTOOFFSETRESET",
        "must be one of earliest, latest",
    );
    assert_refused(
        &format!("{base}    maxPollRecords: 0\n"),
        "sources.k.maxPollRecords",
        "QUEUEBOX_SOURCES_K_MAXPOLLRECORDS",
        "must be above 0",
    );
    let s = ok(base).settings;
    let source = &s.sources["k"];
    assert_eq!(source.topic, "{{ source }}");
    assert_eq!(source.idempotency_key_path, "$.id");
    let SourceKind::Kafka(k) = &source.kind else {
        panic!("kafka")
    };
    assert_eq!(k.max_poll_records, 100);
    assert_eq!(k.attribute_headers.event_type, "x-event-type");
}

#[test]
fn nats_source_credentials() {
    assert_refused(
        "sources:\n  n:\n    servers: nats://n\n    stream: S\n    durable: d\n    token: t\n    username: u\n    password: p\n",
        "sources.n.token",
        "QUEUEBOX_SOURCES_N_TOKEN",
        "not both",
    );
}

#[test]
fn filter_rules_set_exactly_one_condition() {
    let base = "sources:\n  o:\n    path: /o\n    idempotencyKeyPath: $.id\n    consumption: pull\n    filter:\n      require:\n";
    assert_refused(
        &format!("{base}        - header: x\n          equals: a\n          matches: b\n"),
        "sources.o.filter.require[0]",
        "QUEUEBOX_SOURCES_O_FILTER_REQUIRE_0",
        "exactly one of equals, in, matches or exists",
    );
    assert_refused(
        &format!("{base}        - header: x\n"),
        "sources.o.filter.require[0]",
        "QUEUEBOX_SOURCES_O_FILTER_REQUIRE_0",
        "must set one of",
    );
    assert_refused(
        &format!("{base}        - header: x\n          in: []\n"),
        "sources.o.filter.require[0].in",
        "QUEUEBOX_SOURCES_O_FILTER_REQUIRE_0_IN",
        "at least one value",
    );
    assert_refused(
        &format!("{base}        - equals: a\n"),
        "sources.o.filter.require[0].header",
        "QUEUEBOX_SOURCES_O_FILTER_REQUIRE_0_HEADER",
        "is required",
    );
}

#[test]
fn exists_false_is_refused() {
    assert_refused(
        "sources:\n  o:\n    path: /o\n    idempotencyKeyPath: $.id\n    consumption: pull\n    filter:\n      exclude:\n        - header: x\n          exists: false\n",
        "sources.o.filter.exclude[0].exists",
        "QUEUEBOX_SOURCES_O_FILTER_EXCLUDE_0_EXISTS",
        "exists: false is not supported",
    );
}

#[test]
fn filter_rules_load() {
    let s = ok("sources:\n  o:\n    path: /o\n    idempotencyKeyPath: $.id\n    consumption: pull\n    filter:\n      require:\n        - header: x-region\n          in: [eu, uk]\n      exclude:\n        - header: x-test\n          exists: true\n").settings;
    let filter = s.sources["o"].filter.as_ref().unwrap();
    assert_eq!(
        filter.require[0].condition,
        FilterCondition::In(vec!["eu".into(), "uk".into()])
    );
    assert_eq!(filter.exclude[0].condition, FilterCondition::Exists(true));
}

#[test]
fn rate_limit_must_be_above_zero() {
    assert_refused(
        "sources:\n  s:\n    path: /s\n    idempotencyKeyPath: $.id\n    consumption: pull\n    rateLimit:\n      requestsPerMinute: 0\n",
        "sources.s.rateLimit.requestsPerMinute",
        "QUEUEBOX_SOURCES_S_RATELIMIT_REQUESTSPERMINUTE",
        "must be above 0",
    );
}

#[test]
fn two_http_sources_cannot_share_a_path() {
    assert_refused(
        "sources:\n  a:\n    path: /x\n    idempotencyKeyPath: $.id\n    consumption: pull\n  b:\n    path: /x\n    idempotencyKeyPath: $.id\n    consumption: pull\n",
        "sources.b.path",
        "QUEUEBOX_SOURCES_B_PATH",
        "is also the path of source a",
    );
}

// --- hmac -----------------------------------------------------------------------------------

#[test]
fn hmac_algorithm_is_sha256_or_sha512() {
    assert_refused(
        &hmac_source("      algorithm: SHA1\n"),
        "sources.s.auth.algorithm",
        "QUEUEBOX_SOURCES_S_AUTH_ALGORITHM",
        "must be one of HmacSHA256, HmacSHA512",
    );
}

#[test]
fn timestamp_dot_body_needs_a_timestamp_header() {
    assert_refused(
        &hmac_source("      signaturePayloadFormat: TIMESTAMP_DOT_BODY\n"),
        "sources.s.auth.signaturePayloadFormat",
        "QUEUEBOX_SOURCES_S_AUTH_SIGNATUREPAYLOADFORMAT",
        "needs timestampHeader",
    );
    assert_refused(
        &hmac_source("      signaturePayloadFormat: timestamp-dot-body\n"),
        "sources.s.auth.signaturePayloadFormat",
        "QUEUEBOX_SOURCES_S_AUTH_SIGNATUREPAYLOADFORMAT",
        "needs timestampHeader",
    );
}

#[test]
fn signature_payload_format_takes_four_spellings_only() {
    assert_refused(
        &hmac_source("      signaturePayloadFormat: Body\n"),
        "sources.s.auth.signaturePayloadFormat",
        "QUEUEBOX_SOURCES_S_AUTH_SIGNATUREPAYLOADFORMAT",
        "must be one of BODY, body, TIMESTAMP_DOT_BODY, timestamp-dot-body",
    );
}

#[test]
fn the_default_payload_format_follows_the_timestamp_header() {
    let format_of = |extra: &str| {
        let s = ok(&hmac_source(extra)).settings;
        let SourceKind::Http(http) = &s.sources["s"].kind else {
            panic!("http")
        };
        let Some(InboundAuth::Hmac(hmac)) = &http.auth else {
            panic!("hmac")
        };
        (
            hmac.signature_payload_format,
            hmac.signature_prefix.clone(),
            hmac.header_name.clone(),
        )
    };
    assert_eq!(format_of("").0, SignaturePayloadFormat::Body);
    assert_eq!(format_of("").1, "sha256=");
    assert_eq!(format_of("").2, "X-Signature");
    assert_eq!(
        format_of("      timestampHeader: X-Timestamp\n").0,
        SignaturePayloadFormat::TimestampDotBody
    );
    assert_eq!(
        format_of("      timestampHeader: X-Timestamp\n      signaturePayloadFormat: body\n").0,
        SignaturePayloadFormat::Body
    );
}

#[test]
fn hmac_timestamp_tolerance_must_be_above_zero() {
    assert_refused(
        &hmac_source("      timestampTolerance: 0\n"),
        "sources.s.auth.timestampTolerance",
        "QUEUEBOX_SOURCES_S_AUTH_TIMESTAMPTOLERANCE",
        "must be above 0",
    );
}

#[test]
fn an_inbound_credential_must_not_be_empty() {
    assert_refused(
        "admin:\n  enabled: true\n  auth:\n    type: bearer\n    token: \"\"\n",
        "admin.auth.token",
        "QUEUEBOX_ADMIN_AUTH_TOKEN",
        "must not be empty",
    );
}

#[test]
fn api_key_defaults_its_header() {
    let s = ok("admin:\n  enabled: true\n  auth:\n    type: api-key\n    key: k\n").settings;
    assert!(
        matches!(&s.admin.auth, Some(InboundAuth::ApiKey { header_name, .. }) if header_name == "X-API-Key")
    );
}
