//! The pod worker end to end on the fake CRI runtime and the fake pod API: it starts a pod
//! (sandbox, containers, status Running and Ready), restarts exited containers with a growing
//! back-off (CrashLoopBackOff), restarts a container whose liveness probe fails, terminates a
//! deleted pod within its grace period (preStop first), and adopts the sandbox and containers a
//! previous kubelet left running instead of recreating them.
//!
//! Time is paused: back-offs and probe periods pass in virtual time, and every wait polls for
//! the expected state with a deadline instead of sleeping for a guessed time.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use k1s_cri::{ContainerBehavior, CriOp, ExecScript, FakeRuntime};
use k1s_kubelet::pods::env::services::ServiceCache;
use k1s_kubelet::pods::volumes::VolumeManager;
use k1s_kubelet::pods::worker::{self, api::FakePodApi};
use k1s_kubelet::pods::Update;
use k1s_kubelet::{Config, Shared};
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::runtime::{reflector, watcher};
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

const IMAGE: &str = "127.0.0.1:5000/busybox:1.36";
const UID: &str = "uid-web";

/// A kube client that answers every request with 404: everything the worker needs from the API
/// goes through the fake pod API; only image-pull events reach this client.
fn absent_api() -> kube::Client {
    let svc = tower::service_fn(|_req: http::Request<kube::client::Body>| async {
        let status =
            json!({"apiVersion": "v1", "kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404});
        let resp = http::Response::builder()
            .status(404)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(status.to_string())));
        Ok::<_, std::convert::Infallible>(resp.unwrap_or_else(|_| http::Response::new(Full::new(Bytes::new()))))
    });
    kube::Client::new(svc, "default")
}

/// A node: the fake runtime and the kubelet's directories, which outlive kubelet restarts.
struct Node {
    fake: Arc<FakeRuntime>,
    dir: tempfile::TempDir,
}

/// One kubelet's worker for the pod `web`.
struct Kubelet {
    api: Arc<FakePodApi>,
    tx: watch::Sender<Update>,
    task: JoinHandle<()>,
    _services: reflector::store::Writer<Service>,
}

impl Node {
    fn new() -> Node {
        Node { fake: Arc::new(FakeRuntime::new()), dir: tempfile::tempdir().expect("tempdir") }
    }

    /// Starts a kubelet (its shared state, an empty but listed Service cache) and a worker for
    /// `pod`.
    fn start_worker(&self, pod: &Pod) -> Kubelet {
        let client = absent_api();
        let (store, mut writer) = reflector::store::<Service>();
        writer.apply_watcher_event(&watcher::Event::Init);
        writer.apply_watcher_event(&watcher::Event::InitDone);
        let root = self.dir.path().join("kubelet");
        let config = Config {
            node_name: "node-1".into(),
            node_ip: "192.0.2.2".parse().expect("ip"),
            pod_cidr: "10.42.0.0/16".into(),
            root_dir: root.clone(),
            storage_dir: self.dir.path().join("storage"),
            pod_log_dir: self.dir.path().join("pod-logs"),
            log_rotation: Default::default(),
            cluster_dns: vec!["10.43.0.10".parse().expect("ip")],
            cluster_domain: "cluster.local".into(),
            max_pods: 110,
            parallel_starts: 4,
            kubelet_port: 0,
            cgroup_root: "/k1s-test".into(),
            registries: None,
            server_tls: k1s_kubelet::server::ServerTls {
                ca_pem: String::new(),
                cert_pem: String::new(),
                key_pem: String::new(),
                reloadable: None,
            },
        };
        let shared = Arc::new(Shared {
            recorder: Arc::new(k1s_runtime::events::Recorder::new(client.clone(), "kubelet", Some("node-1"))),
            services: ServiceCache::from_store(store),
            config,
            client,
            runtime: self.fake.clone(),
            images: self.fake.clone(),
            cancel: tokio_util::sync::CancellationToken::new(),
            started_at: "2026-01-01T00:00:00Z".into(),
            runtime_version: "fake://0".into(),
            pulls: k1s_kubelet::images::PullCoordinator::default(),
            start_slots: tokio::sync::Semaphore::new(4),
            kubelet_port: std::sync::atomic::AtomicU16::new(0),
            runtime_state: std::sync::Mutex::new(k1s_kubelet::runtime_state::RuntimeState::default()),
            ready_transition: std::sync::Mutex::new((String::new(), String::new())),
        });
        let api = Arc::new(FakePodApi::new());
        let volumes = Arc::new(VolumeManager::new(root.join("pods")));
        let (tx, rx) = watch::channel(Update { pod: Arc::new(pod.clone()), removed: false });
        let task = tokio::spawn(worker::run(shared, api.clone(), volumes, UID.into(), rx));
        Kubelet { api, tx, task, _services: writer }
    }

    fn creates_of(&self, name: &str) -> usize {
        self.fake.calls_of(CriOp::CreateContainer).iter().filter(|c| c.target == name).count()
    }

    /// The position of the first call of `op` on `target` in the call log.
    fn call_index(&self, op: CriOp, target: &str) -> Option<usize> {
        self.fake.calls().iter().position(|c| c.op == op && c.target == target)
    }
}

impl Kubelet {
    fn send(&self, pod: &Pod, removed: bool) {
        self.tx.send_replace(Update { pod: Arc::new(pod.clone()), removed });
    }

    /// The kubelet stops: the worker's update channel closes, its containers keep running.
    async fn stop(self) {
        drop(self.tx);
        within("the worker to stop", self.task).await.expect("worker task");
    }
}

/// Polls `f` every 50 ms (virtual) until it gives a value, for at most ten virtual minutes.
async fn eventually<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn within<F: std::future::IntoFuture>(what: &str, f: F) -> F::Output {
    match tokio::time::timeout(Duration::from_secs(600), f).await {
        Ok(v) => v,
        Err(_) => panic!("timed out waiting for {what}"),
    }
}

/// The pod `web` with one container `app`; `extra` is merged into the container and `spec`
/// into the pod spec.
fn pod(container: Value, spec: Value) -> Pod {
    let mut c = json!({"name": "app", "image": IMAGE, "command": ["sleep", "3600"]});
    merge(&mut c, container);
    let mut s = json!({"restartPolicy": "Always", "containers": [c]});
    merge(&mut s, spec);
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default", "uid": UID},
        "spec": s,
        "status": {"phase": "Pending", "qosClass": "BestEffort"}
    }))
    .expect("pod")
}

fn merge(into: &mut Value, from: Value) {
    if let (Some(into), Value::Object(from)) = (into.as_object_mut(), from) {
        into.extend(from);
    }
}

fn condition(status: &Value, kind: &str) -> Option<String> {
    status["conditions"].as_array()?.iter().find(|c| c["type"] == kind)?["status"].as_str().map(str::to_string)
}

fn app_status(api: &FakePodApi) -> Value {
    api.last_status()["containerStatuses"][0].clone()
}

/// Waits until the pod is reported Running and Ready with `app` running; returns app's
/// container id.
async fn running_and_ready(node: &Node, api: &FakePodApi) -> String {
    eventually("the pod to be Running and Ready", || {
        let status = api.last_status();
        let app = &status["containerStatuses"][0];
        let ready = status["phase"] == "Running"
            && condition(&status, "Ready").as_deref() == Some("True")
            && condition(&status, "ContainersReady").as_deref() == Some("True")
            && app["ready"] == true
            && app["state"]["running"].is_object();
        let id = node.fake.container_id("app")?;
        (ready && app["containerID"] == format!("containerd://{id}")).then_some(id)
    })
    .await
}

#[tokio::test(start_paused = true)]
async fn worker_starts_the_sandbox_and_containers_and_reports_running_and_ready() {
    let node = Node::new();
    let pod = pod(json!({}), json!({}));
    let kubelet = node.start_worker(&pod);
    let id = running_and_ready(&node, &kubelet.api).await;

    assert_eq!(node.fake.count(CriOp::RunPodSandbox), 1);
    assert_eq!(node.creates_of("app"), 1);
    assert_eq!(node.fake.calls_of(CriOp::StartContainer).iter().filter(|c| c.target == id).count(), 1);
    let status = kubelet.api.last_status();
    assert!(status["podIP"].as_str().is_some_and(|ip| !ip.is_empty()), "{status}");
    assert_eq!(status["hostIP"], "192.0.2.2");
    let app = app_status(&kubelet.api);
    assert_eq!(app["restartCount"], 0);
    assert_eq!(app["started"], true);
    let patch = kubelet.api.statuses().pop().expect("a status patch");
    assert_eq!(patch["metadata"]["uid"], UID, "status patches carry the uid precondition");
    let created = kubelet.api.events_with_reason("Created");
    assert_eq!(created.len(), 1, "{created:?}");
    assert_eq!(created[0].field_path, "spec.containers{app}");
    assert_eq!(kubelet.api.events_with_reason("Started").len(), 1);
}

#[tokio::test(start_paused = true)]
async fn exited_container_is_restarted_with_growing_back_off_in_crash_loop() {
    let node = Node::new();
    node.fake.set_container_behavior("app", ContainerBehavior::exits_with(1));
    let pod = pod(json!({}), json!({}));
    let kubelet = node.start_worker(&pod);

    // The first restart is immediate; later ones wait 10 s, then 20 s.
    let mut created_at = Vec::new();
    for n in 1..=4 {
        eventually(&format!("create #{n}"), || (node.creates_of("app") >= n).then_some(())).await;
        created_at.push(Instant::now());
        if n == 3 {
            let waiting = eventually("CrashLoopBackOff after the third exit", || {
                let w = app_status(&kubelet.api)["state"]["waiting"].clone();
                (w["message"].as_str().is_some_and(|m| m.starts_with("back-off 20s"))).then_some(w)
            })
            .await;
            assert_eq!(waiting["reason"], "CrashLoopBackOff");
            assert_eq!(waiting["message"], "back-off 20s restarting failed container=app pod=web_default(uid-web)");
        }
    }
    let gap = |i: usize| created_at[i + 1].duration_since(created_at[i]);
    assert!(gap(0) < Duration::from_secs(2), "first restart right away: {:?}", gap(0));
    assert!(gap(1) >= Duration::from_millis(9900) && gap(1) < Duration::from_secs(12), "{:?}", gap(1));
    assert!(gap(2) >= Duration::from_millis(19900) && gap(2) < Duration::from_secs(22), "{:?}", gap(2));

    let app = eventually("the restart count of the fourth instance", || {
        let app = app_status(&kubelet.api);
        (app["restartCount"] == 3 && app["lastState"]["terminated"].is_object()).then_some(app)
    })
    .await;
    assert_eq!(app["lastState"]["terminated"]["exitCode"], 1, "{app}");
    let status = kubelet.api.last_status();
    assert_eq!(status["phase"], "Running", "a crash-looping pod with restartPolicy Always stays Running");
    assert_eq!(condition(&status, "Ready").as_deref(), Some("False"));
    let backoffs = kubelet.api.events_with_reason("BackOff");
    assert!(!backoffs.is_empty() && backoffs.iter().all(|e| e.message == "Back-off restarting failed container"));
}

#[tokio::test(start_paused = true)]
async fn container_that_exits_is_not_restarted_with_restart_policy_never() {
    let node = Node::new();
    node.fake.set_container_behavior("app", ContainerBehavior::exits_with(0));
    let pod = pod(json!({}), json!({"restartPolicy": "Never"}));
    let kubelet = node.start_worker(&pod);
    eventually("the pod to succeed", || (kubelet.api.last_status()["phase"] == "Succeeded").then_some(())).await;
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(node.creates_of("app"), 1);
    let sandbox = node.fake.calls_of(CriOp::RunPodSandbox).len();
    assert_eq!(sandbox, 1);
    assert!(node.fake.count(CriOp::StopPodSandbox) >= 1, "a finished pod gives its sandbox back");
}

#[tokio::test(start_paused = true)]
async fn image_that_cannot_be_pulled_waits_in_err_image_pull_then_image_pull_back_off() {
    let node = Node::new();
    let image = "127.0.0.1:5000/does-not-exist:1";
    let pod = pod(json!({"image": image}), json!({}));
    let kubelet = node.start_worker(&pod);
    let waiting = |reason: &'static str| {
        let api = kubelet.api.clone();
        move || {
            let w = app_status(&api)["state"]["waiting"].clone();
            (w["reason"] == reason).then_some(w)
        }
    };
    let err = eventually("ErrImagePull", waiting("ErrImagePull")).await;
    assert!(err["message"].as_str().is_some_and(|m| !m.is_empty()), "{err}");
    let back_off = eventually("ImagePullBackOff", waiting("ImagePullBackOff")).await;
    assert_eq!(back_off["message"], format!("Back-off pulling image \"{image}\""));
    assert_eq!(node.creates_of("app"), 0);
    assert_eq!(kubelet.api.last_status()["phase"], "Pending");
}

#[tokio::test(start_paused = true)]
async fn failing_liveness_probe_restarts_the_container_with_the_probes_grace_period() {
    let node = Node::new();
    let probe = ["cat", "/tmp/healthy"];
    // Three failures (the threshold), then the builtin answer: healthy.
    node.fake.script_exec(ExecScript::exits(1, "").in_container("app").for_command(probe).times(3));
    let pod = pod(
        json!({"livenessProbe": {
            "exec": {"command": probe}, "periodSeconds": 1, "failureThreshold": 3,
            "terminationGracePeriodSeconds": 5
        }}),
        json!({}),
    );
    let kubelet = node.start_worker(&pod);
    let first = eventually("app to run", || node.fake.container_id("app")).await;

    eventually("app to be recreated", || (node.creates_of("app") == 2).then_some(())).await;
    let second = node.fake.container_id("app").expect("second instance");
    assert_ne!(second, first);
    assert!(node.fake.stop_timeouts().contains(&(first.clone(), 5)), "{:?}", node.fake.stop_timeouts());
    let killing = kubelet.api.events_with_reason("Killing");
    assert_eq!(killing.len(), 1, "{killing:?}");
    assert_eq!(killing[0].message, "Container app failed liveness probe, will be restarted");
    assert!(!kubelet.api.events_with_reason("Unhealthy").is_empty());

    let app = eventually("the restarted instance in the status", || {
        let app = app_status(&kubelet.api);
        (app["restartCount"] == 1 && app["state"]["running"].is_object() && app["ready"] == true).then_some(app)
    })
    .await;
    assert_eq!(app["containerID"], format!("containerd://{second}"));
    assert_eq!(app["lastState"]["terminated"]["exitCode"], 143, "{app}");
    // The new instance is healthy: it keeps running.
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(node.creates_of("app"), 2);
}

#[tokio::test(start_paused = true)]
async fn deleted_pod_runs_pre_stop_then_stops_with_its_grace_period_and_is_removed() {
    let node = Node::new();
    let pre_stop = ["sh", "-c", "nginx -s quit"];
    let pod = pod(
        json!({"lifecycle": {"preStop": {"exec": {"command": pre_stop}}}}),
        json!({"terminationGracePeriodSeconds": 45}),
    );
    let kubelet = node.start_worker(&pod);
    let id = running_and_ready(&node, &kubelet.api).await;
    let sandbox = node.fake.calls_of(CriOp::RunPodSandbox).len();
    assert_eq!(sandbox, 1);
    let logs = node.dir.path().join("pod-logs").join(format!("default_web_{UID}"));
    assert!(logs.is_dir(), "the pod's log folder {} exists while it runs", logs.display());

    let mut deleted = pod.clone();
    deleted.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()));
    deleted.metadata.deletion_grace_period_seconds = Some(45);
    kubelet.send(&deleted, false);

    let delete = eventually("the final delete", || kubelet.api.deletes().pop()).await;
    assert_eq!((delete.namespace.as_str(), delete.name.as_str(), delete.uid.as_str()), ("default", "web", UID));
    let pre_stop: Vec<String> = pre_stop.iter().map(|s| s.to_string()).collect();
    assert!(node.fake.exec_commands().contains(&(id.clone(), pre_stop)), "{:?}", node.fake.exec_commands());
    assert_eq!(node.fake.stop_timeouts(), vec![(id.clone(), 45)]);
    let exec_at = node.call_index(CriOp::ExecSync, &id).expect("preStop ran");
    let stop_at = node.call_index(CriOp::StopContainer, &id).expect("app stopped");
    assert!(exec_at < stop_at, "preStop runs before the container is stopped");
    assert_eq!(node.fake.count(CriOp::StopPodSandbox), 1);
    assert_eq!(node.fake.count(CriOp::RemovePodSandbox), 1);
    let killing = kubelet.api.events_with_reason("Killing");
    assert_eq!(killing.iter().map(|e| e.message.as_str()).collect::<Vec<_>>(), ["Stopping container app"]);
    let app = app_status(&kubelet.api);
    assert_eq!(app["state"]["terminated"]["exitCode"], 143, "the final status shows how app ended: {app}");
    assert_eq!(app["ready"], false);

    // The API confirms the removal: the worker ends, and the pod's log folder goes with it.
    kubelet.send(&deleted, true);
    within("the worker to finish", kubelet.task).await.expect("worker task");
    assert!(!logs.exists(), "the log folder {} of a deleted pod is removed", logs.display());
}

#[tokio::test(start_paused = true)]
async fn restarted_kubelet_adopts_the_running_sandbox_and_containers() {
    let node = Node::new();
    let pod = pod(json!({}), json!({}));
    let first = node.start_worker(&pod);
    let id = running_and_ready(&node, &first.api).await;
    first.stop().await;
    assert_eq!(node.fake.count(CriOp::StopContainer), 0, "a stopping kubelet leaves containers running");

    let second = node.start_worker(&pod);
    let adopted = running_and_ready(&node, &second.api).await;
    assert_eq!(adopted, id);
    assert_eq!(node.fake.count(CriOp::RunPodSandbox), 1, "the sandbox is adopted, not recreated");
    assert_eq!(node.creates_of("app"), 1, "the container is adopted, not recreated");
    assert_eq!(node.fake.count(CriOp::StopContainer), 0);
    assert_eq!(node.fake.count(CriOp::RemovePodSandbox), 0);
    assert_eq!(app_status(&second.api)["restartCount"], 0);
    assert!(second.api.events_with_reason("Created").is_empty());
}
