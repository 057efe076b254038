//! Support for the end-to-end tests: where the services are, a fresh database per test, free ports,
//! and the real `queuebox` binary as a child process.
//!
//! Service addresses come from `QB_TEST_*` variables that `scripts/services.sh` prints. A missing
//! variable fails the test with the command to run; no test silently skips.

pub mod broker_forms;
pub mod buses;
pub mod database;
pub mod docs;
pub mod every_path;
pub mod inbox;
pub mod pair;
pub mod process;
pub mod receiver;
pub mod service;
pub mod source_rules;
pub mod webdriver;

use std::sync::Once;
use std::time::{Duration, Instant};

/// An HTTP client for the tests.
///
/// The workspace builds reqwest with rustls but without a built-in crypto provider (the HTTP
/// destination installs ring itself, to avoid the aws-lc build). In a whole-workspace build that
/// feature reaches the tests' reqwest too, so the provider is installed here before any client exists.
pub fn http() -> reqwest::Client {
    static PROVIDER: Once = Once::new();
    PROVIDER.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    reqwest::Client::new()
}

/// Picks a TCP port that is free on 127.0.0.1 right now.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local address").port()
}

/// Polls `condition` every 25 ms until it returns `Some`, or panics naming `what` after `deadline`.
pub async fn wait_until<T, F, Fut>(what: &str, deadline: Duration, mut condition: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(value) = condition().await {
            return value;
        }
        assert!(
            started.elapsed() < deadline,
            "timed out after {deadline:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The value of one sample line of a Prometheus scrape, e.g. `name{label="v"}`; 0 when absent (a
/// labelled counter appears only after its first increment).
pub fn sample(scrape: &str, series: &str) -> f64 {
    scrape
        .lines()
        .filter_map(|line| line.strip_prefix(series))
        .filter_map(|rest| rest.strip_prefix(' '))
        .find_map(|value| value.trim().parse().ok())
        .unwrap_or(0.0)
}

/// The log text without terminal colour sequences (`ESC [ ... m`).
pub fn without_colours(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for next in chars.by_ref() {
                if next == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The Prometheus scrape of the instance whose data port is `port`.
pub async fn scrape(port: u16) -> String {
    http()
        .get(format!("http://127.0.0.1:{port}/metrics"))
        .send()
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("metrics body")
}
