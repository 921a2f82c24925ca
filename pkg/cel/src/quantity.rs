//! The Kubernetes quantity library (k8s.io/apiserver/pkg/cel/library/quantity.go): `quantity`,
//! `isQuantity` and the member functions on quantities. A quantity is held exactly, in
//! nano-units (so `1n` is the smallest step, as upstream's canonical form).

use std::cmp::Ordering;
use std::sync::Arc;

use cel::objects::Opaque;
use cel::{ExecutionError, Value};

/// The CEL type name of a quantity.
pub(crate) const QUANTITY_TYPE: &str = "kubernetes.Quantity";

/// A parsed `resource.Quantity`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Quantity {
    nanos: i128,
}

impl Opaque for Quantity {
    fn runtime_type_name(&self) -> &str {
        QUANTITY_TYPE
    }
}

/// `1.5Gi`, `100m`, `2e3` in nano-units; `None` if it is not a quantity.
fn parse(s: &str) -> Option<i128> {
    let s = s.trim_end();
    let end = s.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-')).unwrap_or(s.len());
    let (number, suffix) = s.split_at(end);
    let (negative, number) = match number.strip_prefix('-') {
        Some(n) => (true, n),
        None => (false, number.strip_prefix('+').unwrap_or(number)),
    };
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && frac.is_empty() || !(whole.chars().chain(frac.chars()).all(|c| c.is_ascii_digit())) {
        return None;
    }
    let digits: i128 = format!("{whole}{frac}").parse().ok()?;
    let (mut exp10, bin): (i32, u32) = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        e if e.starts_with(['e', 'E']) => (e[1..].parse::<i32>().ok().filter(|x| x.abs() <= 30)?, 0),
        _ => return None,
    };
    exp10 += 9 - frac.len() as i32;
    let mut n = digits.checked_mul(1i128.checked_shl(bin)?)?;
    if exp10 >= 0 {
        n = n.checked_mul(10i128.checked_pow(exp10 as u32)?)?;
    } else {
        let d = 10i128.checked_pow(exp10.unsigned_abs())?;
        // Rounded up, as upstream rounds a quantity below its smallest scale.
        n = (n + d - 1) / d;
    }
    Some(if negative { -n } else { n })
}

fn quantity_of(v: &Value, function: &str) -> Result<i128, ExecutionError> {
    match v {
        Value::Opaque(o) => o
            .downcast_ref::<Quantity>()
            .map(|q| q.nanos)
            .ok_or_else(|| ExecutionError::function_error(function, "expected a quantity")),
        Value::Int(i) => Ok(i128::from(*i) * 1_000_000_000),
        _ => Err(ExecutionError::function_error(function, "expected a quantity")),
    }
}

fn value(nanos: i128) -> Value {
    Value::Opaque(Arc::new(Quantity { nanos }))
}

fn arg<'a>(args: &'a [Value], i: usize, function: &str) -> Result<&'a Value, ExecutionError> {
    args.get(i).ok_or_else(|| ExecutionError::function_error(function, "missing argument"))
}

pub(crate) fn quantity(args: &[Value]) -> Result<Value, ExecutionError> {
    match arg(args, 0, "quantity")? {
        Value::String(s) => parse(s).map(value).ok_or_else(|| {
            ExecutionError::function_error(
                "quantity",
                "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            )
        }),
        _ => Err(ExecutionError::function_error("quantity", "expected a string")),
    }
}

pub(crate) fn is_quantity(args: &[Value]) -> Result<Value, ExecutionError> {
    match arg(args, 0, "isQuantity")? {
        Value::String(s) => Ok(Value::Bool(parse(s).is_some())),
        _ => Err(ExecutionError::function_error("isQuantity", "expected a string")),
    }
}

fn compare(args: &[Value], function: &str) -> Result<Ordering, ExecutionError> {
    Ok(quantity_of(arg(args, 0, function)?, function)?.cmp(&quantity_of(arg(args, 1, function)?, function)?))
}

pub(crate) fn is_greater_than(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(compare(args, "isGreaterThan")? == Ordering::Greater))
}

pub(crate) fn is_less_than(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(compare(args, "isLessThan")? == Ordering::Less))
}

pub(crate) fn compare_to(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Int(compare(args, "compareTo")? as i64))
}

pub(crate) fn add(args: &[Value]) -> Result<Value, ExecutionError> {
    let (a, b) = (quantity_of(arg(args, 0, "add")?, "add")?, quantity_of(arg(args, 1, "add")?, "add")?);
    a.checked_add(b).map(value).ok_or_else(|| ExecutionError::function_error("add", "quantity overflow"))
}

pub(crate) fn sub(args: &[Value]) -> Result<Value, ExecutionError> {
    let (a, b) = (quantity_of(arg(args, 0, "sub")?, "sub")?, quantity_of(arg(args, 1, "sub")?, "sub")?);
    a.checked_sub(b).map(value).ok_or_else(|| ExecutionError::function_error("sub", "quantity overflow"))
}

pub(crate) fn sign(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Int(quantity_of(arg(args, 0, "sign")?, "sign")?.signum() as i64))
}

pub(crate) fn is_integer(args: &[Value]) -> Result<Value, ExecutionError> {
    let n = quantity_of(arg(args, 0, "isInteger")?, "isInteger")?;
    Ok(Value::Bool(n % 1_000_000_000 == 0 && i64::try_from(n / 1_000_000_000).is_ok()))
}

pub(crate) fn as_integer(args: &[Value]) -> Result<Value, ExecutionError> {
    let n = quantity_of(arg(args, 0, "asInteger")?, "asInteger")?;
    if n % 1_000_000_000 != 0 {
        return Err(ExecutionError::function_error("asInteger", "cannot convert value to integer"));
    }
    i64::try_from(n / 1_000_000_000)
        .map(Value::Int)
        .map_err(|_| ExecutionError::function_error("asInteger", "cannot convert value to integer"))
}

pub(crate) fn as_approximate_float(args: &[Value]) -> Result<Value, ExecutionError> {
    let n = quantity_of(arg(args, 0, "asApproximateFloat")?, "asApproximateFloat")?;
    Ok(Value::Float(n as f64 / 1e9))
}
