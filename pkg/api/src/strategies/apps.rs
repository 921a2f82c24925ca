//! Strategies for the apps resources.

use crate::strategy::{DynStrategy, Generic, Typed};

pub fn daemon_set() -> Box<dyn DynStrategy> {
    Box::new(Typed(Generic::<k8s_openapi::api::apps::v1::DaemonSet>::default()))
}

pub fn deployment() -> Box<dyn DynStrategy> {
    Box::new(Typed(Generic::<k8s_openapi::api::apps::v1::Deployment>::default()))
}

pub fn replica_set() -> Box<dyn DynStrategy> {
    Box::new(Typed(Generic::<k8s_openapi::api::apps::v1::ReplicaSet>::default()))
}

pub fn stateful_set() -> Box<dyn DynStrategy> {
    Box::new(Typed(Generic::<k8s_openapi::api::apps::v1::StatefulSet>::default()))
}
