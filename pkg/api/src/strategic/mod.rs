//! Strategic merge patch (`application/strategic-merge-patch+json`), driven by the OpenAPI
//! schema's `x-kubernetes-patch-merge-key` / `x-kubernetes-patch-strategy` extensions.
//!
//! This is the server side of upstream's `strategicpatch.StrategicMergeMapPatch`: `null` deletes,
//! maps merge recursively, lists with the `merge` strategy merge by their merge key (or as sets
//! of primitives), other lists are replaced, and the directives kubectl sends are honoured:
//! `$patch` (`replace`/`delete` on maps and list items), `$retainKeys`,
//! `$deleteFromPrimitiveList/<field>` and `$setElementOrder/<field>`. Fields without schema
//! information merge like a JSON merge patch. Error messages are upstream's.

mod errors;
mod gofmt;
mod merge;
mod order;

#[cfg(test)]
mod tests;

use serde_json::{Map, Value};

/// Resolves `$ref` (and `allOf: [{$ref}]`) in OpenAPI schemas for the patch algorithms.
pub trait SchemaLookup {
    /// Follows references until a schema with content is reached; returns the input otherwise.
    fn resolve<'a>(&'a self, schema: &'a Value) -> &'a Value;
}

#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum PatchError {
    /// The patch is malformed or cannot apply; [`PatchError::status_code`] tells the HTTP status.
    #[error("{0}")]
    Invalid(String),
}

impl PatchError {
    /// The HTTP status upstream answers with (`interpretStrategicMergePatchError`): 400 for a
    /// malformed document or primitive-list / `$retainKeys` / `$setElementOrder` directive, 422 for
    /// lists of lists, and 500 for everything else, which upstream returns as a plain error (a
    /// `Status` with reason `""` and the message).
    pub fn status_code(&self) -> u16 {
        let PatchError::Invalid(message) = self;
        match message.as_str() {
            errors::BAD_JSON_DOC
            | errors::BAD_PRIMITIVE_LIST
            | errors::BAD_RETAIN_KEYS
            | errors::BAD_SET_ELEMENT_ORDER => 400,
            m if m.starts_with(errors::UNMARSHAL_PREFIX) => 400,
            errors::NO_LIST_OF_LISTS => 422,
            _ => 500,
        }
    }
}

/// Applies a strategic merge patch to `original`. `schema` is the kind's root schema, already
/// resolved; fields without schema information merge like a JSON merge patch.
///
/// A `null` patch changes nothing; a patch that is not an object is rejected like upstream's
/// decoding does.
pub fn apply(
    original: &Value,
    patch: &Value,
    schema: Option<&Value>,
    lookup: &dyn SchemaLookup,
) -> Result<Value, PatchError> {
    let empty = Map::new();
    let patch = match patch {
        Value::Object(map) => map,
        Value::Null => &empty,
        other => {
            let word = match other {
                Value::Array(_) => "array",
                Value::String(_) => "string",
                Value::Number(_) => "number",
                _ => "bool",
            };
            return Err(PatchError::Invalid(format!(
                "{}{word} into Go value of type {}",
                errors::UNMARSHAL_PREFIX,
                errors::MAP_TYPE
            )));
        }
    };
    let mut out = match original {
        Value::Object(map) => map.clone(),
        Value::Null => Map::new(),
        _ => return Err(PatchError::Invalid(errors::BAD_JSON_DOC.into())),
    };
    merge::Merger { lookup }.merge_map(&mut out, patch, schema)?;
    Ok(Value::Object(out))
}
