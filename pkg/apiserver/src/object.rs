//! Small helpers over objects as JSON values: metadata access, timestamps, storage encoding.

use bytes::Bytes;
use k1s_api::meta::top_level_rank;
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

/// The resourceVersion an update is conditional on: none when absent, empty or "0" (upstream
/// parses both as version 0, an unconditional update where the kind allows one).
pub fn precondition_resource_version(obj: &Value) -> Option<&str> {
    resource_version(obj).filter(|rv| !rv.is_empty() && *rv != "0")
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
    thread_local! {
        /// The last second formatted on this thread: every write stamps one or two timestamps,
        /// and formatting one costs more than the rest of the stamping.
        static LAST: std::cell::RefCell<(i64, String)> = const { std::cell::RefCell::new((i64::MIN, String::new())) };
    }
    let now = jiff::Timestamp::now();
    LAST.with_borrow_mut(|(second, text)| {
        if *second != now.as_second() {
            *text = now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
            *second = now.as_second();
        }
        text.clone()
    })
}

pub fn timestamp_after(seconds: i64) -> String {
    let t = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(seconds);
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The bytes kept in the store for a built-in kind: the object without `resourceVersion` (which
/// is the revision), its top-level keys in upstream's order (`kind`, `apiVersion`, `metadata`,
/// `spec`, `status`, the rest), so what is read back is encoded as kube-apiserver encodes it.
pub fn to_storage(obj: &Value) -> Bytes {
    stored_bytes(obj, true)
}

/// [`to_storage`] for custom resources: their keys keep the order they came in.
pub fn to_storage_as_sent(obj: &Value) -> Bytes {
    stored_bytes(obj, false)
}

fn encode<T: serde::Serialize + ?Sized>(v: &T) -> Bytes {
    Bytes::from(serde_json::to_vec(v).unwrap_or_default())
}

fn stored_bytes(obj: &Value, upstream_order: bool) -> Bytes {
    let Some(top) = obj.as_object() else { return encode(obj) };
    let md = top.get("metadata").and_then(Value::as_object);
    let strip = md.is_some_and(|m| m.contains_key("resourceVersion") || m.contains_key("selfLink"));
    let reorder = upstream_order && !top.keys().map(|k| top_level_rank(k)).is_sorted();
    if !strip && !reorder {
        return encode(obj);
    }
    // Without cloning the object: the top level borrowed, metadata without the two fields.
    let stripped: Option<Value> = md.filter(|_| strip).map(|m| {
        Value::Object(
            m.iter()
                .filter(|(k, _)| *k != "resourceVersion" && *k != "selfLink")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        )
    });
    let mut fields: Vec<(&str, &Value)> = top
        .iter()
        .map(|(k, v)| match (&stripped, k.as_str()) {
            (Some(m), "metadata") => (k.as_str(), m),
            _ => (k.as_str(), v),
        })
        .collect();
    if upstream_order {
        fields.sort_by_key(|(k, _)| top_level_rank(k));
    }
    let ordered: indexmap::IndexMap<&str, &Value> = fields.into_iter().collect();
    encode(&ordered)
}

/// Decodes stored bytes and stamps the revision as `resourceVersion`.
pub fn from_storage(value: &[u8], mod_revision: u64) -> Option<Value> {
    let mut v: Value = serde_json::from_slice(value).ok()?;
    set_resource_version(&mut v, mod_revision);
    Some(v)
}

/// Stored bytes as JSON with `metadata.resourceVersion` stamped, decoding only the top level
/// and `metadata` (the rest is copied as raw JSON): what watch events send most of the time.
pub fn storage_json_with_rv(value: &[u8], mod_revision: u64) -> Option<Vec<u8>> {
    splice_resource_version(value, mod_revision).or_else(|| restamp_resource_version(value, mod_revision))
}

/// The metadata's JSON text inside stored bytes, borrowed from them (`None`: the bytes are not
/// an object with one `metadata` key, or it is not an object).
fn stored_metadata(value: &[u8]) -> Option<Option<&str>> {
    use serde_json::value::RawValue;
    #[derive(serde::Deserialize)]
    struct Top<'a> {
        #[serde(borrow)]
        metadata: Option<&'a RawValue>,
    }
    let md = serde_json::from_slice::<Top<'_>>(value).ok()?.metadata.map(RawValue::get);
    match md {
        Some(m) if !m.starts_with('{') => None,
        md => Some(md),
    }
}

/// Metadata's JSON text with `resourceVersion` set. What we store never has one
/// ([`to_storage`] takes it out), so it is spliced in front of the closing brace; text that
/// mentions `"resourceVersion"` anywhere is decoded, stamped and encoded again instead.
fn metadata_with_rv(md: &str, mod_revision: u64) -> Option<String> {
    let inner = md.strip_prefix('{')?.strip_suffix('}')?;
    if md.contains("\"resourceVersion\"") {
        use serde_json::value::RawValue;
        let rv = RawValue::from_string(format!("\"{mod_revision}\"")).ok()?;
        let mut map: indexmap::IndexMap<String, &RawValue> = serde_json::from_str(md).ok()?;
        map.insert("resourceVersion".into(), &rv);
        return serde_json::to_string(&map).ok();
    }
    let comma = if inner.trim().is_empty() { "" } else { "," };
    Some(format!("{{{inner}{comma}\"resourceVersion\":\"{mod_revision}\"}}"))
}

/// The common case of [`storage_json_with_rv`] without rebuilding the object: the stamped
/// metadata replaces the stored one and every other byte is copied as stored. Declines (`None`)
/// when metadata is missing or not an object.
fn splice_resource_version(value: &[u8], mod_revision: u64) -> Option<Vec<u8>> {
    let md = stored_metadata(value)??;
    // The metadata text borrows from `value`: that gives where it starts and ends.
    let start = (md.as_ptr() as usize).checked_sub(value.as_ptr() as usize)?;
    let stamped = metadata_with_rv(md, mod_revision)?;
    let mut out = Vec::with_capacity(value.len() + stamped.len() - md.len());
    out.extend_from_slice(value.get(..start)?);
    out.extend_from_slice(stamped.as_bytes());
    out.extend_from_slice(value.get(start + md.len()..)?);
    Some(out)
}

/// Stored bytes as a `PartialObjectMetadata` of `api_version` (`meta.k8s.io/v1` or `v1beta1`)
/// with the resourceVersion stamped: what a metadata-only watch sends, without decoding more
/// than the metadata.
pub fn stored_partial_metadata(value: &[u8], mod_revision: u64, api_version: &str) -> Option<Vec<u8>> {
    let md = metadata_with_rv(stored_metadata(value)?.unwrap_or("{}"), mod_revision)?;
    let mut out = Vec::with_capacity(md.len() + api_version.len() + 48);
    out.extend_from_slice(br#"{"kind":"PartialObjectMetadata","apiVersion":""#);
    out.extend_from_slice(api_version.as_bytes());
    out.extend_from_slice(br#"","metadata":"#);
    out.extend_from_slice(md.as_bytes());
    out.push(b'}');
    Some(out)
}

/// An object as a `PartialObjectMetadata` of `api_version`: kind, apiVersion and its metadata.
pub fn partial_metadata(obj: &Value, api_version: &str) -> Value {
    serde_json::json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": api_version,
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| serde_json::json!({})),
    })
}

/// [`storage_json_with_rv`] by decoding the top level and metadata (raw values kept as they are)
/// and encoding them again with the stamp.
fn restamp_resource_version(value: &[u8], mod_revision: u64) -> Option<Vec<u8>> {
    use serde_json::value::RawValue;
    let rv = RawValue::from_string(format!("\"{mod_revision}\"")).ok()?;
    let mut top: indexmap::IndexMap<String, &RawValue> = serde_json::from_slice(value).ok()?;
    let mut md: indexmap::IndexMap<String, &RawValue> = match top.get("metadata") {
        Some(m) => serde_json::from_str(m.get()).ok()?,
        None => indexmap::IndexMap::new(),
    };
    md.insert("resourceVersion".into(), &rv);
    let metadata = serde_json::value::to_raw_value(&md).ok()?;
    top.insert("metadata".into(), &metadata);
    serde_json::to_vec(&top).ok()
}

/// The top-level fields `keys` of stored bytes, decoded; the others are skipped unparsed. Enough
/// to match selectors on `metadata` (and the fields a field selector names) without building the
/// whole object.
pub fn partial_from_storage(value: &[u8], keys: &[String]) -> Option<Value> {
    use serde_json::value::RawValue;
    let top: indexmap::IndexMap<String, &RawValue> = serde_json::from_slice(value).ok()?;
    let mut out = serde_json::Map::new();
    for (k, raw) in top {
        if keys.contains(&k) {
            let v = serde_json::from_str(raw.get()).ok()?;
            out.insert(k, v);
        }
    }
    Some(Value::Object(out))
}

/// Only the name and namespace of stored bytes, as `{"metadata":{"name":…,"namespace":…}}`: what
/// a field selector on those two fields needs (the rest of the object is skipped, not built).
pub fn stored_names(value: &[u8]) -> Option<Value> {
    use std::borrow::Cow;
    #[derive(serde::Deserialize)]
    struct Meta<'a> {
        #[serde(borrow, default)]
        name: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        namespace: Option<Cow<'a, str>>,
    }
    #[derive(serde::Deserialize)]
    struct Top<'a> {
        #[serde(borrow, default)]
        metadata: Option<Meta<'a>>,
    }
    let top: Top = serde_json::from_slice(value).ok()?;
    let md = top.metadata.unwrap_or(Meta { name: None, namespace: None });
    Some(names_object(md.name.as_deref(), md.namespace.as_deref()))
}

/// `{"metadata":{"name":…,"namespace":…}}` with those of the two that are given: all that
/// selectors on `metadata.name` and `metadata.namespace` read.
pub fn names_object(name: Option<&str>, namespace: Option<&str>) -> Value {
    let mut md = serde_json::Map::new();
    if let Some(n) = name {
        md.insert("name".into(), Value::String(n.to_string()));
    }
    if let Some(ns) = namespace {
        md.insert("namespace".into(), Value::String(ns.to_string()));
    }
    let mut out = serde_json::Map::new();
    out.insert("metadata".into(), Value::Object(md));
    Value::Object(out)
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_cached_timestamp_is_the_current_second() {
        for _ in 0..3 {
            let before = jiff::Timestamp::now().as_second();
            let text = now_rfc3339();
            let after = jiff::Timestamp::now().as_second();
            let t: jiff::Timestamp = text.parse().expect("RFC 3339");
            assert!((before..=after).contains(&t.as_second()), "{text} outside [{before}, {after}]");
            assert!(text.len() == 20 && text.ends_with('Z'), "{text}");
            std::thread::sleep(std::time::Duration::from_millis(600));
        }
    }

    #[test]
    fn storage_round_trip_and_raw_stamping_agree() {
        let obj = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "d", "resourceVersion": "7", "selfLink": "/x",
                         "labels": {"k": "v\"q"}},
            "data": {"x": "ü\n", "metadata": {"name": "not this one"}},
        });
        let stored = to_storage(&obj);
        let plain: Value = serde_json::from_slice(&stored).expect("json");
        assert!(plain["metadata"].get("resourceVersion").is_none() && plain["metadata"].get("selfLink").is_none());
        assert_eq!(plain["data"], obj["data"]);
        let decoded = from_storage(&stored, 42).expect("decode");
        let raw = storage_json_with_rv(&stored, 42).expect("raw");
        let raw: Value = serde_json::from_slice(&raw).expect("raw json");
        assert_eq!(raw, decoded);
        assert_eq!(raw["metadata"]["resourceVersion"], "42");
        assert_eq!(raw["data"]["metadata"], json!({"name": "not this one"}));
        // Stored in upstream's order: kind, apiVersion, metadata, then the rest as they came.
        let keys: Vec<&String> = raw.as_object().expect("object").keys().collect();
        assert_eq!(keys, ["kind", "apiVersion", "metadata", "data"]);
        // A custom resource keeps the order it came in.
        let cr: Value = serde_json::from_slice(&to_storage_as_sent(&obj)).expect("custom");
        let keys: Vec<&String> = cr.as_object().expect("object").keys().collect();
        assert_eq!(keys, ["apiVersion", "kind", "metadata", "data"]);
        // Already in order: stored as it is; status after spec whatever came first.
        let ordered = json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p"}, "status": {}, "spec": {}});
        let stored: Value = serde_json::from_slice(&to_storage(&ordered)).expect("pod");
        let keys: Vec<&String> = stored.as_object().expect("object").keys().collect();
        assert_eq!(keys, ["kind", "apiVersion", "metadata", "spec", "status"]);
        // An object stored without metadata still gets one.
        let bare = storage_json_with_rv(br#"{"kind":"X"}"#, 3).expect("bare");
        assert_eq!(serde_json::from_slice::<Value>(&bare).expect("json")["metadata"]["resourceVersion"], "3");
        assert!(storage_json_with_rv(b"not json", 1).is_none());
    }

    #[test]
    fn splicing_the_resource_version_gives_the_bytes_restamping_gives() {
        let cases = [
            to_storage(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "a", "labels": {"k": "}\"{"}, "managedFields": [{"fieldsV1": {"f:data": {}}}]},
                "data": {"metadata": "{}"}})),
            to_storage(&json!({"kind": "X", "metadata": {}})),
            Bytes::from_static(br#"{"kind":"X","metadata":{ }}"#),
            to_storage(&json!({"kind": "X"})),
            to_storage(&json!({"kind": "X", "metadata": "not an object"})),
            // Mentions of resourceVersion are decoded and stamped (a stored one is replaced).
            Bytes::from_static(br#"{"metadata":{"name":"a","resourceVersion":"1"}}"#),
            to_storage(&json!({"metadata": {"annotations": {"resourceVersion": "x"}}})),
            Bytes::from_static(br#"{"metadata":{"name":"a"},"metadata":{"name":"b"}}"#),
        ];
        let parse = |b: Option<Vec<u8>>| b.map(|b| serde_json::from_slice::<Value>(&b).expect("json"));
        for stored in cases {
            let want = restamp_resource_version(&stored, 9);
            let got = storage_json_with_rv(&stored, 9);
            // What we store is compact JSON: there the bytes agree too, not only the values.
            let compact = serde_json::from_slice::<Value>(&stored).map(|v| serde_json::to_vec(&v).ok());
            if compact.ok().flatten().as_deref() == Some(&stored[..]) {
                assert_eq!(got, want, "{}", String::from_utf8_lossy(&stored));
            }
            assert_eq!(parse(got), parse(want), "{}", String::from_utf8_lossy(&stored));
        }
        let spliced = splice_resource_version(br#"{"kind":"X","metadata":{"name":"a"},"data":{}}"#, 9);
        assert_eq!(
            spliced.as_deref(),
            Some(&br#"{"kind":"X","metadata":{"name":"a","resourceVersion":"9"},"data":{}}"#[..])
        );
        let untouched = [&br#"{"metadata":"x"}"#[..], br#"{"kind":"X"}"#, b"[]"];
        for stored in untouched {
            assert!(splice_resource_version(stored, 9).is_none(), "{}", String::from_utf8_lossy(stored));
        }
    }

    #[test]
    fn stored_bytes_become_partial_object_metadata_without_the_rest() {
        let objects = [
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "labels": {"k": "v"}}, "data": {"x": "y"}}),
            json!({"kind": "X"}),
            json!({"kind": "X", "metadata": {"annotations": {"resourceVersion": "x"}}}),
        ];
        for obj in objects {
            let stored = to_storage(&obj);
            let raw = stored_partial_metadata(&stored, 5, "meta.k8s.io/v1").expect("partial");
            let raw: Value = serde_json::from_slice(&raw).expect("json");
            let decoded = from_storage(&stored, 5).expect("decode");
            assert_eq!(raw, partial_metadata(&decoded, "meta.k8s.io/v1"));
            assert_eq!(raw["metadata"]["resourceVersion"], "5");
            assert!(raw.get("data").is_none());
        }
        assert!(stored_partial_metadata(br#"{"metadata":[]}"#, 5, "meta.k8s.io/v1").is_none());
    }

    #[test]
    fn partial_decoding_keeps_only_the_named_top_level_fields() {
        let stored = to_storage(&json!({
            "kind": "Pod", "metadata": {"name": "a", "labels": {"k": "v"}},
            "spec": {"nodeName": "n1"}, "status": {"phase": "Running"},
        }));
        let keys = ["metadata".to_string(), "spec".to_string()];
        let partial = partial_from_storage(&stored, &keys).expect("partial");
        assert_eq!(partial, json!({"metadata": {"name": "a", "labels": {"k": "v"}}, "spec": {"nodeName": "n1"}}));
        assert!(partial_from_storage(b"[1]", &keys).is_none());
        assert_eq!(
            stored_names(&stored).expect("names"),
            json!({"metadata": {"name": "a"}}),
            "no namespace: none made up"
        );
        let escaped =
            br#"{"data":{"x":[1,{"y":"z"}]},"metadata":{"namespace":"d\u0065v","name":"n","labels":{"a":"b"}}}"#;
        assert_eq!(stored_names(escaped).expect("names"), json!({"metadata": {"name": "n", "namespace": "dev"}}));
        assert!(stored_names(b"not json").is_none());
    }
}
