//! Strategies for the discovery resources.

use crate::strategy::{DynStrategy, Generic, Typed};

pub fn endpoint_slice() -> Box<dyn DynStrategy> {
    Box::new(Typed(Generic::<k8s_openapi::api::discovery::v1::EndpointSlice>::default()))
}
