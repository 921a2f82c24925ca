//! What the scheduler knows about each pod and node, pre-digested once per object version:
//! a pod's priority, requests and host ports; a node's allocatable, effective taints and the
//! running totals of the pods bound (or assumed) to it.

use crate::matching::{labels_of, Labels};
use crate::resources::{pod_non_zero_requests, pod_requests, Resource};
use k8s_openapi::api::core::v1::{Node, Pod, PodAffinityTerm, PodSpec, Taint, Toleration, WeightedPodAffinityTerm};
use std::sync::{Arc, LazyLock};

static EMPTY_SPEC: LazyLock<PodSpec> = LazyLock::new(PodSpec::default);

/// Taint a node whose Ready condition is False carries (set by upstream's node lifecycle
/// controller; the scheduler applies it itself so a not-ready node never takes pods).
pub const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";
/// Taint for a node whose Ready condition is Unknown.
pub const UNREACHABLE_TAINT: &str = "node.kubernetes.io/unreachable";
/// Taint upstream tolerations use for `spec.unschedulable`.
pub const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// A host port a pod claims: (IP, protocol, port); IP `0.0.0.0` means every address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostPort {
    pub ip: String,
    pub protocol: String,
    pub port: i32,
}

impl HostPort {
    pub fn conflicts(&self, other: &HostPort) -> bool {
        self.port == other.port
            && self.protocol == other.protocol
            && (self.ip == other.ip || self.ip == "0.0.0.0" || other.ip == "0.0.0.0")
    }
}

/// A pod with what scheduling needs from it computed once.
#[derive(Debug)]
pub struct PodInfo {
    pub pod: Pod,
    pub uid: String,
    pub namespace: String,
    pub name: String,
    /// `spec.priority`, or resolved from the priority class when the API left it unset.
    pub priority: i32,
    pub requests: Resource,
    pub non_zero_requests: Resource,
    pub host_ports: Vec<HostPort>,
}

fn host_ports(spec: &PodSpec) -> Vec<HostPort> {
    let sidecars = spec.init_containers.iter().flatten().filter(|c| c.restart_policy.as_deref() == Some("Always"));
    spec.containers
        .iter()
        .chain(sidecars)
        .flat_map(|c| c.ports.iter().flatten())
        .filter(|p| p.host_port.is_some_and(|h| h > 0))
        .map(|p| HostPort {
            ip: p.host_ip.clone().filter(|ip| !ip.is_empty()).unwrap_or_else(|| "0.0.0.0".into()),
            protocol: p.protocol.clone().filter(|p| !p.is_empty()).unwrap_or_else(|| "TCP".into()),
            port: p.host_port.unwrap_or_default(),
        })
        .collect()
}

impl PodInfo {
    pub fn new(pod: Pod, priority: i32) -> PodInfo {
        let spec = pod.spec.as_ref().unwrap_or(&EMPTY_SPEC);
        PodInfo {
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            priority,
            requests: pod_requests(spec),
            non_zero_requests: pod_non_zero_requests(spec),
            host_ports: host_ports(spec),
            pod,
        }
    }

    pub fn spec(&self) -> &PodSpec {
        self.pod.spec.as_ref().unwrap_or(&EMPTY_SPEC)
    }

    pub fn labels(&self) -> &Labels {
        labels_of(self.pod.metadata.labels.as_ref())
    }

    pub fn node_name(&self) -> Option<&str> {
        self.spec().node_name.as_deref().filter(|n| !n.is_empty())
    }

    pub fn nominated_node(&self) -> Option<&str> {
        self.pod.status.as_ref().and_then(|s| s.nominated_node_name.as_deref()).filter(|n| !n.is_empty())
    }

    pub fn is_terminating(&self) -> bool {
        self.pod.metadata.deletion_timestamp.is_some()
    }

    /// `status.startTime`; pods not started yet count as started now (upstream's `GetPodStartTime`).
    pub fn start_time(&self) -> jiff::Timestamp {
        self.pod.status.as_ref().and_then(|s| s.start_time.as_ref()).map(|t| t.0).unwrap_or_else(jiff::Timestamp::now)
    }

    pub fn tolerations(&self) -> &[Toleration] {
        self.spec().tolerations.as_deref().unwrap_or_default()
    }

    pub fn preempt_never(&self) -> bool {
        self.spec().preemption_policy.as_deref() == Some("Never")
    }

    pub fn required_affinity(&self) -> &[PodAffinityTerm] {
        let a = self.spec().affinity.as_ref().and_then(|a| a.pod_affinity.as_ref());
        a.and_then(|a| a.required_during_scheduling_ignored_during_execution.as_deref()).unwrap_or_default()
    }

    pub fn required_anti_affinity(&self) -> &[PodAffinityTerm] {
        let a = self.spec().affinity.as_ref().and_then(|a| a.pod_anti_affinity.as_ref());
        a.and_then(|a| a.required_during_scheduling_ignored_during_execution.as_deref()).unwrap_or_default()
    }

    pub fn preferred_affinity(&self) -> &[WeightedPodAffinityTerm] {
        let a = self.spec().affinity.as_ref().and_then(|a| a.pod_affinity.as_ref());
        a.and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_deref()).unwrap_or_default()
    }

    pub fn preferred_anti_affinity(&self) -> &[WeightedPodAffinityTerm] {
        let a = self.spec().affinity.as_ref().and_then(|a| a.pod_anti_affinity.as_ref());
        a.and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_deref()).unwrap_or_default()
    }

    /// Has any pod (anti-)affinity term, required or preferred.
    pub fn has_pod_affinity(&self) -> bool {
        !self.required_affinity().is_empty()
            || !self.required_anti_affinity().is_empty()
            || !self.preferred_affinity().is_empty()
            || !self.preferred_anti_affinity().is_empty()
    }
}

/// The taint a node's Ready condition implies, unless the node already carries it.
fn readiness_taint(node: &Node) -> Option<Taint> {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status.as_str());
    let key = match ready {
        Some("True") => return None,
        Some("False") | None => NOT_READY_TAINT,
        Some(_) => UNREACHABLE_TAINT,
    };
    let has = node.spec.as_ref().and_then(|s| s.taints.as_ref()).is_some_and(|ts| ts.iter().any(|t| t.key == key));
    (!has).then(|| Taint { key: key.into(), value: None, effect: "NoSchedule".into(), time_added: None })
}

/// A node with the pods on it (bound, assumed, or terminating) and their totals.
#[derive(Clone, Debug, Default)]
pub struct NodeInfo {
    pub name: String,
    /// None while pods name a node the scheduler has not seen (yet).
    pub node: Option<Arc<Node>>,
    pub allocatable: Resource,
    /// `spec.taints` plus the one the Ready condition implies.
    pub taints: Vec<Taint>,
    pub pods: Vec<Arc<PodInfo>>,
    pub requested: Resource,
    pub non_zero_requested: Resource,
    pub used_ports: Vec<HostPort>,
    /// Pods with pod affinity or anti-affinity of any kind.
    pub pods_with_affinity: usize,
    pub pods_with_required_anti_affinity: usize,
}

impl NodeInfo {
    pub fn new(name: &str) -> NodeInfo {
        NodeInfo { name: name.to_string(), ..Default::default() }
    }

    pub fn set_node(&mut self, node: Arc<Node>) {
        self.allocatable = node
            .status
            .as_ref()
            .and_then(|s| s.allocatable.as_ref().or(s.capacity.as_ref()))
            .map(Resource::from_list)
            .unwrap_or_default();
        let mut taints = node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
        taints.extend(readiness_taint(&node));
        self.taints = taints;
        self.node = Some(node);
    }

    pub fn labels(&self) -> &Labels {
        labels_of(self.node.as_ref().and_then(|n| n.metadata.labels.as_ref()))
    }

    pub fn unschedulable(&self) -> bool {
        self.node.as_ref().and_then(|n| n.spec.as_ref()).and_then(|s| s.unschedulable).unwrap_or(false)
    }

    pub fn add_pod(&mut self, pod: Arc<PodInfo>) {
        self.requested.add(&pod.requests);
        self.non_zero_requested.add(&pod.non_zero_requests);
        self.used_ports.extend(pod.host_ports.iter().cloned());
        if pod.has_pod_affinity() {
            self.pods_with_affinity += 1;
        }
        if !pod.required_anti_affinity().is_empty() {
            self.pods_with_required_anti_affinity += 1;
        }
        self.pods.push(pod);
    }

    pub fn remove_pod(&mut self, uid: &str) -> Option<Arc<PodInfo>> {
        let idx = self.pods.iter().position(|p| p.uid == uid)?;
        let pod = self.pods.remove(idx);
        self.requested.sub(&pod.requests);
        self.non_zero_requested.sub(&pod.non_zero_requests);
        for hp in &pod.host_ports {
            if let Some(i) = self.used_ports.iter().position(|u| u == hp) {
                self.used_ports.remove(i);
            }
        }
        if pod.has_pod_affinity() {
            self.pods_with_affinity -= 1;
        }
        if !pod.required_anti_affinity().is_empty() {
            self.pods_with_required_anti_affinity -= 1;
        }
        Some(pod)
    }

    pub fn ports_conflict(&self, wanted: &[HostPort]) -> bool {
        wanted.iter().any(|w| self.used_ports.iter().any(|u| u.conflicts(w)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, ContainerPort, NodeCondition, NodeSpec, NodeStatus};

    fn pod_with_port(uid: &str, port: i32, ip: Option<&str>) -> Arc<PodInfo> {
        let mut p = Pod::default();
        p.metadata.uid = Some(uid.into());
        p.spec = Some(PodSpec {
            containers: vec![Container {
                name: "c".into(),
                ports: Some(vec![ContainerPort {
                    container_port: 80,
                    host_port: Some(port),
                    host_ip: ip.map(Into::into),
                    ..Default::default()
                }]),
                ..Default::default()
            }],
            ..Default::default()
        });
        Arc::new(PodInfo::new(p, 0))
    }

    #[test]
    fn host_ports_conflict_on_same_port_and_protocol_with_wildcard_ip() {
        let mut ni = NodeInfo::new("n");
        ni.add_pod(pod_with_port("a", 8080, Some("10.0.0.1")));
        let same_ip = HostPort { ip: "10.0.0.1".into(), protocol: "TCP".into(), port: 8080 };
        let other_ip = HostPort { ip: "10.0.0.2".into(), protocol: "TCP".into(), port: 8080 };
        let wildcard = HostPort { ip: "0.0.0.0".into(), protocol: "TCP".into(), port: 8080 };
        let udp = HostPort { ip: "0.0.0.0".into(), protocol: "UDP".into(), port: 8080 };
        assert!(ni.ports_conflict(&[same_ip]));
        assert!(!ni.ports_conflict(std::slice::from_ref(&other_ip)));
        assert!(ni.ports_conflict(&[wildcard]));
        assert!(!ni.ports_conflict(&[udp]));
        ni.remove_pod("a");
        assert!(ni.used_ports.is_empty());
        assert!(!ni.ports_conflict(&[other_ip]));
    }

    #[test]
    fn readiness_condition_adds_the_matching_taint_once() {
        let node = |status: Option<&str>, taints: Vec<Taint>| Node {
            spec: Some(NodeSpec { taints: Some(taints), ..Default::default() }),
            status: Some(NodeStatus {
                conditions: status
                    .map(|s| vec![NodeCondition { type_: "Ready".into(), status: s.into(), ..Default::default() }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(readiness_taint(&node(Some("True"), vec![])), None);
        assert_eq!(readiness_taint(&node(Some("False"), vec![])).map(|t| t.key), Some(NOT_READY_TAINT.to_string()));
        assert_eq!(readiness_taint(&node(None, vec![])).map(|t| t.key), Some(NOT_READY_TAINT.to_string()));
        assert_eq!(readiness_taint(&node(Some("Unknown"), vec![])).map(|t| t.key), Some(UNREACHABLE_TAINT.to_string()));
        let tainted = Taint { key: NOT_READY_TAINT.into(), value: None, effect: "NoExecute".into(), time_added: None };
        assert_eq!(readiness_taint(&node(Some("False"), vec![tainted])), None);
    }
}
