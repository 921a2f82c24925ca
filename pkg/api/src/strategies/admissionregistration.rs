//! Strategies for admissionregistration.k8s.io: ValidatingAdmissionPolicies and their
//! bindings, whose spec changes bump the generation (upstream's
//! `pkg/registry/admissionregistration/validatingadmissionpolicy{,binding}/strategy.go`).

use crate::strategy::{DynStrategy, Strategy, Typed};
use k8s_openapi::api::admissionregistration::v1::{ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding};

pub fn validating_admission_policy() -> Box<dyn DynStrategy> {
    Box::new(Typed(ValidatingAdmissionPolicyStrategy))
}

pub fn validating_admission_policy_binding() -> Box<dyn DynStrategy> {
    Box::new(Typed(ValidatingAdmissionPolicyBindingStrategy))
}

pub struct ValidatingAdmissionPolicyStrategy;

impl Strategy for ValidatingAdmissionPolicyStrategy {
    type Object = ValidatingAdmissionPolicy;
    const PREPARES: bool = false;

    fn tracks_generation(&self) -> bool {
        true
    }
}

pub struct ValidatingAdmissionPolicyBindingStrategy;

impl Strategy for ValidatingAdmissionPolicyBindingStrategy {
    type Object = ValidatingAdmissionPolicyBinding;
    const PREPARES: bool = false;

    fn tracks_generation(&self) -> bool {
        true
    }
}
