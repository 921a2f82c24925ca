//! NetworkPolicy (networking.k8s.io/v1) in the k1s table.
//!
//! Every pod selected by at least one policy gets its own chain per direction
//! (`ingress-NS/POD`, `egress-NS/POD`) holding the union of what the policies selecting it allow,
//! then a reject (`icmp admin-prohibited`: the client fails at once with "no route to host"
//! instead of hanging). The verdict maps `policy-ingress` and `policy-egress` send a packet to
//! the chain of its destination and source pod; pods no policy selects have no element, so their
//! traffic is untouched. Packets of established and related connections always pass.
//!
//! Where it is enforced: pod-to-pod and pod-to-outside traffic on the `forward` hook (bridged
//! traffic too, with `net.bridge.bridge-nf-call-iptables=1`), after DNAT, so Service traffic is
//! judged against the endpoint pod, before masquerade, so ipBlocks see the real client; pod-to-node
//! traffic (egress) on the `input` hook. Traffic from the node to its pods (kubelet probes, NodePort
//! traffic of local clients) is not filtered. The Services k1s serves itself on a local address
//! (cluster DNS, [`crate::service::NODE_LOCAL_ANNOTATION`]) stay reachable under egress policies:
//! no pod stands behind them that a policy could name.
//!
//! Selectors are resolved to pod addresses here (pure): podSelector, namespaceSelector and both,
//! ipBlock with except, ports by number, range (`endPort`) or name (resolved per pod), protocol.

use crate::cidr::Cidr;
use crate::render::{ClusterState, NodeInfo};
use crate::ruleset::{Ruleset, SetKind};
use crate::service::{self, Protocol};
use k1s_api::selectors;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicyPeer, NetworkPolicyPort};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::Ipv4Addr;

const INGRESS_MAP: &str = "policy-ingress";
const EGRESS_MAP: &str = "policy-egress";
const NODE_LOCAL_SERVICES: &str = "node-local-services";
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";
const DENY: &str = "reject with icmp type admin-prohibited";

/// A pod policies can select or name: has an IPv4 address, not host-network, not finished.
struct PodView<'a> {
    namespace: &'a str,
    name: &'a str,
    ip: Ipv4Addr,
    labels: BTreeMap<String, String>,
    pod: &'a Pod,
}

fn pod_view(pod: &Pod) -> Option<PodView<'_>> {
    let spec = pod.spec.as_ref()?;
    if spec.host_network == Some(true) {
        return None;
    }
    let status = pod.status.as_ref()?;
    if matches!(status.phase.as_deref(), Some("Succeeded" | "Failed")) {
        return None;
    }
    let ip = status
        .pod_ips
        .iter()
        .flatten()
        .map(|p| p.ip.as_str())
        .chain(status.pod_ip.as_deref())
        .find_map(|s| s.parse::<Ipv4Addr>().ok())?;
    Some(PodView {
        namespace: pod.metadata.namespace.as_deref()?,
        name: pod.metadata.name.as_deref()?,
        ip,
        labels: pod.metadata.labels.clone().unwrap_or_default(),
        pod,
    })
}

/// Who is on the other end of a rule.
enum Peer {
    /// Any address.
    Any,
    /// These pods (indices into the pod list); possibly none.
    Pods(Vec<usize>),
    /// An address block minus exceptions.
    Block { cidr: Cidr, except: Vec<Cidr> },
}

/// A port clause: a protocol, and a port range or a name, or all ports of the protocol.
#[derive(Clone)]
enum PortSpec {
    Range(Protocol, Option<(u16, u16)>),
    Named(Protocol, String),
}

/// `None` means every port of every protocol.
fn port_specs(ports: Option<&Vec<NetworkPolicyPort>>) -> Option<Vec<PortSpec>> {
    let ports = ports.filter(|p| !p.is_empty())?;
    Some(
        ports
            .iter()
            .filter_map(|p| {
                let proto = Protocol::parse(p.protocol.as_deref())?;
                Some(match &p.port {
                    None => PortSpec::Range(proto, None),
                    Some(IntOrString::Int(n)) => {
                        let lo = u16::try_from(*n).ok()?;
                        let hi = p.end_port.and_then(|e| u16::try_from(e).ok()).unwrap_or(lo).max(lo);
                        PortSpec::Range(proto, Some((lo, hi)))
                    }
                    Some(IntOrString::String(name)) => PortSpec::Named(proto, name.clone()),
                })
            })
            .collect(),
    )
}

/// The container port named `name` with this protocol in `pod`.
fn named_port(pod: &Pod, proto: Protocol, name: &str) -> Option<u16> {
    pod.spec.as_ref()?.containers.iter().flat_map(|c| c.ports.iter().flatten()).find_map(|p| {
        let same = p.name.as_deref() == Some(name) && Protocol::parse(p.protocol.as_deref()) == Some(proto);
        if same {
            u16::try_from(p.container_port).ok()
        } else {
            None
        }
    })
}

/// nft text for numeric port clauses, one string per protocol; `None` entries mean any port.
fn port_matches(specs: &[(Protocol, Option<(u16, u16)>)]) -> Vec<String> {
    let mut by_proto: BTreeMap<Protocol, Option<BTreeSet<(u16, u16)>>> = BTreeMap::new();
    for (proto, range) in specs {
        let entry = by_proto.entry(*proto).or_insert_with(|| Some(BTreeSet::new()));
        match (range, entry.as_mut()) {
            (None, _) => *entry = None,
            (Some(r), Some(set)) => {
                set.insert(*r);
            }
            (Some(_), None) => {}
        }
    }
    by_proto
        .into_iter()
        .map(|(proto, ranges)| match ranges {
            None => format!("meta l4proto {proto}"),
            Some(ranges) => {
                let items: Vec<String> = ranges
                    .iter()
                    .map(|(lo, hi)| if lo == hi { lo.to_string() } else { format!("{lo}-{hi}") })
                    .collect();
                if items.len() == 1 {
                    format!("meta l4proto {proto} th dport {}", items[0])
                } else {
                    format!("meta l4proto {proto} th dport {{ {} }}", items.join(", "))
                }
            }
        })
        .collect()
}

fn addr_list(ips: &[Ipv4Addr]) -> String {
    match ips {
        [one] => one.to_string(),
        _ => format!("{{ {} }}", ips.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")),
    }
}

struct Context<'a> {
    pods: Vec<PodView<'a>>,
    namespace_labels: HashMap<&'a str, BTreeMap<String, String>>,
}

impl Context<'_> {
    fn namespace_matches(&self, ns: &str, sel: &LabelSelector) -> bool {
        match self.namespace_labels.get(ns) {
            Some(l) => selectors::matches(Some(sel), Some(l)),
            // A namespace not (yet) seen still carries its name label.
            None => selectors::matches(Some(sel), Some(&[(NAMESPACE_NAME_LABEL.to_string(), ns.to_string())].into())),
        }
    }

    fn peers(&self, policy_ns: &str, peers: Option<&Vec<NetworkPolicyPeer>>) -> Vec<Peer> {
        let Some(peers) = peers.filter(|p| !p.is_empty()) else { return vec![Peer::Any] };
        peers
            .iter()
            .filter_map(|p| {
                if let Some(b) = &p.ip_block {
                    let cidr = b.cidr.parse().ok()?;
                    let except = b.except.iter().flatten().filter_map(|e| e.parse().ok()).collect();
                    return Some(Peer::Block { cidr, except });
                }
                if p.pod_selector.is_none() && p.namespace_selector.is_none() {
                    return None;
                }
                let selected = self
                    .pods
                    .iter()
                    .enumerate()
                    .filter(|(_, pod)| match &p.namespace_selector {
                        None => pod.namespace == policy_ns,
                        Some(ns) => self.namespace_matches(pod.namespace, ns),
                    })
                    .filter(|(_, pod)| {
                        p.pod_selector.as_ref().is_none_or(|s| selectors::matches(Some(s), Some(&pod.labels)))
                    })
                    .map(|(i, _)| i)
                    .collect();
                Some(Peer::Pods(selected))
            })
            .collect()
    }

    /// The pods a peer covers (for resolving named ports of egress destinations).
    fn peer_pods(&self, peer: &Peer) -> Vec<usize> {
        match peer {
            Peer::Any => (0..self.pods.len()).collect(),
            Peer::Pods(p) => p.clone(),
            Peer::Block { cidr, except } => (0..self.pods.len())
                .filter(|i| cidr.contains(self.pods[*i].ip) && !except.iter().any(|e| e.contains(self.pods[*i].ip)))
                .collect(),
        }
    }

    /// `ip saddr …` / `ip daddr …` text of a peer; `None` when it matches nobody.
    fn peer_match(&self, peer: &Peer, dir: &str) -> Option<String> {
        match peer {
            Peer::Any => Some(String::new()),
            Peer::Pods(p) if p.is_empty() => None,
            Peer::Pods(p) => {
                let mut ips: Vec<Ipv4Addr> = p.iter().map(|i| self.pods[*i].ip).collect();
                ips.sort();
                ips.dedup();
                Some(format!("ip {dir} {}", addr_list(&ips)))
            }
            Peer::Block { cidr, except } => {
                let mut s = format!("ip {dir} {cidr}");
                if !except.is_empty() {
                    let ex: Vec<String> = except.iter().map(ToString::to_string).collect();
                    s.push_str(&format!(" ip {dir} != {{ {} }}", ex.join(", ")));
                }
                Some(s)
            }
        }
    }
}

fn join_rule(parts: &[&str], verdict: &str) -> String {
    let mut v: Vec<&str> = parts.iter().copied().filter(|p| !p.is_empty()).collect();
    v.push(verdict);
    v.join(" ")
}

/// Policy types of a policy: explicit, or Ingress plus Egress when egress rules exist.
fn policy_types(p: &NetworkPolicy) -> (bool, bool) {
    let spec = p.spec.as_ref();
    match spec.and_then(|s| s.policy_types.as_ref()) {
        Some(t) => (t.iter().any(|t| t == "Ingress"), t.iter().any(|t| t == "Egress")),
        None => (true, spec.and_then(|s| s.egress.as_ref()).is_some_and(|e| !e.is_empty())),
    }
}

/// Adds the policy maps, chains and base-chain rules to `r`.
pub(crate) fn render(r: &mut Ruleset, state: &ClusterState, _node: &NodeInfo) {
    r.declare_set(INGRESS_MAP, SetKind::Map, &["type ipv4_addr : verdict"]);
    r.declare_set(EGRESS_MAP, SetKind::Map, &["type ipv4_addr : verdict"]);
    r.declare_set(NODE_LOCAL_SERVICES, SetKind::Set, &["type ipv4_addr . inet_proto . inet_service"]);
    for svc in &state.services {
        if let Some((ip, ports)) = service::node_local_ports(svc) {
            for (proto, port) in ports {
                r.element(NODE_LOCAL_SERVICES, format!("{ip} . {proto} . {port}"), "");
            }
        }
    }
    r.rule("filter-forward", "ct state established,related accept");
    r.rule("filter-forward", format!("ip saddr vmap @{EGRESS_MAP}"));
    r.rule("filter-forward", format!("ip daddr vmap @{INGRESS_MAP}"));
    r.rule("filter-input", "ct state established,related accept");
    r.rule("filter-input", format!("ip daddr . meta l4proto . th dport @{NODE_LOCAL_SERVICES} accept"));
    r.rule("filter-input", format!("ip saddr vmap @{EGRESS_MAP}"));

    if state.network_policies.is_empty() {
        return;
    }
    let mut pods: Vec<PodView<'_>> = state.pods.iter().filter_map(|p| pod_view(p)).collect();
    pods.sort_by(|a, b| (a.namespace, a.name).cmp(&(b.namespace, b.name)));
    let mut seen = HashSet::new();
    pods.retain(|p| seen.insert(p.ip));
    let namespace_labels = state
        .namespaces
        .iter()
        .filter_map(|n| {
            let name = n.metadata.name.as_deref()?;
            let mut labels = n.metadata.labels.clone().unwrap_or_default();
            labels.entry(NAMESPACE_NAME_LABEL.to_string()).or_insert_with(|| name.to_string());
            Some((name, labels))
        })
        .collect();
    let cx = Context { pods, namespace_labels };
    let mut policies: Vec<&NetworkPolicy> = state.network_policies.iter().map(|p| p.as_ref()).collect();
    policies.sort_by(|a, b| (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name)));

    for (i, pod) in cx.pods.iter().enumerate() {
        let selecting: Vec<&NetworkPolicy> = policies
            .iter()
            .copied()
            .filter(|p| p.metadata.namespace.as_deref() == Some(pod.namespace))
            .filter(|p| {
                let sel = p.spec.as_ref().and_then(|s| s.pod_selector.clone()).unwrap_or_default();
                selectors::matches(Some(&sel), Some(&pod.labels))
            })
            .collect();
        let ingress: Vec<&NetworkPolicy> = selecting.iter().copied().filter(|p| policy_types(p).0).collect();
        let egress: Vec<&NetworkPolicy> = selecting.iter().copied().filter(|p| policy_types(p).1).collect();
        if !ingress.is_empty() {
            let chain = format!("ingress-{}/{}", pod.namespace, pod.name);
            ingress_rules(r, &cx, i, &chain, &ingress);
            r.element(INGRESS_MAP, pod.ip.to_string(), format!("jump {chain}"));
        }
        if !egress.is_empty() {
            let chain = format!("egress-{}/{}", pod.namespace, pod.name);
            egress_rules(r, &cx, &chain, &egress);
            r.element(EGRESS_MAP, pod.ip.to_string(), format!("jump {chain}"));
        }
    }
}

/// What may reach pod `target`: `accept` per allowed (source, ports), then deny.
fn ingress_rules(r: &mut Ruleset, cx: &Context<'_>, target: usize, chain: &str, policies: &[&NetworkPolicy]) {
    let pod = &cx.pods[target];
    r.chain(chain);
    for p in policies {
        let ns = p.metadata.namespace.as_deref().unwrap_or_default();
        for rule in p.spec.as_ref().and_then(|s| s.ingress.as_ref()).into_iter().flatten() {
            let ports: Option<Vec<String>> = port_specs(rule.ports.as_ref()).map(|specs| {
                let numeric: Vec<(Protocol, Option<(u16, u16)>)> = specs
                    .iter()
                    .filter_map(|s| match s {
                        PortSpec::Range(proto, range) => Some((*proto, *range)),
                        PortSpec::Named(proto, name) => {
                            named_port(pod.pod, *proto, name).map(|n| (*proto, Some((n, n))))
                        }
                    })
                    .collect();
                port_matches(&numeric)
            });
            if ports.as_ref().is_some_and(Vec::is_empty) {
                continue; // only named ports this pod does not have: matches nothing
            }
            for peer in cx.peers(ns, rule.from.as_ref()) {
                let Some(from) = cx.peer_match(&peer, "saddr") else { continue };
                match &ports {
                    None => r.rule(chain, join_rule(&[&from], "accept")),
                    Some(ports) => {
                        for pm in ports {
                            r.rule(chain, join_rule(&[&from, pm], "accept"));
                        }
                    }
                }
            }
        }
    }
    r.rule(chain, DENY);
}

/// Where the pod may send: `return` (on to the destination's ingress check) per allowed
/// (destination, ports), then deny.
fn egress_rules(r: &mut Ruleset, cx: &Context<'_>, chain: &str, policies: &[&NetworkPolicy]) {
    r.chain(chain);
    for p in policies {
        let ns = p.metadata.namespace.as_deref().unwrap_or_default();
        for rule in p.spec.as_ref().and_then(|s| s.egress.as_ref()).into_iter().flatten() {
            let specs = port_specs(rule.ports.as_ref());
            let peers = cx.peers(ns, rule.to.as_ref());
            let Some(specs) = specs else {
                for peer in &peers {
                    if let Some(to) = cx.peer_match(peer, "daddr") {
                        r.rule(chain, join_rule(&[&to], "return"));
                    }
                }
                continue;
            };
            let numeric: Vec<(Protocol, Option<(u16, u16)>)> = specs
                .iter()
                .filter_map(|s| match s {
                    PortSpec::Range(proto, range) => Some((*proto, *range)),
                    PortSpec::Named(..) => None,
                })
                .collect();
            let named: Vec<(Protocol, &str)> = specs
                .iter()
                .filter_map(|s| match s {
                    PortSpec::Named(proto, name) => Some((*proto, name.as_str())),
                    PortSpec::Range(..) => None,
                })
                .collect();
            let numeric = port_matches(&numeric);
            for peer in &peers {
                if let Some(to) = cx.peer_match(peer, "daddr") {
                    for pm in &numeric {
                        r.rule(chain, join_rule(&[&to, pm], "return"));
                    }
                }
                if named.is_empty() {
                    continue;
                }
                // Named ports resolve per destination pod: match (address, protocol, port).
                let mut triples = BTreeSet::new();
                for i in cx.peer_pods(peer) {
                    for (proto, name) in &named {
                        if let Some(port) = named_port(cx.pods[i].pod, *proto, name) {
                            triples.insert((cx.pods[i].ip, *proto, port));
                        }
                    }
                }
                if !triples.is_empty() {
                    let items: Vec<String> = triples.iter().map(|(ip, pr, po)| format!("{ip} . {pr} . {po}")).collect();
                    r.rule(chain, format!("ip daddr . meta l4proto . th dport {{ {} }} return", items.join(", ")));
                }
            }
        }
    }
    r.rule(chain, DENY);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::tests::{feature_text, golden, node};
    use crate::render::{render as render_all, ClusterState};
    use k8s_openapi::api::core::v1::{Container, ContainerPort, Namespace, PodIP, PodSpec, PodStatus};
    use k8s_openapi::api::networking::v1::{
        IPBlock, NetworkPolicyEgressRule, NetworkPolicyIngressRule, NetworkPolicySpec,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use std::sync::Arc;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn pod(ns: &str, name: &str, ip: &str, l: &[(&str, &str)]) -> Pod {
        Pod {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                labels: Some(labels(l)),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    ports: Some(vec![ContainerPort {
                        name: Some("http".into()),
                        container_port: 8080,
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
                ..Default::default()
            }),
        }
    }

    fn ns(name: &str, l: &[(&str, &str)]) -> Namespace {
        Namespace {
            metadata: ObjectMeta { name: Some(name.into()), labels: Some(labels(l)), ..Default::default() },
            ..Default::default()
        }
    }

    fn sel(l: &[(&str, &str)]) -> LabelSelector {
        LabelSelector { match_labels: Some(labels(l)), ..Default::default() }
    }

    fn policy(ns: &str, name: &str, spec: NetworkPolicySpec) -> NetworkPolicy {
        NetworkPolicy {
            metadata: ObjectMeta { namespace: Some(ns.into()), name: Some(name.into()), ..Default::default() },
            spec: Some(spec),
        }
    }

    fn tcp(port: IntOrString) -> NetworkPolicyPort {
        NetworkPolicyPort { port: Some(port), protocol: Some("TCP".into()), end_port: None }
    }

    fn world() -> ClusterState {
        ClusterState {
            pods: vec![
                pod("app", "web-1", "10.42.0.10", &[("app", "web")]),
                pod("app", "client", "10.42.0.11", &[("app", "client")]),
                pod("other", "spy", "10.42.0.12", &[("app", "client")]),
            ]
            .into_iter()
            .map(Arc::new)
            .collect(),
            namespaces: vec![ns("app", &[("team", "a")]), ns("other", &[("team", "b")])]
                .into_iter()
                .map(Arc::new)
                .collect(),
            ..Default::default()
        }
    }

    fn with(policies: Vec<NetworkPolicy>) -> String {
        let mut s = world();
        s.network_policies = policies.into_iter().map(Arc::new).collect();
        feature_text(&render_all(&s, &node()))
    }

    #[test]
    fn without_policies_no_pod_has_a_chain() {
        let text = with(vec![]);
        assert!(!text.contains("ingress-") && !text.contains("egress-"), "{text}");
    }

    #[test]
    fn policy_with_no_rules_denies_all_ingress_of_selected_pods_only() {
        let text = with(vec![policy(
            "app",
            "deny",
            NetworkPolicySpec { pod_selector: Some(sel(&[("app", "web")])), ..Default::default() },
        )]);
        golden("policy_default_deny", &text);
        assert!(!text.contains("10.42.0.11 : jump"), "unselected pods are untouched");
    }

    #[test]
    fn pod_and_namespace_selectors_with_ports_allow_matching_sources() {
        let allow = NetworkPolicySpec {
            pod_selector: Some(sel(&[("app", "web")])),
            ingress: Some(vec![
                NetworkPolicyIngressRule {
                    from: Some(vec![NetworkPolicyPeer {
                        pod_selector: Some(sel(&[("app", "client")])),
                        ..Default::default()
                    }]),
                    ports: Some(vec![tcp(IntOrString::String("http".into())), tcp(IntOrString::Int(9000))]),
                },
                NetworkPolicyIngressRule {
                    from: Some(vec![NetworkPolicyPeer {
                        namespace_selector: Some(sel(&[("team", "b")])),
                        pod_selector: Some(sel(&[("app", "client")])),
                        ..Default::default()
                    }]),
                    ports: Some(vec![NetworkPolicyPort {
                        port: Some(IntOrString::Int(7000)),
                        end_port: Some(7010),
                        protocol: Some("UDP".into()),
                    }]),
                },
            ]),
            ..Default::default()
        };
        let text = with(vec![policy("app", "allow", allow)]);
        golden("policy_selectors_ports", &text);
    }

    #[test]
    fn ip_block_with_except_and_egress_named_ports() {
        let spec = NetworkPolicySpec {
            pod_selector: Some(sel(&[("app", "client")])),
            policy_types: Some(vec!["Egress".into()]),
            egress: Some(vec![
                NetworkPolicyEgressRule {
                    to: Some(vec![NetworkPolicyPeer {
                        ip_block: Some(IPBlock {
                            cidr: "10.0.0.0/8".into(),
                            except: Some(vec!["10.42.0.0/16".into()]),
                        }),
                        ..Default::default()
                    }]),
                    ports: None,
                },
                NetworkPolicyEgressRule {
                    to: Some(vec![NetworkPolicyPeer {
                        namespace_selector: Some(LabelSelector::default()),
                        ..Default::default()
                    }]),
                    ports: Some(vec![tcp(IntOrString::String("http".into()))]),
                },
            ]),
            ..Default::default()
        };
        let text = with(vec![policy("app", "egress", spec)]);
        golden("policy_egress_ipblock_named", &text);
    }

    #[test]
    fn allow_all_ingress_rule_is_a_bare_accept() {
        let spec = NetworkPolicySpec {
            pod_selector: Some(LabelSelector::default()),
            ingress: Some(vec![NetworkPolicyIngressRule::default()]),
            ..Default::default()
        };
        let text = with(vec![policy("app", "all", spec)]);
        assert!(text.contains("\tchain ingress-app/web-1 {\n\t\taccept\n\t\treject"), "{text}");
        assert!(!text.contains("ingress-other/spy"), "policies apply in their own namespace only");
    }

    #[test]
    fn named_port_missing_on_the_pod_matches_nothing() {
        let spec = NetworkPolicySpec {
            pod_selector: Some(sel(&[("app", "web")])),
            ingress: Some(vec![NetworkPolicyIngressRule {
                from: None,
                ports: Some(vec![tcp(IntOrString::String("grpc".into()))]),
            }]),
            ..Default::default()
        };
        let text = with(vec![policy("app", "grpc", spec)]);
        assert!(
            text.contains("\tchain ingress-app/web-1 {\n\t\treject with icmp type admin-prohibited\n\t}"),
            "{text}"
        );
    }

    #[test]
    fn host_network_and_finished_pods_are_neither_selected_nor_peers() {
        let mut s = world();
        let mut host = pod("app", "host", "192.0.2.2", &[("app", "web")]);
        host.spec.as_mut().expect("spec").host_network = Some(true);
        let mut done = pod("app", "done", "10.42.0.20", &[("app", "web")]);
        done.status.as_mut().expect("status").phase = Some("Succeeded".into());
        s.pods.push(Arc::new(host));
        s.pods.push(Arc::new(done));
        s.network_policies = vec![Arc::new(policy(
            "app",
            "deny",
            NetworkPolicySpec { pod_selector: Some(sel(&[("app", "web")])), ..Default::default() },
        ))];
        let text = feature_text(&render_all(&s, &node()));
        assert!(!text.contains("192.0.2.2 : jump") && !text.contains("10.42.0.20"), "{text}");
    }
}
