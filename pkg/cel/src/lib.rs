//! The Kubernetes CEL environment of k1s: compile an expression once, evaluate it many times
//! against JSON values, within a cost budget.
//!
//! Built on the `cel` crate (parser, macros, standard library, the `strings`, `lists` and `math`
//! extensions); this crate adds what Kubernetes declares on top (`pkg/cel/library` upstream):
//! the Kubernetes list functions (`isSorted`, `sum`, `min`, `max`, `indexOf`, `lastIndexOf`),
//! regex `find`/`findAll`, quantities (`quantity`, `isQuantity`, `isGreaterThan`, `isLessThan`,
//! `compareTo`, `add`, `sub`, `sign`, `isInteger`, `asInteger`, `asApproximateFloat`), URLs
//! (`url`, `isURL`, `getScheme`, `getHost`, `getHostname`, `getPort`, `getEscapedPath`,
//! `getQuery`), IP addresses and CIDRs (`ip`, `isIP`, `ip.isCanonical`, `cidr`, `isCIDR` and
//! their members), named formats (`format.named`, `format.dns1123Label()`, ..., `validate`),
//! semantic versions (`semver`, `isSemver`, ...), cel-go's `sets` extension, `cel.bind`, the
//! optional library's `first`/`last`/`optional.unwrap`/`unwrapOpt`, the `authorizer` library
//! (backed by the caller's [`Authorize`]), and a runtime cost limit. Not yet: two-variable
//! comprehensions, which the `cel` crate cannot evaluate.
//!
//! ```
//! use k1s_cel::{Activation, CostBudget, Program};
//!
//! let program = Program::compile("self.size <= 10", &["self"]).unwrap();
//! let mut vars = Activation::new();
//! vars.bind_json("self", &serde_json::json!({"size": 5}));
//! assert_eq!(program.eval_bool(&vars, &mut CostBudget::default()), Ok(true));
//!
//! // A compile error reads as upstream's does.
//! let err = Program::compile("self.size <<", &["self"]).unwrap_err();
//! assert!(err.to_string().starts_with("compilation failed: ERROR: <input>:1:"));
//! ```
//!
//! API:
//! - [`Program::compile`]`(expr, vars)`: parses, expands macros, checks that every identifier is
//!   one of `vars` (or a macro variable, a type name or a library namespace): upstream's
//!   `undeclared reference to 'x' (in container '')`. [`CompileError`] displays as
//!   `compilation failed: ERROR: <input>:L:C: ...`; [`CompileError::details`] omits the prefix.
//! - [`Activation`]: the variables of one evaluation, bound from JSON ([`Activation::bind_json`])
//!   or from CEL [`Value`]s ([`Activation::bind`], with [`from_json`] for typed conversions).
//! - [`Program::eval`] returns a CEL [`Value`]; [`Program::eval_json`], [`Program::eval_bool`],
//!   [`Program::eval_string`] convert it. All take a [`CostBudget`], which they charge.
//! - [`CostBudget`]: a per-call limit (upstream's `PerCallLimit`, 1,000,000 by default), a total
//!   that several evaluations share (upstream's per-object runtime budget), and a deadline.
//!   Exceeding either limit fails with [`EvalError::CostLimitExceeded`], whose text is upstream's
//!   `operation cancelled: actual cost limit exceeded`.
//!
//! Approximations: the `cel` crate has no type checker, so compile-time checking is limited to
//! syntax, undeclared identifiers and rules whose result is a literal of the wrong type; type
//! errors otherwise surface when the rule runs. The cost of an evaluation is counted at run time
//! (one unit per function call or operator plus its result's size: a tenth of a string's length,
//! a list's or map's element count; one unit per field selection and per macro iteration), which is close to, but not,
//! cel-go's cost model; there is no static cost estimate.

mod authz;
mod check;
mod cost;
mod format;
mod json;
mod library;
mod net;
mod paths;
mod quantity;
mod url;
mod version;

use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

pub use authz::{authorizer, request_resource, Authorize, AuthzDecision, AuthzRequest, AuthzUser};
pub use cel::Value;
pub use json::{from_json, map, to_json};
pub use paths::{Paths, Pruned};

/// Upstream's `PerCallLimit`: the most one evaluation of an expression may cost.
pub const PER_CALL_LIMIT: u64 = 1_000_000;

/// Upstream's `RuntimeCELCostBudget`: what all the rules run for one custom resource may cost.
pub const RUNTIME_CEL_COST_BUDGET: u64 = 10_000_000;

/// Upstream's per-rule estimated cost limit for CRD validation rules (`PerCallLimit`).
pub const CRD_RULE_COST_LIMIT: u64 = PER_CALL_LIMIT;

/// How long one evaluation may run before it is abandoned, unless a budget says otherwise.
pub const DEFAULT_EVAL_TIMEOUT: Duration = Duration::from_secs(5);

/// The message of an evaluation aborted for its cost, as upstream (cel-go) words it.
pub const COST_LIMIT_EXCEEDED: &str = "operation cancelled: actual cost limit exceeded";

/// The message of an evaluation aborted for its time.
pub const EVAL_TIMED_OUT: &str = "operation interrupted";

/// An expression that does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("compilation failed: {details}")]
pub struct CompileError {
    details: String,
}

impl CompileError {
    fn new(details: impl Into<String>) -> Self {
        CompileError { details: details.into() }
    }

    /// The errors, as cel-go prints them: `ERROR: <input>:1:6: ...` with the source line and a
    /// caret under the column, one error after another.
    pub fn details(&self) -> &str {
        &self.details
    }
}

/// An evaluation that failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EvalError {
    /// The evaluation cost more than its budget allowed (per call, or what was left of the total).
    #[error("operation cancelled: actual cost limit exceeded")]
    CostLimitExceeded,
    /// The evaluation ran past its deadline.
    #[error("operation interrupted")]
    Timeout,
    /// The expression failed: no such key, no matching overload, division by zero, ...
    #[error("{0}")]
    Execution(String),
    /// The expression evaluated to a value of another type than the caller wanted.
    #[error("expected {want}, got {got}")]
    WrongType {
        /// The type wanted, e.g. `bool`.
        want: &'static str,
        /// The CEL type of the result.
        got: String,
    },
}

/// How much evaluations may cost, and until when they may run.
///
/// One budget may be shared by several evaluations (all the rules of one object): each charges
/// what it cost. Each evaluation may also cost at most `per_call_limit`.
#[derive(Debug, Clone)]
pub struct CostBudget {
    remaining: u64,
    used: u64,
    per_call_limit: u64,
    timeout: Duration,
}

impl Default for CostBudget {
    /// One evaluation's worth: [`PER_CALL_LIMIT`], [`DEFAULT_EVAL_TIMEOUT`].
    fn default() -> Self {
        CostBudget::new(PER_CALL_LIMIT)
    }
}

impl CostBudget {
    /// A budget of `total` cost units, of which one evaluation may use at most [`PER_CALL_LIMIT`].
    pub fn new(total: u64) -> Self {
        CostBudget { remaining: total, used: 0, per_call_limit: PER_CALL_LIMIT, timeout: DEFAULT_EVAL_TIMEOUT }
    }

    /// Sets the most one evaluation may cost.
    pub fn with_per_call_limit(mut self, limit: u64) -> Self {
        self.per_call_limit = limit;
        self
    }

    /// Sets how long one evaluation may run.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// What is left of the total.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// What the evaluations charged to this budget have cost so far.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// Whether nothing is left.
    pub fn exhausted(&self) -> bool {
        self.remaining == 0
    }

    fn charge(&mut self, cost: u64) {
        self.used = self.used.saturating_add(cost);
        self.remaining = self.remaining.saturating_sub(cost);
    }
}

/// The variables of one evaluation, each converted to the engine's own representation once,
/// when bound: every evaluation against them reads them in place (a policy's expressions share
/// one conversion of the object instead of converting it again for each).
#[derive(Default)]
pub struct Activation {
    vars: BTreeMap<String, Box<dyn Val>>,
}

impl Activation {
    /// No variables.
    pub fn new() -> Self {
        Activation::default()
    }

    /// Binds `name` to a CEL value. A value no variable can hold (a function) leaves `name`
    /// unbound.
    pub fn bind(&mut self, name: &str, value: Value) -> &mut Self {
        match Box::<dyn Val>::try_from(value) {
            Ok(v) => {
                self.vars.insert(name.to_owned(), v);
            }
            Err(_) => {
                self.vars.remove(name);
            }
        }
        self
    }

    /// Binds `name` to a JSON value, converted as [`from_json`] converts it.
    pub fn bind_json(&mut self, name: &str, value: &serde_json::Value) -> &mut Self {
        self.vars.insert(name.to_owned(), json::val_from_json(value));
        self
    }

    /// [`Activation::bind_json`] of only the parts of `value` that `paths` read (see
    /// [`Program::paths`]): programs that read no more than `paths` evaluate as with the whole
    /// value bound, without converting the rest.
    pub fn bind_json_paths(&mut self, name: &str, value: &serde_json::Value, paths: &Paths) -> &mut Self {
        self.vars.insert(name.to_owned(), json::val_from_pruned(&paths.prune(value)));
        self
    }

    /// Whether `name` is bound.
    pub fn contains(&self, name: &str) -> bool {
        self.vars.contains_key(name)
    }
}

impl VariableResolver for Activation {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        self.vars.get(variable).map(|v| CowVal::Borrowed(v.as_ref()))
    }
}

/// The Kubernetes CEL environment, built once per process.
fn env() -> &'static Arc<cel::Env> {
    static ENV: OnceLock<Arc<cel::Env>> = OnceLock::new();
    ENV.get_or_init(|| Arc::new(library::kubernetes_env()))
}

/// cel-go's (and the CEL spec's) default limit on the size of an expression, in code points.
pub const MAX_EXPRESSION_CODE_POINTS: usize = 100_000;

/// cel-go's default limit on how deeply an expression nests (its parser's recursion limit).
pub const MAX_RECURSION_DEPTH: usize = 250;

/// The stack a compilation needs besides [`COMPILE_STACK_PER_BYTE`]; the `cel` crate's ANTLR
/// parser takes up to ~100 KiB per level of nesting in a debug build and stops nesting at 96.
const COMPILE_STACK: usize = 32 << 20;
/// Each byte of an expression may add a level to the parser's recursion (`1+1+1...`).
const COMPILE_STACK_PER_BYTE: usize = 1 << 10;
/// The stack an evaluation needs besides [`EVAL_STACK_PER_LEVEL`] per level of the program.
const EVAL_STACK: usize = 256 << 10;
/// The interpreter's stack per level of the (instrumented) expression: unoptimized frames are
/// large (up to ~70 KiB per operator of `1+1+...` in a debug build). Generous either way: an
/// evaluation only moves to a stack of its own when the caller's has less left than this.
const EVAL_STACK_PER_LEVEL: usize = if cfg!(debug_assertions) { 128 << 10 } else { 32 << 10 };

/// How deeply an expression nests: 1 for a literal or a name.
fn depth(expr: &cel::IdedExpr) -> usize {
    use cel::common::ast::{EntryExpr, Expr};
    let children: Vec<&cel::IdedExpr> = match &expr.expr {
        Expr::Call(c) => c.target.as_deref().into_iter().chain(&c.args).collect(),
        Expr::Comprehension(c) => vec![&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result],
        Expr::List(l) => l.elements.iter().collect(),
        Expr::Map(cel::common::ast::MapExpr { entries })
        | Expr::Struct(cel::common::ast::StructExpr { entries, .. }) => entries
            .iter()
            .flat_map(|e| match &e.expr {
                EntryExpr::MapEntry(me) => vec![&me.key, &me.value],
                EntryExpr::StructField(f) => vec![&f.value],
            })
            .collect(),
        Expr::Select(s) => vec![&*s.operand],
        Expr::Unspecified | Expr::Ident(_) | Expr::Literal(_) => Vec::new(),
    };
    1 + children.into_iter().map(depth).max().unwrap_or(0)
}

/// A compiled expression: parse and checks done once, evaluated any number of times, from any
/// thread.
#[derive(Debug, Clone)]
pub struct Program {
    source: String,
    expr: Arc<cel::IdedExpr>,
    /// How deeply `expr` nests: what its evaluation needs of the stack.
    depth: usize,
    uses: BTreeSet<String>,
    /// The parts of each declared variable the expression reads.
    paths: BTreeMap<String, Paths>,
}

impl Program {
    /// Compiles `expr`, whose free identifiers must be among `vars` (e.g. `["self", "oldSelf"]`).
    ///
    /// Like cel-go, refuses an expression of more than [`MAX_EXPRESSION_CODE_POINTS`] or nested
    /// deeper than [`MAX_RECURSION_DEPTH`]. The `cel` crate's parser recurses per level of
    /// nesting and per operand of a chain (`a + b + c`), so compilation runs on a stack sized to
    /// the expression's length rather than on the caller's (a request's, 2 MiB).
    pub fn compile(expr: &str, vars: &[&str]) -> Result<Program, CompileError> {
        let size = expr.chars().count();
        if size > MAX_EXPRESSION_CODE_POINTS {
            return Err(CompileError::new(format!(
                "ERROR: <input>:-1:0: expression code point size exceeds limit: size: {size}, limit {MAX_EXPRESSION_CODE_POINTS}"
            )));
        }
        let stack = COMPILE_STACK + expr.len() * COMPILE_STACK_PER_BYTE;
        stacker::maybe_grow(stack, stack, || Program::compile_here(expr, vars))
    }

    fn compile_here(expr: &str, vars: &[&str]) -> Result<Program, CompileError> {
        let program = env().compile(expr).map_err(|e| CompileError::new(check::format_parse_errors(&e)))?;
        if depth(program.expression()) > MAX_RECURSION_DEPTH {
            return Err(CompileError::new(format!(
                "ERROR: <input>:-1:0: expression recursion limit exceeded: {MAX_RECURSION_DEPTH}"
            )));
        }
        let uses = check::check(expr, &program, vars)?;
        let paths = paths::read_paths(program.expression(), vars);
        let instrumented = cost::instrument(program.expression().clone());
        let depth = depth(&instrumented);
        Ok(Program { source: expr.to_owned(), expr: Arc::new(instrumented), depth, uses, paths })
    }

    /// The parts of the declared variable `var` the expression reads (nothing for a variable
    /// it does not name, everything for one that was not declared).
    pub fn paths(&self, var: &str) -> Paths {
        self.paths.get(var).cloned().unwrap_or(Paths::All)
    }

    /// Whether the expression refers to the declared variable `var` (e.g. `oldSelf`).
    pub fn uses(&self, var: &str) -> bool {
        self.uses.contains(var)
    }

    /// The expression as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Evaluates the program against `vars`, charging `budget`.
    pub fn eval(&self, vars: &Activation, budget: &mut CostBudget) -> Result<Value, EvalError> {
        if budget.remaining == 0 {
            return Err(EvalError::CostLimitExceeded);
        }
        let mut context = cel::Context::with_env(Arc::clone(env()));
        context.set_variable_resolver(vars);
        let limit = budget.per_call_limit.min(budget.remaining);
        let deadline = Instant::now() + budget.timeout;
        // The interpreter recurses per level of the expression: past what is left of this
        // thread's stack, it runs on one of its own.
        let stack = EVAL_STACK + self.depth * EVAL_STACK_PER_LEVEL;
        let (result, meter) = stacker::maybe_grow(stack, stack, || {
            cost::metered(limit, deadline, || Value::resolve(&self.expr, &context))
        });
        budget.charge(meter.used);
        match meter.aborted {
            Some(cost::Abort::Cost) => return Err(EvalError::CostLimitExceeded),
            Some(cost::Abort::Time) => return Err(EvalError::Timeout),
            None => {}
        }
        result.map_err(|e| EvalError::Execution(json::execution_message(&e)))
    }

    /// Evaluates the program and converts its result to JSON.
    pub fn eval_json(&self, vars: &Activation, budget: &mut CostBudget) -> Result<serde_json::Value, EvalError> {
        let value = self.eval(vars, budget)?;
        to_json(&value).ok_or_else(|| EvalError::WrongType { want: "a JSON value", got: type_name(&value) })
    }

    /// Evaluates the program, which must yield a `bool`.
    pub fn eval_bool(&self, vars: &Activation, budget: &mut CostBudget) -> Result<bool, EvalError> {
        match self.eval(vars, budget)? {
            Value::Bool(b) => Ok(b),
            other => Err(EvalError::WrongType { want: "bool", got: type_name(&other) }),
        }
    }

    /// Evaluates the program, which must yield a `string`.
    pub fn eval_string(&self, vars: &Activation, budget: &mut CostBudget) -> Result<String, EvalError> {
        match self.eval(vars, budget)? {
            Value::String(s) => Ok(s.as_str().to_owned()),
            other => Err(EvalError::WrongType { want: "string", got: type_name(&other) }),
        }
    }
}

/// An optional value (`optional.of(v)`, or `optional.none()` for `None`), e.g. for an
/// `oldSelf` that may be absent.
pub fn optional(value: Option<Value>) -> Value {
    let opt = match value {
        Some(v) => cel::objects::OptionalValue::of(v),
        None => cel::objects::OptionalValue::none(),
    };
    Value::Opaque(Arc::new(opt))
}

/// The CEL name of a value's type: `int`, `string`, `map`, ...
pub fn type_name(value: &Value) -> String {
    match value {
        Value::List(_) => "list".into(),
        Value::Map(_) => "map".into(),
        Value::Function(..) => "function".into(),
        Value::Int(_) => "int".into(),
        Value::UInt(_) => "uint".into(),
        Value::Float(_) => "double".into(),
        Value::String(_) => "string".into(),
        Value::Bytes(_) => "bytes".into(),
        Value::Bool(_) => "bool".into(),
        Value::Duration(_) => "google.protobuf.Duration".into(),
        Value::Timestamp(_) => "google.protobuf.Timestamp".into(),
        Value::Opaque(o) => o.runtime_type_name().to_owned(),
        Value::Struct(_) => "struct".into(),
        Value::Null => "null_type".into(),
    }
}

#[cfg(test)]
mod tests;
