//! The Job controller (upstream `pkg/controller/job`) and the TTL-after-finished controller
//! (`pkg/controller/ttlafterfinished`): runs pods until `completions` succeed (NonIndexed or
//! Indexed, at most `parallelism` at a time), replaces failed pods after an exponential
//! back-off until `backoffLimit`, honours `activeDeadlineSeconds`, `suspend`, the pod failure
//! and success policies and `podReplacementPolicy`, tracks pods with the
//! `batch.kubernetes.io/job-tracking` finalizer, and deletes finished Jobs once
//! `ttlSecondsAfterFinished` has passed.

pub mod logic;
pub mod sync;
pub mod ttl;

use crate::workloads::{expectations, owner};
use crate::Context;
use jiff::Timestamp;
use k1s_api::selectors;
use k1s_runtime::controller::reconcile_loop;
use k1s_runtime::events::{object_reference, EventType, Recorder};
use k1s_runtime::informer;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::ResourceExt;
use logic::{has_tracking_finalizer, is_finished, TRACKING_FINALIZER};
use serde_json::json;
use std::sync::Arc;
use sync::{JobApi, Memory, SyncError};

const COMPONENT: &str = "job-controller";

/// Errors of one sync.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("job {namespace}/{name}: claiming pods: {error}")]
    Claim { namespace: String, name: String, error: owner::ClaimError },
    #[error(transparent)]
    Sync(#[from] SyncError),
    #[error("removing the tracking finalizer of orphan pod {namespace}/{name}: {error}")]
    OrphanFinalizer { namespace: String, name: String, error: kube::Error },
}

/// The controller's caches, clients and memory.
pub struct Controller {
    client: kube::Client,
    recorder: Recorder,
    jobs: Store<Job>,
    pods: Store<Pod>,
    memory: Arc<Memory>,
}

struct KubeJobApi<'a> {
    ctl: &'a Controller,
    pods: Api<Pod>,
    jobs: Api<Job>,
}

fn remove_finalizer_patch() -> serde_json::Value {
    json!({"metadata": {"$deleteFromPrimitiveList/finalizers": [TRACKING_FINALIZER]}})
}

impl JobApi for KubeJobApi<'_> {
    async fn create_pod(&self, pod: &Pod) -> Result<Pod, kube::Error> {
        self.pods.create(&PostParams::default(), pod).await
    }
    async fn delete_pod(&self, _namespace: &str, name: &str) -> Result<(), kube::Error> {
        self.pods.delete(name, &DeleteParams::default()).await.map(|_| ())
    }
    async fn remove_finalizer(&self, _namespace: &str, name: &str) -> Result<(), kube::Error> {
        self.pods.patch(name, &PatchParams::default(), &Patch::Strategic(&remove_finalizer_patch())).await.map(|_| ())
    }
    async fn update_status(&self, job: &Job) -> Result<Job, kube::Error> {
        self.jobs.replace_status(&job.name_any(), &PostParams::default(), job).await
    }
    async fn event(&self, job: &Job, warning: bool, reason: &str, message: &str) {
        let kind = if warning { EventType::Warning } else { EventType::Normal };
        self.ctl.recorder.record(&object_reference(job), kind, reason, message).await;
    }
}

fn job_key(ns: Option<&str>, name: &str) -> String {
    expectations::key(ns, name)
}

fn resolve_job(jobs: &Store<Job>, pod: &Pod) -> Option<Arc<Job>> {
    informer::controller_in(jobs, &pod.metadata)
}

/// Whether a pod keeps a tracking finalizer nobody will remove (its Job is gone or finished).
fn is_orphan_with_finalizer(jobs: &Store<Job>, pod: &Pod) -> bool {
    if !has_tracking_finalizer(pod) {
        return false;
    }
    match owner::controller_of(&pod.metadata) {
        Some(r) if r.kind != "Job" => false,
        None => true,
        Some(_) => resolve_job(jobs, pod).is_none_or(|j| is_finished(&j)),
    }
}

/// `addPod`/`updatePod`/`deletePod`: expectations, finalizer expectations, and wake-ups.
fn on_pod_change(
    old: Option<&Pod>,
    new: Option<&Pod>,
    jobs: &Store<Job>,
    mem: &Memory,
    queue: &informer::Queue<Job>,
    orphans: &informer::Queue<Pod>,
) {
    let pod = match new.or(old) {
        Some(p) => p,
        None => return,
    };
    if let (Some(o), Some(n)) = (old, new) {
        if o.metadata.resource_version == n.metadata.resource_version {
            return;
        }
    }
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let pod_key =
        expectations::key(pod.metadata.namespace.as_deref(), pod.metadata.name.as_deref().unwrap_or_default());
    if let Some(job) = resolve_job(jobs, pod) {
        let key = job_key(job.metadata.namespace.as_deref(), job.metadata.name.as_deref().unwrap_or_default());
        match (old, new) {
            (None, Some(p)) => {
                mem.expectations.creation_observed(&key);
                if p.metadata.deletion_timestamp.is_some() {
                    mem.expectations.deletion_observed(&key, &pod_key);
                }
                if !has_tracking_finalizer(p) {
                    mem.finalizer_removal_observed(&key, &uid);
                }
            }
            (Some(o), Some(n)) => {
                if o.metadata.deletion_timestamp.is_none() && n.metadata.deletion_timestamp.is_some() {
                    mem.expectations.deletion_observed(&key, &pod_key);
                }
                if !has_tracking_finalizer(n) {
                    mem.finalizer_removal_observed(&key, &uid);
                }
            }
            (Some(o), None) => {
                if o.metadata.deletion_timestamp.is_none() {
                    mem.expectations.deletion_observed(&key, &pod_key);
                }
                mem.finalizer_removal_observed(&key, &uid);
            }
            (None, None) => {}
        }
        queue.add_obj(&job);
    } else if owner::controller_of(&pod.metadata).is_none() {
        if let Some(p) = new {
            let ns = p.metadata.namespace.as_deref().unwrap_or_default();
            for j in informer::list_in(jobs, ns, |j| {
                selectors::matches(j.spec.as_ref().and_then(|s| s.selector.as_ref()), p.metadata.labels.as_ref())
            }) {
                queue.add_obj(&j);
            }
        }
    }
    if let Some(p) = new {
        if is_orphan_with_finalizer(jobs, p) {
            orphans.add_obj(p);
        }
    }
    // The previous controller of a re-owned pod must look again too.
    if let (Some(o), Some(n)) = (old, new) {
        if owner::controller_of(&o.metadata).map(|r| &r.uid) != owner::controller_of(&n.metadata).map(|r| &r.uid) {
            if let Some(j) = resolve_job(jobs, o) {
                queue.add_obj(&j);
            }
        }
    }
}

/// Runs the Job and TTL-after-finished controllers until `ctx.cancel` fires.
pub async fn run(ctx: Arc<Context>) {
    let client = ctx.client.clone();
    let memory = Arc::new(Memory::default());
    let (queue, triggers) = informer::Queue::<Job>::new();
    let (orphans, orphan_triggers) = informer::Queue::<Pod>::new();
    let (ttl_queue, ttl_triggers) = informer::Queue::<Job>::new();
    let (q, tq, mem) = (queue.clone(), ttl_queue.clone(), memory.clone());
    // Pods of deleted jobs are found through this store (set once the pod informer runs).
    let pods_cell: Arc<std::sync::OnceLock<Store<Pod>>> = Arc::default();
    let (cell, oq) = (pods_cell.clone(), orphans.clone());
    let Some(jobs) = informer::start(
        COMPONENT,
        Api::<Job>::all(client.clone()),
        watcher::Config::default(),
        move |old: Option<&Job>, new: Option<&Job>| match (old, new) {
            (_, Some(j)) => {
                q.add_obj(j);
                tq.add_obj(j);
            }
            (Some(j), None) => {
                mem.forget(&job_key(j.metadata.namespace.as_deref(), j.metadata.name.as_deref().unwrap_or_default()));
                // cleanupPodFinalizers: its pods' finalizers must go.
                if let Some(pods) = cell.get() {
                    let uid = j.metadata.uid.clone().unwrap_or_default();
                    for p in informer::list_in(pods, j.metadata.namespace.as_deref().unwrap_or_default(), |p| {
                        owner::is_controlled_by(&p.metadata, &uid) && has_tracking_finalizer(p)
                    }) {
                        oq.add_obj(&p);
                    }
                }
            }
            (None, None) => {}
        },
        ctx.cancel.clone(),
    )
    .await
    else {
        return;
    };
    let (q, js, mem, oq) = (queue.clone(), jobs.clone(), memory.clone(), orphans.clone());
    let Some(pods) = informer::start(
        "pods",
        Api::<Pod>::all(client.clone()),
        watcher::Config::default(),
        move |old: Option<&Pod>, new: Option<&Pod>| on_pod_change(old, new, &js, &mem, &q, &oq),
        ctx.cancel.clone(),
    )
    .await
    else {
        return;
    };
    let _ = pods_cell.set(pods.clone());
    let controller = Arc::new(Controller {
        recorder: Recorder::new(client.clone(), COMPONENT, None),
        client: client.clone(),
        jobs: jobs.clone(),
        pods: pods.clone(),
        memory,
    });
    let ttl_ctl = Arc::new(ttl::Controller::new(client.clone()));
    tokio::join!(
        reconcile_loop(COMPONENT, jobs.clone(), triggers, controller.clone(), reconcile, ctx.cancel.clone()),
        reconcile_loop("job-orphan-pods", pods, orphan_triggers, controller, reconcile_orphan_pod, ctx.cancel.clone()),
        reconcile_loop(ttl::COMPONENT, jobs, ttl_triggers, ttl_ctl, ttl::reconcile, ctx.cancel.clone()),
    );
}

/// One sync of one Job.
pub async fn reconcile(job: Arc<Job>, ctl: Arc<Controller>) -> Result<Action, Error> {
    let now = Timestamp::now();
    let ns = job.namespace().unwrap_or_default();
    let name = job.name_any();
    let pods_api: Api<Pod> = Api::namespaced(ctl.client.clone(), &ns);
    let jobs_api: Api<Job> = Api::namespaced(ctl.client.clone(), &ns);
    let managed_elsewhere =
        job.spec.as_ref().and_then(|s| s.managed_by.as_deref()).is_some_and(|m| m != logic::JOB_CONTROLLER_NAME);
    if managed_elsewhere || is_finished(&job) {
        if is_finished(&job) {
            ctl.memory.forget(&job_key(Some(&ns), &name));
        }
        return Ok(Action::await_change());
    }
    let sel = job.spec.as_ref().and_then(|s| s.selector.clone());
    let candidates = informer::list_in(&ctl.pods, &ns, |_| true);
    let owned = owner::claim_all(
        &*job,
        &jobs_api,
        &pods_api,
        candidates,
        |p| selectors::matches(sel.as_ref(), p.metadata.labels.as_ref()),
        Some(TRACKING_FINALIZER),
    )
    .await
    .map_err(|error| Error::Claim { namespace: ns.clone(), name: name.clone(), error })?;
    let owned: Vec<&Pod> = owned.iter().map(|p| &**p).collect();
    let api = KubeJobApi { ctl: &ctl, pods: pods_api, jobs: jobs_api };
    let requeue = sync::sync_job(&api, &ctl.memory, &job, &owned, now).await?;
    Ok(requeue.map_or_else(Action::await_change, |d| Action::requeue(d + std::time::Duration::from_millis(100))))
}

/// `syncOrphanPod`: removes the tracking finalizer from a pod whose Job is gone or finished.
pub async fn reconcile_orphan_pod(pod: Arc<Pod>, ctl: Arc<Controller>) -> Result<Action, Error> {
    if !is_orphan_with_finalizer(&ctl.jobs, &pod) {
        return Ok(Action::await_change());
    }
    if let Some(job) = resolve_job(&ctl.jobs, &pod) {
        if job.spec.as_ref().and_then(|s| s.managed_by.as_deref()).is_some_and(|m| m != logic::JOB_CONTROLLER_NAME) {
            return Ok(Action::await_change());
        }
    }
    let ns = pod.namespace().unwrap_or_default();
    let name = pod.name_any();
    let api: Api<Pod> = Api::namespaced(ctl.client.clone(), &ns);
    match api.patch(&name, &PatchParams::default(), &Patch::Strategic(&remove_finalizer_patch())).await {
        Ok(_) => Ok(Action::await_change()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Action::await_change()),
        Err(error) => Err(Error::OrphanFinalizer { namespace: ns, name, error }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::pods::tests::pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::runtime::reflector;

    fn job_store(finished: bool) -> Store<Job> {
        let (reader, mut writer) = reflector::store::<Job>();
        let mut j = Job {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("pi".into()),
                namespace: Some("ns".into()),
                uid: Some("job-uid".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        if finished {
            j.status = Some(k8s_openapi::api::batch::v1::JobStatus {
                conditions: Some(vec![k8s_openapi::api::batch::v1::JobCondition {
                    type_: "Complete".into(),
                    status: "True".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            });
        }
        writer.apply_watcher_event(&watcher::Event::Apply(j));
        reader
    }

    fn tracked(uid: &str) -> Pod {
        let mut p = pod("p", "n", "Succeeded", None, "2024-05-01T10:00:00Z");
        p.metadata.finalizers = Some(vec![TRACKING_FINALIZER.into()]);
        p.metadata.owner_references = Some(vec![OwnerReference {
            kind: "Job".into(),
            name: "pi".into(),
            uid: uid.into(),
            controller: Some(true),
            ..Default::default()
        }]);
        p
    }

    #[test]
    fn pods_of_gone_or_finished_jobs_are_orphans_needing_finalizer_removal() {
        assert!(!is_orphan_with_finalizer(&job_store(false), &tracked("job-uid")));
        assert!(is_orphan_with_finalizer(&job_store(true), &tracked("job-uid")));
        assert!(is_orphan_with_finalizer(&job_store(false), &tracked("other-uid")));
        let mut plain = tracked("other-uid");
        plain.metadata.finalizers = None;
        assert!(!is_orphan_with_finalizer(&job_store(false), &plain));
    }

    #[test]
    fn observing_a_pod_without_its_finalizer_clears_the_finalizer_expectation() {
        let jobs = job_store(false);
        let mem = Memory::default();
        let (q, mut rx) = informer::Queue::<Job>::new();
        let (oq, _orx) = informer::Queue::<Pod>::new();
        let old = tracked("job-uid");
        mem.finalizers.lock().expect("lock").insert("ns/pi".into(), ["uid-p".to_string()].into());
        let mut new = old.clone();
        new.metadata.finalizers = None;
        new.metadata.resource_version = Some("2".into());
        on_pod_change(Some(&old), Some(&new), &jobs, &mem, &q, &oq);
        assert!(mem.expected_finalizer_removals("ns/pi").is_empty());
        assert!(rx.try_recv().is_ok());
    }
}
