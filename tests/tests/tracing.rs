//! Trace context and OTLP export end to end: the real binary, PostgreSQL, an HTTP receiver and a
//! real OpenTelemetry Collector (`QB_TEST_OTELCOL`, built by scripts/services.sh) writing what it
//! receives to a file this test reads. Each test starts its own collector on ports of its own.

use queuebox_tests::database::TestDatabase;
use queuebox_tests::process::{Launch, QueueBox};
use queuebox_tests::receiver::{Policy, Receiver, Recorded};
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

/// One HTTP push source `orders` (topic `orders.<type>`) relayed to an HTTP destination `hook`;
/// `secured` wants an API key; `shaped` (topic `orders.shaped`) has a transform that always fails
/// and keeps the body (`onError: Skip`), so each of its messages logs a warning in its receive span.
fn config(db: &TestDatabase, port: u16, receiver: &str, tracing: &str) -> String {
    format!(
        "{head}\
         sources:\n  orders:\n    type: http\n    path: /orders\n    idempotencyKeyPath: $.id\n\
         \x20   eventTypePath: $.type\n    topic: \"{{{{ source }}}}.{{{{ eventType }}}}\"\n\
         \x20 secured:\n    type: http\n    path: /secured\n    idempotencyKeyPath: $.id\n\
         \x20   topic: secured\n    auth:\n      type: api-key\n      key: right-key\n\
         \x20 shaped:\n    type: http\n    path: /shaped\n    idempotencyKeyPath: $.id\n\
         \x20   topic: orders.shaped\n    transform:\n      expression: '$error(\"refused by the test\")'\n\
         \x20     onError: Skip\n\
         destinations:\n  hook:\n    type: http\n    baseUrl: {receiver}\n    path: /events\n    timeoutMs: 5000\n\
         routes:\n  - topicPattern: \"orders.**\"\n    destination: hook\n\
         telemetry:\n  tracing:\n{tracing}",
        head = head(db, port),
    )
}

/// The `server`, `database`, `outbox` and `inbox` sections: fast polls.
fn head(db: &TestDatabase, port: u16) -> String {
    format!(
        "server:\n  httpPort: {port}\n\
         database:\n  url: {url}\n  username: {user}\n  password: {password}\n  startupTimeoutMs: 10000\n\
         outbox:\n  pollIntervalMs: 50\n\
         inbox:\n  relay:\n    pollIntervalMs: 20\n",
        url = db.jdbc_url(),
        user = db.user,
        password = db.password,
    )
}

/// `collector`, an HTTP receiver answering 200, a database and QueueBox on [`config`] with the
/// `telemetry.tracing` lines `tracing` and the variables `env`.
struct Webhook {
    collector: Collector,
    receiver: Receiver,
    db: TestDatabase,
    port: u16,
    qb: QueueBox,
}

impl Webhook {
    async fn start(collector: Collector, tracing: &str, env: &[(&str, &str)]) -> Self {
        let receiver = Receiver::start(Policy::status(200)).await;
        let db = TestDatabase::create().await;
        let port = free_port();
        let yaml = config(&db, port, &receiver.url(), tracing);
        let qb = start(&yaml, port, env).await;
        Self {
            collector,
            receiver,
            db,
            port,
            qb,
        }
    }
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

/// The source, destination and destination kind (`messaging.system`) a trace crosses.
struct Hops<'a> {
    source: &'a str,
    destination: &'a str,
    system: &'a str,
}

/// The HTTP source `orders` to the HTTP destination `hook` of [`config`].
const WEBHOOK: Hops<'static> = Hops {
    source: "orders",
    destination: "hook",
    system: "http",
};

/// Checks the chain receive -> relay -> (claim, publish) along `path` and that the receiver's
/// parent is the publish span.
fn assert_chain(
    spans: &[Span],
    received_traceparent: &str,
    upstream_parent: Option<&str>,
    path: &Hops<'_>,
) {
    let receive = one(spans, "receive ");
    let relay = one(spans, "relay ");
    let claim = one(spans, "claim ");
    let publish = one(spans, "publish ");
    assert_eq!(receive.name, format!("receive {}", path.source));
    assert_eq!(relay.name, format!("relay {}", path.source));
    assert_eq!(publish.name, format!("publish {}", path.destination));
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
        Some(path.system)
    );
    assert_eq!(
        publish.attribute("messaging.destination.name").as_deref(),
        Some(path.destination)
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
    if let Some(parent) = upstream_parent {
        assert_ne!(parts[2], parent, "a new span id, not the sender's");
    }
}

#[tokio::test]
async fn a_webhook_traceparent_reaches_the_destination_and_one_trace_is_exported_over_http() {
    let collector = Collector::start();
    let tracing = format!(
        "    enabled: true\n    protocol: http/protobuf\n    endpoint: http://127.0.0.1:{}\n",
        collector.http
    );
    let Webhook {
        collector,
        receiver,
        db,
        port,
        qb,
    } = Webhook::start(collector, &tracing, &[]).await;

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
    assert_chain(&spans, &sent, Some("00f067aa0ba902b7"), &WEBHOOK);

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
    // A line written outside any span has no ids.
    let log = qb.log();
    let started: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("inbox relay started"))
        .collect();
    assert_eq!(started.len(), 1, "{log}");
    assert!(!started[0].contains("trace_id="), "{}", started[0]);
    drop(qb);
}

#[tokio::test]
async fn over_grpc_a_malformed_traceparent_starts_a_new_trace_and_otel_variables_apply() {
    let collector = Collector::start();
    // The endpoint and the service name come from the standard variables.
    let endpoint = format!("http://127.0.0.1:{}", collector.grpc);
    let Webhook {
        collector,
        receiver,
        port,
        qb,
        db: _db,
    } = Webhook::start(
        collector,
        "    enabled: true\n    protocol: grpc\n",
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
    assert_chain(&spans, &sent, None, &WEBHOOK);
    let file = std::fs::read_to_string(collector.file()).expect("collector file");
    assert!(
        file.contains("queuebox-under-test"),
        "OTEL_SERVICE_NAME is the service name"
    );
    drop(qb);
}

#[tokio::test]
async fn traces_the_sampler_leaves_out_get_no_spans_yet_carry_an_unsampled_traceparent() {
    let collector = Collector::start();
    let endpoint = format!("http://127.0.0.1:{}", collector.http);
    // No sampleRatio: the standard variables choose the sampler, parent-based with ratio 0, so
    // only a received trace whose sampled flag is set is recorded.
    let Webhook {
        collector,
        receiver,
        port,
        qb,
        db,
    } = Webhook::start(
        collector,
        "    enabled: true\n    protocol: http/protobuf\n",
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0"),
        ],
    )
    .await;

    let unsampled_parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00";
    let new_trace = post(port, "orders", &[], r#"{"id":"o-new","type":"created"}"#).await;
    let unsampled = post(
        port,
        "orders",
        &[("traceparent", unsampled_parent)],
        r#"{"id":"o-unsampled","type":"created"}"#,
    )
    .await;
    assert!(
        new_trace < 300 && unsampled < 300,
        "{new_trace} {unsampled}"
    );
    let requests = receiver.wait_for(2, DELIVERY).await;
    let traceparent_of = |requests: &[Recorded], id: &str| {
        requests
            .iter()
            .find(|r| String::from_utf8_lossy(&r.body).contains(id))
            .and_then(|r| r.header("traceparent"))
            .unwrap_or_else(|| panic!("{id} arrived with a traceparent"))
            .to_owned()
    };
    // A new trace left out: a trace id all the same, the sampled flag clear.
    let sent_new = traceparent_of(&requests, "o-new");
    let parts: Vec<&str> = sent_new.split('-').collect();
    assert_eq!(parts.len(), 4, "{sent_new}");
    assert_eq!(parts[3], "00", "{sent_new}");
    assert!(
        parts[1].len() == 32 && parts[1] != "0".repeat(32),
        "{sent_new}"
    );
    // The stored inbox row carries the same trace, unsampled, for the pull clients.
    let mut sql = db.connect().await;
    let stored: String = sqlx::query_scalar(
        "SELECT headers->>'traceparent' FROM inbox WHERE idempotency_key = 'o-new'",
    )
    .fetch_one(&mut sql)
    .await
    .expect("the inbox row");
    assert!(
        stored.starts_with(&format!("00-{}-", parts[1])) && stored.ends_with("-00"),
        "{stored} against {sent_new}"
    );
    // A received unsampled trace: continued, with a span id of ours, still unsampled.
    let sent_unsampled = traceparent_of(&requests, "o-unsampled");
    assert!(
        sent_unsampled.starts_with("00-0af7651916cd43dd8448eb211c80319c-")
            && sent_unsampled.ends_with("-00"),
        "{sent_unsampled}"
    );
    assert_ne!(sent_unsampled, unsampled_parent, "a new span id");

    // A received sampled trace is recorded whole; spans leave in order, so once its spans are in
    // the file, any span of the two earlier messages would be too.
    let sampled = post(
        port,
        "orders",
        &[("traceparent", TRACEPARENT)],
        r#"{"id":"o-sampled","type":"created"}"#,
    )
    .await;
    assert!(sampled < 300, "{sampled}");
    let spans = whole_trace(&collector, TRACE_ID).await;
    let sent_sampled = traceparent_of(&receiver.wait_for(3, DELIVERY).await, "o-sampled");
    assert_chain(&spans, &sent_sampled, Some("00f067aa0ba902b7"), &WEBHOOK);
    let others: Vec<Span> = collector
        .spans()
        .into_iter()
        .filter(|s| s.trace_id != TRACE_ID)
        .collect();
    assert!(others.is_empty(), "spans of traces left out: {others:#?}");
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
    let collector = Collector::start();
    // A small queue, so the outage overflows it.
    let tracing = format!(
        "    enabled: true\n    endpoint: http://127.0.0.1:{}\n    queueSize: 256\n",
        collector.http
    );
    let Webhook {
        mut collector,
        receiver,
        db,
        port,
        qb,
    } = Webhook::start(collector, &tracing, &[]).await;
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

// ------------------------------------------------------------------------------------------------
// The broker pairs: a message with a `traceparent` enters through a broker source, is relayed and
// published to a destination on the same broker, shaped like the bridge examples (examples/*-bridge)
// on names of the test's own.
// ------------------------------------------------------------------------------------------------

/// The broker of one bridge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Broker {
    RabbitMq,
    Kafka,
    Nats,
    Redis,
}

impl Broker {
    /// The destination kind, as the publish span's `messaging.system` names it.
    fn system(self) -> &'static str {
        match self {
            Broker::RabbitMq => "rabbitmq",
            Broker::Kafka => "kafka",
            Broker::Nats => "nats",
            Broker::Redis => "redis",
        }
    }
}

fn service_env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: start the services first with `eval \"$(bash scripts/services.sh)\"`")
    })
}

/// The broker-side handles of one bridge: what the test publishes to and reads from.
enum Ends {
    RabbitMq {
        _connection: lapin::Connection,
        channel: lapin::Channel,
        incoming: String,
        exchange: String,
        processed: String,
    },
    Kafka {
        producer: rdkafka::producer::FutureProducer,
        consumer: rdkafka::consumer::StreamConsumer,
        incoming: String,
        outgoing: String,
    },
    Nats {
        js: async_nats::jetstream::Context,
        subscriber: async_nats::Subscriber,
        incoming: String,
        outgoing: String,
    },
    Redis {
        connection: redis::aio::MultiplexedConnection,
        incoming: String,
        outgoing: String,
    },
}

/// One message as the destination's broker holds it.
#[derive(Debug, Clone)]
struct Arrived {
    headers: Vec<(String, String)>,
    body: Value,
}

impl Arrived {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A source `orders` on one broker relayed to a destination `processed` on the same broker.
struct Bridge {
    broker: Broker,
    ends: Ends,
    arrived: Vec<Arrived>,
}

impl Bridge {
    /// Makes the queues, topics, streams of the test's own (and, for the destination, what reads
    /// it back) on the broker `scripts/services.sh` started.
    async fn create(broker: Broker) -> Self {
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        let ends = match broker {
            Broker::RabbitMq => {
                use lapin::options::{
                    ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
                };
                use lapin::types::FieldTable;
                let connection = lapin::Connection::connect(
                    &service_env("QB_TEST_AMQP_URL"),
                    lapin::ConnectionProperties::default(),
                )
                .await
                .expect("connect to RabbitMQ");
                let channel = connection.create_channel().await.expect("AMQP channel");
                let incoming = format!("qb-e2e-trace-in-{suffix}");
                let exchange = format!("qb-e2e-trace-out-{suffix}");
                let processed = format!("qb-e2e-trace-processed-{suffix}");
                // The destination declares a durable topic exchange; declared here first so the
                // queue that reads it back can be bound before anything is published.
                channel
                    .exchange_declare(
                        exchange.as_str().into(),
                        lapin::ExchangeKind::Topic,
                        ExchangeDeclareOptions {
                            durable: true,
                            ..Default::default()
                        },
                        FieldTable::default(),
                    )
                    .await
                    .expect("declare the exchange");
                for queue in [&incoming, &processed] {
                    channel
                        .queue_declare(
                            queue.as_str().into(),
                            QueueDeclareOptions {
                                durable: true,
                                ..Default::default()
                            },
                            FieldTable::default(),
                        )
                        .await
                        .expect("declare a queue");
                }
                channel
                    .queue_bind(
                        processed.as_str().into(),
                        exchange.as_str().into(),
                        "#".into(),
                        QueueBindOptions::default(),
                        FieldTable::default(),
                    )
                    .await
                    .expect("bind the queue");
                Ends::RabbitMq {
                    _connection: connection,
                    channel,
                    incoming,
                    exchange,
                    processed,
                }
            }
            Broker::Kafka => {
                use rdkafka::ClientConfig;
                use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
                use rdkafka::client::DefaultClientContext;
                use rdkafka::consumer::Consumer as _;
                use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
                let bootstrap = service_env("QB_TEST_KAFKA_BOOTSTRAP");
                let incoming = format!("qb-e2e-trace-in-{suffix}");
                let outgoing = format!("qb-e2e-trace-out-{suffix}");
                let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
                    .set("bootstrap.servers", &bootstrap)
                    .create()
                    .expect("Kafka admin client");
                let created = admin
                    .create_topics(
                        &[
                            NewTopic::new(&incoming, 1, TopicReplication::Fixed(1)),
                            NewTopic::new(&outgoing, 1, TopicReplication::Fixed(1)),
                        ],
                        &AdminOptions::new().operation_timeout(Some(DELIVERY)),
                    )
                    .await
                    .expect("create the topics");
                for result in created {
                    result.unwrap_or_else(|(topic, code)| panic!("creating topic {topic}: {code}"));
                }
                let producer = ClientConfig::new()
                    .set("bootstrap.servers", &bootstrap)
                    .create()
                    .expect("Kafka producer");
                let consumer: rdkafka::consumer::StreamConsumer = ClientConfig::new()
                    .set("bootstrap.servers", &bootstrap)
                    .set("group.id", format!("qb-e2e-trace-reader-{suffix}"))
                    .set("enable.auto.commit", "false")
                    .create()
                    .expect("Kafka consumer");
                let mut assignment = TopicPartitionList::new();
                assignment
                    .add_partition_offset(&outgoing, 0, Offset::Beginning)
                    .expect("partition");
                consumer.assign(&assignment).expect("assign");
                Ends::Kafka {
                    producer,
                    consumer,
                    incoming,
                    outgoing,
                }
            }
            Broker::Nats => {
                let client = async_nats::connect(service_env("QB_TEST_NATS_URL"))
                    .await
                    .expect("connect to NATS");
                let js = async_nats::jetstream::new(client.clone());
                let incoming = format!("qb_e2e_trace_in_{suffix}");
                let outgoing = format!("qb_e2e_trace_out_{suffix}");
                for name in [&incoming, &outgoing] {
                    js.create_stream(async_nats::jetstream::stream::Config {
                        name: name.clone(),
                        subjects: vec![format!("{name}.>")],
                        ..Default::default()
                    })
                    .await
                    .expect("create a stream");
                }
                // What the destination publishes reaches this core subscription as well.
                let subscriber = client
                    .subscribe(format!("{outgoing}.>"))
                    .await
                    .expect("subscribe");
                client.flush().await.expect("flush the subscription");
                Ends::Nats {
                    js,
                    subscriber,
                    incoming,
                    outgoing,
                }
            }
            Broker::Redis => {
                let connection = redis::Client::open(service_env("QB_TEST_REDIS_URL"))
                    .expect("Redis URL")
                    .get_multiplexed_async_connection()
                    .await
                    .expect("connect to Redis");
                Ends::Redis {
                    connection,
                    incoming: format!("qb:e2e:trace:in:{suffix}"),
                    outgoing: format!("qb:e2e:trace:out:{suffix}"),
                }
            }
        };
        Self {
            broker,
            ends,
            arrived: Vec::new(),
        }
    }

    /// The hops of the trace: source `orders`, destination `processed`.
    fn hops(&self) -> Hops<'static> {
        Hops {
            source: "orders",
            destination: "processed",
            system: self.broker.system(),
        }
    }

    /// The `sources:`, `destinations:` and `routes:` sections, after the bridge example of the
    /// broker: keyed by `$.orderId`, aggregate `$.customerId`, topic `orders.<type>`.
    fn yaml(&self) -> String {
        let attributes = "    idempotencyKeyPath: $.orderId\n    aggregateIdPath: $.customerId\n\
                          \x20   eventTypePath: $.type\n    topic: \"orders.{{ eventType }}\"\n";
        let (source, destination) = match &self.ends {
            Ends::RabbitMq {
                incoming, exchange, ..
            } => {
                let url = service_env("QB_TEST_AMQP_URL");
                (
                    format!(
                        "    type: rabbitmq\n    queueName: {incoming}\n    connectionUrl: {url}\n    prefetchCount: 10\n"
                    ),
                    format!(
                        "    type: rabbitmq\n    url: {url}\n    exchange: {exchange}\n    exchangeType: topic\n\
                         \x20   deliveryMode: persistent\n"
                    ),
                )
            }
            Ends::Kafka {
                incoming, outgoing, ..
            } => {
                let servers = service_env("QB_TEST_KAFKA_BOOTSTRAP");
                (
                    format!(
                        "    type: kafka\n    bootstrapServers: {servers}\n    topics: [{incoming}]\n\
                         \x20   groupId: {incoming}\n    autoOffsetReset: earliest\n"
                    ),
                    format!(
                        "    type: kafka\n    bootstrapServers: {servers}\n    topic: {outgoing}\n\
                         \x20   keyTemplate: \"{{{{ key }}}}\"\n    timeoutMs: 30000\n"
                    ),
                )
            }
            Ends::Nats {
                incoming, outgoing, ..
            } => {
                let servers = service_env("QB_TEST_NATS_URL");
                (
                    format!(
                        "    type: nats\n    servers: {servers}\n    stream: {incoming}\n    durable: queuebox-orders\n\
                         \x20   filterSubject: \"{incoming}.>\"\n    ackWaitMs: 30000\n"
                    ),
                    format!(
                        "    type: nats\n    servers: {servers}\n    subject: \"{outgoing}.{{{{ topic }}}}\"\n\
                         \x20   jetStream: true\n    timeoutMs: 30000\n"
                    ),
                )
            }
            Ends::Redis {
                incoming, outgoing, ..
            } => {
                let url = service_env("QB_TEST_REDIS_URL");
                (
                    format!(
                        "    type: redis\n    url: {url}\n    stream: \"{incoming}\"\n    group: queuebox-orders\n\
                         \x20   consumer: e2e\n    blockMs: 200\n"
                    ),
                    format!(
                        "    type: redis\n    url: {url}\n    stream: \"{outgoing}\"\n    timeoutMs: 30000\n"
                    ),
                )
            }
        };
        format!(
            "sources:\n  orders:\n{source}{attributes}\
             destinations:\n  processed:\n{destination}\
             routes:\n  - topicPattern: \"orders.*\"\n    destination: processed\n"
        )
    }

    /// Publishes `body` with `headers` to the source's queue, topic, stream.
    async fn send(&self, body: &str, headers: &[(&str, &str)]) {
        match &self.ends {
            Ends::RabbitMq {
                channel, incoming, ..
            } => {
                use lapin::types::{AMQPValue, FieldTable};
                let mut table = FieldTable::default();
                for (name, value) in headers {
                    table.insert((*name).into(), AMQPValue::LongString((*value).into()));
                }
                channel
                    .basic_publish(
                        "".into(),
                        incoming.as_str().into(),
                        lapin::options::BasicPublishOptions::default(),
                        body.as_bytes(),
                        lapin::BasicProperties::default().with_headers(table),
                    )
                    .await
                    .expect("publish to RabbitMQ")
                    .await
                    .expect("the publish went out");
            }
            Ends::Kafka {
                producer, incoming, ..
            } => {
                use rdkafka::message::{Header, OwnedHeaders};
                let mut owned = OwnedHeaders::new();
                for (name, value) in headers {
                    owned = owned.insert(Header {
                        key: name,
                        value: Some(value.as_bytes()),
                    });
                }
                producer
                    .send(
                        rdkafka::producer::FutureRecord::<(), _>::to(incoming)
                            .payload(body)
                            .headers(owned),
                        Duration::from_secs(10),
                    )
                    .await
                    .unwrap_or_else(|(e, _)| panic!("sending to {incoming}: {e}"));
            }
            Ends::Nats { js, incoming, .. } => {
                let mut map = async_nats::HeaderMap::new();
                for (name, value) in headers {
                    map.append(*name, *value);
                }
                js.publish_with_headers(
                    format!("{incoming}.orders"),
                    map,
                    body.as_bytes().to_vec().into(),
                )
                .await
                .expect("publish to JetStream")
                .await
                .expect("JetStream ack");
            }
            Ends::Redis {
                connection,
                incoming,
                ..
            } => {
                let mut command = redis::cmd("XADD");
                command.arg(incoming).arg("*");
                for (name, value) in headers {
                    command.arg(*name).arg(*value);
                }
                let _: String = command
                    .arg("payload")
                    .arg(body)
                    .query_async(&mut connection.clone())
                    .await
                    .expect("XADD");
            }
        }
    }

    /// Takes what reached the destination's broker since the last call (without waiting long).
    async fn poll(&mut self) {
        let short = Duration::from_millis(200);
        match &mut self.ends {
            Ends::RabbitMq {
                channel, processed, ..
            } => {
                use lapin::types::AMQPValue;
                while let Some(message) = channel
                    .basic_get(
                        processed.as_str().into(),
                        lapin::options::BasicGetOptions { no_ack: true },
                    )
                    .await
                    .expect("basic.get")
                {
                    let headers = message
                        .properties
                        .headers()
                        .as_ref()
                        .map(|table| {
                            table
                                .inner()
                                .iter()
                                .map(|(key, value)| {
                                    let value = match value {
                                        AMQPValue::LongString(text) => text.to_string(),
                                        other => format!("{other:?}"),
                                    };
                                    (key.as_str().to_owned(), value)
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    self.arrived.push(Arrived {
                        headers,
                        body: serde_json::from_slice(&message.delivery.data).unwrap_or_default(),
                    });
                }
            }
            Ends::Kafka { consumer, .. } => {
                use rdkafka::Message as _;
                use rdkafka::message::Headers as _;
                while let Ok(Ok(message)) = tokio::time::timeout(short, consumer.recv()).await {
                    let headers = message
                        .headers()
                        .map(|h| {
                            h.iter()
                                .map(|h| {
                                    let value =
                                        String::from_utf8_lossy(h.value.unwrap_or_default());
                                    (h.key.to_owned(), value.into_owned())
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    self.arrived.push(Arrived {
                        headers,
                        body: serde_json::from_slice(message.payload().unwrap_or_default())
                            .unwrap_or_default(),
                    });
                }
            }
            Ends::Nats { subscriber, .. } => {
                use futures::StreamExt as _;
                while let Ok(Some(message)) = tokio::time::timeout(short, subscriber.next()).await {
                    let headers = message
                        .headers
                        .iter()
                        .flat_map(|map| map.iter())
                        .flat_map(|(name, values)| {
                            values
                                .iter()
                                .map(move |value| (name.to_string(), value.as_str().to_owned()))
                        })
                        .collect();
                    self.arrived.push(Arrived {
                        headers,
                        body: serde_json::from_slice(&message.payload).unwrap_or_default(),
                    });
                }
            }
            Ends::Redis {
                connection,
                outgoing,
                ..
            } => {
                let entries: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
                    .arg(&*outgoing)
                    .arg("-")
                    .arg("+")
                    .query_async(connection)
                    .await
                    .expect("XRANGE");
                // XRANGE reads the whole stream each time: keep only the entries not seen yet.
                for (_, fields) in entries.into_iter().skip(self.arrived.len()) {
                    let body = fields
                        .iter()
                        .find(|(name, _)| name == "payload")
                        .and_then(|(_, payload)| serde_json::from_str(payload).ok())
                        .unwrap_or_default();
                    self.arrived.push(Arrived {
                        headers: fields,
                        body,
                    });
                }
            }
        }
    }

    /// The message of order `order_id` once it reached the destination's broker.
    async fn arrived(&mut self, order_id: &str) -> Arrived {
        let deadline = Instant::now() + DELIVERY;
        loop {
            self.poll().await;
            if let Some(found) = self.arrived.iter().find(|m| m.body["orderId"] == order_id) {
                return found.clone();
            }
            assert!(
                Instant::now() < deadline,
                "order {order_id} did not reach the {:?} destination in {DELIVERY:?}; arrived: {:?}",
                self.broker,
                self.arrived
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Deletes what [`Bridge::create`] made.
    async fn remove(self) {
        match self.ends {
            Ends::RabbitMq {
                channel,
                incoming,
                exchange,
                processed,
                ..
            } => {
                for queue in [incoming, processed] {
                    let _ = channel
                        .queue_delete(queue.as_str().into(), Default::default())
                        .await;
                }
                let _ = channel
                    .exchange_delete(exchange.as_str().into(), Default::default())
                    .await;
            }
            Ends::Kafka {
                incoming, outgoing, ..
            } => {
                use rdkafka::admin::{AdminClient, AdminOptions};
                use rdkafka::client::DefaultClientContext;
                if let Ok(admin) = rdkafka::ClientConfig::new()
                    .set("bootstrap.servers", service_env("QB_TEST_KAFKA_BOOTSTRAP"))
                    .create::<AdminClient<DefaultClientContext>>()
                {
                    let _ = admin
                        .delete_topics(&[&incoming, &outgoing], &AdminOptions::new())
                        .await;
                }
            }
            Ends::Nats {
                js,
                incoming,
                outgoing,
                ..
            } => {
                let _ = js.delete_stream(&incoming).await;
                let _ = js.delete_stream(&outgoing).await;
            }
            Ends::Redis {
                mut connection,
                incoming,
                outgoing,
            } => {
                let _: Result<i64, _> = redis::cmd("DEL")
                    .arg(&incoming)
                    .arg(&outgoing)
                    .query_async(&mut connection)
                    .await;
            }
        }
    }
}

/// A message with the W3C example `traceparent` enters through the broker source of `broker` and
/// leaves through its destination with the same trace id and the publish span as its parent, and
/// the collector holds receive, relay, claim, publish of that one trace, in order. Then a message
/// with a malformed `traceparent` through the same bridge starts a trace of its own.
async fn a_trace_crosses_the_bridge(broker: Broker) {
    let collector = Collector::start();
    let mut bridge = Bridge::create(broker).await;
    let db = TestDatabase::create().await;
    let port = free_port();
    let yaml = format!(
        "{head}{bridge}\
         telemetry:\n  tracing:\n    enabled: true\n    endpoint: http://127.0.0.1:{http}\n",
        head = head(&db, port),
        bridge = bridge.yaml(),
        http = collector.http,
    );
    let qb = start(&yaml, port, &[]).await;
    let component = format!("{}.orders", broker.system());
    wait_until("the source in the readiness answer", DELIVERY, || async {
        let response = queuebox_tests::http()
            .get(format!("http://127.0.0.1:{port}/health/ready"))
            .send()
            .await
            .ok()?;
        let ready = response.status().as_u16() == 200;
        let body = response.text().await.ok()?;
        (ready && body.contains(&component)).then_some(())
    })
    .await;

    bridge
        .send(
            r#"{"orderId":"o-1","customerId":"c-1","type":"created"}"#,
            &[
                ("traceparent", TRACEPARENT),
                ("tracestate", "rojo=00f067aa0ba902b7"),
            ],
        )
        .await;
    let arrived = bridge.arrived("o-1").await;
    let sent = arrived
        .header("traceparent")
        .unwrap_or_else(|| panic!("a traceparent at the destination: {arrived:?}"))
        .to_owned();
    assert!(sent.starts_with(&format!("00-{TRACE_ID}-")), "{sent}");
    assert_eq!(
        arrived.header("tracestate"),
        Some("rojo=00f067aa0ba902b7"),
        "{arrived:?}"
    );
    let spans = whole_trace(&collector, TRACE_ID).await;
    assert_chain(&spans, &sent, Some("00f067aa0ba902b7"), &bridge.hops());
    assert_eq!(
        one(&spans, "receive ")
            .attribute("messaging.destination.name")
            .as_deref(),
        Some("orders")
    );

    // Upper-case hex breaks the W3C rules: the message is kept, and a new trace starts at receive.
    let malformed = "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01";
    bridge
        .send(
            r#"{"orderId":"o-2","customerId":"c-2","type":"created"}"#,
            &[("traceparent", malformed)],
        )
        .await;
    let arrived = bridge.arrived("o-2").await;
    let sent = arrived
        .header("traceparent")
        .unwrap_or_else(|| panic!("a traceparent at the destination: {arrived:?}"))
        .to_owned();
    let trace_id = sent.split('-').nth(1).expect("a trace id").to_owned();
    assert_eq!(trace_id.len(), 32, "{sent}");
    assert_ne!(trace_id, TRACE_ID);
    assert_ne!(trace_id, TRACE_ID.to_uppercase());
    let spans = whole_trace(&collector, &trace_id).await;
    assert_chain(&spans, &sent, None, &bridge.hops());

    drop(qb);
    bridge.remove().await;
    db.drop_database().await;
}

#[tokio::test]
async fn a_rabbitmq_message_traceparent_crosses_the_bridge_in_one_exported_trace() {
    a_trace_crosses_the_bridge(Broker::RabbitMq).await;
}

#[tokio::test]
async fn a_kafka_record_traceparent_crosses_the_bridge_in_one_exported_trace() {
    a_trace_crosses_the_bridge(Broker::Kafka).await;
}

#[tokio::test]
async fn a_nats_message_traceparent_crosses_the_bridge_in_one_exported_trace() {
    a_trace_crosses_the_bridge(Broker::Nats).await;
}

#[tokio::test]
async fn a_redis_entry_traceparent_crosses_the_bridge_in_one_exported_trace() {
    a_trace_crosses_the_bridge(Broker::Redis).await;
}

/// The lines of a JSON log, each parsed (every line must be a JSON object, the ids added to some).
fn json_lines(log: &str) -> Vec<Value> {
    log.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            serde_json::from_str::<Value>(line)
                .unwrap_or_else(|e| panic!("a log line that is not JSON ({e}): {line}"))
        })
        .collect()
}

#[tokio::test]
async fn json_log_lines_of_a_traced_message_carry_its_trace_and_span_ids_and_others_none() {
    let collector = Collector::start();
    let tracing = format!(
        "    enabled: true\n    endpoint: http://127.0.0.1:{}\n",
        collector.http
    );
    let Webhook {
        collector,
        receiver,
        port,
        qb,
        db: _db,
    } = Webhook::start(collector, &tracing, &[("QB_LOG_FORMAT", "json")]).await;

    // The source transform fails on every message and keeps the body: one warning, written in the
    // message's receive span; the message goes on to the receiver.
    let status = post(
        port,
        "shaped",
        &[("traceparent", TRACEPARENT)],
        r#"{"id":"j-1"}"#,
    )
    .await;
    assert!(status < 300, "the message was refused: {status}");
    let requests = receiver.wait_for(1, DELIVERY).await;
    let sent = requests[0].header("traceparent").expect("a traceparent");
    let spans = whole_trace(&collector, TRACE_ID).await;
    assert_chain(
        &spans,
        sent,
        Some("00f067aa0ba902b7"),
        &Hops {
            source: "shaped",
            destination: "hook",
            system: "http",
        },
    );
    let receive = one(&spans, "receive ");

    let warning = wait_until("the transform warning in the log", DELIVERY, || async {
        json_lines(&qb.log())
            .into_iter()
            .find(|line| line["message"] == "source transform failed")
    })
    .await;
    assert_eq!(warning["trace_id"], TRACE_ID, "{warning}");
    assert_eq!(
        warning["span_id"], receive.span_id,
        "the receive span's id: {warning}"
    );
    assert_eq!(
        warning["source"], "shaped",
        "the event's own fields stay: {warning}"
    );

    // A refused credential: logged in the receive span of a trace of its own.
    let other = "0af7651916cd43dd8448eb211c80319c";
    let refused = post(
        port,
        "secured",
        &[
            ("traceparent", &format!("00-{other}-b7ad6b7169203331-01")),
            ("x-api-key", "wrong"),
        ],
        r#"{"id":"s-1"}"#,
    )
    .await;
    assert_eq!(refused, 401);
    let line = wait_until("the refusal in the log", DELIVERY, || async {
        json_lines(&qb.log())
            .into_iter()
            .find(|line| line["message"] == "inbox request refused: credentials")
    })
    .await;
    assert_eq!(line["trace_id"], other, "{line}");
    let span_id = line["span_id"].as_str().unwrap_or_default();
    assert!(
        span_id.len() == 16 && span_id != "b7ad6b7169203331",
        "our receive span, not the sender's: {line}"
    );

    // Lines written outside any span (start-up, the relay starting) carry no ids.
    let lines = json_lines(&qb.log());
    let outside: Vec<&Value> = lines
        .iter()
        .filter(|line| line["message"] == "inbox relay started")
        .collect();
    assert_eq!(outside.len(), 1, "{lines:#?}");
    for line in outside {
        assert!(
            line.get("trace_id").is_none() && line.get("span_id").is_none(),
            "no ids outside a span: {line}"
        );
    }
    drop(qb);
}
