use super::*;
use serde_json::json;

fn pod() -> Value {
    json!({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "nodeName": "n1",
            "initContainers": [{"name": "init"}],
            "containers": [{"name": "app"}, {"name": "sidecar"}],
        },
    })
}

fn query(q: &str) -> Query {
    Query::parse(Some(q))
}

#[test]
fn log_container_choice_matches_upstream_messages() {
    let p = pod();
    assert_eq!(log_container(&p, Some("sidecar")).expect("named"), "sidecar");
    assert_eq!(log_container(&p, Some("init")).expect("init containers have logs too"), "init");
    assert_eq!(
        log_container(&p, Some("nope")).err().map(|e| e.message),
        Some("container nope is not valid for pod web".into())
    );
    assert_eq!(
        log_container(&p, None).err().map(|e| e.message),
        Some("a container name must be specified for pod web, choose one of: [init app sidecar]".into())
    );
    let single = json!({"metadata": {"name": "one"}, "spec": {"containers": [{"name": "only"}]}});
    assert_eq!(log_container(&single, None).expect("default"), "only");
}

#[test]
fn exec_container_choice_lists_init_containers_separately() {
    let e = stream_container(&pod(), None).expect_err("ambiguous");
    assert_eq!(e.code, 400);
    assert_eq!(
        e.message,
        "a container name must be specified for pod web, choose one of: [app sidecar] or one of the init containers: [init]"
    );
}

fn with_status(status: Value) -> Value {
    let mut p = pod();
    p["status"] = json!({"containerStatuses": [status]});
    p
}

#[test]
fn log_status_checks_give_the_kubelets_reasons() {
    let msg = |p: &Value, prev: bool| check_log_status(p, "app", prev).err().map(|e| e.message);
    let waiting = with_status(json!({"name": "app", "state": {"waiting": {"reason": "ContainerCreating"}}}));
    assert_eq!(
        msg(&waiting, false),
        Some("container \"app\" in pod \"web\" is waiting to start: ContainerCreating".into())
    );
    let pull = with_status(json!({"name": "app", "state": {"waiting": {"reason": "ImagePullBackOff"}}}));
    assert_eq!(
        msg(&pull, false),
        Some("container \"app\" in pod \"web\" is waiting to start: trying and failing to pull image".into())
    );
    let running = with_status(json!({"name": "app", "state": {"running": {}}}));
    assert_eq!(msg(&running, false), None);
    assert_eq!(msg(&running, true), Some("previous terminated container \"app\" in pod \"web\" not found".into()));
    let crashing = with_status(json!({
        "name": "app",
        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        "lastState": {"terminated": {"exitCode": 1, "containerID": "containerd://abc"}},
    }));
    assert_eq!(msg(&crashing, false), None, "a crash-looping container shows its last run");
    assert_eq!(msg(&crashing, true), None);
    assert_eq!(msg(&pod(), false), None, "without a status the kubelet decides");
}

#[test]
fn log_options_are_validated_and_passed_on() {
    let (q, follow, previous) =
        log_query(&query("follow=true&previous=false&tailLines=10&timestamps=true&limitBytes=5"), "web").expect("ok");
    assert_eq!(q, "follow=true&timestamps=true&tailLines=10&limitBytes=5");
    assert!(follow && !previous);
    let (q, ..) = log_query(&query("sinceTime=2026-11-29T21:00:00Z"), "web").expect("ok");
    assert_eq!(q, "sinceTime=2026-11-29T21%3A00%3A00Z");
    let e = log_query(&query("tailLines=-1"), "web").expect_err("invalid");
    assert_eq!((e.code, e.reason), (422, "Invalid"));
    assert_eq!(
        e.message,
        "PodLogOptions \"web\" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0"
    );
    assert!(log_query(&query("sinceSeconds=5&sinceTime=2026-11-29T21:00:00Z"), "web").is_err());
    assert!(log_query(&query("limitBytes=0"), "web").is_err());
}

#[test]
fn exec_options_become_the_kubelets_query() {
    let (q, o) =
        stream_query(Kind::Exec, &query("command=sh&command=-c&command=echo+hi&stdin=true&stdout=true&tty=true"))
            .expect("ok");
    assert_eq!(q, "input=1&output=1&tty=1&command=sh&command=-c&command=echo+hi");
    assert!(o.stdin && o.stdout && !o.stderr && o.tty);
    assert!(stream_query(Kind::Exec, &query("command=ls")).is_err(), "no stream at all");
    assert!(stream_query(Kind::Exec, &query("stdout=true")).is_err(), "no command");
    let (q, _) = stream_query(Kind::Attach, &query("stdout=true&stderr=true")).expect("ok");
    assert_eq!(q, "output=1&error=1");
    let (q, _) = stream_query(Kind::PortForward, &query("ports=8080&ports=9090")).expect("ok");
    assert_eq!(q, "port=8080%2C9090");
    assert!(stream_query(Kind::PortForward, &query("ports=http")).is_err());
}

#[test]
fn kubelet_target_prefers_the_internal_ip_and_reported_port() {
    let node = json!({"status": {
        "addresses": [{"type": "Hostname", "address": "box"}, {"type": "InternalIP", "address": "10.0.0.5"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 12345}},
    }});
    assert_eq!(target_of(&node), Some(KubeletTarget { host: "10.0.0.5".into(), port: 12345 }));
    let bare = json!({"status": {"addresses": [{"type": "Hostname", "address": "box"}]}});
    assert_eq!(target_of(&bare), Some(KubeletTarget { host: "box".into(), port: 10250 }));
    assert_eq!(target_of(&json!({})), None);
}
