//! The legacy Endpoints object of a Service as a pure function (upstream `endpoint` controller):
//! one address per selected pod (ready ones under `addresses`, others under
//! `notReadyAddresses`), ports resolved per pod, subsets regrouped so that addresses sharing
//! the same ports share a subset, at most 1000 addresses.

use super::ports::find_port;
use super::slices::{
    is_ip_set, should_pod_be_in_endpoints, should_set_hostname, LABEL_HEADLESS, TRIGGER_TIME_ANNOTATION,
};
use crate::core::pod;
use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort, EndpointSubset, Endpoints, ObjectReference, Pod, Service,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::{BTreeMap, BTreeSet};

pub const OVER_CAPACITY_ANNOTATION: &str = "endpoints.kubernetes.io/over-capacity";
pub const MAX_CAPACITY: usize = 1000;

fn is_ipv6(ip: &str) -> bool {
    ip.parse::<std::net::IpAddr>().is_ok_and(|a| a.is_ipv6())
}

/// The pod IP of the service's (first) family; headless services without families take the
/// pod's primary IP.
fn pod_address(svc: &Service, p: &Pod) -> Option<String> {
    let ips = pod::ips(p);
    let spec = svc.spec.as_ref();
    let want_v6 = if let Some(f) = spec.and_then(|s| s.ip_families.as_ref()).and_then(|f| f.first()) {
        f == "IPv6"
    } else if is_ip_set(svc) {
        is_ipv6(spec.and_then(|s| s.cluster_ip.as_deref()).unwrap_or(""))
    } else {
        return ips.first().map(|s| s.to_string());
    };
    ips.into_iter().find(|ip| is_ipv6(ip) == want_v6).map(str::to_string)
}

/// (address, ready) pairs per port; `None` port stands for "no ports" (headless, portless).
type ByPort =
    BTreeMap<Option<(String, i32, String, Option<String>)>, BTreeMap<(String, String), (EndpointAddress, bool)>>;

/// The subsets for `svc` over `pods`.
pub fn subsets(svc: &Service, pods: &[&Pod]) -> Vec<EndpointSubset> {
    let spec = svc.spec.as_ref();
    let tolerate_unready = spec.and_then(|s| s.publish_not_ready_addresses).unwrap_or(false);
    let ports = spec.and_then(|s| s.ports.clone()).unwrap_or_default();
    let headless_portless = ports.is_empty() && spec.and_then(|s| s.cluster_ip.as_deref()) == Some("None");
    let mut by_port: ByPort = BTreeMap::new();
    for p in pods {
        if !should_pod_be_in_endpoints(p, tolerate_unready) {
            continue;
        }
        let Some(ip) = pod_address(svc, p) else { continue };
        let address = EndpointAddress {
            ip: ip.clone(),
            hostname: if should_set_hostname(p, svc) { p.spec.as_ref().and_then(|s| s.hostname.clone()) } else { None },
            node_name: p.spec.as_ref().and_then(|s| s.node_name.clone()),
            target_ref: Some(ObjectReference {
                kind: Some("Pod".into()),
                namespace: p.metadata.namespace.clone(),
                name: p.metadata.name.clone(),
                uid: p.metadata.uid.clone(),
                ..Default::default()
            }),
        };
        let ready = tolerate_unready || pod::is_ready(p);
        let key = (ip, p.metadata.uid.clone().unwrap_or_default());
        let mut put = |port_key| {
            let entry = by_port.entry(port_key).or_default().entry(key.clone()).or_insert((address.clone(), ready));
            // An address ready for one port is not downgraded by another.
            entry.1 |= ready;
        };
        if ports.is_empty() {
            if headless_portless {
                put(None);
            }
            continue;
        }
        for sp in &ports {
            let Some(num) = find_port(p, sp) else { continue };
            put(Some((
                sp.name.clone().unwrap_or_default(),
                num,
                sp.protocol.clone().unwrap_or_else(|| "TCP".into()),
                sp.app_protocol.clone(),
            )));
        }
    }
    repack(by_port)
}

/// (ready addresses, not-ready addresses, ports) of one subset being built.
type Group = (Vec<EndpointAddress>, Vec<EndpointAddress>, Vec<EndpointPort>);
/// The (ip, pod uid) and readiness of every address offering a port.
type Signature = Vec<((String, String), bool)>;

/// Groups ports by the exact set of (address, readiness) that offers them.
fn repack(by_port: ByPort) -> Vec<EndpointSubset> {
    let mut groups: BTreeMap<Signature, Group> = BTreeMap::new();
    for (port, addrs) in by_port {
        let signature: Signature = addrs.iter().map(|(k, (_, r))| (k.clone(), *r)).collect();
        let entry = groups.entry(signature).or_insert_with(|| {
            let mut ready = Vec::new();
            let mut not_ready = Vec::new();
            for (a, r) in addrs.into_values() {
                if r {
                    ready.push(a);
                } else {
                    not_ready.push(a);
                }
            }
            (ready, not_ready, Vec::new())
        });
        if let Some((name, port, protocol, app_protocol)) = port {
            entry.2.push(EndpointPort {
                name: Some(name).filter(|n| !n.is_empty()),
                port,
                protocol: Some(protocol),
                app_protocol,
            });
        }
    }
    groups
        .into_values()
        .map(|(ready, not_ready, ports)| EndpointSubset {
            addresses: Some(ready).filter(|v| !v.is_empty()),
            not_ready_addresses: Some(not_ready).filter(|v| !v.is_empty()),
            ports: Some(ports).filter(|v| !v.is_empty()),
        })
        .collect()
}

fn address_count(subsets: &[EndpointSubset]) -> usize {
    subsets
        .iter()
        .map(|s| s.addresses.as_ref().map_or(0, Vec::len) + s.not_ready_addresses.as_ref().map_or(0, Vec::len))
        .sum()
}

/// Keeps at most [`MAX_CAPACITY`] addresses, ready ones first; returns whether any were cut.
pub fn truncate(subsets: &mut [EndpointSubset]) -> bool {
    if address_count(subsets) <= MAX_CAPACITY {
        return false;
    }
    let mut budget = MAX_CAPACITY;
    for s in subsets.iter_mut() {
        if let Some(a) = s.addresses.as_mut() {
            a.truncate(budget);
            budget -= a.len();
        }
    }
    for s in subsets.iter_mut() {
        if let Some(a) = s.not_ready_addresses.as_mut() {
            a.truncate(budget);
            budget -= a.len();
        }
    }
    true
}

/// The labels of a service's Endpoints: the service's, plus the headless marker.
pub fn labels(svc: &Service) -> BTreeMap<String, String> {
    let mut l = svc.metadata.labels.clone().unwrap_or_default();
    if is_ip_set(svc) {
        l.remove(LABEL_HEADLESS);
    } else {
        l.insert(LABEL_HEADLESS.into(), String::new());
    }
    l
}

/// The Endpoints to write for `svc`, or `None` if `current` is already right. `trigger` is the
/// last-change-trigger-time to record (cleared when `None`).
pub fn desired(svc: &Service, pods: &[&Pod], current: Option<&Endpoints>, trigger: Option<&str>) -> Option<Endpoints> {
    let mut subsets = subsets(svc, pods);
    let truncated = truncate(&mut subsets);
    if let Some(cur) = current {
        let cur_subsets = cur.subsets.clone().unwrap_or_default();
        let mut cur_labels = cur.metadata.labels.clone().unwrap_or_default();
        cur_labels.remove(LABEL_HEADLESS);
        let svc_labels = svc.metadata.labels.clone().unwrap_or_default();
        let cur_truncated = cur.metadata.annotations.as_ref().and_then(|a| a.get(OVER_CAPACITY_ANNOTATION)).is_some();
        if same_subsets(&cur_subsets, &subsets) && cur_labels == svc_labels && cur_truncated == truncated {
            return None;
        }
    }
    let mut ep = current.cloned().unwrap_or_else(|| Endpoints {
        metadata: ObjectMeta {
            name: svc.metadata.name.clone(),
            namespace: svc.metadata.namespace.clone(),
            ..Default::default()
        },
        ..Default::default()
    });
    ep.subsets = Some(subsets);
    ep.metadata.labels = Some(labels(svc));
    let annotations = ep.metadata.annotations.get_or_insert_with(BTreeMap::new);
    match trigger {
        Some(t) => {
            annotations.insert(TRIGGER_TIME_ANNOTATION.into(), t.into());
        }
        None => {
            annotations.remove(TRIGGER_TIME_ANNOTATION);
        }
    }
    if truncated {
        annotations.insert(OVER_CAPACITY_ANNOTATION.into(), "truncated".into());
    } else {
        annotations.remove(OVER_CAPACITY_ANNOTATION);
    }
    Some(ep)
}

/// Subsets equal up to the pods' resourceVersions in target references.
fn same_subsets(a: &[EndpointSubset], b: &[EndpointSubset]) -> bool {
    let strip = |s: &[EndpointSubset]| -> Vec<EndpointSubset> {
        s.iter()
            .cloned()
            .map(|mut s| {
                for a in s.addresses.iter_mut().flatten().chain(s.not_ready_addresses.iter_mut().flatten()) {
                    if let Some(t) = a.target_ref.as_mut() {
                        t.resource_version = None;
                    }
                }
                s
            })
            .collect()
    };
    let (a, b) = (strip(a), strip(b));
    a.len() == b.len() && {
        let set = |v: &[EndpointSubset]| -> BTreeSet<String> { v.iter().map(|s| format!("{s:?}")).collect() };
        set(&a) == set(&b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        Container, ContainerPort, PodCondition, PodIP, PodSpec, PodStatus, ServicePort, ServiceSpec,
    };
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    fn svc(ports: Vec<ServicePort>, cluster_ip: &str) -> Service {
        Service {
            metadata: ObjectMeta { name: Some("web".into()), namespace: Some("ns".into()), ..Default::default() },
            spec: Some(ServiceSpec {
                cluster_ip: Some(cluster_ip.into()),
                selector: Some(BTreeMap::from([("app".to_string(), "web".to_string())])),
                ports: Some(ports),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn http() -> ServicePort {
        ServicePort {
            name: Some("http".into()),
            port: 80,
            target_port: Some(IntOrString::String("web".into())),
            protocol: Some("TCP".into()),
            ..Default::default()
        }
    }

    fn pod(name: &str, ip: &str, ready: bool, port: i32) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: Some(name.into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some("node1".into()),
                containers: vec![Container {
                    name: "c".into(),
                    ports: Some(vec![ContainerPort {
                        name: Some("web".into()),
                        container_port: port,
                        ..Default::default()
                    }]),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(PodStatus {
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

    fn ips(v: &Option<Vec<EndpointAddress>>) -> Vec<String> {
        v.iter().flatten().map(|a| a.ip.clone()).collect()
    }

    #[test]
    fn ready_and_not_ready_pods_share_a_subset_per_port() {
        let (a, b) = (pod("a", "10.42.0.1", true, 8080), pod("b", "10.42.0.2", false, 8080));
        let s = subsets(&svc(vec![http()], "10.43.0.5"), &[&a, &b]);
        assert_eq!(s.len(), 1);
        assert_eq!(ips(&s[0].addresses), vec!["10.42.0.1"]);
        assert_eq!(ips(&s[0].not_ready_addresses), vec!["10.42.0.2"]);
        assert_eq!(s[0].ports.as_ref().map(|p| p[0].port), Some(8080));
        let a0 = &s[0].addresses.as_ref().expect("addresses")[0];
        assert_eq!(a0.target_ref.as_ref().and_then(|t| t.name.as_deref()), Some("a"));
        assert_eq!(a0.node_name.as_deref(), Some("node1"));
    }

    #[test]
    fn pods_with_different_port_numbers_get_different_subsets() {
        let (a, b) = (pod("a", "10.42.0.1", true, 8080), pod("b", "10.42.0.2", true, 9090));
        let s = subsets(&svc(vec![http()], "10.43.0.5"), &[&a, &b]);
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn terminating_pods_are_left_out_unless_not_ready_addresses_are_published() {
        let mut a = pod("a", "10.42.0.1", true, 8080);
        a.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH));
        let mut service = svc(vec![http()], "10.43.0.5");
        assert!(subsets(&service, &[&a]).is_empty());
        service.spec.as_mut().expect("spec").publish_not_ready_addresses = Some(true);
        assert_eq!(ips(&subsets(&service, &[&a])[0].addresses), vec!["10.42.0.1"]);
    }

    #[test]
    fn a_headless_service_without_ports_lists_addresses_without_ports() {
        let a = pod("a", "10.42.0.1", true, 8080);
        let s = subsets(&svc(vec![], "None"), &[&a]);
        assert_eq!(s.len(), 1);
        assert!(s[0].ports.is_none());
        assert!(subsets(&svc(vec![], "10.43.0.5"), &[&a]).is_empty(), "a portless ClusterIP service gets nothing");
    }

    #[test]
    fn unchanged_endpoints_need_no_write_and_headless_is_labelled() {
        let a = pod("a", "10.42.0.1", true, 8080);
        let service = svc(vec![http()], "None");
        let ep = desired(&service, &[&a], None, Some("t")).expect("create");
        assert!(ep.metadata.labels.as_ref().is_some_and(|l| l.contains_key(LABEL_HEADLESS)));
        assert_eq!(
            ep.metadata.annotations.as_ref().and_then(|a| a.get(TRIGGER_TIME_ANNOTATION)).map(String::as_str),
            Some("t")
        );
        assert!(desired(&service, &[&a], Some(&ep), None).is_none());
        let b = pod("b", "10.42.0.2", true, 8080);
        assert!(desired(&service, &[&a, &b], Some(&ep), None).is_some());
    }

    #[test]
    fn more_than_a_thousand_addresses_are_truncated_and_annotated() {
        let pods: Vec<Pod> = (0..1005)
            .map(|i| pod(&format!("p{i}"), &format!("10.42.{}.{}", i / 250, i % 250 + 1), true, 8080))
            .collect();
        let refs: Vec<&Pod> = pods.iter().collect();
        let ep = desired(&svc(vec![http()], "10.43.0.5"), &refs, None, None).expect("create");
        assert_eq!(address_count(ep.subsets.as_deref().unwrap_or(&[])), MAX_CAPACITY);
        assert_eq!(
            ep.metadata.annotations.as_ref().and_then(|a| a.get(OVER_CAPACITY_ANNOTATION)).map(String::as_str),
            Some("truncated")
        );
    }
}
