//! Custom resources, served from the stored CustomResourceDefinitions: the catalog of their
//! resource-table entries (`crate::crd_catalog`) kept in step with the definitions by [`run`],
//! which also does what upstream's apiextensions controllers do for a definition: its
//! `NamesAccepted` and `Established` conditions, `acceptedNames` and `storedVersions`, and on
//! deletion the `customresourcecleanup.apiextensions.k8s.io` finalizer's work (every custom
//! resource of the definition deleted first; the definition's strategy adds the finalizer).

use crate::crd_catalog::CRD_PREFIX;
use crate::registry::{self, Registry};
use k1s_api::resources::ResourceInfo;
use k1s_api::strategies::apiextensions::CLEANUP_FINALIZER;
use serde_json::{json, Value};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The status a definition should have: names accepted (unless another definition of the
/// group has its kind, plural or a short name), established, its storage version recorded.
fn wanted_status(crd: &Value, others: &[Value]) -> Value {
    let names = crd.pointer("/spec/names").cloned().unwrap_or_else(|| json!({}));
    let group = crd.pointer("/spec/group").and_then(Value::as_str).unwrap_or("");
    let name = crate::object::name(crd);
    let taken = |field: &str| -> Vec<String> {
        others
            .iter()
            .filter(|o| {
                crate::object::name(o) != name && o.pointer("/spec/group").and_then(Value::as_str) == Some(group)
            })
            .filter_map(|o| {
                o.pointer(&format!("/status/acceptedNames/{field}")).and_then(Value::as_str).map(str::to_string)
            })
            .collect()
    };
    let kind = names.get("kind").and_then(Value::as_str).unwrap_or("");
    let conflict =
        if taken("kind").iter().any(|k| k == kind) { Some(format!("\"{kind}\" is already in use")) } else { None };
    let now = crate::object::now_rfc3339();
    let old_conditions = crd.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    let condition = |type_: &str, status: bool, reason: &str, message: &str| {
        let status = if status { "True" } else { "False" };
        let since = old_conditions
            .iter()
            .find(|c| c["type"] == type_ && c["status"] == status)
            .and_then(|c| c.get("lastTransitionTime").cloned())
            .unwrap_or_else(|| json!(now));
        json!({"type": type_, "status": status, "lastTransitionTime": since, "reason": reason, "message": message})
    };
    let mut accepted = names.clone();
    if let Some(m) = accepted.as_object_mut() {
        let kind = m.get("kind").and_then(Value::as_str).unwrap_or("").to_string();
        m.entry("singular").or_insert_with(|| json!(kind.to_lowercase()));
        m.entry("listKind").or_insert_with(|| json!(format!("{kind}List")));
    }
    let mut conditions = match &conflict {
        None => vec![
            condition("NamesAccepted", true, "NoConflicts", "no conflicts found"),
            condition("Established", true, "InitialNamesAccepted", "the initial names have been accepted"),
        ],
        Some(why) => vec![
            condition("NamesAccepted", false, "MultipleNamesNotAllowed", why),
            condition("Established", false, "NotAccepted", "not all names are accepted"),
        ],
    };
    if crate::object::is_deleting(crd) {
        conditions.push(condition(
            "Terminating",
            true,
            "InstanceDeletionInProgress",
            "CustomResource deletion is in progress",
        ));
    }
    let mut stored: Vec<Value> =
        crd.pointer("/status/storedVersions").and_then(Value::as_array).cloned().unwrap_or_default();
    if let Some(v) = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .and_then(|vs| vs.iter().find(|v| v["storage"] == true))
        .and_then(|v| v.get("name").cloned())
    {
        if !stored.contains(&v) {
            stored.push(v);
        }
    }
    json!({
        "acceptedNames": if conflict.is_some() { crd.pointer("/status/acceptedNames").cloned().unwrap_or(json!({"plural": "", "kind": ""})) } else { accepted },
        "conditions": conditions,
        "storedVersions": stored,
    })
}

fn same_status(a: Option<&Value>, b: &Value) -> bool {
    let strip = |v: &Value| -> Value {
        let mut v = v.clone();
        if let Some(cs) = v.get_mut("conditions").and_then(Value::as_array_mut) {
            for c in cs {
                if let Some(m) = c.as_object_mut() {
                    m.remove("lastTransitionTime");
                }
            }
        }
        v
    };
    a.is_some_and(|a| strip(a) == strip(b))
}

/// Brings every definition's status up to date, and carries out pending deletions.
async fn reconcile(registry: &Registry) {
    let Ok(info) = registry::builtin("apiextensions.k8s.io", "v1", "customresourcedefinitions") else { return };
    let page = match registry.store.list(CRD_PREFIX, None, 0, None) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(error = %e, "listing CustomResourceDefinitions failed");
            return;
        }
    };
    let crds: Vec<Value> =
        page.items.iter().filter_map(|kv| crate::object::from_storage(&kv.value, kv.mod_revision)).collect();
    for crd in &crds {
        let status = wanted_status(crd, &crds);
        if !same_status(crd.get("status"), &status) {
            let mut updated = crd.clone();
            updated["status"] = status;
            if let Err(e) = registry.server_update_status(info, updated).await {
                tracing::debug!(crd = crate::object::name(crd), error = %e.message, "updating a definition's status failed");
            }
            // The write comes back as a change: the rest of the work happens then.
            continue;
        }
        if crate::object::is_deleting(crd) && crate::object::finalizers(crd).iter().any(|f| f == CLEANUP_FINALIZER) {
            clean_up(registry, info, crd).await;
        }
    }
}

/// Deletes every object of a deleted definition, then lets the definition go.
async fn clean_up(registry: &Registry, crd_info: &'static ResourceInfo, crd: &Value) {
    let name = crate::object::name(crd).to_string();
    let catalog = registry.custom.current();
    let Some(info) = catalog.of(&name).first().copied() else {
        // Nothing served (the definition never was valid): nothing to delete.
        return finish(registry, crd_info, crd).await;
    };
    match registry.server_delete_all(info).await {
        Ok(0) => finish(registry, crd_info, crd).await,
        Ok(left) => tracing::debug!(crd = %name, left, "waiting for custom resources to go"),
        Err(e) => tracing::warn!(crd = %name, error = %e.message, "deleting custom resources failed"),
    }
}

async fn finish(registry: &Registry, info: &'static ResourceInfo, crd: &Value) {
    let mut updated = crd.clone();
    let finalizers: Vec<Value> =
        crate::object::finalizers(crd).into_iter().filter(|f| f != CLEANUP_FINALIZER).map(Value::String).collect();
    updated["metadata"]["finalizers"] = Value::Array(finalizers);
    if let Err(e) = registry.server_update(info, updated).await {
        tracing::debug!(crd = crate::object::name(crd), error = %e.message, "removing the cleanup finalizer failed");
    }
}

/// Keeps the catalog and the definitions' status current until `cancel` fires. Custom
/// resources being deleted are checked again every few seconds until they are gone.
pub async fn run(registry: Arc<Registry>, cancel: CancellationToken) {
    let mut watcher = match registry.store.watch(CRD_PREFIX, 0) {
        Ok(w) => w,
        Err(e) => {
            tracing::error!(error = %e, "watching CustomResourceDefinitions failed");
            return;
        }
    };
    registry.custom.refresh(&registry.store);
    reconcile(&registry).await;
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            ev = watcher.next() => {
                if let Err(e) = ev {
                    tracing::warn!(error = %e, "the CustomResourceDefinition watch ended; restarting it");
                    match registry.store.watch(CRD_PREFIX, 0) {
                        Ok(w) => watcher = w,
                        Err(_) => tokio::time::sleep(std::time::Duration::from_secs(1)).await,
                    }
                }
            }
            _ = tokio::time::sleep(std::time::Duration::from_secs(2)) => {}
        }
        registry.custom.refresh(&registry.store);
        reconcile(&registry).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(name: &str, kind: &str) -> Value {
        json!({"metadata": {"name": name}, "spec": {"group": "example.com",
               "names": {"plural": name.split('.').next(), "kind": kind},
               "versions": [{"name": "v1", "served": true, "storage": true}]}})
    }

    #[test]
    fn a_definition_is_established_with_its_names_and_storage_version() {
        let w = crd("widgets.example.com", "Widget");
        let s = wanted_status(&w, std::slice::from_ref(&w));
        assert_eq!(
            s["acceptedNames"],
            json!({"plural": "widgets", "kind": "Widget", "singular": "widget", "listKind": "WidgetList"})
        );
        assert_eq!(s["conditions"][1]["type"], "Established");
        assert_eq!(s["conditions"][1]["status"], "True");
        assert_eq!(s["storedVersions"], json!(["v1"]));
        let mut written = w.clone();
        written["status"] = s.clone();
        assert!(same_status(written.get("status"), &wanted_status(&written, &[written.clone()])));
    }

    #[test]
    fn a_kind_another_definition_of_the_group_holds_is_not_accepted() {
        let mut first = crd("widgets.example.com", "Widget");
        first["status"] = wanted_status(&first, &[]);
        let second = crd("gadgets.example.com", "Widget");
        let s = wanted_status(&second, &[first, second.clone()]);
        assert_eq!(s["conditions"][0]["status"], "False", "{s}");
        assert_eq!(
            s["conditions"][1],
            json!({"type": "Established", "status": "False", "lastTransitionTime": s["conditions"][1]["lastTransitionTime"], "reason": "NotAccepted", "message": "not all names are accepted"})
        );
    }
}
