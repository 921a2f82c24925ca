//! Strategies for admissionregistration.k8s.io: ValidatingAdmissionPolicies and their
//! bindings, whose spec changes bump the generation (upstream's
//! `pkg/registry/admissionregistration/validatingadmissionpolicy{,binding}/strategy.go`), with
//! upstream's defaults (`failurePolicy: Fail`, `matchPolicy: Equivalent`, empty selectors, rule
//! scope `*`) and its validation (required fields, supported values, duplicates, and every
//! expression compiled: one that does not compile makes the object invalid, with upstream's
//! `compilation failed: ERROR: <input>:L:C: ...`).

use crate::field::FieldError;
use crate::strategy::{DynStrategy, ObjectHooks, Strategy, Typed};
use k8s_openapi::api::admissionregistration::v1::{
    MatchResources, MutatingWebhookConfiguration, RuleWithOperations, ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding, ValidatingWebhookConfiguration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;
use std::collections::HashSet;

pub fn validating_admission_policy() -> Box<dyn DynStrategy> {
    Box::new(Typed(ValidatingAdmissionPolicyStrategy))
}

pub fn validating_admission_policy_binding() -> Box<dyn DynStrategy> {
    Box::new(Typed(ValidatingAdmissionPolicyBindingStrategy))
}

pub fn mutating_webhook_configuration() -> Box<dyn DynStrategy> {
    Box::new(Typed(MutatingWebhookConfigurationStrategy))
}

pub fn validating_webhook_configuration() -> Box<dyn DynStrategy> {
    Box::new(Typed(ValidatingWebhookConfigurationStrategy))
}

/// Upstream's `SetDefaults_MatchResources` and `SetDefaults_Rule`.
fn default_match_resources(m: &mut MatchResources) {
    m.match_policy.get_or_insert_with(|| "Equivalent".into());
    m.namespace_selector.get_or_insert_with(LabelSelector::default);
    m.object_selector.get_or_insert_with(LabelSelector::default);
    for rules in [&mut m.resource_rules, &mut m.exclude_resource_rules].into_iter().flatten() {
        for r in rules {
            r.scope.get_or_insert_with(|| "*".into());
        }
    }
}

fn json<T: serde::Serialize>(t: &T) -> Value {
    serde_json::to_value(t).unwrap_or(Value::Null)
}

fn list<'a>(v: &'a Value, k: &str) -> &'a [Value] {
    v.get(k).and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[])
}

fn text<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

fn supported(errs: &mut Vec<FieldError>, v: &Value, k: &str, path: &str, values: &[&str]) {
    if let Some(s) = v.get(k).and_then(Value::as_str) {
        if !values.contains(&s) {
            errs.push(FieldError::not_supported(format!("{path}.{k}"), s, values));
        }
    }
}

/// Upstream's `validateRuleWithOperations` for one (named) rule at `path`.
fn validate_rule(errs: &mut Vec<FieldError>, rule: &Value, path: &str) {
    let ops = list(rule, "operations");
    if ops.is_empty() {
        errs.push(FieldError::required(format!("{path}.operations"), ""));
    } else if ops.len() > 1 && ops.iter().any(|o| o == "*") {
        errs.push(FieldError::invalid(
            format!("{path}.operations"),
            Value::Array(ops.to_vec()),
            "if '*' is present, must not specify other operations",
        ));
    }
    for (i, op) in ops.iter().enumerate() {
        let op = op.as_str().unwrap_or("");
        if !["*", "CONNECT", "CREATE", "DELETE", "UPDATE"].contains(&op) {
            errs.push(FieldError::not_supported(
                format!("{path}.operations[{i}]"),
                op,
                &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"],
            ));
        }
    }
    for k in ["apiGroups", "apiVersions", "resources"] {
        if list(rule, k).is_empty() {
            errs.push(FieldError::required(format!("{path}.{k}"), ""));
        }
    }
    supported(errs, rule, "scope", path, &["*", "Cluster", "Namespaced"]);
    let mut names = HashSet::new();
    for (i, n) in list(rule, "resourceNames").iter().enumerate() {
        if !names.insert(n.as_str().unwrap_or("")) {
            errs.push(FieldError::duplicate(format!("{path}.resourceNames[{i}]"), n.clone()));
        }
    }
}

/// Upstream's `validateMatchResources` (defaults applied).
fn validate_match_resources(errs: &mut Vec<FieldError>, m: &Value, path: &str) {
    if m.get("matchPolicy").is_none() {
        errs.push(FieldError::required(format!("{path}.matchPolicy"), ""));
    }
    supported(errs, m, "matchPolicy", path, &["Equivalent", "Exact"]);
    for k in ["resourceRules", "excludeResourceRules"] {
        for (i, r) in list(m, k).iter().enumerate() {
            validate_rule(errs, r, &format!("{path}.{k}[{i}]"));
        }
    }
}

/// Compiles `expr` (at `path`) with `vars` declared: upstream's `convertCELErrorToValidationError`.
fn compiles(errs: &mut Vec<FieldError>, expr: &str, path: String, vars: &[&str]) {
    if let Err(e) = k1s_cel::Program::compile(expr, vars) {
        errs.push(FieldError::invalid(path, expr, e.to_string()));
    }
}

/// The variables a policy's expressions may name (`params` only with a `paramKind`).
fn policy_vars(spec: &Value) -> Vec<&'static str> {
    let mut vars = vec!["object", "oldObject", "request", "namespaceObject", "variables", "authorizer"];
    if spec.get("paramKind").is_some_and(|p| !p.is_null()) {
        vars.push("params");
    }
    vars
}

/// `{name, expression}` items: both required, names unique, expressions compiled.
fn validate_named_expressions(errs: &mut Vec<FieldError>, items: &[Value], path: &str, detail: bool, vars: &[&str]) {
    let mut names = HashSet::new();
    for (i, item) in items.iter().enumerate() {
        let name = text(item, "name");
        if name.trim().is_empty() {
            errs.push(FieldError::required(
                format!("{path}[{i}].name"),
                if detail { "name is not specified" } else { "" },
            ));
        } else if !names.insert(name) {
            errs.push(FieldError::duplicate(format!("{path}[{i}].name"), name));
        }
        let expr = text(item, "expression");
        if expr.trim().is_empty() {
            let d = if detail { "expression is not specified" } else { "" };
            errs.push(FieldError::required(format!("{path}[{i}].expression"), d));
        } else {
            compiles(errs, expr, format!("{path}[{i}].expression"), vars);
        }
    }
}

fn validate_policy_spec(spec: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    supported(&mut errs, spec, "failurePolicy", "spec", &["Fail", "Ignore"]);
    if let Some(pk) = spec.get("paramKind").filter(|p| !p.is_null()) {
        for k in ["apiVersion", "kind"] {
            if text(pk, k).is_empty() {
                errs.push(FieldError::required(format!("spec.paramKind.{k}"), ""));
            }
        }
    }
    match spec.get("matchConstraints").filter(|m| !m.is_null()) {
        None => errs.push(FieldError::required("spec.matchConstraints", "")),
        Some(m) => {
            validate_match_resources(&mut errs, m, "spec.matchConstraints");
            if list(m, "resourceRules").is_empty() {
                errs.push(FieldError::required("spec.matchConstraints.resourceRules", ""));
            }
        }
    }
    let vars = policy_vars(spec);
    validate_named_expressions(&mut errs, list(spec, "matchConditions"), "spec.matchConditions", false, &vars);
    validate_named_expressions(&mut errs, list(spec, "variables"), "spec.variables", true, &vars);
    let (validations, annotations) = (list(spec, "validations"), list(spec, "auditAnnotations"));
    if validations.is_empty() && annotations.is_empty() {
        let detail = "validations or auditAnnotations must contain at least one item";
        errs.push(FieldError::required("spec.validations", detail));
        errs.push(FieldError::required("spec.auditAnnotations", detail));
    }
    for (i, v) in validations.iter().enumerate() {
        let path = format!("spec.validations[{i}]");
        let expr = text(v, "expression");
        if expr.trim().is_empty() {
            errs.push(FieldError::required(format!("{path}.expression"), "expression is not specified"));
        } else {
            compiles(&mut errs, expr, format!("{path}.expression"), &vars);
        }
        let me = text(v, "messageExpression");
        if !me.is_empty() && me.trim().is_empty() {
            errs.push(FieldError::invalid(format!("{path}.messageExpression"), me, "must be non-empty if specified"));
        } else if !me.is_empty() {
            compiles(&mut errs, me, format!("{path}.messageExpression"), &vars);
        }
        let msg = text(v, "message");
        if !msg.is_empty() && msg.trim().is_empty() {
            errs.push(FieldError::invalid(format!("{path}.message"), msg, "message must be non-empty if specified"));
        } else if msg.trim().contains(['\n', '\r']) {
            errs.push(FieldError::invalid(format!("{path}.message"), msg, "message must not contain line breaks"));
        }
        supported(&mut errs, v, "reason", &path, &["Forbidden", "Invalid", "RequestEntityTooLarge", "Unauthorized"]);
    }
    let mut keys = HashSet::new();
    for (i, a) in annotations.iter().enumerate() {
        let path = format!("spec.auditAnnotations[{i}]");
        let expr = text(a, "valueExpression");
        if expr.trim().is_empty() {
            errs.push(FieldError::required(format!("{path}.valueExpression"), "valueExpression is not specified"));
        } else {
            compiles(&mut errs, expr, format!("{path}.valueExpression"), &vars);
        }
        if !keys.insert(text(a, "key")) {
            errs.push(FieldError::duplicate(format!("{path}.key"), text(a, "key")));
        }
    }
    errs
}

fn validate_binding_spec(spec: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if text(spec, "policyName").is_empty() {
        errs.push(FieldError::required("spec.policyName", ""));
    }
    if let Some(pr) = spec.get("paramRef").filter(|p| !p.is_null()) {
        let (name, selector) = (text(pr, "name"), pr.get("selector").filter(|s| !s.is_null()));
        if !name.is_empty() && selector.is_some() {
            errs.push(FieldError::forbidden("spec.paramRef.name", "name and selector are mutually exclusive"));
            errs.push(FieldError::forbidden("spec.paramRef.selector", "name and selector are mutually exclusive"));
        }
        if name.is_empty() && selector.is_none() {
            errs.push(FieldError::required("spec.paramRef", "one of name or selector must be specified"));
        }
        match pr.get("parameterNotFoundAction").and_then(Value::as_str).filter(|a| !a.is_empty()) {
            None => errs.push(FieldError::required("spec.paramRef.parameterNotFoundAction", "")),
            Some(a) if a != "Deny" && a != "Allow" => {
                errs.push(FieldError::not_supported("spec.paramRef.parameterNotFoundAction", a, &["Deny", "Allow"]))
            }
            Some(_) => {}
        }
    }
    if let Some(m) = spec.get("matchResources").filter(|m| !m.is_null()) {
        validate_match_resources(&mut errs, m, "spec.matchResources");
    }
    let actions = list(spec, "validationActions");
    let mut seen = HashSet::new();
    for (i, a) in actions.iter().enumerate() {
        let a = a.as_str().unwrap_or("");
        if !["Audit", "Deny", "Warn"].contains(&a) {
            errs.push(FieldError::not_supported(format!("spec.validationActions[{i}]"), a, &["Audit", "Deny", "Warn"]));
        }
        if !seen.insert(a) {
            errs.push(FieldError::duplicate(format!("spec.validationActions[{i}]"), a));
        }
    }
    if seen.contains("Deny") && seen.contains("Warn") {
        errs.push(FieldError::invalid(
            "spec.validationActions",
            Value::Array(actions.to_vec()),
            "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
        ));
    }
    if seen.is_empty() {
        errs.push(FieldError::required("spec.validationActions", "at least one validation action is required"));
    }
    errs
}

pub struct ValidatingAdmissionPolicyStrategy;

impl Strategy for ValidatingAdmissionPolicyStrategy {
    type Object = ValidatingAdmissionPolicy;
    const PREPARES: bool = false;

    fn set_defaults(&self, obj: &mut ValidatingAdmissionPolicy) {
        if let Some(spec) = obj.spec.as_mut() {
            spec.failure_policy.get_or_insert_with(|| "Fail".into());
            if let Some(m) = spec.match_constraints.as_mut() {
                default_match_resources(m);
            }
        }
    }

    fn validate(&self, obj: &ValidatingAdmissionPolicy) -> Vec<FieldError> {
        validate_policy_spec(&json(&obj.spec))
    }
}

impl ObjectHooks for ValidatingAdmissionPolicyStrategy {
    fn tracks_generation(&self) -> bool {
        true
    }
}

pub struct ValidatingAdmissionPolicyBindingStrategy;

impl Strategy for ValidatingAdmissionPolicyBindingStrategy {
    type Object = ValidatingAdmissionPolicyBinding;
    const PREPARES: bool = false;

    fn set_defaults(&self, obj: &mut ValidatingAdmissionPolicyBinding) {
        if let Some(m) = obj.spec.as_mut().and_then(|s| s.match_resources.as_mut()) {
            default_match_resources(m);
        }
    }

    fn validate(&self, obj: &ValidatingAdmissionPolicyBinding) -> Vec<FieldError> {
        validate_binding_spec(&json(&obj.spec))
    }
}

impl ObjectHooks for ValidatingAdmissionPolicyBindingStrategy {
    fn tracks_generation(&self) -> bool {
        true
    }
}

/// Upstream's `SetDefaults_Rule` for a webhook's rules.
fn default_rules(rules: &mut Option<Vec<RuleWithOperations>>) {
    for r in rules.iter_mut().flatten() {
        r.scope.get_or_insert_with(|| "*".into());
    }
}

/// A webhook's `matchConditions`: names and expressions required, names unique, expressions
/// compiled (with `object`, `oldObject` and `request`).
fn validate_webhook_conditions(config: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, w) in list(config, "webhooks").iter().enumerate() {
        let path = format!("webhooks[{i}].matchConditions");
        validate_named_expressions(
            &mut errs,
            list(w, "matchConditions"),
            &path,
            false,
            &["object", "oldObject", "request"],
        );
    }
    errs
}

/// Webhook configurations: upstream's defaults (`failurePolicy: Fail`, `matchPolicy:
/// Equivalent`, empty selectors, `timeoutSeconds: 10`, `reinvocationPolicy: Never`, rule scope
/// `*`) and their match conditions checked.
pub struct MutatingWebhookConfigurationStrategy;

impl Strategy for MutatingWebhookConfigurationStrategy {
    type Object = MutatingWebhookConfiguration;
    const PREPARES: bool = false;

    fn set_defaults(&self, obj: &mut MutatingWebhookConfiguration) {
        for w in obj.webhooks.iter_mut().flatten() {
            w.failure_policy.get_or_insert_with(|| "Fail".into());
            w.match_policy.get_or_insert_with(|| "Equivalent".into());
            w.namespace_selector.get_or_insert_with(LabelSelector::default);
            w.object_selector.get_or_insert_with(LabelSelector::default);
            w.timeout_seconds.get_or_insert(10);
            w.reinvocation_policy.get_or_insert_with(|| "Never".into());
            default_rules(&mut w.rules);
        }
    }

    fn validate(&self, obj: &MutatingWebhookConfiguration) -> Vec<FieldError> {
        validate_webhook_conditions(&json(obj))
    }
}

impl ObjectHooks for MutatingWebhookConfigurationStrategy {}

pub struct ValidatingWebhookConfigurationStrategy;

impl Strategy for ValidatingWebhookConfigurationStrategy {
    type Object = ValidatingWebhookConfiguration;
    const PREPARES: bool = false;

    fn set_defaults(&self, obj: &mut ValidatingWebhookConfiguration) {
        for w in obj.webhooks.iter_mut().flatten() {
            w.failure_policy.get_or_insert_with(|| "Fail".into());
            w.match_policy.get_or_insert_with(|| "Equivalent".into());
            w.namespace_selector.get_or_insert_with(LabelSelector::default);
            w.object_selector.get_or_insert_with(LabelSelector::default);
            w.timeout_seconds.get_or_insert(10);
            default_rules(&mut w.rules);
        }
    }

    fn validate(&self, obj: &ValidatingWebhookConfiguration) -> Vec<FieldError> {
        validate_webhook_conditions(&json(obj))
    }
}

impl ObjectHooks for ValidatingWebhookConfigurationStrategy {}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn policies_are_defaulted_and_checked_as_upstream() {
        let s = Typed(ValidatingAdmissionPolicyStrategy);
        let obj = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "p"},
            "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["deployments"]}]},
                     "validations": [{"expression": "object.spec.replicas <= 5", "reason": "Teapot"}]}});
        let n = s.normalize(obj).expect("decodes").object;
        assert_eq!(n["spec"]["failurePolicy"], "Fail");
        assert_eq!(n["spec"]["matchConstraints"]["matchPolicy"], "Equivalent");
        assert_eq!(n["spec"]["matchConstraints"]["namespaceSelector"], json!({}));
        assert_eq!(n["spec"]["matchConstraints"]["resourceRules"][0]["scope"], "*");
        let errs: Vec<String> = s.validate(&n, None).expect("validates").iter().map(|e| e.to_string()).collect();
        assert_eq!(
            errs,
            ["spec.validations[0].reason: Unsupported value: \"Teapot\": supported values: \"Forbidden\", \"Invalid\", \"RequestEntityTooLarge\", \"Unauthorized\""]
        );
        let mut bad = n.clone();
        bad["spec"]["validations"] =
            json!([{"expression": "object.spec.replicas <"}, {"expression": "params.max > 1"}]);
        let errs = s.validate(&bad, None).expect("validates");
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert_eq!(errs[0].field, "spec.validations[0].expression");
        assert!(errs[0].detail.starts_with("compilation failed: ERROR: <input>:1:"), "{}", errs[0].detail);
        assert!(errs[1].detail.contains("undeclared reference to 'params'"), "{}", errs[1].detail);
        let empty = json!({"metadata": {"name": "p"}, "spec": {}});
        let errs: Vec<String> = s.validate(&empty, None).expect("validates").iter().map(|e| e.field.clone()).collect();
        assert_eq!(errs, ["spec.matchConstraints", "spec.validations", "spec.auditAnnotations"]);
    }

    #[test]
    fn webhook_configurations_are_defaulted_and_their_match_conditions_compiled() {
        let s = Typed(ValidatingWebhookConfigurationStrategy);
        let cfg = json!({"metadata": {"name": "w"}, "webhooks": [{"name": "a.example.com", "sideEffects": "None",
            "admissionReviewVersions": ["v1"], "clientConfig": {"url": "https://x"},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
            "matchConditions": [{"name": "c", "expression": "object.metadata.name =="}]}]});
        let n = s.normalize(cfg).expect("decodes").object;
        let w = &n["webhooks"][0];
        assert_eq!(
            (w["failurePolicy"].clone(), w["matchPolicy"].clone(), w["timeoutSeconds"].clone()),
            (json!("Fail"), json!("Equivalent"), json!(10))
        );
        assert_eq!(w["rules"][0]["scope"], "*");
        let errs = s.validate(&n, None).expect("validates");
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].field, "webhooks[0].matchConditions[0].expression");
        assert!(errs[0].detail.starts_with("compilation failed: "), "{}", errs[0].detail);
    }

    #[test]
    fn bindings_need_a_policy_actions_and_a_complete_param_ref() {
        let s = Typed(ValidatingAdmissionPolicyBindingStrategy);
        let b = json!({"metadata": {"name": "b"}, "spec": {"policyName": "p", "validationActions": ["Deny", "Warn"],
                        "paramRef": {"name": "x", "selector": {}}}});
        let errs: Vec<String> = s.validate(&b, None).expect("validates").iter().map(|e| e.to_string()).collect();
        assert_eq!(
            errs,
            [
                "spec.paramRef.name: Forbidden: name and selector are mutually exclusive",
                "spec.paramRef.selector: Forbidden: name and selector are mutually exclusive",
                "spec.paramRef.parameterNotFoundAction: Required value",
                "spec.validationActions: Invalid value: [\"Deny\",\"Warn\"]: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
            ]
        );
        let ok = json!({"metadata": {"name": "b"}, "spec": {"policyName": "p", "validationActions": ["Deny"]}});
        assert!(s.validate(&ok, None).expect("validates").is_empty());
    }
}
