//! The real `queuebox` binary as a process against a real PostgreSQL: start, answer, stop, fail.

use queuebox_tests::database::TestDatabase;
use queuebox_tests::free_port;
use queuebox_tests::process::Launch;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const START: Duration = Duration::from_secs(30);

fn config(db: &TestDatabase, http_port: u16, extra: &str) -> String {
    format!(
        "server:\n  httpPort: {http_port}\n\
         database:\n  url: {url}\n  username: {user}\n  password: {password}\n  startupTimeoutMs: 10000\n\
         {extra}",
        url = db.jdbc_url(),
        user = db.user,
        password = db.password,
    )
}

async fn get(url: &str) -> reqwest::Response {
    queuebox_tests::http()
        .get(url)
        .send()
        .await
        .unwrap_or_else(|error| panic!("GET {url}: {error}"))
}

#[tokio::test]
async fn serves_root_health_and_metrics_then_stops_cleanly_on_sigterm() {
    let db = TestDatabase::create().await;
    let port = free_port();
    let mut qb = Launch::with_config(&config(&db, port, "")).spawn(&[]);
    qb.wait_live(port, START).await;
    let base = format!("http://127.0.0.1:{port}");

    let root = get(&format!("{base}/")).await;
    assert_eq!(root.status(), 200);
    assert_eq!(root.text().await.expect("body"), "QueueBox is running!");

    let live = get(&format!("{base}/health/live")).await;
    assert_eq!(live.status(), 200);
    let body: serde_json::Value = live.json().await.expect("json");
    assert_eq!(
        body,
        serde_json::json!({"status":"healthy","components":{"process":{"status":"up"}}})
    );

    for path in ["/health/ready", "/health"] {
        let ready = get(&format!("{base}{path}")).await;
        assert_eq!(ready.status(), 200, "{path}");
        let body: serde_json::Value = ready.json().await.expect("json");
        assert_eq!(body["status"], "healthy", "{path}: {body}");
        assert_eq!(
            body["components"]["database"]["status"], "up",
            "{path}: {body}"
        );
    }

    let metrics = get(&format!("{base}/metrics")).await;
    assert_eq!(metrics.status(), 200);
    assert_eq!(
        metrics.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let text = metrics.text().await.expect("body");
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        text.contains(&format!("queuebox{{version=\"{version}\"}} 1")),
        "{text}"
    );
    assert!(text.contains("queuebox_uptime_seconds "), "{text}");
    assert!(
        text.contains("hikaricp_connections_max{pool=\"queuebox\"}"),
        "{text}"
    );

    let missing = get(&format!("{base}/no/such/path")).await;
    assert_eq!(missing.status(), 404);

    // The schema the start applied is there.
    let mut connection = db.connect().await;
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public' AND table_name IN ('outbox','inbox') ORDER BY 1",
    )
    .fetch_all(&mut connection)
    .await
    .expect("query tables");
    assert_eq!(tables, vec!["inbox", "outbox"]);
    drop(connection);

    let stop_started = Instant::now();
    qb.terminate();
    let status = qb.wait_exit(Duration::from_secs(15)).await;
    assert!(status.success(), "exit status {status}; log:\n{}", qb.log());
    // The HTTP drain is bounded by 5 s and nothing is in flight, so the stop is quick.
    assert!(
        stop_started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        stop_started.elapsed()
    );
    db.drop_database().await;
}

#[tokio::test]
async fn readiness_turns_503_when_the_database_refuses_connections() {
    let db = TestDatabase::create().await;
    let port = free_port();
    let mut qb = Launch::with_config(&config(&db, port, "")).spawn(&[]);
    qb.wait_live(port, START).await;
    let url = format!("http://127.0.0.1:{port}/health/ready");
    assert_eq!(get(&url).await.status(), 200);

    db.refuse_connections().await;

    let started = Instant::now();
    let body = queuebox_tests::wait_until("readiness 503", Duration::from_secs(20), || async {
        let response = get(&url).await;
        (response.status() == 503).then_some(())?;
        response.json::<serde_json::Value>().await.ok()
    })
    .await;
    assert_eq!(body["status"], "unhealthy", "{body}");
    assert_eq!(body["components"]["database"]["status"], "down", "{body}");
    // Each check is bounded by 3 s, so one answer never takes much longer than that.
    assert!(started.elapsed() < Duration::from_secs(20));
    // Liveness does not depend on the database.
    assert_eq!(
        get(&format!("http://127.0.0.1:{port}/health/live"))
            .await
            .status(),
        200
    );

    qb.terminate();
    assert!(
        qb.wait_exit(Duration::from_secs(20)).await.success(),
        "{}",
        qb.log()
    );
    db.drop_database().await;
}

#[tokio::test]
async fn a_management_port_takes_health_and_metrics_off_the_data_port() {
    let db = TestDatabase::create().await;
    let port = free_port();
    let management = free_port();
    let yaml = config(&db, port, "").replace(
        "server:\n",
        &format!("server:\n  managementPort: {management}\n"),
    );
    let mut qb = Launch::with_config(&yaml).spawn(&[]);
    qb.wait_live(management, START).await;

    for path in [
        "/health/live",
        "/health/ready",
        "/health",
        "/metrics",
        "/admin/replay",
    ] {
        let on_data = get(&format!("http://127.0.0.1:{port}{path}")).await;
        assert_eq!(on_data.status(), 404, "data port {path}");
    }
    for path in ["/health/live", "/health/ready", "/health", "/metrics"] {
        let on_management = get(&format!("http://127.0.0.1:{management}{path}")).await;
        assert_eq!(on_management.status(), 200, "management port {path}");
    }
    assert_eq!(
        get(&format!("http://127.0.0.1:{port}/")).await.status(),
        200
    );

    qb.terminate();
    assert!(qb.wait_exit(Duration::from_secs(15)).await.success());
    db.drop_database().await;
}

#[tokio::test]
async fn a_body_over_the_cap_gets_413_declared_or_chunked() {
    let db = TestDatabase::create().await;
    let port = free_port();
    let mut qb = Launch::with_config(&config(&db, port, "inbox:\n  maxBodyBytes: 64\n")).spawn(&[]);
    qb.wait_live(port, START).await;

    let declared = queuebox_tests::http()
        .post(format!("http://127.0.0.1:{port}/"))
        .body(vec![b'x'; 65])
        .send()
        .await
        .expect("post");
    assert_eq!(declared.status(), 413);
    let body: serde_json::Value = declared.json().await.expect("json");
    assert_eq!(
        body,
        serde_json::json!({"error": "Request body exceeds 64 bytes"})
    );

    // A chunked body declares no length: the cap is applied while it streams.
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let mut request = String::from(
        "POST / HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
    );
    for _ in 0..5 {
        request.push_str("10\r\n0123456789abcdef\r\n");
    }
    request.push_str("0\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut answer = String::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_string(&mut answer)).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(
        answer.contains(r#"{"error":"Request body exceeds 64 bytes"}"#),
        "{answer}"
    );

    // A body under the cap passes.
    let small = queuebox_tests::http()
        .post(format!("http://127.0.0.1:{port}/"))
        .body(vec![b'x'; 64])
        .send()
        .await
        .expect("post");
    assert_ne!(small.status(), 413);

    qb.terminate();
    assert!(qb.wait_exit(Duration::from_secs(15)).await.success());
    db.drop_database().await;
}

#[tokio::test]
async fn an_unreachable_database_fails_the_start_within_the_startup_timeout() {
    let closed = free_port();
    let yaml = format!(
        "server:\n  httpPort: {}\ndatabase:\n  url: jdbc:postgresql://127.0.0.1:{closed}/queuebox\n  username: queuebox\n  password: pa55-word-never-printed\n  startupTimeoutMs: 1500\n",
        free_port()
    );
    let started = Instant::now();
    let (status, _stdout, stderr) = Launch::with_config(&yaml)
        .run(&[], Duration::from_secs(30))
        .await;
    assert!(!status.success(), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert!(stderr.contains(&format!("127.0.0.1:{closed}")), "{stderr}");
    assert!(!stderr.contains("pa55-word-never-printed"), "{stderr}");
}

#[tokio::test]
async fn an_invalid_configuration_exits_1_naming_the_key_and_its_variable() {
    let yaml = "database:\n  url: jdbc:postgresql://127.0.0.1:5432/queuebox\n  username: queuebox\n  password: x\noutbox:\n  batchSize: 0\n";
    let (status, _stdout, stderr) = Launch::with_config(yaml)
        .run(&["check-config"], Duration::from_secs(30))
        .await;
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("outbox.batchSize"), "{stderr}");
    assert!(stderr.contains("QUEUEBOX_OUTBOX_BATCHSIZE"), "{stderr}");

    // The same file as `serve` refuses to start, with the same message.
    let (status, _stdout, stderr) = Launch::with_config(yaml)
        .run(&[], Duration::from_secs(30))
        .await;
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("QUEUEBOX_OUTBOX_BATCHSIZE"), "{stderr}");
}

#[tokio::test]
async fn check_config_prints_the_effective_configuration_with_secrets_masked() {
    let launch = Launch::with_config(
        "database:\n  url: postgres://queuebox:url-secret-1@127.0.0.1:5432/queuebox\n  username: queuebox\n  password: ${DB_PASSWORD}\n\
         sources:\n  stripe:\n    type: http\n    path: /stripe\n    idempotencyKeyPath: $.id\n    eventTypePath: $.type\n    auth:\n      type: hmac\n      secret: file-secret-3\n",
    )
    .env("DB_PASSWORD", "env-secret-2");
    let (status, stdout, stderr) = launch.run(&["check-config"], Duration::from_secs(30)).await;
    assert!(status.success(), "{stderr}");
    for secret in ["url-secret-1", "env-secret-2", "file-secret-3"] {
        assert!(!stdout.contains(secret), "{secret} leaked:\n{stdout}");
        assert!(!stderr.contains(secret), "{secret} leaked:\n{stderr}");
    }
    assert!(stdout.contains("Secret(***)"), "{stdout}");
    assert!(stdout.contains("stripe"), "{stdout}");
}

#[tokio::test]
async fn migrate_applies_the_schema_and_exits() {
    let db = TestDatabase::create().await;
    let launch = Launch::with_config(&config(&db, free_port(), "  migrate: false\n"));
    let (status, _stdout, stderr) = launch.run(&["migrate"], Duration::from_secs(60)).await;
    assert!(status.success(), "{stderr}");
    let mut connection = db.connect().await;
    let sequence_column: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM information_schema.columns WHERE table_name = 'outbox' AND column_name = 'sequence'",
    )
    .fetch_one(&mut connection)
    .await
    .expect("query");
    assert_eq!(sequence_column, 1);
    drop(connection);
    db.drop_database().await;
}

#[tokio::test]
async fn the_schema_guard_stops_the_start_with_the_alter_table_statement() {
    let db = TestDatabase::create().await;
    // The schema by hand, as an older release left it: every migration up to V9, so no inbox headers
    // and no outbox sequence.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations/postgres");
    for version in 1..=9 {
        let file = std::fs::read_dir(&dir)
            .expect("migrations directory")
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .find(|path| {
                path.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&format!("V{version}__")))
            })
            .unwrap_or_else(|| panic!("migration V{version} exists"));
        db.execute(&std::fs::read_to_string(file).expect("read migration"))
            .await;
    }
    let launch = Launch::with_config(&config(&db, free_port(), "  migrate: false\n"));
    let (status, _stdout, stderr) = launch.run(&[], Duration::from_secs(60)).await;
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains(r#"ALTER TABLE "inbox" ADD COLUMN "headers""#),
        "{stderr}"
    );
    assert!(
        stderr.contains(r#"ALTER TABLE "outbox" ADD COLUMN "sequence""#),
        "{stderr}"
    );
    db.drop_database().await;
}

#[tokio::test]
async fn logs_to_a_file_carry_no_colour_escapes() {
    // stderr is a file here, as under a service manager or a container runtime.
    let closed = free_port();
    let yaml = format!(
        "server:\n  httpPort: {}\ndatabase:\n  url: jdbc:postgresql://127.0.0.1:{closed}/queuebox\n  username: queuebox\n  password: x\n  startupTimeoutMs: 800\n",
        free_port()
    );
    let (status, _stdout, stderr) = Launch::with_config(&yaml)
        .run(&[], Duration::from_secs(30))
        .await;
    assert!(!status.success(), "{stderr}");
    assert!(stderr.contains("WARN"), "no log line to look at: {stderr}");
    assert!(
        !stderr.contains('\u{1b}'),
        "colour escapes in a file: {stderr:?}"
    );
}

#[tokio::test]
async fn a_destination_on_a_private_address_is_refused_by_its_key_before_the_database() {
    // The database is unreachable and may be waited for a minute: the refusal must come first.
    let closed = free_port();
    let head = format!(
        "server:\n  httpPort: {}\ndatabase:\n  url: jdbc:postgresql://127.0.0.1:{closed}/queuebox\n  username: queuebox\n  password: x\n  startupTimeoutMs: 60000\n\
         http:\n  blockPrivateAddresses: true\nroutes:\n  - topicPattern: \"**\"\n    destination: hook\n",
        free_port()
    );
    let cases = [
        (
            "destinations:\n  hook:\n    type: http\n    baseUrl: http://10.1.2.3:8080\n",
            "destinations.hook.baseUrl (QUEUEBOX_DESTINATIONS_HOOK_BASEURL): host `10.1.2.3` resolves to 10.1.2.3, a private address",
        ),
        (
            "destinations:\n  hook:\n    type: http\n    baseUrl: http://93.184.216.34\n\
             \x20   auth:\n      type: oauth2\n      clientId: qb\n      clientSecret: s\n      tokenUrl: http://127.0.0.1:9/token\n",
            "destinations.hook.auth.tokenUrl (QUEUEBOX_DESTINATIONS_HOOK_AUTH_TOKENURL): host `127.0.0.1` resolves to 127.0.0.1, a loopback address",
        ),
    ];
    for (destinations, expected) in cases {
        let started = Instant::now();
        let (status, _stdout, stderr) = Launch::with_config(&format!("{head}{destinations}"))
            .run(&[], Duration::from_secs(30))
            .await;
        assert!(!status.success(), "{stderr}");
        assert!(stderr.contains(expected), "{stderr}");
        assert!(!stderr.contains("database not reachable"), "{stderr}");
        assert!(started.elapsed() < Duration::from_secs(20), "{stderr}");
    }
}
