//! The restricted checks (upstream's `policy/check_*.go` of level restricted), each with
//! upstream's reason and detail text.

use super::baseline::valid_seccomp;
use super::registry::{containers, containers_phrase, deny, in_user_namespace, is_windows, join_quote, name};
use super::registry::{pluralize, sc, CheckResult};
use serde_json::Value;
use std::collections::BTreeSet;

/// Every container sets `allowPrivilegeEscalation: false`.
pub fn allow_privilege_escalation_1_8(_: &Value, spec: &Value) -> CheckResult {
    let bad: Vec<&str> =
        containers(spec).filter(|c| sc(c, &["allowPrivilegeEscalation"]).as_bool() != Some(false)).map(name).collect();
    if bad.is_empty() {
        return None;
    }
    deny(
        "allowPrivilegeEscalation != false",
        format!("{} must set securityContext.allowPrivilegeEscalation=false", containers_phrase(&bad)),
    )
}

/// v1.25+: Windows pods (`spec.os.name: windows`) are exempt.
pub fn allow_privilege_escalation_1_25(metadata: &Value, spec: &Value) -> CheckResult {
    if is_windows(spec) {
        return None;
    }
    allow_privilege_escalation_1_8(metadata, spec)
}

/// Containers drop ALL and add at most NET_BIND_SERVICE.
pub fn capabilities_restricted_1_22(_: &Value, spec: &Value) -> CheckResult {
    let mut missing_drop_all = Vec::new();
    let mut adding_forbidden = Vec::new();
    let mut forbidden = BTreeSet::new();
    for c in containers(spec) {
        let caps = sc(c, &["capabilities"]);
        let list = |k: &str| caps[k].as_array().into_iter().flatten().filter_map(Value::as_str).collect::<Vec<_>>();
        if !list("drop").contains(&"ALL") {
            missing_drop_all.push(name(c));
        }
        let mut added_forbidden = false;
        for cap in list("add").into_iter().filter(|cap| *cap != "NET_BIND_SERVICE") {
            added_forbidden = true;
            forbidden.insert(cap);
        }
        if added_forbidden {
            adding_forbidden.push(name(c));
        }
    }
    let mut details = Vec::new();
    if !missing_drop_all.is_empty() {
        details.push(format!(
            r#"{} must set securityContext.capabilities.drop=["ALL"]"#,
            containers_phrase(&missing_drop_all)
        ));
    }
    if !adding_forbidden.is_empty() {
        let caps: Vec<&str> = forbidden.into_iter().collect();
        details.push(format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_phrase(&adding_forbidden),
            join_quote(&caps)
        ));
    }
    if details.is_empty() {
        return None;
    }
    deny("unrestricted capabilities", details.join("; "))
}

/// v1.25+: Windows pods are exempt.
pub fn capabilities_restricted_1_25(metadata: &Value, spec: &Value) -> CheckResult {
    if is_windows(spec) {
        return None;
    }
    capabilities_restricted_1_22(metadata, spec)
}

const ALLOWED_VOLUMES: &[&str] = &[
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "image",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

/// The restricted volume types upstream names, in the order it tries them.
const RESTRICTED_VOLUMES: &[&str] = &[
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "nfs",
    "iscsi",
    "glusterfs",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "fc",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "storageos",
];

/// Only configMap, csi, downwardAPI, emptyDir, ephemeral, image, persistentVolumeClaim,
/// projected and secret volumes (this check replaces baseline's hostPath one).
pub fn restricted_volumes(_: &Value, spec: &Value) -> CheckResult {
    let has = |v: &Value, k: &str| v.get(k).is_some_and(|s| !s.is_null());
    let mut bad = Vec::new();
    let mut types = BTreeSet::new();
    for v in spec.get("volumes").and_then(Value::as_array).into_iter().flatten() {
        if ALLOWED_VOLUMES.iter().any(|k| has(v, k)) {
            continue;
        }
        bad.push(name(v));
        types.insert(RESTRICTED_VOLUMES.iter().copied().find(|k| has(v, k)).unwrap_or("unknown"));
    }
    if bad.is_empty() {
        return None;
    }
    let types: Vec<&str> = types.into_iter().collect();
    deny(
        "restricted volume types",
        format!(
            "{} {} {} {} {}",
            pluralize("volume", "volumes", bad.len()),
            join_quote(&bad),
            pluralize("uses", "use", bad.len()),
            pluralize("restricted volume type", "restricted volume types", types.len()),
            join_quote(&types)
        ),
    )
}

/// The pod, or else every container, sets `runAsNonRoot: true`; none sets false.
pub fn run_as_non_root_1_0(_: &Value, spec: &Value) -> CheckResult {
    let mut setters = Vec::new();
    let pod = sc(spec, &["runAsNonRoot"]).as_bool();
    if pod == Some(false) {
        setters.push("pod".to_string());
    }
    let pod_non_root = pod == Some(true);
    let (mut explicit, mut implicit) = (Vec::new(), Vec::new());
    for c in containers(spec) {
        match sc(c, &["runAsNonRoot"]).as_bool() {
            Some(false) => explicit.push(name(c)),
            Some(true) => {}
            None if !pod_non_root => implicit.push(name(c)),
            None => {}
        }
    }
    if !explicit.is_empty() {
        setters.push(containers_phrase(&explicit));
    }
    if !setters.is_empty() {
        return deny(
            "runAsNonRoot != true",
            format!("{} must not set securityContext.runAsNonRoot=false", setters.join(" and ")),
        );
    }
    if !implicit.is_empty() {
        return deny(
            "runAsNonRoot != true",
            format!("pod or {} must set securityContext.runAsNonRoot=true", containers_phrase(&implicit)),
        );
    }
    None
}

/// v1.35+: pods in a user namespace (`hostUsers: false`) may run as root.
pub fn run_as_non_root_1_35(metadata: &Value, spec: &Value) -> CheckResult {
    if in_user_namespace(spec) {
        return None;
    }
    run_as_non_root_1_0(metadata, spec)
}

/// Neither the pod nor a container sets `runAsUser: 0`.
pub fn run_as_user_1_23(_: &Value, spec: &Value) -> CheckResult {
    let root = |holder: &Value| sc(holder, &["runAsUser"]).as_i64() == Some(0);
    let mut setters = Vec::new();
    if root(spec) {
        setters.push("pod".to_string());
    }
    let bad: Vec<&str> = containers(spec).filter(|c| root(c)).map(name).collect();
    if !bad.is_empty() {
        setters.push(containers_phrase(&bad));
    }
    if setters.is_empty() {
        return None;
    }
    deny("runAsUser=0", format!("{} must not set runAsUser=0", setters.join(" and ")))
}

/// v1.35+: pods in a user namespace may run as UID 0.
pub fn run_as_user_1_35(metadata: &Value, spec: &Value) -> CheckResult {
    if in_user_namespace(spec) {
        return None;
    }
    run_as_user_1_23(metadata, spec)
}

/// A seccomp profile of RuntimeDefault or Localhost on the pod or on every container.
pub fn seccomp_profile_restricted_1_19(_: &Value, spec: &Value) -> CheckResult {
    let mut setters = Vec::new();
    let mut bad_values = BTreeSet::new();
    let pod = sc(spec, &["seccompProfile"]);
    let mut pod_set = false;
    if !pod.is_null() {
        if valid_seccomp(&pod["type"]) {
            pod_set = true;
        } else {
            setters.push("pod".to_string());
            bad_values.insert(pod["type"].as_str().unwrap_or(""));
        }
    }
    let (mut explicit, mut implicit) = (Vec::new(), Vec::new());
    for c in containers(spec) {
        let p = sc(c, &["seccompProfile"]);
        if !p.is_null() {
            if !valid_seccomp(&p["type"]) {
                explicit.push(name(c));
                bad_values.insert(p["type"].as_str().unwrap_or(""));
            }
        } else if !pod_set {
            implicit.push(name(c));
        }
    }
    if !explicit.is_empty() {
        setters.push(containers_phrase(&explicit));
    }
    if !setters.is_empty() {
        let values: Vec<&str> = bad_values.into_iter().collect();
        return deny(
            "seccompProfile",
            format!(
                "{} must not set securityContext.seccompProfile.type to {}",
                setters.join(" and "),
                join_quote(&values)
            ),
        );
    }
    if !implicit.is_empty() {
        return deny(
            "seccompProfile",
            format!(
                r#"pod or {} must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost""#,
                containers_phrase(&implicit)
            ),
        );
    }
    None
}

/// v1.25+: Windows pods are exempt.
pub fn seccomp_profile_restricted_1_25(metadata: &Value, spec: &Value) -> CheckResult {
    if is_windows(spec) {
        return None;
    }
    seccomp_profile_restricted_1_19(metadata, spec)
}

#[cfg(test)]
#[path = "restricted_tests.rs"]
mod tests;
