//! k1s-api: the Kubernetes API as data and rules, with no I/O.
//!
//! Owns: the resource table (group/version/resource ▶ kind, scope, verbs, strategy), field errors,
//! label and field selectors, the patch algorithms (JSON merge, strategic merge, server-side apply),
//! OpenAPI documents, server-side printing (Tables) and per-resource strategies (defaulting,
//! validation). It must never depend on the store, the network or the filesystem.

pub mod apply;
pub mod byte_fields;
pub mod conversion;
pub mod custom;
pub mod deletion;
pub mod errors;
pub mod field;
pub mod go_decode;
pub mod meta;
pub mod metrics;
pub mod net;
pub mod node_affinity;
pub mod openapi;
pub mod printers;
pub mod protobuf;
pub mod quota;
pub mod resources;
pub mod selectors;
pub mod storage;
pub mod strategic;
pub mod strategies;
pub mod strategy;

pub use field::{FieldError, FieldErrorType};
pub use resources::{ResourceInfo, Scope};
pub use strategy::{DynStrategy, Strategy};
