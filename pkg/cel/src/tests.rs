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
fn json_bound_in_one_pass_evaluates_as_json_converted_to_cel_values() {
    let doc = json!({"s": "a", "i": -3, "u": 18446744073709551615u64, "f": 2.5, "b": true, "n": null,
        "l": [1, "x", {"k": [true]}], "m": {"a": {"b": 1}, "c": []}});
    let exprs = [
        "self",
        "type(self.i) == int && type(self.u) == uint && type(self.f) == double && type(self.n) == null_type",
        "self.l[2].k[0] && self.m.a.b == 1 && size(self.m.c) == 0 && 'a' in self.m",
        "self.l.exists(x, x == 'x') && self.s + 'b' == 'ab' && self.u > 0u",
        "self == self && self.m != {'a': 1}",
        "has(self.m.a) && !has(self.m.z)",
    ];
    for expr in exprs {
        let program = Program::compile(expr, &["self"]).unwrap_or_else(|e| panic!("{expr}: {e}"));
        let mut direct = Activation::new();
        direct.bind_json("self", &doc);
        let mut converted = Activation::new();
        converted.bind("self", from_json(&doc));
        let (a, b) = (
            program.eval_json(&direct, &mut CostBudget::default()),
            program.eval_json(&converted, &mut CostBudget::default()),
        );
        assert_eq!(a, b, "{expr}");
        assert!(a.is_ok(), "{expr}: {a:?}");
    }
    // A program reads its variables in place: evaluating it again sees the same values.
    let program = Program::compile("self.l[1]", &["self"]).expect("compiles");
    let mut vars = Activation::new();
    vars.bind_json("self", &doc);
    for _ in 0..2 {
        assert_eq!(program.eval_json(&vars, &mut CostBudget::default()), Ok(json!("x")));
    }
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
    // A generous deadline, so that the cost limit is what stops it on a loaded machine.
    let mut budget = CostBudget::default().with_timeout(Duration::from_secs(120));
    let err = p.eval(&vars, &mut budget).expect_err("fails");
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

fn err(expr: &str) -> String {
    match eval(expr, json!({})) {
        Ok(v) => panic!("{expr}: expected an error, got {v}"),
        Err(e) => e.to_string(),
    }
}

/// Each expression must evaluate to `true` (upstream's test cases, as comparisons).
fn all_true(cases: &[&str]) {
    for expr in cases {
        assert_eq!(eval(expr, json!({})), Ok(json!(true)), "{expr}");
    }
}

#[test]
fn ip_library() {
    all_true(&[
        r#"ip("192.168.0.1") == ip("192.168.0.1")"#,
        r#"isIP("192.168.0.1")"#,
        r#"!isIP("192.168.0.1.0")"#,
        r#"ip.isCanonical("127.0.0.1")"#,
        r#"ip("192.168.0.1").family() == 4"#,
        r#"ip("0.0.0.0").isUnspecified()"#,
        r#"!ip("127.0.0.1").isUnspecified()"#,
        r#"ip("127.0.0.1").isLoopback()"#,
        r#"!ip("1.2.3.4").isLoopback()"#,
        r#"ip("224.0.0.1").isLinkLocalMulticast()"#,
        r#"!ip("224.0.1.1").isLinkLocalMulticast()"#,
        r#"ip("169.254.169.254").isLinkLocalUnicast()"#,
        r#"!ip("192.168.0.1").isLinkLocalUnicast()"#,
        r#"ip("192.168.0.1").isGlobalUnicast()"#,
        r#"!ip("255.255.255.255").isGlobalUnicast()"#,
        r#"ip("2001:db8::68") == ip("2001:db8::68")"#,
        r#"isIP("2001:db8::68")"#,
        r#"!isIP("2001:db8:::68")"#,
        r#"ip.isCanonical("2001:db8::68")"#,
        r#"!ip.isCanonical("2001:DB8::68")"#,
        r#"ip("2001:db8::68").family() == 6"#,
        r#"ip("::").isUnspecified()"#,
        r#"!ip("::1").isUnspecified()"#,
        r#"ip("::1").isLoopback()"#,
        r#"!ip("2001:db8::abcd").isLoopback()"#,
        r#"ip("ff02::1").isLinkLocalMulticast()"#,
        r#"!ip("fd00::1").isLinkLocalMulticast()"#,
        r#"ip("fe80::1").isLinkLocalUnicast()"#,
        r#"!ip("fd80::1").isLinkLocalUnicast()"#,
        r#"ip("2001:db8::abcd").isGlobalUnicast()"#,
        r#"!ip("ff00::1").isGlobalUnicast()"#,
        r#"string(ip("192.168.0.1")) == "192.168.0.1""#,
        r#"type(ip("192.168.0.1")) == net.IP"#,
        r#"!isIP("::ffff:1.2.3.4") && !isIP("fe80::1%eth0") && !isIP("01.2.3.4")"#,
    ]);
    assert!(err(r#"ip("192.168.0.1.0")"#).starts_with(
        r#"IP Address "192.168.0.1.0" parse error during conversion from string: ParseAddr("192.168.0.1.0"): "#
    ));
    assert!(err(r#"ip.isCanonical("2001:db8:::68")"#).starts_with(r#"IP Address "2001:db8:::68" parse error"#));
    assert_eq!(err(r#"ip("::ffff:1.2.3.4")"#), r#"IPv4-mapped IPv6 address "::ffff:1.2.3.4" is not allowed"#);
    assert_eq!(err(r#"isIP(cidr("192.168.0.0/24"))"#), "no such overload");
}

#[test]
fn cidr_library() {
    all_true(&[
        r#"cidr(dyn("192.168.0.0/24")) == cidr("192.168.0.0/24")"#,
        r#"cidr("192.168.0.0/24").containsIP(ip("192.168.0.1"))"#,
        r#"!cidr("192.168.0.0/24").containsIP(ip("192.168.1.1"))"#,
        r#"cidr("192.168.0.0/24").containsIP("192.168.0.1")"#,
        r#"!cidr("192.168.0.0/24").containsIP("192.168.1.1")"#,
        r#"cidr("192.168.0.0/24").containsCIDR(cidr("192.168.0.0/25"))"#,
        r#"!cidr("192.168.0.0/24").containsCIDR(cidr("192.168.0.0/23"))"#,
        r#"cidr("192.168.0.0/24").containsCIDR("192.168.0.0/25")"#,
        r#"!cidr("192.168.0.0/24").containsCIDR("192.168.0.0/23")"#,
        r#"cidr("192.168.0.0/24").ip() == ip("192.168.0.0")"#,
        r#"cidr("192.168.0.1/24").ip() == ip("192.168.0.1")"#,
        r#"cidr("192.168.0.0/24").masked() == cidr("192.168.0.0/24")"#,
        r#"cidr("192.168.0.1/24").masked() == cidr("192.168.0.0/24")"#,
        r#"cidr("192.168.0.0/24").prefixLength() == 24"#,
        r#"cidr("2001:db8::/32").containsIP(ip("2001:db8::1"))"#,
        r#"!cidr("2001:db8::/32").containsIP(ip("2001:dc8::1"))"#,
        r#"cidr("2001:db8::/32").containsIP("2001:db8::1")"#,
        r#"!cidr("2001:db8::/32").containsIP("192.168.0.1")"#,
        r#"cidr("2001:db8::/32").containsCIDR(cidr("2001:db8::/33"))"#,
        r#"!cidr("2001:db8::/32").containsCIDR(cidr("2001:db8::/31"))"#,
        r#"cidr("2001:db8::/32").ip() == ip("2001:db8::")"#,
        r#"cidr("2001:db8:1::/32").masked() == cidr("2001:db8::/32")"#,
        r#"cidr("2001:db8::/32").prefixLength() == 32"#,
        r#"string(cidr("192.168.0.0/24")) == "192.168.0.0/24""#,
        r#"type(cidr("192.168.0.0/24")) == net.CIDR"#,
        r#"isCIDR("10.0.0.0/8") && !isCIDR("10.0.0.0/33") && !isCIDR("10.0.0.0") && !isCIDR("10.0.0.0/08")"#,
    ]);
    assert_eq!(
        err(r#"cidr("192.168.0.0/")"#),
        r#"network address parse error during conversion from string: network address parse error during conversion from string: netip.ParsePrefix("192.168.0.0/"): bad bits after slash: """#
    );
    assert_eq!(
        err(r#"cidr("2001:db8::/")"#),
        r#"network address parse error during conversion from string: network address parse error during conversion from string: netip.ParsePrefix("2001:db8::/"): bad bits after slash: """#
    );
    assert_eq!(err("cidr(192168)"), "no such overload");
}

#[test]
fn url_library() {
    all_true(&[
        "isURL('https://user:pass@example.com:80/path?query=val#fragment')",
        "isURL('/absolute-path')",
        "!isURL('https://a:b:c/')",
        "!isURL('../relative-path')",
        "!isURL('')",
        "url('/path').getScheme() == ''",
        "url('https://example.com/').getScheme() == 'https'",
        "url('HTTPS://example.com/').getScheme() == 'https'",
        "url('https://example.com:80/').getHost() == 'example.com:80'",
        "url('https://example.com/').getHost() == 'example.com'",
        "url('https://[::1]:80/').getHost() == '[::1]:80'",
        "url('https://[::1]/').getHost() == '[::1]'",
        "url('/path').getHost() == ''",
        "url('https://example.com:80/').getHostname() == 'example.com'",
        "url('https://127.0.0.1:80/').getHostname() == '127.0.0.1'",
        "url('https://[::1]:80/').getHostname() == '::1'",
        "url('/path').getHostname() == ''",
        "url('https://example.com:80/').getPort() == '80'",
        "url('https://example.com/').getPort() == ''",
        "url('/path').getPort() == ''",
        "url('https://example.com/path').getEscapedPath() == '/path'",
        "url('https://example.com/path with spaces/').getEscapedPath() == '/path%20with%20spaces/'",
        "url('https://example.com').getEscapedPath() == ''",
        "url('https://example.com/path?k1=a&k2=b&k2=c').getQuery() == {'k1': ['a'], 'k2': ['b', 'c']}",
        "url('https://example.com/path?key with spaces=value with spaces').getQuery() == {'key with spaces': ['value with spaces']}",
        "url('https://example.com/path?').getQuery() == {}",
        "url('https://example.com/path').getQuery() == {}",
        "url('https://example.com/p#frag').getEscapedPath() == '/p'",
        "url('https://user:pass@example.com:80/path?query=val#fragment').getQuery() == {'query': ['val']}",
    ]);
    assert_eq!(
        err("url('../relative-path')"),
        r#"URL parse error during conversion from string: parse "../relative-path": invalid URI for request"#
    );
    assert_eq!(
        err("url('https://a:b:c/')"),
        r#"URL parse error during conversion from string: parse "https://a:b:c/": invalid port ":c" after host"#
    );
}

#[test]
fn format_library() {
    all_true(&[
        r#"!format.dns1123Label().validate("my-label-name").hasValue()"#,
        r#"!format.dns1123Subdomain().validate("apiextensions.k8s.io").hasValue()"#,
        r#"!format.qualifiedName().validate("apiextensions.k8s.io/v1beta1").hasValue()"#,
        r#"!format.dns1123LabelPrefix().validate("my-label-prefix-").hasValue()"#,
        r#"!format.dns1123SubdomainPrefix().validate("mysubdomain.prefix.-").hasValue()"#,
        r#"!format.dns1035LabelPrefix().validate("my-label-prefix-").hasValue()"#,
        r#"!format.uri().validate("http://example.com").hasValue()"#,
        r#"!format.uuid().validate("123e4567-e89b-12d3-a456-426614174000").hasValue()"#,
        r#"!format.byte().validate("aGVsbG8=").hasValue()"#,
        r#"!format.date().validate("2021-01-01").hasValue()"#,
        r#"!format.datetime().validate("2021-01-01T00:00:00Z").hasValue()"#,
        r#"!format.dns1035Label().validate("my-label-name").hasValue()"#,
        r#"!format.labelValue().validate("my-cool-label-Value").hasValue()"#,
        r#"format.byte().validate("aGVsbG8") == optional.of(["invalid base64"])"#,
        r#"format.date().validate("2020-01-32") == optional.of(["invalid date"])"#,
        r#"format.datetime().validate("2020-01-32T00:00:00Z") == optional.of(["invalid datetime"])"#,
        r#"format.uuid().validate("123e4567") == optional.of(["does not match the UUID format"])"#,
        r#"format.uri().validate("../x") == optional.of(["parse \"../x\": invalid URI for request"])"#,
        r#"!format.named("unknown").hasValue()"#,
        r#"format.named("dns1123Label").value() == format.dns1123Label()"#,
        r#"format.dns1123Label() != format.dns1123Subdomain()"#,
    ]);
    for name in format::NAMES {
        assert_eq!(ok(&format!("format.named('{name}').hasValue()")), json!(true), "{name}");
    }
    let errors = |expr: &str| eval(&format!("{expr}.value()"), json!({})).unwrap_or_else(|e| panic!("{expr}: {e}"));
    assert_eq!(
        errors(r#"format.dns1123Label().validate("contains a space")"#),
        json!(["a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"])
    );
    assert_eq!(
        errors(r#"format.dns1123SubdomainPrefix().validate("contains a space-")"#),
        json!([
            r"a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        ])
    );
    assert_eq!(
        errors(r#"format.dns1035Label().validate("contains a space")"#),
        json!(["a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"])
    );
    assert_eq!(
        errors(r#"format.qualifiedName().validate("contains a space")"#),
        json!(["name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"])
    );
    assert_eq!(
        errors(r#"format.labelValue().validate("my-cool-label-Value!!\n\n!!!")"#),
        json!(["a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"])
    );
}

#[test]
fn sets_extension() {
    all_true(&[
        "sets.contains([], [])",
        "sets.contains([1, 2, 3], [2, 3])",
        "!sets.contains([1, 2], [2, 3])",
        "sets.contains([1], [1.0, 1u])",
        "sets.equivalent([1, 2, 3], [3, 2, 1, 1])",
        "!sets.equivalent([1, 2], [1, 2, 3])",
        "sets.intersects([1, 2], [2, 3])",
        "!sets.intersects([1], [])",
        "!sets.intersects(['a'], ['b'])",
    ]);
}

#[test]
fn semver_library() {
    all_true(&[
        r#"semver("1.2.3") == semver("1.2.3")"#,
        r#"semver("1.2.3") != semver("1.0.0")"#,
        r#"isSemver("1.2.3-beta.1+build.1")"#,
        r#"!isSemver("") && !isSemver("v1.0.0") && !isSemver(" 1.0.0") && !isSemver("1. 0.0")"#,
        r#"!isSemver("1.0.0 ") && !isSemver("01.01.01") && !isSemver("1") && !isSemver("1.1")"#,
        r#"!isSemver("", true) && !isSemver(" 1.0.0", true) && !isSemver("1.0.0 ", true)"#,
        r#"isSemver("v1.0.0", true) && isSemver("01.01.01", true) && isSemver("1", true) && isSemver("1.1", true)"#,
        r#"semver("v01.01", true) == semver("1.1.0")"#,
        r#"semver("1.0.0").isLessThan(semver("1.2.3"))"#,
        r#"!semver("1.0.0").isLessThan(semver("1.0.0"))"#,
        r#"semver("1.2.3").isGreaterThan(semver("1.0.0"))"#,
        r#"!semver("1.0.0").isGreaterThan(semver("1.0.0"))"#,
        r#"semver("1.2.3").compareTo(semver("1.2.3")) == 0"#,
        r#"semver("1.0.0").compareTo(semver("1.2.3")) == -1"#,
        r#"semver("1.2.3").compareTo(semver("1.0.0")) == 1"#,
        r#"semver("1.0.0-alpha").isLessThan(semver("1.0.0"))"#,
        r#"semver("1.0.0+a").compareTo(semver("1.0.0+b")) == 0"#,
        r#"semver("1.2.3").major() == 1 && semver("1.2.3").minor() == 2 && semver("1.2.3").patch() == 3"#,
        // Quantities keep their own comparisons.
        "quantity('1Gi').isGreaterThan(quantity('1G')) && quantity('1').compareTo(quantity('1000m')) == 0",
    ]);
    assert_eq!(err(r#"semver("v1.0")"#), "No Major.Minor.Patch elements found");
    assert_eq!(err("isSemver([1, 2, 3])"), "no such overload");
}

#[test]
fn the_libraries_upstream_declares_are_there() {
    // cel-go's strings (v2+), lists, math and bindings extensions (not the two-variable
    // comprehensions, which the `cel` crate cannot evaluate) and the Kubernetes lists,
    // regex and optional libraries, as the Kubernetes base environment declares them.
    all_true(&[
        "'hello'.reverse() == 'olleh'",
        "strings.quote('a\"b') == '\"a\\\\\"b\"'",
        "'a b'.split(' ', 1) == ['a b']",
        "'abc'.indexOf('c', 1) == 2",
        "[1, [2, [3]]].flatten() == [1, 2, [3]]",
        "[1, 2, 1].distinct() == [1, 2]",
        "[3, 1, 2].sort() == [1, 2, 3]",
        "[1, 2, 3].slice(1, 2) == [2]",
        "lists.range(3) == [0, 1, 2]",
        "math.greatest(1, 3, 2) == 3 && math.least([1, 3]) == 1",
        "cel.bind(x, 2, x * x) == 4",
        "optional.ofNonZeroValue('').orValue('x') == 'x'",
        "[1, 2].first().value() == 1 && [1, 2].last().value() == 2 && ![].last().hasValue()",
        "optional.unwrap([optional.of(1), optional.none()]) == [1]",
        "[optional.none(), optional.of('a')].unwrapOpt() == ['a']",
        "'a'.matches('^a$') && '12'.find('[0-9]') == '1'",
    ]);
}

#[test]
fn a_rule_over_a_big_list_hits_the_per_call_limit() {
    // One pass over a list costs a few units per element, as in cel-go: 100,000 elements fit in
    // the per-call limit (1,000,000), 400,000 do not.
    let p = Program::compile("self.items.all(x, x >= 0)", &["self"]).expect("ok");
    let run = |n: i64, budget: &mut CostBudget| {
        let mut vars = Activation::new();
        vars.bind("self", map([("items".to_owned(), Value::List(Arc::new((0..n).map(Value::Int).collect())))]));
        p.eval(&vars, budget)
    };
    let mut budget = CostBudget::new(RUNTIME_CEL_COST_BUDGET).with_timeout(Duration::from_secs(120));
    assert_eq!(run(100_000, &mut budget), Ok(Value::Bool(true)));
    let used = budget.used();
    assert!(used > 100_000 && used < PER_CALL_LIMIT, "{used}");
    let err = run(400_000, &mut budget).expect_err("over the per-call limit");
    assert_eq!(err.to_string(), "operation cancelled: actual cost limit exceeded");
    // What the aborted call used is charged to the shared budget, up to the per-call limit.
    assert!(budget.used() > used + PER_CALL_LIMIT - 10 && budget.used() <= used + PER_CALL_LIMIT + 10, "{budget:?}");
    // Once the shared budget is spent, nothing more runs.
    let mut small = CostBudget::new(10);
    assert_eq!(run(100, &mut small), Err(EvalError::CostLimitExceeded));
    assert!(small.exhausted());
    assert_eq!(run(1, &mut small), Err(EvalError::CostLimitExceeded));
}

/// Allows `alice` to get and list pods in `default`, and GET on `/healthz`, with a reason.
struct Fake;

impl Authorize for Fake {
    fn authorize(&self, r: &AuthzRequest) -> AuthzDecision {
        if r.user.name == "system:serviceaccount:ns:broken" {
            return AuthzDecision { allowed: false, reason: String::new(), error: Some("no authorizer".into()) };
        }
        let resource = r.path.is_none()
            && r.group.is_empty()
            && r.resource == "pods"
            && r.subresource.is_empty()
            && (r.namespace == "default" || r.namespace.is_empty())
            && matches!(r.verb.as_str(), "get" | "list");
        let path = r.path.as_deref() == Some("/healthz") && r.verb == "get";
        let allowed =
            r.user.name == "alice" || (r.user.groups.iter().any(|g| g == "system:serviceaccounts:ns") && resource);
        let allowed = allowed && (resource || path || r.name == "special");
        AuthzDecision {
            allowed,
            reason: if allowed { format!("allowed {}", r.user.name) } else { String::new() },
            error: None,
        }
    }
}

#[test]
fn authorizer_library() {
    let auth: Arc<dyn Authorize> = Arc::new(Fake);
    let alice = AuthzUser { name: "alice".into(), uid: "1".into(), groups: vec!["system:authenticated".into()] };
    let mut vars = Activation::new();
    vars.bind("authorizer", authorizer(Arc::clone(&auth), alice.clone()));
    vars.bind("authorizer.requestResource", request_resource(auth, alice, "", "pods", "", "default", "p1"));
    let run = |expr: &str| {
        let p = Program::compile(expr, &["authorizer"]).unwrap_or_else(|e| panic!("{expr}: {e}"));
        p.eval_json(&vars, &mut CostBudget::default()).unwrap_or_else(|e| panic!("{expr}: {e}"))
    };
    assert_eq!(run("authorizer.group('').resource('pods').namespace('default').check('list').allowed()"), json!(true));
    assert_eq!(
        run("authorizer.group('').resource('pods').namespace('default').check('delete').allowed()"),
        json!(false)
    );
    assert_eq!(run("authorizer.group('').resource('pods').subresource('log').check('get').allowed()"), json!(false));
    assert_eq!(
        run("authorizer.group('apps').resource('deployments').name('special').check('get').allowed()"),
        json!(true)
    );
    assert_eq!(run("authorizer.group('').resource('pods').check('get').reason()"), json!("allowed alice"));
    assert_eq!(run("authorizer.path('/healthz').check('get').allowed()"), json!(true));
    assert_eq!(run("authorizer.path('/metrics').check('get').allowed()"), json!(false));
    assert_eq!(run("authorizer.requestResource.check('get').allowed()"), json!(true));
    assert_eq!(run("authorizer.requestResource.check('patch').allowed()"), json!(false));
    assert_eq!(
        run("authorizer.serviceAccount('ns', 'robot').group('').resource('pods').check('get').allowed()"),
        json!(true)
    );
    assert_eq!(run("authorizer.serviceAccount('ns', 'robot').path('/healthz').check('get').allowed()"), json!(false));
    let broken = "authorizer.serviceAccount('ns', 'broken').group('').resource('pods').check('get')";
    assert_eq!(run(&format!("{broken}.errored() && {broken}.error() == 'no authorizer'")), json!(true));
    assert_eq!(run("authorizer.group('').resource('pods').check('get').errored()"), json!(false));
}

#[test]
fn a_variable_bound_with_only_the_paths_read_evaluates_as_the_whole_value() {
    let pod = json!({"metadata": {"name": "p", "labels": {"app": "a"}},
        "spec": {"containers": [{"name": "c", "image": "x:1"}], "replicas": 3, "nested": {"deep": {"k": 1}}},
        "status": {"phase": "Running"}});
    let cases = [
        ("object.spec.containers.all(c, !c.image.endsWith(':latest'))", true),
        ("has(object.spec.replicas) && !has(object.spec.missing) && object.spec.nested.deep.k == 1", true),
        ("object.spec.nope", true),
        ("object.nope.deeper", true),
        ("size(object.metadata.labels) == 1 && 'app' in object.metadata.labels", true),
        ("size(object.spec) == 3", true),
        ("object == object", false),
        ("[object.spec].all(s, has(s.replicas))", true),
        ("[{'a': 1}].all(object, object.a == 1) && object.status.phase == 'Running'", true),
        ("object.spec['replicas'] == 3", true),
        ("object.?spec.orValue({}).replicas == 3", false),
    ];
    for (expr, pruned) in cases {
        let program = Program::compile(expr, &["object"]).unwrap_or_else(|e| panic!("{expr}: {e}"));
        let paths = program.paths("object");
        assert_eq!(paths != Paths::All, pruned, "{expr}: {paths:?}");
        let mut whole = Activation::new();
        whole.bind_json("object", &pod);
        let mut cut = Activation::new();
        cut.bind_json_paths("object", &pod, &paths);
        let (mut b1, mut b2) = (CostBudget::default(), CostBudget::default());
        let (a, b) = (program.eval_json(&whole, &mut b1), program.eval_json(&cut, &mut b2));
        assert_eq!(a, b, "{expr}");
        assert_eq!(b1.remaining, b2.remaining, "{expr}: the same cost");
    }
    // Paths of several programs combine; a variable not named reads nothing.
    let mut all =
        Program::compile("object.spec.replicas > 0", &["object", "oldObject"]).expect("compile").paths("object");
    all.union(&Program::compile("object.metadata.name != ''", &["object"]).expect("compile").paths("object"));
    let Pruned::Fields(fields) = all.prune(&pod) else { panic!("pruned: {all:?}") };
    assert_eq!(fields.iter().map(|(k, _)| *k).collect::<Vec<_>>(), ["metadata", "spec"]);
    let unused = Program::compile("object.spec.replicas > 0", &["object", "oldObject"]).expect("compile");
    assert_eq!(unused.paths("oldObject"), Paths::default());
}

/// Runs `f` on a thread with a request's stack (a tokio worker's, 2 MiB).
fn on_request_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new().stack_size(2 << 20).spawn(f).expect("spawn").join().expect("no panic")
}

#[test]
fn deeply_nested_expression_is_a_compile_error_not_a_stack_overflow() {
    // Found by the cel fuzz target: ~20 nested parentheses or map literals overflowed a 2 MiB
    // stack in the `cel` crate's parser (debug build), aborting the server.
    for (open, close) in [("(", ")"), ("[", "]"), ("{1: ", "}"), ("-(", ")"), ("[1].map(x, ", ")")] {
        for depth in [20, 95, 96, 1000, 30_000] {
            let expr = format!("{}1{}", open.repeat(depth), close.repeat(depth));
            let compiled = on_request_stack(move || Program::compile(&expr, &["self"]).map(|_| ()));
            if depth >= 96 {
                assert!(compiled.is_err(), "{open} x {depth}");
            }
        }
    }
    // A chain nests as deep as it is long without nesting in the parser's grammar: cel-go's limit.
    let chain = |n: usize| format!("1{}", "+1".repeat(n));
    let err = on_request_stack(move || Program::compile(&chain(30_000), &["self"])).expect_err("too deep");
    assert_eq!(err.details(), "ERROR: <input>:-1:0: expression recursion limit exceeded: 250");
}

#[test]
fn expression_as_deep_as_the_limit_evaluates_on_a_request_stack() {
    // The interpreter recurses per level too: an accepted expression must not overflow either.
    let value = on_request_stack(|| {
        let p = Program::compile(&format!("1{}", "+1".repeat(MAX_RECURSION_DEPTH - 1)), &["self"]).expect("compiles");
        p.eval_json(&Activation::new(), &mut CostBudget::default())
    });
    assert_eq!(value, Ok(json!(MAX_RECURSION_DEPTH)));
    let nested = on_request_stack(|| {
        let p = Program::compile(&format!("{}1{}", "[".repeat(90), "]".repeat(90)), &["self"]).expect("compiles");
        p.eval_json(&Activation::new(), &mut CostBudget::default()).is_ok()
    });
    assert!(nested);
}

#[test]
fn syntax_error_past_column_65535_is_a_compile_error_not_a_panic() {
    // Found by the cel fuzz target's long inputs: the `cel` crate's error `Display` pads the
    // caret with a format width, which panics past u16::MAX.
    let expr = format!("{}1 +", "a.".repeat(40_000));
    let err = Program::compile(&expr, &["a"]).expect_err("syntax error");
    assert!(err.details().starts_with("ERROR: <input>:1:"), "{}", &err.details()[..100]);
}

#[test]
fn expression_over_100000_code_points_is_refused() {
    let expr = format!("'{}'", "é".repeat(MAX_EXPRESSION_CODE_POINTS));
    let err = Program::compile(&expr, &["self"]).expect_err("too long");
    assert_eq!(
        err.details(),
        "ERROR: <input>:-1:0: expression code point size exceeds limit: size: 100002, limit 100000"
    );
}
