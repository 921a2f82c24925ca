//! PodDisruptionBudget status as pure functions (upstream `disruption` controller): expected
//! pods (the owning controllers' scale when a percentage or maxUnavailable needs it, else the
//! selected pods), desired and current healthy pods, disruptions allowed, the pods the eviction
//! API recently disrupted, and the `DisruptionAllowed` condition.

use crate::core::pod;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::{BTreeMap, HashMap};

/// How long a pod the eviction API disrupted may take to get its deletionTimestamp.
pub const DELETION_TIMEOUT: SignedDuration = SignedDuration::from_secs(120);
pub const CONDITION_DISRUPTION_ALLOWED: &str = "DisruptionAllowed";
pub const REASON_SUFFICIENT_PODS: &str = "SufficientPods";
pub const REASON_INSUFFICIENT_PODS: &str = "InsufficientPods";
pub const REASON_SYNC_FAILED: &str = "SyncFailed";

/// `value` of `total`: an integer as is, a percentage rounded up.
pub fn scaled_value(value: &IntOrString, total: i32) -> Result<i32, String> {
    match value {
        IntOrString::Int(n) => Ok(*n),
        IntOrString::String(s) => {
            let pct: i64 = s
                .strip_suffix('%')
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| "invalid value for IntOrString: invalid type: string is not a percentage".to_string())?;
            Ok(((pct * total as i64 + 99) / 100) as i32)
        }
    }
}

/// Whether the budget needs the owning controllers' scale.
pub fn needs_scale(pdb: &PodDisruptionBudget) -> bool {
    let spec = pdb.spec.as_ref();
    spec.and_then(|s| s.max_unavailable.as_ref()).is_some()
        || matches!(spec.and_then(|s| s.min_available.as_ref()), Some(IntOrString::String(_)))
}

/// The controller reference of a pod.
pub fn controller_of(p: &Pod) -> Option<&OwnerReference> {
    p.metadata.owner_references.iter().flatten().find(|r| r.controller == Some(true))
}

/// A controller's scale, as found: `Ok(Some((uid, replicas)))`, `Ok(None)` if no known
/// controller matches, `Err` if looking failed.
pub type ScaleLookup = HashMap<String, Result<Option<(String, i32)>, String>>;

/// (expected pods, desired healthy pods, unmanaged pod names).
pub fn expected_pod_count(
    pdb: &PodDisruptionBudget,
    pods: &[&Pod],
    scales: &ScaleLookup,
) -> Result<(i32, i32, Vec<String>), String> {
    let spec = pdb.spec.as_ref();
    let expected_scale = || -> Result<(i32, Vec<String>), String> {
        let mut by_controller: BTreeMap<String, i32> = BTreeMap::new();
        let mut unmanaged = Vec::new();
        for p in pods {
            let Some(r) = controller_of(p) else {
                unmanaged.push(p.metadata.name.clone().unwrap_or_default());
                continue;
            };
            if by_controller.contains_key(&r.uid) {
                continue;
            }
            match scales.get(&r.uid) {
                Some(Ok(Some((uid, n)))) => {
                    by_controller.insert(uid.clone(), *n);
                }
                Some(Err(e)) => return Err(e.clone()),
                Some(Ok(None)) | None => {
                    return Err(format!("found no controllers for pod {:?}", p.metadata.name.as_deref().unwrap_or("")))
                }
            }
        }
        Ok((by_controller.values().sum(), unmanaged))
    };
    if let Some(max) = spec.and_then(|s| s.max_unavailable.as_ref()) {
        let (expected, unmanaged) = expected_scale()?;
        let max = scaled_value(max, expected)?;
        return Ok((expected, (expected - max).max(0), unmanaged));
    }
    match spec.and_then(|s| s.min_available.as_ref()) {
        Some(IntOrString::Int(n)) => Ok((pods.len() as i32, *n, Vec::new())),
        Some(min @ IntOrString::String(_)) => {
            let (expected, unmanaged) = expected_scale()?;
            Ok((expected, scaled_value(min, expected)?, unmanaged))
        }
        None => Ok((0, 0, Vec::new())),
    }
}

/// The pods the eviction API disrupted that may still be on their way out, and when the
/// earliest of those times out (to check again then).
pub fn disrupted_pods(
    pdb: &PodDisruptionBudget,
    pods: &[&Pod],
    now: Timestamp,
) -> (BTreeMap<String, Time>, Option<Timestamp>) {
    let recorded = pdb.status.as_ref().and_then(|s| s.disrupted_pods.as_ref());
    let mut out = BTreeMap::new();
    let mut recheck: Option<Timestamp> = None;
    for p in pods {
        if p.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let name = p.metadata.name.clone().unwrap_or_default();
        let Some(at) = recorded.and_then(|r| r.get(&name)) else { continue };
        let expires = at.0 + DELETION_TIMEOUT;
        if expires < now {
            tracing::info!(pod = %name, "pod was expected to be deleted by now but was not");
            continue;
        }
        recheck = Some(recheck.map_or(expires, |r| r.min(expires)));
        out.insert(name, at.clone());
    }
    (out, recheck)
}

/// Ready pods, not being deleted, not recently disrupted.
pub fn count_healthy(pods: &[&Pod], disrupted: &BTreeMap<String, Time>, now: Timestamp) -> i32 {
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            let name = p.metadata.name.as_deref().unwrap_or("");
            disrupted.get(name).is_none_or(|t| t.0 + DELETION_TIMEOUT <= now)
        })
        .filter(|p| pod::is_ready(p))
        .count() as i32
}

/// Upstream's `meta.SetStatusCondition`: the transition time moves only when the status does.
pub fn set_condition(conditions: &mut Vec<Condition>, new: Condition) {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        None => conditions.push(new),
        Some(c) => {
            if c.status != new.status {
                c.status = new.status;
                c.last_transition_time = new.last_transition_time;
            }
            c.reason = new.reason;
            c.message = new.message;
            c.observed_generation = new.observed_generation;
        }
    }
}

fn disruption_condition(allowed: bool, observed_generation: Option<i64>, now: Timestamp) -> Condition {
    Condition {
        type_: CONDITION_DISRUPTION_ALLOWED.into(),
        status: if allowed { "True" } else { "False" }.into(),
        reason: if allowed { REASON_SUFFICIENT_PODS } else { REASON_INSUFFICIENT_PODS }.into(),
        message: String::new(),
        observed_generation,
        last_transition_time: Time(now),
    }
}

fn conditions_up_to_date(pdb: &PodDisruptionBudget) -> bool {
    let Some(status) = pdb.status.as_ref() else { return false };
    let Some(c) = status.conditions.iter().flatten().find(|c| c.type_ == CONDITION_DISRUPTION_ALLOWED) else {
        return false;
    };
    if status.observed_generation != pdb.metadata.generation {
        return false;
    }
    if status.disruptions_allowed > 0 {
        c.status == "True" && c.reason == REASON_SUFFICIENT_PODS
    } else {
        c.status == "False" && c.reason == REASON_INSUFFICIENT_PODS
    }
}

/// The status to write, or `None` when the current one is already right.
pub fn new_status(
    pdb: &PodDisruptionBudget,
    current_healthy: i32,
    desired_healthy: i32,
    expected: i32,
    disrupted: BTreeMap<String, Time>,
    now: Timestamp,
) -> Option<PodDisruptionBudgetStatus> {
    // Budgets matching no pods yet stay safe until their first pods are counted.
    let allowed = if expected <= 0 { 0 } else { (current_healthy - desired_healthy).max(0) };
    let old = pdb.status.clone().unwrap_or_default();
    let same_disrupted = old.disrupted_pods.clone().unwrap_or_default() == disrupted;
    if old.current_healthy == current_healthy
        && old.desired_healthy == desired_healthy
        && old.expected_pods == expected
        && old.disruptions_allowed == allowed
        && same_disrupted
        && old.observed_generation == pdb.metadata.generation
        && conditions_up_to_date(pdb)
    {
        return None;
    }
    let mut conditions = old.conditions.clone().unwrap_or_default();
    set_condition(&mut conditions, disruption_condition(allowed > 0, pdb.metadata.generation, now));
    Some(PodDisruptionBudgetStatus {
        current_healthy,
        desired_healthy,
        expected_pods: expected,
        disruptions_allowed: allowed,
        disrupted_pods: Some(disrupted).filter(|d| !d.is_empty()),
        observed_generation: pdb.metadata.generation,
        conditions: Some(conditions),
    })
}

/// The status after a failed sync: no disruptions, condition `SyncFailed` with the error.
pub fn fail_safe(pdb: &PodDisruptionBudget, message: &str, now: Timestamp) -> PodDisruptionBudgetStatus {
    let mut status = pdb.status.clone().unwrap_or_default();
    status.disruptions_allowed = 0;
    let mut conditions = status.conditions.take().unwrap_or_default();
    let observed = status.observed_generation;
    set_condition(
        &mut conditions,
        Condition {
            type_: CONDITION_DISRUPTION_ALLOWED.into(),
            status: "False".into(),
            reason: REASON_SYNC_FAILED.into(),
            message: message.into(),
            observed_generation: observed,
            last_transition_time: Time(now),
        },
    );
    status.conditions = Some(conditions);
    status
}

/// A pod whose `DisruptionTarget` condition (set by the eviction API) went stale: the pod was
/// not deleted within the timeout. Returns how long until it is stale (zero: now), or `None`
/// if the pod has no such condition to clean up.
pub fn stale_disruption_in(p: &Pod, now: Timestamp) -> Option<SignedDuration> {
    if p.metadata.deletion_timestamp.is_some() || pod::is_terminal(p) {
        return None;
    }
    let c = p.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "DisruptionTarget")?;
    if c.status != "True" || c.reason.as_deref() == Some("TerminationByKubelet") {
        return None;
    }
    let since = c.last_transition_time.as_ref().map(|t| t.0).unwrap_or(now);
    Some((since + DELETION_TIMEOUT).duration_since(now).max(SignedDuration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
    use k8s_openapi::api::policy::v1::PodDisruptionBudgetSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn ts(s: i64) -> Timestamp {
        Timestamp::from_second(1_000_000 + s).expect("ts")
    }

    fn pod(name: &str, ready: bool, owner: Option<&str>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                owner_references: owner.map(|uid| {
                    vec![OwnerReference {
                        api_version: "apps/v1".into(),
                        kind: "ReplicaSet".into(),
                        name: "rs".into(),
                        uid: uid.into(),
                        controller: Some(true),
                        block_owner_deletion: Some(true),
                    }]
                }),
                ..Default::default()
            },
            status: Some(PodStatus {
                phase: Some("Running".into()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn pdb(min: Option<IntOrString>, max: Option<IntOrString>) -> PodDisruptionBudget {
        PodDisruptionBudget {
            metadata: ObjectMeta { name: Some("b".into()), generation: Some(2), ..Default::default() },
            spec: Some(PodDisruptionBudgetSpec { min_available: min, max_unavailable: max, ..Default::default() }),
            status: None,
        }
    }

    #[test]
    fn percentages_round_up_and_reject_non_percent_strings() {
        assert_eq!(scaled_value(&IntOrString::String("50%".into()), 3), Ok(2));
        assert_eq!(scaled_value(&IntOrString::String("10%".into()), 10), Ok(1));
        assert_eq!(scaled_value(&IntOrString::Int(4), 10), Ok(4));
        assert!(scaled_value(&IntOrString::String("half".into()), 10).is_err());
    }

    #[test]
    fn an_integer_min_available_counts_the_selected_pods() {
        let pods = [pod("a", true, None), pod("b", true, None), pod("c", false, None)];
        let refs: Vec<&Pod> = pods.iter().collect();
        let b = pdb(Some(IntOrString::Int(2)), None);
        assert!(!needs_scale(&b));
        assert_eq!(expected_pod_count(&b, &refs, &ScaleLookup::new()), Ok((3, 2, vec![])));
        let healthy = count_healthy(&refs, &BTreeMap::new(), ts(0));
        assert_eq!(healthy, 2);
        let status = new_status(&b, healthy, 2, 3, BTreeMap::new(), ts(0)).expect("status");
        assert_eq!(status.disruptions_allowed, 0);
        let c = &status.conditions.as_ref().expect("conditions")[0];
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", REASON_INSUFFICIENT_PODS));
        assert_eq!(status.observed_generation, Some(2));
    }

    #[test]
    fn max_unavailable_uses_the_controller_scale() {
        let pods = [pod("a", true, Some("rs1")), pod("b", true, Some("rs1"))];
        let refs: Vec<&Pod> = pods.iter().collect();
        let scales = ScaleLookup::from([("rs1".to_string(), Ok(Some(("d1".to_string(), 3))))]);
        let b = pdb(None, Some(IntOrString::String("34%".into())));
        assert_eq!(expected_pod_count(&b, &refs, &scales), Ok((3, 1, vec![])));
        let status = new_status(&b, 2, 1, 3, BTreeMap::new(), ts(0)).expect("status");
        assert_eq!(status.disruptions_allowed, 1);
        assert_eq!(status.conditions.as_ref().map(|c| c[0].reason.clone()), Some(REASON_SUFFICIENT_PODS.to_string()));
    }

    #[test]
    fn a_pod_without_a_known_controller_fails_a_percentage_budget() {
        let pods = [pod("a", true, Some("gone"))];
        let refs: Vec<&Pod> = pods.iter().collect();
        let b = pdb(Some(IntOrString::String("50%".into())), None);
        let scales = ScaleLookup::from([("gone".to_string(), Ok(None))]);
        assert_eq!(expected_pod_count(&b, &refs, &scales), Err("found no controllers for pod \"a\"".to_string()));
        let unmanaged = [pod("u", true, None)];
        let refs: Vec<&Pod> = unmanaged.iter().collect();
        assert_eq!(expected_pod_count(&b, &refs, &ScaleLookup::new()), Ok((0, 0, vec!["u".to_string()])));
    }

    #[test]
    fn recently_disrupted_pods_are_not_healthy_until_the_timeout() {
        let pods = [pod("a", true, None), pod("b", true, None)];
        let refs: Vec<&Pod> = pods.iter().collect();
        let mut b = pdb(Some(IntOrString::Int(1)), None);
        b.status = Some(PodDisruptionBudgetStatus {
            disrupted_pods: Some(BTreeMap::from([("a".to_string(), Time(ts(0))), ("gone".to_string(), Time(ts(0)))])),
            ..Default::default()
        });
        let (disrupted, recheck) = disrupted_pods(&b, &refs, ts(10));
        assert_eq!(disrupted.keys().cloned().collect::<Vec<_>>(), vec!["a".to_string()]);
        assert_eq!(recheck, Some(ts(120)));
        assert_eq!(count_healthy(&refs, &disrupted, ts(10)), 1);
        let (expired, _) = disrupted_pods(&b, &refs, ts(121));
        assert!(expired.is_empty());
    }

    #[test]
    fn an_up_to_date_status_needs_no_write_and_a_budget_without_pods_allows_nothing() {
        let mut b = pdb(Some(IntOrString::Int(0)), None);
        let status = new_status(&b, 0, 0, 0, BTreeMap::new(), ts(0)).expect("first");
        assert_eq!(status.disruptions_allowed, 0);
        b.status = Some(status);
        assert!(new_status(&b, 0, 0, 0, BTreeMap::new(), ts(5)).is_none());
    }

    #[test]
    fn a_failed_sync_allows_nothing_and_says_why() {
        let b = pdb(Some(IntOrString::String("50%".into())), None);
        let s = fail_safe(&b, "found no controllers for pod \"a\"", ts(0));
        assert_eq!(s.disruptions_allowed, 0);
        let c = &s.conditions.as_ref().expect("conditions")[0];
        assert_eq!((c.reason.as_str(), c.message.as_str()), (REASON_SYNC_FAILED, "found no controllers for pod \"a\""));
    }

    #[test]
    fn a_disruption_target_condition_goes_stale_after_the_timeout() {
        let mut p = pod("a", true, None);
        p.status.as_mut().and_then(|s| s.conditions.as_mut()).expect("conditions").push(PodCondition {
            type_: "DisruptionTarget".into(),
            status: "True".into(),
            reason: Some("EvictionByEvictionAPI".into()),
            last_transition_time: Some(Time(ts(0))),
            ..Default::default()
        });
        assert_eq!(stale_disruption_in(&p, ts(20)), Some(SignedDuration::from_secs(100)));
        assert_eq!(stale_disruption_in(&p, ts(500)), Some(SignedDuration::ZERO));
        p.metadata.deletion_timestamp = Some(Time(ts(1)));
        assert_eq!(stale_disruption_in(&p, ts(500)), None);
    }
}
