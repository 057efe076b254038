//! Wiring of the outbox delivery engine: the route table over the configured destinations (each
//! publisher built by the wiring module of its kind, `crate::backends`), and the dispatcher and
//! relay options, all from the typed settings.

use crate::backends;
use crate::transforms::Transforms;
use anyhow::Context as _;
use queuebox_application::dispatcher::{
    DestinationSpec, DispatcherOptions, RouteKeySpec, RouteTable,
};
use queuebox_application::relay::{RelayOptions, SourceTopics};
use queuebox_config::Settings;
use queuebox_domain::router::RouteSpec;
use queuebox_domain::template::Template;
use queuebox_domain::template::routing_key::RoutingKeyTemplate;

/// The dispatcher's options from the `outbox` and `http` sections.
pub fn dispatcher_options(settings: &Settings) -> DispatcherOptions {
    DispatcherOptions {
        batch_size: settings.outbox.batch_size,
        concurrency: settings.outbox.concurrency,
        poll_interval: settings.outbox.poll_interval,
        lease: settings.outbox.claim_timeout,
        retry_base_delay: settings.outbox.retry_base_delay,
        pending_gauge_interval: settings.outbox.pending_gauge_interval,
        shutdown_timeout: settings.outbox.shutdown_timeout,
        max_error_bytes: settings.http.max_error_body_bytes,
    }
}

/// The relay's options from `inbox.relay`; its `maxAttempts` already falls back to
/// `outbox.maxAttempts` when the configuration leaves it unset.
pub fn relay_options(settings: &Settings) -> RelayOptions {
    let relay = &settings.inbox.relay;
    RelayOptions {
        batch_size: relay.batch_size,
        poll_interval: relay.poll_interval,
        lease: relay.claim_timeout,
        pending_gauge_interval: relay.pending_gauge_interval,
        max_attempts: i32::try_from(relay.max_attempts).unwrap_or(i32::MAX),
    }
}

/// The topic template of every source, pull sources included: a push row stored before its source
/// turned to `pull` stays a push row, and the relay forwards it with that source's template.
pub fn source_topics(settings: &Settings) -> anyhow::Result<SourceTopics> {
    let mut templates = Vec::with_capacity(settings.sources.len());
    for (name, source) in &settings.sources {
        let template =
            Template::parse(&source.topic).with_context(|| format!("sources.{name}.topic"))?;
        templates.push((name.clone(), template));
    }
    Ok(SourceTopics::new(templates))
}

/// The route table over every destination, each with its publisher and its compiled transform. (A
/// kind this build was compiled without never gets here: the start check refuses it.)
pub async fn route_table(
    settings: &Settings,
    transforms: &Transforms,
) -> anyhow::Result<RouteTable> {
    let mut destinations = Vec::with_capacity(settings.destinations.len());
    for (name, destination) in &settings.destinations {
        destinations.push(DestinationSpec {
            name: name.clone(),
            kind: destination.kind.name(),
            publisher: Some(backends::publisher(settings, name, destination).await?),
            transform: transforms.destinations.get(name).cloned(),
        });
    }
    Ok(RouteTable::new(&route_specs(settings), destinations)
        .context("routes")?
        .with_route_transforms(transforms.routes.clone())
        .with_route_keys(route_keys(settings)?))
}

/// The key settings of every route, in list order.
fn route_keys(settings: &Settings) -> anyhow::Result<Vec<RouteKeySpec>> {
    settings
        .routes
        .iter()
        .enumerate()
        .map(|(index, route)| {
            let template = route
                .routing_key_template
                .as_deref()
                .map(RoutingKeyTemplate::parse)
                .transpose()
                .with_context(|| format!("routes[{index}].routingKeyTemplate"))?;
            Ok(RouteKeySpec {
                template,
                missing_default: route.routing_key_missing_field_default.clone(),
            })
        })
        .collect()
}

/// The configured routes in list order, as the router takes them; the dispatcher and replay
/// build their routers from this one list so they decide a topic's destination alike.
pub fn route_specs(settings: &Settings) -> Vec<RouteSpec> {
    settings
        .routes
        .iter()
        .map(|route| RouteSpec {
            topic_pattern: route.topic_pattern.clone(),
            destination: route.destination.clone(),
        })
        .collect()
}
