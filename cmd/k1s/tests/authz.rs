//! Authorization in upstream's order with stock kubectl and curl (issue 32): anonymous requests
//! go through RBAC as `system:anonymous`, every built-in component has a role of its own and
//! none is in `system:masters` or bound to `cluster-admin`, the Node authorizer and
//! NodeRestriction narrow a kubelet to its own node (here through impersonation; e2e_authz does
//! it with the kubelet's own credentials).

mod common;

use common::{eventually, Server};
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

/// A request without credentials: (status, body).
fn anonymous(s: &Server, path: &str) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-sS", "-o", "-", "-w", "\n%{http_code}", "--cacert"])
        .arg(s.data_dir().join("server/tls/server-ca.crt"))
        .arg(format!("https://127.0.0.1:{}{}", s.port, path))
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

/// kubectl with a component's kubeconfig under `<data-dir>/server/cred`.
fn as_component(s: &Server, file: &str, args: &[&str]) -> std::process::Output {
    let kubeconfig = s.data_dir().join(format!("server/cred/{file}.kubeconfig"));
    assert!(kubeconfig.exists(), "{}", kubeconfig.display());
    s.kubectl_cmd(args).env("KUBECONFIG", kubeconfig).output().expect("kubectl")
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The organizations (groups) of the client certificate a kubeconfig holds.
fn certificate_groups(kubeconfig: &std::path::Path) -> Vec<String> {
    use base64::Engine as _;
    let text = std::fs::read_to_string(kubeconfig).expect("kubeconfig");
    let data = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("client-certificate-data:"))
        .unwrap_or_else(|| panic!("{}: no client certificate", kubeconfig.display()))
        .trim();
    pem_groups(&base64::engine::general_purpose::STANDARD.decode(data).expect("base64"))
}

/// The organizations of a PEM certificate.
fn pem_groups(pem: &[u8]) -> Vec<String> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem).expect("pem");
    let cert = pem.parse_x509().expect("certificate");
    cert.subject().iter_organization().filter_map(|o| o.as_str().ok()).map(str::to_string).collect()
}

#[test]
fn anonymous_requests_are_authorized_by_rbac_as_system_anonymous() {
    let s = Server::start();
    for path in ["/version", "/version/", "/healthz", "/livez", "/readyz", "/readyz?verbose"] {
        assert_eq!(anonymous(&s, path).0, 200, "{path}");
    }
    let (code, body) = anonymous(&s, "/api/v1/namespaces");
    assert_eq!(code, 403, "{body}");
    let status: Value = serde_json::from_str(&body).expect("a Status");
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(
        status["message"],
        "namespaces is forbidden: User \"system:anonymous\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope"
    );
    // Discovery is for authenticated users only, and a named check is for system:monitoring.
    let (code, body) = anonymous(&s, "/apis");
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("forbidden: User \\\"system:anonymous\\\" cannot get path \\\"/apis\\\""), "{body}");
    assert_eq!(anonymous(&s, "/readyz/etcd").0, 403);
    // RBAC decides: a binding for system:unauthenticated opens what it grants.
    s.ok(&[
        "create",
        "clusterrolebinding",
        "anonymous-discovery",
        "--clusterrole=system:discovery",
        "--group=system:unauthenticated",
    ]);
    eventually(Duration::from_secs(10), "anonymous discovery once bound", || {
        (anonymous(&s, "/apis").0 == 200).then_some(())
    });
    assert_eq!(anonymous(&s, "/api/v1/namespaces").0, 403, "and nothing more");
}

#[test]
fn with_anonymous_auth_false_every_request_without_credentials_is_401() {
    let s = Server::start_with(&["--anonymous-auth=false"]);
    for path in ["/version", "/healthz", "/readyz", "/api/v1/namespaces", "/apis"] {
        let (code, body) = anonymous(&s, path);
        assert_eq!(code, 401, "{path}: {body}");
        let status: Value = serde_json::from_str(&body).expect("a Status");
        assert_eq!(status["reason"], "Unauthorized", "{path}");
    }
    // Clients with credentials are served as before.
    assert_eq!(s.ok(&["get", "ns", "default", "-o", "jsonpath={.metadata.name}"]), "default");
}

#[test]
fn no_built_in_identity_is_bound_to_cluster_admin_or_in_system_masters_but_the_admin() {
    let s = Server::start_controllers();
    let bindings = s.json(&["get", "clusterrolebindings"]);
    let items = bindings["items"].as_array().expect("items");
    let builtin = |name: &str| name.starts_with("system:") || name == "kube-apiserver-kubelet-client";
    for b in items {
        let name = b["metadata"]["name"].as_str().unwrap_or_default();
        let subjects = b["subjects"].as_array().cloned().unwrap_or_default();
        if b["roleRef"]["name"] == "cluster-admin" {
            let who: Vec<(&str, &str)> = subjects
                .iter()
                .map(|s| (s["kind"].as_str().unwrap_or_default(), s["name"].as_str().unwrap_or_default()))
                .collect();
            assert_eq!(who, [("Group", "system:masters")], "{name} binds cluster-admin to {who:?}");
        }
        for subject in &subjects {
            let subject_name = subject["name"].as_str().unwrap_or_default();
            if subject["kind"] == "User" && builtin(subject_name) {
                assert_ne!(b["roleRef"]["name"], "cluster-admin", "{subject_name} is bound to cluster-admin by {name}");
            }
        }
    }
    // Every component's certificate: none in system:masters; the admin's is.
    let cred = s.data_dir().join("server/cred");
    let mut seen = Vec::new();
    for entry in std::fs::read_dir(&cred).expect("cred dir").flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "kubeconfig") {
            let groups = certificate_groups(&path);
            assert!(!groups.iter().any(|g| g == "system:masters"), "{}: {groups:?}", path.display());
            seen.push(path.file_stem().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default());
        }
    }
    seen.sort();
    assert!(seen.contains(&"controller".to_string()) && seen.contains(&"deploy".to_string()), "{seen:?}");
    assert_eq!(certificate_groups(&s.kubeconfig()), ["system:masters"]);
    // Of the client certificates under server/tls, only the admin's is in system:masters (the
    // API server's towards kubelets is bound to system:kubelet-api-admin).
    for entry in std::fs::read_dir(s.data_dir().join("server/tls")).expect("tls dir").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("client-") && name.ends_with(".crt") {
            let groups = pem_groups(&std::fs::read(entry.path()).expect("certificate"));
            let masters = groups.iter().any(|g| g == "system:masters");
            assert_eq!(masters, name == "client-admin.crt", "{name}: {groups:?}");
        }
    }
    // The roles are upstream's, reconciled at start like the other defaults.
    for role in [
        "system:kube-controller-manager",
        "system:kube-scheduler",
        "system:node-proxier",
        "system:node",
        "system:controller:deployment-controller",
        "system:k1s-dns",
        "system:k1s-deploy",
        "system:k1s-supervisor",
    ] {
        let r = s.json(&["get", "clusterrole", role]);
        assert_eq!(r["metadata"]["labels"]["kubernetes.io/bootstrapping"], "rbac-defaults", "{role}");
    }
}

#[test]
fn controllers_and_scheduler_do_their_work_and_nothing_outside_their_roles() {
    let s = Server::start_control_plane();
    // Outside their roles: 403 naming the component.
    let out = as_component(&s, "controller", &["create", "namespace", "intruder"]);
    assert!(
        stderr(&out).contains("User \"system:kube-controller-manager\" cannot create resource \"namespaces\""),
        "{}",
        stderr(&out)
    );
    let out = as_component(
        &s,
        "controller",
        &["create", "clusterrolebinding", "x", "--clusterrole=cluster-admin", "--user=me"],
    );
    assert!(stderr(&out).contains("Forbidden") || stderr(&out).contains("forbidden"), "{}", stderr(&out));
    let out = as_component(&s, "scheduler", &["create", "secret", "generic", "s", "--from-literal=a=b"]);
    assert!(
        stderr(&out).contains("User \"system:kube-scheduler\" cannot create resource \"secrets\""),
        "{}",
        stderr(&out)
    );
    let out = as_component(&s, "scheduler", &["get", "secrets"]);
    assert!(!out.status.success());
    let out = as_component(&s, "deploy", &["get", "--raw", "/metrics"]);
    assert!(stderr(&out).contains("forbidden"), "the deployer has no non-resource URLs: {}", stderr(&out));
    assert!(!s.ok(&["get", "ns", "-o", "name"]).contains("intruder"), "nothing was written");

    // Their work: a Node to schedule on (no kubelet here: it is registered by hand).
    s.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n  labels: {kubernetes.io/hostname: n1}\n",
    );
    s.ok(&[
        "patch",
        "node",
        "n1",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"ok"}],
            "capacity":{"cpu":"4","memory":"8Gi","pods":"110"},"allocatable":{"cpu":"4","memory":"8Gi","pods":"110"}}}"#,
    ]);
    s.ok(&["create", "deployment", "web", "--image=busybox:1", "--replicas=2"]);
    s.ok(&["create", "service", "clusterip", "web", "--tcp=80:8080"]);
    // The controllers make the ReplicaSet and its pods, the scheduler binds them.
    eventually(Duration::from_secs(60), "both pods bound to n1 by the scheduler", || {
        let pods = s.json(&["get", "pods", "-l", "app=web"]);
        let items = pods["items"].as_array()?;
        (items.len() == 2 && items.iter().all(|p| p["spec"]["nodeName"] == "n1")).then_some(())
    });
    let events = s.json(&["get", "events"]);
    let scheduled = events["items"].as_array().into_iter().flatten().any(|e| e["reason"] == "Scheduled");
    assert!(scheduled, "the scheduler records its events: {events}");
    // A rollout: a new template makes a second ReplicaSet.
    s.ok(&["set", "image", "deployment/web", "busybox=busybox:2"]);
    eventually(Duration::from_secs(60), "the rollout's second ReplicaSet", || {
        let sets = s.json(&["get", "rs", "-l", "app=web"]);
        (sets["items"].as_array()?.len() == 2).then_some(())
    });
    // The Service's endpoints.
    eventually(Duration::from_secs(60), "the Service's Endpoints and EndpointSlice", || {
        let eps = s.kubectl(&["get", "endpoints", "web"]).status.success();
        let slices = s.ok(&["get", "endpointslices", "-l", "kubernetes.io/service-name=web", "-o", "name"]);
        (eps && !slices.trim().is_empty()).then_some(())
    });
}

#[test]
fn a_node_reads_only_what_its_pods_reference_and_writes_only_its_own_node() {
    let s = Server::start();
    let node = |args: &[&str]| {
        let mut a = vec!["--as=system:node:n1", "--as-group=system:nodes"];
        a.extend(args);
        s.kubectl(&a)
    };
    for name in ["mounted", "unrelated"] {
        s.ok(&["create", "secret", "generic", name, "--from-literal=k=v"]);
    }
    // (No controllers here: the ServiceAccount admission needs the account made by hand.)
    s.ok(&["create", "serviceaccount", "default"]);
    s.ok_stdin(
        &["apply", "-f", "-"],
        r#"
apiVersion: v1
kind: Pod
metadata: {name: reader}
spec:
  nodeName: n1
  containers: [{name: c, image: busybox}]
  volumes: [{name: s, secret: {secretName: mounted}}]
"#,
    );
    for n in ["n1", "n2"] {
        s.ok_stdin(&["apply", "-f", "-"], &format!("apiVersion: v1\nkind: Node\nmetadata:\n  name: {n}\n"));
    }
    let out = node(&["get", "secret", "mounted", "-o", "jsonpath={.data.k}"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = node(&["get", "secret", "unrelated"]);
    assert!(
        stderr(&out).contains(
            "secrets \"unrelated\" is forbidden: User \"system:node:n1\" cannot get resource \"secrets\" in API group \"\" in the namespace \"default\": no relationship found between node 'n1' and this object"
        ),
        "{}",
        stderr(&out)
    );
    assert!(!node(&["get", "secrets"]).status.success(), "a list");
    assert!(!node(&["get", "secrets", "-A"]).status.success());
    s.ok(&["create", "namespace", "scratch"]);
    assert!(!node(&["delete", "namespace", "scratch"]).status.success());
    // NodeRestriction: another node, a protected label on its own, another node's status.
    // (`kubectl label` and `kubectl patch` read the node first, which the Node authorizer
    // refuses; a raw patch goes on to NodeRestriction.)
    let out = node(&["label", "node", "n2", "team=x"]);
    assert!(stderr(&out).contains("node 'n1' cannot read 'n2', only its own Node object"), "{}", stderr(&out));
    let as_n1 = ["Impersonate-User: system:node:n1".to_string(), "Impersonate-Group: system:nodes".to_string()];
    let raw_patch = |path: &str, patch: &str| {
        let body = s.write_file("patch.json", patch);
        let mut headers = as_n1.to_vec();
        headers.push("Content-Type: application/merge-patch+json".into());
        s.curl_text("PATCH", path, &headers, Some(&body))
    };
    let (code, body) = raw_patch("/api/v1/nodes/n2", r#"{"metadata":{"labels":{"team":"x"}}}"#);
    assert_eq!(code, 403, "{body}");
    assert!(body.contains(r#"node \"n1\" is not allowed to modify node \"n2\""#), "{body}");
    let out = node(&["label", "node", "n1", "node-restriction.kubernetes.io/x=y"]);
    assert!(
        stderr(&out).contains("is not allowed to modify labels: node-restriction.kubernetes.io/x"),
        "{}",
        stderr(&out)
    );
    let out = node(&["label", "node", "n1", "example.com/rack=7"]);
    assert!(out.status.success(), "its own label: {}", stderr(&out));
    let (code, body) = raw_patch("/api/v1/nodes/n2/status", r#"{"status":{"phase":"Running"}}"#);
    assert_eq!(code, 403, "{body}");
    assert!(body.contains(r#"node \"n1\" is not allowed to modify node \"n2\""#), "{body}");
    // Mirror pods only, and without references.
    let out = node(&["run", "sneaky", "--image=busybox", "--overrides", r#"{"spec":{"nodeName":"n1"}}"#]);
    assert!(stderr(&out).contains("can only create mirror pods"), "{}", stderr(&out));
    let uid = s.ok(&["get", "node", "n1", "-o", "jsonpath={.metadata.uid}"]);
    let mirror = |volumes: &str| {
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"static-n1","annotations":{{"kubernetes.io/config.mirror":"h"}},
                "ownerReferences":[{{"apiVersion":"v1","kind":"Node","name":"n1","uid":"{uid}","controller":true}}]}},
                "spec":{{"nodeName":"n1","automountServiceAccountToken":false,"containers":[{{"name":"c","image":"busybox"}}],"volumes":{volumes}}}}}"#
        )
    };
    let out = s
        .kubectl_cmd(&["--as=system:node:n1", "--as-group=system:nodes", "create", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write as _;
            c.stdin
                .take()
                .expect("stdin")
                .write_all(mirror(r#"[{"name":"c","configMap":{"name":"x"}}]"#).as_bytes())?;
            c.wait_with_output()
        })
        .expect("kubectl");
    assert!(stderr(&out).contains("can not create pods that reference configmaps"), "{}", stderr(&out));
}
