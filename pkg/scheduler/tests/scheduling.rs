//! Scheduling decisions against a real `k1s server --disable-agent`: simulated Node objects are
//! created through the API, the scheduler runs in-process with the admin client, and the test
//! reads back bindings, conditions and events. Without a kubelet, the test itself finishes the
//! graceful deletion of preemption victims, as a kubelet would.
//!
//! Needs the k1s binary (`cargo build -p k1s`); `K1S_BIN` overrides where it is looked up.

use futures::future::join_all;
use k8s_openapi::api::core::v1::{Event, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

fn k1s_bin() -> PathBuf {
    if let Ok(p) = std::env::var("K1S_BIN") {
        return PathBuf::from(p);
    }
    // tests run from <target>/debug/deps/; the binary sits in <target>/debug/.
    let exe = std::env::current_exe().expect("test executable path");
    let bin = exe.parent().and_then(|d| d.parent()).map(|d| d.join("k1s")).expect("target dir");
    assert!(bin.exists(), "{} is missing: build it first with `cargo build -p k1s`", bin.display());
    bin
}

/// A `k1s server --disable-agent` on an ephemeral port in a temp dir, plus a scheduler.
struct Cluster {
    _dir: tempfile::TempDir,
    child: Child,
    client: kube::Client,
    cancel: CancellationToken,
    scheduler: Option<tokio::task::JoinHandle<()>>,
}

impl Cluster {
    async fn start() -> Cluster {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("config.yaml"), "").expect("config");
        let kubeconfig = dir.path().join("kubeconfig.yaml");
        let log = std::fs::File::create(dir.path().join("server.log")).expect("log");
        let child = Command::new(k1s_bin())
            .arg("server")
            .arg("--disable-agent")
            .arg("--https-listen-port=0")
            .arg("--bind-address=127.0.0.1")
            // The server's own scheduler would race the one under test, and node lifecycle
            // would mark the simulated nodes (which renew no lease) unreachable.
            .arg("--disable=scheduler,nodelifecycle")
            .arg(format!("--config={}", dir.path().join("config.yaml").display()))
            .arg(format!("--data-dir={}", dir.path().join("data").display()))
            .arg(format!("--write-kubeconfig={}", kubeconfig.display()))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn k1s");
        let mut cluster = None;
        let deadline = Instant::now() + Duration::from_secs(90);
        let mut child = Some(child);
        while Instant::now() < deadline {
            if kubeconfig.exists() {
                if let Ok(client) = k1s_runtime::connect(&kubeconfig, &k1s_runtime::user_agent("kube-scheduler")).await
                {
                    if client.apiserver_version().await.is_ok() {
                        cluster = Some(client);
                        break;
                    }
                }
            }
            if let Some(status) = child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                let log = std::fs::read_to_string(dir.path().join("server.log")).unwrap_or_default();
                panic!("k1s exited early: {status}\n{log}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let client = cluster.expect("k1s did not become ready");
        let child = child.take().expect("child");
        Cluster { _dir: dir, child, client, cancel: CancellationToken::new(), scheduler: None }
    }

    async fn with_scheduler() -> Cluster {
        let mut c = Cluster::start().await;
        c.start_scheduler();
        c
    }

    fn start_scheduler(&mut self) {
        self.scheduler = Some(tokio::spawn(k1s_scheduler::run(self.client.clone(), self.cancel.clone())));
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), "default")
    }

    async fn create_node(&self, node: Value) {
        let node: Node = serde_json::from_value(node).expect("node json");
        Api::<Node>::all(self.client.clone()).create(&PostParams::default(), &node).await.expect("create node");
    }

    async fn create_pod(&self, pod: Value) {
        let pod: Pod = serde_json::from_value(pod).expect("pod json");
        self.pods().create(&PostParams::default(), &pod).await.expect("create pod");
    }

    async fn pod(&self, name: &str) -> Pod {
        self.pods().get(name).await.expect("get pod")
    }

    /// Waits until the pod is bound and returns its node.
    async fn bound_node(&self, name: &str) -> String {
        eventually(Duration::from_secs(20), &format!("pod {name} to be bound"), || async {
            node_of(&self.pod(name).await)
        })
        .await
    }

    /// Waits for `PodScheduled=True` (written right after the binding) and returns it.
    async fn scheduled_true(&self, name: &str) -> k8s_openapi::api::core::v1::PodCondition {
        eventually(Duration::from_secs(20), &format!("pod {name} to be PodScheduled"), || async {
            scheduled_condition(&self.pod(name).await).filter(|c| c.status == "True")
        })
        .await
    }

    /// Waits for `PodScheduled=False` with reason `Unschedulable` after nodes were considered,
    /// and returns the message. (A pod created before the scheduler has seen any node first
    /// reports `no nodes available to schedule pods`.)
    async fn unschedulable(&self, name: &str) -> String {
        eventually(Duration::from_secs(20), &format!("pod {name} to be unschedulable"), || async {
            unschedulable_message(&self.pod(name).await)
        })
        .await
    }

    /// Events about pod `name` with `reason`.
    async fn events(&self, name: &str, reason: &str) -> Vec<Event> {
        let api: Api<Event> = Api::namespaced(self.client.clone(), "default");
        let lp = ListParams::default().fields(&format!("involvedObject.name={name}"));
        let list = api.list(&lp).await.expect("list events");
        list.items.into_iter().filter(|e| e.reason.as_deref() == Some(reason)).collect()
    }

    async fn wait_event(&self, name: &str, reason: &str) -> Event {
        eventually(Duration::from_secs(20), &format!("a {reason} event for {name}"), || async {
            self.events(name, reason).await.into_iter().next()
        })
        .await
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.cancel.cancel();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
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

/// The `PodScheduled=False` message of a pod rejected by every node it was checked against.
fn unschedulable_message(p: &Pod) -> Option<String> {
    let c = scheduled_condition(p).filter(|c| c.status == "False" && c.reason.as_deref() == Some("Unschedulable"))?;
    c.message.filter(|m| m.starts_with("0/"))
}

fn node_of(p: &Pod) -> Option<String> {
    p.spec.as_ref().and_then(|s| s.node_name.clone()).filter(|n| !n.is_empty())
}

fn scheduled_condition(p: &Pod) -> Option<k8s_openapi::api::core::v1::PodCondition> {
    p.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "PodScheduled").cloned()
}

/// A simulated Ready node.
fn node(name: &str, cpu: &str, memory: &str, pods: u32) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {
            "capacity": {"cpu": cpu, "memory": memory, "pods": pods.to_string()},
            "allocatable": {"cpu": cpu, "memory": memory, "pods": pods.to_string()},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "simulated"}],
        },
    })
}

fn with(mut v: Value, pointer: &str, value: Value) -> Value {
    let (parent, key) = pointer.rsplit_once('/').expect("pointer");
    let mut cur = &mut v;
    for part in parent.split('/').filter(|p| !p.is_empty()) {
        if cur.get(part).is_none() {
            cur[part] = json!({});
        }
        cur = &mut cur[part];
    }
    cur[key] = value;
    v
}

fn pod(name: &str, cpu: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}],
            "terminationGracePeriodSeconds": 30,
        },
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_fit_picks_the_node_with_room() {
    let c = Cluster::with_scheduler().await;
    c.create_node(node("small", "1", "2Gi", 110)).await;
    c.create_node(node("large", "4", "8Gi", 110)).await;
    c.create_pod(pod("needs-two", "2")).await;
    assert_eq!(c.bound_node("needs-two").await, "large");
    // The binding writes nodeName and PodScheduled=True together (one update, as upstream).
    let bound = c.pod("needs-two").await;
    let cond = scheduled_condition(&bound).expect("PodScheduled with the binding");
    assert_eq!((cond.status.as_str(), cond.reason.as_deref()), ("True", None));
    assert!(cond.last_transition_time.is_some());
    // No status patch of the scheduler's own, unless an attempt before the scheduler saw the
    // nodes reported `no nodes available` (its watches race the test's writes).
    let failed_first = !c.events("needs-two", "FailedScheduling").await.is_empty();
    let managers: Vec<_> = bound.metadata.managed_fields.iter().flatten().filter_map(|m| m.manager.clone()).collect();
    assert!(failed_first || !managers.iter().any(|m| m == "default-scheduler"), "{managers:?}");
    c.scheduled_true("needs-two").await;
    let ev = c.wait_event("needs-two", "Scheduled").await;
    assert_eq!(ev.message.as_deref(), Some("Successfully assigned default/needs-two to large"));
    assert_eq!(ev.source.and_then(|s| s.component).as_deref(), Some("default-scheduler"));
    // The large node now has 2 of 4 CPUs left: a 3-CPU pod fits nowhere.
    c.create_pod(pod("needs-three", "3")).await;
    let message = c.unschedulable("needs-three").await;
    assert!(message.starts_with("0/2 nodes are available: 2 Insufficient cpu."), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_big_pod_stays_pending_until_a_bigger_node_joins() {
    let c = Cluster::with_scheduler().await;
    c.create_node(node("n1", "2", "4Gi", 110)).await;
    c.create_pod(pod("huge", "8")).await;
    let message = c.unschedulable("huge").await;
    assert_eq!(
        message,
        "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    );
    let ev = eventually(Duration::from_secs(20), "the FailedScheduling event", || async {
        let events = c.events("huge", "FailedScheduling").await;
        events.into_iter().find(|e| e.message.as_deref() == Some(message.as_str()))
    })
    .await;
    assert_eq!(ev.type_.as_deref(), Some("Warning"));
    assert!(node_of(&c.pod("huge").await).is_none());
    let started = Instant::now();
    c.create_node(node("n2", "16", "32Gi", 110)).await;
    assert_eq!(c.bound_node("huge").await, "n2");
    println!("pending pod bound {:?} after the bigger node appeared", started.elapsed());
    let cond = c.scheduled_true("huge").await;
    assert_eq!((cond.reason, cond.message), (None, None));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_selector_and_affinity_choose_matching_nodes() {
    let c = Cluster::with_scheduler().await;
    let a = with(node("a", "4", "8Gi", 110), "/metadata/labels/disk", json!("ssd"));
    let a = with(a, "/metadata/labels/zone", json!("z1"));
    let b = with(node("b", "4", "8Gi", 110), "/metadata/labels/disk", json!("hdd"));
    let b = with(b, "/metadata/labels/zone", json!("z2"));
    c.create_node(a).await;
    c.create_node(b).await;

    c.create_pod(with(pod("on-ssd", "100m"), "/spec/nodeSelector", json!({"disk": "ssd"}))).await;
    let zone_affinity = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z2"]}]}]
    }}});
    c.create_pod(with(pod("in-z2", "100m"), "/spec/affinity", zone_affinity)).await;
    let by_name = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]}]
    }}});
    c.create_pod(with(pod("by-name", "100m"), "/spec/affinity", by_name)).await;
    let preferred = json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["hdd"]}]}}
    ]}});
    c.create_pod(with(pod("prefers-hdd", "100m"), "/spec/affinity", preferred)).await;
    c.create_pod(with(pod("nowhere", "100m"), "/spec/nodeSelector", json!({"disk": "nvme"}))).await;

    assert_eq!(c.bound_node("on-ssd").await, "a");
    assert_eq!(c.bound_node("in-z2").await, "b");
    assert_eq!(c.bound_node("by-name").await, "a");
    assert_eq!(c.bound_node("prefers-hdd").await, "b");
    let message = c.unschedulable("nowhere").await;
    assert_eq!(
        message,
        "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn taints_and_cordons_repel_pods_without_tolerations() {
    let c = Cluster::with_scheduler().await;
    let gpu = with(
        node("gpu", "4", "8Gi", 110),
        "/spec/taints",
        json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
    );
    c.create_node(gpu).await;
    c.create_node(with(node("cordoned", "4", "8Gi", 110), "/spec/unschedulable", json!(true))).await;

    c.create_pod(pod("plain", "100m")).await;
    let message = c.unschedulable("plain").await;
    assert_eq!(
        message,
        "0/2 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 1 node(s) were unschedulable. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );
    let tolerations = json!([{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]);
    c.create_pod(with(pod("tolerant", "100m"), "/spec/tolerations", tolerations)).await;
    assert_eq!(c.bound_node("tolerant").await, "gpu");

    // Uncordoning is a cluster event: the waiting pod is retried and placed.
    let nodes: Api<Node> = Api::all(c.client.clone());
    let patch = json!({"spec": {"unschedulable": null}});
    nodes
        .patch("cordoned", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch))
        .await
        .expect("uncordon");
    assert_eq!(c.bound_node("plain").await, "cordoned");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_anti_affinity_keeps_replicas_apart() {
    let c = Cluster::with_scheduler().await;
    c.create_node(node("a", "4", "8Gi", 110)).await;
    c.create_node(node("b", "4", "8Gi", 110)).await;
    let replica = |name: &str| {
        let p = with(pod(name, "100m"), "/metadata/labels", json!({"app": "web"}));
        with(
            p,
            "/spec/affinity",
            json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
            ]}}),
        )
    };
    // Created back to back: the second must see the first assumed on its node.
    join_all(["web-1", "web-2", "web-3"].map(|n| c.create_pod(replica(n)))).await;
    let mut placed = Vec::new();
    let mut pending = Vec::new();
    for name in ["web-1", "web-2", "web-3"] {
        let got = eventually(Duration::from_secs(20), "a decision", || async {
            let p = c.pod(name).await;
            if let Some(n) = node_of(&p) {
                return Some(Ok(n));
            }
            unschedulable_message(&p).map(Err)
        })
        .await;
        match got {
            Ok(n) => placed.push(n),
            Err(m) => pending.push(m),
        }
    }
    placed.sort();
    assert_eq!(placed, vec!["a", "b"], "pending: {pending:?}");
    assert_eq!(pending.len(), 1);
    assert!(
        pending[0].starts_with("0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules."),
        "{}",
        pending[0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn higher_priority_pod_preempts_a_lower_priority_one() {
    let c = Cluster::with_scheduler().await;
    let classes: Api<PriorityClass> = Api::all(c.client.clone());
    for (name, value) in [("low", 100), ("high", 1000)] {
        let pc: PriorityClass =
            serde_json::from_value(json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}))
                .expect("priority class");
        classes.create(&PostParams::default(), &pc).await.expect("create priority class");
    }
    c.create_node(node("n1", "2", "4Gi", 110)).await;
    c.create_pod(with(pod("victim", "2"), "/spec/priorityClassName", json!("low"))).await;
    assert_eq!(c.bound_node("victim").await, "n1");

    // Play the kubelet: finish graceful deletions on the simulated node.
    let pods = c.pods();
    let kubelet = tokio::spawn(async move {
        loop {
            if let Ok(list) = pods.list(&ListParams::default()).await {
                for p in list.items.iter().filter(|p| p.metadata.deletion_timestamp.is_some()) {
                    let name = p.metadata.name.clone().unwrap_or_default();
                    let _ =
                        pods.delete(&name, &DeleteParams { grace_period_seconds: Some(0), ..Default::default() }).await;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });

    c.create_pod(with(pod("preemptor", "2"), "/spec/priorityClassName", json!("high"))).await;
    let ev = c.wait_event("victim", "Preempted").await;
    let preemptor_uid = c.pod("preemptor").await.metadata.uid.unwrap_or_default();
    assert_eq!(ev.message, Some(format!("Preempted by pod {preemptor_uid} on node n1")));
    assert_eq!(c.bound_node("preemptor").await, "n1");
    let p = c.pod("preemptor").await;
    assert_eq!(p.status.and_then(|s| s.nominated_node_name).as_deref(), Some("n1"));
    eventually(Duration::from_secs(20), "the victim to be gone", || async {
        c.pods().get_opt("victim").await.expect("get victim").is_none().then_some(())
    })
    .await;
    kubelet.abort();
    let failed = c.events("preemptor", "FailedScheduling").await;
    assert!(
        failed.iter().any(|e| e.message.as_deref() == Some("0/1 nodes are available: 1 Insufficient cpu.")),
        "{failed:?}"
    );
}

/// Polls until `want` pods are bound; returns when the first and the last were seen bound.
async fn wait_bound(pods: &Api<Pod>, want: usize, started: Instant) -> (Duration, Duration) {
    let mut first = None;
    loop {
        let list = pods.list(&ListParams::default()).await.expect("list pods");
        let bound = list.items.iter().filter(|p| node_of(p).is_some()).count();
        if bound > 0 && first.is_none() {
            first = Some(started.elapsed());
        }
        if bound >= want {
            let last = started.elapsed();
            return (first.unwrap_or(last), last);
        }
        assert!(started.elapsed() < Duration::from_secs(60), "only {bound} of {want} pods bound");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binds_a_hundred_pods() {
    let mut c = Cluster::start().await;
    c.create_node(node("big", "200", "400Gi", 250)).await;
    let pods = c.pods();

    // A backlog: 100 pending pods, then the scheduler starts.
    let created = Instant::now();
    join_all((0..100).map(|i| c.create_pod(pod(&format!("backlog-{i}"), "100m")))).await;
    println!("created 100 pods in {:?}", created.elapsed());
    let started = Instant::now();
    c.start_scheduler();
    let (first, last) = wait_bound(&pods, 100, started).await;
    println!(
        "backlog: scheduler start to 100 bound {last:?}; first bound after {first:?} (watches synced), \
         first to last {:?} ({:.0} pods/s)",
        last - first,
        99.0 / (last - first).as_secs_f64().max(1e-3)
    );

    // Steady state: the scheduler is running while 100 more pods are created at once.
    let started = Instant::now();
    join_all((0..100).map(|i| c.create_pod(pod(&format!("burst-{i}"), "100m")))).await;
    let created = started.elapsed();
    let (_, last) = wait_bound(&pods, 200, started).await;
    println!(
        "burst: 100 creates took {created:?}; first create to all bound {last:?} ({:.0} pods/s)",
        100.0 / last.as_secs_f64()
    );
}

async fn create<K>(api: Api<K>, body: Value)
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(body).expect("object json");
    api.create(&PostParams::default(), &obj).await.expect("create");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_binding_waits_for_claims_and_follows_the_volumes_node() {
    let c = Cluster::with_scheduler().await;
    c.create_node(node("a", "4", "8Gi", 110)).await;
    c.create_node(node("b", "4", "8Gi", 110)).await;
    let claim_volume = json!({"name": "data", "persistentVolumeClaim": {"claimName": "data"}});
    c.create_pod(with(pod("user", "100m"), "/spec/volumes", json!([claim_volume]))).await;
    assert_eq!(
        c.unschedulable("user").await,
        "0/2 nodes are available: persistentvolumeclaim \"data\" not found. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );
    // A class without a provisioner that binds on first use, and the only volume that fits is
    // on node b.
    create(
        Api::<StorageClass>::all(c.client.clone()),
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "manual"},
               "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"}),
    )
    .await;
    let volume = |name: &str, size: &str, host: &str| {
        json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
               "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "storageClassName": "manual",
                        "hostPath": {"path": format!("/tmp/k1s-sched-{name}")},
                        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "In", "values": [host]}]}]}}}})
    };
    let volumes = Api::<PersistentVolume>::all(c.client.clone());
    create(volumes.clone(), volume("too-small-on-a", "100Mi", "a")).await;
    create(volumes, volume("fits-on-b", "1Gi", "b")).await;
    let claims = Api::<PersistentVolumeClaim>::namespaced(c.client.clone(), "default");
    create(
        claims.clone(),
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
               "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "manual",
                        "resources": {"requests": {"storage": "500Mi"}}}}),
    )
    .await;
    assert_eq!(c.bound_node("user").await, "b");
    // The scheduler gave the volume its claim before binding the pod; the binder finishes it
    // with a write of its own, which may land after the pod is bound.
    let claim = claims.get("data").await.expect("claim");
    assert_eq!(claim.spec.and_then(|s| s.volume_name).as_deref(), Some("fits-on-b"));
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let claim = claims.get("data").await.expect("claim");
        if claim.status.and_then(|s| s.phase).as_deref() == Some("Bound") {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the claim never became Bound");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // A second pod of the same claim goes where its volume is.
    c.create_pod(with(pod("second", "100m"), "/spec/volumes", json!([claim_volume]))).await;
    assert_eq!(c.bound_node("second").await, "b");
    // Cordoning b leaves the volume's pods nowhere to go.
    Api::<Node>::all(c.client.clone())
        .patch(
            "b",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"unschedulable": true}})),
        )
        .await
        .expect("cordon");
    c.create_pod(with(pod("third", "100m"), "/spec/volumes", json!([claim_volume]))).await;
    let message = c.unschedulable("third").await;
    assert!(
        message.starts_with(
            "0/2 nodes are available: 1 node(s) had volume node affinity conflict, 1 node(s) were unschedulable."
        ),
        "{message}"
    );
}
