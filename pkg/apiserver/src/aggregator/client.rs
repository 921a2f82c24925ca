//! Calling an aggregated API server: HTTPS over HTTP/1.1, the API server presenting its front
//! proxy client certificate, the backend's certificate verified for the Service's DNS name
//! (`<name>.<namespace>.svc`) against the APIService's `caBundle` (the system roots without
//! one), or not verified at all under `insecureSkipTLSVerify`.

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
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

/// The front proxy's client certificate and key, as rustls takes them.
pub enum Identity {
    Fixed {
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
    },
    /// Whatever the slot holds at each handshake (renewed without a restart).
    Reloadable(k1s_pki::ClientCert),
}

impl Identity {
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Identity, ClientError> {
        let tls = |what, e: &dyn std::fmt::Display| ClientError::Tls { what, message: e.to_string() };
        let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| tls("front proxy client certificate", &e))?;
        let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| tls("front proxy client key", &e))?;
        Ok(Identity::Fixed { chain, key })
    }
}

/// How a backend's certificate is checked.
pub enum Trust<'a> {
    /// Against these PEM CAs (the system roots when empty).
    Bundle(&'a [u8]),
    /// Not at all (`insecureSkipTLSVerify`, and upstream's availability check).
    Insecure,
}

/// Accepts any server certificate; signatures are still checked with the provider's algorithms.
#[derive(Debug)]
struct NoVerification(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The TLS client configuration for one backend.
pub fn tls_config(identity: Option<&Identity>, trust: Trust<'_>) -> Result<rustls::ClientConfig, ClientError> {
    let tls = |what, e: &dyn std::fmt::Display| ClientError::Tls { what, message: e.to_string() };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls("protocol versions", &e))?;
    let builder = match trust {
        Trust::Insecure => builder.dangerous().with_custom_certificate_verifier(Arc::new(NoVerification(provider))),
        Trust::Bundle(pem) => {
            let mut roots = rustls::RootCertStore::empty();
            if pem.is_empty() {
                for c in rustls_native_certs::load_native_certs().certs {
                    let _ = roots.add(c);
                }
            } else {
                for c in CertificateDer::pem_slice_iter(pem) {
                    roots.add(c.map_err(|e| tls("caBundle", &e))?).map_err(|e| tls("caBundle", &e))?;
                }
            }
            builder.with_root_certificates(roots)
        }
    };
    let mut cfg = match identity {
        Some(Identity::Fixed { chain, key }) => builder
            .with_client_auth_cert(chain.clone(), key.clone_key())
            .map_err(|e| tls("front proxy client certificate", &e))?,
        Some(Identity::Reloadable(slot)) => builder.with_client_cert_resolver(Arc::new(slot.clone())),
        None => builder.with_no_client_auth(),
    };
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(cfg)
}

/// Sends `req` to `addr` over TLS, the certificate checked for `server_name`.
pub async fn send(
    addr: &str,
    server_name: &str,
    tls: rustls::ClientConfig,
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
    let stream = TlsConnector::from(Arc::new(tls))
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
