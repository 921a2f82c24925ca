//! One table per baseline check: allowed pods, and refused ones with upstream's exact text.

use super::*;
use crate::pod_security::registry::CheckFn;
use serde_json::json;

/// (what the case shows, metadata, spec, expected reason and detail).
type Case = (&'static str, Value, Value, Option<(&'static str, &'static str)>);

fn run(check: CheckFn, cases: Vec<Case>) {
    for (what, meta, spec, want) in cases {
        let got = check(&meta, &spec);
        let got = got.as_ref().map(|v| (v.reason.as_str(), v.detail.as_str()));
        assert_eq!(got, want, "{what}");
    }
}

fn c(name: &str, sc: Value) -> Value {
    json!({"name": name, "image": "i", "securityContext": sc})
}

#[test]
fn app_armor_profile_allows_runtime_default_and_localhost_only() {
    run(
        app_armor_profile,
        vec![
            ("unset", json!({}), json!({"containers": [c("a", json!({}))]}), None),
            (
                "allowed",
                json!({"annotations": {"container.apparmor.security.beta.kubernetes.io/a": "localhost/x"}}),
                json!({"securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}},
                       "containers": [c("a", json!({"appArmorProfile": {"type": "Localhost", "localhostProfile": "p"}}))]}),
                None,
            ),
            (
                "pod, containers and an annotation",
                json!({"annotations": {"container.apparmor.security.beta.kubernetes.io/b": "unconfined"}}),
                json!({"securityContext": {"appArmorProfile": {"type": "Unconfined"}},
                       "containers": [c("a", json!({"appArmorProfile": {"type": "Unconfined"}})), c("b", json!({"appArmorProfile": {"type": "Unconfined"}}))]}),
                Some((
                    "forbidden AppArmor profiles",
                    r#"pod and containers "a", "b" and annotation must not set AppArmor profile type to "Unconfined", "container.apparmor.security.beta.kubernetes.io/b="unconfined"""#,
                )),
            ),
            (
                "one container",
                json!({}),
                json!({"containers": [c("a", json!({"appArmorProfile": {"type": "Unconfined"}}))]}),
                Some((
                    "forbidden AppArmor profile",
                    r#"container "a" must not set AppArmor profile type to "Unconfined""#,
                )),
            ),
        ],
    );
}

#[test]
fn capabilities_baseline_allows_the_default_set_only() {
    run(
        capabilities_baseline,
        vec![
            (
                "defaults",
                json!({}),
                json!({"containers": [c("a", json!({"capabilities": {"add": ["CHOWN", "KILL"]}}))]}),
                None,
            ),
            (
                "non-default",
                json!({}),
                json!({"initContainers": [c("i", json!({"capabilities": {"add": ["SYS_ADMIN", "NET_RAW"]}}))],
                       "containers": [c("a", json!({"capabilities": {"add": ["NET_RAW"]}}))]}),
                Some((
                    "non-default capabilities",
                    r#"containers "i", "a" must not include "NET_RAW", "SYS_ADMIN" in securityContext.capabilities.add"#,
                )),
            ),
        ],
    );
}

#[test]
fn host_namespaces_are_refused() {
    run(
        host_namespaces,
        vec![
            ("false", json!({}), json!({"hostNetwork": false, "containers": []}), None),
            (
                "all three",
                json!({}),
                json!({"hostNetwork": true, "hostPID": true, "hostIPC": true}),
                Some(("host namespaces", "hostNetwork=true, hostPID=true, hostIPC=true")),
            ),
        ],
    );
}

#[test]
fn host_path_volumes_are_refused() {
    run(
        host_path_volumes,
        vec![
            ("emptyDir", json!({}), json!({"volumes": [{"name": "e", "emptyDir": {}}]}), None),
            (
                "two",
                json!({}),
                json!({"volumes": [{"name": "a", "hostPath": {"path": "/"}}, {"name": "b", "hostPath": {"path": "/x"}}]}),
                Some(("hostPath volumes", r#"volumes "a", "b""#)),
            ),
        ],
    );
}

#[test]
fn host_ports_are_refused() {
    run(
        host_ports,
        vec![
            (
                "container port only",
                json!({}),
                json!({"containers": [{"name": "a", "ports": [{"containerPort": 80}]}]}),
                None,
            ),
            (
                "one container, two ports (sorted as text)",
                json!({}),
                json!({"containers": [{"name": "a", "ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 1, "hostPort": 10000}]}]}),
                Some(("hostPort", r#"container "a" uses hostPorts 10000, 8080"#)),
            ),
            (
                "two containers",
                json!({}),
                json!({"containers": [{"name": "a", "ports": [{"hostPort": 80}]}, {"name": "b", "ports": [{"hostPort": 80}]}]}),
                Some(("hostPort", r#"containers "a", "b" use hostPort 80"#)),
            ),
        ],
    );
}

#[test]
fn probe_and_lifecycle_hosts_are_refused() {
    run(
        host_probes_and_host_lifecycle,
        vec![
            (
                "no host",
                json!({}),
                json!({"containers": [{"name": "a", "livenessProbe": {"httpGet": {"port": 80}}}]}),
                None,
            ),
            (
                "probe and lifecycle",
                json!({}),
                json!({"containers": [
                    {"name": "b", "readinessProbe": {"tcpSocket": {"host": "10.0.0.1", "port": 1}}},
                    {"name": "a", "lifecycle": {"preStop": {"httpGet": {"host": "example.com", "port": 80}}}}]}),
                Some((
                    "probe or lifecycle host",
                    r#"containers "a", "b" use probe or lifecycle hosts "10.0.0.1", "example.com""#,
                )),
            ),
        ],
    );
}

#[test]
fn privileged_containers_are_refused() {
    run(
        privileged,
        vec![
            ("false", json!({}), json!({"containers": [c("a", json!({"privileged": false}))]}), None),
            (
                "ephemeral too",
                json!({}),
                json!({"containers": [c("a", json!({"privileged": true}))], "ephemeralContainers": [c("e", json!({"privileged": true}))]}),
                Some(("privileged", r#"containers "a", "e" must not set securityContext.privileged=true"#)),
            ),
        ],
    );
}

#[test]
fn proc_mount_must_be_default_unless_in_a_user_namespace_from_1_35() {
    let unmasked = json!({"containers": [c("a", json!({"procMount": "Unmasked"}))]});
    let mut userns = unmasked.clone();
    userns["hostUsers"] = json!(false);
    let refused = Some(("procMount", r#"container "a" must not set securityContext.procMount to "Unmasked""#));
    run(
        proc_mount,
        vec![
            ("unmasked", json!({}), unmasked.clone(), refused),
            ("user namespace", json!({}), userns.clone(), refused),
        ],
    );
    run(
        proc_mount_1_35,
        vec![
            ("default", json!({}), json!({"containers": [c("a", json!({"procMount": "Default"}))]}), None),
            ("unmasked", json!({}), unmasked, refused),
            ("user namespace", json!({}), userns, None),
        ],
    );
}

#[test]
fn se_linux_options_limit_type_user_and_role() {
    let engine = json!({"securityContext": {"seLinuxOptions": {"type": "container_engine_t"}}});
    run(se_linux_options_1_31, vec![("container_engine_t from 1.31", json!({}), engine.clone(), None)]);
    run(
        se_linux_options_1_0,
        vec![
            (
                "allowed type",
                json!({}),
                json!({"containers": [c("a", json!({"seLinuxOptions": {"type": "container_t", "level": "s0"}}))]}),
                None,
            ),
            (
                "container_engine_t before 1.31",
                json!({}),
                engine,
                Some((
                    "seLinuxOptions",
                    r#"pod set forbidden securityContext.seLinuxOptions: type "container_engine_t""#,
                )),
            ),
            (
                "type, user and role",
                json!({}),
                json!({"securityContext": {"seLinuxOptions": {"user": "u"}},
                       "containers": [c("a", json!({"seLinuxOptions": {"type": "spc_t", "role": "r"}}))]}),
                Some((
                    "seLinuxOptions",
                    r#"pod and container "a" set forbidden securityContext.seLinuxOptions: type "spc_t"; user may not be set; role may not be set"#,
                )),
            ),
        ],
    );
}

#[test]
fn seccomp_baseline_refuses_unconfined() {
    run(
        seccomp_profile_baseline,
        vec![
            ("unset", json!({}), json!({"containers": [c("a", json!({}))]}), None),
            (
                "pod and container",
                json!({}),
                json!({"securityContext": {"seccompProfile": {"type": "Unconfined"}},
                       "containers": [c("a", json!({"seccompProfile": {"type": "Unconfined"}})), c("b", json!({"seccompProfile": {"type": "RuntimeDefault"}}))]}),
                Some((
                    "seccompProfile",
                    r#"pod and container "a" must not set securityContext.seccompProfile.type to "Unconfined""#,
                )),
            ),
        ],
    );
    run(
        seccomp_annotations,
        vec![
            (
                "runtime/default",
                json!({"annotations": {"seccomp.security.alpha.kubernetes.io/pod": "runtime/default"}}),
                json!({}),
                None,
            ),
            (
                "unconfined pod and container annotations",
                json!({"annotations": {"seccomp.security.alpha.kubernetes.io/pod": "unconfined",
                                       "container.seccomp.security.alpha.kubernetes.io/a": "unconfined"}}),
                json!({"containers": [c("a", json!({}))]}),
                Some((
                    "seccompProfile",
                    r#"forbidden annotations container.seccomp.security.alpha.kubernetes.io/a="unconfined", seccomp.security.alpha.kubernetes.io/pod="unconfined""#,
                )),
            ),
        ],
    );
}

#[test]
fn sysctls_allow_the_safe_set_of_each_version() {
    let rmem = json!({"securityContext": {"sysctls": [{"name": "net.ipv4.tcp_rmem", "value": "1"}, {"name": "kernel.msgmax", "value": "1"}]}});
    run(sysctls_1_32, vec![("1.32", json!({}), rmem.clone(), Some(("forbidden sysctls", "kernel.msgmax")))]);
    run(sysctls_1_29, vec![("1.29", json!({}), rmem, Some(("forbidden sysctls", "net.ipv4.tcp_rmem, kernel.msgmax")))]);
    let reserved =
        json!({"securityContext": {"sysctls": [{"name": "net.ipv4.ip_local_reserved_ports", "value": "1"}]}});
    run(sysctls_1_27, vec![("1.27", json!({}), reserved.clone(), None)]);
    run(
        sysctls_1_0,
        vec![("1.0", json!({}), reserved, Some(("forbidden sysctls", "net.ipv4.ip_local_reserved_ports")))],
    );
}

#[test]
fn windows_host_process_is_refused() {
    let hp = json!({"windowsOptions": {"hostProcess": true}});
    run(
        windows_host_process,
        vec![
            (
                "false",
                json!({}),
                json!({"containers": [c("a", json!({"windowsOptions": {"hostProcess": false}}))]}),
                None,
            ),
            (
                "pod and containers",
                json!({}),
                json!({"securityContext": hp.clone(), "containers": [c("a", hp.clone()), c("b", hp)]}),
                Some((
                    "hostProcess",
                    r#"pod and containers "a", "b" must not set securityContext.windowsOptions.hostProcess=true"#,
                )),
            ),
        ],
    );
}
