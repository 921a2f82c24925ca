//! Strategies for the rbac resources.

use crate::strategy::{DynStrategy, Generic, Typed};

pub fn cluster_role_binding() -> Box<dyn DynStrategy> {
    Box::new(Typed(Generic::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::default()))
}

pub fn cluster_role() -> Box<dyn DynStrategy> {
    Box::new(Typed(Generic::<k8s_openapi::api::rbac::v1::ClusterRole>::default()))
}

pub fn role_binding() -> Box<dyn DynStrategy> {
    Box::new(Typed(Generic::<k8s_openapi::api::rbac::v1::RoleBinding>::default()))
}

pub fn role() -> Box<dyn DynStrategy> {
    Box::new(Typed(Generic::<k8s_openapi::api::rbac::v1::Role>::default()))
}
