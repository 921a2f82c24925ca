//! Custom resources: the resource-table entries a CustomResourceDefinition adds, one per served
//! version, and the strategy that applies its structural schema ([`schema`]) and printer
//! columns ([`columns`]).
//!
//! All versions of a definition share one storage prefix; objects are kept in the storage
//! version and converted to the version asked for by rewriting `apiVersion` (upstream's `None`
//! conversion strategy; conversion webhooks are not called).

pub mod columns;
pub mod rules;
pub mod schema;

use crate::field::{FieldError, Path};
use crate::resources::{Backing, ResourceInfo, Scope, SubresourceInfo, STANDARD_VERBS};
use crate::strategy::{
    decode_reporting_unknown, DecodeError, DynStrategy, NameRule, Normalized, ObjectHooks, Undecodable,
};
use columns::PrinterColumn;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

/// What a custom resource's table entry takes from its definition.
#[derive(Clone, Debug)]
pub struct CustomInfo {
    /// The definition's name (`widgets.example.com`).
    pub crd: String,
    /// The version objects are stored in.
    pub storage_version: &'static str,
    pub printer_columns: Vec<PrinterColumn>,
    /// The `scale` subresource's paths, if the version has one.
    pub scale: Option<ScalePaths>,
    /// The version's whole object schema for server-side apply and managedFields: its
    /// `openAPIV3Schema` with `metadata` as ObjectMeta (which definitions do not describe).
    pub object_schema: Value,
}

/// `subresources.scale` of a version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScalePaths {
    pub spec_replicas: String,
    pub status_replicas: String,
    pub label_selector: Option<String>,
}

/// A definition that cannot be served.
#[derive(Debug, thiserror::Error)]
#[error("CustomResourceDefinition {name}: {message}")]
pub struct DefinitionError {
    pub name: String,
    pub message: String,
}

/// A `&'static str` for a definition's names: resource-table entries live as long as the
/// process (a definition's entries are made again only when it changes).
fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

fn leak_list(v: Option<&Value>) -> &'static [&'static str] {
    let items: Vec<&'static str> =
        v.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).map(leak).collect();
    Box::leak(items.into_boxed_slice())
}

fn empty_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::Schema::default()
}

/// The table entries for the served versions of `crd` (a stored CustomResourceDefinition).
pub fn resource_infos(crd: &Value) -> Result<Vec<ResourceInfo>, DefinitionError> {
    let name = crd.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string();
    let err = |message: &str| DefinitionError { name: name.clone(), message: message.to_string() };
    let spec = crd.get("spec").ok_or_else(|| err("no spec"))?;
    let group = spec.get("group").and_then(Value::as_str).filter(|g| !g.is_empty()).ok_or_else(|| err("no group"))?;
    let names = spec.get("names").ok_or_else(|| err("no names"))?;
    let s = |k: &str| names.get(k).and_then(Value::as_str).unwrap_or("");
    let (plural, kind) = (s("plural"), s("kind"));
    if plural.is_empty() || kind.is_empty() {
        return Err(err("names.plural and names.kind are required"));
    }
    let singular = if s("singular").is_empty() { kind.to_lowercase() } else { s("singular").to_string() };
    let list_kind = if s("listKind").is_empty() { format!("{kind}List") } else { s("listKind").to_string() };
    let scope = match spec.get("scope").and_then(Value::as_str) {
        Some("Cluster") => Scope::Cluster,
        _ => Scope::Namespaced,
    };
    let versions = spec.get("versions").and_then(Value::as_array).ok_or_else(|| err("no versions"))?;
    let storage = versions
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .and_then(|v| v.get("name").and_then(Value::as_str))
        .ok_or_else(|| err("no storage version"))?;
    let (group, plural, kind, singular, storage) =
        (leak(group), leak(plural), leak(kind), leak(&singular), leak(storage));
    let short_names = leak_list(names.get("shortNames"));
    let categories = leak_list(names.get("categories"));
    let mut out = Vec::new();
    for v in versions.iter().filter(|v| v.get("served").and_then(Value::as_bool) == Some(true)) {
        let Some(version) = v.get("name").and_then(Value::as_str) else { continue };
        let version = leak(version);
        let schema = v.pointer("/schema/openAPIV3Schema").cloned();
        let has_status = v.pointer("/subresources/status").is_some();
        let scale = v.pointer("/subresources/scale").map(|sc| ScalePaths {
            spec_replicas: sc.get("specReplicasPath").and_then(Value::as_str).unwrap_or(".spec.replicas").to_string(),
            status_replicas: sc
                .get("statusReplicasPath")
                .and_then(Value::as_str)
                .unwrap_or(".status.replicas")
                .to_string(),
            label_selector: sc.get("labelSelectorPath").and_then(Value::as_str).map(str::to_string),
        });
        let mut subresources = Vec::new();
        if has_status {
            subresources.push(SubresourceInfo {
                name: "status",
                group,
                version,
                kind,
                verbs: &["get", "patch", "update"],
            });
        }
        if scale.is_some() {
            subresources.push(SubresourceInfo {
                name: "scale",
                group: "autoscaling",
                version: "v1",
                kind: "Scale",
                verbs: &["get", "patch", "update"],
            });
        }
        let printer_columns: Vec<PrinterColumn> = match v.get("additionalPrinterColumns").and_then(Value::as_array) {
            Some(cols) if !cols.is_empty() => cols.iter().filter_map(PrinterColumn::from_crd).collect(),
            _ => vec![PrinterColumn::age()],
        };
        let has_spec = schema.as_ref().and_then(|s| s.pointer("/properties/spec")).is_some();
        let object_schema = object_schema(schema.as_ref());
        out.push(ResourceInfo {
            group,
            version,
            resource: plural,
            singular,
            kind,
            list_kind: list_kind.clone(),
            scope,
            backing: Backing::Stored,
            verbs: STANDARD_VERBS,
            short_names,
            categories,
            subresources,
            schema_name: format!("{}.{version}.{kind}", reverse_domain(group)),
            schema: empty_schema,
            has_spec,
            strategy: Box::new(CustomStrategy {
                rules: compiled_rules(&name, version, schema.as_ref()),
                schema,
                has_status,
            }),
            custom: Some(CustomInfo {
                crd: name.clone(),
                storage_version: storage,
                printer_columns,
                scale,
                object_schema,
            }),
        });
    }
    Ok(out)
}

/// The version's CEL rules, compiled once per definition revision; a rule that does not compile
/// (a definition stored before rules were checked) is left out.
fn compiled_rules(crd: &str, version: &str, schema: Option<&Value>) -> rules::Rules {
    let Some(schema) = schema else { return rules::Rules::default() };
    let (rules, errs) = rules::Rules::compile_lenient(schema);
    for e in errs {
        DEFINITION_WARNINGS.with(|w| w.borrow_mut().push(format!("{crd} {version}: {e}")));
    }
    rules
}

thread_local! {
    /// Rules left out by [`compiled_rules`], for the caller to log.
    static DEFINITION_WARNINGS: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The problems met by the last [`resource_infos`] calls on this thread (rules left out).
pub fn take_definition_warnings() -> Vec<String> {
    DEFINITION_WARNINGS.with(|w| std::mem::take(&mut *w.borrow_mut()))
}

/// A version's schema as server-side apply reads it (see [`CustomInfo::object_schema`]).
fn object_schema(schema: Option<&Value>) -> Value {
    let mut s = schema
        .cloned()
        .unwrap_or_else(|| serde_json::json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
    if let Some(m) = s.as_object_mut() {
        let props = m.entry("properties").or_insert_with(|| serde_json::json!({}));
        if let Some(p) = props.as_object_mut() {
            p.insert("apiVersion".into(), serde_json::json!({"type": "string"}));
            p.insert("kind".into(), serde_json::json!({"type": "string"}));
            p.insert(
                "metadata".into(),
                serde_json::json!({"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}),
            );
        }
    }
    s
}

/// `example.com` → `com.example`, as OpenAPI names custom resource types.
fn reverse_domain(group: &str) -> String {
    group.split('.').rev().collect::<Vec<_>>().join(".")
}

/// A version's structural schema applied to its objects.
struct CustomStrategy {
    schema: Option<Value>,
    has_status: bool,
    rules: rules::Rules,
}

impl DynStrategy for CustomStrategy {
    fn name_rule(&self) -> NameRule {
        NameRule::Subdomain
    }

    fn normalize(&self, mut obj: Value) -> Result<Normalized, Undecodable> {
        let mut unknown_fields = Vec::new();
        // Metadata is ObjectMeta, whatever the schema says of it.
        if let Some(md) = obj.get("metadata") {
            let decoded = decode_reporting_unknown::<ObjectMeta>(md).and_then(|(meta, unknown)| {
                Ok((serde_json::to_value(meta).map_err(|e| DecodeError(e.to_string()))?, unknown))
            });
            let (meta, unknown) = match decoded {
                Ok(d) => d,
                Err(error) => return Err(Undecodable { error, object: obj }),
            };
            unknown_fields.extend(unknown.into_iter().map(|f| format!("metadata.{f}")));
            obj["metadata"] = meta;
        }
        if let Some(s) = &self.schema {
            schema::prune(&mut obj, s, true, "", &mut unknown_fields);
            schema::apply_defaults(&mut obj, s);
        }
        Ok(Normalized { object: obj, unknown_fields })
    }

    fn prepare_for_create(&self, obj: &mut Value) -> Result<(), DecodeError> {
        if self.has_status {
            if let Some(m) = obj.as_object_mut() {
                m.remove("status");
            }
        }
        Ok(())
    }

    fn prepare_for_update(&self, _new: &mut Value, _old: &Value) -> Result<(), DecodeError> {
        Ok(())
    }

    fn validate(&self, obj: &Value, old: Option<&Value>) -> Result<Vec<FieldError>, DecodeError> {
        self.validate_warning(obj, old, &mut Vec::new())
    }

    /// The schema, then its CEL rules (on create, update and status update alike, as upstream),
    /// with upstream's ratcheting on update: the errors of unchanged values are warnings.
    fn validate_warning(
        &self,
        obj: &Value,
        old: Option<&Value>,
        warnings: &mut Vec<String>,
    ) -> Result<Vec<FieldError>, DecodeError> {
        let mut errs = Vec::new();
        if let Some(s) = &self.schema {
            schema::validate_ratcheting(obj, old, s, &Path::new(""), &mut errs, warnings);
        }
        // As upstream, rules run only on a value of the schema's types.
        if errs.iter().any(|e| e.detail.contains(" in body must be of type ")) {
            if !self.rules.is_empty() {
                errs.push(FieldError::invalid(
                    "",
                    Value::Null,
                    "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
                ));
            }
        } else {
            errs.extend(self.rules.validate_ratcheting(obj, old, warnings));
        }
        Ok(errs)
    }
}

impl ObjectHooks for CustomStrategy {
    /// Every custom resource carries `metadata.generation`.
    fn tracks_generation(&self) -> bool {
        true
    }

    /// A custom resource has no fixed spec: everything but metadata counts (and status, when
    /// it has a status subresource), as upstream's customResourceStrategy.
    fn generation_changed(&self, new: &Value, old: &Value) -> bool {
        let counted = |v: &Value| -> Vec<(String, Value)> {
            v.as_object()
                .into_iter()
                .flatten()
                .filter(|(k, _)| k.as_str() != "metadata" && !(self.has_status && k.as_str() == "status"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        counted(new) != counted(old)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn crd() -> Value {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"], "categories": ["all"]},
                "versions": [
                    {"name": "v1", "served": true, "storage": true,
                     "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                     "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}],
                     "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {"size": {"type": "integer", "default": 1}, "replicas": {"type": "integer"}}},
                        "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}}}},
                    {"name": "v1beta1", "served": true, "storage": false,
                     "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                    {"name": "v1alpha1", "served": false, "storage": false}]}})
    }

    #[test]
    fn a_definition_serves_each_served_version() {
        let infos = resource_infos(&crd()).expect("infos");
        let versions: Vec<&str> = infos.iter().map(|i| i.version).collect();
        assert_eq!(versions, ["v1", "v1beta1"]);
        let v1 = &infos[0];
        assert_eq!(
            (v1.group, v1.resource, v1.kind, v1.singular, v1.list_kind.as_str()),
            ("example.com", "widgets", "Widget", "widget", "WidgetList")
        );
        assert_eq!(v1.short_names, ["wd"]);
        assert!(v1.has_subresource("status") && v1.has_subresource("scale") && v1.has_spec);
        assert!(!infos[1].has_subresource("status"));
        let custom = v1.custom.as_ref().expect("custom");
        assert_eq!(custom.storage_version, "v1");
        assert_eq!(custom.printer_columns[0].name, "Size");
        assert_eq!(infos[1].custom.as_ref().map(|c| c.printer_columns[0].name.as_str()), Some("Age"));
        assert_eq!(v1.storage_prefix(), "/registry/example.com/widgets/");
    }

    #[test]
    fn the_strategy_prunes_defaults_and_validates() {
        let infos = resource_infos(&crd()).expect("infos");
        let s = &infos[0].strategy;
        let n = s
            .normalize(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "bogus": 1},
                              "spec": {"extra": true}, "status": {"replicas": 2}}))
            .expect("normalize");
        assert_eq!(n.unknown_fields, ["metadata.bogus", "spec.extra"]);
        assert_eq!(n.object["spec"], json!({"size": 1}));
        let mut created = n.object.clone();
        s.prepare_for_create(&mut created).expect("prepare");
        assert!(created.get("status").is_none(), "status is set through /status");
        let errs = s.validate(&json!({"spec": {"size": "x"}}), None).expect("validate");
        assert_eq!(errs.len(), 1);
        // A version whose schema keeps everything keeps everything.
        let loose = infos[1].strategy.normalize(json!({"spec": {"anything": 1}})).expect("normalize");
        assert!(loose.unknown_fields.is_empty() && loose.object["spec"]["anything"] == 1);
    }

    #[test]
    fn definitions_without_a_storage_version_are_refused() {
        let mut bad = crd();
        bad["spec"]["versions"][0]["storage"] = json!(false);
        assert!(resource_infos(&bad).is_err());
    }

    #[test]
    fn a_custom_resources_generation_counts_all_but_metadata_and_a_status_subresource() {
        let infos = resource_infos(&crd()).expect("infos");
        let (with_status, without) = (&infos[0].strategy, &infos[1].strategy);
        assert!(with_status.tracks_generation() && without.tracks_generation());
        let old = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"size": 1}, "status": {"replicas": 1}});
        let mut relabelled = old.clone();
        relabelled["metadata"]["labels"]["a"] = json!("2");
        assert!(!with_status.generation_changed(&relabelled, &old));
        let mut status = old.clone();
        status["status"]["replicas"] = json!(2);
        assert!(!with_status.generation_changed(&status, &old));
        assert!(without.generation_changed(&status, &old), "without a status subresource status counts");
        let mut top = old.clone();
        top["data"] = json!({"x": 1});
        assert!(with_status.generation_changed(&top, &old));
    }
}
