//! The StatefulSet controller (upstream `pkg/controller/statefulset`): pods with stable names
//! `<set>-<ordinal>` and stable storage (a claim `<template>-<set>-<ordinal>` per
//! `volumeClaimTemplates` entry), created and removed in order (`OrderedReady`) or all at once
//! (`Parallel`), updated by revision (ControllerRevisions, the `controller-revision-hash` pod
//! label) from the highest ordinal down to `partition`, with the status counters
//! `kubectl rollout status` reads.
//!
//! [`plan::plan`] decides (pure); [`reconcile`] gathers caches, adopts/releases pods and
//! revisions, and carries the steps out in order.

pub mod plan;

use crate::workloads::owner;
use crate::Context;
use jiff::Timestamp;
use k1s_api::selectors;
use k1s_runtime::controller::{Controller as Runtime, Scope};
use k1s_runtime::events::{object_reference, EventType, Recorder};
use k1s_runtime::informer;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store;
use kube::ResourceExt;
use plan::Step;
use serde_json::json;
use std::sync::Arc;

const COMPONENT: &str = "statefulset-controller";

/// Errors of one sync.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("statefulset {namespace}/{name}: claiming {what}: {error}")]
    Claim { namespace: String, name: String, what: &'static str, error: owner::ClaimError },
    #[error("statefulset {namespace}/{name}: revision {revision} exists with other data; collisionCount raised")]
    HashCollision { namespace: String, name: String, revision: String },
    #[error("statefulset {namespace}/{name}: {action}: {error}")]
    Api { namespace: String, name: String, action: String, error: kube::Error },
}

/// The controller's caches and clients.
pub struct Controller {
    client: kube::Client,
    recorder: Recorder,
    pods: Store<Pod>,
    revisions: Store<ControllerRevision>,
    claims: Store<PersistentVolumeClaim>,
}

/// Runs the StatefulSet controller until `ctx.cancel` fires.
pub async fn run(ctx: Arc<Context>) {
    let client = ctx.client.clone();
    let mut c = Runtime::<StatefulSet>::new(COMPONENT, client.clone());
    // Pods wake their set; orphans wake the sets whose selector matches.
    let pods = c.watches(|old: Option<&Pod>, new: Option<&Pod>, scope: &Scope<StatefulSet>| {
        for p in old.into_iter().chain(new) {
            scope.enqueue_controller_or_adopters(&p.metadata, |s| {
                selectors::matches(s.spec.as_ref().map(|x| &x.selector), p.metadata.labels.as_ref())
            });
        }
    });
    let revisions = c.owns::<ControllerRevision>();
    let claims = c.caches::<PersistentVolumeClaim>();
    let controller = Arc::new(Controller {
        recorder: Recorder::new(client.clone(), COMPONENT, None),
        client,
        pods,
        revisions,
        claims,
    });
    c.run(controller, reconcile, ctx.cancel.clone()).await;
}

/// One sync of one StatefulSet.
pub async fn reconcile(set: Arc<StatefulSet>, ctl: Arc<Controller>) -> Result<Action, Error> {
    let now = Timestamp::now();
    let ns = set.namespace().unwrap_or_default();
    let name = set.name_any();
    let sets: Api<StatefulSet> = Api::namespaced(ctl.client.clone(), &ns);
    let pod_api: Api<Pod> = Api::namespaced(ctl.client.clone(), &ns);
    let rev_api: Api<ControllerRevision> = Api::namespaced(ctl.client.clone(), &ns);
    let claim_api: Api<PersistentVolumeClaim> = Api::namespaced(ctl.client.clone(), &ns);
    let sel = set.spec.as_ref().map(|s| s.selector.clone());
    let matches =
        |labels: Option<&std::collections::BTreeMap<String, String>>| selectors::matches(sel.as_ref(), labels);
    // Pods are ours only if their name is one of our ordinals (`isMemberOf`).
    let pods = owner::claim_all(
        &*set,
        &sets,
        &pod_api,
        informer::list_in(&ctl.pods, &ns, |_| true),
        |p| matches(p.metadata.labels.as_ref()) && plan::ordinal(&name, p).is_some(),
        None,
    )
    .await
    .map_err(|error| Error::Claim { namespace: ns.clone(), name: name.clone(), what: "pods", error })?;
    let revisions = owner::claim_all(
        &*set,
        &sets,
        &rev_api,
        informer::list_in(&ctl.revisions, &ns, |_| true),
        |r| matches(r.metadata.labels.as_ref()),
        None,
    )
    .await
    .map_err(|error| Error::Claim { namespace: ns.clone(), name: name.clone(), what: "revisions", error })?;
    let claims: Vec<String> =
        informer::list_in(&ctl.claims, &ns, |_| true).iter().filter_map(|c| c.metadata.name.clone()).collect();
    let observed = plan::Observed {
        set: &set,
        pods: pods.iter().map(|p| &**p).collect(),
        revisions: revisions.iter().map(|r| (**r).clone()).collect(),
        claims,
        now,
    };
    let p = if set.metadata.deletion_timestamp.is_some() { plan::Plan::default() } else { plan::plan(&observed) };
    let sref = object_reference(&*set);
    let api_err =
        |action: String, error: kube::Error| Error::Api { namespace: ns.clone(), name: name.clone(), action, error };
    let is_code = |e: &kube::Error, c: u16| matches!(e, kube::Error::Api(s) if s.code == c);
    let mut latest = (*set).clone();
    for step in p.steps {
        match step {
            Step::CreateRevision(rev) => {
                let rname = rev.name_any();
                match rev_api.create(&PostParams::default(), &*rev).await {
                    Ok(_) => {}
                    Err(e) if is_code(&e, 409) => {
                        let existing =
                            rev_api.get(&rname).await.map_err(|e| api_err(format!("getting revision {rname}"), e))?;
                        if !crate::workloads::history::same_data(&existing, &rev) {
                            let mut status = latest.status.clone().unwrap_or_default();
                            status.collision_count = Some(status.collision_count.unwrap_or(0) + 1);
                            latest.status = Some(status);
                            sets.replace_status(&name, &PostParams::default(), &latest)
                                .await
                                .map_err(|e| api_err("raising collisionCount".into(), e))?;
                            return Err(Error::HashCollision { namespace: ns, name, revision: rname });
                        }
                    }
                    Err(e) => return Err(api_err(format!("creating revision {rname}"), e)),
                }
            }
            Step::UpdateRevision(rev) => {
                let rname = rev.name_any();
                rev_api
                    .replace(&rname, &PostParams::default(), &rev)
                    .await
                    .map_err(|e| api_err(format!("updating revision {rname}"), e))?;
            }
            Step::DeleteRevision(rname) => {
                if let Err(e) = rev_api.delete(&rname, &DeleteParams::default()).await {
                    if !is_code(&e, 404) {
                        return Err(api_err(format!("deleting revision {rname}"), e));
                    }
                }
            }
            Step::CreateClaim { claim, pod } => {
                let cname = claim.name_any();
                match claim_api.create(&PostParams::default(), &*claim).await {
                    Ok(_) => {
                        let msg = format!("create Claim {cname} Pod {pod} in StatefulSet {name} success");
                        ctl.recorder.record(&sref, EventType::Normal, "SuccessfulCreate", &msg).await;
                    }
                    Err(e) if is_code(&e, 409) => {}
                    Err(e) => {
                        let msg = format!("create Claim {cname} for Pod {pod} in StatefulSet {name} failed error: {e}");
                        ctl.recorder.record(&sref, EventType::Warning, "FailedCreate", &msg).await;
                        return Err(api_err(format!("creating claim {cname}"), e));
                    }
                }
            }
            Step::OwnClaim { claim, owner } => {
                let patch = json!({"metadata": {"ownerReferences": [owner]}});
                if let Err(e) = claim_api.patch(&claim, &PatchParams::default(), &Patch::Strategic(&patch)).await {
                    if !is_code(&e, 404) {
                        return Err(api_err(format!("setting the owner of claim {claim}"), e));
                    }
                }
            }
            Step::CreatePod(pod) => {
                let pname = pod.name_any();
                match pod_api.create(&PostParams::default(), &*pod).await {
                    Ok(_) => {
                        let msg = format!("create Pod {pname} in StatefulSet {name} successful");
                        ctl.recorder.record(&sref, EventType::Normal, "SuccessfulCreate", &msg).await;
                    }
                    Err(e) if is_code(&e, 409) => {}
                    Err(e) => {
                        let msg = format!("create Pod {pname} in StatefulSet {name} failed error: {e}");
                        ctl.recorder.record(&sref, EventType::Warning, "FailedCreate", &msg).await;
                        return Err(api_err(format!("creating pod {pname}"), e));
                    }
                }
            }
            Step::DeletePod(pname) => match pod_api.delete(&pname, &DeleteParams::default()).await {
                Ok(_) => {
                    let msg = format!("delete Pod {pname} in StatefulSet {name} successful");
                    ctl.recorder.record(&sref, EventType::Normal, "SuccessfulDelete", &msg).await;
                }
                Err(e) if is_code(&e, 404) => {}
                Err(e) => {
                    let msg = format!("delete Pod {pname} in StatefulSet {name} failed error: {e}");
                    ctl.recorder.record(&sref, EventType::Warning, "FailedDelete", &msg).await;
                    return Err(api_err(format!("deleting pod {pname}"), e));
                }
            },
            Step::UpdateStatus(status) => {
                latest.status = Some(*status);
                latest = sets
                    .replace_status(&name, &PostParams::default(), &latest)
                    .await
                    .map_err(|e| api_err("updating status".into(), e))?;
            }
        }
    }
    Ok(p.requeue_after.map_or_else(Action::await_change, Action::requeue))
}
