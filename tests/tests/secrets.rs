//! No configured secret reaches the output: the real binary runs with every secret-bearing value it
//! has today, meets receivers that echo credentials back and token endpoints that fail, and then its
//! whole log, its stdout, every `last_error` and every stored header set are searched for each
//! secret (and for the credentials derived from them on the wire).

use hmac::{Hmac, KeyInit, Mac};
use queuebox_tests::database::TestDatabase;
use queuebox_tests::free_port;
use queuebox_tests::process::Launch;
use queuebox_tests::receiver::{Policy, Receiver, Recorded};
use queuebox_tests::wait_until;
use sha2::Sha256;
use sqlx::PgPool;
use std::time::Duration;
use uuid::Uuid;

const START: Duration = Duration::from_secs(30);
const SETTLE: Duration = Duration::from_secs(30);

/// A random secret value; the label keeps a failure readable and the uuid makes it unguessable
/// and absent from any text QueueBox could print by chance.
fn secret(label: &str) -> String {
    format!("{label}-{}", Uuid::new_v4().simple())
}

/// Every secret of one run, with a name for the failure message.
struct Secrets(Vec<(&'static str, String)>);

impl Secrets {
    fn get(&self, name: &str) -> &str {
        self.0
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("no secret {name}"))
    }

    fn add(&mut self, name: &'static str, value: String) {
        self.0.push((name, value));
    }

    /// The names of the secrets that `text` contains.
    fn found_in(&self, text: &str) -> Vec<&'static str> {
        self.0
            .iter()
            .filter(|(_, value)| text.contains(value.as_str()))
            .map(|(name, _)| *name)
            .collect()
    }

    /// Fails naming every secret that `text` (described by `what`) contains.
    fn assert_absent(&self, what: &str, text: &str) {
        let found = self.found_in(text);
        assert!(found.is_empty(), "{what} leaks {found:?}:\n{text}");
    }

    /// Every value is long and random enough that finding it can only mean a leak, and no value
    /// is part of another (which would blur which one leaked).
    fn assert_non_trivial(&self) {
        for (name, value) in &self.0 {
            assert!(
                value.len() >= 20,
                "{name} is too short to search for: {value}"
            );
            for (other, other_value) in &self.0 {
                assert!(
                    name == other || !other_value.contains(value.as_str()),
                    "{name} is part of {other}"
                );
            }
        }
    }
}

fn hmac256(secret: &str, data: &str) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).expect("key");
    mac.update(data.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// The credential part of every `Authorization` value a receiver saw (`Basic <this>`,
/// `Bearer <this>`): derived from a configured secret, so as secret as it.
fn wire_credentials(requests: &[Recorded]) -> Vec<String> {
    requests
        .iter()
        .flat_map(|r| r.header_values("authorization"))
        .filter_map(|value| {
            value
                .split_once(' ')
                .map(|(_, credential)| credential.to_owned())
        })
        .collect()
}

/// The configuration of the run; `database` is the `database:` section.
fn config(
    database: &str,
    port: u16,
    echo: &str,
    token: &str,
    failing_token: &str,
    s: &Secrets,
    dir: &std::path::Path,
) -> String {
    let oauth_file = dir.join("oauth-client-secret");
    std::fs::write(&oauth_file, format!("{}\n", s.get("oauth2 clientSecret")))
        .expect("write the client secret file");
    let key_file = dir.join("api-key");
    std::fs::write(&key_file, format!("{}\n", s.get("source api-key")))
        .expect("write the api key file");
    format!(
        "server:\n  httpPort: {port}\n\
         {database}\
         http:\n  maxErrorBodyBytes: 65536\n\
         outbox:\n  pollIntervalMs: 50\n  retryBaseDelayMs: 20\n  maxAttempts: 2\n\
         inbox:\n  relay:\n    pollIntervalMs: 50\n\
         destinations:\n\
         \x20 basic:\n    type: http\n    baseUrl: {echo}\n    path: /basic\n    timeoutMs: 5000\n\
         \x20   auth:\n      type: basic\n      username: qb-user\n      password: {basic}\n\
         \x20 header:\n    type: http\n    baseUrl: {echo}\n    path: /header\n    timeoutMs: 5000\n\
         \x20   auth:\n      type: header\n      headerName: X-Upstream-Key\n      headerValue: ${{HEADER_VALUE}}\n\
         \x20 oauth:\n    type: http\n    baseUrl: {echo}\n    path: /oauth\n    timeoutMs: 5000\n\
         \x20   auth:\n      type: oauth2\n      clientId: qb-client\n      clientSecret: file:{oauth_file}\n      tokenUrl: {token}/token\n\
         \x20 tokenfail:\n    type: http\n    baseUrl: {echo}\n    path: /tokenfail\n    timeoutMs: 5000\n\
         \x20   auth:\n      type: oauth2\n      clientId: qb-client\n      tokenUrl: {failing_token}/token\n\
         \x20 rabbit:\n    type: rabbitmq\n    url: ${{RABBIT_URL}}\n    exchange: \"events.{{{{ aggregateType }}}}\"\n\
         \x20 kafka:\n    type: kafka\n    bootstrapServers: 127.0.0.1:9092\n    topic: orders\n    securityProtocol: SASL_SSL\n\
         \x20   saslMechanism: SCRAM-SHA-512\n    saslUsername: qb\n    saslPassword: {sasl}\n\
         \x20 natsuser:\n    type: nats\n    servers: nats://127.0.0.1:4222\n    subject: orders\n    username: qb\n    password: {nats_password}\n\
         \x20 natstoken:\n    type: nats\n    servers: nats://127.0.0.1:4222\n    subject: orders\n    token: ${{NATS_TOKEN}}\n\
         admin:\n  enabled: true\n  auth:\n    type: bearer\n    token: ${{ADMIN_TOKEN}}\n\
         routes:\n\
         \x20 - topicPattern: \"basic.**\"\n    destination: basic\n\
         \x20 - topicPattern: \"header.**\"\n    destination: header\n\
         \x20 - topicPattern: \"oauth.**\"\n    destination: oauth\n\
         \x20 - topicPattern: \"tokenfail.**\"\n    destination: tokenfail\n\
         sources:\n\
         \x20 bearer:\n    type: http\n    path: /bearer\n    idempotencyKeyPath: $.id\n    eventTypePath: $.type\n\
         \x20   auth:\n      type: bearer\n      token: ${{BEARER_TOKEN}}\n\
         \x20 partner:\n    type: http\n    path: /partner\n    idempotencyKeyPath: $.id\n    eventTypePath: $.type\n\
         \x20   auth:\n      type: api-key\n      headerName: X-Partner-Key\n      key: file:{key_file}\n\
         \x20 signed:\n    type: http\n    path: /signed\n    idempotencyKeyPath: $.id\n    eventTypePath: $.type\n\
         \x20   auth:\n      type: hmac\n      secret: {hmac}\n      headerName: X-Signature\n      signaturePrefix: \"sha256=\"\n",
        oauth_file = oauth_file.display(),
        key_file = key_file.display(),
        basic = s.get("webhook basic password"),
        hmac = s.get("source hmac secret"),
        sasl = s.get("kafka saslPassword"),
        nats_password = s.get("nats password"),
    )
}

/// The secrets that reach the binary through the environment: a `${...}` placeholder each, and one
/// `QUEUEBOX_` variable that supplies a key the file leaves out.
fn with_env(launch: Launch, s: &Secrets) -> Launch {
    launch
        .env("HEADER_VALUE", s.get("webhook header value"))
        .env("BEARER_TOKEN", s.get("source bearer token"))
        .env("NATS_TOKEN", s.get("nats token"))
        .env("ADMIN_TOKEN", s.get("admin token"))
        .env(
            "RABBIT_URL",
            &format!(
                "amqp://qb:{}@127.0.0.1:5672/%2f",
                s.get("rabbitmq url password")
            ),
        )
        .env(
            "QUEUEBOX_DESTINATIONS_TOKENFAIL_AUTH_CLIENTSECRET",
            s.get("failing oauth2 clientSecret"),
        )
}

async fn post(port: u16, path: &str, headers: &[(&str, &str)], body: &str) -> u16 {
    let mut request = queuebox_tests::http()
        .post(format!("http://127.0.0.1:{port}{path}"))
        .header("content-type", "application/json")
        .body(body.to_owned());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.expect("POST").status().as_u16()
}

/// `POST /admin/replay` with `authorization`; the status and the body.
async fn admin_replay(port: u16, authorization: &str, body: &str) -> (u16, String) {
    admin_post(port, "/admin/replay", authorization, body).await
}

/// `POST <path>` on the admin routes with `authorization`; the status and the body.
async fn admin_post(port: u16, path: &str, authorization: &str, body: &str) -> (u16, String) {
    let response = queuebox_tests::http()
        .post(format!("http://127.0.0.1:{port}{path}"))
        .header("Authorization", authorization)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap_or_else(|error| panic!("POST {path}: {error}"));
    let status = response.status().as_u16();
    (status, response.text().await.expect("admin answer"))
}

async fn texts(sql: &PgPool, query: &'static str) -> Vec<String> {
    sqlx::query_scalar(query)
        .fetch_all(sql)
        .await
        .unwrap_or_else(|error| panic!("{query}: {error}"))
}

#[tokio::test]
async fn no_configured_secret_reaches_the_log_last_error_or_stored_headers() {
    let mut s = Secrets(Vec::new());
    for name in [
        "webhook basic password",
        "webhook header value",
        "oauth2 clientSecret",
        "failing oauth2 clientSecret",
        "oauth2 access token",
        "source bearer token",
        "source api-key",
        "source hmac secret",
        // Parsed, validated and printed here; the RabbitMQ password on live connections has its
        // own test below (Kafka and NATS connections come with their adapters).
        "kafka saslPassword",
        "nats password",
        "nats token",
        "rabbitmq url password",
        "admin token",
    ] {
        s.add(name, secret(&name.replace(' ', "_")));
    }
    s.assert_non_trivial();
    // The search itself finds a secret where there is one.
    assert_eq!(
        s.found_in(&format!("x{}y", s.get("source api-key"))),
        vec!["source api-key"]
    );

    let echo = Receiver::start(Policy::echo(500)).await;
    let token = Receiver::start(Policy::json(
        200,
        &format!(
            r#"{{"access_token":"{}","token_type":"Bearer","expires_in":3600}}"#,
            s.get("oauth2 access token")
        ),
    ))
    .await;
    let failing_token = Receiver::start(Policy::echo(401)).await;

    let db = TestDatabase::create().await;
    let port = free_port();
    // The test server's password is `queuebox`, too common a word to search a log for; the
    // database password is searched for in its own run below, with a long wrong one.
    let database = format!(
        "database:\n  url: {}\n  username: {}\n  password: {}\n  startupTimeoutMs: 10000\n",
        db.jdbc_url(),
        db.user,
        db.password
    );
    let files = tempfile::tempdir().expect("a folder for the secret files");
    let yaml = config(
        &database,
        port,
        &echo.url(),
        &token.url(),
        &failing_token.url(),
        &s,
        files.path(),
    );
    let launch = with_env(Launch::with_config(&yaml), &s);
    let mut qb = launch.env("RUST_LOG", "debug").spawn(&[]);
    qb.wait_live(port, START).await;
    let sql = db.pool().await;

    // Outbox rows for every destination.
    for topic in [
        "basic.created",
        "header.created",
        "oauth.created",
        "tokenfail.created",
    ] {
        sqlx::query(
            "INSERT INTO outbox (topic, payload, max_attempts) VALUES ($1, '{\"n\":1}'::jsonb, 2)",
        )
        .bind(topic)
        .execute(&sql)
        .await
        .expect("insert an outbox row");
    }

    // Each source accepts its own credential; the relay forwards the rows to the echo receiver.
    let bearer = format!("Bearer {}", s.get("source bearer token"));
    let body = r#"{"id":"b1","type":"basic.from-bearer"}"#;
    assert_eq!(
        post(port, "/inbox/bearer", &[("Authorization", &bearer)], body).await,
        202
    );
    let body = r#"{"id":"p1","type":"header.from-partner"}"#;
    assert_eq!(
        post(
            port,
            "/inbox/partner",
            &[("X-Partner-Key", s.get("source api-key"))],
            body
        )
        .await,
        202
    );
    let body = r#"{"id":"h1","type":"oauth.from-signed"}"#;
    let signature = format!("sha256={}", hmac256(s.get("source hmac secret"), body));
    assert_eq!(
        post(port, "/inbox/signed", &[("X-Signature", &signature)], body).await,
        202
    );

    // And refuses the other secrets, sent where they do not belong.
    let misplaced = format!("Bearer {}", s.get("source api-key"));
    for (path, header, value, id) in [
        ("/inbox/bearer", "Authorization", misplaced.as_str(), "b2"),
        (
            "/inbox/partner",
            "X-Partner-Key",
            s.get("source hmac secret"),
            "p2",
        ),
        (
            "/inbox/signed",
            "X-Signature",
            s.get("source bearer token"),
            "h2",
        ),
    ] {
        let body = format!(r#"{{"id":"{id}","type":"x"}}"#);
        assert_eq!(
            post(port, path, &[(header, value)], &body).await,
            401,
            "{path}"
        );
    }

    // Four inserted rows and three relayed ones all fail twice and end dead.
    let dead = || async {
        let errors = texts(
            &sql,
            "SELECT coalesce(last_error, '') FROM outbox WHERE state = 'dead'",
        )
        .await;
        (errors.len() == 7).then_some(errors)
    };
    wait_until("7 dead outbox rows", SETTLE, dead).await;
    let token_failures = failing_token.count();

    // The admin route refuses the wrong token and replays the token-less row with the right one,
    // which fails at the token endpoint once more.
    let wrong = format!("Bearer {}", s.get("source bearer token"));
    let refused = admin_replay(port, &wrong, r#"{"destination":"tokenfail"}"#).await;
    assert_eq!(refused.0, 401, "{refused:?}");
    let right = format!("Bearer {}", s.get("admin token"));
    // The transform test route: refused with a wrong credential, answered with the right one.
    let test_body =
        r#"{"expression":"{\"seen\": $, \"topic\": $topic}","payload":{"a":1},"mockTopic":"t.x"}"#;
    let refused_test = admin_post(port, "/admin/transform/test", &wrong, test_body).await;
    assert_eq!(refused_test.0, 401, "{refused_test:?}");
    let tested = admin_post(port, "/admin/transform/test", &right, test_body).await;
    assert_eq!(tested.0, 200, "{tested:?}");
    assert!(tested.1.contains(r#""topic":"t.x""#), "{tested:?}");
    let replayed = admin_replay(port, &right, r#"{"destination":"tokenfail"}"#).await;
    assert_eq!(replayed, (200, r#"{"moved":1}"#.to_owned()));
    wait_until("the replayed row to fail again", SETTLE, || async {
        (failing_token.count() >= token_failures + 3).then_some(())
    })
    .await;
    let last_errors = wait_until("7 dead outbox rows again", SETTLE, dead).await;
    let topics_and_errors: Vec<(String, String)> =
        sqlx::query_as("SELECT topic, last_error FROM outbox ORDER BY topic")
            .fetch_all(&sql)
            .await
            .expect("read last_error");
    for (topic, error) in &topics_and_errors {
        if topic.starts_with("tokenfail.") {
            assert!(error.contains("401"), "{topic}: {error}");
        } else {
            assert!(error.contains("HTTP 500"), "{topic}: {error}");
        }
        // The echo made it into last_error, and something in it was masked.
        assert!(error.contains("values |"), "{topic}: {error}");
        assert!(error.contains("***"), "{topic}: {error}");
    }

    // The credentials really travelled, so their absence below means masking, not disuse.
    let echoed = echo.requests();
    let on = |path: &'static str| echoed.iter().filter(move |r| r.path == path);
    assert!(on("/basic").all(|r| {
        r.header("authorization")
            .is_some_and(|v| v.starts_with("Basic "))
    }));
    assert!(
        on("/header").all(|r| r.header("x-upstream-key") == Some(s.get("webhook header value")))
    );
    assert!(on("/oauth").all(|r| r.header("authorization")
        == Some(format!("Bearer {}", s.get("oauth2 access token")).as_str())));
    assert_eq!(
        on("/basic").count(),
        6,
        "max_attempts 2: three deliveries of each of 2 rows"
    );
    assert_eq!(on("/header").count(), 6);
    assert_eq!(on("/oauth").count(), 6);
    assert_eq!(on("/tokenfail").count(), 0, "no token, no request");
    let token_requests = token.requests();
    assert!(!token_requests.is_empty());
    assert!(
        String::from_utf8_lossy(&token_requests[0].body).contains(s.get("oauth2 clientSecret"))
    );
    let failed_token_requests = failing_token.requests();
    assert!(
        failed_token_requests.len() >= 2,
        "one token request per attempt"
    );
    assert!(
        String::from_utf8_lossy(&failed_token_requests[0].body)
            .contains(s.get("failing oauth2 clientSecret"))
    );
    // `Basic <base64 of user:password>` and `Bearer <token>` as sent are as secret as their source.
    let mut credentials = wire_credentials(&echoed);
    credentials.sort();
    credentials.dedup();
    assert!(credentials.len() >= 2, "{credentials:?}");
    for credential in credentials {
        if !s.0.iter().any(|(_, value)| *value == credential) {
            s.add("a credential on the wire", credential);
        }
    }

    let headers = texts(
        &sql,
        "SELECT headers::text FROM inbox UNION ALL SELECT headers::text FROM outbox",
    )
    .await;
    sql.close().await;
    qb.terminate();
    let status = qb.wait_exit(Duration::from_secs(30)).await;
    let log = qb.log();
    assert!(status.success(), "exit {status}; log:\n{log}");

    // The log is the real thing: it shows the traffic that carried the secrets.
    for line in [
        "inbox source served",
        "inbox request refused: credentials",
        "delivery failed; the row will be tried again",
        "row moved to dead",
        "fetched an OAuth2 token",
        // The Kafka producer's failed SASL_SSL attempts against the plaintext test broker.
        "librdkafka",
        "admin request refused",
        "outbox rows replayed",
    ] {
        assert!(log.contains(line), "the log lacks {line:?}:\n{log}");
    }
    s.assert_absent("the serve log", &log);
    s.assert_absent(
        "the admin answers",
        &format!("{refused:?} {replayed:?} {refused_test:?} {tested:?}"),
    );
    s.assert_absent("serve stdout", &qb.stdout());
    for error in &last_errors {
        s.assert_absent("last_error", error);
    }
    for header_set in &headers {
        s.assert_absent("stored headers", header_set);
    }

    // check-config prints the effective configuration: masked, in text and JSON log formats.
    for args in [
        &["check-config"][..],
        &["check-config", "--log-format", "json"][..],
    ] {
        let (status, stdout, stderr) = with_env(Launch::with_config(&yaml), &s)
            .run(args, Duration::from_secs(30))
            .await;
        assert!(status.success(), "{args:?}: {stderr}");
        assert!(stdout.contains("Secret(***)"), "{stdout}");
        assert!(stdout.contains("tokenfail"), "{stdout}");
        s.assert_absent("check-config stdout", &stdout);
        s.assert_absent("check-config stderr", &stderr);
    }
    db.drop_database().await;
}

#[tokio::test]
async fn a_database_password_is_never_printed_when_the_connection_fails() {
    let db = TestDatabase::create().await;
    let wrong = secret("database_password");
    let files = tempfile::tempdir().expect("a folder for the secret file");
    let password_file = files.path().join("db-password");
    std::fs::write(&password_file, format!("{wrong}\n")).expect("write the password file");
    let as_file = format!(
        "server:\n  httpPort: {}\ndatabase:\n  url: {}\n  username: {}\n  password: file:{}\n  startupTimeoutMs: 2000\n",
        free_port(),
        db.jdbc_url(),
        db.user,
        password_file.display()
    );
    // The same wrong password inside a `postgres://` URL, where no `password` key masks it.
    let in_url = format!(
        "server:\n  httpPort: {}\ndatabase:\n  url: postgres://{}:{wrong}@{}/{}\n  startupTimeoutMs: 2000\n",
        free_port(),
        db.user,
        db.host_port,
        db.name
    );
    for yaml in [&as_file, &in_url] {
        for args in [&[][..], &["migrate"][..], &["check-config"][..]] {
            let (status, stdout, stderr) = Launch::with_config(yaml)
                .env("RUST_LOG", "debug")
                .run(args, Duration::from_secs(60))
                .await;
            if args == ["check-config"] {
                assert!(status.success(), "{stderr}");
                assert!(!stdout.is_empty());
            } else {
                // The password was sent and refused, and the refusal was reported.
                assert_eq!(status.code(), Some(1), "{args:?}: {stderr}");
                assert!(
                    stderr.contains("password authentication failed"),
                    "{args:?}: {stderr}"
                );
            }
            for (what, text) in [("stdout", &stdout), ("stderr", &stderr)] {
                assert!(
                    !text.contains(&wrong),
                    "{args:?} {what} leaks the password:\n{text}"
                );
            }
        }
    }
    db.drop_database().await;
}

#[tokio::test]
async fn a_rabbitmq_password_is_never_printed_by_live_connections() {
    let amqp = std::env::var("QB_TEST_AMQP_URL").unwrap_or_else(|_| {
        panic!("QB_TEST_AMQP_URL is not set: start the services first with `eval \"$(bash scripts/services.sh)\"`")
    });
    // The broker on the test machine, with a user that does not exist and a password that is a
    // secret: every connection of the destination and of the source is refused at login, so the
    // refusal's text goes into the log, `last_error` and `/health/ready`.
    let password = secret("rabbit_live");
    let host = amqp
        .split('@')
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .expect("host:port in QB_TEST_AMQP_URL");
    let url = format!("amqp://qb-nobody:{password}@{host}/%2f");
    let db = TestDatabase::create().await;
    let port = free_port();
    let yaml = format!(
        "server:\n  httpPort: {port}\n\
         database:\n  url: {}\n  username: {}\n  password: {}\n  startupTimeoutMs: 10000\n\
         outbox:\n  pollIntervalMs: 50\n  retryBaseDelayMs: 20\n  maxAttempts: 2\n\
         inbox:\n  relay:\n    enabled: false\n\
         destinations:\n  rabbit:\n    type: rabbitmq\n    url: ${{RABBIT_URL}}\n    exchange: events\n\
         routes:\n  - topicPattern: \"**\"\n    destination: rabbit\n\
         sources:\n  queue:\n    type: rabbitmq\n    queueName: nowhere\n    connectionUrl: ${{RABBIT_URL}}\n    idempotencyKeyPath: $.id\n",
        db.jdbc_url(),
        db.user,
        db.password
    );
    let mut qb = Launch::with_config(&yaml)
        .env("RABBIT_URL", &url)
        .env("RUST_LOG", "debug")
        .spawn(&[]);
    qb.wait_live(port, START).await;
    let sql = db.pool().await;
    sqlx::query("INSERT INTO outbox (topic, payload) VALUES ('t', '{\"n\":1}'::jsonb)")
        .execute(&sql)
        .await
        .expect("insert");
    let last_error = wait_until("the row to go dead", SETTLE, || async {
        let row: Option<(String, Option<String>)> =
            sqlx::query_as("SELECT state, last_error FROM outbox WHERE state = 'dead'")
                .fetch_optional(&sql)
                .await
                .expect("read");
        row.map(|(_, error)| error.unwrap_or_default())
    })
    .await;
    let health = wait_until("the source to report its refusal", SETTLE, || async {
        let body = queuebox_tests::http()
            .get(format!("http://127.0.0.1:{port}/health/ready"))
            .send()
            .await
            .expect("GET /health/ready")
            .text()
            .await
            .expect("text");
        (body.contains("rabbitmq.queue") && body.contains("down")).then_some(body)
    })
    .await;
    let metrics = queuebox_tests::http()
        .get(format!("http://127.0.0.1:{port}/metrics"))
        .send()
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("text");
    qb.terminate();
    qb.wait_exit(Duration::from_secs(20)).await;
    let log = qb.log();
    // The connections were really tried: the refusals are there, naming the cause.
    assert!(!last_error.is_empty());
    assert!(log.contains("ACCESS_REFUSED"), "{log}");
    let encoded = password.replace('_', "%5F");
    for (place, text) in [
        ("last_error", &last_error),
        ("/health/ready", &health),
        ("/metrics", &metrics),
        ("the log", &log),
    ] {
        assert!(
            !text.contains(&password),
            "the password is in {place}: {text}"
        );
        assert!(
            !text.contains(&encoded),
            "the encoded password is in {place}"
        );
    }
    sql.close().await;
    db.drop_database().await;
}
