//! Field-path validation errors, shaped like upstream's `field.Error`: each becomes one
//! `details.causes[]` entry of a 422 Invalid Status.

use serde_json::Value;
use std::fmt;

/// The kind of a validation failure; `reason()` is the Status cause reason upstream uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldErrorType {
    NotFound,
    Required,
    Duplicate,
    Invalid,
    NotSupported,
    Forbidden,
    TooLong,
    TooMany,
    Internal,
    TypeInvalid,
}

impl FieldErrorType {
    pub fn reason(self) -> &'static str {
        match self {
            Self::NotFound => "FieldValueNotFound",
            Self::Required => "FieldValueRequired",
            Self::Duplicate => "FieldValueDuplicate",
            Self::Invalid => "FieldValueInvalid",
            Self::NotSupported => "FieldValueNotSupported",
            Self::Forbidden => "FieldValueForbidden",
            Self::TooLong => "FieldValueTooLong",
            Self::TooMany => "FieldValueTooMany",
            Self::Internal => "InternalError",
            Self::TypeInvalid => "FieldValueTypeInvalid",
        }
    }

    pub fn text(self) -> &'static str {
        match self {
            Self::NotFound => "Not found",
            Self::Required => "Required value",
            Self::Duplicate => "Duplicate value",
            Self::Invalid | Self::TypeInvalid => "Invalid value",
            Self::NotSupported => "Unsupported value",
            Self::Forbidden => "Forbidden",
            Self::TooLong => "Too long",
            Self::TooMany => "Too many",
            Self::Internal => "Internal error",
        }
    }
}

/// One validation failure at a field path such as `spec.containers[0].image`.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldError {
    pub kind: FieldErrorType,
    pub field: String,
    pub value: Option<Value>,
    pub detail: String,
}

impl FieldError {
    fn new(kind: FieldErrorType, field: impl Into<String>, value: Option<Value>, detail: impl Into<String>) -> Self {
        Self { kind, field: field.into(), value, detail: detail.into() }
    }
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorType::Required, field, None, detail)
    }
    pub fn invalid(field: impl Into<String>, value: impl Into<Value>, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorType::Invalid, field, Some(value.into()), detail)
    }
    pub fn duplicate(field: impl Into<String>, value: impl Into<Value>) -> Self {
        Self::new(FieldErrorType::Duplicate, field, Some(value.into()), "")
    }
    pub fn not_found(field: impl Into<String>, value: impl Into<Value>) -> Self {
        Self::new(FieldErrorType::NotFound, field, Some(value.into()), "")
    }
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorType::Forbidden, field, None, detail)
    }
    pub fn too_long(field: impl Into<String>, max: usize) -> Self {
        Self::new(FieldErrorType::TooLong, field, None, format!("may not be more than {max} bytes"))
    }
    pub fn too_many(field: impl Into<String>, actual: usize, max: usize) -> Self {
        Self::new(FieldErrorType::TooMany, field, Some(Value::from(actual)), format!("must have at most {max} items"))
    }
    pub fn internal(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorType::Internal, field, None, detail)
    }
    pub fn not_supported<S: AsRef<str>>(field: impl Into<String>, value: impl Into<Value>, supported: &[S]) -> Self {
        let list: Vec<String> = supported.iter().map(|s| format!("\"{}\"", s.as_ref())).collect();
        Self::new(
            FieldErrorType::NotSupported,
            field,
            Some(value.into()),
            format!("supported values: {}", list.join(", ")),
        )
    }

    /// The part after the field path, as upstream's `ErrorBody()`.
    pub fn body(&self) -> String {
        let mut s = match (self.kind, &self.value) {
            (
                FieldErrorType::Required
                | FieldErrorType::Forbidden
                | FieldErrorType::TooLong
                | FieldErrorType::Internal,
                _,
            )
            | (_, None) => self.kind.text().to_string(),
            (_, Some(v)) => format!("{}: {}", self.kind.text(), render_value(v)),
        };
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

fn render_value(v: &Value) -> String {
    match v {
        // Go's %q: quotes and backslashes inside are escaped.
        Value::String(s) => Value::String(s.clone()).to_string(),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.body())
        } else {
            write!(f, "{}: {}", self.field, self.body())
        }
    }
}

/// Renders a list of errors the way upstream's `ToAggregate().Error()` does.
pub fn aggregate_message(errs: &[FieldError]) -> String {
    match errs {
        [one] => one.to_string(),
        many => format!("[{}]", many.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", ")),
    }
}

/// Builds a field path: `Path::new("spec").child("containers").index(0)`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Path(String);

impl Path {
    pub fn new(root: &str) -> Self {
        Path(root.to_string())
    }
    pub fn child(&self, name: &str) -> Self {
        if self.0.is_empty() {
            Path(name.to_string())
        } else {
            Path(format!("{}.{}", self.0, name))
        }
    }
    pub fn index(&self, i: usize) -> Self {
        Path(format!("{}[{}]", self.0, i))
    }
    pub fn key(&self, k: &str) -> Self {
        Path(format!("{}[{}]", self.0, k))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<Path> for String {
    fn from(p: Path) -> String {
        p.0
    }
}

impl From<&Path> for String {
    fn from(p: &Path) -> String {
        p.0.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_match_upstream_shapes() {
        let e = FieldError::required("spec.containers[0].image", "");
        assert_eq!(e.to_string(), "spec.containers[0].image: Required value");
        let e = FieldError::invalid("metadata.name", "Bad_Name", "a lowercase RFC 1123 subdomain");
        assert_eq!(e.to_string(), "metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain");
        let e = FieldError::not_supported("spec.restartPolicy", "Sometimes", &["Always", "Never"]);
        assert_eq!(
            e.to_string(),
            "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"Never\""
        );
        assert_eq!(aggregate_message(&[e.clone(), e.clone()]).matches(", ").count(), 3);
    }
}
