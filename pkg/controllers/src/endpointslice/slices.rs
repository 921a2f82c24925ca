//! The EndpointSlice reconciler as a pure function (upstream `endpointslice/reconciler.go`):
//! given a Service, the pods it selects and the slices this controller already manages for it,
//! which slices to create, update and delete.
//!
//! Endpoints are grouped by the ports they resolve to (pods resolving a named port differently
//! land in different slices) and by address family. Existing slices keep the endpoints still
//! wanted (updated in place when their conditions change); new endpoints first fill slices
//! being updated anyway, then an unchanged slice with room for all of them, then new slices of
//! at most 100 endpoints. A service with no endpoints keeps one empty placeholder slice.

use super::ports::{endpoint_ports, port_key};
use crate::core::pod;
use k8s_openapi::api::core::v1::{ObjectReference, Pod, Service};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use std::collections::{BTreeMap, BTreeSet, HashMap};

pub const LABEL_SERVICE_NAME: &str = "kubernetes.io/service-name";
pub const LABEL_MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
pub const CONTROLLER_NAME: &str = "endpointslice-controller.k8s.io";
pub const LABEL_HEADLESS: &str = "service.kubernetes.io/headless";
pub const TRIGGER_TIME_ANNOTATION: &str = "endpoints.kubernetes.io/last-change-trigger-time";
pub const MAX_ENDPOINTS_PER_SLICE: usize = 100;
pub const LABEL_ZONE: &str = "topology.kubernetes.io/zone";

/// What a reconcile pass writes.
#[derive(Debug, Default)]
pub struct Plan {
    pub create: Vec<EndpointSlice>,
    pub update: Vec<EndpointSlice>,
    pub delete: Vec<EndpointSlice>,
    /// Pods left out because their node is unknown (retried later).
    pub errors: Vec<String>,
}

/// Where a node stands, for a pod's endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeInfo {
    Missing,
    Zone(Option<String>),
}

/// `spec.clusterIP` is an address (not empty, not `None`).
pub fn is_ip_set(svc: &Service) -> bool {
    svc.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()).is_some_and(|ip| !ip.is_empty() && ip != "None")
}

fn is_ipv6(ip: &str) -> bool {
    ip.parse::<std::net::IpAddr>().is_ok_and(|a| a.is_ipv6())
}

/// The address types the service's slices carry.
pub fn address_types(svc: &Service) -> BTreeSet<&'static str> {
    let spec = svc.spec.as_ref();
    let mut out = BTreeSet::new();
    for f in spec.and_then(|s| s.ip_families.as_ref()).into_iter().flatten() {
        match f.as_str() {
            "IPv4" => {
                out.insert("IPv4");
            }
            "IPv6" => {
                out.insert("IPv6");
            }
            _ => {}
        }
    }
    if !out.is_empty() {
        return out;
    }
    if is_ip_set(svc) {
        let ip = spec.and_then(|s| s.cluster_ip.as_deref()).unwrap_or("");
        out.insert(if is_ipv6(ip) { "IPv6" } else { "IPv4" });
        return out;
    }
    out.insert("IPv4");
    out.insert("IPv6");
    out
}

/// Whether the pod's endpoint carries a hostname: the pod names the service as its subdomain.
pub fn should_set_hostname(pod: &Pod, svc: &Service) -> bool {
    let spec = pod.spec.as_ref();
    let hostname = spec.and_then(|s| s.hostname.as_deref()).unwrap_or("");
    !hostname.is_empty()
        && spec.and_then(|s| s.subdomain.as_deref()) == svc.metadata.name.as_deref()
        && pod.metadata.namespace == svc.metadata.namespace
}

/// Pods that appear at all: not terminal, with an IP, and, unless `include_terminating`, not
/// being deleted.
pub fn should_pod_be_in_endpoints(p: &Pod, include_terminating: bool) -> bool {
    !pod::is_terminal(p) && !pod::ips(p).is_empty() && (include_terminating || !pod::is_terminating(p))
}

fn publish_not_ready(svc: &Service) -> bool {
    svc.spec.as_ref().and_then(|s| s.publish_not_ready_addresses).unwrap_or(false)
}

/// The pod as an endpoint of `address_type`.
pub fn pod_to_endpoint(p: &Pod, zone: Option<String>, svc: &Service, address_type: &str) -> Endpoint {
    let serving = pod::is_ready(p);
    let terminating = pod::is_terminating(p);
    // Never ready while terminating, unless the service publishes not-ready addresses.
    let ready = publish_not_ready(svc) || (serving && !terminating);
    let addresses =
        pod::ips(p).into_iter().filter(|ip| is_ipv6(ip) == (address_type == "IPv6")).map(str::to_string).collect();
    let node_name = p.spec.as_ref().and_then(|s| s.node_name.clone()).filter(|n| !n.is_empty());
    Endpoint {
        addresses,
        conditions: Some(EndpointConditions {
            ready: Some(ready),
            serving: Some(serving),
            terminating: Some(terminating),
        }),
        hostname: if should_set_hostname(p, svc) { p.spec.as_ref().and_then(|s| s.hostname.clone()) } else { None },
        node_name,
        target_ref: Some(ObjectReference {
            kind: Some("Pod".into()),
            namespace: p.metadata.namespace.clone(),
            name: p.metadata.name.clone(),
            uid: p.metadata.uid.clone(),
            ..Default::default()
        }),
        zone,
        ..Default::default()
    }
}

/// What identifies an endpoint across passes: addresses, hostname and the pod it stands for.
fn endpoint_key(e: &Endpoint) -> String {
    let target = e.target_ref.as_ref();
    format!(
        "{}|{}|{}/{}",
        e.addresses.join(","),
        e.hostname.as_deref().unwrap_or(""),
        target.and_then(|t| t.namespace.as_deref()).unwrap_or(""),
        target.and_then(|t| t.name.as_deref()).unwrap_or("")
    )
}

fn owned_by(slice: &EndpointSlice, svc: &Service) -> bool {
    let uid = svc.metadata.uid.as_deref();
    slice.metadata.owner_references.iter().flatten().any(|r| Some(r.uid.as_str()) == uid)
}

fn is_reserved(label: &str) -> bool {
    label == LABEL_SERVICE_NAME || label == LABEL_MANAGED_BY || label == LABEL_HEADLESS
}

/// The labels a slice of `svc` carries: the service's own (minus reserved keys), the headless
/// marker, the service name and the manager.
pub fn slice_labels(svc: &Service) -> BTreeMap<String, String> {
    let mut labels: BTreeMap<String, String> = svc
        .metadata
        .labels
        .iter()
        .flatten()
        .filter(|(k, _)| !is_reserved(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !is_ip_set(svc) {
        labels.insert(LABEL_HEADLESS.into(), String::new());
    }
    labels.insert(LABEL_SERVICE_NAME.into(), svc.metadata.name.clone().unwrap_or_default());
    labels.insert(LABEL_MANAGED_BY.into(), CONTROLLER_NAME.into());
    labels
}

fn new_slice(svc: &Service, ports: &[EndpointPort], address_type: &str) -> EndpointSlice {
    let name = svc.metadata.name.clone().unwrap_or_default();
    EndpointSlice {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}-")),
            namespace: svc.metadata.namespace.clone(),
            labels: Some(slice_labels(svc)),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Service".into(),
                name,
                uid: svc.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..Default::default()
        },
        address_type: address_type.into(),
        endpoints: Vec::new(),
        ports: Some(ports.to_vec()),
    }
}

/// An empty slice standing for "no endpoints", compared loosely (name and metadata bookkeeping
/// aside).
fn is_placeholder_like(slice: &EndpointSlice, placeholder: &EndpointSlice) -> bool {
    slice.endpoints.is_empty()
        && slice.ports.as_ref().is_none_or(Vec::is_empty)
        && slice.address_type == placeholder.address_type
        && slice.metadata.labels == placeholder.metadata.labels
        && slice.metadata.owner_references == placeholder.metadata.owner_references
}

/// Desired endpoints of one port mapping, in a stable order, addressable by key.
#[derive(Default)]
struct DesiredSet {
    order: Vec<String>,
    by_key: HashMap<String, Endpoint>,
}

impl DesiredSet {
    fn insert(&mut self, e: Endpoint) {
        let k = endpoint_key(&e);
        if self.by_key.insert(k.clone(), e).is_none() {
            self.order.push(k);
        }
    }
    fn take(&mut self, e: &Endpoint) -> Option<Endpoint> {
        self.by_key.remove(&endpoint_key(e))
    }
    fn pop(&mut self) -> Option<Endpoint> {
        while !self.order.is_empty() {
            let k = self.order.remove(0);
            if let Some(e) = self.by_key.remove(&k) {
                return Some(e);
            }
        }
        None
    }
    fn len(&self) -> usize {
        self.by_key.len()
    }
}

/// Upstream's `reconcileByPortMapping`.
fn reconcile_port_mapping(
    svc: &Service,
    existing: &[&EndpointSlice],
    mut desired: DesiredSet,
    ports: &[EndpointPort],
    address_type: &str,
    max: usize,
) -> (Vec<EndpointSlice>, Vec<EndpointSlice>, Vec<EndpointSlice>) {
    let labels = slice_labels(svc);
    let mut to_update: Vec<EndpointSlice> = Vec::new();
    let mut to_delete: Vec<EndpointSlice> = Vec::new();
    let mut unchanged: Vec<EndpointSlice> = Vec::new();
    // 1. Keep the wanted endpoints of existing slices, updating changed ones.
    for slice in existing {
        let mut kept = Vec::with_capacity(slice.endpoints.len());
        let mut changed = false;
        for e in &slice.endpoints {
            if let Some(want) = desired.take(e) {
                changed |= want != *e;
                kept.push(want);
            }
        }
        let labels_changed = slice.metadata.labels.as_ref() != Some(&labels);
        if changed || kept.len() != slice.endpoints.len() {
            if kept.is_empty() {
                to_delete.push((*slice).clone());
            } else {
                let mut s = (*slice).clone();
                s.endpoints = kept;
                s.metadata.labels = Some(labels.clone());
                to_update.push(s);
            }
        } else if labels_changed {
            let mut s = (*slice).clone();
            s.metadata.labels = Some(labels.clone());
            to_update.push(s);
        } else {
            unchanged.push((*slice).clone());
        }
    }
    // 2. Fill the slices being updated anyway, fullest first.
    if desired.len() > 0 && !to_update.is_empty() {
        to_update.sort_by_key(|s| std::cmp::Reverse(s.endpoints.len()));
        for s in to_update.iter_mut() {
            while desired.len() > 0 && s.endpoints.len() < max {
                if let Some(e) = desired.pop() {
                    s.endpoints.push(e);
                }
            }
        }
    }
    // 3. Put what is left in one unchanged slice with room for all of it, else in new slices.
    let mut to_create = Vec::new();
    while desired.len() > 0 {
        let mut target = None;
        if desired.len() < max {
            // The fullest unchanged slice that still fits everything left.
            target = unchanged
                .iter()
                .enumerate()
                .filter(|(_, s)| max - s.endpoints.len().min(max) >= desired.len())
                .max_by_key(|(_, s)| s.endpoints.len())
                .map(|(i, _)| i);
        }
        let mut slice = match target {
            Some(i) => unchanged.remove(i),
            None => new_slice(svc, ports, address_type),
        };
        while desired.len() > 0 && slice.endpoints.len() < max {
            if let Some(e) = desired.pop() {
                slice.endpoints.push(e);
            }
        }
        if slice.metadata.name.is_some() {
            to_update.push(slice);
        } else {
            to_create.push(slice);
        }
    }
    (to_create, to_update, to_delete)
}

fn reconcile_address_type(
    svc: &Service,
    pods: &[&Pod],
    existing: &[&EndpointSlice],
    node: &dyn Fn(&str) -> NodeInfo,
    address_type: &str,
    plan: &mut Plan,
) {
    let mut to_delete: Vec<EndpointSlice> = Vec::new();
    let mut existing_by_ports: BTreeMap<String, Vec<&EndpointSlice>> = BTreeMap::new();
    for s in existing {
        if owned_by(s, svc) {
            existing_by_ports.entry(port_key(s.ports.as_deref().unwrap_or(&[]))).or_default().push(s);
        } else {
            to_delete.push((*s).clone());
        }
    }
    let spec_ports = svc.spec.as_ref().and_then(|s| s.ports.clone()).unwrap_or_default();
    let mut desired: BTreeMap<String, (Vec<EndpointPort>, DesiredSet)> = BTreeMap::new();
    for p in pods {
        if !should_pod_be_in_endpoints(p, true) {
            continue;
        }
        let ports = endpoint_ports(&spec_ports, p);
        let node_name = p.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or("");
        let zone = match node(node_name) {
            NodeInfo::Zone(z) => z,
            NodeInfo::Missing if publish_not_ready(svc) => None,
            NodeInfo::Missing => {
                plan.errors.push(format!(
                    "skipping Pod {} for Service {}/{}: Node {node_name} Not Found",
                    p.metadata.name.as_deref().unwrap_or(""),
                    svc.metadata.namespace.as_deref().unwrap_or(""),
                    svc.metadata.name.as_deref().unwrap_or("")
                ));
                continue;
            }
        };
        let key = port_key(&ports);
        let entry = desired.entry(key).or_insert_with(|| (ports, DesiredSet::default()));
        let e = pod_to_endpoint(p, zone, svc, address_type);
        if !e.addresses.is_empty() {
            entry.1.insert(e);
        }
    }
    let mut to_create = Vec::new();
    let mut to_update = Vec::new();
    for (key, (ports, set)) in desired {
        let current = existing_by_ports.get(&key).cloned().unwrap_or_default();
        let (c, u, d) = reconcile_port_mapping(svc, &current, set, &ports, address_type, MAX_ENDPOINTS_PER_SLICE);
        to_create.extend(c);
        to_update.extend(u);
        to_delete.extend(d);
        existing_by_ports.remove(&key);
    }
    // Slices of port mappings no longer wanted.
    for slices in existing_by_ports.into_values() {
        to_delete.extend(slices.into_iter().cloned());
    }
    if existing.len() == to_delete.len() && to_create.is_empty() {
        let placeholder = new_slice(svc, &[], address_type);
        if to_delete.len() == 1 && is_placeholder_like(&to_delete[0], &placeholder) {
            to_delete.clear();
        } else {
            to_create.push(placeholder);
        }
    }
    plan.create.extend(to_create);
    plan.update.extend(to_update);
    plan.delete.extend(to_delete);
}

/// The whole reconcile: per address type, then slices of types the service no longer has are
/// deleted, and creations reuse slices about to be deleted. `node` tells a pod's node's zone or
/// that the node is unknown.
pub fn reconcile(svc: &Service, pods: &[&Pod], existing: &[&EndpointSlice], node: &dyn Fn(&str) -> NodeInfo) -> Plan {
    let types = address_types(svc);
    let mut plan = Plan::default();
    let mut stale_types = Vec::new();
    for t in &types {
        let of_type: Vec<&EndpointSlice> = existing.iter().copied().filter(|s| s.address_type == *t).collect();
        reconcile_address_type(svc, pods, &of_type, node, t, &mut plan);
    }
    for s in existing {
        if !types.contains(s.address_type.as_str()) {
            stale_types.push((*s).clone());
        }
    }
    plan.delete.extend(stale_types);
    // Turn creations into updates of slices otherwise deleted (same type, owned by us).
    let mut i = 0;
    while i < plan.delete.len() && !plan.create.is_empty() {
        let reusable = {
            let d = &plan.delete[i];
            plan.create.last().is_some_and(|c| c.address_type == d.address_type) && owned_by(d, svc)
        };
        if reusable {
            let old = plan.delete.remove(i);
            if let Some(mut slice) = plan.create.pop() {
                slice.metadata.name = old.metadata.name.clone();
                slice.metadata.generate_name = None;
                slice.metadata.resource_version = old.metadata.resource_version.clone();
                slice.metadata.uid = old.metadata.uid.clone();
                slice.metadata.annotations = old.metadata.annotations.clone();
                plan.update.push(slice);
            }
        } else {
            i += 1;
        }
    }
    // No new slices for a service on its way out (its slices are being garbage collected).
    if svc.metadata.deletion_timestamp.is_some() {
        plan.create.clear();
    }
    plan
}

/// Sets (or, with no trigger time, removes) the last-change-trigger-time annotation.
pub fn set_trigger_time(meta: &mut ObjectMeta, trigger: Option<&str>) {
    match trigger {
        Some(t) => {
            meta.annotations.get_or_insert_with(BTreeMap::new).insert(TRIGGER_TIME_ANNOTATION.into(), t.into());
        }
        None => {
            if let Some(a) = meta.annotations.as_mut() {
                a.remove(TRIGGER_TIME_ANNOTATION);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        Container, ContainerPort, PodCondition, PodIP, PodSpec, PodStatus, ServicePort, ServiceSpec,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    fn svc() -> Service {
        Service {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("ns".into()),
                uid: Some("svc-uid".into()),
                ..Default::default()
            },
            spec: Some(ServiceSpec {
                cluster_ip: Some("10.43.0.10".into()),
                ip_families: Some(vec!["IPv4".into()]),
                selector: Some(BTreeMap::from([("app".to_string(), "web".to_string())])),
                ports: Some(vec![ServicePort {
                    name: Some("http".into()),
                    port: 80,
                    target_port: Some(IntOrString::String("web".into())),
                    protocol: Some("TCP".into()),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn pod(name: &str, ip: &str, ready: bool, port: i32) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: Some(format!("uid-{name}")),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some("node1".into()),
                containers: vec![Container {
                    name: "c".into(),
                    ports: Some(vec![ContainerPort {
                        name: Some("web".into()),
                        container_port: port,
                        protocol: Some("TCP".into()),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                pod_ip: Some(ip.into()),
                pod_ips: Some(vec![PodIP { ip: ip.into() }]),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    fn node_ok(_: &str) -> NodeInfo {
        NodeInfo::Zone(None)
    }

    /// Gives created slices names, as the API server would.
    fn persist(plan: Plan, existing: Vec<EndpointSlice>) -> Vec<EndpointSlice> {
        let deleted: BTreeSet<Option<String>> = plan.delete.iter().map(|s| s.metadata.name.clone()).collect();
        let updated: BTreeMap<Option<String>, EndpointSlice> =
            plan.update.into_iter().map(|s| (s.metadata.name.clone(), s)).collect();
        let mut out: Vec<EndpointSlice> = existing
            .into_iter()
            .filter(|s| !deleted.contains(&s.metadata.name))
            .map(|s| updated.get(&s.metadata.name).cloned().unwrap_or(s))
            .collect();
        for (i, mut s) in plan.create.into_iter().enumerate() {
            s.metadata.name = Some(format!("web-{}{i}", out.len()));
            out.push(s);
        }
        out
    }

    fn ready_of(slices: &[EndpointSlice]) -> BTreeMap<String, bool> {
        slices
            .iter()
            .flat_map(|s| s.endpoints.iter())
            .map(|e| (e.addresses[0].clone(), e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(false)))
            .collect()
    }

    #[test]
    fn a_service_gets_one_labelled_owned_slice_with_ready_flags() {
        let (a, b) = (pod("a", "10.42.0.1", true, 8080), pod("b", "10.42.0.2", false, 8080));
        let plan = reconcile(&svc(), &[&a, &b], &[], &node_ok);
        assert_eq!(plan.create.len(), 1);
        let s = &plan.create[0];
        assert_eq!(s.address_type, "IPv4");
        assert_eq!(s.metadata.generate_name.as_deref(), Some("web-"));
        let labels = s.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get(LABEL_SERVICE_NAME).map(String::as_str), Some("web"));
        assert_eq!(labels.get(LABEL_MANAGED_BY).map(String::as_str), Some(CONTROLLER_NAME));
        let owner = &s.metadata.owner_references.as_ref().expect("owner")[0];
        assert_eq!((owner.kind.as_str(), owner.uid.as_str(), owner.controller), ("Service", "svc-uid", Some(true)));
        assert_eq!(s.ports.as_ref().and_then(|p| p[0].port), Some(8080));
        assert_eq!(ready_of(&plan.create), BTreeMap::from([("10.42.0.1".into(), true), ("10.42.0.2".into(), false)]));
        let e = &s.endpoints[0];
        assert_eq!(e.node_name.as_deref(), Some("node1"));
        assert_eq!(e.target_ref.as_ref().and_then(|t| t.name.as_deref()), Some("a"));
    }

    #[test]
    fn a_readiness_change_updates_the_existing_slice_in_place() {
        let a = pod("a", "10.42.0.1", false, 8080);
        let slices = persist(reconcile(&svc(), &[&a], &[], &node_ok), Vec::new());
        let a_ready = pod("a", "10.42.0.1", true, 8080);
        let refs: Vec<&EndpointSlice> = slices.iter().collect();
        let plan = reconcile(&svc(), &[&a_ready], &refs, &node_ok);
        assert!(plan.create.is_empty() && plan.delete.is_empty());
        assert_eq!(plan.update.len(), 1);
        assert_eq!(plan.update[0].metadata.name, slices[0].metadata.name);
        assert_eq!(ready_of(&plan.update), BTreeMap::from([("10.42.0.1".into(), true)]));
        // Nothing changes the second time.
        let slices = persist(plan, slices);
        let refs: Vec<&EndpointSlice> = slices.iter().collect();
        let again = reconcile(&svc(), &[&a_ready], &refs, &node_ok);
        assert!(again.create.is_empty() && again.update.is_empty() && again.delete.is_empty());
    }

    #[test]
    fn pods_resolving_a_named_port_differently_get_separate_slices() {
        let (a, b) = (pod("a", "10.42.0.1", true, 8080), pod("b", "10.42.0.2", true, 9090));
        let plan = reconcile(&svc(), &[&a, &b], &[], &node_ok);
        let mut ports: Vec<Option<i32>> =
            plan.create.iter().map(|s| s.ports.as_ref().and_then(|p| p[0].port)).collect();
        ports.sort();
        assert_eq!(ports, vec![Some(8080), Some(9090)]);
    }

    #[test]
    fn terminating_pods_are_listed_not_ready_but_serving() {
        let mut a = pod("a", "10.42.0.1", true, 8080);
        a.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        let plan = reconcile(&svc(), &[&a], &[], &node_ok);
        let c = plan.create[0].endpoints[0].conditions.clone().expect("conditions");
        assert_eq!((c.ready, c.serving, c.terminating), (Some(false), Some(true), Some(true)));
    }

    #[test]
    fn pods_without_ip_or_terminal_are_left_out_and_an_empty_service_gets_a_placeholder() {
        let mut no_ip = pod("a", "10.42.0.1", true, 8080);
        no_ip.status.as_mut().expect("status").pod_ip = None;
        no_ip.status.as_mut().expect("status").pod_ips = None;
        let mut done = pod("b", "10.42.0.2", true, 8080);
        done.status.as_mut().expect("status").phase = Some("Succeeded".into());
        let plan = reconcile(&svc(), &[&no_ip, &done], &[], &node_ok);
        assert_eq!(plan.create.len(), 1);
        assert!(plan.create[0].endpoints.is_empty());
        // The placeholder is kept as it is.
        let slices = persist(plan, Vec::new());
        let refs: Vec<&EndpointSlice> = slices.iter().collect();
        let again = reconcile(&svc(), &[], &refs, &node_ok);
        assert!(again.create.is_empty() && again.update.is_empty() && again.delete.is_empty(), "{again:?}");
    }

    #[test]
    fn the_last_endpoint_leaving_turns_the_slice_into_the_placeholder() {
        let a = pod("a", "10.42.0.1", true, 8080);
        let slices = persist(reconcile(&svc(), &[&a], &[], &node_ok), Vec::new());
        let refs: Vec<&EndpointSlice> = slices.iter().collect();
        let plan = reconcile(&svc(), &[], &refs, &node_ok);
        assert!(plan.create.is_empty() && plan.delete.is_empty(), "reused, not deleted and recreated");
        assert_eq!(plan.update.len(), 1);
        assert!(plan.update[0].endpoints.is_empty());
    }

    #[test]
    fn more_than_a_hundred_endpoints_spill_into_a_second_slice() {
        let pods: Vec<Pod> = (0..150)
            .map(|i| pod(&format!("p{i}"), &format!("10.42.{}.{}", i / 200, i % 200 + 1), true, 8080))
            .collect();
        let refs: Vec<&Pod> = pods.iter().collect();
        let plan = reconcile(&svc(), &refs, &[], &node_ok);
        let mut sizes: Vec<usize> = plan.create.iter().map(|s| s.endpoints.len()).collect();
        sizes.sort();
        assert_eq!(sizes, vec![50, 100]);
    }

    #[test]
    fn a_pod_on_an_unknown_node_is_skipped_with_an_error() {
        let a = pod("a", "10.42.0.1", true, 8080);
        let plan = reconcile(&svc(), &[&a], &[], &|_: &str| NodeInfo::Missing);
        assert_eq!(plan.errors.len(), 1);
        assert!(plan.create[0].endpoints.is_empty());
    }

    #[test]
    fn headless_services_get_the_headless_label_and_zone_is_copied() {
        let mut s = svc();
        s.spec.as_mut().expect("spec").cluster_ip = Some("None".into());
        let a = pod("a", "10.42.0.1", true, 8080);
        let plan = reconcile(&s, &[&a], &[], &|_: &str| NodeInfo::Zone(Some("z1".into())));
        let slice = &plan.create[0];
        assert!(slice.metadata.labels.as_ref().is_some_and(|l| l.contains_key(LABEL_HEADLESS)));
        assert_eq!(slice.endpoints[0].zone.as_deref(), Some("z1"));
    }

    #[test]
    fn address_types_follow_ip_families_then_cluster_ip() {
        let mut s = svc();
        assert_eq!(address_types(&s), BTreeSet::from(["IPv4"]));
        s.spec.as_mut().expect("spec").ip_families = None;
        s.spec.as_mut().expect("spec").cluster_ip = Some("fd00::10".into());
        assert_eq!(address_types(&s), BTreeSet::from(["IPv6"]));
        s.spec.as_mut().expect("spec").cluster_ip = Some("None".into());
        assert_eq!(address_types(&s), BTreeSet::from(["IPv4", "IPv6"]));
    }

    #[test]
    fn slices_of_another_service_with_the_same_name_are_replaced() {
        let a = pod("a", "10.42.0.1", true, 8080);
        let mut slices = persist(reconcile(&svc(), &[&a], &[], &node_ok), Vec::new());
        for o in slices[0].metadata.owner_references.iter_mut().flatten() {
            o.uid = "old-uid".into();
        }
        let refs: Vec<&EndpointSlice> = slices.iter().collect();
        let plan = reconcile(&svc(), &[&a], &refs, &node_ok);
        assert_eq!(plan.create.len(), 1);
        assert_eq!(plan.delete.len(), 1);
    }

    #[test]
    fn the_trigger_time_annotation_is_set_or_cleared() {
        let mut m = ObjectMeta::default();
        set_trigger_time(&mut m, Some("2026-01-01T00:00:00Z"));
        assert_eq!(
            m.annotations.as_ref().and_then(|a| a.get(TRIGGER_TIME_ANNOTATION)).map(String::as_str),
            Some("2026-01-01T00:00:00Z")
        );
        set_trigger_time(&mut m, None);
        assert!(m.annotations.as_ref().is_some_and(|a| a.is_empty()));
    }
}
