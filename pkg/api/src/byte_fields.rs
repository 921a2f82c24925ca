//! `[]byte` fields (OpenAPI `format: byte`) as upstream decodes them: Go's `encoding/json`
//! reads a base64 string with `base64.StdEncoding`, which skips `\r` and `\n` (so a value
//! wrapped over several lines, as in a YAML block scalar, is accepted), requires padding and
//! ignores non-zero trailing bits; the object is then encoded again as plain base64. Kinds have
//! few such fields, found once per kind from its schema ([`paths`]).

use base64::Engine as _;
use serde_json::Value;

/// Go's `base64.CorruptInputError`: the offset in the input of the first byte that cannot be
/// decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("illegal base64 data at input byte {0}")]
pub struct CorruptInput(pub usize);

const PAD: u8 = b'=';

fn sextet(b: u8) -> Option<u8> {
    match b {
        b'A'..=b'Z' => Some(b - b'A'),
        b'a'..=b'z' => Some(b - b'a' + 26),
        b'0'..=b'9' => Some(b - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}

fn is_newline(b: u8) -> bool {
    b == b'\n' || b == b'\r'
}

/// Decodes `src` as Go's `base64.StdEncoding.DecodeString` does, with its error offsets.
pub fn decode_std(src: &[u8]) -> Result<Vec<u8>, CorruptInput> {
    let mut out = Vec::with_capacity(src.len() / 4 * 3);
    let mut si = 0;
    loop {
        // One quantum of up to four symbols (newlines skipped).
        let mut buf = [0u8; 4];
        let mut len = 4;
        let mut j = 0;
        let mut done = false;
        while j < 4 {
            if si == src.len() {
                if j == 0 {
                    return Ok(out);
                }
                // Padding is required: a partial quantum at the end is corrupt.
                return Err(CorruptInput(si - j));
            }
            let b = src[si];
            si += 1;
            if let Some(v) = sextet(b) {
                buf[j] = v;
                j += 1;
                continue;
            }
            if is_newline(b) {
                continue;
            }
            if b != PAD {
                return Err(CorruptInput(si - 1));
            }
            // Padding: only after two or three symbols, and "==" after two.
            match j {
                0 | 1 => return Err(CorruptInput(si - 1)),
                2 => {
                    while si < src.len() && is_newline(src[si]) {
                        si += 1;
                    }
                    if si == src.len() {
                        return Err(CorruptInput(src.len()));
                    }
                    if src[si] != PAD {
                        return Err(CorruptInput(si - 1));
                    }
                    si += 1;
                }
                _ => {}
            }
            while si < src.len() && is_newline(src[si]) {
                si += 1;
            }
            if si < src.len() {
                // Trailing garbage after the padding.
                return Err(CorruptInput(si));
            }
            len = j;
            done = true;
            break;
        }
        let val = u32::from(buf[0]) << 18 | u32::from(buf[1]) << 12 | u32::from(buf[2]) << 6 | u32::from(buf[3]);
        let bytes = [(val >> 16) as u8, (val >> 8) as u8, val as u8];
        out.extend_from_slice(&bytes[..len - 1]);
        if done {
            return Ok(out);
        }
    }
}

/// One step of a path to a `[]byte` field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A named property.
    Field(String),
    /// Every value of a map (`additionalProperties`).
    Values,
    /// Every item of an array.
    Items,
}

/// A path from an object's root to a `[]byte` field.
pub type BytePath = Vec<Step>;

/// The paths of the `format: byte` fields under `schema`, resolving references with `lookup`.
/// Recursive schemas are followed once per path.
pub fn paths(schema: &Value, lookup: &dyn crate::strategic::SchemaLookup) -> Vec<BytePath> {
    let mut out = Vec::new();
    let mut seen = Vec::new();
    walk(schema, lookup, &mut Vec::new(), &mut seen, &mut out);
    out
}

fn walk<'a>(
    schema: &'a Value,
    lookup: &'a dyn crate::strategic::SchemaLookup,
    path: &mut BytePath,
    seen: &mut Vec<*const Value>,
    out: &mut Vec<BytePath>,
) {
    let schema = lookup.resolve(schema);
    let id: *const Value = schema;
    if seen.contains(&id) || path.len() > 32 {
        return;
    }
    if schema.get("format").and_then(Value::as_str) == Some("byte") {
        out.push(path.clone());
        return;
    }
    seen.push(id);
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, sub) in props {
            path.push(Step::Field(name.clone()));
            walk(sub, lookup, path, seen, out);
            path.pop();
        }
    }
    if let Some(sub) = schema.get("additionalProperties").filter(|v| v.is_object()) {
        path.push(Step::Values);
        walk(sub, lookup, path, seen, out);
        path.pop();
    }
    if let Some(sub) = schema.get("items") {
        path.push(Step::Items);
        walk(sub, lookup, path, seen, out);
        path.pop();
    }
    seen.pop();
}

/// Why a `[]byte` field could not be read: its dotted path and Go's decoder error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadBytes {
    pub field: String,
    pub error: CorruptInput,
}

/// Decodes every `[]byte` field of `obj` at `paths` as upstream does and writes it back as
/// plain base64 (one line, padded): `"YWJj\nZA=="` becomes `"YWJjZA=="`.
pub fn canonicalize(obj: &mut Value, paths: &[BytePath]) -> Result<(), BadBytes> {
    for p in paths {
        visit(obj, p, &mut String::new())?;
    }
    Ok(())
}

fn visit(v: &mut Value, path: &[Step], at: &mut String) -> Result<(), BadBytes> {
    let Some((step, rest)) = path.split_first() else {
        if let Value::String(s) = v {
            let bytes = decode_std(s.as_bytes()).map_err(|error| BadBytes { field: at.clone(), error })?;
            let canonical = base64::engine::general_purpose::STANDARD.encode(bytes);
            if *s != canonical {
                *s = canonical;
            }
        }
        return Ok(());
    };
    let len = at.len();
    match (step, v) {
        (Step::Field(name), Value::Object(m)) => {
            if let Some(sub) = m.get_mut(name) {
                if !at.is_empty() {
                    at.push('.');
                }
                at.push_str(name);
                visit(sub, rest, at)?;
            }
        }
        (Step::Values, Value::Object(m)) => {
            for (k, sub) in m.iter_mut() {
                at.push_str(&format!("[{k}]"));
                visit(sub, rest, at)?;
                at.truncate(len);
            }
        }
        (Step::Items, Value::Array(a)) => {
            for (i, sub) in a.iter_mut().enumerate() {
                at.push_str(&format!("[{i}]"));
                visit(sub, rest, at)?;
                at.truncate(len);
            }
        }
        _ => {}
    }
    at.truncate(len);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decodes_as_gos_std_encoding() {
        assert_eq!(decode_std(b"").as_deref(), Ok(&b""[..]));
        assert_eq!(decode_std(b"YWJj").as_deref(), Ok(&b"abc"[..]));
        assert_eq!(decode_std(b"YWJjZA==").as_deref(), Ok(&b"abcd"[..]));
        assert_eq!(decode_std(b"YWJjZGU=").as_deref(), Ok(&b"abcde"[..]));
        // Newlines anywhere are skipped, padding included.
        assert_eq!(decode_std(b"YW\nJj\r\nZA=\n=\n").as_deref(), Ok(&b"abcd"[..]));
        // Non-zero trailing bits are ignored (StdEncoding is not strict).
        assert_eq!(decode_std(b"YR==").as_deref(), Ok(&b"a"[..]));
        // Go's error offsets.
        assert_eq!(decode_std(b"YWJ"), Err(CorruptInput(0)));
        assert_eq!(decode_std(b"YWJjZ"), Err(CorruptInput(4)));
        assert_eq!(decode_std(b"YW!j"), Err(CorruptInput(2)));
        assert_eq!(decode_std(b"Y==="), Err(CorruptInput(1)));
        assert_eq!(decode_std(b"YQ="), Err(CorruptInput(3)));
        assert_eq!(decode_std(b"YQ=x"), Err(CorruptInput(2)));
        assert_eq!(decode_std(b"YQ==YQ=="), Err(CorruptInput(4)));
        assert_eq!(decode_std(b"YWJj YQ=="), Err(CorruptInput(4)));
    }

    #[test]
    fn canonicalizes_every_value_at_the_paths_and_names_a_bad_one() {
        let paths = vec![
            vec![Step::Field("data".into()), Step::Values],
            vec![Step::Field("webhooks".into()), Step::Items, Step::Field("caBundle".into())],
        ];
        let mut obj = json!({"data": {"a": "YWJj\nZA==", "b": "YR=="}, "webhooks": [{"caBundle": "YW\r\nJj"}],
                             "other": "not\nbase64"});
        canonicalize(&mut obj, &paths).expect("valid");
        assert_eq!(
            obj,
            json!({"data": {"a": "YWJjZA==", "b": "YQ=="}, "webhooks": [{"caBundle": "YWJj"}],
                                "other": "not\nbase64"})
        );
        let mut bad = json!({"webhooks": [{"caBundle": "YWJj"}, {"caBundle": "YW!j"}]});
        let e = canonicalize(&mut bad, &paths).expect_err("invalid");
        assert_eq!(e, BadBytes { field: "webhooks[1].caBundle".into(), error: CorruptInput(2) });
        assert_eq!(e.error.to_string(), "illegal base64 data at input byte 2");
    }
}
