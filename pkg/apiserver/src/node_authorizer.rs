//! The Node authorizer (upstream's `plugin/pkg/auth/authorizer/node`), asked before RBAC for
//! kubelets, `system:node:<name>` in `system:nodes`. A kubelet may:
//!
//! - read (`get`, and `list`/`watch` of one object) the Secrets and ConfigMaps the pods bound
//!   to its node reference (volumes, projected sources, `env`, `envFrom` and `imagePullSecrets`
//!   of every container, init and ephemeral ones too, and the volume plugins' secret
//!   references), `get` their PersistentVolumeClaims (generic ephemeral volumes' included), the
//!   PersistentVolumes bound to those claims and the Secrets those volumes reference, and update
//!   those claims' status;
//! - create tokens (`serviceaccounts/token`) for those pods' ServiceAccounts;
//! - `get` those pods, list and watch pods only with `fieldSelector=spec.nodeName=<its node>`;
//!   create and delete pods and write pods' status and evictions (NodeRestriction admission
//!   narrows these to its own pods and mirror pods);
//! - read only its own Node, create and write Nodes (NodeRestriction: only its own), and use only
//!   its own Lease in `kube-node-lease` and its own CSINode;
//! - everything else `system:node`'s rules ([`node_rules`]) give: Services, events, CSRs,
//!   access reviews, CSIDrivers, RuntimeClasses.
//!
//! Which pod references what comes from watch-fed caches of the Pods, PersistentVolumes and
//! VolumeAttachments in the store ([`Cache`]). A cache takes the store's pending events on every
//! read, and the store queues a commit's events before that revision is current: once the write
//! of a pod has completed, a kubelet that saw the pod and asks for its Secret is decided on a
//! graph that holds the pod. The graph thus moves with every write this server makes, never
//! behind it, and no decision falls back to reading the store. (With several servers on one
//! etcd, another server's write arrives within the watch's latency; a kubelet retries a refused
//! read, as upstream's does against its informer-fed graph.)
//!
//! [`node_rules`]: crate::bootstrap_policy::node_rules

use crate::admission_cache::Cache;
use crate::auth::{node_name, Attributes, Authorizer, Decision};
use crate::rbac::PolicyRule;
use crate::request::{RequestInfo, Verb};
use k1s_store::{KeyValue, Store};
use serde::Deserialize;

/// The node namespace kubelets keep their Leases in.
const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// What one pod references, as the graph's edges towards its node.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct PodRefs {
    pub node: String,
    pub service_account: String,
    pub secrets: Vec<String>,
    pub config_maps: Vec<String>,
    pub claims: Vec<String>,
}

/// What a PersistentVolume references: the claim it is bound to, the Secrets its volume plugin
/// uses.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct VolumeRefs {
    pub claim: Option<(String, String)>,
    pub secrets: Vec<(String, String)>,
}

// The parts of the objects the graph follows, decoded without the rest.

#[derive(Deserialize, Default)]
#[serde(default)]
struct Name {
    name: String,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct NamespacedName {
    name: String,
    namespace: String,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Pod {
    metadata: Name,
    spec: PodSpec,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct PodSpec {
    node_name: String,
    service_account_name: String,
    image_pull_secrets: Vec<Name>,
    containers: Vec<Container>,
    init_containers: Vec<Container>,
    ephemeral_containers: Vec<Container>,
    volumes: Vec<Volume>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Container {
    env: Vec<EnvVar>,
    env_from: Vec<EnvFrom>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct EnvVar {
    value_from: Option<EnvSource>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct EnvSource {
    secret_key_ref: Option<Name>,
    config_map_key_ref: Option<Name>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct EnvFrom {
    secret_ref: Option<Name>,
    config_map_ref: Option<Name>,
}

/// A volume plugin's `secretRef`.
#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct WithSecretRef {
    secret_ref: Option<Name>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Volume {
    name: String,
    secret: Option<SecretVolume>,
    config_map: Option<Name>,
    projected: Option<Projected>,
    persistent_volume_claim: Option<ClaimVolume>,
    ephemeral: Option<serde::de::IgnoredAny>,
    csi: Option<CsiVolume>,
    azure_file: Option<SecretVolume>,
    cephfs: Option<WithSecretRef>,
    cinder: Option<WithSecretRef>,
    flex_volume: Option<WithSecretRef>,
    iscsi: Option<WithSecretRef>,
    rbd: Option<WithSecretRef>,
    scale_io: Option<WithSecretRef>,
    storageos: Option<WithSecretRef>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct SecretVolume {
    secret_name: String,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct ClaimVolume {
    claim_name: String,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct CsiVolume {
    node_publish_secret_ref: Option<Name>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Projected {
    sources: Vec<ProjectedSource>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct ProjectedSource {
    secret: Option<Name>,
    config_map: Option<Name>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct PersistentVolume {
    spec: PersistentVolumeSpec,
}

/// A PersistentVolume's secret reference (it names its namespace).
#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct WithNamespacedSecretRef {
    secret_ref: Option<NamespacedName>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct PersistentVolumeSpec {
    claim_ref: Option<NamespacedName>,
    azure_file: Option<AzureFilePersistentVolume>,
    cephfs: Option<WithNamespacedSecretRef>,
    cinder: Option<WithNamespacedSecretRef>,
    flex_volume: Option<WithNamespacedSecretRef>,
    iscsi: Option<WithNamespacedSecretRef>,
    rbd: Option<WithNamespacedSecretRef>,
    scale_io: Option<WithNamespacedSecretRef>,
    storageos: Option<WithNamespacedSecretRef>,
    csi: Option<CsiPersistentVolume>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct AzureFilePersistentVolume {
    secret_name: String,
    secret_namespace: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct CsiPersistentVolume {
    controller_publish_secret_ref: Option<NamespacedName>,
    controller_expand_secret_ref: Option<NamespacedName>,
    node_publish_secret_ref: Option<NamespacedName>,
    node_stage_secret_ref: Option<NamespacedName>,
    node_expand_secret_ref: Option<NamespacedName>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct VolumeAttachment {
    spec: VolumeAttachmentSpec,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct VolumeAttachmentSpec {
    node_name: String,
}

fn push(list: &mut Vec<String>, name: &str) {
    if !name.is_empty() && !list.iter().any(|n| n == name) {
        list.push(name.to_string());
    }
}

/// The references of a stored pod (none for a pod without a node: it gives no kubelet
/// anything); `None` when it cannot be decoded.
pub(crate) fn pod_refs(pod: &[u8]) -> Option<PodRefs> {
    let pod: Pod = serde_json::from_slice(pod).ok()?;
    if pod.spec.node_name.is_empty() {
        return Some(PodRefs::default());
    }
    Some(refs_of(pod))
}

/// The references of a pod object, whether bound or not.
pub(crate) fn pod_object_refs(pod: &serde_json::Value) -> Option<PodRefs> {
    Pod::deserialize(pod).ok().map(refs_of)
}

fn refs_of(pod: Pod) -> PodRefs {
    let spec = pod.spec;
    let mut r = PodRefs { node: spec.node_name, service_account: spec.service_account_name, ..Default::default() };
    for s in &spec.image_pull_secrets {
        push(&mut r.secrets, &s.name);
    }
    for c in spec.containers.iter().chain(&spec.init_containers).chain(&spec.ephemeral_containers) {
        for e in c.env.iter().filter_map(|e| e.value_from.as_ref()) {
            if let Some(s) = &e.secret_key_ref {
                push(&mut r.secrets, &s.name);
            }
            if let Some(m) = &e.config_map_key_ref {
                push(&mut r.config_maps, &m.name);
            }
        }
        for e in &c.env_from {
            if let Some(s) = &e.secret_ref {
                push(&mut r.secrets, &s.name);
            }
            if let Some(m) = &e.config_map_ref {
                push(&mut r.config_maps, &m.name);
            }
        }
    }
    for v in &spec.volumes {
        if let Some(s) = &v.secret {
            push(&mut r.secrets, &s.secret_name);
        }
        if let Some(s) = &v.azure_file {
            push(&mut r.secrets, &s.secret_name);
        }
        let plugin_refs = [&v.cephfs, &v.cinder, &v.flex_volume, &v.iscsi, &v.rbd, &v.scale_io, &v.storageos];
        for s in plugin_refs.into_iter().flatten().filter_map(|p| p.secret_ref.as_ref()) {
            push(&mut r.secrets, &s.name);
        }
        if let Some(s) = v.csi.as_ref().and_then(|c| c.node_publish_secret_ref.as_ref()) {
            push(&mut r.secrets, &s.name);
        }
        if let Some(m) = &v.config_map {
            push(&mut r.config_maps, &m.name);
        }
        for src in v.projected.iter().flat_map(|p| &p.sources) {
            if let Some(s) = &src.secret {
                push(&mut r.secrets, &s.name);
            }
            if let Some(m) = &src.config_map {
                push(&mut r.config_maps, &m.name);
            }
        }
        if let Some(c) = &v.persistent_volume_claim {
            push(&mut r.claims, &c.claim_name);
        }
        // A generic ephemeral volume's claim is named after the pod and the volume.
        if v.ephemeral.is_some() {
            push(&mut r.claims, &format!("{}-{}", pod.metadata.name, v.name));
        }
    }
    r
}

/// What a PersistentVolume references.
pub(crate) fn volume_refs(pv: &[u8]) -> Option<VolumeRefs> {
    let spec = serde_json::from_slice::<PersistentVolume>(pv).ok()?.spec;
    let mut r = VolumeRefs {
        claim: spec.claim_ref.filter(|c| !c.name.is_empty()).map(|c| (c.namespace, c.name)),
        ..Default::default()
    };
    let mut add = |ns: &str, name: &str| {
        let s = (ns.to_string(), name.to_string());
        if !name.is_empty() && !r.secrets.contains(&s) {
            r.secrets.push(s);
        }
    };
    // Secret references whose namespace is left out are in the claim's namespace (upstream's
    // persistentvolume util).
    let claim_ns = r.claim.as_ref().map(|(ns, _)| ns.clone()).unwrap_or_default();
    let ns_or_claims = |ns: &str| if ns.is_empty() { claim_ns.clone() } else { ns.to_string() };
    if let Some(a) = &spec.azure_file {
        add(&ns_or_claims(a.secret_namespace.as_deref().unwrap_or("")), &a.secret_name);
    }
    let plugin_refs =
        [&spec.cephfs, &spec.cinder, &spec.flex_volume, &spec.iscsi, &spec.rbd, &spec.scale_io, &spec.storageos];
    for s in plugin_refs.into_iter().flatten().filter_map(|p| p.secret_ref.as_ref()) {
        add(&ns_or_claims(&s.namespace), &s.name);
    }
    if let Some(c) = &spec.csi {
        let refs = [
            &c.controller_publish_secret_ref,
            &c.controller_expand_secret_ref,
            &c.node_publish_secret_ref,
            &c.node_stage_secret_ref,
            &c.node_expand_secret_ref,
        ];
        for s in refs.into_iter().flatten() {
            add(&s.namespace, &s.name);
        }
    }
    Some(r)
}

/// The node a VolumeAttachment attaches to.
fn attachment_node(va: &[u8]) -> Option<String> {
    serde_json::from_slice::<VolumeAttachment>(va).ok().map(|v| v.spec.node_name)
}

/// Which objects each node's pods reach, from the store.
pub(crate) struct Graph {
    pods: Cache<PodRefs>,
    volumes: Cache<VolumeRefs>,
    attachments: Cache<String>,
}

/// An object the graph is asked about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Secret,
    ConfigMap,
    Claim,
    Volume,
    Attachment,
    ServiceAccount,
    Pod,
}

impl Kind {
    /// Upstream's vertex type names, for the reasons.
    fn name(self) -> &'static str {
        match self {
            Kind::Secret => "secret",
            Kind::ConfigMap => "configmap",
            Kind::Claim => "pvc",
            Kind::Volume => "pv",
            Kind::Attachment => "volumeattachment",
            Kind::ServiceAccount => "serviceAccount",
            Kind::Pod => "pod",
        }
    }
}

fn prefix(group: &str, resource: &str) -> String {
    k1s_api::resources::find(group, "v1", resource)
        .map(|r| r.storage_prefix())
        .unwrap_or_else(|| format!("/registry/{resource}/"))
}

impl Graph {
    pub(crate) fn new(store: Store) -> Graph {
        let parse_pod = |kv: &KeyValue| pod_refs(&kv.value);
        let parse_volume = |kv: &KeyValue| volume_refs(&kv.value);
        let parse_attachment = |kv: &KeyValue| attachment_node(&kv.value);
        Graph {
            pods: Cache::new(store.clone(), &prefix("", "pods"), parse_pod),
            volumes: Cache::new(store.clone(), &prefix("", "persistentvolumes"), parse_volume),
            attachments: Cache::new(store, &prefix("storage.k8s.io", "volumeattachments"), parse_attachment),
        }
    }

    /// Whether a pod in `namespace` bound to `node` satisfies `f`.
    fn node_pod(&self, node: &str, namespace: &str, mut f: impl FnMut(&PodRefs) -> bool) -> bool {
        self.pods.any(namespace, |p| p.node == node && f(p)).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "Node authorizer: reading the pods failed");
            false
        })
    }

    fn claim_on(&self, node: &str, namespace: &str, claim: &str) -> bool {
        self.node_pod(node, namespace, |p| p.claims.iter().any(|c| c == claim))
    }

    /// Whether the object is related to `node` (upstream's path from it to the node).
    fn related(&self, node: &str, kind: Kind, namespace: &str, name: &str) -> bool {
        let has = |list: &[String]| list.iter().any(|n| n == name);
        match kind {
            Kind::Secret => {
                self.node_pod(node, namespace, |p| has(&p.secrets))
                    || self
                        .volumes
                        .any("", |v| {
                            v.secrets.iter().any(|(ns, n)| ns == namespace && n == name)
                                && v.claim.as_ref().is_some_and(|(ns, c)| self.claim_on(node, ns, c))
                        })
                        .unwrap_or(false)
            }
            Kind::ConfigMap => self.node_pod(node, namespace, |p| has(&p.config_maps)),
            Kind::Claim => self.node_pod(node, namespace, |p| has(&p.claims)),
            Kind::ServiceAccount => self.node_pod(node, namespace, |p| p.service_account == name),
            Kind::Pod => self.pods.get(namespace, name).ok().flatten().is_some_and(|p| p.node == node),
            Kind::Volume => {
                let claim = self.volumes.get("", name).ok().flatten().and_then(|v| v.claim.clone());
                claim.is_some_and(|(ns, c)| self.claim_on(node, &ns, &c))
            }
            Kind::Attachment => self.attachments.get("", name).ok().flatten().is_some_and(|n| *n == node),
        }
    }
}

/// The Node authorizer: no opinion about anyone but kubelets.
pub struct NodeAuthorizer {
    graph: Graph,
    rules: Vec<PolicyRule>,
}

impl NodeAuthorizer {
    pub fn new(store: Store) -> NodeAuthorizer {
        let rules =
            crate::bootstrap_policy::node_rules().into_iter().filter_map(|r| serde_json::from_value(r).ok()).collect();
        NodeAuthorizer { graph: Graph::new(store), rules }
    }
}

fn no(reason: impl Into<String>) -> Decision {
    Decision::NoOpinion(reason.into())
}

impl Authorizer for NodeAuthorizer {
    fn authorize(&self, attrs: &Attributes<'_>) -> Decision {
        let Some(node) = node_name(attrs.user) else { return Decision::no_opinion() };
        if node.is_empty() {
            return no(format!("unknown node for user {:?}", attrs.user.name));
        }
        let req = attrs.info;
        if req.is_resource {
            let decided = match (req.group.as_str(), req.resource.as_str()) {
                ("", "secrets") => Some(self.read_namespaced(node, Kind::Secret, req)),
                ("", "configmaps") => Some(self.read_namespaced(node, Kind::ConfigMap, req)),
                ("", "persistentvolumeclaims") if req.subresource_name() == Some("status") => {
                    Some(self.status_update(node, Kind::Claim, req))
                }
                ("", "persistentvolumeclaims") => Some(self.get(node, Kind::Claim, req)),
                ("", "persistentvolumes") => Some(self.get(node, Kind::Volume, req)),
                ("storage.k8s.io", "volumeattachments") => Some(self.get(node, Kind::Attachment, req)),
                ("", "serviceaccounts") => Some(self.create_token(node, req)),
                ("coordination.k8s.io", "leases") => Some(own_lease(node, req)),
                ("storage.k8s.io", "csinodes") => Some(own_csi_node(node, req)),
                ("", "nodes") => own_node(node, req),
                ("", "pods") => self.pod(node, req),
                _ => None,
            };
            if let Some(d) = decided {
                return d;
            }
        }
        if self.rules.iter().any(|r| r.allows(req)) {
            Decision::Allow
        } else {
            Decision::no_opinion()
        }
    }
}

impl NodeAuthorizer {
    /// The object the request names, if it is related to `node`.
    fn related(&self, node: &str, kind: Kind, req: &RequestInfo) -> Decision {
        let Some(name) = req.selected_name() else { return no("No Object name found") };
        let namespace = req.namespace.as_deref().unwrap_or("");
        if self.graph.related(node, kind, namespace, name) {
            Decision::Allow
        } else {
            tracing::debug!(node, kind = kind.name(), namespace, name, "Node authorizer: no relationship");
            no(format!("no relationship found between node '{node}' and this object"))
        }
    }

    /// `get`, `list` and `watch` of one related namespaced object.
    fn read_namespaced(&self, node: &str, kind: Kind, req: &RequestInfo) -> Decision {
        if !matches!(req.verb.api(), Some(Verb::Get | Verb::List | Verb::Watch)) {
            return no("can only read resources of this type");
        }
        if req.subresource.is_some() {
            return no("cannot read subresource");
        }
        if req.namespace.as_deref().unwrap_or("").is_empty() {
            return no("can only read namespaced object of this type");
        }
        self.related(node, kind, req)
    }

    /// `get` of one related object.
    fn get(&self, node: &str, kind: Kind, req: &RequestInfo) -> Decision {
        if !req.verb.is(Verb::Get) {
            return no("can only get individual resources of this type");
        }
        if req.subresource.is_some() {
            return no("cannot get subresource");
        }
        self.related(node, kind, req)
    }

    /// `update` and `patch` of a related object's status.
    fn status_update(&self, node: &str, kind: Kind, req: &RequestInfo) -> Decision {
        if !matches!(req.verb.api(), Some(Verb::Update | Verb::Patch)) {
            return no("can only get/update/patch this type");
        }
        self.related(node, kind, req)
    }

    /// `create` of `serviceaccounts/token` for a ServiceAccount a pod on the node runs as.
    fn create_token(&self, node: &str, req: &RequestInfo) -> Decision {
        if !req.verb.is(Verb::Create) || req.name.is_none() {
            return no("can only create tokens for individual service accounts");
        }
        if req.subresource_name() != Some("token") {
            return no("can only create token subresource of serviceaccount");
        }
        self.related(node, Kind::ServiceAccount, req)
    }

    /// Pods: `get` of those on the node, list and watch of those `spec.nodeName` selects,
    /// create and delete (of mirror pods and its own: NodeRestriction), status and evictions.
    /// `None` leaves other requests to the node's rules.
    fn pod(&self, node: &str, req: &RequestInfo) -> Option<Decision> {
        let verb = req.verb.api();
        Some(match req.subresource_name() {
            None => match verb {
                Some(Verb::Get) => self.get(node, Kind::Pod, req),
                Some(Verb::List | Verb::Watch) => {
                    if req.field_requirement("spec.nodeName") == Some(node) {
                        Decision::Allow
                    } else if req.selected_name().is_some() {
                        self.related(node, Kind::Pod, req)
                    } else {
                        no("can only list/watch pods with spec.nodeName field selector")
                    }
                }
                Some(Verb::Create | Verb::Delete) => Decision::Allow,
                _ => Decision::no_opinion(),
            },
            Some("status") if matches!(verb, Some(Verb::Update | Verb::Patch)) => Decision::Allow,
            Some("eviction") if verb == Some(Verb::Create) => Decision::Allow,
            _ => Decision::no_opinion(),
        })
    }
}

/// Nodes: only its own is readable; creates and writes are NodeRestriction's to narrow.
fn own_node(node: &str, req: &RequestInfo) -> Option<Decision> {
    let verb = req.verb.api();
    Some(match req.subresource_name() {
        None => match verb {
            Some(Verb::Create | Verb::Update | Verb::Patch) => Decision::Allow,
            Some(Verb::Get | Verb::List | Verb::Watch) => match req.selected_name() {
                Some(n) if n == node => Decision::Allow,
                None => no(format!("node '{node}' cannot read all nodes, only its own Node object")),
                Some(n) => no(format!("node '{node}' cannot read '{n}', only its own Node object")),
            },
            _ => Decision::no_opinion(),
        },
        Some("status") if matches!(verb, Some(Verb::Update | Verb::Patch)) => Decision::Allow,
        _ => Decision::no_opinion(),
    })
}

/// Leases: only its own, in `kube-node-lease` (a create's name is NodeRestriction's to check).
fn own_lease(node: &str, req: &RequestInfo) -> Decision {
    if !matches!(req.verb.api(), Some(Verb::Get | Verb::Create | Verb::Update | Verb::Patch | Verb::Delete)) {
        return no("can only get, create, update, patch, or delete a node lease");
    }
    if req.namespace.as_deref() != Some(NODE_LEASE_NAMESPACE) {
        return no(format!("can only access leases in the {NODE_LEASE_NAMESPACE:?} system namespace"));
    }
    if !req.verb.is(Verb::Create) && req.name.as_deref() != Some(node) {
        return no("can only access node lease with the same name as the requesting node");
    }
    Decision::Allow
}

/// CSINodes: only its own (a create's name is NodeRestriction's to check).
fn own_csi_node(node: &str, req: &RequestInfo) -> Decision {
    if !matches!(req.verb.api(), Some(Verb::Get | Verb::Create | Verb::Update | Verb::Patch | Verb::Delete)) {
        return no("can only get, create, update, patch, or delete a CSINode");
    }
    if req.subresource.is_some() {
        return no("cannot authorize CSINode subresources");
    }
    if !req.verb.is(Verb::Create) && req.name.as_deref() != Some(node) {
        return no("can only access CSINode with the same name as the requesting node");
    }
    Decision::Allow
}

#[cfg(test)]
mod tests;
