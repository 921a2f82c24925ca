//! Resource quota accounting shared by the API server's ResourceQuota admission and the quota
//! controller (upstream's `k8s.io/apiserver/pkg/quota/v1` and `pkg/quota/v1/evaluator/core`):
//! resource lists and their arithmetic ([`ResourceList`]), what an object of a resource counts
//! against a quota ([`usage::Evaluator`]), the pod's requests, limits, QoS and scopes
//! ([`pod`]), and the quota's scope selectors ([`ScopeSelector`]).
//!
//! Objects are JSON values as stored, so that the API server (which holds JSON) and the
//! controller (which holds typed objects, serialized) share one implementation.

pub mod pod;
pub mod usage;

use crate::strategies::quantity::Quantity;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Resource name ▶ quantity, ordered by name (upstream's `corev1.ResourceList`).
pub type ResourceList = BTreeMap<String, Quantity>;

/// A resource list read from JSON (`spec.hard`, `status.used`); unparseable quantities are
/// skipped (validation refuses them on write).
pub fn parse_list(v: Option<&Value>) -> ResourceList {
    let mut out = ResourceList::new();
    for (k, q) in v.and_then(Value::as_object).into_iter().flatten() {
        if let Some(q) = q.as_str().and_then(|s| Quantity::parse(s).ok()) {
            out.insert(k.clone(), q);
        }
    }
    out
}

/// A typed resource list (`spec.hard` of a k8s-openapi object) parsed; unparseable quantities
/// are skipped.
pub fn from_api(list: &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>) -> ResourceList {
    list.iter().filter_map(|(k, q)| Some((k.clone(), Quantity::parse(&q.0).ok()?))).collect()
}

/// The JSON form of a list: canonical quantity strings.
pub fn to_json(list: &ResourceList) -> Value {
    Value::Object(list.iter().map(|(k, q)| (k.clone(), Value::String(q.canonical()))).collect::<Map<_, _>>())
}

/// One.
pub fn one() -> Quantity {
    Quantity::from_units(1)
}

/// Zero (decimal SI).
pub fn zero() -> Quantity {
    Quantity::from_units(0)
}

/// `a + b` by resource (upstream's `quota.Add`: a resource in one list only is copied).
pub fn add(a: &ResourceList, b: &ResourceList) -> ResourceList {
    let mut out = a.clone();
    for (k, v) in b {
        out.entry(k.clone()).and_modify(|q| *q = q.add(v)).or_insert(*v);
    }
    out
}

/// `a - b` for the resources of `a`, never below zero (upstream's
/// `SubtractWithNonNegativeResult`).
pub fn subtract_non_negative(a: &ResourceList, b: &ResourceList) -> ResourceList {
    a.iter()
        .map(|(k, v)| {
            let d = match b.get(k) {
                Some(o) => v.sub(o),
                None => *v,
            };
            (k.clone(), if d.is_negative() { zero() } else { d })
        })
        .collect()
}

/// The entries of `list` whose names are in `names`.
pub fn mask<'a>(list: &ResourceList, names: impl IntoIterator<Item = &'a String>) -> ResourceList {
    names.into_iter().filter_map(|n| list.get(n).map(|q| (n.clone(), *q))).collect()
}

/// The list without its zero quantities.
pub fn remove_zeros(list: &ResourceList) -> ResourceList {
    list.iter().filter(|(_, q)| !q.is_zero()).map(|(k, q)| (k.clone(), *q)).collect()
}

/// The resources of `a` that exceed their value in `b` (upstream's `LessThanOrEqual`; a
/// resource missing from either is not compared).
pub fn exceeded(a: &ResourceList, b: &ResourceList) -> Vec<String> {
    b.iter().filter(|(k, limit)| a.get(*k).is_some_and(|v| v > limit)).map(|(k, _)| k.clone()).collect()
}

/// The resources with a negative quantity.
pub fn negative(list: &ResourceList) -> Vec<String> {
    list.iter().filter(|(_, q)| q.is_negative()).map(|(k, _)| k.clone()).collect()
}

/// Same resources with equal values (upstream's `quota.Equals`).
pub fn equals(a: &ResourceList, b: &ResourceList) -> bool {
    a.len() == b.len() && a.iter().all(|(k, v)| b.get(k) == Some(v))
}

/// `cpu=1,pods=2`: resources in name order, as upstream's admission messages print them.
pub fn pretty_print(list: &ResourceList) -> String {
    list.iter().map(|(k, q)| format!("{k}={}", q.canonical())).collect::<Vec<_>>().join(",")
}

/// The object count resource of a group-resource: `count/pods`, `count/deployments.apps`.
pub fn object_count_name(group: &str, resource: &str) -> String {
    if group.is_empty() {
        format!("count/{resource}")
    } else {
        format!("count/{resource}.{group}")
    }
}

/// One scope requirement of a quota (`spec.scopes` entries become `Exists` requirements).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopeSelector {
    pub scope_name: String,
    pub operator: String,
    pub values: Vec<String>,
}

/// Every scope requirement of a quota object: `spec.scopes` then
/// `spec.scopeSelector.matchExpressions`.
pub fn scope_selectors(quota: &Value) -> Vec<ScopeSelector> {
    let mut out: Vec<ScopeSelector> = quota
        .pointer("/spec/scopes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|s| ScopeSelector { scope_name: s.to_string(), operator: "Exists".into(), values: Vec::new() })
        .collect();
    for e in quota.pointer("/spec/scopeSelector/matchExpressions").and_then(Value::as_array).into_iter().flatten() {
        out.push(ScopeSelector {
            scope_name: e.get("scopeName").and_then(Value::as_str).unwrap_or_default().to_string(),
            operator: e.get("operator").and_then(Value::as_str).unwrap_or_default().to_string(),
            values: e
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn list(v: Value) -> ResourceList {
        parse_list(Some(&v))
    }

    #[test]
    fn arithmetic_and_printing_follow_upstream() {
        let used = list(json!({"pods": "2", "requests.cpu": "500m"}));
        let req = list(json!({"pods": "1", "requests.cpu": "600m"}));
        let hard = list(json!({"pods": "2", "requests.cpu": "1"}));
        let sum = add(&used, &req);
        assert_eq!(pretty_print(&sum), "pods=3,requests.cpu=1100m");
        assert_eq!(exceeded(&sum, &hard), vec!["pods".to_string(), "requests.cpu".to_string()]);
        assert_eq!(pretty_print(&subtract_non_negative(&used, &req)), "pods=1,requests.cpu=0");
        assert!(equals(&list(json!({"cpu": "1000m"})), &list(json!({"cpu": "1"}))));
        assert_eq!(object_count_name("apps", "deployments"), "count/deployments.apps");
    }

    #[test]
    fn scopes_and_scope_selectors_are_one_list() {
        let q = json!({"spec": {"scopes": ["BestEffort"], "scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}});
        let s = scope_selectors(&q);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].operator, "Exists");
        assert_eq!(s[1].values, vec!["high".to_string()]);
    }
}
