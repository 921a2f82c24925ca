//! The versioned checks of the Pod Security Standards and their evaluation for a level and
//! version, as upstream's `policy/registry.go`: a check applies from its `MinimumVersion`, a
//! restricted check may override a baseline one, and checks run baseline first, each group in
//! the lexical order of the checks' IDs. `latest` (or any newer version) is the newest policy.

use super::policy::{Level, LevelVersion, Version};
use super::{baseline as b, restricted as r};
use serde_json::Value;
use std::collections::BTreeSet;

/// Why a pod fails one check: `privileged` and `container "c" must not set …`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub reason: String,
    pub detail: String,
}

/// `None`: allowed.
pub type CheckResult = Option<Violation>;

/// A check of a pod's metadata and spec (both JSON as the API has them).
pub type CheckFn = fn(&Value, &Value) -> CheckResult;

pub struct VersionedCheck {
    /// Minor version of v1 from which this implementation applies.
    pub minimum: u32,
    pub check: CheckFn,
    /// Baseline checks this (restricted) one replaces.
    pub overrides: &'static [&'static str],
}

pub struct Check {
    pub id: &'static str,
    pub level: Level,
    pub versions: &'static [VersionedCheck],
}

const fn v(minimum: u32, check: CheckFn) -> VersionedCheck {
    VersionedCheck { minimum, check, overrides: &[] }
}

const fn o(minimum: u32, check: CheckFn, overrides: &'static [&'static str]) -> VersionedCheck {
    VersionedCheck { minimum, check, overrides }
}

/// Every check of v1.35's policy, baseline then restricted, each group sorted by ID (Go's byte
/// order): the order their violations are listed in.
pub const CHECKS: &[Check] = &[
    Check { id: "appArmorProfile", level: Level::Baseline, versions: &[v(0, b::app_armor_profile)] },
    Check { id: "capabilities_baseline", level: Level::Baseline, versions: &[v(0, b::capabilities_baseline)] },
    Check { id: "hostNamespaces", level: Level::Baseline, versions: &[v(0, b::host_namespaces)] },
    Check { id: "hostPathVolumes", level: Level::Baseline, versions: &[v(0, b::host_path_volumes)] },
    Check { id: "hostPorts", level: Level::Baseline, versions: &[v(0, b::host_ports)] },
    Check {
        id: "hostProbesAndHostLifecycle",
        level: Level::Baseline,
        versions: &[v(34, b::host_probes_and_host_lifecycle)],
    },
    Check { id: "privileged", level: Level::Baseline, versions: &[v(0, b::privileged)] },
    Check { id: "procMount", level: Level::Baseline, versions: &[v(0, b::proc_mount), v(35, b::proc_mount_1_35)] },
    Check {
        id: "seLinuxOptions",
        level: Level::Baseline,
        versions: &[v(0, b::se_linux_options_1_0), v(31, b::se_linux_options_1_31)],
    },
    Check {
        id: "seccompProfile_baseline",
        level: Level::Baseline,
        versions: &[v(0, b::seccomp_annotations), v(19, b::seccomp_profile_baseline)],
    },
    Check {
        id: "sysctls",
        level: Level::Baseline,
        versions: &[v(0, b::sysctls_1_0), v(27, b::sysctls_1_27), v(29, b::sysctls_1_29), v(32, b::sysctls_1_32)],
    },
    Check { id: "windowsHostProcess", level: Level::Baseline, versions: &[v(0, b::windows_host_process)] },
    Check {
        id: "allowPrivilegeEscalation",
        level: Level::Restricted,
        versions: &[v(8, r::allow_privilege_escalation_1_8), v(25, r::allow_privilege_escalation_1_25)],
    },
    Check {
        id: "capabilities_restricted",
        level: Level::Restricted,
        versions: &[
            o(22, r::capabilities_restricted_1_22, &["capabilities_baseline"]),
            o(25, r::capabilities_restricted_1_25, &["capabilities_baseline"]),
        ],
    },
    Check { id: "procMount_restricted", level: Level::Restricted, versions: &[o(35, b::proc_mount, &["procMount"])] },
    Check {
        id: "restrictedVolumes",
        level: Level::Restricted,
        versions: &[o(0, r::restricted_volumes, &["hostPathVolumes"])],
    },
    Check {
        id: "runAsNonRoot",
        level: Level::Restricted,
        versions: &[v(0, r::run_as_non_root_1_0), v(35, r::run_as_non_root_1_35)],
    },
    Check {
        id: "runAsUser",
        level: Level::Restricted,
        versions: &[v(23, r::run_as_user_1_23), v(35, r::run_as_user_1_35)],
    },
    Check {
        id: "seccompProfile_restricted",
        level: Level::Restricted,
        versions: &[
            o(19, r::seccomp_profile_restricted_1_19, &["seccompProfile_baseline"]),
            o(25, r::seccomp_profile_restricted_1_25, &["seccompProfile_baseline"]),
        ],
    },
];

/// The newest minor version any check names: `latest` and newer versions evaluate as this one.
fn max_minor() -> u32 {
    CHECKS.iter().flat_map(|c| c.versions.iter().map(|v| v.minimum)).max().unwrap_or(0)
}

/// The implementation of `check` in force at minor version `minor`, if any.
fn at(check: &Check, minor: u32) -> Option<&VersionedCheck> {
    check.versions.iter().rev().find(|v| v.minimum <= minor)
}

/// The checks of `lv`'s level and version with their IDs, in upstream's order (none for
/// privileged).
pub fn checks_for(lv: LevelVersion) -> Vec<(&'static str, CheckFn)> {
    if lv.level == Level::Privileged {
        return Vec::new();
    }
    let max = max_minor();
    let minor = match lv.version {
        Version::V1(m) if m < max => m,
        _ => max,
    };
    let restricted = lv.level == Level::Restricted;
    let overridden: BTreeSet<&str> = CHECKS
        .iter()
        .filter(|c| restricted && c.level == Level::Restricted)
        .filter_map(|c| at(c, minor))
        .flat_map(|v| v.overrides.iter().copied())
        .collect();
    CHECKS
        .iter()
        .filter(|c| c.level == Level::Baseline || restricted)
        .filter(|c| !overridden.contains(c.id))
        .filter_map(|c| at(c, minor).map(|v| (c.id, v.check)))
        .collect()
}

/// The checks of one level and version, as [`checks_for`] lists them, shared.
pub type Checks = std::sync::Arc<[(&'static str, CheckFn)]>;

/// The violations of one pod against `lv`, in order.
#[cfg(test)]
pub fn evaluate(lv: LevelVersion, metadata: &Value, spec: &Value) -> Vec<Violation> {
    run(&checks_for(lv), metadata, spec)
}

/// The violations of one pod against `checks`, in order.
pub fn run(checks: &[(&'static str, CheckFn)], metadata: &Value, spec: &Value) -> Vec<Violation> {
    checks.iter().filter_map(|(_, check)| check(metadata, spec)).collect()
}

/// `privileged, allowPrivilegeEscalation != false`: the reasons only.
pub fn forbidden_reason(violations: &[Violation]) -> String {
    violations.iter().map(|v| v.reason.as_str()).collect::<Vec<_>>().join(", ")
}

/// `privileged (container "c" must not …), allowPrivilegeEscalation != false (…)`.
pub fn forbidden_detail(violations: &[Violation]) -> String {
    let parts: Vec<String> = violations
        .iter()
        .map(|v| if v.detail.is_empty() { v.reason.clone() } else { format!("{} ({})", v.reason, v.detail) })
        .collect();
    parts.join(", ")
}

// Helpers shared by the checks (upstream's `helpers.go` and `visitor.go`).

/// `"a", "b"`.
pub fn join_quote<S: AsRef<str>>(items: &[S]) -> String {
    if items.is_empty() {
        return String::new();
    }
    let inner: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
    format!("\"{}\"", inner.join("\", \""))
}

pub fn pluralize<'a>(singular: &'a str, plural: &'a str, count: usize) -> &'a str {
    if count == 1 {
        singular
    } else {
        plural
    }
}

/// `container "c"` / `containers "a", "b"`.
pub fn containers_phrase<S: AsRef<str>>(names: &[S]) -> String {
    format!("{} {}", pluralize("container", "containers", names.len()), join_quote(names))
}

/// Go's `%q` for the strings the checks quote (JSON quoting agrees on printable text).
pub fn go_quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

/// Init containers, containers, then ephemeral containers.
pub fn containers(spec: &Value) -> impl Iterator<Item = &Value> {
    ["initContainers", "containers", "ephemeralContainers"]
        .into_iter()
        .flat_map(move |k| spec.get(k).and_then(Value::as_array).into_iter().flatten())
}

pub fn name(container: &Value) -> &str {
    container.get("name").and_then(Value::as_str).unwrap_or("")
}

/// The pod (`spec.securityContext`) or container security context field at `path`.
pub fn sc<'a>(holder: &'a Value, path: &[&str]) -> &'a Value {
    let mut v = &holder["securityContext"];
    for p in path {
        v = &v[*p];
    }
    v
}

pub fn is_true(v: &Value) -> bool {
    v.as_bool() == Some(true)
}

/// `hostUsers: false`: the pod runs in a user namespace.
pub fn in_user_namespace(spec: &Value) -> bool {
    spec.get("hostUsers").and_then(Value::as_bool) == Some(false)
}

pub fn is_windows(spec: &Value) -> bool {
    spec["os"]["name"].as_str() == Some("windows")
}

pub fn deny(reason: &str, detail: impl Into<String>) -> CheckResult {
    Some(Violation { reason: reason.to_string(), detail: detail.into() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ids(level: Level, version: Version) -> Vec<&'static str> {
        checks_for(LevelVersion { level, version }).into_iter().map(|(id, _)| id).collect()
    }

    #[test]
    fn checks_are_listed_baseline_first_each_group_in_id_order() {
        let (base, restr): (Vec<&Check>, Vec<&Check>) = CHECKS.iter().partition(|c| c.level == Level::Baseline);
        assert_eq!(base.len() + restr.len(), CHECKS.len());
        assert!(CHECKS.iter().position(|c| c.level == Level::Restricted) == Some(base.len()));
        for group in [base, restr] {
            assert!(group.windows(2).all(|w| w[0].id < w[1].id), "not sorted");
        }
        assert_eq!(max_minor(), 35);
    }

    #[test]
    fn restricted_latest_runs_unoverridden_baseline_checks_then_restricted_ones() {
        let got = ids(Level::Restricted, Version::Latest);
        assert!(!got.contains(&"capabilities_baseline") && !got.contains(&"hostPathVolumes"));
        assert!(!got.contains(&"seccompProfile_baseline") && !got.contains(&"procMount"));
        assert!(got.contains(&"procMount_restricted"));
        assert_eq!(got.first(), Some(&"appArmorProfile"));
        assert_eq!(got.last(), Some(&"seccompProfile_restricted"));
        assert_eq!(got.len(), 15);
        assert_eq!(ids(Level::Baseline, Version::Latest).len(), 12);
        assert!(ids(Level::Privileged, Version::Latest).is_empty());
    }

    #[test]
    fn old_versions_run_the_checks_of_their_time() {
        let v1_0 = ids(Level::Restricted, Version::V1(0));
        assert!(!v1_0.contains(&"allowPrivilegeEscalation") && !v1_0.contains(&"runAsUser"));
        assert!(v1_0.contains(&"capabilities_baseline") && v1_0.contains(&"procMount"));
        assert!(!ids(Level::Restricted, Version::V1(34)).contains(&"procMount_restricted"));
        assert!(!ids(Level::Baseline, Version::V1(33)).contains(&"hostProbesAndHostLifecycle"));
        assert_eq!(ids(Level::Baseline, Version::V1(99)), ids(Level::Baseline, Version::Latest));
    }

    #[test]
    fn a_privileged_pod_violates_restricted_with_upstreams_message() {
        let spec = json!({"containers": [{"name": "c", "image": "busybox", "securityContext": {"privileged": true}}]});
        let v = evaluate(LevelVersion { level: Level::Restricted, version: Version::Latest }, &json!({}), &spec);
        assert_eq!(
            forbidden_detail(&v),
            concat!(
                r#"privileged (container "c" must not set securityContext.privileged=true), "#,
                r#"allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), "#,
                r#"unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), "#,
                r#"runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), "#,
                r#"seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#,
            )
        );
        assert_eq!(
            forbidden_reason(&v),
            "privileged, allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile"
        );
    }
}
