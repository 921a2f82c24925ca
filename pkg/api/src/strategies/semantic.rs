//! Semantic equality as upstream's `apiequality.Semantic.DeepEqual`: unset, `null`, empty lists
//! and empty maps are all the same thing, so `[]` and an omitted field compare equal.

use serde::Serialize;
use serde_json::Value;

/// Drops nulls, empty arrays and empty objects, recursively.
pub fn prune(v: Value) -> Value {
    match v {
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, prune(v))).filter(|(_, v)| !is_empty(v)).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(prune).collect()),
        other => other,
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// Whether two values are semantically equal.
pub fn equal<T: Serialize + ?Sized>(a: &T, b: &T) -> bool {
    match (serde_json::to_value(a), serde_json::to_value(b)) {
        (Ok(a), Ok(b)) => prune(a) == prune(b),
        _ => false,
    }
}

/// The top-level fields of two objects that differ semantically, as `(name, old, new)`.
pub fn changed_fields<T: Serialize + ?Sized>(old: &T, new: &T) -> Vec<(String, Value, Value)> {
    let (Ok(Value::Object(o)), Ok(Value::Object(n))) = (serde_json::to_value(old), serde_json::to_value(new)) else {
        return Vec::new();
    };
    let (o, n) = (prune(Value::Object(o)), prune(Value::Object(n)));
    let (Value::Object(o), Value::Object(n)) = (o, n) else { return Vec::new() };
    let mut keys: Vec<&String> = o.keys().chain(n.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| o.get(*k) != n.get(*k))
        .map(|k| (k.clone(), o.get(k).cloned().unwrap_or(Value::Null), n.get(k).cloned().unwrap_or(Value::Null)))
        .collect()
}

/// A short rendering of what changed, in the spirit of the `cmp.Diff` upstream appends to
/// "may not change" errors.
pub fn diff_text<T: Serialize + ?Sized>(type_name: &str, old: &T, new: &T) -> String {
    let mut out = format!("  {type_name}{{\n");
    for (k, o, n) in changed_fields(old, new) {
        if !o.is_null() {
            out.push_str(&format!("- \t{k}: {o},\n"));
        }
        if !n.is_null() {
            out.push_str(&format!("+ \t{k}: {n},\n"));
        }
    }
    out.push_str("  }\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn empty_and_missing_are_equal() {
        assert!(equal(&json!({"a": [], "b": {}, "c": null, "d": 1}), &json!({"d": 1})));
        assert!(!equal(&json!({"d": 1}), &json!({"d": 2})));
        assert!(!equal(&json!({"d": false}), &json!({})));
    }

    #[test]
    fn changed_fields_lists_top_level_differences() {
        let d = changed_fields(&json!({"a": 1, "b": [1]}), &json!({"a": 1, "b": [2], "c": "x"}));
        let names: Vec<&str> = d.iter().map(|(k, _, _)| k.as_str()).collect();
        assert_eq!(names, ["b", "c"]);
        let text = diff_text("core.PodSpec", &json!({"nodeName": "a"}), &json!({"nodeName": "b"}));
        assert_eq!(text, "  core.PodSpec{\n- \tnodeName: \"a\",\n+ \tnodeName: \"b\",\n  }\n");
    }
}
