//! The proxy's view of a Service: one [`ServicePort`] per port the proxy programs, with the
//! addresses it is reached on and its traffic policies (upstream's `BaseServicePortInfo`).
//! Headless and ExternalName Services, Services without an IPv4 ClusterIP and Services k1s serves
//! itself on a local address (annotation [`NODE_LOCAL_ANNOTATION`]) yield no ports.

use crate::cidr::Cidr;
use k8s_openapi::api::core::v1::Service;
use std::fmt;
use std::net::Ipv4Addr;

/// Services annotated `k1s.io/node-local: "true"` (the cluster DNS Service) have a ClusterIP that
/// is a real local address served by k1s itself: the proxy leaves them alone.
pub const NODE_LOCAL_ANNOTATION: &str = "k1s.io/node-local";

/// Upstream's default `sessionAffinityConfig.clientIP.timeoutSeconds` (3 hours).
pub const DEFAULT_AFFINITY_TIMEOUT_SECONDS: i32 = 10800;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
}

impl Protocol {
    /// Parses a Kubernetes protocol name; absent means TCP.
    pub fn parse(p: Option<&str>) -> Option<Self> {
        match p.unwrap_or("TCP") {
            "TCP" => Some(Protocol::Tcp),
            "UDP" => Some(Protocol::Udp),
            "SCTP" => Some(Protocol::Sctp),
            _ => None,
        }
    }

    /// The nft keyword (`tcp`, `udp`, `sctp`).
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Sctp => "sctp",
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One port of a Service, as the proxy programs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServicePort {
    pub namespace: String,
    pub name: String,
    /// `spec.ports[].name` (may be empty for a single-port Service).
    pub port_name: String,
    pub protocol: Protocol,
    pub cluster_ip: Ipv4Addr,
    pub port: u16,
    pub node_port: Option<u16>,
    pub external_ips: Vec<Ipv4Addr>,
    /// `status.loadBalancer.ingress[].ip` of LoadBalancer Services (not `ipMode: Proxy`).
    pub load_balancer_vips: Vec<Ipv4Addr>,
    pub load_balancer_source_ranges: Vec<Cidr>,
    /// `Some(timeout seconds)` for `sessionAffinity: ClientIP`.
    pub affinity_timeout: Option<u32>,
    pub external_policy_local: bool,
    pub internal_policy_local: bool,
}

impl ServicePort {
    /// Reachable from outside the cluster: a NodePort, an external IP or a load-balancer VIP.
    pub fn externally_accessible(&self) -> bool {
        self.node_port.is_some() || !self.external_ips.is_empty() || !self.load_balancer_vips.is_empty()
    }

    /// Cluster-wide endpoints are needed for internal Cluster policy, and for any external
    /// traffic (even with external Local policy, to short-circuit pod and host traffic).
    pub fn uses_cluster_endpoints(&self) -> bool {
        !self.internal_policy_local || self.externally_accessible()
    }

    pub fn uses_local_endpoints(&self) -> bool {
        self.internal_policy_local || (self.external_policy_local && self.externally_accessible())
    }

    /// `namespace/name/protocol/portname`: the unique part of this port's chain names.
    pub fn chain_base(&self) -> String {
        format!("{}/{}/{}/{}", self.namespace, self.name, self.protocol, self.port_name)
    }
}

fn is_node_local(svc: &Service) -> bool {
    svc.metadata.annotations.as_ref().and_then(|a| a.get(NODE_LOCAL_ANNOTATION)).is_some_and(|v| v == "true")
}

fn ipv4(s: &str) -> Option<Ipv4Addr> {
    s.parse().ok()
}

/// The ClusterIP of the IPv4 family (`spec.clusterIPs`, falling back to `spec.clusterIP`).
fn cluster_ipv4(svc: &Service) -> Option<Ipv4Addr> {
    let spec = svc.spec.as_ref()?;
    spec.cluster_ips.iter().flatten().chain(spec.cluster_ip.iter()).find_map(|ip| ipv4(ip))
}

/// Whether the proxy programs this Service at all.
pub fn is_programmed(svc: &Service) -> bool {
    let Some(spec) = svc.spec.as_ref() else { return false };
    spec.type_.as_deref() != Some("ExternalName") && !is_node_local(svc) && cluster_ipv4(svc).is_some()
}

/// The ClusterIP of a node-local Service with its ports (for the policy exemption), or `None`.
pub fn node_local_ports(svc: &Service) -> Option<(Ipv4Addr, Vec<(Protocol, u16)>)> {
    if !is_node_local(svc) {
        return None;
    }
    let ip = cluster_ipv4(svc)?;
    let ports = svc
        .spec
        .as_ref()?
        .ports
        .iter()
        .flatten()
        .filter_map(|p| Some((Protocol::parse(p.protocol.as_deref())?, u16::try_from(p.port).ok()?)))
        .collect();
    Some((ip, ports))
}

/// The ports the proxy programs for `svc` (none for Services it does not program).
pub fn service_ports(svc: &Service) -> Vec<ServicePort> {
    if !is_programmed(svc) {
        return Vec::new();
    }
    let (Some(spec), Some(cluster_ip)) = (svc.spec.as_ref(), cluster_ipv4(svc)) else { return Vec::new() };
    let svc_type = spec.type_.as_deref().unwrap_or("ClusterIP");
    let external_ips: Vec<Ipv4Addr> = spec.external_ips.iter().flatten().filter_map(|s| ipv4(s)).collect();
    let load_balancer_vips: Vec<Ipv4Addr> = if svc_type == "LoadBalancer" {
        svc.status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|lb| lb.ingress.as_ref())
            .into_iter()
            .flatten()
            .filter(|i| i.ip_mode.as_deref() != Some("Proxy"))
            .filter_map(|i| i.ip.as_deref().and_then(ipv4))
            .collect()
    } else {
        Vec::new()
    };
    let load_balancer_source_ranges: Vec<Cidr> =
        spec.load_balancer_source_ranges.iter().flatten().filter_map(|s| s.parse().ok()).collect();
    let affinity_timeout = (spec.session_affinity.as_deref() == Some("ClientIP")).then(|| {
        let t = spec
            .session_affinity_config
            .as_ref()
            .and_then(|c| c.client_ip.as_ref())
            .and_then(|c| c.timeout_seconds)
            .unwrap_or(DEFAULT_AFFINITY_TIMEOUT_SECONDS);
        u32::try_from(t.max(1)).unwrap_or(1)
    });
    let can_be_external = matches!(svc_type, "NodePort" | "LoadBalancer") || !external_ips.is_empty();
    let external_policy_local = can_be_external && spec.external_traffic_policy.as_deref() == Some("Local");
    let internal_policy_local = spec.internal_traffic_policy.as_deref() == Some("Local");
    let namespace = svc.metadata.namespace.clone().unwrap_or_else(|| "default".into());
    let name = svc.metadata.name.clone().unwrap_or_default();
    spec.ports
        .iter()
        .flatten()
        .filter_map(|p| {
            Some(ServicePort {
                namespace: namespace.clone(),
                name: name.clone(),
                port_name: p.name.clone().unwrap_or_default(),
                protocol: Protocol::parse(p.protocol.as_deref())?,
                cluster_ip,
                port: u16::try_from(p.port).ok().filter(|p| *p != 0)?,
                node_port: p.node_port.and_then(|n| u16::try_from(n).ok()).filter(|n| *n != 0),
                external_ips: external_ips.clone(),
                load_balancer_vips: load_balancer_vips.clone(),
                load_balancer_source_ranges: load_balancer_source_ranges.clone(),
                affinity_timeout,
                external_policy_local,
                internal_policy_local,
            })
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ServicePort as KPort, ServiceSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    /// A ClusterIP Service `ns/name` with one TCP port named `http`.
    pub(crate) fn svc(ns: &str, name: &str, ip: &str, port: i32) -> Service {
        Service {
            metadata: ObjectMeta { namespace: Some(ns.into()), name: Some(name.into()), ..Default::default() },
            spec: Some(ServiceSpec {
                cluster_ip: Some(ip.into()),
                cluster_ips: Some(vec![ip.into()]),
                type_: Some("ClusterIP".into()),
                ports: Some(vec![KPort { name: Some("http".into()), port, ..Default::default() }]),
                ..Default::default()
            }),
            status: None,
        }
    }

    #[test]
    fn headless_external_name_and_node_local_services_are_not_programmed() {
        let headless = svc("a", "h", "None", 80);
        assert!(service_ports(&headless).is_empty());
        let mut ext = svc("a", "e", "10.43.0.9", 80);
        ext.spec.as_mut().expect("spec").type_ = Some("ExternalName".into());
        assert!(service_ports(&ext).is_empty());
        let mut dns = svc("kube-system", "kube-dns", "10.43.0.10", 53);
        dns.metadata.annotations = Some([(NODE_LOCAL_ANNOTATION.to_string(), "true".to_string())].into());
        assert!(service_ports(&dns).is_empty());
        assert_eq!(node_local_ports(&dns), Some((Ipv4Addr::new(10, 43, 0, 10), vec![(Protocol::Tcp, 53)])));
        assert_eq!(service_ports(&svc("a", "b", "10.43.0.9", 80)).len(), 1);
    }

    #[test]
    fn external_policy_local_needs_an_externally_reachable_type() {
        let mut s = svc("a", "b", "10.43.0.9", 80);
        s.spec.as_mut().expect("spec").external_traffic_policy = Some("Local".into());
        assert!(!service_ports(&s)[0].external_policy_local, "ClusterIP ignores externalTrafficPolicy");
        s.spec.as_mut().expect("spec").type_ = Some("NodePort".into());
        assert!(service_ports(&s)[0].external_policy_local);
    }

    #[test]
    fn affinity_timeout_defaults_to_three_hours() {
        let mut s = svc("a", "b", "10.43.0.9", 80);
        s.spec.as_mut().expect("spec").session_affinity = Some("ClientIP".into());
        assert_eq!(service_ports(&s)[0].affinity_timeout, Some(10800));
    }

    #[test]
    fn load_balancer_vips_come_from_status_and_skip_proxy_mode() {
        use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, ServiceStatus};
        let mut s = svc("a", "b", "10.43.0.9", 80);
        s.spec.as_mut().expect("spec").type_ = Some("LoadBalancer".into());
        let ing = |ip: &str, mode: Option<&str>| LoadBalancerIngress {
            ip: Some(ip.into()),
            ip_mode: mode.map(String::from),
            ..Default::default()
        };
        s.status = Some(ServiceStatus {
            load_balancer: Some(LoadBalancerStatus {
                ingress: Some(vec![
                    ing("192.0.2.2", Some("VIP")),
                    ing("192.0.2.3", Some("Proxy")),
                    ing("192.0.2.4", None),
                ]),
            }),
            ..Default::default()
        });
        let p = &service_ports(&s)[0];
        assert_eq!(p.load_balancer_vips, vec![Ipv4Addr::new(192, 0, 2, 2), Ipv4Addr::new(192, 0, 2, 4)]);
        assert!(p.externally_accessible());
    }
}
