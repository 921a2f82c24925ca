//! High availability on one machine (issue 21): a 3-member etcd cluster on loopback, server B
//! (control plane only) on it, and server A (with the node agent) joining B's cluster with
//! `--server` and the token alone. Stock kubectl against either server sees the same cluster;
//! the `kubernetes` Service lists both; one etcd member down leaves the cluster writable; killing
//! the server that holds the controller and scheduler Leases moves them to the other within 20 s
//! and a scaled Deployment still converges; the dead server leaves the `kubernetes` endpoints.

#[path = "../cmd/k1s/tests/common/mod.rs"]
mod common;

use common::{eventually, EtcdCluster, Server};
use std::time::Duration;

const IMAGE: &str = "127.0.0.1:5000/pause:3.10";

fn holder(s: &Server, lease: &str) -> Option<String> {
    let out = s.kubectl(&["get", "lease", "-n", "kube-system", lease, "-o", "jsonpath={.spec.holderIdentity}"]);
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn identity(s: &Server) -> String {
    std::fs::read_to_string(s.data_dir().join("server/identity")).expect("identity").trim().to_string()
}

/// Seconds since the Unix epoch, now.
fn unix_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs_f64()
}

/// Seconds since the Unix epoch of an RFC 3339 time (a Lease's MicroTime).
fn unix_of(time: &str) -> f64 {
    let out = std::process::Command::new("date").args(["-u", "-d", time, "+%s.%N"]).output().expect("date");
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or_else(|_| panic!("not a time: {time:?}"))
}

fn ready_replicas(s: &Server, name: &str) -> Option<u64> {
    let out = s.kubectl(&["get", "deployment", name, "-o", "json"]);
    if !out.status.success() {
        return None;
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    Some(v["status"]["readyReplicas"].as_u64().unwrap_or(0))
}

fn converges(s: &Server, name: &str, replicas: u64, within: Duration) {
    eventually(within, &format!("{name} to have {replicas} ready replicas"), || {
        (ready_replicas(s, name) == Some(replicas)).then_some(())
    });
}

#[test]
fn two_servers_on_a_three_member_etcd_survive_losing_a_member_and_the_leader() {
    let mut etcd = EtcdCluster::start(3);
    let mut b = Server::start_control_plane_shared(&[&format!("--datastore-endpoint={}", etcd.urls())]);
    let b_id = identity(&b);
    for lease in ["kube-controller-manager", "kube-scheduler"] {
        eventually(Duration::from_secs(20), &format!("B to hold the {lease} Lease"), || {
            (holder(&b, lease).as_deref() == Some(b_id.as_str())).then_some(())
        });
    }
    let token = common::join_token(&b);
    // A joins with B's URL and the token alone: the datastore and the CAs come from B.
    let a =
        Server::start_node_shared(&[&format!("--server=https://127.0.0.1:{}", b.port), &format!("--token={token}")]);
    a.wait_node_ready();
    let a_id = identity(&a);
    assert_ne!(a_id, b_id);
    assert_eq!(holder(&a, "kube-controller-manager").as_deref(), Some(b_id.as_str()), "B keeps leading");

    // One cluster through either server; the node registered through A is seen through B.
    let mut both = vec![a.port, b.port];
    both.sort();
    eventually(Duration::from_secs(20), "both API servers in the kubernetes Service", || {
        (common::kubernetes_api_ports(&a) == both && common::kubernetes_api_ports(&b) == both).then_some(())
    });
    let nodes = b.json(&["get", "nodes", "-o", "json"]);
    assert_eq!(nodes["items"].as_array().map(Vec::len), Some(1), "A's node through B: {nodes}");
    a.ok(&["create", "deployment", "web", &format!("--image={IMAGE}"), "--replicas=1"]);
    eventually(Duration::from_secs(10), "A's Deployment through B", || {
        b.kubectl(&["get", "deployment", "web"]).status.success().then_some(())
    });
    // B's controllers and scheduler act on what A stored; A's kubelet runs it.
    converges(&b, "web", 1, Duration::from_secs(90));

    // One etcd member down: both servers still write, and the Deployment still scales.
    etcd.kill(0);
    for (s, name) in [(&a, "after-member-loss-a"), (&b, "after-member-loss-b")] {
        eventually(Duration::from_secs(30), &format!("a write through {name}"), || {
            s.kubectl(&["create", "configmap", name]).status.success().then_some(())
        });
    }
    b.ok(&["scale", "deployment", "web", "--replicas=2"]);
    converges(&a, "web", 2, Duration::from_secs(90));

    // The leader dies: A takes both Leases within 20 s, and its controllers and scheduler
    // converge a scale made after that.
    // B leads, renewing every 2 s again (writes stall while etcd elects a new leader).
    for lease in ["kube-controller-manager", "kube-scheduler"] {
        eventually(Duration::from_secs(30), &format!("B renewing the {lease} Lease"), || {
            let renewed = a.ok(&["get", "lease", "-n", "kube-system", lease, "-o", "jsonpath={.spec.renewTime}"]);
            let age = unix_now() - unix_of(renewed.trim());
            (holder(&a, lease).as_deref() == Some(b_id.as_str()) && age < 4.0).then_some(())
        });
    }
    b.kill();
    let killed = unix_now();
    for lease in ["kube-controller-manager", "kube-scheduler"] {
        eventually(Duration::from_secs(30), &format!("A to take the {lease} Lease"), || {
            (holder(&a, lease).as_deref() == Some(a_id.as_str())).then_some(())
        });
        // When A took it, by the Lease's own acquireTime (this test's polling adds its delay).
        let acquired = a.ok(&["get", "lease", "-n", "kube-system", lease, "-o", "jsonpath={.spec.acquireTime}"]);
        let took = unix_of(acquired.trim()) - killed;
        eprintln!("the {lease} Lease moved to A {took:.2} s after B was killed");
        assert!(took < 20.0, "the {lease} Lease moved {took:.2} s after B was killed");
    }
    a.ok(&["scale", "deployment", "web", "--replicas=3"]);
    converges(&a, "web", 3, Duration::from_secs(90));

    // B's endpoint lease expires: the kubernetes Service lists A alone.
    eventually(Duration::from_secs(40), "the dead server dropped from the kubernetes Service", || {
        (common::kubernetes_api_ports(&a) == vec![a.port]).then_some(())
    });
    drop(b);
}
