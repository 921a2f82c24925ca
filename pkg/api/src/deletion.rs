//! Deletion as the strategies see it: the parsed `DeleteOptions` of a request and the
//! [`DeletePlan`] a kind's strategy makes from them (upstream's `rest.RESTDeleteStrategy`,
//! `CheckGracefulDelete` and the finalizers a kind's store adds on delete).

use serde_json::Value;

/// Parsed `DeleteOptions`.
#[derive(Clone, Debug, Default)]
pub struct DeleteOptions {
    pub grace_period_seconds: Option<i64>,
    pub propagation_policy: Option<String>,
    pub precondition_uid: Option<String>,
    pub precondition_rv: Option<String>,
}

impl DeleteOptions {
    pub fn from_value(v: &Value) -> DeleteOptions {
        let orphan = v.get("orphanDependents").and_then(Value::as_bool);
        DeleteOptions {
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
