//! The `queuebox_capture_state` table and the wake-up channel between replicas, over the pool.

use super::sql;
use crate::pool::Pool;
use async_trait::async_trait;
use queuebox_domain::capture::{Lsn, Recorded};
use queuebox_ports::capture::{CaptureError, CaptureStateStore, WakeChannel, WakeFeed};
use sqlx::Row as _;
use sqlx::postgres::PgListener;

/// The capture state table.
#[derive(Debug, Clone)]
pub struct PgCaptureStateStore {
    pool: Pool,
}

impl PgCaptureStateStore {
    /// The table over `pool`.
    pub fn new(pool: Pool) -> Self {
        Self { pool }
    }
}

fn state_error(what: &str, error: impl std::fmt::Display) -> CaptureError {
    CaptureError::State(format!("{what} queuebox_capture_state: {error}"))
}

#[async_trait]
impl CaptureStateStore for PgCaptureStateStore {
    async fn load(&self, identity: &str) -> Result<Option<Recorded>, CaptureError> {
        let row = sqlx::query(sql::LOAD_STATE)
            .bind(identity)
            .fetch_optional(self.pool.sqlx())
            .await
            .map_err(|e| state_error("reading", e))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let position: Option<String> = row
            .try_get("log_position")
            .map_err(|e| state_error("reading", e))?;
        Ok(Some(Recorded {
            instance_id: row
                .try_get("instance_id")
                .map_err(|e| state_error("reading", e))?,
            fingerprint: row
                .try_get("settings_fingerprint")
                .map_err(|e| state_error("reading", e))?,
            // A position the table cannot give back counts as none: the files hold the real one.
            log_position: position.and_then(|text| text.parse::<Lsn>().ok()),
        }))
    }

    async fn create(
        &self,
        identity: &str,
        record: &Recorded,
        owner_host: &str,
    ) -> Result<(), CaptureError> {
        sqlx::query(sql::CREATE_STATE)
            .bind(identity)
            .bind(&record.instance_id)
            .bind(&record.fingerprint)
            .bind(record.log_position.map(|p| p.to_string()))
            .bind(owner_host)
            .execute(self.pool.sqlx())
            .await
            .map_err(|e| state_error("writing", e))?;
        Ok(())
    }

    async fn record_position(
        &self,
        identity: &str,
        position: Lsn,
        owner_host: &str,
    ) -> Result<(), CaptureError> {
        sqlx::query(sql::RECORD_POSITION)
            .bind(identity)
            .bind(position.to_string())
            .bind(owner_host)
            .execute(self.pool.sqlx())
            .await
            .map_err(|e| state_error("updating", e))?;
        Ok(())
    }

    async fn slot_lag(&self, slot: &str) -> Result<Option<u64>, CaptureError> {
        let row = sqlx::query(sql::SLOT_LAG)
            .bind(slot)
            .fetch_optional(self.pool.sqlx())
            .await
            .map_err(|e| CaptureError::State(format!("reading the lag of slot {slot}: {e}")))?;
        let lag: Option<f64> = match row {
            Some(row) => row
                .try_get("lag")
                .map_err(|e| CaptureError::State(format!("reading the lag of slot {slot}: {e}")))?,
            None => return Ok(None),
        };
        Ok(Some(lag.unwrap_or(0.0).max(0.0) as u64))
    }
}

/// Wake-ups between replicas through `pg_notify` and `LISTEN`.
#[derive(Debug, Clone)]
pub struct PgWakeChannel {
    pool: Pool,
}

impl PgWakeChannel {
    /// The channel over `pool`.
    pub fn new(pool: Pool) -> Self {
        Self { pool }
    }
}

#[async_trait]
impl WakeChannel for PgWakeChannel {
    async fn announce(&self, channel: &str) -> Result<(), CaptureError> {
        sqlx::query(sql::ANNOUNCE)
            .bind(channel)
            .execute(self.pool.sqlx())
            .await
            .map_err(|e| CaptureError::Connection(format!("notifying {channel}: {e}")))?;
        Ok(())
    }

    async fn subscribe(&self, channel: &str) -> Result<Box<dyn WakeFeed>, CaptureError> {
        let listen_error =
            |e: sqlx::Error| CaptureError::Connection(format!("listening on {channel}: {e}"));
        let mut listener = PgListener::connect_with(self.pool.sqlx())
            .await
            .map_err(listen_error)?;
        listener.listen(channel).await.map_err(listen_error)?;
        Ok(Box::new(PgWakeFeed {
            listener,
            channel: channel.to_owned(),
        }))
    }
}

struct PgWakeFeed {
    listener: PgListener,
    channel: String,
}

#[async_trait]
impl WakeFeed for PgWakeFeed {
    async fn next(&mut self) -> Result<(), CaptureError> {
        // `try_recv` reports a lost connection as `None` instead of reconnecting silently, so the
        // follower learns that notices may have passed and wakes delivery once.
        match self.listener.try_recv().await {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(CaptureError::Connection(format!(
                "the connection listening on {} was lost",
                self.channel
            ))),
            Err(e) => Err(CaptureError::Connection(format!(
                "listening on {}: {e}",
                self.channel
            ))),
        }
    }
}
