//! Admission webhooks: the MutatingWebhookConfigurations and ValidatingWebhookConfigurations
//! in the store, called as upstream calls them. Mutating webhooks run after the built-in
//! mutating plugins, one at a time in configuration-name order, each seeing the previous ones'
//! patches (`JSONPatch`); validating webhooks run after the built-in validating plugins.
//!
//! A request goes to a webhook whose [`rules`] match it and whose namespace and object
//! selectors select it, as an `admission.k8s.io/v1` AdmissionReview POSTed over HTTPS
//! ([`client`]) to its `url` or its Service (a ready endpoint of the Service's port, else its
//! ClusterIP), within `timeoutSeconds`. A denial answers with the webhook's status and
//! upstream's message; a call that fails is an error under `failurePolicy: Fail` and skipped
//! under `Ignore`. Dry-run requests go only to webhooks without side effects. Webhook
//! configurations themselves are never sent to webhooks, so a broken webhook cannot lock them.
//!
//! A webhook's `matchConditions` (CEL, compiled when its configuration is loaded) are
//! evaluated after its rules and selectors match: one false skips it, errors refuse the request
//! under `failurePolicy: Fail` and skip it under `Ignore`. Under `matchPolicy: Equivalent` (the
//! default) a rule naming another version of the request's resource matches, and the webhook
//! gets the object in that version. A mutating webhook with `reinvocationPolicy: IfNeeded` is
//! called once more when a webhook after it changed the object.

pub mod client;
pub mod rules;

use crate::admission::{Attributes, MutatingPlugin, ValidatingPlugin};
use crate::error::ApiError;
use crate::policy::matching::{self, Matched};
use crate::policy::validate::{conditions_match, Compiled};
use base64::Engine as _;
use futures::future::BoxFuture;
use k1s_store::Store;
use serde_json::{json, Map, Value};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

const PREFIX: &str = "/registry/admissionregistration.k8s.io/";
const MUTATING: &str = "/registry/admissionregistration.k8s.io/mutatingwebhookconfigurations/";
const VALIDATING: &str = "/registry/admissionregistration.k8s.io/validatingwebhookconfigurations/";

/// One webhook of a configuration, with its compiled `matchConditions`.
struct Hook {
    webhook: Value,
    conditions: Vec<(String, Compiled)>,
}

impl Hook {
    fn new(webhook: Value) -> Hook {
        let conditions = webhook
            .get("matchConditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| {
                let name = c.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
                let source = c.get("expression").and_then(Value::as_str).unwrap_or_default();
                (name, Compiled::new(source, crate::policy::expr::WEBHOOK_VARS))
            })
            .collect();
        Hook { webhook, conditions }
    }

    fn reinvoked_if_needed(&self) -> bool {
        self.webhook.get("reinvocationPolicy").and_then(Value::as_str) == Some("IfNeeded")
    }

    fn name(&self) -> &str {
        self.webhook.get("name").and_then(Value::as_str).unwrap_or("")
    }

    fn fails_open(&self) -> bool {
        self.webhook.get("failurePolicy").and_then(Value::as_str) == Some("Ignore")
    }

    fn timeout(&self) -> Duration {
        let secs = self.webhook.get("timeoutSeconds").and_then(Value::as_u64).unwrap_or(10).clamp(1, 30);
        Duration::from_secs(secs)
    }

    /// Whether the webhook may see dry-run requests.
    fn dry_run_safe(&self) -> bool {
        matches!(self.webhook.get("sideEffects").and_then(Value::as_str), Some("None" | "NoneOnDryRun"))
    }
}

/// The webhooks in force, in the order they are called.
#[derive(Default)]
struct Hooks {
    mutating: Vec<Hook>,
    validating: Vec<Hook>,
}

/// The webhook configurations, kept in step with the store.
pub struct Webhooks {
    store: Store,
    hooks: RwLock<Arc<Hooks>>,
}

fn load(store: &Store, prefix: &str) -> Vec<Hook> {
    let Ok(page) = store.list(prefix, None, 0, None) else { return Vec::new() };
    // Keys sort by name, as upstream orders configurations.
    page.items
        .iter()
        .filter_map(|kv| serde_json::from_slice::<Value>(&kv.value).ok())
        .flat_map(|cfg| cfg.get("webhooks").and_then(Value::as_array).cloned().unwrap_or_default())
        .map(Hook::new)
        .collect()
}

impl Webhooks {
    pub fn new(store: Store) -> Arc<Webhooks> {
        let w = Arc::new(Webhooks { store, hooks: RwLock::default() });
        w.refresh();
        w
    }

    fn refresh(&self) {
        let hooks = Hooks { mutating: load(&self.store, MUTATING), validating: load(&self.store, VALIDATING) };
        *self.hooks.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(hooks);
    }

    fn current(&self) -> Arc<Hooks> {
        self.hooks.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Reloads the configurations whenever one changes, until `cancel` fires.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        loop {
            let mut watcher = match self.store.watch(PREFIX, 0) {
                Ok(w) => w,
                Err(e) => {
                    tracing::warn!(error = %e, "watching webhook configurations failed");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            self.refresh();
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    ev = watcher.next() => match ev {
                        Ok(_) => self.refresh(),
                        Err(_) => break,
                    },
                }
            }
        }
    }

    /// The webhooks of `hooks` this request goes to, each with the version it matched as;
    /// a failing `matchConditions` under `failurePolicy: Fail` refuses the request.
    fn matching<'h>(&self, hooks: &'h [Hook], attrs: &Attributes<'_>) -> Result<Vec<(&'h Hook, Matched)>, ApiError> {
        let r = attrs.resource;
        // Webhook configurations are never subject to webhooks.
        if r.group == "admissionregistration.k8s.io" {
            return Ok(Vec::new());
        }
        let equivalents = crate::policy::equivalents(&self.store, r);
        let req = matching::Request::of(attrs, &equivalents);
        let namespace = std::cell::OnceCell::new();
        let mut ns_labels = || -> Result<Option<Value>, String> {
            let Some(ns) = req.namespace else { return Ok(None) };
            let obj = namespace.get_or_init(|| {
                let kv = self.store.get(&format!("/registry/namespaces/{ns}")).ok().flatten()?;
                serde_json::from_slice::<Value>(&kv.value).ok()
            });
            Ok(obj.as_ref().and_then(|o| o.pointer("/metadata/labels")).cloned())
        };
        let mut out = Vec::new();
        for h in hooks {
            let w = &h.webhook;
            let Some(rules) = w.get("rules").filter(|r| r.as_array().is_some_and(|a| !a.is_empty())) else {
                continue;
            };
            let criteria = json!({
                "namespaceSelector": w.get("namespaceSelector"),
                "objectSelector": w.get("objectSelector"),
                "resourceRules": rules,
                "matchPolicy": w.get("matchPolicy"),
            });
            let Some(matched) = matching::matches(Some(&criteria), &req, &mut ns_labels).ok().flatten() else {
                continue;
            };
            if !h.conditions.is_empty() {
                let (object, old_object) = crate::policy::versioned(attrs, &matched).map_err(ApiError::internal)?;
                let (version, kind) = crate::policy::matched_as(attrs, &matched);
                let mut vars = Map::new();
                vars.insert("object".into(), object.into_owned());
                vars.insert("oldObject".into(), old_object.into_owned());
                vars.insert("request".into(), crate::policy::request_value(attrs, version, kind));
                match conditions_match(&h.conditions, vars, h.fails_open()) {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(e) => {
                        tracing::warn!(webhook = h.name(), error = %e, "failed evaluating match conditions, failing closed");
                        return Err(match attrs.name {
                            "" => ApiError::new(
                                403,
                                "Forbidden",
                                format!("{} is forbidden: {e}", crate::error::qualified_resource(r.group, r.resource)),
                            ),
                            name => ApiError::forbidden_message(r.group, r.resource, name, e),
                        });
                    }
                }
            }
            out.push((h, matched));
        }
        Ok(out)
    }

    /// Where `hook` is reached.
    fn target(&self, hook: &Hook) -> Result<client::Target, String> {
        let cc = hook.webhook.get("clientConfig").ok_or("no clientConfig")?;
        let timeout = format!("timeout={}s", hook.timeout().as_secs());
        if let Some(url) = cc.get("url").and_then(Value::as_str) {
            let rest = url.strip_prefix("https://").ok_or_else(|| format!("the webhook URL {url:?} is not https"))?;
            let (authority, path) = rest.split_once('/').map_or((rest, "/".to_string()), |(a, p)| (a, format!("/{p}")));
            let (host, port) = match authority.rsplit_once(':') {
                Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => (h, p.parse().unwrap_or(443)),
                _ => (authority, 443),
            };
            let host = host.trim_start_matches('[').trim_end_matches(']').to_string();
            let sep = if path.contains('?') { '&' } else { '?' };
            return Ok(client::Target {
                connect: crate::kubelet_proxy::host_port(&host, port),
                server_name: host,
                url: format!("{url}{sep}{timeout}"),
                path: format!("{path}{sep}{timeout}"),
            });
        }
        let svc = cc.get("service").ok_or("clientConfig needs a url or a service")?;
        let s = |k: &str| svc.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let (name, namespace) = (s("name"), s("namespace"));
        let port = svc.get("port").and_then(Value::as_u64).unwrap_or(443) as u16;
        let path = svc.get("path").and_then(Value::as_str).unwrap_or("/").to_string();
        let server_name = format!("{name}.{namespace}.svc");
        let sep = if path.contains('?') { '&' } else { '?' };
        Ok(client::Target {
            connect: crate::service_resolver::resolve(&self.store, &namespace, &name, port)
                .map_err(|e| e.to_string())?,
            url: format!("https://{server_name}:{port}{path}{sep}{timeout}"),
            server_name,
            path: format!("{path}{sep}{timeout}"),
        })
    }

    /// The AdmissionReview request for `attrs`, with the object in the version the webhook
    /// matched (`object`, `old_object`).
    fn review(attrs: &Attributes<'_>, uid: &str, matched: &Matched, object: &Value, old_object: &Value) -> Value {
        let r = attrs.resource;
        let (kind_group, kind_version, kind) =
            match attrs.subresource.and_then(|s| r.subresources.iter().find(|x| x.name == s)) {
                Some(s) => (s.group, s.version, s.kind),
                None => (r.group, r.version, r.kind),
            };
        let request_resource = json!({"group": r.group, "version": r.version, "resource": r.resource});
        let request_kind = json!({"group": kind_group, "version": kind_version, "kind": kind});
        let (resource, kind) = match (&matched.version, &matched.kind) {
            (Some(v), Some(k)) if attrs.subresource.is_none() => (
                json!({"group": r.group, "version": v, "resource": r.resource}),
                json!({"group": r.group, "version": v, "kind": k}),
            ),
            _ => (request_resource.clone(), request_kind.clone()),
        };
        let u = attrs.user;
        let options_kind = match attrs.operation {
            crate::admission::Operation::Create => "CreateOptions",
            crate::admission::Operation::Update => "UpdateOptions",
            crate::admission::Operation::Delete => "DeleteOptions",
            crate::admission::Operation::Connect => "",
        };
        let mut request = json!({
            "uid": uid,
            "kind": kind,
            "resource": resource,
            "requestKind": request_kind,
            "requestResource": request_resource,
            "name": attrs.name,
            "operation": attrs.operation.as_str(),
            "userInfo": {"username": u.name, "uid": u.uid, "groups": u.groups, "extra": u.extra},
            "object": object,
            "oldObject": old_object,
            "dryRun": attrs.dry_run,
        });
        if let Some(sub) = attrs.subresource {
            request["subResource"] = json!(sub);
            request["requestSubResource"] = json!(sub);
        }
        if let Some(ns) = attrs.namespace {
            request["namespace"] = json!(ns);
        }
        if !options_kind.is_empty() {
            request["options"] = json!({"apiVersion": "meta.k8s.io/v1", "kind": options_kind});
        }
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
    }

    /// Calls `hook` and gives its AdmissionResponse, or the error its failure policy decides
    /// about (`Ok(None)`: failed, and ignored).
    async fn call(&self, hook: &Hook, attrs: &Attributes<'_>, matched: &Matched) -> Result<Option<Value>, ApiError> {
        if attrs.dry_run && !hook.dry_run_safe() {
            return Err(ApiError::bad_request(format!(
                "admission webhook \"{}\" does not support dry run",
                hook.name()
            )));
        }
        let uid = uuid::Uuid::new_v4().to_string();
        let failed = |url: &str, why: String| -> Result<Option<Value>, ApiError> {
            let message =
                format!("failed calling webhook \"{}\": failed to call webhook: Post \"{url}\": {why}", hook.name());
            if hook.fails_open() {
                tracing::warn!(webhook = hook.name(), %message, "webhook failed; ignored (failurePolicy Ignore)");
                return Ok(None);
            }
            Err(ApiError::internal(message))
        };
        let target = match self.target(hook) {
            Ok(t) => t,
            Err(why) => return failed("", why),
        };
        let ca = hook
            .webhook
            .pointer("/clientConfig/caBundle")
            .and_then(Value::as_str)
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok());
        let (object, old_object) = crate::policy::versioned(attrs, matched).map_err(ApiError::internal)?;
        let body = serde_json::to_vec(&Self::review(attrs, &uid, matched, &object, &old_object)).unwrap_or_default();
        let (status, reply) = match client::post(&target, ca.as_deref(), body, hook.timeout()).await {
            Ok(x) => x,
            Err(why) => return failed(&target.url, why),
        };
        if !(200..300).contains(&status) {
            return failed(&target.url, format!("expected response.uid={uid:?}, got an HTTP {status} reply"));
        }
        let review: Value = match serde_json::from_slice(&reply) {
            Ok(v) => v,
            Err(e) => return failed(&target.url, format!("the reply is not an AdmissionReview: {e}")),
        };
        let response = review.get("response").cloned().unwrap_or(Value::Null);
        if response.get("uid").and_then(Value::as_str) != Some(uid.as_str()) {
            return failed(&target.url, format!("expected response.uid={uid:?}, got {:?}", response.get("uid")));
        }
        for w in response.get("warnings").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            tracing::debug!(webhook = hook.name(), warning = w, "webhook warning");
            attrs.warn(w);
        }
        Ok(Some(response))
    }
}

impl Webhooks {
    /// Calls mutating `hook` and applies its patch (to the object in the version it matched
    /// as); whether the object changed.
    async fn mutate(&self, hook: &Hook, matched: &Matched, attrs: &mut Attributes<'_>) -> Result<bool, ApiError> {
        let Some(response) = self.call(hook, attrs, matched).await? else { return Ok(false) };
        if response.get("allowed").and_then(Value::as_bool) != Some(true) {
            return Err(denied(hook, &response));
        }
        let Some(patch) = response.get("patch").and_then(Value::as_str) else { return Ok(false) };
        if response.get("patchType").and_then(Value::as_str).is_some_and(|t| t != "JSONPatch") {
            return Err(ApiError::internal(format!(
                "unsupported patch type {:?} from webhook \"{}\"",
                response["patchType"],
                hook.name()
            )));
        }
        let invalid = |e: String| ApiError::internal(format!("webhook \"{}\" sent an invalid patch: {e}", hook.name()));
        let bytes = base64::engine::general_purpose::STANDARD.decode(patch).map_err(|e| invalid(e.to_string()))?;
        let ops: json_patch::Patch = serde_json::from_slice(&bytes).map_err(|e| invalid(e.to_string()))?;
        let info = attrs.resource;
        let Some(obj) = attrs.object.as_deref_mut() else { return Ok(false) };
        let applying =
            |e: String| ApiError::internal(format!("applying the patch of webhook \"{}\" failed: {e}", hook.name()));
        let mut patched = match &matched.version {
            Some(v) if v != info.version => {
                k1s_api::conversion::convert(obj.clone(), info, v).map_err(|e| applying(e.to_string()))?
            }
            _ => obj.clone(),
        };
        json_patch::patch(&mut patched, &ops).map_err(|e| applying(e.to_string()))?;
        if matched.version.as_deref().is_some_and(|v| v != info.version) {
            patched = k1s_api::conversion::convert(patched, info, info.version).map_err(|e| applying(e.to_string()))?;
        }
        let changed = patched != *obj;
        *obj = patched;
        Ok(changed)
    }
}

/// Upstream's `ToStatusErr`: a denial as the webhook's status, at least a 400.
fn denied(hook: &Hook, response: &Value) -> ApiError {
    let status = response.get("status");
    let text = |k: &str| status.and_then(|s| s.get(k)).and_then(Value::as_str).unwrap_or("").to_string();
    let by = format!("admission webhook \"{}\" denied the request", hook.name());
    let (message, reason) = (text("message"), text("reason"));
    let message = if !message.is_empty() {
        format!("{by}: {message}")
    } else if !reason.is_empty() {
        format!("{by}: {reason}")
    } else {
        format!("{by} without explanation")
    };
    let code = status.and_then(|s| s.get("code")).and_then(Value::as_u64).unwrap_or(0).max(400) as u16;
    ApiError::new(code, known_reason(&reason, code), message)
}

/// A Status reason as the `&'static` ApiError keeps, for the reasons Kubernetes defines.
fn known_reason(reason: &str, code: u16) -> &'static str {
    const KNOWN: &[&str] = &[
        "BadRequest",
        "Unauthorized",
        "Forbidden",
        "NotFound",
        "AlreadyExists",
        "Conflict",
        "Gone",
        "Invalid",
        "ServerTimeout",
        "Timeout",
        "TooManyRequests",
        "MethodNotAllowed",
        "NotAcceptable",
        "RequestEntityTooLarge",
        "UnsupportedMediaType",
        "InternalError",
        "Expired",
        "ServiceUnavailable",
    ];
    match KNOWN.iter().find(|k| **k == reason) {
        Some(k) => k,
        None if reason.is_empty() && code == 403 => "Forbidden",
        None => "",
    }
}

/// The mutating webhooks, as one plugin of the mutating chain.
pub struct MutatingWebhooks(pub Arc<Webhooks>);

/// The validating webhooks, as one plugin of the validating chain.
pub struct ValidatingWebhooks(pub Arc<Webhooks>);

impl MutatingPlugin for MutatingWebhooks {
    fn name(&self) -> &'static str {
        "MutatingAdmissionWebhook"
    }

    fn admit<'a>(&'a self, attrs: &'a mut Attributes<'_>) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            let hooks = self.0.current();
            if hooks.mutating.is_empty() {
                return Ok(());
            }
            // Upstream's reinvocation: IfNeeded webhooks called before a change are called
            // once more, after the first round, if a later webhook changed the object.
            let mut invoked_if_needed: Vec<usize> = Vec::new();
            let mut reinvoke: Vec<usize> = Vec::new();
            for round in 0..2 {
                if round == 1 && reinvoke.is_empty() {
                    break;
                }
                for (hook, matched) in self.0.matching(&hooks.mutating, attrs)? {
                    let id = hooks.mutating.iter().position(|h| std::ptr::eq(h, hook)).unwrap_or(usize::MAX);
                    if round == 1 && !reinvoke.contains(&id) {
                        continue;
                    }
                    let changed = self.0.mutate(hook, &matched, attrs).await?;
                    if changed && round == 0 {
                        reinvoke.append(&mut invoked_if_needed);
                    }
                    if hook.reinvoked_if_needed() {
                        invoked_if_needed.push(id);
                    }
                }
            }
            Ok(())
        })
    }
}

impl ValidatingPlugin for ValidatingWebhooks {
    fn name(&self) -> &'static str {
        "ValidatingAdmissionWebhook"
    }

    fn validate<'a>(&'a self, attrs: &'a Attributes<'_>) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            let hooks = self.0.current();
            if hooks.validating.is_empty() {
                return Ok(());
            }
            // Upstream calls validating webhooks in parallel; one denial or failure rejects.
            let calls = self.0.matching(&hooks.validating, attrs)?.into_iter().map(|(hook, matched)| async move {
                match self.0.call(hook, attrs, &matched).await? {
                    Some(r) if r.get("allowed").and_then(Value::as_bool) != Some(true) => Err(denied(hook, &r)),
                    _ => Ok(()),
                }
            });
            futures::future::try_join_all(calls).await.map(|_| ())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denials_read_as_upstream_words_them() {
        let hook = Hook::new(json!({"name": "deny.example.com"}));
        let e = denied(&hook, &json!({"allowed": false, "status": {"code": 403, "message": "no"}}));
        assert_eq!(
            (e.code, e.reason, e.message.as_str()),
            (403, "Forbidden", "admission webhook \"deny.example.com\" denied the request: no")
        );
        let e = denied(&hook, &json!({"allowed": false}));
        assert_eq!(
            (e.code, e.message.as_str()),
            (400, "admission webhook \"deny.example.com\" denied the request without explanation")
        );
        let e = denied(&hook, &json!({"allowed": false, "status": {"code": 200, "reason": "NotAcceptable"}}));
        assert_eq!((e.code, e.reason), (400, "NotAcceptable"));
    }

    #[test]
    fn url_webhooks_get_the_timeout_in_their_query() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = Store::open(dir.path(), k1s_store::StoreOptions::default()).expect("store");
        let w = Webhooks::new(store);
        let hook = Hook::new(
            json!({"name": "a", "timeoutSeconds": 5, "clientConfig": {"url": "https://127.0.0.1:8443/validate"}}),
        );
        let t = w.target(&hook).expect("target");
        assert_eq!(t.connect, "127.0.0.1:8443");
        assert_eq!(t.server_name, "127.0.0.1");
        assert_eq!(t.path, "/validate?timeout=5s");
        assert_eq!(t.url, "https://127.0.0.1:8443/validate?timeout=5s");
        let missing =
            Hook::new(json!({"name": "b", "clientConfig": {"service": {"namespace": "default", "name": "nope"}}}));
        assert_eq!(w.target(&missing), Err("service \"nope\" not found".to_string()));
    }
}
