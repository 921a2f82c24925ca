//! Every active namespace has a ServiceAccount named `default`; deleted, it is created again.

use super::{is_active, per_namespace};
use crate::Context;
use k1s_runtime::api_error::{is_already_exists, is_namespace_terminating, is_not_found};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use kube::runtime::reflector::ObjectRef;
use std::sync::Arc;

pub const NAME: &str = "default";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("creating ServiceAccount {NAME} in namespace {namespace}")]
    Create { namespace: String, source: kube::Error },
}

/// The ServiceAccount to create in `ns`, if it lacks one.
pub fn missing_account(ns: &Namespace, existing: Option<&ServiceAccount>) -> Option<ServiceAccount> {
    if existing.is_some() || !is_active(ns) {
        return None;
    }
    Some(ServiceAccount {
        metadata: ObjectMeta { name: Some(NAME.into()), namespace: ns.metadata.name.clone(), ..Default::default() },
        ..Default::default()
    })
}

pub async fn run(ctx: Arc<Context>) {
    let client = ctx.client.clone();
    per_namespace::<ServiceAccount, _, _, _>(ctx, "serviceaccount", NAME, move |ns, accounts| {
        let client = client.clone();
        async move {
            let name = ns.metadata.name.clone().unwrap_or_default();
            let existing = accounts.get(&ObjectRef::new(NAME).within(&name));
            let Some(sa) = missing_account(&ns, existing.as_deref()) else {
                tracing::trace!(namespace = %name, exists = existing.is_some(), "nothing to create");
                return Ok(());
            };
            match Api::<ServiceAccount>::namespaced(client, &name).create(&PostParams::default(), &sa).await {
                Ok(_) => {
                    tracing::debug!(namespace = %name, "created the default ServiceAccount");
                    Ok(())
                }
                Err(e) if is_already_exists(&e) || is_namespace_terminating(&e) || is_not_found(&e) => {
                    tracing::debug!(namespace = %name, error = %e, "default ServiceAccount not created");
                    Ok(())
                }
                Err(source) => Err(Error::Create { namespace: name, source }),
            }
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NamespaceStatus;

    fn ns(phase: &str) -> Namespace {
        Namespace {
            metadata: ObjectMeta { name: Some("team".into()), ..Default::default() },
            status: Some(NamespaceStatus { phase: Some(phase.into()), ..Default::default() }),
            ..Default::default()
        }
    }

    #[test]
    fn an_active_namespace_without_the_account_gets_one() {
        let sa = missing_account(&ns("Active"), None).expect("account");
        assert_eq!(sa.metadata.name.as_deref(), Some("default"));
        assert_eq!(sa.metadata.namespace.as_deref(), Some("team"));
    }

    #[test]
    fn an_existing_account_or_a_terminating_namespace_needs_nothing() {
        assert!(missing_account(&ns("Active"), Some(&ServiceAccount::default())).is_none());
        assert!(missing_account(&ns("Terminating"), None).is_none());
    }
}
