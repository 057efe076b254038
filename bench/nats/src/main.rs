//! NATS JetStream tools of the QueueBox benchmarks (bench/run-nats.sh):
//!
//! ```text
//! qb-bench-nats setup    --url U --stream S            a file stream over `S.>` (dedup window 2 min)
//! qb-bench-nats teardown --url U --stream S
//! qb-bench-nats publish  --url U --stream S --n N --inflight K [--keys M]
//!     the bare publisher: N messages like QueueBox's (body {"g": i}, Nats-Msg-Id, x-message-id,
//!     x-topic, x-attempt, x-message-key when keyed), K acknowledgements outstanding at most
//! qb-bench-nats rate     --url U --stream S --n N --timeout-s T
//!     waits until the stream holds N messages, then prints the rate on the server's clock:
//!     (N-1) / (time of the last message - time of the first)
//! qb-bench-nats preload  --url U --stream S --n N --prefix P
//!     N messages with the body of bench/inbox/post.lua, acknowledged, for the source bench
//! ```

use async_nats::HeaderMap;
use async_nats::jetstream::{self, stream};
use futures::stream::{FuturesUnordered, StreamExt};
use std::collections::HashMap;
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn args() -> HashMap<String, String> {
    let mut out = HashMap::new();
    let mut it = std::env::args().skip(2);
    while let Some(key) = it.next() {
        let value = it.next().unwrap_or_default();
        out.insert(key.trim_start_matches("--").to_owned(), value);
    }
    out
}

fn get<T: std::str::FromStr>(a: &HashMap<String, String>, key: &str, default: Option<T>) -> T {
    match a.get(key).and_then(|v| v.parse().ok()) {
        Some(v) => v,
        None => default.unwrap_or_else(|| panic!("--{key} is required")),
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let command = std::env::args().nth(1).unwrap_or_default();
    let a = args();
    let url: String = get(&a, "url", Some("nats://127.0.0.1:4222".to_owned()));
    let name: String = get(&a, "stream", None);
    let client = async_nats::connect(&url).await?;
    let js = jetstream::new(client.clone());
    match command.as_str() {
        "setup" => {
            js.create_stream(stream::Config {
                name: name.clone(),
                subjects: vec![format!("{name}.>")],
                duplicate_window: Duration::from_secs(120),
                ..stream::Config::default()
            })
            .await?;
        }
        "teardown" => {
            let _ = js.delete_stream(&name).await;
        }
        "publish" => {
            let n: u64 = get(&a, "n", None);
            let inflight: usize = get(&a, "inflight", Some(256));
            let keys: u64 = get(&a, "keys", Some(0));
            let subject = format!("{name}.order.created");
            let started = Instant::now();
            let mut pending = FuturesUnordered::new();
            for g in 1..=n {
                let id = format!("bench-{g}-{}", std::process::id());
                let mut headers = HeaderMap::new();
                headers.insert("Nats-Msg-Id", id.as_str());
                headers.insert("x-message-id", id.as_str());
                headers.insert("x-topic", "order.created");
                headers.insert("x-attempt", "0");
                if keys > 0 {
                    headers.insert("x-message-key", format!("key-{}", g % keys).as_str());
                }
                let ack = js
                    .publish_with_headers(subject.clone(), headers, format!("{{\"g\":{g}}}").into())
                    .await?;
                pending.push(ack.into_future());
                while pending.len() >= inflight {
                    if let Some(result) = pending.next().await {
                        result?;
                    }
                }
            }
            while let Some(result) = pending.next().await {
                result?;
            }
            let secs = started.elapsed().as_secs_f64();
            println!("pub_n={n} pub_s={secs:.3} pub_rate={:.0}", n as f64 / secs);
        }
        "rate" => {
            let n: u64 = get(&a, "n", None);
            let timeout = Duration::from_secs(get(&a, "timeout-s", Some(300)));
            let deadline = Instant::now() + timeout;
            let mut s = js.get_stream(&name).await?;
            loop {
                let state = s.info().await?.state.clone();
                if state.messages >= n {
                    let first = s.get_raw_message(state.first_sequence).await?;
                    let last = s.get_raw_message(state.last_sequence).await?;
                    let span = (last.time - first.time).as_seconds_f64();
                    println!(
                        "held={} rate={:.0} span_s={span:.3}",
                        state.messages,
                        (state.messages - 1) as f64 / span
                    );
                    return Ok(());
                }
                if Instant::now() > deadline {
                    println!("held={} rate=timeout", state.messages);
                    return Ok(());
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        "preload" => {
            let n: u64 = get(&a, "n", None);
            let prefix: String = get(&a, "prefix", Some("p".to_owned()));
            let subject = format!("{name}.in");
            let started = Instant::now();
            let mut pending = FuturesUnordered::new();
            for key in 1..=n {
                // The body of bench/inbox/post.lua (thread 1), byte for byte.
                let body = format!(
                    "{{\"id\":\"{prefix}-1-{key}\",\"type\":\"created\",\"data\":{{\"amount\":1234,\"currency\":\"EUR\",\"customer\":\"c-{}\"}}}}",
                    key % 1000
                );
                pending.push(
                    js.publish(subject.clone(), body.into())
                        .await?
                        .into_future(),
                );
                while pending.len() >= 512 {
                    if let Some(result) = pending.next().await {
                        result?;
                    }
                }
            }
            while let Some(result) = pending.next().await {
                result?;
            }
            println!("n={n} s={:.3}", started.elapsed().as_secs_f64());
        }
        other => {
            eprintln!("unknown command `{other}`: setup, teardown, publish, rate, preload");
            std::process::exit(2);
        }
    }
    client.flush().await?;
    Ok(())
}
