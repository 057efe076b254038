//! The inbox routes over a scripted ingest port: which request reaches which source, what the
//! port receives, and the status, body and headers of every outcome.
#![allow(clippy::unwrap_used)]

use async_trait::async_trait;
use queuebox_http::{HttpServer, InboxRoute, InboxRoutes, Listeners, ServerOptions};
use queuebox_ports::health::{HealthReport, OverallStatus, Readiness};
use queuebox_ports::ingest::{Ingest, IngestOutcome, Ingested, Received, Rejection};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Answers with the outcome the body names, and remembers what it received.
#[derive(Default)]
struct Scripted {
    calls: Mutex<Vec<(String, Received)>>,
}

#[async_trait]
impl Ingest for Scripted {
    async fn ingest(&self, source: &str, received: Received) -> Ingested {
        self.calls
            .lock()
            .unwrap()
            .push((source.to_owned(), received.clone()));
        let with_id = |outcome| Ingested {
            correlation_id: Some("corr-7".into()),
            outcome,
        };
        match received.body.as_slice() {
            b"stored" => with_id(IngestOutcome::Stored {
                id: "6f1c9a52-3b7e-4d0a-9c55-0a1b2c3d4e5f".parse().unwrap(),
            }),
            b"duplicate" => with_id(IngestOutcome::Duplicate),
            b"filtered" => Ingested::early(IngestOutcome::Filtered),
            b"unauthorized" => Ingested::early(IngestOutcome::Unauthorized {
                reason: "Invalid bearer token".into(),
            }),
            b"limited" => Ingested::early(IngestOutcome::RateLimited {
                retry_after: Duration::from_millis(12_300),
            }),
            b"invalid" => with_id(IngestOutcome::Rejected(Rejection::InvalidJson)),
            b"keyless" => with_id(IngestOutcome::Rejected(Rejection::KeyNotFound {
                path: "$.id".into(),
            })),
            b"storage" => with_id(IngestOutcome::Rejected(Rejection::StorageFailed)),
            b"untransformable" => with_id(IngestOutcome::Rejected(Rejection::TransformFailed {
                reason: "T2001 at position 4: bad".into(),
            })),
            _ => Ingested::early(IngestOutcome::UnknownSource),
        }
    }
}

struct AlwaysReady;

#[async_trait]
impl Readiness for AlwaysReady {
    async fn readiness(&self) -> HealthReport {
        HealthReport {
            status: OverallStatus::Healthy,
            components: BTreeMap::new(),
        }
    }
}

async fn serve(ingest: Arc<Scripted>) -> HttpServer {
    let data = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    HttpServer::start(
        Listeners {
            data,
            management: None,
        },
        ServerOptions {
            max_body_bytes: 64,
            request_read_timeout: std::time::Duration::from_secs(5),
        },
        InboxRoutes {
            routes: vec![
                InboxRoute {
                    path: "/inbox/orders".into(),
                    source: "orders".into(),
                },
                InboxRoute {
                    path: "/inbox/odd{path}".into(),
                    source: "odd".into(),
                },
            ],
            ingest,
        },
        Arc::new(AlwaysReady),
        Arc::new(String::new),
        None,
    )
    .await
    .unwrap()
}

async fn post(server: &HttpServer, path: &str, body: &'static str) -> reqwest::Response {
    client()
        .post(format!("http://{}{path}", server.data_addr()))
        .header("X-Tenant", "acme")
        .header("x-tenant", "second")
        .body(body)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn every_outcome_gets_its_documented_answer() {
    let ingest = Arc::new(Scripted::default());
    let server = serve(Arc::clone(&ingest)).await;
    let cases: [(&str, u16, Option<&str>); 9] = [
        (
            "stored",
            202,
            Some(r#"{"messageId":"6f1c9a52-3b7e-4d0a-9c55-0a1b2c3d4e5f"}"#),
        ),
        ("duplicate", 200, Some(r#"{"status":"duplicate"}"#)),
        ("filtered", 202, Some(r#"{"status":"filtered"}"#)),
        (
            "unauthorized",
            401,
            Some(r#"{"error":"Invalid bearer token"}"#),
        ),
        ("limited", 429, None),
        ("invalid", 400, Some(r#"{"error":"Invalid JSON"}"#)),
        (
            "keyless",
            400,
            Some(r#"{"error":"Idempotency key not found at path $.id"}"#),
        ),
        ("storage", 500, Some(r#"{"error":"Storage failed"}"#)),
        (
            "untransformable",
            422,
            Some(r#"{"error":"Transform failed: T2001 at position 4: bad"}"#),
        ),
    ];
    for (body, status, expected) in cases {
        let response = post(&server, "/inbox/orders", body).await;
        assert_eq!(response.status().as_u16(), status, "{body}");
        let correlation = response
            .headers()
            .get("x-correlation-id")
            .map(|v| v.to_str().unwrap().to_owned());
        let early = matches!(body, "filtered" | "unauthorized" | "limited");
        assert_eq!(correlation.is_none(), early, "{body}: {correlation:?}");
        if body == "limited" {
            // Rounded up to whole seconds.
            assert_eq!(response.headers()["retry-after"], "13");
        }
        let text = response.text().await.unwrap();
        match expected {
            Some(json) => assert_eq!(text, json, "{body}"),
            None => assert_eq!(text, "", "{body}"),
        }
    }
    server.stop(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn the_route_passes_the_source_raw_body_and_every_header_value() {
    let ingest = Arc::new(Scripted::default());
    let server = serve(Arc::clone(&ingest)).await;
    assert_eq!(post(&server, "/inbox/orders", "stored").await.status(), 202);
    // A source path with salvo's pattern characters is a literal path, not a pattern.
    assert_eq!(
        post(&server, "/inbox/oddanything", "stored").await.status(),
        404
    );
    let calls = ingest.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 1);
    let (source, received) = &calls[0];
    assert_eq!(source, "orders");
    assert_eq!(received.body, b"stored");
    let tenants: Vec<&str> = received
        .headers
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case("x-tenant"))
        .map(|(_, value)| value.as_str())
        .collect();
    assert_eq!(tenants, vec!["acme", "second"]);
    server.stop(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn only_post_on_a_configured_path_reaches_the_pipeline() {
    let ingest = Arc::new(Scripted::default());
    let server = serve(Arc::clone(&ingest)).await;
    let base = format!("http://{}", server.data_addr());
    let client = client();
    assert_eq!(
        client
            .post(format!("{base}/inbox/other"))
            .body("stored")
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    assert_eq!(
        client
            .post(format!("{base}/inbox/orders/"))
            .body("stored")
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    let get = client
        .get(format!("{base}/inbox/orders"))
        .send()
        .await
        .unwrap();
    assert!(get.status().is_client_error(), "{}", get.status());
    // The root still answers.
    assert_eq!(client.get(&base).send().await.unwrap().status(), 200);
    assert!(ingest.calls.lock().unwrap().is_empty());
    // The body cap holds on the inbox route.
    let big = client
        .post(format!("{base}/inbox/orders"))
        .body(vec![b'x'; 65])
        .send()
        .await
        .unwrap();
    assert_eq!(big.status(), 413);
    assert!(ingest.calls.lock().unwrap().is_empty());
    server.stop(Duration::from_secs(1)).await;
}

/// A reqwest client with a rustls crypto provider installed: a whole-workspace build enables reqwest's
/// rustls without a built-in provider (the HTTP destination installs ring itself), and a client built
/// without one panics.
fn client() -> reqwest::Client {
    static PROVIDER: std::sync::Once = std::sync::Once::new();
    PROVIDER.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    reqwest::Client::new()
}

#[tokio::test]
async fn every_data_port_request_gets_503_once_stopping_begins() {
    let ingest = Arc::new(Scripted::default());
    let server = serve(Arc::clone(&ingest)).await;
    let base = format!("http://{}", server.data_addr());
    assert_eq!(
        client()
            .get(format!("{base}/"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );

    server.refuse_new_requests();
    for response in [
        client().get(format!("{base}/")).send().await.unwrap(),
        client()
            .post(format!("{base}/inbox/orders"))
            .body(r#"{"id":"1"}"#)
            .send()
            .await
            .unwrap(),
        client()
            .get(format!("{base}/no/such/route"))
            .send()
            .await
            .unwrap(),
    ] {
        assert_eq!(response.status(), 503);
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(
            body,
            serde_json::json!({"error": "QueueBox is shutting down"})
        );
    }
    server.stop(std::time::Duration::from_secs(1)).await;
}
