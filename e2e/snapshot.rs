//! End to end with real containerd: a restored Deployment's pods run again with their uids, and a
//! pod created after the snapshot is stopped by the kubelet once the restored API lacks it.

#[path = "../cmd/k1s/tests/common/mod.rs"]
mod common;

use common::{eventually, Server};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

const IMAGE: &str = "127.0.0.1:5000/busybox:1.36";

const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - {name: web, image: "127.0.0.1:5000/busybox:1.36", command: ["sleep", "3600"]}
"#;

/// Uid, container id and whether the container runs, of each pod labelled `app=web`.
fn web_pods(s: &Server) -> Vec<(String, String, bool)> {
    let list = s.json(&["get", "pods", "-l", "app=web"]);
    let mut out: Vec<(String, String, bool)> = list["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|p: &Value| {
                    let c = &p["status"]["containerStatuses"][0];
                    (
                        p["metadata"]["uid"].as_str().unwrap_or_default().to_string(),
                        c["containerID"].as_str().unwrap_or_default().to_string(),
                        c["state"]["running"].is_object(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

#[test]
fn restored_deployment_pods_run_and_pods_missing_from_the_snapshot_are_stopped() {
    let mut s = Server::start_node();
    s.ok_stdin(&["apply", "-f", "-"], DEPLOYMENT);
    s.ok(&["rollout", "status", "deployment/web", "--timeout=180s"]);
    let before = web_pods(&s);
    assert_eq!(before.len(), 2);
    assert!(before.iter().all(|(_, _, running)| *running), "{before:?}");

    let out = Command::new(common::k1s_bin())
        .args(["snapshot", "save", &format!("--data-dir={}", s.data_dir().display())])
        .output()
        .expect("k1s snapshot save");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "save: {}", String::from_utf8_lossy(&out.stderr));
    let file = PathBuf::from(
        stdout.strip_prefix("saved snapshot ").and_then(|r| r.split(" (revision").next()).expect("save output"),
    );

    // After the snapshot: the Deployment goes (its pods stop) and a stray pod starts.
    s.ok(&["delete", "deployment", "web"]);
    eventually(Duration::from_secs(90), "the deployment's pods to go", || web_pods(&s).is_empty().then_some(()));
    s.ok(&["run", "stray", &format!("--image={IMAGE}"), "--restart=Never", "--", "sleep", "3600"]);
    s.ok(&["wait", "--for=condition=Ready", "pod/stray", "--timeout=120s"]);
    let stray_uid = s.ok(&["get", "pod", "stray", "-o", "jsonpath={.metadata.uid}"]);
    let stray_dir = s.data_dir().join("agent/kubelet/pods").join(&stray_uid);
    assert!(stray_dir.exists(), "{} exists while the pod runs", stray_dir.display());

    s.stop();
    let out = Command::new(common::k1s_bin())
        .arg("server")
        .arg(format!("--data-dir={}", s.data_dir().display()))
        .arg(format!("--config={}", s.dir.path().join("config.yaml").display()))
        .arg(format!("--cluster-reset-restore-path={}", file.display()))
        .output()
        .expect("restore");
    assert!(out.status.success(), "restore: {}", String::from_utf8_lossy(&out.stderr));
    s.restart();
    s.wait_node_ready();

    // The restored pods (same uids) run again, in new containers (theirs stopped with the
    // Deployment's deletion).
    let old_containers: Vec<&String> = before.iter().map(|(_, c, _)| c).collect();
    let after = eventually(Duration::from_secs(180), "the restored pods to run", || {
        let pods = web_pods(&s);
        let fresh = pods.iter().all(|(_, c, running)| *running && !c.is_empty() && !old_containers.contains(&c));
        (pods.len() == 2 && fresh).then_some(pods)
    });
    let uids = |p: &[(String, String, bool)]| p.iter().map(|(u, _, _)| u.clone()).collect::<Vec<_>>();
    assert_eq!(uids(&after), uids(&before), "the same pods, by uid");
    assert!(!s.kubectl(&["get", "pod", "stray"]).status.success(), "the stray pod is not in the restored API");
    eventually(Duration::from_secs(120), "the kubelet to stop the stray pod", || (!stray_dir.exists()).then_some(()));
}
