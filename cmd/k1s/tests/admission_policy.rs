//! ValidatingAdmissionPolicies against a real `k1s server --disable-agent`, driven with stock
//! kubectl: a binding's Deny refuses with upstream's message and writes nothing, Warn admits
//! with a warning kubectl prints, a ConfigMap named by `paramKind`/`paramRef` sets the limit
//! (edited without touching the policy), match conditions, variables and failure policies
//! behave as upstream's, the `authorizer` variable asks RBAC, and the policy's status shows the
//! generation it enforces.

mod common;

use common::{eventually, Server};
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(15);

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn policy(name: &str, spec: Value) -> String {
    let mut spec = spec;
    if spec.get("matchConstraints").is_none() {
        spec["matchConstraints"] = json!({"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                                          "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]});
    }
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
           "metadata": {"name": name}, "spec": spec})
    .to_string()
}

fn binding(name: &str, policy: &str, spec: Value) -> String {
    let mut spec = spec;
    spec["policyName"] = json!(policy);
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
           "metadata": {"name": name}, "spec": spec})
    .to_string()
}

fn deployment(name: &str, replicas: i64) -> String {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": {"app": name}},
           "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                    "template": {"metadata": {"labels": {"app": name}},
                                 "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})
    .to_string()
}

fn create(s: &Server, obj: &str) -> std::process::Output {
    s.kubectl_stdin(&["create", "-f", "-"], obj)
}

/// Creates `name` (dry-run) until the policies in force refuse it: they apply once the
/// server has read them.
fn wait_refused(s: &Server, obj: &str, what: &str) -> std::process::Output {
    eventually(WAIT, what, || {
        let out = s.kubectl_stdin(&["create", "--dry-run=server", "-f", "-"], obj);
        (!out.status.success()).then_some(out)
    })
}

#[test]
fn a_deny_binding_refuses_six_replicas_and_a_warn_binding_only_warns() {
    let s = Server::start();
    s.ok_stdin(
        &["apply", "-f", "-"],
        &policy(
            "replica-limit",
            json!({"validations": [{"expression": "object.spec.replicas <= 5", "message": "replicas must be no greater than 5"}]}),
        ),
    );
    s.ok_stdin(
        &["apply", "-f", "-"],
        &binding("replica-limit-binding", "replica-limit", json!({"validationActions": ["Deny"]})),
    );
    let want = "deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-binding' denied request: replicas must be no greater than 5";
    wait_refused(&s, &deployment("web", 6), "the policy to be enforced");
    let out = create(&s, &deployment("web", 6));
    assert!(!out.status.success());
    // kubectl prints an Invalid status by its details: kind (the resource), name and causes.
    let printed = "The deployments \"web\" is invalid: : ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-binding' denied request: replicas must be no greater than 5";
    assert!(stderr(&out).contains(printed), "{}", stderr(&out));
    assert!(!s.kubectl(&["get", "deployment", "web"]).status.success(), "nothing was written");
    // Within the limit: admitted.
    assert!(create(&s, &deployment("small", 5)).status.success());
    // The same refusal as a Status: 422 Invalid, the message also a cause.
    let body = s.write_file("web.json", &deployment("web", 6));
    let (code, status) =
        s.curl("POST", "/apis/apps/v1/namespaces/default/deployments", Some("application/json"), Some(&body));
    assert_eq!((code, status["reason"].as_str()), (422, Some("Invalid")), "{status}");
    assert_eq!(status["message"], want);
    assert_eq!(status["details"]["name"], "web");
    assert_eq!(status["details"]["causes"][0]["message"], want.split_once(": ").map_or("", |(_, m)| m));
    // An update past the limit is refused too.
    let scaled = s.kubectl(&["scale", "deployment", "small", "--replicas=7"]);
    assert!(!scaled.status.success(), "{}", stderr(&scaled));
    assert!(stderr(&scaled).contains("replicas must be no greater than 5"), "{}", stderr(&scaled));

    // Warn: admitted, and kubectl prints the warning.
    s.ok_stdin(
        &["apply", "-f", "-"],
        &binding("replica-limit-binding", "replica-limit", json!({"validationActions": ["Warn"]})),
    );
    let out = eventually(WAIT, "the Warn binding to admit", || {
        let out = create(&s, &deployment("warned", 6));
        out.status.success().then_some(out)
    });
    assert!(
        stderr(&out).contains("Warning: Validation failed for ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-binding': replicas must be no greater than 5"),
        "{}",
        stderr(&out)
    );
    assert_eq!(s.json(&["get", "deployment", "warned"])["spec"]["replicas"], 6);

    // The policy's status shows the generation in force, without warnings.
    let status = eventually(WAIT, "the policy status", || {
        let p = s.json(&["get", "validatingadmissionpolicy", "replica-limit"]);
        (p["status"]["observedGeneration"] == 1).then(|| p["status"].clone())
    });
    assert!(status["typeChecking"].get("expressionWarnings").is_none(), "{status}");
    let p = s.json(&["get", "validatingadmissionpolicy", "replica-limit"]);
    assert_eq!(p["spec"]["failurePolicy"], "Fail", "defaulted");
    assert_eq!(p["spec"]["matchConstraints"]["matchPolicy"], "Equivalent", "defaulted");
}

#[test]
fn a_param_configmap_sets_the_limit_and_editing_it_changes_what_is_allowed() {
    let s = Server::start();
    s.ok(&["create", "configmap", "replica-limits", "--from-literal=max=3"]);
    s.ok_stdin(
        &["apply", "-f", "-"],
        &policy(
            "param-limit",
            json!({"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                   "validations": [{"expression": "object.spec.replicas <= int(params.data.max)",
                                    "messageExpression": "'replicas must be at most ' + params.data.max",
                                    "reason": "Forbidden"}]}),
        ),
    );
    s.ok_stdin(
        &["apply", "-f", "-"],
        &binding(
            "param-limit-binding",
            "param-limit",
            json!({"validationActions": ["Deny"],
                   "paramRef": {"name": "replica-limits", "namespace": "default", "parameterNotFoundAction": "Deny"}}),
        ),
    );
    let out = wait_refused(&s, &deployment("web", 4), "the param policy to be enforced");
    assert!(stderr(&out).contains("Error from server (Forbidden)"), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("ValidatingAdmissionPolicy 'param-limit' with binding 'param-limit-binding' denied request: replicas must be at most 3"),
        "{}",
        stderr(&out)
    );
    // Editing the ConfigMap, not the policy, raises the limit.
    s.ok(&["patch", "configmap", "replica-limits", "--type=merge", "-p", r#"{"data":{"max":"5"}}"#]);
    let created = create(&s, &deployment("web", 4));
    assert!(created.status.success(), "{}", stderr(&created));
    let out = create(&s, &deployment("big", 6));
    assert!(stderr(&out).contains("replicas must be at most 5"), "{}", stderr(&out));
    assert_eq!(s.json(&["get", "validatingadmissionpolicy", "param-limit"])["metadata"]["generation"], 1);
    // Without its parameter, a Deny binding refuses.
    s.ok(&["delete", "configmap", "replica-limits"]);
    let out = create(&s, &deployment("orphan", 1));
    assert!(
        stderr(&out).contains("ValidatingAdmissionPolicy 'param-limit' with binding 'param-limit-binding' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn match_conditions_variables_and_failure_policies() {
    let s = Server::start();
    s.ok(&["create", "namespace", "team"]);
    s.ok(&["label", "namespace", "team", "env=prod"]);
    // Only namespaces labelled env=prod, only deployments not labelled skip=true; the limit
    // comes from a variable and the namespace's label shows in the message.
    s.ok_stdin(
        &["apply", "-f", "-"],
        &policy(
            "prod-limit",
            json!({"matchConstraints": {"namespaceSelector": {"matchLabels": {"env": "prod"}},
                                        "resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["deployments"]}]},
                   "matchConditions": [{"name": "not-skipped", "expression": "!has(object.metadata.labels) || !('skip' in object.metadata.labels)"}],
                   "variables": [{"name": "replicas", "expression": "object.spec.replicas"}],
                   "validations": [{"expression": "variables.replicas <= 2",
                                    "messageExpression": "'too many replicas for ' + namespaceObject.metadata.labels.env + ' by ' + request.userInfo.username"}]}),
        ),
    );
    s.ok_stdin(&["apply", "-f", "-"], &binding("prod-limit", "prod-limit", json!({"validationActions": ["Deny"]})));
    let in_team = |name: &str, replicas: i64, labels: Value| {
        let mut d: Value = serde_json::from_str(&deployment(name, replicas)).expect("json");
        d["metadata"]["namespace"] = json!("team");
        if let Some(l) = labels.as_object() {
            d["metadata"]["labels"].as_object_mut().expect("labels").extend(l.clone());
        }
        d.to_string()
    };
    let out = wait_refused(&s, &in_team("web", 3, json!({})), "the prod policy to be enforced");
    assert!(stderr(&out).contains("denied request: too many replicas for prod by "), "{}", stderr(&out));
    assert!(create(&s, &deployment("default-ns", 3)).status.success(), "other namespaces are not selected");
    let skipped = create(&s, &in_team("skipped", 3, json!({"skip": "true"})));
    assert!(skipped.status.success(), "a false match condition skips: {}", stderr(&skipped));

    // An expression that fails at runtime: Fail refuses, Ignore admits.
    s.ok_stdin(
        &["apply", "-f", "-"],
        &policy("broken", json!({"validations": [{"expression": "object.spec.missing.field == 1"}]})),
    );
    s.ok_stdin(&["apply", "-f", "-"], &binding("broken", "broken", json!({"validationActions": ["Deny"]})));
    let out = wait_refused(&s, &deployment("x", 1), "the broken policy to fail requests");
    assert!(
        stderr(&out).contains("ValidatingAdmissionPolicy 'broken' with binding 'broken' denied request: expression 'object.spec.missing.field == 1' resulted in error"),
        "{}",
        stderr(&out)
    );
    s.ok(&[
        "patch",
        "validatingadmissionpolicy",
        "broken",
        "--type=merge",
        "-p",
        r#"{"spec":{"failurePolicy":"Ignore"}}"#,
    ]);
    eventually(WAIT, "Ignore to admit", || create(&s, &deployment("x", 1)).status.success().then_some(()));

    // An expression that does not compile makes the policy invalid.
    let out = s.kubectl_stdin(
        &["apply", "-f", "-"],
        &policy("uncompilable", json!({"validations": [{"expression": "object.spec.replicas <"}]})),
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("spec.validations[0].expression: Invalid value: \"object.spec.replicas <\": compilation failed: ERROR: <input>:1:"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn policies_and_bindings_are_validated_as_upstream() {
    let s = Server::start();
    let out = s.kubectl_stdin(&["apply", "-f", "-"], &policy("empty", json!({})));
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(
            "spec.validations: Required value: validations or auditAnnotations must contain at least one item"
        ),
        "{}",
        stderr(&out)
    );
    let out = s.kubectl_stdin(
        &["apply", "-f", "-"],
        &binding("b", "p", json!({"validationActions": ["Deny"], "paramRef": {"name": "x"}})),
    );
    assert!(!out.status.success());
    assert!(stderr(&out).contains("spec.paramRef.parameterNotFoundAction: Required value"), "{}", stderr(&out));
    // The policy kinds themselves are never subject to policies.
    s.ok_stdin(
        &["apply", "-f", "-"],
        &policy(
            "everything",
            json!({"matchConstraints": {"resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]}]},
                   "validations": [{"expression": "false"}]}),
        ),
    );
    s.ok_stdin(&["apply", "-f", "-"], &binding("everything", "everything", json!({"validationActions": ["Deny"]})));
    wait_refused(&s, &deployment("any", 1), "the catch-all policy");
    s.ok(&["delete", "validatingadmissionpolicybinding", "everything"]);
    s.ok(&["delete", "validatingadmissionpolicy", "everything"]);
}

#[test]
fn the_authorizer_variable_asks_rbac() {
    let s = Server::start();
    // Past 3 replicas, only if the service account default/scaler may update deployments here;
    // and the requester itself must be allowed to create what it creates (the admin is).
    let check = "authorizer.serviceAccount('default', 'scaler').group('apps').resource('deployments')\
                 .namespace(object.metadata.namespace).check('update')";
    s.ok_stdin(
        &["apply", "-f", "-"],
        &policy(
            "scaler",
            json!({"validations": [
                {"expression": format!("object.spec.replicas <= 3 || {check}.allowed()"),
                 "messageExpression": format!("'scaler may not scale: ' + {check}.reason()")},
                {"expression": "authorizer.requestResource.check('create').allowed() && !authorizer.requestResource.check('create').errored()",
                 "message": "the requester may not create"}]}),
        ),
    );
    s.ok_stdin(&["apply", "-f", "-"], &binding("scaler-binding", "scaler", json!({"validationActions": ["Deny"]})));
    let out = wait_refused(&s, &deployment("big", 5), "the policy to be enforced");
    // The reason is empty (RBAC has no opinion), and the message is trimmed.
    assert!(stderr(&out).contains("denied request: scaler may not scale"), "{}", stderr(&out));
    assert!(create(&s, &deployment("small", 2)).status.success(), "within the limit, the requester may create");

    // Grant the service account the right: the same deployment is admitted.
    s.ok(&["create", "role", "deployment-updater", "--verb=update", "--resource=deployments.apps"]);
    s.ok(&["create", "rolebinding", "scaler", "--role=deployment-updater", "--serviceaccount=default:scaler"]);
    eventually(WAIT, "the role binding to allow the scale", || {
        create(&s, &deployment("big", 5)).status.success().then_some(())
    });
    assert_eq!(s.json(&["get", "deployment", "big"])["spec"]["replicas"], 5);
    // The status shows no warnings: `authorizer` is declared.
    let status = eventually(WAIT, "the policy status", || {
        let p = s.json(&["get", "validatingadmissionpolicy", "scaler"]);
        (p["status"]["observedGeneration"] == 1).then(|| p["status"].clone())
    });
    assert!(status["typeChecking"].get("expressionWarnings").is_none(), "{status}");
}
