//! The client certificate an in-process TLS client presents (the API server's towards kubelets
//! and aggregated API servers), replaceable while it runs: looked up on every handshake, so a
//! renewed certificate reaches new connections without a restart while established ones keep
//! theirs.

use crate::serving::{certified_key_as, ServingError};
use rustls::client::ResolvesClientCert;
use rustls::sign::CertifiedKey;
use rustls::SignatureScheme;
use std::sync::{Arc, RwLock};

/// One shared slot (clones share it), read on every TLS handshake.
#[derive(Clone, Debug)]
pub struct ClientCert {
    current: Arc<RwLock<Arc<CertifiedKey>>>,
}

const WHAT: (&str, &str) = ("client certificate", "client key");

impl ClientCert {
    pub fn new(cert_pem: &str, key_pem: &str) -> Result<ClientCert, ServingError> {
        Ok(ClientCert { current: Arc::new(RwLock::new(certified_key_as(cert_pem, key_pem, WHAT)?)) })
    }

    /// Presents `cert_pem` in every later handshake; on error the current one stays.
    pub fn replace(&self, cert_pem: &str, key_pem: &str) -> Result<(), ServingError> {
        let next = certified_key_as(cert_pem, key_pem, WHAT)?;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = next;
        Ok(())
    }

    /// The shared slot's address: clones of one slot have the same.
    pub(crate) fn slot_ptr(&self) -> *const () {
        Arc::as_ptr(&self.current).cast()
    }

    fn get(&self) -> Arc<CertifiedKey> {
        self.current.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl ResolvesClientCert for ClientCert {
    fn resolve(&self, _root_hint_subjects: &[&[u8]], _sigschemes: &[SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        Some(self.get())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replaced_client_certificate_is_presented_and_a_bad_pair_leaves_the_current_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pki = crate::Pki::ensure(dir.path(), &["127.0.0.1".to_owned()]).expect("pki");
        let a = pki.client("a", "a", &[]).expect("a");
        let b = pki.client("b", "b", &[]).expect("b");
        let slot = ClientCert::new(&a.cert_pem, &a.key_pem).expect("slot");
        let first = slot.resolve(&[], &[]).expect("a certificate").cert[0].clone();
        let err = slot.replace(&b.cert_pem, "garbage").expect_err("bad key");
        assert_eq!(err.what, "client key");
        assert_eq!(slot.resolve(&[], &[]).expect("cert").cert[0], first);
        slot.clone().replace(&b.cert_pem, &b.key_pem).expect("replace");
        assert_ne!(slot.resolve(&[], &[]).expect("cert").cert[0], first, "clones share the slot");
        assert!(slot.has_certs());
    }
}
