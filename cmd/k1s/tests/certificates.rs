//! The Certificates API against a real server with its controllers, driven with stock kubectl:
//! a new user gets a client certificate the Kubernetes way (CertificateSigningRequest, `kubectl
//! certificate approve`, the signer), the request records who asked for it whatever the client
//! sent, and the signers refuse what their rules forbid.

mod common;

use base64::Engine as _;
use common::{eventually, Server};
use serde_json::Value;
use std::time::Duration;

/// A new key and a PEM CSR for `cn` in `org` (when given).
fn key_and_request(cn: &str, org: Option<&str>) -> (String, String) {
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(rcgen::DnType::CommonName, cn);
    if let Some(o) = org {
        params.distinguished_name.push(rcgen::DnType::OrganizationName, o);
    }
    let csr = params.serialize_request(&key).expect("csr").pem().expect("pem");
    (key.serialize_pem(), csr)
}

/// A CertificateSigningRequest manifest (JSON) that also claims to come from `mallory` in
/// `system:masters`: the server must ignore that.
fn manifest(name: &str, csr_pem: &str, signer: &str, usages: &[&str]) -> String {
    serde_json::json!({
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"name": name},
        "spec": {
            "request": base64::engine::general_purpose::STANDARD.encode(csr_pem),
            "signerName": signer,
            "usages": usages,
            "expirationSeconds": 3600,
            "username": "mallory",
            "uid": "forged",
            "groups": ["system:masters"],
        },
    })
    .to_string()
}

fn csr(s: &Server, name: &str) -> Value {
    s.json(&["get", "csr", name])
}

/// The issued certificate (PEM) once the signer wrote it.
fn wait_certificate(s: &Server, name: &str) -> String {
    eventually(Duration::from_secs(30), "the certificate to be issued", || {
        let c = csr(s, name);
        let b64 = c.pointer("/status/certificate").and_then(Value::as_str)?;
        Some(String::from_utf8(base64::engine::general_purpose::STANDARD.decode(b64).expect("base64")).expect("pem"))
    })
}

#[test]
fn a_new_user_gets_a_certificate_through_an_approved_request_and_whoami_names_them() {
    let s = Server::start_controllers();
    let (key_pem, csr_pem) = key_and_request("jane", Some("dev-team"));
    s.ok_stdin(
        &["create", "-f", "-"],
        &manifest("jane", &csr_pem, "kubernetes.io/kube-apiserver-client", &["client auth"]),
    );
    // The requester is the admin who created it, whatever the manifest said.
    let created = csr(&s, "jane");
    assert_eq!(created["spec"]["username"], "system:admin", "{created}");
    assert_eq!(created["spec"]["groups"], serde_json::json!(["system:masters", "system:authenticated"]));
    assert_eq!(created["spec"].get("uid"), None);
    let table = s.ok(&["get", "csr", "jane"]);
    assert!(table.contains("system:admin") && table.contains("Pending"), "{table}");

    let out = s.ok(&["certificate", "approve", "jane"]);
    assert!(out.contains("certificatesigningrequest.certificates.k8s.io/jane approved"), "{out}");
    let cert_pem = wait_certificate(&s, "jane");
    let approved = csr(&s, "jane");
    let cond = &approved["status"]["conditions"][0];
    assert_eq!(
        (cond["type"].as_str(), cond["reason"].as_str()),
        (Some("Approved"), Some("KubectlApprove")),
        "{approved}"
    );
    assert!(cond["lastTransitionTime"].is_string(), "{approved}");
    let table = s.ok(&["get", "csr", "jane"]);
    assert!(table.contains("Approved,Issued"), "{table}");

    // The certificate: an hour long (expirationSeconds), for jane in dev-team.
    let (_, pem) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes()).expect("pem");
    let cert = pem.parse_x509().expect("x509");
    let v = cert.validity();
    assert_eq!(v.not_after.timestamp() - v.not_before.timestamp(), 3600 + 300, "an hour, from five minutes ago");

    let ca = s.data_dir().join("server/tls/server-ca.crt");
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let kubeconfig = s.write_file(
        "jane.kubeconfig",
        &format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{}\n    certificate-authority: {}\ncontexts:\n- name: c\n  context: {{cluster: c, user: jane}}\ncurrent-context: c\nusers:\n- name: jane\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\n",
            s.port,
            ca.display(),
            b64(&cert_pem),
            b64(&key_pem)
        ),
    );
    let kc = kubeconfig.display().to_string();
    let who: Value = serde_json::from_str(&s.ok(&["--kubeconfig", &kc, "auth", "whoami", "-o", "json"])).expect("json");
    assert_eq!(who["status"]["userInfo"]["username"], "jane", "{who}");
    assert_eq!(who["status"]["userInfo"]["groups"], serde_json::json!(["dev-team", "system:authenticated"]), "{who}");
    // Jane is nobody special: RBAC has granted her nothing yet.
    let out = s.kubectl(&["--kubeconfig", &kc, "get", "secrets", "-n", "default"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("User \"jane\" cannot list resource \"secrets\""));
}

#[test]
fn a_requests_requester_is_whoever_created_it() {
    let s = Server::start();
    let (_, csr_pem) = key_and_request("bob", None);
    s.ok(&["create", "clusterrole", "csr-creator", "--verb=create,get", "--resource=certificatesigningrequests"]);
    s.ok(&["create", "clusterrolebinding", "bob-csr", "--clusterrole=csr-creator", "--user=bob"]);
    // Created as bob in devs (impersonated by the admin): recorded as bob, whatever was sent.
    s.ok_stdin(
        &["create", "--as=bob", "--as-group=devs", "-f", "-"],
        &manifest("bobs", &csr_pem, "example.com/custom", &["client auth"]),
    );
    let c = csr(&s, "bobs");
    assert_eq!(c["spec"]["username"], "bob", "{c}");
    assert_eq!(c["spec"]["groups"], serde_json::json!(["devs", "system:authenticated"]), "{c}");
    // Updates cannot rewrite the spec or approve: only metadata changes.
    s.ok(&["label", "csr", "bobs", "team=a"]);
    let patch = r#"{"spec":{"username":"root"},"status":{"conditions":[{"type":"Approved","status":"True"}]}}"#;
    s.ok(&["patch", "csr", "bobs", "--type=merge", "-p", patch]);
    let c = csr(&s, "bobs");
    assert_eq!(c["spec"]["username"], "bob", "{c}");
    assert_eq!(c["metadata"]["labels"]["team"], "a");
    assert_eq!(c["status"].get("conditions"), None, "{c}");
    // The status subresource cannot approve either.
    let out = s.kubectl(&["patch", "csr", "bobs", "--subresource=status", "--type=merge", "-p", patch]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("updates may not add a condition of type \"Approved\""));
    // Denied through kubectl: no certificate ever.
    s.ok(&["certificate", "deny", "bobs"]);
    let c = csr(&s, "bobs");
    assert_eq!(c["status"]["conditions"][0]["type"], "Denied", "{c}");
    assert!(s.ok(&["get", "csr", "bobs"]).contains("Denied"));
    let out = s.kubectl(&["certificate", "approve", "bobs"]);
    assert!(!out.status.success(), "a denied request cannot be approved as well");
}

#[test]
fn signers_refuse_what_their_rules_forbid() {
    let s = Server::start_controllers();
    // No client certificate in system:masters through the Certificates API.
    let (_, masters) = key_and_request("eve", Some("system:masters"));
    let out = s.kubectl_stdin(
        &["create", "-f", "-"],
        &manifest("eve", &masters, "kubernetes.io/kube-apiserver-client", &["client auth"]),
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A kubelet client certificate must name a node in system:nodes: approved, then Failed.
    let (_, alice) = key_and_request("alice", Some("system:nodes"));
    s.ok_stdin(
        &["create", "-f", "-"],
        &manifest(
            "not-a-node",
            &alice,
            "kubernetes.io/kube-apiserver-client-kubelet",
            &["digital signature", "client auth"],
        ),
    );
    s.ok(&["certificate", "approve", "not-a-node"]);
    let failed = eventually(Duration::from_secs(30), "the Failed condition", || {
        let c = csr(&s, "not-a-node");
        let conds = c.pointer("/status/conditions")?.as_array()?.clone();
        conds.into_iter().find(|c| c["type"] == "Failed")
    });
    assert_eq!(failed["reason"], "SignerValidationFailure");
    assert_eq!(failed["message"], "subject common name does not begin with system:node:");
    assert_eq!(csr(&s, "not-a-node").pointer("/status/certificate"), None);
    // A node's is signed, with the usages it asked for.
    let (_, node) = key_and_request("system:node:n1", Some("system:nodes"));
    s.ok_stdin(
        &["create", "-f", "-"],
        &manifest(
            "node-n1",
            &node,
            "kubernetes.io/kube-apiserver-client-kubelet",
            &["digital signature", "client auth"],
        ),
    );
    s.ok(&["certificate", "approve", "node-n1"]);
    let pem = wait_certificate(&s, "node-n1");
    let (_, block) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).expect("pem");
    let cert = block.parse_x509().expect("x509");
    let eku = cert.extended_key_usage().expect("eku").expect("present").value;
    assert!(eku.client_auth && !eku.server_auth);
}
