// The README is the crate documentation, so its examples compile as doc tests.
#![doc = include_str!("../README.md")]

mod error;
mod message;
pub mod named;
mod options;
pub mod outbox;
pub mod redact;
mod retry;
mod schema;
mod sql;
mod worker;

pub use error::{Error, HandlerError};
pub use futures_util::future::BoxFuture;
pub use message::Message;
pub use options::Options;
pub use outbox::{OutboxError, OutboxMessage, OutboxSchema, OutboxWriter, Payload, write_outbox};
pub use redact::{MAX_ERROR_LENGTH, sanitize, sanitize_error};
pub use retry::{DefaultRetryPolicy, FailureAction, RetryPolicy};
pub use schema::{Schema, is_valid_identifier};
#[doc(hidden)]
pub use sql::worker_statements;
pub use worker::{Handler, InboxWorker, PgTransaction, handler_fn};
