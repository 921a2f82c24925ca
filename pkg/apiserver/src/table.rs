//! `meta.k8s.io/v1` Tables for `kubectl get` (server-side printing).

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

/// Whether an Accept header asks for a Table (`as=Table;g=meta.k8s.io;v=v1|v1beta1`).
/// Returns the Table's apiVersion to answer with.
pub fn wants_table(accept: &str) -> Option<&'static str> {
    for part in accept.split(',') {
        let params: Vec<&str> = part.split(';').map(str::trim).collect();
        let has = |p: &str| params.contains(&p);
        if has("as=Table") && has("g=meta.k8s.io") {
            if has("v=v1") {
                return Some("meta.k8s.io/v1");
            }
            if has("v=v1beta1") {
                return Some("meta.k8s.io/v1beta1");
            }
        }
    }
    None
}

fn row_object(obj: &Value, include: IncludeObject, api_version: &str) -> Value {
    match include {
        IncludeObject::None => Value::Null,
        IncludeObject::Object => obj.clone(),
        IncludeObject::Metadata => json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": api_version,
            "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
        }),
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
    let cols = printers::columns(info.group, info.kind);
    let column_definitions: Vec<Value> = if with_columns {
        cols.iter()
            .map(|c| {
                json!({"name": c.name, "type": c.type_, "format": c.format, "description": c.description, "priority": c.priority})
            })
            .collect()
    } else {
        Vec::new()
    };
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let mut r = json!({"cells": printers::row(info.group, info.kind, o, now)});
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
    fn accept_header_selects_table_version() {
        assert_eq!(
            wants_table("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"),
            Some("meta.k8s.io/v1")
        );
        assert_eq!(wants_table("application/json"), None);
    }
}
