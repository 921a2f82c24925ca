//! Namespace writes: labels must parse, and a tightened enforce level warns about the existing
//! pods that violate it (upstream's `ValidateNamespace` and `EvaluatePodsInNamespace`).

use super::policy::{self, Level, LevelVersion, Policy};
use super::{labels, registry, PodSecurity};
use crate::admission::{Attributes, Operation};
use crate::error::ApiError;
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// At most this many existing pods are evaluated, within this time.
const MAX_PODS_TO_CHECK: usize = 3000;
const POD_CHECK_TIMEOUT: Duration = Duration::from_secs(1);

impl PodSecurity {
    pub(super) fn validate_namespace(&self, attrs: &Attributes<'_>) -> Result<(), ApiError> {
        if attrs.subresource.is_some() {
            return Ok(());
        }
        let Some(ns) = attrs.object.as_deref() else { return Ok(()) };
        let name = ns["metadata"]["name"].as_str().unwrap_or(attrs.name);
        let new_labels = labels(ns);
        let (new_policy, new_errs) = policy::policy_to_evaluate(new_labels, &self.config.defaults);
        let invalid = || ApiError::invalid("", "Namespace", name, &new_errs);
        match attrs.operation {
            Operation::Create => {
                if !new_errs.is_empty() {
                    return Err(invalid());
                }
                if self.exempt_namespace(name) {
                    self.warn_exempt(attrs, name, &new_policy, new_labels);
                }
                Ok(())
            }
            Operation::Update => {
                let old_labels = attrs.old_object.and_then(labels);
                let (old_policy, old_errs) = policy::policy_to_evaluate(old_labels, &self.config.defaults);
                if !new_errs.is_empty() && (old_errs.is_empty() || new_errs != old_errs) {
                    return Err(invalid());
                }
                let (new, old) = (new_policy.enforce, old_policy.enforce);
                if new == old
                    || new.level == Level::Privileged
                    || (new.version == old.version && new.level <= old.level)
                {
                    return Ok(());
                }
                if self.exempt_namespace(name) {
                    self.warn_exempt(attrs, name, &new_policy, new_labels);
                    return Ok(());
                }
                for w in self.evaluate_pods_in_namespace(name, new) {
                    attrs.warn(&w);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Upstream's `exemptNamespaceWarning`: an exempt namespace labelled with a policy that
    /// will be ignored.
    fn warn_exempt(&self, attrs: &Attributes<'_>, name: &str, p: &Policy, labels: Option<&Map<String, Value>>) {
        if p.fully_privileged() || p.equivalent(&self.config.defaults) {
            return;
        }
        let has = |k: &str| labels.is_some_and(|l| l.contains_key(k));
        let modes = [
            ("enforce", p.enforce, policy::ENFORCE_LEVEL_LABEL, policy::ENFORCE_VERSION_LABEL),
            ("audit", p.audit, policy::AUDIT_LEVEL_LABEL, policy::AUDIT_VERSION_LABEL),
            ("warn", p.warn, policy::WARN_LEVEL_LABEL, policy::WARN_VERSION_LABEL),
        ];
        let set: Vec<String> = modes
            .iter()
            .filter(|(_, lv, level, version)| lv.level != Level::Privileged && (has(level) || has(version)))
            .map(|(mode, lv, _, _)| format!("{mode}={lv}"))
            .collect();
        attrs.warn(&format!(
            "namespace \"{name}\" is exempt from Pod Security, and the policy ({}) will be ignored",
            set.join(", ")
        ));
    }

    /// The warnings for the namespace's existing pods against a new enforce level: one line per
    /// distinct set of violated checks, naming the first pod (by name) and how many others.
    /// Pods of one controller count once before the others are looked at.
    pub(super) fn evaluate_pods_in_namespace(&self, ns: &str, enforce: LevelVersion) -> Vec<String> {
        let deadline = Instant::now() + POD_CHECK_TIMEOUT;
        let prefix = format!("/registry/pods/{ns}/");
        let pods: Vec<Value> = match self.store.list(&prefix, None, 0, None) {
            Ok(page) => page.items.iter().filter_map(|kv| serde_json::from_slice(&kv.value).ok()).collect(),
            Err(e) => {
                tracing::error!(namespace = ns, error = %e, "PodSecurity: failed to list pods");
                return vec!["failed to list pods while checking new PodSecurity enforce level".into()];
            }
        };
        let mut pods = self.prioritize(&pods);
        let total = pods.len();
        pods.truncate(MAX_PODS_TO_CHECK);
        let mut checked = pods.len();
        let mut order: Vec<String> = Vec::new();
        let mut counts: HashMap<String, (String, usize)> = HashMap::new();
        for (i, pod) in pods.iter().enumerate() {
            let v = self.violations(enforce, &pod["metadata"], &pod["spec"]);
            if !v.is_empty() {
                let warning = registry::forbidden_reason(&v);
                let pod_name = pod["metadata"]["name"].as_str().unwrap_or("");
                let entry = counts.entry(warning.clone()).or_insert_with(|| {
                    order.push(warning);
                    (pod_name.to_string(), 0)
                });
                if pod_name < entry.0.as_str() {
                    entry.0 = pod_name.to_string();
                }
                entry.1 += 1;
            }
            if Instant::now() >= deadline {
                checked = i + 1;
                break;
            }
        }
        let mut warnings = Vec::new();
        if checked < total {
            warnings.push(format!(
                "new PodSecurity enforce level only checked against the first {checked} of {total} existing pods"
            ));
        }
        if !order.is_empty() {
            warnings.push(format!(
                "existing pods in namespace \"{ns}\" violate the new PodSecurity enforce level \"{enforce}\""
            ));
        }
        let mut pod_warnings: Vec<String> = order
            .into_iter()
            .map(|w| {
                let (first, n) = counts.get(&w).cloned().unwrap_or_default();
                match n {
                    0 => w,
                    1 => format!("{first}: {w}"),
                    2 => format!("{first} (and 1 other pod): {w}"),
                    n => format!("{first} (and {} other pods): {w}", n - 1),
                }
            })
            .collect();
        pod_warnings.sort();
        warnings.extend(pod_warnings);
        warnings
    }

    /// Upstream's `prioritizePods`: pods of exempt runtime classes go; the first pod of each
    /// controller comes first, the other pods of that controller last.
    fn prioritize<'p>(&self, pods: &'p [Value]) -> Vec<&'p Value> {
        let mut first = Vec::new();
        let mut duplicates = Vec::new();
        let mut seen = HashSet::new();
        for pod in pods {
            if self.exempt_runtime_class(&pod["spec"]) {
                continue;
            }
            let controller = pod["metadata"]["ownerReferences"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|r| r["controller"].as_bool() == Some(true))
                .and_then(|r| r["uid"].as_str());
            match controller {
                Some(uid) if !seen.insert(uid) => duplicates.push(pod),
                _ => first.push(pod),
            }
        }
        first.extend(duplicates);
        first
    }
}
