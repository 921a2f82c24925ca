//! Strategies for the discovery resources: EndpointSlices, as upstream's
//! `pkg/apis/discovery/v1/defaults.go` and `pkg/apis/discovery/validation`.

use super::formats;
use super::ports;
use crate::field::{FieldError, Path};
use crate::strategy::{DynStrategy, ObjectHooks, Strategy, Typed};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use std::collections::BTreeSet;

pub fn endpoint_slice() -> Box<dyn DynStrategy> {
    Box::new(Typed(EndpointSliceStrategy))
}

const ADDRESS_TYPES: &[&str] = &["FQDN", "IPv4", "IPv6"];
const MAX_ENDPOINTS: usize = 1000;
const MAX_ADDRESSES: usize = 100;
const MAX_PORTS: usize = 20000;

/// Upstream's `IsFullyQualifiedDomainName`.
fn validate_fqdn(name: &str, path: &Path) -> Vec<FieldError> {
    if name.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let name = name.strip_suffix('.').unwrap_or(name);
    let errs = crate::meta::dns1123_subdomain(name);
    if !errs.is_empty() {
        return vec![FieldError::invalid(path, name, errs.join(","))];
    }
    if name.split('.').count() < 2 {
        return vec![FieldError::invalid(
            path,
            name,
            "should be a domain with at least two segments separated by dots",
        )];
    }
    Vec::new()
}

/// EndpointSlice: ports default to TCP with an empty name; addresses match the address type.
pub struct EndpointSliceStrategy;

impl Strategy for EndpointSliceStrategy {
    type Object = EndpointSlice;

    fn set_defaults(&self, es: &mut EndpointSlice) {
        for p in es.ports.iter_mut().flatten() {
            p.name.get_or_insert_with(String::new);
            p.protocol.get_or_insert_with(|| "TCP".into());
        }
    }

    fn validate(&self, es: &EndpointSlice) -> Vec<FieldError> {
        let at = es.address_type.as_str();
        let mut errs = formats::validate_enum(Some(at), ADDRESS_TYPES, &Path::new("addressType"));
        let ep_path = Path::new("endpoints");
        if es.endpoints.len() > MAX_ENDPOINTS {
            errs.push(FieldError::too_many(&ep_path, es.endpoints.len(), MAX_ENDPOINTS));
        } else {
            for (i, ep) in es.endpoints.iter().enumerate() {
                let p = ep_path.index(i);
                let ap = p.child("addresses");
                if ep.addresses.is_empty() {
                    errs.push(FieldError::required(&ap, "must contain at least 1 address"));
                } else if ep.addresses.len() > MAX_ADDRESSES {
                    errs.push(FieldError::too_many(&ap, ep.addresses.len(), MAX_ADDRESSES));
                }
                for (j, addr) in ep.addresses.iter().enumerate() {
                    let idx = ap.index(j);
                    match at {
                        "IPv4" | "IPv6" => {
                            let e = formats::validate_ip(addr, &idx);
                            if !e.is_empty() {
                                errs.extend(e);
                                continue;
                            }
                            let v6 = formats::parse_ip(addr).is_some_and(|ip| ip.is_ipv6());
                            if at == "IPv4" && v6 {
                                errs.push(FieldError::invalid(&ap, addr.as_str(), "must be an IPv4 address"));
                            }
                            if at == "IPv6" && !v6 {
                                errs.push(FieldError::invalid(&ap, addr.as_str(), "must be an IPv6 address"));
                            }
                            errs.extend(formats::validate_non_special_ip(addr, &idx));
                        }
                        "FQDN" => errs.extend(validate_fqdn(addr, &idx)),
                        _ => {}
                    }
                }
                if let Some(n) = ep.node_name.as_deref() {
                    errs.extend(formats::validate_dns_subdomain(n, &p.child("nodeName")));
                }
                if let Some(h) = ep.hostname.as_deref() {
                    errs.extend(formats::validate_dns_label(h, &p.child("hostname")));
                }
                let tp = p.child("deprecatedTopology");
                if let Some(t) = &ep.deprecated_topology {
                    if t.len() > 16 {
                        errs.push(FieldError::too_many(&tp, t.len(), 16));
                    }
                    errs.extend(formats::validate_labels(Some(t), &tp));
                }
            }
        }
        let ports_path = Path::new("ports");
        let list = es.ports.as_deref().unwrap_or_default();
        if list.len() > MAX_PORTS {
            errs.push(FieldError::too_many(&ports_path, list.len(), MAX_PORTS));
            return errs;
        }
        let mut names = BTreeSet::new();
        for (i, port) in list.iter().enumerate() {
            let p = ports_path.index(i);
            let name = port.name.clone().unwrap_or_default();
            if !name.is_empty() {
                errs.extend(formats::validate_dns_label(&name, &p.child("name")));
            }
            if !names.insert(name.clone()) {
                errs.push(FieldError::duplicate(p.child("name"), name));
            }
            errs.extend(ports::validate_protocol(port.protocol.as_deref(), &p.child("protocol")));
            if let Some(ap) = port.app_protocol.as_deref() {
                errs.extend(formats::validate_qualified_name(ap, &p.child("appProtocol")));
            }
        }
        errs
    }

    fn validate_update(&self, new: &EndpointSlice, old: &EndpointSlice) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        errs.extend(formats::validate_immutable(&new.address_type, &old.address_type, &Path::new("addressType")));
        errs
    }
}

impl ObjectHooks for EndpointSliceStrategy {}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::discovery::v1::{Endpoint, EndpointPort};

    fn slice(address_type: &str, addresses: &[&str]) -> EndpointSlice {
        let mut es = EndpointSlice {
            address_type: address_type.into(),
            endpoints: vec![Endpoint {
                addresses: addresses.iter().map(|s| s.to_string()).collect(),
                ..Default::default()
            }],
            ports: Some(vec![EndpointPort { port: Some(80), ..Default::default() }]),
            ..Default::default()
        };
        EndpointSliceStrategy.set_defaults(&mut es);
        es
    }

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn defaults_and_valid_slice() {
        let es = slice("IPv4", &["10.42.0.7"]);
        let p = &es.ports.as_ref().expect("ports")[0];
        assert_eq!((p.name.as_deref(), p.protocol.as_deref()), (Some(""), Some("TCP")));
        assert!(EndpointSliceStrategy.validate(&es).is_empty());
        assert!(EndpointSliceStrategy.validate(&slice("FQDN", &["db.example.com"])).is_empty());
    }

    #[test]
    fn address_type_and_addresses_are_checked() {
        assert_eq!(
            messages(&EndpointSliceStrategy.validate(&slice("IPv5", &["10.0.0.1"]))),
            ["addressType: Unsupported value: \"IPv5\": supported values: \"FQDN\", \"IPv4\", \"IPv6\""]
        );
        assert_eq!(
            messages(&EndpointSliceStrategy.validate(&slice("IPv4", &["fd00::1"]))),
            ["endpoints[0].addresses: Invalid value: \"fd00::1\": must be an IPv4 address"]
        );
        assert_eq!(
            messages(&EndpointSliceStrategy.validate(&slice("IPv4", &[]))),
            ["endpoints[0].addresses: Required value: must contain at least 1 address"]
        );
        let old = slice("IPv4", &["10.0.0.1"]);
        let new = slice("IPv6", &["fd00::1"]);
        assert_eq!(
            messages(&EndpointSliceStrategy.validate_update(&new, &old)),
            ["addressType: Invalid value: \"IPv6\": field is immutable"]
        );
    }
}
