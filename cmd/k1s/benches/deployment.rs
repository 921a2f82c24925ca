//! A 100-replica Deployment on one node with real containerd: time from create to all pods
//! bound (scheduler throughput) and to all Ready, next to the bare CRI time for 100 pod
//! starts at the node's parallelism (the kubelet's: two sandbox/container starts per CPU).
//! `cargo bench -p k1s --bench deployment` (root). `K1S_BENCH_PODS` changes the count,
//! `K1S_BENCH_PAR` the bare CRI parallelism, `K1S_BENCH_BARE_ONLY=1` runs only the bare CRI part.

#[path = "../tests/common/mod.rs"]
mod common;

use futures::StreamExt;
use k1s_cri::v1 as cri;
use k1s_cri::{ImageService, RuntimeService};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

const IMAGE: &str = "127.0.0.1:5000/busybox:1.36";

async fn bare_cri(rt: Arc<k1s_cri::RemoteRuntime>, n: usize, parallelism: usize) -> Duration {
    let slots = Arc::new(tokio::sync::Semaphore::new(parallelism.max(1)));
    rt.pull_image(cri::PullImageRequest {
        image: Some(cri::ImageSpec { image: IMAGE.into(), ..Default::default() }),
        ..Default::default()
    })
    .await
    .expect("pull");
    let start = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..n {
        let rt = rt.clone();
        let slots = slots.clone();
        tasks.push(tokio::spawn(async move {
            let _slot = slots.acquire_owned().await.expect("semaphore");
            let uid = format!("bare-deploy-{i}");
            let sandbox = cri::PodSandboxConfig {
                metadata: Some(cri::PodSandboxMetadata {
                    name: format!("bare-{i}"),
                    uid: uid.clone(),
                    namespace: "bench".into(),
                    attempt: 0,
                }),
                hostname: format!("bare-{i}"),
                log_directory: format!("/tmp/k1s-bench-logs/{uid}"),
                linux: Some(cri::LinuxPodSandboxConfig {
                    cgroup_parent: format!("/k1s-bench/pod{uid}"),
                    ..Default::default()
                }),
                ..Default::default()
            };
            let sb = rt
                .run_pod_sandbox(cri::RunPodSandboxRequest {
                    config: Some(sandbox.clone()),
                    runtime_handler: String::new(),
                })
                .await
                .expect("RunPodSandbox")
                .pod_sandbox_id;
            let cfg = cri::ContainerConfig {
                metadata: Some(cri::ContainerMetadata { name: "c".into(), attempt: 0 }),
                image: Some(cri::ImageSpec { image: IMAGE.into(), ..Default::default() }),
                command: vec!["sleep".into(), "3600".into()],
                log_path: "c/0.log".into(),
                ..Default::default()
            };
            let c = rt
                .create_container(cri::CreateContainerRequest {
                    pod_sandbox_id: sb.clone(),
                    config: Some(cfg),
                    sandbox_config: Some(sandbox),
                })
                .await
                .expect("CreateContainer")
                .container_id;
            rt.start_container(cri::StartContainerRequest { container_id: c }).await.expect("StartContainer");
            sb
        }));
    }
    let mut ids = Vec::new();
    for t in tasks {
        ids.push(t.await.expect("join"));
    }
    let took = start.elapsed();
    for sb in ids {
        let _ = rt.stop_pod_sandbox(cri::StopPodSandboxRequest { pod_sandbox_id: sb.clone() }).await;
        let _ = rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: sb }).await;
    }
    took
}

async fn through_k1s(client: kube::Client, n: usize) -> (Duration, Duration, Duration) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Pod>();
    tokio::spawn(async move {
        let mut s = watcher(pods, watcher::Config::default().labels("app=bench100")).boxed();
        while let Some(Ok(ev)) = s.next().await {
            if let watcher::Event::Apply(p) | watcher::Event::InitApply(p) = ev {
                let _ = tx.send(p);
            }
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let d: Deployment = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "bench100"},
        "spec": {
            "replicas": n,
            "selector": {"matchLabels": {"app": "bench100"}},
            "template": {
                "metadata": {"labels": {"app": "bench100"}},
                "spec": {"terminationGracePeriodSeconds": 0, "containers": [{"name": "c", "image": IMAGE, "command": ["sleep", "3600"]}]},
            },
        }
    }))
    .expect("deployment");
    let start = Instant::now();
    Api::<Deployment>::namespaced(client, "default").create(&PostParams::default(), &d).await.expect("create");
    let (mut bound, mut ready) = (HashSet::new(), HashSet::new());
    let (mut first_bound, mut all_bound, mut all_ready) = (None, None, None);
    let mut seen: HashMap<String, ()> = HashMap::new();
    let mut all_created = None;
    while all_ready.is_none() {
        let p = tokio::time::timeout(Duration::from_secs(300), rx.recv()).await.expect("progress").expect("watch");
        let name = p.metadata.name.clone().unwrap_or_default();
        seen.insert(name.clone(), ());
        if seen.len() == n && all_created.is_none() {
            all_created = Some(start.elapsed());
        }
        if p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some() {
            first_bound.get_or_insert_with(|| start.elapsed());
            bound.insert(name.clone());
            if bound.len() == n && all_bound.is_none() {
                all_bound = Some(start.elapsed());
            }
        }
        let is_ready = p
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        if is_ready {
            ready.insert(name);
            if ready.len() == n {
                all_ready = Some(start.elapsed());
            }
        }
    }
    let fb = first_bound.unwrap_or_default();
    println!("  create ▶ all {n} pods exist: {:.2} s", all_created.unwrap_or_default().as_secs_f64());
    (fb, all_bound.unwrap_or_default(), all_ready.unwrap_or_default())
}

fn main() {
    let n: usize = std::env::var("K1S_BENCH_PODS").ok().and_then(|v| v.parse().ok()).unwrap_or(100);
    let s = common::Server::start_node();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let results = rt.block_on(async {
        let cri_rt = Arc::new(
            k1s_cri::RemoteRuntime::connect(&format!("unix://{}", s.containerd_socket().display())).await.expect("cri"),
        );
        let par: usize = std::env::var("K1S_BENCH_PAR")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(k1s_kubelet::default_parallel_starts);
        let bare = bare_cri(cri_rt, n, par).await;
        if std::env::var("K1S_BENCH_BARE_ONLY").is_ok() {
            println!("bare CRI, {n} pods, parallelism {par}: {:.2} s", bare.as_secs_f64());
            return None;
        }
        let client = k1s_runtime::connect(&s.kubeconfig(), "k1s-bench").await.expect("client");
        Some((bare, through_k1s(client, n).await))
    });
    let Some((bare, (first_bound, all_bound, all_ready))) = results else { return };
    if let Ok(path) = std::env::var("K1S_BENCH_SERVER_LOG") {
        let _ = std::fs::write(path, s.logs());
    }
    let binding = all_bound.saturating_sub(first_bound);
    println!("{n}-replica Deployment on one node (image present):");
    println!(
        "  create ▶ all {n} bound : {:>7.2} s  (first bound at {:.2} s; binding {:.0} pods/s)",
        all_bound.as_secs_f64(),
        first_bound.as_secs_f64(),
        n as f64 / binding.as_secs_f64().max(1e-3)
    );
    println!("  create ▶ all {n} Ready : {:>7.2} s", all_ready.as_secs_f64());
    println!("  bare CRI, {n} pod starts at the node's parallelism: {:>7.2} s", bare.as_secs_f64());
    println!("  ratio Ready/bare CRI: {:.2}", all_ready.as_secs_f64() / bare.as_secs_f64());
}
