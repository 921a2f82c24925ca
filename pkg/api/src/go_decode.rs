//! Why a JSON object does not fit its kind's Go types, worded as upstream words it. Upstream
//! decodes a body with Go's `encoding/json` (`json: cannot unmarshal string into Go struct
//! field ObjectMeta.metadata.labels of type map[string]string`) and a strategic-merge-patched
//! object with apimachinery's unstructured converter (`cannot restore map from string`); k1s
//! decodes with serde, whose messages differ, so the first mismatch is found again here by
//! walking the object against the kind's OpenAPI schema.

use crate::strategic::SchemaLookup;
use serde_json::Value;

/// What a field's Go type is, as far as decoding cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GoType {
    /// A named struct (`v1.PodSpec`).
    Struct(String),
    /// `map[string]V`.
    Map(Box<GoType>),
    /// `[]V`.
    Slice(Box<GoType>),
    /// `string`, `bool`, `int32`, `int64`, `float64`.
    Scalar(&'static str),
}

impl std::fmt::Display for GoType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GoType::Struct(name) => f.write_str(name),
            GoType::Map(v) => write!(f, "map[string]{v}"),
            GoType::Slice(v) => write!(f, "[]{v}"),
            GoType::Scalar(s) => f.write_str(s),
        }
    }
}

/// The first value of an object that its Go type cannot hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// The innermost struct holding the field (`ObjectMeta`), empty at the root.
    pub struct_name: String,
    /// The JSON names from the root to the field, dotted (`metadata.labels`).
    pub field: String,
    /// What the field is in Go.
    pub go_type: GoType,
    /// The value found.
    pub value: Value,
}

impl Mismatch {
    /// Go's `encoding/json` error (`json: cannot unmarshal string into Go struct field
    /// ObjectMeta.metadata.labels of type map[string]string`).
    pub fn json_message(&self) -> String {
        let what = match &self.value {
            Value::String(_) => "string".to_string(),
            Value::Bool(_) => "bool".to_string(),
            Value::Array(_) => "array".to_string(),
            Value::Object(_) => "object".to_string(),
            Value::Null => "null".to_string(),
            // A number only misfits a number field when it is fractional or too large.
            Value::Number(n) if matches!(self.go_type, GoType::Scalar("int32" | "int64")) => format!("number {n}"),
            Value::Number(_) => "number".to_string(),
        };
        if self.struct_name.is_empty() {
            format!("json: cannot unmarshal {what} into Go value of type {}", self.go_type)
        } else {
            format!(
                "json: cannot unmarshal {what} into Go struct field {}.{} of type {}",
                self.struct_name, self.field, self.go_type
            )
        }
    }

    /// apimachinery's `FromUnstructured` error (`cannot restore map from string`).
    pub fn unstructured_message(&self) -> String {
        let kind = unstructured_kind(&self.value);
        match &self.go_type {
            GoType::Map(_) => format!("cannot restore map from {kind}"),
            GoType::Slice(_) => format!("cannot restore slice from {kind}"),
            GoType::Struct(_) => format!("cannot restore struct from: {kind}"),
            GoType::Scalar(t) => format!("cannot convert {} to {t}", unstructured_type(&self.value)),
        }
    }
}

/// The reflect kind of a value in Go's unstructured form (ints are int64, others float64).
fn unstructured_kind(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "string",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_i64() || n.is_u64() => "int64",
        Value::Number(_) => "float64",
        Value::Array(_) => "slice",
        Value::Object(_) => "map",
        Value::Null => "invalid",
    }
}

/// The Go type of a value in unstructured form.
fn unstructured_type(v: &Value) -> &'static str {
    match v {
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
        other => unstructured_kind(other),
    }
}

/// How a schema decodes: one of the shapes above, or anything (a union, raw JSON, an int-or-string,
/// a time: their own decoders have their own words, not checked here).
enum Shape<'a> {
    Struct(String, &'a Value),
    Map(&'a Value),
    Slice(&'a Value),
    Scalar(&'static str),
    Any,
}

/// The `$ref` a schema names directly or through `allOf: [{$ref}]`.
fn reference(schema: &Value) -> Option<&str> {
    schema
        .get("$ref")
        .or_else(|| schema.get("allOf").and_then(|a| a.get(0)).and_then(|f| f.get("$ref")))
        .and_then(Value::as_str)
}

/// `v1.PodSpec` for `#/components/schemas/io.k8s.api.core.v1.PodSpec`.
fn go_struct_name(reference: &str) -> String {
    let name = reference.rsplit('/').next().unwrap_or(reference);
    let mut parts = name.rsplit('.');
    let ty = parts.next().unwrap_or(name);
    match parts.next() {
        Some(pkg) => format!("{pkg}.{ty}"),
        None => ty.to_string(),
    }
}

fn shape<'a>(schema: &'a Value, lookup: &'a dyn SchemaLookup) -> Shape<'a> {
    let named = reference(schema);
    let s = lookup.resolve(schema);
    if s.get("oneOf").is_some()
        || s.get("anyOf").is_some()
        || s.get("x-kubernetes-int-or-string").is_some()
        || s.get("x-kubernetes-preserve-unknown-fields").is_some()
        || s.get("format").and_then(Value::as_str).is_some_and(|f| matches!(f, "date-time" | "byte" | "int-or-string"))
    {
        return Shape::Any;
    }
    if s.get("properties").is_some() {
        return Shape::Struct(named.map(go_struct_name).unwrap_or_default(), s);
    }
    match s.get("type").and_then(Value::as_str) {
        Some("object") => match s.get("additionalProperties") {
            Some(v) if v.is_object() => Shape::Map(v),
            _ => Shape::Any,
        },
        Some("array") => s.get("items").map_or(Shape::Any, Shape::Slice),
        Some("string") => Shape::Scalar("string"),
        Some("boolean") => Shape::Scalar("bool"),
        Some("integer") => {
            Shape::Scalar(if s.get("format").and_then(Value::as_str) == Some("int32") { "int32" } else { "int64" })
        }
        Some("number") => Shape::Scalar("float64"),
        _ => Shape::Any,
    }
}

fn go_type(schema: &Value, lookup: &dyn SchemaLookup) -> Option<GoType> {
    Some(match shape(schema, lookup) {
        Shape::Struct(name, _) => GoType::Struct(name),
        Shape::Map(v) => GoType::Map(Box::new(go_type(v, lookup)?)),
        Shape::Slice(v) => GoType::Slice(Box::new(go_type(v, lookup)?)),
        Shape::Scalar(s) => GoType::Scalar(s),
        Shape::Any => return None,
    })
}

/// Whether Go's decoding puts `v` into a scalar of type `ty`.
fn scalar_fits(v: &Value, ty: &str) -> bool {
    match (ty, v) {
        (_, Value::Null) => true,
        ("string", Value::String(_)) | ("bool", Value::Bool(_)) | ("float64", Value::Number(_)) => true,
        ("int32", Value::Number(n)) => n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()),
        ("int64", Value::Number(n)) => n.as_i64().is_some(),
        _ => false,
    }
}

/// The first value of `obj` its kind's Go types cannot hold, in the schema's field order.
/// `schema` is the kind's root schema, named `root` (`v1.Pod`).
pub fn first_mismatch(obj: &Value, schema: &Value, root: &str, lookup: &dyn SchemaLookup) -> Option<Mismatch> {
    let mut at = Walk { lookup, struct_name: String::new(), path: Vec::new(), depth: 0 };
    at.visit(obj, schema, Some(root))
}

struct Walk<'a> {
    lookup: &'a dyn SchemaLookup,
    struct_name: String,
    path: Vec<String>,
    depth: usize,
}

impl Walk<'_> {
    fn mismatch(&self, go_type: GoType, value: &Value) -> Mismatch {
        Mismatch { struct_name: self.struct_name.clone(), field: self.path.join("."), go_type, value: value.clone() }
    }

    fn visit(&mut self, v: &Value, schema: &Value, root: Option<&str>) -> Option<Mismatch> {
        if v.is_null() || self.depth > 64 {
            return None;
        }
        self.depth += 1;
        let found = self.visit_shape(v, schema, root);
        self.depth -= 1;
        found
    }

    fn visit_shape(&mut self, v: &Value, schema: &Value, root: Option<&str>) -> Option<Mismatch> {
        match shape(schema, self.lookup) {
            Shape::Any => None,
            Shape::Scalar(t) => (!scalar_fits(v, t)).then(|| self.mismatch(GoType::Scalar(t), v)),
            Shape::Map(item) => {
                let Value::Object(m) = v else {
                    return go_type(schema, self.lookup).map(|t| self.mismatch(t, v));
                };
                m.values().find_map(|x| self.visit(x, item, None))
            }
            Shape::Slice(item) => {
                let Value::Array(a) = v else {
                    return go_type(schema, self.lookup).map(|t| self.mismatch(t, v));
                };
                a.iter().find_map(|x| self.visit(x, item, None))
            }
            Shape::Struct(name, s) => {
                let name = if name.is_empty() { root.unwrap_or_default().to_string() } else { name };
                let Value::Object(m) = v else { return Some(self.mismatch(GoType::Struct(name), v)) };
                let short = name.rsplit('.').next().unwrap_or(&name).to_string();
                let props = s.get("properties").and_then(Value::as_object)?;
                for (field, sub) in props {
                    let Some(x) = m.get(field) else { continue };
                    let outer = std::mem::replace(&mut self.struct_name, short.clone());
                    self.path.push(field.clone());
                    let found = self.visit(x, sub, None);
                    self.path.pop();
                    self.struct_name = outer;
                    if found.is_some() {
                        return found;
                    }
                }
                None
            }
        }
    }
}

/// Go's `%+v` of a value decoded into `map[string]interface{}` (keys sorted, ints kept):
/// `map[metadata:map[labels:invalid]]`, as upstream quotes a strategic merge patch.
pub fn go_format(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if !(n.is_i64() || n.is_u64()) => go_float(f),
            _ => n.to_string(),
        },
        Value::String(s) => s.clone(),
        Value::Array(a) => format!("[{}]", a.iter().map(go_format).collect::<Vec<_>>().join(" ")),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let items: Vec<String> = keys.iter().map(|k| format!("{k}:{}", go_format(&m[*k]))).collect();
            format!("map[{}]", items.join(" "))
        }
    }
}

/// Go's `%v` of a float64 (`%g` with the shortest representation).
fn go_float(f: f64) -> String {
    let exp = if f == 0.0 { 0 } else { f.abs().log10().floor() as i32 };
    if (-4..21).contains(&exp) {
        format!("{f}")
    } else {
        let s = format!("{f:e}");
        match s.split_once('e') {
            Some((m, e)) => {
                let e: i32 = e.parse().unwrap_or(0);
                format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
            }
            None => s,
        }
    }
}

/// Go's `json.Unmarshal` syntax error for `data`, or `None` when it is valid JSON: the words of
/// Go's scanner (`invalid character 'a' looking for beginning of value`, `unexpected end of
/// JSON input`), which upstream puts in its decode errors.
pub fn json_syntax_error(data: &[u8]) -> Option<String> {
    Scanner::default().check(data).err()
}

/// Go's `quoteChar`.
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => r"'\''".into(),
        b'"' => "'\"'".into(),
        _ => {
            let q = Value::String(char::from(c).to_string()).to_string();
            let inner = &q[1..q.len() - 1];
            // JSON escapes control characters as \u00XX; Go's strconv.Quote as \xXX or \n.
            let inner = match inner.strip_prefix("\\u00") {
                Some(hex) => format!("\\x{}", hex.to_lowercase()),
                None => inner.to_string(),
            };
            format!("'{inner}'")
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Step {
    BeginValue,
    BeginValueOrEmpty,
    BeginStringOrEmpty,
    BeginString,
    ObjectKey,
    ObjectValue,
    ArrayValue,
    InString,
    InStringEsc,
    InStringEscU(u8),
    Neg,
    Zero,
    Digits,
    Dot,
    DotDigits,
    E,
    ESign,
    EDigits,
    Literal(&'static [u8], usize),
    End,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Parse {
    ObjectKey,
    ObjectValue,
    Array,
}

#[derive(Default)]
struct Scanner {
    stack: Vec<Parse>,
}

impl Scanner {
    fn check(&mut self, data: &[u8]) -> Result<(), String> {
        let mut step = Step::BeginValue;
        for &c in data {
            step = self.step(step, c)?;
        }
        // The value may still be a number waiting for its end.
        match step {
            Step::End => Ok(()),
            Step::Zero | Step::Digits | Step::DotDigits | Step::EDigits if self.stack.is_empty() => Ok(()),
            _ => Err("unexpected end of JSON input".into()),
        }
    }

    fn err(c: u8, context: &str) -> Result<Step, String> {
        Err(format!("invalid character {} {context}", quote_char(c)))
    }

    fn is_space(c: u8) -> bool {
        matches!(c, b' ' | b'\t' | b'\r' | b'\n')
    }

    /// The step after a value ends.
    fn end_value(&mut self, c: u8) -> Result<Step, String> {
        let next = self.after_scalar();
        self.step(next, c)
    }

    fn begin_value(&mut self, c: u8) -> Result<Step, String> {
        Ok(match c {
            b'{' => {
                self.stack.push(Parse::ObjectKey);
                Step::BeginStringOrEmpty
            }
            b'[' => {
                self.stack.push(Parse::Array);
                Step::BeginValueOrEmpty
            }
            b'"' => Step::InString,
            b'-' => Step::Neg,
            b'0' => Step::Zero,
            b'1'..=b'9' => Step::Digits,
            b't' => Step::Literal(b"true", 1),
            b'f' => Step::Literal(b"false", 1),
            b'n' => Step::Literal(b"null", 1),
            _ => return Self::err(c, "looking for beginning of value"),
        })
    }

    fn step(&mut self, step: Step, c: u8) -> Result<Step, String> {
        match step {
            Step::BeginValue | Step::BeginValueOrEmpty => {
                if Self::is_space(c) {
                    return Ok(step);
                }
                if step == Step::BeginValueOrEmpty && c == b']' {
                    self.stack.pop();
                    return self.after_close();
                }
                self.begin_value(c)
            }
            Step::BeginStringOrEmpty | Step::BeginString => {
                if Self::is_space(c) {
                    return Ok(step);
                }
                if step == Step::BeginStringOrEmpty && c == b'}' {
                    self.stack.pop();
                    return self.after_close();
                }
                if c == b'"' {
                    return Ok(Step::InString);
                }
                Self::err(c, "looking for beginning of object key string")
            }
            Step::ObjectKey => match c {
                _ if Self::is_space(c) => Ok(step),
                b':' => {
                    if let Some(top) = self.stack.last_mut() {
                        *top = Parse::ObjectValue;
                    }
                    Ok(Step::BeginValue)
                }
                _ => Self::err(c, "after object key"),
            },
            Step::ObjectValue => match c {
                _ if Self::is_space(c) => Ok(step),
                b',' => {
                    if let Some(top) = self.stack.last_mut() {
                        *top = Parse::ObjectKey;
                    }
                    Ok(Step::BeginString)
                }
                b'}' => {
                    self.stack.pop();
                    self.after_close()
                }
                _ => Self::err(c, "after object key:value pair"),
            },
            Step::ArrayValue => match c {
                _ if Self::is_space(c) => Ok(step),
                b',' => Ok(Step::BeginValue),
                b']' => {
                    self.stack.pop();
                    self.after_close()
                }
                _ => Self::err(c, "after array element"),
            },
            Step::End => {
                if Self::is_space(c) {
                    Ok(step)
                } else {
                    Self::err(c, "after top-level value")
                }
            }
            Step::InString => match c {
                b'"' => Ok(self.after_scalar()),
                b'\\' => Ok(Step::InStringEsc),
                0..0x20 => Self::err(c, "in string literal"),
                _ => Ok(step),
            },
            Step::InStringEsc => match c {
                b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => Ok(Step::InString),
                b'u' => Ok(Step::InStringEscU(0)),
                _ => Self::err(c, "in string escape code"),
            },
            Step::InStringEscU(n) => {
                if !c.is_ascii_hexdigit() {
                    return Self::err(c, "in \\u hexadecimal character escape");
                }
                Ok(if n == 3 { Step::InString } else { Step::InStringEscU(n + 1) })
            }
            Step::Neg => match c {
                b'0' => Ok(Step::Zero),
                b'1'..=b'9' => Ok(Step::Digits),
                _ => Self::err(c, "in numeric literal"),
            },
            Step::Zero | Step::Digits => match c {
                b'0'..=b'9' if step == Step::Digits => Ok(step),
                b'.' => Ok(Step::Dot),
                b'e' | b'E' => Ok(Step::E),
                _ => self.end_value(c),
            },
            Step::Dot => match c {
                b'0'..=b'9' => Ok(Step::DotDigits),
                _ => Self::err(c, "after decimal point in numeric literal"),
            },
            Step::DotDigits => match c {
                b'0'..=b'9' => Ok(step),
                b'e' | b'E' => Ok(Step::E),
                _ => self.end_value(c),
            },
            Step::E => match c {
                b'+' | b'-' => Ok(Step::ESign),
                b'0'..=b'9' => Ok(Step::EDigits),
                _ => Self::err(c, "in exponent of numeric literal"),
            },
            Step::ESign => match c {
                b'0'..=b'9' => Ok(Step::EDigits),
                _ => Self::err(c, "in exponent of numeric literal"),
            },
            Step::EDigits => match c {
                b'0'..=b'9' => Ok(step),
                _ => self.end_value(c),
            },
            Step::Literal(word, i) => {
                if c != word[i] {
                    let name = std::str::from_utf8(word).unwrap_or_default();
                    return Self::err(c, &format!("in literal {name} (expecting {})", quote_char(word[i])));
                }
                Ok(if i + 1 == word.len() { self.after_scalar() } else { Step::Literal(word, i + 1) })
            }
        }
    }

    /// Where a value that just ended leaves the scan: an object key waits for its colon.
    fn after_scalar(&mut self) -> Step {
        match self.stack.last() {
            None => Step::End,
            Some(Parse::Array) => Step::ArrayValue,
            Some(Parse::ObjectKey) => Step::ObjectKey,
            Some(Parse::ObjectValue) => Step::ObjectValue,
        }
    }

    fn after_close(&mut self) -> Result<Step, String> {
        Ok(self.after_scalar())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod_mismatch(v: Value) -> Option<Mismatch> {
        let o = crate::openapi::get();
        let schema = o.kind_schema("", "v1", "Pod").expect("pod schema");
        first_mismatch(&v, schema, "v1.Pod", o)
    }

    #[test]
    fn words_a_misfit_as_gos_json_decoder_and_the_unstructured_converter() {
        let m = pod_mismatch(json!({"metadata": {"name": "p", "labels": "invalid"}})).expect("labels");
        assert_eq!(
            m.json_message(),
            "json: cannot unmarshal string into Go struct field ObjectMeta.metadata.labels of type map[string]string"
        );
        assert_eq!(m.unstructured_message(), "cannot restore map from string");
        let m = pod_mismatch(json!({"spec": {"containers": [{"name": 1}]}})).expect("name");
        assert_eq!(
            m.json_message(),
            "json: cannot unmarshal number into Go struct field Container.spec.containers.name of type string"
        );
        assert_eq!(m.unstructured_message(), "cannot convert int64 to string");
        let m = pod_mismatch(json!({"spec": {"containers": {"name": "a"}}})).expect("containers");
        assert_eq!(
            m.json_message(),
            "json: cannot unmarshal object into Go struct field PodSpec.spec.containers of type []v1.Container"
        );
        assert_eq!(m.unstructured_message(), "cannot restore slice from map");
        let m = pod_mismatch(json!({"spec": "x"})).expect("spec");
        assert_eq!(m.json_message(), "json: cannot unmarshal string into Go struct field Pod.spec of type v1.PodSpec");
        assert_eq!(m.unstructured_message(), "cannot restore struct from: string");
        let m = pod_mismatch(json!({"spec": {"terminationGracePeriodSeconds": 1.5}})).expect("grace");
        assert_eq!(
            m.json_message(),
            "json: cannot unmarshal number 1.5 into Go struct field PodSpec.spec.terminationGracePeriodSeconds of type int64"
        );
        // What fits is no mismatch: nulls, int-or-strings, quantities, times.
        assert_eq!(
            pod_mismatch(json!({"metadata": {"labels": null, "creationTimestamp": "x"}, "spec": {"containers": [
                {"name": "a", "resources": {"limits": {"cpu": 1}}, "ports": [{"containerPort": 80}],
                 "livenessProbe": {"httpGet": {"port": "http"}}}]}})),
            None
        );
    }

    #[test]
    fn reports_json_syntax_errors_in_gos_words() {
        let e = |s: &str| json_syntax_error(s.as_bytes());
        assert_eq!(e(r#"{"a": [1, 2.5e3, true, null, "x\u00e9"], "b": {}}"#), None);
        assert_eq!(e(" 12 "), None);
        assert_eq!(
            e("apiVersion: v1\nkind: Namespace\n").as_deref(),
            Some("invalid character 'a' looking for beginning of value")
        );
        assert_eq!(e("").as_deref(), Some("unexpected end of JSON input"));
        assert_eq!(e(r#"{"a": 1"#).as_deref(), Some("unexpected end of JSON input"));
        assert_eq!(e(r#"{"a" 1}"#).as_deref(), Some("invalid character '1' after object key"));
        assert_eq!(e(r#"{"a": 1 "b"}"#).as_deref(), Some("invalid character '\"' after object key:value pair"));
        assert_eq!(e(r#"{a: 1}"#).as_deref(), Some("invalid character 'a' looking for beginning of object key string"));
        assert_eq!(e("[1 2]").as_deref(), Some("invalid character '2' after array element"));
        assert_eq!(e("{} x").as_deref(), Some("invalid character 'x' after top-level value"));
        assert_eq!(e("tru").as_deref(), Some("unexpected end of JSON input"));
        assert_eq!(e("trux").as_deref(), Some("invalid character 'x' in literal true (expecting 'e')"));
        assert_eq!(e("01").as_deref(), Some("invalid character '1' after top-level value"));
        assert_eq!(e("1.x").as_deref(), Some("invalid character 'x' after decimal point in numeric literal"));
        assert_eq!(e("\"a\nb\"").as_deref(), Some("invalid character '\\n' in string literal"));
    }

    #[test]
    fn formats_values_as_gos_plus_v() {
        assert_eq!(go_format(&json!({"metadata": {"labels": "invalid"}})), "map[metadata:map[labels:invalid]]");
        assert_eq!(go_format(&json!({"b": [1, "x", null, true], "a": 1.5})), "map[a:1.5 b:[1 x <nil> true]]");
        assert_eq!(go_format(&json!(1e21)), "1e+21");
    }
}
