//! The HTTP destination of QueueBox: one configured endpoint that receives outbox rows as `POST`
//! requests, with basic, header or OAuth2 client-credentials authentication.
//!
//! [`HttpDestination`] implements the [`queuebox_ports::publish::Publisher`] port. It checks its
//! URLs once at construction (scheme, host, no user info, no dot segments, and optionally no
//! private address), keeps one pooled `reqwest` client for the life of the destination, never
//! follows a redirect, and turns every non-2xx answer, timeout or connection failure into a
//! [`queuebox_ports::publish::PublishError`] whose reason is redacted and cut.
//!
//! Choices worth knowing:
//! - OAuth2 tokens are cached until a tenth of their lifetime (at most 30 s) before `expires_in`
//!   (60 s when the endpoint sends none). A 401 from the destination drops the token and the
//!   request is sent once more, with a fresh token, inside the same publish; a second 401 fails.
//! - Environment proxies are ignored: a destination is reached directly.
//! - TLS uses rustls with the `ring` provider (see `tls.rs`); HTTP/2 is negotiated by ALPN on
//!   `https`, plain `http` speaks HTTP/1.1 with keep-alive.
//!
//! This crate depends on the domain and the ports only; it never depends on the application or on
//! another adapter.

mod address;
mod auth;
mod destination;
mod error;
mod oauth2;
mod options;
mod response;
mod signing;
mod tls;
mod url_check;

pub use destination::HttpDestination;
pub use error::{UrlProblem, WebhookError};
pub use options::{
    DEFAULT_MAX_ERROR_BODY_BYTES, DEFAULT_MAX_IDLE_CONNECTIONS, DEFAULT_PATH, DEFAULT_TIMEOUT,
    HttpAuth, HttpDestinationOptions, OAuth2Options,
};
pub use signing::SigningOptions;
