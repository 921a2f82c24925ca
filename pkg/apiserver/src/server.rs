//! The HTTPS listener: TLS with optional client certificates (verified against the cluster
//! CA), HTTP/1.1 and HTTP/2 by ALPN, upgrades kept for streaming.

use crate::endpoints::State;
use crate::handler;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
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

/// Accepts connections until `cancel` fires.
pub async fn serve(listener: TcpListener, tls: rustls::ServerConfig, state: Arc<State>, cancel: CancellationToken) {
    let acceptor = TlsAcceptor::from(Arc::new(tls));
    loop {
        let (tcp, remote) = tokio::select! {
            _ = cancel.cancelled() => break,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        let (acceptor, state, cancel) = (acceptor.clone(), state.clone(), cancel.clone());
        tokio::spawn(async move {
            let tls = match tokio::time::timeout(std::time::Duration::from_secs(10), acceptor.accept(tcp)).await {
                Ok(Ok(t)) => t,
                Ok(Err(e)) => {
                    tracing::debug!(%remote, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => return,
            };
            let peer = Arc::new(
                crate::auth::Peer::new(
                    tls.get_ref()
                        .1
                        .peer_certificates()
                        .map(|c| c.iter().map(|d| d.to_vec()).collect())
                        .unwrap_or_default(),
                )
                .with_remote(remote.ip()),
            );
            let svc = hyper::service::service_fn(move |req| {
                let (state, peer) = (state.clone(), peer.clone());
                // Boxed: the handler's future is large, and hyper moves the one it spawns per
                // HTTP/2 stream into the task (a copy per request otherwise).
                async move { Ok::<_, Infallible>(Box::pin(handler::handle(state, req, peer)).await) }
            });
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(tls), svc);
            tokio::pin!(conn);
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        tracing::trace!(%remote, error = %e, "connection ended");
                    }
                }
                _ = cancel.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), conn).await;
                }
            }
        });
    }
}
