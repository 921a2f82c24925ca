//! The CSR signer (upstream's `csrsigning` controllers): an approved request for one of the
//! built-in signer names, not failed and not yet issued, gets a certificate from the cluster
//! signing CA in `status.certificate`; one that breaks its signer's rules gets a `Failed`
//! condition (reason `SignerValidationFailure`) instead, as upstream's signers answer:
//! - `kubernetes.io/kube-apiserver-client`: any subject, usages `client auth` and optionally
//!   `digital signature` and `key encipherment`;
//! - `kubernetes.io/kube-apiserver-client-kubelet`: subject `system:node:<name>` in exactly
//!   `system:nodes`, no subject alternative names, usages `digital signature` and `client auth`
//!   (and optionally `key encipherment`);
//! - `kubernetes.io/kubelet-serving`: subject `system:node:<name>` in exactly `system:nodes`, at
//!   least one DNS name or IP address and no email or URI, usages `digital signature` and
//!   `server auth` (and optionally `key encipherment`).
//!
//! A certificate lasts the request's `expirationSeconds` (at least ten minutes), at most the
//! signer's [`MAX_DURATION`] and never past the CA's own end.

use super::{certificate, has_true_condition};
use crate::Context;
use k1s_api::strategies::certificates::{
    APPROVED, FAILED, KUBELET_SERVING, KUBE_APISERVER_CLIENT, KUBE_APISERVER_CLIENT_KUBELET,
};
use k1s_pki::csr::{self, Policy, Request};
use k1s_pki::CertPair;
use k1s_runtime::api_error::{is_conflict, is_not_found};
use k1s_runtime::controller::Controller;
use k8s_openapi::api::certificates::v1::{CertificateSigningRequest, CertificateSigningRequestCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::ByteString;
use kube::api::{Api, PostParams};
use kube::runtime::controller::Action;
use std::sync::Arc;
use std::time::Duration;

/// The longest certificate a signer issues (upstream's `--cluster-signing-duration` default).
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);
/// The shortest (twice the backdating): shorter requests get this.
pub const MIN_DURATION: Duration = Duration::from_secs(10 * 60);

/// The signer names signed here.
pub const SIGNERS: [&str; 3] = [KUBE_APISERVER_CLIENT, KUBE_APISERVER_CLIENT_KUBELET, KUBELET_SERVING];

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("unable to parse csr {name:?}")]
    Parse { name: String, source: csr::CsrError },
    #[error("error auto signing csr {name:?}")]
    Sign { name: String, source: csr::CsrError },
    #[error("updating the status of csr {name:?}")]
    Update { name: String, source: kube::Error },
}

/// What a request's signer makes of it.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Not one for this controller (another signer, not approved, failed, or already issued).
    Ignore,
    /// Refused: the `Failed` condition's message.
    Refuse(String),
    /// Sign with these usages for this long.
    Sign(Duration),
}

fn has_exactly(usages: &[String], required: &[&str], optional: &[&str]) -> bool {
    let mut set: Vec<&str> = usages.iter().map(String::as_str).collect();
    set.sort();
    set.dedup();
    required.iter().all(|r| set.contains(r)) && set.iter().all(|u| required.contains(u) || optional.contains(u))
}

/// Upstream's `ValidateKubeletServingCSR` / `ValidateKubeletClientCSR`: the subject and names of a
/// kubelet's request.
fn kubelet_subject(req: &Request) -> Result<(), String> {
    if req.organizations != ["system:nodes"] {
        return Err("subject organization is not system:nodes".into());
    }
    if !req.common_name.starts_with("system:node:") {
        return Err("subject common name does not begin with system:node:".into());
    }
    Ok(())
}

/// The checks of the request's signer; `Ok` when it may be signed.
pub fn check(signer: &str, req: &Request, usages: &[String]) -> Result<(), String> {
    match signer {
        KUBE_APISERVER_CLIENT => {
            let mut client_auth = false;
            for u in usages {
                match u.as_str() {
                    "digital signature" | "key encipherment" => {}
                    "client auth" => client_auth = true,
                    other => return Err(format!("invalid usage for client certificate: {other}")),
                }
            }
            if !client_auth {
                return Err("missing required usage for client certificate: client auth".into());
            }
            Ok(())
        }
        KUBE_APISERVER_CLIENT_KUBELET => {
            if req.organizations != ["system:nodes"] {
                return Err("subject organization is not system:nodes".into());
            }
            if !req.dns_names.is_empty() {
                return Err("DNS subjectAltNames are not allowed".into());
            }
            if !req.email_addresses.is_empty() {
                return Err("Email subjectAltNames are not allowed".into());
            }
            if !req.ip_addresses.is_empty() {
                return Err("IP subjectAltNames are not allowed".into());
            }
            if !req.uris.is_empty() {
                return Err("URI subjectAltNames are not allowed".into());
            }
            kubelet_subject(req)?;
            if !has_exactly(usages, &["client auth", "digital signature"], &["key encipherment"]) {
                return Err("usages did not match [client auth digital signature key encipherment]".into());
            }
            Ok(())
        }
        KUBELET_SERVING => {
            if req.organizations != ["system:nodes"] {
                return Err("subject organization is not system:nodes".into());
            }
            if req.dns_names.is_empty() && req.ip_addresses.is_empty() {
                return Err("DNS or IP subjectAltName is required".into());
            }
            if !req.email_addresses.is_empty() {
                return Err("Email subjectAltNames are not allowed".into());
            }
            if !req.uris.is_empty() {
                return Err("URI subjectAltNames are not allowed".into());
            }
            if !has_exactly(usages, &["digital signature", "server auth"], &["key encipherment"]) {
                return Err("usages did not match [digital signature key encipherment server auth]".into());
            }
            kubelet_subject(req)
        }
        other => Err(format!("unrecognized signerName: {other:?}")),
    }
}

/// How long a certificate for `expiration_seconds` lasts.
pub fn duration(expiration_seconds: Option<i32>) -> Duration {
    match expiration_seconds {
        None => MAX_DURATION,
        Some(s) => Duration::from_secs(u64::try_from(s).unwrap_or(0)).clamp(MIN_DURATION, MAX_DURATION),
    }
}

/// What to do with `csr`, given its parsed request.
pub fn verdict(
    csr: &CertificateSigningRequest,
    req: impl FnOnce() -> Result<Request, csr::CsrError>,
) -> Result<Verdict, csr::CsrError> {
    if !SIGNERS.contains(&csr.spec.signer_name.as_str())
        || !has_true_condition(csr, APPROVED)
        || has_true_condition(csr, FAILED)
        || !certificate(csr).is_empty()
    {
        return Ok(Verdict::Ignore);
    }
    let req = req()?;
    let usages = csr.spec.usages.clone().unwrap_or_default();
    Ok(match check(&csr.spec.signer_name, &req, &usages) {
        Ok(()) => Verdict::Sign(duration(csr.spec.expiration_seconds)),
        Err(m) => Verdict::Refuse(m),
    })
}

struct Signer {
    api: Api<CertificateSigningRequest>,
    ca: CertPair,
}

fn now() -> Time {
    let now = jiff::Timestamp::now();
    Time(jiff::Timestamp::from_second(now.as_second()).unwrap_or(now))
}

async fn reconcile(csr: Arc<CertificateSigningRequest>, s: Arc<Signer>) -> Result<Action, Error> {
    let name = csr.metadata.name.clone().unwrap_or_default();
    let verdict = verdict(&csr, || csr::parse_request(&csr.spec.request.0))
        .map_err(|source| Error::Parse { name: name.clone(), source })?;
    let mut updated = (*csr).clone();
    let status = updated.status.get_or_insert_with(Default::default);
    match verdict {
        Verdict::Ignore => return Ok(Action::await_change()),
        Verdict::Refuse(message) => {
            tracing::info!(csr = %name, signer = %csr.spec.signer_name, %message, "refusing to sign");
            status.conditions.get_or_insert_with(Vec::new).push(CertificateSigningRequestCondition {
                type_: FAILED.into(),
                status: "True".into(),
                reason: Some("SignerValidationFailure".into()),
                message: Some(message),
                last_update_time: Some(now()),
                last_transition_time: None,
            });
        }
        Verdict::Sign(ttl) => {
            let req = csr::parse_request(&csr.spec.request.0)
                .map_err(|source| Error::Parse { name: name.clone(), source })?;
            let policy = Policy { ttl, usages: csr.spec.usages.clone().unwrap_or_default() };
            let pem =
                csr::sign_now(&s.ca, &req.der, &policy).map_err(|source| Error::Sign { name: name.clone(), source })?;
            status.certificate = Some(ByteString(pem.into_bytes()));
            tracing::info!(csr = %name, signer = %csr.spec.signer_name, user = csr.spec.username.as_deref().unwrap_or_default(), "signed");
        }
    }
    match s.api.replace_status(&name, &PostParams::default(), &updated).await {
        Ok(_) => Ok(Action::await_change()),
        // A newer version is on its way through the watch; a deleted one needs nothing.
        Err(e) if is_conflict(&e) || is_not_found(&e) => Ok(Action::await_change()),
        Err(source) => Err(Error::Update { name, source }),
    }
}

pub async fn run(ctx: Arc<Context>) {
    let Some(ca) = ctx.cluster_signing.clone() else {
        tracing::info!("no cluster signing CA: CertificateSigningRequests are not signed here");
        ctx.cancel.cancelled().await;
        return;
    };
    let api = Api::<CertificateSigningRequest>::all(ctx.client.clone());
    let c = Controller::<CertificateSigningRequest>::new("csrsigning", ctx.client.clone());
    c.run(Arc::new(Signer { api, ca }), reconcile, ctx.cancel.clone()).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::certificates::v1::{CertificateSigningRequestSpec, CertificateSigningRequestStatus};

    fn req(cn: &str, orgs: &[&str], dns: &[&str]) -> Request {
        Request {
            common_name: cn.into(),
            organizations: orgs.iter().map(|s| s.to_string()).collect(),
            dns_names: dns.iter().map(|s| s.to_string()).collect(),
            ..Request::default()
        }
    }

    fn usages(u: &[&str]) -> Vec<String> {
        u.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn client_certificates_need_client_auth_and_nothing_but_signature_usages() {
        let alice = req("alice", &["dev"], &[]);
        assert_eq!(check(KUBE_APISERVER_CLIENT, &alice, &usages(&["client auth"])), Ok(()));
        assert_eq!(
            check(KUBE_APISERVER_CLIENT, &alice, &usages(&["digital signature", "key encipherment", "client auth"])),
            Ok(())
        );
        assert_eq!(
            check(KUBE_APISERVER_CLIENT, &alice, &usages(&["client auth", "server auth"])),
            Err("invalid usage for client certificate: server auth".into())
        );
        assert_eq!(
            check(KUBE_APISERVER_CLIENT, &alice, &usages(&["digital signature"])),
            Err("missing required usage for client certificate: client auth".into())
        );
    }

    #[test]
    fn kubelet_certificates_name_a_node_in_system_nodes() {
        let node = req("system:node:n1", &["system:nodes"], &[]);
        let client = usages(&["digital signature", "client auth"]);
        assert_eq!(check(KUBE_APISERVER_CLIENT_KUBELET, &node, &client), Ok(()));
        let rsa = usages(&["digital signature", "key encipherment", "client auth"]);
        assert_eq!(check(KUBE_APISERVER_CLIENT_KUBELET, &node, &rsa), Ok(()));
        assert_eq!(
            check(KUBE_APISERVER_CLIENT_KUBELET, &req("alice", &["system:nodes"], &[]), &client),
            Err("subject common name does not begin with system:node:".into())
        );
        assert_eq!(
            check(KUBE_APISERVER_CLIENT_KUBELET, &req("system:node:n1", &["system:nodes", "x"], &[]), &client),
            Err("subject organization is not system:nodes".into())
        );
        assert_eq!(
            check(KUBE_APISERVER_CLIENT_KUBELET, &req("system:node:n1", &["system:nodes"], &["n1"]), &client),
            Err("DNS subjectAltNames are not allowed".into())
        );
        assert!(check(KUBE_APISERVER_CLIENT_KUBELET, &node, &usages(&["client auth"])).is_err());
        let serving = usages(&["digital signature", "server auth"]);
        assert_eq!(check(KUBELET_SERVING, &node, &serving), Err("DNS or IP subjectAltName is required".into()));
        assert_eq!(check(KUBELET_SERVING, &req("system:node:n1", &["system:nodes"], &["n1"]), &serving), Ok(()));
        assert!(check(KUBELET_SERVING, &req("system:node:n1", &["system:nodes"], &["n1"]), &client).is_err());
    }

    #[test]
    fn expiration_seconds_is_honoured_between_ten_minutes_and_the_signers_maximum() {
        assert_eq!(duration(None), MAX_DURATION);
        assert_eq!(duration(Some(60)), MIN_DURATION);
        assert_eq!(duration(Some(3600)), Duration::from_secs(3600));
        assert_eq!(duration(Some(i32::MAX)), MAX_DURATION);
    }

    #[test]
    fn only_approved_unissued_unfailed_requests_to_our_signers_are_signed() {
        let mut csr = CertificateSigningRequest {
            spec: CertificateSigningRequestSpec {
                signer_name: KUBE_APISERVER_CLIENT.into(),
                usages: Some(usages(&["client auth"])),
                expiration_seconds: Some(3600),
                ..Default::default()
            },
            ..Default::default()
        };
        let alice = || Ok(req("alice", &["dev"], &[]));
        assert_eq!(verdict(&csr, alice), Ok(Verdict::Ignore), "pending");
        let cond = |ty: &str| CertificateSigningRequestCondition {
            type_: ty.into(),
            status: "True".into(),
            ..Default::default()
        };
        csr.status =
            Some(CertificateSigningRequestStatus { conditions: Some(vec![cond(APPROVED)]), certificate: None });
        assert_eq!(verdict(&csr, alice), Ok(Verdict::Sign(Duration::from_secs(3600))));
        csr.spec.usages = Some(usages(&["server auth"]));
        assert!(matches!(verdict(&csr, alice), Ok(Verdict::Refuse(_))));
        csr.status.as_mut().and_then(|s| s.conditions.as_mut()).expect("conditions").push(cond(FAILED));
        assert_eq!(verdict(&csr, alice), Ok(Verdict::Ignore), "failed");
        csr.spec.signer_name = "example.com/other".into();
        csr.status =
            Some(CertificateSigningRequestStatus { conditions: Some(vec![cond(APPROVED)]), certificate: None });
        assert_eq!(verdict(&csr, alice), Ok(Verdict::Ignore), "another signer's");
        csr.spec.signer_name = KUBE_APISERVER_CLIENT.into();
        csr.spec.usages = Some(usages(&["client auth"]));
        csr.status.as_mut().expect("status").certificate = Some(ByteString(b"pem".to_vec()));
        assert_eq!(verdict(&csr, alice), Ok(Verdict::Ignore), "issued");
    }
}
