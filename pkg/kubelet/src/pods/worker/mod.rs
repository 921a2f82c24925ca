//! One worker per pod UID: makes the runtime match the pod (sandbox, init containers in order,
//! app containers with restart policy and back-off, probes, hooks), tears it down gracefully on
//! deletion, and reports status. States: syncing ▶ terminating ▶ terminated ([`PodState`]).
//!
//! - `mod.rs`: the worker's state and its sync loop;
//! - [`api`]: the Kubernetes API it uses, behind a trait with a fake;
//! - `sandbox`: finding, adopting or creating the sandbox; reading the containers; orphans;
//! - `start`: restarts with back-off, image pulls, creating and starting containers, probes;
//! - `terminate`: stopping containers, tearing a deleted pod down, the final delete;
//! - `status`: container records, waiting reasons and the status patch.

use super::backoff::Backoff;
use super::probes::{ProbeHandle, ProbeKind, ProbeResult, ProbeUpdate};
use super::spec::{self, pod_name, pod_namespace};
use super::volumes::{PreparedVolumes, VolumeManager};
use super::Update;
use crate::Shared;
use k1s_cri::v1 as cri;
use k8s_openapi::api::core::v1::{Container, ObjectReference, Pod};
use serde_json::Value;

pub mod api;
mod sandbox;
mod start;
mod status;
mod terminate;

pub use sandbox::remove_orphans;
pub use status::WaitingReason;

use api::PodApi;
use sandbox::Sandbox;
use status::Waiting;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// How often a worker looks at its containers when nothing else wakes it (upstream's PLEG relist).
const RESYNC: Duration = Duration::from_secs(1);
const VOLUME_RESYNC: Duration = Duration::from_secs(10);

fn now_rfc3339() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Where the worker is in the pod's life, as upstream's pod workers: syncing ▶ terminating ▶
/// terminated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PodState {
    /// Making the runtime match the spec.
    Syncing,
    /// Stopping the pod's containers: each has until `deadline` (its preStop hook included).
    Terminating { deadline: Instant },
    /// Nothing of the pod runs any more; `left` says what is still on the node.
    Terminated { left: Remains },
}

/// What a terminated pod leaves on the node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Remains {
    /// A finished pod (phase Succeeded or Failed) not yet deleted: its exited containers (for
    /// `kubectl logs`), its stopped sandbox and its volumes.
    Stopped,
    /// A deleted pod: containers, sandbox, cgroup and volumes are removed.
    Nothing,
}

/// The value of a CRI call, or `None` after logging its error (in the pod's span): the worker
/// goes on and the next sync retries what still matters. An object already gone is no failure.
fn logged<T>(result: k1s_cri::CriResult<T>, call: &'static str, id: &str) -> Option<T> {
    match result {
        Ok(v) => Some(v),
        Err(e) if e.is_not_found() => {
            tracing::debug!(error = %e, call, id, "CRI object already gone");
            None
        }
        Err(e) => {
            tracing::warn!(error = %e, call, id, "CRI call failed");
            None
        }
    }
}

/// Logs a failed file operation on the pod's kubelet-managed files.
/// Removes the log folder of the pod with `uid` (`<namespace>_<name>_<uid>` under `pod_log_dir`,
/// as upstream names it) once the pod is gone from the API, as upstream's kubelet does: the logs
/// of a deleted pod are not kept (`kubectl logs` can no longer name it).
fn remove_pod_logs(pod_log_dir: &std::path::Path, uid: &str) {
    let suffix = format!("_{uid}");
    let entries = match std::fs::read_dir(pod_log_dir) {
        Ok(entries) => entries,
        Err(e) => {
            logged_io(Err(e), "listing", pod_log_dir);
            return;
        }
    };
    for entry in entries.flatten() {
        if entry.file_name().to_str().is_some_and(|n| n.ends_with(&suffix)) {
            let path = entry.path();
            logged_io(std::fs::remove_dir_all(&path), "removing", &path);
        }
    }
}

fn logged_io(result: std::io::Result<()>, op: &'static str, path: &std::path::Path) {
    if let Err(e) = result {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(error = %e, op, path = %path.display(), "pod file operation failed");
        }
    }
}

struct Worker {
    shared: Arc<Shared>,
    api: Arc<dyn PodApi>,
    volumes: Arc<VolumeManager>,
    uid: String,
    sandbox: Option<Sandbox>,
    prepared: Option<PreparedVolumes>,
    volumes_synced_at: Option<Instant>,
    /// Latest instance of each container (by name) and the one before it.
    runtime: HashMap<String, (Option<cri::ContainerStatus>, Option<cri::ContainerStatus>)>,
    /// Why a container is not running, by name.
    waiting: HashMap<String, Waiting>,
    /// The last instance seen of each ephemeral container: ephemeral containers run once, so
    /// one that ran (even in a sandbox since replaced) is never started again.
    ephemeral_ran: HashMap<String, cri::ContainerStatus>,
    restart_backoff: Backoff,
    pull_backoff: Backoff,
    pull_failed_at: HashMap<String, Instant>,
    exited_seen_at: HashMap<String, Instant>,
    probes: HashMap<(String, ProbeKind), ProbeHandle>,
    /// Thresholded probe results by (container id, kind).
    probe_results: HashMap<(String, ProbeKind), ProbeResult>,
    probe_tx: mpsc::Sender<ProbeUpdate>,
    probe_rx: mpsc::Receiver<ProbeUpdate>,
    start_time: Option<String>,
    last_status: Option<Value>,
    state: PodState,
    sandbox_failed_at: Option<Instant>,
    host_resolv: String,
    last_pod: Option<Pod>,
}

/// Runs the worker for one pod until it is gone from the API and from the runtime.
pub async fn run(
    shared: Arc<Shared>,
    api: Arc<dyn PodApi>,
    volumes: Arc<VolumeManager>,
    uid: String,
    rx: watch::Receiver<Update>,
) {
    use tracing::Instrument as _;
    let span = {
        let u = rx.borrow();
        tracing::info_span!("pod", uid = %uid, namespace = %pod_namespace(&u.pod), name = %pod_name(&u.pod))
    };
    run_worker(shared, api, volumes, uid, rx).instrument(span).await
}

async fn run_worker(
    shared: Arc<Shared>,
    api: Arc<dyn PodApi>,
    volumes: Arc<VolumeManager>,
    uid: String,
    mut rx: watch::Receiver<Update>,
) {
    let mut w = Worker::new(shared.clone(), api, volumes, uid);
    loop {
        let update = rx.borrow_and_update().clone();
        let Some(wake) = w.sync(&update).await else { break };
        let sleep = tokio::time::sleep_until(wake);
        tokio::select! {
            _ = shared.cancel.cancelled() => break,
            r = rx.changed() => {
                if r.is_err() {
                    // The manager is gone: the kubelet is stopping.
                    break;
                }
            }
            Some(u) = w.probe_rx.recv() => w.on_probe(u).await,
            _ = sleep => {}
        }
    }
    for (_, h) in w.probes.drain() {
        h.stop();
    }
}

fn pod_ref(pod: &Pod) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        namespace: pod.metadata.namespace.clone(),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        resource_version: pod.metadata.resource_version.clone(),
        ..Default::default()
    }
}

/// `name_namespace(uid)`, as upstream names pods in messages.
fn pod_desc(pod: &Pod) -> String {
    format!("{}_{}({})", pod_name(pod), pod_namespace(pod), pod.metadata.uid.as_deref().unwrap_or(""))
}

fn container_ref(pod: &Pod, c: &str) -> ObjectReference {
    let mut r = pod_ref(pod);
    let list = if spec::is_ephemeral(pod, c) { "ephemeralContainers" } else { "containers" };
    r.field_path = Some(format!("spec.{list}{{{c}}}"));
    r
}

fn is_state(s: &cri::ContainerStatus, st: cri::ContainerState) -> bool {
    s.state == st as i32
}

fn all_containers(pod: &Pod) -> (Vec<Container>, Vec<Container>) {
    let spec = pod.spec.clone().unwrap_or_default();
    (spec.init_containers.unwrap_or_default(), spec.containers)
}

impl Worker {
    fn new(shared: Arc<Shared>, api: Arc<dyn PodApi>, volumes: Arc<VolumeManager>, uid: String) -> Worker {
        let (probe_tx, probe_rx) = mpsc::channel(64);
        Worker {
            shared,
            api,
            volumes,
            uid,
            sandbox: None,
            prepared: None,
            volumes_synced_at: None,
            runtime: HashMap::new(),
            waiting: HashMap::new(),
            ephemeral_ran: HashMap::new(),
            restart_backoff: Backoff::default(),
            pull_backoff: Backoff::default(),
            pull_failed_at: HashMap::new(),
            exited_seen_at: HashMap::new(),
            probes: HashMap::new(),
            probe_results: HashMap::new(),
            probe_tx,
            probe_rx,
            start_time: None,
            last_status: None,
            state: PodState::Syncing,
            sandbox_failed_at: None,
            host_resolv: std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default(),
            last_pod: None,
        }
    }

    fn set_waiting(&mut self, name: &str, reason: WaitingReason, message: String) {
        self.waiting.insert(name.to_string(), Waiting { reason, message });
    }

    fn deleting(pod: &Pod) -> bool {
        pod.metadata.deletion_timestamp.is_some()
    }

    /// One pass over the pod; when to look again, or `None` when the worker is done.
    async fn sync(&mut self, u: &Update) -> Option<Instant> {
        let pod = u.pod.clone();
        if u.removed || Self::deleting(&pod) {
            return self.terminate(&pod, u.removed).await;
        }
        if self.start_time.is_none() {
            self.start_time = pod
                .status
                .as_ref()
                .and_then(|s| s.start_time.as_ref())
                .map(|t| t.0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
                .or_else(|| Some(now_rfc3339()));
        }
        let terminal = matches!(
            self.last_status
                .as_ref()
                .and_then(|s| s.get("phase"))
                .and_then(Value::as_str)
                .or(pod.status.as_ref().and_then(|s| s.phase.as_deref())),
            Some("Succeeded" | "Failed")
        );
        if terminal {
            // Finished pods keep their status and their exited containers (for `kubectl logs`)
            // until they are deleted; the sandbox stops, giving its IP back.
            if self.state == PodState::Syncing {
                self.refresh(&pod).await;
                let deadline = Instant::now();
                self.state = PodState::Terminating { deadline };
                self.kill_containers(&pod, deadline).await;
                if let Some(sb) = &self.sandbox {
                    let stopped = self
                        .shared
                        .runtime
                        .stop_pod_sandbox(cri::StopPodSandboxRequest { pod_sandbox_id: sb.id.clone() })
                        .await;
                    logged(stopped, "StopPodSandbox", &sb.id);
                }
                self.state = PodState::Terminated { left: Remains::Stopped };
                self.push_status(&pod, true).await;
            }
            return Some(Instant::now() + Duration::from_secs(3600));
        }
        let mut wake = Instant::now() + RESYNC;
        if !self.ensure_sandbox(&pod).await {
            self.push_status(&pod, false).await;
            return Some(Instant::now() + Duration::from_secs(2));
        }
        if !self.ensure_volumes(&pod).await {
            self.push_status(&pod, false).await;
            return Some(Instant::now() + Duration::from_secs(2));
        }
        self.refresh(&pod).await;
        // Ephemeral containers first, as upstream: they may debug a pod whose init containers fail.
        if let Some(w) = self.sync_ephemeral(&pod).await {
            wake = wake.min(w);
        }
        let (inits, apps) = all_containers(&pod);
        let restart_policy =
            pod.spec.as_ref().and_then(|s| s.restart_policy.clone()).unwrap_or_else(|| "Always".into());
        // Init containers, in order; restartable ones (sidecars) only need to be started.
        let mut init_done = true;
        for c in &inits {
            let sidecar = c.restart_policy.as_deref() == Some("Always");
            let (cur, _) = self.runtime.get(&c.name).cloned().unwrap_or((None, None));
            match cur {
                Some(s) if is_state(&s, cri::ContainerState::ContainerExited) && s.exit_code == 0 && !sidecar => {
                    continue
                }
                Some(s) if is_state(&s, cri::ContainerState::ContainerRunning) => {
                    if sidecar {
                        self.ensure_probes(c, &s.id);
                        continue;
                    }
                    init_done = false;
                    break;
                }
                Some(s) if is_state(&s, cri::ContainerState::ContainerExited) => {
                    if restart_policy == "Never" && !sidecar {
                        init_done = false;
                        break;
                    }
                    if let Some(w) = self.maybe_restart(&pod, c, &s).await {
                        wake = wake.min(w);
                    }
                    init_done = false;
                    if !sidecar {
                        break;
                    }
                }
                _ => {
                    if let Some(w) = self.start(&pod, c, 0).await {
                        wake = wake.min(w);
                    }
                    if !sidecar {
                        init_done = false;
                        break;
                    }
                }
            }
        }
        if init_done {
            for c in &apps {
                let (cur, _) = self.runtime.get(&c.name).cloned().unwrap_or((None, None));
                match cur {
                    Some(s) if is_state(&s, cri::ContainerState::ContainerRunning) => {
                        self.waiting.remove(&c.name);
                        self.ensure_probes(c, &s.id);
                        if self.probe_results.get(&(s.id.clone(), ProbeKind::Liveness)) == Some(&ProbeResult::Failure)
                            || self.probe_results.get(&(s.id.clone(), ProbeKind::Startup))
                                == Some(&ProbeResult::Failure)
                        {
                            self.kill_unhealthy(&pod, c, &s).await;
                            wake = Instant::now();
                        }
                    }
                    Some(s) if is_state(&s, cri::ContainerState::ContainerExited) => {
                        self.stop_probes(&c.name);
                        let restart = match restart_policy.as_str() {
                            "Never" => false,
                            "OnFailure" => s.exit_code != 0,
                            _ => true,
                        };
                        if restart {
                            if let Some(w) = self.maybe_restart(&pod, c, &s).await {
                                wake = wake.min(w);
                            }
                        } else {
                            self.waiting.remove(&c.name);
                        }
                    }
                    Some(s) if is_state(&s, cri::ContainerState::ContainerCreated) => {
                        // Created but never started (a start failed): remove and retry.
                        let removed = self
                            .shared
                            .runtime
                            .remove_container(cri::RemoveContainerRequest { container_id: s.id.clone() })
                            .await;
                        logged(removed, "RemoveContainer", &s.id);
                        self.runtime.remove(&c.name);
                    }
                    _ => {
                        if let Some(w) = self.start(&pod, c, 0).await {
                            wake = wake.min(w);
                        }
                    }
                }
            }
        }
        if self.volumes_synced_at.is_some_and(|t| t.elapsed() > VOLUME_RESYNC) {
            if let Some(p) = &self.prepared {
                if let Err(e) = self.volumes.resync_with(self.api.objects(), &pod, p).await {
                    tracing::debug!(error = %e, "volume resync failed");
                }
            }
            self.volumes_synced_at = Some(Instant::now());
        }
        self.refresh(&pod).await;
        self.push_status(&pod, false).await;
        Some(wake)
    }
}

#[cfg(test)]
mod tests;
