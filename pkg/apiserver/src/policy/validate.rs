//! A ValidatingAdmissionPolicy compiled (each expression once per generation) and evaluated
//! against one request and one parameter object, as upstream's `validator.Validate`:
//! `matchConditions` first (any false skips the policy; errors follow `failurePolicy`), then
//! every validation (false denies with `messageExpression`, `message` or the expression as the
//! message and `reason`, Invalid unless given), then `auditAnnotations`. `variables` are
//! evaluated lazily, once per evaluation, when an expression names them.

use super::expr::{self, Bindings, Program};
use serde_json::{Map, Value};
use std::collections::HashMap;

/// Upstream's `MaxEvaluatedMessageExpressionSizeBytes`.
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

/// One expression with the outcome of its compilation.
pub struct Compiled {
    pub source: String,
    pub program: Result<Program, String>,
}

impl Compiled {
    /// Compiles `source` with `vars` declared.
    pub fn new(source: &str, vars: &[&str]) -> Compiled {
        Compiled { source: source.to_string(), program: expr::compile(source, vars) }
    }
}

pub struct Validation {
    pub expression: Compiled,
    pub message: Option<String>,
    pub message_expression: Option<Compiled>,
    pub reason: Option<String>,
}

/// A policy ready to evaluate.
pub struct Policy {
    pub name: String,
    pub uid: String,
    pub generation: i64,
    pub spec: Value,
    pub fail_open: bool,
    pub match_conditions: Vec<(String, Compiled)>,
    pub variables: Vec<(String, Compiled)>,
    pub validations: Vec<Validation>,
    pub audit_annotations: Vec<(String, Compiled)>,
    /// The variables any of its expressions names: only these are built and bound per request.
    pub uses: Vec<&'static str>,
    /// The parts of the request's objects (`object`, `oldObject`) its expressions read: only
    /// these are converted to CEL values per request.
    pub reads: Vec<(&'static str, k1s_cel::Paths)>,
}

/// The variables bound with only the parts the policy's expressions read.
const PRUNED_VARS: [&str; 2] = ["object", "oldObject"];

fn text(v: &Value, k: &str) -> Option<String> {
    v.get(k).and_then(Value::as_str).map(str::to_string)
}

fn list<'a>(v: &'a Value, k: &str) -> &'a [Value] {
    v.get(k).and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[])
}

impl Policy {
    /// Compiles every expression of `obj` (a ValidatingAdmissionPolicy).
    pub fn compile(obj: &Value) -> Policy {
        let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
        let vars = expr::policy_vars(spec.get("paramKind").is_some_and(|p| !p.is_null()));
        let named = |k: &str, field: &str| -> Vec<(String, Compiled)> {
            list(&spec, k)
                .iter()
                .map(|c| {
                    (
                        text(c, field).unwrap_or_default(),
                        Compiled::new(&text(c, "expression").unwrap_or_default(), vars),
                    )
                })
                .collect()
        };
        let validations = list(&spec, "validations")
            .iter()
            .map(|v| Validation {
                expression: Compiled::new(&text(v, "expression").unwrap_or_default(), vars),
                message: text(v, "message"),
                message_expression: text(v, "messageExpression")
                    .filter(|s| !s.is_empty())
                    .map(|s| Compiled::new(&s, vars)),
                reason: text(v, "reason").filter(|s| !s.is_empty()),
            })
            .collect();
        let audit_annotations = list(&spec, "auditAnnotations")
            .iter()
            .map(|a| {
                (
                    text(a, "key").unwrap_or_default(),
                    Compiled::new(&text(a, "valueExpression").unwrap_or_default(), vars),
                )
            })
            .collect();
        let mut policy = Policy {
            name: obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string(),
            uid: obj.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default().to_string(),
            generation: obj.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0),
            fail_open: spec.get("failurePolicy").and_then(Value::as_str) == Some("Ignore"),
            match_conditions: named("matchConditions", "name"),
            variables: named("variables", "name"),
            validations,
            audit_annotations,
            spec,
            uses: Vec::new(),
            reads: Vec::new(),
        };
        policy.uses = vars
            .iter()
            .copied()
            .filter(|v| policy.expressions().iter().any(|(_, c)| c.program.as_ref().is_ok_and(|p| p.uses(v))))
            .collect();
        policy.reads = PRUNED_VARS
            .iter()
            .map(|var| {
                let mut paths = k1s_cel::Paths::default();
                for (_, c) in policy.expressions() {
                    if let Ok(p) = &c.program {
                        paths.union(&p.paths(var));
                    }
                }
                (*var, paths)
            })
            .collect();
        policy
    }

    /// Whether an expression of the policy names the variable `var` (`object`, `request`, ...).
    pub fn uses(&self, var: &str) -> bool {
        self.uses.contains(&var)
    }

    /// Every expression with its field path, for status and errors.
    pub fn expressions(&self) -> Vec<(String, &Compiled)> {
        let mut all = Vec::new();
        for (i, (_, c)) in self.match_conditions.iter().enumerate() {
            all.push((format!("spec.matchConditions[{i}].expression"), c));
        }
        for (i, (_, c)) in self.variables.iter().enumerate() {
            all.push((format!("spec.variables[{i}].expression"), c));
        }
        for (i, v) in self.validations.iter().enumerate() {
            all.push((format!("spec.validations[{i}].expression"), &v.expression));
            if let Some(m) = &v.message_expression {
                all.push((format!("spec.validations[{i}].messageExpression"), m));
            }
        }
        for (i, (_, c)) in self.audit_annotations.iter().enumerate() {
            all.push((format!("spec.auditAnnotations[{i}].valueExpression"), c));
        }
        all
    }

    /// Evaluates the policy against the request in `vars` (without `variables`).
    #[cfg(test)]
    pub fn evaluate(&self, vars: Map<String, Value>) -> Outcome {
        let vars: Vec<(&str, &Value)> = vars.iter().map(|(k, v)| (k.as_str(), v)).collect();
        self.evaluate_with(&vars, &[])
    }

    /// As [`Policy::evaluate`], with `extra` CEL values bound too (the `authorizer`).
    pub fn evaluate_with(&self, vars: &[(&str, &Value)], extra: &[(&str, k1s_cel::Value)]) -> Outcome {
        let mut bindings = Bindings::of(vars.iter().copied().filter(|(name, _)| !PRUNED_VARS.contains(name)));
        for (name, value) in vars {
            if let Some((_, paths)) = self.reads.iter().find(|(var, _)| var == name) {
                bindings.set_paths(name, value, paths);
            }
        }
        // `authorizer.requestResource` goes with `authorizer`: bound only when an expression reads it.
        for (name, value) in extra.iter().filter(|(name, _)| self.uses(name.split('.').next().unwrap_or(name))) {
            bindings.bind(name, value.clone());
        }
        let mut ctx = Eval { vars: bindings, variables: &self.variables, values: HashMap::new() };
        let error_decision = |message: String| Decision { deny: !self.fail_open, message, reason: None, error: true };
        match ctx.conditions(&self.match_conditions, self.fail_open) {
            Ok(true) => {}
            Ok(false) => return Outcome::default(),
            Err(e) => return Outcome { decisions: vec![error_decision(e)], ..Outcome::default() },
        }
        let mut out = Outcome::default();
        for v in &self.validations {
            let decision = match ctx.eval(&v.expression) {
                Err(e) => error_decision(e),
                Ok(Value::Bool(true)) => Decision { deny: false, message: String::new(), reason: None, error: false },
                Ok(_) => {
                    Decision { deny: true, message: self.message(&mut ctx, v), reason: v.reason.clone(), error: false }
                }
            };
            out.decisions.push(decision);
        }
        for (key, c) in &self.audit_annotations {
            match ctx.eval(c) {
                Err(e) if !self.fail_open => out.annotation_errors.push(e),
                Err(_) | Ok(Value::Null) => {}
                Ok(Value::String(s)) if s.trim().is_empty() => {}
                Ok(Value::String(s)) => out.annotations.push((key.clone(), s.trim().to_string())),
                Ok(other) => {
                    let message = format!(
                        "valueExpression '{}' resulted in unsupported return type: {}. Return type must be either string or null.",
                        c.source,
                        type_name(&other)
                    );
                    out.annotation_errors.push(message);
                }
            }
        }
        out
    }

    /// A failed validation's message: its `messageExpression` when that gives a usable
    /// string, else its `message`, else the expression.
    fn message(&self, ctx: &mut Eval<'_>, v: &Validation) -> String {
        if let Some(m) = &v.message_expression {
            match ctx.eval(m) {
                Ok(Value::String(s)) => {
                    let s = s.trim();
                    if !s.is_empty() && s.len() <= MAX_MESSAGE_BYTES && !s.contains('\n') {
                        return s.to_string();
                    }
                }
                Ok(_) => {}
                Err(e) => tracing::debug!(policy = %self.name, error = %e, "messageExpression failed"),
            }
        }
        match v.message.as_deref().map(str::trim).filter(|m| !m.is_empty()) {
            Some(m) => m.to_string(),
            None => format!("failed expression: {}", v.expression.source.trim()),
        }
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null_type",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "double",
        Value::Number(_) => "int",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "map",
    }
}

/// Upstream's `utilerrors.NewAggregate(..).Error()`.
fn aggregate(errors: &[String]) -> String {
    match errors {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// `matchConditions` (name, expression) against `vars` (upstream's `matchconditions.Matcher`):
/// any false does not match; otherwise errors fail (`Err`, all of them) or, when `fail_open`,
/// do not match.
pub fn conditions_match(
    conditions: &[(String, Compiled)],
    vars: Map<String, Value>,
    fail_open: bool,
) -> Result<bool, String> {
    if conditions.is_empty() {
        return Ok(true);
    }
    Eval { vars: Bindings::new(&vars), variables: &[], values: HashMap::new() }.conditions(conditions, fail_open)
}

/// What one evaluation decided: each validation's verdict (and errors), and the audit
/// annotations to publish.
#[derive(Default, Debug)]
pub struct Outcome {
    pub decisions: Vec<Decision>,
    pub annotations: Vec<(String, String)>,
    /// Audit annotations that failed (under `Fail`): these deny whatever the actions.
    pub annotation_errors: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub deny: bool,
    pub message: String,
    /// `None`: Invalid.
    pub reason: Option<String>,
    /// The decision comes from an error rather than a false validation.
    pub error: bool,
}

/// One evaluation's variables: the request's values and the `variables` computed so far.
struct Eval<'p> {
    vars: Bindings,
    variables: &'p [(String, Compiled)],
    values: HashMap<String, Option<Result<Value, String>>>,
}

/// The names `source` reads as `variables.<name>`; `None` when it reaches `variables` some
/// other way (then all are computed).
fn referenced(source: &str) -> Option<Vec<&str>> {
    let mut names = Vec::new();
    let mut rest = source;
    while let Some(i) = rest.find("variables") {
        let before = source.len() - rest.len() + i;
        let prev = source[..before].chars().next_back();
        rest = &rest[i + "variables".len()..];
        if prev.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.') {
            continue;
        }
        let after = rest.trim_start().strip_prefix('.')?;
        let after = after.trim_start();
        let end = after.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(after.len());
        names.push(&after[..end]);
    }
    Some(names)
}

impl Eval<'_> {
    fn conditions(&mut self, conditions: &[(String, Compiled)], fail_open: bool) -> Result<bool, String> {
        let mut errors = Vec::new();
        for (_, c) in conditions {
            match self.eval(c) {
                Ok(Value::Bool(false)) => return Ok(false),
                Ok(_) => {}
                Err(e) => errors.push(e),
            }
        }
        match errors.is_empty() {
            true => Ok(true),
            false if fail_open => Ok(false),
            false => Err(aggregate(&errors)),
        }
    }

    fn eval(&mut self, c: &Compiled) -> Result<Value, String> {
        let program = c.program.as_ref().map_err(|e| format!("compilation error: {e}"))?;
        let wanted: Vec<String> = match referenced(&c.source) {
            Some(names) => names.into_iter().map(str::to_string).collect(),
            None => self.variables.iter().map(|(n, _)| n.clone()).collect(),
        };
        let mut variables = Map::new();
        for name in wanted {
            if let Some(v) = self.variable(&name)? {
                variables.insert(name, v);
            }
        }
        self.vars.set("variables", &Value::Object(variables));
        program.eval(&mut self.vars).map_err(|e| format!("expression '{}' resulted in error: {e}", c.source))
    }

    /// The value of variable `name` (`None` when the policy has no such variable).
    fn variable(&mut self, name: &str) -> Result<Option<Value>, String> {
        match self.values.get(name) {
            Some(Some(r)) => return r.clone().map(Some),
            Some(None) => return Err(format!("variable \"{name}\" refers to itself")),
            None => {}
        }
        let variables = self.variables;
        let Some((_, c)) = variables.iter().find(|(n, _)| n == name) else { return Ok(None) };
        self.values.insert(name.to_string(), None);
        let r = self.eval(c);
        self.values.insert(name.to_string(), Some(r.clone()));
        r.map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn variable_references_are_found_in_expressions() {
        assert_eq!(referenced("variables.a > 1 && variables.b_2.size() == 0"), Some(vec!["a", "b_2"]));
        assert_eq!(referenced("object.spec.replicas < 5"), Some(vec![]));
        assert_eq!(referenced("myvariables.x == 1"), Some(vec![]));
        assert_eq!(referenced("variables['a']"), None);
    }

    fn vars(replicas: i64) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert(
            "object".into(),
            json!({"metadata": {"name": "web", "labels": {"tier": "db"}}, "spec": {"replicas": replicas}}),
        );
        m.insert("oldObject".into(), Value::Null);
        m.insert("request".into(), json!({"operation": "CREATE", "userInfo": {"username": "alice"}}));
        m.insert("namespaceObject".into(), Value::Null);
        m
    }

    fn policy(spec: Value) -> Policy {
        Policy::compile(&json!({"metadata": {"name": "p", "uid": "u", "generation": 1}, "spec": spec}))
    }

    #[test]
    fn validations_deny_with_their_message_expression_message_or_expression() {
        let p = policy(json!({
        "variables": [{"name": "r", "expression": "object.spec.replicas"}],
        "validations": [
            {"expression": "variables.r <= 5", "messageExpression": "'too many: ' + string(variables.r)", "reason": "Forbidden"},
            {"expression": "variables.r <= 4", "message": " at most four "},
            {"expression": "variables.r <= 3 "},
            {"expression": "variables.r <= 2", "messageExpression": "1", "message": "fallback"},
        ]}));
        let out = p.evaluate(vars(6));
        let got: Vec<(bool, &str, Option<&str>)> =
            out.decisions.iter().map(|d| (d.deny, d.message.as_str(), d.reason.as_deref())).collect();
        assert_eq!(
            got,
            [
                (true, "too many: 6", Some("Forbidden")),
                (true, "at most four", None),
                (true, "failed expression: variables.r <= 3", None),
                (true, "fallback", None)
            ]
        );
        assert!(p.evaluate(vars(1)).decisions.iter().all(|d| !d.deny));
    }

    #[test]
    fn match_conditions_skip_and_errors_follow_the_failure_policy() {
        let spec = json!({"matchConditions": [{"name": "db", "expression": "object.metadata.labels.tier == 'db'"}],
                          "validations": [{"expression": "false"}]});
        assert_eq!(policy(spec.clone()).evaluate(vars(1)).decisions.len(), 1);
        let mut other = spec.clone();
        other["matchConditions"][0]["expression"] = json!("object.metadata.labels.tier == 'web'");
        assert!(policy(other).evaluate(vars(1)).decisions.is_empty(), "a false condition skips the policy");
        let mut broken = spec;
        broken["matchConditions"][0]["expression"] = json!("object.metadata.labels.missing == 'x'");
        let out = policy(broken.clone()).evaluate(vars(1));
        assert_eq!(out.decisions.len(), 1);
        assert!(out.decisions[0].deny && out.decisions[0].error);
        assert!(
            out.decisions[0]
                .message
                .starts_with("expression 'object.metadata.labels.missing == 'x'' resulted in error: "),
            "{}",
            out.decisions[0].message
        );
        broken["failurePolicy"] = json!("Ignore");
        assert!(policy(broken).evaluate(vars(1)).decisions.is_empty());
    }

    #[test]
    fn audit_annotations_publish_strings_and_fail_on_other_types() {
        let p = policy(json!({"auditAnnotations": [
            {"key": "who", "valueExpression": "request.userInfo.username"},
            {"key": "none", "valueExpression": "null"},
            {"key": "bad", "valueExpression": "1"}]}));
        let out = p.evaluate(vars(1));
        assert_eq!(out.annotations, [("who".to_string(), "alice".to_string())]);
        assert_eq!(
            out.annotation_errors,
            ["valueExpression '1' resulted in unsupported return type: int. Return type must be either string or null."]
        );
    }

    #[test]
    fn errors_aggregate_as_upstream() {
        assert_eq!(aggregate(&["a".into()]), "a");
        assert_eq!(aggregate(&["a".into(), "b".into()]), "[a, b]");
    }
}
