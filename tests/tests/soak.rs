//! The soak: three replicas of the real binary on one database, a producer writing outbox rows
//! over many keys at a steady rate, clients posting webhooks, messages published to a RabbitMQ
//! queue, a Kafka topic and a JetStream stream that every replica consumes, and faults injected
//! while they run (kill -9 of a replica and its restart, a database outage that ends every
//! connection and refuses new ones, a PostgreSQL crash and restart, a receiver answering 503 for a
//! while, a receiver failing a few percent of requests, a slow receiver). At the end it proves
//! what QueueBox promises: every row sent, every message received at least once, the first
//! deliveries of each key in insertion order, duplicates no more than the claims the replicas
//! counted as lost, reclaimed or left unfinished, every webhook answered 2xx and every message a broker
//! acknowledged stored exactly once, and every relayed row delivered (webhooks in their
//! aggregate's order).
//!
//! It runs on the primary of the PostgreSQL pair (`scripts/services.sh`), whose restart touches no
//! other test. The size comes from the environment, so CI runs a short soak and a long one runs by
//! hand: `QB_SOAK_ROWS` (default 20000), `QB_SOAK_KEYS` (500), `QB_SOAK_RATE` (rows a second,
//! 2000), `QB_SOAK_WEBHOOKS` (3000), `QB_SOAK_BROKER_MESSAGES` (per broker, 1000),
//! `QB_SOAK_KILLS` (kills a round, 2), `QB_SOAK_ROUNDS` (rounds of faults, 1),
//! `QB_SOAK_RECEIVER_OUTAGE_SECONDS` (20). The summary line it prints is what `bench/RESULTS.md`
//! records for a long run.

use queuebox_tests::buses::{self, Buses};
use queuebox_tests::database::TestDatabase;
use queuebox_tests::pair::{Node, Pair};
use queuebox_tests::process::{Launch, QueueBox};
use queuebox_tests::receiver::{Policy, Receiver, Recorded};
use queuebox_tests::{free_port, wait_until};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

const START: Duration = Duration::from_secs(30);

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The sums of the counters that account for a duplicate delivery, over every scrape taken.
#[derive(Debug, Default, Clone, Copy)]
struct Accounted {
    lost: f64,
    reclaimed: f64,
    /// Rows whose finish could not be written (`queuebox_outbox_process_errors_total`): each is
    /// delivered again. A claim commits without waiting for its flush, so after a PostgreSQL crash
    /// such a row may be pending again rather than processing, and then it is claimed afresh without
    /// being counted as reclaimed.
    unfinished: f64,
}

impl std::ops::AddAssign for Accounted {
    fn add_assign(&mut self, other: Self) {
        self.lost += other.lost;
        self.reclaimed += other.reclaimed;
        self.unfinished += other.unfinished;
    }
}

/// The sum of every series of `metric` in a scrape (all label sets).
fn total(scrape: &str, metric: &str) -> f64 {
    scrape
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter(|line| {
            line.strip_prefix(metric)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The counters of the replica on `port`, or nothing when it does not answer.
async fn accounted(port: u16) -> Option<Accounted> {
    let scrape = queuebox_tests::http()
        .get(format!("http://127.0.0.1:{port}/metrics"))
        .timeout(Duration::from_secs(3))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    Some(Accounted {
        lost: total(&scrape, "queuebox_claims_lost_total"),
        reclaimed: total(&scrape, "queuebox_outbox_messages_reclaimed_total"),
        unfinished: total(&scrape, "queuebox_outbox_process_errors_total"),
    })
}

struct Replica {
    port: u16,
    process: QueueBox,
}

/// The replicas, and the counters of the processes that are gone (scraped before each kill).
struct Fleet {
    yaml: String,
    replicas: Vec<Replica>,
    gone: Accounted,
}

impl Fleet {
    fn launch(yaml: &str, port: u16) -> QueueBox {
        Launch::with_config(&yaml.replace("__PORT__", &port.to_string())).spawn(&[])
    }

    async fn start(yaml: String, count: usize) -> Self {
        let mut replicas = Vec::new();
        for _ in 0..count {
            let port = free_port();
            let mut process = Self::launch(&yaml, port);
            process.wait_live(port, START).await;
            replicas.push(Replica { port, process });
        }
        Self {
            yaml,
            replicas,
            gone: Accounted::default(),
        }
    }

    /// Kills replica `index` with SIGKILL (after reading its counters) and starts it again.
    async fn kill_and_restart(&mut self, index: usize) {
        let replica = &mut self.replicas[index];
        if let Some(counted) = accounted(replica.port).await {
            self.gone += counted;
        }
        replica.process.kill9();
        replica.process.wait_exit(Duration::from_secs(10)).await;
        replica.process = Self::launch(&self.yaml, replica.port);
        replica.process.wait_live(replica.port, START).await;
    }

    /// The counters of the live replicas plus those of the processes killed.
    async fn accounted(&self) -> Accounted {
        let mut sum = self.gone;
        for replica in &self.replicas {
            if let Some(counted) = accounted(replica.port).await {
                sum += counted;
            }
        }
        sum
    }

    async fn stop(mut self) {
        for replica in &mut self.replicas {
            replica.process.terminate();
        }
        for replica in &mut self.replicas {
            let status = replica.process.wait_exit(Duration::from_secs(60)).await;
            assert!(
                status.success(),
                "a replica did not stop cleanly: {status}\n{}",
                replica.process.log()
            );
        }
    }
}

/// The successful (2xx) deliveries of `requests`, per message id, in arrival order.
fn successes(requests: &[Recorded]) -> HashMap<String, Vec<&Recorded>> {
    let mut by_id: HashMap<String, Vec<&Recorded>> = HashMap::new();
    for request in requests.iter().filter(|r| r.succeeded()) {
        let id = request
            .header("x-message-id")
            .unwrap_or_default()
            .to_owned();
        by_id.entry(id).or_default().push(request);
    }
    by_id
}

/// Counts the keys whose first successful deliveries did not arrive in `n` order (the `n` each
/// body carries for its key, read by `key_of`).
fn order_violations(requests: &[Recorded], key_of: impl Fn(&serde_json::Value) -> String) -> usize {
    let mut seen: HashSet<String> = HashSet::new();
    let mut last: HashMap<String, i64> = HashMap::new();
    let mut violations = 0;
    let mut ordered: Vec<&Recorded> = requests.iter().filter(|r| r.succeeded()).collect();
    ordered.sort_by_key(|r| r.index);
    for request in ordered {
        let id = request
            .header("x-message-id")
            .unwrap_or_default()
            .to_owned();
        if !seen.insert(id) {
            continue;
        }
        let body = request.json();
        let n = body["n"].as_i64().unwrap_or(-1);
        let key = key_of(&body);
        if let Some(previous) = last.insert(key.clone(), n)
            && previous > n
        {
            eprintln!("order violation: key {key}: {n} first arrived after {previous}");
            violations += 1;
        }
    }
    violations
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_replicas_under_faults_lose_nothing_and_keep_key_order() {
    let rows = setting("QB_SOAK_ROWS", 20_000);
    let keys = setting("QB_SOAK_KEYS", 500).max(1);
    let rate = setting("QB_SOAK_RATE", 2_000).max(1);
    let webhooks = setting("QB_SOAK_WEBHOOKS", 3_000);
    let kills = setting("QB_SOAK_KILLS", 2);
    let bus_messages = setting("QB_SOAK_BROKER_MESSAGES", 1_000);
    let started = Instant::now();

    let flaky = Receiver::start(Policy::random_failures(0.03, 7)).await;
    let slow = Receiver::start(Policy::status(200).with_delay(Duration::from_millis(20))).await;
    let relayed = Receiver::start(Policy::status(200)).await;
    let bus = Receiver::start(Policy::status(200)).await;
    let (pair, _pair_guard) = Pair::lock().await;
    let db = TestDatabase::create_on(&pair.url(Node::Primary, "postgres")).await;
    let buses = Arc::new(Buses::create().await);
    let yaml = format!(
        "server:\n  httpPort: __PORT__\n\
         database:\n  url: {url}\n  username: {user}\n  password: {password}\n  startupTimeoutMs: 20000\n\
         outbox:\n  pollIntervalMs: 50\n  batchSize: 100\n  concurrency: 32\n  retryBaseDelayMs: 100\n  maxAttempts: 1000\n  claimTimeoutMs: 5000\n\
         inbox:\n  relay:\n    enabled: true\n    pollIntervalMs: 50\n    claimTimeoutMs: 5000\n    maxAttempts: 1000\n\
         destinations:\n  flaky:\n    type: http\n    baseUrl: {flaky}\n    timeoutMs: 2000\n\
         \x20 slow:\n    type: http\n    baseUrl: {slow}\n    timeoutMs: 2000\n\
         \x20 relayed:\n    type: http\n    baseUrl: {relayed}\n    timeoutMs: 2000\n\
         \x20 bus:\n    type: http\n    baseUrl: {bus}\n    timeoutMs: 2000\n\
         routes:\n  - topicPattern: \"soak.a\"\n    destination: flaky\n\
         \x20 - topicPattern: \"soak.b\"\n    destination: slow\n\
         \x20 - topicPattern: \"hook.**\"\n    destination: relayed\n\
         \x20 - topicPattern: \"bus.**\"\n    destination: bus\n\
         sources:\n  hooks:\n    type: http\n    path: /hooks\n    idempotencyKeyPath: $.id\n\
         \x20   aggregateIdPath: $.agg\n    eventTypePath: $.type\n    topic: \"hook.{{{{ eventType }}}}\"\n\
         {sources}",
        url = db.jdbc_url(),
        user = db.user,
        password = db.password,
        flaky = flaky.url(),
        slow = slow.url(),
        relayed = relayed.url(),
        bus = bus.url(),
        sources = buses.sources_yaml(),
    );
    let fleet = Arc::new(Mutex::new(Fleet::start(yaml, 3).await));
    let sql = db.pool().await;
    let ports: Vec<u16> = fleet.lock().await.replicas.iter().map(|r| r.port).collect();

    let production = Duration::from_secs_f64(rows as f64 / rate as f64);
    let producing = Instant::now();

    // The producers: `rows` rows over `keys` keys at `rate` rows a second, each in its own
    // transaction, retried while the database is away (an application would retry too). Four
    // writers share the rate; each owns a quarter of the keys, so a key's rows are written in order.
    const WRITERS: u64 = 4;
    let producers: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let sql = sql.clone();
            tokio::spawn(async move {
                let begun = Instant::now();
                let mut per_key: HashMap<u64, i64> = HashMap::new();
                let mut written = 0u64;
                for i in (writer..rows).step_by(WRITERS as usize) {
                    let key = (i / WRITERS) % keys.div_ceil(WRITERS) * WRITERS + writer;
                    let n = *per_key.entry(key).and_modify(|n| *n += 1).or_insert(0);
                    let topic = if key.is_multiple_of(2) {
                        "soak.a"
                    } else {
                        "soak.b"
                    };
                    let payload = format!(r#"{{"key":"k-{key}","n":{n}}}"#);
                    // The id is the writer's, so that a retry after a commit whose answer was
                    // lost (the connection ended as PostgreSQL crashed) adds no second row.
                    let id = uuid::Uuid::new_v4();
                    while sqlx::query(
                        "INSERT INTO outbox (id, topic, key, payload, max_attempts) \
                         VALUES ($1, $2, $3, $4::jsonb, 1000) ON CONFLICT (id) DO NOTHING",
                    )
                    .bind(id)
                    .bind(topic)
                    .bind(format!("k-{key}"))
                    .bind(&payload)
                    .execute(&sql)
                    .await
                    .is_err()
                    {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    written += 1;
                    // Keep the steady rate: wait until this writer's next slot comes.
                    let due =
                        begun + Duration::from_secs_f64((written * WRITERS) as f64 / rate as f64);
                    tokio::time::sleep_until(due.into()).await;
                }
            })
        })
        .collect();

    // The webhook clients: eight of them, each spreading its share over the production time; each
    // webhook is posted to the replicas in turn until one answers 2xx (a client retries what was
    // not acknowledged); the ids acknowledged are recorded. A client owns a set of aggregates, so
    // each aggregate's webhooks go in order.
    const CLIENTS: u64 = 8;
    let acknowledged = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let posters: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let acknowledged = Arc::clone(&acknowledged);
            let ports = ports.clone();
            tokio::spawn(async move {
                let http = queuebox_tests::http();
                let begun = Instant::now();
                let share = webhooks.saturating_sub(client).div_ceil(CLIENTS).max(1);
                let mut per_agg: HashMap<u64, i64> = HashMap::new();
                for (posted, i) in (client..webhooks).step_by(CLIENTS as usize).enumerate() {
                    let agg = (i / CLIENTS) % 8 * CLIENTS + client;
                    let n = *per_agg.entry(agg).and_modify(|n| *n += 1).or_insert(0);
                    let body =
                        format!(r#"{{"id":"w-{i}","agg":"a-{agg}","type":"created","n":{n}}}"#);
                    let mut attempt = 0usize;
                    loop {
                        let port = ports[(i as usize + attempt) % ports.len()];
                        let answer = http
                            .post(format!("http://127.0.0.1:{port}/inbox/hooks"))
                            .header("Content-Type", "application/json")
                            .timeout(Duration::from_secs(5))
                            .body(body.clone())
                            .send()
                            .await;
                        if answer.is_ok_and(|a| a.status().is_success()) {
                            acknowledged.lock().expect("ids").push(format!("w-{i}"));
                            break;
                        }
                        attempt += 1;
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    let due = begun + production.mul_f64((posted + 1) as f64 / share as f64);
                    tokio::time::sleep_until(due.into()).await;
                }
            })
        })
        .collect();

    // The broker publishers: `bus_messages` to each broker, spread over the production time.
    let bus_publishers = {
        let buses = Arc::clone(&buses);
        tokio::spawn(async move { buses.publish(bus_messages, production).await })
    };

    // The faults, spread over the production time: each round is a database outage, a receiver
    // outage, a PostgreSQL crash and `kills` kills of a replica (the replicas in turn).
    let rounds = setting("QB_SOAK_ROUNDS", 1).max(1);
    let receiver_outage = setting("QB_SOAK_RECEIVER_OUTAGE_SECONDS", 20);
    let per_round = 3 + kills;
    let steps = rounds * per_round;
    let mut faults = Vec::new();
    let mut killed = 0usize;
    for step in 0..steps {
        let at = production.mul_f64((step + 1) as f64 / (steps + 1) as f64);
        tokio::time::sleep_until((producing + at).into()).await;
        match step % per_round {
            0 => {
                // The database goes away for 5 s: every connection ends, new ones are refused.
                db.refuse_connections().await;
                tokio::time::sleep(Duration::from_secs(5)).await;
                db.allow_connections().await;
                faults.push("database outage 5 s".to_owned());
            }
            1 => {
                flaky.set_policy(Policy::status(503));
                tokio::time::sleep(Duration::from_secs(receiver_outage)).await;
                flaky.set_policy(Policy::random_failures(0.03, 11 + step));
                faults.push(format!("receiver outage {receiver_outage} s"));
            }
            2 => {
                // PostgreSQL crashes (an immediate stop, recovered at the start) and comes back.
                pair.stop(Node::Primary, "immediate").await;
                tokio::time::sleep(Duration::from_secs(3)).await;
                pair.start(Node::Primary).await;
                faults.push("PostgreSQL crash and restart".to_owned());
            }
            _ => {
                let index = killed % 3;
                killed += 1;
                fleet.lock().await.kill_and_restart(index).await;
                faults.push(format!("kill -9 of replica {index} and restart"));
            }
        }
    }
    for producer in producers {
        producer.await.expect("producer");
    }
    let rows_written_after = producing.elapsed();
    for poster in posters {
        poster.await.expect("poster");
    }
    let bus_acknowledged: HashSet<String> = bus_publishers
        .await
        .expect("broker publishers")
        .into_iter()
        .collect();
    let produced_after = started.elapsed();

    let settle = Duration::from_secs(setting("QB_SOAK_SETTLE_SECONDS", 240));
    let settle_started = Instant::now();
    wait_until("every outbox row sent", settle, || async {
        let open: i64 = sqlx::query_scalar("SELECT count(*) FROM outbox WHERE state <> 'sent'")
            .fetch_one(&sql)
            .await
            .ok()?;
        let inbox_open: i64 =
            sqlx::query_scalar("SELECT count(*) FROM inbox WHERE state NOT IN ('processed')")
                .fetch_one(&sql)
                .await
                .ok()?;
        let bus_stored: i64 =
            sqlx::query_scalar("SELECT count(*) FROM inbox WHERE source = ANY($1)")
                .bind(&buses::SOURCES[..])
                .fetch_one(&sql)
                .await
                .ok()?;
        (open == 0 && inbox_open == 0 && bus_stored as usize >= bus_acknowledged.len())
            .then_some(())
    })
    .await;

    println!(
        "soak: rows written in {:.0} s (planned {:.0} s), everything produced in {:.0} s, settled {:.0} s later",
        rows_written_after.as_secs_f64(),
        production.as_secs_f64(),
        produced_after.as_secs_f64(),
        settle_started.elapsed().as_secs_f64()
    );
    // Outbox: every row received at least once by its receiver, first deliveries in key order.
    let ids: Vec<(uuid::Uuid, String)> =
        sqlx::query_as("SELECT id, topic FROM outbox WHERE topic LIKE 'soak.%'")
            .fetch_all(&sql)
            .await
            .expect("rows");
    assert_eq!(ids.len() as u64, rows, "every produced row is in the table");
    let flaky_requests = flaky.requests();
    let slow_requests = slow.requests();
    let flaky_ok = successes(&flaky_requests);
    let slow_ok = successes(&slow_requests);
    let mut missing = 0;
    let mut duplicates = 0usize;
    for (id, topic) in &ids {
        let received = if topic == "soak.a" {
            &flaky_ok
        } else {
            &slow_ok
        };
        match received.get(&id.to_string()) {
            None => missing += 1,
            Some(copies) => duplicates += copies.len() - 1,
        }
    }
    let key_of = |body: &serde_json::Value| body["key"].as_str().unwrap_or_default().to_owned();
    let violations =
        order_violations(&flaky_requests, key_of) + order_violations(&slow_requests, key_of);

    // Inbox: every acknowledged webhook stored exactly once, relayed once, in aggregate order.
    let acknowledged: HashSet<String> = acknowledged.lock().expect("ids").iter().cloned().collect();
    let stored: Vec<(String, i64)> = sqlx::query_as(
        "SELECT idempotency_key, count(*) FROM inbox WHERE source = 'hooks' GROUP BY idempotency_key",
    )
    .fetch_all(&sql)
    .await
    .expect("inbox rows");
    let stored_keys: HashSet<String> = stored.iter().map(|(k, _)| k.clone()).collect();
    let not_stored = acknowledged.difference(&stored_keys).count();
    assert!(
        stored.iter().all(|(_, n)| *n == 1),
        "a webhook stored twice"
    );
    let relayed_rows: i64 =
        sqlx::query_scalar("SELECT count(*) FROM outbox WHERE topic LIKE 'hook.%'")
            .fetch_one(&sql)
            .await
            .expect("relayed rows");
    let relayed_requests = relayed.requests();
    let relayed_ok = successes(&relayed_requests);
    let relayed_duplicates: usize = relayed_ok.values().map(|c| c.len() - 1).sum();
    let relayed_violations = order_violations(&relayed_requests, |b| {
        b["agg"].as_str().unwrap_or_default().to_owned()
    });

    // Broker sources: every message a broker acknowledged stored exactly once, relayed once.
    let bus_stored: Vec<(String, i64)> = sqlx::query_as(
        "SELECT idempotency_key, count(*) FROM inbox WHERE source = ANY($1) GROUP BY idempotency_key",
    )
    .bind(&buses::SOURCES[..])
    .fetch_all(&sql)
    .await
    .expect("broker inbox rows");
    let bus_stored_keys: HashSet<String> = bus_stored.iter().map(|(k, _)| k.clone()).collect();
    let bus_not_stored = bus_acknowledged.difference(&bus_stored_keys).count();
    let bus_relayed_rows: i64 =
        sqlx::query_scalar("SELECT count(*) FROM outbox WHERE topic LIKE 'bus.%'")
            .fetch_one(&sql)
            .await
            .expect("relayed broker rows");
    let bus_requests = bus.requests();
    let bus_ok = successes(&bus_requests);
    let bus_duplicates: usize = bus_ok.values().map(|c| c.len() - 1).sum();

    let counted = fleet.lock().await.accounted().await;
    println!(
        "soak: {rows} rows over {keys} keys at {rate}/s, {} webhooks acknowledged, faults: [{}], \
         {:.0} s; lost {missing}, order violations {violations}, duplicates {duplicates} \
         (claims lost {} + reclaimed {} + unfinished {}); inbox: not stored {not_stored}, relayed {relayed_rows} \
         rows, {} delivered, relayed duplicates {relayed_duplicates}, aggregate order violations \
         {relayed_violations}; brokers: {} acknowledged, not stored {bus_not_stored}, relayed \
         {bus_relayed_rows} rows, {} delivered, duplicates {bus_duplicates}",
        acknowledged.len(),
        faults.join(", "),
        started.elapsed().as_secs_f64(),
        counted.lost,
        counted.reclaimed,
        counted.unfinished,
        relayed_ok.len(),
        bus_acknowledged.len(),
        bus_ok.len(),
    );
    assert_eq!(missing, 0, "rows never received");
    assert_eq!(violations, 0, "first deliveries out of key order");
    assert!(
        (duplicates + relayed_duplicates + bus_duplicates) as f64
            <= counted.lost + counted.reclaimed + counted.unfinished,
        "more duplicates ({duplicates} + {relayed_duplicates} + {bus_duplicates}) than lost ({}), \
         reclaimed ({}) and unfinished ({}) claims",
        counted.lost,
        counted.reclaimed,
        counted.unfinished
    );
    assert_eq!(not_stored, 0, "acknowledged webhooks not stored");
    assert_eq!(
        stored.len(),
        acknowledged.len(),
        "stored webhooks that were never acknowledged"
    );
    assert_eq!(
        relayed_rows as usize,
        stored.len(),
        "each stored webhook relayed once"
    );
    assert_eq!(relayed_ok.len(), stored.len(), "each relayed row delivered");
    assert_eq!(relayed_violations, 0, "relayed rows out of aggregate order");
    assert_eq!(
        bus_acknowledged.len() as u64,
        3 * bus_messages,
        "every broker message acknowledged"
    );
    assert_eq!(bus_not_stored, 0, "acknowledged broker messages not stored");
    assert!(
        bus_stored.iter().all(|(_, n)| *n == 1),
        "a broker message stored twice"
    );
    assert_eq!(
        bus_stored.len(),
        bus_acknowledged.len(),
        "stored broker messages that were never published"
    );
    assert_eq!(
        bus_relayed_rows as usize,
        bus_stored.len(),
        "each stored broker message relayed once"
    );
    assert_eq!(
        bus_ok.len(),
        bus_stored.len(),
        "each relayed broker row delivered"
    );

    let fleet = Arc::into_inner(fleet)
        .expect("the fleet has one owner")
        .into_inner();
    fleet.stop().await;
    sql.close().await;
    db.drop_database().await;
    if let Some(buses) = Arc::into_inner(buses) {
        buses.remove().await;
    }
}
