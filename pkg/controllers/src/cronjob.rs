//! The CronJob controller (upstream `pkg/controller/cronjob`, the v2 controller): at each time
//! the schedule (`spec.schedule` in `spec.timeZone`, or a `CRON_TZ=`/`TZ=` prefix, or the
//! controller's local zone) names, creates the Job `<cronjob>-<scheduled minutes since epoch>`
//! from the template, unless the start is later than `startingDeadlineSeconds`, the CronJob is
//! suspended, or `concurrencyPolicy: Forbid` and a Job still runs (`Replace` deletes the running
//! ones first). Keeps `status.active`, `lastScheduleTime` and `lastSuccessfulTime`, deletes the
//! oldest finished Jobs beyond the history limits, and requeues itself for the next schedule
//! time instead of polling.

use crate::workloads::cron::{self, Schedule};
use crate::workloads::{owner, time};
use crate::Context;
use jiff::tz::TimeZone;
use jiff::Timestamp;
use k1s_runtime::api_error::is_namespace_terminating;
use k1s_runtime::controller::Controller as Runtime;
use k1s_runtime::events::{EventType, Recorder};
use k1s_runtime::informer;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, PostParams, PropagationPolicy};
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store;
use kube::ResourceExt;
use std::sync::Arc;
use std::time::Duration;

const COMPONENT: &str = "cronjob-controller";
/// Padding added to requeues so that they land just after the scheduled time.
const NEXT_SCHEDULE_DELTA: Duration = Duration::from_millis(100);
/// The annotation with the scheduled time, on Jobs created by a CronJob.
pub const SCHEDULED_TIMESTAMP: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// How many start times were missed since the last one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missed {
    None,
    Few,
    Many,
}

/// `formatSchedule`: the schedule with the time zone applied.
pub fn format_schedule(cj: &CronJob) -> String {
    let spec = cj.spec.clone().unwrap_or_default();
    if spec.schedule.contains("TZ") {
        return spec.schedule;
    }
    match spec.time_zone {
        Some(tz) if cron::load_zone(&tz).is_ok() => format!("TZ={tz} {}", spec.schedule),
        _ => spec.schedule,
    }
}

/// `mostRecentScheduleTime`: (earliest time considered, the most recent unmet schedule time at
/// or before `now` if any, how many were missed). `Err` for a schedule that never fires.
pub fn most_recent_schedule_time(
    cj: &CronJob,
    now: Timestamp,
    schedule: &Schedule,
    zone: &TimeZone,
    include_starting_deadline: bool,
) -> Result<(Timestamp, Option<Timestamp>, Missed), String> {
    let created = cj.metadata.creation_timestamp.as_ref().map(|t| t.0).unwrap_or(now);
    let status = cj.status.clone().unwrap_or_default();
    let mut earliest = status.last_schedule_time.map(|t| t.0).unwrap_or(created);
    if include_starting_deadline {
        if let Some(d) = cj.spec.as_ref().and_then(|s| s.starting_deadline_seconds) {
            let deadline = time::add_secs(now, -d);
            if deadline > earliest {
                earliest = deadline;
            }
        }
    }
    let never = || "time difference between two schedules is less than 1 second".to_string();
    let t1 = schedule.next(earliest, zone).ok_or_else(never)?;
    if now < t1 {
        return Ok((earliest, None, Missed::None));
    }
    let t2 = schedule.next(t1, zone).ok_or_else(never)?;
    if now < t2 {
        return Ok((earliest, Some(t1), Missed::None));
    }
    let between = t2.duration_since(t1).as_secs();
    if between < 1 {
        return Err(never());
    }
    let elapsed = now.duration_since(t1).as_secs();
    let missed = elapsed / between + 1;
    let mut t = time::add_secs(t1, (missed - 2) * between);
    let mut most_recent = None;
    while let Some(n) = schedule.next(t, zone) {
        if n > now {
            break;
        }
        most_recent = Some(n);
        t = n;
    }
    let missed = if missed > 100 { Missed::Many } else { Missed::Few };
    Ok((earliest, most_recent, missed))
}

/// `nextScheduleTimeDuration`: how long until the schedule should be looked at again.
pub fn next_schedule_delay(cj: &CronJob, now: Timestamp, schedule: &Schedule, zone: &TimeZone) -> Option<Duration> {
    let from = match most_recent_schedule_time(cj, now, schedule, zone, false) {
        Err(_) => now,
        Ok((earliest, None, Missed::None)) => earliest,
        Ok((_, None, _)) => now,
        Ok((_, Some(t), _)) => t,
    };
    let next = schedule.next(from, zone)?;
    Some(time::to_std(time::between(now, next)) + NEXT_SCHEDULE_DELTA)
}

/// The deterministic name of the Job for a scheduled time.
pub fn job_name(cj: &CronJob, scheduled: Timestamp) -> String {
    format!("{}-{}", cj.name_any(), scheduled.as_second().div_euclid(60))
}

/// `getJobFromTemplate2`.
pub fn job_from_template(cj: &CronJob, scheduled: Timestamp, zone: &TimeZone) -> Job {
    let template = cj.spec.as_ref().map(|s| s.job_template.clone()).unwrap_or_default();
    let tmeta = template.metadata.unwrap_or_default();
    let mut annotations = tmeta.annotations.unwrap_or_default();
    let tz = cj.spec.as_ref().and_then(|s| s.time_zone.as_deref()).and_then(|z| cron::load_zone(z).ok());
    let at = scheduled.to_zoned(tz.unwrap_or_else(|| zone.clone()));
    annotations
        .insert(SCHEDULED_TIMESTAMP.into(), at.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string().replace("+00:00", "Z"));
    Job {
        metadata: ObjectMeta {
            name: Some(job_name(cj, scheduled)),
            namespace: cj.metadata.namespace.clone(),
            labels: tmeta.labels.filter(|l| !l.is_empty()),
            annotations: Some(annotations),
            owner_references: Some(vec![owner::controller_ref(cj)]),
            ..Default::default()
        },
        spec: template.spec,
        status: None,
    }
}

fn finished_type(job: &Job) -> Option<&str> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        .map(|c| c.type_.as_str())
}

/// `removeOldestJobs` for both history limits: the finished jobs to delete, oldest first.
pub fn jobs_beyond_history<'a>(cj: &CronJob, jobs: &[&'a Job]) -> Vec<&'a Job> {
    let spec = cj.spec.clone().unwrap_or_default();
    let mut out = Vec::new();
    for (kind, limit) in [("Complete", spec.successful_jobs_history_limit), ("Failed", spec.failed_jobs_history_limit)]
    {
        let Some(limit) = limit else { continue };
        let mut of_kind: Vec<&Job> = jobs.iter().copied().filter(|j| finished_type(j) == Some(kind)).collect();
        let excess = of_kind.len().saturating_sub(usize::try_from(limit).unwrap_or(0));
        if excess == 0 {
            continue;
        }
        // byJobStartTime: jobs without a start time last, then by start time, then by name.
        of_kind.sort_by(|a, b| {
            let sa = a.status.as_ref().and_then(|s| s.start_time.as_ref()).map(|t| t.0);
            let sb = b.status.as_ref().and_then(|s| s.start_time.as_ref()).map(|t| t.0);
            match (sa, sb) {
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (Some(_), None) => std::cmp::Ordering::Less,
                (x, y) if x == y => a.metadata.name.cmp(&b.metadata.name),
                (x, y) => x.cmp(&y),
            }
        });
        out.extend(of_kind.into_iter().take(excess));
    }
    out
}

fn job_ref(job: &Job) -> ObjectReference {
    ObjectReference {
        api_version: Some("batch/v1".into()),
        kind: Some("Job".into()),
        namespace: job.metadata.namespace.clone(),
        name: job.metadata.name.clone(),
        uid: job.metadata.uid.clone(),
        resource_version: job.metadata.resource_version.clone(),
        ..Default::default()
    }
}

fn cj_ref(cj: &CronJob) -> ObjectReference {
    k1s_runtime::events::reference(
        "batch/v1",
        "CronJob",
        cj.metadata.namespace.as_deref(),
        cj.metadata.name.as_deref().unwrap_or_default(),
        cj.metadata.uid.as_deref(),
    )
}

/// Errors of one sync.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cronjob {namespace}/{name}: getting job {job}: {error}")]
    GetJob { namespace: String, name: String, job: String, error: kube::Error },
    #[error("cronjob {namespace}/{name}: re-reading the cronjob: {error}")]
    GetCronJob { namespace: String, name: String, error: kube::Error },
    #[error("cronjob {namespace}/{name}: creating job {job}: {error}")]
    CreateJob { namespace: String, name: String, job: String, error: kube::Error },
    #[error("cronjob {namespace}/{name}: could not replace job {job}: {error}")]
    ReplaceJob { namespace: String, name: String, job: String, error: kube::Error },
    #[error("cronjob {namespace}/{name}: updating status: {error}")]
    UpdateStatus { namespace: String, name: String, error: kube::Error },
}

/// The controller's caches and clients.
pub struct Controller {
    client: kube::Client,
    recorder: Recorder,
    jobs: Store<Job>,
    /// The zone schedules without one are evaluated in (the controller's local zone).
    zone: TimeZone,
}

/// Runs the CronJob controller until `ctx.cancel` fires.
pub async fn run(ctx: Arc<Context>) {
    let client = ctx.client.clone();
    let mut c = Runtime::<CronJob>::new(COMPONENT, client.clone());
    let jobs = c.owns::<Job>();
    let controller = Arc::new(Controller {
        recorder: Recorder::new(client.clone(), COMPONENT, None),
        client,
        jobs,
        zone: TimeZone::system(),
    });
    c.run(controller, reconcile, ctx.cancel.clone()).await;
}

/// One sync of one CronJob.
pub async fn reconcile(cj: Arc<CronJob>, ctl: Arc<Controller>) -> Result<Action, Error> {
    let now = Timestamp::now();
    let ns = cj.namespace().unwrap_or_default();
    let name = cj.name_any();
    let uid = cj.metadata.uid.clone().unwrap_or_default();
    let cj_api: Api<CronJob> = Api::namespaced(ctl.client.clone(), &ns);
    let job_api: Api<Job> = Api::namespaced(ctl.client.clone(), &ns);
    let owned = informer::list_in(&ctl.jobs, &ns, |j| owner::is_controlled_by(&j.metadata, &uid));
    let jobs: Vec<&Job> = owned.iter().map(|j| &**j).collect();
    let mut cj_copy = (*cj).clone();
    let (requeue, mut update_status) = sync_cronjob(&ctl, &mut cj_copy, &jobs, &job_api, &cj_api, now).await?;

    // cleanupFinishedJobs.
    if cj_copy.metadata.deletion_timestamp.is_none() {
        for j in jobs_beyond_history(&cj_copy, &jobs) {
            if delete_job(&ctl, &mut cj_copy, j, &job_api).await {
                update_status = true;
            }
        }
    }
    if update_status && cj_copy.status != cj.status {
        cj_api.replace_status(&name, &PostParams::default(), &cj_copy).await.map_err(|error| Error::UpdateStatus {
            namespace: ns,
            name,
            error,
        })?;
    }
    Ok(requeue.map_or_else(Action::await_change, Action::requeue))
}

async fn event(ctl: &Controller, cj: &CronJob, warning: bool, reason: &str, message: &str) {
    let kind = if warning { EventType::Warning } else { EventType::Normal };
    ctl.recorder.record(&cj_ref(cj), kind, reason, message).await;
}

fn in_active(cj: &CronJob, uid: &str) -> bool {
    cj.status.iter().flat_map(|s| s.active.iter().flatten()).any(|r| r.uid.as_deref() == Some(uid))
}

fn remove_active(cj: &mut CronJob, uid: &str) {
    if let Some(a) = cj.status.as_mut().and_then(|s| s.active.as_mut()) {
        a.retain(|r| r.uid.as_deref() != Some(uid));
        if a.is_empty() {
            if let Some(s) = cj.status.as_mut() {
                s.active = None;
            }
        }
    }
}

/// `deleteJob`: deletes a job (pods in the background) and drops it from `active`.
async fn delete_job(ctl: &Controller, cj: &mut CronJob, job: &Job, api: &Api<Job>) -> bool {
    let name = job.name_any();
    let dp = DeleteParams { propagation_policy: Some(PropagationPolicy::Background), ..Default::default() };
    if let Err(e) = api.delete(&name, &dp).await {
        if !matches!(&e, kube::Error::Api(s) if s.code == 404) {
            event(ctl, cj, true, "FailedDelete", &format!("Deleted job: {e}")).await;
            tracing::warn!(job = %name, error = %e, "deleting job of cronjob failed");
            return false;
        }
    }
    remove_active(cj, job.metadata.uid.as_deref().unwrap_or_default());
    event(ctl, cj, false, "SuccessfulDelete", &format!("Deleted job {name}")).await;
    true
}

/// `syncCronJob`: returns when to look again and whether the status changed.
async fn sync_cronjob(
    ctl: &Controller,
    cj: &mut CronJob,
    jobs: &[&Job],
    job_api: &Api<Job>,
    cj_api: &Api<CronJob>,
    now: Timestamp,
) -> Result<(Option<Duration>, bool), Error> {
    let ns = cj.namespace().unwrap_or_default();
    let name = cj.name_any();
    let mut update = false;
    for j in jobs {
        let juid = j.metadata.uid.clone().unwrap_or_default();
        let found = in_active(cj, &juid);
        let finished = finished_type(j);
        if !found && finished.is_none() {
            // Our cache of the CronJob may lag our own status write: check the live one.
            let fresh = cj_api.get(&name).await.map_err(|error| Error::GetCronJob {
                namespace: ns.clone(),
                name: name.clone(),
                error,
            })?;
            if in_active(&fresh, &juid) {
                *cj = fresh;
                continue;
            }
            let msg = format!("Saw a job that the controller did not create or forgot: {}", j.name_any());
            event(ctl, cj, true, "UnexpectedJob", &msg).await;
        } else if found && finished.is_some() {
            remove_active(cj, &juid);
            let msg = format!("Saw completed job: {}, status: {}", j.name_any(), finished.unwrap_or_default());
            event(ctl, cj, false, "SawCompletedJob", &msg).await;
            update = true;
        } else if finished == Some("Complete") {
            let completion = j.status.as_ref().and_then(|s| s.completion_time.clone());
            let status = cj.status.get_or_insert_with(Default::default);
            if let Some(c) = completion {
                if status.last_successful_time.as_ref().is_none_or(|l| c.0 > l.0) {
                    status.last_successful_time = Some(c);
                    update = true;
                }
            }
        }
    }
    let children: Vec<String> = jobs.iter().filter_map(|j| j.metadata.uid.clone()).collect();
    let active: Vec<ObjectReference> = cj.status.iter().flat_map(|s| s.active.iter().flatten()).cloned().collect();
    for r in active {
        let ruid = r.uid.clone().unwrap_or_default();
        if children.contains(&ruid) {
            continue;
        }
        let jname = r.name.clone().unwrap_or_default();
        match job_api.get_opt(&jname).await {
            Ok(None) => {
                event(ctl, cj, false, "MissingJob", &format!("Active job went missing: {jname}")).await;
                remove_active(cj, &ruid);
                update = true;
            }
            Ok(Some(_)) => {}
            Err(error) => return Err(Error::GetJob { namespace: ns, name, job: jname, error }),
        }
    }
    if cj.metadata.deletion_timestamp.is_some() {
        return Ok((None, update));
    }
    let spec = cj.spec.clone().unwrap_or_default();
    if let Some(tz) = &spec.time_zone {
        if let Err(e) = cron::load_zone(tz) {
            event(ctl, cj, true, "UnknownTimeZone", &format!("invalid timeZone: {tz:?}: {e}")).await;
            return Ok((None, update));
        }
    }
    if spec.suspend == Some(true) {
        return Ok((None, update));
    }
    if spec.schedule.contains("TZ") {
        let msg = format!(
            "CRON_TZ or TZ used in schedule {:?} is not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details",
            spec.schedule
        );
        event(ctl, cj, true, "UnsupportedSchedule", &msg).await;
    }
    let schedule = match cron::parse(&format_schedule(cj)) {
        Ok(s) => s,
        Err(e) => {
            let msg = format!("unparseable schedule: {:?} : {e}", spec.schedule);
            event(ctl, cj, true, "UnparseableSchedule", &msg).await;
            return Ok((None, update));
        }
    };
    let zone = ctl.zone.clone();
    let scheduled = match most_recent_schedule_time(cj, now, &schedule, &zone, true) {
        Err(e) => {
            event(ctl, cj, true, "InvalidSchedule", &format!("invalid schedule: {} : {e}", spec.schedule)).await;
            return Ok((None, update));
        }
        Ok((_, t, missed)) => {
            if missed == Missed::Many && t.is_some_and(|t| t <= now) {
                event(
                    ctl,
                    cj,
                    true,
                    "TooManyMissedTimes",
                    "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew",
                )
                .await;
            }
            t.filter(|t| *t <= now)
        }
    };
    let next = |cj: &CronJob| next_schedule_delay(cj, now, &schedule, &zone);
    let Some(scheduled) = scheduled else {
        return Ok((next(cj), update));
    };
    if let Some(d) = spec.starting_deadline_seconds {
        if time::add_secs(scheduled, d) < now {
            let msg =
                format!("Missed scheduled time to start a job: {}", scheduled.strftime("%a, %d %b %Y %H:%M:%S %z"));
            event(ctl, cj, true, "MissSchedule", &msg).await;
            return Ok((next(cj), update));
        }
    }
    let jname = job_name(cj, scheduled);
    let status = cj.status.clone().unwrap_or_default();
    let already = status.active.iter().flatten().any(|r| r.name.as_deref() == Some(jname.as_str()))
        || status.last_schedule_time.as_ref().is_some_and(|t| t.0 == scheduled);
    if already {
        return Ok((next(cj), update));
    }
    let policy = spec.concurrency_policy.as_deref().unwrap_or("Allow");
    if policy == "Forbid" && status.active.as_ref().is_some_and(|a| !a.is_empty()) {
        event(
            ctl,
            cj,
            false,
            "JobAlreadyActive",
            "Not starting job because prior execution is running and concurrency policy is Forbid",
        )
        .await;
        return Ok((next(cj), update));
    }
    if policy == "Replace" {
        for r in status.active.clone().unwrap_or_default() {
            let rname = r.name.clone().unwrap_or_default();
            let job = match job_api.get(&rname).await {
                Ok(j) => j,
                Err(error) => {
                    event(ctl, cj, true, "FailedGet", &format!("Get job: {error}")).await;
                    return Err(Error::GetJob { namespace: ns, name, job: rname, error });
                }
            };
            if !delete_job(ctl, cj, &job, job_api).await {
                let error = kube::Error::Api(Box::new(kube::core::Status::failure("delete failed", "InternalError")));
                return Err(Error::ReplaceJob { namespace: ns, name, job: rname, error });
            }
            update = true;
        }
    }
    let request = job_from_template(cj, scheduled, &zone);
    let created = match job_api.create(&PostParams::default(), &request).await {
        Ok(j) => {
            event(ctl, cj, false, "SuccessfulCreate", &format!("Created job {}", j.name_any())).await;
            j
        }
        Err(e) if matches!(&e, kube::Error::Api(s) if s.code == 409) => {
            let existing = job_api.get(&jname).await.map_err(|error| Error::GetJob {
                namespace: ns.clone(),
                name: name.clone(),
                job: jname.clone(),
                error,
            })?;
            if !owner::is_controlled_by(&existing.metadata, cj.metadata.uid.as_deref().unwrap_or_default())
                || in_active(cj, existing.metadata.uid.as_deref().unwrap_or_default())
            {
                return Ok((None, update));
            }
            tracing::info!(cronjob = %name, job = %jname, "job already exists");
            existing
        }
        Err(e) if is_namespace_terminating(&e) => {
            return Err(Error::CreateJob { namespace: ns, name, job: jname, error: e });
        }
        Err(error) => {
            event(ctl, cj, true, "FailedCreate", &format!("Error creating job: {error}")).await;
            return Err(Error::CreateJob { namespace: ns, name, job: jname, error });
        }
    };
    let st = cj.status.get_or_insert_with(Default::default);
    st.active.get_or_insert_with(Vec::new).push(job_ref(&created));
    st.last_schedule_time = Some(time::api_time(scheduled));
    Ok((next(cj), true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::{CronJobSpec, CronJobStatus, JobCondition, JobStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("ts")
    }

    fn cronjob(schedule: &str, created: &str, last: Option<&str>) -> CronJob {
        CronJob {
            metadata: ObjectMeta {
                name: Some("hello".into()),
                namespace: Some("ns".into()),
                uid: Some("cj-uid".into()),
                creation_timestamp: Some(Time(ts(created))),
                ..Default::default()
            },
            spec: Some(CronJobSpec { schedule: schedule.into(), ..Default::default() }),
            status: last.map(|l| CronJobStatus { last_schedule_time: Some(Time(ts(l))), ..Default::default() }),
        }
    }

    fn run(cj: &CronJob, now: &str, deadline: bool) -> (Option<String>, Missed) {
        let s = cron::parse(&format_schedule(cj)).expect("parse");
        let (_, t, m) = most_recent_schedule_time(cj, ts(now), &s, &TimeZone::UTC, deadline).expect("schedule");
        (t.map(|t| t.to_string()), m)
    }

    #[test]
    fn nothing_is_due_before_the_first_schedule_time() {
        let cj = cronjob("* * * * *", "2024-05-01T10:00:10Z", None);
        assert_eq!(run(&cj, "2024-05-01T10:00:50Z", true), (None, Missed::None));
        assert_eq!(run(&cj, "2024-05-01T10:01:00Z", true), (Some("2024-05-01T10:01:00Z".into()), Missed::None));
    }

    #[test]
    fn after_missed_runs_only_the_most_recent_is_due() {
        let cj = cronjob("*/5 * * * *", "2024-05-01T09:00:00Z", Some("2024-05-01T10:00:00Z"));
        assert_eq!(run(&cj, "2024-05-01T10:17:00Z", true), (Some("2024-05-01T10:15:00Z".into()), Missed::Few));
        let old = cronjob("* * * * *", "2024-04-01T00:00:00Z", None);
        assert_eq!(run(&old, "2024-05-01T00:00:30Z", true).1, Missed::Many);
    }

    #[test]
    fn the_starting_deadline_bounds_how_far_back_to_look() {
        let mut cj = cronjob("0 * * * *", "2024-05-01T00:00:00Z", Some("2024-05-01T08:00:00Z"));
        cj.spec.as_mut().expect("spec").starting_deadline_seconds = Some(600);
        // 10:20 with a 10 minute deadline: 10:00 is out of reach.
        assert_eq!(run(&cj, "2024-05-01T10:20:00Z", true), (None, Missed::None));
        assert_eq!(run(&cj, "2024-05-01T10:05:00Z", true), (Some("2024-05-01T10:00:00Z".into()), Missed::None));
    }

    #[test]
    fn the_time_zone_field_shifts_the_schedule() {
        let mut cj = cronjob("0 9 * * *", "2024-05-01T00:00:00Z", None);
        cj.spec.as_mut().expect("spec").time_zone = Some("Europe/Paris".into());
        assert_eq!(format_schedule(&cj), "TZ=Europe/Paris 0 9 * * *");
        // 09:00 in Paris (CEST) is 07:00 UTC.
        assert_eq!(run(&cj, "2024-05-01T07:30:00Z", false).0.as_deref(), Some("2024-05-01T07:00:00Z"));
        cj.spec.as_mut().expect("spec").time_zone = Some("Nowhere/Special".into());
        assert_eq!(format_schedule(&cj), "0 9 * * *");
    }

    #[test]
    fn requeue_lands_just_after_the_next_schedule_time() {
        let cj = cronjob("* * * * *", "2024-05-01T10:00:00Z", Some("2024-05-01T10:01:00Z"));
        let s = cron::parse("* * * * *").expect("parse");
        let d = next_schedule_delay(&cj, ts("2024-05-01T10:01:20Z"), &s, &TimeZone::UTC).expect("delay");
        assert_eq!(d, Duration::from_secs(40) + NEXT_SCHEDULE_DELTA);
    }

    #[test]
    fn jobs_are_named_by_scheduled_minute_and_carry_the_template() {
        let mut cj = cronjob("* * * * *", "2024-05-01T10:00:00Z", None);
        cj.spec.as_mut().expect("spec").job_template.metadata =
            Some(ObjectMeta { labels: Some([("team".into(), "a".into())].into()), ..Default::default() });
        let at = ts("2024-05-01T10:01:00Z");
        let job = job_from_template(&cj, at, &TimeZone::UTC);
        assert_eq!(job.metadata.name.as_deref(), Some(format!("hello-{}", at.as_second() / 60).as_str()));
        assert_eq!(job.metadata.labels.as_ref().and_then(|l| l.get("team")).map(String::as_str), Some("a"));
        assert_eq!(
            job.metadata.annotations.as_ref().and_then(|a| a.get(SCHEDULED_TIMESTAMP)).map(String::as_str),
            Some("2024-05-01T10:01:00Z")
        );
        let r = job.metadata.owner_references.as_ref().and_then(|o| o.first()).expect("owner");
        assert_eq!((r.kind.as_str(), r.controller), ("CronJob", Some(true)));
    }

    fn finished(name: &str, kind: &str, start: &str) -> Job {
        Job {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            spec: None,
            status: Some(JobStatus {
                start_time: Some(Time(ts(start))),
                conditions: Some(vec![JobCondition {
                    type_: kind.into(),
                    status: "True".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn history_limits_delete_the_oldest_finished_jobs() {
        let mut cj = cronjob("* * * * *", "2024-05-01T10:00:00Z", None);
        let spec = cj.spec.as_mut().expect("spec");
        spec.successful_jobs_history_limit = Some(1);
        spec.failed_jobs_history_limit = Some(0);
        let a = finished("a", "Complete", "2024-05-01T10:01:00Z");
        let b = finished("b", "Complete", "2024-05-01T10:02:00Z");
        let c = finished("c", "Failed", "2024-05-01T10:03:00Z");
        let mut running = finished("d", "Complete", "2024-05-01T10:04:00Z");
        running.status.as_mut().expect("status").conditions = None;
        let out: Vec<_> = jobs_beyond_history(&cj, &[&b, &a, &c, &running])
            .into_iter()
            .map(|j| j.metadata.name.clone().unwrap_or_default())
            .collect();
        assert_eq!(out, ["a", "c"]);
    }
}
