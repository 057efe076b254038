//! The conformance runner: every scenario of clients/conformance/scenarios.json against a fresh
//! database, through the crate's public API. Go and TypeScript run the same file.

mod common;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use common::TestDb;
use queuebox_inbox::{
    DefaultRetryPolicy, FailureAction, HandlerError, InboxWorker, Message, Options, PgTransaction,
    Schema, handler_fn, sanitize, sanitize_error,
};
use serde_json::Value;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use tokio::sync::oneshot;

const RUNNER: &str = "rust";

// ---- logs: a subscriber that keeps every event's text ----

fn logs() -> &'static Mutex<Vec<String>> {
    static LOGS: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    LOGS.get_or_init(Mutex::default)
}

struct Capture;

struct Fields(String);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, " {}={:?}", field.name(), value);
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = Fields(format!("{}", event.metadata().level()));
        event.record(&mut fields);
        logs().lock().expect("logs").push(fields.0);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

fn install_capture() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        tracing::subscriber::set_global_default(Capture).expect("the only global subscriber");
    });
}

// ---- events and the in-flight check ----

#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<String>>,
    in_flight: Mutex<(HashMap<String, i32>, HashMap<String, i32>)>,
}

impl Recorder {
    fn add(&self, event: impl Into<String>) {
        self.events.lock().expect("events").push(event.into());
    }
    fn snapshot(&self) -> Vec<String> {
        self.events.lock().expect("events").clone()
    }
    fn has(&self, event: &str) -> bool {
        self.events
            .lock()
            .expect("events")
            .iter()
            .any(|e| e == event)
    }
    fn enter(&self, m: &Message) {
        self.add(format!("start:{}", m.idempotency_key));
        let (key_over, agg_over) = {
            let mut f = self.in_flight.lock().expect("in flight");
            let k = f.0.entry(m.idempotency_key.clone()).or_default();
            *k += 1;
            let key_over = *k > 1;
            let agg_over = m.aggregate_id.as_ref().is_some_and(|a| {
                let n = f.1.entry(a.clone()).or_default();
                *n += 1;
                *n > 1
            });
            (key_over, agg_over)
        };
        if key_over {
            self.add(format!("overlap:key:{}", m.idempotency_key));
        }
        if agg_over {
            self.add(format!(
                "overlap:aggregate:{}",
                m.aggregate_id.as_deref().unwrap_or_default()
            ));
        }
    }
    fn leave(&self, key: &str, aggregate: Option<&str>) {
        self.add(format!("end:{key}"));
        let mut f = self.in_flight.lock().expect("in flight");
        *f.0.entry(key.to_owned()).or_default() -= 1;
        if let Some(a) = aggregate {
            *f.1.entry(a.to_owned()).or_default() -= 1;
        }
    }
}

/// Records `end:<key>` however the handler ends, dropping included (that is its cancellation).
struct Leave {
    rec: Arc<Recorder>,
    key: String,
    aggregate: Option<String>,
}

impl Drop for Leave {
    fn drop(&mut self) {
        self.rec.leave(&self.key, self.aggregate.as_deref());
    }
}

/// Records `cancelled:<key>` when the handler future is dropped while it waits.
struct CancelFlag {
    rec: Arc<Recorder>,
    key: String,
    armed: bool,
}

impl Drop for CancelFlag {
    fn drop(&mut self) {
        if self.armed {
            self.rec.add(format!("cancelled:{}", self.key));
        }
    }
}

// ---- the database ----

/// One value of a one-column query as text (`<null>` for NULL or no row); `$1` is `id`.
async fn query_text(pool: &PgPool, sql: &str, id: &str) -> Result<String, sqlx::Error> {
    let wrapped = format!("SELECT (q.v)::text FROM ({sql}) AS q(v)");
    let mut query = sqlx::query_scalar::<_, Option<String>>(sqlx::AssertSqlSafe(wrapped));
    if sql.contains("$1") {
        query = query.bind(id.to_owned());
    }
    Ok(query
        .fetch_optional(pool)
        .await?
        .flatten()
        .unwrap_or_else(|| "<null>".to_owned()))
}

async fn exec(pool: &PgPool, sql: &str, id: &str) -> Result<(), sqlx::Error> {
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()));
    if sql.contains("$1") {
        query = query.bind(id.to_owned());
    }
    query.execute(pool).await.map(|_| ())
}

async fn poll_until<F, Fut>(deadline: Duration, mut check: F) -> Result<(), String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool, sqlx::Error>>,
{
    let until = tokio::time::Instant::now() + deadline;
    loop {
        let last = match check().await {
            Ok(true) => return Ok(()),
            Ok(false) => None,
            Err(e) => Some(e.to_string()),
        };
        if tokio::time::Instant::now() > until {
            return Err(format!(
                "timed out after {deadline:?} (last error: {last:?})"
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// ---- the scenarios ----

fn text(v: &Value, name: &str) -> String {
    v[name].as_str().unwrap_or_default().to_owned()
}

fn num(v: &Value, name: &str) -> Option<i64> {
    v[name].as_i64()
}

fn retry_policy(r: &Value) -> DefaultRetryPolicy {
    DefaultRetryPolicy {
        max_attempts: i32::try_from(num(r, "max_attempts").expect("max_attempts")).expect("i32"),
        base_delay: Duration::from_millis(num(r, "base_delay_ms").expect("base") as u64),
        max_delay: Duration::from_millis(num(r, "max_delay_ms").expect("max") as u64),
        jitter: r["jitter"].as_f64().expect("jitter"),
    }
}

fn message(attempt: i32) -> Message {
    Message {
        id: uuid::Uuid::nil(),
        source: "orders".into(),
        idempotency_key: "k".into(),
        aggregate_id: None,
        event_type: None,
        payload: Value::Null,
        headers: Default::default(),
        correlation_id: None,
        attempt,
        created_at: chrono::DateTime::UNIX_EPOCH,
    }
}

fn run_policy(sc: &Value) -> Result<(), String> {
    let samples = num(sc, "samples").expect("samples");
    for p in sc["policies"].as_array().expect("policies") {
        let policy = if p["policy"] == "default" {
            DefaultRetryPolicy::default()
        } else {
            retry_policy(&p["policy"])
        };
        for c in p["cases"].as_array().expect("cases") {
            let attempt = i32::try_from(num(c, "attempt").expect("attempt")).expect("i32");
            let dead = c["dead"].as_bool().unwrap_or(false);
            let mut seen = std::collections::HashSet::new();
            for _ in 0..samples {
                let action = queuebox_inbox::RetryPolicy::decide(
                    &policy,
                    &message(attempt),
                    &HandlerError::msg("boom"),
                );
                match (action, dead) {
                    (FailureAction::DeadLetter, true) => {}
                    (FailureAction::RetryAfter(d), false) => {
                        let ms = d.as_secs_f64() * 1000.0;
                        let (lo, hi) = (c["min_ms"].as_f64(), c["max_ms"].as_f64());
                        let (lo, hi) = (lo.expect("min_ms"), hi.expect("max_ms"));
                        if ms < lo - 1.0 || ms > hi + 1.0 {
                            return Err(format!(
                                "policy {} attempt {attempt}: {ms} ms outside [{lo}, {hi}]",
                                p["policy"]
                            ));
                        }
                        seen.insert(d);
                    }
                    (other, _) => {
                        return Err(format!(
                            "policy {} attempt {attempt}: got {other:?}, want dead={dead}",
                            p["policy"]
                        ));
                    }
                }
            }
            let spread = c["max_ms"].as_f64() > c["min_ms"].as_f64();
            if !dead && spread && seen.len() < 2 {
                return Err(format!("attempt {attempt}: the jitter does not spread"));
            }
        }
    }
    Ok(())
}

fn run_sanitize(sc: &Value) -> Result<(), String> {
    let cases = sc["cases"].as_array().expect("cases");
    if cases.is_empty() {
        return Err("no cases".into());
    }
    for c in cases {
        let got = sanitize(&text(c, "input"));
        if got != text(c, "output") {
            return Err(format!(
                "sanitize({:?}) = {got:?}, want {:?}",
                c["input"], c["output"]
            ));
        }
    }
    for c in sc["cuts"].as_array().expect("cuts") {
        let times = num(c, "times").expect("times") as usize;
        let got = sanitize(&text(c, "repeat").repeat(times));
        let want = text(c, "output_repeat").repeat(num(c, "output_times").expect("n") as usize);
        if got != want || got.len() > num(c, "max_bytes").expect("max") as usize {
            return Err(format!(
                "cut of {times} x {:?}: {} bytes",
                c["repeat"],
                got.len()
            ));
        }
    }
    let first = &cases[0];
    if sanitize_error(&text(first, "input")) != text(first, "output") {
        return Err("sanitize_error differs from sanitize".into());
    }
    Ok(())
}

struct Ctx {
    pool: PgPool,
    sc: Value,
    rec: Arc<Recorder>,
    timeout: Duration,
}

impl Ctx {
    async fn handle(&self, m: Message, tx: &mut PgTransaction) -> Result<(), HandlerError> {
        let key = m.idempotency_key.clone();
        let id = m.id.to_string();
        self.rec.enter(&m);
        let _leave = Leave {
            rec: Arc::clone(&self.rec),
            key: key.clone(),
            aggregate: m.aggregate_id.clone(),
        };
        let handlers = &self.sc["handlers"];
        let steps = handlers
            .get(&key)
            .or_else(|| handlers.get("*"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for st in steps {
            let sql = text(&st, "sql");
            let record = text(&st, "record");
            match st["do"].as_str().unwrap_or_default() {
                "write" => {
                    sqlx::query("INSERT INTO conformance_writes (key) VALUES ($1)")
                        .bind(&key)
                        .execute(&mut **tx)
                        .await?;
                }
                "sql" if record.is_empty() => exec(&self.pool, &sql, &id).await?,
                "sql" => {
                    let v = query_text(&self.pool, &sql, &id).await?;
                    self.rec.add(format!("{record}:{key}={v}"));
                }
                "mark" => self.rec.add(format!("{}:{key}", text(&st, "event"))),
                "fail" => {
                    let times = num(&st, "repeat").unwrap_or(1).max(1) as usize;
                    return Err(HandlerError::msg(text(&st, "error").repeat(times)));
                }
                "await_cancel" => {
                    let mut flag = CancelFlag {
                        rec: Arc::clone(&self.rec),
                        key: key.clone(),
                        armed: true,
                    };
                    tokio::time::sleep(self.timeout).await;
                    flag.armed = false;
                    self.rec.add(format!("not_cancelled:{key}"));
                    return Err(HandlerError::msg("the handler was never cancelled"));
                }
                "await_sql" => {
                    poll_until(self.timeout, || async {
                        Ok(query_text(&self.pool, &sql, &id).await? == "true")
                    })
                    .await
                    .map_err(|e| HandlerError::msg(format!("await_sql {sql}: {e}")))?;
                    if !record.is_empty() {
                        self.rec.add(format!("{record}:{key}"));
                    }
                }
                "watch_sql" => {
                    let until = tokio::time::Instant::now()
                        + Duration::from_millis(num(&st, "for_ms").expect("for_ms") as u64);
                    let (mut min, mut prev, mut rises) = (None::<i64>, None::<i64>, 0);
                    while tokio::time::Instant::now() < until {
                        let v: i64 = query_text(&self.pool, &sql, &id)
                            .await?
                            .parse()
                            .map_err(|_| HandlerError::msg("watch_sql needs a number"))?;
                        min = Some(min.map_or(v, |m| m.min(v)));
                        if prev.is_some_and(|p| v > p + 100) {
                            rises += 1;
                        }
                        prev = Some(v);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    let min = min.unwrap_or_default();
                    self.rec.add(format!("{record}.min:{key}={min}"));
                    self.rec.add(format!("{record}.rises:{key}={rises}"));
                }
                "record_message" => {
                    let owner = query_text(
                        &self.pool,
                        "SELECT idempotency_key FROM inbox WHERE id = $1::uuid",
                        &id,
                    )
                    .await?;
                    let t = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
                    self.rec.add(format!(
                        "message:{key}=id_matches={} source={} key={} aggregate={} event_type={} payload_key={} header_x_test={} attempt={} correlation={}",
                        owner == key,
                        m.source,
                        m.idempotency_key,
                        t(&m.aggregate_id),
                        t(&m.event_type),
                        m.payload["key"].as_str().unwrap_or("unparsable"),
                        m.headers.get("x-test").map(String::as_str).unwrap_or_default(),
                        m.attempt,
                        t(&m.correlation_id),
                    ));
                }
                "check_token_hidden" => {
                    let token = query_text(
                        &self.pool,
                        "SELECT claim_token::text FROM inbox WHERE id = $1::uuid",
                        &id,
                    )
                    .await?;
                    let shown = format!("{m:?}");
                    let visible = token == "<null>"
                        || shown.contains(&token)
                        || shown.to_lowercase().contains("token");
                    let verdict = if visible {
                        "token_visible"
                    } else {
                        "token_hidden"
                    };
                    self.rec.add(format!("{verdict}:{key}"));
                }
                other => return Err(HandlerError::msg(format!("unknown handler step {other}"))),
            }
        }
        Ok(())
    }
}

fn options(suite: &Value, sc: &Value) -> Options {
    let d = &suite["defaults"]["worker"];
    let w = &sc["worker"];
    let pick = |name: &str| num(w, name).or_else(|| num(d, name)).expect(name);
    let mut o = Options::new(text(&suite["defaults"], "source"));
    o.batch_size = u32::try_from(pick("batch_size")).expect("u32");
    o.lease = Duration::from_millis(pick("lease_ms") as u64);
    o.max_concurrency = usize::try_from(pick("max_concurrency")).expect("usize");
    o.poll_interval = Duration::from_millis(pick("poll_interval_ms") as u64);
    o.shutdown_grace = Duration::from_millis(pick("shutdown_grace_ms") as u64);
    if w["retry"].is_object() {
        o.retry = Arc::new(retry_policy(&w["retry"]));
    }
    if let Some(map) = w["schema"].as_object() {
        let mut s = Schema::default();
        for (k, v) in map {
            let v = v.as_str().expect("a name").to_owned();
            let field = match k.as_str() {
                "namespace" => {
                    s.namespace = Some(v);
                    continue;
                }
                "table" => &mut s.table,
                "id" => &mut s.id,
                "source" => &mut s.source,
                "idempotency_key" => &mut s.idempotency_key,
                "aggregate_id" => &mut s.aggregate_id,
                "event_type" => &mut s.event_type,
                "payload" => &mut s.payload,
                "headers" => &mut s.headers,
                "state" => &mut s.state,
                "consumption" => &mut s.consumption,
                "attempt" => &mut s.attempt,
                "last_error" => &mut s.last_error,
                "scheduled_at" => &mut s.scheduled_at,
                "created_at" => &mut s.created_at,
                "processed_at" => &mut s.processed_at,
                "claimed_at" => &mut s.claimed_at,
                "claim_token" => &mut s.claim_token,
                "lease_expires_at" => &mut s.lease_expires_at,
                "correlation_id" => &mut s.correlation_id,
                other => panic!("unknown schema field {other}"),
            };
            *field = v;
        }
        o.schema = s;
    }
    o
}

async fn insert_rows(pool: &PgPool, suite: &Value, sc: &Value) -> Vec<String> {
    let mut rows: Vec<(String, Option<String>, i64)> = sc["rows"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .map(|r| {
                    let agg = r["aggregate"].as_str().map(str::to_owned);
                    (text(r, "key"), agg, num(r, "age_ms").unwrap_or(1000))
                })
                .collect()
        })
        .unwrap_or_default();
    if let Some(g) = sc["generate"].as_object() {
        let count = g["count"].as_i64().expect("count");
        let aggregates = g["aggregates"].as_i64().unwrap_or(0);
        let prefix = g["key_prefix"].as_str().unwrap_or_default();
        for i in 1..=count {
            let agg = (aggregates > 0).then(|| format!("g-{}", i % aggregates));
            rows.push((format!("{prefix}{i}"), agg, (count - i + 1) * 10));
        }
    }
    for (key, agg, age) in &rows {
        sqlx::query(
            "INSERT INTO inbox (source, idempotency_key, aggregate_id, event_type, payload, headers,
                                consumption, correlation_id, created_at, scheduled_at)
             VALUES ($1::text, $2::text, $3::text, 'test.event', jsonb_build_object('key', $2::text),
                     '{\"x-test\": \"1\"}', 'pull', 'corr-' || $2::text,
                     now() - $4::bigint * interval '1 millisecond',
                     now() - $4::bigint * interval '1 millisecond')",
        )
        .bind(text(&suite["defaults"], "source"))
        .bind(key)
        .bind(agg)
        .bind(age)
        .execute(pool)
        .await
        .expect("insert a row");
    }
    rows.into_iter().map(|r| r.0).collect()
}

struct Running {
    stop: oneshot::Sender<()>,
    done: tokio::task::JoinHandle<()>,
}

async fn run_worker_scenario(suite: &Value, sc: &Value) -> Result<(), String> {
    let timeout =
        Duration::from_millis(num(&suite["defaults"], "timeout_ms").expect("timeout") as u64);
    let db = TestDb::new().await;
    let result = async {
        let pool = &db.pool;
        sqlx::query("CREATE TABLE conformance_writes (key TEXT NOT NULL)")
            .execute(pool)
            .await
            .map_err(|e| e.to_string())?;
        for sql in sc["sql_before"].as_array().into_iter().flatten() {
            exec(pool, sql.as_str().expect("sql"), "")
                .await
                .map_err(|e| e.to_string())?;
        }
        let keys = insert_rows(pool, suite, sc).await;
        for sql in sc["sql_after_rows"].as_array().into_iter().flatten() {
            exec(pool, sql.as_str().expect("sql"), "")
                .await
                .map_err(|e| e.to_string())?;
        }
        let worker_pool = PgPoolOptions::new()
            .max_connections(20)
            .connect_with(db.options.clone())
            .await
            .map_err(|e| e.to_string())?;
        logs().lock().expect("logs").clear();
        let rec = Arc::new(Recorder::default());
        let ctx = Arc::new(Ctx {
            pool: pool.clone(),
            sc: sc.clone(),
            rec: Arc::clone(&rec),
            timeout,
        });
        let mut running: Vec<Running> = Vec::new();
        let mut stopping: Vec<Running> = Vec::new();
        for st in sc["run"].as_array().expect("run") {
            let sql = text(st, "sql");
            match st["do"].as_str().unwrap_or_default() {
                "start" => {
                    let count = num(sc, "workers").unwrap_or(1).max(1);
                    for _ in 0..count {
                        let built = InboxWorker::new(worker_pool.clone(), options(suite, sc));
                        if let Some(want) = st["expect_error_contains"].as_str() {
                            match built {
                                Err(e)
                                    if e.to_string()
                                        .to_lowercase()
                                        .contains(&want.to_lowercase()) =>
                                {
                                    continue;
                                }
                                Err(e) => {
                                    return Err(format!(
                                        "want an error containing {want:?}, got {e}"
                                    ));
                                }
                                Ok(_) => {
                                    return Err(format!(
                                        "want an error containing {want:?}, the worker was built"
                                    ));
                                }
                            }
                        }
                        let worker = built.map_err(|e| format!("InboxWorker::new: {e}"))?;
                        let ctx = Arc::clone(&ctx);
                        let handler = handler_fn(move |message, tx| {
                            let ctx = Arc::clone(&ctx);
                            Box::pin(async move { ctx.handle(message, tx).await })
                        });
                        let (stop, stopped) = oneshot::channel::<()>();
                        let done = tokio::spawn(async move {
                            worker
                                .run(handler, async {
                                    let _ = stopped.await;
                                })
                                .await;
                        });
                        running.push(Running { stop, done });
                    }
                }
                "wait_sql" => poll_until(timeout, || async {
                    Ok(query_text(pool, &sql, "").await? == "true")
                })
                .await
                .map_err(|e| {
                    format!(
                        "waiting for {sql}: {e}\nevents: {:?}\nlogs: {:?}",
                        rec.snapshot(),
                        logs().lock().expect("logs")
                    )
                })?,
                "wait_event" => {
                    let event = text(st, "event");
                    poll_until(timeout, || async { Ok(rec.has(&event)) })
                        .await
                        .map_err(|e| {
                            format!(
                                "waiting for the event {event}: {e}\nevents: {:?}",
                                rec.snapshot()
                            )
                        })?;
                }
                "sql" => exec(pool, &sql, "").await.map_err(|e| e.to_string())?,
                "stop" | "stop_async" => {
                    for r in running.drain(..) {
                        let _ = r.stop.send(());
                        stopping.push(Running {
                            stop: oneshot::channel().0,
                            done: r.done,
                        });
                    }
                    if st["do"] == "stop" {
                        wait_all(&mut stopping, timeout).await?;
                    }
                }
                "wait_stopped" => wait_all(&mut stopping, timeout).await?,
                other => return Err(format!("unknown run step {other}")),
            }
        }
        for r in running.drain(..) {
            let _ = r.stop.send(());
            stopping.push(Running {
                stop: oneshot::channel().0,
                done: r.done,
            });
        }
        wait_all(&mut stopping, timeout).await?;
        worker_pool.close().await;
        check(pool, sc, &rec, &keys).await
    }
    .await;
    db.drop_db().await;
    result
}

async fn wait_all(stopping: &mut Vec<Running>, timeout: Duration) -> Result<(), String> {
    for r in stopping.drain(..) {
        match tokio::time::timeout(timeout, r.done).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(format!("run panicked: {e}")),
            Err(_) => return Err(format!("run did not return within {timeout:?} of the stop")),
        }
    }
    Ok(())
}

async fn check(pool: &PgPool, sc: &Value, rec: &Recorder, keys: &[String]) -> Result<(), String> {
    let e = &sc["expect"];
    let events = rec.snapshot();
    let count = |ev: &str| events.iter().filter(|x| *x == ev).count();
    let list = |name: &str| -> Vec<String> {
        e[name]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut checked = 0;
    let mut errors = Vec::new();
    for ev in list("events") {
        checked += 1;
        if count(&ev) == 0 {
            errors.push(format!("missing event {ev}"));
        }
    }
    for ev in list("events_absent") {
        checked += 1;
        if count(&ev) > 0 {
            errors.push(format!("unexpected event {ev}"));
        }
    }
    for prefix in list("events_absent_prefix") {
        checked += 1;
        errors.extend(
            events
                .iter()
                .filter(|x| x.starts_with(&prefix))
                .map(|x| format!("unexpected event {x}")),
        );
    }
    for (ev, want) in e["event_counts"].as_object().into_iter().flatten() {
        checked += 1;
        if Some(count(ev) as i64) != want.as_i64() {
            errors.push(format!("event {ev} seen {} times, want {want}", count(ev)));
        }
    }
    if let Some(want) = e["each_key_started"].as_i64() {
        checked += 1;
        for k in keys {
            let got = count(&format!("start:{k}")) as i64;
            if got != want {
                errors.push(format!("row {k} handled {got} times, want {want}"));
            }
        }
    }
    let order = list("order");
    if !order.is_empty() {
        checked += 1;
        let mut last = None;
        for ev in &order {
            let at = events.iter().position(|x| x == ev);
            if at.is_none() || at <= last {
                errors.push(format!("event {ev} missing or out of order"));
                break;
            }
            last = at;
        }
    }
    for n in e["numbers"].as_array().into_iter().flatten() {
        checked += 1;
        let name = text(n, "event");
        let at_least = n["at_least"].as_f64().expect("at_least");
        match events
            .iter()
            .find_map(|x| x.strip_prefix(&format!("{name}=")))
        {
            Some(v) if v.parse::<f64>().is_ok_and(|v| v >= at_least) => {}
            Some(v) => errors.push(format!("{name} = {v}, want at least {at_least}")),
            None => errors.push(format!("no number recorded for {name}")),
        }
    }
    for c in e["sql"].as_array().into_iter().flatten() {
        checked += 1;
        let sql = text(c, "sql");
        let got = query_text(pool, &sql, "")
            .await
            .map_err(|e| format!("{sql}: {e}"))?;
        if let Some(want) = c["equals"].as_str()
            && got != want
        {
            errors.push(format!("{sql}\n got {got:?}\nwant {want:?}"));
        }
        for want in c["contains"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if !got.contains(want) {
                errors.push(format!("{sql}\n got {got:?}, which lacks {want:?}"));
            }
        }
        for not in c["not_contains"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if got.contains(not) {
                errors.push(format!("{sql}\n got {got:?}, which holds {not:?}"));
            }
        }
    }
    if e["logs"].is_object() {
        checked += 1;
        let lines = logs().lock().expect("logs").clone();
        if e["logs"]["not_empty"].as_bool() == Some(true) && lines.is_empty() {
            errors.push("nothing was logged".into());
        }
        for not in e["logs"]["not_contains"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            errors.extend(
                lines
                    .iter()
                    .filter(|l| l.contains(not))
                    .map(|l| format!("a log line holds {not:?}: {l}")),
            );
        }
    }
    let refusal = sc["run"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|st| st["expect_error_contains"].is_string());
    if checked == 0 && !refusal {
        errors.push("the scenario checks nothing".into());
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(format!("{}\nevents: {events:?}", errors.join("\n")))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_scenarios() {
    install_capture();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../conformance/scenarios.json");
    let raw = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let suite: Arc<Value> = Arc::new(serde_json::from_str(&raw).expect("the scenarios parse"));
    let scenarios = suite["scenarios"].as_array().expect("scenarios").clone();
    assert!(!scenarios.is_empty(), "no scenarios");
    let (mut passed, mut skipped, mut failed) = (0, 0, Vec::new());
    for sc in scenarios {
        let id = text(&sc, "id");
        if let Some(reason) = sc["skip"].get(RUNNER) {
            let reason = reason.as_str().unwrap_or_default();
            assert!(
                !reason.trim().is_empty(),
                "{id}: a skip must give its reason"
            );
            println!("skip {id}: {reason}");
            skipped += 1;
            continue;
        }
        let suite = Arc::clone(&suite);
        let task = tokio::spawn(async move {
            match sc["kind"].as_str() {
                Some("retry_policy") => run_policy(&sc),
                Some("sanitize") => run_sanitize(&sc),
                None => run_worker_scenario(&suite, &sc).await,
                Some(other) => Err(format!("unknown scenario kind {other}")),
            }
        });
        match tokio::time::timeout(Duration::from_secs(120), task).await {
            Ok(Ok(Ok(()))) => {
                println!("ok {id}");
                passed += 1;
            }
            Ok(Ok(Err(why))) => failed.push(format!("{id}: {why}")),
            Ok(Err(panic)) => failed.push(format!("{id}: panicked: {panic}")),
            Err(_) => failed.push(format!("{id}: did not finish in 120 s")),
        }
    }
    println!(
        "conformance (rust): {passed} passed, {skipped} skipped, {} failed",
        failed.len()
    );
    assert!(
        failed.is_empty(),
        "failed scenarios:\n{}",
        failed.join("\n\n")
    );
}
