//! Outbox delivery end to end: the real binary claims rows from a real PostgreSQL and POSTs them to
//! real HTTP receivers on 127.0.0.1, and each test checks what the receiver got and how the row ended.

use queuebox_tests::receiver::{Policy, Receiver, Recorded};
use queuebox_tests::service::{OutboxRow as Row, OutboxState as RowState, Service};
use queuebox_tests::wait_until;
use queuebox_tests::{free_port, sample};
use serde_json::json;
use std::time::{Duration, Instant};
use uuid::Uuid;

/// How long a test waits for a delivery that should come within a few poll intervals.
const DELIVERY: Duration = Duration::from_secs(15);
/// A retry delay long enough that a failed row stays pending while the test looks at it
/// (the backoff is capped at 60 s, so the row never comes back during the test).
const NO_RETRY_DURING_TEST_MS: u64 = 60_000;

/// The settings one test varies.
struct Setup<'a> {
    base_url: String,
    timeout_ms: u64,
    retry_base_delay_ms: u64,
    /// More lines of the `outbox` section, each indented by two spaces.
    outbox_extra: &'a str,
}

impl Setup<'_> {
    fn to(receiver_url: String) -> Self {
        Self {
            base_url: receiver_url,
            timeout_ms: 2_000,
            retry_base_delay_ms: 50,
            outbox_extra: "",
        }
    }

    /// One database, one `queuebox serve`, routes `order.**` to destination `hook` at `baseUrl/events`.
    async fn start(self) -> Service {
        let sections = format!(
            "destinations:\n  hook:\n    type: http\n    baseUrl: {base}\n    path: /events\n    timeoutMs: {timeout}\n\
             \x20   headers:\n      X-Static: from-destination\n      X-Shared: from-destination\n\
             routes:\n  - topicPattern: \"order.**\"\n    destination: hook\n",
            base = self.base_url,
            timeout = self.timeout_ms,
        );
        Service::with(&sections)
            .retry_base_delay_ms(self.retry_base_delay_ms)
            .outbox_extra(self.outbox_extra)
            .start()
            .await
    }
}

async fn get(url: &str) -> reqwest::Response {
    queuebox_tests::http()
        .get(url)
        .send()
        .await
        .unwrap_or_else(|error| panic!("GET {url}: {error}"))
}

fn sent_counter() -> &'static str {
    r#"queuebox_outbox_messages_total{status="sent"}"#
}

/// The request that carried row `id`.
fn request_of(requests: &[Recorded], id: Uuid) -> &Recorded {
    let id = id.to_string();
    requests
        .iter()
        .find(|r| r.header("x-message-id") == Some(id.as_str()))
        .unwrap_or_else(|| panic!("no request carries X-Message-Id {id}: {requests:#?}"))
}

#[tokio::test]
async fn a_row_is_posted_with_its_payload_and_headers_and_ends_sent() {
    let receiver = Receiver::start(Policy::status(200)).await;
    let service = Setup::to(receiver.url()).start().await;

    let payload = json!({"orderId": "o-1", "amount": 99.5, "lines": [{"sku": "a", "qty": 2}]});
    let keyed = service
        .insert(Row {
            key: Some("cust-42"),
            // X-Shared also comes from the destination: the row value must win. Host and
            // Content-Length belong to the HTTP client and must not be copied.
            headers: json!({
                "X-Tenant": "acme",
                "X-Shared": "from-row",
                "Host": "evil.example",
                "Content-Length": "1",
            }),
            ..Row::new("order.created", payload.clone())
        })
        .await;
    let unkeyed = service
        .insert(Row::new("order.item.added", json!({"sku": "b"})))
        .await;

    let requests = receiver.wait_for(2, DELIVERY).await;
    let request = request_of(&requests, keyed);
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, "/events");
    assert_eq!(request.json(), payload);
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert_eq!(request.header("x-topic"), Some("order.created"));
    assert_eq!(request.header("x-attempt"), Some("0"));
    assert_eq!(request.header("x-message-key"), Some("cust-42"));
    assert_eq!(request.header("x-static"), Some("from-destination"));
    assert_eq!(request.header_values("x-shared"), vec!["from-row"]);
    assert_eq!(request.header("x-tenant"), Some("acme"));
    let receiver_host = receiver.url().trim_start_matches("http://").to_owned();
    assert_eq!(request.header("host"), Some(receiver_host.as_str()));
    assert_eq!(
        request.header("content-length"),
        Some(request.body.len().to_string().as_str()),
    );

    let other = request_of(&requests, unkeyed);
    assert_eq!(other.header("x-message-key"), None, "a row without key");
    assert_eq!(other.header("x-topic"), Some("order.item.added"));
    assert_eq!(other.json(), json!({"sku": "b"}));

    for id in [keyed, unkeyed] {
        let row = service.wait_outbox_state(id, "sent", DELIVERY).await;
        assert_eq!(row.attempt, 0);
        assert_eq!(row.last_error, None);
    }
    assert_eq!(
        service.wait_metric(sent_counter(), 2.0, DELIVERY).await,
        2.0
    );
    assert_eq!(receiver.count(), 2, "each row is delivered once");
    service.stop().await;
}

#[tokio::test]
async fn a_5xx_answer_schedules_a_retry_and_the_next_attempt_delivers() {
    let receiver = Receiver::start(Policy::sequence(&[503], 200)).await;
    // A base of one second (delay 1 to 1.25 s) leaves the pending retry visible long enough to read
    // it, and long enough to tell a backoff from an immediate retry.
    let service = Setup {
        retry_base_delay_ms: 1_000,
        ..Setup::to(receiver.url())
    }
    .start()
    .await;
    let id = service
        .insert(Row::new("order.created", json!({"n": 1})))
        .await;

    receiver.wait_for(1, DELIVERY).await;
    let retry = service.wait_outbox_state(id, "pending", DELIVERY).await;
    assert_eq!(retry.attempt, 1, "{retry:?}");
    let error = retry.last_error.clone().unwrap_or_default();
    assert!(error.contains("503"), "{retry:?}");
    assert!(
        retry.due_in_ms > 0.0 && retry.due_in_ms <= 1_250.0,
        "scheduled_at lies ahead by the backoff: {retry:?}"
    );

    let sent = service.wait_outbox_state(id, "sent", DELIVERY).await;
    assert_eq!(sent.attempt, 1);
    let requests = receiver.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].header("x-attempt"), Some("0"));
    assert_eq!(requests[1].header("x-attempt"), Some("1"));
    assert_eq!(
        requests[1].header("x-message-id"),
        Some(id.to_string().as_str())
    );
    let gap = requests[1].arrived - requests[0].arrived;
    assert!(gap >= Duration::from_millis(1_000), "retried after {gap:?}");

    let metrics = service.metrics().await;
    assert_eq!(sample(&metrics, sent_counter()), 1.0, "{metrics}");
    assert_eq!(
        sample(
            &metrics,
            r#"queuebox_outbox_messages_total{status="failed"}"#
        ),
        1.0,
        "{metrics}"
    );
    assert_eq!(
        sample(
            &metrics,
            r#"queuebox_http_publish_responses_total{status_class="5xx"}"#
        ),
        1.0,
        "{metrics}"
    );
    service.stop().await;
}

/// Delivers one row to `setup`; returns the row after its first failed attempt and how long after
/// the insert that failure was written. The failure is counted under its cause `kind`, and the
/// log line of the retry names it.
async fn first_attempt_fails(setup: Setup<'_>, kind: &str) -> (RowState, Duration) {
    let service = Setup {
        retry_base_delay_ms: NO_RETRY_DURING_TEST_MS,
        ..setup
    }
    .start()
    .await;
    let inserted = Instant::now();
    let id = service
        .insert(Row::new("order.created", json!({"n": 1})))
        .await;
    let row = wait_until("the first failed attempt", DELIVERY, || async {
        let row = service.outbox_row(id).await;
        (row.attempt > 0).then_some(row)
    })
    .await;
    let failed_after = inserted.elapsed();
    assert_eq!(row.state, "pending", "a failure retries: {row:?}");
    assert_eq!(row.attempt, 1, "{row:?}");
    assert!(
        row.due_in_ms > 30_000.0,
        "the retry waits for the backoff: {row:?}"
    );
    let failed = service
        .wait_metric(
            r#"queuebox_outbox_messages_total{status="failed"}"#,
            1.0,
            DELIVERY,
        )
        .await;
    assert_eq!(failed, 1.0);
    let metrics = service.metrics().await;
    let by_cause = format!(
        r#"queuebox_outbox_publish_failures_total{{destination="hook",destination_type="http",kind="{kind}"}}"#
    );
    assert_eq!(sample(&metrics, &by_cause), 1.0, "{metrics}");
    let field = format!("kind={kind}");
    wait_until(
        "the retry's log line naming the cause",
        DELIVERY,
        || async {
            let log = queuebox_tests::without_colours(&service.qb.log());
            log.lines()
                .any(|line| line.contains("delivery failed") && line.contains(&field))
                .then_some(())
        },
    )
    .await;
    service.stop().await;
    (row, failed_after)
}

#[tokio::test]
async fn a_4xx_answer_fails_the_attempt_and_retries() {
    let receiver = Receiver::start(Policy::status(422)).await;
    let (row, _) = first_attempt_fails(Setup::to(receiver.url()), "rejected").await;
    let error = row.last_error.unwrap_or_default();
    assert!(error.contains("422"), "{error}");
    assert_eq!(receiver.count(), 1);
}

#[tokio::test]
async fn a_redirect_is_not_followed_and_fails_the_attempt() {
    let target = Receiver::start(Policy::status(200)).await;
    let redirecting =
        Receiver::start(Policy::redirect(&format!("{}/elsewhere", target.url()))).await;
    let (row, _) = first_attempt_fails(Setup::to(redirecting.url()), "rejected").await;
    let error = row.last_error.unwrap_or_default();
    assert!(error.contains("302"), "{error}");
    assert!(error.contains("redirects are not followed"), "{error}");
    assert_eq!(redirecting.count(), 1);
    assert_eq!(
        target.count(),
        0,
        "the redirect target must receive nothing"
    );
}

#[tokio::test]
async fn a_receiver_slower_than_the_timeout_fails_the_attempt() {
    // The receiver would answer 200 after 5 s; the destination gives up after 300 ms.
    let receiver = Receiver::start(Policy::status(200).with_delay(Duration::from_secs(5))).await;
    let (row, failed_after) = first_attempt_fails(
        Setup {
            timeout_ms: 300,
            ..Setup::to(receiver.url())
        },
        "timeout",
    )
    .await;
    let error = row.last_error.unwrap_or_default();
    assert!(error.contains("no answer within 300 ms"), "{error}");
    assert_eq!(receiver.count(), 1);
    // The failure was written while the receiver was still sitting on the request.
    assert!(
        failed_after < Duration::from_secs(4),
        "failed {failed_after:?} after the insert"
    );
}

#[tokio::test]
async fn a_refused_connection_fails_the_attempt() {
    // Nothing listens on a port that was free a moment ago.
    let closed = free_port();
    let (row, _) = first_attempt_fails(
        Setup::to(format!("http://127.0.0.1:{closed}")),
        "unreachable",
    )
    .await;
    let error = row.last_error.unwrap_or_default();
    assert!(error.contains("could not connect"), "{error}");
    assert!(error.contains(&format!("127.0.0.1:{closed}")), "{error}");
}

#[tokio::test]
async fn a_row_dies_after_its_own_max_attempts() {
    let receiver = Receiver::start(Policy::status(500)).await;
    let service = Setup::to(receiver.url()).start().await;
    // max_attempts 2: attempts 0, 1 and 2 are delivered, the third failure is final.
    let id = service
        .insert(Row {
            max_attempts: 2,
            ..Row::new("order.created", json!({"n": 1}))
        })
        .await;

    let dead = service.wait_outbox_state(id, "dead", DELIVERY).await;
    assert_eq!(dead.attempt, 2, "{dead:?}");
    assert!(
        dead.last_error
            .as_deref()
            .unwrap_or_default()
            .contains("500"),
        "{dead:?}"
    );
    // Every request is recorded before its answer, so all of them are in by the time the row is dead.
    let requests = receiver.requests();
    let attempts: Vec<Option<&str>> = requests.iter().map(|r| r.header("x-attempt")).collect();
    assert_eq!(attempts, vec![Some("0"), Some("1"), Some("2")]);

    let metrics = service.metrics().await;
    assert_eq!(
        sample(
            &metrics,
            r#"queuebox_outbox_messages_total{status="failed"}"#
        ),
        2.0,
        "{metrics}"
    );
    assert_eq!(
        sample(&metrics, r#"queuebox_outbox_messages_total{status="dead"}"#),
        1.0,
        "{metrics}"
    );
    service.stop().await;
    assert_eq!(receiver.count(), 3, "a dead row is never delivered again");
}

#[tokio::test]
async fn a_row_without_a_route_dies_at_once_and_reaches_no_receiver() {
    let receiver = Receiver::start(Policy::status(200)).await;
    let service = Setup::to(receiver.url()).start().await;
    let lost = service
        .insert(Row::new("invoice.created", json!({"n": 1})))
        .await;
    let dead = service.wait_outbox_state(lost, "dead", DELIVERY).await;
    assert_eq!(dead.attempt, 0, "{dead:?}");
    assert_eq!(
        dead.last_error.as_deref(),
        Some("No route matches topic invoice.created")
    );

    // A routed row afterwards proves the poller was running and the receiver reachable.
    let routed = service
        .insert(Row::new("order.created", json!({"n": 2})))
        .await;
    service.wait_outbox_state(routed, "sent", DELIVERY).await;
    let requests = receiver.requests();
    assert_eq!(requests.len(), 1, "{requests:#?}");
    assert_eq!(
        requests[0].header("x-message-id"),
        Some(routed.to_string().as_str())
    );
    service.stop().await;
}

#[tokio::test]
async fn a_row_scheduled_in_the_future_waits_for_its_time() {
    let receiver = Receiver::start(Policy::status(200)).await;
    let service = Setup::to(receiver.url()).start().await;
    let before_insert = Instant::now();
    let later = service
        .insert(Row {
            delay_ms: 3_000,
            ..Row::new("order.later", json!({"n": 1}))
        })
        .await;
    let now = service.insert(Row::new("order.now", json!({"n": 2}))).await;

    // The due row goes at once, so the poller was claiming while the other one waited.
    let first = receiver.wait_for(1, DELIVERY).await;
    assert_eq!(
        first[0].header("x-message-id"),
        Some(now.to_string().as_str())
    );
    assert_ne!(service.outbox_row(later).await.state, "sent");

    let both = receiver.wait_for(2, DELIVERY).await;
    let delayed = request_of(&both, later);
    let waited = delayed.arrived - before_insert;
    assert!(
        waited >= Duration::from_secs(3),
        "delivered {waited:?} after the insert"
    );
    service.wait_outbox_state(later, "sent", DELIVERY).await;
    service.stop().await;
}

#[tokio::test]
async fn the_rows_of_one_key_arrive_in_insert_order_and_unkeyed_rows_all_arrive() {
    let receiver = Receiver::start(Policy::status(200)).await;
    let service = Setup {
        outbox_extra: "  concurrency: 8\n  batchSize: 100\n",
        ..Setup::to(receiver.url())
    }
    .start()
    .await;
    // One statement: every row shares created_at, so only `sequence` can keep their order.
    sqlx::query(
        "INSERT INTO outbox (topic, key, payload) \
         SELECT 'order.step', 'k-1', jsonb_build_object('n', n) FROM generate_series(1, 50) n ORDER BY n",
    )
    .execute(&service.sql)
    .await
    .expect("insert keyed rows");
    let unkeyed: Vec<Uuid> = sqlx::query_scalar(
        "INSERT INTO outbox (topic, payload) \
         SELECT 'order.free', jsonb_build_object('m', m) FROM generate_series(1, 20) m RETURNING id",
    )
    .fetch_all(&service.sql)
    .await
    .expect("insert unkeyed rows");
    let keyed_order: Vec<i64> = sqlx::query_scalar(
        "SELECT (payload->>'n')::bigint FROM outbox WHERE key = 'k-1' ORDER BY sequence",
    )
    .fetch_all(&service.sql)
    .await
    .expect("read the sequence order");
    let expected: Vec<i64> = (1..=50).collect();
    assert_eq!(
        keyed_order, expected,
        "the insert numbered the rows in order"
    );

    let requests = receiver.wait_for(70, DELIVERY).await;
    let arrived: Vec<i64> = requests
        .iter()
        .filter(|r| r.header("x-message-key") == Some("k-1"))
        .map(|r| r.json()["n"].as_i64().expect("n"))
        .collect();
    assert_eq!(arrived, expected);
    let mut unkeyed_seen: Vec<String> = requests
        .iter()
        .filter(|r| r.header("x-message-key").is_none())
        .filter_map(|r| r.header("x-message-id").map(str::to_owned))
        .collect();
    unkeyed_seen.sort();
    let mut unkeyed_expected: Vec<String> = unkeyed.iter().map(Uuid::to_string).collect();
    unkeyed_expected.sort();
    assert_eq!(unkeyed_seen, unkeyed_expected);
    assert_eq!(
        service.wait_metric(sent_counter(), 70.0, DELIVERY).await,
        70.0
    );
    assert_eq!(receiver.count(), 70);
    service.stop().await;
}

#[tokio::test]
async fn sigterm_waits_for_the_publish_in_flight_and_exits_0() {
    let receiver = Receiver::start(Policy::status(200).with_delay(Duration::from_secs(1))).await;
    let mut service = Setup {
        outbox_extra: "  shutdownTimeoutMs: 5000\n",
        ..Setup::to(receiver.url())
    }
    .start()
    .await;
    let id = service
        .insert(Row::new("order.created", json!({"n": 1})))
        .await;
    // The request has arrived and the receiver sits on it for a second: the publish is in flight.
    let in_flight = receiver.wait_for(1, DELIVERY).await;
    let stop_sent = Instant::now();
    service.qb.terminate();
    let status = service.qb.wait_exit(Duration::from_secs(20)).await;
    let stopped_after = stop_sent.elapsed();
    // The answer left the receiver a second after the request arrived; the process outlived it.
    assert!(
        in_flight[0].arrived.elapsed() >= Duration::from_secs(1),
        "the process exited before the publish in flight was answered"
    );
    assert!(
        status.success(),
        "exit {status}; log:\n{}",
        service.qb.log()
    );
    let row = service.outbox_row(id).await;
    assert_eq!(row.state, "sent", "{row:?}\nlog:\n{}", service.qb.log());
    assert!(
        stopped_after < Duration::from_secs(10),
        "the stop took {stopped_after:?}"
    );
    assert_eq!(receiver.count(), 1);
    service.discard().await;
}

#[tokio::test]
async fn readiness_lists_the_outbox_poller_up() {
    let receiver = Receiver::start(Policy::status(200)).await;
    let service = Setup::to(receiver.url()).start().await;
    let url = format!("http://127.0.0.1:{}/health/ready", service.port);
    // The poller reports up after its first successful claim, a poll interval after the start.
    wait_until("outbox-poller up", DELIVERY, || async {
        let body: serde_json::Value = get(&url).await.json().await.ok()?;
        (body["components"]["outbox-poller"]["status"] == "up").then_some(())
    })
    .await;
    // Every other component comes up as well (each worker reports up after its first claim), and
    // readiness then answers 200 with the poller still listed.
    let body = wait_until("readiness healthy", DELIVERY, || async {
        let response = get(&url).await;
        let ready = response.status() == 200;
        let body: serde_json::Value = response.json().await.ok()?;
        (ready && body["status"] == "healthy").then_some(body)
    })
    .await;
    assert_eq!(
        body["components"]["outbox-poller"]["status"], "up",
        "{body}"
    );
    assert_eq!(body["components"]["database"]["status"], "up", "{body}");
    service.stop().await;
}

#[tokio::test]
async fn sigterm_hands_back_claimed_rows_that_were_not_started() {
    // One publish at a time against a slow receiver: the first row is in flight, the other four are
    // claimed and waiting for a permit when the stop comes.
    let receiver = Receiver::start(Policy::status(200).with_delay(Duration::from_secs(1))).await;
    let mut service = Setup {
        outbox_extra: "  shutdownTimeoutMs: 5000\n  concurrency: 1\n",
        ..Setup::to(receiver.url())
    }
    .start()
    .await;
    let mut ids = Vec::new();
    for n in 0..5 {
        ids.push(
            service
                .insert(Row::new("order.created", json!({ "n": n })))
                .await,
        );
    }
    receiver.wait_for(1, DELIVERY).await;
    service.qb.terminate();
    let status = service.qb.wait_exit(Duration::from_secs(20)).await;
    assert!(
        status.success(),
        "exit {status}; log:\n{}",
        service.qb.log()
    );

    let mut sent = 0;
    let mut released = 0;
    for id in &ids {
        let row = service.outbox_row(*id).await;
        match row.state.as_str() {
            "sent" => sent += 1,
            // Handed back at once, attempt not spent: another replica takes it without waiting for
            // the five-minute lease.
            "pending" => {
                assert_eq!(row.attempt, 0, "{row:?}");
                released += 1;
            }
            other => panic!("row left {other}: {row:?}\nlog:\n{}", service.qb.log()),
        }
    }
    assert_eq!(sent, receiver.count(), "every delivered row is sent");
    assert_eq!(sent + released, 5);
    assert!(released >= 1, "some rows were waiting when the stop came");
    service.discard().await;
}

#[tokio::test]
async fn the_pending_gauges_count_waiting_rows_per_destination() {
    let receiver = Receiver::start(Policy::status(200)).await;
    let service = Setup {
        outbox_extra: "  pendingGaugeIntervalMs: 100\n",
        ..Setup::to(receiver.url())
    }
    .start()
    .await;
    let hour_ms = 3_600_000;
    for n in 0..3 {
        service
            .insert(Row {
                delay_ms: hour_ms,
                ..Row::new("order.later", json!({ "n": n }))
            })
            .await;
    }
    // Pending too, but no route leads anywhere: counted in the total, in no destination's depth.
    service
        .insert(Row {
            delay_ms: hour_ms,
            ..Row::new("audit.later", json!({}))
        })
        .await;

    assert_eq!(
        service
            .wait_metric("queuebox_outbox_messages_pending", 4.0, DELIVERY)
            .await,
        4.0
    );
    let scrape = service.metrics().await;
    assert_eq!(
        sample(
            &scrape,
            r#"queuebox_outbox_queue_depth{destination="hook"}"#
        ),
        3.0,
        "{scrape}"
    );
    let age_line = scrape
        .lines()
        .find(|line| line.starts_with("queuebox_outbox_oldest_pending_age_seconds "))
        .unwrap_or_else(|| panic!("no oldest-age gauge in\n{scrape}"));
    let age = sample(age_line, "queuebox_outbox_oldest_pending_age_seconds");
    assert!((0.0..60.0).contains(&age), "{age_line}");
    assert_eq!(receiver.requests().len(), 0, "nothing was due");
    service.stop().await;
}
