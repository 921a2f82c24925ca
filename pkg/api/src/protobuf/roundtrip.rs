//! A protobuf encoder driven by the decoder's own tables (tests only), and the round trip of every
//! kind k1s serves: a sample object with every field of its message set, encoded, decoded and
//! compared, key order included.

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine as _;
use serde_json::{json, Map as JsonMap, Value};

use super::{decode_body, emit, tables, Fields, Pres, Ty, MAGIC};

/// Protobuf wire output.
#[derive(Default)]
struct Writer(Vec<u8>);

impl Writer {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn key(&mut self, num: u32, wire_type: u64) {
        self.varint((u64::from(num) << 3) | wire_type);
    }

    fn varint_field(&mut self, num: u32, v: u64) {
        self.key(num, 0);
        self.varint(v);
    }

    fn len_field(&mut self, num: u32, bytes: &[u8]) {
        self.key(num, 2);
        self.varint(bytes.len() as u64);
        self.0.extend_from_slice(bytes);
    }

    fn message(&mut self, num: u32, build: impl FnOnce(&mut Writer)) {
        let mut inner = Writer::default();
        build(&mut inner);
        self.len_field(num, &inner.0);
    }
}

fn as_str(value: &Value) -> &str {
    value.as_str().unwrap_or_else(|| panic!("expected a string, got {value}"))
}

fn as_array(value: &Value) -> &Vec<Value> {
    value.as_array().unwrap_or_else(|| panic!("expected an array, got {value}"))
}

fn as_object(value: &Value) -> &JsonMap<String, Value> {
    value.as_object().unwrap_or_else(|| panic!("expected an object, got {value}"))
}

/// A `k8s\0` body for a JSON object carrying `apiVersion` and `kind`, as client-go would send it.
pub(super) fn encode_body(object: &Value) -> Vec<u8> {
    let api_version = as_str(&object["apiVersion"]);
    let kind = as_str(&object["kind"]);
    let fields = tables::root(api_version, kind).unwrap_or_else(|| panic!("no descriptor for {api_version} {kind}"));
    let mut unknown = Writer::default();
    unknown.message(1, |type_meta| {
        type_meta.len_field(1, api_version.as_bytes());
        type_meta.len_field(2, kind.as_bytes());
    });
    unknown.len_field(2, &encode_message(as_object(object), fields));
    [MAGIC, &unknown.0].concat()
}

/// Encodes a JSON object as the message `fields`: the inverse of `decode_message`. Absent and
/// `null` fields are left off the wire.
fn encode_message(object: &JsonMap<String, Value>, fields: Fields) -> Vec<u8> {
    let mut w = Writer::default();
    for field in fields {
        if field.pres == Pres::Inline {
            let Ty::Msg(&inner) = field.ty else { panic!("inline field {} is not a message", field.name) };
            w.len_field(field.num, &encode_message(object, inner));
            continue;
        }
        if let Some(value) = object.get(field.name).filter(|v| !v.is_null()) {
            put(&mut w, field.num, field.ty, value);
        }
    }
    w.0
}

/// Writes one field (all occurrences of a repeated or map field).
fn put(w: &mut Writer, num: u32, ty: Ty, value: &Value) {
    match ty {
        Ty::Str => w.len_field(num, as_str(value).as_bytes()),
        Ty::Bytes => {
            let bytes = base64::engine::general_purpose::STANDARD.decode(as_str(value)).expect("base64");
            w.len_field(num, &bytes);
        }
        Ty::Bool => w.varint_field(num, u64::from(value.as_bool().expect("bool"))),
        // Negative int32s are sign-extended to ten bytes, as protobuf encoders do.
        Ty::I32 | Ty::I64 => w.varint_field(num, value.as_i64().expect("integer") as u64),
        Ty::F64 => {
            w.key(num, 1);
            w.0.extend_from_slice(&value.as_f64().expect("number").to_le_bytes());
        }
        Ty::Time | Ty::MicroTime => {
            let ts: jiff::Timestamp = as_str(value).parse().expect("RFC 3339 timestamp");
            w.message(num, |t| {
                t.varint_field(1, ts.as_second() as u64);
                if ts.subsec_nanosecond() != 0 {
                    t.varint_field(2, ts.subsec_nanosecond() as u64);
                }
            });
        }
        Ty::IntOrString => w.message(num, |v| match value {
            Value::String(s) => {
                v.varint_field(1, 1);
                v.len_field(3, s.as_bytes());
            }
            n => {
                v.varint_field(1, 0);
                v.varint_field(2, n.as_i64().expect("integer") as u64);
            }
        }),
        Ty::Quantity => w.message(num, |q| q.len_field(1, as_str(value).as_bytes())),
        Ty::Raw => w.message(num, |r| r.len_field(1, &serde_json::to_vec(value).expect("serializes"))),
        Ty::StrList => w.message(num, |l| as_array(value).iter().for_each(|s| l.len_field(1, as_str(s).as_bytes()))),
        Ty::Msg(&fields) => w.len_field(num, &encode_message(as_object(value), fields)),
        Ty::List(elem) => as_array(value).iter().for_each(|item| put(w, num, *elem, item)),
        Ty::Map(elem) => {
            for (key, item) in as_object(value) {
                w.message(num, |entry| {
                    entry.len_field(1, key.as_bytes());
                    if !item.is_null() {
                        put(entry, 2, *elem, item);
                    }
                });
            }
        }
        Ty::SchemaOrArray(&fields) => w.message(num, |u| match value {
            Value::Array(items) => items.iter().for_each(|s| u.len_field(2, &encode_message(as_object(s), fields))),
            schema => u.len_field(1, &encode_message(as_object(schema), fields)),
        }),
        Ty::SchemaOrBool(&fields) => w.message(num, |u| match value {
            Value::Bool(allows) => u.varint_field(1, u64::from(*allows)),
            schema => {
                u.varint_field(1, 1);
                u.len_field(2, &encode_message(as_object(schema), fields));
            }
        }),
        Ty::SchemaOrStrings(&fields) => w.message(num, |u| match value {
            Value::Array(items) => items.iter().for_each(|s| u.len_field(2, as_str(s).as_bytes())),
            schema => u.len_field(1, &encode_message(as_object(schema), fields)),
        }),
    }
}

/// How often a message may be nested in itself in a sample (apiextensions' `JSONSchemaProps`).
const MAX_NESTING: usize = 2;

/// The identity of a message descriptor.
fn id(fields: Fields) -> usize {
    fields.as_ptr() as usize
}

/// Builds sample objects with every field set to a non-zero value, recursively, and records
/// which `(message, field number)` it set.
#[derive(Default)]
struct Sampler {
    stack: Vec<usize>,
    set: BTreeSet<(usize, u32)>,
    /// Alternates the form of IntOrString and of the JSON-schema unions.
    flip: bool,
}

impl Sampler {
    fn object(&mut self, fields: Fields) -> JsonMap<String, Value> {
        self.stack.push(id(fields));
        let mut out = JsonMap::new();
        for field in fields {
            if field.pres == Pres::Inline {
                let Ty::Msg(&inner) = field.ty else { panic!("inline field {} is not a message", field.name) };
                out.extend(self.object(inner));
                self.set.insert((id(fields), field.num));
                continue;
            }
            match self.value(field.ty, field.name) {
                Some(value) => {
                    out.insert(field.name.to_owned(), value);
                    self.set.insert((id(fields), field.num));
                }
                // Too deep: what the decoder makes of the field's absence.
                None => emit(field, &[], &mut out, 0).expect("an absent field decodes"),
            }
        }
        self.stack.pop();
        out
    }

    fn too_deep(&self, fields: Fields) -> bool {
        self.stack.iter().filter(|&&m| m == id(fields)).count() >= MAX_NESTING
    }

    fn flip(&mut self) -> bool {
        self.flip = !self.flip;
        self.flip
    }

    /// A non-zero sample of the type, or `None` where it would nest a message too deep.
    fn value(&mut self, ty: Ty, name: &str) -> Option<Value> {
        Some(match ty {
            Ty::Str => Value::String(format!("{name}-1")),
            Ty::Bytes => Value::String("AAEC/w==".to_owned()),
            Ty::Bool => Value::Bool(true),
            Ty::I32 => json!(-7),
            Ty::I64 => json!(1_i64 << 40),
            Ty::F64 => json!(1.5),
            Ty::Time => json!("2026-11-29T21:00:00Z"),
            Ty::MicroTime => json!("2026-11-29T21:00:00.123456Z"),
            Ty::IntOrString => {
                if self.flip() {
                    json!(8080)
                } else {
                    json!("http")
                }
            }
            Ty::Quantity => json!("250m"),
            Ty::Raw => json!({"raw": [1, "two", {"three": null}]}),
            Ty::StrList => json!(["a", "b"]),
            Ty::Msg(&fields) => {
                if self.too_deep(fields) {
                    return None;
                }
                Value::Object(self.object(fields))
            }
            Ty::List(elem) => Value::Array(vec![self.value(*elem, name)?]),
            Ty::Map(elem) => json!({ "key-1": self.value(*elem, name)? }),
            Ty::SchemaOrArray(&fields) => {
                if self.too_deep(fields) {
                    return None;
                }
                let schema = Value::Object(self.object(fields));
                if self.flip() {
                    Value::Array(vec![schema])
                } else {
                    schema
                }
            }
            Ty::SchemaOrBool(&fields) => {
                if self.too_deep(fields) {
                    Value::Bool(true)
                } else {
                    Value::Object(self.object(fields))
                }
            }
            Ty::SchemaOrStrings(&fields) => {
                if self.too_deep(fields) {
                    json!(["a", "b"])
                } else {
                    Value::Object(self.object(fields))
                }
            }
        })
    }
}

/// Every message reachable from `ty`, with the path it was first reached by.
fn reachable(ty: Ty, path: &str, out: &mut BTreeMap<usize, (String, Fields)>) {
    match ty {
        Ty::Msg(&fields) | Ty::SchemaOrArray(&fields) | Ty::SchemaOrBool(&fields) | Ty::SchemaOrStrings(&fields) => {
            if out.contains_key(&id(fields)) {
                return;
            }
            out.insert(id(fields), (path.to_owned(), fields));
            for field in fields {
                reachable(field.ty, &format!("{path}.{}", field.name), out);
            }
        }
        Ty::List(elem) | Ty::Map(elem) => reachable(*elem, path, out),
        _ => {}
    }
}

/// `(apiVersion, kind)` of every kind the resource table serves: resources that are not custom,
/// and the kinds of their subresources.
fn served_kinds() -> BTreeSet<(String, String)> {
    let api_version = |group: &str, version: &str| {
        if group.is_empty() {
            version.to_owned()
        } else {
            format!("{group}/{version}")
        }
    };
    let mut kinds = BTreeSet::new();
    for resource in crate::resources::all().iter().filter(|r| r.custom.is_none()) {
        kinds.insert((resource.api_version(), resource.kind.to_owned()));
        for sub in &resource.subresources {
            kinds.insert((api_version(sub.group, sub.version), sub.kind.to_owned()));
        }
    }
    kinds
}

#[test]
fn every_kind_of_the_resource_table_has_a_protobuf_descriptor() {
    let missing: Vec<String> = served_kinds()
        .into_iter()
        .filter(|(version, kind)| !super::is_supported(version, kind))
        .map(|(version, kind)| format!("{version} {kind}"))
        .collect();
    // metrics.k8s.io is read-only (get, list): no body of it is ever decoded.
    for resource in crate::resources::all().iter().filter(|r| r.group == "metrics.k8s.io") {
        assert!(resource.verbs.iter().all(|v| matches!(*v, "get" | "list")), "{resource:?} takes bodies");
    }
    assert_eq!(
        missing,
        ["metrics.k8s.io/v1beta1 NodeMetrics", "metrics.k8s.io/v1beta1 PodMetrics"],
        "kinds without a protobuf descriptor: add their group-version to hack/gen-protobuf-tables.py and rerun it"
    );
}

#[test]
fn every_built_in_kind_round_trips_through_protobuf_with_every_field_set() {
    let mut kinds: BTreeSet<(String, String)> =
        served_kinds().into_iter().filter(|(version, kind)| super::is_supported(version, kind)).collect();
    for (version, kind, _) in tables::kinds() {
        let version = if version == "*" { "meta.k8s.io/v1" } else { version };
        kinds.insert((version.to_owned(), kind.to_owned()));
    }
    let mut sampler = Sampler::default();
    for (version, kind) in &kinds {
        let fields = tables::root(version, kind).expect("descriptor");
        let mut object = JsonMap::new();
        object.insert("kind".to_owned(), json!(kind));
        object.insert("apiVersion".to_owned(), json!(version));
        object.extend(sampler.object(fields));
        let sample = Value::Object(object);
        if let Some(metadata) = sample.get("metadata") {
            for key in ["name", "namespace", "labels", "annotations", "ownerReferences"] {
                assert!(metadata.get(key).is_some(), "{version} {kind}: sample metadata lacks {key}");
            }
        }

        let decoded = decode_body(&encode_body(&sample)).unwrap_or_else(|e| panic!("{version} {kind}: {e}"));
        assert_eq!(decoded, sample, "{version} {kind}");
        // `Value` equality ignores key order; the JSON text does not.
        let (got, want) =
            (serde_json::to_string(&decoded).expect("json"), serde_json::to_string(&sample).expect("json"));
        assert_eq!(got, want, "{version} {kind}: key order");
    }

    // Every field of every message reachable from a kind was set in some sample.
    let mut messages = BTreeMap::new();
    for (version, kind, fields) in tables::kinds() {
        reachable(Ty::Msg(fields), &format!("{version} {kind}"), &mut messages);
    }
    let unset: Vec<String> = messages
        .values()
        .flat_map(|(path, fields)| {
            fields
                .iter()
                .filter(|f| !sampler.set.contains(&(id(fields), f.num)))
                .map(move |f| format!("{path}.{}", f.name))
        })
        .collect();
    assert!(unset.is_empty(), "fields no sample set: {unset:?}");
    assert!(kinds.len() >= 70, "{} kinds", kinds.len());
}
