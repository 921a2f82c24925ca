//! The PodSecurity admission plugin: upstream's `pod-security-admission` enforcing the Pod
//! Security Standards a namespace's `pod-security.kubernetes.io/{enforce,audit,warn}[-version]`
//! labels ask for.
//!
//! - Pods (create, update that changes an image or adds an ephemeral container, and the
//!   `ephemeralcontainers` subresource) violating the enforce level are refused with 403;
//!   violations of the warn level come back as warnings, of the audit level as annotations of
//!   the request's audit event (`pod-security.kubernetes.io/audit-violations`, with
//!   `enforce-policy`, `exempt` and `error` as upstream records them).
//! - Pod-template workloads only get the warn and audit evaluations, never a refusal.
//! - Namespaces with invalid labels are refused (422); tightening a namespace's enforce level
//!   warns about the existing pods that violate it.
//! - Exempt usernames, namespaces (`kube-system` by default) and runtime classes are not checked.

mod baseline;
mod config;
mod namespace;
mod policy;
mod registry;
mod restricted;

pub use config::{Config, ConfigError, Exemptions};

use crate::admission::{Attributes, Operation, ValidatingPlugin};
use crate::error::ApiError;
use futures::future::BoxFuture;
use k1s_store::Store;
use policy::{Level, Policy};
use serde_json::{Map, Value};
use std::sync::Arc;

pub struct PodSecurity {
    store: Store,
    /// The namespaces' labels, decoded when a namespace changes, not on every pod write.
    namespaces: crate::admission_cache::Cache<Map<String, Value>>,
    config: Config,
    /// The checks of each level and version asked for so far, chosen once (every pod write
    /// evaluates at least one).
    checks: std::sync::Mutex<std::collections::HashMap<policy::LevelVersion, registry::Checks>>,
}

/// Resources that embed a pod template, and where: upstream's `DefaultPodSpecExtractor`.
fn template_path(group: &str, resource: &str) -> Option<&'static [&'static str]> {
    match (group, resource) {
        ("", "podtemplates") => Some(&["template"]),
        ("", "replicationcontrollers")
        | ("apps", "replicasets" | "deployments" | "statefulsets" | "daemonsets")
        | ("batch", "jobs") => Some(&["spec", "template"]),
        ("batch", "cronjobs") => Some(&["spec", "jobTemplate", "spec", "template"]),
        _ => None,
    }
}

/// Pod subresources that cannot change what the checks look at.
const IGNORED_POD_SUBRESOURCES: &[&str] =
    &["exec", "attach", "binding", "eviction", "log", "portforward", "proxy", "status"];

fn labels(obj: &Value) -> Option<&Map<String, Value>> {
    obj["metadata"]["labels"].as_object()
}

/// The audit annotations upstream records (`pod-security.kubernetes.io/<key>`).
#[derive(Default)]
struct Audit(Vec<(&'static str, String)>);

impl Audit {
    fn add(&mut self, key: &'static str, value: String) {
        self.0.push((key, value));
    }

    /// Adds the annotations to the request's audit event (when it is audited).
    fn record(self, attrs: &Attributes<'_>) {
        if !attrs.audited() {
            return;
        }
        for (key, value) in self.0 {
            attrs.annotate(format!("pod-security.kubernetes.io/{key}"), value);
        }
    }
}

/// A stored namespace's labels (empty without labels). Only the labels are decoded.
fn namespace_labels(kv: &k1s_store::KeyValue) -> Option<Map<String, Value>> {
    #[derive(serde::Deserialize)]
    struct Namespace {
        #[serde(default)]
        metadata: Metadata,
    }
    #[derive(Default, serde::Deserialize)]
    struct Metadata {
        #[serde(default)]
        labels: Option<Map<String, Value>>,
    }
    let parsed: Namespace = serde_json::from_slice(&kv.value).ok()?;
    Some(parsed.metadata.labels.unwrap_or_default())
}

impl PodSecurity {
    pub fn new(store: Store, config: Config) -> Self {
        let namespaces = crate::admission_cache::Cache::new(store.clone(), "/registry/namespaces/", namespace_labels);
        PodSecurity { store, namespaces, config, checks: Default::default() }
    }

    /// The violations of one pod against `lv`, in order: [`registry::run`] of the checks of
    /// `lv`, chosen once per level and version.
    fn violations(&self, lv: policy::LevelVersion, metadata: &Value, spec: &Value) -> Vec<registry::Violation> {
        let checks = {
            let mut cache = self.checks.lock().unwrap_or_else(|p| p.into_inner());
            cache.entry(lv).or_insert_with(|| registry::checks_for(lv).into()).clone()
        };
        registry::run(&checks, metadata, spec)
    }

    fn exempt_namespace(&self, ns: &str) -> bool {
        !ns.is_empty() && self.config.exemptions.namespaces.iter().any(|n| n == ns)
    }

    fn exempt_user(&self, user: &str) -> bool {
        !user.is_empty() && self.config.exemptions.usernames.iter().any(|n| n == user)
    }

    /// Why a request is exempt (upstream's `exempt` audit annotation), if it is.
    fn exemption(&self, ns: &str, user: &str) -> Option<&'static str> {
        if self.exempt_namespace(ns) {
            Some("namespace")
        } else if self.exempt_user(user) {
            Some("user")
        } else {
            None
        }
    }

    fn exempt_runtime_class(&self, spec: &Value) -> bool {
        let rc = spec["runtimeClassName"].as_str().unwrap_or("");
        !rc.is_empty() && self.config.exemptions.runtime_classes.iter().any(|n| n == rc)
    }

    /// The namespace's labels (empty without labels).
    fn namespace_labels(&self, ns: &str) -> Result<Arc<Map<String, Value>>, String> {
        self.namespaces.get("", ns).map_err(|e| e.to_string())?.ok_or_else(|| format!("namespaces \"{ns}\" not found"))
    }

    fn validate_pod(&self, attrs: &Attributes<'_>) -> Result<(), ApiError> {
        if attrs.subresource.is_some_and(|s| IGNORED_POD_SUBRESOURCES.contains(&s)) {
            return Ok(());
        }
        let ns = attrs.namespace.unwrap_or("");
        if let Some(reason) = self.exemption(ns, &attrs.user.name) {
            Audit(vec![("exempt", reason.into())]).record(attrs);
            return Ok(());
        }
        let labels = self.namespace_labels(ns).map_err(|e| {
            tracing::error!(namespace = ns, error = %e, "PodSecurity: failed to fetch pod namespace");
            ApiError::internal(format!("failed to lookup namespace \"{ns}\""))
        })?;
        let (policy, errs) = policy::policy_to_evaluate(Some(&*labels), &self.config.defaults);
        if errs.is_empty() && policy.fully_privileged() {
            Audit(vec![("enforce-policy", policy::LevelVersion::PRIVILEGED_LATEST.to_string())]).record(attrs);
            return Ok(());
        }
        let Some(pod) = attrs.object.as_deref() else { return Ok(()) };
        if attrs.operation == Operation::Update {
            if let Some(old) = attrs.old_object {
                if !significant_pod_update(pod, old) {
                    return Ok(());
                }
            }
        }
        self.evaluate(attrs, &policy, &errs, &pod["metadata"], &pod["spec"], true)
    }

    fn validate_pod_controller(&self, attrs: &Attributes<'_>, path: &[&str]) -> Result<(), ApiError> {
        if attrs.subresource.is_some() {
            return Ok(());
        }
        let ns = attrs.namespace.unwrap_or("");
        if let Some(reason) = self.exemption(ns, &attrs.user.name) {
            Audit(vec![("exempt", reason.into())]).record(attrs);
            return Ok(());
        }
        let labels = match self.namespace_labels(ns) {
            Ok(l) => l,
            Err(e) => {
                let mut audit = Audit::default();
                audit.add("error", format!("failed to lookup namespace \"{ns}\": {e}"));
                audit.record(attrs);
                return Ok(());
            }
        };
        let (policy, errs) = policy::policy_to_evaluate(Some(&*labels), &self.config.defaults);
        if errs.is_empty() && policy.warn.level == Level::Privileged && policy.audit.level == Level::Privileged {
            return Ok(());
        }
        let Some(obj) = attrs.object.as_deref() else { return Ok(()) };
        let template = path.iter().fold(obj, |v, k| &v[*k]);
        if template.is_null() {
            return Ok(());
        }
        self.evaluate(attrs, &policy, &errs, &template["metadata"], &template["spec"], false)
    }

    /// Upstream's `EvaluatePod`: the enforce level (if `enforce`) refuses, audit annotates,
    /// warn warns (only when not refused). Evaluations of equal level and version are shared.
    fn evaluate(
        &self,
        attrs: &Attributes<'_>,
        policy: &Policy,
        policy_errs: &[k1s_api::field::FieldError],
        metadata: &Value,
        spec: &Value,
        enforce: bool,
    ) -> Result<(), ApiError> {
        if self.exempt_runtime_class(spec) {
            Audit(vec![("exempt", "runtimeClass".into())]).record(attrs);
            return Ok(());
        }
        let mut audit = Audit::default();
        if !policy_errs.is_empty() {
            let msgs: Vec<String> = policy_errs.iter().map(|e| e.to_string()).collect();
            let agg = if msgs.len() == 1 { msgs[0].clone() } else { format!("[{}]", msgs.join(", ")) };
            audit.add("error", format!("Failed to parse policy: {agg}"));
        }
        let mut cache: Vec<(policy::LevelVersion, Vec<registry::Violation>)> = Vec::new();
        let mut eval = |lv: policy::LevelVersion| -> Vec<registry::Violation> {
            if let Some((_, v)) = cache.iter().find(|(k, _)| *k == lv) {
                return v.clone();
            }
            let v = self.violations(lv, metadata, spec);
            cache.push((lv, v.clone()));
            v
        };
        let mut refusal = None;
        if enforce {
            audit.add("enforce-policy", policy.enforce.to_string());
            let v = eval(policy.enforce);
            if !v.is_empty() {
                refusal = Some(ApiError::forbidden_message(
                    attrs.resource.group,
                    attrs.resource.resource,
                    attrs.name,
                    format!("violates PodSecurity \"{}\": {}", policy.enforce, registry::forbidden_detail(&v)),
                ));
            }
        }
        // The audit level is only evaluated for an audited request: its verdict goes nowhere else.
        let v = if attrs.audited() { eval(policy.audit) } else { Vec::new() };
        if !v.is_empty() {
            audit.add(
                "audit-violations",
                format!("would violate PodSecurity \"{}\": {}", policy.audit, registry::forbidden_detail(&v)),
            );
        }
        if refusal.is_none() {
            let v = eval(policy.warn);
            if !v.is_empty() {
                attrs.warn(&format!(
                    "would violate PodSecurity \"{}\": {}",
                    policy.warn,
                    registry::forbidden_detail(&v)
                ));
            }
        }
        audit.record(attrs);
        match refusal {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Upstream's `isSignificantPodUpdate`: only a changed container count, a changed image or an
/// added or changed ephemeral container is evaluated again.
fn significant_pod_update(pod: &Value, old: &Value) -> bool {
    fn list<'v>(p: &'v Value, k: &str) -> &'v [Value] {
        p["spec"][k].as_array().map(Vec::as_slice).unwrap_or_default()
    }
    let image = |c: &Value| c["image"].as_str().unwrap_or("").to_string();
    for k in ["containers", "initContainers"] {
        let (new, old) = (list(pod, k), list(old, k));
        if new.len() != old.len() || new.iter().zip(old).any(|(a, b)| image(a) != image(b)) {
            return true;
        }
    }
    let old_ephemeral = list(old, "ephemeralContainers");
    list(pod, "ephemeralContainers").iter().any(|c| match old_ephemeral.iter().find(|o| o["name"] == c["name"]) {
        None => true,
        Some(o) => image(o) != image(c),
    })
}

impl ValidatingPlugin for PodSecurity {
    fn name(&self) -> &'static str {
        "PodSecurity"
    }

    fn validate<'a>(&'a self, attrs: &'a Attributes<'_>) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            if !matches!(attrs.operation, Operation::Create | Operation::Update) {
                return Ok(());
            }
            let r = attrs.resource;
            match (r.group, r.resource) {
                ("", "namespaces") => self.validate_namespace(attrs),
                ("", "pods") => self.validate_pod(attrs),
                (g, res) => match template_path(g, res) {
                    Some(path) => self.validate_pod_controller(attrs, path),
                    None => Ok(()),
                },
            }
        })
    }
}

#[cfg(test)]
mod tests;
