//! Per-namespace defaults: the `default` ServiceAccount (upstream `serviceaccount` controller)
//! and the `kube-root-ca.crt` ConfigMap carrying the cluster CA (upstream
//! `certificates/rootcacertpublisher`). Both reconcile each namespace, and again whenever the
//! object they maintain changes or disappears.

pub mod default_account;
pub mod root_ca;

use crate::Context;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::NamespaceResourceScope;
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::Resource;
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;

pub async fn run(ctx: Arc<Context>) {
    tokio::join!(default_account::run(ctx.clone()), root_ca::run(ctx));
}

/// A namespace is active: not being deleted.
pub fn is_active(ns: &Namespace) -> bool {
    ns.metadata.deletion_timestamp.is_none()
        && ns.status.as_ref().and_then(|s| s.phase.as_deref()).is_none_or(|p| p == "Active")
}

/// Runs `reconcile(namespace, children)` for every namespace, and again for a namespace whenever
/// its child object named `child` changes; `children` caches those children (listed before the
/// first reconcile).
async fn per_namespace<C, R, Fut, E>(ctx: Arc<Context>, controller: &'static str, child: &'static str, reconcile: R)
where
    C: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static,
    R: Fn(Arc<Namespace>, Store<C>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    let mut c = k1s_runtime::controller::Controller::<Namespace>::new(controller, ctx.client.clone());
    let config = watcher::Config::default().fields(&format!("metadata.name={child}"));
    let children = c.watches_with(config, |old: Option<&C>, new: Option<&C>, scope| {
        for ns in old.into_iter().chain(new).filter_map(|c| c.meta().namespace.as_deref()) {
            scope.queue.add(None, ns);
        }
    });
    let reconcile = move |ns: Arc<Namespace>, children: Arc<Store<C>>| {
        let done = reconcile(ns, (*children).clone());
        async move { done.await.map(|()| Action::await_change()) }
    };
    c.run(Arc::new(children), reconcile, ctx.cancel.clone()).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NamespaceStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    #[test]
    fn terminating_namespaces_are_not_active() {
        let mut ns = Namespace {
            status: Some(NamespaceStatus { phase: Some("Active".into()), ..Default::default() }),
            ..Default::default()
        };
        assert!(is_active(&ns));
        ns.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        assert!(!is_active(&ns));
        let terminating = Namespace {
            status: Some(NamespaceStatus { phase: Some("Terminating".into()), ..Default::default() }),
            ..Default::default()
        };
        assert!(!is_active(&terminating));
    }
}
