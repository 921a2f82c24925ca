//! `FakeRuntime`: an in-memory CRI runtime implementing both `RuntimeService` and `ImageService`,
//! so the kubelet's pod workers, probes and status logic are unit-tested without root or
//! containerd.
//!
//! It behaves like containerd where a kubelet can tell: sandboxes go READY ▶ NOTREADY and get a
//! pod IP (none with host networking); containers go CREATED ▶ RUNNING ▶ EXITED with exit codes,
//! reasons and nanosecond timestamps; names are reserved per (metadata, attempt); a container
//! cannot be created before its image is pulled; removal is idempotent, stop of a missing object
//! is `NotFound`. Tests script it:
//! - [`ContainerBehavior`] per container name: exit with code N after a delay, fail to start,
//!   exit code when stopped;
//! - [`ExecScript`]: ExecSync answers (by container name and command, N times);
//! - [`FailureRule`]: any call fails with a chosen error, optionally only for a target and N times;
//! - images named `*/does-not-exist:*` fail to pull with `NotFound`;
//! - every call is recorded ([`FakeRuntime::calls`]).
//!
//! Exits scheduled with a delay are evaluated against `tokio::time::Instant`, so tests running
//! with paused time control them with `tokio::time::advance`.

mod image_ref;
mod state;

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;

pub use self::image_ref::normalize as normalize_image_ref;
use self::state::{State, Usage};
use crate::error::{CriError, CriOp};
use crate::service::{CriResult, ImageService, RuntimeService};
use crate::v1::*;

/// What a fake container does once started. Keyed by the container's name in the pod spec.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContainerBehavior {
    /// Exits on its own this long after starting (`Duration::ZERO`: right away). `None` runs
    /// until stopped.
    pub exit_after: Option<Duration>,
    /// Exit code when it exits on its own.
    pub exit_code: i32,
    /// Reason reported when it exits on its own (default: `Completed` for 0, else `Error`).
    pub reason: Option<String>,
    /// Exit code when stopped by StopContainer with a grace period (default 143: ended by
    /// SIGTERM; 137 for a process that ignores it and is killed). A stop without grace period
    /// always gives 137.
    pub stop_exit_code: Option<i32>,
    /// StartContainer fails with this message; the container is left EXITED with code 128 and
    /// reason `StartError`, as containerd does when the entrypoint cannot be executed.
    pub start_error: Option<String>,
}

impl ContainerBehavior {
    /// Runs until stopped (the default).
    pub fn runs() -> Self {
        ContainerBehavior::default()
    }

    /// Exits with `code` right after starting.
    pub fn exits_with(code: i32) -> Self {
        ContainerBehavior { exit_after: Some(Duration::ZERO), exit_code: code, ..Default::default() }
    }

    /// Exits with `code` after running for `after`.
    pub fn exits_after(after: Duration, code: i32) -> Self {
        ContainerBehavior { exit_after: Some(after), exit_code: code, ..Default::default() }
    }

    /// Cannot be started.
    pub fn fails_to_start(message: impl Into<String>) -> Self {
        ContainerBehavior { start_error: Some(message.into()), ..Default::default() }
    }

    /// Reports `reason` when it exits on its own (e.g. `OOMKilled`).
    pub fn with_reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// Exits with `code` when stopped with a grace period (0 for a process that handles SIGTERM,
    /// 137 for one that ignores it).
    pub fn with_stop_exit_code(mut self, code: i32) -> Self {
        self.stop_exit_code = Some(code);
        self
    }
}

/// A scripted ExecSync answer. The newest matching script wins; one with `times` is used that
/// many times and then dropped.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecScript {
    container: Option<String>,
    command: Option<Vec<String>>,
    outcome: CriResult<ExecSyncResponse>,
    times: Option<usize>,
}

impl ExecScript {
    /// Answers with `exit_code`, `stdout` and no stderr.
    pub fn exits(exit_code: i32, stdout: impl Into<Vec<u8>>) -> Self {
        Self::responds(ExecSyncResponse { stdout: stdout.into(), stderr: Vec::new(), exit_code })
    }

    /// Answers with `response`.
    pub fn responds(response: ExecSyncResponse) -> Self {
        ExecScript { container: None, command: None, outcome: Ok(response), times: None }
    }

    /// Fails the call with `error` (e.g. a `DeadlineExceeded` for a probe timeout).
    pub fn fails(error: CriError) -> Self {
        ExecScript { container: None, command: None, outcome: Err(error), times: None }
    }

    /// Only in containers with this name in the pod spec.
    pub fn in_container(mut self, name: impl Into<String>) -> Self {
        self.container = Some(name.into());
        self
    }

    /// Only for exactly this command line.
    pub fn for_command<S: Into<String>>(mut self, command: impl IntoIterator<Item = S>) -> Self {
        self.command = Some(command.into_iter().map(Into::into).collect());
        self
    }

    /// Used `n` times, then dropped.
    pub fn times(mut self, n: usize) -> Self {
        self.times = Some(n);
        self
    }

    fn matches(&self, container: &str, command: &[String]) -> bool {
        self.times != Some(0)
            && self.container.as_deref().is_none_or(|want| want == container)
            && self.command.as_deref().is_none_or(|want| want == command)
    }
}

/// An injected failure: calls of `op` (whose target contains `target`, if set) fail with `error`.
#[derive(Debug, Clone, PartialEq)]
pub struct FailureRule {
    op: CriOp,
    target: Option<String>,
    error: CriError,
    times: Option<usize>,
}

impl FailureRule {
    /// Every call of `op` fails with `error` until the rule is cleared.
    pub fn new(op: CriOp, error: CriError) -> Self {
        FailureRule { op, target: None, error, times: None }
    }

    /// Only calls whose target (see [`RecordedCall::target`]) contains `target`.
    pub fn for_target(mut self, target: impl Into<String>) -> Self {
        self.target = Some(target.into());
        self
    }

    /// Only the next `n` matching calls.
    pub fn times(mut self, n: usize) -> Self {
        self.times = Some(n);
        self
    }

    fn matches(&self, op: CriOp, target: &str) -> bool {
        self.op == op && self.times != Some(0) && self.target.as_deref().is_none_or(|want| target.contains(want))
    }
}

/// One call the fake received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedCall {
    /// The RPC.
    pub op: CriOp,
    /// What it was about: `namespace/name` of the pod for RunPodSandbox, the sandbox id for the
    /// other sandbox calls, the container's name for CreateContainer, the container id for the
    /// other container calls, the image reference for image calls, empty otherwise.
    pub target: String,
}

/// In-memory CRI runtime. See the module documentation.
pub struct FakeRuntime {
    state: Mutex<State>,
}

impl Default for FakeRuntime {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for FakeRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeRuntime").finish_non_exhaustive()
    }
}

impl FakeRuntime {
    /// An empty runtime: no images, no sandboxes, network ready.
    pub fn new() -> Self {
        FakeRuntime { state: Mutex::new(State::new()) }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs one call: records it, applies injected failures, then `f`.
    fn call<T>(&self, op: CriOp, target: &str, f: impl FnOnce(&mut State) -> CriResult<T>) -> CriResult<T> {
        let mut state = self.lock();
        state.begin(op, target)?;
        f(&mut state)
    }

    // ----- set-up ------------------------------------------------------------------------------

    /// Makes an image present as if pulled; returns its id.
    pub fn add_image(&self, reference: &str) -> String {
        self.lock().add_image(reference)
    }

    /// Makes an image present and pinned (never garbage-collected), like the pause image.
    pub fn add_pinned_image(&self, reference: &str) -> String {
        let mut state = self.lock();
        let id = state.add_image(reference);
        state.pin_image(reference);
        id
    }

    /// Sets what containers with this name (in the pod spec) do when started. Applies to
    /// containers created afterwards.
    pub fn set_container_behavior(&self, container_name: &str, behavior: ContainerBehavior) {
        self.lock().behaviors.insert(container_name.to_string(), behavior);
    }

    /// Adds an ExecSync script.
    pub fn script_exec(&self, script: ExecScript) {
        self.lock().exec_scripts.push(script);
    }

    /// Adds a failure rule; the newest matching rule wins.
    pub fn inject_failure(&self, rule: FailureRule) {
        self.lock().failures.push(rule);
    }

    /// The next call of `op` fails with `error`.
    pub fn fail_next(&self, op: CriOp, error: CriError) {
        self.inject_failure(FailureRule::new(op, error).times(1));
    }

    /// Removes every failure rule.
    pub fn clear_failures(&self) {
        self.lock().failures.clear();
    }

    /// Sets the NetworkReady condition reported by Status.
    pub fn set_network_ready(&self, ready: bool) {
        self.lock().network_ready = ready;
    }

    /// Base URL of the streaming URLs handed out by Exec, Attach and PortForward.
    pub fn set_streaming_base(&self, base: &str) {
        self.lock().streaming_base = base.to_string();
    }

    /// Makes every PullImage take this long.
    pub fn set_pull_delay(&self, delay: Duration) {
        self.lock().pull_delay = delay;
    }

    /// Usage reported by the stats calls for running containers with this name.
    pub fn set_container_usage(&self, container_name: &str, cpu_core_nanoseconds: u64, working_set_bytes: u64) {
        self.lock().usage.insert(container_name.to_string(), Usage { cpu_core_nanoseconds, working_set_bytes });
    }

    // ----- driving and inspection --------------------------------------------------------------

    /// Makes a running container exit now with `code` (as if its process ended).
    pub fn exit_container(&self, container_id: &str, code: i32) -> CriResult<()> {
        self.lock().exit_container(container_id, code)
    }

    /// The id of the newest container with this name in the pod spec.
    pub fn container_id(&self, container_name: &str) -> Option<String> {
        self.lock().container_id_by_name(container_name)
    }

    /// The config the newest container with this name (in the pod spec) was created with.
    pub fn container_config(&self, container_name: &str) -> Option<ContainerConfig> {
        self.lock().container_config_by_name(container_name)
    }

    /// The pod CIDR last set through UpdateRuntimeConfig.
    pub fn pod_cidr(&self) -> String {
        self.lock().pod_cidr.clone()
    }

    /// Every call received so far, in order.
    pub fn calls(&self) -> Vec<RecordedCall> {
        self.lock().calls.clone()
    }

    /// How many calls of `op` were received.
    pub fn count(&self, op: CriOp) -> usize {
        self.lock().calls.iter().filter(|call| call.op == op).count()
    }

    /// The recorded calls of `op`.
    pub fn calls_of(&self, op: CriOp) -> Vec<RecordedCall> {
        self.lock().calls.iter().filter(|call| call.op == op).cloned().collect()
    }

    /// (container id, timeout in seconds) of every StopContainer call that was not failed by an
    /// injected rule, in order.
    pub fn stop_timeouts(&self) -> Vec<(String, i64)> {
        self.lock().stop_timeouts.clone()
    }

    /// (container id, command line) of every ExecSync call that was not failed by an injected
    /// rule, in order.
    pub fn exec_commands(&self) -> Vec<(String, Vec<String>)> {
        self.lock().exec_commands.clone()
    }

    /// Forgets the recorded calls.
    pub fn clear_calls(&self) {
        self.lock().calls.clear();
    }
}

fn pod_target(config: Option<&PodSandboxConfig>) -> String {
    config.and_then(|c| c.metadata.as_ref()).map(|m| format!("{}/{}", m.namespace, m.name)).unwrap_or_default()
}

fn image_target(spec: Option<&ImageSpec>) -> String {
    spec.map(|s| s.image.clone()).unwrap_or_default()
}

#[async_trait]
impl RuntimeService for FakeRuntime {
    async fn version(&self, _req: VersionRequest) -> CriResult<VersionResponse> {
        self.call(CriOp::Version, "", |_| {
            Ok(VersionResponse {
                version: "0.1.0".to_string(),
                runtime_name: "fake".to_string(),
                runtime_version: env!("CARGO_PKG_VERSION").to_string(),
                runtime_api_version: "v1".to_string(),
            })
        })
    }

    async fn run_pod_sandbox(&self, req: RunPodSandboxRequest) -> CriResult<RunPodSandboxResponse> {
        let target = pod_target(req.config.as_ref());
        self.call(CriOp::RunPodSandbox, &target, |s| s.run_pod_sandbox(req))
    }

    async fn stop_pod_sandbox(&self, req: StopPodSandboxRequest) -> CriResult<StopPodSandboxResponse> {
        let target = req.pod_sandbox_id.clone();
        self.call(CriOp::StopPodSandbox, &target, |s| s.stop_pod_sandbox(req))
    }

    async fn remove_pod_sandbox(&self, req: RemovePodSandboxRequest) -> CriResult<RemovePodSandboxResponse> {
        let target = req.pod_sandbox_id.clone();
        self.call(CriOp::RemovePodSandbox, &target, |s| s.remove_pod_sandbox(req))
    }

    async fn pod_sandbox_status(&self, req: PodSandboxStatusRequest) -> CriResult<PodSandboxStatusResponse> {
        let target = req.pod_sandbox_id.clone();
        self.call(CriOp::PodSandboxStatus, &target, |s| s.pod_sandbox_status(req))
    }

    async fn list_pod_sandbox(&self, req: ListPodSandboxRequest) -> CriResult<ListPodSandboxResponse> {
        self.call(CriOp::ListPodSandbox, "", |s| Ok(s.list_pod_sandbox(req)))
    }

    async fn create_container(&self, req: CreateContainerRequest) -> CriResult<CreateContainerResponse> {
        let target = req.config.as_ref().and_then(|c| c.metadata.as_ref()).map(|m| m.name.clone()).unwrap_or_default();
        self.call(CriOp::CreateContainer, &target, |s| s.create_container(req))
    }

    async fn start_container(&self, req: StartContainerRequest) -> CriResult<StartContainerResponse> {
        let target = req.container_id.clone();
        self.call(CriOp::StartContainer, &target, |s| s.start_container(req))
    }

    async fn stop_container(&self, req: StopContainerRequest) -> CriResult<StopContainerResponse> {
        let target = req.container_id.clone();
        self.call(CriOp::StopContainer, &target, |s| {
            s.stop_timeouts.push((req.container_id.clone(), req.timeout));
            s.stop_container(req)
        })
    }

    async fn remove_container(&self, req: RemoveContainerRequest) -> CriResult<RemoveContainerResponse> {
        let target = req.container_id.clone();
        self.call(CriOp::RemoveContainer, &target, |s| s.remove_container(req))
    }

    async fn list_containers(&self, req: ListContainersRequest) -> CriResult<ListContainersResponse> {
        self.call(CriOp::ListContainers, "", |s| Ok(s.list_containers(req)))
    }

    async fn container_status(&self, req: ContainerStatusRequest) -> CriResult<ContainerStatusResponse> {
        let target = req.container_id.clone();
        self.call(CriOp::ContainerStatus, &target, |s| s.container_status(req))
    }

    async fn update_container_resources(
        &self,
        req: UpdateContainerResourcesRequest,
    ) -> CriResult<UpdateContainerResourcesResponse> {
        let target = req.container_id.clone();
        self.call(CriOp::UpdateContainerResources, &target, |s| s.update_container_resources(req))
    }

    async fn reopen_container_log(&self, req: ReopenContainerLogRequest) -> CriResult<ReopenContainerLogResponse> {
        let target = req.container_id.clone();
        self.call(CriOp::ReopenContainerLog, &target, |s| s.reopen_container_log(req))
    }

    async fn exec_sync(&self, req: ExecSyncRequest) -> CriResult<ExecSyncResponse> {
        self.call(CriOp::ExecSync, &req.container_id, |s| {
            s.exec_commands.push((req.container_id.clone(), req.cmd.clone()));
            s.exec_sync(&req)
        })
    }

    async fn exec(&self, req: ExecRequest) -> CriResult<ExecResponse> {
        self.call(CriOp::Exec, &req.container_id, |s| s.exec(&req))
    }

    async fn attach(&self, req: AttachRequest) -> CriResult<AttachResponse> {
        self.call(CriOp::Attach, &req.container_id, |s| s.attach(&req))
    }

    async fn port_forward(&self, req: PortForwardRequest) -> CriResult<PortForwardResponse> {
        self.call(CriOp::PortForward, &req.pod_sandbox_id, |s| s.port_forward(&req))
    }

    async fn container_stats(&self, req: ContainerStatsRequest) -> CriResult<ContainerStatsResponse> {
        let target = req.container_id.clone();
        self.call(CriOp::ContainerStats, &target, |s| s.container_stats(req))
    }

    async fn list_container_stats(&self, req: ListContainerStatsRequest) -> CriResult<ListContainerStatsResponse> {
        self.call(CriOp::ListContainerStats, "", |s| Ok(s.list_container_stats(req)))
    }

    async fn pod_sandbox_stats(&self, req: PodSandboxStatsRequest) -> CriResult<PodSandboxStatsResponse> {
        let target = req.pod_sandbox_id.clone();
        self.call(CriOp::PodSandboxStats, &target, |s| s.pod_sandbox_stats(req))
    }

    async fn list_pod_sandbox_stats(&self, req: ListPodSandboxStatsRequest) -> CriResult<ListPodSandboxStatsResponse> {
        self.call(CriOp::ListPodSandboxStats, "", |s| Ok(s.list_pod_sandbox_stats(req)))
    }

    async fn update_runtime_config(&self, req: UpdateRuntimeConfigRequest) -> CriResult<UpdateRuntimeConfigResponse> {
        self.call(CriOp::UpdateRuntimeConfig, "", |s| {
            if let Some(network) = req.runtime_config.and_then(|c| c.network_config) {
                s.pod_cidr = network.pod_cidr;
            }
            Ok(UpdateRuntimeConfigResponse {})
        })
    }

    async fn status(&self, _req: StatusRequest) -> CriResult<StatusResponse> {
        self.call(CriOp::Status, "", |s| Ok(s.status()))
    }

    async fn runtime_config(&self, _req: RuntimeConfigRequest) -> CriResult<RuntimeConfigResponse> {
        self.call(CriOp::RuntimeConfig, "", |_| {
            Ok(RuntimeConfigResponse {
                linux: Some(LinuxRuntimeConfiguration { cgroup_driver: CgroupDriver::Cgroupfs.into() }),
            })
        })
    }

    async fn update_pod_sandbox_resources(
        &self,
        req: UpdatePodSandboxResourcesRequest,
    ) -> CriResult<UpdatePodSandboxResourcesResponse> {
        let target = req.pod_sandbox_id.clone();
        self.call(CriOp::UpdatePodSandboxResources, &target, |s| s.update_pod_sandbox_resources(req))
    }
}

#[async_trait]
impl ImageService for FakeRuntime {
    async fn list_images(&self, req: ListImagesRequest) -> CriResult<ListImagesResponse> {
        self.call(CriOp::ListImages, "", |s| Ok(s.list_images(req)))
    }

    async fn image_status(&self, req: ImageStatusRequest) -> CriResult<ImageStatusResponse> {
        let target = image_target(req.image.as_ref());
        self.call(CriOp::ImageStatus, &target, |s| Ok(s.image_status(req)))
    }

    async fn pull_image(&self, req: PullImageRequest) -> CriResult<PullImageResponse> {
        let reference = image_target(req.image.as_ref());
        let delay = self.call(CriOp::PullImage, &reference, |s| {
            if reference.is_empty() {
                return Err(CriError::rpc(
                    CriOp::PullImage,
                    crate::error::Code::InvalidArgument,
                    "image name is empty",
                ));
            }
            State::check_pullable(&reference)?;
            Ok(s.pull_delay)
        })?;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let image_ref = self.lock().add_image(&reference);
        Ok(PullImageResponse { image_ref })
    }

    async fn remove_image(&self, req: RemoveImageRequest) -> CriResult<RemoveImageResponse> {
        let target = image_target(req.image.as_ref());
        self.call(CriOp::RemoveImage, &target, |s| Ok(s.remove_image(req)))
    }

    async fn image_fs_info(&self, _req: ImageFsInfoRequest) -> CriResult<ImageFsInfoResponse> {
        self.call(CriOp::ImageFsInfo, "", |s| Ok(s.image_fs_info()))
    }
}

#[cfg(test)]
mod tests;
