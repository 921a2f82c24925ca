//! What real clients found different from upstream, second round (issue 31): server-side dry
//! runs of deletes and evictions, apply without a name, upstream's JSON key order, `[]byte`
//! fields wrapped over lines, protobuf bodies of every kind, and the smaller differences in
//! status codes and messages. Each test is named after the behaviour it pins.

mod common;

use common::{eventually, Server};
use serde_json::{json, Value};
use std::time::Duration;

const CMS: &str = "/api/v1/namespaces/default/configmaps";

fn exists(s: &Server, args: &[&str]) -> bool {
    s.kubectl(&[&["get"], args].concat()).status.success()
}

fn deleting(s: &Server, args: &[&str]) -> bool {
    let v = s.json(&[&["get"], args].concat());
    !v["metadata"]["deletionTimestamp"].is_null()
}

#[test]
fn a_server_side_dry_run_delete_deletes_nothing_in_body_or_query_form() {
    let s = Server::start_controllers();
    s.ok(&["create", "configmap", "c1", "--from-literal=a=b"]);
    s.ok(&["create", "deployment", "web", "--image=127.0.0.1:5000/busybox:1.36"]);
    let rs = eventually(Duration::from_secs(20), "the Deployment's ReplicaSet", || {
        let out = s.ok(&["get", "rs", "-l", "app=web", "-o", "name"]);
        (!out.trim().is_empty()).then(|| out.trim().to_string())
    });
    s.ok(&["create", "namespace", "n1"]);
    s.ok(&["create", "configmap", "inside", "-n", "n1"]);

    // kubectl sends dryRun in the DeleteOptions body.
    let out = s.ok(&["delete", "configmap", "c1", "--dry-run=server"]);
    assert!(out.contains("configmap \"c1\" deleted (server dry run)"), "{out}");
    s.ok(&["delete", "deployment", "web", "--dry-run=server"]);
    s.ok(&["delete", "deployment", "--all", "-A", "--dry-run=server"]);
    s.ok(&["delete", "namespace", "n1", "--dry-run=server"]);
    s.ok(&["delete", "configmaps", "--all", "-n", "n1", "--dry-run=server"]);

    // The raw forms: the body alone, the query alone, and a collection.
    let body = s.write_file("dry.json", r#"{"kind":"DeleteOptions","apiVersion":"v1","dryRun":["All"]}"#);
    let (code, obj) = s.curl("DELETE", &format!("{CMS}/c1"), Some("application/json"), Some(&body));
    assert_eq!((code, &obj["kind"], &obj["metadata"]["name"]), (200, &json!("ConfigMap"), &json!("c1")), "{obj}");
    let (code, obj) = s.curl("DELETE", &format!("{CMS}/c1?dryRun=All"), None, None);
    assert_eq!((code, &obj["metadata"]["name"]), (200, &json!("c1")), "{obj}");
    let (code, list) = s.curl("DELETE", CMS, Some("application/json"), Some(&body));
    assert_eq!((code, &list["kind"]), (200, &json!("ConfigMapList")), "{list}");
    assert!(list["items"].as_array().is_some_and(|i| !i.is_empty()), "{list}");

    // Nothing went, nothing is even marked for deletion.
    std::thread::sleep(Duration::from_secs(2));
    for what in [&["configmap", "c1"][..], &["deployment", "web"], &[rs.as_str()], &["namespace", "n1"]] {
        assert!(exists(&s, what) && !deleting(&s, what), "{what:?} was deleted by a dry run");
    }
    assert_eq!(s.ok(&["get", "namespace", "n1", "-o", "jsonpath={.status.phase}"]), "Active");
    assert!(exists(&s, &["configmap", "inside", "-n", "n1"]));

    // Upstream's validation of the body's options: 422 on DeleteOptions.
    let bad = s.write_file("bad.json", r#"{"dryRun":["Everything"]}"#);
    let (code, st) = s.curl("DELETE", &format!("{CMS}/c1"), Some("application/json"), Some(&bad));
    assert_eq!((code, st["reason"].as_str()), (422, Some("Invalid")), "{st}");
    assert_eq!(
        st["message"],
        r#"DeleteOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["Everything"]: supported values: "All""#
    );
    let both = s.write_file("both.json", r#"{"orphanDependents":true,"propagationPolicy":"Foreground"}"#);
    let (code, st) = s.curl("DELETE", &format!("{CMS}/c1"), Some("application/json"), Some(&both));
    assert_eq!(code, 422, "{st}");
    assert_eq!(st["details"]["causes"][0]["field"], "propagationPolicy");
    assert!(exists(&s, &["configmap", "c1"]));

    // And a real delete still deletes; a graceful one answers 200 as upstream (202 only with
    // orphanDependents: false).
    let (code, _) = s.curl("DELETE", &format!("{CMS}/c1"), None, None);
    assert_eq!(code, 200);
    assert!(!exists(&s, &["configmap", "c1"]));
}

#[test]
fn kubectl_drain_with_a_server_dry_run_cordons_and_evicts_nothing() {
    let s = Server::start();
    // No controllers here: the ServiceAccount admission needs the default account made by hand.
    s.ok(&["create", "serviceaccount", "default"]);
    s.ok_stdin(&["apply", "-f", "-"], r#"{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}"#);
    s.ok_stdin(
        &["apply", "-f", "-"],
        r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "127.0.0.1:5000/busybox:1.36"}]}}"#,
    );
    // Running, so the eviction goes through the disruption check like a live pod.
    s.ok(&["patch", "pod", "p", "--subresource=status", "--type=merge", "-p", r#"{"status":{"phase":"Running"}}"#]);
    let out = s.ok(&["drain", "n1", "--dry-run=server", "--force", "--ignore-daemonsets"]);
    assert!(out.contains("evicting pod default/p (server dry run)"), "{out}");
    std::thread::sleep(Duration::from_secs(1));
    assert!(exists(&s, &["pod", "p"]) && !deleting(&s, &["pod", "p"]), "a dry-run drain evicted the pod");
    assert_ne!(s.ok(&["get", "node", "n1", "-o", "jsonpath={.spec.unschedulable}"]), "true");

    // An eviction whose body and query disagree on the dry run is refused, as upstream.
    let ev = s.write_file(
        "ev.json",
        r#"{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"p"},"deleteOptions":{"dryRun":["All"]}}"#,
    );
    let path = "/api/v1/namespaces/default/pods/p/eviction";
    let (code, _) = s.curl("POST", path, Some("application/json"), Some(&ev));
    assert_eq!(code, 201);
    let none = s.write_file(
        "ev-none.json",
        r#"{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"p"},"deleteOptions":{"dryRun":["Some"]}}"#,
    );
    let (code, st) = s.curl("POST", &format!("{path}?dryRun=All"), Some("application/json"), Some(&none));
    assert_eq!(code, 400, "{st}");
    assert_eq!(st["message"], "Non-matching dry-run options in request and content: [All] and [Some]");
    assert!(exists(&s, &["pod", "p"]) && !deleting(&s, &["pod", "p"]));
    // Without a dry run the eviction evicts.
    let real = s.write_file("ev-real.json", r#"{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"p"}}"#);
    let (code, _) = s.curl("POST", path, Some("application/json"), Some(&real));
    assert_eq!(code, 201);
    assert!(!exists(&s, &["pod", "p"]) || deleting(&s, &["pod", "p"]));
}

const FOO_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: foos.clux.dev}
spec:
  group: clux.dev
  names: {kind: Foo, plural: foos, singular: foo}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

#[test]
fn server_side_apply_takes_the_name_from_the_url_and_refuses_another() {
    let s = Server::start();
    s.ok_stdin(&["apply", "-f", "-"], FOO_CRD);
    s.ok(&["wait", "--for=condition=Established", "crd/foos.clux.dev", "--timeout=30s"]);
    s.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: clux.dev/v1\nkind: Foo\nmetadata: {name: baz}\nspec: {name: baz, info: old}\n",
    );
    // kube-rs's own test: an applied configuration without metadata.name, forced.
    let foos = "/apis/clux.dev/v1/namespaces/default/foos";
    let cfg =
        s.write_file("apply.json", r#"{"apiVersion":"clux.dev/v1","kind":"Foo","spec":{"name":"baz","info":"new"}}"#);
    let ct = Some("application/apply-patch+yaml");
    let (code, obj) = s.curl("PATCH", &format!("{foos}/baz?fieldManager=kube&force=true"), ct, Some(&cfg));
    assert_eq!((code, &obj["metadata"]["name"], &obj["spec"]["info"]), (200, &json!("baz"), &json!("new")), "{obj}");
    // Creating through apply without any name: upstream's checkName.
    let (code, st) = s.curl("PATCH", &format!("{foos}/qux?fieldManager=kube&force=true"), ct, Some(&cfg));
    assert_eq!(code, 400, "{st}");
    assert_eq!(st["message"], "the name of the object (qux based on URL) was undeterminable: name must be provided");
    assert!(!exists(&s, &["foos", "qux"]));
    // A name that is not the URL's.
    let other = s
        .write_file("other.json", r#"{"apiVersion":"clux.dev/v1","kind":"Foo","metadata":{"name":"other"},"spec":{}}"#);
    let (code, st) = s.curl("PATCH", &format!("{foos}/baz?fieldManager=kube&force=true"), ct, Some(&other));
    assert_eq!(code, 400, "{st}");
    assert_eq!(st["message"], "the name of the object (other) does not match the name on the URL (baz)");
    // A PUT without a name is refused with the same words.
    let noname = s.write_file("put.json", r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}"#);
    s.ok(&["create", "configmap", "named"]);
    let (code, st) = s.curl("PUT", &format!("{CMS}/named"), Some("application/json"), Some(&noname));
    assert_eq!(
        (code, st["message"].as_str()),
        (400, Some("the name of the object (named based on URL) was undeterminable: name must be provided"))
    );
}

/// The top-level keys of a JSON text, in order.
fn top_keys(text: &str) -> Vec<String> {
    let v: Value = serde_json::from_str(text).expect("json");
    v.as_object().expect("object").keys().cloned().collect()
}

#[test]
fn objects_are_encoded_in_upstreams_key_order() {
    let s = Server::start();
    let cm = s.write_file(
        "cm.json",
        r#"{"data":{"a":"b"},"metadata":{"name":"order"},"apiVersion":"v1","kind":"ConfigMap"}"#,
    );
    let (code, text) = s.curl_text("POST", CMS, &["Content-Type: application/json".into()], Some(&cm));
    assert_eq!(code, 201, "{text}");
    assert!(text.starts_with(r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"#), "{text}");
    let (_, text) = s.curl_text("GET", &format!("{CMS}/order"), &[], None);
    assert!(text.starts_with(r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"#), "{text}");
    s.ok(&["create", "service", "clusterip", "svc", "--tcp=80:8080"]);
    let (_, text) = s.curl_text("GET", "/api/v1/namespaces/default/services/svc", &[], None);
    assert_eq!(top_keys(&text), ["kind", "apiVersion", "metadata", "spec", "status"], "{text}");
    // A dry run's answer too, and a watch's events.
    let (code, text) = s.curl_text(
        "POST",
        "/api/v1/namespaces/default/services?dryRun=All",
        &["Content-Type: application/json".into()],
        Some(&s.write_file(
            "svc.json",
            r#"{"apiVersion":"v1","kind":"Service","spec":{"ports":[{"port":80}]},"metadata":{"name":"dry"}}"#,
        )),
    );
    assert_eq!(code, 201, "{text}");
    assert_eq!(top_keys(&text), ["kind", "apiVersion", "metadata", "spec", "status"], "{text}");
    let (_, text) = s.curl_text(
        "GET",
        &format!("{CMS}?watch=true&timeoutSeconds=1&fieldSelector=metadata.name%3Dorder"),
        &[],
        None,
    );
    let event = text.lines().next().expect("an event");
    assert!(event.contains(r#""object":{"kind":"ConfigMap","apiVersion":"v1","metadata":"#), "{event}");
}

/// The Kubernetes documentation's TLS Secret example: base64 wrapped at 76 columns.
const TLS_SECRET: &str = r#"apiVersion: v1
kind: Secret
metadata:
  name: secret-tls
type: kubernetes.io/tls
data:
  # values are base64 encoded, which obscures them but does NOT provide
  # any useful level of confidentiality
  tls.crt: |
    LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUNVakNDQWJzQ0FnMytNQTBHQ1NxR1NJYjNE
    UUVCQlFVQU1JR2JNUXN3Q1FZRFZRUUdFd0pLVURFT01Bd0dBMVVFQ0JNRlZHOXJlVzh4RURBT0Jn
    TlZCQWNUQjBOb2RXOHRhM1V4RVRBUEJnTlZCQW9UQ0VaeVlXNXJOREZqTVJnd0ZnWURWUVFMRXc5
  tls.key: |
    RXhhbXBsZSBkYXRhIGZvciB0aGUgVExTIGNydCBmaWVsZA==
"#;

#[test]
fn base64_wrapped_over_lines_is_read_as_upstream_reads_it() {
    let s = Server::start();
    s.ok_stdin(&["apply", "-f", "-"], TLS_SECRET);
    let got = s.json(&["get", "secret", "secret-tls"]);
    let crt = got["data"]["tls.crt"].as_str().expect("tls.crt");
    assert!(!crt.contains('\n'), "stored as plain base64: {crt}");
    assert!(
        crt.starts_with("LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUNVakNDQWJzQ0FnMytNQTBHQ1NxR1NJYjNEUUVC"),
        "{crt}"
    );
    assert_eq!(got["data"]["tls.key"], "RXhhbXBsZSBkYXRhIGZvciB0aGUgVExTIGNydCBmaWVsZA==");
    // Every []byte field: a ConfigMap's binaryData, with CRLF line ends.
    s.ok_stdin(
        &["apply", "-f", "-"],
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bin"},"binaryData":{"b":"AAEC\r\nAw=="}}"#,
    );
    assert_eq!(s.json(&["get", "configmap", "bin"])["binaryData"]["b"], "AAECAw==");
    // What does not decode gets upstream's words.
    let bad = s
        .write_file("bad.json", r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"bad"},"data":{"k":"YW!j"}}"#);
    let (code, st) = s.curl("POST", "/api/v1/namespaces/default/secrets", Some("application/json"), Some(&bad));
    assert_eq!(code, 400, "{st}");
    assert_eq!(
        st["message"],
        r#"Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte 2"#
    );
}

#[test]
fn kubectl_certificate_approve_and_deny_send_protobuf_that_is_understood() {
    let s = Server::start();
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.distinguished_name.push(rcgen::DnType::CommonName, "alice");
    params.distinguished_name.push(rcgen::DnType::OrganizationName, "devs");
    let pem = params.serialize_request(&key).expect("csr").pem().expect("pem");
    use base64::Engine as _;
    let request = base64::engine::general_purpose::STANDARD.encode(pem);
    for name in ["alice", "bob"] {
        s.ok_stdin(
            &["apply", "-f", "-"],
            &json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                    "metadata": {"name": name},
                    "spec": {"request": request, "signerName": "kubernetes.io/kube-apiserver-client",
                             "usages": ["client auth"]}})
            .to_string(),
        );
    }
    let out = s.ok(&["certificate", "approve", "alice"]);
    assert!(out.contains("approved"), "{out}");
    let out = s.ok(&["certificate", "deny", "bob"]);
    assert!(out.contains("denied"), "{out}");
    let cond = |n: &str| s.ok(&["get", "csr", n, "-o", "jsonpath={.status.conditions[0].type}"]);
    assert_eq!((cond("alice"), cond("bob")), ("Approved".into(), "Denied".into()));
}

#[test]
fn discovery_names_each_stored_resources_storage_version_hash() {
    let s = Server::start();
    let v1: Value = serde_json::from_str(&s.ok(&["get", "--raw", "/api/v1"])).expect("json");
    let hash = |list: &Value, name: &str| {
        list["resources"]
            .as_array()
            .and_then(|rs| rs.iter().find(|r| r["name"] == name))
            .map(|r| r["storageVersionHash"].clone())
    };
    // The values a v1.35 kube-apiserver shows.
    assert_eq!(hash(&v1, "configmaps"), Some(json!("qFsyl6wFWjQ=")));
    assert_eq!(hash(&v1, "pods"), Some(json!("xPOwRZ+Yhw8=")));
    assert_eq!(hash(&v1, "pods/status"), Some(Value::Null), "subresources have none");
    let apps: Value = serde_json::from_str(&s.ok(&["get", "--raw", "/apis/apps/v1"])).expect("json");
    assert_eq!(hash(&apps, "deployments"), Some(json!("8aSe+NMegvE=")));
    let authz: Value = serde_json::from_str(&s.ok(&["get", "--raw", "/apis/authorization.k8s.io/v1"])).expect("json");
    assert_eq!(hash(&authz, "selfsubjectaccessreviews"), Some(Value::Null), "nothing stored, no hash");
}

#[test]
fn rollout_history_of_daemonsets_and_statefulsets_shows_their_change_cause() {
    let s = Server::start_controllers();
    let template = r#"{"metadata":{"labels":{"app":"APP"}},"spec":{"containers":[{"name":"c","image":"127.0.0.1:5000/busybox:1.36"}]}}"#;
    for (kind, name) in [("DaemonSet", "ds"), ("StatefulSet", "sts")] {
        s.ok_stdin(
            &["apply", "-f", "-"],
            &format!(
                r#"{{"apiVersion":"apps/v1","kind":"{kind}","metadata":{{"name":"{name}","annotations":{{"kubernetes.io/change-cause":"first rollout"}}}},
                    "spec":{{"selector":{{"matchLabels":{{"app":"{name}"}}}},"template":{}}}}}"#,
                template.replace("APP", name)
            ),
        );
    }
    for what in ["ds/ds", "sts/sts"] {
        let out = eventually(Duration::from_secs(20), "a ControllerRevision", || {
            let out = s.ok(&["rollout", "history", what]);
            out.contains("first rollout").then_some(out)
        });
        assert!(out.contains("1         first rollout"), "{what}: {out}");
    }
}

#[test]
fn smaller_differences_answer_upstreams_codes_and_words() {
    let s = Server::start();
    // A PUT with resourceVersion "0" is unconditional for kinds that allow it.
    s.ok(&["create", "configmap", "zero", "--from-literal=a=1"]);
    let mut cm = s.json(&["get", "configmap", "zero"]);
    cm["metadata"]["resourceVersion"] = json!("0");
    cm["data"]["a"] = json!("2");
    let f = s.write_file("zero.json", &cm.to_string());
    let (code, obj) = s.curl("PUT", &format!("{CMS}/zero"), Some("application/json"), Some(&f));
    assert_eq!((code, &obj["data"]["a"]), (200, &json!("2")), "{obj}");
    s.ok_stdin(&["apply", "-f", "-"], r#"{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n0"}}"#);
    let mut node = s.json(&["get", "node", "n0"]);
    node["metadata"]["resourceVersion"] = json!("0");
    node["metadata"]["labels"] = json!({"x": "y"});
    let f = s.write_file("node.json", &node.to_string());
    let (code, obj) = s.curl("PUT", "/api/v1/nodes/n0", Some("application/json"), Some(&f));
    assert_eq!((code, &obj["metadata"]["labels"]["x"]), (200, &json!("y")), "{obj}");

    // A strategic merge patch of the wrong shape: 422 with the unstructured converter's words.
    s.ok(&["create", "serviceaccount", "default"]);
    s.ok_stdin(
        &["apply", "-f", "-"],
        r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "127.0.0.1:5000/busybox:1.36"}]}}"#,
    );
    let out = s.kubectl(&["patch", "pod", "p", "--type=strategic", "-p", r#"{"metadata":{"labels":"invalid"}}"#]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot restore map from string"), "{err}");
    let patch = s.write_file("smp.json", r#"{"metadata":{"labels":"invalid"}}"#);
    let (code, st) = s.curl(
        "PATCH",
        "/api/v1/namespaces/default/pods/p",
        Some("application/strategic-merge-patch+json"),
        Some(&patch),
    );
    assert_eq!((code, st["reason"].as_str()), (422, Some("Invalid")), "{st}");
    assert_eq!(
        st["message"],
        r#" "" is invalid: patch: Invalid value: "map[metadata:map[labels:invalid]]": cannot restore map from string"#
    );
    assert_eq!(st["details"]["causes"][0]["field"], "patch");

    // A create of a field of the wrong type: encoding/json's words.
    let bad =
        s.write_file("badtype.json", r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"t","labels":"x"}}"#);
    let (code, st) = s.curl("POST", CMS, Some("application/json"), Some(&bad));
    assert_eq!(code, 400, "{st}");
    assert_eq!(
        st["message"],
        r#"ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal string into Go struct field ObjectMeta.metadata.labels of type map[string]string"#
    );

    // YAML sent as JSON (`kubectl create --raw`, or no Content-Type at all).
    let yaml = s.write_file("ns.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: raw\n");
    let (code, st) = s.curl_text("POST", "/api/v1/namespaces", &["Content-Type:".into()], Some(&yaml));
    let st: Value = serde_json::from_str(&st).expect("status");
    assert_eq!(code, 400, "{st}");
    assert_eq!(
        st["message"],
        "the object provided is unrecognized (must be of type Namespace): couldn't get version/kind; json parse error: invalid character 'a' looking for beginning of value (61706956657273696f6e3a2076310a6b696e643a204e616d657370616365 ...)"
    );
    let out = s.kubectl(&["create", "--raw", "/api/v1/namespaces", "-f", yaml.to_str().expect("path")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the object provided is unrecognized (must be of type Namespace)"), "{err}");
    assert!(!exists(&s, &["namespace", "raw"]));
}

#[test]
fn an_eviction_takes_one_disruption_from_its_budget_and_a_dry_run_takes_none() {
    let s = Server::start();
    s.ok(&["create", "serviceaccount", "default"]);
    for p in ["a", "b"] {
        s.ok_stdin(
            &["apply", "-f", "-"],
            &format!(
                r#"{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "{p}", "labels": {{"app": "x"}}}},
                    "spec": {{"containers": [{{"name": "c", "image": "127.0.0.1:5000/busybox:1.36"}}]}}}}"#
            ),
        );
        s.ok(&["patch", "pod", p, "--subresource=status", "--type=merge", "-p", r#"{"status":{"phase":"Running"}}"#]);
    }
    s.ok(&["create", "poddisruptionbudget", "budget", "--selector=app=x", "--max-unavailable=1"]);
    // No disruption controller runs here: the budget's status is written as it would write it.
    s.ok(&[
        "patch",
        "pdb",
        "budget",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"observedGeneration":1,"disruptionsAllowed":1,"currentHealthy":2,"desiredHealthy":1,"expectedPods":2}}"#,
    ]);
    let evict = |pod: &str, query: &str| {
        let f = s.write_file(
            &format!("ev-{pod}.json"),
            &format!(r#"{{"apiVersion":"policy/v1","kind":"Eviction","metadata":{{"name":"{pod}"}}}}"#),
        );
        s.curl(
            "POST",
            &format!("/api/v1/namespaces/default/pods/{pod}/eviction{query}"),
            Some("application/json"),
            Some(&f),
        )
    };
    let allowed = || s.json(&["get", "pdb", "budget"])["status"]["disruptionsAllowed"].clone();
    let (code, _) = evict("a", "?dryRun=All");
    assert_eq!((code, allowed()), (201, json!(1)), "a dry run takes nothing from the budget");
    let (code, _) = evict("a", "");
    assert_eq!(code, 201);
    let pdb = s.json(&["get", "pdb", "budget"]);
    assert_eq!(pdb["status"]["disruptionsAllowed"], 0, "{pdb}");
    assert!(pdb["status"]["disruptedPods"]["a"].is_string(), "{pdb}");
    let (code, st) = evict("b", "");
    assert_eq!((code, st["reason"].as_str()), (429, Some("TooManyRequests")), "{st}");
    assert!(exists(&s, &["pod", "b"]) && !deleting(&s, &["pod", "b"]));
}
