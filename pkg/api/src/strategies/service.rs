//! The Service strategy: `SetDefaults_Service`, the cluster-IP bookkeeping of
//! `pkg/registry/core/service` (`NormalizeClusterIPs`, `patchAllocatedValues`,
//! `dropTypeDependentFields`, IP family defaults) and `ValidateService`/`ValidateServiceUpdate`.
//! Allocating cluster IPs and node ports is the API server's job; this module only keeps the
//! fields around them consistent.

use super::formats;
use super::ports;
use crate::field::{FieldError, Path};
use crate::strategy::{NameRule, ObjectHooks, Strategy};
use k8s_openapi::api::core::v1::{
    ClientIPConfig, LoadBalancerStatus, Service, ServiceSpec, ServiceStatus, SessionAffinityConfig,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeSet;

const SERVICE_TYPES: &[&str] = &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
const SESSION_AFFINITIES: &[&str] = &["ClientIP", "None"];
const IP_FAMILY_POLICIES: &[&str] = &["PreferDualStack", "RequireDualStack", "SingleStack"];
const IP_FAMILIES: &[&str] = &["IPv4", "IPv6"];
/// Upstream's `DefaultClientIPServiceAffinitySeconds` (3 hours).
pub const DEFAULT_CLIENT_IP_TIMEOUT: i32 = 10800;
const MAX_CLIENT_IP_TIMEOUT: i32 = 86400;

fn service_type(spec: &ServiceSpec) -> &str {
    spec.type_.as_deref().unwrap_or_default()
}

fn needs_cluster_ip(spec: &ServiceSpec) -> bool {
    service_type(spec) != "ExternalName"
}

fn needs_node_port(spec: &ServiceSpec) -> bool {
    matches!(service_type(spec), "NodePort" | "LoadBalancer")
}

fn externally_accessible(spec: &ServiceSpec) -> bool {
    needs_node_port(spec)
        || (service_type(spec) == "ClusterIP" && spec.external_ips.as_ref().is_some_and(|e| !e.is_empty()))
}

fn needs_health_check(spec: &ServiceSpec) -> bool {
    service_type(spec) == "LoadBalancer" && spec.external_traffic_policy.as_deref() == Some("Local")
}

fn cluster_ips(spec: &ServiceSpec) -> Vec<String> {
    spec.cluster_ips.clone().unwrap_or_default()
}

/// Whether the service is headless (`clusterIP: None`).
pub fn is_headless(spec: &ServiceSpec) -> bool {
    let ips = cluster_ips(spec);
    ips == ["None"] || (ips.is_empty() && spec.cluster_ip.as_deref() == Some("None"))
}

/// `NormalizeClusterIPs`: keep `clusterIP` and `clusterIPs` in step for old and new clients.
fn normalize_cluster_ips(new: &mut ServiceSpec, old: Option<&ServiceSpec>) {
    let ip = new.cluster_ip.clone().unwrap_or_default();
    let Some(old) = old else {
        if !ip.is_empty() && cluster_ips(new).is_empty() {
            new.cluster_ips = Some(vec![ip]);
        }
        return;
    };
    let old_ip = old.cluster_ip.clone().unwrap_or_default();
    let same_ips = cluster_ips(old) == cluster_ips(new);
    if !cluster_ips(old).is_empty() && cluster_ips(new).is_empty() && old_ip == ip {
        new.cluster_ips = old.cluster_ips.clone();
    }
    if old_ip != ip {
        if !old_ip.is_empty() && ip.is_empty() {
            if same_ips {
                new.cluster_ips = None;
            }
        } else if same_ips {
            new.cluster_ips = Some(vec![ip]);
        }
    }
}

/// `patchAllocatedValues`: an update that omits allocated values keeps the old ones.
fn patch_allocated_values(new: &mut ServiceSpec, old: &ServiceSpec) {
    if needs_cluster_ip(old) && needs_cluster_ip(new) {
        if new.cluster_ip.as_deref().unwrap_or_default().is_empty() {
            new.cluster_ip = old.cluster_ip.clone();
        }
        if cluster_ips(new).is_empty() && !cluster_ips(old).is_empty() {
            new.cluster_ips = old.cluster_ips.clone();
        }
    }
    if needs_node_port(old) && needs_node_port(new) {
        let used = |s: &ServiceSpec| -> BTreeSet<i32> {
            s.ports.iter().flatten().filter_map(|p| p.node_port).filter(|n| *n != 0).collect()
        };
        let in_both: BTreeSet<i32> = used(old).intersection(&used(new)).copied().collect();
        let by_name: Vec<(String, i32)> = old
            .ports
            .iter()
            .flatten()
            .map(|p| (p.name.clone().unwrap_or_default(), p.node_port.unwrap_or_default()))
            .collect();
        for p in new.ports.iter_mut().flatten() {
            if p.node_port.unwrap_or_default() == 0 {
                let name = p.name.clone().unwrap_or_default();
                if let Some((_, np)) = by_name.iter().find(|(n, _)| *n == name) {
                    if *np != 0 && !in_both.contains(np) {
                        p.node_port = Some(*np);
                    }
                }
            }
        }
    }
    if needs_health_check(old) && needs_health_check(new) && new.health_check_node_port.unwrap_or_default() == 0 {
        new.health_check_node_port = old.health_check_node_port;
    }
}

/// `dropTypeDependentFields`: clear what an old type allocated once the new type no longer
/// needs it, unless the user changed it in the same update.
fn drop_type_dependent_fields(new: &mut ServiceSpec, old: &ServiceSpec) {
    if needs_cluster_ip(old) && !needs_cluster_ip(new) {
        if cluster_ips(old) == cluster_ips(new) && old.cluster_ip == new.cluster_ip {
            new.cluster_ip = None;
            new.cluster_ips = None;
        }
        if old.ip_families == new.ip_families {
            new.ip_families = None;
        }
        if old.ip_family_policy == new.ip_family_policy {
            new.ip_family_policy = None;
        }
    }
    if needs_node_port(old) && !needs_node_port(new) {
        let node_ports = |s: &ServiceSpec| s.ports.iter().flatten().map(|p| p.node_port).collect::<Vec<_>>();
        if node_ports(old) == node_ports(new) {
            for p in new.ports.iter_mut().flatten() {
                p.node_port = None;
            }
        }
    }
    if needs_health_check(old) && !needs_health_check(new) && old.health_check_node_port == new.health_check_node_port {
        new.health_check_node_port = None;
    }
    if service_type(old) == "LoadBalancer" && service_type(new) != "LoadBalancer" {
        if old.allocate_load_balancer_node_ports.is_some()
            && old.allocate_load_balancer_node_ports == new.allocate_load_balancer_node_ports
        {
            new.allocate_load_balancer_node_ports = None;
        }
        if old.load_balancer_class == new.load_balancer_class {
            new.load_balancer_class = None;
        }
    }
    if externally_accessible(old)
        && !externally_accessible(new)
        && old.external_traffic_policy == new.external_traffic_policy
    {
        new.external_traffic_policy = None;
    }
}

/// IP family fields for a single-stack cluster: `SingleStack` with the family of the cluster
/// IP (IPv4 unless it is an IPv6 address); headless services without a selector get
/// `RequireDualStack`, as upstream's allocator assigns them.
fn default_ip_families(new: &mut ServiceSpec, old: Option<&ServiceSpec>) {
    if !needs_cluster_ip(new) {
        return;
    }
    if let Some(old) = old.filter(|o| needs_cluster_ip(o) && cluster_ips(o) == cluster_ips(new)) {
        if new.ip_families.as_ref().is_none_or(Vec::is_empty) {
            new.ip_families = old.ip_families.clone();
        }
        if new.ip_family_policy.is_none() {
            new.ip_family_policy = old.ip_family_policy.clone();
        }
    }
    let headless_without_selector = is_headless(new) && new.selector.as_ref().is_none_or(|s| s.is_empty());
    if new.ip_family_policy.is_none() {
        let policy = if headless_without_selector { "RequireDualStack" } else { "SingleStack" };
        new.ip_family_policy = Some(policy.into());
    }
    if new.ip_families.as_ref().is_none_or(Vec::is_empty) {
        let ipv6 = cluster_ips(new).first().and_then(|ip| formats::parse_ip(ip)).is_some_and(|ip| ip.is_ipv6());
        new.ip_families = Some(vec![if ipv6 { "IPv6" } else { "IPv4" }.into()]);
    }
}

fn validate_service_ports(spec: &ServiceSpec, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let list = spec.ports.as_deref().unwrap_or_default();
    let mut names = BTreeSet::new();
    let mut node_ports = BTreeSet::new();
    let mut keys = BTreeSet::new();
    for (i, p) in list.iter().enumerate() {
        let pp = path.index(i);
        let name = p.name.as_deref().unwrap_or_default();
        if list.len() > 1 && name.is_empty() {
            errs.push(FieldError::required(pp.child("name"), ""));
        } else if !name.is_empty() {
            errs.extend(formats::validate_dns_label(name, &pp.child("name")));
            if !names.insert(name) {
                errs.push(FieldError::duplicate(pp.child("name"), name));
            }
        }
        errs.extend(ports::validate_port_num(p.port, &pp.child("port")));
        errs.extend(ports::validate_protocol(p.protocol.as_deref(), &pp.child("protocol")));
        if let Some(tp) = &p.target_port {
            errs.extend(ports::validate_port_num_or_name(tp, &pp.child("targetPort")));
        }
        if let Some(ap) = p.app_protocol.as_deref() {
            errs.extend(formats::validate_qualified_name(ap, &pp.child("appProtocol")));
        }
        let protocol = p.protocol.clone().unwrap_or_default();
        let np = p.node_port.unwrap_or_default();
        if np != 0 {
            if service_type(spec) == "ClusterIP" {
                errs.push(FieldError::forbidden(pp.child("nodePort"), "may not be used when `type` is 'ClusterIP'"));
            }
            if !node_ports.insert((protocol.clone(), np)) {
                errs.push(FieldError::duplicate(pp.child("nodePort"), np));
            }
        }
        if !keys.insert((protocol.clone(), p.port)) {
            errs.push(FieldError::duplicate(&pp, serde_json::json!({"port": p.port, "protocol": protocol})));
        }
        if service_type(spec) == "LoadBalancer" && p.port == 10250 {
            errs.push(FieldError::invalid(
                &pp,
                p.port,
                "may not expose port 10250 externally since it is used by kubelet",
            ));
        }
    }
    errs
}

fn validate_cluster_ips(spec: &ServiceSpec, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if !needs_cluster_ip(spec) {
        return errs;
    }
    let ips = cluster_ips(spec);
    let ips_path = path.child("clusterIPs");
    let ip = spec.cluster_ip.as_deref().unwrap_or_default();
    if !ip.is_empty() {
        match ips.first() {
            None => errs.push(FieldError::required(&ips_path, "")),
            Some(first) if first != ip => {
                errs.push(FieldError::invalid(&ips_path, formats::to_value(&ips), "first value must match `clusterIP`"))
            }
            Some(_) => {}
        }
    } else if !ips.is_empty() {
        errs.push(FieldError::invalid(
            &ips_path,
            formats::to_value(&ips),
            "must be empty when `clusterIP` is not specified",
        ));
    }
    let mut seen = BTreeSet::new();
    for (i, f) in spec.ip_families.iter().flatten().enumerate() {
        let fp = path.child("ipFamilies").index(i);
        if !IP_FAMILIES.contains(&f.as_str()) {
            errs.push(FieldError::not_supported(&fp, f.as_str(), IP_FAMILIES));
        }
        if !seen.insert(f.as_str()) {
            errs.push(FieldError::duplicate(&fp, f.as_str()));
        }
    }
    if let Some(p) = spec.ip_family_policy.as_deref() {
        if !IP_FAMILY_POLICIES.contains(&p) {
            errs.push(FieldError::not_supported(path.child("ipFamilyPolicy"), p, IP_FAMILY_POLICIES));
        }
    }
    let mut invalid = false;
    for (i, c) in ips.iter().enumerate() {
        if i == 0 && c == "None" {
            if ips.len() > 1 {
                invalid = true;
                errs.push(FieldError::invalid(
                    &ips_path,
                    formats::to_value(&ips),
                    "'None' must be the first and only value",
                ));
            }
            continue;
        }
        let e = formats::validate_ip(c, &ips_path.index(i));
        invalid |= !e.is_empty();
        errs.extend(e);
    }
    if ips.len() > 2 {
        errs.push(FieldError::invalid(&ips_path, formats::to_value(&ips), "may only hold up to 2 values"));
    }
    if invalid {
        return errs;
    }
    if ips.len() == 2 {
        let v6 = ips.iter().filter(|c| formats::parse_ip(c).is_some_and(|ip| ip.is_ipv6())).count();
        if v6 != 1 {
            errs.push(FieldError::invalid(
                &ips_path,
                formats::to_value(&ips),
                "may specify no more than one IP for each IP family",
            ));
        }
    }
    if !is_headless(spec) {
        for (i, (c, f)) in ips.iter().zip(spec.ip_families.iter().flatten()).enumerate() {
            let v6 = formats::parse_ip(c).is_some_and(|ip| ip.is_ipv6());
            if f == "IPv4" && v6 {
                errs.push(FieldError::invalid(
                    ips_path.index(i),
                    c.as_str(),
                    format!("expected an IPv4 value as indicated by `ipFamilies[{i}]`"),
                ));
            }
            if f == "IPv6" && !v6 {
                errs.push(FieldError::invalid(
                    ips_path.index(i),
                    c.as_str(),
                    format!("expected an IPv6 value as indicated by `ipFamilies[{i}]`"),
                ));
            }
        }
    }
    errs
}

/// `ValidateService`.
fn validate_spec(spec: &ServiceSpec) -> Vec<FieldError> {
    let path = Path::new("spec");
    let mut errs = Vec::new();
    let ty = service_type(spec);
    let headless = is_headless(spec);
    if spec.ports.as_ref().is_none_or(Vec::is_empty) && !headless && ty != "ExternalName" {
        errs.push(FieldError::required(path.child("ports"), ""));
    }
    match ty {
        "LoadBalancer" | "NodePort" if headless => errs.push(FieldError::invalid(
            path.child("clusterIPs").index(0),
            "None",
            format!("may not be set to 'None' for {ty} services"),
        )),
        "ExternalName" => {
            for (name, set) in [
                ("clusterIPs", !cluster_ips(spec).is_empty()),
                ("ipFamilies", spec.ip_families.as_ref().is_some_and(|f| !f.is_empty())),
                ("ipFamilyPolicy", spec.ip_family_policy.is_some()),
            ] {
                if set {
                    errs.push(FieldError::forbidden(path.child(name), "may not be set for ExternalName services"));
                }
            }
            let cname = spec.external_name.as_deref().unwrap_or_default();
            let cname = cname.strip_suffix('.').unwrap_or(cname);
            if cname.is_empty() {
                errs.push(FieldError::required(path.child("externalName"), ""));
            } else {
                errs.extend(formats::validate_dns_subdomain(cname, &path.child("externalName")));
            }
        }
        _ => {}
    }
    errs.extend(validate_service_ports(spec, &path.child("ports")));
    errs.extend(formats::validate_labels(spec.selector.as_ref(), &path.child("selector")));
    let affinity = spec.session_affinity.as_deref();
    errs.extend(formats::validate_enum(affinity, SESSION_AFFINITIES, &path.child("sessionAffinity")));
    let cfg_path = path.child("sessionAffinityConfig");
    match affinity {
        Some("ClientIP") => {
            let detail = "when session affinity type is ClientIP";
            match &spec.session_affinity_config {
                None => errs.push(FieldError::required(&cfg_path, detail)),
                Some(SessionAffinityConfig { client_ip: None }) => {
                    errs.push(FieldError::required(cfg_path.child("clientIP"), detail))
                }
                Some(SessionAffinityConfig { client_ip: Some(ClientIPConfig { timeout_seconds: None }) }) => {
                    errs.push(FieldError::required(cfg_path.child("clientIP").child("timeoutSeconds"), detail))
                }
                Some(SessionAffinityConfig { client_ip: Some(ClientIPConfig { timeout_seconds: Some(t) }) }) => {
                    if *t <= 0 || *t > MAX_CLIENT_IP_TIMEOUT {
                        errs.push(FieldError::invalid(
                            cfg_path.child("clientIP").child("timeoutSeconds"),
                            *t,
                            format!("must be greater than 0 and less than {MAX_CLIENT_IP_TIMEOUT}"),
                        ));
                    }
                }
            }
        }
        Some("None") if spec.session_affinity_config.is_some() => {
            errs.push(FieldError::forbidden(&cfg_path, "must not be set when session affinity is None"))
        }
        _ => {}
    }
    errs.extend(validate_cluster_ips(spec, &path));
    for (i, ip) in spec.external_ips.iter().flatten().enumerate() {
        let p = path.child("externalIPs").index(i);
        let e = formats::validate_ip(ip, &p);
        if e.is_empty() {
            errs.extend(formats::validate_non_special_ip(ip, &p));
        } else {
            errs.extend(e);
        }
    }
    errs.extend(formats::validate_enum(spec.type_.as_deref(), SERVICE_TYPES, &path.child("type")));
    let etp = spec.external_traffic_policy.as_deref().unwrap_or_default();
    let etp_path = path.child("externalTrafficPolicy");
    if !externally_accessible(spec) {
        if !etp.is_empty() {
            errs.push(FieldError::invalid(etp_path, etp, "may only be set for externally-accessible services"));
        }
    } else {
        errs.extend(formats::validate_enum(Some(etp), &["Cluster", "Local"], &etp_path));
    }
    let hc = spec.health_check_node_port.unwrap_or_default();
    if !needs_health_check(spec) && hc != 0 {
        errs.push(FieldError::invalid(
            path.child("healthCheckNodePort"),
            hc,
            "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'",
        ));
    }
    let itp_path = path.child("internalTrafficPolicy");
    match spec.internal_traffic_policy.as_deref() {
        None if matches!(ty, "ClusterIP" | "NodePort" | "LoadBalancer") => {
            errs.push(FieldError::required(itp_path, ""))
        }
        Some(p) if !["Cluster", "Local"].contains(&p) => {
            errs.push(FieldError::not_supported(itp_path, p, &["Cluster", "Local"]))
        }
        _ => {}
    }
    if ty == "LoadBalancer" {
        if let Some(c) = spec.load_balancer_class.as_deref() {
            errs.extend(formats::validate_qualified_name(c, &path.child("loadBalancerClass")));
        }
    } else if spec.load_balancer_class.is_some() {
        errs.push(FieldError::forbidden(
            path.child("loadBalancerClass"),
            "may only be used when `type` is 'LoadBalancer'",
        ));
    }
    errs
}

fn validate_ip_updates(new: &ServiceSpec, old: &ServiceSpec) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if !needs_cluster_ip(new) || !needs_cluster_ip(old) {
        return errs;
    }
    let (n, o) = (cluster_ips(new), cluster_ips(old));
    let ips_path = Path::new("spec").child("clusterIPs");
    if !(is_headless(new) && is_headless(old)) {
        if n.len() == o.len() {
            for (i, ip) in o.iter().enumerate() {
                if *ip != n[i] {
                    errs.push(FieldError::invalid(ips_path.index(i), formats::to_value(&n), "may not change once set"));
                }
            }
        } else if o.len() > n.len() {
            if n.is_empty() {
                errs.push(FieldError::invalid(
                    ips_path.index(0),
                    formats::to_value(&n),
                    "primary clusterIP can not be unset",
                ));
            } else if n[0] != o[0] {
                errs.push(FieldError::invalid(ips_path.index(0), formats::to_value(&n), "may not change once set"));
            }
            if n.len() == 1 && new.ip_family_policy.as_deref() != Some("SingleStack") {
                errs.push(FieldError::invalid(
                    Path::new("spec").child("ipFamilyPolicy"),
                    formats::to_value(&new.ip_family_policy),
                    "must be set to 'SingleStack' when releasing the secondary clusterIP",
                ));
            }
        } else if !o.is_empty() && n[0] != o[0] {
            errs.push(FieldError::invalid(ips_path.index(0), formats::to_value(&n), "may not change once set"));
        }
    }
    if is_headless(new) == is_headless(old) && !is_headless(new) {
        let (nf, of) = (new.ip_families.clone().unwrap_or_default(), old.ip_families.clone().unwrap_or_default());
        let fam_path = Path::new("spec").child("ipFamilies").index(0);
        let changed_primary = !nf.is_empty() && !of.is_empty() && nf[0] != of[0];
        if (nf.len() == of.len() && nf != of) || changed_primary {
            errs.push(FieldError::invalid(fam_path, formats::to_value(&nf), "may not change once set"));
        }
    }
    if service_type(new) == "LoadBalancer"
        && service_type(old) == "LoadBalancer"
        && new.load_balancer_class != old.load_balancer_class
    {
        errs.push(FieldError::invalid(
            Path::new("spec").child("loadBalancerClass"),
            formats::to_value(&new.load_balancer_class),
            "may not change once set",
        ));
    }
    errs
}

/// The Service strategy.
pub struct ServiceStrategy;

impl Strategy for ServiceStrategy {
    type Object = Service;

    fn name_rule(&self) -> NameRule {
        NameRule::Label
    }

    fn set_defaults(&self, svc: &mut Service) {
        let spec = svc.spec.get_or_insert_with(Default::default);
        if spec.session_affinity.as_deref().unwrap_or_default().is_empty() {
            spec.session_affinity = Some("None".into());
        }
        match spec.session_affinity.as_deref() {
            Some("None") => spec.session_affinity_config = None,
            Some("ClientIP") => {
                let has_timeout = spec
                    .session_affinity_config
                    .as_ref()
                    .and_then(|c| c.client_ip.as_ref())
                    .is_some_and(|c| c.timeout_seconds.is_some());
                if !has_timeout {
                    spec.session_affinity_config = Some(SessionAffinityConfig {
                        client_ip: Some(ClientIPConfig { timeout_seconds: Some(DEFAULT_CLIENT_IP_TIMEOUT) }),
                    });
                }
            }
            _ => {}
        }
        if spec.type_.as_deref().unwrap_or_default().is_empty() {
            spec.type_ = Some("ClusterIP".into());
        }
        for p in spec.ports.iter_mut().flatten() {
            if p.protocol.as_deref().unwrap_or_default().is_empty() {
                p.protocol = Some("TCP".into());
            }
            let unset = match &p.target_port {
                None => true,
                Some(IntOrString::Int(0)) => true,
                Some(IntOrString::String(s)) => s.is_empty(),
                Some(IntOrString::Int(_)) => false,
            };
            if unset {
                p.target_port = Some(IntOrString::Int(p.port));
            }
        }
        if externally_accessible(spec) && spec.external_traffic_policy.as_deref().unwrap_or_default().is_empty() {
            spec.external_traffic_policy = Some("Cluster".into());
        }
        if spec.internal_traffic_policy.is_none()
            && matches!(service_type(spec), "ClusterIP" | "NodePort" | "LoadBalancer")
        {
            spec.internal_traffic_policy = Some("Cluster".into());
        }
        if service_type(spec) == "LoadBalancer" {
            spec.allocate_load_balancer_node_ports.get_or_insert(true);
            let ingress = svc.status.as_mut().and_then(|s| s.load_balancer.as_mut()).and_then(|l| l.ingress.as_mut());
            for ing in ingress.into_iter().flatten() {
                if !ing.ip.as_deref().unwrap_or_default().is_empty() && ing.ip_mode.is_none() {
                    ing.ip_mode = Some("VIP".into());
                }
            }
        }
    }

    fn prepare_for_create(&self, svc: &mut Service) {
        svc.status = Some(ServiceStatus { load_balancer: Some(LoadBalancerStatus::default()), conditions: None });
        let spec = svc.spec.get_or_insert_with(Default::default);
        normalize_cluster_ips(spec, None);
        default_ip_families(spec, None);
    }

    fn prepare_for_update(&self, new: &mut Service, old: &Service) {
        let old_spec = old.spec.clone().unwrap_or_default();
        let spec = new.spec.get_or_insert_with(Default::default);
        patch_allocated_values(spec, &old_spec);
        normalize_cluster_ips(spec, Some(&old_spec));
        drop_type_dependent_fields(spec, &old_spec);
        default_ip_families(spec, Some(&old_spec));
        if service_type(spec) != "LoadBalancer" {
            if let Some(status) = new.status.as_mut() {
                status.load_balancer = Some(LoadBalancerStatus::default());
            }
        }
    }

    fn validate(&self, svc: &Service) -> Vec<FieldError> {
        let mut errs = Vec::new();
        // Service names are DNS-1035 labels: the generic check covers RFC 1123 labels, this
        // adds the leading-letter rule.
        let name = svc.metadata.name.as_deref().unwrap_or_default();
        if !name.is_empty() && formats::dns1123_label(name).is_empty() {
            errs.extend(formats::each_invalid(
                &Path::new("metadata").child("name"),
                name,
                formats::dns1035_label(name),
            ));
        }
        errs.extend(validate_spec(&svc.spec.clone().unwrap_or_default()));
        errs
    }

    fn validate_update(&self, new: &Service, old: &Service) -> Vec<FieldError> {
        let (n, o) = (new.spec.clone().unwrap_or_default(), old.spec.clone().unwrap_or_default());
        let mut errs = validate_ip_updates(&n, &o);
        errs.extend(validate_spec(&n));
        errs
    }
}

impl ObjectHooks for ServiceStrategy {
    fn selectable_fields(&self) -> &'static [&'static str] {
        &["spec.clusterIP", "spec.type"]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ServicePort;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use std::collections::BTreeMap;

    fn port(name: Option<&str>, port: i32) -> ServicePort {
        ServicePort { name: name.map(str::to_string), port, ..Default::default() }
    }

    fn svc(ports: Vec<ServicePort>) -> Service {
        let mut s = Service {
            metadata: ObjectMeta { name: Some("web".into()), ..Default::default() },
            spec: Some(ServiceSpec {
                ports: Some(ports),
                selector: Some(BTreeMap::from([("app".to_string(), "web".to_string())])),
                ..Default::default()
            }),
            status: None,
        };
        ServiceStrategy.set_defaults(&mut s);
        ServiceStrategy.prepare_for_create(&mut s);
        s
    }

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(|e| e.to_string()).collect()
    }

    fn same_spec(a: &Service, b: &Service) -> bool {
        crate::strategies::semantic::equal(&a.spec, &b.spec)
    }

    #[test]
    fn defaults_match_upstream() {
        let s = svc(vec![port(None, 80)]);
        let spec = s.spec.as_ref().expect("spec");
        assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
        assert_eq!(spec.session_affinity.as_deref(), Some("None"));
        assert_eq!(spec.internal_traffic_policy.as_deref(), Some("Cluster"));
        assert_eq!(spec.ip_family_policy.as_deref(), Some("SingleStack"));
        assert_eq!(spec.ip_families, Some(vec!["IPv4".to_string()]));
        let p = &spec.ports.as_ref().expect("ports")[0];
        assert_eq!((p.protocol.as_deref(), p.target_port.clone()), (Some("TCP"), Some(IntOrString::Int(80))));
        assert!(spec.external_traffic_policy.is_none());
        assert_eq!(s.status, Some(ServiceStatus { load_balancer: Some(Default::default()), conditions: None }));
        assert!(ServiceStrategy.validate(&s).is_empty());
        assert_eq!(ServiceStrategy.name_rule(), NameRule::Label);
    }

    #[test]
    fn node_port_services_get_external_traffic_policy() {
        let mut s = svc(vec![port(None, 80)]);
        s.spec.as_mut().expect("spec").type_ = Some("NodePort".into());
        ServiceStrategy.set_defaults(&mut s);
        assert_eq!(s.spec.as_ref().and_then(|s| s.external_traffic_policy.as_deref()), Some("Cluster"));
        assert!(ServiceStrategy.validate(&s).is_empty());
    }

    #[test]
    fn ports_are_required_and_named_when_several() {
        let m = messages(&ServiceStrategy.validate(&svc(vec![])));
        assert_eq!(m, ["spec.ports: Required value"]);
        let m = messages(&ServiceStrategy.validate(&svc(vec![port(None, 80), port(Some("https"), 0)])));
        assert!(m.contains(&"spec.ports[0].name: Required value".to_string()));
        assert!(m.contains(&"spec.ports[1].port: Invalid value: 0: must be between 1 and 65535, inclusive".to_string()));
        let mut headless = svc(vec![]);
        headless.spec.as_mut().expect("spec").cluster_ip = Some("None".into());
        ServiceStrategy.prepare_for_create(&mut headless);
        assert!(ServiceStrategy.validate(&headless).is_empty());
    }

    #[test]
    fn enums_and_node_ports() {
        let mut s = svc(vec![port(None, 80)]);
        let spec = s.spec.as_mut().expect("spec");
        spec.type_ = Some("Magic".into());
        spec.ports.as_mut().expect("ports")[0].protocol = Some("ICMP".into());
        let m = messages(&ServiceStrategy.validate(&s));
        assert!(m.contains(&"spec.type: Unsupported value: \"Magic\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\"".to_string()));
        assert!(m.contains(
            &"spec.ports[0].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\""
                .to_string()
        ));
        let mut c = svc(vec![port(None, 80)]);
        c.spec.as_mut().expect("spec").ports.as_mut().expect("ports")[0].node_port = Some(30080);
        assert_eq!(
            messages(&ServiceStrategy.validate(&c)),
            ["spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"]
        );
    }

    #[test]
    fn cluster_ip_is_immutable_but_kept_when_omitted() {
        let mut old = svc(vec![port(None, 80)]);
        let spec = old.spec.as_mut().expect("spec");
        spec.cluster_ip = Some("10.43.0.10".into());
        spec.cluster_ips = Some(vec!["10.43.0.10".into()]);
        let mut omitted = svc(vec![port(None, 80)]);
        omitted.spec.as_mut().expect("spec").cluster_ips = None;
        omitted.spec.as_mut().expect("spec").ip_families = None;
        ServiceStrategy.prepare_for_update(&mut omitted, &old);
        assert!(same_spec(&omitted, &old));
        assert!(ServiceStrategy.validate_update(&omitted, &old).is_empty());
        let mut changed = old.clone();
        changed.spec.as_mut().expect("spec").cluster_ip = Some("10.43.0.11".into());
        ServiceStrategy.prepare_for_update(&mut changed, &old);
        let errs = ServiceStrategy.validate_update(&changed, &old);
        assert_eq!(errs.len(), 1);
        assert_eq!(
            (errs[0].field.as_str(), errs[0].detail.as_str()),
            ("spec.clusterIPs[0]", "may not change once set")
        );
        assert_eq!(errs[0].value, Some(serde_json::json!(["10.43.0.11"])));
    }

    #[test]
    fn switching_to_external_name_drops_cluster_ip() {
        let mut old = svc(vec![port(None, 80)]);
        let spec = old.spec.as_mut().expect("spec");
        spec.cluster_ip = Some("10.43.0.10".into());
        spec.cluster_ips = Some(vec!["10.43.0.10".into()]);
        let mut new = old.clone();
        let ns = new.spec.as_mut().expect("spec");
        ns.type_ = Some("ExternalName".into());
        ns.external_name = Some("example.com".into());
        ns.internal_traffic_policy = None;
        ServiceStrategy.prepare_for_update(&mut new, &old);
        let ns = new.spec.as_ref().expect("spec");
        assert!(
            ns.cluster_ip.is_none()
                && ns.cluster_ips.is_none()
                && ns.ip_families.is_none()
                && ns.ip_family_policy.is_none()
        );
        assert!(ServiceStrategy.validate_update(&new, &old).is_empty());
    }

    #[test]
    fn names_follow_dns_1035() {
        let mut s = svc(vec![port(None, 80)]);
        s.metadata.name = Some("1web".into());
        assert!(messages(&ServiceStrategy.validate(&s))[0]
            .starts_with("metadata.name: Invalid value: \"1web\": a DNS-1035 label"));
    }
}
