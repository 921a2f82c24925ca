//! What the audit log costs an RBAC-authorized create: `cargo bench -p k1s --bench authz`.
//!
//! Three real `k1s server`s (API only), alike but for the audit flags: `blocking` and `batch`
//! record every request at `Metadata` (`--audit-policy-file` with one catch-all rule,
//! `--audit-log-path` beside its data dir; both the RequestReceived and ResponseComplete stages
//! are written) with `--audit-log-mode=blocking` (upstream's default) and `=batch`; `plain` has
//! no audit policy. On each, concurrent clients create ConfigMaps as `bench-user`, a user with a
//! client certificate and no group but `system:authenticated`, whose only right is a
//! RoleBinding in namespace `bench`: every create is decided by RBAC (`system:masters` would
//! bypass it). Rounds rotate between the servers in the same run, so that the machine's drift
//! falls on all alike; the bench prints each server's p50/p99 and server CPU per create, and
//! the growth of each audited one over `plain`.
//! Before measuring, it checks that RBAC refuses what the binding does not grant (a Secret) and
//! that the audited servers record the user's create, so the numbers never come from a server
//! that authorizes or audits nothing.
//! Knobs:
//! - `K1S_BENCH_CREATES`: creates per server, default 4,000;
//! - `K1S_BENCH_ROUNDS`: rounds per server, default 4;
//! - `K1S_BENCH_CLIENTS`: concurrent clients (one HTTP/2 connection each), default 32; with 1, a
//!   create's latency is its own rather than its wait behind the others'.
//!
//! Target (issue 32): with the audit log at `Metadata`, the p50 grows by under 10% and the
//! server CPU per create by under 15%. Measured (2026-12-07), an event's encoding costs next to
//! nothing and its two `write(2)`s per request are what cost (the blocking log costs 25-35% of
//! a create's CPU, a log whose writes are skipped 3-9%); batch mode writes what queued up with
//! one system call.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/h2client.rs"]
mod h2client;

use h2client::{connect, cpu_time, exchange, post_json, tls_config_as, Conn};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

const RBAC: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: bench}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: configmap-writer, namespace: bench}
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [create, get, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: bench-user, namespace: bench}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: configmap-writer}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: bench-user}
"#;

const POLICY: &str = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n";

/// A client certificate for `bench-user`, signed by the server's CA, as
/// `client-bench-user.crt/.key` in its TLS folder.
fn issue_user_certificate(tls: &Path) {
    let read = |f: &str| std::fs::read_to_string(tls.join(f)).expect("read CA");
    let ca_key = rcgen::KeyPair::from_pem(&read("server-ca.key")).expect("CA key");
    let issuer = rcgen::Issuer::from_ca_cert_pem(&read("server-ca.crt"), ca_key).expect("CA");
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.distinguished_name.push(rcgen::DnType::CommonName, "bench-user");
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let cert = params.signed_by(&key, &issuer).expect("sign");
    std::fs::write(tls.join("client-bench-user.crt"), cert.pem()).expect("write cert");
    std::fs::write(tls.join("client-bench-user.key"), key.serialize_pem()).expect("write key");
}

fn configmap(name: &str) -> String {
    serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "data": {"greeting": "hello", "colour": "blue"}
    })
    .to_string()
}

async fn create(conn: &Conn, resource: &str, body: String) -> (http::StatusCode, String) {
    let (head, body) = post_json(&format!("/api/v1/namespaces/bench/{resource}"), body);
    let (status, reply) = exchange(conn, head, body).await;
    (status, String::from_utf8_lossy(&reply).into_owned())
}

/// One of the two servers, with its clients.
struct Target {
    what: &'static str,
    server: common::Server,
    conns: Vec<Conn>,
    audit_log: Option<std::path::PathBuf>,
    measured: Measured,
}

impl Target {
    fn start(what: &'static str, rt: &tokio::runtime::Runtime, audit: Option<(&Path, &str)>, clients: usize) -> Target {
        let (server, audit_log) = match audit {
            Some((dir, mode)) => {
                let policy = dir.join("policy.yaml");
                std::fs::write(&policy, POLICY).expect("policy");
                let log = dir.join("audit.log");
                let flags = [
                    format!("--audit-policy-file={}", policy.display()),
                    format!("--audit-log-path={}", log.display()),
                    format!("--audit-log-mode={mode}"),
                ];
                let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
                (common::Server::start_with(&flags), Some(log))
            }
            None => (common::Server::start(), None),
        };
        server.ok_stdin(&["apply", "-f", "-"], RBAC);
        let tls = server.data_dir().join("server/tls");
        issue_user_certificate(&tls);
        let cfg = Arc::new(tls_config_as(&tls, "bench-user"));
        let conns = rt.block_on(async {
            let mut conns = Vec::new();
            for _ in 0..clients {
                conns.push(connect(server.port, cfg.clone()).await);
            }
            conns
        });
        let measured = Measured { latencies: Vec::new(), elapsed: Duration::ZERO, server_cpu: Duration::ZERO };
        Target { what, server, conns, audit_log, measured }
    }

    /// Refuses to measure unless RBAC decides and the audit log (if any) records.
    fn check(&self, rt: &tokio::runtime::Runtime) {
        let secret = serde_json::json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}).to_string();
        // The RoleBinding reaches RBAC's cache through its watch.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (status, reply) = rt.block_on(create(&self.conns[0], "configmaps", configmap("probe")));
            if status == 201 {
                break;
            }
            assert!(Instant::now() < deadline, "{}: bench-user cannot create configmaps: {status} {reply}", self.what);
            std::thread::sleep(Duration::from_millis(200));
        }
        let (status, reply) = rt.block_on(create(&self.conns[0], "secrets", secret));
        assert_eq!(status, 403, "{}: RBAC let bench-user create a secret: {reply}", self.what);
        let message = serde_json::from_str::<serde_json::Value>(&reply).map(|v| v["message"].to_string());
        assert!(message.is_ok_and(|m| m.contains("cannot create resource")), "{reply}");
        if let Some(log) = &self.audit_log {
            // Batch mode writes a moment later.
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let text = std::fs::read_to_string(log).expect("audit log");
                let recorded =
                    text.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()).any(|e| {
                        e["stage"] == "ResponseComplete"
                            && e["verb"] == "create"
                            && e["user"]["username"] == "bench-user"
                            && e["objectRef"]["name"] == "probe"
                            && e["annotations"]["authorization.k8s.io/decision"] == "allow"
                    });
                if recorded {
                    break;
                }
                assert!(Instant::now() < deadline, "{}: the audit log does not record bench-user's create", self.what);
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }

    fn round(&mut self, rt: &tokio::runtime::Runtime, round: usize, n: usize) {
        let pid = self.server.pid().to_string();
        let cpu = cpu_time(&pid);
        let start = Instant::now();
        let mut tasks = Vec::new();
        let clients = self.conns.len();
        for (c, conn) in self.conns.iter().enumerate() {
            let conn = conn.clone();
            let mine = n / clients + usize::from(c < n % clients);
            tasks.push(rt.spawn(async move {
                let mut lat = Vec::with_capacity(mine);
                for i in 0..mine {
                    let t = Instant::now();
                    let (status, reply) =
                        create(&conn, "configmaps", configmap(&format!("bench-{round}-{c}-{i}"))).await;
                    assert_eq!(status, 201, "create failed: {reply}");
                    lat.push(t.elapsed());
                }
                lat
            }));
        }
        let lat: Vec<Duration> = rt.block_on(async {
            let mut all = Vec::with_capacity(n);
            for t in tasks {
                all.extend(t.await.expect("join"));
            }
            all
        });
        self.measured.elapsed += start.elapsed();
        self.measured.server_cpu += cpu_time(&pid) - cpu;
        self.measured.latencies.extend(lat);
    }
}

struct Measured {
    latencies: Vec<Duration>,
    elapsed: Duration,
    server_cpu: Duration,
}

impl Measured {
    fn p(&self, q: f64) -> Duration {
        self.latencies[((self.latencies.len() as f64 * q) as usize).min(self.latencies.len() - 1)]
    }

    fn cpu_per_create(&self) -> f64 {
        self.server_cpu.as_secs_f64() / self.latencies.len() as f64
    }

    fn print(&self, what: &str) {
        let n = self.latencies.len();
        println!(
            "{what}: {n} creates, {:.0} creates/s, p50={:?} p99={:?}, server CPU per create {:.0} µs",
            n as f64 / self.elapsed.as_secs_f64(),
            self.p(0.50),
            self.p(0.99),
            self.cpu_per_create() * 1e6,
        );
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let clients = env_usize("K1S_BENCH_CLIENTS", 32).max(1);
    let per_server = env_usize("K1S_BENCH_CREATES", 4_000);
    let rounds = env_usize("K1S_BENCH_ROUNDS", 4).max(1);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
    let (blocking_dir, batch_dir) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let mut targets = [
        Target::start("plain", &rt, None, clients),
        Target::start("blocking", &rt, Some((blocking_dir.path(), "blocking")), clients),
        Target::start("batch", &rt, Some((batch_dir.path(), "batch")), clients),
    ];
    for t in &targets {
        t.check(&rt);
    }
    let log_size = |dir: &Path| std::fs::metadata(dir.join("audit.log")).map(|m| m.len()).unwrap_or(0);
    let logs_before = [log_size(blocking_dir.path()), log_size(batch_dir.path())];
    for r in 0..rounds {
        // Rotate which server goes first, so none always follows another.
        for i in 0..targets.len() {
            let n = targets.len();
            targets[(r + i) % n].round(&rt, r, per_server / rounds);
        }
    }
    // Batch mode's last events are written a moment after the last reply.
    std::thread::sleep(Duration::from_millis(500));
    let log_bytes = [log_size(blocking_dir.path()) - logs_before[0], log_size(batch_dir.path()) - logs_before[1]];
    for t in &mut targets {
        t.measured.latencies.sort();
    }
    let [plain, blocking, batch] = &targets;
    plain.measured.print(&format!("RBAC, no audit policy ({clients} clients)"));
    for (t, bytes) in [(blocking, log_bytes[0]), (batch, log_bytes[1])] {
        let (p, a) = (&plain.measured, &t.measured);
        a.print(&format!("RBAC + audit log at Metadata, --audit-log-mode={} ({clients} clients)", t.what));
        let growth = |q: f64| 100.0 * (a.p(q).as_secs_f64() / p.p(q).as_secs_f64() - 1.0);
        println!(
            "  {}: p50 grows by {:.1}% (target: under 10%), p99 by {:.1}%; server CPU per create grows by {:.1}% \
             (target: under 15%); audit log: {:.0} bytes per create",
            t.what,
            growth(0.5),
            growth(0.99),
            100.0 * (a.cpu_per_create() / p.cpu_per_create() - 1.0),
            bytes as f64 / a.latencies.len() as f64
        );
    }
}
