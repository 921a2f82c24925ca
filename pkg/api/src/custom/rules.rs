//! CEL validation rules of a CustomResourceDefinition's schema (`x-kubernetes-validations`), as
//! upstream's `apiextensions-apiserver/pkg/apiserver/schema/cel`: compiled once per definition
//! version ([`Rules::compile`]), run on each create, update and status update of its custom
//! resources ([`Rules::validate`]).
//!
//! `self` is the value at the rule's level, typed by the schema (a `number` is a `double` even
//! when written `5`); `oldSelf` the value before an update, for transition rules, which only run
//! when there is one (unless `optionalOldSelf`, which binds it as an optional). Old values are
//! followed through object properties, map values and the items of `x-kubernetes-list-type: map`
//! lists (by their keys). All rules of one object share upstream's runtime cost budget.
//!
//! Ratcheting (upstream's `CRDValidationRatcheting`, on by default since v1.30): on update, a
//! rule that does not use `oldSelf` and fails on a value equal to its old value is not enforced;
//! its error becomes a warning. A value's old value is found through object properties, map
//! values and the items of `map` lists (by their keys) and `set` lists (by value); a value with
//! none (an item of an atomic list, a new key) is unchanged when its nearest parent that has
//! one is.

use crate::field::{FieldError, FieldErrorType, Path};
use k1s_cel::{Activation, CostBudget, EvalError, Program};

/// How long one object's rules may run. The unit tests run unoptimised on loaded CI machines,
/// where reaching the cost limit can take longer than the default deadline; they test the cost
/// limit, not the deadline.
#[cfg(not(test))]
const EVAL_TIMEOUT: std::time::Duration = k1s_cel::DEFAULT_EVAL_TIMEOUT;
#[cfg(test)]
const EVAL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);
use serde_json::{Map, Value};
use std::sync::Arc;

/// The reasons a rule may give for its error.
const REASONS: [&str; 4] = ["FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"];

/// One compiled `x-kubernetes-validations` entry.
#[derive(Debug)]
struct Rule {
    rule: String,
    message: String,
    message_expression: Option<Program>,
    reason: Option<String>,
    /// `fieldPath` as path segments below the rule's level.
    field_path: Vec<String>,
    optional_old_self: bool,
    program: Program,
}

/// The schema nodes that hold rules, or lead to some.
#[derive(Debug, Default)]
struct Node {
    /// The node's schema, to type `self`.
    schema: Value,
    rules: Vec<Rule>,
    properties: Vec<(String, Node)>,
    additional: Option<Box<Node>>,
    items: Option<Box<Node>>,
}

/// The compiled rules of one version's schema.
#[derive(Debug, Default, Clone)]
pub struct Rules {
    root: Option<Arc<Node>>,
}

fn type_of(schema: &Value) -> &str {
    schema.get("type").and_then(Value::as_str).unwrap_or("")
}

fn flag(schema: &Value, name: &str) -> bool {
    schema.get(name).and_then(Value::as_bool).unwrap_or(false)
}

/// The `x-kubernetes-validations` entry as Go prints the internal type with `%#v`, as upstream's
/// compile errors show it.
fn go_rule(r: &Value) -> String {
    let s = |k: &str| format!("{:?}", r.get(k).and_then(Value::as_str).unwrap_or(""));
    let reason = match r.get("reason").and_then(Value::as_str) {
        Some(reason) => format!("(*apiextensions.FieldValueErrorReason)({reason:?})"),
        None => "(*apiextensions.FieldValueErrorReason)(nil)".to_owned(),
    };
    let optional = match r.get("optionalOldSelf").and_then(Value::as_bool) {
        Some(b) => format!("(*bool)({b})"),
        None => "(*bool)(nil)".to_owned(),
    };
    format!(
        "apiextensions.ValidationRule{{Rule:{}, Message:{}, MessageExpression:{}, Reason:{reason}, FieldPath:{}, OptionalOldSelf:{optional}}}",
        s("rule"),
        s("message"),
        s("messageExpression"),
        s("fieldPath")
    )
}

/// `.a.b`, `.a['b.c']` as path segments; `None` if malformed.
fn parse_field_path(path: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("['") {
            let end = r.find("']")?;
            out.push(r[..end].to_owned());
            rest = &r[end + 2..];
        } else if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            if end == 0 {
                return None;
            }
            out.push(r[..end].to_owned());
            rest = &r[end..];
        } else {
            return None;
        }
    }
    Some(out)
}

/// Whether `segments` lead to a field of `schema`.
fn field_exists(schema: &Value, segments: &[String]) -> bool {
    let Some((first, rest)) = segments.split_first() else { return true };
    if let Some(child) = schema.get("properties").and_then(|p| p.get(first)) {
        return field_exists(child, rest);
    }
    match schema.get("additionalProperties") {
        Some(a) if a.is_object() => field_exists(a, rest),
        _ => false,
    }
}

impl Rules {
    /// Compiles the rules of `schema` (an `openAPIV3Schema`); `path` is where the schema is in
    /// its definition, for the errors (`spec.validation.openAPIV3Schema`).
    pub fn compile(schema: &Value, path: &Path) -> Result<Rules, Vec<FieldError>> {
        let mut errs = Vec::new();
        let root = compile_node(schema, path, &mut errs);
        if errs.is_empty() {
            Ok(Rules { root: root.map(Arc::new) })
        } else {
            Err(errs)
        }
    }

    /// Compiles what compiles, leaving out rules that do not (a definition stored before its
    /// rules were checked), with the errors of those left out.
    pub fn compile_lenient(schema: &Value) -> (Rules, Vec<FieldError>) {
        let mut errs = Vec::new();
        let root = compile_node(schema, &Path::new(""), &mut errs);
        (Rules { root: root.map(Arc::new) }, errs)
    }

    /// Whether there are any rules.
    pub fn is_empty(&self) -> bool {
        self.root.is_none()
    }

    /// Runs the rules on `obj` (and, on update, `old`), as upstream: an error per failed rule,
    /// less the ratcheted ones.
    pub fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        self.validate_ratcheting(obj, old, &mut Vec::new())
    }

    /// As [`Rules::validate`], with the errors of the rules ratcheted on update (see the module
    /// documentation) added to `warnings`, as upstream's warning texts.
    pub fn validate_ratcheting(&self, obj: &Value, old: Option<&Value>, warnings: &mut Vec<String>) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if let Some(root) = &self.root {
            let mut budget = CostBudget::new(k1s_cel::RUNTIME_CEL_COST_BUDGET).with_timeout(EVAL_TIMEOUT);
            let unchanged = old.is_some_and(|o| o == obj);
            let mut out = Outcome { errs: &mut errs, warnings, budget: &mut budget };
            validate_node(root, obj, old, unchanged, &Path::new(""), &mut out);
        }
        errs
    }
}

fn compile_node(schema: &Value, path: &Path, errs: &mut Vec<FieldError>) -> Option<Node> {
    let mut node = Node { schema: schema.clone(), ..Node::default() };
    let vp = path.child("x-kubernetes-validations");
    for (i, r) in schema.get("x-kubernetes-validations").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let p = vp.index(i);
        let text = r.get("rule").and_then(Value::as_str).unwrap_or("");
        if text.trim().is_empty() {
            errs.push(FieldError::required(p.child("rule"), "rule is not specified"));
            continue;
        }
        let program = match Program::compile(text, &["self", "oldSelf"]) {
            Ok(p) => p,
            Err(e) => {
                errs.push(FieldError {
                    kind: FieldErrorType::Invalid,
                    field: p.child("rule").to_string(),
                    value: None,
                    detail: format!("{}: {e}", go_rule(r)),
                });
                continue;
            }
        };
        let message = r.get("message").and_then(Value::as_str).unwrap_or("").to_owned();
        if message.contains('\n') {
            errs.push(FieldError::invalid(
                p.child("message"),
                message.as_str(),
                "message must not contain line breaks",
            ));
        }
        let message_expression = match r.get("messageExpression").and_then(Value::as_str).filter(|m| !m.is_empty()) {
            Some(m) => match Program::compile(m, &["self", "oldSelf"]) {
                Ok(p) => Some(p),
                Err(e) => {
                    errs.push(FieldError {
                        kind: FieldErrorType::Invalid,
                        field: p.child("messageExpression").to_string(),
                        value: None,
                        detail: format!("{}: messageExpression {e}", go_rule(r)),
                    });
                    None
                }
            },
            None => None,
        };
        let reason = r.get("reason").and_then(Value::as_str).map(str::to_owned);
        if let Some(reason) = &reason {
            if !REASONS.contains(&reason.as_str()) {
                errs.push(FieldError::not_supported(p.child("reason"), reason.as_str(), &REASONS));
            }
        }
        let raw_field_path = r.get("fieldPath").and_then(Value::as_str).unwrap_or("");
        let field_path = if raw_field_path.is_empty() {
            Vec::new()
        } else {
            match parse_field_path(raw_field_path).filter(|s| field_exists(schema, s)) {
                Some(s) => s,
                None => {
                    errs.push(FieldError::invalid(
                        p.child("fieldPath"),
                        raw_field_path,
                        "fieldPath must be a valid path: does not refer to a valid field",
                    ));
                    Vec::new()
                }
            }
        };
        let optional_old_self = r.get("optionalOldSelf").and_then(Value::as_bool).unwrap_or(false);
        if optional_old_self && !program.uses("oldSelf") {
            errs.push(FieldError::invalid(
                p.child("optionalOldSelf"),
                true,
                "may not be set if rule does not use oldSelf",
            ));
        }
        node.rules.push(Rule {
            rule: text.to_owned(),
            message,
            message_expression,
            reason,
            field_path,
            optional_old_self,
            program,
        });
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        let pp = path.child("properties");
        for (k, s) in props {
            if let Some(child) = compile_node(s, &pp.key(k), errs) {
                node.properties.push((k.clone(), child));
            }
        }
    }
    if let Some(a) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        node.additional = compile_node(a, &path.child("additionalProperties"), errs).map(Box::new);
    }
    if let Some(items) = schema.get("items").filter(|a| a.is_object()) {
        node.items = compile_node(items, &path.child("items"), errs).map(Box::new);
    }
    let empty =
        node.rules.is_empty() && node.properties.is_empty() && node.additional.is_none() && node.items.is_none();
    (!empty).then_some(node)
}

/// `value` as CEL sees it under `schema`: numbers of `type: number` are doubles.
fn typed(value: &Value, schema: &Value) -> k1s_cel::Value {
    match value {
        Value::Number(n) if type_of(schema) == "number" => k1s_cel::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        Value::Object(map)
            if !flag(schema, "x-kubernetes-preserve-unknown-fields") || schema.get("properties").is_some() =>
        {
            let props = schema.get("properties").and_then(Value::as_object);
            let extra = schema.get("additionalProperties").filter(|a| a.is_object());
            k1s_cel::map(map.iter().map(|(k, v)| {
                let child = props.and_then(|p| p.get(k)).or(extra);
                (k.clone(), child.map_or_else(|| k1s_cel::from_json(v), |s| typed(v, s)))
            }))
        }
        Value::Array(items) => match schema.get("items") {
            Some(s) => k1s_cel::Value::List(Arc::new(items.iter().map(|v| typed(v, s)).collect())),
            None => k1s_cel::from_json(value),
        },
        other => k1s_cel::from_json(other),
    }
}

/// The item of `old` with the same `x-kubernetes-list-map-keys` as `item`.
fn correlated_item<'a>(schema: &Value, item: &Value, old: Option<&'a Value>) -> Option<&'a Value> {
    if schema.get("x-kubernetes-list-type").and_then(Value::as_str) != Some("map") {
        return None;
    }
    let keys: Vec<&str> =
        schema.get("x-kubernetes-list-map-keys")?.as_array()?.iter().filter_map(Value::as_str).collect();
    old?.as_array()?.iter().find(|o| keys.iter().all(|k| o.get(k) == item.get(k)))
}

/// Where one validation's errors, ratcheted errors and cost go.
struct Outcome<'a> {
    errs: &'a mut Vec<FieldError>,
    warnings: &'a mut Vec<String>,
    budget: &'a mut CostBudget,
}

/// Whether a value whose old value is `old` is unchanged, for ratcheting: equal to its old value
/// if it has one, else as unchanged as its parent (`parent_unchanged`).
fn ratchet(value: &Value, old: Option<&Value>, parent_unchanged: bool) -> bool {
    old.map_or(parent_unchanged, |o| o == value)
}

/// `unchanged`: whether the errors of `obj`'s rules are ratcheted (see the module documentation).
fn validate_node(
    node: &Node,
    obj: &Value,
    old: Option<&Value>,
    unchanged: bool,
    path: &Path,
    out: &mut Outcome<'_>,
) -> bool {
    // Rules validate non-null values only.
    if obj.is_null() {
        return true;
    }
    let old = old.filter(|o| !o.is_null());
    if !node.rules.is_empty() && !run_rules(node, obj, old, unchanged, path, out) {
        return false;
    }
    match obj {
        Value::Object(map) => {
            let old_map: Option<&Map<String, Value>> = old.and_then(Value::as_object);
            // apiVersion and kind are not ratcheted: both sides carry the requested version's.
            let root = path.as_str().is_empty();
            let child_unchanged = |k: &str, v: &Value, o: Option<&Value>| {
                !(root && (k == "apiVersion" || k == "kind")) && ratchet(v, o, unchanged)
            };
            for (k, child) in &node.properties {
                if let Some(v) = map.get(k) {
                    let o = old_map.and_then(|m| m.get(k));
                    if !validate_node(child, v, o, child_unchanged(k, v, o), &path.child(k), out) {
                        return false;
                    }
                }
            }
            if let Some(child) = &node.additional {
                for (k, v) in map {
                    let o = old_map.and_then(|m| m.get(k));
                    if !validate_node(child, v, o, child_unchanged(k, v, o), &path.key(k), out) {
                        return false;
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(child) = &node.items {
                let set = node.schema.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("set");
                for (i, v) in items.iter().enumerate() {
                    let o = correlated_item(&node.schema, v, old);
                    // A set's item is correlated with an equal old item, for ratcheting only.
                    let same = if set { old.and_then(Value::as_array).is_some_and(|a| a.contains(v)) } else { false };
                    let item_unchanged = same || ratchet(v, o, unchanged);
                    if !validate_node(child, v, o, item_unchanged, &path.index(i), out) {
                        return false;
                    }
                }
            }
        }
        _ => {}
    }
    true
}

/// Runs the rules of one node; false once the budget is spent (no further rules run).
fn run_rules(
    node: &Node,
    obj: &Value,
    old: Option<&Value>,
    unchanged: bool,
    path: &Path,
    out: &mut Outcome<'_>,
) -> bool {
    let Outcome { errs, warnings, budget } = out;
    let ty = type_of(&node.schema).to_owned();
    let invalid = |detail: String| FieldError::invalid(path.as_str(), ty.as_str(), detail);
    if budget.exhausted() {
        errs.push(invalid(
            "validation failed due to running out of cost budget, no further validation rules will be run".into(),
        ));
        return false;
    }
    let this = typed(obj, &node.schema);
    let before = old.map(|o| typed(o, &node.schema));
    let mut vars = Activation::new();
    vars.bind("self", this.clone());
    if let Some(b) = &before {
        vars.bind("oldSelf", b.clone());
    }
    let mut optional_vars = Activation::new();
    optional_vars.bind("self", this).bind("oldSelf", k1s_cel::optional(before));
    for rule in &node.rules {
        let uses_old = rule.program.uses("oldSelf");
        if uses_old && old.is_none() && !rule.optional_old_self {
            continue;
        }
        let activation = if rule.optional_old_self { &optional_vars } else { &vars };
        let error_string = if rule.message.trim().is_empty() { rule.rule.trim() } else { rule.message.trim() };
        match rule.program.eval(activation, budget) {
            Ok(k1s_cel::Value::Bool(true)) => continue,
            Ok(k1s_cel::Value::Bool(false)) => {}
            Ok(other) => {
                errs.push(invalid(format!(
                    "rule did not evaluate to a bool (got {}) evaluating rule: {error_string}",
                    k1s_cel::type_name(&other)
                )));
                continue;
            }
            Err(EvalError::CostLimitExceeded) if budget.exhausted() => {
                errs.push(invalid(
                    "validation failed due to running out of cost budget, no further validation rules will be run"
                        .into(),
                ));
                return false;
            }
            Err(e @ (EvalError::CostLimitExceeded | EvalError::Timeout)) => {
                errs.push(invalid(format!(
                    "'{e}': no further validation rules will be run due to call cost exceeds limit for rule: {error_string}"
                )));
                return false;
            }
            Err(e) => {
                let e = e.to_string();
                if e.starts_with("no such overload") {
                    errs.push(invalid(format!("'{e}': call arguments did not match a supported operator, function or macro signature for rule: {error_string}")));
                } else {
                    errs.push(invalid(format!("{e} evaluating rule: {error_string}")));
                }
                continue;
            }
        }
        let mut field = path.clone();
        for segment in &rule.field_path {
            field = field.child(segment);
        }
        let detail = rule
            .message_expression
            .as_ref()
            .and_then(|m| m.eval_string(activation, budget).ok())
            .map(|m| m.trim().to_owned())
            .filter(|m| !m.is_empty() && !m.contains('\n'))
            .unwrap_or_else(|| {
                if rule.message.trim().is_empty() {
                    format!("failed rule: {error_string}")
                } else {
                    rule.message.trim().to_owned()
                }
            });
        let err = match rule.reason.as_deref() {
            Some("FieldValueForbidden") => FieldError::forbidden(field, detail),
            Some("FieldValueRequired") => FieldError::required(field, detail),
            Some("FieldValueDuplicate") => FieldError::duplicate(field, ty.as_str()),
            _ => FieldError::invalid(field, ty.as_str(), detail),
        };
        // Ratcheting: a rule without oldSelf that fails on an unchanged value only warns.
        if unchanged && !rule.program.uses("oldSelf") {
            warnings.push(err.to_string());
        } else {
            errs.push(err);
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(rules: Value) -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": rules,
            "properties": {"size": {"type": "integer"}, "ratio": {"type": "number"},
                "items": {"type": "array", "items": {"type": "string", "x-kubernetes-validations": [{"rule": "self.size() < 4", "message": "short"}]}}}}}})
    }

    fn errors(rules: Value, obj: Value, old: Option<Value>) -> Vec<String> {
        let r = Rules::compile(&schema(rules), &Path::new("spec.validation.openAPIV3Schema")).expect("compiles");
        r.validate(&obj, old.as_ref()).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_failed_rule_reports_its_message_at_its_level() {
        let rules = json!([{"rule": "self.size <= 10", "message": "size must be at most 10"}]);
        assert_eq!(
            errors(rules.clone(), json!({"spec": {"size": 50}}), None),
            ["spec: Invalid value: \"object\": size must be at most 10"]
        );
        assert!(errors(rules, json!({"spec": {"size": 5}}), None).is_empty());
        let rules = json!([{"rule": "self.size <= 10", "fieldPath": ".size", "reason": "FieldValueForbidden"}]);
        assert_eq!(
            errors(rules, json!({"spec": {"size": 50}}), None),
            ["spec.size: Forbidden: failed rule: self.size <= 10"]
        );
        let rules =
            json!([{"rule": "self.size <= 10", "messageExpression": "'size ' + string(self.size) + ' is too big'"}]);
        assert_eq!(
            errors(rules, json!({"spec": {"size": 50}}), None),
            ["spec: Invalid value: \"object\": size 50 is too big"]
        );
        assert_eq!(
            errors(json!([]), json!({"spec": {"items": ["ab", "abcdef"]}}), None),
            ["spec.items[1]: Invalid value: \"string\": short"]
        );
    }

    #[test]
    fn numbers_are_doubles_and_missing_keys_are_errors() {
        assert!(errors(json!([{"rule": "self.ratio == 2.0"}]), json!({"spec": {"ratio": 2}}), None).is_empty());
        assert_eq!(
            errors(json!([{"rule": "self.size > 1"}]), json!({"spec": {}}), None),
            ["spec: Invalid value: \"object\": no such key: size evaluating rule: self.size > 1"]
        );
    }

    #[test]
    fn transition_rules_run_on_update_only() {
        let rules = json!([{"rule": "self.size >= oldSelf.size", "message": "size may not decrease"}]);
        assert!(errors(rules.clone(), json!({"spec": {"size": 1}}), None).is_empty());
        assert!(errors(rules.clone(), json!({"spec": {"size": 3}}), Some(json!({"spec": {"size": 2}}))).is_empty());
        assert_eq!(
            errors(rules, json!({"spec": {"size": 1}}), Some(json!({"spec": {"size": 2}}))),
            ["spec: Invalid value: \"object\": size may not decrease"]
        );
        let rules =
            json!([{"rule": "!oldSelf.hasValue() || self.size >= oldSelf.value().size", "optionalOldSelf": true}]);
        assert!(errors(rules, json!({"spec": {"size": 1}}), None).is_empty());
    }

    #[test]
    fn rules_that_do_not_compile_make_the_definition_invalid() {
        let errs =
            Rules::compile(&schema(json!([{"rule": "self.size <<"}])), &Path::new("spec.validation.openAPIV3Schema"))
                .expect_err("refused");
        let text = errs[0].to_string();
        assert!(
            text.starts_with("spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{Rule:\"self.size <<\", Message:\"\", MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: <input>:1:"),
            "{text}"
        );
        let errs = Rules::compile(
            &schema(json!([{"rule": "self.size > 1", "reason": "Bad", "fieldPath": ".nope"}])),
            &Path::new("x"),
        )
        .expect_err("refused");
        assert_eq!(errs.len(), 2, "{errs:?}");
    }

    fn ratcheted(rules: Value, obj: Value, old: Value) -> (Vec<String>, Vec<String>) {
        let r = Rules::compile(&schema(rules), &Path::new("")).expect("compiles");
        let mut warnings = Vec::new();
        let errs = r.validate_ratcheting(&obj, Some(&old), &mut warnings).iter().map(ToString::to_string).collect();
        (errs, warnings)
    }

    #[test]
    fn failures_on_unchanged_values_are_ratcheted_to_warnings() {
        let s = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "size": {"type": "integer", "x-kubernetes-validations": [{"rule": "self <= 5", "message": "at most 5"}]},
            "name": {"type": "string"},
            "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "x-kubernetes-validations": [{"rule": "self.port < 100", "message": "low port"}],
                    "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}},
            "tags": {"type": "array", "items": {"type": "string", "x-kubernetes-validations": [{"rule": "self.size() < 3", "message": "short tag"}]}}}}}});
        let r = Rules::compile(&s, &Path::new("")).expect("compiles");
        let run = |obj: Value, old: Option<Value>| {
            let mut warnings = Vec::new();
            let errs: Vec<String> =
                r.validate_ratcheting(&obj, old.as_ref(), &mut warnings).iter().map(ToString::to_string).collect();
            (errs, warnings)
        };
        let old = json!({"spec": {"size": 8, "name": "a", "ports": [{"name": "x", "port": 500}], "tags": ["long"]}});
        // Another field changed: the unchanged size, port item and atomic-list item only warn.
        let (errs, warnings) = run(
            json!({"spec": {"size": 8, "name": "b", "ports": [{"name": "x", "port": 500}], "tags": ["long"]}}),
            Some(old.clone()),
        );
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(
            warnings,
            [
                "spec.size: Invalid value: \"integer\": at most 5",
                "spec.ports[0]: Invalid value: \"object\": low port",
                "spec.tags[0]: Invalid value: \"string\": short tag"
            ]
        );
        // The ratcheted values changed (to other invalid values): enforced.
        let (errs, warnings) = run(
            json!({"spec": {"size": 9, "name": "a", "ports": [{"name": "y", "port": 500}, {"name": "x", "port": 500}], "tags": ["long", "x"]}}),
            Some(old.clone()),
        );
        assert_eq!(
            errs,
            [
                "spec.size: Invalid value: \"integer\": at most 5",
                "spec.ports[0]: Invalid value: \"object\": low port",
                "spec.tags[0]: Invalid value: \"string\": short tag"
            ]
        );
        // The map-list item `x`, found by its key, is unchanged: it warns; `long` is the item of a
        // changed atomic list, which has no old value of its own: enforced.
        assert_eq!(warnings, ["spec.ports[1]: Invalid value: \"object\": low port"]);
        // On create, nothing is ratcheted.
        assert_eq!(run(old.clone(), None).0.len(), 3);
        // A transition rule is never ratcheted.
        let (errs, warnings) = ratcheted(
            json!([{"rule": "self.size == oldSelf.size + 1", "message": "must grow by one"}]),
            json!({"spec": {"size": 1, "name": "b"}}),
            json!({"spec": {"size": 1, "name": "a"}}),
        );
        assert_eq!((errs.len(), warnings.len()), (1, 0), "{errs:?}");
        let (errs, warnings) = ratcheted(
            json!([{"rule": "self.size == 2", "message": "two"}]),
            json!({"spec": {"size": 1}}),
            json!({"spec": {"size": 1}}),
        );
        assert!(errs.is_empty() && warnings == ["spec: Invalid value: \"object\": two"], "{errs:?} {warnings:?}");
    }

    #[test]
    fn a_runaway_rule_is_cut_off() {
        let s = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"items": {"type": "array", "items": {"type": "integer"}}},
            "x-kubernetes-validations": [{"rule": "self.items.all(x, self.items.all(y, self.items.all(z, x + y + z >= 0)))"}]}}});
        let r = Rules::compile(&s, &Path::new("")).expect("compiles");
        let items: Vec<i64> = (0..100).collect();
        let errs: Vec<String> =
            r.validate(&json!({"spec": {"items": items}}), None).iter().map(ToString::to_string).collect();
        assert_eq!(errs.len(), 1);
        assert!(errs[0].contains("operation cancelled: actual cost limit exceeded"), "{errs:?}");
    }
}
