//! Applying Service rulesets through the real applier (`nft -f -`), as root, inside a private
//! network namespace (the benchmark re-runs itself under `unshare --net`, so the host's own
//! `table ip k1s` is never touched):
//!
//! - full replacement of rulesets with 100 and 1,000 Services of 10 endpoints each;
//! - incremental update of one Service's endpoints on top of them;
//! - network programming latency: from an EndpointSlice change event reaching the proxy's cache
//!   to the rule being in place (the sync loop's nft transaction committed), p50/p99.
//!
//! Prints numbers; asserts no timings. `cargo bench -p k1s-proxy --bench apply`

use k1s_proxy::lb_status::{StatusError, StatusWriter};
use k1s_proxy::render::{render, ClusterState, NodeInfo};
use k1s_proxy::sync::{sync_loop, Debounce, Stores, Syncer};
use k1s_proxy::{Applier, NftCommand};
use k8s_openapi::api::core::v1::{LoadBalancerIngress, Service, ServicePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector;
use kube::runtime::watcher::Event;
use std::sync::Arc;
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "K1S_PROXY_BENCH_IN_NETNS";
const ENDPOINTS: usize = 10;

fn service(i: usize) -> Service {
    let ip = format!("10.43.{}.{}", i / 250, i % 250 + 1);
    Service {
        metadata: ObjectMeta { namespace: Some("bench".into()), name: Some(format!("svc-{i}")), ..Default::default() },
        spec: Some(ServiceSpec {
            cluster_ip: Some(ip.clone()),
            cluster_ips: Some(vec![ip]),
            type_: Some("NodePort".into()),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: 80,
                node_port: Some(30000 + i32::try_from(i).unwrap_or(0)),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    }
}

/// The slice of Service `i`; `generation` shifts the endpoint addresses.
fn slice(i: usize, generation: usize) -> EndpointSlice {
    EndpointSlice {
        metadata: ObjectMeta {
            namespace: Some("bench".into()),
            name: Some(format!("svc-{i}-abcde")),
            labels: Some([("kubernetes.io/service-name".to_string(), format!("svc-{i}"))].into()),
            ..Default::default()
        },
        address_type: "IPv4".into(),
        ports: Some(vec![EndpointPort {
            name: Some("http".into()),
            port: Some(8080),
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        endpoints: (0..ENDPOINTS)
            .map(|e| {
                let n = i * ENDPOINTS + e + generation;
                Endpoint {
                    addresses: vec![format!("10.42.{}.{}", (n / 250) % 250, n % 250 + 2)],
                    conditions: Some(EndpointConditions { ready: Some(true), serving: Some(true), terminating: None }),
                    node_name: Some("node".into()),
                    ..Default::default()
                }
            })
            .collect(),
    }
}

fn node() -> NodeInfo {
    NodeInfo {
        name: "node".into(),
        ips: vec!["192.0.2.2".parse().expect("ip")],
        cluster_cidr: "10.42.0.0/16".parse().expect("cidr"),
        service_cidr: "10.43.0.0/16".parse().expect("cidr"),
    }
}

fn state(n: usize) -> ClusterState {
    ClusterState {
        services: (0..n).map(|i| Arc::new(service(i))).collect(),
        endpoint_slices: (0..n).map(|i| Arc::new(slice(i, 0))).collect(),
        ..Default::default()
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn bench_apply(n: usize) {
    let s = state(n);
    let t = Instant::now();
    let desired = render(&s, &node());
    let render_time = t.elapsed();
    let mut full = Vec::new();
    for _ in 0..5 {
        let mut a = Applier::new(NftCommand::default());
        let t = Instant::now();
        a.apply(&desired).expect("full apply");
        full.push(t.elapsed());
    }
    full.sort();
    let mut applier = Applier::new(NftCommand::default());
    applier.apply(&desired).expect("full apply");
    let mut inc = Vec::new();
    let mut cur = s.clone();
    for round in 1..=40 {
        let i = (round * 7919) % n;
        cur.endpoint_slices[i] = Arc::new(slice(i, round));
        let desired = render(&cur, &node());
        let t = Instant::now();
        applier.apply(&desired).expect("incremental apply");
        inc.push(t.elapsed());
    }
    inc.sort();
    println!(
        "{n:>5} services x {ENDPOINTS} endpoints ({} rules): render {}, full apply p50 {} (min {}, max {}), \
         one-Service incremental apply p50 {} p99 {}",
        desired.rule_count(),
        ms(render_time),
        ms(percentile(&full, 0.5)),
        ms(full[0]),
        ms(full[full.len() - 1]),
        ms(percentile(&inc, 0.5)),
        ms(percentile(&inc, 0.99)),
    );
}

struct NoStatus;

impl StatusWriter for NoStatus {
    async fn set_ingress(&self, _: &str, _: &str, _: Vec<LoadBalancerIngress>) -> Result<(), StatusError> {
        Ok(())
    }
}

/// EndpointSlice event → rule in place, through the sync loop (debounce, render, diff, nft).
async fn bench_programming_latency(n: usize, rounds: usize) {
    let (services, mut ws) = reflector::store::<Service>();
    let (endpoint_slices, mut we) = reflector::store::<EndpointSlice>();
    let (pods, mut wp) = reflector::store();
    let (namespaces, mut wn) = reflector::store();
    let (network_policies, mut wnp) = reflector::store();
    ws.apply_watcher_event(&Event::Init);
    we.apply_watcher_event(&Event::Init);
    for i in 0..n {
        ws.apply_watcher_event(&Event::InitApply(service(i)));
        we.apply_watcher_event(&Event::InitApply(slice(i, 0)));
    }
    ws.apply_watcher_event(&Event::InitDone);
    we.apply_watcher_event(&Event::InitDone);
    wp.apply_watcher_event(&Event::Init);
    wp.apply_watcher_event(&Event::InitDone);
    wn.apply_watcher_event(&Event::Init);
    wn.apply_watcher_event(&Event::InitDone);
    wnp.apply_watcher_event(&Event::Init);
    wnp.apply_watcher_event(&Event::InitDone);
    let stores = Stores { services, endpoint_slices, pods, namespaces, network_policies };
    let syncer = Syncer::new(node(), Applier::new(NftCommand::default()), NoStatus, stores);
    let changes = Arc::new(tokio::sync::Notify::new());
    let (tx, mut rx) = tokio::sync::watch::channel(0u64);
    let cancel = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(sync_loop(syncer, changes.clone(), Debounce::default(), tx, cancel.clone()));
    rx.wait_for(|v| *v >= 1).await.expect("initial sync");
    let mut lat = Vec::new();
    for round in 1..=rounds {
        let i = (round * 7919) % n;
        let seen = *rx.borrow_and_update();
        let t = Instant::now();
        we.apply_watcher_event(&Event::Apply(slice(i, round)));
        changes.notify_one();
        rx.wait_for(|v| *v > seen).await.expect("synced");
        lat.push(t.elapsed());
    }
    cancel.cancel();
    task.await.expect("loop");
    lat.sort();
    println!(
        "{n:>5} services: programming latency (EndpointSlice event -> rule in place) over {rounds} changes: \
         p50 {} p99 {} max {}",
        ms(percentile(&lat, 0.5)),
        ms(percentile(&lat, 0.99)),
        ms(lat[lat.len() - 1]),
    );
}

fn main() {
    let root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false);
    if !root {
        println!("proxy apply benchmark skipped: needs root (nftables in a private network namespace)");
        return;
    }
    if let Some(p) = std::env::var_os("TMP_DUMP") {
        std::fs::write(p, render(&state(1000), &node()).full_script()).expect("dump");
        return;
    }
    if std::env::var_os(CHILD_ENV).is_none() {
        let exe = std::env::current_exe().expect("bench binary");
        let status = std::process::Command::new("unshare")
            .arg("--net")
            .arg(exe)
            .env(CHILD_ENV, "1")
            .status()
            .expect("unshare --net");
        std::process::exit(status.code().unwrap_or(1));
    }
    for n in [100, 1000] {
        bench_apply(n);
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    for n in [100, 1000] {
        rt.block_on(bench_programming_latency(n, 200));
    }
}
