//! Replay: moves the `sent` and `dead` outbox rows a filter selects back to `pending`.
//!
//! ```text
//!  page of candidates (≤ batch, id order, after the cursor) ──► keep the rows whose topic routes to
//!  the destination (when one is asked) ──► one short UPDATE of those ids ──► next page
//! ```
//!
//! The selection is walked in pages so a replay of a million rows never holds one long statement,
//! never locks the table and never loads the selection into memory. The destination filter is a
//! routing decision: it runs here, on each page, with the router the dispatcher uses, so "the rows
//! that go to X" means exactly what the dispatcher would do with them.

#[cfg(test)]
mod tests;

use async_trait::async_trait;
use queuebox_domain::router::Router;
use queuebox_ports::replay::{Replay, ReplayError, ReplayFilter, ReplaySelection, ReplayStore};
use std::sync::Arc;
use uuid::Uuid;

/// Rows per page when the wiring gives no other size: large enough that a replay costs few round
/// trips, small enough that each UPDATE is a short transaction.
pub const DEFAULT_REPLAY_BATCH: u32 = 1_000;

/// The replay use case over a store and the configured routes.
pub struct ReplayService {
    store: Arc<dyn ReplayStore>,
    router: Router,
    batch_size: u32,
}

impl ReplayService {
    /// A replay over `store`, resolving destinations with `router` (the dispatcher's routes), moving
    /// at most `batch_size` rows per statement.
    pub fn new(store: Arc<dyn ReplayStore>, router: Router, batch_size: u32) -> Self {
        Self {
            store,
            router,
            batch_size: batch_size.max(1),
        }
    }

    /// True when the first route matching `topic` sends it to `destination`.
    fn routes_to(&self, topic: &str, destination: &str) -> bool {
        self.router
            .route(topic)
            .is_some_and(|found| found.destination == destination)
    }

    async fn move_all(&self, filter: &ReplayFilter) -> Result<u64, ReplayError> {
        let selection = ReplaySelection {
            ids: filter.ids.clone(),
            topic: filter.topic.clone(),
            topics: filter.topics.clone(),
            created_after: filter.created_after,
            created_before: filter.created_before,
        };
        let mut moved = 0u64;
        let mut after: Option<Uuid> = None;
        loop {
            let page = self
                .store
                .replay_candidates(&selection, after, self.batch_size)
                .await
                .map_err(|source| ReplayError::Store { moved, source })?;
            let Some(last) = page.last() else {
                break;
            };
            after = Some(last.id);
            let full = page.len() >= self.batch_size as usize;
            let ids: Vec<Uuid> = page
                .iter()
                .filter(|row| {
                    filter
                        .destination
                        .as_deref()
                        .is_none_or(|destination| self.routes_to(&row.topic, destination))
                })
                .map(|row| row.id)
                .collect();
            if !ids.is_empty() {
                moved += self
                    .store
                    .move_to_pending(&ids)
                    .await
                    .map_err(|source| ReplayError::Store { moved, source })?;
            }
            if !full {
                break;
            }
        }
        Ok(moved)
    }
}

#[async_trait]
impl Replay for ReplayService {
    async fn replay(&self, filter: &ReplayFilter) -> Result<u64, ReplayError> {
        if filter.is_empty() {
            return Err(ReplayError::NoFilter);
        }
        // The log line is the record of the replay: an operator who lost the answer finds the
        // filter and the count here.
        let filter_text = serde_json::to_string(filter).unwrap_or_default();
        match self.move_all(filter).await {
            Ok(moved) => {
                tracing::info!(filter = %filter_text, moved, "outbox rows replayed");
                Ok(moved)
            }
            Err(error) => {
                tracing::error!(filter = %filter_text, %error, "outbox replay failed");
                Err(error)
            }
        }
    }
}
