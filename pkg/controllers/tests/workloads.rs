//! The workload controllers in-process against a real `k1s server --disable-agent` (its own
//! copies of these controllers disabled): Deployment rollouts and scaling, a Job running to
//! completion, a CronJob creating a Job, a StatefulSet and a DaemonSet. No kubelet runs, so the
//! test plays its part: it marks pods Running/Ready or Succeeded through `pods/status`.
//!
//! Needs the `k1s` binary: `$K1S_BIN`, or `$CARGO_TARGET_DIR/debug/k1s` (build it with
//! `cargo build -p k1s`).

use k1s_controllers::Context;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod, ReplicationController};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::ResourceExt;
use serde_json::json;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The server's own copies of the controllers under test are disabled, and so are the
/// scheduler (it would bind pods, making their deletion wait for a kubelet) and node lifecycle
/// (it would taint the fake nodes, which never renew a lease).
const DISABLED: &str = "deployment,replicaset,statefulset,daemonset,job,cronjob,scheduler,nodelifecycle";

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
    fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig.yaml")
    }

    fn logs(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// Starts `k1s server --disable-agent` on a free port in a temp data dir.
    fn start() -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("config.yaml"), "").expect("config");
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

    async fn client(&mut self) -> kube::Client {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if self.kubeconfig().exists() {
                if let Ok(client) =
                    k1s_runtime::connect(&self.kubeconfig(), &k1s_runtime::user_agent("kube-controller-manager")).await
                {
                    let ready =
                        client.request_text(http::Request::get("/readyz").body(Vec::new()).expect("request")).await;
                    if ready.is_ok() {
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
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `f` until it yields `Some`, panicking with `what` after `timeout`.
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
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Plays the kubelet: marks every pending pod Running and Ready (or Succeeded for Job pods
/// when `finish_jobs` is set).
async fn kubelet(client: kube::Client, cancel: CancellationToken) {
    let pods: Api<Pod> = Api::all(client.clone());
    while !cancel.is_cancelled() {
        if let Ok(list) = pods.list(&ListParams::default()).await {
            for p in list.items {
                if p.metadata.deletion_timestamp.is_some() {
                    continue;
                }
                let phase = p.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
                let is_job = p.labels().contains_key("batch.kubernetes.io/job-name");
                let target = if is_job { "Succeeded" } else { "Running" };
                if phase == target || phase == "Failed" {
                    continue;
                }
                let now = jiff::Timestamp::now().to_string();
                let ready = if is_job { "False" } else { "True" };
                let status = json!({"status": {
                    "phase": target,
                    "conditions": [{"type": "Ready", "status": ready, "lastTransitionTime": now}],
                }});
                let api: Api<Pod> = Api::namespaced(client.clone(), &p.namespace().unwrap_or_default());
                let _ = api.patch_status(&p.name_any(), &PatchParams::default(), &Patch::Merge(&status)).await;
            }
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
}

fn apply<K: serde::Serialize>(obj: &K) -> Patch<&K> {
    Patch::Apply(obj)
}

fn pp() -> PatchParams {
    PatchParams::apply("workloads-test").force()
}

fn deployment(image: &str) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": image}]}
            }
        }
    }))
    .expect("deployment")
}

async fn owned_by<K>(api: &Api<K>, uid: &str) -> Vec<K>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&ListParams::default())
        .await
        .map(|l| {
            l.items
                .into_iter()
                .filter(|o| {
                    o.meta().owner_references.iter().flatten().any(|r| r.uid == uid && r.controller == Some(true))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workload_controllers_against_a_real_server() {
    let mut server = Server::start();
    let client = server.client().await;
    let cancel = CancellationToken::new();
    let ctx = Arc::new(Context {
        client: client.clone(),
        recorder: k1s_runtime::events::Recorder::new(client.clone(), "workloads-test", None),
        cancel: cancel.clone(),
        root_ca_pem: String::new(),
        cluster_signing: None,
    });
    let controllers = tokio::spawn({
        let ctx = ctx.clone();
        async move {
            tokio::join!(
                k1s_controllers::deployment::run(ctx.clone()),
                k1s_controllers::replicaset::run(ctx.clone()),
                k1s_controllers::statefulset::run(ctx.clone()),
                k1s_controllers::daemonset::run(ctx.clone()),
                k1s_controllers::job::run(ctx.clone()),
                k1s_controllers::cronjob::run(ctx.clone()),
            );
        }
    });
    let kubelet = tokio::spawn(kubelet(client.clone(), cancel.clone()));
    let t = Duration::from_secs(60);

    // CronJob first: its first run comes at the next whole minute, checked at the end.
    let cronjobs: Api<CronJob> = Api::namespaced(client.clone(), "default");
    let cj: CronJob = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "tick", "namespace": "default"},
        "spec": {
            "schedule": "* * * * *",
            "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "tick", "image": "busybox"}]
            }}}}
        }
    }))
    .expect("cronjob");
    let cj = cronjobs.create(&PostParams::default(), &cj).await.expect("create cronjob");

    // A Deployment of 3: one ReplicaSet, three pods, rollout complete.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let d = deployments.patch("web", &pp(), &apply(&deployment("nginx:1"))).await.expect("apply deployment");
    let d_uid = d.uid().unwrap_or_default();
    let first_rs = eventually(t, "one ReplicaSet with 3 ready pods", || {
        let (replica_sets, pods) = (replica_sets.clone(), pods.clone());
        let d_uid = d_uid.clone();
        async move {
            let rss = owned_by(&replica_sets, &d_uid).await;
            let [rs] = rss.as_slice() else { return None };
            let rs_pods = owned_by(&pods, &rs.uid().unwrap_or_default()).await;
            (rs_pods.len() == 3 && rs.status.as_ref().and_then(|s| s.ready_replicas) == Some(3)).then(|| rs.clone())
        }
    })
    .await;
    assert!(first_rs.name_any().starts_with("web-"));
    assert_eq!(first_rs.annotations().get("deployment.kubernetes.io/revision").map(String::as_str), Some("1"));
    let hash = first_rs.labels().get("pod-template-hash").cloned().expect("pod-template-hash label");
    assert_eq!(first_rs.name_any(), format!("web-{hash}"));
    let complete = |want_replicas: i32| {
        let deployments = deployments.clone();
        move || {
            let deployments = deployments.clone();
            async move {
                let d = deployments.get("web").await.ok()?;
                let s = d.status.clone()?;
                let progressing = s.conditions.iter().flatten().find(|c| c.type_ == "Progressing")?;
                (s.observed_generation >= d.metadata.generation
                    && s.updated_replicas == Some(want_replicas)
                    && s.available_replicas == Some(want_replicas)
                    && s.replicas == Some(want_replicas)
                    && progressing.reason.as_deref() == Some("NewReplicaSetAvailable"))
                .then_some(d)
            }
        }
    };
    let d = eventually(t, "deployment rollout complete", complete(3)).await;
    assert_eq!(d.annotations().get("deployment.kubernetes.io/revision").map(String::as_str), Some("1"));

    // New image: a second ReplicaSet takes over, the first is scaled to zero.
    deployments.patch("web", &pp(), &apply(&deployment("nginx:2"))).await.expect("set image");
    eventually(t, "rollout to the second ReplicaSet", complete(3)).await;
    let rss = owned_by(&replica_sets, &d_uid).await;
    assert_eq!(rss.len(), 2, "two ReplicaSets after one rollout");
    let old = rss.iter().find(|r| r.uid() == first_rs.uid()).expect("old ReplicaSet kept");
    assert_eq!(old.spec.as_ref().and_then(|s| s.replicas), Some(0));
    let new = rss.iter().find(|r| r.uid() != first_rs.uid()).expect("new ReplicaSet");
    assert_eq!(new.annotations().get("deployment.kubernetes.io/revision").map(String::as_str), Some("2"));
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), "default");
    let scaling: Vec<String> = events
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("ScalingReplicaSet"))
        .filter_map(|e| e.message)
        .collect();
    assert!(
        scaling.iter().any(|m| m == &format!("Scaled up replica set {} from 0 to 1", new.name_any())),
        "{scaling:?}"
    );

    // Scale to 0, then to 2.
    let scale = |n: i32| json!({"spec": {"replicas": n}});
    deployments.patch("web", &PatchParams::default(), &Patch::Merge(&scale(0))).await.expect("scale 0");
    eventually(t, "no pods left", || {
        let pods = pods.clone();
        async move {
            let l = pods.list(&ListParams::default().labels("app=web")).await.ok()?;
            l.items.is_empty().then_some(())
        }
    })
    .await;
    deployments.patch("web", &PatchParams::default(), &Patch::Merge(&scale(2))).await.expect("scale 2");
    eventually(t, "two ready replicas", complete(2)).await;

    // A Job of two completions finishes once its pods succeed.
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let job: Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "pi", "namespace": "default"},
        "spec": {
            "completions": 2, "parallelism": 2,
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "pi", "image": "perl"}]
            }}
        }
    }))
    .expect("job");
    let job = jobs.create(&PostParams::default(), &job).await.expect("create job");
    let done = eventually(t, "job complete", || {
        let jobs = jobs.clone();
        async move {
            let j = jobs.get("pi").await.ok()?;
            let s = j.status.clone()?;
            s.conditions.iter().flatten().any(|c| c.type_ == "Complete" && c.status == "True").then_some(j)
        }
    })
    .await;
    let s = done.status.clone().expect("status");
    assert_eq!(s.succeeded, Some(2));
    assert!(s.completion_time.is_some() && s.start_time.is_some());
    let job_pods = owned_by(&pods, &job.uid().unwrap_or_default()).await;
    assert_eq!(job_pods.len(), 2);
    assert!(job_pods.iter().all(|p| p.finalizers().is_empty()), "tracking finalizers are removed from counted pods");

    // A finished Job with ttlSecondsAfterFinished: 0 is deleted.
    let ttl: Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "short-lived", "namespace": "default"},
        "spec": {
            "ttlSecondsAfterFinished": 0,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}
        }
    }))
    .expect("job");
    jobs.create(&PostParams::default(), &ttl).await.expect("create ttl job");
    eventually(t, "finished job deleted after its TTL", || {
        let jobs = jobs.clone();
        async move { jobs.get_opt("short-lived").await.ok()?.is_none().then_some(()) }
    })
    .await;

    // A ReplicationController of 2 (same logic as ReplicaSets, core kind).
    let rcs: Api<ReplicationController> = Api::namespaced(client.clone(), "default");
    let rc: ReplicationController = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ReplicationController",
        "metadata": {"name": "legacy", "namespace": "default"},
        "spec": {
            "replicas": 2, "selector": {"app": "legacy"},
            "template": {
                "metadata": {"labels": {"app": "legacy"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}
            }
        }
    }))
    .expect("replicationcontroller");
    rcs.create(&PostParams::default(), &rc).await.expect("create replicationcontroller");
    eventually(t, "replication controller ready", || {
        let rcs = rcs.clone();
        async move {
            let s = rcs.get("legacy").await.ok()?.status?;
            (s.replicas == 2 && s.ready_replicas == Some(2)).then_some(())
        }
    })
    .await;

    // A StatefulSet of 2: ordered pods with stable names and one claim each.
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    let sts: StatefulSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": "default"},
        "spec": {
            "replicas": 2, "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "template": {
                "metadata": {"labels": {"app": "db"}},
                "spec": {"containers": [{"name": "db", "image": "postgres"}]}
            },
            "volumeClaimTemplates": [{
                "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
            }]
        }
    }))
    .expect("statefulset");
    sets.create(&PostParams::default(), &sts).await.expect("create statefulset");
    eventually(t, "statefulset ready", || {
        let sets = sets.clone();
        async move {
            let s = sets.get("db").await.ok()?.status?;
            (s.ready_replicas == Some(2) && s.replicas == 2 && s.current_revision.is_some()).then_some(())
        }
    })
    .await;
    for name in ["db-0", "db-1"] {
        let p = pods.get(name).await.expect("stateful pod");
        assert_eq!(p.labels().get("statefulset.kubernetes.io/pod-name").map(String::as_str), Some(name));
    }
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    claims.get("data-db-0").await.expect("claim of db-0");
    claims.get("data-db-1").await.expect("claim of db-1");

    // A DaemonSet over two nodes, one of them tainted: one pod, pinned to the other node.
    let nodes: Api<Node> = Api::all(client.clone());
    for (name, taint) in [("node-a", false), ("node-b", true)] {
        let mut node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}});
        if taint {
            node["spec"] = json!({"taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]});
        }
        let node: Node = serde_json::from_value(node).expect("node");
        nodes.create(&PostParams::default(), &node).await.expect("create node");
    }
    let daemons: Api<DaemonSet> = Api::namespaced(client.clone(), "default");
    let ds: DaemonSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "agent", "image": "busybox"}]}
            }
        }
    }))
    .expect("daemonset");
    let ds = daemons.create(&PostParams::default(), &ds).await.expect("create daemonset");
    let ds_pods = eventually(t, "daemonset status", || {
        let (daemons, pods) = (daemons.clone(), pods.clone());
        let uid = ds.uid().unwrap_or_default();
        async move {
            let s = daemons.get("agent").await.ok()?.status?;
            let owned = owned_by(&pods, &uid).await;
            (s.desired_number_scheduled == 1 && s.number_ready == 1 && owned.len() == 1).then_some(owned)
        }
    })
    .await;
    let affinity = serde_json::to_value(ds_pods[0].spec.as_ref().and_then(|s| s.affinity.clone())).expect("json");
    assert_eq!(
        affinity.pointer(
            "/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/matchFields/0/values/0"
        ),
        Some(&json!("node-a"))
    );

    // 100 replicas: how long until the pods exist, and until all are available.
    let started = Instant::now();
    deployments.patch("web", &PatchParams::default(), &Patch::Merge(&scale(100))).await.expect("scale 100");
    eventually(t, "100 pods created", || {
        let pods = pods.clone();
        async move {
            let l = pods.list(&ListParams::default().labels("app=web")).await.ok()?;
            (l.items.len() >= 100).then_some(())
        }
    })
    .await;
    let created_in = started.elapsed();
    eventually(Duration::from_secs(120), "100 available replicas", complete(100)).await;
    eprintln!(
        "deployment 2 ▶ 100 replicas: pods created in {:?}, all available in {:?} (simulated kubelet)",
        created_in,
        started.elapsed()
    );

    // The CronJob's first Job appears at the next whole minute.
    let created = eventually(Duration::from_secs(90), "a job created by the cronjob", || {
        let jobs = jobs.clone();
        let uid = cj.uid().unwrap_or_default();
        async move {
            let owned = owned_by(&jobs, &uid).await;
            owned.into_iter().next()
        }
    })
    .await;
    assert!(created.name_any().starts_with("tick-"));
    eventually(t, "cronjob lastScheduleTime", || {
        let cronjobs = cronjobs.clone();
        async move { cronjobs.get("tick").await.ok()?.status?.last_schedule_time }
    })
    .await;

    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(10), controllers)
        .await
        .expect("controllers return once cancelled")
        .expect("controllers task");
    let _ = kubelet.await;
}
