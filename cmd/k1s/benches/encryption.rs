//! What encryption at rest costs a Secret create: `cargo bench -p k1s --bench encryption`.
//!
//! Two `k1s server`s side by side, one storing Secrets as they are and one encrypting them
//! (`--secrets-encryption`: AES-CBC, k3s's default; or `K1S_BENCH_PROVIDER=aesgcm|secretbox`
//! through an `--encryption-provider-config`). 32 concurrent clients create Secrets (256 bytes
//! of data) in alternating rounds on the two, so that the machine's drift falls on both alike;
//! the bench prints each one's p50/p99 and server CPU per create, and the growth.
//! Knobs: `K1S_BENCH_CREATES` (creates per server, default 4,000), `K1S_BENCH_ROUNDS` (rounds
//! per server, default 4), `K1S_BENCH_CONNS` (connections the clients share, default 32).

#[path = "support/apibench.rs"]
mod apibench;
#[path = "support/h2client.rs"]
mod h2client;

use apibench::{conns_wanted, env_num, run, BenchServer, MakeRequest, Outcome, CLIENTS};
use base64::Engine as _;
use h2client::post_json;
use std::sync::Arc;
use std::time::Duration;

fn secret(name: &str) -> String {
    let data = base64::engine::general_purpose::STANDARD.encode("s".repeat(256));
    format!(
        r#"{{"apiVersion":"v1","kind":"Secret","metadata":{{"name":"{name}"}},"type":"Opaque","data":{{"key":"{data}"}}}}"#
    )
}

/// Creates of round `round` (names unique across rounds).
fn creates(round: usize) -> MakeRequest {
    Arc::new(move |client, i| {
        post_json("/api/v1/namespaces/default/secrets", secret(&format!("bench-{round}-{client}-{i}")))
    })
}

/// The flags of the encrypting server.
fn encrypting(dir: &std::path::Path) -> (String, Vec<String>) {
    let provider = std::env::var("K1S_BENCH_PROVIDER").unwrap_or_else(|_| "aescbc".into());
    if provider == "aescbc" {
        return ("aescbc (--secrets-encryption)".into(), vec!["--secrets-encryption".into()]);
    }
    let key = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
    let file = dir.join("encryption.yaml");
    std::fs::write(
        &file,
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n  - resources: [secrets]\n    providers:\n      - {provider}:\n          keys: [{{name: k1, secret: {key}}}]\n      - identity: {{}}\n"
        ),
    )
    .expect("encryption config");
    (provider, vec![format!("--encryption-provider-config={}", file.display())])
}

/// Latencies and CPU of several rounds together.
struct Total {
    latencies: Vec<Duration>,
    server_cpu: Duration,
    elapsed: Duration,
}

impl Total {
    fn add(&mut self, o: Outcome) {
        self.latencies.extend(o.latencies);
        self.server_cpu += o.server_cpu;
        self.elapsed += o.elapsed;
    }

    fn p(&mut self, q: f64) -> Duration {
        self.latencies.sort();
        apibench::quantile(&self.latencies, q)
    }

    fn cpu_us(&self) -> f64 {
        self.server_cpu.as_secs_f64() * 1e6 / self.latencies.len().max(1) as f64
    }
}

fn main() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (provider, flags) = encrypting(tmp.path());
    let plain = BenchServer::start(&[]);
    let sealed = BenchServer::start(&flags);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
    let total = env_num("K1S_BENCH_CREATES", 4_000);
    let rounds = env_num("K1S_BENCH_ROUNDS", 4).max(1);
    let conns = conns_wanted();
    let servers = [(&plain, rt.block_on(plain.connect_n(conns))), (&sealed, rt.block_on(sealed.connect_n(conns)))];
    let mut totals: Vec<Total> =
        (0..2).map(|_| Total { latencies: Vec::new(), server_cpu: Duration::ZERO, elapsed: Duration::ZERO }).collect();
    // A warm-up round each (connections, allocator, the first writes), not counted.
    for (server, c) in &servers {
        run(&rt, c, &server.pid(), CLIENTS * 8, 201, creates(usize::MAX));
    }
    for round in 0..rounds {
        for (i, (server, c)) in servers.iter().enumerate() {
            totals[i].add(run(&rt, c, &server.pid(), total / rounds, 201, creates(round)));
        }
    }
    println!(
        "Secret creates, {CLIENTS} clients on {conns} connections, {rounds} alternating rounds of {} each:",
        total / rounds
    );
    let mut p50 = [Duration::ZERO; 2];
    let mut cpu = [0.0; 2];
    for (i, name) in ["plain (no encryption)".to_string(), format!("encrypted: {provider}")].iter().enumerate() {
        let t = &mut totals[i];
        p50[i] = t.p(0.50);
        cpu[i] = t.cpu_us();
        println!(
            "  {name:<36} {:>6.0} creates/s  p50={:?} p99={:?}  server CPU {:.0} µs/create",
            t.latencies.len() as f64 / t.elapsed.as_secs_f64(),
            p50[i],
            t.p(0.99),
            cpu[i]
        );
    }
    println!(
        "encryption: p50 {:+.1}%, server CPU per create {:+.1}%",
        100.0 * (p50[1].as_secs_f64() / p50[0].as_secs_f64() - 1.0),
        100.0 * (cpu[1] / cpu[0] - 1.0)
    );
}
