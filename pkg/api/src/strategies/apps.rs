//! Strategies for the apps resources (Deployment, ReplicaSet, StatefulSet, DaemonSet), as
//! upstream's `pkg/apis/apps/v1/defaults.go`, `pkg/apis/apps/validation` and
//! `pkg/registry/apps/*/strategy.go`.

use super::formats;
use super::label_selector;
use super::persistent_volumes;
use super::pod_spec;
use super::semantic;
use crate::field::{FieldError, Path};
use crate::strategy::{DynStrategy, ObjectHooks, Strategy, Typed};
use k8s_openapi::api::apps::v1::{
    DaemonSet, DaemonSetSpec, DaemonSetStatus, DaemonSetUpdateStrategy, Deployment, DeploymentSpec, DeploymentStatus,
    DeploymentStrategy as DeploymentStrategySpec, ReplicaSet, ReplicaSetSpec, ReplicaSetStatus, RollingUpdateDaemonSet,
    RollingUpdateDeployment, RollingUpdateStatefulSetStrategy, StatefulSet,
    StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetSpec, StatefulSetStatus, StatefulSetUpdateStrategy,
};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;
use std::collections::BTreeMap;

pub fn daemon_set() -> Box<dyn DynStrategy> {
    Box::new(Typed(DaemonSetStrategy))
}

pub fn deployment() -> Box<dyn DynStrategy> {
    Box::new(Typed(DeploymentStrategy))
}

pub fn replica_set() -> Box<dyn DynStrategy> {
    Box::new(Typed(ReplicaSetStrategy))
}

pub fn stateful_set() -> Box<dyn DynStrategy> {
    Box::new(Typed(StatefulSetStrategy))
}

/// The annotation carrying a DaemonSet's template generation in the v1 API.
pub const TEMPLATE_GENERATION_ANNOTATION: &str = "deprecated.daemonset.template.generation";

fn template_labels(t: &PodTemplateSpec) -> Option<&BTreeMap<String, String>> {
    t.metadata.as_ref().and_then(|m| m.labels.as_ref())
}

/// The selector checks every replicated workload shares: required, valid, non-empty, and
/// matching the template's labels (`spec.template.metadata.labels`).
fn validate_selector(selector: &LabelSelector, template: &PodTemplateSpec, path: &Path) -> Vec<FieldError> {
    let sel_path = path.child("selector");
    let mut errs = Vec::new();
    let labels_path = path.child("template").child("metadata").child("labels");
    let mismatch = |errs: &mut Vec<FieldError>| {
        errs.push(FieldError::invalid(
            &labels_path,
            formats::to_value(&template_labels(template)),
            "`selector` does not match template `labels`",
        ));
    };
    if label_selector::is_empty(selector) {
        // A missing selector decodes as an empty one; upstream reports both problems for it.
        errs.push(FieldError::required(&sel_path, ""));
        mismatch(&mut errs);
        return errs;
    }
    errs.extend(label_selector::validate(selector, &sel_path));
    match label_selector::matches(selector, template_labels(template)) {
        None => errs.push(FieldError::invalid(&sel_path, formats::to_value(selector), "invalid label selector")),
        Some(false) => mismatch(&mut errs),
        Some(true) => {}
    }
    errs
}

/// Template rules for pods that run forever: valid template, `restartPolicy: Always`, no
/// `activeDeadlineSeconds`.
pub(crate) fn validate_replicated_template(t: &PodTemplateSpec, kind: &str, path: &Path) -> Vec<FieldError> {
    let mut errs = pod_spec::validate_pod_template_spec(t, path);
    let spec = t.spec.clone().unwrap_or_default();
    let rp = spec.restart_policy.as_deref().unwrap_or_default();
    if rp != "Always" {
        errs.push(FieldError::not_supported(path.child("spec").child("restartPolicy"), rp, &["Always"]));
    }
    if let Some(ads) = spec.active_deadline_seconds {
        let p = path.child("spec").child("activeDeadlineSeconds");
        let detail = format!("activeDeadlineSeconds in {kind} is not Supported");
        errs.push(if kind == "DaemonSet" {
            FieldError::invalid(p, ads, detail)
        } else {
            FieldError::forbidden(p, detail)
        });
    }
    errs
}

fn int_or_percent_value(v: &IntOrString) -> (i64, bool) {
    match v {
        IntOrString::Int(n) => (i64::from(*n), false),
        IntOrString::String(s) => (s.trim_end_matches('%').parse().unwrap_or_default(), s.ends_with('%')),
    }
}

/// `ValidatePositiveIntOrPercent` plus `IsNotMoreThan100Percent`.
fn validate_int_or_percent(v: Option<&IntOrString>, path: &Path) -> Vec<FieldError> {
    let Some(v) = v else { return Vec::new() };
    let mut errs = match v {
        IntOrString::String(s) => formats::each_invalid(path, s, formats::percent(s)),
        IntOrString::Int(n) => formats::validate_non_negative(i64::from(*n), path),
    };
    let (value, percent) = int_or_percent_value(v);
    if errs.is_empty() && percent && value > 100 {
        errs.push(FieldError::invalid(path, formats::to_value(v), "must not be greater than 100%"));
    }
    errs
}

fn validate_revision_history(limit: Option<i32>, path: &Path) -> Vec<FieldError> {
    limit.map(|l| formats::validate_non_negative(i64::from(l), &path.child("revisionHistoryLimit"))).unwrap_or_default()
}

fn clear_status<T: Default>(status: &mut Option<T>) {
    *status = Some(T::default());
}

/// Deployment: replicas 1, RollingUpdate 25%/25%, history 10, progress deadline 600s.
pub struct DeploymentStrategy;

fn validate_deployment_strategy(s: &DeploymentStrategySpec, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match s.type_.as_deref().unwrap_or_default() {
        "Recreate" => {
            if s.rolling_update.is_some() {
                errs.push(FieldError::forbidden(
                    path.child("rollingUpdate"),
                    "may not be specified when strategy `type` is 'Recreate'",
                ));
            }
        }
        "RollingUpdate" => match &s.rolling_update {
            None => errs
                .push(FieldError::required(path.child("rollingUpdate"), "this should be defaulted and never be nil")),
            Some(ru) => {
                let rp = path.child("rollingUpdate");
                errs.extend(validate_int_or_percent(ru.max_unavailable.as_ref(), &rp.child("maxUnavailable")));
                errs.extend(validate_int_or_percent(ru.max_surge.as_ref(), &rp.child("maxSurge")));
                let zero = |v: Option<&IntOrString>| v.is_none_or(|v| int_or_percent_value(v).0 == 0);
                if zero(ru.max_unavailable.as_ref()) && zero(ru.max_surge.as_ref()) {
                    errs.push(FieldError::invalid(
                        rp.child("maxUnavailable"),
                        formats::to_value(&ru.max_unavailable),
                        "may not be 0 when `maxSurge` is 0",
                    ));
                }
            }
        },
        _ => errs.push(FieldError::not_supported(path, formats::to_value(s), &["Recreate", "RollingUpdate"])),
    }
    errs
}

fn validate_deployment_spec(spec: &DeploymentSpec, path: &Path) -> Vec<FieldError> {
    let mut errs =
        formats::validate_non_negative(i64::from(spec.replicas.unwrap_or_default()), &path.child("replicas"));
    errs.extend(validate_selector(&spec.selector, &spec.template, path));
    errs.extend(validate_replicated_template(&spec.template, "ReplicaSet", &path.child("template")));
    errs.extend(validate_deployment_strategy(&spec.strategy.clone().unwrap_or_default(), &path.child("strategy")));
    let min_ready = spec.min_ready_seconds.unwrap_or_default();
    errs.extend(formats::validate_non_negative(i64::from(min_ready), &path.child("minReadySeconds")));
    errs.extend(validate_revision_history(spec.revision_history_limit, path));
    if let Some(pds) = spec.progress_deadline_seconds {
        let p = path.child("progressDeadlineSeconds");
        errs.extend(formats::validate_non_negative(i64::from(pds), &p));
        if pds <= min_ready {
            errs.push(FieldError::invalid(p, pds, "must be greater than minReadySeconds"));
        }
    }
    errs
}

impl Strategy for DeploymentStrategy {
    type Object = Deployment;

    fn set_defaults(&self, d: &mut Deployment) {
        let spec = d.spec.get_or_insert_with(Default::default);
        spec.replicas.get_or_insert(1);
        let strategy = spec.strategy.get_or_insert_with(DeploymentStrategySpec::default);
        if strategy.type_.as_deref().unwrap_or_default().is_empty() {
            strategy.type_ = Some("RollingUpdate".into());
        }
        if strategy.type_.as_deref() == Some("RollingUpdate") {
            let ru = strategy.rolling_update.get_or_insert_with(RollingUpdateDeployment::default);
            ru.max_unavailable.get_or_insert_with(|| IntOrString::String("25%".into()));
            ru.max_surge.get_or_insert_with(|| IntOrString::String("25%".into()));
        }
        spec.revision_history_limit.get_or_insert(10);
        spec.progress_deadline_seconds.get_or_insert(600);
        pod_spec::set_template_defaults(&mut spec.template);
    }

    fn prepare_for_create(&self, d: &mut Deployment) {
        clear_status::<DeploymentStatus>(&mut d.status);
    }

    fn prepare_for_update(&self, new: &mut Deployment, old: &Deployment) {
        // Annotation changes bump the generation too: they are copied to ReplicaSets.
        if !semantic::equal(&new.spec, &old.spec)
            || !semantic::equal(&new.metadata.annotations, &old.metadata.annotations)
        {
            new.metadata.generation = Some(old.metadata.generation.unwrap_or_default() + 1);
        }
    }

    fn validate(&self, d: &Deployment) -> Vec<FieldError> {
        validate_deployment_spec(&d.spec.clone().unwrap_or_default(), &Path::new("spec"))
    }

    fn validate_update(&self, new: &Deployment, old: &Deployment) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let sel = |d: &Deployment| d.spec.as_ref().map(|s| s.selector.clone()).unwrap_or_default();
        errs.extend(formats::validate_immutable(&sel(new), &sel(old), &Path::new("spec").child("selector")));
        errs
    }
}

impl ObjectHooks for DeploymentStrategy {
    fn tracks_generation(&self) -> bool {
        true
    }

    /// The annotations count too: they are copied to the ReplicaSets (upstream's
    /// deploymentStrategy bumps the generation on either).
    fn generation_changed(&self, new: &Value, old: &Value) -> bool {
        let annotations = |v: &Value| v.get("metadata").and_then(|m| m.get("annotations")).cloned();
        new.get("spec") != old.get("spec") || annotations(new) != annotations(old)
    }

    /// The Deployment controller writes the `deployment.kubernetes.io/revision` annotation with
    /// the status (upstream's deploymentStatusStrategy resets only spec and labels), so that it
    /// does not bump the generation as a main-resource write would.
    fn status_update_keeps_annotations(&self) -> bool {
        true
    }
}

/// ReplicaSet: replicas 1.
pub struct ReplicaSetStrategy;

fn validate_replica_set_spec(spec: &ReplicaSetSpec, path: &Path) -> Vec<FieldError> {
    let mut errs =
        formats::validate_non_negative(i64::from(spec.replicas.unwrap_or_default()), &path.child("replicas"));
    errs.extend(formats::validate_non_negative(
        i64::from(spec.min_ready_seconds.unwrap_or_default()),
        &path.child("minReadySeconds"),
    ));
    let template = spec.template.clone().unwrap_or_default();
    errs.extend(validate_selector(&spec.selector, &template, path));
    errs.extend(validate_replicated_template(&template, "ReplicaSet", &path.child("template")));
    errs
}

impl Strategy for ReplicaSetStrategy {
    type Object = ReplicaSet;

    fn set_defaults(&self, rs: &mut ReplicaSet) {
        let spec = rs.spec.get_or_insert_with(Default::default);
        spec.replicas.get_or_insert(1);
        pod_spec::set_template_defaults(spec.template.get_or_insert_with(Default::default));
    }

    fn prepare_for_create(&self, rs: &mut ReplicaSet) {
        clear_status::<ReplicaSetStatus>(&mut rs.status);
    }

    fn validate(&self, rs: &ReplicaSet) -> Vec<FieldError> {
        validate_replica_set_spec(&rs.spec.clone().unwrap_or_default(), &Path::new("spec"))
    }

    fn validate_update(&self, new: &ReplicaSet, old: &ReplicaSet) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let sel = |r: &ReplicaSet| r.spec.as_ref().map(|s| s.selector.clone()).unwrap_or_default();
        errs.extend(formats::validate_immutable(&sel(new), &sel(old), &Path::new("spec").child("selector")));
        errs
    }
}

impl ObjectHooks for ReplicaSetStrategy {
    fn selectable_fields(&self) -> &'static [&'static str] {
        &["status.replicas"]
    }

    fn tracks_generation(&self) -> bool {
        true
    }
}

/// StatefulSet: replicas 1, OrderedReady, RollingUpdate partition 0, history 10, claims retained.
pub struct StatefulSetStrategy;

fn validate_stateful_set_spec(spec: &StatefulSetSpec, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match spec.pod_management_policy.as_deref().unwrap_or_default() {
        "" => errs.push(FieldError::required(path.child("podManagementPolicy"), "")),
        "OrderedReady" | "Parallel" => {}
        other => errs.push(FieldError::invalid(
            path.child("podManagementPolicy"),
            other,
            "must be 'OrderedReady' or 'Parallel'",
        )),
    }
    let us = spec.update_strategy.clone().unwrap_or_default();
    let us_path = path.child("updateStrategy");
    match us.type_.as_deref().unwrap_or_default() {
        "" => errs.push(FieldError::required(&us_path, "")),
        "OnDelete" => {
            if let Some(ru) = &us.rolling_update {
                errs.push(FieldError::invalid(
                    us_path.child("rollingUpdate"),
                    formats::to_value(ru),
                    "only allowed for updateStrategy 'RollingUpdate'",
                ));
            }
        }
        "RollingUpdate" => {
            if let Some(ru) = &us.rolling_update {
                let rp = us_path.child("rollingUpdate");
                errs.extend(formats::validate_non_negative(
                    i64::from(ru.partition.unwrap_or_default()),
                    &rp.child("partition"),
                ));
                if let Some(mu) = &ru.max_unavailable {
                    errs.extend(validate_int_or_percent(Some(mu), &rp.child("maxUnavailable")));
                    if int_or_percent_value(mu).0 == 0 {
                        errs.push(FieldError::invalid(
                            rp.child("maxUnavailable"),
                            formats::to_value(mu),
                            "must be greater than 0",
                        ));
                    }
                }
            }
        }
        _ => errs.push(FieldError::invalid(&us_path, formats::to_value(&us), "must be 'RollingUpdate' or 'OnDelete'")),
    }
    if let Some(p) = &spec.persistent_volume_claim_retention_policy {
        let pp = path.child("persistentVolumeClaimRetentionPolicy");
        for (name, v) in [("whenDeleted", &p.when_deleted), ("whenScaled", &p.when_scaled)] {
            let v = v.as_deref().unwrap_or_default();
            if !["Retain", "Delete"].contains(&v) {
                errs.push(FieldError::not_supported(pp.child(name), v, &["Retain", "Delete"]));
            }
        }
    }
    errs.extend(formats::validate_non_negative(i64::from(spec.replicas.unwrap_or_default()), &path.child("replicas")));
    errs.extend(formats::validate_non_negative(
        i64::from(spec.min_ready_seconds.unwrap_or_default()),
        &path.child("minReadySeconds"),
    ));
    if let Some(start) = spec.ordinals.as_ref().and_then(|o| o.start) {
        errs.extend(formats::validate_non_negative(i64::from(start), &path.child("ordinals").child("start")));
    }
    errs.extend(validate_selector(&spec.selector, &spec.template, path));
    // Containers may mount the claims made from volumeClaimTemplates: the controller adds them
    // to each pod as volumes, so validate the template as the pods will be.
    let mut template = spec.template.clone();
    if let (Some(claims), Some(pod)) = (&spec.volume_claim_templates, template.spec.as_mut()) {
        let vols = pod.volumes.get_or_insert_with(Vec::new);
        for c in claims {
            let Some(name) = c.metadata.name.clone() else { continue };
            if !vols.iter().any(|v| v.name == name) {
                vols.push(k8s_openapi::api::core::v1::Volume {
                    name: name.clone(),
                    persistent_volume_claim: Some(k8s_openapi::api::core::v1::PersistentVolumeClaimVolumeSource {
                        claim_name: name,
                        read_only: None,
                    }),
                    ..Default::default()
                });
            }
        }
    }
    errs.extend(validate_replicated_template(&template, "StatefulSet", &path.child("template")));
    errs.extend(validate_revision_history(spec.revision_history_limit, path));
    errs
}

impl Strategy for StatefulSetStrategy {
    type Object = StatefulSet;

    fn set_defaults(&self, s: &mut StatefulSet) {
        let spec = s.spec.get_or_insert_with(Default::default);
        if spec.pod_management_policy.as_deref().unwrap_or_default().is_empty() {
            spec.pod_management_policy = Some("OrderedReady".into());
        }
        let us = spec.update_strategy.get_or_insert_with(StatefulSetUpdateStrategy::default);
        if us.type_.as_deref().unwrap_or_default().is_empty() {
            us.type_ = Some("RollingUpdate".into());
            us.rolling_update.get_or_insert_with(RollingUpdateStatefulSetStrategy::default);
        }
        if us.type_.as_deref() == Some("RollingUpdate") {
            if let Some(ru) = us.rolling_update.as_mut() {
                ru.partition.get_or_insert(0);
            }
        }
        let policy = spec
            .persistent_volume_claim_retention_policy
            .get_or_insert_with(StatefulSetPersistentVolumeClaimRetentionPolicy::default);
        for v in [&mut policy.when_deleted, &mut policy.when_scaled] {
            if v.as_deref().unwrap_or_default().is_empty() {
                *v = Some("Retain".into());
            }
        }
        spec.replicas.get_or_insert(1);
        spec.revision_history_limit.get_or_insert(10);
        pod_spec::set_template_defaults(&mut spec.template);
        for claim in spec.volume_claim_templates.iter_mut().flatten() {
            persistent_volumes::set_claim_spec_defaults(claim.spec.get_or_insert_with(Default::default));
            let status = claim.status.get_or_insert_with(Default::default);
            if status.phase.as_deref().unwrap_or_default().is_empty() {
                status.phase = Some("Pending".into());
            }
        }
    }

    fn prepare_for_create(&self, s: &mut StatefulSet) {
        s.status = Some(StatefulSetStatus { available_replicas: Some(0), ..Default::default() });
    }

    fn validate(&self, s: &StatefulSet) -> Vec<FieldError> {
        validate_stateful_set_spec(&s.spec.clone().unwrap_or_default(), &Path::new("spec"))
    }

    fn validate_update(&self, new: &StatefulSet, old: &StatefulSet) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let old_spec = old.spec.clone().unwrap_or_default();
        let mut clone = new.spec.clone().unwrap_or_default();
        clone.replicas = old_spec.replicas;
        clone.template = old_spec.template.clone();
        clone.update_strategy = old_spec.update_strategy.clone();
        clone.min_ready_seconds = old_spec.min_ready_seconds;
        clone.ordinals = old_spec.ordinals.clone();
        clone.revision_history_limit = old_spec.revision_history_limit;
        clone.persistent_volume_claim_retention_policy = old_spec.persistent_volume_claim_retention_policy.clone();
        if !semantic::equal(&clone, &old_spec) {
            errs.push(FieldError::forbidden(
                "spec",
                "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
            ));
        }
        errs
    }
}

impl ObjectHooks for StatefulSetStrategy {
    fn tracks_generation(&self) -> bool {
        true
    }
}

/// DaemonSet: RollingUpdate with maxUnavailable 1 and maxSurge 0, history 10.
pub struct DaemonSetStrategy;

fn validate_daemon_set_spec(spec: &DaemonSetSpec, path: &Path) -> Vec<FieldError> {
    let mut errs = validate_selector(&spec.selector, &spec.template, path);
    errs.extend(validate_replicated_template(&spec.template, "DaemonSet", &path.child("template")));
    errs.extend(formats::validate_non_negative(
        i64::from(spec.min_ready_seconds.unwrap_or_default()),
        &path.child("minReadySeconds"),
    ));
    let us = spec.update_strategy.clone().unwrap_or_default();
    let us_path = path.child("updateStrategy");
    match us.type_.as_deref().unwrap_or_default() {
        "OnDelete" => {}
        "RollingUpdate" => match &us.rolling_update {
            None => errs.push(FieldError::required(us_path.child("rollingUpdate"), "")),
            Some(ru) => {
                let rp = us_path.child("rollingUpdate");
                errs.extend(validate_int_or_percent(ru.max_unavailable.as_ref(), &rp.child("maxUnavailable")));
                errs.extend(validate_int_or_percent(ru.max_surge.as_ref(), &rp.child("maxSurge")));
                let non_zero = |v: Option<&IntOrString>| v.is_some_and(|v| int_or_percent_value(v).0 != 0);
                match (non_zero(ru.max_unavailable.as_ref()), non_zero(ru.max_surge.as_ref())) {
                    (true, true) => errs.push(FieldError::invalid(
                        rp.child("maxSurge"),
                        formats::to_value(&ru.max_surge),
                        "may not be set when maxUnavailable is non-zero",
                    )),
                    (false, false) => {
                        errs.push(FieldError::required(rp.child("maxUnavailable"), "cannot be 0 when maxSurge is 0"))
                    }
                    _ => {}
                }
            }
        },
        _ => errs.push(FieldError::not_supported(&us_path, formats::to_value(&us), &["RollingUpdate", "OnDelete"])),
    }
    errs.extend(validate_revision_history(spec.revision_history_limit, path));
    errs
}

fn template_generation(meta: &ObjectMeta) -> Option<i64> {
    meta.annotations.as_ref()?.get(TEMPLATE_GENERATION_ANNOTATION)?.parse().ok()
}

fn set_template_generation(meta: &mut ObjectMeta, generation: i64) {
    meta.annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(TEMPLATE_GENERATION_ANNOTATION.into(), generation.to_string());
}

impl Strategy for DaemonSetStrategy {
    type Object = DaemonSet;

    fn set_defaults(&self, ds: &mut DaemonSet) {
        let spec = ds.spec.get_or_insert_with(Default::default);
        let us = spec.update_strategy.get_or_insert_with(DaemonSetUpdateStrategy::default);
        if us.type_.as_deref().unwrap_or_default().is_empty() {
            us.type_ = Some("RollingUpdate".into());
        }
        if us.type_.as_deref() == Some("RollingUpdate") {
            let ru = us.rolling_update.get_or_insert_with(RollingUpdateDaemonSet::default);
            ru.max_unavailable.get_or_insert(IntOrString::Int(1));
            ru.max_surge.get_or_insert(IntOrString::Int(0));
        }
        spec.revision_history_limit.get_or_insert(10);
        pod_spec::set_template_defaults(&mut spec.template);
    }

    fn prepare_for_create(&self, ds: &mut DaemonSet) {
        clear_status::<DaemonSetStatus>(&mut ds.status);
        if template_generation(&ds.metadata).is_none_or(|g| g < 1) {
            set_template_generation(&mut ds.metadata, 1);
        }
    }

    fn prepare_for_update(&self, new: &mut DaemonSet, old: &DaemonSet) {
        let old_generation = template_generation(&old.metadata).unwrap_or(1);
        let template = |d: &DaemonSet| d.spec.as_ref().map(|s| s.template.clone());
        let generation =
            if semantic::equal(&template(new), &template(old)) { old_generation } else { old_generation + 1 };
        set_template_generation(&mut new.metadata, generation);
    }

    fn validate(&self, ds: &DaemonSet) -> Vec<FieldError> {
        validate_daemon_set_spec(&ds.spec.clone().unwrap_or_default(), &Path::new("spec"))
    }

    fn validate_update(&self, new: &DaemonSet, old: &DaemonSet) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let sel = |d: &DaemonSet| d.spec.as_ref().map(|s| s.selector.clone()).unwrap_or_default();
        errs.extend(formats::validate_immutable(&sel(new), &sel(old), &Path::new("spec").child("selector")));
        errs
    }
}

impl ObjectHooks for DaemonSetStrategy {
    fn tracks_generation(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, PodSpec};

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn template(app: &str) -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: Some(ObjectMeta { labels: Some(labels(&[("app", app)])), ..Default::default() }),
            spec: Some(PodSpec {
                containers: vec![Container { name: "app".into(), image: Some("nginx".into()), ..Default::default() }],
                ..Default::default()
            }),
        }
    }

    fn selector(app: &str) -> LabelSelector {
        LabelSelector { match_labels: Some(labels(&[("app", app)])), match_expressions: None }
    }

    fn deployment(sel: &str, tmpl: &str) -> Deployment {
        let mut d = Deployment {
            metadata: ObjectMeta { name: Some("web".into()), ..Default::default() },
            spec: Some(DeploymentSpec { selector: selector(sel), template: template(tmpl), ..Default::default() }),
            status: None,
        };
        DeploymentStrategy.set_defaults(&mut d);
        d
    }

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn deployment_defaults_match_upstream() {
        let d = deployment("web", "web");
        let spec = d.spec.as_ref().expect("spec");
        assert_eq!(spec.replicas, Some(1));
        assert_eq!(spec.revision_history_limit, Some(10));
        assert_eq!(spec.progress_deadline_seconds, Some(600));
        let s = spec.strategy.as_ref().expect("strategy");
        assert_eq!(s.type_.as_deref(), Some("RollingUpdate"));
        let ru = s.rolling_update.as_ref().expect("ru");
        assert_eq!(ru.max_surge, Some(IntOrString::String("25%".into())));
        assert_eq!(ru.max_unavailable, Some(IntOrString::String("25%".into())));
        let pod = spec.template.spec.as_ref().expect("pod spec");
        assert_eq!(pod.restart_policy.as_deref(), Some("Always"));
        assert!(pod.enable_service_links.is_none());
        assert!(DeploymentStrategy.validate(&d).is_empty());
        let mut created = d.clone();
        created.status = Some(DeploymentStatus { replicas: Some(3), ..Default::default() });
        DeploymentStrategy.prepare_for_create(&mut created);
        assert_eq!(created.status, Some(DeploymentStatus::default()));
    }

    #[test]
    fn selector_must_match_template_labels() {
        let errs = DeploymentStrategy.validate(&deployment("web", "api"));
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "spec.template.metadata.labels");
        assert_eq!(errs[0].kind, crate::field::FieldErrorType::Invalid);
        assert_eq!(errs[0].value, Some(serde_json::json!({"app": "api"})));
        assert_eq!(errs[0].detail, "`selector` does not match template `labels`");
        let mut none = deployment("web", "web");
        none.spec.as_mut().expect("spec").selector = LabelSelector::default();
        let m = messages(&DeploymentStrategy.validate(&none));
        assert_eq!(m[0], "spec.selector: Required value");
        assert!(m[1].starts_with("spec.template.metadata.labels: Invalid value"));
    }

    #[test]
    fn deployment_spec_rules() {
        let mut d = deployment("web", "web");
        let spec = d.spec.as_mut().expect("spec");
        spec.replicas = Some(-1);
        spec.template.spec.as_mut().expect("pod").restart_policy = Some("Never".into());
        spec.strategy = Some(DeploymentStrategySpec {
            type_: Some("RollingUpdate".into()),
            rolling_update: Some(RollingUpdateDeployment {
                max_surge: Some(IntOrString::Int(0)),
                max_unavailable: Some(IntOrString::String("0%".into())),
            }),
        });
        let m = messages(&DeploymentStrategy.validate(&d));
        assert!(m.contains(&"spec.replicas: Invalid value: -1: must be greater than or equal to 0".to_string()));
        assert!(m.contains(
            &"spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"".to_string()
        ));
        assert!(m.contains(
            &"spec.strategy.rollingUpdate.maxUnavailable: Invalid value: \"0%\": may not be 0 when `maxSurge` is 0"
                .to_string()
        ));
    }

    #[test]
    fn deployment_selector_is_immutable_and_annotations_bump_generation() {
        let old = deployment("web", "web");
        let mut new = old.clone();
        new.spec.as_mut().expect("spec").selector.match_labels.as_mut().expect("ml").insert("tier".into(), "x".into());
        new.spec
            .as_mut()
            .expect("spec")
            .template
            .metadata
            .as_mut()
            .expect("m")
            .labels
            .as_mut()
            .expect("l")
            .insert("tier".into(), "x".into());
        let m = messages(&DeploymentStrategy.validate_update(&new, &old));
        assert_eq!(m.len(), 1);
        assert!(m[0].starts_with("spec.selector: Invalid value:") && m[0].ends_with("field is immutable"));
        let mut annotated = old.clone();
        annotated.metadata.annotations = Some(labels(&[("a", "b")]));
        DeploymentStrategy.prepare_for_update(&mut annotated, &old);
        assert_eq!(annotated.metadata.generation, Some(1));
    }

    #[test]
    fn replica_set_defaults_and_rules() {
        let mut rs = ReplicaSet {
            spec: Some(ReplicaSetSpec {
                selector: selector("web"),
                template: Some(template("web")),
                ..Default::default()
            }),
            ..Default::default()
        };
        ReplicaSetStrategy.set_defaults(&mut rs);
        assert_eq!(rs.spec.as_ref().and_then(|s| s.replicas), Some(1));
        assert!(ReplicaSetStrategy.validate(&rs).is_empty());
        rs.spec
            .as_mut()
            .expect("spec")
            .template
            .as_mut()
            .and_then(|t| t.spec.as_mut())
            .expect("pod")
            .active_deadline_seconds = Some(5);
        assert_eq!(
            messages(&ReplicaSetStrategy.validate(&rs)),
            ["spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in ReplicaSet is not Supported"]
        );
    }

    #[test]
    fn stateful_set_defaults_and_update_rules() {
        let mut s = StatefulSet {
            spec: Some(StatefulSetSpec { selector: selector("db"), template: template("db"), ..Default::default() }),
            ..Default::default()
        };
        StatefulSetStrategy.set_defaults(&mut s);
        let spec = s.spec.as_ref().expect("spec");
        assert_eq!(spec.pod_management_policy.as_deref(), Some("OrderedReady"));
        assert_eq!(spec.replicas, Some(1));
        assert_eq!(spec.revision_history_limit, Some(10));
        let us = spec.update_strategy.as_ref().expect("us");
        assert_eq!(us.type_.as_deref(), Some("RollingUpdate"));
        assert_eq!(us.rolling_update.as_ref().and_then(|r| r.partition), Some(0));
        let p = spec.persistent_volume_claim_retention_policy.as_ref().expect("policy");
        assert_eq!((p.when_deleted.as_deref(), p.when_scaled.as_deref()), (Some("Retain"), Some("Retain")));
        assert!(StatefulSetStrategy.validate(&s).is_empty());
        let mut new = s.clone();
        new.spec.as_mut().expect("spec").service_name = Some("other".into());
        let m = messages(&StatefulSetStrategy.validate_update(&new, &s));
        assert!(m[0].starts_with("spec: Forbidden: updates to statefulset spec for fields other than 'replicas'"));
        let mut scaled = s.clone();
        scaled.spec.as_mut().expect("spec").replicas = Some(3);
        assert!(StatefulSetStrategy.validate_update(&scaled, &s).is_empty());
    }

    #[test]
    fn daemon_set_defaults_template_generation_and_rules() {
        let mut ds = DaemonSet {
            spec: Some(DaemonSetSpec {
                selector: selector("agent"),
                template: template("agent"),
                ..Default::default()
            }),
            ..Default::default()
        };
        DaemonSetStrategy.set_defaults(&mut ds);
        let us = ds.spec.as_ref().and_then(|s| s.update_strategy.clone()).expect("us");
        let ru = us.rolling_update.expect("ru");
        assert_eq!((ru.max_unavailable, ru.max_surge), (Some(IntOrString::Int(1)), Some(IntOrString::Int(0))));
        assert!(DaemonSetStrategy.validate(&ds).is_empty());
        DaemonSetStrategy.prepare_for_create(&mut ds);
        assert_eq!(template_generation(&ds.metadata), Some(1));
        let mut new = ds.clone();
        new.spec.as_mut().expect("spec").template.spec.as_mut().expect("pod").containers[0].image = Some("v2".into());
        DaemonSetStrategy.prepare_for_update(&mut new, &ds);
        assert_eq!(template_generation(&new.metadata), Some(2));
        let mut both = ds.clone();
        if let Some(r) =
            both.spec.as_mut().and_then(|s| s.update_strategy.as_mut()).and_then(|u| u.rolling_update.as_mut())
        {
            r.max_surge = Some(IntOrString::Int(1));
        }
        assert_eq!(
            messages(&DaemonSetStrategy.validate(&both)),
            ["spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: 1: may not be set when maxUnavailable is non-zero"]
        );
    }
}
