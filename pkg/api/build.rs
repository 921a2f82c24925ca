//! Generates the protobuf message tables (`$OUT_DIR/protobuf_tables.rs`) from
//! `src/protobuf/messages.txt` (written by `hack/gen-protobuf-tables.py` from upstream's
//! `generated.proto` and Go types; its header gives the format). Checked here, so a slip fails
//! the build with its line number: every referenced message exists, every message is used, field
//! numbers and JSON names are unique within a message, types and presences are known.
//!
//! Each message becomes a `static` and references one by address (`Msg(&NAME)`), so messages may
//! refer to themselves (apiextensions' `JSONSchemaProps` does).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::PathBuf;

struct Field {
    num: u32,
    name: String,
    ty: String,
    pres: &'static str,
}

struct Message {
    proto: String,
    fields: Vec<Field>,
}

const SCALARS: &[(&str, &str)] = &[
    ("string", "Str"),
    ("bytes", "Bytes"),
    ("bool", "Bool"),
    ("int32", "I32"),
    ("int64", "I64"),
    ("double", "F64"),
    ("Time", "Time"),
    ("MicroTime", "MicroTime"),
    ("IntOrString", "IntOrString"),
    ("Quantity", "Quantity"),
    ("Raw", "Raw"),
    ("StrList", "StrList"),
];

/// Types applied to a message: `Wrapper[MESSAGE]` becomes `Wrapper(&MESSAGE)`.
const WRAPPERS: &[&str] = &["SchemaOrArray", "SchemaOrBool", "SchemaOrStrings"];

const PRESENCES: &[(&str, &str)] =
    &[("val", "Val"), ("omit", "Omit"), ("ptr", "Ptr"), ("null", "Null"), ("inline", "Inline")];

fn is_message_name(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// The Rust `Ty` expression for a schema type; message names it references go to `refs`.
fn rust_type(ty: &str, refs: &mut Vec<String>) -> Result<String, String> {
    if let Some(inner) = ty.strip_prefix("[]") {
        return Ok(format!("List(&{})", rust_type(inner, refs)?));
    }
    if let Some(inner) = ty.strip_prefix("map[").and_then(|t| t.strip_suffix(']')) {
        return Ok(format!("Map(&{})", rust_type(inner, refs)?));
    }
    if let Some((_, rust)) = SCALARS.iter().find(|(s, _)| *s == ty) {
        return Ok((*rust).to_owned());
    }
    for wrapper in WRAPPERS {
        if let Some(inner) =
            ty.strip_prefix(wrapper).and_then(|t| t.strip_prefix('[')).and_then(|t| t.strip_suffix(']'))
        {
            if !is_message_name(inner) {
                return Err(format!("{wrapper} of {inner:?}, which is not a message"));
            }
            refs.push(inner.to_owned());
            return Ok(format!("{wrapper}(&{inner})"));
        }
    }
    if is_message_name(ty) {
        refs.push(ty.to_owned());
        return Ok(format!("Msg(&{ty})"));
    }
    Err(format!("unknown type {ty:?}"))
}

/// `(apiVersion, kind, root message)` of each `kind` line.
type Kinds = Vec<(String, String, String)>;

fn parse(text: &str) -> Result<(Kinds, BTreeMap<String, Message>), String> {
    let mut kinds = Vec::new();
    let mut messages: BTreeMap<String, Message> = BTreeMap::new();
    let mut current: Option<String> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let err = |m: String| format!("src/protobuf/messages.txt:{line}: {m}");
        let content = raw.split('#').next().unwrap_or("").trim_end();
        if content.trim().is_empty() {
            continue;
        }
        let words: Vec<&str> = content.split_whitespace().collect();
        if raw.starts_with(' ') {
            let Some(name) = &current else { return Err(err("a field outside a message".into())) };
            let Some(msg) = messages.get_mut(name) else { return Err(err("no message".into())) };
            let fields = &mut msg.fields;
            let [num, json, ty, pres] = words[..] else {
                return Err(err(format!("expected `<number> <json name> <type> <presence>`, got {content:?}")));
            };
            let num: u32 = num.parse().map_err(|_| err(format!("field number {num:?}")))?;
            let pres = PRESENCES
                .iter()
                .find(|(p, _)| *p == pres)
                .map(|(_, r)| *r)
                .ok_or_else(|| err(format!("unknown presence {pres:?}")))?;
            let name = if json == "-" { String::new() } else { json.to_owned() };
            if (pres == "Inline") != name.is_empty() {
                return Err(err("an inline field, and only it, is named `-`".into()));
            }
            if fields.iter().any(|f| f.num == num) {
                return Err(err(format!("field number {num} twice")));
            }
            if !name.is_empty() && fields.iter().any(|f| f.name == name) {
                return Err(err(format!("JSON name {name:?} twice")));
            }
            fields.push(Field { num, name, ty: ty.to_owned(), pres });
            continue;
        }
        match words[..] {
            ["kind", version, kind, message] => {
                kinds.push((version.to_owned(), kind.to_owned(), message.to_owned()));
                current = None;
            }
            ["message", name, proto] => {
                if !is_message_name(name) {
                    return Err(err(format!("message name {name:?} is not UPPER_SNAKE")));
                }
                let msg = Message { proto: proto.to_owned(), fields: Vec::new() };
                if messages.insert(name.to_owned(), msg).is_some() {
                    return Err(err(format!("message {name} twice")));
                }
                current = Some(name.to_owned());
            }
            _ => return Err(err(format!("expected a `kind`, `message` or indented field line, got {content:?}"))),
        }
    }
    Ok((kinds, messages))
}

fn generate(text: &str) -> Result<String, String> {
    let (kinds, messages) = parse(text)?;
    let mut used: BTreeSet<&str> = BTreeSet::new();
    let mut out = String::from("// Generated by pkg/api/build.rs from src/protobuf/messages.txt. Do not edit.\n\n");
    out.push_str("/// The root message of each supported `(apiVersion, kind)`; `*` stands for any apiVersion.\n");
    out.push_str("static KINDS: &[(&str, &str, &Fields)] = &[\n");
    for (version, kind, message) in &kinds {
        if !messages.contains_key(message) {
            return Err(format!("kind {version} {kind}: no message {message}"));
        }
        used.insert(message);
        let _ = writeln!(out, "    ({version:?}, {kind:?}, &{message}),");
    }
    out.push_str("];\n");
    for (name, msg) in &messages {
        let _ = writeln!(out, "\n/// `{}`\nstatic {name}: Fields = &[", msg.proto);
        for f in &msg.fields {
            let mut refs = Vec::new();
            let ty = rust_type(&f.ty, &mut refs).map_err(|e| format!("message {name}: field {}: {e}", f.num))?;
            for r in refs {
                let Some((known, _)) = messages.get_key_value(r.as_str()) else {
                    return Err(format!("message {name}: field {}: no message {r}", f.num));
                };
                used.insert(known);
            }
            let _ = writeln!(out, "    f({}, {:?}, {ty}, {}),", f.num, f.name, f.pres);
        }
        out.push_str("];\n");
    }
    let unused: Vec<&str> = messages.keys().map(String::as_str).filter(|m| !used.contains(m)).collect();
    if !unused.is_empty() {
        return Err(format!("messages nothing refers to: {}", unused.join(", ")));
    }
    Ok(out)
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let schema = manifest.join("src/protobuf/messages.txt");
    println!("cargo:rerun-if-changed={}", schema.display());
    println!("cargo:rerun-if-changed=build.rs");
    let text = std::fs::read_to_string(&schema).unwrap_or_else(|e| panic!("reading {}: {e}", schema.display()));
    let code = generate(&text).unwrap_or_else(|e| panic!("{e}"));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("protobuf_tables.rs");
    std::fs::write(&out, code).unwrap_or_else(|e| panic!("writing {}: {e}", out.display()));
}
