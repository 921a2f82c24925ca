use serde_json::json;

use super::*;

fn eval(expr: &str, self_: serde_json::Value) -> Result<serde_json::Value, EvalError> {
    let program = Program::compile(expr, &["self"]).unwrap_or_else(|e| panic!("{expr}: {e}"));
    let mut vars = Activation::new();
    vars.bind_json("self", &self_);
    program.eval_json(&vars, &mut CostBudget::default())
}

fn ok(expr: &str) -> serde_json::Value {
    eval(expr, json!({})).unwrap_or_else(|e| panic!("{expr}: {e}"))
}

#[test]
fn basic_expressions_on_json_maps() {
    assert_eq!(eval("self.size <= 10", json!({"size": 5})), Ok(json!(true)));
    assert_eq!(eval("self.size <= 10", json!({"size": 50})), Ok(json!(false)));
    assert_eq!(eval("self.name + '-x'", json!({"name": "a"})), Ok(json!("a-x")));
    assert_eq!(eval("has(self.spec) && self.spec.replicas > 1", json!({"spec": {"replicas": 3}})), Ok(json!(true)));
    assert_eq!(eval("has(self.spec)", json!({})), Ok(json!(false)));
    assert_eq!(eval("self.items.all(x, x > 0)", json!({"items": [1, 2]})), Ok(json!(true)));
    assert_eq!(eval("self.items.exists_one(x, x > 1)", json!({"items": [1, 2]})), Ok(json!(true)));
    assert_eq!(eval("self.items.map(x, x * 2)", json!({"items": [1, 2]})), Ok(json!([2, 4])));
    assert_eq!(eval("self.items.filter(x, x > 1)", json!({"items": [1, 2]})), Ok(json!([2])));
    assert_eq!(eval("self.f == 1.5", json!({"f": 1.5})), Ok(json!(true)));
    assert_eq!(eval("self.n == null", json!({"n": null})), Ok(json!(true)));
    assert_eq!(eval("self.missing", json!({})), Err(EvalError::Execution("no such key: missing".into())));
}

#[test]
fn bool_and_string_helpers() {
    let p = Program::compile("self.a", &["self"]).expect("ok");
    let mut vars = Activation::new();
    vars.bind_json("self", &json!({"a": "x"}));
    assert_eq!(p.eval_string(&vars, &mut CostBudget::default()), Ok("x".to_owned()));
    assert_eq!(
        p.eval_bool(&vars, &mut CostBudget::default()),
        Err(EvalError::WrongType { want: "bool", got: "string".into() })
    );
}

#[test]
fn compile_errors_read_as_upstream() {
    let err = Program::compile("self.size <<", &["self"]).expect_err("fails");
    assert!(err.to_string().starts_with("compilation failed: ERROR: <input>:1:"), "{err}");
    assert!(err.to_string().contains("\n | self.size <<\n | ."), "{err}");
    let err = Program::compile("self.a == foo", &["self"]).expect_err("fails");
    assert_eq!(
        err.to_string(),
        "compilation failed: ERROR: <input>:1:11: undeclared reference to 'foo' (in container '')\n | self.a == foo\n | ..........^"
    );
    assert!(Program::compile("self.items.all(x, x > 0)", &["self"]).is_ok());
    assert!(Program::compile("[1].map(x, x + y)", &["self"]).is_err());
    let p = Program::compile("[1].all(x, x == self.a)", &["self", "oldSelf"]).expect("ok");
    assert!(p.uses("self") && !p.uses("oldSelf"));
    assert!(Program::compile("oldSelf == self", &["self", "oldSelf"]).expect("ok").uses("oldSelf"));

    let p = Program::compile("oldSelf.hasValue() ? oldSelf.value() <= self : true", &["self", "oldSelf"]).expect("ok");
    let mut vars = Activation::new();
    vars.bind("self", Value::Int(3)).bind("oldSelf", optional(None));
    assert_eq!(p.eval_bool(&vars, &mut CostBudget::default()), Ok(true));
    vars.bind("oldSelf", optional(Some(Value::Int(4))));
    assert_eq!(p.eval_bool(&vars, &mut CostBudget::default()), Ok(false));
}

#[test]
fn strings_library() {
    assert_eq!(ok("'abc'.charAt(1)"), json!("b"));
    assert_eq!(ok("'abcb'.indexOf('b')"), json!(1));
    assert_eq!(ok("'abcb'.lastIndexOf('b')"), json!(3));
    assert_eq!(ok("'AbC'.lowerAscii()"), json!("abc"));
    assert_eq!(ok("'AbC'.upperAscii()"), json!("ABC"));
    assert_eq!(ok("'a-b'.replace('-', '+')"), json!("a+b"));
    assert_eq!(ok("'a,b'.split(',')"), json!(["a", "b"]));
    assert_eq!(ok("'abc'.substring(1)"), json!("bc"));
    assert_eq!(ok("'  a '.trim()"), json!("a"));
    assert_eq!(ok("['a', 'b'].join('-')"), json!("a-b"));
    assert_eq!(ok("'%s is %d'.format(['x', 3])"), json!("x is 3"));
    assert_eq!(ok("'abc'.matches('^a.c$')"), json!(true));
    assert_eq!(ok("'abc'.startsWith('ab') && 'abc'.endsWith('bc') && 'abc'.contains('b')"), json!(true));
}

#[test]
fn lists_library() {
    assert_eq!(ok("[1, 2, 3].isSorted()"), json!(true));
    assert_eq!(ok("['b', 'a'].isSorted()"), json!(false));
    assert_eq!(ok("[1, 2, 3].sum()"), json!(6));
    assert_eq!(ok("[1.5, 2.0].sum()"), json!(3.5));
    assert_eq!(ok("[].sum()"), json!(0));
    assert_eq!(ok("[3, 1, 2].min()"), json!(1));
    assert_eq!(ok("[3, 1, 2].max()"), json!(3));
    assert_eq!(ok("[1, 2, 1].indexOf(1)"), json!(0));
    assert_eq!(ok("[1, 2, 1].lastIndexOf(1)"), json!(2));
    assert_eq!(ok("[1, 2].indexOf(5)"), json!(-1));
    assert!(eval("[].min()", json!({})).is_err());
}

#[test]
fn regex_library() {
    assert_eq!(ok("'abc 123'.find('[0-9]+')"), json!("123"));
    assert_eq!(ok("'abc'.find('[0-9]+')"), json!(""));
    assert_eq!(ok("'a1 b2 c3'.findAll('[a-z][0-9]')"), json!(["a1", "b2", "c3"]));
    assert_eq!(ok("'a1 b2 c3'.findAll('[a-z][0-9]', 2)"), json!(["a1", "b2"]));
}

#[test]
fn optionals() {
    assert_eq!(eval("self.?a.orValue(1)", json!({})), Ok(json!(1)));
    assert_eq!(eval("self.?a.orValue(1)", json!({"a": 2})), Ok(json!(2)));
    assert_eq!(eval("self.?a.hasValue()", json!({"a": 2})), Ok(json!(true)));
}

#[test]
fn the_cost_limit_aborts_a_runaway_rule() {
    let p = Program::compile("self.items.all(x, self.items.all(y, self.items.all(z, x + y + z >= 0)))", &["self"])
        .expect("ok");
    let mut vars = Activation::new();
    vars.bind_json("self", &json!({"items": (0..100).collect::<Vec<_>>()}));
    let err = p.eval(&vars, &mut CostBudget::default()).expect_err("fails");
    assert_eq!(err, EvalError::CostLimitExceeded);
    assert_eq!(err.to_string(), "operation cancelled: actual cost limit exceeded");

    // A small budget aborts a small rule; what was used is charged.
    let p = Program::compile("[1, 2, 3].map(x, x * 2).size() == 3", &[]).expect("ok");
    let mut budget = CostBudget::new(100).with_per_call_limit(3);
    assert_eq!(p.eval(&Activation::new(), &mut budget), Err(EvalError::CostLimitExceeded));
    let mut budget = CostBudget::new(1000);
    assert_eq!(p.eval(&Activation::new(), &mut budget), Ok(Value::Bool(true)));
    assert!(budget.used() > 3 && budget.remaining() < 1000, "{budget:?}");
}

#[test]
fn the_timeout_aborts_a_slow_rule() {
    let p = Program::compile("self.items.all(x, self.items.all(y, x + y >= 0))", &["self"]).expect("ok");
    let mut vars = Activation::new();
    vars.bind_json("self", &json!({"items": (0..900).collect::<Vec<_>>()}));
    let mut budget = CostBudget::new(u64::MAX).with_per_call_limit(u64::MAX).with_timeout(Duration::from_millis(1));
    assert_eq!(p.eval(&vars, &mut budget), Err(EvalError::Timeout));
}

#[test]
fn programs_are_shared_across_threads() {
    fn shareable<T: Send + Sync>() {}
    shareable::<Program>();
    shareable::<CompileError>();
    shareable::<EvalError>();
}

#[test]
fn quantity_library() {
    assert_eq!(ok("quantity('1Gi').isGreaterThan(quantity('1G'))"), json!(true));
    assert_eq!(ok("quantity('100m').isLessThan(quantity('1'))"), json!(true));
    assert_eq!(ok("quantity('1k').compareTo(quantity('1000'))"), json!(0));
    assert_eq!(ok("quantity('1.5k').asInteger()"), json!(1500));
    assert_eq!(ok("quantity('500m').asApproximateFloat()"), json!(0.5));
    assert_eq!(ok("quantity('1').add(quantity('500m')).isInteger()"), json!(false));
    assert_eq!(ok("quantity('2').sub(3).sign()"), json!(-1));
    assert_eq!(ok("isQuantity('1Mi') && !isQuantity('1Mb')"), json!(true));
    assert_eq!(ok("quantity('1e3') == quantity('1k')"), json!(true));
    assert!(eval("quantity('x')", json!({})).is_err());
    assert!(eval("quantity('1m').asInteger()", json!({})).is_err());
}
