//! Subresources with their own shapes: `scale` (autoscaling/v1 Scale), `binding` (the
//! scheduler's writes of `spec.nodeName`) and `eviction` (policy/v1 Eviction).

use crate::endpoints::body::{decode_body, read_request_body};
use crate::endpoints::command::Verb;
use crate::endpoints::reply::respond_json;
use crate::endpoints::Body;
use crate::error::ApiError;
use crate::object;
use crate::registry::{Ctx, DeleteOptions, PatchType, Registry};
use http::{Request, Response, StatusCode};
use k1s_api::selectors::Selector;
use k1s_api::{FieldError, ResourceInfo};
use serde_json::{json, Value};

/// A dotted path (`.spec.replicas`) as a JSON pointer (`/spec/replicas`).
fn pointer(path: &str) -> String {
    path.trim_start_matches('.').split('.').fold(String::new(), |p, seg| format!("{p}/{seg}"))
}

/// Where a resource keeps what its Scale shows: a custom resource's `subresources.scale` paths,
/// `.spec.replicas` and `.status.replicas` for the built-ins.
fn scale_paths(res: &ResourceInfo) -> (String, String, Option<String>) {
    match res.custom.as_ref().and_then(|c| c.scale.as_ref()) {
        Some(s) => (pointer(&s.spec_replicas), pointer(&s.status_replicas), s.label_selector.as_deref().map(pointer)),
        None => ("/spec/replicas".into(), "/status/replicas".into(), None),
    }
}

fn to_scale(res: &ResourceInfo, obj: &Value) -> Value {
    if res.custom.is_some() {
        // A custom resource's selector is a string where labelSelectorPath says, its replicas
        // where the other paths say (0 when absent).
        let (spec, status, selector) = scale_paths(res);
        let selector =
            selector.and_then(|p| obj.pointer(&p).and_then(Value::as_str).map(str::to_string)).unwrap_or_default();
        let md = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
        return json!({
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {"name": md.get("name"), "namespace": md.get("namespace"), "uid": md.get("uid"),
                         "resourceVersion": md.get("resourceVersion"), "creationTimestamp": md.get("creationTimestamp")},
            "spec": {"replicas": obj.pointer(&spec).and_then(Value::as_i64).unwrap_or(0)},
            "status": {"replicas": obj.pointer(&status).and_then(Value::as_i64).unwrap_or(0), "selector": selector},
        });
    }
    let selector = obj
        .pointer("/spec/selector")
        .map(|s| {
            // ReplicationControllers have a plain map selector.
            if s.get("matchLabels").is_some() || s.get("matchExpressions").is_some() {
                Selector::from_label_selector(s).map(|s| s.to_string()).unwrap_or_default()
            } else {
                Selector::from_label_selector(&json!({"matchLabels": s})).map(|s| s.to_string()).unwrap_or_default()
            }
        })
        .unwrap_or_default();
    let md = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": md.get("name"),
            "namespace": md.get("namespace"),
            "uid": md.get("uid"),
            "resourceVersion": md.get("resourceVersion"),
            "creationTimestamp": md.get("creationTimestamp"),
        },
        "spec": {"replicas": obj.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1)},
        "status": {
            "replicas": obj.pointer("/status/replicas").and_then(Value::as_i64).unwrap_or(0),
            "selector": selector,
        },
    })
}

/// Sets the value at JSON pointer `at`, making the objects on the way.
fn set_at(obj: &mut Value, at: &str, value: Value) {
    let mut cur = obj;
    let segs: Vec<&str> = at.trim_start_matches('/').split('/').collect();
    for (i, seg) in segs.iter().enumerate() {
        if !cur.is_object() {
            *cur = json!({});
        }
        let Some(m) = cur.as_object_mut() else { return };
        if i + 1 == segs.len() {
            m.insert(seg.to_string(), value);
            return;
        }
        cur = m.entry(seg.to_string()).or_insert_with(|| json!({}));
    }
}

/// GET/PUT/PATCH `…/<resource>/<name>/scale`.
pub async fn scale(
    reg: &Registry,
    req: Request<hyper::body::Incoming>,
    ctx: &mut Ctx<'_>,
    verb: Verb,
    name: &str,
) -> Result<Response<Body>, ApiError> {
    let res = ctx.info;
    let ns = ctx.namespace;
    match verb {
        Verb::Get => {
            let obj = reg.get(res, ns, name)?;
            Ok(respond_json(StatusCode::OK, &to_scale(res, &obj)))
        }
        Verb::Update | Verb::Patch => {
            let (headers, body) = read_request_body(req).await?;
            let ct = headers
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("application/json")
                .to_string();
            let input: Value = if verb == Verb::Update {
                decode_body(&headers, &body)?
            } else {
                serde_json::from_slice(&body)
                    .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?
            };
            ctx.subresource = None;
            for _ in 0..16 {
                let obj = reg.get(res, ns, name)?;
                let current = to_scale(res, &obj);
                let wanted = if verb == Verb::Update {
                    input.clone()
                } else {
                    match PatchType::from_content_type(&ct) {
                        Some(PatchType::Json) => {
                            let p: json_patch::Patch = serde_json::from_value(input.clone())
                                .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
                            let mut doc = current.clone();
                            json_patch::patch(&mut doc, &p)
                                .map_err(|e| ApiError::new(422, "Invalid", e.to_string()))?;
                            doc
                        }
                        Some(PatchType::Merge) | Some(PatchType::Strategic) => {
                            let mut doc = current.clone();
                            json_patch::merge(&mut doc, &input);
                            doc
                        }
                        _ => return Err(ApiError::unsupported_media_type(&ct)),
                    }
                };
                let replicas = wanted.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(0);
                if replicas < 0 {
                    return Err(ApiError::invalid(
                        "autoscaling",
                        "Scale",
                        name,
                        &[FieldError::invalid("spec.replicas", replicas, "must be greater than or equal to 0")],
                    ));
                }
                let precondition = object::resource_version(&wanted).map(str::to_string);
                let mut new = obj.clone();
                set_at(&mut new, &scale_paths(res).0, json!(replicas));
                if let Some(rv) = &precondition {
                    object::meta_mut(&mut new).insert("resourceVersion".into(), json!(rv));
                }
                match reg.update(ctx, name, new).await {
                    Ok((updated, _)) => return Ok(respond_json(StatusCode::OK, &to_scale(res, &updated))),
                    Err(e) if e.code == 409 && precondition.is_none() => continue,
                    Err(e) => return Err(e),
                }
            }
            Err(ApiError::stale(res.group, res.resource, name))
        }
        other => Err(ApiError::method_not_allowed(other.as_str(), "scale")),
    }
}

/// POST `pods/<name>/binding` (or `bindings`): sets `spec.nodeName` once.
/// (The verb was checked when the request was parsed.)
pub async fn binding(
    reg: &Registry,
    req: Request<hyper::body::Incoming>,
    ctx: &mut Ctx<'_>,
    name: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    let (headers, body) = read_request_body(req).await?;
    let b = decode_body(&headers, &body)?;
    let pod_name = name.map_or_else(|| object::name(&b).to_string(), str::to_string);
    let ns = ctx.namespace;
    bind(reg, ctx, ns, &pod_name, &b).await?;
    Ok(respond_json(
        StatusCode::CREATED,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    ))
}

pub(crate) async fn bind(
    registry: &Registry,
    ctx: &mut Ctx<'_>,
    ns: Option<&str>,
    pod_name: &str,
    b: &Value,
) -> Result<(), ApiError> {
    let pods = crate::registry::builtin("", "v1", "pods")?;
    let node = b.pointer("/target/name").and_then(Value::as_str).unwrap_or("");
    if node.is_empty() {
        return Err(ApiError::invalid("", "Binding", pod_name, &[FieldError::required("target.name", "")]));
    }
    ctx.info = pods;
    // As upstream, the binding writes spec.nodeName and the PodScheduled condition in one
    // update, outside field management (no manager owns them).
    ctx.subresource = Some("binding");
    ctx.field_manager = String::new();
    for _ in 0..16 {
        let pod = registry.get(pods, ns, pod_name)?;
        if let Some(uid) = b.pointer("/metadata/uid").and_then(Value::as_str) {
            if object::meta_str(&pod, "uid") != Some(uid) {
                return Err(ApiError::conflict("", "pods", pod_name, "the UID in the binding does not match the pod"));
            }
        }
        if object::is_deleting(&pod) {
            return Err(ApiError::conflict("", "pods", pod_name, "pod is being deleted, cannot be assigned to a host"));
        }
        if let Some(cur) = pod.pointer("/spec/nodeName").and_then(Value::as_str).filter(|n| !n.is_empty()) {
            return Err(ApiError::conflict(
                "",
                "pods/binding",
                pod_name,
                &format!("pod {pod_name} is already assigned to node \"{cur}\""),
            ));
        }
        let mut new = pod.clone();
        new["spec"]["nodeName"] = json!(node);
        if let Some(ann) = b.pointer("/metadata/annotations").and_then(Value::as_object) {
            let md = object::meta_mut(&mut new);
            let a = md.entry("annotations").or_insert_with(|| json!({}));
            for (k, v) in ann {
                a[k] = v.clone();
            }
        }
        set_scheduled(&mut new);
        match registry.update(ctx, pod_name, new).await {
            Ok(_) => return Ok(()),
            Err(e) if e.code == 409 && e.reason == "Conflict" => continue,
            Err(e) => return Err(e),
        }
    }
    Err(ApiError::stale("", "pods", pod_name))
}

/// Sets `PodScheduled=True` the way upstream's `UpdatePodCondition` does: the transition time
/// moves only when the status changes; reason and message are cleared.
fn set_scheduled(pod: &mut Value) {
    let generation = object::meta(pod).and_then(|m| m.get("generation")).cloned();
    let Some(status) = pod.as_object_mut().map(|m| m.entry("status").or_insert_with(|| json!({}))) else { return };
    let Some(status) = status.as_object_mut() else { return };
    let conds = status.entry("conditions").or_insert_with(|| json!([]));
    if !conds.is_array() {
        *conds = json!([]);
    }
    let Some(conds) = conds.as_array_mut() else { return };
    let mut cond = json!({
        "type": "PodScheduled",
        "status": "True",
        "lastProbeTime": null,
        "lastTransitionTime": object::now_rfc3339(),
    });
    if let Some(g) = generation {
        cond["observedGeneration"] = g;
    }
    match conds.iter_mut().find(|c| c.get("type").and_then(Value::as_str) == Some("PodScheduled")) {
        Some(old) => {
            if old.get("status").and_then(Value::as_str) == Some("True") {
                if let Some(t) = old.get("lastTransitionTime") {
                    cond["lastTransitionTime"] = t.clone();
                }
            }
            *old = cond;
        }
        None => conds.push(cond),
    }
}

/// POST `pods/<name>/eviction`: deletes the pod (PodDisruptionBudgets are checked by the
/// disruption controller's status once it runs).
/// (The verb was checked when the request was parsed.)
pub async fn eviction(
    reg: &Registry,
    req: Request<hyper::body::Incoming>,
    ctx: &mut Ctx<'_>,
    name: &str,
) -> Result<Response<Body>, ApiError> {
    let (headers, body) = read_request_body(req).await?;
    let ev = decode_body(&headers, &body)?;
    let mut opts = ev.get("deleteOptions").map(DeleteOptions::from_value).unwrap_or_default();
    propagate_dry_run(&mut opts, ctx.dry_run)?;
    ctx.subresource = None;
    crate::disruption::check_eviction(reg, ctx.namespace, name, opts.is_dry_run()).await?;
    reg.delete(ctx, name, &opts).await?;
    Ok(respond_json(
        StatusCode::CREATED,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    ))
}

/// Joins the eviction's `deleteOptions.dryRun` and the request's `?dryRun` (upstream's
/// `propagateDryRun`): either alone decides; both must then agree.
fn propagate_dry_run(opts: &mut DeleteOptions, query_dry_run: bool) -> Result<(), ApiError> {
    let query: Vec<String> = if query_dry_run { vec!["All".into()] } else { Vec::new() };
    if opts.dry_run.is_empty() {
        opts.dry_run = query;
    } else if !query.is_empty() && query != opts.dry_run {
        return Err(ApiError::bad_request(format!(
            "Non-matching dry-run options in request and content: [{}] and [{}]",
            query.join(" "),
            opts.dry_run.join(" ")
        )));
    }
    let errs = opts.validate(None);
    if !errs.is_empty() {
        return Err(ApiError::invalid("meta.k8s.io", "DeleteOptions", "", &errs));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_evictions_dry_run_comes_from_its_body_or_its_query() {
        let body = |v: serde_json::Value| DeleteOptions::from_value(&v);
        let mut o = body(json!({"dryRun": ["All"]}));
        propagate_dry_run(&mut o, false).expect("body only");
        assert!(o.is_dry_run());
        let mut o = body(json!({}));
        propagate_dry_run(&mut o, true).expect("query only");
        assert!(o.is_dry_run());
        let mut o = body(json!({"dryRun": ["All"]}));
        propagate_dry_run(&mut o, true).expect("both agree");
        let mut o = body(json!({}));
        propagate_dry_run(&mut o, false).expect("neither");
        assert!(!o.is_dry_run());
        let mut o = body(json!({"dryRun": ["Some"]}));
        let e = propagate_dry_run(&mut o, true).expect_err("both, differing");
        assert_eq!(
            (e.code, e.message.as_str()),
            (400, "Non-matching dry-run options in request and content: [All] and [Some]")
        );
        let mut o = body(json!({"dryRun": ["Some"]}));
        assert_eq!(propagate_dry_run(&mut o, false).expect_err("unsupported").code, 422);
    }

    #[test]
    fn binding_sets_pod_scheduled_like_update_pod_condition() {
        let mut fresh = json!({"metadata": {"name": "p", "generation": 1}, "spec": {}});
        set_scheduled(&mut fresh);
        let c = &fresh["status"]["conditions"][0];
        assert_eq!((c["type"].as_str(), c["status"].as_str()), (Some("PodScheduled"), Some("True")));
        assert_eq!(c["observedGeneration"], json!(1));
        assert!(c["lastProbeTime"].is_null() && c["lastTransitionTime"].is_string());

        // A pod that was Unschedulable: reason and message go, the transition time moves.
        let mut pending = json!({"metadata": {"name": "p"}, "status": {"conditions": [
            {"type": "Ready", "status": "False"},
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/1 nodes",
             "lastTransitionTime": "2020-01-01T00:00:00Z"}]}});
        set_scheduled(&mut pending);
        let conds = pending["status"]["conditions"].as_array().expect("conditions");
        assert_eq!(conds.len(), 2);
        assert_eq!(conds[1]["status"], "True");
        assert!(conds[1].get("reason").is_none() && conds[1].get("message").is_none());
        assert_ne!(conds[1]["lastTransitionTime"], "2020-01-01T00:00:00Z");

        // Already True: the transition time stays.
        let mut done = json!({"metadata": {"name": "p"}, "status": {"conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"}]}});
        set_scheduled(&mut done);
        assert_eq!(done["status"]["conditions"][0]["lastTransitionTime"], "2020-01-01T00:00:00Z");
    }
}
