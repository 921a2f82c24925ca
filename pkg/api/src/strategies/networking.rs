//! Strategies for the networking resources.

use crate::strategy::{DynStrategy, Generic, Typed};

pub fn network_policy() -> Box<dyn DynStrategy> {
    Box::new(Typed(Generic::<k8s_openapi::api::networking::v1::NetworkPolicy>::default()))
}
