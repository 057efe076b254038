//! The scripted ingest recorder: an in-process stand-in for the ingest pipeline (our own
//! [`Ingest`] port, not a broker) that records every call and answers from a script, then by
//! storing into a [`Table`] with the inbox's unique key (the `id` field of a JSON body). The
//! source conformance suite and every source adapter's own tests use it, so "stored once",
//! "acknowledged after the store" and "handed back after a failed store" are observable without a
//! database.

use crate::source::wait_until;
use async_trait::async_trait;
use queuebox_ports::ingest::{Ingest, IngestOutcome, Ingested, Received, Rejection};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::time::Instant;

/// Committed rows: `(key, body)` in commit order, one per key.
pub type Rows = Vec<(String, Vec<u8>)>;

/// The rows a recorder committed.
#[derive(Debug, Clone, Default)]
pub struct Table(Arc<Mutex<Rows>>);

impl Table {
    /// The keys of the committed rows, in commit order.
    pub fn keys(&self) -> Vec<String> {
        self.rows().into_iter().map(|(key, _)| key).collect()
    }

    /// The committed rows.
    pub fn rows(&self) -> Rows {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Commits `body` under `key` unless the key is taken; true when it was stored.
    fn insert(&self, key: String, body: Vec<u8>) -> bool {
        let mut rows = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if rows.iter().any(|(k, _)| *k == key) {
            return false;
        }
        rows.push((key, body));
        true
    }
}

/// The key a recorder stores `body` under: its JSON `id` field, else the body's text.
pub fn key_of(body: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("id").and_then(|id| id.as_str().map(str::to_owned)))
        .unwrap_or_else(|| format!("raw:{}", String::from_utf8_lossy(body)))
}

/// A scripted ingest pipeline: each call is recorded; the answer is the next scripted outcome,
/// or else the store into its [`Table`] (`Stored`, `Duplicate` for a taken key, `StoredDead` for
/// a body that is not JSON). With a gate, each call waits after its store until the test lets it
/// go, so "committed but not answered" can be held. With a store time, each call takes that long,
/// so calls of different keys overlap.
#[derive(Default)]
pub struct Recorder {
    calls: Mutex<Vec<(String, Received, Instant)>>,
    script: Mutex<VecDeque<IngestOutcome>>,
    table: Table,
    gate: Option<Semaphore>,
    store_time: Duration,
    in_flight: AtomicUsize,
    most_in_flight: AtomicUsize,
    returned: AtomicUsize,
}

impl Recorder {
    /// A recorder answering `script` first, then storing.
    pub fn answering(script: impl IntoIterator<Item = IngestOutcome>) -> Arc<Self> {
        Arc::new(Self {
            script: Mutex::new(script.into_iter().collect()),
            ..Self::default()
        })
    }

    /// A recorder answering `script` first, then storing, whose every call takes `store_time`.
    pub fn taking(
        store_time: Duration,
        script: impl IntoIterator<Item = IngestOutcome>,
    ) -> Arc<Self> {
        Arc::new(Self {
            script: Mutex::new(script.into_iter().collect()),
            store_time,
            ..Self::default()
        })
    }

    /// A recorder storing into `table` (shared with another recorder).
    pub fn storing_into(table: Table) -> Arc<Self> {
        Arc::new(Self {
            table,
            ..Self::default()
        })
    }

    /// A recorder whose calls wait at a gate, after the store, until [`Recorder::open`].
    pub fn gated() -> Arc<Self> {
        Self::gated_into(Table::default())
    }

    /// A gated recorder storing into `table`.
    pub fn gated_into(table: Table) -> Arc<Self> {
        Arc::new(Self {
            table,
            gate: Some(Semaphore::new(0)),
            ..Self::default()
        })
    }

    /// Lets `calls` more calls through the gate.
    pub fn open(&self, calls: usize) {
        if let Some(gate) = &self.gate {
            gate.add_permits(calls);
        }
    }

    /// The messages received so far, in call order.
    pub fn calls(&self) -> Vec<Received> {
        self.lock_calls()
            .iter()
            .map(|(_, r, _)| r.clone())
            .collect()
    }

    /// The body of each call as text (lossy), in call order.
    pub fn bodies(&self) -> Vec<String> {
        self.lock_calls()
            .iter()
            .map(|(_, r, _)| String::from_utf8_lossy(&r.body).into_owned())
            .collect()
    }

    /// The source name of each call, in call order.
    pub fn sources(&self) -> Vec<String> {
        self.lock_calls()
            .iter()
            .map(|(s, _, _)| s.clone())
            .collect()
    }

    /// When each call started.
    pub fn call_times(&self) -> Vec<Instant> {
        self.lock_calls().iter().map(|(_, _, at)| *at).collect()
    }

    /// How many calls were made.
    pub fn call_count(&self) -> usize {
        self.lock_calls().len()
    }

    /// How many calls have returned.
    pub fn returned(&self) -> usize {
        self.returned.load(Ordering::SeqCst)
    }

    /// The calls in progress now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// The most calls in progress at once so far.
    pub fn most_in_flight(&self) -> usize {
        self.most_in_flight.load(Ordering::SeqCst)
    }

    /// The table the recorder stores into.
    pub fn table(&self) -> &Table {
        &self.table
    }

    /// Waits until `n` calls were made.
    pub async fn wait_calls(&self, n: usize) {
        wait_until(&format!("{n} ingest calls"), || async {
            self.call_count() >= n
        })
        .await;
    }

    fn lock_calls(&self) -> std::sync::MutexGuard<'_, Vec<(String, Received, Instant)>> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl Ingest for Recorder {
    async fn ingest(&self, source: &str, received: Received) -> Ingested {
        self.lock_calls()
            .push((source.to_owned(), received.clone(), Instant::now()));
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_in_flight.fetch_max(now, Ordering::SeqCst);
        if !self.store_time.is_zero() {
            tokio::time::sleep(self.store_time).await;
        }
        let scripted = self
            .script
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front();
        let outcome = scripted.unwrap_or_else(|| {
            let key = key_of(&received.body);
            let json = serde_json::from_slice::<serde_json::Value>(&received.body).is_ok();
            if !self.table.insert(key, received.body.clone()) {
                IngestOutcome::Duplicate
            } else if json {
                IngestOutcome::Stored {
                    id: uuid::Uuid::new_v4(),
                }
            } else {
                IngestOutcome::StoredDead {
                    id: uuid::Uuid::new_v4(),
                    reason: Rejection::InvalidJson.to_string(),
                }
            }
        });
        if let Some(gate) = &self.gate
            && let Ok(permit) = gate.acquire().await
        {
            permit.forget();
        }
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.returned.fetch_add(1, Ordering::SeqCst);
        Ingested::early(outcome)
    }

    fn idempotency_key(&self, _source: &str, received: &Received) -> Option<String> {
        Some(key_of(&received.body))
    }
}
