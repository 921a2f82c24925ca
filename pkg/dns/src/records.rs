//! The cluster's DNS data: an immutable snapshot built from Services, EndpointSlices and
//! Namespaces, which [`crate::resolve()`] answers from. Pure: no I/O, no clock.
//!
//! Everything is keyed by lowercase names (DNS comparisons are case-insensitive). Only *ready*
//! endpoints are kept (`conditions.ready` absent or true; the EndpointSlice controller already
//! marks not-ready pods ready when their Service publishes not-ready addresses). An endpoint's
//! hostname is its `hostname` field (set by the EndpointSlice controller for pods whose
//! `spec.subdomain` names the Service) or, failing that, its address with `.`/`:` replaced by `-`,
//! as CoreDNS does.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;

/// The label that ties an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// A named or unnamed port with its lowercase protocol (`tcp`, `udp`, `sctp`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct PortRecord {
    pub name: String,
    pub protocol: String,
    pub port: u16,
}

/// One ready address of a Service's endpoints with the hostname it answers to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EndpointRecord {
    pub hostname: String,
    pub address: IpAddr,
    pub ports: Vec<PortRecord>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ServiceKind {
    /// A virtual IP per family (may be empty while the API has not allocated one).
    ClusterIp(Vec<IpAddr>),
    /// `clusterIP: None`: the ready endpoints answer for the Service.
    Headless,
    /// `type: ExternalName`: a CNAME to this (lowercase, no trailing dot) name.
    ExternalName(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ServiceRecord {
    pub kind: ServiceKind,
    pub ports: Vec<PortRecord>,
    pub endpoints: Vec<EndpointRecord>,
}

/// (namespace, name), lowercase.
type ServiceKey = (String, String);
/// A Service's ready (address, hostname) pairs with the ports each serves.
type ReadyEndpoints = BTreeMap<(IpAddr, String), BTreeSet<PortRecord>>;

/// The DNS view of the cluster at one moment.
#[derive(Clone, Debug)]
pub struct Records {
    /// Cluster domain, lowercase, no leading or trailing dot (`cluster.local`).
    pub(crate) zone: String,
    /// The DNS server's own address, served as `ns.dns.<zone>`.
    pub(crate) dns_ip: IpAddr,
    /// SOA serial: changes whenever the data does.
    pub(crate) serial: u32,
    /// False until every watch has listed once: cluster names then get SERVFAIL, not NXDOMAIN.
    pub(crate) synced: bool,
    pub(crate) namespaces: HashSet<String>,
    pub(crate) services: HashMap<ServiceKey, ServiceRecord>,
    /// ClusterIP ▶ `svc.ns.svc.zone` (a Service IP answers with its Service alone).
    pub(crate) reverse_services: HashMap<IpAddr, String>,
    /// Endpoint IP ▶ `hostname.svc.ns.svc.zone` for every Service it backs, sorted.
    pub(crate) reverse_endpoints: HashMap<IpAddr, BTreeSet<String>>,
}

impl Records {
    /// No data yet: cluster names answer SERVFAIL until the first [`Records::build`].
    pub fn unsynced(cluster_domain: &str, dns_ip: IpAddr) -> Records {
        Records {
            zone: normalize_domain(cluster_domain),
            dns_ip,
            serial: 0,
            synced: false,
            namespaces: HashSet::new(),
            services: HashMap::new(),
            reverse_services: HashMap::new(),
            reverse_endpoints: HashMap::new(),
        }
    }

    /// Builds the records of `services`, their `slices` and the existing `namespaces`.
    pub fn build<'a>(
        cluster_domain: &str,
        dns_ip: IpAddr,
        serial: u32,
        services: impl IntoIterator<Item = &'a Service>,
        slices: impl IntoIterator<Item = &'a EndpointSlice>,
        namespaces: impl IntoIterator<Item = &'a Namespace>,
    ) -> Records {
        let mut r = Records::unsynced(cluster_domain, dns_ip);
        r.serial = serial;
        r.synced = true;
        r.namespaces =
            namespaces.into_iter().filter_map(|n| n.metadata.name.as_deref()).map(str::to_lowercase).collect();

        // Ready endpoints per service, merged across slices: (address, hostname) ▶ ports.
        let mut endpoints: HashMap<ServiceKey, ReadyEndpoints> = HashMap::new();
        for slice in slices {
            let (Some(ns), Some(svc)) = (
                slice.metadata.namespace.as_deref(),
                slice.metadata.labels.as_ref().and_then(|l| l.get(SERVICE_NAME_LABEL)),
            ) else {
                continue;
            };
            let ports: Vec<PortRecord> = slice
                .ports
                .iter()
                .flatten()
                .filter_map(|p| {
                    let port = u16::try_from(p.port?).ok()?;
                    Some(PortRecord {
                        name: p.name.as_deref().unwrap_or("").to_lowercase(),
                        protocol: p.protocol.as_deref().unwrap_or("TCP").to_lowercase(),
                        port,
                    })
                })
                .collect();
            let entry = endpoints.entry((ns.to_lowercase(), svc.to_lowercase())).or_default();
            for ep in &slice.endpoints {
                if ep.conditions.as_ref().and_then(|c| c.ready) == Some(false) {
                    continue;
                }
                for address in ep.addresses.iter().filter_map(|a| a.parse::<IpAddr>().ok()) {
                    let hostname = match ep.hostname.as_deref() {
                        Some(h) if !h.is_empty() => h.to_lowercase(),
                        _ => dashed(address),
                    };
                    entry.entry((address, hostname)).or_default().extend(ports.iter().cloned());
                }
            }
        }

        for svc in services {
            let (Some(ns), Some(name)) = (svc.metadata.namespace.as_deref(), svc.metadata.name.as_deref()) else {
                continue;
            };
            let key = (ns.to_lowercase(), name.to_lowercase());
            let spec = svc.spec.as_ref();
            let fqdn = format!("{}.{}.svc.{}", key.1, key.0, r.zone);
            let kind = service_kind(svc);
            if let ServiceKind::ClusterIp(ips) = &kind {
                for ip in ips {
                    r.reverse_services.entry(*ip).or_insert_with(|| fqdn.clone());
                }
            }
            let ports = spec
                .and_then(|s| s.ports.as_ref())
                .into_iter()
                .flatten()
                .filter_map(|p| {
                    Some(PortRecord {
                        name: p.name.as_deref().unwrap_or("").to_lowercase(),
                        protocol: p.protocol.as_deref().unwrap_or("TCP").to_lowercase(),
                        port: u16::try_from(p.port).ok()?,
                    })
                })
                .collect();
            let eps: Vec<EndpointRecord> = match kind {
                ServiceKind::ExternalName(_) => Vec::new(),
                _ => endpoints
                    .remove(&key)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|((address, hostname), ports)| EndpointRecord {
                        hostname,
                        address,
                        ports: ports.into_iter().collect(),
                    })
                    .collect(),
            };
            for ep in &eps {
                r.reverse_endpoints.entry(ep.address).or_default().insert(format!("{}.{fqdn}", ep.hostname));
            }
            r.services.insert(key, ServiceRecord { kind, ports, endpoints: eps });
        }
        r
    }

    /// The cluster domain this snapshot serves (`cluster.local`).
    pub fn cluster_domain(&self) -> &str {
        &self.zone
    }

    /// Whether the snapshot reflects a complete listing of the API.
    pub fn is_synced(&self) -> bool {
        self.synced
    }

    /// The number of Services known.
    pub fn service_count(&self) -> usize {
        self.services.len()
    }
}

fn service_kind(svc: &Service) -> ServiceKind {
    let spec = svc.spec.as_ref();
    if spec.and_then(|s| s.type_.as_deref()) == Some("ExternalName") {
        let target = spec.and_then(|s| s.external_name.as_deref()).unwrap_or("");
        return ServiceKind::ExternalName(normalize_domain(target));
    }
    let primary = spec.and_then(|s| s.cluster_ip.as_deref()).unwrap_or("");
    if primary.eq_ignore_ascii_case("None") {
        return ServiceKind::Headless;
    }
    let mut ips: Vec<IpAddr> = Vec::new();
    let listed = spec.and_then(|s| s.cluster_ips.as_ref()).into_iter().flatten().map(String::as_str);
    for ip in std::iter::once(primary).chain(listed).filter_map(|ip| ip.parse().ok()) {
        if !ips.contains(&ip) {
            ips.push(ip);
        }
    }
    ServiceKind::ClusterIp(ips)
}

/// `10.42.0.5` ▶ `10-42-0-5`; `fd00::5` ▶ `fd00--5`.
pub(crate) fn dashed(ip: IpAddr) -> String {
    ip.to_string().replace(['.', ':'], "-")
}

/// Lowercase, without surrounding dots.
pub(crate) fn normalize_domain(d: &str) -> String {
    d.trim_matches('.').to_ascii_lowercase()
}

#[cfg(test)]
pub(crate) mod fixtures {
    //! Builders for the API objects the tests feed to [`Records::build`].
    use super::*;
    use k8s_openapi::api::core::v1::{ServicePort, ServiceSpec};
    use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    pub fn namespace(name: &str) -> Namespace {
        Namespace { metadata: ObjectMeta { name: Some(name.into()), ..Default::default() }, ..Default::default() }
    }

    /// A Service with `cluster_ip` ("None" for headless) and (name, protocol, port) ports.
    pub fn service(ns: &str, name: &str, cluster_ip: &str, ports: &[(&str, &str, i32)]) -> Service {
        Service {
            metadata: ObjectMeta { name: Some(name.into()), namespace: Some(ns.into()), ..Default::default() },
            spec: Some(ServiceSpec {
                cluster_ip: Some(cluster_ip.into()),
                cluster_ips: (cluster_ip != "None").then(|| vec![cluster_ip.into()]),
                ports: Some(
                    ports
                        .iter()
                        .map(|(n, proto, port)| ServicePort {
                            name: (!n.is_empty()).then(|| n.to_string()),
                            protocol: Some(proto.to_string()),
                            port: *port,
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    pub fn external(ns: &str, name: &str, target: &str) -> Service {
        Service {
            metadata: ObjectMeta { name: Some(name.into()), namespace: Some(ns.into()), ..Default::default() },
            spec: Some(ServiceSpec {
                type_: Some("ExternalName".into()),
                external_name: Some(target.into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// An EndpointSlice of `svc` with (address, hostname, ready) endpoints and ports.
    pub fn slice(
        ns: &str,
        svc: &str,
        endpoints: &[(&str, Option<&str>, Option<bool>)],
        ports: &[(&str, &str, i32)],
    ) -> EndpointSlice {
        EndpointSlice {
            metadata: ObjectMeta {
                name: Some(format!("{svc}-abc")),
                namespace: Some(ns.into()),
                labels: Some([(SERVICE_NAME_LABEL.to_string(), svc.to_string())].into()),
                ..Default::default()
            },
            address_type: "IPv4".into(),
            endpoints: endpoints
                .iter()
                .map(|(ip, host, ready)| Endpoint {
                    addresses: vec![ip.to_string()],
                    hostname: host.map(str::to_string),
                    conditions: Some(EndpointConditions { ready: *ready, ..Default::default() }),
                    ..Default::default()
                })
                .collect(),
            ports: Some(
                ports
                    .iter()
                    .map(|(n, proto, port)| EndpointPort {
                        name: Some(n.to_string()),
                        protocol: Some(proto.to_string()),
                        port: Some(*port),
                        ..Default::default()
                    })
                    .collect(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn not_ready_endpoints_are_left_out() {
        let svc = service("default", "db", "None", &[]);
        let sl = slice(
            "default",
            "db",
            &[("10.42.0.5", None, Some(true)), ("10.42.0.6", None, Some(false)), ("10.42.0.7", None, None)],
            &[("pg", "TCP", 5432)],
        );
        let r = Records::build("cluster.local", ip("10.43.0.10"), 1, [&svc], [&sl], [&namespace("default")]);
        let eps = &r.services[&("default".to_string(), "db".to_string())].endpoints;
        let addrs: Vec<IpAddr> = eps.iter().map(|e| e.address).collect();
        assert_eq!(addrs, vec![ip("10.42.0.5"), ip("10.42.0.7")]);
        assert_eq!(eps[0].hostname, "10-42-0-5");
    }

    #[test]
    fn endpoints_repeated_across_slices_are_merged() {
        let svc = service("default", "db", "None", &[]);
        let a = slice("default", "db", &[("10.42.0.5", Some("db-0"), Some(true))], &[("pg", "TCP", 5432)]);
        let b = slice("default", "db", &[("10.42.0.5", Some("db-0"), Some(true))], &[("metrics", "TCP", 9187)]);
        let r = Records::build("cluster.local", ip("10.43.0.10"), 1, [&svc], [&a, &b], []);
        let eps = &r.services[&("default".to_string(), "db".to_string())].endpoints;
        assert_eq!(eps.len(), 1);
        assert_eq!(eps[0].ports.len(), 2);
    }

    #[test]
    fn names_are_stored_lowercase_and_the_zone_without_dots() {
        let svc = service("Default", "Web", "10.43.0.20", &[("HTTP", "TCP", 80)]);
        let r = Records::build(".Cluster.Local.", ip("10.43.0.10"), 1, [&svc], [], []);
        assert_eq!(r.cluster_domain(), "cluster.local");
        let rec = &r.services[&("default".to_string(), "web".to_string())];
        assert_eq!(rec.ports[0].name, "http");
        assert_eq!(rec.ports[0].protocol, "tcp");
        assert_eq!(r.reverse_services[&ip("10.43.0.20")], "web.default.svc.cluster.local");
    }

    #[test]
    fn service_ip_is_the_reverse_name_of_the_service_and_endpoint_ips_of_their_hostnames() {
        let svc = service("default", "web", "10.43.0.20", &[("http", "TCP", 80)]);
        let sl = slice("default", "web", &[("10.42.0.5", None, Some(true))], &[("http", "TCP", 8080)]);
        let r = Records::build("cluster.local", ip("10.43.0.10"), 1, [&svc], [&sl], []);
        assert_eq!(
            r.reverse_endpoints[&ip("10.42.0.5")].iter().collect::<Vec<_>>(),
            vec!["10-42-0-5.web.default.svc.cluster.local"]
        );
    }

    #[test]
    fn slices_of_external_name_services_are_ignored() {
        let svc = external("default", "ext", "example.com.");
        let sl = slice("default", "ext", &[("10.42.0.5", None, Some(true))], &[]);
        let r = Records::build("cluster.local", ip("10.43.0.10"), 1, [&svc], [&sl], []);
        let rec = &r.services[&("default".to_string(), "ext".to_string())];
        assert_eq!(rec.kind, ServiceKind::ExternalName("example.com".into()));
        assert!(rec.endpoints.is_empty());
        assert!(r.reverse_endpoints.is_empty());
    }

    #[test]
    fn a_thousand_services_with_ten_endpoints_each_build_in_one_pass() {
        let services: Vec<Service> = (0..1000)
            .map(|i| {
                service("load", &format!("s{i}"), &format!("10.43.{}.{}", i / 250, i % 250 + 1), &[("http", "TCP", 80)])
            })
            .collect();
        let addresses: Vec<Vec<String>> =
            (0..1000).map(|i| (0..10).map(|e| format!("10.42.{}.{}", i / 25, (i % 25) * 10 + e)).collect()).collect();
        let slices: Vec<EndpointSlice> = (0..1000)
            .map(|i| {
                let eps: Vec<(&str, Option<&str>, Option<bool>)> =
                    addresses[i].iter().map(|a| (a.as_str(), None, Some(true))).collect();
                slice("load", &format!("s{i}"), &eps, &[("http", "TCP", 8080)])
            })
            .collect();
        let started = std::time::Instant::now();
        let r = Records::build("cluster.local", ip("10.43.0.10"), 1, &services, &slices, [&namespace("load")]);
        let took = started.elapsed();
        assert_eq!(r.service_count(), 1000);
        assert_eq!(r.reverse_services.len(), 1000);
        assert_eq!(r.reverse_endpoints.len(), 10_000);
        println!("built 1000 Services / 10000 endpoints in {took:?}");
    }

    #[test]
    fn dashed_names_cover_both_families() {
        assert_eq!(dashed(ip("10.42.0.5")), "10-42-0-5");
        assert_eq!(dashed(ip("fd00::5")), "fd00--5");
    }
}
