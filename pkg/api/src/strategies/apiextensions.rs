//! CustomResourceDefinitions, as upstream's `apiextensions/v1` defaults and the validation in
//! `apiextensions-apiserver/pkg/apis/apiextensions/validation` (its main rules: names, group,
//! scope, exactly one storage version, a structural schema per version, immutable group and
//! scope).

use super::formats;
use crate::deletion::{DeleteOptions, DeletePlan};
use crate::field::{FieldError, Path};
use crate::strategy::{DynStrategy, NameRule, ObjectHooks, Strategy, Typed};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition,
};
use serde_json::Value;

pub fn custom_resource_definition() -> Box<dyn DynStrategy> {
    Box::new(Typed(CrdStrategy))
}

/// The finalizer a definition gets when deleted, removed once its custom resources are gone.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

struct CrdStrategy;

/// A DNS-1035 label's problems, for names that may be mixed case (kinds).
fn kind_errors(kind: &str) -> Vec<String> {
    formats::dns1035_label(&kind.to_lowercase())
}

/// Writes the schemas' whole `maximum`, `minimum` and `multipleOf` numbers as integers.
fn whole_numbers(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m.iter_mut() {
                match v {
                    serde_json::Value::Number(n) if matches!(k.as_str(), "maximum" | "minimum" | "multipleOf") => {
                        if let Some(f) = n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15) {
                            *v = serde_json::Value::from(f as i64);
                        }
                    }
                    _ => whole_numbers(v),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(whole_numbers),
        _ => {}
    }
}

/// The errors of the CEL rules (`x-kubernetes-validations`) of the definition's schemas, compiled
/// as upstream reports them: under `spec.validation.openAPIV3Schema` when every version has the
/// same schema (upstream's internal form then holds one), else under each version's.
fn rule_errors(crd: &CustomResourceDefinition) -> Vec<FieldError> {
    let schemas: Vec<Option<Value>> = crd
        .spec
        .versions
        .iter()
        .map(|v| v.schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref()))
        .map(|s| s.and_then(|s| serde_json::to_value(s).ok()))
        .collect();
    let mut errs = Vec::new();
    let shared = schemas.windows(2).all(|w| w[0] == w[1]);
    for (i, schema) in schemas.iter().enumerate() {
        let Some(schema) = schema else { continue };
        let path = if shared {
            if i > 0 {
                break;
            }
            Path::new("spec").child("validation").child("openAPIV3Schema")
        } else {
            Path::new("spec").child("versions").index(i).child("schema").child("openAPIV3Schema")
        };
        if let Err(e) = crate::custom::rules::Rules::compile(schema, &path) {
            errs.extend(e);
        }
    }
    errs
}

impl Strategy for CrdStrategy {
    type Object = CustomResourceDefinition;

    fn name_rule(&self) -> NameRule {
        NameRule::Subdomain
    }

    fn set_defaults(&self, crd: &mut CustomResourceDefinition) {
        let names = &mut crd.spec.names;
        if names.singular.as_deref().is_none_or(str::is_empty) {
            names.singular = Some(names.kind.to_lowercase());
        }
        if names.list_kind.as_deref().is_none_or(str::is_empty) && !names.kind.is_empty() {
            names.list_kind = Some(format!("{}List", names.kind));
        }
        crd.spec.conversion.get_or_insert_with(|| CustomResourceConversion { strategy: "None".into(), webhook: None });
    }

    fn prepare_for_create(&self, crd: &mut CustomResourceDefinition) {
        crd.status = None;
    }

    /// `maximum`, `minimum` and `multipleOf` are `float64`s: Go writes a whole one as `10`.
    fn encoded(&self, crd: &mut serde_json::Value) {
        whole_numbers(crd);
    }

    fn validate(&self, crd: &CustomResourceDefinition) -> Vec<FieldError> {
        let spec = &crd.spec;
        let p = Path::new("spec");
        let mut errs = Vec::new();
        let want = format!("{}.{}", spec.names.plural, spec.group);
        let name = crd.metadata.name.as_deref().unwrap_or("");
        if name != want {
            errs.push(FieldError::invalid("metadata.name", name, "must be spec.names.plural+\".\"+spec.group"));
        }
        if spec.group.is_empty() {
            errs.push(FieldError::required(p.child("group"), ""));
        } else {
            errs.extend(formats::validate_dns_subdomain(&spec.group, &p.child("group")));
            if !spec.group.contains('.') {
                errs.push(FieldError::invalid(
                    p.child("group"),
                    spec.group.as_str(),
                    "should be a domain with at least one dot",
                ));
            }
        }
        match spec.scope.as_str() {
            "" => errs.push(FieldError::required(p.child("scope"), "")),
            "Cluster" | "Namespaced" => {}
            other => errs.push(FieldError::not_supported(p.child("scope"), other, &["Cluster", "Namespaced"])),
        }
        let np = p.child("names");
        let names = &spec.names;
        let label = |value: &str, path: Path, errs: &mut Vec<FieldError>| {
            if value.is_empty() {
                errs.push(FieldError::required(path, ""));
            } else {
                errs.extend(formats::each_invalid(&path, value, formats::dns1035_label(value)));
            }
        };
        label(&names.plural, np.child("plural"), &mut errs);
        if let Some(s) = names.singular.as_deref().filter(|s| !s.is_empty()) {
            errs.extend(formats::each_invalid(&np.child("singular"), s, formats::dns1035_label(s)));
        }
        if names.kind.is_empty() {
            errs.push(FieldError::required(np.child("kind"), ""));
        } else {
            errs.extend(formats::each_invalid(&np.child("kind"), &names.kind, kind_errors(&names.kind)));
        }
        if let Some(lk) = names.list_kind.as_deref() {
            if lk == names.kind {
                errs.push(FieldError::invalid(np.child("listKind"), lk, "kind and listKind may not be the same"));
            }
        }
        for (i, s) in names.short_names.iter().flatten().enumerate() {
            errs.extend(formats::each_invalid(&np.child("shortNames").index(i), s, formats::dns1035_label(s)));
        }
        let vp = p.child("versions");
        if spec.versions.is_empty() {
            errs.push(FieldError::invalid(
                &vp,
                serde_json::json!([]),
                "must have exactly one version marked as storage version",
            ));
        } else {
            let storage = spec.versions.iter().filter(|v| v.storage).count();
            if storage != 1 {
                errs.push(FieldError::invalid(&vp, storage, "must have exactly one version marked as storage version"));
            }
        }
        for (i, v) in spec.versions.iter().enumerate() {
            let path = vp.index(i);
            label(&v.name, path.child("name"), &mut errs);
            if spec.versions[..i].iter().any(|o| o.name == v.name) {
                errs.push(FieldError::duplicate(path.child("name"), v.name.as_str()));
            }
            let schema = v.schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref());
            let sp = path.child("schema").child("openAPIV3Schema");
            match schema {
                None => errs.push(FieldError::required(sp, "schemas are required")),
                Some(s) if s.type_.as_deref() != Some("object") => errs.push(FieldError::invalid(
                    sp.child("type"),
                    s.type_.clone().unwrap_or_default(),
                    "must be object at the root",
                )),
                Some(_) => {}
            }
        }
        errs.extend(rule_errors(crd));
        errs
    }

    fn validate_update(&self, new: &CustomResourceDefinition, old: &CustomResourceDefinition) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let p = Path::new("spec");
        if new.spec.group != old.spec.group {
            errs.push(FieldError::invalid(p.child("group"), new.spec.group.as_str(), "field is immutable"));
        }
        if new.spec.scope != old.spec.scope {
            errs.push(FieldError::invalid(p.child("scope"), new.spec.scope.as_str(), "field is immutable"));
        }
        errs
    }
}

impl ObjectHooks for CrdStrategy {
    fn tracks_generation(&self) -> bool {
        true
    }

    /// A definition goes only after its custom resources (upstream's Delete of CRDs adds the
    /// cleanup finalizer the apiextensions controller removes once they are gone).
    fn on_delete(&self, old: &Value, _opts: &DeleteOptions) -> DeletePlan {
        let deleting = old.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null());
        DeletePlan { finalizers: if deleting { Vec::new() } else { vec![CLEANUP_FINALIZER] }, ..DeletePlan::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(v: serde_json::Value) -> CustomResourceDefinition {
        serde_json::from_value(v).expect("decodes")
    }

    fn good() -> serde_json::Value {
        json!({"metadata": {"name": "widgets.example.com"},
               "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
                        "versions": [{"name": "v1", "served": true, "storage": true,
                                      "schema": {"openAPIV3Schema": {"type": "object"}}}]}})
    }

    #[test]
    fn whole_bounds_are_written_as_go_writes_them() {
        let mut v = good();
        v["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = json!({"type": "object", "properties": {
            "size": {"type": "integer", "maximum": 10, "minimum": 1.5, "multipleOf": 2},
            "maximum": {"type": "number", "default": 3.0}}});
        let normalized = Typed(CrdStrategy).normalize(v).expect("normalizes").object;
        let props = &normalized["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"];
        assert_eq!(serde_json::to_string(&props["size"]["maximum"]).ok().as_deref(), Some("10"));
        assert_eq!(serde_json::to_string(&props["size"]["multipleOf"]).ok().as_deref(), Some("2"));
        assert_eq!(props["size"]["minimum"], 1.5);
        assert_eq!(props["maximum"]["type"], "number", "a property named maximum is a schema");
    }

    #[test]
    fn names_and_conversion_are_defaulted() {
        let mut c = crd(good());
        CrdStrategy.set_defaults(&mut c);
        assert_eq!(c.spec.names.singular.as_deref(), Some("widget"));
        assert_eq!(c.spec.names.list_kind.as_deref(), Some("WidgetList"));
        assert_eq!(c.spec.conversion.map(|c| c.strategy), Some("None".into()));
        assert!(CrdStrategy.validate(&crd(good())).is_empty());
    }

    #[test]
    fn bad_definitions_are_refused_field_by_field() {
        let bad = crd(json!({"metadata": {"name": "things.example.com"},
            "spec": {"group": "example", "scope": "Global", "names": {"plural": "Widgets", "kind": ""},
                     "versions": [{"name": "v1", "served": true, "storage": false},
                                  {"name": "v1", "served": true, "storage": false, "schema": {"openAPIV3Schema": {"type": "string"}}}]}}));
        let errs: Vec<String> = CrdStrategy.validate(&bad).iter().map(|e| e.to_string()).collect();
        assert_eq!(
            errs[0],
            "metadata.name: Invalid value: \"things.example.com\": must be spec.names.plural+\".\"+spec.group"
        );
        assert!(
            errs.contains(
                &"spec.group: Invalid value: \"example\": should be a domain with at least one dot".to_string()
            ),
            "{errs:?}"
        );
        assert!(errs.iter().any(|e| e.starts_with("spec.scope: Unsupported value: \"Global\"")), "{errs:?}");
        assert!(errs.iter().any(|e| e.starts_with("spec.names.plural: Invalid value: \"Widgets\"")), "{errs:?}");
        assert!(errs.contains(&"spec.names.kind: Required value".to_string()), "{errs:?}");
        assert!(
            errs.contains(
                &"spec.versions: Invalid value: 0: must have exactly one version marked as storage version".to_string()
            ),
            "{errs:?}"
        );
        assert!(errs.contains(&"spec.versions[1].name: Duplicate value: \"v1\"".to_string()), "{errs:?}");
        assert!(
            errs.contains(&"spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required".to_string()),
            "{errs:?}"
        );
        assert!(
            errs.iter().any(|e| e.starts_with("spec.versions[1].schema.openAPIV3Schema.type: Invalid value")),
            "{errs:?}"
        );
        let mut moved = crd(good());
        moved.spec.scope = "Cluster".into();
        let errs = CrdStrategy.validate_update(&moved, &crd(good()));
        assert_eq!(
            errs.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
            ["spec.scope: Invalid value: \"Cluster\": field is immutable"]
        );
    }
}
