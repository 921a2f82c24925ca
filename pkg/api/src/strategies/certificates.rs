//! Strategies for certificates.k8s.io: CertificateSigningRequests, selectable by signer
//! (upstream's `pkg/registry/certificates/certificates/strategy.go`).

use crate::strategy::{DynStrategy, ObjectHooks, Strategy, Typed};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;

pub fn certificate_signing_request() -> Box<dyn DynStrategy> {
    Box::new(Typed(CertificateSigningRequestStrategy))
}

pub struct CertificateSigningRequestStrategy;

impl Strategy for CertificateSigningRequestStrategy {
    type Object = CertificateSigningRequest;
    const PREPARES: bool = false;
}

impl ObjectHooks for CertificateSigningRequestStrategy {
    fn selectable_fields(&self) -> &'static [&'static str] {
        &["spec.signerName"]
    }
}
