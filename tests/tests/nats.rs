//! NATS JetStream end to end: the real binary delivers outbox rows from a real PostgreSQL to a real
//! nats-server (`QB_TEST_NATS_URL`, started by `scripts/services.sh`), and stores messages of a
//! JetStream stream in the inbox. Each test uses streams of its own; the restart test runs a
//! nats-server of its own, so no other test sees it go away.

#![allow(clippy::unwrap_used)]

use async_nats::HeaderMap;
use async_nats::jetstream::context::ConsumerInfoErrorKind;
use async_nats::jetstream::{self, stream};
use futures::StreamExt;
use queuebox_tests::broker_forms::{UNKEYED, check_unkeyed_rows, digest_key};
use queuebox_tests::inbox::wait_each_stored_once;
use queuebox_tests::service::{OutboxRow, Service};
use queuebox_tests::source_rules::{self, Message, RulesBroker, Source};
use queuebox_tests::{free_port, sample, wait_until};
use std::collections::{HashMap, HashSet};
use std::time::Duration;
use uuid::Uuid;

const WAIT: Duration = Duration::from_secs(30);

fn nats_url() -> String {
    std::env::var("QB_TEST_NATS_URL").unwrap_or_else(|_| {
        panic!("QB_TEST_NATS_URL is not set: start the services first with `eval \"$(bash scripts/services.sh)\"`")
    })
}

/// A name no other test uses, valid as a stream name and as a subject token.
fn unique(prefix: &str) -> String {
    format!("qb_e2e_{prefix}_{}", Uuid::new_v4().simple())
}

/// A test's own JetStream client.
struct Js {
    client: async_nats::Client,
    js: jetstream::Context,
}

impl Js {
    async fn connect_to(url: &str) -> Self {
        let client = async_nats::connect(url).await.expect("connect to NATS");
        let js = jetstream::new(client.clone());
        Self { client, js }
    }

    async fn connect() -> Self {
        Self::connect_to(&nats_url()).await
    }

    /// A file-stored stream `name` over `<name>.>`.
    async fn stream(&self, name: &str) {
        self.js
            .create_stream(stream::Config {
                name: name.to_owned(),
                subjects: vec![format!("{name}.>")],
                ..stream::Config::default()
            })
            .await
            .expect("create the stream");
    }

    /// Every message the stream holds, in stream order, read through an ephemeral consumer (so
    /// that a header with several values keeps them all, as on the wire).
    async fn messages(&self, name: &str) -> Vec<async_nats::Message> {
        let mut stream = self.js.get_stream(name).await.expect("the stream");
        let held = stream.info().await.expect("stream info").state.messages;
        let consumer = stream
            .create_consumer(jetstream::consumer::pull::Config::default())
            .await
            .expect("an ephemeral consumer");
        let mut out = Vec::new();
        while (out.len() as u64) < held {
            let mut batch = consumer
                .fetch()
                .max_messages(500)
                .expires(Duration::from_secs(2))
                .messages()
                .await
                .expect("fetch");
            let before = out.len();
            while let Some(message) = batch.next().await {
                let message = message.expect("a message");
                message.ack().await.expect("ack");
                out.push(message.message);
            }
            assert!(
                out.len() > before,
                "the stream holds {held} messages, read {}",
                out.len()
            );
        }
        out
    }

    async fn publish(&self, subject: String, headers: HeaderMap, body: &[u8]) {
        self.js
            .publish_with_headers(subject, headers, body.to_vec().into())
            .await
            .expect("publish")
            .await
            .expect("JetStream ack");
    }

    /// The number of messages the durable consumer holds delivered but unacknowledged, and the
    /// number still to deliver; `None` while QueueBox has not created the consumer yet (every
    /// caller waits in a loop that may start before the source's first connect).
    async fn consumer_backlog(&self, stream: &str, durable: &str) -> Option<(usize, u64)> {
        let stream = self.js.get_stream(stream).await.expect("the stream");
        match stream.consumer_info(durable).await {
            Ok(info) => Some((info.num_ack_pending, info.num_pending)),
            Err(error) if error.kind() == ConsumerInfoErrorKind::NotFound => None,
            Err(error) => panic!("consumer info of {durable}: {error}"),
        }
    }

    async fn delete(&self, name: &str) {
        let _ = self.js.delete_stream(name).await;
    }
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(*name, *value);
    }
    map
}

fn header(message: &async_nats::Message, name: &str) -> Vec<String> {
    message
        .headers
        .as_ref()
        .map(|h| h.get_all(name).map(|v| v.as_str().to_owned()).collect())
        .unwrap_or_default()
}

/// Inserts an outbox row with the headers every test of this file gives it.
async fn insert(
    service: &Service,
    topic: &str,
    key: Option<&str>,
    payload: &str,
    attempts: i32,
) -> Uuid {
    service
        .insert(OutboxRow {
            key,
            headers: serde_json::json!({"x-tenant": "acme", "x-topic": "from-row"}),
            max_attempts: attempts,
            ..OutboxRow::new(topic, payload)
        })
        .await
}

fn destination(servers: &str, subject: &str, extra: &str) -> String {
    format!(
        "destinations:\n  js:\n    type: nats\n    servers: {servers}\n    subject: \"{subject}\"\n    timeoutMs: 3000\n{extra}\
         routes:\n  - topicPattern: \"order.*\"\n    destination: js\n    routingKeyTemplate: \"{{{{ payload.region }}}}.ignored\"\n\
         \x20 - topicPattern: \"audit.**\"\n    destination: js\n"
    )
}

#[tokio::test]
async fn outbox_rows_reach_the_stream_acknowledged_in_key_order_with_their_headers() {
    let js = Js::connect().await;
    let name = unique("dest");
    js.stream(&name).await;
    let service = Service::start(&destination(
        &nats_url(),
        &format!("{name}.{{{{ topic }}}}"),
        "    headers:\n      x-static: yes\n      x-tenant: overridden-by-row\n",
    ))
    .await;
    let mut ids = HashSet::new();
    for i in 0..30 {
        let key = format!("cust-{}", i % 3);
        let payload = format!(r#"{{"n":{i},"region":"eu"}}"#);
        ids.insert(insert(&service, "order.created", Some(&key), &payload, 5).await);
    }
    let audit = insert(&service, "audit.login", None, r#"{"who":"x"}"#, 5).await;
    wait_until("every row sent", WAIT, || async {
        let sent = service
            .count("SELECT count(*) FROM outbox WHERE state = 'sent'")
            .await;
        (sent == 31).then_some(())
    })
    .await;
    let messages = js.messages(&name).await;
    assert_eq!(messages.len(), 31, "one stream message per row");
    let mut last: HashMap<String, i64> = HashMap::new();
    for message in &messages {
        let id = header(message, "x-message-id").pop().expect("x-message-id");
        assert_eq!(
            header(message, "Nats-Msg-Id"),
            std::slice::from_ref(&id),
            "the dedup id is the row id"
        );
        assert_eq!(header(message, "x-attempt"), ["0"]);
        assert_eq!(header(message, "x-static"), ["yes"]);
        assert_eq!(header(message, "x-tenant"), ["acme"], "a row header wins");
        if id == audit.to_string() {
            assert_eq!(message.subject.as_str(), format!("{name}.audit.login"));
            assert!(
                header(message, "x-message-key").is_empty(),
                "no key, no header"
            );
            continue;
        }
        // The route's routingKeyTemplate does not change the subject.
        assert_eq!(message.subject.as_str(), format!("{name}.order.created"));
        // A row header named like a standard one travels as a second value (docs/reference/headers.md).
        assert_eq!(header(message, "x-topic"), ["order.created", "from-row"]);
        let body: serde_json::Value = serde_json::from_slice(&message.payload).expect("JSON");
        let n = body["n"].as_i64().expect("n");
        let key = format!("cust-{}", n % 3);
        assert_eq!(header(message, "x-message-key"), std::slice::from_ref(&key));
        if let Some(previous) = last.insert(key.clone(), n) {
            assert!(previous < n, "{key}: {n} after {previous}");
        }
        assert!(ids.contains(&id.parse::<Uuid>().expect("uuid")));
    }
    let metrics = service.metrics().await;
    assert_eq!(
        sample(
            &metrics,
            "queuebox_outbox_destination_messages_total{destination=\"js\",outcome=\"success\"}"
        ),
        31.0,
        "{metrics}"
    );
    js.delete(&name).await;
    service.stop().await;
}

#[tokio::test]
async fn a_subject_no_stream_holds_retries_then_goes_dead_naming_it() {
    let subject = format!("{}.nowhere", unique("nostream"));
    let service = Service::start(&destination(&nats_url(), &subject, "")).await;
    let id = insert(&service, "audit.nobody", None, r#"{"a":1}"#, 3).await;
    let (attempt, last_error): (i32, Option<String>) =
        wait_until("the row to go dead", WAIT, || async {
            let row: (String, i32, Option<String>) =
                sqlx::query_as("SELECT state, attempt, last_error FROM outbox WHERE id = $1")
                    .bind(id)
                    .fetch_one(&service.sql)
                    .await
                    .expect("row");
            (row.0 == "dead").then_some((row.1, row.2))
        })
        .await;
    assert_eq!(attempt, 3, "every attempt was spent");
    let last_error = last_error.expect("a reason");
    assert!(last_error.contains(&subject), "{last_error}");
    assert!(last_error.contains("no JetStream stream"), "{last_error}");
    let metrics = service.metrics().await;
    assert!(
        sample(
            &metrics,
            "queuebox_outbox_publish_failures_total{destination=\"js\",destination_type=\"nats\",kind=\"rejected\"}"
        ) >= 3.0,
        "{metrics}"
    );
    service.stop().await;
}

/// A nats-server of the test's own on a free port, with its own state directory, so that a
/// restart touches no other test.
struct OwnServer {
    port: u16,
    dir: tempfile::TempDir,
    child: Option<std::process::Child>,
}

impl OwnServer {
    async fn start() -> Self {
        let mut server = Self {
            port: free_port(),
            dir: tempfile::tempdir().expect("state directory"),
            child: None,
        };
        server.launch().await;
        server
    }

    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    async fn launch(&mut self) {
        let child = std::process::Command::new("nats-server")
            .args([
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-js",
                "-sd",
            ])
            .arg(self.dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("nats-server is installed (scripts/services.sh)");
        self.child = Some(child);
        let url = self.url();
        wait_until("the own nats-server to answer", WAIT, || async {
            let client = async_nats::connect(&url).await.ok()?;
            client.flush().await.ok()
        })
        .await;
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        self.kill();
    }
}

#[tokio::test]
async fn a_nats_restart_while_publishing_loses_nothing_and_the_window_drops_duplicates() {
    let mut server = OwnServer::start().await;
    let name = unique("restart");
    Js::connect_to(&server.url()).await.stream(&name).await;
    let service = Service::start(&destination(
        &server.url(),
        &format!("{name}.{{{{ topic }}}}"),
        "",
    ))
    .await;
    let total: i32 = 600;
    let producer = service.produce(total, 50, |i| format!(r#"{{"n":{i}}}"#), true);
    wait_until("some deliveries", WAIT, || async {
        let sent = service
            .count("SELECT count(*) FROM outbox WHERE state = 'sent'")
            .await;
        (sent > 0).then_some(())
    })
    .await;
    server.kill();
    wait_until("a publish to fail while the server is down", WAIT, || async {
        let metrics = service.metrics().await;
        let failures: f64 = ["unreachable", "timeout"]
            .iter()
            .map(|kind| {
                sample(
                    &metrics,
                    &format!("queuebox_outbox_publish_failures_total{{destination=\"js\",destination_type=\"nats\",kind=\"{kind}\"}}"),
                )
            })
            .sum();
        (failures > 0.0).then_some(())
    })
    .await;
    server.launch().await;
    producer.await.expect("producer");
    wait_until("every row sent", Duration::from_secs(90), || async {
        let sent = service
            .count("SELECT count(*) FROM outbox WHERE state = 'sent'")
            .await;
        (sent == i64::from(total)).then_some(())
    })
    .await;
    let js = Js::connect_to(&server.url()).await;
    let messages = js.messages(&name).await;
    let distinct: HashSet<String> = messages
        .iter()
        .map(|m| header(m, "x-message-id").pop().expect("id"))
        .collect();
    assert_eq!(distinct.len(), total as usize, "every row arrived");
    assert_eq!(
        messages.len(),
        total as usize,
        "no row twice: the duplicate window dropped every retried copy"
    );
    service.stop().await;
}

fn source(stream: &str, servers: &str, extra: &str) -> String {
    format!(
        "inbox:\n  relay:\n    enabled: false\n\
         sources:\n  orders-stream:\n    type: nats\n    servers: {servers}\n    stream: {stream}\n\
         \x20   durable: queuebox-orders\n    filterSubject: \"{stream}.orders.>\"\n\
         \x20   idempotencyKeyPath: $.messageId\n    eventTypePath: $.type\n    aggregateIdPath: $.orderId\n\
         \x20   batchSize: 20\n{extra}"
    )
}

/// A message to publish: body and headers.
type Case<'a> = (&'a [u8], &'a [(&'a str, &'a str)]);

/// An inbox row read back: key, event type, aggregate id, state, last error, headers.
type StoredRow = (
    String,
    Option<String>,
    Option<String>,
    String,
    Option<String>,
    serde_json::Value,
);

#[tokio::test]
async fn stream_messages_are_stored_once_each_and_bad_ones_kept_dead() {
    let js = Js::connect().await;
    let name = unique("src");
    js.stream(&name).await;
    let service = Service::start(&source(&name, &nats_url(), "")).await;
    wait_until("the source to consume", WAIT, || async {
        let (status, body) = service.ready().await;
        (status == 200 && body.contains("nats.orders-stream")).then_some(())
    })
    .await;
    let subject = format!("{name}.orders.created");
    let cases: [Case<'_>; 7] = [
        (
            br#"{"messageId":"m-1","type":"order.created","orderId":"o-1"}"#,
            &[],
        ),
        // A repeat of the same key: stored once.
        (
            br#"{"messageId":"m-1","type":"order.created","orderId":"o-1"}"#,
            &[],
        ),
        // The header comes first, then the path, then Nats-Msg-Id.
        (
            br#"{"messageId":"ignored"}"#,
            &[
                ("x-idempotency-key", "hdr-1"),
                ("x-event-type", "from.header"),
                ("Nats-Msg-Id", "n-0"),
            ],
        ),
        (
            br#"{"other":1}"#,
            &[("Nats-Msg-Id", "nats-2"), ("x-tenant", "acme")],
        ),
        // No key anywhere: the SHA-256 of the body.
        (br#"{"other":2}"#, &[("x-aggregate-id", "agg-h")]),
        // Not JSON: kept as a dead row, acknowledged.
        (b"<order id='7'/>", &[("Nats-Msg-Id", "xml-1")]),
        // Outside the filter subject: never read.
        (br#"{"messageId":"elsewhere"}"#, &[]),
    ];
    for (i, (body, pairs)) in cases.iter().enumerate() {
        let subject = if i == 6 {
            format!("{name}.other")
        } else {
            subject.clone()
        };
        js.publish(subject, headers(pairs), body).await;
    }
    wait_until("five rows, every message acknowledged", WAIT, || async {
        let rows = service.count("SELECT count(*) FROM inbox").await;
        let backlog = js.consumer_backlog(&name, "queuebox-orders").await;
        (rows == 5 && backlog == Some((0, 0))).then_some(())
    })
    .await;
    let rows: Vec<StoredRow> = sqlx::query_as(
        "SELECT idempotency_key, event_type, aggregate_id, state, last_error, headers FROM inbox \
         WHERE source = 'orders-stream'",
    )
    .fetch_all(&service.sql)
    .await
    .expect("rows");
    let row = |key: &str| {
        rows.iter()
            .find(|r| r.0 == key)
            .unwrap_or_else(|| panic!("no row {key}: {rows:?}"))
    };
    assert_eq!(row("m-1").1.as_deref(), Some("order.created"));
    assert_eq!(row("m-1").2.as_deref(), Some("o-1"));
    assert_eq!(row("hdr-1").1.as_deref(), Some("from.header"));
    assert_eq!(row("nats-2").3, "pending");
    assert_eq!(row("nats-2").5["x-tenant"], "acme", "headers are stored");
    let digest = rows
        .iter()
        .find(|r| r.2.as_deref() == Some("agg-h"))
        .expect("the row keyed by its digest");
    assert_eq!(
        digest.0,
        digest_key(br#"{"other":2}"#),
        "the SHA-256 of the body: {rows:?}"
    );
    let xml = row("xml-1");
    assert_eq!(xml.3, "dead", "not JSON: a dead row under its Nats-Msg-Id");
    assert!(
        xml.4
            .as_deref()
            .is_some_and(|e| e.starts_with("Invalid JSON")),
        "{rows:?}"
    );
    assert!(
        rows.iter().all(|r| r.0 != "elsewhere"),
        "the filter subject holds"
    );
    js.delete(&name).await;
    service.stop().await;
}

#[tokio::test]
async fn unkeyed_messages_get_digest_keys_and_raw_payloads() {
    let js = Js::connect().await;
    let name = unique("forms");
    js.stream(&name).await;
    let subject = format!("{name}.orders.created");
    for (i, body) in UNKEYED.iter().enumerate() {
        let pairs: &[(&str, &str)] = if i == 0 { &[("x-text", "acme")] } else { &[] };
        js.publish(subject.clone(), headers(pairs), body).await;
    }
    let service = Service::start(&source(&name, &nats_url(), "")).await;
    let stored = check_unkeyed_rows(&service.sql, "orders-stream", WAIT).await;
    assert_eq!(stored["x-text"], "acme", "{stored}");
    js.delete(&name).await;
    service.stop().await;
}

#[tokio::test]
async fn of_two_messages_with_one_key_the_first_in_the_stream_is_kept() {
    const PAIRS: usize = 300;
    let js = Js::connect().await;
    let name = unique("first");
    js.stream(&name).await;
    let subject = format!("{name}.orders.created");
    // Published before the source starts, so its pulls bring whole batches holding both copies.
    for i in 0..PAIRS {
        for copy in ["first", "second"] {
            let body = format!(r#"{{"messageId":"k-{i}","copy":"{copy}"}}"#);
            js.publish(subject.clone(), headers(&[]), body.as_bytes())
                .await;
        }
    }
    let service = Service::start(&source(&name, &nats_url(), "")).await;
    wait_until("every message handled", WAIT, || async {
        let rows = service.count("SELECT count(*) FROM inbox").await;
        let backlog = js.consumer_backlog(&name, "queuebox-orders").await;
        (rows == PAIRS as i64 && backlog == Some((0, 0))).then_some(())
    })
    .await;
    let later: Vec<String> = sqlx::query_scalar(
        "SELECT idempotency_key FROM inbox WHERE payload ->> 'copy' <> 'first' ORDER BY 1",
    )
    .fetch_all(&service.sql)
    .await
    .expect("rows");
    assert!(
        later.is_empty(),
        "{} of {PAIRS} keys kept the later message: {later:?}",
        later.len()
    );
    js.delete(&name).await;
    service.stop().await;
}

#[tokio::test]
async fn a_missing_stream_shows_in_health_naming_it_until_it_exists() {
    let js = Js::connect().await;
    let name = unique("missing");
    let service = Service::start(&source(&name, &nats_url(), "")).await;
    let body = wait_until("the component down naming the stream", WAIT, || async {
        let (status, body) = service.ready().await;
        (status == 503 && body.contains(&name)).then_some(body)
    })
    .await;
    assert!(body.contains("nats.orders-stream"), "{body}");
    assert!(body.contains("never creates"), "{body}");
    js.stream(&name).await;
    js.publish(
        format!("{name}.orders.late"),
        HeaderMap::new(),
        br#"{"messageId":"late"}"#,
    )
    .await;
    wait_until("the source to recover and store", WAIT, || async {
        let rows = service.count("SELECT count(*) FROM inbox").await;
        (rows == 1).then_some(())
    })
    .await;
    assert_eq!(service.ready().await.0, 200);
    js.delete(&name).await;
    service.stop().await;
}

#[tokio::test]
async fn kill_9_between_the_commit_and_the_ack_redelivers_after_ack_wait_and_stores_once() {
    let js = Js::connect().await;
    let name = unique("kill");
    js.stream(&name).await;
    let total = 600;
    for i in 0..total {
        js.publish(
            format!("{name}.orders.created"),
            HeaderMap::new(),
            format!(r#"{{"messageId":"m-{i}"}}"#).as_bytes(),
        )
        .await;
    }
    let mut service = Service::start(&source(&name, &nats_url(), "    ackWaitMs: 2000\n")).await;
    service
        .kill9_while_storing(50, i64::from(total), WAIT)
        .await;
    service.restart().await;
    wait_each_stored_once(
        &service.sql,
        "message",
        i64::from(total),
        Duration::from_secs(60),
    )
    .await;
    wait_until("every message acknowledged", WAIT, || async {
        (js.consumer_backlog(&name, "queuebox-orders").await == Some((0, 0))).then_some(())
    })
    .await;
    js.delete(&name).await;
    service.stop().await;
}

/// The source-rules scenario on JetStream: each source reads a stream of its own through the
/// durable consumer `qb`.
impl RulesBroker for Js {
    async fn create(&self, name: &str) {
        self.stream(name).await;
    }

    fn source(&self, stream: &str) -> String {
        format!(
            "    type: nats\n    servers: {}\n    stream: {stream}\n    durable: qb\n",
            nats_url()
        )
    }

    async fn publish(&self, stream: &str, _to: Source, message: &Message) {
        Js::publish(
            self,
            format!("{stream}.in"),
            headers(&message.headers()),
            &message.body("id", true),
        )
        .await;
    }

    async fn acknowledged(&self, stream: &str) -> bool {
        self.consumer_backlog(stream, "qb").await == Some((0, 0))
    }

    async fn delete(&self, stream: &str) {
        Js::delete(self, stream).await;
    }
}

#[tokio::test]
async fn the_sources_rules_apply_to_stream_messages_filter_transform_pull_and_relay() {
    let js = Js::connect().await;
    source_rules::run(&js, WAIT).await;
    drop(js.client);
}

#[tokio::test]
async fn a_nats_restart_under_a_consuming_source_loses_nothing_and_stores_each_once() {
    let mut server = OwnServer::start().await;
    let name = unique("srcrestart");
    let js = Js::connect_to(&server.url()).await;
    js.stream(&name).await;
    let service = Service::start(&source(&name, &server.url(), "    ackWaitMs: 2000\n")).await;
    wait_until("the source to consume", WAIT, || async {
        (service.ready().await.0 == 200).then_some(())
    })
    .await;
    let total = 300;
    for i in 0..total / 2 {
        js.publish(
            format!("{name}.orders.created"),
            HeaderMap::new(),
            format!(r#"{{"messageId":"m-{i}"}}"#).as_bytes(),
        )
        .await;
    }
    server.kill();
    wait_until(
        "the component down while the server is away",
        WAIT,
        || async { (service.ready().await.0 == 503).then_some(()) },
    )
    .await;
    server.launch().await;
    let js = Js::connect_to(&server.url()).await;
    for i in total / 2..total {
        js.publish(
            format!("{name}.orders.created"),
            HeaderMap::new(),
            format!(r#"{{"messageId":"m-{i}"}}"#).as_bytes(),
        )
        .await;
    }
    wait_each_stored_once(
        &service.sql,
        "message",
        i64::from(total),
        Duration::from_secs(60),
    )
    .await;
    wait_until("every message acknowledged", WAIT, || async {
        (js.consumer_backlog(&name, "queuebox-orders").await == Some((0, 0))).then_some(())
    })
    .await;
    assert_eq!(service.ready().await.0, 200, "the component is up again");
    service.stop().await;
}
