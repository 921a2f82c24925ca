//! Least privilege on a real node (issue 32): with the kubelet's own kubeconfig a node reads the
//! Secret its pod mounts and nothing else, and writes only its own Node; the proxy's, scheduler's,
//! controllers' and DNS's credentials are refused outside their roles while the pod is bound,
//! the rollout happens and traffic flows through the Service; no component is in
//! `system:masters`.

#[path = "../cmd/k1s/tests/common/mod.rs"]
mod common;

use common::{eventually, Server};
use std::process::Output;
use std::time::Duration;

const IMAGE: &str = "127.0.0.1:5000/busybox:1.36";

const APP: &str = r#"
apiVersion: v1
kind: Secret
metadata: {name: mounted}
stringData: {greeting: hello}
---
apiVersion: v1
kind: Secret
metadata: {name: unrelated}
stringData: {password: hunter2}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
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
        command: ["sh", "-c", "mkdir -p /www; cat /secret/greeting > /www/index.html; exec httpd -f -p 8080 -h /www"]
        ports: [{name: http, containerPort: 8080}]
        readinessProbe:
          httpGet: {path: /, port: http}
          periodSeconds: 1
        volumeMounts: [{name: s, mountPath: /secret}]
      volumes: [{name: s, secret: {secretName: mounted}}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  type: NodePort
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http}]
"#;

/// kubectl with a component's kubeconfig under `<data-dir>/server/cred`.
fn as_component(s: &Server, file: &str, args: &[&str]) -> Output {
    let kubeconfig = s.data_dir().join(format!("server/cred/{file}.kubeconfig"));
    assert!(kubeconfig.exists(), "{}", kubeconfig.display());
    s.kubectl_cmd(args).env("KUBECONFIG", kubeconfig).output().expect("kubectl")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn refused(o: &Output, user: &str) {
    assert!(!o.status.success(), "{user} was allowed");
    let e = stderr(o);
    assert!(e.contains("Forbidden") || e.contains("forbidden"), "{user}: {e}");
    assert!(e.contains(user), "the refusal names {user}: {e}");
}

/// A merge patch with the kubelet's client certificate, as curl sends it: (status, body).
fn kubelet_patch(s: &Server, path: &str, patch: &str) -> (u16, String) {
    let tls = s.data_dir().join("server/tls");
    let out = std::process::Command::new("curl")
        .args([
            "-sS",
            "-o",
            "-",
            "-w",
            "\n%{http_code}",
            "-X",
            "PATCH",
            "-H",
            "Content-Type: application/merge-patch+json",
        ])
        .arg("--cacert")
        .arg(tls.join("server-ca.crt"))
        .arg("--cert")
        .arg(tls.join("client-kubelet.crt"))
        .arg("--key")
        .arg(tls.join("client-kubelet.key"))
        .args(["--data-binary", patch])
        .arg(format!("https://127.0.0.1:{}{}", s.port, path))
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
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

#[test]
fn every_component_works_under_its_own_role_and_is_refused_outside_it() {
    let s = Server::start_node();
    let node = s.ok(&["get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"]);
    // The server, not the kubelet, labels its node's roles.
    eventually(Duration::from_secs(30), "the node's role labels", || {
        let roles = s.ok(&[
            "get",
            "node",
            &node,
            "-o",
            r#"jsonpath={.metadata.labels.node-role\.kubernetes\.io/control-plane}"#,
        ]);
        (roles == "true").then_some(())
    });
    s.ok_stdin(&["apply", "-f", "-"], &APP.replace("IMAGE", IMAGE));
    s.ok(&["rollout", "status", "deployment/web", "--timeout=180s"]);
    // The proxy programs the Service: the secret the kubelet mounted answers on the NodePort.
    let port = s.ok(&["get", "svc", "web", "-o", "jsonpath={.spec.ports[0].nodePort}"]);
    let body = eventually(Duration::from_secs(30), "the NodePort answer", || host_get(&format!("127.0.0.1:{port}")));
    assert!(body.contains("hello"), "{body}");

    // The kubelet: its pod's Secret, and nothing else.
    let kubelet = format!("system:node:{node}");
    let out = as_component(&s, "kubelet", &["get", "secret", "mounted", "-o", "jsonpath={.data.greeting}"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = as_component(&s, "kubelet", &["get", "secret", "unrelated"]);
    refused(&out, &kubelet);
    assert!(
        stderr(&out).contains(&format!("no relationship found between node '{node}' and this object")),
        "{}",
        stderr(&out)
    );
    refused(&as_component(&s, "kubelet", &["get", "secrets"]), &kubelet);
    refused(&as_component(&s, "kubelet", &["get", "secrets", "-A"]), &kubelet);
    s.ok(&["create", "namespace", "scratch"]);
    refused(&as_component(&s, "kubelet", &["delete", "namespace", "scratch"]), &kubelet);
    s.ok_stdin(&["apply", "-f", "-"], "apiVersion: v1\nkind: Node\nmetadata:\n  name: other-node\n");
    refused(&as_component(&s, "kubelet", &["label", "node", "other-node", "team=x"]), &kubelet);
    // (kubectl reads a node before patching it, which the Node authorizer refuses; a raw patch
    // goes on to NodeRestriction.)
    let modify_other = format!(r#"node \"{node}\" is not allowed to modify node \"other-node\""#);
    let (code, body) = kubelet_patch(&s, "/api/v1/nodes/other-node", r#"{"metadata":{"labels":{"team":"x"}}}"#);
    assert_eq!(code, 403, "{body}");
    assert!(body.contains(&modify_other), "{body}");
    let out = as_component(&s, "kubelet", &["label", "node", &node, "node-restriction.kubernetes.io/x=y"]);
    assert!(
        stderr(&out).contains("is not allowed to modify labels: node-restriction.kubernetes.io/x"),
        "{}",
        stderr(&out)
    );
    let patch = r#"{"status":{"conditions":[{"type":"Ready","status":"False","reason":"Spoofed","message":"x"}]}}"#;
    let (code, body) = kubelet_patch(&s, "/api/v1/nodes/other-node/status", patch);
    assert_eq!(code, 403, "{body}");
    assert!(body.contains(&modify_other), "{body}");
    refused(&as_component(&s, "kubelet", &["get", "node", "other-node"]), &kubelet);
    let own = as_component(&s, "kubelet", &["get", "node", &node, "-o", "name"]);
    assert!(own.status.success(), "its own Node: {}", stderr(&own));

    // The proxy, the scheduler, the controllers, DNS: writes outside their roles.
    refused(
        &as_component(&s, "proxy", &["create", "secret", "generic", "p", "--from-literal=a=b"]),
        "system:kube-proxy",
    );
    refused(
        &as_component(&s, "scheduler", &["create", "secret", "generic", "p", "--from-literal=a=b"]),
        "system:kube-scheduler",
    );
    refused(&as_component(&s, "controller", &["create", "namespace", "intruder"]), "system:kube-controller-manager");
    refused(&as_component(&s, "dns", &["delete", "service", "web"]), "system:k1s-dns");
    refused(
        &as_component(&s, "local-path-provisioner", &["get", "secret", "mounted"]),
        "system:k1s-local-path-provisioner",
    );
    refused(&as_component(&s, "supervisor", &["get", "pods"]), "system:k1s-supervisor");
    // Their work went on: the scheduler bound the pod, the controllers roll a new template out.
    let bound = s.ok(&["get", "pods", "-l", "app=web", "-o", "jsonpath={.items[0].spec.nodeName}"]);
    assert_eq!(bound, node);
    s.ok(&["set", "env", "deployment/web", "ROLLED=1"]);
    s.ok(&["rollout", "status", "deployment/web", "--timeout=180s"]);
    let body =
        eventually(Duration::from_secs(30), "the rolled-out pod's answer", || host_get(&format!("127.0.0.1:{port}")));
    assert!(body.contains("hello"), "{body}");

    // No component's certificate is in system:masters.
    for entry in std::fs::read_dir(s.data_dir().join("server/cred")).expect("cred").flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "kubeconfig") {
            let who = s
                .kubectl_cmd(&["auth", "whoami", "-o", "jsonpath={.status.userInfo.groups}"])
                .env("KUBECONFIG", &path)
                .output()
                .expect("whoami");
            let groups = String::from_utf8_lossy(&who.stdout).into_owned();
            assert!(who.status.success(), "{}: {}", path.display(), stderr(&who));
            assert!(!groups.contains("system:masters"), "{}: {groups}", path.display());
        }
    }
}
