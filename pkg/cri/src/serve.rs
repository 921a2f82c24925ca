//! A CRI server on a unix socket backed by any [`RuntimeService`] + [`ImageService`]: lets a
//! whole binary (the kubelet, `k1s server`) be tested against a [`crate::FakeRuntime`] through
//! a real `--container-runtime-endpoint`, and lets this crate test [`crate::RemoteRuntime`]
//! without containerd. Errors travel as gRPC statuses with their codes.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use tokio::net::UnixListener;
use tokio_stream::wrappers::UnixListenerStream;

use crate::error::CriError;
use crate::remote::MAX_MESSAGE_SIZE;
use crate::service::{CriResult, ImageService, RuntimeService};
use crate::v1;
use crate::v1::image_service_server::ImageServiceServer;
use crate::v1::runtime_service_server::RuntimeServiceServer;

/// Serves the two CRI services from trait objects.
#[derive(Clone)]
pub struct CriServer {
    runtime: Arc<dyn RuntimeService>,
    images: Arc<dyn ImageService>,
}

impl std::fmt::Debug for CriServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CriServer").finish_non_exhaustive()
    }
}

/// Binds a unix socket at `path`, replacing a stale socket file left by an earlier server.
pub fn bind_unix(path: &Path) -> CriResult<UnixListener> {
    let fail = |err: std::io::Error| CriError::Serve { socket: path.display().to_string(), message: err.to_string() };
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => return Err(fail(err)),
    }
    UnixListener::bind(path).map_err(fail)
}

impl CriServer {
    /// A server answering RuntimeService calls with `runtime` and ImageService calls with `images`.
    pub fn new(runtime: Arc<dyn RuntimeService>, images: Arc<dyn ImageService>) -> Self {
        CriServer { runtime, images }
    }

    /// Serves on `listener` until `shutdown` completes.
    pub async fn serve(self, listener: UnixListener, shutdown: impl Future<Output = ()> + Send) -> CriResult<()> {
        let socket = listener
            .local_addr()
            .ok()
            .and_then(|addr| addr.as_pathname().map(|p| p.display().to_string()))
            .unwrap_or_default();
        let runtime = RuntimeServiceServer::new(self.clone())
            .max_decoding_message_size(MAX_MESSAGE_SIZE)
            .max_encoding_message_size(MAX_MESSAGE_SIZE);
        let images = ImageServiceServer::new(self)
            .max_decoding_message_size(MAX_MESSAGE_SIZE)
            .max_encoding_message_size(MAX_MESSAGE_SIZE);
        tracing::debug!(%socket, "serving CRI");
        tonic::transport::Server::builder()
            .add_service(runtime)
            .add_service(images)
            .serve_with_incoming_shutdown(UnixListenerStream::new(listener), shutdown)
            .await
            .map_err(|err| CriError::Serve { socket, message: err.to_string() })
    }
}

/// Implements a generated server trait by forwarding each call to the matching trait object.
macro_rules! forward_server {
    ($server_trait:path, $field:ident, $( $method:ident ( $req:ident ) -> $resp:ident ),* $(,)?) => {
        #[tonic::async_trait]
        impl $server_trait for CriServer {
            $(
                async fn $method(
                    &self,
                    request: tonic::Request<v1::$req>,
                ) -> Result<tonic::Response<v1::$resp>, tonic::Status> {
                    self.$field.$method(request.into_inner()).await.map(tonic::Response::new).map_err(|err| err.to_status())
                }
            )*
        }
    };
}

forward_server!(
    v1::runtime_service_server::RuntimeService,
    runtime,
    version(VersionRequest) -> VersionResponse,
    run_pod_sandbox(RunPodSandboxRequest) -> RunPodSandboxResponse,
    stop_pod_sandbox(StopPodSandboxRequest) -> StopPodSandboxResponse,
    remove_pod_sandbox(RemovePodSandboxRequest) -> RemovePodSandboxResponse,
    pod_sandbox_status(PodSandboxStatusRequest) -> PodSandboxStatusResponse,
    list_pod_sandbox(ListPodSandboxRequest) -> ListPodSandboxResponse,
    create_container(CreateContainerRequest) -> CreateContainerResponse,
    start_container(StartContainerRequest) -> StartContainerResponse,
    stop_container(StopContainerRequest) -> StopContainerResponse,
    remove_container(RemoveContainerRequest) -> RemoveContainerResponse,
    list_containers(ListContainersRequest) -> ListContainersResponse,
    container_status(ContainerStatusRequest) -> ContainerStatusResponse,
    update_container_resources(UpdateContainerResourcesRequest) -> UpdateContainerResourcesResponse,
    reopen_container_log(ReopenContainerLogRequest) -> ReopenContainerLogResponse,
    exec_sync(ExecSyncRequest) -> ExecSyncResponse,
    exec(ExecRequest) -> ExecResponse,
    attach(AttachRequest) -> AttachResponse,
    port_forward(PortForwardRequest) -> PortForwardResponse,
    container_stats(ContainerStatsRequest) -> ContainerStatsResponse,
    list_container_stats(ListContainerStatsRequest) -> ListContainerStatsResponse,
    pod_sandbox_stats(PodSandboxStatsRequest) -> PodSandboxStatsResponse,
    list_pod_sandbox_stats(ListPodSandboxStatsRequest) -> ListPodSandboxStatsResponse,
    update_runtime_config(UpdateRuntimeConfigRequest) -> UpdateRuntimeConfigResponse,
    status(StatusRequest) -> StatusResponse,
    runtime_config(RuntimeConfigRequest) -> RuntimeConfigResponse,
    update_pod_sandbox_resources(UpdatePodSandboxResourcesRequest) -> UpdatePodSandboxResourcesResponse,
);

forward_server!(
    v1::image_service_server::ImageService,
    images,
    list_images(ListImagesRequest) -> ListImagesResponse,
    image_status(ImageStatusRequest) -> ImageStatusResponse,
    pull_image(PullImageRequest) -> PullImageResponse,
    remove_image(RemoveImageRequest) -> RemoveImageResponse,
    image_fs_info(ImageFsInfoRequest) -> ImageFsInfoResponse,
);
