//! Resource arithmetic for scheduling: what a pod requests (upstream's `PodRequests`: regular
//! containers, sidecars, the largest init container, pod-level requests and overhead), the
//! non-zero requests scoring uses for containers that ask for nothing, and what a node offers.

use k1s_api::strategies::quantity::Quantity as Parsed;
use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use std::collections::BTreeMap;

/// CPU a container without a CPU request counts for when scoring (upstream's
/// `DefaultMilliCPURequest`).
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// Memory a container without a memory request counts for when scoring (200 MiB).
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

pub const CPU: &str = "cpu";
pub const MEMORY: &str = "memory";
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
pub const PODS: &str = "pods";

/// An amount of every resource the scheduler accounts for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resource {
    pub milli_cpu: i64,
    pub memory: i64,
    pub ephemeral_storage: i64,
    /// Only meaningful for a node's allocatable: how many pods it takes.
    pub allowed_pods: i64,
    /// Extended resources, hugepages and anything else, in whole units.
    pub scalar: BTreeMap<String, i64>,
}

/// A quantity in whole units, rounded up (upstream's `Quantity.Value`); unparsable ones count 0.
pub fn value(q: &Quantity) -> i64 {
    Parsed::parse(&q.0).map(|p| ceil_div(p.nanos(), 1_000_000_000)).unwrap_or(0)
}

/// A quantity in thousandths, rounded up (upstream's `Quantity.MilliValue`).
pub fn milli_value(q: &Quantity) -> i64 {
    Parsed::parse(&q.0).map(|p| ceil_div(p.nanos(), 1_000_000)).unwrap_or(0)
}

fn ceil_div(n: i128, d: i128) -> i64 {
    let q = n.div_euclid(d) + i128::from(n.rem_euclid(d) != 0);
    i64::try_from(q).unwrap_or(if q > 0 { i64::MAX } else { i64::MIN })
}

impl Resource {
    /// A resource list (`requests`, `allocatable`, `overhead`) as amounts.
    pub fn from_list(list: &BTreeMap<String, Quantity>) -> Resource {
        let mut r = Resource::default();
        r.add_list(list);
        r
    }

    fn add_one(&mut self, name: &str, q: &Quantity) {
        match name {
            CPU => self.milli_cpu += milli_value(q),
            MEMORY => self.memory += value(q),
            EPHEMERAL_STORAGE => self.ephemeral_storage += value(q),
            PODS => self.allowed_pods += value(q),
            other => *self.scalar.entry(other.to_string()).or_default() += value(q),
        }
    }

    pub fn add_list(&mut self, list: &BTreeMap<String, Quantity>) {
        for (name, q) in list {
            self.add_one(name, q);
        }
    }

    pub fn add(&mut self, other: &Resource) {
        self.milli_cpu += other.milli_cpu;
        self.memory += other.memory;
        self.ephemeral_storage += other.ephemeral_storage;
        self.allowed_pods += other.allowed_pods;
        for (k, v) in &other.scalar {
            *self.scalar.entry(k.clone()).or_default() += v;
        }
    }

    pub fn sub(&mut self, other: &Resource) {
        self.milli_cpu -= other.milli_cpu;
        self.memory -= other.memory;
        self.ephemeral_storage -= other.ephemeral_storage;
        self.allowed_pods -= other.allowed_pods;
        for (k, v) in &other.scalar {
            *self.scalar.entry(k.clone()).or_default() -= v;
        }
    }

    /// Raises every amount to at least `other`'s.
    pub fn max_with(&mut self, other: &Resource) {
        self.milli_cpu = self.milli_cpu.max(other.milli_cpu);
        self.memory = self.memory.max(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.max(other.ephemeral_storage);
        self.allowed_pods = self.allowed_pods.max(other.allowed_pods);
        for (k, v) in &other.scalar {
            let e = self.scalar.entry(k.clone()).or_default();
            *e = (*e).max(*v);
        }
    }

    pub fn is_zero(&self) -> bool {
        self.milli_cpu == 0 && self.memory == 0 && self.ephemeral_storage == 0 && self.scalar.values().all(|v| *v == 0)
    }
}

fn is_sidecar(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// One container's requests; with `non_missing`, CPU and memory it does not mention count as the
/// scoring defaults.
fn container_requests(c: &Container, non_missing: bool) -> Resource {
    let requests = c.resources.as_ref().and_then(|r| r.requests.as_ref());
    let mut r = requests.map(Resource::from_list).unwrap_or_default();
    if non_missing {
        if !requests.is_some_and(|l| l.contains_key(CPU)) {
            r.milli_cpu = DEFAULT_MILLI_CPU_REQUEST;
        }
        if !requests.is_some_and(|l| l.contains_key(MEMORY)) {
            r.memory = DEFAULT_MEMORY_REQUEST;
        }
    }
    r
}

fn requests(spec: &PodSpec, non_missing: bool) -> Resource {
    let mut total = Resource::default();
    for c in &spec.containers {
        total.add(&container_requests(c, non_missing));
    }
    // Sidecars run next to everything started after them; a regular init container runs alone
    // with the sidecars started before it. The pod needs the larger of the two phases.
    let mut sidecars = Resource::default();
    let mut init_peak = Resource::default();
    for c in spec.init_containers.iter().flatten() {
        let r = container_requests(c, non_missing);
        if is_sidecar(c) {
            total.add(&r);
            sidecars.add(&r);
            init_peak.max_with(&sidecars);
        } else {
            let mut phase = r;
            phase.add(&sidecars);
            init_peak.max_with(&phase);
        }
    }
    total.max_with(&init_peak);
    if let Some(pod_level) = spec.resources.as_ref().and_then(|r| r.requests.as_ref()) {
        if let Some(q) = pod_level.get(CPU) {
            total.milli_cpu = milli_value(q);
        }
        if let Some(q) = pod_level.get(MEMORY) {
            total.memory = value(q);
        }
    }
    if let Some(overhead) = &spec.overhead {
        total.add_list(overhead);
    }
    total
}

/// What the pod asks of a node (the NodeResourcesFit filter's view).
pub fn pod_requests(spec: &PodSpec) -> Resource {
    requests(spec, false)
}

/// The pod's requests with the scoring defaults for containers that ask for no CPU or memory.
pub fn pod_non_zero_requests(spec: &PodSpec) -> Resource {
    requests(spec, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ResourceRequirements;

    fn q(s: &str) -> Quantity {
        Quantity(s.to_string())
    }

    fn container(cpu: Option<&str>, mem: Option<&str>, sidecar: bool) -> Container {
        let mut req = BTreeMap::new();
        if let Some(c) = cpu {
            req.insert(CPU.to_string(), q(c));
        }
        if let Some(m) = mem {
            req.insert(MEMORY.to_string(), q(m));
        }
        Container {
            name: "c".into(),
            resources: Some(ResourceRequirements { requests: Some(req), ..Default::default() }),
            restart_policy: sidecar.then(|| "Always".to_string()),
            ..Default::default()
        }
    }

    #[test]
    fn quantities_round_up_like_upstream() {
        assert_eq!(milli_value(&q("1")), 1000);
        assert_eq!(milli_value(&q("250m")), 250);
        assert_eq!(milli_value(&q("0.0001")), 1);
        assert_eq!(value(&q("1Gi")), 1 << 30);
        assert_eq!(value(&q("1.5k")), 1500);
        assert_eq!(value(&q("100m")), 1);
        assert_eq!(value(&q("junk")), 0);
    }

    #[test]
    fn requests_sum_containers_and_take_the_largest_init_container() {
        let spec = PodSpec {
            containers: vec![container(Some("100m"), Some("64Mi"), false), container(Some("200m"), None, false)],
            init_containers: Some(vec![container(Some("500m"), Some("10Mi"), false)]),
            ..Default::default()
        };
        let r = pod_requests(&spec);
        assert_eq!(r.milli_cpu, 500);
        assert_eq!(r.memory, 64 << 20);
    }

    #[test]
    fn sidecars_add_to_containers_and_to_later_init_containers() {
        let spec = PodSpec {
            containers: vec![container(Some("100m"), None, false)],
            init_containers: Some(vec![container(Some("50m"), None, true), container(Some("300m"), None, false)]),
            ..Default::default()
        };
        // Regular phase: 100m + 50m sidecar; init phase: 300m + 50m sidecar.
        assert_eq!(pod_requests(&spec).milli_cpu, 350);
    }

    #[test]
    fn pod_level_requests_and_overhead_apply() {
        let spec = PodSpec {
            containers: vec![container(Some("100m"), Some("1Mi"), false)],
            resources: Some(ResourceRequirements {
                requests: Some(BTreeMap::from([(CPU.to_string(), q("2"))])),
                ..Default::default()
            }),
            overhead: Some(BTreeMap::from([(CPU.to_string(), q("10m")), ("example.com/gpu".to_string(), q("1"))])),
            ..Default::default()
        };
        let r = pod_requests(&spec);
        assert_eq!(r.milli_cpu, 2010);
        assert_eq!(r.memory, 1 << 20);
        assert_eq!(r.scalar.get("example.com/gpu"), Some(&1));
    }

    #[test]
    fn non_zero_requests_fill_in_missing_cpu_and_memory_only() {
        let spec = PodSpec {
            containers: vec![container(None, None, false), container(Some("0"), Some("1Mi"), false)],
            ..Default::default()
        };
        let r = pod_non_zero_requests(&spec);
        assert_eq!(r.milli_cpu, DEFAULT_MILLI_CPU_REQUEST);
        assert_eq!(r.memory, DEFAULT_MEMORY_REQUEST + (1 << 20));
        assert!(
            pod_requests(&PodSpec { containers: vec![container(None, None, false)], ..Default::default() }).is_zero()
        );
    }
}
