//! ResourceQuota and LimitRange, driven with stock kubectl: the quota admission refuses what
//! would exceed `hard` with upstream's 403 message, the quota controller shows usage and
//! releases deleted pods' slots, concurrent creates never overshoot, and the LimitRanger
//! defaults and bounds container resources.

mod common;

use common::{eventually, Server};
use std::time::Duration;

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Creates namespace `ns` with quota `q` of `hard` (YAML map lines) and waits until the quota
/// controller has published its usage (admission refuses a quota without one, as upstream).
fn quota(server: &Server, ns: &str, hard: &str) {
    server.ok(&["create", "namespace", ns]);
    let manifest = format!(
        "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: q\n  namespace: {ns}\nspec:\n  hard:\n{hard}\n"
    );
    server.ok_stdin(&["apply", "-f", "-"], &manifest);
    eventually(Duration::from_secs(20), "quota status", || {
        let q = server.json(&["get", "resourcequota", "q", "-n", ns]);
        q.pointer("/status/used").and_then(|u| u.as_object()).filter(|u| !u.is_empty()).map(|_| ())
    });
}

fn used(server: &Server, ns: &str, resource: &str) -> Option<String> {
    let q = server.json(&["get", "resourcequota", "q", "-n", ns]);
    q.pointer(&format!("/status/used/{}", resource.replace('~', "~0").replace('/', "~1")))
        .and_then(|v| v.as_str())
        .map(str::to_string)
}

fn run(server: &Server, ns: &str, name: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["run", name, "--image=busybox", "-n", ns];
    args.extend_from_slice(extra);
    server.kubectl(&args)
}

#[test]
fn a_third_pod_over_a_pods_quota_of_two_is_refused_and_a_deleted_pod_frees_its_slot() {
    let server = Server::start_controllers();
    quota(&server, "q1", "    pods: \"2\"");
    assert!(run(&server, "q1", "p1", &[]).status.success());
    // A dry run is checked but not charged.
    let dry = run(&server, "q1", "dry", &["--dry-run=server"]);
    assert!(dry.status.success(), "{}", stderr(&dry));
    assert!(run(&server, "q1", "p2", &[]).status.success());
    let refused = run(&server, "q1", "p3", &[]);
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains(
            "Error from server (Forbidden): pods \"p3\" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2"
        ),
        "{}",
        stderr(&refused)
    );
    let names = server.ok(&["get", "pods", "-n", "q1", "-o", "name"]);
    assert_eq!(names.lines().count(), 2, "{names}");
    let described = server.ok(&["describe", "quota", "q", "-n", "q1"]);
    assert!(described.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["pods", "2", "2"]), "{described}");
    server.ok(&["delete", "pod", "p1", "-n", "q1", "--grace-period=0", "--force"]);
    eventually(Duration::from_secs(10), "the deleted pod's slot", || {
        (used(&server, "q1", "pods").as_deref() == Some("1")).then_some(())
    });
    let admitted = run(&server, "q1", "p3", &[]);
    assert!(admitted.status.success(), "{}", stderr(&admitted));
}

#[test]
fn a_pod_without_cpu_requests_is_refused_under_a_requests_cpu_quota() {
    let server = Server::start_controllers();
    quota(&server, "q2", "    requests.cpu: \"1\"");
    let refused = run(&server, "q2", "nocpu", &[]);
    assert!(
        stderr(&refused).contains("pods \"nocpu\" is forbidden: failed quota: q: must specify requests.cpu for: nocpu"),
        "{}",
        stderr(&refused)
    );
    let pod = |name: &str, cpu: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: q2\nspec:\n  containers:\n  - name: c\n    image: busybox\n    resources:\n      requests:\n        cpu: {cpu}\n"
        )
    };
    server.ok_stdin(&["create", "-f", "-"], &pod("half", "500m"));
    let over = server.kubectl_stdin(&["create", "-f", "-"], &pod("more", "600m"));
    assert!(
        stderr(&over).contains(
            "pods \"more\" is forbidden: exceeded quota: q, requested: requests.cpu=600m, used: requests.cpu=500m, limited: requests.cpu=1"
        ),
        "{}",
        stderr(&over)
    );
    assert_eq!(used(&server, "q2", "requests.cpu").as_deref(), Some("500m"));
}

#[test]
fn twenty_concurrent_pod_creates_against_a_quota_of_five_leave_exactly_five() {
    let server = Server::start_controllers();
    quota(&server, "q3", "    pods: \"5\"");
    let admitted = std::thread::scope(|s| {
        let handles: Vec<_> = (0..20)
            .map(|i| {
                let server = &server;
                s.spawn(move || run(server, "q3", &format!("c{i}"), &[]).status.success())
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("thread")).filter(|ok| *ok).count()
    });
    assert_eq!(admitted, 5);
    let names = server.ok(&["get", "pods", "-n", "q3", "-o", "name"]);
    assert_eq!(names.lines().count(), 5, "{names}");
    assert_eq!(used(&server, "q3", "pods").as_deref(), Some("5"));
}

#[test]
fn a_limit_range_defaults_container_resources_and_refuses_a_pod_over_max() {
    let server = Server::start_controllers();
    server.ok(&["create", "namespace", "lr"]);
    server.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: LimitRange\nmetadata:\n  name: limits\n  namespace: lr\nspec:\n  limits:\n  - type: Container\n    default:\n      cpu: 500m\n      memory: 128Mi\n    defaultRequest:\n      cpu: 100m\n      memory: 64Mi\n    max:\n      cpu: \"1\"\n",
    );
    server.ok(&["run", "d", "--image=busybox", "-n", "lr"]);
    let pod = server.json(&["get", "pod", "d", "-n", "lr"]);
    let res = &pod["spec"]["containers"][0]["resources"];
    assert_eq!(res["limits"]["cpu"], "500m", "{pod}");
    assert_eq!(res["limits"]["memory"], "128Mi", "{pod}");
    assert_eq!(res["requests"]["cpu"], "100m", "{pod}");
    assert_eq!(res["requests"]["memory"], "64Mi", "{pod}");
    assert_eq!(
        pod["metadata"]["annotations"]["kubernetes.io/limit-ranger"],
        "LimitRanger plugin set: cpu, memory request for container d; cpu, memory limit for container d"
    );
    let big = server.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: big\n  namespace: lr\nspec:\n  containers:\n  - name: c\n    image: busybox\n    resources:\n      limits:\n        cpu: \"2\"\n",
    );
    assert!(
        stderr(&big).starts_with("Error from server (Forbidden)")
            && stderr(&big).contains("pods \"big\" is forbidden: maximum cpu usage per Container is 1, but limit is 2"),
        "{}",
        stderr(&big)
    );
    let names = server.ok(&["get", "pods", "-n", "lr", "-o", "name"]);
    assert_eq!(names.trim(), "pod/d");
}

#[test]
fn a_best_effort_scoped_quota_counts_only_best_effort_pods_and_node_ports_are_counted() {
    let server = Server::start_controllers();
    server.ok(&["create", "namespace", "q4"]);
    server.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: q\n  namespace: q4\nspec:\n  hard:\n    pods: \"1\"\n  scopes: [BestEffort]\n---\napiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: svc\n  namespace: q4\nspec:\n  hard:\n    services.nodeports: \"1\"\n",
    );
    eventually(Duration::from_secs(20), "quota status", || {
        let q = server.json(&["get", "resourcequota", "-n", "q4"]);
        let items = q["items"].as_array().cloned().unwrap_or_default();
        (items.len() == 2 && items.iter().all(|i| i.pointer("/status/used").is_some())).then_some(())
    });
    assert!(run(&server, "q4", "be1", &[]).status.success());
    let refused = run(&server, "q4", "be2", &[]);
    assert!(
        stderr(&refused).contains("exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1"),
        "{}",
        stderr(&refused)
    );
    let burstable = server.kubectl_stdin(
        &["create", "-f", "-"],
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: burst\n  namespace: q4\nspec:\n  containers:\n  - name: c\n    image: busybox\n    resources:\n      requests:\n        cpu: 100m\n",
    );
    assert!(burstable.status.success(), "{}", stderr(&burstable));
    server.ok(&["create", "service", "nodeport", "np1", "--tcp=80:80", "-n", "q4"]);
    let second = server.kubectl(&["create", "service", "nodeport", "np2", "--tcp=80:80", "-n", "q4"]);
    assert!(
        stderr(&second).contains(
            "services \"np2\" is forbidden: exceeded quota: svc, requested: services.nodeports=1, used: services.nodeports=1, limited: services.nodeports=1"
        ),
        "{}",
        stderr(&second)
    );
    server.ok(&["create", "service", "clusterip", "cip", "--tcp=80:80", "-n", "q4"]);
}

#[test]
fn an_object_count_quota_limits_custom_resources_and_releases_deleted_ones() {
    let server = Server::start_controllers();
    server.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: gadgets.example.com\nspec:\n  group: example.com\n  scope: Namespaced\n  names: {plural: gadgets, singular: gadget, kind: Gadget}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}\n",
    );
    server.ok(&["wait", "--for=condition=Established", "crd/gadgets.example.com", "--timeout=30s"]);
    quota(&server, "q5", "    count/gadgets.example.com: \"1\"");
    let gadget =
        |name: &str| format!("apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: {name}\n  namespace: q5\n");
    server.ok_stdin(&["create", "-f", "-"], &gadget("g1"));
    let refused = server.kubectl_stdin(&["create", "-f", "-"], &gadget("g2"));
    assert!(
        stderr(&refused).contains(
            "gadgets.example.com \"g2\" is forbidden: exceeded quota: q, requested: count/gadgets.example.com=1, used: count/gadgets.example.com=1, limited: count/gadgets.example.com=1"
        ),
        "{}",
        stderr(&refused)
    );
    server.ok(&["delete", "gadget", "g1", "-n", "q5"]);
    eventually(Duration::from_secs(10), "the deleted gadget's slot", || {
        (used(&server, "q5", "count/gadgets.example.com").as_deref() == Some("0")).then_some(())
    });
    server.ok_stdin(&["create", "-f", "-"], &gadget("g2"));
}
