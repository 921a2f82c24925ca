//! The disruption controller: keeps every PodDisruptionBudget's status (expected, current and
//! desired healthy pods, disruptions allowed, the `DisruptionAllowed` condition,
//! observedGeneration) in step with the pods it selects, which the API server's
//! `pods/eviction` reads; and clears a pod's stale `DisruptionTarget` condition when an evicted
//! pod was not deleted within two minutes.
//!
//! Scale comes from cached ReplicaSets, Deployments, ReplicationControllers and StatefulSets,
//! or from the `scale` subresource of any other owning kind.

pub mod status;

use crate::core::discovery::{split_api_version, ServedCache};
use crate::Context;
use futures::{Stream, StreamExt};
use jiff::Timestamp;
use k1s_api::errors::chain;
use k1s_api::selectors::Selector;
use k1s_runtime::api_error::{is_conflict, is_not_found};
use k1s_runtime::backoff::{Backoff, Failures};
use k1s_runtime::events::{reference, EventType};
use k1s_runtime::workqueue::WorkQueue;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use serde_json::json;
use status::ScaleLookup;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("budget {budget}: {message}")]
    Sync { budget: String, message: String },
    #[error("updating the status of budget {budget}")]
    UpdateStatus { budget: String, source: kube::Error },
}

/// The budget's selector: `None` selects nothing, an empty selector every pod.
fn selector(pdb: &PodDisruptionBudget) -> Result<Option<Selector>, String> {
    match pdb.spec.as_ref().and_then(|s| s.selector.as_ref()) {
        None => Ok(None),
        Some(ls) => Selector::from_object(ls).map(Some).map_err(|e| e.to_string()),
    }
}

struct State {
    ctx: Arc<Context>,
    pods: Store<Pod>,
    replica_sets: Store<ReplicaSet>,
    deployments: Store<Deployment>,
    controllers: Store<ReplicationController>,
    stateful_sets: Store<StatefulSet>,
    served: ServedCache,
    failures: Failures,
}

fn is_kind(r: &OwnerReference, kind: &str, groups: &[&str]) -> bool {
    r.kind == kind && groups.contains(&split_api_version(&r.api_version).0)
}

impl State {
    fn pods_of(&self, pdb: &PodDisruptionBudget) -> Result<Vec<Arc<Pod>>, String> {
        let Some(sel) = selector(pdb)? else { return Ok(Vec::new()) };
        let ns = pdb.metadata.namespace.clone();
        Ok(self.pods.state_filter(|p| {
            p.metadata.namespace == ns && sel.matches_map(p.metadata.labels.as_ref().unwrap_or(&BTreeMap::new()))
        }))
    }

    /// Upstream's finders, in order: ReplicaSet (not owned by a Deployment), Deployment through
    /// its ReplicaSet, ReplicationController, StatefulSet, then any kind's scale subresource.
    async fn scale_of(&self, r: &OwnerReference, ns: &str) -> Result<Option<(String, i32)>, String> {
        fn key<K: kube::Resource<DynamicType = ()>>(name: &str, ns: &str) -> ObjectRef<K> {
            ObjectRef::new(name).within(ns)
        }
        if is_kind(r, "ReplicaSet", &["apps", "extensions"]) {
            let Some(rs) =
                self.replica_sets.get(&key(&r.name, ns)).filter(|rs| rs.metadata.uid.as_deref() == Some(&r.uid))
            else {
                return Ok(None);
            };
            let owner = rs.metadata.owner_references.iter().flatten().find(|o| o.controller == Some(true));
            match owner {
                Some(d) if d.kind == "Deployment" => {
                    if !is_kind(d, "Deployment", &["apps", "extensions"]) {
                        return Ok(None);
                    }
                    let dep =
                        self.deployments.get(&key(&d.name, ns)).filter(|x| x.metadata.uid.as_deref() == Some(&d.uid));
                    return Ok(dep.map(|x| (d.uid.clone(), x.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1))));
                }
                _ => return Ok(Some((r.uid.clone(), rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)))),
            }
        }
        if is_kind(r, "ReplicationController", &[""]) {
            let rc = self.controllers.get(&key(&r.name, ns)).filter(|x| x.metadata.uid.as_deref() == Some(&r.uid));
            return Ok(rc.map(|x| (r.uid.clone(), x.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1))));
        }
        if is_kind(r, "StatefulSet", &["apps"]) {
            let ss = self.stateful_sets.get(&key(&r.name, ns)).filter(|x| x.metadata.uid.as_deref() == Some(&r.uid));
            return Ok(ss.map(|x| (r.uid.clone(), x.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1))));
        }
        let served = self.served.get(&self.ctx.client).await?;
        let Some(res) = served.resolve(&r.api_version, &r.kind).cloned() else {
            return Err(format!("no matches for kind {:?} in version {:?}", r.kind, r.api_version));
        };
        let api: Api<DynamicObject> = Api::namespaced_with(self.ctx.client.clone(), ns, &res.api);
        match api.get_subresource("scale", &r.name).await {
            Ok(scale) => {
                if scale.metadata.uid.as_deref() != Some(r.uid.as_str()) {
                    return Ok(None);
                }
                let replicas = scale.data.pointer("/spec/replicas").and_then(serde_json::Value::as_i64).unwrap_or(0);
                Ok(Some((r.uid.clone(), replicas as i32)))
            }
            Err(e) if is_not_found(&e) => {
                if res.subresources.iter().any(|s| s == "scale") {
                    Ok(None)
                } else {
                    Err(format!("{}.{} does not implement the scale subresource", res.api.plural, res.api.group))
                }
            }
            Err(e) => Err(chain(&e)),
        }
    }

    async fn event(&self, pdb: &PodDisruptionBudget, kind: EventType, reason: &str, message: &str) {
        let r = reference(
            "policy/v1",
            "PodDisruptionBudget",
            pdb.metadata.namespace.as_deref(),
            pdb.metadata.name.as_deref().unwrap_or(""),
            pdb.metadata.uid.as_deref(),
        );
        self.ctx.recorder.record(&r, kind, reason, message).await;
    }

    async fn write_status(
        &self,
        pdb: &PodDisruptionBudget,
        status: k8s_openapi::api::policy::v1::PodDisruptionBudgetStatus,
    ) -> Result<(), kube::Error> {
        let ns = pdb.metadata.namespace.clone().unwrap_or_default();
        let mut updated = pdb.clone();
        updated.status = Some(status);
        let api: Api<PodDisruptionBudget> = Api::namespaced(self.ctx.client.clone(), &ns);
        api.replace_status(pdb.metadata.name.as_deref().unwrap_or(""), &PostParams::default(), &updated)
            .await
            .map(|_| ())
    }
}

/// Upstream's `trySync`; returns when to check again (disrupted pods timing out).
async fn try_sync(pdb: &PodDisruptionBudget, state: &State) -> Result<Option<Duration>, String> {
    let pods = state.pods_of(pdb)?;
    if pods.is_empty() {
        state.event(pdb, EventType::Normal, "NoPods", "No matching pods found").await;
    }
    let refs: Vec<&Pod> = pods.iter().map(|p| &**p).collect();
    let ns = pdb.metadata.namespace.clone().unwrap_or_default();
    let mut scales = ScaleLookup::new();
    if status::needs_scale(pdb) {
        for p in &refs {
            if let Some(r) = status::controller_of(p) {
                if !scales.contains_key(&r.uid) {
                    let found = state.scale_of(r, &ns).await;
                    scales.insert(r.uid.clone(), found);
                }
            }
        }
    }
    let (expected, desired, unmanaged) = match status::expected_pod_count(pdb, &refs, &scales) {
        Ok(x) => x,
        Err(e) => {
            let msg = format!("Failed to calculate the number of expected pods: {e}");
            state.event(pdb, EventType::Warning, "CalculateExpectedPodCountFailed", &msg).await;
            return Err(e);
        }
    };
    if !unmanaged.is_empty() {
        let sel = pdb.spec.as_ref().and_then(|s| s.selector.as_ref()).map(|s| format!("{s:?}")).unwrap_or_default();
        let msg = format!(
            "Pods selected by this PodDisruptionBudget (selector: {sel}) were found to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. To account for these pods please set \".spec.minAvailable\" field of the PDB to an integer value."
        );
        state.event(pdb, EventType::Warning, "UnmanagedPods", &msg).await;
    }
    let now = Timestamp::now();
    let (disrupted, recheck) = status::disrupted_pods(pdb, &refs, now);
    let healthy = status::count_healthy(&refs, &disrupted, now);
    if let Some(new) = status::new_status(pdb, healthy, desired, expected, disrupted, now) {
        state.write_status(pdb, new).await.map_err(
            |e| {
                if is_conflict(&e) {
                    "conflict".to_string()
                } else {
                    chain(&e)
                }
            },
        )?;
    }
    Ok(recheck.map(|r| r.duration_since(now).unsigned_abs()))
}

async fn reconcile(pdb: Arc<PodDisruptionBudget>, state: Arc<State>) -> Result<Action, Error> {
    let key =
        format!("{}/{}", pdb.metadata.namespace.as_deref().unwrap_or(""), pdb.metadata.name.as_deref().unwrap_or(""));
    match try_sync(&pdb, &state).await {
        Ok(recheck) => {
            state.failures.succeeded(&key);
            Ok(recheck.map_or_else(Action::await_change, Action::requeue))
        }
        // A conflict retries without failing safe.
        Err(message) if message == "conflict" => Err(Error::Sync { budget: key, message }),
        Err(message) => {
            let status = status::fail_safe(&pdb, &message, Timestamp::now());
            state
                .write_status(&pdb, status)
                .await
                .map_err(|source| Error::UpdateStatus { budget: key.clone(), source })?;
            Err(Error::Sync { budget: key, message })
        }
    }
}

fn error_policy(pdb: Arc<PodDisruptionBudget>, err: &Error, state: Arc<State>) -> Action {
    let key =
        format!("{}/{}", pdb.metadata.namespace.as_deref().unwrap_or(""), pdb.metadata.name.as_deref().unwrap_or(""));
    tracing::warn!(budget = %key, error = %chain(err), "disruption budget sync failed; retrying");
    Action::requeue(state.failures.failed(&key))
}

/// Clears the stale `DisruptionTarget` condition of the pod `key` once it is due.
async fn clean_stale_disruption(state: &State, key: &str, queue: &WorkQueue<String>) -> Result<(), kube::Error> {
    let (ns, name) = key.split_once('/').unwrap_or(("", key));
    let Some(p) = state.pods.get(&ObjectRef::new(name).within(ns)) else { return Ok(()) };
    let Some(wait) = status::stale_disruption_in(&p, Timestamp::now()) else { return Ok(()) };
    if wait.is_positive() {
        queue.add_after(key.to_string(), wait.unsigned_abs());
        return Ok(());
    }
    let patch = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "resourceVersion": p.metadata.resource_version},
        "status": {"conditions": [{"type": "DisruptionTarget", "status": "False", "lastTransitionTime": Time(Timestamp::now())}]},
    });
    let params = PatchParams::apply("disruption-controller").force();
    match Api::<Pod>::namespaced(state.ctx.client.clone(), ns).patch_status(name, &params, &Patch::Apply(&patch)).await
    {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e),
    }
}

fn inform<K>(
    writer: reflector::store::Writer<K>,
    api: Api<K>,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    reflector::reflector(writer, watcher(api, watcher::Config::default())).default_backoff()
}

/// Drains a cache-only reflector until cancelled.
async fn keep_cached<K>(writer: reflector::store::Writer<K>, api: Api<K>)
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    let mut s = inform(writer, api).boxed();
    while let Some(ev) = s.next().await {
        if let Err(e) = ev {
            tracing::debug!(error = %chain(&e), "watch failed; retrying");
        }
    }
}

pub async fn run(ctx: Arc<Context>) {
    let client = ctx.client.clone();
    let (pods, pod_w) = reflector::store::<Pod>();
    let (replica_sets, rs_w) = reflector::store::<ReplicaSet>();
    let (deployments, dep_w) = reflector::store::<Deployment>();
    let (controllers, rc_w) = reflector::store::<ReplicationController>();
    let (stateful_sets, ss_w) = reflector::store::<StatefulSet>();
    let mut tasks = vec![
        tokio::spawn(keep_cached(rs_w, Api::all(client.clone()))),
        tokio::spawn(keep_cached(dep_w, Api::all(client.clone()))),
        tokio::spawn(keep_cached(rc_w, Api::all(client.clone()))),
        tokio::spawn(keep_cached(ss_w, Api::all(client.clone()))),
    ];
    let state = Arc::new(State {
        ctx: ctx.clone(),
        pods: pods.clone(),
        replica_sets: replica_sets.clone(),
        deployments: deployments.clone(),
        controllers: controllers.clone(),
        stateful_sets: stateful_sets.clone(),
        served: ServedCache::default(),
        failures: Failures::new(Backoff::DEFAULT),
    });
    // Pod changes reach the budgets selecting them through this channel.
    let (tx, rx) = mpsc::unbounded_channel::<ObjectRef<PodDisruptionBudget>>();
    let triggers = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|r| (r, rx)) });
    let controller = Controller::new(Api::<PodDisruptionBudget>::all(client.clone()), watcher::Config::default())
        .reconcile_on(triggers);
    let budgets = controller.store();
    let stale = Arc::new(WorkQueue::<String>::new(Backoff::DEFAULT));
    {
        let budgets = budgets.clone();
        let stale = stale.clone();
        let mut events = inform(pod_w, Api::<Pod>::all(client.clone())).boxed();
        let last_budgets: Arc<Mutex<BTreeMap<String, Vec<ObjectRef<PodDisruptionBudget>>>>> = Arc::default();
        tasks.push(tokio::spawn(async move {
            while let Some(ev) = events.next().await {
                let (p, deleted) = match ev {
                    Ok(watcher::Event::Apply(p)) | Ok(watcher::Event::InitApply(p)) => (p, false),
                    Ok(watcher::Event::Delete(p)) => (p, true),
                    Ok(_) => continue,
                    Err(e) => {
                        tracing::debug!(error = %chain(&e), "pod watch failed; retrying");
                        continue;
                    }
                };
                let ns = p.metadata.namespace.clone();
                let key = format!("{}/{}", ns.as_deref().unwrap_or(""), p.metadata.name.as_deref().unwrap_or(""));
                let labels = p.metadata.labels.clone().unwrap_or_default();
                let now: Vec<ObjectRef<PodDisruptionBudget>> = budgets
                    .state()
                    .iter()
                    .filter(|b| b.metadata.namespace == ns)
                    .filter(|b| selector(b).ok().flatten().is_some_and(|s| s.matches_map(&labels)))
                    .map(|b| ObjectRef::from_obj(&**b))
                    .collect();
                let before = {
                    let mut m = last_budgets.lock().unwrap_or_else(|e| e.into_inner());
                    if deleted {
                        m.remove(&key)
                    } else {
                        m.insert(key.clone(), now.clone())
                    }
                };
                for r in now.into_iter().chain(before.into_iter().flatten()) {
                    let _ = tx.send(r);
                }
                if !deleted && status::stale_disruption_in(&p, Timestamp::now()).is_some() {
                    stale.add(key);
                }
            }
        }));
    }
    {
        let state = state.clone();
        let stale = stale.clone();
        tasks.push(tokio::spawn(async move {
            while let Some(key) = stale.get().await {
                match clean_stale_disruption(&state, &key, &stale).await {
                    Ok(()) => stale.forget(&key),
                    Err(e) => {
                        tracing::warn!(pod = %key, error = %chain(&e), "clearing a stale DisruptionTarget condition failed");
                        stale.add_rate_limited(key.clone());
                    }
                }
                stale.done(&key);
            }
        }));
    }
    let cancel = ctx.cancel.clone();
    let grace = cancel.clone();
    let ready = {
        let (p, r, d, c, s) =
            (pods.clone(), replica_sets.clone(), deployments.clone(), controllers.clone(), stateful_sets.clone());
        async move {
            let _ = tokio::join!(
                p.wait_until_ready(),
                r.wait_until_ready(),
                d.wait_until_ready(),
                c.wait_until_ready(),
                s.wait_until_ready()
            );
        }
    };
    tokio::select! {
        _ = cancel.cancelled() => {}
        _ = ready => {
            controller
                .graceful_shutdown_on(async move { cancel.cancelled().await })
                .run(reconcile, error_policy, state)
                .take_until(k1s_runtime::controller::shutdown_grace_over(grace))
                .for_each(|_| futures::future::ready(()))
                .await;
        }
    }
    stale.shut_down();
    for t in tasks {
        t.abort();
    }
}
