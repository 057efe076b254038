//! Binding the data and management ports and stopping them in order.

use crate::admin::{self, AdminRoutes};
use crate::errors;
use crate::guards::{BodyLimit, RefuseWhileStopping};
use crate::health::{Live, Ready};
use crate::inbox::{self, InboxRoutes};
use crate::metrics::{Metrics, MetricsRender};
use crate::root::Root;
use queuebox_ports::health::Readiness;
use salvo::fuse::FuseConfig;
use salvo::prelude::*;
use salvo::server::ServerHandle;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use thiserror::Error;
use tokio::task::JoinHandle;

/// A failure to start serving.
#[derive(Debug, Error)]
pub enum HttpServerError {
    /// A listener could not be prepared.
    #[error("cannot serve on {what}: {source}")]
    Listener {
        /// Which port: `data port` or `management port`.
        what: &'static str,
        /// The I/O cause.
        source: std::io::Error,
    },
}

/// The sockets to serve on, bound by the caller (the binary binds the configured ports; tests bind
/// port 0 and read the address back).
pub struct Listeners {
    /// `server.httpPort`.
    pub data: tokio::net::TcpListener,
    /// `server.managementPort`, when configured.
    pub management: Option<tokio::net::TcpListener>,
}

/// What the routes need to know.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// `inbox.maxBodyBytes`: the body cap of every data-port route.
    pub max_body_bytes: usize,
    /// `server.requestReadTimeoutMs`: the longest a client may take to send a request's head,
    /// and then its whole body, on either port.
    pub request_read_timeout: Duration,
}

/// The running HTTP server: one salvo server per port.
pub struct HttpServer {
    stopping: Arc<AtomicBool>,
    handles: Vec<ServerHandle>,
    tasks: Vec<JoinHandle<()>>,
    data_addr: SocketAddr,
    management_addr: Option<SocketAddr>,
}

fn operational_routes(
    router: Router,
    readiness: &Arc<dyn Readiness>,
    metrics: &MetricsRender,
) -> Router {
    router
        .push(Router::with_path("health/live").get(Live))
        .push(Router::with_path("health/ready").get(Ready {
            readiness: Arc::clone(readiness),
        }))
        .push(Router::with_path("health").get(Ready {
            readiness: Arc::clone(readiness),
        }))
        .push(Router::with_path("metrics").get(Metrics {
            render: Arc::clone(metrics),
        }))
}

impl HttpServer {
    /// Starts serving. The data port serves `GET /` and one inbox route per HTTP source. Without a
    /// management listener, the health, metrics and admin routes are on the data port too; with
    /// one, they are only there and the data port answers 404 for them. `admin` is `None` when
    /// `admin.enabled` is false: the admin paths then answer 404 everywhere.
    pub async fn start(
        listeners: Listeners,
        options: ServerOptions,
        inbox: InboxRoutes,
        readiness: Arc<dyn Readiness>,
        metrics: MetricsRender,
        admin: Option<AdminRoutes>,
    ) -> Result<Self, HttpServerError> {
        let stopping = Arc::new(AtomicBool::new(false));
        let mut admin_router = admin.map(|admin| admin::router(admin, &readiness, &metrics));

        let mut data_router = Router::new()
            .get(Root)
            .push(inbox::router(inbox, options.max_body_bytes));
        if listeners.management.is_none() {
            data_router = operational_routes(data_router, &readiness, &metrics);
            if let Some(router) = admin_router.take() {
                data_router = data_router.push(router);
            }
        }

        let mut handles = Vec::new();
        let mut tasks = Vec::new();
        let data_addr =
            listeners
                .data
                .local_addr()
                .map_err(|source| HttpServerError::Listener {
                    what: "data port",
                    source,
                })?;
        // The two data-port rules run as service hoops, before routing, so they also hold for a
        // request that no route serves (a router hoop runs only once a route has matched).
        let data_service = Service::new(data_router)
            .catcher(errors::json_catcher())
            .hoop(RefuseWhileStopping {
                stopping: Arc::clone(&stopping),
            })
            .hoop(BodyLimit {
                max_bytes: options.max_body_bytes,
                read_timeout: options.request_read_timeout,
            });
        let (handle, task) = serve(
            listeners.data,
            data_service,
            "data port",
            options.request_read_timeout,
        )
        .await?;
        handles.push(handle);
        tasks.push(task);

        let mut management_addr = None;
        if let Some(listener) = listeners.management {
            management_addr =
                Some(
                    listener
                        .local_addr()
                        .map_err(|source| HttpServerError::Listener {
                            what: "management port",
                            source,
                        })?,
                );
            let mut router = operational_routes(Router::new(), &readiness, &metrics);
            if let Some(admin_router) = admin_router.take() {
                router = router.push(admin_router);
            }
            let service = Service::new(router).catcher(errors::json_catcher());
            let (handle, task) = serve(
                listener,
                service,
                "management port",
                options.request_read_timeout,
            )
            .await?;
            handles.push(handle);
            tasks.push(task);
        }

        Ok(Self {
            stopping,
            handles,
            tasks,
            data_addr,
            management_addr,
        })
    }

    /// The bound data-port address.
    pub fn data_addr(&self) -> SocketAddr {
        self.data_addr
    }

    /// The bound management-port address, when there is one.
    pub fn management_addr(&self) -> Option<SocketAddr> {
        self.management_addr
    }

    /// From now on every data-port request is answered 503, so a sender retries elsewhere; the
    /// first step of [`HttpServer::stop`], public so the rule can be tested on its own.
    pub fn refuse_new_requests(&self) {
        self.stopping.store(true, Ordering::Release);
    }

    /// Stops accepting connections, answers 503 to requests still arriving on open connections, and
    /// waits up to `drain` for the requests in flight.
    pub async fn stop(self, drain: Duration) {
        self.refuse_new_requests();
        for handle in &self.handles {
            handle.stop_graceful(drain);
        }
        // The servers end by themselves once drained or once `drain` passes; the extra second covers
        // the forced close of whatever is left.
        let all = futures_join(self.tasks);
        if tokio::time::timeout(drain + Duration::from_secs(1), all)
            .await
            .is_err()
        {
            tracing::warn!(?drain, "HTTP requests still open after the drain bound");
        }
    }
}

async fn futures_join(tasks: Vec<JoinHandle<()>>) {
    for task in tasks {
        let _ = task.await;
    }
}

async fn serve(
    listener: tokio::net::TcpListener,
    service: Service,
    what: &'static str,
    read_timeout: Duration,
) -> Result<(ServerHandle, JoinHandle<()>), HttpServerError> {
    let acceptor = salvo::conn::tcp::TcpAcceptor::try_from(listener)
        .map_err(|source| HttpServerError::Listener { what, source })?;
    // A request head that has not arrived within the read timeout closes the connection (salvo's
    // fuse bounds the protocol detection and hyper's header read together).
    let server = Server::new(acceptor)
        .fuse_config(FuseConfig::default().with_http1_header_timeout(read_timeout));
    let handle = server.handle();
    let task = tokio::spawn(async move {
        server.serve(service).await;
    });
    Ok((handle, task))
}
