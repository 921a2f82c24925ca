//! Per-namespace defaults: the `default` ServiceAccount (upstream `serviceaccount` controller)
//! and the `kube-root-ca.crt` ConfigMap carrying the cluster CA (upstream
//! `certificates/rootcacertpublisher`). Both reconcile each namespace, and again whenever the
//! object they maintain changes or disappears.

pub mod default_account;
pub mod root_ca;

use k1s_api::errors::chain;
use crate::Context;
use futures::StreamExt;
use k1s_runtime::backoff::{Backoff, Failures};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::NamespaceResourceScope;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Resource;
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use tokio::sync::mpsc;

pub async fn run(ctx: Arc<Context>) {
    tokio::join!(default_account::run(ctx.clone()), root_ca::run(ctx));
}

/// A namespace is active: not being deleted.
pub fn is_active(ns: &Namespace) -> bool {
    ns.metadata.deletion_timestamp.is_none()
        && ns.status.as_ref().and_then(|s| s.phase.as_deref()).is_none_or(|p| p == "Active")
}

/// Runs `reconcile(namespace, children)` for every namespace, and again for a namespace whenever
/// its child object named `child` changes; `children` caches those children.
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
    let (children, writer) = reflector::store::<C>();
    let config = watcher::Config::default().fields(&format!("metadata.name={child}"));
    let mut child_events =
        reflector::reflector(writer, watcher(Api::<C>::all(ctx.client.clone()), config)).default_backoff().boxed();
    // The children's cache is driven here (not by the controller) so that it is ready before
    // the first reconcile; its changes reach the controller through this channel.
    let (tx, rx) = mpsc::unbounded_channel::<ObjectRef<Namespace>>();
    let feeder = tokio::spawn(async move {
        while let Some(ev) = child_events.next().await {
            match ev {
                Ok(watcher::Event::Apply(c) | watcher::Event::InitApply(c) | watcher::Event::Delete(c)) => {
                    if let Some(ns) = c.meta().namespace.as_deref() {
                        let _ = tx.send(ObjectRef::new(ns));
                    }
                }
                Ok(_) => {}
                Err(e) => tracing::debug!(controller, error = %chain(&e), "watch failed; retrying"),
            }
        }
    });
    tokio::select! {
        _ = ctx.cancel.cancelled() => {
            feeder.abort();
            return;
        }
        _ = children.wait_until_ready() => {}
    }
    let triggers = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|r| (r, rx)) });
    let failures = Arc::new(Failures::new(Backoff::DEFAULT));
    let cancel = ctx.cancel.clone();
    let reconcile = Arc::new(reconcile);
    Controller::new(Api::<Namespace>::all(ctx.client.clone()), watcher::Config::default())
        .reconcile_on(triggers)
        .graceful_shutdown_on(async move { cancel.cancelled().await })
        .run(
            move |ns: Arc<Namespace>, failures: Arc<Failures>| {
                let children = children.clone();
                let reconcile = reconcile.clone();
                async move {
                    let name = ns.metadata.name.clone().unwrap_or_default();
                    reconcile(ns, children).await?;
                    failures.succeeded(&name);
                    Ok::<Action, E>(Action::await_change())
                }
            },
            move |ns, err, failures| {
                let name = ns.metadata.name.clone().unwrap_or_default();
                tracing::warn!(controller, namespace = %name, error = %chain(err), "sync failed; retrying");
                Action::requeue(failures.failed(&name))
            },
            failures,
        )
        .for_each(|_| futures::future::ready(()))
        .await;
    feeder.abort();
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
