//! The baseline checks (upstream's `policy/check_*.go` of level baseline), each with upstream's
//! reason and detail text. Pods are JSON as the API has them: `metadata` and `spec`.

use super::registry::{containers, containers_phrase, deny, go_quote, in_user_namespace, is_true, join_quote, name};
use super::registry::{pluralize, sc, CheckResult};
use serde_json::Value;
use std::collections::BTreeSet;

fn str_of(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

fn volumes(spec: &Value) -> impl Iterator<Item = &Value> {
    spec.get("volumes").and_then(Value::as_array).into_iter().flatten()
}

fn annotations(metadata: &Value) -> impl Iterator<Item = (&String, &str)> {
    metadata.get("annotations").and_then(Value::as_object).into_iter().flatten().map(|(k, v)| (k, str_of(v)))
}

/// AppArmor: profile types RuntimeDefault or Localhost only, in the fields and the deprecated
/// annotations (`runtime/default`, `localhost/*` or empty).
pub fn app_armor_profile(metadata: &Value, spec: &Value) -> CheckResult {
    let allowed = |p: &Value| matches!(p["type"].as_str(), Some("RuntimeDefault" | "Localhost"));
    let mut setters = Vec::new();
    let mut bad_values = BTreeSet::new();
    let pod = sc(spec, &["appArmorProfile"]);
    if !pod.is_null() && !allowed(pod) {
        setters.push("pod".to_string());
        bad_values.insert(str_of(&pod["type"]).to_string());
    }
    let mut bad_containers = Vec::new();
    for c in containers(spec) {
        let p = sc(c, &["appArmorProfile"]);
        if !p.is_null() && !allowed(p) {
            bad_containers.push(name(c));
            bad_values.insert(str_of(&p["type"]).to_string());
        }
    }
    if !bad_containers.is_empty() {
        setters.push(containers_phrase(&bad_containers));
    }
    let mut forbidden: Vec<String> = annotations(metadata)
        .filter(|(k, v)| {
            k.starts_with("container.apparmor.security.beta.kubernetes.io/")
                && !(v.is_empty() || *v == "runtime/default" || v.starts_with("localhost/"))
        })
        .map(|(k, v)| format!("{k}={}", go_quote(v)))
        .collect();
    let mut bad: Vec<String> = bad_values.into_iter().collect();
    if !forbidden.is_empty() {
        forbidden.sort();
        setters.push(pluralize("annotation", "annotations", forbidden.len()).to_string());
        bad.extend(forbidden);
    }
    if setters.is_empty() {
        return None;
    }
    deny(
        pluralize("forbidden AppArmor profile", "forbidden AppArmor profiles", bad.len()),
        format!("{} must not set AppArmor profile type to {}", setters.join(" and "), join_quote(&bad)),
    )
}

const DEFAULT_CAPABILITIES: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// Only the container runtime's default capabilities may be added.
pub fn capabilities_baseline(_: &Value, spec: &Value) -> CheckResult {
    let mut bad_containers = Vec::new();
    let mut caps = BTreeSet::new();
    for c in containers(spec) {
        let added = sc(c, &["capabilities", "add"]).as_array().into_iter().flatten().map(str_of);
        let mut valid = true;
        for cap in added.filter(|cap| !DEFAULT_CAPABILITIES.contains(cap)) {
            valid = false;
            caps.insert(cap);
        }
        if !valid {
            bad_containers.push(name(c));
        }
    }
    if bad_containers.is_empty() {
        return None;
    }
    let caps: Vec<&str> = caps.into_iter().collect();
    deny(
        "non-default capabilities",
        format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_phrase(&bad_containers),
            join_quote(&caps)
        ),
    )
}

/// No host network, PID or IPC namespace.
pub fn host_namespaces(_: &Value, spec: &Value) -> CheckResult {
    let set: Vec<String> = ["hostNetwork", "hostPID", "hostIPC"]
        .into_iter()
        .filter(|k| is_true(&spec[*k]))
        .map(|k| format!("{k}=true"))
        .collect();
    if set.is_empty() {
        return None;
    }
    deny("host namespaces", set.join(", "))
}

/// No hostPath volumes.
pub fn host_path_volumes(_: &Value, spec: &Value) -> CheckResult {
    let bad: Vec<&str> = volumes(spec).filter(|v| v.get("hostPath").is_some_and(|h| !h.is_null())).map(name).collect();
    if bad.is_empty() {
        return None;
    }
    deny("hostPath volumes", format!("{} {}", pluralize("volume", "volumes", bad.len()), join_quote(&bad)))
}

/// No host ports.
pub fn host_ports(_: &Value, spec: &Value) -> CheckResult {
    let mut bad_containers = Vec::new();
    let mut ports = BTreeSet::new();
    for c in containers(spec) {
        let mut valid = true;
        for p in c.get("ports").and_then(Value::as_array).into_iter().flatten() {
            let host_port = p["hostPort"].as_i64().unwrap_or(0);
            if host_port != 0 {
                valid = false;
                ports.insert(host_port.to_string());
            }
        }
        if !valid {
            bad_containers.push(name(c));
        }
    }
    if bad_containers.is_empty() {
        return None;
    }
    let ports: Vec<String> = ports.into_iter().collect();
    deny(
        "hostPort",
        format!(
            "{} {} {} {}",
            containers_phrase(&bad_containers),
            pluralize("uses", "use", bad_containers.len()),
            pluralize("hostPort", "hostPorts", ports.len()),
            ports.join(", ")
        ),
    )
}

/// Probes and lifecycle handlers may not name a host (v1.34+).
pub fn host_probes_and_host_lifecycle(_: &Value, spec: &Value) -> CheckResult {
    let mut bad_containers = BTreeSet::new();
    let mut hosts = BTreeSet::new();
    for c in containers(spec) {
        let handlers = [
            &c["livenessProbe"],
            &c["readinessProbe"],
            &c["startupProbe"],
            &c["lifecycle"]["postStart"],
            &c["lifecycle"]["preStop"],
        ];
        for h in handlers {
            for kind in ["httpGet", "tcpSocket"] {
                let host = str_of(&h[kind]["host"]);
                if !host.is_empty() {
                    bad_containers.insert(name(c));
                    hosts.insert(host);
                }
            }
        }
    }
    if bad_containers.is_empty() {
        return None;
    }
    let names: Vec<&str> = bad_containers.into_iter().collect();
    let hosts: Vec<&str> = hosts.into_iter().collect();
    deny(
        "probe or lifecycle host",
        format!(
            "{} {} {} {}",
            containers_phrase(&names),
            pluralize("uses", "use", names.len()),
            pluralize("probe or lifecycle host", "probe or lifecycle hosts", hosts.len()),
            join_quote(&hosts)
        ),
    )
}

/// No privileged containers.
pub fn privileged(_: &Value, spec: &Value) -> CheckResult {
    let bad: Vec<&str> = containers(spec).filter(|c| is_true(sc(c, &["privileged"]))).map(name).collect();
    if bad.is_empty() {
        return None;
    }
    deny("privileged", format!("{} must not set securityContext.privileged=true", containers_phrase(&bad)))
}

/// procMount unset or `Default` (also the restricted check from v1.35).
pub fn proc_mount(_: &Value, spec: &Value) -> CheckResult {
    let mut bad = Vec::new();
    let mut types = BTreeSet::new();
    for c in containers(spec) {
        let pm = sc(c, &["procMount"]);
        if !pm.is_null() && pm.as_str() != Some("Default") {
            bad.push(name(c));
            types.insert(str_of(pm));
        }
    }
    if bad.is_empty() {
        return None;
    }
    let types: Vec<&str> = types.into_iter().collect();
    deny(
        "procMount",
        format!("{} must not set securityContext.procMount to {}", containers_phrase(&bad), join_quote(&types)),
    )
}

/// v1.35+: any procMount in a user namespace (`hostUsers: false`).
pub fn proc_mount_1_35(metadata: &Value, spec: &Value) -> CheckResult {
    if in_user_namespace(spec) {
        return None;
    }
    proc_mount(metadata, spec)
}

const SELINUX_TYPES_1_0: &[&str] = &["", "container_t", "container_init_t", "container_kvm_t"];
const SELINUX_TYPES_1_31: &[&str] = &["", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"];

pub fn se_linux_options_1_0(metadata: &Value, spec: &Value) -> CheckResult {
    se_linux_options(metadata, spec, SELINUX_TYPES_1_0)
}

pub fn se_linux_options_1_31(metadata: &Value, spec: &Value) -> CheckResult {
    se_linux_options(metadata, spec, SELINUX_TYPES_1_31)
}

#[derive(Default)]
struct SeLinuxFindings<'a> {
    bad_types: BTreeSet<&'a str>,
    set_user: bool,
    set_role: bool,
}

impl<'a> SeLinuxFindings<'a> {
    /// Whether `opts` is allowed; records what is not.
    fn valid(&mut self, opts: &'a Value, allowed: &[&str]) -> bool {
        let mut valid = true;
        let t = str_of(&opts["type"]);
        if !allowed.contains(&t) {
            valid = false;
            self.bad_types.insert(t);
        }
        if !str_of(&opts["user"]).is_empty() {
            valid = false;
            self.set_user = true;
        }
        if !str_of(&opts["role"]).is_empty() {
            valid = false;
            self.set_role = true;
        }
        valid
    }
}

/// SELinux: only the container types, no user or role.
fn se_linux_options(_: &Value, spec: &Value, allowed: &[&str]) -> CheckResult {
    let mut f = SeLinuxFindings::default();
    let mut setters = Vec::new();
    let pod = sc(spec, &["seLinuxOptions"]);
    if !pod.is_null() && !f.valid(pod, allowed) {
        setters.push("pod".to_string());
    }
    let mut bad_containers = Vec::new();
    for c in containers(spec) {
        let opts = sc(c, &["seLinuxOptions"]);
        if !opts.is_null() && !f.valid(opts, allowed) {
            bad_containers.push(name(c));
        }
    }
    if !bad_containers.is_empty() {
        setters.push(containers_phrase(&bad_containers));
    }
    if setters.is_empty() {
        return None;
    }
    let mut data = Vec::new();
    if !f.bad_types.is_empty() {
        let types: Vec<&str> = f.bad_types.iter().copied().collect();
        data.push(format!("{} {}", pluralize("type", "types", types.len()), join_quote(&types)));
    }
    if f.set_user {
        data.push("user may not be set".to_string());
    }
    if f.set_role {
        data.push("role may not be set".to_string());
    }
    deny(
        "seLinuxOptions",
        format!("{} set forbidden securityContext.seLinuxOptions: {}", setters.join(" and "), data.join("; ")),
    )
}

/// RuntimeDefault or Localhost.
pub fn valid_seccomp(profile_type: &Value) -> bool {
    matches!(profile_type.as_str(), Some("RuntimeDefault" | "Localhost"))
}

const SECCOMP_POD_ANNOTATION: &str = "seccomp.security.alpha.kubernetes.io/pod";
const SECCOMP_CONTAINER_ANNOTATION: &str = "container.seccomp.security.alpha.kubernetes.io/";

/// v1.0–v1.18: the seccomp annotations name the runtime default or a localhost profile.
pub fn seccomp_annotations(metadata: &Value, spec: &Value) -> CheckResult {
    let valid = |v: &str| v == "runtime/default" || v == "docker/default" || v.starts_with("localhost/");
    let ann = &metadata["annotations"];
    let mut forbidden = BTreeSet::new();
    let mut check = |key: String| {
        if let Some(v) = ann.get(&key).map(str_of) {
            if !valid(v) {
                forbidden.insert(format!("{key}={}", go_quote(v)));
            }
        }
    };
    check(SECCOMP_POD_ANNOTATION.to_string());
    for c in containers(spec) {
        check(format!("{SECCOMP_CONTAINER_ANNOTATION}{}", name(c)));
    }
    if forbidden.is_empty() {
        return None;
    }
    let list: Vec<String> = forbidden.into_iter().collect();
    deny(
        "seccompProfile",
        format!("forbidden {} {}", pluralize("annotation", "annotations", list.len()), list.join(", ")),
    )
}

/// v1.19+: a seccomp profile, where set, is RuntimeDefault or Localhost.
pub fn seccomp_profile_baseline(_: &Value, spec: &Value) -> CheckResult {
    let mut setters = Vec::new();
    let mut bad_values = BTreeSet::new();
    let pod = sc(spec, &["seccompProfile"]);
    if !pod.is_null() && !valid_seccomp(&pod["type"]) {
        setters.push("pod".to_string());
        bad_values.insert(str_of(&pod["type"]));
    }
    let mut bad_containers = Vec::new();
    for c in containers(spec) {
        let p = sc(c, &["seccompProfile"]);
        if !p.is_null() && !valid_seccomp(&p["type"]) {
            bad_containers.push(name(c));
            bad_values.insert(str_of(&p["type"]));
        }
    }
    if !bad_containers.is_empty() {
        setters.push(containers_phrase(&bad_containers));
    }
    if setters.is_empty() {
        return None;
    }
    let values: Vec<&str> = bad_values.into_iter().collect();
    deny(
        "seccompProfile",
        format!(
            "{} must not set securityContext.seccompProfile.type to {}",
            setters.join(" and "),
            join_quote(&values)
        ),
    )
}

const SYSCTLS_1_0: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
];
const SYSCTLS_1_27: &[&str] = &["net.ipv4.ip_local_reserved_ports"];
const SYSCTLS_1_29: &[&str] = &[
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];
const SYSCTLS_1_32: &[&str] = &["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"];

pub fn sysctls_1_0(m: &Value, spec: &Value) -> CheckResult {
    sysctls(m, spec, &[SYSCTLS_1_0])
}
pub fn sysctls_1_27(m: &Value, spec: &Value) -> CheckResult {
    sysctls(m, spec, &[SYSCTLS_1_0, SYSCTLS_1_27])
}
pub fn sysctls_1_29(m: &Value, spec: &Value) -> CheckResult {
    sysctls(m, spec, &[SYSCTLS_1_0, SYSCTLS_1_27, SYSCTLS_1_29])
}
pub fn sysctls_1_32(m: &Value, spec: &Value) -> CheckResult {
    sysctls(m, spec, &[SYSCTLS_1_0, SYSCTLS_1_27, SYSCTLS_1_29, SYSCTLS_1_32])
}

/// Only the safe (namespaced, isolated) sysctls.
fn sysctls(_: &Value, spec: &Value, allowed: &[&[&str]]) -> CheckResult {
    let bad: Vec<&str> = sc(spec, &["sysctls"])
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| str_of(&s["name"]))
        .filter(|n| !allowed.iter().any(|set| set.contains(n)))
        .collect();
    if bad.is_empty() {
        return None;
    }
    deny("forbidden sysctls", bad.join(", "))
}

/// No Windows HostProcess pod or container.
pub fn windows_host_process(_: &Value, spec: &Value) -> CheckResult {
    let host_process = |holder: &Value| is_true(sc(holder, &["windowsOptions", "hostProcess"]));
    let bad: Vec<&str> = containers(spec).filter(|c| host_process(c)).map(name).collect();
    let mut setters = Vec::new();
    if host_process(spec) {
        setters.push("pod".to_string());
    }
    if !bad.is_empty() {
        setters.push(containers_phrase(&bad));
    }
    if setters.is_empty() {
        return None;
    }
    deny(
        "hostProcess",
        format!("{} must not set securityContext.windowsOptions.hostProcess=true", setters.join(" and ")),
    )
}

#[cfg(test)]
#[path = "baseline_tests.rs"]
mod tests;
