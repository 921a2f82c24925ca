//! The deployment controller (upstream `pkg/controller/deployment`): owns ReplicaSets named
//! `<deployment>-<pod-template-hash>`, rolls out template changes with RollingUpdate
//! (maxSurge/maxUnavailable) or Recreate, scales proportionally, keeps
//! `revisionHistoryLimit` old ReplicaSets, honours `paused`, and reports the status and the
//! `Progressing`/`Available` conditions `kubectl rollout status` reads. `rollout restart` and
//! `rollout undo` need nothing special: both change the template, so its hash picks (or
//! creates) the ReplicaSet.
//!
//! [`sync::plan`] decides (pure); [`reconcile`] gathers the inputs from informer caches,
//! adopts/releases ReplicaSets, and carries the plan out step by step.

pub mod sync;
pub mod util;

use crate::workloads::owner;
use crate::Context;
use jiff::Timestamp;
use k1s_api::selectors;
use k1s_runtime::controller::{Controller as Runtime, Scope};
use k1s_runtime::events::{object_reference, EventType, Recorder};
use k1s_runtime::informer;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store;
use kube::ResourceExt;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use sync::Step;

const COMPONENT: &str = "deployment-controller";

/// Errors of one sync.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("deployment {namespace}/{name}: claiming replica sets: {error}")]
    Claim { namespace: String, name: String, error: owner::ClaimError },
    #[error("deployment {namespace}/{name}: creating replica set {rs}: {error}")]
    CreateReplicaSet { namespace: String, name: String, rs: String, error: kube::Error },
    #[error("deployment {namespace}/{name}: replica set {rs} exists with another template; collisionCount raised")]
    HashCollision { namespace: String, name: String, rs: String },
    #[error("deployment {namespace}/{name}: updating replica set {rs}: {error}")]
    UpdateReplicaSet { namespace: String, name: String, rs: String, error: kube::Error },
    #[error("deployment {namespace}/{name}: deleting replica set {rs}: {error}")]
    DeleteReplicaSet { namespace: String, name: String, rs: String, error: kube::Error },
    #[error("deployment {namespace}/{name}: setting the revision annotation: {error}")]
    SetRevision { namespace: String, name: String, error: kube::Error },
    #[error("deployment {namespace}/{name}: updating status: {error}")]
    UpdateStatus { namespace: String, name: String, error: kube::Error },
}

/// The controller's caches and clients.
pub struct Controller {
    client: kube::Client,
    recorder: Recorder,
    replica_sets: Store<ReplicaSet>,
    pods: Store<Pod>,
}

/// `addReplicaSet`/`updateReplicaSet`/`deleteReplicaSet`: wake the controlling deployment, or
/// for orphans every deployment whose selector matches (one of them may adopt it).
fn on_replica_set_change(old: Option<&ReplicaSet>, new: Option<&ReplicaSet>, scope: &Scope<Deployment>) {
    let wake = |rs: &ReplicaSet| {
        scope.enqueue_controller_or_adopters(&rs.metadata, |d| {
            selectors::matches(d.spec.as_ref().map(|s| &s.selector), rs.metadata.labels.as_ref())
        })
    };
    if let (Some(o), Some(n)) = (old, new) {
        if o.metadata.resource_version == n.metadata.resource_version {
            return;
        }
        if owner::controller_of(&o.metadata).map(|r| &r.uid) != owner::controller_of(&n.metadata).map(|r| &r.uid)
            || o.metadata.labels != n.metadata.labels
        {
            wake(o);
        }
    }
    if let Some(rs) = new.or(old) {
        wake(rs);
    }
}

/// `deletePod`: a Recreate deployment waits for its old pods to be gone.
fn on_pod_change(old: Option<&Pod>, new: Option<&Pod>, replica_sets: &Store<ReplicaSet>, scope: &Scope<Deployment>) {
    let finished = |p: &Pod| matches!(crate::workloads::pods::pod_phase(p), "Succeeded" | "Failed");
    let pod = match (old, new) {
        (Some(p), None) => p,
        (Some(o), Some(n)) if !finished(o) && finished(n) => n,
        _ => return,
    };
    let Some(r) = owner::controller_of(&pod.metadata).filter(|r| r.kind == "ReplicaSet") else { return };
    let Some(rs) = informer::get(replica_sets, pod.metadata.namespace.as_deref(), &r.name) else { return };
    if let Some(d) = scope.controller_of(&rs.metadata) {
        if !util::is_rolling(&d) {
            scope.queue.add_obj(&d);
        }
    }
}

/// Runs the deployment controller until `ctx.cancel` fires.
pub async fn run(ctx: Arc<Context>) {
    let client = ctx.client.clone();
    let mut c = Runtime::<Deployment>::new(COMPONENT, client.clone());
    let replica_sets = c.watches(on_replica_set_change);
    let rss = replica_sets.clone();
    let pods = c.watches(move |old: Option<&Pod>, new: Option<&Pod>, scope: &Scope<Deployment>| {
        on_pod_change(old, new, &rss, scope)
    });
    let controller =
        Arc::new(Controller { recorder: Recorder::new(client.clone(), COMPONENT, None), client, replica_sets, pods });
    c.run(controller, reconcile, ctx.cancel.clone()).await;
}

/// One sync of one deployment.
pub async fn reconcile(d: Arc<Deployment>, ctl: Arc<Controller>) -> Result<Action, Error> {
    let now = Timestamp::now();
    let ns = d.namespace().unwrap_or_default();
    let name = d.name_any();
    let d_api: Api<Deployment> = Api::namespaced(ctl.client.clone(), &ns);
    let rs_api: Api<ReplicaSet> = Api::namespaced(ctl.client.clone(), &ns);
    let sel = d.spec.as_ref().map(|s| s.selector.clone());
    let candidates = informer::list_in(&ctl.replica_sets, &ns, |_| true);
    let owned = if sel.as_ref().is_some_and(selectors::is_empty) {
        Vec::new()
    } else {
        owner::claim_all(
            &*d,
            &d_api,
            &rs_api,
            candidates,
            |rs| selectors::matches(sel.as_ref(), rs.metadata.labels.as_ref()),
            None,
        )
        .await
        .map_err(|error| Error::Claim { namespace: ns.clone(), name: name.clone(), error })?
    };
    let owned: Vec<ReplicaSet> = owned.iter().map(|r| (**r).clone()).collect();
    let uids: HashSet<&str> = owned.iter().filter_map(|r| r.metadata.uid.as_deref()).collect();
    let pods = informer::list_in(&ctl.pods, &ns, |p| {
        owner::controller_of(&p.metadata).is_some_and(|r| uids.contains(r.uid.as_str()))
    });
    let pods: Vec<&Pod> = pods.iter().map(|p| &**p).collect();
    let plan = sync::plan(&d, &owned, &pods, now);
    execute(&ctl, &d, &d_api, &rs_api, plan.steps).await?;
    Ok(plan.requeue_after.map_or_else(Action::await_change, Action::requeue))
}

fn is_code(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// Carries out the steps in order, stopping at the first failure.
async fn execute(
    ctl: &Controller,
    d: &Deployment,
    d_api: &Api<Deployment>,
    rs_api: &Api<ReplicaSet>,
    steps: Vec<Step>,
) -> Result<(), Error> {
    let ns = d.namespace().unwrap_or_default();
    let name = d.name_any();
    let dref = object_reference(d);
    let mut latest = d.clone();
    // ReplicaSets written in this sync: later steps build on the versions the API returned.
    let mut written: HashMap<String, ReplicaSet> = HashMap::new();
    for step in steps {
        match step {
            Step::CreateReplicaSet(rs) => {
                let rs_name = rs.name_any();
                match rs_api.create(&PostParams::default(), &rs).await {
                    Ok(created) => {
                        let n = util::rs_replicas(&created);
                        if n > 0 {
                            let msg = format!("Scaled up replica set {rs_name} from 0 to {n}");
                            ctl.recorder.record(&dref, EventType::Normal, "ScalingReplicaSet", &msg).await;
                        }
                        written.insert(rs_name, created);
                    }
                    Err(e) if is_code(&e, 409) => {
                        let existing = rs_api.get(&rs_name).await.map_err(|error| Error::CreateReplicaSet {
                            namespace: ns.clone(),
                            name: name.clone(),
                            rs: rs_name.clone(),
                            error,
                        })?;
                        let same =
                            owner::is_controlled_by(&existing.metadata, d.metadata.uid.as_deref().unwrap_or_default())
                                && match (
                                    existing.spec.as_ref().and_then(|s| s.template.as_ref()),
                                    d.spec.as_ref().map(|s| &s.template),
                                ) {
                                    (Some(a), Some(b)) => util::equal_ignore_hash(a, b),
                                    _ => false,
                                };
                        if same {
                            written.insert(rs_name, existing);
                            continue;
                        }
                        let mut status = latest.status.clone().unwrap_or_default();
                        status.collision_count = Some(status.collision_count.unwrap_or(0) + 1);
                        let mut obj = latest.clone();
                        obj.status = Some(status);
                        if let Err(error) = d_api.replace_status(&name, &PostParams::default(), &obj).await {
                            return Err(Error::UpdateStatus { namespace: ns, name, error });
                        }
                        return Err(Error::HashCollision { namespace: ns, name, rs: rs_name });
                    }
                    Err(error) => {
                        let msg = format!("Failed to create new replica set {rs_name:?}: {error}");
                        if util::has_progress_deadline(d) {
                            let mut status = latest.status.clone().unwrap_or_default();
                            util::set_condition(
                                &mut status,
                                util::new_condition(
                                    "Progressing",
                                    "False",
                                    util::REASON_FAILED_RS_CREATE,
                                    &msg,
                                    Timestamp::now(),
                                ),
                            );
                            let mut obj = latest.clone();
                            obj.status = Some(status);
                            // The creation error is the one worth reporting.
                            let _ = d_api.replace_status(&name, &PostParams::default(), &obj).await;
                        }
                        ctl.recorder.record(&dref, EventType::Warning, util::REASON_FAILED_RS_CREATE, &msg).await;
                        return Err(Error::CreateReplicaSet { namespace: ns, name, rs: rs_name, error });
                    }
                }
            }
            Step::UpdateReplicaSet { mut rs, event } => {
                let rs_name = rs.name_any();
                if let Some(w) = written.get(&rs_name) {
                    rs.metadata.resource_version = w.metadata.resource_version.clone();
                    rs.metadata.uid = w.metadata.uid.clone();
                }
                match rs_api.replace(&rs_name, &PostParams::default(), &rs).await {
                    Ok(updated) => {
                        if let Some(msg) = event {
                            ctl.recorder.record(&dref, EventType::Normal, "ScalingReplicaSet", &msg).await;
                        }
                        written.insert(rs_name, updated);
                    }
                    Err(error) => {
                        return Err(Error::UpdateReplicaSet { namespace: ns, name, rs: rs_name, error });
                    }
                }
            }
            Step::DeleteReplicaSet(rs_name) => {
                if let Err(error) = rs_api.delete(&rs_name, &DeleteParams::default()).await {
                    if !is_code(&error, 404) {
                        return Err(Error::DeleteReplicaSet { namespace: ns, name, rs: rs_name, error });
                    }
                }
            }
            Step::Event { warning, reason, message } => {
                let kind = if warning { EventType::Warning } else { EventType::Normal };
                ctl.recorder.record(&dref, kind, &reason, &message).await;
            }
            Step::SetRevision(rev) => {
                if latest.annotations().get(util::REVISION) == Some(&rev) {
                    continue;
                }
                // Through /status, as upstream's controller writes it: a main-resource write of
                // an annotation would bump the Deployment's generation.
                let mut obj = latest.clone();
                obj.metadata.annotations.get_or_insert_with(Default::default).insert(util::REVISION.to_string(), rev);
                latest = d_api
                    .replace_status(&name, &PostParams::default(), &obj)
                    .await
                    .map_err(|error| Error::SetRevision { namespace: ns.clone(), name: name.clone(), error })?;
            }
            Step::UpdateStatus(status) => {
                let mut obj = latest.clone();
                obj.status = Some(status);
                latest = d_api
                    .replace_status(&name, &PostParams::default(), &obj)
                    .await
                    .map_err(|error| Error::UpdateStatus { namespace: ns.clone(), name: name.clone(), error })?;
            }
        }
    }
    Ok(())
}

/// Used by the tests: the metadata of the ReplicaSets a deployment would consider its own.
#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::{reflector, watcher};

    fn rs(name: &str, labels: &[(&str, &str)], controller: Option<(&str, &str)>) -> ReplicaSet {
        ReplicaSet {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                resource_version: Some("1".into()),
                labels: Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
                owner_references: controller.map(|(n, uid)| {
                    vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                        kind: "Deployment".into(),
                        name: n.into(),
                        uid: uid.into(),
                        controller: Some(true),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn deployment_store() -> Store<Deployment> {
        let (reader, mut writer) = reflector::store::<Deployment>();
        let d = Deployment {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("web".into()),
                namespace: Some("ns".into()),
                uid: Some("d-uid".into()),
                ..Default::default()
            },
            spec: Some(k8s_openapi::api::apps::v1::DeploymentSpec {
                selector: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                    match_labels: Some([("app".into(), "web".into())].into()),
                    ..Default::default()
                },
                ..Default::default()
            }),
            status: None,
        };
        writer.apply_watcher_event(&watcher::Event::Apply(d));
        reader
    }

    #[test]
    fn replica_set_changes_wake_their_deployment_and_orphans_wake_matching_ones() {
        let (queue, mut rx) = informer::Queue::<Deployment>::new();
        let scope = Scope { store: deployment_store(), queue };
        on_replica_set_change(None, Some(&rs("web-1", &[("app", "web")], Some(("web", "d-uid")))), &scope);
        assert!(rx.try_recv().is_ok());
        on_replica_set_change(None, Some(&rs("stray", &[("app", "web")], None)), &scope);
        assert!(rx.try_recv().is_ok());
        on_replica_set_change(None, Some(&rs("other", &[("app", "db")], None)), &scope);
        assert!(rx.try_recv().is_err());
        // A controller reference with a stale UID does not resolve.
        on_replica_set_change(None, Some(&rs("web-2", &[("app", "x")], Some(("web", "old-uid")))), &scope);
        assert!(rx.try_recv().is_err());
    }
}
