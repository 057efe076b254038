//! The use cases of QueueBox, written against the ports only: the outbox dispatcher, the ingest
//! pipeline, the inbox relay, replay, retention, the health registry and the lifecycle of
//! background workers.
//!
//! This crate depends on the domain and the ports; it must never depend on an adapter.

pub mod capture;
pub mod dispatcher;
pub mod health;
pub mod ingest;
pub mod lifecycle;
pub mod relay;
pub mod replay;
pub mod retention;
pub mod source;
pub mod telemetry;
#[cfg(test)]
mod test_metrics;
pub mod trace;
pub mod transform;
pub mod worker_health;
