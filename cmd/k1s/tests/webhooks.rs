//! Admission webhooks against a real `k1s server --disable-agent`, driven with stock kubectl:
//! a validating webhook reached by URL denies, a mutating one reached through a Service's
//! endpoints patches, failure policies, timeouts, namespace selectors and dry runs behave as
//! upstream's. The webhooks are an HTTPS server of the test's own on 127.0.0.1, with a
//! certificate of a CA the configurations' caBundle names.

mod common;

use base64::Engine as _;
use bytes::Bytes;
use common::{eventually, Server};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the webhook server has seen: each review's request, by path.
type Seen = Arc<Mutex<Vec<(String, Value)>>>;

struct Hooks {
    port: u16,
    ca_bundle: String,
    seen: Seen,
    _runtime: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
}

/// The answer to one review: `/validate` refuses ConfigMaps labelled `deny=true` (and warns
/// about those labelled `warn=true`, refused or not), `/mutate`
/// labels them `mutated=yes`, `/delete` allows with a warning, `/slow` answers after 3 s.
async fn answer(path: &str, review: &Value) -> Value {
    let req = &review["request"];
    let uid = req["uid"].clone();
    let labels = req["object"]["metadata"]["labels"].clone();
    let response = match path {
        "/validate" if labels["deny"] == "true" => {
            let warnings = if labels["warn"] == "true" { json!(["denied, and warned"]) } else { json!([]) };
            json!({"uid": uid, "allowed": false, "warnings": warnings,
                   "status": {"code": 403, "message": "label deny=true is not allowed"}})
        }
        "/validate" if labels["warn"] == "true" => {
            json!({"uid": uid, "allowed": true, "warnings": ["label warn=true is deprecated", "use \"caution\" — instead"]})
        }
        "/mutate" => {
            let op = if labels.is_object() {
                json!([{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}])
            } else {
                json!([{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}])
            };
            let patch = base64::engine::general_purpose::STANDARD.encode(op.to_string());
            json!({"uid": uid, "allowed": true, "patchType": "JSONPatch", "patch": patch})
        }
        "/delete" => {
            json!({"uid": uid, "allowed": true, "warnings": [format!("deleting configmap {}", req["name"].as_str().unwrap_or(""))]})
        }
        "/slow" => {
            tokio::time::sleep(Duration::from_secs(3)).await;
            json!({"uid": uid, "allowed": true})
        }
        _ => json!({"uid": uid, "allowed": true}),
    };
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}

/// The webhook server, listening on `ip` (loopback, or the machine's own address where an
/// EndpointSlice must name it: endpoints may not be loopback addresses).
fn start_hooks(ip: std::net::IpAddr) -> Hooks {
    let dir = tempfile::tempdir().expect("tmp");
    let pki = k1s_pki::Pki::ensure(dir.path(), &["127.0.0.1".to_string()]).expect("pki");
    let pair = pki.serving("hooks", "hooks", &[ip.to_string(), "hooks.default.svc".into()]).expect("cert");
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(pair.cert_pem.as_bytes()).collect::<Result<_, _>>().expect("cert");
    let key = PrivateKeyDer::from_pem_slice(pair.key_pem.as_bytes()).expect("key");
    let mut cfg = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("server config");
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("rt");
    let listener = runtime.block_on(tokio::net::TcpListener::bind((ip, 0))).expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let seen: Seen = Arc::default();
    let recorded = seen.clone();
    runtime.spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { continue };
            let (acceptor, recorded) = (acceptor.clone(), recorded.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else { return };
                let svc = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let recorded = recorded.clone();
                    async move {
                        let path = req.uri().path().to_string();
                        let query = req.uri().query().unwrap_or("").to_string();
                        let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                        let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                        let mut seen = review["request"].clone();
                        seen["query"] = json!(query);
                        recorded.lock().expect("lock").push((path.clone(), seen));
                        let reply = answer(&path, &review).await;
                        let mut resp = hyper::Response::new(Full::new(Bytes::from(reply.to_string())));
                        resp.headers_mut().insert("content-type", http::HeaderValue::from_static("application/json"));
                        Ok::<_, std::convert::Infallible>(resp)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), svc).await;
            });
        }
    });
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(&pki.ca.cert_pem);
    Hooks { port, ca_bundle, seen, _runtime: runtime, _dir: dir }
}

impl Hooks {
    fn seen(&self, path: &str) -> Vec<Value> {
        self.seen.lock().expect("lock").iter().filter(|(p, _)| p == path).map(|(_, r)| r.clone()).collect()
    }
}

fn configuration(kind: &str, name: &str, client_config: Value, extra: Value) -> String {
    let mut hook = json!({
        "name": name,
        "clientConfig": client_config,
        "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "failurePolicy": "Fail",
    });
    if let (Some(h), Some(e)) = (hook.as_object_mut(), extra.as_object()) {
        h.extend(e.clone());
    }
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": [hook],
    })
    .to_string()
}

fn create_cm(s: &Server, args: &[&str]) -> std::process::Output {
    let mut a = vec!["create", "configmap"];
    a.extend_from_slice(args);
    s.kubectl(&a)
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn validating_webhooks_by_url_deny_and_their_failure_policy_decides_on_errors() {
    let hooks = start_hooks(std::net::Ipv4Addr::LOCALHOST.into());
    let s = Server::start();
    let url =
        |path: &str| json!({"url": format!("https://127.0.0.1:{}{path}", hooks.port), "caBundle": hooks.ca_bundle});
    s.ok_stdin(
        &["apply", "-f", "-"],
        &configuration("ValidatingWebhookConfiguration", "deny.example.com", url("/validate"), json!({})),
    );
    // The configuration takes effect as soon as the API server has read it.
    eventually(Duration::from_secs(10), "the webhook to be called", || {
        let _ = s.kubectl(&["create", "configmap", "probe", "--dry-run=server"]);
        (!hooks.seen("/validate").is_empty()).then_some(())
    });
    let allowed = create_cm(&s, &["good", "--from-literal=a=b"]);
    assert!(allowed.status.success(), "no label, allowed: {}", stderr(&allowed));
    let out = s.kubectl_stdin(
        &["create", "-f", "-"],
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "denied", "labels": {"deny": "true"}}})
            .to_string(),
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out)
            .contains(r#"admission webhook "deny.example.com" denied the request: label deny=true is not allowed"#),
        "{}",
        stderr(&out)
    );
    assert!(!s.kubectl(&["get", "configmap", "denied"]).status.success(), "nothing was written");
    // A webhook's warnings reach the client as Warning headers, which kubectl prints.
    let warned = s.kubectl_stdin(
        &["create", "-f", "-"],
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "warned", "labels": {"warn": "true"}}})
            .to_string(),
    );
    assert!(warned.status.success(), "{}", stderr(&warned));
    for want in ["Warning: label warn=true is deprecated", "Warning: use \"caution\" — instead"] {
        assert!(stderr(&warned).contains(want), "{want:?} in {}", stderr(&warned));
    }
    // A refusal carries the refusing webhook's warnings too.
    let both = s.kubectl_stdin(
        &["create", "-f", "-"],
        &json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "denied", "labels": {"deny": "true", "warn": "true"}}})
        .to_string(),
    );
    assert!(!both.status.success());
    assert!(stderr(&both).contains("Warning: denied, and warned"), "{}", stderr(&both));
    assert!(stderr(&both).contains("label deny=true is not allowed"), "{}", stderr(&both));
    // Deletions carry their webhooks' warnings too.
    let on_delete = json!({"rules": [{"operations": ["DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]});
    s.ok_stdin(
        &["apply", "-f", "-"],
        &configuration("ValidatingWebhookConfiguration", "deletes.example.com", url("/delete"), on_delete),
    );
    let mut n = 0;
    let deleted = eventually(Duration::from_secs(10), "a deletion to carry the webhook's warning", || {
        n += 1;
        let name = format!("doomed-{n}");
        assert!(create_cm(&s, &[&name]).status.success());
        let out = s.kubectl(&["delete", "configmap", &name]);
        stderr(&out).contains(&format!("Warning: deleting configmap {name}")).then_some(out)
    });
    assert!(deleted.status.success(), "{}", stderr(&deleted));
    s.ok(&["delete", "validatingwebhookconfiguration", "deletes.example.com"]);
    let (code, status) = s.curl(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some("application/json"),
        Some(&s.write_file(
            "denied.json",
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"denied","labels":{"deny":"true"}}}"#,
        )),
    );
    assert_eq!(
        (code, status["code"].as_i64(), status["status"].as_str()),
        (403, Some(403), Some("Failure")),
        "{status}"
    );
    // What the webhook was sent.
    let review = hooks.seen("/validate").into_iter().find(|r| r["name"] == "denied").expect("review");
    assert_eq!(review["operation"], "CREATE");
    assert_eq!(review["kind"], json!({"group": "", "version": "v1", "kind": "ConfigMap"}));
    assert_eq!(review["resource"], json!({"group": "", "version": "v1", "resource": "configmaps"}));
    assert_eq!(review["namespace"], "default");
    assert!(
        review["userInfo"]["groups"].as_array().is_some_and(|g| g.iter().any(|g| g == "system:masters")),
        "{review}"
    );
    assert_eq!(review["query"], "timeout=10s");

    // A webhook nobody answers: Fail refuses, Ignore lets the request through.
    let dead = json!({"url": "https://127.0.0.1:1/validate", "caBundle": hooks.ca_bundle});
    s.ok_stdin(
        &["apply", "-f", "-"],
        &configuration("ValidatingWebhookConfiguration", "dead.example.com", dead.clone(), json!({})),
    );
    let failed = eventually(Duration::from_secs(10), "the dead webhook to fail requests", || {
        let out = create_cm(&s, &["after-dead"]);
        (!out.status.success()).then_some(out)
    });
    assert!(stderr(&failed).contains(r#"failed calling webhook "dead.example.com": failed to call webhook: Post "https://127.0.0.1:1/validate?timeout=10s""#), "{}", stderr(&failed));
    s.ok_stdin(
        &["apply", "-f", "-"],
        &configuration("ValidatingWebhookConfiguration", "dead.example.com", dead, json!({"failurePolicy": "Ignore"})),
    );
    eventually(Duration::from_secs(10), "Ignore to let requests through", || {
        create_cm(&s, &["after-ignore"]).status.success().then_some(())
    });
    // A webhook slower than its timeout.
    s.ok(&["delete", "validatingwebhookconfiguration", "dead.example.com"]);
    s.ok_stdin(
        &["apply", "-f", "-"],
        &configuration(
            "ValidatingWebhookConfiguration",
            "slow.example.com",
            url("/slow"),
            json!({"timeoutSeconds": 1}),
        ),
    );
    let slow = eventually(Duration::from_secs(10), "the slow webhook to time out", || {
        let out = create_cm(&s, &["after-slow"]);
        (!out.status.success()).then_some(out)
    });
    assert!(stderr(&slow).contains("context deadline exceeded"), "{}", stderr(&slow));
}

#[test]
fn mutating_webhooks_behind_a_service_patch_objects_in_selected_namespaces() {
    let ip = k1s_kubelet::host::detect_node_ip().expect("this machine has a global IPv4 address");
    let hooks = start_hooks(ip);
    let s = Server::start();
    // A Service without a selector, its endpoint the test's webhook server.
    s.ok_stdin(
        &["apply", "-f", "-"],
        &format!(
            r#"
apiVersion: v1
kind: Service
metadata: {{name: hooks, namespace: default}}
spec:
  ports: [{{name: https, port: 443, targetPort: {port}}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: hooks-1
  namespace: default
  labels: {{kubernetes.io/service-name: hooks}}
addressType: IPv4
endpoints: [{{addresses: ["{ip}"], conditions: {{ready: true}}}}]
ports: [{{name: https, port: {port}, protocol: TCP}}]
"#,
            port = hooks.port
        ),
    );
    s.ok(&["create", "namespace", "hooked"]);
    s.ok(&["label", "namespace", "hooked", "hooks=on"]);
    s.ok(&["create", "namespace", "plain"]);
    let service =
        json!({"service": {"namespace": "default", "name": "hooks", "path": "/mutate"}, "caBundle": hooks.ca_bundle});
    s.ok_stdin(
        &["apply", "-f", "-"],
        &configuration(
            "MutatingWebhookConfiguration",
            "label.example.com",
            service,
            json!({"namespaceSelector": {"matchLabels": {"hooks": "on"}}}),
        ),
    );
    let cm = eventually(Duration::from_secs(10), "the mutating webhook to label", || {
        let name = format!("m{}", hooks.seen("/mutate").len());
        let out = s.kubectl(&["create", "configmap", &name, "-n", "hooked"]);
        if !out.status.success() {
            eprintln!("create {name}: {}", stderr(&out));
            return None;
        }
        let cm = s.json(&["get", "configmap", &name, "-n", "hooked"]);
        (cm["metadata"]["labels"]["mutated"] == "yes").then_some(cm)
    });
    assert_eq!(cm["metadata"]["labels"]["mutated"], "yes", "{cm}");
    // Outside the selected namespaces nothing is sent.
    let before = hooks.seen("/mutate").len();
    s.ok(&["create", "configmap", "untouched", "-n", "plain"]);
    assert!(s.json(&["get", "configmap", "untouched", "-n", "plain"])["metadata"]["labels"].is_null());
    assert_eq!(hooks.seen("/mutate").len(), before);
    // Updates go too, and dry runs reach webhooks without side effects, writing nothing.
    s.ok(&["label", "configmap", "untouched", "-n", "plain", "x=y"]);
    let out = s.ok(&["create", "configmap", "dry", "-n", "hooked", "--dry-run=server", "-o", "json"]);
    let dry: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(dry["metadata"]["labels"]["mutated"], "yes", "{dry}");
    assert!(hooks.seen("/mutate").iter().any(|r| r["name"] == "dry" && r["dryRun"] == true));
    assert!(!s.kubectl(&["get", "configmap", "dry", "-n", "hooked"]).status.success());
    // Webhook configurations are never sent to webhooks.
    assert!(hooks.seen("/mutate").iter().all(|r| r["kind"]["kind"] == "ConfigMap"));
}

#[test]
fn match_conditions_reinvocation_and_equivalent_versions() {
    let hooks = start_hooks(std::net::Ipv4Addr::LOCALHOST.into());
    let s = Server::start();
    let url =
        |path: &str| json!({"url": format!("https://127.0.0.1:{}{path}", hooks.port), "caBundle": hooks.ca_bundle});
    // A false match condition: the webhook is not called (it would deny).
    let conditions = json!({"matchConditions": [
        {"name": "not-exempt", "expression": "!has(object.metadata.labels) || !('exempt' in object.metadata.labels)"}]});
    s.ok_stdin(
        &["apply", "-f", "-"],
        &configuration("ValidatingWebhookConfiguration", "deny.example.com", url("/validate"), conditions),
    );
    let denied =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "denied", "labels": {"deny": "true"}}});
    eventually(Duration::from_secs(10), "the webhook to be called", || {
        let out = s.kubectl_stdin(&["create", "--dry-run=server", "-f", "-"], &denied.to_string());
        (!out.status.success()).then_some(())
    });
    let exempt = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "exempt", "labels": {"deny": "true", "exempt": "yes"}}});
    let out = s.kubectl_stdin(&["create", "-f", "-"], &exempt.to_string());
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(hooks.seen("/validate").iter().all(|r| r["name"] != "exempt"), "the webhook was not called");
    // A condition that fails to evaluate: Fail refuses without calling the webhook.
    let failing =
        json!({"matchConditions": [{"name": "broken", "expression": "object.metadata.labels.missing == 'x'"}]});
    s.ok_stdin(
        &["apply", "-f", "-"],
        &configuration("ValidatingWebhookConfiguration", "broken.example.com", url("/allow"), failing),
    );
    let refused = eventually(Duration::from_secs(10), "the failing condition to refuse", || {
        let out = create_cm(&s, &["plain", "--from-literal=a=b"]);
        (!out.status.success()).then_some(out)
    });
    assert!(
        stderr(&refused).contains(
            "configmaps \"plain\" is forbidden: expression 'object.metadata.labels.missing == 'x'' resulted in error"
        ),
        "{}",
        stderr(&refused)
    );
    assert!(hooks.seen("/allow").is_empty());
    s.ok(&["delete", "validatingwebhookconfiguration", "broken.example.com", "deny.example.com"]);

    // reinvocationPolicy IfNeeded: a webhook called before another changed the object is
    // called again.
    s.ok_stdin(
        &["apply", "-f", "-"],
        &configuration(
            "MutatingWebhookConfiguration",
            "a.example.com",
            url("/count"),
            json!({"reinvocationPolicy": "IfNeeded"}),
        ),
    );
    s.ok_stdin(
        &["apply", "-f", "-"],
        &configuration("MutatingWebhookConfiguration", "b.example.com", url("/mutate"), json!({})),
    );
    eventually(Duration::from_secs(10), "both mutating webhooks to be called", || {
        let name = format!("r{}", hooks.seen("/mutate").len());
        let _ = create_cm(&s, &[&name]);
        (!hooks.seen("/mutate").is_empty() && !hooks.seen("/count").is_empty()).then_some(())
    });
    s.ok(&["create", "configmap", "reinvoked"]);
    let calls = hooks.seen("/count").iter().filter(|r| r["name"] == "reinvoked").count();
    assert_eq!(calls, 2, "called, then reinvoked after b changed the object");
    s.ok(&["delete", "mutatingwebhookconfiguration", "a.example.com", "b.example.com"]);

    // matchPolicy Equivalent: a rule for autoscaling/v1 sees an autoscaling/v2 request, as v1.
    let hpa_rule = json!({"rules": [{"operations": ["CREATE"], "apiGroups": ["autoscaling"], "apiVersions": ["v1"], "resources": ["horizontalpodautoscalers"]}]});
    s.ok_stdin(
        &["apply", "-f", "-"],
        &configuration("ValidatingWebhookConfiguration", "hpa.example.com", url("/hpa"), hpa_rule),
    );
    let hpa = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
                     "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                              "minReplicas": 1, "maxReplicas": 3,
                              "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]}});
    let review = eventually(Duration::from_secs(10), "the v1 webhook to see the v2 request", || {
        let _ = s.kubectl_stdin(&["create", "--dry-run=server", "-f", "-"], &hpa.to_string());
        hooks.seen("/hpa").first().cloned()
    });
    assert_eq!(review["kind"], json!({"group": "autoscaling", "version": "v1", "kind": "HorizontalPodAutoscaler"}));
    assert_eq!(review["requestKind"]["version"], "v2");
    assert_eq!(review["object"]["apiVersion"], "autoscaling/v1");
    assert_eq!(review["object"]["spec"]["targetCPUUtilizationPercentage"], 50, "{review}");
}
