//! The CRI as the kubelet uses it: two object-safe async traits, one method per RPC, taking and
//! returning the generated `runtime.v1` messages. `RemoteRuntime` implements them over gRPC,
//! `FakeRuntime` in memory; the kubelet holds `Arc<dyn RuntimeService>` / `Arc<dyn ImageService>`.

use async_trait::async_trait;

use crate::error::CriError;
use crate::v1::*;

/// Result of a CRI call.
pub type CriResult<T> = Result<T, CriError>;

/// `runtime.v1.RuntimeService`: sandboxes, containers, streaming URLs, statistics, status.
#[async_trait]
pub trait RuntimeService: Send + Sync {
    /// Runtime name and versions.
    async fn version(&self, req: VersionRequest) -> CriResult<VersionResponse>;
    /// Create and start a sandbox; returns its id once it is ready.
    async fn run_pod_sandbox(&self, req: RunPodSandboxRequest) -> CriResult<RunPodSandboxResponse>;
    /// Stop a sandbox and every container in it.
    async fn stop_pod_sandbox(&self, req: StopPodSandboxRequest) -> CriResult<StopPodSandboxResponse>;
    /// Remove a sandbox and its containers (a missing sandbox is not an error).
    async fn remove_pod_sandbox(&self, req: RemovePodSandboxRequest) -> CriResult<RemovePodSandboxResponse>;
    /// Status of one sandbox (`NotFound` when missing).
    async fn pod_sandbox_status(&self, req: PodSandboxStatusRequest) -> CriResult<PodSandboxStatusResponse>;
    /// Sandboxes matching the filter.
    async fn list_pod_sandbox(&self, req: ListPodSandboxRequest) -> CriResult<ListPodSandboxResponse>;
    /// Create a container in a ready sandbox.
    async fn create_container(&self, req: CreateContainerRequest) -> CriResult<CreateContainerResponse>;
    /// Start a created container.
    async fn start_container(&self, req: StartContainerRequest) -> CriResult<StartContainerResponse>;
    /// Stop a container, killing it after `timeout` seconds.
    async fn stop_container(&self, req: StopContainerRequest) -> CriResult<StopContainerResponse>;
    /// Remove a container (a missing container is not an error).
    async fn remove_container(&self, req: RemoveContainerRequest) -> CriResult<RemoveContainerResponse>;
    /// Containers matching the filter.
    async fn list_containers(&self, req: ListContainersRequest) -> CriResult<ListContainersResponse>;
    /// Status of one container (`NotFound` when missing).
    async fn container_status(&self, req: ContainerStatusRequest) -> CriResult<ContainerStatusResponse>;
    /// Change a container's resources.
    async fn update_container_resources(
        &self,
        req: UpdateContainerResourcesRequest,
    ) -> CriResult<UpdateContainerResourcesResponse>;
    /// Reopen a running container's log file.
    async fn reopen_container_log(&self, req: ReopenContainerLogRequest) -> CriResult<ReopenContainerLogResponse>;
    /// Run a command in a running container and wait for its output and exit code.
    async fn exec_sync(&self, req: ExecSyncRequest) -> CriResult<ExecSyncResponse>;
    /// Streaming URL for an interactive exec.
    async fn exec(&self, req: ExecRequest) -> CriResult<ExecResponse>;
    /// Streaming URL to attach to a container.
    async fn attach(&self, req: AttachRequest) -> CriResult<AttachResponse>;
    /// Streaming URL to forward ports into a sandbox.
    async fn port_forward(&self, req: PortForwardRequest) -> CriResult<PortForwardResponse>;
    /// Statistics of one container.
    async fn container_stats(&self, req: ContainerStatsRequest) -> CriResult<ContainerStatsResponse>;
    /// Statistics of the containers matching the filter.
    async fn list_container_stats(&self, req: ListContainerStatsRequest) -> CriResult<ListContainerStatsResponse>;
    /// Statistics of one sandbox.
    async fn pod_sandbox_stats(&self, req: PodSandboxStatsRequest) -> CriResult<PodSandboxStatsResponse>;
    /// Statistics of the sandboxes matching the filter.
    async fn list_pod_sandbox_stats(&self, req: ListPodSandboxStatsRequest) -> CriResult<ListPodSandboxStatsResponse>;
    /// Hand the pod CIDR to the runtime.
    async fn update_runtime_config(&self, req: UpdateRuntimeConfigRequest) -> CriResult<UpdateRuntimeConfigResponse>;
    /// Runtime and network readiness conditions.
    async fn status(&self, req: StatusRequest) -> CriResult<StatusResponse>;
    /// The cgroup driver the runtime uses (`Unimplemented` on containerd before 2.0).
    async fn runtime_config(&self, req: RuntimeConfigRequest) -> CriResult<RuntimeConfigResponse>;
    /// Change a sandbox's pod-level resources (`Unimplemented` on older runtimes).
    async fn update_pod_sandbox_resources(
        &self,
        req: UpdatePodSandboxResourcesRequest,
    ) -> CriResult<UpdatePodSandboxResourcesResponse>;
}

/// `runtime.v1.ImageService`: images on the node.
#[async_trait]
pub trait ImageService: Send + Sync {
    /// Images present on the node.
    async fn list_images(&self, req: ListImagesRequest) -> CriResult<ListImagesResponse>;
    /// One image; `image` is `None` (not an error) when it is not present.
    async fn image_status(&self, req: ImageStatusRequest) -> CriResult<ImageStatusResponse>;
    /// Pull an image; returns its reference (image id).
    async fn pull_image(&self, req: PullImageRequest) -> CriResult<PullImageResponse>;
    /// Remove an image (a missing image is not an error).
    async fn remove_image(&self, req: RemoveImageRequest) -> CriResult<RemoveImageResponse>;
    /// Usage of the image and container filesystems.
    async fn image_fs_info(&self, req: ImageFsInfoRequest) -> CriResult<ImageFsInfoResponse>;
}
