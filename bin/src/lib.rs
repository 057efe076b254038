//! The QueueBox service as a library: the binary's `main` and the end-to-end tests share it.
//!
//! This is the only crate that depends on every other crate of the workspace. It picks the
//! compiled-in backends (cargo features `postgres`, `rabbitmq`, `kafka`, `nats`, `redis`) and wires
//! the adapters to the application.

pub mod admin;
pub mod backends;
pub mod capture;
pub mod cli;
pub mod database;
pub mod delivery;
pub mod ingest;
pub mod logging;
pub mod retention;
pub mod serve;
pub mod signals;
pub mod telemetry;
pub mod tracing_export;
pub mod transforms;
