//! Pod predicates and orderings shared by the workload controllers (`pkg/api/v1/pod` and
//! `pkg/controller/controller_utils.go` upstream): active/terminating, ready/available,
//! the deletion preference of ReplicaSets (`ActivePodsWithRanks`) and Jobs (`ActivePods`),
//! and pods stamped out of a template.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

fn phase(pod: &Pod) -> &str {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or_default()
}

/// Pod phase, `""` when unset.
pub fn pod_phase(pod: &Pod) -> &str {
    phase(pod)
}

/// Neither finished nor being deleted (`controller.IsPodActive`).
pub fn is_active(pod: &Pod) -> bool {
    !matches!(phase(pod), "Succeeded" | "Failed") && pod.metadata.deletion_timestamp.is_none()
}

/// Being deleted but not finished (`controller.IsPodTerminating`).
pub fn is_terminating(pod: &Pod) -> bool {
    !matches!(phase(pod), "Succeeded" | "Failed") && pod.metadata.deletion_timestamp.is_some()
}

fn ready_condition(pod: &Pod) -> Option<&k8s_openapi::api::core::v1::PodCondition> {
    pod.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "Ready")
}

/// The `Ready` condition is `True`.
pub fn is_ready(pod: &Pod) -> bool {
    ready_condition(pod).is_some_and(|c| c.status == "True")
}

/// When the pod last became ready.
pub fn ready_since(pod: &Pod) -> Option<Timestamp> {
    ready_condition(pod).filter(|c| c.status == "True").and_then(|c| c.last_transition_time.as_ref()).map(|t| t.0)
}

/// Ready for at least `min_ready_seconds` (`podutil.IsPodAvailable`).
pub fn is_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    if !is_ready(pod) {
        return false;
    }
    if min_ready_seconds <= 0 {
        return true;
    }
    ready_since(pod).is_some_and(|t| super::time::add_secs(t, i64::from(min_ready_seconds)) < now)
}

/// For a ready pod that is not yet available: how long until it is (to requeue the owner).
pub fn until_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> Option<Duration> {
    if min_ready_seconds <= 0 || !is_ready(pod) || is_available(pod, min_ready_seconds, now) {
        return None;
    }
    let since = ready_since(pod)?;
    let at = super::time::add_secs(since, i64::from(min_ready_seconds));
    Some(super::time::to_std(super::time::between(now, at)) + Duration::from_secs(1))
}

/// The highest restart count of the pod's containers.
pub fn max_restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .map(|c| c.restart_count)
        .max()
        .unwrap_or(0)
}

fn phase_ordinal(pod: &Pod) -> u8 {
    match phase(pod) {
        "Pending" => 0,
        "Unknown" => 1,
        "Running" => 2,
        _ => 0,
    }
}

fn node_name(pod: &Pod) -> &str {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or_default()
}

/// `controller.kubernetes.io/pod-deletion-cost`, 0 when absent or invalid.
pub fn deletion_cost(pod: &Pod) -> i32 {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("controller.kubernetes.io/pod-deletion-cost"))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// `afterOrZero`: a missing time sorts first, then later times before earlier ones.
fn after_or_zero(a: Option<Timestamp>, b: Option<Timestamp>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(a), Some(b)) => b.cmp(&a),
    }
}

/// `logarithmicRankDiff` bucket: floor(log2(nanoseconds since t)), -1 when not in the past.
fn log_rank(t: Timestamp, now: Timestamp) -> i64 {
    let d = now.duration_since(t).as_nanos();
    if d <= 0 {
        -1
    } else {
        i64::from(127 - d.leading_zeros())
    }
}

fn log_scaled(a: Option<Timestamp>, b: Option<Timestamp>, now: Timestamp, ua: &str, ub: &str) -> Ordering {
    match (a, b) {
        (Some(ta), Some(tb)) => match log_rank(ta, now).cmp(&log_rank(tb, now)) {
            Ordering::Equal => ua.cmp(ub),
            o => o,
        },
        _ => after_or_zero(a, b),
    }
}

/// `ActivePodsWithRanks.Less` with `LogarithmicScaleDown` and `PodDeletionCost` on: the order
/// in which a ReplicaSet prefers to delete pods (first = deleted first). `rank` is the number
/// of related active pods on the same node.
pub fn deletion_order(a: &Pod, rank_a: usize, b: &Pod, rank_b: usize, now: Timestamp) -> Ordering {
    let (na, nb) = (node_name(a), node_name(b));
    if na != nb && (na.is_empty() || nb.is_empty()) {
        return if na.is_empty() { Ordering::Less } else { Ordering::Greater };
    }
    let (pa, pb) = (phase_ordinal(a), phase_ordinal(b));
    if pa != pb {
        return pa.cmp(&pb);
    }
    let (ra, rb) = (is_ready(a), is_ready(b));
    if ra != rb {
        return if ra { Ordering::Greater } else { Ordering::Less };
    }
    let (ca, cb) = (deletion_cost(a), deletion_cost(b));
    if ca != cb {
        return ca.cmp(&cb);
    }
    if rank_a != rank_b {
        return rank_b.cmp(&rank_a);
    }
    let uid = |p: &Pod| p.metadata.uid.clone().unwrap_or_default();
    if ra && rb {
        let (ta, tb) = (ready_since(a), ready_since(b));
        if ta != tb {
            return log_scaled(ta, tb, now, &uid(a), &uid(b));
        }
    }
    let (xa, xb) = (max_restarts(a), max_restarts(b));
    if xa != xb {
        return xb.cmp(&xa);
    }
    let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
    let (ta, tb) = (created(a), created(b));
    if ta != tb {
        return log_scaled(ta, tb, now, &uid(a), &uid(b));
    }
    Ordering::Equal
}

/// `controller.ActivePods.Less`: the order in which a Job removes surplus pods.
pub fn active_order(a: &Pod, b: &Pod) -> Ordering {
    let (na, nb) = (node_name(a), node_name(b));
    if na != nb && (na.is_empty() || nb.is_empty()) {
        return if na.is_empty() { Ordering::Less } else { Ordering::Greater };
    }
    let (pa, pb) = (phase_ordinal(a), phase_ordinal(b));
    if pa != pb {
        return pa.cmp(&pb);
    }
    let (ra, rb) = (is_ready(a), is_ready(b));
    if ra != rb {
        return if ra { Ordering::Greater } else { Ordering::Less };
    }
    if ra && rb {
        let (ta, tb) = (ready_since(a), ready_since(b));
        if ta != tb {
            return after_or_zero(ta, tb);
        }
    }
    let (xa, xb) = (max_restarts(a), max_restarts(b));
    if xa != xb {
        return xb.cmp(&xa);
    }
    let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
    after_or_zero(created(a), created(b))
}

/// For each pod in `pods`, how many active pods of `related` run on its node.
pub fn colocation_ranks(pods: &[&Pod], related: &[&Pod]) -> Vec<usize> {
    let mut on_node: HashMap<&str, usize> = HashMap::new();
    for p in related.iter().filter(|p| is_active(p)) {
        *on_node.entry(node_name(p)).or_default() += 1;
    }
    pods.iter().map(|p| on_node.get(node_name(p)).copied().unwrap_or(0)).collect()
}

/// `GetPodFromTemplate`: a pod with the template's labels, annotations, finalizers and spec,
/// named `name` or generated from `generate_name`, controlled by `owner`.
pub fn from_template(
    template: &PodTemplateSpec,
    namespace: &str,
    name: Option<String>,
    generate_name: Option<String>,
    owner: OwnerReference,
) -> Pod {
    let tmeta = template.metadata.clone().unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            name,
            generate_name,
            namespace: Some(namespace.to_string()),
            labels: tmeta.labels.filter(|l| !l.is_empty()).or_else(|| Some(BTreeMap::new())),
            annotations: tmeta.annotations.filter(|a| !a.is_empty()),
            finalizers: tmeta.finalizers.filter(|f| !f.is_empty()),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        spec: template.spec.clone(),
        status: None,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ContainerStatus, PodCondition, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    pub(crate) fn ts(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    /// A test pod: `ready_at` sets a Ready=True condition from that time.
    pub(crate) fn pod(name: &str, node: &str, phase: &str, ready_at: Option<&str>, created: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: Some(format!("uid-{name}")),
                creation_timestamp: Some(Time(ts(created))),
                ..Default::default()
            },
            spec: Some(PodSpec { node_name: (!node.is_empty()).then(|| node.to_string()), ..Default::default() }),
            status: Some(PodStatus {
                phase: Some(phase.into()),
                conditions: ready_at.map(|t| {
                    vec![PodCondition {
                        type_: "Ready".into(),
                        status: "True".into(),
                        last_transition_time: Some(Time(ts(t))),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
        }
    }

    const NOW: &str = "2024-05-01T12:00:00Z";

    #[test]
    fn availability_waits_for_min_ready_seconds() {
        let p = pod("a", "n", "Running", Some("2024-05-01T11:59:50Z"), "2024-05-01T11:00:00Z");
        assert!(is_available(&p, 0, ts(NOW)));
        assert!(is_available(&p, 5, ts(NOW)));
        assert!(!is_available(&p, 10, ts(NOW)));
        assert_eq!(until_available(&p, 30, ts(NOW)), Some(Duration::from_secs(21)));
        assert!(!is_available(&pod("b", "n", "Running", None, NOW), 0, ts(NOW)));
    }

    #[test]
    fn terminating_and_finished_pods_are_not_active() {
        let mut p = pod("a", "n", "Running", None, NOW);
        assert!(is_active(&p) && !is_terminating(&p));
        p.metadata.deletion_timestamp = Some(Time(ts(NOW)));
        assert!(!is_active(&p) && is_terminating(&p));
        let done = pod("b", "n", "Succeeded", None, NOW);
        assert!(!is_active(&done) && !is_terminating(&done));
    }

    fn sorted(mut pods: Vec<Pod>) -> Vec<String> {
        let now = ts(NOW);
        pods.sort_by(|a, b| deletion_order(a, 1, b, 1, now));
        pods.into_iter().map(|p| p.metadata.name.unwrap_or_default()).collect()
    }

    #[test]
    fn replica_sets_delete_unscheduled_then_pending_then_not_ready_first() {
        let order = sorted(vec![
            pod("ready", "n", "Running", Some("2024-05-01T10:00:00Z"), "2024-05-01T09:00:00Z"),
            pod("notready", "n", "Running", None, "2024-05-01T09:00:00Z"),
            pod("pending", "n", "Pending", None, "2024-05-01T09:00:00Z"),
            pod("unscheduled", "", "Pending", None, "2024-05-01T09:00:00Z"),
        ]);
        assert_eq!(order, ["unscheduled", "pending", "notready", "ready"]);
    }

    #[test]
    fn replica_sets_delete_recently_ready_and_newer_pods_first() {
        let order = sorted(vec![
            pod("old", "n", "Running", Some("2024-05-01T01:00:00Z"), "2024-05-01T00:00:00Z"),
            pod("young", "n", "Running", Some("2024-05-01T11:59:00Z"), "2024-05-01T11:58:00Z"),
        ]);
        assert_eq!(order, ["young", "old"]);
        let order = sorted(vec![
            pod("older", "n", "Running", None, "2024-04-01T00:00:00Z"),
            pod("newer", "n", "Running", None, "2024-05-01T11:00:00Z"),
        ]);
        assert_eq!(order, ["newer", "older"]);
    }

    #[test]
    fn replica_sets_delete_pods_with_more_restarts_and_lower_cost_first() {
        let mut flappy = pod("flappy", "n", "Running", None, "2024-05-01T00:00:00Z");
        if let Some(s) = flappy.status.as_mut() {
            s.container_statuses = Some(vec![ContainerStatus { restart_count: 5, ..Default::default() }]);
        }
        let calm = pod("calm", "n", "Running", None, "2024-05-01T00:00:00Z");
        assert_eq!(sorted(vec![calm.clone(), flappy]), ["flappy", "calm"]);
        let mut precious = pod("precious", "n", "Running", None, "2024-05-01T11:00:00Z");
        precious.metadata.annotations =
            Some([("controller.kubernetes.io/pod-deletion-cost".to_string(), "100".to_string())].into());
        assert_eq!(sorted(vec![precious, calm]), ["calm", "precious"]);
    }

    #[test]
    fn doubled_up_pods_are_deleted_first() {
        let a = pod("a", "n1", "Running", None, "2024-05-01T00:00:00Z");
        let b = pod("b", "n2", "Running", None, "2024-05-01T00:00:00Z");
        let c = pod("c", "n2", "Running", None, "2024-05-01T00:00:00Z");
        let ranks = colocation_ranks(&[&a, &b], &[&a, &b, &c]);
        assert_eq!(ranks, [1, 2]);
        assert_eq!(deletion_order(&b, ranks[1], &a, ranks[0], ts(NOW)), Ordering::Less);
    }

    #[test]
    fn jobs_remove_not_ready_then_newest_pods_first() {
        let ready = pod("ready", "n", "Running", Some("2024-05-01T10:00:00Z"), "2024-05-01T09:00:00Z");
        let newer = pod("newer", "n", "Running", None, "2024-05-01T11:00:00Z");
        let older = pod("older", "n", "Running", None, "2024-05-01T09:00:00Z");
        let mut v = [&ready, &older, &newer];
        v.sort_by(|a, b| active_order(a, b));
        let names: Vec<_> = v.iter().map(|p| p.metadata.name.as_deref().unwrap_or_default()).collect();
        assert_eq!(names, ["newer", "older", "ready"]);
    }

    #[test]
    fn pods_from_templates_carry_labels_owner_and_generate_name() {
        let t = PodTemplateSpec {
            metadata: Some(ObjectMeta { labels: Some([("app".into(), "web".into())].into()), ..Default::default() }),
            spec: Some(PodSpec::default()),
        };
        let owner = OwnerReference { uid: "u".into(), controller: Some(true), ..Default::default() };
        let p = from_template(&t, "ns", None, Some("web-abc-".into()), owner);
        assert_eq!(p.metadata.generate_name.as_deref(), Some("web-abc-"));
        assert_eq!(p.metadata.labels.as_ref().and_then(|l| l.get("app")).map(String::as_str), Some("web"));
        assert_eq!(p.metadata.owner_references.as_ref().map(Vec::len), Some(1));
    }
}
