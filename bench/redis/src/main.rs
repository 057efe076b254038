//! Redis Streams tools of the QueueBox benchmarks (bench/run-redis.sh):
//!
//! ```text
//! qb-bench-redis publish --url U --stream S --n N --inflight K [--keys M]
//!     the bare publisher: N entries like QueueBox's (x-message-id, x-topic, x-attempt,
//!     x-message-key when keyed, payload {"g": i}), each an XADD awaited for its entry id, at most
//!     K adds in flight on one multiplexed connection (the adapter's connection kind)
//! qb-bench-redis rate --url U --stream S --n N --timeout-s T
//!     waits until the stream holds N entries, then prints the rate on the server's clock:
//!     (N-1) / (ms of the last entry id - ms of the first), entry ids being Redis's own time
//! ```

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

fn entry_ms(id: &str) -> u64 {
    id.split('-').next().and_then(|ms| ms.parse().ok()).unwrap_or(0)
}

#[tokio::main]
async fn main() -> Result<()> {
    let command = std::env::args().nth(1).unwrap_or_default();
    let a = args();
    let url: String = get(&a, "url", Some("redis://127.0.0.1:6379".to_owned()));
    let stream: String = get(&a, "stream", None);
    let n: u64 = get(&a, "n", None);
    let client = redis::Client::open(url.as_str())?;
    let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
    let mut connection = client.get_multiplexed_async_connection_with_config(&config).await?;
    match command.as_str() {
        "publish" => {
            let inflight: usize = get(&a, "inflight", Some(256));
            let keys: u64 = get(&a, "keys", Some(0));
            let started = Instant::now();
            let mut pending = FuturesUnordered::new();
            for g in 1..=n {
                if pending.len() >= inflight {
                    let done: Option<redis::RedisResult<String>> = pending.next().await;
                    done.ok_or("no add in flight")??;
                }
                let mut command = redis::cmd("XADD");
                let id = format!("{:032x}", u128::from(g) * 0x9e37_79b9_7f4a_7c15);
                command
                    .arg(&stream)
                    .arg("*")
                    .arg("x-message-id")
                    .arg(&id)
                    .arg("x-topic")
                    .arg("order.created")
                    .arg("x-attempt")
                    .arg("0");
                if keys > 0 {
                    command.arg("x-message-key").arg(format!("key-{}", g % keys));
                }
                command.arg("payload").arg(format!("{{\"g\":{g}}}"));
                let mut connection = connection.clone();
                pending.push(async move { command.query_async::<String>(&mut connection).await });
            }
            while let Some(done) = pending.next().await {
                done?;
            }
            println!(
                "published={n} publish_s={:.3}",
                started.elapsed().as_secs_f64()
            );
        }
        "rate" => {
            let timeout: u64 = get(&a, "timeout-s", Some(300));
            let deadline = Instant::now() + Duration::from_secs(timeout);
            loop {
                let held: u64 = redis::cmd("XLEN").arg(&stream).query_async(&mut connection).await?;
                if held >= n {
                    let first: Vec<(String, HashMap<String, String>)> = redis::cmd("XRANGE")
                        .arg(&stream).arg("-").arg("+").arg("COUNT").arg(1)
                        .query_async(&mut connection).await?;
                    let last: Vec<(String, HashMap<String, String>)> = redis::cmd("XREVRANGE")
                        .arg(&stream).arg("+").arg("-").arg("COUNT").arg(1)
                        .query_async(&mut connection).await?;
                    let (first, last) = (entry_ms(&first[0].0), entry_ms(&last[0].0));
                    let span = last.saturating_sub(first).max(1);
                    println!(
                        "rate={} held={held} span_ms={span}",
                        (n - 1) * 1000 / span
                    );
                    return Ok(());
                }
                if Instant::now() > deadline {
                    println!("rate=0 held={held} timed_out=1");
                    return Ok(());
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        _ => {
            eprintln!("usage: qb-bench-redis publish|rate --url U --stream S --n N ...");
            std::process::exit(2);
        }
    }
    Ok(())
}
