//! TLS to PostgreSQL end to end: the local server presents a certificate for the IP 127.0.0.1,
//! signed by a CA that `scripts/services.sh` makes (`QB_TEST_PG_CA`); a second CA signed nothing
//! the server presents (`QB_TEST_PG_OTHER_CA`). The pool and the capture connection both follow the
//! URL's `sslmode`.

use queuebox_tests::database::{TestDatabase, drop_replication_slot};
use queuebox_tests::free_port;
use queuebox_tests::process::Launch;
use queuebox_tests::receiver::{Policy, Receiver};
use sqlx::{Connection, PgConnection};
use std::time::Duration;

const START: Duration = Duration::from_secs(30);

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: start the services first with `eval \"$(bash scripts/services.sh)\"`")
    })
}

fn yaml(db: &TestDatabase, port: u16, host: &str, query: &str, extra: &str) -> String {
    format!(
        "server:\n  httpPort: {port}\n\
         database:\n  url: jdbc:postgresql://{host}:{db_port}/{name}?{query}\n  username: {user}\n  password: {password}\n  startupTimeoutMs: 1500\n\
         outbox:\n  pollIntervalMs: 60000\n{extra}",
        db_port = db.host_port.rsplit(':').next().unwrap_or("5432"),
        name = db.name,
        user = db.user,
        password = db.password,
    )
}

/// Whether every session of `application_name` on the database uses TLS, and how many there are,
/// as `url` sees them (the TLS columns of another role's sessions are hidden).
async fn tls_sessions(db: &TestDatabase, url: &str, application_name: &str) -> (i64, bool) {
    let mut connection = PgConnection::connect(url).await.expect("connect");
    let row: (i64, Option<bool>) = sqlx::query_as(
        "SELECT count(*), bool_and(s.ssl) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
         WHERE a.datname = $1 AND a.application_name = $2",
    )
    .bind(&db.name)
    .bind(application_name)
    .fetch_one(&mut connection)
    .await
    .expect("read pg_stat_ssl");
    let _ = connection.close().await;
    (row.0, row.1.unwrap_or(false))
}

#[tokio::test]
async fn verify_full_with_the_ca_runs_the_pool_and_capture_over_tls() {
    let db = TestDatabase::create().await;
    let receiver = Receiver::start(Policy::status(200)).await;
    let (capture_user, capture_password) = env("QB_TEST_PG_CAPTURE_ACCOUNT")
        .split_once(':')
        .map(|(u, p)| (u.to_owned(), p.to_owned()))
        .expect("user:password");
    let state = tempfile::tempdir().expect("state directory");
    let slot = format!("qb_tls_{}", uuid::Uuid::new_v4().simple());
    let query = format!("sslmode=verify-full&sslrootcert={}", env("QB_TEST_PG_CA"));
    let capture = format!(
        "  capture:\n    mode: postgres-logical\n    enabled: true\n    stateDirectory: {dir}\n    slot: {slot}\n    reconciliationIntervalMs: 60000\n\
         \x20   connection:\n      username: {capture_user}\n      password: {capture_password}\n\
         destinations:\n  hook:\n    type: http\n    baseUrl: {base}\n    path: /events\n\
         routes:\n  - topicPattern: \"**\"\n    destination: hook\n",
        dir = state.path().display(),
        base = receiver.url(),
    );
    let port = free_port();
    let launch = Launch::with_config(&yaml(&db, port, "127.0.0.1", &query, &capture));
    let (status, _, stderr) = launch.run(&["migrate"], START).await;
    assert!(status.success(), "migrate over TLS failed: {stderr}");
    db.execute("CREATE PUBLICATION queuebox_outbox FOR TABLE outbox WITH (publish = 'insert')")
        .await;
    let mut qb = launch.spawn(&[]);
    qb.wait_live(port, START).await;
    qb.wait_for_log("capture streaming", START).await;
    // Everything is read first and asserted only after the slot is gone, so a failure does not
    // leave a slot behind (it would keep WAL and its database).
    let (pooled, all_tls) = tls_sessions(&db, &db.url, "queuebox").await;
    let capture_url = format!(
        "postgres://{capture_user}:{capture_password}@{}/{}",
        db.host_port, db.name
    );
    let (walsenders, capture_tls) = tls_sessions(&db, &capture_url, "queuebox-capture").await;
    db.execute("INSERT INTO outbox (topic, payload) VALUES ('tls.test', '{}')")
        .await;
    let delivered = tokio::time::timeout(Duration::from_secs(5), async {
        while receiver.count() == 0 {
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    })
    .await
    .is_ok();
    qb.terminate();
    let status = qb.wait_exit(START).await;
    // The slot outlives QueueBox by design; drop it so the database can go.
    let dropped = drop_replication_slot(&capture_url, &slot, START).await;
    db.drop_database().await;
    assert!(status.success(), "{}", qb.log());
    assert_eq!(dropped, Ok(()));
    assert!(
        pooled > 0 && all_tls,
        "{pooled} pool sessions, all TLS: {all_tls}"
    );
    assert!(
        walsenders == 1 && capture_tls,
        "{walsenders} capture sessions, TLS: {capture_tls}"
    );
    assert!(
        delivered,
        "the row was not delivered over TLS; log:\n{}",
        qb.log()
    );
}

#[tokio::test]
async fn a_certificate_of_another_ca_fails_the_start_naming_it() {
    let db = TestDatabase::create().await;
    let query = format!(
        "sslmode=verify-ca&sslrootcert={}",
        env("QB_TEST_PG_OTHER_CA")
    );
    let launch = Launch::with_config(&yaml(&db, free_port(), "127.0.0.1", &query, ""));
    let (status, _, stderr) = launch.run(&[], START).await;
    let stderr = queuebox_tests::without_colours(&stderr);
    assert!(!status.success(), "started with the wrong CA: {stderr}");
    assert!(stderr.contains("refused the connection"), "{stderr}");
    assert!(stderr.contains("UnknownIssuer"), "{stderr}");
    assert!(stderr.contains("check sslrootcert"), "{stderr}");
    // A certificate refusal is a setting to fix: the start stops at the first try, not after
    // retrying for startupTimeoutMs.
    assert!(!stderr.contains("retrying"), "{stderr}");
    assert!(!stderr.contains(&format!(":{}@", db.password)), "{stderr}");
    db.drop_database().await;
}

#[tokio::test]
async fn verify_full_to_a_name_the_certificate_does_not_hold_fails_the_start() {
    let db = TestDatabase::create().await;
    // The certificate names the IP 127.0.0.1, not `localhost`.
    let query = format!("sslmode=verify-full&sslrootcert={}", env("QB_TEST_PG_CA"));
    let launch = Launch::with_config(&yaml(&db, free_port(), "localhost", &query, ""));
    let (status, _, stderr) = launch.run(&[], START).await;
    let stderr = queuebox_tests::without_colours(&stderr);
    assert!(!status.success(), "started despite the name: {stderr}");
    assert!(
        stderr.contains("certificate not valid for name \"localhost\""),
        "{stderr}"
    );
    assert!(stderr.contains("check sslrootcert"), "{stderr}");
    db.drop_database().await;
}

#[tokio::test]
async fn require_encrypts_without_checking_the_certificate() {
    let db = TestDatabase::create().await;
    let port = free_port();
    let launch = Launch::with_config(&yaml(&db, port, "127.0.0.1", "sslmode=require", ""));
    let mut qb = launch.spawn(&[]);
    qb.wait_live(port, START).await;
    let (pooled, all_tls) = tls_sessions(&db, &db.url, "queuebox").await;
    assert!(
        pooled > 0 && all_tls,
        "{pooled} pool sessions, all TLS: {all_tls}"
    );
    qb.terminate();
    let status = qb.wait_exit(START).await;
    assert!(status.success(), "{}", qb.log());
    db.drop_database().await;
}
