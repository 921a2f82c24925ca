//! The namespace status conditions the deleter maintains while a namespace terminates
//! (upstream `namespace/deletion/status_condition_utils.go`): each type is `True` with a failure
//! reason while the problem lasts and `False` with an "ok" reason once it is gone.

use k8s_openapi::api::core::v1::{NamespaceCondition, NamespaceStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use std::collections::BTreeMap;

pub const DISCOVERY_FAILURE: &str = "NamespaceDeletionDiscoveryFailure";
pub const GROUP_VERSION_PARSING_FAILURE: &str = "NamespaceDeletionGroupVersionParsingFailure";
pub const CONTENT_FAILURE: &str = "NamespaceDeletionContentFailure";
pub const CONTENT_REMAINING: &str = "NamespaceContentRemaining";
pub const FINALIZERS_REMAINING: &str = "NamespaceFinalizersRemaining";

/// The maintained types, in the order upstream writes them.
const TYPES: [&str; 5] =
    [DISCOVERY_FAILURE, GROUP_VERSION_PARSING_FAILURE, CONTENT_FAILURE, CONTENT_REMAINING, FINALIZERS_REMAINING];

fn ok_reason_and_message(type_: &str) -> (&'static str, &'static str) {
    match type_ {
        DISCOVERY_FAILURE => ("ResourcesDiscovered", "All resources successfully discovered"),
        GROUP_VERSION_PARSING_FAILURE => ("ParsedGroupVersions", "All legacy kube types successfully parsed"),
        CONTENT_FAILURE => ("ContentDeleted", "All content successfully deleted, may be waiting on finalization"),
        CONTENT_REMAINING => ("ContentRemoved", "All content successfully removed"),
        _ => ("ContentHasNoFinalizers", "All content-preserving finalizers finished"),
    }
}

/// What remains in a namespace after a deletion pass.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Remaining {
    /// `resource.group` ▶ instances left.
    pub by_resource: BTreeMap<String, usize>,
    /// finalizer ▶ instances carrying it.
    pub by_finalizer: BTreeMap<String, usize>,
}

/// Collects the failures of one deletion pass and turns them into conditions.
#[derive(Clone, Debug, Default)]
pub struct ConditionUpdater {
    new_conditions: Vec<NamespaceCondition>,
    delete_content_errors: Vec<String>,
}

fn failing(type_: &str, reason: &str, message: String, now: &Time) -> NamespaceCondition {
    NamespaceCondition {
        type_: type_.into(),
        status: "True".into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_transition_time: Some(now.clone()),
    }
}

impl ConditionUpdater {
    pub fn discovery_failed(&mut self, message: String, now: &Time) {
        self.new_conditions.push(failing(DISCOVERY_FAILURE, "DiscoveryFailed", message, now));
    }

    pub fn content_deletion_failed(&mut self, message: String) {
        self.delete_content_errors.push(message);
    }

    pub fn content_totals(&mut self, remaining: &Remaining, now: &Time) {
        let resources: Vec<String> = remaining
            .by_resource
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(r, n)| format!("{r} has {n} resource instances"))
            .collect();
        if !remaining.by_resource.is_empty() {
            self.new_conditions.push(failing(
                CONTENT_REMAINING,
                "SomeResourcesRemain",
                format!("Some resources are remaining: {}", sorted_join(resources)),
                now,
            ));
        }
        let finalizers: Vec<String> = remaining
            .by_finalizer
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(f, n)| format!("{f} in {n} resource instances"))
            .collect();
        if !remaining.by_finalizer.is_empty() {
            self.new_conditions.push(failing(
                FINALIZERS_REMAINING,
                "SomeFinalizersRemain",
                format!("Some content in the namespace has finalizers remaining: {}", sorted_join(finalizers)),
                now,
            ));
        }
    }

    /// Writes the conditions into `status`; returns whether anything changed.
    pub fn update(mut self, status: &mut NamespaceStatus, now: &Time) -> bool {
        if !self.new_conditions.iter().any(|c| c.type_ == CONTENT_FAILURE) && !self.delete_content_errors.is_empty() {
            let n = self.delete_content_errors.len();
            let mut msgs = std::mem::take(&mut self.delete_content_errors);
            msgs.sort();
            self.new_conditions.push(failing(
                CONTENT_FAILURE,
                "ContentDeletionFailed",
                format!("Failed to delete all resource types, {n} remaining: {}", msgs.join(", ")),
                now,
            ));
        }
        let conditions = status.conditions.get_or_insert_with(Vec::new);
        let mut changed = false;
        for type_ in TYPES {
            let new = self.new_conditions.iter().find(|c| c.type_ == type_).cloned().unwrap_or_else(|| {
                let (reason, message) = ok_reason_and_message(type_);
                NamespaceCondition {
                    type_: type_.into(),
                    status: "False".into(),
                    reason: Some(reason.into()),
                    message: Some(message.into()),
                    last_transition_time: Some(now.clone()),
                }
            });
            match conditions.iter_mut().find(|c| c.type_ == type_) {
                None => {
                    conditions.push(new);
                    changed = true;
                }
                Some(old) if old.status != new.status || old.message != new.message || old.reason != new.reason => {
                    if old.status != new.status {
                        old.last_transition_time = Some(now.clone());
                    }
                    old.status = new.status;
                    old.reason = new.reason;
                    old.message = new.message;
                    changed = true;
                }
                Some(_) => {}
            }
        }
        changed
    }
}

fn sorted_join(mut items: Vec<String>) -> String {
    items.sort();
    items.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Time {
        Time(jiff::Timestamp::from_second(secs).expect("timestamp"))
    }

    fn find<'a>(status: &'a NamespaceStatus, type_: &str) -> &'a NamespaceCondition {
        status.conditions.as_ref().and_then(|c| c.iter().find(|c| c.type_ == type_)).expect("condition")
    }

    #[test]
    fn a_clean_pass_writes_every_condition_false_with_ok_reasons() {
        let mut status = NamespaceStatus::default();
        assert!(ConditionUpdater::default().update(&mut status, &t(1)));
        assert_eq!(status.conditions.as_ref().map(Vec::len), Some(5));
        let c = find(&status, CONTENT_REMAINING);
        assert_eq!((c.status.as_str(), c.reason.as_deref()), ("False", Some("ContentRemoved")));
        // The same pass again changes nothing.
        assert!(!ConditionUpdater::default().update(&mut status, &t(2)));
    }

    #[test]
    fn remaining_content_and_finalizers_are_listed_sorted() {
        let mut u = ConditionUpdater::default();
        let remaining = Remaining {
            by_resource: [("pods.".to_string(), 2), ("configmaps.".to_string(), 1)].into(),
            by_finalizer: [("example.com/hold".to_string(), 3)].into(),
        };
        u.content_totals(&remaining, &t(1));
        let mut status = NamespaceStatus::default();
        u.update(&mut status, &t(1));
        let c = find(&status, CONTENT_REMAINING);
        assert_eq!(c.status, "True");
        assert_eq!(c.reason.as_deref(), Some("SomeResourcesRemain"));
        assert_eq!(
            c.message.as_deref(),
            Some("Some resources are remaining: configmaps. has 1 resource instances, pods. has 2 resource instances")
        );
        let f = find(&status, FINALIZERS_REMAINING);
        assert_eq!(
            f.message.as_deref(),
            Some("Some content in the namespace has finalizers remaining: example.com/hold in 3 resource instances")
        );
    }

    #[test]
    fn transition_time_moves_only_when_the_status_flips() {
        let mut status = NamespaceStatus::default();
        let mut u = ConditionUpdater::default();
        u.content_deletion_failed("b failed".into());
        u.content_deletion_failed("a failed".into());
        u.update(&mut status, &t(1));
        let c = find(&status, CONTENT_FAILURE);
        assert_eq!(c.message.as_deref(), Some("Failed to delete all resource types, 2 remaining: a failed, b failed"));
        assert_eq!(c.last_transition_time, Some(t(1)));

        let mut u = ConditionUpdater::default();
        u.content_deletion_failed("a failed".into());
        assert!(u.update(&mut status, &t(2)));
        assert_eq!(find(&status, CONTENT_FAILURE).last_transition_time, Some(t(1)), "still True: time kept");

        assert!(ConditionUpdater::default().update(&mut status, &t(3)));
        let c = find(&status, CONTENT_FAILURE);
        assert_eq!((c.status.as_str(), c.last_transition_time.clone()), ("False", Some(t(3))));
    }
}
