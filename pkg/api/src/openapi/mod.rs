//! OpenAPI v2 and v3 documents generated from the k8s-openapi schemas, with the `x-kubernetes-*`
//! extensions kubectl reads, and the schema registry the patch algorithms use.
//!
//! - The registry ([`OpenApi::schema`], [`OpenApi::kind_schema`], [`SchemaLookup`]) holds every
//!   component schema in v3 form and is built on first use of [`get`].
//! - `/openapi/v3` ([`OpenApi::v3_index`], [`OpenApi::v3_document`]): one document per
//!   group-version (plus `api`, `apis`, `apis/<group>` and `version`), built together on first use
//!   because the index carries each document's hash.
//! - `/openapi/v2` ([`OpenApi::v2_json`], [`OpenApi::v2_protobuf`]): the whole swagger 2.0
//!   document, as JSON and in gnostic's protobuf form, built on first use.

mod extensions;
pub mod gnostic;
mod list_descriptions;
mod paths;
mod registry;
mod render;

use crate::byte_fields::BytePath;
use crate::resources::{self, ResourceInfo};
use crate::strategic::SchemaLookup;
use registry::Registry;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha512};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{LazyLock, OnceLock};

/// One `/openapi/v3/<path>` document.
#[derive(Debug)]
pub struct V3Document {
    /// The document, compact JSON.
    pub json: Vec<u8>,
    /// Upper-case hex SHA-512 of `json`: the `hash` query parameter and the ETag.
    pub hash: String,
}

struct V3Set {
    index: Vec<u8>,
    documents: BTreeMap<String, V3Document>,
}

struct V2Set {
    json: Vec<u8>,
    protobuf: Vec<u8>,
}

/// The OpenAPI documents and the schema registry.
pub struct OpenApi {
    registry: Registry,
    v3: OnceLock<V3Set>,
    v2: OnceLock<V2Set>,
    /// The `[]byte` field paths of each kind, by definition name, found on first use.
    byte_fields: std::sync::Mutex<std::collections::HashMap<String, std::sync::Arc<[BytePath]>>>,
}

impl std::fmt::Debug for OpenApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OpenApi({} schemas)", self.registry.schemas.len())
    }
}

static OPENAPI: LazyLock<OpenApi> = LazyLock::new(OpenApi::new);

/// The process-wide OpenAPI registry and documents.
pub fn get() -> &'static OpenApi {
    &OPENAPI
}

fn sha512_hex(bytes: &[u8]) -> String {
    let digest = Sha512::digest(bytes);
    let mut out = String::with_capacity(digest.len() * 2);
    for b in digest {
        let _ = write!(out, "{b:02X}");
    }
    out
}

impl OpenApi {
    fn new() -> OpenApi {
        OpenApi {
            registry: Registry::build(),
            v3: OnceLock::new(),
            v2: OnceLock::new(),
            byte_fields: Default::default(),
        }
    }

    /// The paths of a kind's `[]byte` fields (`format: byte`: Secret `data`, ConfigMap
    /// `binaryData`, `caBundle`s, a CSR's `request`…); empty for most kinds and unknown ones.
    pub fn byte_fields(&self, group: &str, version: &str, kind: &str) -> std::sync::Arc<[BytePath]> {
        let Some(name) = self.kind_schema_name(group, version, kind) else { return std::sync::Arc::new([]) };
        let mut cache = self.byte_fields.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(paths) = cache.get(name) {
            return paths.clone();
        }
        let paths: std::sync::Arc<[BytePath]> =
            self.schema(name).map(|s| crate::byte_fields::paths(s, self)).unwrap_or_default().into();
        cache.insert(name.to_string(), paths.clone());
        paths
    }

    /// A component schema (v3 form, with extensions) by definition name, e.g.
    /// `io.k8s.api.core.v1.PodSpec`.
    pub fn schema(&self, name: &str) -> Option<&Value> {
        self.registry.schemas.get(name)
    }

    /// The root schema of a kind (including `<Kind>List` kinds and `autoscaling/v1 Scale`).
    pub fn kind_schema(&self, group: &str, version: &str, kind: &str) -> Option<&Value> {
        self.registry.name_of(group, version, kind).and_then(|name| self.schema(name))
    }

    /// The definition name of a kind, e.g. `io.k8s.api.apps.v1.Deployment`.
    pub fn kind_schema_name(&self, group: &str, version: &str, kind: &str) -> Option<&str> {
        self.registry.name_of(group, version, kind)
    }

    /// The `/openapi/v3` index: `{"paths":{"apis/apps/v1":{"serverRelativeURL":"/openapi/v3/apis/apps/v1?hash=…"}}}`.
    pub fn v3_index(&self) -> &[u8] {
        &self.v3().index
    }

    /// The document at `/openapi/v3/<path>`, `path` like `api/v1` or `apis/apps/v1`.
    pub fn v3_document(&self, path: &str) -> Option<&V3Document> {
        self.v3().documents.get(path.trim_matches('/'))
    }

    /// The `/openapi/v3/apis/<group>/<version>` document of a custom group-version: `resources`
    /// are its served custom resources, whose kinds are described by their
    /// [`object_schema`](crate::custom::CustomInfo::object_schema)s as upstream's CRD OpenAPI
    /// builder describes them (`apiVersion`, `kind` and `metadata` with their descriptions, the
    /// `x-kubernetes-group-version-kind` of the kind and of its list).
    pub fn custom_v3_document(&self, group: &str, version: &str, resources: &[&ResourceInfo]) -> V3Document {
        let mut extra = BTreeMap::new();
        for r in resources {
            let Some(custom) = &r.custom else { continue };
            let mut kind = self.custom_kind_schema(&custom.object_schema);
            if let Value::Object(def) = &mut kind {
                def.insert(
                    "x-kubernetes-group-version-kind".into(),
                    json!([registry::Gvk::new(group, version, r.kind).to_value()]),
                );
            }
            registry::wrap_refs(&mut kind);
            kind.sort_all_objects();
            if r.verbs.contains(&"list") {
                let mut list = registry::list_schema(r, Some(&kind));
                if let Value::Object(def) = &mut list {
                    def.insert(
                        "x-kubernetes-group-version-kind".into(),
                        json!([registry::Gvk::new(group, version, &r.list_kind).to_value()]),
                    );
                }
                list.sort_all_objects();
                extra.insert(format!("{}List", r.schema_name), list);
            }
            extra.insert(r.schema_name.clone(), kind);
        }
        let items = paths::custom_group_version(&self.registry, group, version, resources);
        let json = render::v3_document(&self.registry, &extra, &items);
        let hash = sha512_hex(&json);
        V3Document { json, hash }
    }

    /// A custom kind's schema with `apiVersion`, `kind` and `metadata` described as every
    /// built-in kind describes them.
    fn custom_kind_schema(&self, object_schema: &Value) -> Value {
        let mut kind = object_schema.clone();
        let described = self.schema("io.k8s.api.core.v1.ConfigMap").and_then(|s| s.get("properties"));
        if let (Some(props), Some(described)) = (kind.get_mut("properties").and_then(Value::as_object_mut), described) {
            for field in ["apiVersion", "kind", "metadata"] {
                if let Some(d) = described.get(field) {
                    props.insert(field.into(), d.clone());
                }
            }
        }
        kind
    }

    /// The swagger 2.0 document, JSON.
    pub fn v2_json(&self) -> &[u8] {
        &self.v2().json
    }

    /// The swagger 2.0 document as gnostic `openapi.v2.Document` protobuf.
    pub fn v2_protobuf(&self) -> &[u8] {
        &self.v2().protobuf
    }

    fn v3(&self) -> &V3Set {
        self.v3.get_or_init(|| self.build_v3())
    }

    fn v2(&self) -> &V2Set {
        self.v2.get_or_init(|| self.build_v2())
    }

    /// Every v3 document path with the path items it holds.
    fn v3_path_items(&self) -> Vec<(String, Vec<paths::PathItem>)> {
        let registry = &self.registry;
        let mut out =
            vec![("api".to_string(), vec![paths::core_versions()]), ("apis".to_string(), vec![paths::groups()])];
        let mut groups: Vec<&str> = Vec::new();
        for (group, version) in resources::group_versions() {
            out.push((paths::v3_path(group, version), paths::group_version(registry, group, version)));
            if !group.is_empty() && !groups.contains(&group) {
                groups.push(group);
            }
        }
        for group in groups {
            out.push((format!("apis/{group}"), vec![paths::group(group)]));
        }
        out.push(("version".to_string(), vec![paths::version()]));
        out
    }

    fn build_v3(&self) -> V3Set {
        let mut documents = BTreeMap::new();
        let mut index = Map::new();
        for (path, items) in self.v3_path_items() {
            let json = render::v3_document(&self.registry, &BTreeMap::new(), &items);
            let hash = sha512_hex(&json);
            index.insert(path.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={hash}")}));
            documents.insert(path, V3Document { json, hash });
        }
        index.sort_keys();
        let index = serde_json::to_vec(&json!({ "paths": index })).unwrap_or_default();
        V3Set { index, documents }
    }

    fn build_v2(&self) -> V2Set {
        let items: Vec<paths::PathItem> = self.v3_path_items().into_iter().flat_map(|(_, items)| items).collect();
        let doc = render::v2_document(&self.registry, &items);
        let json = serde_json::to_vec(&doc).unwrap_or_default();
        let protobuf = prost::Message::encode_to_vec(&gnostic::document(&doc));
        V2Set { json, protobuf }
    }
}

impl SchemaLookup for OpenApi {
    fn resolve<'a>(&'a self, schema: &'a Value) -> &'a Value {
        let mut current = schema;
        // Bounded: a reference chain longer than this would be a cycle of bare references.
        for _ in 0..16 {
            let reference = match current.get("$ref") {
                Some(Value::String(r)) => Some(r.as_str()),
                _ => match current.get("allOf") {
                    Some(Value::Array(all)) if all.len() == 1 => all[0].get("$ref").and_then(Value::as_str),
                    _ => None,
                },
            };
            let next = reference
                .and_then(|r| Registry::ref_name(r).or_else(|| r.strip_prefix("#/definitions/")))
                .and_then(|name| self.registry.schemas.get(name));
            match next {
                Some(next) => current = next,
                None => return current,
            }
        }
        current
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    fn v3(path: &str) -> Value {
        let doc = get().v3_document(path).unwrap_or_else(|| panic!("no document {path}"));
        serde_json::from_slice(&doc.json).expect("document is JSON")
    }

    #[test]
    fn apps_v1_document_has_deployment_schema_with_gvk_and_patch_with_field_validation() {
        let doc = v3("apis/apps/v1");
        let deployment = &doc["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"];
        assert_eq!(
            deployment["x-kubernetes-group-version-kind"],
            json!([{"group": "apps", "kind": "Deployment", "version": "v1"}])
        );
        // kubectl's fieldValidation probe: a PATCH operation with the kind's GVK listing the
        // `fieldValidation` query parameter.
        let gvk = json!({"group": "apps", "kind": "Deployment", "version": "v1"});
        let patches: Vec<&Value> = doc["paths"]
            .as_object()
            .expect("paths")
            .values()
            .filter_map(|p| p.get("patch"))
            .filter(|op| op["x-kubernetes-group-version-kind"] == gvk)
            .collect();
        assert_eq!(patches.len(), 2, "deployment and deployment/status");
        for op in patches {
            let params = op["parameters"].as_array().expect("parameters");
            assert!(params.iter().any(|p| p["name"] == "fieldValidation" && p["in"] == "query"));
            let content = op["requestBody"]["content"].as_object().expect("content");
            for t in paths::PATCH_TYPES {
                assert!(content.contains_key(*t), "missing {t}");
            }
        }
        assert!(doc["components"]["schemas"]["io.k8s.api.apps.v1.DeploymentList"].is_object());
        assert!(doc["components"]["schemas"]["io.k8s.api.autoscaling.v1.Scale"].is_object());
        assert_eq!(doc["info"]["title"], "Kubernetes");
    }

    #[test]
    fn pod_spec_containers_merge_by_name() {
        let spec = get().schema("io.k8s.api.core.v1.PodSpec").expect("PodSpec");
        let containers = &spec["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(containers["x-kubernetes-list-type"], "map");
        assert_eq!(containers["x-kubernetes-list-map-keys"], json!(["name"]));
        assert_eq!(spec["properties"]["volumes"]["x-kubernetes-patch-strategy"], "merge,retainKeys");
    }

    #[test]
    fn container_ports_merge_by_container_port_and_map_by_port_and_protocol() {
        let ports = &get().schema("io.k8s.api.core.v1.Container").expect("Container")["properties"]["ports"];
        assert_eq!(ports["x-kubernetes-patch-merge-key"], "containerPort");
        assert_eq!(ports["x-kubernetes-list-map-keys"], json!(["containerPort", "protocol"]));
    }

    #[test]
    fn struct_fields_with_extensions_wrap_their_reference_in_all_of() {
        let strategy = &get().schema("io.k8s.api.apps.v1.DeploymentSpec").expect("spec")["properties"]["strategy"];
        assert_eq!(strategy["x-kubernetes-patch-strategy"], "retainKeys");
        assert_eq!(strategy["allOf"], json!([{"$ref": "#/components/schemas/io.k8s.api.apps.v1.DeploymentStrategy"}]));
        assert!(strategy.get("$ref").is_none());
        let meta = get().schema("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta").expect("meta");
        assert_eq!(meta["properties"]["finalizers"]["x-kubernetes-list-type"], "set");
        assert_eq!(meta["properties"]["ownerReferences"]["x-kubernetes-patch-merge-key"], "uid");
        let reference = get().schema("io.k8s.api.core.v1.ObjectReference").expect("ObjectReference");
        assert_eq!(reference["x-kubernetes-map-type"], "atomic");
    }

    #[test]
    fn special_types_are_shaped_like_upstream() {
        let ios = get().schema("io.k8s.apimachinery.pkg.util.intstr.IntOrString").expect("IntOrString");
        assert_eq!(ios["x-kubernetes-int-or-string"], true);
        assert_eq!(ios["format"], "int-or-string");
        let q = get().schema("io.k8s.apimachinery.pkg.api.resource.Quantity").expect("Quantity");
        assert_eq!(q["oneOf"], json!([{"type": "string"}, {"type": "number"}]));
        let cm = get().schema("io.k8s.api.core.v1.ConfigMap").expect("ConfigMap");
        assert!(cm.get("required").is_none(), "metadata is not required upstream");
        let delete_options = get().schema("io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions").expect("DeleteOptions");
        let gvks = delete_options["x-kubernetes-group-version-kind"].as_array().expect("gvks");
        assert!(gvks.contains(&json!({"group": "", "kind": "DeleteOptions", "version": "v1"})));
        assert!(gvks.contains(&json!({"group": "apps", "kind": "DeleteOptions", "version": "v1"})));
    }

    #[test]
    fn kind_schema_finds_kinds_lists_and_subresource_kinds() {
        let api = get();
        let pod = api.kind_schema("", "v1", "Pod").expect("Pod");
        assert_eq!(pod["x-kubernetes-group-version-kind"][0]["kind"], "Pod");
        let list = api.kind_schema("apps", "v1", "DeploymentList").expect("DeploymentList");
        assert_eq!(list["properties"]["items"]["items"]["$ref"], "#/components/schemas/io.k8s.api.apps.v1.Deployment");
        assert!(api.kind_schema("autoscaling", "v1", "Scale").is_some());
        assert!(api.kind_schema("apps", "v1", "Nope").is_none());
        assert_eq!(api.kind_schema_name("batch", "v1", "Job"), Some("io.k8s.api.batch.v1.Job"));
    }

    #[test]
    fn resolve_follows_refs_and_all_of_refs() {
        let api = get();
        let spec = api.schema("io.k8s.api.apps.v1.DeploymentSpec").expect("spec");
        let template = api.resolve(&spec["properties"]["template"]);
        assert!(template["properties"]["spec"].is_object(), "PodTemplateSpec resolved");
        let containers_item =
            &api.schema("io.k8s.api.core.v1.PodSpec").expect("PodSpec")["properties"]["containers"]["items"];
        assert!(api.resolve(containers_item)["properties"]["image"].is_object());
        let plain = json!({"type": "string"});
        assert_eq!(api.resolve(&plain), &plain);
    }

    fn check(value: &Value, schemas: &Map<String, Value>, doc: &str) {
        match value {
            Value::Object(map) => {
                if let Some(Value::String(r)) = map.get("$ref") {
                    let name = r.strip_prefix("#/components/schemas/").expect("v3 ref");
                    assert!(schemas.contains_key(name), "{doc}: dangling {r}");
                }
                map.values().for_each(|v| check(v, schemas, doc));
            }
            Value::Array(items) => items.iter().for_each(|v| check(v, schemas, doc)),
            _ => {}
        }
    }

    #[test]
    fn a_custom_group_version_document_describes_its_kinds_with_every_reference_resolved() {
        let crd = json!({"metadata": {"name": "widgets.example.com"}, "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer", "description": "How big."}}}}}}}]}});
        let infos = crate::custom::resource_infos(&crd).expect("served");
        let refs: Vec<&ResourceInfo> = infos.iter().collect();
        let doc = get().custom_v3_document("example.com", "v1", &refs);
        let v: Value = serde_json::from_slice(&doc.json).expect("JSON");
        let schemas = v["components"]["schemas"].as_object().expect("schemas");
        check(&v, schemas, "apis/example.com/v1");
        let widget = &schemas["com.example.v1.Widget"];
        assert_eq!(
            widget["x-kubernetes-group-version-kind"],
            json!([{"group": "example.com", "kind": "Widget", "version": "v1"}])
        );
        assert_eq!(widget["properties"]["spec"]["properties"]["size"]["description"], "How big.");
        assert!(widget["properties"]["metadata"]["description"]
            .as_str()
            .is_some_and(|d| d.starts_with("Standard object's metadata")));
        let list = &schemas["com.example.v1.WidgetList"];
        assert_eq!(list["x-kubernetes-group-version-kind"][0]["kind"], "WidgetList");
        // The words of upstream's CRD OpenAPI builder.
        assert_eq!(list["description"], "WidgetList is a list of Widget");
        assert_eq!(
            list["properties"]["items"]["description"],
            "List of widgets. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md"
        );
        assert_eq!(
            list["properties"]["metadata"]["description"],
            "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"
        );
        let status = &v["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}/status"];
        assert_eq!(
            status["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/com.example.v1.Widget"
        );
        assert_eq!(doc.hash, sha512_hex(&doc.json));
    }

    #[test]
    fn every_reference_in_every_document_resolves() {
        let index: Value = serde_json::from_slice(get().v3_index()).expect("index");
        for path in index["paths"].as_object().expect("paths").keys() {
            let doc = v3(path);
            let empty = Map::new();
            let schemas = doc["components"]["schemas"].as_object().unwrap_or(&empty);
            check(&doc, schemas, path);
        }
    }

    #[test]
    fn index_lists_every_group_version_with_the_document_hash() {
        let index: Value = serde_json::from_slice(get().v3_index()).expect("index");
        let paths = index["paths"].as_object().expect("paths");
        for key in
            ["api/v1", "apis/apps/v1", "apis/rbac.authorization.k8s.io/v1", "api", "apis", "apis/apps", "version"]
        {
            assert!(paths.contains_key(key), "index lacks {key}");
        }
        for (path, entry) in paths {
            let doc = get().v3_document(path).expect("document");
            assert_eq!(doc.hash, sha512_hex(&doc.json));
            assert_eq!(doc.hash.len(), 128);
            assert!(doc.hash.chars().all(|c| c.is_ascii_digit() || c.is_ascii_uppercase()));
            assert_eq!(entry["serverRelativeURL"], format!("/openapi/v3/{path}?hash={}", doc.hash));
        }
        assert!(get().v3_document("/apis/apps/v1").is_some(), "leading slash tolerated");
        assert!(get().v3_document("apis/nope/v1").is_none());
    }

    #[test]
    fn v2_json_uses_definitions_refs_and_covers_all_groups() {
        let doc: Value = serde_json::from_slice(get().v2_json()).expect("v2 JSON");
        assert_eq!(doc["swagger"], "2.0");
        let spec = &doc["definitions"]["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["strategy"];
        assert_eq!(spec["$ref"], "#/definitions/io.k8s.api.apps.v1.DeploymentStrategy");
        assert_eq!(spec["x-kubernetes-patch-strategy"], "retainKeys");
        assert_eq!(doc["definitions"]["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["type"], "string");
        let patch = &doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"];
        assert_eq!(patch["operationId"], "patchCoreV1NamespacedPod");
        assert!(patch["consumes"]
            .as_array()
            .expect("consumes")
            .contains(&json!("application/strategic-merge-patch+json")));
        assert!(doc["paths"]["/apis/batch/v1/namespaces/{namespace}/jobs"]["post"].is_object());
        assert!(!get().v2_json().windows(22).any(|w| w == b"#/components/schemas/".as_slice()));
    }

    /// Upstream v1.35's descriptions of three List kinds: (document, definition, type, `items`,
    /// `metadata`).
    const UPSTREAM_LISTS: [(&str, &str, &str, &str, &str); 3] = [
        (
            "api/v1",
            "io.k8s.api.core.v1.ServiceList",
            "ServiceList holds a list of services.",
            "List of services",
            "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
        ),
        (
            "api/v1",
            "io.k8s.api.core.v1.ConfigMapList",
            "ConfigMapList is a resource containing a list of ConfigMap objects.",
            "Items is the list of ConfigMaps.",
            "More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
        ),
        (
            "apis/apps/v1",
            "io.k8s.api.apps.v1.DeploymentList",
            "DeploymentList is a list of Deployments.",
            "Items is the list of Deployments.",
            "Standard list metadata.",
        ),
    ];

    #[test]
    fn v3_list_definitions_carry_upstreams_descriptions() {
        for (path, name, description, items, metadata) in UPSTREAM_LISTS {
            let doc = v3(path);
            let list = &doc["components"]["schemas"][name];
            assert_eq!(list["description"], description, "{name}");
            assert_eq!(list["properties"]["items"]["description"], items, "{name}");
            assert_eq!(list["properties"]["metadata"]["description"], metadata, "{name}");
            assert_eq!(
                list["properties"]["metadata"]["allOf"],
                json!([{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"}])
            );
            let item = name.strip_suffix("List").expect("a List");
            assert_eq!(list["properties"]["items"]["items"]["$ref"], format!("#/components/schemas/{item}"));
            assert_eq!(list["required"], json!(["items"]));
            assert_eq!(list["x-kubernetes-group-version-kind"][0]["kind"], name.rsplit('.').next().expect("kind"));
        }
    }

    #[test]
    fn v2_list_definitions_carry_upstreams_descriptions() {
        let doc: Value = serde_json::from_slice(get().v2_json()).expect("v2 JSON");
        for (_, name, description, items, metadata) in UPSTREAM_LISTS {
            let list = &doc["definitions"][name];
            assert_eq!(list["description"], description, "{name}");
            assert_eq!(list["properties"]["items"]["description"], items, "{name}");
            assert_eq!(list["properties"]["metadata"]["description"], metadata, "{name}");
            assert_eq!(
                list["properties"]["metadata"]["$ref"],
                "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"
            );
        }
    }

    #[test]
    fn every_served_built_in_list_kind_has_upstreams_descriptions_from_the_data() {
        let mut covered = 0;
        for r in resources::all().iter().filter(|r| r.verbs.contains(&"list")) {
            let name = format!("{}List", r.schema_name);
            let data = list_descriptions::get(&name)
                .unwrap_or_else(|| panic!("{name}: no descriptions; add its package to hack/gen-list-descriptions.py"));
            let schema = get().schema(&name).unwrap_or_else(|| panic!("{name}: no schema"));
            let text = |v: &Value| v.as_str().map(str::to_string);
            assert!(data.description.is_some() && data.items.is_some(), "{name}: {data:?}");
            assert_eq!(text(&schema["description"]), data.description, "{name}");
            assert_eq!(text(&schema["properties"]["items"]["description"]), data.items, "{name}");
            assert_eq!(text(&schema["properties"]["metadata"]["description"]), data.metadata, "{name}");
            covered += 1;
        }
        assert!(covered >= 50, "{covered} List kinds");
        // A field upstream leaves undescribed stays a bare reference, in v3 and in v2.
        let csr = "io.k8s.api.certificates.v1.CertificateSigningRequestList";
        let metadata = &get().schema(csr).expect("CSR list")["properties"]["metadata"];
        assert_eq!(metadata, &json!({"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"}));
        let v2: Value = serde_json::from_slice(get().v2_json()).expect("v2 JSON");
        assert_eq!(
            v2["definitions"][csr]["properties"]["metadata"],
            json!({"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"})
        );
    }

    #[test]
    fn v2_protobuf_decodes_back_with_definitions_paths_and_extensions() {
        let doc = gnostic::Document::decode(get().v2_protobuf()).expect("decodes");
        assert_eq!(doc.swagger, "2.0");
        assert_eq!(doc.info.as_ref().map(|i| i.title.as_str()), Some("Kubernetes"));
        let definitions = doc.definitions.expect("definitions").additional_properties;
        let deployment = definitions
            .iter()
            .find(|d| d.name == "io.k8s.api.apps.v1.Deployment")
            .and_then(|d| d.value.as_ref())
            .expect("Deployment");
        let gvk = deployment
            .vendor_extension
            .iter()
            .find(|e| e.name == "x-kubernetes-group-version-kind")
            .and_then(|e| e.value.as_ref())
            .expect("gvk extension");
        let parsed: Value = serde_json::from_str(&gvk.yaml).expect("yaml holds JSON");
        assert_eq!(parsed, json!([{"group": "apps", "kind": "Deployment", "version": "v1"}]));
        let paths = doc.paths.expect("paths").path;
        let item = paths
            .iter()
            .find(|p| p.name == "/apis/apps/v1/namespaces/{namespace}/deployments/{name}")
            .and_then(|p| p.value.as_ref())
            .expect("deployment path");
        let patch = item.patch.as_ref().expect("patch");
        assert_eq!(patch.operation_id, "patchAppsV1NamespacedDeployment");
        let has_field_validation = patch.parameters.iter().any(|p| {
            matches!(&p.oneof, Some(gnostic::parameters_item::Oneof::Parameter(gnostic::Parameter {
                oneof: Some(gnostic::parameter::Oneof::NonBodyParameter(gnostic::NonBodyParameter {
                    oneof: Some(gnostic::non_body_parameter::Oneof::QueryParameterSubSchema(q)),
                })),
            })) if q.name == "fieldValidation")
        });
        assert!(has_field_validation);
        let body = patch.parameters.iter().find_map(|p| match &p.oneof {
            Some(gnostic::parameters_item::Oneof::Parameter(gnostic::Parameter {
                oneof: Some(gnostic::parameter::Oneof::BodyParameter(b)),
            })) => Some(b),
            _ => None,
        });
        assert_eq!(
            body.and_then(|b| b.schema.as_ref()).map(|s| s.r#ref.as_str()),
            Some("#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Patch")
        );
    }
}
