//! Strategies for coordination.k8s.io: Leases, which an update may create (upstream's
//! `pkg/registry/coordination/lease/strategy.go`).

use crate::strategy::{DynStrategy, ObjectHooks, Strategy, Typed};
use k8s_openapi::api::coordination::v1::Lease;

pub fn lease() -> Box<dyn DynStrategy> {
    Box::new(Typed(LeaseStrategy))
}

pub struct LeaseStrategy;

impl Strategy for LeaseStrategy {
    type Object = Lease;
    const PREPARES: bool = false;
}

impl ObjectHooks for LeaseStrategy {
    fn allow_create_on_update(&self) -> bool {
        true
    }
}
