//! The CertificateSigningRequest admission plugins, as upstream's `CertificateApproval`,
//! `CertificateSigning` and `CertificateSubjectRestriction`: approving or denying a request (its
//! `approval` subresource) takes the `approve` verb on its signer, issuing a certificate (a
//! changed `status.certificate`) takes `sign`, both on `signers` of certificates.k8s.io by the
//! signer's name or `<domain>/*`; and no request to `kubernetes.io/kube-apiserver-client` may
//! ask for the `system:masters` group.

use crate::admission::{Attributes, Operation, ValidatingPlugin};
use crate::auth::{Authorizer, Decision, UserInfo};
use crate::error::ApiError;
use crate::request::{RequestInfo, RequestVerb};
use futures::future::BoxFuture;
use k1s_api::strategies::certificates::{parse_request, KUBE_APISERVER_CLIENT};
use serde_json::Value;
use std::sync::Arc;
use x509_parser::prelude::FromDer;

const GROUP: &str = "certificates.k8s.io";

pub struct CertificateAdmission {
    pub authz: Arc<dyn Authorizer>,
}

/// Whether `user` may `verb` the signer `signer_name` (or every signer of its domain).
fn authorized_for_signer(authz: &dyn Authorizer, user: &UserInfo, verb: &str, signer_name: &str) -> bool {
    let domain = signer_name.split('/').next().unwrap_or_default();
    [signer_name.to_string(), format!("{domain}/*")].into_iter().any(|name| {
        let info = RequestInfo {
            is_resource: true,
            verb: RequestVerb::named(verb),
            api_prefix: "apis".into(),
            group: GROUP.into(),
            version: "*".into(),
            resource: "signers".into(),
            name: Some(name),
            ..Default::default()
        };
        authz.authorize(&crate::auth::Attributes { user, info: &info }) == Decision::Allow
    })
}

fn signer_name(obj: &Value) -> &str {
    obj.pointer("/spec/signerName").and_then(Value::as_str).unwrap_or_default()
}

fn certificate(obj: Option<&Value>) -> &str {
    obj.and_then(|o| o.pointer("/status/certificate")).and_then(Value::as_str).unwrap_or_default()
}

/// The subject organizations of the request's PKCS#10 (none when it does not parse: validation
/// refuses it then).
fn requested_organizations(obj: &Value) -> Vec<String> {
    let b64 = obj.pointer("/spec/request").and_then(Value::as_str).unwrap_or_default();
    let Ok(pem) = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, b64) else { return Vec::new() };
    let Ok(der) = parse_request(&pem) else { return Vec::new() };
    let Ok((_, req)) = x509_parser::certification_request::X509CertificationRequest::from_der(&der) else {
        return Vec::new();
    };
    req.certification_request_info
        .subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok())
        .map(str::to_string)
        .collect()
}

impl CertificateAdmission {
    fn check(&self, attrs: &Attributes<'_>) -> Result<(), ApiError> {
        let Some(obj) = attrs.object.as_deref() else { return Ok(()) };
        let signer = signer_name(obj);
        let forbidden =
            |message: String| ApiError::forbidden_message(GROUP, "certificatesigningrequests", attrs.name, message);
        match (attrs.operation, attrs.subresource) {
            (Operation::Update, Some("approval"))
                if !authorized_for_signer(&*self.authz, attrs.user, "approve", signer) =>
            {
                Err(forbidden(format!("user not permitted to approve requests with signerName {signer:?}")))
            }
            (Operation::Update, Some("status"))
                if certificate(Some(obj)) != certificate(attrs.old_object)
                    && !authorized_for_signer(&*self.authz, attrs.user, "sign", signer) =>
            {
                Err(forbidden(format!("user not permitted to sign requests with signerName {signer:?}")))
            }
            (Operation::Create, None)
                if signer == KUBE_APISERVER_CLIENT
                    && requested_organizations(obj).iter().any(|o| o == "system:masters") =>
            {
                Err(forbidden(format!(
                    "use of {KUBE_APISERVER_CLIENT} signer with system:masters group is not allowed"
                )))
            }
            _ => Ok(()),
        }
    }
}

impl ValidatingPlugin for CertificateAdmission {
    fn name(&self) -> &'static str {
        "CertificateApproval,CertificateSigning,CertificateSubjectRestriction"
    }

    fn validate<'a>(&'a self, attrs: &'a Attributes<'_>) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            if attrs.resource.group != GROUP || attrs.resource.resource != "certificatesigningrequests" {
                return Ok(());
            }
            self.check(attrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Allows `approve`/`sign` on the signers it names (`name` exactly), for `bob` only.
    struct Signers(&'static [&'static str]);

    impl Authorizer for Signers {
        fn authorize(&self, attrs: &crate::auth::Attributes<'_>) -> Decision {
            let i = attrs.info;
            let ok = attrs.user.name == "bob"
                && i.group == GROUP
                && i.resource == "signers"
                && i.name.as_deref().is_some_and(|n| self.0.contains(&n));
            if ok {
                Decision::Allow
            } else {
                Decision::no_opinion()
            }
        }
    }

    fn csr(signer: &str, orgs: &[&str]) -> Value {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::default();
        params.distinguished_name.push(rcgen::DnType::CommonName, "u");
        for o in orgs {
            params.distinguished_name.push(rcgen::DnType::OrganizationName, *o);
        }
        let pem = params.serialize_request(&key).expect("csr").pem().expect("pem");
        let b64 = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, pem);
        json!({"metadata": {"name": "c"}, "spec": {"signerName": signer, "request": b64}})
    }

    fn run(
        plugin: &CertificateAdmission,
        op: Operation,
        sub: Option<&str>,
        obj: &mut Value,
        old: Option<&Value>,
        user: &str,
    ) -> Result<(), ApiError> {
        let info = k1s_api::resources::find(GROUP, "v1", "certificatesigningrequests").expect("csr");
        let user = UserInfo::new(user, &["system:authenticated"]);
        let attrs = Attributes {
            operation: op,
            resource: info,
            subresource: sub,
            namespace: None,
            name: "c",
            user: &user,
            object: Some(obj),
            old_object: old,
            dry_run: false,
            warnings: Default::default(),
            write: None,
            audit_annotations: None,
        };
        futures::executor::block_on(plugin.validate(&attrs))
    }

    #[test]
    fn approving_takes_approve_on_the_signer_or_its_domain_and_signing_takes_sign() {
        let p = CertificateAdmission { authz: Arc::new(Signers(&["example.com/*"])) };
        let mut obj = csr("example.com/mine", &[]);
        run(&p, Operation::Update, Some("approval"), &mut obj, None, "bob").expect("the domain's wildcard");
        let e = run(&p, Operation::Update, Some("approval"), &mut obj, None, "eve").expect_err("eve");
        assert_eq!(e.code, 403);
        assert_eq!(
            e.message,
            "certificatesigningrequests.certificates.k8s.io \"c\" is forbidden: user not permitted to approve requests with signerName \"example.com/mine\""
        );
        let old = obj.clone();
        obj["status"] = json!({"certificate": "Y2VydA=="});
        run(&p, Operation::Update, Some("status"), &mut obj, Some(&old), "bob").expect("bob signs");
        assert!(run(&p, Operation::Update, Some("status"), &mut obj, Some(&old), "eve").is_err());
        let mut unchanged = old.clone();
        run(&p, Operation::Update, Some("status"), &mut unchanged, Some(&old), "eve").expect("no new certificate");
    }

    #[test]
    fn no_client_certificate_request_may_ask_for_system_masters() {
        let p = CertificateAdmission { authz: Arc::new(Signers(&[])) };
        let mut masters = csr(KUBE_APISERVER_CLIENT, &["dev", "system:masters"]);
        let e = run(&p, Operation::Create, None, &mut masters, None, "eve").expect_err("masters");
        assert!(
            e.message.ends_with(
                "use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed"
            ),
            "{}",
            e.message
        );
        let mut dev = csr(KUBE_APISERVER_CLIENT, &["dev"]);
        run(&p, Operation::Create, None, &mut dev, None, "eve").expect("dev");
        let mut other = csr("example.com/x", &["system:masters"]);
        run(&p, Operation::Create, None, &mut other, None, "eve").expect("another signer");
    }
}
