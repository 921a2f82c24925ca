//! The namespace controller: once a namespace has a deletionTimestamp, it empties it of every
//! namespaced resource discovery reports (custom resources included), records progress in the
//! namespace's status conditions, waits for what remains (re-checking after half the estimate,
//! or as soon as a pod of the namespace goes away), then removes the `kubernetes` finalizer
//! through `PUT /api/v1/namespaces/<name>/finalize`, after which the API server deletes it.

pub mod conditions;
pub mod deleter;

use crate::core::discovery::{self, ServedResource};
use crate::Context;
use deleter::{ContentApi, ContentError, Item, PodGrace};
use futures::StreamExt;
use k1s_api::errors::chain;
use k1s_runtime::api_error::{is_conflict, is_method_not_supported, is_not_found};
use k1s_runtime::backoff::{Backoff, Failures};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams, PropagationPolicy};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{watcher, WatchStreamExt};
use std::sync::Arc;
use std::time::Duration;

/// The finalizer this controller owns.
pub const FINALIZER: &str = "kubernetes";

/// Upstream's namespace rate limiter: 5 ms doubling, at most a minute between retries.
const BACKOFF: Backoff = Backoff { base: Duration::from_millis(5), max: Duration::from_secs(60) };

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading namespace {name}")]
    Get { name: String, source: kube::Error },
    #[error("marking namespace {name} Terminating")]
    UpdatePhase { name: String, source: kube::Error },
    #[error("deleting the content of namespace {name}: {}", errors.join("; "))]
    Content { name: String, errors: Vec<String> },
    #[error("finalizing namespace {name}")]
    Finalize { name: String, source: kube::Error },
}

/// The content API over the controller's client.
pub struct KubeContent {
    client: kube::Client,
}

fn content_error(e: kube::Error) -> ContentError {
    if is_not_found(&e) || is_method_not_supported(&e) {
        ContentError::NotSupported
    } else {
        ContentError::Failed(chain(&e))
    }
}

impl KubeContent {
    fn api(&self, r: &ServedResource, ns: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), ns, &r.api)
    }
}

impl ContentApi for KubeContent {
    async fn discover(&self) -> (Vec<ServedResource>, Option<String>) {
        match discovery::served(&self.client).await {
            Ok(s) => (s.preferred, None),
            Err(e) => (Vec::new(), Some(chain(&e))),
        }
    }

    async fn delete_collection(&self, r: &ServedResource, ns: &str) -> Result<(), ContentError> {
        let dp = DeleteParams { propagation_policy: Some(PropagationPolicy::Background), ..Default::default() };
        self.api(r, ns).delete_collection(&dp, &ListParams::default()).await.map(|_| ()).map_err(content_error)
    }

    async fn list(&self, r: &ServedResource, ns: &str) -> Result<Vec<Item>, ContentError> {
        let list = self.api(r, ns).list_metadata(&ListParams::default()).await.map_err(content_error)?;
        Ok(list
            .items
            .into_iter()
            .map(|o| Item {
                name: o.metadata.name.unwrap_or_default(),
                finalizers: o.metadata.finalizers.unwrap_or_default(),
            })
            .collect())
    }

    async fn delete(&self, r: &ServedResource, ns: &str, name: &str) -> Result<(), ContentError> {
        let dp = DeleteParams { propagation_policy: Some(PropagationPolicy::Background), ..Default::default() };
        self.api(r, ns).delete(name, &dp).await.map(|_| ()).map_err(content_error)
    }

    async fn pods(&self, ns: &str) -> Result<Vec<PodGrace>, ContentError> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let list = pods.list(&ListParams::default()).await.map_err(|e| ContentError::Failed(chain(&e)))?;
        Ok(list
            .items
            .iter()
            .map(|p| PodGrace {
                terminal: crate::core::pod::is_terminal(p),
                grace_seconds: p.spec.as_ref().and_then(|s| s.termination_grace_period_seconds),
            })
            .collect())
    }
}

struct State {
    api: Api<Namespace>,
    content: KubeContent,
    failures: Failures,
}

fn now() -> Time {
    Time(jiff::Timestamp::now())
}

fn is_deleting(ns: &Namespace) -> bool {
    ns.metadata.deletion_timestamp.is_some()
}

fn has_finalizer(ns: &Namespace) -> bool {
    ns.spec.as_ref().and_then(|s| s.finalizers.as_ref()).is_some_and(|f| f.iter().any(|f| f == FINALIZER))
}

/// How long to wait before checking again on content expected to go within `estimate` seconds
/// (upstream: half the estimate plus one second).
pub fn recheck_after(estimate: i64) -> Duration {
    Duration::from_secs((estimate / 2 + 1).max(1) as u64)
}

/// `ns` without this controller's finalizer in `spec.finalizers`.
pub fn without_finalizer(ns: &Namespace) -> Namespace {
    let mut out = ns.clone();
    if let Some(f) = out.spec.as_mut().and_then(|s| s.finalizers.as_mut()) {
        f.retain(|f| f != FINALIZER);
    }
    out
}

async fn reconcile(ns: Arc<Namespace>, state: Arc<State>) -> Result<Action, Error> {
    if !is_deleting(&ns) {
        return Ok(Action::await_change());
    }
    let name = ns.metadata.name.clone().unwrap_or_default();
    let Some(mut latest) =
        state.api.get_opt(&name).await.map_err(|source| Error::Get { name: name.clone(), source })?
    else {
        return Ok(Action::await_change());
    };
    if !is_deleting(&latest) || !has_finalizer(&latest) {
        return Ok(Action::await_change());
    }
    let terminating = latest.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Terminating");
    if !terminating {
        latest.status.get_or_insert_with(Default::default).phase = Some("Terminating".into());
        latest = state
            .api
            .replace_status(&name, &PostParams::default(), &latest)
            .await
            .map_err(|source| Error::UpdatePhase { name: name.clone(), source })?;
    }
    let deleted_at = latest.metadata.deletion_timestamp.as_ref().map(|t| t.0).unwrap_or_else(jiff::Timestamp::now);
    let elapsed = jiff::Timestamp::now().duration_since(deleted_at).as_secs();
    let t = now();
    let outcome = deleter::delete_all_content(&state.content, &name, elapsed, &t).await;
    let mut with_conditions = latest.clone();
    if outcome.conditions.update(with_conditions.status.get_or_insert_with(Default::default), &t) {
        match state.api.replace_status(&name, &PostParams::default(), &with_conditions).await {
            Ok(updated) => latest = updated,
            Err(e) => tracing::warn!(namespace = %name, error = %chain(&e), "couldn't update status conditions"),
        }
    }
    if !outcome.errors.is_empty() {
        return Err(Error::Content { name, errors: outcome.errors });
    }
    if outcome.estimate > 0 {
        tracing::debug!(namespace = %name, estimate = outcome.estimate, "content remains");
        return Ok(Action::requeue(recheck_after(outcome.estimate)));
    }
    finalize(&state.api, &name, latest).await?;
    tracing::info!(namespace = %name, "namespace emptied and finalized");
    Ok(Action::await_change())
}

async fn finalize(api: &Api<Namespace>, name: &str, mut latest: Namespace) -> Result<(), Error> {
    loop {
        let body = without_finalizer(&latest);
        match api.replace_subresource("finalize", name, &PostParams::default(), &body).await {
            Ok(_) => return Ok(()),
            Err(e) if is_not_found(&e) => return Ok(()),
            Err(e) if is_conflict(&e) => {
                let uid = latest.metadata.uid.clone();
                match api.get_opt(name).await {
                    Ok(Some(fresh)) if fresh.metadata.uid == uid => latest = fresh,
                    Ok(_) => return Ok(()),
                    Err(source) => return Err(Error::Finalize { name: name.to_string(), source }),
                }
            }
            Err(source) => return Err(Error::Finalize { name: name.to_string(), source }),
        }
    }
}

fn error_policy(ns: Arc<Namespace>, err: &Error, state: Arc<State>) -> Action {
    let name = ns.metadata.name.clone().unwrap_or_default();
    tracing::warn!(namespace = %name, error = %chain(err), "namespace deletion failed; retrying");
    Action::requeue(state.failures.failed(&name))
}

pub async fn run(ctx: Arc<Context>) {
    let client = ctx.client.clone();
    let api: Api<Namespace> = Api::all(client.clone());
    let state = Arc::new(State {
        api: api.clone(),
        content: KubeContent { client: client.clone() },
        failures: Failures::new(BACKOFF),
    });
    let controller = Controller::new(api, watcher::Config::default());
    let namespaces = controller.store();
    // A pod of a terminating namespace changing (typically: going away) is the moment to look
    // again, rather than waiting out the grace-period estimate.
    let pods = watcher(Api::<PartialObjectMeta<Pod>>::all(client), watcher::Config::default())
        .default_backoff()
        .touched_objects();
    let cancel = ctx.cancel.clone();
    let grace = cancel.clone();
    controller
        .watches_stream(pods, move |pod| {
            let ns = pod.metadata.namespace.clone()?;
            let key = ObjectRef::<Namespace>::new(&ns);
            namespaces.get(&key).filter(|n| is_deleting(n)).map(|_| key)
        })
        .graceful_shutdown_on(async move { cancel.cancelled().await })
        .run(
            |ns, state: Arc<State>| {
                let state2 = state.clone();
                async move {
                    let name = ns.metadata.name.clone().unwrap_or_default();
                    let res = reconcile(ns, state2.clone()).await;
                    if res.is_ok() {
                        state2.failures.succeeded(&name);
                    }
                    res
                }
            },
            error_policy,
            state,
        )
        .take_until(k1s_runtime::controller::shutdown_grace_over(grace))
        .for_each(|_| futures::future::ready(()))
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NamespaceSpec;

    #[test]
    fn finalizing_removes_only_the_kubernetes_finalizer() {
        let ns = Namespace {
            spec: Some(NamespaceSpec { finalizers: Some(vec!["kubernetes".into(), "example.com/x".into()]) }),
            ..Default::default()
        };
        let out = without_finalizer(&ns);
        assert_eq!(out.spec.and_then(|s| s.finalizers), Some(vec!["example.com/x".to_string()]));
    }

    #[test]
    fn recheck_is_half_the_estimate_plus_a_second() {
        assert_eq!(recheck_after(30), Duration::from_secs(16));
        assert_eq!(recheck_after(15), Duration::from_secs(8));
        assert_eq!(recheck_after(0), Duration::from_secs(1));
    }
}
