//! The API server's own proxying (not the `k1s-proxy` crate, which programs nftables for
//! Services). Pod subresources the node's kubelet serves: `pods/log`, `pods/exec`, `pods/attach` and
//! `pods/portforward`. The API server looks up the pod and its node, checks what upstream
//! checks (container name, node assignment, log options), then talks to the kubelet over HTTPS
//! with its kubelet client certificate:
//!
//! - `log` streams the kubelet's `text/plain` body through, chunk by chunk;
//! - exec/attach over WebSocket `v5.channel.k8s.io` (kubectl ≥ 1.30's first try) are translated
//!   to SPDY/3.1 towards the kubelet ([`translate`]), since container runtimes only speak the
//!   older protocols;
//! - port-forward tunnelled in `SPDY/3.1+portforward.k8s.io` WebSockets is unwrapped to SPDY
//!   ([`tunnel`]);
//! - any other upgrade (SPDY/3.1, older WebSocket protocols) is passed through byte for byte.
//!
//! When the kubelet refuses an upgrade its answer is relayed as it is, which is what makes
//! kubectl fall back from WebSocket to SPDY and print the kubelet's reason.
//!
//! The `proxy` subresources of pods, Services and nodes are in [`backend`].

mod backend;
mod kubelet;
pub(crate) mod spdy;
mod translate;
mod tunnel;
mod websocket;

pub(crate) use backend::{forwarded_headers, relay as relay_response};
pub use kubelet::{KubeletClientConfig, KubeletClientError, KubeletTarget};

use crate::endpoints::command::Subresource;
use crate::endpoints::Body;
use crate::error::ApiError;
use crate::registry::Registry;
use crate::request::{Query, RequestInfo};
use bytes::Bytes;
use http::{header, HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Incoming;
use k1s_api::errors::chain;
use k1s_api::FieldError;
pub(crate) use kubelet::KubeletClient;
use serde_json::Value;
use std::convert::Infallible;

/// The kubelet port when a Node does not report one.
const DEFAULT_KUBELET_PORT: u16 = 10250;
/// Largest kubelet error body relayed.
const MAX_ERROR_BODY: usize = 64 * 1024;
const X_STREAM_PROTOCOL_VERSION: &str = "x-stream-protocol-version";

/// Request headers passed on to the kubelet for an upgrade.
const UPGRADE_HEADERS: &[&str] = &[
    "connection",
    "upgrade",
    X_STREAM_PROTOCOL_VERSION,
    "sec-websocket-key",
    "sec-websocket-version",
    "sec-websocket-protocol",
    "user-agent",
];
/// Response headers passed back to the client from a kubelet's `101`.
const UPGRADE_RESPONSE_HEADERS: &[&str] =
    &["connection", "upgrade", X_STREAM_PROTOCOL_VERSION, "sec-websocket-accept", "sec-websocket-protocol"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Exec,
    Attach,
    PortForward,
}

/// A backend's body passed through frame by frame; an error ends it (and is logged as `what`).
fn streamed(body: Incoming, what: &'static str) -> Body {
    let stream = futures::stream::unfold(body, move |mut b| async move {
        match b.frame().await {
            Some(Ok(frame)) => Some((Ok::<_, Infallible>(frame), b)),
            Some(Err(e)) => {
                tracing::debug!(error = %e, "{what} ended");
                None
            }
            None => None,
        }
    });
    StreamBody::new(stream).boxed_unsync()
}

/// Serves the `proxy` subresources of pods, Services and nodes (see [`backend`]).
pub(crate) async fn proxy(
    registry: &Registry,
    kubelet: Option<&KubeletClient>,
    req: Request<Incoming>,
    info: &RequestInfo,
) -> Result<Response<Body>, ApiError> {
    backend::handle(registry, kubelet, req, info).await
}

/// Serves `pods/{log,exec,attach,portforward}` (the caller routes only those here).
pub(crate) async fn handle(
    registry: &Registry,
    kubelet: Option<&KubeletClient>,
    req: Request<Incoming>,
    info: &RequestInfo,
    query: &Query,
    sub: Subresource,
) -> Result<Response<Body>, ApiError> {
    let Some(client) = kubelet else {
        return Err(ApiError::service_unavailable(format!(
            "the {} subresource is served by the node agent, which is not running",
            sub.as_str()
        )));
    };
    match sub {
        Subresource::Log => log(registry, client, req, info, query).await,
        Subresource::Exec => stream(registry, client, req, info, query, Kind::Exec).await,
        Subresource::Attach => stream(registry, client, req, info, query, Kind::Attach).await,
        Subresource::PortForward => stream(registry, client, req, info, query, Kind::PortForward).await,
        other => {
            Err(ApiError::not_found("", "pods", &format!("{}/{}", info.name.as_deref().unwrap_or(""), other.as_str())))
        }
    }
}

fn get_pod(registry: &Registry, info: &RequestInfo) -> Result<Value, ApiError> {
    let pods = crate::registry::builtin("", "v1", "pods")?;
    registry.get(pods, info.namespace.as_deref(), info.name.as_deref().unwrap_or(""))
}

/// Where the kubelet of the pod's node listens: its InternalIP (else another address) and the
/// port it reports in `status.daemonEndpoints`.
fn kubelet_target(registry: &Registry, node_name: &str) -> Result<KubeletTarget, ApiError> {
    let nodes = crate::registry::builtin("", "v1", "nodes")?;
    let node = registry.get(nodes, None, node_name)?;
    target_of(&node).ok_or_else(|| ApiError::bad_request(format!("node {node_name} has no usable address")))
}

/// `host:port`, with an IPv6 host in brackets.
pub(crate) fn host_port(host: &str, port: impl std::fmt::Display) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

pub(crate) fn target_of(node: &Value) -> Option<KubeletTarget> {
    let addresses = node.pointer("/status/addresses").and_then(Value::as_array)?;
    let by_type = |t: &str| {
        addresses
            .iter()
            .find(|a| a.get("type").and_then(Value::as_str) == Some(t))
            .and_then(|a| a.get("address").and_then(Value::as_str))
            .filter(|a| !a.is_empty())
    };
    let host =
        ["InternalIP", "Hostname", "ExternalIP", "InternalDNS", "ExternalDNS"].iter().find_map(|t| by_type(t))?;
    let port = node
        .pointer("/status/daemonEndpoints/kubeletEndpoint/Port")
        .and_then(Value::as_u64)
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p != 0)
        .unwrap_or(DEFAULT_KUBELET_PORT);
    Some(KubeletTarget { host: host.to_string(), port })
}

fn names(pod: &Value, list: &str) -> Vec<String> {
    pod.pointer(&format!("/spec/{list}"))
        .and_then(Value::as_array)
        .map(|cs| cs.iter().filter_map(|c| c.get("name").and_then(Value::as_str)).map(str::to_string).collect())
        .unwrap_or_default()
}

fn has_container(pod: &Value, name: &str) -> bool {
    ["initContainers", "containers", "ephemeralContainers"].iter().any(|l| names(pod, l).iter().any(|n| n == name))
}

fn pod_name(pod: &Value) -> &str {
    pod.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("")
}

/// Upstream's `validateContainer` for logs.
fn log_container(pod: &Value, requested: Option<&str>) -> Result<String, ApiError> {
    let name = pod_name(pod);
    match requested.filter(|c| !c.is_empty()) {
        Some(c) if has_container(pod, c) => Ok(c.to_string()),
        Some(c) => Err(ApiError::bad_request(format!("container {c} is not valid for pod {name}"))),
        None => {
            let containers = names(pod, "containers");
            match containers.len() {
                1 => Ok(containers[0].clone()),
                0 => Err(ApiError::bad_request(format!("a container name must be specified for pod {name}"))),
                _ => {
                    let all: Vec<String> = ["initContainers", "containers", "ephemeralContainers"]
                        .iter()
                        .flat_map(|l| names(pod, l))
                        .collect();
                    Err(ApiError::bad_request(format!(
                        "a container name must be specified for pod {name}, choose one of: [{}]",
                        all.join(" ")
                    )))
                }
            }
        }
    }
}

/// Upstream's container choice for exec and attach (`streamLocation`).
fn stream_container(pod: &Value, requested: Option<&str>) -> Result<String, ApiError> {
    let name = pod_name(pod);
    match requested.filter(|c| !c.is_empty()) {
        Some(c) if has_container(pod, c) => Ok(c.to_string()),
        Some(c) => Err(ApiError::bad_request(format!("container {c} is not valid for pod {name}"))),
        None => {
            let containers = names(pod, "containers");
            match containers.len() {
                1 => Ok(containers[0].clone()),
                0 => Err(ApiError::bad_request(format!("a container name must be specified for pod {name}"))),
                _ => {
                    let mut msg = format!(
                        "a container name must be specified for pod {name}, choose one of: [{}]",
                        containers.join(" ")
                    );
                    let init = names(pod, "initContainers");
                    if !init.is_empty() {
                        msg.push_str(&format!(" or one of the init containers: [{}]", init.join(" ")));
                    }
                    Err(ApiError::bad_request(msg))
                }
            }
        }
    }
}

/// The pod's status for `container` (regular, init or ephemeral).
fn container_status<'a>(pod: &'a Value, container: &str) -> Option<&'a Value> {
    ["containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"].iter().find_map(|l| {
        pod.pointer(&format!("/status/{l}"))
            .and_then(Value::as_array)?
            .iter()
            .find(|s| s.get("name").and_then(Value::as_str) == Some(container))
    })
}

/// Whether the container has logs to show, with upstream's messages when it has not
/// (the kubelet's `validateContainerLogStatus`).
fn check_log_status(pod: &Value, container: &str, previous: bool) -> Result<(), ApiError> {
    let name = pod_name(pod);
    // No status yet (the kubelet has not reported): let the kubelet decide.
    let Some(status) = container_status(pod, container) else { return Ok(()) };
    let last_terminated_id =
        status.pointer("/lastState/terminated").map(|t| t.get("containerID").and_then(Value::as_str).unwrap_or(""));
    let state = status.get("state");
    let running = state.and_then(|s| s.get("running")).is_some();
    let terminated = state.and_then(|s| s.get("terminated"));
    let waiting = state.and_then(|s| s.get("waiting"));
    if previous {
        return match last_terminated_id {
            Some(id) if !id.is_empty() => Ok(()),
            _ => Err(ApiError::bad_request(format!(
                "previous terminated container {container:?} in pod {name:?} not found"
            ))),
        };
    }
    if running {
        return Ok(());
    }
    if let Some(t) = terminated {
        let id = t.get("containerID").and_then(Value::as_str).unwrap_or("");
        if !id.is_empty() || last_terminated_id.is_some_and(|i| !i.is_empty()) {
            return Ok(());
        }
        return Err(ApiError::bad_request(format!("container {container:?} in pod {name:?} is terminated")));
    }
    if let Some(id) = last_terminated_id {
        if id.is_empty() {
            return Err(ApiError::bad_request(format!("container {container:?} in pod {name:?} is terminated")));
        }
        return Ok(());
    }
    if let Some(w) = waiting {
        let why = match w.get("reason").and_then(Value::as_str).unwrap_or("") {
            "ErrImagePull" => "image can't be pulled",
            "ImagePullBackOff" => "trying and failing to pull image",
            r => r,
        };
        return Err(ApiError::bad_request(format!(
            "container {container:?} in pod {name:?} is waiting to start: {why}"
        )));
    }
    Err(ApiError::bad_request(format!("container {container:?} in pod {name:?} is waiting to start - no logs yet")))
}

/// Validates `PodLogOptions` as upstream does and builds the kubelet's query.
fn log_query(query: &Query, pod_name: &str) -> Result<(String, bool, bool), ApiError> {
    let mut errs = Vec::new();
    let mut out = form_urlencoded::Serializer::new(String::new());
    let follow = query.bool("follow");
    let previous = query.bool("previous");
    if follow {
        out.append_pair("follow", "true");
    }
    if previous {
        out.append_pair("previous", "true");
    }
    if query.bool("timestamps") {
        out.append_pair("timestamps", "true");
    }
    let int = |name: &str, errs: &mut Vec<FieldError>| -> Option<i64> {
        let v = query.get(name).filter(|v| !v.is_empty())?;
        match v.parse::<i64>() {
            Ok(n) => Some(n),
            Err(_) => {
                errs.push(FieldError::invalid(name, v, "must be an integer"));
                None
            }
        }
    };
    let since_seconds = int("sinceSeconds", &mut errs);
    let tail_lines = int("tailLines", &mut errs);
    let limit_bytes = int("limitBytes", &mut errs);
    if let Some(s) = since_seconds {
        if s < 1 {
            errs.push(FieldError::invalid("sinceSeconds", s, "must be greater than 0"));
        }
        out.append_pair("sinceSeconds", &s.to_string());
    }
    if let Some(t) = query.get("sinceTime").filter(|v| !v.is_empty()) {
        match t.parse::<jiff::Timestamp>() {
            Ok(ts) => {
                out.append_pair("sinceTime", &ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
            }
            Err(_) => errs.push(FieldError::invalid("sinceTime", t, "must be an RFC 3339 time")),
        }
        if since_seconds.is_some() {
            errs.push(FieldError::forbidden("", "at most one of `sinceTime` or `sinceSeconds` may be specified"));
        }
    }
    if let Some(t) = tail_lines {
        if t < 0 {
            errs.push(FieldError::invalid("tailLines", t, "must be greater than or equal to 0"));
        }
        out.append_pair("tailLines", &t.to_string());
    }
    if let Some(l) = limit_bytes {
        if l < 1 {
            errs.push(FieldError::invalid("limitBytes", l, "must be greater than 0"));
        }
        out.append_pair("limitBytes", &l.to_string());
    }
    if !errs.is_empty() {
        return Err(ApiError::invalid("", "PodLogOptions", pod_name, &errs));
    }
    Ok((out.finish(), follow, previous))
}

fn segment(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

fn full(code: StatusCode, content_type: Option<HeaderValue>, body: Bytes) -> Response<Body> {
    let mut r = Response::new(Full::new(body).boxed_unsync());
    *r.status_mut() = code;
    if let Some(ct) = content_type {
        r.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    r
}

async fn read_limited(body: Incoming) -> Bytes {
    let mut body = body;
    let mut out = bytes::BytesMut::new();
    while let Some(Ok(frame)) = body.frame().await {
        if let Ok(d) = frame.into_data() {
            out.extend_from_slice(&d[..d.len().min(MAX_ERROR_BODY.saturating_sub(out.len()))]);
            if out.len() >= MAX_ERROR_BODY {
                break;
            }
        }
    }
    out.freeze()
}

fn reason_for(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        409 => "Conflict",
        422 => "Invalid",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "InternalError",
    }
}

/// A kubelet error answer as a Status: its code, and its text as the message.
async fn kubelet_error(resp: Response<Incoming>) -> ApiError {
    let code = resp.status().as_u16();
    let body = read_limited(resp.into_body()).await;
    let text = String::from_utf8_lossy(&body).trim().to_string();
    let message = if text.is_empty() { format!("the kubelet answered {code}") } else { text };
    ApiError::new(code, reason_for(code), message)
}

fn dial_error(e: KubeletClientError) -> ApiError {
    let message = chain(&e);
    tracing::debug!(error = %message, "reaching the kubelet failed");
    ApiError::internal(message)
}

async fn log(
    registry: &Registry,
    client: &KubeletClient,
    req: Request<Incoming>,
    info: &RequestInfo,
    query: &Query,
) -> Result<Response<Body>, ApiError> {
    if req.method() != Method::GET {
        return Err(ApiError::method_not_allowed(req.method().as_str(), "pods/log"));
    }
    let pod = get_pod(registry, info)?;
    let name = pod_name(&pod).to_string();
    let container = log_container(&pod, query.get("container"))?;
    let (kubelet_query, _follow, previous) = log_query(query, &name)?;
    let plain = Some(HeaderValue::from_static("text/plain"));
    let Some(node) = pod.pointer("/spec/nodeName").and_then(Value::as_str).filter(|n| !n.is_empty()) else {
        // Not scheduled yet: upstream answers with an empty log.
        return Ok(full(StatusCode::OK, plain, Bytes::new()));
    };
    check_log_status(&pod, &container, previous)?;
    let target = kubelet_target(registry, node)?;
    let ns = info.namespace.as_deref().unwrap_or("");
    let mut path = format!("/containerLogs/{}/{}/{}", segment(ns), segment(&name), segment(&container));
    if !kubelet_query.is_empty() {
        path.push('?');
        path.push_str(&kubelet_query);
    }
    let resp = client.send(&target, Method::GET, &path, HeaderMap::new()).await.map_err(dial_error)?;
    if !resp.status().is_success() {
        return Err(kubelet_error(resp).await);
    }
    let mut r = Response::new(streamed(resp.into_body(), "kubelet log stream"));
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    Ok(r)
}

/// The kubelet's query for exec/attach (`stdin=1` style, as upstream's `streamParams`) or
/// port-forward (`port=80,443`).
fn stream_query(kind: Kind, query: &Query) -> Result<(String, translate::StreamOptions), ApiError> {
    let mut out = form_urlencoded::Serializer::new(String::new());
    let opts = translate::StreamOptions {
        stdin: query.bool("stdin"),
        stdout: query.bool("stdout"),
        stderr: query.bool("stderr"),
        tty: query.bool("tty"),
    };
    match kind {
        Kind::Exec | Kind::Attach => {
            if !opts.stdin && !opts.stdout && !opts.stderr {
                return Err(ApiError::bad_request("you must specify at least 1 of stdin, stdout, stderr"));
            }
            for (on, key) in [(opts.stdin, "input"), (opts.stdout, "output"), (opts.stderr, "error"), (opts.tty, "tty")]
            {
                if on {
                    out.append_pair(key, "1");
                }
            }
            if kind == Kind::Exec {
                let command = query.all("command");
                if command.is_empty() {
                    return Err(ApiError::bad_request("you must specify at least one command for the container"));
                }
                for c in command {
                    out.append_pair("command", c);
                }
            }
        }
        Kind::PortForward => {
            let ports: Vec<&str> =
                query.all("ports").iter().flat_map(|p| p.split(',')).map(str::trim).filter(|p| !p.is_empty()).collect();
            for p in &ports {
                if p.parse::<u16>().ok().filter(|n| *n != 0).is_none() {
                    return Err(ApiError::bad_request(format!("invalid port {p:?}")));
                }
            }
            if !ports.is_empty() {
                out.append_pair("port", &ports.join(","));
            }
        }
    }
    Ok((out.finish(), opts))
}

fn copy_headers(from: &HeaderMap, names: &[&'static str]) -> HeaderMap {
    let mut to = HeaderMap::new();
    for n in names {
        let name = HeaderName::from_static(n);
        for v in from.get_all(&name) {
            to.append(name.clone(), v.clone());
        }
    }
    to
}

/// Relays a kubelet's non-upgrade answer as it is.
async fn relay(resp: Response<Incoming>) -> Response<Body> {
    let code = resp.status();
    let ct = resp.headers().get(header::CONTENT_TYPE).cloned();
    let body = read_limited(resp.into_body()).await;
    full(code, ct, body)
}

async fn stream(
    registry: &Registry,
    client: &KubeletClient,
    mut req: Request<Incoming>,
    info: &RequestInfo,
    query: &Query,
    kind: Kind,
) -> Result<Response<Body>, ApiError> {
    if !matches!(*req.method(), Method::GET | Method::POST) {
        return Err(ApiError::method_not_allowed(req.method().as_str(), &format!("pods/{}", kind.subresource())));
    }
    let pod = get_pod(registry, info)?;
    let name = pod_name(&pod).to_string();
    let container = match kind {
        Kind::PortForward => None,
        _ => Some(stream_container(&pod, query.get("container"))?),
    };
    let Some(node) = pod.pointer("/spec/nodeName").and_then(Value::as_str).filter(|n| !n.is_empty()) else {
        return Err(ApiError::bad_request(format!("pod {name} does not have a host assigned")));
    };
    let (kubelet_query, opts) = stream_query(kind, query)?;
    let ns = info.namespace.as_deref().unwrap_or("");
    let mut path = match (&container, kind) {
        (Some(c), Kind::Exec) => format!("/exec/{}/{}/{}", segment(ns), segment(&name), segment(c)),
        (Some(c), _) => format!("/attach/{}/{}/{}", segment(ns), segment(&name), segment(c)),
        (None, _) => format!("/portForward/{}/{}", segment(ns), segment(&name)),
    };
    if !kubelet_query.is_empty() {
        path.push('?');
        path.push_str(&kubelet_query);
    }
    let headers = req.headers().clone();
    if !websocket::is_upgrade(&headers) {
        return Err(ApiError::bad_request("Upgrade request required"));
    }
    let target = kubelet_target(registry, node)?;
    let offered = websocket::offered_protocols(&headers);
    let client_upgrade = hyper::upgrade::on(&mut req);
    drop(req);
    let is_ws = websocket::is_websocket(&headers);

    if is_ws && kind != Kind::PortForward && offered.iter().any(|p| p == translate::PROTOCOL_V5) {
        return translated(client, &target, &path, &headers, client_upgrade, opts).await;
    }
    let tunnelled: Vec<String> = offered
        .iter()
        .filter_map(|p| p.strip_prefix(tunnel::TUNNEL_PREFIX))
        .filter(|p| p.ends_with(".k8s.io"))
        .map(str::to_string)
        .collect();
    if is_ws && kind == Kind::PortForward && !tunnelled.is_empty() {
        return tunnelled_port_forward(client, &target, &path, &headers, client_upgrade, &tunnelled).await;
    }
    // SPDY or an older WebSocket protocol: the kubelet and the runtime speak it themselves.
    let method = if is_ws { Method::GET } else { Method::POST };
    let resp =
        client.send(&target, method, &path, copy_headers(&headers, UPGRADE_HEADERS)).await.map_err(dial_error)?;
    if resp.status() != StatusCode::SWITCHING_PROTOCOLS {
        return Ok(relay(resp).await);
    }
    let mut answer = full(StatusCode::SWITCHING_PROTOCOLS, None, Bytes::new());
    *answer.headers_mut() = copy_headers(resp.headers(), UPGRADE_RESPONSE_HEADERS);
    let backend = hyper::upgrade::on(resp);
    tokio::spawn(async move {
        match backend.await {
            Ok(b) => tunnel::splice(client_upgrade, b).await,
            Err(e) => tracing::debug!(error = %e, "kubelet upgrade failed"),
        }
    });
    Ok(answer)
}

impl Kind {
    fn subresource(self) -> &'static str {
        match self {
            Kind::Exec => "exec",
            Kind::Attach => "attach",
            Kind::PortForward => "portforward",
        }
    }
}

/// Headers of an SPDY/3.1 upgrade request offering `protocols`.
fn spdy_upgrade_headers(protocols: &[&str]) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    h.insert(header::UPGRADE, HeaderValue::from_static("SPDY/3.1"));
    for p in protocols {
        if let Ok(v) = HeaderValue::from_str(p) {
            h.append(HeaderName::from_static(X_STREAM_PROTOCOL_VERSION), v);
        }
    }
    h
}

async fn translated(
    client: &KubeletClient,
    target: &KubeletTarget,
    path: &str,
    client_headers: &HeaderMap,
    client_upgrade: hyper::upgrade::OnUpgrade,
    opts: translate::StreamOptions,
) -> Result<Response<Body>, ApiError> {
    let resp = client
        .send(target, Method::POST, path, spdy_upgrade_headers(&[translate::SPDY_PROTOCOL]))
        .await
        .map_err(dial_error)?;
    if resp.status() != StatusCode::SWITCHING_PROTOCOLS {
        // kubectl treats a refused WebSocket upgrade as "fall back to SPDY".
        return Ok(relay(resp).await);
    }
    let backend = hyper::upgrade::on(resp).await.map_err(|e| ApiError::internal(format!("kubelet upgrade: {e}")))?;
    let mut session = spdy::session::Session::start(hyper_util::rt::TokioIo::new(backend))
        .map_err(|e| ApiError::internal(chain(&e)))?;
    let streams = match translate::open_streams(&mut session, opts).await {
        Ok(s) => s,
        Err(e) => {
            session.close().await;
            return Err(ApiError::internal(format!("error creating the streams to the kubelet: {}", chain(&e))));
        }
    };
    let Some(answer) = websocket::accept(client_headers, translate::PROTOCOL_V5) else {
        session.close().await;
        return Err(ApiError::bad_request("invalid WebSocket handshake"));
    };
    tokio::spawn(async move {
        match client_upgrade.await {
            Ok(up) => {
                let (sink, source) = websocket::server(up).await;
                translate::run(sink, source, session, streams, opts).await;
            }
            Err(e) => {
                tracing::debug!(error = %e, "client upgrade failed");
                session.close().await;
            }
        }
    });
    Ok(answer)
}

async fn tunnelled_port_forward(
    client: &KubeletClient,
    target: &KubeletTarget,
    path: &str,
    client_headers: &HeaderMap,
    client_upgrade: hyper::upgrade::OnUpgrade,
    protocols: &[String],
) -> Result<Response<Body>, ApiError> {
    let offered: Vec<&str> = protocols.iter().map(String::as_str).collect();
    let resp = client.send(target, Method::POST, path, spdy_upgrade_headers(&offered)).await.map_err(dial_error)?;
    if resp.status() != StatusCode::SWITCHING_PROTOCOLS {
        return Ok(relay(resp).await);
    }
    let chosen = resp
        .headers()
        .get(X_STREAM_PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .unwrap_or(offered.first().copied().unwrap_or(tunnel::PORT_FORWARD_PROTOCOL))
        .to_string();
    let Some(answer) = websocket::accept(client_headers, &format!("{}{chosen}", tunnel::TUNNEL_PREFIX)) else {
        return Err(ApiError::bad_request("invalid WebSocket handshake"));
    };
    let backend = hyper::upgrade::on(resp);
    tokio::spawn(async move {
        let (client, backend) = match (client_upgrade.await, backend.await) {
            (Ok(c), Ok(b)) => (c, b),
            (Err(e), _) | (_, Err(e)) => {
                tracing::debug!(error = %e, "port-forward tunnel upgrade failed");
                return;
            }
        };
        let (sink, source) = websocket::server(client).await;
        tunnel::tunnel(sink, source, hyper_util::rt::TokioIo::new(backend)).await;
    });
    Ok(answer)
}

#[cfg(test)]
mod kubectl_tests;
#[cfg(test)]
mod tests;
