//! The DefaultTolerationSeconds admission plugin as a pure function: every pod that does not
//! already tolerate them gets `NoExecute` tolerations of the `node.kubernetes.io/not-ready` and
//! `node.kubernetes.io/unreachable` taints for 300 s, so that the taint-based eviction of a pod
//! from a failed node waits five minutes (upstream
//! `plugin/pkg/admission/defaulttolerationseconds`).
//!
//! The API server runs it as a mutating admission plugin on pod create and update (not on
//! subresources).

use serde_json::{json, Value};

pub const TAINT_NODE_NOT_READY: &str = "node.kubernetes.io/not-ready";
pub const TAINT_NODE_UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// Upstream's `--default-not-ready-toleration-seconds` and
/// `--default-unreachable-toleration-seconds`.
pub const DEFAULT_TOLERATION_SECONDS: i64 = 300;

/// Whether `toleration` already tolerates a `NoExecute` taint with `key`: same key or an empty
/// key (which tolerates every key), and effect `NoExecute` or empty (every effect).
fn tolerates(toleration: &Value, key: &str) -> bool {
    let t_key = toleration.get("key").and_then(Value::as_str).unwrap_or("");
    let effect = toleration.get("effect").and_then(Value::as_str).unwrap_or("");
    (t_key == key || t_key.is_empty()) && (effect == "NoExecute" || effect.is_empty())
}

/// Adds the default not-ready/unreachable tolerations to a pod (a JSON object) that lacks them.
/// Returns whether the pod changed.
pub fn default_toleration_seconds(pod_json: &mut Value) -> bool {
    let Some(pod) = pod_json.as_object_mut() else { return false };
    let spec = pod.entry("spec").or_insert_with(|| json!({}));
    let Some(spec) = spec.as_object_mut() else { return false };
    let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
    if tolerations.is_null() {
        *tolerations = json!([]);
    }
    let Some(list) = tolerations.as_array_mut() else { return false };
    let mut changed = false;
    for key in [TAINT_NODE_NOT_READY, TAINT_NODE_UNREACHABLE] {
        if !list.iter().any(|t| tolerates(t, key)) {
            list.push(json!({
                "key": key,
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
            }));
            changed = true;
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_without_tolerations_gets_both_with_300_seconds() {
        let mut pod = json!({"spec": {"containers": [{"name": "c", "image": "i"}]}});
        assert!(default_toleration_seconds(&mut pod));
        assert_eq!(
            pod["spec"]["tolerations"],
            json!([
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            ])
        );
    }

    #[test]
    fn an_existing_toleration_for_one_key_is_kept_and_only_the_other_added() {
        let mut pod = json!({"spec": {"tolerations": [
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10}
        ]}});
        assert!(default_toleration_seconds(&mut pod));
        let t = pod["spec"]["tolerations"].as_array().expect("tolerations");
        assert_eq!(t.len(), 2);
        assert_eq!(t[0]["tolerationSeconds"], 10);
        assert_eq!(t[1]["key"], "node.kubernetes.io/not-ready");
    }

    #[test]
    fn a_wildcard_toleration_covers_both_keys() {
        let mut pod = json!({"spec": {"tolerations": [{"operator": "Exists"}]}});
        assert!(!default_toleration_seconds(&mut pod));
        assert_eq!(pod["spec"]["tolerations"].as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn a_noschedule_toleration_does_not_count() {
        let mut pod = json!({"spec": {"tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}
        ]}});
        assert!(default_toleration_seconds(&mut pod));
        assert_eq!(pod["spec"]["tolerations"].as_array().map(Vec::len), Some(3));
    }

    #[test]
    fn applying_twice_changes_nothing_the_second_time() {
        let mut pod = json!({"spec": {"tolerations": null}});
        assert!(default_toleration_seconds(&mut pod));
        let once = pod.clone();
        assert!(!default_toleration_seconds(&mut pod));
        assert_eq!(pod, once);
    }
}
