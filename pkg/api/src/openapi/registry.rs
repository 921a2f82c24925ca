//! The component-schema registry: every definition k1s serves, keyed by its OpenAPI name
//! (`io.k8s.api.core.v1.PodSpec`), in OpenAPI v3 form (`#/components/schemas/` references, a
//! reference with siblings wrapped as `allOf: [{$ref}]`), enriched with the `x-kubernetes-*`
//! extensions the k8s-openapi schemas lack.

use super::{extensions, list_descriptions};
use crate::resources::{self, ResourceInfo};
use k8s_openapi::api::{authentication, autoscaling, policy};
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use schemars::generate::SchemaSettings;
use serde_json::{json, Map, Value};
use std::collections::HashMap;

/// The prefix of a v3 component-schema reference.
pub(super) const V3_REF_PREFIX: &str = "#/components/schemas/";

const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.";
const LIST_META_DESCRIPTION: &str =
    "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

/// A group, version and kind, as the `x-kubernetes-group-version-kind` extension spells it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Gvk {
    pub group: String,
    pub version: String,
    pub kind: String,
}

impl Gvk {
    pub fn new(group: &str, version: &str, kind: &str) -> Self {
        Gvk { group: group.to_string(), version: version.to_string(), kind: kind.to_string() }
    }
    pub fn to_value(&self) -> Value {
        json!({"group": self.group, "kind": self.kind, "version": self.version})
    }
}

/// All component schemas, with a GVK index.
pub(super) struct Registry {
    /// Definition name ▶ v3 schema, sorted by name.
    pub schemas: Map<String, Value>,
    /// Kind ▶ every GVK of that kind carried by a definition, with that definition's name (keyed
    /// by kind so a lookup borrows its strings instead of building a key).
    pub by_gvk: HashMap<String, Vec<(Gvk, String)>>,
}

impl Registry {
    pub fn build() -> Registry {
        let mut generator = SchemaSettings::draft2020_12()
            .with(|s| {
                s.definitions_path = "/components/schemas".into();
                s.meta_schema = None;
            })
            .into_generator();
        for r in resources::all() {
            let _ = (r.schema)(&mut generator);
        }
        // Kinds the paths reference besides the resources themselves.
        let _ = generator.subschema_for::<meta::Status>();
        let _ = generator.subschema_for::<meta::DeleteOptions>();
        let _ = generator.subschema_for::<meta::WatchEvent<RawExtension>>();
        let _ = generator.subschema_for::<meta::APIResourceList>();
        let _ = generator.subschema_for::<meta::APIGroup>();
        let _ = generator.subschema_for::<meta::APIGroupList>();
        let _ = generator.subschema_for::<meta::APIVersions>();
        let _ = generator.subschema_for::<meta::Patch>();
        let _ = generator.subschema_for::<k8s_openapi::apimachinery::pkg::version::Info>();
        let _ = generator.subschema_for::<autoscaling::v1::Scale>();
        let _ = generator.subschema_for::<policy::v1::Eviction>();
        let _ = generator.subschema_for::<authentication::v1::TokenRequest>();
        let mut schemas = generator.take_definitions(false);

        let mut by_gvk: HashMap<String, Vec<(Gvk, String)>> = HashMap::new();
        let mut tag = |schemas: &mut Map<String, Value>, name: &str, gvks: Vec<Gvk>| {
            if let Some(Value::Object(def)) = schemas.get_mut(name) {
                let list: Vec<Value> = gvks.iter().map(Gvk::to_value).collect();
                def.insert("x-kubernetes-group-version-kind".into(), Value::Array(list));
                for gvk in gvks {
                    let same_kind = by_gvk.entry(gvk.kind.clone()).or_default();
                    if !same_kind.iter().any(|(g, _)| *g == gvk) {
                        same_kind.push((gvk, name.to_string()));
                    }
                }
            }
        };

        for r in resources::all() {
            tag(&mut schemas, &r.schema_name, vec![Gvk::new(r.group, r.version, r.kind)]);
            if let Some(Value::Object(def)) = schemas.get_mut(&r.schema_name) {
                unrequire_metadata(def);
            }
            if r.verbs.contains(&"list") {
                let list_name = format!("{}List", r.schema_name);
                if !schemas.contains_key(&list_name) {
                    let list = list_schema(r, schemas.get(&r.schema_name));
                    schemas.insert(list_name.clone(), list);
                }
                tag(&mut schemas, &list_name, vec![Gvk::new(r.group, r.version, &r.list_kind)]);
            }
        }

        // Meta kinds registered in every group-version, as upstream lists them.
        let mut group_versions: Vec<(&str, &str)> = resources::group_versions();
        if !group_versions.contains(&("", "v1")) {
            group_versions.push(("", "v1"));
        }
        group_versions.sort();
        for kind in ["DeleteOptions", "WatchEvent"] {
            let gvks = group_versions.iter().map(|(g, v)| Gvk::new(g, v, kind)).collect();
            tag(&mut schemas, &format!("{META}{kind}"), gvks);
        }
        for kind in ["Status", "APIResourceList", "APIGroup", "APIGroupList", "APIVersions"] {
            tag(&mut schemas, &format!("{META}{kind}"), vec![Gvk::new("", "v1", kind)]);
        }
        tag(&mut schemas, "io.k8s.api.autoscaling.v1.Scale", vec![Gvk::new("autoscaling", "v1", "Scale")]);
        tag(&mut schemas, "io.k8s.api.policy.v1.Eviction", vec![Gvk::new("policy", "v1", "Eviction")]);
        tag(
            &mut schemas,
            "io.k8s.api.authentication.v1.TokenRequest",
            vec![Gvk::new("authentication.k8s.io", "v1", "TokenRequest")],
        );

        fix_special_types(&mut schemas);
        extensions::apply(&mut schemas);
        for schema in schemas.values_mut() {
            wrap_refs(schema);
        }
        for schema in schemas.values_mut() {
            schema.sort_all_objects();
        }
        schemas.sort_keys();
        Registry { schemas, by_gvk }
    }

    /// The definition name a `$ref` (v3 form) points at, if it is one of ours.
    pub fn ref_name(reference: &str) -> Option<&str> {
        reference.strip_prefix(V3_REF_PREFIX)
    }

    /// The definition name of a GVK.
    pub fn name_of(&self, group: &str, version: &str, kind: &str) -> Option<&str> {
        let same_kind = self.by_gvk.get(kind)?;
        same_kind.iter().find(|(g, _)| g.group == group && g.version == version).map(|(_, name)| name.as_str())
    }
}

/// k8s-openapi marks `metadata` required on top-level kinds (its Rust field is not optional);
/// upstream never does.
fn unrequire_metadata(def: &mut Map<String, Value>) {
    let empty = match def.get_mut("required") {
        Some(Value::Array(required)) => {
            required.retain(|v| v != "metadata");
            required.is_empty()
        }
        _ => false,
    };
    if empty {
        def.remove("required");
    }
}

/// The `<Kind>List` schema upstream generates for a listable kind. A built-in List carries
/// upstream's descriptions (from [`list_descriptions`]); any other (a custom resource's) carries
/// descriptions formed from its kind.
pub(super) fn list_schema(r: &ResourceInfo, item: Option<&Value>) -> Value {
    let type_meta = |field: &str| {
        item.and_then(|i| i.pointer(&format!("/properties/{field}")))
            .cloned()
            .unwrap_or_else(|| json!({"type": "string"}))
    };
    let (description, items_description, metadata_description) =
        match list_descriptions::get(&format!("{}List", r.schema_name)) {
            Some(d) => (d.description.clone(), d.items.clone(), d.metadata.clone()),
            // Custom resources: the words of upstream's CRD OpenAPI builder.
            None => (
                Some(format!("{} is a list of {}", r.list_kind, r.kind)),
                Some(format!(
                    "List of {}. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md",
                    r.resource
                )),
                Some(LIST_META_DESCRIPTION.to_string()),
            ),
        };
    let mut items = json!({
        "type": "array",
        "items": {"$ref": format!("{V3_REF_PREFIX}{}", r.schema_name)},
    });
    if let Some(d) = items_description {
        items["description"] = d.into();
    }
    let mut metadata = json!({"$ref": format!("{V3_REF_PREFIX}{META}ListMeta")});
    if let Some(d) = metadata_description {
        metadata["description"] = d.into();
    }
    let mut list = json!({
        "type": "object",
        "properties": {
            "apiVersion": type_meta("apiVersion"),
            "items": items,
            "kind": type_meta("kind"),
            "metadata": metadata,
        },
        "required": ["items"],
    });
    if let Some(d) = description {
        list["description"] = d.into();
    }
    list
}

/// Rewrites every `{$ref, siblings...}` into `{allOf: [{$ref}], siblings...}` as upstream's v3
/// documents do; a bare `{$ref}` stays as it is.
pub(super) fn wrap_refs(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            let wrap = map.len() > 1 && matches!(map.get("$ref"), Some(Value::String(_)));
            if wrap {
                if let Some(reference) = map.shift_remove("$ref") {
                    map.insert("allOf".into(), json!([{"$ref": reference}]));
                }
            }
            for v in map.values_mut() {
                wrap_refs(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(wrap_refs),
        _ => {}
    }
}

/// Shapes the scalar-union and free-form types as upstream's v3 documents do.
fn fix_special_types(schemas: &mut Map<String, Value>) {
    if let Some(Value::Object(def)) = schemas.get_mut("io.k8s.apimachinery.pkg.util.intstr.IntOrString") {
        def.insert("format".into(), "int-or-string".into());
        def.insert("oneOf".into(), json!([{"type": "integer"}, {"type": "string"}]));
        def.insert("x-kubernetes-int-or-string".into(), true.into());
    }
    if let Some(Value::Object(def)) = schemas.get_mut("io.k8s.apimachinery.pkg.api.resource.Quantity") {
        def.shift_remove("x-kubernetes-int-or-string");
        def.insert("oneOf".into(), json!([{"type": "string"}, {"type": "number"}]));
    }
    // Free-form values: any JSON is allowed, and server-side apply treats them as opaque.
    if let Some(Value::Object(def)) = schemas.get_mut("io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON") {
        def.shift_remove("type");
        def.insert("x-kubernetes-preserve-unknown-fields".into(), true.into());
    }
    if let Some(Value::Object(def)) = schemas.get_mut("io.k8s.apimachinery.pkg.runtime.RawExtension") {
        def.insert("x-kubernetes-preserve-unknown-fields".into(), true.into());
    }
}
