//! One module per API group (`core`, `apps`, `batch`, …) with each resource's defaulting and
//! validation as a [`crate::Strategy`], plus the shared pieces they are built from: pod specs,
//! containers, volumes, probes, quantities, ports, label selectors, value formats.

pub mod apps;
pub mod batch;
pub mod containers;
pub mod core;
pub mod discovery;
pub mod formats;
pub mod label_selector;
pub mod networking;
pub mod persistent_volumes;
pub mod pod;
pub mod pod_spec;
pub mod ports;
pub mod probes;
pub mod quantity;
pub mod rbac;
pub mod semantic;
pub mod volumes;
