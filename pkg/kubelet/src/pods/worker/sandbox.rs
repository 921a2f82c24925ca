//! The pod's sandbox and what runs in it: find, adopt (after a kubelet restart) or create the
//! sandbox, set up volumes, read the containers' instances from the runtime, and remove the
//! sandboxes of pods the API no longer has.

use super::{is_state, logged, logged_io, pod_ref, remove_pod_logs, Worker};
use crate::pods::cgroups;
use crate::pods::spec::{self, pod_name};
use crate::pods::volumes::VolumeManager;
use crate::Shared;
use k1s_cri::v1 as cri;
use k1s_runtime::events::EventType::{Normal, Warning};
use k8s_openapi::api::core::v1::Pod;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

pub(super) struct Sandbox {
    pub(super) id: String,
    pub(super) ip: Option<String>,
    pub(super) attempt: u32,
}

impl Worker {
    /// Finds or creates a ready sandbox; false while it cannot be had.
    pub(super) async fn ensure_sandbox(&mut self, pod: &Pod) -> bool {
        let rt = self.shared.runtime.clone();
        if let Some(id) = self.sandbox.as_ref().map(|s| s.id.clone()) {
            let status = rt
                .pod_sandbox_status(cri::PodSandboxStatusRequest { pod_sandbox_id: id.clone(), verbose: false })
                .await;
            let ready = logged(status, "PodSandboxStatus", &id)
                .and_then(|r| r.status)
                .is_some_and(|s| s.state == cri::PodSandboxState::SandboxReady as i32);
            if ready {
                return true;
            }
            tracing::info!(pod = pod_name(pod), "sandbox is not ready; recreating it");
            self.kill_containers(pod, Instant::now() + Duration::from_secs(2)).await;
            let stopped = rt.stop_pod_sandbox(cri::StopPodSandboxRequest { pod_sandbox_id: id.clone() }).await;
            logged(stopped, "StopPodSandbox", &id);
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

    pub(super) async fn ensure_volumes(&mut self, pod: &Pod) -> bool {
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
    pub(super) async fn refresh(&mut self, pod: &Pod) {
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
    remove_pod_logs(&shared.config.pod_log_dir, uid);
}
