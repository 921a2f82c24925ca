//! Built-in admission for pods: `Priority` (resolve `priorityClassName` into `priority` and
//! `preemptionPolicy`) and `DefaultTolerationSeconds` (tolerate not-ready/unreachable nodes
//! for 300 s).

use crate::admission::{Attributes, MutatingPlugin, Operation};
use crate::error::ApiError;
use futures::future::BoxFuture;
use k1s_store::Store;
use serde_json::{json, Value};

fn is_pod_create(attrs: &Attributes<'_>) -> bool {
    attrs.operation == Operation::Create
        && attrs.subresource.is_none()
        && attrs.resource.group.is_empty()
        && attrs.resource.resource == "pods"
}

/// Adds `node.kubernetes.io/not-ready` and `…/unreachable` NoExecute tolerations with
/// `tolerationSeconds: 300` unless the pod already tolerates them.
pub struct DefaultTolerationSeconds;

pub fn add_default_tolerations(pod: &mut Value) {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else { return };
    let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
    let Some(list) = tolerations.as_array_mut() else { return };
    for key in ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"] {
        let covered = list.iter().any(|t| {
            let effect = t.get("effect").and_then(Value::as_str).unwrap_or("");
            let k = t.get("key").and_then(Value::as_str).unwrap_or("");
            let op = t.get("operator").and_then(Value::as_str).unwrap_or("Equal");
            (effect.is_empty() || effect == "NoExecute") && (k == key || (k.is_empty() && op == "Exists"))
        });
        if !covered {
            list.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}));
        }
    }
}

impl MutatingPlugin for DefaultTolerationSeconds {
    fn name(&self) -> &'static str {
        "DefaultTolerationSeconds"
    }
    fn admit<'a>(&'a self, attrs: &'a mut Attributes<'_>) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            if is_pod_create(attrs) {
                if let Some(pod) = attrs.object.as_deref_mut() {
                    add_default_tolerations(pod);
                }
            }
            Ok(())
        })
    }
}

/// Resolves pod priority from PriorityClasses in the store.
pub struct Priority {
    pub store: Store,
}

impl Priority {
    fn class(&self, name: &str) -> Result<Option<Value>, ApiError> {
        let kv = self
            .store
            .get(&format!("/registry/scheduling.k8s.io/priorityclasses/{name}"))
            .map_err(|e| ApiError::internal(e.to_string()))?;
        Ok(kv.and_then(|kv| serde_json::from_slice(&kv.value).ok()))
    }

    fn global_default(&self) -> Result<Option<Value>, ApiError> {
        let page = self
            .store
            .list("/registry/scheduling.k8s.io/priorityclasses/", None, 0, None)
            .map_err(|e| ApiError::internal(e.to_string()))?;
        Ok(page
            .items
            .iter()
            .filter_map(|kv| serde_json::from_slice::<Value>(&kv.value).ok())
            .filter(|c| c.get("globalDefault").and_then(Value::as_bool) == Some(true))
            .min_by_key(|c| c.get("value").and_then(Value::as_i64).unwrap_or(0)))
    }
}

impl MutatingPlugin for Priority {
    fn name(&self) -> &'static str {
        "Priority"
    }
    fn admit<'a>(&'a self, attrs: &'a mut Attributes<'_>) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            if !is_pod_create(attrs) {
                return Ok(());
            }
            let name = attrs.name.to_string();
            let Some(pod) = attrs.object.as_deref_mut() else { return Ok(()) };
            let class_name = pod.pointer("/spec/priorityClassName").and_then(Value::as_str).unwrap_or("").to_string();
            let class = if class_name.is_empty() {
                self.global_default()?
            } else {
                match self.class(&class_name)? {
                    Some(c) => Some(c),
                    None => {
                        return Err(ApiError::forbidden_message(
                            "",
                            "pods",
                            &name,
                            format!("no PriorityClass with name {class_name} was found"),
                        ))
                    }
                }
            };
            let value = class.as_ref().and_then(|c| c.get("value").and_then(Value::as_i64)).unwrap_or(0);
            let policy = class
                .as_ref()
                .and_then(|c| c.get("preemptionPolicy").and_then(Value::as_str))
                .unwrap_or("PreemptLowerPriority")
                .to_string();
            if let Some(p) = pod.pointer("/spec/priority").and_then(Value::as_i64) {
                if p != value && !class_name.is_empty() {
                    return Err(ApiError::forbidden_message(
                        "",
                        "pods",
                        &name,
                        "the integer value of priority (".to_string()
                            + &p.to_string()
                            + ") must not be provided in pod spec; priority admission controller computed "
                            + &value.to_string()
                            + " from the given PriorityClass name",
                    ));
                }
            }
            if let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) {
                spec.insert("priority".into(), json!(value));
                spec.entry("preemptionPolicy").or_insert_with(|| json!(policy));
                if let (true, Some(c)) = (class_name.is_empty(), &class) {
                    if let Some(n) = c.pointer("/metadata/name").and_then(Value::as_str) {
                        spec.insert("priorityClassName".into(), json!(n));
                    }
                }
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_tolerations_are_added_once() {
        let mut pod = json!({"spec": {"containers": []}});
        add_default_tolerations(&mut pod);
        add_default_tolerations(&mut pod);
        let t = pod["spec"]["tolerations"].as_array().expect("tolerations");
        assert_eq!(t.len(), 2);
        assert_eq!(t[0]["tolerationSeconds"], 300);
        let mut tolerant = json!({"spec": {"tolerations": [{"operator": "Exists"}]}});
        add_default_tolerations(&mut tolerant);
        assert_eq!(tolerant["spec"]["tolerations"].as_array().map(Vec::len), Some(1));
    }
}
