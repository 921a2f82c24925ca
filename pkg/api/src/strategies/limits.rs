//! LimitRanges and ResourceQuotas: `SetDefaults_LimitRangeItem` (defaults filled from max,
//! limits and min), canonical quantities, and `ValidateLimitRange` / `ValidateResourceQuota`.

use super::formats;
use super::quantity::{self, Quantity};
use crate::field::{FieldError, Path};
use crate::strategy::{ObjectHooks, Strategy};
use k8s_openapi::api::core::v1::{LimitRange, ResourceQuota, ResourceQuotaStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use std::collections::{BTreeMap, BTreeSet};

type ResourceList = BTreeMap<String, ApiQuantity>;

fn fill_missing(target: &mut ResourceList, from: Option<&ResourceList>) {
    for (k, v) in from.into_iter().flatten() {
        target.entry(k.clone()).or_insert_with(|| v.clone());
    }
}

/// LimitRange: container defaults come from max, default requests from defaults and min.
pub struct LimitRangeStrategy;

fn parsed(list: Option<&ResourceList>, path: &Path, errs: &mut Vec<FieldError>) -> BTreeMap<String, Quantity> {
    let mut out = BTreeMap::new();
    for (k, q) in list.into_iter().flatten() {
        match Quantity::parse(&q.0) {
            Ok(v) => {
                out.insert(k.clone(), v);
            }
            Err(e) => errs.push(FieldError::invalid(path.key(k), q.0.as_str(), e.to_string())),
        }
    }
    out
}

impl Strategy for LimitRangeStrategy {
    type Object = LimitRange;

    fn set_defaults(&self, lr: &mut LimitRange) {
        for item in lr.spec.iter_mut().flat_map(|s| s.limits.iter_mut()) {
            if item.type_ == "Container" {
                let mut default = item.default.take().unwrap_or_default();
                fill_missing(&mut default, item.max.as_ref());
                let mut request = item.default_request.take().unwrap_or_default();
                fill_missing(&mut request, Some(&default));
                fill_missing(&mut request, item.min.as_ref());
                item.default = Some(default);
                item.default_request = Some(request);
            }
            for list in [
                item.default.as_mut(),
                item.default_request.as_mut(),
                item.max.as_mut(),
                item.min.as_mut(),
                item.max_limit_request_ratio.as_mut(),
            ]
            .into_iter()
            .flatten()
            {
                quantity::canonicalize_resource_list(list);
            }
        }
    }

    fn validate(&self, lr: &LimitRange) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let mut types = BTreeSet::new();
        let limits = lr.spec.as_ref().map(|s| s.limits.as_slice()).unwrap_or_default();
        for (i, item) in limits.iter().enumerate() {
            let p = Path::new("spec").child("limits").index(i);
            let ty = item.type_.as_str();
            errs.extend(formats::validate_qualified_name(ty, &p.child("type")));
            if !ty.contains('/') && !["Pod", "Container", "PersistentVolumeClaim"].contains(&ty) {
                errs.push(FieldError::invalid(p.child("type"), ty, "must be a standard limit type or fully qualified"));
            }
            if !types.insert(ty) {
                errs.push(FieldError::duplicate(p.child("type"), ty));
            }
            let max = parsed(item.max.as_ref(), &p.child("max"), &mut errs);
            let min = parsed(item.min.as_ref(), &p.child("min"), &mut errs);
            let default = parsed(item.default.as_ref(), &p.child("default"), &mut errs);
            let request = parsed(item.default_request.as_ref(), &p.child("defaultRequest"), &mut errs);
            if ty == "Pod" {
                if !default.is_empty() {
                    errs.push(FieldError::forbidden(p.child("default"), "may not be specified when `type` is 'Pod'"));
                }
                if !request.is_empty() {
                    errs.push(FieldError::forbidden(
                        p.child("defaultRequest"),
                        "may not be specified when `type` is 'Pod'",
                    ));
                }
            }
            let keys: BTreeSet<&String> =
                max.keys().chain(min.keys()).chain(default.keys()).chain(request.keys()).collect();
            for k in keys {
                let (mn, mx, d, r) = (min.get(k), max.get(k), default.get(k), request.get(k));
                let mut check = |cond: bool, field: &str, value: &Quantity, msg: String| {
                    if cond {
                        errs.push(FieldError::invalid(p.child(field).key(k), value.canonical(), msg));
                    }
                };
                if let (Some(mn), Some(mx)) = (mn, mx) {
                    check(mn > mx, "min", mn, format!("min value {mn} is greater than max value {mx}"));
                }
                if let (Some(r), Some(mn)) = (r, mn) {
                    check(
                        mn > r,
                        "defaultRequest",
                        r,
                        format!("min value {mn} is greater than default request value {r}"),
                    );
                }
                if let (Some(r), Some(mx)) = (r, mx) {
                    check(
                        r > mx,
                        "defaultRequest",
                        r,
                        format!("default request value {r} is greater than max value {mx}"),
                    );
                }
                if let (Some(r), Some(d)) = (r, d) {
                    check(
                        r > d,
                        "defaultRequest",
                        r,
                        format!("default request value {r} is greater than default limit value {d}"),
                    );
                }
                if let (Some(d), Some(mn)) = (d, mn) {
                    check(mn > d, "default", mn, format!("min value {mn} is greater than default value {d}"));
                }
                if let (Some(d), Some(mx)) = (d, mx) {
                    check(d > mx, "default", mx, format!("default value {d} is greater than max value {mx}"));
                }
            }
        }
        errs
    }
}

impl ObjectHooks for LimitRangeStrategy {
    fn allow_create_on_update(&self) -> bool {
        true
    }
}

/// Resources whose quota values must be whole numbers.
fn is_integer_resource(name: &str) -> bool {
    const COUNTS: &[&str] = &[
        "pods",
        "services",
        "replicationcontrollers",
        "resourcequotas",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "services.nodeports",
        "services.loadbalancers",
    ];
    COUNTS.contains(&name) || name.starts_with("count/") || (name.contains('/') && !name.contains("kubernetes.io/"))
}

/// ResourceQuota: canonical quantities, status cleared on create, non-negative limits.
pub struct ResourceQuotaStrategy;

impl Strategy for ResourceQuotaStrategy {
    type Object = ResourceQuota;

    fn set_defaults(&self, rq: &mut ResourceQuota) {
        let spec_lists = rq.spec.iter_mut().filter_map(|s| s.hard.as_mut());
        let status_lists = rq.status.iter_mut().flat_map(|s| [s.hard.as_mut(), s.used.as_mut()]).flatten();
        for list in spec_lists.chain(status_lists) {
            quantity::canonicalize_resource_list(list);
        }
    }

    fn prepare_for_create(&self, rq: &mut ResourceQuota) {
        rq.status = Some(ResourceQuotaStatus::default());
    }

    fn validate(&self, rq: &ResourceQuota) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let hard_path = Path::new("spec").child("hard");
        for (k, q) in rq.spec.iter().flat_map(|s| s.hard.iter().flatten()) {
            let p = hard_path.key(k);
            errs.extend(formats::validate_qualified_name(k, &p));
            match Quantity::parse(&q.0) {
                Err(e) => errs.push(FieldError::invalid(&p, q.0.as_str(), e.to_string())),
                Ok(v) => {
                    if v.is_negative() {
                        errs.push(FieldError::invalid(&p, v.canonical(), formats::IS_NEGATIVE_ERROR));
                    }
                    if is_integer_resource(k) && !v.is_integer() {
                        errs.push(FieldError::invalid(&p, v.canonical(), "must be an integer"));
                    }
                }
            }
        }
        errs
    }
}

impl ObjectHooks for ResourceQuotaStrategy {
    fn allow_create_on_update(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{LimitRangeItem, LimitRangeSpec, ResourceQuotaSpec};

    fn list(pairs: &[(&str, &str)]) -> Option<ResourceList> {
        Some(pairs.iter().map(|(k, v)| (k.to_string(), ApiQuantity(v.to_string()))).collect())
    }

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn container_limit_defaults_follow_max_and_min() {
        let mut lr = LimitRange {
            spec: Some(LimitRangeSpec {
                limits: vec![LimitRangeItem {
                    type_: "Container".into(),
                    max: list(&[("cpu", "1000m")]),
                    min: list(&[("memory", "64Mi")]),
                    ..Default::default()
                }],
            }),
            ..Default::default()
        };
        LimitRangeStrategy.set_defaults(&mut lr);
        let item = &lr.spec.as_ref().expect("spec").limits[0];
        assert_eq!(item.default, list(&[("cpu", "1")]));
        assert_eq!(item.default_request, list(&[("cpu", "1"), ("memory", "64Mi")]));
        assert!(LimitRangeStrategy.validate(&lr).is_empty());
    }

    #[test]
    fn limit_range_ordering_and_pod_defaults_are_checked() {
        let lr = LimitRange {
            spec: Some(LimitRangeSpec {
                limits: vec![LimitRangeItem {
                    type_: "Pod".into(),
                    max: list(&[("cpu", "1")]),
                    min: list(&[("cpu", "2")]),
                    default: list(&[("cpu", "1")]),
                    ..Default::default()
                }],
            }),
            ..Default::default()
        };
        let m = messages(&LimitRangeStrategy.validate(&lr));
        assert!(m.contains(&"spec.limits[0].default: Forbidden: may not be specified when `type` is 'Pod'".to_string()));
        assert!(m.contains(
            &"spec.limits[0].min[cpu]: Invalid value: \"2\": min value 2 is greater than max value 1".to_string()
        ));
    }

    #[test]
    fn quota_values_are_non_negative_and_counts_whole() {
        let mut rq = ResourceQuota {
            spec: Some(ResourceQuotaSpec {
                hard: list(&[("pods", "1500m"), ("requests.cpu", "-1"), ("limits.memory", "2048Mi")]),
                ..Default::default()
            }),
            ..Default::default()
        };
        ResourceQuotaStrategy.set_defaults(&mut rq);
        assert_eq!(rq.spec.as_ref().and_then(|s| s.hard.as_ref()).map(|h| h["limits.memory"].0.as_str()), Some("2Gi"));
        let m = messages(&ResourceQuotaStrategy.validate(&rq));
        assert_eq!(
            m,
            [
                "spec.hard[pods]: Invalid value: \"1500m\": must be an integer",
                "spec.hard[requests.cpu]: Invalid value: \"-1\": must be greater than or equal to 0"
            ]
        );
    }
}
