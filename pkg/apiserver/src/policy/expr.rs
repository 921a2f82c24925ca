//! The seam to the CEL engine: compile an expression once, evaluate it against named JSON
//! values. Everything CEL-specific of the admission policies goes through here.

use serde_json::{Map, Value};

/// A compiled expression.
pub struct Program {
    _source: String,
}

/// The values of one evaluation (`object`, `oldObject`, `request`, `params`,
/// `namespaceObject`, `variables`) and the cost budget they share.
pub struct Bindings {
    vars: Map<String, Value>,
}

impl Bindings {
    pub fn new(vars: &Map<String, Value>) -> Bindings {
        Bindings { vars: vars.clone() }
    }

    /// Binds (or rebinds) `name`.
    pub fn set(&mut self, name: &str, value: &Value) {
        self.vars.insert(name.into(), value.clone());
    }
}

/// Compiles `source`; the error is the engine's message.
pub fn compile(source: &str) -> Result<Program, String> {
    let _ = source;
    Err("the CEL engine is not available".into())
}

impl Program {
    /// Evaluates against `vars`; the error is the engine's message.
    pub fn eval(&self, vars: &mut Bindings) -> Result<Value, String> {
        let _ = &vars.vars;
        Err("the CEL engine is not available".into())
    }
}
