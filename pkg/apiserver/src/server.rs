//! The HTTPS listener: TLS with optional client certificates (verified against the cluster
//! CA), HTTP/1.1 and HTTP/2 by ALPN, upgrades kept for streaming.

use crate::endpoints::State;
use crate::handler;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
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
    #[error("binding {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("invalid configuration: {0}")]
    Config(String),
}

/// PEM material for the listener.
pub struct TlsMaterial {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

pub fn tls_config(m: &TlsMaterial) -> Result<rustls::ServerConfig, ServeError> {
    let tls = |what, e: &dyn std::fmt::Display| ServeError::Tls { what, message: e.to_string() };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(m.ca_pem.as_bytes()) {
        roots.add(c.map_err(|e| tls("ca", &e))?).map_err(|e| tls("ca", &e))?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()
        .map_err(|e| tls("client verifier", &e))?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(m.cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| tls("serving certificate", &e))?;
    let key = PrivateKeyDer::from_pem_slice(m.key_pem.as_bytes()).map_err(|e| tls("serving key", &e))?;
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls("protocol versions", &e))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| tls("serving certificate", &e))?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(cfg)
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
            let peer = Arc::new(crate::auth::Peer::new(
                tls.get_ref().1.peer_certificates().map(|c| c.iter().map(|d| d.to_vec()).collect()).unwrap_or_default(),
            ));
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
