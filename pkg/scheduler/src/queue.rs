//! The scheduling queue, after upstream's: an active queue ordered by priority (then arrival),
//! a back-off queue (1 s doubling to 10 s per attempt), and the unschedulable pods, which a
//! cluster event moves back when it may help one of the plugins that rejected them (or after
//! five minutes regardless). A pod being scheduled or bound is "in flight"; events during its
//! flight send it to back-off rather than to the unschedulable pods, so none is missed.
//!
//! Time is passed in, so the queue is plain data.

use crate::cache::ClusterEvent;
use crate::filters::Plugin;
use crate::node_info::PodInfo;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const INITIAL_BACKOFF: Duration = Duration::from_secs(1);
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// Unschedulable pods are retried at least this often.
pub const MAX_UNSCHEDULABLE: Duration = Duration::from_secs(300);

/// Where a queued pod is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    Active,
    /// Waiting out its back-off; `error` ones (API or internal failures) are never popped early.
    Backoff {
        until: Instant,
        error: bool,
    },
    Unschedulable {
        since: Instant,
    },
    InFlight {
        cycle: u64,
    },
}

#[derive(Debug)]
struct Entry {
    pod: Arc<PodInfo>,
    place: Place,
    attempts: u32,
    last_attempt: Option<Instant>,
    /// Arrival order among pods of equal priority.
    seq: u64,
    /// Plugins that rejected the pod in its last attempt.
    plugins: BTreeSet<Plugin>,
    updated_in_flight: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct ActiveKey {
    neg_priority: i64,
    seq: u64,
    uid: String,
}

/// See the module documentation.
#[derive(Debug, Default)]
pub struct SchedulingQueue {
    entries: HashMap<String, Entry>,
    active: BTreeSet<ActiveKey>,
    backoff: BTreeSet<(Instant, String)>,
    cycle: u64,
    move_request_cycle: u64,
    seq: u64,
}

fn backoff_for(attempts: u32) -> Duration {
    let exp = attempts.saturating_sub(1).min(10);
    INITIAL_BACKOFF.saturating_mul(1 << exp).min(MAX_BACKOFF)
}

/// Whether an update could change a scheduling decision (not just status or bookkeeping).
fn meaningful_update(old: &PodInfo, new: &PodInfo) -> bool {
    old.pod.spec != new.pod.spec
        || old.pod.metadata.labels != new.pod.metadata.labels
        || old.pod.metadata.annotations != new.pod.metadata.annotations
        || old.priority != new.priority
}

/// Whether `event` may make a pod rejected by `plugins` schedulable (upstream's queueing hints,
/// coarsely).
pub fn event_may_help(event: ClusterEvent, plugins: &BTreeSet<Plugin>) -> bool {
    if plugins.is_empty() {
        return true;
    }
    plugins.iter().any(|p| match (p, event) {
        (_, ClusterEvent::NodeAdd) => true,
        (Plugin::NodeResourcesFit, ClusterEvent::NodeUpdate(c)) => c.allocatable,
        (Plugin::NodeResourcesFit | Plugin::NodePorts, ClusterEvent::AssignedPodDelete) => true,
        (Plugin::NodeResourcesFit, ClusterEvent::AssignedPodUpdate) => true,
        (Plugin::NodeUnschedulable | Plugin::TaintToleration, ClusterEvent::NodeUpdate(c)) => c.taints,
        (Plugin::NodeAffinity | Plugin::InterPodAffinity, ClusterEvent::NodeUpdate(c)) => c.labels,
        (Plugin::VolumeBinding, ClusterEvent::StorageChange) => true,
        (Plugin::VolumeBinding, ClusterEvent::NodeUpdate(c)) => c.labels || c.taints,
        (Plugin::InterPodAffinity, ClusterEvent::AssignedPodAdd)
        | (Plugin::InterPodAffinity, ClusterEvent::AssignedPodUpdate)
        | (Plugin::InterPodAffinity, ClusterEvent::AssignedPodDelete) => true,
        _ => false,
    })
}

impl SchedulingQueue {
    fn key(e: &Entry) -> ActiveKey {
        ActiveKey { neg_priority: -i64::from(e.pod.priority), seq: e.seq, uid: e.pod.uid.clone() }
    }

    /// Takes `uid` out of whichever ordered set holds it.
    fn unlink(&mut self, uid: &str) {
        let Some(e) = self.entries.get(uid) else { return };
        match e.place {
            Place::Active => {
                let k = Self::key(e);
                self.active.remove(&k);
            }
            Place::Backoff { until, .. } => {
                self.backoff.remove(&(until, uid.to_string()));
            }
            Place::Unschedulable { .. } | Place::InFlight { .. } => {}
        }
    }

    fn put(&mut self, uid: &str, place: Place) {
        self.unlink(uid);
        let Some(e) = self.entries.get_mut(uid) else { return };
        e.place = place;
        match place {
            Place::Active => {
                let k = Self::key(e);
                self.active.insert(k);
            }
            Place::Backoff { until, .. } => {
                self.backoff.insert((until, uid.to_string()));
            }
            Place::Unschedulable { .. } | Place::InFlight { .. } => {}
        }
    }

    /// Back to active, or to back-off while the pod's back-off lasts.
    fn reactivate(&mut self, uid: &str, now: Instant) {
        let Some(e) = self.entries.get(uid) else { return };
        let until = e.last_attempt.map(|t| t + backoff_for(e.attempts));
        match until {
            Some(until) if until > now => self.put(uid, Place::Backoff { until, error: false }),
            _ => self.put(uid, Place::Active),
        }
    }

    /// A pending pod appeared or changed.
    pub fn add(&mut self, pod: Arc<PodInfo>, now: Instant) {
        let uid = pod.uid.clone();
        let Some(e) = self.entries.get_mut(&uid) else {
            self.seq += 1;
            let entry = Entry {
                pod,
                place: Place::Active,
                attempts: 0,
                last_attempt: None,
                seq: self.seq,
                plugins: BTreeSet::new(),
                updated_in_flight: false,
            };
            self.entries.insert(uid.clone(), entry);
            self.put(&uid, Place::Active);
            return;
        };
        let meaningful = meaningful_update(&e.pod, &pod);
        let place = e.place;
        if place == Place::Active && e.pod.priority != pod.priority {
            self.unlink(&uid);
            if let Some(e) = self.entries.get_mut(&uid) {
                e.pod = pod;
            }
            self.put(&uid, Place::Active);
            return;
        }
        e.pod = pod;
        match place {
            Place::InFlight { .. } => e.updated_in_flight |= meaningful,
            Place::Unschedulable { .. } if meaningful => self.reactivate(&uid, now),
            _ => {}
        }
    }

    /// The pod is gone, bound by someone, or no longer ours.
    pub fn delete(&mut self, uid: &str) {
        self.unlink(uid);
        self.entries.remove(uid);
    }

    /// Drops queued pods not in `seen` (after a re-list); in-flight ones finish on their own.
    pub fn retain(&mut self, seen: &HashSet<String>) {
        let gone: Vec<String> = self
            .entries
            .iter()
            .filter(|(uid, e)| !seen.contains(*uid) && !matches!(e.place, Place::InFlight { .. }))
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in gone {
            self.delete(&uid);
        }
    }

    /// Moves pods whose back-off or unschedulable timeout is over.
    pub fn flush(&mut self, now: Instant) {
        let due: Vec<String> = self.backoff.iter().take_while(|(t, _)| *t <= now).map(|(_, u)| u.clone()).collect();
        for uid in due {
            self.put(&uid, Place::Active);
        }
        let stale: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, e)| matches!(e.place, Place::Unschedulable { since } if since + MAX_UNSCHEDULABLE <= now))
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in stale {
            self.reactivate(&uid, now);
        }
    }

    /// The next pod to schedule: the highest-priority active one, else (upstream's
    /// PopFromBackoffQ) the first one backing off after an event.
    pub fn pop(&mut self, now: Instant) -> Option<Arc<PodInfo>> {
        self.flush(now);
        let uid = match self.active.first() {
            Some(k) => k.uid.clone(),
            None => self
                .backoff
                .iter()
                .find(|(_, uid)| {
                    self.entries.get(uid).is_some_and(|e| matches!(e.place, Place::Backoff { error: false, .. }))
                })
                .map(|(_, uid)| uid.clone())?,
        };
        self.cycle += 1;
        let cycle = self.cycle;
        self.put(&uid, Place::InFlight { cycle });
        let e = self.entries.get_mut(&uid)?;
        e.attempts += 1;
        e.last_attempt = Some(now);
        e.updated_in_flight = false;
        Some(e.pod.clone())
    }

    /// The attempt found no node: wait for an event one of `plugins` cares about.
    pub fn requeue_unschedulable(&mut self, uid: &str, plugins: BTreeSet<Plugin>, now: Instant) {
        let Some(e) = self.entries.get_mut(uid) else { return };
        let Place::InFlight { cycle } = e.place else { return };
        e.plugins = plugins;
        if self.move_request_cycle >= cycle || e.updated_in_flight {
            self.reactivate(uid, now);
        } else {
            self.put(uid, Place::Unschedulable { since: now });
        }
    }

    /// The attempt failed for another reason (API error, no nodes): retry after back-off.
    pub fn requeue_error(&mut self, uid: &str, now: Instant) {
        let Some(e) = self.entries.get(uid) else { return };
        if !matches!(e.place, Place::InFlight { .. }) {
            return;
        }
        let until = e.last_attempt.unwrap_or(now) + backoff_for(e.attempts);
        self.put(uid, Place::Backoff { until: until.max(now), error: true });
    }

    /// The pod is bound.
    pub fn done(&mut self, uid: &str) {
        if self.entries.get(uid).is_some_and(|e| matches!(e.place, Place::InFlight { .. })) {
            self.delete(uid);
        }
    }

    /// A cluster event: unschedulable pods it may help move on.
    pub fn on_event(&mut self, event: ClusterEvent, now: Instant) {
        self.move_request_cycle = self.cycle;
        let helped: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, e)| matches!(e.place, Place::Unschedulable { .. }) && event_may_help(event, &e.plugins))
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in helped {
            self.reactivate(&uid, now);
        }
    }

    /// When the next back-off or unschedulable timeout falls due.
    pub fn next_wakeup(&self) -> Option<Instant> {
        let backoff = self.backoff.first().map(|(t, _)| *t);
        let unsched = self
            .entries
            .values()
            .filter_map(|e| match e.place {
                Place::Unschedulable { since } => Some(since + MAX_UNSCHEDULABLE),
                _ => None,
            })
            .min();
        backoff.into_iter().chain(unsched).min()
    }

    pub fn place_of(&self, uid: &str) -> Option<Place> {
        self.entries.get(uid).map(|e| e.place)
    }

    /// Every queued pod.
    pub fn pods(&self) -> Vec<Arc<PodInfo>> {
        self.entries.values().map(|e| e.pod.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::NodeChanges;
    use crate::testing::pod;

    fn info(name: &str, priority: i32) -> Arc<PodInfo> {
        Arc::new(PodInfo::new(pod(name).build(), priority))
    }

    fn uid(name: &str) -> String {
        format!("{name}-uid")
    }

    #[test]
    fn pops_by_priority_then_arrival() {
        let mut q = SchedulingQueue::default();
        let now = Instant::now();
        q.add(info("a", 0), now);
        q.add(info("b", 10), now);
        q.add(info("c", 0), now);
        let order: Vec<String> = std::iter::from_fn(|| q.pop(now)).map(|p| p.name.clone()).collect();
        assert_eq!(order, vec!["b", "a", "c"]);
    }

    #[test]
    fn unschedulable_pods_wait_for_an_event_that_may_help() {
        let mut q = SchedulingQueue::default();
        let t0 = Instant::now();
        q.add(info("p", 0), t0);
        q.pop(t0);
        q.requeue_unschedulable(&uid("p"), BTreeSet::from([Plugin::NodeResourcesFit]), t0);
        assert!(matches!(q.place_of(&uid("p")), Some(Place::Unschedulable { .. })));
        // A new pod elsewhere does not help a pod short of CPU.
        q.on_event(ClusterEvent::AssignedPodAdd, t0);
        assert!(matches!(q.place_of(&uid("p")), Some(Place::Unschedulable { .. })));
        q.on_event(ClusterEvent::NodeUpdate(NodeChanges { labels: true, ..Default::default() }), t0);
        assert!(matches!(q.place_of(&uid("p")), Some(Place::Unschedulable { .. })));
        // A bigger node does; within its back-off the pod goes to back-off first.
        q.on_event(ClusterEvent::NodeAdd, t0);
        assert!(matches!(q.place_of(&uid("p")), Some(Place::Backoff { error: false, .. })));
        // With nothing active, it is popped without waiting out the back-off.
        assert_eq!(q.pop(t0).map(|p| p.name.clone()), Some("p".to_string()));
    }

    #[test]
    fn an_event_during_the_attempt_sends_the_pod_to_backoff() {
        let mut q = SchedulingQueue::default();
        let t0 = Instant::now();
        q.add(info("p", 0), t0);
        q.pop(t0);
        q.on_event(ClusterEvent::AssignedPodDelete, t0);
        q.requeue_unschedulable(&uid("p"), BTreeSet::from([Plugin::NodeAffinity]), t0);
        assert!(matches!(q.place_of(&uid("p")), Some(Place::Backoff { .. })));
    }

    #[test]
    fn backoff_doubles_up_to_ten_seconds() {
        assert_eq!(backoff_for(1), Duration::from_secs(1));
        assert_eq!(backoff_for(2), Duration::from_secs(2));
        assert_eq!(backoff_for(4), Duration::from_secs(8));
        assert_eq!(backoff_for(5), MAX_BACKOFF);
        assert_eq!(backoff_for(50), MAX_BACKOFF);
    }

    #[test]
    fn error_backoff_is_waited_out() {
        let mut q = SchedulingQueue::default();
        let t0 = Instant::now();
        q.add(info("p", 0), t0);
        q.pop(t0);
        q.requeue_error(&uid("p"), t0);
        assert!(q.pop(t0).is_none());
        assert_eq!(q.next_wakeup(), Some(t0 + INITIAL_BACKOFF));
        assert!(q.pop(t0 + INITIAL_BACKOFF).is_some());
    }

    #[test]
    fn unschedulable_pods_are_retried_after_five_minutes() {
        let mut q = SchedulingQueue::default();
        let t0 = Instant::now();
        q.add(info("p", 0), t0);
        q.pop(t0);
        q.requeue_unschedulable(&uid("p"), BTreeSet::from([Plugin::NodeName]), t0);
        assert!(q.pop(t0 + Duration::from_secs(60)).is_none());
        assert_eq!(q.next_wakeup(), Some(t0 + MAX_UNSCHEDULABLE));
        assert!(q.pop(t0 + MAX_UNSCHEDULABLE).is_some());
    }

    #[test]
    fn spec_updates_wake_unschedulable_pods_but_status_updates_do_not() {
        let mut q = SchedulingQueue::default();
        let t0 = Instant::now();
        q.add(info("p", 0), t0);
        q.pop(t0);
        q.requeue_unschedulable(&uid("p"), BTreeSet::from([Plugin::TaintToleration]), t0);
        let mut status_only = pod("p").build();
        status_only.status.get_or_insert_with(Default::default).message = Some("x".into());
        q.add(Arc::new(PodInfo::new(status_only, 0)), t0);
        assert!(matches!(q.place_of(&uid("p")), Some(Place::Unschedulable { .. })));
        let tolerating = pod("p").toleration("k", "Exists", "", "").build();
        q.add(Arc::new(PodInfo::new(tolerating, 0)), t0 + Duration::from_secs(5));
        assert_eq!(q.place_of(&uid("p")), Some(Place::Active));
    }

    #[test]
    fn bound_and_deleted_pods_leave_the_queue() {
        let mut q = SchedulingQueue::default();
        let t0 = Instant::now();
        q.add(info("p", 0), t0);
        q.add(info("gone", 0), t0);
        q.pop(t0);
        q.done(&uid("p"));
        q.delete(&uid("gone"));
        assert!(q.pods().is_empty());
        // A late requeue of a pod deleted mid-flight is ignored.
        q.requeue_error(&uid("p"), t0);
        assert!(q.place_of(&uid("p")).is_none());
    }
}
