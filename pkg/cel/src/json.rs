//! JSON ⇄ CEL values, and upstream's wording of evaluation errors.

use std::collections::HashMap;
use std::sync::Arc;

use cel::common::types::{CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, CelUInt};
use cel::common::value::Val;
use cel::objects::{Key, Map};
use cel::{ExecutionError, Value};

/// A JSON value as CEL sees it: objects as maps with string keys, integers as `int` (`uint`
/// above `i64`), other numbers as `double`, strings, booleans, lists and `null`.
///
/// A schema may want other types (a `number` that JSON wrote as `5` is a `double`): convert
/// those before binding, with [`Value::Float`] and the like.
pub fn from_json(value: &serde_json::Value) -> Value {
    match value {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::Int(i)
            } else if let Some(u) = n.as_u64() {
                Value::UInt(u)
            } else {
                Value::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        serde_json::Value::String(s) => Value::String(Arc::new(s.clone())),
        serde_json::Value::Array(items) => Value::List(Arc::new(items.iter().map(from_json).collect())),
        serde_json::Value::Object(fields) => map(fields.iter().map(|(k, v)| (k.clone(), from_json(v)))),
    }
}

/// [`from_json`] straight into the engine's representation of a variable: the value that
/// converting `from_json`'s result would give, made in one pass.
pub(crate) fn val_from_json(value: &serde_json::Value) -> Box<dyn Val> {
    match value {
        serde_json::Value::Null => Box::new(CelNull),
        serde_json::Value::Bool(b) => Box::new(CelBool::from(*b)),
        serde_json::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Box::new(CelInt::from(i))
            } else if let Some(u) = n.as_u64() {
                Box::new(CelUInt::from(u))
            } else {
                Box::new(CelDouble::from(n.as_f64().unwrap_or(f64::NAN)))
            }
        }
        serde_json::Value::String(s) => Box::new(CelString::from(s.clone())),
        serde_json::Value::Array(items) => Box::new(CelList::from(items.iter().map(val_from_json).collect::<Vec<_>>())),
        serde_json::Value::Object(fields) => Box::new(CelMap::from(
            fields.iter().map(|(k, v)| (CelMapKey::from(k.clone()), val_from_json(v))).collect::<HashMap<_, _>>(),
        )),
    }
}

/// [`val_from_json`] of a value cut down to the fields expressions read: a map of only those
/// fields, each converted as far as it is read.
pub(crate) fn val_from_pruned(value: &crate::Pruned<'_>) -> Box<dyn Val> {
    match value {
        crate::Pruned::Whole(v) => val_from_json(v),
        crate::Pruned::Fields(fields) => Box::new(CelMap::from(
            fields
                .iter()
                .map(|(k, v)| (CelMapKey::from((*k).to_owned()), val_from_pruned(v)))
                .collect::<HashMap<_, _>>(),
        )),
    }
}

/// A CEL map of string keys.
pub fn map(entries: impl IntoIterator<Item = (String, Value)>) -> Value {
    let map: HashMap<Key, Value> = entries.into_iter().map(|(k, v)| (Key::from(k), v)).collect();
    Value::Map(Map { map: Arc::new(map) })
}

/// A CEL value as JSON: maps become objects (keys as strings), bytes base64, durations and
/// timestamps strings; `None` for values JSON cannot hold (functions, types).
pub fn to_json(value: &Value) -> Option<serde_json::Value> {
    Some(match value {
        Value::Null => serde_json::Value::Null,
        Value::Bool(b) => (*b).into(),
        Value::Int(i) => (*i).into(),
        Value::UInt(u) => (*u).into(),
        Value::Float(f) => serde_json::Number::from_f64(*f).map_or(serde_json::Value::Null, Into::into),
        Value::String(s) => s.as_str().into(),
        Value::List(items) => items.iter().map(to_json).collect::<Option<Vec<_>>>()?.into(),
        Value::Map(m) => {
            let mut out = serde_json::Map::new();
            for (k, v) in m.map.iter() {
                let key = match k {
                    Key::String(s) => s.as_str().to_owned(),
                    other => other.to_string(),
                };
                out.insert(key, to_json(v)?);
            }
            serde_json::Value::Object(out)
        }
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned().into(),
        Value::Timestamp(t) => t.to_rfc3339().into(),
        Value::Duration(d) => format!("{}s", d.num_milliseconds() as f64 / 1000.0).into(),
        _ => return None,
    })
}

/// An execution error in cel-go's words where they differ: `no such key: spec`, `no such
/// overload`, `division by zero`.
pub(crate) fn execution_message(e: &ExecutionError) -> String {
    match e {
        ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        ExecutionError::DivisionByZero(_) => "division by zero".to_owned(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".to_owned(),
        ExecutionError::NoSuchOverload(_) => "no such overload".to_owned(),
        ExecutionError::IndexOutOfBounds(v) => {
            format!("index out of bounds: {}", crate::to_json(v).map_or_else(|| format!("{v:?}"), |j| j.to_string()))
        }
        ExecutionError::Overflow(..) => "integer overflow".to_owned(),
        ExecutionError::UndeclaredReference(r) => format!("undeclared reference to '{r}'"),
        ExecutionError::FunctionError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}
