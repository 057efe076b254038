//! PostgreSQL logical capture: a `pgoutput` replication session that reports the outbox inserts,
//! the `queuebox_capture_state` table, and the `pg_notify` wake-ups between replicas.

mod pgoutput;
mod session;
mod sql;
mod state_store;

pub use session::{CaptureConnection, PgCaptureConnector};
pub use sql::ANNOUNCE as ANNOUNCE_STATEMENT;
pub use state_store::{PgCaptureStateStore, PgWakeChannel};
