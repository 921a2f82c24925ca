//! Tests of the fake runtime's state transitions and scripting.

use std::collections::HashMap;
use std::time::Duration;

use super::*;
use crate::error::Code;

const IMAGE: &str = "127.0.0.1:5000/busybox:1.35";

fn sandbox_config(name: &str, attempt: u32) -> PodSandboxConfig {
    PodSandboxConfig {
        metadata: Some(PodSandboxMetadata {
            name: name.to_string(),
            uid: format!("uid-{name}"),
            namespace: "default".to_string(),
            attempt,
        }),
        hostname: name.to_string(),
        log_directory: format!("/var/log/pods/default_{name}_uid-{name}"),
        labels: HashMap::from([("io.kubernetes.pod.name".to_string(), name.to_string())]),
        ..Default::default()
    }
}

fn container_config(name: &str) -> ContainerConfig {
    ContainerConfig {
        metadata: Some(ContainerMetadata { name: name.to_string(), attempt: 0 }),
        image: Some(ImageSpec { image: IMAGE.to_string(), ..Default::default() }),
        command: vec!["sh".to_string(), "-c".to_string(), "sleep 30".to_string()],
        log_path: format!("{name}/0.log"),
        labels: HashMap::from([("io.kubernetes.container.name".to_string(), name.to_string())]),
        ..Default::default()
    }
}

async fn run_sandbox(fake: &FakeRuntime, name: &str) -> String {
    let req = RunPodSandboxRequest { config: Some(sandbox_config(name, 0)), runtime_handler: String::new() };
    fake.run_pod_sandbox(req).await.expect("run sandbox").pod_sandbox_id
}

async fn create(fake: &FakeRuntime, sandbox: &str, name: &str) -> CriResult<String> {
    let req = CreateContainerRequest {
        pod_sandbox_id: sandbox.to_string(),
        config: Some(container_config(name)),
        sandbox_config: Some(sandbox_config("web", 0)),
    };
    fake.create_container(req).await.map(|r| r.container_id)
}

async fn start(fake: &FakeRuntime, id: &str) -> CriResult<StartContainerResponse> {
    fake.start_container(StartContainerRequest { container_id: id.to_string() }).await
}

async fn status(fake: &FakeRuntime, id: &str) -> CriResult<ContainerStatus> {
    let req = ContainerStatusRequest { container_id: id.to_string(), verbose: false };
    fake.container_status(req).await.map(|r| r.status.unwrap_or_default())
}

/// A runtime with the test image present and a ready sandbox "web".
async fn with_sandbox() -> (FakeRuntime, String) {
    let fake = FakeRuntime::new();
    fake.add_image(IMAGE);
    let sandbox = run_sandbox(&fake, "web").await;
    (fake, sandbox)
}

#[tokio::test]
async fn container_moves_from_created_to_running_to_exited_with_timestamps() {
    let (fake, sandbox) = with_sandbox().await;
    let id = create(&fake, &sandbox, "app").await.expect("create");
    let created = status(&fake, &id).await.expect("status");
    assert_eq!(created.state(), ContainerState::ContainerCreated);
    assert!(created.created_at > 0);
    assert_eq!(created.started_at, 0);
    assert_eq!(created.log_path, "/var/log/pods/default_web_uid-web/app/0.log");
    assert!(created.image_ref.starts_with("127.0.0.1:5000/busybox@sha256:"), "{}", created.image_ref);

    start(&fake, &id).await.expect("start");
    let running = status(&fake, &id).await.expect("status");
    assert_eq!(running.state(), ContainerState::ContainerRunning);
    assert!(running.started_at >= running.created_at);

    fake.stop_container(StopContainerRequest { container_id: id.clone(), timeout: 30 }).await.expect("stop");
    let exited = status(&fake, &id).await.expect("status");
    assert_eq!(exited.state(), ContainerState::ContainerExited);
    assert_eq!(exited.exit_code, 143, "ended by SIGTERM");
    assert_eq!(exited.reason, "Error");
    assert!(exited.finished_at >= exited.started_at);

    fake.remove_container(RemoveContainerRequest { container_id: id.clone() }).await.expect("remove");
    let gone = status(&fake, &id).await.expect_err("removed");
    assert!(gone.is_not_found(), "{gone}");
    fake.remove_container(RemoveContainerRequest { container_id: id }).await.expect("second remove is a no-op");
}

#[tokio::test]
async fn stop_exit_code_follows_grace_period_and_behavior() {
    let (fake, sandbox) = with_sandbox().await;
    fake.set_container_behavior("graceful", ContainerBehavior::runs().with_stop_exit_code(0));
    let stop = |id: &str, timeout: i64| StopContainerRequest { container_id: id.to_string(), timeout };
    let mut codes = Vec::new();
    for (name, timeout) in [("graceful", 30), ("graceful2", 0)] {
        fake.set_container_behavior("graceful2", ContainerBehavior::runs().with_stop_exit_code(0));
        let id = create(&fake, &sandbox, name).await.expect("create");
        start(&fake, &id).await.expect("start");
        fake.stop_container(stop(&id, timeout)).await.expect("stop");
        let exited = status(&fake, &id).await.expect("status");
        codes.push((exited.exit_code, exited.reason));
    }
    assert_eq!(codes, vec![(0, "Completed".to_string()), (137, "Error".to_string())]);
}

#[tokio::test]
async fn starting_a_running_container_again_is_rejected() {
    let (fake, sandbox) = with_sandbox().await;
    let id = create(&fake, &sandbox, "app").await.expect("create");
    start(&fake, &id).await.expect("start");
    let err = start(&fake, &id).await.expect_err("second start");
    assert_eq!(err.code(), Code::Unknown);
    assert!(err.to_string().contains("CONTAINER_RUNNING"), "{err}");
}

#[tokio::test]
async fn create_before_the_image_is_pulled_fails_with_not_found() {
    let fake = FakeRuntime::new();
    let sandbox = run_sandbox(&fake, "web").await;
    let err = create(&fake, &sandbox, "app").await.expect_err("no image yet");
    assert!(err.is_not_found(), "{err}");

    let image = ImageSpec { image: IMAGE.to_string(), ..Default::default() };
    let pulled = fake.pull_image(PullImageRequest { image: Some(image), ..Default::default() }).await.expect("pull");
    assert!(pulled.image_ref.starts_with("sha256:"));
    create(&fake, &sandbox, "app").await.expect("create after pull");
}

#[tokio::test]
async fn pulling_a_does_not_exist_image_fails_with_not_found_and_leaves_nothing() {
    let fake = FakeRuntime::new();
    let reference = "127.0.0.1:5000/does-not-exist:1.0";
    let image = ImageSpec { image: reference.to_string(), ..Default::default() };
    let err = fake.pull_image(PullImageRequest { image: Some(image.clone()), ..Default::default() }).await;
    let err = err.expect_err("missing image");
    assert!(err.is_not_found(), "{err}");
    assert_eq!(err.op(), Some(CriOp::PullImage));
    let status = fake.image_status(ImageStatusRequest { image: Some(image), verbose: false }).await.expect("status");
    assert_eq!(status.image, None, "a failed pull stores nothing");
}

#[tokio::test]
async fn image_status_finds_a_pulled_image_by_short_name_digest_and_id() {
    let fake = FakeRuntime::new();
    let spec = |image: &str| Some(ImageSpec { image: image.to_string(), ..Default::default() });
    let pulled = fake.pull_image(PullImageRequest { image: spec("busybox"), ..Default::default() }).await;
    let id = pulled.expect("pull").image_ref;
    let by_name =
        fake.image_status(ImageStatusRequest { image: spec("docker.io/library/busybox:latest"), verbose: false });
    let image = by_name.await.expect("status").image.expect("present");
    assert_eq!(image.id, id);
    assert_eq!(image.repo_tags, vec!["docker.io/library/busybox:latest".to_string()]);
    let digest = image.repo_digests[0].clone();
    for reference in [digest.as_str(), id.as_str()] {
        let found = fake.image_status(ImageStatusRequest { image: spec(reference), verbose: false }).await;
        assert_eq!(found.expect("status").image.map(|i| i.id), Some(id.clone()), "{reference}");
    }
    fake.remove_image(RemoveImageRequest { image: spec("busybox") }).await.expect("remove");
    let listed = fake.list_images(ListImagesRequest::default()).await.expect("list");
    assert!(listed.images.is_empty());
}

#[tokio::test]
async fn container_told_to_exit_reports_its_exit_code_after_start() {
    let (fake, sandbox) = with_sandbox().await;
    fake.set_container_behavior("job", ContainerBehavior::exits_with(3));
    let id = create(&fake, &sandbox, "job").await.expect("create");
    start(&fake, &id).await.expect("start");
    let exited = status(&fake, &id).await.expect("status");
    assert_eq!(exited.state(), ContainerState::ContainerExited);
    assert_eq!((exited.exit_code, exited.reason.as_str()), (3, "Error"));
    assert_eq!(exited.finished_at, exited.started_at);
}

#[tokio::test(start_paused = true)]
async fn container_with_a_delayed_exit_runs_until_the_delay_passes() {
    let (fake, sandbox) = with_sandbox().await;
    fake.set_container_behavior("job", ContainerBehavior::exits_after(Duration::from_secs(10), 0));
    let id = create(&fake, &sandbox, "job").await.expect("create");
    start(&fake, &id).await.expect("start");
    tokio::time::advance(Duration::from_secs(9)).await;
    assert_eq!(status(&fake, &id).await.expect("status").state(), ContainerState::ContainerRunning);
    tokio::time::advance(Duration::from_secs(1)).await;
    let done = status(&fake, &id).await.expect("status");
    assert_eq!((done.state(), done.exit_code, done.reason.as_str()), (ContainerState::ContainerExited, 0, "Completed"));
    assert_eq!(done.finished_at - done.started_at, 10_000_000_000);
}

#[tokio::test]
async fn exit_container_ends_a_running_container_with_the_given_code() {
    let (fake, sandbox) = with_sandbox().await;
    let id = create(&fake, &sandbox, "app").await.expect("create");
    start(&fake, &id).await.expect("start");
    assert_eq!(fake.container_id("app").as_deref(), Some(id.as_str()));
    fake.exit_container(&id, 42).expect("exit");
    let exited = status(&fake, &id).await.expect("status");
    assert_eq!((exited.state(), exited.exit_code), (ContainerState::ContainerExited, 42));
}

#[tokio::test]
async fn start_error_leaves_the_container_exited_with_128() {
    let (fake, sandbox) = with_sandbox().await;
    fake.set_container_behavior("bad", ContainerBehavior::fails_to_start("exec: \"nope\": executable file not found"));
    let id = create(&fake, &sandbox, "bad").await.expect("create");
    let err = start(&fake, &id).await.expect_err("start fails");
    assert!(err.to_string().contains("executable file not found"), "{err}");
    let exited = status(&fake, &id).await.expect("status");
    assert_eq!(
        (exited.state(), exited.exit_code, exited.reason.as_str()),
        (ContainerState::ContainerExited, 128, "StartError")
    );
}

#[tokio::test]
async fn exec_sync_follows_scripts_then_falls_back_to_builtins() {
    let (fake, sandbox) = with_sandbox().await;
    let id = create(&fake, &sandbox, "app").await.expect("create");
    start(&fake, &id).await.expect("start");
    fake.script_exec(ExecScript::exits(1, "not yet").in_container("app").for_command(["cat", "/tmp/ready"]).times(2));
    fake.script_exec(ExecScript::exits(0, "other").in_container("sidecar"));
    let exec = |cmd: &[&str]| ExecSyncRequest {
        container_id: id.clone(),
        cmd: cmd.iter().map(|s| s.to_string()).collect(),
        timeout: 1,
    };
    for _ in 0..2 {
        let failing = fake.exec_sync(exec(&["cat", "/tmp/ready"])).await.expect("exec");
        assert_eq!((failing.exit_code, failing.stdout.as_slice()), (1, b"not yet".as_slice()));
    }
    let ready = fake.exec_sync(exec(&["cat", "/tmp/ready"])).await.expect("exec");
    assert_eq!(ready.exit_code, 0, "script used up");
    let echoed = fake.exec_sync(exec(&["echo", "hi"])).await.expect("exec");
    assert_eq!(echoed.stdout, b"hi\n");
}

#[tokio::test]
async fn exec_script_can_fail_the_call() {
    let (fake, sandbox) = with_sandbox().await;
    let id = create(&fake, &sandbox, "app").await.expect("create");
    start(&fake, &id).await.expect("start");
    fake.script_exec(ExecScript::fails(CriError::rpc(CriOp::ExecSync, Code::DeadlineExceeded, "command timed out")));
    let err = fake.exec_sync(ExecSyncRequest { container_id: id, cmd: vec!["sleep".into()], timeout: 1 }).await;
    assert!(err.expect_err("scripted failure").is_deadline_exceeded());
}

#[tokio::test]
async fn exec_in_an_exited_container_is_rejected() {
    let (fake, sandbox) = with_sandbox().await;
    let id = create(&fake, &sandbox, "app").await.expect("create");
    let err = fake.exec_sync(ExecSyncRequest { container_id: id.clone(), cmd: vec!["true".into()], timeout: 1 }).await;
    assert!(err.expect_err("created, not running").to_string().contains("CONTAINER_CREATED"));
    let err = fake.exec(ExecRequest { container_id: id, cmd: vec!["sh".into()], ..Default::default() }).await;
    assert_eq!(err.expect_err("not running").code(), Code::Unknown);
}

#[tokio::test]
async fn streaming_calls_hand_out_urls_on_the_streaming_base() {
    let (fake, sandbox) = with_sandbox().await;
    fake.set_streaming_base("http://127.0.0.1:4242");
    let id = create(&fake, &sandbox, "app").await.expect("create");
    start(&fake, &id).await.expect("start");
    let exec = fake.exec(ExecRequest { container_id: id.clone(), cmd: vec!["sh".into()], ..Default::default() }).await;
    assert!(exec.expect("exec").url.starts_with("http://127.0.0.1:4242/exec/"));
    let attach = fake.attach(AttachRequest { container_id: id, stdout: true, ..Default::default() }).await;
    assert!(attach.expect("attach").url.starts_with("http://127.0.0.1:4242/attach/"));
    let forward = fake.port_forward(PortForwardRequest { pod_sandbox_id: sandbox, port: vec![80] }).await;
    assert!(forward.expect("port-forward").url.starts_with("http://127.0.0.1:4242/portforward/"));
}

#[tokio::test]
async fn injected_failure_hits_the_next_call_only() {
    let fake = FakeRuntime::new();
    fake.fail_next(
        CriOp::RunPodSandbox,
        CriError::rpc(CriOp::RunPodSandbox, Code::Unavailable, "containerd restarting"),
    );
    let req = RunPodSandboxRequest { config: Some(sandbox_config("web", 0)), runtime_handler: String::new() };
    let err = fake.run_pod_sandbox(req.clone()).await.expect_err("injected");
    assert!(err.is_unavailable());
    fake.run_pod_sandbox(req).await.expect("second call succeeds");
    assert_eq!(fake.count(CriOp::RunPodSandbox), 2);
}

#[tokio::test]
async fn failure_rule_for_a_target_spares_other_targets() {
    let fake = FakeRuntime::new();
    let unauthorized = CriError::rpc(CriOp::PullImage, Code::Unknown, "401 Unauthorized");
    fake.inject_failure(FailureRule::new(CriOp::PullImage, unauthorized).for_target("private/"));
    let spec = |image: &str| Some(ImageSpec { image: image.to_string(), ..Default::default() });
    for _ in 0..2 {
        let err =
            fake.pull_image(PullImageRequest { image: spec("registry.example/private/app:1"), ..Default::default() });
        assert!(err.await.expect_err("always fails").to_string().contains("401"));
    }
    fake.pull_image(PullImageRequest { image: spec("busybox"), ..Default::default() }).await.expect("other image");
    fake.clear_failures();
    fake.pull_image(PullImageRequest { image: spec("registry.example/private/app:1"), ..Default::default() })
        .await
        .expect("cleared");
}

#[tokio::test]
async fn same_sandbox_metadata_twice_is_refused_until_the_attempt_changes() {
    let fake = FakeRuntime::new();
    run_sandbox(&fake, "web").await;
    let again = RunPodSandboxRequest { config: Some(sandbox_config("web", 0)), runtime_handler: String::new() };
    let err = fake.run_pod_sandbox(again).await.expect_err("name reserved");
    assert!(err.to_string().contains("is reserved for"), "{err}");
    let next = RunPodSandboxRequest { config: Some(sandbox_config("web", 1)), runtime_handler: String::new() };
    fake.run_pod_sandbox(next).await.expect("next attempt");
}

#[tokio::test]
async fn stopping_a_sandbox_kills_its_containers_and_removing_it_removes_them() {
    let (fake, sandbox) = with_sandbox().await;
    let id = create(&fake, &sandbox, "app").await.expect("create");
    start(&fake, &id).await.expect("start");
    fake.stop_pod_sandbox(StopPodSandboxRequest { pod_sandbox_id: sandbox.clone() }).await.expect("stop");
    let sandbox_status =
        fake.pod_sandbox_status(PodSandboxStatusRequest { pod_sandbox_id: sandbox.clone(), verbose: false });
    let sandbox_status = sandbox_status.await.expect("status").status.expect("status");
    assert_eq!(sandbox_status.state(), PodSandboxState::SandboxNotready);
    assert_eq!(status(&fake, &id).await.expect("status").exit_code, 137);
    let err = create(&fake, &sandbox, "late").await.expect_err("sandbox not ready");
    assert!(err.to_string().contains("not ready"), "{err}");

    fake.remove_pod_sandbox(RemovePodSandboxRequest { pod_sandbox_id: sandbox.clone() }).await.expect("remove");
    assert!(status(&fake, &id).await.expect_err("container removed too").is_not_found());
    fake.remove_pod_sandbox(RemovePodSandboxRequest { pod_sandbox_id: sandbox.clone() }).await.expect("idempotent");
    let err = fake.stop_pod_sandbox(StopPodSandboxRequest { pod_sandbox_id: sandbox }).await.expect_err("gone");
    assert!(err.is_not_found());
}

#[tokio::test]
async fn host_network_sandbox_gets_no_pod_ip() {
    let fake = FakeRuntime::new();
    let pod_ip = run_sandbox(&fake, "web").await;
    let mut config = sandbox_config("host", 0);
    config.linux = Some(LinuxPodSandboxConfig {
        security_context: Some(LinuxSandboxSecurityContext {
            namespace_options: Some(NamespaceOption { network: NamespaceMode::Node.into(), ..Default::default() }),
            ..Default::default()
        }),
        ..Default::default()
    });
    let host = fake.run_pod_sandbox(RunPodSandboxRequest { config: Some(config), runtime_handler: String::new() });
    let host = host.await.expect("run").pod_sandbox_id;
    let ip = |id: String| async {
        let resp = fake.pod_sandbox_status(PodSandboxStatusRequest { pod_sandbox_id: id, verbose: false }).await;
        resp.expect("status").status.and_then(|s| s.network).map(|n| n.ip).unwrap_or_default()
    };
    assert!(ip(pod_ip).await.starts_with("10.42."));
    assert_eq!(ip(host).await, "");
}

#[tokio::test]
async fn list_filters_by_sandbox_state_and_labels() {
    let (fake, web) = with_sandbox().await;
    let db = run_sandbox(&fake, "db").await;
    let app = create(&fake, &web, "app").await.expect("create");
    create(&fake, &db, "db").await.expect("create");
    start(&fake, &app).await.expect("start");

    let by_sandbox = ContainerFilter { pod_sandbox_id: web[..12].to_string(), ..Default::default() };
    let listed = fake.list_containers(ListContainersRequest { filter: Some(by_sandbox) }).await.expect("list");
    assert_eq!(listed.containers.iter().map(|c| c.id.clone()).collect::<Vec<_>>(), vec![app.clone()]);

    let running = ContainerFilter {
        state: Some(ContainerStateValue { state: ContainerState::ContainerRunning.into() }),
        ..Default::default()
    };
    let listed = fake.list_containers(ListContainersRequest { filter: Some(running) }).await.expect("list");
    assert_eq!(listed.containers.len(), 1);

    let labelled = PodSandboxFilter {
        label_selector: HashMap::from([("io.kubernetes.pod.name".to_string(), "db".to_string())]),
        ..Default::default()
    };
    let listed = fake.list_pod_sandbox(ListPodSandboxRequest { filter: Some(labelled) }).await.expect("list");
    assert_eq!(listed.items.iter().map(|s| s.id.clone()).collect::<Vec<_>>(), vec![db]);
}

#[tokio::test]
async fn calls_are_recorded_with_their_targets() {
    let (fake, sandbox) = with_sandbox().await;
    let id = create(&fake, &sandbox, "app").await.expect("create");
    start(&fake, &id).await.expect("start");
    let calls = fake.calls();
    let expected = vec![
        RecordedCall { op: CriOp::RunPodSandbox, target: "default/web".to_string() },
        RecordedCall { op: CriOp::CreateContainer, target: "app".to_string() },
        RecordedCall { op: CriOp::StartContainer, target: id },
    ];
    assert_eq!(calls, expected);
    fake.clear_calls();
    assert!(fake.calls().is_empty());
}

#[tokio::test]
async fn status_reports_network_not_ready_when_told() {
    let fake = FakeRuntime::new();
    let ready = |resp: StatusResponse| {
        resp.status
            .map(|s| s.conditions.into_iter().map(|c| (c.r#type, c.status)).collect::<Vec<_>>())
            .unwrap_or_default()
    };
    let before = fake.status(StatusRequest { verbose: false }).await.expect("status");
    assert_eq!(ready(before), vec![("RuntimeReady".to_string(), true), ("NetworkReady".to_string(), true)]);
    fake.set_network_ready(false);
    let after = fake.status(StatusRequest { verbose: false }).await.expect("status");
    assert_eq!(ready(after)[1], ("NetworkReady".to_string(), false));
}

#[tokio::test]
async fn stats_report_configured_usage_for_running_containers() {
    let (fake, sandbox) = with_sandbox().await;
    fake.set_container_usage("app", 5_000_000, 8 << 20);
    let id = create(&fake, &sandbox, "app").await.expect("create");
    start(&fake, &id).await.expect("start");
    let stats = fake.container_stats(ContainerStatsRequest { container_id: id }).await.expect("stats");
    let memory = stats.stats.and_then(|s| s.memory).and_then(|m| m.working_set_bytes).map(|v| v.value);
    assert_eq!(memory, Some(8 << 20));
    let pod = fake.pod_sandbox_stats(PodSandboxStatsRequest { pod_sandbox_id: sandbox }).await.expect("stats");
    let cpu = pod.stats.and_then(|s| s.linux).and_then(|l| l.cpu).and_then(|c| c.usage_core_nano_seconds);
    assert_eq!(cpu.map(|v| v.value), Some(5_000_000));
}

#[tokio::test]
async fn update_runtime_config_records_the_pod_cidr() {
    let fake = FakeRuntime::new();
    let config = RuntimeConfig { network_config: Some(NetworkConfig { pod_cidr: "10.42.0.0/24".to_string() }) };
    fake.update_runtime_config(UpdateRuntimeConfigRequest { runtime_config: Some(config) }).await.expect("update");
    assert_eq!(fake.pod_cidr(), "10.42.0.0/24");
}

#[tokio::test(start_paused = true)]
async fn pull_delay_holds_the_pull() {
    let fake = FakeRuntime::new();
    fake.set_pull_delay(Duration::from_secs(3));
    let started = tokio::time::Instant::now();
    let image = Some(ImageSpec { image: "busybox".to_string(), ..Default::default() });
    fake.pull_image(PullImageRequest { image, ..Default::default() }).await.expect("pull");
    assert!(started.elapsed() >= Duration::from_secs(3));
}

#[tokio::test]
async fn target_pid_namespace_needs_a_running_container_in_the_sandbox() {
    let (fake, sandbox) = with_sandbox().await;
    let target = create(&fake, &sandbox, "app").await.expect("create app");
    let debugger = |target_id: &str| {
        let mut config = container_config("debugger");
        config.linux = Some(LinuxContainerConfig {
            security_context: Some(LinuxContainerSecurityContext {
                namespace_options: Some(NamespaceOption {
                    pid: NamespaceMode::Target as i32,
                    target_id: target_id.to_string(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
        CreateContainerRequest {
            pod_sandbox_id: sandbox.clone(),
            config: Some(config),
            sandbox_config: Some(sandbox_config("web", 0)),
        }
    };
    let err = fake.create_container(debugger(&target)).await.expect_err("target not started");
    assert_eq!(err.code(), Code::Unknown, "{err}");
    let err = fake.create_container(debugger("nope")).await.expect_err("no such target");
    assert_eq!(err.code(), Code::NotFound, "{err}");
    start(&fake, &target).await.expect("start app");
    fake.create_container(debugger(&target)).await.expect("target running");
    let ns = fake
        .container_config("debugger")
        .and_then(|c| c.linux)
        .and_then(|l| l.security_context)
        .and_then(|s| s.namespace_options)
        .expect("namespace options kept");
    assert_eq!((ns.pid, ns.target_id.as_str()), (NamespaceMode::Target as i32, target.as_str()));
}
