//! Bad input at an HTTP inbox source, end to end against the real binary and PostgreSQL: every
//! value the table cannot hold is a 4xx that names the field and the limit and stores nothing;
//! every error the server answers is JSON without the HTTP framework's name; a compressed body
//! is decoded under the body cap.

use flate2::Compression;
use flate2::write::{GzEncoder, ZlibEncoder};
use queuebox_tests::inbox::{Answer, Inbox, MAX_BODY};
use serde_json::json;
use std::io::Write;

const SOURCES: &str = "  orders:\n    type: http\n    path: /orders\n    idempotencyKeyPath: $.id\n\
    \x20   eventTypePath: $.type\n    aggregateIdPath: $.customer.id\n";

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    encoder.write_all(bytes).expect("gzip");
    encoder.finish().expect("gzip")
}

async fn post_bytes(inbox: &Inbox, path: &str, headers: &[(&str, &str)], body: Vec<u8>) -> Answer {
    let mut request = inbox.http.post(inbox.url(path)).body(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    Answer::read(request.send().await.expect("POST")).await
}

fn assert_error(answer: &Answer, status: u16, error: &str) {
    assert_eq!(answer.status, status, "{answer:?}");
    assert_eq!(answer.json(), json!({ "error": error }), "{answer:?}");
}

#[tokio::test]
async fn values_a_column_cannot_hold_are_a_422_naming_the_field_and_limit_and_store_nothing() {
    let inbox = Inbox::start_with_cap(SOURCES, &[], 300_000).await;
    let long = "k".repeat(256);
    let huge = "k".repeat(100_000);
    let cases = [
        (
            r#"{"id":"nul","note":"a\u0000b"}"#.to_owned(),
            "the payload holds the character U+0000 (\\u0000) at $['note'], which the inbox cannot store",
        ),
        (
            r#"{"id":"nul-name","x":{"a\u0000":1}}"#.to_owned(),
            "the payload holds the character U+0000 (\\u0000) at $['x']['a\\u0000'], which the inbox cannot store",
        ),
        (
            format!(r#"{{"id":"{long}"}}"#),
            "the idempotency key is 256 characters long; the inbox stores at most 255",
        ),
        (
            format!(r#"{{"id":"{huge}"}}"#),
            "the idempotency key is 100000 characters long; the inbox stores at most 255",
        ),
        (
            format!(r#"{{"id":"e","type":"{long}"}}"#),
            "the event type is 256 characters long; the inbox stores at most 255",
        ),
        (
            format!(r#"{{"id":"a","customer":{{"id":"{long}"}}}}"#),
            "the aggregate id is 256 characters long; the inbox stores at most 255",
        ),
        (
            r#"{"id":"k\u0000"}"#.to_owned(),
            "the payload holds the character U+0000 (\\u0000) at $['id'], which the inbox cannot store",
        ),
    ];
    for (body, error) in &cases {
        let answer = inbox.post("/inbox/orders", &[], body).await;
        assert_error(&answer, 422, error);
    }
    // A number PostgreSQL's numeric cannot hold is refused by the database itself: still the
    // sender's 422, not a 500.
    let tiny = inbox
        .post("/inbox/orders", &[], r#"{"id":"tiny","n":1e-20000}"#)
        .await;
    assert_eq!(tiny.status, 422, "{tiny:?}");
    assert!(
        tiny.json()["error"]
            .as_str()
            .is_some_and(|e| e.contains("value overflows numeric format")),
        "{tiny:?}"
    );
    assert_eq!(inbox.count().await, 0, "a 4xx stores nothing");
    // A repeat gets the same answer (a 4xx does not change when repeated).
    let again = inbox.post("/inbox/orders", &[], &cases[2].0).await;
    assert_error(&again, 422, cases[2].1);

    // At the limits, everything fits.
    let fits = "é".repeat(255);
    let stored = inbox
        .post(
            "/inbox/orders",
            &[],
            &format!(
                r#"{{"id":"{fits}","type":"{fits}","customer":{{"id":"{fits}"}},"note":"\\u0000"}}"#
            ),
        )
        .await;
    stored.message_id();
    let rows = inbox.rows("orders").await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].key, fits);
    assert_eq!(
        rows[0].payload["note"], "\\u0000",
        "an escaped backslash is not a NUL"
    );
    let metrics = inbox.metrics().await;
    assert!(
        metrics.contains("queuebox_inbox_rejections_total{reason=\"extraction_failed\"} 9"),
        "{metrics}"
    );
    assert!(!metrics.contains("reason=\"storage_failed\""), "{metrics}");
    inbox.stop().await;
}

#[tokio::test]
async fn a_body_the_parser_cannot_read_says_why() {
    let inbox = Inbox::start(SOURCES, &[]).await;
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    assert_error(
        &inbox.post("/inbox/orders", &[], &deep).await,
        400,
        "Invalid JSON: nested deeper than 127 levels",
    );
    assert_error(
        &inbox
            .post("/inbox/orders", &[], r#"{"id":"a","n":1e400}"#)
            .await,
        400,
        "Invalid JSON: a number is out of range (beyond a 64-bit float)",
    );
    assert_error(
        &inbox.post("/inbox/orders", &[], r#"{"id":"a""#).await,
        400,
        "Invalid JSON",
    );
    // 127 levels are read.
    let at_limit = format!(
        r#"{{"id":"deep","x":{}{}}}"#,
        "[".repeat(126),
        "]".repeat(126)
    );
    inbox
        .post("/inbox/orders", &[], &at_limit)
        .await
        .message_id();
    inbox.stop().await;
}

#[tokio::test]
async fn errors_outside_the_routes_are_json_and_never_name_the_framework() {
    let inbox = Inbox::start(SOURCES, &[]).await;
    let cases = [
        (reqwest::Method::GET, "/no/such/path", 404, "Not found"),
        (reqwest::Method::POST, "/inbox/nothing", 404, "Not found"),
        (
            reqwest::Method::GET,
            "/inbox/orders",
            405,
            "Method not allowed: an inbox source accepts POST",
        ),
        (reqwest::Method::POST, "/", 405, "Method not allowed"),
        (
            reqwest::Method::DELETE,
            "/metrics",
            405,
            "Method not allowed",
        ),
        (
            reqwest::Method::POST,
            "/health/live",
            405,
            "Method not allowed",
        ),
    ];
    for (method, path, status, error) in cases {
        let response = inbox
            .http
            .request(method.clone(), inbox.url(path))
            .send()
            .await
            .expect("request");
        let headers: Vec<String> = response
            .headers()
            .iter()
            .map(|(name, value)| format!("{name}: {}", String::from_utf8_lossy(value.as_bytes())))
            .collect();
        if status == 405 {
            assert!(
                response.headers().contains_key("allow"),
                "{method} {path}: {headers:?}"
            );
        }
        assert_eq!(
            response
                .headers()
                .get("content-type")
                .map(|v| v.to_str().expect("ascii").to_owned()),
            Some("application/json".to_owned()),
            "{method} {path}"
        );
        let answer = Answer::read(response).await;
        assert_error(&answer, status, error);
        let everything = format!("{headers:?} {}", answer.text).to_ascii_lowercase();
        assert!(
            !everything.contains("salvo"),
            "{method} {path} names the framework: {everything}"
        );
    }
    inbox.stop().await;
}

#[tokio::test]
async fn a_compressed_body_is_decoded_under_the_cap_and_other_codings_are_named() {
    let inbox = Inbox::start(SOURCES, &[]).await;
    let body = br#"{"id":"gz","type":"t"}"#;
    let stored = post_bytes(
        &inbox,
        "/inbox/orders",
        &[("Content-Encoding", "gzip"), ("X-Tenant", "acme")],
        gzip(body),
    )
    .await;
    stored.message_id();
    let mut zlib = ZlibEncoder::new(Vec::new(), Compression::default());
    zlib.write_all(br#"{"id":"zz"}"#).expect("deflate");
    post_bytes(
        &inbox,
        "/inbox/orders",
        &[("Content-Encoding", "deflate")],
        zlib.finish().expect("deflate"),
    )
    .await
    .message_id();
    let rows = inbox.rows("orders").await;
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].payload, json!({"id": "gz", "type": "t"}));
    assert_eq!(rows[0].headers["x-tenant"], "acme");
    assert!(
        rows[0].headers.get("content-encoding").is_none(),
        "the stored row holds the decoded body, so not its coding: {}",
        rows[0].headers
    );

    // A bomb: a few kilobytes that expand far beyond the cap.
    let bomb = gzip(&vec![b' '; 5_000_000]);
    assert!(bomb.len() < MAX_BODY * 4);
    let bomb = gzip(&bomb);
    assert!(bomb.len() < MAX_BODY, "{}", bomb.len());
    assert_error(
        &post_bytes(
            &inbox,
            "/inbox/orders",
            &[("Content-Encoding", "gzip, gzip")],
            bomb,
        )
        .await,
        413,
        &format!("Request body exceeds {MAX_BODY} bytes"),
    );
    assert_error(
        &post_bytes(
            &inbox,
            "/inbox/orders",
            &[("Content-Encoding", "br")],
            body.to_vec(),
        )
        .await,
        415,
        "Unsupported Content-Encoding \"br\": the inbox decodes gzip and deflate",
    );
    let broken = post_bytes(
        &inbox,
        "/inbox/orders",
        &[("Content-Encoding", "gzip")],
        b"not gzip at all".to_vec(),
    )
    .await;
    assert_eq!(broken.status, 400, "{broken:?}");
    assert!(
        broken.json()["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("Invalid gzip body: ")),
        "{broken:?}"
    );
    assert_eq!(inbox.count().await, 2);
    inbox.stop().await;
}

#[tokio::test]
async fn a_relayed_topic_longer_than_the_outbox_column_is_a_dead_inbox_row_not_a_retry_loop() {
    let sources = "  orders:\n    type: http\n    path: /orders\n    idempotencyKeyPath: $.id\n\
        \x20   eventTypePath: $.type\n    topic: \"orders.{{ eventType }}\"\n";
    let inbox = Inbox::start(sources, &[("QUEUEBOX_INBOX_RELAY_ENABLED", "true")]).await;
    // 250 characters fit the event type column; with the prefix, the topic does not fit the
    // outbox's 255.
    let event_type = "t".repeat(250);
    inbox
        .post(
            "/inbox/orders",
            &[],
            &format!(r#"{{"id":"long-topic","type":"{event_type}"}}"#),
        )
        .await
        .message_id();
    let (state, last_error, attempts): (String, Option<String>, i32) = queuebox_tests::wait_until(
        "the relay to settle the row",
        std::time::Duration::from_secs(20),
        || async {
            let row: (String, Option<String>, i32) = sqlx::query_as(
                "SELECT state, last_error, attempt FROM inbox WHERE idempotency_key = 'long-topic'",
            )
            .fetch_one(&inbox.sql)
            .await
            .expect("read the row");
            (row.0 != "pending" && row.0 != "processing").then_some(row)
        },
    )
    .await;
    assert_eq!(state, "dead", "{last_error:?}");
    assert!(
        last_error.as_deref().is_some_and(|e| e.contains("255")),
        "{last_error:?}"
    );
    assert_eq!(attempts, 0, "dead at once, not after retries");
    let outbox: i64 = sqlx::query_scalar("SELECT count(*) FROM outbox")
        .fetch_one(&inbox.sql)
        .await
        .expect("count outbox");
    assert_eq!(outbox, 0);
    inbox.stop().await;
}

/// Writes `head` on a new connection, then waits (sending nothing more) for what the server
/// answers and for it to close the connection; returns the answer and how long that took.
async fn stall_after(port: u16, head: &str) -> (String, std::time::Duration) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    stream.write_all(head.as_bytes()).await.expect("write");
    let started = std::time::Instant::now();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(15),
        stream.read_to_end(&mut answer),
    )
    .await;
    assert!(
        read.is_ok(),
        "the server kept the stalled connection open for 15 s"
    );
    (
        String::from_utf8_lossy(&answer).into_owned(),
        started.elapsed(),
    )
}

#[tokio::test]
async fn a_request_that_trickles_in_is_cut_off_at_the_read_timeout() {
    let inbox = Inbox::start(SOURCES, &[("QUEUEBOX_SERVER_REQUESTREADTIMEOUTMS", "1000")]).await;
    // A body that stops arriving: 408 with the documented error shape, and the connection closes.
    let (answer, took) = stall_after(
        inbox.port,
        "POST /inbox/orders HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: 100\r\n\r\n{\"id\":\"slow\"",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(
        answer.ends_with(r#"{"error":"Request body not received within 1000 ms"}"#),
        "{answer}"
    );
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    assert!(
        took >= std::time::Duration::from_millis(900),
        "cut off after {took:?}"
    );
    // A request head that stops arriving: the connection is closed without an answer.
    let (answer, took) = stall_after(
        inbox.port,
        "POST /inbox/orders HTTP/1.1\r\nHost: localhost\r\nX-Slow: ",
    )
    .await;
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer}"
    );
    println!(
        "a stalled request head: {:?} after {took:?}",
        answer.lines().next()
    );
    assert!(
        took >= std::time::Duration::from_millis(900),
        "cut off after {took:?}"
    );
    // A prompt request is served as ever, and the stalled ones stored nothing.
    let answer = post_bytes(
        &inbox,
        "/inbox/orders",
        &[("Content-Type", "application/json")],
        br#"{"id":"prompt"}"#.to_vec(),
    )
    .await;
    assert_eq!(answer.status, 202, "{answer:?}");
    assert_eq!(inbox.count().await, 1);
    inbox.stop().await;
}

#[tokio::test]
async fn a_header_line_carrying_a_bare_carriage_return_is_refused_before_any_route() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let inbox = Inbox::start(SOURCES, &[]).await;
    // A CR inside a header value is how a sender would smuggle a second header through a proxy
    // that splits on it; the HTTP parser refuses the request and nothing reaches the source.
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", inbox.port))
        .await
        .expect("connect");
    stream
        .write_all(
            b"POST /inbox/orders HTTP/1.1\r\nHost: localhost\r\nX-Evil: a\rX-Injected: b\r\n\
              Content-Type: application/json\r\nContent-Length: 12\r\n\r\n{\"id\":\"cr\"}",
        )
        .await
        .expect("write");
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        stream.read_to_end(&mut answer),
    )
    .await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 400"),
        "{answer}"
    );
    println!("a header value with a bare CR: {:?}", answer.lines().next());
    assert_eq!(inbox.count().await, 0, "nothing stored");
    inbox.stop().await;
}
