//! Pure helpers of the deployment controller (upstream `pkg/controller/deployment/util`):
//! revisions and the annotations copied onto ReplicaSets, maxSurge/maxUnavailable resolution,
//! finding the new and old ReplicaSets, proportional scaling, replica counters, and the
//! `Progressing`/`Available` condition arithmetic.

use crate::workloads::time;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::cmp::Ordering;
use std::collections::BTreeMap;

pub const REVISION: &str = "deployment.kubernetes.io/revision";
pub const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
pub const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
pub const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
const DEPRECATED_ROLLBACK_TO: &str = "deprecated.deployment.rollback.to";
/// Longest `revision-history` annotation kept.
pub const MAX_REV_HISTORY_CHARS: usize = 2000;

pub const REASON_RS_UPDATED: &str = "ReplicaSetUpdated";
pub const REASON_FAILED_RS_CREATE: &str = "ReplicaSetCreateError";
pub const REASON_NEW_RS_CREATED: &str = "NewReplicaSetCreated";
pub const REASON_FOUND_NEW_RS: &str = "FoundNewReplicaSet";
pub const REASON_NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
pub const REASON_TIMED_OUT: &str = "ProgressDeadlineExceeded";
pub const REASON_PAUSED: &str = "DeploymentPaused";
pub const REASON_RESUMED: &str = "DeploymentResumed";
pub const REASON_MIN_AVAILABLE: &str = "MinimumReplicasAvailable";
pub const REASON_MIN_UNAVAILABLE: &str = "MinimumReplicasUnavailable";

/// `spec.replicas` (defaulted to 1).
pub fn d_replicas(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// A ReplicaSet's `spec.replicas` (defaulted to 1).
pub fn rs_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// Sets a ReplicaSet's `spec.replicas`.
pub fn set_rs_replicas(rs: &mut ReplicaSet, n: i32) {
    rs.spec.get_or_insert_with(Default::default).replicas = Some(n);
}

fn rs_status(rs: &ReplicaSet) -> k8s_openapi::api::apps::v1::ReplicaSetStatus {
    rs.status.clone().unwrap_or_default()
}

fn annotations(rs: &ReplicaSet) -> Option<&BTreeMap<String, String>> {
    rs.metadata.annotations.as_ref()
}

/// The revision annotation; `Ok(0)` when absent, `Err` when unparsable.
pub fn revision(rs: &ReplicaSet) -> Result<i64, std::num::ParseIntError> {
    match annotations(rs).and_then(|a| a.get(REVISION)) {
        None => Ok(0),
        Some(v) => v.parse(),
    }
}

/// The highest revision among `rss` (unparsable ones skipped).
pub fn max_revision<'a>(rss: impl IntoIterator<Item = &'a ReplicaSet>) -> i64 {
    rss.into_iter().filter_map(|rs| revision(rs).ok()).max().unwrap_or(0).max(0)
}

fn skip_copy_annotation(key: &str) -> bool {
    matches!(key, LAST_APPLIED | REVISION | REVISION_HISTORY | DESIRED_REPLICAS | MAX_REPLICAS | DEPRECATED_ROLLBACK_TO)
}

fn copy_deployment_annotations(d: &Deployment, rs: &mut ReplicaSet) -> bool {
    let mut changed = false;
    let target = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
    for (k, v) in d.metadata.annotations.iter().flatten() {
        if skip_copy_annotation(k) || target.get(k) == Some(v) {
            continue;
        }
        target.insert(k.clone(), v.clone());
        changed = true;
    }
    changed
}

/// `SetReplicasAnnotations`: desired and max replicas; whether anything changed.
pub fn set_replicas_annotations(rs: &mut ReplicaSet, desired: i32, max: i32) -> bool {
    let a = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
    let mut changed = false;
    for (k, v) in [(DESIRED_REPLICAS, desired), (MAX_REPLICAS, max)] {
        let v = v.to_string();
        if a.get(k) != Some(&v) {
            a.insert(k.to_string(), v);
            changed = true;
        }
    }
    changed
}

/// `ReplicasAnnotationsNeedUpdate`.
pub fn replicas_annotations_need_update(rs: &ReplicaSet, desired: i32, max: i32) -> bool {
    let a = annotations(rs);
    a.and_then(|a| a.get(DESIRED_REPLICAS)) != Some(&desired.to_string())
        || a.and_then(|a| a.get(MAX_REPLICAS)) != Some(&max.to_string())
}

/// `SetNewReplicaSetAnnotations`: copies the deployment's annotations, raises the revision to
/// `new_revision` (keeping the replaced one in `revision-history`), and for a ReplicaSet about
/// to be created sets the replica annotations. Whether anything changed.
pub fn set_new_rs_annotations(d: &Deployment, rs: &mut ReplicaSet, new_revision: i64, exists: bool) -> bool {
    let mut changed = copy_deployment_annotations(d, rs);
    let a = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
    let old = a.get(REVISION).cloned();
    let old_int = match old.as_deref() {
        None | Some("") => 0,
        Some(v) => match v.parse::<i64>() {
            Ok(n) => n,
            Err(_) => return false,
        },
    };
    if old_int < new_revision {
        a.insert(REVISION.to_string(), new_revision.to_string());
        changed = true;
        if let Some(old) = old.filter(|o| !o.is_empty()) {
            let history = a.get(REVISION_HISTORY).cloned().unwrap_or_default();
            if history.is_empty() {
                a.insert(REVISION_HISTORY.to_string(), old);
            } else {
                let mut parts: Vec<&str> = history.split(',').collect();
                let mut total = history.len() + old.len() + 1;
                let mut start = 0;
                while total > MAX_REV_HISTORY_CHARS && start < parts.len() {
                    total -= parts[start].len() + 1;
                    start += 1;
                }
                if total <= MAX_REV_HISTORY_CHARS {
                    parts = parts.split_off(start);
                    parts.push(&old);
                    let joined = parts.join(",");
                    a.insert(REVISION_HISTORY.to_string(), joined);
                }
            }
        }
    }
    if !exists {
        let desired = d_replicas(d);
        if set_replicas_annotations(rs, desired, desired + max_surge(d)) {
            changed = true;
        }
    }
    changed
}

/// `SetDeploymentRevision`: whether the deployment's revision annotation changed.
pub fn set_deployment_revision(d: &mut Deployment, revision: &str) -> bool {
    let a = d.metadata.annotations.get_or_insert_with(BTreeMap::new);
    if a.get(REVISION).map(String::as_str) != Some(revision) {
        a.insert(REVISION.to_string(), revision.to_string());
        return true;
    }
    false
}

/// `intstr.GetScaledValueFromIntOrPercent`; `None` for malformed values.
pub fn scaled_value(v: &IntOrString, total: i32, round_up: bool) -> Option<i32> {
    match v {
        IntOrString::Int(i) => Some(*i),
        IntOrString::String(s) => {
            let pct: i64 = s.strip_suffix('%')?.parse().ok()?;
            let product = pct * i64::from(total);
            let v = if round_up { (product + 99).div_euclid(100) } else { product.div_euclid(100) };
            i32::try_from(v).ok()
        }
    }
}

/// `ResolveFenceposts`: (maxSurge rounded up, maxUnavailable rounded down); both zero becomes
/// an unavailability of one.
pub fn resolve_fenceposts(surge: Option<&IntOrString>, unavailable: Option<&IntOrString>, desired: i32) -> (i32, i32) {
    let zero = IntOrString::Int(0);
    let s = scaled_value(surge.unwrap_or(&zero), desired, true).unwrap_or(0);
    let mut u = scaled_value(unavailable.unwrap_or(&zero), desired, false).unwrap_or(0);
    if s == 0 && u == 0 {
        u = 1;
    }
    (s, u)
}

/// The strategy type is RollingUpdate.
pub fn is_rolling(d: &Deployment) -> bool {
    d.spec.as_ref().and_then(|s| s.strategy.as_ref()).and_then(|s| s.type_.as_deref()) == Some("RollingUpdate")
}

fn fenceposts(d: &Deployment) -> (i32, i32) {
    let ru = d.spec.as_ref().and_then(|s| s.strategy.as_ref()).and_then(|s| s.rolling_update.as_ref());
    resolve_fenceposts(
        ru.and_then(|r| r.max_surge.as_ref()),
        ru.and_then(|r| r.max_unavailable.as_ref()),
        d_replicas(d),
    )
}

/// `MaxUnavailable`.
pub fn max_unavailable(d: &Deployment) -> i32 {
    let replicas = d_replicas(d);
    if !is_rolling(d) || replicas == 0 {
        return 0;
    }
    fenceposts(d).1.min(replicas)
}

/// `MaxSurge`.
pub fn max_surge(d: &Deployment) -> i32 {
    if !is_rolling(d) {
        return 0;
    }
    fenceposts(d).0
}

/// `ReplicaSetsByCreationTimestamp`: oldest first, then by name.
pub fn by_creation(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    let t = |r: &ReplicaSet| r.metadata.creation_timestamp.as_ref().map(|t| t.0);
    match (t(a), t(b)) {
        (x, y) if x == y => a.metadata.name.cmp(&b.metadata.name),
        (x, y) => x.cmp(&y),
    }
}

/// `ReplicaSetsBySizeNewer`: larger first, then newer first.
pub fn by_size_newer(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    match rs_replicas(b).cmp(&rs_replicas(a)) {
        Ordering::Equal => by_creation(b, a),
        o => o,
    }
}

/// `ReplicaSetsBySizeOlder`: larger first, then older first.
pub fn by_size_older(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    match rs_replicas(b).cmp(&rs_replicas(a)) {
        Ordering::Equal => by_creation(a, b),
        o => o,
    }
}

/// `ReplicaSetsByRevision`: lowest revision first, then by creation.
pub fn by_revision(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    match (revision(a), revision(b)) {
        (Ok(x), Ok(y)) if x != y => x.cmp(&y),
        _ => by_creation(a, b),
    }
}

fn strip_empty(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            for x in m.values_mut() {
                strip_empty(x);
            }
            m.retain(|_, x| {
                !(x.is_null()
                    || x.as_array().is_some_and(Vec::is_empty)
                    || x.as_object().is_some_and(serde_json::Map::is_empty))
            });
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(strip_empty),
        _ => {}
    }
}

/// `EqualIgnoreHash`: templates equal apart from the `pod-template-hash` label, with empty and
/// missing collections equal (as `apiequality.Semantic.DeepEqual` treats them).
pub fn equal_ignore_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    let norm = |t: &PodTemplateSpec| {
        let mut t = t.clone();
        if let Some(l) = t.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
            l.remove(POD_TEMPLATE_HASH);
        }
        let mut v = serde_json::to_value(&t).unwrap_or_default();
        strip_empty(&mut v);
        v
    };
    norm(a) == norm(b)
}

/// `FindNewReplicaSet`: the oldest ReplicaSet whose template equals the deployment's.
pub fn find_new(d: &Deployment, rss: &[ReplicaSet]) -> Option<usize> {
    let template = d.spec.as_ref().map(|s| &s.template)?;
    let mut idx: Vec<usize> = (0..rss.len()).collect();
    idx.sort_by(|&a, &b| by_creation(&rss[a], &rss[b]));
    idx.into_iter().find(|&i| {
        rss[i].spec.as_ref().and_then(|s| s.template.as_ref()).is_some_and(|t| equal_ignore_hash(t, template))
    })
}

/// Sum of `spec.replicas`.
pub fn replica_count<'a>(rss: impl IntoIterator<Item = &'a ReplicaSet>) -> i32 {
    rss.into_iter().map(rs_replicas).sum()
}

/// Sum of `status.replicas`.
pub fn actual_count<'a>(rss: impl IntoIterator<Item = &'a ReplicaSet>) -> i32 {
    rss.into_iter().map(|r| rs_status(r).replicas).sum()
}

/// Sum of `status.readyReplicas`.
pub fn ready_count<'a>(rss: impl IntoIterator<Item = &'a ReplicaSet>) -> i32 {
    rss.into_iter().map(|r| rs_status(r).ready_replicas.unwrap_or(0)).sum()
}

/// Sum of `status.availableReplicas`.
pub fn available_count<'a>(rss: impl IntoIterator<Item = &'a ReplicaSet>) -> i32 {
    rss.into_iter().map(|r| rs_status(r).available_replicas.unwrap_or(0)).sum()
}

/// `GetTerminatingReplicaCountForReplicaSets`: `None` when a ReplicaSet that has been
/// observed does not report the count.
pub fn terminating_count<'a>(rss: impl IntoIterator<Item = &'a ReplicaSet>) -> Option<i32> {
    let mut total = 0;
    for r in rss {
        let s = rs_status(r);
        if s.observed_generation.unwrap_or(0) == 0 && s.terminating_replicas.is_none() {
            continue;
        }
        total += s.terminating_replicas?;
    }
    Some(total)
}

/// `NewRSNewReplicas`: the size the new ReplicaSet may grow to now.
pub fn new_rs_new_replicas(d: &Deployment, all: &[&ReplicaSet], new_rs: &ReplicaSet) -> i32 {
    let replicas = d_replicas(d);
    if is_rolling(d) {
        let current = replica_count(all.iter().copied());
        let max_total = replicas + max_surge(d);
        if current >= max_total {
            return rs_replicas(new_rs);
        }
        let up = (max_total - current).min(replicas - rs_replicas(new_rs));
        return rs_replicas(new_rs) + up;
    }
    replicas
}

/// `IsSaturated`: the new ReplicaSet owns and has available all desired replicas.
pub fn is_saturated(d: &Deployment, rs: Option<&ReplicaSet>) -> bool {
    let Some(rs) = rs else { return false };
    let Some(desired) = annotations(rs).and_then(|a| a.get(DESIRED_REPLICAS)).and_then(|v| v.parse::<i32>().ok())
    else {
        return false;
    };
    let replicas = d_replicas(d);
    rs_replicas(rs) == replicas && desired == replicas && rs_status(rs).available_replicas.unwrap_or(0) == replicas
}

fn max_replicas_annotation(rs: &ReplicaSet) -> Option<i32> {
    annotations(rs).and_then(|a| a.get(MAX_REPLICAS)).and_then(|v| v.parse().ok())
}

/// `GetProportion`: this ReplicaSet's share of `to_add` given what was added so far.
pub fn proportion(rs: &ReplicaSet, d: &Deployment, to_add: i32, added: i32) -> i32 {
    if rs_replicas(rs) == 0 || to_add == 0 || to_add == added {
        return 0;
    }
    let fraction = rs_fraction(rs, d);
    let allowed = to_add - added;
    if to_add > 0 {
        fraction.min(allowed)
    } else {
        fraction.max(allowed)
    }
}

fn rs_fraction(rs: &ReplicaSet, d: &Deployment) -> i32 {
    let replicas = d_replicas(d);
    if replicas == 0 {
        return -rs_replicas(rs);
    }
    let deployment_replicas = replicas + max_surge(d);
    let annotated =
        max_replicas_annotation(rs).unwrap_or_else(|| d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0));
    if annotated == 0 {
        return 0;
    }
    let new_size = f64::from(rs_replicas(rs)) * f64::from(deployment_replicas) / f64::from(annotated);
    // Go's math.Round: half away from zero.
    (new_size.round() as i32) - rs_replicas(rs)
}

/// Has a progress deadline other than "never".
pub fn has_progress_deadline(d: &Deployment) -> bool {
    d.spec.as_ref().and_then(|s| s.progress_deadline_seconds).is_some_and(|p| p != i32::MAX)
}

/// Keeps a limited revision history.
pub fn history_limit(d: &Deployment) -> Option<i32> {
    d.spec.as_ref().and_then(|s| s.revision_history_limit).filter(|l| *l != i32::MAX)
}

/// The condition of type `t`.
pub fn condition<'a>(s: &'a DeploymentStatus, t: &str) -> Option<&'a DeploymentCondition> {
    s.conditions.iter().flatten().find(|c| c.type_ == t)
}

/// A condition stamped `now`.
pub fn new_condition(t: &str, status: &str, reason: &str, message: &str, now: Timestamp) -> DeploymentCondition {
    DeploymentCondition {
        type_: t.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_update_time: Some(time::api_time(now)),
        last_transition_time: Some(time::api_time(now)),
    }
}

/// `SetDeploymentCondition`: no-op when status and reason are unchanged; keeps the transition
/// time when only the reason changes.
pub fn set_condition(s: &mut DeploymentStatus, mut c: DeploymentCondition) {
    if let Some(cur) = condition(s, &c.type_) {
        if cur.status == c.status && cur.reason == c.reason {
            return;
        }
        if cur.status == c.status {
            c.last_transition_time = cur.last_transition_time.clone();
        }
    }
    remove_condition(s, &c.type_.clone());
    s.conditions.get_or_insert_with(Vec::new).push(c);
}

/// Removes the condition of type `t`.
pub fn remove_condition(s: &mut DeploymentStatus, t: &str) {
    if let Some(cs) = s.conditions.as_mut() {
        cs.retain(|c| c.type_ != t);
        if cs.is_empty() {
            s.conditions = None;
        }
    }
}

/// `DeploymentComplete`.
pub fn complete(d: &Deployment, s: &DeploymentStatus) -> bool {
    let r = d_replicas(d);
    s.updated_replicas.unwrap_or(0) == r
        && s.replicas.unwrap_or(0) == r
        && s.available_replicas.unwrap_or(0) == r
        && s.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0)
}

/// `DeploymentProgressing`: more updated, ready or available pods, or fewer old ones.
pub fn progressing(d: &Deployment, new: &DeploymentStatus) -> bool {
    let old = d.status.clone().unwrap_or_default();
    let n = |v: Option<i32>| v.unwrap_or(0);
    let old_old = n(old.replicas) - n(old.updated_replicas);
    let new_old = n(new.replicas) - n(new.updated_replicas);
    n(new.updated_replicas) > n(old.updated_replicas)
        || new_old < old_old
        || n(new.ready_replicas) > n(old.ready_replicas)
        || n(new.available_replicas) > n(old.available_replicas)
}

/// `DeploymentTimedOut`.
pub fn timed_out(d: &Deployment, s: &DeploymentStatus, now: Timestamp) -> bool {
    if !has_progress_deadline(d) {
        return false;
    }
    let Some(c) = condition(s, "Progressing") else { return false };
    match c.reason.as_deref() {
        Some(REASON_NEW_RS_AVAILABLE) => return false,
        Some(REASON_TIMED_OUT) => return true,
        _ => {}
    }
    let deadline = i64::from(d.spec.as_ref().and_then(|s| s.progress_deadline_seconds).unwrap_or(0));
    let Some(from) = c.last_update_time.as_ref() else { return false };
    time::add_secs(from.0, deadline) < now
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment};

    fn ios(s: &str) -> IntOrString {
        IntOrString::String(s.into())
    }

    fn deployment(replicas: i32, surge: IntOrString, unavailable: IntOrString) -> Deployment {
        Deployment {
            spec: Some(DeploymentSpec {
                replicas: Some(replicas),
                strategy: Some(DeploymentStrategy {
                    type_: Some("RollingUpdate".into()),
                    rolling_update: Some(RollingUpdateDeployment {
                        max_surge: Some(surge),
                        max_unavailable: Some(unavailable),
                    }),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn surge_rounds_up_and_unavailable_rounds_down() {
        assert_eq!(resolve_fenceposts(Some(&ios("25%")), Some(&ios("25%")), 10), (3, 2));
        assert_eq!(resolve_fenceposts(Some(&ios("25%")), Some(&ios("25%")), 3), (1, 0));
        assert_eq!(resolve_fenceposts(Some(&ios("0%")), Some(&ios("1%")), 2), (0, 1));
        assert_eq!(resolve_fenceposts(Some(&IntOrString::Int(0)), Some(&IntOrString::Int(0)), 5), (0, 1));
        assert_eq!(scaled_value(&ios("bogus"), 10, true), None);
    }

    #[test]
    fn max_unavailable_never_exceeds_replicas_and_recreate_has_none() {
        let d = deployment(2, IntOrString::Int(0), IntOrString::Int(5));
        assert_eq!(max_unavailable(&d), 2);
        let mut r = d.clone();
        if let Some(s) = r.spec.as_mut() {
            s.strategy = Some(DeploymentStrategy { type_: Some("Recreate".into()), rolling_update: None });
        }
        assert_eq!((max_unavailable(&r), max_surge(&r)), (0, 0));
    }

    fn rs_with_revision(rev: Option<&str>) -> ReplicaSet {
        ReplicaSet {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                annotations: rev.map(|r| [(REVISION.to_string(), r.to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn rolling_back_to_an_old_replica_set_records_its_revision_history() {
        let mut d = deployment(3, ios("25%"), ios("25%"));
        d.metadata.annotations = Some(
            [("kubernetes.io/change-cause".to_string(), "undo".to_string()), (REVISION.to_string(), "9".to_string())]
                .into(),
        );
        let mut rs = rs_with_revision(Some("1"));
        assert!(set_new_rs_annotations(&d, &mut rs, 3, true));
        let a = rs.metadata.annotations.as_ref().expect("annotations");
        assert_eq!(a.get(REVISION).map(String::as_str), Some("3"));
        assert_eq!(a.get(REVISION_HISTORY).map(String::as_str), Some("1"));
        assert_eq!(a.get("kubernetes.io/change-cause").map(String::as_str), Some("undo"));
        assert!(!set_new_rs_annotations(&d, &mut rs, 3, true));
        assert!(set_new_rs_annotations(&d, &mut rs, 5, true));
        let a = rs.metadata.annotations.as_ref().expect("annotations");
        assert_eq!(a.get(REVISION_HISTORY).map(String::as_str), Some("1,3"));
    }

    #[test]
    fn new_replica_sets_get_desired_and_max_replica_annotations() {
        let d = deployment(4, ios("25%"), ios("25%"));
        let mut rs = rs_with_revision(None);
        set_new_rs_annotations(&d, &mut rs, 1, false);
        let a = rs.metadata.annotations.as_ref().expect("annotations");
        assert_eq!(a.get(DESIRED_REPLICAS).map(String::as_str), Some("4"));
        assert_eq!(a.get(MAX_REPLICAS).map(String::as_str), Some("5"));
        assert_eq!(a.get(REVISION).map(String::as_str), Some("1"));
    }

    #[test]
    fn max_revision_skips_unparsable_annotations() {
        let rss = [rs_with_revision(Some("2")), rs_with_revision(Some("x")), rs_with_revision(Some("7"))];
        assert_eq!(max_revision(&rss), 7);
    }

    #[test]
    fn templates_compare_equal_ignoring_the_hash_label_and_empty_collections() {
        let a = PodTemplateSpec { metadata: Some(Default::default()), spec: None };
        let mut b = a.clone();
        b.metadata.as_mut().expect("meta").labels = Some([(POD_TEMPLATE_HASH.to_string(), "abc".to_string())].into());
        assert!(equal_ignore_hash(&a, &b));
        b.metadata.as_mut().expect("meta").labels = Some([("app".to_string(), "x".to_string())].into());
        assert!(!equal_ignore_hash(&a, &b));
    }

    #[test]
    fn proportions_follow_the_max_replicas_annotation() {
        // Deployment grew from 10 (+3 surge = 13) to 20 (+5 surge = 25): a ReplicaSet of 6 at
        // max-replicas 13 should grow to round(6*25/13) = 12.
        let mut d = deployment(20, ios("25%"), ios("25%"));
        d.status = Some(DeploymentStatus { replicas: Some(13), ..Default::default() });
        let mut rs = rs_with_revision(Some("1"));
        set_rs_replicas(&mut rs, 6);
        set_replicas_annotations(&mut rs, 10, 13);
        assert_eq!(proportion(&rs, &d, 12, 0), 6);
        assert_eq!(proportion(&rs, &d, 3, 0), 3);
        let mut zero = d.clone();
        zero.spec.as_mut().expect("spec").replicas = Some(0);
        assert_eq!(proportion(&rs, &zero, -6, 0), -6);
    }

    #[test]
    fn terminating_count_is_unknown_when_an_observed_replica_set_does_not_report_it() {
        let mut a = rs_with_revision(None);
        a.status = Some(k8s_openapi::api::apps::v1::ReplicaSetStatus {
            observed_generation: Some(1),
            terminating_replicas: Some(2),
            ..Default::default()
        });
        let fresh = rs_with_revision(None);
        assert_eq!(terminating_count([&a, &fresh]), Some(2));
        let mut silent = rs_with_revision(None);
        silent.status =
            Some(k8s_openapi::api::apps::v1::ReplicaSetStatus { observed_generation: Some(1), ..Default::default() });
        assert_eq!(terminating_count([&a, &silent]), None);
    }

    #[test]
    fn progress_deadline_is_measured_from_the_last_update() {
        let mut d = deployment(1, ios("25%"), ios("25%"));
        d.spec.as_mut().expect("spec").progress_deadline_seconds = Some(600);
        let now: Timestamp = "2024-05-01T12:00:00Z".parse().expect("ts");
        let mut s = DeploymentStatus::default();
        set_condition(&mut s, new_condition("Progressing", "True", REASON_RS_UPDATED, "", time::add_secs(now, -601)));
        assert!(timed_out(&d, &s, now));
        let mut fresh = DeploymentStatus::default();
        set_condition(
            &mut fresh,
            new_condition("Progressing", "True", REASON_RS_UPDATED, "", time::add_secs(now, -10)),
        );
        assert!(!timed_out(&d, &fresh, now));
        d.spec.as_mut().expect("spec").progress_deadline_seconds = Some(i32::MAX);
        assert!(!timed_out(&d, &s, now));
    }

    #[test]
    fn setting_a_condition_with_the_same_status_keeps_its_transition_time() {
        let t0: Timestamp = "2024-05-01T10:00:00Z".parse().expect("ts");
        let t1: Timestamp = "2024-05-01T11:00:00Z".parse().expect("ts");
        let mut s = DeploymentStatus::default();
        set_condition(&mut s, new_condition("Available", "True", REASON_MIN_AVAILABLE, "a", t0));
        set_condition(&mut s, new_condition("Available", "True", REASON_MIN_AVAILABLE, "b", t1));
        assert_eq!(condition(&s, "Available").and_then(|c| c.message.as_deref()), Some("a"));
        set_condition(&mut s, new_condition("Available", "False", REASON_MIN_UNAVAILABLE, "c", t1));
        assert_eq!(condition(&s, "Available").and_then(|c| c.last_transition_time.clone()).map(|t| t.0), Some(t1));
    }
}
