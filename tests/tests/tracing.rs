//! Trace context and OTLP export end to end: the real binary, PostgreSQL, an HTTP receiver and a
//! real OpenTelemetry Collector (`QB_TEST_OTELCOL`, built by scripts/services.sh) writing what it
//! receives to a file this test reads. Each test starts its own collector on ports of its own.

use queuebox_tests::database::TestDatabase;
use queuebox_tests::process::{Launch, QueueBox};
use queuebox_tests::receiver::{Policy, Receiver};
use queuebox_tests::{free_port, sample, scrape, wait_until};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tempfile::TempDir;

const START: Duration = Duration::from_secs(30);
const DELIVERY: Duration = Duration::from_secs(30);
/// The example `traceparent` of the W3C recommendation.
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

/// An OpenTelemetry Collector with the OTLP receiver (gRPC and HTTP) and the file exporter.
struct Collector {
    dir: TempDir,
    grpc: u16,
    http: u16,
    child: Option<std::process::Child>,
}

impl Collector {
    fn start() -> Self {
        let mut collector = Self {
            dir: tempfile::tempdir().expect("temporary directory"),
            grpc: free_port(),
            http: free_port(),
            child: None,
        };
        collector.resume();
        collector
    }

    fn file(&self) -> PathBuf {
        self.dir.path().join("traces.jsonl")
    }

    /// Starts the process (again) on the same ports and file.
    fn resume(&mut self) {
        let binary = std::env::var("QB_TEST_OTELCOL")
            .expect("QB_TEST_OTELCOL: run `eval \"$(bash scripts/services.sh)\"` first");
        let config = self.dir.path().join("config.yaml");
        std::fs::write(
            &config,
            format!(
                "receivers:\n  otlp:\n    protocols:\n      grpc:\n        endpoint: 127.0.0.1:{grpc}\n\
                 \x20     http:\n        endpoint: 127.0.0.1:{http}\n\
                 exporters:\n  file:\n    path: {file}\n    flush_interval: 100ms\n\
                 service:\n  telemetry:\n    metrics:\n      level: none\n\
                 \x20 pipelines:\n    traces:\n      receivers: [otlp]\n      exporters: [file]\n",
                grpc = self.grpc,
                http = self.http,
                file = self.file().display(),
            ),
        )
        .expect("write the collector configuration");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("collector.log"))
            .expect("collector log");
        let child = std::process::Command::new(binary)
            .arg("--config")
            .arg(&config)
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log)
            .spawn()
            .expect("start the OpenTelemetry Collector");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", self.http)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the collector did not open its port"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Every span in the file so far.
    fn spans(&self) -> Vec<Span> {
        spans_in(&self.file())
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The fields of an exported span this test reads.
#[derive(Debug, Clone)]
struct Span {
    trace_id: String,
    span_id: String,
    parent_span_id: String,
    name: String,
    start: u128,
    links: usize,
    attributes: Value,
}

impl Span {
    fn attribute(&self, key: &str) -> Option<String> {
        self.attributes.as_array()?.iter().find_map(|kv| {
            (kv["key"] == key).then(|| {
                let value = &kv["value"];
                value["stringValue"]
                    .as_str()
                    .map(str::to_owned)
                    .or_else(|| value["intValue"].as_str().map(str::to_owned))
                    .unwrap_or_else(|| value.to_string())
            })
        })
    }
}

fn spans_in(file: &Path) -> Vec<Span> {
    let Ok(text) = std::fs::read_to_string(file) else {
        return Vec::new();
    };
    let mut spans = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(doc) = serde_json::from_str::<Value>(line) else {
            continue; // a line still being written
        };
        for resource in doc["resourceSpans"].as_array().into_iter().flatten() {
            for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
                for span in scope["spans"].as_array().into_iter().flatten() {
                    let text = |key: &str| span[key].as_str().unwrap_or_default().to_owned();
                    spans.push(Span {
                        trace_id: text("traceId"),
                        span_id: text("spanId"),
                        parent_span_id: text("parentSpanId"),
                        name: text("name"),
                        start: text("startTimeUnixNano").parse().unwrap_or(0),
                        links: span["links"].as_array().map_or(0, Vec::len),
                        attributes: span["attributes"].clone(),
                    });
                }
            }
        }
    }
    spans
}

/// One HTTP push source `orders` (topic `orders.<type>`) relayed to an HTTP destination `hook`.
fn config(db: &TestDatabase, port: u16, receiver: &str, tracing: &str) -> String {
    format!(
        "server:\n  httpPort: {port}\n\
         database:\n  url: {url}\n  username: {user}\n  password: {password}\n  startupTimeoutMs: 10000\n\
         outbox:\n  pollIntervalMs: 50\n\
         inbox:\n  relay:\n    pollIntervalMs: 20\n\
         sources:\n  orders:\n    type: http\n    path: /orders\n    idempotencyKeyPath: $.id\n\
         \x20   eventTypePath: $.type\n    topic: \"{{{{ source }}}}.{{{{ eventType }}}}\"\n\
         \x20 secured:\n    type: http\n    path: /secured\n    idempotencyKeyPath: $.id\n\
         \x20   topic: secured\n    auth:\n      type: api-key\n      key: right-key\n\
         destinations:\n  hook:\n    type: http\n    baseUrl: {receiver}\n    path: /events\n    timeoutMs: 5000\n\
         routes:\n  - topicPattern: \"orders.**\"\n    destination: hook\n\
         telemetry:\n  tracing:\n{tracing}",
        url = db.jdbc_url(),
        user = db.user,
        password = db.password,
    )
}

async fn start(yaml: &str, port: u16, env: &[(&str, &str)]) -> QueueBox {
    let mut launch = Launch::with_config(yaml);
    for (name, value) in env {
        launch = launch.env(name, value);
    }
    let mut qb = launch.spawn(&[]);
    qb.wait_live(port, START).await;
    qb
}

async fn post(port: u16, path: &str, headers: &[(&str, &str)], body: &str) -> u16 {
    let mut request = queuebox_tests::http()
        .post(format!("http://127.0.0.1:{port}/inbox/{path}"))
        .header("content-type", "application/json")
        .body(body.to_owned());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request
        .send()
        .await
        .expect("POST to the inbox")
        .status()
        .as_u16()
}

/// The spans of `trace_id` once receive, relay, claim and publish are all in the file.
async fn whole_trace(collector: &Collector, trace_id: &str) -> Vec<Span> {
    wait_until(
        "the receive, relay, claim and publish spans in the collector's file",
        DELIVERY,
        || async {
            let spans: Vec<Span> = collector
                .spans()
                .into_iter()
                .filter(|s| s.trace_id == trace_id)
                .collect();
            let has = |prefix: &str| spans.iter().any(|s| s.name.starts_with(prefix));
            (has("receive ") && has("relay ") && has("claim ") && has("publish ")).then_some(spans)
        },
    )
    .await
}

fn one<'a>(spans: &'a [Span], prefix: &str) -> &'a Span {
    let found: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name.starts_with(prefix))
        .collect();
    assert_eq!(found.len(), 1, "one {prefix}span expected: {spans:#?}");
    found[0]
}

/// Checks the chain receive -> relay -> (claim, publish) and that the receiver's parent is the
/// publish span.
fn assert_chain(spans: &[Span], received_traceparent: &str, upstream_parent: Option<&str>) {
    let receive = one(spans, "receive ");
    let relay = one(spans, "relay ");
    let claim = one(spans, "claim ");
    let publish = one(spans, "publish ");
    assert_eq!(receive.name, "receive orders");
    assert_eq!(publish.name, "publish hook");
    if let Some(parent) = upstream_parent {
        assert_eq!(
            receive.parent_span_id, parent,
            "receive continues the sender's span"
        );
    } else {
        assert!(
            receive.parent_span_id.is_empty(),
            "a new trace starts at receive"
        );
    }
    assert_eq!(relay.parent_span_id, receive.span_id);
    assert_eq!(
        claim.parent_span_id, relay.span_id,
        "a batch of one trace is its child"
    );
    assert_eq!(claim.links, 0, "a batch of one trace links nothing");
    assert_eq!(publish.parent_span_id, relay.span_id);
    assert!(
        receive.start <= relay.start && relay.start <= claim.start && claim.start <= publish.start,
        "receive, relay, claim, publish in this order: {spans:#?}"
    );
    assert_eq!(
        publish.attribute("messaging.system").as_deref(),
        Some("http")
    );
    assert_eq!(
        publish.attribute("messaging.destination.name").as_deref(),
        Some("hook")
    );
    assert_eq!(publish.attribute("queuebox.attempt").as_deref(), Some("0"));
    assert_eq!(
        publish.attribute("queuebox.outcome").as_deref(),
        Some("delivered")
    );
    let parts: Vec<&str> = received_traceparent.split('-').collect();
    assert_eq!(parts.len(), 4, "{received_traceparent}");
    assert_eq!(parts[1], publish.trace_id);
    assert_eq!(
        parts[2], publish.span_id,
        "the destination's parent is the publish span"
    );
}

#[tokio::test]
async fn a_webhook_traceparent_reaches_the_destination_and_one_trace_is_exported_over_http() {
    let collector = Collector::start();
    let receiver = Receiver::start(Policy::status(200)).await;
    let db = TestDatabase::create().await;
    let port = free_port();
    let tracing = format!(
        "    enabled: true\n    protocol: http/protobuf\n    endpoint: http://127.0.0.1:{}\n",
        collector.http
    );
    let qb = start(&config(&db, port, &receiver.url(), &tracing), port, &[]).await;

    let status = post(
        port,
        "orders",
        &[
            ("traceparent", TRACEPARENT),
            ("tracestate", "rojo=00f067aa0ba902b7"),
        ],
        r#"{"id":"o-1","type":"created"}"#,
    )
    .await;
    assert!(status < 300, "the webhook was refused: {status}");

    let requests = receiver.wait_for(1, DELIVERY).await;
    let sent = requests[0]
        .header("traceparent")
        .expect("a traceparent")
        .to_owned();
    assert!(sent.starts_with(&format!("00-{TRACE_ID}-")), "{sent}");
    assert_eq!(
        requests[0].header("tracestate"),
        Some("rojo=00f067aa0ba902b7")
    );

    let spans = whole_trace(&collector, TRACE_ID).await;
    assert_chain(&spans, &sent, Some("00f067aa0ba902b7"));

    // The pull side sees the receive span's context in the stored headers.
    let mut sql = db.connect().await;
    let stored: String = sqlx::query_scalar(
        "SELECT headers->>'traceparent' FROM inbox WHERE idempotency_key = 'o-1'",
    )
    .fetch_one(&mut sql)
    .await
    .expect("the inbox row");
    let receive = one(&spans, "receive ");
    assert_eq!(stored, format!("00-{TRACE_ID}-{}-01", receive.span_id));

    // A log line written inside a span carries its ids: a refused credential is logged in the
    // receive span.
    let refused = post(
        port,
        "secured",
        &[("traceparent", TRACEPARENT), ("x-api-key", "wrong")],
        r#"{"id":"s-1"}"#,
    )
    .await;
    assert_eq!(refused, 401);
    qb.wait_for_log(&format!("trace_id={TRACE_ID} span_id="), DELIVERY)
        .await;
    drop(qb);
}

#[tokio::test]
async fn over_grpc_a_malformed_traceparent_starts_a_new_trace_and_otel_variables_apply() {
    let collector = Collector::start();
    let receiver = Receiver::start(Policy::status(200)).await;
    let db = TestDatabase::create().await;
    let port = free_port();
    // The endpoint and the service name come from the standard variables.
    let endpoint = format!("http://127.0.0.1:{}", collector.grpc);
    let qb = start(
        &config(
            &db,
            port,
            &receiver.url(),
            "    enabled: true\n    protocol: grpc\n",
        ),
        port,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_SERVICE_NAME", "queuebox-under-test"),
        ],
    )
    .await;

    let malformed = "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01";
    let status = post(
        port,
        "orders",
        &[("traceparent", malformed)],
        r#"{"id":"o-2","type":"created"}"#,
    )
    .await;
    assert!(
        status < 300,
        "a malformed traceparent must not refuse the message: {status}"
    );

    let requests = receiver.wait_for(1, DELIVERY).await;
    let sent = requests[0]
        .header("traceparent")
        .expect("a traceparent")
        .to_owned();
    let trace_id = sent.split('-').nth(1).expect("a trace id").to_owned();
    assert_eq!(trace_id.len(), 32);
    assert_ne!(trace_id, TRACE_ID);

    let spans = whole_trace(&collector, &trace_id).await;
    assert_chain(&spans, &sent, None);
    let file = std::fs::read_to_string(collector.file()).expect("collector file");
    assert!(
        file.contains("queuebox-under-test"),
        "OTEL_SERVICE_NAME is the service name"
    );
    drop(qb);
}

/// Resident memory of `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn a_collector_down_for_30_s_loses_no_delivery_and_counts_dropped_spans() {
    const ROWS: i64 = 10_000;
    let mut collector = Collector::start();
    let receiver = Receiver::start(Policy::status(200)).await;
    let db = TestDatabase::create().await;
    let port = free_port();
    // A small queue, so the outage overflows it.
    let tracing = format!(
        "    enabled: true\n    endpoint: http://127.0.0.1:{}\n    queueSize: 256\n",
        collector.http
    );
    let qb = start(&config(&db, port, &receiver.url(), &tracing), port, &[]).await;
    let pid = qb.pid().expect("queuebox runs");
    let mut sql = db.connect().await;

    // Warm up with the collector up, so the baseline memory includes a working exporter.
    sqlx::query(
        "INSERT INTO outbox (topic, payload, headers) \
         SELECT 'orders.created', jsonb_build_object('n', n), \
                jsonb_build_object('traceparent', '00-' || md5(n::text) || '-00f067aa0ba902b7-01') \
         FROM generate_series(1, 200) AS n",
    )
    .execute(&mut sql)
    .await
    .expect("insert the warm-up rows");
    receiver.wait_for(200, DELIVERY).await;
    let baseline = rss_kib(pid);

    collector.stop();
    let outage = Instant::now();
    // The rows arrive over the outage in ten parts, so they flow the whole time.
    for part in 0..10 {
        sqlx::query(
            "INSERT INTO outbox (topic, payload, headers) \
             SELECT 'orders.created', jsonb_build_object('n', n), \
                    jsonb_build_object('traceparent', '00-' || md5(n::text) || '-00f067aa0ba902b7-01') \
             FROM generate_series($1::bigint, $2::bigint) AS n",
        )
        .bind(1_000 + part * ROWS / 10)
        .bind(1_000 + (part + 1) * ROWS / 10 - 1)
        .execute(&mut sql)
        .await
        .expect("insert rows");
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    // Generous: a debug build on a busy machine delivers a few hundred rows a second.
    let mut last_report = Instant::now();
    wait_until(
        "every row at the receiver",
        Duration::from_secs(400),
        || {
            let seen = receiver.count();
            if last_report.elapsed() > Duration::from_secs(10) {
                eprintln!("{seen} requests after {:?}", outage.elapsed());
                last_report = Instant::now();
            }
            async move { (seen >= 200 + ROWS as usize).then_some(()) }
        },
    )
    .await;
    let delivered = receiver.requests();
    let peak = rss_kib(pid);
    let took = outage.elapsed();
    let metrics = scrape(port).await;
    let queue_full = sample(
        &metrics,
        r#"queuebox_tracing_spans_dropped_total{reason="queue_full"}"#,
    );
    let failed = sample(
        &metrics,
        r#"queuebox_tracing_spans_dropped_total{reason="export_failed"}"#,
    );
    eprintln!(
        "outage {took:?}: delivered {}, dropped spans queue_full={queue_full} export_failed={failed}, RSS {baseline} KiB -> {peak} KiB",
        delivered.len()
    );

    let mut ids: Vec<&str> = delivered
        .iter()
        .filter_map(|r| r.header("x-message-id"))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len() as i64, 200 + ROWS, "every row delivered once");
    let pending: i64 = sqlx::query_scalar("SELECT count(*) FROM outbox WHERE state <> 'sent'")
        .fetch_one(&mut sql)
        .await
        .expect("count");
    assert_eq!(pending, 0, "nothing left behind");
    assert!(queue_full + failed > 0.0, "the dropped-span counter rises");
    assert!(
        peak < baseline + 64 * 1024,
        "memory stays bounded during the outage: {baseline} KiB -> {peak} KiB"
    );
    let warnings = qb.log().matches("trace export failed").count();
    assert_eq!(warnings, 1, "one warning for the outage:\n{}", qb.log());

    // The collector back: export works again.
    collector.resume();
    let before = collector.spans().len();
    sqlx::query("INSERT INTO outbox (topic, payload) VALUES ('orders.created', '{}')")
        .execute(&mut sql)
        .await
        .expect("insert one more row");
    wait_until("spans after the collector is back", DELIVERY, || async {
        (collector.spans().len() > before).then_some(())
    })
    .await;
    qb.wait_for_log("trace export works again", DELIVERY).await;
    drop(qb);
}
