//! `queuebox serve`: start every part in order, run until a stop signal, stop in the documented order.

use crate::admin;
use crate::backends;
use crate::capture::Capture;
use crate::database;
use crate::delivery;
use crate::ingest;
use crate::transforms;
use anyhow::Context as _;
use queuebox_application::dispatcher::Dispatcher;
use queuebox_application::health::HealthRegistry;
use queuebox_application::ingest::{
    CoalesceOptions, CoalescingInbox, IngestPipeline, system_clock,
};
use queuebox_application::lifecycle::Workers;
use queuebox_application::relay::Relay;
use queuebox_application::retention::RetentionService;
use queuebox_config::Settings;
use queuebox_http::{HttpServer, InboxRoutes, Listeners, MetricsRender, ServerOptions};
use queuebox_ports::ingest::Ingest;
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the HTTP server waits for requests in flight at shutdown.
const HTTP_DRAIN: Duration = Duration::from_secs(5);
/// Extra time the worker group gets beyond `outbox.shutdownTimeoutMs` to write its last rows.
const WORKER_STOP_MARGIN: Duration = Duration::from_secs(5);

/// Binds the configured ports on every interface.
pub async fn bind(settings: &Settings) -> anyhow::Result<Listeners> {
    let bind = |port: u16| async move {
        let addr = SocketAddr::from((Ipv4Addr::UNSPECIFIED, port));
        tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on port {port}"))
    };
    let data = bind(settings.server.http_port).await?;
    let management = match settings.server.management_port {
        Some(port) => Some(bind(port).await?),
        None => None,
    };
    Ok(Listeners { data, management })
}

/// Runs QueueBox until `stop` completes, then shuts down in order: HTTP (drain up to 5 s), workers
/// (each finishing in-flight work within its own bound), then the database pool.
pub async fn run(
    settings: Settings,
    listeners: Listeners,
    metrics: MetricsRender,
    stop: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let started = Instant::now();
    // Transforms and destinations first: a refused destination (a bad URL, a private address) is
    // a configuration error, reported before the database is touched.
    let transforms = transforms::compile(&settings)?;
    let routes = delivery::route_table(&settings, &transforms).await?;
    let database = database::connect(&settings.database_options()).await?;
    database::prepare(database.as_ref()).await?;

    let mut health = HealthRegistry::default();
    health.register(database.health_check());

    let mut workers = Workers::new();
    let capture = Capture::wire(&settings, database.as_ref())?;
    let dispatcher = capture.drive(Dispatcher::new(
        database.outbox_store(),
        Arc::new(routes),
        delivery::dispatcher_options(&settings),
    ));
    health.register(dispatcher.health_check());
    workers.spawn("outbox-dispatcher", move |stop| dispatcher.run(stop));
    capture.spawn(&mut workers, &mut health);

    if settings.inbox.relay.enabled {
        let relay = Relay::new(
            database.relay_store(),
            delivery::source_topics(&settings)?,
            delivery::relay_options(&settings),
        );
        health.register(relay.health_check());
        workers.spawn("inbox-relay", move |stop| relay.run(stop));
    }

    if settings.retention.enabled {
        let retention = RetentionService::new(
            database.retention_store(),
            crate::retention::plans(&settings.retention),
        );
        health.register(retention.health_check());
        workers.spawn("retention", move |stop| retention.run(stop));
    }

    // Concurrent inserts share one statement and one commit (see CoalescingInbox): at thousands
    // of requests a second the per-statement cost, not the row, is what limits ingestion.
    let inbox = CoalescingInbox::new(
        database.inbox_store(),
        CoalesceOptions::for_pool(settings.database.pool_size),
    );
    let pipeline: Arc<dyn Ingest> = Arc::new(IngestPipeline::new(
        Arc::new(inbox),
        ingest::sources(&settings, &transforms)?,
        system_clock(),
    ));
    let inbox_routes = backends::start_sources(&settings, &pipeline)
        .await?
        .run(&mut workers, &mut health);

    let admin_routes = admin::routes(&settings, database.as_ref())?;
    let server = HttpServer::start(
        listeners,
        ServerOptions {
            max_body_bytes: settings.inbox.max_body_bytes,
            request_read_timeout: settings.server.request_read_timeout,
        },
        InboxRoutes {
            routes: inbox_routes,
            ingest: pipeline,
        },
        Arc::new(health),
        metrics,
        admin_routes,
    )
    .await?;
    tracing::info!(
        data = %server.data_addr(),
        management = ?server.management_addr(),
        ready_in_ms = started.elapsed().as_millis() as u64,
        "QueueBox is ready"
    );

    stop.await;

    tracing::info!("stopping the HTTP server");
    server.stop(HTTP_DRAIN).await;
    tracing::info!("stopping the workers");
    let aborted = workers
        .stop(settings.outbox.shutdown_timeout + WORKER_STOP_MARGIN)
        .await;
    if !aborted.is_empty() {
        tracing::warn!(
            ?aborted,
            "workers aborted at shutdown; their rows return after the lease"
        );
    }
    tracing::info!("closing the database pool");
    database.close().await;
    tracing::info!("stopped");
    Ok(())
}
