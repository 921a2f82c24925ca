//! Calling an aggregated API server: HTTPS over HTTP/1.1, the API server presenting its front
//! proxy client certificate, the backend's certificate verified for the Service's DNS name
//! (`<name>.<namespace>.svc`) against the APIService's `caBundle` (the system roots without
//! one), or not verified at all under `insecureSkipTLSVerify`.

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("invalid {what}: {message}")]
    Tls { what: &'static str, message: String },
    #[error("dial tcp {addr}: {message}")]
    Dial { addr: String, message: String },
    #[error("tls: {message}")]
    Handshake { message: String },
    #[error("{message}")]
    Http { message: String },
}

pub use k1s_pki::client::{Identity, Trust};

/// The front proxy's identity from PEM.
pub fn identity_from_pem(cert_pem: &str, key_pem: &str) -> Result<Identity, ClientError> {
    Identity::from_pem(cert_pem, key_pem, ("front proxy client certificate", "front proxy client key"))
        .map_err(|e| ClientError::Tls { what: e.what, message: e.message })
}

/// The TLS client configuration for one backend (HTTP/1.1), from `cache`: the same bundle and
/// identity give the same configuration.
pub fn tls_config(
    cache: &k1s_pki::client::ConfigCache,
    identity: Option<&Identity>,
    trust: Trust<'_>,
) -> Result<Arc<rustls::ClientConfig>, ClientError> {
    cache.get(trust, identity, &[b"http/1.1"]).map_err(|e| ClientError::Tls { what: e.what, message: e.message })
}

/// Sends `req` to `addr` over TLS, the certificate checked for `server_name`.
pub async fn send(
    addr: &str,
    server_name: &str,
    tls: Arc<rustls::ClientConfig>,
    req: http::Request<Full<Bytes>>,
) -> Result<http::Response<Incoming>, ClientError> {
    let dial = |message: String| ClientError::Dial { addr: addr.to_string(), message };
    let name = match server_name.parse::<std::net::IpAddr>() {
        Ok(ip) => ServerName::IpAddress(ip.into()),
        Err(_) => ServerName::try_from(server_name.to_string())
            .map_err(|e| ClientError::Handshake { message: format!("invalid server name: {e}") })?,
    };
    let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
        .await
        .map_err(|_| dial("i/o timeout".into()))?
        .map_err(|e| dial(e.to_string()))?;
    let _ = tcp.set_nodelay(true);
    let stream = TlsConnector::from(tls)
        .connect(name, tcp)
        .await
        .map_err(|e| ClientError::Handshake { message: e.to_string() })?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| ClientError::Http { message: e.to_string() })?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "aggregated API connection ended");
        }
    });
    sender.send_request(req).await.map_err(|e| ClientError::Http { message: e.to_string() })
}
