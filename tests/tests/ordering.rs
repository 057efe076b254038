//! Per-key order and at-least-once delivery across several real `queuebox` processes sharing one
//! PostgreSQL database, with a flaky receiver and with a process killed in the middle of its work.

use queuebox_tests::database::TestDatabase;
use queuebox_tests::free_port;
use queuebox_tests::process::{Launch, QueueBox};
use queuebox_tests::receiver::{Policy, Receiver, Recorded};
use queuebox_tests::sample;
use queuebox_tests::wait_until;
use queuebox_tests::without_colours;
use sqlx::PgPool;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

const START: Duration = Duration::from_secs(30);

/// `queuebox serve` on `port` against `db`, routing every topic to `receiver_url/events`. The 30 s
/// request timeout is longer than any test holds a request, so no attempt fails by timing out.
fn config(db: &TestDatabase, port: u16, receiver_url: &str, outbox: &str) -> String {
    format!(
        "server:\n  httpPort: {port}\n\
         database:\n  url: {url}\n  username: {user}\n  password: {password}\n  startupTimeoutMs: 10000\n\
         outbox:\n{outbox}\
         destinations:\n  hook:\n    type: http\n    baseUrl: {receiver_url}\n    path: /events\n    timeoutMs: 30000\n\
         routes:\n  - topicPattern: \"**\"\n    destination: hook\n",
        url = db.jdbc_url(),
        user = db.user,
        password = db.password,
    )
}

async fn pool(db: &TestDatabase) -> PgPool {
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect(&db.url)
        .await
        .expect("connect to the test database")
}

/// Rows per state.
async fn states(sql: &PgPool) -> BTreeMap<String, i64> {
    let rows: Vec<(String, i64)> =
        sqlx::query_as("SELECT state, count(*) FROM outbox GROUP BY state")
            .fetch_all(sql)
            .await
            .expect("count rows per state");
    rows.into_iter().collect()
}

async fn scrape(port: u16) -> String {
    let url = format!("http://127.0.0.1:{port}/metrics");
    queuebox_tests::http()
        .get(&url)
        .send()
        .await
        .unwrap_or_else(|error| panic!("GET {url}: {error}"))
        .text()
        .await
        .expect("metrics body")
}

async fn stop(mut qb: QueueBox, name: &str) {
    qb.terminate();
    let status = qb.wait_exit(Duration::from_secs(60)).await;
    assert!(
        status.success(),
        "{name}: exit {status}; log:\n{}",
        qb.log()
    );
}

fn message_id(request: &Recorded) -> String {
    request
        .header("x-message-id")
        .expect("every delivery carries X-Message-Id")
        .to_owned()
}

/// The text of a log line mentioning a lost claim (the finisher's fence, the renewal, the drop of an
/// unstarted row all say "claim lost").
const LOST_CLAIM: &str = "claim lost";

/// Prints, for every process, its lost-claim log lines and then every line of any process naming one
/// of those rows (its retries, its other claims), so a run that loses a claim shows why.
fn print_lost_claims(processes: &[(u16, QueueBox)]) {
    let logs: Vec<String> = processes
        .iter()
        .map(|(_, qb)| without_colours(&qb.log()))
        .collect();
    let mut rows = Vec::new();
    for (index, log) in logs.iter().enumerate() {
        let lost: Vec<&str> = log.lines().filter(|l| l.contains(LOST_CLAIM)).collect();
        eprintln!("dispatcher {index}: {} lost-claim log lines", lost.len());
        for line in lost {
            eprintln!("  {line}");
            rows.extend(log_field(line, "id="));
        }
    }
    rows.sort();
    rows.dedup();
    for row in rows {
        eprintln!("history of row {row}:");
        for (index, log) in logs.iter().enumerate() {
            for line in log.lines().filter(|l| l.contains(&row)) {
                eprintln!("  dispatcher {index}: {line}");
            }
        }
    }
}

/// The value after `name` in a text log line without colours.
fn log_field(line: &str, name: &str) -> Option<String> {
    let start = line.find(&format!(" {name}"))? + name.len() + 1;
    let value: String = line[start..]
        .chars()
        .take_while(|c| !c.is_whitespace())
        .collect();
    (!value.is_empty()).then_some(value)
}

const KEYS: i64 = 1_000;
const ROWS_PER_KEY: i64 = 20;
const ROWS: i64 = KEYS * ROWS_PER_KEY;
const DISPATCHERS: usize = 3;

#[tokio::test]
async fn three_dispatchers_keep_per_key_order_through_random_failures() {
    let db = TestDatabase::create().await;
    // 10 % of the requests fail, from a fixed seed, so a failing run can be repeated.
    let receiver = Receiver::start(Policy::random_failures(0.10, 20_261_130)).await;
    // A 30 s lease outlives every publish here, so no claim may be lost and no row delivered twice;
    // the retry base of 10 ms keeps the backoff of a failed row short (and a failed row is often
    // claimed again by the same dispatcher while a renewal still names its previous claim).
    let outbox = "  pollIntervalMs: 50\n  batchSize: 100\n  concurrency: 8\n  retryBaseDelayMs: 10\n  claimTimeoutMs: 30000\n";

    // Schema first, rows second, dispatchers last: all three start on the same full table.
    let (status, _, stderr) =
        Launch::with_config(&config(&db, free_port(), &receiver.url(), outbox))
            .run(&["migrate"], Duration::from_secs(60))
            .await;
    assert!(status.success(), "{stderr}");
    let sql = pool(&db).await;
    // Four statements of five counters each, every key in each: within a key, a higher counter is
    // always inserted later, so `sequence` order is counter order. max_attempts 20 makes a death
    // after 21 straight failures (at 10 %) practically impossible, so every row must end sent.
    for first in (1..=ROWS_PER_KEY).step_by(5) {
        sqlx::query(
            "INSERT INTO outbox (topic, key, payload, max_attempts) \
             SELECT 'order.step', 'key-' || lpad(k::text, 4, '0'), \
                    jsonb_build_object('key', 'key-' || lpad(k::text, 4, '0'), 'n', n), 20 \
               FROM generate_series($1::int, $1::int + 4) n CROSS JOIN generate_series(1, $2::int) k \
              ORDER BY n, k",
        )
        .bind(first as i32)
        .bind(KEYS as i32)
        .execute(&sql)
        .await
        .expect("insert outbox rows");
    }
    assert_eq!(states(&sql).await.get("pending"), Some(&ROWS));

    let started = Instant::now();
    let mut processes = Vec::new();
    for _ in 0..DISPATCHERS {
        let port = free_port();
        let qb = Launch::with_config(&config(&db, port, &receiver.url(), outbox)).spawn(&[]);
        processes.push((port, qb));
    }
    for (port, qb) in &mut processes {
        qb.wait_live(*port, START).await;
    }
    let finished = wait_until(
        "every row sent or dead",
        Duration::from_secs(180),
        || async {
            let states = states(&sql).await;
            let done = states.get("sent").unwrap_or(&0) + states.get("dead").unwrap_or(&0);
            (done == ROWS).then_some(states)
        },
    )
    .await;
    let drained_in = started.elapsed();
    let requests = receiver.requests();
    eprintln!(
        "three dispatchers drained {ROWS} rows over {KEYS} keys in {drained_in:?} ({} requests, {} failed)",
        requests.len(),
        requests.iter().filter(|r| !r.succeeded()).count()
    );
    assert_eq!(finished.get("sent"), Some(&ROWS), "{finished:?}");

    // Per key, every request (failed or not) must carry a counter no lower than the one before:
    // a row of a key goes only once the earlier row is finished, so a retried row arrives before
    // every later row of its key, and no late copy of an earlier row can follow a later one.
    let mut last_seen: HashMap<String, i64> = HashMap::new();
    let mut delivered: HashMap<String, Vec<i64>> = HashMap::new();
    let mut successes: HashMap<String, u32> = HashMap::new();
    for request in &requests {
        let body = request.json();
        let key = body["key"].as_str().expect("payload key").to_owned();
        let n = body["n"].as_i64().expect("payload counter");
        assert_eq!(request.header("x-message-key"), Some(key.as_str()));
        let previous = last_seen.insert(key.clone(), n).unwrap_or(0);
        assert!(
            n >= previous,
            "key {key}: row {n} arrived after row {previous} (request {})",
            request.index
        );
        if request.succeeded() {
            let count = successes.entry(message_id(request)).or_default();
            *count += 1;
            if *count == 1 {
                delivered.entry(key).or_default().push(n);
            }
        }
    }
    let expected: Vec<i64> = (1..=ROWS_PER_KEY).collect();
    assert_eq!(delivered.len() as i64, KEYS);
    for (key, counters) in &delivered {
        assert_eq!(counters, &expected, "first deliveries of key {key}");
    }

    let duplicates: u32 = successes.values().map(|count| count - 1).sum();
    let failed_requests = requests.iter().filter(|r| !r.succeeded()).count() as f64;
    let mut claims_lost = 0.0;
    let mut sent = 0.0;
    let mut failed = 0.0;
    for (index, (port, _)) in processes.iter().enumerate() {
        let metrics = scrape(*port).await;
        let own_sent = sample(&metrics, r#"queuebox_outbox_messages_total{status="sent"}"#);
        assert!(own_sent > 0.0, "dispatcher {index} sent nothing");
        sent += own_sent;
        failed += sample(
            &metrics,
            r#"queuebox_outbox_messages_total{status="failed"}"#,
        );
        claims_lost += sample(
            &metrics,
            r#"queuebox_claims_lost_total{component="outbox"}"#,
        );
    }
    eprintln!("duplicates seen by the receiver: {duplicates}; claims lost in total: {claims_lost}");
    print_lost_claims(&processes);
    // Nothing here can legitimately lose a claim: a claim is lost only once its lease passes, and
    // every publish is answered at once while the lease is 30 s, renewed every 10 s. The one CI run
    // that counted a lost claim (and no duplicate) hit a bug: a renewal's late refusal of a failed
    // row's finished claim marked the row's next claim, taken meanwhile by the same dispatcher,
    // lost. The lines printed above name the row and both tokens should that ever come back.
    assert_eq!(claims_lost, 0.0, "claims lost (see the log lines above)");
    assert_eq!(duplicates, 0, "duplicate deliveries at the receiver");
    assert_eq!(sent, ROWS as f64, "sent counters of the three dispatchers");
    assert_eq!(failed, failed_requests, "every failed request was retried");
    assert_eq!(
        successes.len() as i64,
        ROWS,
        "every row reached the receiver"
    );

    for (index, (_, qb)) in processes.into_iter().enumerate() {
        stop(qb, &format!("dispatcher {index}")).await;
    }
    sql.close().await;
    db.drop_database().await;
}

#[tokio::test]
async fn rows_of_a_killed_dispatcher_are_delivered_by_another_after_the_lease() {
    let db = TestDatabase::create().await;
    // The receiver holds every request until released: A's publishes stay in flight until A dies.
    let receiver = Receiver::start(Policy::status(200).held()).await;
    // A 2 s lease: once A stops renewing, its claims expire two seconds later at most.
    let outbox =
        "  pollIntervalMs: 50\n  batchSize: 100\n  concurrency: 8\n  claimTimeoutMs: 2000\n";
    let port_a = free_port();
    let mut a = Launch::with_config(&config(&db, port_a, &receiver.url(), outbox)).spawn(&[]);
    a.wait_live(port_a, START).await;
    let sql = pool(&db).await;
    let ids: Vec<String> = sqlx::query_scalar(
        "INSERT INTO outbox (topic, payload) \
         SELECT 'order.created', jsonb_build_object('n', n) FROM generate_series(1, 20) n RETURNING id::text",
    )
    .fetch_all(&sql)
    .await
    .expect("insert outbox rows");

    // A claims all 20 and has as many publishes in flight as its concurrency allows.
    receiver.wait_for(8, Duration::from_secs(15)).await;
    wait_until("A holds every row", Duration::from_secs(15), || async {
        (states(&sql).await.get("processing") == Some(&20)).then_some(())
    })
    .await;
    a.kill9();
    a.wait_exit(Duration::from_secs(10)).await;
    let held_by_a = receiver.count();
    // Whatever A left behind must now come from B; held requests of the dead A answer nobody.
    receiver.release();

    let port_b = free_port();
    let mut b = Launch::with_config(&config(&db, port_b, &receiver.url(), outbox)).spawn(&[]);
    b.wait_live(port_b, START).await;
    let recovered_in = Instant::now();
    wait_until("every row sent", Duration::from_secs(30), || async {
        (states(&sql).await.get("sent") == Some(&20)).then_some(())
    })
    .await;
    eprintln!(
        "B delivered A's 20 rows {:?} after its start",
        recovered_in.elapsed()
    );

    let requests = receiver.requests();
    let seen: HashSet<String> = requests.iter().map(message_id).collect();
    let expected: HashSet<String> = ids.into_iter().collect();
    assert_eq!(seen, expected, "every row reached the receiver");
    let from_b: HashSet<String> = requests[held_by_a..].iter().map(message_id).collect();
    assert_eq!(from_b, expected, "B delivered every row A left behind");
    // A reclaim returns a row to pending without counting a failed attempt.
    assert!(requests.iter().all(|r| r.header("x-attempt") == Some("0")));
    let metrics = scrape(port_b).await;
    assert_eq!(
        sample(&metrics, "queuebox_outbox_messages_reclaimed_total"),
        20.0,
        "{metrics}"
    );
    assert_eq!(
        sample(&metrics, r#"queuebox_outbox_messages_total{status="sent"}"#),
        20.0
    );

    stop(b, "B").await;
    sql.close().await;
    db.drop_database().await;
}
