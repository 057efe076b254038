//! The inbound HTTP side of QueueBox, on salvo: the data port (`GET /` and the inbox routes of the
//! HTTP sources) and the optional management port (`/health*`, `/metrics`, `/admin`).
//!
//! Rules that hold on every data-port route live here: a body over `inbox.maxBodyBytes` gets 413 (chunked
//! bodies are counted as they stream), and a request that arrives while the process stops gets 503.
//! This crate calls the application only through port traits; it never depends on the application or
//! another adapter.

mod admin;
mod console;
mod encoding;
mod errors;
mod guards;
mod health;
mod inbox;
mod metrics;
mod request_parts;
mod responses;
mod root;
mod server;

pub use admin::AdminRoutes;
pub use console::ConsoleRoutes;
pub use inbox::{InboxRoute, InboxRoutes};
pub use metrics::MetricsRender;
pub use server::{HttpServer, HttpServerError, Listeners, ServerOptions};
