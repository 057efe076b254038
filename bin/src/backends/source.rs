//! What starting a source gives `serve`, whatever its kind: a route for the HTTP server to serve,
//! or a consumer that runs on its own (a broker source).

use queuebox_application::health::HealthRegistry;
use queuebox_application::lifecycle::{StopSignal, Workers};
use queuebox_application::source::SourceDriver;
use queuebox_config::Settings;
use queuebox_http::InboxRoute;
use queuebox_ports::health::HealthCheck;
use queuebox_ports::ingest::Ingest;
use queuebox_ports::source::SourceClient;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// What a source's wiring module gets to start it with.
pub struct SourceContext<'a> {
    /// The whole configuration.
    pub settings: &'a Settings,
    /// The ingest pipeline every source hands its messages to (rate limit, credentials, filter,
    /// extraction, transform, store); it knows every configured source by name.
    pub ingest: &'a Arc<dyn Ingest>,
}

/// One started source.
pub enum StartedSource {
    /// An HTTP source: the POST route the data port serves for it.
    Route(InboxRoute),
    /// A source that consumes on its own, such as a broker consumer.
    Consumer(SourceConsumer),
}

/// The consume loop of a source and its health component. `serve` registers the component and
/// runs the loop as a worker of its group, so the loop stops with the other workers at shutdown:
/// after the HTTP server has drained and before the database pool closes.
pub struct SourceConsumer {
    health: Arc<dyn HealthCheck>,
    run: Box<dyn FnOnce(StopSignal) -> ConsumeLoop + Send>,
}

/// A consume loop, boxed so consumers of every kind sit in one list.
type ConsumeLoop = Pin<Box<dyn Future<Output = ()> + Send>>;

impl SourceConsumer {
    /// A consumer whose component `health` shows in `/health` (for example `rabbitmq.<queue>`),
    /// and whose loop `run` consumes until the stop signal fires, then settles the messages it
    /// holds (acknowledges what is stored, hands back the rest) and returns. A loop still running
    /// past the workers' stop bound is aborted; the broker then redelivers what it had not
    /// acknowledged, and the inbox's idempotency key drops the copies.
    pub fn new<F, Fut>(health: Arc<dyn HealthCheck>, run: F) -> Self
    where
        F: FnOnce(StopSignal) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        Self {
            health,
            run: Box::new(move |stop| Box::pin(run(stop))),
        }
    }

    /// The consumer of a broker source: `client` run by the application's source driver, which
    /// stores through `ingest`, settles, reconnects and reports the component `<kind>.<name>`.
    pub fn driven(client: impl SourceClient, ingest: Arc<dyn Ingest>) -> Self {
        let driver = SourceDriver::new(client, ingest);
        let health = Arc::new(driver.health());
        Self::new(health, move |mut stop| async move {
            driver.run(async move { stop.stopped().await }).await;
        })
    }
}

/// Every source once started: the routes for the HTTP server and the consumers to run.
#[derive(Default)]
pub struct StartedSources {
    /// The POST routes of the HTTP sources.
    pub routes: Vec<InboxRoute>,
    consumers: Vec<(String, SourceConsumer)>,
}

impl StartedSources {
    /// Adds what starting source `name` gave.
    pub(super) fn add(&mut self, name: &str, started: StartedSource) {
        match started {
            StartedSource::Route(route) => self.routes.push(route),
            StartedSource::Consumer(consumer) => self.consumers.push((name.to_owned(), consumer)),
        }
    }

    /// Registers each consumer's health component and runs its loop as the worker `source:<name>`.
    /// Returns the routes, which the HTTP server serves.
    pub fn run(self, workers: &mut Workers, health: &mut HealthRegistry) -> Vec<InboxRoute> {
        for (name, consumer) in self.consumers {
            health.register(consumer.health);
            tracing::info!(source = %name, "inbox source consuming");
            workers.spawn(format!("source:{name}"), consumer.run);
        }
        self.routes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuebox_application::worker_health::WorkerHealth;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    #[tokio::test]
    async fn a_consumer_runs_as_a_worker_with_its_health_component_until_the_stop() {
        let stopped = Arc::new(AtomicBool::new(false));
        let seen = Arc::clone(&stopped);
        let mut started = StartedSources::default();
        started.add(
            "orders",
            StartedSource::Route(InboxRoute {
                path: "/inbox/orders".into(),
                source: "orders".into(),
            }),
        );
        started.add(
            "queue",
            StartedSource::Consumer(SourceConsumer::new(
                Arc::new(WorkerHealth::new("rabbitmq.queue")),
                move |mut stop| async move {
                    stop.stopped().await;
                    seen.store(true, Ordering::SeqCst);
                },
            )),
        );

        let mut workers = Workers::new();
        let mut health = HealthRegistry::default();
        let routes = started.run(&mut workers, &mut health);
        assert_eq!(routes.len(), 1);
        assert_eq!(routes[0].source, "orders");
        assert_eq!(health.names(), ["rabbitmq.queue"]);
        assert_eq!(workers.names(), ["source:queue"]);
        assert!(!stopped.load(Ordering::SeqCst));
        assert!(workers.stop(Duration::from_secs(5)).await.is_empty());
        assert!(stopped.load(Ordering::SeqCst), "the loop saw the stop");
    }
}
