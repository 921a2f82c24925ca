//! Cluster DNS against a real `k1s server --disable-agent`: Services and EndpointSlices created
//! through the API are answered over UDP and TCP (A, SRV, PTR, headless, NXDOMAIN), changes show
//! up within milliseconds, and (as root) a pod-like network namespace behind a veth reaches the
//! address on its own interface despite a blackhole route and strict rp_filter, with the search
//! path and `ndots:5` of a pod's resolv.conf.
//!
//! The k1s binary comes from `cargo build -p k1s` (`$K1S_BIN`, else
//! `$CARGO_TARGET_DIR/debug/k1s`, else the workspace's `target/debug/k1s`).

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hickory_proto::op::{Message, Query, ResponseCode};
use hickory_proto::rr::{Name, RData, RecordType};
use k1s_dns::{DnsConfig, DnsServer};
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, PostParams};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

const NS: &str = "dns-test";

/// A `k1s server` control plane in a temp dir, killed on drop.
struct K1s {
    dir: tempfile::TempDir,
    child: Child,
}

impl K1s {
    async fn start() -> K1s {
        let bin = k1s_bin();
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("config.yaml"), "").expect("config");
        let log = std::fs::File::create(dir.path().join("server.log")).expect("log");
        let child = Command::new(&bin)
            .arg("server")
            .arg("--disable-agent")
            .arg("--disable=controllers,scheduler")
            .arg("--https-listen-port=0")
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--config={}", dir.path().join("config.yaml").display()))
            .arg(format!("--data-dir={}", dir.path().join("data").display()))
            .arg(format!("--write-kubeconfig={}", dir.path().join("kubeconfig.yaml").display()))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {}: {e}", bin.display()));
        K1s { dir, child }
    }

    fn logs(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// A client as admin, once the API answers.
    async fn client(&mut self) -> kube::Client {
        let path = self.dir.path().join("kubeconfig.yaml");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(client) = try_client(&path).await {
                if client.apiserver_version().await.is_ok() {
                    return client;
                }
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("k1s exited early ({status}):\n{}", self.logs());
            }
            assert!(Instant::now() < deadline, "k1s did not become ready:\n{}", self.logs());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for K1s {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn k1s_bin() -> PathBuf {
    if let Ok(p) = std::env::var("K1S_BIN") {
        return PathBuf::from(p);
    }
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let bin = target.join("debug/k1s");
    assert!(bin.exists(), "{} is missing: run `cargo build -p k1s` first", bin.display());
    bin
}

async fn try_client(path: &Path) -> Option<kube::Client> {
    let kc = kube::config::Kubeconfig::read_from(path).ok()?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await.ok()?;
    kube::Client::try_from(cfg).ok()
}

fn from_json<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).expect("valid object")
}

/// Namespace `dns-test` with `web` (ClusterIP 10.43.200.20, http/80 backed by 10.42.200.9:8080)
/// and `db` (headless: db-0 at 10.42.200.5 ready, 10.42.200.6 ready without hostname,
/// 10.42.200.7 not ready).
async fn create_objects(client: &kube::Client) {
    let pp = PostParams::default();
    Api::<Namespace>::all(client.clone())
        .create(&pp, &from_json(serde_json::json!({"metadata": {"name": NS}})))
        .await
        .expect("create namespace");
    let services: Api<Service> = Api::namespaced(client.clone(), NS);
    services
        .create(
            &pp,
            &from_json(serde_json::json!({
                "metadata": {"name": "web"},
                "spec": {"clusterIP": "10.43.200.20", "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}
            })),
        )
        .await
        .expect("create web");
    services
        .create(
            &pp,
            &from_json(serde_json::json!({
                "metadata": {"name": "db"},
                "spec": {"clusterIP": "None", "ports": [{"name": "pg", "port": 5432}]}
            })),
        )
        .await
        .expect("create db");
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), NS);
    for (name, svc, endpoints, port) in [
        (
            "web-1",
            "web",
            serde_json::json!([{"addresses": ["10.42.200.9"], "conditions": {"ready": true}}]),
            ("http", 8080),
        ),
        (
            "db-1",
            "db",
            serde_json::json!([
                {"addresses": ["10.42.200.5"], "hostname": "db-0", "conditions": {"ready": true}},
                {"addresses": ["10.42.200.6"], "conditions": {"ready": true}},
                {"addresses": ["10.42.200.7"], "conditions": {"ready": false}}
            ]),
            ("pg", 5432),
        ),
    ] {
        slices
            .create(
                &pp,
                &from_json(serde_json::json!({
                    "metadata": {"name": name, "labels": {
                        "kubernetes.io/service-name": svc,
                        "endpointslice.kubernetes.io/managed-by": "dns-test"
                    }},
                    "addressType": "IPv4",
                    "endpoints": endpoints,
                    "ports": [{"name": port.0, "port": port.1, "protocol": "TCP"}]
                })),
            )
            .await
            .expect("create slice");
    }
}

fn query(name: &str, qtype: RecordType) -> Vec<u8> {
    let mut m = Message::query();
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(Name::from_ascii(name).expect("name"), qtype));
    m.to_vec().expect("encode")
}

async fn ask_udp(server: SocketAddr, name: &str, qtype: RecordType) -> Message {
    let socket = tokio::net::UdpSocket::bind(SocketAddr::new(server.ip(), 0)).await.expect("client socket");
    socket.send_to(&query(name, qtype), server).await.expect("send");
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), socket.recv(&mut buf))
        .await
        .unwrap_or_else(|_| panic!("no answer for {name} {qtype}"))
        .expect("recv");
    Message::from_vec(&buf[..n]).expect("decode")
}

async fn ask_tcp(server: SocketAddr, name: &str, qtype: RecordType) -> Message {
    let mut stream = tokio::net::TcpStream::connect(server).await.expect("connect");
    let q = query(name, qtype);
    stream.write_all(&u16::try_from(q.len()).expect("len").to_be_bytes()).await.expect("write");
    stream.write_all(&q).await.expect("write");
    let len = stream.read_u16().await.expect("reply length");
    let mut raw = vec![0u8; usize::from(len)];
    stream.read_exact(&mut raw).await.expect("reply");
    Message::from_vec(&raw).expect("decode")
}

fn rdata(m: &Message) -> Vec<String> {
    m.answers.iter().map(|r| r.data.to_string()).collect()
}

/// Polls until `name` has an A answer; returns how long that took.
async fn until_resolvable(server: SocketAddr, name: &str) -> Duration {
    let start = Instant::now();
    loop {
        if !ask_udp(server, name, RecordType::A).await.answers.is_empty() {
            return start.elapsed();
        }
        assert!(start.elapsed() < Duration::from_secs(10), "{name} never became resolvable");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// The record assertions shared by both tests.
async fn assert_cluster_records(server: SocketAddr) {
    let fqdn = |s: &str| format!("{s}.{NS}.svc.cluster.local.");

    let a = ask_udp(server, &fqdn("web"), RecordType::A).await;
    assert_eq!(a.metadata.response_code, ResponseCode::NoError);
    assert!(a.metadata.authoritative);
    assert_eq!(rdata(&a), vec!["10.43.200.20"]);
    assert_eq!(a.answers[0].ttl, 5);
    assert_eq!(rdata(&ask_tcp(server, &fqdn("web"), RecordType::A).await), vec!["10.43.200.20"]);

    let srv = ask_udp(server, &format!("_http._tcp.{}", fqdn("web")), RecordType::SRV).await;
    assert_eq!(rdata(&srv), vec![format!("0 100 80 {}", fqdn("web"))]);
    assert_eq!(srv.additionals.iter().map(|r| r.data.to_string()).collect::<Vec<_>>(), vec!["10.43.200.20"]);

    let ptr = ask_udp(server, "20.200.43.10.in-addr.arpa.", RecordType::PTR).await;
    assert_eq!(rdata(&ptr), vec![fqdn("web")]);
    let ptr = ask_udp(server, "5.200.42.10.in-addr.arpa.", RecordType::PTR).await;
    assert_eq!(rdata(&ptr), vec![format!("db-0.{}", fqdn("db"))]);

    let headless = ask_udp(server, &fqdn("db"), RecordType::A).await;
    assert_eq!(rdata(&headless), vec!["10.42.200.5", "10.42.200.6"], "ready endpoints only");
    let pet = ask_udp(server, &format!("db-0.{}", fqdn("db")), RecordType::A).await;
    assert_eq!(rdata(&pet), vec!["10.42.200.5"]);
    let srv = ask_udp(server, &format!("_pg._tcp.{}", fqdn("db")), RecordType::SRV).await;
    assert_eq!(
        rdata(&srv),
        vec![format!("0 50 5432 db-0.{}", fqdn("db")), format!("0 50 5432 10-42-200-6.{}", fqdn("db"))]
    );

    let nx = ask_udp(server, &fqdn("nope"), RecordType::A).await;
    assert_eq!(nx.metadata.response_code, ResponseCode::NXDomain);
    assert!(matches!(nx.authorities.first().map(|r| &r.data), Some(RData::SOA(_))), "NXDOMAIN carries the SOA");
    let nodata = ask_udp(server, &fqdn("web"), RecordType::AAAA).await;
    assert_eq!((nodata.metadata.response_code, nodata.answers.len()), (ResponseCode::NoError, 0));
}

/// Changes in the API reach DNS: a new Service resolves and a deleted one stops resolving.
/// Returns the create ▶ resolvable latency.
async fn assert_updates(client: &kube::Client, server: SocketAddr, name: &str, ip: &str) -> Duration {
    let services: Api<Service> = Api::namespaced(client.clone(), NS);
    let created = Instant::now();
    services
        .create(
            &PostParams::default(),
            &from_json(serde_json::json!({
                "metadata": {"name": name},
                "spec": {"clusterIP": ip, "ports": [{"port": 80}]}
            })),
        )
        .await
        .expect("create service");
    let after_create = created.elapsed();
    let latency = until_resolvable(server, &format!("{name}.{NS}.svc.cluster.local.")).await + after_create;
    services.delete(name, &DeleteParams::default()).await.expect("delete service");
    let start = Instant::now();
    loop {
        let m = ask_udp(server, &format!("{name}.{NS}.svc.cluster.local."), RecordType::A).await;
        if m.metadata.response_code == ResponseCode::NXDomain {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "deleted Service still resolves");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    latency
}

/// p50/p99 of `n` sequential UDP questions.
async fn measure(server: SocketAddr, name: &str, n: usize) -> (Duration, Duration) {
    let socket = tokio::net::UdpSocket::bind(SocketAddr::new(server.ip(), 0)).await.expect("socket");
    socket.connect(server).await.expect("connect");
    let q = query(name, RecordType::A);
    let mut buf = vec![0u8; 1500];
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        socket.send(&q).await.expect("send");
        tokio::time::timeout(Duration::from_secs(5), socket.recv(&mut buf)).await.expect("in time").expect("recv");
        samples.push(start.elapsed());
    }
    samples.sort();
    (samples[n / 2], samples[n * 99 / 100])
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0").unwrap_or(false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_names_are_answered_from_the_api_over_udp_and_tcp() {
    let mut k1s = K1s::start().await;
    let client = k1s.client().await;
    create_objects(&client).await;

    let config = DnsConfig {
        listen: "127.0.0.1".parse().expect("ip"),
        port: 0,
        cluster_domain: "cluster.local".into(),
        upstream: Vec::new(),
        interface: None,
    };
    let server = DnsServer::bind(config).await.expect("bind");
    let addr = server.local_addr();
    let cancel = CancellationToken::new();
    let serving = tokio::spawn(server.serve(client.clone(), cancel.clone()));

    let synced = until_resolvable(addr, &format!("web.{NS}.svc.cluster.local.")).await;
    assert_cluster_records(addr).await;
    let update = assert_updates(&client, addr, "late", "10.43.200.30").await;
    let (p50, p99) = measure(addr, &format!("web.{NS}.svc.cluster.local."), 2000).await;
    let (nx50, nx99) = measure(addr, &format!("web.{NS}.svc.cluster.local.{NS}.svc.cluster.local."), 2000).await;
    println!("cluster DNS: first answer {synced:?} after start; Service create ▶ resolvable {update:?}");
    println!("cluster DNS UDP query latency (loopback, debug build): A p50 {p50:?} p99 {p99:?}; NXDOMAIN p50 {nx50:?} p99 {nx99:?}");

    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(5), serving).await.expect("server stops on cancel").expect("join");
}

/// Removes what the pod-path test adds to the host, even when it fails.
struct HostNetwork {
    link: &'static str,
    netns: &'static str,
    veth: &'static str,
    blackhole: &'static str,
}

impl HostNetwork {
    fn ip(&self, args: &[&str]) {
        let out = Command::new("ip").args(args).output().expect("run ip");
        assert!(out.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }

    fn clean(&self) {
        for args in [
            vec!["link", "del", self.link],
            vec!["link", "del", self.veth],
            vec!["netns", "del", self.netns],
            vec!["route", "del", "blackhole", self.blackhole],
        ] {
            let _ = Command::new("ip").args(&args).stderr(Stdio::null()).status();
        }
        let _ = std::fs::remove_dir_all(format!("/etc/netns/{}", self.netns));
    }
}

impl Drop for HostNetwork {
    fn drop(&mut self) {
        self.clean();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_reach_the_dns_address_on_its_own_interface_through_blackhole_and_rp_filter() {
    if !is_root() {
        assert!(
            std::env::var("K1S_TEST_REQUIRE_CONTAINERD").as_deref() != Ok("1"),
            "this test needs root (interfaces, network namespaces) and K1S_TEST_REQUIRE_CONTAINERD=1 forbids skipping"
        );
        eprintln!("skipped: needs root");
        return;
    }
    let net =
        HostNetwork { link: "k1s-dnstest0", netns: "k1s-dnstest", veth: "k1sdnst-h", blackhole: "10.43.253.0/24" };
    net.clean();
    let dns_ip: IpAddr = "10.43.253.53".parse().expect("ip");

    let mut k1s = K1s::start().await;
    let client = k1s.client().await;
    create_objects(&client).await;

    // As the proxy does for the Service CIDR: unmatched Service traffic is dropped on the host.
    net.ip(&["route", "add", "blackhole", net.blackhole]);
    let config = DnsConfig {
        listen: dns_ip,
        port: 53,
        cluster_domain: "cluster.local".into(),
        upstream: Vec::new(),
        interface: Some(net.link.into()),
    };
    let server = DnsServer::bind(config.clone()).await.expect("bind on the test interface");
    // Idempotent: making the address local again changes nothing.
    let netlink = k1s_dns::iface::RtNetlink::connect().expect("netlink");
    k1s_dns::iface::ensure_local_address(&netlink, net.link, dns_ip).await.expect("ensure again");
    let addr = server.local_addr();
    let cancel = CancellationToken::new();
    let serving = tokio::spawn(server.serve(client.clone(), cancel.clone()));
    until_resolvable(addr, &format!("web.{NS}.svc.cluster.local.")).await;
    assert_cluster_records(addr).await;

    // A pod: its own network namespace behind a veth, default route via the host end, strict
    // reverse-path filtering on the host end, a pod's resolv.conf.
    net.ip(&["netns", "add", net.netns]);
    net.ip(&["link", "add", net.veth, "type", "veth", "peer", "name", "eth0", "netns", net.netns]);
    net.ip(&["addr", "add", "10.199.53.1/30", "dev", net.veth]);
    net.ip(&["link", "set", net.veth, "up"]);
    std::fs::write(format!("/proc/sys/net/ipv4/conf/{}/rp_filter", net.veth), "1").expect("rp_filter");
    for args in [
        vec!["link", "set", "lo", "up"],
        vec!["addr", "add", "10.199.53.2/30", "dev", "eth0"],
        vec!["link", "set", "eth0", "up"],
        vec!["route", "add", "default", "via", "10.199.53.1"],
    ] {
        let mut full = vec!["netns", "exec", net.netns, "ip"];
        full.extend(args);
        net.ip(&full);
    }
    let etc = format!("/etc/netns/{}", net.netns);
    std::fs::create_dir_all(&etc).expect("netns etc");
    std::fs::write(
        format!("{etc}/resolv.conf"),
        format!(
            "search {NS}.svc.cluster.local svc.cluster.local cluster.local\nnameserver {dns_ip}\noptions ndots:5\n"
        ),
    )
    .expect("resolv.conf");

    // glibc in the "pod", as an application would resolve: short names through the search path.
    for (name, want) in
        [("web", "10.43.200.20"), (&format!("web.{NS}") as &str, "10.43.200.20"), ("db-0.db", "10.42.200.5")]
    {
        let started = Instant::now();
        let out =
            Command::new("ip").args(["netns", "exec", net.netns, "getent", "ahostsv4", name]).output().expect("getent");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(want), "getent ahostsv4 {name} in the pod namespace: {text:?}");
        println!("pod namespace: getent ahostsv4 {name} ▶ {want} in {:?}", started.elapsed());
    }
    let out =
        Command::new("ip").args(["netns", "exec", net.netns, "getent", "hosts", "nope"]).output().expect("getent");
    assert!(!out.status.success(), "unknown names do not resolve");

    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(5), serving).await.expect("server stops on cancel").expect("join");
    assert!(
        k1s_dns::iface::remove_interface(&netlink, net.link).await.expect("remove the interface"),
        "the interface existed"
    );
    assert!(!k1s_dns::iface::remove_interface(&netlink, net.link).await.expect("remove again"));
}
