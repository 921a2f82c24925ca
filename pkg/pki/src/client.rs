//! TLS client configurations for every in-process client: the API server's towards admission
//! webhooks, aggregated API servers, kubelets and OIDC issuers, and the kubelet's HTTPS probes.
//! One builder ([`client_config`]), one verifier for "do not check the certificate"
//! ([`InsecureVerifier`]: the chain and name are not checked, the handshake's signature still
//! is, as Go's `InsecureSkipVerify` does), the system roots read once ([`system_roots`]), and a
//! cache of configurations keyed by CA bundle and identity ([`ConfigCache`]) so that callers
//! that dial often do not rebuild them.

use crate::ClientCert;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Why a client configuration could not be built: `what` names the material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid TLS material ({what}): {message}")]
pub struct ClientTlsError {
    pub what: &'static str,
    pub message: String,
}

fn err(what: &'static str, e: impl std::fmt::Display) -> ClientTlsError {
    ClientTlsError { what, message: e.to_string() }
}

/// How the server's certificate is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Trust<'a> {
    /// Against these PEM certificate authorities (`what` names them in errors).
    Pem { pem: &'a [u8], what: &'static str },
    /// Against the machine's trusted roots.
    System,
    /// Not at all (`insecureSkipTLSVerify`, HTTPS probes): see [`InsecureVerifier`].
    Insecure,
}

impl<'a> Trust<'a> {
    /// A CA bundle, or the system roots when it is empty (webhooks' and APIServices' `caBundle`).
    pub fn bundle_or_system(pem: &'a [u8], what: &'static str) -> Trust<'a> {
        if pem.iter().all(u8::is_ascii_whitespace) {
            Trust::System
        } else {
            Trust::Pem { pem, what }
        }
    }
}

/// The certificate the client presents.
#[derive(Clone, Debug)]
pub enum Identity {
    /// A fixed certificate chain and key.
    Fixed { chain: Vec<CertificateDer<'static>>, key: Arc<PrivateKeyDer<'static>> },
    /// Whatever the slot holds at each handshake (renewed without a restart).
    Reloadable(ClientCert),
}

impl Identity {
    /// A fixed identity from PEM; `what` names the pair in errors.
    pub fn from_pem(
        cert_pem: &str,
        key_pem: &str,
        what: (&'static str, &'static str),
    ) -> Result<Identity, ClientTlsError> {
        let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| err(what.0, e))?;
        if chain.is_empty() {
            return Err(err(what.0, "no certificate found"));
        }
        let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| err(what.1, e))?;
        Ok(Identity::Fixed { chain, key: Arc::new(key) })
    }

    /// What tells two identities apart in a [`ConfigCache`] key.
    fn cache_key(&self) -> Vec<u8> {
        match self {
            Identity::Fixed { chain, .. } => chain.iter().flat_map(|c| c.as_ref().iter().copied()).collect(),
            // One slot is one identity, whatever certificate it holds now.
            Identity::Reloadable(slot) => format!("slot:{:p}", slot.slot_ptr()).into_bytes(),
        }
    }
}

fn provider() -> Arc<CryptoProvider> {
    static PROVIDER: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    PROVIDER.get_or_init(|| Arc::new(rustls::crypto::ring::default_provider())).clone()
}

/// The machine's trusted roots, read once per process (certificates that do not parse are
/// skipped, as Go's `SystemCertPool` skips them).
pub fn system_roots() -> Arc<RootCertStore> {
    static ROOTS: OnceLock<Arc<RootCertStore>> = OnceLock::new();
    ROOTS
        .get_or_init(|| {
            let mut roots = RootCertStore::empty();
            let native = rustls_native_certs::load_native_certs();
            for e in &native.errors {
                tracing::debug!(error = %e, "reading a system root certificate failed");
            }
            let (_, skipped) = roots.add_parsable_certificates(native.certs);
            if skipped > 0 {
                tracing::debug!(skipped, "system root certificates that do not parse were skipped");
            }
            Arc::new(roots)
        })
        .clone()
}

/// PEM certificate authorities as a root store; none found is an error.
pub fn roots_from_pem(pem: &[u8], what: &'static str) -> Result<RootCertStore, ClientTlsError> {
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(pem) {
        roots.add(c.map_err(|e| err(what, e))?).map_err(|e| err(what, e))?;
    }
    if roots.is_empty() {
        return Err(err(what, "no certificate found"));
    }
    Ok(roots)
}

/// A client configuration: `trust` checks the server, `identity` is presented when the server
/// asks, `alpn` is offered in order (empty: none).
pub fn client_config(
    trust: Trust<'_>,
    identity: Option<&Identity>,
    alpn: &[&[u8]],
) -> Result<ClientConfig, ClientTlsError> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| err("protocol versions", e))?;
    let builder = match trust {
        Trust::Insecure => builder.dangerous().with_custom_certificate_verifier(Arc::new(InsecureVerifier(provider))),
        Trust::System => builder.with_root_certificates(system_roots()),
        Trust::Pem { pem, what } => builder.with_root_certificates(roots_from_pem(pem, what)?),
    };
    let mut cfg = match identity {
        Some(Identity::Fixed { chain, key }) => {
            builder.with_client_auth_cert(chain.clone(), key.clone_key()).map_err(|e| err("client certificate", e))?
        }
        Some(Identity::Reloadable(slot)) => builder.with_client_cert_resolver(Arc::new(slot.clone())),
        None => builder.with_no_client_auth(),
    };
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(cfg)
}

/// Accepts any server certificate, as Go's `InsecureSkipVerify`: the chain, its dates and the
/// server name are not checked, but the handshake's signature must still be made by the
/// certificate's key with an algorithm the provider supports.
#[derive(Debug)]
pub struct InsecureVerifier(Arc<CryptoProvider>);

impl InsecureVerifier {
    pub fn new() -> InsecureVerifier {
        InsecureVerifier(provider())
    }
}

impl Default for InsecureVerifier {
    fn default() -> Self {
        Self::new()
    }
}

impl ServerCertVerifier for InsecureVerifier {
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

/// Client configurations built once per (trust, identity, ALPN) and shared: webhooks and
/// APIServices name their CA bundle in objects that change rarely while calls are frequent.
/// Bounded: past `capacity` entries the cache is emptied (bundles of deleted objects go too).
pub struct ConfigCache {
    capacity: usize,
    entries: Mutex<HashMap<Vec<u8>, Arc<ClientConfig>>>,
}

impl ConfigCache {
    pub fn new(capacity: usize) -> ConfigCache {
        ConfigCache { capacity: capacity.max(1), entries: Mutex::new(HashMap::new()) }
    }

    /// The configuration for these arguments (see [`client_config`]), built on first use.
    pub fn get(
        &self,
        trust: Trust<'_>,
        identity: Option<&Identity>,
        alpn: &[&[u8]],
    ) -> Result<Arc<ClientConfig>, ClientTlsError> {
        let key = cache_key(trust, identity, alpn);
        if let Some(cfg) = self.entries.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return Ok(cfg.clone());
        }
        let cfg = Arc::new(client_config(trust, identity, alpn)?);
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= self.capacity {
            entries.clear();
        }
        entries.insert(key, cfg.clone());
        Ok(cfg)
    }

    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn cache_key(trust: Trust<'_>, identity: Option<&Identity>, alpn: &[&[u8]]) -> Vec<u8> {
    let mut key = Vec::new();
    let mut part = |b: &[u8]| {
        key.extend_from_slice(&(b.len() as u64).to_le_bytes());
        key.extend_from_slice(b);
    };
    match trust {
        Trust::Pem { pem, .. } => {
            part(b"pem");
            part(pem);
        }
        Trust::System => part(b"system"),
        Trust::Insecure => part(b"insecure"),
    }
    part(&identity.map(Identity::cache_key).unwrap_or_default());
    for p in alpn {
        part(p);
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_check_what_they_are_told_and_present_the_identity() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pki = crate::Pki::ensure(dir.path(), &["127.0.0.1".to_owned()]).expect("pki");
        let ca = std::fs::read(dir.path().join("server-ca.crt")).expect("ca");
        let admin = pki.client("admin", "admin", &[]).expect("client");
        let identity = Identity::from_pem(&admin.cert_pem, &admin.key_pem, ("cert", "key")).expect("identity");
        let cfg =
            client_config(Trust::Pem { pem: &ca, what: "ca" }, Some(&identity), &[b"h2", b"http/1.1"]).expect("config");
        assert!(cfg.client_auth_cert_resolver.has_certs());
        assert_eq!(cfg.alpn_protocols, vec![b"h2".to_vec(), b"http/1.1".to_vec()]);
        let none = client_config(Trust::Insecure, None, &[]).expect("insecure");
        assert!(!none.client_auth_cert_resolver.has_certs());

        let bad = client_config(Trust::Pem { pem: b"not a certificate", what: "caBundle" }, None, &[]);
        assert_eq!(bad.expect_err("no CA").what, "caBundle");
        assert_eq!(Trust::bundle_or_system(b"  \n", "x"), Trust::System);
        let bad_key = Identity::from_pem(&admin.cert_pem, "garbage", ("cert", "key"));
        assert_eq!(bad_key.expect_err("bad key").what, "key");
    }

    #[test]
    fn the_cache_builds_a_config_once_per_bundle_and_identity() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pki = crate::Pki::ensure(dir.path(), &["127.0.0.1".to_owned()]).expect("pki");
        let ca = std::fs::read(dir.path().join("server-ca.crt")).expect("ca");
        let a = pki.client("a", "a", &[]).expect("a");
        let id = Identity::from_pem(&a.cert_pem, &a.key_pem, ("cert", "key")).expect("identity");
        let cache = ConfigCache::new(3);
        let trust = Trust::Pem { pem: &ca, what: "ca" };
        let first = cache.get(trust, None, &[b"http/1.1"]).expect("config");
        let again = cache.get(trust, None, &[b"http/1.1"]).expect("config");
        assert!(Arc::ptr_eq(&first, &again), "built once");
        let with_id = cache.get(trust, Some(&id), &[b"http/1.1"]).expect("config");
        assert!(!Arc::ptr_eq(&first, &with_id), "another identity, another config");
        let other_alpn = cache.get(trust, None, &[b"h2"]).expect("config");
        assert!(!Arc::ptr_eq(&first, &other_alpn));
        assert_eq!(cache.len(), 3);
        cache.get(Trust::Insecure, None, &[]).expect("config");
        assert_eq!(cache.len(), 1, "emptied past its capacity");
        assert!(cache.get(Trust::Pem { pem: b"junk", what: "caBundle" }, None, &[]).is_err());
    }
}
