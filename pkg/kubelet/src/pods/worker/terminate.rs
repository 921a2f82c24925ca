//! Stopping: a container whose liveness or startup probe failed, all containers of a finished
//! pod, and a deleted pod's teardown within its grace period (preStop hooks, StopContainer,
//! sandbox, cgroup, volumes), its final status and the kubelet's final delete.

use super::api::PodApiError;
use super::{
    all_containers, container_ref, is_state, logged, logged_io, pod_desc, remove_pod_logs, PodState, Remains, Worker,
    RESYNC,
};
use crate::pods::cgroups;
use crate::pods::probes::{ProbeKind, ProbeResult};
use crate::pods::spec::{self, pod_name, pod_namespace};
use k1s_cri::v1 as cri;
use k1s_runtime::events::EventType::{Normal, Warning};
use k8s_openapi::api::core::v1::{Container, Pod};
use std::time::Duration;
use tokio::time::Instant;

impl Worker {
    pub(super) async fn kill_unhealthy(&mut self, pod: &Pod, c: &Container, s: &cri::ContainerStatus) {
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
    pub(super) async fn stop_container(&self, pod: &Pod, c: &Container, id: &str, deadline: Instant) {
        if let Some(h) = c.lifecycle.as_ref().and_then(|l| l.pre_stop.as_ref()) {
            let target = self.probe_target(c, id);
            let budget = deadline.saturating_duration_since(Instant::now()).max(Duration::from_secs(1));
            if let Err(f) = crate::pods::hooks::run_hook(self.shared.runtime.as_ref(), h, &target, budget).await {
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

    pub(super) async fn kill_containers(&mut self, pod: &Pod, deadline: Instant) {
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
    pub(super) async fn teardown(&mut self, pod: &Pod, deadline: Instant) {
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
    pub(super) async fn terminate(&mut self, pod: &Pod, removed: bool) -> Option<Instant> {
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
            remove_pod_logs(&self.shared.config.pod_log_dir, &self.uid);
            return None;
        }
        // Final status, then the object goes (the kubelet's grace-0 delete).
        self.push_status(pod, true).await;
        match self.api.delete_terminated(pod_namespace(pod), pod_name(pod), &self.uid).await {
            Ok(()) => Some(Instant::now() + RESYNC),
            Err(PodApiError::NotFound { .. } | PodApiError::Conflict { .. }) => {
                remove_pod_logs(&self.shared.config.pod_log_dir, &self.uid);
                None
            }
            Err(e) => {
                tracing::warn!(error = %e, "deleting terminated pod failed");
                Some(Instant::now() + RESYNC)
            }
        }
    }
}
