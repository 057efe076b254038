//! RabbitMQ tools of the QueueBox benchmarks (issue 12), one binary with five modes.
//!
//!   qb-bench-amqp setup    --url U --queue Q [--exchange E] [--binding '#']
//!       declares E (durable, topic, as the QueueBox publisher does) when given, the queue Q
//!       (durable, classic) and binds Q to E with the binding key.
//!   qb-bench-amqp teardown --url U --queue Q [--exchange E]
//!       deletes Q and E (errors ignored: a missing one is fine).
//!   qb-bench-amqp depth    --url U --queue Q          prints `depth=N`.
//!   qb-bench-amqp consume  --url U --queue Q --expect N [--timeout-s 300] [--prefetch 2000]
//!                          [--ready-file F] [--keyed]
//!       consumes Q (manual acks, one `multiple` ack every 500 messages, so the broker runs the
//!       same acknowledged path a real consumer does) and records the arrival time of each
//!       message on its own clock, until N messages arrived or the timeout. Duplicates by AMQP
//!       `message_id`; with --keyed, the order of each routing key through the payload field "g"
//!       (the insert order). Prints one line:
//!       `count= unique= duplicates= out_of_order= seconds= rate= rate_first10pct= rate_9th10pct=
//!        first_us= last_us= timed_out=`; rate = (count-1) / (last arrival - first arrival).
//!   qb-bench-amqp publish  --url U --exchange E --n N [--inflight 64] [--keys 0] [--start 1]
//!                          [--unkeyed-routing-key none]
//!       the bare publisher: one connection, one confirm-mode channel, N messages published
//!       persistent (delivery mode 2) and mandatory, the same properties and body as QueueBox
//!       sends for a bench row (`message_id` a 36-character id, `content_type`
//!       application/json, headers `x-topic` = order.created and `x-attempt` = 1, body
//!       `{"g": i}`), routing key `key-(i % keys)` (or the unkeyed one), at most `inflight`
//!       messages waiting for their confirm (1 = one at a time). Prints `pub_acked= pub_nacked=
//!       pub_returned= pub_seconds= pub_rate=` (the publisher's own view).
//!   qb-bench-amqp preload  --url U --queue Q --n N [--prefix p] [--inflight 256]
//!       fills Q through the default exchange with N persistent messages carrying the body of
//!       `bench/inbox/post.lua` (unique ids `<prefix>-1-<i>`) and waits for every confirm.
//!
//! Every mode is bounded: connection and each step by `--timeout-s` (default 300).

use futures::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, ExchangeDeclareOptions, ExchangeDeleteOptions, QueueBindOptions,
    QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::PublisherConfirm;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Channel, Confirmation, Connection, ConnectionProperties, ExchangeKind};
use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

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
        Self { mode, values, flags }
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
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}

fn main() {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let timeout = Duration::from_secs(args.num("timeout-s", 300));
    let outcome = runtime.block_on(async {
        match tokio::time::timeout(timeout + Duration::from_secs(5), run(&args, timeout)).await {
            Ok(result) => result,
            Err(_) => Err(format!("{} did not finish within its bound", args.mode).into()),
        }
    });
    if let Err(error) = outcome {
        eprintln!("qb-bench-amqp {}: {error}", args.mode);
        std::process::exit(1);
    }
}

async fn connect(args: &Args) -> Res<(Connection, Channel)> {
    let url = args.req("url");
    let connection = Connection::connect(url, ConnectionProperties::default()).await?;
    let channel = connection.create_channel().await?;
    Ok((connection, channel))
}

async fn run(args: &Args, timeout: Duration) -> Res<()> {
    match args.mode.as_str() {
        "setup" => setup(args).await,
        "teardown" => teardown(args).await,
        "depth" => {
            let (connection, channel) = connect(args).await?;
            let queue = channel
                .queue_declare(
                    ShortString::from(args.req("queue")),
                    QueueDeclareOptions { passive: true, ..QueueDeclareOptions::default() },
                    FieldTable::default(),
                )
                .await?;
            println!("depth={}", queue.message_count());
            let _ = connection.close(200, ShortString::from("bye")).await;
            Ok(())
        }
        "consume" => consume(args, timeout).await,
        "publish" => publish(args).await,
        "preload" => preload(args).await,
        other => {
            eprintln!("unknown mode `{other}`; see the header of bench/amqp/src/main.rs");
            std::process::exit(2)
        }
    }
}

async fn setup(args: &Args) -> Res<()> {
    let (connection, channel) = connect(args).await?;
    let queue = args.req("queue");
    channel
        .queue_declare(
            ShortString::from(queue),
            QueueDeclareOptions { durable: true, ..QueueDeclareOptions::default() },
            FieldTable::default(),
        )
        .await?;
    if let Some(exchange) = args.get("exchange") {
        channel
            .exchange_declare(
                ShortString::from(exchange),
                ExchangeKind::Topic,
                ExchangeDeclareOptions { durable: true, ..ExchangeDeclareOptions::default() },
                FieldTable::default(),
            )
            .await?;
        channel
            .queue_bind(
                ShortString::from(queue),
                ShortString::from(exchange),
                ShortString::from(args.get("binding").unwrap_or("#")),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await?;
    }
    let _ = connection.close(200, ShortString::from("bye")).await;
    Ok(())
}

async fn teardown(args: &Args) -> Res<()> {
    let (connection, channel) = connect(args).await?;
    if let Some(queue) = args.get("queue") {
        if let Err(error) = channel.queue_delete(ShortString::from(queue), QueueDeleteOptions::default()).await {
            eprintln!("queue {queue}: {error}");
        }
    }
    // A failed delete closes the channel; use a fresh one for the exchange.
    let channel = connection.create_channel().await.unwrap_or(channel);
    if let Some(exchange) = args.get("exchange") {
        if let Err(error) =
            channel.exchange_delete(ShortString::from(exchange), ExchangeDeleteOptions::default()).await
        {
            eprintln!("exchange {exchange}: {error}");
        }
    }
    let _ = connection.close(200, ShortString::from("bye")).await;
    Ok(())
}

/// The value of the payload field "g" (`{"g": 123}`), if any.
fn field_g(body: &[u8]) -> Option<i64> {
    let at = body.windows(4).position(|w| w == b"\"g\":")? + 4;
    let rest = &body[at..];
    let start = rest.iter().position(|b| !b.is_ascii_whitespace())?;
    let digits: Vec<u8> = rest[start..].iter().copied().take_while(|b| b.is_ascii_digit() || *b == b'-').collect();
    std::str::from_utf8(&digits).ok()?.parse().ok()
}

fn rate(arrivals: &[u64], from: usize, to: usize) -> f64 {
    if to <= from || to >= arrivals.len() {
        return 0.0;
    }
    let span = arrivals[to].saturating_sub(arrivals[from]) as f64 / 1e6;
    if span <= 0.0 { 0.0 } else { (to - from) as f64 / span }
}

async fn consume(args: &Args, timeout: Duration) -> Res<()> {
    let expect = args.num("expect", 0) as usize;
    let prefetch = args.num("prefetch", 2000) as u16;
    let keyed = args.flags.contains("keyed");
    let (connection, channel) = connect(args).await?;
    channel.basic_qos(prefetch, BasicQosOptions::default()).await?;
    let mut consumer = channel
        .basic_consume(
            ShortString::from(args.req("queue")),
            ShortString::from("qb-bench-consumer"),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await?;
    if let Some(file) = args.get("ready-file") {
        std::fs::write(file, "ready\n")?;
    }
    let deadline = tokio::time::Instant::now() + timeout;
    let mut arrivals: Vec<u64> = Vec::with_capacity(expect.max(1));
    let mut seen: HashSet<ShortString> = HashSet::with_capacity(expect.max(1));
    let mut duplicates = 0u64;
    let mut last_g: HashMap<ShortString, i64> = HashMap::new();
    let mut out_of_order = 0u64;
    let mut no_g = 0u64;
    let mut timed_out = false;
    let mut unacked = 0u32;
    while arrivals.len() < expect {
        let next = match tokio::time::timeout_at(deadline, consumer.next()).await {
            Ok(Some(delivery)) => delivery?,
            Ok(None) => return Err("the broker cancelled the consumer".into()),
            Err(_) => {
                timed_out = true;
                break;
            }
        };
        arrivals.push(now_us());
        if let Some(id) = next.properties.message_id() {
            if !seen.insert(id.clone()) {
                duplicates += 1;
            }
        }
        if keyed {
            match field_g(&next.data) {
                Some(g) => {
                    let last = last_g.entry(next.routing_key.clone()).or_insert(i64::MIN);
                    if g < *last {
                        out_of_order += 1;
                    }
                    *last = (*last).max(g);
                }
                None => no_g += 1,
            }
        }
        unacked += 1;
        if unacked >= 500 || arrivals.len() >= expect {
            next.acker.ack(BasicAckOptions { multiple: true }).await?;
            unacked = 0;
        }
    }
    let n = arrivals.len();
    let (first, last) = (arrivals.first().copied().unwrap_or(0), arrivals.last().copied().unwrap_or(0));
    println!(
        "count={n} unique={} duplicates={duplicates} out_of_order={out_of_order} no_g={no_g} keys_seen={} seconds={:.4} rate={:.0} rate_first10pct={:.0} rate_9th10pct={:.0} first_us={first} last_us={last} timed_out={}",
        seen.len(),
        last_g.len(),
        last.saturating_sub(first) as f64 / 1e6,
        if n > 1 { rate(&arrivals, 0, n - 1) } else { 0.0 },
        rate(&arrivals, 0, n / 10 - usize::from(n >= 10)),
        rate(&arrivals, n * 8 / 10, (n * 9 / 10).saturating_sub(1)),
        u8::from(timed_out)
    );
    let _ = connection.close(200, ShortString::from("bye")).await;
    Ok(())
}

fn bench_properties(i: u64) -> BasicProperties {
    let mut headers = FieldTable::default();
    headers.insert(ShortString::from("x-topic"), AMQPValue::LongString(LongString::from("order.created")));
    headers.insert(ShortString::from("x-attempt"), AMQPValue::LongInt(1));
    BasicProperties::default()
        .with_message_id(ShortString::from(format!("00000000-0000-4000-8000-{i:012x}")))
        .with_content_type(ShortString::from("application/json"))
        .with_delivery_mode(2)
        .with_headers(headers)
}

/// Waits for one confirm; counts it.
async fn settle(confirm: PublisherConfirm, acked: &mut u64, nacked: &mut u64, returned: &mut u64) -> Res<()> {
    match confirm.await? {
        Confirmation::Ack(None) => *acked += 1,
        Confirmation::Ack(Some(_)) => *returned += 1,
        Confirmation::Nack(_) => *nacked += 1,
        Confirmation::NotRequested => return Err("the channel is not in confirm mode".into()),
    }
    Ok(())
}

async fn publish(args: &Args) -> Res<()> {
    let n = args.num("n", 0);
    let start = args.num("start", 1);
    let inflight = args.num("inflight", 64).max(1) as usize;
    let keys = args.num("keys", 0);
    let exchange = ShortString::from(args.req("exchange"));
    let unkeyed = args.get("unkeyed-routing-key").unwrap_or("none").to_owned();
    let (connection, channel) = connect(args).await?;
    channel.confirm_select(ConfirmSelectOptions::default()).await?;
    let options = BasicPublishOptions { mandatory: true, immediate: false };
    let mut window: VecDeque<PublisherConfirm> = VecDeque::with_capacity(inflight);
    let (mut acked, mut nacked, mut returned) = (0u64, 0u64, 0u64);
    let began = Instant::now();
    for g in start..start + n {
        if window.len() >= inflight {
            let oldest = window.pop_front().expect("a full window");
            settle(oldest, &mut acked, &mut nacked, &mut returned).await?;
        }
        let routing_key = if keys > 0 { format!("key-{}", g % keys) } else { unkeyed.clone() };
        let body = format!("{{\"g\": {g}}}");
        let confirm = channel
            .basic_publish(exchange.clone(), ShortString::from(routing_key), options, body.as_bytes(), bench_properties(g))
            .await?;
        window.push_back(confirm);
    }
    while let Some(confirm) = window.pop_front() {
        settle(confirm, &mut acked, &mut nacked, &mut returned).await?;
    }
    let seconds = began.elapsed().as_secs_f64();
    println!(
        "inflight={inflight} pub_acked={acked} pub_nacked={nacked} pub_returned={returned} pub_seconds={seconds:.4} pub_rate={:.0}",
        n as f64 / seconds
    );
    let _ = connection.close(200, ShortString::from("bye")).await;
    if acked != n {
        return Err(format!("{} of {n} messages were not acknowledged", n - acked).into());
    }
    Ok(())
}

async fn preload(args: &Args) -> Res<()> {
    let n = args.num("n", 0);
    let inflight = args.num("inflight", 256).max(1) as usize;
    let prefix = args.get("prefix").unwrap_or("p").to_owned();
    let queue = ShortString::from(args.req("queue"));
    let (connection, channel) = connect(args).await?;
    channel.confirm_select(ConfirmSelectOptions::default()).await?;
    let options = BasicPublishOptions { mandatory: true, immediate: false };
    let properties = BasicProperties::default()
        .with_content_type(ShortString::from("application/json"))
        .with_delivery_mode(2);
    let mut window: VecDeque<PublisherConfirm> = VecDeque::with_capacity(inflight);
    let (mut acked, mut nacked, mut returned) = (0u64, 0u64, 0u64);
    let began = Instant::now();
    for key in 0..n {
        if window.len() >= inflight {
            let oldest = window.pop_front().expect("a full window");
            settle(oldest, &mut acked, &mut nacked, &mut returned).await?;
        }
        // The body of bench/inbox/post.lua (thread 1), byte for byte.
        let body = format!(
            "{{\"id\":\"{prefix}-1-{key}\",\"type\":\"created\",\"data\":{{\"amount\":1234,\"currency\":\"EUR\",\"customer\":\"c-{}\"}}}}",
            key % 1000
        );
        let confirm = channel
            .basic_publish(ShortString::from(""), queue.clone(), options, body.as_bytes(), properties.clone())
            .await?;
        window.push_back(confirm);
    }
    while let Some(confirm) = window.pop_front() {
        settle(confirm, &mut acked, &mut nacked, &mut returned).await?;
    }
    let seconds = began.elapsed().as_secs_f64();
    println!("preloaded={acked} nacked={nacked} returned={returned} seconds={seconds:.2} rate={:.0}", n as f64 / seconds);
    let _ = connection.close(200, ShortString::from("bye")).await;
    if acked != n {
        return Err(format!("{} of {n} messages were not acknowledged", n - acked).into());
    }
    Ok(())
}
