//! The admin routes end to end: the real binary, real PostgreSQL, requests over HTTP.
//!
//! Covers the ports table (404 when disabled, 404 on the data port with a management port), the
//! credential kinds of `admin.auth` (bearer, api-key, hmac) and `admin.insecure`, the refused start,
//! the status table of `POST /admin/replay` row by row, and every replay filter against real rows,
//! including a destination behind overlapping route patterns.
//!
//! Unless a test says otherwise the dispatcher polls once an hour, so a replayed row stays
//! `pending` where the test can read it: what a test sees is what the replay wrote.

use hmac::{Hmac, KeyInit, Mac};
use queuebox_tests::database::TestDatabase;
use queuebox_tests::process::{Launch, QueueBox};
use queuebox_tests::receiver::{Policy, Receiver};
use queuebox_tests::{free_port, wait_until, without_colours};
use serde_json::{Value, json};
use sha2::Sha256;
use sqlx::{PgPool, Row};
use std::collections::{BTreeSet, HashMap};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use uuid::Uuid;

const START: Duration = Duration::from_secs(30);
const TOKEN: &str = "adm1n-t0ken";
const MAX_PAYLOAD: usize = 512;

/// Destinations and routes with overlapping patterns: `order.created` matches the first two routes
/// and goes to billing (first match), every other `order.*` goes to archive, everything else to
/// audit. The addresses are never called while the dispatcher sleeps.
const ROUTES: &str = "\
destinations:
  billing:
    type: http
    baseUrl: http://127.0.0.1:9
  archive:
    type: http
    baseUrl: http://127.0.0.1:9
  audit:
    type: http
    baseUrl: http://127.0.0.1:9
routes:
  - topicPattern: order.created
    destination: billing
  - topicPattern: \"order.*\"
    destination: archive
  - topicPattern: \"**\"
    destination: audit
";

/// One database and one `queuebox serve`.
struct Admin {
    db: TestDatabase,
    port: u16,
    management: Option<u16>,
    qb: QueueBox,
    sql: PgPool,
    http: reqwest::Client,
}

/// What a route answered.
#[derive(Debug)]
struct Answer {
    status: u16,
    text: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.text))
    }

    fn moved(&self) -> u64 {
        assert_eq!(self.status, 200, "{self:?}");
        self.json()["moved"].as_u64().expect("moved is a count")
    }
}

impl Admin {
    /// Starts with the `admin` section `admin`, the routes above, `extra` sections, and a dispatcher
    /// that polls every `poll_ms`.
    async fn start_with(admin: &str, extra: &str, management: bool, poll_ms: u64) -> Self {
        let db = TestDatabase::create().await;
        let port = free_port();
        let management = management.then(free_port);
        let management_line = management
            .map(|p| format!("  managementPort: {p}\n"))
            .unwrap_or_default();
        let yaml = format!(
            "server:\n  httpPort: {port}\n{management_line}\
             database:\n  url: {url}\n  username: {user}\n  password: {password}\n  startupTimeoutMs: 10000\n\
             outbox:\n  pollIntervalMs: {poll_ms}\n\
             {admin}{extra}",
            url = db.jdbc_url(),
            user = db.user,
            password = db.password,
        );
        let mut qb = Launch::with_config(&yaml).spawn(&[]);
        qb.wait_live(management.unwrap_or(port), START).await;
        let sql = sqlx::postgres::PgPoolOptions::new()
            .max_connections(2)
            .connect(&db.url)
            .await
            .expect("connect to the test database");
        Self {
            db,
            port,
            management,
            qb,
            sql,
            http: queuebox_tests::http(),
        }
    }

    async fn start(admin: &str) -> Self {
        Self::start_with(admin, ROUTES, false, 3_600_000).await
    }

    /// The port the admin routes are on.
    fn admin_port(&self) -> u16 {
        self.management.unwrap_or(self.port)
    }

    async fn post_to(&self, port: u16, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
        let mut request = self
            .http
            .post(format!("http://127.0.0.1:{port}{path}"))
            .header("content-type", "application/json")
            .body(body.to_owned());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.expect("POST");
        let status = response.status().as_u16();
        let text = response.text().await.expect("body");
        Answer { status, text }
    }

    async fn post(&self, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
        self.post_to(self.admin_port(), path, headers, body).await
    }

    /// `POST /admin/replay` with the bearer token.
    async fn replay(&self, filter: Value) -> Answer {
        self.post(
            "/admin/replay",
            &[("authorization", &format!("Bearer {TOKEN}"))],
            &filter.to_string(),
        )
        .await
    }

    /// Inserts one row in `state`, created `age_hours` ago, and returns its id.
    async fn insert(&self, topic: &str, state: &str, age_hours: i64) -> Uuid {
        sqlx::query_scalar(
            "INSERT INTO outbox (topic, payload, state, created_at) \
             VALUES ($1, '{}'::jsonb, $2, now() - $3 * interval '1 hour') RETURNING id",
        )
        .bind(topic)
        .bind(state)
        .bind(age_hours)
        .fetch_one(&self.sql)
        .await
        .expect("insert an outbox row")
    }

    async fn state(&self, id: Uuid) -> String {
        sqlx::query_scalar("SELECT state FROM outbox WHERE id = $1")
            .bind(id)
            .fetch_one(&self.sql)
            .await
            .expect("read the state")
    }

    /// The ids of `rows` that are pending now although they were not before.
    async fn moved_rows(&self, rows: &HashMap<Uuid, &str>) -> BTreeSet<Uuid> {
        let mut moved = BTreeSet::new();
        for (id, before) in rows {
            if *before != "pending" && self.state(*id).await == "pending" {
                moved.insert(*id);
            }
        }
        moved
    }

    /// Puts every row of `rows` back in its original state.
    async fn restore(&self, rows: &HashMap<Uuid, &str>) {
        for (id, state) in rows {
            sqlx::query("UPDATE outbox SET state = $2 WHERE id = $1")
                .bind(id)
                .bind(*state)
                .execute(&self.sql)
                .await
                .expect("restore a row");
        }
    }

    async fn stop(mut self) {
        self.sql.close().await;
        self.qb.terminate();
        let status = self.qb.wait_exit(Duration::from_secs(15)).await;
        assert!(status.success(), "exit {status}; log:\n{}", self.qb.log());
        self.db.drop_database().await;
    }
}

fn bearer_admin() -> String {
    format!(
        "admin:\n  enabled: true\n  maxPayloadBytes: {MAX_PAYLOAD}\n  auth:\n    type: bearer\n    token: {TOKEN}\n"
    )
}

fn hmac256(secret: &str, data: &str) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).expect("key");
    mac.update(data.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

fn set(ids: &[Uuid]) -> BTreeSet<Uuid> {
    ids.iter().copied().collect()
}

// ------------------------------------------------------------------------------------------------
// Where the routes are
// ------------------------------------------------------------------------------------------------

#[tokio::test]
async fn the_admin_routes_do_not_exist_when_admin_is_disabled() {
    let admin = Admin::start_with("", ROUTES, false, 3_600_000).await;
    let dead = admin.insert("order.created", "dead", 1).await;
    let bearer = format!("Bearer {TOKEN}");
    for path in ["/admin/replay", "/admin/transform/test"] {
        let answer = admin
            .post(
                path,
                &[("authorization", &bearer)],
                r#"{"topic":"order.created"}"#,
            )
            .await;
        assert_eq!(answer.status, 404, "{path}: {answer:?}");
    }
    assert_eq!(admin.state(dead).await, "dead");
    admin.stop().await;
}

#[tokio::test]
async fn with_a_management_port_the_admin_routes_answer_only_there() {
    let admin = Admin::start_with(&bearer_admin(), ROUTES, true, 3_600_000).await;
    let dead = admin.insert("order.paid", "dead", 1).await;
    let bearer = format!("Bearer {TOKEN}");
    let body = json!({ "ids": [dead] }).to_string();

    for path in ["/admin/replay", "/admin/transform/test"] {
        let on_data = admin
            .post_to(admin.port, path, &[("authorization", &bearer)], &body)
            .await;
        assert_eq!(on_data.status, 404, "{path} on the data port: {on_data:?}");
    }
    assert_eq!(admin.state(dead).await, "dead", "nothing moved");

    let on_management = admin.replay(json!({ "ids": [dead] })).await;
    assert_eq!(on_management.moved(), 1);
    // Out of `dead`: pending, or already claimed when the dispatcher's first poll ran late (a
    // loaded machine) and found the replayed row.
    let state = admin.state(dead).await;
    assert!(
        state == "pending" || state == "processing",
        "the replayed row is {state}"
    );
    admin.stop().await;
}

// ------------------------------------------------------------------------------------------------
// Credentials
// ------------------------------------------------------------------------------------------------

#[tokio::test]
async fn bearer_refuses_missing_and_wrong_tokens_and_moves_nothing() {
    let admin = Admin::start(&bearer_admin()).await;
    let dead = admin.insert("order.paid", "dead", 1).await;
    let body = json!({ "ids": [dead] }).to_string();
    let cases: [(&[(&str, &str)], &str); 4] = [
        (&[], "Missing Authorization header"),
        (
            &[("authorization", "Bearer wrong-token")],
            "Invalid bearer token",
        ),
        (
            &[("authorization", "Basic YWRtaW46YWRtaW4=")],
            "Authorization header does not carry a Bearer token",
        ),
        (&[("x-api-key", TOKEN)], "Missing Authorization header"),
    ];
    for (headers, reason) in cases {
        let answer = admin.post("/admin/replay", headers, &body).await;
        assert_eq!(answer.status, 401, "{headers:?}: {answer:?}");
        assert_eq!(answer.json(), json!({ "error": reason }), "{headers:?}");
        assert!(!answer.text.contains(TOKEN), "no credential in {answer:?}");
    }
    assert_eq!(
        admin.state(dead).await,
        "dead",
        "a refused request moves nothing"
    );

    // The scheme in another letter case passes.
    let answer = admin
        .post(
            "/admin/replay",
            &[("authorization", &format!("bearer {TOKEN}"))],
            &body,
        )
        .await;
    assert_eq!(answer.moved(), 1);
    admin.stop().await;
}

#[tokio::test]
async fn api_key_reads_its_header() {
    let admin = Admin::start(
        "admin:\n  enabled: true\n  auth:\n    type: api-key\n    headerName: X-Admin-Key\n    key: k-123\n",
    )
    .await;
    let dead = admin.insert("order.paid", "dead", 1).await;
    let body = json!({ "ids": [dead] }).to_string();
    let missing = admin.post("/admin/replay", &[], &body).await;
    assert_eq!(missing.status, 401);
    assert_eq!(
        missing.json(),
        json!({ "error": "Missing API key header X-Admin-Key" })
    );
    let wrong = admin
        .post("/admin/replay", &[("x-admin-key", "k-124")], &body)
        .await;
    assert_eq!(wrong.status, 401);
    assert_eq!(
        wrong.json(),
        json!({ "error": "Invalid API key in header X-Admin-Key" })
    );
    let bearer = admin
        .post("/admin/replay", &[("authorization", "Bearer k-123")], &body)
        .await;
    assert_eq!(bearer.status, 401, "{bearer:?}");
    assert_eq!(admin.state(dead).await, "dead");

    let right = admin
        .post("/admin/replay", &[("x-admin-key", "k-123")], &body)
        .await;
    assert_eq!(right.moved(), 1);
    admin.stop().await;
}

#[tokio::test]
async fn hmac_checks_the_signature_of_the_raw_body() {
    let admin =
        Admin::start("admin:\n  enabled: true\n  auth:\n    type: hmac\n    secret: whsec-admin\n")
            .await;
    let dead = admin.insert("order.paid", "dead", 1).await;
    let body = json!({ "ids": [dead] }).to_string();
    let missing = admin.post("/admin/replay", &[], &body).await;
    assert_eq!(missing.status, 401);
    assert_eq!(
        missing.json(),
        json!({ "error": "Missing signature header X-Signature" })
    );
    let other_key = format!("sha256={}", hmac256("another-secret", &body));
    let other_body = format!(
        "sha256={}",
        hmac256(
            "whsec-admin",
            &json!({ "ids": [Uuid::new_v4()] }).to_string()
        )
    );
    for signature in [other_key.as_str(), other_body.as_str(), "sha256=00"] {
        let wrong = admin
            .post("/admin/replay", &[("x-signature", signature)], &body)
            .await;
        assert_eq!(wrong.status, 401, "{signature}: {wrong:?}");
        assert_eq!(
            wrong.json(),
            json!({ "error": "Invalid signature in header X-Signature" })
        );
    }
    assert_eq!(admin.state(dead).await, "dead");

    let right = format!("sha256={}", hmac256("whsec-admin", &body));
    let answer = admin
        .post("/admin/replay", &[("x-signature", &right)], &body)
        .await;
    assert_eq!(answer.moved(), 1, "HMAC works on the admin routes");
    assert_eq!(admin.state(dead).await, "pending");
    admin.stop().await;
}

#[tokio::test]
async fn insecure_admin_routes_need_no_credentials() {
    let admin = Admin::start("admin:\n  enabled: true\n  insecure: true\n").await;
    let dead = admin.insert("order.paid", "dead", 1).await;
    let answer = admin
        .post("/admin/replay", &[], &json!({ "ids": [dead] }).to_string())
        .await;
    assert_eq!(answer.moved(), 1);
    assert!(
        admin.qb.log().contains("admin.insecure is true"),
        "the start warns about it:\n{}",
        admin.qb.log()
    );
    admin.stop().await;
}

#[tokio::test]
async fn the_start_is_refused_when_admin_is_enabled_without_auth() {
    let db = TestDatabase::create().await;
    let port = free_port();
    let yaml = format!(
        "server:\n  httpPort: {port}\n\
         database:\n  url: {url}\n  username: {user}\n  password: {password}\n  startupTimeoutMs: 10000\n\
         admin:\n  enabled: true\n",
        url = db.jdbc_url(),
        user = db.user,
        password = db.password,
    );
    let (status, _stdout, stderr) = Launch::with_config(&yaml)
        .run(&[], Duration::from_secs(30))
        .await;
    assert!(!status.success(), "the start must fail; log:\n{stderr}");
    assert!(
        stderr.contains("admin.enabled") && stderr.contains("admin.auth"),
        "the error names the keys:\n{stderr}"
    );
    db.drop_database().await;
}

// ------------------------------------------------------------------------------------------------
// The status table of POST /admin/replay
// ------------------------------------------------------------------------------------------------

#[tokio::test]
async fn replay_answers_every_row_of_its_status_table() {
    let admin = Admin::start(&bearer_admin()).await;
    let bearer = format!("Bearer {TOKEN}");
    let auth: &[(&str, &str)] = &[("authorization", &bearer)];
    let dead = admin.insert("order.paid", "dead", 1).await;

    // 400: no filter at all, also when only unknown fields or nulls are sent.
    for body in ["{}", r#"{"dryRun":true}"#, r#"{"topic":null}"#] {
        let answer = admin.post("/admin/replay", auth, body).await;
        assert_eq!(answer.status, 400, "{body}: {answer:?}");
        assert_eq!(
            answer.json(),
            json!({ "error": "A replay needs at least one filter." })
        );
    }

    // 400: not a valid request, with the reason after the documented prefix.
    for (body, names) in [
        ("not json", "the body is not JSON"),
        ("[1,2]", "the body must be a JSON object"),
        (r#"{"ids":["not-a-uuid"]}"#, "ids: "),
        (r#"{"topics":"order.paid"}"#, "topics: "),
        (r#"{"topic":5}"#, "topic: "),
        (r#"{"createdAfter":"yesterday"}"#, "createdAfter: "),
        (r#"{"createdBefore":1700000000}"#, "createdBefore: "),
    ] {
        let answer = admin.post("/admin/replay", auth, body).await;
        assert_eq!(answer.status, 400, "{body}: {answer:?}");
        let error = answer.json()["error"].as_str().expect("error").to_owned();
        assert!(
            error.starts_with(&format!("Invalid request: {names}")),
            "{body}: {error}"
        );
    }

    // 413: declared and chunked bodies over admin.maxPayloadBytes, before the credentials.
    let large = format!(r#"{{"topic":"{}"}}"#, "x".repeat(MAX_PAYLOAD));
    let too_large = json!({ "error": format!("Request body exceeds {MAX_PAYLOAD} bytes") });
    for headers in [auth, &[]] {
        let answer = admin.post("/admin/replay", headers, &large).await;
        assert_eq!(answer.status, 413, "{answer:?}");
        assert_eq!(answer.json(), too_large);
    }
    let chunked = chunked_post(admin.admin_port(), "/admin/replay", &bearer, &large).await;
    assert!(chunked.starts_with("HTTP/1.1 413"), "{chunked}");
    assert!(
        chunked.ends_with(&too_large.to_string()),
        "chunked answer body: {chunked}"
    );
    // A body of exactly the cap passes the cap.
    let padding = MAX_PAYLOAD - r#"{"ids":[""],"pad":""}"#.len() - 36;
    let exact = format!(r#"{{"ids":["{dead}"],"pad":"{}"}}"#, "p".repeat(padding));
    assert_eq!(exact.len(), MAX_PAYLOAD);
    assert_eq!(admin.state(dead).await, "dead", "nothing moved so far");

    // 200: an unknown field is ignored; the answer counts the moved rows.
    let answer = admin.post("/admin/replay", auth, &exact).await;
    assert_eq!(answer.json(), json!({ "moved": 1 }));
    assert_eq!(admin.state(dead).await, "pending");
    let again = admin.replay(json!({ "ids": [dead] })).await;
    assert_eq!(
        again.json(),
        json!({ "moved": 0 }),
        "a pending row never moves"
    );

    // The replay is logged with its filter and its count.
    admin
        .qb
        .wait_for_log("outbox rows replayed", Duration::from_secs(5))
        .await;
    let log = without_colours(&admin.qb.log());
    let line = log
        .lines()
        .find(|line| line.contains("outbox rows replayed") && line.contains("moved=1"))
        .unwrap_or_else(|| panic!("no replay line with its count:\n{log}"));
    assert!(line.contains(&dead.to_string()), "the filter is in {line}");
    admin.stop().await;
}

/// Sends `body` with chunked transfer encoding (no `Content-Length`) and returns the raw answer.
async fn chunked_post(port: u16, path: &str, bearer: &str, body: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {bearer}\r\n\
         Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n\
         {:x}\r\n{body}\r\n0\r\n\r\n",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .await
        .expect("send the request");
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).into_owned()
}

// ------------------------------------------------------------------------------------------------
// The filters against real rows
// ------------------------------------------------------------------------------------------------

#[tokio::test]
async fn each_filter_moves_exactly_its_sent_and_dead_rows() {
    let admin = Admin::start(&bearer_admin()).await;
    // (name, topic, state, age in hours); the comments give each row's destination.
    let specs = [
        ("created_sent", "order.created", "sent", 1), // billing
        ("created_dead", "order.created", "dead", 1), // billing
        ("created_pending", "order.created", "pending", 1), // billing, never moves
        ("paid_dead", "order.paid", "dead", 1),       // archive
        ("paid_processing", "order.paid", "processing", 1), // archive, never moves
        ("invoice_sent", "invoice.sent", "sent", 1),  // audit
        ("invoice_old", "invoice.sent", "dead", 48),  // audit
        ("shipped_old", "order.shipped", "sent", 48), // archive
    ];
    let mut ids = HashMap::new();
    let mut rows: HashMap<Uuid, &str> = HashMap::new();
    for (name, topic, state, age) in specs {
        let id = admin.insert(topic, state, age).await;
        ids.insert(name, id);
        rows.insert(id, state);
    }
    let id = |name: &str| ids[name];
    let day_ago = (chrono_now_minus_hours(&admin, 24)).await;

    let cases: Vec<(Value, Vec<Uuid>)> = vec![
        (
            json!({ "ids": [id("created_sent"), id("created_pending"), id("paid_dead")] }),
            vec![id("created_sent"), id("paid_dead")],
        ),
        (
            json!({ "topic": "order.created" }),
            vec![id("created_sent"), id("created_dead")],
        ),
        (
            json!({ "topics": ["order.paid", "invoice.sent"] }),
            vec![id("paid_dead"), id("invoice_sent"), id("invoice_old")],
        ),
        // order.created also matches order.* but the first route sends it to billing.
        (
            json!({ "destination": "billing" }),
            vec![id("created_sent"), id("created_dead")],
        ),
        (
            json!({ "destination": "archive" }),
            vec![id("paid_dead"), id("shipped_old")],
        ),
        (
            json!({ "destination": "audit" }),
            vec![id("invoice_sent"), id("invoice_old")],
        ),
        // With topics, only the topics in both sets: order.created is not archive's.
        (
            json!({ "destination": "archive", "topics": ["order.created", "order.paid"] }),
            vec![id("paid_dead")],
        ),
        (
            json!({ "destination": "billing", "topics": ["order.paid"] }),
            vec![],
        ),
        (json!({ "destination": "nowhere" }), vec![]),
        (
            json!({ "createdAfter": day_ago }),
            vec![
                id("created_sent"),
                id("created_dead"),
                id("paid_dead"),
                id("invoice_sent"),
            ],
        ),
        (
            json!({ "createdBefore": day_ago }),
            vec![id("invoice_old"), id("shipped_old")],
        ),
        (
            json!({ "destination": "audit", "createdAfter": day_ago }),
            vec![id("invoice_sent")],
        ),
        (
            json!({ "ids": [id("invoice_old")], "topic": "order.created" }),
            vec![],
        ),
        (json!({ "ids": [] }), vec![]),
    ];
    for (filter, expected) in cases {
        let answer = admin.replay(filter.clone()).await;
        assert_eq!(answer.moved(), expected.len() as u64, "{filter}");
        assert_eq!(admin.moved_rows(&rows).await, set(&expected), "{filter}");
        for never in ["created_pending", "paid_processing"] {
            assert_eq!(
                admin.state(id(never)).await,
                rows[&id(never)],
                "{filter}: {never}"
            );
        }
        admin.restore(&rows).await;
    }
    admin.stop().await;
}

/// The database clock minus `hours`, as ISO-8601 text (the rows' `created_at` comes from it too).
async fn chrono_now_minus_hours(admin: &Admin, hours: i64) -> String {
    sqlx::query_scalar(
        "SELECT to_char((now() - $1 * interval '1 hour') AT TIME ZONE 'UTC', \
                'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')",
    )
    .bind(hours)
    .fetch_one(&admin.sql)
    .await
    .expect("read the clock")
}

#[tokio::test]
async fn a_replayed_row_is_reset_and_keeps_its_identity() {
    let admin = Admin::start(&bearer_admin()).await;
    let id: Uuid = sqlx::query_scalar(
        "INSERT INTO outbox (topic, key, payload, headers, state, attempt, max_attempts, \
             scheduled_at, updated_at, claimed_at, claim_token, lease_expires_at, last_error) \
         VALUES ('order.paid', 'k1', '{\"total\":5}', '{\"X-Tenant\":\"acme\"}', 'dead', 5, 5, \
             now() + interval '1 hour', now() - interval '1 hour', now() - interval '1 hour', \
             gen_random_uuid(), now() - interval '30 minutes', 'HTTP 500 from billing') \
         RETURNING id",
    )
    .fetch_one(&admin.sql)
    .await
    .expect("insert a dead row");
    let sequence: i64 = sqlx::query_scalar("SELECT sequence FROM outbox WHERE id = $1")
        .bind(id)
        .fetch_one(&admin.sql)
        .await
        .expect("sequence");

    assert_eq!(admin.replay(json!({ "ids": [id] })).await.moved(), 1);

    let row = sqlx::query(
        "SELECT state, attempt, last_error, sequence, payload::text AS payload, headers::text AS headers, \
                claimed_at IS NULL AND claim_token IS NULL AND lease_expires_at IS NULL AS unclaimed, \
                scheduled_at <= now() AND scheduled_at > now() - interval '1 minute' AS due_now, \
                updated_at > now() - interval '1 minute' AS updated_now \
           FROM outbox WHERE id = $1",
    )
    .bind(id)
    .fetch_one(&admin.sql)
    .await
    .expect("read back");
    assert_eq!(row.get::<String, _>("state"), "pending");
    assert_eq!(row.get::<i32, _>("attempt"), 0);
    assert_eq!(row.get::<Option<String>, _>("last_error"), None);
    assert_eq!(row.get::<i64, _>("sequence"), sequence);
    assert_eq!(row.get::<String, _>("payload"), r#"{"total": 5}"#);
    assert_eq!(row.get::<String, _>("headers"), r#"{"X-Tenant": "acme"}"#);
    for flag in ["unclaimed", "due_now", "updated_now"] {
        assert!(row.get::<bool, _>(flag), "{flag}");
    }
    admin.stop().await;
}

#[tokio::test]
async fn a_selection_larger_than_one_batch_moves_entirely() {
    let admin = Admin::start(&bearer_admin()).await;
    // 2,500 dead rows (more than two pages of the replay), plus rows it must leave alone.
    sqlx::query(
        "INSERT INTO outbox (topic, payload, state) \
         SELECT 'bulk.event', jsonb_build_object('n', n), 'dead' FROM generate_series(1, 2500) AS n",
    )
    .execute(&admin.sql)
    .await
    .expect("insert dead rows");
    sqlx::query(
        "INSERT INTO outbox (topic, payload, state) \
         SELECT 'bulk.event', '{}'::jsonb, 'processing' FROM generate_series(1, 20) \
         UNION ALL SELECT 'other.event', '{}'::jsonb, 'dead' FROM generate_series(1, 20)",
    )
    .execute(&admin.sql)
    .await
    .expect("insert other rows");

    let answer = admin
        .replay(json!({ "destination": "audit", "topic": "bulk.event" }))
        .await;
    assert_eq!(answer.moved(), 2500);
    let counts: Vec<(String, String, i64)> = sqlx::query_as(
        "SELECT topic::text, state::text, count(*) FROM outbox GROUP BY 1, 2 ORDER BY 1, 2",
    )
    .fetch_all(&admin.sql)
    .await
    .expect("count");
    assert_eq!(
        counts,
        vec![
            ("bulk.event".into(), "pending".into(), 2500),
            ("bulk.event".into(), "processing".into(), 20),
            ("other.event".into(), "dead".into(), 20),
        ]
    );
    admin.stop().await;
}

// ------------------------------------------------------------------------------------------------
// After the replay
// ------------------------------------------------------------------------------------------------

#[tokio::test]
async fn the_dispatcher_delivers_a_replayed_dead_row_again() {
    let receiver = Receiver::start(Policy::status(200)).await;
    let routes = format!(
        "destinations:\n  hook:\n    type: http\n    baseUrl: {}\n    path: /events\n\
         routes:\n  - topicPattern: \"**\"\n    destination: hook\n",
        receiver.url()
    );
    let admin = Admin::start_with(&bearer_admin(), &routes, false, 50).await;
    let id: Uuid = sqlx::query_scalar(
        "INSERT INTO outbox (topic, payload, state, attempt, last_error) \
         VALUES ('order.paid', '{\"n\":7}', 'dead', 5, 'HTTP 503') RETURNING id",
    )
    .fetch_one(&admin.sql)
    .await
    .expect("insert a dead row");
    assert_eq!(receiver.count(), 0, "a dead row is not delivered");

    assert_eq!(admin.replay(json!({ "ids": [id] })).await.moved(), 1);
    let requests = receiver.wait_for(1, Duration::from_secs(15)).await;
    assert_eq!(
        requests[0].header("x-message-id"),
        Some(id.to_string().as_str())
    );
    assert_eq!(requests[0].header("x-attempt"), Some("0"));
    assert_eq!(requests[0].json(), json!({ "n": 7 }));
    wait_until(
        "the replayed row to be sent",
        Duration::from_secs(15),
        || async { (admin.state(id).await == "sent").then_some(()) },
    )
    .await;
    admin.stop().await;
}

// ------------------------------------------------------------------------------------------------
// POST /admin/transform/test
// ------------------------------------------------------------------------------------------------

/// Recursion that never ends: the depth limit stops it.
const RUNAWAY_RECURSION: &str = "($f := function($n) { 1 + $f($n + 1) }; $f(0))";
/// A loop that outlasts any short timeout without deep recursion.
const RUNAWAY_LOOP: &str = "$count([1..10000000].($string($) & 'x'))";

/// `POST /admin/transform/test` with the bearer token.
async fn transform_test(admin: &Admin, request: Value) -> Answer {
    admin
        .post(
            "/admin/transform/test",
            &[("authorization", &format!("Bearer {TOKEN}"))],
            &request.to_string(),
        )
        .await
}

/// The error text of a `{"success":false,"error":...}` answer with `status`.
fn failure(answer: &Answer, status: u16) -> String {
    assert_eq!(answer.status, status, "{answer:?}");
    let body = answer.json();
    assert_eq!(body["success"], json!(false), "{body}");
    assert_eq!(
        body.as_object().map(|o| o.len()),
        Some(2),
        "only success and error: {body}"
    );
    body["error"].as_str().expect("error text").to_owned()
}

#[tokio::test]
async fn transform_test_evaluates_and_shows_the_variables_it_saw() {
    let admin = Admin::start(&format!("{}  maxTransformTimeoutMs: 300\n", bearer_admin())).await;

    // The documented example.
    let answer = transform_test(
        &admin,
        json!({
            "expression": "{ \"total\": $sum(items.(price * qty)) }",
            "payload": {"items": [{"price": 10, "qty": 2}, {"price": 5, "qty": 3}]},
            "mockTopic": "order.created",
        }),
    )
    .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let body = answer.json();
    assert_eq!(body["success"], json!(true));
    assert_eq!(body["result"], json!({ "total": 35 }));
    let context = body["context"].as_object().expect("context").clone();
    let keys: BTreeSet<&str> = context.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        BTreeSet::from(["attempt", "messageId", "timestamp", "topic"])
    );
    assert_eq!(context["topic"], json!("order.created"));
    assert_eq!(context["attempt"], json!(0));
    let message_id = context["messageId"].as_str().expect("messageId");
    Uuid::parse_str(message_id).expect("messageId is a UUID");
    let timestamp = context["timestamp"].as_str().expect("timestamp");
    assert!(
        timestamp.len() == 24 && timestamp.ends_with('Z') && timestamp.as_bytes()[10] == b'T',
        "ISO-8601 UTC with milliseconds: {timestamp}"
    );

    // The variables the expression sees are the ones the context shows; $headers, $eventType and
    // $idempotencyKey are not bound, $source only with mockSource, $topic defaults to test.topic.
    let variables = "{ 'topic': $topic, 'source': $source, 'attempt': $attempt, 'id': $messageId, \
                     'time': $timestamp, 'headers': $headers, 'eventType': $eventType, \
                     'key': $idempotencyKey, 'body': $ }";
    let answer = transform_test(
        &admin,
        json!({ "expression": variables, "payload": {"a": 1}, "mockSource": "stripe" }),
    )
    .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let body = answer.json();
    let seen = &body["result"];
    assert_eq!(seen["topic"], json!("test.topic"));
    assert_eq!(seen["source"], json!("stripe"));
    assert_eq!(seen["attempt"], json!(0));
    assert_eq!(seen["id"], body["context"]["messageId"]);
    assert_eq!(seen["time"], body["context"]["timestamp"]);
    assert_eq!(seen["body"], json!({"a": 1}));
    for unbound in ["headers", "eventType", "key"] {
        assert!(seen.get(unbound).is_none(), "{unbound} is bound: {seen}");
    }
    let without_source =
        transform_test(&admin, json!({ "expression": variables, "payload": {} })).await;
    assert!(
        without_source.json()["result"].get("source").is_none(),
        "{without_source:?}"
    );

    // A random id per request.
    let again = transform_test(&admin, json!({ "expression": "$messageId", "payload": 1 })).await;
    assert_ne!(again.json()["result"], body["context"]["messageId"]);

    // An undefined result is a success without a result.
    let undefined = transform_test(
        &admin,
        json!({ "expression": "nothing.here", "payload": {} }),
    )
    .await;
    assert_eq!(undefined.status, 200, "{undefined:?}");
    assert_eq!(undefined.json()["success"], json!(true));
    assert!(undefined.json().get("result").is_none(), "{undefined:?}");
    admin.stop().await;
}

#[tokio::test]
async fn transform_test_answers_every_row_of_its_status_table() {
    let admin = Admin::start(&format!("{}  maxTransformTimeoutMs: 300\n", bearer_admin())).await;

    // 400: not a valid request.
    for (request, start) in [
        (
            json!({ "payload": {} }),
            "Invalid request: expression is required",
        ),
        (
            json!({ "expression": "$" }),
            "Invalid request: payload is required",
        ),
        (
            json!({ "expression": 5, "payload": {} }),
            "Invalid request: expression: ",
        ),
        (
            json!({ "expression": "$", "payload": {}, "timeoutMs": "soon" }),
            "Invalid request: timeoutMs: ",
        ),
        (
            json!({ "expression": "$", "payload": {}, "mockTopic": 7 }),
            "Invalid request: mockTopic: ",
        ),
    ] {
        let error = failure(&transform_test(&admin, request.clone()).await, 400);
        assert!(error.starts_with(start), "{request}: {error}");
    }
    let bearer = format!("Bearer {TOKEN}");
    let not_json = admin
        .post(
            "/admin/transform/test",
            &[("authorization", &bearer)],
            "{nope",
        )
        .await;
    assert!(failure(&not_json, 400).starts_with("Invalid request: the body is not JSON"));

    // 400: the expression does not compile.
    let error = failure(
        &transform_test(&admin, json!({ "expression": "$sum(", "payload": {} })).await,
        400,
    );
    assert!(error.starts_with("Invalid expression: "), "{error}");

    // 400: the evaluation fails.
    let error = failure(
        &transform_test(
            &admin,
            json!({ "expression": "$error('no way')", "payload": {} }),
        )
        .await,
        400,
    );
    assert!(error.contains("no way"), "{error}");

    // 400: out of time. The caller's timeout is used up to admin.maxTransformTimeoutMs (300 here);
    // the default is 100.
    for (request, bound) in [
        (
            json!({ "expression": RUNAWAY_LOOP, "payload": {} }),
            "100 ms",
        ),
        (
            json!({ "expression": RUNAWAY_LOOP, "payload": {}, "timeoutMs": 60_000 }),
            "300 ms",
        ),
        (
            json!({ "expression": RUNAWAY_LOOP, "payload": {}, "timeoutMs": 150 }),
            "150 ms",
        ),
    ] {
        let error = failure(&transform_test(&admin, request.clone()).await, 400);
        assert!(error.contains(bound), "{request}: {error}");
    }
    // 400: too deep (maxDepth 100, as a transform block's default).
    let error = failure(
        &transform_test(
            &admin,
            json!({ "expression": RUNAWAY_RECURSION, "payload": {} }),
        )
        .await,
        400,
    );
    assert!(error.contains("maxDepth 100"), "{error}");

    // 401 in the same shape.
    let request = json!({ "expression": "$", "payload": {} }).to_string();
    for headers in [&[][..], &[("authorization", "Bearer wrong")][..]] {
        let answer = admin.post("/admin/transform/test", headers, &request).await;
        let error = failure(&answer, 401);
        assert!(!error.contains(TOKEN), "{error}");
    }

    // 413 in the same shape.
    let large = json!({ "expression": "$", "payload": "x".repeat(MAX_PAYLOAD) }).to_string();
    let answer = admin
        .post(
            "/admin/transform/test",
            &[("authorization", &bearer)],
            &large,
        )
        .await;
    assert_eq!(
        failure(&answer, 413),
        format!("Request body exceeds {MAX_PAYLOAD} bytes")
    );
    admin.stop().await;
}

#[tokio::test]
async fn transform_test_works_with_hmac_on_the_management_port() {
    let admin = Admin::start_with(
        "admin:\n  enabled: true\n  auth:\n    type: hmac\n    secret: whsec-admin\n    algorithm: HmacSHA512\n    signaturePrefix: \"sha512=\"\n",
        ROUTES,
        true,
        3_600_000,
    )
    .await;
    let body = json!({ "expression": "$.amount * 2", "payload": {"amount": 21} }).to_string();
    let mut mac = <Hmac<sha2::Sha512> as KeyInit>::new_from_slice(b"whsec-admin").expect("key");
    mac.update(body.as_bytes());
    let signature = format!("sha512={}", hex::encode(mac.finalize().into_bytes()));
    let answer = admin
        .post(
            "/admin/transform/test",
            &[("x-signature", &signature)],
            &body,
        )
        .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.json()["result"], json!(42));
    let wrong = admin
        .post(
            "/admin/transform/test",
            &[("x-signature", "sha512=00")],
            &body,
        )
        .await;
    assert_eq!(
        failure(&wrong, 401),
        "Invalid signature in header X-Signature"
    );
    admin.stop().await;
}
