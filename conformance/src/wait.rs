//! Waiting for a condition with a deadline, never sleeping and hoping: the one polling loop of
//! the suites and of the adapters' own tests.

use std::future::Future;
use std::time::Duration;
use tokio::time::Instant;

/// How often a condition is polled.
const POLL: Duration = Duration::from_millis(20);

/// Polls `check` every 20 ms until it gives a value and returns it.
///
/// # Panics
///
/// When `within` passes first; the message names `what` and the deadline.
pub async fn wait_for<T, F, Fut>(what: &str, within: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        tokio::time::sleep(POLL).await;
    }
}
