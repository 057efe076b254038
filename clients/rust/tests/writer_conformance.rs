//! The outbox-writer conformance runner: every scenario of
//! clients/conformance/writer-scenarios.json against a fresh database, through the crate's public
//! API, with the real `queuebox` binary delivering what the writer wrote. Go, TypeScript and Python
//! run the same file.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use common::TestDb;
use queuebox_inbox::{OutboxMessage, OutboxSchema, OutboxWriter, Payload};
use serde_json::Value;
use sqlx::{Acquire, PgPool};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use uuid::Uuid;

const RUNNER: &str = "rust";

type Outcome = Result<(), String>;

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Object(o) => {
            let part = o["repeat"].as_str().unwrap_or_default();
            let times = o["times"].as_u64().unwrap_or(0) as usize;
            part.repeat(times)
        }
        other => panic!("not a text field: {other}"),
    }
}

fn schema_of(mapping: &Value) -> OutboxSchema {
    let mut schema = OutboxSchema::default();
    let Some(fields) = mapping.as_object() else {
        return schema;
    };
    for (field, name) in fields {
        let name = text(name);
        match field.as_str() {
            "namespace" => schema.namespace = Some(name),
            "table" => schema.table = name,
            "id" => schema.id = name,
            "topic" => schema.topic = name,
            "key" => schema.key = name,
            "aggregate_type" => schema.aggregate_type = name,
            "payload" => schema.payload = name,
            "headers" => schema.headers = name,
            "max_attempts" => schema.max_attempts = name,
            "scheduled_at" => schema.scheduled_at = name,
            other => panic!("unknown schema field {other}"),
        }
    }
    schema
}

fn message_of(write: &Value) -> OutboxMessage {
    let payload = if let Some(encoded) = write.get("payload_text") {
        Payload::encoded(text(encoded).into_bytes())
    } else {
        Payload::Json(
            write
                .get("payload")
                .cloned()
                .expect("a write has a payload"),
        )
    };
    let mut message = OutboxMessage::new(text(&write["topic"]), payload);
    if let Some(key) = write.get("key") {
        message = message.key(text(key));
    }
    if let Some(kind) = write.get("aggregate_type") {
        message = message.aggregate_type(text(kind));
    }
    if let Some(headers) = write.get("headers").and_then(Value::as_object) {
        for (name, value) in headers {
            message = message.header(name, text(value));
        }
    }
    if let Some(n) = write.get("max_attempts") {
        let n = n.as_u64().expect("max_attempts a whole number");
        message = message.max_attempts(u32::try_from(n).expect("max_attempts fits a u32"));
    }
    if let Some(traceparent) = write.get("traceparent") {
        message.traceparent = Some(text(traceparent));
    }
    if let Some(tracestate) = write.get("tracestate") {
        message.tracestate = Some(text(tracestate));
    }
    if let Some(ms) = write.get("scheduled_in_ms").and_then(Value::as_i64) {
        message = message.scheduled_at(Utc::now() + chrono::Duration::milliseconds(ms));
    }
    message
}

/// The scenario database's URL: QB_TEST_PG_URL with the database replaced.
fn database_url(name: &str) -> String {
    let base = std::env::var("QB_TEST_PG_URL").expect("QB_TEST_PG_URL");
    let (head, query) = match base.split_once('?') {
        Some((h, q)) => (h.to_owned(), format!("?{q}")),
        None => (base.clone(), String::new()),
    };
    let cut = head.rfind('/').expect("a database path");
    format!("{}/{name}{query}", &head[..cut])
}

fn binary() -> Result<PathBuf, String> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut tried = Vec::new();
    if let Ok(path) = std::env::var("QB_BIN") {
        tried.push(PathBuf::from(path));
    }
    if let Ok(dir) = std::env::var("CARGO_TARGET_DIR") {
        tried.push(Path::new(&dir).join("debug/queuebox"));
    }
    tried.push(repo.join("target/debug/queuebox"));
    tried.iter().find(|p| p.is_file()).cloned().ok_or_else(|| {
        format!(
            "the queuebox binary was not found (tried {}): build it with `cargo build -p queuebox`",
            tried
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

// ---- the receiver: an HTTP/1.1 server that answers 200 and records each request ----

#[derive(Debug, Clone)]
struct Received {
    headers: HashMap<String, String>,
    body: String,
}

type Log = Arc<Mutex<Vec<Received>>>;

async fn start_receiver() -> (u16, Log) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("address").port();
    let log: Log = Arc::default();
    let server_log = log.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let log = server_log.clone();
            tokio::spawn(async move {
                let (read, mut write) = stream.into_split();
                let mut reader = BufReader::new(read);
                loop {
                    let mut headers = HashMap::new();
                    let mut line = String::new();
                    // The request line, then headers up to the blank line.
                    if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
                            return;
                        }
                        let trimmed = line.trim_end();
                        if trimmed.is_empty() {
                            break;
                        }
                        if let Some((name, value)) = trimmed.split_once(':') {
                            headers
                                .insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
                        }
                    }
                    let length: usize = headers
                        .get("content-length")
                        .and_then(|l| l.parse().ok())
                        .unwrap_or(0);
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).await.is_err() {
                        return;
                    }
                    log.lock().expect("log").push(Received {
                        headers,
                        body: String::from_utf8_lossy(&body).into_owned(),
                    });
                    if write
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    (port, log)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

async fn scalar_text(pool: &PgPool, sql: &str) -> Result<String, String> {
    let value: Option<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_one(pool)
        .await
        .map_err(|e| format!("{sql}: {e}"))?;
    Ok(value.unwrap_or_else(|| "<null>".into()))
}

async fn wait_sql(pool: &PgPool, sql: &str, timeout: Duration) -> Outcome {
    let until = tokio::time::Instant::now() + timeout;
    loop {
        let done: Option<bool> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
            .fetch_one(pool)
            .await
            .map_err(|e| format!("{sql}: {e}"))?;
        if done == Some(true) {
            return Ok(());
        }
        if tokio::time::Instant::now() >= until {
            return Err(format!("not true within {timeout:?}: {sql}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn quoted_table(schema: &OutboxSchema) -> String {
    match &schema.namespace {
        Some(ns) => format!("\"{ns}\".\"{}\"", schema.table),
        None => format!("\"{}\"", schema.table),
    }
}

async fn run_scenario(db: &TestDb, sc: &Value, timeout: Duration) -> Outcome {
    sqlx::query("CREATE TABLE conformance_writes (key TEXT NOT NULL)")
        .execute(&db.pool)
        .await
        .map_err(|e| e.to_string())?;
    for sql in sc["sql_before"].as_array().into_iter().flatten() {
        let sql = sql.as_str().unwrap_or_default().to_owned();
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql.clone()))
            .execute(&db.pool)
            .await
            .map_err(|e| format!("sql_before {sql}: {e}"))?;
    }
    let schema = schema_of(&sc["writer"]["schema"]);
    let mut writer = OutboxWriter::new(schema.clone()).map_err(|e| e.to_string())?;
    if let Some(adds) = sc["writer"]["header_hook_adds"].as_object() {
        let adds: BTreeMap<String, String> =
            adds.iter().map(|(n, v)| (n.clone(), text(v))).collect();
        writer = writer.header_hook(move |headers| {
            headers.extend(adds.clone());
        });
    }

    let table = quoted_table(&schema);
    let id_check = format!("SELECT count(*) FROM {table} WHERE \"{}\" = $1", schema.id);
    let mut committed = Vec::new();
    for (t, transaction) in sc["transactions"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let mut conn = db.pool.acquire().await.map_err(|e| e.to_string())?;
        let mut tx = conn.begin().await.map_err(|e| e.to_string())?;
        if let Some(key) = transaction["business_key"].as_str() {
            sqlx::query("INSERT INTO conformance_writes (key) VALUES ($1)")
                .bind(key)
                .execute(&mut *tx)
                .await
                .map_err(|e| format!("business write: {e}"))?;
        }
        let mut ids = Vec::new();
        for (w, write) in transaction["writes"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let result = writer.write(&mut *tx, &message_of(write)).await;
            match (write.get("error").and_then(Value::as_str), result) {
                (Some(expected), Err(e)) if e.to_string().contains(expected) => {}
                (Some(expected), Err(e)) => {
                    return Err(format!(
                        "transaction {t} write {w}: expected an error containing {expected:?}, got {e}"
                    ));
                }
                (Some(expected), Ok(id)) => {
                    return Err(format!(
                        "transaction {t} write {w}: expected an error containing {expected:?}, the row {id} was written"
                    ));
                }
                (None, Ok(id)) => ids.push(id),
                (None, Err(e)) => return Err(format!("transaction {t} write {w}: {e}")),
            }
        }
        let rollback = transaction["end"].as_str() == Some("rollback");
        if rollback {
            tx.rollback().await.map_err(|e| e.to_string())?;
        } else {
            tx.commit()
                .await
                .map_err(|e| format!("transaction {t} commit: {e}"))?;
        }
        for id in ids {
            let count: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(id_check.clone()))
                .bind(id)
                .fetch_one(&db.pool)
                .await
                .map_err(|e| e.to_string())?;
            let want = if rollback { 0 } else { 1 };
            if count != want {
                return Err(format!(
                    "transaction {t}: the returned id {id} names {count} rows of {table}, expected {want}"
                ));
            }
            if !rollback {
                committed.push(id);
            }
        }
    }

    if let Some(binary_spec) = sc.get("binary") {
        run_binary(db, sc, binary_spec, &committed, timeout).await?;
    }
    for check in sc["expect"]["sql"].as_array().into_iter().flatten() {
        let sql = check["sql"].as_str().unwrap_or_default();
        let got = scalar_text(&db.pool, sql).await?;
        let want = check["equals"].as_str().unwrap_or_default();
        if got != want {
            return Err(format!("{sql}\n  got:  {got}\n  want: {want}"));
        }
    }
    Ok(())
}

async fn run_binary(
    db: &TestDb,
    sc: &Value,
    spec: &Value,
    committed: &[Uuid],
    timeout: Duration,
) -> Outcome {
    let binary = binary()?;
    let (receiver_port, log) = start_receiver().await;
    let name = db.options.get_database().unwrap_or_default().to_owned();
    let mut config = format!(
        "server:\n  httpPort: {}\ndatabase:\n  url: \"{}\"\n  migrate: false\n",
        free_port(),
        database_url(&name)
    );
    for line in spec["database"].as_array().into_iter().flatten() {
        config.push_str(&format!("  {}\n", line.as_str().unwrap_or_default()));
    }
    config.push_str(&format!(
        "outbox:\n  pollIntervalMs: 50\ndestinations:\n  hook:\n    type: http\n    baseUrl: http://127.0.0.1:{receiver_port}\n    path: /events\nroutes:\n  - topicPattern: \"**\"\n    destination: hook\n"
    ));
    let dir = std::env::temp_dir().join(format!("qb-writer-{}", Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let config_path = dir.join("queuebox.yml");
    std::fs::write(&config_path, config).map_err(|e| e.to_string())?;
    let stderr_path = dir.join("stderr.log");
    let mut child = tokio::process::Command::new(&binary)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", std::env::var("HOME").unwrap_or_default())
        .env("QUEUEBOX_CONFIG_FILE", &config_path)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).map_err(|e| e.to_string())?)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("start {}: {e}", binary.display()))?;
    let deliveries = &sc["expect"]["deliveries"];
    let settled = deliveries["settled_sql"].as_str().unwrap_or("SELECT true");
    let waited = wait_sql(&db.pool, settled, timeout).await;
    // Stop it: SIGTERM (the crate forbids unsafe code, so through kill(1)), then wait.
    if let Some(pid) = child.id() {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
    }
    if tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .is_err()
    {
        let _ = child.kill().await;
    }
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    waited.map_err(|e| format!("{e}\nqueuebox stderr:\n{stderr}"))?;

    let received = log.lock().expect("log").clone();
    let mut by_key: BTreeMap<String, Vec<&Received>> = BTreeMap::new();
    for request in &received {
        let key = request
            .headers
            .get("x-message-key")
            .cloned()
            .unwrap_or_default();
        by_key.entry(key).or_default().push(request);
        let id = request
            .headers
            .get("x-message-id")
            .cloned()
            .unwrap_or_default();
        if !committed.iter().any(|c| c.to_string() == id) {
            return Err(format!(
                "a delivery carries X-Message-Id {id:?}, which no committed write returned"
            ));
        }
    }
    let expected = deliveries["by_key"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for key in by_key.keys() {
        if !expected.contains_key(key) {
            return Err(format!("deliveries for the unexpected key {key:?}"));
        }
    }
    for (key, wanted) in &expected {
        let got = by_key.get(key).cloned().unwrap_or_default();
        let wanted = wanted.as_array().cloned().unwrap_or_default();
        if got.len() != wanted.len() {
            return Err(format!(
                "key {key}: {} deliveries, expected {}: {:?}",
                got.len(),
                wanted.len(),
                got.iter().map(|r| &r.body).collect::<Vec<_>>()
            ));
        }
        for (i, (request, want)) in got.iter().zip(&wanted).enumerate() {
            let topic = request.headers.get("x-topic").cloned().unwrap_or_default();
            if Some(topic.as_str()) != want["topic"].as_str() {
                return Err(format!(
                    "key {key} delivery {i}: topic {topic}, expected {}",
                    want["topic"]
                ));
            }
            let body: Value = serde_json::from_str(&request.body)
                .map_err(|e| format!("key {key} delivery {i}: body {:?}: {e}", request.body))?;
            if body != want["body"] {
                return Err(format!(
                    "key {key} delivery {i}: body {body}, expected {}",
                    want["body"]
                ));
            }
            for (name, value) in want["headers"].as_object().into_iter().flatten() {
                let got = request.headers.get(&name.to_ascii_lowercase());
                if got.map(String::as_str) != value.as_str() {
                    return Err(format!(
                        "key {key} delivery {i}: header {name} is {got:?}, expected {value}"
                    ));
                }
            }
        }
    }
    Ok(())
}

fn run_schema_refusal(sc: &Value) -> Outcome {
    for case in sc["cases"].as_array().into_iter().flatten() {
        let expected = case["error"].as_str().unwrap_or_default();
        match OutboxWriter::new(schema_of(&case["schema"])) {
            Err(e) if e.to_string().contains(expected) => {}
            Err(e) => {
                return Err(format!(
                    "{}: got {e}, expected {expected:?}",
                    case["schema"]
                ));
            }
            Ok(_) => {
                return Err(format!(
                    "{}: accepted, expected {expected:?}",
                    case["schema"]
                ));
            }
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writer_conformance() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../conformance/writer-scenarios.json");
    let suite: Value = serde_json::from_str(
        &std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .expect("writer-scenarios.json parses");
    let timeout = Duration::from_millis(suite["defaults"]["timeout_ms"].as_u64().unwrap_or(30_000));
    let (mut passed, mut skipped, mut failed) = (0, 0, Vec::new());
    for sc in suite["scenarios"].as_array().expect("scenarios") {
        let id = sc["id"].as_str().expect("an id");
        if let Some(reason) = sc["skip"].get(RUNNER) {
            let reason = reason.as_str().unwrap_or_default();
            assert!(!reason.is_empty(), "{id}: a skip must give its reason");
            println!("skip {id}: {reason}");
            skipped += 1;
            continue;
        }
        let outcome = if sc["kind"].as_str() == Some("schema_refusal") {
            run_schema_refusal(sc)
        } else {
            let db = TestDb::new().await;
            let outcome = run_scenario(&db, sc, timeout).await;
            db.drop_db().await;
            outcome
        };
        match outcome {
            Ok(()) => {
                println!("pass {id}");
                passed += 1;
            }
            Err(e) => {
                println!("FAIL {id}: {e}");
                failed.push(format!("{id}: {e}"));
            }
        }
    }
    println!(
        "writer conformance (rust): {passed} passed, {skipped} skipped, {} failed",
        failed.len()
    );
    assert!(
        failed.is_empty(),
        "failed scenarios:\n{}",
        failed.join("\n\n")
    );
}
