//! `DefaultStorageClass` admission, as upstream's plugin: a PersistentVolumeClaim created
//! without `storageClassName` gets the default StorageClass (annotated
//! `storageclass.kubernetes.io/is-default-class: "true"`; the newest when there are several).
//! A claim with `storageClassName: ""` asks for no class and keeps it.
//!
//! `StorageObjectInUseProtection`, as upstream's plugin: every new claim gets the
//! `kubernetes.io/pvc-protection` finalizer and every new volume `kubernetes.io/pv-protection`,
//! which the PersistentVolume binder removes once no pod uses the claim (once the volume is not
//! bound), so that deleting a claim in use waits for its pods.

use crate::admission::{Attributes, MutatingPlugin, Operation};
use crate::error::ApiError;
use futures::future::BoxFuture;
use k1s_store::Store;
use serde_json::Value;

use k1s_api::storage::{IS_DEFAULT_CLASS, PVC_PROTECTION, PV_PROTECTION};

pub struct DefaultStorageClass {
    pub store: Store,
}

/// The default class among `classes`: the newest of those marked default, by creation time
/// then name (upstream's `GetDefaultClass`).
pub fn default_class(classes: &[Value]) -> Option<&str> {
    classes
        .iter()
        .filter(|c| {
            c.pointer("/metadata/annotations").and_then(|a| a.get(IS_DEFAULT_CLASS)).and_then(Value::as_str)
                == Some("true")
        })
        .max_by(|a, b| {
            let key = |c: &Value| {
                (
                    c.pointer("/metadata/creationTimestamp").and_then(Value::as_str).unwrap_or("").to_string(),
                    std::cmp::Reverse(c.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string()),
                )
            };
            key(a).cmp(&key(b))
        })
        .and_then(|c| c.pointer("/metadata/name").and_then(Value::as_str))
}

impl MutatingPlugin for DefaultStorageClass {
    fn name(&self) -> &'static str {
        "DefaultStorageClass"
    }

    fn admit<'a>(&'a self, attrs: &'a mut Attributes<'_>) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            let r = attrs.resource;
            if attrs.operation != Operation::Create
                || attrs.subresource.is_some()
                || !r.group.is_empty()
                || r.resource != "persistentvolumeclaims"
            {
                return Ok(());
            }
            let Some(spec) = attrs.object.as_deref_mut().and_then(|o| o.get_mut("spec")).and_then(Value::as_object_mut)
            else {
                return Ok(());
            };
            if spec.get("storageClassName").is_some_and(|v| !v.is_null()) {
                return Ok(());
            }
            let page = self
                .store
                .list("/registry/storage.k8s.io/storageclasses/", None, 0, None)
                .map_err(|e| ApiError::internal(e.to_string()))?;
            let classes: Vec<Value> =
                page.items.iter().filter_map(|kv| serde_json::from_slice(&kv.value).ok()).collect();
            if let Some(name) = default_class(&classes) {
                spec.insert("storageClassName".into(), Value::from(name));
            }
            Ok(())
        })
    }
}

pub struct StorageObjectInUseProtection;

impl MutatingPlugin for StorageObjectInUseProtection {
    fn name(&self) -> &'static str {
        "StorageObjectInUseProtection"
    }

    fn admit<'a>(&'a self, attrs: &'a mut Attributes<'_>) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            let r = attrs.resource;
            let finalizer = match r.resource {
                "persistentvolumeclaims" => PVC_PROTECTION,
                "persistentvolumes" => PV_PROTECTION,
                _ => return Ok(()),
            };
            if attrs.operation != Operation::Create || attrs.subresource.is_some() || !r.group.is_empty() {
                return Ok(());
            }
            let Some(meta) =
                attrs.object.as_deref_mut().and_then(|o| o.get_mut("metadata")).and_then(Value::as_object_mut)
            else {
                return Ok(());
            };
            let finalizers = meta.entry("finalizers").or_insert_with(|| Value::Array(Vec::new()));
            if finalizers.is_null() {
                *finalizers = Value::Array(Vec::new());
            }
            if let Some(list) = finalizers.as_array_mut() {
                if !list.iter().any(|f| f == finalizer) {
                    list.push(Value::from(finalizer));
                }
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn class(name: &str, created: &str, default: bool) -> Value {
        json!({"metadata": {"name": name, "creationTimestamp": created,
                            "annotations": {IS_DEFAULT_CLASS: if default { "true" } else { "false" }}}})
    }

    #[test]
    fn the_newest_default_class_wins() {
        let classes = vec![
            class("old", "2026-01-01T00:00:00Z", true),
            class("new", "2026-06-01T00:00:00Z", true),
            class("newest-but-not-default", "2026-07-01T00:00:00Z", false),
        ];
        assert_eq!(default_class(&classes), Some("new"));
        assert_eq!(default_class(&classes[2..]), None);
    }
}
