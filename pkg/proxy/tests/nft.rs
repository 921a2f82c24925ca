//! Real Service traffic through the rendered nftables rules (root only).
//!
//! Nothing touches the host's own network: the test creates a "node" network namespace with its
//! own bridge (10.244.0.1/16), two "pod" namespaces on it (server 10.244.0.2, client 10.244.0.3),
//! and an "outside" namespace (192.168.250.1) on a veth to the node's address 192.168.250.2. The
//! scenario then runs as a child process inside the node namespace, so the proxy's real nft
//! applier, netlink rules and sysctls act on that namespace only; connections are made from the
//! pod and outside namespaces by helper child processes. Everything is removed at the end.
//!
//! Without root the test is skipped, or fails with `K1S_TEST_REQUIRE_CONTAINERD=1`.

use k1s_proxy::render::{render, ClusterState, NodeInfo};
use k1s_proxy::route::{NetlinkRoutes, Routes, RULE_PRIORITY_BLACKHOLE, RULE_PRIORITY_HOST};
use k1s_proxy::sysctl::{apply_required, ProcSysctl};
use k1s_proxy::{Applied, Applier, NftCommand};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, Namespace, Pod, PodIP, PodSpec, PodStatus, Service, ServicePort, ServiceSpec,
};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicySpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SCENARIO_ENV: &str = "K1S_PROXY_TEST_SCENARIO";
const HELPER_ENV: &str = "K1S_PROXY_TEST_HELPER";

const SERVER_IP: &str = "10.244.0.2";
const CLIENT_IP: &str = "10.244.0.3";
const NODE_IP: &str = "192.168.250.2";
const OUTSIDE_IP: &str = "192.168.250.1";
const WEB_VIP: &str = "10.96.0.10";
const EMPTY_VIP: &str = "10.96.0.11";
const NODE_PORT: u16 = 30080;

fn is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0").unwrap_or(false)
}

fn sh(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().expect("spawn");
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// The namespaces of one run; dropping it deletes them (and with them the bridge and veths).
struct Topology {
    node: String,
    server: String,
    client: String,
    outside: String,
}

impl Topology {
    fn create() -> Self {
        let id = std::process::id();
        let t = Topology {
            node: format!("k1s-pt-node-{id}"),
            server: format!("k1s-pt-a-{id}"),
            client: format!("k1s-pt-b-{id}"),
            outside: format!("k1s-pt-ext-{id}"),
        };
        for ns in [&t.node, &t.server, &t.client, &t.outside] {
            sh(&["ip", "netns", "add", ns]);
            sh(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        }
        let n = t.node.as_str();
        sh(&["ip", "-n", n, "link", "add", "k1stbr0", "type", "bridge"]);
        sh(&["ip", "-n", n, "addr", "add", "10.244.0.1/16", "dev", "k1stbr0"]);
        sh(&["ip", "-n", n, "link", "set", "k1stbr0", "up"]);
        for (veth, ns, ip) in [("vA", &t.server, SERVER_IP), ("vB", &t.client, CLIENT_IP)] {
            sh(&["ip", "-n", n, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns]);
            sh(&["ip", "-n", n, "link", "set", veth, "master", "k1stbr0", "up"]);
            sh(&["ip", "-n", n, "link", "set", veth, "type", "bridge_slave", "hairpin", "on"]);
            sh(&["ip", "-n", ns, "addr", "add", &format!("{ip}/16"), "dev", "eth0"]);
            sh(&["ip", "-n", ns, "link", "set", "eth0", "up"]);
            sh(&["ip", "-n", ns, "route", "add", "default", "via", "10.244.0.1"]);
        }
        sh(&["ip", "-n", n, "link", "add", "vE", "type", "veth", "peer", "name", "eth0", "netns", &t.outside]);
        sh(&["ip", "-n", n, "addr", "add", &format!("{NODE_IP}/24"), "dev", "vE"]);
        sh(&["ip", "-n", n, "link", "set", "vE", "up"]);
        sh(&["ip", "-n", n, "route", "add", "default", "via", OUTSIDE_IP]);
        sh(&["ip", "-n", &t.outside, "addr", "add", &format!("{OUTSIDE_IP}/24"), "dev", "eth0"]);
        sh(&["ip", "-n", &t.outside, "link", "set", "eth0", "up"]);
        sh(&["ip", "-n", &t.outside, "route", "add", "default", "via", NODE_IP]);
        sh(&["ip", "netns", "exec", n, "sysctl", "-qw", "net.ipv4.ip_forward=1"]);
        t
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        for ns in [&self.server, &self.client, &self.outside, &self.node] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// This test binary, re-run in `ns` as `test_name` with `env`.
fn self_in_netns(ns: &str, test_name: &str, env: (&str, &str)) -> Command {
    let exe = std::env::current_exe().expect("test binary");
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns])
        .arg(exe)
        .args([test_name, "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env(env.0, env.1);
    c
}

#[test]
fn service_traffic_is_routed_refused_and_policed_by_the_rendered_rules() {
    if !is_root() {
        assert!(
            std::env::var_os("K1S_TEST_REQUIRE_CONTAINERD").is_none(),
            "K1S_TEST_REQUIRE_CONTAINERD is set but this test needs root"
        );
        eprintln!("skipped: needs root (network namespaces and nftables)");
        return;
    }
    let t = Topology::create();
    let spec = format!("{} {} {}", t.server, t.client, t.outside);
    let status = self_in_netns(&t.node, "node_scenario", (SCENARIO_ENV, &spec)).status().expect("run scenario");
    drop(t);
    assert!(status.success(), "the scenario inside the node namespace failed (see its output above)");
}

/// Helper processes: `serve ADDR BODY` answers every connection with BODY, `serve-peer ADDR`
/// with `from <client address>`; `connect ADDR` prints
/// `RESULT: ` and `ok BODY`, `refused`, `unreachable`, `timeout` or `error …`, then the elapsed
/// milliseconds.
#[test]
#[ignore = "a helper process run inside a test namespace"]
fn helper() {
    let Ok(cmd) = std::env::var(HELPER_ENV) else { return };
    let parts: Vec<&str> = cmd.split_whitespace().collect();
    match parts.as_slice() {
        ["serve", addr, body] => {
            let l = TcpListener::bind(addr).expect("bind");
            println!("listening");
            for s in l.incoming().flatten() {
                let mut s = s;
                let _ = std::io::Write::write_all(&mut s, format!("{body}\n").as_bytes());
            }
        }
        ["serve-peer", addr] => {
            let l = TcpListener::bind(addr).expect("bind");
            println!("listening");
            for s in l.incoming().flatten() {
                let mut s = s;
                let peer = s.peer_addr().map(|a| a.ip().to_string()).unwrap_or_default();
                let _ = std::io::Write::write_all(&mut s, format!("from {peer}\n").as_bytes());
            }
        }
        ["connect", addr] => println!("\nRESULT: {}", connect(addr.parse().expect("addr"))),
        _ => panic!("unknown helper command {cmd}"),
    }
}

fn connect(addr: SocketAddr) -> String {
    let t = Instant::now();
    let r = match TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
        Ok(mut s) => {
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let mut body = String::new();
            match s.read_to_string(&mut body) {
                Ok(_) => format!("ok {}", body.trim()),
                Err(e) => format!("error reading: {e}"),
            }
        }
        Err(e) => match e.kind() {
            std::io::ErrorKind::ConnectionRefused => "refused".to_string(),
            std::io::ErrorKind::HostUnreachable | std::io::ErrorKind::NetworkUnreachable => "unreachable".into(),
            std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => "timeout".into(),
            _ => format!("error {e}"),
        },
    };
    format!("{r} {}", t.elapsed().as_millis())
}

/// `connect` from inside `ns`; returns (result, milliseconds).
fn connect_from(ns: &str, addr: &str) -> (String, u128) {
    let out = self_in_netns(ns, "helper", (HELPER_ENV, &format!("connect {addr}"))).output().expect("helper");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().find_map(|l| l.strip_prefix("RESULT: "));
    let line =
        line.unwrap_or_else(|| panic!("helper printed no result: {stdout} {}", String::from_utf8_lossy(&out.stderr)));
    let (result, ms) = line.rsplit_once(' ').expect("result and time");
    (result.to_string(), ms.parse().expect("ms"))
}

fn connect_here(addr: &str) -> (String, u128) {
    let line = connect(addr.parse().expect("addr"));
    let (result, ms) = line.rsplit_once(' ').expect("result and time");
    (result.to_string(), ms.parse().expect("ms"))
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve_in(ns: &str, addr: &str, body: &str) -> Server {
    spawn_helper_server(ns, &format!("serve {addr} {body}"))
}

/// Starts a `serve*` helper in `ns` and waits until it listens.
fn spawn_helper_server(ns: &str, cmd: &str) -> Server {
    let mut child = self_in_netns(ns, "helper", (HELPER_ENV, cmd)).stdout(Stdio::piped()).spawn().expect("server");
    let mut line = String::new();
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    while !line.contains("listening") {
        line.clear();
        assert!(out.read_line(&mut line).expect("read") > 0, "server exited before listening");
    }
    Server(child)
}

fn serve_peer_in(ns: &str, addr: &str) -> Server {
    spawn_helper_server(ns, &format!("serve-peer {addr}"))
}

fn meta(ns: &str, name: &str) -> ObjectMeta {
    ObjectMeta { namespace: Some(ns.into()), name: Some(name.into()), ..Default::default() }
}

fn service(name: &str, ip: &str, node_port: Option<i32>) -> Service {
    Service {
        metadata: meta("default", name),
        spec: Some(ServiceSpec {
            cluster_ip: Some(ip.into()),
            cluster_ips: Some(vec![ip.into()]),
            type_: Some(if node_port.is_some() { "NodePort" } else { "ClusterIP" }.into()),
            ports: Some(vec![ServicePort { name: Some("http".into()), port: 80, node_port, ..Default::default() }]),
            ..Default::default()
        }),
        status: None,
    }
}

fn slice(svc: &str, ips: &[&str]) -> EndpointSlice {
    let mut m = meta("default", &format!("{svc}-x"));
    m.labels = Some([("kubernetes.io/service-name".to_string(), svc.to_string())].into());
    EndpointSlice {
        metadata: m,
        address_type: "IPv4".into(),
        ports: Some(vec![EndpointPort { name: Some("http".into()), port: Some(8080), ..Default::default() }]),
        endpoints: ips
            .iter()
            .map(|ip| Endpoint {
                addresses: vec![ip.to_string()],
                conditions: Some(EndpointConditions { ready: Some(true), serving: Some(true), terminating: None }),
                node_name: Some("node".into()),
                ..Default::default()
            })
            .collect(),
    }
}

fn pod(name: &str, ip: &str, app: &str) -> Pod {
    let mut m = meta("default", name);
    m.labels = Some([("app".to_string(), app.to_string())].into());
    Pod {
        metadata: m,
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

fn policy(name: &str, ingress: Option<Vec<NetworkPolicyIngressRule>>) -> NetworkPolicy {
    NetworkPolicy {
        metadata: meta("default", name),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some([("app".to_string(), "web".to_string())].into()),
                ..Default::default()
            }),
            ingress,
            ..Default::default()
        }),
    }
}

fn nft_list() -> String {
    let out = Command::new("nft").args(["list", "table", "ip", "k1s"]).output().expect("nft");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn ip_rules() -> String {
    String::from_utf8_lossy(&Command::new("ip").args(["-4", "rule"]).output().expect("ip rule").stdout).into_owned()
}

#[test]
#[ignore = "runs inside the node namespace created by the test above"]
fn node_scenario() {
    let Ok(spec) = std::env::var(SCENARIO_ENV) else { return };
    let ns: Vec<&str> = spec.split_whitespace().collect();
    let [server_ns, client_ns, outside_ns] = ns.as_slice() else { panic!("bad scenario spec {spec}") };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");

    // Every golden ruleset must be valid nftables for this kernel (dry run).
    let golden = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/golden");
    let base = std::fs::read_to_string(golden.join("base.nft")).expect("base golden");
    for entry in std::fs::read_dir(&golden).expect("golden dir") {
        let path = entry.expect("entry").path();
        let text = format!("{base}{}", std::fs::read_to_string(&path).expect("golden"));
        let mut c = Command::new("nft")
            .args(["-c", "-f", "-"])
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("nft");
        std::io::Write::write_all(&mut c.stdin.take().expect("stdin"), text.as_bytes()).expect("write");
        let out = c.wait_with_output().expect("nft -c");
        assert!(out.status.success(), "{} rejected by nft: {}", path.display(), String::from_utf8_lossy(&out.stderr));
    }

    assert!(apply_required(&ProcSysctl::default()).is_empty(), "route_localnet and bridge-nf-call-iptables set");
    rt.block_on(NetlinkRoutes.ensure("10.96.0.0/16".parse().expect("cidr"))).expect("routing rules");
    rt.block_on(NetlinkRoutes.ensure("10.96.0.0/16".parse().expect("cidr"))).expect("routing rules are idempotent");
    let rules = ip_rules();
    assert!(rules.contains(&format!("{RULE_PRIORITY_HOST}:\tfrom all to 10.96.0.0/16 iif lo lookup main")), "{rules}");
    assert!(rules.contains(&format!("{RULE_PRIORITY_BLACKHOLE}:\tfrom all to 10.96.0.0/16 blackhole")), "{rules}");

    let _server = serve_in(server_ns, "0.0.0.0:8080", "server-a");
    let node = NodeInfo {
        name: "node".into(),
        ips: vec![NODE_IP.parse().expect("ip")],
        cluster_cidr: "10.244.0.0/16".parse().expect("cidr"),
        service_cidr: "10.96.0.0/16".parse().expect("cidr"),
    };
    let mut state = ClusterState {
        services: vec![
            Arc::new(service("web", WEB_VIP, Some(i32::from(NODE_PORT)))),
            Arc::new(service("empty", EMPTY_VIP, None)),
        ],
        endpoint_slices: vec![Arc::new(slice("web", &[SERVER_IP])), Arc::new(slice("empty", &[]))],
        pods: vec![Arc::new(pod("server", SERVER_IP, "web")), Arc::new(pod("client", CLIENT_IP, "client"))],
        namespaces: vec![Arc::new(Namespace { metadata: meta("", "default"), ..Default::default() })],
        network_policies: vec![],
    };
    let mut applier = Applier::new(NftCommand::default());
    assert_eq!(applier.apply(&render(&state, &node)).expect("apply"), Applied::Full);

    let web = format!("{WEB_VIP}:80");
    let check = |what: &str, got: (String, u128), want: &str| {
        println!("{what}: {} in {} ms", got.0, got.1);
        assert_eq!(got.0, want, "{what}");
    };
    check("pod -> ClusterIP", connect_from(client_ns, &web), "ok server-a");
    check("pod -> its own Service (hairpin)", connect_from(server_ns, &web), "ok server-a");
    check("node -> ClusterIP", connect_here(&web), "ok server-a");
    check("node -> NodePort on 127.0.0.1", connect_here(&format!("127.0.0.1:{NODE_PORT}")), "ok server-a");
    check("node -> NodePort on its address", connect_here(&format!("{NODE_IP}:{NODE_PORT}")), "ok server-a");
    check(
        "pod -> NodePort on the node address",
        connect_from(client_ns, &format!("{NODE_IP}:{NODE_PORT}")),
        "ok server-a",
    );
    check("outside -> NodePort", connect_from(outside_ns, &format!("{NODE_IP}:{NODE_PORT}")), "ok server-a");
    {
        // Pod traffic leaving the pod network is masqueraded to the node's address.
        let outside_addr = format!("{OUTSIDE_IP}:9090");
        let _peer = serve_peer_in(outside_ns, &outside_addr);
        check("pod -> outside (masqueraded)", connect_from(client_ns, &outside_addr), &format!("ok from {NODE_IP}"));
    }
    let refused = connect_from(client_ns, &format!("{EMPTY_VIP}:80"));
    check("pod -> Service without endpoints", refused.clone(), "refused");
    assert!(refused.1 < 1000, "refused at once, not after a timeout: {} ms", refused.1);
    check("node -> Service without endpoints", connect_here(&format!("{EMPTY_VIP}:80")), "refused");
    check("pod -> unserved port of a ClusterIP", connect_from(client_ns, &format!("{WEB_VIP}:81")), "refused");

    // Deny all ingress to the server pod: the client is turned away at once; the node (probes)
    // still gets through.
    state.network_policies = vec![Arc::new(policy("deny", None))];
    assert!(matches!(applier.apply(&render(&state, &node)).expect("apply"), Applied::Incremental(_)));
    let denied = connect_from(client_ns, &web);
    check("pod -> ClusterIP under deny-all", denied.clone(), "unreachable");
    assert!(denied.1 < 1000, "rejected at once: {} ms", denied.1);
    check("node -> ClusterIP under deny-all", connect_here(&web), "ok server-a");
    // Allow the client by label on the named port: restored.
    let allow = NetworkPolicyIngressRule {
        from: Some(vec![NetworkPolicyPeer {
            pod_selector: Some(LabelSelector {
                match_labels: Some([("app".to_string(), "client".to_string())].into()),
                ..Default::default()
            }),
            ..Default::default()
        }]),
        ports: Some(vec![k8s_openapi::api::networking::v1::NetworkPolicyPort {
            port: Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String("http".into())),
            protocol: Some("TCP".into()),
            end_port: None,
        }]),
    };
    state.network_policies.push(Arc::new(policy("allow-client", Some(vec![allow]))));
    applier.apply(&render(&state, &node)).expect("apply");
    check("pod -> ClusterIP with an allow policy", connect_from(client_ns, &web), "ok server-a");
    state.network_policies.clear();
    applier.apply(&render(&state, &node)).expect("apply");

    // Scaling to zero refuses at once; deleting the Service removes its rules.
    state.endpoint_slices = vec![Arc::new(slice("web", &[])), Arc::new(slice("empty", &[]))];
    applier.apply(&render(&state, &node)).expect("apply");
    check("pod -> ClusterIP scaled to zero", connect_from(client_ns, &web), "refused");
    check("outside -> NodePort scaled to zero", connect_from(outside_ns, &format!("{NODE_IP}:{NODE_PORT}")), "refused");
    state.endpoint_slices = vec![Arc::new(slice("web", &[SERVER_IP]))];
    state.services.retain(|s| s.metadata.name.as_deref() == Some("web"));
    applier.apply(&render(&state, &node)).expect("apply");
    check("pod -> ClusterIP scaled back up", connect_from(client_ns, &web), "ok server-a");
    state.services.clear();
    state.endpoint_slices.clear();
    assert!(matches!(applier.apply(&render(&state, &node)).expect("apply"), Applied::Incremental(_)));
    let listed = nft_list();
    assert!(!listed.contains("service-default/web"), "deleted Service leaves no chain: {listed}");
    assert!(!listed.contains(WEB_VIP), "deleted Service leaves no element: {listed}");

    // Uninstall removes exactly the table and the rules.
    applier.delete_table().expect("delete table");
    rt.block_on(NetlinkRoutes.remove()).expect("remove rules");
    let tables = String::from_utf8_lossy(&Command::new("nft").args(["list", "tables"]).output().expect("nft").stdout)
        .into_owned();
    assert!(!tables.contains("k1s"), "{tables}");
    let rules = ip_rules();
    assert!(!rules.contains(&RULE_PRIORITY_HOST.to_string()) && !rules.contains(&RULE_PRIORITY_BLACKHOLE.to_string()));
    assert!(rules.contains("lookup main"), "other rules untouched: {rules}");
}
