//! What policy admission costs a create: `cargo bench -p k1s --bench admission`.
//!
//! One real `k1s server` (control plane and controllers, no node: the pods are stored, not run) and two namespaces:
//! `plain`, with no policy, and `guarded`, with every built-in policy kind active at once:
//! PodSecurity `enforce`/`warn`/`audit=restricted`, one ResourceQuota (pods and compute
//! requests), one LimitRange (default requests and limits, a maximum) and one
//! ValidatingAdmissionPolicy bound with `Deny`. 32 concurrent clients (by default) create
//! restricted-compliant pods, alternating rounds between the two namespaces in the same run so
//! that the machine's drift falls on both alike, and the bench prints each namespace's p50/p99
//! and the growth.
//! Before measuring, it checks that the policies act (a privileged pod, a pod over the
//! LimitRange's maximum and a pod the VAP refuses are each refused in `guarded`), so the numbers
//! never come from a server that ignores them.
//! Knobs:
//! - `K1S_BENCH_CREATES`: creates per namespace, default 4,000;
//! - `K1S_BENCH_ROUNDS`: rounds per namespace, default 4;
//! - `K1S_BENCH_CLIENTS`: concurrent clients, default 32; with 1, a create's latency is its own
//!   rather than its wait behind the others', and nothing is batched (a quota's charge is one
//!   more store write per create);
//! - `K1S_BENCH_ONLY`: `plain` or `guarded`, that namespace only (to profile the server on it;
//!   no comparison then);
//! - `K1S_BENCH_WITHOUT`: a comma-separated subset of `psa`, `quota`, `limits` and `vap`, the
//!   policies removed from `guarded` once the check that they act has passed, to measure what the
//!   others cost (`limits` needs `quota` too: the quota requires the requests the LimitRange
//!   fills in).
//!
//! Target (issue 18): the p50 grows by under 10%. The server's CPU time per create is printed
//! too, with its growth: on a shared machine it is steadier than the latencies.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/h2client.rs"]
mod h2client;

use h2client::{connect, cpu_time, exchange, post_json, tls_config, Conn};
use std::sync::Arc;
use std::time::{Duration, Instant};

const POLICIES: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: plain}
---
apiVersion: v1
kind: Namespace
metadata:
  name: guarded
  labels:
    bench: guarded
    pod-security.kubernetes.io/enforce: restricted
    pod-security.kubernetes.io/warn: restricted
    pod-security.kubernetes.io/audit: restricted
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: q, namespace: guarded}
spec:
  hard: {pods: "1000000", requests.cpu: "100000", requests.memory: 1000Ti, limits.cpu: "100000"}
---
apiVersion: v1
kind: LimitRange
metadata: {name: limits, namespace: guarded}
spec:
  limits:
  - type: Container
    default: {cpu: 100m, memory: 64Mi}
    defaultRequest: {cpu: 10m, memory: 16Mi}
    max: {cpu: "2"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: no-latest}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}
  validations:
  - expression: "object.spec.containers.all(c, !c.image.endsWith(':latest'))"
    message: images must be pinned
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: no-latest}
spec:
  policyName: no-latest
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels: {bench: guarded}
"#;

/// A restricted-compliant pod (no resources: the LimitRange fills them in `guarded`), or one
/// of the pods the policies must refuse.
fn pod(name: &str, image: &str, privileged: bool, cpu_limit: Option<&str>) -> String {
    let resources = cpu_limit.map(|c| serde_json::json!({"limits": {"cpu": c}})).unwrap_or(serde_json::json!({}));
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "spec": {
            "securityContext": {"runAsNonRoot": true, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "c", "image": image, "resources": resources,
                "securityContext": {
                    "allowPrivilegeEscalation": privileged,
                    "privileged": privileged,
                    "capabilities": {"drop": ["ALL"]}
                }
            }]
        }
    })
    .to_string()
}

const IMAGE: &str = "127.0.0.1:5000/busybox:1.36";

/// The store's current revision (a list's `resourceVersion`): how many writes the server made.
async fn revision(conn: &Conn) -> u64 {
    let head = http::Request::get("https://127.0.0.1/api/v1/namespaces/default/configmaps?limit=1")
        .header("accept", "application/json")
        .body(())
        .expect("request");
    let (status, reply) = exchange(conn, head, bytes::Bytes::new()).await;
    assert_eq!(status, 200, "listing configmaps: {}", String::from_utf8_lossy(&reply));
    let list: serde_json::Value = serde_json::from_slice(&reply).expect("list");
    list["metadata"]["resourceVersion"].as_str().and_then(|v| v.parse().ok()).expect("resourceVersion")
}

async fn create(conn: &Conn, ns: &str, body: String) -> (http::StatusCode, String) {
    let (head, body) = post_json(&format!("/api/v1/namespaces/{ns}/pods"), body);
    let (status, reply) = exchange(conn, head, body).await;
    (status, String::from_utf8_lossy(&reply).into_owned())
}

/// Refuses to measure unless each policy refuses what it must in `guarded`.
async fn check_policies_act(conn: &Conn) {
    let cases = [
        ("PodSecurity", pod("refused-psa", IMAGE, true, None), "violates PodSecurity"),
        ("LimitRange", pod("refused-limits", IMAGE, false, Some("4")), "maximum cpu usage per Container is 2"),
        ("ValidatingAdmissionPolicy", pod("refused-vap", "busybox:latest", false, None), "images must be pinned"),
    ];
    for (what, body, text) in cases {
        let (status, reply) = create(conn, "guarded", body).await;
        assert!(status.is_client_error() && reply.contains(text), "{what} did not refuse: {status} {reply}");
    }
    let (status, reply) = create(conn, "guarded", pod("admitted", IMAGE, false, None)).await;
    assert_eq!(status, 201, "a compliant pod is refused: {reply}");
    assert!(reply.contains("\"requests\""), "the LimitRange's defaults were not applied: {reply}");
}

/// One round: `n` creates into `ns` from the clients, one per connection; the latencies.
async fn round(conns: &[Conn], ns: &'static str, round: usize, n: usize) -> Vec<Duration> {
    let mut tasks = Vec::new();
    let clients = conns.len();
    for (c, conn) in conns.iter().enumerate() {
        let conn = conn.clone();
        let mine = n / clients + usize::from(c < n % clients);
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(mine);
            for i in 0..mine {
                let body = pod(&format!("bench-{round}-{c}-{i}"), IMAGE, false, None);
                let t = Instant::now();
                let (status, reply) = create(&conn, ns, body).await;
                assert_eq!(status, 201, "create in {ns} failed: {reply}");
                lat.push(t.elapsed());
            }
            lat
        }));
    }
    let mut all = Vec::with_capacity(n);
    for t in tasks {
        all.extend(t.await.expect("join"));
    }
    all
}

struct Measured {
    latencies: Vec<Duration>,
    elapsed: Duration,
    server_cpu: Duration,
    /// Store revisions while measuring: the writes each create caused (its own and the
    /// controllers' and the policies').
    writes: u64,
}

impl Measured {
    fn p(&self, q: f64) -> Duration {
        self.latencies[((self.latencies.len() as f64 * q) as usize).min(self.latencies.len() - 1)]
    }

    fn print(&self, what: &str) {
        let n = self.latencies.len();
        println!(
            "{what}: {n} creates, {:.0} creates/s, p50={:?} p99={:?}, server CPU per create {:.0} µs, store writes per create {:.2}",
            n as f64 / self.elapsed.as_secs_f64(),
            self.p(0.50),
            self.p(0.99),
            self.server_cpu.as_secs_f64() * 1e6 / n as f64,
            self.writes as f64 / n as f64
        );
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let server = common::Server::start_controllers();
    server.ok_stdin(&["apply", "-f", "-"], POLICIES);
    let pid = server.pid().to_string();
    let cfg = Arc::new(tls_config(&server.data_dir().join("server/tls")));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
    let conns: Vec<Conn> = rt.block_on(async {
        let mut conns = Vec::new();
        for _ in 0..env_usize("K1S_BENCH_CLIENTS", 32).max(1) {
            conns.push(connect(server.port, cfg.clone()).await);
        }
        conns
    });
    // The policy objects reach the admission plugins through their watches: wait until all act.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ok = rt.block_on(async {
            let (status, reply) = create(&conns[0], "guarded", pod("refused-vap", "busybox:latest", false, None)).await;
            status.is_client_error() && reply.contains("images must be pinned")
        });
        if ok {
            break;
        }
        assert!(Instant::now() < deadline, "the ValidatingAdmissionPolicy never took effect");
        std::thread::sleep(Duration::from_millis(200));
    }
    rt.block_on(check_policies_act(&conns[0]));
    let without = std::env::var("K1S_BENCH_WITHOUT").unwrap_or_default();
    for what in without.split(',').filter(|w| !w.is_empty()) {
        let args: &[&str] = match what {
            "psa" => &[
                "label",
                "namespace",
                "guarded",
                "pod-security.kubernetes.io/enforce-",
                "pod-security.kubernetes.io/warn-",
                "pod-security.kubernetes.io/audit-",
            ],
            "quota" => &["delete", "resourcequota", "q", "-n", "guarded"],
            "limits" => &["delete", "limitrange", "limits", "-n", "guarded"],
            "vap" => &["delete", "validatingadmissionpolicybinding", "no-latest"],
            other => panic!("K1S_BENCH_WITHOUT: unknown policy {other:?} (psa, quota, limits, vap)"),
        };
        server.ok(args);
    }
    if !without.is_empty() {
        // The removals reach the admission plugins through their watches.
        std::thread::sleep(Duration::from_secs(2));
    }

    let per_ns = env_usize("K1S_BENCH_CREATES", 4_000);
    let rounds = env_usize("K1S_BENCH_ROUNDS", 4).max(1);
    let mut plain = Measured { latencies: Vec::new(), elapsed: Duration::ZERO, server_cpu: Duration::ZERO, writes: 0 };
    let mut guarded =
        Measured { latencies: Vec::new(), elapsed: Duration::ZERO, server_cpu: Duration::ZERO, writes: 0 };
    for r in 0..rounds {
        // Alternate which namespace goes first, so neither always follows the other.
        let order = if r % 2 == 0 { [("plain", 0), ("guarded", 1)] } else { [("guarded", 1), ("plain", 0)] };
        // `K1S_BENCH_ONLY=plain|guarded`: one namespace only (to profile the server on it).
        let only = std::env::var("K1S_BENCH_ONLY").ok();
        for (ns, which) in order.into_iter().filter(|(ns, _)| only.as_deref().is_none_or(|o| o == *ns)) {
            let rev = rt.block_on(revision(&conns[0]));
            let cpu = cpu_time(&pid);
            let start = Instant::now();
            let lat = rt.block_on(round(&conns, ns, r, per_ns / rounds));
            let m = if which == 0 { &mut plain } else { &mut guarded };
            m.elapsed += start.elapsed();
            m.server_cpu += cpu_time(&pid) - cpu;
            m.writes += rt.block_on(revision(&conns[0])) - rev;
            m.latencies.extend(lat);
        }
    }
    if plain.latencies.is_empty() || guarded.latencies.is_empty() {
        for (m, what) in [(&mut plain, "plain"), (&mut guarded, "guarded")] {
            if !m.latencies.is_empty() {
                m.latencies.sort();
                m.print(what);
            }
        }
        return;
    }
    plain.latencies.sort();
    guarded.latencies.sort();
    plain.print("no policy (namespace plain)");
    guarded.print("PodSecurity + ResourceQuota + LimitRange + ValidatingAdmissionPolicy (namespace guarded)");
    let growth = |q: f64| 100.0 * (guarded.p(q).as_secs_f64() / plain.p(q).as_secs_f64() - 1.0);
    println!("p50 grows by {:.1}% (target: under 10%), p99 by {:.1}%", growth(0.5), growth(0.99));
    // Server CPU per create hardly depends on what else the machine runs, unlike latency: the
    // steadier measure of what the policies cost on a shared machine.
    let cpu = |m: &Measured| m.server_cpu.as_secs_f64() / m.latencies.len() as f64;
    println!("server CPU per create grows by {:.1}%", 100.0 * (cpu(&guarded) / cpu(&plain) - 1.0));
    if !without.split(',').any(|w| w == "quota") {
        let quota = server.json(&["get", "resourcequota", "q", "-n", "guarded"]);
        println!("quota q: used {}", quota["status"]["used"]);
    }
}
