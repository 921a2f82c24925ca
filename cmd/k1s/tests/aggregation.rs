//! API aggregation against a real `k1s server --disable-agent`, driven with stock kubectl:
//! the server's local APIServices, an APIService for `v1alpha1.test.k1s.io` served by an HTTPS
//! API server of the test's own on loopback (reached through an `ExternalName` Service naming
//! `localhost`, as upstream's resolver reaches one: endpoints may not be loopback addresses, and
//! the test talks to nothing but loopback), to which authorized requests are proxied with the caller's identity in the front proxy's
//! headers and the front proxy's client certificate, its discovery merged into `/apis` and
//! aggregated discovery, availability with upstream's reasons, and validation.

mod common;

use base64::Engine as _;
use bytes::Bytes;
use common::{eventually, Server};
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One request the test API server received: path, X-Remote-User, X-Remote-Group values, and
/// the common name of the client certificate it came with.
#[derive(Clone, Debug)]
struct Seen {
    path: String,
    user: String,
    groups: Vec<String>,
    client_cn: String,
}

struct Backend {
    port: u16,
    ca_bundle: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    _runtime: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
}

const GV: &str = "/apis/test.k1s.io/v1alpha1";

fn answer(path: &str) -> (u16, Value) {
    match path {
        GV => (
            200,
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "test.k1s.io/v1alpha1", "resources": [
                {"name": "flunders", "singularName": "flunder", "namespaced": true, "kind": "Flunder",
                 "verbs": ["get", "list"], "shortNames": ["fl"]}]}),
        ),
        "/apis/metrics.k8s.io/v1beta1" => (
            200,
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "metrics.k8s.io/v1beta1", "resources": [
                {"name": "pods", "singularName": "", "namespaced": true, "kind": "PodMetrics", "verbs": ["get", "list"]}]}),
        ),
        "/apis/test.k1s.io/v1alpha1/namespaces/default/flunders" => (
            200,
            json!({"kind": "FlunderList", "apiVersion": "test.k1s.io/v1alpha1", "metadata": {"resourceVersion": "1"},
                   "items": [{"apiVersion": "test.k1s.io/v1alpha1", "kind": "Flunder",
                              "metadata": {"name": "one", "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z"}}]}),
        ),
        _ => {
            (404, json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}))
        }
    }
}

/// The aggregated API server: HTTPS on 127.0.0.1 with a certificate for `api.default.svc` from
/// a CA of its own, requiring a client certificate of `requestheader_ca` (the front proxy's).
fn start_backend(requestheader_ca: &str) -> Backend {
    let dir = tempfile::tempdir().expect("tmp");
    let pki = k1s_pki::Pki::ensure(dir.path(), &["127.0.0.1".to_string()]).expect("pki");
    let pair = pki.serving("api", "api", &["api.default.svc".into()]).expect("cert");
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(pair.cert_pem.as_bytes()).collect::<Result<_, _>>().expect("cert");
    let key = PrivateKeyDer::from_pem_slice(pair.key_pem.as_bytes()).expect("key");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(requestheader_ca.as_bytes()) {
        roots.add(c.expect("ca")).expect("ca");
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .expect("verifier");
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .expect("server config");
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("rt");
    let listener = runtime.block_on(tokio::net::TcpListener::bind(("127.0.0.1", 0))).expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let recorded = seen.clone();
    runtime.spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { continue };
            let (acceptor, recorded) = (acceptor.clone(), recorded.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else { return };
                let client_cn = tls
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|c| c.first().cloned())
                    .and_then(|c| {
                        let (_, cert) = x509_parser::parse_x509_certificate(&c).ok()?;
                        let cn = cert.subject().iter_common_name().next()?.as_str().ok()?.to_string();
                        Some(cn)
                    })
                    .unwrap_or_default();
                let svc = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let (recorded, client_cn) = (recorded.clone(), client_cn.clone());
                    async move {
                        let h = |k: &str| -> Vec<String> {
                            req.headers()
                                .get_all(k)
                                .iter()
                                .filter_map(|v| v.to_str().ok())
                                .map(str::to_string)
                                .collect()
                        };
                        let path = req.uri().path().to_string();
                        recorded.lock().expect("lock").push(Seen {
                            path: path.clone(),
                            user: h("x-remote-user").join(","),
                            groups: h("x-remote-group"),
                            client_cn,
                        });
                        let (code, body) = answer(&path);
                        let mut resp = hyper::Response::new(Full::new(Bytes::from(body.to_string())));
                        *resp.status_mut() = http::StatusCode::from_u16(code).expect("code");
                        resp.headers_mut().insert("content-type", http::HeaderValue::from_static("application/json"));
                        Ok::<_, std::convert::Infallible>(resp)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), svc).await;
            });
        }
    });
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(&pki.ca.cert_pem);
    Backend { port, ca_bundle, seen, _runtime: runtime, _dir: dir }
}

impl Backend {
    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("lock").clone()
    }
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn condition(s: &Server, name: &str) -> Value {
    let obj = s.json(&["get", "apiservice", name]);
    obj["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Available").cloned())
        .unwrap_or(Value::Null)
}

#[test]
fn an_apiservice_backed_by_a_service_is_proxied_to_as_the_authorized_caller() {
    let s = Server::start();
    let auth = s.json(&["get", "configmap", "-n", "kube-system", "extension-apiserver-authentication"]);
    let data = &auth["data"];
    assert_eq!(data["requestheader-allowed-names"], "[\"front-proxy-client\"]", "{auth}");
    assert_eq!(data["requestheader-username-headers"], "[\"X-Remote-User\"]");
    assert_eq!(data["requestheader-group-headers"], "[\"X-Remote-Group\"]");
    assert_eq!(data["requestheader-extra-headers-prefix"], "[\"X-Remote-Extra-\"]");
    assert!(data["client-ca-file"].as_str().is_some_and(|c| c.contains("BEGIN CERTIFICATE")));
    let backend = start_backend(data["requestheader-client-ca-file"].as_str().expect("requestheader CA"));

    // The server's own group-versions are local and available.
    let table = s.ok(&["get", "apiservices"]);
    let row = |table: &str, name: &str| -> Vec<String> {
        table
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .map(|l| l.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default()
    };
    assert_eq!(
        table.lines().next().map(|h| h.split_whitespace().collect::<Vec<_>>()),
        Some(vec!["NAME", "SERVICE", "AVAILABLE", "AGE"])
    );
    for name in ["v1.", "v1.apps", "v1.batch", "v2.autoscaling", "v1beta1.metrics.k8s.io"] {
        assert_eq!(
            row(&table, name).get(1..3),
            Some(&["Local".to_string(), "True".to_string()][..]),
            "{name} in\n{table}"
        );
    }
    let apps = condition(&s, "v1.apps");
    assert_eq!(
        (apps["reason"].as_str(), apps["message"].as_str()),
        (Some("Local"), Some("Local APIServices are always available"))
    );
    let labels = s.json(&["get", "apiservice", "v1.apps"])["metadata"]["labels"].clone();
    assert_eq!(labels["kube-aggregator.kubernetes.io/automanaged"], "onstart");
    // A deleted local APIService comes back.
    s.ok(&["delete", "apiservice", "v1.batch"]);
    eventually(Duration::from_secs(40), "v1.batch to be registered again", || {
        s.kubectl(&["get", "apiservice", "v1.batch"]).status.success().then_some(())
    });

    s.ok_stdin(
        &["apply", "-f", "-"],
        &format!(
            r#"
apiVersion: v1
kind: Service
metadata: {{name: api, namespace: default}}
spec:
  type: ExternalName
  externalName: localhost
  ports: [{{name: https, port: {port}}}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {{name: v1alpha1.test.k1s.io}}
spec:
  group: test.k1s.io
  version: v1alpha1
  groupPriorityMinimum: 1000
  versionPriority: 15
  caBundle: {ca}
  service: {{namespace: default, name: api, port: {port}}}
"#,
            port = backend.port,
            ca = backend.ca_bundle,
        ),
    );
    let available = eventually(Duration::from_secs(20), "the APIService to become available", || {
        let c = condition(&s, "v1alpha1.test.k1s.io");
        (c["status"] == "True").then_some(c)
    });
    assert_eq!(
        (available["reason"].as_str(), available["message"].as_str()),
        (Some("Passed"), Some("all checks passed"))
    );
    let check = backend.seen().into_iter().find(|r| r.path == GV).expect("the availability check reached the backend");
    assert_eq!((check.user.as_str(), check.client_cn.as_str()), ("system:kube-aggregator", "front-proxy-client"));
    let table = s.ok(&["get", "apiservices"]);
    assert_eq!(
        row(&table, "v1alpha1.test.k1s.io").get(1..3),
        Some(&["default/api".to_string(), "True".to_string()][..]),
        "{table}"
    );

    // Requests under the group-version reach the backend as the caller.
    let body = s.ok(&["get", "--raw", "/apis/test.k1s.io/v1alpha1/namespaces/default/flunders"]);
    let list: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(
        (list["kind"].as_str(), list["items"][0]["metadata"]["name"].as_str()),
        (Some("FlunderList"), Some("one"))
    );
    let proxied =
        backend.seen().into_iter().find(|r| r.path.ends_with("/flunders")).expect("the request reached the backend");
    assert_eq!(proxied.user, "system:admin");
    assert!(proxied.groups.iter().any(|g| g == "system:masters"), "{:?}", proxied.groups);
    assert!(proxied.groups.iter().any(|g| g == "system:authenticated"), "{:?}", proxied.groups);
    assert_eq!(proxied.client_cn, "front-proxy-client");

    // Discovery: /apis, /apis/<group>, aggregated discovery (kubectl api-resources) and the
    // group-version's own document, which is proxied.
    let groups: Value = serde_json::from_str(&s.ok(&["get", "--raw", "/apis"])).expect("json");
    let test = groups["groups"].as_array().and_then(|gs| gs.iter().find(|g| g["name"] == "test.k1s.io")).cloned();
    assert_eq!(test.map(|g| g["preferredVersion"]["groupVersion"].clone()), Some(json!("test.k1s.io/v1alpha1")));
    assert_eq!(groups["groups"][0]["name"], "apiregistration.k8s.io", "the aggregator's own group first");
    let group: Value = serde_json::from_str(&s.ok(&["get", "--raw", "/apis/test.k1s.io"])).expect("json");
    assert_eq!(group["versions"][0]["version"], "v1alpha1");
    let resources = s.ok(&["api-resources", "--api-group=test.k1s.io"]);
    assert!(resources.contains("flunders") && resources.contains("Flunder"), "{resources}");
    let gv: Value = serde_json::from_str(&s.ok(&["get", "--raw", GV])).expect("json");
    assert_eq!(gv["resources"][0]["name"], "flunders");

    // A metrics-server's APIService takes metrics.k8s.io over from the built-in one.
    s.ok_stdin(
        &["apply", "-f", "-"],
        &json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": "v1beta1.metrics.k8s.io"},
                "spec": {"group": "metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100, "versionPriority": 100,
                         "caBundle": backend.ca_bundle, "service": {"namespace": "default", "name": "api", "port": backend.port}}})
        .to_string(),
    );
    eventually(Duration::from_secs(20), "metrics-server's APIService to become available", || {
        (condition(&s, "v1beta1.metrics.k8s.io")["reason"] == "Passed").then_some(())
    });
    let metrics: Value = serde_json::from_str(&s.ok(&["get", "--raw", "/apis/metrics.k8s.io/v1beta1"])).expect("json");
    assert_eq!(metrics["resources"].as_array().map(Vec::len), Some(1), "the backend's document: {metrics}");
    let groups: Value = serde_json::from_str(&s.ok(&["get", "--raw", "/apis"])).expect("json");
    let listed =
        groups["groups"].as_array().map_or(0, |gs| gs.iter().filter(|g| g["name"] == "metrics.k8s.io").count());
    assert_eq!(listed, 1, "{groups}");

    // A user without permission is refused by k1s; nothing reaches the backend as them.
    let before = backend.seen().len();
    let denied = s.kubectl(&["get", "--raw", "/apis/test.k1s.io/v1alpha1/namespaces/default/flunders", "--as=jane"]);
    assert!(!denied.status.success());
    assert!(stderr(&denied).contains("Forbidden") || stderr(&denied).contains("forbidden"), "{}", stderr(&denied));
    std::thread::sleep(Duration::from_millis(200));
    assert!(backend.seen()[before..].iter().all(|r| r.user != "jane"), "{:?}", backend.seen());

    // An APIService whose Service is missing is unavailable, and requests to it get a 503.
    s.ok_stdin(
        &["apply", "-f", "-"],
        r#"{"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": "v1.missing.k1s.io"},
            "spec": {"group": "missing.k1s.io", "version": "v1", "groupPriorityMinimum": 1000, "versionPriority": 15,
                     "insecureSkipTLSVerify": true, "service": {"namespace": "default", "name": "nope"}}}"#,
    );
    let missing = eventually(Duration::from_secs(20), "the missing APIService to be checked", || {
        let c = condition(&s, "v1.missing.k1s.io");
        (c["status"] == "False").then_some(c)
    });
    assert_eq!(missing["reason"], "ServiceNotFound");
    assert_eq!(missing["message"], "service/nope in \"default\" is not present");
    let table = s.ok(&["get", "apiservices"]);
    assert_eq!(
        row(&table, "v1.missing.k1s.io").get(1..4),
        Some(&["default/nope".to_string(), "False".to_string(), "(ServiceNotFound)".to_string()][..]),
        "{table}"
    );
    let unavailable = s.kubectl(&["get", "--raw", "/apis/missing.k1s.io/v1/things"]);
    assert!(
        stderr(&unavailable).contains("ServiceUnavailable") || stderr(&unavailable).contains("service unavailable"),
        "{}",
        stderr(&unavailable)
    );

    // A ClusterIP Service needs an EndpointSlice with a ready endpoint for the APIService's port.
    s.ok_stdin(
        &["apply", "-f", "-"],
        r#"{"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "noeps", "namespace": "default"},
             "spec": {"ports": [{"name": "https", "port": 443}]}},
            {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": "v1.noeps.k1s.io"},
             "spec": {"group": "noeps.k1s.io", "version": "v1", "groupPriorityMinimum": 1000, "versionPriority": 15,
                      "insecureSkipTLSVerify": true, "service": {"namespace": "default", "name": "noeps"}}}]}"#,
    );
    let noeps = eventually(Duration::from_secs(20), "the endpoint-less APIService to be checked", || {
        let c = condition(&s, "v1.noeps.k1s.io");
        (c["status"] == "False").then_some(c)
    });
    assert_eq!(noeps["reason"], "EndpointsNotFound");
    assert_eq!(noeps["message"], "cannot find endpointslices for service/noeps in \"default\"");
    s.ok(&["patch", "apiservice", "v1.noeps.k1s.io", "--type=merge", "-p", r#"{"spec": {"service": {"port": 8443}}}"#]);
    let port = eventually(Duration::from_secs(20), "the port to be checked", || {
        let c = condition(&s, "v1.noeps.k1s.io");
        (c["reason"] == "ServicePortError").then_some(c)
    });
    assert_eq!(port["message"], "service/noeps in \"default\" is not listening on port 8443");
}

#[test]
fn apiservices_are_validated_as_upstream_validates_them() {
    let s = Server::start();
    let out = s.kubectl_stdin(
        &["create", "-f", "-"],
        r#"{"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": "v1.wrong.k1s.io"},
            "spec": {"group": "test.k1s.io", "version": "v1", "groupPriorityMinimum": 30000, "versionPriority": 0,
                     "caBundle": "YWJj", "insecureSkipTLSVerify": true, "service": {"namespace": "default", "name": "api"}}}"#,
    );
    assert!(!out.status.success());
    let err = stderr(&out);
    for want in [
        "metadata.name: Invalid value: \"v1.wrong.k1s.io\": must be `spec.version+\".\"+spec.group`: \"v1.test.k1s.io\"",
        "spec.groupPriorityMinimum: Invalid value: 30000: must be positive and less than 20000",
        "spec.versionPriority: Invalid value: 0: must be positive and less than 1000",
        "spec.insecureSkipTLSVerify: Invalid value: true: may not be true if caBundle is present",
    ] {
        assert!(err.contains(want), "{want:?} in {err}");
    }
    assert!(!s.kubectl(&["get", "apiservice", "v1.wrong.k1s.io"]).status.success(), "nothing was written");
    // A local APIService of the user's is available at once; its status is the server's.
    s.ok_stdin(
        &["create", "-f", "-"],
        r#"{"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": "v1.local.k1s.io"},
            "spec": {"group": "local.k1s.io", "version": "v1", "groupPriorityMinimum": 1000, "versionPriority": 15}}"#,
    );
    let c = condition(&s, "v1.local.k1s.io");
    assert_eq!((c["status"].as_str(), c["reason"].as_str()), (Some("True"), Some("Local")));
    let explain = s.ok(&["explain", "apiservice.spec.service"]);
    assert!(explain.contains("namespace") && explain.contains("port"), "{explain}");
}

#[test]
fn a_custom_group_version_gets_a_local_apiservice_while_a_definition_serves_it() {
    let s = Server::start();
    s.ok_stdin(
        &["apply", "-f", "-"],
        r#"{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.crd.k1s.io"},
            "spec": {"group": "crd.k1s.io", "scope": "Namespaced",
                     "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                     "versions": [{"name": "v1", "served": true, "storage": true,
                                   "schema": {"openAPIV3Schema": {"type": "object"}}}]}}"#,
    );
    let obj = eventually(Duration::from_secs(20), "the definition's APIService", || {
        let out = s.kubectl(&["get", "apiservice", "v1.crd.k1s.io", "-o", "json"]);
        out.status.success().then(|| serde_json::from_slice::<Value>(&out.stdout).expect("json"))
    });
    assert_eq!(obj["metadata"]["labels"]["kube-aggregator.kubernetes.io/automanaged"], "true");
    assert_eq!(
        (obj["spec"]["groupPriorityMinimum"].as_i64(), obj["spec"]["versionPriority"].as_i64()),
        (Some(1000), Some(100))
    );
    assert_eq!(condition(&s, "v1.crd.k1s.io")["reason"], "Local");
    s.ok(&["delete", "crd", "widgets.crd.k1s.io"]);
    eventually(Duration::from_secs(40), "the APIService to go with the definition", || {
        (!s.kubectl(&["get", "apiservice", "v1.crd.k1s.io"]).status.success()).then_some(())
    });
}
