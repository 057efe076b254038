//! Background workers and the order in which they stop.
//!
//! Every long-running loop (the outbox dispatcher, the inbox relay, retention, broker consumers) runs
//! as a worker of a [`Workers`] group. Stopping the group raises one [`StopSignal`]; each worker
//! finishes its own in-flight work within its own bound (for example `outbox.shutdownTimeoutMs`) and
//! returns. The group waits for them, up to an outer bound, and aborts what is left so the process
//! can always exit.

use std::future::Future;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Tells a worker that the process is stopping. Cheap to clone.
#[derive(Clone, Debug)]
pub struct StopSignal {
    receiver: watch::Receiver<bool>,
}

impl StopSignal {
    /// True once the stop was requested.
    pub fn is_stopping(&self) -> bool {
        *self.receiver.borrow()
    }

    /// Completes when the stop is requested (at once if it already was).
    pub async fn stopped(&mut self) {
        // An error means the sender is gone, which only happens when the group itself is gone:
        // treat it as a stop too.
        let _ = self.receiver.wait_for(|stopping| *stopping).await;
    }
}

/// A group of named background workers that stop together.
pub struct Workers {
    sender: watch::Sender<bool>,
    running: Vec<(String, JoinHandle<()>)>,
}

impl Default for Workers {
    fn default() -> Self {
        Self::new()
    }
}

impl Workers {
    /// An empty group.
    pub fn new() -> Self {
        let (sender, _) = watch::channel(false);
        Self {
            sender,
            running: Vec::new(),
        }
    }

    /// A signal for work that is not spawned through the group.
    pub fn signal(&self) -> StopSignal {
        StopSignal {
            receiver: self.sender.subscribe(),
        }
    }

    /// Starts a worker; `work` receives the group's stop signal and must return once it fires.
    pub fn spawn<F, Fut>(&mut self, name: impl Into<String>, work: F)
    where
        F: FnOnce(StopSignal) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let name = name.into();
        let future = work(self.signal());
        tracing::debug!(worker = %name, "worker started");
        self.running.push((name, tokio::spawn(future)));
    }

    /// The names of the workers still registered.
    pub fn names(&self) -> Vec<&str> {
        self.running.iter().map(|(name, _)| name.as_str()).collect()
    }

    /// Raises the stop signal and waits for every worker, at most `bound` in all; a worker still
    /// running after that is aborted and named in the log. Returns the names of aborted workers.
    pub async fn stop(self, bound: Duration) -> Vec<String> {
        let _ = self.sender.send(true);
        let deadline = tokio::time::Instant::now() + bound;
        let mut aborted = Vec::new();
        for (name, mut handle) in self.running {
            match tokio::time::timeout_at(deadline, &mut handle).await {
                Ok(Ok(())) => tracing::debug!(worker = %name, "worker stopped"),
                Ok(Err(error)) => {
                    tracing::error!(worker = %name, %error, "worker ended abnormally")
                }
                Err(_) => {
                    tracing::warn!(worker = %name, ?bound, "worker did not stop in time; aborting it");
                    handle.abort();
                    aborted.push(name);
                }
            }
        }
        aborted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn workers_see_the_stop_and_finish() {
        let finished = Arc::new(AtomicUsize::new(0));
        let mut workers = Workers::new();
        for index in 0..3 {
            let finished = Arc::clone(&finished);
            workers.spawn(format!("w{index}"), move |mut stop| async move {
                stop.stopped().await;
                finished.fetch_add(1, Ordering::SeqCst);
            });
        }
        assert_eq!(workers.names(), vec!["w0", "w1", "w2"]);
        let aborted = workers.stop(Duration::from_secs(5)).await;
        assert!(aborted.is_empty());
        assert_eq!(finished.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_worker_that_ignores_the_stop_is_aborted_at_the_bound() {
        let mut workers = Workers::new();
        workers.spawn("stubborn", |_stop| async move {
            std::future::pending::<()>().await;
        });
        workers.spawn("polite", |mut stop| async move { stop.stopped().await });
        let started = std::time::Instant::now();
        let aborted = workers.stop(Duration::from_millis(200)).await;
        assert_eq!(aborted, vec!["stubborn".to_owned()]);
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[tokio::test]
    async fn a_signal_taken_after_the_stop_reports_it() {
        let workers = Workers::new();
        let mut signal = workers.signal();
        assert!(!signal.is_stopping());
        let _ = workers.sender.send(true);
        signal.stopped().await;
        assert!(signal.is_stopping());
    }
}
