//! The routes and destinations as the dispatcher uses them: the domain router (first match wins)
//! plus, per destination, its publisher and its metrics.

use crate::telemetry::{DestinationMetrics, OutboxPendingGauges};
use crate::transform::StageTransform;
use queuebox_domain::outbox::DeliveryOutcome;
use queuebox_domain::router::{RouteSpec, Router, RouterError};
use queuebox_domain::template::routing_key::RoutingKeyTemplate;
use queuebox_ports::publish::Publisher;
use std::collections::HashMap;
use std::sync::Arc;

pub use queuebox_domain::router::RouterError as RouteError;

/// One configured destination.
pub struct DestinationEntry {
    /// The destination name (its key under `destinations`).
    pub name: String,
    /// Its kind: `http`, `rabbitmq`, `kafka` or `nats`.
    pub kind: &'static str,
    /// The publisher, or `None` when this binary has none for the kind (rows to it go dead).
    pub publisher: Option<Arc<dyn Publisher>>,
    /// `destinations.<name>.transform`, compiled.
    pub transform: Option<StageTransform>,
    pub(crate) metrics: DestinationMetrics,
}

/// A destination as the wiring hands it over.
pub struct DestinationSpec {
    /// The destination name (its key under `destinations`).
    pub name: String,
    /// Its kind: `http`, `rabbitmq`, `kafka` or `nats`.
    pub kind: &'static str,
    /// The publisher, or `None` when this binary has none for the kind.
    pub publisher: Option<Arc<dyn Publisher>>,
    /// `destinations.<name>.transform`, compiled.
    pub transform: Option<StageTransform>,
}

/// Where one topic goes: its destination and the transform of the route that matched it.
pub(crate) struct Resolved<'a> {
    /// The destination, which has a publisher.
    pub(crate) destination: &'a DestinationEntry,
    /// `routes[i].transform` of the matching route.
    pub(crate) route_transform: Option<&'a StageTransform>,
    /// The key settings of the matching route.
    pub(crate) route_key: Option<&'a RouteKeySpec>,
}

/// The key settings of one route: `routingKeyTemplate` and `routingKeyMissingFieldDefault`.
#[derive(Debug, Clone, Default)]
pub struct RouteKeySpec {
    /// `routes[i].routingKeyTemplate`, compiled.
    pub template: Option<RoutingKeyTemplate>,
    /// `routes[i].routingKeyMissingFieldDefault`.
    pub missing_default: String,
}

/// Topic -> destination, built once at start.
pub struct RouteTable {
    router: Router,
    destinations: Vec<DestinationEntry>,
    by_name: HashMap<String, usize>,
    /// Entry `i` is the transform of `routes[i]`.
    route_transforms: Vec<Option<StageTransform>>,
    /// Entry `i` is the key settings of `routes[i]`.
    route_keys: Vec<RouteKeySpec>,
}

impl RouteTable {
    /// Builds the table; an unknown destination name or a refused pattern is an error naming the route.
    pub fn new(
        routes: &[RouteSpec],
        destinations: Vec<DestinationSpec>,
    ) -> Result<Self, RouterError> {
        let router = Router::new(routes, destinations.iter().map(|d| d.name.as_str()))?;
        let destinations: Vec<DestinationEntry> = destinations
            .into_iter()
            .map(|spec| DestinationEntry {
                metrics: DestinationMetrics::new(&spec.name, spec.kind),
                name: spec.name,
                kind: spec.kind,
                publisher: spec.publisher,
                transform: spec.transform,
            })
            .collect();
        let by_name = destinations
            .iter()
            .enumerate()
            .map(|(index, d)| (d.name.clone(), index))
            .collect();
        Ok(Self {
            router,
            destinations,
            by_name,
            route_transforms: Vec::new(),
            route_keys: Vec::new(),
        })
    }

    /// The table with the compiled transforms of the routes: entry `i` belongs to `routes[i]`
    /// (in the order given to [`RouteTable::new`]); a missing entry means no transform.
    pub fn with_route_transforms(mut self, transforms: Vec<Option<StageTransform>>) -> Self {
        self.route_transforms = transforms;
        self
    }

    /// The table with the key settings of the routes: entry `i` belongs to `routes[i]`; a missing
    /// entry means neither setting.
    pub fn with_route_keys(mut self, keys: Vec<RouteKeySpec>) -> Self {
        self.route_keys = keys;
        self
    }

    /// The destination of `topic` with the transform of the route that matched, or the outcome
    /// that sends the row to `dead` when nothing can take it.
    pub(crate) fn resolve_route(&self, topic: &str) -> Result<Resolved<'_>, DeliveryOutcome> {
        let matched = self.router.route(topic);
        let route_transform = matched
            .as_ref()
            .and_then(|m| self.route_transforms.get(m.index))
            .and_then(Option::as_ref);
        let route_key = matched.as_ref().and_then(|m| self.route_keys.get(m.index));
        let found = matched
            .and_then(|m| self.by_name.get(m.destination))
            .and_then(|index| self.destinations.get(*index));
        match found {
            Some(destination) if destination.publisher.is_some() => Ok(Resolved {
                destination,
                route_transform,
                route_key,
            }),
            Some(destination) => Err(DeliveryOutcome::NoPublisher {
                destination: destination.name.clone(),
                destination_type: destination.kind.to_owned(),
            }),
            None => Err(DeliveryOutcome::NoRoute {
                topic: topic.to_owned(),
            }),
        }
    }

    /// Sets `queuebox_outbox_queue_depth{destination}` from pending counts per topic.
    pub(crate) fn set_queue_depths(&self, pending_by_topic: &[(String, u64)]) {
        let mut depth = vec![0u64; self.destinations.len()];
        for (topic, count) in pending_by_topic {
            if let Some(index) = self
                .router
                .route(topic)
                .and_then(|m| self.by_name.get(m.destination))
                && let Some(slot) = depth.get_mut(*index)
            {
                *slot += count;
            }
        }
        for (destination, count) in self.destinations.iter().zip(depth) {
            OutboxPendingGauges::set_queue_depth(&destination.name, count);
        }
    }
}
