//! Restart and crash safety of the store as seen through the API.

mod common;

use common::Server;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn rv(s: &Server, kind: &str, name: &str) -> String {
    s.ok(&["get", kind, name, "-o", "jsonpath={.metadata.resourceVersion}"])
}

#[test]
fn restart_keeps_objects_and_resource_versions_and_watch_resumes_from_old_version() {
    let mut s = Server::start();
    s.ok(&["create", "configmap", "one", "--from-literal=a=1"]);
    s.ok(&["create", "namespace", "kept"]);
    let rv_one = rv(&s, "cm", "one");
    let rv_ns = rv(&s, "ns", "kept");
    s.ok(&["create", "configmap", "two", "--from-literal=b=2"]);
    s.ok(&["patch", "cm", "one", "--type=merge", "-p", r#"{"data":{"a":"changed"}}"#]);
    s.ok(&["delete", "cm", "two"]);
    let rv_one_after = rv(&s, "cm", "one");
    s.restart();
    assert_eq!(rv(&s, "cm", "one"), rv_one_after);
    assert_eq!(rv(&s, "ns", "kept"), rv_ns);
    assert_eq!(s.ok(&["get", "cm", "one", "-o", "jsonpath={.data.a}"]), "changed");
    // A watch from a resourceVersion taken before the restart replays what followed it.
    let out = s.ok(&[
        "get",
        "--raw",
        &format!("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv_one}&timeoutSeconds=2"),
    ]);
    let events: Vec<(String, String)> = out
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|e| {
            (
                e["type"].as_str().unwrap_or("").to_string(),
                e["object"]["metadata"]["name"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = [("ADDED", "two"), ("MODIFIED", "one"), ("DELETED", "two")]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(events, want, "watch replay:\n{out}");
}

#[test]
fn kill_9_loses_no_acknowledged_write() {
    let mut s = Server::start();
    let acked: Arc<Mutex<BTreeMap<String, String>>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let kubeconfig = s.kubeconfig();
    let home = s.dir.path().join("home");
    let mut workers = Vec::new();
    for w in 0..6 {
        let (acked, stop, kubeconfig, home) = (acked.clone(), stop.clone(), kubeconfig.clone(), home.clone());
        workers.push(std::thread::spawn(move || {
            // One kubectl process streams many creates: `kubectl create -f -` of a list.
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let name = format!("w{w}-{i}");
                let out = std::process::Command::new(common::kubectl_bin())
                    .args([
                        "create",
                        "configmap",
                        &name,
                        &format!("--from-literal=v={i}"),
                        "-o",
                        "jsonpath={.metadata.resourceVersion}",
                    ])
                    .env("KUBECONFIG", &kubeconfig)
                    .env("HOME", &home)
                    .output();
                match out {
                    Ok(o) if o.status.success() => {
                        acked.lock().expect("lock").insert(name, String::from_utf8_lossy(&o.stdout).to_string());
                    }
                    _ => {}
                }
                i += 1;
            }
        }));
    }
    let started = Instant::now();
    while acked.lock().expect("lock").len() < 60 && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(50));
    }
    s.crash_and_restart();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in workers {
        let _ = w.join();
    }
    let acked = acked.lock().expect("lock").clone();
    assert!(acked.len() >= 60, "only {} writes acknowledged", acked.len());
    let listed = s.json(&["get", "configmaps", "-n", "default"]);
    let present: BTreeMap<String, String> = listed["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| {
            (
                i["metadata"]["name"].as_str().unwrap_or("").to_string(),
                i["metadata"]["resourceVersion"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    for (name, rv) in &acked {
        assert_eq!(present.get(name), Some(rv), "acknowledged write {name} (rv {rv}) lost after kill -9");
    }
    // The store is consistent: new writes continue after the highest revision.
    s.ok(&["create", "configmap", "after-crash"]);
    let after: u64 = rv(&s, "cm", "after-crash").parse().expect("rv");
    let max_acked = acked.values().filter_map(|v| v.parse::<u64>().ok()).max().unwrap_or(0);
    assert!(after > max_acked);
}
