//! The worker: claim, run handlers under a renewed lease, then complete, retry or dead-letter.

use std::future::Future;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use sqlx::{PgPool, Postgres, Row};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;
use uuid::Uuid;

use crate::message::headers_from_json;
use crate::redact::sanitize;
use crate::sql::{Param, Statements, cand_limit};
use crate::{Error, FailureAction, HandlerError, Message, Options};

/// Opens the claim transaction. PostgreSQL would otherwise plan the claim afresh on every call
/// (a custom plan for its parameter values), which costs about as much as running it; the
/// generic plan is built once per connection and serves every source and batch.
///
/// The claim's commit does not wait for its WAL flush (`synchronous_commit = off`): a claim that
/// a crash loses only hands its rows back, and nothing can outlive it, because every later
/// commit that depends on it (the handler transaction's completion, a retry, a dead letter)
/// waits for the flush of the WAL up to its own record, which includes the claim. It saves a
/// disk flush per claim.
///
/// `SET LOCAL` ends with the transaction, so the connection goes back to the pool unchanged, and
/// the three statements travel in one round trip.
const CLAIM_BEGIN: &str = "BEGIN; SET LOCAL plan_cache_mode = force_generic_plan; \
                           SET LOCAL synchronous_commit = off";

/// The transaction a handler writes through. The worker owns its commit and rollback.
pub type PgTransaction = sqlx::Transaction<'static, Postgres>;

/// The work to do for one message.
///
/// Write every change through `tx`, never commit or roll it back, and fail by returning an error.
/// Cancellation is the dropping of the returned future (lease lost, or a stop past its grace), so
/// keep blocking work out of it: a future that never yields cannot be cancelled.
pub trait Handler: Send + Sync + 'static {
    fn handle<'t>(
        &'t self,
        message: Message,
        tx: &'t mut PgTransaction,
    ) -> BoxFuture<'t, Result<(), HandlerError>>;
}

impl<F> Handler for F
where
    F: for<'t> Fn(Message, &'t mut PgTransaction) -> BoxFuture<'t, Result<(), HandlerError>>
        + Send
        + Sync
        + 'static,
{
    fn handle<'t>(
        &'t self,
        message: Message,
        tx: &'t mut PgTransaction,
    ) -> BoxFuture<'t, Result<(), HandlerError>> {
        self(message, tx)
    }
}

/// Pins a closure to the handler signature, so that the compiler infers the borrow of `tx` for
/// every lifetime: `handler_fn(|message, tx| Box::pin(async move { ... }))`.
pub fn handler_fn<F>(f: F) -> F
where
    F: for<'t> Fn(Message, &'t mut PgTransaction) -> BoxFuture<'t, Result<(), HandlerError>>
        + Send
        + Sync
        + 'static,
{
    f
}

/// Claims and handles the rows of one pull source. Cheap to clone; clones share the settings.
#[derive(Clone)]
pub struct InboxWorker {
    shared: Arc<Shared>,
}

struct Shared {
    pool: PgPool,
    options: Options,
    statements: Statements,
}

/// A claimed row: the message, and the token that only the worker sees.
struct Claimed {
    message: Message,
    token: Uuid,
}

/// What a claimed row needs while it waits for a handler slot.
struct Held {
    /// The handler slots of the worker.
    slots: Arc<Semaphore>,
    /// Becomes `true` when the worker stops: a row that has not started is handed back.
    stopping: watch::Receiver<bool>,
    /// The row's place among the rows this worker holds; freed when the task ends.
    _hold: OwnedSemaphorePermit,
}

/// How a claimed row's wait for a handler slot ended.
enum Wait {
    Slot(OwnedSemaphorePermit),
    Stopped,
    LeaseLost(String),
}

/// How the handler's run ended.
enum Outcome {
    Handled(Result<(), HandlerError>),
    LeaseLost(String),
}

impl InboxWorker {
    /// Checks the settings and renders the statements for the schema.
    pub fn new(pool: PgPool, options: Options) -> Result<Self, Error> {
        options.validate()?;
        let statements = Statements::new(&options.schema.quoted()?)?;
        Ok(Self {
            shared: Arc::new(Shared {
                pool,
                options,
                statements,
            }),
        })
    }

    /// Claims and handles rows until `shutdown` completes.
    ///
    /// Each claim asks for a whole `batch_size`, even when fewer handler slots are free: the
    /// rows beyond the free slots wait here, in claim order, under their own renewed lease. The
    /// claim never returns a row of an aggregate that has a row in flight, so a waiting row never
    /// overtakes or runs beside another row of its aggregate. The next claim runs once the rows
    /// held here (waiting or running) are down to `max_concurrency`.
    ///
    /// On shutdown the worker claims nothing more and hands the waiting rows back (pending, same
    /// attempt), waits up to the grace for running handlers, then cancels the rest. A cancelled
    /// handler's transaction rolls back and its row keeps its attempt count: nothing is written,
    /// so the row returns to a claim when its lease runs out.
    pub async fn run<H: Handler>(&self, handler: H, shutdown: impl Future<Output = ()>) {
        let handler = Arc::new(handler);
        let options = &self.shared.options;
        let batch = usize::try_from(options.batch_size).unwrap_or(usize::MAX);
        let slots = Arc::new(Semaphore::new(options.max_concurrency));
        // Rows held by this worker, waiting or running.
        let held = Arc::new(Semaphore::new(options.max_concurrency + batch));
        let (stop, stopping) = watch::channel(false);
        let mut tasks: JoinSet<()> = JoinSet::new();
        tokio::pin!(shutdown);

        loop {
            while let Some(done) = tasks.try_join_next() {
                report_task_end(done);
            }
            // Wait for room for a whole batch: smaller claims would pay a claim per few rows.
            let mut room = tokio::select! {
                biased;
                () = &mut shutdown => break,
                room = Arc::clone(&held).acquire_many_owned(options.batch_size) => match room {
                    Ok(room) => room,
                    Err(_) => break,
                },
            };
            let claimed = match self.shared.claim(options.batch_size).await {
                Ok(claimed) => claimed,
                Err(error) => {
                    tracing::warn!(source = %options.source, error = %sanitize(&error.to_string()),
                        "inbox claim failed; waiting before the next claim");
                    Vec::new()
                }
            };
            if claimed.is_empty() {
                drop(room);
                tokio::select! {
                    biased;
                    () = &mut shutdown => break,
                    () = tokio::time::sleep(options.poll_interval) => continue,
                }
            }
            for row in claimed {
                // One permit of the batch's room per row; the rest is dropped below.
                let Some(hold) = room.split(1) else { break };
                tasks.spawn(process(
                    Arc::clone(&self.shared),
                    Arc::clone(&handler),
                    row,
                    Held {
                        slots: Arc::clone(&slots),
                        stopping: stopping.clone(),
                        _hold: hold,
                    },
                ));
            }
        }

        // Waiting rows see this before they see a free slot, and hand their row back.
        let _ = stop.send(true);
        self.drain(&mut tasks).await;
    }

    async fn drain(&self, tasks: &mut JoinSet<()>) {
        let grace = self.shared.options.shutdown_grace;
        let waited = tokio::time::timeout(grace, async {
            while let Some(done) = tasks.join_next().await {
                report_task_end(done);
            }
        })
        .await;
        if waited.is_err() {
            tracing::warn!(source = %self.shared.options.source, handlers = tasks.len(),
                "shutdown grace ran out; cancelling running handlers, their rows return after the lease");
            tasks.abort_all();
            while tasks.join_next().await.is_some() {}
        }
    }
}

fn report_task_end(done: Result<(), tokio::task::JoinError>) {
    if let Err(error) = done
        && error.is_panic()
    {
        // The transaction was dropped (rolled back) and nothing was written for the row, so it
        // returns after its lease like a crash would.
        tracing::error!("an inbox handler panicked; its row returns after the lease");
    }
}

impl Shared {
    /// One claim in its own transaction, committed before any handler sees a row.
    async fn claim(&self, want: u32) -> Result<Vec<Claimed>, sqlx::Error> {
        let options = &self.options;
        let want = i32::try_from(want).unwrap_or(i32::MAX);
        let mut tx = self.pool.begin_with(CLAIM_BEGIN).await?;
        let rows = self
            .statements
            .claim
            .query(&[
                ("source", Param::Text(options.source.clone())),
                ("batch", Param::Int(want)),
                ("lease_ms", Param::BigInt(options.lease_ms())),
                ("cand_limit", Param::Int(cand_limit(options.batch_size))),
            ])
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        let mut claimed = rows.iter().map(decode).collect::<Result<Vec<_>, _>>()?;
        // RETURNING comes in no particular order; the oldest rows take the first free slots.
        claimed.sort_by(|a, b| {
            (a.message.created_at, a.message.id).cmp(&(b.message.created_at, b.message.id))
        });
        Ok(claimed)
    }

    /// Renews every third of the lease; returns only when the lease is lost.
    async fn keep_lease(&self, id: Uuid, token: Uuid) -> String {
        let every = self.options.lease / 3;
        loop {
            tokio::time::sleep(every).await;
            let renewed = self
                .statements
                .renew
                .query(&[
                    ("id", Param::Uuid(id)),
                    ("token", Param::Uuid(token)),
                    ("lease_ms", Param::BigInt(self.options.lease_ms())),
                ])
                .execute(&self.pool)
                .await;
            match renewed {
                Ok(done) if done.rows_affected() == 1 => {}
                Ok(_) => return "the renewal found no row: another worker owns it".to_owned(),
                // A renewal that cannot be confirmed cannot be trusted: the lease may run out
                // while we keep writing, so the work stops here too.
                Err(error) => {
                    return format!("the renewal failed: {}", sanitize(&error.to_string()));
                }
            }
        }
    }

    /// Hands a row that never reached a handler back to the claims: pending again, same attempt,
    /// fenced on the token. When this fails the row still returns, after its lease.
    async fn release(&self, message: &Message, token: Uuid) {
        let released = self
            .statements
            .release
            .query(&[
                ("id", Param::Uuid(message.id)),
                ("token", Param::Uuid(token)),
            ])
            .execute(&self.pool)
            .await;
        if let Err(error) = released {
            tracing::warn!(source = %message.source, id = %message.id,
                error = %sanitize(&error.to_string()),
                "could not hand an unstarted row back; it returns after its lease");
        }
    }

    /// Writes the retry or the dead letter that the policy chose, fenced on the token.
    async fn fail(&self, message: &Message, token: Uuid, failure: &HandlerError) {
        let error = sanitize(&failure.to_string());
        let action = self.options.retry.decide(message, failure);
        let (statement, mut values) = match action {
            FailureAction::RetryAfter(delay) => (
                &self.statements.retry,
                vec![(
                    "delay_ms",
                    Param::BigInt(i64::try_from(delay.as_millis()).unwrap_or(i64::MAX)),
                )],
            ),
            FailureAction::DeadLetter => (&self.statements.dead, Vec::new()),
        };
        values.extend([
            ("id", Param::Uuid(message.id)),
            ("token", Param::Uuid(token)),
            ("error", Param::Text(error.clone())),
        ]);
        match statement.query(&values).execute(&self.pool).await {
            Ok(done) if done.rows_affected() == 1 => {
                tracing::warn!(source = %message.source, id = %message.id,
                    correlation_id = message.correlation_id.as_deref().unwrap_or(""),
                    attempt = message.attempt, action = ?action, error = %error,
                    "inbox handler failed");
            }
            Ok(_) => tracing::warn!(source = %message.source, id = %message.id,
                "claim lost before the failure could be recorded; the new owner has the row"),
            Err(db) => tracing::warn!(source = %message.source, id = %message.id,
                error = %sanitize(&db.to_string()),
                "recording the failure failed; the row returns after its lease"),
        }
    }
}

/// Handles one claimed row from start to end: waits for a slot under a renewed lease, runs the
/// handler, then completes, retries or dead-letters the row.
async fn process<H: Handler>(shared: Arc<Shared>, handler: Arc<H>, row: Claimed, held: Held) {
    let Claimed { message, token } = row;
    let Held {
        slots,
        mut stopping,
        _hold,
    } = held;
    // One renewal schedule from the claim to the end, across the wait and the handler.
    let lease = shared.keep_lease(message.id, token);
    tokio::pin!(lease);

    let waited = tokio::select! {
        biased;
        _ = stopping.wait_for(|stopped| *stopped) => Wait::Stopped,
        why = &mut lease => Wait::LeaseLost(why),
        slot = slots.acquire_owned() => match slot {
            Ok(slot) => Wait::Slot(slot),
            // The slots are never closed; if they were, the row is handed back like on a stop.
            Err(_) => Wait::Stopped,
        },
    };
    let _slot = match waited {
        Wait::Slot(slot) => slot,
        Wait::Stopped => {
            shared.release(&message, token).await;
            return;
        }
        Wait::LeaseLost(why) => {
            tracing::warn!(source = %message.source, id = %message.id, reason = %why,
                "inbox lease lost before the handler started; the row is left to its new owner");
            return;
        }
    };

    let mut tx = match shared.pool.begin().await {
        Ok(tx) => tx,
        Err(error) => {
            tracing::warn!(source = %message.source, id = %message.id,
                error = %sanitize(&error.to_string()),
                "could not open the handler transaction; the row returns after its lease");
            return;
        }
    };

    let outcome = {
        let handled = handler.handle(message.clone(), &mut tx);
        // Whichever ends first wins; the other future is dropped, which is how the handler is
        // cancelled when the lease is lost.
        tokio::select! {
            result = handled => Outcome::Handled(result),
            why = &mut lease => Outcome::LeaseLost(why),
        }
    };

    match outcome {
        Outcome::LeaseLost(why) => {
            rollback(tx).await;
            tracing::warn!(source = %message.source, id = %message.id, reason = %why,
                "inbox lease lost; handler cancelled and its writes rolled back");
        }
        Outcome::Handled(Ok(())) => complete(&shared, &message, token, tx).await,
        Outcome::Handled(Err(failure)) => {
            rollback(tx).await;
            shared.fail(&message, token, &failure).await;
        }
    }
}

/// Completes the row inside the handler's transaction; a lost claim takes the business writes
/// down with it, so work is never committed next to a completion that did not happen.
async fn complete(shared: &Shared, message: &Message, token: Uuid, mut tx: PgTransaction) {
    let completed = shared
        .statements
        .complete
        .query(&[
            ("id", Param::Uuid(message.id)),
            ("token", Param::Uuid(token)),
        ])
        .execute(&mut *tx)
        .await;
    match completed {
        Ok(done) if done.rows_affected() == 1 => {
            if let Err(error) = tx.commit().await {
                tracing::warn!(source = %message.source, id = %message.id,
                    error = %sanitize(&error.to_string()),
                    "commit of the handler transaction failed; the row returns after its lease");
            }
        }
        Ok(_) => {
            rollback(tx).await;
            tracing::warn!(source = %message.source, id = %message.id,
                "completion found no row: claim lost, handler writes rolled back");
        }
        Err(error) => {
            rollback(tx).await;
            tracing::warn!(source = %message.source, id = %message.id,
                error = %sanitize(&error.to_string()),
                "completion failed; handler writes rolled back, the row returns after its lease");
        }
    }
}

async fn rollback(tx: PgTransaction) {
    if let Err(error) = tx.rollback().await {
        // The connection is closed by the pool when a rollback fails, which also ends the
        // transaction; there is nothing more to do than say so.
        tracing::debug!(error = %sanitize(&error.to_string()), "rollback failed");
    }
}

fn decode(row: &sqlx::postgres::PgRow) -> Result<Claimed, sqlx::Error> {
    // By position, in the contract's RETURNING order (a mapped schema renames the columns): id,
    // claim_token, source, idempotency_key, aggregate_id, event_type, payload, headers, attempt,
    // correlation_id, created_at.
    let headers: serde_json::Value = row.try_get(7)?;
    Ok(Claimed {
        token: row.try_get(1)?,
        message: Message {
            id: row.try_get(0)?,
            source: row.try_get(2)?,
            idempotency_key: row.try_get(3)?,
            aggregate_id: row.try_get(4)?,
            event_type: row.try_get(5)?,
            payload: row.try_get(6)?,
            headers: headers_from_json(headers),
            correlation_id: row.try_get(9)?,
            attempt: row.try_get(8)?,
            created_at: row.try_get(10)?,
        },
    })
}
