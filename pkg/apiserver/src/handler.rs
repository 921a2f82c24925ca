//! Request dispatch: authentication ▶ authorization ▶ the handler for the path (discovery,
//! OpenAPI, health, or a resource verb through the registry).

use crate::auth::{Attributes, Credentials, Decision, Peer, UserInfo};
use crate::endpoints::body::{discard, header_str};
use crate::endpoints::reply::error_response;
use crate::endpoints::{nonresource, resource, Body, State};
use crate::error::{ApiError, ResourceTarget};
use crate::registry::PatchType;
use crate::request::{Query, RequestInfo};
use http::{header, Method, Request, Response};
use std::sync::Arc;
use tracing::Instrument;

/// Handles one request from a connection whose verified client certificates are `peer`, and
/// counts it for `/metrics`.
pub async fn handle(state: Arc<State>, req: Request<hyper::body::Incoming>, peer: Arc<Peer>) -> Response<Body> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    // Joining servers authenticate with the join token, not as users.
    if let Some(join) = &state.join {
        if let Some(resp) = crate::join::serve(join, &method, &path, req.headers()) {
            discard(req).await;
            return resp;
        }
    }
    let query = Query::parse(req.uri().query());
    let info = RequestInfo::parse(&method, &path, &query);
    let apply = method == Method::PATCH
        && PatchType::from_content_type(header_str(req.headers(), header::CONTENT_TYPE)) == Some(PatchType::Apply);
    let res = info.is_resource.then(|| state.registry.resource(&info.group, &info.version, &info.resource)).flatten();
    let tracked = state.monitoring.start(&method, &info, res, query.all("dryRun").iter().any(|v| v == "All"), apply);
    // Every event logged while the request is served carries it; `user` is recorded once known.
    let span = tracing::info_span!(
        "request",
        %method,
        %path,
        verb = %info.verb,
        resource = tracing::field::Empty,
        user = tracing::field::Empty,
    );
    if info.is_resource {
        span.record("resource", info.resource.as_str());
    }
    let resp = authenticated(&state, req, &peer, method, path, &query, &info).instrument(span).await;
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
    let user = match state.authn.authenticate(&Credentials { peer, authorization_header: auth_header.as_deref() }).await
    {
        Ok(Some(u)) => u,
        // Without credentials: `system:anonymous`, whom RBAC decides for like anyone else
        // (`system:public-info-viewer` lets it read /version and the health checks), unless
        // anonymous requests are turned off (`--anonymous-auth=false`).
        Ok(None) if state.anonymous_auth => UserInfo::anonymous(),
        Ok(None) => return refuse(req, &ApiError::unauthorized()).await,
        Err(e) => {
            tracing::debug!(error = %e, "authentication failed");
            return refuse(req, &ApiError::unauthorized()).await;
        }
    };
    let user = match crate::auth::impersonate(&*state.authz, user, req.headers()) {
        Ok(u) => u,
        Err(e) => return refuse(req, &e).await,
    };
    tracing::Span::current().record("user", user.name.as_str());
    match state.authz.authorize(&Attributes { user: &user, info }) {
        Decision::Allow => {}
        Decision::Deny(reason) | Decision::NoOpinion(reason) => {
            let target = if info.is_resource {
                ResourceTarget::Resource {
                    group: &info.group,
                    resource: &info.resource,
                    subresource: info.subresource_name(),
                    namespace: info.namespace.as_deref(),
                    name: info.name.as_deref(),
                }
            } else {
                ResourceTarget::Path(&path)
            };
            let e = ApiError::forbidden_because(&user.name, info.verb.as_str(), &target, &reason);
            tracing::debug!(reason = %reason, "forbidden");
            return refuse(req, &e).await;
        }
    }
    let started = std::time::Instant::now();
    // A group-version an APIService hands to another server is proxied there, as the caller
    // (authorized above, as upstream's aggregator authorizes before proxying).
    if let Some(remote) = state.aggregator.route(&path) {
        let resp = state.aggregator.proxy(req, &user, &remote).await;
        tracing::debug!(apiservice = %remote.name, status = resp.status().as_u16(), "proxied");
        return resp;
    }
    let resp = if info.is_resource {
        match resource::serve(state, req, info, query, &user).await {
            Ok(r) => r,
            Err(e) => error_response(&e),
        }
    } else {
        nonresource::serve(state, &method, &path, query, req.headers())
    };
    tracing::debug!(status = resp.status().as_u16(), elapsed_ms = started.elapsed().as_millis() as u64, "handled");
    resp
}

/// Answers `e` before the request was handled, after reading a small request body (see
/// [`discard`]).
async fn refuse(req: Request<hyper::body::Incoming>, e: &ApiError) -> Response<Body> {
    discard(req).await;
    error_response(e)
}
