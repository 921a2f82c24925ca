//! End to end with stock kubectl and real containerd: pods run, probe, restart, fail, mount
//! their volumes and go away cleanly (issue 3).

#[path = "../cmd/k1s/tests/common/mod.rs"]
mod common;

use common::{eventually, Server};
use serde_json::Value;
use std::time::Duration;

const IMAGE: &str = "127.0.0.1:5000/busybox:1.36";

fn pod(s: &Server, name: &str) -> Value {
    s.json(&["get", "pod", name])
}

fn container_status(p: &Value) -> Value {
    p["status"]["containerStatuses"][0].clone()
}

fn condition(p: &Value, t: &str) -> String {
    p["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == t))
        .and_then(|c| c["status"].as_str())
        .unwrap_or("")
        .to_string()
}

fn wait_pod(s: &Server, name: &str, what: &str, secs: u64, f: impl Fn(&Value) -> bool) -> Value {
    eventually(Duration::from_secs(secs), what, || {
        let out = s.kubectl(&["get", "pod", name, "-o", "json"]);
        let p: Value = serde_json::from_slice(&out.stdout).ok()?;
        f(&p).then_some(p)
    })
}

#[test]
fn pod_goes_pending_running_then_ready_after_its_readiness_probe() {
    let s = Server::start_node();
    // Watch from before the create so every phase is seen.
    let mut watch = s
        .kubectl_cmd(&["get", "--raw", "/api/v1/namespaces/default/pods?watch=true&fieldSelector=metadata.name%3Dweb"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("watch");
    std::thread::sleep(Duration::from_millis(500));
    let manifest = format!(
        r#"
apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  nodeName: {node}
  containers:
  - name: web
    image: {IMAGE}
    command: ["sh", "-c", "sleep 3; mkdir -p /www; echo hello > /www/index.html; exec httpd -f -p 8080 -h /www"]
    readinessProbe:
      httpGet: {{path: /, port: 8080}}
      periodSeconds: 1
"#,
        node = s.ok(&["get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"])
    );
    s.ok_stdin(&["apply", "-f", "-"], &manifest);
    let ready = wait_pod(&s, "web", "pod web Ready", 60, |p| condition(p, "Ready") == "True");
    assert_eq!(ready["status"]["phase"], "Running");
    let _ = watch.kill();
    let out = watch.wait_with_output().expect("watch output");
    let states: Vec<(String, bool)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|e| {
            let p = &e["object"];
            (p["status"]["phase"].as_str().unwrap_or("").to_string(), condition(p, "Ready") == "True")
        })
        .collect();
    let first_running = states.iter().position(|(ph, _)| ph == "Running").expect("saw Running");
    assert_eq!(states[0].0, "Pending", "{states:?}");
    assert!(!states[first_running].1, "Running must come before Ready: {states:?}");
    assert!(states.iter().any(|(ph, r)| ph == "Running" && *r), "{states:?}");
    let events =
        s.ok(&["get", "events", "--field-selector=involvedObject.name=web", "-o", "jsonpath={.items[*].reason}"]);
    for r in ["Pulled", "Created", "Started"] {
        assert!(events.contains(r), "missing {r} event: {events}");
    }
}

#[test]
fn liveness_failure_restarts_and_crashes_back_off_and_missing_images_back_off() {
    let s = Server::start_node();
    let manifest = format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: unhealthy}}
spec:
  containers:
  - name: c
    image: {IMAGE}
    command: ["sh", "-c", "touch /tmp/healthy; sleep 2; rm /tmp/healthy; sleep 3600"]
    livenessProbe:
      exec: {{command: ["cat", "/tmp/healthy"]}}
      periodSeconds: 1
      failureThreshold: 1
---
apiVersion: v1
kind: Pod
metadata: {{name: crasher}}
spec:
  containers:
  - name: c
    image: {IMAGE}
    command: ["sh", "-c", "echo bye; exit 1"]
---
apiVersion: v1
kind: Pod
metadata: {{name: noimage}}
spec:
  containers:
  - name: c
    image: 127.0.0.1:5000/does-not-exist:1.0
"#
    );
    s.ok_stdin(&["apply", "-f", "-"], &manifest);
    let p = wait_pod(&s, "unhealthy", "a liveness restart", 90, |p| {
        container_status(p)["restartCount"].as_i64().unwrap_or(0) >= 1
    });
    assert_eq!(container_status(&p)["lastState"]["terminated"]["exitCode"], 137, "{p}");
    let p = wait_pod(&s, "crasher", "CrashLoopBackOff", 90, |p| {
        container_status(p)["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    });
    assert!(container_status(&p)["restartCount"].as_i64().unwrap_or(0) >= 1);
    assert_eq!(container_status(&p)["lastState"]["terminated"]["exitCode"], 1);
    let reason = |p: &Value| container_status(p)["state"]["waiting"]["reason"].as_str().unwrap_or("").to_string();
    wait_pod(&s, "noimage", "ErrImagePull", 60, |p| reason(p) == "ErrImagePull" || reason(p) == "ImagePullBackOff");
    wait_pod(&s, "noimage", "ImagePullBackOff", 60, |p| reason(p) == "ImagePullBackOff");
    // The crasher is Running for an instant after each back-off ends, and the table is a
    // snapshot: look until kubectl shows both back-offs in one table.
    let shows_backoffs = |table: &str| {
        table.lines().any(|l| l.starts_with("crasher") && l.contains("CrashLoopBackOff"))
            && table
                .lines()
                .any(|l| l.starts_with("noimage") && (l.contains("ImagePullBackOff") || l.contains("ErrImagePull")))
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let table = s.ok(&["get", "pods"]);
        if shows_backoffs(&table) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "kubectl never showed both back-offs:\n{table}");
        std::thread::sleep(Duration::from_millis(500));
    }
    let events = s.ok(&["get", "events", "-o", "jsonpath={range .items[*]}{.reason}{\"\\n\"}{end}"]);
    assert!(
        events.lines().any(|l| l == "Unhealthy")
            && events.lines().any(|l| l == "Killing")
            && events.lines().any(|l| l == "BackOff"),
        "{events}"
    );
}

#[test]
fn memory_limit_breach_is_oom_killed() {
    let s = Server::start_node();
    let manifest = format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: hog}}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: {IMAGE}
    command: ["sh", "-c", "head -c 200m /dev/zero | tail -c 150m > /dev/null"]
    resources:
      limits: {{memory: 32Mi}}
"#
    );
    s.ok_stdin(&["apply", "-f", "-"], &manifest);
    let p = wait_pod(&s, "hog", "the pod to fail", 90, |p| p["status"]["phase"] == "Failed");
    assert_eq!(container_status(&p)["state"]["terminated"]["reason"], "OOMKilled", "{p}");
}

#[test]
fn config_map_and_secret_reach_volumes_and_env() {
    let s = Server::start_node();
    s.ok(&["create", "configmap", "cfg", "--from-literal=greeting=hello"]);
    s.ok(&["create", "secret", "generic", "sec", "--from-literal=password=s3cret"]);
    let manifest = format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: reader}}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: {IMAGE}
    command: ["sh", "-c", "echo \"$(cat /etc/cfg/greeting) $(cat /etc/sec/password) $GREETING $PASSWORD $POD_NAME\" > /dev/termination-log"]
    env:
    - name: GREETING
      valueFrom: {{configMapKeyRef: {{name: cfg, key: greeting}}}}
    - name: PASSWORD
      valueFrom: {{secretKeyRef: {{name: sec, key: password}}}}
    - name: POD_NAME
      valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}
    volumeMounts:
    - {{name: cfg, mountPath: /etc/cfg}}
    - {{name: sec, mountPath: /etc/sec, readOnly: true}}
  volumes:
  - name: cfg
    configMap: {{name: cfg}}
  - name: sec
    secret: {{secretName: sec}}
"#
    );
    s.ok_stdin(&["apply", "-f", "-"], &manifest);
    let p = wait_pod(&s, "reader", "the pod to finish", 60, |p| p["status"]["phase"] == "Succeeded");
    assert_eq!(
        container_status(&p)["state"]["terminated"]["message"].as_str().map(str::trim),
        Some("hello s3cret hello s3cret reader")
    );
}

#[test]
fn deleting_a_pod_runs_pre_stop_and_removes_sandbox_containers_and_cgroup() {
    let s = Server::start_node();
    let marker_dir = s.dir.path().join("prestop");
    std::fs::create_dir_all(&marker_dir).expect("marker dir");
    let manifest = format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: graceful}}
spec:
  terminationGracePeriodSeconds: 10
  containers:
  - name: c
    image: {IMAGE}
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
    lifecycle:
      preStop:
        exec: {{command: ["sh", "-c", "echo stopped > /out/prestop"]}}
    volumeMounts: [{{name: out, mountPath: /out}}]
  volumes:
  - name: out
    hostPath: {{path: {dir}, type: Directory}}
"#,
        dir = marker_dir.display()
    );
    s.ok_stdin(&["apply", "-f", "-"], &manifest);
    let p = wait_pod(&s, "graceful", "Running", 60, |p| p["status"]["phase"] == "Running");
    let uid = p["metadata"]["uid"].as_str().expect("uid").to_string();
    let cid = container_status(&p)["containerID"]
        .as_str()
        .expect("containerID")
        .trim_start_matches("containerd://")
        .to_string();
    s.ok(&["delete", "pod", "graceful", "--wait=true", "--timeout=60s"]);
    let marker = std::fs::read_to_string(marker_dir.join("prestop")).unwrap_or_else(|e| {
        panic!(
            "preStop did not run ({e}); events:\n{}\nserver log:\n{}",
            s.ok(&["get", "events"]),
            common::tail(&s.logs(), 40)
        )
    });
    assert_eq!(marker.trim(), "stopped");
    let cg = format!("/sys/fs/cgroup/memory/k1s/pod{uid}");
    eventually(Duration::from_secs(20), "the pod cgroup to go", || (!std::path::Path::new(&cg).exists()).then_some(()));
    let ctr = |what: &str| {
        let out = std::process::Command::new("ctr")
            .args(["--address", &s.containerd_socket().display().to_string(), "-n", "k8s.io", what, "ls", "-q"])
            .output()
            .expect("ctr");
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    assert!(!ctr("containers").contains(&cid), "container {cid} still exists");
    let left = std::process::Command::new("ctr")
        .args(["--address", &s.containerd_socket().display().to_string(), "-n", "k8s.io", "containers", "ls"])
        .output()
        .expect("ctr");
    let text = String::from_utf8_lossy(&left.stdout).to_string();
    assert_eq!(text.lines().count(), 1, "no containers or sandboxes should remain:\n{text}");
}

#[test]
fn a_deleted_pod_reports_its_containers_terminated_and_not_ready_before_it_goes() {
    let s = Server::start_node();
    s.ok_stdin(
        &["apply", "-f", "-"],
        &format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: ending}}
spec:
  terminationGracePeriodSeconds: 10
  containers:
  - name: c
    image: {IMAGE}
    command: ["sh", "-c", "trap 'exit 3' TERM; while true; do sleep 1; done"]
"#
        ),
    );
    let p = wait_pod(&s, "ending", "Ready", 60, |p| condition(p, "Ready") == "True");
    let rv = p["metadata"]["resourceVersion"].as_str().expect("rv").to_string();
    let mut watch = s
        .kubectl_cmd(&[
            "get",
            "--raw",
            &format!(
                "/api/v1/namespaces/default/pods?watch=true&fieldSelector=metadata.name%3Dending&resourceVersion={rv}"
            ),
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("watch");
    // What kr8s's pod.wait("condition=Ready=False") and CI tools do.
    let waiter = s
        .kubectl_cmd(&["wait", "--for=condition=Ready=false", "pod/ending", "--timeout=60s"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl wait");
    std::thread::sleep(Duration::from_millis(500));
    s.ok(&["delete", "pod", "ending", "--wait=true", "--timeout=60s"]);
    let waited = waiter.wait_with_output().expect("wait output");
    assert!(
        waited.status.success(),
        "kubectl wait --for=condition=Ready=false: {}{}",
        String::from_utf8_lossy(&waited.stdout),
        String::from_utf8_lossy(&waited.stderr)
    );
    let _ = watch.kill();
    let out = watch.wait_with_output().expect("watch output");
    let events: Vec<Value> =
        String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let deleted = events.iter().position(|e| e["type"] == "DELETED").expect("a DELETED event");
    let last = &events[deleted - 1];
    assert_eq!(last["type"], "MODIFIED");
    let p = &last["object"];
    assert_eq!(condition(p, "Ready"), "False", "{p}");
    let state = &container_status(p)["state"];
    assert_eq!(state["terminated"]["exitCode"], 3, "the exit code is reported: {p}");
    assert_eq!(p["status"]["phase"], "Failed", "{p}");
    // The status describes the generation the delete made.
    assert_eq!(p["status"]["observedGeneration"], p["metadata"]["generation"], "{p}");
}

#[test]
fn kubectl_wait_for_pod_scheduled_returns_and_a_scheduled_pod_keeps_generation_1() {
    let s = Server::start_node();
    s.ok_stdin(
        &["apply", "-f", "-"],
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: sched}}\nspec:\n  containers:\n  - {{name: c, image: {IMAGE}, command: [sleep, '3600']}}\n"
        ),
    );
    let out = s.ok(&["wait", "--for=condition=PodScheduled", "pod/sched", "--timeout=30s"]);
    assert!(out.contains("condition met"), "{out}");
    let p = wait_pod(&s, "sched", "Ready", 60, |p| condition(p, "Ready") == "True");
    assert_eq!(p["metadata"]["generation"], 1, "binding and status writes do not bump the generation: {p}");
    for c in p["status"]["conditions"].as_array().expect("conditions") {
        assert_eq!(c["observedGeneration"], 1, "{c}");
    }
    s.ok(&["wait", "--for=condition=Ready", "pod/sched", "--timeout=10s"]);
}

/// A client certificate for `cn` signed by the cluster CA, written next to the server's files:
/// (certificate path, key path).
fn user_certificate(s: &Server, cn: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let tls = s.data_dir().join("server").join("tls");
    let ca_pem = std::fs::read_to_string(tls.join("server-ca.crt")).expect("CA");
    let ca_key = rcgen::KeyPair::from_pem(&std::fs::read_to_string(tls.join("server-ca.key")).expect("CA key"))
        .expect("CA key pem");
    let issuer = rcgen::Issuer::from_ca_cert_pem(&ca_pem, ca_key).expect("issuer");
    let mut p = rcgen::CertificateParams::default();
    p.distinguished_name.push(rcgen::DnType::CommonName, cn);
    p.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = p.signed_by(&key, &issuer).expect("sign");
    let (crt, keyf) = (s.dir.path().join(format!("{cn}.crt")), s.dir.path().join(format!("{cn}.key")));
    std::fs::write(&crt, cert.pem()).expect("write cert");
    std::fs::write(&keyf, key.serialize_pem()).expect("write key");
    (crt, keyf)
}

/// `curl` against the kubelet's port: (status, body).
fn kubelet_get(port: &str, path: &str, auth: &[&str]) -> (u16, String) {
    let out = std::process::Command::new("curl")
        .args(["-sS", "-k", "-o", "-", "-w", "\n%{http_code}"])
        .args(auth)
        .arg(format!("https://127.0.0.1:{port}{path}"))
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

#[test]
fn the_kubelets_api_refuses_anonymous_callers_and_lets_the_api_server_authorize_the_others() {
    let s = Server::start_node();
    s.ok(&["run", "talker", &format!("--image={IMAGE}"), "--", "sh", "-c", "echo said-hello; sleep 3600"]);
    wait_pod(&s, "talker", "Running", 60, |p| p["status"]["phase"] == "Running");
    let port = s.ok(&["get", "nodes", "-o", "jsonpath={.items[0].status.daemonEndpoints.kubeletEndpoint.Port}"]);
    let logs = "/containerLogs/default/talker/talker";
    // Anonymous: 401, whatever the path.
    for path in ["/pods", logs, "/healthz", "/metrics/resource"] {
        assert_eq!(kubelet_get(&port, path, &[]).0, 401, "{path}");
    }
    // A user the cluster CA vouches for but RBAC does not allow: 403, directly and through the API.
    let (crt, key) = user_certificate(&s, "bob");
    let cert_args = ["--cert", crt.to_str().expect("path"), "--key", key.to_str().expect("path")];
    let (code, body) = kubelet_get(&port, logs, &cert_args);
    assert_eq!((code, body.trim()), (403, "Forbidden (user=bob, verb=get, resource=nodes, subresource=proxy)"));
    let admin = std::fs::read_to_string(s.kubeconfig()).expect("kubeconfig");
    let line = |key: &str| {
        admin.lines().find_map(|l| l.trim().strip_prefix(key)).map(str::trim).expect("kubeconfig field").to_string()
    };
    let kubeconfig = s.dir.path().join("bob.kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: k1s\n  cluster:\n    server: {}\n    certificate-authority-data: {}\nusers:\n- name: bob\n  user:\n    client-certificate: {}\n    client-key: {}\ncontexts:\n- name: bob\n  context: {{cluster: k1s, user: bob}}\ncurrent-context: bob\n",
            line("server:"),
            line("certificate-authority-data:"),
            crt.display(),
            key.display()
        ),
    )
    .expect("write");
    let out = s.kubectl_cmd(&["logs", "talker"]).env("KUBECONFIG", &kubeconfig).output().expect("kubectl logs as bob");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("Forbidden"), "{err}");
    // A ServiceAccount token, reviewed by the API server, for a role with nodes/proxy: allowed.
    s.ok(&["create", "serviceaccount", "reader"]);
    s.ok(&["create", "clusterrole", "node-reader", "--verb=get", "--resource=nodes/proxy"]);
    s.ok(&[
        "create",
        "clusterrolebinding",
        "node-reader",
        "--clusterrole=node-reader",
        "--serviceaccount=default:reader",
    ]);
    let token = s.ok(&["create", "token", "reader"]);
    let bearer = format!("Authorization: Bearer {}", token.trim());
    let (code, body) = eventually(Duration::from_secs(20), "the token to be allowed", || {
        let r = kubelet_get(&port, logs, &["-H", &bearer]);
        (r.0 == 200).then_some(r)
    });
    assert_eq!((code, body.trim()), (200, "said-hello"));
    let (code, _) = kubelet_get(&port, logs, &["-H", "Authorization: Bearer not-a-token"]);
    assert_eq!(code, 401);
    // The API server's own calls still work: kubectl logs as the admin.
    assert_eq!(s.ok(&["logs", "talker"]).trim(), "said-hello");
}

#[test]
fn restarting_k1s_keeps_running_containers_and_restart_counts() {
    let mut s = Server::start_node();
    let manifest = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: survivor}}\nspec:\n  containers:\n  - name: c\n    image: {IMAGE}\n    command: [\"sleep\", \"3600\"]\n"
    );
    s.ok_stdin(&["apply", "-f", "-"], &manifest);
    let before = wait_pod(&s, "survivor", "Running", 60, |p| p["status"]["phase"] == "Running");
    let cid = container_status(&before)["containerID"].clone();
    s.restart();
    eventually(Duration::from_secs(60), "the node Ready again", || {
        let out =
            s.kubectl(&["get", "nodes", "-o", "jsonpath={.items[0].status.conditions[?(@.type==\"Ready\")].status}"]);
        (String::from_utf8_lossy(&out.stdout).trim() == "True").then_some(())
    });
    // Give the kubelet a few sync rounds to (not) touch the container.
    std::thread::sleep(Duration::from_secs(5));
    let after = pod(&s, "survivor");
    assert_eq!(container_status(&after)["containerID"], cid);
    assert_eq!(container_status(&after)["restartCount"], 0);
    assert_eq!(after["status"]["phase"], "Running");
    assert_eq!(condition(&after, "Ready"), "True");
}

/// The containerd this node's server supervises (its command line names the test's folder).
fn containerd_pid(s: &Server) -> Option<u32> {
    let dir = s.dir.path().display().to_string();
    std::fs::read_dir("/proc").ok()?.filter_map(Result::ok).find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
        let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
        (comm.trim() == "containerd" && String::from_utf8_lossy(&cmdline).contains(&dir)).then_some(pid)
    })
}

/// Issue 34: containerd killed with SIGKILL under running pods is restarted by k1s; the pods'
/// containers keep their IDs and restart counts, the node is Ready again within 10 s of
/// containerd's return, and a pod created during the outage runs.
#[test]
fn containerd_killed_under_running_pods_is_restarted_and_the_pods_keep_their_containers() {
    let s = Server::start_node();
    let manifest: String = (0..3)
        .map(|i| {
            format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: keep-{i}}}\nspec:\n  containers:\n  - name: c\n    image: {IMAGE}\n    command: [\"sleep\", \"3600\"]\n---\n"
            )
        })
        .collect();
    s.ok_stdin(&["apply", "-f", "-"], &manifest);
    let before: Vec<Value> = (0..3)
        .map(|i| wait_pod(&s, &format!("keep-{i}"), "Running", 90, |p| condition(p, "Ready") == "True"))
        .collect();
    let old = containerd_pid(&s).expect("the supervised containerd");
    let status = std::process::Command::new("kill").args(["-9", &old.to_string()]).status().expect("kill");
    assert!(status.success());
    // A pod created while containerd is down (or coming back).
    s.ok_stdin(
        &["apply", "-f", "-"],
        &format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: during}}\nspec:\n  containers:\n  - name: c\n    image: {IMAGE}\n    command: [\"sleep\", \"3600\"]\n"),
    );
    let new = eventually(Duration::from_secs(60), "containerd restarted", || {
        containerd_pid(&s)
            .filter(|p| *p != old)
            .filter(|_| std::os::unix::net::UnixStream::connect(s.containerd_socket()).is_ok())
    });
    let back = std::time::Instant::now();
    s.wait_node_ready();
    assert!(back.elapsed() < Duration::from_secs(10), "the node Ready {:?} after containerd came back", back.elapsed());
    assert!(s.logs().contains("containerd exited"), "the restart is logged");
    // And told on the Node, as Events.
    let events = eventually(Duration::from_secs(30), "the node's containerd events", || {
        let out = s.ok(&[
            "get",
            "events",
            "-n",
            "default",
            "--field-selector",
            "involvedObject.kind=Node",
            "-o",
            "jsonpath={range .items[*]}{.type} {.reason}: {.message}{\"\\n\"}{end}",
        ]);
        out.contains("ContainerdRestarted").then_some(out)
    });
    assert!(
        events.contains("Warning ContainerdExited: containerd exited (signal: 9 (SIGKILL)); restarting it in"),
        "{events}"
    );
    assert!(
        events.contains("Normal ContainerdRestarted: containerd was restarted and is ready (restart 1)"),
        "{events}"
    );
    wait_pod(&s, "during", "the pod created during the outage Running", 90, |p| condition(p, "Ready") == "True");
    // A few sync rounds for the kubelet to (not) touch the old containers.
    std::thread::sleep(Duration::from_secs(5));
    for (i, b) in before.iter().enumerate() {
        let after = pod(&s, &format!("keep-{i}"));
        assert_eq!(container_status(&after)["containerID"], container_status(b)["containerID"], "keep-{i}");
        assert_eq!(container_status(&after)["restartCount"], 0, "keep-{i}");
        assert_eq!(condition(&after, "Ready"), "True", "keep-{i}");
    }
    assert_ne!(new, old);
}

#[test]
fn logs_exec_and_port_forward_reach_the_container() {
    use std::io::{BufRead, BufReader, Write};
    let s = Server::start_node();
    let manifest = format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: chatty}}
spec:
  containers:
  - name: c
    image: {IMAGE}
    command: ["sh", "-c", "echo line1; echo line2; mkdir -p /www; echo hi-from-pod > /www/index.html; httpd -p 8080 -h /www; while true; do echo tick; sleep 1; done"]
"#
    );
    s.ok_stdin(&["apply", "-f", "-"], &manifest);
    wait_pod(&s, "chatty", "Running", 60, |p| p["status"]["phase"] == "Running");
    let logs = eventually(Duration::from_secs(20), "logs", || {
        let out = s.kubectl(&["logs", "chatty"]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        text.contains("line2").then_some(text)
    });
    assert!(logs.starts_with("line1\nline2\n"), "{logs}");
    // logs -f keeps streaming new lines.
    let mut follow = s
        .kubectl_cmd(&["logs", "-f", "chatty", "--tail=1"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("logs -f");
    let stdout = follow.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let mut ticks = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while ticks < 3 && std::time::Instant::now() < deadline {
        if let Ok(l) = rx.recv_timeout(Duration::from_millis(500)) {
            if l == "tick" {
                ticks += 1;
            }
        }
    }
    let _ = follow.kill();
    let _ = follow.wait();
    assert!(ticks >= 3, "logs -f streamed only {ticks} ticks");
    // exec: output and exit code.
    let out = s.kubectl(&["exec", "chatty", "--", "sh", "-c", "echo hi; exit 3"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n");
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    // exec -i: stdin reaches the process and its end closes it.
    let out = s.kubectl_stdin(&["exec", "-i", "chatty", "--", "sh", "-c", "tr a-z A-Z"], "piped input\n");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "PIPED INPUT\n");
    // port-forward serves the pod's HTTP on a local port.
    let mut pf = s
        .kubectl_cmd(&["port-forward", "pod/chatty", ":8080"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("port-forward");
    let mut line = String::new();
    let mut pf_stdout = BufReader::new(pf.stdout.take().expect("stdout"));
    pf_stdout.read_line(&mut line).expect("port-forward output");
    // Keep draining: kubectl dies of SIGPIPE if it cannot print "Handling connection for …".
    std::thread::spawn(move || for _ in pf_stdout.lines() {});
    let port: u16 = line
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no local port in {line:?}"));
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect to forwarded port");
    conn.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    conn.write_all(b"GET /index.html HTTP/1.0\r\nHost: x\r\n\r\n").expect("request");
    let mut body = String::new();
    let _ = std::io::Read::read_to_string(&mut conn, &mut body);
    let _ = pf.kill();
    let pf_out = pf.wait_with_output().expect("port-forward output");
    assert!(
        body.contains("hi-from-pod"),
        "response {body:?}; port-forward stderr: {}\nserver log:\n{}",
        String::from_utf8_lossy(&pf_out.stderr),
        common::tail(&s.logs(), 30)
    );
}

#[test]
fn containers_get_service_environment_variables() {
    let s = Server::start_node();
    let manifest = r#"
apiVersion: v1
kind: Service
metadata: {name: my-web}
spec:
  selector: {app: nothing}
  ports:
  - {name: http, port: 8080, targetPort: 80, protocol: TCP}
  - {name: dns, port: 53, protocol: UDP}
"#;
    s.ok_stdin(&["apply", "-f", "-"], manifest);
    let web_ip = s.ok(&["get", "service", "my-web", "-o", "jsonpath={.spec.clusterIP}"]).trim().to_string();
    let api_ip = s.ok(&["get", "service", "kubernetes", "-o", "jsonpath={.spec.clusterIP}"]).trim().to_string();
    assert!(!web_ip.is_empty() && !api_ip.is_empty(), "cluster IPs: {web_ip:?} {api_ip:?}");
    let pod = |name: &str, links: bool| {
        format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  enableServiceLinks: {links}
  containers:
  - name: c
    image: {IMAGE}
    command: ["sh", "-c", "echo '$(MY_WEB_SERVICE_HOST)' > /tmp/arg; exec sleep 3600"]
    env:
    - {{name: MY_WEB_PORT_53_UDP_PROTO, value: mine}}
"#
        )
    };
    s.ok_stdin(&["apply", "-f", "-"], &pod("linked", true));
    s.ok_stdin(&["apply", "-f", "-"], &pod("unlinked", false));
    let arg_of = |name: &str| {
        eventually(Duration::from_secs(10), "the command to write its argument", || {
            let out = s.kubectl(&["exec", name, "--", "cat", "/tmp/arg"]);
            out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        })
    };
    let env_of = |name: &str| -> std::collections::BTreeMap<String, String> {
        wait_pod(&s, name, "Running", 60, |p| p["status"]["phase"] == "Running");
        s.ok(&["exec", name, "--", "env"])
            .lines()
            .filter_map(|l| l.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
            .collect()
    };

    let env = env_of("linked");
    let expect = [
        ("KUBERNETES_SERVICE_HOST", api_ip.clone()),
        ("KUBERNETES_SERVICE_PORT", "443".to_string()),
        ("KUBERNETES_SERVICE_PORT_HTTPS", "443".to_string()),
        ("KUBERNETES_PORT", format!("tcp://{api_ip}:443")),
        ("KUBERNETES_PORT_443_TCP", format!("tcp://{api_ip}:443")),
        ("KUBERNETES_PORT_443_TCP_PROTO", "tcp".to_string()),
        ("KUBERNETES_PORT_443_TCP_PORT", "443".to_string()),
        ("KUBERNETES_PORT_443_TCP_ADDR", api_ip.clone()),
        ("MY_WEB_SERVICE_HOST", web_ip.clone()),
        ("MY_WEB_SERVICE_PORT", "8080".to_string()),
        ("MY_WEB_SERVICE_PORT_HTTP", "8080".to_string()),
        ("MY_WEB_SERVICE_PORT_DNS", "53".to_string()),
        ("MY_WEB_PORT", format!("tcp://{web_ip}:8080")),
        ("MY_WEB_PORT_8080_TCP", format!("tcp://{web_ip}:8080")),
        ("MY_WEB_PORT_8080_TCP_PROTO", "tcp".to_string()),
        ("MY_WEB_PORT_8080_TCP_PORT", "8080".to_string()),
        ("MY_WEB_PORT_8080_TCP_ADDR", web_ip.clone()),
        ("MY_WEB_PORT_53_UDP", format!("udp://{web_ip}:53")),
        ("MY_WEB_PORT_53_UDP_PORT", "53".to_string()),
        ("MY_WEB_PORT_53_UDP_ADDR", web_ip.clone()),
        // The container's own env wins over the service variable.
        ("MY_WEB_PORT_53_UDP_PROTO", "mine".to_string()),
    ];
    for (k, v) in &expect {
        assert_eq!(env.get(*k), Some(v), "{k} in {env:?}");
    }
    // $(VAR) in the command expands with service variables.
    assert_eq!(arg_of("linked"), web_ip);

    let env = env_of("unlinked");
    for (k, v) in expect.iter().filter(|(k, _)| k.starts_with("KUBERNETES_")) {
        assert_eq!(env.get(*k), Some(v), "{k} in {env:?}");
    }
    let leaked: Vec<&String> =
        env.keys().filter(|k| k.starts_with("MY_WEB_") && *k != "MY_WEB_PORT_53_UDP_PROTO").collect();
    assert!(leaked.is_empty(), "enableServiceLinks: false still got {leaked:?}");
    assert_eq!(env.get("MY_WEB_PORT_53_UDP_PROTO").map(String::as_str), Some("mine"));
    // Unknown references stay as written.
    assert_eq!(arg_of("unlinked"), "$(MY_WEB_SERVICE_HOST)");
}

#[test]
fn pods_get_a_service_account_token_that_authenticates_as_them() {
    let s = Server::start_node();
    let manifest = format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: identity}}
spec:
  containers:
  - name: c
    image: {IMAGE}
    command: ["sleep", "3600"]
"#
    );
    s.ok_stdin(&["apply", "-f", "-"], &manifest);
    let p = wait_pod(&s, "identity", "Running", 90, |p| p["status"]["phase"] == "Running");
    assert_eq!(p["spec"]["serviceAccountName"], "default");
    let uid = p["metadata"]["uid"].as_str().expect("uid").to_string();
    let dir = "/var/run/secrets/kubernetes.io/serviceaccount";
    let read = |file: &str| s.ok(&["exec", "identity", "--", "cat", &format!("{dir}/{file}")]);
    assert_eq!(read("namespace"), "default");
    let ca = read("ca.crt");
    let cluster_ca = std::fs::read_to_string(s.data_dir().join("server/tls/server-ca.crt")).expect("cluster CA");
    assert_eq!(ca.trim(), cluster_ca.trim(), "ca.crt is the cluster CA");
    let token = read("token");
    assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
    // The mount is read-only for the container.
    let out = s.kubectl(&["exec", "identity", "--", "sh", "-c", &format!("echo x > {dir}/token")]);
    assert!(!out.status.success(), "the token volume must be read-only");

    // From the host, the pod's token is the pod's identity.
    let review = r#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#;
    let out = std::process::Command::new("curl")
        .args(["-sS", "-X", "POST", "-H", "Content-Type: application/json", "--data-binary", review, "--cacert"])
        .arg(s.data_dir().join("server/tls/server-ca.crt"))
        .arg("-H")
        .arg(format!("Authorization: Bearer {}", token.trim()))
        .arg(format!("https://127.0.0.1:{}/apis/authentication.k8s.io/v1/selfsubjectreviews", s.port))
        .output()
        .expect("curl");
    let answer: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    let user = &answer["status"]["userInfo"];
    assert_eq!(user["username"], "system:serviceaccount:default:default", "{answer}");
    assert_eq!(user["extra"]["authentication.kubernetes.io/pod-name"], serde_json::json!(["identity"]), "{answer}");
    assert_eq!(user["extra"]["authentication.kubernetes.io/pod-uid"], serde_json::json!([uid]), "{answer}");
    let node = s.ok(&["get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"]);
    assert_eq!(user["extra"]["authentication.kubernetes.io/node-name"], serde_json::json!([node]), "{answer}");
}

/// Millicores from a `kubectl top` CPU column ("123m", or whole cores).
fn millicores(s: &str) -> f64 {
    match s.strip_suffix('m') {
        Some(m) => m.parse().unwrap_or(-1.0),
        None => s.parse::<f64>().map(|c| c * 1000.0).unwrap_or(-1.0),
    }
}

#[test]
fn kubectl_top_shows_what_pods_and_the_node_use() {
    let s = Server::start_node();
    // Before any pod runs, the node's own use is there.
    let out = s.ok(&["top", "node", "--no-headers"]);
    let cols: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(cols.len(), 5, "NAME CPU(cores) CPU(%) MEMORY(bytes) MEMORY(%): {out}");
    assert!(millicores(cols[1]) >= 0.0 && cols[2].ends_with('%') && cols[3].ends_with("Mi"), "{out}");

    // One container spins within a 200m limit, the other sleeps holding 20 MiB in /dev/shm.
    let manifest = format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: busy, labels: {{app: busy}}}}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: spin
    image: {IMAGE}
    command: ["sh", "-c", "while :; do :; done"]
    resources:
      limits: {{cpu: 200m}}
  - name: hold
    image: {IMAGE}
    command: ["sh", "-c", "head -c 20m /dev/zero > /dev/shm/fill; sleep 3600"]
"#
    );
    s.ok_stdin(&["apply", "-f", "-"], &manifest);
    wait_pod(&s, "busy", "the pod to run", 90, |p| p["status"]["phase"] == "Running");
    let rows = eventually(Duration::from_secs(60), "pod metrics with CPU in use", || {
        let out = s.kubectl(&["top", "pod", "busy", "--containers", "--no-headers"]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let rows: Vec<Vec<String>> = text.lines().map(|l| l.split_whitespace().map(str::to_string).collect()).collect();
        let spin = rows.iter().find(|r| r.get(1).map(String::as_str) == Some("spin"))?;
        (millicores(&spin[2]) >= 50.0).then_some(rows)
    });
    let spin = rows.iter().find(|r| r[1] == "spin").expect("spin");
    assert!(millicores(&spin[2]) <= 400.0, "the 200m limit holds: {rows:?}");
    let hold = rows.iter().find(|r| r[1] == "hold").expect("hold");
    let mib: f64 = hold[3].trim_end_matches("Mi").parse().unwrap_or(0.0);
    assert!(mib >= 15.0, "the shm file counts in the working set: {rows:?}");

    // Selectors, namespaces and the API objects behind the table.
    let out = s.ok(&["top", "pod", "-l", "app=busy", "--no-headers"]);
    assert!(out.starts_with("busy "), "{out}");
    assert_eq!(s.ok(&["top", "pod", "-l", "app=other", "--no-headers"]).trim(), "");
    let err = s.kubectl(&["top", "pod", "-n", "kube-system", "busy"]);
    assert!(!err.status.success());
    let raw = |path: &str| -> Value { serde_json::from_str(&s.ok(&["get", "--raw", path])).expect("json") };
    let m = raw("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/busy");
    assert_eq!(m["kind"], "PodMetrics");
    assert_eq!(m["metadata"]["labels"]["app"], "busy");
    assert!(m["window"].as_str().is_some_and(|w| w.ends_with('s')), "{m}");
    let nodes = raw("/apis/metrics.k8s.io/v1beta1/nodes");
    assert_eq!(nodes["kind"], "NodeMetricsList");
    assert_eq!(nodes["items"].as_array().map(Vec::len), Some(1), "{nodes}");
    s.ok(&["delete", "pod", "busy", "--wait=true"]);
}

/// Issue 16: in 2 of about 10 node-mode starts the kubelet gave up on a containerd whose CRI
/// plugin was not initialised yet, and no Node was ever registered. Every one of 20 starts in a
/// row must reach node Ready (`start_node` waits for it and fails otherwise).
#[test]
fn twenty_node_mode_starts_in_a_row_each_reach_node_ready() {
    for i in 1..=20 {
        eprintln!("node-mode start {i} of 20");
        let s = Server::start_node();
        let ready =
            s.ok(&["get", "nodes", "-o", "jsonpath={.items[0].status.conditions[?(@.type==\"Ready\")].reason}"]);
        assert_eq!(ready.trim(), "KubeletReady", "start {i}");
        assert!(!s.logs().contains("kubelet stopped"), "start {i}:\n{}", s.logs());
    }
}

/// What the debug containers print every second until input arrives: once kubectl shows it,
/// the attach delivers output (see [`debug_script`]).
const DEBUG_READY: &str = "waiting";

/// What the debug containers run: a line every second until a line of input arrives (at most
/// a minute), then `echo <prefix>-<line>; ps`, and a second's pause before exiting.
/// containerd 1.6's CRI attach loses output on both edges, whatever relays it: it starts copying
/// stdin before it adds the attach to the container's output, so input sent at once can be
/// read and answered before the attach hears anything; and output written just before the
/// process exits can miss an attach that the exit ends (seen: the kubelet's relay carried all
/// 210 bytes containerd sent, no `ps` among them, while the log held it all). The waiting lines
/// tell the session that the attach delivers output; the pause lets it drain.
fn debug_script(prefix: &str) -> String {
    format!(
        "i=0; until read -t 1 x; do echo {DEBUG_READY}; i=$((i+1)); [ $i -gt 60 ] && break; done; echo {prefix}-$x; ps; sleep 1"
    )
}

/// Feeds `input` to an interactive kubectl session once its output shows `ready` (the attach
/// delivers output), and collects its output once it ends, keeping its stdin open until then.
fn session(mut child: std::process::Child, ready: &str, input: &[u8]) -> std::process::Output {
    use std::io::{Read, Write};
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = child.stdout.take().expect("stdout");
    let (seen_tx, seen_rx) = std::sync::mpsc::channel();
    let ready = ready.as_bytes().to_vec();
    let reader = std::thread::spawn(move || {
        let (mut all, mut buf, mut told) = (Vec::new(), [0u8; 4096], false);
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            all.extend_from_slice(&buf[..n]);
            if !told && all.windows(ready.len()).any(|w| w == ready.as_slice()) {
                told = true;
                let _ = seen_tx.send(());
            }
        }
        all
    });
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    // Without the marker (the session ended early), the input is still sent: the asserts on
    // the output then say what went wrong.
    let _ = seen_rx.recv_timeout(Duration::from_secs(60));
    let _ = stdin.write_all(input);
    let mut out = rx.recv_timeout(Duration::from_secs(90)).expect("the session ends").expect("session output");
    drop(stdin);
    out.stdout = reader.join().expect("stdout reader");
    out
}

/// Issue 16, defect 6: `kubectl debug` added the ephemeral container, then waited forever.
#[test]
fn kubectl_debug_runs_an_ephemeral_container_in_the_targets_pid_namespace() {
    let s = Server::start_node();
    let manifest = format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: web}}
spec:
  containers:
  - name: app
    image: {IMAGE}
    command: ["sleep", "3600"]
"#
    );
    s.ok_stdin(&["apply", "-f", "-"], &manifest);
    let before = wait_pod(&s, "web", "Running", 60, |p| p["status"]["phase"] == "Running");
    let app_id = container_status(&before)["containerID"].as_str().unwrap_or("").to_string();
    assert!(!app_id.is_empty(), "{before}");

    // kubectl debug -i attaches once the container runs; the container waits for a line, which
    // is sent once its waiting lines reach kubectl. Stdin stays open until the session ends:
    // as upstream, containerd ends an attach whose stdin closes (stdinOnce is false), and with
    // it the output still to come.
    let debug = s
        .kubectl_cmd(&[
            "debug",
            "-i",
            "web",
            &format!("--image={IMAGE}"),
            "--target=app",
            "--container=debugger",
            "--",
            "sh",
            "-c",
            &debug_script("hello-from-debug"),
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl debug");
    let out = session(debug, DEBUG_READY, b"go\n");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}\nserver log:\n{}", common::tail(&s.logs(), 40));
    if !stdout.contains("hello-from-debug-go") {
        let logs = s.kubectl(&["logs", "web", "-c", "debugger"]);
        panic!(
            "stdout: {stdout}\nstderr: {stderr}\ndebugger log: {}\npod: {}\nserver log:\n{}",
            String::from_utf8_lossy(&logs.stdout),
            pod(&s, "web")["status"],
            common::tail(&s.logs(), 60)
        );
    }
    // The target's process is visible: the debugger shares its PID namespace.
    assert!(stdout.contains("sleep 3600"), "ps shows no target process:\n{stdout}");

    let p = wait_pod(&s, "web", "debugger terminated", 30, |p| {
        p["status"]["ephemeralContainerStatuses"][0]["state"]["terminated"].is_object()
    });
    let eph = &p["status"]["ephemeralContainerStatuses"][0];
    assert_eq!(eph["name"], "debugger", "{eph}");
    assert_eq!(eph["image"], IMAGE, "{eph}");
    assert_eq!(eph["state"]["terminated"]["exitCode"], 0, "{eph}");
    assert_eq!(eph["restartCount"], 0, "{eph}");
    assert!(eph["containerID"].as_str().is_some_and(|c| c.starts_with("containerd://")), "{eph}");
    assert!(eph["imageID"].as_str().is_some_and(|c| !c.is_empty()), "{eph}");
    // The pod was not restarted for it.
    let app = container_status(&p);
    assert_eq!(app["restartCount"], 0, "{app}");
    assert_eq!(app["containerID"], app_id.as_str(), "{app}");
    assert!(app["state"]["running"].is_object(), "{app}");
    assert_eq!(p["status"]["phase"], "Running");
    // Its log stays readable; it is never started again.
    let logs = s.ok(&["logs", "web", "-c", "debugger"]);
    assert!(logs.contains("hello-from-debug-go"), "{logs}");
    std::thread::sleep(Duration::from_secs(3));
    let p = pod(&s, "web");
    assert_eq!(p["status"]["ephemeralContainerStatuses"][0]["containerID"], eph["containerID"]);

    // kubectl debug -it, through a pseudo-terminal: the session prints the container's output.
    let cmd = format!(
        "KUBECONFIG={} HOME={} {} debug -it web --image={IMAGE} --target=app --container=debug-tty -- sh -c '{}'",
        s.kubeconfig().display(),
        s.data_dir().join("tty-home").display(),
        common::kubectl_bin(),
        debug_script("tty-says"),
    );
    let tty = std::process::Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("script");
    let out = session(tty, DEBUG_READY, b"tty\r");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(stdout.contains("tty-says-tty"), "stdout: {stdout}\nstderr: {}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("sleep 3600"), "{stdout}");
    let p = pod(&s, "web");
    assert_eq!(container_status(&p)["restartCount"], 0);
    let names: Vec<&str> = p["status"]["ephemeralContainerStatuses"]
        .as_array()
        .map(|a| a.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, ["debugger", "debug-tty"]);
}

/// Issue 19: systemd (a fake `NOTIFY_SOCKET`) hears `READY=1` only once the node is Ready, not
/// when the API starts serving, after `STATUS=` lines for the start steps.
#[test]
fn systemd_hears_ready_only_once_the_node_is_ready() {
    let sock_dir = tempfile::tempdir().expect("tempdir");
    let path = sock_dir.path().join("notify.sock");
    let sock = std::os::unix::net::UnixDatagram::bind(&path).expect("bind the notify socket");
    sock.set_read_timeout(Some(Duration::from_secs(120))).expect("timeout");
    let s = Server::start_node_with_env(&[("NOTIFY_SOCKET", path.to_str().expect("utf-8 path"))]);
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = sock.recv(&mut buf).unwrap_or_else(|e| panic!("no READY=1: {e}; got {seen:?}\n{}", s.logs()));
        let msg = String::from_utf8_lossy(&buf[..n]).trim().to_string();
        if msg == "READY=1" {
            break;
        }
        seen.push(msg);
    }
    let ready = s.ok(&["get", "nodes", "-o", "jsonpath={.items[0].status.conditions[?(@.type==\"Ready\")].status}"]);
    assert_eq!(ready.trim(), "True", "the node is Ready when systemd hears READY=1");
    for step in ["STATUS=checking the host", "STATUS=starting the API server", "STATUS=starting containerd"] {
        assert!(seen.iter().any(|m| m == step), "{step} before READY=1: {seen:?}");
    }
    assert!(seen.iter().any(|m| m.starts_with("STATUS=waiting for node")), "{seen:?}");
}
