//! A CustomResourceDefinition's structural schema (`openAPIV3Schema`) applied to an object, as
//! upstream's apiextensions-apiserver applies it: unknown fields are pruned (and reported, for
//! `fieldValidation`), `default`s fill in missing fields, and the value is validated against
//! the schema (types, `required`, `enum`, bounds, lengths, `pattern`, item and property counts).
//!
//! `x-kubernetes-preserve-unknown-fields` keeps what the schema does not name,
//! `x-kubernetes-embedded-resource` keeps an embedded object's `apiVersion`, `kind` and
//! `metadata`, and `x-kubernetes-int-or-string` accepts either. CEL rules
//! (`x-kubernetes-validations`) are evaluated by [`super::rules`].

use crate::field::{FieldError, Path};
use serde_json::{Map, Value};

fn flag(schema: &Value, name: &str) -> bool {
    schema.get(name).and_then(Value::as_bool).unwrap_or(false)
}

fn properties(schema: &Value) -> Option<&Map<String, Value>> {
    schema.get("properties").and_then(Value::as_object)
}

/// The schema of map values (`additionalProperties` as a schema), if the node is a map.
fn additional(schema: &Value) -> Option<&Value> {
    schema.get("additionalProperties").filter(|a| a.is_object())
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Drops the fields of `value` the schema does not name; returns their dotted paths. At the
/// root (and in embedded resources) `apiVersion`, `kind` and `metadata` always stay.
pub fn prune(value: &mut Value, schema: &Value, root: bool, path: &str, dropped: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            let embedded = root || flag(schema, "x-kubernetes-embedded-resource");
            let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
            let props = properties(schema);
            let extra = additional(schema);
            let keys: Vec<String> = map.keys().cloned().collect();
            for k in keys {
                if embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let child = props.and_then(|p| p.get(&k)).or(extra);
                match child {
                    Some(c) => {
                        if let Some(v) = map.get_mut(&k) {
                            prune(v, c, false, &join(path, &k), dropped);
                        }
                    }
                    None if preserve || schema.get("additionalProperties") == Some(&Value::Bool(true)) => {}
                    None => {
                        map.remove(&k);
                        dropped.push(join(path, &k));
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, v) in items.iter_mut().enumerate() {
                    prune(v, item_schema, false, &format!("{path}[{i}]"), dropped);
                }
            }
        }
        _ => {}
    }
}

/// Fills in each missing property that has a `default`, depth first.
pub fn apply_defaults(value: &mut Value, schema: &Value) {
    match value {
        Value::Object(map) => {
            if let Some(props) = properties(schema) {
                for (k, s) in props {
                    if !map.contains_key(k) {
                        if let Some(d) = s.get("default") {
                            map.insert(k.clone(), d.clone());
                        }
                    }
                    if let Some(v) = map.get_mut(k) {
                        apply_defaults(v, s);
                    }
                }
            }
            if let Some(s) = additional(schema) {
                for v in map.values_mut() {
                    apply_defaults(v, s);
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for v in items {
                    apply_defaults(v, s);
                }
            }
        }
        _ => {}
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Whether `v` is of OpenAPI type `t` (integers are numbers too, as in JSON Schema).
fn is_type(v: &Value, t: &str) -> bool {
    match t {
        "integer" => v.as_f64().is_some_and(|f| f.fract() == 0.0) && v.is_number(),
        "number" => v.is_number(),
        other => json_type(v) == other,
    }
}

/// Validates `value` at `path` against `schema`.
pub fn validate(value: &Value, schema: &Value, path: &Path, errs: &mut Vec<FieldError>) {
    validate_ratcheting(value, None, schema, path, errs, &mut Vec::new());
}

/// The item of the `map` or `set` list `old` that `item` is correlated with: the one with the
/// same `x-kubernetes-list-map-keys`, or an equal one. Items of atomic lists have none.
fn correlated_item<'a>(schema: &Value, item: &Value, old: Option<&'a Value>) -> Option<&'a Value> {
    let old = old?.as_array()?;
    match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("map") => {
            let keys: Vec<&str> =
                schema.get("x-kubernetes-list-map-keys")?.as_array()?.iter().filter_map(Value::as_str).collect();
            old.iter().find(|o| keys.iter().all(|k| o.get(k) == item.get(k)))
        }
        Some("set") => old.iter().find(|o| *o == item),
        _ => None,
    }
}

/// As [`validate`], on update, with upstream's ratcheting (`CRDValidationRatcheting`): the
/// errors of a value equal to its old value (`old`, found through object properties and the
/// items of `map` and `set` lists) are not enforced but added to `warnings`.
pub fn validate_ratcheting(
    value: &Value,
    old: Option<&Value>,
    schema: &Value,
    path: &Path,
    errs: &mut Vec<FieldError>,
    warnings: &mut Vec<String>,
) {
    if old.is_some_and(|o| o == value) {
        let mut ratcheted = Vec::new();
        validate_ratcheting(value, None, schema, path, &mut ratcheted, &mut Vec::new());
        warnings.extend(ratcheted.iter().map(ToString::to_string));
        return;
    }
    let p = path.as_str();
    if value.is_null() {
        if !flag(schema, "nullable") && schema.get("type").is_some() {
            errs.push(FieldError::invalid(
                p,
                Value::Null,
                format!("{p} in body must be of type {}: \"null\"", type_name(schema)),
            ));
        }
        return;
    }
    if flag(schema, "x-kubernetes-int-or-string") {
        if !(value.is_string() || is_type(value, "integer")) {
            errs.push(FieldError::invalid(
                p,
                value.clone(),
                format!("{p} in body must be of type integer,string: \"{}\"", json_type(value)),
            ));
        }
        return;
    }
    if let Some(t) = schema.get("type").and_then(Value::as_str) {
        if !is_type(value, t) {
            errs.push(FieldError::invalid(
                p,
                value.clone(),
                format!("{p} in body must be of type {t}: \"{}\"", json_type(value)),
            ));
            return;
        }
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
        if !allowed.contains(value) {
            let supported: Vec<String> =
                allowed.iter().map(|a| a.as_str().map_or_else(|| a.to_string(), str::to_string)).collect();
            errs.push(FieldError::not_supported(p, value.clone(), &supported));
        }
    }
    match value {
        Value::Number(n) => validate_number(n.as_f64().unwrap_or(0.0), value, schema, p, errs),
        Value::String(s) => validate_string(s, schema, p, errs),
        Value::Array(items) => {
            let n = items.len();
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64) {
                if n as u64 > max {
                    errs.push(FieldError::too_many(p, n, max as usize));
                }
            }
            if let Some(min) = schema.get("minItems").and_then(Value::as_u64) {
                if (n as u64) < min {
                    errs.push(FieldError::invalid(
                        p,
                        value.clone(),
                        format!("{p} in body should have at least {min} items"),
                    ));
                }
            }
            if flag(schema, "uniqueItems") {
                for (i, a) in items.iter().enumerate() {
                    if items[..i].contains(a) {
                        errs.push(FieldError::duplicate(path.index(i), a.clone()));
                    }
                }
            }
            if let Some(s) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    let o = correlated_item(schema, v, old);
                    validate_ratcheting(v, o, s, &path.index(i), errs, warnings);
                }
            }
        }
        Value::Object(map) => {
            for r in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
                if !map.contains_key(r) {
                    errs.push(FieldError::required(path.child(r), ""));
                }
            }
            let n = map.len() as u64;
            if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64) {
                if n > max {
                    errs.push(FieldError::too_many(p, map.len(), max as usize));
                }
            }
            if let Some(min) = schema.get("minProperties").and_then(Value::as_u64) {
                if n < min {
                    errs.push(FieldError::invalid(
                        p,
                        value.clone(),
                        format!("{p} in body should have at least {min} properties"),
                    ));
                }
            }
            let props = properties(schema);
            let extra = additional(schema);
            for (k, v) in map {
                if path.as_str().is_empty() && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                if let Some(s) = props.and_then(|p| p.get(k)).or(extra) {
                    let o = old.and_then(|o| o.get(k));
                    validate_ratcheting(v, o, s, &path.child(k), errs, warnings);
                }
            }
        }
        _ => {}
    }
}

fn type_name(schema: &Value) -> &str {
    schema.get("type").and_then(Value::as_str).unwrap_or("object")
}

fn validate_number(n: f64, value: &Value, schema: &Value, p: &str, errs: &mut Vec<FieldError>) {
    let bound = |k: &str| schema.get(k).and_then(Value::as_f64);
    let fmt = |b: f64| if b.fract() == 0.0 { format!("{}", b as i64) } else { b.to_string() };
    if let Some(max) = bound("maximum") {
        if flag(schema, "exclusiveMaximum") && n >= max {
            errs.push(FieldError::invalid(p, value.clone(), format!("{p} in body should be less than {}", fmt(max))));
        } else if n > max {
            errs.push(FieldError::invalid(
                p,
                value.clone(),
                format!("{p} in body should be less than or equal to {}", fmt(max)),
            ));
        }
    }
    if let Some(min) = bound("minimum") {
        if flag(schema, "exclusiveMinimum") && n <= min {
            errs.push(FieldError::invalid(
                p,
                value.clone(),
                format!("{p} in body should be greater than {}", fmt(min)),
            ));
        } else if n < min {
            errs.push(FieldError::invalid(
                p,
                value.clone(),
                format!("{p} in body should be greater than or equal to {}", fmt(min)),
            ));
        }
    }
    if let Some(m) = bound("multipleOf").filter(|m| *m > 0.0) {
        if (n / m).fract() != 0.0 {
            errs.push(FieldError::invalid(p, value.clone(), format!("{p} in body should be a multiple of {}", fmt(m))));
        }
    }
}

fn validate_string(s: &str, schema: &Value, p: &str, errs: &mut Vec<FieldError>) {
    let len = s.chars().count() as u64;
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64) {
        if len > max {
            errs.push(FieldError::too_long(p, max as usize));
        }
    }
    if let Some(min) = schema.get("minLength").and_then(Value::as_u64) {
        if len < min {
            errs.push(FieldError::invalid(p, s, format!("{p} in body should be at least {min} chars long")));
        }
    }
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
        match regex::Regex::new(pattern) {
            Ok(re) if !re.is_match(s) => {
                errs.push(FieldError::invalid(p, s, format!("{p} in body should match '{pattern}'")));
            }
            Ok(_) => {}
            Err(_) => errs.push(FieldError::internal(p, format!("the schema's pattern {pattern:?} does not compile"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["size"], "properties": {
                "size": {"type": "integer", "minimum": 1, "maximum": 10},
                "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
                "name": {"type": "string", "maxLength": 5, "pattern": "^[a-z]+$"},
                "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "port": {"x-kubernetes-int-or-string": true},
                "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "template": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {}}}},
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}}})
    }

    fn errors(v: &Value) -> Vec<String> {
        let mut errs = Vec::new();
        validate(v, &schema(), &Path::new(""), &mut errs);
        errs.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn unknown_fields_are_pruned_except_where_the_schema_keeps_them() {
        let mut obj = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
            "spec": {"size": 3, "extra": 1, "labels": {"a": "b"}, "raw": {"anything": {"goes": true}},
                     "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}},
            "other": "x"});
        let mut dropped = Vec::new();
        prune(&mut obj, &schema(), true, "", &mut dropped);
        assert_eq!(dropped, ["spec.extra", "spec.template.spec", "other"]);
        assert_eq!(obj["spec"]["raw"], json!({"anything": {"goes": true}}));
        assert_eq!(obj["spec"]["labels"], json!({"a": "b"}));
        assert_eq!(obj["spec"]["template"]["kind"], "Pod");
        assert_eq!(obj["metadata"]["name"], "w");
    }

    #[test]
    fn defaults_fill_missing_fields() {
        let mut obj = json!({"spec": {"size": 3}});
        apply_defaults(&mut obj, &schema());
        assert_eq!(obj["spec"]["color"], "red");
        let mut blue = json!({"spec": {"size": 3, "color": "blue"}});
        apply_defaults(&mut blue, &schema());
        assert_eq!(blue["spec"]["color"], "blue");
    }

    #[test]
    fn validation_reports_each_violation_with_its_path_as_upstream_words_it() {
        assert!(errors(&json!({"spec": {"size": 3, "port": "http", "tags": ["a"]}})).is_empty());
        assert_eq!(
            errors(
                &json!({"spec": {"size": "big", "color": "pink", "name": "ABCDEFG", "tags": ["a", "b", "c"], "port": true},
                           "status": {"ready": "yes"}})
            ),
            [
                "spec.size: Invalid value: \"big\": spec.size in body must be of type integer: \"string\"",
                "spec.color: Unsupported value: \"pink\": supported values: \"red\", \"blue\"",
                "spec.name: Too long: may not be more than 5 bytes",
                "spec.name: Invalid value: \"ABCDEFG\": spec.name in body should match '^[a-z]+$'",
                "spec.tags: Too many: 3: must have at most 2 items",
                "spec.port: Invalid value: true: spec.port in body must be of type integer,string: \"boolean\"",
                "status.ready: Invalid value: \"yes\": status.ready in body must be of type boolean: \"string\"",
            ]
        );
        assert_eq!(
            errors(&json!({"spec": {"size": 11}})),
            ["spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10"]
        );
        assert_eq!(errors(&json!({"spec": {}})), ["spec.size: Required value"]);
    }

    #[test]
    fn errors_of_unchanged_values_are_ratcheted_on_update() {
        let s = json!({"type": "object", "properties": {"spec": {"type": "object", "required": ["size"], "properties": {
            "size": {"type": "integer", "maximum": 5},
            "name": {"type": "string", "maxLength": 2},
            "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string", "maxLength": 1}}}}}});
        let run = |obj: Value, old: Option<Value>| {
            let (mut errs, mut warnings) = (Vec::new(), Vec::new());
            validate_ratcheting(&obj, old.as_ref(), &s, &Path::new(""), &mut errs, &mut warnings);
            (errs.iter().map(ToString::to_string).collect::<Vec<_>>(), warnings)
        };
        let old = json!({"spec": {"size": 8, "name": "abc", "tags": ["xx"]}});
        let (errs, warnings) = run(json!({"spec": {"size": 8, "name": "abc", "tags": ["xx", "y"]}}), Some(old.clone()));
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(
            warnings,
            [
                "spec.size: Invalid value: 8: spec.size in body should be less than or equal to 5",
                "spec.name: Too long: may not be more than 2 bytes",
                "spec.tags[0]: Too long: may not be more than 1 bytes"
            ]
        );
        let (errs, _) = run(json!({"spec": {"size": 9, "name": "abcd", "tags": ["zz"]}}), Some(old.clone()));
        assert_eq!(errs.len(), 3, "{errs:?}");
        assert_eq!(run(old, None).0.len(), 3);
    }
}
