//! Bookkeeping between a reconcile and the caches it reads:
//!
//! - [`SliceTracker`] (upstream `EndpointSliceTracker`) remembers the resourceVersion of every
//!   slice this controller wrote and the slices it deleted, so that a reconcile never acts on a
//!   cache that has not caught up with its own writes (which would duplicate slices), and so
//!   that the watch events of its own writes do not trigger another reconcile.
//! - [`TriggerTimes`] (upstream `TriggerTimeTracker`) computes the
//!   `endpoints.kubernetes.io/last-change-trigger-time`: the earliest change (pod Ready
//!   transition, Service creation) not yet reflected, which the network-programming latency
//!   measurement starts from.

use crate::core::pod;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use std::collections::HashMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// Written at this resourceVersion.
    Version(u64),
    Deleted,
}

fn version(slice: &EndpointSlice) -> Option<u64> {
    slice.metadata.resource_version.as_deref().and_then(|v| v.parse().ok())
}

fn uid(slice: &EndpointSlice) -> String {
    slice.metadata.uid.clone().unwrap_or_default()
}

/// See the module documentation; keyed by service `namespace/name`.
#[derive(Debug, Default)]
pub struct SliceTracker {
    by_service: HashMap<String, HashMap<String, Expect>>,
}

impl SliceTracker {
    /// Records a slice this controller created or updated (as the API returned it).
    pub fn written(&mut self, service: &str, slice: &EndpointSlice) {
        if let Some(v) = version(slice) {
            self.by_service.entry(service.to_string()).or_default().insert(uid(slice), Expect::Version(v));
        }
    }

    /// Records a slice this controller deleted.
    pub fn deleted(&mut self, service: &str, slice: &EndpointSlice) {
        self.by_service.entry(service.to_string()).or_default().insert(uid(slice), Expect::Deleted);
    }

    /// The cache's slices of `service` lag behind this controller's writes.
    pub fn stale(&self, service: &str, cached: &[&EndpointSlice]) -> bool {
        let Some(expected) = self.by_service.get(service) else { return false };
        let mut seen = std::collections::HashSet::new();
        for s in cached {
            let u = uid(s);
            match expected.get(&u) {
                Some(Expect::Deleted) => return true,
                Some(Expect::Version(v)) if version(s).is_some_and(|c| c < *v) => return true,
                _ => {}
            }
            seen.insert(u);
        }
        expected.iter().any(|(u, e)| matches!(e, Expect::Version(_)) && !seen.contains(u))
    }

    /// A watch event for `slice`: whether it is news (not this controller's own write).
    pub fn should_sync(&self, service: &str, slice: &EndpointSlice) -> bool {
        match self.by_service.get(service).and_then(|m| m.get(&uid(slice))) {
            None => true,
            Some(Expect::Deleted) => false,
            Some(Expect::Version(v)) => version(slice).is_none_or(|c| c > *v),
        }
    }

    /// A slice was deleted: returns whether this controller expected it (no sync needed).
    pub fn handle_deletion(&mut self, service: &str, slice: &EndpointSlice) -> bool {
        let Some(m) = self.by_service.get_mut(service) else { return false };
        let expected = m.remove(&uid(slice)) == Some(Expect::Deleted);
        if m.is_empty() {
            self.by_service.remove(service);
        }
        expected
    }

    pub fn forget_service(&mut self, service: &str) {
        self.by_service.remove(service);
    }
}

#[derive(Debug, Default, Clone)]
struct ServiceState {
    pods: HashMap<String, Timestamp>,
    service: Option<Timestamp>,
}

/// See the module documentation; keyed by service `namespace/name`.
#[derive(Debug, Default)]
pub struct TriggerTimes {
    states: HashMap<String, ServiceState>,
}

fn pod_trigger(p: &Pod) -> Option<Timestamp> {
    pod::ready_condition(p).and_then(|c| c.last_transition_time.as_ref()).map(|t| t.0)
}

fn earliest(a: Option<Timestamp>, b: Timestamp) -> Option<Timestamp> {
    Some(a.map_or(b, |a| a.min(b)))
}

impl TriggerTimes {
    /// The trigger time for a sync of `service` over `pods` (and records their state).
    pub fn compute(&mut self, key: &str, service: &Service, pods: &[&Pod]) -> Option<Timestamp> {
        let known = self.states.get(key).cloned();
        let mut state = ServiceState::default();
        let mut min_changed: Option<Timestamp> = None;
        for p in pods {
            let Some(t) = pod_trigger(p) else { continue };
            let name = p.metadata.name.clone().unwrap_or_default();
            let before = known.as_ref().and_then(|k| k.pods.get(&name));
            if before.is_none_or(|b| t > *b) {
                min_changed = earliest(min_changed, t);
            }
            state.pods.insert(name, t);
        }
        let created = service.metadata.creation_timestamp.as_ref().map(|t| t.0);
        if let Some(t) = created {
            if known.as_ref().and_then(|k| k.service).is_none_or(|b| t > b) {
                min_changed = earliest(min_changed, t);
            }
        }
        state.service = created;
        self.states.insert(key.to_string(), state);
        if known.is_none() {
            return created;
        }
        min_changed
    }

    pub fn forget_service(&mut self, key: &str) {
        self.states.remove(key);
    }
}

/// RFC 3339 with nanoseconds, as upstream formats the annotation.
pub fn format_trigger(t: Timestamp) -> String {
    t.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    fn slice(uid: &str, rv: u64) -> EndpointSlice {
        EndpointSlice {
            metadata: ObjectMeta {
                uid: Some(uid.into()),
                resource_version: Some(rv.to_string()),
                ..Default::default()
            },
            address_type: "IPv4".into(),
            endpoints: Vec::new(),
            ports: None,
        }
    }

    #[test]
    fn a_cache_behind_our_own_writes_is_stale() {
        let mut t = SliceTracker::default();
        t.written("ns/web", &slice("a", 10));
        assert!(t.stale("ns/web", &[]), "created but not yet in the cache");
        assert!(t.stale("ns/web", &[&slice("a", 9)]));
        assert!(!t.stale("ns/web", &[&slice("a", 10)]));
        t.deleted("ns/web", &slice("a", 10));
        assert!(t.stale("ns/web", &[&slice("a", 10)]), "deleted but still cached");
        assert!(!t.stale("ns/web", &[]));
        assert!(!t.stale("ns/other", &[&slice("x", 1)]));
    }

    #[test]
    fn our_own_writes_do_not_trigger_a_sync_but_others_do() {
        let mut t = SliceTracker::default();
        t.written("ns/web", &slice("a", 10));
        assert!(!t.should_sync("ns/web", &slice("a", 10)));
        assert!(t.should_sync("ns/web", &slice("a", 11)));
        assert!(t.should_sync("ns/web", &slice("b", 3)));
        t.deleted("ns/web", &slice("a", 10));
        assert!(t.handle_deletion("ns/web", &slice("a", 10)));
        assert!(!t.handle_deletion("ns/web", &slice("c", 1)));
    }

    fn ts(s: i64) -> Timestamp {
        Timestamp::from_second(s).expect("ts")
    }

    fn pod(name: &str, ready_at: i64) -> Pod {
        Pod {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            status: Some(PodStatus {
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    last_transition_time: Some(Time(ts(ready_at))),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_trigger_is_the_service_creation_first_then_the_earliest_changed_pod() {
        let svc = Service {
            metadata: ObjectMeta { creation_timestamp: Some(Time(ts(100))), ..Default::default() },
            ..Default::default()
        };
        let mut t = TriggerTimes::default();
        assert_eq!(t.compute("ns/web", &svc, &[&pod("a", 150)]), Some(ts(100)));
        assert_eq!(t.compute("ns/web", &svc, &[&pod("a", 150)]), None, "nothing changed");
        assert_eq!(t.compute("ns/web", &svc, &[&pod("a", 170), &pod("b", 160)]), Some(ts(160)));
    }
}
