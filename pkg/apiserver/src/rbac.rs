//! RBAC authorization (`rbac.authorization.k8s.io/v1`) as upstream's authorizer decides: a
//! request is allowed when a ClusterRoleBinding, or a RoleBinding in the request's namespace,
//! names the user (by name, one of its groups, or as a ServiceAccount) and its role has a rule
//! covering the request. RBAC only allows; having no rule is "no opinion", which the union of
//! authorizers turns into a denial. ClusterRoles with an `aggregationRule` take the rules of the
//! ClusterRoles their selectors match, resolved when a request is authorized.
//!
//! Also the default roles and bindings every cluster starts with (`cluster-admin`, `admin`,
//! `edit`, `view`, discovery and self-review access, and the built-in components' roles of
//! `bootstrap_policy`), created on start when missing and, as upstream's RBAC bootstrap does on
//! every start, given what a newer default adds to them.

use crate::admission_cache::Cache;
use crate::auth::{Attributes, Authorizer, Decision, UserInfo};
use crate::registry::Registry;
use crate::request::{RequestInfo, RequestSubresource, RequestVerb};
use k1s_api::resources::ResourceInfo;
use k1s_store::{KeyValue, Store};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

const GROUP: &str = "rbac.authorization.k8s.io";

fn info(resource: &str) -> Option<&'static ResourceInfo> {
    k1s_api::resources::find(GROUP, "v1", resource)
}

/// One rule of a Role or ClusterRole.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default, rename_all = "camelCase")]
pub struct PolicyRule {
    pub verbs: Vec<String>,
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub resource_names: Vec<String>,
    #[serde(rename = "nonResourceURLs")]
    pub non_resource_urls: Vec<String>,
}

impl PolicyRule {
    /// Whether this rule covers the request.
    pub fn allows(&self, req: &RequestInfo) -> bool {
        if !self.verbs.iter().any(|v| v == "*" || v == req.verb.as_str()) {
            return false;
        }
        if !req.is_resource {
            let path = req.path.as_str();
            return self
                .non_resource_urls
                .iter()
                .any(|u| u == "*" || u == path || u.strip_suffix('*').is_some_and(|prefix| path.starts_with(prefix)));
        }
        let group_ok = self.api_groups.iter().any(|g| g == "*" || *g == req.group);
        let resource_ok = self.resources.iter().any(|r| {
            if r == "*" {
                return true;
            }
            match req.subresource_name() {
                None => *r == req.resource,
                Some(sub) => r.split_once('/').is_some_and(|(res, s)| s == sub && (res == "*" || res == req.resource)),
            }
        });
        // Names narrow a rule to those objects: requests without a name (list, create) are not
        // covered by it.
        let name_ok = self.resource_names.is_empty()
            || req.name.as_ref().is_some_and(|n| self.resource_names.iter().any(|r| r == n));
        group_ok && resource_ok && name_ok
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Subject {
    kind: String,
    name: String,
    namespace: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RoleRef {
    kind: String,
    name: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Binding {
    subjects: Vec<Subject>,
    role_ref: RoleRef,
}

impl Binding {
    /// Whether a subject of this binding is `user`. A ServiceAccount subject without a namespace
    /// is in the RoleBinding's own (`namespace`).
    fn applies_to(&self, user: &UserInfo, namespace: Option<&str>) -> bool {
        self.subjects.iter().any(|s| match s.kind.as_str() {
            "User" => s.name == user.name,
            "Group" => user.groups.contains(&s.name),
            "ServiceAccount" => {
                let ns = s.namespace.as_deref().filter(|n| !n.is_empty()).or(namespace);
                ns.is_some_and(|ns| {
                    user.name.strip_prefix("system:serviceaccount:").and_then(|rest| rest.split_once(':'))
                        == Some((ns, s.name.as_str()))
                })
            }
            _ => false,
        })
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct AggregationRule {
    cluster_role_selectors: Vec<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RoleMeta {
    name: String,
    labels: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Role {
    metadata: RoleMeta,
    rules: Option<Vec<PolicyRule>>,
    aggregation_rule: Option<AggregationRule>,
}

fn decode<T: DeserializeOwned>(kv: &KeyValue) -> Option<T> {
    serde_json::from_slice(&kv.value).ok()
}

/// The RBAC authorizer, reading roles and bindings from watch-fed caches of the store (each
/// object decoded once when it changes; a read first takes the store's pending events, so it
/// sees every completed write, as a read from the store would).
pub struct RbacAuthorizer {
    cluster_bindings: Cache<Binding>,
    bindings: Cache<Binding>,
    cluster_roles: Cache<Role>,
    roles: Cache<Role>,
}

/// Logs a failed read of the policy; the read then grants nothing.
fn or_nothing<T: Default>(what: &str, r: Result<T, k1s_store::StoreError>) -> T {
    r.unwrap_or_else(|e| {
        tracing::warn!(what, error = %e, "RBAC: reading the policy failed");
        T::default()
    })
}

impl RbacAuthorizer {
    pub fn new(store: Store) -> Self {
        let prefix =
            |r: &str| info(r).map(ResourceInfo::storage_prefix).unwrap_or_else(|| format!("/registry/{GROUP}/{r}/"));
        RbacAuthorizer {
            cluster_bindings: Cache::new(store.clone(), &prefix("clusterrolebindings"), decode::<Binding>),
            bindings: Cache::new(store.clone(), &prefix("rolebindings"), decode::<Binding>),
            cluster_roles: Cache::new(store.clone(), &prefix("clusterroles"), decode::<Role>),
            roles: Cache::new(store, &prefix("roles"), decode::<Role>),
        }
    }

    /// A ClusterRole with the ClusterRoles it aggregates.
    fn cluster_role(&self, name: &str, out: &mut Vec<Arc<Role>>) {
        let Some(role) = or_nothing("clusterroles", self.cluster_roles.get("", name)) else { return };
        let mut seen = vec![name.to_string()];
        let mut all = None;
        self.collect(role, &mut all, &mut seen, out);
    }

    /// `role` and the roles it aggregates; `all` is every ClusterRole, listed once when the
    /// first aggregation needs it.
    fn collect(
        &self,
        role: Arc<Role>,
        all: &mut Option<Vec<Arc<Role>>>,
        seen: &mut Vec<String>,
        out: &mut Vec<Arc<Role>>,
    ) {
        let selectors: Vec<k1s_api::selectors::Selector> = role
            .aggregation_rule
            .iter()
            .flat_map(|agg| &agg.cluster_role_selectors)
            .filter_map(|s| k1s_api::selectors::Selector::from_label_selector(s).ok())
            .collect();
        out.push(role);
        if selectors.is_empty() {
            return;
        }
        let listed = all.get_or_insert_with(|| or_nothing("clusterroles", self.cluster_roles.list(""))).clone();
        for other in listed {
            let (name, labels) = (&other.metadata.name, other.metadata.labels.as_ref());
            if seen.contains(name) || !selectors.iter().any(|s| s.matches_labels(labels)) {
                continue;
            }
            seen.push(name.clone());
            self.collect(other.clone(), all, seen, out);
        }
    }

    /// The roles a binding grants (a RoleBinding's Role in its namespace).
    fn bound_roles(&self, binding: &Binding, namespace: Option<&str>) -> Vec<Arc<Role>> {
        let mut out = Vec::new();
        match (binding.role_ref.kind.as_str(), namespace) {
            ("ClusterRole", _) => self.cluster_role(&binding.role_ref.name, &mut out),
            ("Role", Some(ns)) => out.extend(or_nothing("roles", self.roles.get(ns, &binding.role_ref.name))),
            _ => {}
        }
        out
    }

    /// The rules a binding grants (a RoleBinding's in its namespace).
    fn bound_rules(&self, binding: &Binding, namespace: Option<&str>) -> Vec<PolicyRule> {
        self.bound_roles(binding, namespace).iter().flat_map(|r| r.rules.iter().flatten().cloned()).collect()
    }

    /// Hands `grant` the roles of each binding that names `user`: the ClusterRoleBindings, then,
    /// with `namespace`, the RoleBindings there; stops at the first `true`, and says whether
    /// there was one.
    fn any_grant(&self, user: &UserInfo, namespace: Option<&str>, mut grant: impl FnMut(&[Arc<Role>]) -> bool) -> bool {
        for b in or_nothing("clusterrolebindings", self.cluster_bindings.list("")) {
            if b.applies_to(user, None) && grant(&self.bound_roles(&b, None)) {
                return true;
            }
        }
        let Some(ns) = namespace.filter(|n| !n.is_empty()) else { return false };
        for b in or_nothing("rolebindings", self.bindings.list(ns)) {
            if b.applies_to(user, Some(ns)) && grant(&self.bound_roles(&b, Some(ns))) {
                return true;
            }
        }
        false
    }

    /// Every rule that applies to `user` cluster-wide and, with `namespace`, in that namespace:
    /// what a SelfSubjectRulesReview lists.
    pub fn rules_for(&self, user: &UserInfo, namespace: Option<&str>) -> Vec<PolicyRule> {
        let mut rules = Vec::new();
        self.any_grant(user, namespace, |roles| {
            rules.extend(roles.iter().flat_map(|r| r.rules.iter().flatten().cloned()));
            false
        });
        rules
    }
}

impl Authorizer for RbacAuthorizer {
    fn authorize(&self, attrs: &Attributes<'_>) -> Decision {
        let req = attrs.info;
        // A namespace is in itself: a RoleBinding there may grant reading it (upstream's request
        // info gives `/api/v1/namespaces/<name>` that namespace).
        let own = (req.resource == "namespaces" && req.group.is_empty()).then_some(req.name.as_deref()).flatten();
        let namespace = req.namespace.as_deref().or(own).filter(|_| req.is_resource);
        let allows = |roles: &[Arc<Role>]| roles.iter().flat_map(|r| r.rules.iter().flatten()).any(|r| r.allows(req));
        if self.any_grant(attrs.user, namespace, allows) {
            Decision::Allow
        } else {
            Decision::no_opinion()
        }
    }
}

/// Upstream's escalation prevention, as a validating admission step for the RBAC kinds: a user may
/// create or update a Role or ClusterRole only with rules it already holds (or the `escalate`
/// verb on it), and a binding only to a role whose rules it holds (or the `bind` verb on the
/// role). `system:masters` is exempt (its requests never reach RBAC), as upstream's.
pub struct EscalationCheck {
    pub rbac: Arc<RbacAuthorizer>,
    /// The API server's authorizer, which decides `escalate` and `bind` as any other verb.
    pub authz: Arc<dyn Authorizer>,
}

impl EscalationCheck {
    /// Whether `user` may `verb` (`escalate` or `bind`) the role `name`.
    fn allowed(&self, user: &UserInfo, verb: &str, resource: &str, namespace: Option<&str>, name: &str) -> bool {
        let req = RequestInfo {
            is_resource: true,
            verb: RequestVerb::named(verb),
            group: GROUP.into(),
            version: "v1".into(),
            resource: resource.into(),
            namespace: namespace.map(str::to_string),
            name: Some(name.to_string()),
            ..Default::default()
        };
        self.authz.authorize(&Attributes { user, info: &req }) == Decision::Allow
    }

    fn check(&self, attrs: &crate::admission::Attributes<'_>) -> Result<(), crate::error::ApiError> {
        let res = attrs.resource;
        let Some(obj) = attrs.object.as_deref() else { return Ok(()) };
        let user = attrs.user;
        let binding: Option<Binding> = match res.resource {
            "roles" | "clusterroles" => None,
            "rolebindings" | "clusterrolebindings" => Some(serde_json::from_value(obj.clone()).unwrap_or_default()),
            _ => return Ok(()),
        };
        let (role_resource, role_name) = match &binding {
            None => (res.resource, attrs.name),
            Some(b) if b.role_ref.kind == "Role" => ("roles", b.role_ref.name.as_str()),
            Some(b) => ("clusterroles", b.role_ref.name.as_str()),
        };
        let verb = if binding.is_some() { "bind" } else { "escalate" };
        // Asked in the object's own namespace, as upstream asks (a RoleBinding may be allowed
        // to bind a ClusterRole there).
        if self.allowed(user, verb, role_resource, attrs.namespace, role_name) {
            return Ok(());
        }
        let forbidden =
            |message: String| crate::error::ApiError::forbidden_message(res.group, res.resource, attrs.name, message);
        let requested: Vec<PolicyRule> = if let Some(b) = &binding {
            self.rbac.bound_rules(b, attrs.namespace)
        } else {
            if obj.get("aggregationRule").is_some_and(|a| !a.is_null()) {
                return Err(forbidden("must have cluster-admin privileges to use the aggregationRule".into()));
            }
            serde_json::from_value(obj.get("rules").cloned().unwrap_or(Value::Null)).unwrap_or_default()
        };
        // A RoleBinding grants in its namespace, a Role holds rules for its namespace.
        let scope = if res.resource == "clusterroles" || res.resource == "clusterrolebindings" {
            None
        } else {
            attrs.namespace
        };
        let owned = self.rbac.rules_for(user, scope);
        let missing = uncovered(&owned, &requested);
        if missing.is_empty() {
            return Ok(());
        }
        let listed: Vec<String> = missing.iter().map(describe).collect();
        Err(forbidden(format!(
            "user {:?} (groups={:?}) is attempting to grant RBAC permissions not currently held:\n{}",
            user.name,
            user.groups,
            listed.join("\n")
        )))
    }
}

impl crate::admission::ValidatingPlugin for EscalationCheck {
    fn name(&self) -> &'static str {
        "RBACEscalation"
    }

    fn validate<'a>(
        &'a self,
        attrs: &'a crate::admission::Attributes<'_>,
    ) -> futures::future::BoxFuture<'a, Result<(), crate::error::ApiError>> {
        Box::pin(async move {
            let relevant = attrs.resource.group == GROUP
                && attrs.subresource.is_none()
                && matches!(attrs.operation, crate::admission::Operation::Create | crate::admission::Operation::Update);
            if relevant {
                self.check(attrs)
            } else {
                Ok(())
            }
        })
    }
}

/// The single-permission rules of `requested` that no rule of `owned` covers.
fn uncovered(owned: &[PolicyRule], requested: &[PolicyRule]) -> Vec<PolicyRule> {
    let mut missing = Vec::new();
    for r in requested {
        for verb in &r.verbs {
            for url in &r.non_resource_urls {
                let req = RequestInfo {
                    is_resource: false,
                    verb: RequestVerb::named(verb),
                    path: url.clone(),
                    ..Default::default()
                };
                if !owned.iter().any(|o| o.allows(&req)) {
                    missing.push(PolicyRule {
                        verbs: vec![verb.clone()],
                        non_resource_urls: vec![url.clone()],
                        ..Default::default()
                    });
                }
            }
            for group in &r.api_groups {
                for resource in &r.resources {
                    let (res, sub) = match resource.split_once('/') {
                        Some((res, sub)) => (res.to_string(), Some(sub.to_string())),
                        None => (resource.clone(), None),
                    };
                    let names: Vec<Option<String>> = if r.resource_names.is_empty() {
                        vec![None]
                    } else {
                        r.resource_names.iter().cloned().map(Some).collect()
                    };
                    for name in names {
                        let req = RequestInfo {
                            is_resource: true,
                            verb: RequestVerb::named(verb),
                            group: group.clone(),
                            resource: res.clone(),
                            subresource: sub.as_deref().map(RequestSubresource::named),
                            name: name.clone(),
                            ..Default::default()
                        };
                        if !owned.iter().any(|o| o.allows(&req)) {
                            missing.push(PolicyRule {
                                verbs: vec![verb.clone()],
                                api_groups: vec![group.clone()],
                                resources: vec![resource.clone()],
                                resource_names: name.into_iter().collect(),
                                ..Default::default()
                            });
                        }
                    }
                }
            }
        }
    }
    missing
}

/// A rule as upstream prints one in escalation errors.
fn describe(r: &PolicyRule) -> String {
    let list = |v: &[String]| v.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(" ");
    let mut parts = Vec::new();
    if !r.api_groups.is_empty() {
        parts.push(format!("APIGroups:[{}]", list(&r.api_groups)));
    }
    if !r.resources.is_empty() {
        parts.push(format!("Resources:[{}]", list(&r.resources)));
    }
    if !r.resource_names.is_empty() {
        parts.push(format!("ResourceNames:[{}]", list(&r.resource_names)));
    }
    if !r.non_resource_urls.is_empty() {
        parts.push(format!("NonResourceURLs:[{}]", list(&r.non_resource_urls)));
    }
    parts.push(format!("Verbs:[{}]", list(&r.verbs)));
    format!("{{{}}}", parts.join(", "))
}

pub(crate) fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": groups, "resources": resources, "verbs": verbs})
}

pub(crate) fn urls(urls: &[&str], verbs: &[&str]) -> Value {
    json!({"nonResourceURLs": urls, "verbs": verbs})
}

pub(crate) const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "delete", "deletecollection", "patch", "update"];
const READ_WRITE: &[&str] = &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

/// The default ClusterRoles: (name, labels beyond the bootstrapping one, rules, the label the
/// role aggregates by).
fn default_cluster_roles() -> Vec<(&'static str, Value, Vec<Value>, Option<&'static str>)> {
    let agg = |to: &str| json!({format!("rbac.authorization.k8s.io/aggregate-to-{to}"): "true"});
    vec![
        ("cluster-admin", json!({}), vec![rule(&["*"], &["*"], &["*"]), urls(&["*"], &["*"])], None),
        ("admin", json!({}), Vec::new(), Some("admin")),
        ("edit", agg("admin"), Vec::new(), Some("edit")),
        ("view", agg("edit"), Vec::new(), Some("view")),
        (
            "system:aggregate-to-admin",
            agg("admin"),
            vec![
                rule(&["authorization.k8s.io"], &["localsubjectaccessreviews"], &["create"]),
                rule(&[GROUP], &["rolebindings", "roles"], READ_WRITE),
            ],
            None,
        ),
        (
            "system:aggregate-to-edit",
            agg("edit"),
            vec![
                rule(
                    &[""],
                    &["pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets", "services/proxy"],
                    READ,
                ),
                rule(&[""], &["serviceaccounts"], &["impersonate"]),
                rule(&[""], &["pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"], WRITE),
                rule(&[""], &["pods/eviction"], &["create"]),
                rule(
                    &[""],
                    &[
                        "configmaps",
                        "events",
                        "persistentvolumeclaims",
                        "replicationcontrollers",
                        "replicationcontrollers/scale",
                        "secrets",
                        "serviceaccounts",
                        "services",
                        "services/proxy",
                    ],
                    WRITE,
                ),
                rule(&[""], &["serviceaccounts/token"], &["create"]),
                rule(
                    &["apps"],
                    &[
                        "daemonsets",
                        "deployments",
                        "deployments/rollback",
                        "deployments/scale",
                        "replicasets",
                        "replicasets/scale",
                        "statefulsets",
                        "statefulsets/scale",
                    ],
                    WRITE,
                ),
                rule(&["autoscaling"], &["horizontalpodautoscalers"], WRITE),
                rule(&["batch"], &["cronjobs", "jobs"], WRITE),
                rule(&["policy"], &["poddisruptionbudgets"], WRITE),
                rule(&["networking.k8s.io"], &["ingresses", "networkpolicies"], WRITE),
                rule(&["coordination.k8s.io"], &["leases"], READ_WRITE),
            ],
            None,
        ),
        (
            "system:aggregate-to-view",
            agg("view"),
            vec![
                rule(
                    &[""],
                    &[
                        "configmaps",
                        "endpoints",
                        "persistentvolumeclaims",
                        "persistentvolumeclaims/status",
                        "pods",
                        "replicationcontrollers",
                        "replicationcontrollers/scale",
                        "serviceaccounts",
                        "services",
                        "services/status",
                    ],
                    READ,
                ),
                rule(
                    &[""],
                    &[
                        "bindings",
                        "events",
                        "limitranges",
                        "namespaces/status",
                        "pods/log",
                        "pods/status",
                        "replicationcontrollers/status",
                        "resourcequotas",
                        "resourcequotas/status",
                    ],
                    READ,
                ),
                rule(&[""], &["namespaces"], READ),
                rule(&["discovery.k8s.io"], &["endpointslices"], READ),
                rule(
                    &["apps"],
                    &[
                        "controllerrevisions",
                        "daemonsets",
                        "daemonsets/status",
                        "deployments",
                        "deployments/scale",
                        "deployments/status",
                        "replicasets",
                        "replicasets/scale",
                        "replicasets/status",
                        "statefulsets",
                        "statefulsets/scale",
                        "statefulsets/status",
                    ],
                    READ,
                ),
                rule(&["autoscaling"], &["horizontalpodautoscalers", "horizontalpodautoscalers/status"], READ),
                rule(&["batch"], &["cronjobs", "cronjobs/status", "jobs", "jobs/status"], READ),
                rule(&["policy"], &["poddisruptionbudgets", "poddisruptionbudgets/status"], READ),
                rule(&["networking.k8s.io"], &["ingresses", "ingresses/status", "networkpolicies"], READ),
            ],
            None,
        ),
        (
            // What metrics-server's manifest adds, so that view, edit and admin read `kubectl top`.
            "system:aggregated-metrics-reader",
            json!({"rbac.authorization.k8s.io/aggregate-to-admin": "true",
                   "rbac.authorization.k8s.io/aggregate-to-edit": "true",
                   "rbac.authorization.k8s.io/aggregate-to-view": "true"}),
            vec![rule(&["metrics.k8s.io"], &["nodes", "pods"], READ)],
            None,
        ),
        (
            "system:auth-delegator",
            json!({}),
            vec![
                rule(&["authentication.k8s.io"], &["tokenreviews"], &["create"]),
                rule(&["authorization.k8s.io"], &["subjectaccessreviews"], &["create"]),
            ],
            None,
        ),
        (
            "system:basic-user",
            json!({}),
            vec![
                rule(&["authorization.k8s.io"], &["selfsubjectaccessreviews", "selfsubjectrulesreviews"], &["create"]),
                rule(&["authentication.k8s.io"], &["selfsubjectreviews"], &["create"]),
            ],
            None,
        ),
        (
            "system:discovery",
            json!({}),
            vec![urls(
                &[
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                    "/healthz",
                    "/livez",
                    "/openapi",
                    "/openapi/*",
                    "/readyz",
                    "/version",
                    "/version/",
                ],
                &["get"],
            )],
            None,
        ),
        (
            // Scraping `/metrics` and the detailed health checks, for the `system:monitoring`
            // group (a Prometheus's client certificate or ServiceAccount bound to it).
            "system:monitoring",
            json!({}),
            vec![urls(
                &["/healthz", "/healthz/*", "/livez", "/livez/*", "/metrics", "/metrics/slis", "/readyz", "/readyz/*"],
                &["get"],
            )],
            None,
        ),
        (
            "system:public-info-viewer",
            json!({}),
            vec![urls(&["/healthz", "/livez", "/readyz", "/version", "/version/"], &["get"])],
            None,
        ),
    ]
}

/// The default ClusterRoleBindings: (name, groups).
const DEFAULT_BINDINGS: &[(&str, &[&str])] = &[
    ("cluster-admin", &["system:masters"]),
    ("system:basic-user", &["system:authenticated"]),
    ("system:discovery", &["system:authenticated"]),
    ("system:monitoring", &["system:monitoring"]),
    ("system:public-info-viewer", &["system:authenticated", "system:unauthenticated"]),
];

fn bootstrap_metadata(name: &str, extra_labels: &Value) -> Value {
    let mut labels = json!({"kubernetes.io/bootstrapping": "rbac-defaults"});
    if let (Some(l), Some(extra)) = (labels.as_object_mut(), extra_labels.as_object()) {
        l.extend(extra.clone());
    }
    json!({"name": name, "labels": labels, "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}})
}

/// The default roles and bindings as objects to create: ClusterRoles first.
pub fn default_policy() -> Vec<Value> {
    let mut objects = Vec::new();
    for (name, labels, rules, aggregates) in default_cluster_roles() {
        let mut role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                              "metadata": bootstrap_metadata(name, &labels)});
        match aggregates {
            Some(to) => {
                role["aggregationRule"] = json!({"clusterRoleSelectors": [
                    {"matchLabels": {format!("rbac.authorization.k8s.io/aggregate-to-{to}"): "true"}}
                ]});
            }
            None => role["rules"] = Value::Array(rules),
        }
        objects.push(role);
    }
    let components = crate::bootstrap_policy::component_roles().into_iter().map(|(n, r)| (n.to_string(), r));
    let controllers = crate::bootstrap_policy::controller_roles()
        .into_iter()
        .map(|(n, r)| (format!("{}{n}", crate::bootstrap_policy::CONTROLLER_PREFIX), r));
    for (name, rules) in components.chain(controllers) {
        objects.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                            "metadata": bootstrap_metadata(&name, &json!({})), "rules": rules}));
    }
    let binding = |name: &str, role: &str, subjects: Vec<Value>| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": bootstrap_metadata(name, &json!({})),
               "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": role},
               "subjects": subjects})
    };
    for (name, groups) in DEFAULT_BINDINGS {
        let subjects: Vec<Value> =
            groups.iter().map(|g| json!({"kind": "Group", "apiGroup": GROUP, "name": g})).collect();
        objects.push(binding(name, name, subjects));
    }
    for (name, role, subjects) in crate::bootstrap_policy::component_bindings() {
        objects.push(binding(&name, &role, subjects));
    }
    objects
}

const AUTOUPDATE: &str = "rbac.authorization.kubernetes.io/autoupdate";

/// A rule as JSON, with the fields upstream writes (empty lists left out).
fn rule_value(r: &PolicyRule) -> Value {
    let mut v = serde_json::Map::new();
    for (key, list) in [
        ("verbs", &r.verbs),
        ("apiGroups", &r.api_groups),
        ("resources", &r.resources),
        ("resourceNames", &r.resource_names),
        ("nonResourceURLs", &r.non_resource_urls),
    ] {
        if !list.is_empty() || key == "verbs" {
            v.insert(key.into(), json!(list));
        }
    }
    Value::Object(v)
}

/// What bringing a stored default object up to date takes.
#[derive(Debug, PartialEq)]
enum Reconcile {
    /// Up to date, or the object's `autoupdate` annotation is "false".
    Keep,
    Update(Value),
    /// A ClusterRoleBinding whose roleRef (immutable) is not the default's.
    Recreate,
}

/// Upstream's reconciliation of a default role or binding with the stored one, in its additive
/// mode: labels and annotations the stored object lacks are added (its own values win), rules
/// (as single permissions) and aggregation selectors it lacks are appended, and so are missing
/// subjects; nothing the stored object has is taken away, except an aggregation rule the
/// default does not have.
fn reconcile(expected: &Value, existing: &Value) -> Reconcile {
    if existing["metadata"]["annotations"][AUTOUPDATE] == "false" {
        return Reconcile::Keep;
    }
    if expected["kind"] == "ClusterRoleBinding" && existing["roleRef"] != expected["roleRef"] {
        return Reconcile::Recreate;
    }
    let mut result = existing.clone();
    for field in ["labels", "annotations"] {
        if let Some(want) = expected["metadata"][field].as_object() {
            let have = &mut result["metadata"][field];
            if !have.is_object() {
                *have = json!({});
            }
            if let Some(have) = have.as_object_mut() {
                for (k, v) in want {
                    have.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
        }
    }
    let list = |v: &Value, key: &str| v[key].as_array().cloned().unwrap_or_default();
    if expected["kind"] == "ClusterRole" {
        let rules = |v: &Value| -> Vec<PolicyRule> {
            list(v, "rules").into_iter().filter_map(|r| serde_json::from_value(r).ok()).collect()
        };
        let missing = uncovered(&rules(existing), &rules(expected));
        if !missing.is_empty() {
            let mut all = list(existing, "rules");
            all.extend(missing.iter().map(rule_value));
            result["rules"] = Value::Array(all);
        }
        match expected.get("aggregationRule") {
            None => {
                if let Some(obj) = result.as_object_mut() {
                    obj.remove("aggregationRule");
                }
            }
            Some(want) => {
                let mut selectors = list(&existing["aggregationRule"], "clusterRoleSelectors");
                for sel in list(want, "clusterRoleSelectors") {
                    if !selectors.contains(&sel) {
                        selectors.push(sel);
                    }
                }
                result["aggregationRule"] = json!({"clusterRoleSelectors": selectors});
            }
        }
    } else {
        let mut subjects = list(existing, "subjects");
        for sub in list(expected, "subjects") {
            if !subjects.contains(&sub) {
                subjects.push(sub);
            }
        }
        result["subjects"] = Value::Array(subjects);
    }
    if result == *existing {
        Reconcile::Keep
    } else {
        Reconcile::Update(result)
    }
}

/// Creates the default roles and bindings that are missing, and reconciles those that exist
/// with the defaults of this version (additively, as `reconcile` describes).
pub async fn bootstrap(registry: &Registry) {
    for obj in default_policy() {
        let resource = match obj["kind"].as_str() {
            Some("ClusterRole") => "clusterroles",
            _ => "clusterrolebindings",
        };
        let Some(res) = info(resource) else { continue };
        let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
        // A write that loses a race with another one is tried again on the newer object.
        for _ in 0..3 {
            let outcome = match registry.get(res, None, &name) {
                Err(_) => registry.ensure(res, obj.clone()).await,
                Ok(existing) => match reconcile(&obj, &existing) {
                    Reconcile::Keep => Ok(()),
                    Reconcile::Update(updated) => registry.server_update(res, updated).await,
                    Reconcile::Recreate => match registry.server_delete(res, &name).await {
                        Ok(()) => registry.ensure(res, obj.clone()).await,
                        Err(e) => Err(e),
                    },
                },
            };
            match outcome {
                Err(e) if e.code == 409 => continue,
                Err(e) => tracing::error!(resource, name, error = %e, "reconciling a default RBAC object failed"),
                Ok(()) => {}
            }
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(verb: &str, group: &str, resource: &str, sub: Option<&str>, name: Option<&str>) -> RequestInfo {
        RequestInfo {
            is_resource: true,
            verb: RequestVerb::named(verb),
            group: group.into(),
            resource: resource.into(),
            subresource: sub.map(RequestSubresource::named),
            name: name.map(str::to_string),
            namespace: Some("default".into()),
            ..Default::default()
        }
    }

    fn pr(v: Value) -> PolicyRule {
        serde_json::from_value(v).expect("rule")
    }

    #[test]
    fn rules_match_verbs_groups_resources_subresources_and_names_as_upstream() {
        let pods = pr(rule(&[""], &["pods"], READ));
        assert!(pods.allows(&req("get", "", "pods", None, Some("a"))));
        assert!(pods.allows(&req("list", "", "pods", None, None)));
        assert!(!pods.allows(&req("create", "", "pods", None, None)));
        assert!(!pods.allows(&req("get", "apps", "pods", None, None)), "another group");
        assert!(!pods.allows(&req("get", "", "pods", Some("log"), Some("a"))), "a subresource is named");
        let log = pr(rule(&[""], &["pods/log"], &["get"]));
        assert!(log.allows(&req("get", "", "pods", Some("log"), Some("a"))));
        assert!(!log.allows(&req("get", "", "pods", None, Some("a"))));
        let any_status = pr(rule(&["*"], &["*/status"], &["*"]));
        assert!(any_status.allows(&req("update", "apps", "deployments", Some("status"), Some("d"))));
        assert!(!any_status.allows(&req("update", "apps", "deployments", None, Some("d"))));
        let all = pr(rule(&["*"], &["*"], &["*"]));
        assert!(all.allows(&req("deletecollection", "batch", "jobs", None, None)));
        assert!(all.allows(&req("get", "", "pods", Some("exec"), Some("p"))));
        let named = pr(json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"],
                              "resourceNames": ["settings"]}));
        assert!(named.allows(&req("get", "", "configmaps", None, Some("settings"))));
        assert!(!named.allows(&req("get", "", "configmaps", None, Some("other"))));
        assert!(!named.allows(&req("list", "", "configmaps", None, None)), "names do not cover a list");
        // A resource rule does not cover paths, nor a path rule resources.
        let discovery = pr(urls(&["/apis", "/apis/*", "/version"], &["get"]));
        let path = |verb: &str, p: &str| RequestInfo {
            is_resource: false,
            verb: RequestVerb::named(verb),
            path: p.into(),
            ..Default::default()
        };
        assert!(discovery.allows(&path("get", "/apis/apps/v1")));
        assert!(discovery.allows(&path("get", "/version")));
        assert!(!discovery.allows(&path("get", "/version/x")));
        assert!(!discovery.allows(&path("post", "/apis")));
        assert!(!discovery.allows(&req("get", "", "pods", None, None)));
        assert!(!pods.allows(&path("get", "/api")));
        assert!(pr(urls(&["*"], &["*"])).allows(&path("delete", "/anything")));
    }

    #[test]
    fn a_rule_is_covered_only_by_rules_that_grant_each_of_its_permissions() {
        let owned = vec![
            pr(rule(&[""], &["pods", "pods/log"], READ)),
            pr(rule(&["apps"], &["*"], &["get"])),
            pr(json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["update"], "resourceNames": ["a"]})),
            pr(urls(&["/apis/*"], &["get"])),
        ];
        assert!(uncovered(&owned, &[pr(rule(&[""], &["pods"], &["get", "list"]))]).is_empty());
        assert!(uncovered(&owned, &[pr(rule(&["apps"], &["deployments", "deployments/scale"], &["get"]))]).is_empty());
        assert!(uncovered(&owned, &[pr(urls(&["/apis/apps"], &["get"]))]).is_empty());
        let named =
            pr(json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["update"], "resourceNames": ["a"]}));
        assert!(uncovered(&owned, &[named]).is_empty());
        // Wildcards are granted only by wildcards; names do not cover the whole resource.
        let missing = uncovered(&owned, &[pr(rule(&[""], &["pods"], &["*"]))]);
        assert_eq!(missing.len(), 1);
        assert_eq!(describe(&missing[0]), r#"{APIGroups:[""], Resources:["pods"], Verbs:["*"]}"#);
        assert_eq!(uncovered(&owned, &[pr(rule(&["*"], &["deployments"], &["get"]))]).len(), 1);
        assert_eq!(uncovered(&owned, &[pr(rule(&[""], &["configmaps"], &["update"]))]).len(), 1);
        let missing = uncovered(&owned, &[pr(rule(&[""], &["pods", "secrets"], &["get", "delete"]))]);
        assert_eq!(missing.len(), 3, "{missing:?}");
        assert_eq!(uncovered(&owned, &[pr(urls(&["/metrics"], &["get"]))]).len(), 1);
    }

    #[tokio::test]
    async fn decisions_follow_the_stored_policy_as_it_changes() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = Store::open(dir.path(), k1s_store::StoreOptions::default()).expect("store");
        let rbac = RbacAuthorizer::new(store.clone());
        let put = |key: &str, v: Value| {
            let store = store.clone();
            let key = key.to_string();
            async move {
                let value = bytes::Bytes::from(v.to_string());
                match store.get(&key).expect("get") {
                    Some(kv) => store.update(&key, value, Some(kv.mod_revision)).await.expect("update"),
                    None => store.create(&key, value).await.expect("create"),
                };
            }
        };
        let role = |name: &str, labels: Value, rules: Value| json!({"metadata": {"name": name, "labels": labels}, "rules": rules});
        let roles = "/registry/rbac.authorization.k8s.io/clusterroles/";
        let crbs = "/registry/rbac.authorization.k8s.io/clusterrolebindings/";
        let rbs = "/registry/rbac.authorization.k8s.io/rolebindings/";
        let user = UserInfo::new("alice", &["system:authenticated"]);
        let allowed = |verb: &str, resource: &str, ns: Option<&str>| {
            let mut r = req(verb, "", resource, None, None);
            r.namespace = ns.map(str::to_string);
            rbac.authorize(&Attributes { user: &user, info: &r }) == Decision::Allow
        };
        assert!(!allowed("list", "pods", Some("default")));
        put(&format!("{roles}reader"), role("reader", json!({}), json!([rule(&[""], &["pods"], READ)]))).await;
        let binding = |subject: &str| json!({"roleRef": {"kind": "ClusterRole", "name": "reader"}, "subjects": [{"kind": "User", "name": subject}]});
        put(&format!("{rbs}default/alice"), binding("alice")).await;
        assert!(allowed("list", "pods", Some("default")));
        assert!(!allowed("list", "pods", Some("other")), "a RoleBinding grants in its namespace");
        assert!(!allowed("list", "secrets", Some("default")));
        // A changed role is decoded again.
        put(&format!("{roles}reader"), role("reader", json!({}), json!([rule(&[""], &["pods", "secrets"], READ)])))
            .await;
        assert!(allowed("list", "secrets", Some("default")));
        // Aggregation picks up a labelled role as soon as it is stored.
        put(
            &format!("{roles}agg"),
            json!({"metadata": {"name": "agg"}, "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}}),
        )
        .await;
        put(
            &format!("{crbs}alice"),
            json!({"roleRef": {"kind": "ClusterRole", "name": "agg"},
                                            "subjects": [{"kind": "Group", "name": "system:authenticated"}]}),
        )
        .await;
        assert!(!allowed("list", "nodes", None));
        put(&format!("{roles}nodes"), role("nodes", json!({"x": "y"}), json!([rule(&[""], &["nodes"], READ)]))).await;
        assert!(allowed("list", "nodes", None));
        // A binding that changes subject, or goes, takes the grant with it.
        put(&format!("{rbs}default/alice"), binding("bob")).await;
        assert!(!allowed("list", "pods", Some("default")));
        store.delete(&format!("{crbs}alice"), None).await.expect("delete");
        assert!(!allowed("list", "nodes", None));
    }

    #[test]
    fn subjects_match_users_groups_and_service_accounts() {
        let b: Binding = serde_json::from_value(json!({
            "roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "alice"}, {"kind": "Group", "name": "team"},
                         {"kind": "ServiceAccount", "name": "robot"},
                         {"kind": "ServiceAccount", "name": "ci", "namespace": "tools"}]
        }))
        .expect("binding");
        let user = |name: &str, groups: &[&str]| UserInfo::new(name, groups);
        assert!(b.applies_to(&user("alice", &[]), Some("default")));
        assert!(!b.applies_to(&user("bob", &[]), Some("default")));
        assert!(b.applies_to(&user("bob", &["team"]), Some("default")));
        assert!(b.applies_to(&user("system:serviceaccount:default:robot", &[]), Some("default")));
        assert!(!b.applies_to(&user("system:serviceaccount:other:robot", &[]), Some("default")));
        assert!(!b.applies_to(&user("system:serviceaccount:default:robot", &[]), None), "no namespace to default to");
        assert!(b.applies_to(&user("system:serviceaccount:tools:ci", &[]), None));
    }

    #[test]
    fn the_default_policy_has_upstreams_roles_and_bindings() {
        let policy = default_policy();
        let names: Vec<(&str, &str)> = policy
            .iter()
            .map(|o| (o["kind"].as_str().unwrap_or_default(), o["metadata"]["name"].as_str().unwrap_or_default()))
            .collect();
        for role in ["cluster-admin", "admin", "edit", "view", "system:discovery", "system:basic-user"] {
            assert!(names.contains(&("ClusterRole", role)), "{role}");
        }
        assert!(names.contains(&("ClusterRoleBinding", "cluster-admin")));
        let view = policy.iter().find(|o| o["metadata"]["name"] == "view").expect("view");
        assert_eq!(view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"], "true");
        assert!(view.get("rules").is_none());
        for o in &policy {
            assert_eq!(o["metadata"]["labels"]["kubernetes.io/bootstrapping"], "rbac-defaults");
        }
    }
    fn default_object(name: &str, kind: &str) -> Value {
        default_policy()
            .into_iter()
            .find(|o| o["metadata"]["name"] == name && o["kind"] == kind)
            .expect("a default object")
    }

    #[test]
    fn reconciling_adds_what_the_default_has_and_keeps_what_the_stored_role_adds() {
        let expected = default_object("system:basic-user", "ClusterRole");
        let mut stored = expected.clone();
        stored["metadata"]["resourceVersion"] = json!("12");
        stored["metadata"]["labels"]["kubernetes.io/bootstrapping"] = json!("edited");
        stored["metadata"]["labels"]["team"] = json!("a");
        stored["metadata"]["annotations"] = json!({});
        // The stored role lost the self-subject-access-review permission and gained a rule.
        stored["rules"] = json!([
            {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectrulesreviews"]},
            {"verbs": ["create"], "apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"]},
            {"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]}
        ]);
        let Reconcile::Update(updated) = reconcile(&expected, &stored) else { panic!("an update") };
        let mut want_rules = stored["rules"].as_array().cloned().unwrap_or_default();
        want_rules.push(json!({"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
                               "resources": ["selfsubjectaccessreviews"]}));
        assert_eq!(updated["rules"], Value::Array(want_rules), "the missing permission is appended, the rest kept");
        assert_eq!(updated["metadata"]["labels"]["kubernetes.io/bootstrapping"], "edited", "stored values win");
        assert_eq!(updated["metadata"]["labels"]["team"], "a");
        assert_eq!(updated["metadata"]["annotations"][AUTOUPDATE], "true", "missing annotations are added");
        assert_eq!(updated["metadata"]["resourceVersion"], "12", "the update is made on what was read");
        assert_eq!(reconcile(&expected, &updated), Reconcile::Keep, "reconciling again changes nothing");
        assert_eq!(reconcile(&expected, &expected), Reconcile::Keep);

        let mut protected = stored.clone();
        protected["metadata"]["annotations"][AUTOUPDATE] = json!("false");
        assert_eq!(reconcile(&expected, &protected), Reconcile::Keep, "autoupdate=false leaves the role alone");
    }

    #[test]
    fn reconciling_aggregated_roles_restores_selectors_and_leaves_aggregated_rules_alone() {
        let expected = default_object("view", "ClusterRole");
        let mut stored = expected.clone();
        stored["rules"] = json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]);
        assert_eq!(reconcile(&expected, &stored), Reconcile::Keep, "rules the aggregation controller wrote stay");
        stored["aggregationRule"] = json!({"clusterRoleSelectors": [{"matchLabels": {"extra": "true"}}]});
        let Reconcile::Update(updated) = reconcile(&expected, &stored) else { panic!("an update") };
        assert_eq!(
            updated["aggregationRule"]["clusterRoleSelectors"],
            json!([{"matchLabels": {"extra": "true"}},
                   {"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}}])
        );
        let plain = default_object("system:discovery", "ClusterRole");
        let mut aggregated = plain.clone();
        aggregated["aggregationRule"] = json!({"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]});
        let Reconcile::Update(updated) = reconcile(&plain, &aggregated) else { panic!("an update") };
        assert!(updated.get("aggregationRule").is_none(), "an aggregation the default lacks is removed");
    }

    #[test]
    fn reconciling_bindings_adds_missing_subjects_and_recreates_for_another_role() {
        let expected = default_object("system:public-info-viewer", "ClusterRoleBinding");
        let mut stored = expected.clone();
        stored["subjects"] = json!([{"kind": "User", "apiGroup": GROUP, "name": "alice"},
                                    {"kind": "Group", "apiGroup": GROUP, "name": "system:authenticated"}]);
        let Reconcile::Update(updated) = reconcile(&expected, &stored) else { panic!("an update") };
        assert_eq!(
            updated["subjects"],
            json!([{"kind": "User", "apiGroup": GROUP, "name": "alice"},
                   {"kind": "Group", "apiGroup": GROUP, "name": "system:authenticated"},
                   {"kind": "Group", "apiGroup": GROUP, "name": "system:unauthenticated"}])
        );
        stored["roleRef"]["name"] = json!("view");
        assert_eq!(reconcile(&expected, &stored), Reconcile::Recreate, "roleRef cannot be updated");
        stored["metadata"]["annotations"][AUTOUPDATE] = json!("false");
        assert_eq!(reconcile(&expected, &stored), Reconcile::Keep);
    }
}
