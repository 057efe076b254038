//! The capture runner of the replica that owns an identity: take the owner lock, check the
//! database, reconcile the recorded state, stream the log, and wake delivery on every committed
//! insert. Any failure retries with a backoff from one second to thirty, waking delivery on every
//! attempt; a fault that needs an operator stops capture and leaves delivery polling at the
//! reconciliation interval.

use super::files::StateFiles;
use super::health::CaptureHealth;
use super::keeper::PositionKeeper;
use super::wake::DeliveryWake;
use crate::lifecycle::StopSignal;
use crate::telemetry::CaptureMetrics;
use queuebox_domain::capture::{
    CaptureScope, FilesState, Lsn, Plan, Recorded, reconcile, wake_channel,
};
use queuebox_ports::capture::{
    CaptureError, CapturePorts, CaptureSession, ChangeEvent, ChangeStream, WakeChannel,
};
use queuebox_ports::health::HealthCheck;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

/// The first wait after a failed attempt.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait between attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A stream that ran this long counts as healthy: the next failure starts the backoff over.
const HEALTHY_RUN: Duration = Duration::from_secs(30);
/// How long a stop waits for the last position to be written.
const KEEPER_BOUND: Duration = Duration::from_secs(5);
/// How long the claim loop must report a backlog before capture stops streaming. While it lasts, a
/// wake-up changes nothing, and the walsender streaming the backlog's claims and finishes cost the
/// database about a tenth of a 200k drain's throughput (`bench/RESULTS.md`).
const PAUSE_AFTER: Duration = Duration::from_secs(1);
/// How often a paused capture moves the slot to the log end, so the server can release the log a
/// long backlog writes. Each move reads the log again from the slot's restart point, which the
/// server moves only every 15 s or so: moving more often would read the same log many times.
const PAUSED_SKIP_EVERY: Duration = Duration::from_secs(30);
/// How long a pause waits for the ended stream to let go of the owner lock and the slot.
const HANDOVER_BOUND: Duration = Duration::from_secs(5);
/// The wait between tries of the handover.
const HANDOVER_STEP: Duration = Duration::from_millis(20);
/// How often delivery is woken while capture skips the log at the end of a backlog: rows that
/// commit meanwhile are claimed as with short polling.
const SKIP_WAKE_EVERY: Duration = Duration::from_millis(50);

/// The settings of one capture owner.
#[derive(Debug, Clone)]
pub struct CaptureOptions {
    /// `outbox.capture.identity`.
    pub identity: String,
    /// What the recorded position depends on.
    pub scope: CaptureScope,
    /// `outbox.capture.stateDirectory`.
    pub state_directory: std::path::PathBuf,
    /// Who owns the identity, recorded for diagnostics (host and process).
    pub owner_host: String,
    /// How often the handled position goes to `offsets.dat` (when it moved).
    pub offsets_every: Duration,
    /// How often it goes to `queuebox_capture_state` and the lag gauge is read.
    pub record_every: Duration,
}

/// How one attempt ended.
enum Ended {
    /// Shutdown.
    Stopping,
    /// A fault an operator must resolve; no retry.
    NeedsDecision(String),
    /// Another process owns the identity: reported as stopped, and the lock is tried again every
    /// thirty seconds. Taking it over later is safe, because the state files of this replica
    /// then go through the same reconciliation (a replica without the owner's files stops
    /// there); and a restart that meets its own crashed session's lock, which the server has not
    /// yet seen end, gets capture back without an operator.
    OwnedElsewhere(String),
    /// A failure worth retrying; `ran_well` when the stream had been healthy a while.
    Failed { error: String, ran_well: bool },
}

/// How following a stream ended.
enum Followed {
    /// The attempt is over.
    Ended(Ended),
    /// A backlog lasted [`PAUSE_AFTER`]: the stream was closed after everything up to the
    /// position was handled and written.
    Paused(Option<Lsn>),
}

impl From<CaptureError> for Ended {
    fn from(error: CaptureError) -> Self {
        Ended::Failed {
            error: error.to_string(),
            ran_well: false,
        }
    }
}

/// Capture for the replica that owns the identity.
pub struct CaptureRunner {
    ports: CapturePorts,
    options: CaptureOptions,
    files: StateFiles,
    wake: DeliveryWake,
    health: Arc<CaptureHealth>,
    metrics: Arc<CaptureMetrics>,
    /// Rung for each committed insert; one task turns it into notices to the other replicas, so a
    /// burst of commits costs one notice in flight and at most one queued.
    announce: Arc<Notify>,
}

impl CaptureRunner {
    /// A runner that wakes `wake`.
    pub fn new(ports: CapturePorts, options: CaptureOptions, wake: DeliveryWake) -> Self {
        let metrics = Arc::new(CaptureMetrics::new());
        Self {
            files: StateFiles::new(options.state_directory.clone()),
            health: Arc::new(CaptureHealth::new(Arc::clone(&metrics))),
            ports,
            options,
            wake,
            metrics,
            announce: Arc::new(Notify::new()),
        }
    }

    /// The advisory `outbox-capture` health component.
    pub fn health_check(&self) -> Arc<dyn HealthCheck> {
        Arc::clone(&self.health) as Arc<dyn HealthCheck>
    }

    /// Runs until `stop` fires.
    pub async fn run(self, mut stop: StopSignal) {
        let announcer = tokio::spawn(announce_wakes(
            Arc::clone(&self.ports.wakes),
            wake_channel(&self.options.identity),
            Arc::clone(&self.announce),
        ));
        let mut backoff = FIRST_BACKOFF;
        // Whether this process held the owner lock before: a refusal then is most likely its own
        // previous session, which the server has not seen end yet.
        let mut held_before = false;
        loop {
            // Every attempt wakes delivery: rows committed while capture was down are claimed now,
            // not at the next reconciliation pass.
            self.wake.wake();
            self.metrics.start_wakes.increment(1);
            let ended = self.attempt(&mut held_before, &mut stop).await;
            match ended {
                Ended::Stopping => break,
                Ended::NeedsDecision(reason) => {
                    tracing::error!(
                        identity = %self.options.identity,
                        %reason,
                        "capture stopped; delivery continues through SQL at the reconciliation interval"
                    );
                    self.health.stopped(reason);
                    stop.stopped().await;
                    break;
                }
                Ended::OwnedElsewhere(reason) => {
                    tracing::warn!(identity = %self.options.identity, %reason, "capture not started");
                    self.health.stopped(reason);
                    tokio::select! {
                        _ = tokio::time::sleep(MAX_BACKOFF) => {}
                        _ = stop.stopped() => break,
                    }
                }
                Ended::Failed { error, ran_well } => {
                    if ran_well {
                        backoff = FIRST_BACKOFF;
                    }
                    tracing::warn!(
                        identity = %self.options.identity,
                        %error,
                        retry_in_ms = backoff.as_millis() as u64,
                        "capture failed; delivery continues through SQL"
                    );
                    self.health.retrying(error);
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = stop.stopped() => break,
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
        announcer.abort();
        tracing::info!(identity = %self.options.identity, "capture stopped");
    }

    /// One attempt: connect, check, reconcile, then stream until the stream breaks or `stop`
    /// fires.
    async fn attempt(&self, held_before: &mut bool, stop: &mut StopSignal) -> Ended {
        let (stream, from) = tokio::select! {
            started = self.start(held_before) => match started {
                Ok(started) => started,
                Err(ended) => return ended,
            },
            // The session and its lock end when the unfinished start is dropped.
            _ = stop.stopped() => return Ended::Stopping,
        };
        tracing::info!(identity = %self.options.identity, slot = %self.options.scope.slot, from = ?from.map(|p| p.to_string()), "capture streaming");
        let (mut stream, mut from) = (stream, from);
        loop {
            self.health.streaming();
            // Streaming began: rows committed before it are not in the stream, so claim them now.
            self.wake.wake();
            self.metrics.start_wakes.increment(1);
            let handled = match self.follow(stream, from, stop).await {
                Followed::Ended(ended) => return ended,
                Followed::Paused(handled) => handled,
            };
            (stream, from) = match self.sit_out_backlog(handled, stop).await {
                Ok(resumed) => resumed,
                Err(ended) => return ended,
            };
            tracing::debug!(identity = %self.options.identity, from = ?from.map(|p| p.to_string()), "capture streaming again after a backlog");
        }
    }

    /// Waits out a backlog without a stream, holding the owner lock through an idle session, and
    /// moves the slot past the backlog's log before streaming again: none of that log can wake
    /// anything that the claims of the backlog do not take anyway, and a claim after the new
    /// stream starts takes what committed before it.
    async fn sit_out_backlog(
        &self,
        handled: Option<Lsn>,
        stop: &mut StopSignal,
    ) -> Result<(Box<dyn ChangeStream>, Option<Lsn>), Ended> {
        self.health.paused();
        tracing::debug!(identity = %self.options.identity, "capture paused while delivery works off a backlog");
        // The other replicas hear of no insert during the pause; one notice now lets an idle one
        // join the backlog, and its full claims then keep it busy without further notices.
        self.announce.notify_one();
        let mut session = tokio::select! {
            session = self.reopen(handled) => session?,
            _ = stop.stopped() => return Err(Ended::Stopping),
        };
        let mut skip_tick =
            tokio::time::interval_at(Instant::now() + PAUSED_SKIP_EVERY, PAUSED_SKIP_EVERY);
        loop {
            tokio::select! {
                () = self.wake.backlog_ended() => break,
                _ = skip_tick.tick() => {
                    tokio::select! {
                        skipped = self.skip(session.as_mut()) => { skipped?; }
                        _ = stop.stopped() => return Err(Ended::Stopping),
                    }
                }
                _ = stop.stopped() => return Err(Ended::Stopping),
            }
        }
        // Rows may commit while the slot moves; short wake-ups claim them meanwhile. A stop does
        // not wait for a long move to end.
        let skipped = {
            let skip = self.skip(session.as_mut());
            tokio::pin!(skip);
            let mut wakes = tokio::time::interval(SKIP_WAKE_EVERY);
            loop {
                tokio::select! {
                    skipped = &mut skip => break skipped?,
                    _ = wakes.tick() => self.wake.wake(),
                    _ = stop.stopped() => return Err(Ended::Stopping),
                }
            }
        };
        let stream = session.stream().await?;
        Ok((stream, Some(skipped)))
    }

    /// A new session holding the owner lock, once the closed stream's session has let it go.
    async fn reopen(&self, handled: Option<Lsn>) -> Result<Box<dyn CaptureSession>, Ended> {
        let deadline = Instant::now() + HANDOVER_BOUND;
        loop {
            let mut session = self.ports.connector.open(handled).await?;
            if session.claim_ownership().await? {
                return Ok(session);
            }
            if Instant::now() >= deadline {
                return Err(Ended::Failed {
                    error: format!(
                        "the owner lock of capture identity {} was not free {} s after the stream paused",
                        self.options.identity,
                        HANDOVER_BOUND.as_secs()
                    ),
                    ran_well: false,
                });
            }
            tokio::time::sleep(HANDOVER_STEP).await;
        }
    }

    /// Moves the slot to the log end and keeps that position as handled. The first move after a
    /// pause may meet the slot still held by the ending stream, so a refusal is tried again for a
    /// while.
    async fn skip(&self, session: &mut dyn CaptureSession) -> Result<Lsn, Ended> {
        let deadline = Instant::now() + HANDOVER_BOUND;
        let position = loop {
            match session.skip_to_log_end().await {
                Ok(position) => break position,
                Err(CaptureError::Setup(error)) if Instant::now() < deadline => {
                    tracing::debug!(%error, "moving the capture slot; trying again");
                    tokio::time::sleep(HANDOVER_STEP).await;
                }
                Err(error) => return Err(error.into()),
            }
        };
        if let Err(error) = self.files.write_offset(position).await {
            return Err(Ended::Failed {
                error,
                ran_well: false,
            });
        }
        if let Err(error) = self
            .ports
            .state
            .record_position(&self.options.identity, position, &self.options.owner_host)
            .await
        {
            tracing::warn!(%error, "recording the capture position failed");
        }
        Ok(position)
    }

    /// Connects, takes the lock, checks the database and reconciles the state; returns the stream
    /// and the position it reads after.
    async fn start(
        &self,
        held_before: &mut bool,
    ) -> Result<(Box<dyn ChangeStream>, Option<Lsn>), Ended> {
        let identity = &self.options.identity;
        // The state is read before the session opens, because the stream's start position is fixed
        // when it does; it is only trusted once the lock is held and reconciliation agrees.
        let recorded = match self.ports.state.load(identity).await {
            Ok(recorded) => recorded,
            Err(error) => return Err(error.into()),
        };
        let files = match self.files.read().await {
            Ok(files) => files,
            Err(error) => {
                return Err(Ended::Failed {
                    error,
                    ran_well: false,
                });
            }
        };
        let resume_after = match &files {
            FilesState::Present { offset, .. } => {
                offset.or(recorded.as_ref().and_then(|r| r.log_position))
            }
            FilesState::Empty | FilesState::Corrupt(_) => None,
        };
        let mut session = match self.ports.connector.open(resume_after).await {
            Ok(session) => session,
            Err(error) => return Err(error.into()),
        };
        match session.claim_ownership().await {
            Ok(true) => *held_before = true,
            Ok(false) if !*held_before => {
                return Err(Ended::OwnedElsewhere(format!(
                    "capture identity {identity} already has an owner: another process holds its lock. This replica keeps delivering through SQL (and tries the lock again every 30 s); set outbox.capture.enabled: false on every replica but one"
                )));
            }
            Ok(false) => {
                return Err(Ended::Failed {
                    error: format!("the owner lock of capture identity {identity} is still held"),
                    ran_well: false,
                });
            }
            Err(error) => return Err(error.into()),
        }
        if let Err(error) = session.check_ready().await {
            return Err(error.into());
        }
        let slot = match session.slot().await {
            Ok(slot) => slot,
            Err(error) => return Err(error.into()),
        };
        let scope = &self.options.scope;
        let from = match reconcile(recorded.as_ref(), &files, scope, slot.is_some()) {
            Plan::Stop(fault) => {
                return Err(Ended::NeedsDecision(format!(
                    "{fault} (identity {identity}, slot {}, state directory {}; the recovery steps are in docs/concepts/capture.md)",
                    scope.slot,
                    self.files.dir().display()
                )));
            }
            Plan::Resume { from, .. } => from,
            Plan::Fresh => {
                let instance_id = uuid::Uuid::new_v4().to_string();
                let start = match slot {
                    Some(slot) => slot.confirmed,
                    None => match session.create_slot().await {
                        Ok(start) => Some(start),
                        Err(error) => return Err(error.into()),
                    },
                };
                // Files first: a crash before the record leaves files without a record, which the
                // next start reports, instead of a record without files, which looks like a lost
                // volume. Both need the same reset.
                if let Err(error) = self
                    .files
                    .write_identity(&instance_id, &scope.describe())
                    .await
                {
                    return Err(Ended::Failed {
                        error,
                        ran_well: false,
                    });
                }
                if let Some(start) = start
                    && let Err(error) = self.files.write_offset(start).await
                {
                    return Err(Ended::Failed {
                        error,
                        ran_well: false,
                    });
                }
                let record = Recorded {
                    instance_id,
                    fingerprint: scope.fingerprint(),
                    log_position: start,
                };
                if let Err(error) = self
                    .ports
                    .state
                    .create(identity, &record, &self.options.owner_host)
                    .await
                {
                    return Err(error.into());
                }
                tracing::info!(%identity, slot = %scope.slot, start = ?start.map(|p| p.to_string()), "capture state created");
                start
            }
        };
        match session.stream().await {
            Ok(stream) => Ok((stream, from)),
            Err(error) => Err(error.into()),
        }
    }

    /// Reads the stream until it breaks, waking delivery on committed inserts and keeping the
    /// handled position in the files, the record and the slot.
    async fn follow(
        &self,
        mut stream: Box<dyn ChangeStream>,
        from: Option<Lsn>,
        stop: &mut StopSignal,
    ) -> Followed {
        let started = Instant::now();
        let mut handled = from;
        let (positions, watched) = watch::channel(from);
        let mut keeper = tokio::spawn(
            PositionKeeper {
                files: self.files.clone(),
                state: Arc::clone(&self.ports.state),
                metrics: Arc::clone(&self.metrics),
                identity: self.options.identity.clone(),
                owner_host: self.options.owner_host.clone(),
                slot: self.options.scope.slot.clone(),
                offsets_every: self.options.offsets_every,
                record_every: self.options.record_every,
            }
            .run(watched),
        );
        let failed = |error: String| {
            Followed::Ended(Ended::Failed {
                error,
                ran_well: started.elapsed() >= HEALTHY_RUN,
            })
        };
        let backlog = self.wake.backlog_lasted(PAUSE_AFTER);
        tokio::pin!(backlog);
        loop {
            tokio::select! {
                _ = stop.stopped() => {
                    if let Err(error) = end_stream(stream, positions, &mut keeper).await {
                        tracing::warn!(%error, "the capture position was not written at shutdown");
                    }
                    return Followed::Ended(Ended::Stopping);
                }
                () = &mut backlog => {
                    return match end_stream(stream, positions, &mut keeper).await {
                        Ok(()) => Followed::Paused(handled),
                        Err(error) => failed(error),
                    };
                }
                kept = &mut keeper => {
                    let error = match kept {
                        Ok(Err(error)) => error,
                        Ok(Ok(())) => "the capture position keeper ended".to_owned(),
                        Err(error) => format!("the capture position keeper failed: {error}"),
                    };
                    return failed(error);
                }
                event = stream.next() => {
                    let position = match event {
                        Ok(ChangeEvent::Committed { inserts, ignored, end, committed_at }) => {
                            self.metrics.ignored.increment(ignored);
                            if inserts > 0 {
                                let _wake_span = crate::trace::Traced::root(|| {
                                    tracing::info_span!(
                                        target: crate::trace::TARGET,
                                        "capture wake",
                                        otel.name = "capture wake",
                                        otel.kind = "internal",
                                        queuebox.inserts = inserts,
                                    )
                                });
                                self.wake.wake();
                                if let Some(delay) = committed_at.and_then(|at| at.elapsed().ok()) {
                                    self.metrics.commit_to_wake.record(delay);
                                }
                                self.metrics.inserts.increment(inserts);
                                self.metrics.log_wakes.increment(1);
                                self.announce.notify_one();
                            }
                            end
                        }
                        Ok(ChangeEvent::Idle { end }) => end,
                        // Dropping the sender lets the keeper write the last position and end.
                        Err(error) => return failed(error.to_string()),
                    };
                    if handled.is_none_or(|h| position > h) {
                        handled = Some(position);
                        stream.confirm(position);
                        positions.send_replace(handled);
                    }
                }
            }
        }
    }
}

/// Ends a stream that capture leaves on purpose (shutdown or a backlog): the keeper writes the last
/// position when its channel closes, so the next stream does not wake again for what was handled.
async fn end_stream(
    stream: Box<dyn ChangeStream>,
    positions: watch::Sender<Option<Lsn>>,
    keeper: &mut tokio::task::JoinHandle<Result<(), String>>,
) -> Result<(), String> {
    drop(positions);
    let kept = match tokio::time::timeout(KEEPER_BOUND, keeper).await {
        Ok(Ok(kept)) => kept,
        Ok(Err(error)) => Err(format!("the capture position keeper failed: {error}")),
        Err(_) => Err(format!(
            "the capture position was not written within {} s",
            KEEPER_BOUND.as_secs()
        )),
    };
    stream.close().await;
    kept
}

/// Sends a notice to the other replicas each time `rung` rings.
async fn announce_wakes(wakes: Arc<dyn WakeChannel>, channel: String, rung: Arc<Notify>) {
    loop {
        rung.notified().await;
        if let Err(error) = wakes.announce(&channel).await {
            tracing::debug!(%error, "announcing a capture wake-up failed");
        }
    }
}
