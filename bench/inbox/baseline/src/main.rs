//! The yardstick of the inbox ingestion benchmark: one salvo route, `POST /inbox/<source>`, that
//! parses the body as JSON, reads `$.id` (and `$.type`), and runs the same single
//! `INSERT ... ON CONFLICT DO NOTHING RETURNING id` into the QueueBox inbox table that the service
//! runs (same nine columns, request headers as a JSON object, a fresh correlation id), answering
//! 202 {"messageId"} for a new row and 200 {"status":"duplicate"} for a repeat. Nothing else: no
//! auth, no filter, no transform, no metrics, no logging.
//!
//! Usage: qb-inbox-baseline --url postgres://u:p@host/db [--port 18481] [--pool 10] [--source bench]

use std::sync::OnceLock;

use salvo::http::StatusCode;
use salvo::http::header::{CONTENT_TYPE, HeaderValue};
use salvo::prelude::*;
use serde_json::{Map, Value};
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use sqlx::types::Json;
use uuid::Uuid;

const INSERT: &str = "INSERT INTO inbox (id, source, idempotency_key, aggregate_id, event_type, \
     payload, headers, correlation_id, consumption) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING RETURNING id";
const MAX_BODY: usize = 1 << 20;

static POOL: OnceLock<PgPool> = OnceLock::new();
static SOURCE: OnceLock<String> = OnceLock::new();

fn json(res: &mut Response, status: StatusCode, body: &Value) {
    res.status_code(status);
    res.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let _ = res.write_body(serde_json::to_vec(body).unwrap_or_default());
}

#[handler]
async fn ingest(req: &mut Request, res: &mut Response) {
    let body = match req.payload_with_max_size(MAX_BODY).await {
        Ok(bytes) => bytes.clone(),
        Err(_) => return json(res, StatusCode::BAD_REQUEST, &serde_json::json!({"error": "Invalid JSON"})),
    };
    let payload: Value = match serde_json::from_slice(&body) {
        Ok(value) => value,
        Err(_) => return json(res, StatusCode::BAD_REQUEST, &serde_json::json!({"error": "Invalid JSON"})),
    };
    let key = match payload.get("id") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Null) | None => {
            return json(res, StatusCode::BAD_REQUEST, &serde_json::json!({"error": "no id"}));
        }
        Some(other) => other.to_string(),
    };
    let event_type = payload.get("type").and_then(Value::as_str).map(str::to_owned);
    let headers: Map<String, Value> = req
        .headers()
        .iter()
        .map(|(name, value)| {
            (name.as_str().to_owned(), Value::String(String::from_utf8_lossy(value.as_bytes()).into_owned()))
        })
        .collect();
    let pool = POOL.get().expect("pool");
    let inserted: Result<Option<Uuid>, sqlx::Error> = sqlx::query_scalar(INSERT)
        .bind(Uuid::new_v4())
        .bind(SOURCE.get().expect("source").as_str())
        .bind(key)
        .bind(None::<String>)
        .bind(event_type)
        .bind(Json(&payload))
        .bind(Json(headers))
        .bind(Uuid::new_v4().to_string())
        .bind("push")
        .fetch_optional(pool)
        .await;
    match inserted {
        Ok(Some(id)) => json(res, StatusCode::ACCEPTED, &serde_json::json!({"messageId": id.to_string()})),
        Ok(None) => json(res, StatusCode::OK, &serde_json::json!({"status": "duplicate"})),
        Err(error) => {
            eprintln!("insert failed: {error}");
            json(res, StatusCode::INTERNAL_SERVER_ERROR, &serde_json::json!({"error": "Storage failed"}))
        }
    }
}

fn arg(args: &[String], name: &str, default: &str) -> String {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_else(|| default.to_owned())
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let url = arg(&args, "--url", "postgres://queuebox:queuebox@127.0.0.1:5432/queuebox");
    let port: u16 = arg(&args, "--port", "18481").parse().expect("--port");
    let pool_size: u32 = arg(&args, "--pool", "10").parse().expect("--pool");
    let source = arg(&args, "--source", "bench");
    let pool = PgPoolOptions::new()
        .max_connections(pool_size)
        .connect(&url)
        .await
        .expect("connect to PostgreSQL");
    let _ = POOL.set(pool);
    let _ = SOURCE.set(source.clone());
    let router = Router::with_path(format!("inbox/{source}")).post(ingest);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("bind");
    let acceptor = salvo::conn::tcp::TcpAcceptor::try_from(listener).expect("acceptor");
    eprintln!("qb-inbox-baseline listening on 127.0.0.1:{port}, source {source}, pool {pool_size}");
    Server::new(acceptor).serve(router).await;
}
