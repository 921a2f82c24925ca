//! Which webhooks a request is sent to, as upstream decides it
//! (`apiserver/pkg/admission/plugin/webhook`): a webhook's `rules` (operations, API groups and
//! versions, resources with their subresource patterns, scope), its `namespaceSelector` (the
//! labels of the object's namespace, or of a Namespace itself) and `objectSelector` (the labels
//! of the object, or of the old object on delete).

use k1s_api::selectors::Selector;
use serde_json::Value;

/// What a request is, for matching.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    pub operation: &'a str,
    pub group: &'a str,
    pub version: &'a str,
    pub resource: &'a str,
    pub subresource: Option<&'a str>,
    pub namespaced: bool,
}

fn strings(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect()
}

fn has(list: &[&str], value: &str) -> bool {
    list.iter().any(|x| *x == "*" || *x == value)
}

/// A `resources` entry against a resource and subresource: `*` is every resource (not its
/// subresources), `pods/*` every subresource of pods, `*/scale` every scale subresource,
/// `*/*` everything.
fn resource_matches(pattern: &str, resource: &str, subresource: Option<&str>) -> bool {
    let (res, sub) = pattern.split_once('/').map_or((pattern, None), |(r, s)| (r, Some(s)));
    let res_ok = res == "*" || res == resource;
    match (sub, subresource) {
        (None, None) => res_ok,
        (None, Some(_)) => false,
        (Some(_), None) => false,
        (Some(s), Some(actual)) => res_ok && (s == "*" || s == actual),
    }
}

/// One rule of a webhook (`RuleWithOperations`).
pub fn rule_matches(rule: &Value, r: &Request<'_>) -> bool {
    if !has(&strings(rule.get("operations")), r.operation) {
        return false;
    }
    if !has(&strings(rule.get("apiGroups")), r.group) || !has(&strings(rule.get("apiVersions")), r.version) {
        return false;
    }
    if !strings(rule.get("resources")).iter().any(|p| resource_matches(p, r.resource, r.subresource)) {
        return false;
    }
    match rule.get("scope").and_then(Value::as_str).unwrap_or("*") {
        "Cluster" => !r.namespaced,
        "Namespaced" => r.namespaced,
        _ => true,
    }
}

/// A label selector (`matchLabels`, `matchExpressions`) against labels; an absent selector
/// selects everything, as does an empty one.
pub fn selects(selector: Option<&Value>, labels: Option<&Value>) -> bool {
    let Some(sel) = selector.filter(|s| s.as_object().is_some_and(|m| !m.is_empty())) else { return true };
    match Selector::from_label_selector(sel) {
        Ok(s) => s.matches_labels(labels),
        // An invalid selector selects nothing (upstream fails the call).
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn req<'a>(op: &'a str, resource: &'a str, sub: Option<&'a str>) -> Request<'a> {
        Request { operation: op, group: "", version: "v1", resource, subresource: sub, namespaced: true }
    }

    #[test]
    fn rules_match_operations_groups_versions_resources_and_scope() {
        let rule = json!({"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]});
        assert!(rule_matches(&rule, &req("CREATE", "pods", None)));
        assert!(!rule_matches(&rule, &req("DELETE", "pods", None)));
        assert!(!rule_matches(&rule, &req("CREATE", "pods", Some("status"))), "subresources need their own pattern");
        assert!(!rule_matches(&rule, &req("CREATE", "configmaps", None)));
        let any = json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/*"], "scope": "Cluster"});
        assert!(!rule_matches(&any, &req("CREATE", "pods", None)), "namespaced objects are out of a Cluster rule");
        let status = json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/status"]});
        assert!(rule_matches(&status, &req("UPDATE", "pods", Some("status"))));
        assert!(!rule_matches(&status, &req("UPDATE", "pods", None)));
        let subs = json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["pods/*"]});
        assert!(rule_matches(&subs, &req("CONNECT", "pods", Some("exec"))));
    }

    #[test]
    fn selectors_select_by_labels() {
        let labels = json!({"env": "prod"});
        assert!(selects(None, Some(&labels)));
        assert!(selects(Some(&json!({})), None));
        assert!(selects(Some(&json!({"matchLabels": {"env": "prod"}})), Some(&labels)));
        assert!(!selects(
            Some(&json!({"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["prod"]}]})),
            Some(&labels)
        ));
    }
}
