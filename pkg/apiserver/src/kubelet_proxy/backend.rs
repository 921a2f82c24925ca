//! The `proxy` subresources: `pods/{name}[:port]/proxy/…` and `services/{name}[:port]/proxy/…`
//! send the request to the pod's IP (for a Service, one of its ready endpoints) over HTTP, and
//! `nodes/{name}/proxy/…` to the node's kubelet over HTTPS with the API server's kubelet client
//! certificate, as upstream's API server does. Names may carry a scheme (`http:web:8080`), as
//! upstream's do; only `http` is proxied to pods and Services.

use super::{host_port, kubelet_target, KubeletClient};
use crate::endpoints::Body;
use crate::error::ApiError;
use crate::registry::builtin;
use crate::registry::{ListOptions, Registry};
use crate::request::RequestInfo;
use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use std::time::Duration;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Headers that belong to one hop and are not passed on (RFC 9110 §7.6.1), and the caller's
/// credentials, which are the API server's business only.
const HOP_HEADERS: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "authorization",
    "impersonate-user",
    "impersonate-group",
    "impersonate-uid",
];

/// `[scheme:]name[:port]`, as upstream splits a proxy name.
fn split_name(raw: &str) -> (&str, &str, &str) {
    let parts: Vec<&str> = raw.splitn(3, ':').collect();
    match parts.as_slice() {
        [name] => ("", name, ""),
        [name, port] => ("", name, port),
        [scheme, name, port] => (scheme, name, port),
        _ => ("", raw, ""),
    }
}

/// The path after `…/{resource}/{name}/proxy`, with its trailing slash kept.
fn proxied_path(path: &str, resource: &str) -> String {
    let segs: Vec<&str> = path.split('/').collect();
    for i in 0..segs.len() {
        if segs[i] == resource && segs.get(i + 2) == Some(&"proxy") {
            return format!("/{}", segs[i + 3..].join("/"));
        }
    }
    "/".to_string()
}

/// The pod's IP and the port to use: the one named, else the first container port, else 80.
fn pod_address(pod: &Value, port: &str) -> Result<String, ApiError> {
    let name = pod.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let ip = pod
        .pointer("/status/podIP")
        .and_then(Value::as_str)
        .filter(|ip| !ip.is_empty())
        .ok_or_else(|| ApiError::service_unavailable(format!("pod {name} has no IP address yet")))?;
    let port = if port.is_empty() {
        pod.pointer("/spec/containers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find_map(|c| c.pointer("/ports/0/containerPort").and_then(Value::as_u64))
            .unwrap_or(80)
            .to_string()
    } else {
        port.to_string()
    };
    Ok(host_port(ip, port))
}

/// A ready endpoint of the Service's port (`port`: its name or number; empty for a Service with
/// one port), picked at random as upstream does.
fn service_address(registry: &Registry, namespace: &str, service: &Value, port: &str) -> Result<String, ApiError> {
    let name = service.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let ports: Vec<&Value> = service.pointer("/spec/ports").and_then(Value::as_array).into_iter().flatten().collect();
    let chosen = if port.is_empty() && ports.len() == 1 {
        ports.first().copied()
    } else {
        ports.iter().copied().find(|p| {
            p.get("name").and_then(Value::as_str).unwrap_or("") == port
                || p.get("port").and_then(Value::as_u64).is_some_and(|n| n.to_string() == port)
        })
    };
    let Some(svc_port) = chosen else {
        return Err(ApiError::service_unavailable(format!("no endpoints available for service \"{name}\"")));
    };
    let port_name = svc_port.get("name").and_then(Value::as_str).unwrap_or("");
    let slices = builtin("discovery.k8s.io", "v1", "endpointslices")?;
    let selector = k1s_api::selectors::Selector::parse_labels(&format!("kubernetes.io/service-name={name}"))
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let opts = ListOptions { label_selector: selector, ..Default::default() };
    let mut candidates = Vec::new();
    for slice in registry.list(slices, Some(namespace), &opts)?.items {
        let Some(number) = slice
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|p| p.get("name").and_then(Value::as_str).unwrap_or("") == port_name)
            .and_then(|p| p.get("port").and_then(Value::as_u64))
        else {
            continue;
        };
        for ep in slice.get("endpoints").and_then(Value::as_array).into_iter().flatten() {
            if ep.pointer("/conditions/ready").and_then(Value::as_bool) == Some(false) {
                continue;
            }
            if let Some(ip) = ep.pointer("/addresses/0").and_then(Value::as_str) {
                candidates.push(host_port(ip, number));
            }
        }
    }
    if candidates.is_empty() {
        return Err(ApiError::service_unavailable(format!("no endpoints available for service \"{name}\"")));
    }
    let pick =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    Ok(candidates.swap_remove(pick as usize % candidates.len()))
}

pub(crate) fn forwarded_headers(from: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (k, v) in from {
        if !HOP_HEADERS.contains(&k.as_str()) {
            out.append(k.clone(), v.clone());
        }
    }
    out
}

/// Streams a backend's answer back, without its hop-by-hop headers.
pub(crate) fn relay(resp: Response<Incoming>) -> Response<Body> {
    let (parts, body) = resp.into_parts();
    let mut r = Response::new(super::streamed(body, "proxied body"));
    *r.status_mut() = parts.status;
    *r.headers_mut() = forwarded_headers(&parts.headers);
    r
}

/// Sends one HTTP/1.1 request to `addr` (a pod or endpoint address).
async fn send_http(
    addr: &str,
    method: http::Method,
    uri: &str,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response<Incoming>, ApiError> {
    let dial =
        |e: String| ApiError::service_unavailable(format!("error trying to reach service: dial tcp {addr}: {e}"));
    let tcp = tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(addr))
        .await
        .map_err(|_| dial("i/o timeout".into()))?
        .map_err(|e| dial(e.to_string()))?;
    let _ = tcp.set_nodelay(true);
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await.map_err(|e| dial(e.to_string()))?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "proxied connection ended");
        }
    });
    let mut req = Request::builder()
        .method(method)
        .uri(uri)
        .body(Full::new(body))
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    *req.headers_mut() = headers;
    if let Ok(host) = HeaderValue::from_str(addr) {
        req.headers_mut().insert(header::HOST, host);
    }
    sender
        .send_request(req)
        .await
        .map_err(|e| ApiError::service_unavailable(format!("error trying to reach service: {e}")))
}

/// Serves `pods/proxy`, `services/proxy` and `nodes/proxy`.
pub(crate) async fn handle(
    registry: &Registry,
    kubelet: Option<&KubeletClient>,
    req: Request<Incoming>,
    info: &RequestInfo,
) -> Result<Response<Body>, ApiError> {
    let raw = info.name.clone().unwrap_or_default();
    let (scheme, name, port) = split_name(&raw);
    let path = proxied_path(req.uri().path(), &info.resource);
    let uri = match req.uri().query() {
        Some(q) => format!("{path}?{q}"),
        None => path,
    };
    let method = req.method().clone();
    let headers = forwarded_headers(req.headers());
    let namespace = info.namespace.as_deref();
    if info.resource == "nodes" {
        let client = kubelet.ok_or_else(|| ApiError::service_unavailable("the node agent is not running"))?;
        if method != http::Method::GET {
            return Err(ApiError::method_not_allowed(method.as_str(), "nodes/proxy"));
        }
        let mut target = kubelet_target(registry, name)?;
        if let Ok(p) = port.parse::<u16>() {
            target.port = p;
        }
        let resp = client
            .send(&target, method, &uri, headers)
            .await
            .map_err(|e| ApiError::service_unavailable(k1s_api::errors::chain(&e)))?;
        return Ok(relay(resp));
    }
    if !scheme.is_empty() && scheme != "http" {
        return Err(ApiError::service_unavailable(format!("the {scheme} scheme is not proxied by k1s, only http")));
    }
    let (_, body) = crate::endpoints::body::read_request_body(req).await?;
    let addr = match info.resource.as_str() {
        "pods" => pod_address(&registry.get(builtin("", "v1", "pods")?, namespace, name)?, port)?,
        _ => {
            let svc = registry.get(builtin("", "v1", "services")?, namespace, name)?;
            service_address(registry, namespace.unwrap_or("default"), &svc, port)?
        }
    };
    Ok(relay(send_http(&addr, method, &uri, headers, body).await?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderName;
    use serde_json::json;

    #[test]
    fn names_and_paths_split_as_upstreams() {
        assert_eq!(split_name("web"), ("", "web", ""));
        assert_eq!(split_name("web:8080"), ("", "web", "8080"));
        assert_eq!(split_name("https:web:443"), ("https", "web", "443"));
        assert_eq!(proxied_path("/api/v1/namespaces/d/pods/web:80/proxy", "pods"), "/");
        assert_eq!(proxied_path("/api/v1/namespaces/d/pods/web/proxy/", "pods"), "/");
        assert_eq!(proxied_path("/api/v1/namespaces/d/services/s/proxy/a/b/", "services"), "/a/b/");
        assert_eq!(proxied_path("/api/v1/nodes/n/proxy/metrics/resource", "nodes"), "/metrics/resource");
    }

    #[test]
    fn pods_are_reached_at_the_named_or_first_declared_port() {
        let pod = json!({"metadata": {"name": "web"}, "status": {"podIP": "10.42.0.7"},
                         "spec": {"containers": [{"name": "a"}, {"name": "b", "ports": [{"containerPort": 8080}]}]}});
        assert_eq!(pod_address(&pod, "").ok(), Some("10.42.0.7:8080".to_string()));
        assert_eq!(pod_address(&pod, "9000").ok(), Some("10.42.0.7:9000".to_string()));
        let bare = json!({"metadata": {"name": "web"}, "status": {"podIP": "fd00::7"}, "spec": {"containers": [{"name": "a"}]}});
        assert_eq!(pod_address(&bare, "").ok(), Some("[fd00::7]:80".to_string()));
        let pending = json!({"metadata": {"name": "web"}, "spec": {}});
        assert_eq!(pod_address(&pending, "").map_err(|e| e.code), Err(503));
    }

    #[test]
    fn hop_by_hop_headers_and_credentials_stay_behind() {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer x"));
        h.insert(header::CONNECTION, HeaderValue::from_static("keep-alive"));
        h.insert(header::ACCEPT, HeaderValue::from_static("text/html"));
        h.insert(HeaderName::from_static("impersonate-user"), HeaderValue::from_static("bob"));
        let out = forwarded_headers(&h);
        assert_eq!(out.len(), 1);
        assert_eq!(out.get(header::ACCEPT).and_then(|v| v.to_str().ok()), Some("text/html"));
    }
}
