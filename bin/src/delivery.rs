//! Wiring of the outbox delivery engine: publishers for the configured destinations, the route
//! table, and the dispatcher options, all from the typed settings.

use crate::transforms::Transforms;
use anyhow::Context as _;
use queuebox_application::dispatcher::{DestinationSpec, DispatcherOptions, RouteTable};
use queuebox_application::relay::{RelayOptions, SourceTopics};
use queuebox_config::{DestinationKind, OutboundAuth, Settings};
use queuebox_domain::router::RouteSpec;
use queuebox_domain::template::Template;
use queuebox_ports::publish::Publisher;
use queuebox_webhook::{HttpAuth, HttpDestination, HttpDestinationOptions, OAuth2Options};
use std::sync::Arc;

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

/// Builds a publisher for every destination, with its compiled transform, this binary can publish to and the route table over
/// them. A destination of a kind without a publisher yet is kept, so routes to it resolve and its
/// rows go dead with a reason instead of waiting forever; the start logs a warning for it.
pub async fn route_table(
    settings: &Settings,
    transforms: &Transforms,
) -> anyhow::Result<RouteTable> {
    let mut destinations = Vec::with_capacity(settings.destinations.len());
    for (name, destination) in &settings.destinations {
        let publisher: Option<Arc<dyn Publisher>> = match &destination.kind {
            DestinationKind::Http(http) => {
                let mut options = HttpDestinationOptions::new(name.clone(), http.base_url.clone());
                options.path = http.path.clone();
                options.timeout = http.timeout;
                options.headers = destination
                    .headers
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                options.auth = http_auth(http.auth.as_ref());
                options.max_error_body_bytes = settings.http.max_error_body_bytes;
                options.block_private_addresses = settings.http.block_private_addresses;
                // Every concurrent publish may hold one idle connection between requests.
                options.max_idle_connections = options
                    .max_idle_connections
                    .max(settings.outbox.concurrency as usize);
                let publisher = HttpDestination::new(options)
                    .await
                    .with_context(|| format!("destinations.{name}"))?;
                Some(Arc::new(publisher))
            }
            other => {
                tracing::warn!(
                    destination = %name,
                    kind = other.name(),
                    "no publisher for this destination kind yet: rows routed to it go dead"
                );
                None
            }
        };
        destinations.push(DestinationSpec {
            name: name.clone(),
            kind: destination.kind.name(),
            publisher,
            transform: transforms.destinations.get(name).cloned(),
        });
    }
    Ok(RouteTable::new(&route_specs(settings), destinations)
        .context("routes")?
        .with_route_transforms(transforms.routes.clone()))
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

fn http_auth(auth: Option<&OutboundAuth>) -> HttpAuth {
    match auth {
        None => HttpAuth::None,
        Some(OutboundAuth::Basic { username, password }) => HttpAuth::Basic {
            username: username.clone(),
            password: password.clone(),
        },
        Some(OutboundAuth::Header {
            header_name,
            header_value,
        }) => HttpAuth::Header {
            name: header_name.clone(),
            value: header_value.clone(),
        },
        Some(OutboundAuth::Oauth2 {
            client_id,
            client_secret,
            token_url,
            scope,
            extra_params,
        }) => HttpAuth::OAuth2(OAuth2Options {
            client_id: client_id.clone(),
            client_secret: client_secret.clone(),
            token_url: token_url.clone(),
            scope: scope.clone(),
            extra_params: extra_params
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }),
    }
}
