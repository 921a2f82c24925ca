//! Request bodies: reading them within the size limit, and decoding them by Content-Type.

use crate::error::ApiError;
use bytes::Bytes;
use http::{header, HeaderMap, Request};
use http_body_util::{combinators::UnsyncBoxBody, BodyExt, Full};
use serde_json::Value;
use std::convert::Infallible;
use std::time::Duration;

/// The body of every reply.
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// Largest request body accepted (upstream's 3 MiB).
pub const MAX_BODY: usize = 3 * 1024 * 1024;
/// Oversized bodies up to this size are read and discarded before the 413 is sent.
const DRAIN_LIMIT: usize = 64 * 1024 * 1024;

/// A reply body of bytes already in hand.
pub(crate) fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into()).boxed_unsync()
}

/// A header as text; absent or not visible ASCII is empty.
pub(crate) fn header_str(h: &HeaderMap, name: header::HeaderName) -> &str {
    h.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

/// Reads the whole body, refusing one larger than [`MAX_BODY`] with a 413.
pub(crate) async fn read_request_body(req: Request<hyper::body::Incoming>) -> Result<(HeaderMap, Bytes), ApiError> {
    let (parts, mut body) = req.into_parts();
    let declared =
        parts.headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|s| s.parse::<usize>().ok());
    if declared.is_some_and(|len| len > DRAIN_LIMIT) {
        return Err(ApiError::too_large(MAX_BODY));
    }
    let mut buf = bytes::BytesMut::new();
    let mut total = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ApiError::bad_request(format!("reading request body: {e}")))?;
        if let Ok(data) = frame.into_data() {
            total += data.len();
            if total <= MAX_BODY {
                buf.extend_from_slice(&data);
            } else if total > DRAIN_LIMIT {
                break;
            }
        }
    }
    if total > MAX_BODY {
        // The body was read (and dropped) to its end so HTTP/2 clients get this answer rather
        // than a reset stream.
        return Err(ApiError::too_large(MAX_BODY));
    }
    Ok((parts.headers, buf.freeze()))
}

/// Reads and drops a small request body (at most 64 KiB, for at most a second) before a
/// refusal: an HTTP/2 stream whose body is left unread is reset, and clients (curl, Go) may
/// then report the reset instead of the answer.
pub(crate) async fn discard(req: Request<hyper::body::Incoming>) {
    const DRAIN: usize = 64 * 1024;
    let mut body = req.into_body();
    let mut read = 0usize;
    let drain = async {
        while let Some(Ok(frame)) = body.frame().await {
            read += frame.data_ref().map_or(0, |d| d.len());
            if read > DRAIN {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), drain).await;
}

/// The Content-Type, JSON when there is none (`kubectl scale` sends none).
pub(crate) fn content_type(headers: &HeaderMap) -> String {
    let ct = header_str(headers, header::CONTENT_TYPE);
    if ct.is_empty() {
        "application/json".into()
    } else {
        ct.to_string()
    }
}

/// Decodes an object body (JSON, YAML or Kubernetes protobuf); 415 for another media type,
/// 400 for an empty body.
pub(crate) fn decode_body(headers: &HeaderMap, body: &Bytes) -> Result<Value, ApiError> {
    let ct = content_type(headers);
    let base = ct.split(';').next().unwrap_or("").trim().to_string();
    match base.as_str() {
        "application/json" | "application/yaml" | "text/yaml" | "application/vnd.kubernetes.protobuf" | "*/*" | "" => {}
        other => return Err(ApiError::unsupported_media_type(other)),
    }
    if body.is_empty() {
        return Err(ApiError::bad_request("the request body is empty"));
    }
    crate::registry::parse_body(body, &base)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn with_content_type(ct: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_TYPE, HeaderValue::from_str(ct).expect("content type"));
        h
    }

    #[test]
    fn bodies_decode_by_content_type_and_json_is_the_default() {
        let obj = Bytes::from_static(br#"{"kind":"ConfigMap"}"#);
        assert_eq!(decode_body(&HeaderMap::new(), &obj).expect("no Content-Type")["kind"], "ConfigMap");
        let yaml = Bytes::from_static(b"kind: ConfigMap\n");
        assert_eq!(decode_body(&with_content_type("application/yaml"), &yaml).expect("yaml")["kind"], "ConfigMap");
        let json = with_content_type("application/json; charset=utf-8");
        assert_eq!(decode_body(&json, &obj).expect("json with parameters")["kind"], "ConfigMap");
        assert_eq!(content_type(&HeaderMap::new()), "application/json");
    }

    #[test]
    fn unknown_media_types_are_415_and_empty_bodies_400() {
        let e = decode_body(&with_content_type("text/plain"), &Bytes::from_static(b"x")).expect_err("text/plain");
        assert_eq!((e.code, e.reason), (415, "UnsupportedMediaType"));
        let e = decode_body(&HeaderMap::new(), &Bytes::new()).expect_err("empty");
        assert_eq!((e.code, e.reason), (400, "BadRequest"));
    }
}
