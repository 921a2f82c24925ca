//! ServiceAccount tokens against a real API-only server, driven with stock kubectl and curl:
//! TokenRequests (`kubectl create token`), bearer authentication, the ServiceAccount admission
//! plugin and the OpenID discovery documents.

mod common;

use common::Server;
use serde_json::{json, Value};
use std::process::Command;

/// A raw HTTPS request authenticated only by `token`: (status, body).
fn bearer(s: &Server, token: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let mut c = Command::new("curl");
    c.args(["-sS", "-o", "-", "-w", "\n%{http_code}", "-X", method, "--cacert"])
        .arg(s.data_dir().join("server/tls/server-ca.crt"))
        .arg("-H")
        .arg(format!("Authorization: Bearer {token}"));
    if let Some(b) = body {
        c.args(["-H", "Content-Type: application/json", "--data-binary"]).arg(b.to_string());
    }
    c.arg(format!("https://127.0.0.1:{}{path}", s.port));
    let out = c.output().expect("curl");
    assert!(out.status.success(), "curl failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), serde_json::from_str(body).unwrap_or(Value::Null))
}

fn whoami(s: &Server, token: &str) -> (u16, Value) {
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    bearer(s, token, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", Some(&review))
}

/// Unpadded base64url (RFC 4648 §5), as JWTs use.
fn base64url(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'-' => 62,
        b'_' => 63,
        _ => panic!("not base64url: {s}"),
    };
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in s.bytes() {
        acc = (acc << 6) | u32::from(val(c));
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

/// Part `i` of a JWT (0 header, 1 claims), decoded.
fn jwt_part(token: &str, i: usize) -> Value {
    let part = token.split('.').nth(i).expect("a JWT has three parts");
    serde_json::from_slice(&base64url(part)).expect("JSON")
}

fn claims(token: &str) -> Value {
    jwt_part(token, 1)
}

fn create_token(s: &Server, args: &[&str]) -> String {
    let mut a = vec!["create", "token"];
    a.extend_from_slice(args);
    s.ok(&a).trim().to_string()
}

/// A kubeconfig holding only the cluster CA and `token`.
fn token_kubeconfig(s: &Server, token: &str) -> std::path::PathBuf {
    let ca = s.data_dir().join("server/tls/server-ca.crt");
    s.write_file(
        "token.kubeconfig",
        &format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{}\n    certificate-authority: {}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: {token}\n",
            s.port,
            ca.display()
        ),
    )
}

#[test]
fn kubectl_create_token_authenticates_as_the_service_account() {
    let s = Server::start();
    // Controllers are off in this harness: the account is created by hand.
    s.ok(&["create", "serviceaccount", "default"]);
    let uid = s.ok(&["get", "serviceaccount", "default", "-o", "jsonpath={.metadata.uid}"]);
    let token = create_token(&s, &["default"]);
    let c = claims(&token);
    let iss = "https://kubernetes.default.svc.cluster.local";
    assert_eq!(c["iss"], iss, "{c}");
    assert_eq!(c["aud"], json!([iss]), "{c}");
    assert_eq!(c["sub"], "system:serviceaccount:default:default", "{c}");
    assert_eq!(c["kubernetes.io"]["namespace"], "default", "{c}");
    assert_eq!(c["kubernetes.io"]["serviceaccount"], json!({"name": "default", "uid": uid}), "{c}");
    let (exp, iat) = (c["exp"].as_i64().expect("exp"), c["iat"].as_i64().expect("iat"));
    assert_eq!(exp - iat, 3600, "default lifetime: {c}");
    assert_eq!(c["nbf"], c["iat"]);
    let jti = c["jti"].as_str().expect("jti").to_string();

    let (code, review) = whoami(&s, &token);
    assert_eq!(code, 201, "{review}");
    let user = &review["status"]["userInfo"];
    assert_eq!(user["username"], "system:serviceaccount:default:default", "{review}");
    assert_eq!(user["uid"], uid.as_str(), "{review}");
    assert_eq!(
        user["groups"],
        json!(["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"]),
        "{review}"
    );
    assert_eq!(user["extra"]["authentication.kubernetes.io/credential-id"], json!([format!("JTI={jti}")]));

    // Stock kubectl with nothing but the token.
    let kc = token_kubeconfig(&s, &token);
    let out = s.kubectl(&["--kubeconfig", kc.to_str().expect("path"), "auth", "whoami", "-o", "json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let me: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(me["status"]["userInfo"]["username"], "system:serviceaccount:default:default");
    // Nothing binds the account to a role: it may not list pods.
    let out = s.kubectl(&["--kubeconfig", kc.to_str().expect("path"), "get", "pods"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("forbidden"), "{}", String::from_utf8_lossy(&out.stderr));

    // TokenReview by the admin sees the same identity.
    let tr = s.ok_stdin(
        &["create", "-o", "json", "-f", "-"],
        &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}).to_string(),
    );
    let tr: Value = serde_json::from_str(&tr).expect("json");
    assert_eq!(tr["status"]["authenticated"], true, "{tr}");
    assert_eq!(tr["status"]["user"]["username"], "system:serviceaccount:default:default", "{tr}");
    assert_eq!(tr["status"]["audiences"], json!([iss]), "{tr}");

    // Lifetime and audiences as asked.
    let custom = create_token(&s, &["default", "--duration=20m", "--audience=vault"]);
    let cc = claims(&custom);
    assert_eq!(cc["exp"].as_i64().expect("exp") - cc["iat"].as_i64().expect("iat"), 1200);
    assert_eq!(cc["aud"], json!(["vault"]));
    // ... and a token for another audience is not good for this API server.
    assert_eq!(whoami(&s, &custom).0, 401);
}

#[test]
fn bad_tokens_get_401_and_token_requests_are_validated() {
    let s = Server::start();
    for garbage in ["garbage", "a.b.c", "eyJhbGciOiJub25lIn0.eyJpc3MiOiJ4In0."] {
        let (code, status) = whoami(&s, garbage);
        assert_eq!(code, 401, "{garbage}: {status}");
        assert_eq!(status["kind"], "Status", "{status}");
        assert_eq!(status["reason"], "Unauthorized", "{status}");
        assert_eq!(status["code"], 401, "{status}");
        // Even on otherwise public paths: a presented credential must be valid.
        assert_eq!(bearer(&s, garbage, "GET", "/version", None).0, 401);
    }

    // No such account: 404.
    let out = s.kubectl(&["create", "token", "ghost"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("serviceaccounts \"ghost\" not found"), "{err}");
    let (code, status) = s.curl(
        "POST",
        "/api/v1/namespaces/default/serviceaccounts/ghost/token",
        Some("application/json"),
        Some(&s.write_file("tr.json", r#"{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{}}"#)),
    );
    assert_eq!((code, status["reason"].as_str()), (404, Some("NotFound")), "{status}");

    s.ok(&["create", "serviceaccount", "robot"]);
    let out = s.kubectl(&["create", "token", "robot", "--duration=5m"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("may not specify a duration less than 10 minutes"), "{err}");
    let out = s.kubectl(&["create", "token", "robot", "--bound-object-kind=Pod", "--bound-object-name=nope"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("pods \"nope\" not found"), "{out:?}");

    // The subresource is discoverable.
    let v1: Value = serde_json::from_str(&s.ok(&["get", "--raw", "/api/v1"])).expect("json");
    let token = v1["resources"].as_array().and_then(|r| r.iter().find(|r| r["name"] == "serviceaccounts/token"));
    let token = token.expect("serviceaccounts/token in discovery");
    assert_eq!(token["verbs"], json!(["create"]));
    assert_eq!(token["kind"], "TokenRequest");
}

#[test]
fn deleting_the_account_or_the_bound_pod_invalidates_tokens() {
    let s = Server::start();
    s.ok(&["create", "serviceaccount", "default"]);
    s.ok(&["create", "serviceaccount", "robot"]);
    s.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: Pod\nmetadata: {name: worker}\nspec:\n  serviceAccountName: robot\n  containers:\n  - {name: c, image: busybox}\n",
    );
    let pod_uid = s.ok(&["get", "pod", "worker", "-o", "jsonpath={.metadata.uid}"]);
    let bound = create_token(&s, &["robot", "--bound-object-kind=Pod", "--bound-object-name=worker"]);
    assert_eq!(claims(&bound)["kubernetes.io"]["pod"], json!({"name": "worker", "uid": pod_uid}));
    let (code, review) = whoami(&s, &bound);
    assert_eq!(code, 201, "{review}");
    let extra = &review["status"]["userInfo"]["extra"];
    assert_eq!(extra["authentication.kubernetes.io/pod-name"], json!(["worker"]), "{review}");
    assert_eq!(extra["authentication.kubernetes.io/pod-uid"], json!([pod_uid]), "{review}");
    // Binding to a pod of another account is refused.
    let out = s.kubectl(&["create", "token", "default", "--bound-object-kind=Pod", "--bound-object-name=worker"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("different serviceaccount name"), "{out:?}");

    let plain = create_token(&s, &["robot"]);
    assert_eq!(whoami(&s, &plain).0, 201);
    s.ok(&["delete", "pod", "worker", "--grace-period=0", "--force"]);
    assert_eq!(whoami(&s, &bound).0, 401, "the pod is gone");
    assert_eq!(whoami(&s, &plain).0, 201, "unbound tokens live on");

    s.ok(&["delete", "serviceaccount", "robot"]);
    assert_eq!(whoami(&s, &plain).0, 401, "the account is gone");
    // A new account of the same name has another uid: old tokens stay invalid.
    s.ok(&["create", "serviceaccount", "robot"]);
    assert_eq!(whoami(&s, &plain).0, 401, "the account was recreated");
    assert_eq!(whoami(&s, &create_token(&s, &["robot"])).0, 201);
}

#[test]
fn pods_get_the_default_account_and_a_projected_token_volume() {
    let s = Server::start();
    // No account yet: upstream's admission refuses the pod.
    let out = s.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: Pod\nmetadata: {name: early}\nspec:\n  containers:\n  - {name: c, image: busybox}\n",
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("pods \"early\" is forbidden: error looking up service account default/default: serviceaccount \"default\" not found"),
        "{err}"
    );
    assert!(!s.kubectl(&["get", "pod", "early"]).status.success(), "nothing was written");

    s.ok(&["create", "serviceaccount", "default"]);
    s.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  initContainers:\n  - {name: init, image: busybox}\n  containers:\n  - {name: a, image: busybox}\n  - name: b\n    image: busybox\n    volumeMounts: [{name: own, mountPath: /var/run/secrets/kubernetes.io/serviceaccount}]\n  volumes: [{name: own, emptyDir: {}}]\n",
    );
    let pod = s.json(&["get", "pod", "web"]);
    let spec = &pod["spec"];
    assert_eq!(spec["serviceAccountName"], "default");
    assert_eq!(spec["serviceAccount"], "default");
    let vols = spec["volumes"].as_array().expect("volumes");
    assert_eq!(vols.len(), 2, "{vols:?}");
    let v = &vols[1];
    let name = v["name"].as_str().expect("name");
    assert!(name.starts_with("kube-api-access-") && name.len() == "kube-api-access-".len() + 5, "{name}");
    assert_eq!(
        v["projected"],
        json!({"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
        ]})
    );
    let mount = json!({"name": name, "readOnly": true, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"});
    assert_eq!(spec["initContainers"][0]["volumeMounts"], json!([mount]));
    assert_eq!(spec["containers"][0]["volumeMounts"], json!([mount]));
    assert_eq!(
        spec["containers"][1]["volumeMounts"],
        json!([{"name": "own", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]),
        "an existing mount at the token path is left alone"
    );

    // automountServiceAccountToken: false on the account, overridden by the pod.
    s.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: quiet}\nautomountServiceAccountToken: false\n",
    );
    s.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: Pod\nmetadata: {name: quiet}\nspec:\n  serviceAccountName: quiet\n  containers:\n  - {name: c, image: busybox}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: loud}\nspec:\n  serviceAccountName: quiet\n  automountServiceAccountToken: true\n  containers:\n  - {name: c, image: busybox}\n",
    );
    let quiet = s.json(&["get", "pod", "quiet"]);
    assert!(quiet["spec"]["volumes"].as_array().is_none_or(|v| v.is_empty()), "{quiet}");
    assert!(quiet["spec"]["containers"][0]["volumeMounts"].as_array().is_none_or(|v| v.is_empty()), "{quiet}");
    let loud = s.json(&["get", "pod", "loud"]);
    assert_eq!(loud["spec"]["volumes"].as_array().map(Vec::len), Some(1), "{loud}");

    // The pod's own choice wins over the account's default.
    s.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: Pod\nmetadata: {name: optout}\nspec:\n  automountServiceAccountToken: false\n  containers:\n  - {name: c, image: busybox}\n",
    );
    let optout = s.json(&["get", "pod", "optout"]);
    assert_eq!(optout["spec"]["serviceAccountName"], "default");
    assert!(optout["spec"]["volumes"].as_array().is_none_or(|v| v.is_empty()), "{optout}");
}

#[test]
fn openid_discovery_serves_the_issuer_and_its_signing_key() {
    let s = Server::start();
    let conf: Value =
        serde_json::from_str(&s.ok(&["get", "--raw", "/.well-known/openid-configuration"])).expect("json");
    assert_eq!(conf["issuer"], "https://kubernetes.default.svc.cluster.local");
    assert!(conf["jwks_uri"].as_str().is_some_and(|u| u.ends_with("/openid/v1/jwks")), "{conf}");
    let jwks: Value = serde_json::from_str(&s.ok(&["get", "--raw", "/openid/v1/jwks"])).expect("json");
    let key = &jwks["keys"][0];
    assert_eq!(
        (key["kty"].as_str(), key["crv"].as_str(), key["alg"].as_str()),
        (Some("EC"), Some("P-256"), Some("ES256"))
    );
    s.ok(&["create", "serviceaccount", "default"]);
    let token = create_token(&s, &["default"]);
    let header = jwt_part(&token, 0);
    assert_eq!(header["alg"], "ES256");
    assert_eq!(header["kid"], key["kid"], "tokens name the published key");
}

#[test]
fn the_signing_key_survives_restarts_and_the_serving_cert_names_the_kubernetes_service() {
    let mut s = Server::start();
    s.ok(&["create", "serviceaccount", "default"]);
    let token = create_token(&s, &["default"]);
    s.restart();
    assert_eq!(whoami(&s, &token).0, 201, "tokens stay valid across restarts");
    let out = Command::new("openssl")
        .args(["x509", "-noout", "-ext", "subjectAltName", "-in"])
        .arg(s.data_dir().join("server/tls/serving-kube-apiserver.crt"))
        .output()
        .expect("openssl");
    let text = String::from_utf8_lossy(&out.stdout);
    let sans: Vec<&str> = text.lines().skip(1).flat_map(|l| l.split(',')).map(str::trim).collect();
    for want in [
        "IP Address:10.43.0.1",
        "DNS:kubernetes",
        "DNS:kubernetes.default",
        "DNS:kubernetes.default.svc",
        "DNS:kubernetes.default.svc.cluster.local",
    ] {
        assert!(sans.contains(&want), "{want} missing from {sans:?}");
    }
}

/// RBAC with stock kubectl: the default roles exist, bindings grant a service account what its
/// role allows (in the RoleBinding's namespace only; everywhere with a ClusterRoleBinding),
/// `resourceNames` narrow a rule, aggregated roles take in labelled roles, `auth can-i` and
/// `--list` agree, `--as` impersonates only for those allowed to, deleting a binding takes its
/// grant away, and nobody grants what they do not hold (escalation prevention).
#[test]
fn rbac_bindings_grant_service_accounts_what_their_roles_allow() {
    let s = Server::start();
    let roles = s.ok(&["get", "clusterroles", "-o", "name"]);
    for r in ["cluster-admin", "admin", "edit", "view", "system:discovery", "system:basic-user"] {
        assert!(roles.lines().any(|l| l == format!("clusterrole.rbac.authorization.k8s.io/{r}")), "{r}: {roles}");
    }
    s.ok(&["create", "serviceaccount", "robot"]);
    let kc = token_kubeconfig(&s, &create_token(&s, &["robot"]));
    let kc = kc.to_str().expect("path").to_string();
    let robot = |args: &[&str]| {
        let mut a = vec!["--kubeconfig", kc.as_str()];
        a.extend_from_slice(args);
        s.kubectl(&a)
    };
    let allowed = |args: &[&str]| {
        let out = robot(args);
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success() || stderr.contains("forbidden"), "{args:?}: {stderr}");
        out.status.success()
    };
    let can_i = |args: &[&str]| {
        let mut a = vec!["auth", "can-i"];
        a.extend_from_slice(args);
        let out = robot(&a);
        let answer = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert_eq!(answer == "yes", out.status.success(), "{args:?}: {answer}");
        answer == "yes"
    };
    // Nothing bound: discovery and self-reviews only.
    assert!(!allowed(&["get", "pods"]));
    // The admin impersonating the account (`--as`) gets the account's answers.
    let sa = "--as=system:serviceaccount:default:robot";
    let out = s.kubectl(&["get", "pods", sa]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("forbidden"), "{}", String::from_utf8_lossy(&out.stderr));
    let me = s.ok(&["auth", "whoami", sa, "-o", "jsonpath={.status.userInfo.groups}"]);
    assert_eq!(me, r#"["system:serviceaccounts","system:serviceaccounts:default","system:authenticated"]"#);
    assert_eq!(
        s.ok(&["auth", "whoami", "--as=alice", "--as-group=devs", "-o", "jsonpath={.status.userInfo}"]),
        r#"{"groups":["devs","system:authenticated"],"username":"alice"}"#
    );
    assert!(!can_i(&["list", "pods"]));
    assert!(allowed(&["auth", "whoami"]));

    // view in default: read pods there, not elsewhere, not secrets, no writes.
    s.ok(&["create", "rolebinding", "robot-view", "--clusterrole=view", "--serviceaccount=default:robot"]);
    assert!(allowed(&["get", "pods"]));
    assert!(can_i(&["list", "pods"]));
    assert_eq!(s.ok(&["auth", "can-i", "list", "pods", sa]).trim(), "yes");
    assert_eq!(s.kubectl(&["auth", "can-i", "list", "secrets", sa]).status.code(), Some(1));
    // The account itself may not impersonate anyone.
    let out = robot(&["get", "pods", "--as=alice"]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(err.contains(r#"cannot impersonate resource "users""#), "{err}");
    assert!(can_i(&["get", "deployments.apps"]));
    assert!(!can_i(&["create", "pods"]));
    assert!(!can_i(&["get", "secrets"]));
    assert!(!allowed(&["get", "pods", "-n", "kube-system"]));
    assert!(!allowed(&["create", "configmap", "c1", "--from-literal=a=b"]));
    let list = String::from_utf8_lossy(&robot(&["auth", "can-i", "--list"]).stdout).to_string();
    assert!(list.lines().any(|l| l.starts_with("pods ") && l.contains("[get list watch]")), "{list}");

    // A Role with resourceNames: that ConfigMap only.
    s.ok(&["create", "configmap", "settings", "--from-literal=a=b"]);
    s.ok(&["create", "configmap", "other", "--from-literal=a=b"]);
    s.ok(&[
        "create",
        "role",
        "settings-editor",
        "--verb=get,patch",
        "--resource=configmaps",
        "--resource-name=settings",
    ]);
    s.ok(&["create", "rolebinding", "robot-settings", "--role=settings-editor", "--serviceaccount=default:robot"]);
    assert!(allowed(&["label", "configmap", "settings", "touched=yes"]));
    assert!(!allowed(&["label", "configmap", "other", "touched=yes"]));
    assert!(can_i(&["patch", "configmaps/settings"]));
    assert!(!can_i(&["patch", "configmaps"]), "a rule with names does not cover every ConfigMap");

    // edit everywhere, through a ClusterRoleBinding.
    s.ok(&["create", "clusterrolebinding", "robot-edit", "--clusterrole=edit", "--serviceaccount=default:robot"]);
    assert!(allowed(&["create", "deployment", "web", "--image=busybox", "-n", "kube-system"]));
    assert!(can_i(&["get", "secrets", "-n", "kube-public"]));
    assert!(!can_i(&["create", "roles"]), "roles are admin's");
    assert!(!allowed(&["get", "nodes"]), "nodes are in no default namespace role");

    // A ClusterRole labelled to aggregate into view reaches edit too (edit aggregates view).
    s.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: node-reader\n  labels: {rbac.authorization.k8s.io/aggregate-to-view: \"true\"}\nrules:\n- apiGroups: [\"\"]\n  resources: [nodes]\n  verbs: [get, list]\n",
    );
    assert!(allowed(&["get", "nodes"]));
    assert!(can_i(&["list", "nodes"]));

    // Deleting the binding takes the grant away.
    s.ok(&["delete", "clusterrolebinding", "robot-edit"]);
    assert!(!allowed(&["get", "nodes"]));
    assert!(!can_i(&["create", "deployments", "-n", "kube-system"]));
    assert!(can_i(&["list", "pods"]), "the RoleBinding in default still holds");

    // Escalation prevention: as admin of a namespace, the account may hand out what it holds
    // there, and nothing more.
    s.ok(&["create", "namespace", "team"]);
    s.ok(&[
        "create",
        "rolebinding",
        "robot-admin",
        "-n",
        "team",
        "--clusterrole=admin",
        "--serviceaccount=default:robot",
    ]);
    assert!(allowed(&["get", "namespace", "team"]), "a namespace's admin reads the namespace itself");
    assert!(!allowed(&["get", "namespace", "kube-system"]));
    assert!(allowed(&["create", "role", "pod-reader", "-n", "team", "--verb=get,list", "--resource=pods"]));
    assert!(allowed(&["create", "rolebinding", "viewers", "-n", "team", "--clusterrole=view", "--group=viewers"]));
    // (get and list on nodes it holds: node-reader aggregates into view, which admin includes.)
    let out = robot(&["create", "role", "node-deleter", "-n", "team", "--verb=get,delete", "--resource=nodes"]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "a role with rules the account does not hold");
    assert!(err.contains("is attempting to grant RBAC permissions not currently held"), "{err}");
    assert!(err.contains(r#"{APIGroups:[""], Resources:["nodes"], Verbs:["delete"]}"#), "{err}");
    assert!(!err.contains(r#"Verbs:["get"]"#), "get on nodes is held: {err}");
    let out = robot(&["create", "rolebinding", "root", "-n", "team", "--clusterrole=cluster-admin", "--group=viewers"]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success() && err.contains("not currently held"), "binding cluster-admin: {err}");
    let got = s.kubectl(&["get", "rolebinding", "root", "-n", "team"]);
    assert!(String::from_utf8_lossy(&got.stderr).contains("not found"), "a refused binding is not written");
    // The `bind` verb on that ClusterRole, granted in the namespace, lets it bind what it does
    // not hold itself.
    s.ok(&[
        "create",
        "role",
        "binder",
        "-n",
        "team",
        "--verb=bind",
        "--resource=clusterroles.rbac.authorization.k8s.io",
        "--resource-name=cluster-admin",
    ]);
    s.ok(&["create", "rolebinding", "robot-binder", "-n", "team", "--role=binder", "--serviceaccount=default:robot"]);
    assert!(allowed(&[
        "create",
        "rolebinding",
        "root",
        "-n",
        "team",
        "--clusterrole=cluster-admin",
        "--group=viewers"
    ]));
}

#[test]
fn a_restart_gives_default_roles_and_bindings_back_what_they_lost_unless_autoupdate_is_false() {
    let mut s = Server::start();
    // An administrator trims two default roles and a binding; system:discovery is marked as
    // theirs to keep.
    let trimmed = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: system:basic-user\n  labels: {team: platform}\nrules:\n- apiGroups: [authentication.k8s.io]\n  resources: [selfsubjectreviews]\n  verbs: [create]\n- apiGroups: [\"\"]\n  resources: [configmaps]\n  verbs: [get]\n";
    s.ok_stdin(&["replace", "-f", "-"], trimmed);
    let kept = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: system:discovery\n  annotations: {rbac.authorization.kubernetes.io/autoupdate: \"false\"}\nrules:\n- nonResourceURLs: [/version]\n  verbs: [get]\n";
    s.ok_stdin(&["replace", "-f", "-"], kept);
    s.ok(&["patch", "clusterrolebinding", "system:public-info-viewer", "--type=json", "-p",
           r#"[{"op":"replace","path":"/subjects","value":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"alice"}]}]"#]);
    s.ok(&["delete", "clusterrolebinding", "system:basic-user"]);
    let rules = |s: &Server, role: &str| s.json(&["get", "clusterrole", role])["rules"].clone();
    assert_eq!(rules(&s, "system:basic-user").as_array().map(Vec::len), Some(2));

    s.restart();
    let basic = s.json(&["get", "clusterrole", "system:basic-user"]);
    assert_eq!(
        basic["rules"],
        json!([
            {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]},
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
            {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews"], "verbs": ["create"]},
            {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectrulesreviews"], "verbs": ["create"]}
        ]),
        "the lost permissions come back after the administrator's rules, which stay"
    );
    assert_eq!(basic["metadata"]["labels"]["team"], "platform");
    assert_eq!(basic["metadata"]["labels"]["kubernetes.io/bootstrapping"], "rbac-defaults");
    assert_eq!(basic["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"], "true");
    assert_eq!(
        rules(&s, "system:discovery"),
        json!([{"nonResourceURLs": ["/version"], "verbs": ["get"]}]),
        "autoupdate=false keeps the administrator's version"
    );
    let subjects = s.json(&["get", "clusterrolebinding", "system:public-info-viewer"])["subjects"].clone();
    let names: Vec<&str> = subjects.as_array().into_iter().flatten().filter_map(|x| x["name"].as_str()).collect();
    assert_eq!(names, ["alice", "system:authenticated", "system:unauthenticated"]);
    let binding = s.json(&["get", "clusterrolebinding", "system:basic-user"]);
    assert_eq!(binding["roleRef"]["name"], "system:basic-user", "a deleted default binding is created again");

    // A binding whose roleRef was changed (by deleting and creating it) is recreated with the
    // default's.
    s.ok(&["delete", "clusterrolebinding", "system:basic-user"]);
    s.ok(&["create", "clusterrolebinding", "system:basic-user", "--clusterrole=view", "--group=system:authenticated"]);
    s.restart();
    let binding = s.json(&["get", "clusterrolebinding", "system:basic-user"]);
    assert_eq!(binding["roleRef"]["name"], "system:basic-user");
}

/// The value of the series `series` (its name and labels, exactly as written) in `metrics`.
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}

#[test]
fn metrics_count_requests_as_kube_apiserver_does_for_admins_and_the_system_monitoring_role() {
    let s = Server::start();
    for i in 0..3 {
        s.ok(&["create", "configmap", &format!("m{i}"), "--from-literal=k=v"]);
    }
    s.ok(&["create", "configmap", "dry", "--from-literal=k=v", "--dry-run=server"]);
    assert!(!s.kubectl(&["get", "configmap", "missing"]).status.success());
    let metrics = s.ok(&["get", "--raw", "/metrics"]);
    let created = r#"apiserver_request_total{verb="POST",dry_run="",group="",version="v1",resource="configmaps",subresource="",scope="resource",component="apiserver",code="201"}"#;
    assert_eq!(sample(&metrics, created), Some(3.0), "{metrics}");
    let dry = r#"apiserver_request_total{verb="POST",dry_run="All",group="",version="v1",resource="configmaps",subresource="",scope="resource",component="apiserver",code="201"}"#;
    assert_eq!(sample(&metrics, dry), Some(1.0), "{metrics}");
    let missing = r#"apiserver_request_total{verb="GET",dry_run="",group="",version="v1",resource="configmaps",subresource="",scope="resource",component="apiserver",code="404"}"#;
    assert_eq!(sample(&metrics, missing), Some(1.0), "{metrics}");
    let timed = r#"apiserver_request_duration_seconds_count{verb="POST",dry_run="",group="",version="v1",resource="configmaps",subresource="",scope="resource",component="apiserver"}"#;
    assert_eq!(sample(&metrics, timed), Some(3.0), "{metrics}");
    // The store: at least the three creates and the bootstrap objects, each batch synced once.
    let writes = sample(&metrics, "k1s_store_writes_total").expect("store writes");
    let commits = sample(&metrics, "k1s_store_commits_total").expect("store commits");
    assert!(writes >= 3.0 && commits >= 1.0 && commits <= writes, "{metrics}");
    assert_eq!(sample(&metrics, "k1s_store_commit_duration_seconds_count"), Some(commits), "{metrics}");
    let rv: f64 = s.ok(&["get", "configmap", "m2", "-o", "jsonpath={.metadata.resourceVersion}"]).parse().expect("rv");
    assert!(sample(&metrics, "k1s_store_revision").is_some_and(|r| r >= rv), "{metrics}");
    assert!(sample(&metrics, "process_resident_memory_bytes").is_some_and(|b| b > 1e6), "{metrics}");

    // A ServiceAccount may read /metrics once bound to upstream's system:monitoring role.
    s.ok(&["create", "serviceaccount", "prometheus"]);
    let token = create_token(&s, &["prometheus"]);
    let kc = token_kubeconfig(&s, &token);
    let kc = kc.to_str().expect("path");
    let out = s.kubectl(&["--kubeconfig", kc, "get", "--raw", "/metrics"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("forbidden"), "{}", String::from_utf8_lossy(&out.stderr));
    s.ok(&[
        "create",
        "clusterrolebinding",
        "prometheus",
        "--clusterrole=system:monitoring",
        "--serviceaccount=default:prometheus",
    ]);
    let scraped = common::eventually(std::time::Duration::from_secs(10), "the binding to apply", || {
        let out = s.kubectl(&["--kubeconfig", kc, "get", "--raw", "/metrics"]);
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    });
    assert!(scraped.contains("# TYPE apiserver_request_total counter"), "{scraped}");
    // The refused scrape was counted, as upstream counts a 403.
    let refused = r#"apiserver_request_total{verb="GET",dry_run="",group="",version="",resource="",subresource="/metrics",scope="",component="apiserver",code="403"}"#;
    assert_eq!(sample(&scraped, refused), Some(1.0), "{scraped}");
    // The Prometheus text format, as kube-apiserver serves it by default.
    let (code, _) = s.curl_text("GET", "/metrics", &[], None);
    assert_eq!(code, 200);
    let head = Command::new("curl")
        .args(["-sS", "-o", "/dev/null", "-w", "%{content_type}", "--cacert"])
        .arg(s.data_dir().join("server/tls/server-ca.crt"))
        .arg("-H")
        .arg(format!("Authorization: Bearer {token}"))
        .arg(format!("https://127.0.0.1:{}/metrics", s.port))
        .output()
        .expect("curl");
    assert_eq!(String::from_utf8_lossy(&head.stdout), "text/plain; version=0.0.4; charset=utf-8");
}
