//! The latency floor of capture-woken delivery on this machine: the least work any deliverer that is
//! woken by logical decoding and claims rows with a lease can do, so that `bench/run-capture.sh
//! latency` (LAT_MODES=floor) can put QueueBox beside it in the same run, on the same load.
//!
//!   pg_recvlogical -d DB --slot S --start -f - | qb-bench-capture-floor DB_URL RECEIVER_URL [CONCURRENCY [direct]]
//!
//! With `direct`, no claim at all: each inserted row is POSTed straight from the decoded stream (id
//! and payload read from test_decoding's line) once its commit arrives, then marked sent. That is
//! not a deliverer (no lease, nothing fences a second process), only the floor of decoding plus HTTP
//! on this machine.
//!
//! What it leaves out on purpose, so the figure is a floor rather than a rival: per-key order (one
//! claim statement over every pending row, no key walk), routing, transforms, renewals, metrics and
//! any bookkeeping. What it keeps, because any outbox deliverer needs it: one claim statement a
//! wake-up (lease columns set, SKIP LOCKED, no flush wait, as QueueBox's claims), quick retries only
//! when a claim right after a wake-up found nothing (a commit can be decoded a little before other
//! sessions see it), one HTTP POST per row with at most CONCURRENCY in flight, and a batched finish
//! that marks rows `sent` after their POST answered 2xx.

use sqlx::postgres::PgPoolOptions;
use sqlx::{PgPool, Row};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncBufReadExt;
use tokio::sync::{Notify, Semaphore, mpsc};
use uuid::Uuid;

/// One claim: due pending rows in due order, whatever their key, locked past other claimers, leased
/// for 30 s, committed without waiting for the log flush (a lost claim only hands rows back).
const CLAIM: &str = "
WITH locked AS (
    SELECT id FROM outbox
     WHERE state = 'pending' AND scheduled_at <= now()
       AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'
     ORDER BY scheduled_at
     LIMIT $1
     FOR UPDATE SKIP LOCKED)
UPDATE outbox o
   SET state = 'processing', claim_token = gen_random_uuid(), claimed_at = now(),
       lease_expires_at = now() + interval '30 seconds', updated_at = now()
  FROM locked
 WHERE o.id = locked.id
RETURNING o.id, o.payload::text";

/// The finish of rows whose POST answered 2xx (an ordinary, flushed commit).
const FINISH: &str = "UPDATE outbox SET state = 'sent', updated_at = now() WHERE id = ANY($1)";

const BATCH: i32 = 100;
const WAKE_WINDOW: Duration = Duration::from_millis(100);
const IDLE_WAIT: Duration = Duration::from_secs(5);

type Failure = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Failure> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(database), Some(receiver)) = (args.get(1), args.get(2)) else {
        return Err("usage: qb-bench-capture-floor DATABASE_URL RECEIVER_URL [CONCURRENCY [direct]] (pg_recvlogical's test_decoding output on stdin)".into());
    };
    let concurrency: usize = match args.get(3) {
        Some(text) => text
            .parse()
            .map_err(|e| format!("CONCURRENCY '{text}': {e}"))?,
        None => 8,
    };
    let direct = match args.get(4).map(String::as_str) {
        None => false,
        Some("direct") => true,
        Some(other) => return Err(format!("mode '{other}': only 'direct' is known").into()),
    };
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .test_before_acquire(false)
        .connect(database)
        .await
        .map_err(|e| format!("connecting to {database}: {e}"))?;
    let wake = Arc::new(Notify::new());
    let (finished_tx, finished_rx) = mpsc::unbounded_channel();
    tokio::spawn(finish(pool.clone(), finished_rx));
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()?;
    let poster = Poster {
        http,
        receiver: receiver.clone(),
        permits: Arc::new(Semaphore::new(concurrency)),
        finished: finished_tx,
    };
    if direct {
        eprintln!("capture floor ready (direct)");
        return post_decoded(poster).await;
    }
    tokio::spawn(read_commits(Arc::clone(&wake)));
    eprintln!("capture floor ready");

    let mut woken_until: Option<Instant> = None;
    let mut retry = Duration::from_millis(1);
    loop {
        let rows = sqlx::query(CLAIM).bind(BATCH).fetch_all(&pool).await?;
        let claimed = rows.len();
        for row in rows {
            let id: Uuid = row.try_get(0)?;
            let payload: String = row.try_get(1)?;
            poster.start(id, payload).await?;
        }
        if claimed as i32 >= BATCH {
            continue;
        }
        let wait = match woken_until {
            Some(until) if claimed == 0 && Instant::now() < until => {
                let wait = retry;
                retry *= 2;
                wait
            }
            _ => IDLE_WAIT,
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = wake.notified() => {
                woken_until = Some(Instant::now() + WAKE_WINDOW);
                retry = Duration::from_millis(1);
            }
        }
    }
}

/// Reads test_decoding's lines (BEGIN, one line a change, COMMIT) and wakes the claim loop at each
/// commit that inserted a row. Ends the process when the stream ends.
async fn read_commits(wake: Arc<Notify>) {
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut inserted = false;
    loop {
        match lines.next_line().await {
            Ok(Some(line)) => match decoded(&line) {
                Decoded::Begin => inserted = false,
                Decoded::Commit if inserted => wake.notify_one(),
                Decoded::Insert => inserted = true,
                Decoded::Commit | Decoded::Other => {}
            },
            Ok(None) => {
                eprintln!("commit stream ended");
                std::process::exit(0);
            }
            Err(error) => {
                eprintln!("reading the commit stream: {error}");
                std::process::exit(1);
            }
        }
    }
}

/// Marks delivered rows sent, every row that finished while the previous write ran in one statement.
async fn finish(pool: PgPool, mut finished: mpsc::UnboundedReceiver<Uuid>) {
    while let Some(first) = finished.recv().await {
        let mut ids = vec![first];
        while let Ok(id) = finished.try_recv() {
            ids.push(id);
        }
        if let Err(error) = sqlx::query(FINISH).bind(&ids).execute(&pool).await {
            eprintln!("finishing {} rows: {error}", ids.len());
        }
    }
}

/// Starts the POSTs of rows, at most `permits` at once, and hands each id to the finish once the
/// receiver answered 2xx (otherwise the row stays unsent, which the run's "not sent" count shows).
#[derive(Clone)]
struct Poster {
    http: reqwest::Client,
    receiver: String,
    permits: Arc<Semaphore>,
    finished: mpsc::UnboundedSender<Uuid>,
}

impl Poster {
    /// Waits for a free permit, then POSTs the row in a task of its own.
    async fn start(&self, id: Uuid, payload: String) -> Result<(), Failure> {
        let permit = Arc::clone(&self.permits).acquire_owned().await?;
        let poster = self.clone();
        tokio::spawn(async move {
            let sent = poster
                .http
                .post(&poster.receiver)
                .header("content-type", "application/json")
                .header("x-message-id", id.to_string())
                .body(payload)
                .send()
                .await;
            drop(permit);
            match sent {
                Ok(answer) if answer.status().is_success() => {
                    let _ = poster.finished.send(id);
                }
                Ok(answer) => eprintln!("POST of {id}: {}", answer.status()),
                Err(error) => eprintln!("POST of {id}: {error}"),
            }
        });
        Ok(())
    }
}

/// The `direct` floor: each commit's inserted rows are POSTed straight from test_decoding's lines.
async fn post_decoded(poster: Poster) -> Result<(), Failure> {
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut rows: Vec<(Uuid, String)> = Vec::new();
    while let Some(line) = lines.next_line().await? {
        match decoded(&line) {
            Decoded::Begin => rows.clear(),
            Decoded::Commit => {
                for (id, payload) in rows.drain(..) {
                    poster.start(id, payload).await?;
                }
            }
            Decoded::Insert => {
                let (Some(id), Some(payload)) = (
                    quoted(&line, "id[uuid]:'"),
                    quoted(&line, "payload[jsonb]:'"),
                ) else {
                    return Err(format!("no id or payload in the decoded line: {line}").into());
                };
                rows.push((id.parse()?, payload.replace("''", "'")));
            }
            Decoded::Other => {}
        }
    }
    eprintln!("commit stream ended");
    Ok(())
}

/// What one line of test_decoding's output is.
enum Decoded {
    Begin,
    Commit,
    Insert,
    /// Any other change (update, delete, truncate, a message).
    Other,
}

fn decoded(line: &str) -> Decoded {
    if line.starts_with("BEGIN") {
        Decoded::Begin
    } else if line.starts_with("COMMIT") {
        Decoded::Commit
    } else if line.contains(": INSERT:") {
        Decoded::Insert
    } else {
        Decoded::Other
    }
}

/// The text after `label` up to the next single quote that is not doubled (test_decoding's quoting).
fn quoted<'a>(line: &'a str, label: &str) -> Option<&'a str> {
    let start = line.find(label)? + label.len();
    let rest = &line[start..];
    let bytes = rest.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\'' {
            if bytes.get(i + 1) == Some(&b'\'') {
                i += 2;
                continue;
            }
            return Some(&rest[..i]);
        }
        i += 1;
    }
    None
}
