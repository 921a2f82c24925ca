//! Which requests a policy (its `matchConstraints`) and a binding (its `matchResources`) apply
//! to, as upstream decides it (`apiserver/pkg/admission/plugin/policy/matching`): the namespace
//! and object selectors, then `excludeResourceRules`, then `resourceRules` (with
//! `resourceNames`; no rules match every resource), and under `matchPolicy: Equivalent` the
//! same resource in another version of its group.
//!
//! The rule grammar (operations, groups, versions, resources with subresource patterns, scope)
//! is the webhooks' ([`crate::webhooks::rules`]).

use crate::admission::Attributes;
use crate::webhooks::rules;
use serde_json::Value;

/// What a request is, for matching.
pub struct Request<'a> {
    /// What the rules' grammar matches: operation, group, version, resource, subresource, scope.
    pub rule: rules::Request<'a>,
    /// The request's namespace; `None` for cluster-scoped resources.
    pub namespace: Option<&'a str>,
    pub name: &'a str,
    pub object: Option<&'a Value>,
    pub old_object: Option<&'a Value>,
    /// The other versions the resource is served in, with the kind each calls it.
    pub equivalents: &'a [(String, String)],
}

impl<'a> Request<'a> {
    /// The request admission sees, as matching reads it.
    pub fn of(attrs: &'a Attributes<'_>, equivalents: &'a [(String, String)]) -> Request<'a> {
        let r = attrs.resource;
        Request {
            rule: rules::Request {
                operation: attrs.operation.as_str(),
                group: r.group,
                version: r.version,
                resource: r.resource,
                subresource: attrs.subresource,
                namespaced: r.namespaced(),
            },
            namespace: attrs.namespace.filter(|n| !n.is_empty()),
            name: attrs.name,
            object: attrs.object.as_deref(),
            old_object: attrs.old_object,
            equivalents,
        }
    }

    fn rule_request<'b>(&'b self, version: &'b str) -> rules::Request<'b> {
        if version.is_empty() {
            self.rule
        } else {
            rules::Request { version, ..self.rule }
        }
    }

    /// Whether this request is about a Namespace itself.
    pub fn is_namespace(&self) -> bool {
        self.rule.group.is_empty() && self.rule.resource == "namespaces"
    }
}

/// The resource and kind a match was made as: the request's own, or (under
/// `matchPolicy: Equivalent`) another version's.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Matched {
    /// `None`: the request's own version.
    pub version: Option<String>,
    pub kind: Option<String>,
}

fn array(v: Option<&Value>) -> &[Value] {
    v.and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[])
}

/// One `NamedRuleWithOperations` against the request as `version`.
fn named_rule_matches(rule: &Value, req: &Request<'_>, version: &str, check_names: bool) -> bool {
    if !rules::rule_matches(rule, &req.rule_request(version)) {
        return false;
    }
    let names = array(rule.get("resourceNames"));
    !check_names || names.is_empty() || names.iter().any(|n| n.as_str() == Some(req.name))
}

/// `namedRules` against the request: the first that matches it as it is, else (Equivalent)
/// the first that matches one of its other versions.
fn rules_match(named: &[Value], equivalent: bool, req: &Request<'_>) -> Option<Matched> {
    if named.iter().any(|r| named_rule_matches(r, req, "", true)) {
        return Some(Matched::default());
    }
    if !equivalent {
        return None;
    }
    // Upstream checks the equivalents without `resourceNames`.
    for rule in named {
        for (version, kind) in req.equivalents {
            if version != req.rule.version && named_rule_matches(rule, req, version, false) {
                return Some(Matched { version: Some(version.clone()), kind: Some(kind.clone()) });
            }
        }
    }
    None
}

/// Whether `selector` selects the request's object (or its old object).
pub fn object_selected(selector: Option<&Value>, req: &Request<'_>) -> bool {
    if is_empty(selector) {
        return true;
    }
    [req.object, req.old_object]
        .into_iter()
        .flatten()
        .filter(|o| !o.is_null())
        .any(|o| rules::selects(selector, o.pointer("/metadata/labels")))
}

fn is_empty(selector: Option<&Value>) -> bool {
    selector.is_none_or(|s| s.is_null() || s.as_object().is_some_and(|m| m.is_empty()))
}

/// Match criteria (`matchConstraints` or `matchResources`) against a request.
/// `namespace_labels` gives the labels of the request's namespace when a selector needs them
/// (`Err`: the namespace does not exist).
pub fn matches(
    criteria: Option<&Value>,
    req: &Request<'_>,
    namespace_labels: &mut dyn FnMut() -> Result<Option<Value>, String>,
) -> Result<Option<Matched>, String> {
    let empty = Value::Null;
    let c = criteria.unwrap_or(&empty);
    let ns_selector = c.get("namespaceSelector");
    if (req.namespace.is_some() || req.is_namespace()) && !is_empty(ns_selector) {
        let labels = if req.is_namespace() {
            req.object.filter(|o| !o.is_null()).or(req.old_object).and_then(|o| o.pointer("/metadata/labels")).cloned()
        } else {
            namespace_labels()?
        };
        if !rules::selects(ns_selector, labels.as_ref()) {
            return Ok(None);
        }
    }
    if !object_selected(c.get("objectSelector"), req) {
        return Ok(None);
    }
    // Unset is Equivalent, the API's default.
    let equivalent = c.get("matchPolicy").and_then(Value::as_str) != Some("Exact");
    if rules_match(array(c.get("excludeResourceRules")), equivalent, req).is_some() {
        return Ok(None);
    }
    let rules = array(c.get("resourceRules"));
    if rules.is_empty() {
        return Ok(Some(Matched::default()));
    }
    Ok(rules_match(rules, equivalent, req))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deploy<'a>(op: &'a str, obj: &'a Value, eq: &'a [(String, String)]) -> Request<'a> {
        Request {
            rule: rules::Request {
                operation: op,
                group: "apps",
                version: "v1",
                resource: "deployments",
                subresource: None,
                namespaced: true,
            },
            namespace: Some("default"),
            name: "web",
            object: Some(obj),
            old_object: None,
            equivalents: eq,
        }
    }

    fn no_ns() -> Result<Option<Value>, String> {
        Ok(Some(json!({"env": "prod"})))
    }

    #[test]
    fn resource_rules_with_names_and_exclusions() {
        let obj = json!({"metadata": {"name": "web", "labels": {"app": "web"}}});
        let req = deploy("CREATE", &obj, &[]);
        let rule = json!({"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]});
        let c = json!({"resourceRules": [rule]});
        assert_eq!(matches(Some(&c), &req, &mut no_ns), Ok(Some(Matched::default())));
        let mut named = rule.clone();
        named["resourceNames"] = json!(["other"]);
        assert_eq!(matches(Some(&json!({"resourceRules": [named]})), &req, &mut no_ns), Ok(None));
        let excluded = json!({"resourceRules": [rule], "excludeResourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"], "resourceNames": ["web"]}]});
        assert_eq!(matches(Some(&excluded), &req, &mut no_ns), Ok(None));
        assert_eq!(matches(Some(&c), &deploy("DELETE", &obj, &[]), &mut no_ns), Ok(None));
        assert_eq!(matches(None, &req, &mut no_ns), Ok(Some(Matched::default())), "no rules match everything");
    }

    #[test]
    fn selectors_read_the_namespace_and_the_object() {
        let obj = json!({"metadata": {"labels": {"app": "web"}}});
        let req = deploy("CREATE", &obj, &[]);
        let by_ns = json!({"namespaceSelector": {"matchLabels": {"env": "prod"}}});
        assert!(matches(Some(&by_ns), &req, &mut no_ns).expect("ok").is_some());
        let by_ns = json!({"namespaceSelector": {"matchLabels": {"env": "dev"}}});
        assert!(matches(Some(&by_ns), &req, &mut no_ns).expect("ok").is_none());
        let by_obj = json!({"objectSelector": {"matchLabels": {"app": "db"}}});
        assert!(matches(Some(&by_obj), &req, &mut no_ns).expect("ok").is_none());
        let mut missing = || Err("namespaces \"x\" not found".to_string());
        assert!(matches(Some(&json!({"namespaceSelector": {"matchLabels": {"a": "b"}}})), &req, &mut missing).is_err());
    }

    #[test]
    fn equivalent_versions_match_unless_exact() {
        let obj = json!({});
        let eq = [("v1".to_string(), "HorizontalPodAutoscaler".to_string())];
        let mut req = deploy("CREATE", &obj, &eq);
        req.rule =
            rules::Request { group: "autoscaling", version: "v2", resource: "horizontalpodautoscalers", ..req.rule };
        let rule = json!({"apiGroups": ["autoscaling"], "apiVersions": ["v1"], "operations": ["*"], "resources": ["horizontalpodautoscalers"]});
        let m = matches(Some(&json!({"resourceRules": [rule]})), &req, &mut no_ns).expect("ok").expect("match");
        assert_eq!(m.version.as_deref(), Some("v1"));
        let exact = json!({"resourceRules": [rule], "matchPolicy": "Exact"});
        assert_eq!(matches(Some(&exact), &req, &mut no_ns), Ok(None));
    }
}
