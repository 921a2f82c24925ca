//! The DaemonSet controller's decisions as pure functions (upstream
//! `pkg/controller/daemon/{daemon_controller,update}.go` and `util`): which nodes should run a
//! daemon pod (node name, node selector and required node affinity, taints against the
//! template's tolerations plus the default DaemonSet tolerations), which pods to create or
//! delete, the rolling update with maxUnavailable/maxSurge, and the status counters.

use crate::deployment::util::scaled_value;
use crate::workloads::{owner, pods};
use jiff::Timestamp;
use k1s_api::node_affinity::{node_matches_pod, tolerates};
use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetStatus};
use k8s_openapi::api::core::v1::{
    Affinity, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod, PodTemplateSpec, Taint,
    Toleration,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::{BTreeMap, BTreeSet};

pub const REVISION_LABEL: &str = "controller-revision-hash";
pub const TEMPLATE_GENERATION_LABEL: &str = "pod-template-generation";
pub const TEMPLATE_GENERATION_ANNOTATION: &str = "deprecated.daemonset.template.generation";

/// One thing to do.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Create a daemon pod for this node.
    CreateOn(String),
    DeletePod(String),
    /// A failed pod was found (and is deleted): a warning event.
    FailedPod {
        pod: String,
        node: String,
    },
}

/// Node selector and required node affinity (`fitsNodeAffinity`).
pub fn fits_node_affinity(pod: &Pod, node: &Node) -> bool {
    pod.spec.as_ref().is_none_or(|spec| node_matches_pod(spec, node))
}

fn untolerated<'a>(taints: &'a [Taint], tolerations: &[Toleration], effects: &[&str]) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|t| effects.contains(&t.effect.as_str()))
        .find(|t| !tolerations.iter().any(|x| tolerates(x, t)))
}

/// `AddOrUpdateDaemonPodTolerations`: what every daemon pod tolerates.
pub fn default_tolerations(template: &PodTemplateSpec) -> Vec<Toleration> {
    let spec = template.spec.clone().unwrap_or_default();
    let mut out = spec.tolerations.unwrap_or_default();
    let mut add = |key: &str, effect: &str| {
        if !out.iter().any(|t| t.key.as_deref() == Some(key) && t.effect.as_deref() == Some(effect)) {
            out.push(Toleration {
                key: Some(key.into()),
                operator: Some("Exists".into()),
                effect: Some(effect.into()),
                ..Default::default()
            });
        }
    };
    add("node.kubernetes.io/not-ready", "NoExecute");
    add("node.kubernetes.io/unreachable", "NoExecute");
    add("node.kubernetes.io/disk-pressure", "NoSchedule");
    add("node.kubernetes.io/memory-pressure", "NoSchedule");
    add("node.kubernetes.io/pid-pressure", "NoSchedule");
    add("node.kubernetes.io/unschedulable", "NoSchedule");
    if spec.host_network == Some(true) {
        add("node.kubernetes.io/network-unavailable", "NoSchedule");
    }
    out
}

/// `ReplaceDaemonSetPodNodeNameNodeAffinity`: pin the pod to `node` through required affinity.
pub fn pin_to_node(affinity: Option<Affinity>, node: &str) -> Affinity {
    let term = NodeSelectorTerm {
        match_expressions: None,
        match_fields: Some(vec![NodeSelectorRequirement {
            key: "metadata.name".into(),
            operator: "In".into(),
            values: Some(vec![node.into()]),
        }]),
    };
    let mut a = affinity.unwrap_or_default();
    let na = a.node_affinity.get_or_insert_with(NodeAffinity::default);
    match na.required_during_scheduling_ignored_during_execution.as_mut() {
        Some(sel) => sel.node_selector_terms = vec![term],
        None => {
            na.required_during_scheduling_ignored_during_execution =
                Some(NodeSelector { node_selector_terms: vec![term] })
        }
    }
    a
}

/// The pod template of the current revision (`CreatePodTemplate`), before pinning to a node.
pub fn pod_template(ds: &DaemonSet, hash: &str) -> PodTemplateSpec {
    let mut t = ds.spec.as_ref().map(|s| s.template.clone()).unwrap_or_default();
    let tolerations = default_tolerations(&t);
    t.spec.get_or_insert_with(Default::default).tolerations = Some(tolerations);
    let labels = t.metadata.get_or_insert_with(Default::default).labels.get_or_insert_with(BTreeMap::new);
    if let Some(g) = template_generation(ds) {
        labels.insert(TEMPLATE_GENERATION_LABEL.into(), g.to_string());
    }
    labels.insert(REVISION_LABEL.into(), hash.into());
    t
}

/// The daemon pod for `node`.
pub fn new_pod(ds: &DaemonSet, template: &PodTemplateSpec, node: &str) -> Pod {
    let name = ds.metadata.name.clone().unwrap_or_default();
    let ns = ds.metadata.namespace.clone().unwrap_or_default();
    let mut pod = pods::from_template(template, &ns, None, Some(format!("{name}-")), owner::controller_ref(ds));
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.affinity = Some(pin_to_node(spec.affinity.take(), node));
    pod
}

fn template_generation(ds: &DaemonSet) -> Option<i64> {
    ds.metadata.annotations.as_ref()?.get(TEMPLATE_GENERATION_ANNOTATION)?.parse().ok()
}

/// `NodeShouldRunDaemonPod`: (should run, should continue running).
pub fn should_run(ds: &DaemonSet, node: &Node) -> (bool, bool) {
    let template = ds.spec.as_ref().map(|s| s.template.clone()).unwrap_or_default();
    let mut pod = Pod { metadata: Default::default(), spec: template.spec.clone(), status: None };
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.tolerations = Some(default_tolerations(&template));
    let node_name = node.metadata.name.clone().unwrap_or_default();
    if spec.node_name.as_deref().is_some_and(|n| !n.is_empty() && n != node_name) {
        return (false, false);
    }
    if !fits_node_affinity(&pod, node) {
        return (false, false);
    }
    let taints = node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
    let tolerations = pod.spec.as_ref().and_then(|s| s.tolerations.clone()).unwrap_or_default();
    if untolerated(&taints, &tolerations, &["NoSchedule", "NoExecute"]).is_some() {
        return (false, untolerated(&taints, &tolerations, &["NoExecute"]).is_none());
    }
    (true, true)
}

/// The node a daemon pod is for: its `nodeName`, or the node its affinity pins it to.
pub fn target_node(pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    if let Some(n) = spec.node_name.clone().filter(|n| !n.is_empty()) {
        return Some(n);
    }
    let terms = &spec
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    terms.iter().find_map(|t| {
        t.match_fields.iter().flatten().find_map(|r| {
            (r.key == "metadata.name" && r.operator == "In" && r.values.as_ref().is_some_and(|v| v.len() == 1))
                .then(|| r.values.as_ref().and_then(|v| v.first().cloned()))
                .flatten()
        })
    })
}

fn hash_of(p: &Pod) -> Option<&str> {
    p.metadata.labels.as_ref()?.get(REVISION_LABEL).map(String::as_str)
}

/// `IsPodUpdated`: the pod carries the current hash (or template generation).
pub fn is_updated(ds: &DaemonSet, pod: &Pod, hash: &str) -> bool {
    let by_gen = template_generation(ds).is_some_and(|g| {
        pod.metadata.labels.as_ref().and_then(|l| l.get(TEMPLATE_GENERATION_LABEL)) == Some(&g.to_string())
    });
    by_gen || hash_of(pod) == Some(hash)
}

fn by_age(a: &&Pod, b: &&Pod) -> std::cmp::Ordering {
    let t = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
    t(a).cmp(&t(b)).then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

fn allows_surge(ds: &DaemonSet, desired: i32) -> bool {
    surge_and_unavailable(ds, desired).0 > 0
}

/// (maxSurge, maxUnavailable) resolved against the number of nodes that should run a pod.
pub fn surge_and_unavailable(ds: &DaemonSet, desired: i32) -> (i32, i32) {
    let ru = ds
        .spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .filter(|u| u.type_.as_deref() != Some("OnDelete"))
        .and_then(|u| u.rolling_update.clone())
        .unwrap_or_default();
    let surge = scaled_value(ru.max_surge.as_ref().unwrap_or(&IntOrString::Int(0)), desired, true).unwrap_or(0);
    let unavailable =
        scaled_value(ru.max_unavailable.as_ref().unwrap_or(&IntOrString::Int(1)), desired, true).unwrap_or(1);
    if surge == 0 && unavailable == 0 {
        return (0, 1);
    }
    (surge, unavailable)
}

/// Pods grouped by target node, and those with no target node.
pub fn by_node<'a>(pods: &[&'a Pod]) -> BTreeMap<String, Vec<&'a Pod>> {
    let mut m: BTreeMap<String, Vec<&Pod>> = BTreeMap::new();
    for p in pods {
        if let Some(n) = target_node(p) {
            m.entry(n).or_default().push(p);
        }
    }
    m
}

/// `manage`: create missing daemon pods, delete failed, duplicate and misplaced ones. Failed
/// pods are only deleted where `may_delete_failed(node)` allows (the back-off).
pub fn manage(ds: &DaemonSet, nodes: &[&Node], pods: &[&Pod], may_delete_failed: &dyn Fn(&str) -> bool) -> Vec<Step> {
    let mut steps = Vec::new();
    let per_node = by_node(pods);
    let desired = i32::try_from(nodes.iter().filter(|n| should_run(ds, n).0).count()).unwrap_or(0);
    let surge = allows_surge(ds, desired);
    let node_names: BTreeSet<String> = nodes.iter().filter_map(|n| n.metadata.name.clone()).collect();
    for node in nodes {
        let name = node.metadata.name.clone().unwrap_or_default();
        let (run, keep) = should_run(ds, node);
        let on_node = per_node.get(&name).cloned().unwrap_or_default();
        if run && on_node.is_empty() {
            steps.push(Step::CreateOn(name));
        } else if keep {
            let mut running: Vec<&Pod> = Vec::new();
            for p in on_node.iter().filter(|p| p.metadata.deletion_timestamp.is_none()) {
                match pods::pod_phase(p) {
                    "Failed" => {
                        if may_delete_failed(&name) {
                            let pod = p.metadata.name.clone().unwrap_or_default();
                            steps.push(Step::FailedPod { pod: pod.clone(), node: name.clone() });
                            steps.push(Step::DeletePod(pod));
                        }
                    }
                    "Succeeded" => steps.push(Step::DeletePod(p.metadata.name.clone().unwrap_or_default())),
                    _ => running.push(p),
                }
            }
            running.sort_by(by_age);
            if !surge {
                for p in running.iter().skip(1) {
                    steps.push(Step::DeletePod(p.metadata.name.clone().unwrap_or_default()));
                }
            }
        } else {
            for p in on_node.iter().filter(|p| p.metadata.deletion_timestamp.is_none()) {
                steps.push(Step::DeletePod(p.metadata.name.clone().unwrap_or_default()));
            }
        }
    }
    // Unscheduled pods aimed at nodes that no longer exist.
    for (node, ps) in &per_node {
        if node_names.contains(node) {
            continue;
        }
        for p in ps.iter().filter(|p| p.metadata.deletion_timestamp.is_none() && pods::pod_phase(p) != "Running") {
            if p.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_none_or(str::is_empty) {
                steps.push(Step::DeletePod(p.metadata.name.clone().unwrap_or_default()));
            }
        }
    }
    steps
}

/// `findUpdatedPodsOnNode`: (new, old) among live pods; `None` when there are duplicates.
fn updated_on_node<'a>(ds: &DaemonSet, pods: &[&'a Pod], hash: &str) -> Option<(Option<&'a Pod>, Option<&'a Pod>)> {
    let mut new = None;
    let mut old = None;
    for p in pods.iter().filter(|p| p.metadata.deletion_timestamp.is_none()) {
        let slot = if is_updated(ds, p, hash) { &mut new } else { &mut old };
        if slot.is_some() {
            return None;
        }
        *slot = Some(*p);
    }
    Some((new, old))
}

/// `rollingUpdate`: old pods to delete and nodes to surge onto, within the budgets.
pub fn rolling_update(ds: &DaemonSet, nodes: &[&Node], pods: &[&Pod], hash: &str, now: Timestamp) -> Vec<Step> {
    let desired = i32::try_from(nodes.iter().filter(|n| should_run(ds, n).0).count()).unwrap_or(0);
    let (max_surge, max_unavailable) = surge_and_unavailable(ds, desired);
    let min_ready = ds.spec.as_ref().and_then(|s| s.min_ready_seconds).unwrap_or(0);
    let available = |p: &Pod| pods::is_available(p, min_ready, now);
    let per_node = by_node(pods);
    let mut steps = Vec::new();
    if max_surge == 0 {
        let mut unavailable = 0;
        let mut replace: Vec<String> = Vec::new();
        let mut candidates: Vec<String> = Vec::new();
        for ps in per_node.values() {
            match updated_on_node(ds, ps, hash) {
                None | Some((None, None)) | Some((Some(_), Some(_))) => unavailable += 1,
                Some((Some(new), None)) => {
                    if !available(new) {
                        unavailable += 1;
                    }
                }
                Some((None, Some(old))) => {
                    let n = old.metadata.name.clone().unwrap_or_default();
                    if !available(old) {
                        replace.push(n);
                    } else if unavailable < max_unavailable {
                        candidates.push(n);
                    }
                }
            }
        }
        let remaining = usize::try_from((max_unavailable - unavailable).max(0)).unwrap_or(0).min(candidates.len());
        for n in replace.into_iter().chain(candidates.into_iter().take(remaining)) {
            steps.push(Step::DeletePod(n));
        }
        return steps;
    }
    let mut surged = 0;
    let mut allowed: Vec<String> = Vec::new();
    let mut candidates: Vec<String> = Vec::new();
    for (node, ps) in &per_node {
        let Some((new, Some(old))) = updated_on_node(ds, ps, hash) else { continue };
        match new {
            None => {
                if !available(old) {
                    allowed.push(node.clone());
                } else if surged < max_surge {
                    candidates.push(node.clone());
                }
            }
            Some(new) => {
                if !available(new) {
                    surged += 1;
                    continue;
                }
                steps.push(Step::DeletePod(old.metadata.name.clone().unwrap_or_default()));
            }
        }
    }
    let remaining = usize::try_from((max_surge - surged).max(0)).unwrap_or(0).min(candidates.len());
    for n in allowed.into_iter().chain(candidates.into_iter().take(remaining)) {
        steps.push(Step::CreateOn(n));
    }
    steps
}

/// `updateDaemonSetStatus`: the counters from the nodes and pods.
pub fn status(ds: &DaemonSet, nodes: &[&Node], pods: &[&Pod], hash: &str, now: Timestamp) -> DaemonSetStatus {
    let per_node = by_node(pods);
    let min_ready = ds.spec.as_ref().and_then(|s| s.min_ready_seconds).unwrap_or(0);
    let (mut desired, mut current, mut mis, mut ready, mut updated, mut available) = (0, 0, 0, 0, 0, 0);
    for node in nodes {
        let name = node.metadata.name.clone().unwrap_or_default();
        let (run, _) = should_run(ds, node);
        let mut on_node = per_node.get(&name).cloned().unwrap_or_default();
        let scheduled = !on_node.is_empty();
        if run {
            desired += 1;
            if !scheduled {
                continue;
            }
            current += 1;
            on_node.sort_by(by_age);
            let p = on_node[0];
            if pods::is_ready(p) {
                ready += 1;
                if pods::is_available(p, min_ready, now) {
                    available += 1;
                }
            }
            if is_updated(ds, p, hash) {
                updated += 1;
            }
        } else if scheduled {
            mis += 1;
        }
    }
    let current_status = ds.status.clone().unwrap_or_default();
    DaemonSetStatus {
        desired_number_scheduled: desired,
        current_number_scheduled: current,
        number_misscheduled: mis,
        number_ready: ready,
        updated_number_scheduled: Some(updated),
        number_available: Some(available),
        number_unavailable: Some(desired - available),
        observed_generation: ds.metadata.generation,
        collision_count: current_status.collision_count,
        conditions: current_status.conditions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::pods::tests::{pod, ts};
    use k8s_openapi::api::apps::v1::{DaemonSetSpec, DaemonSetUpdateStrategy, RollingUpdateDaemonSet};
    use k8s_openapi::api::core::v1::{NodeSpec, PodSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

    const NOW: &str = "2024-05-01T12:00:00Z";

    fn node(name: &str, labels: &[(&str, &str)], taints: Vec<Taint>) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
                ..Default::default()
            },
            spec: Some(NodeSpec { taints: Some(taints), ..Default::default() }),
            status: None,
        }
    }

    fn taint(key: &str, effect: &str) -> Taint {
        Taint { key: key.into(), effect: effect.into(), value: None, time_added: None }
    }

    fn ds() -> DaemonSet {
        DaemonSet {
            metadata: ObjectMeta {
                name: Some("agent".into()),
                namespace: Some("ns".into()),
                uid: Some("ds-uid".into()),
                generation: Some(1),
                ..Default::default()
            },
            spec: Some(DaemonSetSpec {
                selector: LabelSelector {
                    match_labels: Some([("app".into(), "agent".into())].into()),
                    ..Default::default()
                },
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some([("app".into(), "agent".into())].into()),
                        ..Default::default()
                    }),
                    spec: Some(PodSpec::default()),
                },
                update_strategy: Some(DaemonSetUpdateStrategy {
                    type_: Some("RollingUpdate".into()),
                    rolling_update: Some(RollingUpdateDaemonSet {
                        max_unavailable: Some(IntOrString::Int(1)),
                        max_surge: Some(IntOrString::Int(0)),
                    }),
                }),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn daemon_pod(name: &str, node: &str, hash: &str, ready: bool, created: &str) -> Pod {
        let mut p = pod(name, "", "Running", ready.then_some("2024-05-01T10:00:00Z"), created);
        let t = pod_template(&ds(), hash);
        p.metadata.labels = t.metadata.and_then(|m| m.labels);
        p.spec = Some(PodSpec { affinity: Some(pin_to_node(None, node)), ..Default::default() });
        p
    }

    #[test]
    fn taints_decide_where_daemon_pods_run() {
        let d = ds();
        assert_eq!(should_run(&d, &node("a", &[], vec![])), (true, true));
        assert_eq!(should_run(&d, &node("b", &[], vec![taint("dedicated", "NoSchedule")])), (false, true));
        assert_eq!(should_run(&d, &node("c", &[], vec![taint("dedicated", "NoExecute")])), (false, false));
        // Default tolerations: unschedulable and not-ready nodes still run daemons.
        assert_eq!(
            should_run(&d, &node("d", &[], vec![taint("node.kubernetes.io/unschedulable", "NoSchedule")])),
            (true, true)
        );
        assert_eq!(
            should_run(&d, &node("e", &[], vec![taint("node.kubernetes.io/not-ready", "NoExecute")])),
            (true, true)
        );
        let mut tolerant = ds();
        tolerant.spec.as_mut().and_then(|s| s.template.spec.as_mut()).expect("spec").tolerations =
            Some(vec![Toleration {
                key: Some("dedicated".into()),
                operator: Some("Exists".into()),
                ..Default::default()
            }]);
        assert_eq!(should_run(&tolerant, &node("c", &[], vec![taint("dedicated", "NoExecute")])), (true, true));
    }

    #[test]
    fn node_selectors_and_affinity_restrict_nodes() {
        let mut d = ds();
        d.spec.as_mut().and_then(|s| s.template.spec.as_mut()).expect("spec").node_selector =
            Some([("disk".into(), "ssd".into())].into());
        assert!(should_run(&d, &node("a", &[("disk", "ssd")], vec![])).0);
        assert!(!should_run(&d, &node("b", &[("disk", "hdd")], vec![])).0);
        let pinned = Pod {
            spec: Some(PodSpec { affinity: Some(pin_to_node(None, "x")), ..Default::default() }),
            ..Default::default()
        };
        assert!(fits_node_affinity(&pinned, &node("x", &[], vec![])));
        assert!(!fits_node_affinity(&pinned, &node("y", &[], vec![])));
        assert_eq!(target_node(&pinned).as_deref(), Some("x"));
    }

    #[test]
    fn manage_creates_on_eligible_nodes_and_removes_duplicates_and_misplaced_pods() {
        let d = ds();
        let a = node("a", &[], vec![]);
        let b = node("b", &[], vec![]);
        let c = node("c", &[], vec![taint("x", "NoExecute")]);
        let p1 = daemon_pod("p1", "b", "h", true, "2024-05-01T09:00:00Z");
        let p2 = daemon_pod("p2", "b", "h", true, "2024-05-01T10:00:00Z");
        let p3 = daemon_pod("p3", "c", "h", true, "2024-05-01T10:00:00Z");
        let steps = manage(&d, &[&a, &b, &c], &[&p1, &p2, &p3], &|_| true);
        assert_eq!(steps, [Step::CreateOn("a".into()), Step::DeletePod("p2".into()), Step::DeletePod("p3".into())]);
    }

    #[test]
    fn failed_pods_are_deleted_unless_backing_off() {
        let d = ds();
        let a = node("a", &[], vec![]);
        let mut f = daemon_pod("f", "a", "h", false, NOW);
        f.status = pod("x", "", "Failed", None, NOW).status;
        assert_eq!(
            manage(&d, &[&a], &[&f], &|_| true),
            [Step::FailedPod { pod: "f".into(), node: "a".into() }, Step::DeletePod("f".into())]
        );
        assert!(manage(&d, &[&a], &[&f], &|_| false).is_empty());
    }

    #[test]
    fn rolling_update_replaces_within_max_unavailable() {
        let d = ds();
        let nodes: Vec<Node> = ["a", "b", "c"].iter().map(|n| node(n, &[], vec![])).collect();
        let nodes: Vec<&Node> = nodes.iter().collect();
        let pods: Vec<Pod> =
            ["a", "b", "c"].iter().map(|n| daemon_pod(&format!("p-{n}"), n, "old", true, NOW)).collect();
        let refs: Vec<&Pod> = pods.iter().collect();
        assert_eq!(rolling_update(&d, &nodes, &refs, "new", ts(NOW)), [Step::DeletePod("p-a".into())]);
        // A new pod still unavailable on one node uses up the budget.
        let mut mixed = pods.clone();
        mixed[0] = daemon_pod("n-a", "a", "new", false, NOW);
        let refs: Vec<&Pod> = mixed.iter().collect();
        assert!(rolling_update(&d, &nodes, &refs, "new", ts(NOW)).is_empty());
    }

    #[test]
    fn rolling_update_with_surge_creates_new_pods_first() {
        let mut d = ds();
        d.spec
            .as_mut()
            .and_then(|s| s.update_strategy.as_mut())
            .and_then(|u| u.rolling_update.as_mut())
            .expect("ru")
            .max_surge = Some(IntOrString::Int(1));
        let nodes: Vec<Node> = ["a", "b"].iter().map(|n| node(n, &[], vec![])).collect();
        let nodes: Vec<&Node> = nodes.iter().collect();
        let pods: Vec<Pod> = ["a", "b"].iter().map(|n| daemon_pod(&format!("p-{n}"), n, "old", true, NOW)).collect();
        let refs: Vec<&Pod> = pods.iter().collect();
        assert_eq!(rolling_update(&d, &nodes, &refs, "new", ts(NOW)), [Step::CreateOn("a".into())]);
        let mut surged = pods.clone();
        surged.push(daemon_pod("n-a", "a", "new", true, NOW));
        let refs: Vec<&Pod> = surged.iter().collect();
        assert_eq!(
            rolling_update(&d, &nodes, &refs, "new", ts(NOW)),
            [Step::DeletePod("p-a".into()), Step::CreateOn("b".into())]
        );
    }

    #[test]
    fn status_counts_desired_current_ready_updated_and_misscheduled() {
        let d = ds();
        let a = node("a", &[], vec![]);
        let b = node("b", &[], vec![]);
        let c = node("c", &[], vec![taint("x", "NoSchedule")]);
        let pa = daemon_pod("pa", "a", "h", true, NOW);
        let pc = daemon_pod("pc", "c", "old", false, NOW);
        let s = status(&d, &[&a, &b, &c], &[&pa, &pc], "h", ts(NOW));
        assert_eq!((s.desired_number_scheduled, s.current_number_scheduled, s.number_misscheduled), (2, 1, 1));
        assert_eq!(
            (s.number_ready, s.updated_number_scheduled, s.number_available, s.number_unavailable),
            (1, Some(1), Some(1), Some(1))
        );
    }

    #[test]
    fn pods_are_pinned_to_their_node_with_daemon_labels_and_tolerations() {
        let p = new_pod(&ds(), &pod_template(&ds(), "h1"), "node-a");
        assert_eq!(p.metadata.generate_name.as_deref(), Some("agent-"));
        assert_eq!(p.metadata.labels.as_ref().and_then(|l| l.get(REVISION_LABEL)).map(String::as_str), Some("h1"));
        assert_eq!(target_node(&p).as_deref(), Some("node-a"));
        let tolerations = p.spec.as_ref().and_then(|s| s.tolerations.clone()).unwrap_or_default();
        assert!(tolerations.iter().any(|t| t.key.as_deref() == Some("node.kubernetes.io/unreachable")));
    }
}
