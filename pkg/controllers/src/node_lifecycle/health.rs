//! Node health as the controller observes it (upstream `nodelifecycle` `tryUpdateNodeHealth`):
//! a node is heard from when its Ready condition's heartbeat changes or its Lease in
//! `kube-node-lease` is renewed, timed by the controller's own clock; silent for longer than the
//! grace period, its Ready, MemoryPressure, DiskPressure and PIDPressure conditions become
//! `Unknown`.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The conditions set to Unknown when a node goes silent (NetworkUnavailable is left alone).
pub const MONITORED_CONDITIONS: [&str; 4] = ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"];

/// What the controller remembers of a node.
#[derive(Clone, Debug, PartialEq)]
pub struct Health {
    /// When the node was last heard from (controller clock).
    pub probe: Timestamp,
    /// When the controller last saw the Ready condition transition.
    pub ready_transition: Timestamp,
    /// The Ready condition last observed (heartbeat and transition times).
    pub ready: Option<(Option<Timestamp>, Option<Timestamp>)>,
    /// The lease renew time last observed.
    pub lease_renew: Option<Timestamp>,
}

pub fn condition<'a>(node: &'a Node, type_: &str) -> Option<&'a NodeCondition> {
    node.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == type_)
}

fn times(c: &NodeCondition) -> (Option<Timestamp>, Option<Timestamp>) {
    (c.last_heartbeat_time.as_ref().map(|t| t.0), c.last_transition_time.as_ref().map(|t| t.0))
}

fn created(node: &Node) -> Timestamp {
    node.metadata.creation_timestamp.as_ref().map(|t| t.0).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// Updates `saved` with what `node` and its lease say now. Returns the new health and the
/// grace period that applies: `startup` while the node never reported Ready, else `monitor`.
pub fn observe(
    saved: Option<&Health>,
    node: &Node,
    lease_renew: Option<Timestamp>,
    now: Timestamp,
    startup: SignedDuration,
    monitor: SignedDuration,
) -> (Health, SignedDuration) {
    let current = condition(node, "Ready").map(times);
    let (mut health, grace) = match (saved, current) {
        (None, None) => {
            let c = created(node);
            (Health { probe: c, ready_transition: c, ready: None, lease_renew: None }, startup)
        }
        (Some(h), None) => (Health { ready: None, ..h.clone() }, startup),
        (None, Some(cur)) => {
            (Health { probe: now, ready_transition: now, ready: Some(cur), lease_renew: None }, monitor)
        }
        (Some(h), Some(cur)) => match h.ready {
            // First Ready condition seen (or a controller restart with the node already there).
            None => {
                (Health { probe: now, ready_transition: now, ready: Some(cur), lease_renew: h.lease_renew }, monitor)
            }
            Some(prev) if prev.0 != cur.0 => {
                let transition = if prev.1 != cur.1 { now } else { h.ready_transition };
                (
                    Health { probe: now, ready_transition: transition, ready: Some(cur), lease_renew: h.lease_renew },
                    monitor,
                )
            }
            Some(_) => (h.clone(), monitor),
        },
    };
    if let Some(renew) = lease_renew {
        if health.lease_renew.is_none_or(|saved| saved < renew) {
            health.lease_renew = Some(renew);
            health.probe = now;
        }
    }
    (health, grace)
}

/// The node has been silent for longer than `grace`.
pub fn expired(h: &Health, grace: SignedDuration, now: Timestamp) -> bool {
    now > h.probe + grace
}

/// When `h` expires.
pub fn deadline(h: &Health, grace: SignedDuration) -> Timestamp {
    h.probe + grace
}

/// The node's conditions with the monitored ones set to Unknown (missing ones added as never
/// updated). Returns `None` when nothing changes.
pub fn unknown_conditions(node: &Node, now: Timestamp) -> Option<Vec<NodeCondition>> {
    let mut conditions = node.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    let before = conditions.clone();
    for type_ in MONITORED_CONDITIONS {
        match conditions.iter_mut().find(|c| c.type_ == type_) {
            None => conditions.push(NodeCondition {
                type_: type_.into(),
                status: "Unknown".into(),
                reason: Some("NodeStatusNeverUpdated".into()),
                message: Some("Kubelet never posted node status.".into()),
                last_heartbeat_time: node.metadata.creation_timestamp.clone(),
                last_transition_time: Some(Time(now)),
            }),
            Some(c) if c.status != "Unknown" => {
                c.status = "Unknown".into();
                c.reason = Some("NodeStatusUnknown".into());
                c.message = Some("Kubelet stopped posting node status.".into());
                c.last_transition_time = Some(Time(now));
            }
            Some(_) => {}
        }
    }
    let ready_changed = before.iter().find(|c| c.type_ == "Ready") != conditions.iter().find(|c| c.type_ == "Ready");
    ready_changed.then_some(conditions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NodeStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn ts(s: i64) -> Timestamp {
        Timestamp::from_second(1_000_000 + s).expect("ts")
    }
    const STARTUP: SignedDuration = SignedDuration::from_secs(60);
    const GRACE: SignedDuration = SignedDuration::from_secs(50);

    fn node(ready: Option<(&str, i64)>) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some("n".into()),
                creation_timestamp: Some(Time(ts(0))),
                ..Default::default()
            },
            status: Some(NodeStatus {
                conditions: ready.map(|(s, hb)| {
                    vec![NodeCondition {
                        type_: "Ready".into(),
                        status: s.into(),
                        last_heartbeat_time: Some(Time(ts(hb))),
                        last_transition_time: Some(Time(ts(0))),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_node_that_never_reported_gets_the_startup_grace_from_its_creation() {
        let (h, grace) = observe(None, &node(None), None, ts(10), STARTUP, GRACE);
        assert_eq!(grace, STARTUP);
        assert_eq!(h.probe, ts(0));
        assert!(!expired(&h, grace, ts(60)));
        assert!(expired(&h, grace, ts(61)));
    }

    #[test]
    fn a_renewed_lease_keeps_the_node_alive_without_status_updates() {
        let n = node(Some(("True", 5)));
        let (h, grace) = observe(None, &n, Some(ts(5)), ts(5), STARTUP, GRACE);
        assert_eq!(grace, GRACE);
        let (h, _) = observe(Some(&h), &n, Some(ts(45)), ts(45), STARTUP, GRACE);
        assert_eq!(h.probe, ts(45));
        assert!(!expired(&h, GRACE, ts(90)));
        // The same lease seen again is not a renewal.
        let (h, _) = observe(Some(&h), &n, Some(ts(45)), ts(100), STARTUP, GRACE);
        assert!(expired(&h, GRACE, ts(100)));
    }

    #[test]
    fn a_new_heartbeat_on_the_ready_condition_counts_as_heard_from() {
        let (h, _) = observe(None, &node(Some(("True", 5))), None, ts(5), STARTUP, GRACE);
        let (h2, _) = observe(Some(&h), &node(Some(("True", 30))), None, ts(31), STARTUP, GRACE);
        assert_eq!(h2.probe, ts(31));
        let (h3, _) = observe(Some(&h2), &node(Some(("True", 30))), None, ts(70), STARTUP, GRACE);
        assert_eq!(h3.probe, ts(31));
    }

    #[test]
    fn a_silent_node_gets_unknown_conditions_with_upstream_reasons() {
        let n = node(Some(("True", 5)));
        let conditions = unknown_conditions(&n, ts(100)).expect("changed");
        let ready = conditions.iter().find(|c| c.type_ == "Ready").expect("ready");
        assert_eq!(ready.status, "Unknown");
        assert_eq!(ready.reason.as_deref(), Some("NodeStatusUnknown"));
        assert_eq!(ready.message.as_deref(), Some("Kubelet stopped posting node status."));
        assert_eq!(ready.last_heartbeat_time, Some(Time(ts(5))), "heartbeat kept");
        let mem = conditions.iter().find(|c| c.type_ == "MemoryPressure").expect("added");
        assert_eq!(mem.reason.as_deref(), Some("NodeStatusNeverUpdated"));
        // Already unknown: nothing to write.
        let mut again = n.clone();
        again.status.as_mut().expect("status").conditions = Some(conditions);
        assert!(unknown_conditions(&again, ts(200)).is_none());
    }
}
