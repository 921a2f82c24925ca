//! Store snapshots through the CLI against a real server: `k1s snapshot save|ls|delete` while it
//! serves, `k1s server --cluster-reset-restore-path` while it is stopped, and the schedule.

mod common;

use common::{eventually, Server};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

const GADGETS: &str = r#"
apiVersion: example.com/v1
kind: Gadget
metadata: {name: one, namespace: snap}
spec: {size: 1}
---
apiVersion: example.com/v1
kind: Gadget
metadata: {name: two, namespace: snap}
spec: {size: 2}
"#;

fn k1s(s: &Server, args: &[&str]) -> Output {
    Command::new(common::k1s_bin())
        .args(args)
        .arg(format!("--data-dir={}", s.data_dir().display()))
        .env_remove("K1S_DATA_DIR")
        .output()
        .expect("run k1s")
}

fn k1s_ok(s: &Server, args: &[&str]) -> String {
    let out = k1s(s, args);
    assert!(
        out.status.success(),
        "k1s {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `k1s snapshot save`; returns the file it wrote.
fn save(s: &Server) -> PathBuf {
    let out = k1s_ok(s, &["snapshot", "save"]);
    let path = out
        .strip_prefix("saved snapshot ")
        .and_then(|rest| rest.split(" (revision").next())
        .unwrap_or_else(|| panic!("unexpected save output {out:?}"));
    PathBuf::from(path)
}

fn restore(s: &Server, file: &Path) -> Output {
    restore_as(s, &[&format!("--cluster-reset-restore-path={}", file.display())])
}

/// `k1s server` on the test's data dir with `flags` (a restore, or k3s's `--cluster-reset`).
fn restore_as(s: &Server, flags: &[&str]) -> Output {
    Command::new(common::k1s_bin())
        .arg("server")
        .arg(format!("--data-dir={}", s.data_dir().display()))
        .arg(format!("--config={}", s.dir.path().join("config.yaml").display()))
        .args(flags)
        .output()
        .expect("run k1s server --cluster-reset-restore-path")
}

fn args(o: &[String]) -> Vec<&str> {
    o.iter().map(String::as_str).collect()
}

fn uid(s: &Server, args: &[&str]) -> String {
    let mut a = vec!["get"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["-o", "jsonpath={.metadata.uid}"]);
    let uid = s.ok(&a);
    assert!(!uid.is_empty(), "no uid for {args:?}");
    uid
}

fn list_rv(s: &Server, path: &str) -> u64 {
    let list: serde_json::Value = serde_json::from_str(&s.ok(&["get", "--raw", path])).expect("list json");
    list["metadata"]["resourceVersion"].as_str().and_then(|v| v.parse().ok()).expect("list resourceVersion")
}

/// Every file under `dir` with its length and a hash of its contents.
fn fingerprint(dir: &Path) -> BTreeMap<PathBuf, (u64, u64)> {
    use std::hash::{Hash as _, Hasher as _};
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let p = e.path();
            let ft = e.file_type().expect("file type");
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() {
                let bytes = std::fs::read(&p).expect("read");
                let mut h = std::collections::hash_map::DefaultHasher::new();
                bytes.hash(&mut h);
                out.insert(p, (bytes.len() as u64, h.finish()));
            }
        }
    }
    out
}

#[test]
fn snapshot_round_trip_restores_every_object_with_its_uid_and_old_resource_versions_get_410() {
    let mut s = Server::start_controllers();
    s.ok(&["create", "namespace", "snap"]);
    s.ok(&["-n", "snap", "create", "deployment", "web", "--image=127.0.0.1:5000/busybox:1.36", "--replicas=2"]);
    s.ok(&["-n", "snap", "create", "configmap", "cm1", "--from-literal=a=1"]);
    s.ok(&["-n", "snap", "create", "configmap", "cm2", "--from-literal=b=2"]);
    s.ok_stdin(&["apply", "-f", "-"], CRD);
    s.ok(&["wait", "--for=condition=Established", "crd/gadgets.example.com", "--timeout=30s"]);
    s.ok_stdin(&["apply", "-f", "-"], GADGETS);
    // The Deployment's ReplicaSet and its two (unscheduled) pods.
    let pods = eventually(Duration::from_secs(30), "the deployment's pods", || {
        let names = s.ok(&["-n", "snap", "get", "pods", "-l", "app=web", "-o", "jsonpath={.items[*].metadata.name}"]);
        let names: Vec<String> = names.split_whitespace().map(str::to_string).collect();
        (names.len() == 2).then_some(names)
    });
    let rs = s.ok(&["-n", "snap", "get", "rs", "-l", "app=web", "-o", "jsonpath={.items[0].metadata.name}"]);
    let mut objects: Vec<Vec<String>> = vec![
        vec!["namespace".into(), "snap".into()],
        vec!["crd".into(), "gadgets.example.com".into()],
        vec!["-n".into(), "snap".into(), "deployment".into(), "web".into()],
        vec!["-n".into(), "snap".into(), "rs".into(), rs],
        vec!["-n".into(), "snap".into(), "configmap".into(), "cm1".into()],
        vec!["-n".into(), "snap".into(), "configmap".into(), "cm2".into()],
        vec!["-n".into(), "snap".into(), "gadgets".into(), "one".into()],
        vec!["-n".into(), "snap".into(), "gadgets".into(), "two".into()],
    ];
    objects.extend(pods.iter().map(|p| vec!["-n".into(), "snap".into(), "pod".into(), p.clone()]));
    let uids: Vec<String> = objects.iter().map(|o| uid(&s, &args(o))).collect();

    let file = save(&s);
    assert!(file.starts_with(s.data_dir().join("server/db/snapshots")), "default folder: {}", file.display());
    let ls = k1s_ok(&s, &["snapshot", "ls"]);
    let name = file.file_name().expect("name").to_string_lossy().into_owned();
    assert!(ls.lines().any(|l| l.starts_with(&name)), "ls shows the snapshot:\n{ls}");
    let rv_at_save = list_rv(&s, "/api/v1/namespaces/snap/configmaps");

    s.ok(&["-n", "snap", "delete", "deployment", "web"]);
    s.ok(&["-n", "snap", "delete", "configmap", "cm1", "cm2"]);
    s.ok(&["-n", "snap", "delete", "gadgets", "--all"]);
    s.ok(&["delete", "crd", "gadgets.example.com"]);
    s.ok(&["create", "configmap", "after-snapshot"]);
    let rv_before_restore = list_rv(&s, "/api/v1/namespaces/default/configmaps");
    assert!(rv_before_restore > rv_at_save);
    s.stop();

    // k3s's form (`--cluster-reset` alone changes nothing and says so), then the restore as k3s
    // users type it: the same as the k1s form, `--cluster-reset-restore-path` alone.
    let alone = restore_as(&s, &["--cluster-reset"]);
    let said = String::from_utf8_lossy(&alone.stdout);
    assert!(alone.status.success() && said.contains("nothing was changed"), "{said}");
    let out = restore_as(&s, &["--cluster-reset", &format!("--cluster-reset-restore-path={}", file.display())]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "restore failed: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("start k1s again"), "{stdout}");
    s.restart();

    for (o, want) in objects.iter().zip(&uids) {
        assert_eq!(&uid(&s, &args(o)), want, "{o:?} is back with its uid");
    }
    assert!(!s.kubectl(&["get", "configmap", "after-snapshot"]).status.success(), "a later write is gone");
    assert_eq!(s.ok(&["-n", "snap", "get", "gadget", "two", "-o", "jsonpath={.spec.size}"]), "2");

    // A client holding a resourceVersion from before the restore is told to relist.
    for rv in [rv_at_save, rv_before_restore] {
        let out = s.ok(&[
            "get",
            "--raw",
            &format!("/api/v1/namespaces/snap/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=2"),
        ]);
        let first: serde_json::Value = serde_json::from_str(out.lines().next().expect("an event")).expect("json");
        assert_eq!(first["type"], "ERROR", "watch from {rv}: {out}");
        assert_eq!(first["object"]["code"], 410, "watch from {rv}: {out}");
    }
    // The relist shows the restored objects at a version above every earlier one.
    let list: serde_json::Value =
        serde_json::from_str(&s.ok(&["get", "--raw", "/api/v1/namespaces/snap/configmaps"])).expect("list json");
    let names: Vec<&str> =
        list["items"].as_array().expect("items").iter().filter_map(|i| i["metadata"]["name"].as_str()).collect();
    assert_eq!(names, ["cm1", "cm2", "kube-root-ca.crt"]);
    let rv_after: u64 = list["metadata"]["resourceVersion"].as_str().and_then(|v| v.parse().ok()).expect("rv");
    assert!(rv_after > rv_before_restore, "resourceVersions never go backwards: {rv_after} <= {rv_before_restore}");
    let created: u64 = s
        .ok(&["-n", "snap", "create", "configmap", "cm3", "-o", "jsonpath={.metadata.resourceVersion}"])
        .parse()
        .expect("rv");
    assert!(created > rv_before_restore);

    // The snapshot folder moved along with the restored store; delete removes the file.
    assert!(file.exists());
    let out = k1s_ok(&s, &["snapshot", "delete", &name]);
    assert!(out.contains("deleted"), "{out}");
    assert!(!file.exists());
    assert!(!k1s(&s, &["snapshot", "delete", &name]).status.success(), "deleting twice fails");
}

#[test]
fn a_snapshot_with_one_flipped_byte_or_a_newer_format_is_refused_and_the_data_dir_is_unchanged() {
    let mut s = Server::start_with(&["--disable-snapshots"]);
    s.ok(&["create", "configmap", "kept", "--from-literal=a=1"]);
    let file = save(&s);
    s.ok(&["create", "configmap", "later"]);
    s.stop();
    let good = std::fs::read(&file).expect("read snapshot");

    let mut flipped = good.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 0x01;
    let flipped_file = s.dir.path().join("flipped.snap");
    std::fs::write(&flipped_file, &flipped).expect("write");
    let before = fingerprint(&s.data_dir());
    let out = restore(&s, &flipped_file);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a corrupt snapshot is refused");
    assert!(stderr.contains("corrupt") && stderr.contains("checksum"), "clear message: {stderr}");
    assert_eq!(fingerprint(&s.data_dir()), before, "the data dir is untouched");

    let mut newer = good;
    let needle = b"\"formatVersion\":1";
    let at = newer.windows(needle.len()).position(|w| w == needle).expect("format version in the manifest");
    newer[at + needle.len() - 1] = b'9';
    let newer_file = s.dir.path().join("newer.snap");
    std::fs::write(&newer_file, &newer).expect("write");
    let out = restore(&s, &newer_file);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a newer format is refused");
    assert!(stderr.contains("format version 9, newer than this k1s supports (1)"), "clear message: {stderr}");
    assert_eq!(fingerprint(&s.data_dir()), before, "the data dir is untouched");

    s.restart();
    assert_eq!(s.ok(&["get", "configmap", "kept", "-o", "jsonpath={.data.a}"]), "1");
    assert!(s.kubectl(&["get", "configmap", "later"]).status.success(), "nothing was restored");
}

#[test]
fn restore_refuses_while_the_server_runs_on_the_data_dir() {
    let s = Server::start_with(&["--disable-snapshots"]);
    let file = save(&s);
    let out = restore(&s, &file);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "restoring under a running server must fail");
    assert!(stderr.contains("is k1s server still running?"), "{stderr}");
    assert!(s.kubectl(&["get", "--raw", "/readyz"]).status.success(), "the server still serves");
}

#[test]
fn scheduled_snapshots_every_minute_keep_the_newest_two() {
    let s = Server::start_with(&["--snapshot-schedule-cron=* * * * *", "--snapshot-retention=2"]);
    s.ok(&["create", "configmap", "a"]);
    let on_demand = save(&s);
    // Three scheduled snapshots take at most three minutes (one per minute boundary).
    eventually(Duration::from_secs(200), "three scheduled snapshots", || {
        (s.logs().matches("scheduled snapshot saved").count() >= 3).then_some(())
    });
    let ls = k1s_ok(&s, &["snapshot", "ls"]);
    let scheduled: Vec<&str> = ls.lines().filter(|l| l.starts_with("k1s-snapshot-")).collect();
    assert_eq!(scheduled.len(), 2, "retention 2:\n{ls}");
    assert!(on_demand.exists(), "retention leaves on-demand snapshots alone:\n{ls}");
}
