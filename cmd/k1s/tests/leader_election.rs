//! The controllers run only while their server holds the `kube-system/kube-controller-manager`
//! Lease (upstream's leader election: 15 s lease, 2 s retry): another holder that keeps
//! renewing keeps them stopped, one that stops renewing loses the Lease after its duration, and
//! a restarted server takes its own Lease back at once.

mod common;

use common::{eventually, Server};
use std::time::{Duration, Instant};

const LEASE: &str = "kube-controller-manager";

fn holder(s: &Server) -> Option<String> {
    let out = s.kubectl(&["get", "lease", "-n", "kube-system", LEASE, "-o", "jsonpath={.spec.holderIdentity}"]);
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn identity(s: &Server) -> String {
    std::fs::read_to_string(s.data_dir().join("server").join("identity")).expect("server identity").trim().to_string()
}

/// Now as a Lease's MicroTime (`2026-12-04T22:00:00.123456Z`).
fn micro_now() -> String {
    let date = std::process::Command::new("date").args(["-u", "+%Y-%m-%dT%H:%M:%S.%6NZ"]).output().expect("date");
    String::from_utf8_lossy(&date.stdout).trim().to_string()
}

/// Writes the Lease as held by `who`, renewed now (what a live leader elsewhere does).
fn renew_as(s: &Server, who: &str) {
    let now = micro_now();
    let patch = format!(r#"{{"spec":{{"holderIdentity":"{who}","renewTime":"{now}","leaseDurationSeconds":15}}}}"#);
    s.ok(&["patch", "lease", "-n", "kube-system", LEASE, "--type", "merge", "-p", &patch]);
}

fn replicasets(s: &Server, ns: &str) -> usize {
    let v = s.json(&["get", "replicasets", "-n", ns, "-o", "json"]);
    v["items"].as_array().map_or(0, Vec::len)
}

fn deployment(s: &Server, ns: &str, name: &str) {
    s.ok(&["create", "deployment", name, "-n", ns, "--image=127.0.0.1:5000/pause:3.10"]);
}

#[test]
fn controllers_run_only_while_their_server_holds_the_lease() {
    let mut s = Server::start_controllers();
    let me = identity(&s);
    assert!(me.contains('_'), "identity is <hostname>_<uuid>: {me}");
    eventually(Duration::from_secs(20), "the server to hold the controller Lease", || {
        (holder(&s).as_deref() == Some(me.as_str())).then_some(())
    });
    s.ok(&["create", "namespace", "le"]);
    deployment(&s, "le", "first");
    eventually(Duration::from_secs(20), "a ReplicaSet while leading", || (replicasets(&s, "le") == 1).then_some(()));

    // Another candidate takes the Lease and keeps renewing it: this server notices on its next
    // renewal, stops its controllers and waits.
    renew_as(&s, "elsewhere_1");
    std::thread::sleep(Duration::from_secs(5));
    deployment(&s, "le", "second");
    let held_until = Instant::now() + Duration::from_secs(12);
    while Instant::now() < held_until {
        renew_as(&s, "elsewhere_1");
        assert_eq!(holder(&s).as_deref(), Some("elsewhere_1"), "the other holder keeps the Lease");
        std::thread::sleep(Duration::from_secs(2));
    }
    assert_eq!(replicasets(&s, "le"), 1, "no controller ran while another server held the Lease");
    assert!(s.logs().contains("the Lease was taken over"), "{}", common::tail(&s.logs(), 30));

    // The other holder stops renewing: after the lease duration this server takes over (one
    // transition more) and its controllers catch up.
    let stopped = Instant::now();
    eventually(Duration::from_secs(30), "the server to take the Lease back", || {
        (holder(&s).as_deref() == Some(me.as_str())).then_some(())
    });
    let waited = stopped.elapsed();
    assert!(waited >= Duration::from_secs(12), "took an unexpired Lease after {waited:?}");
    eventually(Duration::from_secs(20), "the second ReplicaSet", || (replicasets(&s, "le") == 2).then_some(()));
    let transitions = s.ok(&["get", "lease", "-n", "kube-system", LEASE, "-o", "jsonpath={.spec.leaseTransitions}"]);
    assert!(transitions.trim().parse::<i32>().expect("leaseTransitions") >= 1, "{transitions}");

    // A graceful stop releases the Lease; a kill -9 does not, but the restarted server has the
    // same identity and renews its own Lease at once instead of waiting 15 s.
    s.restart();
    let restarted = Instant::now();
    deployment(&s, "le", "third");
    eventually(Duration::from_secs(10), "the third ReplicaSet soon after a restart", || {
        (replicasets(&s, "le") == 3).then_some(())
    });
    assert!(restarted.elapsed() < Duration::from_secs(10));
    assert_eq!(holder(&s).as_deref(), Some(me.as_str()));
    s.crash_and_restart();
    deployment(&s, "le", "fourth");
    eventually(Duration::from_secs(10), "the fourth ReplicaSet soon after a kill -9", || {
        (replicasets(&s, "le") == 4).then_some(())
    });
}

#[test]
fn a_graceful_stop_releases_the_lease() {
    let mut s = Server::start_controllers();
    let me = identity(&s);
    eventually(Duration::from_secs(20), "the server to hold the controller Lease", || {
        (holder(&s).as_deref() == Some(me.as_str())).then_some(())
    });
    // Read the stored Lease after the stop through a control plane without controllers on the
    // same data dir (nothing renews it there).
    s.stop();
    // A stop is no failure: no ERROR line (the scheduler's work could see the shutdown before
    // its leader loop did, which logged "the work ended while leading").
    let errors: Vec<String> = s.logs().lines().filter(|l| l.contains(" ERROR ")).map(str::to_string).collect();
    assert!(errors.is_empty(), "a graceful stop logged errors: {errors:#?}");
    s.set_controllers(false);
    s.restart();
    let v = s.json(&["get", "lease", "-n", "kube-system", LEASE, "-o", "json"]);
    assert_eq!(v["spec"]["holderIdentity"], "", "released: {v}");
    assert_eq!(v["spec"]["leaseDurationSeconds"], 1, "released: {v}");
}

fn kubernetes_slice_addresses(s: &Server) -> Vec<String> {
    let v = s.json(&["get", "endpointslice", "-n", "default", "kubernetes", "-o", "json"]);
    let mut ips: Vec<String> = v["endpoints"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["addresses"][0].as_str().map(str::to_string))
        .collect();
    ips.sort();
    ips
}

#[test]
fn the_kubernetes_endpoints_follow_the_api_servers_leases() {
    let mut s = Server::start();
    let leases = s.json(&["get", "lease", "-n", "kube-system", "-l", "k1s.io/apiserver-endpoint", "-o", "json"]);
    let items = leases["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{leases}");
    let own = items[0]["spec"]["holderIdentity"].as_str().expect("holder").to_string();
    let (own_ip, own_port) = own.rsplit_once(':').expect("ip:port");
    assert_eq!(own_port, s.port.to_string());
    assert_eq!(kubernetes_slice_addresses(&s), vec![own_ip.to_string()]);

    // Another live API server (its lease renewed) joins the endpoints; once it stops renewing,
    // its lease expires and it is dropped.
    let other = "10.0.0.9";
    let now = micro_now();
    let name = format!("apiserver-endpoint-10-0-0-9-{own_port}");
    let lease = format!(
        r#"{{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{{"name":"{name}","namespace":"kube-system","labels":{{"k1s.io/apiserver-endpoint":"true"}}}},"spec":{{"holderIdentity":"{other}:{own_port}","leaseDurationSeconds":15,"renewTime":"{now}"}}}}"#
    );
    s.ok_stdin(&["create", "-f", "-"], &lease);
    let mut both = vec![own_ip.to_string(), other.to_string()];
    both.sort();
    eventually(Duration::from_secs(15), "the other server in the kubernetes EndpointSlice", || {
        (kubernetes_slice_addresses(&s) == both).then_some(())
    });
    let eps =
        s.ok(&["get", "endpoints", "-n", "default", "kubernetes", "-o", "jsonpath={.subsets[0].addresses[*].ip}"]);
    assert!(eps.contains(other) && eps.contains(own_ip), "{eps}");
    eventually(Duration::from_secs(40), "the expired server dropped from the kubernetes EndpointSlice", || {
        (kubernetes_slice_addresses(&s) == vec![own_ip.to_string()]).then_some(())
    });

    // The same server killed and started on another port: its lease (named after its identity)
    // carries the new port at once; no slice keeps the old one.
    let old_port = s.port;
    s.crash_and_restart();
    assert_ne!(s.port, old_port, "the harness picks a new port");
    let want = vec![s.port];
    eventually(Duration::from_secs(5), "only the new port, well before the old lease would expire", || {
        (common::kubernetes_api_ports(&s) == want).then_some(())
    });
}
