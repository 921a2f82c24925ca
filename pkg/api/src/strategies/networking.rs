//! Strategies for the networking resources: Ingresses and ServiceCIDRs (generation only), NetworkPolicies, as upstream's
//! `pkg/apis/networking/v1/defaults.go` and `pkg/apis/networking/validation`.

use super::formats;
use super::label_selector;
use super::ports;
use crate::field::{FieldError, Path};
use crate::strategy::{DynStrategy, ObjectHooks, Strategy, Typed};
use k8s_openapi::api::networking::v1::{Ingress, NetworkPolicy, NetworkPolicyPeer, NetworkPolicyPort, ServiceCIDR};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

pub fn network_policy() -> Box<dyn DynStrategy> {
    Box::new(Typed(NetworkPolicyStrategy))
}

pub fn ingress() -> Box<dyn DynStrategy> {
    Box::new(Typed(IngressStrategy))
}

pub fn service_cidr() -> Box<dyn DynStrategy> {
    Box::new(Typed(ServiceCidrStrategy))
}

/// Ingress: spec changes bump the generation.
pub struct IngressStrategy;

impl Strategy for IngressStrategy {
    type Object = Ingress;
    const PREPARES: bool = false;
}

impl ObjectHooks for IngressStrategy {
    fn tracks_generation(&self) -> bool {
        true
    }
}

/// ServiceCIDR: spec changes bump the generation.
pub struct ServiceCidrStrategy;

impl Strategy for ServiceCidrStrategy {
    type Object = ServiceCIDR;
    const PREPARES: bool = false;
}

impl ObjectHooks for ServiceCidrStrategy {
    fn tracks_generation(&self) -> bool {
        true
    }
}

fn validate_port(port: &NetworkPolicyPort, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(p) = port.protocol.as_deref() {
        if !["TCP", "UDP", "SCTP"].contains(&p) {
            errs.push(FieldError::not_supported(path.child("protocol"), p, &["TCP", "UDP", "SCTP"]));
        }
    }
    let end_path = path.child("endPort");
    match (&port.port, port.end_port) {
        (Some(IntOrString::Int(n)), end) => {
            errs.extend(ports::validate_port_num(*n, &path.child("port")));
            if let Some(end) = end {
                if end < *n {
                    errs.push(FieldError::invalid(&end_path, *n, "must be greater than or equal to `port`"));
                }
                errs.extend(ports::validate_port_num(end, &end_path));
            }
        }
        (Some(IntOrString::String(s)), end) => {
            if let Some(end) = end {
                errs.push(FieldError::invalid(&end_path, end, "may not be specified when `port` is non-numeric"));
            }
            errs.extend(formats::each_invalid(&path.child("port"), s, ports::port_name(s)));
        }
        (None, Some(end)) => {
            errs.push(FieldError::invalid(&end_path, end, "may not be specified when `port` is not specified"))
        }
        (None, None) => {}
    }
    errs
}

fn validate_peer(peer: &NetworkPolicyPeer, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut count = 0;
    if let Some(s) = &peer.pod_selector {
        count += 1;
        errs.extend(label_selector::validate(s, &path.child("podSelector")));
    }
    if let Some(s) = &peer.namespace_selector {
        count += 1;
        errs.extend(label_selector::validate(s, &path.child("namespaceSelector")));
    }
    if let Some(b) = &peer.ip_block {
        count += 1;
        let bp = path.child("ipBlock");
        if b.cidr.is_empty() {
            errs.push(FieldError::required(bp.child("cidr"), ""));
        } else {
            let e = formats::validate_cidr(&b.cidr, &bp.child("cidr"));
            let parsed = formats::parse_cidr(&b.cidr);
            errs.extend(e);
            if let Some(net) = parsed {
                for (i, ex) in b.except.iter().flatten().enumerate() {
                    let ep = bp.child("except").index(i);
                    let e = formats::validate_cidr(ex, &ep);
                    if !e.is_empty() {
                        errs.extend(e);
                        continue;
                    }
                    if let Some(ex_net) = formats::parse_cidr(ex) {
                        if !net.covers(&ex_net) || net.prefix() >= ex_net.prefix() {
                            errs.push(FieldError::invalid(&ep, ex.as_str(), "must be a strict subset of `cidr`"));
                        }
                    }
                }
            }
        }
    }
    if count == 0 {
        errs.push(FieldError::required(path, "must specify a peer"));
    } else if count > 1 && peer.ip_block.is_some() {
        errs.push(FieldError::forbidden(path, "may not specify both ipBlock and another peer"));
    }
    errs
}

/// NetworkPolicy: ports default to TCP; policyTypes default to Ingress (plus Egress when egress
/// rules are given).
pub struct NetworkPolicyStrategy;

impl Strategy for NetworkPolicyStrategy {
    type Object = NetworkPolicy;

    fn set_defaults(&self, np: &mut NetworkPolicy) {
        let spec = np.spec.get_or_insert_with(Default::default);
        let ingress_ports = spec.ingress.iter_mut().flatten().flat_map(|r| r.ports.iter_mut().flatten());
        let egress_ports = spec.egress.iter_mut().flatten().flat_map(|r| r.ports.iter_mut().flatten());
        for p in ingress_ports.chain(egress_ports) {
            p.protocol.get_or_insert_with(|| "TCP".into());
        }
        if spec.policy_types.as_ref().is_none_or(Vec::is_empty) {
            let mut types = vec!["Ingress".to_string()];
            if spec.egress.as_ref().is_some_and(|e| !e.is_empty()) {
                types.push("Egress".into());
            }
            spec.policy_types = Some(types);
        }
    }

    fn validate(&self, np: &NetworkPolicy) -> Vec<FieldError> {
        let spec = np.spec.clone().unwrap_or_default();
        let path = Path::new("spec");
        let mut errs =
            label_selector::validate(&spec.pod_selector.clone().unwrap_or_default(), &path.child("podSelector"));
        for (i, rule) in spec.ingress.iter().flatten().enumerate() {
            let rp = path.child("ingress").index(i);
            for (j, p) in rule.ports.iter().flatten().enumerate() {
                errs.extend(validate_port(p, &rp.child("ports").index(j)));
            }
            for (j, peer) in rule.from.iter().flatten().enumerate() {
                errs.extend(validate_peer(peer, &rp.child("from").index(j)));
            }
        }
        for (i, rule) in spec.egress.iter().flatten().enumerate() {
            let rp = path.child("egress").index(i);
            for (j, p) in rule.ports.iter().flatten().enumerate() {
                errs.extend(validate_port(p, &rp.child("ports").index(j)));
            }
            for (j, peer) in rule.to.iter().flatten().enumerate() {
                errs.extend(validate_peer(peer, &rp.child("to").index(j)));
            }
        }
        let types = spec.policy_types.clone().unwrap_or_default();
        if types.len() > 2 {
            errs.push(FieldError::invalid(
                path.child("policyTypes"),
                formats::to_value(&types),
                "may not specify more than two policyTypes",
            ));
            return errs;
        }
        for (i, t) in types.iter().enumerate() {
            if t != "Ingress" && t != "Egress" {
                errs.push(FieldError::not_supported(
                    path.child("policyTypes").index(i),
                    t.as_str(),
                    &["Ingress", "Egress"],
                ));
            }
        }
        errs
    }
}

impl ObjectHooks for NetworkPolicyStrategy {
    fn tracks_generation(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::networking::v1::{
        IPBlock, NetworkPolicyEgressRule, NetworkPolicyIngressRule, NetworkPolicySpec,
    };

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn policy_types_and_protocols_default() {
        let mut np = NetworkPolicy {
            spec: Some(NetworkPolicySpec {
                ingress: Some(vec![NetworkPolicyIngressRule {
                    ports: Some(vec![NetworkPolicyPort { port: Some(IntOrString::Int(80)), ..Default::default() }]),
                    ..Default::default()
                }]),
                egress: Some(vec![NetworkPolicyEgressRule::default()]),
                ..Default::default()
            }),
            ..Default::default()
        };
        NetworkPolicyStrategy.set_defaults(&mut np);
        let spec = np.spec.as_ref().expect("spec");
        assert_eq!(spec.policy_types, Some(vec!["Ingress".to_string(), "Egress".to_string()]));
        let port = &spec.ingress.as_ref().expect("ingress")[0].ports.as_ref().expect("ports")[0];
        assert_eq!(port.protocol.as_deref(), Some("TCP"));
        assert!(NetworkPolicyStrategy.validate(&np).is_empty());
    }

    #[test]
    fn peers_and_ports_are_checked() {
        let np = NetworkPolicy {
            spec: Some(NetworkPolicySpec {
                ingress: Some(vec![NetworkPolicyIngressRule {
                    from: Some(vec![
                        NetworkPolicyPeer::default(),
                        NetworkPolicyPeer {
                            ip_block: Some(IPBlock {
                                cidr: "10.0.0.0/16".into(),
                                except: Some(vec!["192.168.0.0/24".into()]),
                            }),
                            ..Default::default()
                        },
                    ]),
                    ports: Some(vec![NetworkPolicyPort {
                        port: Some(IntOrString::Int(80)),
                        end_port: Some(70),
                        ..Default::default()
                    }]),
                }]),
                policy_types: Some(vec!["Sideways".into()]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let m = messages(&NetworkPolicyStrategy.validate(&np));
        assert!(m.contains(
            &"spec.ingress[0].ports[0].endPort: Invalid value: 80: must be greater than or equal to `port`".to_string()
        ));
        assert!(m.contains(&"spec.ingress[0].from[0]: Required value: must specify a peer".to_string()));
        assert!(m.contains(&"spec.ingress[0].from[1].ipBlock.except[0]: Invalid value: \"192.168.0.0/24\": must be a strict subset of `cidr`".to_string()));
        assert!(m.contains(
            &"spec.policyTypes[0]: Unsupported value: \"Sideways\": supported values: \"Ingress\", \"Egress\""
                .to_string()
        ));
    }
}
