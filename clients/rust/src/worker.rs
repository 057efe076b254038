//! The worker: claim, run handlers under a renewed lease, then complete, retry or dead-letter.

use std::future::Future;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use sqlx::{PgPool, Postgres, Row};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use uuid::Uuid;

use crate::message::headers_from_json;
use crate::redact::sanitize;
use crate::sql::{Param, Statements, cand_limit};
use crate::{Error, FailureAction, HandlerError, Message, Options};

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

/// How the handler's run ended.
enum Outcome {
    Handled(Result<(), HandlerError>),
    LeaseLost(String),
}

impl InboxWorker {
    /// Checks the settings and renders the statements for the schema.
    pub fn new(pool: PgPool, options: Options) -> Result<Self, Error> {
        options.validate()?;
        let statements = Statements::new(&options.schema.quoted()?);
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
    /// On shutdown the worker claims nothing more, waits up to the grace for running handlers,
    /// then cancels the rest. A cancelled handler's transaction rolls back and its row keeps its
    /// attempt count: nothing is written, so the row returns to a claim when its lease runs out.
    pub async fn run<H: Handler>(&self, handler: H, shutdown: impl Future<Output = ()>) {
        let handler = Arc::new(handler);
        let options = &self.shared.options;
        let slots = Arc::new(Semaphore::new(options.max_concurrency));
        let mut tasks: JoinSet<()> = JoinSet::new();
        tokio::pin!(shutdown);

        loop {
            while let Some(done) = tasks.try_join_next() {
                report_task_end(done);
            }
            // Claim only when a handler slot is free, and only as many rows as there are free
            // slots: a claimed row that waited for a slot would spend its lease doing nothing.
            let first = tokio::select! {
                biased;
                () = &mut shutdown => break,
                permit = Arc::clone(&slots).acquire_owned() => match permit {
                    Ok(permit) => permit,
                    Err(_) => break,
                },
            };
            let free = 1 + slots.available_permits();
            let want = u32::try_from(free)
                .unwrap_or(u32::MAX)
                .min(options.batch_size);
            let claimed = match self.shared.claim(want).await {
                Ok(claimed) => claimed,
                Err(error) => {
                    tracing::warn!(source = %options.source, error = %sanitize(&error.to_string()),
                        "inbox claim failed; waiting before the next claim");
                    Vec::new()
                }
            };
            if claimed.is_empty() {
                drop(first);
                tokio::select! {
                    biased;
                    () = &mut shutdown => break,
                    () = tokio::time::sleep(options.poll_interval) => continue,
                }
            }
            let mut first = Some(first);
            for row in claimed {
                let permit = match first.take() {
                    Some(permit) => permit,
                    None => match Arc::clone(&slots).acquire_owned().await {
                        Ok(permit) => permit,
                        Err(_) => break,
                    },
                };
                tasks.spawn(process(
                    Arc::clone(&self.shared),
                    Arc::clone(&handler),
                    row,
                    permit,
                ));
            }
        }

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
        let mut tx = self.pool.begin().await?;
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
        rows.iter().map(decode).collect()
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

/// Handles one claimed row from start to end. The permit frees a handler slot when dropped.
async fn process<H: Handler>(
    shared: Arc<Shared>,
    handler: Arc<H>,
    row: Claimed,
    _permit: OwnedSemaphorePermit,
) {
    let Claimed { message, token } = row;
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
        let lease = shared.keep_lease(message.id, token);
        // Whichever ends first wins; the other future is dropped, which is how the handler is
        // cancelled when the lease is lost.
        tokio::select! {
            result = handled => Outcome::Handled(result),
            why = lease => Outcome::LeaseLost(why),
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
    let headers: serde_json::Value = row.try_get("headers")?;
    Ok(Claimed {
        token: row.try_get("claim_token")?,
        message: Message {
            id: row.try_get("id")?,
            source: row.try_get("source")?,
            idempotency_key: row.try_get("idempotency_key")?,
            aggregate_id: row.try_get("aggregate_id")?,
            event_type: row.try_get("event_type")?,
            payload: row.try_get("payload")?,
            headers: headers_from_json(headers),
            correlation_id: row.try_get("correlation_id")?,
            attempt: row.try_get("attempt")?,
            created_at: row.try_get("created_at")?,
        },
    })
}
