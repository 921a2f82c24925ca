//! Two `k1s server`s on one etcd (issue 21) hand out ClusterIPs and NodePorts from the store,
//! not from their own memory: Services created concurrently through both never share an
//! address, a full range gives upstream's error, and what is freed through one server is handed
//! out again through the other.

mod common;

// The etcd both servers share: the store's etcd harness, as the common harness includes it.
use common::{eventually, Etcd, Server};
use std::collections::{BTreeMap, BTreeSet};
use std::process::Output;
use std::time::Duration;

const CIDR: &str = "10.43.0.0/27";
const FULL: &str = "Internal error occurred: failed to allocate a serviceIP: range is full";
const PORT_TAKEN: &str = "provided port is already allocated";

fn start_pair(etcd: &Etcd) -> (Server, Server) {
    let flags = [&format!("--service-cidr={CIDR}") as &str];
    let env = [("K1S_TOKEN", "k1s-test-token")];
    let a = Server::start_on_datastore(&etcd.url, &flags, &env);
    let b = Server::start_on_datastore(&etcd.url, &flags, &env);
    (a, b)
}

/// The ClusterIPs (in the test's range) and NodePorts of every Service, by `namespace/name`.
fn addresses(s: &Server) -> BTreeMap<String, (Option<String>, Vec<u64>)> {
    let v = s.json(&["get", "services", "-A"]);
    v["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|svc| {
            let key = format!("{}/{}", svc["metadata"]["namespace"].as_str().unwrap_or(""), svc["metadata"]["name"]);
            let ip = svc["spec"]["clusterIP"].as_str().filter(|ip| ip.starts_with("10.43.0.")).map(str::to_string);
            let ports =
                svc["spec"]["ports"].as_array().into_iter().flatten().filter_map(|p| p["nodePort"].as_u64()).collect();
            (key.replace('"', ""), (ip, ports))
        })
        .collect()
}

/// Asserts no two Services share a ClusterIP or a NodePort; gives the ClusterIPs in use.
fn assert_unique(all: &BTreeMap<String, (Option<String>, Vec<u64>)>) -> BTreeSet<String> {
    let mut ips: BTreeMap<&str, &str> = BTreeMap::new();
    let mut ports: BTreeMap<u64, &str> = BTreeMap::new();
    for (svc, (ip, nps)) in all {
        if let Some(ip) = ip {
            if let Some(other) = ips.insert(ip, svc) {
                panic!("ClusterIP {ip} handed to both {other} and {svc}");
            }
        }
        for p in nps {
            if let Some(other) = ports.insert(*p, svc) {
                panic!("NodePort {p} handed to both {other} and {svc}");
            }
        }
    }
    ips.keys().map(|s| s.to_string()).collect()
}

/// Runs the kubectl commands of `jobs` (each on its server) all at once; gives their outputs.
fn concurrently(jobs: Vec<(&Server, Vec<String>)>) -> Vec<Output> {
    let children: Vec<_> = jobs
        .into_iter()
        .map(|(s, args)| {
            s.kubectl_cmd(&args.iter().map(String::as_str).collect::<Vec<_>>())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn kubectl")
        })
        .collect();
    children.into_iter().map(|c| c.wait_with_output().expect("kubectl output")).collect()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The addresses of the usable part of the range: all but the network, the first (the
/// `kubernetes` Service's) and the broadcast address.
fn pool() -> BTreeSet<String> {
    (2..=30).map(|i| format!("10.43.0.{i}")).collect()
}

#[test]
fn two_api_servers_on_one_etcd_never_hand_out_the_same_cluster_ip_or_node_port() {
    let etcd = Etcd::start();
    let (a, b) = start_pair(&etcd);
    let before = assert_unique(&addresses(&a));
    let free = pool().difference(&before).count();

    // 40 ClusterIP and 40 NodePort Services at once, half through each server: more than the
    // range holds, so the two servers race for the same addresses.
    let mut jobs = Vec::new();
    for i in 0..80 {
        let server = if i % 2 == 0 { &a } else { &b };
        let kind = if i < 40 { "clusterip" } else { "nodeport" };
        jobs.push((server, vec!["create".into(), "service".into(), kind.into(), format!("s{i}"), "--tcp=80".into()]));
    }
    let outs = concurrently(jobs);
    let created = outs.iter().filter(|o| o.status.success()).count();
    for o in outs.iter().filter(|o| !o.status.success()) {
        assert!(stderr(o).contains(FULL), "a create failed otherwise than with a full range: {}", stderr(o));
    }
    assert_eq!(created, free, "every free address handed out once, the rest refused");

    // Both servers see the same Services, none sharing an address, and every address is
    // an IPAddress object naming its Service.
    let through_a = eventually(Duration::from_secs(10), "both servers to list the same Services", || {
        let (x, y) = (addresses(&a), addresses(&b));
        (x == y).then_some(x)
    });
    let used = assert_unique(&through_a);
    assert_eq!(used.len(), before.len() + free);
    assert!(pool().is_subset(&used), "the whole range is in use");
    let ipaddrs = a.json(&["get", "ipaddresses"]);
    let refs: BTreeMap<String, String> = ipaddrs["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|ip| {
            let r = &ip["spec"]["parentRef"];
            (
                ip["metadata"]["name"].as_str().unwrap_or("").to_string(),
                format!("{}/{}", r["namespace"].as_str().unwrap_or(""), r["name"].as_str().unwrap_or("")),
            )
        })
        .collect();
    for (svc, (ip, _)) in &through_a {
        if let Some(ip) = ip {
            assert_eq!(refs.get(ip), Some(svc), "the IPAddress of {ip}");
        }
    }

    // Deleting through one server frees the addresses for creates through the other, whose
    // cache still shows them as taken.
    let gone: Vec<String> = through_a
        .iter()
        .filter(|(k, (ip, _))| k.starts_with("default/s") && ip.is_some())
        .take(10)
        .map(|(k, _)| k.trim_start_matches("default/").to_string())
        .collect();
    assert_eq!(gone.len(), 10);
    let freed: BTreeSet<String> = gone.iter().filter_map(|n| through_a[&format!("default/{n}")].0.clone()).collect();
    let mut del = vec!["delete", "service"];
    del.extend(gone.iter().map(String::as_str));
    a.ok(&del);
    // The other server reads the store through its watch: wait until it has seen the
    // deletions (the IPAddress objects go right after their Services, in the same request).
    let left = used.len() - 10;
    eventually(Duration::from_secs(10), "the other server to see the addresses freed", || {
        (b.json(&["get", "ipaddresses"])["items"].as_array().map(Vec::len) == Some(left)).then_some(())
    });
    let jobs = (0..10)
        .map(|i| {
            (&b, vec!["create".into(), "service".into(), "clusterip".into(), format!("again{i}"), "--tcp=80".into()])
        })
        .collect();
    for o in concurrently(jobs) {
        assert!(o.status.success(), "a freed address through the other server: {}", stderr(&o));
    }
    let now = addresses(&b);
    let again: BTreeSet<String> =
        (0..10).filter_map(|i| now.get(&format!("default/again{i}")).and_then(|(ip, _)| ip.clone())).collect();
    assert_eq!(again, freed, "the addresses freed through one server, handed out by the other");
    assert_unique(&now);
    let out = b.kubectl(&["create", "service", "clusterip", "one-more", "--tcp=80"]);
    assert!(!out.status.success() && stderr(&out).contains(FULL), "{}", stderr(&out));

    // An explicit NodePort asked for through both servers at once goes to one Service only.
    let mut del = vec!["delete", "service"];
    let names: Vec<String> = (0..10).map(|i| format!("again{i}")).collect();
    del.extend(names.iter().map(String::as_str));
    b.ok(&del);
    let jobs = (0..10)
        .map(|i| {
            let server = if i % 2 == 0 { &a } else { &b };
            let args = ["create", "service", "nodeport", &format!("fixed{i}"), "--tcp=80", "--node-port=30555"];
            (server, args.iter().map(|s| s.to_string()).collect())
        })
        .collect();
    let outs = concurrently(jobs);
    assert_eq!(outs.iter().filter(|o| o.status.success()).count(), 1, "one Service gets NodePort 30555");
    for o in outs.iter().filter(|o| !o.status.success()) {
        assert!(stderr(o).contains(PORT_TAKEN), "{}", stderr(o));
    }
    let winner = eventually(Duration::from_secs(10), "the NodePort's Service through a", || {
        addresses(&a).into_iter().find(|(_, (_, ports))| ports.contains(&30555)).map(|(k, _)| k)
    });
    // Freed through the server that did not create it, taken again through the other.
    a.ok(&["delete", "service", winner.trim_start_matches("default/")]);
    // (Again within the other server's watch latency.)
    eventually(Duration::from_secs(10), "NodePort 30555 through the other server", || {
        b.kubectl(&["create", "service", "nodeport", "fixed-again", "--tcp=80", "--node-port=30555"])
            .status
            .success()
            .then_some(())
    });
    assert_unique(&addresses(&a));
}
