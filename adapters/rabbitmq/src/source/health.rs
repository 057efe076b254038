//! The health component of a RabbitMQ source: `rabbitmq.<source name>`.

use async_trait::async_trait;
use queuebox_ports::health::HealthCheck;
use std::sync::{Arc, Mutex, PoisonError};

/// The health component `rabbitmq.<source name>` of one RabbitMQ source.
///
/// Up while the source consumes its queue; down, with a reason, before the first consumer is
/// set up, while the source is disconnected or reconnecting, while its queue is missing (the
/// reason names the queue), and after it stopped. The reason never holds the URL or a
/// password. A check reads the last known state and answers at once.
///
/// Clones share the state; get one from [`RabbitmqSource::health`](crate::RabbitmqSource::health).
#[derive(Debug, Clone)]
pub struct RabbitmqSourceHealth {
    name: Arc<str>,
    state: Arc<Mutex<Result<(), String>>>,
}

impl RabbitmqSourceHealth {
    /// A component for source `source`, down until the consumer is set up.
    pub(crate) fn new(source: &str) -> Self {
        Self {
            name: Arc::from(format!("rabbitmq.{source}")),
            state: Arc::new(Mutex::new(Err("not consuming yet".to_owned()))),
        }
    }

    /// Marks the component up.
    pub(crate) fn up(&self) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = Ok(());
    }

    /// Marks the component down with `reason` (already masked).
    pub(crate) fn down(&self, reason: impl Into<String>) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = Err(reason.into());
    }

    /// The current state, as [`HealthCheck::check`] reports it.
    pub fn state(&self) -> Result<(), String> {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[async_trait]
impl HealthCheck for RabbitmqSourceHealth {
    fn name(&self) -> &str {
        &self.name
    }

    async fn check(&self) -> Result<(), String> {
        self.state()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_component_is_named_after_the_source_and_follows_the_state() {
        let health = RabbitmqSourceHealth::new("orders-queue");
        assert_eq!(health.name(), "rabbitmq.orders-queue");
        assert!(health.decides_readiness());
        assert!(health.check().await.is_err());
        let shared = health.clone();
        shared.up();
        assert_eq!(health.check().await, Ok(()));
        shared.down("queue `x` does not exist");
        assert_eq!(
            health.check().await,
            Err("queue `x` does not exist".to_owned())
        );
    }
}
