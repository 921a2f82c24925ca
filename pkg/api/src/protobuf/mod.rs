//! Decoding Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`) into JSON.
//!
//! kubectl ≥ 1.32 sends some request bodies (`create deployment`, `auth can-i`, evictions, …) as
//! protobuf and does not retry as JSON on a 415. Such a body is the magic prefix `k8s\0` followed
//! by a `runtime.Unknown` envelope `{1: typeMeta{1: apiVersion, 2: kind}, 2: raw, 3: contentEncoding,
//! 4: contentType}` whose `raw` holds the kind's own message.
//!
//! The decoder is table driven (`tables.rs`, generated from `messages.txt` by the crate's build
//! script): each message is a list of fields `(number, JSON name, type, presence)`. It produces the
//! `serde_json::Value` that Go's `encoding/json` would have produced for the same typed object,
//! i.e. the JSON body kubectl would otherwise have sent: keys in Go struct order, `omitempty` zero
//! values dropped, present optional (pointer) zeros kept (`replicas: 0`), non-pointer structs
//! always present (`strategy: {}`), zero `Time` as `null`.
//! Unknown field numbers are skipped.

mod tables;

use std::borrow::Cow;
use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::{Map as JsonMap, Value};

/// The prefix of every Kubernetes protobuf body.
const MAGIC: &[u8] = b"k8s\0";

/// The media type of Kubernetes protobuf bodies.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Why a protobuf body could not be decoded. Every variant is a client error (HTTP 400).
#[derive(Debug, thiserror::Error)]
pub enum ProtobufError {
    /// The body does not start with `k8s\0`.
    #[error("provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]")]
    MissingMagic,
    /// The envelope names no kind.
    #[error("Object 'Kind' is missing in protobuf body")]
    MissingKind,
    /// The envelope's payload is compressed or not protobuf.
    #[error("unsupported protobuf payload (contentEncoding {encoding:?}, contentType {content_type:?})")]
    UnsupportedPayload { encoding: String, content_type: String },
    /// No descriptor exists for the kind.
    #[error("protobuf bodies of kind {kind:?} in version {api_version:?} are not supported; send application/json")]
    UnsupportedKind { api_version: String, kind: String },
    /// The bytes are not valid protobuf for the kind's message.
    #[error("unable to decode protobuf body{}: {reason}", at_path(.path))]
    Malformed { path: String, reason: String },
}

/// Renders the error path for [`ProtobufError::Malformed`].
fn at_path(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!(" at {path}")
    }
}

impl ProtobufError {
    fn malformed(reason: impl Into<String>) -> Self {
        Self::Malformed { path: String::new(), reason: reason.into() }
    }

    /// Prefixes the error's path with a field name or a `[index]`/`[key]` segment.
    fn within(self, segment: &str) -> Self {
        match self {
            Self::Malformed { path, reason } => {
                let path = if path.is_empty() {
                    segment.to_owned()
                } else if path.starts_with('[') || segment.is_empty() {
                    format!("{segment}{path}")
                } else {
                    format!("{segment}.{path}")
                };
                Self::Malformed { path, reason }
            }
            other => other,
        }
    }
}

/// Decodes a `k8s\0`-prefixed protobuf body into the JSON object it stands for, with `kind` and
/// `apiVersion` taken from the envelope's TypeMeta.
pub fn decode_body(bytes: &[u8]) -> Result<Value, ProtobufError> {
    let rest = bytes.strip_prefix(MAGIC).ok_or(ProtobufError::MissingMagic)?;
    let envelope = Envelope::decode(rest)?;
    if envelope.kind.is_empty() {
        return Err(ProtobufError::MissingKind);
    }
    if !envelope.content_encoding.is_empty()
        || !(envelope.content_type.is_empty() || envelope.content_type == CONTENT_TYPE)
    {
        return Err(ProtobufError::UnsupportedPayload {
            encoding: envelope.content_encoding,
            content_type: envelope.content_type,
        });
    }
    let fields = tables::root(&envelope.api_version, &envelope.kind).ok_or_else(|| ProtobufError::UnsupportedKind {
        api_version: envelope.api_version.clone(),
        kind: envelope.kind.clone(),
    })?;
    let mut object = JsonMap::new();
    object.insert("kind".to_owned(), Value::String(envelope.kind));
    if !envelope.api_version.is_empty() {
        object.insert("apiVersion".to_owned(), Value::String(envelope.api_version));
    }
    object.extend(decode_message(envelope.raw, fields)?);
    Ok(Value::Object(object))
}

/// Whether [`decode_body`] can decode bodies of this kind.
pub fn is_supported(api_version: &str, kind: &str) -> bool {
    tables::root(api_version, kind).is_some()
}

/// A message descriptor: its fields in Go struct (= JSON key) order.
type Fields = &'static [F];

/// One field of a message descriptor.
#[derive(Debug, Clone, Copy)]
struct F {
    num: u32,
    name: &'static str,
    ty: Ty,
    pres: Pres,
}

/// Builds a field descriptor (keeps the tables one line per field).
const fn f(num: u32, name: &'static str, ty: Ty, pres: Pres) -> F {
    F { num, name, ty, pres }
}

/// The protobuf type of a field and how it maps to JSON.
#[derive(Debug, Clone, Copy)]
enum Ty {
    /// `string`.
    Str,
    /// `bytes` → base64 string.
    Bytes,
    /// `bool` (varint).
    Bool,
    /// `int32` (varint).
    I32,
    /// `int64` (varint).
    I64,
    /// `meta/v1.Time` `{1: seconds, 2: nanos}` → RFC 3339 with seconds precision; empty → `null`.
    Time,
    /// `meta/v1.MicroTime` → RFC 3339 with microseconds; empty → `null`.
    MicroTime,
    /// `intstr.IntOrString` `{1: type, 2: intVal, 3: strVal}` → number or string.
    IntOrString,
    /// `resource.Quantity` `{1: string}` → string.
    Quantity,
    /// `runtime.RawExtension` / `meta/v1.FieldsV1` `{1: raw JSON}` → embedded JSON; empty → `null`.
    Raw,
    /// `ExtraValue` `{1: repeated string}` → array of strings.
    StrList,
    /// A nested message.
    Msg(Fields),
    /// `repeated` of the element type (packed or not).
    List(&'static Ty),
    /// `map<string, V>` → JSON object with sorted keys.
    Map(&'static Ty),
}

/// How a field's presence maps to JSON, following Go's `encoding/json` on the typed struct.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pres {
    /// Non-pointer without `omitempty`, or any non-pointer struct: always emitted (zero value if absent).
    Val,
    /// Non-pointer scalar, slice or map with `omitempty`: dropped when zero or empty.
    Omit,
    /// Pointer: emitted exactly when present on the wire, even if zero.
    Ptr,
    /// Slice, map or `[]byte` without `omitempty`: `null` when absent.
    Null,
    /// Embedded struct with `json:",inline"`: its fields are merged into the parent object.
    Inline,
}

/// One protobuf field value as it appears on the wire.
#[derive(Debug, Clone, Copy)]
enum Wire<'a> {
    Varint(u64),
    /// A `fixed64`/`double`; no supported field uses one, so only its presence is kept.
    Fixed64,
    /// A `fixed32`/`float`; no supported field uses one, so only its presence is kept.
    Fixed32,
    Len(&'a [u8]),
}

/// Iterates the `(field number, value)` pairs of a message.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    fn varint(&mut self) -> Result<u64, ProtobufError> {
        let mut value = 0u64;
        for (i, byte) in self.buf.iter().enumerate().take(10) {
            if i == 9 && *byte > 1 {
                return Err(ProtobufError::malformed("varint overflows 64 bits"));
            }
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                self.buf = &self.buf[i + 1..];
                return Ok(value);
            }
        }
        Err(ProtobufError::malformed(if self.buf.len() < 10 {
            "unexpected end of data in varint"
        } else {
            "varint is longer than 10 bytes"
        }))
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], ProtobufError> {
        if self.buf.len() < len {
            return Err(ProtobufError::malformed("unexpected end of data"));
        }
        let (head, tail) = self.buf.split_at(len);
        self.buf = tail;
        Ok(head)
    }

    fn field(&mut self) -> Result<(u32, Wire<'a>), ProtobufError> {
        let key = self.varint()?;
        let num = u32::try_from(key >> 3).map_err(|_| ProtobufError::malformed("field number out of range"))?;
        if num == 0 {
            return Err(ProtobufError::malformed("illegal field number 0"));
        }
        let wire = match key & 7 {
            0 => Wire::Varint(self.varint()?),
            1 => {
                self.take(8)?;
                Wire::Fixed64
            }
            2 => {
                let len =
                    usize::try_from(self.varint()?).map_err(|_| ProtobufError::malformed("length out of range"))?;
                Wire::Len(self.take(len)?)
            }
            5 => {
                self.take(4)?;
                Wire::Fixed32
            }
            3 | 4 => return Err(ProtobufError::malformed("protobuf groups are not supported")),
            other => return Err(ProtobufError::malformed(format!("illegal wire type {other}"))),
        };
        Ok((num, wire))
    }
}

impl<'a> Iterator for Reader<'a> {
    type Item = Result<(u32, Wire<'a>), ProtobufError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buf.is_empty() {
            return None;
        }
        let item = self.field();
        if item.is_err() {
            self.buf = &[];
        }
        Some(item)
    }
}

/// The `runtime.Unknown` envelope.
struct Envelope<'a> {
    api_version: String,
    kind: String,
    raw: &'a [u8],
    content_encoding: String,
    content_type: String,
}

impl<'a> Envelope<'a> {
    fn decode(bytes: &'a [u8]) -> Result<Self, ProtobufError> {
        let mut envelope = Envelope {
            api_version: String::new(),
            kind: String::new(),
            raw: &[],
            content_encoding: String::new(),
            content_type: String::new(),
        };
        for item in Reader::new(bytes) {
            match item? {
                (1, Wire::Len(type_meta)) => {
                    for item in Reader::new(type_meta) {
                        match item.map_err(|e| e.within("typeMeta"))? {
                            (1, Wire::Len(v)) => envelope.api_version = text(v),
                            (2, Wire::Len(v)) => envelope.kind = text(v),
                            (1 | 2, _) => return Err(wrong_wire_type().within("typeMeta")),
                            _ => {}
                        }
                    }
                }
                (2, Wire::Len(raw)) => envelope.raw = raw,
                (3, Wire::Len(v)) => envelope.content_encoding = text(v),
                (4, Wire::Len(v)) => envelope.content_type = text(v),
                (1..=4, _) => return Err(wrong_wire_type().within("Unknown")),
                _ => {}
            }
        }
        Ok(envelope)
    }
}

fn wrong_wire_type() -> ProtobufError {
    ProtobufError::malformed("wrong wire type")
}

/// Go strings may hold any bytes; `encoding/json` replaces invalid UTF-8 with U+FFFD.
fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Decodes one message into a JSON object following its descriptor.
fn decode_message(bytes: &[u8], fields: Fields) -> Result<JsonMap<String, Value>, ProtobufError> {
    let mut seen: Vec<Vec<Wire<'_>>> = vec![Vec::new(); fields.len()];
    for item in Reader::new(bytes) {
        let (num, wire) = item?;
        if let Some(i) = fields.iter().position(|field| field.num == num) {
            seen[i].push(wire);
        }
    }
    let mut object = JsonMap::new();
    for (field, values) in fields.iter().zip(&seen) {
        emit(field, values, &mut object).map_err(|e| e.within(field.name))?;
    }
    Ok(object)
}

/// Adds one field to `object` according to its presence rule.
fn emit(field: &F, values: &[Wire<'_>], object: &mut JsonMap<String, Value>) -> Result<(), ProtobufError> {
    if field.pres == Pres::Inline {
        let Ty::Msg(inner) = field.ty else {
            return Err(ProtobufError::malformed("inline field is not a message"));
        };
        object.extend(decode_message(&merged(values)?, inner)?);
        return Ok(());
    }
    let value = if values.is_empty() {
        match field.pres {
            Pres::Ptr => return Ok(()),
            Pres::Null => Value::Null,
            _ => zero(field.ty)?,
        }
    } else {
        convert(field.ty, values)?
    };
    if field.pres == Pres::Omit && is_empty(&value) {
        return Ok(());
    }
    object.insert(field.name.to_owned(), value);
    Ok(())
}

/// The JSON of a Go zero value of the type.
fn zero(ty: Ty) -> Result<Value, ProtobufError> {
    Ok(match ty {
        Ty::Str => Value::String(String::new()),
        Ty::Bool => Value::Bool(false),
        Ty::I32 | Ty::I64 | Ty::IntOrString => Value::from(0),
        Ty::Quantity => Value::String("0".to_owned()),
        Ty::Msg(fields) => Value::Object(decode_message(&[], fields)?),
        Ty::Bytes | Ty::Time | Ty::MicroTime | Ty::Raw | Ty::StrList | Ty::List(_) | Ty::Map(_) => Value::Null,
    })
}

/// What `omitempty` drops.
fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_i64() == Some(0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// Converts all wire occurrences of a field (at least one) into its JSON value.
fn convert(ty: Ty, values: &[Wire<'_>]) -> Result<Value, ProtobufError> {
    match ty {
        Ty::List(elem) => {
            let mut items = Vec::new();
            for (i, wire) in values.iter().enumerate() {
                match (elem, wire) {
                    (Ty::Bool | Ty::I32 | Ty::I64, Wire::Len(packed)) => {
                        let mut reader = Reader::new(packed);
                        while !reader.buf.is_empty() {
                            let n = reader.varint().map_err(|e| e.within(&format!("[{}]", items.len())))?;
                            items.push(scalar(*elem, Wire::Varint(n))?);
                        }
                    }
                    _ => {
                        items.push(convert(*elem, std::slice::from_ref(wire)).map_err(|e| e.within(&format!("[{i}]")))?)
                    }
                }
            }
            Ok(Value::Array(items))
        }
        Ty::Map(value_ty) => {
            let mut entries = BTreeMap::new();
            for wire in values {
                let Wire::Len(entry) = wire else {
                    return Err(wrong_wire_type());
                };
                let (key, value) = map_entry(entry, *value_ty)?;
                entries.insert(key, value);
            }
            Ok(Value::Object(entries.into_iter().collect()))
        }
        Ty::Msg(fields) => Ok(Value::Object(decode_message(&merged(values)?, fields)?)),
        Ty::Time => time(&merged(values)?, false),
        Ty::MicroTime => time(&merged(values)?, true),
        Ty::IntOrString => int_or_string(&merged(values)?),
        Ty::Quantity => quantity(&merged(values)?),
        Ty::Raw => raw(&merged(values)?),
        Ty::StrList => str_list(&merged(values)?),
        Ty::Str | Ty::Bytes | Ty::Bool | Ty::I32 | Ty::I64 => match values.last() {
            Some(last) => scalar(ty, *last),
            None => zero(ty),
        },
    }
}

/// A singular scalar; the last occurrence wins.
fn scalar(ty: Ty, wire: Wire<'_>) -> Result<Value, ProtobufError> {
    Ok(match (ty, wire) {
        (Ty::Str, Wire::Len(bytes)) => Value::String(text(bytes)),
        (Ty::Bytes, Wire::Len(bytes)) => Value::String(base64::engine::general_purpose::STANDARD.encode(bytes)),
        (Ty::Bool, Wire::Varint(n)) => Value::Bool(n != 0),
        // Truncation to 32 bits is what protobuf decoders do for int32.
        (Ty::I32, Wire::Varint(n)) => Value::from(n as i32),
        (Ty::I64, Wire::Varint(n)) => Value::from(n as i64),
        _ => return Err(wrong_wire_type()),
    })
}

/// The bytes of a singular message field; repeated occurrences merge, which for protobuf equals
/// decoding their concatenation.
fn merged<'a>(values: &[Wire<'a>]) -> Result<Cow<'a, [u8]>, ProtobufError> {
    match values {
        [] => Ok(Cow::Borrowed(&[])),
        [Wire::Len(bytes)] => Ok(Cow::Borrowed(bytes)),
        _ => {
            let mut all = Vec::new();
            for wire in values {
                let Wire::Len(bytes) = wire else {
                    return Err(wrong_wire_type());
                };
                all.extend_from_slice(bytes);
            }
            Ok(Cow::Owned(all))
        }
    }
}

/// A `map<string, V>` entry message `{1: key, 2: value}`.
fn map_entry(entry: &[u8], value_ty: Ty) -> Result<(String, Value), ProtobufError> {
    let mut key = String::new();
    let mut values = Vec::new();
    for item in Reader::new(entry) {
        match item? {
            (1, Wire::Len(bytes)) => key = text(bytes),
            (1, _) => return Err(wrong_wire_type()),
            (2, wire) => values.push(wire),
            _ => {}
        }
    }
    let value = if values.is_empty() { zero(value_ty) } else { convert(value_ty, &values) };
    let value = value.map_err(|e| e.within(&format!("[{key:?}]")))?;
    Ok((key, value))
}

/// Reads a varint field of a small special message, rejecting other wire types.
fn varint_of(wire: Wire<'_>) -> Result<u64, ProtobufError> {
    match wire {
        Wire::Varint(n) => Ok(n),
        _ => Err(wrong_wire_type()),
    }
}

/// Reads a length-delimited field of a small special message, rejecting other wire types.
fn bytes_of(wire: Wire<'_>) -> Result<&[u8], ProtobufError> {
    match wire {
        Wire::Len(bytes) => Ok(bytes),
        _ => Err(wrong_wire_type()),
    }
}

/// `meta/v1.Time` (seconds precision, like its JSON form) or `MicroTime` (microseconds).
fn time(bytes: &[u8], micro: bool) -> Result<Value, ProtobufError> {
    if bytes.is_empty() {
        return Ok(Value::Null);
    }
    let (mut seconds, mut nanos) = (0i64, 0i64);
    for item in Reader::new(bytes) {
        match item? {
            (1, wire) => seconds = varint_of(wire)? as i64,
            (2, wire) => nanos = i64::from(varint_of(wire)? as i32),
            _ => {}
        }
    }
    // Go's time.Unix normalises nanoseconds outside [0, 1e9).
    let seconds = seconds
        .checked_add(nanos.div_euclid(1_000_000_000))
        .ok_or_else(|| ProtobufError::malformed("timestamp out of range"))?;
    let nanos = nanos.rem_euclid(1_000_000_000);
    let timestamp =
        jiff::Timestamp::from_second(seconds).map_err(|_| ProtobufError::malformed("timestamp out of range"))?;
    let year = timestamp.to_zoned(jiff::tz::TimeZone::UTC).year();
    if !(0..=9999).contains(&year) {
        return Err(ProtobufError::malformed("timestamp year outside of range [0,9999]"));
    }
    let base = timestamp.strftime("%Y-%m-%dT%H:%M:%S");
    Ok(Value::String(if micro { format!("{base}.{:06}Z", nanos / 1000) } else { format!("{base}Z") }))
}

/// `intstr.IntOrString` `{1: type (0 int, 1 string), 2: intVal, 3: strVal}`.
fn int_or_string(bytes: &[u8]) -> Result<Value, ProtobufError> {
    let (mut kind, mut int_val, mut str_val) = (0u64, 0i32, String::new());
    for item in Reader::new(bytes) {
        match item? {
            (1, wire) => kind = varint_of(wire)?,
            (2, wire) => int_val = varint_of(wire)? as i32,
            (3, wire) => str_val = text(bytes_of(wire)?),
            _ => {}
        }
    }
    match kind {
        0 => Ok(Value::from(int_val)),
        1 => Ok(Value::String(str_val)),
        other => Err(ProtobufError::malformed(format!("impossible IntOrString.Type {other}"))),
    }
}

/// `resource.Quantity` `{1: string}`; the empty (zero) quantity is `"0"`.
fn quantity(bytes: &[u8]) -> Result<Value, ProtobufError> {
    let mut string = String::new();
    for item in Reader::new(bytes) {
        if let (1, wire) = item? {
            string = text(bytes_of(wire)?);
        }
    }
    if string.is_empty() {
        string.push('0');
    }
    Ok(Value::String(string))
}

/// `runtime.RawExtension` / `meta/v1.FieldsV1` `{1: raw}` holding JSON.
fn raw(bytes: &[u8]) -> Result<Value, ProtobufError> {
    let mut raw: &[u8] = &[];
    for item in Reader::new(bytes) {
        if let (1, wire) = item? {
            raw = bytes_of(wire)?;
        }
    }
    if raw.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(raw).map_err(|e| ProtobufError::malformed(format!("embedded object is not JSON: {e}")))
}

/// `ExtraValue` `{1: repeated string}` → JSON array of strings.
fn str_list(bytes: &[u8]) -> Result<Value, ProtobufError> {
    let mut items = Vec::new();
    for item in Reader::new(bytes) {
        if let (1, wire) = item? {
            items.push(Value::String(text(bytes_of(wire)?)));
        }
    }
    Ok(Value::Array(items))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A tiny protobuf encoder for building test bodies.
    #[derive(Default, Clone)]
    struct Enc(Vec<u8>);

    impl Enc {
        fn new() -> Self {
            Self::default()
        }

        fn raw_varint(&mut self, mut v: u64) {
            while v >= 0x80 {
                self.0.push((v as u8) | 0x80);
                v >>= 7;
            }
            self.0.push(v as u8);
        }

        fn key(&mut self, num: u32, wire_type: u64) {
            self.raw_varint((u64::from(num) << 3) | wire_type);
        }

        fn varint(mut self, num: u32, v: u64) -> Self {
            self.key(num, 0);
            self.raw_varint(v);
            self
        }

        fn bytes(mut self, num: u32, b: &[u8]) -> Self {
            self.key(num, 2);
            self.raw_varint(b.len() as u64);
            self.0.extend_from_slice(b);
            self
        }

        fn str(self, num: u32, s: &str) -> Self {
            self.bytes(num, s.as_bytes())
        }

        fn msg(self, num: u32, m: Enc) -> Self {
            self.bytes(num, &m.0)
        }

        fn entry(self, num: u32, key: &str, value: &[u8]) -> Self {
            self.msg(num, Enc::new().str(1, key).bytes(2, value))
        }
    }

    fn body(api_version: &str, kind: &str, raw: Enc) -> Vec<u8> {
        let type_meta = Enc::new().str(1, api_version).str(2, kind);
        let unknown = Enc::new().msg(1, type_meta).msg(2, raw).str(3, "").str(4, "");
        [MAGIC, &unknown.0].concat()
    }

    /// ObjectMeta as gogo-protobuf marshals it: every non-pointer field written, zero or not.
    fn object_meta(name: &str, labels: &[(&str, &str)]) -> Enc {
        let mut m = Enc::new().str(1, name).str(2, "").str(3, "").str(4, "").str(5, "").str(6, "");
        m = m.varint(7, 0).msg(8, Enc::new());
        for (k, v) in labels {
            m = m.entry(11, k, v.as_bytes());
        }
        m
    }

    fn decode(bytes: &[u8]) -> Value {
        decode_body(bytes).expect("decodes")
    }

    #[test]
    fn deployment_from_kubectl_create_matches_its_json_body_including_key_order() {
        let labels = [("app", "web")];
        let port = Enc::new().str(1, "").varint(2, 0).varint(3, 80).str(4, "").str(5, "");
        let container = Enc::new()
            .str(1, "nginx")
            .str(2, "nginx")
            .msg(6, port)
            .msg(8, Enc::new())
            .str(13, "")
            .str(14, "")
            .varint(16, 0)
            .varint(17, 0)
            .varint(18, 0)
            .str(5, "")
            .str(20, "");
        let pod_spec = Enc::new()
            .msg(2, container)
            .str(3, "")
            .str(6, "")
            .str(8, "")
            .str(9, "")
            .str(10, "")
            .varint(11, 0)
            .varint(12, 0)
            .varint(13, 0)
            .str(16, "")
            .str(17, "")
            .str(19, "")
            .str(24, "");
        let template = Enc::new().msg(1, object_meta("", &labels)).msg(2, pod_spec);
        let selector = Enc::new().entry(1, "app", b"web");
        let spec = Enc::new()
            .varint(1, 2)
            .msg(2, selector)
            .msg(3, template)
            .msg(4, Enc::new().str(1, ""))
            .varint(5, 0)
            .varint(7, 0);
        let status = Enc::new().varint(1, 0).varint(2, 0).varint(3, 0).varint(4, 0).varint(5, 0).varint(7, 0);
        let deployment = Enc::new().msg(1, object_meta("web", &labels)).msg(2, spec).msg(3, status);

        let got = decode(&body("apps/v1", "Deployment", deployment));
        let expected = r#"{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"web","creationTimestamp":null,"labels":{"app":"web"}},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"creationTimestamp":null,"labels":{"app":"web"}},"spec":{"containers":[{"name":"nginx","image":"nginx","ports":[{"containerPort":80}],"resources":{}}]}},"strategy":{}},"status":{}}"#;
        assert_eq!(serde_json::to_string(&got).expect("serializes"), expected);
    }

    /// Bodies captured from kubectl 1.32.4 (`testdata/*.pb`) next to the JSON that the same command
    /// prints with `--dry-run=client -o json` (`testdata/*.json`).
    #[test]
    fn bodies_captured_from_kubectl_create_decode_to_its_json_form_byte_for_byte() {
        let cases: [(&str, &[u8], &str); 7] = [
            ("deployment", include_bytes!("testdata/deployment.pb"), include_str!("testdata/deployment.json")),
            ("namespace", include_bytes!("testdata/namespace.pb"), include_str!("testdata/namespace.json")),
            ("configmap", include_bytes!("testdata/configmap.pb"), include_str!("testdata/configmap.json")),
            ("secret", include_bytes!("testdata/secret.pb"), include_str!("testdata/secret.json")),
            ("service", include_bytes!("testdata/service.pb"), include_str!("testdata/service.json")),
            ("job", include_bytes!("testdata/job.pb"), include_str!("testdata/job.json")),
            ("cronjob", include_bytes!("testdata/cronjob.pb"), include_str!("testdata/cronjob.json")),
        ];
        for (name, protobuf, json) in cases {
            let got = serde_json::to_string(&decode(protobuf)).expect("serializes");
            assert_eq!(got, json.trim_end(), "{name}");
        }
    }

    #[test]
    fn bodies_captured_from_kubectl_auth_and_create_token_decode() {
        assert_eq!(
            decode(include_bytes!("testdata/selfsubjectaccessreview.pb")),
            json!({
                "kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
                "metadata": {"creationTimestamp": null},
                "spec": {"resourceAttributes": {"namespace": "default", "verb": "create", "resource": "deployments.apps"}},
                "status": {"allowed": false}
            })
        );
        assert_eq!(
            decode(include_bytes!("testdata/selfsubjectrulesreview.pb")),
            json!({
                "kind": "SelfSubjectRulesReview", "apiVersion": "authorization.k8s.io/v1",
                "metadata": {"creationTimestamp": null},
                "spec": {"namespace": "default"},
                "status": {"resourceRules": null, "nonResourceRules": null, "incomplete": false}
            })
        );
        assert_eq!(
            decode(include_bytes!("testdata/selfsubjectreview.pb")),
            json!({
                "kind": "SelfSubjectReview", "apiVersion": "authentication.k8s.io/v1",
                "metadata": {"creationTimestamp": null},
                "status": {"userInfo": {}}
            })
        );
        assert_eq!(
            decode(include_bytes!("testdata/tokenrequest.pb")),
            json!({
                "kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
                "metadata": {"creationTimestamp": null},
                "spec": {"audiences": null},
                "status": {"token": "", "expirationTimestamp": null}
            })
        );
    }

    #[test]
    fn absent_non_pointer_structs_are_filled_in_like_go_zero_values() {
        let deployment = Enc::new().msg(1, Enc::new().str(1, "web")).msg(2, Enc::new().varint(1, 0));
        let got = decode(&body("apps/v1", "Deployment", deployment));
        assert_eq!(
            got,
            json!({
                "kind": "Deployment", "apiVersion": "apps/v1",
                "metadata": {"name": "web", "creationTimestamp": null},
                "spec": {
                    "replicas": 0,
                    "template": {"metadata": {"creationTimestamp": null}, "spec": {"containers": null}},
                    "strategy": {}
                },
                "status": {}
            })
        );
    }

    #[test]
    fn secret_binary_data_becomes_base64_and_map_keys_are_sorted() {
        let secret = Enc::new()
            .msg(1, object_meta("creds", &[]))
            .entry(2, "z.bin", &[0, 1, 2, 255])
            .entry(2, "a.txt", b"hi")
            .str(3, "Opaque")
            .entry(4, "plain", b"text");
        let got = decode(&body("v1", "Secret", secret));
        assert_eq!(
            got,
            json!({
                "kind": "Secret", "apiVersion": "v1",
                "metadata": {"name": "creds", "creationTimestamp": null},
                "data": {"a.txt": "aGk=", "z.bin": "AAEC/w=="},
                "stringData": {"plain": "text"},
                "type": "Opaque"
            })
        );
        let keys: Vec<_> = got["data"].as_object().expect("object").keys().cloned().collect();
        assert_eq!(keys, ["a.txt", "z.bin"]);
    }

    #[test]
    fn self_subject_access_review_from_auth_can_i() {
        let attributes = Enc::new()
            .str(1, "default")
            .str(2, "create")
            .str(3, "apps")
            .str(4, "")
            .str(5, "deployments")
            .str(6, "")
            .str(7, "");
        let spec = Enc::new().msg(1, attributes);
        let status = Enc::new().varint(1, 0).str(2, "").str(3, "").varint(4, 0);
        let review = Enc::new().msg(1, object_meta("", &[])).msg(2, spec).msg(3, status);
        let got = decode(&body("authorization.k8s.io/v1", "SelfSubjectAccessReview", review));
        assert_eq!(
            got,
            json!({
                "kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
                "metadata": {"creationTimestamp": null},
                "spec": {"resourceAttributes": {"namespace": "default", "verb": "create", "group": "apps", "resource": "deployments"}},
                "status": {"allowed": false}
            })
        );
    }

    #[test]
    fn namespace_gets_empty_spec_and_status() {
        let namespace = Enc::new().msg(1, object_meta("team-a", &[])).msg(2, Enc::new()).msg(3, Enc::new().str(1, ""));
        assert_eq!(
            decode(&body("v1", "Namespace", namespace)),
            json!({"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "team-a", "creationTimestamp": null}, "spec": {}, "status": {}})
        );
    }

    #[test]
    fn service_target_port_int_or_string_decodes_to_number_or_string() {
        let numeric = Enc::new().varint(1, 0).varint(2, 8080).str(3, "");
        let named = Enc::new().varint(1, 1).varint(2, 0).str(3, "http");
        let port = |name: &str, port: u64, target: Enc| {
            Enc::new().str(1, name).str(2, "TCP").varint(3, port).msg(4, target).varint(5, 0)
        };
        let spec = Enc::new()
            .msg(1, port("80-8080", 80, numeric))
            .msg(1, port("web", 443, named))
            .entry(2, "app", b"web")
            .str(3, "")
            .str(4, "ClusterIP")
            .str(7, "");
        let status = Enc::new().msg(1, Enc::new());
        let service = Enc::new().msg(1, object_meta("web", &[("app", "web")])).msg(2, spec).msg(3, status);
        let got = decode(&body("v1", "Service", service));
        assert_eq!(
            got,
            json!({
                "kind": "Service", "apiVersion": "v1",
                "metadata": {"name": "web", "creationTimestamp": null, "labels": {"app": "web"}},
                "spec": {
                    "ports": [
                        {"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080},
                        {"name": "web", "protocol": "TCP", "port": 443, "targetPort": "http"}
                    ],
                    "selector": {"app": "web"},
                    "type": "ClusterIP"
                },
                "status": {"loadBalancer": {}}
            })
        );
    }

    #[test]
    fn inline_embedded_structs_merge_into_the_parent_object() {
        let exec = Enc::new().str(1, "cat").str(1, "/tmp/ready");
        let probe = Enc::new().msg(1, Enc::new().msg(1, exec)).varint(2, 5);
        let volume =
            Enc::new().str(1, "cfg").msg(2, Enc::new().msg(19, Enc::new().msg(1, Enc::new().str(1, "app-config"))));
        let container = Enc::new().str(1, "c").msg(11, probe);
        let pod = Enc::new().msg(2, Enc::new().msg(1, volume).msg(2, container));
        let got = decode(&body("v1", "Pod", pod));
        assert_eq!(got["spec"]["volumes"], json!([{"name": "cfg", "configMap": {"name": "app-config"}}]));
        assert_eq!(
            got["spec"]["containers"][0]["readinessProbe"],
            json!({"exec": {"command": ["cat", "/tmp/ready"]}, "initialDelaySeconds": 5})
        );
    }

    #[test]
    fn time_fields_render_as_rfc3339_and_micro_time_keeps_microseconds() {
        let meta = Enc::new().str(1, "x").msg(8, Enc::new().varint(1, 1_795_986_000)).msg(9, Enc::new().varint(1, 0));
        let event = Enc::new().msg(1, meta).msg(10, Enc::new().varint(1, 1_795_986_000).varint(2, 123_456_789));
        let got = decode(&body("v1", "Event", event));
        assert_eq!(got["metadata"]["creationTimestamp"], json!("2026-11-29T21:00:00Z"));
        assert_eq!(got["metadata"]["deletionTimestamp"], json!("1970-01-01T00:00:00Z"));
        assert_eq!(got["eventTime"], json!("2026-11-29T21:00:00.123456Z"));

        // Years below 1000 keep four digits; Go refuses to render years past 9999.
        let early = Enc::new().msg(1, Enc::new().msg(8, Enc::new().varint(1, (-62_009_366_400i64) as u64)));
        assert_eq!(
            decode(&body("v1", "Namespace", early))["metadata"]["creationTimestamp"],
            json!("0005-01-01T00:00:00Z")
        );
        let late = Enc::new().msg(1, Enc::new().msg(8, Enc::new().varint(1, 300_000_000_000)));
        assert!(matches!(decode_body(&body("v1", "Namespace", late)), Err(ProtobufError::Malformed { .. })));
    }

    #[test]
    fn token_request_keeps_a_present_zero_pointer_and_omits_absent_ones() {
        let spec = Enc::new().str(1, "https://kubernetes.default.svc").varint(4, 3600);
        let request = Enc::new().msg(1, object_meta("", &[])).msg(2, spec);
        let got = decode(&body("authentication.k8s.io/v1", "TokenRequest", request));
        assert_eq!(got["spec"], json!({"audiences": ["https://kubernetes.default.svc"], "expirationSeconds": 3600}));
        assert_eq!(got["status"], json!({"token": "", "expirationTimestamp": null}));
    }

    #[test]
    fn eviction_with_delete_options_and_preconditions() {
        let preconditions = Enc::new().str(1, "uid-1");
        let options = Enc::new().varint(1, 0).msg(2, preconditions).str(4, "Background");
        let eviction = Enc::new().msg(1, object_meta("pod-1", &[])).msg(2, options);
        let got = decode(&body("policy/v1", "Eviction", eviction));
        assert_eq!(
            got["deleteOptions"],
            json!({"gracePeriodSeconds": 0, "preconditions": {"uid": "uid-1"}, "propagationPolicy": "Background"})
        );
    }

    #[test]
    fn delete_options_is_accepted_under_any_api_version() {
        assert!(is_supported("apps/v1", "DeleteOptions"));
        assert!(is_supported("meta.k8s.io/v1", "DeleteOptions"));
        let got = decode(&body("v1", "DeleteOptions", Enc::new().str(5, "All")));
        assert_eq!(got, json!({"kind": "DeleteOptions", "apiVersion": "v1", "dryRun": ["All"]}));
    }

    #[test]
    fn managed_fields_embed_fields_v1_json() {
        let entry = Enc::new()
            .str(1, "kubectl")
            .str(2, "Apply")
            .str(3, "apps/v1")
            .msg(4, Enc::new().varint(1, 0))
            .str(6, "FieldsV1")
            .msg(7, Enc::new().bytes(1, br#"{"f:spec":{}}"#));
        let meta = Enc::new().str(1, "web").msg(17, entry);
        let got = decode(&body("apps/v1", "Deployment", Enc::new().msg(1, meta)));
        assert_eq!(
            got["metadata"]["managedFields"],
            json!([{"manager": "kubectl", "operation": "Apply", "apiVersion": "apps/v1", "time": "1970-01-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}])
        );
    }

    #[test]
    fn unknown_field_numbers_of_every_wire_type_are_skipped() {
        let mut meta = Enc::new().str(1, "ns").varint(900, 7).str(901, "future");
        meta.key(902, 1);
        meta.0.extend_from_slice(&[0; 8]);
        meta.key(903, 5);
        meta.0.extend_from_slice(&[0; 4]);
        let namespace = Enc::new().msg(1, meta).varint(77, 1);
        let got = decode(&body("v1", "Namespace", namespace));
        assert_eq!(got["metadata"], json!({"name": "ns", "creationTimestamp": null}));
    }

    #[test]
    fn packed_and_unpacked_repeated_integers_both_decode() {
        // PodSecurityContext.supplementalGroups (4) is `repeated int64`.
        let mut packed = Enc::new();
        packed.raw_varint(1000);
        packed.raw_varint(2000);
        let security = Enc::new().bytes(4, &packed.0).varint(4, 3000);
        let pod = Enc::new().msg(2, Enc::new().msg(14, security));
        let got = decode(&body("v1", "Pod", pod));
        assert_eq!(got["spec"]["securityContext"]["supplementalGroups"], json!([1000, 2000, 3000]));
    }

    #[test]
    fn negative_int32_values_decode_from_sign_extended_varints() {
        let spec = Enc::new().varint(1, (-1i64) as u64);
        let got = decode(&body("apps/v1", "Deployment", Enc::new().msg(2, spec)));
        assert_eq!(got["spec"]["replicas"], json!(-1));
    }

    #[test]
    fn missing_magic_is_rejected() {
        assert!(matches!(decode_body(b"{\"kind\":\"Pod\"}"), Err(ProtobufError::MissingMagic)));
    }

    #[test]
    fn unsupported_kind_is_an_error_naming_it() {
        let err = decode_body(&body("example.com/v1", "Widget", Enc::new())).expect_err("unsupported");
        assert!(matches!(err, ProtobufError::UnsupportedKind { .. }));
        assert!(err.to_string().contains("\"Widget\""), "{err}");
        assert!(!is_supported("example.com/v1", "Widget"));
        assert!(is_supported("authorization.k8s.io/v1", "SelfSubjectRulesReview"));
    }

    #[test]
    fn compressed_or_foreign_payloads_are_rejected() {
        let type_meta = Enc::new().str(1, "v1").str(2, "Namespace");
        let unknown = Enc::new().msg(1, type_meta).bytes(2, b"").str(3, "gzip");
        let err = decode_body(&[MAGIC, &unknown.0].concat()).expect_err("gzip");
        assert!(matches!(err, ProtobufError::UnsupportedPayload { .. }));
    }

    #[test]
    fn truncated_and_mistyped_fields_report_their_path() {
        let mut bytes = body("v1", "Namespace", Enc::new().msg(1, Enc::new().str(1, "ns")));
        bytes.pop();
        assert!(matches!(decode_body(&bytes), Err(ProtobufError::Malformed { .. })));

        let spec = Enc::new().str(1, "two");
        let err = decode_body(&body("apps/v1", "Deployment", Enc::new().msg(2, spec))).expect_err("wrong wire type");
        assert_eq!(err.to_string(), "unable to decode protobuf body at spec.replicas: wrong wire type");

        let port = Enc::new().msg(4, Enc::new().varint(1, 7));
        let err =
            decode_body(&body("v1", "Service", Enc::new().msg(2, Enc::new().msg(1, port)))).expect_err("bad intstr");
        assert_eq!(
            err.to_string(),
            "unable to decode protobuf body at spec.ports[0].targetPort: impossible IntOrString.Type 7"
        );
    }
}
