//! The driver against a scripted client and a scripted pipeline (no broker): the rules every
//! source kind shares. The same rules run against each real broker in the source conformance
//! suite (`queuebox-conformance`).

#![allow(clippy::unwrap_used)]

use super::*;
use async_trait::async_trait;
use queuebox_ports::backoff::Backoff;
use queuebox_ports::ingest::{Ingested, Rejection};
use queuebox_ports::source::SourceFailure;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use tokio::sync::oneshot;
use uuid::Uuid;

type Script<T> = Arc<Mutex<VecDeque<T>>>;
/// One scripted message: its token, its body, its order key.
type Message = (u32, &'static str, Option<&'static str>);

#[derive(Clone, Default)]
struct Client {
    connects: Script<Result<(), String>>,
    batches: Script<Result<Vec<Message>, String>>,
    settled: Arc<Mutex<Vec<(u32, Settle, Instant)>>>,
    closed: Arc<Mutex<bool>>,
    /// Messages handed out so far: the next batch comes once they are all settled, as a broker
    /// redelivers a message only once it is handed back.
    handed: Arc<Mutex<usize>>,
    /// The plan's `whole_batches`.
    whole: bool,
}

#[async_trait]
impl SourceClient for Client {
    type Token = u32;

    fn plan(&self) -> SourcePlan {
        SourcePlan {
            kind: "fake",
            source: "s".into(),
            consumes: "queue `q`".into(),
            batch: 10,
            reconnect: Backoff::new(Duration::from_millis(100), Duration::from_millis(400)),
            retry: Backoff::new(Duration::from_millis(200), Duration::from_secs(5)),
            drain_timeout: Duration::from_secs(2),
            whole_batches: self.whole,
            check_every: None,
        }
    }

    async fn connect(&mut self) -> Result<(), SourceFailure> {
        let next = self.connects.lock().unwrap().pop_front();
        next.unwrap_or(Ok(())).map_err(SourceFailure::new)
    }

    async fn receive(&self, _max: usize) -> Result<Vec<Delivery<u32>>, SourceFailure> {
        while self.settled.lock().unwrap().len() < *self.handed.lock().unwrap() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let next = self.batches.lock().unwrap().pop_front();
        if let Some(Ok(batch)) = &next {
            *self.handed.lock().unwrap() += batch.len();
        }
        match next {
            None => std::future::pending().await,
            Some(Err(reason)) => Err(SourceFailure::new(reason)),
            Some(Ok(batch)) => Ok(batch
                .into_iter()
                .map(|(token, body, order)| Delivery {
                    token,
                    received: Received::new(vec![], body.as_bytes().to_vec()),
                    order_key: order.map(str::to_owned),
                })
                .collect()),
        }
    }

    async fn settle(&self, settled: Vec<(u32, Settle)>) {
        let now = Instant::now();
        let mut log = self.settled.lock().unwrap();
        log.extend(settled.into_iter().map(|(t, s)| (t, s, now)));
    }

    async fn close(&mut self) {
        *self.closed.lock().unwrap() = true;
    }
}

/// Answers per body from a script (Stored once the script is empty); the key of a body is the
/// part before `#`; each call takes `delay`.
#[derive(Default)]
struct Pipeline {
    answers: Mutex<HashMap<String, VecDeque<IngestOutcome>>>,
    calls: Mutex<Vec<(String, Instant)>>,
    delay: Duration,
}

impl Pipeline {
    fn answering(body: &str, answers: impl IntoIterator<Item = IngestOutcome>) -> Self {
        let pipeline = Self::default();
        pipeline
            .answers
            .lock()
            .unwrap()
            .insert(body.into(), answers.into_iter().collect());
        pipeline
    }
}

#[async_trait]
impl Ingest for Pipeline {
    async fn ingest(&self, _source: &str, received: Received) -> Ingested {
        let body = String::from_utf8(received.body).unwrap();
        self.calls
            .lock()
            .unwrap()
            .push((body.clone(), Instant::now()));
        tokio::time::sleep(self.delay).await;
        let answer = self
            .answers
            .lock()
            .unwrap()
            .get_mut(&body)
            .and_then(VecDeque::pop_front);
        Ingested::early(answer.unwrap_or(IngestOutcome::Stored { id: Uuid::nil() }))
    }

    fn idempotency_key(&self, _source: &str, received: &Received) -> Option<String> {
        let body = std::str::from_utf8(&received.body).ok()?;
        body.split_once('#').map(|(key, _)| key.to_owned())
    }
}

struct Running {
    stop: Option<oneshot::Sender<()>>,
    health: SharedComponent,
    done: tokio::task::JoinHandle<()>,
}

fn start(client: &Client, pipeline: Arc<Pipeline>) -> Running {
    let driver = SourceDriver::new(client.clone(), pipeline);
    let health = driver.health();
    let (stop, stopped) = oneshot::channel::<()>();
    let done = tokio::spawn(driver.run(async move {
        let _ = stopped.await;
    }));
    Running {
        stop: Some(stop),
        health,
        done,
    }
}

impl Running {
    async fn stop(mut self) -> SharedComponent {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.done.await.unwrap();
        self.health
    }
}

async fn settled_count(client: &Client, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while client.settled.lock().unwrap().len() < n {
        assert!(Instant::now() < deadline, "{n} settlements not seen");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(start_paused = true)]
async fn stored_messages_are_acknowledged_after_the_store_and_health_ends_stopped() {
    let client = Client::default();
    client
        .batches
        .lock()
        .unwrap()
        .push_back(Ok(vec![(1, "a", None), (2, "b", None)]));
    let pipeline = Arc::new(Pipeline {
        delay: Duration::from_millis(50),
        ..Pipeline::default()
    });
    let started = Instant::now();
    let running = start(&client, Arc::clone(&pipeline));
    settled_count(&client, 2).await;
    assert_eq!(running.health.state(), Ok(()));
    let settled = client.settled.lock().unwrap().clone();
    assert!(settled.iter().all(|s| s.1 == Settle::Ack), "{settled:?}");
    assert!(
        settled[0].2 >= started + Duration::from_millis(50),
        "acknowledged only after the store returned"
    );
    let health = running.stop().await;
    assert_eq!(health.state(), Err(STOPPED.to_owned()));
    assert!(*client.closed.lock().unwrap());
}

#[tokio::test(start_paused = true)]
async fn a_failed_store_is_handed_back_after_the_growing_retry_delay() {
    let client = Client::default();
    for _ in 0..3 {
        client
            .batches
            .lock()
            .unwrap()
            .push_back(Ok(vec![(1, "x", None)]));
    }
    let failed = IngestOutcome::Rejected(Rejection::StorageFailed);
    let pipeline = Arc::new(Pipeline::answering("x", [failed.clone(), failed]));
    let running = start(&client, pipeline);
    settled_count(&client, 3).await;
    let settled = client.settled.lock().unwrap().clone();
    assert_eq!(
        settled.iter().map(|s| s.1).collect::<Vec<_>>(),
        [Settle::Retry, Settle::Retry, Settle::Ack]
    );
    let first_gap = settled[1].2 - settled[0].2;
    assert!(
        first_gap >= Duration::from_millis(400),
        "the second wait doubles: {first_gap:?}"
    );
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_rate_limited_store_waits_for_the_delay_the_limit_asked_for() {
    let client = Client::default();
    client
        .batches
        .lock()
        .unwrap()
        .push_back(Ok(vec![(1, "x", None)]));
    let limited = IngestOutcome::RateLimited {
        retry_after: Duration::from_millis(1500),
    };
    let pipeline = Arc::new(Pipeline::answering("x", [limited]));
    let started = Instant::now();
    let running = start(&client, pipeline);
    settled_count(&client, 1).await;
    let settled = client.settled.lock().unwrap().clone();
    assert_eq!(settled[0].1, Settle::Retry);
    assert!(
        settled[0].2 >= started + Duration::from_millis(1500),
        "{:?}",
        settled[0].2 - started
    );
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn messages_of_one_key_are_stored_in_batch_order_and_others_side_by_side() {
    let client = Client::default();
    client.batches.lock().unwrap().push_back(Ok(vec![
        (1, "k#1", None),
        (2, "other", None),
        (3, "k#2", None),
        (4, "p1", Some("partition-1")),
        (5, "p2", Some("partition-1")),
    ]));
    let pipeline = Arc::new(Pipeline {
        delay: Duration::from_millis(100),
        ..Pipeline::default()
    });
    let running = start(&client, Arc::clone(&pipeline));
    settled_count(&client, 5).await;
    let calls = pipeline.calls.lock().unwrap().clone();
    let at = |body: &str| calls.iter().find(|c| c.0 == body).unwrap().1;
    assert!(
        at("k#2") >= at("k#1") + Duration::from_millis(100),
        "k#2 waits for k#1"
    );
    assert!(
        at("p2") >= at("p1") + Duration::from_millis(100),
        "one order key, one after the other"
    );
    assert!(
        at("other") < at("k#1") + Duration::from_millis(100),
        "another key does not wait"
    );
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn health_goes_down_with_the_cause_and_comes_back_after_a_reconnect() {
    let client = Client::default();
    client
        .connects
        .lock()
        .unwrap()
        .extend([Err("queue `q` does not exist".to_owned()), Ok(())]);
    client.batches.lock().unwrap().extend([
        Err("the connection closed".to_owned()),
        Ok(vec![(1, "a", None)]),
    ]);
    let running = start(&client, Arc::new(Pipeline::default()));
    assert_eq!(running.health.state(), Err(NOT_CONSUMING_YET.to_owned()));
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(
        running.health.state(),
        Err("queue `q` does not exist".to_owned())
    );
    settled_count(&client, 1).await;
    assert_eq!(running.health.state(), Ok(()));
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn the_stop_drains_the_batch_and_hands_back_what_outlives_the_drain_bound() {
    let client = Client::default();
    client
        .batches
        .lock()
        .unwrap()
        .push_back(Ok(vec![(1, "quick", None)]));
    let pipeline = Arc::new(Pipeline {
        delay: Duration::from_millis(500),
        ..Pipeline::default()
    });
    let running = start(&client, Arc::clone(&pipeline));
    tokio::time::sleep(Duration::from_millis(10)).await;
    let health = running.stop().await;
    assert_eq!(
        client
            .settled
            .lock()
            .unwrap()
            .iter()
            .map(|s| (s.0, s.1))
            .collect::<Vec<_>>(),
        [(1, Settle::Ack)],
        "the message being stored at the stop finished and was acknowledged"
    );
    assert_eq!(health.state(), Err(STOPPED.to_owned()));

    let client = Client::default();
    client
        .batches
        .lock()
        .unwrap()
        .push_back(Ok(vec![(1, "slow", None)]));
    let pipeline = Arc::new(Pipeline {
        delay: Duration::from_secs(60),
        ..Pipeline::default()
    });
    let running = start(&client, pipeline);
    tokio::time::sleep(Duration::from_millis(10)).await;
    running.stop().await;
    assert_eq!(
        client
            .settled
            .lock()
            .unwrap()
            .iter()
            .map(|s| (s.0, s.1))
            .collect::<Vec<_>>(),
        [(1, Settle::Retry)],
        "a message still being stored at the drain bound is handed back"
    );
}

#[tokio::test(start_paused = true)]
async fn whole_batches_are_settled_in_one_call_in_the_order_received() {
    for whole in [false, true] {
        let client = Client {
            whole,
            ..Client::default()
        };
        client.batches.lock().unwrap().push_back(Ok(vec![
            (1, "first", Some("p")),
            (2, "second", Some("p")),
            (3, "third", None),
        ]));
        let pipeline = Arc::new(Pipeline {
            delay: Duration::from_millis(100),
            ..Pipeline::default()
        });
        let running = start(&client, pipeline);
        settled_count(&client, 3).await;
        let settled = client.settled.lock().unwrap().clone();
        let tokens: Vec<u32> = settled.iter().map(|s| s.0).collect();
        let at_once = settled.iter().all(|s| s.2 == settled[0].2);
        if whole {
            assert_eq!(tokens, [1, 2, 3], "{settled:?}");
            assert!(at_once, "one settle call for the batch: {settled:?}");
        } else {
            assert!(
                !at_once,
                "each message settled when it is decided: {settled:?}"
            );
        }
        running.stop().await;
    }
}
