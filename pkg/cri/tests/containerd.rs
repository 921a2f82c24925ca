//! The CRI client against a real containerd:
//! `K1S_CRI_ENDPOINT=unix:///run/k1s/containerd/containerd.sock cargo test -p k1s-cri --test containerd`.
//!
//! Without `K1S_CRI_ENDPOINT` the test passes without doing anything, unless
//! `K1S_TEST_REQUIRE_CONTAINERD=1` is set: then a missing endpoint fails it. The image comes
//! from `K1S_CRI_TEST_IMAGE` (default `127.0.0.1:5000/busybox:1.36`, as `hack/images.sh` pushes
//! it); it needs `sh`, `echo` and `sleep`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k1s_cri::v1::*;
use k1s_cri::{Code, ImageService, RemoteRuntime, RuntimeService};

const DEFAULT_IMAGE: &str = "127.0.0.1:5000/busybox:1.36";

/// The endpoint to test against, or `None` to skip; panics when containerd is required.
fn endpoint() -> Option<String> {
    let endpoint = std::env::var("K1S_CRI_ENDPOINT").ok().filter(|e| !e.is_empty());
    let required = std::env::var("K1S_TEST_REQUIRE_CONTAINERD").is_ok_and(|v| v == "1");
    match endpoint {
        Some(endpoint) => Some(endpoint),
        None if required => {
            panic!("K1S_TEST_REQUIRE_CONTAINERD=1 but K1S_CRI_ENDPOINT is not set: no containerd to test")
        }
        None => {
            eprintln!("skipping the containerd test: set K1S_CRI_ENDPOINT=unix:///path/to/containerd.sock to run it");
            None
        }
    }
}

fn test_image() -> String {
    std::env::var("K1S_CRI_TEST_IMAGE").ok().filter(|i| !i.is_empty()).unwrap_or_else(|| DEFAULT_IMAGE.to_string())
}

fn sandbox_config(name: &str, uid: &str, log_directory: &str) -> PodSandboxConfig {
    PodSandboxConfig {
        metadata: Some(PodSandboxMetadata {
            name: name.to_string(),
            uid: uid.to_string(),
            namespace: "k1s-cri-test".to_string(),
            attempt: 0,
        }),
        hostname: name.to_string(),
        log_directory: log_directory.to_string(),
        labels: HashMap::from([
            ("io.kubernetes.pod.name".to_string(), name.to_string()),
            ("io.kubernetes.pod.namespace".to_string(), "k1s-cri-test".to_string()),
            ("io.kubernetes.pod.uid".to_string(), uid.to_string()),
        ]),
        linux: Some(LinuxPodSandboxConfig {
            security_context: Some(LinuxSandboxSecurityContext {
                namespace_options: Some(NamespaceOption::default()),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn container_config(image: &str) -> ContainerConfig {
    ContainerConfig {
        metadata: Some(ContainerMetadata { name: "app".to_string(), attempt: 0 }),
        image: Some(ImageSpec { image: image.to_string(), ..Default::default() }),
        command: vec!["sh".to_string(), "-c".to_string(), "echo hi; sleep 30".to_string()],
        envs: vec![KeyValue { key: "GREETING".to_string(), value: b"hello".to_vec() }],
        log_path: "app/0.log".to_string(),
        labels: HashMap::from([("io.kubernetes.container.name".to_string(), "app".to_string())]),
        linux: Some(LinuxContainerConfig {
            resources: Some(LinuxContainerResources {
                cpu_shares: 2,
                memory_limit_in_bytes: 64 << 20,
                oom_score_adj: 1000,
                ..Default::default()
            }),
            security_context: Some(LinuxContainerSecurityContext {
                capabilities: Some(Capability { drop_capabilities: vec!["NET_RAW".to_string()], ..Default::default() }),
                namespace_options: Some(NamespaceOption::default()),
                ..Default::default()
            }),
        }),
        ..Default::default()
    }
}

async fn container_state(cri: &RemoteRuntime, id: &str) -> ContainerStatus {
    let resp = cri.container_status(ContainerStatusRequest { container_id: id.to_string(), verbose: false }).await;
    resp.expect("ContainerStatus").status.expect("status present")
}

/// Sandboxes created by the test, removed whatever happens.
type Created = Arc<Mutex<Vec<String>>>;

async fn pod_lifecycle(cri: RemoteRuntime, image: String, created: Created, log_dir: String) {
    let version = cri.version(VersionRequest { version: "0.1.0".to_string() }).await.expect("Version");
    assert_eq!(version.runtime_api_version, "v1", "{version:?}");
    assert!(!version.runtime_name.is_empty());

    let status = cri.status(StatusRequest { verbose: false }).await.expect("Status");
    let conditions = status.status.map(|s| s.conditions).unwrap_or_default();
    let runtime_ready = conditions.iter().find(|c| c.r#type == "RuntimeReady").map(|c| c.status);
    assert_eq!(runtime_ready, Some(true), "{conditions:?}");

    let spec = ImageSpec { image: image.clone(), ..Default::default() };
    let pulled = cri.pull_image(PullImageRequest { image: Some(spec.clone()), ..Default::default() }).await;
    let image_ref = pulled.expect("PullImage").image_ref;
    assert!(image_ref.starts_with("sha256:"), "{image_ref}");
    let status = cri.image_status(ImageStatusRequest { image: Some(spec), verbose: false }).await.expect("ImageStatus");
    assert_eq!(status.image.map(|i| i.id), Some(image_ref.clone()));

    let (registry, _) = image.rsplit_once('/').unwrap_or(("docker.io", ""));
    let missing = ImageSpec { image: format!("{registry}/does-not-exist:1"), ..Default::default() };
    let err = cri.pull_image(PullImageRequest { image: Some(missing), ..Default::default() }).await;
    let err = err.expect_err("pulling a missing image fails");
    assert_eq!(err.code(), Code::NotFound, "{err}");

    let uid = format!("uid-{}", std::process::id());
    let config = sandbox_config("cri-test", &uid, &log_dir);
    let sandbox =
        cri.run_pod_sandbox(RunPodSandboxRequest { config: Some(config.clone()), runtime_handler: String::new() });
    let sandbox = sandbox.await.expect("RunPodSandbox").pod_sandbox_id;
    created.lock().expect("lock").push(sandbox.clone());
    let status = cri.pod_sandbox_status(PodSandboxStatusRequest { pod_sandbox_id: sandbox.clone(), verbose: false });
    let status = status.await.expect("PodSandboxStatus").status.expect("status present");
    assert_eq!(status.state(), PodSandboxState::SandboxReady);
    let ip = status.network.map(|n| n.ip).unwrap_or_default();
    assert!(!ip.is_empty(), "the sandbox got no pod IP");

    let create = CreateContainerRequest {
        pod_sandbox_id: sandbox.clone(),
        config: Some(container_config(&image)),
        sandbox_config: Some(config),
    };
    let id = cri.create_container(create).await.expect("CreateContainer").container_id;
    assert_eq!(container_state(&cri, &id).await.state(), ContainerState::ContainerCreated);
    cri.start_container(StartContainerRequest { container_id: id.clone() }).await.expect("StartContainer");
    let running = container_state(&cri, &id).await;
    assert_eq!(running.state(), ContainerState::ContainerRunning, "{running:?}");
    assert!(running.started_at > 0);
    // image_ref is the repo digest; containerd 1.6 leaves image_id (newer CRI field) empty.
    assert!(running.image_ref.contains("@sha256:"), "{running:?}");
    assert!(running.image_id.is_empty() || running.image_id == image_ref, "{running:?}");

    let exec = |cmd: &[&str]| ExecSyncRequest {
        container_id: id.clone(),
        cmd: cmd.iter().map(|s| s.to_string()).collect(),
        timeout: 10,
    };
    let hi = cri.exec_sync(exec(&["echo", "hi"])).await.expect("ExecSync");
    assert_eq!((hi.stdout.as_slice(), hi.exit_code), (b"hi\n".as_slice(), 0));
    let env = cri.exec_sync(exec(&["sh", "-c", "echo $GREETING >&2; exit 3"])).await.expect("ExecSync");
    assert_eq!((env.stderr.as_slice(), env.exit_code), (b"hello\n".as_slice(), 3));

    let url =
        cri.exec(ExecRequest { container_id: id.clone(), cmd: vec!["sh".into()], stdout: true, ..Default::default() });
    let url = url.await.expect("Exec").url;
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");

    let filter = ContainerFilter { pod_sandbox_id: sandbox.clone(), ..Default::default() };
    let listed = cri.list_containers(ListContainersRequest { filter: Some(filter) }).await.expect("ListContainers");
    assert_eq!(listed.containers.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), vec![id.as_str()]);
    let stats = cri.container_stats(ContainerStatsRequest { container_id: id.clone() }).await.expect("ContainerStats");
    assert_eq!(stats.stats.and_then(|s| s.attributes).map(|a| a.id), Some(id.clone()));
    let fs = cri.image_fs_info(ImageFsInfoRequest {}).await.expect("ImageFsInfo");
    assert!(!fs.image_filesystems.is_empty());
    // Newer RPCs: containerd 1.6 answers Unimplemented, which callers must tolerate.
    match cri.runtime_config(RuntimeConfigRequest {}).await {
        Ok(config) => assert!(config.linux.is_some()),
        Err(err) => assert!(err.is_unimplemented(), "{err}"),
    }

    let log = std::fs::read_to_string(format!("{log_dir}/app/0.log")).expect("container log file");
    assert!(log.lines().any(|line| line.ends_with(" stdout F hi")), "CRI log format: {log:?}");

    cri.stop_container(StopContainerRequest { container_id: id.clone(), timeout: 1 }).await.expect("StopContainer");
    let exited = container_state(&cri, &id).await;
    assert_eq!(exited.state(), ContainerState::ContainerExited);
    // SIGTERM ends it (143) or, ignored, SIGKILL does after the 1 s grace period (137).
    assert!([143, 137].contains(&exited.exit_code), "{exited:?}");
    assert_eq!(exited.reason, "Error");
    assert!(exited.finished_at >= exited.started_at);

    cri.remove_container(RemoveContainerRequest { container_id: id.clone() }).await.expect("RemoveContainer");
    let gone = cri.container_status(ContainerStatusRequest { container_id: id, verbose: false }).await;
    assert_eq!(gone.expect_err("removed").code(), Code::NotFound);

    cri.stop_pod_sandbox(StopPodSandboxRequest { pod_sandbox_id: sandbox.clone() }).await.expect("StopPodSandbox");
    let status = cri.pod_sandbox_status(PodSandboxStatusRequest { pod_sandbox_id: sandbox.clone(), verbose: false });
    let state = status.await.expect("PodSandboxStatus").status.map(|s| s.state());
    assert_eq!(state, Some(PodSandboxState::SandboxNotready));
    cri.remove_pod_sandbox(RemovePodSandboxRequest { pod_sandbox_id: sandbox.clone() })
        .await
        .expect("RemovePodSandbox");
    let gone = cri.pod_sandbox_status(PodSandboxStatusRequest { pod_sandbox_id: sandbox, verbose: false }).await;
    assert_eq!(gone.expect_err("removed").code(), Code::NotFound);
}

#[tokio::test]
async fn pod_lifecycle_against_containerd() {
    let Some(endpoint) = endpoint() else { return };
    let cri = RemoteRuntime::connect(&endpoint).await.expect("connect to containerd");
    let log_dir = tempfile::tempdir().expect("log dir");
    let created: Created = Arc::default();
    let steps =
        tokio::spawn(pod_lifecycle(cri.clone(), test_image(), created.clone(), log_dir.path().display().to_string()));
    let outcome = tokio::time::timeout(Duration::from_secs(240), steps).await;
    let leftovers = created.lock().expect("lock").clone();
    for sandbox in leftovers {
        let _ = cri.remove_pod_sandbox(RemovePodSandboxRequest { pod_sandbox_id: sandbox }).await;
    }
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(join)) if join.is_panic() => std::panic::resume_unwind(join.into_panic()),
        Ok(Err(join)) => panic!("test task failed: {join}"),
        Err(_) => panic!("the pod life cycle took more than 240 s"),
    }
}
