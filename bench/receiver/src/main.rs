//! A small, fast HTTP/1.1 receiver for the QueueBox delivery benchmarks.
//!
//! Every POST is answered `200` with an empty body on a kept-alive connection. For each POST the
//! receiver records the arrival time, checks the `X-Message-Id` for duplicates, checks the order of
//! each `X-Message-Key` through the payload field `"g"` (the insert order written by the load
//! scripts), and, when the payload carries `"t"` (microseconds since the Unix epoch, written from the
//! same `clock_timestamp()` as `created_at`), records the commit-to-delivery latency.
//!
//! Control routes (GET, answered with one line of `name=value` pairs):
//!   /stats       count, unique ids, duplicates, out-of-order rows, first and last arrival (µs)
//!   /rate?n=N    the rate over the first N arrivals: (N-1) / (arrival[N-1] - arrival[0])
//!   /rate?from=A&to=B  the rate between arrival A and arrival B (0-based)
//!   /lat         latency percentiles (ms) of the payloads that carried "t"
//!   /lat?path=P  the same, only for the POSTs whose request path starts with P (e.g. one per
//!                QueueBox replica, each delivering to its own path)
//!   /dump        one line per POST that carried "t": message id, arrival (µs), t (µs), path
//!   /reset       forget everything
//!
//! Usage: qb-bench-receiver [--port 9999] [--threads 1]

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Default)]
struct State {
    arrivals: Vec<u64>,
    latencies_us: Vec<i64>,
    /// (id, arrival, t, path) of each POST that carried "t", for /dump and /lat?path=.
    timed: Vec<(Option<u128>, u64, i64, String)>,
    seen: HashSet<u128>,
    duplicates: u64,
    last_g: HashMap<Vec<u8>, i64>,
    out_of_order: u64,
}

type Shared = Arc<Mutex<State>>;

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

fn main() {
    let mut port: u16 = 9999;
    let mut threads: usize = 1;
    let args: Vec<String> = std::env::args().collect();
    let mut i = 1;
    while i < args.len() {
        match args[i].as_str() {
            "--port" => {
                port = args.get(i + 1).and_then(|v| v.parse().ok()).unwrap_or(port);
                i += 1;
            }
            "--threads" => {
                threads = args.get(i + 1).and_then(|v| v.parse().ok()).unwrap_or(threads);
                i += 1;
            }
            other => {
                eprintln!("unknown argument {other}; usage: qb-bench-receiver [--port P] [--threads N]");
                std::process::exit(2);
            }
        }
        i += 1;
    }
    let runtime = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
    }
    .expect("runtime");
    runtime.block_on(serve(port));
}

async fn serve(port: u16) {
    let listener = TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap_or_else(|e| {
            eprintln!("bind 127.0.0.1:{port}: {e}");
            std::process::exit(1)
        });
    eprintln!("receiver listening on 127.0.0.1:{port}");
    let state: Shared = Arc::new(Mutex::new(State::default()));
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    let _ = stream.set_nodelay(true);
                    let state = Arc::clone(&state);
                    tokio::spawn(async move { let _ = connection(stream, state).await; });
                }
            }
            _ = tokio::signal::ctrl_c() => break,
        }
    }
}

async fn connection(mut stream: TcpStream, state: Shared) -> std::io::Result<()> {
    let mut buf: Vec<u8> = Vec::with_capacity(8192);
    let mut chunk = vec![0u8; 16384];
    loop {
        // Parse as many complete requests as the buffer holds.
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut req = httparse::Request::new(&mut headers);
            let parsed = match req.parse(&buf) {
                Ok(p) => p,
                Err(_) => {
                    stream
                        .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                        .await?;
                    return Ok(());
                }
            };
            let httparse::Status::Complete(head_len) = parsed else { break };
            let mut content_length = 0usize;
            let mut id: Option<u128> = None;
            let mut key: Option<Vec<u8>> = None;
            for h in req.headers.iter() {
                if h.name.eq_ignore_ascii_case("content-length") {
                    content_length = std::str::from_utf8(h.value)
                        .ok()
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                } else if h.name.eq_ignore_ascii_case("x-message-id") {
                    id = parse_uuid(h.value);
                } else if h.name.eq_ignore_ascii_case("x-message-key") {
                    key = Some(h.value.to_vec());
                }
            }
            if buf.len() < head_len + content_length {
                break; // body not complete yet
            }
            let method_is_get = req.method == Some("GET");
            let path = req.path.unwrap_or("/").to_owned();
            let body = &buf[head_len..head_len + content_length];
            let response = if method_is_get {
                let text = control(&path, &state);
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n{}",
                    text.len(),
                    text
                )
                .into_bytes()
            } else {
                record(&state, &path, id, key, body);
                b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".to_vec()
            };
            buf.drain(..head_len + content_length);
            stream.write_all(&response).await?;
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn record(state: &Shared, path: &str, id: Option<u128>, key: Option<Vec<u8>>, body: &[u8]) {
    let at = now_us();
    let g = find_int(body, b"\"g\":");
    let t = find_int(body, b"\"t\":");
    let mut s = state.lock().expect("state");
    s.arrivals.push(at);
    if let Some(id) = id {
        if !s.seen.insert(id) {
            s.duplicates += 1;
        }
    }
    if let Some(t) = t {
        let latency = at as i64 - t;
        s.latencies_us.push(latency);
        s.timed.push((id, at, t, path.to_owned()));
    }
    if let (Some(key), Some(g)) = (key, g) {
        let previous = s.last_g.insert(key, g);
        if let Some(p) = previous {
            if p > g {
                s.out_of_order += 1;
            }
        }
    }
}

fn control(path: &str, state: &Shared) -> String {
    let (route, query) = path.split_once('?').unwrap_or((path, ""));
    let param = |name: &str| -> Option<usize> {
        query
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == name)
            .and_then(|(_, v)| v.parse().ok())
    };
    let text_param = |name: &str| -> Option<&str> {
        query
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v)
    };
    let mut s = state.lock().expect("state");
    match route {
        "/stats" => format!(
            "count={} unique={} duplicates={} out_of_order={} first_us={} last_us={}\n",
            s.arrivals.len(),
            s.seen.len(),
            s.duplicates,
            s.out_of_order,
            s.arrivals.first().copied().unwrap_or(0),
            s.arrivals.last().copied().unwrap_or(0)
        ),
        "/rate" => {
            let (from, to) = match (param("n"), param("from"), param("to")) {
                (Some(n), _, _) => (0, n.saturating_sub(1)),
                (None, Some(a), Some(b)) => (a, b),
                _ => (0, s.arrivals.len().saturating_sub(1)),
            };
            if to >= s.arrivals.len() || to <= from {
                format!("ready=0 count={}\n", s.arrivals.len())
            } else {
                let dt = (s.arrivals[to] - s.arrivals[from]) as f64 / 1e6;
                format!(
                    "ready=1 from={from} to={to} seconds={dt:.4} rate={:.0}\n",
                    (to - from) as f64 / dt.max(1e-9)
                )
            }
        }
        "/lat" => {
            let mut v = match text_param("path") {
                Some(prefix) => s
                    .timed
                    .iter()
                    .filter(|(_, _, _, path)| path.starts_with(prefix))
                    .map(|(_, at, t, _)| *at as i64 - t)
                    .collect(),
                None => s.latencies_us.clone(),
            };
            v.sort_unstable();
            let pct = |p: f64| -> f64 {
                if v.is_empty() {
                    return f64::NAN;
                }
                let idx = ((p / 100.0) * (v.len() - 1) as f64).round() as usize;
                v[idx.min(v.len() - 1)] as f64 / 1000.0
            };
            format!(
                "count={} p50_ms={:.2} p90_ms={:.2} p99_ms={:.2} p999_ms={:.2} max_ms={:.2}\n",
                v.len(),
                pct(50.0),
                pct(90.0),
                pct(99.0),
                pct(99.9),
                pct(100.0)
            )
        }
        "/dump" => {
            let mut out = String::with_capacity(s.timed.len() * 80);
            for (id, at, t, path) in &s.timed {
                let id = id.map_or_else(|| "-".to_owned(), |id| format!("{id:032x}"));
                out.push_str(&format!("{id} {at} {t} {path}\n"));
            }
            out
        }
        "/reset" => {
            *s = State::default();
            "reset=1\n".to_owned()
        }
        _ => "routes: /stats /rate?n=N /lat /lat?path=P /dump /reset\n".to_owned(),
    }
}

fn parse_uuid(value: &[u8]) -> Option<u128> {
    let mut out: u128 = 0;
    let mut digits = 0;
    for &c in value {
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            b'-' => continue,
            _ => return None,
        };
        out = (out << 4) | d as u128;
        digits += 1;
    }
    (digits == 32).then_some(out)
}

/// The integer after `needle` in a flat JSON body, e.g. `"g":123`.
fn find_int(body: &[u8], needle: &[u8]) -> Option<i64> {
    let pos = body.windows(needle.len()).position(|w| w == needle)?;
    let rest = &body[pos + needle.len()..];
    let rest = rest.iter().skip_while(|c| **c == b' ');
    let mut value: i64 = 0;
    let mut neg = false;
    let mut any = false;
    for (i, &c) in rest.enumerate() {
        if i == 0 && c == b'-' {
            neg = true;
            continue;
        }
        if c.is_ascii_digit() {
            value = value * 10 + (c - b'0') as i64;
            any = true;
        } else {
            break;
        }
    }
    any.then_some(if neg { -value } else { value })
}
