//! `render`: the whole desired `table ip k1s` from the cluster state, with no I/O.
//!
//! The layout follows upstream's nftables kube-proxy (`pkg/proxy/nftables/proxier.go`): the
//! `services` chain dispatches through the verdict maps `service-ips` (ClusterIPs, external IPs,
//! load-balancer VIPs: `ip daddr . meta l4proto . th dport`) and `service-nodeports` (on the
//! addresses in `nodeport-ips`: the node's own and 127.0.0.1) to one chain per Service port that
//! load-balances over Ready endpoints with `numgen random`. Two deliberate differences keep
//! programming cheap: endpoints are DNAT targets of an anonymous `numgen` map inside the service
//! chain (one chain per Service port instead of one per endpoint), and hairpin traffic (a pod
//! reaching itself through its Service) is masqueraded by the `hairpin-endpoints` pair set in
//! postrouting. Services with ClientIP affinity keep upstream's per-endpoint chains and dynamic
//! affinity sets. Connections to a Service without endpoints are rejected after DNAT had its
//! chance (`filter-*-post-dnat`), so clients get "connection refused" at once.

use crate::cidr::Cidr;
use crate::endpoints::{categorize, Endpoint, SliceIndex};
use crate::policy;
use crate::ruleset::{Ruleset, SetKind};
use crate::service::{self, ServicePort};
use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use std::net::Ipv4Addr;
use std::sync::Arc;

/// The packet mark bit that asks `masquerading` to SNAT (kube-proxy's 0x4000; CNI portmap uses
/// 0x2000).
pub const MASQUERADE_MARK: &str = "0x00004000";

/// What the renderer needs to know about the node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeInfo {
    pub name: String,
    /// The node's own IPv4 addresses: NodePorts and LoadBalancer VIPs are served on them.
    pub ips: Vec<Ipv4Addr>,
    /// The pod network: traffic from outside it to a ClusterIP is masqueraded.
    pub cluster_cidr: Cidr,
    /// The Service network: unallocated addresses in it are dropped.
    pub service_cidr: Cidr,
}

/// The API objects the ruleset is rendered from (reflector snapshots).
#[derive(Clone, Debug, Default)]
pub struct ClusterState {
    pub services: Vec<Arc<Service>>,
    pub endpoint_slices: Vec<Arc<EndpointSlice>>,
    pub pods: Vec<Arc<Pod>>,
    pub namespaces: Vec<Arc<Namespace>>,
    pub network_policies: Vec<Arc<NetworkPolicy>>,
}

// Named sets and maps.
const CLUSTER_IPS: &str = "cluster-ips";
const NODEPORT_IPS: &str = "nodeport-ips";
const SERVICE_IPS: &str = "service-ips";
const SERVICE_NODEPORTS: &str = "service-nodeports";
const NO_ENDPOINT_SERVICES: &str = "no-endpoint-services";
const NO_ENDPOINT_NODEPORTS: &str = "no-endpoint-nodeports";
const FIREWALL_IPS: &str = "firewall-ips";
const HAIRPIN: &str = "hairpin-endpoints";
// Regular chains.
const SERVICES: &str = "services";
const ENDPOINTS_CHECK: &str = "service-endpoints-check";
const FIREWALL_CHECK: &str = "firewall-check";
const REJECT: &str = "reject-chain";
const MARK_MASQ: &str = "mark-for-masquerade";
const MASQUERADING: &str = "masquerading";

const ADDR_PROTO_PORT: &str = "type ipv4_addr . inet_proto . inet_service : verdict";
const PROTO_PORT: &str = "type inet_proto . inet_service : verdict";

/// Renders the complete desired table.
pub fn render(state: &ClusterState, node: &NodeInfo) -> Ruleset {
    let mut r = Ruleset::default();
    base(&mut r, node);
    let slices = SliceIndex::new(&state.endpoint_slices);
    let mut services: Vec<&Arc<Service>> = state.services.iter().collect();
    services.sort_by(|a, b| (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name)));
    for svc in services {
        for sp in service::service_ports(svc) {
            let eps = slices.endpoints(&sp, &node.name);
            service_port(&mut r, &sp, &eps, node);
        }
    }
    policy::render(&mut r, state, node);
    r
}

/// Tables, maps and chains that exist whatever the cluster holds.
fn base(r: &mut Ruleset, node: &NodeInfo) {
    r.declare_set(CLUSTER_IPS, SetKind::Set, &["type ipv4_addr"]);
    r.declare_set(NODEPORT_IPS, SetKind::Set, &["type ipv4_addr"]);
    r.element(NODEPORT_IPS, "127.0.0.1", "");
    for ip in &node.ips {
        r.element(NODEPORT_IPS, ip.to_string(), "");
    }
    for m in [SERVICE_IPS, NO_ENDPOINT_SERVICES, FIREWALL_IPS] {
        r.declare_set(m, SetKind::Map, &[ADDR_PROTO_PORT]);
    }
    for m in [SERVICE_NODEPORTS, NO_ENDPOINT_NODEPORTS] {
        r.declare_set(m, SetKind::Map, &[PROTO_PORT]);
    }
    r.declare_set(HAIRPIN, SetKind::Set, &["type ipv4_addr . ipv4_addr"]);

    // Hooks. Filtering before DNAT (firewall) runs at dstnat-10, the no-endpoints check after
    // DNAT at dstnat+10: a packet still addressed to a Service there found no endpoint.
    let hook = |t: &str, h: &str, p: i32| format!("type {t} hook {h} priority {p}; policy accept;");
    r.base_chain("nat-prerouting", &hook("nat", "prerouting", -100)).rules.push(format!("jump {SERVICES}"));
    r.base_chain("nat-output", &hook("nat", "output", -100)).rules.push(format!("jump {SERVICES}"));
    let post = r.base_chain("nat-postrouting", &hook("nat", "postrouting", 100));
    post.rules.push(format!("jump {MASQUERADING}"));
    // Pod traffic leaving the pod network goes out with the node's address (what the bridge
    // plugin's ipMasq did with an iptables chain per pod; multicast stays as it is).
    post.rules.push(format!("ip saddr {c} ip daddr != {c} ip daddr != 224.0.0.0/4 masquerade", c = node.cluster_cidr));
    for h in ["prerouting", "output"] {
        r.base_chain(&format!("filter-{h}"), &hook("filter", h, -110))
            .rules
            .push(format!("ct state new jump {FIREWALL_CHECK}"));
        r.base_chain(&format!("filter-{h}-post-dnat"), &hook("filter", h, -90))
            .rules
            .push(format!("ct state new jump {ENDPOINTS_CHECK}"));
    }
    // route_localnet=1 (for NodePorts on 127.0.0.1) must not let other hosts reach 127.0.0.0/8.
    r.base_chain("filter-input", &hook("filter", "input", 0))
        .rules
        .push("ip daddr 127.0.0.0/8 ip saddr != 127.0.0.0/8 ct state new ct status & dnat == 0 drop".into());
    r.base_chain("filter-forward", &hook("filter", "forward", 0));

    r.rule(SERVICES, format!("ip daddr . meta l4proto . th dport vmap @{SERVICE_IPS}"));
    r.rule(SERVICES, format!("ip daddr @{NODEPORT_IPS} meta l4proto . th dport vmap @{SERVICE_NODEPORTS}"));
    r.rule(ENDPOINTS_CHECK, format!("ip daddr . meta l4proto . th dport vmap @{NO_ENDPOINT_SERVICES}"));
    r.rule(ENDPOINTS_CHECK, format!("ip daddr @{NODEPORT_IPS} meta l4proto . th dport vmap @{NO_ENDPOINT_NODEPORTS}"));
    // Ports a ClusterIP does not serve are refused; unallocated Service addresses are dropped
    // (k1s's own node-local Service addresses are real local addresses and pass).
    r.rule(ENDPOINTS_CHECK, format!("ip daddr @{CLUSTER_IPS} goto {REJECT}"));
    r.rule(ENDPOINTS_CHECK, "fib daddr type local return");
    r.rule(ENDPOINTS_CHECK, format!("ip daddr {} drop", node.service_cidr));
    r.rule(FIREWALL_CHECK, format!("ip daddr . meta l4proto . th dport vmap @{FIREWALL_IPS}"));
    r.rule(REJECT, "meta l4proto tcp reject with tcp reset");
    r.rule(REJECT, "reject");
    r.rule(MARK_MASQ, format!("meta mark set meta mark or {MASQUERADE_MARK}"));
    r.rule(MASQUERADING, format!("ip saddr . ip daddr @{HAIRPIN} jump {MARK_MASQ}"));
    r.rule(MASQUERADING, format!("meta mark & {MASQUERADE_MARK} == 0 return"));
    r.rule(MASQUERADING, format!("meta mark set meta mark xor {MASQUERADE_MARK}"));
    r.rule(MASQUERADING, "masquerade fully-random");
}

fn service_chain(sp: &ServicePort) -> String {
    format!("service-{}", sp.chain_base())
}
fn local_chain(sp: &ServicePort) -> String {
    format!("local-{}", sp.chain_base())
}
fn external_chain(sp: &ServicePort) -> String {
    format!("external-{}", sp.chain_base())
}
fn firewall_chain(sp: &ServicePort) -> String {
    format!("firewall-{}", sp.chain_base())
}
fn endpoint_suffix(sp: &ServicePort, ep: &Endpoint) -> String {
    format!("{}__{}/{}", sp.chain_base(), ep.ip, ep.port)
}

/// Rules, chains and map elements of one Service port.
fn service_port(r: &mut Ruleset, sp: &ServicePort, eps: &[Endpoint], node: &NodeInfo) {
    let c = categorize(eps, sp);
    let proto = sp.protocol;
    let key = |ip: Ipv4Addr, port: u16| format!("{ip} . {proto} . {port}");
    let reject = format!("goto {REJECT}");

    let cluster_chain = service_chain(sp);
    let uses_cluster_chain = !c.cluster.is_empty() && sp.uses_cluster_endpoints();
    let local_chain = local_chain(sp);
    let uses_local_chain = !c.local.is_empty() && sp.uses_local_endpoints();

    let (internal_chain, has_internal) = if sp.internal_policy_local {
        (&local_chain, c.has_any && !c.local.is_empty())
    } else {
        (&cluster_chain, c.has_any)
    };
    let (external_policy_chain, has_external) = if sp.external_policy_local {
        (&local_chain, c.has_any && !c.local.is_empty())
    } else {
        (&cluster_chain, c.has_any)
    };
    let external = external_chain(sp);
    let uses_external_chain = c.has_any && sp.externally_accessible();
    // With no endpoints at all: reject. With endpoints elsewhere only (Local policy): drop.
    let internal_verdict = if c.has_any { "drop".to_string() } else { reject.clone() };
    let external_verdict = internal_verdict.clone();

    r.element(CLUSTER_IPS, sp.cluster_ip.to_string(), "");
    if has_internal {
        r.element(SERVICE_IPS, key(sp.cluster_ip, sp.port), format!("goto {internal_chain}"));
    } else {
        r.element(NO_ENDPOINT_SERVICES, key(sp.cluster_ip, sp.port), internal_verdict);
    }
    let vips: Vec<Ipv4Addr> = sp.external_ips.iter().chain(&sp.load_balancer_vips).copied().collect();
    for ip in &vips {
        if c.has_any {
            r.element(SERVICE_IPS, key(*ip, sp.port), format!("goto {external}"));
        }
        if !has_external {
            r.element(NO_ENDPOINT_SERVICES, key(*ip, sp.port), external_verdict.clone());
        }
    }
    let uses_firewall = !sp.load_balancer_vips.is_empty() && !sp.load_balancer_source_ranges.is_empty();
    if uses_firewall {
        let fw = firewall_chain(sp);
        for ip in &sp.load_balancer_vips {
            r.element(FIREWALL_IPS, key(*ip, sp.port), format!("goto {fw}"));
        }
        let mut sources: Vec<String> = sp.load_balancer_source_ranges.iter().map(ToString::to_string).collect();
        let from_node = node.ips.iter().any(|ip| sp.load_balancer_source_ranges.iter().any(|c| c.contains(*ip)));
        if from_node {
            sources.extend(sp.load_balancer_vips.iter().map(ToString::to_string));
        }
        r.rule(&fw, format!("ip saddr != {{ {} }} drop", sources.join(", ")));
    }
    if let Some(np) = sp.node_port {
        let k = format!("{proto} . {np}");
        if c.has_any {
            r.element(SERVICE_NODEPORTS, k.clone(), format!("goto {external}"));
        }
        if !has_external {
            r.element(NO_ENDPOINT_NODEPORTS, k, external_verdict);
        }
    }

    // Internal traffic from outside the pod network (the host, routed clients) is masqueraded.
    if has_internal {
        r.rule(
            internal_chain,
            format!(
                "ip daddr {} {proto} dport {} ip saddr != {} jump {MARK_MASQ}",
                sp.cluster_ip, sp.port, node.cluster_cidr
            ),
        );
    }
    if uses_external_chain {
        if !sp.external_policy_local {
            r.rule(&external, format!("jump {MARK_MASQ}"));
        } else {
            // Pods and the host itself are not "external": they may use any endpoint.
            if uses_cluster_chain {
                r.rule(&external, format!("ip saddr {} goto {cluster_chain}", node.cluster_cidr));
            }
            r.rule(&external, format!("fib saddr type local jump {MARK_MASQ}"));
            if uses_cluster_chain {
                r.rule(&external, format!("fib saddr type local goto {cluster_chain}"));
            }
        }
        if has_external {
            r.rule(&external, format!("goto {external_policy_chain}"));
        }
    }
    if uses_cluster_chain {
        endpoint_rules(r, sp, &cluster_chain, &c.cluster);
    }
    if uses_local_chain {
        endpoint_rules(r, sp, &local_chain, &c.local);
    }
    if let Some(timeout) = sp.affinity_timeout {
        for ep in &c.reachable {
            let sfx = endpoint_suffix(sp, ep);
            let set = format!("affinity-{sfx}");
            let timeout = format!("timeout {timeout}s");
            r.declare_dynamic_set(&set, &["type ipv4_addr", "flags dynamic,timeout", &timeout]);
            let chain = format!("endpoint-{sfx}");
            r.rule(&chain, format!("update @{set} {{ ip saddr }}"));
            r.rule(&chain, format!("meta l4proto {proto} dnat ip to {}:{}", ep.ip, ep.port));
        }
    }
    for ep in &c.reachable {
        r.element(HAIRPIN, format!("{} . {}", ep.ip, ep.ip), "");
    }
}

/// The load-balancing rules of a policy chain over `eps` (never empty).
fn endpoint_rules(r: &mut Ruleset, sp: &ServicePort, chain: &str, eps: &[Endpoint]) {
    let proto = sp.protocol;
    if sp.affinity_timeout.is_some() {
        for ep in eps {
            let sfx = endpoint_suffix(sp, ep);
            r.rule(chain, format!("ip saddr @affinity-{sfx} goto endpoint-{sfx}"));
        }
        let arms: Vec<String> =
            eps.iter().enumerate().map(|(i, ep)| format!("{i} : goto endpoint-{}", endpoint_suffix(sp, ep))).collect();
        r.rule(chain, format!("numgen random mod {} vmap {{ {} }}", eps.len(), arms.join(", ")));
        return;
    }
    match eps {
        [one] => r.rule(chain, format!("meta l4proto {proto} dnat ip to {}:{}", one.ip, one.port)),
        _ => {
            let arms: Vec<String> =
                eps.iter().enumerate().map(|(i, ep)| format!("{i} : {} . {}", ep.ip, ep.port)).collect();
            r.rule(
                chain,
                format!(
                    "meta l4proto {proto} dnat ip to numgen random mod {} map {{ {} }}",
                    eps.len(),
                    arms.join(", ")
                ),
            );
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::endpoints::tests::{slice, Ep};
    use crate::service::tests::svc;
    use k8s_openapi::api::core::v1::ServiceSpec;
    use std::path::PathBuf;

    pub(crate) fn node() -> NodeInfo {
        NodeInfo {
            name: "node1".into(),
            ips: vec![Ipv4Addr::new(192, 0, 2, 2)],
            cluster_cidr: "10.42.0.0/16".parse().expect("cidr"),
            service_cidr: "10.43.0.0/16".parse().expect("cidr"),
        }
    }

    /// The part of `r` that an empty cluster does not have: chains that differ from the empty
    /// ruleset's, and sets with elements of their own.
    pub(crate) fn feature_text(r: &Ruleset) -> String {
        let empty = render(&ClusterState::default(), &node());
        let mut only = r.clone();
        only.chains.retain(|n, c| empty.chains.get(n) != Some(c));
        only.sets.retain(|n, s| {
            let base = empty.sets.get(n);
            base.is_none_or(|b| b.elements != s.elements)
        });
        only.to_string()
    }

    /// Compares `text` with `src/golden/NAME.nft`; `K1S_UPDATE_GOLDEN=1` rewrites the file.
    pub(crate) fn golden(name: &str, text: &str) {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/golden").join(format!("{name}.nft"));
        if std::env::var_os("K1S_UPDATE_GOLDEN").is_some() {
            std::fs::create_dir_all(path.parent().expect("dir")).expect("golden dir");
            std::fs::write(&path, text).expect("write golden");
            return;
        }
        let want = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (run with K1S_UPDATE_GOLDEN=1 to create it)", path.display()));
        assert!(
            text == want,
            "{name}: rendered ruleset differs from {}\n--- rendered:\n{text}\n--- golden:\n{want}",
            path.display()
        );
    }

    pub(crate) fn state(services: Vec<Service>, slices: Vec<EndpointSlice>) -> ClusterState {
        ClusterState {
            services: services.into_iter().map(Arc::new).collect(),
            endpoint_slices: slices.into_iter().map(Arc::new).collect(),
            ..Default::default()
        }
    }

    fn spec(s: &mut Service) -> &mut ServiceSpec {
        s.spec.as_mut().expect("spec")
    }

    fn ready(ip: &str) -> Ep<'_> {
        (ip, true, true, false, "node1")
    }

    fn render_feature(services: Vec<Service>, slices: Vec<EndpointSlice>) -> String {
        feature_text(&render(&state(services, slices), &node()))
    }

    #[test]
    fn empty_cluster_renders_the_base_table() {
        golden("base", &render(&ClusterState::default(), &node()).to_string());
    }

    #[test]
    fn cluster_ip_load_balances_over_ready_endpoints_only() {
        let s = svc("default", "web", "10.43.0.20", 80);
        let sl = slice(
            "default",
            "web",
            8080,
            &[ready("10.42.0.5"), ready("10.42.0.6"), ("10.42.0.7", false, false, false, "node1"), ready("10.42.0.8")],
        );
        let text = render_feature(vec![s], vec![sl]);
        assert!(!text.contains("10.42.0.7"), "a not-ready endpoint gets no traffic");
        golden("cluster_ip", &text);
    }

    #[test]
    fn single_endpoint_is_a_plain_dnat() {
        let text = render_feature(
            vec![svc("default", "one", "10.43.0.21", 80)],
            vec![slice("default", "one", 8080, &[ready("10.42.0.5")])],
        );
        assert!(text.contains("meta l4proto tcp dnat ip to 10.42.0.5:8080"), "{text}");
    }

    #[test]
    fn service_without_ready_endpoints_is_rejected() {
        let sl = slice("default", "web", 8080, &[("10.42.0.7", false, false, false, "node1")]);
        let text = render_feature(vec![svc("default", "web", "10.43.0.20", 80)], vec![sl]);
        golden("no_endpoints", &text);
    }

    #[test]
    fn headless_and_node_local_services_are_not_programmed() {
        let headless = svc("default", "db", "None", 5432);
        let mut dns = svc("kube-system", "kube-dns", "10.43.0.10", 53);
        dns.metadata.annotations = Some([(service::NODE_LOCAL_ANNOTATION.to_string(), "true".to_string())].into());
        let text = render_feature(
            vec![headless, dns],
            vec![slice("default", "db", 5432, &[ready("10.42.0.9")]), slice("kube-system", "kube-dns", 53, &[])],
        );
        assert!(!text.contains("10.42.0.9") && !text.contains("service-"), "{text}");
        assert!(text.contains("10.43.0.10 . tcp . 53"), "node-local Service ports are exempt from egress policy");
    }

    #[test]
    fn node_port_is_served_on_node_addresses_and_localhost_with_masquerade() {
        let mut s = svc("default", "web", "10.43.0.20", 80);
        spec(&mut s).type_ = Some("NodePort".into());
        spec(&mut s).ports.as_mut().expect("ports")[0].node_port = Some(30080);
        let text =
            render_feature(vec![s], vec![slice("default", "web", 8080, &[ready("10.42.0.5"), ready("10.42.0.6")])]);
        golden("node_port", &text);
    }

    #[test]
    fn node_port_without_endpoints_is_rejected() {
        let mut s = svc("default", "web", "10.43.0.20", 80);
        spec(&mut s).type_ = Some("NodePort".into());
        spec(&mut s).ports.as_mut().expect("ports")[0].node_port = Some(30080);
        let text = render_feature(vec![s], vec![]);
        assert!(text.contains("tcp . 30080 : goto reject-chain"), "{text}");
        assert!(text.contains("10.43.0.20 . tcp . 80 : goto reject-chain"), "{text}");
    }

    #[test]
    fn session_affinity_uses_per_endpoint_chains_and_timed_sets() {
        let mut s = svc("default", "sticky", "10.43.0.30", 80);
        spec(&mut s).session_affinity = Some("ClientIP".into());
        spec(&mut s).session_affinity_config = Some(k8s_openapi::api::core::v1::SessionAffinityConfig {
            client_ip: Some(k8s_openapi::api::core::v1::ClientIPConfig { timeout_seconds: Some(600) }),
        });
        let text =
            render_feature(vec![s], vec![slice("default", "sticky", 8080, &[ready("10.42.0.5"), ready("10.42.0.6")])]);
        golden("session_affinity", &text);
    }

    #[test]
    fn external_traffic_policy_local_uses_only_local_endpoints_for_outside_clients() {
        let mut s = svc("default", "web", "10.43.0.20", 80);
        spec(&mut s).type_ = Some("NodePort".into());
        spec(&mut s).external_traffic_policy = Some("Local".into());
        spec(&mut s).ports.as_mut().expect("ports")[0].node_port = Some(30080);
        let sl = slice("default", "web", 8080, &[ready("10.42.0.5"), ("10.42.1.5", true, true, false, "node2")]);
        golden("external_policy_local", &render_feature(vec![s], vec![sl]));
    }

    #[test]
    fn external_policy_local_without_local_endpoints_drops_outside_traffic() {
        let mut s = svc("default", "web", "10.43.0.20", 80);
        spec(&mut s).type_ = Some("NodePort".into());
        spec(&mut s).external_traffic_policy = Some("Local".into());
        spec(&mut s).ports.as_mut().expect("ports")[0].node_port = Some(30080);
        let sl = slice("default", "web", 8080, &[("10.42.1.5", true, true, false, "node2")]);
        let text = render_feature(vec![s], vec![sl]);
        assert!(text.contains("tcp . 30080 : drop"), "{text}");
        assert!(text.contains("ip saddr 10.42.0.0/16 goto service-default/web/tcp/http"), "pods short-circuit: {text}");
    }

    #[test]
    fn internal_traffic_policy_local_without_local_endpoints_drops() {
        let mut s = svc("default", "web", "10.43.0.20", 80);
        spec(&mut s).internal_traffic_policy = Some("Local".into());
        let sl = slice("default", "web", 8080, &[("10.42.1.5", true, true, false, "node2")]);
        let text = render_feature(vec![s.clone()], vec![sl]);
        assert!(text.contains("10.43.0.20 . tcp . 80 : drop"), "{text}");
        let sl = slice("default", "web", 8080, &[ready("10.42.0.5"), ("10.42.1.5", true, true, false, "node2")]);
        golden("internal_policy_local", &render_feature(vec![s], vec![sl]));
    }

    #[test]
    fn external_ips_and_load_balancer_vips_go_through_the_external_chain() {
        use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, ServiceStatus};
        let mut s = svc("default", "lb", "10.43.0.40", 80);
        spec(&mut s).type_ = Some("LoadBalancer".into());
        spec(&mut s).ports.as_mut().expect("ports")[0].node_port = Some(31000);
        spec(&mut s).external_ips = Some(vec!["198.51.100.7".into()]);
        spec(&mut s).load_balancer_source_ranges = Some(vec!["192.0.2.0/24".into(), "203.0.113.0/24".into()]);
        s.status = Some(ServiceStatus {
            load_balancer: Some(LoadBalancerStatus {
                ingress: Some(vec![LoadBalancerIngress {
                    ip: Some("192.0.2.2".into()),
                    ip_mode: Some("VIP".into()),
                    ..Default::default()
                }]),
            }),
            ..Default::default()
        });
        let text = render_feature(vec![s], vec![slice("default", "lb", 8080, &[ready("10.42.0.5")])]);
        golden("load_balancer", &text);
    }

    #[test]
    fn rendering_is_deterministic_whatever_the_input_order() {
        let a = svc("a", "x", "10.43.0.2", 80);
        let b = svc("b", "y", "10.43.0.3", 80);
        let sa = slice("a", "x", 80, &[ready("10.42.0.2")]);
        let sb = slice("b", "y", 80, &[ready("10.42.0.3")]);
        let one = render(&state(vec![a.clone(), b.clone()], vec![sa.clone(), sb.clone()]), &node());
        let two = render(&state(vec![b, a], vec![sb, sa]), &node());
        assert_eq!(one, two);
    }

    #[test]
    fn one_service_change_touches_only_that_services_chain_and_elements() {
        let a = svc("a", "x", "10.43.0.2", 80);
        let b = svc("b", "y", "10.43.0.3", 80);
        let before = render(
            &state(
                vec![a.clone(), b.clone()],
                vec![slice("a", "x", 80, &[ready("10.42.0.2")]), slice("b", "y", 80, &[ready("10.42.0.3")])],
            ),
            &node(),
        );
        let after = render(
            &state(
                vec![a, b],
                vec![
                    slice("a", "x", 80, &[ready("10.42.0.2")]),
                    slice("b", "y", 80, &[ready("10.42.0.3"), ready("10.42.0.4")]),
                ],
            ),
            &node(),
        );
        let d = after.diff_script(&before).expect("incremental");
        assert!(!d.contains("a/x"), "service a untouched: {d}");
        assert_eq!(
            d,
            "flush chain ip k1s service-b/y/tcp/http\n\
             add rule ip k1s service-b/y/tcp/http ip daddr 10.43.0.3 tcp dport 80 ip saddr != 10.42.0.0/16 jump mark-for-masquerade\n\
             add rule ip k1s service-b/y/tcp/http meta l4proto tcp dnat ip to numgen random mod 2 map { 0 : 10.42.0.3 . 80, 1 : 10.42.0.4 . 80 }\n\
             add element ip k1s hairpin-endpoints { 10.42.0.4 . 10.42.0.4 }\n"
        );
    }
}
