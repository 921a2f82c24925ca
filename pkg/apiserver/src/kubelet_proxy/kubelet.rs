//! The API server's client to kubelets: HTTPS over HTTP/1.1 with the API server's kubelet
//! client certificate, the kubelet's serving certificate verified against the cluster CA. One
//! connection per request (streams are long-lived and logs rare), upgrades kept; each connection
//! presents the client certificate current at its handshake.

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response};
use http_body_util::Empty;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// How long connecting (TCP and TLS) to a kubelet may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// PEM material the API server uses towards kubelets: its client certificate (upstream's
/// `--kubelet-client-certificate`/`--kubelet-client-key`, CN `kube-apiserver-kubelet-client`,
/// O `system:masters`) and the CA that signed the kubelets' serving certificates
/// (`--kubelet-certificate-authority`).
#[derive(Clone, Debug)]
pub struct KubeletClientConfig {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
    /// When set, the client certificate is taken from this slot at every handshake instead
    /// (`cert_pem`/`key_pem` are then only checked), so that a renewed one is used without a
    /// restart.
    pub reloadable: Option<k1s_pki::ClientCert>,
}

#[derive(Debug, thiserror::Error)]
pub enum KubeletClientError {
    #[error("invalid kubelet client TLS material ({what}): {message}")]
    Tls { what: &'static str, message: String },
    #[error("error dialing backend: dial tcp {addr}")]
    Dial { addr: String, source: std::io::Error },
    #[error("error dialing backend: dial tcp {addr}: i/o timeout")]
    DialTimeout { addr: String },
    #[error("error dialing backend: invalid kubelet address {0:?}")]
    Address(String),
    #[error("error talking to the kubelet at {addr}: {message}")]
    Http { addr: String, message: String },
}

/// Where a node's kubelet listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubeletTarget {
    pub host: String,
    pub port: u16,
}

impl KubeletTarget {
    fn addr(&self) -> String {
        super::host_port(&self.host, self.port)
    }
}

pub(crate) struct KubeletClient {
    connector: TlsConnector,
}

impl KubeletClient {
    pub(crate) fn new(cfg: &KubeletClientConfig) -> Result<KubeletClient, KubeletClientError> {
        let tls = |e: k1s_pki::client::ClientTlsError| KubeletClientError::Tls { what: e.what, message: e.message };
        let identity = match &cfg.reloadable {
            Some(slot) => k1s_pki::client::Identity::Reloadable(slot.clone()),
            None => {
                k1s_pki::client::Identity::from_pem(&cfg.cert_pem, &cfg.key_pem, ("client certificate", "client key"))
                    .map_err(tls)?
            }
        };
        let trust = k1s_pki::client::Trust::Pem { pem: cfg.ca_pem.as_bytes(), what: "ca" };
        // Upgrades (SPDY, WebSocket) need HTTP/1.1.
        let config = k1s_pki::client::client_config(trust, Some(&identity), &[b"http/1.1"]).map_err(tls)?;
        Ok(KubeletClient { connector: TlsConnector::from(Arc::new(config)) })
    }

    /// Sends one request to the kubelet and returns its response; for an upgrade the connection
    /// stays usable through `hyper::upgrade::on(response)`.
    pub(crate) async fn send(
        &self,
        target: &KubeletTarget,
        method: Method,
        path_and_query: &str,
        headers: HeaderMap,
    ) -> Result<Response<Incoming>, KubeletClientError> {
        let addr = target.addr();
        let server_name = match target.host.parse::<std::net::IpAddr>() {
            Ok(ip) => ServerName::IpAddress(ip.into()),
            Err(_) => {
                ServerName::try_from(target.host.clone()).map_err(|_| KubeletClientError::Address(addr.clone()))?
            }
        };
        let connect = async {
            let tcp = TcpStream::connect(&addr)
                .await
                .map_err(|source| KubeletClientError::Dial { addr: addr.clone(), source })?;
            let _ = tcp.set_nodelay(true);
            self.connector
                .connect(server_name, tcp)
                .await
                .map_err(|source| KubeletClientError::Dial { addr: addr.clone(), source })
        };
        let tls = tokio::time::timeout(CONNECT_TIMEOUT, connect)
            .await
            .map_err(|_| KubeletClientError::DialTimeout { addr: addr.clone() })??;
        let http_err = |e: hyper::Error| KubeletClientError::Http { addr: addr.clone(), message: e.to_string() };
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.map_err(http_err)?;
        tokio::spawn(async move {
            if let Err(e) = conn.with_upgrades().await {
                tracing::debug!(error = %e, "kubelet connection ended");
            }
        });
        let mut req = Request::builder()
            .method(method)
            .uri(path_and_query)
            .body(Empty::<Bytes>::new())
            .map_err(|e| KubeletClientError::Http { addr: addr.clone(), message: e.to_string() })?;
        *req.headers_mut() = headers;
        if let Ok(v) = http::HeaderValue::from_str(&addr) {
            req.headers_mut().insert(http::header::HOST, v);
        }
        sender.send_request(req).await.map_err(http_err)
    }
}
