//! Calling one webhook: an HTTPS POST of the AdmissionReview over HTTP/1.1, the server's
//! certificate verified against the webhook's `caBundle` (the system roots without one) for
//! the name the webhook is known by, within its timeout.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
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

/// The TLS configuration for a webhook's CA bundle (the system roots without one), built once
/// per bundle: webhooks are called on every matching request, their bundles rarely change.
fn tls_config(ca_bundle: Option<&[u8]>) -> Result<Arc<rustls::ClientConfig>, String> {
    static CACHE: std::sync::LazyLock<k1s_pki::client::ConfigCache> =
        std::sync::LazyLock::new(|| k1s_pki::client::ConfigCache::new(64));
    let trust = k1s_pki::client::Trust::bundle_or_system(ca_bundle.unwrap_or_default(), "caBundle");
    CACHE.get(trust, None, &[b"http/1.1"]).map_err(|e| format!("invalid {}: {}", e.what, e.message))
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
        let tls = TlsConnector::from(cfg)
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
