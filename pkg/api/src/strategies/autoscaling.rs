//! HorizontalPodAutoscalers in both served versions, as upstream's
//! `pkg/apis/autoscaling/{v1,v2}/defaults.go`, `pkg/apis/autoscaling/validation` and the v1
//! conversion (`pkg/apis/autoscaling/v1/conversion.go`).
//!
//! Objects are stored in `autoscaling/v2`, upstream's storage version. An `autoscaling/v1`
//! object carries only a CPU utilization target; what v2 holds beyond it (other metrics,
//! current metrics, conditions, behavior) travels through v1 in upstream's round-trip
//! annotations, so that reading and writing back through v1 loses nothing.

use super::quantity::Quantity;
use crate::field::{FieldError, Path};
use crate::strategy::{DynStrategy, ObjectHooks, Strategy, Typed};
use k8s_openapi::api::autoscaling::{v1, v2};
use serde_json::{json, Value};

/// The utilization target of an HPA that names no metric (upstream's `DefaultCPUUtilization`).
pub const DEFAULT_CPU_UTILIZATION: i32 = 80;

/// v1 round-trip annotations, with upstream's names.
pub const METRICS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/metrics";
pub const CURRENT_METRICS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
pub const CONDITIONS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/conditions";
pub const BEHAVIOR_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/behavior";
const ROUND_TRIP_ANNOTATIONS: [&str; 4] =
    [METRICS_ANNOTATION, CURRENT_METRICS_ANNOTATION, CONDITIONS_ANNOTATION, BEHAVIOR_ANNOTATION];

pub fn hpa_v1() -> Box<dyn DynStrategy> {
    Box::new(Typed(HpaV1))
}

pub fn hpa_v2() -> Box<dyn DynStrategy> {
    Box::new(Typed(HpaV2))
}

struct HpaV1;
struct HpaV2;

impl Strategy for HpaV1 {
    type Object = v1::HorizontalPodAutoscaler;

    fn set_defaults(&self, obj: &mut Self::Object) {
        let spec = obj.spec.get_or_insert_with(Default::default);
        spec.min_replicas.get_or_insert(1);
    }

    fn prepare_for_create(&self, obj: &mut Self::Object) {
        obj.status = None;
    }

    fn validate(&self, obj: &Self::Object) -> Vec<FieldError> {
        let spec_path = Path::new("spec");
        let Some(spec) = &obj.spec else {
            return vec![FieldError::required("spec", "")];
        };
        let target = &spec.scale_target_ref;
        let mut errs = validate_spec(spec.min_replicas, spec.max_replicas, &target.kind, &target.name, &spec_path);
        if let Some(t) = spec.target_cpu_utilization_percentage {
            if t < 1 {
                errs.push(FieldError::invalid(
                    spec_path.child("targetCPUUtilizationPercentage"),
                    t,
                    "must be greater than 0",
                ));
            }
        }
        errs
    }
}

impl ObjectHooks for HpaV1 {
    fn tracks_generation(&self) -> bool {
        true
    }
}

impl Strategy for HpaV2 {
    type Object = v2::HorizontalPodAutoscaler;

    fn set_defaults(&self, obj: &mut Self::Object) {
        let spec = obj.spec.get_or_insert_with(Default::default);
        spec.min_replicas.get_or_insert(1);
        if spec.metrics.as_ref().is_none_or(Vec::is_empty) {
            spec.metrics = Some(vec![cpu_utilization(DEFAULT_CPU_UTILIZATION)]);
        }
        if let Some(b) = &mut spec.behavior {
            b.scale_up = Some(with_defaults(b.scale_up.take(), default_scale_up()));
            b.scale_down = Some(with_defaults(b.scale_down.take(), default_scale_down()));
        }
    }

    fn prepare_for_create(&self, obj: &mut Self::Object) {
        obj.status = None;
    }

    fn validate(&self, obj: &Self::Object) -> Vec<FieldError> {
        let spec_path = Path::new("spec");
        let Some(spec) = &obj.spec else {
            return vec![FieldError::required("spec", "")];
        };
        let target = &spec.scale_target_ref;
        let mut errs = validate_spec(spec.min_replicas, spec.max_replicas, &target.kind, &target.name, &spec_path);
        for (i, m) in spec.metrics.iter().flatten().enumerate() {
            errs.extend(validate_metric(m, &spec_path.child("metrics").index(i)));
        }
        if let Some(b) = &spec.behavior {
            let p = spec_path.child("behavior");
            for (rules, name) in [(&b.scale_up, "scaleUp"), (&b.scale_down, "scaleDown")] {
                if let Some(r) = rules {
                    errs.extend(validate_rules(r, &p.child(name)));
                }
            }
        }
        errs
    }
}

impl ObjectHooks for HpaV2 {
    fn tracks_generation(&self) -> bool {
        true
    }
}

/// What both versions' specs share: the replica bounds and the target reference.
fn validate_spec(min: Option<i32>, max: i32, kind: &str, name: &str, spec: &Path) -> Vec<FieldError> {
    let mut errs = validate_replicas(min, max, spec);
    errs.extend(validate_target_ref(kind, name, spec));
    errs
}

fn validate_replicas(min: Option<i32>, max: i32, spec: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(min) = min {
        if min < 1 {
            errs.push(FieldError::invalid(spec.child("minReplicas"), min, "must be greater than or equal to 1"));
        }
    }
    if max < 1 {
        errs.push(FieldError::invalid(spec.child("maxReplicas"), max, "must be greater than 0"));
    }
    if let Some(min) = min {
        if min > max {
            errs.push(FieldError::invalid(
                spec.child("maxReplicas"),
                max,
                "must be greater than or equal to `minReplicas`",
            ));
        }
    }
    errs
}

fn validate_target_ref(kind: &str, name: &str, spec: &Path) -> Vec<FieldError> {
    let p = spec.child("scaleTargetRef");
    let mut errs = Vec::new();
    for (value, field) in [(kind, "kind"), (name, "name")] {
        if value.is_empty() {
            errs.push(FieldError::required(p.child(field), ""));
        } else if value.contains('/') || value.contains('%') || value == "." || value == ".." {
            errs.push(FieldError::invalid(
                p.child(field),
                value,
                "may not contain '/' or '%' and may not be '.' or '..'",
            ));
        }
    }
    errs
}

const METRIC_TYPES: [&str; 5] = ["ContainerResource", "External", "Object", "Pods", "Resource"];

fn validate_metric(m: &v2::MetricSpec, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let set: Vec<&str> = [
        (m.container_resource.is_some(), "containerResource"),
        (m.external.is_some(), "external"),
        (m.object.is_some(), "object"),
        (m.pods.is_some(), "pods"),
        (m.resource.is_some(), "resource"),
    ]
    .into_iter()
    .filter_map(|(present, name)| present.then_some(name))
    .collect();
    if m.type_.is_empty() {
        errs.push(FieldError::required(path.child("type"), "must specify a metric source type"));
        return errs;
    }
    if !METRIC_TYPES.contains(&m.type_.as_str()) {
        errs.push(FieldError::not_supported(path.child("type"), m.type_.as_str(), &METRIC_TYPES));
        return errs;
    }
    let want = lower_first(&m.type_);
    if set.len() > 1 || set.first().is_some_and(|s| *s != want) {
        errs.push(FieldError::forbidden(path.child(&want), "must populate the given metric source only"));
    }
    if !set.contains(&want.as_str()) {
        errs.push(FieldError::required(path.child(&want), "must populate information for the given metric source"));
        return errs;
    }
    match m.type_.as_str() {
        "Resource" => {
            if let Some(r) = &m.resource {
                let p = path.child("resource");
                if r.name.is_empty() {
                    errs.push(FieldError::required(p.child("name"), "must specify a resource name"));
                }
                errs.extend(validate_target(&r.target, &p.child("target"), true));
            }
        }
        "ContainerResource" => {
            if let Some(r) = &m.container_resource {
                let p = path.child("containerResource");
                if r.name.is_empty() {
                    errs.push(FieldError::required(p.child("name"), "must specify a resource name"));
                }
                if r.container.is_empty() {
                    errs.push(FieldError::required(p.child("container"), "must specify a container"));
                }
                errs.extend(validate_target(&r.target, &p.child("target"), true));
            }
        }
        "Pods" => {
            if let Some(pm) = &m.pods {
                let p = path.child("pods");
                if pm.metric.name.is_empty() {
                    errs.push(FieldError::required(p.child("metric").child("name"), "must specify a metric name"));
                }
                errs.extend(validate_target(&pm.target, &p.child("target"), false));
            }
        }
        "Object" => {
            if let Some(o) = &m.object {
                let p = path.child("object");
                if o.metric.name.is_empty() {
                    errs.push(FieldError::required(p.child("metric").child("name"), "must specify a metric name"));
                }
                if o.described_object.kind.is_empty() {
                    errs.push(FieldError::required(p.child("describedObject").child("kind"), ""));
                }
                if o.described_object.name.is_empty() {
                    errs.push(FieldError::required(p.child("describedObject").child("name"), ""));
                }
                errs.extend(validate_target(&o.target, &p.child("target"), false));
            }
        }
        _ => {
            if let Some(e) = &m.external {
                let p = path.child("external");
                if e.metric.name.is_empty() {
                    errs.push(FieldError::required(p.child("metric").child("name"), "must specify a metric name"));
                }
                errs.extend(validate_target(&e.target, &p.child("target"), false));
            }
        }
    }
    errs
}

fn lower_first(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_ascii_lowercase().to_string() + c.as_str()).unwrap_or_default()
}

const TARGET_TYPES: [&str; 3] = ["AverageValue", "Utilization", "Value"];

fn validate_target(t: &v2::MetricTarget, path: &Path, resource: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if t.type_.is_empty() {
        errs.push(FieldError::required(path.child("type"), "must specify a metric target type"));
    } else if !TARGET_TYPES.contains(&t.type_.as_str()) {
        errs.push(FieldError::not_supported(path.child("type"), t.type_.as_str(), &TARGET_TYPES));
    }
    let positive = |q: &Option<k8s_openapi::apimachinery::pkg::api::resource::Quantity>| {
        q.as_ref().map(|q| Quantity::parse(&q.0).map(|v| !v.is_negative() && !v.is_zero()).unwrap_or(false))
    };
    if let Some(u) = t.average_utilization {
        if u < 1 {
            errs.push(FieldError::invalid(path.child("averageUtilization"), u, "must be greater than 0"));
        }
    }
    if positive(&t.average_value) == Some(false) {
        errs.push(FieldError::invalid(path.child("averageValue"), json!(t.average_value), "must be positive"));
    }
    if positive(&t.value) == Some(false) {
        errs.push(FieldError::invalid(path.child("value"), json!(t.value), "must be positive"));
    }
    match t.type_.as_str() {
        "Utilization" if t.average_utilization.is_none() => errs.push(FieldError::required(
            path.child("averageUtilization"),
            "must set either a target raw value or a target utilization",
        )),
        "Utilization" if !resource => errs.push(FieldError::invalid(
            path.child("type"),
            "Utilization",
            "only resource metrics may target utilization",
        )),
        "AverageValue" if t.average_value.is_none() => {
            errs.push(FieldError::required(path.child("averageValue"), "must set the target average value"))
        }
        "Value" if resource => errs.push(FieldError::invalid(
            path.child("type"),
            "Value",
            "resource metrics may target only Utilization or AverageValue",
        )),
        "Value" if t.value.is_none() => {
            errs.push(FieldError::required(path.child("value"), "must set the target value"))
        }
        _ => {}
    }
    errs
}

const SELECT_POLICIES: [&str; 3] = ["Disabled", "Max", "Min"];
const POLICY_TYPES: [&str; 2] = ["Percent", "Pods"];

fn validate_rules(r: &v2::HPAScalingRules, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(w) = r.stabilization_window_seconds {
        if !(0..=3600).contains(&w) {
            errs.push(FieldError::invalid(
                path.child("stabilizationWindowSeconds"),
                w,
                "must be less than or equal to 3600 and greater than or equal to 0",
            ));
        }
    }
    if let Some(s) = r.select_policy.as_deref() {
        if !SELECT_POLICIES.contains(&s) {
            errs.push(FieldError::not_supported(path.child("selectPolicy"), s, &SELECT_POLICIES));
        }
    }
    let policies = r.policies.as_deref().unwrap_or_default();
    if policies.is_empty() {
        errs.push(FieldError::required(path.child("policies"), "must specify at least one Policy"));
    }
    for (i, p) in policies.iter().enumerate() {
        let pp = path.child("policies").index(i);
        if !POLICY_TYPES.contains(&p.type_.as_str()) {
            errs.push(FieldError::not_supported(pp.child("type"), p.type_.as_str(), &POLICY_TYPES));
        }
        if p.value <= 0 {
            errs.push(FieldError::invalid(pp.child("value"), p.value, "must be greater than zero"));
        }
        if p.period_seconds <= 0 {
            errs.push(FieldError::invalid(pp.child("periodSeconds"), p.period_seconds, "must be greater than zero"));
        } else if p.period_seconds > 1800 {
            errs.push(FieldError::invalid(
                pp.child("periodSeconds"),
                p.period_seconds,
                "must be less than or equal to 1800",
            ));
        }
    }
    errs
}

/// A v2 metric targeting `percent` average CPU utilization.
pub fn cpu_utilization(percent: i32) -> v2::MetricSpec {
    v2::MetricSpec {
        type_: "Resource".into(),
        resource: Some(v2::ResourceMetricSource {
            name: "cpu".into(),
            target: v2::MetricTarget {
                type_: "Utilization".into(),
                average_utilization: Some(percent),
                ..Default::default()
            },
        }),
        ..Default::default()
    }
}

fn policy(type_: &str, value: i32) -> v2::HPAScalingPolicy {
    v2::HPAScalingPolicy { type_: type_.into(), value, period_seconds: 15 }
}

/// Upstream's scale-up rules: no stabilization, at most 4 pods or double per 15 s.
pub fn default_scale_up() -> v2::HPAScalingRules {
    v2::HPAScalingRules {
        stabilization_window_seconds: Some(0),
        select_policy: Some("Max".into()),
        policies: Some(vec![policy("Pods", 4), policy("Percent", 100)]),
        tolerance: None,
    }
}

/// Upstream's scale-down rules: all pods may go per 15 s; the stabilization window is left to
/// the controller (its `--horizontal-pod-autoscaler-downscale-stabilization`, 5 minutes).
pub fn default_scale_down() -> v2::HPAScalingRules {
    v2::HPAScalingRules {
        stabilization_window_seconds: None,
        select_policy: Some("Max".into()),
        policies: Some(vec![policy("Percent", 100)]),
        tolerance: None,
    }
}

/// `rules` with the fields it leaves unset taken from `defaults`.
fn with_defaults(rules: Option<v2::HPAScalingRules>, mut defaults: v2::HPAScalingRules) -> v2::HPAScalingRules {
    let Some(r) = rules else { return defaults };
    if r.select_policy.is_some() {
        defaults.select_policy = r.select_policy;
    }
    if r.stabilization_window_seconds.is_some() {
        defaults.stabilization_window_seconds = r.stabilization_window_seconds;
    }
    if r.policies.is_some() {
        defaults.policies = r.policies;
    }
    if r.tolerance.is_some() {
        defaults.tolerance = r.tolerance;
    }
    defaults
}

/// A conversion input that is not an object of the version it claims.
#[derive(Debug, thiserror::Error)]
#[error("converting a HorizontalPodAutoscaler: {0}")]
pub struct ConversionError(String);

fn decode<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, ConversionError> {
    serde_json::from_value(v).map_err(|e| ConversionError(e.to_string()))
}

fn encode<T: serde::Serialize>(t: &T) -> Result<Value, ConversionError> {
    serde_json::to_value(t).map_err(|e| ConversionError(e.to_string()))
}

/// The CPU utilization target among `metrics`, if one is set as v1 can say it.
fn cpu_target(m: &v2::MetricSpec) -> Option<i32> {
    let r = m.resource.as_ref().filter(|r| m.type_ == "Resource" && r.name == "cpu")?;
    (r.target.type_ == "Utilization").then_some(r.target.average_utilization).flatten()
}

/// `autoscaling/v2` to `autoscaling/v1`: the CPU utilization target and current value in v1's
/// fields, the rest of v2 in the round-trip annotations.
pub fn v2_to_v1(obj: Value) -> Result<Value, ConversionError> {
    let mut hpa: v2::HorizontalPodAutoscaler = decode(obj)?;
    let spec = hpa.spec.take().unwrap_or_default();
    let status = hpa.status.take();
    let mut annotations = hpa.metadata.annotations.take().unwrap_or_default();
    for a in ROUND_TRIP_ANNOTATIONS {
        annotations.remove(a);
    }
    let metrics = spec.metrics.unwrap_or_default();
    let target = metrics.iter().find_map(cpu_target);
    let others: Vec<&v2::MetricSpec> = metrics.iter().filter(|m| cpu_target(m).is_none()).collect();
    if !others.is_empty() {
        annotations.insert(METRICS_ANNOTATION.into(), encode(&others)?.to_string());
    }
    if let Some(b) = &spec.behavior {
        annotations.insert(BEHAVIOR_ANNOTATION.into(), encode(b)?.to_string());
    }
    let v1_status = match status {
        None => None,
        Some(s) => {
            let current = s.current_metrics.as_deref().unwrap_or_default();
            if !current.is_empty() {
                annotations.insert(CURRENT_METRICS_ANNOTATION.into(), encode(&current)?.to_string());
            }
            if let Some(c) = s.conditions.as_ref().filter(|c| !c.is_empty()) {
                annotations.insert(CONDITIONS_ANNOTATION.into(), encode(c)?.to_string());
            }
            let cpu = current.iter().find_map(|m| {
                let r = m.resource.as_ref().filter(|r| m.type_ == "Resource" && r.name == "cpu")?;
                r.current.average_utilization
            });
            Some(v1::HorizontalPodAutoscalerStatus {
                current_cpu_utilization_percentage: cpu,
                current_replicas: s.current_replicas.unwrap_or(0),
                desired_replicas: s.desired_replicas,
                last_scale_time: s.last_scale_time,
                observed_generation: s.observed_generation,
            })
        }
    };
    hpa.metadata.annotations = (!annotations.is_empty()).then_some(annotations);
    let out = v1::HorizontalPodAutoscaler {
        metadata: hpa.metadata,
        spec: Some(v1::HorizontalPodAutoscalerSpec {
            max_replicas: spec.max_replicas,
            min_replicas: spec.min_replicas,
            scale_target_ref: v1::CrossVersionObjectReference {
                api_version: spec.scale_target_ref.api_version,
                kind: spec.scale_target_ref.kind,
                name: spec.scale_target_ref.name,
            },
            target_cpu_utilization_percentage: target,
        }),
        status: v1_status,
    };
    encode(&out)
}

/// `autoscaling/v1` to `autoscaling/v2`: v1's CPU target (80% when it names none and no other
/// metric came through the annotations) and whatever the round-trip annotations carry.
pub fn v1_to_v2(obj: Value) -> Result<Value, ConversionError> {
    let mut hpa: v1::HorizontalPodAutoscaler = decode(obj)?;
    let spec = hpa.spec.take().unwrap_or_default();
    let mut annotations = hpa.metadata.annotations.take().unwrap_or_default();
    let mut take = |name: &str| annotations.remove(name);
    let (others, current, conditions, behavior) = (
        take(METRICS_ANNOTATION),
        take(CURRENT_METRICS_ANNOTATION),
        take(CONDITIONS_ANNOTATION),
        take(BEHAVIOR_ANNOTATION),
    );
    let parse = |what: &str, text: Option<String>| -> Result<Option<Value>, ConversionError> {
        text.map(|t| serde_json::from_str(&t).map_err(|e| ConversionError(format!("annotation {what}: {e}"))))
            .transpose()
    };
    let mut metrics: Vec<v2::MetricSpec> = Vec::new();
    if let Some(t) = spec.target_cpu_utilization_percentage {
        metrics.push(cpu_utilization(t));
    }
    if let Some(v) = parse(METRICS_ANNOTATION, others)? {
        metrics.extend(decode::<Vec<v2::MetricSpec>>(v)?);
    }
    if metrics.is_empty() {
        metrics.push(cpu_utilization(DEFAULT_CPU_UTILIZATION));
    }
    let behavior =
        parse(BEHAVIOR_ANNOTATION, behavior)?.map(decode::<v2::HorizontalPodAutoscalerBehavior>).transpose()?;
    let status = match hpa.status.take() {
        None => None,
        Some(s) => {
            let current_metrics = match parse(CURRENT_METRICS_ANNOTATION, current)? {
                // The annotation has more than v1's one number: it wins.
                Some(v) => Some(decode::<Vec<v2::MetricStatus>>(v)?),
                None => s.current_cpu_utilization_percentage.map(|u| {
                    vec![v2::MetricStatus {
                        type_: "Resource".into(),
                        resource: Some(v2::ResourceMetricStatus {
                            name: "cpu".into(),
                            current: v2::MetricValueStatus { average_utilization: Some(u), ..Default::default() },
                        }),
                        ..Default::default()
                    }]
                }),
            };
            let conditions = parse(CONDITIONS_ANNOTATION, conditions)?
                .map(decode::<Vec<v2::HorizontalPodAutoscalerCondition>>)
                .transpose()?;
            Some(v2::HorizontalPodAutoscalerStatus {
                conditions,
                current_metrics,
                current_replicas: Some(s.current_replicas),
                desired_replicas: s.desired_replicas,
                last_scale_time: s.last_scale_time,
                observed_generation: s.observed_generation,
            })
        }
    };
    hpa.metadata.annotations = (!annotations.is_empty()).then_some(annotations);
    let out = v2::HorizontalPodAutoscaler {
        metadata: hpa.metadata,
        spec: Some(v2::HorizontalPodAutoscalerSpec {
            behavior,
            max_replicas: spec.max_replicas,
            metrics: Some(metrics),
            min_replicas: spec.min_replicas,
            scale_target_ref: v2::CrossVersionObjectReference {
                api_version: spec.scale_target_ref.api_version,
                kind: spec.scale_target_ref.kind,
                name: spec.scale_target_ref.name,
            },
        }),
        status,
    };
    encode(&out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v1_hpa() -> Value {
        json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
               "metadata": {"name": "web", "namespace": "default", "annotations": {"team": "shop"}},
               "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                        "minReplicas": 1, "maxReplicas": 5, "targetCPUUtilizationPercentage": 50},
               "status": {"currentReplicas": 2, "desiredReplicas": 3, "currentCPUUtilizationPercentage": 75}})
    }

    #[test]
    fn a_v1_cpu_target_is_a_v2_resource_metric_and_back() {
        let v2 = v1_to_v2(v1_hpa()).expect("v2");
        assert_eq!(v2["apiVersion"], "autoscaling/v2");
        assert_eq!(
            v2["spec"]["metrics"],
            json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}])
        );
        assert_eq!(
            v2["status"]["currentMetrics"],
            json!([{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 75}}}])
        );
        assert_eq!(v2["metadata"]["annotations"], json!({"team": "shop"}));
        assert_eq!(v2_to_v1(v2).expect("v1"), {
            let mut want = v1_hpa();
            // The current metrics (which v1 shows only as one number) ride along.
            want["metadata"]["annotations"][CURRENT_METRICS_ANNOTATION] =
                json!(r#"[{"resource":{"current":{"averageUtilization":75},"name":"cpu"},"type":"Resource"}]"#);
            want
        });
    }

    #[test]
    fn v2_only_fields_survive_a_round_trip_through_v1() {
        let v2 = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "minReplicas": 2, "maxReplicas": 9,
                     "metrics": [
                        {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}}},
                        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}],
                     "behavior": {"scaleDown": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                                                "policies": [{"type": "Pods", "value": 1, "periodSeconds": 30}]}}},
            "status": {"currentReplicas": 2, "desiredReplicas": 2,
                       "conditions": [{"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale"}]}});
        let v1 = v2_to_v1(v2.clone()).expect("v1");
        assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 60);
        let ann = &v1["metadata"]["annotations"];
        assert!(ann[METRICS_ANNOTATION].as_str().is_some_and(|m| m.contains("memory") && !m.contains("cpu")), "{v1}");
        assert!(ann[BEHAVIOR_ANNOTATION].is_string() && ann[CONDITIONS_ANNOTATION].is_string(), "{v1}");
        let back = v1_to_v2(v1).expect("v2");
        assert_eq!(back["spec"]["behavior"], v2["spec"]["behavior"]);
        assert_eq!(back["status"]["conditions"], v2["status"]["conditions"]);
        assert!(back["metadata"].get("annotations").is_none(), "round-trip annotations are dropped: {back}");
        // v1 puts its CPU target first.
        let metrics = back["spec"]["metrics"].as_array().expect("metrics");
        assert_eq!(metrics.len(), 2);
        assert_eq!(metrics[0]["resource"]["name"], "cpu");
        assert_eq!(metrics[1]["resource"]["name"], "memory");
    }

    #[test]
    fn a_v1_object_without_a_target_means_80_percent_cpu() {
        let mut v1 = v1_hpa();
        v1["spec"].as_object_mut().expect("spec").remove("targetCPUUtilizationPercentage");
        let v2 = v1_to_v2(v1).expect("v2");
        assert_eq!(v2["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"], 80);
    }

    #[test]
    fn defaults_and_validation_follow_upstream() {
        let s = HpaV2;
        let mut hpa: v2::HorizontalPodAutoscaler = serde_json::from_value(json!({
            "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 3,
                     "behavior": {"scaleDown": {"stabilizationWindowSeconds": 0}}}}))
        .expect("decode");
        s.set_defaults(&mut hpa);
        let spec = hpa.spec.as_ref().expect("spec");
        assert_eq!(spec.min_replicas, Some(1));
        assert_eq!(spec.metrics.as_deref(), Some(&[cpu_utilization(80)][..]));
        let b = spec.behavior.as_ref().expect("behavior");
        assert_eq!(b.scale_up.as_ref(), Some(&default_scale_up()));
        let down = b.scale_down.as_ref().expect("scale down");
        assert_eq!(down.stabilization_window_seconds, Some(0));
        assert_eq!(down.policies, default_scale_down().policies);
        assert!(s.validate(&hpa).is_empty(), "{:?}", s.validate(&hpa));

        let bad: v2::HorizontalPodAutoscaler = serde_json::from_value(json!({
            "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": {"kind": "", "name": "web"}, "minReplicas": 4, "maxReplicas": 3,
                     "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization"}}},
                                 {"type": "Pods", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 5}}}]}}))
        .expect("decode");
        let errs: Vec<String> = s.validate(&bad).iter().map(|e| e.to_string()).collect();
        assert_eq!(
            errs,
            [
                "spec.maxReplicas: Invalid value: 3: must be greater than or equal to `minReplicas`",
                "spec.scaleTargetRef.kind: Required value",
                "spec.metrics[0].resource.target.averageUtilization: Required value: must set either a target raw value or a target utilization",
                "spec.metrics[1].pods: Forbidden: must populate the given metric source only",
                "spec.metrics[1].pods: Required value: must populate information for the given metric source",
            ]
        );
    }
}
