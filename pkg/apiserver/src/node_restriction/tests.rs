//! NodeRestriction's decisions on what kubelets write.

use super::*;
use k1s_api::ResourceInfo;
use serde_json::json;

fn res(group: &str, resource: &str) -> &'static ResourceInfo {
    k1s_api::resources::find(group, "v1", resource).expect("a served resource")
}

fn node(name: &str) -> UserInfo {
    UserInfo::new(&format!("system:node:{name}"), &["system:nodes", "system:authenticated"])
}

/// Runs the plugin on one write; `Err` holds the refusal's message.
fn decide(
    user: &UserInfo,
    op: Operation,
    resource: &'static ResourceInfo,
    sub: Option<&str>,
    name: &str,
    obj: Option<Value>,
    old: Option<Value>,
) -> Result<(), String> {
    let mut obj = obj;
    let ns = obj.as_ref().or(old.as_ref()).and_then(|o| o.pointer("/metadata/namespace")).and_then(Value::as_str);
    let ns = ns.map(str::to_string);
    let attrs = Attributes {
        operation: op,
        resource,
        subresource: sub,
        namespace: ns.as_deref(),
        name,
        user,
        object: obj.as_mut(),
        old_object: old.as_ref(),
        dry_run: false,
        warnings: Default::default(),
        write: None,
        audit_annotations: None,
    };
    futures::executor::block_on(NodeRestriction.validate(&attrs)).map_err(|e| {
        assert_eq!((e.code, e.reason), (403, "Forbidden"), "{}", e.message);
        e.message
    })
}

fn a_node(name: &str, labels: Value) -> Value {
    json!({"metadata": {"name": name, "labels": labels}, "spec": {}})
}

#[test]
fn a_node_writes_only_its_own_node_and_not_its_protected_labels_or_taints() {
    let (n1, nodes) = (node("n1"), res("", "nodes"));
    let kubelet_labels = json!({"kubernetes.io/hostname": "n1", "kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "k1s",
                                "beta.kubernetes.io/arch": "amd64", "example.com/team": "a"});
    assert_eq!(
        decide(&n1, Operation::Create, nodes, None, "n1", Some(a_node("n1", kubelet_labels.clone())), None),
        Ok(())
    );
    let e = decide(
        &n1,
        Operation::Create,
        nodes,
        None,
        "n1",
        Some(a_node("n1", json!({"node-role.kubernetes.io/control-plane": "true"}))),
        None,
    )
    .expect_err("a role label");
    assert_eq!(
        e,
        "nodes \"n1\" is forbidden: node \"n1\" is not allowed to set the following labels: node-role.kubernetes.io/control-plane"
    );
    let old = a_node("n1", kubelet_labels.clone());
    let mut labelled = old.clone();
    labelled["metadata"]["labels"]["node-restriction.kubernetes.io/x"] = json!("y");
    let e =
        decide(&n1, Operation::Update, nodes, None, "n1", Some(labelled), Some(old.clone())).expect_err("restricted");
    assert_eq!(e, "nodes \"n1\" is forbidden: is not allowed to modify labels: node-restriction.kubernetes.io/x");
    let mut sub = old.clone();
    sub["metadata"]["labels"]["team.node-restriction.kubernetes.io/x"] = json!("y");
    assert!(decide(&n1, Operation::Update, nodes, None, "n1", Some(sub), Some(old.clone())).is_err(), "a subdomain");
    let mut removed = old.clone();
    removed["metadata"]["labels"] = json!({"kubernetes.io/hostname": "n1"});
    assert_eq!(decide(&n1, Operation::Update, nodes, None, "n1", Some(removed), Some(old.clone())), Ok(()));
    let mut own = old.clone();
    own["metadata"]["labels"]["kubelet.kubernetes.io/x"] = json!("y");
    own["metadata"]["labels"]["example.com/y"] = json!("z");
    assert_eq!(decide(&n1, Operation::Update, nodes, None, "n1", Some(own), Some(old.clone())), Ok(()));
    let mut tainted = old.clone();
    tainted["spec"]["taints"] = json!([{"key": "k", "effect": "NoSchedule"}]);
    let e = decide(&n1, Operation::Update, nodes, None, "n1", Some(tainted.clone()), Some(old.clone()))
        .expect_err("taints");
    assert!(e.ends_with("node \"n1\" is not allowed to modify taints"), "{e}");
    let mut untainted = tainted.clone();
    untainted["spec"]["taints"] = json!([]);
    assert!(
        decide(&n1, Operation::Update, nodes, None, "n1", Some(untainted), Some(tainted)).is_err(),
        "removing taints"
    );
    // Another node, its status too.
    let e = decide(
        &n1,
        Operation::Update,
        nodes,
        Some("status"),
        "n2",
        Some(a_node("n2", json!({}))),
        Some(a_node("n2", json!({}))),
    )
    .expect_err("another node");
    assert_eq!(e, "nodes \"n2\" is forbidden: node \"n1\" is not allowed to modify node \"n2\"");
    assert!(decide(&n1, Operation::Create, nodes, None, "n2", Some(a_node("n2", json!({}))), None).is_err());
    // Anyone else is not this plugin's business.
    let admin = UserInfo::new("admin", &["system:masters"]);
    let mut labelled = old.clone();
    labelled["metadata"]["labels"]["node-restriction.kubernetes.io/x"] = json!("y");
    assert_eq!(decide(&admin, Operation::Update, nodes, None, "n1", Some(labelled), Some(old)), Ok(()));
}

fn a_pod(node: &str, extra: Value) -> Value {
    let mut p = json!({"metadata": {"name": "p", "namespace": "default", "labels": {"app": "a"}}, "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]}});
    if let (Some(p), Some(extra)) = (p.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            if k == "spec" {
                if let (Some(spec), Some(more)) = (p.get_mut("spec").and_then(Value::as_object_mut), v.as_object()) {
                    spec.extend(more.clone());
                }
            } else if k == "metadata" {
                if let (Some(md), Some(more)) = (p.get_mut("metadata").and_then(Value::as_object_mut), v.as_object()) {
                    md.extend(more.clone());
                }
            }
        }
    }
    p
}

fn mirror(extra_spec: Value) -> Value {
    a_pod(
        "n1",
        json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "x"},
                            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "u", "controller": true}]},
               "spec": extra_spec}),
    )
}

#[test]
fn a_node_deletes_and_updates_the_status_of_its_own_pods_only() {
    let (n1, pods) = (node("n1"), res("", "pods"));
    let mine = a_pod("n1", json!({}));
    let theirs = a_pod("n2", json!({}));
    assert_eq!(decide(&n1, Operation::Delete, pods, None, "p", None, Some(mine.clone())), Ok(()));
    let e = decide(&n1, Operation::Delete, pods, None, "p", None, Some(theirs.clone())).expect_err("another node's");
    assert_eq!(e, "pods \"p\" is forbidden: node \"n1\" can only delete pods with spec.nodeName set to itself");
    assert_eq!(
        decide(&n1, Operation::Update, pods, Some("status"), "p", Some(mine.clone()), Some(mine.clone())),
        Ok(())
    );
    let e = decide(&n1, Operation::Update, pods, Some("status"), "p", Some(theirs.clone()), Some(theirs.clone()))
        .expect_err("another node's status");
    assert!(e.ends_with("node \"n1\" can only update pod status for pods with spec.nodeName set to itself"), "{e}");
    let mut relabelled = mine.clone();
    relabelled["metadata"]["labels"]["app"] = json!("b");
    let e = decide(&n1, Operation::Update, pods, Some("status"), "p", Some(relabelled), Some(mine.clone()))
        .expect_err("labels");
    assert!(e.ends_with("cannot update labels through pod status"), "{e}");
    assert!(
        decide(&n1, Operation::Update, pods, None, "p", Some(mine.clone()), Some(mine.clone())).is_err(),
        "a spec update"
    );
    assert!(
        decide(&n1, Operation::Update, pods, Some("ephemeralcontainers"), "p", Some(mine.clone()), Some(mine)).is_err()
    );
}

#[test]
fn a_node_creates_only_mirror_pods_of_its_own_that_reference_nothing() {
    let (n1, pods) = (node("n1"), res("", "pods"));
    let create = |p: Value| decide(&n1, Operation::Create, pods, None, "p", Some(p), None);
    assert_eq!(create(mirror(json!({}))), Ok(()));
    let e = create(a_pod("n1", json!({}))).expect_err("not a mirror pod");
    assert!(
        e.ends_with(
            "pod does not have \"kubernetes.io/config.mirror\" annotation, node \"n1\" can only create mirror pods"
        ),
        "{e}"
    );
    let mut elsewhere = mirror(json!({}));
    elsewhere["spec"]["nodeName"] = json!("n2");
    assert!(create(elsewhere)
        .expect_err("bound elsewhere")
        .ends_with("can only create pods with spec.nodeName set to itself"));
    let mut unowned = mirror(json!({}));
    unowned["metadata"]["ownerReferences"] = json!([]);
    assert!(create(unowned).is_err());
    let mut blocking = mirror(json!({}));
    blocking["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] = json!(true);
    assert!(create(blocking).expect_err("blocking").ends_with("must not set blockOwnerDeletion on an owner reference"));
    let cases = [
        (json!({"serviceAccountName": "default"}), "can not create pods that reference a service account"),
        (
            json!({"volumes": [{"name": "s", "secret": {"secretName": "s"}}]}),
            "can not create pods that reference secrets",
        ),
        (json!({"imagePullSecrets": [{"name": "pull"}]}), "can not create pods that reference secrets"),
        (
            json!({"volumes": [{"name": "c", "configMap": {"name": "c"}}]}),
            "can not create pods that reference configmaps",
        ),
        (
            json!({"containers": [{"name": "c", "image": "i", "envFrom": [{"configMapRef": {"name": "c"}}]}]}),
            "can not create pods that reference configmaps",
        ),
        (
            json!({"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "d"}}]}),
            "can not create pods that reference persistentvolumeclaims",
        ),
        (
            json!({"volumes": [{"name": "b", "projected": {"sources": [{"clusterTrustBundle": {"name": "b", "path": "p"}}]}}]}),
            "can not create pods that reference clustertrustbundles",
        ),
    ];
    for (spec, want) in cases {
        let e = create(mirror(spec.clone())).expect_err("a reference");
        assert!(e.ends_with(want), "{spec}: {e}");
    }
}

#[test]
fn a_node_uses_only_its_own_lease_and_writes_only_claim_status() {
    let (n1, leases, claims) = (node("n1"), res("coordination.k8s.io", "leases"), res("", "persistentvolumeclaims"));
    let lease = |ns: &str, name: &str| json!({"metadata": {"name": name, "namespace": ns}, "spec": {}});
    assert_eq!(decide(&n1, Operation::Create, leases, None, "n1", Some(lease("kube-node-lease", "n1")), None), Ok(()));
    let e =
        decide(&n1, Operation::Create, leases, None, "n2", Some(lease("kube-node-lease", "n2")), None).expect_err("n2");
    assert!(e.ends_with("can only access node lease with the same name as the requesting node"), "{e}");
    assert!(decide(
        &n1,
        Operation::Update,
        leases,
        None,
        "n1",
        Some(lease("default", "n1")),
        Some(lease("default", "n1"))
    )
    .is_err());
    let claim = json!({"metadata": {"name": "d", "namespace": "default", "resourceVersion": "3"}, "spec": {},
                       "status": {"phase": "Bound"}});
    let mut resized = claim.clone();
    resized["status"]["capacity"] = json!({"storage": "2Gi"});
    resized["metadata"]["resourceVersion"] = json!("4");
    assert_eq!(decide(&n1, Operation::Update, claims, Some("status"), "d", Some(resized), Some(claim.clone())), Ok(()));
    let mut rephased = claim.clone();
    rephased["status"]["phase"] = json!("Lost");
    assert!(decide(&n1, Operation::Update, claims, Some("status"), "d", Some(rephased), Some(claim.clone())).is_err());
    let e = decide(&n1, Operation::Delete, claims, None, "d", None, Some(claim)).expect_err("a delete");
    assert!(e.ends_with("may only update PVC status"), "{e}");
}

#[test]
fn labels_a_kubelet_may_not_touch() {
    let labels = |l: Value| forbidden_labels(Some(&json!({"metadata": {"labels": l}})), None);
    assert!(labels(
        json!({"kubernetes.io/hostname": "h", "topology.kubernetes.io/zone": "z", "node.kubernetes.io/x": "1",
                         "a.kubelet.kubernetes.io/b": "1", "example.com/x": "1", "plain": "1"})
    )
    .is_empty());
    assert_eq!(
        labels(json!({"node-role.kubernetes.io/master": "", "k8s.io/x": "1", "a.k8s.io/y": "1",
                      "node-restriction.kubernetes.io/z": "1", "evil-kubernetes.io/x": "1"})),
        ["a.k8s.io/y", "k8s.io/x", "node-restriction.kubernetes.io/z", "node-role.kubernetes.io/master"]
    );
}
