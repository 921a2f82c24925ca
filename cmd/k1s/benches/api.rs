//! API create throughput and latency through a real `k1s server`, and its memory after
//! 10,000 ConfigMaps: `cargo bench -p k1s --bench api`.
//!
//! 32 concurrent clients with the admin client certificate, each on its own HTTP/2 connection
//! by default. Three phases on the same connections show where a create's time goes:
//! `GET /version` (TLS, HTTP/2, authentication and routing only), dry-run creates (all of a
//! create but the store write and what follows it), then real creates.
//! Knobs: `K1S_BENCH_CREATES` (requests per phase, default 10,000), `K1S_BENCH_BIN` (another k1s
//! binary), `K1S_BENCH_CONNS` (connections the 32 clients share, default 32; 1 is how client-go
//! sends: every goroutine's requests as streams of one HTTP/2 connection).
//!
//! The load generator is kept light so that the server, not the client, gets the 2 CPUs: the
//! clients are tasks of one thread and speak HTTP/2 with the `h2` crate directly (a request's
//! head and body go out as two frames, with no task spawned per request as hyper's client does
//! for a request body). Its CPU per request is printed next to the server's.
//!
//! Then, with the server stopped, the same number of synced creates by 32 concurrent writers
//! into a store of its own (values the size of the stored ConfigMaps), and the API's rate as a
//! share of that: measured seconds apart on the same machine, so that the VM's changing speed
//! does not skew the comparison as much as two separate benchmark runs would. For both, the
//! writes per synced batch and the mean batch commit (from the server's `/metrics`, and the
//! store's own counters) show how well group commit batched them.

#[path = "support/h2client.rs"]
mod h2client;

use bytes::Bytes;
use h2client::{connect, cpu_time, exchange, post_json, rss_kib, tls_config, Conn};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CLIENTS: usize = 32;
/// Creates to send; `K1S_BENCH_CREATES` overrides it (more gives steadier numbers).
fn total() -> usize {
    std::env::var("K1S_BENCH_CREATES").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000)
}

fn main() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(dir.path().join("config.yaml"), "").expect("config");
    let kubeconfig = dir.path().join("kubeconfig.yaml");
    let started = Instant::now();
    // `K1S_BENCH_BIN` runs another build of the server (to compare two commits).
    let bin = std::env::var("K1S_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_k1s").to_string());
    let mut child = Command::new(bin)
        .args(["server", "--disable-agent", "--https-listen-port=0", "--bind-address=127.0.0.1"])
        .arg(format!("--config={}", dir.path().join("config.yaml").display()))
        .arg(format!("--data-dir={}", dir.path().join("data").display()))
        .arg(format!("--write-kubeconfig={}", kubeconfig.display()))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn k1s");
    let port: u16 = loop {
        if let Some(p) = std::fs::read_to_string(&kubeconfig).ok().and_then(|kc| {
            kc.lines().find_map(|l| l.trim().strip_prefix("server: https://127.0.0.1:").map(|p| p.trim().to_string()))
        }) {
            break p.parse().expect("port");
        }
        assert!(started.elapsed() < Duration::from_secs(60), "server did not start");
        std::thread::sleep(Duration::from_millis(5));
    };
    let ready_after = started.elapsed();
    let idle_rss = rss_kib(child.id());
    let cfg = Arc::new(tls_config(&dir.path().join("data/server/tls")));
    // The clients: tasks of this one thread.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
    let total = total();
    let conns_wanted: usize =
        std::env::var("K1S_BENCH_CONNS").ok().and_then(|v| v.parse().ok()).unwrap_or(CLIENTS).clamp(1, CLIENTS);
    let server_pid = child.id().to_string();
    let conns = rt.block_on(async {
        let mut conns = Vec::new();
        for _ in 0..conns_wanted {
            conns.push(connect(port, cfg.clone()).await);
        }
        conns
    });
    println!("k1s server start to kubeconfig+ready: {:?}; idle RSS {} MiB", ready_after, idle_rss / 1024);
    // What a request costs before any handling (TLS, HTTP/2, authentication, routing), then a
    // create without the store write, then real creates: where the time of a create goes.
    let floor = run(&rt, &conns, &server_pid, total, Phase::Version);
    floor.print(&format!("GET /version (HTTP/2, {CLIENTS} clients on {conns_wanted} connections)"), "request");
    let dry = run(&rt, &conns, &server_pid, total, Phase::DryRunCreate);
    dry.print(&format!("dry-run creates (HTTP/2, {CLIENTS} clients on {conns_wanted} connections)"), "dry-run create");
    let before = rt.block_on(store_counters(&conns[0]));
    let created = run(&rt, &conns, &server_pid, total, Phase::Create);
    let after = rt.block_on(store_counters(&conns[0]));
    created.print(&format!("API creates (HTTP/2, {CLIENTS} clients on {conns_wanted} connections)"), "create");
    print_batching("the API's store", before, after);
    std::thread::sleep(Duration::from_millis(500));
    let rss = rss_kib(child.id());
    println!("server RSS after {} ConfigMaps: {} MiB", created.latencies.len(), rss / 1024);
    let _ = child.kill();
    let _ = child.wait();
    let store_rate = store_alone(total, created.reply_size);
    println!(
        "API creates/s are {:.0}% of the store's synced creates/s at {CLIENTS} concurrent writers ({:.0}/s for the store alone)",
        100.0 * created.rate() / store_rate,
        store_rate
    );
}

/// Client `c`'s part of `total` requests: `total` exactly, the first `total % CLIENTS` clients
/// sending one more.
fn share(total: usize, c: usize) -> usize {
    total / CLIENTS + usize::from(c < total % CLIENTS)
}

/// Synced creates per second by `CLIENTS` concurrent writers into a fresh store, with values
/// of `size` bytes: tasks of a multi-threaded runtime, as in `cargo bench -p k1s-store`.
fn store_alone(total: usize, size: usize) -> f64 {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("rt");
    let dir = tempfile::tempdir().expect("tmp");
    let store = k1s_store::Store::open(dir.path(), k1s_store::StoreOptions::default()).expect("open store");
    let value = Bytes::from(vec![b'x'; size.max(1)]);
    let before = store.stats();
    let start = Instant::now();
    rt.block_on(async {
        let mut tasks = Vec::new();
        for c in 0..CLIENTS {
            let (store, value) = (store.clone(), value.clone());
            tasks.push(tokio::spawn(async move {
                for i in 0..share(total, c) {
                    store
                        .create(&format!("/registry/configmaps/default/bench-{c}-{i}"), value.clone())
                        .await
                        .expect("create");
                }
            }));
        }
        for t in tasks {
            t.await.expect("join");
        }
    });
    let rate = total as f64 / start.elapsed().as_secs_f64();
    let after = store.stats();
    print_batching(
        "the store alone",
        Counters { writes: before.writes, commits: before.batches, commit_seconds: before.commit_seconds },
        Counters { writes: after.writes, commits: after.batches, commit_seconds: after.commit_seconds },
    );
    rate
}

/// The store's counters from the server's `/metrics` (or from a store of the bench's own).
#[derive(Clone, Copy, Default)]
struct Counters {
    writes: u64,
    commits: u64,
    commit_seconds: f64,
}

async fn store_counters(conn: &Conn) -> Counters {
    let head = http::Request::get("https://127.0.0.1/metrics").body(()).expect("request");
    let (_, text) = exchange(conn, head, Bytes::new()).await;
    let text = String::from_utf8_lossy(&text);
    let value = |name: &str| {
        text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse::<f64>().ok()).unwrap_or(0.0)
    };
    Counters {
        writes: value("k1s_store_writes_total") as u64,
        commits: value("k1s_store_commits_total") as u64,
        commit_seconds: value("k1s_store_commit_duration_seconds_sum"),
    }
}

/// Writes per synced batch and the mean batch commit (WAL write and fsync) between two readings.
fn print_batching(what: &str, before: Counters, after: Counters) {
    let commits = after.commits.saturating_sub(before.commits).max(1);
    println!(
        "{what}: {:.1} writes per synced batch, {:.0} µs per batch commit",
        after.writes.saturating_sub(before.writes) as f64 / commits as f64,
        (after.commit_seconds - before.commit_seconds) * 1e6 / commits as f64
    );
}

#[derive(Clone, Copy, PartialEq)]
enum Phase {
    Version,
    DryRunCreate,
    Create,
}

struct Outcome {
    elapsed: Duration,
    /// Sorted.
    latencies: Vec<Duration>,
    server_cpu: Duration,
    client_cpu: Duration,
    /// The replies' mean size: for creates, about the size of what the store keeps.
    reply_size: usize,
}

impl Outcome {
    fn rate(&self) -> f64 {
        self.latencies.len() as f64 / self.elapsed.as_secs_f64()
    }

    fn print(&self, what: &str, per: &str) {
        let lat = &self.latencies;
        let p = |q: f64| lat[((lat.len() as f64 * q) as usize).min(lat.len() - 1)];
        let unit = if per == "create" { "creates/s" } else { "/s" };
        println!(
            "{what}: {} in {:.2}s = {:.0} {unit}  p50={:?} p99={:?}",
            lat.len(),
            self.elapsed.as_secs_f64(),
            self.rate(),
            p(0.50),
            p(0.99)
        );
        let us = |d: Duration| d.as_secs_f64() * 1e6 / lat.len() as f64;
        println!("CPU per {per}: server {:.0} µs, bench client {:.0} µs", us(self.server_cpu), us(self.client_cpu));
    }
}

/// `total` requests of one kind from the 32 clients, each waiting for its reply before the next.
fn run(rt: &tokio::runtime::Runtime, conns: &[Conn], server_pid: &str, total: usize, phase: Phase) -> Outcome {
    let cpu_before = (cpu_time(server_pid), cpu_time("self"));
    let (elapsed, mut latencies, reply_bytes) = rt.block_on(async {
        let start = Instant::now();
        let mut tasks = Vec::new();
        for c in 0..CLIENTS {
            let conn = conns[c % conns.len()].clone();
            tasks.push(tokio::spawn(async move {
                let mut lat = Vec::new();
                let mut bytes = 0;
                for i in 0..share(total, c) {
                    let (head, body) = request(phase, c, i);
                    let t = Instant::now();
                    let (status, reply) = exchange(&conn, head, body).await;
                    bytes += reply.len();
                    let want = if phase == Phase::Version { 200 } else { 201 };
                    assert_eq!(status, want, "request failed");
                    lat.push(t.elapsed());
                }
                (lat, bytes)
            }));
        }
        let (mut all, mut bytes) = (Vec::new(), 0);
        for t in tasks {
            let (lat, b) = t.await.expect("join");
            all.extend(lat);
            bytes += b;
        }
        (start.elapsed(), all, bytes)
    });
    latencies.sort();
    Outcome {
        elapsed,
        latencies,
        server_cpu: cpu_time(server_pid) - cpu_before.0,
        client_cpu: cpu_time("self") - cpu_before.1,
        reply_size: reply_bytes / total.max(1),
    }
}

/// A request's head and body.
fn request(phase: Phase, client: usize, i: usize) -> (http::Request<()>, Bytes) {
    if phase == Phase::Version {
        let head = http::Request::get("https://127.0.0.1/version").header("accept", "application/json");
        return (head.body(()).expect("request"), Bytes::new());
    }
    let body = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"bench-{client}-{i}","labels":{{"app":"bench"}}}},"data":{{"key":"{}"}}}}"#,
        "v".repeat(256)
    );
    let path = match phase {
        Phase::DryRunCreate => "/api/v1/namespaces/default/configmaps?dryRun=All",
        _ => "/api/v1/namespaces/default/configmaps",
    };
    post_json(path, body)
}
