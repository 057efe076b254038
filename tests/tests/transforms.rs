//! JSONata transforms end to end: the real binary, a real PostgreSQL and a real HTTP receiver.
//! The source stage is checked through `POST /inbox/...` and the stored rows; the route and
//! destination stages through what the receiver got and how each outbox row ended.

use queuebox_tests::database::TestDatabase;
use queuebox_tests::free_port;
use queuebox_tests::process::Launch;
use queuebox_tests::receiver::{Policy, Receiver, Recorded};
use queuebox_tests::service::{OutboxRow, Service};
use serde_json::{Value, json};
use std::time::Duration;
use uuid::Uuid;

const DELIVERY: Duration = Duration::from_secs(20);

/// A loop long enough to outlast a 50 ms timeout, without deep recursion.
const RUNAWAY_LOOP: &str = "$count([1..10000000].($string($) & 'x'))";
/// Recursion without end; `maxDepth` stops it.
const RUNAWAY_RECURSION: &str = "($f := function($n) { 1 + $f($n + 1) }; $f(0))";

/// One database and one `queuebox serve` with the relay off and the given extra top-level sections.
async fn start(sections: &str) -> Service {
    Service::with(&format!("inbox:\n  relay:\n    enabled: false\n{sections}"))
        .retry_base_delay_ms(50)
        .start()
        .await
}

async fn post(service: &Service, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, Value) {
    let mut request = service.http().post(service.url(path)).body(body.to_owned());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("POST");
    let status = response.status().as_u16();
    let text = response.text().await.expect("answer body");
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body)
}

/// `(id, idempotency key, event type, payload, state)` of every inbox row of `source`.
async fn inbox_rows(
    service: &Service,
    source: &str,
) -> Vec<(Uuid, String, Option<String>, Value, String)> {
    let rows: Vec<(Uuid, String, Option<String>, String, String)> = sqlx::query_as(
        "SELECT id, idempotency_key, event_type, payload::text, state FROM inbox \
         WHERE source = $1 ORDER BY created_at",
    )
    .bind(source)
    .fetch_all(&service.sql)
    .await
    .expect("read inbox rows");
    rows.into_iter()
        .map(|(id, key, event_type, payload, state)| {
            let payload = serde_json::from_str(&payload).expect("payload JSON");
            (id, key, event_type, payload, state)
        })
        .collect()
}

/// Inserts one due outbox row and returns its id.
async fn insert(service: &Service, topic: &str, payload: Value, max_attempts: i32) -> Uuid {
    service
        .insert(OutboxRow {
            max_attempts,
            ..OutboxRow::new(topic, payload)
        })
        .await
}

/// Waits until row `id` is in `state`, then returns `(state, attempt, last_error, payload)`.
async fn wait_state(
    service: &Service,
    id: Uuid,
    state: &str,
) -> (String, i32, Option<String>, Value) {
    let row = service.wait_outbox_state(id, state, DELIVERY).await;
    (row.state, row.attempt, row.last_error, row.payload)
}

/// `created_at` of an outbox row as `$timestamp` shows it.
async fn created_at_text(service: &Service, id: Uuid) -> String {
    sqlx::query_scalar(
        "SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') \
         FROM outbox WHERE id = $1",
    )
    .bind(id)
    .fetch_one(&service.sql)
    .await
    .expect("read created_at")
}

/// A `transform` block, indented for a source, a route or a destination entry, with `extra`
/// lines (already indented) inside it.
fn block(indent: &str, expression: &str, on_error: &str, extra: &str) -> String {
    // One line in single quotes: YAML doubles a quote inside them.
    let quoted = expression.replace('\n', " ").replace('\'', "''");
    format!(
        "{indent}transform:\n{indent}  expression: '{quoted}'\n{indent}  onError: {on_error}\n{extra}"
    )
}

/// `limits` (one `key: value` line, or nothing) as extra lines of a block indented by `indent`.
fn limit_line(indent: &str, limits: &str) -> String {
    if limits.is_empty() {
        String::new()
    } else {
        format!("{indent}  {limits}\n")
    }
}

/// An HTTP pull source at `/inbox/<name>` with a transform block and `more` source lines.
fn source(name: &str, expression: &str, on_error: &str, limits: &str, more: &str) -> String {
    format!(
        "  {name}:\n    type: http\n    path: /{name}\n    idempotencyKeyPath: $.id\n    eventTypePath: $.type\n\
         \x20   consumption: pull\n{more}{}",
        block("    ", expression, on_error, &limit_line("    ", limits))
    )
}

// ------------------------------------------------------------------------------------------------
// Source stage (HTTP)
// ------------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_source_transform_shapes_the_stored_payload_with_every_source_variable() {
    let expression = r#"{ "wrapped": $, "messageId": $messageId, "topic": $topic, "attempt": $attempt,
        "timestamp": $timestamp, "source": $source, "tenant": $headers."x-tenant",
        "authorization": $exists($headers."authorization"), "key": $idempotencyKey,
        "eventType": $eventType }"#;
    let auth = "    auth:\n      type: bearer\n      token: secret-token\n";
    let sources = format!(
        "sources:\n{}",
        source("shaped", expression, "Fail", "", auth)
    );
    let service = start(&sources).await;
    let body = r#"{"id":"evt-1","type":"order.created","n":1}"#;
    let (status, answer) = post(
        &service,
        "/inbox/shaped",
        &[
            ("Authorization", "Bearer secret-token"),
            ("x-tenant", "acme"),
        ],
        body,
    )
    .await;
    assert_eq!(status, 202, "{answer}");
    let rows = inbox_rows(&service, "shaped").await;
    assert_eq!(rows.len(), 1);
    let (id, key, event_type, payload, state) = &rows[0];
    assert_eq!(answer, json!({"messageId": id.to_string()}));
    // The key and the event type come from the original body.
    assert_eq!(key, "evt-1");
    assert_eq!(event_type.as_deref(), Some("order.created"));
    assert_eq!(state, "pending");
    let timestamp = payload["timestamp"].as_str().expect("$timestamp is text");
    assert!(
        timestamp.len() == 24 && timestamp.ends_with('Z') && timestamp.as_bytes()[10] == b'T',
        "{timestamp}"
    );
    assert_eq!(
        payload,
        &json!({
            "wrapped": {"id": "evt-1", "type": "order.created", "n": 1},
            "messageId": id.to_string(),
            "topic": "order.created",
            "attempt": 0,
            "timestamp": timestamp,
            "source": "shaped",
            "tenant": "acme",
            "authorization": false,
            "key": "evt-1",
            "eventType": "order.created",
        })
    );
    service.stop().await;
}

#[tokio::test]
async fn a_failed_source_transform_answers_422_and_stores_nothing_with_fail_and_dead_and_keeps_the_body_with_skip()
 {
    let refuse = r#"$error("refused by the test")"#;
    let sources = format!(
        "sources:\n{}{}{}",
        source("failing", refuse, "Fail", "", ""),
        source("dying", refuse, "Dead", "", ""),
        source("skipping", refuse, "Skip", "", ""),
    );
    let service = start(&sources).await;
    let body = r#"{"id":"k-1","type":"t"}"#;
    for name in ["failing", "dying"] {
        let (status, answer) = post(&service, &format!("/inbox/{name}"), &[], body).await;
        assert_eq!(status, 422, "{name}: {answer}");
        let error = answer["error"].as_str().expect("an error text");
        assert!(
            error.starts_with("Transform failed: ") && error.contains("refused by the test"),
            "{name}: {error}"
        );
        assert!(inbox_rows(&service, name).await.is_empty(), "{name}");
    }
    assert_eq!(
        service
            .metric(r#"queuebox_inbox_rejections_total{reason="transform_failed"}"#)
            .await,
        2.0
    );
    let (status, answer) = post(&service, "/inbox/skipping", &[], body).await;
    assert_eq!(status, 202, "{answer}");
    let rows = inbox_rows(&service, "skipping").await;
    assert_eq!(rows.len(), 1);
    assert_eq!(
        rows[0].3,
        json!({"id": "k-1", "type": "t"}),
        "the original body"
    );
    service.stop().await;
}

#[tokio::test]
async fn a_runaway_source_transform_is_stopped_by_the_timeout_and_by_the_depth_limit() {
    let sources = format!(
        "sources:\n{}{}",
        source("looping", RUNAWAY_LOOP, "Fail", "timeoutMs: 50", ""),
        source("recursing", RUNAWAY_RECURSION, "Fail", "maxDepth: 20", ""),
    );
    let service = start(&sources).await;
    let body = r#"{"id":"k-1","type":"t"}"#;
    let (status, answer) = post(&service, "/inbox/looping", &[], body).await;
    assert_eq!(status, 422, "{answer}");
    assert_eq!(
        answer,
        json!({"error": "Transform failed: evaluation ran longer than timeoutMs (50 ms)"})
    );
    let (status, answer) = post(&service, "/inbox/recursing", &[], body).await;
    assert_eq!(status, 422, "{answer}");
    let error = answer["error"].as_str().expect("an error text");
    assert!(error.contains("maxDepth 20"), "{error}");
    assert_eq!(
        service
            .metric(r#"queuebox_inbox_rejections_total{reason="transform_failed"}"#)
            .await,
        2.0
    );
    // The process is still serving: a runaway expression costs one request, not the service.
    let (status, _) = post(&service, "/inbox/looping", &[], "not json").await;
    assert_eq!(status, 400);
    service.stop().await;
}

// ------------------------------------------------------------------------------------------------
// Route and destination stages
// ------------------------------------------------------------------------------------------------

/// Destinations and routes over one receiver; each topic prefix exercises one case.
fn delivery_sections(receiver: &str) -> String {
    let wrap_route = r#"{ "route": $, "attempt": $attempt }"#;
    let envelope = r#"{ "id": $messageId, "type": $topic, "timestamp": $timestamp, "data": $,
        "unbound": [$exists($source), $exists($headers), $exists($idempotencyKey), $exists($eventType)] }"#;
    let refuse = r#"$error("refused by the test")"#;
    let destination = |name: &str, transform: Option<(&str, &str)>| {
        let mut entry = format!(
            "  {name}:\n    type: http\n    baseUrl: {receiver}\n    path: /{name}\n    timeoutMs: 2000\n"
        );
        if let Some((expression, on_error)) = transform {
            entry.push_str(&block("    ", expression, on_error, ""));
        }
        entry
    };
    let route = |pattern: &str, to: &str, transform: (&str, &str, &str)| {
        let (expression, on_error, limits) = transform;
        format!(
            "  - topicPattern: \"{pattern}\"\n    destination: {to}\n{}",
            block("    ", expression, on_error, &limit_line("    ", limits))
        )
    };
    format!(
        "destinations:\n{}{}{}{}{}routes:\n{}{}{}{}{}{}{}{}",
        destination("enveloped", Some((envelope, "Fail"))),
        destination("plain", None),
        destination("killing", Some((refuse, "Dead"))),
        destination("skipping", Some((refuse, "Skip"))),
        destination("refusing", Some((refuse, "Fail"))),
        route("chain.*", "enveloped", (wrap_route, "Fail", "")),
        route("failing.*", "plain", (refuse, "Fail", "")),
        route("deaddest.*", "killing", (wrap_route, "Fail", "")),
        route("skiproute.*", "enveloped", (refuse, "Skip", "")),
        route("skipdest.*", "skipping", (wrap_route, "Fail", "")),
        route("slow.*", "plain", (RUNAWAY_LOOP, "Fail", "timeoutMs: 50")),
        route(
            "deep.*",
            "plain",
            (RUNAWAY_RECURSION, "Dead", "maxDepth: 20")
        ),
        route("faildest.*", "refusing", (wrap_route, "Fail", "")),
    )
}

fn carrying(requests: &[Recorded], id: Uuid) -> Vec<&Recorded> {
    let id = id.to_string();
    requests
        .iter()
        .filter(|r| r.header("x-message-id") == Some(id.as_str()))
        .collect()
}

#[tokio::test]
async fn the_route_output_feeds_the_destination_and_a_retry_transforms_the_stored_payload_again() {
    // The first delivery fails at the receiver, the second succeeds.
    let receiver = Receiver::start(Policy::sequence(&[503], 200)).await;
    let service = start(&delivery_sections(&receiver.url())).await;
    let original = json!({"orderId": "o-1"});
    let id = insert(&service, "chain.created", original.clone(), 5).await;
    let (_, attempt, _, stored) = wait_state(&service, id, "sent").await;
    assert_eq!(attempt, 1);
    assert_eq!(stored, original, "the outbox row keeps its payload");

    let requests = receiver.requests();
    let deliveries = carrying(&requests, id);
    assert_eq!(deliveries.len(), 2, "{requests:#?}");
    let timestamp = created_at_text(&service, id).await;
    for (attempt, delivery) in deliveries.iter().enumerate() {
        assert_eq!(delivery.path, "/enveloped");
        assert_eq!(
            delivery.json(),
            json!({
                "id": id.to_string(),
                "type": "chain.created",
                "timestamp": timestamp,
                "data": {"route": {"orderId": "o-1"}, "attempt": attempt},
                "unbound": [false, false, false, false],
            }),
            "delivery {attempt}: the route stage read the stored payload, not the last output"
        );
    }
    service.stop().await;
}

#[tokio::test]
async fn fail_retries_with_an_attempt_spent_dead_is_dead_at_once_and_skip_passes_the_input_on() {
    let receiver = Receiver::start(Policy::status(200)).await;
    let service = start(&delivery_sections(&receiver.url())).await;
    let failing = insert(&service, "failing.x", json!({"n": 1}), 2).await;
    let dead = insert(&service, "deaddest.x", json!({"n": 2}), 5).await;
    let skip_route = insert(&service, "skiproute.x", json!({"n": 3}), 5).await;
    let skip_destination = insert(&service, "skipdest.x", json!({"n": 4}), 5).await;
    let failing_destination = insert(&service, "faildest.x", json!({"n": 5}), 1).await;

    // Fail: each delivery fails and spends an attempt until the row's ceiling (2) sends it dead:
    // the first delivery and two retries, three transform failures.
    let (_, attempt, error, _) = wait_state(&service, failing, "dead").await;
    assert_eq!(attempt, 2, "every failure was counted on the retry path");
    let error = error.expect("last_error");
    assert!(
        error.starts_with("routes[1].transform failed: ") && error.contains("refused by the test"),
        "{error}"
    );
    // Dead: dead on the first attempt, without a retry.
    let (_, attempt, error, _) = wait_state(&service, dead, "dead").await;
    assert_eq!(attempt, 0);
    let error = error.expect("last_error");
    assert!(
        error.starts_with("destinations.killing.transform failed: "),
        "{error}"
    );
    // Fail at the destination stage: the same retry path (ceiling 1: one retry, then dead).
    let (_, attempt, error, _) = wait_state(&service, failing_destination, "dead").await;
    assert_eq!(attempt, 1);
    let error = error.expect("last_error");
    assert!(
        error.starts_with("destinations.refusing.transform failed: "),
        "{error}"
    );
    wait_state(&service, skip_route, "sent").await;
    wait_state(&service, skip_destination, "sent").await;

    let requests = receiver.requests();
    assert!(carrying(&requests, failing).is_empty(), "{requests:#?}");
    assert!(carrying(&requests, dead).is_empty(), "{requests:#?}");
    assert!(
        carrying(&requests, failing_destination).is_empty(),
        "{requests:#?}"
    );
    // A skipped route stage passes the stored payload to the destination stage.
    let body = carrying(&requests, skip_route)[0].json();
    assert_eq!(body["data"], json!({"n": 3}), "{body}");
    // A skipped destination stage sends the route output.
    assert_eq!(
        carrying(&requests, skip_destination)[0].json(),
        json!({"route": {"n": 4}, "attempt": 0})
    );
    assert_eq!(
        service
            .metric(r#"queuebox_transform_failures_total{strategy="Fail"}"#)
            .await,
        5.0,
        "three failures of the route stage, two of the destination stage"
    );
    assert_eq!(
        service
            .metric(r#"queuebox_transform_failures_total{strategy="Dead"}"#)
            .await,
        1.0
    );
    assert_eq!(
        service
            .metric(r#"queuebox_transform_failures_total{strategy="Skip"}"#)
            .await,
        2.0
    );
    service.stop().await;
}

#[tokio::test]
async fn a_runaway_route_transform_is_stopped_by_the_timeout_and_by_the_depth_limit() {
    let receiver = Receiver::start(Policy::status(200)).await;
    let service = start(&delivery_sections(&receiver.url())).await;
    let slow = insert(&service, "slow.x", json!({}), 1).await;
    let deep = insert(&service, "deep.x", json!({}), 5).await;
    let (_, attempt, error, _) = wait_state(&service, slow, "dead").await;
    assert_eq!(attempt, 1, "the timeout failed an attempt (Fail)");
    assert_eq!(
        error.as_deref(),
        Some("routes[5].transform failed: evaluation ran longer than timeoutMs (50 ms)")
    );
    let (_, attempt, error, _) = wait_state(&service, deep, "dead").await;
    assert_eq!(
        attempt, 0,
        "the depth limit sent the row dead at once (Dead)"
    );
    let error = error.expect("last_error");
    assert!(
        error.starts_with("routes[6].transform failed: ") && error.contains("maxDepth 20"),
        "{error}"
    );
    assert_eq!(receiver.count(), 0);
    service.stop().await;
}

// ------------------------------------------------------------------------------------------------
// Start
// ------------------------------------------------------------------------------------------------

#[tokio::test]
async fn an_expression_that_does_not_compile_stops_the_start_naming_its_key_path() {
    let db = TestDatabase::create().await;
    let yaml = format!(
        "server:\n  httpPort: {port}\n\
         database:\n  url: {url}\n  username: {user}\n  password: {password}\n  startupTimeoutMs: 10000\n\
         sources:\n{source}\
         destinations:\n  hook:\n    type: http\n    baseUrl: http://127.0.0.1:9\n{destination}\
         routes:\n  - topicPattern: \"a.*\"\n    destination: hook\n\
         \x20 - topicPattern: \"b.*\"\n    destination: hook\n{route}",
        port = free_port(),
        url = db.jdbc_url(),
        user = db.user,
        password = db.password,
        source = source("shaped", "{ \"a\": ", "Fail", "", ""),
        destination = block("    ", "$", "Skip", ""),
        route = block("    ", "[1, 2", "Dead", ""),
    );
    let (status, _stdout, stderr) = Launch::with_config(&yaml)
        .run(&[], Duration::from_secs(30))
        .await;
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "sources.shaped.transform.expression: the JSONata expression does not compile"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("routes[1].transform.expression: the JSONata expression does not compile"),
        "{stderr}"
    );
    assert!(!stderr.contains("destinations.hook"), "{stderr}");
    let (status, _stdout, stderr) = Launch::with_config(&yaml)
        .run(&["check-config"], Duration::from_secs(30))
        .await;
    assert!(!status.success(), "check-config too: {stderr}");
    db.drop_database().await;
}
