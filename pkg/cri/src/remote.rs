//! `RemoteRuntime`: the CRI over gRPC on a unix socket (containerd's `unix:///run/containerd/containerd.sock`).
//!
//! One tonic `Channel` carries both services. It is built from an `Endpoint` with a connector that
//! dials the socket with `tokio::net::UnixStream` each time a connection is needed, so when the
//! runtime restarts the channel reconnects by itself on the next call: the kubelet keeps its
//! `RemoteRuntime`. Read-only calls that fail with `Unavailable` (the connection broke under
//! them) are sent once more on a fresh connection. Every call has a deadline, sent to the runtime
//! as `grpc-timeout` and enforced locally as well.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use hyper_util::rt::TokioIo;
use tonic::transport::{Channel, Endpoint, Uri};

use crate::error::{Code, CriError, CriOp};
use crate::service::{CriResult, ImageService, RuntimeService};
use crate::v1::image_service_client::ImageServiceClient;
use crate::v1::runtime_service_client::RuntimeServiceClient;
use crate::v1::*;

/// Largest message accepted or sent (the kubelet's limit): a `ListContainers` on a busy node
/// outgrows tonic's 4 MiB default.
pub const MAX_MESSAGE_SIZE: usize = 16 * 1024 * 1024;

/// Deadlines and limits of a `RemoteRuntime`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteOptions {
    /// Deadline of ordinary calls.
    pub default_timeout: Duration,
    /// Deadline of the slow calls: PullImage, RunPodSandbox, StopPodSandbox, and ExecSync without
    /// a timeout of its own.
    pub long_timeout: Duration,
    /// How long dialing the socket may take.
    pub connect_timeout: Duration,
    /// Largest message in either direction.
    pub max_message_size: usize,
}

impl Default for RemoteOptions {
    fn default() -> Self {
        RemoteOptions {
            default_timeout: Duration::from_secs(30),
            long_timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(5),
            max_message_size: MAX_MESSAGE_SIZE,
        }
    }
}

/// A CRI runtime reached over gRPC on a unix socket. Cheap to clone; clones share the connection.
#[derive(Debug, Clone)]
pub struct RemoteRuntime {
    endpoint: String,
    runtime: RuntimeServiceClient<Channel>,
    images: ImageServiceClient<Channel>,
    options: RemoteOptions,
}

/// The socket path of a CRI endpoint: `unix:///path/to.sock`, or a bare absolute path.
pub fn socket_path(endpoint: &str) -> CriResult<PathBuf> {
    let invalid =
        |reason: &str| CriError::InvalidEndpoint { endpoint: endpoint.to_string(), reason: reason.to_string() };
    let path = if let Some(rest) = endpoint.strip_prefix("unix://") {
        rest
    } else if endpoint.starts_with('/') {
        endpoint
    } else if let Some((scheme, _)) = endpoint.split_once("://") {
        return Err(invalid(&format!("unsupported scheme {scheme:?}, only unix:// is")));
    } else {
        return Err(invalid("expected unix:///path/to/socket"));
    };
    if !path.starts_with('/') {
        return Err(invalid("the socket path must be absolute"));
    }
    Ok(PathBuf::from(path))
}

impl RemoteRuntime {
    /// Connects to `endpoint` now: fails with `Unavailable` if nothing listens there.
    pub async fn connect(endpoint: &str) -> CriResult<Self> {
        Self::connect_with(endpoint, RemoteOptions::default()).await
    }

    /// Like [`RemoteRuntime::connect`] with explicit options.
    pub async fn connect_with(endpoint: &str, options: RemoteOptions) -> CriResult<Self> {
        let (grpc, path) = grpc_endpoint(endpoint, &options)?;
        let channel = grpc
            .connect_with_connector(unix_connector(path))
            .await
            .map_err(|err| CriError::Connect { endpoint: endpoint.to_string(), message: error_chain(&err) })?;
        Ok(Self::from_channel(endpoint, channel, options))
    }

    /// Connects on first use: for a runtime that is still starting. Must be called inside a
    /// tokio runtime (the channel spawns its worker task).
    pub fn connect_lazy(endpoint: &str) -> CriResult<Self> {
        Self::connect_lazy_with(endpoint, RemoteOptions::default())
    }

    /// Like [`RemoteRuntime::connect_lazy`] with explicit options.
    pub fn connect_lazy_with(endpoint: &str, options: RemoteOptions) -> CriResult<Self> {
        let (grpc, path) = grpc_endpoint(endpoint, &options)?;
        let channel = grpc.connect_with_connector_lazy(unix_connector(path));
        Ok(Self::from_channel(endpoint, channel, options))
    }

    fn from_channel(endpoint: &str, channel: Channel, options: RemoteOptions) -> Self {
        let runtime = RuntimeServiceClient::new(channel.clone())
            .max_decoding_message_size(options.max_message_size)
            .max_encoding_message_size(options.max_message_size);
        let images = ImageServiceClient::new(channel)
            .max_decoding_message_size(options.max_message_size)
            .max_encoding_message_size(options.max_message_size);
        RemoteRuntime { endpoint: endpoint.to_string(), runtime, images, options }
    }

    /// The endpoint this runtime was connected with.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The deadlines in force.
    pub fn options(&self) -> &RemoteOptions {
        &self.options
    }

    /// One unary call with its deadline; a read-only call is sent once more after `Unavailable`.
    async fn call<C, Req, Resp, F, Fut>(
        &self,
        op: CriOp,
        timeout: Duration,
        client: &C,
        req: Req,
        f: F,
    ) -> CriResult<Resp>
    where
        C: Clone,
        Req: Clone,
        F: Fn(C, tonic::Request<Req>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<Resp>, tonic::Status>>,
    {
        let attempts = if op.is_read_only() { 2 } else { 1 };
        let started = Instant::now();
        let mut attempt = 1;
        loop {
            let mut request = tonic::Request::new(req.clone());
            request.set_timeout(timeout);
            let sent = Instant::now();
            let result = match tokio::time::timeout(timeout, f(client.clone(), request)).await {
                Err(_) => Err(CriError::Timeout { op, after: timeout }),
                // A server enforcing grpc-timeout may answer Cancelled rather than DeadlineExceeded.
                Ok(Err(status)) if status.code() == Code::Cancelled && sent.elapsed() >= timeout => {
                    Err(CriError::Timeout { op, after: timeout })
                }
                Ok(Err(status)) => Err(classify(op, &status)),
                Ok(Ok(response)) => Ok(response.into_inner()),
            };
            match result {
                Err(err) if err.is_unavailable() && attempt < attempts => {
                    tracing::debug!(%op, endpoint = %self.endpoint, error = %err, "CRI runtime unavailable, retrying on a new connection");
                    attempt += 1;
                }
                other => {
                    tracing::trace!(%op, elapsed_ms = started.elapsed().as_millis() as u64, ok = other.is_ok(), "CRI call");
                    return other;
                }
            }
        }
    }

    /// Deadline of a call that itself waits up to `seconds` (StopContainer, ExecSync).
    fn default_plus(&self, seconds: i64) -> Duration {
        self.options.default_timeout + Duration::from_secs(u64::try_from(seconds).unwrap_or(0))
    }
}

fn grpc_endpoint(endpoint: &str, options: &RemoteOptions) -> CriResult<(Endpoint, PathBuf)> {
    let path = socket_path(endpoint)?;
    // The URI only fills the :authority header; the connector ignores it and dials the socket.
    let grpc = Endpoint::from_static("http://localhost").connect_timeout(options.connect_timeout);
    Ok((grpc, path))
}

/// Dials the socket at `path` each time the channel needs a connection.
fn unix_connector(
    path: PathBuf,
) -> impl tower::Service<
    Uri,
    Response = TokioIo<tokio::net::UnixStream>,
    Error = std::io::Error,
    Future = impl Future<Output = std::io::Result<TokioIo<tokio::net::UnixStream>>> + Send,
> + Send
       + Clone
       + 'static {
    tower::service_fn(move |_: Uri| {
        let path = path.clone();
        async move { dial(&path).await }
    })
}

async fn dial(path: &Path) -> std::io::Result<TokioIo<tokio::net::UnixStream>> {
    let stream = tokio::net::UnixStream::connect(path)
        .await
        .map_err(|err| std::io::Error::new(err.kind(), format!("dialing {}: {err}", path.display())))?;
    tracing::debug!(socket = %path.display(), "connected to the CRI runtime");
    Ok(TokioIo::new(stream))
}

/// The error for a failed call. A status the transport made up locally (the connection broke:
/// tonic answers `Unknown` "transport error") becomes `Unavailable`, as gRPC specifies for a
/// broken connection; statuses answered by the runtime keep their code.
fn classify(op: CriOp, status: &tonic::Status) -> CriError {
    let source = std::error::Error::source(status);
    let from_transport = source.is_some_and(|err| err.downcast_ref::<tonic::transport::Error>().is_some());
    match source {
        Some(err) if from_transport && status.code() == Code::Unknown => {
            CriError::rpc(op, Code::Unavailable, error_chain(err))
        }
        _ => CriError::from_status(op, status),
    }
}

fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// `$method` on the runtime client with the deadline `$timeout`.
macro_rules! runtime_call {
    ($self:ident, $op:ident, $method:ident, $req:ident, $timeout:expr) => {
        $self
            .call(CriOp::$op, $timeout, &$self.runtime, $req, |mut client, request| async move {
                client.$method(request).await
            })
            .await
    };
}

/// `$method` on the image client with the deadline `$timeout`.
macro_rules! image_call {
    ($self:ident, $op:ident, $method:ident, $req:ident, $timeout:expr) => {
        $self
            .call(CriOp::$op, $timeout, &$self.images, $req, |mut client, request| async move {
                client.$method(request).await
            })
            .await
    };
}

#[async_trait]
impl RuntimeService for RemoteRuntime {
    async fn version(&self, req: VersionRequest) -> CriResult<VersionResponse> {
        runtime_call!(self, Version, version, req, self.options.default_timeout)
    }

    async fn run_pod_sandbox(&self, req: RunPodSandboxRequest) -> CriResult<RunPodSandboxResponse> {
        runtime_call!(self, RunPodSandbox, run_pod_sandbox, req, self.options.long_timeout)
    }

    async fn stop_pod_sandbox(&self, req: StopPodSandboxRequest) -> CriResult<StopPodSandboxResponse> {
        runtime_call!(self, StopPodSandbox, stop_pod_sandbox, req, self.options.long_timeout)
    }

    async fn remove_pod_sandbox(&self, req: RemovePodSandboxRequest) -> CriResult<RemovePodSandboxResponse> {
        runtime_call!(self, RemovePodSandbox, remove_pod_sandbox, req, self.options.long_timeout)
    }

    async fn pod_sandbox_status(&self, req: PodSandboxStatusRequest) -> CriResult<PodSandboxStatusResponse> {
        runtime_call!(self, PodSandboxStatus, pod_sandbox_status, req, self.options.default_timeout)
    }

    async fn list_pod_sandbox(&self, req: ListPodSandboxRequest) -> CriResult<ListPodSandboxResponse> {
        runtime_call!(self, ListPodSandbox, list_pod_sandbox, req, self.options.default_timeout)
    }

    async fn create_container(&self, req: CreateContainerRequest) -> CriResult<CreateContainerResponse> {
        runtime_call!(self, CreateContainer, create_container, req, self.options.default_timeout)
    }

    async fn start_container(&self, req: StartContainerRequest) -> CriResult<StartContainerResponse> {
        runtime_call!(self, StartContainer, start_container, req, self.options.default_timeout)
    }

    async fn stop_container(&self, req: StopContainerRequest) -> CriResult<StopContainerResponse> {
        let timeout = self.default_plus(req.timeout);
        runtime_call!(self, StopContainer, stop_container, req, timeout)
    }

    async fn remove_container(&self, req: RemoveContainerRequest) -> CriResult<RemoveContainerResponse> {
        runtime_call!(self, RemoveContainer, remove_container, req, self.options.default_timeout)
    }

    async fn list_containers(&self, req: ListContainersRequest) -> CriResult<ListContainersResponse> {
        runtime_call!(self, ListContainers, list_containers, req, self.options.default_timeout)
    }

    async fn container_status(&self, req: ContainerStatusRequest) -> CriResult<ContainerStatusResponse> {
        runtime_call!(self, ContainerStatus, container_status, req, self.options.default_timeout)
    }

    async fn update_container_resources(
        &self,
        req: UpdateContainerResourcesRequest,
    ) -> CriResult<UpdateContainerResourcesResponse> {
        runtime_call!(self, UpdateContainerResources, update_container_resources, req, self.options.default_timeout)
    }

    async fn reopen_container_log(&self, req: ReopenContainerLogRequest) -> CriResult<ReopenContainerLogResponse> {
        runtime_call!(self, ReopenContainerLog, reopen_container_log, req, self.options.default_timeout)
    }

    async fn exec_sync(&self, req: ExecSyncRequest) -> CriResult<ExecSyncResponse> {
        let timeout = if req.timeout > 0 { self.default_plus(req.timeout) } else { self.options.long_timeout };
        runtime_call!(self, ExecSync, exec_sync, req, timeout)
    }

    async fn exec(&self, req: ExecRequest) -> CriResult<ExecResponse> {
        runtime_call!(self, Exec, exec, req, self.options.default_timeout)
    }

    async fn attach(&self, req: AttachRequest) -> CriResult<AttachResponse> {
        runtime_call!(self, Attach, attach, req, self.options.default_timeout)
    }

    async fn port_forward(&self, req: PortForwardRequest) -> CriResult<PortForwardResponse> {
        runtime_call!(self, PortForward, port_forward, req, self.options.default_timeout)
    }

    async fn container_stats(&self, req: ContainerStatsRequest) -> CriResult<ContainerStatsResponse> {
        runtime_call!(self, ContainerStats, container_stats, req, self.options.default_timeout)
    }

    async fn list_container_stats(&self, req: ListContainerStatsRequest) -> CriResult<ListContainerStatsResponse> {
        runtime_call!(self, ListContainerStats, list_container_stats, req, self.options.default_timeout)
    }

    async fn pod_sandbox_stats(&self, req: PodSandboxStatsRequest) -> CriResult<PodSandboxStatsResponse> {
        runtime_call!(self, PodSandboxStats, pod_sandbox_stats, req, self.options.default_timeout)
    }

    async fn list_pod_sandbox_stats(&self, req: ListPodSandboxStatsRequest) -> CriResult<ListPodSandboxStatsResponse> {
        runtime_call!(self, ListPodSandboxStats, list_pod_sandbox_stats, req, self.options.default_timeout)
    }

    async fn update_runtime_config(&self, req: UpdateRuntimeConfigRequest) -> CriResult<UpdateRuntimeConfigResponse> {
        runtime_call!(self, UpdateRuntimeConfig, update_runtime_config, req, self.options.default_timeout)
    }

    async fn status(&self, req: StatusRequest) -> CriResult<StatusResponse> {
        runtime_call!(self, Status, status, req, self.options.default_timeout)
    }

    async fn runtime_config(&self, req: RuntimeConfigRequest) -> CriResult<RuntimeConfigResponse> {
        runtime_call!(self, RuntimeConfig, runtime_config, req, self.options.default_timeout)
    }

    async fn update_pod_sandbox_resources(
        &self,
        req: UpdatePodSandboxResourcesRequest,
    ) -> CriResult<UpdatePodSandboxResourcesResponse> {
        runtime_call!(self, UpdatePodSandboxResources, update_pod_sandbox_resources, req, self.options.default_timeout)
    }
}

#[async_trait]
impl ImageService for RemoteRuntime {
    async fn list_images(&self, req: ListImagesRequest) -> CriResult<ListImagesResponse> {
        image_call!(self, ListImages, list_images, req, self.options.default_timeout)
    }

    async fn image_status(&self, req: ImageStatusRequest) -> CriResult<ImageStatusResponse> {
        image_call!(self, ImageStatus, image_status, req, self.options.default_timeout)
    }

    async fn pull_image(&self, req: PullImageRequest) -> CriResult<PullImageResponse> {
        image_call!(self, PullImage, pull_image, req, self.options.long_timeout)
    }

    async fn remove_image(&self, req: RemoveImageRequest) -> CriResult<RemoveImageResponse> {
        image_call!(self, RemoveImage, remove_image, req, self.options.default_timeout)
    }

    async fn image_fs_info(&self, req: ImageFsInfoRequest) -> CriResult<ImageFsInfoResponse> {
        image_call!(self, ImageFsInfo, image_fs_info, req, self.options.default_timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_path_accepts_unix_urls_and_bare_absolute_paths() {
        assert_eq!(
            socket_path("unix:///run/containerd/containerd.sock").expect("unix url"),
            PathBuf::from("/run/containerd/containerd.sock")
        );
        assert_eq!(socket_path("/tmp/cri.sock").expect("bare path"), PathBuf::from("/tmp/cri.sock"));
    }

    #[test]
    fn socket_path_rejects_tcp_and_relative_paths() {
        for bad in ["tcp://127.0.0.1:1234", "unix://relative.sock", "containerd.sock", "npipe:////./pipe/x"] {
            let err = socket_path(bad).expect_err(bad);
            assert!(matches!(err, CriError::InvalidEndpoint { .. }), "{bad}: {err}");
        }
    }

    #[tokio::test]
    async fn stop_and_exec_deadlines_include_the_calls_own_timeout() {
        let runtime = RemoteRuntime::connect_lazy("unix:///nonexistent/cri.sock");
        let runtime = runtime.expect("lazy connect never dials");
        assert_eq!(runtime.default_plus(10), Duration::from_secs(40));
        assert_eq!(runtime.default_plus(-5), Duration::from_secs(30));
    }
}
