//! Pod start latency through k1s (create a Pod with nodeName ▶ Ready) next to the bare CRI
//! time for the same pod (RunPodSandbox + CreateContainer + StartContainer through pkg/cri),
//! on one node with real containerd: `cargo bench -p k1s --bench pod_start` (root; the local
//! registry and test images are set up by hack/registry.sh and hack/images.sh).
//! `K1S_BENCH_BIN` runs another build's server (to compare two commits).

#[path = "../tests/common/mod.rs"]
mod common;

use futures::StreamExt;
use k1s_cri::v1 as cri;
use k1s_cri::{ImageService, RuntimeService};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use std::collections::HashMap;
use std::time::{Duration, Instant};

const IMAGE: &str = "127.0.0.1:5000/busybox:1.36";

fn pct(v: &mut [Duration], q: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 * q) as usize).min(v.len() - 1)]
}

async fn through_k1s(client: kube::Client, n: usize) -> Vec<Duration> {
    let api: Api<Pod> = Api::namespaced(client, "default");
    let node = Api::<k8s_openapi::api::core::v1::Node>::all(api.clone().into_client())
        .list(&Default::default())
        .await
        .expect("nodes")
        .items[0]
        .metadata
        .name
        .clone()
        .expect("node name");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, Instant)>();
    let w = api.clone();
    tokio::spawn(async move {
        let mut s = watcher(w, watcher::Config::default().labels("bench=pod-start")).boxed();
        while let Some(Ok(ev)) = s.next().await {
            if let watcher::Event::Apply(p) = ev {
                let ready = p
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
                if ready {
                    let _ = tx.send((p.metadata.name.unwrap_or_default(), Instant::now()));
                }
            }
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut out = Vec::new();
    for i in 0..n {
        let name = format!("bench-{i}");
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": {"bench": "pod-start"}},
            "spec": {
                "nodeName": node,
                "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "c", "image": IMAGE, "command": ["sleep", "3600"]}],
            }
        }))
        .expect("pod");
        let t = Instant::now();
        api.create(&PostParams::default(), &pod).await.expect("create pod");
        loop {
            let (n, at) = tokio::time::timeout(Duration::from_secs(60), rx.recv())
                .await
                .expect("pod Ready in time")
                .expect("watch");
            if n == name {
                out.push(at - t);
                break;
            }
        }
    }
    out
}

async fn bare_cri(rt: &k1s_cri::RemoteRuntime, n: usize, cidr_hint: &str) -> Vec<Duration> {
    rt.pull_image(cri::PullImageRequest {
        image: Some(cri::ImageSpec { image: IMAGE.into(), ..Default::default() }),
        ..Default::default()
    })
    .await
    .expect("pull");
    let mut out = Vec::new();
    let mut ids = Vec::new();
    for i in 0..n {
        let uid = format!("bare-cri-{i}-{cidr_hint}");
        let mut labels = HashMap::new();
        labels.insert("bench".to_string(), "bare-cri".to_string());
        let sandbox = cri::PodSandboxConfig {
            metadata: Some(cri::PodSandboxMetadata {
                name: format!("bare-{i}"),
                uid: uid.clone(),
                namespace: "bench".into(),
                attempt: 0,
            }),
            hostname: format!("bare-{i}"),
            log_directory: format!("/tmp/k1s-bench-logs/{uid}"),
            labels: labels.clone(),
            linux: Some(cri::LinuxPodSandboxConfig {
                cgroup_parent: format!("/k1s-bench/pod{uid}"),
                ..Default::default()
            }),
            ..Default::default()
        };
        let t = Instant::now();
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
            labels,
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
        out.push(t.elapsed());
        ids.push(sb);
    }
    for sb in ids {
        let _ = rt.stop_pod_sandbox(cri::StopPodSandboxRequest { pod_sandbox_id: sb.clone() }).await;
        let _ = rt.remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: sb }).await;
    }
    out
}

fn main() {
    let n: usize = std::env::var("K1S_BENCH_PODS").ok().and_then(|v| v.parse().ok()).unwrap_or(30);
    let s = common::Server::start_node();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let (mut k1s, mut bare) = rt.block_on(async {
        let client = k1s_runtime::connect(&s.kubeconfig(), "k1s-bench").await.expect("client");
        // Warm the image cache so both measures start from a present image.
        let cri_rt =
            k1s_cri::RemoteRuntime::connect(&format!("unix://{}", s.containerd_socket().display())).await.expect("cri");
        let bare = bare_cri(&cri_rt, n, "a").await;
        let k1s = through_k1s(client, n).await;
        (k1s, bare)
    });
    let (k50, k99, b50, b99) = (pct(&mut k1s, 0.5), pct(&mut k1s, 0.99), pct(&mut bare, 0.5), pct(&mut bare, 0.99));
    println!("pod start over {n} pods (sequential, image present):");
    println!(
        "  k1s  create ▶ Ready : p50 {:>7.1} ms   p99 {:>7.1} ms",
        k50.as_secs_f64() * 1e3,
        k99.as_secs_f64() * 1e3
    );
    println!(
        "  bare CRI sandbox+create+start : p50 {:>7.1} ms   p99 {:>7.1} ms",
        b50.as_secs_f64() * 1e3,
        b99.as_secs_f64() * 1e3
    );
    println!("  ratio k1s/CRI at p50: {:.2}", k50.as_secs_f64() / b50.as_secs_f64());
}
