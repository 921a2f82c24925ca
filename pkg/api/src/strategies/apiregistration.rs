//! APIServices (`apiregistration.k8s.io/v1`), as upstream's kube-aggregator defaults
//! (`SetDefaults_ServiceReference`: port 443), prepares (a new object's status cleared, a local
//! one marked available at once) and validates them
//! (`kube-aggregator/pkg/apis/apiregistration/validation`): the name must be
//! `<version>.<group>`, the group a DNS subdomain (empty only for `v1`), the version a DNS-1035
//! label, the priorities in range, a service named in full, and `caBundle` and
//! `insecureSkipTLSVerify` only for a service and never together.

use super::formats;
use crate::field::{FieldError, Path};
use crate::strategy::{DynStrategy, NameRule, ObjectHooks, Strategy, Typed};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::{APIService, APIServiceCondition};

/// The label the server's own (auto-registered) APIServices carry, with the value `onstart`.
pub const AUTOMANAGED_LABEL: &str = "kube-aggregator.kubernetes.io/automanaged";
/// The reason and message of a local APIService's `Available` condition.
pub const LOCAL_REASON: &str = "Local";
pub const LOCAL_MESSAGE: &str = "Local APIServices are always available";

pub fn api_service() -> Box<dyn DynStrategy> {
    Box::new(Typed(ApiServiceStrategy))
}

struct ApiServiceStrategy;

/// Upstream's `NewLocalAvailableAPIServiceCondition`.
pub fn local_available_condition(now: Time) -> APIServiceCondition {
    APIServiceCondition {
        type_: "Available".into(),
        status: "True".into(),
        reason: Some(LOCAL_REASON.into()),
        message: Some(LOCAL_MESSAGE.into()),
        last_transition_time: Some(now),
    }
}

impl Strategy for ApiServiceStrategy {
    type Object = APIService;

    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    fn set_defaults(&self, svc: &mut APIService) {
        if let Some(s) = svc.spec.as_mut().and_then(|s| s.service.as_mut()) {
            s.port.get_or_insert(443);
        }
    }

    fn prepare_for_create(&self, svc: &mut APIService) {
        svc.status = None;
        if svc.spec.as_ref().is_none_or(|s| s.service.is_none()) {
            let now = jiff::Timestamp::now();
            let now = Time(jiff::Timestamp::from_second(now.as_second()).unwrap_or(now));
            svc.status = Some(k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIServiceStatus {
                conditions: Some(vec![local_available_condition(now)]),
            });
        }
    }

    fn validate(&self, svc: &APIService) -> Vec<FieldError> {
        validate(svc)
    }
}

impl ObjectHooks for ApiServiceStrategy {}

fn validate(svc: &APIService) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let default_spec = Default::default();
    let spec = svc.spec.as_ref().unwrap_or(&default_spec);
    let group = spec.group.as_deref().unwrap_or("");
    let version = spec.version.as_deref().unwrap_or("");
    let required = format!("{version}.{group}");
    let name = svc.metadata.name.as_deref().unwrap_or("");
    // Path-segment problems are the registry's (the name rule); a valid segment must still be
    // `<version>.<group>`.
    if !name.is_empty() && crate::meta::path_segment_name(name).is_empty() && name != required {
        errs.push(FieldError::invalid(
            "metadata.name",
            name,
            format!("must be `spec.version+\".\"+spec.group`: {required:?}"),
        ));
    }
    let p = Path::new("spec");
    if group.is_empty() && version != "v1" {
        errs.push(FieldError::required(
            p.child("group").as_str(),
            "only v1 may have an empty group and it better be legacy kube",
        ));
    }
    if !group.is_empty() {
        errs.extend(formats::each_invalid(&p.child("group"), group, crate::meta::dns1123_subdomain(group)));
    }
    errs.extend(formats::each_invalid(&p.child("version"), version, formats::dns1035_label(version)));
    if spec.group_priority_minimum <= 0 || spec.group_priority_minimum > 20000 {
        errs.push(FieldError::invalid(
            p.child("groupPriorityMinimum").as_str(),
            spec.group_priority_minimum,
            "must be positive and less than 20000",
        ));
    }
    if spec.version_priority <= 0 || spec.version_priority > 1000 {
        errs.push(FieldError::invalid(
            p.child("versionPriority").as_str(),
            spec.version_priority,
            "must be positive and less than 1000",
        ));
    }
    let ca_len = spec.ca_bundle.as_ref().map_or(0, |b| b.0.len());
    let insecure = spec.insecure_skip_tls_verify.unwrap_or(false);
    let Some(service) = &spec.service else {
        if ca_len != 0 {
            errs.push(FieldError::invalid(
                p.child("caBundle").as_str(),
                format!("{ca_len} bytes"),
                "local APIServices may not have a caBundle",
            ));
        }
        if insecure {
            errs.push(FieldError::invalid(
                p.child("insecureSkipTLSVerify").as_str(),
                insecure,
                "local APIServices may not have insecureSkipTLSVerify",
            ));
        }
        return errs;
    };
    let sp = p.child("service");
    if service.namespace.as_deref().unwrap_or("").is_empty() {
        errs.push(FieldError::required(sp.child("namespace").as_str(), ""));
    }
    if service.name.as_deref().unwrap_or("").is_empty() {
        errs.push(FieldError::required(sp.child("name").as_str(), ""));
    }
    if insecure && ca_len > 0 {
        errs.push(FieldError::invalid(
            p.child("insecureSkipTLSVerify").as_str(),
            insecure,
            "may not be true if caBundle is present",
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources;
    use serde_json::{json, Value};

    fn create(body: Value) -> (Value, Vec<String>) {
        let info = resources::find("apiregistration.k8s.io", "v1", "apiservices").expect("apiservices");
        let s = &info.strategy;
        let mut obj = s.normalize(body).expect("decodes").object;
        s.prepare_for_create(&mut obj).expect("prepares");
        let errs = s.validate(&obj, None).expect("validates");
        (obj, errs.iter().map(|e| e.to_string()).collect())
    }

    fn api_service(name: &str, spec: Value) -> Value {
        json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": name}, "spec": spec})
    }

    #[test]
    fn a_service_apiservice_gets_port_443_and_no_status() {
        let (obj, errs) = create(api_service(
            "v1beta1.metrics.k8s.io",
            json!({"group": "metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100, "versionPriority": 100,
                   "insecureSkipTLSVerify": true, "service": {"namespace": "kube-system", "name": "metrics-server"}}),
        ));
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(obj["spec"]["service"]["port"], 443);
        assert!(obj.get("status").is_none(), "{obj}");
    }

    #[test]
    fn a_local_apiservice_is_available_at_once() {
        let (obj, errs) = create(api_service(
            "v1.apps",
            json!({"group": "apps", "version": "v1", "groupPriorityMinimum": 17800, "versionPriority": 15}),
        ));
        assert!(errs.is_empty(), "{errs:?}");
        let c = &obj["status"]["conditions"][0];
        assert_eq!((c["type"].as_str(), c["status"].as_str()), (Some("Available"), Some("True")));
        assert_eq!((c["reason"].as_str(), c["message"].as_str()), (Some(LOCAL_REASON), Some(LOCAL_MESSAGE)));
        assert!(c["lastTransitionTime"].is_string());
    }

    #[test]
    fn validation_reports_upstreams_messages() {
        let (_, errs) = create(api_service(
            "v1.wrong",
            json!({"group": "Bad_Group", "version": "1x", "groupPriorityMinimum": 0, "versionPriority": 1001,
                   "caBundle": "YWJj", "insecureSkipTLSVerify": true, "service": {"port": 443}}),
        ));
        let want = [
            "metadata.name: Invalid value: \"v1.wrong\": must be `spec.version+\".\"+spec.group`: \"1x.Bad_Group\"",
            "spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000",
            "spec.versionPriority: Invalid value: 1001: must be positive and less than 1000",
            "spec.service.namespace: Required value",
            "spec.service.name: Required value",
            "spec.insecureSkipTLSVerify: Invalid value: true: may not be true if caBundle is present",
        ];
        for w in want {
            assert!(errs.iter().any(|e| e == w), "{w:?} in {errs:#?}");
        }
        assert!(errs.iter().any(|e| e.starts_with("spec.group: Invalid value: \"Bad_Group\"")), "{errs:#?}");
        assert!(errs.iter().any(|e| e.starts_with("spec.version: Invalid value: \"1x\"")), "{errs:#?}");
        let (_, errs) = create(api_service(
            "v2.",
            json!({"version": "v2", "groupPriorityMinimum": 1, "versionPriority": 1, "caBundle": "YWJj",
                   "insecureSkipTLSVerify": true}),
        ));
        assert_eq!(
            errs,
            vec![
                "spec.group: Required value: only v1 may have an empty group and it better be legacy kube".to_string(),
                "spec.caBundle: Invalid value: \"3 bytes\": local APIServices may not have a caBundle".to_string(),
                "spec.insecureSkipTLSVerify: Invalid value: true: local APIServices may not have insecureSkipTLSVerify"
                    .to_string(),
            ]
        );
        let (_, errs) =
            create(api_service("v1.", json!({"version": "v1", "groupPriorityMinimum": 18000, "versionPriority": 1})));
        assert!(errs.is_empty(), "the legacy core API: {errs:?}");
    }
}
