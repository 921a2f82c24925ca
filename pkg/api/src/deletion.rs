//! Deletion as the strategies see it: the parsed `DeleteOptions` of a request and the
//! [`DeletePlan`] a kind's strategy makes from them (upstream's `rest.RESTDeleteStrategy`,
//! `CheckGracefulDelete` and the finalizers a kind's store adds on delete).

use crate::field::FieldError;
use serde_json::Value;

/// Parsed `DeleteOptions`.
#[derive(Clone, Debug, Default)]
pub struct DeleteOptions {
    pub grace_period_seconds: Option<i64>,
    pub propagation_policy: Option<String>,
    pub precondition_uid: Option<String>,
    pub precondition_rv: Option<String>,
    /// The body's `dryRun` values (`["All"]` for a dry run); see [`DeleteOptions::validate`].
    pub dry_run: Vec<String>,
    /// The deprecated `orphanDependents`, as given (it also sets `propagation_policy`).
    pub orphan_dependents: Option<bool>,
}

impl DeleteOptions {
    pub fn from_value(v: &Value) -> DeleteOptions {
        let orphan = v.get("orphanDependents").and_then(Value::as_bool);
        DeleteOptions {
            orphan_dependents: orphan,
            dry_run: v
                .get("dryRun")
                .and_then(Value::as_array)
                .map(|a| a.iter().map(|d| d.as_str().unwrap_or_default().to_string()).collect())
                .unwrap_or_default(),
            grace_period_seconds: v.get("gracePeriodSeconds").and_then(Value::as_i64),
            propagation_policy: v
                .get("propagationPolicy")
                .and_then(Value::as_str)
                .map(str::to_string)
                .or_else(|| orphan.map(|o| if o { "Orphan".into() } else { "Background".into() })),
            precondition_uid: v.pointer("/preconditions/uid").and_then(Value::as_str).map(str::to_string),
            precondition_rv: v.pointer("/preconditions/resourceVersion").and_then(Value::as_str).map(str::to_string),
        }
    }

    /// Whether the options ask for a dry run (`dryRun: ["All"]`).
    pub fn is_dry_run(&self) -> bool {
        !self.dry_run.is_empty()
    }

    /// Upstream's `ValidateDeleteOptions` of what the request gave: not both `orphanDependents`
    /// and `propagationPolicy` (`given_policy`: the policy the body or query named), and only
    /// `All` as a `dryRun` value.
    pub fn validate(&self, given_policy: Option<&str>) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if let (Some(_), Some(policy)) = (self.orphan_dependents, given_policy) {
            errs.push(FieldError::invalid(
                "propagationPolicy",
                policy,
                "orphanDependents and deletionPropagation cannot be both set",
            ));
        }
        if !self.dry_run.iter().all(|d| d == "All") {
            errs.push(FieldError::not_supported("dryRun", self.dry_run.clone(), &["All"]));
        }
        errs
    }
}

/// Graceful deletion of an object that something must first stop (a pod on its node).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grace {
    /// Wait this many seconds: `deletionTimestamp` is set that far ahead and
    /// `deletionGracePeriodSeconds` to it (also when it shortens a grace period under way).
    Start(i64),
    /// A graceful deletion is already under way and stays as it is.
    Continue,
}

/// What deleting one object of a kind takes besides the generic rules (preconditions,
/// propagation-policy finalizers, `deletionTimestamp` once something holds the object).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeletePlan {
    /// Finalizers the kind adds (when missing) before the object may go.
    pub finalizers: Vec<&'static str>,
    /// `Some` when the object goes gracefully rather than at once.
    pub grace: Option<Grace>,
    /// The `status.phase` the object shows while it waits (a namespace's `Terminating`).
    pub status_phase: Option<&'static str>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn orphan_dependents_maps_to_a_propagation_policy() {
        let o = DeleteOptions::from_value(&json!({"orphanDependents": true, "gracePeriodSeconds": 5}));
        assert_eq!(o.propagation_policy.as_deref(), Some("Orphan"));
        assert_eq!(o.grace_period_seconds, Some(5));
        let o = DeleteOptions::from_value(
            &json!({"orphanDependents": true, "propagationPolicy": "Foreground", "preconditions": {"uid": "u"}}),
        );
        assert_eq!(o.propagation_policy.as_deref(), Some("Foreground"));
        assert_eq!(o.precondition_uid.as_deref(), Some("u"));
    }
}
