//! The whole mission path as one scenario, with stock kubectl and real containerd: Deployment
//! ▶ ReplicaSet ▶ Pods ▶ scheduler ▶ kubelet ▶ readiness ▶ EndpointSlice ▶ nftables ▶ traffic,
//! found through cluster DNS (issue 5). Traffic only to pod/service addresses on this machine
//! and to the node's own addresses.

#[path = "../cmd/k1s/tests/common/mod.rs"]
mod common;

use common::{eventually, Server};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const IMAGE: &str = "127.0.0.1:5000/busybox:1.36";

const APP: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 3
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: web
        image: IMAGE
        command: ["sh", "-c", "mkdir -p /www; hostname > /www/index.html; exec httpd -f -p 8080 -h /www"]
        ports: [{name: http, containerPort: 8080}]
        readinessProbe:
          httpGet: {path: /, port: http}
          periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  type: NodePort
  selector: {app: web}
  ports:
  - {name: http, port: 80, targetPort: http}
---
apiVersion: v1
kind: Pod
metadata:
  name: client
  labels: {role: client}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: IMAGE
    command: ["sleep", "3600"]
"#;

/// One HTTP GET from the client pod; Ok(body) or Err(wget's message).
fn fetch(s: &Server, url: &str) -> Result<String, String> {
    let out = s.kubectl(&["exec", "client", "--", "timeout", "5", "wget", "-q", "-O", "-", url]);
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).to_string())
    }
}

fn host_get(addr: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect_timeout(&addr.parse().ok()?, Duration::from_secs(3)).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    c.write_all(b"GET / HTTP/1.0\r\n\r\n").ok()?;
    let mut body = String::new();
    c.read_to_string(&mut body).ok()?;
    body.contains("200 OK").then_some(body)
}

fn nft_table() -> String {
    let out = std::process::Command::new("nft").args(["list", "table", "ip", "k1s"]).output().expect("nft");
    String::from_utf8_lossy(&out.stdout).to_string()
}

#[test]
fn the_mission_path_serves_traffic_through_dns_clusterip_and_nodeports() {
    let s = Server::start_node();
    s.ok_stdin(&["apply", "-f", "-"], &APP.replace("IMAGE", IMAGE));
    s.ok(&["rollout", "status", "deployment/web", "--timeout=180s"]);
    s.ok(&["wait", "--for=condition=Ready", "pod/client", "--timeout=120s"]);
    let pods: BTreeSet<String> = s
        .ok(&["get", "pods", "-l", "app=web", "-o", "jsonpath={.items[*].metadata.name}"])
        .split_whitespace()
        .map(str::to_string)
        .collect();
    assert_eq!(pods.len(), 3);
    // Through cluster DNS and the ClusterIP, every ready pod answers.
    let url = "http://web.default.svc.cluster.local/";
    let seen = eventually(Duration::from_secs(60), "answers from all three pods", || {
        let mut seen = BTreeSet::new();
        for _ in 0..30 {
            if let Ok(b) = fetch(&s, url) {
                seen.insert(b);
            }
            if seen == pods {
                break;
            }
        }
        (seen == pods).then_some(seen)
    });
    assert_eq!(seen, pods);
    // The short name works through the search path too.
    assert!(pods.contains(&fetch(&s, "http://web/").expect("short name")));
    // NodePort on 127.0.0.1 and on the node's own address, from the host.
    let node_port = s.ok(&["get", "svc", "web", "-o", "jsonpath={.spec.ports[0].nodePort}"]);
    let node_ip =
        s.ok(&["get", "nodes", "-o", "jsonpath={.items[0].status.addresses[?(@.type==\"InternalIP\")].address}"]);
    for addr in [format!("127.0.0.1:{node_port}"), format!("{node_ip}:{node_port}")] {
        let body = eventually(Duration::from_secs(20), "NodePort answer", || host_get(&addr));
        assert!(pods.iter().any(|p| body.contains(p.as_str())), "{addr}: {body}");
    }
    // The proxy subresources: a pod at its declared port, the Service by port name or number,
    // and the node's kubelet (its resource metrics).
    let first = pods.iter().next().expect("a pod").clone();
    let raw = |path: &str| s.ok(&["get", "--raw", path]);
    assert_eq!(raw(&format!("/api/v1/namespaces/default/pods/{first}/proxy/")).trim(), first);
    assert_eq!(raw(&format!("/api/v1/namespaces/default/pods/{first}:8080/proxy/index.html")).trim(), first);
    for name in ["web", "web:http", "http:web:80"] {
        let body = raw(&format!("/api/v1/namespaces/default/services/{name}/proxy/"));
        assert!(pods.contains(body.trim()), "{name}: {body}");
    }
    let missing = s.kubectl(&["get", "--raw", "/api/v1/namespaces/default/pods/client/proxy/"]);
    assert!(!missing.status.success(), "nothing listens on the client pod");
    let node = s.ok(&["get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"]);
    let metrics = raw(&format!("/api/v1/nodes/{node}/proxy/metrics/resource"));
    assert!(metrics.lines().any(|l| l.starts_with("container_cpu_usage_seconds_total{container=\"web\"")), "{metrics}");
    // A pod that is not ready gets no traffic.
    s.ok_stdin(
        &["apply", "-f", "-"],
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: unready, labels: {{app: web}}}}\nspec:\n  containers:\n  - name: web\n    image: {IMAGE}\n    command: [\"sh\", \"-c\", \"mkdir -p /www; hostname > /www/index.html; exec httpd -f -p 8080 -h /www\"]\n    ports: [{{name: http, containerPort: 8080}}]\n    readinessProbe:\n      exec: {{command: [\"false\"]}}\n      periodSeconds: 1\n"
        ),
    );
    eventually(Duration::from_secs(60), "unready pod running", || {
        (s.ok(&["get", "pod", "unready", "-o", "jsonpath={.status.phase}"]) == "Running").then_some(())
    });
    for _ in 0..20 {
        assert_ne!(fetch(&s, url).unwrap_or_default(), "unready", "a not-ready pod received traffic");
    }
    s.ok(&["delete", "pod", "unready", "--wait=false"]);
    // NetworkPolicy: deny all ingress to web, then allow the client.
    s.ok_stdin(&["apply", "-f", "-"], "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: deny}\nspec:\n  podSelector: {matchLabels: {app: web}}\n  policyTypes: [Ingress]\n");
    eventually(Duration::from_secs(20), "traffic blocked", || fetch(&s, url).is_err().then_some(()));
    s.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: allow-client}\nspec:\n  podSelector: {matchLabels: {app: web}}\n  policyTypes: [Ingress]\n  ingress:\n  - from:\n    - podSelector: {matchLabels: {role: client}}\n    ports: [{port: 8080}]\n",
    );
    eventually(Duration::from_secs(20), "traffic restored", || fetch(&s, url).ok());
    s.ok(&["delete", "networkpolicy", "deny", "allow-client"]);
    // Scaling to 0: the ClusterIP refuses at once, no hang.
    let cluster_ip = s.ok(&["get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}"]);
    s.ok(&["scale", "deployment/web", "--replicas=0"]);
    eventually(Duration::from_secs(60), "refusal", || {
        let t = Instant::now();
        let r = fetch(&s, &format!("http://{cluster_ip}/"));
        (r.as_ref().is_err_and(|e| e.contains("refused")) && t.elapsed() < Duration::from_secs(4)).then_some(())
    });
    // Deleting the Service removes its rules.
    assert!(nft_table().contains(&cluster_ip), "rules for {cluster_ip} expected while the Service exists");
    s.ok(&["delete", "service", "web"]);
    eventually(Duration::from_secs(20), "rules gone", || (!nft_table().contains(&cluster_ip)).then_some(()));
}

/// `k1s server` leaves its rules in place when it exits (pods keep serving); `k1s uninstall`
/// removes the `k1s` table, the Service CIDR routing rules, the DNS interface, `cni0` and the data
/// dir, and nothing else (a foreign nftables table stays).
#[test]
fn rules_survive_exit_and_uninstall_removes_only_k1s_networking() {
    let mut s = Server::start_node();
    s.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: Service\nmetadata: {name: keep}\nspec:\n  selector: {app: keep}\n  ports: [{port: 80}]\n",
    );
    let cluster_ip = s.ok(&["get", "svc", "keep", "-o", "jsonpath={.spec.clusterIP}"]);
    eventually(Duration::from_secs(20), "rules for the Service", || nft_table().contains(&cluster_ip).then_some(()));
    let ip_rules = || {
        let out = std::process::Command::new("ip").args(["rule", "list"]).output().expect("ip rule");
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    assert!(ip_rules().contains("27441:"), "service CIDR blackhole rule expected: {}", ip_rules());
    // Something k1s does not own, which uninstall must leave alone.
    let foreign = std::process::Command::new("nft").args(["add", "table", "ip", "k1s-test-foreign"]).status();
    assert!(foreign.expect("nft").success());
    s.stop();
    assert!(nft_table().contains(&cluster_ip), "rules must stay after the server exits");
    // This node's folders, so that uninstall removes them and not the host's /var/lib/k1s or /etc/k1s.
    let out = std::process::Command::new(common::k1s_bin())
        .arg("uninstall")
        .arg(format!("--data-dir={}", s.data_dir().display()))
        .arg(format!("--run-dir={}", s.run_dir().display()))
        .arg(format!("--pod-log-dir={}", s.dir.path().join("logs").display()))
        .arg(format!("--config-dir={}", s.dir.path().join("etc").display()))
        .output()
        .expect("k1s uninstall");
    assert!(out.status.success(), "k1s uninstall: {}", String::from_utf8_lossy(&out.stderr));
    let listed = std::process::Command::new("nft").args(["list", "tables"]).output().expect("nft");
    let tables = String::from_utf8_lossy(&listed.stdout).to_string();
    assert!(!tables.contains("table ip k1s\n"), "table k1s must be gone: {tables}");
    assert!(tables.contains("k1s-test-foreign"), "uninstall removed a table it does not own: {tables}");
    let _ = std::process::Command::new("nft").args(["delete", "table", "ip", "k1s-test-foreign"]).status();
    let rules = ip_rules();
    assert!(!rules.contains("27440:") && !rules.contains("27441:"), "routing rules must be gone: {rules}");
    let dns = std::process::Command::new("ip").args(["link", "show", "k1s-dns0"]).output().expect("ip link");
    assert!(!dns.status.success(), "the DNS interface must be gone");
    // Issue 19: the bridge k1s's CNI config creates goes too, and so does the data dir.
    let cni = std::process::Command::new("ip").args(["link", "show", "cni0"]).output().expect("ip link");
    assert!(!cni.status.success(), "the CNI bridge k1s created must be gone");
    assert!(!s.data_dir().exists(), "the data dir must be gone");
}

/// hostPort through CNI portmap (the node's address and 127.0.0.1), and a hostNetwork pod that
/// serves on the node's own network and resolves cluster names with ClusterFirstWithHostNet.
#[test]
fn host_ports_and_host_network_pods_serve_on_the_node() {
    let s = Server::start_node();
    let manifest = r#"
apiVersion: v1
kind: Pod
metadata: {name: hostport}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: IMAGE
    command: ["sh", "-c", "mkdir -p /www; echo via-hostport > /www/index.html; exec httpd -f -p 8080 -h /www"]
    ports: [{containerPort: 8080, hostPort: 31999}]
    readinessProbe:
      tcpSocket: {port: 8080}
      periodSeconds: 1
---
apiVersion: v1
kind: Pod
metadata: {name: hostnet}
spec:
  terminationGracePeriodSeconds: 1
  hostNetwork: true
  dnsPolicy: ClusterFirstWithHostNet
  containers:
  - name: web
    image: IMAGE
    command: ["sh", "-c", "mkdir -p /tmp/www; echo via-hostnet > /tmp/www/index.html; exec httpd -f -p 127.0.0.1:31998 -h /tmp/www"]
    readinessProbe:
      tcpSocket: {host: 127.0.0.1, port: 31998}
      periodSeconds: 1
"#;
    s.ok_stdin(&["apply", "-f", "-"], &manifest.replace("IMAGE", IMAGE));
    s.ok(&["wait", "--for=condition=Ready", "pod/hostport", "pod/hostnet", "--timeout=120s"]);
    let node_ip =
        s.ok(&["get", "nodes", "-o", "jsonpath={.items[0].status.addresses[?(@.type==\"InternalIP\")].address}"]);
    let body = eventually(Duration::from_secs(20), "hostPort answer", || host_get(&format!("{node_ip}:31999")));
    assert!(body.contains("via-hostport"), "{body}");
    // The hostNetwork pod listens in the node's own network namespace and reports the node's IP.
    let body = eventually(Duration::from_secs(20), "hostNetwork answer", || host_get("127.0.0.1:31998"));
    assert!(body.contains("via-hostnet"), "{body}");
    assert_eq!(s.ok(&["get", "pod", "hostnet", "-o", "jsonpath={.status.podIP}"]), node_ip);
    // ClusterFirstWithHostNet: cluster DNS first, with the cluster search path.
    let resolv = s.ok(&["exec", "hostnet", "--", "cat", "/etc/resolv.conf"]);
    assert!(resolv.contains("nameserver 10.43.0.10") && resolv.contains("svc.cluster.local"), "{resolv}");
    let lookup = s.ok(&["exec", "hostnet", "--", "nslookup", "kubernetes.default.svc.cluster.local", "10.43.0.10"]);
    assert!(lookup.contains("10.43.0.1"), "{lookup}");
}
