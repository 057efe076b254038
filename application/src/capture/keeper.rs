//! Keeps the handled position where a restart finds it: `offsets.dat` at most once per
//! `offsets_every`, the `queuebox_capture_state` row and the lag gauge every `record_every`, and
//! `offsets.dat` once more when the stream ends. It runs beside the stream, because a flush to disk
//! can take tens of milliseconds, and a wake-up waiting behind it was the slowest part of a
//! commit's way to delivery.

use super::files::StateFiles;
use crate::telemetry::CaptureMetrics;
use queuebox_domain::capture::Lsn;
use queuebox_ports::capture::CaptureStateStore;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::MissedTickBehavior;

/// What the keeper writes to and how often.
pub(super) struct PositionKeeper {
    pub(super) files: StateFiles,
    pub(super) state: Arc<dyn CaptureStateStore>,
    pub(super) metrics: Arc<CaptureMetrics>,
    pub(super) identity: String,
    pub(super) owner_host: String,
    pub(super) slot: String,
    pub(super) offsets_every: Duration,
    pub(super) record_every: Duration,
}

impl PositionKeeper {
    /// Runs until the sender of `positions` is dropped, then writes the last position and returns.
    ///
    /// # Errors
    /// The text of a failed `offsets.dat` write: the stream cannot keep its position, so it ends.
    pub(super) async fn run(
        self,
        mut positions: watch::Receiver<Option<Lsn>>,
    ) -> Result<(), String> {
        let mut in_files = *positions.borrow();
        let mut in_record = in_files;
        let mut offsets_tick = tokio::time::interval(self.offsets_every);
        let mut record_tick = tokio::time::interval(self.record_every);
        offsets_tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        record_tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                changed = positions.changed() => {
                    if changed.is_err() {
                        let last = *positions.borrow();
                        return self.write_offset(last, &mut in_files).await;
                    }
                }
                _ = offsets_tick.tick() => {
                    let position = *positions.borrow();
                    self.write_offset(position, &mut in_files).await?;
                }
                _ = record_tick.tick() => {
                    let position = *positions.borrow();
                    self.record(position, &mut in_record).await;
                }
            }
        }
    }

    async fn write_offset(
        &self,
        position: Option<Lsn>,
        written: &mut Option<Lsn>,
    ) -> Result<(), String> {
        if let Some(position) = position.filter(|p| *written != Some(*p)) {
            self.files.write_offset(position).await?;
            *written = Some(position);
        }
        Ok(())
    }

    /// The row is for diagnostics and the reset steps: a failed write is tried again at the next
    /// tick rather than ending a working stream.
    async fn record(&self, position: Option<Lsn>, recorded: &mut Option<Lsn>) {
        if let Some(position) = position.filter(|p| *recorded != Some(*p)) {
            match self
                .state
                .record_position(&self.identity, position, &self.owner_host)
                .await
            {
                Ok(()) => *recorded = Some(position),
                Err(error) => tracing::warn!(%error, "recording the capture position failed"),
            }
        }
        match self.state.slot_lag(&self.slot).await {
            Ok(Some(lag)) => self.metrics.lag_bytes.set(lag as f64),
            Ok(None) => {}
            Err(error) => tracing::debug!(%error, "reading the capture lag failed"),
        }
    }
}
