//! The ports of QueueBox: the traits the application calls (stores, publishers, health checks) and
//! the traits inbound adapters call (readiness), with the plain data they exchange.
//!
//! Each trait documents what an adapter MUST do. This crate depends on the domain only; it never
//! names a database, broker or HTTP library.

pub mod backoff;
pub mod capture;
pub mod console;
pub mod database;
pub mod health;
pub mod inbox;
pub mod ingest;
pub mod metrics;
pub mod outbox;
pub mod publish;
pub mod replay;
pub mod retention;
pub mod source;
pub mod transform;
