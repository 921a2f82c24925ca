//! Generic `metadata` rules shared by every kind: name formats, labels, annotations,
//! owner references (upstream's `apimachinery/pkg/api/validation`).

use crate::field::{FieldError, Path};
use crate::strategy::NameRule;
use serde_json::Value;

/// The top-level keys of a built-in kind in upstream's (Go struct) order; others follow in the
/// order they have.
pub const TOP_LEVEL_ORDER: [&str; 5] = ["kind", "apiVersion", "metadata", "spec", "status"];

/// Where `key` goes among an object's top-level keys: its place in [`TOP_LEVEL_ORDER`], or after
/// them all.
pub fn top_level_rank(key: &str) -> usize {
    TOP_LEVEL_ORDER.iter().position(|k| *k == key).unwrap_or(TOP_LEVEL_ORDER.len())
}

/// Puts an object's top-level keys in upstream's order (`{"kind":…,"apiVersion":…,"metadata":…`),
/// as kube-apiserver encodes built-in kinds; the other keys keep their order after them.
pub fn order_top_level(obj: &mut Value) {
    let Some(map) = obj.as_object_mut() else { return };
    if map.keys().map(|k| top_level_rank(k)).is_sorted() {
        return;
    }
    let mut entries: Vec<(String, Value)> = std::mem::take(map).into_iter().collect();
    entries.sort_by_key(|(k, _)| top_level_rank(k));
    map.extend(entries);
}

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

fn is_alnum_lower(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

fn dns_label_ok(s: &str) -> bool {
    !s.is_empty()
        && s.chars().all(|c| is_alnum_lower(c) || c == '-')
        && s.starts_with(is_alnum_lower)
        && s.ends_with(is_alnum_lower)
}

/// Upstream's `IsDNS1123Label`: the messages it returns, empty when valid.
pub fn dns1123_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !dns_label_ok(s) {
        errs.push(format!(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '{DNS1123_LABEL_FMT}')"
        ));
    }
    errs
}

/// Upstream's `IsDNS1123Subdomain`.
pub fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    if s.is_empty() || !s.split('.').all(dns_label_ok) {
        errs.push(format!(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '{DNS1123_LABEL_FMT}(\\.{DNS1123_LABEL_FMT})*')"
        ));
    }
    errs
}

/// Upstream's `IsValidPathSegmentName`.
pub fn path_segment_name(s: &str) -> Vec<String> {
    if s == "." || s == ".." {
        return vec![format!("may not be '{s}'")];
    }
    let mut errs = Vec::new();
    for bad in ["/", "%"] {
        if s.contains(bad) {
            errs.push(format!("may not contain '{bad}'"));
        }
    }
    errs
}

fn qualified_part_ok(s: &str) -> bool {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    !s.is_empty()
        && s.chars().all(|c| alnum(c) || c == '-' || c == '_' || c == '.')
        && s.starts_with(alnum)
        && s.ends_with(alnum)
}

/// Upstream's `IsQualifiedName` (label and annotation keys).
pub fn qualified_name(s: &str) -> Vec<String> {
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    let mut errs = Vec::new();
    if name.matches('/').count() > 0 {
        errs.push(format!(
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '{QUALIFIED_NAME_FMT}') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ));
        return errs;
    }
    if let Some(p) = prefix {
        if p.is_empty() {
            errs.push("prefix part must be non-empty".to_string());
        } else {
            errs.extend(dns1123_subdomain(p).into_iter().map(|m| format!("prefix part {m}")));
        }
    }
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".to_string());
    }
    if !name.is_empty() && !qualified_part_ok(name) {
        errs.push(format!(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '{QUALIFIED_NAME_FMT}')"
        ));
    }
    errs
}

/// Upstream's `IsValidLabelValue`.
pub fn label_value(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !s.is_empty() && !qualified_part_ok(s) {
        errs.push(format!(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '({QUALIFIED_NAME_FMT})?')"
        ));
    }
    errs
}

/// Validates a name against a rule, as upstream's `ValidateNameFunc`s do.
pub fn validate_name(rule: NameRule, name: &str) -> Vec<String> {
    match rule {
        NameRule::Subdomain => dns1123_subdomain(name),
        NameRule::Label => dns1123_label(name),
        NameRule::PathSegment => path_segment_name(name),
    }
}

/// Validates label keys and values of a `map[string]string` at `path`.
pub fn validate_labels(labels: Option<&Value>, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(Value::Object(map)) = labels else { return errs };
    for (k, v) in map {
        for m in qualified_name(k) {
            errs.push(FieldError::invalid(path.as_str(), k.as_str(), m));
        }
        let v = v.as_str().unwrap_or_default();
        for m in label_value(v) {
            errs.push(FieldError::invalid(path.key(k), v, m));
        }
    }
    errs
}

/// Validates `metadata` generically for every kind.
pub fn validate_object_meta(meta: &Value, rule: NameRule, namespaced: bool) -> Vec<FieldError> {
    let path = Path::new("metadata");
    let mut errs = Vec::new();
    let name = meta.get("name").and_then(Value::as_str).unwrap_or_default();
    let generate_name = meta.get("generateName").and_then(Value::as_str).unwrap_or_default();
    if name.is_empty() {
        if generate_name.is_empty() {
            errs.push(FieldError::required(path.child("name"), "name or generateName is required"));
        }
    } else {
        for m in validate_name(rule, name) {
            errs.push(FieldError::invalid(path.child("name"), name, m));
        }
    }
    let namespace = meta.get("namespace").and_then(Value::as_str).unwrap_or_default();
    if namespaced {
        if namespace.is_empty() {
            errs.push(FieldError::required(path.child("namespace"), ""));
        } else {
            for m in dns1123_label(namespace) {
                errs.push(FieldError::invalid(path.child("namespace"), namespace, m));
            }
        }
    } else if !namespace.is_empty() {
        errs.push(FieldError::forbidden(path.child("namespace"), "not allowed on this type"));
    }
    errs.extend(validate_labels(meta.get("labels"), &path.child("labels")));
    if let Some(Value::Object(ann)) = meta.get("annotations") {
        let mut total = 0;
        for (k, v) in ann {
            for m in qualified_name(&k.to_lowercase()) {
                errs.push(FieldError::invalid(path.child("annotations"), k.as_str(), m));
            }
            total += k.len() + v.as_str().map(str::len).unwrap_or_default();
        }
        if total > TOTAL_ANNOTATION_SIZE_LIMIT {
            errs.push(FieldError::too_long(path.child("annotations"), TOTAL_ANNOTATION_SIZE_LIMIT));
        }
    }
    if let Some(Value::Array(refs)) = meta.get("ownerReferences") {
        for (i, r) in refs.iter().enumerate() {
            let p = path.child("ownerReferences").index(i);
            for f in ["apiVersion", "kind", "name", "uid"] {
                if r.get(f).and_then(Value::as_str).unwrap_or_default().is_empty() {
                    errs.push(FieldError::invalid(p.child(f), "", format!("{f} must not be empty")));
                }
            }
        }
        let controllers = refs.iter().filter(|r| r.get("controller") == Some(&Value::Bool(true))).count();
        if controllers > 1 {
            errs.push(FieldError::invalid(
                path.child("ownerReferences"),
                Value::Array(refs.clone()),
                "Only one reference can have Controller set to true",
            ));
        }
    }
    if let Some(Value::Array(fins)) = meta.get("finalizers") {
        for (i, f) in fins.iter().enumerate() {
            let f = f.as_str().unwrap_or_default();
            for m in qualified_name(f) {
                errs.push(FieldError::invalid(path.child("finalizers").index(i), f, m));
            }
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_follow_rfc1123() {
        assert!(dns1123_subdomain("my.app-1").is_empty());
        assert!(!dns1123_subdomain("My_App").is_empty());
        assert!(!dns1123_label("a.b").is_empty());
        assert!(!dns1123_subdomain(&"a".repeat(254)).is_empty());
        assert!(path_segment_name("system:masters").is_empty());
        assert!(!path_segment_name("a/b").is_empty());
    }

    #[test]
    fn object_meta_reports_field_paths() {
        let errs = validate_object_meta(
            &json!({"name": "Bad_Name", "labels": {"ok": "fine", "bad key!": "x", "k": "-bad-"}}),
            NameRule::Subdomain,
            true,
        );
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["metadata.name", "metadata.namespace", "metadata.labels", "metadata.labels[k]"]);
        assert!(validate_object_meta(&json!({"generateName": "x-"}), NameRule::Subdomain, false).is_empty());
    }
}
