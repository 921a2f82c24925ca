//! Pod facts the core controllers share (upstream `k8s.io/kubernetes/pkg/api/v1/pod`).

use k8s_openapi::api::core::v1::{Pod, PodCondition};

/// The pod's `Ready` condition, if reported.
pub fn ready_condition(pod: &Pod) -> Option<&PodCondition> {
    pod.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "Ready")
}

/// `Ready` condition is `True`.
pub fn is_ready(pod: &Pod) -> bool {
    ready_condition(pod).is_some_and(|c| c.status == "True")
}

/// Phase `Succeeded` or `Failed`: the pod will never run again.
pub fn is_terminal(pod: &Pod) -> bool {
    matches!(pod.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Succeeded" | "Failed"))
}

/// `metadata.deletionTimestamp` is set.
pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// The pod's IPs (`status.podIPs`, else `status.podIP`).
pub fn ips(pod: &Pod) -> Vec<&str> {
    let Some(status) = pod.status.as_ref() else { return Vec::new() };
    let listed: Vec<&str> =
        status.pod_ips.iter().flatten().map(|p| p.ip.as_str()).filter(|ip| !ip.is_empty()).collect();
    if !listed.is_empty() {
        return listed;
    }
    status.pod_ip.as_deref().filter(|ip| !ip.is_empty()).into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodIP, PodStatus};

    fn pod_with(status: PodStatus) -> Pod {
        Pod { status: Some(status), ..Default::default() }
    }

    #[test]
    fn ready_needs_a_true_ready_condition() {
        let cond = |s: &str| PodCondition { type_: "Ready".into(), status: s.into(), ..Default::default() };
        assert!(is_ready(&pod_with(PodStatus { conditions: Some(vec![cond("True")]), ..Default::default() })));
        assert!(!is_ready(&pod_with(PodStatus { conditions: Some(vec![cond("False")]), ..Default::default() })));
        assert!(!is_ready(&Pod::default()));
    }

    #[test]
    fn ips_prefer_the_list_and_fall_back_to_pod_ip() {
        let listed = pod_with(PodStatus {
            pod_ip: Some("10.0.0.1".into()),
            pod_ips: Some(vec![PodIP { ip: "10.0.0.1".into() }, PodIP { ip: "fd00::1".into() }]),
            ..Default::default()
        });
        assert_eq!(ips(&listed), vec!["10.0.0.1", "fd00::1"]);
        let single = pod_with(PodStatus { pod_ip: Some("10.0.0.2".into()), ..Default::default() });
        assert_eq!(ips(&single), vec!["10.0.0.2"]);
        assert!(ips(&Pod::default()).is_empty());
    }

    #[test]
    fn terminal_phases_are_succeeded_and_failed() {
        let phase = |p: &str| pod_with(PodStatus { phase: Some(p.into()), ..Default::default() });
        assert!(is_terminal(&phase("Succeeded")));
        assert!(is_terminal(&phase("Failed")));
        assert!(!is_terminal(&phase("Running")));
    }
}
