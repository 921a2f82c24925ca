//! PodSecurity admission against a real `k1s server --disable-agent`, driven with stock
//! kubectl: namespaces labelled `pod-security.kubernetes.io/{enforce,warn}` refuse or warn
//! with upstream's messages, workloads only warn, tightening a namespace's enforce level warns
//! about the pods already there, invalid labels are refused, `kube-system` is exempt, and
//! `--pod-security-admission-config-file` sets the defaults and exemptions.

mod common;

use common::Server;
use std::process::Output;

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn namespace(s: &Server, name: &str, labels: &[&str]) {
    s.ok(&["create", "namespace", name]);
    if !labels.is_empty() {
        let mut args = vec!["label", "namespace", name];
        args.extend(labels);
        s.ok(&args);
    }
    // No controllers run: the namespace's default ServiceAccount is made by hand.
    s.ok(&["create", "serviceaccount", "default", "-n", name]);
}

fn privileged_pod(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  containers:\n  - name: c\n    image: busybox\n    securityContext: {{privileged: true}}\n"
    )
}

const RESTRICTED_POD: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: ok}\nspec:
  securityContext: {runAsNonRoot: true, runAsUser: 1000, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: c
    image: busybox
    securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}\n";

/// Everything `restricted:latest` finds wrong with [`privileged_pod`].
const PRIVILEGED_VS_RESTRICTED: &str = concat!(
    r#"privileged (container "c" must not set securityContext.privileged=true), "#,
    r#"allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), "#,
    r#"unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), "#,
    r#"runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), "#,
    r#"seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#,
);

#[test]
fn restricted_namespaces_refuse_privileged_pods_and_workloads_only_warn() {
    let s = Server::start();
    namespace(&s, "locked", &["pod-security.kubernetes.io/enforce=restricted"]);

    // A privileged pod is refused with upstream's full message, and nothing is stored.
    let out = s.kubectl_stdin(&["create", "-n", "locked", "-f", "-"], &privileged_pod("p"));
    assert!(!out.status.success());
    let want = format!(
        r#"Error from server (Forbidden): error when creating "STDIN": pods "p" is forbidden: violates PodSecurity "restricted:latest": {PRIVILEGED_VS_RESTRICTED}"#
    );
    assert_eq!(stderr(&out).trim(), want);
    let listed = s.kubectl(&["get", "pods", "-n", "locked"]);
    assert!(String::from_utf8_lossy(&listed.stdout).trim().is_empty());
    assert!(stderr(&listed).contains("No resources found in locked namespace."), "{}", stderr(&listed));

    // A pod that meets the restricted standard is admitted, without a warning.
    let out = s.kubectl_stdin(&["create", "-n", "locked", "-f", "-"], RESTRICTED_POD);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("Warning"), "{}", stderr(&out));
    s.ok(&["get", "pod", "ok", "-n", "locked"]);

    // An ephemeral container is checked too (kubectl debug's subresource).
    let debug = s.write_file(
        "debug.json",
        r#"{"spec": {"ephemeralContainers": [{"name": "dbg", "image": "busybox", "terminationMessagePolicy": "File"}]}}"#,
    );
    let (code, status) = s.curl(
        "PATCH",
        "/api/v1/namespaces/locked/pods/ok/ephemeralcontainers",
        Some("application/strategic-merge-patch+json"),
        Some(&debug),
    );
    assert_eq!((code, status["reason"].as_str()), (403, Some("Forbidden")), "{status}");
    let msg = status["message"].as_str().unwrap_or("");
    assert!(msg.starts_with(r#"pods "ok" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "dbg" must set"#), "{msg}");

    // A Deployment whose template violates the level is created, with upstream's warning.
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  selector: {matchLabels: {app: d}}\n  template:\n    metadata: {labels: {app: d}}\n    spec:\n      containers:\n      - name: c\n        image: busybox\n        securityContext: {privileged: true}\n";
    let out = s.kubectl_stdin(&["create", "-n", "locked", "-f", "-"], deployment);
    assert!(out.status.success(), "{}", stderr(&out));
    let want = format!(r#"Warning: would violate PodSecurity "restricted:latest": {PRIVILEGED_VS_RESTRICTED}"#);
    assert!(stderr(&out).contains(&want), "{}", stderr(&out));
    s.ok(&["get", "deployment", "d", "-n", "locked"]);
}

#[test]
fn warn_labels_warn_and_tightening_enforce_names_the_violating_pods() {
    let s = Server::start();
    namespace(&s, "warned", &["pod-security.kubernetes.io/warn=baseline"]);

    // warn=baseline: the pod is created, with a warning.
    let out = s.kubectl_stdin(&["create", "-n", "warned", "-f", "-"], &privileged_pod("p"));
    assert!(out.status.success(), "{}", stderr(&out));
    let want = r#"Warning: would violate PodSecurity "baseline:latest": privileged (container "c" must not set securityContext.privileged=true)"#;
    assert!(stderr(&out).contains(want), "{}", stderr(&out));
    s.ok(&["get", "pod", "p", "-n", "warned"]);

    // Labelling the namespace enforce=restricted succeeds and warns about pod p.
    let out = s.kubectl(&["label", "namespace", "warned", "pod-security.kubernetes.io/enforce=restricted"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(r#"Warning: existing pods in namespace "warned" violate the new PodSecurity enforce level "restricted:latest""#),
        "{err}"
    );
    assert!(
        err.contains("Warning: p: privileged, allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile"),
        "{err}"
    );
    // The pod stays; new ones like it are now refused.
    s.ok(&["get", "pod", "p", "-n", "warned"]);
    let out = s.kubectl_stdin(&["create", "-n", "warned", "-f", "-"], &privileged_pod("q"));
    assert!(
        stderr(&out).contains(r#"pods "q" is forbidden: violates PodSecurity "restricted:latest""#),
        "{}",
        stderr(&out)
    );

    // An invalid level is refused as upstream does (422, the label as the field).
    let out = s.kubectl(&["label", "namespace", "warned", "--overwrite", "pod-security.kubernetes.io/enforce=strict"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(r#"The Namespace "warned" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, baseline, restricted"#),
        "{}",
        stderr(&out)
    );
}

#[test]
fn kube_system_is_exempt_by_default() {
    let s = Server::start();
    let out = s.kubectl(&["label", "namespace", "kube-system", "pod-security.kubernetes.io/enforce=restricted"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(r#"Warning: namespace "kube-system" is exempt from Pod Security, and the policy (enforce=restricted:latest) will be ignored"#),
        "{}",
        stderr(&out)
    );
    let _ = s.kubectl(&["create", "serviceaccount", "default", "-n", "kube-system"]);
    let out = s.kubectl_stdin(&["create", "-n", "kube-system", "-f", "-"], &privileged_pod("p"));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("Warning"), "{}", stderr(&out));
}

#[test]
fn the_config_file_sets_defaults_and_exemptions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("psa.yaml");
    std::fs::write(
        &config,
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: PodSecurity\n  configuration:\n    apiVersion: pod-security.admission.config.k8s.io/v1\n    kind: PodSecurityConfiguration\n    defaults: {enforce: baseline}\n    exemptions: {namespaces: [tools]}\n",
    )
    .expect("write config");
    let path = config.to_string_lossy().into_owned();
    let s = Server::start_with(&["--pod-security-admission-config-file", &path]);
    namespace(&s, "plain", &[]);
    namespace(&s, "tools", &[]);
    let out = s.kubectl_stdin(&["create", "-n", "plain", "-f", "-"], &privileged_pod("p"));
    assert!(
        stderr(&out).contains(r#"pods "p" is forbidden: violates PodSecurity "baseline:latest": privileged (container "c" must not set securityContext.privileged=true)"#),
        "{}",
        stderr(&out)
    );
    let out = s.kubectl_stdin(&["create", "-n", "tools", "-f", "-"], &privileged_pod("p"));
    assert!(out.status.success(), "{}", stderr(&out));
}

/// The Deployment only warns; the pods its ReplicaSet then creates are refused, and the
/// controller reports the refusal as a FailedCreate event.
#[test]
fn the_pods_of_a_violating_workload_are_refused() {
    let s = Server::start_controllers();
    s.ok(&["create", "namespace", "locked"]);
    s.ok(&["label", "namespace", "locked", "pod-security.kubernetes.io/enforce=baseline"]);
    let out = s.kubectl(&["create", "deployment", "d", "-n", "locked", "--image=busybox", "--", "sleep", "1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Without a securityContext the template meets baseline: make it privileged.
    let patch =
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"busybox","securityContext":{"privileged":true}}]}}}}"#;
    let out = s.kubectl(&["patch", "deployment", "d", "-n", "locked", "-p", patch]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains(r#"Warning: would violate PodSecurity "baseline:latest": privileged (container "busybox" must not set securityContext.privileged=true)"#), "{}", stderr(&out));
    let event = common::eventually(std::time::Duration::from_secs(60), "a FailedCreate event", || {
        let events = s.ok(&[
            "get",
            "events",
            "-n",
            "locked",
            "--field-selector",
            "reason=FailedCreate",
            "-o",
            "jsonpath={.items[*].message}",
        ]);
        events.contains("privileged").then_some(events)
    });
    assert!(event.contains(r#"is forbidden: violates PodSecurity "baseline:latest": privileged (container "busybox" must not set securityContext.privileged=true)"#), "{event}");
    // Only the first ReplicaSet's compliant pod exists: none is privileged.
    let privileged = s.ok(&["get", "pods", "-n", "locked", "-o", "jsonpath={..securityContext.privileged}"]);
    assert!(privileged.trim().is_empty(), "{privileged}");
}
