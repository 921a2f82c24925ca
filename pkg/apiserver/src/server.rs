//! The HTTPS listener: TLS with optional client certificates (verified against the cluster
//! CA), HTTP/1.1 and HTTP/2 by ALPN, upgrades kept for streaming, slow clients cut off; the
//! loop itself is `k1s_pki::serve`, shared with the kubelet.

use crate::endpoints::State;
use crate::handler;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("invalid TLS material ({what}): {message}")]
    Tls { what: &'static str, message: String },
    #[error("binding {addr}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("invalid configuration: {0}")]
    Config(String),
}

/// PEM material for the listener.
pub struct TlsMaterial {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
    /// When set, the certificate presented to each new connection is read from here (the
    /// server's renewal replaces it) and `cert_pem`/`key_pem` are not used.
    pub reloadable: Option<k1s_pki::ServingCert>,
}

pub fn tls_config(m: &TlsMaterial) -> Result<rustls::ServerConfig, ServeError> {
    if let Some(cert) = &m.reloadable {
        return k1s_pki::server_config_reloadable(&m.ca_pem, cert)
            .map_err(|e| ServeError::Tls { what: e.what, message: e.message });
    }
    let material =
        k1s_pki::ServingMaterial { ca_pem: m.ca_pem.clone(), cert_pem: m.cert_pem.clone(), key_pem: m.key_pem.clone() };
    k1s_pki::server_config(&material).map_err(|e| ServeError::Tls { what: e.what, message: e.message })
}

pub async fn bind(addr: SocketAddr) -> Result<TcpListener, ServeError> {
    TcpListener::bind(addr).await.map_err(|source| ServeError::Bind { addr, source })
}

/// Accepts connections until `cancel` fires (the shared loop of `k1s_pki::serve`, with
/// kube-apiserver's limits: 10 s for the TLS handshake, 32 s for a request's head).
pub async fn serve(listener: TcpListener, tls: rustls::ServerConfig, state: Arc<State>, cancel: CancellationToken) {
    let limits = k1s_pki::serve::Limits::default();
    k1s_pki::serve::serve(listener, Arc::new(tls), limits, "API server", cancel, move |conn| {
        let mut peer = crate::auth::Peer::new(conn.certificates);
        if let Some(remote) = conn.remote {
            peer = peer.with_remote(remote.ip());
        }
        let (state, peer) = (state.clone(), Arc::new(peer));
        // Boxed: the handler's future is large, and hyper moves the one it spawns per HTTP/2
        // stream into the task (a copy per request otherwise).
        move |req| Box::pin(handler::handle(state.clone(), req, peer.clone()))
    })
    .await
}
