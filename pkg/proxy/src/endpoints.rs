//! Endpoints of a Service port from its EndpointSlices (label `kubernetes.io/service-name`), and
//! upstream's categorization into the endpoints Cluster and Local traffic policies use: Ready
//! endpoints only, falling back to serving-and-terminating ones when none is Ready.

use crate::service::{Protocol, ServicePort};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;
use std::sync::Arc;

/// The label that ties an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub ip: Ipv4Addr,
    pub port: u16,
    pub ready: bool,
    pub serving: bool,
    pub terminating: bool,
    /// On this node (`nodeName` equals the proxy's node name).
    pub local: bool,
}

/// EndpointSlices grouped by Service (`namespace`, `name`).
pub struct SliceIndex<'a> {
    by_service: HashMap<(&'a str, &'a str), Vec<&'a EndpointSlice>>,
}

impl<'a> SliceIndex<'a> {
    pub fn new(slices: &'a [Arc<EndpointSlice>]) -> Self {
        let mut by_service: HashMap<(&str, &str), Vec<&EndpointSlice>> = HashMap::new();
        for s in slices {
            if s.address_type != "IPv4" {
                continue;
            }
            let (Some(ns), Some(svc)) = (
                s.metadata.namespace.as_deref(),
                s.metadata.labels.as_ref().and_then(|l| l.get(SERVICE_NAME_LABEL)).map(String::as_str),
            ) else {
                continue;
            };
            by_service.entry((ns, svc)).or_default().push(s);
        }
        for v in by_service.values_mut() {
            v.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        }
        Self { by_service }
    }

    /// All endpoints of `sp` (any condition), deduplicated by address and port (an endpoint
    /// listed twice counts as ready if either copy is), sorted by address then port.
    pub fn endpoints(&self, sp: &ServicePort, node_name: &str) -> Vec<Endpoint> {
        let mut found: BTreeMap<(Ipv4Addr, u16), Endpoint> = BTreeMap::new();
        let slices = self.by_service.get(&(sp.namespace.as_str(), sp.name.as_str()));
        for slice in slices.into_iter().flatten() {
            let Some(port) = slice_port(slice, &sp.port_name, sp.protocol) else { continue };
            for e in &slice.endpoints {
                let Some(ip) = e.addresses.first().and_then(|a| a.parse::<Ipv4Addr>().ok()) else { continue };
                let c = e.conditions.as_ref();
                let ep = Endpoint {
                    ip,
                    port,
                    ready: c.and_then(|c| c.ready).unwrap_or(true),
                    serving: c.and_then(|c| c.serving).unwrap_or(true),
                    terminating: c.and_then(|c| c.terminating).unwrap_or(false),
                    local: e.node_name.as_deref() == Some(node_name),
                };
                found
                    .entry((ip, port))
                    .and_modify(|have| {
                        if ep.ready && !have.ready {
                            *have = ep;
                        }
                    })
                    .or_insert(ep);
            }
        }
        found.into_values().collect()
    }
}

/// The port number of the slice's port with this name and protocol.
fn slice_port(slice: &EndpointSlice, name: &str, protocol: Protocol) -> Option<u16> {
    slice.ports.iter().flatten().find_map(|p| {
        let same = p.name.as_deref().unwrap_or("") == name && Protocol::parse(p.protocol.as_deref()) == Some(protocol);
        if same {
            p.port.and_then(|n| u16::try_from(n).ok()).filter(|n| *n != 0)
        } else {
            None
        }
    })
}

/// Upstream's `CategorizeEndpoints` (without topology hints: one node).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Categorized {
    /// Endpoints for Cluster policy.
    pub cluster: Vec<Endpoint>,
    /// Endpoints for Local policy.
    pub local: Vec<Endpoint>,
    /// Union of the two (what this node can route to).
    pub reachable: Vec<Endpoint>,
    /// Whether the Service has usable endpoints anywhere.
    pub has_any: bool,
}

pub fn categorize(endpoints: &[Endpoint], sp: &ServicePort) -> Categorized {
    let pick = |f: &dyn Fn(&Endpoint) -> bool| endpoints.iter().copied().filter(|e| f(e)).collect::<Vec<_>>();
    let mut out = Categorized::default();
    if sp.uses_cluster_endpoints() {
        out.cluster = pick(&|e| e.ready);
        if out.cluster.is_empty() {
            out.cluster = pick(&|e| e.serving && e.terminating);
        }
        out.has_any = !out.cluster.is_empty();
    }
    if !sp.uses_local_endpoints() {
        out.reachable = out.cluster.clone();
        return out;
    }
    let (mut local_ready, mut local_terminating) = (false, false);
    for e in endpoints {
        if e.ready {
            out.has_any = true;
            local_ready |= e.local;
        } else if e.serving && e.terminating {
            out.has_any = true;
            local_terminating |= e.local;
        }
    }
    if local_ready {
        out.local = pick(&|e| e.local && e.ready);
    } else if local_terminating {
        out.local = pick(&|e| e.local && e.serving && e.terminating);
    }
    if !sp.uses_cluster_endpoints() {
        out.reachable = out.local.clone();
        return out;
    }
    let mut all = out.cluster.clone();
    for e in &out.local {
        if !all.contains(e) {
            all.push(*e);
        }
    }
    all.sort_by_key(|e| (e.ip, e.port));
    out.reachable = all;
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::service::service_ports;
    use crate::service::tests::svc;
    use k8s_openapi::api::discovery::v1::{Endpoint as KEndpoint, EndpointConditions, EndpointPort};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    /// (ip, ready, serving, terminating, node)
    pub(crate) type Ep<'a> = (&'a str, bool, bool, bool, &'a str);

    /// An EndpointSlice for `ns/svc` with port `http`/`port` and the given endpoints.
    pub(crate) fn slice(ns: &str, svc: &str, port: i32, eps: &[Ep<'_>]) -> EndpointSlice {
        EndpointSlice {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(format!("{svc}-abc")),
                labels: Some([(SERVICE_NAME_LABEL.to_string(), svc.to_string())].into()),
                ..Default::default()
            },
            address_type: "IPv4".into(),
            ports: Some(vec![EndpointPort {
                name: Some("http".into()),
                port: Some(port),
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            endpoints: eps
                .iter()
                .map(|(ip, ready, serving, terminating, node)| KEndpoint {
                    addresses: vec![ip.to_string()],
                    conditions: Some(EndpointConditions {
                        ready: Some(*ready),
                        serving: Some(*serving),
                        terminating: Some(*terminating),
                    }),
                    node_name: Some(node.to_string()),
                    ..Default::default()
                })
                .collect(),
        }
    }

    fn ips(eps: &[Endpoint]) -> Vec<String> {
        eps.iter().map(|e| e.ip.to_string()).collect()
    }

    fn eps_for(s: &k8s_openapi::api::core::v1::Service, sl: EndpointSlice) -> (ServicePort, Vec<Endpoint>) {
        let slices = vec![Arc::new(sl)];
        let idx = SliceIndex::new(&slices);
        let sp = service_ports(s).remove(0);
        let eps = idx.endpoints(&sp, "node1");
        (sp, eps)
    }

    #[test]
    fn only_ready_endpoints_serve_cluster_traffic() {
        let s = svc("ns", "web", "10.43.0.5", 80);
        let (sp, eps) = eps_for(
            &s,
            slice(
                "ns",
                "web",
                8080,
                &[("10.42.0.2", true, true, false, "node1"), ("10.42.0.3", false, false, false, "node1")],
            ),
        );
        let c = categorize(&eps, &sp);
        assert_eq!(ips(&c.cluster), vec!["10.42.0.2"]);
        assert_eq!(c.cluster[0].port, 8080);
        assert!(c.has_any);
    }

    #[test]
    fn terminating_serving_endpoints_are_used_only_when_none_is_ready() {
        let s = svc("ns", "web", "10.43.0.5", 80);
        let (sp, eps) = eps_for(
            &s,
            slice(
                "ns",
                "web",
                80,
                &[("10.42.0.2", false, true, true, "node1"), ("10.42.0.3", false, false, true, "node1")],
            ),
        );
        assert_eq!(ips(&categorize(&eps, &sp).cluster), vec!["10.42.0.2"]);
        let (sp, eps) = eps_for(
            &s,
            slice(
                "ns",
                "web",
                80,
                &[("10.42.0.2", false, true, true, "node1"), ("10.42.0.4", true, true, false, "node1")],
            ),
        );
        assert_eq!(ips(&categorize(&eps, &sp).cluster), vec!["10.42.0.4"]);
    }

    #[test]
    fn internal_local_policy_keeps_only_this_nodes_endpoints() {
        let mut s = svc("ns", "web", "10.43.0.5", 80);
        s.spec.as_mut().expect("spec").internal_traffic_policy = Some("Local".into());
        let (sp, eps) = eps_for(
            &s,
            slice(
                "ns",
                "web",
                80,
                &[("10.42.0.2", true, true, false, "node1"), ("10.42.0.3", true, true, false, "other")],
            ),
        );
        let c = categorize(&eps, &sp);
        assert!(c.cluster.is_empty(), "Cluster endpoints are not used");
        assert_eq!(ips(&c.local), vec!["10.42.0.2"]);
        assert_eq!(ips(&c.reachable), vec!["10.42.0.2"]);
        assert!(c.has_any);
    }

    #[test]
    fn slices_of_other_services_ports_and_families_are_ignored() {
        let s = svc("ns", "web", "10.43.0.5", 80);
        let mut other_port = slice("ns", "web", 80, &[("10.42.0.7", true, true, false, "node1")]);
        other_port.ports.as_mut().expect("ports")[0].name = Some("metrics".into());
        let mut v6 = slice("ns", "web", 80, &[("fd00::1", true, true, false, "node1")]);
        v6.address_type = "IPv6".into();
        let other_svc = slice("ns", "db", 80, &[("10.42.0.8", true, true, false, "node1")]);
        let slices: Vec<_> = [other_port, v6, other_svc].into_iter().map(Arc::new).collect();
        let idx = SliceIndex::new(&slices);
        assert!(idx.endpoints(&service_ports(&s)[0], "node1").is_empty());
    }
}
