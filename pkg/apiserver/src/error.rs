//! API errors, rendered as Kubernetes `Status` objects with upstream's codes, reasons and messages.

use k1s_api::field::{aggregate_message, FieldError};
use k1s_api::ResourceInfo;
use serde_json::{json, Value};

/// One error cause (`details.causes[]`).
#[derive(Clone, Debug, PartialEq)]
pub struct Cause {
    pub reason: String,
    pub message: String,
    pub field: String,
}

/// A failed request: HTTP code, `reason`, message and optional details.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub name: Option<String>,
    pub group: Option<String>,
    pub kind: Option<String>,
    pub causes: Vec<Cause>,
    pub retry_after: Option<u64>,
}

/// `deployments.apps` / `pods`: how upstream names a group-resource in messages.
pub fn qualified_resource(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            name: None,
            group: None,
            kind: None,
            causes: Vec::new(),
            retry_after: None,
        }
    }

    fn with_target(mut self, group: &str, kind: &str, name: &str) -> Self {
        self.group = Some(group.to_string());
        self.kind = Some(kind.to_string());
        self.name = Some(name.to_string());
        self
    }

    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{} \"{name}\" not found", qualified_resource(group, resource)))
            .with_target(group, resource, name)
    }

    pub fn not_found_path() -> Self {
        Self::new(404, "NotFound", "the server could not find the requested resource")
    }

    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        Self::new(409, "AlreadyExists", format!("{} \"{name}\" already exists", qualified_resource(group, resource)))
            .with_target(group, resource, name)
    }

    pub fn conflict(group: &str, resource: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {} \"{name}\": {why}", qualified_resource(group, resource)),
        )
        .with_target(group, resource, name)
    }

    pub fn stale(group: &str, resource: &str, name: &str) -> Self {
        Self::conflict(
            group,
            resource,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 Invalid: `Deployment.apps "x" is invalid: spec.replicas: Invalid value: …`.
    pub fn invalid(group: &str, kind: &str, name: &str, errs: &[FieldError]) -> Self {
        let qualified_kind = if group.is_empty() { kind.to_string() } else { format!("{kind}.{group}") };
        let mut e =
            Self::new(422, "Invalid", format!("{qualified_kind} \"{name}\" is invalid: {}", aggregate_message(errs)))
                .with_target(group, kind, name);
        e.causes = errs
            .iter()
            .map(|fe| Cause { reason: fe.kind.reason().to_string(), message: fe.body(), field: fe.field.clone() })
            .collect();
        e
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    pub fn forbidden(user: &str, verb: &str, info: &ResourceTarget<'_>) -> Self {
        Self::forbidden_because(user, verb, info, "")
    }

    /// [`ApiError::forbidden`] with the authorizers' reason after the message (upstream's
    /// `<message>: <reason>`), when they gave one.
    pub fn forbidden_because(user: &str, verb: &str, info: &ResourceTarget<'_>, reason: &str) -> Self {
        let mut what = match info {
            ResourceTarget::Resource { group, resource, subresource, namespace, name } => {
                let res = match subresource {
                    Some(s) => format!("{resource}/{s}"),
                    None => resource.to_string(),
                };
                let mut m = format!(
                    "{} is forbidden: User \"{user}\" cannot {verb} resource \"{res}\" in API group \"{group}\"",
                    match name {
                        Some(n) => format!("{} \"{n}\"", qualified_resource(group, resource)),
                        None => qualified_resource(group, resource),
                    }
                );
                match namespace {
                    Some(ns) => m.push_str(&format!(" in the namespace \"{ns}\"")),
                    None => m.push_str(" at the cluster scope"),
                }
                m
            }
            ResourceTarget::Path(p) => format!("forbidden: User \"{user}\" cannot {verb} path \"{p}\""),
        };
        if !reason.is_empty() {
            what.push_str(": ");
            what.push_str(reason);
        }
        let mut e = Self::new(403, "Forbidden", what);
        if let ResourceTarget::Resource { group, resource, name, .. } = info {
            e = e.with_target(group, resource, name.unwrap_or(""));
        }
        e
    }

    pub fn forbidden_message(group: &str, resource: &str, name: &str, message: impl Into<String>) -> Self {
        let msg = format!("{} \"{name}\" is forbidden: {}", qualified_resource(group, resource), message.into());
        Self::new(403, "Forbidden", msg).with_target(group, resource, name)
    }

    pub fn method_not_allowed(method: &str, what: &str) -> Self {
        Self::new(405, "MethodNotAllowed", format!("{method} is not supported on {what}"))
    }

    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, "NotAcceptable", message)
    }

    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub fn too_large(limit: usize) -> Self {
        Self::new(413, "RequestEntityTooLarge", format!("Request entity too large: limit is {limit}"))
    }

    pub fn unsupported_media_type(ct: &str) -> Self {
        Self::new(415, "UnsupportedMediaType", format!("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf (got \"{ct}\")"))
    }

    pub fn too_many_requests(message: impl Into<String>, retry_after: u64) -> Self {
        let mut e = Self::new(429, "TooManyRequests", message);
        e.retry_after = Some(retry_after);
        e
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", format!("Internal error occurred: {}", message.into()))
    }

    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(504, "Timeout", message)
    }

    pub fn service_unavailable(message: impl Into<String>) -> Self {
        Self::new(503, "ServiceUnavailable", message)
    }

    /// The `Status` object, its fields in the order upstream's `metav1.Status` declares them
    /// (kind, apiVersion, metadata, status, message, reason, details, code; details as name,
    /// group, kind, causes, retryAfterSeconds), empty ones left out as Go's `omitempty` does.
    pub fn status(&self) -> Value {
        let mut status = serde_json::Map::new();
        status.insert("kind".into(), json!("Status"));
        status.insert("apiVersion".into(), json!("v1"));
        status.insert("metadata".into(), json!({}));
        status.insert("status".into(), json!("Failure"));
        if !self.message.is_empty() {
            status.insert("message".into(), json!(self.message));
        }
        if !self.reason.is_empty() {
            status.insert("reason".into(), json!(self.reason));
        }
        let mut details = serde_json::Map::new();
        if let Some(n) = self.name.as_deref().filter(|n| !n.is_empty()) {
            details.insert("name".into(), json!(n));
        }
        if let Some(g) = self.group.as_deref().filter(|g| !g.is_empty()) {
            details.insert("group".into(), json!(g));
        }
        if let Some(k) = self.kind.as_deref().filter(|k| !k.is_empty()) {
            details.insert("kind".into(), json!(k));
        }
        if !self.causes.is_empty() {
            let causes = self
                .causes
                .iter()
                .map(|c| {
                    let mut cause = serde_json::Map::new();
                    for (k, v) in [("reason", &c.reason), ("message", &c.message), ("field", &c.field)] {
                        if !v.is_empty() {
                            cause.insert(k.into(), json!(v));
                        }
                    }
                    Value::Object(cause)
                })
                .collect();
            details.insert("causes".into(), Value::Array(causes));
        }
        if let Some(r) = self.retry_after {
            details.insert("retryAfterSeconds".into(), json!(r));
        }
        if !details.is_empty() {
            status.insert("details".into(), Value::Object(details));
        }
        status.insert("code".into(), json!(self.code));
        Value::Object(status)
    }

    /// The `Status` as upstream's JSON serializer writes it: compact, then a newline.
    pub fn status_bytes(&self) -> Vec<u8> {
        let mut body = serde_json::to_vec(&self.status()).unwrap_or_default();
        body.push(b'\n');
        body
    }
}

/// What a request targets, for 403 messages.
pub enum ResourceTarget<'a> {
    Resource {
        group: &'a str,
        resource: &'a str,
        subresource: Option<&'a str>,
        namespace: Option<&'a str>,
        name: Option<&'a str>,
    },
    Path(&'a str),
}

/// Maps store errors on one object to API errors.
pub fn from_store(e: k1s_store::StoreError, info: &ResourceInfo, name: &str) -> ApiError {
    use k1s_store::StoreError as S;
    match e {
        S::AlreadyExists(_) => ApiError::already_exists(info.group, info.resource, name),
        S::NotFound(_) => ApiError::not_found(info.group, info.resource, name),
        S::Conflict { .. } => ApiError::stale(info.group, info.resource, name),
        S::Compacted { requested, compacted } => {
            ApiError::gone(format!("too old resource version: {requested} ({compacted})"))
        }
        S::FutureRevision { requested, current } => {
            ApiError::timeout(format!("Too large resource version: {requested}, current: {current}"))
        }
        other => {
            tracing::error!(error = %other, "store failure");
            ApiError::internal(other.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes kube-apiserver v1.35 answers to a second `POST /apis/apps/v1/namespaces/default/deployments`
    /// of the same name: clients (the Python client's `create_from_yaml`) compare these strings.
    #[test]
    fn already_exists_status_is_byte_for_byte_upstreams() {
        let e = ApiError::already_exists("apps", "deployments", "web");
        assert_eq!(
            String::from_utf8(e.status_bytes()).expect("utf-8"),
            concat!(
                r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","#,
                r#""message":"deployments.apps \"web\" already exists","reason":"AlreadyExists","#,
                r#""details":{"name":"web","group":"apps","kind":"deployments"},"code":409}"#,
                "\n"
            )
        );
    }

    #[test]
    fn invalid_status_orders_details_before_code_and_omits_empty_cause_fields() {
        let e = ApiError::invalid(
            "",
            "ConfigMap",
            "c",
            &[FieldError::required("data", ""), FieldError::invalid("", "x", "bad")],
        );
        let body = String::from_utf8(e.status_bytes()).expect("utf-8");
        let details = body.find(r#""details""#).expect("details");
        let code = body.find(r#""code":422"#).expect("code");
        assert!(details < code, "{body}");
        assert!(!body.contains(r#""field":"""#), "{body}");
        assert!(body.ends_with("}\n"), "{body}");
    }

    #[test]
    fn invalid_status_carries_causes_and_upstream_message() {
        let e = ApiError::invalid("apps", "Deployment", "web", &[FieldError::required("spec.selector", "")]);
        let s = e.status();
        assert_eq!(s["code"], 422);
        assert_eq!(s["message"], "Deployment.apps \"web\" is invalid: spec.selector: Required value");
        assert_eq!(s["details"]["causes"][0]["field"], "spec.selector");
        assert_eq!(s["details"]["causes"][0]["reason"], "FieldValueRequired");
    }

    #[test]
    fn forbidden_message_matches_upstream() {
        let e = ApiError::forbidden(
            "bob",
            "list",
            &ResourceTarget::Resource {
                group: "",
                resource: "pods",
                subresource: None,
                namespace: Some("default"),
                name: None,
            },
        );
        assert_eq!(
            e.message,
            "pods is forbidden: User \"bob\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
        );
    }
}
