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
pub async fn wait_for<T, F, Fut>(what: &str, within: Duration, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    wait_for_explained(what, within, check, String::new).await
}

/// As [`wait_for`], and a timeout's message adds what `explain` says then (the state the test
/// saw), for a wait whose failure would otherwise say only that time ran out.
///
/// # Panics
///
/// When `within` passes first; the message names `what`, the deadline and the explanation.
pub async fn wait_for_explained<T, F, Fut, E>(
    what: &str,
    within: Duration,
    mut check: F,
    explain: E,
) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
    E: FnOnce() -> String,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        if Instant::now() >= deadline {
            let explained = explain();
            let sep = if explained.is_empty() { "" } else { ": " };
            panic!("timed out after {within:?} waiting for {what}{sep}{explained}");
        }
        tokio::time::sleep(POLL).await;
    }
}
