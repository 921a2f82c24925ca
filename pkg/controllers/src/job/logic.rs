//! Pure pieces of the Job controller (upstream `pkg/controller/job`): completion indexes and
//! their interval strings, the pod failure policy, the success policy, the pod-failure
//! back-off record, finish times, conditions, and which pods to remove or indexes to start.

use crate::workloads::{pods, time};
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{Job, JobCondition, PodFailurePolicy, SuccessPolicy};
use k8s_openapi::api::core::v1::Pod;
use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

pub const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
pub const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";
pub const COMPLETION_INDEX_ENV: &str = "JOB_COMPLETION_INDEX";
pub const JOB_CONTROLLER_NAME: &str = "kubernetes.io/job-controller";
/// Back-off after the first pod failure; doubles per consecutive failure.
pub const DEFAULT_POD_FAILURE_BACKOFF: Duration = Duration::from_secs(10);
pub const MAX_POD_FAILURE_BACKOFF: Duration = Duration::from_secs(10 * 60);
/// At most this many pods are created or deleted per sync.
pub const MAX_POD_CREATE_DELETE_PER_SYNC: usize = 500;
/// At most this many UIDs in `status.uncountedTerminatedPods`.
pub const MAX_UNCOUNTED_PODS: usize = 500;

/// `spec.completionMode == Indexed`.
pub fn is_indexed(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.completion_mode.as_deref()) == Some("Indexed")
}

/// `spec.suspend`.
pub fn is_suspended(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.suspend).unwrap_or(false)
}

/// `spec.completions` (`None`: any success completes the job).
pub fn completions(job: &Job) -> Option<i32> {
    job.spec.as_ref().and_then(|s| s.completions)
}

/// `spec.parallelism` (defaulted to 1).
pub fn parallelism(job: &Job) -> i32 {
    job.spec.as_ref().and_then(|s| s.parallelism).unwrap_or(1)
}

/// `spec.backoffLimit` (defaulted to 6).
pub fn backoff_limit(job: &Job) -> i32 {
    job.spec.as_ref().and_then(|s| s.backoff_limit).unwrap_or(6)
}

/// The job has a `Complete` or `Failed` condition that is `True`.
pub fn is_finished(job: &Job) -> bool {
    finished_condition(job).is_some()
}

/// The `Complete` or `Failed` condition that is `True`.
pub fn finished_condition(job: &Job) -> Option<&JobCondition> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
}

/// The condition of type `t`.
pub fn condition<'a>(job: &'a Job, t: &str) -> Option<&'a JobCondition> {
    job.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == t)
}

/// A condition stamped `now`.
pub fn new_condition(t: &str, status: &str, reason: &str, message: &str, now: Timestamp) -> JobCondition {
    JobCondition {
        type_: t.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_probe_time: Some(time::api_time(now)),
        last_transition_time: Some(time::api_time(now)),
    }
}

/// `ensureJobConditionStatus`: adds or updates the condition (never adds a `False` one);
/// whether the list changed.
pub fn ensure_condition(
    list: &mut Vec<JobCondition>,
    t: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> bool {
    if let Some(c) = list.iter_mut().find(|c| c.type_ == t) {
        if c.status != status || c.reason.as_deref() != Some(reason) || c.message.as_deref() != Some(message) {
            *c = new_condition(t, status, reason, message, now);
            return true;
        }
        return false;
    }
    if status != "False" {
        list.push(new_condition(t, status, reason, message, now));
        return true;
    }
    false
}

/// Whether the pod still has the tracking finalizer.
pub fn has_tracking_finalizer(pod: &Pod) -> bool {
    pod.metadata.finalizers.iter().flatten().any(|f| f == TRACKING_FINALIZER)
}

/// The completion index annotation, if valid.
pub fn completion_index(pod: &Pod) -> Option<i32> {
    let v = pod.metadata.annotations.as_ref()?.get(COMPLETION_INDEX)?;
    v.parse::<i32>().ok().filter(|i| *i >= 0)
}

/// Pods are only replaced once they have failed (not while terminating).
pub fn only_replace_failed_pods(job: &Job) -> bool {
    let spec = job.spec.as_ref();
    spec.and_then(|s| s.pod_replacement_policy.as_deref()) == Some("Failed")
        || spec.is_some_and(|s| s.pod_failure_policy.is_some())
}

/// `isPodFailed`: failed, or (unless only failed pods are replaced) deleted before succeeding.
pub fn is_pod_failed(pod: &Pod, job: &Job) -> bool {
    let phase = pods::pod_phase(pod);
    if phase == "Failed" {
        return true;
    }
    if only_replace_failed_pods(job) {
        return false;
    }
    pod.metadata.deletion_timestamp.is_some() && phase != "Succeeded"
}

/// What the pod failure policy says about a failed pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyMatch {
    /// Set for a `FailJob` rule.
    pub fail_job_message: Option<String>,
    /// Whether the failure counts towards `backoffLimit` (`Ignore` rules do not).
    pub count: bool,
    pub action: Option<String>,
}

/// `matchPodFailurePolicy`: the first rule matching the pod's exit codes or conditions.
pub fn match_pod_failure_policy(policy: Option<&PodFailurePolicy>, pod: &Pod) -> PolicyMatch {
    let none = PolicyMatch { fail_job_message: None, count: true, action: None };
    let Some(policy) = policy else { return none };
    let status = pod.status.clone().unwrap_or_default();
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    for (index, rule) in policy.rules.iter().enumerate() {
        let matched: Option<String> = if let Some(req) = &rule.on_exit_codes {
            let matches = |exit: i32| match req.operator.as_str() {
                "In" => req.values.contains(&exit),
                "NotIn" => !req.values.contains(&exit),
                _ => false,
            };
            status
                .container_statuses
                .iter()
                .flatten()
                .chain(status.init_container_statuses.iter().flatten())
                .find_map(|cs| {
                    let t = cs.state.as_ref()?.terminated.as_ref()?;
                    let name_ok = req.container_name.as_ref().is_none_or(|n| *n == cs.name);
                    (name_ok && t.exit_code != 0 && matches(t.exit_code)).then(|| {
                        format!(
                            "Container {} for pod {ns}/{name} failed with exit code {} matching {} rule at index {index}",
                            cs.name, t.exit_code, rule.action
                        )
                    })
                })
        } else if let Some(patterns) = &rule.on_pod_conditions {
            status.conditions.iter().flatten().find_map(|c| {
                patterns.iter().any(|p| p.type_ == c.type_ && p.status.as_deref().unwrap_or("True") == c.status).then(
                    || {
                        format!(
                            "Pod {ns}/{name} has condition {} matching {} rule at index {index}",
                            c.type_, rule.action
                        )
                    },
                )
            })
        } else {
            None
        };
        let Some(message) = matched else { continue };
        match rule.action.as_str() {
            "Ignore" => return PolicyMatch { fail_job_message: None, count: false, action: Some("Ignore".into()) },
            "Count" => return PolicyMatch { fail_job_message: None, count: true, action: Some("Count".into()) },
            "FailJob" => {
                return PolicyMatch { fail_job_message: Some(message), count: true, action: Some("FailJob".into()) }
            }
            "FailIndex" => {
                return PolicyMatch { fail_job_message: None, count: true, action: Some("FailIndex".into()) }
            }
            _ => {}
        }
    }
    none
}

/// `getFinishedTime`: when the pod finished, by the best evidence available.
pub fn finished_time(pod: &Pod) -> Timestamp {
    let status = pod.status.clone().unwrap_or_default();
    let containers = status.container_statuses.clone().unwrap_or_default();
    if !containers.is_empty() {
        let mut latest: Option<Timestamp> = None;
        let mut all = true;
        for cs in &containers {
            match cs.state.as_ref().and_then(|s| s.terminated.as_ref()).and_then(|t| t.finished_at.as_ref()) {
                Some(t) => latest = Some(latest.map_or(t.0, |l| l.max(t.0))),
                None => {
                    all = false;
                    break;
                }
            }
        }
        if all {
            if let Some(t) = latest {
                return t;
            }
        }
    }
    if let Some(t) = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready" && c.status == "False")
        .and_then(|c| c.last_transition_time.as_ref())
    {
        return t.0;
    }
    if let Some(d) = &pod.metadata.deletion_timestamp {
        let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(0);
        return time::add_secs(d.0, -grace);
    }
    pod.metadata.creation_timestamp.as_ref().map(|t| t.0).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// Consecutive pod failures since the last success, for the creation back-off.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BackoffRecord {
    pub failures_after_last_success: i32,
    pub last_failure_time: Option<Timestamp>,
}

impl BackoffRecord {
    /// `newBackoffRecord`: the record after newly finished pods.
    pub fn with_new_pods(&self, succeeded: &[&Pod], failed: &[&Pod]) -> BackoffRecord {
        let mut s: Vec<Timestamp> = succeeded.iter().map(|p| finished_time(p)).collect();
        let mut f: Vec<Timestamp> = failed.iter().map(|p| finished_time(p)).collect();
        s.sort();
        f.sort();
        match (s.last(), f.is_empty()) {
            (None, true) => self.clone(),
            (None, false) => BackoffRecord {
                failures_after_last_success: self.failures_after_last_success
                    + i32::try_from(f.len()).unwrap_or(i32::MAX),
                last_failure_time: f.last().copied(),
            },
            (Some(_), true) => BackoffRecord::default(),
            (Some(&last_success), false) => {
                let after: Vec<&Timestamp> = f.iter().filter(|t| **t > last_success).collect();
                BackoffRecord {
                    failures_after_last_success: i32::try_from(after.len()).unwrap_or(i32::MAX),
                    last_failure_time: after.last().map(|t| **t),
                }
            }
        }
    }

    /// How long until the next pod may be created.
    pub fn remaining(&self, now: Timestamp) -> Duration {
        if self.failures_after_last_success <= 0 {
            return Duration::ZERO;
        }
        let mut backoff = DEFAULT_POD_FAILURE_BACKOFF;
        for _ in 1..self.failures_after_last_success {
            backoff = backoff.saturating_mul(2);
            if backoff >= MAX_POD_FAILURE_BACKOFF {
                backoff = MAX_POD_FAILURE_BACKOFF;
                break;
            }
        }
        let Some(last) = self.last_failure_time else { return Duration::ZERO };
        let elapsed = time::to_std(time::between(last, now));
        backoff.saturating_sub(elapsed)
    }
}

/// A set of completion indexes, rendered like `status.completedIndexes` ("1,3-5,7").
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Indexes(pub BTreeSet<i32>);

impl Indexes {
    /// Parses an interval string, keeping indexes below `completions`.
    pub fn parse(s: &str, completions: i32) -> Indexes {
        let mut out = BTreeSet::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (a.parse::<i32>(), b.parse::<i32>()),
                None => (part.parse::<i32>(), part.parse::<i32>()),
            };
            if let (Ok(lo), Ok(hi)) = (lo, hi) {
                for i in lo.max(0)..=hi.min(completions - 1) {
                    out.insert(i);
                }
            }
        }
        Indexes(out)
    }

    pub fn has(&self, i: i32) -> bool {
        self.0.contains(&i)
    }

    pub fn total(&self) -> usize {
        self.0.len()
    }

    pub fn render(&self) -> String {
        let mut parts = Vec::new();
        let mut iter = self.0.iter().copied().peekable();
        while let Some(start) = iter.next() {
            let mut end = start;
            while iter.peek() == Some(&(end + 1)) {
                end = iter.next().unwrap_or(end);
            }
            parts.push(if start == end { start.to_string() } else { format!("{start}-{end}") });
        }
        parts.join(",")
    }
}

/// `matchSuccessPolicy`: the message of the first rule the succeeded indexes satisfy.
pub fn match_success_policy(policy: Option<&SuccessPolicy>, completions: i32, succeeded: &Indexes) -> Option<String> {
    let policy = policy?;
    for (index, rule) in policy.rules.iter().enumerate() {
        let met = match (&rule.succeeded_indexes, rule.succeeded_count) {
            (Some(ix), count) => {
                let wanted = Indexes::parse(ix, completions);
                let got = wanted.0.iter().filter(|i| succeeded.has(**i)).count();
                match count {
                    Some(c) => i64::try_from(got).unwrap_or(0) >= i64::from(c),
                    None => got == wanted.total(),
                }
            }
            (None, Some(c)) => i64::try_from(succeeded.total()).unwrap_or(0) >= i64::from(c),
            (None, None) => false,
        };
        if met {
            return Some(format!("Matched rules at index {index}"));
        }
    }
    None
}

/// `activePodsForRemoval`: for Indexed jobs pods with invalid or duplicated indexes first
/// (keeping the most advanced of duplicates), then the least advanced pods.
pub fn pods_for_removal<'a>(job: &Job, active: &[&'a Pod], at_least: usize) -> Vec<&'a Pod> {
    let mut rm: Vec<&Pod> = Vec::new();
    let mut left: Vec<&Pod> = Vec::new();
    if is_indexed(job) {
        let completions = completions(job).unwrap_or(0);
        let mut by_index: std::collections::BTreeMap<Option<i32>, Vec<&Pod>> = Default::default();
        for p in active {
            let ix = completion_index(p).filter(|i| *i < completions);
            by_index.entry(ix).or_default().push(p);
        }
        for (ix, mut group) in by_index {
            if ix.is_none() {
                rm.extend(group);
                continue;
            }
            group.sort_by(|a, b| pods::active_order(a, b));
            let keep = group.pop();
            rm.extend(group);
            left.extend(keep);
        }
    } else {
        left = active.to_vec();
    }
    if rm.len() < at_least {
        left.sort_by(|a, b| pods::active_order(a, b));
        let n = (at_least - rm.len()).min(left.len());
        rm.extend(left.into_iter().take(n));
    }
    rm
}

/// `firstPendingIndexes`: the lowest `count` indexes neither succeeded nor running.
pub fn first_pending_indexes(active: &[&Pod], succeeded: &Indexes, count: usize, completions: i32) -> Vec<i32> {
    let running: HashSet<i32> = active.iter().filter_map(|p| completion_index(p)).collect();
    (0..completions).filter(|i| !succeeded.has(*i) && !running.contains(i)).take(count).collect()
}

/// `pastBackoffLimitOnFailure`: container restarts of running pods count for `OnFailure`.
pub fn past_backoff_limit_on_failure(job: &Job, all: &[&Pod]) -> bool {
    let restart = job.spec.as_ref().and_then(|s| s.template.spec.as_ref()).and_then(|s| s.restart_policy.as_deref());
    if restart != Some("OnFailure") {
        return false;
    }
    let restarts: i32 = all
        .iter()
        .filter(|p| matches!(pods::pod_phase(p), "Running" | "Pending"))
        .flat_map(|p| {
            let s = p.status.clone().unwrap_or_default();
            s.init_container_statuses
                .unwrap_or_default()
                .into_iter()
                .chain(s.container_statuses.unwrap_or_default())
                .map(|c| c.restart_count)
        })
        .sum();
    let limit = backoff_limit(job);
    if limit == 0 {
        restarts > 0
    } else {
        restarts >= limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::pods::tests::{pod, ts};
    use k8s_openapi::api::batch::v1::{
        JobSpec, PodFailurePolicyOnExitCodesRequirement, PodFailurePolicyOnPodConditionsPattern, PodFailurePolicyRule,
        SuccessPolicyRule,
    };
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateTerminated, ContainerStatus, PodCondition, PodStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn failed_with(code: i32) -> Pod {
        let mut p = pod("p", "n", "Failed", None, "2024-05-01T10:00:00Z");
        p.status = Some(PodStatus {
            phase: Some("Failed".into()),
            container_statuses: Some(vec![ContainerStatus {
                name: "main".into(),
                state: Some(ContainerState {
                    terminated: Some(ContainerStateTerminated {
                        exit_code: code,
                        finished_at: Some(Time(ts("2024-05-01T10:05:00Z"))),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        });
        p
    }

    fn policy(rules: Vec<PodFailurePolicyRule>) -> PodFailurePolicy {
        PodFailurePolicy { rules }
    }

    #[test]
    fn pod_failure_policy_fail_job_on_exit_code() {
        let p = policy(vec![PodFailurePolicyRule {
            action: "FailJob".into(),
            on_exit_codes: Some(PodFailurePolicyOnExitCodesRequirement {
                operator: "In".into(),
                values: vec![42],
                container_name: None,
            }),
            on_pod_conditions: None,
        }]);
        let m = match_pod_failure_policy(Some(&p), &failed_with(42));
        assert_eq!(
            m.fail_job_message.as_deref(),
            Some("Container main for pod ns/p failed with exit code 42 matching FailJob rule at index 0")
        );
        assert!(m.count);
        assert_eq!(match_pod_failure_policy(Some(&p), &failed_with(1)).action, None);
    }

    #[test]
    fn pod_failure_policy_ignores_disruptions_and_not_in_skips_zero() {
        let p = policy(vec![
            PodFailurePolicyRule {
                action: "Ignore".into(),
                on_exit_codes: None,
                on_pod_conditions: Some(vec![PodFailurePolicyOnPodConditionsPattern {
                    type_: "DisruptionTarget".into(),
                    status: Some("True".into()),
                }]),
            },
            PodFailurePolicyRule {
                action: "Count".into(),
                on_exit_codes: Some(PodFailurePolicyOnExitCodesRequirement {
                    operator: "NotIn".into(),
                    values: vec![1],
                    container_name: Some("main".into()),
                }),
                on_pod_conditions: None,
            },
        ]);
        let mut disrupted = failed_with(137);
        if let Some(s) = disrupted.status.as_mut() {
            s.conditions = Some(vec![PodCondition {
                type_: "DisruptionTarget".into(),
                status: "True".into(),
                ..Default::default()
            }]);
        }
        let m = match_pod_failure_policy(Some(&p), &disrupted);
        assert_eq!((m.count, m.action.as_deref()), (false, Some("Ignore")));
        assert_eq!(match_pod_failure_policy(Some(&p), &failed_with(3)).action.as_deref(), Some("Count"));
        assert_eq!(match_pod_failure_policy(Some(&p), &failed_with(0)).action, None);
    }

    #[test]
    fn backoff_doubles_per_failure_from_ten_seconds_and_resets_on_success() {
        let f = failed_with(1);
        let r = BackoffRecord::default().with_new_pods(&[], &[&f]);
        assert_eq!(r.failures_after_last_success, 1);
        assert_eq!(r.remaining(ts("2024-05-01T10:05:04Z")), Duration::from_secs(6));
        let r2 = r.with_new_pods(&[], &[&f, &f]);
        assert_eq!(r2.failures_after_last_success, 3);
        assert_eq!(r2.remaining(ts("2024-05-01T10:05:00Z")), Duration::from_secs(40));
        let ok = pod("ok", "n", "Succeeded", None, "2024-05-01T10:10:00Z");
        assert_eq!(r2.with_new_pods(&[&ok], &[]), BackoffRecord::default());
        let many =
            BackoffRecord { failures_after_last_success: 20, last_failure_time: Some(ts("2024-05-01T10:00:00Z")) };
        assert_eq!(many.remaining(ts("2024-05-01T10:00:00Z")), MAX_POD_FAILURE_BACKOFF);
    }

    #[test]
    fn indexes_round_trip_as_intervals() {
        let i = Indexes::parse("0,2-4,9", 8);
        assert_eq!(i.render(), "0,2-4");
        assert_eq!(i.total(), 4);
        assert!(i.has(3) && !i.has(1));
        assert_eq!(Indexes::default().render(), "");
    }

    #[test]
    fn success_policy_by_indexes_and_count() {
        let sp = SuccessPolicy {
            rules: vec![
                SuccessPolicyRule { succeeded_indexes: Some("0-2".into()), succeeded_count: Some(2) },
                SuccessPolicyRule { succeeded_indexes: None, succeeded_count: Some(4) },
            ],
        };
        assert_eq!(match_success_policy(Some(&sp), 10, &Indexes::parse("0,5", 10)), None);
        assert_eq!(
            match_success_policy(Some(&sp), 10, &Indexes::parse("0,2", 10)).as_deref(),
            Some("Matched rules at index 0")
        );
        assert_eq!(
            match_success_policy(Some(&sp), 10, &Indexes::parse("5-8", 10)).as_deref(),
            Some("Matched rules at index 1")
        );
    }

    fn indexed_job(completions: i32) -> Job {
        Job {
            spec: Some(JobSpec {
                completions: Some(completions),
                completion_mode: Some("Indexed".into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn with_index(mut p: Pod, ix: &str) -> Pod {
        p.metadata.annotations = Some([(COMPLETION_INDEX.to_string(), ix.to_string())].into());
        p
    }

    #[test]
    fn indexed_jobs_remove_duplicate_and_invalid_indexes_first() {
        let job = indexed_job(3);
        let a = with_index(pod("a", "n", "Running", None, "2024-05-01T10:00:00Z"), "0");
        let b = with_index(pod("b", "n", "Pending", None, "2024-05-01T10:01:00Z"), "0");
        let c = with_index(pod("c", "n", "Running", None, "2024-05-01T10:00:00Z"), "7");
        let d = with_index(pod("d", "n", "Running", None, "2024-05-01T10:00:00Z"), "1");
        let rm = pods_for_removal(&job, &[&a, &b, &c, &d], 0);
        let names: Vec<_> = rm.iter().map(|p| p.metadata.name.as_deref().unwrap_or_default()).collect();
        assert_eq!(names, ["c", "b"]);
    }

    #[test]
    fn pending_indexes_skip_succeeded_and_running_ones() {
        let a = with_index(pod("a", "n", "Running", None, "2024-05-01T10:00:00Z"), "1");
        assert_eq!(first_pending_indexes(&[&a], &Indexes::parse("0,3", 6), 2, 6), [2, 4]);
    }

    #[test]
    fn deleted_pods_count_as_failed_unless_only_failed_pods_are_replaced() {
        let mut p = pod("a", "n", "Running", None, "2024-05-01T10:00:00Z");
        p.metadata.deletion_timestamp = Some(Time(ts("2024-05-01T10:00:00Z")));
        let mut job = Job { spec: Some(JobSpec::default()), ..Default::default() };
        assert!(is_pod_failed(&p, &job));
        job.spec.as_mut().expect("spec").pod_replacement_policy = Some("Failed".into());
        assert!(!is_pod_failed(&p, &job));
    }

    #[test]
    fn conditions_are_not_added_as_false_but_are_updated() {
        let now = ts("2024-05-01T10:00:00Z");
        let mut list = Vec::new();
        assert!(!ensure_condition(&mut list, "Suspended", "False", "JobResumed", "Job resumed", now));
        assert!(ensure_condition(&mut list, "Suspended", "True", "JobSuspended", "Job suspended", now));
        assert!(ensure_condition(&mut list, "Suspended", "False", "JobResumed", "Job resumed", now));
        assert!(!ensure_condition(&mut list, "Suspended", "False", "JobResumed", "Job resumed", now));
        assert_eq!(list.len(), 1);
    }
}
