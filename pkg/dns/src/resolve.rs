//! Answers one question from a [`Records`] snapshot, following the Kubernetes DNS specification
//! (schema 1.1.0) and the behaviour of CoreDNS's `kubernetes` plugin as k3s configures it
//! (`pods insecure`, reverse zones falling through to the upstream resolvers). Pure.
//!
//! Names inside the cluster domain (`<zone>`):
//! - `<svc>.<ns>.svc.<zone>`: A/AAAA with the ClusterIPs; for a headless Service the ready
//!   endpoints' addresses (NXDOMAIN when it has none); CNAME to the target of an ExternalName
//!   Service; SRV for every port.
//! - `<hostname>.<svc>.<ns>.svc.<zone>`: the endpoint(s) with that hostname (explicit, or the
//!   dashed address).
//! - `_<port>._<proto>.<svc>.<ns>.svc.<zone>`: SRV per matching port (ClusterIP: targets the
//!   Service; headless: one per ready endpoint, targeting its hostname), with the targets'
//!   addresses in the additional section.
//! - `<a-b-c-d>.<ns>.pod.<zone>`: the address spelled by the first label.
//! - `dns-version.<zone>` TXT, the apex SOA and NS, `ns.dns.<zone>` (this server's address).
//! - Anything else: NXDOMAIN, or NODATA for names that exist with other types (empty
//!   non-terminals such as `<ns>.svc.<zone>` included); both carry the zone's SOA.
//!
//! PTR questions for ClusterIPs and ready endpoint addresses are answered; every other name is
//! [`Response::Forward`]ed.

use std::net::IpAddr;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::rdata::{A, AAAA, CNAME, NS, PTR, SOA, SRV, TXT};
use hickory_proto::rr::{Name, RData, Record, RecordType};

use crate::records::{EndpointRecord, Records, ServiceKind, ServiceRecord};

/// TTL of every cluster record, and of the SOA (whose MINIMUM bounds negative caching), as
/// CoreDNS's default `ttl 5`.
pub const TTL: u32 = 5;
/// TTL of `dns-version.<zone>`.
pub const VERSION_TTL: u32 = 28800;
/// The schema version served at `dns-version.<zone>` (what CoreDNS reports).
pub const SCHEMA_VERSION: &str = "1.1.0";
/// How many ExternalName hops inside the zone are followed.
const MAX_CNAME_DEPTH: usize = 8;

/// One question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Query {
    pub name: Name,
    pub query_type: RecordType,
}

impl Query {
    pub fn new(name: Name, query_type: RecordType) -> Query {
        Query { name, query_type }
    }
}

/// What to do with a question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Response {
    /// The cluster's own answer (authoritative unless the code is SERVFAIL).
    Answer(Answer),
    /// Not a cluster name: ask the upstream resolvers.
    Forward,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Answer {
    pub code: ResponseCode,
    pub answers: Vec<Record>,
    pub authority: Vec<Record>,
    pub additionals: Vec<Record>,
    /// The target of an ExternalName Service outside the cluster domain: the server asks the
    /// upstream resolvers for it and appends their answers after the CNAME.
    pub chase: Option<Name>,
}

impl Answer {
    fn with_answers(answers: Vec<Record>) -> Answer {
        Answer { answers, ..Answer::default() }
    }
}

/// Answers `query` from `records`.
pub fn resolve(records: &Records, query: &Query) -> Response {
    let labels = lower_labels(&query.name);
    if let Some(base) = in_zone(records, &labels) {
        if !records.synced {
            return Response::Answer(Answer { code: ResponseCode::ServFail, ..Answer::default() });
        }
        return Response::Answer(zone_answer(records, &query.name, query.query_type, base, 0));
    }
    if query.query_type == RecordType::PTR && records.synced {
        if let Some(answer) = reverse_answer(records, &query.name) {
            return Response::Answer(answer);
        }
    }
    Response::Forward
}

fn lower_labels(name: &Name) -> Vec<String> {
    name.iter().map(|l| String::from_utf8_lossy(l).to_ascii_lowercase()).collect()
}

/// The labels left of the cluster domain, when `labels` is inside it.
fn in_zone<'a>(records: &Records, labels: &'a [String]) -> Option<&'a [String]> {
    let zone: Vec<&str> = records.zone.split('.').filter(|l| !l.is_empty()).collect();
    if zone.is_empty() || labels.len() < zone.len() {
        return None;
    }
    let split = labels.len() - zone.len();
    labels[split..].iter().zip(&zone).all(|(a, b)| a == b).then_some(&labels[..split])
}

fn zone_answer(r: &Records, qname: &Name, qtype: RecordType, base: &[String], depth: usize) -> Answer {
    let labels: Vec<&str> = base.iter().map(String::as_str).collect();
    match labels.as_slice() {
        [] => apex(r, qname, qtype),
        ["dns-version"] if qtype == RecordType::TXT => Answer::with_answers(vec![Record::from_rdata(
            qname.clone(),
            VERSION_TTL,
            RData::TXT(TXT::new(vec![SCHEMA_VERSION.to_string()])),
        )]),
        ["dns-version"] | ["dns"] | ["svc"] | ["pod"] => nodata(r),
        ["ns", "dns"] => addresses(r, qname, qtype, [r.dns_ip]),
        [rest @ .., "pod"] => pod_answer(r, qname, qtype, rest),
        [rest @ .., "svc"] => service_answer(r, qname, qtype, rest, depth),
        _ => nxdomain(r),
    }
}

fn apex(r: &Records, qname: &Name, qtype: RecordType) -> Answer {
    match qtype {
        RecordType::SOA => Answer::with_answers(vec![soa(r)]),
        RecordType::NS => {
            let ns = fqdn(&format!("ns.dns.{}", r.zone));
            let Some(ns) = ns else { return nodata(r) };
            Answer {
                answers: vec![Record::from_rdata(qname.clone(), TTL, RData::NS(NS(ns.clone())))],
                additionals: vec![address_record(ns, r.dns_ip)],
                ..Answer::default()
            }
        }
        _ => nodata(r),
    }
}

/// `<a-b-c-d>.<ns>.pod.<zone>`, answered for any well-formed address ("pods insecure").
fn pod_answer(r: &Records, qname: &Name, qtype: RecordType, rest: &[&str]) -> Answer {
    match rest {
        [ns] if r.namespaces.contains(*ns) => nodata(r),
        [ip, ns] if r.namespaces.contains(*ns) => match undashed(ip) {
            Some(ip) => addresses(r, qname, qtype, [ip]),
            None => nxdomain(r),
        },
        _ => nxdomain(r),
    }
}

/// `10-42-0-5` ▶ 10.42.0.5, `fd00--5` ▶ fd00::5.
fn undashed(label: &str) -> Option<IpAddr> {
    let text = if label.matches('-').count() == 3 && !label.contains("--") {
        label.replace('-', ".")
    } else {
        label.replace('-', ":")
    };
    text.parse().ok()
}

/// One (host, address, port) that a Service name stands for.
struct Target {
    host: String,
    ip: IpAddr,
    port: Option<u16>,
}

fn service_answer(r: &Records, qname: &Name, qtype: RecordType, rest: &[&str], depth: usize) -> Answer {
    let (endpoint, port, name, ns) = match rest {
        [ns] => return if r.namespaces.contains(*ns) { nodata(r) } else { nxdomain(r) },
        [name, ns] => (None, None, *name, *ns),
        [ep, name, ns] => (Some(*ep), None, *name, *ns),
        [port, proto, name, ns] => {
            (None, Some((port.strip_prefix('_').unwrap_or(port), proto.strip_prefix('_').unwrap_or(proto))), *name, *ns)
        }
        _ => return nxdomain(r),
    };
    let Some(svc) = r.services.get(&(ns.to_string(), name.to_string())) else {
        return nxdomain(r);
    };
    let fqdn_svc = format!("{name}.{ns}.svc.{}", r.zone);
    if let ServiceKind::ExternalName(target) = &svc.kind {
        if endpoint.is_some() || port.is_some() {
            return nxdomain(r);
        }
        return external_name(r, qname, qtype, target, depth);
    }
    let targets = targets(svc, &fqdn_svc, endpoint, port);
    let Some(targets) = targets else { return nxdomain(r) };
    match qtype {
        RecordType::A | RecordType::AAAA => addresses(r, qname, qtype, targets.iter().map(|t| t.ip)),
        RecordType::SRV => srv(r, qname, &targets),
        _ => nodata(r),
    }
}

/// The targets of a ClusterIP or headless Service under the endpoint and port filters, or `None`
/// when the name does not exist.
fn targets(
    svc: &ServiceRecord,
    fqdn_svc: &str,
    endpoint: Option<&str>,
    port: Option<(&str, &str)>,
) -> Option<Vec<Target>> {
    let port_matches =
        |p: &crate::records::PortRecord| port.is_none_or(|(name, proto)| p.name == name && p.protocol == proto);
    let mut out = Vec::new();
    match (&svc.kind, endpoint) {
        (ServiceKind::ClusterIp(ips), None) => {
            let ports: Vec<u16> = svc.ports.iter().filter(|p| port_matches(p)).map(|p| p.port).collect();
            if port.is_some() && ports.is_empty() {
                return None;
            }
            for ip in ips {
                if ports.is_empty() {
                    out.push(Target { host: fqdn_svc.to_string(), ip: *ip, port: None });
                }
                for p in &ports {
                    out.push(Target { host: fqdn_svc.to_string(), ip: *ip, port: Some(*p) });
                }
            }
            Some(out)
        }
        _ => {
            let selected = svc.endpoints.iter().filter(|e: &&EndpointRecord| endpoint.is_none_or(|h| e.hostname == h));
            for e in selected {
                let host = format!("{}.{fqdn_svc}", e.hostname);
                let ports: Vec<u16> = e.ports.iter().filter(|p| port_matches(p)).map(|p| p.port).collect();
                if ports.is_empty() {
                    if port.is_none() {
                        out.push(Target { host, ip: e.address, port: None });
                    }
                    continue;
                }
                for p in ports {
                    out.push(Target { host: host.clone(), ip: e.address, port: Some(p) });
                }
            }
            (!out.is_empty()).then_some(out)
        }
    }
}

fn external_name(r: &Records, qname: &Name, qtype: RecordType, target: &str, depth: usize) -> Answer {
    if qtype == RecordType::SRV {
        return nodata(r);
    }
    let Some(target_name) = fqdn(target) else { return nodata(r) };
    let mut answer =
        Answer::with_answers(vec![Record::from_rdata(qname.clone(), TTL, RData::CNAME(CNAME(target_name.clone())))]);
    if qtype == RecordType::CNAME {
        return answer;
    }
    let labels = lower_labels(&target_name);
    match in_zone(r, &labels) {
        Some(base) if depth < MAX_CNAME_DEPTH => {
            let inner = zone_answer(r, &target_name, qtype, base, depth + 1);
            answer.answers.extend(inner.answers);
            answer.additionals.extend(inner.additionals);
            answer.authority = inner.authority;
            answer.code = inner.code;
            answer.chase = inner.chase;
        }
        Some(_) => answer.code = ResponseCode::ServFail,
        None => answer.chase = Some(target_name),
    }
    answer
}

/// A or AAAA records at `qname` for the addresses of the asked family, NODATA when none.
fn addresses(r: &Records, qname: &Name, qtype: RecordType, ips: impl IntoIterator<Item = IpAddr>) -> Answer {
    let mut seen = Vec::new();
    for ip in ips {
        let family_matches = match qtype {
            RecordType::A => ip.is_ipv4(),
            RecordType::AAAA => ip.is_ipv6(),
            _ => false,
        };
        if family_matches && !seen.contains(&ip) {
            seen.push(ip);
        }
    }
    if seen.is_empty() {
        return nodata(r);
    }
    Answer::with_answers(seen.into_iter().map(|ip| address_record(qname.clone(), ip)).collect())
}

fn srv(r: &Records, qname: &Name, targets: &[Target]) -> Answer {
    let mut pairs: Vec<(&str, u16)> = Vec::new();
    for t in targets {
        if let Some(p) = t.port {
            if !pairs.contains(&(t.host.as_str(), p)) {
                pairs.push((t.host.as_str(), p));
            }
        }
    }
    if pairs.is_empty() {
        return nodata(r);
    }
    let weight = u16::try_from((100 / pairs.len()).max(1)).unwrap_or(1);
    let mut answer = Answer::default();
    for (host, port) in &pairs {
        if let Some(target) = fqdn(host) {
            answer.answers.push(Record::from_rdata(qname.clone(), TTL, RData::SRV(SRV::new(0, weight, *port, target))));
        }
    }
    let mut extra: Vec<(&str, IpAddr)> = Vec::new();
    for t in targets.iter().filter(|t| t.port.is_some()) {
        if !extra.contains(&(t.host.as_str(), t.ip)) {
            extra.push((t.host.as_str(), t.ip));
        }
    }
    answer.additionals = extra.into_iter().filter_map(|(h, ip)| Some(address_record(fqdn(h)?, ip))).collect();
    answer
}

/// PTR for a ClusterIP (its Service) or a ready endpoint address (its hostname under every
/// Service it backs); `None` for addresses the cluster does not know.
fn reverse_answer(r: &Records, qname: &Name) -> Option<Answer> {
    let net = qname.to_lowercase().parse_arpa_name().ok()?;
    if net.prefix_len() != net.max_prefix_len() {
        return None;
    }
    let ip = net.addr();
    let names: Vec<&String> = match r.reverse_services.get(&ip) {
        Some(svc) => vec![svc],
        None => r.reverse_endpoints.get(&ip)?.iter().collect(),
    };
    let answers = names
        .into_iter()
        .filter_map(|n| Some(Record::from_rdata(qname.clone(), TTL, RData::PTR(PTR(fqdn(n)?)))))
        .collect();
    Some(Answer::with_answers(answers))
}

fn address_record(name: Name, ip: IpAddr) -> Record {
    let data = match ip {
        IpAddr::V4(v4) => RData::A(A(v4)),
        IpAddr::V6(v6) => RData::AAAA(AAAA(v6)),
    };
    Record::from_rdata(name, TTL, data)
}

/// `name.` as an absolute DNS name; `None` for text that is not one.
fn fqdn(name: &str) -> Option<Name> {
    Name::from_ascii(format!("{}.", name.trim_end_matches('.'))).ok()
}

/// The zone's SOA, as CoreDNS builds it: TTL and MINIMUM are the record TTL.
fn soa(r: &Records) -> Record {
    let zone = fqdn(&r.zone).unwrap_or_else(Name::root);
    let mname = fqdn(&format!("ns.dns.{}", r.zone)).unwrap_or_else(Name::root);
    let rname = fqdn(&format!("hostmaster.{}", r.zone)).unwrap_or_else(Name::root);
    Record::from_rdata(zone, TTL, RData::SOA(SOA::new(mname, rname, r.serial, 7200, 1800, 86400, TTL)))
}

fn nxdomain(r: &Records) -> Answer {
    Answer { code: ResponseCode::NXDomain, authority: vec![soa(r)], ..Answer::default() }
}

fn nodata(r: &Records) -> Answer {
    Answer { code: ResponseCode::NoError, authority: vec![soa(r)], ..Answer::default() }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::records::fixtures::*;

    pub fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    pub fn name(s: &str) -> Name {
        Name::from_ascii(s).expect("name")
    }

    /// default/web (ClusterIP 10.43.0.20, ports http/80 and unnamed 8443, one ready endpoint),
    /// default/db (headless: db-0 at .5, an unnamed endpoint at .6, a not-ready one at .7),
    /// default/empty (headless, no endpoints), default/ext (ExternalName example.com),
    /// default/alias (ExternalName to web's cluster name).
    pub fn sample() -> Records {
        let services = [
            service("default", "web", "10.43.0.20", &[("http", "TCP", 80), ("", "TCP", 8443)]),
            service("default", "db", "None", &[("pg", "TCP", 5432)]),
            service("default", "empty", "None", &[("x", "TCP", 1)]),
            external("default", "ext", "example.com"),
            external("default", "alias", "web.default.svc.cluster.local."),
        ];
        let slices = [
            slice("default", "web", &[("10.42.0.9", None, Some(true))], &[("http", "TCP", 8080)]),
            slice(
                "default",
                "db",
                &[("10.42.0.5", Some("db-0"), Some(true)), ("10.42.0.6", None, None), ("10.42.0.7", None, Some(false))],
                &[("pg", "TCP", 5432)],
            ),
        ];
        let namespaces = [namespace("default"), namespace("kube-system")];
        Records::build("cluster.local", ip("10.43.0.10"), 42, &services, &slices, &namespaces)
    }

    fn ask(r: &Records, qname: &str, qtype: RecordType) -> Answer {
        match resolve(r, &Query::new(name(qname), qtype)) {
            Response::Answer(a) => a,
            Response::Forward => panic!("{qname} {qtype} was forwarded"),
        }
    }

    fn rdata(records: &[Record]) -> Vec<String> {
        records.iter().map(|r| format!("{} {} {}", r.name, r.record_type(), r.data)).collect()
    }

    fn assert_negative(a: &Answer, code: ResponseCode) {
        assert_eq!(a.code, code);
        assert!(a.answers.is_empty(), "no answers expected: {:?}", rdata(&a.answers));
        assert_eq!(a.authority.len(), 1);
        let soa = &a.authority[0];
        assert_eq!(soa.name, name("cluster.local."));
        assert_eq!(soa.ttl, TTL);
        let RData::SOA(data) = &soa.data else { panic!("not an SOA: {soa}") };
        assert_eq!(data.mname, name("ns.dns.cluster.local."));
        assert_eq!(data.rname, name("hostmaster.cluster.local."));
        assert_eq!(data.serial, 42);
        assert_eq!(data.minimum, TTL);
    }

    #[test]
    fn cluster_ip_service_answers_a_with_its_cluster_ip() {
        let a = ask(&sample(), "web.default.svc.cluster.local.", RecordType::A);
        assert_eq!(a.code, ResponseCode::NoError);
        assert_eq!(rdata(&a.answers), vec!["web.default.svc.cluster.local. A 10.43.0.20"]);
        assert_eq!(a.answers[0].ttl, TTL);
    }

    #[test]
    fn aaaa_of_an_ipv4_service_is_nodata_with_the_soa() {
        assert_negative(&ask(&sample(), "web.default.svc.cluster.local.", RecordType::AAAA), ResponseCode::NoError);
    }

    #[test]
    fn ipv6_cluster_ip_answers_aaaa() {
        let svc = service("default", "v6", "fd00:43::20", &[("http", "TCP", 80)]);
        let r = Records::build("cluster.local", ip("10.43.0.10"), 42, [&svc], [], [&namespace("default")]);
        let a = ask(&r, "v6.default.svc.cluster.local.", RecordType::AAAA);
        assert_eq!(rdata(&a.answers), vec!["v6.default.svc.cluster.local. AAAA fd00:43::20"]);
        assert_negative(&ask(&r, "v6.default.svc.cluster.local.", RecordType::A), ResponseCode::NoError);
    }

    #[test]
    fn unknown_service_is_nxdomain_with_the_soa() {
        assert_negative(&ask(&sample(), "nope.default.svc.cluster.local.", RecordType::A), ResponseCode::NXDomain);
        assert_negative(&ask(&sample(), "web.elsewhere.svc.cluster.local.", RecordType::A), ResponseCode::NXDomain);
    }

    #[test]
    fn other_types_at_a_service_name_are_nodata() {
        for t in [RecordType::TXT, RecordType::MX, RecordType::PTR, RecordType::CNAME] {
            assert_negative(&ask(&sample(), "web.default.svc.cluster.local.", t), ResponseCode::NoError);
        }
    }

    #[test]
    fn empty_non_terminals_are_nodata_and_unknown_namespaces_nxdomain() {
        let r = sample();
        for n in
            ["svc.cluster.local.", "pod.cluster.local.", "default.svc.cluster.local.", "kube-system.pod.cluster.local."]
        {
            assert_negative(&ask(&r, n, RecordType::A), ResponseCode::NoError);
        }
        assert_negative(&ask(&r, "nope.svc.cluster.local.", RecordType::A), ResponseCode::NXDomain);
        assert_negative(&ask(&r, "foo.cluster.local.", RecordType::A), ResponseCode::NXDomain);
    }

    #[test]
    fn apex_answers_soa_and_ns_with_this_servers_address() {
        let r = sample();
        let soa = ask(&r, "cluster.local.", RecordType::SOA);
        assert_eq!(soa.answers.len(), 1);
        assert_eq!(soa.answers[0].record_type(), RecordType::SOA);
        let ns = ask(&r, "cluster.local.", RecordType::NS);
        assert_eq!(rdata(&ns.answers), vec!["cluster.local. NS ns.dns.cluster.local."]);
        assert_eq!(rdata(&ns.additionals), vec!["ns.dns.cluster.local. A 10.43.0.10"]);
        let a = ask(&r, "ns.dns.cluster.local.", RecordType::A);
        assert_eq!(rdata(&a.answers), vec!["ns.dns.cluster.local. A 10.43.0.10"]);
    }

    #[test]
    fn dns_version_is_a_txt_record() {
        let a = ask(&sample(), "dns-version.cluster.local.", RecordType::TXT);
        assert_eq!(rdata(&a.answers), vec!["dns-version.cluster.local. TXT 1.1.0"]);
        assert_eq!(a.answers[0].ttl, VERSION_TTL);
    }

    #[test]
    fn headless_service_answers_with_its_ready_endpoints() {
        let a = ask(&sample(), "db.default.svc.cluster.local.", RecordType::A);
        assert_eq!(
            rdata(&a.answers),
            vec!["db.default.svc.cluster.local. A 10.42.0.5", "db.default.svc.cluster.local. A 10.42.0.6"]
        );
    }

    #[test]
    fn headless_service_without_ready_endpoints_is_nxdomain() {
        assert_negative(&ask(&sample(), "empty.default.svc.cluster.local.", RecordType::A), ResponseCode::NXDomain);
    }

    #[test]
    fn endpoint_hostnames_answer_with_their_address() {
        let r = sample();
        let a = ask(&r, "db-0.db.default.svc.cluster.local.", RecordType::A);
        assert_eq!(rdata(&a.answers), vec!["db-0.db.default.svc.cluster.local. A 10.42.0.5"]);
        let a = ask(&r, "10-42-0-6.db.default.svc.cluster.local.", RecordType::A);
        assert_eq!(rdata(&a.answers), vec!["10-42-0-6.db.default.svc.cluster.local. A 10.42.0.6"]);
        // Endpoints of a ClusterIP Service have names too (as with CoreDNS).
        let a = ask(&r, "10-42-0-9.web.default.svc.cluster.local.", RecordType::A);
        assert_eq!(rdata(&a.answers), vec!["10-42-0-9.web.default.svc.cluster.local. A 10.42.0.9"]);
        assert_negative(&ask(&r, "10-42-0-7.db.default.svc.cluster.local.", RecordType::A), ResponseCode::NXDomain);
        assert_negative(&ask(&r, "db-1.db.default.svc.cluster.local.", RecordType::A), ResponseCode::NXDomain);
    }

    #[test]
    fn srv_for_a_named_port_targets_the_service_with_its_address_as_additional() {
        let a = ask(&sample(), "_http._tcp.web.default.svc.cluster.local.", RecordType::SRV);
        assert_eq!(
            rdata(&a.answers),
            vec!["_http._tcp.web.default.svc.cluster.local. SRV 0 100 80 web.default.svc.cluster.local."]
        );
        assert_eq!(rdata(&a.additionals), vec!["web.default.svc.cluster.local. A 10.43.0.20"]);
    }

    #[test]
    fn srv_of_a_headless_service_targets_each_ready_endpoint() {
        let a = ask(&sample(), "_pg._tcp.db.default.svc.cluster.local.", RecordType::SRV);
        assert_eq!(
            rdata(&a.answers),
            vec![
                "_pg._tcp.db.default.svc.cluster.local. SRV 0 50 5432 db-0.db.default.svc.cluster.local.",
                "_pg._tcp.db.default.svc.cluster.local. SRV 0 50 5432 10-42-0-6.db.default.svc.cluster.local.",
            ]
        );
        assert_eq!(
            rdata(&a.additionals),
            vec![
                "db-0.db.default.svc.cluster.local. A 10.42.0.5",
                "10-42-0-6.db.default.svc.cluster.local. A 10.42.0.6"
            ]
        );
    }

    #[test]
    fn srv_of_the_bare_service_name_lists_every_port() {
        let a = ask(&sample(), "web.default.svc.cluster.local.", RecordType::SRV);
        assert_eq!(
            rdata(&a.answers),
            vec![
                "web.default.svc.cluster.local. SRV 0 50 80 web.default.svc.cluster.local.",
                "web.default.svc.cluster.local. SRV 0 50 8443 web.default.svc.cluster.local.",
            ]
        );
    }

    #[test]
    fn srv_for_an_unknown_port_or_protocol_is_nxdomain() {
        let r = sample();
        assert_negative(
            &ask(&r, "_https._tcp.web.default.svc.cluster.local.", RecordType::SRV),
            ResponseCode::NXDomain,
        );
        assert_negative(&ask(&r, "_http._udp.web.default.svc.cluster.local.", RecordType::SRV), ResponseCode::NXDomain);
    }

    #[test]
    fn ptr_of_a_cluster_ip_names_the_service() {
        let a = ask(&sample(), "20.0.43.10.in-addr.arpa.", RecordType::PTR);
        assert_eq!(rdata(&a.answers), vec!["20.0.43.10.in-addr.arpa. PTR web.default.svc.cluster.local."]);
    }

    #[test]
    fn ptr_of_an_endpoint_names_its_hostname_under_its_service() {
        let r = sample();
        let a = ask(&r, "5.0.42.10.in-addr.arpa.", RecordType::PTR);
        assert_eq!(rdata(&a.answers), vec!["5.0.42.10.in-addr.arpa. PTR db-0.db.default.svc.cluster.local."]);
        let a = ask(&r, "9.0.42.10.IN-ADDR.ARPA.", RecordType::PTR);
        assert_eq!(rdata(&a.answers), vec!["9.0.42.10.IN-ADDR.ARPA. PTR 10-42-0-9.web.default.svc.cluster.local."]);
    }

    #[test]
    fn ptr_of_an_unknown_address_is_forwarded() {
        let q = Query::new(name("7.0.42.10.in-addr.arpa."), RecordType::PTR);
        assert_eq!(resolve(&sample(), &q), Response::Forward);
        let q = Query::new(name("0.42.10.in-addr.arpa."), RecordType::PTR);
        assert_eq!(resolve(&sample(), &q), Response::Forward);
    }

    #[test]
    fn pod_names_answer_with_the_address_they_spell() {
        let r = sample();
        let a = ask(&r, "10-42-0-77.default.pod.cluster.local.", RecordType::A);
        assert_eq!(rdata(&a.answers), vec!["10-42-0-77.default.pod.cluster.local. A 10.42.0.77"]);
        let a = ask(&r, "fd00--7.default.pod.cluster.local.", RecordType::AAAA);
        assert_eq!(rdata(&a.answers), vec!["fd00--7.default.pod.cluster.local. AAAA fd00::7"]);
        assert_negative(&ask(&r, "10-42-0-77.default.pod.cluster.local.", RecordType::AAAA), ResponseCode::NoError);
        assert_negative(&ask(&r, "not-an-ip.default.pod.cluster.local.", RecordType::A), ResponseCode::NXDomain);
        assert_negative(&ask(&r, "10-42-0-77.nope.pod.cluster.local.", RecordType::A), ResponseCode::NXDomain);
    }

    #[test]
    fn external_name_is_a_cname_whose_outside_target_is_chased_upstream() {
        let a = ask(&sample(), "ext.default.svc.cluster.local.", RecordType::A);
        assert_eq!(a.code, ResponseCode::NoError);
        assert_eq!(rdata(&a.answers), vec!["ext.default.svc.cluster.local. CNAME example.com."]);
        assert_eq!(a.chase, Some(name("example.com.")));
        let c = ask(&sample(), "ext.default.svc.cluster.local.", RecordType::CNAME);
        assert_eq!(c.chase, None);
        assert_negative(&ask(&sample(), "ext.default.svc.cluster.local.", RecordType::SRV), ResponseCode::NoError);
    }

    #[test]
    fn external_name_inside_the_cluster_is_followed_here() {
        let a = ask(&sample(), "alias.default.svc.cluster.local.", RecordType::A);
        assert_eq!(
            rdata(&a.answers),
            vec![
                "alias.default.svc.cluster.local. CNAME web.default.svc.cluster.local.",
                "web.default.svc.cluster.local. A 10.43.0.20",
            ]
        );
        assert_eq!(a.chase, None);
    }

    #[test]
    fn external_name_loops_end_in_servfail() {
        let svcs = [
            external("default", "a", "b.default.svc.cluster.local"),
            external("default", "b", "a.default.svc.cluster.local"),
        ];
        let r = Records::build("cluster.local", ip("10.43.0.10"), 1, &svcs, [], [&namespace("default")]);
        assert_eq!(ask(&r, "a.default.svc.cluster.local.", RecordType::A).code, ResponseCode::ServFail);
    }

    #[test]
    fn names_outside_the_cluster_domain_are_forwarded() {
        for n in ["example.com.", "local.", "cluster.local.example.com.", "svc.cluster.locals."] {
            assert_eq!(resolve(&sample(), &Query::new(name(n), RecordType::A)), Response::Forward, "{n}");
        }
    }

    #[test]
    fn questions_are_matched_case_insensitively_and_echo_the_asked_case() {
        let a = ask(&sample(), "Web.DEFAULT.svc.Cluster.Local.", RecordType::A);
        assert_eq!(rdata(&a.answers), vec!["Web.DEFAULT.svc.Cluster.Local. A 10.43.0.20"]);
    }

    #[test]
    fn search_path_expansions_are_answered_nxdomain_at_once() {
        let r = sample();
        for n in [
            "web.default.svc.cluster.local.default.svc.cluster.local.",
            "web.default.svc.cluster.local.svc.cluster.local.",
            "web.default.svc.cluster.local.cluster.local.",
            "example.com.default.svc.cluster.local.",
            "example.com.svc.cluster.local.",
            "example.com.cluster.local.",
        ] {
            assert_negative(&ask(&r, n, RecordType::A), ResponseCode::NXDomain);
        }
    }

    #[test]
    fn cluster_names_are_servfail_until_the_first_listing() {
        let r = Records::unsynced("cluster.local", ip("10.43.0.10"));
        assert_eq!(ask(&r, "web.default.svc.cluster.local.", RecordType::A).code, ResponseCode::ServFail);
        let q = Query::new(name("example.com."), RecordType::A);
        assert_eq!(resolve(&r, &q), Response::Forward);
    }

    #[test]
    fn a_custom_cluster_domain_is_served_instead_of_cluster_local() {
        let svc = service("default", "web", "10.43.0.20", &[]);
        let r = Records::build("k1s.example", ip("10.43.0.10"), 1, [&svc], [], [&namespace("default")]);
        let a = ask(&r, "web.default.svc.k1s.example.", RecordType::A);
        assert_eq!(rdata(&a.answers), vec!["web.default.svc.k1s.example. A 10.43.0.20"]);
        let q = Query::new(name("web.default.svc.cluster.local."), RecordType::A);
        assert_eq!(resolve(&r, &q), Response::Forward);
    }
}
