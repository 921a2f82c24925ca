//! The fake runtime's in-memory state machine: sandboxes (READY ▶ NOTREADY), containers
//! (CREATED ▶ RUNNING ▶ EXITED), images, and the scripted behaviours. Synchronous and pure apart
//! from the clocks; `FakeRuntime` wraps it in a mutex. Errors use the codes containerd answers
//! with: `NotFound` for missing objects, `Unknown` for calls made in the wrong state.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

use super::image_ref::{fake_digest, normalize, repository};
use super::{ContainerBehavior, ExecScript, FailureRule, RecordedCall};
use crate::error::{Code, CriError, CriOp};
use crate::service::CriResult;
use crate::v1::*;

/// Exit code of a container killed with SIGKILL (128 + 9).
const KILLED_EXIT_CODE: i32 = 137;
/// Exit code of a container ended by SIGTERM (128 + 15).
const TERMINATED_EXIT_CODE: i32 = 143;
/// Exit code containerd reports for a container whose process could not be started.
const START_ERROR_EXIT_CODE: i32 = 128;
/// Size the fake gives every image.
const FAKE_IMAGE_SIZE: u64 = 1_245_184;

pub(super) fn now_ns() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

fn duration_ns(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

struct FakeSandbox {
    status: PodSandboxStatus,
    config: PodSandboxConfig,
    reserved_name: String,
}

struct FakeContainer {
    sandbox_id: String,
    /// The config it was created with (namespaces, command, stdin…), for tests to inspect.
    config: ContainerConfig,
    status: ContainerStatus,
    behavior: ContainerBehavior,
    started: Option<Instant>,
    reserved_name: String,
}

/// Usage figures reported by the stats calls for containers of a given name.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Usage {
    pub cpu_core_nanoseconds: u64,
    pub working_set_bytes: u64,
}

pub(super) struct State {
    seq: u64,
    sandboxes: BTreeMap<String, FakeSandbox>,
    containers: BTreeMap<String, FakeContainer>,
    images: BTreeMap<String, Image>,
    /// Reserved sandbox and container names ▶ the id holding them.
    names: HashMap<String, String>,
    pub behaviors: HashMap<String, ContainerBehavior>,
    pub usage: HashMap<String, Usage>,
    pub exec_scripts: Vec<ExecScript>,
    pub failures: Vec<FailureRule>,
    pub calls: Vec<RecordedCall>,
    /// (container id, timeout) of every StopContainer call.
    pub stop_timeouts: Vec<(String, i64)>,
    /// (container id, command) of every ExecSync call.
    pub exec_commands: Vec<(String, Vec<String>)>,
    pub network_ready: bool,
    pub streaming_base: String,
    pub pod_cidr: String,
    pub pull_delay: Duration,
    next_ip: u32,
}

impl State {
    pub fn new() -> Self {
        State {
            seq: 0,
            sandboxes: BTreeMap::new(),
            containers: BTreeMap::new(),
            images: BTreeMap::new(),
            names: HashMap::new(),
            behaviors: HashMap::new(),
            usage: HashMap::new(),
            exec_scripts: Vec::new(),
            failures: Vec::new(),
            calls: Vec::new(),
            stop_timeouts: Vec::new(),
            exec_commands: Vec::new(),
            network_ready: true,
            streaming_base: "http://127.0.0.1:10010".to_string(),
            pod_cidr: String::new(),
            pull_delay: Duration::ZERO,
            next_ip: 2,
        }
    }

    fn next_id(&mut self, kind: &str) -> String {
        self.seq += 1;
        fake_digest(&format!("{kind}-{}", self.seq)).trim_start_matches("sha256:").to_string()
    }

    /// Records the call, then answers with an injected failure if a rule matches.
    pub fn begin(&mut self, op: CriOp, target: &str) -> CriResult<()> {
        self.calls.push(RecordedCall { op, target: target.to_string() });
        self.settle();
        let rule = self.failures.iter_mut().rev().find(|rule| rule.matches(op, target));
        match rule {
            Some(rule) => {
                let error = rule.error.clone();
                if let Some(times) = rule.times.as_mut() {
                    *times -= 1;
                }
                self.failures.retain(|rule| rule.times != Some(0));
                Err(error)
            }
            None => Ok(()),
        }
    }

    /// Lets containers whose behaviour says so exit on their own.
    fn settle(&mut self) {
        let now = Instant::now();
        for container in self.containers.values_mut() {
            let Some(started) = container.started else { continue };
            if container.status.state() != ContainerState::ContainerRunning {
                continue;
            }
            if let Some(after) = container.behavior.exit_after {
                if now.duration_since(started) >= after {
                    let finished = container.status.started_at.saturating_add(duration_ns(after));
                    let code = container.behavior.exit_code;
                    let reason = container.behavior.reason.clone();
                    exit(&mut container.status, code, finished, reason);
                }
            }
        }
    }

    // ----- sandboxes ---------------------------------------------------------------------------

    pub fn run_pod_sandbox(&mut self, req: RunPodSandboxRequest) -> CriResult<RunPodSandboxResponse> {
        let op = CriOp::RunPodSandbox;
        let config = req.config.unwrap_or_default();
        let Some(meta) = config.metadata.clone() else {
            return Err(CriError::rpc(op, Code::InvalidArgument, "sandbox config must include metadata"));
        };
        let name = format!("{}_{}_{}_{}", meta.name, meta.namespace, meta.uid, meta.attempt);
        let id = self.next_id("sandbox");
        self.reserve(op, &name, &id)?;
        let host_network = config
            .linux
            .as_ref()
            .and_then(|l| l.security_context.as_ref())
            .and_then(|s| s.namespace_options.as_ref())
            .is_some_and(|n| n.network() == NamespaceMode::Node);
        let ip = if host_network {
            String::new()
        } else {
            let ip = format!("10.42.{}.{}", self.next_ip / 256, self.next_ip % 256);
            self.next_ip += 1;
            ip
        };
        let namespace_options =
            config.linux.as_ref().and_then(|l| l.security_context.as_ref()).and_then(|s| s.namespace_options.clone());
        let status = PodSandboxStatus {
            id: id.clone(),
            metadata: Some(meta),
            state: PodSandboxState::SandboxReady.into(),
            created_at: now_ns(),
            network: Some(PodSandboxNetworkStatus { ip, additional_ips: Vec::new() }),
            linux: Some(LinuxPodSandboxStatus { namespaces: Some(Namespace { options: namespace_options }) }),
            labels: config.labels.clone(),
            annotations: config.annotations.clone(),
            runtime_handler: req.runtime_handler,
        };
        self.sandboxes.insert(id.clone(), FakeSandbox { status, config, reserved_name: name });
        Ok(RunPodSandboxResponse { pod_sandbox_id: id })
    }

    fn sandbox_id(&self, op: CriOp, id: &str) -> CriResult<String> {
        resolve(&self.sandboxes, id).ok_or_else(|| CriError::not_found(op, format!("sandbox {id:?}")))
    }

    pub fn stop_pod_sandbox(&mut self, req: StopPodSandboxRequest) -> CriResult<StopPodSandboxResponse> {
        let id = self.sandbox_id(CriOp::StopPodSandbox, &req.pod_sandbox_id)?;
        self.stop_sandbox(&id);
        Ok(StopPodSandboxResponse {})
    }

    fn stop_sandbox(&mut self, id: &str) {
        let now = now_ns();
        for container in self.containers.values_mut().filter(|c| c.sandbox_id == id) {
            if container.status.state() == ContainerState::ContainerRunning {
                exit(&mut container.status, KILLED_EXIT_CODE, now, None);
            }
        }
        if let Some(sandbox) = self.sandboxes.get_mut(id) {
            sandbox.status.set_state(PodSandboxState::SandboxNotready);
        }
    }

    pub fn remove_pod_sandbox(&mut self, req: RemovePodSandboxRequest) -> CriResult<RemovePodSandboxResponse> {
        let Some(id) = resolve(&self.sandboxes, &req.pod_sandbox_id) else {
            return Ok(RemovePodSandboxResponse {});
        };
        self.stop_sandbox(&id);
        let members: Vec<String> =
            self.containers.iter().filter(|(_, c)| c.sandbox_id == id).map(|(cid, _)| cid.clone()).collect();
        for cid in members {
            self.remove_container_now(&cid);
        }
        if let Some(sandbox) = self.sandboxes.remove(&id) {
            self.names.remove(&sandbox.reserved_name);
        }
        Ok(RemovePodSandboxResponse {})
    }

    pub fn pod_sandbox_status(&mut self, req: PodSandboxStatusRequest) -> CriResult<PodSandboxStatusResponse> {
        let id = self.sandbox_id(CriOp::PodSandboxStatus, &req.pod_sandbox_id)?;
        let status = self.sandboxes.get(&id).map(|s| s.status.clone());
        Ok(PodSandboxStatusResponse {
            status,
            info: HashMap::new(),
            containers_statuses: Vec::new(),
            timestamp: now_ns(),
        })
    }

    pub fn list_pod_sandbox(&self, req: ListPodSandboxRequest) -> ListPodSandboxResponse {
        let filter = req.filter.unwrap_or_default();
        let items = self
            .sandboxes
            .values()
            .filter(|s| filter.id.is_empty() || s.status.id.starts_with(&filter.id))
            .filter(|s| filter.state.as_ref().is_none_or(|want| want.state == s.status.state))
            .filter(|s| labels_match(&filter.label_selector, &s.status.labels))
            .map(|s| PodSandbox {
                id: s.status.id.clone(),
                metadata: s.status.metadata.clone(),
                state: s.status.state,
                created_at: s.status.created_at,
                labels: s.status.labels.clone(),
                annotations: s.status.annotations.clone(),
                runtime_handler: s.status.runtime_handler.clone(),
            })
            .collect();
        ListPodSandboxResponse { items }
    }

    pub fn update_pod_sandbox_resources(
        &mut self,
        req: UpdatePodSandboxResourcesRequest,
    ) -> CriResult<UpdatePodSandboxResourcesResponse> {
        let id = self.sandbox_id(CriOp::UpdatePodSandboxResources, &req.pod_sandbox_id)?;
        if let Some(sandbox) = self.sandboxes.get_mut(&id) {
            let linux = sandbox.config.linux.get_or_insert_with(Default::default);
            linux.overhead = req.overhead;
            linux.resources = req.resources;
        }
        Ok(UpdatePodSandboxResourcesResponse {})
    }

    fn ready_sandbox(&self, op: CriOp, id: &str) -> CriResult<&FakeSandbox> {
        let id = self.sandbox_id(op, id)?;
        let sandbox = self.sandboxes.get(&id).ok_or_else(|| CriError::not_found(op, format!("sandbox {id:?}")))?;
        if sandbox.status.state() != PodSandboxState::SandboxReady {
            return Err(CriError::rpc(op, Code::Unknown, format!("sandbox {id:?} is not ready")));
        }
        Ok(sandbox)
    }

    // ----- containers --------------------------------------------------------------------------

    pub fn create_container(&mut self, req: CreateContainerRequest) -> CriResult<CreateContainerResponse> {
        let op = CriOp::CreateContainer;
        let sandbox = self.ready_sandbox(op, &req.pod_sandbox_id)?;
        let sandbox_id = sandbox.status.id.clone();
        let sandbox_meta = sandbox.status.metadata.clone().unwrap_or_default();
        let log_directory = sandbox.config.log_directory.clone();
        let config = req.config.unwrap_or_default();
        let Some(meta) = config.metadata.clone() else {
            return Err(CriError::rpc(op, Code::InvalidArgument, "container config must include metadata"));
        };
        let requested = config.image.clone().unwrap_or_default();
        let Some(image) = self.find_image(&requested.image).cloned() else {
            return Err(CriError::rpc(
                op,
                Code::NotFound,
                format!("failed to resolve image {:?}: not found", requested.image),
            ));
        };
        self.check_namespace_target(op, &sandbox_id, &config)?;
        let name = format!(
            "{}_{}_{}_{}_{}",
            meta.name, sandbox_meta.name, sandbox_meta.namespace, sandbox_meta.uid, meta.attempt
        );
        let id = self.next_id("container");
        self.reserve(op, &name, &id)?;
        let log_path = if log_directory.is_empty() || config.log_path.is_empty() {
            String::new()
        } else {
            format!("{}/{}", log_directory.trim_end_matches('/'), config.log_path)
        };
        let status = ContainerStatus {
            id: id.clone(),
            metadata: Some(meta.clone()),
            state: ContainerState::ContainerCreated.into(),
            created_at: now_ns(),
            image: Some(ImageSpec { image: image.repo_tags.first().cloned().unwrap_or_default(), ..requested }),
            image_ref: image.repo_digests.first().cloned().unwrap_or_else(|| image.id.clone()),
            labels: config.labels.clone(),
            annotations: config.annotations.clone(),
            mounts: config.mounts.clone(),
            log_path,
            resources: config.linux.as_ref().map(|l| ContainerResources { linux: l.resources.clone(), windows: None }),
            image_id: image.id.clone(),
            stop_signal: config.stop_signal,
            ..Default::default()
        };
        let behavior = self.behaviors.get(&meta.name).cloned().unwrap_or_default();
        self.containers.insert(
            id.clone(),
            FakeContainer { sandbox_id, config, status, behavior, started: None, reserved_name: name },
        );
        Ok(CreateContainerResponse { container_id: id })
    }

    /// A container joining another's namespace (`NamespaceMode::Target`) needs that container
    /// running in the same sandbox, as containerd needs its process to find the namespace.
    fn check_namespace_target(&self, op: CriOp, sandbox_id: &str, config: &ContainerConfig) -> CriResult<()> {
        let Some(ns) =
            config.linux.as_ref().and_then(|l| l.security_context.as_ref()).and_then(|s| s.namespace_options.as_ref())
        else {
            return Ok(());
        };
        if ns.pid != NamespaceMode::Target as i32 {
            return Ok(());
        }
        let target = resolve(&self.containers, &ns.target_id).and_then(|id| self.containers.get(&id));
        match target {
            Some(t) if t.sandbox_id == sandbox_id && t.status.state() == ContainerState::ContainerRunning => Ok(()),
            Some(_) => Err(CriError::rpc(
                op,
                Code::Unknown,
                format!("failed to get target container {:?} pid: not running in this sandbox", ns.target_id),
            )),
            None => Err(CriError::not_found(op, format!("target container {:?}", ns.target_id))),
        }
    }

    /// The config the newest container with this name was created with.
    pub fn container_config_by_name(&self, name: &str) -> Option<ContainerConfig> {
        self.containers
            .values()
            .filter(|c| c.status.metadata.as_ref().is_some_and(|m| m.name == name))
            .max_by_key(|c| (c.status.metadata.as_ref().map_or(0, |m| m.attempt), c.status.created_at))
            .map(|c| c.config.clone())
    }

    fn container_id(&self, op: CriOp, id: &str) -> CriResult<String> {
        resolve(&self.containers, id).ok_or_else(|| CriError::not_found(op, format!("container {id:?}")))
    }

    fn container_mut(&mut self, op: CriOp, id: &str) -> CriResult<&mut FakeContainer> {
        let id = self.container_id(op, id)?;
        self.containers.get_mut(&id).ok_or_else(|| CriError::not_found(op, format!("container {id:?}")))
    }

    fn running_container(&self, op: CriOp, id: &str) -> CriResult<&FakeContainer> {
        let id = self.container_id(op, id)?;
        let container = self.containers.get(&id).ok_or_else(|| CriError::not_found(op, format!("container {id:?}")))?;
        if container.status.state() != ContainerState::ContainerRunning {
            return Err(CriError::rpc(
                op,
                Code::Unknown,
                format!("container is in {} state", container.status.state().as_str_name()),
            ));
        }
        Ok(container)
    }

    pub fn start_container(&mut self, req: StartContainerRequest) -> CriResult<StartContainerResponse> {
        let op = CriOp::StartContainer;
        let id = self.container_id(op, &req.container_id)?;
        let sandbox_id = self.containers.get(&id).map(|c| c.sandbox_id.clone()).unwrap_or_default();
        self.ready_sandbox(op, &sandbox_id)?;
        let container = self.container_mut(op, &id)?;
        if container.status.state() != ContainerState::ContainerCreated {
            return Err(CriError::rpc(
                op,
                Code::Unknown,
                format!("container is in {} state", container.status.state().as_str_name()),
            ));
        }
        let now = now_ns();
        if let Some(message) = container.behavior.start_error.clone() {
            exit(&mut container.status, START_ERROR_EXIT_CODE, now, Some("StartError".to_string()));
            container.status.message = message.clone();
            return Err(CriError::rpc(op, Code::Unknown, format!("failed to create containerd task: {message}")));
        }
        container.status.set_state(ContainerState::ContainerRunning);
        container.status.started_at = now;
        container.started = Some(Instant::now());
        self.settle();
        Ok(StartContainerResponse {})
    }

    pub fn stop_container(&mut self, req: StopContainerRequest) -> CriResult<StopContainerResponse> {
        let container = self.container_mut(CriOp::StopContainer, &req.container_id)?;
        if container.status.state() == ContainerState::ContainerRunning {
            let code = match container.behavior.stop_exit_code {
                _ if req.timeout <= 0 => KILLED_EXIT_CODE,
                Some(code) => code,
                None => TERMINATED_EXIT_CODE,
            };
            exit(&mut container.status, code, now_ns(), None);
        }
        Ok(StopContainerResponse {})
    }

    pub fn remove_container(&mut self, req: RemoveContainerRequest) -> CriResult<RemoveContainerResponse> {
        if let Some(id) = resolve(&self.containers, &req.container_id) {
            self.remove_container_now(&id);
        }
        Ok(RemoveContainerResponse {})
    }

    fn remove_container_now(&mut self, id: &str) {
        if let Some(container) = self.containers.remove(id) {
            self.names.remove(&container.reserved_name);
        }
    }

    pub fn list_containers(&self, req: ListContainersRequest) -> ListContainersResponse {
        let filter = req.filter.unwrap_or_default();
        let containers = self
            .containers
            .values()
            .filter(|c| filter.id.is_empty() || c.status.id.starts_with(&filter.id))
            .filter(|c| filter.pod_sandbox_id.is_empty() || c.sandbox_id.starts_with(&filter.pod_sandbox_id))
            .filter(|c| filter.state.as_ref().is_none_or(|want| want.state == c.status.state))
            .filter(|c| labels_match(&filter.label_selector, &c.status.labels))
            .map(|c| Container {
                id: c.status.id.clone(),
                pod_sandbox_id: c.sandbox_id.clone(),
                metadata: c.status.metadata.clone(),
                image: c.status.image.clone(),
                image_ref: c.status.image_ref.clone(),
                state: c.status.state,
                created_at: c.status.created_at,
                labels: c.status.labels.clone(),
                annotations: c.status.annotations.clone(),
                image_id: c.status.image_id.clone(),
            })
            .collect();
        ListContainersResponse { containers }
    }

    pub fn container_status(&self, req: ContainerStatusRequest) -> CriResult<ContainerStatusResponse> {
        let id = self.container_id(CriOp::ContainerStatus, &req.container_id)?;
        let status = self.containers.get(&id).map(|c| c.status.clone());
        Ok(ContainerStatusResponse { status, info: HashMap::new() })
    }

    pub fn update_container_resources(
        &mut self,
        req: UpdateContainerResourcesRequest,
    ) -> CriResult<UpdateContainerResourcesResponse> {
        let op = CriOp::UpdateContainerResources;
        let container = self.container_mut(op, &req.container_id)?;
        if container.status.state() == ContainerState::ContainerExited {
            return Err(CriError::rpc(op, Code::Unknown, "container is in CONTAINER_EXITED state"));
        }
        container.status.resources = Some(ContainerResources { linux: req.linux, windows: req.windows });
        Ok(UpdateContainerResourcesResponse {})
    }

    /// Like containerd, opens the log file again at its path, creating it when it was renamed
    /// away (rotated) or removed; a log path in a missing folder is an error.
    pub fn reopen_container_log(&self, req: ReopenContainerLogRequest) -> CriResult<ReopenContainerLogResponse> {
        let op = CriOp::ReopenContainerLog;
        let container = self.running_container(op, &req.container_id).map_err(|err| {
            if err.is_not_found() {
                err
            } else {
                CriError::rpc(op, Code::Unknown, "container is not running")
            }
        })?;
        let log_path = &container.status.log_path;
        if !log_path.is_empty() {
            std::fs::OpenOptions::new().create(true).append(true).open(log_path).map_err(|e| {
                CriError::rpc(op, Code::Unknown, format!("failed to create and open log file {log_path:?}: {e}"))
            })?;
        }
        Ok(ReopenContainerLogResponse {})
    }

    // ----- exec, attach, port-forward ----------------------------------------------------------

    pub fn exec_sync(&mut self, req: &ExecSyncRequest) -> CriResult<ExecSyncResponse> {
        let op = CriOp::ExecSync;
        let name = self.running_container(op, &req.container_id)?.status.metadata.clone().unwrap_or_default().name;
        let script = self.exec_scripts.iter_mut().rev().find(|script| script.matches(&name, &req.cmd));
        if let Some(script) = script {
            let outcome = script.outcome.clone();
            if let Some(times) = script.times.as_mut() {
                *times -= 1;
            }
            self.exec_scripts.retain(|script| script.times != Some(0));
            return outcome;
        }
        Ok(builtin_exec(&req.cmd))
    }

    fn stream_url(&mut self, verb: &str) -> String {
        self.seq += 1;
        let token = &fake_digest(&format!("stream-{}", self.seq))["sha256:".len()..][..8];
        format!("{}/{verb}/{token}", self.streaming_base.trim_end_matches('/'))
    }

    pub fn exec(&mut self, req: &ExecRequest) -> CriResult<ExecResponse> {
        self.running_container(CriOp::Exec, &req.container_id)?;
        Ok(ExecResponse { url: self.stream_url("exec") })
    }

    pub fn attach(&mut self, req: &AttachRequest) -> CriResult<AttachResponse> {
        self.running_container(CriOp::Attach, &req.container_id)?;
        Ok(AttachResponse { url: self.stream_url("attach") })
    }

    pub fn port_forward(&mut self, req: &PortForwardRequest) -> CriResult<PortForwardResponse> {
        self.ready_sandbox(CriOp::PortForward, &req.pod_sandbox_id)?;
        Ok(PortForwardResponse { url: self.stream_url("portforward") })
    }

    // ----- statistics --------------------------------------------------------------------------

    fn stats_of(&self, container: &FakeContainer) -> ContainerStats {
        let now = now_ns();
        let meta = container.status.metadata.clone();
        let usage = self
            .usage
            .get(&meta.as_ref().map(|m| m.name.clone()).unwrap_or_default())
            .copied()
            .filter(|_| container.status.state() == ContainerState::ContainerRunning)
            .unwrap_or_default();
        ContainerStats {
            attributes: Some(ContainerAttributes {
                id: container.status.id.clone(),
                metadata: meta,
                labels: container.status.labels.clone(),
                annotations: container.status.annotations.clone(),
            }),
            cpu: Some(CpuUsage {
                timestamp: now,
                usage_core_nano_seconds: Some(UInt64Value { value: usage.cpu_core_nanoseconds }),
                usage_nano_cores: Some(UInt64Value { value: 0 }),
                psi: None,
            }),
            memory: Some(MemoryUsage {
                timestamp: now,
                working_set_bytes: Some(UInt64Value { value: usage.working_set_bytes }),
                usage_bytes: Some(UInt64Value { value: usage.working_set_bytes }),
                ..Default::default()
            }),
            writable_layer: Some(FilesystemUsage {
                timestamp: now,
                fs_id: Some(FilesystemIdentifier { mountpoint: SNAPSHOT_ROOT.to_string() }),
                used_bytes: Some(UInt64Value { value: 0 }),
                inodes_used: Some(UInt64Value { value: 0 }),
            }),
            swap: None,
            io: None,
        }
    }

    pub fn container_stats(&self, req: ContainerStatsRequest) -> CriResult<ContainerStatsResponse> {
        let id = self.container_id(CriOp::ContainerStats, &req.container_id)?;
        Ok(ContainerStatsResponse { stats: self.containers.get(&id).map(|c| self.stats_of(c)) })
    }

    pub fn list_container_stats(&self, req: ListContainerStatsRequest) -> ListContainerStatsResponse {
        let filter = req.filter.unwrap_or_default();
        let stats = self
            .containers
            .values()
            .filter(|c| filter.id.is_empty() || c.status.id.starts_with(&filter.id))
            .filter(|c| filter.pod_sandbox_id.is_empty() || c.sandbox_id.starts_with(&filter.pod_sandbox_id))
            .filter(|c| labels_match(&filter.label_selector, &c.status.labels))
            .map(|c| self.stats_of(c))
            .collect();
        ListContainerStatsResponse { stats }
    }

    fn sandbox_stats_of(&self, sandbox: &FakeSandbox) -> PodSandboxStats {
        let now = now_ns();
        let containers: Vec<ContainerStats> =
            self.containers.values().filter(|c| c.sandbox_id == sandbox.status.id).map(|c| self.stats_of(c)).collect();
        let sum = |f: fn(&ContainerStats) -> u64| containers.iter().map(f).sum::<u64>();
        let cpu = sum(|c| c.cpu.as_ref().and_then(|u| u.usage_core_nano_seconds.as_ref()).map_or(0, |v| v.value));
        let memory = sum(|c| c.memory.as_ref().and_then(|u| u.working_set_bytes.as_ref()).map_or(0, |v| v.value));
        let running = containers.len() as u64;
        PodSandboxStats {
            attributes: Some(PodSandboxAttributes {
                id: sandbox.status.id.clone(),
                metadata: sandbox.status.metadata.clone(),
                labels: sandbox.status.labels.clone(),
                annotations: sandbox.status.annotations.clone(),
            }),
            linux: Some(LinuxPodSandboxStats {
                cpu: Some(CpuUsage {
                    timestamp: now,
                    usage_core_nano_seconds: Some(UInt64Value { value: cpu }),
                    usage_nano_cores: Some(UInt64Value { value: 0 }),
                    psi: None,
                }),
                memory: Some(MemoryUsage {
                    timestamp: now,
                    working_set_bytes: Some(UInt64Value { value: memory }),
                    usage_bytes: Some(UInt64Value { value: memory }),
                    ..Default::default()
                }),
                network: None,
                process: Some(ProcessUsage { timestamp: now, process_count: Some(UInt64Value { value: running }) }),
                containers,
                io: None,
            }),
        }
    }

    pub fn pod_sandbox_stats(&self, req: PodSandboxStatsRequest) -> CriResult<PodSandboxStatsResponse> {
        let id = self.sandbox_id(CriOp::PodSandboxStats, &req.pod_sandbox_id)?;
        Ok(PodSandboxStatsResponse { stats: self.sandboxes.get(&id).map(|s| self.sandbox_stats_of(s)) })
    }

    pub fn list_pod_sandbox_stats(&self, req: ListPodSandboxStatsRequest) -> ListPodSandboxStatsResponse {
        let filter = req.filter.unwrap_or_default();
        let stats = self
            .sandboxes
            .values()
            .filter(|s| filter.id.is_empty() || s.status.id.starts_with(&filter.id))
            .filter(|s| labels_match(&filter.label_selector, &s.status.labels))
            .map(|s| self.sandbox_stats_of(s))
            .collect();
        ListPodSandboxStatsResponse { stats }
    }

    // ----- runtime -----------------------------------------------------------------------------

    pub fn status(&self) -> StatusResponse {
        let condition = |kind: &str, ready: bool, reason: &str, message: &str| RuntimeCondition {
            r#type: kind.to_string(),
            status: ready,
            reason: if ready { String::new() } else { reason.to_string() },
            message: if ready { String::new() } else { message.to_string() },
        };
        let features = RuntimeHandlerFeatures { recursive_read_only_mounts: false, user_namespaces: false };
        StatusResponse {
            status: Some(RuntimeStatus {
                conditions: vec![
                    condition("RuntimeReady", true, "", ""),
                    condition(
                        "NetworkReady",
                        self.network_ready,
                        "NetworkPluginNotReady",
                        "Network plugin returns error: cni plugin not initialized",
                    ),
                ],
            }),
            info: HashMap::new(),
            runtime_handlers: vec![
                RuntimeHandler { name: String::new(), features: Some(features) },
                RuntimeHandler { name: "runc".to_string(), features: Some(features) },
            ],
            features: Some(RuntimeFeatures::default()),
        }
    }

    // ----- images ------------------------------------------------------------------------------

    /// The image `reference` names: by id, digest or tag (normalized as containerd does).
    pub fn find_image(&self, reference: &str) -> Option<&Image> {
        if reference.is_empty() {
            return None;
        }
        if let Some(image) = self.images.get(reference) {
            return Some(image);
        }
        let normalized = normalize(reference);
        self.images
            .values()
            .find(|image| image.repo_tags.contains(&normalized) || image.repo_digests.contains(&normalized))
    }

    /// Adds (or finds) the image `reference` names and returns its id.
    pub fn add_image(&mut self, reference: &str) -> String {
        if let Some(image) = self.find_image(reference) {
            return image.id.clone();
        }
        let normalized = normalize(reference);
        let repo = repository(&normalized).to_string();
        let (tag, digest) = match normalized.split_once('@') {
            Some((_, digest)) => (None, digest.to_string()),
            None => (Some(normalized.clone()), fake_digest(&format!("manifest {normalized}"))),
        };
        let id = fake_digest(&format!("config {normalized}"));
        let image = Image {
            id: id.clone(),
            repo_tags: tag.into_iter().collect(),
            repo_digests: vec![format!("{repo}@{digest}")],
            size: FAKE_IMAGE_SIZE,
            uid: None,
            username: String::new(),
            spec: Some(ImageSpec { image: id.clone(), ..Default::default() }),
            pinned: false,
        };
        self.images.insert(id.clone(), image);
        id
    }

    pub fn pin_image(&mut self, reference: &str) {
        let id = self.find_image(reference).map(|image| image.id.clone());
        if let Some(image) = id.and_then(|id| self.images.get_mut(&id)) {
            image.pinned = true;
        }
    }

    /// Checks that `reference` can be pulled (names ending in `/does-not-exist` cannot).
    pub fn check_pullable(reference: &str) -> CriResult<()> {
        let normalized = normalize(reference);
        if repository(&normalized).ends_with("/does-not-exist") {
            return Err(CriError::rpc(
                CriOp::PullImage,
                Code::NotFound,
                format!(
                    "failed to pull and unpack image {normalized:?}: failed to resolve reference {normalized:?}: \
                     {normalized}: not found"
                ),
            ));
        }
        Ok(())
    }

    pub fn list_images(&self, req: ListImagesRequest) -> ListImagesResponse {
        let wanted = req.filter.and_then(|f| f.image).map(|spec| spec.image).unwrap_or_default();
        let images = if wanted.is_empty() {
            self.images.values().cloned().collect()
        } else {
            self.find_image(&wanted).cloned().into_iter().collect()
        };
        ListImagesResponse { images }
    }

    pub fn image_status(&self, req: ImageStatusRequest) -> ImageStatusResponse {
        let reference = req.image.map(|spec| spec.image).unwrap_or_default();
        ImageStatusResponse { image: self.find_image(&reference).cloned(), info: HashMap::new() }
    }

    pub fn remove_image(&mut self, req: RemoveImageRequest) -> RemoveImageResponse {
        let reference = req.image.map(|spec| spec.image).unwrap_or_default();
        if let Some(id) = self.find_image(&reference).map(|image| image.id.clone()) {
            self.images.remove(&id);
        }
        RemoveImageResponse {}
    }

    pub fn image_fs_info(&self) -> ImageFsInfoResponse {
        let used: u64 = self.images.values().map(|image| image.size).sum();
        ImageFsInfoResponse {
            image_filesystems: vec![FilesystemUsage {
                timestamp: now_ns(),
                fs_id: Some(FilesystemIdentifier { mountpoint: SNAPSHOT_ROOT.to_string() }),
                used_bytes: Some(UInt64Value { value: used }),
                inodes_used: Some(UInt64Value { value: self.images.len() as u64 * 64 }),
            }],
            container_filesystems: Vec::new(),
        }
    }

    // ----- helpers -----------------------------------------------------------------------------

    /// Reserves a sandbox or container name as containerd does: a second create with the same
    /// metadata (same attempt) fails until the first is removed.
    fn reserve(&mut self, op: CriOp, name: &str, id: &str) -> CriResult<()> {
        if let Some(holder) = self.names.get(name) {
            return Err(CriError::rpc(
                op,
                Code::Unknown,
                format!("failed to reserve name {name:?}: name {name:?} is reserved for {holder:?}"),
            ));
        }
        self.names.insert(name.to_string(), id.to_string());
        Ok(())
    }

    /// The id of a container by its name in the pod spec, latest attempt first (for tests).
    pub fn container_id_by_name(&self, name: &str) -> Option<String> {
        self.containers
            .values()
            .filter(|c| c.status.metadata.as_ref().is_some_and(|m| m.name == name))
            .max_by_key(|c| (c.status.metadata.as_ref().map_or(0, |m| m.attempt), c.status.created_at))
            .map(|c| c.status.id.clone())
    }

    pub fn exit_container(&mut self, id: &str, code: i32) -> CriResult<()> {
        let container = self.container_mut(CriOp::ContainerStatus, id)?;
        if container.status.state() == ContainerState::ContainerRunning {
            exit(&mut container.status, code, now_ns(), None);
        }
        Ok(())
    }
}

/// Where containerd's overlayfs snapshots live; the fake reports it as the image filesystem.
const SNAPSHOT_ROOT: &str = "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs";

/// Moves a status to EXITED with `code`; the reason defaults as containerd's: Completed or Error.
fn exit(status: &mut ContainerStatus, code: i32, finished_at: i64, reason: Option<String>) {
    status.set_state(ContainerState::ContainerExited);
    status.exit_code = code;
    status.finished_at = finished_at.max(status.started_at);
    status.reason = reason.unwrap_or_else(|| if code == 0 { "Completed" } else { "Error" }.to_string());
}

/// Id lookup as containerd does it: the full id or a unique prefix.
fn resolve<T>(map: &BTreeMap<String, T>, id: &str) -> Option<String> {
    if id.is_empty() {
        return None;
    }
    if map.contains_key(id) {
        return Some(id.to_string());
    }
    let mut matches = map.range(id.to_string()..).take_while(|(key, _)| key.starts_with(id));
    match (matches.next(), matches.next()) {
        (Some((key, _)), None) => Some(key.clone()),
        _ => None,
    }
}

fn labels_match(selector: &HashMap<String, String>, labels: &HashMap<String, String>) -> bool {
    selector.iter().all(|(key, value)| labels.get(key) == Some(value))
}

/// What an unscripted ExecSync answers: `echo` prints its arguments, `true`/`false` exit 0/1,
/// `sh -c 'exit N'` exits N; anything else succeeds silently.
fn builtin_exec(cmd: &[String]) -> ExecSyncResponse {
    let ok = |stdout: Vec<u8>| ExecSyncResponse { stdout, stderr: Vec::new(), exit_code: 0 };
    match cmd.first().map(String::as_str) {
        Some("echo") => ok(format!("{}\n", cmd[1..].join(" ")).into_bytes()),
        Some("false") => ExecSyncResponse { exit_code: 1, ..ok(Vec::new()) },
        Some("sh") if cmd.get(1).map(String::as_str) == Some("-c") => {
            let script = cmd.get(2).map_or("", String::as_str).trim();
            let code = script.strip_prefix("exit").and_then(|rest| rest.trim().parse::<i32>().ok()).unwrap_or(0);
            ExecSyncResponse { exit_code: code, ..ok(Vec::new()) }
        }
        _ => ok(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_resolve_by_unique_prefix_only() {
        let mut map = BTreeMap::new();
        map.insert("abc123".to_string(), ());
        map.insert("abd456".to_string(), ());
        assert_eq!(resolve(&map, "abc").as_deref(), Some("abc123"));
        assert_eq!(resolve(&map, "ab"), None, "ambiguous prefix");
        assert_eq!(resolve(&map, ""), None);
        assert_eq!(resolve(&map, "zzz"), None);
    }

    #[test]
    fn builtin_exec_echoes_and_exits_with_requested_code() {
        let cmd = |parts: &[&str]| parts.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(builtin_exec(&cmd(&["echo", "hi", "there"])).stdout, b"hi there\n");
        assert_eq!(builtin_exec(&cmd(&["false"])).exit_code, 1);
        assert_eq!(builtin_exec(&cmd(&["sh", "-c", "exit 3"])).exit_code, 3);
        assert_eq!(builtin_exec(&cmd(&["cat", "/tmp/healthy"])).exit_code, 0);
    }
}
