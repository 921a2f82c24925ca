//! Small helpers over objects as JSON values: metadata access, timestamps, storage encoding.

use bytes::Bytes;
use serde_json::{Map, Value};

pub fn meta(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

/// `metadata`, created as an empty map if missing or not a map.
pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let m = obj.as_object_mut().expect("made an object above");
    let md = m.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
    if !md.is_object() {
        *md = Value::Object(Map::new());
    }
    md.as_object_mut().expect("made an object above")
}

pub fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    meta(obj).and_then(|m| m.get(field)).and_then(Value::as_str).filter(|s| !s.is_empty())
}

pub fn name(obj: &Value) -> &str {
    meta_str(obj, "name").unwrap_or("")
}

pub fn namespace(obj: &Value) -> Option<&str> {
    meta_str(obj, "namespace")
}

pub fn resource_version(obj: &Value) -> Option<&str> {
    meta_str(obj, "resourceVersion")
}

pub fn set_resource_version(obj: &mut Value, rev: u64) {
    meta_mut(obj).insert("resourceVersion".into(), Value::String(rev.to_string()));
}

pub fn finalizers(obj: &Value) -> Vec<String> {
    meta(obj)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default()
}

pub fn is_deleting(obj: &Value) -> bool {
    meta(obj).and_then(|m| m.get("deletionTimestamp")).is_some_and(|v| !v.is_null())
}

/// RFC 3339 UTC timestamp at second precision, as Kubernetes `Time`.
pub fn now_rfc3339() -> String {
    let now = jiff::Timestamp::now();
    now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

pub fn timestamp_after(seconds: i64) -> String {
    let t = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(seconds);
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The bytes kept in the store: the object without `resourceVersion` (which is the revision).
pub fn to_storage(obj: &Value) -> Bytes {
    let mut o = obj.clone();
    if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
        m.remove("selfLink");
    }
    Bytes::from(serde_json::to_vec(&o).unwrap_or_default())
}

/// Decodes stored bytes and stamps the revision as `resourceVersion`.
pub fn from_storage(value: &[u8], mod_revision: u64) -> Option<Value> {
    let mut v: Value = serde_json::from_slice(value).ok()?;
    set_resource_version(&mut v, mod_revision);
    Some(v)
}

/// Generated names: `generateName` + 5 characters from upstream's alphabet.
pub fn generate_name(base: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let base: String = base.chars().take(63 - 5).collect();
    let suffix: String = (0..5).map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char).collect();
    format!("{base}{suffix}")
}

/// Equality of two objects ignoring `resourceVersion` and `managedFields`.
pub fn same_content(a: &Value, b: &Value) -> bool {
    fn strip(v: &Value) -> Value {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
            m.remove("managedFields");
        }
        v
    }
    strip(a) == strip(b)
}

/// Follows a dotted JSON path (`spec.nodeName`) to a string form for field selectors.
pub fn field_string(obj: &Value, path: &str) -> Option<String> {
    let mut cur = obj;
    for p in path.split('.') {
        cur = cur.get(p)?;
    }
    Some(match cur {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Null => String::new(),
        other => other.to_string(),
    })
}
