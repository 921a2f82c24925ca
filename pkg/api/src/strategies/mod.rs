//! One module per API group: each resource's defaulting and validation, as a [`crate::Strategy`].

pub mod apps;
pub mod batch;
pub mod core;
pub mod discovery;
pub mod networking;
pub mod rbac;
