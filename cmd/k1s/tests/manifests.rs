//! The manifests folder (`<data-dir>/server/manifests`) against a real `k1s server
//! --disable-agent`, seen with stock kubectl: files dropped, edited and removed while the server
//! runs, `.skip` files, an invalid file, a CRD with its objects, and the built-in add-ons that
//! `--disable` removes.

mod common;

use common::{eventually, Server};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The acceptance bound from a file's write to its objects in the API.
const WITHIN: Duration = Duration::from_secs(2);

fn manifests(s: &Server) -> PathBuf {
    s.data_dir().join("server").join("manifests")
}

/// The first kubectl call of a test discovers every API group (a second or more): done before
/// a file is dropped, so that the timings measure the server.
fn warm_up(s: &Server) {
    s.ok(&["api-resources", "-o", "name"]);
}

/// Writes a file the way an editor or `cp` would leave it: complete when it appears.
fn drop_file(s: &Server, name: &str, text: &str) {
    let dir = manifests(s);
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).expect("write manifest");
    std::fs::rename(&tmp, dir.join(name)).expect("move manifest into place");
}

fn exists(s: &Server, args: &[&str]) -> bool {
    let mut a = vec!["get"];
    a.extend(args);
    a.extend(["-o", "name"]);
    s.kubectl(&a).status.success()
}

/// Waits (at most [`WITHIN`]) for `args` to exist (or, with `present: false`, to be gone) and
/// returns how long it took.
fn within(s: &Server, args: &[&str], present: bool) -> Duration {
    let start = Instant::now();
    let what = format!("{args:?} to be {}", if present { "created" } else { "deleted" });
    while exists(s, args) != present {
        assert!(start.elapsed() < WITHIN, "timed out waiting for {what}; server log tail:\n{}", tail(&s.logs(), 40));
        std::thread::sleep(Duration::from_millis(50));
    }
    let took = start.elapsed();
    eprintln!("{what}: {took:?}");
    assert!(took <= WITHIN, "{what} took {took:?}");
    took
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<_> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn configmap(name: &str, namespace: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {namespace}\ndata:\n  key: {value}\n"
    )
}

#[test]
fn files_dropped_edited_and_removed_while_the_server_runs_are_applied_and_pruned() {
    let s = Server::start_controllers();
    warm_up(&s);
    // The namespace comes after the object in it: the deployer orders Namespaces first.
    let app = format!(
        "{}---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: dropped\n---\n{}",
        configmap("settings", "dropped", "one"),
        configmap("second", "default", "x")
    );
    drop_file(&s, "app.yaml", &app);
    within(&s, &["configmap", "settings", "-n", "dropped"], true);
    within(&s, &["configmap", "second"], true);
    let cm = s.json(&["get", "configmap", "settings", "-n", "dropped", "--show-managed-fields"]);
    let managers: Vec<_> = cm["metadata"]["managedFields"]
        .as_array()
        .expect("managedFields")
        .iter()
        .map(|m| (m["manager"].as_str().unwrap_or_default().to_owned(), m["operation"].clone()))
        .collect();
    assert_eq!(managers, [("k1s-deploy".to_owned(), serde_json::json!("Apply"))]);
    let addon = s.json(&["get", "addon", "app", "-n", "kube-system"]);
    assert_eq!(addon["spec"]["source"], manifests(&s).join("app.yaml").display().to_string());
    assert!(addon["spec"]["checksum"].as_str().is_some_and(|c| c.starts_with("sha256:")), "{addon}");
    assert_eq!(addon["status"]["objects"].as_array().map(Vec::len), Some(3), "{addon}");

    // Edited: a value changes and an object leaves the file.
    let edited = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: dropped\n---\n{}",
        configmap("settings", "dropped", "two")
    );
    drop_file(&s, "app.yaml", &edited);
    within(&s, &["configmap", "second"], false);
    let start = Instant::now();
    eventually(WITHIN, "the edited value", || {
        let v = s.ok(&["get", "configmap", "settings", "-n", "dropped", "-o", "jsonpath={.data.key}"]);
        (v == "two").then_some(())
    });
    eprintln!("edit applied after {:?}", start.elapsed());

    // Removed: its objects go, and its Addon.
    std::fs::remove_file(manifests(&s).join("app.yaml")).expect("rm");
    within(&s, &["configmap", "settings", "-n", "dropped"], false);
    eventually(Duration::from_secs(30), "the namespace to be deleted", || {
        (!exists(&s, &["namespace", "dropped"])).then_some(())
    });
    within(&s, &["addon", "app", "-n", "kube-system"], false);
}

#[test]
fn a_skip_file_disables_its_manifest_and_an_invalid_file_is_an_event_while_the_others_apply() {
    let s = Server::start();
    warm_up(&s);
    std::fs::write(manifests(&s).join("held.yaml.skip"), "").expect("skip file");
    drop_file(&s, "held.yaml", &configmap("held", "default", "x"));
    drop_file(&s, "bad.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: [unclosed\n");
    drop_file(&s, "good.yaml", &configmap("good", "default", "x"));
    // The good file applies although the bad one is next to it (and was written before it).
    within(&s, &["configmap", "good"], true);
    assert!(!exists(&s, &["configmap", "held"]), "a .skip file keeps its manifest from being applied");

    let event = eventually(Duration::from_secs(5), "an InvalidManifest event", || {
        let events = s.json(&["get", "events", "-n", "kube-system"]);
        events["items"].as_array()?.iter().find(|e| e["reason"] == "InvalidManifest").cloned()
    });
    assert_eq!(event["type"], "Warning");
    assert_eq!(event["involvedObject"]["kind"], "Addon");
    assert_eq!(event["involvedObject"]["name"], "bad");
    let msg = event["message"].as_str().unwrap_or_default();
    assert!(msg.starts_with("bad.yaml: invalid YAML"), "{msg}");
    let logs = s.logs();
    assert!(
        logs.lines().any(|l| l.contains("manifest not (fully) applied")
            && l.contains("bad.yaml")
            && l.contains("invalid YAML")),
        "a log line names the file and the error:\n{logs}"
    );

    // Fixing the file applies it; removing the .skip file applies the held one.
    drop_file(&s, "bad.yaml", &configmap("fixed", "default", "x"));
    within(&s, &["configmap", "fixed"], true);
    std::fs::remove_file(manifests(&s).join("held.yaml.skip")).expect("rm skip");
    within(&s, &["configmap", "held"], true);
}

const CRD_AND_OBJECT: &str = r#"
apiVersion: example.com/v1
kind: Gadget
metadata: {name: first, namespace: default}
spec: {size: 3}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  names: {kind: Gadget, plural: gadgets, singular: gadget, listKind: GadgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
"#;

#[test]
fn a_crd_and_an_object_of_it_in_one_file_apply_and_are_deleted_with_the_file() {
    let s = Server::start();
    warm_up(&s);
    drop_file(&s, "gadgets.yaml", CRD_AND_OBJECT);
    within(&s, &["gadget", "first"], true);
    assert_eq!(s.ok(&["get", "gadget", "first", "-o", "jsonpath={.spec.size}"]), "3");
    std::fs::remove_file(manifests(&s).join("gadgets.yaml")).expect("rm");
    within(&s, &["gadget", "first"], false);
    eventually(Duration::from_secs(10), "the CRD to be deleted", || {
        (!exists(&s, &["crd", "gadgets.example.com"])).then_some(())
    });
}

#[test]
fn built_in_add_ons_are_manifests_that_disable_removes_with_their_objects() {
    let mut s = Server::start();
    let dir = manifests(&s);
    // Present as soon as the server serves: the first pass precedes the kubeconfig.
    let svc = s.json(&["get", "service", "kube-dns", "-n", "kube-system"]);
    assert_eq!(svc["spec"]["clusterIP"], "10.43.0.10");
    assert_eq!(svc["metadata"]["annotations"]["k1s.io/node-local"], "true");
    let class = s.json(&["get", "storageclass", "local-path"]);
    assert_eq!(class["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"], "true");
    assert!(dir.join("dns.yaml").exists() && dir.join("local-storage.yaml").exists());
    let addons = s.ok(&["get", "addons", "-n", "kube-system", "-o", "name"]);
    assert_eq!(addons, "addon.k1s.io/dns\naddon.k1s.io/local-storage\n");

    // k1s's own copy is rewritten at start: an edit does not survive a restart.
    std::fs::write(dir.join("dns.yaml"), "# edited\n").expect("edit");
    within(&s, &["service", "kube-dns", "-n", "kube-system"], false);
    s.restart();
    assert!(exists(&s, &["service", "kube-dns", "-n", "kube-system"]));

    // `--disable` (here from the config file) removes the files and the objects.
    std::fs::write(s.dir.path().join("config.yaml"), "disable: [dns, local-storage]\n").expect("config");
    s.restart();
    assert!(!dir.join("dns.yaml").exists() && !dir.join("local-storage.yaml").exists());
    assert!(!exists(&s, &["service", "kube-dns", "-n", "kube-system"]), "--disable dns leaves no kube-dns Service");
    assert!(!exists(&s, &["storageclass", "local-path"]));
    assert!(!exists(&s, &["addon", "dns", "-n", "kube-system"]));

    // A server started with --disable dns never has one.
    let fresh = Server::start_with(&["--disable=dns"]);
    assert!(!manifests(&fresh).join("dns.yaml").exists());
    assert!(!exists(&fresh, &["service", "kube-dns", "-n", "kube-system"]));
    assert!(exists(&fresh, &["storageclass", "local-path"]));
}
