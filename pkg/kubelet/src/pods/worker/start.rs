//! Getting containers running and keeping them healthy: restarts with back-off, ephemeral
//! containers, image pulls, environment and mounts, CreateContainer and StartContainer,
//! postStart hooks, and the probes of running containers.

use super::status::WaitingReason;
use super::{container_ref, is_state, logged, logged_io, pod_desc, Worker};
use crate::pods::probes::{ProbeKind, ProbeResult, ProbeTarget, ProbeUpdate};
use crate::pods::spec::{self, pod_name, pod_namespace};
use k1s_cri::v1 as cri;
use k1s_runtime::events::EventType::{Normal, Warning};
use k8s_openapi::api::core::v1::{Container, ObjectReference, Pod};
use serde_json::Value;
use std::collections::HashMap;
use std::time::Duration;
use tokio::time::Instant;

impl Worker {
    pub(super) async fn maybe_restart(
        &mut self,
        pod: &Pod,
        c: &Container,
        exited: &cri::ContainerStatus,
    ) -> Option<Instant> {
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
    pub(super) async fn sync_ephemeral(&mut self, pod: &Pod) -> Option<Instant> {
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
    pub(super) async fn start(&mut self, pod: &Pod, c: &Container, attempt: u32) -> Option<Instant> {
        self.start_instance(pod, c, attempt, None).await
    }

    /// [`Self::start`], in the process namespace of the container `target_id` if given.
    pub(super) async fn start_instance(
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
        let env_ctx = crate::pods::env::EnvContext {
            node_allocatable: self.allocatable(),
            pod_ips: self.sandbox.as_ref().and_then(|s| s.ip.clone()).into_iter().collect(),
            host_ips: vec![self.shared.config.node_ip.to_string()],
        };
        let enable_service_links = pod.spec.as_ref().and_then(|s| s.enable_service_links).unwrap_or(true);
        let envs = match self.shared.services.env(spec::pod_namespace(pod), enable_service_links).await {
            Ok(service_env) => crate::pods::env::container_env(source, pod, c, &service_env, &env_ctx).await,
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
            if let Err(f) = crate::pods::hooks::run_hook(rt.as_ref(), h, &target, Duration::from_secs(30)).await {
                let msg = f.event_message(&c.name, &pod_desc(pod));
                self.api.event(&container_ref(pod, &c.name), Warning, "FailedPostStartHook", &msg);
                let stopped =
                    rt.stop_container(cri::StopContainerRequest { container_id: id.clone(), timeout: 0 }).await;
                logged(stopped, "StopContainer", &id);
            }
        }
        None
    }

    pub(super) fn allocatable(&self) -> HashMap<String, String> {
        let mut m = HashMap::new();
        m.insert("cpu".into(), std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).to_string());
        m.insert("memory".into(), crate::host::memory_capacity_bytes().to_string());
        m
    }

    /// `/etc/hosts` and the termination-message file, which the kubelet manages per pod.
    pub(super) fn pod_mounts(&self, pod: &Pod, c: &Container, attempt: u32) -> Vec<cri::Mount> {
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

    pub(super) async fn pull_secrets(&self, pod: &Pod) -> Vec<Value> {
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

    pub(super) fn probe_target(&self, c: &Container, id: &str) -> ProbeTarget {
        ProbeTarget {
            pod_ip: self.sandbox.as_ref().and_then(|s| s.ip.as_ref()).and_then(|ip| ip.parse().ok()),
            container_id: id.to_string(),
            container: c.clone(),
        }
    }

    pub(super) fn ensure_probes(&mut self, c: &Container, id: &str) {
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
            let h = crate::pods::probes::ProbeWorker::spawn(
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

    pub(super) fn stop_probes(&mut self, name: &str) {
        for kind in [ProbeKind::Startup, ProbeKind::Liveness, ProbeKind::Readiness] {
            if let Some(h) = self.probes.remove(&(name.to_string(), kind)) {
                h.stop();
            }
        }
    }

    pub(super) async fn on_probe(&mut self, u: ProbeUpdate) {
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

    pub(super) fn current_pod_ref(&self, container: &str) -> Option<ObjectReference> {
        let pod = self.last_pod.as_ref()?;
        Some(container_ref(pod, container))
    }
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
