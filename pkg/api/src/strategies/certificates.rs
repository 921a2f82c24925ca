//! Strategies for certificates.k8s.io: CertificateSigningRequests, selectable by signer
//! (upstream's `pkg/registry/certificates/certificates/strategy.go` and
//! `pkg/apis/certificates/validation`).
//!
//! A request records who made it: on create, `spec.username`, `uid`, `groups` and `extra` are
//! the requester's, whatever the client sent, and the status starts empty. After that the spec
//! never changes; the `approval` subresource writes only the conditions (Approved, Denied and
//! the others), the `status` subresource writes the certificate and the other conditions but may
//! not touch Approved or Denied, and a plain update changes only the metadata.

use crate::field::{FieldError, Path};
use crate::strategy::{DynStrategy, NameRule, ObjectHooks, Requester, Strategy, Typed};
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition, CertificateSigningRequestStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use x509_parser::prelude::FromDer;

pub fn certificate_signing_request() -> Box<dyn DynStrategy> {
    Box::new(Typed(CertificateSigningRequestStrategy))
}

/// Condition types.
pub const APPROVED: &str = "Approved";
pub const DENIED: &str = "Denied";
pub const FAILED: &str = "Failed";

/// The signer names of the built-in signers.
pub const KUBE_APISERVER_CLIENT: &str = "kubernetes.io/kube-apiserver-client";
pub const KUBE_APISERVER_CLIENT_KUBELET: &str = "kubernetes.io/kube-apiserver-client-kubelet";
pub const KUBELET_SERVING: &str = "kubernetes.io/kubelet-serving";
/// Refused by certificates.k8s.io/v1 (a v1beta1 name).
pub const LEGACY_UNKNOWN: &str = "kubernetes.io/legacy-unknown";

/// Every usage a request may ask for (`KeyUsage` of certificates.k8s.io/v1).
pub const KEY_USAGES: &[&str] = &[
    "any",
    "cert sign",
    "client auth",
    "code signing",
    "content commitment",
    "crl sign",
    "data encipherment",
    "decipher only",
    "digital signature",
    "email protection",
    "encipher only",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "key agreement",
    "key encipherment",
    "microsoft sgc",
    "netscape sgc",
    "ocsp signing",
    "s/mime",
    "server auth",
    "signing",
    "timestamping",
];

/// Conditions that may only be `True`.
const TRUE_ONLY: &[&str] = &[APPROVED, DENIED, FAILED];

pub struct CertificateSigningRequestStrategy;

impl Strategy for CertificateSigningRequestStrategy {
    type Object = CertificateSigningRequest;
    const PREPARES_SUBRESOURCES: bool = true;

    /// Upstream: "We don't care what you call your certificate requests" (any name that can be
    /// a path segment).
    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    fn prepare_for_create(&self, csr: &mut CertificateSigningRequest) {
        csr.spec.username = None;
        csr.spec.uid = None;
        csr.spec.groups = None;
        csr.spec.extra = None;
        // Nobody creates a request already approved.
        csr.status = Some(CertificateSigningRequestStatus::default());
    }

    fn set_requester(&self, csr: &mut CertificateSigningRequest, user: &Requester<'_>) {
        let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
        csr.spec.username = some(user.name);
        csr.spec.uid = some(user.uid);
        csr.spec.groups = (!user.groups.is_empty()).then(|| user.groups.to_vec());
        csr.spec.extra = (!user.extra.is_empty()).then(|| user.extra.clone());
    }

    /// Requests are immutable but for their metadata, except through the subresources.
    fn prepare_for_update(&self, new: &mut CertificateSigningRequest, old: &CertificateSigningRequest) {
        new.spec = old.spec.clone();
        new.status = old.status.clone();
    }

    fn prepare_for_subresource_update(
        &self,
        subresource: &str,
        new: &mut CertificateSigningRequest,
        old: &CertificateSigningRequest,
    ) {
        match subresource {
            "status" => {
                // The signer's write may not change the approver's decision: Approved and Denied
                // stay as they were (adding or removing one is a validation error).
                preserve_conditions(new, old, APPROVED);
                preserve_conditions(new, old, DENIED);
                populate_condition_timestamps(new, old);
            }
            "approval" => populate_condition_timestamps(new, old),
            _ => {}
        }
    }

    fn validate(&self, csr: &CertificateSigningRequest) -> Vec<FieldError> {
        validate(csr, &Options::for_objects(csr, None))
    }

    fn validate_update(&self, new: &CertificateSigningRequest, old: &CertificateSigningRequest) -> Vec<FieldError> {
        validate_update(new, old, Options::for_objects(new, Some(old)))
    }

    fn validate_subresource_update(
        &self,
        subresource: &str,
        new: &CertificateSigningRequest,
        old: &CertificateSigningRequest,
    ) -> Vec<FieldError> {
        let mut opts = Options::for_objects(new, Some(old));
        match subresource {
            "status" => opts.setting_certificate = true,
            "approval" => opts.setting_approval = true,
            _ => {}
        }
        validate_update(new, old, opts)
    }
}

impl ObjectHooks for CertificateSigningRequestStrategy {
    fn selectable_fields(&self) -> &'static [&'static str] {
        &["spec.signerName"]
    }

    /// Only the conditions change through `approval`; the rest of the status through `status`.
    fn subresource_field(&self, subresource: &str) -> Option<&'static [&'static str]> {
        (subresource == "approval").then_some(&["status", "conditions"])
    }
}

fn conditions(csr: &CertificateSigningRequest) -> &[CertificateSigningRequestCondition] {
    csr.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or_default()
}

fn of_type<'a>(csr: &'a CertificateSigningRequest, ty: &str) -> Vec<&'a CertificateSigningRequestCondition> {
    conditions(csr).iter().filter(|c| c.type_ == ty).collect()
}

/// Whether the request holds a condition `ty` with status True.
pub fn has_true_condition(csr: &CertificateSigningRequest, ty: &str) -> bool {
    conditions(csr).iter().any(|c| c.type_ == ty && c.status == "True")
}

/// Puts `old`'s conditions of type `ty` back in `new` when `new` holds as many of them.
fn preserve_conditions(new: &mut CertificateSigningRequest, old: &CertificateSigningRequest, ty: &str) {
    let olds: Vec<CertificateSigningRequestCondition> = of_type(old, ty).into_iter().cloned().collect();
    let Some(list) = new.status.as_mut().and_then(|s| s.conditions.as_mut()) else { return };
    let at: Vec<usize> = list.iter().enumerate().filter(|(_, c)| c.type_ == ty).map(|(i, _)| i).collect();
    if at.len() != olds.len() {
        return;
    }
    for (i, c) in at.into_iter().zip(olds) {
        list[i] = c;
    }
}

fn now() -> Time {
    let now = jiff::Timestamp::now();
    Time(jiff::Timestamp::from_second(now.as_second()).unwrap_or(now))
}

/// Sets `lastUpdateTime` (now) and `lastTransitionTime` (the old condition's of the same type and
/// status, else now) where a condition has none.
fn populate_condition_timestamps(new: &mut CertificateSigningRequest, old: &CertificateSigningRequest) {
    let now = now();
    let olds = conditions(old).to_vec();
    let Some(list) = new.status.as_mut().and_then(|s| s.conditions.as_mut()) else { return };
    for c in list {
        if c.last_update_time.is_none() {
            c.last_update_time = Some(now.clone());
        }
        if c.last_transition_time.is_none() {
            let kept = olds
                .iter()
                .find(|o| o.type_ == c.type_ && o.status == c.status && o.last_transition_time.is_some())
                .and_then(|o| o.last_transition_time.clone());
            c.last_transition_time = Some(kept.unwrap_or_else(|| now.clone()));
        }
    }
}

/// What a write may do (upstream's `certificateValidationOptions`): the subresource's powers,
/// and the faults an update tolerates because the stored object already has them.
#[derive(Default)]
struct Options {
    setting_approval: bool,
    setting_certificate: bool,
    both_approved_and_denied: bool,
    legacy_signer_name: bool,
    duplicate_condition_types: bool,
    empty_condition_type: bool,
    arbitrary_certificate: bool,
    unknown_usages: bool,
    duplicate_usages: bool,
}

fn certificate_bytes(csr: &CertificateSigningRequest) -> &[u8] {
    csr.status.as_ref().and_then(|s| s.certificate.as_ref()).map(|b| b.0.as_slice()).unwrap_or_default()
}

fn usages(csr: &CertificateSigningRequest) -> &[String] {
    csr.spec.usages.as_deref().unwrap_or_default()
}

impl Options {
    fn for_objects(new: &CertificateSigningRequest, old: Option<&CertificateSigningRequest>) -> Options {
        let Some(old) = old else { return Options::default() };
        let types: Vec<&str> = conditions(old).iter().map(|c| c.type_.as_str()).collect();
        let mut seen = std::collections::HashSet::new();
        let mut usage_seen = std::collections::HashSet::new();
        Options {
            setting_approval: false,
            setting_certificate: false,
            both_approved_and_denied: types.contains(&APPROVED) && types.contains(&DENIED),
            legacy_signer_name: old.spec.signer_name == LEGACY_UNKNOWN,
            duplicate_condition_types: !types.iter().all(|t| seen.insert(*t)),
            empty_condition_type: types.contains(&""),
            arbitrary_certificate: certificate_bytes(new) == certificate_bytes(old)
                || validate_certificate(certificate_bytes(old)).is_err(),
            unknown_usages: usages(old).iter().any(|u| !KEY_USAGES.contains(&u.as_str())),
            duplicate_usages: !usages(old).iter().all(|u| usage_seen.insert(u)),
        }
    }
}

/// The PKCS#10 request in a `CERTIFICATE REQUEST` PEM block, its signature checked.
pub fn parse_request(pem: &[u8]) -> Result<Vec<u8>, String> {
    let not_a_request = || "PEM block type must be CERTIFICATE REQUEST".to_string();
    let (_, block) = x509_parser::pem::parse_x509_pem(pem).map_err(|_| not_a_request())?;
    if block.label != "CERTIFICATE REQUEST" {
        return Err(not_a_request());
    }
    let (_, req) = x509_parser::certification_request::X509CertificationRequest::from_der(&block.contents)
        .map_err(|e| format!("x509: malformed certificate request: {e}"))?;
    req.verify_signature().map_err(|_| "x509: invalid signature on the certificate request".to_string())?;
    Ok(block.contents)
}

/// `status.certificate`: empty, or one or more `CERTIFICATE` PEM blocks holding certificates.
fn validate_certificate(pem: &[u8]) -> Result<(), String> {
    if pem.is_empty() {
        return Ok(());
    }
    let mut blocks = 0;
    for block in x509_parser::pem::Pem::iter_from_buffer(pem) {
        let Ok(block) = block else { break };
        if block.label != "CERTIFICATE" {
            return Err(format!("only CERTIFICATE PEM blocks are allowed, found {:?}", block.label));
        }
        x509_parser::parse_x509_certificate(&block.contents).map_err(|e| format!("x509: {e}"))?;
        blocks += 1;
    }
    if blocks == 0 {
        return Err("must contain at least one CERTIFICATE PEM block".into());
    }
    Ok(())
}

/// `ValidateSignerName`: `<domain>/<path>`, a domain of at least two DNS labels and a path of
/// DNS subdomains, short enough for RBAC's `resourceNames` (with `/*`).
pub fn validate_signer_name(path: &Path, name: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if name.is_empty() {
        return vec![FieldError::required(path.clone(), "")];
    }
    let segments: Vec<&str> = name.split('/').collect();
    let [domain, rest] = segments[..] else {
        return vec![FieldError::invalid(
            path.clone(),
            name,
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        )];
    };
    if domain.len() > 253 {
        errs.push(FieldError::too_long(path.clone(), 253));
    }
    let labels: Vec<&str> = domain.split('.').collect();
    for l in &labels {
        let msgs = crate::meta::dns1123_label(l);
        if !msgs.is_empty() {
            errs.extend(
                msgs.into_iter()
                    .map(|m| FieldError::invalid(path.clone(), domain, format!("validating label {l:?}: {m}"))),
            );
            break;
        }
    }
    if labels.len() < 2 {
        errs.push(FieldError::invalid(
            path.clone(),
            domain,
            "should be a domain with at least two segments separated by dots",
        ));
    }
    for l in rest.split('.') {
        let msgs = crate::meta::dns1123_subdomain(l);
        if !msgs.is_empty() {
            errs.extend(
                msgs.into_iter()
                    .map(|m| FieldError::invalid(path.clone(), rest, format!("validating label {l:?}: {m}"))),
            );
            break;
        }
    }
    // Room for `/*` after the name in an RBAC rule's resourceNames (253 characters at most).
    let max_path = 253 - domain.len().min(253) - 2;
    if rest.len() > max_path {
        errs.push(FieldError::too_long(path.clone(), max_path));
    }
    errs
}

fn validate(csr: &CertificateSigningRequest, opts: &Options) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = Path::new("spec");
    if let Err(e) = parse_request(&csr.spec.request.0) {
        errs.push(FieldError::invalid(
            spec.child("request"),
            String::from_utf8_lossy(&csr.spec.request.0).into_owned(),
            e,
        ));
    }
    let us = usages(csr);
    if us.is_empty() {
        errs.push(FieldError::required(spec.child("usages"), ""));
    }
    if !opts.unknown_usages {
        for (i, u) in us.iter().enumerate() {
            if !KEY_USAGES.contains(&u.as_str()) {
                errs.push(FieldError::not_supported(spec.child("usages").index(i), u.as_str(), KEY_USAGES));
            }
        }
    }
    if !opts.duplicate_usages {
        let mut seen = std::collections::HashSet::new();
        for (i, u) in us.iter().enumerate() {
            if !seen.insert(u) {
                errs.push(FieldError::duplicate(spec.child("usages").index(i), u.as_str()));
            }
        }
    }
    if !opts.legacy_signer_name && csr.spec.signer_name == LEGACY_UNKNOWN {
        errs.push(FieldError::invalid(
            spec.child("signerName"),
            csr.spec.signer_name.as_str(),
            "the legacy signerName is not allowed via this API version",
        ));
    } else {
        errs.extend(validate_signer_name(&spec.child("signerName"), &csr.spec.signer_name));
    }
    if let Some(s) = csr.spec.expiration_seconds.filter(|s| *s < 600) {
        errs.push(FieldError::invalid(
            spec.child("expirationSeconds"),
            s,
            "may not specify a duration less than 600 seconds (10 minutes)",
        ));
    }
    errs.extend(validate_conditions(csr, opts));
    if !opts.arbitrary_certificate {
        if let Err(e) = validate_certificate(certificate_bytes(csr)) {
            errs.push(FieldError::invalid("status.certificate", "<certificate data>", e));
        }
    }
    errs
}

fn validate_conditions(csr: &CertificateSigningRequest, opts: &Options) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let path = Path::new("status").child("conditions");
    let mut seen = std::collections::HashSet::new();
    let (mut approved, mut denied) = (false, false);
    for (i, c) in conditions(csr).iter().enumerate() {
        let p = path.index(i);
        if !opts.empty_condition_type && c.type_.is_empty() {
            errs.push(FieldError::required(p.child("type"), ""));
        }
        let allowed: &[&str] =
            if TRUE_ONLY.contains(&c.type_.as_str()) { &["True"] } else { &["False", "True", "Unknown"] };
        if c.status.is_empty() {
            errs.push(FieldError::required(p.child("status"), ""));
        } else if !allowed.contains(&c.status.as_str()) {
            errs.push(FieldError::not_supported(p.child("status"), c.status.as_str(), allowed));
        }
        if !opts.both_approved_and_denied {
            let exclusive = match c.type_.as_str() {
                APPROVED => {
                    approved = true;
                    denied
                }
                DENIED => {
                    denied = true;
                    approved
                }
                _ => false,
            };
            if exclusive {
                errs.push(FieldError::invalid(
                    p.child("type"),
                    c.type_.as_str(),
                    "Approved and Denied conditions are mutually exclusive",
                ));
            }
        }
        if !opts.duplicate_condition_types && !seen.insert(c.type_.as_str()) {
            errs.push(FieldError::duplicate(p.child("type"), c.type_.as_str()));
        }
    }
    errs
}

fn validate_update(new: &CertificateSigningRequest, old: &CertificateSigningRequest, opts: Options) -> Vec<FieldError> {
    let mut errs = validate(new, &opts);
    let path = "status.conditions";
    for ty in [APPROVED, DENIED, FAILED] {
        if of_type(new, ty).len() < of_type(old, ty).len() {
            errs.push(FieldError::forbidden(path, format!("updates may not remove a condition of type {ty:?}")));
        }
    }
    if !opts.setting_approval {
        for ty in [APPROVED, DENIED] {
            let (o, n) = (of_type(old, ty), of_type(new, ty));
            if n.len() > o.len() {
                errs.push(FieldError::forbidden(path, format!("updates may not add a condition of type {ty:?}")));
            } else if n.len() == o.len() && n != o {
                errs.push(FieldError::forbidden(path, format!("updates may not modify a condition of type {ty:?}")));
            }
        }
    }
    if certificate_bytes(new) != certificate_bytes(old) {
        if !opts.setting_certificate {
            errs.push(FieldError::forbidden("status.certificate", "updates may not set certificate content"));
        } else if !certificate_bytes(old).is_empty() {
            errs.push(FieldError::forbidden(
                "status.certificate",
                "updates may not modify existing certificate content",
            ));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// A PEM CSR for `alice` in `dev`, signed by a new key.
    fn request() -> String {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::default();
        params.distinguished_name.push(rcgen::DnType::CommonName, "alice");
        params.distinguished_name.push(rcgen::DnType::OrganizationName, "dev");
        params.serialize_request(&key).expect("csr").pem().expect("pem")
    }

    fn csr(extra: Value) -> Value {
        let b64 = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, request());
        let mut v = json!({
            "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"name": "alice"},
            "spec": {"request": b64, "signerName": KUBE_APISERVER_CLIENT, "usages": ["client auth"],
                     "username": "mallory", "groups": ["system:masters"]},
            "status": {"conditions": [{"type": "Approved", "status": "True"}]},
        });
        if let (Some(m), Some(e)) = (v.as_object_mut(), extra.as_object()) {
            for (k, x) in e {
                m.insert(k.clone(), x.clone());
            }
        }
        v
    }

    #[test]
    fn the_requester_fields_are_the_requesters_and_the_status_starts_empty() {
        let s = Typed(CertificateSigningRequestStrategy);
        let mut obj = csr(json!({}));
        let groups = vec!["devs".to_string(), "system:authenticated".to_string()];
        let extra = std::collections::BTreeMap::from([("scopes".to_string(), vec!["a".to_string()])]);
        let who = Requester { name: "bob", uid: "u-1", groups: &groups, extra: &extra };
        s.prepare_for_create_by(&mut obj, &who).expect("prepare");
        assert_eq!(obj["spec"]["username"], "bob");
        assert_eq!(obj["spec"]["uid"], "u-1");
        assert_eq!(obj["spec"]["groups"], json!(["devs", "system:authenticated"]));
        assert_eq!(obj["spec"]["extra"], json!({"scopes": ["a"]}));
        assert_eq!(obj["status"], json!({}));
        let none = std::collections::BTreeMap::new();
        let anon = Requester { name: "x", uid: "", groups: &[], extra: &none };
        let mut obj = csr(json!({}));
        s.prepare_for_create_by(&mut obj, &anon).expect("prepare");
        assert_eq!(obj["spec"].get("groups"), None, "what the client sent is gone");
        assert_eq!(obj["spec"].get("uid"), None);
    }

    fn errors(v: Vec<FieldError>) -> Vec<String> {
        v.iter().map(|e| format!("{}: {}", e.field, e.body())).collect()
    }

    #[test]
    fn a_request_must_be_a_signed_pkcs10_with_known_usages_and_a_signer() {
        let s = CertificateSigningRequestStrategy;
        let ok: CertificateSigningRequest = serde_json::from_value(csr(json!({"status": {}}))).expect("csr");
        assert_eq!(errors(s.validate(&ok)), Vec::<String>::new());
        let mut bad = ok.clone();
        bad.spec.request.0 = b"not pem".to_vec();
        bad.spec.usages = Some(vec!["client auth".into(), "flying".into(), "client auth".into()]);
        bad.spec.signer_name = "nodomain".into();
        bad.spec.expiration_seconds = Some(60);
        let errs = errors(s.validate(&bad));
        assert!(
            errs[0].starts_with("spec.request: Invalid value")
                && errs[0].ends_with("PEM block type must be CERTIFICATE REQUEST"),
            "{errs:?}"
        );
        assert!(errs.iter().any(|e| e.starts_with("spec.usages[1]: Unsupported value: \"flying\"")), "{errs:?}");
        assert!(errs.iter().any(|e| e.starts_with("spec.usages[2]: Duplicate value")), "{errs:?}");
        assert!(
            errs.iter()
                .any(|e| e.contains("spec.signerName: Invalid value: \"nodomain\": must be a fully qualified domain")),
            "{errs:?}"
        );
        assert!(errs.iter().any(|e| e.contains("may not specify a duration less than 600 seconds")), "{errs:?}");
        // A request whose subject was changed after signing.
        let (_, block) = x509_parser::pem::parse_x509_pem(&ok.spec.request.0).expect("pem");
        let mut der = block.contents.clone();
        let at = der.windows(5).position(|w| w == b"alice").expect("the subject");
        der[at..at + 5].copy_from_slice(b"admin");
        let b64 = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &der);
        let mut tampered = ok.clone();
        tampered.spec.request.0 =
            format!("-----BEGIN CERTIFICATE REQUEST-----\n{b64}\n-----END CERTIFICATE REQUEST-----\n").into_bytes();
        let errs = errors(s.validate(&tampered));
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(errs[0].ends_with("x509: invalid signature on the certificate request"), "{errs:?}");
    }

    #[test]
    fn approval_writes_conditions_only_and_status_may_not_touch_the_decision() {
        let s = Typed(CertificateSigningRequestStrategy);
        let mut old = csr(json!({"status": {}}));
        old["metadata"]["resourceVersion"] = json!("1");
        // Approving through `approval`: allowed, stamped.
        let mut approved = old.clone();
        approved["status"] =
            json!({"conditions": [{"type": "Approved", "status": "True", "reason": "KubectlApprove"}]});
        s.prepare_for_subresource_update("approval", &mut approved, &old).expect("prepare");
        assert!(approved["status"]["conditions"][0]["lastUpdateTime"].is_string());
        assert!(approved["status"]["conditions"][0]["lastTransitionTime"].is_string());
        assert_eq!(s.validate_subresource("approval", &approved, &old).expect("validate"), vec![]);
        // The same through `status` is refused.
        let mut sneaky = old.clone();
        sneaky["status"] = approved["status"].clone();
        s.prepare_for_subresource_update("status", &mut sneaky, &old).expect("prepare");
        let errs = errors(s.validate_subresource("status", &sneaky, &old).expect("validate"));
        assert_eq!(errs, ["status.conditions: Forbidden: updates may not add a condition of type \"Approved\""]);
        // Both decisions at once are refused; so is removing one.
        let mut both = approved.clone();
        both["status"]["conditions"].as_array_mut().expect("list").push(json!({"type": "Denied", "status": "True"}));
        let errs = errors(s.validate_subresource("approval", &both, &approved).expect("validate"));
        assert!(errs.iter().any(|e| e.contains("Approved and Denied conditions are mutually exclusive")), "{errs:?}");
        let errs = errors(s.validate_subresource("approval", &old, &approved).expect("validate"));
        assert_eq!(errs, ["status.conditions: Forbidden: updates may not remove a condition of type \"Approved\""]);
        // The certificate only through status, once.
        let mut plain = approved.clone();
        plain["status"]["certificate"] = json!("bm90IGEgY2VydA==");
        let errs = errors(s.validate(&plain, Some(&approved)).expect("validate"));
        assert!(
            errs.iter().any(|e| e == "status.certificate: Forbidden: updates may not set certificate content"),
            "{errs:?}"
        );
        let errs = errors(s.validate_subresource("status", &plain, &approved).expect("validate"));
        assert!(errs.iter().any(|e| e.contains("must contain at least one CERTIFICATE PEM block")), "{errs:?}");
    }

    #[test]
    fn a_plain_update_keeps_spec_and_status() {
        let s = Typed(CertificateSigningRequestStrategy);
        let old = csr(json!({"status": {}}));
        let mut new = old.clone();
        new["spec"]["username"] = json!("root");
        new["status"] = json!({"conditions": [{"type": "Approved", "status": "True"}]});
        new["metadata"]["labels"] = json!({"a": "b"});
        s.prepare_for_update(&mut new, &old).expect("prepare");
        assert_eq!(new["spec"], old["spec"]);
        assert_eq!(new["status"], json!({}));
        assert_eq!(new["metadata"]["labels"], json!({"a": "b"}));
    }
}
