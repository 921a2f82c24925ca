//! What a pod counts against quota (upstream's `podEvaluator` and `resourcehelper.PodRequests`
//! / `PodLimits`): its effective requests and limits (containers, sidecars, init containers,
//! overhead, pod-level resources), its QoS class, the scopes it falls in, and the rule that a
//! pod names requests and limits for quota'd cpu and memory.

use super::{add, one, parse_list, ResourceList, ScopeSelector};
use crate::selectors::{Op, Requirement};
use crate::strategies::quantity::Quantity;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// The compute resources a pod quota tracks by name (besides prefixed and extended ones).
pub const POD_RESOURCES: &[&str] = &[
    "count/pods",
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
];

/// The resources whose quota obliges every container to name them (upstream's
/// `validationSet`, kept for backward compatibility).
const VALIDATION_SET: &[&str] = &["cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"];

fn containers<'a>(pod: &'a Value, field: &str) -> impl Iterator<Item = &'a Value> {
    pod.pointer(&format!("/spec/{field}")).and_then(Value::as_array).into_iter().flatten()
}

fn resources(c: &Value, which: &str) -> ResourceList {
    parse_list(c.pointer(&format!("/resources/{which}")))
}

fn max_into(target: &mut ResourceList, other: &ResourceList) {
    for (k, v) in other {
        target.entry(k.clone()).and_modify(|q| *q = (*q).max(*v)).or_insert(*v);
    }
}

/// The pod's effective `which` (`requests` or `limits`): regular containers and sidecars
/// summed, each init container with the sidecars started before it as a floor, pod-level
/// resources for cpu, memory and hugepages when set, plus the overhead.
fn aggregate(pod: &Value, which: &str) -> ResourceList {
    let mut total = ResourceList::new();
    for c in containers(pod, "containers") {
        total = add(&total, &resources(c, which));
    }
    let mut sidecars = ResourceList::new();
    let mut init_max = ResourceList::new();
    for c in containers(pod, "initContainers") {
        let own = resources(c, which);
        let this = if c.get("restartPolicy").and_then(Value::as_str) == Some("Always") {
            total = add(&total, &own);
            sidecars = add(&sidecars, &own);
            sidecars.clone()
        } else {
            add(&own, &sidecars)
        };
        max_into(&mut init_max, &this);
    }
    max_into(&mut total, &init_max);
    let pod_level = parse_list(pod.pointer(&format!("/spec/resources/{which}")));
    for (k, v) in pod_level {
        if k == "cpu" || k == "memory" || k.starts_with("hugepages-") {
            total.insert(k, v);
        }
    }
    let overhead = parse_list(pod.pointer("/spec/overhead"));
    for (k, v) in overhead {
        // Limits take the overhead only for resources they limit.
        if which == "requests" || total.contains_key(&k) {
            total = add(&total, &ResourceList::from([(k, v)]));
        }
    }
    total
}

/// The pod's effective requests (upstream's `PodRequests`).
pub fn pod_requests(pod: &Value) -> ResourceList {
    aggregate(pod, "requests")
}

/// The pod's effective limits (upstream's `PodLimits`).
pub fn pod_limits(pod: &Value) -> ResourceList {
    aggregate(pod, "limits")
}

fn is_native(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// `requests.<extended resource>` names a pod quota tracks.
pub fn is_extended_quota_name(name: &str) -> bool {
    !is_native(name) && name.starts_with("requests.")
}

/// Upstream's `podComputeUsageHelper`: the quota resources of the given requests and limits.
pub fn compute_usage(requests: &ResourceList, limits: &ResourceList) -> ResourceList {
    let mut out = ResourceList::from([("pods".to_string(), one())]);
    for res in ["cpu", "memory", "ephemeral-storage"] {
        if let Some(r) = requests.get(res) {
            out.insert(res.to_string(), *r);
            out.insert(format!("requests.{res}"), *r);
        }
        if let Some(l) = limits.get(res) {
            out.insert(format!("limits.{res}"), *l);
        }
    }
    for (k, v) in requests {
        if k.starts_with("hugepages-") {
            out.insert(k.clone(), *v);
            out.insert(format!("requests.{k}"), *v);
        } else if !is_native(k) && !k.starts_with("requests.") {
            out.insert(format!("requests.{k}"), *v);
        }
    }
    out
}

/// Whether the pod still counts against compute quota (upstream's `QuotaV1Pod`): not in a
/// terminal phase, and not stuck deleting past twice its grace period.
pub fn counts(pod: &Value, now: jiff::Timestamp) -> bool {
    if matches!(pod.pointer("/status/phase").and_then(Value::as_str), Some("Succeeded" | "Failed")) {
        return false;
    }
    let deletion = pod.pointer("/metadata/deletionTimestamp").and_then(Value::as_str);
    let grace = pod.pointer("/metadata/deletionGracePeriodSeconds").and_then(Value::as_i64);
    if let (Some(ts), Some(grace)) = (deletion, grace) {
        if let Ok(ts) = ts.parse::<jiff::Timestamp>() {
            if let Ok(until) = ts.checked_add(jiff::SignedDuration::from_secs(grace)) {
                if now > until {
                    return false;
                }
            }
        }
    }
    true
}

/// A pod's quota usage (upstream's `PodUsageFunc`): `count/pods` always, compute resources
/// only while the pod [`counts`].
pub fn usage(pod: &Value, now: jiff::Timestamp) -> ResourceList {
    let mut out = ResourceList::from([("count/pods".to_string(), one())]);
    if counts(pod, now) {
        out = add(&out, &compute_usage(&pod_requests(pod), &pod_limits(pod)));
    }
    out
}

fn qos_compute(list: &ResourceList) -> bool {
    list.iter().any(|(k, v)| (k == "cpu" || k == "memory") && !v.is_zero())
}

/// Whether the pod's QoS class is BestEffort: no cpu or memory request or limit anywhere.
pub fn is_best_effort(pod: &Value) -> bool {
    let pod_level =
        ["requests", "limits"].iter().any(|w| qos_compute(&parse_list(pod.pointer(&format!("/spec/resources/{w}")))));
    let any_container = ["containers", "initContainers"].iter().any(|f| {
        containers(pod, f).any(|c| qos_compute(&resources(c, "requests")) || qos_compute(&resources(c, "limits")))
    });
    !pod_level && !any_container
}

/// Whether the pod has an active deadline (the `Terminating` scope).
pub fn is_terminating(pod: &Value) -> bool {
    pod.pointer("/spec/activeDeadlineSeconds").and_then(Value::as_i64).is_some_and(|s| s >= 0)
}

fn cross_namespace_affinity(pod: &Value) -> bool {
    let cross = |t: &Value| {
        t.get("namespaces").and_then(Value::as_array).is_some_and(|n| !n.is_empty())
            || t.get("namespaceSelector").is_some_and(|s| !s.is_null())
    };
    ["podAffinity", "podAntiAffinity"].iter().any(|kind| {
        let base = format!("/spec/affinity/{kind}");
        let required = pod
            .pointer(&format!("{base}/requiredDuringSchedulingIgnoredDuringExecution"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(cross);
        let preferred = pod
            .pointer(&format!("{base}/preferredDuringSchedulingIgnoredDuringExecution"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|w| w.get("podAffinityTerm"))
            .any(cross);
        required || preferred
    })
}

/// Whether the pod falls in one scope requirement (upstream's `podMatchesScopeFunc`).
pub fn matches_scope(sel: &ScopeSelector, pod: &Value) -> bool {
    match sel.scope_name.as_str() {
        "Terminating" => is_terminating(pod),
        "NotTerminating" => !is_terminating(pod),
        "BestEffort" => is_best_effort(pod),
        "NotBestEffort" => !is_best_effort(pod),
        "CrossNamespacePodAffinity" => cross_namespace_affinity(pod),
        "PriorityClass" => {
            let class = pod.pointer("/spec/priorityClassName").and_then(Value::as_str).unwrap_or_default();
            let op = match sel.operator.as_str() {
                "Exists" => return !class.is_empty(),
                "DoesNotExist" => Op::DoesNotExist,
                "In" => Op::In,
                "NotIn" => Op::NotIn,
                _ => return false,
            };
            let req = Requirement { key: "PriorityClass".into(), op, values: sel.values.clone() };
            req.matches(&|_| (!class.is_empty()).then(|| class.to_string()))
        }
        _ => false,
    }
}

/// Upstream's pod `Constraints`: for each of the `required` resources that a quota of cpu or
/// memory makes mandatory, the containers that do not name it. `Err` carries the message
/// (`must specify limits.cpu for: c; requests.memory for: c,d`).
pub fn constraints(required: &[String], pod: &Value) -> Result<(), String> {
    let required: BTreeSet<&str> = required.iter().map(String::as_str).filter(|r| VALIDATION_SET.contains(r)).collect();
    let mut missing: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for c in containers(pod, "containers").chain(containers(pod, "initContainers")) {
        let usage = compute_usage(&resources(c, "requests"), &resources(c, "limits"));
        let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
        for r in &required {
            if !usage.contains_key(*r) {
                missing.entry(r).or_default().insert(name.to_string());
            }
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let parts: Vec<String> = missing
        .iter()
        .map(|(r, names)| format!("{r} for: {}", names.iter().cloned().collect::<Vec<_>>().join(",")))
        .collect();
    Err(format!("must specify {}", parts.join("; ")))
}

/// Upstream's `requestLimitEnforcedValues` precision: milli units, rounded up.
pub fn milli(q: &Quantity) -> i128 {
    q.milli_ceil()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quota::pretty_print;
    use serde_json::json;

    fn now() -> jiff::Timestamp {
        "2026-01-01T00:00:00Z".parse().expect("time")
    }

    #[test]
    fn pod_usage_sums_containers_and_takes_the_init_maximum() {
        let pod = json!({"spec": {
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "200m"}}},
                {"name": "b", "resources": {"requests": {"cpu": "300m"}}}],
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "1"}}}]}});
        assert_eq!(
            pretty_print(&usage(&pod, now())),
            "count/pods=1,cpu=1,limits.cpu=200m,memory=64Mi,pods=1,requests.cpu=1,requests.memory=64Mi"
        );
        let done = json!({"spec": {"containers": []}, "status": {"phase": "Succeeded"}});
        assert_eq!(pretty_print(&usage(&done, now())), "count/pods=1");
    }

    #[test]
    fn pods_stuck_deleting_past_grace_stop_counting() {
        let pod = json!({"metadata": {"deletionTimestamp": "2025-12-31T23:59:00Z", "deletionGracePeriodSeconds": 30},
                         "spec": {"containers": []}});
        assert!(!counts(&pod, now()));
        let fresh = json!({"metadata": {"deletionTimestamp": "2025-12-31T23:59:50Z", "deletionGracePeriodSeconds": 30},
                           "spec": {"containers": []}});
        assert!(counts(&fresh, now()));
    }

    #[test]
    fn constraints_name_the_missing_resource_and_containers() {
        let pod =
            json!({"spec": {"containers": [{"name": "c"}, {"name": "d", "resources": {"requests": {"cpu": "1"}}}]}});
        assert_eq!(
            constraints(&["requests.cpu".into(), "pods".into()], &pod),
            Err("must specify requests.cpu for: c".to_string())
        );
        assert_eq!(
            constraints(&["limits.memory".into(), "cpu".into()], &pod),
            Err("must specify cpu for: c; limits.memory for: c,d".to_string())
        );
    }

    #[test]
    fn scopes_follow_qos_deadline_and_priority_class() {
        let be = json!({"spec": {"containers": [{"name": "c"}]}});
        let burst = json!({"spec": {"priorityClassName": "high", "activeDeadlineSeconds": 5,
                                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}});
        let sel = |name: &str, op: &str, values: &[&str]| ScopeSelector {
            scope_name: name.into(),
            operator: op.into(),
            values: values.iter().map(|v| v.to_string()).collect(),
        };
        assert!(matches_scope(&sel("BestEffort", "Exists", &[]), &be));
        assert!(matches_scope(&sel("NotBestEffort", "Exists", &[]), &burst));
        assert!(matches_scope(&sel("Terminating", "Exists", &[]), &burst));
        assert!(matches_scope(&sel("NotTerminating", "Exists", &[]), &be));
        assert!(matches_scope(&sel("PriorityClass", "In", &["high"]), &burst));
        assert!(!matches_scope(&sel("PriorityClass", "In", &["high"]), &be));
        assert!(matches_scope(&sel("PriorityClass", "NotIn", &["high"]), &be));
        assert!(matches_scope(&sel("PriorityClass", "Exists", &[]), &burst));
        assert!(matches_scope(&sel("PriorityClass", "DoesNotExist", &[]), &be));
    }
}
