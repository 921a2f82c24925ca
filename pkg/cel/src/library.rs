//! The Kubernetes CEL libraries on top of the `cel` crate's standard library and extensions.

use std::cmp::Ordering;
use std::sync::Arc;

use cel::common::ast::{ComprehensionExpr, Expr, IdedExpr, ListExpr, LiteralValue};
use cel::common::types::{Type, BOOL_TYPE, DYN_TYPE, INT_TYPE, LIST_TYPE, STRING_TYPE};
use cel::common::value::{CowVal, Val};
use cel::parser::{Macro, MacroExprHelper, ParseError};
use cel::{extensions, DeclarationError, ExecutionError, Value};

/// A Kubernetes function written over owned [`Value`]s, lifted to the `cel` crate's overload
/// signature.
macro_rules! lift {
    ($f:path) => {{
        fn lifted<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
            let args = args.iter().map(|a| Value::try_from(a.as_ref())).collect::<Result<Vec<_>, _>>()?;
            let out: Box<dyn Val> = $f(&args)?.try_into()?;
            Ok(CowVal::from(out))
        }
        lifted
    }};
}

/// The environment every k1s program compiles and runs in.
pub(crate) fn kubernetes_env() -> cel::Env {
    let mut env = cel::Env::stdlib();
    // An error here is a programming error in the declarations below, caught by the unit tests.
    if let Err(e) = declare(&mut env) {
        panic!("declaring the Kubernetes CEL libraries: {e}");
    }
    env
}

fn declare(env: &mut cel::Env) -> Result<(), DeclarationError> {
    env.add_extension(extensions::strings)?;
    env.add_extension(extensions::lists)?;
    env.add_extension(extensions::math)?;
    crate::cost::register(env)?;
    // cel-go's bindings extension (ext.Bindings): `cel.bind(name, init, body)`.
    env.add_macro(Macro::receiver("bind", 3, bind_macro))?;
    // Kubernetes lists library (k8s.io/apiserver/pkg/cel/library/lists.go).
    env.add_member_overload("isSorted", "list_is_sorted", LIST_TYPE, vec![], lift!(is_sorted))?;
    env.add_member_overload("sum", "list_sum", LIST_TYPE, vec![], lift!(sum))?;
    env.add_member_overload("min", "list_min", LIST_TYPE, vec![], lift!(min))?;
    env.add_member_overload("max", "list_max", LIST_TYPE, vec![], lift!(max))?;
    env.add_member_overload("indexOf", "list_index_of", LIST_TYPE, vec![DYN_TYPE], lift!(index_of))?;
    env.add_member_overload("lastIndexOf", "list_last_index_of", LIST_TYPE, vec![DYN_TYPE], lift!(last_index_of))?;
    // Kubernetes regex library (k8s.io/apiserver/pkg/cel/library/regex.go).
    env.add_member_overload("find", "string_find", STRING_TYPE, vec![STRING_TYPE], lift!(find))?;
    env.add_member_overload("findAll", "string_find_all", STRING_TYPE, vec![STRING_TYPE], lift!(find_all))?;
    env.add_member_overload(
        "findAll",
        "string_find_all_n",
        STRING_TYPE,
        vec![STRING_TYPE, INT_TYPE],
        lift!(find_all_n),
    )?;
    // Kubernetes quantity library (k8s.io/apiserver/pkg/cel/library/quantity.go).
    use crate::quantity as q;
    let quantity = Type::new_opaque_type(q::QUANTITY_TYPE);
    env.add_type(quantity.to_owned())?;
    env.add_overload("quantity", "string_to_quantity", vec![STRING_TYPE], lift!(q::quantity))?;
    env.add_overload("isQuantity", "is_quantity_string", vec![STRING_TYPE], lift!(q::is_quantity))?;
    let member = |env: &mut cel::Env, name: &str, id: &str, t: &Type, args: Vec<Type>, f| {
        env.add_member_overload(name, id, t.to_owned(), args, f)
    };
    member(env, "isGreaterThan", "quantity_is_greater_than", &quantity, vec![DYN_TYPE], lift!(q::is_greater_than))?;
    member(env, "isLessThan", "quantity_is_less_than", &quantity, vec![DYN_TYPE], lift!(q::is_less_than))?;
    member(env, "compareTo", "quantity_compare_to", &quantity, vec![DYN_TYPE], lift!(q::compare_to))?;
    member(env, "add", "quantity_add", &quantity, vec![DYN_TYPE], lift!(q::add))?;
    member(env, "sub", "quantity_sub", &quantity, vec![DYN_TYPE], lift!(q::sub))?;
    member(env, "sign", "quantity_sign", &quantity, vec![], lift!(q::sign))?;
    member(env, "isInteger", "quantity_is_integer", &quantity, vec![], lift!(q::is_integer))?;
    member(env, "asInteger", "quantity_as_integer", &quantity, vec![], lift!(q::as_integer))?;
    member(
        env,
        "asApproximateFloat",
        "quantity_as_approximate_float",
        &quantity,
        vec![],
        lift!(q::as_approximate_float),
    )?;
    // Kubernetes IP and CIDR libraries (k8s.io/apiserver/pkg/cel/library/ip.go, cidr.go).
    use crate::net;
    let ip = Type::new_opaque_type(net::IP_TYPE);
    let cidr = Type::new_opaque_type(net::CIDR_TYPE);
    env.add_type(ip.to_owned())?;
    env.add_type(cidr.to_owned())?;
    env.add_overload("ip", "string_to_ip", vec![STRING_TYPE], lift!(net::ip))?;
    env.add_overload("isIP", "is_ip", vec![STRING_TYPE], lift!(net::is_ip))?;
    env.add_overload("ip.isCanonical", "ip_is_canonical", vec![STRING_TYPE], lift!(net::is_canonical))?;
    env.add_overload("string", "ip_to_string", vec![ip.to_owned()], lift!(net::ip_to_string))?;
    member(env, "family", "ip_family", &ip, vec![], lift!(net::family))?;
    member(env, "isUnspecified", "ip_is_unspecified", &ip, vec![], lift!(net::is_unspecified))?;
    member(env, "isLoopback", "ip_is_loopback", &ip, vec![], lift!(net::is_loopback))?;
    member(
        env,
        "isLinkLocalMulticast",
        "ip_is_link_local_multicast",
        &ip,
        vec![],
        lift!(net::is_link_local_multicast),
    )?;
    member(env, "isLinkLocalUnicast", "ip_is_link_local_unicast", &ip, vec![], lift!(net::is_link_local_unicast))?;
    member(env, "isGlobalUnicast", "ip_is_global_unicast", &ip, vec![], lift!(net::is_global_unicast))?;
    env.add_overload("cidr", "string_to_cidr", vec![STRING_TYPE], lift!(net::cidr))?;
    env.add_overload("isCIDR", "is_cidr", vec![STRING_TYPE], lift!(net::is_cidr))?;
    env.add_overload("string", "cidr_to_string", vec![cidr.to_owned()], lift!(net::cidr_to_string))?;
    member(env, "containsIP", "cidr_contains_ip_string", &cidr, vec![STRING_TYPE], lift!(net::contains_ip))?;
    member(env, "containsIP", "cidr_contains_ip_ip", &cidr, vec![ip.to_owned()], lift!(net::contains_ip))?;
    member(env, "containsCIDR", "cidr_contains_cidr_string", &cidr, vec![STRING_TYPE], lift!(net::contains_cidr))?;
    member(env, "containsCIDR", "cidr_contains_cidr", &cidr, vec![cidr.to_owned()], lift!(net::contains_cidr))?;
    member(env, "ip", "cidr_ip", &cidr, vec![], lift!(net::cidr_ip))?;
    member(env, "masked", "cidr_masked", &cidr, vec![], lift!(net::masked))?;
    member(env, "prefixLength", "cidr_prefix_length", &cidr, vec![], lift!(net::prefix_length))?;
    // Kubernetes URL library (k8s.io/apiserver/pkg/cel/library/urls.go).
    use crate::url as u;
    let url = Type::new_opaque_type(u::URL_TYPE);
    env.add_type(url.to_owned())?;
    env.add_overload("url", "string_to_url", vec![STRING_TYPE], lift!(u::url))?;
    env.add_overload("isURL", "is_url_string", vec![STRING_TYPE], lift!(u::is_url))?;
    member(env, "getScheme", "url_get_scheme", &url, vec![], lift!(u::get_scheme))?;
    member(env, "getHost", "url_get_host", &url, vec![], lift!(u::get_host))?;
    member(env, "getHostname", "url_get_hostname", &url, vec![], lift!(u::get_hostname))?;
    member(env, "getPort", "url_get_port", &url, vec![], lift!(u::get_port))?;
    member(env, "getEscapedPath", "url_get_escaped_path", &url, vec![], lift!(u::get_escaped_path))?;
    member(env, "getQuery", "url_get_query", &url, vec![], lift!(u::get_query))?;
    // Kubernetes format library (k8s.io/apiserver/pkg/cel/library/format.go).
    use crate::format as f;
    let format = Type::new_opaque_type(f::FORMAT_TYPE);
    env.add_type(format.to_owned())?;
    env.add_overload("format.named", "format-named", vec![STRING_TYPE], lift!(f::named))?;
    member(env, "validate", "format-validate", &format, vec![STRING_TYPE], lift!(f::validate))?;
    macro_rules! constant_formats {
        ($($name:literal),* $(,)?) => {$(
            {
                fn constant(_: &[Value]) -> Result<Value, ExecutionError> {
                    Ok(f::constant($name))
                }
                env.add_overload(concat!("format.", $name), concat!("format.", $name), vec![], lift!(constant))?;
            }
        )*};
    }
    constant_formats!(
        "dns1123Label",
        "dns1123Subdomain",
        "dns1035Label",
        "qualifiedName",
        "dns1123LabelPrefix",
        "dns1123SubdomainPrefix",
        "dns1035LabelPrefix",
        "labelValue",
        "uri",
        "uuid",
        "byte",
        "date",
        "datetime",
    );
    // Kubernetes semver library (k8s.io/apiserver/pkg/cel/library/semverlib.go).
    use crate::version as v;
    let semver = Type::new_opaque_type(v::SEMVER_TYPE);
    env.add_type(semver.to_owned())?;
    env.add_overload("semver", "string_to_semver", vec![STRING_TYPE], lift!(v::semver))?;
    env.add_overload("semver", "string_bool_to_semver", vec![STRING_TYPE, BOOL_TYPE], lift!(v::semver))?;
    env.add_overload("isSemver", "is_semver_string", vec![STRING_TYPE], lift!(v::is_semver))?;
    env.add_overload("isSemver", "is_semver_string_bool", vec![STRING_TYPE, BOOL_TYPE], lift!(v::is_semver))?;
    member(env, "major", "semver_major", &semver, vec![], lift!(v::major))?;
    member(env, "minor", "semver_minor", &semver, vec![], lift!(v::minor))?;
    member(env, "patch", "semver_patch", &semver, vec![], lift!(v::patch))?;
    member(
        env,
        "isGreaterThan",
        "semver_is_greater_than",
        &semver,
        vec![semver.to_owned()],
        lift!(v::is_greater_than),
    )?;
    member(env, "isLessThan", "semver_is_less_than", &semver, vec![semver.to_owned()], lift!(v::is_less_than))?;
    member(env, "compareTo", "semver_compare_to", &semver, vec![semver.to_owned()], lift!(v::compare_to))?;
    // Kubernetes authorizer library (k8s.io/apiserver/pkg/cel/library/authz.go).
    use crate::authz as a;
    let authorizer = Type::new_opaque_type(a::AUTHORIZER_TYPE);
    let path_check = Type::new_opaque_type(a::PATH_CHECK_TYPE);
    let group_check = Type::new_opaque_type(a::GROUP_CHECK_TYPE);
    let resource_check = Type::new_opaque_type(a::RESOURCE_CHECK_TYPE);
    let decision = Type::new_opaque_type(a::DECISION_TYPE);
    for t in [&authorizer, &path_check, &group_check, &resource_check, &decision] {
        env.add_type(t.to_owned())?;
    }
    member(env, "path", "authorizer_path", &authorizer, vec![STRING_TYPE], lift!(a::path))?;
    member(env, "group", "authorizer_group", &authorizer, vec![STRING_TYPE], lift!(a::group))?;
    member(
        env,
        "serviceAccount",
        "authorizer_serviceaccount",
        &authorizer,
        vec![STRING_TYPE, STRING_TYPE],
        lift!(a::service_account),
    )?;
    member(env, "resource", "groupcheck_resource", &group_check, vec![STRING_TYPE], lift!(a::resource))?;
    member(env, "subresource", "resourcecheck_subresource", &resource_check, vec![STRING_TYPE], lift!(a::subresource))?;
    member(env, "namespace", "resourcecheck_namespace", &resource_check, vec![STRING_TYPE], lift!(a::namespace))?;
    member(env, "name", "resourcecheck_name", &resource_check, vec![STRING_TYPE], lift!(a::name))?;
    member(env, "check", "pathcheck_check", &path_check, vec![STRING_TYPE], lift!(a::check))?;
    member(env, "check", "resourcecheck_check", &resource_check, vec![STRING_TYPE], lift!(a::check))?;
    member(env, "allowed", "decision_allowed", &decision, vec![], lift!(a::allowed))?;
    member(env, "reason", "decision_reason", &decision, vec![], lift!(a::reason))?;
    member(env, "errored", "decision_errored", &decision, vec![], lift!(a::errored))?;
    member(env, "error", "decision_error", &decision, vec![], lift!(a::error))?;
    // cel-go's optional library, version 2: `first`, `last`, `optional.unwrap`, `unwrapOpt`.
    env.add_member_overload("first", "list_first", LIST_TYPE, vec![], lift!(first))?;
    env.add_member_overload("last", "list_last", LIST_TYPE, vec![], lift!(last))?;
    env.add_overload("optional.unwrap", "optional_unwrap_list", vec![LIST_TYPE], lift!(unwrap_opt))?;
    env.add_member_overload("unwrapOpt", "optional_unwrapOpt_list", LIST_TYPE, vec![], lift!(unwrap_opt))?;
    // cel-go's sets extension (ext.Sets).
    env.add_overload("sets.contains", "list_sets_contains_list", vec![LIST_TYPE, LIST_TYPE], lift!(sets_contains))?;
    env.add_overload(
        "sets.equivalent",
        "list_sets_equivalent_list",
        vec![LIST_TYPE, LIST_TYPE],
        lift!(sets_equivalent),
    )?;
    env.add_overload(
        "sets.intersects",
        "list_sets_intersects_list",
        vec![LIST_TYPE, LIST_TYPE],
        lift!(sets_intersects),
    )?;
    Ok(())
}

/// Expands `cel.bind(x, init, body)` as cel-go does: a comprehension over nothing whose
/// accumulator `x` starts as `init`, and whose result is `body`. Declines `bind` on any other
/// target.
fn bind_macro(
    helper: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
) -> Result<Option<IdedExpr>, ParseError> {
    if !matches!(target.as_ref().map(|t| &t.expr), Some(Expr::Ident(ns)) if ns == "cel") {
        return Ok(None);
    }
    let (Some(body), Some(init), Some(var)) = (args.pop(), args.pop(), args.pop()) else {
        return Ok(None);
    };
    let Expr::Ident(name) = var.expr else {
        return Err(helper.new_error(var.id, "cel.bind() variable names must be simple identifiers"));
    };
    let accu = helper.next_expr(Expr::Ident(name.clone()));
    let bind = ComprehensionExpr {
        iter_range: helper.next_expr(Expr::List(ListExpr::new(Vec::new()))),
        iter_var: "#unused".to_owned(),
        iter_var2: None,
        accu_var: name,
        accu_init: init,
        loop_cond: helper.next_expr(Expr::Literal(LiteralValue::Boolean(false.into()))),
        loop_step: accu,
        result: body,
    };
    Ok(Some(helper.next_expr(Expr::Comprehension(Box::new(bind)))))
}

/// The `i`th argument.
pub(crate) fn arg<'a>(args: &'a [Value], i: usize, function: &str) -> Result<&'a Value, ExecutionError> {
    args.get(i).ok_or_else(|| error(function, "missing argument"))
}

fn error(function: &str, message: impl ToString) -> ExecutionError {
    ExecutionError::function_error(function, message)
}

fn list<'a>(args: &'a [Value], function: &str) -> Result<&'a [Value], ExecutionError> {
    match args.first() {
        Some(Value::List(items)) => Ok(items.as_slice()),
        _ => Err(error(function, "expected a list")),
    }
}

/// The `i`th argument, which must be a string.
pub(crate) fn string<'a>(args: &'a [Value], i: usize, function: &str) -> Result<&'a str, ExecutionError> {
    match args.get(i) {
        Some(Value::String(s)) => Ok(s.as_str()),
        _ => Err(ExecutionError::no_such_overload(function, args.iter().map(crate::type_name).collect())),
    }
}

/// Orders two values of one comparable type, as CEL's `<` does (numbers across types too).
fn compare(a: &Value, b: &Value, function: &str) -> Result<Ordering, ExecutionError> {
    let ordering = match (a, b) {
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
        (Value::UInt(x), Value::UInt(y)) => Some(x.cmp(y)),
        (Value::Float(x), Value::Float(y)) => x.partial_cmp(y),
        (Value::Int(x), Value::UInt(y)) => Some(i128::from(*x).cmp(&i128::from(*y))),
        (Value::UInt(x), Value::Int(y)) => Some(i128::from(*x).cmp(&i128::from(*y))),
        (Value::Int(x), Value::Float(y)) => (*x as f64).partial_cmp(y),
        (Value::Float(x), Value::Int(y)) => x.partial_cmp(&(*y as f64)),
        (Value::UInt(x), Value::Float(y)) => (*x as f64).partial_cmp(y),
        (Value::Float(x), Value::UInt(y)) => x.partial_cmp(&(*y as f64)),
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        (Value::Bytes(x), Value::Bytes(y)) => Some(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        (Value::Duration(x), Value::Duration(y)) => Some(x.cmp(y)),
        (Value::Timestamp(x), Value::Timestamp(y)) => Some(x.cmp(y)),
        _ => None,
    };
    ordering.ok_or_else(|| ExecutionError::no_such_overload(function, vec![crate::type_name(a), crate::type_name(b)]))
}

fn is_sorted(args: &[Value]) -> Result<Value, ExecutionError> {
    let items = list(args, "isSorted")?;
    for pair in items.windows(2) {
        if compare(&pair[0], &pair[1], "isSorted")? == Ordering::Greater {
            return Ok(Value::Bool(false));
        }
    }
    Ok(Value::Bool(true))
}

fn sum(args: &[Value]) -> Result<Value, ExecutionError> {
    let items = list(args, "sum")?;
    let Some(first) = items.first() else { return Ok(Value::Int(0)) };
    let mut total = first.clone();
    for item in &items[1..] {
        total = match (&total, item) {
            (Value::Int(a), Value::Int(b)) => {
                Value::Int(a.checked_add(*b).ok_or_else(|| error("sum", "integer overflow"))?)
            }
            (Value::UInt(a), Value::UInt(b)) => {
                Value::UInt(a.checked_add(*b).ok_or_else(|| error("sum", "unsigned integer overflow"))?)
            }
            (Value::Float(a), Value::Float(b)) => Value::Float(a + b),
            (Value::Duration(a), Value::Duration(b)) => Value::Duration(*a + *b),
            (a, b) => {
                return Err(ExecutionError::no_such_overload("sum", vec![crate::type_name(a), crate::type_name(b)]))
            }
        };
    }
    Ok(total)
}

fn extreme(args: &[Value], function: &str, want: Ordering) -> Result<Value, ExecutionError> {
    let items = list(args, function)?;
    let Some(mut best) = items.first() else {
        return Err(error(function, format!("{function} called on empty list")));
    };
    for item in &items[1..] {
        if compare(item, best, function)? == want {
            best = item;
        }
    }
    Ok(best.clone())
}

fn min(args: &[Value]) -> Result<Value, ExecutionError> {
    extreme(args, "min", Ordering::Less)
}

fn max(args: &[Value]) -> Result<Value, ExecutionError> {
    extreme(args, "max", Ordering::Greater)
}

fn index_of(args: &[Value]) -> Result<Value, ExecutionError> {
    let items = list(args, "indexOf")?;
    let needle = args.get(1).ok_or_else(ExecutionError::missing_argument_or_target)?;
    Ok(Value::Int(items.iter().position(|v| v == needle).map_or(-1, |i| i as i64)))
}

fn last_index_of(args: &[Value]) -> Result<Value, ExecutionError> {
    let items = list(args, "lastIndexOf")?;
    let needle = args.get(1).ok_or_else(ExecutionError::missing_argument_or_target)?;
    Ok(Value::Int(items.iter().rposition(|v| v == needle).map_or(-1, |i| i as i64)))
}

fn regex(pattern: &str, function: &str) -> Result<regex::Regex, ExecutionError> {
    regex::RegexBuilder::new(pattern)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| error(function, format!("invalid regular expression: {e}")))
}

fn find(args: &[Value]) -> Result<Value, ExecutionError> {
    let text = string(args, 0, "find")?;
    let re = regex(string(args, 1, "find")?, "find")?;
    Ok(Value::String(Arc::new(re.find(text).map_or_else(String::new, |m| m.as_str().to_owned()))))
}

fn find_all_limited(args: &[Value], limit: Option<i64>) -> Result<Value, ExecutionError> {
    let text = string(args, 0, "findAll")?;
    let re = regex(string(args, 1, "findAll")?, "findAll")?;
    let limit = match limit {
        Some(n) if n >= 0 => n as usize,
        _ => usize::MAX,
    };
    let found = re.find_iter(text).take(limit).map(|m| Value::String(Arc::new(m.as_str().to_owned())));
    Ok(Value::List(Arc::new(found.collect())))
}

fn find_all(args: &[Value]) -> Result<Value, ExecutionError> {
    find_all_limited(args, None)
}

fn find_all_n(args: &[Value]) -> Result<Value, ExecutionError> {
    let n = match args.get(2) {
        Some(Value::Int(n)) => *n,
        _ => return Err(ExecutionError::no_such_overload("findAll", args.iter().map(crate::type_name).collect())),
    };
    find_all_limited(args, Some(n))
}

fn two_lists<'a>(args: &'a [Value], function: &str) -> Result<(&'a [Value], &'a [Value]), ExecutionError> {
    match (args.first(), args.get(1)) {
        (Some(Value::List(a)), Some(Value::List(b))) => Ok((a.as_slice(), b.as_slice())),
        _ => Err(ExecutionError::no_such_overload(function, args.iter().map(crate::type_name).collect())),
    }
}

/// `sets.contains(a, b)`: every element of `b` is in `a`.
fn sets_contains(args: &[Value]) -> Result<Value, ExecutionError> {
    let (a, b) = two_lists(args, "sets.contains")?;
    Ok(Value::Bool(b.iter().all(|x| a.contains(x))))
}

/// `sets.equivalent(a, b)`: each list contains the other's elements.
fn sets_equivalent(args: &[Value]) -> Result<Value, ExecutionError> {
    let (a, b) = two_lists(args, "sets.equivalent")?;
    Ok(Value::Bool(b.iter().all(|x| a.contains(x)) && a.iter().all(|x| b.contains(x))))
}

/// `sets.intersects(a, b)`: the lists share an element.
fn sets_intersects(args: &[Value]) -> Result<Value, ExecutionError> {
    let (a, b) = two_lists(args, "sets.intersects")?;
    Ok(Value::Bool(b.iter().any(|x| a.contains(x))))
}

/// `list.first()`: the first element, or `optional.none()`.
fn first(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(crate::optional(list(args, "first")?.first().cloned()))
}

/// `list.last()`: the last element, or `optional.none()`.
fn last(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(crate::optional(list(args, "last")?.last().cloned()))
}

/// `optional.unwrap(list)` and `list.unwrapOpt()`: the values of the optionals that have one.
fn unwrap_opt(args: &[Value]) -> Result<Value, ExecutionError> {
    let mut out = Vec::new();
    for item in list(args, "unwrapOpt")? {
        let opt = match item {
            Value::Opaque(o) => o.downcast_ref::<cel::objects::OptionalValue>(),
            _ => None,
        }
        .ok_or_else(|| ExecutionError::no_such_overload("unwrapOpt", vec![crate::type_name(item)]))?;
        out.extend(opt.value().cloned());
    }
    Ok(Value::List(Arc::new(out)))
}
