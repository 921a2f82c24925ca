//! The kubelet server against `FakeRuntime`: routing, authentication and authorization, logs
//! from CRI log files, and upgrades proxied to a stand-in streaming server.

use super::*;
use http_body_util::Empty;
use hyper_util::rt::TokioIo;
use k1s_cri::FakeRuntime;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::collections::HashMap;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A throwaway CA with a serving certificate for 127.0.0.1 and client certificates.
struct TestPki {
    ca_pem: String,
    ca_key: rcgen::KeyPair,
}

struct Pair {
    cert_pem: String,
    key_pem: String,
}

impl TestPki {
    fn new() -> TestPki {
        let key = rcgen::KeyPair::generate().expect("ca key");
        let mut p = rcgen::CertificateParams::default();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        p.distinguished_name.push(rcgen::DnType::CommonName, "test-ca");
        p.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::DigitalSignature];
        let ca = p.self_signed(&key).expect("ca");
        TestPki { ca_pem: ca.pem(), ca_key: key }
    }

    fn sign(&self, mut p: rcgen::CertificateParams) -> Pair {
        let issuer = rcgen::Issuer::from_ca_cert_pem(&self.ca_pem, &self.ca_key).expect("issuer");
        let key = rcgen::KeyPair::generate().expect("key");
        p.use_authority_key_identifier_extension = true;
        let cert = p.signed_by(&key, &issuer).expect("sign");
        Pair { cert_pem: cert.pem(), key_pem: key.serialize_pem() }
    }

    fn serving(&self) -> Pair {
        let mut p =
            rcgen::CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).expect("sans");
        p.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        self.sign(p)
    }

    fn client(&self, cn: &str, orgs: &[&str]) -> Pair {
        let mut p = rcgen::CertificateParams::default();
        p.distinguished_name.push(rcgen::DnType::CommonName, cn);
        for o in orgs {
            p.distinguished_name.push(rcgen::DnType::OrganizationName, *o);
        }
        p.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(p)
    }

    fn client_config(&self, client: Option<&Pair>) -> rustls::ClientConfig {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(self.ca_pem.as_bytes()) {
            roots.add(c.expect("ca pem")).expect("root");
        }
        let b = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots);
        let mut cfg = match client {
            Some(p) => {
                let chain = CertificateDer::pem_slice_iter(p.cert_pem.as_bytes())
                    .collect::<Result<Vec<_>, _>>()
                    .expect("chain");
                let key = PrivateKeyDer::from_pem_slice(p.key_pem.as_bytes()).expect("key");
                b.with_client_auth_cert(chain, key).expect("client auth")
            }
            None => b.with_no_client_auth(),
        };
        cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        cfg
    }
}

struct Harness {
    pki: TestPki,
    addr: SocketAddr,
    fake: Arc<FakeRuntime>,
    logs: tempfile::TempDir,
    cancel: CancellationToken,
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

const IMAGE: &str = "127.0.0.1:5000/busybox:1.35";

/// The API server's answers, as its default roles give them: the API server's kubelet client
/// (`system:kubelet-api-admin`) and `system:masters` may do anything on node `n1`; the token
/// `carol-token` is carol, who may only read metrics.
struct StandInApi;

#[async_trait::async_trait]
impl auth::Delegate for StandInApi {
    async fn review_token(&self, token: &str) -> Result<Option<auth::Identity>, auth::AuthError> {
        Ok((token == "carol-token").then(|| auth::Identity {
            user: "carol".into(),
            uid: String::new(),
            groups: vec!["system:authenticated".into()],
            extra: Default::default(),
        }))
    }
    async fn allowed(&self, id: &auth::Identity, attrs: &auth::Attributes) -> Result<bool, auth::AuthError> {
        let admin = id.user == auth::APISERVER_KUBELET_CLIENT || id.groups.iter().any(|g| g == "system:masters");
        Ok(attrs.node == "n1" && (admin || (id.user == "carol" && attrs.subresource == "metrics")))
    }
}

async fn harness() -> Harness {
    let pki = TestPki::new();
    let serving = pki.serving();
    let fake = Arc::new(FakeRuntime::new());
    fake.add_image(IMAGE);
    let cancel = CancellationToken::new();
    let server = serve(
        ServerConfig {
            listen: "127.0.0.1:0".parse().expect("addr"),
            tls: ServerTls {
                ca_pem: pki.ca_pem.clone(),
                cert_pem: serving.cert_pem,
                key_pem: serving.key_pem,
                reloadable: None,
            },
            runtime: fake.clone(),
            auth: Arc::new(auth::Authorizer::new(Arc::new(StandInApi))),
            node_name: "n1".into(),
        },
        cancel.clone(),
    )
    .await
    .expect("serve");
    Harness { pki, addr: server.local_addr, fake, logs: tempfile::tempdir().expect("tmp"), cancel }
}

fn pod_labels(ns: &str, pod: &str, uid: &str) -> HashMap<String, String> {
    HashMap::from([
        ("io.kubernetes.pod.namespace".to_string(), ns.to_string()),
        ("io.kubernetes.pod.name".to_string(), pod.to_string()),
        ("io.kubernetes.pod.uid".to_string(), uid.to_string()),
    ])
}

impl Harness {
    /// A ready sandbox for `default/web` whose log directory is in the temp dir.
    async fn sandbox(&self, uid: &str) -> (String, cri::PodSandboxConfig) {
        let config = cri::PodSandboxConfig {
            metadata: Some(cri::PodSandboxMetadata {
                name: "web".into(),
                uid: uid.into(),
                namespace: "default".into(),
                attempt: 0,
            }),
            log_directory: self.logs.path().join(uid).display().to_string(),
            labels: pod_labels("default", "web", uid),
            ..Default::default()
        };
        let id = self
            .fake
            .run_pod_sandbox(cri::RunPodSandboxRequest { config: Some(config.clone()), runtime_handler: String::new() })
            .await
            .expect("sandbox")
            .pod_sandbox_id;
        (id, config)
    }

    /// Creates (and starts, if `start`) instance `attempt` of container `app`, whose log file
    /// holds `log`.
    async fn container(
        &self,
        sandbox: &(String, cri::PodSandboxConfig),
        attempt: u32,
        log: &str,
        start: bool,
    ) -> String {
        let (sandbox_id, sandbox_config) = sandbox;
        let mut labels = sandbox_config.labels.clone();
        labels.insert("io.kubernetes.container.name".into(), "app".into());
        let log_path = format!("app/{attempt}.log");
        let dir = std::path::Path::new(&sandbox_config.log_directory).join("app");
        std::fs::create_dir_all(&dir).expect("log dir");
        std::fs::write(dir.join(format!("{attempt}.log")), log).expect("log file");
        let config = cri::ContainerConfig {
            metadata: Some(cri::ContainerMetadata { name: "app".into(), attempt }),
            image: Some(cri::ImageSpec { image: IMAGE.into(), ..Default::default() }),
            command: vec!["sh".into()],
            log_path,
            labels,
            ..Default::default()
        };
        let id = self
            .fake
            .create_container(cri::CreateContainerRequest {
                pod_sandbox_id: sandbox_id.clone(),
                config: Some(config),
                sandbox_config: Some(sandbox_config.clone()),
            })
            .await
            .expect("create")
            .container_id;
        if start {
            self.fake.start_container(cri::StartContainerRequest { container_id: id.clone() }).await.expect("start");
        }
        // Creation times are in nanoseconds; keep instances apart.
        tokio::time::sleep(Duration::from_millis(2)).await;
        id
    }

    async fn connect(&self, client: Option<&Pair>) -> hyper::client::conn::http1::SendRequest<Empty<Bytes>> {
        let tcp = tokio::net::TcpStream::connect(self.addr).await.expect("connect");
        let connector = tokio_rustls::TlsConnector::from(Arc::new(self.pki.client_config(client)));
        let name = rustls::pki_types::ServerName::IpAddress(std::net::IpAddr::from([127, 0, 0, 1]).into());
        let tls = connector.connect(name, tcp).await.expect("tls");
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.expect("handshake");
        tokio::spawn(async move {
            let _ = conn.with_upgrades().await;
        });
        sender
    }

    async fn request(
        &self,
        client: Option<&Pair>,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
    ) -> Response<Incoming> {
        let mut sender = self.connect(client).await;
        let mut b = Request::builder().method(method).uri(path).header("host", "127.0.0.1");
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        sender.send_request(b.body(Empty::new()).expect("request")).await.expect("response")
    }

    async fn get_text(&self, client: Option<&Pair>, path: &str) -> (StatusCode, String) {
        let resp = self.request(client, Method::GET, path, &[]).await;
        let code = resp.status();
        let body = resp.into_body().collect().await.expect("body").to_bytes();
        (code, String::from_utf8_lossy(&body).into_owned())
    }

    fn apiserver(&self) -> Pair {
        self.pki.client(auth::APISERVER_KUBELET_CLIENT, &[])
    }
}

#[test]
fn routes_match_upstream_paths() {
    let logs = Route::ContainerLogs { namespace: "ns".into(), pod: "p".into(), container: "c".into() };
    assert_eq!(route("/containerLogs/ns/p/c"), logs);
    assert_eq!(route("/exec/ns/p/c"), Route::Exec { namespace: "ns".into(), pod: "p".into(), container: "c".into() });
    assert_eq!(
        route("/attach/ns/p/uid-1/c"),
        Route::Attach { namespace: "ns".into(), pod: "p".into(), container: "c".into() }
    );
    assert_eq!(route("/portForward/ns/p"), Route::PortForward { namespace: "ns".into(), pod: "p".into() });
    assert_eq!(route("/healthz"), Route::Healthz);
    assert_eq!(route("/containerLogs/ns/p"), Route::NotFound);
    assert_eq!(route("/pods"), Route::NotFound);
}

#[test]
fn stream_options_follow_upstream() {
    let q = |s: &str| -> Vec<(String, String)> { form_urlencoded::parse(s.as_bytes()).into_owned().collect() };
    assert_eq!(
        stream_opts(&q("input=1&output=1&error=1&tty=1")),
        Ok(StreamOpts { stdin: true, stdout: true, stderr: false, tty: true })
    );
    assert_eq!(stream_opts(&q("output=true")), Ok(StreamOpts { stdout: true, ..Default::default() }));
    assert!(stream_opts(&q("tty=1")).is_err());
}

#[tokio::test]
async fn clients_without_certificates_get_401_and_strangers_403() {
    let h = harness().await;
    // Nothing is anonymous, /healthz and /pods included (upstream with anonymous auth off).
    for path in ["/healthz", "/pods", "/containerLogs/default/web/app"] {
        let (code, body) = h.get_text(None, path).await;
        assert_eq!((code, body.trim()), (StatusCode::UNAUTHORIZED, "Unauthorized"), "{path}");
    }
    let (code, _) = h.get_text(Some(&h.apiserver()), "/healthz").await;
    assert_eq!(code, StatusCode::OK);
    // A bearer token the API server vouches for, authorized for metrics only.
    let carol = |path: &str| {
        let h = &h;
        let path = path.to_string();
        async move {
            let resp = h.request(None, Method::GET, &path, &[("authorization", "Bearer carol-token")]).await;
            resp.status()
        }
    };
    assert_eq!(carol("/metrics/resource").await, StatusCode::OK);
    assert_eq!(carol("/containerLogs/default/web/app").await, StatusCode::FORBIDDEN);
    let resp = h.request(None, Method::GET, "/metrics/resource", &[("authorization", "Bearer wrong")]).await;
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    let bob = h.pki.client("bob", &["devs"]);
    let (code, body) = h.get_text(Some(&bob), "/containerLogs/default/web/app").await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert_eq!(body.trim(), "Forbidden (user=bob, verb=get, resource=nodes, subresource=proxy)");
    let (code, _) = h.get_text(Some(&h.apiserver()), "/nothing/here").await;
    assert_eq!(code, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn container_logs_come_from_the_newest_or_previous_instance() {
    let h = harness().await;
    let api = h.apiserver();
    let (code, body) = h.get_text(Some(&api), "/containerLogs/default/web/app").await;
    assert_eq!((code, body.trim()), (StatusCode::NOT_FOUND, "pod \"web\" does not exist"));

    let sb = h.sandbox("uid-1").await;
    h.container(&sb, 0, "2026-11-29T21:00:00Z stdout F first run\n", false).await;
    h.container(&sb, 1, "2026-11-29T21:00:01Z stdout F second run\n2026-11-29T21:00:02Z stderr F done\n", true).await;
    let (code, body) = h.get_text(Some(&api), "/containerLogs/default/web/app").await;
    assert_eq!((code, body.as_str()), (StatusCode::OK, "second run\ndone\n"));
    let (_, body) = h.get_text(Some(&api), "/containerLogs/default/web/app?previous=true").await;
    assert_eq!(body, "first run\n");
    let (_, body) = h.get_text(Some(&api), "/containerLogs/default/web/app?tailLines=1&timestamps=true").await;
    assert_eq!(body, "2026-11-29T21:00:02.000000000Z done\n");
    let (code, body) = h.get_text(Some(&api), "/containerLogs/default/web/other").await;
    assert_eq!((code, body.trim()), (StatusCode::BAD_REQUEST, "container \"other\" in pod \"web\" is not available"));
    let (code, _) = h.get_text(Some(&api), "/containerLogs/default/web/app?tailLines=-3").await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn following_a_log_streams_until_the_container_exits() {
    let h = harness().await;
    let sb = h.sandbox("uid-1").await;
    let id = h.container(&sb, 0, "2026-11-29T21:00:00Z stdout F hello\n", true).await;
    let resp = h.request(Some(&h.apiserver()), Method::GET, "/containerLogs/default/web/app?follow=true", &[]).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let mut body = resp.into_body();
    let first = body.frame().await.expect("frame").expect("ok").into_data().expect("data");
    assert_eq!(&first[..], b"hello\n");
    let path = std::path::Path::new(&sb.1.log_directory).join("app/0.log");
    let mut f = std::fs::OpenOptions::new().append(true).open(&path).expect("log");
    std::io::Write::write_all(&mut f, b"2026-11-29T21:00:01Z stdout F world\n").expect("append");
    let next = tokio::time::timeout(Duration::from_secs(5), body.frame()).await.expect("in time");
    assert_eq!(&next.expect("frame").expect("ok").into_data().expect("data")[..], b"world\n");
    h.fake.exit_container(&id, 0).expect("exit");
    let end = tokio::time::timeout(Duration::from_secs(5), body.collect()).await.expect("ends").expect("body");
    assert!(end.to_bytes().is_empty());
}

/// A stand-in for containerd's streaming server: answers any upgrade with 101 and echoes.
async fn echo_streaming_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(|mut req: Request<Incoming>| async move {
                    let path = req.uri().to_string();
                    let protocol = req.headers().get("x-stream-protocol-version").cloned();
                    let up = hyper::upgrade::on(&mut req);
                    tokio::spawn(async move {
                        if let Ok(up) = up.await {
                            let mut io = TokioIo::new(up);
                            let _ = io.write_all(format!("{path}\n").as_bytes()).await;
                            let mut buf = [0u8; 1024];
                            while let Ok(n) = io.read(&mut buf).await {
                                if n == 0 || io.write_all(&buf[..n]).await.is_err() {
                                    break;
                                }
                            }
                        }
                    });
                    let mut r = full(StatusCode::SWITCHING_PROTOCOLS, Vec::new());
                    r.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
                    r.headers_mut().insert(header::UPGRADE, HeaderValue::from_static("SPDY/3.1"));
                    if let Some(p) = protocol {
                        r.headers_mut().insert("x-stream-protocol-version", p);
                    }
                    Ok::<_, Infallible>(r)
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), svc)
                    .with_upgrades()
                    .await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn exec_is_proxied_to_the_runtime_streaming_url_and_spliced() {
    let h = harness().await;
    let streaming = echo_streaming_server().await;
    h.fake.set_streaming_base(&format!("http://{streaming}"));
    let sb = h.sandbox("uid-1").await;
    h.container(&sb, 0, "", true).await;
    let mut sender = h.connect(Some(&h.apiserver())).await;
    let req = Request::builder()
        .method(Method::POST)
        .uri("/exec/default/web/app?command=sh&command=-c&command=true&input=1&output=1")
        .header("host", "127.0.0.1")
        .header("connection", "Upgrade")
        .header("upgrade", "SPDY/3.1")
        .header("x-stream-protocol-version", "v4.channel.k8s.io")
        .body(Empty::<Bytes>::new())
        .expect("request");
    let resp = sender.send_request(req).await.expect("response");
    assert_eq!(resp.status(), StatusCode::SWITCHING_PROTOCOLS);
    assert_eq!(resp.headers()["x-stream-protocol-version"], "v4.channel.k8s.io");
    let mut io = TokioIo::new(hyper::upgrade::on(resp).await.expect("upgraded"));
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    while !got.ends_with(b"\n") {
        let n = io.read(&mut buf).await.expect("read");
        assert!(n > 0, "stream closed early");
        got.extend_from_slice(&buf[..n]);
    }
    let first = String::from_utf8_lossy(&got);
    assert!(first.starts_with("/exec/"), "the runtime saw {first}");
    assert!(first.contains("command=sh"), "the client's query is passed on: {first}");
    io.write_all(b"ping").await.expect("write");
    let mut echo = [0u8; 4];
    io.read_exact(&mut echo).await.expect("echo");
    assert_eq!(&echo, b"ping");
    let calls = h.fake.calls();
    assert!(calls.iter().any(|c| c.op == k1s_cri::CriOp::Exec), "CRI Exec was called");
}

#[tokio::test]
async fn exec_into_a_stopped_container_or_without_upgrade_is_refused() {
    let h = harness().await;
    let api = h.apiserver();
    let sb = h.sandbox("uid-1").await;
    h.container(&sb, 0, "", false).await;
    let resp = h
        .request(
            Some(&api),
            Method::POST,
            "/exec/default/web/app?command=true&output=1",
            &[("connection", "Upgrade"), ("upgrade", "SPDY/3.1")],
        )
        .await;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    assert_eq!(String::from_utf8_lossy(&body).trim(), "container not found (\"app\")");

    let sb2 = h.sandbox("uid-2").await;
    h.container(&sb2, 0, "", true).await;
    let (code, body) = h.get_text(Some(&api), "/exec/default/web/app?command=true&output=1").await;
    assert_eq!((code, body.trim()), (StatusCode::BAD_REQUEST, "Upgrade request required"));
    let (code, body) = h.get_text(Some(&api), "/exec/default/web/app?command=true").await;
    assert_eq!((code, body.trim()), (StatusCode::BAD_REQUEST, "you must specify at least 1 of stdin, stdout, stderr"));
}

#[tokio::test]
async fn port_forward_uses_the_ready_sandbox() {
    let h = harness().await;
    let streaming = echo_streaming_server().await;
    h.fake.set_streaming_base(&format!("http://{streaming}"));
    h.sandbox("uid-1").await;
    let resp = h
        .request(
            Some(&h.apiserver()),
            Method::POST,
            "/portForward/default/web",
            &[("connection", "Upgrade"), ("upgrade", "SPDY/3.1"), ("x-stream-protocol-version", "portforward.k8s.io")],
        )
        .await;
    assert_eq!(resp.status(), StatusCode::SWITCHING_PROTOCOLS);
    assert!(h.fake.calls().iter().any(|c| c.op == k1s_cri::CriOp::PortForward));
}

#[tokio::test]
async fn resource_metrics_list_running_containers_by_pod_for_the_api_server_only() {
    let h = harness().await;
    let sandbox = h.sandbox("uid-1").await;
    let exited = h.container(&sandbox, 0, "", true).await;
    h.fake.stop_container(cri::StopContainerRequest { container_id: exited, timeout: 0 }).await.expect("stop");
    h.container(&sandbox, 1, "", true).await;
    h.fake.set_container_usage("app", 2_500_000_000, 3 << 20);
    let (code, body) = h.get_text(Some(&h.apiserver()), "/metrics/resource").await;
    assert_eq!(code, StatusCode::OK, "{body}");
    let lines: Vec<&str> = body.lines().filter(|l| l.starts_with("container_")).collect();
    assert_eq!(lines.len(), 2, "one running instance, CPU and memory: {body}");
    assert!(
        lines[0]
            .starts_with(r#"container_cpu_usage_seconds_total{container="app",namespace="default",pod="web"} 2.5 "#),
        "{body}"
    );
    assert!(body
        .lines()
        .any(|l| l.starts_with(r#"pod_memory_working_set_bytes{namespace="default",pod="web"} 3145728 "#)));
    assert!(body.lines().any(|l| l.starts_with("node_memory_working_set_bytes ")), "the node from /proc: {body}");
    let bob = h.pki.client("bob", &["devs"]);
    let (code, body) = h.get_text(Some(&bob), "/metrics/resource").await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert_eq!(body.trim(), "Forbidden (user=bob, verb=get, resource=nodes, subresource=metrics)");
}
