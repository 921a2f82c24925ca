//! One scheduling attempt over the cache: filter every node (the nominated node first), score
//! the feasible ones and pick the best; or explain, upstream's way, why no node fits
//! (`0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {a: b}.`).

use crate::cache::Cache;
use crate::filters::{run_filters_with_nominated, Code, CycleState, Plugin, Status};
use crate::node_info::NodeInfo;
use crate::scores::{score_nodes, select_best};
use std::collections::{BTreeMap, BTreeSet};

/// What upstream reports when the cluster has no nodes at all.
pub const ERR_NO_NODES: &str = "no nodes available to schedule pods";

/// No node passed the filters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FitError {
    pub num_all_nodes: usize,
    /// Node name ▶ why it was rejected.
    pub statuses: BTreeMap<String, Status>,
    /// Why PreFilter rejected the pod for every node (the statuses then all say so too).
    pub pre_filter: Option<String>,
}

/// `0/N nodes are available: <count reason>, ….` with reasons counted over `statuses`, plus
/// `absent` (a reason for nodes without a status, and how many those are).
pub fn summarize<'a>(
    num_all_nodes: usize,
    statuses: impl Iterator<Item = &'a Status>,
    absent: Option<(&str, usize)>,
) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for s in statuses {
        for r in &s.reasons {
            *counts.entry(r.clone()).or_default() += 1;
        }
    }
    if let Some((reason, n)) = absent.filter(|(_, n)| *n > 0) {
        *counts.entry(reason.to_string()).or_default() += n;
    }
    let mut parts: Vec<String> = counts.iter().map(|(r, n)| format!("{n} {r}")).collect();
    parts.sort();
    let mut msg = format!("0/{num_all_nodes} nodes are available:");
    if !parts.is_empty() {
        msg.push_str(&format!(" {}.", parts.join(", ")));
    }
    msg
}

impl FitError {
    /// The message without preemption's part.
    pub fn message(&self) -> String {
        match &self.pre_filter {
            Some(reason) => format!("0/{} nodes are available: {reason}.", self.num_all_nodes),
            None => summarize(self.num_all_nodes, self.statuses.values(), None),
        }
    }

    /// The plugins that rejected the pod somewhere (what cluster events may help it).
    pub fn plugins(&self) -> BTreeSet<Plugin> {
        self.statuses.values().filter_map(|s| s.plugin).collect()
    }
}

/// Why an attempt found no node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScheduleError {
    NoNodes,
    Fit(FitError),
}

/// Finds the node for `state.pod`; `pick(n)` breaks ties among the best `n` nodes.
pub fn find_node(cache: &Cache, state: &CycleState, pick: impl FnMut(usize) -> usize) -> Result<String, ScheduleError> {
    let num_all_nodes = cache.num_nodes();
    if num_all_nodes == 0 {
        return Err(ScheduleError::NoNodes);
    }
    if let Err(reason) = &state.volumes {
        let status = Status {
            code: Code::UnschedulableAndUnresolvable,
            plugin: Some(Plugin::VolumeBinding),
            reasons: vec![reason.clone()],
        };
        let statuses = cache.nodes().map(|n| (n.name.clone(), status.clone())).collect();
        return Err(ScheduleError::Fit(FitError { num_all_nodes, statuses, pre_filter: Some(reason.clone()) }));
    }
    if let Some(nominated) = state.pod.nominated_node().and_then(|n| cache.node(n)) {
        if run_filters_with_nominated(cache, state, nominated).is_ok() {
            return Ok(nominated.name.clone());
        }
    }
    let mut feasible: Vec<&NodeInfo> = Vec::new();
    let mut statuses = BTreeMap::new();
    for node in cache.nodes() {
        match run_filters_with_nominated(cache, state, node) {
            Ok(()) => feasible.push(node),
            Err(s) => {
                statuses.insert(node.name.clone(), s);
            }
        }
    }
    match feasible.len() {
        0 => Err(ScheduleError::Fit(FitError { num_all_nodes, statuses, pre_filter: None })),
        1 => Ok(feasible[0].name.clone()),
        _ => {
            let scores = score_nodes(cache, &state.pod, &feasible);
            let best = select_best(&scores, pick).unwrap_or(0);
            Ok(feasible[best].name.clone())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{node, pod, NodeBuilder};

    fn cache_with(nodes: Vec<NodeBuilder>) -> Cache {
        let mut c = Cache::default();
        for n in nodes {
            c.set_node(n.build());
        }
        c
    }

    #[test]
    fn picks_the_node_with_room() {
        let mut cache = cache_with(vec![node("small", "1", "1Gi"), node("big", "8", "16Gi")]);
        let filler = cache.pod_info(pod("f").cpu("500m").node("small").build());
        cache.set_assigned_pod(filler);
        let state = CycleState::new(&cache, cache.pod_info(pod("p").cpu("2").build()));
        assert_eq!(find_node(&cache, &state, |_| 0), Ok("big".to_string()));
    }

    #[test]
    fn fit_error_message_counts_reasons_like_upstream() {
        let cache = cache_with(vec![
            node("a", "1", "1Gi"),
            node("b", "8", "8Gi").taint("dedicated", "infra", "NoSchedule"),
            node("c", "1", "1Gi"),
        ]);
        let state = CycleState::new(&cache, cache.pod_info(pod("p").cpu("2").build()));
        let Err(ScheduleError::Fit(fit)) = find_node(&cache, &state, |_| 0) else { panic!("expected a fit error") };
        assert_eq!(
            fit.message(),
            "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: infra}, 2 Insufficient cpu."
        );
        assert_eq!(fit.plugins(), BTreeSet::from([Plugin::TaintToleration, Plugin::NodeResourcesFit]));
        assert_eq!(fit.statuses["b"].code, Code::UnschedulableAndUnresolvable);
    }

    #[test]
    fn no_nodes_is_its_own_error() {
        let cache = Cache::default();
        let state = CycleState::new(&cache, cache.pod_info(pod("p").build()));
        assert_eq!(find_node(&cache, &state, |_| 0), Err(ScheduleError::NoNodes));
    }

    #[test]
    fn nominated_node_is_tried_first() {
        let cache = cache_with(vec![node("a", "4", "4Gi"), node("b", "64", "64Gi")]);
        let state = CycleState::new(&cache, cache.pod_info(pod("p").cpu("1").nominated("a").build()));
        assert_eq!(find_node(&cache, &state, |_| 0), Ok("a".to_string()));
    }

    #[test]
    fn summary_with_absent_nodes_matches_preemption_wording() {
        let s = Status::unresolvable("No preemption victims found for incoming pod");
        assert_eq!(
            summarize(3, [&s].into_iter(), Some(("Preemption is not helpful for scheduling", 2))),
            "0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling."
        );
    }
}
