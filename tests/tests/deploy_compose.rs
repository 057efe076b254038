//! The Compose stack's configuration, `deploy/compose/queuebox.yml`, run against the local services:
//! the Compose host names are rewritten to loopback (a fresh database, a test receiver, free ports)
//! and every other line stays as shipped. The variables come from `deploy/compose/.env.example`,
//! with the database account and the webhook token replaced. The test sees an outbox row
//! delivered to the receiver, a webhook stored in the inbox (and relayed to the receiver), and the
//! health routes on the management port only, which is what the Compose healthcheck relies on.

use queuebox_tests::database::TestDatabase;
use queuebox_tests::process::Launch;
use queuebox_tests::receiver::{Policy, Receiver};
use queuebox_tests::{free_port, http, wait_until};
use std::path::PathBuf;
use std::time::Duration;
use uuid::Uuid;

const START: Duration = Duration::from_secs(30);
const DELIVERY: Duration = Duration::from_secs(15);

fn compose_file(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/compose")
        .join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("read {}: {error}", path.display()))
}

/// Replaces the one line `from` with `to`; fails when the shipped file no longer holds it exactly
/// once (the rewrite would silently test something else).
fn rewrite(yaml: &str, from: &str, to: &str) -> String {
    let found = yaml.lines().filter(|line| line.trim() == from).count();
    assert_eq!(
        found, 1,
        "deploy/compose/queuebox.yml should hold the line {from:?} once, found {found}"
    );
    yaml.lines()
        .map(|line| {
            if line.trim() == from {
                let indent = &line[..line.len() - line.trim_start().len()];
                format!("{indent}{to}")
            } else {
                line.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `NAME=value` lines of `.env.example`.
fn env_example() -> Vec<(String, String)> {
    compose_file(".env.example")
        .lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .filter_map(|line| line.split_once('='))
        .map(|(name, value)| (name.trim().to_owned(), value.trim().to_owned()))
        .collect()
}

#[tokio::test]
async fn the_compose_configuration_delivers_a_row_and_stores_a_webhook() {
    let db = TestDatabase::create().await;
    let receiver = Receiver::start(Policy::status(200)).await;
    let data_port = free_port();
    let management_port = free_port();

    let shipped = compose_file("queuebox.yml");
    let mut yaml = rewrite(
        &shipped,
        "httpPort: 8080",
        &format!("httpPort: {data_port}"),
    );
    yaml = rewrite(
        &yaml,
        "managementPort: 9090",
        &format!("managementPort: {management_port}"),
    );
    yaml = rewrite(
        &yaml,
        "url: jdbc:postgresql://postgres:5432/queuebox",
        &format!("url: {}", db.jdbc_url()),
    );
    yaml = rewrite(
        &yaml,
        "baseUrl: http://receiver:9999",
        &format!("baseUrl: {}", receiver.url()),
    );

    let token = format!("orders-{}", Uuid::new_v4().simple());
    let mut launch = Launch::with_config(&yaml);
    let variables = env_example();
    for name in ["POSTGRES_USER", "POSTGRES_PASSWORD", "ORDERS_WEBHOOK_TOKEN"] {
        assert!(
            variables.iter().any(|(n, _)| n == name),
            ".env.example does not set {name}"
        );
    }
    for (name, value) in &variables {
        let value = match name.as_str() {
            "POSTGRES_USER" => db.user.clone(),
            "POSTGRES_PASSWORD" => db.password.clone(),
            "ORDERS_WEBHOOK_TOKEN" => token.clone(),
            _ => value.clone(),
        };
        launch = launch.env(name, &value);
    }
    let qb = launch.spawn(&["serve"]);

    // Ready on the management port, which the Compose healthcheck calls.
    let client = http();
    let ready = format!("http://127.0.0.1:{management_port}/health/ready");
    wait_until("readiness on the management port", START, || async {
        match client.get(&ready).send().await {
            Ok(response) if response.status().is_success() => Some(()),
            _ => None,
        }
    })
    .await;
    let live = client
        .get(format!("http://127.0.0.1:{management_port}/health/live"))
        .send()
        .await
        .expect("GET /health/live on the management port");
    assert_eq!(live.status(), 200, "log:\n{}", qb.log());
    // The trap the image's own HEALTHCHECK falls into: the data port does not answer health.
    let on_data_port = client
        .get(format!("http://127.0.0.1:{data_port}/health/live"))
        .send()
        .await
        .expect("GET /health/live on the data port");
    assert_eq!(on_data_port.status(), 404);

    // An outbox row reaches the receiver through the route `**`.
    let pool = db.pool().await;
    sqlx::query(
        "INSERT INTO outbox (topic, key, payload) VALUES ('invoice.paid', 'inv-7', $1::jsonb)",
    )
    .bind(r#"{"invoice":"inv-7","amount":42}"#)
    .execute(&pool)
    .await
    .expect("insert an outbox row");
    let first = receiver.wait_for(1, DELIVERY).await;
    assert_eq!(first[0].path, "/events");
    assert_eq!(first[0].header("x-topic"), Some("invoice.paid"));
    assert_eq!(
        first[0].json(),
        serde_json::json!({"invoice": "inv-7", "amount": 42})
    );

    // The webhook endpoint wants the bearer token from the environment.
    let webhook = format!("http://127.0.0.1:{data_port}/inbox/orders");
    let body = r#"{"id":"ord-1001","type":"created","total":12.5}"#;
    let refused = client
        .post(&webhook)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("POST without a token");
    assert_eq!(refused.status(), 401);
    for attempt in 0..2 {
        let answer = client
            .post(&webhook)
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("POST the webhook");
        assert!(
            answer.status().is_success(),
            "attempt {attempt}: {}; log:\n{}",
            answer.status(),
            qb.log()
        );
    }
    let stored: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM inbox WHERE source = 'orders' AND idempotency_key = 'ord-1001'",
    )
    .fetch_one(&pool)
    .await
    .expect("count inbox rows");
    assert_eq!(stored, 1, "the second request is a duplicate");

    // The relay forwards it as order.created, which the same route delivers.
    let both = receiver.wait_for(2, DELIVERY).await;
    assert_eq!(both[1].header("x-topic"), Some("order.created"));
    assert_eq!(both[1].json()["id"], "ord-1001");
    wait_until("the inbox row processed", DELIVERY, || async {
        let state: String =
            sqlx::query_scalar("SELECT state FROM inbox WHERE idempotency_key = 'ord-1001'")
                .fetch_one(&pool)
                .await
                .ok()?;
        (state == "processed").then_some(())
    })
    .await;

    drop(qb);
    pool.close().await;
    db.drop_database().await;
}
