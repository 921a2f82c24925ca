//! A custom resource's `kubectl get` columns: its version's `additionalPrinterColumns` after the
//! Name column (or Age alone when it declares none), each cell read with the column's JSONPath
//! and typed as upstream's table convertor types it.
//!
//! The JSONPath subset is upstream's "simple" one: fields (`.spec.replicas`), indexes
//! (`.items[0]`), and filters on a field (`.status.conditions[?(@.type=="Ready")].status`).

use crate::printers::{human_duration, ColumnDefinition};
use jiff::Timestamp;
use serde_json::{json, Value};

/// One `additionalPrinterColumns` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrinterColumn {
    pub name: String,
    /// `string`, `integer`, `number`, `boolean` or `date`.
    pub type_: String,
    pub format: String,
    pub description: String,
    pub priority: i32,
    pub json_path: String,
}

impl PrinterColumn {
    pub fn from_crd(c: &Value) -> Option<PrinterColumn> {
        let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        Some(PrinterColumn {
            name: c.get("name")?.as_str()?.to_string(),
            type_: s("type"),
            format: s("format"),
            description: s("description"),
            priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0) as i32,
            json_path: c.get("jsonPath")?.as_str()?.to_string(),
        })
    }

    /// The column a version that declares none gets.
    pub fn age() -> PrinterColumn {
        PrinterColumn {
            name: "Age".into(),
            type_: "date".into(),
            format: String::new(),
            description: AGE_DESCRIPTION.into(),
            priority: 0,
            json_path: ".metadata.creationTimestamp".into(),
        }
    }
}

const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const AGE_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// The Table's column definitions: Name, then the columns.
pub fn definitions(columns: &[PrinterColumn]) -> Vec<Value> {
    let name =
        ColumnDefinition { name: "Name", type_: "string", format: "name", description: NAME_DESCRIPTION, priority: 0 };
    std::iter::once(name.to_json())
        .chain(columns.iter().map(|c| {
            json!({"name": c.name, "type": c.type_, "format": c.format, "description": c.description, "priority": c.priority})
        }))
        .collect()
}

/// One object's cells: its name, then each column's value (`null` where the path finds nothing).
pub fn cells(columns: &[PrinterColumn], obj: &Value, now: Timestamp) -> Vec<Value> {
    let name = obj.pointer("/metadata/name").cloned().unwrap_or(Value::String(String::new()));
    std::iter::once(name).chain(columns.iter().map(|c| cell(c, obj, now))).collect()
}

fn cell(c: &PrinterColumn, obj: &Value, now: Timestamp) -> Value {
    let Some(v) = find(obj, &c.json_path) else { return Value::Null };
    match c.type_.as_str() {
        "integer" => v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)).map_or(Value::Null, Value::from),
        "number" => v.as_f64().map_or(Value::Null, Value::from),
        "boolean" => v.as_bool().map_or(Value::Null, Value::from),
        "date" => match v.as_str() {
            Some(t) => match t.parse::<Timestamp>() {
                Ok(ts) => Value::String(age(now, ts)),
                Err(_) => Value::String("<invalid>".into()),
            },
            None => Value::Null,
        },
        _ => Value::String(text(v)),
    }
}

fn age(now: Timestamp, then: Timestamp) -> String {
    let d = now.duration_since(then);
    if d.is_negative() {
        return "0s".into();
    }
    human_duration(d.unsigned_abs())
}

/// A value as JSONPath prints it: a string as itself, anything else as JSON.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Evaluates the JSONPath subset on `obj`: the first value it finds.
pub fn find<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let path = path.trim();
    let path = path.strip_prefix('{').and_then(|p| p.strip_suffix('}')).unwrap_or(path);
    let mut cur = obj;
    let mut rest = path.strip_prefix('$').unwrap_or(path);
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let (field, tail) = r.split_at(end);
            if !field.is_empty() {
                cur = cur.get(field)?;
            }
            rest = tail;
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let (inner, tail) = (&r[..end], &r[end + 1..]);
            cur = if let Some(filter) = inner.strip_prefix("?(").and_then(|f| f.strip_suffix(')')) {
                let (lhs, rhs) = filter.split_once("==")?;
                let field = lhs.trim().strip_prefix("@.")?;
                let want = rhs.trim().trim_matches(|c| c == '"' || c == '\'');
                cur.as_array()?.iter().find(|item| item.get(field).is_some_and(|v| text(v) == want))?
            } else if let Ok(i) = inner.parse::<usize>() {
                cur.as_array()?.get(i)?
            } else if inner == "*" {
                cur.as_array()?.first()?
            } else {
                cur.get(inner.trim_matches(|c| c == '"' || c == '\''))?
            };
            rest = tail;
        } else {
            return None;
        }
    }
    Some(cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj() -> Value {
        json!({"metadata": {"name": "w1", "creationTimestamp": "2026-12-01T11:00:00Z"},
               "spec": {"size": 3, "ratio": 0.5, "on": true, "tags": ["a", "b"], "image": "nginx"},
               "status": {"conditions": [{"type": "Synced", "status": "False"}, {"type": "Ready", "status": "True"}]}})
    }

    fn col(name: &str, type_: &str, path: &str) -> PrinterColumn {
        PrinterColumn {
            name: name.into(),
            type_: type_.into(),
            format: String::new(),
            description: String::new(),
            priority: 0,
            json_path: path.into(),
        }
    }

    #[test]
    fn json_paths_find_fields_indexes_and_filtered_items() {
        let o = obj();
        assert_eq!(find(&o, ".spec.size"), Some(&json!(3)));
        assert_eq!(find(&o, ".spec.tags[1]"), Some(&json!("b")));
        assert_eq!(find(&o, r#".status.conditions[?(@.type=="Ready")].status"#), Some(&json!("True")));
        assert_eq!(find(&o, "{.spec.image}"), Some(&json!("nginx")));
        assert_eq!(find(&o, ".spec.missing"), None);
        assert_eq!(find(&o, ".spec.tags[5]"), None);
    }

    #[test]
    fn cells_are_typed_as_their_columns() {
        let now: Timestamp = "2026-12-01T12:00:00Z".parse().expect("time");
        let cols = [
            col("Size", "integer", ".spec.size"),
            col("Ratio", "number", ".spec.ratio"),
            col("On", "boolean", ".spec.on"),
            col("Ready", "string", r#".status.conditions[?(@.type=="Ready")].status"#),
            col("Tags", "string", ".spec.tags"),
            col("Missing", "string", ".spec.nothing"),
            PrinterColumn::age(),
        ];
        assert_eq!(
            cells(&cols, &obj(), now),
            vec![
                json!("w1"),
                json!(3),
                json!(0.5),
                json!(true),
                json!("True"),
                json!("[\"a\",\"b\"]"),
                Value::Null,
                json!("60m")
            ]
        );
        let defs = definitions(&cols[..1]);
        assert_eq!(defs[0]["name"], "Name");
        assert_eq!(defs[0]["format"], "name");
        assert_eq!(defs[1], json!({"name": "Size", "type": "integer", "format": "", "description": "", "priority": 0}));
    }
}
