//! Kafka tools of the QueueBox benchmarks (issue 14), one binary with six modes. Every mode takes
//! `--bootstrap host:port` (PLAINTEXT) and is bounded by `--timeout-s` (default 300).
//!
//!   qb-bench-kafka create  --topic T [--partitions 4]     creates T (replication 1); an existing
//!                                                          T is an error
//!   qb-bench-kafka delete  --topic T                       deletes T (a missing one is fine)
//!   qb-bench-kafka consume --topic T --expect N [--keyed] [--ready-file F]
//!       reads every partition of T from its start (assigned, no group, nothing committed) and
//!       records the arrival time of each record on its own clock until N records arrived or the
//!       timeout. Duplicates by the `x-message-id` header; with --keyed, the order of each record
//!       key through the payload field "g" (the insert order). Prints one line:
//!       `count= unique= duplicates= out_of_order= no_g= keys_seen= seconds= rate= ts_rate=
//!        rate_first10pct= rate_9th10pct= first_us= last_us= timed_out=`; rate = (count-1) /
//!       (last arrival - first arrival); ts_rate the same over the records' own timestamps (the
//!       producer's create time, ms).
//!   qb-bench-kafka publish --topic T --n N [--inflight 64] [--keys 0] [--linger-ms 1]
//!                          [--message-timeout-ms 30000]
//!       the bare producer: one FutureProducer with QueueBox's settings (acks=all,
//!       enable.idempotence=true, linger.ms 1, message.timeout.ms = the destination's timeoutMs),
//!       N records with the record QueueBox sends for a bench row (headers `x-message-id` = a
//!       36-character id, `x-topic` = order.created, `x-attempt` = 1; value `{"g": i}`; key
//!       `key-(i % keys)`, none when --keys 0), at most `inflight` records waiting for their
//!       acknowledgement (as `outbox.concurrency` bounds QueueBox's publishes in flight). Prints
//!       `pub_acked= pub_failed= pub_seconds= pub_rate=`.
//!   qb-bench-kafka preload --topic T --n N [--prefix p]
//!       fills T with N records (no key) carrying the body of `bench/inbox/post.lua` (unique ids
//!       `<prefix>-1-<i>`), with the same producer settings, and waits for every acknowledgement.
//!   qb-bench-kafka lag     --topic T --group G
//!       prints `committed= end= lag=` summed over T's partitions for the group G.

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::util::Timeout;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

struct Args {
    mode: String,
    values: HashMap<String, String>,
    flags: HashSet<String>,
}

impl Args {
    fn parse() -> Self {
        let mut raw = std::env::args().skip(1);
        let mode = raw.next().unwrap_or_default();
        let rest: Vec<String> = raw.collect();
        let mut values = HashMap::new();
        let mut flags = HashSet::new();
        let mut i = 0;
        while i < rest.len() {
            let name = rest[i].trim_start_matches("--").to_owned();
            match rest.get(i + 1) {
                Some(next) if !next.starts_with("--") => {
                    values.insert(name, next.clone());
                    i += 2;
                }
                _ => {
                    flags.insert(name);
                    i += 1;
                }
            }
        }
        Self {
            mode,
            values,
            flags,
        }
    }
    fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }
    fn req(&self, name: &str) -> &str {
        self.get(name).unwrap_or_else(|| {
            eprintln!("missing --{name}");
            std::process::exit(2)
        })
    }
    fn num(&self, name: &str, default: u64) -> u64 {
        self.get(name).map_or(default, |v| {
            v.parse().unwrap_or_else(|_| {
                eprintln!("--{name} wants a number");
                std::process::exit(2)
            })
        })
    }
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

fn main() {
    let args = Args::parse();
    let timeout = Duration::from_secs(args.num("timeout-s", 300));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let outcome = runtime.block_on(async {
        match tokio::time::timeout(timeout + Duration::from_secs(5), run(&args, timeout)).await {
            Ok(result) => result,
            Err(_) => Err(format!("{} did not finish within its bound", args.mode).into()),
        }
    });
    if let Err(error) = outcome {
        eprintln!("qb-bench-kafka {}: {error}", args.mode);
        std::process::exit(1);
    }
}

fn base_config(args: &Args) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", args.req("bootstrap"));
    config
}

async fn run(args: &Args, timeout: Duration) -> Res<()> {
    match args.mode.as_str() {
        "create" => create(args, timeout).await,
        "delete" => delete(args, timeout).await,
        "consume" => {
            let args_topic = args.req("topic").to_owned();
            let config = base_config(args);
            let expect = args.num("expect", 0) as usize;
            let keyed = args.flags.contains("keyed");
            let ready = args.get("ready-file").map(str::to_owned);
            tokio::task::spawn_blocking(move || {
                consume(config, &args_topic, expect, keyed, ready, timeout)
            })
            .await?
        }
        "publish" => publish(args, timeout).await,
        "preload" => preload(args, timeout).await,
        "lag" => {
            let config = base_config(args);
            let topic = args.req("topic").to_owned();
            let group = args.req("group").to_owned();
            tokio::task::spawn_blocking(move || lag(config, &topic, &group)).await?
        }
        other => {
            eprintln!("unknown mode `{other}`; see the header of bench/kafka/src/main.rs");
            std::process::exit(2)
        }
    }
}

fn admin(args: &Args) -> Res<AdminClient<DefaultClientContext>> {
    Ok(base_config(args).create()?)
}

async fn create(args: &Args, timeout: Duration) -> Res<()> {
    let topic = args.req("topic");
    let partitions = args.num("partitions", 4) as i32;
    let options = AdminOptions::new().operation_timeout(Some(timeout));
    let results = admin(args)?
        .create_topics(
            &[NewTopic::new(topic, partitions, TopicReplication::Fixed(1))],
            &options,
        )
        .await?;
    for result in results {
        result.map_err(|(name, code)| format!("creating topic {name}: {code}"))?;
    }
    // Wait until the brokers' metadata has every partition with a leader.
    let config = base_config(args);
    let topic = topic.to_owned();
    tokio::task::spawn_blocking(move || -> Res<()> {
        let consumer: BaseConsumer = config.create()?;
        let deadline = Instant::now() + timeout;
        loop {
            let metadata = consumer.fetch_metadata(Some(&topic), Duration::from_secs(5))?;
            let ready = metadata.topics().iter().any(|t| {
                t.name() == topic
                    && t.error().is_none()
                    && t.partitions().len() == partitions as usize
                    && t.partitions()
                        .iter()
                        .all(|p| p.leader() >= 0 && p.error().is_none())
            });
            if ready {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(
                    format!("topic {topic} has no leader for every partition in time").into(),
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    })
    .await?
}

async fn delete(args: &Args, timeout: Duration) -> Res<()> {
    let topic = args.req("topic");
    let options = AdminOptions::new().operation_timeout(Some(timeout));
    let results = admin(args)?.delete_topics(&[topic], &options).await?;
    for result in results {
        if let Err((name, code)) = result {
            eprintln!("topic {name}: {code}");
        }
    }
    Ok(())
}

/// The value of the payload field "g" (`{"g": 123}`), if any.
fn field_g(body: &[u8]) -> Option<i64> {
    let at = body.windows(4).position(|w| w == b"\"g\":")? + 4;
    let rest = &body[at..];
    let start = rest.iter().position(|b| !b.is_ascii_whitespace())?;
    let digits: Vec<u8> = rest[start..]
        .iter()
        .copied()
        .take_while(|b| b.is_ascii_digit() || *b == b'-')
        .collect();
    std::str::from_utf8(&digits).ok()?.parse().ok()
}

fn rate(arrivals: &[u64], from: usize, to: usize) -> f64 {
    if to <= from || to >= arrivals.len() {
        return 0.0;
    }
    let span = arrivals[to].saturating_sub(arrivals[from]) as f64 / 1e6;
    if span <= 0.0 {
        0.0
    } else {
        (to - from) as f64 / span
    }
}

fn partitions(consumer: &BaseConsumer, topic: &str) -> Res<usize> {
    let metadata = consumer.fetch_metadata(Some(topic), Duration::from_secs(10))?;
    let found = metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic)
        .ok_or("no metadata for the topic")?;
    if let Some(error) = found.error() {
        return Err(format!("topic {topic}: {error:?}").into());
    }
    Ok(found.partitions().len())
}

fn consume(
    mut config: ClientConfig,
    topic: &str,
    expect: usize,
    keyed: bool,
    ready_file: Option<String>,
    timeout: Duration,
) -> Res<()> {
    // Fetch answers as soon as one record is there, so arrivals are not grouped by the fetch wait.
    let consumer: BaseConsumer = config
        .set(
            "group.id",
            format!("qb-bench-timing-{}", std::process::id()),
        )
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .set("fetch.wait.max.ms", "5")
        .set("fetch.min.bytes", "1")
        .create()?;
    let count = partitions(&consumer, topic)?;
    let mut assignment = TopicPartitionList::new();
    for partition in 0..count as i32 {
        assignment.add_partition_offset(topic, partition, Offset::Beginning)?;
    }
    consumer.assign(&assignment)?;
    // One poll connects and starts the fetchers before the ready file says so.
    if let Some(result) = consumer.poll(Duration::from_millis(200)) {
        result?;
        return Err("the topic was not empty when the consumer started".into());
    }
    if let Some(file) = ready_file {
        std::fs::write(file, "ready\n")?;
    }
    let deadline = Instant::now() + timeout;
    let mut arrivals: Vec<u64> = Vec::with_capacity(expect.max(1));
    let (mut ts_min, mut ts_max) = (i64::MAX, i64::MIN);
    let mut seen: HashSet<Vec<u8>> = HashSet::with_capacity(expect.max(1));
    let mut duplicates = 0u64;
    let mut last_g: HashMap<Vec<u8>, i64> = HashMap::new();
    let (mut out_of_order, mut no_g) = (0u64, 0u64);
    let mut timed_out = false;
    while arrivals.len() < expect {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            timed_out = true;
            break;
        }
        let Some(result) = consumer.poll(left.min(Duration::from_millis(500))) else {
            continue;
        };
        let message = result?;
        arrivals.push(now_us());
        if let Some(ms) = message.timestamp().to_millis() {
            ts_min = ts_min.min(ms);
            ts_max = ts_max.max(ms);
        }
        if let Some(headers) = message.headers() {
            if let Some(id) = headers
                .iter()
                .find(|h| h.key == "x-message-id")
                .and_then(|h| h.value)
            {
                if !seen.insert(id.to_vec()) {
                    duplicates += 1;
                }
            }
        }
        if keyed {
            match (message.key(), message.payload().and_then(field_g)) {
                (Some(key), Some(g)) => {
                    let last = last_g.entry(key.to_vec()).or_insert(i64::MIN);
                    if g < *last {
                        out_of_order += 1;
                    }
                    *last = (*last).max(g);
                }
                _ => no_g += 1,
            }
        }
    }
    let n = arrivals.len();
    let (first, last) = (
        arrivals.first().copied().unwrap_or(0),
        arrivals.last().copied().unwrap_or(0),
    );
    let ts_rate = if n > 1 && ts_max > ts_min {
        (n - 1) as f64 / ((ts_max - ts_min) as f64 / 1e3)
    } else {
        0.0
    };
    println!(
        "count={n} unique={} duplicates={duplicates} out_of_order={out_of_order} no_g={no_g} keys_seen={} seconds={:.4} rate={:.0} ts_rate={ts_rate:.0} rate_first10pct={:.0} rate_9th10pct={:.0} first_us={first} last_us={last} timed_out={}",
        seen.len(),
        last_g.len(),
        last.saturating_sub(first) as f64 / 1e6,
        if n > 1 {
            rate(&arrivals, 0, n - 1)
        } else {
            0.0
        },
        rate(&arrivals, 0, n / 10 - usize::from(n >= 10)),
        rate(&arrivals, n * 8 / 10, (n * 9 / 10).saturating_sub(1)),
        u8::from(timed_out)
    );
    Ok(())
}

/// The producer settings of QueueBox's Kafka destination (adapters/kafka/src/publisher.rs).
fn producer(args: &Args, client_id: &str) -> Res<Arc<FutureProducer>> {
    let timeout_ms = args.num("message-timeout-ms", 30_000);
    let producer: FutureProducer = base_config(args)
        .set("client.id", client_id)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("message.timeout.ms", timeout_ms.to_string())
        .set("request.timeout.ms", timeout_ms.min(30_000).to_string())
        .set("linger.ms", args.num("linger-ms", 1).to_string())
        .create()?;
    Ok(Arc::new(producer))
}

/// Sends `count` records through `producer` with at most `inflight` unacknowledged; `record(i)`
/// gives the key, the value and the headers of record i. Returns (acked, failed, seconds).
async fn send_all(
    producer: &Arc<FutureProducer>,
    topic: &str,
    range: std::ops::Range<u64>,
    inflight: usize,
    record: impl Fn(u64) -> (Option<String>, String, OwnedHeaders),
) -> (u64, u64, f64) {
    let mut window = FuturesUnordered::new();
    let (mut acked, mut failed) = (0u64, 0u64);
    let began = Instant::now();
    let mut tally = |result: Result<(), String>| match result {
        Ok(()) => acked += 1,
        Err(error) => {
            if failed == 0 {
                eprintln!("first failed record: {error}");
            }
            failed += 1;
        }
    };
    for i in range {
        if window.len() >= inflight {
            if let Some(result) = window.next().await {
                tally(result);
            }
        }
        let (key, value, headers) = record(i);
        let producer = Arc::clone(producer);
        let topic = topic.to_owned();
        window.push(async move {
            let mut out = FutureRecord::to(&topic)
                .payload(value.as_bytes())
                .headers(headers);
            if let Some(key) = &key {
                out = out.key(key.as_bytes());
            }
            producer
                .send(out, Timeout::Never)
                .await
                .map(|_| ())
                .map_err(|(error, _)| error.to_string())
        });
    }
    while let Some(result) = window.next().await {
        tally(result);
    }
    (acked, failed, began.elapsed().as_secs_f64())
}

async fn publish(args: &Args, _timeout: Duration) -> Res<()> {
    let n = args.num("n", 0);
    let start = args.num("start", 1);
    let inflight = args.num("inflight", 64).max(1) as usize;
    let keys = args.num("keys", 0);
    let topic = args.req("topic").to_owned();
    let producer = producer(args, "qb-bench-bare")?;
    let (acked, failed, seconds) = send_all(&producer, &topic, start..start + n, inflight, |g| {
        let headers = OwnedHeaders::new_with_capacity(3)
            .insert(Header {
                key: "x-message-id",
                value: Some(&format!("00000000-0000-4000-8000-{g:012x}")),
            })
            .insert(Header {
                key: "x-topic",
                value: Some("order.created"),
            })
            .insert(Header {
                key: "x-attempt",
                value: Some("1"),
            });
        let key = (keys > 0).then(|| format!("key-{}", g % keys));
        (key, format!("{{\"g\": {g}}}"), headers)
    })
    .await;
    println!(
        "inflight={inflight} pub_acked={acked} pub_failed={failed} pub_seconds={seconds:.4} pub_rate={:.0}",
        n as f64 / seconds
    );
    if acked != n {
        return Err(format!("{} of {n} records were not acknowledged", n - acked).into());
    }
    Ok(())
}

async fn preload(args: &Args, _timeout: Duration) -> Res<()> {
    let n = args.num("n", 0);
    let prefix = args.get("prefix").unwrap_or("p").to_owned();
    let topic = args.req("topic").to_owned();
    let producer = producer(args, "qb-bench-preload")?;
    let (acked, failed, seconds) = send_all(&producer, &topic, 0..n, 10_000, |key| {
        // The body of bench/inbox/post.lua (thread 1), byte for byte.
        let body = format!(
            "{{\"id\":\"{prefix}-1-{key}\",\"type\":\"created\",\"data\":{{\"amount\":1234,\"currency\":\"EUR\",\"customer\":\"c-{}\"}}}}",
            key % 1000
        );
        (None, body, OwnedHeaders::new())
    })
    .await;
    println!(
        "preloaded={acked} failed={failed} seconds={seconds:.2} rate={:.0}",
        n as f64 / seconds
    );
    if acked != n {
        return Err(format!("{} of {n} records were not acknowledged", n - acked).into());
    }
    Ok(())
}

fn lag(mut config: ClientConfig, topic: &str, group: &str) -> Res<()> {
    let consumer: BaseConsumer = config
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()?;
    let count = partitions(&consumer, topic)?;
    let mut list = TopicPartitionList::new();
    for partition in 0..count as i32 {
        list.add_partition(topic, partition);
    }
    let committed = consumer.committed_offsets(list, Duration::from_secs(10))?;
    let (mut done, mut end) = (0i64, 0i64);
    for element in committed.elements() {
        if let Offset::Offset(offset) = element.offset() {
            done += offset;
        }
        let (_, high) =
            consumer.fetch_watermarks(topic, element.partition(), Duration::from_secs(10))?;
        end += high;
    }
    println!("committed={done} end={end} lag={}", end - done);
    Ok(())
}
