//! The certificates controllers, as upstream's controller manager runs them: the signers of
//! the built-in signer names ([`signer`], `csrsigning`) and the cleaner of old requests
//! ([`cleaner`], `csrcleaner`).

pub mod cleaner;
pub mod signer;

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;

/// Whether the request holds a `True` condition of type `ty`.
pub fn has_true_condition(csr: &CertificateSigningRequest, ty: &str) -> bool {
    csr.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == ty && c.status == "True")
}

/// The issued certificate (PEM), empty until one is.
pub fn certificate(csr: &CertificateSigningRequest) -> &[u8] {
    csr.status.as_ref().and_then(|s| s.certificate.as_ref()).map(|c| c.0.as_slice()).unwrap_or_default()
}
