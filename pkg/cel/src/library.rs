//! The Kubernetes CEL libraries on top of the `cel` crate's standard library and extensions.

use std::cmp::Ordering;
use std::sync::Arc;

use cel::common::types::{DYN_TYPE, INT_TYPE, LIST_TYPE, STRING_TYPE};
use cel::common::value::{CowVal, Val};
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
    env.add_overload("quantity", "string_to_quantity", vec![STRING_TYPE], lift!(q::quantity))?;
    env.add_overload("isQuantity", "is_quantity_string", vec![STRING_TYPE], lift!(q::is_quantity))?;
    env.add_member_overload(
        "isGreaterThan",
        "quantity_is_greater_than",
        DYN_TYPE,
        vec![DYN_TYPE],
        lift!(q::is_greater_than),
    )?;
    env.add_member_overload("isLessThan", "quantity_is_less_than", DYN_TYPE, vec![DYN_TYPE], lift!(q::is_less_than))?;
    env.add_member_overload("compareTo", "quantity_compare_to", DYN_TYPE, vec![DYN_TYPE], lift!(q::compare_to))?;
    env.add_member_overload("add", "quantity_add", DYN_TYPE, vec![DYN_TYPE], lift!(q::add))?;
    env.add_member_overload("sub", "quantity_sub", DYN_TYPE, vec![DYN_TYPE], lift!(q::sub))?;
    env.add_member_overload("sign", "quantity_sign", DYN_TYPE, vec![], lift!(q::sign))?;
    env.add_member_overload("isInteger", "quantity_is_integer", DYN_TYPE, vec![], lift!(q::is_integer))?;
    env.add_member_overload("asInteger", "quantity_as_integer", DYN_TYPE, vec![], lift!(q::as_integer))?;
    env.add_member_overload(
        "asApproximateFloat",
        "quantity_as_approximate_float",
        DYN_TYPE,
        vec![],
        lift!(q::as_approximate_float),
    )?;
    Ok(())
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

fn string<'a>(args: &'a [Value], i: usize, function: &str) -> Result<&'a str, ExecutionError> {
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
