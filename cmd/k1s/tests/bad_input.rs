//! Bad input gets a Kubernetes Status with the right code, and writes nothing.

mod common;

use common::Server;

fn names(s: &Server) -> Vec<String> {
    s.ok(&["get", "configmaps", "-n", "default", "-o", "name"]).lines().map(str::to_string).collect()
}

fn assert_status(code: u16, body: &serde_json::Value, want: u16, reason: &str) {
    assert_eq!(code, want, "{body}");
    assert_eq!(body["kind"], "Status", "{body}");
    assert_eq!(body["apiVersion"], "v1");
    assert_eq!(body["status"], "Failure");
    assert_eq!(body["code"], want);
    assert_eq!(body["reason"], reason, "{body}");
    assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));
}

#[test]
fn deeply_nested_input_gets_400_or_422_and_the_server_keeps_serving() {
    // Found by the fuzz targets (issue 34): these overflowed a request thread's stack, which
    // aborts the whole server.
    let s = Server::start();
    let cms = "/api/v1/namespaces/default/configmaps";
    let json = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"deep"}},"data":{}"x"{}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let f = s.write_file("deep.json", &json);
    let (code, body) = s.curl("POST", cms, Some("application/json"), Some(&f));
    assert_status(code, &body, 400, "BadRequest");
    let yaml = format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: deep}}\ndata: {}x\n", "- ".repeat(100_000));
    let f = s.write_file("deep.yaml", &yaml);
    let (code, body) = s.curl("POST", cms, Some("application/yaml"), Some(&f));
    assert_status(code, &body, 400, "BadRequest");
    // A CEL expression nested past the parser's limit: the policy is invalid.
    let policy = serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "deep"},
        "spec": {"failurePolicy": "Fail",
                 "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                     "operations": ["CREATE"], "resources": ["configmaps"]}]},
                 "validations": [{"expression": format!("{}true{}", "(".repeat(1000), ")".repeat(1000))}]}
    });
    let f = s.write_file("deep-policy.json", &policy.to_string());
    let (code, body) = s.curl(
        "POST",
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
        Some("application/json"),
        Some(&f),
    );
    assert_status(code, &body, 422, "Invalid");
    assert!(body["message"].as_str().is_some_and(|m| m.contains("compilation failed")), "{body}");
    // Still serving.
    s.ok(&["get", "configmaps", "-n", "default"]);
}

#[test]
fn each_kind_of_bad_input_gets_its_status_and_writes_nothing() {
    let s = Server::start();
    let before = names(&s);
    let cms = "/api/v1/namespaces/default/configmaps";
    // Malformed JSON and YAML: 400.
    let f = s.write_file("bad.json", "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"x\"");
    let (code, body) = s.curl("POST", cms, Some("application/json"), Some(&f));
    assert_status(code, &body, 400, "BadRequest");
    let f = s.write_file("bad.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: [unclosed\n");
    let (code, body) = s.curl("POST", cms, Some("application/yaml"), Some(&f));
    assert_status(code, &body, 400, "BadRequest");
    // A body that is JSON but not an object of this kind: 400.
    let f = s.write_file("wrongkind.json", r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"y"}}"#);
    let (code, body) = s.curl("POST", cms, Some("application/json"), Some(&f));
    assert_status(code, &body, 400, "BadRequest");
    // Over 3 MiB: 413.
    let big = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"big"}},"data":{{"k":"{}"}}}}"#,
        "x".repeat(3 * 1024 * 1024 + 10)
    );
    let f = s.write_file("big.json", &big);
    let (code, body) = s.curl("POST", cms, Some("application/json"), Some(&f));
    assert_status(code, &body, 413, "RequestEntityTooLarge");
    // Unknown resource and unknown group: 404.
    let (code, body) = s.curl("GET", "/api/v1/namespaces/default/widgets", None, None);
    assert_status(code, &body, 404, "NotFound");
    let (code, body) = s.curl("GET", "/apis/nope.example.com/v1/things", None, None);
    assert_status(code, &body, 404, "NotFound");
    // Wrong method: 405.
    let (code, body) = s.curl("POST", "/api/v1/namespaces/default/configmaps/x", Some("application/json"), None);
    assert_status(code, &body, 405, "MethodNotAllowed");
    let (code, body) = s.curl("PUT", "/api/v1/componentstatuses", Some("application/json"), None);
    assert_status(code, &body, 405, "MethodNotAllowed");
    // Unsupported media type: 415.
    let f = s.write_file("x.txt", "hello");
    let (code, body) = s.curl("POST", cms, Some("text/plain"), Some(&f));
    assert_status(code, &body, 415, "UnsupportedMediaType");
    // Invalid object: 422 with causes.
    let f = s.write_file("invalid.json", r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Not_Valid"}}"#);
    let (code, body) = s.curl("POST", cms, Some("application/json"), Some(&f));
    assert_status(code, &body, 422, "Invalid");
    assert_eq!(body["details"]["causes"][0]["field"], "metadata.name");
    // Conflict: 409 AlreadyExists, then a stale update.
    let f =
        s.write_file("ok.json", r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ok"},"data":{"a":"1"}}"#);
    let (code, _) = s.curl("POST", cms, Some("application/json"), Some(&f));
    assert_eq!(code, 201);
    let (code, body) = s.curl("POST", cms, Some("application/json"), Some(&f));
    assert_status(code, &body, 409, "AlreadyExists");
    let f = s.write_file(
        "stale.json",
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ok","resourceVersion":"1"},"data":{"a":"2"}}"#,
    );
    let (code, body) = s.curl("PUT", &format!("{cms}/ok"), Some("application/json"), Some(&f));
    assert_status(code, &body, 409, "Conflict");
    // A continue token that is not one: 400.
    let (code, body) =
        s.curl("GET", "/api/v1/namespaces/default/configmaps?limit=1&continue=bm90LWEtdG9rZW4", None, None);
    assert_status(code, &body, 400, "BadRequest");
    // Without credentials: system:anonymous, whom RBAC refuses (403, as upstream); health is
    // public.
    assert_eq!(s.curl_anonymous("/api/v1/namespaces"), 403);
    assert_eq!(s.curl_anonymous("/readyz"), 200);
    // Nothing but "ok" was written.
    let mut after = names(&s);
    after.retain(|n| n != "configmap/ok");
    assert_eq!(before, after);
    assert_eq!(s.ok(&["get", "cm", "ok", "-o", "jsonpath={.data.a}"]), "1");
}

#[test]
fn watch_from_a_compacted_revision_gets_410_expired() {
    let s = Server::start_with(&["--compaction-interval=1s"]);
    s.ok(&["create", "configmap", "a"]);
    let old: u64 = s.ok(&["get", "cm", "a", "-o", "jsonpath={.metadata.resourceVersion}"]).parse().expect("rv");
    for i in 0..3 {
        s.ok(&["create", "configmap", &format!("b{i}")]);
    }
    // Two compaction intervals: everything before the writes above is compacted.
    std::thread::sleep(std::time::Duration::from_millis(2600));
    s.ok(&["create", "configmap", "c"]);
    std::thread::sleep(std::time::Duration::from_millis(1200));
    let out = s.ok(&[
        "get",
        "--raw",
        &format!("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={old}&timeoutSeconds=2"),
    ]);
    let first: serde_json::Value = serde_json::from_str(out.lines().next().expect("an event")).expect("json");
    assert_eq!(first["type"], "ERROR");
    assert_eq!(first["object"]["code"], 410);
    assert_eq!(first["object"]["reason"], "Expired");
    // kubectl get -w from that version prints the error and exits.
    let list = s.curl(
        "GET",
        &format!("/api/v1/namespaces/default/configmaps?resourceVersion={old}&resourceVersionMatch=Exact"),
        None,
        None,
    );
    assert_eq!(list.0, 410, "{}", list.1);
}

/// The server's open file descriptors.
fn open_fds(s: &Server) -> usize {
    std::fs::read_dir(format!("/proc/{}/fd", s.pid())).map(|d| d.count()).unwrap_or(0)
}

#[test]
fn slow_loris_clients_are_cut_off_while_others_are_served() {
    use std::time::{Duration, Instant};
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let s = Server::start();
    s.ok(&["get", "namespaces"]);
    let before = open_fds(&s);
    let ca = std::fs::read(s.data_dir().join("server/tls/server-ca.crt")).expect("CA");
    let port = s.port;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let started = Instant::now();
    // 20 clients that connect and never begin TLS, 20 that finish TLS and send half a request
    // head, one byte a second (kube-apiserver's ReadHeaderTimeout is 32 s, its TLS handshake
    // timeout 10 s).
    let slow: Vec<_> = (0..40)
        .map(|i| {
            let ca = ca.clone();
            rt.spawn(async move {
                let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
                let mut buf = [0u8; 256];
                if i % 2 == 0 {
                    // Nothing sent: the server closes (EOF) or resets.
                    let _ = tokio::time::timeout(Duration::from_secs(60), tcp.read(&mut buf)).await.expect("cut off");
                    return started.elapsed();
                }
                let trust = k1s_pki::client::Trust::Pem { pem: &ca, what: "ca" };
                let cfg = k1s_pki::client::client_config(trust, None, &[b"http/1.1"]).expect("config");
                let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("name");
                let mut tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(cfg))
                    .connect(name, tcp)
                    .await
                    .expect("handshake");
                tls.write_all(b"GET /api/v1/namespaces HTTP/1.1\r\nHost: 127.0.0.1\r\n").await.expect("write");
                loop {
                    if tls.write_all(b"x").await.is_err() || tls.flush().await.is_err() {
                        return started.elapsed();
                    }
                    match tokio::time::timeout(Duration::from_secs(1), tls.read(&mut buf)).await {
                        Ok(Ok(0)) | Ok(Err(_)) => return started.elapsed(),
                        Ok(Ok(_)) => {}
                        Err(_) => assert!(started.elapsed() < Duration::from_secs(60), "never cut off"),
                    }
                }
            })
        })
        .collect();
    // Meanwhile everyone else is served.
    std::thread::sleep(Duration::from_secs(2));
    let during = open_fds(&s);
    assert!(during >= before + 35, "the slow clients hold connections: {during} open, {before} before");
    s.ok(&["create", "configmap", "served-meanwhile", "-n", "default"]);
    let times: Vec<Duration> = rt.block_on(async {
        let mut out = Vec::new();
        for t in slow {
            out.push(t.await.expect("join"));
        }
        out
    });
    for (i, t) in times.iter().enumerate() {
        if i % 2 == 0 {
            assert!(*t >= Duration::from_secs(9) && *t < Duration::from_secs(20), "no handshake: cut after {t:?}");
        } else {
            assert!(*t >= Duration::from_secs(30) && *t < Duration::from_secs(45), "half a head: cut after {t:?}");
        }
    }
    // Their connections are gone; the server still serves.
    let deadline = Instant::now() + Duration::from_secs(10);
    while open_fds(&s) > before + 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(open_fds(&s) <= before + 2, "descriptors left open: {} > {before}", open_fds(&s));
    assert!(names(&s).contains(&"configmap/served-meanwhile".to_string()));
}
