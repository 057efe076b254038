//! Shared helpers of the Redis adapter tests: the server from `QB_TEST_REDIS_URL`, unique keys and
//! a plain client that reads streams back. The TCP fault proxy and the scripted ingest recorder
//! are queuebox-conformance's.

#![allow(dead_code, clippy::unwrap_used)]

use redis::aio::MultiplexedConnection;
use std::future::Future;
use std::time::Duration;

/// How long a test waits for a condition before it fails.
pub const WAIT: Duration = Duration::from_secs(10);

/// The server URL, or `None` (with a message) when the variable is unset.
pub fn redis_url() -> Option<String> {
    let url = std::env::var("QB_TEST_REDIS_URL")
        .ok()
        .filter(|u| !u.is_empty());
    if url.is_none() {
        eprintln!(
            "skipped: QB_TEST_REDIS_URL is not set (eval \"$(bash scripts/services.sh)\" first)"
        );
    }
    url
}

/// A key no other test uses.
pub fn unique(prefix: &str) -> String {
    format!("qb:{prefix}:{}", uuid::Uuid::new_v4().simple())
}

/// Waits until `check` gives a value, or fails after [`WAIT`] naming `what`.
pub async fn wait_for<T, F, Fut>(what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    queuebox_conformance::wait::wait_for(what, WAIT, check).await
}

/// A plain connection for setting up keys and reading streams back.
pub async fn connection(url: &str) -> MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// Every entry of `stream` as `(entry id, fields in order)`.
pub async fn entries(
    connection: &mut MultiplexedConnection,
    stream: &str,
) -> Vec<(String, Vec<(String, String)>)> {
    let entries: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
        .arg(stream)
        .arg("-")
        .arg("+")
        .query_async(connection)
        .await
        .unwrap_or_default();
    entries
}

/// The `x-message-id` field of every entry of `stream`.
pub async fn ids(connection: &mut MultiplexedConnection, stream: &str) -> Vec<String> {
    entries(connection, stream)
        .await
        .into_iter()
        .filter_map(|(_, fields)| {
            fields
                .into_iter()
                .find(|(n, _)| n == "x-message-id")
                .map(|(_, v)| v)
        })
        .collect()
}

/// `host:port` of the server in `url`.
pub fn server_address(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, rest)| rest);
    rest.split('/').next().unwrap_or(rest).to_owned()
}

/// `XADD stream * x-message-id <id> payload <payload>`; returns the entry id.
pub async fn add(
    connection: &mut MultiplexedConnection,
    stream: &str,
    id: &str,
    payload: &str,
) -> String {
    redis::cmd("XADD")
        .arg(stream)
        .arg("*")
        .arg("x-message-id")
        .arg(id)
        .arg("payload")
        .arg(payload)
        .query_async(connection)
        .await
        .unwrap()
}

/// How many entries of `group` are pending (delivered, not acknowledged).
pub async fn pending(connection: &mut MultiplexedConnection, stream: &str, group: &str) -> usize {
    let summary: redis::Value = redis::cmd("XPENDING")
        .arg(stream)
        .arg(group)
        .query_async(connection)
        .await
        .unwrap();
    match summary {
        redis::Value::Array(parts) => match parts.first() {
            Some(redis::Value::Int(n)) => usize::try_from(*n).unwrap(),
            _ => 0,
        },
        _ => 0,
    }
}
