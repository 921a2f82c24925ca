//! What the worker reports: container records from the runtime's instances (termination
//! messages included), waiting reasons, and the pod status patch, sent only when it changed.

use super::api::PodApiError;
use super::Worker;
use super::{all_containers, now_rfc3339, PodState};
use crate::pods::probes::{ProbeKind, ProbeResult};
use crate::pods::spec::{self, pod_name, pod_namespace};
use crate::pods::status::{self, ContainerRecord, Instance, InstanceState};
use k1s_cri::v1 as cri;
use k8s_openapi::api::core::v1::{Container, Pod};
use serde_json::{json, Value};

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
pub(super) struct Waiting {
    pub(super) reason: WaitingReason,
    pub(super) message: String,
}

pub(super) fn ns_to_rfc3339(ns: i64) -> Option<String> {
    if ns <= 0 {
        return None;
    }
    jiff::Timestamp::from_nanosecond(ns as i128).ok().map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
}

pub(super) fn instance(s: &cri::ContainerStatus) -> Instance {
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

impl Worker {
    /// The termination message of an exited instance: the file the container wrote, or with
    /// `FallbackToLogsOnError` the tail of its log when it failed without writing one.
    pub(super) fn termination_message(&self, c: &Container, s: &cri::ContainerStatus) -> String {
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

    pub(super) fn instance_of(&self, c: &Container, s: &cri::ContainerStatus) -> Instance {
        let mut i = instance(s);
        if i.state == InstanceState::Exited && i.message.is_empty() {
            i.message = self.termination_message(c, s);
        }
        i
    }

    pub(super) fn records(&self, containers: &[Container]) -> Vec<ContainerRecord> {
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

    pub(super) async fn push_status(&mut self, pod: &Pod, terminating: bool) {
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
