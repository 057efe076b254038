//! Configurations from the how-to guides, with their structure rebuilt, load as the guides say.
#![allow(clippy::unwrap_used)]

mod common;
use common::{load_yaml, ok};
use queuebox_config::{CaptureMode, InboundAuth, OnError, SignaturePayloadFormat, SourceKind};

#[test]
fn authenticate_requests_examples() {
    let s = ok(r#"sources:
  orders:
    type: http
    path: /orders
    idempotencyKeyPath: $.id
    eventTypePath: $.type
    auth:
      type: bearer
      token: t
  partner:
    type: http
    path: /partner
    idempotencyKeyPath: $.id
    eventTypePath: $.type
    auth:
      type: api-key
      headerName: X-API-Key
      key: k
  github:
    type: http
    path: /github
    idempotencyKeyPath: $.delivery
    eventTypePath: $.action
    auth:
      type: hmac
      secret: s
      headerName: X-Hub-Signature-256
      algorithm: HmacSHA256
      signaturePrefix: "sha256="
  billing:
    type: http
    path: /billing
    idempotencyKeyPath: $.id
    eventTypePath: $.type
    auth:
      type: hmac
      secret: s
      headerName: X-Signature
      signaturePrefix: "sha256="
      timestampHeader: X-Timestamp
      timestampTolerance: 300000
destinations:
  protected-api:
    type: http
    baseUrl: https://api.example.com
    path: /events
    auth:
      type: oauth2
      clientId: queuebox
      clientSecret: cs
      tokenUrl: https://auth.example.com/oauth/token
      scope: api:write
      extraParams:
        audience: https://api.example.com
routes:
  - topicPattern: "**"
    destination: protected-api
"#)
    .settings;
    let SourceKind::Http(billing) = &s.sources["billing"].kind else {
        panic!("http")
    };
    let Some(InboundAuth::Hmac(hmac)) = &billing.auth else {
        panic!("hmac")
    };
    assert_eq!(
        hmac.signature_payload_format,
        SignaturePayloadFormat::TimestampDotBody
    );
    assert_eq!(hmac.timestamp_header.as_deref(), Some("X-Timestamp"));
}

#[test]
fn bridge_a_broker_examples() {
    let s = ok(r#"sources:
  orders-queue:
    type: rabbitmq
    queueName: incoming-orders
    connectionUrl: amqp://guest:guest@rabbitmq:5672
    idempotencyKeyPath: $.messageId
    aggregateIdPath: $.orderId
    eventTypePath: $.type
    topic: "orders.{{ eventType }}"
    prefetchCount: 10
  orders-topic:
    type: kafka
    bootstrapServers: broker-1:9092,broker-2:9092
    topics: [orders, orders-retry]
    groupId: queuebox-orders
    idempotencyKeyPath: $.id
    aggregateIdPath: $.customerId
    eventTypePath: $.type
    autoOffsetReset: earliest
    maxPollRecords: 100
  orders-stream:
    type: nats
    servers: nats://nats:4222
    stream: ORDERS
    durable: queuebox-orders
    filterSubject: orders.>
    idempotencyKeyPath: $.id
    aggregateIdPath: $.customerId
    eventTypePath: $.type
    ackWaitMs: 30000
    batchSize: 100
  outbox-events:
    type: kafka
    bootstrapServers: broker-1:9092
    topics: [outbox.event.orders]
    groupId: queuebox-orders
    attributeHeaders:
      idempotencyKey: id
      aggregateId: aggregateId
      eventType: eventType
  filtered:
    type: rabbitmq
    queueName: incoming-orders
    connectionUrl: amqp://guest:guest@rabbitmq:5672
    idempotencyKeyPath: $.messageId
    filter:
      require:
        - header: x-tenant
          equals: acme
      exclude:
        - header: x-test
          exists: true
destinations:
  events-exchange:
    type: rabbitmq
    url: amqp://guest:guest@rabbitmq:5672
    exchange: events
routes:
  - topicPattern: "order.*"
    destination: events-exchange
    routingKeyTemplate: "{{ payload.region }}.{{ payload.priority }}.{{ topic }}"
    routingKeyMissingFieldDefault: "default"
"#)
    .settings;
    let SourceKind::Kafka(kafka) = &s.sources["outbox-events"].kind else {
        panic!("kafka")
    };
    assert_eq!(kafka.attribute_headers.idempotency_key, "id");
    assert_eq!(s.routes[0].routing_key_missing_field_default, "default");
}

#[test]
fn capture_changes_examples() {
    let postgres = r#"database:
  type: postgresql
  url: jdbc:postgresql://db.internal:5432/queuebox
  username: queuebox
  password: pw
outbox:
  capture:
    mode: postgres-logical
    enabled: true
    identity: queuebox
    stateDirectory: /var/lib/queuebox/capture
    publication: queuebox_outbox
    slot: queuebox_outbox
    reconciliationIntervalMs: 1000
    connection:
      hostname: replica.db.internal
      port: 5433
      database: queuebox
      username: capture_user
      password: cpw
"#;
    let s = load_yaml(postgres, &[]).unwrap().settings;
    assert_eq!(s.outbox.capture.mode, CaptureMode::PostgresLogical);
    assert_eq!(s.outbox.capture.connection.port, Some(5433));

    let sqlserver = r#"database:
  type: sqlserver
  url: jdbc:sqlserver://db.internal:1433;databaseName=queuebox
  username: queuebox
  password: pw
outbox:
  capture:
    mode: sqlserver-cdc
    enabled: true
    identity: queuebox
    stateDirectory: /var/lib/queuebox/capture
    reconciliationIntervalMs: 1000
    connection:
      encrypt: true
      trustServerCertificate: false
"#;
    let s = load_yaml(sqlserver, &[]).unwrap().settings;
    assert_eq!(s.outbox.capture.mode, CaptureMode::SqlserverCdc);
    assert_eq!(s.database.target.database, "queuebox");
}

#[test]
fn custom_tables_example() {
    let yaml = r#"database:
  url: jdbc:postgresql://db.internal:5432/app
  username: app
  password: pw
  migrate: false
  outboxTableName: qb_outbox
  inboxTableName: qb_inbox
  columnMapping:
    outbox:
      payload: body
    inbox:
      idempotencyKey: dedup_key
"#;
    let options = load_yaml(yaml, &[]).unwrap().settings.database_options();
    assert!(!options.migrate);
    assert_eq!(options.schema.inbox_table, "qb_inbox");
    assert_eq!(options.schema.outbox.get("payload"), Some("body"));
}

#[test]
fn transform_examples() {
    let s = ok(r#"destinations:
  billing:
    type: http
    baseUrl: https://billing.internal
    path: /orders
routes:
  - topicPattern: "order.*"
    destination: billing
    transform:
      expression: |
        { "orderId": id, "total": items.(price * quantity) ~> $sum() }
      timeoutMs: 150
      onError: Fail
sources:
  github:
    type: http
    path: /github
    idempotencyKeyPath: $.delivery
    eventTypePath: $.action
    transform:
      expression: '{ "action": action, "event": $headers."x-github-event" }'
      onError: Skip
"#)
    .settings;
    let route_transform = s.routes[0].transform.as_ref().unwrap();
    assert_eq!(route_transform.timeout.as_millis(), 150);
    assert!(route_transform.expression.contains("$sum()"));
    assert_eq!(
        s.sources["github"].transform.as_ref().unwrap().on_error,
        OnError::Skip
    );
}

#[test]
fn the_three_minimum_variables_are_enough() {
    let loaded = load_yaml(
        "",
        &[
            (
                "QUEUEBOX_DATABASE_URL",
                "jdbc:postgresql://db.internal:5432/queuebox",
            ),
            ("QUEUEBOX_DATABASE_USERNAME", "queuebox"),
            ("QUEUEBOX_DATABASE_PASSWORD", "secret"),
        ],
    )
    .unwrap();
    assert_eq!(loaded.settings.database.target.hosts[0].host, "db.internal");
}
