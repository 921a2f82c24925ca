//! `LimitRanger` admission, as upstream's plugin. Mutating: a new pod's containers (and init
//! containers) lacking a limit or request get the `default` / `defaultRequest` of the
//! namespace's `type: Container` LimitRange items, and the pod is annotated
//! `kubernetes.io/limit-ranger: LimitRanger plugin set: cpu, memory request for container c`.
//! Validating: `min`, `max` and `maxLimitRequestRatio` of Container and Pod items on pod
//! create, and of PersistentVolumeClaim items on claim create and update, refused with 403 and
//! upstream's messages (`maximum cpu usage per Container is 1, but limit is 2`).

use crate::admission::{Attributes, MutatingPlugin, Operation, ValidatingPlugin};
use crate::admission_cache::Cache;
use crate::error::ApiError;
use crate::object;
use futures::future::BoxFuture;
use k1s_api::quota::pod::{milli, pod_limits, pod_requests};
use k1s_api::quota::{parse_list, ResourceList};
use k1s_store::{KeyValue, Store};
use serde_json::{Map, Value};
use std::sync::Arc;

/// The annotation naming what the plugin defaulted.
pub const ANNOTATION: &str = "kubernetes.io/limit-ranger";

/// Both halves of the plugin read the namespace's LimitRanges from one watch-fed cache.
#[derive(Clone)]
pub struct LimitRanger {
    ranges: Arc<Cache<Value>>,
}

impl LimitRanger {
    pub fn new(store: Store) -> Result<LimitRanger, ApiError> {
        let prefix = crate::registry::builtin("", "v1", "limitranges")?.storage_prefix();
        let parse = |kv: &KeyValue| object::from_storage(&kv.value, kv.mod_revision);
        Ok(LimitRanger { ranges: Arc::new(Cache::new(store, &prefix, parse)) })
    }

    fn limit_ranges(&self, namespace: &str) -> Result<Vec<Arc<Value>>, ApiError> {
        self.ranges
            .list(namespace)
            .map_err(|e| ApiError::internal(format!("reading the limit ranges of namespace {namespace}: {e}")))
    }
}

fn items<'a>(lr: &'a Value, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    lr.pointer("/spec/limits")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(move |i| i.get("type").and_then(Value::as_str) == Some(kind))
}

/// Fills the missing limits and requests of every container from one LimitRange; the
/// annotation text when anything was set.
pub fn apply_defaults(lr: &Value, pod: &mut Value) -> Option<String> {
    let mut limits = Map::new();
    let mut requests = Map::new();
    for item in items(lr, "Container") {
        for (field, into) in [("defaultRequest", &mut requests), ("default", &mut limits)] {
            for (k, v) in item.get(field).and_then(Value::as_object).into_iter().flatten() {
                into.insert(k.clone(), v.clone());
            }
        }
    }
    if limits.is_empty() && requests.is_empty() {
        return None;
    }
    let mut notes = Vec::new();
    for (field, what) in [("containers", "container"), ("initContainers", "init container")] {
        let Some(list) = pod.pointer_mut(&format!("/spec/{field}")).and_then(Value::as_array_mut) else { continue };
        for c in list {
            let name = c.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
            let Some(cm) = c.as_object_mut() else { continue };
            let res = cm.entry("resources").or_insert_with(|| Value::Object(Map::new()));
            if !res.is_object() {
                *res = Value::Object(Map::new());
            }
            let mut set = |key: &str, defaults: &Map<String, Value>| -> Vec<String> {
                let Some(rm) = res.as_object_mut() else { return Vec::new() };
                let target = rm.entry(key).or_insert_with(|| Value::Object(Map::new()));
                if !target.is_object() {
                    *target = Value::Object(Map::new());
                }
                let Some(tm) = target.as_object_mut() else { return Vec::new() };
                let mut added = Vec::new();
                for (k, v) in defaults {
                    if !tm.contains_key(k) {
                        tm.insert(k.clone(), v.clone());
                        added.push(k.clone());
                    }
                }
                added.sort();
                added
            };
            let set_limits = set("limits", &limits);
            let set_requests = set("requests", &requests);
            if !set_requests.is_empty() {
                notes.push(format!("{} request for {what} {name}", set_requests.join(", ")));
            }
            if !set_limits.is_empty() {
                notes.push(format!("{} limit for {what} {name}", set_limits.join(", ")));
            }
        }
    }
    (!notes.is_empty()).then(|| format!("LimitRanger plugin set: {}", notes.join("; ")))
}

fn min_constraint(kind: &str, res: &str, enforced: &str, req: &ResourceList, lim: &ResourceList) -> Option<String> {
    let e = k1s_api::strategies::quantity::Quantity::parse(enforced).ok()?;
    let Some(r) = req.get(res) else {
        return Some(format!("minimum {res} usage per {kind} is {e}.  No request is specified"));
    };
    if milli(r) < milli(&e) {
        return Some(format!("minimum {res} usage per {kind} is {e}, but request is {r}"));
    }
    match lim.get(res) {
        Some(l) if milli(l) < milli(&e) => Some(format!("minimum {res} usage per {kind} is {e}, but limit is {l}")),
        _ => None,
    }
}

fn max_constraint(kind: &str, res: &str, enforced: &str, req: &ResourceList, lim: &ResourceList) -> Option<String> {
    let e = k1s_api::strategies::quantity::Quantity::parse(enforced).ok()?;
    let Some(l) = lim.get(res) else {
        return Some(format!("maximum {res} usage per {kind} is {e}.  No limit is specified"));
    };
    if milli(l) > milli(&e) {
        return Some(format!("maximum {res} usage per {kind} is {e}, but limit is {l}"));
    }
    match req.get(res) {
        Some(r) if milli(r) > milli(&e) => Some(format!("maximum {res} usage per {kind} is {e}, but request is {r}")),
        _ => None,
    }
}

fn max_request_constraint(kind: &str, res: &str, enforced: &str, req: &ResourceList) -> Option<String> {
    let e = k1s_api::strategies::quantity::Quantity::parse(enforced).ok()?;
    let Some(r) = req.get(res) else {
        return Some(format!("maximum {res} usage per {kind} is {e}.  No request is specified"));
    };
    (milli(r) > milli(&e)).then(|| format!("maximum {res} usage per {kind} is {e}, but request is {r}"))
}

fn ratio_constraint(kind: &str, res: &str, enforced: &str, req: &ResourceList, lim: &ResourceList) -> Option<String> {
    let e = k1s_api::strategies::quantity::Quantity::parse(enforced).ok()?;
    let r = req.get(res).map(milli).unwrap_or(0);
    if r == 0 {
        return Some(format!(
            "{res} max limit to request ratio per {kind} is {e}, but no request is specified or request is 0"
        ));
    }
    let l = lim.get(res).map(milli).unwrap_or(0);
    if l == 0 {
        return Some(format!(
            "{res} max limit to request ratio per {kind} is {e}, but no limit is specified or limit is 0"
        ));
    }
    #[allow(clippy::cast_precision_loss)]
    let (observed, max) = (l as f64 / r as f64, milli(&e) as f64 / 1000.0);
    (observed > max)
        .then(|| format!("{res} max limit to request ratio per {kind} is {e}, but provided ratio is {observed:.6}"))
}

/// Checks one item's `min`, `max` and `maxLimitRequestRatio` against requests and limits.
fn check_item(item: &Value, kind: &str, req: &ResourceList, lim: &ResourceList, errs: &mut Vec<String>) {
    let each = |field: &str| -> Vec<(String, String)> {
        item.get(field)
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
            .collect()
    };
    for (k, v) in each("min") {
        errs.extend(min_constraint(kind, &k, &v, req, lim));
    }
    for (k, v) in each("max") {
        errs.extend(max_constraint(kind, &k, &v, req, lim));
    }
    for (k, v) in each("maxLimitRequestRatio") {
        errs.extend(ratio_constraint(kind, &k, &v, req, lim));
    }
}

/// Every violation of one LimitRange by a pod.
pub fn validate_pod(lr: &Value, pod: &Value) -> Vec<String> {
    let mut errs = Vec::new();
    let list = |v: &Value, which: &str| parse_list(v.pointer(&format!("/resources/{which}")));
    for item in items(lr, "Container") {
        for field in ["containers", "initContainers"] {
            for c in pod.pointer(&format!("/spec/{field}")).and_then(Value::as_array).into_iter().flatten() {
                check_item(item, "Container", &list(c, "requests"), &list(c, "limits"), &mut errs);
            }
        }
    }
    for item in items(lr, "Pod") {
        check_item(item, "Pod", &pod_requests(pod), &pod_limits(pod), &mut errs);
    }
    errs
}

/// Every violation of one LimitRange by a claim: `min` and `max` of its storage request.
pub fn validate_claim(lr: &Value, pvc: &Value) -> Vec<String> {
    let mut errs = Vec::new();
    let req = parse_list(pvc.pointer("/spec/resources/requests"));
    for item in items(lr, "PersistentVolumeClaim") {
        for (k, v) in item.get("min").and_then(Value::as_object).into_iter().flatten() {
            errs.extend(
                v.as_str().and_then(|v| min_constraint("PersistentVolumeClaim", k, v, &req, &ResourceList::new())),
            );
        }
        for (k, v) in item.get("max").and_then(Value::as_object).into_iter().flatten() {
            errs.extend(v.as_str().and_then(|v| max_request_constraint("PersistentVolumeClaim", k, v, &req)));
        }
    }
    errs
}

/// Upstream's error aggregate: one error as is, several as `[a, b]`.
fn aggregate(errs: &[String]) -> String {
    match errs {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

fn is_core(attrs: &Attributes<'_>, resource: &str) -> bool {
    attrs.subresource.is_none() && attrs.resource.group.is_empty() && attrs.resource.resource == resource
}

impl MutatingPlugin for LimitRanger {
    fn name(&self) -> &'static str {
        "LimitRanger"
    }

    fn admit<'a>(&'a self, attrs: &'a mut Attributes<'_>) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            if attrs.operation != Operation::Create || !is_core(attrs, "pods") {
                return Ok(());
            }
            let Some(ns) = attrs.namespace else { return Ok(()) };
            let ranges = self.limit_ranges(ns)?;
            let Some(pod) = attrs.object.as_deref_mut() else { return Ok(()) };
            for lr in &ranges {
                if let Some(note) = apply_defaults(lr, pod) {
                    let md = object::meta_mut(pod);
                    let ann = md.entry("annotations").or_insert_with(|| Value::Object(Map::new()));
                    if !ann.is_object() {
                        *ann = Value::Object(Map::new());
                    }
                    if let Some(a) = ann.as_object_mut() {
                        a.insert(ANNOTATION.into(), Value::String(note));
                    }
                }
            }
            Ok(())
        })
    }
}

impl ValidatingPlugin for LimitRanger {
    fn name(&self) -> &'static str {
        "LimitRanger"
    }

    fn validate<'a>(&'a self, attrs: &'a Attributes<'_>) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            let pod = attrs.operation == Operation::Create && is_core(attrs, "pods");
            let claim = matches!(attrs.operation, Operation::Create | Operation::Update)
                && is_core(attrs, "persistentvolumeclaims");
            let (Some(ns), Some(obj), true) = (attrs.namespace, attrs.object.as_deref(), pod || claim) else {
                return Ok(());
            };
            for lr in self.limit_ranges(ns)? {
                let errs = if pod { validate_pod(&lr, obj) } else { validate_claim(&lr, obj) };
                if !errs.is_empty() {
                    let r = attrs.resource;
                    return Err(ApiError::forbidden_message(r.group, r.resource, attrs.name, aggregate(&errs)));
                }
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn range() -> Value {
        json!({"spec": {"limits": [{"type": "Container",
            "default": {"cpu": "500m", "memory": "128Mi"}, "defaultRequest": {"cpu": "100m", "memory": "64Mi"},
            "max": {"cpu": "1"}, "min": {"cpu": "50m"}, "maxLimitRequestRatio": {"cpu": "5"}}]}})
    }

    #[test]
    fn defaults_fill_missing_values_and_annotate_like_upstream() {
        let mut pod = json!({"spec": {"containers": [
            {"name": "c"}, {"name": "d", "resources": {"limits": {"cpu": "200m"}, "requests": {"cpu": "200m"}}}]}});
        let note = apply_defaults(&range(), &mut pod).expect("set something");
        assert_eq!(
            note,
            "LimitRanger plugin set: cpu, memory request for container c; cpu, memory limit for container c; \
             memory request for container d; memory limit for container d"
        );
        assert_eq!(pod["spec"]["containers"][0]["resources"]["limits"]["cpu"], "500m");
        assert_eq!(pod["spec"]["containers"][1]["resources"]["limits"]["cpu"], "200m");
        assert!(validate_pod(&range(), &pod).is_empty());
    }

    #[test]
    fn violations_give_upstreams_messages() {
        let pod = json!({"spec": {"containers": [
            {"name": "c", "resources": {"limits": {"cpu": "2"}, "requests": {"cpu": "100m"}}}]}});
        assert_eq!(
            validate_pod(&range(), &pod),
            vec![
                "maximum cpu usage per Container is 1, but limit is 2".to_string(),
                "cpu max limit to request ratio per Container is 5, but provided ratio is 20.000000".to_string(),
            ]
        );
        let lr = json!({"spec": {"limits": [{"type": "PersistentVolumeClaim", "max": {"storage": "1Gi"}}]}});
        let pvc = json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}});
        assert_eq!(
            validate_claim(&lr, &pvc),
            vec!["maximum storage usage per PersistentVolumeClaim is 1Gi, but request is 2Gi".to_string()]
        );
        assert_eq!(aggregate(&["a".into(), "b".into()]), "[a, b]");
    }
}
