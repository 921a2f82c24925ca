//! The seam to the CEL engine ([`k1s_cel`]): compile an expression once, evaluate it against
//! named JSON values within one cost budget per evaluation. Everything CEL-specific of the
//! admission policies and the webhooks' match conditions goes through here.

use serde_json::Value;

/// The variables of a policy's expressions (`params` only with a `paramKind`); `authorizer`
/// (with `authorizer.requestResource`) is bound by [`Bindings::bind`].
pub fn policy_vars(has_params: bool) -> &'static [&'static str] {
    if has_params {
        &["object", "oldObject", "request", "namespaceObject", "variables", "authorizer", "params"]
    } else {
        &["object", "oldObject", "request", "namespaceObject", "variables", "authorizer"]
    }
}

/// The variables of a webhook's match conditions.
pub const WEBHOOK_VARS: &[&str] = &["object", "oldObject", "request"];

/// A compiled expression.
pub struct Program(k1s_cel::Program);

/// The values of one evaluation (`object`, `oldObject`, `request`, `params`,
/// `namespaceObject`, `variables`) and the cost budget its expressions share (upstream's
/// `RuntimeCELCostBudget`).
pub struct Bindings {
    activation: k1s_cel::Activation,
    budget: k1s_cel::CostBudget,
}

impl Bindings {
    pub fn new(vars: &serde_json::Map<String, Value>) -> Bindings {
        Bindings::of(vars.iter().map(|(k, v)| (k.as_str(), v)))
    }

    /// [`Bindings::new`] from named values borrowed from wherever they are.
    pub fn of<'v>(vars: impl IntoIterator<Item = (&'v str, &'v Value)>) -> Bindings {
        let mut activation = k1s_cel::Activation::new();
        for (k, v) in vars {
            activation.bind_json(k, v);
        }
        Bindings { activation, budget: k1s_cel::CostBudget::new(k1s_cel::RUNTIME_CEL_COST_BUDGET) }
    }

    /// Binds (or rebinds) `name`.
    pub fn set(&mut self, name: &str, value: &Value) {
        self.activation.bind_json(name, value);
    }

    /// Binds (or rebinds) `name` to the parts of `value` that `paths` read: for expressions
    /// that read no more of it (see [`Program::paths`]).
    pub fn set_paths(&mut self, name: &str, value: &Value, paths: &k1s_cel::Paths) {
        self.activation.bind_json_paths(name, value, paths);
    }

    /// Binds `name` to a CEL value that JSON cannot hold (the `authorizer`).
    pub fn bind(&mut self, name: &str, value: k1s_cel::Value) {
        self.activation.bind(name, value);
    }
}

/// Compiles `source` with `vars` declared; the error is the engine's message
/// (`compilation failed: ERROR: <input>:1:5: ...`).
pub fn compile(source: &str, vars: &[&str]) -> Result<Program, String> {
    k1s_cel::Program::compile(source, vars).map(Program).map_err(|e| e.to_string())
}

impl Program {
    /// Evaluates against `vars`, charging their budget; the error is the engine's message.
    pub fn eval(&self, vars: &mut Bindings) -> Result<Value, String> {
        self.0.eval_json(&vars.activation, &mut vars.budget).map_err(|e| e.to_string())
    }

    /// Whether the expression names the declared variable `var`.
    pub fn uses(&self, var: &str) -> bool {
        self.0.uses(var)
    }

    /// The parts of the declared variable `var` the expression reads.
    pub fn paths(&self, var: &str) -> k1s_cel::Paths {
        self.0.paths(var)
    }
}
