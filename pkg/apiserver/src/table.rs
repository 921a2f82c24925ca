//! `meta.k8s.io/v1` Tables for `kubectl get` (server-side printing).

use crate::error::ApiError;
use k1s_api::printers;
use k1s_api::ResourceInfo;
use serde_json::{json, Value};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncludeObject {
    None,
    Metadata,
    Object,
}

impl IncludeObject {
    pub fn parse(s: Option<&str>) -> IncludeObject {
        match s {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        }
    }
}

/// What an Accept header asks the reply to be turned into: upstream's `as=…;g=meta.k8s.io;v=…`
/// media type parameters. Each carries the apiVersion to answer with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conversion {
    /// `as=Table`: server-side printing.
    Table(&'static str),
    /// `as=PartialObjectMetadata`: an object's metadata only (also each object of a watch).
    Metadata(&'static str),
    /// `as=PartialObjectMetadataList`: a list of its items' metadata only.
    MetadataList(&'static str),
}

/// The conversion the first acceptable clause of an Accept header asks for; `None` is the object
/// as it is. Clauses asking for a conversion that does not exist are passed over, as upstream's
/// negotiation does, and an Accept header with nothing else is refused (406).
pub fn negotiate(accept: &str) -> Result<Option<Conversion>, ApiError> {
    let mut passed_over = false;
    for clause in accept.split(',') {
        let (mut as_, mut group, mut version) = (None, None, None);
        for param in clause.split(';').skip(1) {
            match param.trim().split_once('=') {
                Some(("as", v)) => as_ = Some(v),
                Some(("g", v)) => group = Some(v),
                Some(("v", v)) => version = Some(v),
                _ => {}
            }
        }
        let Some(as_) = as_ else { return Ok(None) };
        let api_version = match (group, version) {
            (Some("meta.k8s.io"), Some("v1")) => Some("meta.k8s.io/v1"),
            (Some("meta.k8s.io"), Some("v1beta1")) => Some("meta.k8s.io/v1beta1"),
            _ => None,
        };
        let conversion = api_version.and_then(|av| match as_ {
            "Table" => Some(Conversion::Table(av)),
            "PartialObjectMetadata" => Some(Conversion::Metadata(av)),
            "PartialObjectMetadataList" => Some(Conversion::MetadataList(av)),
            _ => None,
        });
        match conversion {
            Some(c) => return Ok(Some(c)),
            None => passed_over = true,
        }
    }
    if passed_over {
        return Err(ApiError::not_acceptable(
            "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf",
        ));
    }
    Ok(None)
}

fn row_object(obj: &Value, include: IncludeObject, api_version: &str) -> Value {
    match include {
        IncludeObject::None => Value::Null,
        IncludeObject::Object => obj.clone(),
        IncludeObject::Metadata => crate::object::partial_metadata(obj, api_version),
    }
}

/// Builds a Table over `objects`. `with_columns` is false for watch events after the first.
pub fn build(
    info: &ResourceInfo,
    objects: &[Value],
    include: IncludeObject,
    api_version: &str,
    with_columns: bool,
    list_meta: Value,
) -> Value {
    let now = jiff::Timestamp::now();
    let custom = info.custom.as_ref().map(|c| c.printer_columns.as_slice());
    let column_definitions: Vec<Value> = match (with_columns, custom) {
        (false, _) => Vec::new(),
        (true, Some(cols)) => k1s_api::custom::columns::definitions(cols),
        (true, None) => {
            printers::columns(info.group, info.kind).iter().map(printers::ColumnDefinition::to_json).collect()
        }
    };
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let cells = match custom {
                Some(cols) => k1s_api::custom::columns::cells(cols, o, now),
                None => printers::row(info.group, info.kind, o, now),
            };
            let mut r = json!({"cells": cells});
            let obj = row_object(o, include, api_version);
            if !obj.is_null() {
                r["object"] = obj;
            }
            r
        })
        .collect();
    let mut t = json!({
        "kind": "Table",
        "apiVersion": api_version,
        "metadata": list_meta,
        "columnDefinitions": column_definitions,
        "rows": rows,
    });
    if !with_columns {
        t["columnDefinitions"] = Value::Null;
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_header_selects_the_conversion_of_its_first_acceptable_clause() {
        use Conversion::*;
        let ok = |a: &str| negotiate(a).expect(a);
        assert_eq!(
            ok("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"),
            Some(Table("meta.k8s.io/v1"))
        );
        assert_eq!(ok("application/json; as=Table; g=meta.k8s.io; v=v1beta1"), Some(Table("meta.k8s.io/v1beta1")));
        assert_eq!(
            ok("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"),
            Some(Metadata("meta.k8s.io/v1"))
        );
        assert_eq!(
            ok("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1"),
            Some(MetadataList("meta.k8s.io/v1beta1"))
        );
        assert_eq!(ok("application/json"), None);
        assert_eq!(ok(""), None);
        assert_eq!(ok("*/*"), None);
        // The first clause wins; unknown conversions are passed over.
        assert_eq!(ok("application/json,application/json;as=Table;g=meta.k8s.io;v=v1"), None);
        assert_eq!(ok("application/json;as=Nope;g=meta.k8s.io;v=v1,application/json"), None);
        assert_eq!(
            ok("application/json;as=Table;g=apps;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"),
            Some(Metadata("meta.k8s.io/v1"))
        );
        let refused = negotiate("application/json;as=Nope;g=meta.k8s.io;v=v1").expect_err("nothing acceptable");
        assert_eq!((refused.code, refused.reason), (406, "NotAcceptable"));
    }
}
