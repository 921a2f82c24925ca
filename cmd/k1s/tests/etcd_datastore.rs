//! `k1s server --datastore-endpoint`: the API server on an external etcd v3 (a real one on
//! loopback), whatever `K1S_TEST_DATASTORE` says. The rest of the suite runs on etcd too with
//! `K1S_TEST_DATASTORE=etcd`.

mod common;

use common::Server;
use std::process::Command;

fn b64(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// One key as etcd holds it, through etcd's JSON gateway (`/v3/kv/range`).
fn etcd_get(s: &Server, key: &str) -> serde_json::Value {
    let url = s.etcd_url().expect("the server runs on etcd");
    let out = Command::new("curl")
        .args(["-sS", "-X", "POST", &format!("{url}/v3/kv/range"), "-d"])
        .arg(format!(r#"{{"key":"{}"}}"#, b64(key)))
        .output()
        .expect("curl");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("etcd's JSON")
}

#[test]
fn objects_live_in_etcd_under_registry_keys_as_json_with_the_mod_revision_as_resource_version() {
    let s = Server::start_on_etcd(&[]);
    s.ok(&["create", "configmap", "one", "--from-literal=a=1"]);
    let rv = s.ok(&["get", "cm", "one", "-o", "jsonpath={.metadata.resourceVersion}"]);
    let got = etcd_get(&s, "/registry/configmaps/default/one");
    let kv = &got["kvs"][0];
    assert_eq!(kv["mod_revision"].as_str(), Some(rv.as_str()), "{got}");
    use base64::Engine as _;
    let value = base64::engine::general_purpose::STANDARD.decode(kv["value"].as_str().expect("value")).expect("base64");
    let obj: serde_json::Value = serde_json::from_slice(&value).expect("the value is the object's JSON");
    assert_eq!(obj["data"]["a"], "1");
    assert_eq!(obj["metadata"]["name"], "one");
    // A stale update is a conflict, decided by etcd's compare on the mod revision.
    s.ok(&["patch", "cm", "one", "--type=merge", "-p", r#"{"data":{"a":"2"}}"#]);
    let stale = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"one","resourceVersion":"{rv}"}},"data":{{"a":"3"}}}}"#
    );
    let out = s.kubectl_stdin(&["replace", "-f", "-"], &stale);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("the object has been modified"), "{out:?}");
}

#[test]
fn a_restarted_server_on_etcd_keeps_objects_and_resumes_a_watch_from_before_the_restart() {
    let mut s = Server::start_on_etcd(&[]);
    s.ok(&["create", "configmap", "one", "--from-literal=a=1"]);
    let rv_one = s.ok(&["get", "cm", "one", "-o", "jsonpath={.metadata.resourceVersion}"]);
    s.ok(&["create", "configmap", "two"]);
    s.ok(&["patch", "cm", "one", "--type=merge", "-p", r#"{"data":{"a":"changed"}}"#]);
    s.ok(&["delete", "cm", "two"]);
    let rv_after = s.ok(&["get", "cm", "one", "-o", "jsonpath={.metadata.resourceVersion}"]);
    s.restart();
    assert_eq!(s.ok(&["get", "cm", "one", "-o", "jsonpath={.metadata.resourceVersion}"]), rv_after);
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
    let want = [("ADDED", "two"), ("MODIFIED", "one"), ("DELETED", "two")].map(|(a, b)| (a.to_string(), b.to_string()));
    assert_eq!(events, want, "watch replay:\n{out}");
}

#[test]
fn snapshots_on_etcd_hold_etcds_own_which_etcdctl_restores() {
    let mut s = Server::start_on_etcd(&[]);
    s.ok(&["create", "configmap", "before"]);
    let k1s = |args: &[&str]| {
        let out = Command::new(common::k1s_bin()).args(args).output().expect("k1s");
        (
            out.status.success(),
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)),
        )
    };
    let data_dir = format!("--data-dir={}", s.data_dir().display());
    let (ok, out) = k1s(&["snapshot", "save", &data_dir]);
    assert!(ok, "{out}");
    let path = out.split_whitespace().nth(2).expect("saved snapshot PATH").to_string();
    let (ok, list) = k1s(&["snapshot", "ls", &data_dir]);
    assert!(ok && list.contains(" etcd "), "{list}");
    s.ok(&["create", "configmap", "after"]);

    // The embedded store's restore refuses it and says what to do instead.
    let elsewhere = tempfile::tempdir().expect("tmp");
    let (ok, out) = k1s(&[
        "server",
        &format!("--data-dir={}", elsewhere.path().display()),
        &format!("--cluster-reset-restore-path={path}"),
    ]);
    assert!(!ok && out.contains("is of etcd") && out.contains("k1s snapshot extract"), "{out}");

    // Its database is etcd's own: etcdctl restores it into a new etcd, where a server (with the
    // cluster's token) finds the objects of before the snapshot and not those of after.
    let db = elsewhere.path().join("restore.db");
    let (ok, out) = k1s(&["snapshot", "extract", &path, &db.display().to_string()]);
    assert!(ok, "{out}");
    let (ok, token) = k1s(&["token", "create", &data_dir]);
    assert!(ok, "{token}");
    s.stop();
    let restored = common::Etcd::start_from_snapshot(&db);
    let t = Server::start_shared(&[
        &format!("--datastore-endpoint={}", restored.url),
        &format!("--token={}", token.trim()),
    ]);
    t.ok(&["get", "configmap", "before"]);
    assert!(!t.kubectl(&["get", "configmap", "after"]).status.success(), "written after the snapshot");
    drop(t);
    drop(restored);
}
