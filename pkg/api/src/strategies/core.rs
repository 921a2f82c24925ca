//! Strategies for the core resources.

use crate::strategy::{DynStrategy, Generic, Typed};

pub fn config_map() -> Box<dyn DynStrategy> {
    Box::new(Typed(Generic::<k8s_openapi::api::core::v1::ConfigMap>::default()))
}

pub fn endpoints() -> Box<dyn DynStrategy> {
    Box::new(Typed(Generic::<k8s_openapi::api::core::v1::Endpoints>::default()))
}

pub fn event() -> Box<dyn DynStrategy> {
    Box::new(Typed(Generic::<k8s_openapi::api::core::v1::Event>::default()))
}

pub fn namespace() -> Box<dyn DynStrategy> {
    Box::new(Typed(Generic::<k8s_openapi::api::core::v1::Namespace>::default()))
}

pub fn node() -> Box<dyn DynStrategy> {
    Box::new(Typed(Generic::<k8s_openapi::api::core::v1::Node>::default()))
}

pub fn persistent_volume_claim() -> Box<dyn DynStrategy> {
    Box::new(Typed(Generic::<k8s_openapi::api::core::v1::PersistentVolumeClaim>::default()))
}

pub fn persistent_volume() -> Box<dyn DynStrategy> {
    Box::new(Typed(Generic::<k8s_openapi::api::core::v1::PersistentVolume>::default()))
}

pub fn pod() -> Box<dyn DynStrategy> {
    Box::new(Typed(Generic::<k8s_openapi::api::core::v1::Pod>::default()))
}

pub fn pod_template() -> Box<dyn DynStrategy> {
    Box::new(Typed(Generic::<k8s_openapi::api::core::v1::PodTemplate>::default()))
}

pub fn replication_controller() -> Box<dyn DynStrategy> {
    Box::new(Typed(Generic::<k8s_openapi::api::core::v1::ReplicationController>::default()))
}

pub fn secret() -> Box<dyn DynStrategy> {
    Box::new(Typed(Generic::<k8s_openapi::api::core::v1::Secret>::default()))
}

pub fn service_account() -> Box<dyn DynStrategy> {
    Box::new(Typed(Generic::<k8s_openapi::api::core::v1::ServiceAccount>::default()))
}

pub fn service() -> Box<dyn DynStrategy> {
    Box::new(Typed(Generic::<k8s_openapi::api::core::v1::Service>::default()))
}
