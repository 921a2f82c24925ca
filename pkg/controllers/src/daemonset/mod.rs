//! The DaemonSet controller (upstream `pkg/controller/daemon`): one pod per eligible node
//! (node selector, required node affinity, taints against the template's tolerations plus the
//! default DaemonSet tolerations), each pod pinned to its node through required node affinity
//! so the scheduler places it; failed pods replaced with back-off; RollingUpdate with
//! maxUnavailable/maxSurge or OnDelete; ControllerRevisions for history; status counters.
//!
//! [`plan`] decides (pure); [`reconcile`] gathers the caches and carries the steps out.

pub mod plan;

use crate::workloads::events::Batch;
use crate::workloads::expectations::{self, Expectations};
use crate::workloads::{hash, history, owner};
use crate::Context;
use jiff::Timestamp;
use k1s_api::selectors;
use k1s_runtime::api_error::is_namespace_terminating;
use k1s_runtime::controller::{self as runtime, Scope};
use k1s_runtime::events::{object_reference, EventType, Recorder};
use k1s_runtime::informer;
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store;
use kube::ResourceExt;
use plan::Step;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const COMPONENT: &str = "daemonset-controller";
const FAILED_POD_BACKOFF_START: Duration = Duration::from_secs(1);
const FAILED_POD_BACKOFF_MAX: Duration = Duration::from_secs(15 * 60);

/// Errors of one sync.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("daemonset {namespace}/{name}: claiming {what}: {error}")]
    Claim { namespace: String, name: String, what: &'static str, error: owner::ClaimError },
    #[error("daemonset {namespace}/{name}: revision {revision} exists with another template; collisionCount raised")]
    HashCollision { namespace: String, name: String, revision: String },
    #[error("daemonset {namespace}/{name}: {action}: {error}")]
    Api { namespace: String, name: String, action: String, error: kube::Error },
}

/// The controller's caches, clients and memory.
pub struct Controller {
    client: kube::Client,
    recorder: Recorder,
    nodes: Store<Node>,
    pods: Store<Pod>,
    revisions: Store<ControllerRevision>,
    expectations: Arc<Expectations>,
    /// (daemonset key, node) ▶ (current back-off, when it was last raised).
    failed_backoff: Mutex<HashMap<(String, String), (Duration, Instant)>>,
}

fn ds_key(ds: &DaemonSet) -> String {
    expectations::key(ds.metadata.namespace.as_deref(), ds.metadata.name.as_deref().unwrap_or_default())
}

/// Pod changes: expectations and wake-ups (orphans wake the DaemonSets selecting them).
fn on_pod_change(old: Option<&Pod>, new: Option<&Pod>, exp: &Expectations, scope: &Scope<DaemonSet>) {
    if let (Some(o), Some(n)) = (old, new) {
        if o.metadata.resource_version == n.metadata.resource_version {
            return;
        }
    }
    let Some(pod) = new.or(old) else { return };
    let pod_key =
        expectations::key(pod.metadata.namespace.as_deref(), pod.metadata.name.as_deref().unwrap_or_default());
    if let Some(ds) = scope.controller_of(&pod.metadata) {
        let key = ds_key(&ds);
        match (old, new) {
            (None, Some(p)) => {
                exp.creation_observed(&key);
                if p.metadata.deletion_timestamp.is_some() {
                    exp.deletion_observed(&key, &pod_key);
                }
            }
            (Some(o), Some(n))
                if o.metadata.deletion_timestamp.is_none() && n.metadata.deletion_timestamp.is_some() =>
            {
                exp.deletion_observed(&key, &pod_key);
            }
            (Some(o), None) if o.metadata.deletion_timestamp.is_none() => exp.deletion_observed(&key, &pod_key),
            _ => {}
        }
    }
    scope.enqueue_controller_or_adopters(&pod.metadata, |d| {
        selectors::matches(d.spec.as_ref().map(|s| &s.selector), pod.metadata.labels.as_ref())
    });
}

/// Runs the DaemonSet controller until `ctx.cancel` fires.
pub async fn run(ctx: Arc<Context>) {
    let client = ctx.client.clone();
    let exp = Arc::new(Expectations::default());
    let e = exp.clone();
    let mut c =
        runtime::Controller::<DaemonSet>::new(COMPONENT, client.clone()).on_delete(move |d| e.forget(&ds_key(d)));
    let nodes = c.watches(|old: Option<&Node>, new: Option<&Node>, scope: &Scope<DaemonSet>| {
        let relevant = match (old, new) {
            (Some(o), Some(n)) => {
                o.metadata.labels != n.metadata.labels
                    || o.spec.as_ref().map(|s| &s.taints) != n.spec.as_ref().map(|s| &s.taints)
            }
            _ => true,
        };
        if relevant {
            scope.enqueue_all();
        }
    });
    let e = exp.clone();
    let pods = c.watches(move |old: Option<&Pod>, new: Option<&Pod>, scope: &Scope<DaemonSet>| {
        on_pod_change(old, new, &e, scope)
    });
    let revisions = c.owns::<ControllerRevision>();
    let controller = Arc::new(Controller {
        recorder: Recorder::new(client.clone(), COMPONENT, None),
        client,
        nodes,
        pods,
        revisions,
        expectations: exp,
        failed_backoff: Mutex::new(HashMap::new()),
    });
    c.run(controller, reconcile, ctx.cancel.clone()).await;
}

/// One sync of one DaemonSet.
pub async fn reconcile(ds: Arc<DaemonSet>, ctl: Arc<Controller>) -> Result<Action, Error> {
    let now = Timestamp::now();
    let ns = ds.namespace().unwrap_or_default();
    let name = ds.name_any();
    let key = ds_key(&ds);
    let api_err =
        |action: String, error: kube::Error| Error::Api { namespace: ns.clone(), name: name.clone(), action, error };
    let is_code = |e: &kube::Error, c: u16| matches!(e, kube::Error::Api(s) if s.code == c);
    let ds_api: Api<DaemonSet> = Api::namespaced(ctl.client.clone(), &ns);
    let pod_api: Api<Pod> = Api::namespaced(ctl.client.clone(), &ns);
    let rev_api: Api<ControllerRevision> = Api::namespaced(ctl.client.clone(), &ns);
    let sel = ds.spec.as_ref().map(|s| s.selector.clone());
    if sel.as_ref().is_some_and(selectors::is_empty) {
        ctl.recorder
            .record(
                &object_reference(&*ds),
                EventType::Warning,
                "SelectingAll",
                "This daemon set is selecting all pods. A non-empty selector is required.",
            )
            .await;
        return Ok(Action::await_change());
    }
    let satisfied = ctl.expectations.satisfied(&key);
    let pods = owner::claim_all(
        &*ds,
        &ds_api,
        &pod_api,
        informer::list_in(&ctl.pods, &ns, |_| true),
        |p| selectors::matches(sel.as_ref(), p.metadata.labels.as_ref()),
        None,
    )
    .await
    .map_err(|error| Error::Claim { namespace: ns.clone(), name: name.clone(), what: "pods", error })?;
    let revisions = owner::claim_all(
        &*ds,
        &ds_api,
        &rev_api,
        informer::list_in(&ctl.revisions, &ns, |_| true),
        |r| selectors::matches(sel.as_ref(), r.metadata.labels.as_ref()),
        None,
    )
    .await
    .map_err(|error| Error::Claim { namespace: ns.clone(), name: name.clone(), what: "revisions", error })?;

    // constructHistory: the revision of the current template.
    let template = ds.spec.as_ref().map(|s| s.template.clone()).unwrap_or_default();
    let collisions = ds.status.as_ref().and_then(|s| s.collision_count);
    let tmpl_hash = hash::pod_template_hash(&template, collisions);
    let rev_name = history::revision_name(&name, &tmpl_hash);
    let mut revs: Vec<ControllerRevision> = revisions.iter().map(|r| (**r).clone()).collect();
    let mut candidate = history::new_revision(
        owner::controller_ref(&*ds),
        Some(ns.clone()),
        rev_name.clone(),
        template.metadata.as_ref().and_then(|m| m.labels.clone()),
        &tmpl_hash,
        history::template_patch(&template),
        history::max_revision(&revs) + 1,
    );
    // As upstream's snapshot: the revision carries the DaemonSet's annotations (the
    // `kubernetes.io/change-cause` that `kubectl rollout history` shows).
    candidate.metadata.annotations = ds.metadata.annotations.clone();
    let max = history::max_revision(&revs);
    match revs.iter().position(|r| history::same_data(r, &candidate)) {
        Some(i) if revs[i].revision < max => {
            let mut r = revs[i].clone();
            r.revision = max + 1;
            let rn = r.name_any();
            revs[i] = rev_api
                .replace(&rn, &PostParams::default(), &r)
                .await
                .map_err(|e| api_err(format!("updating revision {rn}"), e))?;
        }
        Some(_) => {}
        None => match rev_api.create(&PostParams::default(), &candidate).await {
            Ok(r) => revs.push(r),
            Err(e) if is_code(&e, 409) => {
                let existing =
                    rev_api.get(&rev_name).await.map_err(|e| api_err(format!("getting revision {rev_name}"), e))?;
                if !history::same_data(&existing, &candidate) {
                    let mut latest = (*ds).clone();
                    let mut status = latest.status.clone().unwrap_or_default();
                    status.collision_count = Some(status.collision_count.unwrap_or(0) + 1);
                    latest.status = Some(status);
                    ds_api
                        .replace_status(&name, &PostParams::default(), &latest)
                        .await
                        .map_err(|e| api_err("raising collisionCount".into(), e))?;
                    return Err(Error::HashCollision { namespace: ns, name, revision: rev_name });
                }
                revs.push(existing);
            }
            Err(e) => return Err(api_err(format!("creating revision {rev_name}"), e)),
        },
    }

    let nodes = ctl.nodes.state();
    let nodes: Vec<&Node> = nodes.iter().map(|n| &**n).collect();
    let pod_refs: Vec<&Pod> = pods.iter().map(|p| &**p).collect();
    let mut requeue: Option<Duration> = None;
    let mut first_error = None;
    if satisfied && ds.metadata.deletion_timestamp.is_none() {
        let may_delete_failed = |node: &str| {
            let Ok(mut m) = ctl.failed_backoff.lock() else { return true };
            let entry_key = (key.clone(), node.to_string());
            match m.get(&entry_key).copied() {
                Some((delay, at)) if at.elapsed() < delay => false,
                Some((delay, _)) => {
                    m.insert(entry_key, ((delay * 2).min(FAILED_POD_BACKOFF_MAX), Instant::now()));
                    true
                }
                None => {
                    m.insert(entry_key, (FAILED_POD_BACKOFF_START, Instant::now()));
                    true
                }
            }
        };
        let mut steps = plan::manage(&ds, &nodes, &pod_refs, &may_delete_failed);
        let on_delete = ds.spec.as_ref().and_then(|s| s.update_strategy.as_ref()).and_then(|u| u.type_.as_deref())
            == Some("OnDelete");
        if !on_delete {
            steps.extend(plan::rolling_update(&ds, &nodes, &pod_refs, &tmpl_hash, now));
        }
        if let Ok(m) = ctl.failed_backoff.lock() {
            requeue = m
                .iter()
                .filter(|((k, _), _)| *k == key)
                .map(|(_, (d, at))| d.saturating_sub(at.elapsed()))
                .filter(|d| !d.is_zero())
                .min();
        }
        if let Err(e) = sync_nodes(&ctl, &ds, &pod_api, &tmpl_hash, steps).await {
            first_error = Some(api_err("syncing nodes".into(), e));
        }
    }

    let mut status = plan::status(&ds, &nodes, &pod_refs, &tmpl_hash, now);
    if Some(&status) != ds.status.as_ref() {
        let mut updated = (*ds).clone();
        status.observed_generation = ds.metadata.generation;
        updated.status = Some(status);
        if let Err(e) = ds_api.replace_status(&name, &PostParams::default(), &updated).await {
            first_error.get_or_insert(api_err("updating status".into(), e));
        }
    }

    // cleanupHistory: keep revisionHistoryLimit revisions besides the current and live ones.
    let live: BTreeSet<String> =
        pods.iter().filter_map(|p| p.metadata.labels.as_ref()?.get(plan::REVISION_LABEL).cloned()).collect();
    let limit = usize::try_from(ds.spec.as_ref().and_then(|s| s.revision_history_limit).unwrap_or(10)).unwrap_or(10);
    let mut old: Vec<&ControllerRevision> = revs
        .iter()
        .filter(|r| r.metadata.name.as_deref() != Some(rev_name.as_str()))
        .filter(|r| !r.labels().get(history::REVISION_HASH_LABEL).is_some_and(|h| live.contains(h)))
        .collect();
    old.sort_by_key(|r| r.revision);
    for r in old.iter().take(old.len().saturating_sub(limit)) {
        if let Err(e) = rev_api.delete(&r.name_any(), &DeleteParams::default()).await {
            if !is_code(&e, 404) {
                first_error.get_or_insert(api_err(format!("deleting revision {}", r.name_any()), e));
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    // Ready pods become available after minReadySeconds.
    let min_ready = ds.spec.as_ref().and_then(|s| s.min_ready_seconds).unwrap_or(0);
    let until = pods.iter().filter_map(|p| crate::workloads::pods::until_available(p, min_ready, now)).min();
    let next = [requeue, until].into_iter().flatten().min();
    Ok(next.map_or_else(Action::await_change, Action::requeue))
}

/// `syncNodes`: deletions, then creations in slow-start batches, with expectations.
async fn sync_nodes(
    ctl: &Controller,
    ds: &DaemonSet,
    api: &Api<Pod>,
    hash: &str,
    steps: Vec<Step>,
) -> Result<(), kube::Error> {
    let key = ds_key(ds);
    let ns = ds.metadata.namespace.clone().unwrap_or_default();
    let mut events = Batch::default();
    let mut delete: Vec<String> = Vec::new();
    let mut create: Vec<String> = Vec::new();
    for s in steps {
        match s {
            Step::CreateOn(n) if !create.contains(&n) => create.push(n),
            Step::DeletePod(p) if !delete.contains(&p) => delete.push(p),
            Step::FailedPod { pod, node } => {
                events.warning(
                    "FailedDaemonPod",
                    format!("Found failed daemon pod {ns}/{pod} on node {node}, will try to kill it"),
                );
            }
            _ => {}
        }
    }
    let mut error = None;
    if !delete.is_empty() {
        let keys: Vec<String> = delete.iter().map(|p| expectations::key(Some(&ns), p)).collect();
        ctl.expectations.expect_deletions(&key, keys.clone());
        let dp = DeleteParams::default();
        let results = futures::future::join_all(delete.iter().map(|p| api.delete(p, &dp))).await;
        for ((p, k), r) in delete.iter().zip(keys).zip(results) {
            match r {
                Ok(_) => events.normal("SuccessfulDelete", format!("Deleted pod: {p}")),
                Err(e) => {
                    ctl.expectations.deletion_observed(&key, &k);
                    if !matches!(&e, kube::Error::Api(s) if s.code == 404) {
                        events.warning("FailedDelete", format!("Error deleting: {e}"));
                        error.get_or_insert(e);
                    }
                }
            }
        }
    }
    if !create.is_empty() {
        ctl.expectations.expect_creations(&key, create.len());
        let template = plan::pod_template(ds, hash);
        let pp = PostParams::default();
        let mut done = 0;
        for batch in crate::replicaset::slow_start_batches(create.len()) {
            let pods: Vec<Pod> = create[done..done + batch].iter().map(|n| plan::new_pod(ds, &template, n)).collect();
            let results = futures::future::join_all(pods.iter().map(|p| api.create(&pp, p))).await;
            let mut failed = false;
            for r in results {
                match r {
                    Ok(p) => events.normal("SuccessfulCreate", format!("Created pod: {}", p.name_any())),
                    Err(e) => {
                        ctl.expectations.creation_observed(&key);
                        if is_namespace_terminating(&e) {
                            continue;
                        }
                        events.warning("FailedCreate", format!("Error creating: {e}"));
                        failed = true;
                        error.get_or_insert(e);
                    }
                }
            }
            done += batch;
            if failed {
                for _ in done..create.len() {
                    ctl.expectations.creation_observed(&key);
                }
                break;
            }
        }
    }
    events.record(&ctl.recorder, &object_reference(ds)).await;
    error.map_or(Ok(()), Err)
}
