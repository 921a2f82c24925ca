//! Whether the container runtime is up, as upstream's kubelet tracks it (`runtimeState`): the
//! runtime is asked for its status every few seconds, and what it says (or that it stopped
//! answering) becomes the node's Ready condition, so `kubectl get nodes` tells what is wrong.
//!
//! At start the kubelet first waits, with a capped back-off, for the runtime to answer at all:
//! containerd accepts connections before its CRI plugin is initialised and answers
//! `Unknown: server is not initialized yet` until then.

use k1s_cri::v1::{RuntimeCondition, StatusRequest, VersionRequest, VersionResponse};
use k1s_cri::{CriError, RuntimeService};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How often the runtime's status is checked (upstream: `updateRuntimeUp` every 5 s).
pub const CHECK_INTERVAL: Duration = Duration::from_secs(5);
/// Without a successful status check for this long, the runtime is down (upstream: 30 s).
pub const SYNC_THRESHOLD: Duration = Duration::from_secs(30);
/// The first retry of a runtime that does not answer yet; each next waits twice as long.
const FIRST_RETRY: Duration = Duration::from_millis(100);
/// The longest wait between two tries.
pub const RETRY_CAP: Duration = Duration::from_secs(5);

/// The delay before try number `attempt` (0-based) of a runtime that did not answer.
pub fn backoff(attempt: u32) -> Duration {
    FIRST_RETRY.saturating_mul(2u32.saturating_pow(attempt.min(16))).min(RETRY_CAP)
}

/// Asks the runtime for its version until it answers, waiting `backoff(n)` between tries.
/// `None` when cancelled first.
pub async fn wait_for_version(runtime: &dyn RuntimeService, cancel: &CancellationToken) -> Option<VersionResponse> {
    let mut attempt = 0u32;
    loop {
        match runtime.version(VersionRequest { version: "v1".into() }).await {
            Ok(v) => {
                if attempt > 0 {
                    tracing::info!(attempts = attempt + 1, runtime = %v.runtime_name, "the container runtime answers");
                }
                return Some(v);
            }
            Err(e) => {
                let wait = backoff(attempt);
                tracing::warn!(error = %e, retry_in_ms = wait.as_millis() as u64, "waiting for the container runtime");
                attempt = attempt.saturating_add(1);
                tokio::select! {
                    _ = cancel.cancelled() => return None,
                    _ = tokio::time::sleep(wait) => {}
                }
            }
        }
    }
}

/// What the kubelet knows of the runtime's health.
#[derive(Debug, Default)]
pub struct RuntimeState {
    /// When the runtime last answered a status check with RuntimeReady.
    last_sync: Option<Instant>,
    runtime_error: Option<String>,
    network_error: Option<String>,
}

/// `RuntimeReady=false reason:X message:Y`, as upstream prints a runtime condition (`<nil>`
/// when the runtime does not report it).
fn describe(c: Option<&RuntimeCondition>) -> String {
    match c {
        Some(c) => format!("{}={} reason:{} message:{}", c.r#type, c.status, c.reason, c.message),
        None => "<nil>".to_string(),
    }
}

impl RuntimeState {
    /// Records one status check's result.
    pub fn observe(&mut self, result: Result<Vec<RuntimeCondition>, CriError>, now: Instant) {
        let conditions = match result {
            Ok(c) => c,
            Err(e) => {
                // The runtime keeps its last known errors; `last_sync` ages into "down".
                tracing::warn!(error = %e, "container runtime status check failed");
                return;
            }
        };
        let find = |t: &str| conditions.iter().find(|c| c.r#type == t);
        let network = find("NetworkReady");
        self.network_error = match network {
            Some(c) if c.status => None,
            c => Some(format!("container runtime network not ready: {}", describe(c))),
        };
        let runtime = find("RuntimeReady");
        match runtime {
            Some(c) if c.status => {
                self.runtime_error = None;
                self.last_sync = Some(now);
            }
            c => self.runtime_error = Some(format!("container runtime not ready: {}", describe(c))),
        }
    }

    /// What keeps the node from being Ready, in upstream's order; empty when it is Ready.
    pub fn errors(&self, now: Instant) -> Vec<String> {
        let mut errs = Vec::new();
        match self.last_sync {
            None => errs.push("container runtime status check may not have completed yet".to_string()),
            Some(t) if now.duration_since(t) >= SYNC_THRESHOLD => errs.push("container runtime is down".to_string()),
            Some(_) => {}
        }
        errs.extend(self.runtime_error.iter().cloned());
        errs.extend(self.network_error.iter().cloned());
        errs.dedup();
        errs
    }

    /// The node's Ready condition: (status, reason, message).
    pub fn ready_condition(&self, now: Instant) -> (&'static str, &'static str, String) {
        let errs = self.errors(now);
        match errs.len() {
            0 => ("True", "KubeletReady", "kubelet is posting ready status".to_string()),
            1 => ("False", "KubeletNotReady", errs[0].clone()),
            _ => ("False", "KubeletNotReady", format!("[{}]", errs.join(", "))),
        }
    }
}

/// Asks the runtime for its status and records the answer.
pub async fn check(runtime: &dyn RuntimeService, state: &std::sync::Mutex<RuntimeState>) {
    let result = runtime.status(StatusRequest { verbose: false }).await.map(|s| s.status.map(|s| s.conditions));
    let result = result.map(Option::unwrap_or_default);
    if let Ok(mut s) = state.lock() {
        s.observe(result, Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k1s_cri::{CriOp, FailureRule, FakeRuntime};

    fn cond(t: &str, status: bool, reason: &str, message: &str) -> RuntimeCondition {
        RuntimeCondition { r#type: t.into(), status, reason: reason.into(), message: message.into() }
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        assert_eq!(backoff(0), Duration::from_millis(100));
        assert_eq!(backoff(1), Duration::from_millis(200));
        assert_eq!(backoff(3), Duration::from_millis(800));
        assert_eq!(backoff(10), RETRY_CAP);
        assert_eq!(backoff(u32::MAX), RETRY_CAP);
    }

    /// containerd accepts connections before its CRI plugin is initialised: the kubelet must wait
    /// for it instead of giving up (issue 16, 2 of 10 node starts left without a Node).
    #[tokio::test(start_paused = true)]
    async fn waits_for_a_runtime_that_is_not_initialized_yet() {
        let fake = FakeRuntime::new();
        let not_yet = CriError::rpc(CriOp::Version, k1s_cri::Code::Unknown, "server is not initialized yet");
        fake.inject_failure(FailureRule::new(CriOp::Version, not_yet).times(4));
        let cancel = CancellationToken::new();
        let started = tokio::time::Instant::now();
        let v = wait_for_version(&fake, &cancel).await.expect("the runtime answers at last");
        assert!(!v.runtime_name.is_empty());
        // 100 + 200 + 400 + 800 ms of back-off before the fifth try.
        assert_eq!(started.elapsed(), Duration::from_millis(1500));
        assert_eq!(fake.count(CriOp::Version), 5);
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_for_the_runtime_stops_when_cancelled() {
        let fake = FakeRuntime::new();
        fake.inject_failure(FailureRule::new(
            CriOp::Version,
            CriError::rpc(CriOp::Version, k1s_cri::Code::Unavailable, "connection refused"),
        ));
        let cancel = CancellationToken::new();
        let c = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(60)).await;
            c.cancel();
        });
        assert!(wait_for_version(&fake, &cancel).await.is_none());
    }

    #[test]
    fn the_node_is_not_ready_until_the_runtime_reports_ready() {
        let t0 = Instant::now();
        let mut s = RuntimeState::default();
        assert_eq!(
            s.ready_condition(t0),
            ("False", "KubeletNotReady", "container runtime status check may not have completed yet".into())
        );
        s.observe(
            Ok(vec![
                cond("RuntimeReady", true, "", ""),
                cond("NetworkReady", false, "NetworkPluginNotReady", "cni plugin not initialized"),
            ]),
            t0,
        );
        assert_eq!(
            s.ready_condition(t0),
            (
                "False",
                "KubeletNotReady",
                "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:cni plugin not initialized".into()
            )
        );
        s.observe(Ok(vec![cond("RuntimeReady", true, "", ""), cond("NetworkReady", true, "", "")]), t0);
        assert_eq!(s.ready_condition(t0).0, "True");
        // No successful check for the threshold: the runtime is down.
        let later = t0 + SYNC_THRESHOLD;
        s.observe(Err(CriError::rpc(CriOp::Status, k1s_cri::Code::Unavailable, "gone")), later);
        assert_eq!(s.ready_condition(later), ("False", "KubeletNotReady", "container runtime is down".into()));
        s.observe(Ok(vec![cond("RuntimeReady", false, "Broken", "x")]), later);
        assert_eq!(
            s.ready_condition(later).2,
            "[container runtime is down, container runtime not ready: RuntimeReady=false reason:Broken message:x, container runtime network not ready: <nil>]"
        );
    }
}
