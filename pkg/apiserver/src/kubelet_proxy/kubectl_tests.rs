//! Stock kubectl against a real API server whose node's kubelet is a stand-in: an HTTPS server
//! (client certificates required) that serves `containerLogs`, and answers exec and
//! port-forward upgrades with SPDY/3.1 the way containerd's streaming server does. Proves the
//! whole API server side: WebSocket v5 translation, the port-forward tunnel, the SPDY
//! fallback, log streaming and error relaying. Skipped when kubectl is not installed.

use super::spdy::{decode, encode, header, Frame, HeaderDecoder, HeaderEncoder, FLAG_FIN};
use crate::{KubeletClientConfig, TlsMaterial};
use bytes::{Bytes, BytesMut};
use http::{header as h, HeaderValue, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

const KUBECTL: &str = "/usr/bin/kubectl";

struct Pair {
    cert_pem: String,
    key_pem: String,
}

struct Ca {
    pem: String,
    key: rcgen::KeyPair,
}

impl Ca {
    fn new() -> Ca {
        let key = rcgen::KeyPair::generate().expect("ca key");
        let mut p = rcgen::CertificateParams::default();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        p.distinguished_name.push(rcgen::DnType::CommonName, "test-ca");
        p.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::DigitalSignature];
        Ca { pem: p.self_signed(&key).expect("ca").pem(), key }
    }

    fn issue(&self, cn: &str, orgs: &[&str], server: bool) -> Pair {
        let mut p = if server {
            rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).expect("sans")
        } else {
            rcgen::CertificateParams::default()
        };
        p.distinguished_name.push(rcgen::DnType::CommonName, cn);
        for o in orgs {
            p.distinguished_name.push(rcgen::DnType::OrganizationName, *o);
        }
        p.extended_key_usages = vec![if server {
            rcgen::ExtendedKeyUsagePurpose::ServerAuth
        } else {
            rcgen::ExtendedKeyUsagePurpose::ClientAuth
        }];
        p.use_authority_key_identifier_extension = true;
        let issuer = rcgen::Issuer::from_ca_cert_pem(&self.pem, &self.key).expect("issuer");
        let key = rcgen::KeyPair::generate().expect("key");
        Pair { cert_pem: p.signed_by(&key, &issuer).expect("sign").pem(), key_pem: key.serialize_pem() }
    }
}

fn text(code: StatusCode, body: &str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = code;
    r.headers_mut().insert(h::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

fn switching(protocol: &str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::new()));
    *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    r.headers_mut().insert(h::CONNECTION, HeaderValue::from_static("Upgrade"));
    r.headers_mut().insert(h::UPGRADE, HeaderValue::from_static("SPDY/3.1"));
    if let Ok(v) = HeaderValue::from_str(protocol) {
        r.headers_mut().insert("x-stream-protocol-version", v);
    }
    r
}

/// One end of a SPDY connection, server side.
struct SpdyPeer<IO> {
    io: IO,
    enc: HeaderEncoder,
    dec: HeaderDecoder,
    buf: BytesMut,
}

impl<IO: AsyncRead + AsyncWrite + Unpin> SpdyPeer<IO> {
    fn new(io: IO) -> Self {
        SpdyPeer { io, enc: HeaderEncoder::new().expect("encoder"), dec: HeaderDecoder::new(), buf: BytesMut::new() }
    }
    async fn next(&mut self) -> Option<Frame> {
        loop {
            if let Some(f) = decode(&mut self.dec, &mut self.buf).expect("decode") {
                return Some(f);
            }
            if self.io.read_buf(&mut self.buf).await.ok()? == 0 {
                return None;
            }
        }
    }
    async fn send(&mut self, frame: Frame) {
        let mut out = BytesMut::new();
        encode(&mut self.enc, &frame, &mut out).expect("encode");
        let _ = self.io.write_all(&out).await;
    }
    async fn data(&mut self, stream_id: u32, data: &[u8], fin: bool) {
        let flags = if fin { FLAG_FIN } else { 0 };
        self.send(Frame::Data { stream_id, flags, data: Bytes::copy_from_slice(data) }).await;
    }
}

/// containerd's remotecommand v4 server, for a few fake commands: `echo ARGS…`, `cat` (stdin
/// to stdout), `exit N`, `warn` (a line on stderr).
async fn fake_exec<IO: AsyncRead + AsyncWrite + Unpin>(io: IO, query: Vec<(String, String)>) {
    let on = |k: &str| query.iter().any(|(n, v)| n == k && v == "1");
    let tty = on("tty");
    let mut expected = vec!["error"];
    for (flag, kind) in [("input", "stdin"), ("output", "stdout"), ("error", "stderr"), ("tty", "resize")] {
        if on(flag) && !(kind == "stderr" && tty) {
            expected.push(kind);
        }
    }
    let cmd: Vec<String> = query.iter().filter(|(k, _)| k == "command").map(|(_, v)| v.clone()).collect();
    let mut peer = SpdyPeer::new(io);
    let mut streams: HashMap<String, u32> = HashMap::new();
    while streams.len() < expected.len() {
        match peer.next().await {
            Some(Frame::SynStream { stream_id, headers, .. }) => {
                streams.insert(header(&headers, "streamType").unwrap_or("").to_string(), stream_id);
                peer.send(Frame::SynReply { stream_id, flags: 0, headers: Vec::new() }).await;
            }
            Some(_) => {}
            None => return,
        }
    }
    let out = streams.get("stdout").copied();
    let mut exit = 0;
    match cmd.first().map(String::as_str) {
        Some("echo") => {
            if let Some(o) = out {
                peer.data(o, format!("{}\n", cmd[1..].join(" ")).as_bytes(), false).await;
            }
        }
        Some("cat") => {
            let stdin = streams.get("stdin").copied();
            while let Some(f) = peer.next().await {
                if let Frame::Data { stream_id, flags, data } = f {
                    if Some(stream_id) == stdin {
                        if let (Some(o), false) = (out, data.is_empty()) {
                            peer.data(o, &data, false).await;
                        }
                        if flags & FLAG_FIN != 0 {
                            break;
                        }
                    }
                }
            }
        }
        Some("exit") => exit = cmd.get(1).and_then(|c| c.parse().ok()).unwrap_or(1),
        Some("warn") => {
            if let Some(e) = streams.get("stderr").copied() {
                peer.data(e, b"careful\n", false).await;
            }
        }
        _ => exit = 127,
    }
    let status = if exit == 0 {
        r#"{"metadata":{},"status":"Success"}"#.to_string()
    } else {
        format!(
            r#"{{"metadata":{{}},"status":"Failure","message":"command terminated with non-zero exit code: exit status {exit}","reason":"NonZeroExitCode","details":{{"causes":[{{"reason":"ExitCode","message":"{exit}"}}]}}}}"#
        )
    };
    peer.data(streams["error"], status.as_bytes(), true).await;
    peer.send(Frame::GoAway { last_good_stream_id: 0, status: 0 }).await;
    let _ = peer.io.shutdown().await;
}

/// containerd's port-forward server, forwarding every connection to an echo service.
async fn fake_port_forward<IO: AsyncRead + AsyncWrite + Unpin>(io: IO) {
    let mut peer = SpdyPeer::new(io);
    let mut data_streams = Vec::new();
    while let Some(f) = peer.next().await {
        match f {
            Frame::SynStream { stream_id, headers, .. } => {
                if header(&headers, "streamType") == Some("data") {
                    data_streams.push(stream_id);
                }
                peer.send(Frame::SynReply { stream_id, flags: 0, headers: Vec::new() }).await;
            }
            Frame::Data { stream_id, data, .. } if data_streams.contains(&stream_id) && !data.is_empty() => {
                peer.data(stream_id, &data, false).await;
            }
            _ => {}
        }
    }
}

/// containerd's `v4.channel.k8s.io` WebSocket server running `cat`: what comes on channel 0
/// (in a binary or a text frame) goes back on channel 1 in a frame of the same kind.
async fn fake_websocket_exec<IO: AsyncRead + AsyncWrite + Unpin>(io: IO) {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let mut ws = tokio_tungstenite::WebSocketStream::from_raw_socket(
        io,
        tokio_tungstenite::tungstenite::protocol::Role::Server,
        None,
    )
    .await;
    let _ = ws.send(Message::Binary(Bytes::from_static(&[1]))).await;
    while let Some(Ok(m)) = ws.next().await {
        let echo = match m {
            Message::Binary(b) if b.first() == Some(&0) => {
                let mut out = b.to_vec();
                out[0] = 1;
                Message::Binary(out.into())
            }
            Message::Text(t) if t.starts_with('\u{0}') => Message::text(format!("\u{1}{}", &t[1..])),
            Message::Close(_) => break,
            _ => continue,
        };
        if ws.send(echo).await.is_err() {
            break;
        }
    }
}

async fn kubelet_request(mut req: Request<Incoming>) -> Response<Full<Bytes>> {
    let path = req.uri().path().to_string();
    let query: Vec<(String, String)> =
        form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes()).into_owned().collect();
    let raw_query = req.uri().query().unwrap_or("").to_string();
    let protocols: Vec<String> = req
        .headers()
        .get_all("x-stream-protocol-version")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|s| s.trim().to_string())
        .collect();
    match path.as_str() {
        "/containerLogs/default/web/app" => text(StatusCode::OK, &format!("query={raw_query}\nline 1\nline 2\n")),
        "/containerLogs/default/gone/app" => {
            text(StatusCode::BAD_REQUEST, "container \"app\" in pod \"gone\" is not available")
        }
        "/exec/default/gone/app" => text(StatusCode::BAD_REQUEST, "container not found (\"app\")"),
        "/exec/default/web/app" if super::websocket::is_websocket(req.headers()) => {
            let offered = super::websocket::offered_protocols(req.headers());
            if !offered.iter().any(|p| p == "v4.channel.k8s.io") {
                return text(StatusCode::BAD_REQUEST, "unsupported subprotocol");
            }
            let Some(answer) = super::websocket::accept(req.headers(), "v4.channel.k8s.io") else {
                return text(StatusCode::BAD_REQUEST, "bad handshake");
            };
            let up = hyper::upgrade::on(&mut req);
            tokio::spawn(async move {
                if let Ok(up) = up.await {
                    fake_websocket_exec(TokioIo::new(up)).await;
                }
            });
            let (parts, _) = answer.into_parts();
            Response::from_parts(parts, Full::new(Bytes::new()))
        }
        "/exec/default/web/app" if protocols.iter().any(|p| p == "v4.channel.k8s.io") => {
            let up = hyper::upgrade::on(&mut req);
            tokio::spawn(async move {
                if let Ok(up) = up.await {
                    fake_exec(TokioIo::new(up), query).await;
                }
            });
            switching("v4.channel.k8s.io")
        }
        "/portForward/default/web" if protocols.iter().any(|p| p == "portforward.k8s.io") => {
            let up = hyper::upgrade::on(&mut req);
            tokio::spawn(async move {
                if let Ok(up) = up.await {
                    fake_port_forward(TokioIo::new(up)).await;
                }
            });
            switching("portforward.k8s.io")
        }
        _ => text(StatusCode::NOT_FOUND, "404 page not found"),
    }
}

/// The stand-in kubelet: HTTPS, client certificates from the CA required.
async fn fake_kubelet(ca: &Ca, serving: &Pair) -> SocketAddr {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(ca.pem.as_bytes()).expect("ca")).expect("root");
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .expect("v");
    let chain =
        CertificateDer::pem_slice_iter(serving.cert_pem.as_bytes()).collect::<Result<Vec<_>, _>>().expect("pem");
    let key = PrivateKeyDer::from_pem_slice(serving.key_pem.as_bytes()).expect("key");
    let cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .expect("tls");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else { return };
                let svc =
                    hyper::service::service_fn(|req| async move { Ok::<_, Infallible>(kubelet_request(req).await) });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), svc)
                    .with_upgrades()
                    .await;
            });
        }
    });
    addr
}

struct Cluster {
    dir: tempfile::TempDir,
    cancel: CancellationToken,
    port: u16,
    ca_pem: String,
    admin: Pair,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

impl Cluster {
    fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    fn command(&self, args: &[&str], env: &[(&str, &str)]) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(KUBECTL);
        c.args(args)
            .env("KUBECONFIG", self.kubeconfig())
            .env("HOME", self.dir.path())
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        for (k, v) in env {
            c.env(k, v);
        }
        c
    }

    async fn kubectl_with(&self, args: &[&str], env: &[(&str, &str)], stdin: Option<&[u8]>) -> Output {
        let mut c = self.command(args, env);
        c.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
        if stdin.is_some() {
            c.stdin(std::process::Stdio::piped());
        }
        let mut child = c.spawn().expect("kubectl runs");
        if let (Some(data), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(data).await.expect("stdin");
        }
        tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} hung"))
            .expect("kubectl output")
    }

    async fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_with(args, &[], None).await
    }

    async fn ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args).await;
        assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

fn write_kubeconfig(path: &Path, port: u16, ca: &str, admin: &Pair) {
    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let kc = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority-data: {}\n    server: https://127.0.0.1:{port}\n  name: c\ncontexts:\n- context: {{cluster: c, user: u}}\n  name: c\ncurrent-context: c\nusers:\n- name: u\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\n",
        b64(ca),
        b64(&admin.cert_pem),
        b64(&admin.key_pem)
    );
    std::fs::write(path, kc).expect("kubeconfig");
}

async fn cluster() -> Option<Cluster> {
    if !Path::new(KUBECTL).exists() {
        eprintln!("skipping: {KUBECTL} not installed");
        return None;
    }
    let dir = tempfile::tempdir().expect("tmp");
    let ca = Ca::new();
    let kubelet = fake_kubelet(&ca, &ca.issue("kubelet", &[], true)).await;
    let serving = ca.issue("kube-apiserver", &[], true);
    let client = ca.issue("kube-apiserver-kubelet-client", &["system:masters"], false);
    let cancel = CancellationToken::new();
    let store = k1s_store::Store::open(&dir.path().join("db"), k1s_store::StoreOptions::default()).expect("store");
    let api = crate::start(
        crate::Config {
            listen: "127.0.0.1:0".parse().expect("addr"),
            tls: TlsMaterial {
                ca_pem: ca.pem.clone(),
                cert_pem: serving.cert_pem,
                key_pem: serving.key_pem,
                reloadable: None,
            },
            store,
            advertise: None,
            bookmark_interval: Duration::from_secs(60),
            service_cidr: "10.43.0.0/16".into(),
            endpoint_ip: "192.0.2.10".parse().expect("ip"),
            server_identity: "test_1".into(),
            service_account: crate::serviceaccount::TokenConfig::for_cluster_domain(
                rcgen::KeyPair::generate().expect("key").serialize_pem(),
                "cluster.local",
            ),
            kubelet_client: Some(KubeletClientConfig {
                ca_pem: ca.pem.clone(),
                cert_pem: client.cert_pem,
                key_pem: client.key_pem,
                reloadable: None,
            }),
            front_proxy: None,
            pod_security: Default::default(),
            join: None,
            authentication: Default::default(),
            anonymous_auth: true,
            audit: None,
        },
        cancel.clone(),
    )
    .await
    .expect("api server");
    let admin = ca.issue("admin", &["system:masters"], false);
    let c = Cluster { dir, cancel, port: api.local_addr.port(), ca_pem: ca.pem.clone(), admin };
    write_kubeconfig(&c.kubeconfig(), c.port, &c.ca_pem, &c.admin);
    let manifests = c.dir.path().join("objects.yaml");
    std::fs::write(
        &manifests,
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n---\n\
         apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: default, namespace: default}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: default}\n\
         spec: {nodeName: n1, containers: [{name: app, image: busybox}]}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {name: gone, namespace: default}\n\
         spec: {nodeName: n1, containers: [{name: app, image: busybox}]}\n",
    )
    .expect("manifests");
    c.ok(&["apply", "--validate=false", "-f", &manifests.display().to_string()]).await;
    let node_status = format!(
        r#"{{"status":{{"addresses":[{{"type":"InternalIP","address":"127.0.0.1"}}],"daemonEndpoints":{{"kubeletEndpoint":{{"Port":{}}}}}}}}}"#,
        kubelet.port()
    );
    c.ok(&["patch", "node", "n1", "--subresource=status", "--type=merge", "-p", &node_status]).await;
    let running = r#"{"status":{"phase":"Running","containerStatuses":[{"name":"app","ready":true,"restartCount":0,"image":"busybox","imageID":"","state":{"running":{}}}]}}"#;
    for pod in ["web", "gone"] {
        c.ok(&["patch", "pod", pod, "--subresource=status", "--type=merge", "-p", running]).await;
    }
    Some(c)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_logs_go_through_to_the_kubelet() {
    let Some(c) = cluster().await else { return };
    assert_eq!(c.ok(&["logs", "web"]).await, "query=\nline 1\nline 2\n");
    let out = c.ok(&["logs", "web", "-c", "app", "-f", "--tail=5", "--timestamps", "--limit-bytes=100"]).await;
    assert_eq!(out.lines().next(), Some("query=follow=true&timestamps=true&tailLines=5&limitBytes=100"));
    let gone = c.kubectl(&["logs", "gone"]).await;
    assert!(!gone.status.success());
    assert_eq!(
        stderr(&gone).trim(),
        "Error from server (BadRequest): container \"app\" in pod \"gone\" is not available"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_exec_over_websocket_and_spdy() {
    let Some(c) = cluster().await else { return };
    for env in [&[][..], &[("KUBECTL_REMOTE_COMMAND_WEBSOCKETS", "false")][..]] {
        let out = c.kubectl_with(&["exec", "web", "--", "echo", "hi", "there"], env, None).await;
        assert_eq!((stdout(&out).as_str(), out.status.code()), ("hi there\n", Some(0)), "{env:?}: {}", stderr(&out));
        let out = c.kubectl_with(&["exec", "web", "--", "exit", "3"], env, None).await;
        assert_eq!(out.status.code(), Some(3), "{env:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("command terminated with exit code 3"), "{env:?}: {}", stderr(&out));
        let input = b"line one\nline two\n".repeat(5000);
        let out = c.kubectl_with(&["exec", "-i", "web", "--", "cat"], env, Some(&input)).await;
        assert_eq!(out.status.code(), Some(0), "{env:?}: {}", stderr(&out));
        assert_eq!(out.stdout, input, "{env:?}: stdin comes back whole");
        let out = c.kubectl_with(&["exec", "web", "--", "warn"], env, None).await;
        assert_eq!(stderr(&out), "careful\n", "{env:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_upgrade_falls_back_and_reports_the_kubelets_reason() {
    let Some(c) = cluster().await else { return };
    let out = c.kubectl(&["exec", "gone", "--", "true"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr(&out).trim(), "error: unable to upgrade connection: container not found (\"app\")");
    let out = c.kubectl(&["exec", "web", "-c", "nope", "--", "true"]).await;
    assert_eq!(stderr(&out).trim(), "Error from server (BadRequest): container nope is not valid for pod web");
}

async fn free_port() -> u16 {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    l.local_addr().expect("addr").port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_port_forward_over_the_websocket_tunnel_and_spdy() {
    let Some(c) = cluster().await else { return };
    for env in [&[][..], &[("KUBECTL_PORT_FORWARD_WEBSOCKETS", "false")][..]] {
        let port = free_port().await;
        let mut cmd = c.command(&["port-forward", "pod/web", &format!("{port}:8080")], env);
        cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().expect("port-forward");
        let mut conn = None;
        for _ in 0..100 {
            if let Ok(s) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
                conn = Some(s);
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut conn = conn.expect("port-forward listens");
        conn.write_all(b"ping through the tunnel").await.expect("write");
        let mut got = vec![0u8; 23];
        tokio::time::timeout(Duration::from_secs(10), conn.read_exact(&mut got))
            .await
            .expect("echo in time")
            .expect("echo");
        assert_eq!(&got, b"ping through the tunnel", "{env:?}");
        let _ = child.kill().await;
    }
}

type ClientWs = tokio_tungstenite::WebSocketStream<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>;

impl Cluster {
    /// A raw WebSocket client (as the Python client is) for `path`, offering `protocols`; the
    /// subprotocol the server chose.
    async fn websocket(&self, path: &str, protocols: &str) -> (ClientWs, String) {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots.add(CertificateDer::from_pem_slice(self.ca_pem.as_bytes()).expect("ca")).expect("root");
        let chain =
            CertificateDer::pem_slice_iter(self.admin.cert_pem.as_bytes()).collect::<Result<Vec<_>, _>>().expect("pem");
        let key = PrivateKeyDer::from_pem_slice(self.admin.key_pem.as_bytes()).expect("key");
        let cfg = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .expect("client auth");
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", self.port)).await.expect("connect");
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("name");
        let tls = tokio_rustls::TlsConnector::from(Arc::new(cfg)).connect(name, tcp).await.expect("tls");
        let req = Request::builder()
            .uri(format!("wss://127.0.0.1:{}{path}", self.port))
            .header(h::HOST, format!("127.0.0.1:{}", self.port))
            .header(h::CONNECTION, "Upgrade")
            .header(h::UPGRADE, "websocket")
            .header(h::SEC_WEBSOCKET_VERSION, "13")
            .header(h::SEC_WEBSOCKET_KEY, tokio_tungstenite::tungstenite::handshake::client::generate_key())
            .header(h::SEC_WEBSOCKET_PROTOCOL, protocols)
            .body(())
            .expect("request");
        let (ws, resp) = tokio_tungstenite::client_async(req, tls).await.expect("websocket handshake");
        let chosen =
            resp.headers().get(h::SEC_WEBSOCKET_PROTOCOL).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
        (ws, chosen)
    }
}

async fn next_message(ws: &mut ClientWs) -> tokio_tungstenite::tungstenite::Message {
    tokio::time::timeout(Duration::from_secs(10), futures::StreamExt::next(ws))
        .await
        .expect("a message in time")
        .expect("a message")
        .expect("no error")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_v4_goes_through_to_the_runtime_with_text_and_binary_frames() {
    use futures::SinkExt;
    use tokio_tungstenite::tungstenite::Message;
    let Some(c) = cluster().await else { return };
    let path = "/api/v1/namespaces/default/pods/web/exec?command=cat&stdin=true&stdout=true";
    // Only v4 offered: upstream's API server proxies the WebSocket itself to the kubelet and on
    // to the runtime, which reads text and binary frames alike.
    let (mut ws, chosen) = c.websocket(path, "v4.channel.k8s.io").await;
    assert_eq!(chosen, "v4.channel.k8s.io");
    assert_eq!(next_message(&mut ws).await, Message::Binary(Bytes::from_static(&[1])));
    ws.send(Message::text("\u{0}as text\n")).await.expect("text");
    assert_eq!(next_message(&mut ws).await, Message::text("\u{1}as text\n"));
    ws.send(Message::Binary(Bytes::from_static(b"\x00as binary\n"))).await.expect("binary");
    assert_eq!(next_message(&mut ws).await, Message::Binary(Bytes::from_static(b"\x01as binary\n")));
    let _ = ws.close(None).await;

    // v5 offered at all (the Python client offers "v5.channel.k8s.io,v4.channel.k8s.io"):
    // translated to SPDY, as upstream picks v5, the one protocol its translator speaks.
    for offer in ["v5.channel.k8s.io,v4.channel.k8s.io", "v4.channel.k8s.io, v5.channel.k8s.io"] {
        let (mut ws, chosen) = c.websocket(path, offer).await;
        assert_eq!(chosen, "v5.channel.k8s.io", "{offer}");
        assert_eq!(next_message(&mut ws).await, Message::Binary(Bytes::from_static(&[1])), "{offer}");
        ws.send(Message::text("\u{0}as text\n")).await.expect("text");
        assert_eq!(next_message(&mut ws).await, Message::Binary(Bytes::from_static(b"\x01as text\n")), "{offer}");
        ws.send(Message::Binary(Bytes::from_static(b"\x00as binary\n"))).await.expect("binary");
        assert_eq!(next_message(&mut ws).await, Message::Binary(Bytes::from_static(b"\x01as binary\n")), "{offer}");
        // Closing stdin (channel 255, then 0) is EOF for `cat`, which then exits 0.
        ws.send(Message::Binary(Bytes::from_static(&[255, 0]))).await.expect("close stdin");
        let status = next_message(&mut ws).await;
        let Message::Binary(b) = status else { panic!("{offer}: status is binary: {status:?}") };
        assert_eq!(b[0], 3, "{offer}");
        let v: serde_json::Value = serde_json::from_slice(&b[1..]).expect("status json");
        assert_eq!(v["status"], "Success", "{offer}");
        assert!(matches!(next_message(&mut ws).await, Message::Close(_)), "{offer}");
    }
}
