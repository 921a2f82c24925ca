//! DefaultPreemption (PostFilter): when a pod fits nowhere, find a node where evicting
//! lower-priority pods makes it fit, keeping as many of them as possible (PDB-protected ones
//! first), and pick the node whose victims matter least: fewest budget violations, lowest
//! highest priority, lowest priority sum, fewest victims, most recently started.

use crate::cache::Cache;
use crate::filters::{run_filters_with_nominated, Code, CycleState, Status};
use crate::node_info::{NodeInfo, PodInfo};
use crate::schedule::{summarize, FitError};
use k1s_api::selectors;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use std::cmp::Ordering;
use std::sync::Arc;

pub const NO_VICTIMS: &str = "No preemption victims found for incoming pod";
pub const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";
pub const NOT_ELIGIBLE_NEVER: &str = "preemption: not eligible due to preemptionPolicy=Never.";
pub const NOT_ELIGIBLE_TERMINATING: &str = "preemption: not eligible due to a terminating pod on the nominated node.";

/// A node where the preemptor fits once `victims` are gone.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub node: String,
    /// Most important first.
    pub victims: Vec<Arc<PodInfo>>,
    pub pdb_violations: usize,
}

/// The outcome of preemption for a pod that fits nowhere.
#[derive(Clone, Debug)]
pub enum Preemption {
    /// Evict the candidate's victims, nominate the preemptor to its node, and drop the
    /// nominations of lower-priority pods there.
    Nominate { candidate: Candidate, clear_nominations: Vec<Arc<PodInfo>> },
    /// Preemption does not help now; `message` starts with `preemption:`. With
    /// `clear_nomination` the pod's `status.nominatedNodeName` is cleared.
    Fail { message: String, clear_nomination: bool },
}

/// More important pods are reprieved first: higher priority, then longer running.
fn more_important(a: &PodInfo, b: &PodInfo) -> Ordering {
    b.priority.cmp(&a.priority).then_with(|| a.start_time().cmp(&b.start_time()))
}

/// Upstream's `podTerminatingByPreemption`.
fn terminating_by_preemption(p: &PodInfo) -> bool {
    p.is_terminating()
        && p.pod.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|cs| {
            cs.iter().any(|c| {
                c.type_ == "DisruptionTarget"
                    && c.status == "True"
                    && c.reason.as_deref() == Some("PreemptionByScheduler")
            })
        })
}

/// Splits `pods` (kept in order) into those whose eviction would exceed a matching budget's
/// `disruptionsAllowed` and the rest.
fn split_by_pdb(pods: &[Arc<PodInfo>], pdbs: &[&PodDisruptionBudget]) -> (Vec<Arc<PodInfo>>, Vec<Arc<PodInfo>>) {
    let mut allowed: Vec<i32> =
        pdbs.iter().map(|p| p.status.as_ref().map(|s| s.disruptions_allowed).unwrap_or(0)).collect();
    let (mut violating, mut fine) = (Vec::new(), Vec::new());
    for pod in pods {
        let mut violated = false;
        if !pod.labels().is_empty() {
            for (i, pdb) in pdbs.iter().enumerate() {
                if pdb.metadata.namespace.as_deref() != Some(pod.namespace.as_str()) {
                    continue;
                }
                let sel = pdb.spec.as_ref().and_then(|s| s.selector.as_ref());
                let empty = sel.is_none_or(selectors::is_empty);
                if empty || !selectors::matches(sel, Some(pod.labels())) {
                    continue;
                }
                let already = pdb
                    .status
                    .as_ref()
                    .and_then(|s| s.disrupted_pods.as_ref())
                    .is_some_and(|d| d.contains_key(&pod.name));
                if already {
                    continue;
                }
                allowed[i] -= 1;
                if allowed[i] < 0 {
                    violated = true;
                }
            }
        }
        if violated {
            violating.push(pod.clone());
        } else {
            fine.push(pod.clone());
        }
    }
    (violating, fine)
}

/// The fewest lower-priority pods on `node` whose eviction lets the pod fit.
pub fn select_victims(
    cache: &Cache,
    state: &CycleState,
    node: &NodeInfo,
    pdbs: &[&PodDisruptionBudget],
) -> Result<Candidate, Status> {
    let mut ni = node.clone();
    let mut st = state.clone();
    let mut potential: Vec<Arc<PodInfo>> =
        ni.pods.iter().filter(|p| p.priority < state.pod.priority).cloned().collect();
    if potential.is_empty() {
        return Err(Status::unresolvable(NO_VICTIMS));
    }
    for p in &potential {
        ni.remove_pod(&p.uid);
        st.inter_pod.update(cache, p, &ni, -1);
    }
    run_filters_with_nominated(cache, &st, &ni)?;
    potential.sort_by(|a, b| more_important(a, b));
    let (violating, fine) = split_by_pdb(&potential, pdbs);
    let mut victims = Vec::new();
    let mut pdb_violations = 0;
    let mut reprieve = |p: &Arc<PodInfo>, ni: &mut NodeInfo, st: &mut CycleState| -> bool {
        ni.add_pod(p.clone());
        st.inter_pod.update(cache, p, ni, 1);
        if run_filters_with_nominated(cache, st, ni).is_ok() {
            return true;
        }
        ni.remove_pod(&p.uid);
        st.inter_pod.update(cache, p, ni, -1);
        victims.push(p.clone());
        false
    };
    for p in &violating {
        if !reprieve(p, &mut ni, &mut st) {
            pdb_violations += 1;
        }
    }
    for p in &fine {
        reprieve(p, &mut ni, &mut st);
    }
    if !violating.is_empty() && !fine.is_empty() {
        victims.sort_by(|a, b| more_important(a, b));
    }
    Ok(Candidate { node: node.name.clone(), victims, pdb_violations })
}

/// One of upstream's ordered preferences between candidates; higher is better.
fn criterion(c: &Candidate, i: usize) -> i128 {
    let top = c.victims.first().map(|v| v.priority).unwrap_or(0);
    match i {
        // Fewest disruption budget violations.
        0 => -(c.pdb_violations as i128),
        // Lowest highest-priority victim.
        1 => -i128::from(top),
        // Lowest sum of priorities (shifted to be non-negative).
        2 => -c.victims.iter().map(|v| i128::from(v.priority) + i128::from(i32::MAX) + 1).sum::<i128>(),
        // Fewest victims.
        3 => -(c.victims.len() as i128),
        // Latest start among the earliest-started highest-priority victims.
        _ => c
            .victims
            .iter()
            .filter(|v| v.priority == top)
            .map(|v| v.start_time().as_nanosecond())
            .min()
            .unwrap_or(i128::MIN),
    }
}

/// Upstream's `pickOneNodeForPreemption` over candidates in preference order; remaining ties
/// go to the first.
pub fn pick_candidate(candidates: Vec<Candidate>) -> Option<Candidate> {
    let mut remaining = candidates;
    for i in 0..5 {
        if remaining.len() <= 1 {
            break;
        }
        let best = remaining.iter().map(|c| criterion(c, i)).max()?;
        remaining.retain(|c| criterion(c, i) == best);
    }
    remaining.into_iter().next()
}

/// Runs preemption for `state.pod`, which failed to fit with `fit`.
pub fn preempt(cache: &Cache, state: &CycleState, fit: &FitError) -> Preemption {
    let pod = &state.pod;
    if pod.preempt_never() {
        return Preemption::Fail { message: NOT_ELIGIBLE_NEVER.into(), clear_nomination: false };
    }
    if let Some(nominated) = pod.nominated_node() {
        let unresolvable = fit.statuses.get(nominated).is_some_and(|s| s.code == Code::UnschedulableAndUnresolvable);
        let waiting = cache
            .node(nominated)
            .is_some_and(|n| n.pods.iter().any(|p| p.priority < pod.priority && terminating_by_preemption(p)));
        if !unresolvable && waiting {
            return Preemption::Fail { message: NOT_ELIGIBLE_TERMINATING.into(), clear_nomination: false };
        }
    }
    let pdbs: Vec<&PodDisruptionBudget> = cache.pdbs().collect();
    let mut statuses: Vec<Status> = Vec::new();
    let (mut fine, mut violating) = (Vec::new(), Vec::new());
    for node in cache.nodes() {
        if fit.statuses.get(&node.name).is_none_or(|s| s.code != Code::Unschedulable) {
            continue;
        }
        match select_victims(cache, state, node, &pdbs) {
            Ok(c) if c.victims.is_empty() => statuses.push(Status::unresolvable(NO_VICTIMS)),
            Ok(c) if c.pdb_violations == 0 => fine.push(c),
            Ok(c) => violating.push(c),
            Err(s) => statuses.push(s),
        }
    }
    fine.extend(violating);
    match pick_candidate(fine) {
        Some(candidate) => {
            let clear_nominations =
                cache.nominated_on(&candidate.node).filter(|p| p.priority < pod.priority).cloned().collect();
            Preemption::Nominate { candidate, clear_nominations }
        }
        None => {
            let absent = fit.num_all_nodes.saturating_sub(statuses.len());
            let summary = summarize(fit.num_all_nodes, statuses.iter(), Some((NOT_HELPFUL, absent)));
            Preemption::Fail { message: format!("preemption: {summary}"), clear_nomination: true }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::{find_node, ScheduleError};
    use crate::testing::{node, pod, NodeBuilder, PodBuilder};
    use k8s_openapi::api::policy::v1::{PodDisruptionBudgetSpec, PodDisruptionBudgetStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    use std::collections::BTreeMap;

    fn setup(nodes: Vec<NodeBuilder>, existing: Vec<PodBuilder>) -> Cache {
        let mut c = Cache::default();
        for n in nodes {
            c.set_node(n.build());
        }
        for p in existing {
            let info = c.pod_info(p.build());
            c.set_assigned_pod(info);
        }
        c
    }

    fn run(cache: &Cache, incoming: PodBuilder) -> Preemption {
        let state = CycleState::new(cache, cache.pod_info(incoming.build()));
        let Err(ScheduleError::Fit(fit)) = find_node(cache, &state, |_| 0) else { panic!("pod should not fit") };
        preempt(cache, &state, &fit)
    }

    fn victims(p: &Preemption) -> (String, Vec<String>) {
        match p {
            Preemption::Nominate { candidate, .. } => {
                (candidate.node.clone(), candidate.victims.iter().map(|v| v.name.clone()).collect())
            }
            Preemption::Fail { message, .. } => panic!("no candidate: {message}"),
        }
    }

    fn fail_message(p: &Preemption) -> String {
        match p {
            Preemption::Fail { message, .. } => message.clone(),
            Preemption::Nominate { candidate, .. } => panic!("unexpected candidate {}", candidate.node),
        }
    }

    #[test]
    fn evicts_only_as_many_lower_priority_pods_as_needed() {
        let cache = setup(
            vec![node("a", "4", "8Gi")],
            vec![
                pod("low1").cpu("1").priority(1).node("a").started_at("2024-01-01T00:00:00Z"),
                pod("low2").cpu("1").priority(1).node("a").started_at("2024-01-02T00:00:00Z"),
                pod("mid").cpu("2").priority(50).node("a"),
            ],
        );
        // Needs 1 CPU: evicting one priority-1 pod is enough; the most recently started goes.
        let p = run(&cache, pod("high").cpu("1").priority(100));
        assert_eq!(victims(&p), ("a".to_string(), vec!["low2".to_string()]));
    }

    #[test]
    fn no_lower_priority_pods_means_no_victims() {
        let cache = setup(vec![node("a", "1", "1Gi")], vec![]);
        let p = run(&cache, pod("big").cpu("2"));
        assert_eq!(
            fail_message(&p),
            "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
        );
    }

    #[test]
    fn unresolvable_nodes_are_not_helped_by_preemption() {
        let cache = setup(
            vec![node("a", "4", "4Gi").taint("k", "v", "NoSchedule"), node("b", "1", "1Gi")],
            vec![pod("low").cpu("1").priority(0).node("b")],
        );
        let p = run(&cache, pod("p").cpu("4").priority(10));
        assert_eq!(
            fail_message(&p),
            "preemption: 0/2 nodes are available: 1 Insufficient cpu, 1 Preemption is not helpful for scheduling."
        );
    }

    #[test]
    fn preemption_policy_never_is_not_eligible() {
        let cache = setup(vec![node("a", "1", "1Gi")], vec![pod("low").cpu("1").priority(0).node("a")]);
        let p = run(&cache, pod("p").cpu("1").priority(10).preempt_never());
        assert_eq!(fail_message(&p), NOT_ELIGIBLE_NEVER);
    }

    #[test]
    fn waits_while_victims_on_the_nominated_node_terminate() {
        let mut cache = setup(vec![node("a", "1", "1Gi")], vec![]);
        let mut victim = pod("low").cpu("1").priority(0).node("a").terminating().build();
        victim.status.get_or_insert_with(Default::default).conditions =
            Some(vec![k8s_openapi::api::core::v1::PodCondition {
                type_: "DisruptionTarget".into(),
                status: "True".into(),
                reason: Some("PreemptionByScheduler".into()),
                ..Default::default()
            }]);
        let info = cache.pod_info(victim);
        cache.set_assigned_pod(info);
        let p = run(&cache, pod("p").cpu("1").priority(10).nominated("a"));
        assert_eq!(fail_message(&p), NOT_ELIGIBLE_TERMINATING);
    }

    #[test]
    fn prefers_nodes_whose_victims_have_lower_priority_then_fewer_victims() {
        let cache = setup(
            vec![node("a", "2", "4Gi"), node("b", "2", "4Gi"), node("c", "2", "4Gi")],
            vec![
                pod("a1").cpu("2").priority(5).node("a"),
                pod("b1").cpu("1").priority(1).node("b"),
                pod("b2").cpu("1").priority(1).node("b"),
                pod("c1").cpu("2").priority(1).node("c"),
            ],
        );
        let p = run(&cache, pod("p").cpu("2").priority(10));
        assert_eq!(victims(&p), ("c".to_string(), vec!["c1".to_string()]));
    }

    #[test]
    fn avoids_violating_disruption_budgets() {
        let mut cache = setup(
            vec![node("a", "1", "4Gi"), node("b", "1", "4Gi")],
            vec![
                pod("guarded").cpu("1").priority(1).label("app", "db").node("a"),
                pod("free").cpu("1").priority(5).node("b"),
            ],
        );
        let mut pdb = PodDisruptionBudget {
            spec: Some(PodDisruptionBudgetSpec {
                selector: Some(LabelSelector {
                    match_labels: Some(BTreeMap::from([("app".to_string(), "db".to_string())])),
                    match_expressions: None,
                }),
                ..Default::default()
            }),
            status: Some(PodDisruptionBudgetStatus { disruptions_allowed: 0, ..Default::default() }),
            ..Default::default()
        };
        pdb.metadata.name = Some("db".into());
        pdb.metadata.namespace = Some("default".into());
        cache.set_pdb(pdb);
        // Node a's victim has the lower priority, but evicting it would violate the budget.
        let p = run(&cache, pod("p").cpu("1").priority(10));
        assert_eq!(victims(&p), ("b".to_string(), vec!["free".to_string()]));
    }

    #[test]
    fn lower_priority_nominations_on_the_chosen_node_are_cleared() {
        let mut cache = setup(vec![node("a", "1", "1Gi")], vec![pod("low").cpu("1").priority(0).node("a")]);
        let waiting = cache.pod_info(pod("waiting").cpu("1").priority(5).build());
        cache.set_nominated(&waiting, Some("a"));
        match run(&cache, pod("p").cpu("1").priority(10)) {
            Preemption::Nominate { clear_nominations, .. } => {
                assert_eq!(clear_nominations.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), vec!["waiting"]);
            }
            other => panic!("expected a nomination, got {other:?}"),
        }
    }
}
