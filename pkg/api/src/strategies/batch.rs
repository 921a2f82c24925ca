//! Strategies for the batch resources (Job, CronJob), as upstream's
//! `pkg/apis/batch/v1/defaults.go`, `pkg/apis/batch/validation` and
//! `pkg/registry/batch/{job,cronjob}/strategy.go`.

use super::cron;
use super::formats;
use super::label_selector;
use super::pod_spec;
use super::semantic;
use crate::field::{FieldError, Path};
use crate::strategy::{DynStrategy, ObjectHooks, Strategy, Typed};
use k8s_openapi::api::batch::v1::{CronJob, CronJobStatus, Job, JobSpec, JobStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use std::collections::BTreeMap;

pub fn cron_job() -> Box<dyn DynStrategy> {
    Box::new(Typed(CronJobStrategy))
}

pub fn job() -> Box<dyn DynStrategy> {
    Box::new(Typed(JobStrategy))
}

/// Labels the API server puts on a Job's pod template and selector.
pub const CONTROLLER_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";
pub const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";
pub const LEGACY_CONTROLLER_UID_LABEL: &str = "controller-uid";
pub const LEGACY_JOB_NAME_LABEL: &str = "job-name";

/// `SetDefaults_Job`'s spec part.
fn set_job_spec_defaults(spec: &mut JobSpec) {
    if spec.completions.is_none() && spec.parallelism.is_none() {
        spec.completions = Some(1);
    }
    spec.parallelism.get_or_insert(1);
    if spec.backoff_limit.is_none() {
        spec.backoff_limit = Some(if spec.backoff_limit_per_index.is_some() { i32::MAX } else { 6 });
    }
    if spec.completion_mode.is_none() {
        spec.completion_mode = Some("NonIndexed".into());
    }
    spec.suspend.get_or_insert(false);
    if spec.pod_replacement_policy.is_none() {
        let policy = if spec.pod_failure_policy.is_some() { "Failed" } else { "TerminatingOrFailed" };
        spec.pod_replacement_policy = Some(policy.into());
    }
    // Defaulted since v1.29 (kubernetes/kubernetes#120206).
    spec.manual_selector.get_or_insert(false);
    for rule in spec.pod_failure_policy.iter_mut().flat_map(|p| p.rules.iter_mut()) {
        for pattern in rule.on_pod_conditions.iter_mut().flatten() {
            if pattern.status.as_deref().unwrap_or_default().is_empty() {
                pattern.status = Some("True".into());
            }
        }
    }
}

/// `validateJobSpec`: everything but the selector.
fn validate_job_spec_common(spec: &JobSpec, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (name, v) in [
        ("parallelism", spec.parallelism.map(i64::from)),
        ("completions", spec.completions.map(i64::from)),
        ("activeDeadlineSeconds", spec.active_deadline_seconds),
        ("backoffLimit", spec.backoff_limit.map(i64::from)),
        ("ttlSecondsAfterFinished", spec.ttl_seconds_after_finished.map(i64::from)),
        ("backoffLimitPerIndex", spec.backoff_limit_per_index.map(i64::from)),
        ("maxFailedIndexes", spec.max_failed_indexes.map(i64::from)),
    ] {
        if let Some(v) = v {
            errs.extend(formats::validate_non_negative(v, &path.child(name)));
        }
    }
    let mode = spec.completion_mode.as_deref();
    if let Some(m) = mode {
        if !["NonIndexed", "Indexed"].contains(&m) {
            errs.push(FieldError::not_supported(path.child("completionMode"), m, &["NonIndexed", "Indexed"]));
        }
        if m == "Indexed" && spec.completions.is_none() {
            errs.push(FieldError::required(path.child("completions"), "when completion mode is Indexed"));
        }
    }
    if spec.backoff_limit_per_index.is_some() && mode != Some("Indexed") {
        errs.push(FieldError::invalid(
            path.child("backoffLimitPerIndex"),
            formats::to_value(&spec.backoff_limit_per_index),
            "requires indexed completion mode",
        ));
    }
    if let Some(p) = spec.pod_replacement_policy.as_deref() {
        let p_path = path.child("podReplacementPolicy");
        if spec.pod_failure_policy.is_some() {
            if p != "Failed" {
                errs.push(FieldError::not_supported(p_path, p, &["Failed"]));
            }
        } else if !["Failed", "TerminatingOrFailed"].contains(&p) {
            errs.push(FieldError::not_supported(p_path, p, &["Failed", "TerminatingOrFailed"]));
        }
    }
    if let Some(policy) = &spec.pod_failure_policy {
        const ACTIONS: &[&str] = &["Count", "FailIndex", "FailJob", "Ignore"];
        for (i, rule) in policy.rules.iter().enumerate() {
            let rp = path.child("podFailurePolicy").child("rules").index(i);
            if !ACTIONS.contains(&rule.action.as_str()) {
                errs.push(FieldError::not_supported(rp.child("action"), rule.action.as_str(), ACTIONS));
            }
            let conds = rule.on_pod_conditions.as_ref().is_some_and(|c| !c.is_empty());
            match (rule.on_exit_codes.is_some(), conds) {
                (true, true) => errs.push(FieldError::invalid(
                    &rp,
                    formats::to_value(rule),
                    "specifying both OnExitCodes and OnPodConditions is not supported",
                )),
                (false, false) => errs.push(FieldError::invalid(
                    &rp,
                    formats::to_value(rule),
                    "specifying one of OnExitCodes and OnPodConditions is required",
                )),
                _ => {}
            }
        }
    }
    let tp = path.child("template");
    errs.extend(pod_spec::validate_pod_template_spec(&spec.template, &tp));
    let rp = spec.template.spec.as_ref().and_then(|s| s.restart_policy.as_deref()).unwrap_or_default();
    if rp != "OnFailure" && rp != "Never" {
        errs.push(FieldError::not_supported(tp.child("spec").child("restartPolicy"), rp, &["OnFailure", "Never"]));
    } else if rp == "OnFailure" && spec.pod_failure_policy.is_some() {
        errs.push(FieldError::invalid(
            tp.child("spec").child("restartPolicy"),
            rp,
            "only \"Never\" is supported when podFailurePolicy is specified",
        ));
    }
    errs
}

/// `ValidateJobSpec`: the selector is required and must select the template.
fn validate_job_spec(spec: &JobSpec, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let labels = spec.template.metadata.as_ref().and_then(|m| m.labels.as_ref());
    match &spec.selector {
        None => errs.push(FieldError::required(path.child("selector"), "")),
        Some(sel) => {
            errs.extend(label_selector::validate(sel, &path.child("selector")));
            if label_selector::matches(sel, labels) == Some(false) {
                errs.push(FieldError::invalid(
                    path.child("template").child("metadata").child("labels"),
                    formats::to_value(&labels),
                    "`selector` does not match template `labels`",
                ));
            }
        }
    }
    errs.extend(validate_job_spec_common(spec, path));
    errs
}

fn manual_selector(spec: &JobSpec) -> bool {
    spec.manual_selector == Some(true)
}

/// Job: completions/parallelism 1, backoffLimit 6, generated selector and labels on create.
pub struct JobStrategy;

impl JobStrategy {
    /// `generateSelector`: unique labels on the template and a selector for them.
    fn generate_selector(job: &mut Job) {
        let name = job.metadata.name.clone().unwrap_or_default();
        let uid = job.metadata.uid.clone().unwrap_or_default();
        let spec = job.spec.get_or_insert_with(Default::default);
        let labels =
            spec.template.metadata.get_or_insert_with(Default::default).labels.get_or_insert_with(BTreeMap::new);
        for key in [LEGACY_JOB_NAME_LABEL, JOB_NAME_LABEL] {
            labels.entry(key.to_string()).or_insert_with(|| name.clone());
        }
        for key in [LEGACY_CONTROLLER_UID_LABEL, CONTROLLER_UID_LABEL] {
            labels.entry(key.to_string()).or_insert_with(|| uid.clone());
        }
        let selector = spec.selector.get_or_insert_with(LabelSelector::default);
        selector.match_labels.get_or_insert_with(BTreeMap::new).entry(CONTROLLER_UID_LABEL.to_string()).or_insert(uid);
    }

    /// `validateGeneratedSelector`: generated labels and selector carry the Job's uid.
    fn validate_generated_selector(job: &Job) -> Vec<FieldError> {
        let Some(spec) = &job.spec else { return Vec::new() };
        let uid = job.metadata.uid.as_deref().unwrap_or_default();
        if manual_selector(spec) || uid.is_empty() {
            return Vec::new();
        }
        let Some(labels) = spec.template.metadata.as_ref().and_then(|m| m.labels.as_ref()) else { return Vec::new() };
        let mut errs = Vec::new();
        let lp = Path::new("spec").child("template").child("metadata").child("labels");
        for key in [LEGACY_CONTROLLER_UID_LABEL, CONTROLLER_UID_LABEL] {
            if labels.get(key).map(String::as_str) != Some(uid) {
                errs.push(FieldError::invalid(lp.key(key), formats::to_value(labels), format!("must be '{uid}'")));
            }
        }
        if let Some(sel) = &spec.selector {
            let with = |k: &str| BTreeMap::from([(k.to_string(), uid.to_string())]);
            let ok = label_selector::matches(sel, Some(&with(LEGACY_CONTROLLER_UID_LABEL))) == Some(true)
                || label_selector::matches(sel, Some(&with(CONTROLLER_UID_LABEL))) == Some(true);
            if !ok {
                errs.push(FieldError::invalid(
                    Path::new("spec").child("selector"),
                    formats::to_value(sel),
                    "`selector` not auto-generated",
                ));
            }
        }
        errs
    }
}

impl Strategy for JobStrategy {
    type Object = Job;

    fn set_defaults(&self, job: &mut Job) {
        let spec = job.spec.get_or_insert_with(Default::default);
        set_job_spec_defaults(spec);
        pod_spec::set_template_defaults(&mut spec.template);
        copy_template_labels(job);
    }

    fn prepare_for_create(&self, job: &mut Job) {
        if !job.spec.as_ref().is_some_and(manual_selector) {
            Self::generate_selector(job);
        }
        job.status = Some(JobStatus::default());
        // Upstream defaults the Job's own labels from the template again when it reads the object
        // back; doing it here yields the same stored object.
        copy_template_labels(job);
    }

    fn validate(&self, job: &Job) -> Vec<FieldError> {
        let mut errs = Self::validate_generated_selector(job);
        errs.extend(validate_job_spec(&job.spec.clone().unwrap_or_default(), &Path::new("spec")));
        errs
    }

    fn validate_update(&self, new: &Job, old: &Job) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let (n, o) = (new.spec.clone().unwrap_or_default(), old.spec.clone().unwrap_or_default());
        let path = Path::new("spec");
        errs.extend(formats::validate_immutable(&n.selector, &o.selector, &path.child("selector")));
        let elastic = n.completion_mode.as_deref() == Some("Indexed")
            && n.completions == n.parallelism
            && o.completions == o.parallelism;
        if !elastic {
            errs.extend(formats::validate_immutable(&n.completions, &o.completions, &path.child("completions")));
        }
        for (name, a, b) in [
            ("completionMode", formats::to_value(&n.completion_mode), formats::to_value(&o.completion_mode)),
            ("podFailurePolicy", formats::to_value(&n.pod_failure_policy), formats::to_value(&o.pod_failure_policy)),
            (
                "backoffLimitPerIndex",
                formats::to_value(&n.backoff_limit_per_index),
                formats::to_value(&o.backoff_limit_per_index),
            ),
            ("managedBy", formats::to_value(&n.managed_by), formats::to_value(&o.managed_by)),
            ("successPolicy", formats::to_value(&n.success_policy), formats::to_value(&o.success_policy)),
            (
                "podReplacementPolicy",
                formats::to_value(&n.pod_replacement_policy),
                formats::to_value(&o.pod_replacement_policy),
            ),
        ] {
            errs.extend(formats::validate_immutable(&a, &b, &path.child(name)));
        }
        // A suspended Job that never started may still change its scheduling directives.
        let mut old_template = o.template.clone();
        let not_started = old.status.as_ref().and_then(|s| s.start_time.as_ref()).is_none();
        if o.suspend == Some(true) && not_started {
            let nm = n.template.metadata.clone().unwrap_or_default();
            let om = old_template.metadata.get_or_insert_with(Default::default);
            om.labels = nm.labels;
            om.annotations = nm.annotations;
            if let (Some(os), Some(ns)) = (old_template.spec.as_mut(), n.template.spec.as_ref()) {
                os.node_selector = ns.node_selector.clone();
                os.tolerations = ns.tolerations.clone();
                os.affinity = ns.affinity.clone();
                os.scheduling_gates = ns.scheduling_gates.clone();
            }
        }
        if !semantic::equal(&n.template, &old_template) {
            errs.push(FieldError::invalid(
                path.child("template"),
                formats::to_value(&n.template),
                "field is immutable",
            ));
        }
        errs
    }
}

impl ObjectHooks for JobStrategy {
    fn tracks_generation(&self) -> bool {
        true
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &["status.successful"]
    }
}

fn copy_template_labels(job: &mut Job) {
    let template_labels = job.spec.as_ref().and_then(|s| s.template.metadata.as_ref()).and_then(|m| m.labels.clone());
    if let Some(labels) = template_labels {
        if job.metadata.labels.as_ref().is_none_or(BTreeMap::is_empty) {
            job.metadata.labels = Some(labels);
        }
    }
}

/// CronJob: concurrency Allow, not suspended, keep 3 successful and 1 failed Job.
pub struct CronJobStrategy;

const CONCURRENCY_POLICIES: &[&str] = &["Allow", "Forbid", "Replace"];

fn is_valid_time_zone_part(part: &str) -> bool {
    !part.is_empty()
        && part.len() <= 14
        && part != "."
        && part != ".."
        && !part.starts_with('-')
        && part.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '+'))
}

fn validate_time_zone(tz: Option<&str>, path: &Path) -> Vec<FieldError> {
    let Some(tz) = tz else { return Vec::new() };
    if tz.is_empty() {
        return vec![FieldError::invalid(path, tz, "timeZone must be nil or non-empty string")];
    }
    if !tz.split('/').all(is_valid_time_zone_part) {
        return vec![FieldError::invalid(path, tz, format!("unknown time zone {tz}"))];
    }
    if tz.eq_ignore_ascii_case("local") {
        return vec![FieldError::invalid(
            path,
            tz,
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
        )];
    }
    Vec::new()
}

impl CronJobStrategy {
    fn validate_spec(cj: &CronJob, old: Option<&CronJob>) -> Vec<FieldError> {
        let spec = cj.spec.clone().unwrap_or_default();
        let old_spec = old.map(|o| o.spec.clone().unwrap_or_default());
        let path = Path::new("spec");
        let mut errs = Vec::new();
        let sp = path.child("schedule");
        if spec.schedule.is_empty() {
            errs.push(FieldError::required(&sp, ""));
        } else {
            if let Err(e) = cron::parse(&spec.schedule) {
                errs.push(FieldError::invalid(&sp, spec.schedule.as_str(), e.0));
            }
            let allow_tz = old_spec.as_ref().is_some_and(|o| o.schedule.contains("TZ"));
            if spec.schedule.contains("TZ") {
                if !allow_tz {
                    errs.push(FieldError::invalid(
                        &sp,
                        spec.schedule.as_str(),
                        "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
                    ));
                } else if spec.time_zone.is_some() {
                    errs.push(FieldError::invalid(
                        &sp,
                        spec.schedule.as_str(),
                        "cannot use both timeZone field and TZ or CRON_TZ in schedule",
                    ));
                }
            }
        }
        if let Some(s) = spec.starting_deadline_seconds {
            errs.extend(formats::validate_non_negative(s, &path.child("startingDeadlineSeconds")));
        }
        if old_spec.as_ref().is_none_or(|o| o.time_zone != spec.time_zone) {
            errs.extend(validate_time_zone(spec.time_zone.as_deref(), &path.child("timeZone")));
        }
        errs.extend(formats::validate_enum(
            spec.concurrency_policy.as_deref(),
            CONCURRENCY_POLICIES,
            &path.child("concurrencyPolicy"),
        ));
        let jp = path.child("jobTemplate").child("spec");
        let job_spec = spec.job_template.spec.clone().unwrap_or_default();
        errs.extend(validate_job_spec_common(&job_spec, &jp));
        if let Some(sel) = &job_spec.selector {
            errs.push(FieldError::invalid(
                jp.child("selector"),
                formats::to_value(sel),
                "`selector` will be auto-generated",
            ));
        }
        if job_spec.manual_selector == Some(true) {
            errs.push(FieldError::not_supported(jp.child("manualSelector"), true, &["nil", "false"]));
        }
        for (name, v) in [
            ("successfulJobsHistoryLimit", spec.successful_jobs_history_limit),
            ("failedJobsHistoryLimit", spec.failed_jobs_history_limit),
        ] {
            if let Some(v) = v {
                errs.extend(formats::validate_non_negative(i64::from(v), &path.child(name)));
            }
        }
        errs
    }
}

impl Strategy for CronJobStrategy {
    type Object = CronJob;

    fn set_defaults(&self, cj: &mut CronJob) {
        let spec = cj.spec.get_or_insert_with(Default::default);
        if spec.concurrency_policy.as_deref().unwrap_or_default().is_empty() {
            spec.concurrency_policy = Some("Allow".into());
        }
        spec.suspend.get_or_insert(false);
        spec.successful_jobs_history_limit.get_or_insert(3);
        spec.failed_jobs_history_limit.get_or_insert(1);
        let job_spec = spec.job_template.spec.get_or_insert_with(Default::default);
        pod_spec::set_template_defaults(&mut job_spec.template);
    }

    fn prepare_for_create(&self, cj: &mut CronJob) {
        cj.status = Some(CronJobStatus::default());
    }

    fn validate(&self, cj: &CronJob) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let name = cj.metadata.name.as_deref().unwrap_or_default();
        if name.len() > 52 {
            errs.push(FieldError::invalid(
                Path::new("metadata").child("name"),
                name,
                "must be no more than 52 characters",
            ));
        }
        errs.extend(Self::validate_spec(cj, None));
        errs
    }

    fn validate_update(&self, new: &CronJob, old: &CronJob) -> Vec<FieldError> {
        Self::validate_spec(new, Some(old))
    }
}

impl ObjectHooks for CronJobStrategy {
    fn tracks_generation(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::{CronJobSpec, JobTemplateSpec};
    use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn template(restart: Option<&str>) -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: None,
            spec: Some(PodSpec {
                containers: vec![Container { name: "pi".into(), image: Some("perl".into()), ..Default::default() }],
                restart_policy: restart.map(str::to_string),
                ..Default::default()
            }),
        }
    }

    fn job(restart: Option<&str>) -> Job {
        let mut j = Job {
            metadata: ObjectMeta { name: Some("pi".into()), uid: Some("uid-1".into()), ..Default::default() },
            spec: Some(JobSpec { template: template(restart), ..Default::default() }),
            status: None,
        };
        JobStrategy.set_defaults(&mut j);
        JobStrategy.prepare_for_create(&mut j);
        j
    }

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn job_defaults_and_generated_selector() {
        let j = job(Some("Never"));
        let spec = j.spec.as_ref().expect("spec");
        assert_eq!((spec.completions, spec.parallelism, spec.backoff_limit), (Some(1), Some(1), Some(6)));
        assert_eq!(spec.completion_mode.as_deref(), Some("NonIndexed"));
        assert_eq!(spec.suspend, Some(false));
        assert_eq!(spec.pod_replacement_policy.as_deref(), Some("TerminatingOrFailed"));
        assert_eq!(spec.manual_selector, Some(false));
        let labels = spec.template.metadata.as_ref().and_then(|m| m.labels.clone()).expect("labels");
        assert_eq!(labels[CONTROLLER_UID_LABEL], "uid-1");
        assert_eq!(labels[LEGACY_CONTROLLER_UID_LABEL], "uid-1");
        assert_eq!(labels[JOB_NAME_LABEL], "pi");
        assert_eq!(labels[LEGACY_JOB_NAME_LABEL], "pi");
        let sel = spec.selector.as_ref().and_then(|s| s.match_labels.clone()).expect("selector");
        assert_eq!(sel, BTreeMap::from([(CONTROLLER_UID_LABEL.to_string(), "uid-1".to_string())]));
        assert_eq!(j.metadata.labels.as_ref(), Some(&labels));
        assert!(JobStrategy.validate(&j).is_empty());
    }

    #[test]
    fn job_restart_policy_must_be_on_failure_or_never() {
        let m = messages(&JobStrategy.validate(&job(None)));
        assert_eq!(
            m,
            ["spec.template.spec.restartPolicy: Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\""]
        );
    }

    #[test]
    fn job_counts_must_be_non_negative() {
        let mut j = job(Some("OnFailure"));
        let spec = j.spec.as_mut().expect("spec");
        spec.parallelism = Some(-1);
        spec.backoff_limit = Some(-2);
        let m = messages(&JobStrategy.validate(&j));
        assert!(m.contains(&"spec.parallelism: Invalid value: -1: must be greater than or equal to 0".to_string()));
        assert!(m.contains(&"spec.backoffLimit: Invalid value: -2: must be greater than or equal to 0".to_string()));
    }

    #[test]
    fn manual_selector_must_match_and_generated_selector_is_checked() {
        let mut j = Job {
            metadata: ObjectMeta { name: Some("m".into()), uid: Some("u".into()), ..Default::default() },
            spec: Some(JobSpec {
                template: template(Some("Never")),
                manual_selector: Some(true),
                ..Default::default()
            }),
            status: None,
        };
        JobStrategy.set_defaults(&mut j);
        JobStrategy.prepare_for_create(&mut j);
        assert_eq!(messages(&JobStrategy.validate(&j)), ["spec.selector: Required value"]);
        let mut wrong = job(Some("Never"));
        wrong.spec.as_mut().expect("spec").selector = Some(LabelSelector {
            match_labels: Some(BTreeMap::from([("job-name".to_string(), "pi".to_string())])),
            ..Default::default()
        });
        let m = messages(&JobStrategy.validate(&wrong));
        assert!(m
            .iter()
            .any(|s| s.starts_with("spec.selector: Invalid value") && s.ends_with("`selector` not auto-generated")));
    }

    #[test]
    fn job_selector_and_template_are_immutable() {
        let old = job(Some("Never"));
        let mut new = old.clone();
        new.spec.as_mut().expect("spec").template.spec.as_mut().expect("pod").containers[0].image =
            Some("perl:2".into());
        let m = messages(&JobStrategy.validate_update(&new, &old));
        assert_eq!(m.len(), 1);
        assert!(m[0].starts_with("spec.template: Invalid value:") && m[0].ends_with("field is immutable"));
        let mut suspended_old = old.clone();
        suspended_old.spec.as_mut().expect("spec").suspend = Some(true);
        let mut relabeled = suspended_old.clone();
        relabeled.spec.as_mut().expect("spec").template.spec.as_mut().expect("pod").node_selector =
            Some(BTreeMap::from([("disk".to_string(), "ssd".to_string())]));
        assert!(JobStrategy.validate_update(&relabeled, &suspended_old).is_empty());
    }

    fn cron_job(schedule: &str) -> CronJob {
        let mut cj = CronJob {
            metadata: ObjectMeta { name: Some("hello".into()), ..Default::default() },
            spec: Some(CronJobSpec {
                schedule: schedule.into(),
                job_template: JobTemplateSpec {
                    metadata: None,
                    spec: Some(JobSpec { template: template(Some("OnFailure")), ..Default::default() }),
                },
                ..Default::default()
            }),
            status: None,
        };
        CronJobStrategy.set_defaults(&mut cj);
        cj
    }

    #[test]
    fn cron_job_defaults_and_schedule() {
        let cj = cron_job("*/1 * * * *");
        let spec = cj.spec.as_ref().expect("spec");
        assert_eq!(spec.concurrency_policy.as_deref(), Some("Allow"));
        assert_eq!(spec.suspend, Some(false));
        assert_eq!((spec.successful_jobs_history_limit, spec.failed_jobs_history_limit), (Some(3), Some(1)));
        assert!(CronJobStrategy.validate(&cj).is_empty());
        assert_eq!(messages(&CronJobStrategy.validate(&cron_job(""))), ["spec.schedule: Required value"]);
        assert_eq!(
            messages(&CronJobStrategy.validate(&cron_job("* * *"))),
            ["spec.schedule: Invalid value: \"* * *\": expected exactly 5 fields, found 3: [* * *]"]
        );
        assert!(CronJobStrategy.validate(&cron_job("@hourly")).is_empty());
        assert_eq!(
            messages(&CronJobStrategy.validate(&cron_job("TZ=UTC 0 * * * *"))),
            ["spec.schedule: Invalid value: \"TZ=UTC 0 * * * *\": cannot use TZ or CRON_TZ in schedule, use timeZone field instead"]
        );
    }

    #[test]
    fn cron_job_time_zone_and_name_length() {
        let mut cj = cron_job("0 * * * *");
        cj.spec.as_mut().expect("spec").time_zone = Some("Europe/Berlin".into());
        assert!(CronJobStrategy.validate(&cj).is_empty());
        cj.spec.as_mut().expect("spec").time_zone = Some("Not a zone".into());
        assert_eq!(
            messages(&CronJobStrategy.validate(&cj)),
            ["spec.timeZone: Invalid value: \"Not a zone\": unknown time zone Not a zone"]
        );
        let mut long = cron_job("0 * * * *");
        long.metadata.name = Some("a".repeat(53));
        assert!(messages(&CronJobStrategy.validate(&long))[0].ends_with("must be no more than 52 characters"));
    }
}
