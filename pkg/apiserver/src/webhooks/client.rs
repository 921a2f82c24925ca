//! Calling one webhook: an HTTPS POST of the AdmissionReview over HTTP/1.1, the server's
//! certificate verified against the webhook's `caBundle` (the system roots without one) for
//! the name the webhook is known by, within its timeout.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// The most of a webhook's reply that is read.
const MAX_REPLY: usize = 3 * 1024 * 1024;

/// Where a webhook is reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// `host:port` to connect to.
    pub connect: String,
    /// The name the certificate must hold (a Service's `<name>.<namespace>.svc`, or the URL's host).
    pub server_name: String,
    /// The URL as messages show it (`https://hooks.default.svc:443/validate?timeout=10s`).
    pub url: String,
    /// Path and query to POST to.
    pub path: String,
}

fn tls_config(ca_bundle: Option<&[u8]>) -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    match ca_bundle.filter(|b| !b.is_empty()) {
        Some(pem) => {
            for c in CertificateDer::pem_slice_iter(pem) {
                let c = c.map_err(|e| format!("invalid caBundle: {e}"))?;
                roots.add(c).map_err(|e| format!("invalid caBundle: {e}"))?;
            }
        }
        None => {
            let native = rustls_native_certs::load_native_certs();
            for c in native.certs {
                let _ = roots.add(c);
            }
        }
    }
    let mut cfg = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(cfg)
}

/// POSTs `body` (JSON) and gives the reply's status and body; errors read as Go's client
/// reports them after `Post "<url>": `.
pub async fn post(
    target: &Target,
    ca_bundle: Option<&[u8]>,
    body: Vec<u8>,
    timeout: Duration,
) -> Result<(u16, Bytes), String> {
    let call = async {
        let cfg = tls_config(ca_bundle)?;
        let name = match target.server_name.parse::<std::net::IpAddr>() {
            Ok(ip) => ServerName::IpAddress(ip.into()),
            Err(_) => {
                ServerName::try_from(target.server_name.clone()).map_err(|e| format!("invalid server name: {e}"))?
            }
        };
        let tcp = TcpStream::connect(&target.connect).await.map_err(|e| format!("dial tcp {}: {e}", target.connect))?;
        let _ = tcp.set_nodelay(true);
        let tls = TlsConnector::from(Arc::new(cfg))
            .connect(name, tcp)
            .await
            .map_err(|e| format!("tls: failed to verify certificate: {e}"))?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.map_err(|e| e.to_string())?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let req = http::Request::post(&target.path)
            .header(http::header::HOST, &target.server_name)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json, */*")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        let bytes = Limited::new(resp.into_body(), MAX_REPLY)
            .collect()
            .await
            .map_err(|e| format!("reading the reply: {e}"))?
            .to_bytes();
        Ok((status, bytes))
    };
    match tokio::time::timeout(timeout, call).await {
        Ok(r) => r,
        Err(_) => Err("context deadline exceeded".into()),
    }
}
