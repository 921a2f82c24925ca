//! The Kubernetes format library (k8s.io/apiserver/pkg/cel/library/format.go): named string
//! formats, `format.named(name)` and `format.<name>()`, and `<format>.validate(s)`, which is
//! `optional.none()` for a valid string and otherwise the list of upstream's messages.

use std::sync::Arc;

use cel::objects::Opaque;
use cel::{ExecutionError, Value};

use crate::library::{arg, string};

/// The CEL type name of a format.
pub(crate) const FORMAT_TYPE: &str = "kubernetes.NamedFormat";

/// The formats, by the name `format.named` takes.
pub(crate) const NAMES: &[&str] = &[
    "dns1123Label",
    "dns1123Subdomain",
    "dns1035Label",
    "qualifiedName",
    "dns1123LabelPrefix",
    "dns1123SubdomainPrefix",
    "dns1035LabelPrefix",
    "labelValue",
    "uri",
    "uuid",
    "byte",
    "date",
    "datetime",
];

/// One named format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Format(&'static str);

impl Opaque for Format {
    fn runtime_type_name(&self) -> &str {
        FORMAT_TYPE
    }
}

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";

fn lower_alnum(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

fn dns1123_label_ok(s: &str) -> bool {
    !s.is_empty()
        && s.chars().all(|c| lower_alnum(c) || c == '-')
        && s.starts_with(lower_alnum)
        && s.ends_with(lower_alnum)
}

/// Upstream's `maskTrailingDash` for the `*Prefix` formats (it drops two characters for one).
fn mask_trailing_dash(s: &str) -> String {
    if s.len() > 1 && s.ends_with('-') {
        format!("{}a", s.get(..s.len() - 2).unwrap_or_default())
    } else {
        s.to_owned()
    }
}

fn max_len(s: &str, max: usize, errs: &mut Vec<String>) {
    if s.len() > max {
        errs.push(format!("must be no more than {max} characters"));
    }
}

/// `IsDNS1123Label`.
fn dns1123_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    max_len(s, 63, &mut errs);
    if !dns1123_label_ok(s) {
        errs.push(format!("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '{DNS1123_LABEL_FMT}')"));
    }
    errs
}

/// `IsDNS1123Subdomain`.
fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    max_len(s, 253, &mut errs);
    if !s.split('.').all(dns1123_label_ok) {
        errs.push(format!("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '{DNS1123_LABEL_FMT}(\\.{DNS1123_LABEL_FMT})*')"));
    }
    errs
}

/// `IsDNS1035Label`.
fn dns1035_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    max_len(s, 63, &mut errs);
    let ok = s.starts_with(|c: char| c.is_ascii_lowercase())
        && s.chars().all(|c| lower_alnum(c) || c == '-')
        && s.ends_with(lower_alnum);
    if !ok {
        errs.push(format!("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '{DNS1035_LABEL_FMT}')"));
    }
    errs
}

fn qualified_part_ok(s: &str) -> bool {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    !s.is_empty()
        && s.chars().all(|c| alnum(c) || c == '-' || c == '_' || c == '.')
        && s.starts_with(alnum)
        && s.ends_with(alnum)
}

/// `IsQualifiedName`.
fn qualified_name(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = s.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_owned());
            } else {
                errs.extend(dns1123_subdomain(prefix).into_iter().map(|m| format!("prefix part {m}")));
            }
            *name
        }
        _ => {
            return vec![format!("a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '{QUALIFIED_NAME_FMT}') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')")];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_owned());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".to_owned());
    }
    if !qualified_part_ok(name) {
        errs.push(format!("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '{QUALIFIED_NAME_FMT}')"));
    }
    errs
}

/// `IsValidLabelValue`.
fn label_value(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    max_len(s, 63, &mut errs);
    if !s.is_empty() && !qualified_part_ok(s) {
        errs.push(format!("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '({QUALIFIED_NAME_FMT})?')"));
    }
    errs
}

/// strfmt's `uuid`: 8-4-4-4-12 hexadecimal digits, or 32 in a row.
fn is_uuid(s: &str) -> bool {
    let hex = |p: &str, n: usize| p.len() == n && p.bytes().all(|b| b.is_ascii_hexdigit());
    let groups: Vec<&str> = s.split('-').collect();
    match groups.as_slice() {
        [all] => hex(all, 32),
        [a, b, c, d, e] => hex(a, 8) && hex(b, 4) && hex(c, 4) && hex(d, 4) && hex(e, 12),
        _ => false,
    }
}

/// strfmt's `byte`: standard, padded base64 (Go's `base64.StdEncoding`).
fn is_base64(s: &str) -> bool {
    let bytes = s.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return false;
    }
    let body = s.trim_end_matches('=');
    let padding = bytes.len() - body.len();
    padding <= 2 && body.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

/// strfmt's `date`: RFC 3339 `full-date`.
fn is_date(s: &str) -> bool {
    let digits = |r: std::ops::Range<usize>| s.get(r).is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()));
    s.len() == 10
        && digits(0..4)
        && digits(5..7)
        && digits(8..10)
        && chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok()
}

/// strfmt's `datetime`: RFC 3339 `date-time`.
fn is_datetime(s: &str) -> bool {
    s.get(..10).is_some_and(is_date) && chrono::DateTime::parse_from_rfc3339(s).is_ok()
}

impl Format {
    fn validate(&self, s: &str) -> Vec<String> {
        let fails = |ok: bool, message: &str| if ok { vec![] } else { vec![message.to_owned()] };
        match self.0 {
            "dns1123Label" => dns1123_label(s),
            "dns1123Subdomain" => dns1123_subdomain(s),
            "dns1035Label" => dns1035_label(s),
            "qualifiedName" => qualified_name(s),
            "dns1123LabelPrefix" => dns1123_label(&mask_trailing_dash(s)),
            "dns1123SubdomainPrefix" => dns1123_subdomain(&mask_trailing_dash(s)),
            "dns1035LabelPrefix" => dns1035_label(&mask_trailing_dash(s)),
            "labelValue" => label_value(s),
            "uri" => crate::url::uri_error(s).into_iter().collect(),
            "uuid" => fails(is_uuid(s), "does not match the UUID format"),
            "byte" => fails(is_base64(s), "invalid base64"),
            "date" => fails(is_date(s), "invalid date"),
            "datetime" => fails(is_datetime(s), "invalid datetime"),
            _ => vec![],
        }
    }
}

fn format_value(name: &'static str) -> Value {
    Value::Opaque(Arc::new(Format(name)))
}

/// `format.named(name)`: the format, or `optional.none()` for an unknown name.
pub(crate) fn named(args: &[Value]) -> Result<Value, ExecutionError> {
    let name = string(args, 0, "format.named")?;
    Ok(crate::optional(NAMES.iter().find(|n| **n == name).map(|n| format_value(n))))
}

/// `format.<name>()`, for each of [`NAMES`].
pub(crate) fn constant(name: &'static str) -> Value {
    format_value(name)
}

/// `<format>.validate(s)`.
pub(crate) fn validate(args: &[Value]) -> Result<Value, ExecutionError> {
    let format = match arg(args, 0, "validate")? {
        Value::Opaque(o) => o.downcast_ref::<Format>(),
        _ => None,
    }
    .ok_or_else(|| ExecutionError::function_error("validate", "expected a format"))?;
    let errors = format.validate(string(args, 1, "validate")?);
    Ok(crate::optional(if errors.is_empty() {
        None
    } else {
        Some(Value::List(Arc::new(errors.into_iter().map(|e| Value::String(Arc::new(e))).collect())))
    }))
}
