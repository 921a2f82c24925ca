//! What the API benches share: a `k1s server --disable-agent` of their own on an ephemeral port,
//! 32 clients sending requests over the light HTTP/2 client (`h2client.rs`, which the bench
//! must also declare as `mod h2client`), their latencies and rates, and the server's store
//! counters from `/metrics`.
#![allow(dead_code)]

use crate::h2client::{connect, cpu_time, exchange, tls_config, Conn};
use bytes::Bytes;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Concurrent clients.
pub const CLIENTS: usize = 32;

/// A number from the environment variable `name`, or `default`.
pub fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Client `c`'s part of `total` requests among `clients`: `total` exactly, the first
/// `total % clients` clients sending one more.
pub fn share(total: usize, clients: usize, c: usize) -> usize {
    total / clients + usize::from(c < total % clients)
}

/// The `q` quantile of sorted samples.
pub fn quantile<T: Copy>(sorted: &[T], q: f64) -> T {
    sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)]
}

/// A `k1s server --disable-agent` in a temp dir, killed when dropped.
pub struct BenchServer {
    child: Child,
    pub port: u16,
    pub dir: tempfile::TempDir,
    /// Client TLS configuration with the admin certificate.
    pub tls: Arc<rustls::ClientConfig>,
    /// From the spawn to the kubeconfig being written (the API serves by then).
    pub ready_after: Duration,
}

impl BenchServer {
    /// Starts this build's server (or `K1S_BENCH_BIN`) with `extra` flags.
    pub fn start(extra: &[String]) -> BenchServer {
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
            .args(extra)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn k1s");
        let port: u16 = loop {
            if let Some(p) = std::fs::read_to_string(&kubeconfig).ok().and_then(|kc| {
                kc.lines()
                    .find_map(|l| l.trim().strip_prefix("server: https://127.0.0.1:").map(|p| p.trim().to_string()))
            }) {
                break p.parse().expect("port");
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("k1s server exited with {status} before serving");
            }
            if started.elapsed() > Duration::from_secs(60) {
                let _ = child.kill();
                let _ = child.wait();
                panic!("server did not start within 60 s");
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let ready_after = started.elapsed();
        let tls = Arc::new(tls_config(&dir.path().join("data/server/tls")));
        BenchServer { child, port, dir, tls, ready_after }
    }

    pub fn id(&self) -> u32 {
        self.child.id()
    }

    pub fn pid(&self) -> String {
        self.child.id().to_string()
    }

    /// `n` connections (`K1S_BENCH_CONNS` decides how many the 32 clients share).
    pub async fn connect_n(&self, n: usize) -> Vec<Conn> {
        let mut conns = Vec::new();
        for _ in 0..n {
            conns.push(connect(self.port, self.tls.clone()).await);
        }
        conns
    }
}

impl Drop for BenchServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How many connections the 32 clients share: `K1S_BENCH_CONNS`, 32 by default (1 is how
/// client-go sends: every goroutine's requests as streams of one HTTP/2 connection).
pub fn conns_wanted() -> usize {
    env_num("K1S_BENCH_CONNS", CLIENTS).clamp(1, CLIENTS)
}

/// The store's counters from the server's `/metrics` (or from a store of the bench's own).
#[derive(Clone, Copy, Default)]
pub struct Counters {
    pub writes: u64,
    pub commits: u64,
    pub commit_seconds: f64,
}

pub async fn store_counters(conn: &Conn) -> Counters {
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
pub fn print_batching(what: &str, before: Counters, after: Counters) {
    let commits = after.commits.saturating_sub(before.commits).max(1);
    println!(
        "{what}: {:.1} writes per synced batch, {:.0} µs per batch commit",
        after.writes.saturating_sub(before.writes) as f64 / commits as f64,
        (after.commit_seconds - before.commit_seconds) * 1e6 / commits as f64
    );
}

pub struct Outcome {
    pub elapsed: Duration,
    /// Sorted.
    pub latencies: Vec<Duration>,
    pub server_cpu: Duration,
    pub client_cpu: Duration,
    /// The replies' mean size: for creates, about the size of what the store keeps.
    pub reply_size: usize,
}

impl Outcome {
    pub fn rate(&self) -> f64 {
        self.latencies.len() as f64 / self.elapsed.as_secs_f64()
    }

    pub fn p(&self, q: f64) -> Duration {
        quantile(&self.latencies, q)
    }

    /// CPU per request, in µs.
    pub fn per_request(&self, cpu: Duration) -> f64 {
        cpu.as_secs_f64() * 1e6 / self.latencies.len().max(1) as f64
    }

    pub fn print(&self, what: &str, per: &str) {
        let unit = if per == "create" { "creates/s" } else { "/s" };
        println!(
            "{what}: {} in {:.2}s = {:.0} {unit}  p50={:?} p99={:?}",
            self.latencies.len(),
            self.elapsed.as_secs_f64(),
            self.rate(),
            self.p(0.50),
            self.p(0.99)
        );
        println!(
            "CPU per {per}: server {:.0} µs, bench client {:.0} µs",
            self.per_request(self.server_cpu),
            self.per_request(self.client_cpu)
        );
    }
}

/// Makes request `i` of client `c`: its head and body.
pub type MakeRequest = Arc<dyn Fn(usize, usize) -> (http::Request<()>, Bytes) + Send + Sync>;

/// `total` requests from the 32 clients (tasks of `rt`, spread over `conns`), each waiting
/// for its reply before the next; every reply must have status `want`.
pub fn run(
    rt: &tokio::runtime::Runtime,
    conns: &[Conn],
    server_pid: &str,
    total: usize,
    want: u16,
    request: MakeRequest,
) -> Outcome {
    let cpu_before = (cpu_time(server_pid), cpu_time("self"));
    let (elapsed, mut latencies, reply_bytes) = rt.block_on(async {
        let start = Instant::now();
        let mut tasks = Vec::new();
        for c in 0..CLIENTS {
            let conn = conns[c % conns.len()].clone();
            let request = request.clone();
            tasks.push(tokio::spawn(async move {
                let mut lat = Vec::new();
                let mut bytes = 0;
                for i in 0..share(total, CLIENTS, c) {
                    let (head, body) = request(c, i);
                    let t = Instant::now();
                    let (status, reply) = exchange(&conn, head, body).await;
                    bytes += reply.len();
                    assert_eq!(status, want, "request failed: {}", String::from_utf8_lossy(&reply));
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

/// The benches' ConfigMap: a label and 256 bytes of data.
pub fn configmap(name: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","labels":{{"app":"bench"}}}},"data":{{"key":"{}"}}}}"#,
        "v".repeat(256)
    )
}
