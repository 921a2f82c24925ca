//! Generates the protobuf message tables (`$OUT_DIR/protobuf_tables.rs`) from
//! `src/protobuf/messages.txt`, the one place the descriptors are written down (its header
//! gives the format). Checked here, so a slip fails the build with its line number: every
//! referenced message exists, every message is used, field numbers and JSON names are unique
//! within a message, types and presences are known.

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
    line: usize,
    body: Body,
}

enum Body {
    Fields(Vec<Field>),
    SameAs(String),
}

const SCALARS: &[(&str, &str)] = &[
    ("string", "Str"),
    ("bytes", "Bytes"),
    ("bool", "Bool"),
    ("int32", "I32"),
    ("int64", "I64"),
    ("Time", "Time"),
    ("MicroTime", "MicroTime"),
    ("IntOrString", "IntOrString"),
    ("Quantity", "Quantity"),
    ("Raw", "Raw"),
    ("StrList", "StrList"),
];

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
    if is_message_name(ty) {
        refs.push(ty.to_owned());
        return Ok(format!("Msg({ty})"));
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
            let Body::Fields(fields) = &mut msg.body else {
                return Err(err(format!("{name} takes its fields from another message")));
            };
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
            ["message", name, proto, ref rest @ ..] => {
                if !is_message_name(name) {
                    return Err(err(format!("message name {name:?} is not UPPER_SNAKE")));
                }
                let body = match rest {
                    [] => Body::Fields(Vec::new()),
                    ["=", other] => Body::SameAs((*other).to_owned()),
                    _ => return Err(err(format!("expected `message NAME proto.Name [= OTHER]`, got {content:?}"))),
                };
                let msg = Message { proto: proto.to_owned(), line, body };
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
    out.push_str("const KINDS: &[(&str, &str, Fields)] = &[\n");
    for (version, kind, message) in &kinds {
        if !messages.contains_key(message) {
            return Err(format!("kind {version} {kind}: no message {message}"));
        }
        used.insert(message);
        let _ = writeln!(out, "    ({version:?}, {kind:?}, {message}),");
    }
    out.push_str("];\n");
    for (name, msg) in &messages {
        let _ = write!(out, "\n/// `{}`\nconst {name}: Fields = ", msg.proto);
        match &msg.body {
            Body::SameAs(other) => {
                if !matches!(messages.get(other.as_str()), Some(Message { body: Body::Fields(_), .. })) {
                    return Err(format!("message {name} (line {}): no message {other} with fields", msg.line));
                }
                used.insert(other);
                let _ = writeln!(out, "{other};");
            }
            Body::Fields(fields) => {
                out.push_str("&[\n");
                for f in fields {
                    let mut refs = Vec::new();
                    let ty =
                        rust_type(&f.ty, &mut refs).map_err(|e| format!("message {name}: field {}: {e}", f.num))?;
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
        }
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
