//! RBAC decisions for a ServiceAccount bound to `view` in its namespace, with the default policy
//! stored: `cargo bench -p k1s-apiserver --bench rbac`. One shared authorizer (objects decoded
//! once and kept while their revision holds) against a fresh one per decision (everything
//! decoded every time).

use k1s_apiserver::auth::{Attributes, Authorizer, Decision, UserInfo};
use k1s_apiserver::rbac::{default_policy, RbacAuthorizer};
use k1s_apiserver::registry::Registry;
use k1s_apiserver::request::{Query, RequestInfo};
use serde_json::{json, Value};
use std::time::Instant;

fn store_object(store: &k1s_store::Store, rt: &tokio::runtime::Runtime, resource: &str, obj: &Value) {
    let info = k1s_api::resources::find("rbac.authorization.k8s.io", "v1", resource).expect("resource");
    let ns = obj["metadata"]["namespace"].as_str();
    let key = Registry::key(info, ns, obj["metadata"]["name"].as_str().expect("name"));
    rt.block_on(store.create(&key, bytes::Bytes::from(obj.to_string()))).expect("create");
}

fn time(what: &str, n: usize, mut decide: impl FnMut() -> Decision, want: Decision) {
    let start = Instant::now();
    for _ in 0..n {
        assert_eq!(decide(), want, "{what}");
    }
    let us = start.elapsed().as_secs_f64() * 1e6 / n as f64;
    println!("{what}: {us:.1} µs per decision ({n} decisions)");
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let dir = tempfile::tempdir().expect("tmp");
    let store = k1s_store::Store::open(dir.path(), k1s_store::StoreOptions::default()).expect("store");
    for obj in default_policy() {
        let resource = if obj["kind"] == "ClusterRole" { "clusterroles" } else { "clusterrolebindings" };
        store_object(&store, &rt, resource, &obj);
    }
    let binding = json!({"metadata": {"name": "robot-view", "namespace": "default"},
                         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                         "subjects": [{"kind": "ServiceAccount", "name": "robot"}]});
    store_object(&store, &rt, "rolebindings", &binding);
    let user = UserInfo::new(
        "system:serviceaccount:default:robot",
        &["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"],
    );
    let get = http::Method::GET;
    let pods = RequestInfo::parse(&get, "/api/v1/namespaces/default/pods", &Query::parse(None));
    let secrets = RequestInfo::parse(&get, "/api/v1/namespaces/default/secrets", &Query::parse(None));
    let shared = RbacAuthorizer::new(store.clone());
    let decide = |rbac: &RbacAuthorizer, info: &RequestInfo| rbac.authorize(&Attributes { user: &user, info });
    time(
        "list pods (allowed through view's aggregation), shared authorizer",
        20_000,
        || decide(&shared, &pods),
        Decision::Allow,
    );
    time(
        "list secrets (no rule: every binding tried), shared authorizer",
        20_000,
        || decide(&shared, &secrets),
        Decision::no_opinion(),
    );
    time(
        "list pods, a fresh authorizer per decision (everything decoded)",
        2_000,
        || decide(&RbacAuthorizer::new(store.clone()), &pods),
        Decision::Allow,
    );
}
