//! HTTP inbox sources end to end: the real binary answers `POST inbox.basePath + path` and stores
//! rows in a real PostgreSQL; each test reads the rows back to check what was (not) stored.
//!
//! The relay is off in these tests, so a stored row stays exactly as the ingest wrote it.

use hmac::{Hmac, KeyInit, Mac};
use queuebox_tests::inbox::{Answer, Inbox, MAX_BODY};
use serde_json::{Value, json};
use sha2::{Sha256, Sha512};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use uuid::Uuid;

fn now_ms() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970");
    i64::try_from(since.as_millis()).expect("fits")
}

fn hmac256(secret: &str, data: &str) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).expect("key");
    mac.update(data.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

fn hmac512(secret: &str, data: &str) -> String {
    let mut mac = <Hmac<Sha512> as KeyInit>::new_from_slice(secret.as_bytes()).expect("key");
    mac.update(data.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

const PLAIN_SOURCES: &str = "  orders:\n    type: http\n    path: /orders\n    idempotencyKeyPath: $.id\n\
    \x20   eventTypePath: $.type\n    aggregateIdPath: $.customer.id\n\
    \x20 billing:\n    type: http\n    path: /billing\n    idempotencyKeyPath: $['id']\n    eventTypePath: $.type\n\
    \x20 jobs:\n    type: http\n    path: /jobs\n    idempotencyKeyPath: $.items[0].ref\n    consumption: pull\n";

#[tokio::test]
async fn a_plain_source_stores_once_and_answers_every_documented_row() {
    let inbox = Inbox::start(PLAIN_SOURCES, &[]).await;
    let body = r#"{"id":"evt-1","type":"order.created","customer":{"id":42},"total":9.5}"#;

    // 202 with the row id; the row holds what was extracted and the headers minus credentials.
    let stored = inbox
        .post(
            "/inbox/orders",
            &[
                ("X-Correlation-Id", "corr-1"),
                ("X-Tenant", "acme"),
                ("Authorization", "Bearer not-checked-here"),
                ("Cookie", "session=s3cret"),
                ("Proxy-Authorization", "Basic cHJveHk="),
            ],
            body,
        )
        .await;
    let id = stored.message_id();
    assert_eq!(stored.correlation_id.as_deref(), Some("corr-1"));
    let rows = inbox.rows("orders").await;
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(row.id, id);
    assert_eq!(row.source, "orders");
    assert_eq!(row.key, "evt-1");
    assert_eq!(row.event_type.as_deref(), Some("order.created"));
    assert_eq!(row.aggregate_id.as_deref(), Some("42"));
    assert_eq!(
        row.payload,
        serde_json::from_str::<Value>(body).expect("body")
    );
    assert_eq!(row.correlation_id.as_deref(), Some("corr-1"));
    assert_eq!(row.consumption, "push");
    assert_eq!(row.state, "pending");
    assert_eq!(row.headers["x-tenant"], "acme");
    let stored_headers = row.headers.to_string().to_ascii_lowercase();
    for credential in ["authorization", "cookie", "s3cret", "not-checked-here"] {
        assert!(
            !stored_headers.contains(credential),
            "{credential} in {stored_headers}"
        );
    }

    // 200 duplicate on a repeat in the same source; the first row is untouched.
    let repeat = inbox
        .post("/inbox/orders", &[], r#"{"id":"evt-1","type":"changed"}"#)
        .await;
    assert_eq!(repeat.status, 200, "{repeat:?}");
    assert_eq!(repeat.json(), json!({"status": "duplicate"}));
    assert!(repeat.correlation_id.is_some());
    let rows = inbox.rows("orders").await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].event_type.as_deref(), Some("order.created"));

    // The same key in another source is another message.
    let other = inbox.post("/inbox/billing", &[], body).await;
    let other_id = other.message_id();
    assert_ne!(other_id, id);
    let keyed: i64 =
        sqlx::query_scalar("SELECT count(*) FROM inbox WHERE idempotency_key = 'evt-1'")
            .fetch_one(&inbox.sql)
            .await
            .expect("count");
    assert_eq!(keyed, 2);

    // 400 for a body that is not JSON, after the correlation id was set.
    let invalid = inbox
        .post(
            "/inbox/orders",
            &[("X-Correlation-Id", "corr-bad")],
            "{not json",
        )
        .await;
    assert_eq!(invalid.status, 400);
    assert_eq!(invalid.json(), json!({"error": "Invalid JSON"}));
    assert_eq!(invalid.correlation_id.as_deref(), Some("corr-bad"));

    // 400 naming the path when the key path finds nothing (absent, null, object).
    for keyless in [r#"{"type":"x"}"#, r#"{"id":null}"#, r#"{"id":{"a":1}}"#] {
        let answer = inbox.post("/inbox/orders", &[], keyless).await;
        assert_eq!(answer.status, 400, "{keyless}: {answer:?}");
        assert_eq!(
            answer.json(),
            json!({"error": "Idempotency key not found at path $.id"})
        );
    }

    // A number key is stored as its JSON text; event type and aggregate id are optional.
    let numeric = inbox.post("/inbox/orders", &[], r#"{"id":1234}"#).await;
    numeric.message_id();
    let rows = inbox.rows("orders").await;
    let row = rows
        .iter()
        .find(|r| r.key == "1234")
        .expect("numeric key row");
    assert_eq!(row.event_type, None);
    assert_eq!(row.aggregate_id, None);

    // The consumption of the source is stored; an indexed path reads the key.
    let pulled = inbox
        .post("/inbox/jobs", &[], r#"{"items":[{"ref":"job-7"}]}"#)
        .await;
    pulled.message_id();
    let rows = inbox.rows("jobs").await;
    assert_eq!(rows[0].key, "job-7");
    assert_eq!(rows[0].consumption, "pull");

    // The metrics counted what happened.
    let metrics = inbox.metrics().await;
    for line in [
        "queuebox_inbox_messages_total{status=\"new\"} 4",
        "queuebox_inbox_messages_total{status=\"duplicate\"} 1",
        "queuebox_inbox_rejections_total{reason=\"extraction_failed\"} 4",
    ] {
        assert!(metrics.contains(line), "{line} missing from:\n{metrics}");
    }
    assert!(
        !metrics.contains("queuebox_inbox_filtered_total"),
        "{metrics}"
    );

    // Only POST on a configured path is an inbox route.
    let unknown = inbox.post("/inbox/unknown", &[], body).await;
    assert_eq!(unknown.status, 404);
    let get = inbox
        .http
        .get(inbox.url("/inbox/orders"))
        .send()
        .await
        .expect("GET");
    assert!(get.status().is_client_error(), "{}", get.status());
    assert_eq!(inbox.count().await, 4);
    inbox.stop().await;
}

#[tokio::test]
async fn the_correlation_id_is_echoed_generated_and_sanitised() {
    let inbox = Inbox::start(PLAIN_SOURCES, &[]).await;

    let generated = inbox.post("/inbox/orders", &[], r#"{"id":"a"}"#).await;
    generated.message_id();
    let echoed = generated.correlation_id.clone().expect("echoed");
    assert!(Uuid::parse_str(&echoed).is_ok(), "{echoed}");

    let empty = inbox
        .post(
            "/inbox/orders",
            &[("X-Correlation-Id", "")],
            r#"{"id":"b"}"#,
        )
        .await;
    let empty_id = empty.correlation_id.clone().expect("echoed");
    assert!(Uuid::parse_str(&empty_id).is_ok(), "{empty_id}");
    assert_ne!(empty_id, echoed);

    // A tab is the one control character an HTTP header can carry; it goes. At most 128 kept.
    let long = format!("ab\tc{}", "x".repeat(300));
    let sanitised = inbox
        .post(
            "/inbox/orders",
            &[("x-correlation-id", long.as_str())],
            r#"{"id":"c"}"#,
        )
        .await;
    sanitised.message_id();
    let expected = format!("abc{}", "x".repeat(125));
    assert_eq!(sanitised.correlation_id.as_deref(), Some(expected.as_str()));

    let rows = inbox.rows("orders").await;
    let by_key = |key: &str| {
        rows.iter()
            .find(|r| r.key == key)
            .and_then(|r| r.correlation_id.clone())
    };
    assert_eq!(by_key("a"), Some(echoed));
    assert_eq!(by_key("b"), Some(empty_id));
    assert_eq!(by_key("c"), Some(expected));
    inbox.stop().await;
}

#[tokio::test]
async fn a_body_over_the_cap_gets_413_on_a_source_route_and_a_chunked_body_under_it_is_stored() {
    let inbox = Inbox::start(PLAIN_SOURCES, &[]).await;
    let big = format!(r#"{{"id":"big","pad":"{}"}}"#, "x".repeat(MAX_BODY));
    let declared = inbox.post("/inbox/orders", &[], &big).await;
    assert_eq!(declared.status, 413);
    assert_eq!(
        declared.json(),
        json!({"error": format!("Request body exceeds {MAX_BODY} bytes")})
    );

    // Chunked, over the cap: counted while it streams.
    let answer = raw_chunked(inbox.port, "/inbox/orders", &big).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");

    // Chunked, under the cap: the guard's buffered body reaches the route.
    let answer = raw_chunked(inbox.port, "/inbox/orders", r#"{"id":"chunked"}"#).await;
    assert!(answer.starts_with("HTTP/1.1 202"), "{answer}");
    let rows = inbox.rows("orders").await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].key, "chunked");
    inbox.stop().await;
}

async fn raw_chunked(port: u16, path: &str, body: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    );
    for chunk in body.as_bytes().chunks(100) {
        request.push_str(&format!("{:x}\r\n", chunk.len()));
        request.push_str(std::str::from_utf8(chunk).expect("ascii body"));
        request.push_str("\r\n");
    }
    request.push_str("0\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut answer = String::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_string(&mut answer)).await;
    answer
}

const AUTH_SOURCES: &str = "  bearer:\n    type: http\n    path: /bearer\n    idempotencyKeyPath: $.id\n\
    \x20   consumption: pull\n    auth:\n      type: bearer\n      token: ${BEARER_TOKEN}\n\
    \x20 partner:\n    type: http\n    path: /partner\n    idempotencyKeyPath: $.id\n    consumption: pull\n\
    \x20   auth:\n      type: api-key\n      headerName: X-Partner-Key\n      key: ${PARTNER_KEY}\n\
    \x20 defaultkey:\n    type: http\n    path: /defaultkey\n    idempotencyKeyPath: $.id\n    consumption: pull\n\
    \x20   auth:\n      type: api-key\n      key: ${PARTNER_KEY}\n\
    \x20 github:\n    type: http\n    path: /github\n    idempotencyKeyPath: $.delivery\n    consumption: pull\n\
    \x20   auth:\n      type: hmac\n      secret: ${HMAC_SECRET}\n      headerName: X-Hub-Signature-256\n\
    \x20     signaturePrefix: \"sha256=\"\n\
    \x20 billing:\n    type: http\n    path: /billing\n    idempotencyKeyPath: $.id\n    consumption: pull\n\
    \x20   auth:\n      type: hmac\n      secret: ${HMAC_SECRET}\n      algorithm: HmacSHA512\n\
    \x20     signaturePrefix: \"\"\n      timestampHeader: X-Timestamp\n      timestampTolerance: 300000\n\
    \x20 legacy:\n    type: http\n    path: /legacy\n    idempotencyKeyPath: $.id\n    consumption: pull\n\
    \x20   auth:\n      type: hmac\n      secret: ${HMAC_SECRET}\n      timestampHeader: X-Timestamp\n\
    \x20     signaturePayloadFormat: body\n";

const TOKEN: &str = "tok-bearer-123";
const KEY: &str = "key-partner-456";
const SECRET: &str = "whsec-789";

#[tokio::test]
async fn each_auth_kind_accepts_its_credentials_refuses_others_and_stores_none() {
    let inbox = Inbox::start(
        AUTH_SOURCES,
        &[
            ("BEARER_TOKEN", TOKEN),
            ("PARTNER_KEY", KEY),
            ("HMAC_SECRET", SECRET),
        ],
    )
    .await;
    let unauthorized = |answer: &Answer, reason: &str| {
        assert_eq!(answer.status, 401, "{answer:?}");
        assert_eq!(answer.json(), json!({"error": reason}));
        // The correlation id is set only after the checks that decide whether a message counts.
        assert_eq!(answer.correlation_id, None, "{answer:?}");
        for secret in [TOKEN, KEY, SECRET, "wrong"] {
            assert!(!answer.text.contains(secret), "{answer:?}");
        }
    };

    // Bearer: scheme in any letter case; no header, no scheme, other token fail.
    let bearer = format!("bearer {TOKEN}");
    inbox
        .post(
            "/inbox/bearer",
            &[("Authorization", &bearer)],
            r#"{"id":"b1"}"#,
        )
        .await
        .message_id();
    unauthorized(
        &inbox.post("/inbox/bearer", &[], r#"{"id":"b2"}"#).await,
        "Missing Authorization header",
    );
    unauthorized(
        &inbox
            .post(
                "/inbox/bearer",
                &[("Authorization", TOKEN)],
                r#"{"id":"b3"}"#,
            )
            .await,
        "Authorization header does not carry a Bearer token",
    );
    unauthorized(
        &inbox
            .post(
                "/inbox/bearer",
                &[("Authorization", "Bearer wrong")],
                r#"{"id":"b4"}"#,
            )
            .await,
        "Invalid bearer token",
    );

    // API key in a configured header, and in the default X-API-Key.
    inbox
        .post(
            "/inbox/partner",
            &[("x-partner-key", KEY)],
            r#"{"id":"p1"}"#,
        )
        .await
        .message_id();
    unauthorized(
        &inbox
            .post(
                "/inbox/partner",
                &[("X-Partner-Key", "wrong")],
                r#"{"id":"p2"}"#,
            )
            .await,
        "Invalid API key in header X-Partner-Key",
    );
    unauthorized(
        &inbox
            .post("/inbox/partner", &[("X-API-Key", KEY)], r#"{"id":"p3"}"#)
            .await,
        "Missing API key header X-Partner-Key",
    );
    inbox
        .post("/inbox/defaultkey", &[("X-API-Key", KEY)], r#"{"id":"d1"}"#)
        .await
        .message_id();

    // HMAC-SHA256 of the body, GitHub style.
    let body = r#"{"delivery":"g1","action":"opened"}"#;
    let signature = format!("sha256={}", hmac256(SECRET, body));
    inbox
        .post(
            "/inbox/github",
            &[("X-Hub-Signature-256", &signature)],
            body,
        )
        .await
        .message_id();
    let tampered = r#"{"delivery":"g2","action":"opened"}"#;
    unauthorized(
        &inbox
            .post(
                "/inbox/github",
                &[("X-Hub-Signature-256", &signature)],
                tampered,
            )
            .await,
        "Invalid signature in header X-Hub-Signature-256",
    );
    unauthorized(
        &inbox.post("/inbox/github", &[], tampered).await,
        "Missing signature header X-Hub-Signature-256",
    );

    // HMAC-SHA512 of timestamp.body (the default with a timestamp header), no prefix.
    let body = r#"{"id":"inv-1"}"#;
    let ts = now_ms().to_string();
    let signed = hmac512(SECRET, &format!("{ts}.{body}"));
    inbox
        .post(
            "/inbox/billing",
            &[("X-Timestamp", &ts), ("X-Signature", &signed)],
            body,
        )
        .await
        .message_id();
    // A captured request replayed later is too old...
    let old_ts = (now_ms() - 600_000).to_string();
    let old_sig = hmac512(SECRET, &format!("{old_ts}.{body}"));
    unauthorized(
        &inbox
            .post(
                "/inbox/billing",
                &[("X-Timestamp", &old_ts), ("X-Signature", &old_sig)],
                r#"{"id":"inv-1"}"#,
            )
            .await,
        "Timestamp header X-Timestamp is outside the tolerance of 300000 ms",
    );
    // ...and with a fresh timestamp its signature no longer matches.
    let body2 = r#"{"id":"inv-2"}"#;
    let captured = hmac512(SECRET, &format!("{old_ts}.{body2}"));
    let fresh = now_ms().to_string();
    unauthorized(
        &inbox
            .post(
                "/inbox/billing",
                &[("X-Timestamp", &fresh), ("X-Signature", &captured)],
                body2,
            )
            .await,
        "Invalid signature in header X-Signature",
    );
    unauthorized(
        &inbox
            .post("/inbox/billing", &[("X-Signature", &signed)], body)
            .await,
        "Missing timestamp header X-Timestamp",
    );

    // `signaturePayloadFormat: body` with a timestamp: the age is checked, the body alone signed.
    let body = r#"{"id":"l1"}"#;
    let body_sig = format!("sha256={}", hmac256(SECRET, body));
    inbox
        .post(
            "/inbox/legacy",
            &[
                ("X-Timestamp", &now_ms().to_string()),
                ("X-Signature", &body_sig),
            ],
            body,
        )
        .await
        .message_id();
    unauthorized(
        &inbox
            .post(
                "/inbox/legacy",
                &[
                    ("X-Timestamp", &(now_ms() - 400_000).to_string()),
                    ("X-Signature", &body_sig),
                ],
                r#"{"id":"l1"}"#,
            )
            .await,
        "Timestamp header X-Timestamp is outside the tolerance of 300000 ms",
    );

    // One row per accepted request, none for a refused one, and no credential in any row.
    assert_eq!(inbox.count().await, 6);
    let headers: Vec<String> = sqlx::query_scalar("SELECT headers::text FROM inbox")
        .fetch_all(&inbox.sql)
        .await
        .expect("headers");
    for text in &headers {
        let lower = text.to_ascii_lowercase();
        for credential in [
            "authorization",
            "x-partner-key",
            "x-api-key",
            "x-hub-signature-256",
            "x-signature",
        ] {
            assert!(!lower.contains(credential), "{credential} stored: {text}");
        }
        for secret in [TOKEN, KEY, SECRET] {
            assert!(!text.contains(secret), "{text}");
        }
    }
    // The timestamp is not a credential and stays.
    let billing = inbox.rows("billing").await;
    assert_eq!(billing[0].headers["x-timestamp"], json!(ts));
    inbox.stop().await;
}

const FILTER_SOURCES: &str = "  filtered:\n    type: http\n    path: /filtered\n    idempotencyKeyPath: $.id\n\
    \x20   consumption: pull\n    filter:\n      require:\n        - header: X-Env\n          in: [prod, stage]\n\
    \x20       - header: X-Event\n          matches: \"order.*\"\n      exclude:\n        - header: x-test\n          exists: true\n\
    \x20 exact:\n    type: http\n    path: /exact\n    idempotencyKeyPath: $.id\n    consumption: pull\n\
    \x20   filter:\n      require:\n        - header: x-env\n          equals: prod\n\
    \x20 limited:\n    type: http\n    path: /limited\n    idempotencyKeyPath: $.id\n    consumption: pull\n\
    \x20   rateLimit:\n      requestsPerMinute: 2\n\
    \x20 guarded:\n    type: http\n    path: /guarded\n    idempotencyKeyPath: $.id\n    consumption: pull\n\
    \x20   auth:\n      type: bearer\n      token: tok\n    filter:\n      require:\n        - header: x-env\n          exists: true\n";

#[tokio::test]
async fn filters_drop_with_202_and_the_rate_limit_answers_429_with_retry_after() {
    let inbox = Inbox::start(FILTER_SOURCES, &[]).await;
    let filtered = |answer: &Answer| {
        assert_eq!(answer.status, 202, "{answer:?}");
        assert_eq!(answer.json(), json!({"status": "filtered"}));
        assert_eq!(answer.correlation_id, None, "{answer:?}");
    };

    // require (in + matches) and exclude (exists) together.
    inbox
        .post(
            "/inbox/filtered",
            &[("x-env", "stage"), ("x-event", "order.paid")],
            r#"{"id":"f1"}"#,
        )
        .await
        .message_id();
    filtered(
        &inbox
            .post(
                "/inbox/filtered",
                &[("x-env", "dev"), ("x-event", "order.paid")],
                r#"{"id":"f2"}"#,
            )
            .await,
    );
    filtered(
        &inbox
            .post(
                "/inbox/filtered",
                &[("x-env", "prod"), ("x-event", "order.item.added")],
                r#"{"id":"f3"}"#,
            )
            .await,
    );
    filtered(
        &inbox
            .post(
                "/inbox/filtered",
                &[
                    ("x-env", "prod"),
                    ("x-event", "order.paid"),
                    ("X-Test", "1"),
                ],
                r#"{"id":"f4"}"#,
            )
            .await,
    );
    // A filtered message is dropped before its body is read as JSON.
    filtered(
        &inbox
            .post("/inbox/filtered", &[("x-env", "prod")], "not json")
            .await,
    );

    // equals: exact value case, any header-name case; a missing header does not match.
    inbox
        .post("/inbox/exact", &[("X-ENV", "prod")], r#"{"id":"e1"}"#)
        .await
        .message_id();
    filtered(
        &inbox
            .post("/inbox/exact", &[("x-env", "PROD")], r#"{"id":"e2"}"#)
            .await,
    );
    filtered(&inbox.post("/inbox/exact", &[], r#"{"id":"e3"}"#).await);

    // Credentials come before the filter.
    let refused = inbox.post("/inbox/guarded", &[], r#"{"id":"g1"}"#).await;
    assert_eq!(refused.status, 401, "{refused:?}");
    filtered(
        &inbox
            .post(
                "/inbox/guarded",
                &[("Authorization", "Bearer tok")],
                r#"{"id":"g2"}"#,
            )
            .await,
    );

    assert_eq!(inbox.count().await, 2);
    let metrics = inbox.metrics().await;
    for line in [
        "queuebox_inbox_filtered_total{source=\"filtered\"} 4",
        "queuebox_inbox_filtered_total{source=\"exact\"} 2",
        "queuebox_inbox_filtered_total{source=\"guarded\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} missing from:\n{metrics}");
    }

    // Two requests a minute: the third is refused with Retry-After and no body.
    for n in 0..2 {
        inbox
            .post("/inbox/limited", &[], &format!(r#"{{"id":"r{n}"}}"#))
            .await
            .message_id();
    }
    let limited = inbox.post("/inbox/limited", &[], r#"{"id":"r2"}"#).await;
    assert_eq!(limited.status, 429, "{limited:?}");
    assert_eq!(limited.text, "");
    let retry_after: u64 = limited
        .retry_after
        .as_deref()
        .expect("Retry-After")
        .parse()
        .expect("Retry-After in seconds");
    assert!((1..=30).contains(&retry_after), "{retry_after}");
    // Other sources have their own budget.
    inbox
        .post("/inbox/exact", &[("x-env", "prod")], r#"{"id":"e4"}"#)
        .await
        .message_id();
    assert_eq!(inbox.rows("limited").await.len(), 2);
    inbox.stop().await;
}

#[tokio::test]
async fn a_failed_insert_answers_500_and_counts_a_storage_failure() {
    let inbox = Inbox::start(PLAIN_SOURCES, &[]).await;
    inbox
        .post("/inbox/orders", &[], r#"{"id":"ok"}"#)
        .await
        .message_id();
    // The database refuses the next insert, as a broken schema or a full disk would.
    inbox
        .db
        .execute("ALTER TABLE inbox ADD CONSTRAINT refuse_lost CHECK (idempotency_key <> 'lost')")
        .await;
    let failed = inbox
        .post(
            "/inbox/orders",
            &[("X-Correlation-Id", "c-500")],
            r#"{"id":"lost"}"#,
        )
        .await;
    assert_eq!(failed.status, 500, "{failed:?}");
    assert_eq!(failed.json(), json!({"error": "Storage failed"}));
    assert_eq!(failed.correlation_id.as_deref(), Some("c-500"));
    assert_eq!(
        failed.retry_after.as_deref(),
        Some("5"),
        "a 5xx says when to retry"
    );
    let metrics = inbox.metrics().await;
    assert!(
        metrics.contains("queuebox_inbox_rejections_total{reason=\"storage_failed\"} 1"),
        "{metrics}"
    );
    // Once the database accepts it again, the sender's retry is stored.
    inbox
        .db
        .execute("ALTER TABLE inbox DROP CONSTRAINT refuse_lost")
        .await;
    inbox
        .post(
            "/inbox/orders",
            &[("X-Correlation-Id", "c-500")],
            r#"{"id":"lost"}"#,
        )
        .await
        .message_id();
    inbox.stop().await;
}

/// POSTs every body at once (one task each) and returns the answers in the order of `bodies`.
async fn post_all(inbox: &Inbox, path: &str, bodies: Vec<String>) -> Vec<Answer> {
    let mut tasks = Vec::with_capacity(bodies.len());
    for body in bodies {
        let request = inbox.http.post(inbox.url(path)).body(body);
        tasks.push(tokio::spawn(async move {
            Answer::read(request.send().await.expect("POST")).await
        }));
    }
    let mut answers = Vec::with_capacity(tasks.len());
    for task in tasks {
        answers.push(task.await.expect("join"));
    }
    answers
}

#[tokio::test]
async fn concurrent_repeats_are_stored_once_each_with_its_own_answer() {
    // Concurrent requests share insert statements (grouped while one runs); each still gets its
    // own answer: 200 requests over 100 keys, each key sent twice at once.
    let inbox = Inbox::start(PLAIN_SOURCES, &[]).await;
    let bodies: Vec<String> = (0..200)
        .map(|i| format!(r#"{{"id":"k-{}","type":"t"}}"#, i % 100))
        .collect();
    let answers = post_all(&inbox, "/inbox/orders", bodies).await;
    let mut acknowledged = Vec::new();
    let mut duplicates = 0;
    for answer in &answers {
        match answer.status {
            202 => acknowledged.push(answer.message_id()),
            200 => {
                assert_eq!(answer.json(), json!({"status": "duplicate"}));
                duplicates += 1;
            }
            other => panic!("unexpected {other}: {answer:?}"),
        }
    }
    assert_eq!((acknowledged.len(), duplicates), (100, 100));
    // Every acknowledged id is a stored row, one per key.
    let rows = inbox.rows("orders").await;
    assert_eq!(rows.len(), 100);
    let mut stored: Vec<Uuid> = rows.iter().map(|row| row.id).collect();
    stored.sort();
    acknowledged.sort();
    assert_eq!(stored, acknowledged);
    let mut keys: Vec<&str> = rows.iter().map(|row| row.key.as_str()).collect();
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), 100);
    let metrics = inbox.metrics().await;
    for expected in [
        "queuebox_inbox_messages_total{status=\"new\"} 100",
        "queuebox_inbox_messages_total{status=\"duplicate\"} 100",
    ] {
        assert!(metrics.contains(expected), "{expected} missing:\n{metrics}");
    }
    inbox.stop().await;
}

#[tokio::test]
async fn among_concurrent_requests_only_the_one_the_database_refuses_fails() {
    let inbox = Inbox::start(PLAIN_SOURCES, &[]).await;
    inbox
        .db
        .execute("ALTER TABLE inbox ADD CONSTRAINT refuse_lost CHECK (idempotency_key <> 'lost')")
        .await;
    // Whichever statement "lost" shares with others, it alone gets 500; the rest are stored.
    let bodies: Vec<String> = (0..60)
        .map(|i| match i {
            20 | 40 => r#"{"id":"lost"}"#.to_owned(),
            _ => format!(r#"{{"id":"ok-{i}"}}"#),
        })
        .collect();
    let answers = post_all(&inbox, "/inbox/orders", bodies).await;
    let mut acknowledged = Vec::new();
    for (i, answer) in answers.iter().enumerate() {
        if i == 20 || i == 40 {
            assert_eq!(answer.status, 500, "{answer:?}");
            assert_eq!(answer.json(), json!({"error": "Storage failed"}));
        } else {
            acknowledged.push(answer.message_id());
        }
    }
    let mut stored: Vec<Uuid> = inbox.rows("orders").await.iter().map(|r| r.id).collect();
    stored.sort();
    acknowledged.sort();
    assert_eq!(stored.len(), 58);
    assert_eq!(stored, acknowledged);
    let metrics = inbox.metrics().await;
    assert!(
        metrics.contains("queuebox_inbox_rejections_total{reason=\"storage_failed\"} 2"),
        "{metrics}"
    );
    inbox.stop().await;
}

#[tokio::test]
async fn every_request_acknowledged_while_stopping_is_stored() {
    // Sixteen clients post new keys back to back while the process gets SIGTERM: whatever each
    // request got (202, 503 while stopping, or a closed connection), every 202 names a stored row.
    let mut inbox = Inbox::start(PLAIN_SOURCES, &[]).await;
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut clients = Vec::new();
    for client in 0..16 {
        let http = inbox.http.clone();
        let url = inbox.url("/inbox/orders");
        let answered = std::sync::Arc::clone(&answered);
        clients.push(tokio::spawn(async move {
            let mut acknowledged = Vec::new();
            let mut refused = 0;
            // Bounded: the loop ends at the first request the server no longer answers.
            for n in 0..100_000 {
                let body = format!(r#"{{"id":"c{client}-{n}"}}"#);
                let Ok(response) = http.post(&url).body(body).send().await else {
                    break;
                };
                let answer = Answer::read(response).await;
                answered.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                match answer.status {
                    202 => acknowledged.push(answer.message_id()),
                    503 => refused += 1,
                    other => panic!("unexpected {other}: {answer:?}"),
                }
            }
            (acknowledged, refused)
        }));
    }
    queuebox_tests::wait_until("200 answers", Duration::from_secs(30), || {
        let answered = std::sync::Arc::clone(&answered);
        async move { (answered.load(std::sync::atomic::Ordering::SeqCst) >= 200).then_some(()) }
    })
    .await;
    inbox.qb.terminate();
    let status = inbox.qb.wait_exit(Duration::from_secs(20)).await;
    assert!(status.success(), "exit {status}; log:\n{}", inbox.qb.log());
    let mut acknowledged = Vec::new();
    for client in clients {
        let (ids, _refused) = tokio::time::timeout(Duration::from_secs(20), client)
            .await
            .expect("the client ends once the server is gone")
            .expect("join");
        acknowledged.extend(ids);
    }
    assert!(
        acknowledged.len() >= 150,
        "{} acknowledged",
        acknowledged.len()
    );
    let stored: std::collections::HashSet<Uuid> = inbox
        .rows("orders")
        .await
        .iter()
        .map(|row| row.id)
        .collect();
    let lost: Vec<&Uuid> = acknowledged
        .iter()
        .filter(|id| !stored.contains(id))
        .collect();
    assert!(lost.is_empty(), "acknowledged but not stored: {lost:?}");
    inbox.sql.close().await;
    inbox.db.drop_database().await;
}
