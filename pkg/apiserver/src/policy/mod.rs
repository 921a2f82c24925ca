//! ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1), as upstream's
//! `apiserver/pkg/admission/plugin/policy/validating`: the policies and their bindings in the
//! store, compiled once per generation and kept in step by a watch, run on every request just
//! before the validating webhooks.
//!
//! A policy applies to a request its `matchConstraints` match ([`matching`]); each of its
//! bindings whose `matchResources` also match evaluates it ([`validate`]) once per parameter
//! object its `paramRef` picks ([`params`]). A failed validation acts as the binding's
//! `validationActions` say: `Deny` refuses the request with upstream's message and reason
//! (Invalid, 422, unless the validation names another), `Warn` sends a `Warning` header,
//! `Audit` annotates the request's audit event (`validation.policy.admission.k8s.io/validation_failure`).
//! Errors (compilation, evaluation, parameters) refuse under `failurePolicy: Fail` and are
//! ignored under `Ignore`. Audit annotations are evaluated (their errors count as upstream's)
//! and published as `<policy>/<key>` annotations of the audit event. The policy's status
//! (`observedGeneration`, `typeChecking`) is written by [`status`].
//!
//! The `authorizer` CEL variable asks the server's authorizer ([`authz`]). Not available: type
//! checking against the matched kinds' schemas (k1s reports expressions that do not compile
//! instead).

pub mod authz;
pub mod expr;
pub mod matching;
pub mod params;
pub mod status;
pub mod validate;

use crate::admission::{Attributes, ValidatingPlugin};
use crate::error::{ApiError, Cause};
use futures::future::BoxFuture;
use k1s_store::Store;
use matching::Matched;
use serde_json::{json, Map, Value};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use validate::{Decision, Policy};

const PREFIX: &str = "/registry/admissionregistration.k8s.io/";
const POLICIES: &str = "/registry/admissionregistration.k8s.io/validatingadmissionpolicies/";
const BINDINGS: &str = "/registry/admissionregistration.k8s.io/validatingadmissionpolicybindings/";

/// A policy with the bindings that name it.
struct Hook {
    policy: Arc<Policy>,
    bindings: Vec<Value>,
}

/// The policies in force, sorted by name.
#[derive(Default)]
struct Snapshot {
    hooks: Vec<Hook>,
}

/// The stored policies and bindings, compiled.
pub struct Policies {
    store: Store,
    state: RwLock<Arc<Snapshot>>,
    /// The namespaces, for `namespaceSelector` and `namespaceObject`.
    namespaces: crate::admission_cache::Cache<Value>,
    /// Wakes the status writer after a reload.
    changed: tokio::sync::Notify,
    /// What the `authorizer` variable asks; unset, expressions naming it fail when they run.
    authorizer: std::sync::OnceLock<Arc<dyn k1s_cel::Authorize>>,
}

fn load(store: &Store, prefix: &str) -> Vec<Value> {
    match store.list(prefix, None, 0, None) {
        Ok(page) => {
            page.items.iter().filter_map(|kv| crate::object::from_storage(&kv.value, kv.mod_revision)).collect()
        }
        Err(e) => {
            tracing::warn!(prefix, error = %e, "listing admission policies failed");
            Vec::new()
        }
    }
}

impl Policies {
    pub fn new(store: Store) -> Arc<Policies> {
        let namespaces = crate::admission_cache::Cache::new(store.clone(), "/registry/namespaces/", |kv| {
            crate::object::from_storage(&kv.value, kv.mod_revision)
        });
        let p = Arc::new(Policies {
            store,
            namespaces,
            state: RwLock::default(),
            changed: tokio::sync::Notify::new(),
            authorizer: std::sync::OnceLock::new(),
        });
        p.refresh();
        p
    }

    /// Backs the `authorizer` variable with the server's authorizer (set once, at start).
    pub fn set_authorizer(&self, authorizer: Arc<dyn crate::auth::Authorizer>) {
        let _ = self.authorizer.set(Arc::new(authz::ServerAuthorizer(authorizer)));
    }

    fn current(&self) -> Arc<Snapshot> {
        self.state.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Reloads policies and bindings, compiling only policies whose generation changed.
    fn refresh(&self) {
        let old = self.current();
        let compiled: HashMap<(&str, i64), &Arc<Policy>> =
            old.hooks.iter().map(|h| ((h.policy.uid.as_str(), h.policy.generation), &h.policy)).collect();
        let bindings = load(&self.store, BINDINGS);
        let hooks = load(&self.store, POLICIES)
            .iter()
            .map(|obj| {
                let uid = obj.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default();
                let generation = obj.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0);
                let policy = match compiled.get(&(uid, generation)) {
                    Some(p) => Arc::clone(p),
                    None => Arc::new(Policy::compile(obj)),
                };
                let bindings = bindings
                    .iter()
                    .filter(|b| b.pointer("/spec/policyName").and_then(Value::as_str) == Some(policy.name.as_str()))
                    .cloned()
                    .collect();
                Hook { policy, bindings }
            })
            .collect();
        *self.state.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(Snapshot { hooks });
        self.changed.notify_one();
    }

    /// Reloads whenever a policy or binding changes, until `cancel` fires.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        loop {
            let mut watcher = match self.store.watch(PREFIX, 0) {
                Ok(w) => w,
                Err(e) => {
                    tracing::warn!(error = %e, "watching admission policies failed");
                    tokio::select! {
                        _ = cancel.cancelled() => return,
                        _ = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    }
                }
            };
            self.refresh();
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    ev = watcher.next() => match ev {
                        Ok(ev) if ev.kv.key.starts_with(POLICIES) || ev.kv.key.starts_with(BINDINGS) => self.refresh(),
                        Ok(_) => {}
                        Err(_) => break,
                    },
                }
            }
        }
    }

    fn get(&self, key: &str) -> Option<Value> {
        let kv = self.store.get(key).ok().flatten()?;
        crate::object::from_storage(&kv.value, kv.mod_revision)
    }

    /// A namespace as stored (from the watch-fed cache).
    fn namespace(&self, name: &str) -> Option<Arc<Value>> {
        self.namespaces.get("", name).ok().flatten()
    }
}

/// The versions `r`'s resource is served in, with the kind each calls it (upstream's
/// equivalent resources): the resource table's, or a custom resource's definition's.
pub(crate) fn equivalents(store: &Store, r: &k1s_api::ResourceInfo) -> Vec<(String, String)> {
    if let Some(c) = &r.custom {
        let key = format!("/registry/apiextensions.k8s.io/customresourcedefinitions/{}", c.crd);
        let Some(crd) = store.get(&key).ok().flatten().and_then(|kv| serde_json::from_slice::<Value>(&kv.value).ok())
        else {
            return Vec::new();
        };
        let kind = crd.pointer("/spec/names/kind").and_then(Value::as_str).unwrap_or(r.kind).to_string();
        return crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|v| v["served"] != false)
            .filter_map(|v| v["name"].as_str())
            .map(|v| (v.to_string(), kind.clone()))
            .collect();
    }
    k1s_api::resources::all()
        .iter()
        .filter(|i| i.group == r.group && i.resource == r.resource)
        .map(|i| (i.version.to_string(), i.kind.to_string()))
        .collect()
}

/// The version and kind a request matched as.
pub(crate) fn matched_as<'a>(attrs: &'a Attributes<'_>, m: &'a Matched) -> (&'a str, &'a str) {
    match (&m.version, &m.kind) {
        (Some(v), Some(k)) => (v, k),
        _ => (attrs.resource.version, attrs.resource.kind),
    }
}

/// The request's object and old object (`null` when absent) in the version it matched as:
/// borrowed from the request when that is the version, converted copies otherwise.
pub(crate) fn versioned<'a>(
    attrs: &'a Attributes<'_>,
    m: &Matched,
) -> Result<(Cow<'a, Value>, Cow<'a, Value>), String> {
    let (version, _) = matched_as(attrs, m);
    let convert = |o: Option<&'a Value>| -> Result<Cow<'a, Value>, String> {
        match o {
            None => Ok(Cow::Owned(Value::Null)),
            Some(o) if version == attrs.resource.version => Ok(Cow::Borrowed(o)),
            Some(o) => k1s_api::conversion::convert(o.clone(), attrs.resource, version)
                .map(Cow::Owned)
                .map_err(|e| format!("failed to convert object version: {e}")),
        }
    };
    Ok((convert(attrs.object.as_deref())?, convert(attrs.old_object)?))
}

/// Whether upstream never sends requests for this resource to policies: the policy kinds
/// themselves (a broken policy must not lock them) and the reviews, which are never stored.
fn exempt(group: &str, resource: &str) -> bool {
    match group {
        "admissionregistration.k8s.io" => matches!(
            resource,
            "validatingadmissionpolicies"
                | "validatingadmissionpolicybindings"
                | "mutatingadmissionpolicies"
                | "mutatingadmissionpolicybindings"
        ),
        "authentication.k8s.io" | "authorization.k8s.io" => true,
        _ => false,
    }
}

/// The request as CEL's `request` shows it (upstream's `CreateAdmissionRequest`).
pub(crate) fn request_value(attrs: &Attributes<'_>, version: &str, kind: &str) -> Value {
    let r = attrs.resource;
    let u = attrs.user;
    let mut req = json!({
        "kind": {"group": r.group, "version": version, "kind": kind},
        "resource": {"group": r.group, "version": version, "resource": r.resource},
        "requestKind": {"group": r.group, "version": r.version, "kind": r.kind},
        "requestResource": {"group": r.group, "version": r.version, "resource": r.resource},
        "operation": attrs.operation.as_str(),
        "userInfo": {"username": u.name, "uid": u.uid, "groups": u.groups, "extra": u.extra},
        "dryRun": attrs.dry_run,
    });
    let opts = match attrs.operation {
        crate::admission::Operation::Create => "CreateOptions",
        crate::admission::Operation::Update => "UpdateOptions",
        crate::admission::Operation::Delete => "DeleteOptions",
        crate::admission::Operation::Connect => "",
    };
    if !opts.is_empty() {
        req["options"] = json!({"apiVersion": "meta.k8s.io/v1", "kind": opts});
    }
    if let Some(sub) = attrs.subresource {
        req["subResource"] = json!(sub);
        req["requestSubResource"] = json!(sub);
    }
    if !attrs.name.is_empty() {
        req["name"] = json!(attrs.name);
    }
    if let Some(ns) = attrs.namespace {
        req["namespace"] = json!(ns);
    }
    req
}

/// The namespace as CEL's `namespaceObject` shows it: its spec, status and main metadata.
fn namespace_value(ns: &Value) -> Value {
    let mut meta = Map::new();
    for k in [
        "name",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "labels",
        "annotations",
        "finalizers",
    ] {
        if let Some(v) = ns.pointer(&format!("/metadata/{k}")) {
            meta.insert(k.into(), v.clone());
        }
    }
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": meta, "spec": ns.get("spec"), "status": ns.get("status")})
}

/// A denial with the decision that caused it.
struct Denial {
    policy: String,
    binding: Option<String>,
    decision: Decision,
}

/// Upstream's reasons and their codes; an unknown reason keeps 422.
fn reason_code(reason: Option<&str>) -> (&'static str, u16) {
    match reason {
        Some("Forbidden") => ("Forbidden", 403),
        Some("Unauthorized") => ("Unauthorized", 401),
        Some("RequestEntityTooLarge") => ("RequestEntityTooLarge", 413),
        _ => ("Invalid", 422),
    }
}

/// The refusal for `d`, as upstream's dispatcher builds it on `admission.NewForbidden`.
fn refusal(attrs: &Attributes<'_>, d: &Denial) -> ApiError {
    let message = match &d.binding {
        Some(b) => format!(
            "ValidatingAdmissionPolicy '{}' with binding '{b}' denied request: {}",
            d.policy, d.decision.message
        ),
        None => format!("ValidatingAdmissionPolicy '{}' denied request: {}", d.policy, d.decision.message),
    };
    let object = attrs.object.as_deref();
    let meta = |k: &str| object.and_then(|o| o.pointer(&format!("/metadata/{k}"))).and_then(Value::as_str);
    let name = Some(attrs.name)
        .filter(|n| !n.is_empty())
        .or_else(|| meta("name").filter(|n| !n.is_empty()))
        .or_else(|| meta("generateName").filter(|n| !n.is_empty()))
        .unwrap_or("Unknown");
    let r = attrs.resource;
    let mut e = ApiError::forbidden_message(r.group, r.resource, name, &message);
    let (reason, code) = reason_code(d.decision.reason.as_deref());
    e.reason = reason;
    e.code = code;
    e.causes.push(Cause { reason: String::new(), message, field: String::new() });
    e
}

/// The policies, as one plugin of the validating chain.
pub struct ValidatingAdmissionPolicy(pub Arc<Policies>);

impl ValidatingPlugin for ValidatingAdmissionPolicy {
    fn name(&self) -> &'static str {
        "ValidatingAdmissionPolicy"
    }

    fn validate<'a>(&'a self, attrs: &'a Attributes<'_>) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            let snapshot = self.0.current();
            if snapshot.hooks.is_empty() || exempt(attrs.resource.group, attrs.resource.resource) {
                return Ok(());
            }
            dispatch(&self.0, &snapshot, attrs)
        })
    }
}

fn dispatch(p: &Policies, snapshot: &Snapshot, attrs: &Attributes<'_>) -> Result<(), ApiError> {
    let r = attrs.resource;
    let equivalents = equivalents(&p.store, r);
    let req = matching::Request::of(attrs, &equivalents);
    let is_namespace = req.is_namespace();
    // Read once, when a selector or an evaluation first needs it.
    let namespace: std::cell::OnceCell<Option<Arc<Value>>> = std::cell::OnceCell::new();
    let load_namespace = |ns: &str| -> Option<&Value> { namespace.get_or_init(|| p.namespace(ns)).as_deref() };
    let mut denials: Vec<Denial> = Vec::new();
    // Built only when a policy's expressions name it.
    let authorizer = p
        .authorizer
        .get()
        .filter(|_| snapshot.hooks.iter().any(|h| h.policy.uses("authorizer")))
        .map(|a| authz::variables(a, attrs));
    let extra: &[(&str, k1s_cel::Value)] = authorizer.as_ref().map_or(&[], |a| a.as_slice());
    for hook in &snapshot.hooks {
        let policy = &hook.policy;
        let config_error = |denials: &mut Vec<Denial>, binding: Option<&str>, err: String| {
            if policy.fail_open {
                tracing::debug!(policy = %policy.name, error = %err, "policy error ignored (failurePolicy Ignore)");
                return;
            }
            let what = if binding.is_some() { "binding" } else { "policy" };
            denials.push(Denial {
                policy: policy.name.clone(),
                binding: binding.map(str::to_string),
                decision: Decision {
                    deny: true,
                    message: format!("failed to configure {what}: {err}"),
                    reason: None,
                    error: true,
                },
            });
        };
        let mut ns_labels = || match req.namespace {
            Some(ns) => load_namespace(ns)
                .map(|n| n.pointer("/metadata/labels").cloned())
                .ok_or_else(|| format!("namespaces \"{ns}\" not found")),
            None => Ok(None),
        };
        let matched = match matching::matches(policy.spec.get("matchConstraints"), &req, &mut ns_labels) {
            Ok(Some(m)) => m,
            Ok(None) => continue,
            Err(e) => {
                config_error(&mut denials, None, e);
                continue;
            }
        };
        if hook.bindings.is_empty() {
            continue;
        }
        let (version, kind) = matched_as(attrs, &matched);
        let (obj, old) = match versioned(attrs, &matched) {
            Ok(x) => x,
            Err(e) => {
                config_error(&mut denials, None, e);
                continue;
            }
        };
        // Only what the policy's expressions name is built and handed to CEL.
        let request = if policy.uses("request") { request_value(attrs, version, kind) } else { Value::Null };
        let param_kind =
            policy.spec.get("paramKind").filter(|k| !k.is_null()).map(|k| params::resolve_kind(&p.store, k));
        // The policy's audit annotations: each key's distinct values, over all bindings.
        let mut annotations: Vec<(String, Vec<String>)> = Vec::new();
        for binding in &hook.bindings {
            let bname = binding.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
            let spec = &binding["spec"];
            match matching::matches(spec.get("matchResources").filter(|m| !m.is_null()), &req, &mut ns_labels) {
                Ok(Some(_)) => {}
                Ok(None) => continue,
                Err(e) => {
                    config_error(&mut denials, Some(bname), e);
                    continue;
                }
            }
            let params = match params::collect(&p.store, param_kind.as_ref(), spec.get("paramRef"), req.namespace) {
                Ok(ps) => ps,
                Err(e) => {
                    config_error(&mut denials, Some(bname), e);
                    continue;
                }
            };
            let namespace_object = match req.namespace {
                Some(ns) if !is_namespace && policy.uses("namespaceObject") => {
                    load_namespace(ns).map(namespace_value).unwrap_or(Value::Null)
                }
                _ => Value::Null,
            };
            let actions: Vec<&str> = spec
                .get("validationActions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            for param in params {
                let param = param.unwrap_or(Value::Null);
                let values = [
                    ("object", &*obj),
                    ("oldObject", &*old),
                    ("request", &request),
                    ("namespaceObject", &namespace_object),
                    ("params", &param),
                ];
                // Bound from the request's values as they are: nothing is copied for CEL.
                let vars: Vec<(&str, &Value)> = values.into_iter().filter(|(name, _)| policy.uses(name)).collect();
                let outcome = policy.evaluate_with(&vars, extra);
                for (i, d) in outcome.decisions.into_iter().enumerate() {
                    if !d.deny {
                        continue;
                    }
                    for action in &actions {
                        match *action {
                            "Deny" => denials.push(Denial {
                                policy: policy.name.clone(),
                                binding: Some(bname.to_string()),
                                decision: d.clone(),
                            }),
                            "Warn" => attrs.warn(&format!(
                                "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{bname}': {}",
                                policy.name, d.message
                            )),
                            // Upstream's value: a list, for the failures to come.
                            "Audit" if attrs.audited() => attrs.annotate(
                                "validation.policy.admission.k8s.io/validation_failure".into(),
                                serde_json::json!([{
                                    "message": d.message,
                                    "policy": policy.name,
                                    "binding": bname,
                                    "expressionIndex": i,
                                    "validationActions": actions,
                                }])
                                .to_string(),
                            ),
                            _ => {}
                        }
                    }
                }
                // Audit annotations that fail deny whatever the actions (under Fail).
                for message in outcome.annotation_errors {
                    let decision = Decision { deny: true, message, reason: None, error: true };
                    denials.push(Denial { policy: policy.name.clone(), binding: Some(bname.to_string()), decision });
                }
                for (key, value) in outcome.annotations {
                    match annotations.iter_mut().find(|(k, _)| *k == key) {
                        Some((_, values)) if !values.contains(&value) => values.push(value),
                        Some(_) => {}
                        None => annotations.push((key, vec![value])),
                    }
                }
            }
        }
        // Several distinct values (parameters in the value expression) are joined, as upstream.
        for (key, values) in annotations {
            attrs.annotate(format!("{}/{key}", policy.name), values.join(", "));
        }
    }
    match denials.first() {
        Some(d) => Err(refusal(attrs, d)),
        None => Ok(()),
    }
}
