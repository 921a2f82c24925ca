//! Persistent volumes with stock kubectl against a real `k1s server --disable-agent` with its
//! controllers: the
//! default `local-path` StorageClass, the DefaultStorageClass admission, and the binder's
//! binding of claims to fitting volumes and release of volumes whose claims are gone.

mod common;

use common::{eventually, Server};
use std::time::Duration;

const VOLUMES: &str = r#"
apiVersion: v1
kind: PersistentVolume
metadata: {name: small, labels: {tier: db}}
spec:
  capacity: {storage: 100Mi}
  accessModes: [ReadWriteOnce]
  storageClassName: manual
  hostPath: {path: /tmp/k1s-test-small}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: big, labels: {tier: db}}
spec:
  capacity: {storage: 2Gi}
  accessModes: [ReadWriteOnce, ReadOnlyMany]
  storageClassName: manual
  hostPath: {path: /tmp/k1s-test-big}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: medium}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: manual
  persistentVolumeReclaimPolicy: Retain
  hostPath: {path: /tmp/k1s-test-medium}
"#;

fn claim(name: &str, class: Option<&str>, size: &str) -> String {
    let class = class.map(|c| format!("  storageClassName: \"{c}\"\n")).unwrap_or_default();
    format!(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: {name}}}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {{requests: {{storage: {size}}}}}\n{class}"
    )
}

fn jsonpath(s: &Server, what: &[&str], path: &str) -> String {
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    let p = format!("jsonpath={path}");
    args.extend_from_slice(&["-o", &p]);
    s.ok(&args)
}

#[test]
fn claims_bind_to_the_smallest_fitting_volume_and_release_it_when_deleted() {
    let s = Server::start_controllers();
    s.ok_stdin(&["apply", "-f", "-"], VOLUMES);
    eventually(Duration::from_secs(20), "the volumes to be Available", || {
        let phases = jsonpath(&s, &["pv"], "{.items[*].status.phase}");
        (phases == "Available Available Available").then_some(())
    });
    s.ok_stdin(&["apply", "-f", "-"], &claim("data", Some("manual"), "500Mi"));
    eventually(Duration::from_secs(20), "the claim to be bound", || {
        (jsonpath(&s, &["pvc", "data"], "{.status.phase}") == "Bound").then_some(())
    });
    // small is too small; medium (1Gi) is the smallest that fits.
    assert_eq!(jsonpath(&s, &["pvc", "data"], "{.spec.volumeName}"), "medium");
    assert_eq!(jsonpath(&s, &["pvc", "data"], "{.status.capacity.storage}"), "1Gi");
    let uid = jsonpath(&s, &["pvc", "data"], "{.metadata.uid}");
    eventually(Duration::from_secs(20), "the volume to be bound", || {
        (jsonpath(&s, &["pv", "medium"], "{.status.phase}") == "Bound").then_some(())
    });
    assert_eq!(jsonpath(&s, &["pv", "medium"], "{.spec.claimRef.uid}"), uid);
    assert_eq!(jsonpath(&s, &["pvc", "data"], "{.metadata.annotations.pv\\.kubernetes\\.io/bind-completed}"), "yes");
    let table = s.ok(&["get", "pvc", "data"]);
    assert!(table.contains("Bound") && table.contains("medium") && table.contains("1Gi"), "{table}");

    // A selector narrows the volumes a claim may take.
    let selected =
        claim("picky", Some("manual"), "50Mi").replace("spec:\n", "spec:\n  selector: {matchLabels: {tier: db}}\n");
    s.ok_stdin(&["apply", "-f", "-"], &selected);
    eventually(Duration::from_secs(20), "the selective claim to be bound", || {
        (jsonpath(&s, &["pvc", "picky"], "{.spec.volumeName}") == "small").then_some(())
    });

    // A claim nothing fits waits, and says why (as upstream: its class, which no StorageClass
    // defines, cannot provision one).
    s.ok_stdin(&["apply", "-f", "-"], &claim("huge", Some("manual"), "10Ti"));
    eventually(Duration::from_secs(20), "a ProvisioningFailed event", || {
        let events = s.ok(&["get", "events", "--field-selector", "involvedObject.name=huge"]);
        (events.contains("ProvisioningFailed") && events.contains(r#"storageclass.storage.k8s.io "manual" not found"#))
            .then_some(())
    });
    assert_eq!(jsonpath(&s, &["pvc", "huge"], "{.status.phase}"), "Pending");

    // Claims and volumes are protected while in use (upstream's finalizers).
    assert_eq!(jsonpath(&s, &["pvc", "data"], "{.metadata.finalizers}"), r#"["kubernetes.io/pvc-protection"]"#);
    assert_eq!(jsonpath(&s, &["pv", "medium"], "{.metadata.finalizers}"), r#"["kubernetes.io/pv-protection"]"#);
    let user = "apiVersion: v1\nkind: Pod\nmetadata: {name: user}\nspec:\n  containers: [{name: c, image: busybox}]\n  volumes: [{name: v, persistentVolumeClaim: {claimName: picky}}]\n";
    s.ok_stdin(&["apply", "-f", "-"], user);
    s.ok(&["delete", "pvc", "picky", "--wait=false"]);
    std::thread::sleep(Duration::from_secs(2));
    let held = s.json(&["get", "pvc", "picky"]);
    assert!(held["metadata"]["deletionTimestamp"].is_string(), "a claim in use waits for its pod: {held}");
    s.ok(&["delete", "pod", "user", "--grace-period=0", "--force"]);
    eventually(Duration::from_secs(20), "the claim to go with its last pod", || {
        (!s.kubectl(&["get", "pvc", "picky"]).status.success()).then_some(())
    });
    // A bound volume is kept while bound.
    s.ok(&["delete", "pv", "medium", "--wait=false"]);
    std::thread::sleep(Duration::from_secs(1));
    assert!(s.json(&["get", "pv", "medium"])["metadata"]["deletionTimestamp"].is_string());

    // Deleting the claim releases its volume, which Retain keeps (until, deleted, it goes).
    s.ok(&["delete", "pvc", "data"]);
    eventually(Duration::from_secs(20), "the deleted volume to go once released", || {
        (!s.kubectl(&["get", "pv", "medium"]).status.success()).then_some(())
    });
    eventually(Duration::from_secs(20), "the other volume to be released", || {
        (jsonpath(&s, &["pv", "small"], "{.status.phase}") == "Released").then_some(())
    });
}

#[test]
fn claims_without_a_class_get_the_default_local_path_class_and_wait_for_a_consumer() {
    let s = Server::start_controllers();
    let class = s.json(&["get", "storageclass", "local-path"]);
    assert_eq!(class["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"], "true");
    assert_eq!(class["volumeBindingMode"], "WaitForFirstConsumer");
    assert_eq!(class["reclaimPolicy"], "Delete");
    s.ok_stdin(&["apply", "-f", "-"], &claim("data", None, "64Mi"));
    assert_eq!(jsonpath(&s, &["pvc", "data"], "{.spec.storageClassName}"), "local-path");
    // An explicit empty class asks for none.
    s.ok_stdin(&["apply", "-f", "-"], &claim("classless", Some(""), "64Mi"));
    assert_eq!(jsonpath(&s, &["pvc", "classless"], "{.spec.storageClassName}"), "");
    eventually(Duration::from_secs(20), "a WaitForFirstConsumer event", || {
        let events = s.ok(&["get", "events", "--field-selector", "involvedObject.name=data"]);
        events.contains("waiting for first consumer to be created before binding").then_some(())
    });
    assert_eq!(jsonpath(&s, &["pvc", "data"], "{.status.phase}"), "Pending");
}
