//! The benches' light HTTP/2 client: the admin client certificate, one TLS connection per
//! `connect`, requests sent with the `h2` crate directly (a request's head and body go out as
//! two frames, with no task spawned per request as hyper's client does for a request body), and
//! the process counters (CPU time, RSS) the benches print.
#![allow(dead_code)]

use bytes::Bytes;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

pub type Conn = h2::client::SendRequest<Bytes>;

/// CPU time (user + system) a process has used so far, from /proc/<pid>/stat.
pub fn cpu_time(pid: &str) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<u64> = rest.split_whitespace().skip(11).take(2).filter_map(|v| v.parse().ok()).collect();
    let ticks = f.iter().sum::<u64>();
    // USER_HZ is 100 on Linux.
    Duration::from_millis(ticks * 10)
}

pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// A client configuration trusting the server CA of `tls` (a server's `server/tls` directory)
/// and presenting its admin client certificate.
pub fn tls_config(tls: &Path) -> rustls::ClientConfig {
    tls_config_as(tls, "admin")
}

/// [`tls_config`] presenting the client certificate `client-<name>.crt` of `tls` instead.
pub fn tls_config_as(tls: &Path, name: &str) -> rustls::ClientConfig {
    let read = |f: &str| std::fs::read(tls.join(f)).expect("read pem");
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(&read("server-ca.crt")) {
        roots.add(c.expect("ca")).expect("add ca");
    }
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(&read(&format!("client-{name}.crt"))).collect::<Result<_, _>>().expect("cert");
    let key = PrivateKeyDer::from_pem_slice(&read(&format!("client-{name}.key"))).expect("key");
    let mut cfg = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .expect("client cert");
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    cfg
}

pub async fn connect(port: u16, cfg: Arc<rustls::ClientConfig>) -> Conn {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
    tcp.set_nodelay(true).expect("nodelay");
    let tls = tokio_rustls::TlsConnector::from(cfg)
        .connect(ServerName::try_from("127.0.0.1").expect("name"), tcp)
        .await
        .expect("tls");
    let (send, conn) = h2::client::handshake(tls).await.expect("h2 handshake");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    send
}

/// Sends one request and reads the whole reply: its status and body.
pub async fn exchange(conn: &Conn, head: http::Request<()>, body: Bytes) -> (http::StatusCode, Bytes) {
    let mut send = conn.clone().ready().await.expect("ready");
    let (reply, mut stream) = send.send_request(head, body.is_empty()).expect("send");
    if !body.is_empty() {
        stream.send_data(body, true).expect("send body");
    }
    let reply = reply.await.expect("reply");
    let status = reply.status();
    let mut body = reply.into_body();
    let mut out = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.expect("reply body");
        out.extend_from_slice(&chunk);
        body.flow_control().release_capacity(chunk.len()).expect("flow control");
    }
    (status, Bytes::from(out))
}

/// A JSON POST of `body` to `path` (absolute, starting with `/`).
pub fn post_json(path: &str, body: String) -> (http::Request<()>, Bytes) {
    let head = http::Request::post(format!("https://127.0.0.1{path}"))
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .header("content-length", body.len());
    (head.body(()).expect("request"), Bytes::from(body))
}

/// Sends a request without a body and returns its status and the body as it streams (a watch).
pub async fn open_stream(conn: &Conn, head: http::Request<()>) -> (http::StatusCode, h2::RecvStream) {
    let mut send = conn.clone().ready().await.expect("ready");
    let (reply, _) = send.send_request(head, true).expect("send");
    let reply = reply.await.expect("reply");
    (reply.status(), reply.into_body())
}
