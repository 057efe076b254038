//! NATS JetStream source and publisher of QueueBox (not yet implemented).
//!
//! Reserved so the `nats` feature of the binary has a crate to gate; the adapter arrives with its issue.
//! A configuration that needs it fails at start with a message naming the missing support.

/// The name of the backend this crate serves, used in start-up messages.
pub const BACKEND: &str = "nats";
