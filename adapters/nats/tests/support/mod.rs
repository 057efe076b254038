//! Shared helpers of the NATS adapter tests: the server from `QB_TEST_NATS_URL`, unique names, a
//! JetStream client that makes and reads back streams. The TCP fault proxy and the closed port are
//! queuebox-conformance's.

#![allow(dead_code, clippy::unwrap_used)]

use async_nats::jetstream::{self, stream};
use std::future::Future;
use std::time::Duration;

/// How long a test waits for a condition before it fails.
pub const WAIT: Duration = Duration::from_secs(10);

/// The server URL, or `None` (with a message) when the variable is unset.
pub fn nats_url() -> Option<String> {
    match std::env::var("QB_TEST_NATS_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            eprintln!(
                "skipped: QB_TEST_NATS_URL is not set (eval \"$(bash scripts/services.sh)\" first)"
            );
            None
        }
    }
}

/// A name no other test uses, valid as a stream name and a subject token.
pub fn unique(prefix: &str) -> String {
    format!("qb_{prefix}_{}", uuid::Uuid::new_v4().simple())
}

/// Waits until `check` gives a value, or fails after [`WAIT`] naming `what`.
pub async fn wait_for<T, F, Fut>(what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    queuebox_conformance::wait::wait_for(what, WAIT, check).await
}

/// A plain JetStream client for setting up streams and reading them back.
pub struct TestClient {
    pub client: async_nats::Client,
    pub jetstream: jetstream::Context,
}

impl TestClient {
    pub async fn connect(url: &str) -> Self {
        let client = async_nats::connect(url).await.unwrap();
        let jetstream = jetstream::new(client.clone());
        Self { client, jetstream }
    }

    /// A stream `name` over `subjects`, with `tweak` applied to its configuration.
    pub async fn stream(
        &self,
        name: &str,
        subjects: &[&str],
        tweak: impl FnOnce(&mut stream::Config),
    ) -> stream::Stream {
        let mut config = stream::Config {
            name: name.to_owned(),
            subjects: subjects.iter().map(|s| (*s).to_owned()).collect(),
            ..stream::Config::default()
        };
        tweak(&mut config);
        self.jetstream.create_stream(config).await.unwrap()
    }

    /// Every message the stream holds now, in order: (subject, headers, payload).
    pub async fn messages(&self, name: &str) -> Vec<async_nats::jetstream::message::StreamMessage> {
        let mut stream = self.jetstream.get_stream(name).await.unwrap();
        let info = stream.info().await.unwrap();
        let (first, last) = (info.state.first_sequence, info.state.last_sequence);
        let mut out = Vec::new();
        if info.state.messages == 0 {
            return out;
        }
        for sequence in first..=last {
            if let Ok(message) = stream.get_raw_message(sequence).await {
                out.push(message);
            }
        }
        out
    }

    /// The `x-message-id` header of every message the stream holds.
    pub async fn ids(&self, name: &str) -> Vec<String> {
        self.messages(name)
            .await
            .iter()
            .filter_map(|m| m.headers.get("x-message-id").map(|v| v.as_str().to_owned()))
            .collect()
    }

    pub async fn delete(&self, name: &str) {
        let _ = self.jetstream.delete_stream(name).await;
    }
}

/// `host:port` of the server in `url`.
pub fn server_address(url: &str) -> String {
    let start = url.find("://").map_or(0, |i| i + 3);
    let authority = &url[start..];
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
    host_port.trim_end_matches('/').to_owned()
}
