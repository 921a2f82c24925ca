//! The core controllers (namespace, service account and root CA, garbage collector, endpoint
//! slices and endpoints, node lifecycle, disruption) in-process against a real
//! `k1s server --disable-agent` whose own copies of them are disabled, driven with stock kubectl
//! where a user would use it. No kubelet runs: the test plays its part through `pods/status`,
//! node status and leases.
//!
//! Needs the `k1s` binary: `$K1S_BIN`, or `$CARGO_TARGET_DIR/debug/k1s` (build it with
//! `cargo build -p k1s`).

use futures::StreamExt;
use k1s_controllers::{
    disruption, endpointslice, garbage_collector, namespace, node_lifecycle, service_account, Context,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Endpoints, Namespace, Node, Pod, ServiceAccount};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::ResourceExt;
use serde_json::{json, Value};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The server's own controller manager is off: only the controllers under test act.
const DISABLED: &str = "controllers";

fn k1s_binary() -> PathBuf {
    if let Ok(p) = std::env::var("K1S_BIN") {
        return p.into();
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = std::env::var("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|_| workspace.join("target"));
    let bin = target.join("debug").join("k1s");
    assert!(bin.exists(), "k1s binary not found at {}: run `cargo build -p k1s` first (or set K1S_BIN)", bin.display());
    bin
}

struct Server {
    dir: tempfile::TempDir,
    child: Child,
}

impl Server {
    fn start() -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("config.yaml"), "").expect("config");
        std::fs::create_dir_all(dir.path().join("home")).expect("home");
        let log = std::fs::File::create(dir.path().join("server.log")).expect("log");
        let child = Command::new(k1s_binary())
            .arg("server")
            .arg("--disable-agent")
            .arg("--https-listen-port=0")
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--disable={DISABLED}"))
            .arg(format!("--config={}", dir.path().join("config.yaml").display()))
            .arg(format!("--data-dir={}", dir.path().join("data").display()))
            .arg(format!("--write-kubeconfig={}", dir.path().join("kubeconfig.yaml").display()))
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn k1s");
        Server { dir, child }
    }

    fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig.yaml")
    }

    fn logs(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    async fn client(&mut self) -> kube::Client {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if self.kubeconfig().exists() {
                if let Ok(client) =
                    k1s_runtime::connect(&self.kubeconfig(), &k1s_runtime::user_agent("kube-controller-manager")).await
                {
                    let req = http::Request::get("/readyz").body(Vec::new()).expect("request");
                    if client.request_text(req).await.is_ok() {
                        return client;
                    }
                }
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("k1s exited early: {status}\n{}", self.logs());
            }
            assert!(Instant::now() < deadline, "k1s did not become ready:\n{}", self.logs());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn root_ca(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("data/server/tls/server-ca.crt")).expect("server CA")
    }

    /// Runs stock kubectl; returns (success, stdout, stderr).
    async fn kubectl(&self, args: &[&str]) -> (bool, String, String) {
        let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "/usr/bin/kubectl".into());
        let out = tokio::process::Command::new(kubectl)
            .args(args)
            .env("KUBECONFIG", self.kubeconfig())
            .env("HOME", self.dir.path().join("home"))
            .output()
            .await
            .expect("run kubectl");
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
    }

    async fn ok(&self, args: &[&str]) -> String {
        let (ok, stdout, stderr) = self.kubectl(args).await;
        assert!(ok, "kubectl {args:?} failed:\n{stdout}\n{stderr}\nserver log:\n{}", self.logs());
        stdout
    }

    async fn apply(&self, manifest: &Value) {
        let path = self.dir.path().join(format!("m-{}.json", uuid_like()));
        std::fs::write(&path, manifest.to_string()).expect("manifest");
        self.ok(&["apply", "-f", &path.display().to_string()]).await;
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn uuid_like() -> String {
    format!("{:x}", jiff::Timestamp::now().as_nanosecond())
}

/// The controllers under test, running until dropped.
struct Controllers {
    cancel: CancellationToken,
    tasks: Vec<(&'static str, JoinHandle<()>)>,
}

impl Controllers {
    fn start(client: &kube::Client, root_ca_pem: String, node_config: node_lifecycle::Config) -> Controllers {
        let cancel = CancellationToken::new();
        let ctx = Arc::new(Context {
            client: client.clone(),
            recorder: k1s_runtime::events::Recorder::new(client.clone(), "core-test", None),
            cancel: cancel.clone(),
            root_ca_pem,
            cluster_signing: None,
        });
        let tasks = vec![
            ("namespace", tokio::spawn(namespace::run(ctx.clone()))),
            ("serviceaccount", tokio::spawn(service_account::run(ctx.clone()))),
            ("garbagecollector", tokio::spawn(garbage_collector::run(ctx.clone()))),
            ("endpointslice", tokio::spawn(endpointslice::run(ctx.clone()))),
            ("nodelifecycle", tokio::spawn(node_lifecycle::run_with(ctx.clone(), node_config))),
            ("disruption", tokio::spawn(disruption::run(ctx))),
        ];
        Controllers { cancel, tasks }
    }

    /// Cancels and checks that every controller returns promptly.
    async fn stop(self) {
        self.cancel.cancel();
        for (name, t) in self.tasks {
            let res = tokio::time::timeout(Duration::from_secs(10), t).await;
            let res = res.unwrap_or_else(|_| panic!("the {name} controller did not return after cancellation"));
            res.unwrap_or_else(|e| panic!("the {name} controller panicked: {e}"));
        }
    }
}

async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Controller logs on stderr when `K1S_TEST_LOG` is set (e.g. `k1s_controllers=debug`).
fn init_logs() {
    if let Ok(filter) = std::env::var("K1S_TEST_LOG") {
        let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
    }
}

async fn setup() -> (Server, kube::Client, Controllers) {
    init_logs();
    let mut server = Server::start();
    let client = server.client().await;
    let controllers = Controllers::start(&client, server.root_ca(), node_lifecycle::Config::default());
    (server, client, controllers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn namespaces_get_defaults_and_are_emptied_on_deletion() {
    let (server, client, controllers) = setup().await;
    let ca = server.root_ca();
    server.ok(&["create", "namespace", "team"]).await;
    for ns in ["default", "kube-system", "team"] {
        let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
        eventually(Duration::from_secs(10), "the default ServiceAccount", || {
            let sas = sas.clone();
            async move { sas.get_opt("default").await.ok().flatten() }
        })
        .await;
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        let cm = eventually(Duration::from_secs(10), "kube-root-ca.crt", || {
            let cms = cms.clone();
            async move { cms.get_opt("kube-root-ca.crt").await.ok().flatten() }
        })
        .await;
        assert_eq!(cm.data.as_ref().and_then(|d| d.get("ca.crt")), Some(&ca));
    }

    // Deleted or edited, they come back.
    server.ok(&["-n", "team", "delete", "serviceaccount", "default"]).await;
    server
        .ok(&[
            "-n",
            "team",
            "patch",
            "configmap",
            "kube-root-ca.crt",
            "--type=merge",
            "-p",
            r#"{"data":{"ca.crt":"tampered"}}"#,
        ])
        .await;
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), "team");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "team");
    eventually(Duration::from_secs(10), "the default ServiceAccount re-created", || {
        let sas = sas.clone();
        async move { sas.get_opt("default").await.ok().flatten() }
    })
    .await;
    eventually(Duration::from_secs(10), "the root CA restored", || {
        let cms = cms.clone();
        let ca = ca.clone();
        async move {
            let cm = cms.get_opt("kube-root-ca.crt").await.ok().flatten()?;
            (cm.data.as_ref().and_then(|d| d.get("ca.crt")) == Some(&ca)).then_some(())
        }
    })
    .await;

    // A namespace with a ConfigMap and a Deployment is emptied, then goes.
    server.ok(&["-n", "team", "create", "configmap", "settings", "--from-literal=a=b"]).await;
    server.ok(&["-n", "team", "create", "deployment", "web", "--image=registry.example/web:1"]).await;
    let started = Instant::now();
    server.ok(&["delete", "namespace", "team", "--timeout=60s"]).await;
    println!("namespace with content deleted in {:?}", started.elapsed());
    let (ok, _, stderr) = server.kubectl(&["get", "namespace", "team"]).await;
    assert!(!ok && stderr.contains("NotFound"), "{stderr}");
    let leftovers: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "team",
        &kube::discovery::ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&()),
    );
    assert!(leftovers.list(&ListParams::default()).await.expect("list").items.is_empty());

    // Content held by a finalizer keeps the namespace Terminating; nothing new gets in.
    server.ok(&["create", "namespace", "held"]).await;
    server
        .apply(&json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "keep", "namespace": "held", "finalizers": ["example.com/hold"]}}))
        .await;
    server.ok(&["delete", "namespace", "held", "--wait=false"]).await;
    let nss: Api<Namespace> = Api::all(client.clone());
    let ns = eventually(Duration::from_secs(20), "the finalizers-remaining condition", || {
        let nss = nss.clone();
        async move {
            let ns = nss.get("held").await.ok()?;
            let c =
                ns.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "NamespaceFinalizersRemaining")?;
            (c.status == "True").then_some(ns)
        }
    })
    .await;
    let conditions = ns.status.and_then(|s| s.conditions).unwrap_or_default();
    let remaining = conditions.iter().find(|c| c.type_ == "NamespaceContentRemaining").expect("content condition");
    assert_eq!(
        remaining.message.as_deref(),
        Some("Some resources are remaining: configmaps. has 1 resource instances")
    );
    let (ok, _, stderr) = server.kubectl(&["-n", "held", "create", "configmap", "late"]).await;
    assert!(!ok && stderr.contains("because it is being terminated"), "{stderr}");
    server
        .ok(&["-n", "held", "patch", "configmap", "keep", "--type=merge", "-p", r#"{"metadata":{"finalizers":null}}"#])
        .await;
    eventually(Duration::from_secs(30), "the held namespace to go", || {
        let nss = nss.clone();
        async move { nss.get_opt("held").await.ok().flatten().is_none().then_some(()) }
    })
    .await;
    controllers.stop().await;
}

fn owner_ref(kind: &str, api_version: &str, name: &str, uid: &str, block: bool) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": true, "blockOwnerDeletion": block})
}

async fn exists<K>(api: &Api<K>, name: &str) -> bool
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.get_opt(name).await.ok().flatten().is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn garbage_collection_follows_the_propagation_policy() {
    let (server, client, controllers) = setup().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(client.clone(), "default");
    let replicasets: Api<k8s_openapi::api::apps::v1::ReplicaSet> = Api::namespaced(client.clone(), "default");

    async fn owner(server: &Server, deployments: &Api<k8s_openapi::api::apps::v1::Deployment>, name: &str) -> String {
        server.ok(&["create", "deployment", name, "--image=registry.example/web:1"]).await;
        deployments.get(name).await.expect("deployment").uid().expect("uid")
    }
    async fn dependents(server: &Server, owner: &str, uid: &str, finalizer: Option<&str>) {
        let mut meta = json!({"name": format!("{owner}-cm"), "namespace": "default",
            "ownerReferences": [owner_ref("Deployment", "apps/v1", owner, uid, true)]});
        if let Some(f) = finalizer {
            meta["finalizers"] = json!([f]);
        }
        server.apply(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta})).await;
        server
            .apply(&json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": format!("{owner}-rs"), "namespace": "default",
                    "ownerReferences": [owner_ref("Deployment", "apps/v1", owner, uid, true)]},
                "spec": {"replicas": 0, "selector": {"matchLabels": {"app": owner}},
                    "template": {"metadata": {"labels": {"app": owner}},
                        "spec": {"containers": [{"name": "c", "image": "registry.example/web:1"}]}}}}))
            .await;
    }

    // Background: the owner goes at once, its dependents after.
    let uid = owner(&server, &deployments, "bg").await;
    dependents(&server, "bg", &uid, None).await;
    server.ok(&["delete", "deployment", "bg"]).await;
    eventually(Duration::from_secs(20), "background dependents collected", || {
        let (cms, rss) = (cms.clone(), replicasets.clone());
        async move { (!exists(&cms, "bg-cm").await && !exists(&rss, "bg-rs").await).then_some(()) }
    })
    .await;

    // A dependent whose owner never existed is collected too.
    server
        .apply(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "stray", "namespace": "default",
            "ownerReferences": [owner_ref("Deployment", "apps/v1", "ghost", "00000000-0000-0000-0000-000000000000", false)]}}))
        .await;
    eventually(Duration::from_secs(20), "a dependent of a missing owner collected", || {
        let cms = cms.clone();
        async move { (!exists(&cms, "stray").await).then_some(()) }
    })
    .await;

    // Foreground: the owner waits, deleting, until its blocking dependents are gone.
    let uid = owner(&server, &deployments, "fg").await;
    dependents(&server, "fg", &uid, Some("example.com/hold")).await;
    server.ok(&["delete", "deployment", "fg", "--cascade=foreground", "--wait=false"]).await;
    eventually(Duration::from_secs(20), "the replica set deleted first", || {
        let rss = replicasets.clone();
        async move { (!exists(&rss, "fg-rs").await).then_some(()) }
    })
    .await;
    let waiting = deployments.get("fg").await.expect("owner still there");
    assert!(waiting.metadata.deletion_timestamp.is_some());
    assert!(waiting.finalizers().iter().any(|f| f == "foregroundDeletion"));
    let held = cms.get("fg-cm").await.expect("held dependent");
    assert!(held.metadata.deletion_timestamp.is_some(), "the dependent is being deleted");
    server.ok(&["patch", "configmap", "fg-cm", "--type=merge", "-p", r#"{"metadata":{"finalizers":null}}"#]).await;
    eventually(Duration::from_secs(20), "the foreground owner to go after its dependents", || {
        let (cms, deps) = (cms.clone(), deployments.clone());
        async move { (!exists(&cms, "fg-cm").await && !exists(&deps, "fg").await).then_some(()) }
    })
    .await;

    // Orphan: the dependents stay, without the reference.
    let uid = owner(&server, &deployments, "or").await;
    dependents(&server, "or", &uid, None).await;
    server.ok(&["delete", "deployment", "or", "--cascade=orphan"]).await;
    eventually(Duration::from_secs(20), "the orphaning owner to go", || {
        let deps = deployments.clone();
        async move { (!exists(&deps, "or").await).then_some(()) }
    })
    .await;
    let cm = cms.get("or-cm").await.expect("orphan kept");
    assert!(cm.owner_references().is_empty(), "{:?}", cm.owner_references());
    let rs = replicasets.get("or-rs").await.expect("orphan kept");
    assert!(rs.owner_references().is_empty(), "{:?}", rs.owner_references());
    // Orphans stay orphans.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(exists(&cms, "or-cm").await && exists(&replicasets, "or-rs").await);
    controllers.stop().await;
}

fn pod_manifest(name: &str, port: i32) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
        "spec": {"nodeName": "node1", "containers": [{"name": "web", "image": "registry.example/web:1",
            "ports": [{"name": "http", "containerPort": port}]}]}})
}

async fn set_pod_status(pods: &Api<Pod>, name: &str, ip: &str, ready: bool) {
    let status = json!({"status": {
        "phase": "Running",
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" },
            "lastTransitionTime": jiff::Timestamp::now().to_string()}],
    }});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await.expect("pod status");
}

/// (address ▶ ready) over the service's slices, and the set of ports seen.
async fn slice_view(slices: &Api<EndpointSlice>) -> (std::collections::BTreeMap<String, bool>, Vec<i32>) {
    let list = slices.list(&ListParams::default().labels("kubernetes.io/service-name=web")).await.expect("slices");
    let mut ready = std::collections::BTreeMap::new();
    let mut ports = Vec::new();
    for s in list.items {
        for e in &s.endpoints {
            let r = e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(false);
            for a in &e.addresses {
                ready.insert(a.clone(), r);
            }
        }
        ports.extend(s.ports.iter().flatten().filter_map(|p| p.port));
    }
    ports.sort();
    (ready, ports)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn endpoint_slices_and_endpoints_follow_pod_readiness() {
    let (server, client, controllers) = setup().await;
    server.apply(&json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node1"}})).await;
    server
        .apply(&json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}}))
        .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), "default");
    for (name, port) in [("a", 8080), ("b", 8080), ("c", 9090)] {
        server.apply(&pod_manifest(name, port)).await;
    }
    set_pod_status(&pods, "a", "10.42.0.11", true).await;
    set_pod_status(&pods, "b", "10.42.0.12", false).await;
    set_pod_status(&pods, "c", "10.42.0.13", true).await;

    let expected = std::collections::BTreeMap::from([
        ("10.42.0.11".to_string(), true),
        ("10.42.0.12".to_string(), false),
        ("10.42.0.13".to_string(), true),
    ]);
    let ports = eventually(Duration::from_secs(10), "slices listing the pods", || {
        let slices = slices.clone();
        let expected = expected.clone();
        async move {
            let (ready, ports) = slice_view(&slices).await;
            (ready == expected).then_some(ports)
        }
    })
    .await;
    assert_eq!(ports, vec![8080, 9090], "named port resolved per pod, one slice per port");
    let list = slices.list(&ListParams::default().labels("kubernetes.io/service-name=web")).await.expect("slices");
    for s in &list.items {
        assert_eq!(s.address_type, "IPv4");
        assert_eq!(
            s.labels().get("endpointslice.kubernetes.io/managed-by").map(String::as_str),
            Some("endpointslice-controller.k8s.io")
        );
        let owner = &s.owner_references()[0];
        assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("Service", "web"));
        let e = &s.endpoints[0];
        assert_eq!(e.node_name.as_deref(), Some("node1"));
        assert_eq!(e.target_ref.as_ref().and_then(|t| t.kind.as_deref()), Some("Pod"));
    }
    let ep = eventually(Duration::from_secs(10), "the Endpoints object", || {
        let endpoints = endpoints.clone();
        async move {
            let ep = endpoints.get_opt("web").await.ok().flatten()?;
            let ready: usize = ep.subsets.iter().flatten().map(|s| s.addresses.as_ref().map_or(0, Vec::len)).sum();
            (ready == 2).then_some(ep)
        }
    })
    .await;
    let not_ready: Vec<String> = ep
        .subsets
        .iter()
        .flatten()
        .flat_map(|s| s.not_ready_addresses.iter().flatten().map(|a| a.ip.clone()))
        .collect();
    assert_eq!(not_ready, vec!["10.42.0.12".to_string()]);

    // Readiness flips reach the slices quickly: timed from the pod status write being
    // acknowledged to the slice's watch event.
    let mut worst = Duration::ZERO;
    let config = kube::runtime::watcher::Config::default().labels("kubernetes.io/service-name=web");
    let mut events = kube::runtime::watcher(slices.clone(), config).boxed();
    // Established (initial list done) before the first write.
    while let Some(ev) = events.next().await {
        if matches!(ev, Ok(kube::runtime::watcher::Event::InitDone)) {
            break;
        }
    }
    for (i, ready) in [true, false, true, false, true].into_iter().enumerate() {
        set_pod_status(&pods, "b", "10.42.0.12", ready).await;
        let written = Instant::now();
        let seen = tokio::time::timeout(Duration::from_secs(10), async {
            while let Some(ev) = events.next().await {
                if let Ok(kube::runtime::watcher::Event::Apply(s)) = ev {
                    let flag = s
                        .endpoints
                        .iter()
                        .find(|e| e.addresses.iter().any(|a| a == "10.42.0.12"))
                        .and_then(|e| e.conditions.as_ref().and_then(|c| c.ready));
                    if flag == Some(ready) {
                        return;
                    }
                }
            }
        })
        .await;
        assert!(seen.is_ok(), "readiness flip {i} never reached the slice");
        let took = written.elapsed();
        println!("readiness flip {i} visible in the EndpointSlice watch {took:?} after the pod status write");
        worst = worst.max(took);
    }
    println!("worst pod-readiness-to-EndpointSlice latency: {worst:?}");

    // A deleted pod leaves; the slices of a deleted service are collected.
    server.ok(&["delete", "pod", "c", "--grace-period=0", "--force"]).await;
    eventually(Duration::from_secs(10), "the deleted pod gone from the slices", || {
        let slices = slices.clone();
        async move {
            let (ready, ports) = slice_view(&slices).await;
            (!ready.contains_key("10.42.0.13") && ports == vec![8080]).then_some(())
        }
    })
    .await;
    server.ok(&["delete", "service", "web"]).await;
    eventually(Duration::from_secs(20), "slices and endpoints of the deleted service gone", || {
        let (slices, endpoints) = (slices.clone(), endpoints.clone());
        async move {
            let none = slices
                .list(&ListParams::default().labels("kubernetes.io/service-name=web"))
                .await
                .ok()?
                .items
                .is_empty();
            (none && endpoints.get_opt("web").await.ok()?.is_none()).then_some(())
        }
    })
    .await;
    controllers.stop().await;
}

async fn renew(leases: &Api<Lease>, node: &str) {
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": node, "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": node, "leaseDurationSeconds": 40,
            "renewTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(jiff::Timestamp::now())}});
    leases.patch(node, &PatchParams::apply("core-test").force(), &Patch::Apply(&lease)).await.expect("lease");
}

async fn report_ready(nodes: &Api<Node>, node: &str) {
    let now = jiff::Timestamp::now().to_string();
    let status = json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
        "message": "kubelet is posting ready status", "lastHeartbeatTime": now, "lastTransitionTime": now}]}});
    nodes.patch_status(node, &PatchParams::default(), &Patch::Merge(&status)).await.expect("node status");
}

fn taint_keys(node: &Node) -> Vec<String> {
    let mut keys: Vec<String> =
        node.spec.iter().flat_map(|s| s.taints.iter().flatten()).map(|t| format!("{}:{}", t.key, t.effect)).collect();
    keys.sort();
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_whose_lease_stops_goes_unknown_and_tainted() {
    init_logs();
    let mut server = Server::start();
    let client = server.client().await;
    let config = node_lifecycle::Config {
        monitor_grace_period: Duration::from_secs(2),
        startup_grace_period: Duration::from_secs(3),
        ..Default::default()
    };
    let controllers = Controllers::start(&client, server.root_ca(), config);
    let nodes: Api<Node> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    for n in ["alive", "silent"] {
        nodes
            .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": n}})).expect("node"))
            .await
            .expect("create node");
        report_ready(&nodes, n).await;
        renew(&leases, n).await;
    }
    // Keep one node's kubelet alive.
    let stop_alive = CancellationToken::new();
    let heartbeat = {
        let (leases, stop) = (leases.clone(), stop_alive.clone());
        tokio::spawn(async move {
            while !stop.is_cancelled() {
                renew(&leases, "alive").await;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
    };
    let silent = eventually(Duration::from_secs(15), "the silent node tainted unreachable", || {
        let nodes = nodes.clone();
        async move {
            let n = nodes.get("silent").await.ok()?;
            let keys = taint_keys(&n);
            (keys.len() == 2).then_some(n)
        }
    })
    .await;
    assert_eq!(
        taint_keys(&silent),
        vec![
            "node.kubernetes.io/unreachable:NoExecute".to_string(),
            "node.kubernetes.io/unreachable:NoSchedule".to_string()
        ]
    );
    let ready = silent
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .expect("ready");
    assert_eq!((ready.status.as_str(), ready.reason.as_deref()), ("Unknown", Some("NodeStatusUnknown")));
    assert_eq!(ready.message.as_deref(), Some("Kubelet stopped posting node status."));
    assert!(taint_keys(&nodes.get("alive").await.expect("alive")).is_empty());

    // The kubelet comes back: Ready again, taints removed.
    report_ready(&nodes, "silent").await;
    renew(&leases, "silent").await;
    eventually(Duration::from_secs(10), "the taints removed", || {
        let (nodes, leases) = (nodes.clone(), leases.clone());
        async move {
            renew(&leases, "silent").await;
            taint_keys(&nodes.get("silent").await.ok()?).is_empty().then_some(())
        }
    })
    .await;

    // With every node silent (a single-node cluster's case) upstream stops NoExecute tainting.
    stop_alive.cancel();
    let _ = heartbeat.await;
    let all = eventually(Duration::from_secs(15), "both nodes unreachable", || {
        let nodes = nodes.clone();
        async move {
            let list = nodes.list(&ListParams::default()).await.ok()?;
            let unknown = list.items.iter().all(|n| {
                n.status
                    .iter()
                    .flat_map(|s| s.conditions.iter().flatten())
                    .any(|c| c.type_ == "Ready" && c.status == "Unknown")
            });
            let tainted = list
                .items
                .iter()
                .all(|n| taint_keys(n).contains(&"node.kubernetes.io/unreachable:NoSchedule".to_string()));
            (unknown && tainted).then_some(list.items)
        }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    for n in &all {
        let fresh = nodes.get(&n.name_any()).await.expect("node");
        assert!(!taint_keys(&fresh).iter().any(|k| k.ends_with(":NoExecute")), "{:?}", taint_keys(&fresh));
    }
    controllers.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn disruption_budget_status_counts_healthy_pods() {
    let (server, client, controllers) = setup().await;
    server.apply(&json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node1"}})).await;
    server
        .apply(
            &json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "registry.example/web:1"}]}}}}),
        )
        .await;
    let rs_uid = Api::<k8s_openapi::api::apps::v1::ReplicaSet>::namespaced(client.clone(), "default")
        .get("web")
        .await
        .expect("rs")
        .uid()
        .expect("uid");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for (i, ready) in [true, true, false].into_iter().enumerate() {
        let name = format!("web-{i}");
        let mut m = pod_manifest(&name, 8080);
        m["metadata"]["ownerReferences"] = json!([owner_ref("ReplicaSet", "apps/v1", "web", &rs_uid, true)]);
        server.apply(&m).await;
        set_pod_status(&pods, &name, &format!("10.42.0.{}", 20 + i), ready).await;
    }
    server
        .apply(&json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "min", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}))
        .await;
    server
        .apply(&json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "max", "namespace": "default"},
            "spec": {"maxUnavailable": "50%", "selector": {"matchLabels": {"app": "web"}}}}))
        .await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    let status_of = |name: &'static str| {
        let pdbs = pdbs.clone();
        async move {
            let b = pdbs.get(name).await.ok()?;
            let s = b.status?;
            (s.observed_generation == b.metadata.generation).then_some(s)
        }
    };
    // minAvailable 1 over the 3 selected pods, 2 of them ready.
    let min = eventually(Duration::from_secs(10), "the minAvailable budget's status", || status_of("min")).await;
    assert_eq!((min.expected_pods, min.current_healthy, min.desired_healthy, min.disruptions_allowed), (3, 2, 1, 1));
    let c = &min.conditions.as_ref().expect("conditions")[0];
    assert_eq!(
        (c.type_.as_str(), c.status.as_str(), c.reason.as_str()),
        ("DisruptionAllowed", "True", "SufficientPods")
    );
    // maxUnavailable 50% of the ReplicaSet's 4 replicas: 2 must stay healthy, 2 are.
    let max = eventually(Duration::from_secs(10), "the maxUnavailable budget's status", || status_of("max")).await;
    assert_eq!((max.expected_pods, max.current_healthy, max.desired_healthy, max.disruptions_allowed), (4, 2, 2, 0));
    // A pod turning ready changes both.
    set_pod_status(&pods, "web-2", "10.42.0.22", true).await;
    eventually(Duration::from_secs(10), "the budgets to count the new ready pod", || {
        let pdbs = pdbs.clone();
        async move {
            let b = pdbs.get("max").await.ok()?.status?;
            (b.current_healthy == 3 && b.disruptions_allowed == 1).then_some(())
        }
    })
    .await;
    // An eviction's DisruptionTarget condition on a pod that was never deleted goes stale.
    let stale = json!({"status": {"conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": jiff::Timestamp::now().to_string()},
        {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
            "message": "Eviction API: evicting", "lastTransitionTime": (jiff::Timestamp::now() - jiff::SignedDuration::from_secs(180)).to_string()},
    ]}});
    pods.patch_status("web-0", &PatchParams::default(), &Patch::Merge(&stale)).await.expect("pod status");
    eventually(Duration::from_secs(10), "the stale DisruptionTarget condition reset", || {
        let pods = pods.clone();
        async move {
            let p = pods.get("web-0").await.ok()?;
            let c = p.status?.conditions?.into_iter().find(|c| c.type_ == "DisruptionTarget")?;
            (c.status == "False").then_some(())
        }
    })
    .await;

    // kubectl shows what the eviction API reads.
    let allowed = server.ok(&["get", "pdb", "min", "-o", "jsonpath={.status.disruptionsAllowed}"]).await;
    assert_eq!(allowed, "2");
    controllers.stop().await;
}
