//! The health component of a Kafka source: `kafka.<source name>`.

use async_trait::async_trait;
use queuebox_ports::health::HealthCheck;
use std::sync::{Arc, Mutex, PoisonError};

/// The health component `kafka.<source name>` of one Kafka source.
///
/// Up while the brokers answer and every topic of the source exists (a replica that the group
/// gave no partition is up too); down, with a reason, before the first check, while no broker
/// answers or the login is refused, while a topic is missing (the reason names it), and after the
/// source stopped. The reason never holds a password. A check reads the last known state and
/// answers at once.
///
/// Clones share the state; get one from [`KafkaSource::health`](crate::KafkaSource::health).
#[derive(Debug, Clone)]
pub struct KafkaSourceHealth {
    name: Arc<str>,
    state: Arc<Mutex<Result<(), String>>>,
}

impl KafkaSourceHealth {
    /// A component for source `source`, down until the consumer is set up.
    pub(crate) fn new(source: &str) -> Self {
        Self {
            name: Arc::from(format!("kafka.{source}")),
            state: Arc::new(Mutex::new(Err("not checked yet".to_owned()))),
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
impl HealthCheck for KafkaSourceHealth {
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
        let health = KafkaSourceHealth::new("orders-log");
        assert_eq!(health.name(), "kafka.orders-log");
        assert!(health.decides_readiness());
        assert!(health.check().await.is_err());
        let shared = health.clone();
        shared.up();
        assert_eq!(health.check().await, Ok(()));
        shared.down("topic `x` does not exist");
        assert_eq!(
            health.check().await,
            Err("topic `x` does not exist".to_owned())
        );
    }
}
