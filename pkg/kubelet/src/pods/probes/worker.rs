//! One periodic probe of one container instance, as upstream's `prober/worker.go`:
//!
//! - the first run is right away, then one every `periodSeconds` (or sooner on
//!   [`ProbeHandle::trigger`]); runs before `initialDelaySeconds` have passed since the
//!   container started are skipped;
//! - liveness and readiness wait until [`ProbeHandle::startup_succeeded`] (the pod worker calls
//!   it when the startup probe succeeded, or at once when there is none);
//! - the thresholded result starts at [`ProbeKind::initial_result`] and changes only after
//!   `successThreshold` successes or `failureThreshold` failures in a row; Unknown runs (the
//!   probe could not be run) do not count;
//! - after a liveness failure or any startup verdict the worker stops: the container is
//!   restarted (a new worker probes the new instance) or has started.

use super::{probe_once, ProbeKind, ProbeOutcome, ProbeResult, ProbeTarget};
use k1s_cri::RuntimeService;
use k8s_openapi::api::core::v1::Probe;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::{mpsc, watch, Notify};
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

/// What a probe worker tells the pod worker. One is sent
/// - when the thresholded `result` changes (`changed` is true), and
/// - after every run that failed, warned or could not be run (for upstream's `Unhealthy` and
///   `ProbeWarning` events; see [`ProbeUpdate::event`]), even below the failure threshold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeUpdate {
    pub container_name: String,
    pub container_id: String,
    pub kind: ProbeKind,
    /// The thresholded result now in force: Success or Failure (Unknown for a startup probe
    /// that has not decided yet).
    pub result: ProbeResult,
    /// `result` differs from the previous one.
    pub changed: bool,
    /// What this run returned, before thresholds.
    pub probe_result: ProbeResult,
    /// This run's output: the failure message, or the command's output.
    pub output: String,
}

/// Upstream's event for a probe run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeEvent {
    /// `Unhealthy` or `ProbeWarning` (both Warning events).
    pub reason: &'static str,
    pub message: String,
}

impl ProbeUpdate {
    /// The Warning event upstream records for this run, if any:
    /// `Unhealthy` `"Readiness probe failed: <output>"`,
    /// `Unhealthy` `"Liveness probe errored and resulted in unknown state: <error>"`,
    /// `ProbeWarning` `"Readiness probe warning: <output>"`.
    pub fn event(&self) -> Option<ProbeEvent> {
        let kind = self.kind.as_str();
        match self.probe_result {
            ProbeResult::Success => None,
            ProbeResult::Failure => {
                Some(ProbeEvent { reason: "Unhealthy", message: format!("{kind} probe failed: {}", self.output) })
            }
            ProbeResult::Unknown => Some(ProbeEvent {
                reason: "Unhealthy",
                message: format!("{kind} probe errored and resulted in unknown state: {}", self.output),
            }),
            ProbeResult::Warning => {
                Some(ProbeEvent { reason: "ProbeWarning", message: format!("{kind} probe warning: {}", self.output) })
            }
        }
    }
}

/// A running probe worker. Dropping it (or [`ProbeHandle::stop`]) stops the worker.
pub struct ProbeHandle {
    kind: ProbeKind,
    container_id: String,
    started: watch::Sender<bool>,
    trigger: Arc<Notify>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl ProbeHandle {
    pub fn kind(&self) -> ProbeKind {
        self.kind
    }

    /// The container instance this worker probes.
    pub fn container_id(&self) -> &str {
        &self.container_id
    }

    /// Lets a liveness or readiness worker start probing (the startup probe succeeded, or
    /// there is none). Idempotent; no effect on a startup worker.
    pub fn startup_succeeded(&self) {
        self.started.send_if_modified(|s| !std::mem::replace(s, true));
    }

    /// Probes now instead of at the next period (upstream triggers readiness this way when a
    /// container is not ready yet).
    pub fn trigger(&self) {
        self.trigger.notify_one();
    }

    pub fn stop(&self) {
        self.cancel.cancel();
    }

    /// The worker has stopped (cancelled, or on hold after a liveness failure or a startup verdict).
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}

impl Drop for ProbeHandle {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// Starts probe workers.
pub struct ProbeWorker;

struct Loop {
    kind: ProbeKind,
    probe: Probe,
    target: ProbeTarget,
    runtime: Arc<dyn RuntimeService>,
    tx: mpsc::Sender<ProbeUpdate>,
    started: watch::Receiver<bool>,
    trigger: Arc<Notify>,
    cancel: CancellationToken,
    running_since: Instant,
}

fn seconds(v: Option<i32>, default: i32) -> u64 {
    u64::try_from(v.unwrap_or(default)).unwrap_or(0)
}

impl ProbeWorker {
    /// Starts probing `target` (a container that started just now).
    pub fn spawn(
        kind: ProbeKind,
        probe: Probe,
        target: ProbeTarget,
        runtime: Arc<dyn RuntimeService>,
        tx: mpsc::Sender<ProbeUpdate>,
        cancel: CancellationToken,
    ) -> ProbeHandle {
        Self::spawn_since(kind, probe, target, runtime, tx, cancel, None)
    }

    /// Starts probing `target`, a container running since `running_since` (an adopted one):
    /// `initialDelaySeconds` counts from then.
    pub fn spawn_since(
        kind: ProbeKind,
        probe: Probe,
        target: ProbeTarget,
        runtime: Arc<dyn RuntimeService>,
        tx: mpsc::Sender<ProbeUpdate>,
        cancel: CancellationToken,
        running_since: Option<SystemTime>,
    ) -> ProbeHandle {
        let now = Instant::now();
        let running_since = running_since
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .and_then(|age| now.checked_sub(age))
            .unwrap_or(now);
        let (started_tx, started_rx) = watch::channel(kind == ProbeKind::Startup);
        let trigger = Arc::new(Notify::new());
        let container_id = target.container_id.clone();
        let l = Loop {
            kind,
            probe,
            target,
            runtime,
            tx,
            started: started_rx,
            trigger: trigger.clone(),
            cancel: cancel.clone(),
            running_since,
        };
        let task = tokio::spawn(l.run());
        ProbeHandle { kind, container_id, started: started_tx, trigger, cancel, task }
    }
}

impl Loop {
    async fn run(mut self) {
        let period = Duration::from_secs(seconds(self.probe.period_seconds, 10).max(1));
        let initial_delay = seconds(self.probe.initial_delay_seconds, 0);
        let success_threshold = seconds(self.probe.success_threshold, 1).max(1);
        let failure_threshold = seconds(self.probe.failure_threshold, 3).max(1);
        let mut ticker = tokio::time::interval_at(Instant::now() + period, period);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut current = self.kind.initial_result();
        let mut last: Option<ProbeResult> = None;
        let mut run: u64 = 0;
        loop {
            let gated = self.kind != ProbeKind::Startup && !*self.started.borrow_and_update();
            let early = self.running_since.elapsed().as_secs() < initial_delay;
            if !gated && !early {
                let outcome = tokio::select! {
                    _ = self.cancel.cancelled() => return,
                    o = probe_once(self.runtime.as_ref(), &self.probe, &self.target) => o,
                };
                let counted = match outcome.result {
                    ProbeResult::Success | ProbeResult::Warning => Some(ProbeResult::Success),
                    ProbeResult::Failure => Some(ProbeResult::Failure),
                    // Upstream throws away runs that errored.
                    ProbeResult::Unknown => None,
                };
                let mut changed = false;
                let mut decided = false;
                if let Some(r) = counted {
                    if last == Some(r) {
                        run += 1;
                    } else {
                        last = Some(r);
                        run = 1;
                    }
                    let threshold = if r == ProbeResult::Success { success_threshold } else { failure_threshold };
                    if run >= threshold {
                        decided = true;
                        changed = current != r;
                        current = r;
                    }
                }
                if (changed || outcome.result != ProbeResult::Success) && !self.send(current, changed, outcome).await {
                    return;
                }
                // A failed liveness probe means a restart, and a startup probe is done once it
                // decided: either way this container instance needs no more probing.
                if decided
                    && ((self.kind == ProbeKind::Liveness && current == ProbeResult::Failure)
                        || self.kind == ProbeKind::Startup)
                {
                    return;
                }
            }
            tokio::select! {
                _ = self.cancel.cancelled() => return,
                _ = ticker.tick() => {}
                _ = self.trigger.notified() => {}
                r = self.started.changed(), if gated => {
                    if r.is_err() {
                        return;
                    }
                }
            }
        }
    }

    async fn send(&self, result: ProbeResult, changed: bool, outcome: ProbeOutcome) -> bool {
        let update = ProbeUpdate {
            container_name: self.target.container.name.clone(),
            container_id: self.target.container_id.clone(),
            kind: self.kind,
            result,
            changed,
            probe_result: outcome.result,
            output: outcome.output,
        };
        tokio::select! {
            _ = self.cancel.cancelled() => false,
            r = self.tx.send(update) => r.is_ok(),
        }
    }
}
