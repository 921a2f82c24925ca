//! How server-side apply reads an OpenAPI v3 schema, as kube-openapi's `schemaconv` turns it into
//! structured-merge-diff types: which maps are granular or atomic (`x-kubernetes-map-type`),
//! which lists are atomic, sets or map-lists (`x-kubernetes-list-type`, `-list-map-keys`, or the
//! strategic-merge `x-kubernetes-patch-strategy: merge` + `-patch-merge-key` fallback), and what
//! fields without a schema become (granular maps, atomic lists: upstream's "deduced" type).

use crate::strategic::SchemaLookup;
use serde_json::{Map, Value};

/// A type reference: a (possibly `$ref`) schema, or one of upstream's two untyped types.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Ty<'s> {
    /// A schema as found in `properties`, `items` or `additionalProperties`; extensions on it
    /// (e.g. `x-kubernetes-map-type` next to a `$ref`) override those of the referenced schema.
    Schema(&'s Value),
    /// No schema (`__untyped_deduced_`): maps are granular, lists atomic, anything else a scalar.
    Deduced,
    /// Everything atomic (`__untyped_atomic_`), e.g. `RawExtension` or list items without schema.
    Atomic,
}

/// How the items of a list are identified.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ListKind<'s> {
    /// The list is one value.
    Atomic,
    /// Items are scalars identified by value.
    Set,
    /// Items are objects identified by these key fields.
    Map(Vec<&'s str>),
}

/// The map side of a type.
#[derive(Clone, Debug)]
pub(crate) struct MapType<'s> {
    pub(crate) atomic: bool,
    props: Option<&'s Map<String, Value>>,
    elem: Ty<'s>,
}

impl<'s> MapType<'s> {
    /// Whether `name` is a declared property, and the type of its value.
    pub(crate) fn field(&self, name: &str) -> (bool, Ty<'s>) {
        match self.props.and_then(|p| p.get(name)) {
            Some(s) => (true, Ty::Schema(s)),
            None => (false, self.elem),
        }
    }
}

/// The list side of a type.
#[derive(Clone, Debug)]
pub(crate) struct ListType<'s> {
    pub(crate) kind: ListKind<'s>,
    pub(crate) elem: Ty<'s>,
}

/// What a value is, given its type: something to walk into, or a leaf (scalar, atomic, null, or a
/// value whose JSON type does not match the schema).
#[derive(Clone, Debug)]
pub(crate) enum Shape<'s> {
    Leaf,
    Map(MapType<'s>),
    List(ListType<'s>),
}

/// Type queries over a kind's schemas.
#[derive(Clone, Copy)]
pub(crate) struct Types<'s> {
    lookup: &'s dyn SchemaLookup,
}

const RAW_EXTENSION: &str = "io.k8s.apimachinery.pkg.runtime.RawExtension";

fn type_name(r: &Value) -> Option<&str> {
    match r.get("type")? {
        Value::String(s) => Some(s),
        Value::Array(types) => types.iter().filter_map(Value::as_str).find(|t| *t != "null"),
        _ => None,
    }
}

fn ref_name(s: &Value) -> Option<&str> {
    s.get("$ref").or_else(|| s.get("allOf")?.get(0)?.get("$ref"))?.as_str()
}

fn is_raw_extension(s: &Value) -> bool {
    ref_name(s).is_some_and(|r| r.ends_with(RAW_EXTENSION))
}

impl<'s> Types<'s> {
    pub(crate) fn new(lookup: &'s dyn SchemaLookup) -> Self {
        Types { lookup }
    }

    /// The map side of `ty`, if it has one (objects and schemas without `type`).
    pub(crate) fn map_type(&self, ty: Ty<'s>) -> Option<MapType<'s>> {
        match ty {
            Ty::Deduced => Some(MapType { atomic: false, props: None, elem: Ty::Deduced }),
            Ty::Atomic => Some(MapType { atomic: true, props: None, elem: Ty::Atomic }),
            Ty::Schema(s) if is_raw_extension(s) => Some(MapType { atomic: true, props: None, elem: Ty::Atomic }),
            Ty::Schema(s) => {
                let r = self.lookup.resolve(s);
                if !matches!(type_name(r), None | Some("object")) {
                    return None;
                }
                let ext = |k: &str| s.get(k).or_else(|| r.get(k)).and_then(Value::as_str);
                let elem = match r.get("additionalProperties") {
                    Some(v @ Value::Object(_)) => Ty::Schema(v),
                    _ => Ty::Deduced,
                };
                Some(MapType {
                    atomic: ext("x-kubernetes-map-type") == Some("atomic"),
                    props: r.get("properties").and_then(Value::as_object),
                    elem,
                })
            }
        }
    }

    /// The list side of `ty`, if it has one (arrays and schemas without `type`).
    pub(crate) fn list_type(&self, ty: Ty<'s>) -> Option<ListType<'s>> {
        let atomic = ListType { kind: ListKind::Atomic, elem: Ty::Atomic };
        let s = match ty {
            Ty::Deduced | Ty::Atomic => return Some(atomic),
            Ty::Schema(s) if is_raw_extension(s) => return Some(atomic),
            Ty::Schema(s) => s,
        };
        let r = self.lookup.resolve(s);
        if !matches!(type_name(r), None | Some("array")) {
            return None;
        }
        let ext = |k: &str| s.get(k).or_else(|| r.get(k));
        let kind = match ext("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("set") => ListKind::Set,
            Some("map") => match ext("x-kubernetes-list-map-keys").and_then(Value::as_array) {
                Some(keys) => ListKind::Map(keys.iter().filter_map(Value::as_str).collect()),
                None => ListKind::Set,
            },
            Some(_) => ListKind::Atomic,
            None => match ext("x-kubernetes-patch-strategy").and_then(Value::as_str) {
                Some("merge" | "merge,retainKeys") => match ext("x-kubernetes-patch-merge-key").and_then(Value::as_str)
                {
                    Some(key) => ListKind::Map(vec![key]),
                    None => ListKind::Set,
                },
                _ => ListKind::Atomic,
            },
        };
        let kind = match kind {
            ListKind::Map(keys) if keys.is_empty() => ListKind::Set,
            k => k,
        };
        let elem = match r.get("items") {
            Some(items @ Value::Object(_)) => Ty::Schema(items),
            _ => Ty::Atomic,
        };
        Some(ListType { kind, elem })
    }

    /// Whether property `name` of `ty` references a named object type. Built-in kinds'
    /// `spec` and `status` do, and upstream always sees them (as Go structs) even when empty;
    /// custom resources have inline schemas and no such zero values.
    pub(crate) fn is_named_struct(&self, ty: Ty<'s>, name: &str) -> bool {
        match self.map_type(ty).map(|m| m.field(name)) {
            Some((true, Ty::Schema(s))) => {
                ref_name(s).is_some() && type_name(self.lookup.resolve(s)) == Some("object") && !is_raw_extension(s)
            }
            _ => false,
        }
    }

    /// What `v` is under `ty`.
    pub(crate) fn shape(&self, ty: Ty<'s>, v: &Value) -> Shape<'s> {
        match v {
            Value::Object(_) => match self.map_type(ty) {
                Some(m) if !m.atomic => Shape::Map(m),
                _ => Shape::Leaf,
            },
            Value::Array(_) => match self.list_type(ty) {
                Some(l) if l.kind != ListKind::Atomic => Shape::List(l),
                _ => Shape::Leaf,
            },
            _ => Shape::Leaf,
        }
    }

    /// The default of a map-list key field, used when an item omits it (as upstream does with the
    /// OpenAPI `default`, e.g. `protocol: TCP` of container and service ports). When the schema
    /// carries no default, `protocol` still defaults to `TCP`: it is the only defaulted list key in
    /// the built-in API, and without it an applied port would not match its defaulted live item.
    pub(crate) fn key_default(&self, elem: Ty<'s>, key: &str) -> Option<Value> {
        let from_schema = self.map_type(elem).and_then(|m| match m.field(key) {
            (true, Ty::Schema(s)) => s.get("default").or_else(|| self.lookup.resolve(s).get("default")).cloned(),
            _ => None,
        });
        from_schema.or_else(|| (key == "protocol").then(|| Value::String("TCP".to_string())))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// Resolves `$ref: "#/components/schemas/<name>"` (directly or as `allOf: [{$ref}]`) in a
    /// hand-written set of schemas.
    pub(crate) struct TestLookup(pub(crate) Value);

    impl SchemaLookup for TestLookup {
        fn resolve<'a>(&'a self, schema: &'a Value) -> &'a Value {
            let mut cur = schema;
            for _ in 0..16 {
                let Some(r) = ref_name(cur) else { return cur };
                let name = r.rsplit('/').next().unwrap_or(r);
                match self.0.get(name) {
                    Some(next) => cur = next,
                    None => return cur,
                }
            }
            cur
        }
    }

    #[test]
    fn lists_default_to_atomic_and_merge_key_makes_map_lists() {
        let lookup = TestLookup(json!({}));
        let types = Types::new(&lookup);
        let atomic = json!({"type": "array", "items": {"type": "string"}});
        let set = json!({"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"});
        let keyed = json!({"type": "array", "items": {"type": "object"}, "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["containerPort", "protocol"]});
        let merge = json!({"type": "array", "items": {"type": "object"}, "x-kubernetes-patch-strategy": "merge",
            "x-kubernetes-patch-merge-key": "name"});
        fn kind<'a>(types: &Types<'a>, s: &'a Value) -> Option<ListKind<'a>> {
            types.list_type(Ty::Schema(s)).map(|l| l.kind)
        }
        assert_eq!(kind(&types, &atomic), Some(ListKind::Atomic));
        assert_eq!(kind(&types, &set), Some(ListKind::Set));
        assert_eq!(kind(&types, &keyed), Some(ListKind::Map(vec!["containerPort", "protocol"])));
        assert_eq!(kind(&types, &merge), Some(ListKind::Map(vec!["name"])));
        assert!(types.list_type(Ty::Schema(&json!({"type": "string"}))).is_none());
    }

    #[test]
    fn map_type_override_next_to_ref_wins() {
        let lookup = TestLookup(json!({"Sel": {"type": "object", "properties": {"a": {"type": "string"}}}}));
        let types = Types::new(&lookup);
        let granular = json!({"$ref": "#/components/schemas/Sel"});
        let atomic = json!({"allOf": [{"$ref": "#/components/schemas/Sel"}], "x-kubernetes-map-type": "atomic"});
        assert!(matches!(types.shape(Ty::Schema(&granular), &json!({"a": "x"})), Shape::Map(_)));
        assert!(matches!(types.shape(Ty::Schema(&atomic), &json!({"a": "x"})), Shape::Leaf));
        assert!(matches!(types.shape(Ty::Schema(&granular), &json!("scalar")), Shape::Leaf));
    }

    #[test]
    fn key_defaults_come_from_the_schema_then_protocol_tcp() {
        let lookup = TestLookup(json!({}));
        let types = Types::new(&lookup);
        let item = json!({"type": "object", "properties": {"protocol": {"type": "string"},
            "kind": {"type": "string", "default": "A"}}});
        assert_eq!(types.key_default(Ty::Schema(&item), "kind"), Some(json!("A")));
        assert_eq!(types.key_default(Ty::Schema(&item), "protocol"), Some(json!("TCP")));
        assert_eq!(types.key_default(Ty::Schema(&item), "name"), None);
    }
}
