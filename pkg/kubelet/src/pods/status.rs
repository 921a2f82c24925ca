//! Pod status as upstream's kubelet generates it (`generateAPIPodStatus`): phase, conditions,
//! container statuses with waiting/running/terminated states and last states. Pure functions.

use k8s_openapi::api::core::v1::Pod;
use serde_json::{json, Map, Value};

/// A container instance as the runtime reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct Instance {
    pub id: String,
    pub state: InstanceState,
    /// RFC 3339 times.
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub exit_code: i32,
    pub reason: String,
    pub message: String,
    pub image_ref: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstanceState {
    Created,
    Running,
    Exited,
    Unknown,
}

/// What the worker knows about one container of the pod.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ContainerRecord {
    pub name: String,
    pub image: String,
    pub restart_count: i32,
    pub current: Option<Instance>,
    pub previous: Option<Instance>,
    /// Why no instance runs (ContainerCreating, ErrImagePull, CrashLoopBackOff…) and the message.
    pub waiting: Option<(String, String)>,
    pub ready: bool,
    pub started: bool,
}

/// Everything the status is computed from.
pub struct Observed<'a> {
    pub pod: &'a Pod,
    pub init: &'a [ContainerRecord],
    pub containers: &'a [ContainerRecord],
    /// Ephemeral containers, in spec order; they count for neither phase nor readiness.
    pub ephemeral: &'a [ContainerRecord],
    pub sandbox_ready: bool,
    pub pod_ip: Option<String>,
    pub host_ip: String,
    pub start_time: Option<String>,
    pub now: String,
    /// Set when the pod is being torn down (phase keeps to what containers show).
    pub terminating: bool,
}

fn terminated_json(i: &Instance) -> Value {
    let mut t = json!({
        "exitCode": i.exit_code,
        "reason": if i.reason.is_empty() { if i.exit_code == 0 { "Completed" } else { "Error" } } else { i.reason.as_str() },
        "startedAt": i.started_at,
        "finishedAt": i.finished_at,
        "containerID": format!("containerd://{}", i.id),
    });
    if !i.message.is_empty() {
        t["message"] = json!(i.message);
    }
    json!({"terminated": t})
}

fn state_json(r: &ContainerRecord) -> Value {
    if let Some((reason, message)) = &r.waiting {
        let mut w = json!({"reason": reason});
        if !message.is_empty() {
            w["message"] = json!(message);
        }
        return json!({"waiting": w});
    }
    match &r.current {
        Some(i) if i.state == InstanceState::Running => json!({"running": {"startedAt": i.started_at}}),
        Some(i) if i.state == InstanceState::Exited => terminated_json(i),
        _ => json!({"waiting": {"reason": "ContainerCreating"}}),
    }
}

fn container_status(r: &ContainerRecord) -> Value {
    let state = state_json(r);
    // The last termination: the previous instance, or the current one if we wait to restart it.
    let last = match (&r.waiting, &r.current) {
        (Some(_), Some(i)) if i.state == InstanceState::Exited => terminated_json(i),
        _ => r
            .previous
            .as_ref()
            .filter(|p| p.state == InstanceState::Exited)
            .map(terminated_json)
            .unwrap_or_else(|| json!({})),
    };
    let mut s = json!({
        "name": r.name,
        "state": state,
        "lastState": last,
        "ready": r.ready,
        "restartCount": r.restart_count,
        "image": r.image,
        "imageID": r.current.as_ref().map(|i| i.image_ref.clone()).unwrap_or_default(),
        "started": r.started,
    });
    if let Some(i) = &r.current {
        s["containerID"] = json!(format!("containerd://{}", i.id));
    }
    s
}

/// An ephemeral container's status: never ready, and without `started` (upstream's prober
/// sets it only for regular and init containers).
fn ephemeral_status(r: &ContainerRecord) -> Value {
    let mut s = container_status(r);
    s["ready"] = json!(false);
    if let Some(m) = s.as_object_mut() {
        m.remove("started");
    }
    s
}

/// Counts as upstream's getPhase does.
fn phase(o: &Observed<'_>) -> &'static str {
    let spec = o.pod.spec.as_ref();
    let restart = spec.and_then(|s| s.restart_policy.as_deref()).unwrap_or("Always");
    let prior = o.pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(prior, Some("Succeeded" | "Failed")) {
        return if prior == Some("Succeeded") { "Succeeded" } else { "Failed" };
    }
    // Init containers (restartable "sidecars" only need to have started).
    let init_specs = spec.and_then(|s| s.init_containers.as_ref()).cloned().unwrap_or_default();
    let mut pending_init = false;
    for (c, r) in init_specs.iter().zip(o.init.iter()) {
        let sidecar = c.restart_policy.as_deref() == Some("Always");
        let done = if sidecar {
            r.started
        } else {
            r.current.as_ref().is_some_and(|i| i.state == InstanceState::Exited && i.exit_code == 0)
                && r.waiting.is_none()
        };
        if !done {
            let failed = r.current.as_ref().is_some_and(|i| i.state == InstanceState::Exited && i.exit_code != 0);
            if failed && restart == "Never" && !sidecar {
                return "Failed";
            }
            pending_init = true;
        }
    }
    if pending_init {
        return "Pending";
    }
    let (mut waiting, mut running, mut stopped, mut succeeded, mut unknown) = (0, 0, 0, 0, 0);
    for r in o.containers {
        match (&r.current, &r.waiting) {
            (Some(i), None) if i.state == InstanceState::Running => running += 1,
            (Some(i), None) if i.state == InstanceState::Exited => {
                stopped += 1;
                if i.exit_code == 0 {
                    succeeded += 1;
                }
            }
            (Some(i), Some(_)) if i.state == InstanceState::Exited => stopped += 1,
            (_, Some(_)) if r.previous.is_some() => stopped += 1,
            (_, Some(_)) | (None, None) => waiting += 1,
            (Some(_), None) => {
                if r.current.as_ref().is_some_and(|i| i.state == InstanceState::Created) {
                    waiting += 1
                } else {
                    unknown += 1
                }
            }
        }
    }
    if waiting > 0 {
        "Pending"
    } else if running > 0 && unknown == 0 {
        "Running"
    } else if running == 0 && stopped > 0 && unknown == 0 {
        if restart == "Always" && !o.terminating {
            "Running"
        } else if stopped == succeeded {
            "Succeeded"
        } else if restart == "Never" || o.terminating {
            "Failed"
        } else {
            "Running"
        }
    } else {
        "Pending"
    }
}

fn names_where(records: &[ContainerRecord], pred: impl Fn(&ContainerRecord) -> bool) -> Vec<String> {
    records.iter().filter(|r| pred(r)).map(|r| r.name.clone()).collect()
}

/// Keeps `lastTransitionTime` from the previous status when a condition's status is unchanged.
fn condition(prev: &[Value], type_: &str, ok: bool, reason: Option<&str>, message: Option<String>, now: &str) -> Value {
    let status = if ok { "True" } else { "False" };
    let old = prev.iter().find(|c| c.get("type").and_then(Value::as_str) == Some(type_));
    let since = match old {
        Some(c) if c.get("status").and_then(Value::as_str) == Some(status) => {
            c.get("lastTransitionTime").cloned().unwrap_or_else(|| json!(now))
        }
        _ => json!(now),
    };
    let mut c = json!({"type": type_, "status": status, "lastProbeTime": null, "lastTransitionTime": since});
    if let Some(r) = reason {
        c["reason"] = json!(r);
    }
    if let Some(m) = message {
        c["message"] = json!(m);
    }
    c
}

/// The pod's `status`.
pub fn compute(o: &Observed<'_>) -> Value {
    let phase = phase(o);
    let prev_conditions: Vec<Value> = o
        .pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .map(|cs| cs.iter().filter_map(|c| serde_json::to_value(c).ok()).collect())
        .unwrap_or_default();
    let now = o.now.as_str();
    let init_specs = o.pod.spec.as_ref().and_then(|s| s.init_containers.as_ref()).cloned().unwrap_or_default();
    let incomplete_init: Vec<String> = init_specs
        .iter()
        .zip(o.init.iter())
        .filter(|(c, r)| {
            if c.restart_policy.as_deref() == Some("Always") {
                !r.started
            } else {
                !(r.current.as_ref().is_some_and(|i| i.state == InstanceState::Exited && i.exit_code == 0)
                    && r.waiting.is_none())
            }
        })
        .map(|(c, _)| c.name.clone())
        .collect();
    let terminal = matches!(phase, "Succeeded" | "Failed");
    let unready = names_where(o.containers, |r| !r.ready);
    let initialized = incomplete_init.is_empty();
    let containers_ready = unready.is_empty() && initialized && !terminal;
    let (ready_reason, ready_msg) = if terminal {
        (Some("PodCompleted"), None)
    } else if !initialized {
        (
            Some("ContainersNotInitialized"),
            Some(format!("containers with incomplete status: [{}]", incomplete_init.join(" "))),
        )
    } else if !unready.is_empty() {
        (Some("ContainersNotReady"), Some(format!("containers with unready status: [{}]", unready.join(" "))))
    } else {
        (None, None)
    };
    let mut conditions = vec![
        condition(&prev_conditions, "PodReadyToStartContainers", o.sandbox_ready, None, None, now),
        condition(
            &prev_conditions,
            "Initialized",
            initialized,
            if initialized {
                if terminal && !init_specs.is_empty() {
                    Some("PodCompleted")
                } else {
                    None
                }
            } else {
                Some("ContainersNotInitialized")
            },
            if initialized {
                None
            } else {
                Some(format!("containers with incomplete status: [{}]", incomplete_init.join(" ")))
            },
            now,
        ),
        condition(&prev_conditions, "Ready", containers_ready, ready_reason, ready_msg.clone(), now),
        condition(&prev_conditions, "ContainersReady", containers_ready, ready_reason, ready_msg, now),
    ];
    // PodScheduled is the scheduler's; keep it, or assert it for pods bound by name.
    let scheduled =
        prev_conditions.iter().find(|c| c.get("type").and_then(Value::as_str) == Some("PodScheduled")).cloned();
    let asserted = scheduled.is_none();
    conditions.push(scheduled.unwrap_or_else(|| condition(&prev_conditions, "PodScheduled", true, None, None, now)));
    // The conditions the kubelet writes name the generation they describe, as upstream's
    // (kubectl wait takes a condition older than the pod's generation as not yet met).
    if let Some(g) = o.pod.metadata.generation {
        let owned = if asserted { conditions.len() } else { conditions.len() - 1 };
        for c in &mut conditions[..owned] {
            c["observedGeneration"] = json!(g);
        }
    }
    // Keep conditions owned by others (DisruptionTarget, readiness gates' own types…).
    for c in &prev_conditions {
        let t = c.get("type").and_then(Value::as_str).unwrap_or("");
        if !matches!(t, "PodReadyToStartContainers" | "Initialized" | "Ready" | "ContainersReady" | "PodScheduled") {
            conditions.push(c.clone());
        }
    }
    let mut status = Map::new();
    status.insert("phase".into(), json!(phase));
    status.insert("conditions".into(), Value::Array(conditions));
    status.insert("hostIP".into(), json!(o.host_ip));
    status.insert("hostIPs".into(), json!([{"ip": o.host_ip}]));
    match &o.pod_ip {
        Some(ip) => {
            status.insert("podIP".into(), json!(ip));
            status.insert("podIPs".into(), json!([{"ip": ip}]));
        }
        None => {
            status.insert("podIP".into(), Value::Null);
            status.insert("podIPs".into(), Value::Null);
        }
    }
    status.insert("startTime".into(), json!(o.start_time));
    if !o.init.is_empty() {
        status.insert("initContainerStatuses".into(), Value::Array(o.init.iter().map(container_status).collect()));
    }
    status.insert("containerStatuses".into(), Value::Array(o.containers.iter().map(container_status).collect()));
    if !o.ephemeral.is_empty() {
        status.insert(
            "ephemeralContainerStatuses".into(),
            Value::Array(o.ephemeral.iter().map(ephemeral_status).collect()),
        );
    }
    if let Some(q) = o.pod.status.as_ref().and_then(|s| s.qos_class.as_ref()) {
        status.insert("qosClass".into(), json!(q));
    }
    if let Some(g) = o.pod.metadata.generation {
        status.insert("observedGeneration".into(), json!(g));
    }
    Value::Object(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(restart: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "default", "uid": "u1", "generation": 1},
            "spec": {"restartPolicy": restart, "containers": [{"name": "c", "image": "busybox"}]},
            "status": {"phase": "Pending", "qosClass": "BestEffort"},
        }))
        .expect("pod")
    }

    fn running() -> Instance {
        Instance {
            id: "abc".into(),
            state: InstanceState::Running,
            started_at: Some("2026-01-01T00:00:00Z".into()),
            finished_at: None,
            exit_code: 0,
            reason: String::new(),
            message: String::new(),
            image_ref: "sha256:1".into(),
        }
    }

    fn observed<'a>(p: &'a Pod, c: &'a [ContainerRecord]) -> Observed<'a> {
        Observed {
            pod: p,
            init: &[],
            containers: c,
            ephemeral: &[],
            sandbox_ready: true,
            pod_ip: Some("10.42.0.5".into()),
            host_ip: "192.0.2.2".into(),
            start_time: Some("2026-01-01T00:00:00Z".into()),
            now: "2026-01-01T00:00:05Z".into(),
            terminating: false,
        }
    }

    #[test]
    fn running_but_not_ready_until_the_probe_passes() {
        let p = pod("Always");
        let mut r = ContainerRecord {
            name: "c".into(),
            image: "busybox".into(),
            current: Some(running()),
            started: true,
            ..Default::default()
        };
        let s = compute(&observed(&p, std::slice::from_ref(&r)));
        assert_eq!(s["phase"], "Running");
        let ready =
            s["conditions"].as_array().expect("c").iter().find(|c| c["type"] == "Ready").expect("ready").clone();
        assert_eq!(ready["status"], "False");
        assert_eq!(ready["message"], "containers with unready status: [c]");
        r.ready = true;
        let s = compute(&observed(&p, &[r]));
        let ready =
            s["conditions"].as_array().expect("c").iter().find(|c| c["type"] == "Ready").expect("ready").clone();
        assert_eq!(ready["status"], "True");
        assert_eq!(s["containerStatuses"][0]["containerID"], "containerd://abc");
    }

    #[test]
    fn crash_loop_shows_waiting_with_last_termination_and_pod_running() {
        let p = pod("Always");
        let exited = Instance {
            state: InstanceState::Exited,
            exit_code: 1,
            reason: "Error".into(),
            finished_at: Some("2026-01-01T00:00:03Z".into()),
            ..running()
        };
        let r = ContainerRecord {
            name: "c".into(),
            image: "busybox".into(),
            restart_count: 2,
            current: Some(exited),
            waiting: Some((
                "CrashLoopBackOff".into(),
                "back-off 20s restarting failed container=c pod=p_default(u1)".into(),
            )),
            ..Default::default()
        };
        let s = compute(&observed(&p, &[r]));
        assert_eq!(s["phase"], "Running");
        assert_eq!(s["containerStatuses"][0]["state"]["waiting"]["reason"], "CrashLoopBackOff");
        assert_eq!(s["containerStatuses"][0]["lastState"]["terminated"]["exitCode"], 1);
        assert_eq!(s["containerStatuses"][0]["restartCount"], 2);
    }

    #[test]
    fn never_restart_pods_end_succeeded_or_failed() {
        let p = pod("Never");
        let ok = Instance { state: InstanceState::Exited, exit_code: 0, ..running() };
        let r = ContainerRecord { name: "c".into(), current: Some(ok.clone()), ..Default::default() };
        assert_eq!(compute(&observed(&p, &[r]))["phase"], "Succeeded");
        let bad = Instance { exit_code: 2, ..ok };
        let r = ContainerRecord { name: "c".into(), current: Some(bad), ..Default::default() };
        let s = compute(&observed(&p, &[r]));
        assert_eq!(s["phase"], "Failed");
        assert_eq!(s["containerStatuses"][0]["state"]["terminated"]["reason"], "Error");
    }

    #[test]
    fn image_pull_errors_keep_the_pod_pending() {
        let p = pod("Always");
        let r = ContainerRecord {
            name: "c".into(),
            waiting: Some(("ImagePullBackOff".into(), "Back-off pulling image".into())),
            ..Default::default()
        };
        let s = compute(&observed(&p, &[r]));
        assert_eq!(s["phase"], "Pending");
        assert_eq!(s["containerStatuses"][0]["state"]["waiting"]["reason"], "ImagePullBackOff");
    }
}
