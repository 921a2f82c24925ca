//! The Kubernetes semver library (k8s.io/apiserver/pkg/cel/library/semverlib.go): `semver`,
//! `isSemver` (both with an optional `normalize` flag), `major`, `minor`, `patch`,
//! `isGreaterThan`, `isLessThan` and `compareTo`. Versions compare by semver precedence: build
//! metadata is ignored, as blang/semver does.

use std::cmp::Ordering;
use std::sync::Arc;

use cel::objects::Opaque;
use cel::{ExecutionError, Value};

use crate::library::{arg, string};

/// The CEL type name of a version.
pub(crate) const SEMVER_TYPE: &str = "kubernetes.Semver";

/// A semantic version.
#[derive(Debug, Clone)]
pub(crate) struct Semver(semver::Version);

impl PartialEq for Semver {
    fn eq(&self, other: &Self) -> bool {
        self.0.cmp_precedence(&other.0) == Ordering::Equal
    }
}

impl Eq for Semver {}

impl Opaque for Semver {
    fn runtime_type_name(&self) -> &str {
        SEMVER_TYPE
    }
}

/// Upstream's `normalizeVersion`: no `v` prefix, no leading zeros, missing minor and patch
/// numbers added as `0`.
fn normalize(s: &str) -> String {
    let s = s.strip_prefix('v').unwrap_or(s);
    let end = s.find(['-', '+']).unwrap_or(s.len());
    let (core, extra) = s.split_at(end);
    let mut parts: Vec<String> = core
        .split('.')
        .map(|p| {
            let trimmed = p.trim_start_matches('0');
            if trimmed.is_empty() && !p.is_empty() {
                "0".to_owned()
            } else {
                trimmed.to_owned()
            }
        })
        .collect();
    if parts.len() <= 3 {
        while parts.len() < 3 {
            parts.push("0".to_owned());
        }
    }
    format!("{}{extra}", parts.join("."))
}

/// Parses a version as blang/semver's `Parse` does (strict: no `v`, no leading zeros, three
/// numbers); the error in blang's words where they differ.
fn parse(s: &str, normalize_first: bool) -> Result<semver::Version, String> {
    let s = if normalize_first { normalize(s) } else { s.to_owned() };
    let core_end = s.find(['-', '+']).unwrap_or(s.len());
    if s[..core_end].split('.').count() != 3 {
        return Err("No Major.Minor.Patch elements found".to_owned());
    }
    semver::Version::parse(&s).map_err(|e| e.to_string())
}

fn flag(args: &[Value], function: &str) -> Result<bool, ExecutionError> {
    match args.get(1) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(ExecutionError::no_such_overload(function, args.iter().map(crate::type_name).collect())),
    }
}

pub(crate) fn semver(args: &[Value]) -> Result<Value, ExecutionError> {
    let version = parse(string(args, 0, "semver")?, flag(args, "semver")?)
        .map_err(|e| ExecutionError::function_error("semver", e))?;
    Ok(Value::Opaque(Arc::new(Semver(version))))
}

pub(crate) fn is_semver(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(parse(string(args, 0, "isSemver")?, flag(args, "isSemver")?).is_ok()))
}

fn version<'a>(args: &'a [Value], i: usize, function: &str) -> Result<&'a semver::Version, ExecutionError> {
    match arg(args, i, function)? {
        Value::Opaque(o) => o.downcast_ref::<Semver>().map(|v| &v.0),
        _ => None,
    }
    .ok_or_else(|| ExecutionError::function_error(function, "expected a semver"))
}

fn number(n: u64) -> Value {
    Value::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

pub(crate) fn major(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(number(version(args, 0, "major")?.major))
}

pub(crate) fn minor(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(number(version(args, 0, "minor")?.minor))
}

pub(crate) fn patch(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(number(version(args, 0, "patch")?.patch))
}

fn compare(args: &[Value], function: &str) -> Result<Ordering, ExecutionError> {
    Ok(version(args, 0, function)?.cmp_precedence(version(args, 1, function)?))
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
