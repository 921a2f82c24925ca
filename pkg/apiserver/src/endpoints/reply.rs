//! Replies: JSON documents, plain text, `Status` errors and admission warnings.

use super::body::{full, Body};
use crate::error::ApiError;
use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use serde_json::Value;

/// A JSON reply.
pub(crate) fn respond_json(code: StatusCode, v: &Value) -> Response<Body> {
    respond_bytes(code, serde_json::to_vec(v).unwrap_or_default())
}

/// A reply of JSON already encoded.
pub(crate) fn respond_bytes(code: StatusCode, body: Vec<u8>) -> Response<Body> {
    let mut r = Response::new(full(body));
    *r.status_mut() = code;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// The error as a Kubernetes `Status`, with `Retry-After` when it asks for one. The Status also
/// goes in the reply's extensions, for the request's audit event.
pub fn error_response(e: &ApiError) -> Response<Body> {
    let status = Bytes::from(e.status_bytes());
    let mut r = Response::new(full(status.clone()));
    *r.status_mut() = StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r.extensions_mut().insert(crate::audit::RefusalStatus(status));
    if let Some(s) = e.retry_after {
        if let Ok(v) = HeaderValue::from_str(&s.to_string()) {
            r.headers_mut().insert(header::RETRY_AFTER, v);
        }
    }
    r
}

/// A `text/plain` reply.
pub(crate) fn text(code: StatusCode, s: &str) -> Response<Body> {
    let mut r = Response::new(full(s.to_string()));
    *r.status_mut() = code;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

/// An empty reply (`304 Not Modified`, `301` with a Location set by the caller).
pub(crate) fn empty(code: StatusCode) -> Response<Body> {
    let mut r = Response::new(full(Bytes::new()));
    *r.status_mut() = code;
    r
}

/// Adds `Warning` headers.
pub(crate) fn with_warnings(mut r: Response<Body>, warnings: &[String]) -> Response<Body> {
    for w in warnings {
        let v = format!("299 - \"{}\"", w.replace('\\', "\\\\").replace('"', "\\\""));
        // Bytes, not str: a warning may be UTF-8 (obs-text in a header), as upstream sends it.
        if let Ok(v) = HeaderValue::from_bytes(v.as_bytes()) {
            r.headers_mut().append(header::WARNING, v);
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_status_objects_with_their_code() {
        let r = error_response(&ApiError::not_found_path());
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
        assert_eq!(r.headers()[header::CONTENT_TYPE], "application/json");
        assert!(r.headers().get(header::RETRY_AFTER).is_none());
        assert!(r.extensions().get::<crate::audit::RefusalStatus>().is_some(), "for the audit event");
        let r = error_response(&ApiError::too_many_requests("slow down", 7));
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()[header::RETRY_AFTER], "7");
    }

    #[test]
    fn warnings_are_quoted_299_headers() {
        let r = with_warnings(text(StatusCode::OK, "ok"), &["a \"quoted\" \\ warning".into(), "two".into()]);
        let got: Vec<&[u8]> = r.headers().get_all(header::WARNING).iter().map(HeaderValue::as_bytes).collect();
        assert_eq!(got, [&br#"299 - "a \"quoted\" \\ warning""#[..], &br#"299 - "two""#[..]]);
    }
}
