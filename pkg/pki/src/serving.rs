//! The TLS configuration of k1s's HTTPS servers (the API server and the kubelet): one serving
//! certificate, client certificates verified against the cluster CA but not required, since an
//! unauthenticated client gets through the handshake and then a 401 (or a bearer token checked
//! by the server), as upstream's servers do. ALPN offers HTTP/2 first.
//!
//! The serving certificate is looked up per handshake from a [`ServingCert`], so that a renewed
//! one reaches new connections without a restart while established ones keep theirs.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use std::sync::{Arc, RwLock};

/// The certificate a server presents, replaceable while it runs: cheap to clone (one shared
/// slot), read on every TLS handshake.
#[derive(Clone, Debug)]
pub struct ServingCert {
    current: Arc<RwLock<Arc<CertifiedKey>>>,
}

fn certified_key(cert_pem: &str, key_pem: &str) -> Result<Arc<CertifiedKey>, ServingError> {
    certified_key_as(cert_pem, key_pem, ("serving certificate", "serving key"))
}

/// A certificate chain and its key as rustls signs with them; `what` names the certificate and
/// the key in errors.
pub(crate) fn certified_key_as(
    cert_pem: &str,
    key_pem: &str,
    what: (&'static str, &'static str),
) -> Result<Arc<CertifiedKey>, ServingError> {
    let tls = |what, e: &dyn std::fmt::Display| ServingError { what, message: e.to_string() };
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(cert_pem.as_bytes()).collect::<Result<_, _>>().map_err(|e| tls(what.0, &e))?;
    if chain.is_empty() {
        return Err(tls(what.0, &"no certificate in the PEM"));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| tls(what.1, &e))?;
    let ck =
        CertifiedKey::from_der(chain, key, &rustls::crypto::ring::default_provider()).map_err(|e| tls(what.1, &e))?;
    Ok(Arc::new(ck))
}

impl ServingCert {
    pub fn new(cert_pem: &str, key_pem: &str) -> Result<ServingCert, ServingError> {
        Ok(ServingCert { current: Arc::new(RwLock::new(certified_key(cert_pem, key_pem)?)) })
    }

    /// Serves `cert_pem` to every later handshake; on error the current one stays.
    pub fn replace(&self, cert_pem: &str, key_pem: &str) -> Result<(), ServingError> {
        let next = certified_key(cert_pem, key_pem)?;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = next;
        Ok(())
    }

    fn get(&self) -> Arc<CertifiedKey> {
        self.current.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl ResolvesServerCert for ServingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.get())
    }
}

/// PEM material a server listens with.
#[derive(Clone, Debug)]
pub struct ServingMaterial {
    /// The CA that client certificates must chain to.
    pub ca_pem: String,
    /// The serving certificate chain.
    pub cert_pem: String,
    pub key_pem: String,
}

/// A part of the material that rustls refused.
#[derive(Debug, thiserror::Error)]
#[error("invalid TLS material ({what}): {message}")]
pub struct ServingError {
    /// Which part: `ca`, `client verifier`, `serving certificate`, `serving key`, `protocol
    /// versions`, `client certificate`, `client key`.
    pub what: &'static str,
    pub message: String,
}

/// The rustls server configuration for `m`.
pub fn server_config(m: &ServingMaterial) -> Result<rustls::ServerConfig, ServingError> {
    let cert = ServingCert::new(&m.cert_pem, &m.key_pem)?;
    server_config_reloadable(&m.ca_pem, &cert)
}

/// The rustls server configuration presenting whatever `cert` holds at each handshake.
pub fn server_config_reloadable(ca_pem: &str, cert: &ServingCert) -> Result<rustls::ServerConfig, ServingError> {
    let tls = |what, e: &dyn std::fmt::Display| ServingError { what, message: e.to_string() };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c.map_err(|e| tls("ca", &e))?).map_err(|e| tls("ca", &e))?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()
        .map_err(|e| tls("client verifier", &e))?;
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls("protocol versions", &e))?
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(Arc::new(cert.clone()));
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_serving_pair_makes_an_h2_first_config_and_garbage_names_its_part() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pki = crate::Pki::ensure(dir.path(), &["127.0.0.1".to_owned()]).expect("pki");
        let m = ServingMaterial {
            ca_pem: pki.ca.cert_pem.clone(),
            cert_pem: pki.serving.cert_pem.clone(),
            key_pem: pki.serving.key_pem.clone(),
        };
        let cfg = server_config(&m).expect("config");
        assert_eq!(cfg.alpn_protocols, vec![b"h2".to_vec(), b"http/1.1".to_vec()]);

        let bad_key = ServingMaterial { key_pem: "not a key".into(), ..m.clone() };
        assert_eq!(server_config(&bad_key).expect_err("bad key").what, "serving key");
        let no_ca = ServingMaterial { ca_pem: String::new(), ..m.clone() };
        assert_eq!(server_config(&no_ca).expect_err("no roots").what, "client verifier");

        let slot = ServingCert::new(&m.cert_pem, &m.key_pem).expect("slot");
        let first = slot.get().cert[0].clone();
        let other = pki.client("someone", "someone", &[]).expect("another pair");
        assert!(slot.replace(&other.cert_pem, "garbage").is_err());
        assert_eq!(slot.get().cert[0], first, "a bad pair leaves the current one");
        slot.replace(&other.cert_pem, &other.key_pem).expect("replace");
        assert_ne!(slot.clone().get().cert[0], first, "clones share the slot");
    }
}
