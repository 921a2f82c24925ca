//! Builders for the node and pod tables unit tests schedule against.

use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerImage, ContainerPort, Node, NodeAffinity, NodeCondition, NodeSelectorRequirement,
    NodeSelectorTerm, NodeSpec, NodeStatus, Pod, PodAffinity, PodAffinityTerm, PodAntiAffinity, PodSpec, PodStatus,
    PreferredSchedulingTerm, ResourceRequirements, Taint, Toleration, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use std::collections::BTreeMap;

pub struct NodeBuilder(Node);

/// A Ready node with `cpu` and `memory` allocatable and room for 110 pods.
pub fn node(name: &str, cpu: &str, memory: &str) -> NodeBuilder {
    let mut n = Node::default();
    n.metadata.name = Some(name.into());
    n.metadata.labels = Some(BTreeMap::from([("kubernetes.io/hostname".to_string(), name.to_string())]));
    let alloc = BTreeMap::from([
        ("cpu".to_string(), Quantity(cpu.into())),
        ("memory".to_string(), Quantity(memory.into())),
        ("pods".to_string(), Quantity("110".into())),
    ]);
    n.spec = Some(NodeSpec::default());
    n.status = Some(NodeStatus {
        capacity: Some(alloc.clone()),
        allocatable: Some(alloc),
        conditions: Some(vec![NodeCondition { type_: "Ready".into(), status: "True".into(), ..Default::default() }]),
        ..Default::default()
    });
    NodeBuilder(n)
}

impl NodeBuilder {
    fn spec(&mut self) -> &mut NodeSpec {
        self.0.spec.get_or_insert_with(Default::default)
    }

    fn status(&mut self) -> &mut NodeStatus {
        self.0.status.get_or_insert_with(Default::default)
    }

    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0.metadata.labels.get_or_insert_with(Default::default).insert(k.into(), v.into());
        self
    }

    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        let t = Taint {
            key: key.into(),
            value: (!value.is_empty()).then(|| value.to_string()),
            effect: effect.into(),
            time_added: None,
        };
        self.spec().taints.get_or_insert_with(Vec::new).push(t);
        self
    }

    pub fn unschedulable(mut self) -> Self {
        self.spec().unschedulable = Some(true);
        self
    }

    pub fn ready(mut self, status: &str) -> Self {
        self.status().conditions =
            Some(vec![NodeCondition { type_: "Ready".into(), status: status.into(), ..Default::default() }]);
        self
    }

    pub fn pods(mut self, n: &str) -> Self {
        if let Some(a) = self.status().allocatable.as_mut() {
            a.insert("pods".into(), Quantity(n.into()));
        }
        self
    }

    pub fn image(mut self, name: &str, size: i64) -> Self {
        let img = ContainerImage { names: Some(vec![name.into()]), size_bytes: Some(size) };
        self.status().images.get_or_insert_with(Vec::new).push(img);
        self
    }

    pub fn build(self) -> Node {
        self.0
    }
}

pub struct PodBuilder(Pod);

/// A pending pod `name` in namespace `default` with uid `<name>-uid` and one container.
pub fn pod(name: &str) -> PodBuilder {
    let mut p = Pod::default();
    p.metadata.name = Some(name.into());
    p.metadata.namespace = Some("default".into());
    p.metadata.uid = Some(format!("{name}-uid"));
    p.spec = Some(PodSpec {
        containers: vec![Container { name: "c".into(), image: Some("busybox".into()), ..Default::default() }],
        scheduler_name: Some("default-scheduler".into()),
        ..Default::default()
    });
    p.status = Some(PodStatus { phase: Some("Pending".into()), ..Default::default() });
    PodBuilder(p)
}

fn selector(key: &str, value: &str) -> Option<LabelSelector> {
    Some(LabelSelector { match_labels: Some(BTreeMap::from([(key.into(), value.into())])), match_expressions: None })
}

impl PodBuilder {
    fn spec(&mut self) -> &mut PodSpec {
        self.0.spec.get_or_insert_with(Default::default)
    }

    fn request(mut self, resource: &str, q: &str) -> Self {
        let c = &mut self.spec().containers[0];
        let r = c.resources.get_or_insert_with(ResourceRequirements::default);
        r.requests.get_or_insert_with(Default::default).insert(resource.into(), Quantity(q.into()));
        self
    }

    pub fn cpu(self, q: &str) -> Self {
        self.request("cpu", q)
    }

    pub fn memory(self, q: &str) -> Self {
        self.request("memory", q)
    }

    pub fn scalar(self, name: &str, q: &str) -> Self {
        self.request(name, q)
    }

    pub fn node(mut self, n: &str) -> Self {
        self.spec().node_name = Some(n.into());
        self
    }

    pub fn priority(mut self, p: i32) -> Self {
        self.spec().priority = Some(p);
        self
    }

    pub fn priority_class(mut self, c: &str) -> Self {
        self.spec().priority_class_name = Some(c.into());
        self
    }

    pub fn preempt_never(mut self) -> Self {
        self.spec().preemption_policy = Some("Never".into());
        self
    }

    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0.metadata.labels.get_or_insert_with(Default::default).insert(k.into(), v.into());
        self
    }

    pub fn image(mut self, image: &str) -> Self {
        self.spec().containers[0].image = Some(image.into());
        self
    }

    pub fn toleration(mut self, key: &str, op: &str, value: &str, effect: &str) -> Self {
        let t = Toleration {
            key: (!key.is_empty()).then(|| key.to_string()),
            operator: Some(op.into()),
            value: (!value.is_empty()).then(|| value.to_string()),
            effect: (!effect.is_empty()).then(|| effect.to_string()),
            toleration_seconds: None,
        };
        self.spec().tolerations.get_or_insert_with(Vec::new).push(t);
        self
    }

    pub fn node_selector(mut self, k: &str, v: &str) -> Self {
        self.spec().node_selector.get_or_insert_with(Default::default).insert(k.into(), v.into());
        self
    }

    pub fn host_port(mut self, port: i32) -> Self {
        let p = ContainerPort { container_port: port, host_port: Some(port), ..Default::default() };
        self.spec().containers[0].ports.get_or_insert_with(Vec::new).push(p);
        self
    }

    fn affinity_mut(&mut self) -> &mut Affinity {
        self.spec().affinity.get_or_insert_with(Default::default)
    }

    fn term(key: &str, value: &str, topology: &str) -> PodAffinityTerm {
        PodAffinityTerm { label_selector: selector(key, value), topology_key: topology.into(), ..Default::default() }
    }

    pub fn affinity(mut self, key: &str, value: &str, topology: &str) -> Self {
        let a = self.affinity_mut().pod_affinity.get_or_insert_with(PodAffinity::default);
        a.required_during_scheduling_ignored_during_execution
            .get_or_insert_with(Vec::new)
            .push(Self::term(key, value, topology));
        self
    }

    pub fn anti_affinity(mut self, key: &str, value: &str, topology: &str) -> Self {
        let a = self.affinity_mut().pod_anti_affinity.get_or_insert_with(PodAntiAffinity::default);
        a.required_during_scheduling_ignored_during_execution
            .get_or_insert_with(Vec::new)
            .push(Self::term(key, value, topology));
        self
    }

    pub fn preferred_affinity(mut self, weight: i32, key: &str, value: &str, topology: &str) -> Self {
        let a = self.affinity_mut().pod_affinity.get_or_insert_with(PodAffinity::default);
        let w = WeightedPodAffinityTerm { weight, pod_affinity_term: Self::term(key, value, topology) };
        a.preferred_during_scheduling_ignored_during_execution.get_or_insert_with(Vec::new).push(w);
        self
    }

    pub fn preferred_anti_affinity(mut self, weight: i32, key: &str, value: &str, topology: &str) -> Self {
        let a = self.affinity_mut().pod_anti_affinity.get_or_insert_with(PodAntiAffinity::default);
        let w = WeightedPodAffinityTerm { weight, pod_affinity_term: Self::term(key, value, topology) };
        a.preferred_during_scheduling_ignored_during_execution.get_or_insert_with(Vec::new).push(w);
        self
    }

    pub fn preferred_node(mut self, weight: i32, key: &str, value: &str) -> Self {
        let na = self.affinity_mut().node_affinity.get_or_insert_with(NodeAffinity::default);
        let term = NodeSelectorTerm {
            match_expressions: Some(vec![NodeSelectorRequirement {
                key: key.into(),
                operator: "In".into(),
                values: Some(vec![value.into()]),
            }]),
            match_fields: None,
        };
        na.preferred_during_scheduling_ignored_during_execution
            .get_or_insert_with(Vec::new)
            .push(PreferredSchedulingTerm { weight, preference: term });
        self
    }

    pub fn started_at(mut self, rfc3339: &str) -> Self {
        let t = rfc3339.parse::<jiff::Timestamp>().expect("timestamp");
        self.0.status.get_or_insert_with(Default::default).start_time = Some(Time(t));
        self
    }

    pub fn terminating(mut self) -> Self {
        self.0.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::now()));
        self
    }

    pub fn nominated(mut self, node: &str) -> Self {
        self.0.status.get_or_insert_with(Default::default).nominated_node_name = Some(node.into());
        self
    }

    pub fn build(self) -> Pod {
        self.0
    }
}
