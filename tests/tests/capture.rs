//! PostgreSQL logical capture end to end: the real binary, the real server's replication protocol,
//! real HTTP receivers. Every test runs with a poll interval of a minute, so a delivery within a
//! second or two can only come from capture (or from a deadline the dispatcher computed).
//!
//! Each test has its own database and its own slot (slots are per server); the slot is dropped
//! before the database, since a slot keeps its database from being dropped.

use queuebox_tests::database::{TestDatabase, capture_account, drop_replication_slot};
use queuebox_tests::free_port;
use queuebox_tests::process::{Launch, QueueBox};
use queuebox_tests::receiver::{Policy, Receiver};
use queuebox_tests::{sample, wait_until};
use sqlx::{Connection, PgConnection, PgPool};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use uuid::Uuid;

const START: Duration = Duration::from_secs(30);
/// How long a woken delivery may take: far below the minute-long poll interval.
const WOKEN: Duration = Duration::from_secs(3);

/// A database with the schema and the publication, a slot name, a state directory and a receiver.
struct World {
    /// `None` once dropped.
    db: Option<TestDatabase>,
    /// Whether `finish` ran.
    cleaned: bool,
    sql: PgPool,
    slot: String,
    state: tempfile::TempDir,
    receiver: Receiver,
}

/// What one QueueBox process of a test varies.
struct Replica<'a> {
    /// `enabled` of `outbox.capture`; `None` runs in polling mode.
    capture: Option<bool>,
    poll_ms: u64,
    reconciliation_ms: u64,
    retry_base_delay_ms: u64,
    /// The capture account; `None` takes the database account (which has no REPLICATION).
    capture_account: bool,
    publication: &'a str,
    state_dir: Option<&'a Path>,
    /// A port on 127.0.0.1 for capture to connect to instead of the database.
    capture_port: Option<u16>,
}

impl Default for Replica<'_> {
    fn default() -> Self {
        Self {
            capture: Some(true),
            poll_ms: 60_000,
            reconciliation_ms: 60_000,
            retry_base_delay_ms: 60_000,
            capture_account: true,
            publication: "queuebox_outbox",
            state_dir: None,
            capture_port: None,
        }
    }
}

/// A running replica and its data port.
struct Running {
    qb: QueueBox,
    port: u16,
}

impl World {
    /// A fresh database migrated by `queuebox migrate`, with `publication_sql` run after it.
    async fn create(publication_sql: &str) -> Self {
        let db = TestDatabase::create().await;
        let receiver = Receiver::start(Policy::status(200)).await;
        let world_without_sql = |sql| Self {
            slot: format!("qb_{}", Uuid::new_v4().simple()),
            state: tempfile::tempdir().expect("state directory"),
            sql,
            db: Some(db),
            cleaned: false,
            receiver,
        };
        let sql = PgPool::connect_lazy("postgres://unused@127.0.0.1/unused").expect("lazy pool");
        let mut world = world_without_sql(sql);
        let launch = Launch::with_config(&world.yaml(&Replica::default(), free_port()));
        let (status, _, stderr) = launch.run(&["migrate"], START).await;
        assert!(status.success(), "migrate failed: {stderr}");
        world.sql = sqlx::postgres::PgPoolOptions::new()
            .max_connections(3)
            .connect(&world.db().url)
            .await
            .expect("connect to the test database");
        if !publication_sql.is_empty() {
            world.db().execute(publication_sql).await;
        }
        world
    }

    /// The usual publication: inserts of the outbox table only.
    async fn standard() -> Self {
        Self::create(
            "CREATE PUBLICATION queuebox_outbox FOR TABLE outbox WITH (publish = 'insert')",
        )
        .await
    }

    fn db(&self) -> &TestDatabase {
        self.db
            .as_ref()
            .expect("the database is dropped only at the end")
    }

    fn state_dir(&self) -> PathBuf {
        self.state.path().join("capture")
    }

    fn yaml(&self, replica: &Replica<'_>, port: u16) -> String {
        let (user, password) = capture_account();
        let capture = match replica.capture {
            None => "  capture:\n    mode: polling\n".to_owned(),
            Some(enabled) => format!(
                "  capture:\n    mode: postgres-logical\n    enabled: {enabled}\n    stateDirectory: {dir}\n\
                 \x20   slot: {slot}\n    publication: {publication}\n    reconciliationIntervalMs: {reconciliation}\n{account}",
                dir = replica
                    .state_dir
                    .map_or_else(|| self.state_dir(), Path::to_path_buf)
                    .display(),
                slot = self.slot,
                publication = replica.publication,
                reconciliation = replica.reconciliation_ms,
                account = match (replica.capture_account, replica.capture_port) {
                    (false, None) => String::new(),
                    (account, port) => format!(
                        "    connection:\n{credentials}{address}",
                        credentials = if account {
                            format!("      username: {user}\n      password: {password}\n")
                        } else {
                            String::new()
                        },
                        address = port.map_or_else(String::new, |port| format!(
                            "      hostname: 127.0.0.1\n      port: {port}\n"
                        )),
                    ),
                },
            ),
        };
        format!(
            "server:\n  httpPort: {port}\n\
             database:\n  url: {url}\n  username: {dbuser}\n  password: {dbpassword}\n  startupTimeoutMs: 10000\n\
             outbox:\n  pollIntervalMs: {poll}\n  retryBaseDelayMs: {retry}\n{capture}\
             destinations:\n  hook:\n    type: http\n    baseUrl: {base}\n    path: /events\n    timeoutMs: 2000\n\
             routes:\n  - topicPattern: \"**\"\n    destination: hook\n",
            url = self.db().jdbc_url(),
            dbuser = self.db().user,
            dbpassword = self.db().password,
            poll = replica.poll_ms,
            retry = replica.retry_base_delay_ms,
            base = self.receiver.url(),
        )
    }

    async fn start(&self, replica: &Replica<'_>) -> Running {
        let port = free_port();
        let mut qb = Launch::with_config(&self.yaml(replica, port)).spawn(&[]);
        qb.wait_live(port, START).await;
        Running { qb, port }
    }

    /// Starts the owner and waits until capture streams.
    async fn start_streaming(&self, replica: &Replica<'_>) -> Running {
        let running = self.start(replica).await;
        running.qb.wait_for_log("capture streaming", START).await;
        running
    }

    /// Starts the owner behind a destination slow enough (4 ms a row) that a backlog of thousands
    /// of rows keeps every claim full for seconds, longer than the pause threshold of one second.
    async fn start_slow_owner(&self) -> Running {
        self.receiver
            .set_policy(Policy::status(200).with_delay(Duration::from_millis(4)));
        self.start_streaming(&Replica::default()).await
    }

    /// Starts a follower: capture mode with `enabled: false`.
    async fn start_follower(&self) -> Running {
        self.start(&Replica {
            capture: Some(false),
            ..Replica::default()
        })
        .await
    }

    /// Inserts one row per look (every 25 ms) until a notice of the owner reaches `follower` (its
    /// subscription is up); returns how many rows it inserted.
    async fn wait_follower_subscribed(&self, follower: &Running) -> usize {
        let mut inserted = 0;
        wait_until("a notice to reach the follower", START, || {
            inserted += 1;
            async {
                self.insert(1, 0).await;
                (follower.peer_wakes().await >= 1.0).then_some(())
            }
        })
        .await;
        inserted
    }

    /// Inserts `n` due rows in one transaction; returns their ids.
    async fn insert(&self, n: usize, delay_ms: i64) -> Vec<Uuid> {
        sqlx::query_scalar(
            "INSERT INTO outbox (topic, payload, scheduled_at) \
             SELECT 'capture.test', jsonb_build_object('n', i), now() + $2 * interval '1 millisecond' \
             FROM generate_series(1, $1) AS i RETURNING id",
        )
        .bind(n as i32)
        .bind(delay_ms)
        .fetch_all(&self.sql)
        .await
        .expect("insert outbox rows")
    }

    async fn sent(&self) -> i64 {
        sqlx::query_scalar("SELECT count(*) FROM outbox WHERE state = 'sent'")
            .fetch_one(&self.sql)
            .await
            .expect("count sent rows")
    }

    /// The slot's confirmed position as a number of bytes, `None` without the slot.
    async fn confirmed(&self) -> Option<i64> {
        sqlx::query_scalar(
            "SELECT (confirmed_flush_lsn - '0/0'::pg_lsn)::bigint FROM pg_replication_slots WHERE slot_name = $1",
        )
        .bind(&self.slot)
        .fetch_optional(&self.sql)
        .await
        .expect("read the slot")
        .flatten()
    }

    async fn current_wal(&self) -> i64 {
        sqlx::query_scalar("SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint")
            .fetch_one(&self.sql)
            .await
            .expect("read the log position")
    }

    /// Waits until `owner` reports capture `status` while the slot's `active` is `active` (a
    /// session streams from it), both seen in one look.
    async fn wait_capture(&self, owner: &Running, status: &str, active: bool) {
        let reported = format!("queuebox_capture_status{{status=\"{status}\"}} 1");
        wait_until(
            &format!("capture {status} with the slot active = {active}"),
            START,
            || async {
                let said = owner.metrics().await.contains(&reported);
                let slot_active: bool = sqlx::query_scalar(
                    "SELECT active FROM pg_replication_slots WHERE slot_name = $1",
                )
                .bind(&self.slot)
                .fetch_one(&self.sql)
                .await
                .expect("read the slot");
                (said && slot_active == active).then_some(())
            },
        )
        .await;
    }

    /// The URL of the test database as the capture account.
    fn capture_url(&self) -> String {
        let (user, password) = capture_account();
        format!(
            "postgres://{user}:{password}@{}/{}",
            self.db().host_port,
            self.db().name
        )
    }

    /// A plain connection to the test database as the capture account.
    async fn connect_as_capture(&self) -> PgConnection {
        PgConnection::connect(&self.capture_url())
            .await
            .expect("connect as the capture account")
    }

    /// Drops the slot as the capture account (a logical slot is dropped from its own database).
    async fn drop_slot(&self) {
        if let Err(error) = drop_replication_slot(&self.capture_url(), &self.slot, START).await {
            panic!("{error}");
        }
    }

    /// Drops the slot and the database; [`Drop`] does the same for a test that panicked first.
    async fn finish(mut self) {
        self.drop_slot().await;
        self.sql.close().await;
        self.cleaned = true;
        if let Some(db) = self.db.take() {
            db.drop_database().await;
        }
    }
}

impl Drop for World {
    /// A test that failed never reached `finish`: its slot would keep WAL and its database forever
    /// (a slot keeps its database from being dropped). The replicas of the test are gone by now
    /// (they are declared after the world and killed on drop), so the slot can be dropped; this
    /// runs on a thread of its own, since `Drop` cannot wait on the test's runtime.
    fn drop(&mut self) {
        if self.cleaned {
            return;
        }
        let Some(db) = self.db.take() else { return };
        let slot = self.slot.clone();
        let cleanup = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for the cleanup");
            runtime.block_on(async move {
                let (user, password) = capture_account();
                let url = format!("postgres://{user}:{password}@{}/{}", db.host_port, db.name);
                // Best effort: the test has failed already, and its own message matters more.
                let _ = drop_replication_slot(&url, &slot, Duration::from_secs(10)).await;
                db.drop_database().await;
            });
        });
        let _ = cleanup.join();
    }
}

impl Running {
    async fn metrics(&self) -> String {
        queuebox_tests::scrape(self.port).await
    }

    /// The notices of the owner this replica has received.
    async fn peer_wakes(&self) -> f64 {
        sample(
            &self.metrics().await,
            "queuebox_capture_wakes_total{origin=\"peer\"}",
        )
    }

    async fn ready(&self) -> (u16, serde_json::Value) {
        let response = queuebox_tests::http()
            .get(format!("http://127.0.0.1:{}/health/ready", self.port))
            .send()
            .await
            .expect("GET /health/ready");
        let status = response.status().as_u16();
        (status, response.json().await.expect("health body"))
    }

    /// Waits until `outbox-capture` is down with an error containing `text`, and checks that the
    /// instance stays ready (the component is advisory).
    async fn wait_capture_down(&self, text: &str) -> String {
        let error = wait_until(
            &format!("outbox-capture down with {text:?}"),
            START,
            || async {
                let (_, body) = self.ready().await;
                let component = &body["components"]["outbox-capture"];
                let error = component["error"].as_str().unwrap_or_default().to_owned();
                (component["status"] == "down" && error.contains(text)).then_some(error)
            },
        )
        .await;
        let (status, body) = self.ready().await;
        assert_eq!(
            status, 200,
            "a capture fault made the instance unready: {body}"
        );
        error
    }

    async fn stop(mut self) {
        self.qb.terminate();
        let status = self.qb.wait_exit(Duration::from_secs(30)).await;
        assert!(status.success(), "exit {status}; log:\n{}", self.qb.log());
    }
}

fn log_count(qb: &QueueBox, text: &str) -> usize {
    queuebox_tests::without_colours(&qb.log())
        .matches(text)
        .count()
}

#[tokio::test]
async fn a_commit_wakes_delivery_although_the_poll_interval_is_a_minute() {
    let world = World::standard().await;
    let owner = world.start_streaming(&Replica::default()).await;
    let (status, body) = owner.ready().await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["components"]["outbox-capture"]["status"], "up",
        "{body}"
    );

    for round in 1..=3 {
        let inserted = Instant::now();
        world.insert(1, 0).await;
        world.receiver.wait_for(round, WOKEN).await;
        assert!(
            inserted.elapsed() < WOKEN,
            "round {round} took {:?}",
            inserted.elapsed()
        );
    }
    // A row can be delivered before capture has counted its commit: a quick claim that follows the
    // previous wake-up may find it first. So the count is awaited, then checked exactly.
    let inserts = "queuebox_capture_changes_total{kind=\"insert\"}";
    let log_wakes = "queuebox_capture_wakes_total{origin=\"log\"}";
    wait_until("capture to count the three inserts", WOKEN, || async {
        let metrics = owner.metrics().await;
        (sample(&metrics, inserts) >= 3.0 && sample(&metrics, log_wakes) >= 3.0).then_some(())
    })
    .await;
    let metrics = owner.metrics().await;
    assert_eq!(sample(&metrics, inserts), 3.0);
    assert_eq!(
        sample(&metrics, "queuebox_capture_status{status=\"streaming\"}"),
        1.0
    );

    // The state the start created: the files, the row, and the slot it tied them to.
    let identity = std::fs::read_to_string(world.state_dir().join("identity")).expect("identity");
    let instance = identity
        .lines()
        .find_map(|l| l.strip_prefix("instance="))
        .expect("instance line")
        .to_owned();
    let (row_instance, fingerprint, owner_host): (String, String, String) = sqlx::query_as(
        "SELECT instance_id::text, settings_fingerprint, owner_host FROM queuebox_capture_state WHERE identity_name = 'queuebox'",
    )
    .fetch_one(&world.sql)
    .await
    .expect("the capture state row");
    assert_eq!(row_instance, instance);
    assert_eq!(fingerprint.len(), 64);
    assert!(owner_host.contains("pid"), "{owner_host}");
    assert!(
        world.confirmed().await.is_some(),
        "the slot was not created"
    );
    owner.stop().await;
    world.finish().await;
}

#[tokio::test]
async fn updates_deletes_and_queuebox_own_writes_do_not_wake() {
    // A publication of every change, so updates and deletes reach capture and must be ignored.
    let world = World::create("CREATE PUBLICATION queuebox_outbox FOR TABLE outbox").await;
    let owner = world.start_streaming(&Replica::default()).await;
    world.insert(3, 0).await;
    world.receiver.wait_for(3, WOKEN).await;
    // QueueBox's own writes (claim, sent) arrive as updates: wait until capture has read them.
    wait_until(
        "the claim and sent updates read as ignored",
        START,
        || async {
            let ignored = sample(
                &owner.metrics().await,
                "queuebox_capture_changes_total{kind=\"ignored\"}",
            );
            (ignored >= 6.0).then_some(())
        },
    )
    .await;
    let wakes_before = sample(
        &owner.metrics().await,
        "queuebox_capture_wakes_total{origin=\"log\"}",
    );
    assert_eq!(
        wakes_before, 1.0,
        "one transaction of three inserts is one wake-up"
    );
    world
        .db()
        .execute("UPDATE outbox SET headers = '{\"x\":\"y\"}'::jsonb; DELETE FROM outbox;")
        .await;
    wait_until(
        "the application's update and delete read",
        START,
        || async {
            let ignored = sample(
                &owner.metrics().await,
                "queuebox_capture_changes_total{kind=\"ignored\"}",
            );
            (ignored >= 12.0).then_some(())
        },
    )
    .await;
    let metrics = owner.metrics().await;
    assert_eq!(
        sample(&metrics, "queuebox_capture_wakes_total{origin=\"log\"}"),
        wakes_before,
        "an update or delete woke delivery"
    );
    assert_eq!(
        sample(&metrics, "queuebox_capture_changes_total{kind=\"insert\"}"),
        3.0
    );
    owner.stop().await;
    world.finish().await;
}

#[tokio::test]
async fn retries_and_future_rows_are_claimed_when_due_without_an_insert() {
    let world = World::standard().await;
    world.receiver.set_policy(Policy::sequence(&[500], 200));
    let owner = world
        .start_streaming(&Replica {
            retry_base_delay_ms: 300,
            ..Replica::default()
        })
        .await;
    // The first answer fails; the retry falls due within about a second and nothing inserts.
    let started = Instant::now();
    world.insert(1, 0).await;
    world.receiver.wait_for(2, Duration::from_secs(8)).await;
    assert!(started.elapsed() < Duration::from_secs(8));
    // A row written for later is delivered when due, not at the next reconciliation pass.
    let started = Instant::now();
    world.insert(1, 1_500).await;
    let requests = world.receiver.wait_for(3, Duration::from_secs(8)).await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(1_400),
        "delivered before it was due: {took:?}"
    );
    assert!(requests[2].succeeded());
    owner.stop().await;
    world.finish().await;
}

#[tokio::test]
async fn the_position_survives_a_restart_without_waking_for_old_log() {
    let world = World::standard().await;
    let owner = world.start_streaming(&Replica::default()).await;
    world.insert(5, 0).await;
    world.insert(5, 0).await;
    world.receiver.wait_for(10, WOKEN).await;
    owner.stop().await;
    let offsets = std::fs::read_to_string(world.state_dir().join("offsets.dat")).expect("offsets");
    assert!(
        offsets.trim().contains('/'),
        "offsets.dat holds {offsets:?}"
    );
    let confirmed = world.confirmed().await.expect("the slot remains");

    let owner = world.start_streaming(&Replica::default()).await;
    assert_eq!(log_count(&owner.qb, "replication slot created"), 0);
    assert_eq!(log_count(&owner.qb, "capture state created"), 0);
    world.insert(1, 0).await;
    world.receiver.wait_for(11, WOKEN).await;
    // Only the new insert was read: the ten before the restart were not streamed again.
    assert_eq!(
        sample(
            &owner.metrics().await,
            "queuebox_capture_changes_total{kind=\"insert\"}"
        ),
        1.0
    );
    assert!(world.confirmed().await.expect("slot") >= confirmed);
    assert_eq!(world.receiver.count(), 11, "a row was delivered twice");
    owner.stop().await;
    world.finish().await;
}

#[tokio::test]
async fn a_second_owner_is_refused_and_keeps_delivering_through_sql() {
    let world = World::standard().await;
    let owner = world.start_streaming(&Replica::default()).await;
    let other_state = tempfile::tempdir().expect("state directory");
    let second = world
        .start(&Replica {
            poll_ms: 100,
            reconciliation_ms: 100,
            state_dir: Some(other_state.path()),
            ..Replica::default()
        })
        .await;
    let error = second.wait_capture_down("already has an owner").await;
    assert!(error.contains("queuebox"), "{error}");
    // The refused replica did not touch its state directory.
    assert!(!other_state.path().join("identity").exists());
    // Stop the owner: the second replica still delivers, through SQL.
    owner.stop().await;
    world.insert(2, 0).await;
    world.receiver.wait_for(2, Duration::from_secs(10)).await;
    second.stop().await;
    world.finish().await;
}

#[tokio::test]
async fn capture_that_has_not_streamed_yet_shows_starting_while_the_instance_is_ready() {
    // A server that takes the connection and never answers holds capture at its start.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = silent.local_addr().expect("local address").port();
    let holder = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            open.push(stream);
        }
    });
    let world = World::standard().await;
    let replica = Replica {
        capture_port: Some(port),
        ..Replica::default()
    };
    let running = world.start(&replica).await;
    let body = wait_until("the instance ready", START, || async {
        let (status, body) = running.ready().await;
        (status == 200).then_some(body)
    })
    .await;
    let component = &body["components"]["outbox-capture"];
    assert_eq!(component["status"], "starting", "{body}");
    assert!(component.get("error").is_none(), "{body}");
    running.stop().await;
    holder.abort();
    world.finish().await;
}

#[tokio::test]
async fn a_replica_that_follows_the_owner_is_woken_by_its_notices() {
    let world = World::standard().await;
    let owner = world.start_streaming(&Replica::default()).await;
    let follower = world.start_follower().await;
    // The follower runs no capture of its own: no state, no outbox-capture component.
    let (_, body) = follower.ready().await;
    assert!(body["components"].get("outbox-capture").is_none(), "{body}");
    let inserted = world.wait_follower_subscribed(&follower).await;
    let before = follower.peer_wakes().await;
    for _ in 0..5 {
        world.insert(1, 0).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    wait_until("five more notices at the follower", WOKEN, || async {
        (follower.peer_wakes().await >= before + 5.0).then_some(())
    })
    .await;
    let total = inserted + 5;
    world.receiver.wait_for(total, WOKEN).await;
    assert_eq!(world.sent().await, total as i64);
    owner.stop().await;
    follower.stop().await;
    world.finish().await;
}

#[tokio::test]
async fn each_reconciliation_fault_stops_capture_and_delivery_goes_on() {
    let world = World::standard().await;
    let polling = Replica {
        reconciliation_ms: 200,
        ..Replica::default()
    };
    let owner = world.start_streaming(&polling).await;
    owner.stop().await;
    let state = world.state_dir();
    let mut delivered = 0;

    // 1. The volume is empty while the database says capture ran.
    let saved = world.state.path().join("saved");
    std::fs::rename(&state, &saved).expect("move the state away");
    let running = world.start(&polling).await;
    running.wait_capture_down("missing or empty").await;
    world.insert(1, 0).await;
    delivered += 1;
    world.receiver.wait_for(delivered, WOKEN).await;
    running.stop().await;
    std::fs::rename(&saved, &state).expect("restore the state");

    // 2. The files belong to another instance.
    let identity_path = state.join("identity");
    let identity = std::fs::read_to_string(&identity_path).expect("identity");
    let forged = identity
        .lines()
        .map(|line| {
            if line.starts_with("instance=") {
                format!("instance={}", Uuid::new_v4())
            } else {
                line.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&identity_path, forged).expect("forge the identity");
    let running = world.start(&polling).await;
    running.wait_capture_down("another instance").await;
    running.stop().await;
    std::fs::write(&identity_path, &identity).expect("restore the identity");

    // 3. The settings changed: another publication, named with its old and new value.
    world
        .db()
        .execute("CREATE PUBLICATION other_pub FOR TABLE outbox WITH (publish = 'insert')")
        .await;
    let running = world
        .start(&Replica {
            publication: "other_pub",
            ..polling
        })
        .await;
    let error = running.wait_capture_down("settings changed").await;
    assert!(
        error.contains("publication: queuebox_outbox -> other_pub"),
        "{error}"
    );
    world.insert(1, 0).await;
    delivered += 1;
    world.receiver.wait_for(delivered, WOKEN).await;
    running.stop().await;

    // 4. The slot is gone while the state remains.
    world.drop_slot().await;
    let running = world.start(&polling).await;
    let error = running.wait_capture_down("is gone").await;
    assert!(error.contains(&world.slot), "{error}");
    assert!(error.contains("docs/concepts/capture.md"), "{error}");
    // A fault that needs a decision is not retried.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(log_count(&running.qb, "capture stopped;"), 1);
    assert_eq!(world.confirmed().await, None, "a new slot was created");
    running.stop().await;

    // The documented reset: delete the row and the files, then start clean.
    world
        .db()
        .execute("DELETE FROM queuebox_capture_state WHERE identity_name = 'queuebox'")
        .await;
    std::fs::remove_dir_all(&state).expect("delete the state files");
    let running = world.start_streaming(&polling).await;
    world.insert(1, 0).await;
    delivered += 1;
    world.receiver.wait_for(delivered, WOKEN).await;
    running.stop().await;
    world.finish().await;
}

#[tokio::test]
async fn start_checks_name_what_to_fix_and_delivery_goes_on() {
    // No publication at all.
    let world = World::create("").await;
    let polling = Replica {
        reconciliation_ms: 200,
        ..Replica::default()
    };
    let running = world.start(&polling).await;
    let error = running.wait_capture_down("CREATE PUBLICATION").await;
    assert!(error.contains("does not exist"), "{error}");
    world.insert(1, 0).await;
    world.receiver.wait_for(1, WOKEN).await;
    // The publication appears: the next attempt (backoff of a few seconds) streams.
    world
        .db()
        .execute("CREATE PUBLICATION queuebox_outbox FOR TABLE inbox")
        .await;
    running
        .wait_capture_down("does not cover the outbox table")
        .await;
    world
        .db()
        .execute("ALTER PUBLICATION queuebox_outbox SET TABLE outbox")
        .await;
    // The backoff has grown to several seconds by now.
    running
        .qb
        .wait_for_log("capture streaming", Duration::from_secs(60))
        .await;
    running.stop().await;

    // An account without the REPLICATION attribute (the database account of the tests).
    let running = world
        .start(&Replica {
            capture_account: false,
            ..polling
        })
        .await;
    let error = running.wait_capture_down("REPLICATION").await;
    assert!(error.contains(&world.db().user), "{error}");
    world.insert(1, 0).await;
    world.receiver.wait_for(2, WOKEN).await;
    running.stop().await;
    world.finish().await;
}

#[tokio::test]
async fn a_dropped_capture_connection_loses_nothing_and_delivery_never_stops() {
    let world = World::standard().await;
    let owner = world
        .start_streaming(&Replica {
            reconciliation_ms: 500,
            ..Replica::default()
        })
        .await;
    let writer = {
        let sql = world.sql.clone();
        tokio::spawn(async move {
            for _ in 0..60 {
                sqlx::query(
                    "INSERT INTO outbox (topic, payload) SELECT 'capture.test', '{}'::jsonb FROM generate_series(1, 5)",
                )
                .execute(&sql)
                .await
                .expect("insert while capture breaks");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    for round in 1..=2 {
        tokio::time::sleep(Duration::from_millis(700)).await;
        // Only the walsender's own role (or a superuser) may end it; other tests' walsenders of
        // that role run on the same server, so the database picks this test's.
        let mut capture = world.connect_as_capture().await;
        let ended: Vec<bool> = sqlx::query_scalar(
            "SELECT pg_terminate_backend(r.pid) FROM pg_stat_replication r JOIN pg_stat_activity a USING (pid) \
             WHERE r.application_name = 'queuebox-capture' AND a.datname = current_database()",
        )
        .fetch_all(&mut capture)
        .await
        .expect("terminate the walsender");
        let _ = capture.close().await;
        assert_eq!(ended, vec![true], "round {round}: no walsender to end");
        // Capture comes back by itself (backoff of one to two seconds).
        wait_until("capture to stream again", START, || async {
            (log_count(&owner.qb, "capture streaming") > round).then_some(())
        })
        .await;
    }
    writer.await.expect("the writer");
    world.receiver.wait_for(300, Duration::from_secs(15)).await;
    assert_eq!(world.sent().await, 300);
    let ids: std::collections::HashSet<String> = world
        .receiver
        .requests()
        .iter()
        .filter_map(|r| r.header("x-message-id").map(str::to_owned))
        .collect();
    assert_eq!(ids.len(), 300, "every row arrived");
    assert!(log_count(&owner.qb, "capture failed") >= 2);
    owner.stop().await;
    world.finish().await;
}

#[tokio::test]
async fn the_slot_confirmed_position_advances_under_load() {
    let world = World::standard().await;
    let owner = world.start_streaming(&Replica::default()).await;
    let start = world.confirmed().await.expect("slot");
    for _ in 0..20 {
        world.insert(50, 0).await;
    }
    let end_of_writes = world.current_wal().await;
    world
        .receiver
        .wait_for(1_000, Duration::from_secs(30))
        .await;
    // The owner confirms what it handled, so the slot releases the log behind it.
    wait_until(
        "the slot to confirm past the last insert",
        START,
        || async {
            let confirmed = world.confirmed().await.unwrap_or(0);
            (confirmed >= end_of_writes).then_some(())
        },
    )
    .await;
    assert!(world.confirmed().await.expect("slot") > start);
    wait_until("the lag gauge", START, || async {
        let metrics = owner.metrics().await;
        metrics
            .contains("queuebox_capture_lag_bytes ")
            .then_some(())
    })
    .await;
    owner.stop().await;
    world.finish().await;
}

#[tokio::test]
async fn a_backlog_pauses_the_stream_and_the_first_commit_after_it_still_wakes_delivery() {
    let world = World::standard().await;
    let owner = world.start_slow_owner().await;
    let backlog = 10_000;
    world.insert(backlog, 0).await;
    let end_of_backlog = world.current_wal().await;
    // Paused: the owner says so and no session streams from the slot, while rows are still left.
    world.wait_capture(&owner, "paused", false).await;
    assert!(
        world.receiver.count() < backlog,
        "the backlog was delivered before capture paused"
    );
    let (status, _) = owner.ready().await;
    assert_eq!(status, 200, "a paused capture made the instance unready");
    world
        .receiver
        .wait_for(backlog, Duration::from_secs(120))
        .await;
    // Streaming again, from past the backlog's log: the slot moved without a stream reading it.
    world.wait_capture(&owner, "streaming", true).await;
    assert!(
        world.confirmed().await.expect("slot") >= end_of_backlog,
        "the slot did not move past the backlog"
    );
    // The poll interval is a minute: only a wake-up of the new stream delivers this row now.
    world.receiver.set_policy(Policy::status(200));
    let ids = world.insert(1, 0).await;
    let delivered = world.receiver.wait_for(backlog + 1, WOKEN).await;
    let id = ids[0].to_string();
    assert!(
        delivered
            .iter()
            .any(|r| r.header("x-message-id") == Some(id.as_str())),
        "the row inserted after the backlog was not delivered"
    );
    assert_eq!(
        world.sent().await,
        i64::try_from(backlog + 1).expect("count")
    );
    assert_eq!(
        log_count(&owner.qb, "capture failed"),
        0,
        "{}",
        owner.qb.log()
    );
    owner.stop().await;
    world.finish().await;
}

#[tokio::test]
async fn a_pause_sends_the_followers_a_notice() {
    let world = World::standard().await;
    let owner = world.start_slow_owner().await;
    let follower = world.start_follower().await;
    let inserted = world.wait_follower_subscribed(&follower).await;
    world.receiver.wait_for(inserted, WOKEN).await;
    let before = follower.peer_wakes().await;
    // One transaction: one notice for its commit. Both replicas then claim full batches for
    // seconds, so the owner pauses, and the pause is the only other source of a notice.
    let backlog = 20_000;
    world.insert(backlog, 0).await;
    world.wait_capture(&owner, "paused", false).await;
    wait_until("the pause's notice at the follower", WOKEN, || async {
        (follower.peer_wakes().await >= before + 2.0).then_some(())
    })
    .await;
    world
        .receiver
        .wait_for(inserted + backlog, Duration::from_secs(120))
        .await;
    world.wait_capture(&owner, "streaming", true).await;
    assert_eq!(
        world.sent().await,
        i64::try_from(inserted + backlog).expect("count")
    );
    owner.stop().await;
    follower.stop().await;
    world.finish().await;
}

#[tokio::test]
async fn a_killed_owner_loses_nothing_and_its_restart_streams_again() {
    let world = World::standard().await;
    let replica = Replica {
        reconciliation_ms: 500,
        ..Replica::default()
    };
    // A short lease, so the rows the killed process held come back soon.
    let short_lease = |yaml: String| {
        yaml.replace(
            "  pollIntervalMs:",
            "  claimTimeoutMs: 2000\n  pollIntervalMs:",
        )
    };
    let port = free_port();
    let mut qb = Launch::with_config(&short_lease(world.yaml(&replica, port))).spawn(&[]);
    qb.wait_live(port, START).await;
    qb.wait_for_log("capture streaming", START).await;
    world.insert(50, 0).await;
    world.receiver.wait_for(1, WOKEN).await;
    qb.kill9();
    let _ = qb.wait_exit(START).await;
    world.insert(50, 0).await;

    let port = free_port();
    let mut qb = Launch::with_config(&short_lease(world.yaml(&replica, port))).spawn(&[]);
    qb.wait_live(port, START).await;
    // The killed session's lock went with its connection: the restart owns the identity again.
    qb.wait_for_log("capture streaming", START).await;
    assert_eq!(log_count(&qb, "already has an owner"), 0);
    wait_until("every row sent", START, || async {
        (world.sent().await == 100).then_some(())
    })
    .await;
    let ids: std::collections::HashSet<String> = world
        .receiver
        .requests()
        .iter()
        .filter(|r| r.succeeded())
        .filter_map(|r| r.header("x-message-id").map(str::to_owned))
        .collect();
    assert_eq!(ids.len(), 100, "every row arrived");
    world.insert(1, 0).await;
    wait_until("a new row woken after the restart", WOKEN, || async {
        (world.sent().await == 101).then_some(())
    })
    .await;
    Running { qb, port }.stop().await;
    world.finish().await;
}
