//! The pure core of QueueBox: the state machines of outbox and inbox rows, the router, templates,
//! header rules, the inbox rules (filters, credential checks, correlation id), definite JSONPath,
//! redaction and the names of the tables and columns QueueBox works on.
//!
//! This crate performs no I/O, spawns nothing and knows no database, broker or HTTP library. It must
//! never depend on another crate of the workspace.

pub mod backoff;
pub mod capture;
pub mod glob;
pub mod headers;
pub mod inbox;
pub mod jsonpath;
pub mod mapping;
pub mod outbox;
pub mod redact;
pub mod router;
pub mod secret;
pub mod template;
pub mod timestamp;
pub mod trace_context;
