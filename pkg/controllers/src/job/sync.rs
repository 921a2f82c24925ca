//! One sync of one Job (upstream `syncJob`, `manageJob`, `trackJobStatusAndRemoveFinalizers`),
//! written against the [`JobApi`] trait so that tests drive it with an in-memory fake.
//!
//! Pods carry the `batch.kubernetes.io/job-tracking` finalizer while they count: a finished
//! pod is first recorded in `status.uncountedTerminatedPods`, then its finalizer is removed,
//! then it moves into the `succeeded`/`failed` counters; so no pod is counted twice or lost,
//! even when pods are deleted right after finishing. Terminal conditions go through the
//! interim `SuccessCriteriaMet`/`FailureTarget` conditions and are set only once no pod is
//! still terminating, as in v1.35.

use super::logic::*;
use crate::workloads::expectations::Expectations;
use crate::workloads::{pods, time};
use jiff::Timestamp;
use k1s_runtime::api_error::is_namespace_terminating;
use k8s_openapi::api::batch::v1::{Job, JobCondition, UncountedTerminatedPods};
use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector, Pod, PodTemplateSpec};
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

/// The API calls a Job sync makes.
pub trait JobApi {
    fn create_pod(&self, pod: &Pod) -> impl Future<Output = Result<Pod, kube::Error>> + Send;
    fn delete_pod(&self, namespace: &str, name: &str) -> impl Future<Output = Result<(), kube::Error>> + Send;
    /// Removes the tracking finalizer.
    fn remove_finalizer(&self, namespace: &str, name: &str) -> impl Future<Output = Result<(), kube::Error>> + Send;
    fn update_status(&self, job: &Job) -> impl Future<Output = Result<Job, kube::Error>> + Send;
    fn event(&self, job: &Job, warning: bool, reason: &str, message: &str) -> impl Future<Output = ()> + Send;
}

/// Errors of one sync.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("job {job}: creating pods: {error}")]
    CreatePods { job: String, error: kube::Error },
    #[error("job {job}: deleting pods: {error}")]
    DeletePods { job: String, error: kube::Error },
    #[error("job {job}: removing tracking finalizers: {error}")]
    RemoveFinalizers { job: String, error: kube::Error },
    #[error("job {job}: updating status: {error}")]
    UpdateStatus { job: String, error: kube::Error },
}

/// What the controller remembers between syncs, per job key.
#[derive(Default)]
pub struct Memory {
    pub expectations: Expectations,
    /// Pod UIDs whose finalizer removal was requested but not yet observed.
    pub finalizers: Mutex<HashMap<String, HashSet<String>>>,
    pub backoff: Mutex<HashMap<String, BackoffRecord>>,
}

impl Memory {
    pub fn expected_finalizer_removals(&self, key: &str) -> HashSet<String> {
        self.finalizers.lock().map(|m| m.get(key).cloned().unwrap_or_default()).unwrap_or_default()
    }

    fn expect_finalizer_removals(&self, key: &str, uids: &[String]) {
        if let Ok(mut m) = self.finalizers.lock() {
            m.entry(key.to_string()).or_default().extend(uids.iter().cloned());
        }
    }

    /// A pod's finalizer is gone (or the pod is).
    pub fn finalizer_removal_observed(&self, key: &str, uid: &str) {
        if let Ok(mut m) = self.finalizers.lock() {
            if let Some(s) = m.get_mut(key) {
                s.remove(uid);
                if s.is_empty() {
                    m.remove(key);
                }
            }
        }
    }

    /// Forgets a deleted (or finished) job.
    pub fn forget(&self, key: &str) {
        self.expectations.forget(key);
        if let Ok(mut m) = self.finalizers.lock() {
            m.remove(key);
        }
        if let Ok(mut m) = self.backoff.lock() {
            m.remove(key);
        }
    }

    fn backoff_record(&self, key: &str) -> BackoffRecord {
        self.backoff.lock().map(|m| m.get(key).cloned().unwrap_or_default()).unwrap_or_default()
    }

    fn store_backoff(&self, key: &str, r: BackoffRecord) {
        if let Ok(mut m) = self.backoff.lock() {
            m.insert(key.to_string(), r);
        }
    }
}

struct Ctx<'a> {
    job: Job,
    key: String,
    pods: Vec<&'a Pod>,
    active_pods: Vec<&'a Pod>,
    ready: i32,
    terminating: i32,
    uncounted_succeeded: HashSet<String>,
    uncounted_failed: HashSet<String>,
    expected_rm: HashSet<String>,
    succeeded: i32,
    finished: Option<JobCondition>,
    prev_succeeded_indexes: Indexes,
    succeeded_indexes: Indexes,
    new_backoff: BackoffRecord,
    requeue_after: Option<Duration>,
}

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

fn uid(p: &Pod) -> String {
    p.metadata.uid.clone().unwrap_or_default()
}

fn name(p: &Pod) -> String {
    p.metadata.name.clone().unwrap_or_default()
}

fn earliest(a: Option<Duration>, b: Duration) -> Option<Duration> {
    Some(a.map_or(b, |a| a.min(b)))
}

/// Syncs `job` given the pods it owns (adopted ones already carrying the tracking finalizer).
/// Returns when to look again, if a timer (back-off, active deadline) is pending.
pub async fn sync_job<A: JobApi + Sync>(
    api: &A,
    mem: &Memory,
    job: &Job,
    owned: &[&Pod],
    now: Timestamp,
) -> Result<Option<Duration>, SyncError> {
    let key = format!(
        "{}/{}",
        job.metadata.namespace.clone().unwrap_or_default(),
        job.metadata.name.clone().unwrap_or_default()
    );
    if job.spec.as_ref().and_then(|s| s.managed_by.as_deref()).is_some_and(|m| m != JOB_CONTROLLER_NAME) {
        return Ok(None);
    }
    if is_finished(job) {
        mem.forget(&key);
        return Ok(None);
    }
    if let Some(mode) = job.spec.as_ref().and_then(|s| s.completion_mode.as_deref()) {
        if mode != "NonIndexed" && mode != "Indexed" {
            api.event(job, true, "UnknownCompletionMode", "Skipped Job sync because completion mode is unknown").await;
            return Ok(None);
        }
    }
    let mut job = job.clone();
    let status = job.status.get_or_insert_with(Default::default);
    let uncounted = status.uncounted_terminated_pods.get_or_insert_with(UncountedTerminatedPods::default);
    let uncounted_succeeded: HashSet<String> = uncounted.succeeded.iter().flatten().cloned().collect();
    let uncounted_failed: HashSet<String> = uncounted.failed.iter().flatten().cloned().collect();
    let satisfied = mem.expectations.satisfied(&key);
    let active_pods: Vec<&Pod> = owned.iter().copied().filter(|p| pods::is_active(p)).collect();
    let mut c = Ctx {
        key: key.clone(),
        pods: owned.to_vec(),
        ready: count(active_pods.iter().filter(|p| pods::is_ready(p)).count()),
        terminating: count(owned.iter().filter(|p| pods::is_terminating(p)).count()),
        active_pods,
        uncounted_succeeded,
        uncounted_failed,
        expected_rm: mem.expected_finalizer_removals(&key),
        succeeded: 0,
        finished: None,
        prev_succeeded_indexes: Indexes::default(),
        succeeded_indexes: Indexes::default(),
        new_backoff: BackoffRecord::default(),
        requeue_after: None,
        job,
    };
    let mut active = count(c.active_pods.len());
    let indexed = is_indexed(&c.job);
    let completions_n = completions(&c.job);
    // Newly finished pods not yet accounted for (still carrying the finalizer).
    let valid = |p: &&Pod| {
        let u = uid(p);
        has_tracking_finalizer(p)
            && !c.expected_rm.contains(&u)
            && (!indexed || completion_index(p).is_some_and(|i| i < completions_n.unwrap_or(0)))
    };
    let new_succeeded: Vec<&Pod> = c
        .pods
        .iter()
        .copied()
        .filter(valid)
        .filter(|p| !c.uncounted_succeeded.contains(&uid(p)) && pods::pod_phase(p) == "Succeeded")
        .collect();
    let new_failed: Vec<&Pod> = c
        .pods
        .iter()
        .copied()
        .filter(valid)
        .filter(|p| !c.uncounted_failed.contains(&uid(p)) && is_pod_failed(p, &c.job))
        .collect();
    let policy = c.job.spec.as_ref().and_then(|s| s.pod_failure_policy.clone());
    let counted_failed = new_failed.iter().filter(|p| match_pod_failure_policy(policy.as_ref(), p).count).count();
    let st = c.job.status.clone().unwrap_or_default();
    c.succeeded = st.succeeded.unwrap_or(0) + count(new_succeeded.len()) + count(c.uncounted_succeeded.len());
    let failed = st.failed.unwrap_or(0) + count(counted_failed) + count(c.uncounted_failed.len());
    if st.start_time.is_none() && !is_suspended(&c.job) {
        c.job.status.get_or_insert_with(Default::default).start_time = Some(time::api_time(now));
    }
    c.new_backoff = mem.backoff_record(&key).with_new_pods(&new_succeeded, &new_failed);

    // Terminal condition, if any.
    c.finished = condition(&c.job, "SuccessCriteriaMet").filter(|x| x.status == "True").cloned();
    if c.finished.is_none() {
        if let Some(ft) = condition(&c.job, "FailureTarget").filter(|x| x.status == "True") {
            c.finished = Some(new_condition(
                "Failed",
                "True",
                ft.reason.as_deref().unwrap_or_default(),
                ft.message.as_deref().unwrap_or_default(),
                now,
            ));
        } else if let Some(msg) = c
            .pods
            .iter()
            .filter(|p| is_pod_failed(p, &c.job))
            .find_map(|p| match_pod_failure_policy(policy.as_ref(), p).fail_job_message)
        {
            c.finished = Some(new_condition("FailureTarget", "True", "PodFailurePolicy", &msg, now));
        }
    }
    if c.finished.is_none() {
        let start = c.job.status.as_ref().and_then(|s| s.start_time.clone()).map(|t| t.0);
        let deadline = c.job.spec.as_ref().and_then(|s| s.active_deadline_seconds);
        let past_deadline = match (deadline, start) {
            (Some(d), Some(s)) if !is_suspended(&c.job) => time::add_secs(s, d) <= now,
            _ => false,
        };
        if failed > backoff_limit(&c.job) || past_backoff_limit_on_failure(&c.job, &c.pods) {
            c.finished = Some(new_condition(
                "FailureTarget",
                "True",
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
                now,
            ));
        } else if past_deadline {
            c.finished = Some(new_condition(
                "FailureTarget",
                "True",
                "DeadlineExceeded",
                "Job was active longer than specified deadline",
                now,
            ));
        } else if let (Some(d), Some(s)) = (deadline, start) {
            if !is_suspended(&c.job) {
                let left = time::to_std(time::between(now, time::add_secs(s, d)));
                c.requeue_after = earliest(c.requeue_after, left);
            }
        }
    }
    if indexed {
        let completions_n = completions_n.unwrap_or(0);
        let prev = Indexes::parse(&st.completed_indexes.clone().unwrap_or_default(), completions_n);
        let mut all = prev.clone();
        for p in c.pods.iter().filter(|p| pods::pod_phase(p) == "Succeeded" && has_tracking_finalizer(p)) {
            if let Some(i) = completion_index(p).filter(|i| *i < completions_n) {
                all.0.insert(i);
            }
        }
        c.prev_succeeded_indexes = prev;
        c.succeeded = count(all.total());
        c.succeeded_indexes = all;
        if c.finished.is_none() {
            let sp = c.job.spec.as_ref().and_then(|s| s.success_policy.clone());
            if let Some(msg) = match_success_policy(sp.as_ref(), completions_n, &c.succeeded_indexes) {
                c.finished = Some(new_condition("SuccessCriteriaMet", "True", "SuccessPolicy", &msg, now));
            }
        }
    }

    let mut manage_err = None;
    let mut suspend_changed = false;
    if c.finished.is_some() {
        // The job is over: delete what still runs (finalizers go in the tracking step).
        let mut deleted = 0;
        let mut deleted_ready = 0;
        for p in c.active_pods.clone() {
            match api.delete_pod(p.metadata.namespace.as_deref().unwrap_or_default(), &name(p)).await {
                Ok(()) => {
                    deleted += 1;
                    if pods::is_ready(p) {
                        deleted_ready += 1;
                    }
                }
                Err(e) if matches!(&e, kube::Error::Api(s) if s.code == 404) => deleted += 1,
                Err(e) => {
                    manage_err.get_or_insert(SyncError::DeletePods { job: key.clone(), error: e });
                }
            }
        }
        if deleted != active || !satisfied {
            c.finished = None;
        }
        active -= deleted;
        c.terminating += deleted;
        c.ready -= deleted_ready;
    } else {
        let mut manage_called = false;
        if satisfied && c.job.metadata.deletion_timestamp.is_none() {
            let (a, err) = manage_job(api, mem, &mut c, now).await;
            active = a;
            manage_err = err;
            manage_called = true;
        }
        let complete = match completions_n {
            None => c.succeeded > 0 && active == 0,
            Some(n) => c.succeeded >= n && active == 0,
        };
        if complete {
            c.finished = Some(new_condition(
                "SuccessCriteriaMet",
                "True",
                "CompletionsReached",
                "Reached expected number of succeeded pods",
                now,
            ));
        } else if manage_called {
            let suspended = is_suspended(&c.job);
            let status = c.job.status.get_or_insert_with(Default::default);
            let conditions = status.conditions.get_or_insert_with(Vec::new);
            let event = if suspended {
                ensure_condition(conditions, "Suspended", "True", "JobSuspended", "Job suspended", now)
                    .then_some(("Suspended", "Job suspended"))
            } else {
                let resumed = ensure_condition(conditions, "Suspended", "False", "JobResumed", "Job resumed", now);
                if resumed {
                    status.start_time = Some(time::api_time(now));
                }
                resumed.then_some(("Resumed", "Job resumed"))
            };
            if status.conditions.as_ref().is_some_and(Vec::is_empty) {
                status.conditions = None;
            }
            if let Some((reason, message)) = event {
                suspend_changed = true;
                api.event(&c.job, false, reason, message).await;
            }
        }
    }
    let st = c.job.status.get_or_insert_with(Default::default);
    let needs_update = suspend_changed
        || st.active.unwrap_or(0) != active
        || st.ready != Some(c.ready)
        || st.terminating != Some(c.terminating);
    st.active = Some(active);
    st.ready = Some(c.ready);
    st.terminating = Some(c.terminating);
    track_and_remove_finalizers(api, mem, &mut c, needs_update, now).await?;
    match manage_err {
        Some(e) => Err(e),
        None => Ok(c.requeue_after),
    }
}

/// `manageJob`: creates or deletes pods towards the wanted number of active pods. Returns the
/// number of active pods afterwards.
async fn manage_job<A: JobApi + Sync>(
    api: &A,
    mem: &Memory,
    c: &mut Ctx<'_>,
    now: Timestamp,
) -> (i32, Option<SyncError>) {
    let mut active = count(c.active_pods.len());
    let key = c.key.clone();
    if is_suspended(&c.job) {
        let to_delete = pods_for_removal(&c.job, &c.active_pods, c.active_pods.len());
        let (removed, removed_ready, err) = delete_job_pods(api, mem, c, &to_delete).await;
        active -= removed;
        c.terminating += removed;
        c.ready -= removed_ready;
        return (active, err);
    }
    let parallelism = parallelism(&c.job);
    let want = match completions(&c.job) {
        None => {
            if c.succeeded > 0 {
                active
            } else {
                parallelism
            }
        }
        Some(n) => (n - c.succeeded).min(parallelism).max(0),
    };
    let rm_at_least = usize::try_from((active - want).max(0)).unwrap_or(0);
    let mut to_delete = pods_for_removal(&c.job, &c.active_pods, rm_at_least);
    to_delete.truncate(MAX_POD_CREATE_DELETE_PER_SYNC);
    if !to_delete.is_empty() {
        let (removed, removed_ready, err) = delete_job_pods(api, mem, c, &to_delete).await;
        active -= removed;
        c.terminating += removed;
        c.ready -= removed_ready;
        return (active, err);
    }
    let terminating = if only_replace_failed_pods(&c.job) { c.terminating } else { 0 };
    let mut diff = want - terminating - active;
    if diff <= 0 {
        return (active, None);
    }
    let remaining = c.new_backoff.remaining(now);
    if !remaining.is_zero() {
        c.requeue_after = earliest(c.requeue_after, remaining);
        return (active, None);
    }
    diff = diff.min(count(MAX_POD_CREATE_DELETE_PER_SYNC));
    let mut indexes: Vec<Option<i32>> = vec![None; usize::try_from(diff).unwrap_or(0)];
    if is_indexed(&c.job) {
        let pending = first_pending_indexes(
            &c.active_pods,
            &c.succeeded_indexes,
            indexes.len(),
            completions(&c.job).unwrap_or(0),
        );
        indexes = pending.into_iter().map(Some).collect();
    }
    mem.expectations.expect_creations(&key, indexes.len());
    let total = indexes.len();
    let mut template = c.job.spec.as_ref().map(|s| s.template.clone()).unwrap_or_default();
    if is_indexed(&c.job) {
        add_completion_index_env(&mut template);
    }
    let md = template.metadata.get_or_insert_with(Default::default);
    let fins = md.finalizers.get_or_insert_with(Vec::new);
    if !fins.iter().any(|f| f == TRACKING_FINALIZER) {
        fins.push(TRACKING_FINALIZER.to_string());
    }
    let job_name = c.job.metadata.name.clone().unwrap_or_default();
    let ns = c.job.metadata.namespace.clone().unwrap_or_default();
    let owner = crate::workloads::owner::controller_ref(&c.job);
    let mut done = 0;
    let mut err = None;
    for batch in crate::replicaset::slow_start_batches(total) {
        let chunk: Vec<Option<i32>> = indexes[done..done + batch].to_vec();
        let pods: Vec<Pod> = chunk
            .iter()
            .map(|ix| {
                let mut t = template.clone();
                let generate = match ix {
                    Some(i) => {
                        let md = t.metadata.get_or_insert_with(Default::default);
                        md.annotations
                            .get_or_insert_with(Default::default)
                            .insert(COMPLETION_INDEX.into(), i.to_string());
                        md.labels.get_or_insert_with(Default::default).insert(COMPLETION_INDEX.into(), i.to_string());
                        if let Some(s) = t.spec.as_mut() {
                            s.hostname = Some(format!("{job_name}-{i}"));
                        }
                        format!("{job_name}-{i}-")
                    }
                    None => format!("{job_name}-"),
                };
                pods::from_template(&t, &ns, None, Some(generate), owner.clone())
            })
            .collect();
        let results = futures::future::join_all(pods.iter().map(|p| api.create_pod(p))).await;
        let mut batch_failed = false;
        let mut events: Vec<(bool, &str, String)> = Vec::new();
        for r in results {
            match r {
                Ok(p) => events.push((false, "SuccessfulCreate", format!("Created pod: {}", name(&p)))),
                Err(e) => {
                    mem.expectations.creation_observed(&key);
                    active -= 1;
                    if is_namespace_terminating(&e) {
                        continue;
                    }
                    events.push((true, "FailedCreate", format!("Error creating: {e}")));
                    batch_failed = true;
                    err.get_or_insert(SyncError::CreatePods { job: key.clone(), error: e });
                }
            }
        }
        let job = &c.job;
        futures::future::join_all(events.iter().map(|(w, r, m)| api.event(job, *w, r, m))).await;
        active += count(batch);
        done += batch;
        if batch_failed {
            for _ in done..total {
                mem.expectations.creation_observed(&key);
            }
            break;
        }
    }
    (active, err)
}

/// `addCompletionIndexEnvVariables`: `JOB_COMPLETION_INDEX` from the annotation.
pub fn add_completion_index_env(t: &mut PodTemplateSpec) {
    let Some(spec) = t.spec.as_mut() else { return };
    for c in spec.init_containers.iter_mut().flatten().chain(spec.containers.iter_mut()) {
        let env = c.env.get_or_insert_with(Vec::new);
        if env.iter().any(|e| e.name == COMPLETION_INDEX_ENV) {
            continue;
        }
        env.push(EnvVar {
            name: COMPLETION_INDEX_ENV.into(),
            value: None,
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    api_version: None,
                    field_path: format!("metadata.annotations['{COMPLETION_INDEX}']"),
                }),
                ..Default::default()
            }),
        });
    }
}

/// `deleteJobPods`: removes the finalizer (the pod will not count) and deletes. Returns
/// (removed, removed ready, first error).
async fn delete_job_pods<A: JobApi + Sync>(
    api: &A,
    mem: &Memory,
    c: &Ctx<'_>,
    to_delete: &[&Pod],
) -> (i32, i32, Option<SyncError>) {
    mem.expectations.expect_deletion_count(&c.key, to_delete.len());
    let mut removed = 0;
    let mut ready = 0;
    let mut err = None;
    for p in to_delete {
        let ns = p.metadata.namespace.clone().unwrap_or_default();
        let n = name(p);
        let mut r = Ok(());
        if has_tracking_finalizer(p) {
            r = api.remove_finalizer(&ns, &n).await;
        }
        if r.is_ok() {
            r = api.delete_pod(&ns, &n).await;
        }
        match r {
            Ok(()) => {
                removed += 1;
                if pods::is_ready(p) {
                    ready += 1;
                }
                api.event(&c.job, false, "SuccessfulDelete", &format!("Deleted pod: {n}")).await;
            }
            Err(e) => {
                mem.expectations.deletion_observed(&c.key, "");
                if !matches!(&e, kube::Error::Api(s) if s.code == 404) {
                    err.get_or_insert(SyncError::DeletePods { job: c.key.clone(), error: e });
                }
            }
        }
    }
    (removed, ready, err)
}

/// Moves uncounted UIDs whose pods no longer carry the finalizer into the counters.
fn clean_uncounted(job: &mut Job, with_finalizer: &HashSet<String>) -> bool {
    let st = job.status.get_or_insert_with(Default::default);
    let u = st.uncounted_terminated_pods.get_or_insert_with(Default::default);
    let mut changed = false;
    let succeeded = u.succeeded.take().unwrap_or_default();
    let (keep, gone): (Vec<String>, Vec<String>) = succeeded.into_iter().partition(|x| with_finalizer.contains(x));
    if !gone.is_empty() {
        changed = true;
        st.succeeded = Some(st.succeeded.unwrap_or(0) + count(gone.len()));
    }
    u.succeeded = Some(keep);
    let failed = u.failed.take().unwrap_or_default();
    let (keep, gone): (Vec<String>, Vec<String>) = failed.into_iter().partition(|x| with_finalizer.contains(x));
    if !gone.is_empty() {
        changed = true;
        st.failed = Some(st.failed.unwrap_or(0) + count(gone.len()));
    }
    u.failed = Some(keep);
    changed
}

fn normalize_status(job: &mut Job) {
    if let Some(st) = job.status.as_mut() {
        if let Some(u) = st.uncounted_terminated_pods.as_mut() {
            if u.succeeded.as_ref().is_some_and(Vec::is_empty) {
                u.succeeded = None;
            }
            if u.failed.as_ref().is_some_and(Vec::is_empty) {
                u.failed = None;
            }
        }
    }
}

async fn flush<A: JobApi + Sync>(api: &A, c: &mut Ctx<'_>) -> Result<(), SyncError> {
    normalize_status(&mut c.job);
    c.job = api.update_status(&c.job).await.map_err(|error| SyncError::UpdateStatus { job: c.key.clone(), error })?;
    Ok(())
}

async fn track_and_remove_finalizers<A: JobApi + Sync>(
    api: &A,
    mem: &Memory,
    c: &mut Ctx<'_>,
    mut needs_flush: bool,
    now: Timestamp,
) -> Result<(), SyncError> {
    let indexed = is_indexed(&c.job);
    let completions_n = completions(&c.job).unwrap_or(0);
    let mut ordered = c.pods.clone();
    if indexed {
        ordered.sort_by_key(|p| completion_index(p).unwrap_or(i32::MAX));
    }
    let mut with_finalizer: HashSet<String> = ordered
        .iter()
        .filter(|p| has_tracking_finalizer(p) && !c.expected_rm.contains(&uid(p)))
        .map(|p| uid(p))
        .collect();
    if clean_uncounted(&mut c.job, &with_finalizer) {
        needs_flush = true;
    }
    let policy = c.job.spec.as_ref().and_then(|s| s.pod_failure_policy.clone());
    let finished_is_success = c.finished.as_ref().is_some_and(|f| f.type_ == "SuccessCriteriaMet");
    let mut to_remove: Vec<&Pod> = Vec::new();
    let mut new_indexes: Vec<i32> = Vec::new();
    let mut reached_max = false;
    for p in &ordered {
        let u = uid(p);
        if !has_tracking_finalizer(p) || c.expected_rm.contains(&u) {
            continue;
        }
        let failed = is_pod_failed(p, &c.job);
        let can_remove = c.job.metadata.deletion_timestamp.is_some()
            || c.finished.is_some()
            || pods::pod_phase(p) == "Succeeded"
            || failed;
        if !can_remove {
            continue;
        }
        to_remove.push(p);
        let st = c.job.status.get_or_insert_with(Default::default);
        let un = st.uncounted_terminated_pods.get_or_insert_with(Default::default);
        if pods::pod_phase(p) == "Succeeded" && !c.uncounted_failed.contains(&u) {
            if indexed {
                if let Some(i) = completion_index(p).filter(|i| *i < completions_n) {
                    if !c.prev_succeeded_indexes.has(i) {
                        new_indexes.push(i);
                        needs_flush = true;
                    }
                }
            } else if !c.uncounted_succeeded.contains(&u) {
                needs_flush = true;
                un.succeeded.get_or_insert_with(Vec::new).push(u.clone());
            }
        } else if failed || (c.finished.is_some() && !finished_is_success) {
            let ix_ok = !indexed || completion_index(p).is_some_and(|i| i < completions_n);
            if !c.uncounted_failed.contains(&u) && ix_ok && match_pod_failure_policy(policy.as_ref(), p).count {
                needs_flush = true;
                un.failed.get_or_insert_with(Vec::new).push(u.clone());
            }
        }
        let uncounted_len = un.succeeded.as_ref().map_or(0, Vec::len) + un.failed.as_ref().map_or(0, Vec::len);
        if new_indexes.len() + uncounted_len >= MAX_UNCOUNTED_PODS {
            reached_max = true;
            break;
        }
    }
    if indexed {
        for i in new_indexes {
            c.succeeded_indexes.0.insert(i);
        }
        let rendered = c.succeeded_indexes.render();
        let st = c.job.status.get_or_insert_with(Default::default);
        if st.completed_indexes.clone().unwrap_or_default() != rendered {
            needs_flush = true;
        }
        st.succeeded = Some(count(c.succeeded_indexes.total()));
        st.completed_indexes = Some(rendered);
    }
    if let Some(f) = c.finished.clone() {
        let conditions = c.job.status.get_or_insert_with(Default::default).conditions.get_or_insert_with(Vec::new);
        if f.type_ == "FailureTarget" {
            conditions.push(f.clone());
            needs_flush = true;
            c.finished = Some(new_condition(
                "Failed",
                "True",
                f.reason.as_deref().unwrap_or_default(),
                f.message.as_deref().unwrap_or_default(),
                now,
            ));
        } else if f.type_ == "SuccessCriteriaMet" {
            if !conditions.iter().any(|x| x.type_ == "SuccessCriteriaMet" && x.status == "True") {
                conditions.push(f.clone());
                needs_flush = true;
            }
            c.finished = Some(new_condition(
                "Complete",
                "True",
                f.reason.as_deref().unwrap_or_default(),
                f.message.as_deref().unwrap_or_default(),
                now,
            ));
        }
    }
    // Flush the uncounted UIDs and interim conditions before touching finalizers.
    if needs_flush {
        flush(api, c).await?;
        mem.store_backoff(&c.key, c.new_backoff.clone());
        needs_flush = false;
    }
    let mut rm_err = None;
    if !to_remove.is_empty() {
        let uids: Vec<String> = to_remove.iter().map(|p| uid(p)).collect();
        mem.expect_finalizer_removals(&c.key, &uids);
        let results = futures::future::join_all(to_remove.iter().map(|p| {
            let ns = p.metadata.namespace.clone().unwrap_or_default();
            let n = name(p);
            async move { api.remove_finalizer(&ns, &n).await }
        }))
        .await;
        for (p, r) in to_remove.iter().zip(results) {
            match r {
                Ok(()) => {
                    with_finalizer.remove(&uid(p));
                }
                Err(e) => {
                    mem.finalizer_removal_observed(&c.key, &uid(p));
                    if matches!(&e, kube::Error::Api(s) if s.code == 404) {
                        with_finalizer.remove(&uid(p));
                    } else {
                        rm_err.get_or_insert(SyncError::RemoveFinalizers { job: c.key.clone(), error: e });
                    }
                }
            }
        }
    }
    if clean_uncounted(&mut c.job, &with_finalizer) {
        needs_flush = true;
    }
    if let Some(e) = rm_err {
        if needs_flush {
            flush(api, c).await?;
        }
        return Err(e);
    }
    // enactJobFinished.
    let mut finished = false;
    if let Some(f) = c.finished.clone().filter(|_| !reached_max) {
        let st = c.job.status.get_or_insert_with(Default::default);
        let un = st.uncounted_terminated_pods.clone().unwrap_or_default();
        let uncounted = un.succeeded.as_ref().map_or(0, Vec::len) + un.failed.as_ref().map_or(0, Vec::len);
        if uncounted == 0 && st.terminating.unwrap_or(0) == 0 {
            let conditions = st.conditions.get_or_insert_with(Vec::new);
            ensure_condition(
                conditions,
                &f.type_,
                &f.status,
                f.reason.as_deref().unwrap_or_default(),
                f.message.as_deref().unwrap_or_default(),
                now,
            );
            if f.type_ == "Complete" {
                st.completion_time =
                    conditions.iter().find(|x| x.type_ == "Complete").and_then(|x| x.last_transition_time.clone());
            }
            finished = true;
            needs_flush = true;
        }
    }
    if needs_flush {
        flush(api, c).await?;
        if finished {
            if let Some(f) = &c.finished {
                if f.type_ == "Complete" {
                    let st = c.job.status.clone().unwrap_or_default();
                    if completions(&c.job).is_some_and(|n| st.succeeded.unwrap_or(0) > n) {
                        api.event(
                            &c.job,
                            true,
                            "TooManySucceededPods",
                            "Too many succeeded pods running after completion count reached",
                        )
                        .await;
                    }
                    api.event(&c.job, false, "Completed", "Job completed").await;
                } else {
                    api.event(
                        &c.job,
                        true,
                        f.reason.as_deref().unwrap_or_default(),
                        f.message.as_deref().unwrap_or_default(),
                    )
                    .await;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::pods::tests::{pod, ts};
    use k8s_openapi::api::batch::v1::JobSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

    /// An in-memory API: records calls, numbers created pods.
    #[derive(Default)]
    struct Fake {
        created: Mutex<Vec<Pod>>,
        deleted: Mutex<Vec<String>>,
        unfinalized: Mutex<Vec<String>>,
        statuses: Mutex<Vec<Job>>,
        events: Mutex<Vec<String>>,
    }

    impl JobApi for Fake {
        async fn create_pod(&self, pod: &Pod) -> Result<Pod, kube::Error> {
            let mut v = self.created.lock().expect("lock");
            let mut p = pod.clone();
            p.metadata.name = Some(format!("{}{}", pod.metadata.generate_name.clone().unwrap_or_default(), v.len()));
            v.push(p.clone());
            Ok(p)
        }
        async fn delete_pod(&self, _ns: &str, name: &str) -> Result<(), kube::Error> {
            self.deleted.lock().expect("lock").push(name.into());
            Ok(())
        }
        async fn remove_finalizer(&self, _ns: &str, name: &str) -> Result<(), kube::Error> {
            self.unfinalized.lock().expect("lock").push(name.into());
            Ok(())
        }
        async fn update_status(&self, job: &Job) -> Result<Job, kube::Error> {
            self.statuses.lock().expect("lock").push(job.clone());
            Ok(job.clone())
        }
        async fn event(&self, _job: &Job, _warning: bool, reason: &str, message: &str) {
            self.events.lock().expect("lock").push(format!("{reason}: {message}"));
        }
    }

    impl Fake {
        fn last_status(&self) -> k8s_openapi::api::batch::v1::JobStatus {
            self.statuses.lock().expect("lock").last().and_then(|j| j.status.clone()).expect("a status update")
        }
        fn condition_types(&self) -> Vec<String> {
            self.last_status().conditions.unwrap_or_default().into_iter().map(|c| c.type_).collect()
        }
    }

    const NOW: &str = "2024-05-01T12:00:00Z";

    fn job(completions: Option<i32>, parallelism: i32) -> Job {
        Job {
            metadata: ObjectMeta {
                name: Some("pi".into()),
                namespace: Some("ns".into()),
                uid: Some("job-uid".into()),
                ..Default::default()
            },
            spec: Some(JobSpec {
                completions,
                parallelism: Some(parallelism),
                backoff_limit: Some(6),
                completion_mode: Some("NonIndexed".into()),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn owned(mut p: Pod, tracked: bool) -> Pod {
        p.metadata.owner_references = Some(vec![OwnerReference {
            kind: "Job".into(),
            name: "pi".into(),
            uid: "job-uid".into(),
            controller: Some(true),
            ..Default::default()
        }]);
        if tracked {
            p.metadata.finalizers = Some(vec![TRACKING_FINALIZER.into()]);
        }
        p
    }

    #[tokio::test]
    async fn a_new_job_creates_parallelism_pods_with_the_tracking_finalizer() {
        let api = Fake::default();
        let mem = Memory::default();
        sync_job(&api, &mem, &job(Some(5), 2), &[], ts(NOW)).await.expect("sync");
        let created = api.created.lock().expect("lock").clone();
        assert_eq!(created.len(), 2);
        assert_eq!(created[0].metadata.generate_name.as_deref(), Some("pi-"));
        assert!(has_tracking_finalizer(&created[0]));
        let st = api.last_status();
        assert_eq!((st.active, st.ready, st.terminating), (Some(2), Some(0), Some(0)));
        assert!(st.start_time.is_some());
        assert!(!mem.expectations.satisfied("ns/pi"));
    }

    #[tokio::test]
    async fn succeeded_pods_are_counted_through_uncounted_then_the_job_completes() {
        let api = Fake::default();
        let mem = Memory::default();
        let mut j = job(Some(2), 2);
        j.status = Some(k8s_openapi::api::batch::v1::JobStatus {
            start_time: Some(time::api_time(ts("2024-05-01T11:00:00Z"))),
            active: Some(2),
            ..Default::default()
        });
        let a = owned(pod("a", "n", "Succeeded", None, NOW), true);
        let b = owned(pod("b", "n", "Succeeded", None, NOW), true);
        sync_job(&api, &mem, &j, &[&a, &b], ts(NOW)).await.expect("sync");
        // First flush records the UIDs as uncounted plus SuccessCriteriaMet; then finalizers go.
        let first = api.statuses.lock().expect("lock")[0].status.clone().expect("status");
        let un = first.uncounted_terminated_pods.expect("uncounted");
        assert_eq!(un.succeeded.map(|v| v.len()), Some(2));
        assert_eq!(api.unfinalized.lock().expect("lock").clone(), ["a", "b"]);
        let st = api.last_status();
        assert_eq!(st.succeeded, Some(2));
        assert_eq!(api.condition_types(), ["SuccessCriteriaMet", "Complete"]);
        assert!(st.completion_time.is_some());
        assert!(api.events.lock().expect("lock").contains(&"Completed: Job completed".to_string()));
    }

    #[tokio::test]
    async fn failures_beyond_the_backoff_limit_fail_the_job() {
        let api = Fake::default();
        let mem = Memory::default();
        let mut j = job(Some(1), 1);
        j.spec.as_mut().expect("spec").backoff_limit = Some(0);
        let f = owned(pod("f", "n", "Failed", None, NOW), true);
        sync_job(&api, &mem, &j, &[&f], ts(NOW)).await.expect("sync");
        let types = api.condition_types();
        assert_eq!(types, ["FailureTarget", "Failed"]);
        let st = api.last_status();
        assert_eq!(st.failed, Some(1));
        let failed = st.conditions.unwrap_or_default().into_iter().find(|c| c.type_ == "Failed").expect("failed");
        assert_eq!(failed.reason.as_deref(), Some("BackoffLimitExceeded"));
        assert!(api.created.lock().expect("lock").is_empty());
    }

    #[tokio::test]
    async fn a_failed_pod_delays_its_replacement_by_the_backoff() {
        let api = Fake::default();
        let mem = Memory::default();
        let mut j = job(Some(1), 1);
        j.status = Some(k8s_openapi::api::batch::v1::JobStatus {
            start_time: Some(time::api_time(ts("2024-05-01T11:00:00Z"))),
            ..Default::default()
        });
        let mut f = owned(pod("f", "n", "Failed", None, "2024-05-01T11:59:00Z"), true);
        f.metadata.creation_timestamp = Some(time::api_time(ts("2024-05-01T11:59:58Z")));
        let requeue = sync_job(&api, &mem, &j, &[&f], ts(NOW)).await.expect("sync");
        assert!(api.created.lock().expect("lock").is_empty());
        assert_eq!(requeue, Some(Duration::from_secs(8)));
        assert_eq!(api.last_status().failed, Some(1));
    }

    #[tokio::test]
    async fn suspending_deletes_active_pods_and_sets_the_condition() {
        let api = Fake::default();
        let mem = Memory::default();
        let mut j = job(Some(3), 2);
        j.spec.as_mut().expect("spec").suspend = Some(true);
        let a = owned(pod("a", "n", "Running", None, NOW), true);
        sync_job(&api, &mem, &j, &[&a], ts(NOW)).await.expect("sync");
        assert_eq!(api.deleted.lock().expect("lock").clone(), ["a"]);
        assert_eq!(api.unfinalized.lock().expect("lock").clone(), ["a"]);
        assert_eq!(api.condition_types(), ["Suspended"]);
        assert_eq!(api.last_status().active, Some(0));
    }

    #[tokio::test]
    async fn the_active_deadline_fails_the_job_and_deletes_its_pods() {
        let api = Fake::default();
        let mem = Memory::default();
        let mut j = job(Some(1), 1);
        j.spec.as_mut().expect("spec").active_deadline_seconds = Some(60);
        j.status = Some(k8s_openapi::api::batch::v1::JobStatus {
            start_time: Some(time::api_time(ts("2024-05-01T11:58:00Z"))),
            active: Some(1),
            ..Default::default()
        });
        let a = owned(pod("a", "n", "Running", None, NOW), true);
        sync_job(&api, &mem, &j, &[&a], ts(NOW)).await.expect("sync");
        assert_eq!(api.deleted.lock().expect("lock").clone(), ["a"]);
        // The pod is still terminating: only the interim FailureTarget is recorded.
        assert_eq!(api.condition_types(), ["FailureTarget"]);
        assert_eq!(api.last_status().terminating, Some(1));
    }

    #[tokio::test]
    async fn indexed_jobs_create_one_pod_per_pending_index() {
        let api = Fake::default();
        let mem = Memory::default();
        let mut j = job(Some(3), 3);
        j.spec.as_mut().expect("spec").completion_mode = Some("Indexed".into());
        j.spec.as_mut().expect("spec").template.spec = Some(k8s_openapi::api::core::v1::PodSpec {
            containers: vec![k8s_openapi::api::core::v1::Container { name: "c".into(), ..Default::default() }],
            ..Default::default()
        });
        let mut done = owned(pod("d", "n", "Succeeded", None, NOW), true);
        done.metadata.annotations = Some([(COMPLETION_INDEX.to_string(), "1".to_string())].into());
        sync_job(&api, &mem, &j, &[&done], ts(NOW)).await.expect("sync");
        let created = api.created.lock().expect("lock").clone();
        let idx: Vec<String> = created
            .iter()
            .map(|p| p.metadata.annotations.as_ref().and_then(|a| a.get(COMPLETION_INDEX)).cloned().unwrap_or_default())
            .collect();
        assert_eq!(idx, ["0", "2"]);
        assert_eq!(created[0].metadata.generate_name.as_deref(), Some("pi-0-"));
        assert_eq!(created[1].spec.as_ref().and_then(|s| s.hostname.as_deref()), Some("pi-2"));
        let env = &created[0].spec.as_ref().expect("spec").containers[0].env;
        assert!(env.iter().flatten().any(|e| e.name == COMPLETION_INDEX_ENV));
        assert_eq!(api.last_status().completed_indexes.as_deref(), Some("1"));
    }

    #[tokio::test]
    async fn jobs_managed_by_another_controller_are_left_alone() {
        let api = Fake::default();
        let mut j = job(Some(1), 1);
        j.spec.as_mut().expect("spec").managed_by = Some("example.com/other".into());
        sync_job(&api, &Memory::default(), &j, &[], ts(NOW)).await.expect("sync");
        assert!(api.created.lock().expect("lock").is_empty() && api.statuses.lock().expect("lock").is_empty());
    }
}
