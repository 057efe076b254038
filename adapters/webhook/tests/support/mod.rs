//! A small real HTTP/1.1 server on 127.0.0.1 for the tests: it records every request and answers
//! with what the test's handler returns. No mocks: reqwest talks to it over TCP.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// One received request.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// Which accepted connection carried it (0, 1, ...).
    pub connection: usize,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.header_values(name).into_iter().next()
    }

    pub fn header_values(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The body as `application/x-www-form-urlencoded` pairs (test data is plain ASCII).
    pub fn form(&self) -> Vec<(String, String)> {
        self.body
            .split('&')
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                (decode(k), decode(v))
            })
            .collect()
    }

    pub fn form_value(&self, key: &str) -> Option<String> {
        self.form()
            .into_iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("00");
                out.push(u8::from_str_radix(hex, 16).unwrap_or(b'?'));
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What the server answers.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
    pub delay: Duration,
}

impl Reply {
    pub fn status(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: String::new(),
            delay: Duration::ZERO,
        }
    }

    pub fn body(mut self, body: impl Into<String>) -> Self {
        self.body = body.into();
        self
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

type Handler = dyn Fn(&Request) -> Reply + Send + Sync;

/// A running server; stops when dropped.
pub struct TestServer {
    pub addr: SocketAddr,
    requests: Arc<Mutex<Vec<Request>>>,
    arrived: Arc<Notify>,
    task: JoinHandle<()>,
}

impl TestServer {
    pub async fn start(handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let arrived = Arc::new(Notify::new());
        let handler: Arc<Handler> = Arc::new(handler);
        let connections = Arc::new(AtomicUsize::new(0));
        let task = {
            let requests = requests.clone();
            let arrived = arrived.clone();
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    let id = connections.fetch_add(1, Ordering::SeqCst);
                    let requests = requests.clone();
                    let arrived = arrived.clone();
                    let handler = handler.clone();
                    tokio::spawn(async move {
                        let _ = serve(stream, id, requests, arrived, handler).await;
                    });
                }
            })
        };
        Self {
            addr,
            requests,
            arrived,
            task,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().expect("lock").clone()
    }

    /// Waits until at least `count` requests arrived, or fails at the deadline.
    pub async fn wait_for(&self, count: usize, within: Duration) -> Vec<Request> {
        let deadline = Instant::now() + within;
        loop {
            let notified = self.arrived.notified();
            let seen = self.requests();
            if seen.len() >= count {
                return seen;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "only {} of {count} requests arrived",
                seen.len()
            );
            let _ = tokio::time::timeout(left, notified).await;
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(
    stream: TcpStream,
    connection: usize,
    requests: Arc<Mutex<Vec<Request>>>,
    arrived: Arc<Notify>,
    handler: Arc<Handler>,
) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let mut parts = line.trim_end().splitn(3, ' ');
        let method = parts.next().unwrap_or_default().to_owned();
        let target = parts.next().unwrap_or_default().to_owned();
        let mut headers = Vec::new();
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).await? == 0 {
                return Ok(());
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                headers.push((name.trim().to_owned(), value.trim().to_owned()));
            }
        }
        let length = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.parse::<usize>().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        reader.read_exact(&mut body).await?;
        let request = Request {
            method,
            target,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
            connection,
        };
        let reply = handler(&request);
        requests.lock().expect("lock").push(request);
        arrived.notify_waiters();
        if !reply.delay.is_zero() {
            tokio::time::sleep(reply.delay).await;
        }
        // 204 and 304 carry no body by definition; sending one would corrupt the connection.
        let body = if matches!(reply.status, 204 | 304) {
            ""
        } else {
            reply.body.as_str()
        };
        let mut out = format!("HTTP/1.1 {} Test\r\n", reply.status);
        if !matches!(reply.status, 204 | 304) {
            out.push_str(&format!("content-length: {}\r\n", body.len()));
        }
        for (name, value) in &reply.headers {
            out.push_str(&format!("{name}: {value}\r\n"));
        }
        out.push_str("\r\n");
        out.push_str(body);
        write.write_all(out.as_bytes()).await?;
        write.flush().await?;
    }
}

/// An address on which nothing listens (bound, then released).
pub async fn closed_port_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    format!("http://{addr}")
}
