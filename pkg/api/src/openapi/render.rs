//! Turns the operation model into OpenAPI v3 documents (one per group-version, like upstream's
//! `api/openapi-spec/v3/*.json`) and the swagger 2.0 document (`api/openapi-spec/swagger.json`).

use super::paths::{Body, Operation, Param, PathItem};
use super::registry::{Registry, V3_REF_PREFIX};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// The version the swagger 2.0 document reports.
pub(super) const V2_VERSION: &str = "v1.35.0";
const V2_REF_PREFIX: &str = "#/definitions/";

fn bearer_token() -> Value {
    json!({
        "BearerToken": {
            "description": "Bearer Token authentication",
            "in": "header",
            "name": "authorization",
            "type": "apiKey",
        }
    })
}

fn v3_param(p: &Param) -> Value {
    let mut out = json!({
        "description": p.description,
        "in": p.location.as_str(),
        "name": p.name,
        "schema": {"type": p.ty, "uniqueItems": true},
    });
    if p.required() {
        out["required"] = true.into();
    }
    out
}

fn v3_ref(name: &str) -> Value {
    json!({"$ref": format!("{V3_REF_PREFIX}{name}")})
}

fn v3_operation(op: &Operation) -> Value {
    let mut out = Map::new();
    out.insert("description".into(), op.description.clone().into());
    out.insert("operationId".into(), op.id.clone().into());
    if !op.params.is_empty() {
        out.insert("parameters".into(), op.params.iter().map(v3_param).collect());
    }
    if let Some(body) = &op.body {
        let types: &[&str] = body.patch.unwrap_or(&["*/*"]);
        let content: Map<String, Value> =
            types.iter().map(|t| (t.to_string(), json!({"schema": v3_ref(&body.schema)}))).collect();
        let mut request = json!({"content": content});
        if body.required {
            request["required"] = true.into();
        }
        out.insert("requestBody".into(), request);
    }
    let schema = match &op.response {
        Some(name) => v3_ref(name),
        None => json!({"type": "string"}),
    };
    let mut responses = Map::new();
    for (code, description) in &op.responses {
        let content: Map<String, Value> =
            op.media.produces().iter().map(|t| (t.to_string(), json!({"schema": schema.clone()}))).collect();
        responses.insert(code.to_string(), json!({"content": content, "description": description}));
    }
    responses.insert("401".into(), json!({"description": "Unauthorized"}));
    out.insert("responses".into(), responses.into());
    out.insert("tags".into(), json!([op.tag]));
    if !op.action.is_empty() {
        out.insert("x-kubernetes-action".into(), op.action.into());
    }
    if let Some(gvk) = &op.gvk {
        out.insert("x-kubernetes-group-version-kind".into(), gvk.to_value());
    }
    out.into()
}

fn v3_paths(items: &[PathItem]) -> Map<String, Value> {
    let mut out = Map::new();
    for item in items {
        let mut path = Map::new();
        for op in &item.ops {
            path.insert(op.method.into(), v3_operation(op));
        }
        if !item.params.is_empty() {
            path.insert("parameters".into(), item.params.iter().map(v3_param).collect());
        }
        out.insert(item.path.clone(), path.into());
    }
    out
}

/// Collects every definition name reachable from `value` through v3 `$ref`s, looking names up
/// in `extra` (a document's own schemas) before the registry.
fn closure(registry: &Registry, extra: &BTreeMap<String, Value>, value: &Value) -> BTreeSet<String> {
    fn refs<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
        match value {
            Value::Object(map) => {
                if let Some(Value::String(r)) = map.get("$ref") {
                    if let Some(name) = Registry::ref_name(r) {
                        out.push(name);
                    }
                }
                map.values().for_each(|v| refs(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }
    let mut seen = BTreeSet::new();
    let mut pending = Vec::new();
    refs(value, &mut pending);
    while let Some(name) = pending.pop() {
        if seen.insert(name.to_string()) {
            if let Some(schema) = extra.get(name).or_else(|| registry.schemas.get(name)) {
                refs(schema, &mut pending);
            }
        }
    }
    seen
}

/// A v3 document holding `items` and every schema they reference, as compact JSON with sorted
/// keys (the registry's schemas are sorted once, at build time; they are serialized by reference).
/// `extra` holds schemas of the document's own that the registry does not (custom resources'),
/// keys sorted.
pub(super) fn v3_document(registry: &Registry, extra: &BTreeMap<String, Value>, items: &[PathItem]) -> Vec<u8> {
    #[derive(serde::Serialize)]
    struct Components<'a> {
        schemas: BTreeMap<&'a str, &'a Value>,
        #[serde(rename = "securitySchemes")]
        security_schemes: Value,
    }
    #[derive(serde::Serialize)]
    struct Document<'a> {
        components: Components<'a>,
        info: Value,
        openapi: &'static str,
        paths: Value,
    }
    let mut paths = Value::Object(v3_paths(items));
    paths.sort_all_objects();
    let schemas = closure(registry, extra, &paths)
        .into_iter()
        .filter_map(|name| {
            extra.get_key_value(&name).or_else(|| registry.schemas.get_key_value(&name)).map(|(k, v)| (k.as_str(), v))
        })
        .collect();
    let doc = Document {
        components: Components { schemas, security_schemes: bearer_token() },
        info: json!({"title": "Kubernetes", "version": "unversioned"}),
        openapi: "3.0.0",
        paths,
    };
    serde_json::to_vec(&doc).unwrap_or_default()
}

/// Converts a v3 schema to swagger 2.0: `#/definitions/` references, a wrapped reference unwrapped
/// into `$ref` with siblings, and the scalar unions as upstream's v2 spells them.
pub(super) fn v2_schema(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let mut out = Map::new();
            let single_ref = match map.get("allOf") {
                Some(Value::Array(all)) if all.len() == 1 => all[0].get("$ref").and_then(Value::as_str),
                _ => None,
            };
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("allOf", _) if single_ref.is_some() => {}
                    ("$ref", Value::String(r)) => {
                        out.insert(k.clone(), v2_ref(r).into());
                    }
                    _ => {
                        out.insert(k.clone(), v2_schema(v));
                    }
                }
            }
            if let Some(r) = single_ref {
                out.insert("$ref".into(), v2_ref(r).into());
            }
            out.into()
        }
        Value::Array(items) => items.iter().map(v2_schema).collect(),
        other => other.clone(),
    }
}

fn v2_ref(reference: &str) -> String {
    match Registry::ref_name(reference) {
        Some(name) => format!("{V2_REF_PREFIX}{name}"),
        None => reference.to_string(),
    }
}

fn v2_definitions(registry: &Registry) -> Map<String, Value> {
    let mut out = Map::new();
    for (name, schema) in &registry.schemas {
        let mut converted = v2_schema(schema);
        if let Value::Object(def) = &mut converted {
            match name.as_str() {
                "io.k8s.apimachinery.pkg.util.intstr.IntOrString" => {
                    def.shift_remove("oneOf");
                    def.shift_remove("x-kubernetes-int-or-string");
                    def.insert("type".into(), "string".into());
                }
                "io.k8s.apimachinery.pkg.api.resource.Quantity" => {
                    def.shift_remove("oneOf");
                    def.insert("type".into(), "string".into());
                }
                _ => {}
            }
        }
        out.insert(name.clone(), converted);
    }
    out
}

fn v2_param(p: &Param) -> Value {
    let mut out = json!({
        "description": p.description,
        "in": p.location.as_str(),
        "name": p.name,
        "type": p.ty,
        "uniqueItems": true,
    });
    if p.required() {
        out["required"] = true.into();
    }
    out
}

fn v2_operation(op: &Operation) -> Value {
    let mut out = Map::new();
    let consumes: Vec<&str> = match &op.body {
        Some(Body { patch: Some(types), .. }) => types.to_vec(),
        _ => vec!["*/*"],
    };
    out.insert("consumes".into(), consumes.into());
    out.insert("description".into(), op.description.clone().into());
    out.insert("operationId".into(), op.id.clone().into());
    let mut params = Vec::new();
    if let Some(body) = &op.body {
        let mut p =
            json!({"in": "body", "name": "body", "schema": {"$ref": format!("{V2_REF_PREFIX}{}", body.schema)}});
        if body.required {
            p["required"] = true.into();
        }
        params.push(p);
    }
    params.extend(op.params.iter().map(v2_param));
    if !params.is_empty() {
        out.insert("parameters".into(), params.into());
    }
    out.insert("produces".into(), op.media.produces().to_vec().into());
    let schema = match &op.response {
        Some(name) => json!({"$ref": format!("{V2_REF_PREFIX}{name}")}),
        None => json!({"type": "string"}),
    };
    let mut responses = Map::new();
    for (code, description) in &op.responses {
        responses.insert(code.to_string(), json!({"description": description, "schema": schema.clone()}));
    }
    responses.insert("401".into(), json!({"description": "Unauthorized"}));
    out.insert("responses".into(), responses.into());
    out.insert("schemes".into(), json!(["https"]));
    out.insert("tags".into(), json!([op.tag]));
    if !op.action.is_empty() {
        out.insert("x-kubernetes-action".into(), op.action.into());
    }
    if let Some(gvk) = &op.gvk {
        out.insert("x-kubernetes-group-version-kind".into(), gvk.to_value());
    }
    out.into()
}

/// The swagger 2.0 document: every path of every group-version and every definition.
pub(super) fn v2_document(registry: &Registry, items: &[PathItem]) -> Value {
    let mut paths = Map::new();
    for item in items {
        let mut path = Map::new();
        for op in &item.ops {
            path.insert(op.method.into(), v2_operation(op));
        }
        if !item.params.is_empty() {
            path.insert("parameters".into(), item.params.iter().map(v2_param).collect());
        }
        paths.insert(item.path.clone(), path.into());
    }
    let mut doc = json!({
        "definitions": v2_definitions(registry),
        "info": {"title": "Kubernetes", "version": V2_VERSION},
        "paths": paths,
        "security": [{"BearerToken": []}],
        "securityDefinitions": bearer_token(),
        "swagger": "2.0",
    });
    doc.sort_all_objects();
    doc
}

#[cfg(test)]
mod tests {
    use super::super::paths;
    use super::*;

    #[test]
    fn v2_schema_unwraps_all_of_references_and_rewrites_prefixes() {
        let v3 = json!({
            "properties": {
                "metadata": {"allOf": [{"$ref": "#/components/schemas/io.k8s.X"}], "description": "d"},
                "items": {"type": "array", "items": {"$ref": "#/components/schemas/io.k8s.Y"}},
            }
        });
        let v2 = v2_schema(&v3);
        assert_eq!(v2["properties"]["metadata"], json!({"description": "d", "$ref": "#/definitions/io.k8s.X"}));
        assert_eq!(v2["properties"]["items"]["items"]["$ref"], "#/definitions/io.k8s.Y");
    }

    #[test]
    fn v3_document_holds_the_closure_of_referenced_schemas() {
        let registry = Registry::build();
        let json =
            v3_document(&registry, &BTreeMap::new(), &paths::group_version(&registry, "coordination.k8s.io", "v1"));
        let doc: Value = serde_json::from_slice(&json).expect("JSON");
        let schemas = doc["components"]["schemas"].as_object().expect("schemas");
        for name in [
            "io.k8s.api.coordination.v1.Lease",
            "io.k8s.api.coordination.v1.LeaseList",
            "io.k8s.api.coordination.v1.LeaseSpec",
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
            "io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry",
            "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent",
            "io.k8s.apimachinery.pkg.apis.meta.v1.Patch",
        ] {
            assert!(schemas.contains_key(name), "missing {name}");
        }
        assert!(!schemas.contains_key("io.k8s.api.core.v1.PodSpec"));
        let list = &doc["paths"]["/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"]["get"];
        assert_eq!(list["x-kubernetes-action"], "list");
        assert!(list["responses"]["200"]["content"]["application/json;stream=watch"].is_object());
        assert_eq!(doc["openapi"], "3.0.0");
    }
}
