//! The scheduler's in-memory picture of the cluster, fed by watch events: nodes with the pods on
//! them, pods the scheduler assumed onto a node before the API confirmed the binding (upstream's
//! assume cache), pods nominated to a node by preemption, and the priority classes, disruption
//! budgets, namespaces and images the plugins consult. Every change that could make a waiting
//! pod schedulable is reported as a [`ClusterEvent`].

use crate::matching::{labels_of, Labels};
use crate::node_info::{NodeInfo, PodInfo};
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::StorageClass;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// A change in the cluster that may let a waiting pod fit (upstream's cluster events).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterEvent {
    NodeAdd,
    NodeUpdate(NodeChanges),
    AssignedPodAdd,
    /// Labels or requests of a bound pod changed.
    AssignedPodUpdate,
    /// A bound pod went away (deleted, or finished and no longer holds resources).
    AssignedPodDelete,
    /// A PersistentVolumeClaim, PersistentVolume or StorageClass was added or updated.
    StorageChange,
}

/// What changed on an updated node, as far as scheduling cares.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeChanges {
    pub allocatable: bool,
    pub labels: bool,
    /// Taints, including the Ready condition's, or `spec.unschedulable`.
    pub taints: bool,
}

/// How widely an image is present: its size and on how many nodes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImageState {
    pub size: i64,
    pub num_nodes: usize,
}

#[derive(Debug)]
struct CachedPod {
    info: Arc<PodInfo>,
    node: String,
    assumed: bool,
    /// The API accepted the binding; the watch has not shown it yet.
    binding_finished: bool,
}

/// See the module documentation.
#[derive(Debug, Default)]
pub struct Cache {
    nodes: BTreeMap<String, NodeInfo>,
    pods: HashMap<String, CachedPod>,
    images: HashMap<String, ImageState>,
    namespaces: HashMap<String, Labels>,
    priority_classes: HashMap<String, PriorityClass>,
    pdbs: BTreeMap<(String, String), PodDisruptionBudget>,
    /// uid ▶ (node, pod): pods waiting for a node their preemption freed.
    nominated: HashMap<String, (String, Arc<PodInfo>)>,
    claims: HashMap<(String, String), Arc<PersistentVolumeClaim>>,
    volumes: BTreeMap<String, Arc<PersistentVolume>>,
    classes: HashMap<String, Arc<StorageClass>>,
    /// Claim ▶ node: claims an assumed pod has chosen to provision on that node, until the claim
    /// shows it (upstream's assumed claims).
    assumed_claims: HashMap<(String, String), String>,
    /// Volumes an assumed pod has chosen for one of its claims, until that binding is done.
    assumed_volumes: HashSet<String>,
}

fn key_of(namespace: Option<&String>, name: Option<&String>) -> (String, String) {
    (namespace.cloned().unwrap_or_default(), name.cloned().unwrap_or_default())
}

/// A storage object's add, or an update that changed it, is an event (upstream registers
/// VolumeBinding for their adds and updates).
fn changed<T: PartialEq>(old: Option<&T>, new: &T) -> Option<ClusterEvent> {
    (old != Some(new)).then_some(ClusterEvent::StorageChange)
}

impl Cache {
    // ---- priorities ------------------------------------------------------------------------

    /// A pod's priority: `spec.priority`, else its class's value, else the global default
    /// class's, else 0 (what the Priority admission plugin would have resolved).
    pub fn priority_of(&self, pod: &Pod) -> i32 {
        let spec = pod.spec.as_ref();
        if let Some(p) = spec.and_then(|s| s.priority) {
            return p;
        }
        if let Some(class) = spec.and_then(|s| s.priority_class_name.as_deref()).filter(|c| !c.is_empty()) {
            return self.priority_classes.get(class).map(|pc| pc.value).unwrap_or(0);
        }
        self.priority_classes.values().find(|pc| pc.global_default == Some(true)).map(|pc| pc.value).unwrap_or(0)
    }

    /// Pre-digests a pod, resolving its priority (and preemption policy) from the classes when the
    /// API left them unset.
    pub fn pod_info(&self, mut pod: Pod) -> Arc<PodInfo> {
        let priority = self.priority_of(&pod);
        if let Some(spec) = pod.spec.as_mut() {
            if spec.preemption_policy.is_none() {
                let class = spec.priority_class_name.as_deref().and_then(|c| self.priority_classes.get(c));
                spec.preemption_policy = class.and_then(|pc| pc.preemption_policy.clone());
            }
        }
        Arc::new(PodInfo::new(pod, priority))
    }

    /// Records a priority class; returns whether pods relying on class lookups may need their
    /// priority recomputed.
    pub fn set_priority_class(&mut self, pc: PriorityClass) -> bool {
        let name = pc.metadata.name.clone().unwrap_or_default();
        let changed = self
            .priority_classes
            .get(&name)
            .is_none_or(|old| old.value != pc.value || old.global_default != pc.global_default);
        self.priority_classes.insert(name, pc);
        if changed {
            self.refresh_priorities();
        }
        changed
    }

    pub fn remove_priority_class(&mut self, name: &str) -> bool {
        let removed = self.priority_classes.remove(name).is_some();
        if removed {
            self.refresh_priorities();
        }
        removed
    }

    pub fn retain_priority_classes(&mut self, seen: &HashSet<String>) {
        let before = self.priority_classes.len();
        self.priority_classes.retain(|k, _| seen.contains(k));
        if before != self.priority_classes.len() {
            self.refresh_priorities();
        }
    }

    /// Recomputes the priority of cached pods whose `spec.priority` is unset.
    fn refresh_priorities(&mut self) {
        let stale: Vec<String> = self
            .pods
            .iter()
            .filter(|(_, c)| c.info.spec().priority.is_none() && self.priority_of(&c.info.pod) != c.info.priority)
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in stale {
            let Some(c) = self.pods.get(&uid) else { continue };
            let (node, assumed) = (c.node.clone(), c.assumed);
            let info = self.pod_info(c.info.pod.clone());
            self.place(info, &node, assumed);
        }
    }

    // ---- nodes -----------------------------------------------------------------------------

    /// Adds or updates a node; returns the event it amounts to, if any.
    pub fn set_node(&mut self, node: Node) -> Option<ClusterEvent> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let node = Arc::new(node);
        let info = self.nodes.entry(name.clone()).or_insert_with(|| NodeInfo::new(&name));
        let old = info.node.clone();
        let (old_alloc, old_taints, old_unsched) =
            (info.allocatable.clone(), info.taints.clone(), info.unschedulable());
        info.set_node(node.clone());
        let images_changed =
            old.as_ref().and_then(|o| o.status.as_ref()).map(|s| &s.images) != node.status.as_ref().map(|s| &s.images);
        let event = match &old {
            None => Some(ClusterEvent::NodeAdd),
            Some(old) => {
                let changes = NodeChanges {
                    allocatable: old_alloc != info.allocatable,
                    labels: old.metadata.labels != node.metadata.labels,
                    taints: old_taints != info.taints || old_unsched != info.unschedulable(),
                };
                (changes != NodeChanges::default()).then_some(ClusterEvent::NodeUpdate(changes))
            }
        };
        if images_changed {
            self.rebuild_images();
        }
        event
    }

    pub fn remove_node(&mut self, name: &str) {
        let Some(info) = self.nodes.get_mut(name) else { return };
        info.node = None;
        if info.pods.is_empty() {
            self.nodes.remove(name);
        }
        self.rebuild_images();
    }

    pub fn retain_nodes(&mut self, seen: &HashSet<String>) {
        let gone: Vec<String> = self
            .nodes
            .iter()
            .filter(|(name, ni)| ni.node.is_some() && !seen.contains(*name))
            .map(|(name, _)| name.clone())
            .collect();
        for name in gone {
            self.remove_node(&name);
        }
    }

    fn rebuild_images(&mut self) {
        let mut images: HashMap<String, ImageState> = HashMap::new();
        for node in self.nodes.values().filter_map(|n| n.node.as_ref()) {
            for img in node.status.as_ref().and_then(|s| s.images.as_ref()).into_iter().flatten() {
                for name in img.names.iter().flatten() {
                    let e = images.entry(name.clone()).or_default();
                    e.size = img.size_bytes.unwrap_or(0);
                    e.num_nodes += 1;
                }
            }
        }
        self.images = images;
    }

    /// Nodes the scheduler can place pods on (those whose Node object it has seen), by name.
    pub fn nodes(&self) -> impl Iterator<Item = &NodeInfo> {
        self.nodes.values().filter(|n| n.node.is_some())
    }

    pub fn node(&self, name: &str) -> Option<&NodeInfo> {
        self.nodes.get(name).filter(|n| n.node.is_some())
    }

    pub fn num_nodes(&self) -> usize {
        self.nodes().count()
    }

    pub fn image(&self, name: &str) -> Option<&ImageState> {
        self.images.get(name)
    }

    // ---- pods ------------------------------------------------------------------------------

    fn place(&mut self, info: Arc<PodInfo>, node: &str, assumed: bool) {
        if let Some(old) = self.pods.remove(&info.uid) {
            if let Some(ni) = self.nodes.get_mut(&old.node) {
                ni.remove_pod(&info.uid);
            }
        }
        self.nodes.entry(node.to_string()).or_insert_with(|| NodeInfo::new(node)).add_pod(info.clone());
        self.pods
            .insert(info.uid.clone(), CachedPod { info, node: node.to_string(), assumed, binding_finished: false });
    }

    /// Records a pod the API shows bound to a node (confirming an assumption, if any).
    pub fn set_assigned_pod(&mut self, info: Arc<PodInfo>) -> Option<ClusterEvent> {
        let node = info.node_name()?.to_string();
        let event = match self.pods.get(&info.uid) {
            None => Some(ClusterEvent::AssignedPodAdd),
            Some(old) if old.assumed => Some(ClusterEvent::AssignedPodAdd),
            Some(old) => (old.info.labels() != info.labels() || old.info.requests != info.requests)
                .then_some(ClusterEvent::AssignedPodUpdate),
        };
        self.nominated.remove(&info.uid);
        self.place(info, &node, false);
        event
    }

    /// Forgets a pod (deleted, finished, or its assumption undone).
    pub fn remove_pod(&mut self, uid: &str) -> Option<ClusterEvent> {
        self.nominated.remove(uid);
        let old = self.pods.remove(uid)?;
        let mut now_empty = false;
        if let Some(ni) = self.nodes.get_mut(&old.node) {
            ni.remove_pod(uid);
            now_empty = ni.node.is_none() && ni.pods.is_empty();
        }
        if now_empty {
            self.nodes.remove(&old.node);
        }
        Some(ClusterEvent::AssignedPodDelete)
    }

    /// Drops pods not in `seen` (after a re-list), except the ones still being bound. (A pod
    /// whose binding the API accepted but a re-list no longer shows was deleted meanwhile.)
    pub fn retain_pods(&mut self, seen: &HashSet<String>) -> bool {
        let gone: Vec<String> = self
            .pods
            .iter()
            .filter(|(uid, c)| (!c.assumed || c.binding_finished) && !seen.contains(*uid))
            .map(|(uid, _)| uid.clone())
            .collect();
        self.nominated.retain(|uid, _| seen.contains(uid));
        let any = !gone.is_empty();
        for uid in gone {
            self.remove_pod(&uid);
        }
        any
    }

    /// Places a pod on `node` before the binding is confirmed.
    pub fn assume(&mut self, info: Arc<PodInfo>, node: &str) {
        self.nominated.remove(&info.uid);
        self.place(info, node, true);
    }

    /// The API accepted the binding of an assumed pod.
    pub fn finish_binding(&mut self, uid: &str) {
        if let Some(c) = self.pods.get_mut(uid).filter(|c| c.assumed) {
            c.binding_finished = true;
        }
    }

    /// Undoes [`Cache::assume`] after a failed binding.
    pub fn forget(&mut self, uid: &str) {
        if self.pods.get(uid).is_some_and(|c| c.assumed) {
            self.remove_pod(uid);
        }
    }

    pub fn is_assumed(&self, uid: &str) -> bool {
        self.pods.get(uid).is_some_and(|c| c.assumed)
    }

    // ---- nominations -----------------------------------------------------------------------

    /// Tracks (or stops tracking) a waiting pod's `status.nominatedNodeName`.
    pub fn set_nominated(&mut self, info: &Arc<PodInfo>, node: Option<&str>) {
        match node {
            Some(n) => {
                self.nominated.insert(info.uid.clone(), (n.to_string(), info.clone()));
            }
            None => {
                self.nominated.remove(&info.uid);
            }
        }
    }

    /// Pods nominated to `node`.
    pub fn nominated_on<'a>(&'a self, node: &'a str) -> impl Iterator<Item = &'a Arc<PodInfo>> + 'a {
        self.nominated.values().filter(move |(n, _)| n == node).map(|(_, p)| p)
    }

    // ---- storage ---------------------------------------------------------------------------

    pub fn set_claim(&mut self, c: PersistentVolumeClaim) -> Option<ClusterEvent> {
        let key = key_of(c.metadata.namespace.as_ref(), c.metadata.name.as_ref());
        let c = Arc::new(c);
        let old = self.claims.insert(key, c.clone());
        changed(old.as_deref(), &c)
    }

    pub fn remove_claim(&mut self, namespace: &str, name: &str) {
        self.claims.remove(&(namespace.to_string(), name.to_string()));
    }

    pub fn retain_claims(&mut self, seen: &HashSet<(String, String)>) {
        self.claims.retain(|k, _| seen.contains(k));
    }

    pub fn claim(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>> {
        self.claims.get(&(namespace.to_string(), name.to_string())).cloned()
    }

    pub fn set_volume(&mut self, v: PersistentVolume) -> Option<ClusterEvent> {
        let name = v.metadata.name.clone().unwrap_or_default();
        let v = Arc::new(v);
        let old = self.volumes.insert(name, v.clone());
        changed(old.as_deref(), &v)
    }

    pub fn remove_volume(&mut self, name: &str) {
        self.volumes.remove(name);
    }

    pub fn retain_volumes(&mut self, seen: &HashSet<String>) {
        self.volumes.retain(|k, _| seen.contains(k));
    }

    pub fn volume(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        self.volumes.get(name).cloned()
    }

    pub fn volumes_of_class(&self, class: &str) -> Vec<Arc<PersistentVolume>> {
        self.volumes.values().filter(|v| k1s_api::storage::volume_class(v) == class).cloned().collect()
    }

    pub fn set_class(&mut self, c: StorageClass) -> Option<ClusterEvent> {
        let name = c.metadata.name.clone().unwrap_or_default();
        let c = Arc::new(c);
        let old = self.classes.insert(name, c.clone());
        changed(old.as_deref(), &c)
    }

    pub fn remove_class(&mut self, name: &str) {
        self.classes.remove(name);
    }

    pub fn retain_classes(&mut self, seen: &HashSet<String>) {
        self.classes.retain(|k, _| seen.contains(k));
    }

    pub fn class(&self, name: &str) -> Option<Arc<StorageClass>> {
        (!name.is_empty()).then(|| self.classes.get(name).cloned()).flatten()
    }

    /// The node an assumed pod chose to provision `claim` on.
    pub fn assumed_node_of(&self, claim: &PersistentVolumeClaim) -> Option<String> {
        let key = key_of(claim.metadata.namespace.as_ref(), claim.metadata.name.as_ref());
        self.assumed_claims.get(&key).cloned()
    }

    pub fn volume_assumed(&self, name: &str) -> bool {
        self.assumed_volumes.contains(name)
    }

    /// Records the volume decisions of a pod assumed onto `node`.
    pub fn assume_volumes(&mut self, plan: &crate::volumes::VolumePlan, node: &str) {
        for (v, _) in &plan.bindings {
            self.assumed_volumes.insert(v.metadata.name.clone().unwrap_or_default());
        }
        for c in &plan.provisions {
            let key = key_of(c.metadata.namespace.as_ref(), c.metadata.name.as_ref());
            self.assumed_claims.insert(key, node.to_string());
        }
    }

    /// Drops them once the binding is over, done or failed (the claims and volumes themselves
    /// then tell).
    pub fn forget_volumes(&mut self, plan: &crate::volumes::VolumePlan) {
        for (v, _) in &plan.bindings {
            self.assumed_volumes.remove(v.metadata.name.as_deref().unwrap_or_default());
        }
        for c in &plan.provisions {
            self.assumed_claims.remove(&key_of(c.metadata.namespace.as_ref(), c.metadata.name.as_ref()));
        }
    }

    // ---- budgets and namespaces ------------------------------------------------------------

    pub fn set_pdb(&mut self, pdb: PodDisruptionBudget) {
        let key = key_of(pdb.metadata.namespace.as_ref(), pdb.metadata.name.as_ref());
        self.pdbs.insert(key, pdb);
    }

    pub fn remove_pdb(&mut self, namespace: &str, name: &str) {
        self.pdbs.remove(&(namespace.to_string(), name.to_string()));
    }

    pub fn retain_pdbs(&mut self, seen: &HashSet<(String, String)>) {
        self.pdbs.retain(|k, _| seen.contains(k));
    }

    pub fn pdbs(&self) -> impl Iterator<Item = &PodDisruptionBudget> {
        self.pdbs.values()
    }

    pub fn set_namespace(&mut self, name: &str, labels: Labels) {
        self.namespaces.insert(name.to_string(), labels);
    }

    pub fn remove_namespace(&mut self, name: &str) {
        self.namespaces.remove(name);
    }

    pub fn retain_namespaces(&mut self, seen: &HashSet<String>) {
        self.namespaces.retain(|k, _| seen.contains(k));
    }

    pub fn namespace_labels(&self, name: &str) -> &Labels {
        labels_of(self.namespaces.get(name))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testing::{node, pod};

    #[test]
    fn assumed_pod_counts_on_its_node_until_forgotten() {
        let mut c = Cache::default();
        assert_eq!(c.set_node(node("n1", "4", "8Gi").build()), Some(ClusterEvent::NodeAdd));
        let p = c.pod_info(pod("p1").cpu("1").build());
        c.assume(p.clone(), "n1");
        assert!(c.is_assumed(&p.uid));
        assert_eq!(c.node("n1").map(|n| n.requested.milli_cpu), Some(1000));
        c.forget(&p.uid);
        assert_eq!(c.node("n1").map(|n| (n.requested.milli_cpu, n.pods.len())), Some((0, 0)));
    }

    #[test]
    fn relist_keeps_pods_being_bound_but_drops_bound_ones_it_no_longer_shows() {
        let mut c = Cache::default();
        c.set_node(node("n1", "4", "8Gi").build());
        let binding = c.pod_info(pod("binding").cpu("1").build());
        let bound = c.pod_info(pod("bound").cpu("1").build());
        c.assume(binding.clone(), "n1");
        c.assume(bound.clone(), "n1");
        c.finish_binding(&bound.uid);
        c.retain_pods(&HashSet::new());
        assert!(c.is_assumed(&binding.uid));
        assert!(!c.is_assumed(&bound.uid));
        assert_eq!(c.node("n1").map(|n| n.pods.len()), Some(1));
    }

    #[test]
    fn binding_confirmation_replaces_the_assumption() {
        let mut c = Cache::default();
        c.set_node(node("n1", "4", "8Gi").build());
        let p = c.pod_info(pod("p1").cpu("1").build());
        c.assume(p, "n1");
        let bound = c.pod_info(pod("p1").cpu("1").node("n1").build());
        assert_eq!(c.set_assigned_pod(bound.clone()), Some(ClusterEvent::AssignedPodAdd));
        assert!(!c.is_assumed(&bound.uid));
        assert_eq!(c.node("n1").map(|n| n.pods.len()), Some(1));
        // The same object again is no event.
        assert_eq!(c.set_assigned_pod(bound), None);
    }

    #[test]
    fn node_updates_report_only_what_scheduling_cares_about() {
        let mut c = Cache::default();
        c.set_node(node("n1", "4", "8Gi").build());
        assert_eq!(c.set_node(node("n1", "4", "8Gi").build()), None);
        let bigger = node("n1", "8", "8Gi").build();
        assert_eq!(
            c.set_node(bigger),
            Some(ClusterEvent::NodeUpdate(NodeChanges { allocatable: true, ..Default::default() }))
        );
    }

    #[test]
    fn pods_on_unknown_nodes_wait_for_the_node() {
        let mut c = Cache::default();
        let p = c.pod_info(pod("p1").cpu("1").node("later").build());
        c.set_assigned_pod(p);
        assert_eq!(c.num_nodes(), 0);
        c.set_node(node("later", "4", "8Gi").build());
        assert_eq!(c.node("later").map(|n| n.requested.milli_cpu), Some(1000));
        c.remove_node("later");
        assert!(c.node("later").is_none());
        c.remove_pod("p1-uid");
        assert!(c.nodes.is_empty());
    }

    #[test]
    fn priority_resolves_from_classes_when_the_api_left_it_unset() {
        let mut c = Cache::default();
        let p = pod("p1").priority_class("high").build();
        assert_eq!(c.priority_of(&p), 0);
        let mut pc = PriorityClass { value: 1000, ..Default::default() };
        pc.metadata.name = Some("high".into());
        c.set_priority_class(pc);
        assert_eq!(c.priority_of(&p), 1000);
        assert_eq!(c.priority_of(&pod("p2").priority(5).priority_class("high").build()), 5);
        let mut default = PriorityClass { value: 7, global_default: Some(true), ..Default::default() };
        default.metadata.name = Some("default".into());
        c.set_priority_class(default);
        assert_eq!(c.priority_of(&pod("p3").build()), 7);
    }
}
