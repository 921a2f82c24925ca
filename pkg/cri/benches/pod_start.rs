//! Bare CRI pod start against a real runtime: RunPodSandbox + CreateContainer + StartContainer,
//! one pod after another, with p50/p99 per step and in total; every pod is removed at the end.
//!
//! ```sh
//! K1S_CRI_ENDPOINT=unix:///run/k1s/containerd/containerd.sock \
//! K1S_CRI_BENCH_IMAGE=127.0.0.1:5000/busybox:1.36 K1S_CRI_BENCH_PODS=30 \
//!   cargo bench -p k1s-cri --bench pod_start
//! ```
//!
//! Without `K1S_CRI_ENDPOINT` it prints how to run it and exits successfully. The image is
//! pulled before timing starts, and one warm-up pod (which may pull the sandbox image) is not
//! counted.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k1s_cri::v1::*;
use k1s_cri::{CriError, ImageService, RemoteRuntime, RuntimeService};

const DEFAULT_IMAGE: &str = "127.0.0.1:5000/busybox:1.36";
const DEFAULT_PODS: usize = 30;

struct Timings {
    sandbox: Duration,
    create: Duration,
    start: Duration,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn sandbox_config(run: &str, index: usize, log_directory: &str) -> PodSandboxConfig {
    let name = format!("bench-{index}");
    PodSandboxConfig {
        metadata: Some(PodSandboxMetadata {
            name: name.clone(),
            uid: format!("{run}-{index}"),
            namespace: "k1s-cri-bench".to_string(),
            attempt: 0,
        }),
        hostname: name,
        log_directory: log_directory.to_string(),
        labels: HashMap::from([("k1s.io/cri-bench".to_string(), run.to_string())]),
        linux: Some(LinuxPodSandboxConfig::default()),
        ..Default::default()
    }
}

fn container_config(image: &str) -> ContainerConfig {
    ContainerConfig {
        metadata: Some(ContainerMetadata { name: "app".to_string(), attempt: 0 }),
        image: Some(ImageSpec { image: image.to_string(), ..Default::default() }),
        command: vec!["sleep".to_string(), "3600".to_string()],
        log_path: "app/0.log".to_string(),
        linux: Some(LinuxContainerConfig::default()),
        ..Default::default()
    }
}

/// Starts one pod; the sandbox id is pushed to `created` as soon as it exists.
async fn start_pod(
    cri: &RemoteRuntime,
    config: PodSandboxConfig,
    image: &str,
    created: &mut Vec<String>,
) -> Result<Timings, CriError> {
    let t0 = Instant::now();
    let run = RunPodSandboxRequest { config: Some(config.clone()), runtime_handler: String::new() };
    let sandbox = cri.run_pod_sandbox(run).await?.pod_sandbox_id;
    created.push(sandbox.clone());
    let t1 = Instant::now();
    let create = CreateContainerRequest {
        pod_sandbox_id: sandbox,
        config: Some(container_config(image)),
        sandbox_config: Some(config),
    };
    let container = cri.create_container(create).await?.container_id;
    let t2 = Instant::now();
    cri.start_container(StartContainerRequest { container_id: container }).await?;
    let t3 = Instant::now();
    Ok(Timings { sandbox: t1 - t0, create: t2 - t1, start: t3 - t2 })
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn report(label: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{label:<28} p50 {:>7.1} ms   p99 {:>7.1} ms   min {:>7.1} ms   max {:>7.1} ms",
        ms(percentile(&samples, 50.0)),
        ms(percentile(&samples, 99.0)),
        ms(samples[0]),
        ms(samples[samples.len() - 1]),
    );
}

async fn bench(endpoint: String, image: String, pods: usize) -> Result<(), String> {
    let cri = RemoteRuntime::connect(&endpoint).await.map_err(|e| e.to_string())?;
    let version = cri.version(VersionRequest::default()).await.map_err(|e| e.to_string())?;
    println!("runtime {} {} at {endpoint}; image {image}; {pods} pods", version.runtime_name, version.runtime_version);

    let pull_started = Instant::now();
    let spec = ImageSpec { image: image.clone(), ..Default::default() };
    cri.pull_image(PullImageRequest { image: Some(spec), ..Default::default() }).await.map_err(|e| e.to_string())?;
    println!("PullImage (may be cached)     {:.1} ms", pull_started.elapsed().as_secs_f64() * 1000.0);

    let epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let run = format!("{}-{}", std::process::id(), epoch.as_millis());
    let logs = tempfile::tempdir().map_err(|e| e.to_string())?;
    let log_dir = logs.path().display().to_string();
    let mut created = Vec::new();
    let mut outcome = Ok(());
    let warm_up = start_pod(&cri, sandbox_config(&run, 0, &log_dir), &image, &mut created).await;
    match warm_up {
        Ok(t) => {
            println!("warm-up pod (not counted)     {:.1} ms", (t.sandbox + t.create + t.start).as_secs_f64() * 1000.0)
        }
        Err(err) => outcome = Err(format!("warm-up pod: {err}")),
    }
    let mut timings = Vec::with_capacity(pods);
    for index in 1..=pods {
        if outcome.is_err() {
            break;
        }
        match start_pod(&cri, sandbox_config(&run, index, &log_dir), &image, &mut created).await {
            Ok(t) => timings.push(t),
            Err(err) => outcome = Err(format!("pod {index}: {err}")),
        }
    }

    if !timings.is_empty() {
        report("RunPodSandbox", timings.iter().map(|t| t.sandbox).collect());
        report("CreateContainer", timings.iter().map(|t| t.create).collect());
        report("StartContainer", timings.iter().map(|t| t.start).collect());
        report("pod start (all three)", timings.iter().map(|t| t.sandbox + t.create + t.start).collect());
    }

    let mut removals = Vec::with_capacity(created.len());
    for sandbox in created {
        let started = Instant::now();
        let stop = cri.stop_pod_sandbox(StopPodSandboxRequest { pod_sandbox_id: sandbox.clone() }).await;
        let remove = cri.remove_pod_sandbox(RemovePodSandboxRequest { pod_sandbox_id: sandbox.clone() }).await;
        removals.push(started.elapsed());
        if let Err(err) = stop.and(remove) {
            eprintln!("cleanup of sandbox {sandbox} failed: {err}");
        }
    }
    if !removals.is_empty() {
        report("cleanup (stop + remove pod)", removals);
    }
    outcome
}

fn main() {
    let Some(endpoint) = env("K1S_CRI_ENDPOINT") else {
        println!("pod_start: set K1S_CRI_ENDPOINT=unix:///path/to/containerd.sock (and K1S_CRI_BENCH_IMAGE) to run");
        return;
    };
    let image =
        env("K1S_CRI_BENCH_IMAGE").or_else(|| env("K1S_CRI_TEST_IMAGE")).unwrap_or_else(|| DEFAULT_IMAGE.into());
    let pods = env("K1S_CRI_BENCH_PODS").and_then(|n| n.parse().ok()).filter(|n| *n > 0).unwrap_or(DEFAULT_PODS);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    if let Err(err) = runtime.block_on(bench(endpoint, image, pods)) {
        eprintln!("pod_start failed: {err}");
        std::process::exit(1);
    }
}
