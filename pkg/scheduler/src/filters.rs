//! Filter plugins, in upstream's default order: NodeUnschedulable, NodeName, TaintToleration
//! (with the Ready condition's taint), NodeAffinity (nodeSelector and required terms), NodePorts,
//! NodeResourcesFit, VolumeBinding, InterPodAffinity. A node passes when every plugin accepts it; the first
//! rejection is the node's [`Status`], with upstream's reason strings.

use crate::cache::Cache;
use crate::interpod::InterPodState;
use crate::matching::{first_untolerated, node_matches_pod, tolerated};
use crate::node_info::{NodeInfo, PodInfo, UNSCHEDULABLE_TAINT};
use crate::volumes::{self, PodClaims};
use k8s_openapi::api::core::v1::Taint;
use std::sync::Arc;

pub const ERR_NODE_UNSCHEDULABLE: &str = "node(s) were unschedulable";
pub const ERR_NODE_NAME: &str = "node(s) didn't match the requested node name";
pub const ERR_NODE_AFFINITY: &str = "node(s) didn't match Pod's node affinity/selector";
pub const ERR_NODE_PORTS: &str = "node(s) didn't have free ports for the requested pod ports";
pub const ERR_TOO_MANY_PODS: &str = "Too many pods";

/// The plugins, for recording which ones rejected a pod (and so which events may help it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Plugin {
    NodeUnschedulable,
    NodeName,
    TaintToleration,
    NodeAffinity,
    NodePorts,
    NodeResourcesFit,
    VolumeBinding,
    InterPodAffinity,
}

/// Whether preemption could help (`Unschedulable`) or not (`UnschedulableAndUnresolvable`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    Unschedulable,
    UnschedulableAndUnresolvable,
}

/// Why a node does not fit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    pub code: Code,
    /// The rejecting plugin; None for preemption's own verdicts.
    pub plugin: Option<Plugin>,
    pub reasons: Vec<String>,
}

impl Status {
    fn new(code: Code, plugin: Plugin, reason: impl Into<String>) -> Status {
        Status { code, plugin: Some(plugin), reasons: vec![reason.into()] }
    }

    pub fn unresolvable(reason: impl Into<String>) -> Status {
        Status { code: Code::UnschedulableAndUnresolvable, plugin: None, reasons: vec![reason.into()] }
    }
}

/// Per-attempt state of one pod (upstream's CycleState after PreFilter).
#[derive(Clone, Debug)]
pub struct CycleState {
    pub pod: Arc<PodInfo>,
    pub inter_pod: InterPodState,
    /// VolumeBinding's PreFilter: the pod's claims, or why no node can take the pod.
    pub volumes: Result<Option<PodClaims>, String>,
}

impl CycleState {
    pub fn new(cache: &Cache, pod: Arc<PodInfo>) -> CycleState {
        let inter_pod = InterPodState::compute(cache, &pod);
        let volumes = volumes::pre_filter(cache, &pod);
        CycleState { pod, inter_pod, volumes }
    }
}

fn node_unschedulable(pod: &PodInfo, node: &NodeInfo) -> Result<(), Status> {
    if !node.unschedulable() {
        return Ok(());
    }
    let taint = Taint { key: UNSCHEDULABLE_TAINT.into(), value: None, effect: "NoSchedule".into(), time_added: None };
    if tolerated(pod.tolerations(), &taint) {
        return Ok(());
    }
    Err(Status::new(Code::UnschedulableAndUnresolvable, Plugin::NodeUnschedulable, ERR_NODE_UNSCHEDULABLE))
}

fn node_name(pod: &PodInfo, node: &NodeInfo) -> Result<(), Status> {
    match pod.node_name() {
        Some(want) if want != node.name => {
            Err(Status::new(Code::UnschedulableAndUnresolvable, Plugin::NodeName, ERR_NODE_NAME))
        }
        _ => Ok(()),
    }
}

fn taint_toleration(pod: &PodInfo, node: &NodeInfo) -> Result<(), Status> {
    match first_untolerated(&node.taints, pod.tolerations()) {
        None => Ok(()),
        Some(t) => Err(Status::new(
            Code::UnschedulableAndUnresolvable,
            Plugin::TaintToleration,
            format!("node(s) had untolerated taint {{{}: {}}}", t.key, t.value.as_deref().unwrap_or("")),
        )),
    }
}

fn node_affinity(pod: &PodInfo, node: &NodeInfo) -> Result<(), Status> {
    match &node.node {
        Some(n) if node_matches_pod(pod.spec(), n) => Ok(()),
        _ => Err(Status::new(Code::UnschedulableAndUnresolvable, Plugin::NodeAffinity, ERR_NODE_AFFINITY)),
    }
}

fn node_ports(pod: &PodInfo, node: &NodeInfo) -> Result<(), Status> {
    if node.ports_conflict(&pod.host_ports) {
        return Err(Status::new(Code::Unschedulable, Plugin::NodePorts, ERR_NODE_PORTS));
    }
    Ok(())
}

/// The resources `pod` lacks on `node`, as upstream's reasons (`Too many pods`,
/// `Insufficient cpu`, …).
pub fn insufficient_resources(pod: &PodInfo, node: &NodeInfo) -> Vec<String> {
    let mut out = Vec::new();
    let (want, alloc, used) = (&pod.requests, &node.allocatable, &node.requested);
    if node.pods.len() as i64 + 1 > alloc.allowed_pods {
        out.push(ERR_TOO_MANY_PODS.to_string());
    }
    if want.is_zero() {
        return out;
    }
    if want.milli_cpu > 0 && want.milli_cpu > alloc.milli_cpu - used.milli_cpu {
        out.push("Insufficient cpu".into());
    }
    if want.memory > 0 && want.memory > alloc.memory - used.memory {
        out.push("Insufficient memory".into());
    }
    if want.ephemeral_storage > 0 && want.ephemeral_storage > alloc.ephemeral_storage - used.ephemeral_storage {
        out.push("Insufficient ephemeral-storage".into());
    }
    for (name, q) in &want.scalar {
        if *q == 0 {
            continue;
        }
        let free = alloc.scalar.get(name).copied().unwrap_or(0) - used.scalar.get(name).copied().unwrap_or(0);
        if *q > free {
            out.push(format!("Insufficient {name}"));
        }
    }
    out
}

fn node_resources_fit(pod: &PodInfo, node: &NodeInfo) -> Result<(), Status> {
    let reasons = insufficient_resources(pod, node);
    if reasons.is_empty() {
        return Ok(());
    }
    Err(Status { code: Code::Unschedulable, plugin: Some(Plugin::NodeResourcesFit), reasons })
}

fn volume_binding(state: &CycleState, node: &NodeInfo) -> Result<(), Status> {
    let claims = match &state.volumes {
        Ok(None) => return Ok(()),
        Ok(Some(claims)) => claims,
        Err(reason) => {
            return Err(Status::new(Code::UnschedulableAndUnresolvable, Plugin::VolumeBinding, reason.clone()))
        }
    };
    volumes::filter(claims, node).map(|_| ()).map_err(|reasons| Status {
        code: Code::UnschedulableAndUnresolvable,
        plugin: Some(Plugin::VolumeBinding),
        reasons: reasons.into_iter().map(str::to_string).collect(),
    })
}

fn inter_pod_affinity(state: &CycleState, node: &NodeInfo) -> Result<(), Status> {
    if state.inter_pod.is_empty() {
        return Ok(());
    }
    state.inter_pod.check(&state.pod, node).map_err(|(reason, resolvable)| {
        let code = if resolvable { Code::Unschedulable } else { Code::UnschedulableAndUnresolvable };
        Status::new(code, Plugin::InterPodAffinity, reason)
    })
}

/// Runs every filter against `node` as it is.
pub fn run_filters(state: &CycleState, node: &NodeInfo) -> Result<(), Status> {
    let pod = &state.pod;
    node_unschedulable(pod, node)?;
    node_name(pod, node)?;
    taint_toleration(pod, node)?;
    node_affinity(pod, node)?;
    node_ports(pod, node)?;
    node_resources_fit(pod, node)?;
    volume_binding(state, node)?;
    inter_pod_affinity(state, node)
}

/// Runs the filters as upstream's `RunFilterPluginsWithNominatedPods`: when pods of equal or
/// higher priority are nominated to `node`, the pod must fit both with them there and without.
pub fn run_filters_with_nominated(cache: &Cache, state: &CycleState, node: &NodeInfo) -> Result<(), Status> {
    let nominated: Vec<&Arc<PodInfo>> =
        cache.nominated_on(&node.name).filter(|p| p.uid != state.pod.uid && p.priority >= state.pod.priority).collect();
    if nominated.is_empty() {
        return run_filters(state, node);
    }
    let mut with = node.clone();
    let mut with_state = state.clone();
    for p in nominated {
        with.add_pod(p.clone());
        with_state.inter_pod.update(cache, p, &with, 1);
    }
    run_filters(&with_state, &with)?;
    run_filters(state, node)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{node, pod, NodeBuilder, PodBuilder};

    fn check(nodes: Vec<NodeBuilder>, existing: Vec<PodBuilder>, incoming: PodBuilder) -> Vec<Result<(), Status>> {
        let mut cache = Cache::default();
        for n in nodes {
            cache.set_node(n.build());
        }
        for p in existing {
            let info = cache.pod_info(p.build());
            cache.set_assigned_pod(info);
        }
        let state = CycleState::new(&cache, cache.pod_info(incoming.build()));
        cache.nodes().map(|n| run_filters_with_nominated(&cache, &state, n)).collect()
    }

    fn reasons(r: &Result<(), Status>) -> Vec<String> {
        r.as_ref().err().map(|s| s.reasons.clone()).unwrap_or_default()
    }

    #[test]
    fn resource_fit_counts_bound_pods_against_allocatable() {
        let out = check(
            vec![node("a", "2", "4Gi"), node("b", "4", "4Gi")],
            vec![pod("x").cpu("1500m").node("a"), pod("y").cpu("1").node("b")],
            pod("p").cpu("1"),
        );
        assert_eq!(reasons(&out[0]), vec!["Insufficient cpu"]);
        assert!(out[1].is_ok());
    }

    #[test]
    fn resource_fit_reports_every_missing_resource_and_the_pod_count() {
        let out = check(
            vec![node("a", "1", "1Gi").pods("1")],
            vec![pod("x").node("a")],
            pod("p").cpu("2").memory("2Gi").scalar("example.com/gpu", "1"),
        );
        assert_eq!(
            reasons(&out[0]),
            vec!["Too many pods", "Insufficient cpu", "Insufficient memory", "Insufficient example.com/gpu"]
        );
        assert_eq!(out[0].as_ref().err().map(|s| s.code), Some(Code::Unschedulable));
    }

    #[test]
    fn unschedulable_nodes_take_only_pods_tolerating_it() {
        let n = || node("a", "4", "4Gi").unschedulable();
        let out = check(vec![n()], vec![], pod("p"));
        assert_eq!(reasons(&out[0]), vec![ERR_NODE_UNSCHEDULABLE]);
        let out = check(vec![n()], vec![], pod("p").toleration(UNSCHEDULABLE_TAINT, "Exists", "", "NoSchedule"));
        assert!(out[0].is_ok());
    }

    #[test]
    fn node_name_and_selector_restrict_nodes() {
        let nodes = || vec![node("a", "4", "4Gi").label("disk", "ssd"), node("b", "4", "4Gi")];
        let out = check(nodes(), vec![], pod("p").node("b"));
        assert_eq!(reasons(&out[0]), vec![ERR_NODE_NAME]);
        assert!(out[1].is_ok());
        let out = check(nodes(), vec![], pod("p").node_selector("disk", "ssd"));
        assert!(out[0].is_ok());
        assert_eq!(reasons(&out[1]), vec![ERR_NODE_AFFINITY]);
        assert_eq!(out[1].as_ref().err().map(|s| s.code), Some(Code::UnschedulableAndUnresolvable));
    }

    #[test]
    fn untolerated_taints_and_not_ready_nodes_are_rejected() {
        let tainted = || node("a", "4", "4Gi").taint("dedicated", "gpu", "NoSchedule");
        let out = check(vec![tainted()], vec![], pod("p"));
        assert_eq!(reasons(&out[0]), vec!["node(s) had untolerated taint {dedicated: gpu}"]);
        let out = check(vec![tainted()], vec![], pod("p").toleration("dedicated", "Equal", "gpu", "NoSchedule"));
        assert!(out[0].is_ok());
        let prefer = node("a", "4", "4Gi").taint("soft", "", "PreferNoSchedule");
        assert!(check(vec![prefer], vec![], pod("p"))[0].is_ok());
        let not_ready = node("a", "4", "4Gi").ready("False");
        let out = check(vec![not_ready], vec![], pod("p"));
        assert_eq!(reasons(&out[0]), vec!["node(s) had untolerated taint {node.kubernetes.io/not-ready: }"]);
    }

    #[test]
    fn host_ports_conflict_with_bound_pods() {
        let out = check(vec![node("a", "4", "4Gi")], vec![pod("x").host_port(80).node("a")], pod("p").host_port(80));
        assert_eq!(reasons(&out[0]), vec![ERR_NODE_PORTS]);
        let out = check(vec![node("a", "4", "4Gi")], vec![pod("x").host_port(80).node("a")], pod("p").host_port(81));
        assert!(out[0].is_ok());
    }

    #[test]
    fn required_anti_affinity_keeps_matching_pods_apart() {
        let nodes = || {
            vec![
                node("a", "4", "4Gi").label("kubernetes.io/hostname", "a"),
                node("b", "4", "4Gi").label("kubernetes.io/hostname", "b"),
            ]
        };
        let incoming = || pod("p").label("app", "web").anti_affinity("app", "web", "kubernetes.io/hostname");
        let out = check(nodes(), vec![pod("x").label("app", "web").node("a")], incoming());
        assert_eq!(reasons(&out[0]), vec![crate::interpod::ERR_ANTI_AFFINITY]);
        assert!(out[1].is_ok());
        // An existing pod's anti-affinity rejects the incoming pod too.
        let existing = pod("x").label("app", "web").anti_affinity("app", "web", "kubernetes.io/hostname").node("a");
        let out = check(nodes(), vec![existing], pod("p").label("app", "web"));
        assert_eq!(reasons(&out[0]), vec![crate::interpod::ERR_EXISTING_ANTI_AFFINITY]);
        assert!(out[1].is_ok());
    }

    #[test]
    fn required_affinity_follows_matching_pods_or_admits_the_first_of_a_group() {
        let nodes = || vec![node("a", "4", "4Gi").label("zone", "z1"), node("b", "4", "4Gi").label("zone", "z2")];
        let out = check(nodes(), vec![pod("db").label("app", "db").node("b")], pod("p").affinity("app", "db", "zone"));
        assert_eq!(reasons(&out[0]), vec![crate::interpod::ERR_AFFINITY]);
        assert!(out[1].is_ok());
        // No pod matches anywhere, but the pod matches its own term: it may start the group.
        let out = check(nodes(), vec![], pod("p").label("app", "db").affinity("app", "db", "zone"));
        assert!(out.iter().all(Result::is_ok));
        // Not matching its own term: it waits.
        let out = check(nodes(), vec![], pod("p").affinity("app", "db", "zone"));
        assert!(out.iter().all(Result::is_err));
    }

    #[test]
    fn nominated_higher_priority_pods_hold_their_room() {
        let mut cache = Cache::default();
        cache.set_node(node("a", "2", "4Gi").build());
        let nominated = cache.pod_info(pod("big").cpu("2").priority(100).build());
        cache.set_nominated(&nominated, Some("a"));
        let low = CycleState::new(&cache, cache.pod_info(pod("low").cpu("1").priority(1).build()));
        let a = cache.node("a").expect("node a");
        assert_eq!(
            run_filters_with_nominated(&cache, &low, a).map_err(|s| s.reasons),
            Err(vec!["Insufficient cpu".to_string()])
        );
        let high = CycleState::new(&cache, cache.pod_info(pod("high").cpu("1").priority(1000).build()));
        assert!(run_filters_with_nominated(&cache, &high, a).is_ok());
    }
}
