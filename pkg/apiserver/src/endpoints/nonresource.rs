//! The paths that are not resources: `/version`, `/healthz` `/livez` `/readyz`, `/metrics`,
//! discovery (`/api`, `/apis`, per group and group-version), OpenAPI v2 and v3, and the
//! ServiceAccount issuer's OIDC documents.

use super::body::{full, header_str, Body};
use super::reply::{empty, error_response, respond_json, text};
use super::State;
use crate::discovery;
use crate::error::ApiError;
use crate::request::Query;
use http::{header, HeaderMap, HeaderValue, Method, Response, StatusCode};
use k1s_api::ResourceInfo;
use serde_json::{json, Value};
use std::sync::atomic::Ordering;

fn version_doc() -> Value {
    let build = crate::version::build();
    json!({
        "major": "1",
        "minor": "35",
        "gitVersion": concat!("v1.35.0+k1s-", env!("CARGO_PKG_VERSION")),
        "gitCommit": build.git_commit,
        "gitTreeState": build.git_tree_state,
        "buildDate": build.build_date,
        "goVersion": "rust",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, if std::env::consts::ARCH == "x86_64" { "amd64" } else if std::env::consts::ARCH == "aarch64" { "arm64" } else { std::env::consts::ARCH }),
    })
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

/// Serves a non-resource path (only GET and HEAD).
pub(crate) fn serve(state: &State, method: &Method, path: &str, query: &Query, headers: &HeaderMap) -> Response<Body> {
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
            let name = path.trim_start_matches('/');
            let checks = health_checks(state, path);
            let healthy = checks.iter().all(|(_, r)| r.is_ok());
            let listing = || {
                let mut out = String::new();
                for (check, result) in &checks {
                    match result {
                        Ok(()) => out.push_str(&format!("[+]{check} ok\n")),
                        Err(why) => out.push_str(&format!("[-]{check} failed: {why}\n")),
                    }
                }
                out
            };
            if query.has("verbose") {
                let verdict = if healthy { "passed" } else { "failed" };
                let code = if healthy { StatusCode::OK } else { StatusCode::INTERNAL_SERVER_ERROR };
                text(code, &format!("{}{name} check {verdict}\n", listing()))
            } else if healthy {
                text(StatusCode::OK, "ok")
            } else {
                let failed: String =
                    listing().lines().filter(|l| l.starts_with("[-]")).map(|l| format!("{l}\n")).collect();
                text(StatusCode::INTERNAL_SERVER_ERROR, &failed)
            }
        }
        p if p.starts_with("/healthz/") || p.starts_with("/livez/") || p.starts_with("/readyz/") => {
            // One check by name, as upstream's `/readyz/<check>`: its own verdict, 404 for a
            // name the endpoint does not have.
            let (endpoint, check) = p[1..].split_once('/').unwrap_or((p, ""));
            let endpoint = format!("/{endpoint}");
            match health_checks(state, &endpoint).into_iter().find(|(name, _)| *name == check) {
                Some((_, Ok(()))) => text(StatusCode::OK, "ok"),
                Some((_, Err(why))) => {
                    text(StatusCode::INTERNAL_SERVER_ERROR, &format!("internal server error: {why}\n"))
                }
                None => text(StatusCode::NOT_FOUND, "404 page not found\n"),
            }
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
                        return empty(StatusCode::NOT_MODIFIED);
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
                    let mut r = empty(StatusCode::MOVED_PERMANENTLY);
                    if let Ok(loc) = HeaderValue::from_str(&format!("/openapi/v3/{doc_path}?hash={}", doc.hash)) {
                        r.headers_mut().insert(header::LOCATION, loc);
                    }
                    return r;
                }
            }
            let etag = format!("\"{}\"", doc.hash);
            if header_str(headers, header::IF_NONE_MATCH) == etag {
                return empty(StatusCode::NOT_MODIFIED);
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

/// The checks of `/healthz`, `/livez` or `/readyz`, each with its verdict: the process answers
/// (`ping`), the store answers a read (`etcd`, upstream's name for its storage check), and for
/// readiness the bootstrap (default RBAC, the `kubernetes` Service…) has finished.
fn health_checks(state: &State, endpoint: &str) -> Vec<(&'static str, Result<(), String>)> {
    let store = state.registry.store.get("/registry/health").map(|_| ()).map_err(|e| e.to_string());
    let mut checks = vec![("ping", Ok(())), ("etcd", store)];
    if endpoint == "/readyz" {
        let bootstrap = if state.ready.load(Ordering::Acquire) { Ok(()) } else { Err("not finished".to_owned()) };
        checks.push(("poststarthook/k1s-bootstrap", bootstrap));
    }
    checks
}
