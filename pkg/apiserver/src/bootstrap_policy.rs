//! The roles of the built-in components, from upstream's bootstrap policy
//! (`plugin/pkg/auth/authorizer/rbac/bootstrappolicy`: `policy.go` and `controller_policy.go`)
//! plus what k1s's own components do beyond their upstream counterparts, and who is bound to
//! them. `rbac::default_policy` creates them on every start and reconciles them as it does the
//! other defaults.
//!
//! | identity (client certificate) | bound to |
//! |---|---|
//! | `system:node:<name>` in `system:nodes` (kubelet) | nothing: the Node authorizer decides, with [`node_rules`] |
//! | `system:kube-controller-manager` | `system:kube-controller-manager` and the `system:controller:*` role of every controller k1s runs |
//! | `system:kube-scheduler` | `system:kube-scheduler`, `system:volume-scheduler`, `system:k1s-scheduler` |
//! | `system:kube-proxy` | `system:node-proxier`, `system:k1s-proxy` |
//! | `system:k1s-dns` | `system:k1s-dns` |
//! | `system:k1s-local-path-provisioner` | `system:persistent-volume-provisioner` |
//! | `system:k1s-supervisor` | `system:k1s-supervisor` |
//! | `system:k1s-deploy` | `system:k1s-deploy` |
//! | `kube-apiserver-kubelet-client` (the API server towards kubelets) | `system:kubelet-api-admin` |
//!
//! None of them is in `system:masters` or bound to `cluster-admin`.

use crate::rbac::{rule, urls, READ};
use serde_json::{json, Value};

const LEGACY: &str = "";
const APPS: &str = "apps";
const AUTHENTICATION: &str = "authentication.k8s.io";
const AUTHORIZATION: &str = "authorization.k8s.io";
const AUTOSCALING: &str = "autoscaling";
const BATCH: &str = "batch";
const CERTIFICATES: &str = "certificates.k8s.io";
const COORDINATION: &str = "coordination.k8s.io";
const DISCOVERY: &str = "discovery.k8s.io";
const EXTENSIONS: &str = "extensions";
const POLICY: &str = "policy";
const RBAC: &str = "rbac.authorization.k8s.io";
const STORAGE: &str = "storage.k8s.io";

/// Upstream's `eventsRule()`: what every component needs to record events.
fn events() -> Value {
    rule(&[LEGACY, "events.k8s.io"], &["events"], &["create", "update", "patch"])
}

fn named(groups: &[&str], resources: &[&str], names: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": groups, "resources": resources, "resourceNames": names, "verbs": verbs})
}

/// Upstream's `NodeRules()`, the `system:node` ClusterRole: what the Node authorizer allows a
/// kubelet beyond the objects it narrows to the node's own (Secrets, ConfigMaps, claims,
/// volumes, ServiceAccount tokens, its Node and Lease, its pods), whose writes NodeRestriction
/// admission narrows further.
pub fn node_rules() -> Vec<Value> {
    vec![
        rule(&[AUTHENTICATION], &["tokenreviews"], &["create"]),
        rule(&[AUTHORIZATION], &["subjectaccessreviews", "localsubjectaccessreviews"], &["create"]),
        rule(&[LEGACY], &["services"], READ),
        rule(&[LEGACY], &["nodes"], &["create", "get", "list", "watch"]),
        rule(&[LEGACY], &["nodes/status"], &["update", "patch"]),
        rule(&[LEGACY], &["nodes"], &["update", "patch"]),
        rule(&[LEGACY], &["events"], &["create", "update", "patch"]),
        rule(&[LEGACY], &["pods"], READ),
        rule(&[LEGACY], &["pods"], &["create", "delete"]),
        rule(&[LEGACY], &["pods/status"], &["update", "patch"]),
        rule(&[LEGACY], &["pods/eviction"], &["create"]),
        rule(&[LEGACY], &["secrets", "configmaps"], READ),
        rule(&[LEGACY], &["persistentvolumeclaims", "persistentvolumes"], &["get"]),
        rule(&[LEGACY], &["endpoints"], &["get"]),
        rule(&[CERTIFICATES], &["certificatesigningrequests"], &["create", "get", "list", "watch"]),
        rule(&[COORDINATION], &["leases"], &["get", "create", "update", "patch", "delete"]),
        rule(&[STORAGE], &["volumeattachments"], &["get"]),
        rule(&[LEGACY], &["serviceaccounts/token"], &["create"]),
        rule(&[LEGACY], &["persistentvolumeclaims/status"], &["get", "update", "patch"]),
        rule(&[STORAGE], &["csidrivers"], &["get", "watch", "list"]),
        rule(&[STORAGE], &["csinodes"], &["get", "create", "update", "patch", "delete"]),
        rule(&["node.k8s.io"], &["runtimeclasses"], READ),
    ]
}

/// The built-in components' ClusterRoles: (name, rules).
pub fn component_roles() -> Vec<(&'static str, Vec<Value>)> {
    vec![
        ("system:node", node_rules()),
        (
            "system:node-proxier",
            vec![
                rule(&[LEGACY], &["services", "endpoints"], &["list", "watch"]),
                rule(&[LEGACY], &["nodes"], READ),
                events(),
                rule(&[DISCOVERY], &["endpointslices"], &["list", "watch"]),
            ],
        ),
        (
            "system:kube-scheduler",
            vec![
                events(),
                // Leader election.
                rule(&[COORDINATION], &["leases"], &["create"]),
                named(&[COORDINATION], &["leases"], &["kube-scheduler"], &["get", "update"]),
                rule(&[LEGACY], &["nodes"], READ),
                rule(&[LEGACY], &["pods"], &["get", "list", "watch", "delete"]),
                rule(&[LEGACY], &["pods/binding", "bindings"], &["create"]),
                rule(&[LEGACY], &["pods/status"], &["patch", "update"]),
                rule(&[LEGACY], &["services", "replicationcontrollers"], READ),
                rule(&[APPS, EXTENSIONS], &["replicasets"], READ),
                rule(&[APPS], &["statefulsets"], READ),
                rule(&[POLICY], &["poddisruptionbudgets"], READ),
                rule(&[LEGACY], &["persistentvolumeclaims", "persistentvolumes"], READ),
                rule(&[AUTHENTICATION], &["tokenreviews"], &["create"]),
                rule(&[AUTHORIZATION], &["subjectaccessreviews"], &["create"]),
                rule(&[STORAGE], &["csinodes"], READ),
                rule(&[LEGACY], &["namespaces"], READ),
                rule(&[STORAGE], &["csidrivers"], READ),
                rule(&[STORAGE], &["csistoragecapacities"], READ),
            ],
        ),
        (
            "system:volume-scheduler",
            vec![
                rule(&[LEGACY], &["persistentvolumes"], &["get", "list", "watch", "update", "patch"]),
                rule(&[STORAGE], &["storageclasses"], READ),
                rule(&[LEGACY], &["persistentvolumeclaims"], &["get", "list", "watch", "update", "patch"]),
            ],
        ),
        (
            // What the controller manager needs itself; each controller's own role comes from
            // `controller_roles`.
            "system:kube-controller-manager",
            vec![
                events(),
                rule(&[COORDINATION], &["leases"], &["create"]),
                named(&[COORDINATION], &["leases"], &["kube-controller-manager"], &["get", "update"]),
                rule(&[LEGACY], &["secrets", "serviceaccounts"], &["create"]),
                rule(&[LEGACY], &["secrets"], &["delete"]),
                rule(&[LEGACY], &["configmaps", "namespaces", "secrets", "serviceaccounts"], &["get"]),
                rule(&[LEGACY], &["secrets", "serviceaccounts"], &["update"]),
                rule(&[AUTHENTICATION], &["tokenreviews"], &["create"]),
                rule(&[AUTHORIZATION], &["subjectaccessreviews"], &["create"]),
                // The shared informers.
                rule(&["*"], &["*"], &["list", "watch"]),
                rule(&[LEGACY], &["serviceaccounts/token"], &["create"]),
            ],
        ),
        // The certificates API's roles (upstream's `policy.go`), bound to nobody but the
        // bootstrappers: an administrator grants them.
        (
            "system:node-bootstrapper",
            vec![rule(&[CERTIFICATES], &["certificatesigningrequests"], &["create", "get", "list", "watch"])],
        ),
        (
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            vec![rule(&[CERTIFICATES], &["certificatesigningrequests/nodeclient"], &["create"])],
        ),
        (
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            vec![rule(&[CERTIFICATES], &["certificatesigningrequests/selfnodeclient"], &["create"])],
        ),
        (
            "system:certificates.k8s.io:kube-apiserver-client-approver",
            vec![named(&[CERTIFICATES], &["signers"], &["kubernetes.io/kube-apiserver-client"], &["approve"])],
        ),
        (
            "system:certificates.k8s.io:kube-apiserver-client-kubelet-approver",
            vec![named(&[CERTIFICATES], &["signers"], &["kubernetes.io/kube-apiserver-client-kubelet"], &["approve"])],
        ),
        (
            "system:certificates.k8s.io:kubelet-serving-approver",
            vec![named(&[CERTIFICATES], &["signers"], &["kubernetes.io/kubelet-serving"], &["approve"])],
        ),
        (
            "system:certificates.k8s.io:legacy-unknown-approver",
            vec![named(&[CERTIFICATES], &["signers"], &["kubernetes.io/legacy-unknown"], &["approve"])],
        ),
        (
            "system:kubelet-api-admin",
            vec![
                rule(&[LEGACY], &["nodes"], READ),
                rule(&[LEGACY], &["nodes"], &["proxy"]),
                rule(&[LEGACY], &["nodes/log", "nodes/metrics", "nodes/proxy", "nodes/stats"], &["*"]),
            ],
        ),
        (
            "system:persistent-volume-provisioner",
            vec![
                rule(&[LEGACY], &["persistentvolumes"], &["get", "list", "watch", "create", "delete"]),
                rule(&[LEGACY], &["persistentvolumeclaims"], &["get", "list", "watch", "update"]),
                rule(&[STORAGE], &["storageclasses"], READ),
                rule(&[LEGACY], &["events"], &["watch"]),
                events(),
            ],
        ),
        (
            "system:service-account-issuer-discovery",
            vec![urls(&["/.well-known/openid-configuration", "/openid/v1/jwks"], &["get"])],
        ),
        // k1s's own components, and what k1s's versions of upstream's do beyond upstream's roles.
        (
            // Cluster DNS answers from Services, their EndpointSlices and the Namespaces.
            "system:k1s-dns",
            vec![rule(&[LEGACY], &["services", "namespaces"], READ), rule(&[DISCOVERY], &["endpointslices"], READ)],
        ),
        (
            // The proxy also enforces NetworkPolicies (pods and namespaces select their peers)
            // and writes the node's address into LoadBalancer Services' status.
            "system:k1s-proxy",
            vec![
                rule(&[LEGACY], &["pods", "namespaces"], &["list", "watch"]),
                rule(&["networking.k8s.io"], &["networkpolicies"], &["list", "watch"]),
                rule(&[LEGACY], &["services/status"], &["patch", "update"]),
            ],
        ),
        (
            // The scheduler reads PriorityClasses for preemption.
            "system:k1s-scheduler",
            vec![rule(&["scheduling.k8s.io"], &["priorityclasses"], READ)],
        ),
        (
            // `k1s server` itself: it waits for its node to be Ready and labels it with its
            // roles (`node-role.kubernetes.io/control-plane`), which a kubelet may not set on
            // its own Node.
            "system:k1s-supervisor",
            vec![rule(&[LEGACY], &["nodes"], &["get", "list", "watch", "patch"])],
        ),
        (
            // The manifests deployer applies whatever the manifests folder holds (any kind,
            // RBAC and CRDs included) and deletes what left it: every verb on every resource,
            // but no non-resource URLs, and through RBAC like anyone else rather than as
            // `system:masters`.
            "system:k1s-deploy",
            vec![rule(&["*"], &["*"], &["*"])],
        ),
    ]
}

/// Upstream's `system:controller:<name>` roles of the controllers k1s runs (several upstream
/// controllers are one k1s controller: the endpointslice one also writes Endpoints, the
/// replicaset one also runs ReplicationControllers, the persistentvolume-binder also protects
/// claims and volumes, the job one also deletes finished Jobs, the serviceaccount one also
/// publishes `kube-root-ca.crt`): (name without the prefix, rules).
pub fn controller_roles() -> Vec<(&'static str, Vec<Value>)> {
    vec![
        (
            // csrsigning and csrcleaner (upstream's `certificate-controller`).
            "certificate-controller",
            vec![
                rule(&[CERTIFICATES], &["certificatesigningrequests"], &["delete", "get", "list", "watch"]),
                rule(
                    &[CERTIFICATES],
                    &["certificatesigningrequests/status", "certificatesigningrequests/approval"],
                    &["update"],
                ),
                named(&[CERTIFICATES], &["signers"], &["kubernetes.io/kube-apiserver-client-kubelet"], &["approve"]),
                named(
                    &[CERTIFICATES],
                    &["signers"],
                    &[
                        "kubernetes.io/legacy-unknown",
                        "kubernetes.io/kube-apiserver-client",
                        "kubernetes.io/kube-apiserver-client-kubelet",
                        "kubernetes.io/kubelet-serving",
                    ],
                    &["sign"],
                ),
                rule(&[AUTHORIZATION], &["subjectaccessreviews"], &["create"]),
                events(),
            ],
        ),
        (
            "clusterrole-aggregation-controller",
            vec![rule(&[RBAC], &["clusterroles"], &["escalate", "get", "list", "watch", "update", "patch"])],
        ),
        (
            "cronjob-controller",
            vec![
                rule(&[BATCH], &["cronjobs"], &["get", "list", "watch", "update"]),
                rule(&[BATCH], &["jobs"], &["get", "list", "watch", "create", "update", "delete", "patch"]),
                rule(&[BATCH], &["cronjobs/status"], &["update"]),
                rule(&[BATCH], &["cronjobs/finalizers"], &["update"]),
                rule(&[LEGACY], &["pods"], &["list", "watch", "delete"]),
                events(),
            ],
        ),
        (
            "daemon-set-controller",
            vec![
                rule(&[EXTENSIONS, APPS], &["daemonsets"], READ),
                rule(&[EXTENSIONS, APPS], &["daemonsets/status"], &["update"]),
                rule(&[EXTENSIONS, APPS], &["daemonsets/finalizers"], &["update"]),
                rule(&[LEGACY], &["nodes"], &["list", "watch"]),
                rule(&[LEGACY], &["pods"], &["list", "watch", "create", "delete", "patch"]),
                rule(&[LEGACY], &["pods/binding"], &["create"]),
                rule(
                    &[APPS],
                    &["controllerrevisions"],
                    &["get", "list", "watch", "create", "delete", "update", "patch"],
                ),
                events(),
            ],
        ),
        (
            "deployment-controller",
            vec![
                rule(&[EXTENSIONS, APPS], &["deployments"], &["get", "list", "watch", "update"]),
                rule(&[EXTENSIONS, APPS], &["deployments/status"], &["update"]),
                rule(&[EXTENSIONS, APPS], &["deployments/finalizers"], &["update"]),
                rule(
                    &[APPS, EXTENSIONS],
                    &["replicasets"],
                    &["get", "list", "watch", "create", "update", "patch", "delete"],
                ),
                rule(&[LEGACY], &["pods"], &["get", "list", "watch", "update"]),
                events(),
            ],
        ),
        (
            "disruption-controller",
            vec![
                rule(&[EXTENSIONS, APPS], &["deployments"], READ),
                rule(&[APPS, EXTENSIONS], &["replicasets"], READ),
                rule(&[LEGACY], &["replicationcontrollers"], READ),
                rule(&[POLICY], &["poddisruptionbudgets"], READ),
                rule(&[APPS], &["statefulsets"], READ),
                rule(&[POLICY], &["poddisruptionbudgets/status"], &["update"]),
                rule(&[LEGACY], &["pods/status"], &["patch", "update"]),
                rule(&["*"], &["*/scale"], &["get"]),
                events(),
            ],
        ),
        (
            "endpoint-controller",
            vec![
                rule(&[LEGACY], &["services", "pods"], READ),
                rule(&[LEGACY], &["endpoints"], &["get", "list", "watch", "create", "update", "delete"]),
                rule(&[LEGACY], &["endpoints/restricted"], &["create"]),
                events(),
            ],
        ),
        (
            "endpointslice-controller",
            vec![
                rule(&[LEGACY], &["services", "pods", "nodes"], READ),
                rule(&[LEGACY], &["services/finalizers"], &["update"]),
                rule(&[DISCOVERY], &["endpointslices"], &["get", "list", "watch", "create", "update", "delete"]),
                events(),
            ],
        ),
        (
            "generic-garbage-collector",
            vec![rule(&["*"], &["*"], &["get", "list", "watch", "patch", "update", "delete"]), events()],
        ),
        (
            "horizontal-pod-autoscaler",
            vec![
                rule(&[AUTOSCALING], &["horizontalpodautoscalers"], READ),
                rule(&[AUTOSCALING], &["horizontalpodautoscalers/status"], &["update"]),
                rule(&["*"], &["*/scale"], &["get", "update"]),
                rule(&[LEGACY], &["pods"], &["list", "watch"]),
                rule(&["metrics.k8s.io"], &["pods"], &["list", "watch"]),
                rule(&["custom.metrics.k8s.io"], &["*"], READ),
                rule(&["external.metrics.k8s.io"], &["*"], READ),
                events(),
            ],
        ),
        (
            "job-controller",
            vec![
                rule(&[BATCH], &["jobs"], &["get", "list", "watch", "update", "patch"]),
                rule(&[BATCH], &["jobs/status"], &["update"]),
                rule(&[BATCH], &["jobs/finalizers"], &["update"]),
                rule(&[LEGACY], &["pods"], &["list", "watch", "create", "delete", "patch"]),
                events(),
            ],
        ),
        (
            "namespace-controller",
            vec![
                rule(&[LEGACY], &["namespaces"], &["get", "list", "watch", "delete"]),
                rule(&[LEGACY], &["namespaces/finalize", "namespaces/status"], &["update"]),
                rule(&["*"], &["*"], &["get", "list", "watch", "delete", "deletecollection"]),
            ],
        ),
        (
            "node-controller",
            vec![
                rule(&[LEGACY], &["nodes"], &["get", "list", "watch", "update", "delete", "patch"]),
                rule(&[LEGACY], &["nodes/status"], &["patch", "update"]),
                rule(&[LEGACY], &["pods/status"], &["patch", "update"]),
                rule(&[LEGACY], &["pods"], &["list", "watch", "get", "delete"]),
                events(),
            ],
        ),
        (
            "persistent-volume-binder",
            vec![
                rule(&[LEGACY], &["persistentvolumes"], &["get", "list", "watch", "update", "create", "delete"]),
                rule(&[LEGACY], &["persistentvolumes/status"], &["update"]),
                rule(&[LEGACY], &["persistentvolumeclaims"], &["get", "list", "watch", "update"]),
                rule(&[LEGACY], &["persistentvolumeclaims/status"], &["update"]),
                rule(&[LEGACY], &["pods"], &["list", "watch", "get", "create", "delete"]),
                rule(&[STORAGE], &["storageclasses"], READ),
                rule(&[LEGACY], &["nodes"], &["list", "watch"]),
                events(),
                rule(&[LEGACY], &["events"], &["watch"]),
                rule(&[LEGACY], &["services"], &["get"]),
            ],
        ),
        (
            "pv-protection-controller",
            vec![rule(&[LEGACY], &["persistentvolumes"], &["get", "list", "watch", "update"]), events()],
        ),
        (
            "pvc-protection-controller",
            vec![
                rule(&[LEGACY], &["persistentvolumeclaims"], &["get", "list", "watch", "update"]),
                rule(&[LEGACY], &["pods"], &["list", "watch", "get"]),
                events(),
            ],
        ),
        (
            "replicaset-controller",
            vec![
                rule(&[APPS, EXTENSIONS], &["replicasets"], &["get", "list", "watch", "update"]),
                rule(&[APPS, EXTENSIONS], &["replicasets/status"], &["update"]),
                rule(&[APPS, EXTENSIONS], &["replicasets/finalizers"], &["update"]),
                rule(&[LEGACY], &["pods"], &["list", "watch", "patch", "create", "delete"]),
                events(),
            ],
        ),
        (
            "replication-controller",
            vec![
                rule(&[LEGACY], &["replicationcontrollers"], &["get", "list", "watch", "update"]),
                rule(&[LEGACY], &["replicationcontrollers/status"], &["update"]),
                rule(&[LEGACY], &["replicationcontrollers/finalizers"], &["update"]),
                rule(&[LEGACY], &["pods"], &["list", "watch", "patch", "create", "delete"]),
                events(),
            ],
        ),
        (
            "resourcequota-controller",
            vec![
                rule(&["*"], &["*"], &["list", "watch"]),
                rule(&[LEGACY], &["resourcequotas/status"], &["update"]),
                events(),
            ],
        ),
        ("root-ca-cert-publisher", vec![rule(&[LEGACY], &["configmaps"], &["create", "update"]), events()]),
        ("service-account-controller", vec![rule(&[LEGACY], &["serviceaccounts"], &["create"]), events()]),
        (
            "statefulset-controller",
            vec![
                rule(&[LEGACY], &["pods"], &["list", "watch"]),
                rule(&[APPS], &["statefulsets"], READ),
                rule(&[APPS], &["statefulsets/status"], &["update"]),
                rule(&[APPS], &["statefulsets/finalizers"], &["update"]),
                rule(&[LEGACY], &["pods"], &["get", "create", "delete", "update", "patch"]),
                rule(
                    &[APPS],
                    &["controllerrevisions"],
                    &["get", "create", "delete", "update", "patch", "list", "watch"],
                ),
                rule(&[LEGACY], &["persistentvolumeclaims"], &["get", "create", "list", "watch"]),
                rule(&[LEGACY], &["persistentvolumeclaims"], &["update", "delete"]),
                rule(&[LEGACY], &["pods/finalizers"], &["update"]),
                events(),
            ],
        ),
        (
            "ttl-after-finished-controller",
            vec![rule(&[BATCH], &["jobs"], &["get", "list", "watch", "delete"]), events()],
        ),
    ]
}

/// The prefix of the controllers' roles and bindings.
pub const CONTROLLER_PREFIX: &str = "system:controller:";

/// A `User` subject.
fn user(name: &str) -> Value {
    json!({"kind": "User", "apiGroup": RBAC, "name": name})
}

fn group(name: &str) -> Value {
    json!({"kind": "Group", "apiGroup": RBAC, "name": name})
}

/// The built-in components' ClusterRoleBindings: (binding name, ClusterRole, subjects).
pub fn component_bindings() -> Vec<(String, String, Vec<Value>)> {
    let b = |name: &str, role: &str, subjects: Vec<Value>| (name.to_string(), role.to_string(), subjects);
    let mut out = vec![
        // Upstream keeps this binding without subjects: nodes are authorized by the Node
        // authorizer, with the role's rules.
        b("system:node", "system:node", vec![]),
        b("system:node-proxier", "system:node-proxier", vec![user("system:kube-proxy")]),
        b("system:kube-scheduler", "system:kube-scheduler", vec![user("system:kube-scheduler")]),
        b("system:volume-scheduler", "system:volume-scheduler", vec![user("system:kube-scheduler")]),
        b(
            "system:kube-controller-manager",
            "system:kube-controller-manager",
            vec![user("system:kube-controller-manager")],
        ),
        b(
            "system:service-account-issuer-discovery",
            "system:service-account-issuer-discovery",
            vec![group("system:serviceaccounts")],
        ),
        b("system:k1s-dns", "system:k1s-dns", vec![user("system:k1s-dns")]),
        b("system:k1s-proxy", "system:k1s-proxy", vec![user("system:kube-proxy")]),
        b("system:k1s-scheduler", "system:k1s-scheduler", vec![user("system:kube-scheduler")]),
        b("system:k1s-supervisor", "system:k1s-supervisor", vec![user("system:k1s-supervisor")]),
        b("system:k1s-deploy", "system:k1s-deploy", vec![user("system:k1s-deploy")]),
        // The API server's client towards kubelets (k3s's binding of the same name).
        b("kube-apiserver-kubelet-admin", "system:kubelet-api-admin", vec![user("kube-apiserver-kubelet-client")]),
        b(
            "system:k1s-local-path-provisioner",
            "system:persistent-volume-provisioner",
            vec![user("system:k1s-local-path-provisioner")],
        ),
    ];
    // Upstream binds each controller role to the controller's ServiceAccount in kube-system
    // (`--use-service-account-credentials`); k1s's controllers share the controller manager's
    // client, which is bound to them all instead.
    for (name, _) in controller_roles() {
        let full = format!("{CONTROLLER_PREFIX}{name}");
        out.push((full.clone(), full, vec![user("system:kube-controller-manager")]));
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::auth::{Attributes, Authorizer, Decision, UserInfo};
    use crate::rbac::{default_policy, RbacAuthorizer};
    use crate::request::{Query, RequestInfo};
    use k1s_store::Store;
    use serde_json::Value;

    /// An RBAC authorizer over a store holding the default policy.
    async fn defaults() -> (tempfile::TempDir, RbacAuthorizer) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path(), k1s_store::StoreOptions::default()).expect("store");
        for o in default_policy() {
            let resource = if o["kind"] == "ClusterRole" { "clusterroles" } else { "clusterrolebindings" };
            let key = format!(
                "/registry/rbac.authorization.k8s.io/{resource}/{}",
                o["metadata"]["name"].as_str().unwrap_or("")
            );
            store.create(&key, bytes::Bytes::from(o.to_string())).await.expect("create");
        }
        (dir, RbacAuthorizer::new(store))
    }

    fn user(name: &str) -> UserInfo {
        UserInfo::new(name, &["system:authenticated"])
    }

    /// (method, path and query)
    type Request = (&'static str, &'static str);

    fn may(rbac: &RbacAuthorizer, user: &UserInfo, method: &str, path: &str) -> bool {
        let (path, query) = path.split_once('?').unwrap_or((path, ""));
        let method = http::Method::from_bytes(method.as_bytes()).expect("method");
        let info = RequestInfo::parse(&method, path, &Query::parse(Some(query)));
        rbac.authorize(&Attributes { user, info: &info }) == Decision::Allow
    }

    #[test]
    fn no_built_in_identity_is_bound_to_cluster_admin_and_every_role_bound_exists() {
        let policy = default_policy();
        let roles: Vec<&str> = policy
            .iter()
            .filter(|o| o["kind"] == "ClusterRole")
            .filter_map(|o| o["metadata"]["name"].as_str())
            .collect();
        for b in policy.iter().filter(|o| o["kind"] == "ClusterRoleBinding") {
            let role = b["roleRef"]["name"].as_str().unwrap_or_default();
            assert!(roles.contains(&role), "{} binds the missing role {role}", b["metadata"]["name"]);
            let subjects: Vec<(&str, &str)> = b["subjects"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|s| (s["kind"].as_str().unwrap_or(""), s["name"].as_str().unwrap_or("")))
                .collect();
            if role == "cluster-admin" {
                assert_eq!(subjects, [("Group", "system:masters")]);
            }
            assert!(!subjects.iter().any(|(_, n)| *n == "system:masters") || role == "cluster-admin");
        }
        let names: Vec<&Value> = policy.iter().map(|o| &o["metadata"]["name"]).collect();
        let mut unique = names.clone();
        unique.dedup();
        assert_eq!(names.len(), unique.len(), "each default object once");
    }

    #[tokio::test]
    async fn each_component_may_do_its_work_and_no_more() {
        let (_dir, rbac) = defaults().await;
        let cases: &[(&str, &[Request], &[Request])] = &[
            (
                "system:kube-scheduler",
                &[
                    ("POST", "/api/v1/namespaces/default/pods/p/binding"),
                    ("GET", "/api/v1/pods?watch=true"),
                    ("PATCH", "/api/v1/namespaces/default/pods/p/status"),
                    ("PATCH", "/api/v1/persistentvolumes/pv"),
                    ("GET", "/apis/scheduling.k8s.io/v1/priorityclasses"),
                    ("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler"),
                    ("POST", "/api/v1/namespaces/default/events"),
                ],
                &[
                    ("POST", "/api/v1/namespaces/default/secrets"),
                    ("GET", "/api/v1/namespaces/default/secrets/s"),
                    ("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager"),
                    ("POST", "/apis/apps/v1/namespaces/default/deployments"),
                ],
            ),
            (
                "system:kube-proxy",
                &[
                    ("GET", "/api/v1/services?watch=true"),
                    ("GET", "/apis/discovery.k8s.io/v1/endpointslices"),
                    ("GET", "/apis/networking.k8s.io/v1/networkpolicies"),
                    ("GET", "/api/v1/pods"),
                    ("PATCH", "/api/v1/namespaces/default/services/web/status"),
                ],
                &[
                    ("POST", "/api/v1/namespaces/default/secrets"),
                    ("GET", "/api/v1/namespaces/default/secrets/s"),
                    ("PATCH", "/api/v1/namespaces/default/services/web"),
                ],
            ),
            (
                "system:kube-controller-manager",
                &[
                    ("POST", "/apis/apps/v1/namespaces/default/replicasets"),
                    ("POST", "/api/v1/namespaces/default/pods"),
                    ("PUT", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/web-abc"),
                    ("POST", "/api/v1/namespaces/default/endpoints"),
                    ("PUT", "/api/v1/namespaces/gone/finalize"),
                    ("PUT", "/apis/rbac.authorization.k8s.io/v1/clusterroles/admin"),
                    ("POST", "/apis/batch/v1/namespaces/default/jobs"),
                    ("PUT", "/apis/apps/v1/namespaces/default/deployments/web/scale"),
                    ("PUT", "/api/v1/namespaces/default/resourcequotas/q/status"),
                    ("POST", "/api/v1/namespaces/default/configmaps"),
                    ("POST", "/api/v1/namespaces/default/serviceaccounts"),
                    ("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager"),
                ],
                &[
                    ("POST", "/api/v1/namespaces"),
                    ("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"),
                    ("POST", "/apis/apps/v1/namespaces/default/deployments"),
                    ("POST", "/api/v1/namespaces/default/pods/p/exec"),
                ],
            ),
            (
                "system:k1s-dns",
                &[
                    ("GET", "/api/v1/services?watch=true"),
                    ("GET", "/apis/discovery.k8s.io/v1/endpointslices"),
                    ("GET", "/api/v1/namespaces"),
                ],
                &[
                    ("GET", "/api/v1/namespaces/default/secrets/s"),
                    ("PATCH", "/api/v1/namespaces/default/services/web"),
                ],
            ),
            (
                "system:k1s-supervisor",
                &[("GET", "/api/v1/nodes?watch=true&fieldSelector=metadata.name%3Dn1"), ("PATCH", "/api/v1/nodes/n1")],
                &[("GET", "/api/v1/pods"), ("DELETE", "/api/v1/nodes/n1"), ("PATCH", "/api/v1/nodes/n1/status")],
            ),
            (
                "system:k1s-local-path-provisioner",
                &[
                    ("POST", "/api/v1/persistentvolumes"),
                    ("DELETE", "/api/v1/persistentvolumes/pvc-1"),
                    ("GET", "/api/v1/persistentvolumeclaims?watch=true"),
                    ("GET", "/apis/storage.k8s.io/v1/storageclasses/local-path"),
                ],
                &[
                    ("GET", "/api/v1/namespaces/default/secrets/s"),
                    ("DELETE", "/api/v1/namespaces/default/persistentvolumeclaims/c"),
                ],
            ),
            (
                "system:k1s-deploy",
                &[
                    ("PATCH", "/apis/rbac.authorization.k8s.io/v1/clusterroles/x"),
                    ("DELETE", "/api/v1/namespaces/default/secrets/s"),
                ],
                &[("GET", "/metrics")],
            ),
            (
                "system:anonymous",
                &[("GET", "/version"), ("GET", "/readyz")],
                &[("GET", "/api/v1/namespaces"), ("GET", "/apis"), ("GET", "/readyz/etcd")],
            ),
        ];
        for (name, allowed, refused) in cases {
            let u = if *name == "system:anonymous" { UserInfo::anonymous() } else { user(name) };
            for (m, p) in *allowed {
                assert!(may(&rbac, &u, m, p), "{name} may {m} {p}");
            }
            for (m, p) in *refused {
                assert!(!may(&rbac, &u, m, p), "{name} may not {m} {p}");
            }
        }
        // A kubelet gets nothing from RBAC: the Node authorizer decides for it.
        let kubelet = UserInfo::new("system:node:n1", &["system:nodes", "system:authenticated"]);
        assert!(!may(&rbac, &kubelet, "GET", "/api/v1/namespaces/default/secrets/s"));
        assert!(may(&rbac, &kubelet, "GET", "/version"), "discovery, as every authenticated user");
        // ServiceAccounts read the issuer's discovery documents.
        let sa =
            UserInfo::new("system:serviceaccount:default:robot", &["system:serviceaccounts", "system:authenticated"]);
        assert!(may(&rbac, &sa, "GET", "/.well-known/openid-configuration"));
    }
}
