//! `RemoteRuntime` over a real unix socket against `CriServer` + `FakeRuntime`: the gRPC wire,
//! status codes, deadlines, and reconnection when the runtime process goes away and comes back.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k1s_cri::serve::{bind_unix, CriServer};
use k1s_cri::v1::*;
use k1s_cri::{CriError, CriOp, FakeRuntime, ImageService, RemoteOptions, RemoteRuntime, RuntimeService};

/// A CRI server on its own thread and tokio runtime, so stopping it drops every connection at
/// once, as when containerd dies.
struct ServerProcess {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ServerProcess {
    fn start(socket: &Path, fake: Arc<FakeRuntime>) -> Self {
        let listener_path = socket.to_path_buf();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("server runtime");
            runtime.block_on(async move {
                let listener = bind_unix(&listener_path).expect("bind");
                ready_tx.send(()).expect("signal ready");
                let server = CriServer::new(fake.clone(), fake);
                tokio::select! {
                    result = server.serve(listener, std::future::pending()) => result.expect("serve"),
                    _ = stopped => {}
                }
            });
            runtime.shutdown_timeout(Duration::ZERO);
        });
        ready_rx.recv().expect("server ready");
        ServerProcess { stop: Some(stop), thread: Some(thread) }
    }

    fn kill(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            thread.join().expect("server thread");
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn socket_in(dir: &tempfile::TempDir) -> (PathBuf, String) {
    let path = dir.path().join("cri.sock");
    let endpoint = format!("unix://{}", path.display());
    (path, endpoint)
}

fn sandbox_config() -> PodSandboxConfig {
    PodSandboxConfig {
        metadata: Some(PodSandboxMetadata {
            name: "web".to_string(),
            uid: "uid-1".to_string(),
            namespace: "default".to_string(),
            attempt: 0,
        }),
        ..Default::default()
    }
}

#[tokio::test]
async fn calls_cross_the_socket_and_keep_their_status_codes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, endpoint) = socket_in(&dir);
    let fake = Arc::new(FakeRuntime::new());
    let _server = ServerProcess::start(&path, fake.clone());
    let remote = RemoteRuntime::connect(&endpoint).await.expect("connect");

    let version = remote.version(VersionRequest { version: "0.1.0".to_string() }).await.expect("version");
    assert_eq!((version.runtime_name.as_str(), version.runtime_api_version.as_str()), ("fake", "v1"));

    let image = Some(ImageSpec { image: "busybox".to_string(), ..Default::default() });
    let pulled =
        remote.pull_image(PullImageRequest { image: image.clone(), ..Default::default() }).await.expect("pull");
    let sandbox =
        remote.run_pod_sandbox(RunPodSandboxRequest { config: Some(sandbox_config()), runtime_handler: String::new() });
    let sandbox = sandbox.await.expect("run").pod_sandbox_id;
    let config = ContainerConfig {
        metadata: Some(ContainerMetadata { name: "app".to_string(), attempt: 0 }),
        image,
        ..Default::default()
    };
    let create = CreateContainerRequest {
        pod_sandbox_id: sandbox,
        config: Some(config),
        sandbox_config: Some(sandbox_config()),
    };
    let id = remote.create_container(create).await.expect("create").container_id;
    remote.start_container(StartContainerRequest { container_id: id.clone() }).await.expect("start");
    let status = remote.container_status(ContainerStatusRequest { container_id: id, verbose: false }).await;
    let status = status.expect("status").status.expect("status present");
    assert_eq!(status.state(), ContainerState::ContainerRunning);
    assert_eq!(status.image_id, pulled.image_ref);

    let missing = remote.container_status(ContainerStatusRequest { container_id: "nope".to_string(), verbose: false });
    let err = missing.await.expect_err("missing container");
    assert!(err.is_not_found(), "{err}");
    assert_eq!(err.op(), Some(CriOp::ContainerStatus));

    let bad = ImageSpec { image: "127.0.0.1:5000/does-not-exist:1".to_string(), ..Default::default() };
    let err = remote.pull_image(PullImageRequest { image: Some(bad), ..Default::default() }).await.expect_err("pull");
    assert!(err.is_not_found(), "{err}");
    assert_eq!(fake.count(CriOp::PullImage), 2, "both pulls reached the fake");
}

#[tokio::test]
async fn eager_connect_to_a_missing_socket_is_unavailable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, endpoint) = socket_in(&dir);
    let err = RemoteRuntime::connect(&endpoint).await.expect_err("nothing listens");
    assert!(matches!(err, CriError::Connect { .. }), "{err}");
    assert!(err.is_unavailable());
}

#[tokio::test]
async fn lazy_client_works_once_the_runtime_starts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, endpoint) = socket_in(&dir);
    let remote = RemoteRuntime::connect_lazy(&endpoint).expect("lazy");
    let err = remote.status(StatusRequest { verbose: false }).await.expect_err("not started yet");
    assert!(err.is_unavailable(), "{err}");

    let _server = ServerProcess::start(&path, Arc::new(FakeRuntime::new()));
    remote.status(StatusRequest { verbose: false }).await.expect("status once the runtime listens");
}

#[tokio::test]
async fn client_recovers_after_the_runtime_restarts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, endpoint) = socket_in(&dir);
    let fake = Arc::new(FakeRuntime::new());
    let server = ServerProcess::start(&path, fake.clone());
    let remote = RemoteRuntime::connect(&endpoint).await.expect("connect");
    remote.version(VersionRequest::default()).await.expect("before restart");

    server.kill();
    let down =
        remote.run_pod_sandbox(RunPodSandboxRequest { config: Some(sandbox_config()), runtime_handler: String::new() });
    let err = down.await.expect_err("runtime is down");
    assert!(err.is_unavailable(), "{err}");

    let _restarted = ServerProcess::start(&path, fake.clone());
    remote.version(VersionRequest::default()).await.expect("read-only call after restart");
    let sandbox =
        remote.run_pod_sandbox(RunPodSandboxRequest { config: Some(sandbox_config()), runtime_handler: String::new() });
    sandbox.await.expect("mutating call after restart");
    assert_eq!(fake.count(CriOp::RunPodSandbox), 1, "the call made while down never arrived");
}

#[tokio::test]
async fn read_only_call_survives_a_restart_between_calls() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, endpoint) = socket_in(&dir);
    let fake = Arc::new(FakeRuntime::new());
    let server = ServerProcess::start(&path, fake.clone());
    let remote = RemoteRuntime::connect(&endpoint).await.expect("connect");
    remote.list_pod_sandbox(ListPodSandboxRequest::default()).await.expect("before restart");
    server.kill();
    let _restarted = ServerProcess::start(&path, fake);
    // The first call after the restart may meet the dead connection; it is retried once.
    remote.list_pod_sandbox(ListPodSandboxRequest::default()).await.expect("after restart, no error surfaced");
}

#[tokio::test]
async fn slow_call_fails_with_deadline_exceeded_after_its_timeout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, endpoint) = socket_in(&dir);
    let fake = Arc::new(FakeRuntime::new());
    fake.set_pull_delay(Duration::from_secs(30));
    let _server = ServerProcess::start(&path, fake);
    let options = RemoteOptions { long_timeout: Duration::from_millis(300), ..RemoteOptions::default() };
    let remote = RemoteRuntime::connect_with(&endpoint, options).await.expect("connect");
    let started = std::time::Instant::now();
    let image = Some(ImageSpec { image: "busybox".to_string(), ..Default::default() });
    let err = remote.pull_image(PullImageRequest { image, ..Default::default() }).await.expect_err("too slow");
    assert!(err.is_deadline_exceeded(), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10));
    remote.image_fs_info(ImageFsInfoRequest {}).await.expect("the channel still works");
}
