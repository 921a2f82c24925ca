//! The Node authorizer against a store holding pods and volumes, as the kubelets ask.

use super::*;
use crate::auth::UserInfo;
use crate::request::Query;
use bytes::Bytes;
use serde_json::{json, Value};

struct Env {
    _dir: tempfile::TempDir,
    store: Store,
    authz: NodeAuthorizer,
}

impl Env {
    fn new() -> Env {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path(), k1s_store::StoreOptions::default()).expect("store");
        Env { authz: NodeAuthorizer::new(store.clone()), store, _dir: dir }
    }

    async fn put(&self, key: &str, v: Value) {
        let value = Bytes::from(v.to_string());
        match self.store.get(key).expect("get") {
            Some(kv) => self.store.update(key, value, Some(kv.mod_revision)).await.expect("update"),
            None => self.store.create(key, value).await.expect("create"),
        };
    }

    async fn pod(&self, ns: &str, name: &str, spec: Value) {
        self.put(
            &format!("/registry/pods/{ns}/{name}"),
            json!({"metadata": {"name": name, "namespace": ns}, "spec": spec}),
        )
        .await;
    }

    fn decide(&self, user: &UserInfo, method: &str, path: &str) -> Decision {
        let (path, query) = path.split_once('?').unwrap_or((path, ""));
        let method = http::Method::from_bytes(method.as_bytes()).expect("method");
        let info = RequestInfo::parse(&method, path, &Query::parse(Some(query)));
        self.authz.authorize(&Attributes { user, info: &info })
    }
}

fn node(name: &str) -> UserInfo {
    UserInfo::new(&format!("system:node:{name}"), &["system:nodes", "system:authenticated"])
}

fn allowed(d: Decision) -> bool {
    d == Decision::Allow
}

const NO_RELATIONSHIP: &str = "no relationship found between node 'n1' and this object";

#[tokio::test]
async fn a_node_reads_what_its_pods_reference_and_nothing_else() {
    let e = Env::new();
    let n1 = node("n1");
    e.pod(
        "default",
        "web",
        json!({
            "nodeName": "n1",
            "serviceAccountName": "robot",
            "imagePullSecrets": [{"name": "pull"}],
            "containers": [{"name": "c", "env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "env-secret", "key": "k"}}},
                                                  {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "env-cm", "key": "k"}}}],
                            "envFrom": [{"secretRef": {"name": "from-secret"}}, {"configMapRef": {"name": "from-cm"}}]}],
            "initContainers": [{"name": "i", "envFrom": [{"secretRef": {"name": "init-secret"}}]}],
            "ephemeralContainers": [{"name": "dbg", "env": [{"name": "C", "valueFrom": {"secretKeyRef": {"name": "debug-secret", "key": "k"}}}]}],
            "volumes": [
                {"name": "s", "secret": {"secretName": "vol-secret"}},
                {"name": "m", "configMap": {"name": "vol-cm"}},
                {"name": "p", "projected": {"sources": [{"secret": {"name": "proj-secret"}}, {"configMap": {"name": "proj-cm"}},
                                                         {"serviceAccountToken": {"path": "token"}}]}},
                {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                {"name": "csi", "csi": {"driver": "x", "nodePublishSecretRef": {"name": "csi-secret"}}}
            ]
        }),
    )
    .await;
    e.pod(
        "default",
        "elsewhere",
        json!({"nodeName": "n2", "volumes": [{"name": "s", "secret": {"secretName": "other"}}]}),
    )
    .await;
    let ns = "/api/v1/namespaces/default";
    for secret in
        ["pull", "env-secret", "from-secret", "init-secret", "debug-secret", "vol-secret", "proj-secret", "csi-secret"]
    {
        assert!(allowed(e.decide(&n1, "GET", &format!("{ns}/secrets/{secret}"))), "{secret}");
    }
    for cm in ["env-cm", "from-cm", "vol-cm", "proj-cm"] {
        assert!(allowed(e.decide(&n1, "GET", &format!("{ns}/configmaps/{cm}"))), "{cm}");
    }
    assert!(allowed(e.decide(&n1, "GET", &format!("{ns}/persistentvolumeclaims/data"))));
    assert!(allowed(e.decide(&n1, "GET", &format!("{ns}/persistentvolumeclaims/web-scratch"))), "ephemeral claim");
    assert!(allowed(e.decide(&n1, "POST", &format!("{ns}/serviceaccounts/robot/token"))));
    assert!(allowed(e.decide(&n1, "GET", &format!("{ns}/pods/web"))));
    // A watch of one object by its name.
    assert!(allowed(e.decide(&n1, "GET", &format!("{ns}/secrets?watch=true&fieldSelector=metadata.name%3Dpull"))));

    // What other nodes' pods reference, what no pod references, and the wrong verbs.
    assert_eq!(e.decide(&n1, "GET", &format!("{ns}/secrets/other")), Decision::NoOpinion(NO_RELATIONSHIP.into()));
    assert_eq!(e.decide(&n1, "GET", &format!("{ns}/secrets/unrelated")), Decision::NoOpinion(NO_RELATIONSHIP.into()));
    assert!(!allowed(e.decide(&n1, "GET", "/api/v1/namespaces/other/secrets/pull")), "another namespace");
    assert!(!allowed(e.decide(&n1, "GET", &format!("{ns}/secrets"))), "a list");
    assert!(!allowed(e.decide(&n1, "GET", "/api/v1/secrets")), "a list of every namespace");
    assert!(!allowed(e.decide(&n1, "PUT", &format!("{ns}/secrets/pull"))), "a write");
    assert!(!allowed(e.decide(&n1, "DELETE", &format!("{ns}/configmaps/vol-cm"))), "a delete");
    assert!(!allowed(e.decide(&n1, "POST", &format!("{ns}/serviceaccounts/default/token"))), "another account");
    assert!(!allowed(e.decide(&n1, "GET", &format!("{ns}/pods/elsewhere"))));
    assert!(allowed(e.decide(&node("n2"), "GET", &format!("{ns}/secrets/other"))));
    // Someone who is not a kubelet gets no opinion at all.
    let alice = UserInfo::new("system:node:n1", &["system:authenticated"]);
    assert_eq!(e.decide(&alice, "GET", &format!("{ns}/secrets/pull")), Decision::no_opinion());
}

#[tokio::test]
async fn a_pod_is_in_the_graph_as_soon_as_its_write_completes_and_gone_once_deleted() {
    let e = Env::new();
    let n1 = node("n1");
    let path = "/api/v1/namespaces/default/secrets/s";
    assert!(!allowed(e.decide(&n1, "GET", path)));
    e.pod("default", "p", json!({"nodeName": "n1", "volumes": [{"name": "v", "secret": {"secretName": "s"}}]})).await;
    assert!(allowed(e.decide(&n1, "GET", path)), "the pod just written is seen");
    // Rescheduled elsewhere (a new pod of the same name), then deleted.
    e.pod("default", "p", json!({"nodeName": "n2", "volumes": [{"name": "v", "secret": {"secretName": "s"}}]})).await;
    assert!(!allowed(e.decide(&n1, "GET", path)));
    e.store.delete("/registry/pods/default/p", None).await.expect("delete");
    assert!(!allowed(e.decide(&node("n2"), "GET", path)));
}

#[tokio::test]
async fn volumes_follow_their_claims_and_their_secrets() {
    let e = Env::new();
    let n1 = node("n1");
    e.pod(
        "shop",
        "db",
        json!({"nodeName": "n1", "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}),
    )
    .await;
    e.put(
        "/registry/persistentvolumes/pv-1",
        json!({"metadata": {"name": "pv-1"}, "spec": {"claimRef": {"namespace": "shop", "name": "data"},
               "csi": {"driver": "x", "nodePublishSecretRef": {"namespace": "vault", "name": "creds"}},
               "cephfs": {"secretRef": {"name": "ceph"}}}}),
    )
    .await;
    e.put(
        "/registry/persistentvolumes/pv-2",
        json!({"metadata": {"name": "pv-2"}, "spec": {"claimRef": {"namespace": "shop", "name": "logs"}}}),
    )
    .await;
    assert!(allowed(e.decide(&n1, "GET", "/api/v1/persistentvolumes/pv-1")));
    assert!(!allowed(e.decide(&n1, "GET", "/api/v1/persistentvolumes/pv-2")));
    assert!(!allowed(e.decide(&n1, "GET", "/api/v1/persistentvolumes")), "a list");
    assert!(allowed(e.decide(&n1, "GET", "/api/v1/namespaces/vault/secrets/creds")), "the volume's CSI secret");
    assert!(allowed(e.decide(&n1, "GET", "/api/v1/namespaces/shop/secrets/ceph")), "in the claim's namespace");
    assert!(!allowed(e.decide(&node("n2"), "GET", "/api/v1/namespaces/vault/secrets/creds")));
    assert!(allowed(e.decide(&n1, "PATCH", "/api/v1/namespaces/shop/persistentvolumeclaims/data/status")));
    assert!(!allowed(e.decide(&n1, "PATCH", "/api/v1/namespaces/shop/persistentvolumeclaims/data")), "only its status");
    assert!(!allowed(e.decide(&n1, "PATCH", "/api/v1/namespaces/shop/persistentvolumeclaims/logs/status")));
    e.put(
        "/registry/storage.k8s.io/volumeattachments/va-1",
        json!({"metadata": {"name": "va-1"}, "spec": {"nodeName": "n1"}}),
    )
    .await;
    assert!(allowed(e.decide(&n1, "GET", "/apis/storage.k8s.io/v1/volumeattachments/va-1")));
    assert!(!allowed(e.decide(&node("n2"), "GET", "/apis/storage.k8s.io/v1/volumeattachments/va-1")));
}

#[tokio::test]
async fn a_node_reads_its_own_node_lease_and_pods_and_writes_what_noderestriction_checks() {
    let e = Env::new();
    let n1 = node("n1");
    let yes = |m: &str, p: &str| allowed(e.decide(&n1, m, p));
    assert!(yes("GET", "/api/v1/nodes/n1"));
    assert!(yes("GET", "/api/v1/nodes?watch=true&fieldSelector=metadata.name%3Dn1"));
    assert_eq!(
        e.decide(&n1, "GET", "/api/v1/nodes/n2"),
        Decision::NoOpinion("node 'n1' cannot read 'n2', only its own Node object".into())
    );
    assert_eq!(
        e.decide(&n1, "GET", "/api/v1/nodes"),
        Decision::NoOpinion("node 'n1' cannot read all nodes, only its own Node object".into())
    );
    assert!(yes("POST", "/api/v1/nodes"));
    assert!(yes("PATCH", "/api/v1/nodes/n2"), "NodeRestriction refuses it");
    assert!(yes("PATCH", "/api/v1/nodes/n1/status"));
    assert!(!yes("DELETE", "/api/v1/nodes/n1"));
    let lease = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
    assert!(yes("GET", &format!("{lease}/n1")));
    assert!(yes("PATCH", &format!("{lease}/n1")));
    assert!(yes("POST", lease));
    assert!(!yes("PATCH", &format!("{lease}/n2")));
    assert!(!yes("GET", lease), "a list");
    assert!(!yes("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/n1"));
    assert!(yes("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1"));
    assert!(yes("GET", "/api/v1/pods?watch=1&fieldSelector=spec.nodeName%3Dn1&resourceVersion=5"));
    assert!(!yes("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn2"));
    assert!(!yes("GET", "/api/v1/pods"));
    assert!(!yes("GET", "/api/v1/pods?fieldSelector=spec.nodeName%21%3Dn1"));
    assert!(yes("POST", "/api/v1/namespaces/default/pods"));
    assert!(yes("DELETE", "/api/v1/namespaces/default/pods/p"));
    assert!(yes("PATCH", "/api/v1/namespaces/default/pods/p/status"));
    assert!(yes("POST", "/api/v1/namespaces/default/pods/p/eviction"));
    assert!(!yes("PATCH", "/api/v1/namespaces/default/pods/p"));
    assert!(!yes("GET", "/api/v1/namespaces/default/pods/p/log"));
    // What system:node's rules give, and not more.
    assert!(yes("GET", "/api/v1/services"));
    assert!(yes("POST", "/api/v1/namespaces/default/events"));
    assert!(yes("POST", "/apis/authentication.k8s.io/v1/tokenreviews"));
    assert!(yes("POST", "/apis/certificates.k8s.io/v1/certificatesigningrequests"));
    assert!(!yes("DELETE", "/api/v1/namespaces/default"));
    assert!(!yes("POST", "/api/v1/namespaces/default/secrets"));
    assert!(!yes("GET", "/apis/apps/v1/deployments"));
    assert!(!yes("GET", "/version"), "discovery comes from RBAC");
    let nameless = UserInfo::new("system:node:", &["system:nodes"]);
    assert_eq!(
        e.decide(&nameless, "GET", "/api/v1/services"),
        Decision::NoOpinion("unknown node for user \"system:node:\"".into())
    );
}

#[test]
fn references_are_read_from_every_place_a_pod_names_them() {
    let pod = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n",
        "volumes": [{"name": "a", "azureFile": {"secretName": "az", "shareName": "s"}},
                    {"name": "r", "rbd": {"monitors": [], "image": "i", "secretRef": {"name": "rbd"}}},
                    {"name": "f", "flexVolume": {"driver": "d", "secretRef": {"name": "flex"}}},
                    {"name": "s", "secret": {"secretName": "plain"}},
                    {"name": "s2", "secret": {"secretName": "plain"}}]}});
    let refs = pod_refs(pod.to_string().as_bytes()).expect("decoded");
    assert_eq!(refs.secrets, ["az", "rbd", "flex", "plain"]);
    assert_eq!(refs.node, "n");
    let unbound =
        json!({"metadata": {"name": "p"}, "spec": {"volumes": [{"name": "s", "secret": {"secretName": "x"}}]}});
    assert_eq!(pod_refs(unbound.to_string().as_bytes()), Some(PodRefs::default()), "an unbound pod reaches nothing");
    assert_eq!(pod_refs(b"not json"), None);
}
