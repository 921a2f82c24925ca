//! The NamespaceLifecycle admission plugin: no objects in namespaces that do not exist or are
//! being deleted, and the namespaces that always exist are never deleted.

use crate::admission::{Attributes, Operation, ValidatingPlugin};
use crate::error::ApiError;
use futures::future::BoxFuture;
use k1s_store::Store;

/// Namespaces that always exist and may not be deleted.
pub const IMMORTAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public"];

pub struct NamespaceLifecycle {
    pub store: Store,
}

#[derive(Default, serde::Deserialize)]
struct NamespaceState {
    #[serde(default)]
    metadata: NamespaceMeta,
    #[serde(default)]
    status: NamespaceStatus,
}

#[derive(Default, serde::Deserialize)]
struct NamespaceMeta {
    #[serde(rename = "deletionTimestamp")]
    deletion_timestamp: Option<serde::de::IgnoredAny>,
}

#[derive(Default, serde::Deserialize)]
struct NamespaceStatus {
    phase: Option<String>,
}

impl ValidatingPlugin for NamespaceLifecycle {
    fn name(&self) -> &'static str {
        "NamespaceLifecycle"
    }

    fn validate<'a>(&'a self, attrs: &'a Attributes<'_>) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            let r = attrs.resource;
            if attrs.operation == Operation::Delete
                && r.group.is_empty()
                && r.resource == "namespaces"
                && IMMORTAL_NAMESPACES.contains(&attrs.name)
            {
                return Err(ApiError::forbidden_message(
                    "",
                    "namespaces",
                    attrs.name,
                    "this namespace may not be deleted",
                ));
            }
            if !attrs.resource.namespaced() || attrs.operation != Operation::Create {
                return Ok(());
            }
            let Some(ns) = attrs.namespace else { return Ok(()) };
            let kv =
                self.store.get(&format!("/registry/namespaces/{ns}")).map_err(|e| ApiError::internal(e.to_string()))?;
            let Some(kv) = kv else {
                return Err(ApiError::not_found("", "namespaces", ns));
            };
            // Only the two fields that matter are decoded (this runs on every namespaced create).
            let state: NamespaceState = serde_json::from_slice(&kv.value).unwrap_or_default();
            let terminating =
                state.status.phase.as_deref() == Some("Terminating") || state.metadata.deletion_timestamp.is_some();
            // Events about the namespace's teardown are still welcome.
            if terminating && attrs.resource.resource != "events" {
                let mut e = ApiError::forbidden_message(
                    attrs.resource.group,
                    attrs.resource.resource,
                    attrs.name,
                    format!("unable to create new content in namespace {ns} because it is being terminated"),
                );
                e.causes.push(crate::error::Cause {
                    reason: "NamespaceTerminating".into(),
                    message: format!("namespace {ns} is being terminated"),
                    field: "metadata.namespace".into(),
                });
                return Err(e);
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::UserInfo;

    #[tokio::test]
    async fn the_namespaces_that_always_exist_may_not_be_deleted() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = Store::open(dir.path(), k1s_store::StoreOptions::default()).expect("store");
        let plugin = NamespaceLifecycle { store };
        let namespaces = k1s_api::resources::find("", "v1", "namespaces").expect("namespaces");
        let user = UserInfo::new("admin", &["system:masters"]);
        let delete = |name: &'static str| Attributes {
            operation: Operation::Delete,
            resource: namespaces,
            subresource: None,
            namespace: None,
            name,
            user: &user,
            object: None,
            old_object: None,
            dry_run: false,
            warnings: Default::default(),
            audit_annotations: None,
            write: None,
        };
        for name in IMMORTAL_NAMESPACES {
            let e = plugin.validate(&delete(name)).await.expect_err("refused");
            assert_eq!(e.code, 403, "{name}");
            assert!(e.message.contains("this namespace may not be deleted"), "{}", e.message);
        }
        plugin.validate(&delete("team")).await.expect("any other namespace may go");
    }
}
