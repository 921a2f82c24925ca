//! The ReplicaSet controller, and the ReplicationController controller which runs the same
//! logic on the core kind (upstream `pkg/controller/replicaset`): keep `spec.replicas` active
//! pods matching the selector, adopting orphans and releasing pods that stopped matching;
//! create pods from the template with `generateName` in slow-start batches (1, 2, 4, …),
//! delete the pods least worth keeping first, and report status counters
//! (`replicas`, `fullyLabeledReplicas`, `readyReplicas`, `availableReplicas`,
//! `terminatingReplicas`, `observedGeneration`, the `ReplicaFailure` condition).
//!
//! Decisions are pure functions of the owner, its pods and `now` ([`manage`],
//! [`calculate_status`]); [`reconcile`] gathers the inputs from the informer caches and carries
//! the decisions out through the API.

use crate::workloads::events::Batch;
use crate::workloads::expectations::{self, Expectations};
use crate::workloads::{owner, pods, time};
use crate::Context;
use futures::future::join_all;
use jiff::Timestamp;
use k1s_api::selectors;
use k1s_runtime::api_error::is_namespace_terminating;
use k1s_runtime::controller::reconcile_loop;
use k1s_runtime::events::{object_reference, Recorder};
use k1s_runtime::informer;
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetCondition, ReplicaSetStatus};
use k8s_openapi::api::core::v1::{
    Pod, PodTemplateSpec, ReplicationController, ReplicationControllerCondition, ReplicationControllerStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::NamespaceResourceScope;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::Resource;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

/// At most this many pods are created or deleted per sync (`burstReplicas`).
pub const BURST_REPLICAS: usize = 500;

/// What both replicated kinds look like to the controller.
pub trait Replicated:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Serialize
    + DeserializeOwned
    + Debug
    + Send
    + Sync
    + 'static
{
    /// The event source and log name.
    const COMPONENT: &'static str;
    /// Whether `status.terminatingReplicas` exists for this kind.
    const TRACK_TERMINATING: bool;
    fn replicas(&self) -> i32;
    fn min_ready_seconds(&self) -> i32;
    fn label_selector(&self) -> Option<LabelSelector>;
    fn template(&self) -> Option<&PodTemplateSpec>;
    fn current_status(&self) -> ReplicaSetStatus;
    fn set_status(&mut self, status: ReplicaSetStatus);
}

impl Replicated for ReplicaSet {
    const COMPONENT: &'static str = "replicaset-controller";
    const TRACK_TERMINATING: bool = true;
    fn replicas(&self) -> i32 {
        self.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
    }
    fn min_ready_seconds(&self) -> i32 {
        self.spec.as_ref().and_then(|s| s.min_ready_seconds).unwrap_or(0)
    }
    fn label_selector(&self) -> Option<LabelSelector> {
        self.spec.as_ref().map(|s| s.selector.clone())
    }
    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref().and_then(|s| s.template.as_ref())
    }
    fn current_status(&self) -> ReplicaSetStatus {
        self.status.clone().unwrap_or_default()
    }
    fn set_status(&mut self, status: ReplicaSetStatus) {
        self.status = Some(status);
    }
}

impl Replicated for ReplicationController {
    const COMPONENT: &'static str = "replication-controller";
    const TRACK_TERMINATING: bool = false;
    fn replicas(&self) -> i32 {
        self.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
    }
    fn min_ready_seconds(&self) -> i32 {
        self.spec.as_ref().and_then(|s| s.min_ready_seconds).unwrap_or(0)
    }
    fn label_selector(&self) -> Option<LabelSelector> {
        // A ReplicationController selects by equality only; no selector selects nothing.
        let labels = self.spec.as_ref().and_then(|s| s.selector.clone())?;
        Some(LabelSelector { match_labels: Some(labels), match_expressions: None })
    }
    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref().and_then(|s| s.template.as_ref())
    }
    fn current_status(&self) -> ReplicaSetStatus {
        let s = self.status.clone().unwrap_or_default();
        ReplicaSetStatus {
            available_replicas: s.available_replicas,
            conditions: s.conditions.map(|cs| {
                cs.into_iter()
                    .map(|c| ReplicaSetCondition {
                        last_transition_time: c.last_transition_time,
                        message: c.message,
                        reason: c.reason,
                        status: c.status,
                        type_: c.type_,
                    })
                    .collect()
            }),
            fully_labeled_replicas: s.fully_labeled_replicas,
            observed_generation: s.observed_generation,
            ready_replicas: s.ready_replicas,
            replicas: s.replicas,
            terminating_replicas: None,
        }
    }
    fn set_status(&mut self, s: ReplicaSetStatus) {
        self.status = Some(ReplicationControllerStatus {
            available_replicas: s.available_replicas,
            conditions: s.conditions.map(|cs| {
                cs.into_iter()
                    .map(|c| ReplicationControllerCondition {
                        last_transition_time: c.last_transition_time,
                        message: c.message,
                        reason: c.reason,
                        status: c.status,
                        type_: c.type_,
                    })
                    .collect()
            }),
            fully_labeled_replicas: s.fully_labeled_replicas,
            observed_generation: s.observed_generation,
            ready_replicas: s.ready_replicas,
            replicas: s.replicas,
        });
    }
}

/// What to do about the number of pods.
#[derive(Debug, PartialEq, Eq)]
pub enum Manage {
    Nothing,
    /// Create this many pods.
    Create(usize),
    /// Delete these pods (by name), in this order.
    Delete(Vec<String>),
}

/// `manageReplicas`' decision: create the missing pods or delete the surplus, at most
/// [`BURST_REPLICAS`] at a time. `related` are the active pods of all sibling ReplicaSets (same
/// controller), used to prefer deleting pods doubled up on a node.
pub fn manage(desired: i32, active: &[&Pod], related: &[&Pod], now: Timestamp) -> Manage {
    let desired = usize::try_from(desired).unwrap_or(0);
    if active.len() < desired {
        return Manage::Create((desired - active.len()).min(BURST_REPLICAS));
    }
    if active.len() > desired {
        let n = (active.len() - desired).min(BURST_REPLICAS);
        return Manage::Delete(
            pods_to_delete(active, related, n, now)
                .into_iter()
                .map(|p| p.metadata.name.clone().unwrap_or_default())
                .collect(),
        );
    }
    Manage::Nothing
}

/// `getPodsToDelete`: the `n` pods to delete first.
pub fn pods_to_delete<'a>(active: &[&'a Pod], related: &[&Pod], n: usize, now: Timestamp) -> Vec<&'a Pod> {
    if n >= active.len() {
        return active.to_vec();
    }
    let ranks = pods::colocation_ranks(active, related);
    let mut ranked: Vec<(&Pod, usize)> = active.iter().copied().zip(ranks).collect();
    ranked.sort_by(|(a, ra), (b, rb)| pods::deletion_order(a, *ra, b, *rb, now));
    ranked.into_iter().take(n).map(|(p, _)| p).collect()
}

/// Batch sizes of slow-start creation: 1, 2, 4, … up to `n` in total.
pub fn slow_start_batches(n: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let (mut left, mut size) = (n, 1usize);
    while left > 0 {
        let b = size.min(left);
        out.push(b);
        left -= b;
        size = size.saturating_mul(2);
    }
    out
}

/// Why `manageReplicas` failed, for the `ReplicaFailure` condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManageError {
    pub message: String,
}

/// `calculateStatus`: the status counters from the active (and terminating) pods.
pub fn calculate_status<K: Replicated>(
    rs: &K,
    active: &[&Pod],
    terminating: usize,
    manage_error: Option<&ManageError>,
    now: Timestamp,
) -> ReplicaSetStatus {
    let mut status = rs.current_status();
    let template_labels = rs.template().and_then(|t| t.metadata.as_ref()).and_then(|m| m.labels.as_ref());
    let min_ready = rs.min_ready_seconds();
    let fully = active.iter().filter(|p| selectors::set_matches(template_labels, p.metadata.labels.as_ref())).count();
    let ready = active.iter().filter(|p| pods::is_ready(p)).count();
    let available = active.iter().filter(|p| pods::is_available(p, min_ready, now)).count();
    let has_failure = status.conditions.iter().flatten().any(|c| c.type_ == "ReplicaFailure");
    match manage_error {
        Some(err) if !has_failure => {
            let diff = i64::try_from(active.len()).unwrap_or(i64::MAX) - i64::from(rs.replicas());
            let reason = if diff < 0 {
                "FailedCreate"
            } else if diff > 0 {
                "FailedDelete"
            } else {
                ""
            };
            status.conditions.get_or_insert_with(Vec::new).push(ReplicaSetCondition {
                type_: "ReplicaFailure".into(),
                status: "True".into(),
                reason: Some(reason.into()),
                message: Some(err.message.clone()),
                last_transition_time: Some(time::api_time(now)),
            });
        }
        None if has_failure => {
            if let Some(cs) = status.conditions.as_mut() {
                cs.retain(|c| c.type_ != "ReplicaFailure");
            }
        }
        _ => {}
    }
    if status.conditions.as_ref().is_some_and(Vec::is_empty) {
        status.conditions = None;
    }
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    status.replicas = count(active.len());
    status.fully_labeled_replicas = Some(count(fully));
    status.ready_replicas = Some(count(ready));
    status.available_replicas = Some(count(available));
    status.terminating_replicas = K::TRACK_TERMINATING.then(|| count(terminating));
    status
}

/// `updateReplicaSetStatus`' steady-state check: whether `new` must be written.
pub fn status_needs_update(current: &ReplicaSetStatus, new: &ReplicaSetStatus, generation: i64) -> bool {
    let n = |v: Option<i32>| v.unwrap_or(0);
    current.replicas != new.replicas
        || n(current.fully_labeled_replicas) != n(new.fully_labeled_replicas)
        || n(current.ready_replicas) != n(new.ready_replicas)
        || n(current.available_replicas) != n(new.available_replicas)
        || current.terminating_replicas != new.terminating_replicas
        || current.observed_generation.unwrap_or(0) != generation
        || current.conditions.clone().unwrap_or_default() != new.conditions.clone().unwrap_or_default()
}

/// When to look again although nothing changes: a ready pod becomes available after
/// `minReadySeconds`.
pub fn requeue_after<K: Replicated>(rs: &K, active: &[&Pod], now: Timestamp) -> Option<Duration> {
    active.iter().filter_map(|p| pods::until_available(p, rs.min_ready_seconds(), now)).min()
}

/// Errors of one sync.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{kind} {namespace}/{name}: claiming pods: {error}")]
    Claim { kind: String, namespace: String, name: String, error: owner::ClaimError },
    #[error("{kind} {namespace}/{name}: creating pods: {error}")]
    CreatePods { kind: String, namespace: String, name: String, error: kube::Error },
    #[error("{kind} {namespace}/{name}: deleting pods: {error}")]
    DeletePods { kind: String, namespace: String, name: String, error: kube::Error },
    #[error("{kind} {namespace}/{name}: updating status: {error}")]
    UpdateStatus { kind: String, namespace: String, name: String, error: kube::Error },
}

/// The controller's state shared by reconciles and informer handlers.
pub struct Controller<K: Replicated> {
    client: kube::Client,
    recorder: Recorder,
    pods: Store<Pod>,
    owners: Store<K>,
    expectations: Arc<Expectations>,
}

fn kind<K: Replicated>() -> String {
    K::kind(&()).into_owned()
}

/// Keys of the owners a pod change concerns, and expectation bookkeeping, like upstream's
/// `addPod`/`updatePod`/`deletePod`.
fn on_pod_change<K: Replicated>(
    old: Option<&Pod>,
    new: Option<&Pod>,
    owners: &Store<K>,
    exp: &Expectations,
    queue: &informer::Queue<K>,
) {
    let resolve = |pod: &Pod| informer::controller_in(owners, &pod.metadata);
    let enqueue_matching = |pod: &Pod| {
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        for o in informer::list_in(owners, ns, |o| {
            selectors::matches(o.label_selector().as_ref(), pod.metadata.labels.as_ref())
        }) {
            queue.add_obj(&o);
        }
    };
    let key_of = |o: &K| expectations::key(o.meta().namespace.as_deref(), o.meta().name.as_deref().unwrap_or_default());
    let pod_key =
        |p: &Pod| expectations::key(p.metadata.namespace.as_deref(), p.metadata.name.as_deref().unwrap_or_default());
    match (old, new) {
        (None, Some(pod)) => {
            if let Some(o) = resolve(pod) {
                exp.creation_observed(&key_of(&o));
                if pod.metadata.deletion_timestamp.is_some() {
                    exp.deletion_observed(&key_of(&o), &pod_key(pod));
                }
                queue.add_obj(&o);
            } else if owner::controller_of(&pod.metadata).is_none() {
                enqueue_matching(pod);
            }
        }
        (Some(old), Some(cur)) => {
            if old.metadata.resource_version == cur.metadata.resource_version {
                return;
            }
            let labels_changed = old.metadata.labels != cur.metadata.labels;
            if cur.metadata.deletion_timestamp.is_some() && old.metadata.deletion_timestamp.is_none() {
                if let Some(o) = resolve(cur) {
                    exp.deletion_observed(&key_of(&o), &pod_key(cur));
                }
            }
            let old_ref = owner::controller_of(&old.metadata).map(|r| r.uid.clone());
            let cur_ref = owner::controller_of(&cur.metadata).map(|r| r.uid.clone());
            if old_ref != cur_ref {
                if let Some(o) = resolve(old) {
                    queue.add_obj(&o);
                }
            }
            if let Some(o) = resolve(cur) {
                queue.add_obj(&o);
            } else if cur_ref.is_none() && (labels_changed || old_ref != cur_ref) {
                enqueue_matching(cur);
            }
        }
        (Some(pod), None) => {
            if let Some(o) = resolve(pod) {
                exp.deletion_observed(&key_of(&o), &pod_key(pod));
                queue.add_obj(&o);
            }
        }
        (None, None) => {}
    }
}

/// Runs the ReplicaSet and ReplicationController controllers until `ctx.cancel` fires.
pub async fn run(ctx: Arc<Context>) {
    let client = ctx.client.clone();
    let Some(rs) = Owners::<ReplicaSet>::start(&ctx).await else { return };
    let Some(rc) = Owners::<ReplicationController>::start(&ctx).await else { return };
    // One pod informer serves both kinds.
    let (rs_h, rc_h) = (rs.handles(), rc.handles());
    let Some(pods) = informer::start(
        "pods",
        Api::<Pod>::all(client.clone()),
        watcher::Config::default(),
        move |old: Option<&Pod>, new: Option<&Pod>| {
            on_pod_change(old, new, &rs_h.0, &rs_h.1, &rs_h.2);
            on_pod_change(old, new, &rc_h.0, &rc_h.1, &rc_h.2);
        },
        ctx.cancel.clone(),
    )
    .await
    else {
        return;
    };
    tokio::join!(rs.run(&ctx, pods.clone()), rc.run(&ctx, pods));
}

/// The owner informer, queue and expectations of one kind, before its pod informer exists.
struct Owners<K: Replicated> {
    store: Store<K>,
    queue: informer::Queue<K>,
    triggers: futures::channel::mpsc::UnboundedReceiver<kube::runtime::reflector::ObjectRef<K>>,
    expectations: Arc<Expectations>,
}

impl<K: Replicated> Owners<K> {
    async fn start(ctx: &Context) -> Option<Owners<K>> {
        let (queue, triggers) = informer::Queue::<K>::new();
        let expectations = Arc::new(Expectations::default());
        let (q, exp) = (queue.clone(), expectations.clone());
        let store = informer::start(
            K::COMPONENT,
            Api::<K>::all(ctx.client.clone()),
            watcher::Config::default(),
            move |old: Option<&K>, new: Option<&K>| match (old, new) {
                (_, Some(o)) => q.add_obj(o),
                (Some(o), None) => exp.forget(&expectations::key(
                    o.meta().namespace.as_deref(),
                    o.meta().name.as_deref().unwrap_or_default(),
                )),
                (None, None) => {}
            },
            ctx.cancel.clone(),
        )
        .await?;
        Some(Owners { store, queue, triggers, expectations })
    }

    fn handles(&self) -> (Store<K>, Arc<Expectations>, informer::Queue<K>) {
        (self.store.clone(), self.expectations.clone(), self.queue.clone())
    }

    async fn run(self, ctx: &Context, pods: Store<Pod>) {
        let controller = Arc::new(Controller {
            client: ctx.client.clone(),
            recorder: Recorder::new(ctx.client.clone(), K::COMPONENT, None),
            pods,
            owners: self.store.clone(),
            expectations: self.expectations,
        });
        reconcile_loop(K::COMPONENT, self.store, self.triggers, controller, reconcile::<K>, ctx.cancel.clone()).await;
    }
}

/// One sync of one ReplicaSet (or ReplicationController).
pub async fn reconcile<K: Replicated>(rs: Arc<K>, ctl: Arc<Controller<K>>) -> Result<Action, Error> {
    let now = Timestamp::now();
    let meta = rs.meta();
    let ns = meta.namespace.clone().unwrap_or_default();
    let name = meta.name.clone().unwrap_or_default();
    let key = expectations::key(Some(&ns), &name);
    let needs_sync = ctl.expectations.satisfied(&key);
    let sel = rs.label_selector();
    let uid = meta.uid.clone().unwrap_or_default();

    let in_ns = informer::list_in(&ctl.pods, &ns, |_| true);
    let candidates: Vec<Arc<Pod>> = in_ns.iter().filter(|p| pods::is_active(p)).cloned().collect();
    let terminating = in_ns
        .iter()
        .filter(|p| {
            pods::is_terminating(p)
                && owner::is_controlled_by(&p.metadata, &uid)
                && selectors::matches(sel.as_ref(), p.metadata.labels.as_ref())
        })
        .count();
    let pod_api: Api<Pod> = Api::namespaced(ctl.client.clone(), &ns);
    let owner_api: Api<K> = Api::namespaced(ctl.client.clone(), &ns);
    let owned = owner::claim_all(
        &*rs,
        &owner_api,
        &pod_api,
        candidates,
        |p| selectors::matches(sel.as_ref(), p.metadata.labels.as_ref()),
        None,
    )
    .await
    .map_err(|error| Error::Claim { kind: kind::<K>(), namespace: ns.clone(), name: name.clone(), error })?;
    let active: Vec<&Pod> = owned.iter().map(|p| &**p).collect();

    // Sibling pods: active pods of every ReplicaSet with the same controller (deployment).
    let related: Vec<Arc<Pod>> = match owner::controller_of(meta) {
        Some(parent) => {
            let siblings: Vec<String> =
                informer::list_in(&ctl.owners, &ns, |o| owner::is_controlled_by(o.meta(), &parent.uid))
                    .into_iter()
                    .filter_map(|o| o.meta().uid.clone())
                    .collect();
            in_ns
                .iter()
                .filter(|p| {
                    pods::is_active(p) && owner::controller_of(&p.metadata).is_some_and(|r| siblings.contains(&r.uid))
                })
                .cloned()
                .collect()
        }
        None => owned.clone(),
    };
    let related: Vec<&Pod> = related.iter().map(|p| &**p).collect();

    let mut manage_error = None;
    let mut first_error = None;
    if needs_sync && meta.deletion_timestamp.is_none() {
        match manage(rs.replicas(), &active, &related, now) {
            Manage::Nothing => {}
            Manage::Create(n) => {
                if let Err(e) = create_pods(&*rs, &ctl, &pod_api, &key, n).await {
                    manage_error = Some(ManageError { message: e.to_string() });
                    first_error = Some(Error::CreatePods {
                        kind: kind::<K>(),
                        namespace: ns.clone(),
                        name: name.clone(),
                        error: e,
                    });
                }
            }
            Manage::Delete(names) => {
                if let Err(e) = delete_pods(&*rs, &ctl, &pod_api, &key, &ns, names).await {
                    manage_error = Some(ManageError { message: e.to_string() });
                    first_error = Some(Error::DeletePods {
                        kind: kind::<K>(),
                        namespace: ns.clone(),
                        name: name.clone(),
                        error: e,
                    });
                }
            }
        }
    }

    let status = calculate_status(&*rs, &active, terminating, manage_error.as_ref(), now);
    let generation = meta.generation.unwrap_or(0);
    if status_needs_update(&rs.current_status(), &status, generation) {
        let mut updated = (*rs).clone();
        let mut s = status;
        s.observed_generation = Some(generation);
        updated.set_status(s);
        if let Err(error) = owner_api.replace_status(&name, &PostParams::default(), &updated).await {
            if first_error.is_none() {
                first_error = Some(Error::UpdateStatus { kind: kind::<K>(), namespace: ns, name, error });
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    Ok(match requeue_after(&*rs, &active, now) {
        Some(d) => Action::requeue(d),
        None => Action::await_change(),
    })
}

async fn create_pods<K: Replicated>(
    rs: &K,
    ctl: &Controller<K>,
    api: &Api<Pod>,
    key: &str,
    n: usize,
) -> Result<(), kube::Error> {
    let Some(template) = rs.template() else { return Ok(()) };
    let meta = rs.meta();
    let name = meta.name.clone().unwrap_or_default();
    let ns = meta.namespace.clone().unwrap_or_default();
    ctl.expectations.expect_creations(key, n);
    let pod = pods::from_template(template, &ns, None, Some(format!("{name}-")), owner::controller_ref(rs));
    let pp = PostParams::default();
    let mut events = Batch::default();
    let mut done = 0;
    let mut error = None;
    for batch in slow_start_batches(n) {
        let results = join_all((0..batch).map(|_| api.create(&pp, &pod))).await;
        for r in results {
            match r {
                Ok(p) => {
                    events.normal("SuccessfulCreate", format!("Created pod: {}", p.metadata.name.unwrap_or_default()))
                }
                Err(e) => {
                    ctl.expectations.creation_observed(key);
                    if is_namespace_terminating(&e) {
                        continue;
                    }
                    events.warning("FailedCreate", format!("Error creating: {e}"));
                    error.get_or_insert(e);
                }
            }
        }
        done += batch;
        if error.is_some() {
            // Pods never attempted are not expected either.
            for _ in done..n {
                ctl.expectations.creation_observed(key);
            }
            break;
        }
    }
    events.record(&ctl.recorder, &object_reference(rs)).await;
    error.map_or(Ok(()), Err)
}

async fn delete_pods<K: Replicated>(
    rs: &K,
    ctl: &Controller<K>,
    api: &Api<Pod>,
    key: &str,
    ns: &str,
    names: Vec<String>,
) -> Result<(), kube::Error> {
    let keys: Vec<String> = names.iter().map(|n| expectations::key(Some(ns), n)).collect();
    ctl.expectations.expect_deletions(key, keys.clone());
    let dp = DeleteParams::default();
    let results = join_all(names.iter().map(|n| api.delete(n, &dp))).await;
    let mut events = Batch::default();
    let mut error = None;
    for ((n, k), r) in names.iter().zip(keys).zip(results) {
        match r {
            Ok(_) => events.normal("SuccessfulDelete", format!("Deleted pod: {n}")),
            Err(e) => {
                ctl.expectations.deletion_observed(key, &k);
                if matches!(&e, kube::Error::Api(s) if s.code == 404) {
                    continue;
                }
                events.warning("FailedDelete", format!("Error deleting: {e}"));
                error.get_or_insert(e);
            }
        }
    }
    events.record(&ctl.recorder, &object_reference(rs)).await;
    error.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::pods::tests::{pod, ts};
    use k8s_openapi::api::apps::v1::ReplicaSetSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    const NOW: &str = "2024-05-01T12:00:00Z";

    fn rs(replicas: i32, min_ready: i32) -> ReplicaSet {
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("ns".into()),
                generation: Some(2),
                ..Default::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(replicas),
                min_ready_seconds: Some(min_ready),
                selector: LabelSelector {
                    match_labels: Some([("app".into(), "web".into())].into()),
                    ..Default::default()
                },
                template: Some(PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some([("app".into(), "web".into()), ("tier".into(), "f".into())].into()),
                        ..Default::default()
                    }),
                    spec: None,
                }),
            }),
            status: None,
        }
    }

    fn labeled(mut p: Pod, full: bool) -> Pod {
        let mut l: std::collections::BTreeMap<String, String> = [("app".into(), "web".into())].into();
        if full {
            l.insert("tier".into(), "f".into());
        }
        p.metadata.labels = Some(l);
        p
    }

    #[test]
    fn missing_pods_are_created_capped_at_the_burst_limit() {
        let a = pod("a", "n", "Running", None, NOW);
        assert_eq!(manage(3, &[&a], &[&a], ts(NOW)), Manage::Create(2));
        assert_eq!(manage(1000, &[], &[], ts(NOW)), Manage::Create(BURST_REPLICAS));
        assert_eq!(manage(1, &[&a], &[&a], ts(NOW)), Manage::Nothing);
    }

    #[test]
    fn surplus_pods_are_deleted_not_ready_and_newest_first() {
        let ready = pod("ready", "n", "Running", Some("2024-05-01T10:00:00Z"), "2024-05-01T09:00:00Z");
        let old = pod("old", "n", "Running", None, "2024-05-01T08:00:00Z");
        let new = pod("new", "n", "Running", None, "2024-05-01T11:30:00Z");
        let all = [&ready, &old, &new];
        assert_eq!(manage(1, &all, &all, ts(NOW)), Manage::Delete(vec!["new".into(), "old".into()]));
        assert_eq!(manage(0, &all, &all, ts(NOW)), Manage::Delete(vec!["ready".into(), "old".into(), "new".into()]));
    }

    #[test]
    fn slow_start_doubles_batches() {
        assert_eq!(slow_start_batches(0), Vec::<usize>::new());
        assert_eq!(slow_start_batches(1), [1]);
        assert_eq!(slow_start_batches(10), [1, 2, 4, 3]);
        assert_eq!(slow_start_batches(15), [1, 2, 4, 8]);
    }

    #[test]
    fn status_counts_fully_labeled_ready_available_and_terminating() {
        let r = rs(3, 30);
        let a = labeled(pod("a", "n", "Running", Some("2024-05-01T11:00:00Z"), NOW), true);
        let b = labeled(pod("b", "n", "Running", Some("2024-05-01T11:59:50Z"), NOW), false);
        let c = labeled(pod("c", "n", "Pending", None, NOW), true);
        let s = calculate_status(&r, &[&a, &b, &c], 1, None, ts(NOW));
        assert_eq!(s.replicas, 3);
        assert_eq!(s.fully_labeled_replicas, Some(2));
        assert_eq!(s.ready_replicas, Some(2));
        assert_eq!(s.available_replicas, Some(1));
        assert_eq!(s.terminating_replicas, Some(1));
        assert_eq!(requeue_after(&r, &[&a, &b, &c], ts(NOW)), Some(Duration::from_secs(21)));
    }

    #[test]
    fn failures_set_and_success_clears_the_replica_failure_condition() {
        let r = rs(2, 0);
        let err = ManageError { message: "quota exceeded".into() };
        let s = calculate_status(&r, &[], 0, Some(&err), ts(NOW));
        let cond = s.conditions.as_ref().and_then(|c| c.first()).expect("condition");
        assert_eq!((cond.type_.as_str(), cond.reason.as_deref()), ("ReplicaFailure", Some("FailedCreate")));
        let mut failed = r.clone();
        failed.status = Some(s);
        assert!(calculate_status(&failed, &[], 0, None, ts(NOW)).conditions.is_none());
    }

    #[test]
    fn status_is_written_only_when_something_changed() {
        let r = rs(1, 0);
        let a = labeled(pod("a", "n", "Running", None, NOW), true);
        let mut s = calculate_status(&r, &[&a], 0, None, ts(NOW));
        assert!(status_needs_update(&r.current_status(), &s, 2));
        s.observed_generation = Some(2);
        assert!(!status_needs_update(&s, &s, 2));
        assert!(status_needs_update(&s, &s, 3));
    }

    #[test]
    fn replication_controllers_select_by_equality_and_have_no_terminating_count() {
        let rc = ReplicationController {
            metadata: ObjectMeta { name: Some("rc".into()), ..Default::default() },
            spec: Some(k8s_openapi::api::core::v1::ReplicationControllerSpec {
                selector: Some([("app".into(), "web".into())].into()),
                ..Default::default()
            }),
            status: None,
        };
        let sel = rc.label_selector();
        assert!(selectors::matches(sel.as_ref(), Some(&[("app".to_string(), "web".to_string())].into())));
        assert_eq!(rc.replicas(), 1);
        let s = calculate_status(&rc, &[], 2, None, ts(NOW));
        assert_eq!(s.terminating_replicas, None);
        let mut rc2 = rc.clone();
        rc2.set_status(s.clone());
        assert_eq!(rc2.current_status().replicas, s.replicas);
    }

    #[test]
    fn pod_events_observe_expectations_and_wake_the_owner() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
        let (queue, mut rx) = informer::Queue::<ReplicaSet>::new();
        let (reader, mut writer) = kube::runtime::reflector::store::<ReplicaSet>();
        let mut owner_rs = rs(1, 0);
        owner_rs.metadata.uid = Some("rs-uid".into());
        writer.apply_watcher_event(&watcher::Event::Apply(owner_rs.clone()));
        let exp = Expectations::default();
        exp.expect_creations("ns/web", 1);
        let mut p = pod("a", "n", "Pending", None, NOW);
        p.metadata.owner_references = Some(vec![OwnerReference {
            kind: "ReplicaSet".into(),
            name: "web".into(),
            uid: "rs-uid".into(),
            controller: Some(true),
            ..Default::default()
        }]);
        on_pod_change(None, Some(&p), &reader, &exp, &queue);
        assert!(exp.satisfied("ns/web"));
        assert!(rx.try_recv().is_ok());
        // An orphan matching the selector wakes the ReplicaSet too (to adopt it).
        let orphan = labeled(pod("o", "n", "Pending", None, NOW), true);
        on_pod_change(None, Some(&orphan), &reader, &exp, &queue);
        assert!(rx.try_recv().is_ok());
    }
}
