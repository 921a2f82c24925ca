//! Service ports resolved against a pod: a numeric targetPort is used as is; a named one is
//! looked up among the pod's container ports (and restartable init, i.e. sidecar, containers)
//! with the same protocol (upstream `podutil.FindPort`).

use k8s_openapi::api::core::v1::{Container, Pod, ServicePort};
use k8s_openapi::api::discovery::v1::EndpointPort;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

fn protocol(p: Option<&str>) -> &str {
    p.unwrap_or("TCP")
}

fn named_port(containers: &[Container], name: &str, proto: &str) -> Option<i32> {
    containers
        .iter()
        .flat_map(|c| c.ports.iter().flatten())
        .find(|p| p.name.as_deref() == Some(name) && protocol(p.protocol.as_deref()) == proto)
        .map(|p| p.container_port)
}

/// The pod's port number for `sp`, if it has one.
pub fn find_port(pod: &Pod, sp: &ServicePort) -> Option<i32> {
    match sp.target_port.as_ref() {
        None => Some(sp.port),
        Some(IntOrString::Int(n)) => Some(*n),
        Some(IntOrString::String(name)) => {
            let proto = protocol(sp.protocol.as_deref());
            let spec = pod.spec.as_ref()?;
            named_port(&spec.containers, name, proto).or_else(|| {
                let sidecars: Vec<Container> = spec
                    .init_containers
                    .iter()
                    .flatten()
                    .filter(|c| c.restart_policy.as_deref() == Some("Always"))
                    .cloned()
                    .collect();
                named_port(&sidecars, name, proto)
            })
        }
    }
}

/// The endpoint ports of `pod` for a service's ports; ports the pod lacks are left out.
pub fn endpoint_ports(ports: &[ServicePort], pod: &Pod) -> Vec<EndpointPort> {
    ports
        .iter()
        .filter_map(|sp| {
            let port = find_port(pod, sp)?;
            Some(EndpointPort {
                name: Some(sp.name.clone().unwrap_or_default()),
                port: Some(port),
                protocol: Some(protocol(sp.protocol.as_deref()).to_string()),
                app_protocol: sp.app_protocol.clone(),
            })
        })
        .collect()
}

/// A canonical key for a set of endpoint ports (upstream's `PortMapKey`): pods whose ports
/// resolve alike share slices.
pub fn port_key(ports: &[EndpointPort]) -> String {
    let mut parts: Vec<String> = ports
        .iter()
        .map(|p| {
            format!(
                "{}\u{1f}{}\u{1f}{}\u{1f}{}",
                p.name.as_deref().unwrap_or(""),
                p.port.unwrap_or(0),
                p.protocol.as_deref().unwrap_or("TCP"),
                p.app_protocol.as_deref().unwrap_or("")
            )
        })
        .collect();
    parts.sort();
    parts.join("\u{1e}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ContainerPort, PodSpec};

    fn pod(ports: &[(&str, i32, &str)]) -> Pod {
        Pod {
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    ports: Some(
                        ports
                            .iter()
                            .map(|(n, p, proto)| ContainerPort {
                                name: Some(n.to_string()),
                                container_port: *p,
                                protocol: Some(proto.to_string()),
                                ..Default::default()
                            })
                            .collect(),
                    ),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn sp(name: &str, port: i32, target: IntOrString) -> ServicePort {
        ServicePort {
            name: Some(name.into()),
            port,
            target_port: Some(target),
            protocol: Some("TCP".into()),
            ..Default::default()
        }
    }

    #[test]
    fn a_named_target_port_resolves_per_pod() {
        let s = sp("http", 80, IntOrString::String("web".into()));
        assert_eq!(find_port(&pod(&[("web", 8080, "TCP")]), &s), Some(8080));
        assert_eq!(find_port(&pod(&[("web", 9090, "TCP")]), &s), Some(9090));
        assert_eq!(find_port(&pod(&[("web", 8080, "UDP")]), &s), None, "protocol must match");
        assert_eq!(find_port(&pod(&[]), &s), None);
    }

    #[test]
    fn a_numeric_or_missing_target_port_is_used_as_is() {
        assert_eq!(find_port(&pod(&[]), &sp("a", 80, IntOrString::Int(8080))), Some(8080));
        let none = ServicePort { port: 443, ..Default::default() };
        assert_eq!(find_port(&pod(&[]), &none), Some(443));
    }

    #[test]
    fn a_sidecar_init_container_port_counts_but_a_plain_init_container_does_not() {
        let mut p = pod(&[]);
        let mut init = Container {
            name: "side".into(),
            ports: Some(vec![ContainerPort { name: Some("web".into()), container_port: 7070, ..Default::default() }]),
            ..Default::default()
        };
        p.spec.as_mut().expect("spec").init_containers = Some(vec![init.clone()]);
        let s = sp("http", 80, IntOrString::String("web".into()));
        assert_eq!(find_port(&p, &s), None);
        init.restart_policy = Some("Always".into());
        p.spec.as_mut().expect("spec").init_containers = Some(vec![init]);
        assert_eq!(find_port(&p, &s), Some(7070));
    }

    #[test]
    fn ports_missing_on_a_pod_are_left_out_and_keys_ignore_order() {
        let ports = vec![sp("a", 80, IntOrString::String("web".into())), sp("b", 81, IntOrString::Int(81))];
        let eps = endpoint_ports(&ports, &pod(&[]));
        assert_eq!(eps.len(), 1);
        assert_eq!(eps[0].port, Some(81));
        let both = endpoint_ports(&ports, &pod(&[("web", 8080, "TCP")]));
        let mut reversed = both.clone();
        reversed.reverse();
        assert_eq!(port_key(&both), port_key(&reversed));
        assert_ne!(port_key(&both), port_key(&eps));
    }
}
