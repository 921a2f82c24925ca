//! ControllerRevisions as StatefulSets and DaemonSets keep them (upstream
//! `pkg/controller/history`): each revision stores the owner's pod template as a strategic
//! merge patch `{"spec":{"template":{…,"$patch":"replace"}}}`, is numbered, and is reused when
//! the template returns to an earlier state (its number then moves to the top).

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The label with the hash on ControllerRevisions.
pub const REVISION_HASH_LABEL: &str = "controller.kubernetes.io/hash";

/// JSON with object keys sorted (as Go's `json.Marshal` of a map writes it).
pub fn canonical_json(v: &Value) -> Vec<u8> {
    fn sort(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let sorted: BTreeMap<&String, Value> = m.iter().map(|(k, v)| (k, sort(v))).collect();
                Value::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v)).collect::<Map<String, Value>>())
            }
            Value::Array(a) => Value::Array(a.iter().map(sort).collect()),
            other => other.clone(),
        }
    }
    serde_json::to_vec(&sort(v)).unwrap_or_default()
}

/// `getPatch`: the revision data for a pod template.
pub fn template_patch(template: &PodTemplateSpec) -> Value {
    let mut t = serde_json::to_value(template).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut t {
        m.insert("$patch".into(), Value::String("replace".into()));
    }
    serde_json::json!({"spec": {"template": t}})
}

/// The pod template a revision records.
pub fn template_of(rev: &ControllerRevision) -> Option<PodTemplateSpec> {
    let mut t = rev.data.as_ref()?.0.pointer("/spec/template")?.clone();
    if let Value::Object(m) = &mut t {
        m.remove("$patch");
    }
    serde_json::from_value(t).ok()
}

/// Whether two revisions record the same data.
pub fn same_data(a: &ControllerRevision, b: &ControllerRevision) -> bool {
    let data = |r: &ControllerRevision| r.data.as_ref().map(|d| canonical_json(&d.0));
    data(a) == data(b)
}

/// A new (not yet created) revision of `owner`.
pub fn new_revision(
    owner: OwnerReference,
    namespace: Option<String>,
    name: String,
    labels: Option<BTreeMap<String, String>>,
    hash: &str,
    data: Value,
    revision: i64,
) -> ControllerRevision {
    let mut labels = labels.unwrap_or_default();
    labels.insert(REVISION_HASH_LABEL.into(), hash.into());
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(name),
            namespace,
            labels: Some(labels),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        data: Some(RawExtension(data)),
        revision,
    }
}

/// The highest revision number (0 without revisions).
pub fn max_revision(revs: &[ControllerRevision]) -> i64 {
    revs.iter().map(|r| r.revision).max().unwrap_or(0)
}

/// `ControllerRevisionName`: `<prefix>-<hash>`, the prefix cut to keep the name valid.
pub fn revision_name(prefix: &str, hash: &str) -> String {
    let prefix = if prefix.len() > 223 { &prefix[..223] } else { prefix };
    format!("{prefix}-{hash}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, PodSpec};

    fn template(image: &str) -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: None,
            spec: Some(PodSpec {
                containers: vec![Container { name: "c".into(), image: Some(image.into()), ..Default::default() }],
                ..Default::default()
            }),
        }
    }

    #[test]
    fn canonical_json_sorts_keys() {
        let v = serde_json::json!({"b": 1, "a": {"d": 2, "c": 3}});
        assert_eq!(String::from_utf8(canonical_json(&v)).expect("utf8"), r#"{"a":{"c":3,"d":2},"b":1}"#);
    }

    #[test]
    fn revisions_round_trip_their_template() {
        let t = template("nginx:1");
        let data = template_patch(&t);
        assert_eq!(data.pointer("/spec/template/$patch"), Some(&Value::String("replace".into())));
        let rev = new_revision(OwnerReference::default(), None, "web-x".into(), None, "x", data, 1);
        assert_eq!(template_of(&rev), Some(t));
        let other = new_revision(
            OwnerReference::default(),
            None,
            "web-y".into(),
            None,
            "y",
            template_patch(&template("nginx:2")),
            2,
        );
        assert!(!same_data(&rev, &other));
        assert_eq!(max_revision(&[rev, other]), 2);
    }
}
