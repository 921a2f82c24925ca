//! Taint decisions (upstream `nodelifecycle`): the NoSchedule taints that mirror node
//! conditions and `spec.unschedulable`, the NoExecute `not-ready`/`unreachable` taint that
//! follows the Ready condition, zone disruption states that throttle or stop NoExecute
//! tainting, and the token bucket that rate-limits it.

use super::health::condition;
use crate::core::tolerations::{TAINT_NODE_NOT_READY, TAINT_NODE_UNREACHABLE};
use k8s_openapi::api::core::v1::{Node, NodeCondition, Taint};
use std::time::{Duration, Instant};

pub const TAINT_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
pub const TAINT_MEMORY_PRESSURE: &str = "node.kubernetes.io/memory-pressure";
pub const TAINT_DISK_PRESSURE: &str = "node.kubernetes.io/disk-pressure";
pub const TAINT_NETWORK_UNAVAILABLE: &str = "node.kubernetes.io/network-unavailable";
pub const TAINT_PID_PRESSURE: &str = "node.kubernetes.io/pid-pressure";
pub const LABEL_EXCLUDE_DISRUPTION: &str = "node.kubernetes.io/exclude-disruption";

/// The NoSchedule taint a condition in a status calls for.
fn condition_taint(c: &NodeCondition) -> Option<&'static str> {
    match (c.type_.as_str(), c.status.as_str()) {
        ("Ready", "False") => Some(TAINT_NODE_NOT_READY),
        ("Ready", "Unknown") => Some(TAINT_NODE_UNREACHABLE),
        ("MemoryPressure", "True") => Some(TAINT_MEMORY_PRESSURE),
        ("DiskPressure", "True") => Some(TAINT_DISK_PRESSURE),
        ("NetworkUnavailable", "True") => Some(TAINT_NETWORK_UNAVAILABLE),
        ("PIDPressure", "True") => Some(TAINT_PID_PRESSURE),
        _ => None,
    }
}

fn is_condition_taint_key(key: &str) -> bool {
    [
        TAINT_NODE_NOT_READY,
        TAINT_NODE_UNREACHABLE,
        TAINT_MEMORY_PRESSURE,
        TAINT_DISK_PRESSURE,
        TAINT_NETWORK_UNAVAILABLE,
        TAINT_PID_PRESSURE,
    ]
    .contains(&key)
}

pub fn taint(key: &str, effect: &str) -> Taint {
    Taint { key: key.into(), effect: effect.into(), ..Default::default() }
}

fn taints(node: &Node) -> &[Taint] {
    node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or(&[])
}

/// Same key and effect (values and times aside), as upstream's `MatchTaint`.
pub fn matches(a: &Taint, b: &Taint) -> bool {
    a.key == b.key && a.effect == b.effect
}

pub fn has_taint(node: &Node, t: &Taint) -> bool {
    taints(node).iter().any(|x| matches(x, t))
}

/// NoSchedule taints to add and remove so that they mirror the node's conditions and
/// `spec.unschedulable`.
pub fn no_schedule_diff(node: &Node) -> (Vec<Taint>, Vec<Taint>) {
    let mut want: Vec<Taint> = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .filter_map(condition_taint)
        .map(|k| taint(k, "NoSchedule"))
        .collect();
    if node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false) {
        want.push(taint(TAINT_UNSCHEDULABLE, "NoSchedule"));
    }
    let have: Vec<&Taint> = taints(node)
        .iter()
        .filter(|t| t.effect == "NoSchedule" && (t.key == TAINT_UNSCHEDULABLE || is_condition_taint_key(&t.key)))
        .collect();
    let add = want.iter().filter(|w| !have.iter().any(|h| matches(h, w))).cloned().collect();
    let remove = have.into_iter().filter(|h| !want.iter().any(|w| matches(w, h))).cloned().collect();
    (add, remove)
}

/// `spec.taints` after removing `remove` and adding `add` (stamped with `time_added`).
pub fn swap(
    current: &[Taint],
    add: &[Taint],
    remove: &[Taint],
    time_added: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
) -> Vec<Taint> {
    let mut out: Vec<Taint> = current.iter().filter(|t| !remove.iter().any(|r| matches(r, t))).cloned().collect();
    for a in add {
        if let Some(existing) = out.iter_mut().find(|t| matches(t, a)) {
            if existing.value != a.value {
                existing.value = a.value.clone();
            }
            continue;
        }
        let mut a = a.clone();
        a.time_added = Some(time_added.clone());
        out.push(a);
    }
    out
}

/// The NoExecute taint the Ready condition calls for and the one it excludes, or `None`
/// when the node is ready (both must go).
pub fn no_execute_for(node: &Node) -> Option<(Taint, Taint)> {
    match condition(node, "Ready").map(|c| c.status.as_str()) {
        Some("False") => Some((taint(TAINT_NODE_NOT_READY, "NoExecute"), taint(TAINT_NODE_UNREACHABLE, "NoExecute"))),
        Some("Unknown") => Some((taint(TAINT_NODE_UNREACHABLE, "NoExecute"), taint(TAINT_NODE_NOT_READY, "NoExecute"))),
        _ => None,
    }
}

/// The node's zone key: region and zone labels (`""` when unlabelled).
pub fn zone_key(node: &Node) -> String {
    let labels = node.metadata.labels.as_ref();
    let get =
        |k: &str, legacy: &str| labels.and_then(|l| l.get(k).or_else(|| l.get(legacy))).cloned().unwrap_or_default();
    let region = get("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region");
    let zone = get("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone");
    if region.is_empty() && zone.is_empty() {
        String::new()
    } else {
        format!("{region}:\u{0}:{zone}")
    }
}

pub fn excluded_from_disruption(node: &Node) -> bool {
    node.metadata.labels.as_ref().is_some_and(|l| l.contains_key(LABEL_EXCLUDE_DISRUPTION))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZoneState {
    Initial,
    Normal,
    FullDisruption,
    PartialDisruption,
}

/// A zone's state from its nodes' Ready conditions: no ready node at all is a full disruption;
/// more than two not-ready nodes making at least `threshold` of the zone is a partial one.
pub fn zone_state(ready: &[Option<&str>], threshold: f32) -> (usize, ZoneState) {
    let ready_nodes = ready.iter().filter(|s| **s == Some("True")).count();
    let not_ready = ready.len() - ready_nodes;
    let state = if ready_nodes == 0 && not_ready > 0 {
        ZoneState::FullDisruption
    } else if not_ready > 2 && not_ready as f32 / ready.len() as f32 >= threshold {
        ZoneState::PartialDisruption
    } else {
        ZoneState::Normal
    };
    (not_ready, state)
}

/// A token bucket (`qps` tokens per second, at most `burst`); `qps == 0` never admits.
#[derive(Clone, Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    pub fn new(qps: f64, burst: u32, now: Instant) -> TokenBucket {
        TokenBucket { qps, burst: burst as f64, tokens: burst as f64, last: now }
    }

    /// Changes the rate, starting full again (upstream's `SwapLimiter`).
    pub fn set_qps(&mut self, qps: f64, now: Instant) {
        if qps != self.qps {
            *self = TokenBucket::new(qps, self.burst as u32, now);
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        self.last = now;
    }

    pub fn try_take(&mut self, now: Instant) -> bool {
        if self.qps <= 0.0 {
            return false;
        }
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// How long until a token is available (`None`: never).
    pub fn wait(&mut self, now: Instant) -> Option<Duration> {
        if self.qps <= 0.0 {
            return None;
        }
        self.refill(now);
        Some(Duration::from_secs_f64(((1.0 - self.tokens) / self.qps).max(0.0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeSpec, NodeStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn node(conditions: &[(&str, &str)], unschedulable: bool, taints: Vec<Taint>) -> Node {
        Node {
            spec: Some(NodeSpec { unschedulable: Some(unschedulable), taints: Some(taints), ..Default::default() }),
            status: Some(NodeStatus {
                conditions: Some(
                    conditions
                        .iter()
                        .map(|(t, s)| NodeCondition {
                            type_: t.to_string(),
                            status: s.to_string(),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn an_unknown_ready_condition_calls_for_the_unreachable_noschedule_taint() {
        let (add, remove) = no_schedule_diff(&node(&[("Ready", "Unknown")], false, vec![]));
        assert_eq!(add, vec![taint(TAINT_NODE_UNREACHABLE, "NoSchedule")]);
        assert!(remove.is_empty());
    }

    #[test]
    fn a_ready_node_loses_condition_taints_but_keeps_foreign_ones() {
        let n = node(
            &[("Ready", "True")],
            false,
            vec![taint(TAINT_NODE_UNREACHABLE, "NoSchedule"), taint("example.com/dedicated", "NoSchedule")],
        );
        let (add, remove) = no_schedule_diff(&n);
        assert!(add.is_empty());
        assert_eq!(remove, vec![taint(TAINT_NODE_UNREACHABLE, "NoSchedule")]);
    }

    #[test]
    fn cordoned_and_pressured_nodes_get_their_taints() {
        let (add, _) = no_schedule_diff(&node(&[("Ready", "True"), ("DiskPressure", "True")], true, vec![]));
        assert_eq!(add, vec![taint(TAINT_DISK_PRESSURE, "NoSchedule"), taint(TAINT_UNSCHEDULABLE, "NoSchedule")]);
    }

    #[test]
    fn swapping_stamps_added_taints_and_keeps_the_rest() {
        let t = Time(jiff::Timestamp::UNIX_EPOCH);
        let current = vec![taint(TAINT_NODE_NOT_READY, "NoExecute"), taint("x", "NoSchedule")];
        let out = swap(
            &current,
            &[taint(TAINT_NODE_UNREACHABLE, "NoExecute")],
            &[taint(TAINT_NODE_NOT_READY, "NoExecute")],
            &t,
        );
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].key, "x");
        assert_eq!(out[1].key, TAINT_NODE_UNREACHABLE);
        assert_eq!(out[1].time_added, Some(t));
    }

    #[test]
    fn no_execute_follows_the_ready_condition() {
        let (add, opposite) = no_execute_for(&node(&[("Ready", "Unknown")], false, vec![])).expect("tainted");
        assert_eq!((add.key.as_str(), opposite.key.as_str()), (TAINT_NODE_UNREACHABLE, TAINT_NODE_NOT_READY));
        assert!(no_execute_for(&node(&[("Ready", "True")], false, vec![])).is_none());
    }

    #[test]
    fn zone_states_follow_the_share_of_not_ready_nodes() {
        assert_eq!(zone_state(&[Some("Unknown")], 0.55), (1, ZoneState::FullDisruption));
        assert_eq!(zone_state(&[Some("True"), Some("Unknown")], 0.55), (1, ZoneState::Normal));
        let mostly_down = [Some("True"), None, Some("False"), Some("Unknown")];
        assert_eq!(zone_state(&mostly_down, 0.55), (3, ZoneState::PartialDisruption));
        assert_eq!(zone_state(&[], 0.55), (0, ZoneState::Normal));
    }

    #[test]
    fn the_token_bucket_admits_its_burst_then_its_rate() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(0.1, 1, t0);
        assert!(b.try_take(t0));
        assert!(!b.try_take(t0 + Duration::from_secs(5)));
        assert!(b.try_take(t0 + Duration::from_secs(10)));
        b.set_qps(0.0, t0);
        assert!(!b.try_take(t0 + Duration::from_secs(100)));
        assert_eq!(b.wait(t0), None);
    }
}
