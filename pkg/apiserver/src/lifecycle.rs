//! The NamespaceLifecycle admission plugin: no objects in namespaces that do not exist or are
//! being deleted.

use crate::admission::{Attributes, Operation, ValidatingPlugin};
use crate::error::ApiError;
use futures::future::BoxFuture;
use k1s_store::Store;
use serde_json::Value;

pub struct NamespaceLifecycle {
    pub store: Store,
}

impl ValidatingPlugin for NamespaceLifecycle {
    fn name(&self) -> &'static str {
        "NamespaceLifecycle"
    }

    fn validate<'a>(&'a self, attrs: &'a Attributes<'_>) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            if !attrs.resource.namespaced() || attrs.operation != Operation::Create {
                return Ok(());
            }
            let Some(ns) = attrs.namespace else { return Ok(()) };
            let kv =
                self.store.get(&format!("/registry/namespaces/{ns}")).map_err(|e| ApiError::internal(e.to_string()))?;
            let Some(kv) = kv else {
                return Err(ApiError::not_found("", "namespaces", ns));
            };
            let obj: Value = serde_json::from_slice(&kv.value).unwrap_or(Value::Null);
            let terminating = obj.pointer("/status/phase").and_then(Value::as_str) == Some("Terminating")
                || obj.pointer("/metadata/deletionTimestamp").is_some_and(|v| !v.is_null());
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
