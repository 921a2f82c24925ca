//! Strategies for policy: PodDisruptionBudgets, whose spec changes bump the generation
//! (upstream's `pkg/registry/policy/poddisruptionbudget/strategy.go`).

use crate::strategy::{DynStrategy, ObjectHooks, Strategy, Typed};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

pub fn pod_disruption_budget() -> Box<dyn DynStrategy> {
    Box::new(Typed(PodDisruptionBudgetStrategy))
}

pub struct PodDisruptionBudgetStrategy;

impl Strategy for PodDisruptionBudgetStrategy {
    type Object = PodDisruptionBudget;
    const PREPARES: bool = false;
}

impl ObjectHooks for PodDisruptionBudgetStrategy {
    fn tracks_generation(&self) -> bool {
        true
    }
}
