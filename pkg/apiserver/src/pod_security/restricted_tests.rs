//! One table per restricted check: allowed pods, and refused ones with upstream's exact text.

use super::*;
use crate::pod_security::registry::CheckFn;
use serde_json::json;

type Case = (&'static str, Value, Option<(&'static str, &'static str)>);

fn run(check: CheckFn, cases: Vec<Case>) {
    for (what, spec, want) in cases {
        let got = check(&json!({}), &spec);
        let got = got.as_ref().map(|v| (v.reason.as_str(), v.detail.as_str()));
        assert_eq!(got, want, "{what}");
    }
}

fn c(name: &str, sc: Value) -> Value {
    json!({"name": name, "image": "i", "securityContext": sc})
}

fn windows(mut spec: Value) -> Value {
    spec["os"] = json!({"name": "windows"});
    spec
}

#[test]
fn allow_privilege_escalation_must_be_false() {
    let unset = json!({"initContainers": [c("i", json!({}))], "containers": [c("a", json!({"allowPrivilegeEscalation": true})), c("b", json!({"allowPrivilegeEscalation": false}))]});
    let refused = Some((
        "allowPrivilegeEscalation != false",
        r#"containers "i", "a" must set securityContext.allowPrivilegeEscalation=false"#,
    ));
    run(
        allow_privilege_escalation_1_8,
        vec![("unset and true", unset.clone(), refused), ("windows", windows(unset.clone()), refused)],
    );
    run(
        allow_privilege_escalation_1_25,
        vec![
            ("false", json!({"containers": [c("a", json!({"allowPrivilegeEscalation": false}))]}), None),
            ("unset and true", unset.clone(), refused),
            ("windows from 1.25", windows(unset), None),
        ],
    );
}

#[test]
fn capabilities_must_drop_all_and_add_only_net_bind_service() {
    run(
        capabilities_restricted_1_25,
        vec![
            (
                "drop ALL, add NET_BIND_SERVICE",
                json!({"containers": [c("a", json!({"capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}))]}),
                None,
            ),
            ("windows", windows(json!({"containers": [c("a", json!({}))]})), None),
            (
                "no security context",
                json!({"containers": [{"name": "a"}]}),
                Some((
                    "unrestricted capabilities",
                    r#"container "a" must set securityContext.capabilities.drop=["ALL"]"#,
                )),
            ),
            (
                "both problems",
                json!({"containers": [c("a", json!({"capabilities": {"drop": ["NET_RAW"], "add": ["SYS_TIME", "CHOWN"]}})),
                                      c("b", json!({"capabilities": {"drop": ["ALL"], "add": ["CHOWN"]}}))]}),
                Some((
                    "unrestricted capabilities",
                    r#"container "a" must set securityContext.capabilities.drop=["ALL"]; containers "a", "b" must not include "CHOWN", "SYS_TIME" in securityContext.capabilities.add"#,
                )),
            ),
        ],
    );
}

#[test]
fn volumes_are_limited_to_the_restricted_types() {
    run(
        restricted_volumes,
        vec![
            (
                "allowed types",
                json!({"volumes": [{"name": "a", "configMap": {"name": "x"}}, {"name": "b", "projected": {"sources": []}},
                                   {"name": "c", "image": {"reference": "r"}}, {"name": "d", "persistentVolumeClaim": {"claimName": "x"}}]}),
                None,
            ),
            (
                "one",
                json!({"volumes": [{"name": "h", "hostPath": {"path": "/"}}]}),
                Some(("restricted volume types", r#"volume "h" uses restricted volume type "hostPath""#)),
            ),
            (
                "several",
                json!({"volumes": [{"name": "n", "nfs": {"server": "s", "path": "/"}}, {"name": "h", "hostPath": {"path": "/"}},
                                   {"name": "e", "emptyDir": {}}, {"name": "u"}]}),
                Some((
                    "restricted volume types",
                    r#"volumes "n", "h", "u" use restricted volume types "hostPath", "nfs", "unknown""#,
                )),
            ),
        ],
    );
}

#[test]
fn run_as_non_root_must_be_true() {
    let implicit = json!({"containers": [c("a", json!({})), c("b", json!({"runAsNonRoot": true}))]});
    let mut userns = implicit.clone();
    userns["hostUsers"] = json!(false);
    let implicit_refused =
        Some(("runAsNonRoot != true", r#"pod or container "a" must set securityContext.runAsNonRoot=true"#));
    run(run_as_non_root_1_0, vec![("user namespace before 1.35", userns.clone(), implicit_refused)]);
    run(
        run_as_non_root_1_35,
        vec![
            (
                "pod-level true",
                json!({"securityContext": {"runAsNonRoot": true}, "containers": [c("a", json!({}))]}),
                None,
            ),
            ("implicit", implicit, implicit_refused),
            ("user namespace", userns, None),
            (
                "explicit false wins over implicit",
                json!({"securityContext": {"runAsNonRoot": false}, "containers": [c("a", json!({"runAsNonRoot": false})), c("b", json!({}))]}),
                Some((
                    "runAsNonRoot != true",
                    r#"pod and container "a" must not set securityContext.runAsNonRoot=false"#,
                )),
            ),
        ],
    );
}

#[test]
fn run_as_user_must_not_be_zero() {
    let root = json!({"securityContext": {"runAsUser": 0}, "containers": [c("a", json!({"runAsUser": 0})), c("b", json!({"runAsUser": 1000}))]});
    let refused = Some(("runAsUser=0", r#"pod and container "a" must not set runAsUser=0"#));
    let mut userns = root.clone();
    userns["hostUsers"] = json!(false);
    run(
        run_as_user_1_23,
        vec![("root", root.clone(), refused), ("user namespace before 1.35", userns.clone(), refused)],
    );
    run(
        run_as_user_1_35,
        vec![
            ("non-zero", json!({"containers": [c("b", json!({"runAsUser": 1}))]}), None),
            ("root", root, refused),
            ("user namespace", userns, None),
        ],
    );
}

#[test]
fn seccomp_profile_must_be_runtime_default_or_localhost() {
    run(
        seccomp_profile_restricted_1_25,
        vec![
            (
                "pod-level",
                json!({"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}, "containers": [c("a", json!({}))]}),
                None,
            ),
            ("windows", windows(json!({"containers": [c("a", json!({}))]})), None),
            (
                "implicit",
                json!({"containers": [c("a", json!({})), c("b", json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "p"}}))]}),
                Some((
                    "seccompProfile",
                    r#"pod or container "a" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost""#,
                )),
            ),
            (
                "explicit",
                json!({"securityContext": {"seccompProfile": {"type": "Unconfined"}}, "containers": [c("a", json!({"seccompProfile": {"type": "Unconfined"}}))]}),
                Some((
                    "seccompProfile",
                    r#"pod and container "a" must not set securityContext.seccompProfile.type to "Unconfined""#,
                )),
            ),
        ],
    );
}
