//! The TCP fault proxy of the adapters' tests: a loopback relay between a client and a real
//! broker that a test can hold (the broker's bytes wait in the proxy, so the client waits for
//! answers that do not come), release, and cut (every connection it carries closes at once, as
//! when the broker went away; new connections are carried again).
//!
//! The broker stays real; only the network between it and the client is in the test's hands.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How long [`FaultProxy::start_on`] waits for its fixed address to be free.
const BIND_WAIT: Duration = Duration::from_secs(30);

/// A TCP proxy in front of a broker. Dropping it stops accepting and closes every connection
/// it carries.
pub struct FaultProxy {
    address: String,
    port: u16,
    shared: Arc<Shared>,
    epoch: watch::Sender<u64>,
    accept: JoinHandle<()>,
}

struct Shared {
    held: AtomicBool,
    released: Notify,
    upstream_bytes: AtomicU64,
}

impl FaultProxy {
    /// A proxy on a free port of 127.0.0.1 to `target` (`host:port`).
    ///
    /// # Panics
    ///
    /// When no loopback port can be bound (a broken test machine).
    pub async fn start(target: impl Into<String>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|error| panic!("the fault proxy cannot bind 127.0.0.1:0: {error}"));
        Self::serve(listener, None, target.into())
    }

    /// A proxy listening on the fixed address `listen` (`host:port`, e.g. a listener a broker
    /// advertises) to `target`. A proxy dropped just before may hold the address until its task
    /// has ended: this waits (bounded) until it is free.
    ///
    /// # Panics
    ///
    /// When `listen` stays taken for 30 s.
    pub async fn start_on(listen: &str, target: impl Into<String>) -> Self {
        let deadline = Instant::now() + BIND_WAIT;
        let listener = loop {
            match TcpListener::bind(listen).await {
                Ok(listener) => break listener,
                Err(error) if Instant::now() >= deadline => {
                    panic!("the fault proxy cannot bind {listen} within {BIND_WAIT:?}: {error}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        };
        Self::serve(listener, Some(listen.to_owned()), target.into())
    }

    /// Serves `listener`, known to clients as `address` (else its local address).
    fn serve(listener: TcpListener, address: Option<String>, target: String) -> Self {
        let (address, port) = match listener.local_addr() {
            Ok(local) => (address.unwrap_or_else(|| local.to_string()), local.port()),
            Err(error) => panic!("the fault proxy has no local address: {error}"),
        };
        let shared = Arc::new(Shared {
            held: AtomicBool::new(false),
            released: Notify::new(),
            upstream_bytes: AtomicU64::new(0),
        });
        let (epoch, _) = watch::channel(0u64);
        let accept = tokio::spawn(accept(listener, target, Arc::clone(&shared), epoch.clone()));
        Self {
            address,
            port,
            shared,
            epoch,
            accept,
        }
    }

    /// The port the proxy listens on (127.0.0.1 for [`FaultProxy::start`]).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `host:port` the proxy listens on (as given to [`FaultProxy::start_on`]).
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Stops passing the broker's bytes to the clients; they wait in the proxy.
    pub fn hold(&self) {
        self.shared.held.store(true, Ordering::SeqCst);
    }

    /// Passes the held bytes and later ones again.
    pub fn release(&self) {
        self.shared.held.store(false, Ordering::SeqCst);
        self.shared.released.notify_waiters();
    }

    /// Bytes the clients sent towards the broker so far.
    pub fn upstream_bytes(&self) -> u64 {
        self.shared.upstream_bytes.load(Ordering::SeqCst)
    }

    /// Closes every connection the proxy carries now; later connections are carried again.
    pub fn cut(&self) {
        self.epoch.send_modify(|epoch| *epoch += 1);
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

async fn accept(
    listener: TcpListener,
    target: String,
    shared: Arc<Shared>,
    epoch: watch::Sender<u64>,
) {
    while let Ok((client, _)) = listener.accept().await {
        // A broker that cannot be reached: the client sees its connection closed.
        let Ok(broker) = TcpStream::connect(&target).await else {
            continue;
        };
        let shared = Arc::clone(&shared);
        let mut cut = epoch.subscribe();
        cut.mark_unchanged();
        tokio::spawn(async move {
            tokio::select! {
                () = pipe(client, broker, shared) => {}
                _ = cut.changed() => {}
            }
        });
    }
}

async fn pipe(client: TcpStream, broker: TcpStream, shared: Arc<Shared>) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut broker_read, mut broker_write) = broker.into_split();
    let up = copy(&mut client_read, &mut broker_write, |n| {
        shared.upstream_bytes.fetch_add(n, Ordering::SeqCst);
        async {}
    });
    let down = copy(&mut broker_read, &mut client_write, |_| {
        shared.wait_released()
    });
    tokio::select! {
        _ = up => {}
        _ = down => {}
    }
}

impl Shared {
    /// Returns once the proxy does not hold (at once when it does not).
    async fn wait_released(&self) {
        while self.held.load(Ordering::SeqCst) {
            let released = self.released.notified();
            if !self.held.load(Ordering::SeqCst) {
                break;
            }
            released.await;
        }
    }
}

/// Copies `from` to `to` until either side ends, calling `before_write` with the size of each
/// read before it is written on.
async fn copy<R, W, F, Fut>(from: &mut R, to: &mut W, mut before_write: F) -> io::Result<()>
where
    R: AsyncReadExt + Unpin,
    W: AsyncWriteExt + Unpin,
    F: FnMut(u64) -> Fut,
    Fut: Future<Output = ()>,
{
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        let n = from.read(&mut buffer).await?;
        if n == 0 {
            return Ok(());
        }
        before_write(n as u64).await;
        to.write_all(&buffer[..n]).await?;
    }
}

/// A port on 127.0.0.1 where nothing listens (bound, then released).
///
/// # Panics
///
/// When no loopback port can be bound.
pub fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .unwrap_or_else(|error| panic!("no free port on 127.0.0.1: {error}"))
}
