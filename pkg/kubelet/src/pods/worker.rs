//! One worker per pod UID: makes the runtime match the pod (sandbox, init containers in order,
//! app containers with restart policy and back-off, probes, hooks), tears it down gracefully on
//! deletion, and reports status. States: syncing ▶ terminating ▶ terminated.

use super::backoff::Backoff;
use super::probes::{ProbeHandle, ProbeKind, ProbeResult, ProbeTarget, ProbeUpdate};
use super::spec::{self, pod_name, pod_namespace};
use super::status::{self, ContainerRecord, Instance, InstanceState};
use super::volumes::{PreparedVolumes, VolumeManager};
use super::{cgroups, Update};
use crate::Shared;
use k1s_cri::v1 as cri;
use k1s_runtime::events::EventType::{Normal, Warning};
use k8s_openapi::api::core::v1::{Container, ObjectReference, Pod};
use serde_json::{json, Value};

pub mod api;

use api::{PodApi, PodApiError};
use std::collections::{HashMap, HashSet};
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

fn ns_to_rfc3339(ns: i64) -> Option<String> {
    if ns <= 0 {
        return None;
    }
    jiff::Timestamp::from_nanosecond(ns as i128).ok().map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
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

/// Why a container is not running: its status's `state.waiting.reason`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitingReason {
    /// Its image is being pulled or it is being created.
    ContainerCreating,
    /// It exited and waits for its restart back-off.
    CrashLoopBackOff,
    /// Its image could not be pulled.
    ErrImagePull,
    /// Its image is absent and its pull policy is Never.
    ErrImageNeverPull,
    /// Its image pull failed and waits for its back-off.
    ImagePullBackOff,
    /// Its environment, mounts or target container could not be resolved.
    CreateContainerConfigError,
    /// CreateContainer failed.
    CreateContainerError,
    /// StartContainer failed.
    RunContainerError,
}

impl WaitingReason {
    /// The reason as upstream's kubelet spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            WaitingReason::ContainerCreating => "ContainerCreating",
            WaitingReason::CrashLoopBackOff => "CrashLoopBackOff",
            WaitingReason::ErrImagePull => "ErrImagePull",
            WaitingReason::ErrImageNeverPull => "ErrImageNeverPull",
            WaitingReason::ImagePullBackOff => "ImagePullBackOff",
            WaitingReason::CreateContainerConfigError => "CreateContainerConfigError",
            WaitingReason::CreateContainerError => "CreateContainerError",
            WaitingReason::RunContainerError => "RunContainerError",
        }
    }
}

/// A container's waiting reason and its message.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Waiting {
    reason: WaitingReason,
    message: String,
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
fn logged_io(result: std::io::Result<()>, op: &'static str, path: &std::path::Path) {
    if let Err(e) = result {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(error = %e, op, path = %path.display(), "pod file operation failed");
        }
    }
}

struct Sandbox {
    id: String,
    ip: Option<String>,
    attempt: u32,
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
    let span = tracing::info_span!("pod", uid = %uid);
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

fn instance(s: &cri::ContainerStatus) -> Instance {
    Instance {
        id: s.id.clone(),
        state: match cri::ContainerState::try_from(s.state) {
            Ok(cri::ContainerState::ContainerCreated) => InstanceState::Created,
            Ok(cri::ContainerState::ContainerRunning) => InstanceState::Running,
            Ok(cri::ContainerState::ContainerExited) => InstanceState::Exited,
            _ => InstanceState::Unknown,
        },
        started_at: ns_to_rfc3339(s.started_at),
        finished_at: ns_to_rfc3339(s.finished_at),
        exit_code: s.exit_code,
        reason: s.reason.clone(),
        message: s.message.clone(),
        image_ref: s.image_ref.clone(),
    }
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

    /// Finds or creates a ready sandbox; false while it cannot be had.
    async fn ensure_sandbox(&mut self, pod: &Pod) -> bool {
        let rt = self.shared.runtime.clone();
        if let Some(id) = self.sandbox.as_ref().map(|s| s.id.clone()) {
            match rt
                .pod_sandbox_status(cri::PodSandboxStatusRequest { pod_sandbox_id: id.clone(), verbose: false })
                .await
            {
                Ok(r) if r.status.as_ref().is_some_and(|s| s.state == cri::PodSandboxState::SandboxReady as i32) => {
                    return true
                }
                _ => {
                    tracing::info!(pod = pod_name(pod), "sandbox is not ready; recreating it");
                    self.kill_containers(pod, Instant::now() + Duration::from_secs(2)).await;
                    let stopped = rt.stop_pod_sandbox(cri::StopPodSandboxRequest { pod_sandbox_id: id.clone() }).await;
                    logged(stopped, "StopPodSandbox", &id);
                }
            }
        }
        let mut attempt = 0;
        if self.sandbox.is_none() {
            // Adopt what the runtime still runs for this pod (kubelet restart).
            let mut filter = cri::PodSandboxFilter::default();
            filter.label_selector.insert(spec::LABEL_POD_UID.into(), self.uid.clone());
            let listed = rt.list_pod_sandbox(cri::ListPodSandboxRequest { filter: Some(filter) }).await;
            if let Some(list) = logged(listed, "ListPodSandbox", &self.uid) {
                let mut items = list.items;
                items.sort_by_key(|s| std::cmp::Reverse(s.created_at));
                if let Some(s) = items.first() {
                    attempt = s.metadata.as_ref().map(|m| m.attempt + 1).unwrap_or(0);
                    if s.state == cri::PodSandboxState::SandboxReady as i32 {
                        let status = rt
                            .pod_sandbox_status(cri::PodSandboxStatusRequest {
                                pod_sandbox_id: s.id.clone(),
                                verbose: false,
                            })
                            .await;
                        let ip = logged(status, "PodSandboxStatus", &s.id)
                            .and_then(|r| r.status)
                            .and_then(|st| st.network)
                            .map(|n| n.ip)
                            .filter(|ip| !ip.is_empty());
                        tracing::info!(pod = pod_name(pod), sandbox = %s.id, "adopted running sandbox");
                        self.sandbox = Some(Sandbox { id: s.id.clone(), ip, attempt: attempt.saturating_sub(1) });
                        return true;
                    }
                }
            }
        } else if let Some(sb) = &self.sandbox {
            attempt = sb.attempt + 1;
        }
        if self.sandbox_failed_at.is_some_and(|t| t.elapsed() < Duration::from_secs(2)) {
            return false;
        }
        let cfg = spec::sandbox_config(&self.shared.config, pod, attempt, &self.host_resolv);
        let log_dir = std::path::PathBuf::from(&cfg.log_directory);
        logged_io(std::fs::create_dir_all(&log_dir), "creating", &log_dir);
        let _slot = self.shared.start_slots.acquire().await;
        match rt.run_pod_sandbox(cri::RunPodSandboxRequest { config: Some(cfg), runtime_handler: String::new() }).await
        {
            Ok(r) => {
                let status = rt
                    .pod_sandbox_status(cri::PodSandboxStatusRequest {
                        pod_sandbox_id: r.pod_sandbox_id.clone(),
                        verbose: false,
                    })
                    .await;
                let ip = logged(status, "PodSandboxStatus", &r.pod_sandbox_id)
                    .and_then(|r| r.status)
                    .and_then(|st| st.network)
                    .map(|n| n.ip)
                    .filter(|ip| !ip.is_empty());
                if attempt > 0 {
                    self.api.event(
                        &pod_ref(pod),
                        Normal,
                        "SandboxChanged",
                        "Pod sandbox changed, it will be killed and re-created.",
                    );
                }
                self.sandbox = Some(Sandbox { id: r.pod_sandbox_id, ip, attempt });
                self.runtime.clear();
                self.sandbox_failed_at = None;
                true
            }
            Err(e) => {
                self.sandbox_failed_at = Some(Instant::now());
                let msg = format!("Failed to create pod sandbox: {e}");
                tracing::warn!(pod = pod_name(pod), error = %e, "RunPodSandbox failed");
                self.api.event(&pod_ref(pod), Warning, "FailedCreatePodSandBox", &msg);
                false
            }
        }
    }

    async fn ensure_volumes(&mut self, pod: &Pod) -> bool {
        if self.prepared.is_some() {
            return true;
        }
        match self.volumes.prepare_with(self.api.objects(), pod).await {
            Ok(p) => {
                self.prepared = Some(p);
                self.volumes_synced_at = Some(Instant::now());
                true
            }
            Err(e) => {
                self.api.event(&pod_ref(pod), Warning, "FailedMount", &e.to_string());
                false
            }
        }
    }

    /// Reads the runtime state of this pod's containers in the current sandbox.
    async fn refresh(&mut self, pod: &Pod) {
        let Some(sb) = &self.sandbox else { return };
        let filter = cri::ContainerFilter { pod_sandbox_id: sb.id.clone(), ..Default::default() };
        let list = match self.shared.runtime.list_containers(cri::ListContainersRequest { filter: Some(filter) }).await
        {
            Ok(l) => l.containers,
            Err(e) => {
                tracing::warn!(error = %e, call = "ListContainers", id = %sb.id, "CRI call failed");
                return;
            }
        };
        let mut by_name: HashMap<String, Vec<cri::Container>> = HashMap::new();
        for c in list {
            let name = c.metadata.as_ref().map(|m| m.name.clone()).unwrap_or_default();
            by_name.entry(name).or_default().push(c);
        }
        let mut fresh = HashMap::new();
        for (name, mut cs) in by_name {
            cs.sort_by_key(|c| std::cmp::Reverse(c.created_at));
            // Keep the newest two instances; older dead ones are garbage.
            for old in cs.iter().skip(2) {
                let removed = self
                    .shared
                    .runtime
                    .remove_container(cri::RemoveContainerRequest { container_id: old.id.clone() })
                    .await;
                logged(removed, "RemoveContainer", &old.id);
            }
            let mut statuses = Vec::new();
            for c in cs.iter().take(2) {
                let status = self
                    .shared
                    .runtime
                    .container_status(cri::ContainerStatusRequest { container_id: c.id.clone(), verbose: false })
                    .await;
                if let Some(r) = logged(status, "ContainerStatus", &c.id) {
                    if let Some(s) = r.status {
                        statuses.push(s);
                    }
                }
            }
            let mut it = statuses.into_iter();
            let cur = it.next();
            let prev = it.next();
            if let Some(s) = &cur {
                if is_state(s, cri::ContainerState::ContainerExited) {
                    self.exited_seen_at.entry(s.id.clone()).or_insert_with(Instant::now);
                }
            }
            fresh.insert(name, (cur, prev));
        }
        for (c, _) in spec::ephemeral_containers(pod) {
            if let Some((Some(s), _)) = fresh.get(&c.name) {
                self.ephemeral_ran.insert(c.name.clone(), s.clone());
            }
        }
        self.runtime = fresh;
    }

    async fn maybe_restart(&mut self, pod: &Pod, c: &Container, exited: &cri::ContainerStatus) -> Option<Instant> {
        let key = format!("{}/{}", self.uid, c.name);
        let failed_at = self.exited_seen_at.get(&exited.id).copied().unwrap_or_else(Instant::now);
        let now = Instant::now();
        if self.restart_backoff.in_backoff_since(&key, failed_at, now) {
            let delay = self.restart_backoff.delay(&key);
            let msg = format!(
                "back-off {} restarting failed container={} pod={}_{}({})",
                humanize(delay),
                c.name,
                pod_name(pod),
                pod_namespace(pod),
                self.uid
            );
            if self.waiting.get(&c.name).map(|w| w.reason) != Some(WaitingReason::CrashLoopBackOff) {
                self.api.event(
                    &container_ref(pod, &c.name),
                    Warning,
                    "BackOff",
                    "Back-off restarting failed container",
                );
            }
            self.set_waiting(&c.name, WaitingReason::CrashLoopBackOff, msg);
            return Some(failed_at + delay);
        }
        self.restart_backoff.next(&key, now);
        let attempt = exited.metadata.as_ref().map(|m| m.attempt + 1).unwrap_or(1);
        self.start(pod, c, attempt).await
    }

    /// Starts each ephemeral container that never ran, once (restart policy Never, whatever the
    /// pod's), in the pod's sandbox; one with `targetContainerName` joins that container's process
    /// namespace, and waits (`CreateContainerConfigError`) while the target is not running.
    async fn sync_ephemeral(&mut self, pod: &Pod) -> Option<Instant> {
        let mut wake: Option<Instant> = None;
        for (c, target) in spec::ephemeral_containers(pod) {
            if self.ephemeral_ran.contains_key(&c.name) {
                continue;
            }
            let target_id = match target {
                None => None,
                Some(t) => match self.runtime.get(&t) {
                    Some((Some(s), _)) if is_state(s, cri::ContainerState::ContainerRunning) => Some(s.id.clone()),
                    _ => {
                        let msg = format!("unable to find target container {t}");
                        if self.waiting.get(&c.name).map(|w| w.message.as_str()) != Some(msg.as_str()) {
                            self.api.event(&container_ref(pod, &c.name), Warning, "Failed", &format!("Error: {msg}"));
                        }
                        self.set_waiting(&c.name, WaitingReason::CreateContainerConfigError, msg);
                        let retry = Instant::now() + Duration::from_secs(1);
                        wake = Some(wake.map_or(retry, |w| w.min(retry)));
                        continue;
                    }
                },
            };
            if let Some(w) = self.start_instance(pod, &c, 0, target_id.as_deref()).await {
                wake = Some(wake.map_or(w, |x| x.min(w)));
            }
        }
        wake
    }

    /// Pulls the image if needed, creates and starts one container instance.
    async fn start(&mut self, pod: &Pod, c: &Container, attempt: u32) -> Option<Instant> {
        self.start_instance(pod, c, attempt, None).await
    }

    /// [`Self::start`], in the process namespace of the container `target_id` if given.
    async fn start_instance(
        &mut self,
        pod: &Pod,
        c: &Container,
        attempt: u32,
        target_id: Option<&str>,
    ) -> Option<Instant> {
        let image = c.image.clone().unwrap_or_default();
        let policy = c.image_pull_policy.clone().unwrap_or_else(|| "IfNotPresent".into());
        let pull_key = format!("{}/{}/{}", self.uid, c.name, image);
        if let Some(t) = self.pull_failed_at.get(&pull_key).copied() {
            if self.pull_backoff.in_backoff_since(&pull_key, t, Instant::now()) {
                let msg = format!("Back-off pulling image \"{image}\"");
                if self.waiting.get(&c.name).map(|w| w.reason) != Some(WaitingReason::ImagePullBackOff) {
                    self.api.event(&container_ref(pod, &c.name), Normal, "BackOff", &msg);
                }
                self.set_waiting(&c.name, WaitingReason::ImagePullBackOff, msg);
                return Some(t + self.pull_backoff.delay(&pull_key));
            }
        }
        self.set_waiting(&c.name, WaitingReason::ContainerCreating, String::new());
        let secrets = self.pull_secrets(pod).await;
        let ensured =
            match crate::images::ensure_image(&self.shared, &image, &policy, &secrets, &container_ref(pod, &c.name))
                .await
            {
                Ok(e) => {
                    self.pull_failed_at.remove(&pull_key);
                    self.pull_backoff.forget(&pull_key);
                    e
                }
                Err(e) => {
                    let reason = match e {
                        crate::images::PullError::NeverPull(_) => WaitingReason::ErrImageNeverPull,
                        crate::images::PullError::Failed(_) => WaitingReason::ErrImagePull,
                    };
                    self.pull_failed_at.insert(pull_key.clone(), Instant::now());
                    self.pull_backoff.next(&pull_key, Instant::now());
                    self.set_waiting(&c.name, reason, e.to_string());
                    return Some(Instant::now() + self.pull_backoff.delay(&pull_key));
                }
            };
        let api = self.api.clone();
        let source = api.objects();
        let env_ctx = super::env::EnvContext {
            node_allocatable: self.allocatable(),
            pod_ips: self.sandbox.as_ref().and_then(|s| s.ip.clone()).into_iter().collect(),
            host_ips: vec![self.shared.config.node_ip.to_string()],
        };
        let enable_service_links = pod.spec.as_ref().and_then(|s| s.enable_service_links).unwrap_or(true);
        let envs = match self.shared.services.env(spec::pod_namespace(pod), enable_service_links).await {
            Ok(service_env) => super::env::container_env(source, pod, c, &service_env, &env_ctx).await,
            Err(e) => Err(e.into()),
        };
        let envs = match envs {
            Ok(e) => e,
            Err(e) => {
                let msg = e.to_string();
                self.api.event(&container_ref(pod, &c.name), Warning, "Failed", &format!("Error: {msg}"));
                self.set_waiting(&c.name, WaitingReason::CreateContainerConfigError, msg);
                return Some(Instant::now() + Duration::from_secs(2));
            }
        };
        let mut mounts = match self.prepared.as_ref().map(|p| p.mounts_for_env(c, &envs)) {
            Some(Ok(m)) => m,
            Some(Err(e)) => {
                let msg = e.to_string();
                self.set_waiting(&c.name, WaitingReason::CreateContainerConfigError, msg);
                return Some(Instant::now() + Duration::from_secs(2));
            }
            None => Vec::new(),
        };
        mounts.extend(self.pod_mounts(pod, c, attempt));
        let Some(sb) = &self.sandbox else { return Some(Instant::now()) };
        let mut config = spec::container_config(
            pod,
            c,
            spec::ContainerInputs {
                image_ref: ensured.image_ref,
                attempt,
                envs,
                mounts,
                memory_capacity: crate::host::memory_capacity_bytes(),
            },
        );
        if let Some(t) = target_id {
            spec::target_pid_namespace(&mut config, t);
        }
        let sandbox_config = spec::sandbox_config(&self.shared.config, pod, sb.attempt, &self.host_resolv);
        let rt = self.shared.runtime.clone();
        let shared = self.shared.clone();
        let slot = shared.start_slots.acquire().await;
        let created = rt
            .create_container(cri::CreateContainerRequest {
                pod_sandbox_id: sb.id.clone(),
                config: Some(config),
                sandbox_config: Some(sandbox_config),
            })
            .await;
        let id = match created {
            Ok(r) => r.container_id,
            Err(e) => {
                let msg = e.to_string();
                self.api.event(&container_ref(pod, &c.name), Warning, "Failed", &format!("Error: {msg}"));
                self.set_waiting(&c.name, WaitingReason::CreateContainerError, msg);
                return Some(Instant::now() + Duration::from_secs(2));
            }
        };
        self.api.event(&container_ref(pod, &c.name), Normal, "Created", &format!("Created container: {}", c.name));
        let started = rt.start_container(cri::StartContainerRequest { container_id: id.clone() }).await;
        drop(slot);
        if let Err(e) = started {
            let msg = e.to_string();
            self.api.event(&container_ref(pod, &c.name), Warning, "Failed", &format!("Error: {msg}"));
            self.set_waiting(&c.name, WaitingReason::RunContainerError, msg);
            return Some(Instant::now() + Duration::from_secs(2));
        }
        self.api.event(&container_ref(pod, &c.name), Normal, "Started", &format!("Started container {}", c.name));
        self.waiting.remove(&c.name);
        if let Some(h) = c.lifecycle.as_ref().and_then(|l| l.post_start.as_ref()) {
            let target = self.probe_target(c, &id);
            if let Err(f) = super::hooks::run_hook(rt.as_ref(), h, &target, Duration::from_secs(30)).await {
                let msg = f.event_message(&c.name, &pod_desc(pod));
                self.api.event(&container_ref(pod, &c.name), Warning, "FailedPostStartHook", &msg);
                let stopped =
                    rt.stop_container(cri::StopContainerRequest { container_id: id.clone(), timeout: 0 }).await;
                logged(stopped, "StopContainer", &id);
            }
        }
        None
    }

    fn allocatable(&self) -> HashMap<String, String> {
        let mut m = HashMap::new();
        m.insert("cpu".into(), std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).to_string());
        m.insert("memory".into(), crate::host::memory_capacity_bytes().to_string());
        m
    }

    /// `/etc/hosts` and the termination-message file, which the kubelet manages per pod.
    fn pod_mounts(&self, pod: &Pod, c: &Container, attempt: u32) -> Vec<cri::Mount> {
        let dir = self.shared.config.root_dir.join("pods").join(&self.uid);
        let mut out = Vec::new();
        if !spec::host_network(pod) {
            let hosts = dir.join("etc-hosts");
            if !hosts.exists() {
                let ip = self.sandbox.as_ref().and_then(|s| s.ip.clone()).unwrap_or_default();
                let host =
                    pod.spec.as_ref().and_then(|s| s.hostname.clone()).unwrap_or_else(|| pod_name(pod).to_string());
                let mut text = String::from(
                    "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n",
                );
                if !ip.is_empty() {
                    text.push_str(&format!("{ip}\t{host}\n"));
                }
                for ha in pod.spec.as_ref().and_then(|s| s.host_aliases.clone()).unwrap_or_default() {
                    text.push_str(&format!(
                        "\n# Entries added by HostAliases.\n{}\t{}\n",
                        ha.ip,
                        ha.hostnames.unwrap_or_default().join("\t")
                    ));
                }
                logged_io(std::fs::create_dir_all(&dir), "creating", &dir);
                logged_io(std::fs::write(&hosts, text), "writing", &hosts);
            }
            out.push(cri::Mount {
                container_path: "/etc/hosts".into(),
                host_path: hosts.display().to_string(),
                ..Default::default()
            });
        }
        let path = c.termination_message_path.clone().unwrap_or_else(|| "/dev/termination-log".into());
        let term_dir = dir.join("containers").join(&c.name);
        logged_io(std::fs::create_dir_all(&term_dir), "creating", &term_dir);
        let file = term_dir.join(format!("{attempt}"));
        logged_io(std::fs::write(&file, b""), "writing", &file);
        out.push(cri::Mount { container_path: path, host_path: file.display().to_string(), ..Default::default() });
        out
    }

    async fn pull_secrets(&self, pod: &Pod) -> Vec<Value> {
        let names: Vec<String> = pod
            .spec
            .as_ref()
            .and_then(|s| s.image_pull_secrets.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|r| r.name)
            .collect();
        let mut out = Vec::new();
        for n in names {
            match self.api.objects().secret(pod_namespace(pod), &n).await {
                Ok(s) => match serde_json::to_value(&s) {
                    Ok(v) => out.push(v),
                    Err(e) => tracing::warn!(error = %e, secret = %n, "image pull secret does not serialize"),
                },
                // Upstream pulls without a missing secret, and says so.
                Err(e) => tracing::warn!(error = %e, secret = %n, "image pull secret unavailable"),
            }
        }
        out
    }

    fn probe_target(&self, c: &Container, id: &str) -> ProbeTarget {
        ProbeTarget {
            pod_ip: self.sandbox.as_ref().and_then(|s| s.ip.as_ref()).and_then(|ip| ip.parse().ok()),
            container_id: id.to_string(),
            container: c.clone(),
        }
    }

    fn ensure_probes(&mut self, c: &Container, id: &str) {
        let kinds = [
            (ProbeKind::Startup, c.startup_probe.clone()),
            (ProbeKind::Liveness, c.liveness_probe.clone()),
            (ProbeKind::Readiness, c.readiness_probe.clone()),
        ];
        for (kind, probe) in kinds {
            let Some(probe) = probe else { continue };
            let key = (c.name.clone(), kind);
            if self.probes.get(&key).is_some_and(|h| h.container_id() == id) {
                continue;
            }
            if let Some(old) = self.probes.remove(&key) {
                old.stop();
            }
            let target = self.probe_target(c, id);
            let h = super::probes::ProbeWorker::spawn(
                kind,
                probe,
                target,
                self.shared.runtime.clone(),
                self.probe_tx.clone(),
                self.shared.cancel.child_token(),
            );
            self.probes.insert(key, h);
        }
        // Startup gates liveness and readiness.
        let startup_done = c.startup_probe.is_none()
            || self.probe_results.get(&(id.to_string(), ProbeKind::Startup)) == Some(&ProbeResult::Success);
        if startup_done {
            for kind in [ProbeKind::Liveness, ProbeKind::Readiness] {
                if let Some(h) = self.probes.get(&(c.name.clone(), kind)) {
                    h.startup_succeeded();
                }
            }
        }
    }

    fn stop_probes(&mut self, name: &str) {
        for kind in [ProbeKind::Startup, ProbeKind::Liveness, ProbeKind::Readiness] {
            if let Some(h) = self.probes.remove(&(name.to_string(), kind)) {
                h.stop();
            }
        }
    }

    async fn on_probe(&mut self, u: ProbeUpdate) {
        if let Some(ev) = u.event() {
            if let Some(r) = self.current_pod_ref(&u.container_name) {
                self.api.event(&r, Warning, ev.reason, &ev.message);
            }
        }
        let result = match u.result {
            ProbeResult::Warning => ProbeResult::Success,
            r => r,
        };
        self.probe_results.insert((u.container_id.clone(), u.kind), result);
    }

    fn current_pod_ref(&self, container: &str) -> Option<ObjectReference> {
        let pod = self.last_pod.as_ref()?;
        Some(container_ref(pod, container))
    }

    async fn kill_unhealthy(&mut self, pod: &Pod, c: &Container, s: &cri::ContainerStatus) {
        let failed_startup = self.probe_results.get(&(s.id.clone(), ProbeKind::Startup)) == Some(&ProbeResult::Failure);
        let msg = if failed_startup {
            format!("Container {} failed startup probe, will be restarted", c.name)
        } else {
            format!("Container {} failed liveness probe, will be restarted", c.name)
        };
        self.api.event(&container_ref(pod, &c.name), Normal, "Killing", &msg);
        self.stop_probes(&c.name);
        self.probe_results.retain(|(id, _), _| id != &s.id);
        let grace = pod.spec.as_ref().and_then(|sp| sp.termination_grace_period_seconds).unwrap_or(30);
        let grace = c.liveness_probe.as_ref().and_then(|p| p.termination_grace_period_seconds).unwrap_or(grace);
        let deadline = Instant::now() + Duration::from_secs(grace.max(0) as u64);
        self.stop_container(pod, c, &s.id, deadline).await;
    }

    /// Runs the container's preStop hook, then stops it; it has until `deadline` (at least a
    /// second for the hook, two for the stop).
    async fn stop_container(&self, pod: &Pod, c: &Container, id: &str, deadline: Instant) {
        if let Some(h) = c.lifecycle.as_ref().and_then(|l| l.pre_stop.as_ref()) {
            let target = self.probe_target(c, id);
            let budget = deadline.saturating_duration_since(Instant::now()).max(Duration::from_secs(1));
            if let Err(f) = super::hooks::run_hook(self.shared.runtime.as_ref(), h, &target, budget).await {
                let msg = f.event_message(&c.name, &pod_desc(pod));
                self.api.event(&container_ref(pod, &c.name), Warning, "FailedPreStopHook", &msg);
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let left = (left.as_secs() + u64::from(left.subsec_nanos() > 0)).max(2) as i64;
        if let Err(e) = self
            .shared
            .runtime
            .stop_container(cri::StopContainerRequest { container_id: id.to_string(), timeout: left })
            .await
        {
            tracing::warn!(error = %e, call = "StopContainer", id, container = %c.name, "CRI call failed");
        }
    }

    async fn kill_containers(&mut self, pod: &Pod, deadline: Instant) {
        let (inits, apps) = all_containers(pod);
        let ephemeral: Vec<Container> = spec::ephemeral_containers(pod).into_iter().map(|(c, _)| c).collect();
        let mut stops = Vec::new();
        for c in ephemeral.iter().chain(apps.iter()).chain(inits.iter()) {
            self.stop_probes(&c.name);
            if let Some((Some(s), _)) = self.runtime.get(&c.name) {
                if is_state(s, cri::ContainerState::ContainerRunning)
                    || is_state(s, cri::ContainerState::ContainerCreated)
                {
                    self.api.event(
                        &container_ref(pod, &c.name),
                        Normal,
                        "Killing",
                        &format!("Stopping container {}", c.name),
                    );
                    stops.push((c.clone(), s.id.clone()));
                }
            }
        }
        let this = &*self;
        futures::future::join_all(stops.iter().map(|(c, id)| this.stop_container(pod, c, id, deadline))).await;
    }

    /// Stops containers and the sandbox and removes them, the pod cgroup and the volumes.
    /// The containers' last states are read before the sandbox (and with it the containers)
    /// goes, for the final status.
    async fn teardown(&mut self, pod: &Pod, deadline: Instant) {
        self.kill_containers(pod, deadline).await;
        self.refresh(pod).await;
        let rt = self.shared.runtime.clone();
        let mut filter = cri::PodSandboxFilter::default();
        filter.label_selector.insert(spec::LABEL_POD_UID.into(), self.uid.clone());
        let listed = rt.list_pod_sandbox(cri::ListPodSandboxRequest { filter: Some(filter) }).await;
        let sandboxes = logged(listed, "ListPodSandbox", &self.uid).map(|l| l.items).unwrap_or_default();
        for sb in sandboxes {
            let stopped = rt.stop_pod_sandbox(cri::StopPodSandboxRequest { pod_sandbox_id: sb.id.clone() }).await;
            logged(stopped, "StopPodSandbox", &sb.id);
            let removed = rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: sb.id.clone() }).await;
            logged(removed, "RemovePodSandbox", &sb.id);
        }
        cgroups::remove(
            std::path::Path::new("/sys/fs/cgroup"),
            &cgroups::pod_cgroup(&self.shared.config.cgroup_root, &self.uid),
        );
    }

    /// Tears a deleted pod down within its grace period (2 s once the API no longer has it),
    /// reports its final status and deletes the object; `None` once the worker is done.
    async fn terminate(&mut self, pod: &Pod, removed: bool) -> Option<Instant> {
        if self.state != (PodState::Terminated { left: Remains::Nothing }) {
            self.refresh(pod).await;
            let grace = if removed {
                2
            } else {
                pod.metadata
                    .deletion_grace_period_seconds
                    .or_else(|| pod.spec.as_ref().and_then(|s| s.termination_grace_period_seconds))
                    .unwrap_or(30)
            };
            let deadline = Instant::now() + Duration::from_secs(grace.max(0) as u64);
            self.state = PodState::Terminating { deadline };
            self.teardown(pod, deadline).await;
            self.volumes.cleanup(&self.uid).await;
            let dir = self.shared.config.root_dir.join("pods").join(&self.uid);
            logged_io(std::fs::remove_dir_all(&dir), "removing", &dir);
            self.state = PodState::Terminated { left: Remains::Nothing };
        }
        if removed {
            return None;
        }
        // Final status, then the object goes (the kubelet's grace-0 delete).
        self.push_status(pod, true).await;
        match self.api.delete_terminated(pod_namespace(pod), pod_name(pod), &self.uid).await {
            Ok(()) => Some(Instant::now() + RESYNC),
            Err(PodApiError::NotFound { .. } | PodApiError::Conflict { .. }) => None,
            Err(e) => {
                tracing::warn!(error = %e, "deleting terminated pod failed");
                Some(Instant::now() + RESYNC)
            }
        }
    }

    /// The termination message of an exited instance: the file the container wrote, or with
    /// `FallbackToLogsOnError` the tail of its log when it failed without writing one.
    fn termination_message(&self, c: &Container, s: &cri::ContainerStatus) -> String {
        const MAX: usize = 4096;
        let attempt = s.metadata.as_ref().map(|m| m.attempt).unwrap_or(0);
        let file = self
            .shared
            .config
            .root_dir
            .join("pods")
            .join(&self.uid)
            .join("containers")
            .join(&c.name)
            .join(attempt.to_string());
        let mut msg = std::fs::read(&file)
            .map(|b| String::from_utf8_lossy(&b[..b.len().min(MAX)]).into_owned())
            .unwrap_or_default();
        if msg.is_empty()
            && s.exit_code != 0
            && c.termination_message_policy.as_deref() == Some("FallbackToLogsOnError")
        {
            let log = std::fs::read_to_string(&s.log_path).unwrap_or_default();
            let lines: Vec<&str> = log.lines().rev().take(80).collect();
            let text: Vec<String> =
                lines.into_iter().rev().map(|l| l.splitn(4, ' ').nth(3).unwrap_or("").to_string()).collect();
            let joined = text.join("\n");
            let mut start = joined.len().saturating_sub(2048);
            while !joined.is_char_boundary(start) {
                start += 1;
            }
            msg = joined[start..].to_string();
        }
        msg
    }

    fn instance_of(&self, c: &Container, s: &cri::ContainerStatus) -> Instance {
        let mut i = instance(s);
        if i.state == InstanceState::Exited && i.message.is_empty() {
            i.message = self.termination_message(c, s);
        }
        i
    }

    fn records(&self, containers: &[Container]) -> Vec<ContainerRecord> {
        containers
            .iter()
            .map(|c| {
                let (cur, prev) = self
                    .runtime
                    .get(&c.name)
                    .cloned()
                    .or_else(|| self.ephemeral_ran.get(&c.name).map(|s| (Some(s.clone()), None)))
                    .unwrap_or((None, None));
                let cur_i = cur.as_ref().map(|s| self.instance_of(c, s));
                let running = cur_i.as_ref().is_some_and(|i| i.state == InstanceState::Running);
                let id = cur.as_ref().map(|s| s.id.clone()).unwrap_or_default();
                let res = |k| self.probe_results.get(&(id.clone(), k)).copied();
                let started =
                    running && (c.startup_probe.is_none() || res(ProbeKind::Startup) == Some(ProbeResult::Success));
                let ready = running
                    && started
                    && (c.readiness_probe.is_none() || res(ProbeKind::Readiness) == Some(ProbeResult::Success));
                let waiting = self
                    .waiting
                    .get(&c.name)
                    .filter(|_| !running)
                    .map(|w| (w.reason.as_str().to_string(), w.message.clone()));
                ContainerRecord {
                    name: c.name.clone(),
                    image: c.image.clone().unwrap_or_default(),
                    restart_count: cur
                        .as_ref()
                        .and_then(|s| s.metadata.as_ref())
                        .map(|m| m.attempt as i32)
                        .unwrap_or(0),
                    current: cur_i,
                    previous: prev.as_ref().map(|s| self.instance_of(c, s)),
                    waiting,
                    ready,
                    started,
                }
            })
            .collect()
    }

    async fn push_status(&mut self, pod: &Pod, terminating: bool) {
        self.last_pod = Some(pod.clone());
        let (inits, apps) = all_containers(pod);
        let init = self.records(&inits);
        let containers = self.records(&apps);
        let ephemeral_specs: Vec<Container> = spec::ephemeral_containers(pod).into_iter().map(|(c, _)| c).collect();
        let ephemeral = self.records(&ephemeral_specs);
        let sandbox_ready = self.sandbox.is_some() && self.state == PodState::Syncing;
        let observed = status::Observed {
            pod,
            init: &init,
            containers: &containers,
            ephemeral: &ephemeral,
            sandbox_ready,
            pod_ip: if spec::host_network(pod) {
                Some(self.shared.config.node_ip.to_string())
            } else {
                self.sandbox.as_ref().and_then(|s| s.ip.clone())
            },
            host_ip: self.shared.config.node_ip.to_string(),
            start_time: self.start_time.clone(),
            now: now_rfc3339(),
            terminating,
        };
        let status = status::compute(&observed);
        if self.last_status.as_ref().is_some_and(|s| same_ignoring_heartbeat(s, &status)) {
            return;
        }
        let patch = json!({"metadata": {"uid": self.uid}, "status": status});
        match self.api.patch_status(pod_namespace(pod), pod_name(pod), &patch).await {
            Ok(()) => self.last_status = Some(status),
            Err(PodApiError::NotFound { .. }) => {}
            Err(e) => tracing::warn!(error = %e, pod = pod_name(pod), "updating pod status failed"),
        }
    }
}

fn same_ignoring_heartbeat(a: &Value, b: &Value) -> bool {
    a == b
}

fn humanize(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 60 && s.is_multiple_of(60) {
        format!("{}m0s", s / 60)
    } else if s >= 60 {
        format!("{}m{}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// Stops and removes sandboxes of pods the API no longer has (deleted while the kubelet was down).
pub async fn remove_orphans(shared: Arc<Shared>, volumes: Arc<VolumeManager>, known: HashSet<String>) {
    use tracing::Instrument as _;
    let listed = shared.runtime.list_pod_sandbox(cri::ListPodSandboxRequest { filter: None }).await;
    let Some(list) = logged(listed, "ListPodSandbox", "") else { return };
    for sb in list.items {
        let Some(uid) = sb.labels.get(spec::LABEL_POD_UID).cloned() else { continue };
        if known.contains(&uid) {
            continue;
        }
        tracing::info!(%uid, sandbox = %sb.id, "removing sandbox of a pod that no longer exists");
        let span = tracing::info_span!("pod", uid = %uid);
        remove_orphan(&shared, &volumes, &uid, &sb.id).instrument(span).await;
    }
}

/// Stops and removes one orphaned sandbox with its containers, then the pod's cgroup, volumes
/// and directory.
async fn remove_orphan(shared: &Shared, volumes: &VolumeManager, uid: &str, sandbox: &str) {
    let rt = shared.runtime.clone();
    let listed = rt
        .list_containers(cri::ListContainersRequest {
            filter: Some(cri::ContainerFilter { pod_sandbox_id: sandbox.to_string(), ..Default::default() }),
        })
        .await;
    let containers = logged(listed, "ListContainers", sandbox).map(|l| l.containers).unwrap_or_default();
    for c in containers {
        let stopped = rt.stop_container(cri::StopContainerRequest { container_id: c.id.clone(), timeout: 2 }).await;
        logged(stopped, "StopContainer", &c.id);
        let removed = rt.remove_container(cri::RemoveContainerRequest { container_id: c.id.clone() }).await;
        logged(removed, "RemoveContainer", &c.id);
    }
    let stopped = rt.stop_pod_sandbox(cri::StopPodSandboxRequest { pod_sandbox_id: sandbox.to_string() }).await;
    logged(stopped, "StopPodSandbox", sandbox);
    let removed = rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: sandbox.to_string() }).await;
    logged(removed, "RemovePodSandbox", sandbox);
    cgroups::remove(std::path::Path::new("/sys/fs/cgroup"), &cgroups::pod_cgroup(&shared.config.cgroup_root, uid));
    volumes.cleanup(uid).await;
    let dir = shared.config.root_dir.join("pods").join(uid);
    logged_io(std::fs::remove_dir_all(&dir), "removing", &dir);
}

#[cfg(test)]
mod tests;
