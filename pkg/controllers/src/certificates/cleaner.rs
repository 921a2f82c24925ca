//! The CSR cleaner (upstream's `csrcleaner`): requests are deleted once done with, on upstream's
//! schedule: an approved and issued one an hour after its approval, a denied or failed one an
//! hour after that condition, a pending one (no condition at all) a day after its creation, and
//! one whose certificate has expired at once. Upstream lists every request each hour; here each
//! request is reconciled when it changes and again when its deadline comes (at the latest an
//! hour later, as upstream's poll).

use super::{certificate, has_true_condition};
use crate::Context;
use k1s_api::strategies::certificates::{APPROVED, DENIED, FAILED};
use k1s_runtime::api_error::is_not_found;
use k1s_runtime::controller::Controller;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::api::{Api, DeleteParams};
use kube::runtime::controller::Action;
use std::sync::Arc;
use std::time::Duration;

pub const APPROVED_EXPIRATION: Duration = Duration::from_secs(3600);
pub const DENIED_EXPIRATION: Duration = Duration::from_secs(3600);
pub const FAILED_EXPIRATION: Duration = Duration::from_secs(3600);
pub const PENDING_EXPIRATION: Duration = Duration::from_secs(24 * 3600);
/// Upstream's polling interval: the longest a request waits between two looks.
pub const POLL: Duration = Duration::from_secs(3600);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("unable to delete CSR {name:?}")]
    Delete { name: String, source: kube::Error },
}

/// When `csr` is to be deleted (Unix seconds); `None` when never (an approved request not
/// issued yet: its signer still has to act).
pub fn deadline(csr: &CertificateSigningRequest) -> Option<i64> {
    let after = |t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>, d: Duration| {
        t.map(|t| t.0.as_second() + d.as_secs() as i64)
    };
    let conditions = csr.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or_default();
    let issued = !certificate(csr).is_empty();
    let mut deadlines = Vec::new();
    for c in conditions {
        match c.type_.as_str() {
            APPROVED if issued => deadlines.push(after(c.last_update_time.as_ref(), APPROVED_EXPIRATION)),
            DENIED => deadlines.push(after(c.last_update_time.as_ref(), DENIED_EXPIRATION)),
            FAILED => deadlines.push(after(c.last_update_time.as_ref(), FAILED_EXPIRATION)),
            _ => {}
        }
    }
    if conditions.is_empty() {
        deadlines.push(after(csr.metadata.creation_timestamp.as_ref(), PENDING_EXPIRATION));
    }
    if issued && has_true_condition(csr, APPROVED) {
        deadlines.push(k1s_pki::csr::not_after(certificate(csr)));
    }
    deadlines.into_iter().flatten().min()
}

struct Cleaner {
    api: Api<CertificateSigningRequest>,
}

async fn reconcile(csr: Arc<CertificateSigningRequest>, c: Arc<Cleaner>) -> Result<Action, Error> {
    let Some(deadline) = deadline(&csr) else { return Ok(Action::requeue(POLL)) };
    let now = jiff::Timestamp::now().as_second();
    if now < deadline {
        let wait = Duration::from_secs(u64::try_from(deadline - now).unwrap_or(0) + 1);
        return Ok(Action::requeue(wait.min(POLL)));
    }
    let name = csr.metadata.name.clone().unwrap_or_default();
    match c.api.delete(&name, &DeleteParams::default()).await {
        Ok(_) => {
            tracing::info!(csr = %name, "deleted an old CertificateSigningRequest");
            Ok(Action::await_change())
        }
        Err(e) if is_not_found(&e) => Ok(Action::await_change()),
        Err(source) => Err(Error::Delete { name, source }),
    }
}

pub async fn run(ctx: Arc<Context>) {
    let api = Api::<CertificateSigningRequest>::all(ctx.client.clone());
    let c = Controller::<CertificateSigningRequest>::new("csrcleaner", ctx.client.clone());
    c.run(Arc::new(Cleaner { api }), reconcile, ctx.cancel.clone()).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::certificates::v1::{CertificateSigningRequestCondition, CertificateSigningRequestStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn at(s: i64) -> Time {
        Time(jiff::Timestamp::from_second(s).expect("time"))
    }

    fn csr(created: i64, conditions: &[(&str, i64)], issued: bool) -> CertificateSigningRequest {
        let mut c = CertificateSigningRequest::default();
        c.metadata.creation_timestamp = Some(at(created));
        c.status = Some(CertificateSigningRequestStatus {
            conditions: Some(
                conditions
                    .iter()
                    .map(|(t, when)| CertificateSigningRequestCondition {
                        type_: t.to_string(),
                        status: "True".into(),
                        last_update_time: Some(at(*when)),
                        ..Default::default()
                    })
                    .collect(),
            ),
            certificate: issued.then(|| k8s_openapi::ByteString(b"not a certificate".to_vec())),
        });
        c
    }

    #[test]
    fn requests_go_on_upstreams_schedule() {
        assert_eq!(deadline(&csr(1000, &[], false)), Some(1000 + 86400), "pending: a day after creation");
        assert_eq!(deadline(&csr(1000, &[("Denied", 2000)], false)), Some(2000 + 3600));
        assert_eq!(deadline(&csr(1000, &[("Approved", 2000), ("Failed", 3000)], false)), Some(3000 + 3600));
        assert_eq!(
            deadline(&csr(1000, &[("Approved", 2000)], true)),
            Some(2000 + 3600),
            "issued: an hour after approval"
        );
        assert_eq!(deadline(&csr(1000, &[("Approved", 2000)], false)), None, "approved, waiting for its signer");
    }
}
