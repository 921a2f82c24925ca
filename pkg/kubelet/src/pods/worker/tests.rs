//! The pod worker against the fake CRI, the fake pod API (which records every status patch) and
//! a scripted API server for what the kubelet's shared client still serves (the Service list and
//! watch, image events).

use super::*;
use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use k1s_cri::{ContainerBehavior, CriOp, FakeRuntime};
use serde_json::json;
use std::convert::Infallible;

const IMAGE: &str = "127.0.0.1:5000/busybox:1.36";

fn json_body(v: &Value) -> BoxBody<Bytes, Infallible> {
    Full::new(Bytes::from(v.to_string())).boxed()
}

/// A kube client whose requests are answered in-process.
fn scripted_api() -> kube::Client {
    let svc = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        async move {
            let (parts, body) = req.into_parts();
            let bytes = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
            let path = parts.uri.path().to_string();
            let watch = parts.uri.query().is_some_and(|q| q.contains("watch=true") || q.contains("watch=1"));
            let (code, body) = if watch {
                // A watch that never sends anything.
                let events = futures::stream::pending::<Result<hyper::body::Frame<Bytes>, Infallible>>();
                (200, StreamBody::new(events).boxed())
            } else if parts.method == http::Method::POST {
                let echoed: Value = serde_json::from_slice(&bytes).unwrap_or_default();
                (201, json_body(&echoed))
            } else if parts.method == http::Method::GET && path == "/api/v1/services" {
                let list = json!({"apiVersion": "v1", "kind": "ServiceList", "metadata": {"resourceVersion": "1"}, "items": []});
                (200, json_body(&list))
            } else {
                let status = json!({"apiVersion": "v1", "kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404, "message": "not found"});
                (404, json_body(&status))
            };
            let resp = http::Response::builder().status(code).header("content-type", "application/json").body(body);
            Ok::<_, Infallible>(resp.unwrap_or_else(|_| http::Response::new(Full::new(Bytes::new()).boxed())))
        }
    });
    kube::Client::new(svc, "default")
}

struct Harness {
    fake: Arc<FakeRuntime>,
    api: Arc<api::FakePodApi>,
    worker: Worker,
    _dir: tempfile::TempDir,
}

impl Harness {
    fn new() -> Harness {
        let dir = tempfile::tempdir().expect("tempdir");
        let fake = Arc::new(FakeRuntime::new());
        let client = scripted_api();
        let cancel = tokio_util::sync::CancellationToken::new();
        let config = crate::Config {
            node_name: "node-1".into(),
            node_ip: "192.0.2.2".parse().expect("ip"),
            pod_cidr: "10.42.0.0/16".into(),
            root_dir: dir.path().join("kubelet"),
            storage_dir: dir.path().join("storage"),
            pod_log_dir: dir.path().join("pods-logs"),
            log_rotation: Default::default(),
            cluster_dns: vec!["10.43.0.10".parse().expect("ip")],
            cluster_domain: "cluster.local".into(),
            max_pods: 110,
            parallel_starts: 4,
            kubelet_port: 0,
            cgroup_root: "/k1s-test".into(),
            registries: None,
            server_tls: crate::server::ServerTls {
                ca_pem: String::new(),
                cert_pem: String::new(),
                key_pem: String::new(),
                reloadable: None,
            },
        };
        let shared = Arc::new(Shared {
            recorder: Arc::new(k1s_runtime::events::Recorder::new(client.clone(), "kubelet", Some("node-1"))),
            services: super::super::env::services::ServiceCache::spawn(client.clone(), cancel.clone()),
            config,
            client,
            runtime: fake.clone(),
            images: fake.clone(),
            cancel,
            started_at: now_rfc3339(),
            runtime_version: "fake://0".into(),
            pulls: crate::images::PullCoordinator::default(),
            start_slots: tokio::sync::Semaphore::new(4),
            kubelet_port: std::sync::atomic::AtomicU16::new(0),
            runtime_state: std::sync::Mutex::new(crate::runtime_state::RuntimeState::default()),
            ready_transition: std::sync::Mutex::new((String::new(), String::new())),
        });
        let volumes = Arc::new(VolumeManager::new(dir.path().join("kubelet").join("pods")));
        let api = Arc::new(api::FakePodApi::new());
        let worker = Worker::new(shared, api.clone(), volumes, "uid-web".into());
        Harness { fake, api, worker, _dir: dir }
    }

    async fn sync(&mut self, pod: &Pod) {
        let update = Update { pod: Arc::new(pod.clone()), removed: false };
        self.worker.sync(&update).await;
    }

    fn creates_of(&self, name: &str) -> usize {
        self.fake.calls_of(CriOp::CreateContainer).iter().filter(|c| c.target == name).count()
    }
}

/// A running pod with one `sleep` container named `app`.
fn pod(restart_policy: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "uid-web"},
        "spec": {
            "restartPolicy": restart_policy,
            "containers": [{"name": "app", "image": IMAGE, "command": ["sleep", "3600"]}]
        },
        "status": {"phase": "Pending", "qosClass": "BestEffort"}
    }))
    .expect("pod")
}

/// `pod` after `kubectl debug --target=app` added the ephemeral container `debugger`.
fn debugged(pod: &Pod, target: Option<&str>) -> Pod {
    let mut p = pod.clone();
    let e: k8s_openapi::api::core::v1::EphemeralContainer = serde_json::from_value(json!({
        "name": "debugger", "image": IMAGE, "command": ["sh"], "stdin": true, "tty": true,
        "targetContainerName": target,
        "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"
    }))
    .expect("ephemeral container");
    p.spec.get_or_insert_with(Default::default).ephemeral_containers = Some(vec![e]);
    p
}

fn pid_namespace(fake: &FakeRuntime, name: &str) -> (i32, String) {
    let ns = fake
        .container_config(name)
        .and_then(|c| c.linux)
        .and_then(|l| l.security_context)
        .and_then(|s| s.namespace_options)
        .unwrap_or_default();
    (ns.pid, ns.target_id)
}

#[tokio::test]
async fn ephemeral_container_runs_in_the_target_pid_namespace_once_and_reports_its_status() {
    let mut h = Harness::new();
    let plain = pod("Always");
    h.sync(&plain).await;
    let app_id = h.fake.container_id("app").expect("app runs");

    // kubectl debug adds the container: it starts in the pod's sandbox, in app's PID namespace.
    let pod = debugged(&plain, Some("app"));
    h.sync(&pod).await;
    let debugger_id = h.fake.container_id("debugger").expect("debugger created");
    assert_eq!(pid_namespace(&h.fake, "debugger"), (cri::NamespaceMode::Target as i32, app_id.clone()));
    let config = h.fake.container_config("debugger").expect("config");
    assert!(config.stdin && config.tty, "stdin and tty reach the runtime for kubectl attach");
    // The new container is no spec change that restarts the pod: app keeps its one instance.
    assert_eq!(h.fake.container_id("app"), Some(app_id.clone()));
    assert_eq!(h.creates_of("app"), 1);
    assert_eq!(h.fake.count(CriOp::RunPodSandbox), 1);

    let status = h.api.last_status();
    let eph = &status["ephemeralContainerStatuses"][0];
    assert_eq!(eph["name"], "debugger");
    assert_eq!(eph["image"], IMAGE);
    assert_eq!(eph["containerID"], format!("containerd://{debugger_id}"));
    assert!(eph["state"]["running"]["startedAt"].is_string(), "{eph}");
    assert_eq!(eph["ready"], false);
    assert_eq!(eph["restartCount"], 0);
    assert!(eph.get("started").is_none(), "upstream reports no `started` for ephemeral containers: {eph}");
    assert!(eph["imageID"].as_str().is_some_and(|i| !i.is_empty()), "{eph}");
    assert_eq!(status["containerStatuses"][0]["restartCount"], 0);
    assert_eq!(status["phase"], "Running");

    // It exits: it is never restarted, even in a pod whose restart policy is Always.
    h.fake.exit_container(&debugger_id, 3).expect("exit");
    h.sync(&pod).await;
    h.sync(&pod).await;
    assert_eq!(h.creates_of("debugger"), 1);
    assert_eq!(h.fake.container_id("debugger"), Some(debugger_id.clone()));
    let status = h.api.last_status();
    let eph = &status["ephemeralContainerStatuses"][0];
    assert_eq!(eph["state"]["terminated"]["exitCode"], 3, "{eph}");
    assert_eq!(eph["state"]["terminated"]["reason"], "Error");
    assert_eq!(eph["state"]["terminated"]["containerID"], format!("containerd://{debugger_id}"));
    assert_eq!(eph["restartCount"], 0);
    // The pod itself goes on: still Running, ready as before, app untouched.
    assert_eq!(status["phase"], "Running");
    assert_eq!(status["containerStatuses"][0]["containerID"], format!("containerd://{app_id}"));
    assert_eq!(h.creates_of("app"), 1);
}

#[tokio::test]
async fn ephemeral_container_waits_for_a_running_target() {
    let mut h = Harness::new();
    h.fake.set_container_behavior("app", ContainerBehavior::exits_with(1));
    // app has exited for good; a second container keeps the pod Running.
    let mut plain = pod("Never");
    if let Some(s) = plain.spec.as_mut() {
        let mut side = s.containers[0].clone();
        side.name = "side".into();
        s.containers.push(side);
    }
    h.sync(&plain).await;
    h.sync(&plain).await;
    let pod = debugged(&plain, Some("app"));
    h.sync(&pod).await;
    assert_eq!(h.creates_of("debugger"), 0, "no namespace to join while app is not running");
    let status = h.api.last_status();
    let waiting = &status["ephemeralContainerStatuses"][0]["state"]["waiting"];
    assert_eq!(waiting["reason"], "CreateContainerConfigError", "{status}");
    assert_eq!(waiting["message"], "unable to find target container app");
}

#[tokio::test]
async fn ephemeral_container_without_target_keeps_the_pods_namespaces() {
    let mut h = Harness::new();
    let plain = pod("Always");
    h.sync(&plain).await;
    let pod = debugged(&plain, None);
    h.sync(&pod).await;
    assert!(h.fake.container_id("debugger").is_some());
    assert_eq!(pid_namespace(&h.fake, "debugger"), (cri::NamespaceMode::Container as i32, String::new()));
}
