//! `metadata.managedFields`: decoding and encoding the entries, manager identity (one entry per
//! manager, operation, subresource and, for updates, API version), the fields that are never
//! tracked, and the cap on the number of update managers, as apimachinery's
//! `pkg/util/managedfields/internal` does.

use super::fieldpath::{FieldSet, PathElement};
use serde_json::{Map, Value};
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// How a manager last wrote its fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// Server-side apply (`application/apply-patch+yaml`).
    Apply,
    /// Any other write: create, update, patch.
    Update,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// Who owns a set of fields. Apply entries are one per manager whatever the API version; update
/// entries are one per manager and API version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ManagerId {
    pub(crate) manager: String,
    pub(crate) operation: Operation,
    /// Only for [`Operation::Update`].
    api_version: Option<String>,
    pub(crate) subresource: Option<String>,
}

impl ManagerId {
    pub(crate) fn new(manager: &str, operation: Operation, api_version: &str, subresource: Option<&str>) -> Self {
        ManagerId {
            manager: manager.to_string(),
            operation,
            api_version: (operation == Operation::Update && !api_version.is_empty()).then(|| api_version.to_string()),
            subresource: subresource.filter(|s| !s.is_empty()).map(str::to_string),
        }
    }

    /// Upstream's manager identifier: the entry without fields and time, as Go encodes it.
    pub(crate) fn key(&self) -> String {
        let mut m = Map::new();
        if !self.manager.is_empty() {
            m.insert("manager".into(), Value::String(self.manager.clone()));
        }
        m.insert("operation".into(), Value::String(self.operation.as_str().into()));
        if let Some(v) = &self.api_version {
            m.insert("apiVersion".into(), Value::String(v.clone()));
        }
        if let Some(s) = &self.subresource {
            m.insert("subresource".into(), Value::String(s.clone()));
        }
        Value::Object(m).to_string()
    }
}

impl PartialOrd for ManagerId {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ManagerId {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

/// The fields a manager owns, in which API version, and when it last changed them.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Entry {
    pub(crate) set: FieldSet,
    pub(crate) api_version: String,
    pub(crate) time: Option<String>,
}

pub(crate) type Managers = BTreeMap<ManagerId, Entry>;

fn managed_fields(obj: &Value) -> Option<&Value> {
    obj.get("metadata")?.get("managedFields").filter(|v| !v.is_null())
}

/// Decodes `metadata.managedFields` (absent or null: no managers).
pub(crate) fn decode(obj: &Value) -> Result<Managers, String> {
    let Some(entries) = managed_fields(obj) else {
        return Ok(Managers::new());
    };
    let Value::Array(entries) = entries else {
        return Err("metadata.managedFields must be a list".to_string());
    };
    let mut out = Managers::new();
    for (i, e) in entries.iter().enumerate() {
        let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or_default();
        let operation = match s("operation") {
            "Apply" => Operation::Apply,
            "Update" => Operation::Update,
            _ => return Err("operation must be `Apply` or `Update`".to_string()),
        };
        if s("apiVersion").is_empty() {
            return Err("apiVersion must not be empty".to_string());
        }
        match s("fieldsType") {
            "FieldsV1" => {}
            "" => return Err(format!("missing fieldsType in managed fields entry {i}")),
            other => return Err(format!("invalid fieldsType {other:?} in managed fields entry {i}")),
        }
        let set = match e.get("fieldsV1") {
            None | Some(Value::Null) => FieldSet::new(),
            Some(v) => FieldSet::from_fields_v1(v).map_err(|err| format!("error decoding set: {err}"))?,
        };
        let subresource = e.get("subresource").and_then(Value::as_str);
        let id = ManagerId::new(s("manager"), operation, s("apiVersion"), subresource);
        let time = e.get("time").and_then(Value::as_str).map(str::to_string);
        out.insert(id, Entry { set, api_version: s("apiVersion").to_string(), time });
    }
    Ok(out)
}

/// Whether the request asks to clear managedFields: `[]` or `[{}]`.
pub(crate) fn is_reset(obj: &Value) -> bool {
    match obj.get("metadata").and_then(|m| m.get("managedFields")) {
        Some(Value::Array(a)) if a.is_empty() => true,
        Some(Value::Array(a)) if a.len() == 1 => a[0].as_object().is_some_and(Map::is_empty),
        _ => false,
    }
}

fn unix_seconds(time: Option<&str>) -> i64 {
    time.and_then(|t| t.parse::<jiff::Timestamp>().ok()).map(|t| t.as_second()).unwrap_or(0)
}

/// Encodes the managers as `metadata.managedFields` entries, ordered as upstream: apply entries
/// before update entries, then by time, manager, API version and subresource.
pub(crate) fn encode(managers: &Managers) -> Vec<Value> {
    let mut entries: Vec<(&ManagerId, &Entry)> = managers.iter().collect();
    entries.sort_by(|(a, ea), (b, eb)| {
        a.operation
            .as_str()
            .cmp(b.operation.as_str())
            .then_with(|| unix_seconds(ea.time.as_deref()).cmp(&unix_seconds(eb.time.as_deref())))
            .then_with(|| a.manager.cmp(&b.manager))
            .then_with(|| ea.api_version.cmp(&eb.api_version))
            .then_with(|| a.subresource.cmp(&b.subresource))
    });
    entries
        .into_iter()
        .map(|(id, e)| encode_entry(id, &e.api_version, e.time.as_deref(), e.set.to_fields_v1()))
        .collect()
}

/// One `managedFields` entry.
fn encode_entry(id: &ManagerId, api_version: &str, time: Option<&str>, fields_v1: Value) -> Value {
    let mut m = Map::new();
    if !id.manager.is_empty() {
        m.insert("manager".into(), Value::String(id.manager.clone()));
    }
    m.insert("operation".into(), Value::String(id.operation.as_str().into()));
    m.insert("apiVersion".into(), Value::String(api_version.to_string()));
    if let Some(t) = time {
        m.insert("time".into(), Value::String(t.to_string()));
    }
    m.insert("fieldsType".into(), Value::String("FieldsV1".into()));
    m.insert("fieldsV1".into(), fields_v1);
    if let Some(s) = &id.subresource {
        m.insert("subresource".into(), Value::String(s.clone()));
    }
    Value::Object(m)
}

/// Writes `obj.metadata.managedFields` for a single manager whose fields are already encoded.
pub(crate) fn store_one(obj: &mut Value, id: &ManagerId, api_version: &str, time: &str, fields_v1: Value) {
    let Some(root) = obj.as_object_mut() else { return };
    let meta = root.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(meta) = meta {
        meta.insert("managedFields".into(), Value::Array(vec![encode_entry(id, api_version, Some(time), fields_v1)]));
    }
}

/// Writes the managers into `obj.metadata.managedFields` (removing the field when there are none).
pub(crate) fn store(obj: &mut Value, managers: &Managers) {
    let Some(root) = obj.as_object_mut() else { return };
    if managers.is_empty() {
        if let Some(Value::Object(meta)) = root.get_mut("metadata") {
            meta.shift_remove("managedFields");
        }
        return;
    }
    let meta = root.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(meta) = meta {
        meta.insert("managedFields".into(), Value::Array(encode(managers)));
    }
}

/// Removes `metadata.managedFields` from `obj`.
pub(crate) fn clear(obj: &mut Value) {
    if let Some(Value::Object(meta)) = obj.get_mut("metadata") {
        meta.shift_remove("managedFields");
    }
}

/// The metadata fields no manager owns.
pub(crate) const STRIPPED_METADATA: [&str; 9] = [
    "name",
    "namespace",
    "creationTimestamp",
    "selfLink",
    "uid",
    "clusterName",
    "generation",
    "managedFields",
    "resourceVersion",
];

/// Removes the field at `path` (field names), and all under it, from a FieldsV1 document; false
/// when it was not there. A field left with only its own "." becomes a plain member (`{}`); one
/// left with nothing (it was not itself a member) goes too.
pub(crate) fn remove_fields_v1(node: &mut Map<String, Value>, path: &[&str]) -> bool {
    let Some((first, rest)) = path.split_first() else { return false };
    let key = format!("f:{first}");
    if rest.is_empty() {
        return node.shift_remove(&key).is_some();
    }
    let Some(Value::Object(child)) = node.get_mut(&key) else { return false };
    if !remove_fields_v1(child, rest) {
        return false;
    }
    if child.is_empty() {
        node.shift_remove(&key);
    } else if child.len() == 1 && child.contains_key(".") {
        child.clear();
    }
    true
}

/// The same for a set.
pub(crate) fn strip_meta(set: &mut FieldSet) {
    for top in ["apiVersion", "kind", "metadata"] {
        set.remove(&[PathElement::field(top)]);
    }
    for f in STRIPPED_METADATA {
        set.remove(&[PathElement::field("metadata"), PathElement::field(f)]);
    }
}

/// Upstream keeps at most this many update managers; older ones are merged into `ancient-changes`.
pub(crate) const MAX_UPDATE_MANAGERS: usize = 10;

/// Merges the oldest update managers, per API version, into an `ancient-changes` manager until
/// at most `max` update managers remain.
pub(crate) fn cap_update_managers(managers: &mut Managers, max: usize) {
    let mut updaters: Vec<ManagerId> =
        managers.keys().filter(|id| id.operation == Operation::Update).cloned().collect();
    if updaters.len() <= max {
        return;
    }
    updaters.sort_by_cached_key(|id| (unix_seconds(managers[id].time.as_deref()), id.key()));
    let mut length = updaters.len();
    let mut first_by_version: BTreeMap<String, ManagerId> = BTreeMap::new();
    for id in updaters {
        if length <= max {
            break;
        }
        let Some(entry) = managers.get(&id).cloned() else { continue };
        let version = entry.api_version.clone();
        let bucket = ManagerId::new("ancient-changes", Operation::Update, &version, None);
        let Some(first) = first_by_version.get(&version) else {
            first_by_version.insert(version, id);
            continue;
        };
        if !managers.contains_key(&bucket) {
            if let Some(first_entry) = managers.remove(first) {
                managers.insert(bucket.clone(), first_entry);
            }
        }
        managers.remove(&id);
        if let Some(b) = managers.get_mut(&bucket) {
            b.set = entry.set.union(&b.set);
            b.api_version = entry.api_version;
            b.time = entry.time;
        }
        length -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn manager_identity_ignores_api_version_for_apply() {
        let a = ManagerId::new("kubectl", Operation::Apply, "apps/v1", None);
        assert_eq!(a.key(), r#"{"manager":"kubectl","operation":"Apply"}"#);
        let u = ManagerId::new("kubectl", Operation::Update, "apps/v1", Some("status"));
        assert_eq!(
            u.key(),
            r#"{"manager":"kubectl","operation":"Update","apiVersion":"apps/v1","subresource":"status"}"#
        );
    }

    #[test]
    fn entries_round_trip_and_sort_apply_first() {
        let obj = json!({"metadata": {"managedFields": [
            {"manager": "b", "operation": "Update", "apiVersion": "v1", "time": "2024-01-01T00:00:00Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:x": {}}}},
            {"manager": "a", "operation": "Apply", "apiVersion": "v1", "time": "2024-01-02T00:00:00Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:y": {}}}},
        ]}});
        let managers = decode(&obj).expect("decode");
        let encoded = encode(&managers);
        assert_eq!(encoded[0]["manager"], "a");
        assert_eq!(encoded[1]["manager"], "b");
        assert_eq!(encoded[1]["fieldsV1"], json!({"f:spec": {"f:x": {}}}));
        let keys: Vec<&String> = encoded[0].as_object().expect("object").keys().collect();
        assert_eq!(keys, ["manager", "operation", "apiVersion", "time", "fieldsType", "fieldsV1"]);
    }

    #[test]
    fn decode_rejects_bad_operation_and_missing_fields_type() {
        let bad_op = json!({"metadata": {"managedFields": [{"manager": "a", "operation": "X", "apiVersion": "v1"}]}});
        assert!(decode(&bad_op).is_err());
        let no_type =
            json!({"metadata": {"managedFields": [{"manager": "a", "operation": "Apply", "apiVersion": "v1"}]}});
        assert_eq!(decode(&no_type), Err("missing fieldsType in managed fields entry 0".to_string()));
    }

    #[test]
    fn reset_is_an_empty_list_or_one_empty_entry() {
        assert!(is_reset(&json!({"metadata": {"managedFields": []}})));
        assert!(is_reset(&json!({"metadata": {"managedFields": [{}]}})));
        assert!(!is_reset(&json!({"metadata": {}})));
    }

    #[test]
    fn strip_meta_removes_only_never_owned_fields() {
        let path = |p: &[&str]| -> Vec<PathElement> { p.iter().map(|f| PathElement::field(f)).collect() };
        let mut set = FieldSet::new();
        for p in [
            &["metadata"][..],
            &["metadata", "name"],
            &["metadata", "uid"],
            &["metadata", "managedFields"],
            &["metadata", "labels"],
            &["metadata", "labels", "a"],
            &["kind"],
            &["apiVersion"],
            &["data"],
            &["data", "kind"],
        ] {
            set.insert(path(p));
        }
        strip_meta(&mut set);
        let mut expected = FieldSet::new();
        for p in [&["metadata", "labels"][..], &["metadata", "labels", "a"], &["data"], &["data", "kind"]] {
            expected.insert(path(p));
        }
        assert_eq!(set, expected);
        assert_eq!(set.len(), 4);
    }

    #[test]
    fn strip_meta_keeps_labels() {
        let mut set = FieldSet::new();
        set.insert(vec![PathElement::field("metadata"), PathElement::field("name")]);
        set.insert(vec![PathElement::field("metadata"), PathElement::field("labels"), PathElement::field("a")]);
        set.insert(vec![PathElement::field("kind")]);
        strip_meta(&mut set);
        assert_eq!(set.len(), 1);
    }

    #[test]
    fn cap_merges_oldest_updaters_into_ancient_changes() {
        let mut managers = Managers::new();
        for i in 0..12 {
            let mut set = FieldSet::new();
            set.insert(vec![PathElement::field(&format!("f{i}"))]);
            let time = format!("2024-01-01T00:00:{i:02}Z");
            managers.insert(
                ManagerId::new(&format!("m{i:02}"), Operation::Update, "v1", None),
                Entry { set, api_version: "v1".into(), time: Some(time) },
            );
        }
        cap_update_managers(&mut managers, MAX_UPDATE_MANAGERS);
        assert_eq!(managers.len(), 10);
        let ancient = &managers[&ManagerId::new("ancient-changes", Operation::Update, "v1", None)];
        assert_eq!(ancient.set.len(), 3);
        assert!(!managers.contains_key(&ManagerId::new("m00", Operation::Update, "v1", None)));
    }
}
