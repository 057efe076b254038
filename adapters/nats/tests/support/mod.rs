//! Shared helpers of the NATS adapter tests: the server from `QB_TEST_NATS_URL`, unique names, a
//! JetStream client that makes and reads back streams, and a TCP proxy that can hold or cut the
//! client's connection.

#![allow(dead_code, clippy::unwrap_used)]

use async_nats::jetstream::{self, stream};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::Instant;

/// How long a test waits for a condition before it fails.
pub const WAIT: Duration = Duration::from_secs(10);

/// The server URL, or `None` (with a message) when the variable is unset.
pub fn nats_url() -> Option<String> {
    match std::env::var("QB_TEST_NATS_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            eprintln!(
                "skipped: QB_TEST_NATS_URL is not set (eval \"$(bash scripts/services.sh)\" first)"
            );
            None
        }
    }
}

/// A name no other test uses, valid as a stream name and a subject token.
pub fn unique(prefix: &str) -> String {
    format!("qb_{prefix}_{}", uuid::Uuid::new_v4().simple())
}

/// Waits until `check` gives a value, or fails after [`WAIT`] naming `what`.
pub async fn wait_for<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A plain JetStream client for setting up streams and reading them back.
pub struct TestClient {
    pub client: async_nats::Client,
    pub jetstream: jetstream::Context,
}

impl TestClient {
    pub async fn connect(url: &str) -> Self {
        let client = async_nats::connect(url).await.unwrap();
        let jetstream = jetstream::new(client.clone());
        Self { client, jetstream }
    }

    /// A stream `name` over `subjects`, with `tweak` applied to its configuration.
    pub async fn stream(
        &self,
        name: &str,
        subjects: &[&str],
        tweak: impl FnOnce(&mut stream::Config),
    ) -> stream::Stream {
        let mut config = stream::Config {
            name: name.to_owned(),
            subjects: subjects.iter().map(|s| (*s).to_owned()).collect(),
            ..stream::Config::default()
        };
        tweak(&mut config);
        self.jetstream.create_stream(config).await.unwrap()
    }

    /// Every message the stream holds now, in order: (subject, headers, payload).
    pub async fn messages(&self, name: &str) -> Vec<async_nats::jetstream::message::StreamMessage> {
        let mut stream = self.jetstream.get_stream(name).await.unwrap();
        let info = stream.info().await.unwrap();
        let (first, last) = (info.state.first_sequence, info.state.last_sequence);
        let mut out = Vec::new();
        if info.state.messages == 0 {
            return out;
        }
        for sequence in first..=last {
            if let Ok(message) = stream.get_raw_message(sequence).await {
                out.push(message);
            }
        }
        out
    }

    /// The `x-message-id` header of every message the stream holds.
    pub async fn ids(&self, name: &str) -> Vec<String> {
        self.messages(name)
            .await
            .iter()
            .filter_map(|m| m.headers.get("x-message-id").map(|v| v.as_str().to_owned()))
            .collect()
    }

    pub async fn delete(&self, name: &str) {
        let _ = self.jetstream.delete_stream(name).await;
    }
}

/// `host:port` of the server in `url`.
pub fn server_address(url: &str) -> String {
    let start = url.find("://").map_or(0, |i| i + 3);
    let authority = &url[start..];
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
    host_port.trim_end_matches('/').to_owned()
}

/// A port on 127.0.0.1 where nothing listens.
pub fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// A TCP proxy in front of the server. It can hold the server's bytes back (the client then
/// waits for answers that do not come) and cut every connection it carries.
pub struct Proxy {
    pub port: u16,
    shared: Arc<ProxyShared>,
    epoch: watch::Sender<u64>,
}

struct ProxyShared {
    hold_down: AtomicBool,
    released: tokio::sync::Notify,
    upstream_bytes: AtomicU64,
}

impl Proxy {
    /// A proxy on 127.0.0.1 to `target` (`host:port`).
    pub async fn start(target: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(ProxyShared {
            hold_down: AtomicBool::new(false),
            released: tokio::sync::Notify::new(),
            upstream_bytes: AtomicU64::new(0),
        });
        let (epoch, _) = watch::channel(0u64);
        let accept_shared = Arc::clone(&shared);
        let accept_epoch = epoch.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(&target).await else {
                    continue;
                };
                let shared = Arc::clone(&accept_shared);
                let mut cut = accept_epoch.subscribe();
                cut.mark_unchanged();
                tokio::spawn(async move {
                    tokio::select! {
                        () = pipe(client, server, shared) => {}
                        _ = cut.changed() => {}
                    }
                });
            }
        });
        Self {
            port,
            shared,
            epoch,
        }
    }

    /// Stops passing the server's bytes to the client (they wait in the socket).
    pub fn hold(&self) {
        self.shared.hold_down.store(true, Ordering::SeqCst);
    }

    /// Passes the server's bytes again.
    pub fn release(&self) {
        self.shared.hold_down.store(false, Ordering::SeqCst);
        self.shared.released.notify_waiters();
    }

    /// Bytes the clients sent so far.
    pub fn upstream_bytes(&self) -> u64 {
        self.shared.upstream_bytes.load(Ordering::SeqCst)
    }

    /// Closes every connection the proxy carries now.
    pub fn cut(&self) {
        self.epoch.send_modify(|epoch| *epoch += 1);
    }
}

async fn pipe(client: TcpStream, server: TcpStream, shared: Arc<ProxyShared>) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let up_shared = Arc::clone(&shared);
    let up = async move {
        let mut buffer = vec![0u8; 16 * 1024];
        loop {
            let n = match client_read.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            up_shared
                .upstream_bytes
                .fetch_add(n as u64, Ordering::SeqCst);
            if server_write.write_all(&buffer[..n]).await.is_err() {
                return;
            }
        }
    };
    let down = async move {
        let mut buffer = vec![0u8; 16 * 1024];
        loop {
            let n = match server_read.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            // Bytes read while the proxy holds wait here until it releases them (or is cut).
            while shared.hold_down.load(Ordering::SeqCst) {
                let released = shared.released.notified();
                if !shared.hold_down.load(Ordering::SeqCst) {
                    break;
                }
                released.await;
            }
            if client_write.write_all(&buffer[..n]).await.is_err() {
                return;
            }
        }
    };
    tokio::select! {
        () = up => {}
        () = down => {}
    }
}
