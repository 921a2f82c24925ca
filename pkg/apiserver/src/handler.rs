//! Request dispatch: authentication ▶ authorization ▶ the handler for the path (discovery,
//! OpenAPI, health, or a resource verb through the registry).

use crate::auth::{Attributes, Authenticator, Authorizer, Credentials, Decision, Peer, UserInfo};
use crate::discovery;
use crate::error::{ApiError, ResourceTarget};
use crate::object;
use crate::registry::{self, Ctx, DeleteOptions, FieldValidation, ListOptions, PatchType, Registry};
use crate::request::{Query, RequestInfo};
use crate::table::{self, Conversion, IncludeObject};
use crate::watch;
use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{combinators::UnsyncBoxBody, BodyExt, Full, StreamBody};
use k1s_api::resources::Backing;
use k1s_api::selectors::Selector;
use k1s_api::ResourceInfo;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// Largest request body accepted (upstream's 3 MiB).
pub const MAX_BODY: usize = 3 * 1024 * 1024;
/// Oversized bodies up to this size are read and discarded before the 413 is sent.
const DRAIN_LIMIT: usize = 64 * 1024 * 1024;

/// What the server answers with.
pub struct State {
    pub registry: Arc<Registry>,
    pub authn: Box<dyn Authenticator>,
    pub authz: Box<dyn Authorizer>,
    /// `host:port` clients use, for discovery's serverAddressByClientCIDRs.
    pub server_address: String,
    pub cancel: CancellationToken,
    pub ready: AtomicBool,
    pub bookmark_interval: Duration,
    /// How the API server reaches kubelets (`pods/log`, `exec`, `attach`, `portforward`).
    pub kubelet: Option<Arc<crate::kubelet_proxy::KubeletClient>>,
    /// ServiceAccount token issuing and validation.
    pub tokens: Arc<crate::serviceaccount::Tokens>,
    /// RBAC, also for the rules a SelfSubjectRulesReview lists.
    pub rbac: Arc<crate::rbac::RbacAuthorizer>,
    /// The kubelet scrapes behind `metrics.k8s.io`.
    pub metrics_api: crate::metrics_api::Cache,
    /// The request counters `/metrics` serves.
    pub monitoring: crate::monitoring::Monitoring,
    /// APIServices: which group-versions other servers serve, and the proxy to them.
    pub aggregator: Arc<crate::aggregator::Aggregator>,
}

fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into()).boxed_unsync()
}

pub(crate) fn respond_json(code: StatusCode, v: &Value) -> Response<Body> {
    respond_bytes(code, serde_json::to_vec(v).unwrap_or_default())
}

/// A reply of JSON already encoded.
fn respond_bytes(code: StatusCode, body: Vec<u8>) -> Response<Body> {
    let mut r = Response::new(full(body));
    *r.status_mut() = code;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

pub fn error_response(e: &ApiError) -> Response<Body> {
    let mut r =
        respond_bytes(StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), e.status_bytes());
    if let Some(s) = e.retry_after {
        if let Ok(v) = HeaderValue::from_str(&s.to_string()) {
            r.headers_mut().insert(header::RETRY_AFTER, v);
        }
    }
    r
}

fn text(code: StatusCode, s: &str) -> Response<Body> {
    let mut r = Response::new(full(s.to_string()));
    *r.status_mut() = code;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

fn header_str(h: &HeaderMap, name: header::HeaderName) -> &str {
    h.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

fn version_doc() -> Value {
    json!({
        "major": "1",
        "minor": "35",
        "gitVersion": concat!("v1.35.0+k1s-", env!("CARGO_PKG_VERSION")),
        "gitCommit": option_env!("K1S_GIT_COMMIT").unwrap_or("unknown"),
        "gitTreeState": "clean",
        "buildDate": option_env!("K1S_BUILD_DATE").unwrap_or("1970-01-01T00:00:00Z"),
        "goVersion": "rust",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, if std::env::consts::ARCH == "x86_64" { "amd64" } else if std::env::consts::ARCH == "aarch64" { "arm64" } else { std::env::consts::ARCH }),
    })
}

/// Handles one request from a connection whose verified client certificates are `peer`, and
/// counts it for `/metrics`.
pub async fn handle(state: Arc<State>, req: Request<hyper::body::Incoming>, peer: Arc<Peer>) -> Response<Body> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let query = Query::parse(req.uri().query());
    let info = RequestInfo::parse(&method, &path, &query);
    let apply = method == Method::PATCH
        && PatchType::from_content_type(header_str(req.headers(), header::CONTENT_TYPE)) == Some(PatchType::Apply);
    let res = info.is_resource.then(|| state.registry.resource(&info.group, &info.version, &info.resource)).flatten();
    let tracked = state.monitoring.start(&method, &info, res, query.all("dryRun").iter().any(|v| v == "All"), apply);
    let resp = authenticated(&state, req, &peer, method, path, &query, &info).await;
    match tracked {
        Some(t) => state.monitoring.finish(t, resp),
        None => resp,
    }
}

/// Authenticates, authorizes and serves one request.
async fn authenticated(
    state: &Arc<State>,
    req: Request<hyper::body::Incoming>,
    peer: &Peer,
    method: Method,
    path: String,
    query: &Query,
    info: &RequestInfo,
) -> Response<Body> {
    let auth_header = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).map(str::to_string);
    let user = match state.authn.authenticate(&Credentials { peer, authorization_header: auth_header.as_deref() }) {
        Ok(Some(u)) => u,
        Ok(None) => UserInfo::anonymous(),
        Err(e) => {
            tracing::debug!(error = %e, "authentication failed");
            return refuse(req, &ApiError::unauthorized()).await;
        }
    };
    let user = match crate::auth::impersonate(&*state.authz, user, req.headers()) {
        Ok(u) => u,
        Err(e) => return refuse(req, &e).await,
    };
    let span = tracing::debug_span!("request", %method, %path, verb = %info.verb, user = %user.name);
    let _enter = span.enter();
    drop(_enter);
    let public = matches!(path.as_str(), "/version" | "/version/" | "/healthz" | "/livez" | "/readyz")
        || path.starts_with("/livez/")
        || path.starts_with("/readyz/")
        || path.starts_with("/healthz/");
    if user.is_anonymous() && !public {
        return refuse(req, &ApiError::unauthorized()).await;
    }
    if !public {
        match state.authz.authorize(&Attributes { user: &user, info }) {
            Decision::Allow => {}
            Decision::Deny(_) | Decision::NoOpinion => {
                let target = if info.is_resource {
                    ResourceTarget::Resource {
                        group: &info.group,
                        resource: &info.resource,
                        subresource: info.subresource.as_deref(),
                        namespace: info.namespace.as_deref(),
                        name: info.name.as_deref(),
                    }
                } else {
                    ResourceTarget::Path(&path)
                };
                let e = ApiError::forbidden(&user.name, &info.verb, &target);
                return refuse(req, &e).await;
            }
        }
    }
    let started = std::time::Instant::now();
    // A group-version an APIService hands to another server is proxied there, as the caller
    // (authorized above, as upstream's aggregator authorizes before proxying).
    if !public {
        if let Some(remote) = state.aggregator.route(&path) {
            let resp = state.aggregator.proxy(req, &user, &remote).await;
            tracing::debug!(parent: &span, apiservice = %remote.name, status = resp.status().as_u16(), "proxied");
            return resp;
        }
    }
    let resp = if info.is_resource {
        match resource_request(state, req, info, query, &user).await {
            Ok(r) => r,
            Err(e) => error_response(&e),
        }
    } else {
        non_resource(state, &method, &path, query, req.headers())
    };
    tracing::debug!(parent: &span, status = resp.status().as_u16(), elapsed_ms = started.elapsed().as_millis() as u64, "handled");
    resp
}

/// Answers `e` before the request was handled. A small request body is read first: an HTTP/2
/// stream whose body is left unread is reset, and clients (curl, Go) may then report the reset
/// instead of the answer.
async fn refuse(req: Request<hyper::body::Incoming>, e: &ApiError) -> Response<Body> {
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
    error_response(e)
}

/// What discovery lists as served here: the built-in and custom resources, less the
/// group-versions a remote APIService took over.
fn served(state: &State) -> Vec<&'static ResourceInfo> {
    let mut served = state.registry.served();
    let remotes = state.aggregator.remotes();
    if !remotes.is_empty() {
        served.retain(|r| !remotes.iter().any(|x| x.group == r.group && x.version == r.version));
    }
    served
}

fn non_resource(state: &State, method: &Method, path: &str, query: &Query, headers: &HeaderMap) -> Response<Body> {
    if method != Method::GET && method != Method::HEAD {
        return error_response(&ApiError::method_not_allowed(method.as_str(), path));
    }
    let accept = header_str(headers, header::ACCEPT);
    // Upstream serves each of these paths with a trailing slash too (`/version/`, `/api/`,
    // `/apis/`, `/openapi/v2/`): kr8s asks for `/version/` before anything else.
    let path = match path.strip_suffix('/') {
        Some(p) if !p.is_empty() => p,
        _ => path,
    };
    match path {
        "/version" => respond_json(StatusCode::OK, &version_doc()),
        "/metrics" => {
            let mut r = Response::new(full(state.monitoring.render()));
            r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(crate::monitoring::CONTENT_TYPE));
            r
        }
        "/healthz" | "/livez" | "/readyz" => {
            let ready = state.ready.load(Ordering::Acquire) || path != "/readyz";
            let name = path.trim_start_matches('/');
            if query.has("verbose") {
                let body = format!(
                    "[+]ping ok\n[+]etcd ok\n[{}]poststarthook/k1s-bootstrap {}\n{name} check {}\n",
                    if ready { "+" } else { "-" },
                    if ready { "ok" } else { "failed: not finished" },
                    if ready { "passed" } else { "failed" }
                );
                text(if ready { StatusCode::OK } else { StatusCode::INTERNAL_SERVER_ERROR }, &body)
            } else if ready {
                text(StatusCode::OK, "ok")
            } else {
                text(StatusCode::INTERNAL_SERVER_ERROR, "[-]poststarthook/k1s-bootstrap failed: not finished\n")
            }
        }
        p if p.starts_with("/healthz/") || p.starts_with("/livez/") || p.starts_with("/readyz/") => {
            text(StatusCode::OK, "ok")
        }
        "/api" | "/apis" => {
            let core = path == "/api";
            match discovery::aggregated_version(accept) {
                Some(v) => {
                    let mut doc = discovery::aggregated(&served(state), core, v);
                    if !core {
                        state.aggregator.merge_aggregated(&mut doc);
                    }
                    let body = serde_json::to_vec(&doc).unwrap_or_default();
                    let etag = format!("\"{:X}\"", fnv1a(&body));
                    if header_str(headers, header::IF_NONE_MATCH) == etag {
                        let mut r = Response::new(full(Bytes::new()));
                        *r.status_mut() = StatusCode::NOT_MODIFIED;
                        return r;
                    }
                    let mut r = Response::new(full(body));
                    let ct = format!("application/json;g=apidiscovery.k8s.io;v={v};as=APIGroupDiscoveryList");
                    if let Ok(ct) = HeaderValue::from_str(&ct) {
                        r.headers_mut().insert(header::CONTENT_TYPE, ct);
                    }
                    if let Ok(e) = HeaderValue::from_str(&etag) {
                        r.headers_mut().insert(header::ETAG, e);
                    }
                    r.headers_mut().insert(header::VARY, HeaderValue::from_static("Accept"));
                    r
                }
                None if core => respond_json(StatusCode::OK, &discovery::api_versions(&state.server_address)),
                None => {
                    let mut doc = discovery::api_group_list(&served(state), &state.server_address);
                    state.aggregator.merge_group_list(&mut doc);
                    respond_json(StatusCode::OK, &doc)
                }
            }
        }
        "/.well-known/openid-configuration" => {
            respond_json(StatusCode::OK, &state.tokens.openid_configuration(&state.server_address))
        }
        "/openid/v1/jwks" => {
            let mut r = respond_json(StatusCode::OK, &state.tokens.jwks());
            r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/jwk-set+json"));
            r
        }
        "/openapi/v2" => {
            let api = k1s_api::openapi::get();
            if accept.contains("protobuf") {
                let mut r = Response::new(full(api.v2_protobuf().to_vec()));
                r.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/com.github.proto-openapi.spec.v2.v1.0+protobuf"),
                );
                r
            } else {
                let mut r = Response::new(full(api.v2_json().to_vec()));
                r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
                r
            }
        }
        "/openapi/v3" => {
            let mut r = Response::new(full(state.registry.custom.current().openapi_index().to_vec()));
            r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            r
        }
        p if p.starts_with("/openapi/v3/") => {
            let doc_path = &p["/openapi/v3/".len()..];
            let catalog = state.registry.custom.current();
            let Some(doc) = catalog.openapi_document(doc_path) else {
                return error_response(&ApiError::not_found_path());
            };
            if let Some(h) = query.get("hash") {
                if h != doc.hash {
                    let mut r = Response::new(full(Bytes::new()));
                    *r.status_mut() = StatusCode::MOVED_PERMANENTLY;
                    if let Ok(loc) = HeaderValue::from_str(&format!("/openapi/v3/{doc_path}?hash={}", doc.hash)) {
                        r.headers_mut().insert(header::LOCATION, loc);
                    }
                    return r;
                }
            }
            let etag = format!("\"{}\"", doc.hash);
            if header_str(headers, header::IF_NONE_MATCH) == etag {
                let mut r = Response::new(full(Bytes::new()));
                *r.status_mut() = StatusCode::NOT_MODIFIED;
                return r;
            }
            let mut r = Response::new(full(doc.json.clone()));
            r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            if let Ok(e) = HeaderValue::from_str(&etag) {
                r.headers_mut().insert(header::ETAG, e);
            }
            let cc = if query.has("hash") { "public, immutable" } else { "no-cache, private" };
            r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static(cc));
            r
        }
        p => {
            let parts: Vec<&str> = p.trim_matches('/').split('/').collect();
            match parts.as_slice() {
                ["api", v] => match discovery::api_resource_list(&state.registry.served(), "", v) {
                    Some(d) => respond_json(StatusCode::OK, &d),
                    None => error_response(&ApiError::not_found_path()),
                },
                ["apis", g] => {
                    let local = discovery::api_group_doc(&served(state), g, &state.server_address);
                    let remote = state.aggregator.group_doc(g);
                    match (local, remote) {
                        (Some(mut d), Some(r)) => {
                            if let (Some(vs), Some(more)) =
                                (d.get_mut("versions").and_then(Value::as_array_mut), r["versions"].as_array())
                            {
                                vs.extend(more.iter().cloned());
                            }
                            respond_json(StatusCode::OK, &d)
                        }
                        (Some(d), None) | (None, Some(d)) => respond_json(StatusCode::OK, &d),
                        (None, None) => error_response(&ApiError::not_found_path()),
                    }
                }
                ["apis", g, v] => match discovery::api_resource_list(&served(state), g, v) {
                    Some(d) => respond_json(StatusCode::OK, &d),
                    None => error_response(&ApiError::not_found_path()),
                },
                _ => error_response(&ApiError::not_found_path()),
            }
        }
    }
}

/// FNV-1a (64-bit), for ETags of small generated documents.
fn fnv1a(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf29ce484222325u64, |h, x| (h ^ *x as u64).wrapping_mul(0x100000001b3))
}

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

fn content_type(headers: &HeaderMap) -> String {
    let ct = header_str(headers, header::CONTENT_TYPE);
    if ct.is_empty() {
        "application/json".into()
    } else {
        ct.to_string()
    }
}

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
    registry::parse_body(body, &base)
}

fn accepts_json(headers: &HeaderMap) -> bool {
    let accept = header_str(headers, header::ACCEPT);
    accept.is_empty()
        || accept.split(',').any(|p| {
            let t = p.split(';').next().unwrap_or("").trim();
            matches!(t, "application/json" | "application/*" | "*/*" | "application/yaml" | "")
        })
}

fn list_options(query: &Query) -> Result<ListOptions, ApiError> {
    let label_selector = Selector::parse_labels(query.get("labelSelector").unwrap_or(""))
        .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {e}")))?;
    let field_selector = Selector::parse_fields(query.get("fieldSelector").unwrap_or(""))
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let limit = match query.get("limit") {
        Some(l) if !l.is_empty() => {
            l.parse::<i64>().map_err(|_| ApiError::bad_request(format!("invalid limit \"{l}\"")))?.max(0) as usize
        }
        _ => 0,
    };
    Ok(ListOptions {
        label_selector,
        field_selector,
        limit,
        continue_token: query.get("continue").map(str::to_string),
        resource_version: query.get("resourceVersion").map(str::to_string),
        resource_version_match: query.get("resourceVersionMatch").filter(|s| !s.is_empty()).map(str::to_string),
    })
}

fn field_validation(query: &Query) -> Result<FieldValidation, ApiError> {
    match query.get("fieldValidation") {
        None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
        Some("Strict") => Ok(FieldValidation::Strict),
        Some("Ignore") => Ok(FieldValidation::Ignore),
        Some(other) => Err(ApiError::bad_request(format!(
            "fieldValidation parameter unsupported: {other}, supported values are: Ignore, Warn, Strict"
        ))),
    }
}

fn default_field_manager(headers: &HeaderMap) -> String {
    let ua = header_str(headers, header::USER_AGENT);
    let m: String = ua.split('/').next().unwrap_or("").chars().filter(|c| !c.is_control()).take(128).collect();
    if m.is_empty() {
        "unknown".into()
    } else {
        m
    }
}

/// Adds `Warning` headers.
fn with_warnings(mut r: Response<Body>, warnings: &[String]) -> Response<Body> {
    for w in warnings {
        let v = format!("299 - \"{}\"", w.replace('\\', "\\\\").replace('"', "\\\""));
        // Bytes, not str: a warning may be UTF-8 (obs-text in a header), as upstream sends it.
        if let Ok(v) = HeaderValue::from_bytes(v.as_bytes()) {
            r.headers_mut().append(header::WARNING, v);
        }
    }
    r
}

fn strip_item_type(mut v: Value) -> Value {
    if let Some(m) = v.as_object_mut() {
        m.remove("apiVersion");
        m.remove("kind");
    }
    v
}

/// A one-object reply as the Accept header asked: the object, or its PartialObjectMetadata.
/// (Tables are built by the verbs that print them.)
fn convert_object(obj: Value, conversion: Option<Conversion>, res: &ResourceInfo) -> Result<Value, ApiError> {
    match conversion {
        Some(Conversion::Metadata(av)) => Ok(object::partial_metadata(&obj, av)),
        Some(Conversion::MetadataList(_)) => Err(ApiError::not_acceptable(format!(
            "you requested PartialObjectMetadataList, but the requested object is not a list (*{}.{})",
            res.version, res.kind
        ))),
        _ => Ok(obj),
    }
}

/// A list reply as the Accept header asked: the kind's List, or a PartialObjectMetadataList.
fn convert_list(
    items: Vec<Value>,
    list_meta: Value,
    conversion: Option<Conversion>,
    res: &ResourceInfo,
) -> Result<Value, ApiError> {
    match conversion {
        Some(Conversion::MetadataList(av)) => {
            let items: Vec<Value> = items.iter().map(|o| object::partial_metadata(o, av)).collect();
            Ok(json!({"kind": "PartialObjectMetadataList", "apiVersion": av, "metadata": list_meta, "items": items}))
        }
        Some(Conversion::Metadata(_)) => Err(ApiError::not_acceptable(format!(
            "you requested PartialObjectMetadata, but the requested object is a list (*{}.{})",
            res.version, res.list_kind
        ))),
        _ => {
            let items: Vec<Value> = items.into_iter().map(strip_item_type).collect();
            Ok(json!({"kind": res.list_kind, "apiVersion": res.api_version(), "metadata": list_meta, "items": items}))
        }
    }
}

async fn resource_request(
    state: &Arc<State>,
    req: Request<hyper::body::Incoming>,
    info: &RequestInfo,
    query: &Query,
    user: &UserInfo,
) -> Result<Response<Body>, ApiError> {
    let Some(res) = state.registry.resource(&info.group, &info.version, &info.resource) else {
        return Err(ApiError::not_found_path());
    };
    if !res.namespaced() && info.namespace.is_some() {
        return Err(ApiError::not_found_path());
    }
    if let Some(sub) = &info.subresource {
        if !res.has_subresource(sub) {
            return Err(ApiError::not_found_path());
        }
    }
    if !accepts_json(req.headers()) {
        return Err(ApiError::not_acceptable(
            "only the following media types are accepted: application/json, application/yaml",
        ));
    }
    let verb = info.verb.as_str();
    let base_verb = match verb {
        "watch" if info.name.is_some() => "watch",
        v => v,
    };
    if info.subresource.is_none() && !res.verbs.contains(&base_verb) {
        return Err(ApiError::method_not_allowed(
            req.method().as_str(),
            &format!("{}{}", info.resource, if info.name.is_some() { "/name" } else { "" }),
        ));
    }
    if res.backing == Backing::Virtual {
        if res.group == k1s_api::metrics::GROUP {
            return crate::metrics_api::handle(state, res, info, &list_options(query)?).await;
        }
        return crate::virtual_resources::handle(state, req, res, info, user).await;
    }
    let dry_run = match query.all("dryRun") {
        [] => false,
        [v] if v == "All" => true,
        [v, ..] => return Err(ApiError::bad_request(format!("Invalid dryRun parameter: {v}"))),
    };
    let headers = req.headers().clone();
    let field_manager = query.get("fieldManager").filter(|s| !s.is_empty()).map(str::to_string);
    let mut ctx = Ctx {
        user,
        info: res,
        namespace: info.namespace.as_deref(),
        subresource: info.subresource.as_deref(),
        dry_run,
        field_manager: field_manager.clone().unwrap_or_else(|| default_field_manager(&headers)),
        field_validation: field_validation(query)?,
        warnings: Vec::new(),
    };
    if res.namespaced() && info.namespace.is_none() && !matches!(verb, "list" | "watch") {
        return Err(ApiError::not_found_path());
    }
    let accept = header_str(&headers, header::ACCEPT).to_string();
    let conversion = table::negotiate(&accept)?;
    let table = match conversion {
        Some(Conversion::Table(av)) => Some(av),
        _ => None,
    };
    let include = IncludeObject::parse(query.get("includeObject"));
    let reg = &state.registry;
    match info.subresource.as_deref() {
        Some("scale") => return crate::subresources::scale(state, req, &mut ctx, info, query).await,
        Some("binding") => return crate::subresources::binding(state, req, &mut ctx, info).await,
        Some("eviction") => return crate::subresources::eviction(state, req, &mut ctx, info).await,
        Some("status") | Some("finalize") | Some("ephemeralcontainers") | Some("resize") | Some("approval") | None => {}
        Some("token") if res.group.is_empty() && res.resource == "serviceaccounts" => {
            return crate::serviceaccount::token_request::create(state, req, info).await;
        }
        Some("log" | "exec" | "attach" | "portforward") => {
            return crate::kubelet_proxy::handle(state, req, info, query).await;
        }
        Some("proxy") => return crate::kubelet_proxy::proxy(state, req, info).await,
        Some(other) => {
            return Err(ApiError::new(
                503,
                "ServiceUnavailable",
                format!("the {other} subresource is served by the node agent, which is not running"),
            ))
        }
    }
    let name = info.name.clone().unwrap_or_default();
    // Every reply, a refusal too, carries the warnings admission gave (upstream writes them with
    // any reply).
    let reply = async {
        match verb {
            "get" => {
                let obj = reg.get(res, info.namespace.as_deref(), &name)?;
                if let Some(av) = table {
                    let rv = object::resource_version(&obj).unwrap_or("").to_string();
                    return Ok(respond_json(
                        StatusCode::OK,
                        &table::build(res, &[obj], include, av, true, json!({"resourceVersion": rv})),
                    ));
                }
                Ok(respond_json(StatusCode::OK, &convert_object(obj, conversion, res)?))
            }
            "list" => {
                let opts = list_options(query)?;
                let page = reg.list(res, info.namespace.as_deref(), &opts)?;
                let mut list_meta = json!({"resourceVersion": page.resource_version.to_string()});
                if let Some(c) = &page.continue_token {
                    list_meta["continue"] = json!(c);
                }
                if let Some(av) = table {
                    return Ok(respond_json(
                        StatusCode::OK,
                        &table::build(res, &page.items, include, av, true, list_meta),
                    ));
                }
                Ok(respond_json(StatusCode::OK, &convert_list(page.items, list_meta, conversion, res)?))
            }
            "watch" => {
                let mut opts = list_options(query)?;
                if let Some(n) = &info.name {
                    opts.field_selector.requirements.push(k1s_api::selectors::Requirement {
                        key: "metadata.name".into(),
                        op: k1s_api::selectors::Op::Equals,
                        values: vec![n.clone()],
                    });
                }
                let timeout = match query.get("timeoutSeconds").and_then(|s| s.parse::<u64>().ok()) {
                    Some(t) if t > 0 => Duration::from_secs(t),
                    _ => Duration::from_secs(1800 + rand::random_range(0..1800)),
                };
                let send_initial_events = match query.get("sendInitialEvents") {
                    Some(v) if !v.is_empty() => Some(query.bool("sendInitialEvents")),
                    _ => None,
                };
                let params = watch::WatchParams {
                    namespace: info.namespace.clone(),
                    list: opts,
                    allow_bookmarks: query.bool("allowWatchBookmarks"),
                    send_initial_events,
                    timeout,
                    table: table.map(|av| (av, include)),
                    // Upstream sends whole objects when a watch asks for PartialObjectMetadataList.
                    metadata: match conversion {
                        Some(Conversion::Metadata(av)) => Some(av),
                        _ => None,
                    },
                    bookmark_interval: state.bookmark_interval,
                };
                let rx = watch::start(reg.clone(), res, params, state.cancel.clone())?;
                let stream = futures::stream::unfold(rx, |mut rx| async move {
                    rx.recv().await.map(|b| (Ok::<_, Infallible>(hyper::body::Frame::data(b)), rx))
                });
                let mut r = Response::new(StreamBody::new(stream).boxed_unsync());
                r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
                r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
                Ok(r)
            }
            "create" => {
                if info.name.is_some() && info.subresource.is_none() {
                    return Err(ApiError::method_not_allowed("POST", &format!("{}/name", info.resource)));
                }
                let (headers, body) = read_request_body(req).await?;
                let obj = decode_body(&headers, &body)?;
                let (created, json) = reg.create_with_json(&mut ctx, obj).await?;
                let reply = match (json, &conversion) {
                    (Some(json), None) => respond_bytes(StatusCode::CREATED, json),
                    _ => respond_json(StatusCode::CREATED, &convert_object(created, conversion, res)?),
                };
                Ok(reply)
            }
            "update" => {
                let (headers, body) = read_request_body(req).await?;
                let obj = decode_body(&headers, &body)?;
                let (obj, created) = reg.update(&mut ctx, &name, obj).await?;
                let code = if created { StatusCode::CREATED } else { StatusCode::OK };
                Ok(respond_json(code, &convert_object(obj, conversion, res)?))
            }
            "patch" => {
                let (headers, body) = read_request_body(req).await?;
                let ct = content_type(&headers);
                let Some(ptype) = PatchType::from_content_type(&ct) else {
                    return Err(ApiError::unsupported_media_type(&ct));
                };
                if ptype == PatchType::Apply && field_manager.is_none() {
                    return Err(ApiError::invalid(
                        res.group,
                        res.kind,
                        &name,
                        &[k1s_api::FieldError::required("fieldManager", "is required for apply patch")],
                    ));
                }
                if ptype != PatchType::Apply && query.has("force") {
                    return Err(ApiError::bad_request("force flag can only be used with apply patch"));
                }
                let patch = if ptype == PatchType::Apply {
                    registry::parse_body(&body, "application/apply-patch+yaml")?
                } else {
                    serde_json::from_slice::<Value>(&body)
                        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?
                };
                let (obj, created) = reg.patch(&mut ctx, &name, ptype, patch, query.bool("force")).await?;
                let code = if created { StatusCode::CREATED } else { StatusCode::OK };
                Ok(respond_json(code, &convert_object(obj, conversion, res)?))
            }
            "delete" => {
                let (headers, body) = read_request_body(req).await?;
                let mut opts = if body.is_empty() {
                    DeleteOptions::default()
                } else {
                    DeleteOptions::from_value(&decode_body(&headers, &body)?)
                };
                if let Some(g) = query.get("gracePeriodSeconds").and_then(|s| s.parse::<i64>().ok()) {
                    opts.grace_period_seconds = Some(g);
                }
                if let Some(p) = query.get("propagationPolicy") {
                    opts.propagation_policy = Some(p.to_string());
                }
                let obj = reg.delete(&mut ctx, &name, &opts).await?;
                let code = if object::is_deleting(&obj) { StatusCode::ACCEPTED } else { StatusCode::OK };
                Ok(respond_json(code, &convert_object(obj, conversion, res)?))
            }
            "deletecollection" => {
                let list = list_options(query)?;
                let (headers, body) = read_request_body(req).await?;
                let mut opts = if body.is_empty() {
                    DeleteOptions::default()
                } else {
                    DeleteOptions::from_value(&decode_body(&headers, &body)?)
                };
                if let Some(p) = query.get("propagationPolicy") {
                    opts.propagation_policy = Some(p.to_string());
                }
                let deleted = reg.delete_collection(&mut ctx, &list, &opts).await?;
                Ok(respond_json(StatusCode::OK, &convert_list(deleted, json!({}), conversion, res)?))
            }
            other => Err(ApiError::method_not_allowed(other, &info.resource)),
        }
    }
    .await;
    match reply {
        Ok(r) => Ok(with_warnings(r, &ctx.warnings)),
        Err(e) if !ctx.warnings.is_empty() => Ok(with_warnings(error_response(&e), &ctx.warnings)),
        Err(e) => Err(e),
    }
}
