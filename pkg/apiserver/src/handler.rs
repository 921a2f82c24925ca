//! Request dispatch: authentication ▶ audit ▶ impersonation ▶ authorization ▶ the handler for
//! the path (discovery, OpenAPI, health, or a resource verb through the registry).

use crate::audit::{self, Stage};
use crate::auth::{Attributes, Credentials, Decision, Peer, UserInfo};
use crate::endpoints::body::{discard, header_str};
use crate::endpoints::reply::error_response;
use crate::endpoints::{nonresource, resource, Body, State};
use crate::error::{ApiError, ResourceTarget};
use crate::registry::PatchType;
use crate::request::{Query, RequestInfo};
use futures::FutureExt as _;
use http::{header, Method, Request, Response};
use std::panic::AssertUnwindSafe;
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
    // Every reply carries the request's audit ID, audited or not (upstream's `Audit-Id`).
    let audit_id = audit::audit_id(req.headers());
    let received = state.audit.as_ref().map(|_| jiff::Timestamp::now());
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
    let request = Incoming { req, peer: &peer, method, path, query: &query, info: &info };
    let mut resp = authenticated(&state, request, audit_id.to_str().unwrap_or(""), received).instrument(span).await;
    resp.headers_mut().insert(audit::AUDIT_ID_HEADER, audit_id);
    match tracked {
        Some(t) => state.monitoring.finish(t, resp),
        None => resp,
    }
}

/// A request as it arrived, parsed.
struct Incoming<'a> {
    req: Request<hyper::body::Incoming>,
    peer: &'a Peer,
    method: Method,
    path: String,
    query: &'a Query,
    info: &'a RequestInfo,
}

/// Authenticates the request, then serves it, recording it in the audit log when the policy
/// says so (upstream's order: authentication, audit, impersonation, authorization).
async fn authenticated(
    state: &Arc<State>,
    request: Incoming<'_>,
    audit_id: &str,
    received: Option<jiff::Timestamp>,
) -> Response<Body> {
    let Incoming { req, peer, info, .. } = &request;
    let auth_header = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).map(str::to_string);
    let begin = |user: Option<&UserInfo>| {
        let (auditor, received) = (state.audit.as_ref()?, received?);
        auditor.begin(user, info, req.uri(), req.headers(), peer.remote, audit_id, received)
    };
    let user = match state.authn.authenticate(&Credentials { peer, authorization_header: auth_header.as_deref() }).await
    {
        Ok(Some(u)) => u,
        // Without credentials: `system:anonymous`, whom RBAC decides for like anyone else
        // (`system:public-info-viewer` lets it read /version and the health checks), unless
        // anonymous requests are turned off (`--anonymous-auth=false`).
        Ok(None) if state.anonymous_auth => UserInfo::anonymous(),
        failed => {
            if let Err(e) = failed {
                tracing::debug!(error = %e, "authentication failed");
            }
            // As upstream: one event, at ResponseStarted, for no user.
            if let Some(mut a) = begin(None) {
                a.event.response_status = Some(audit::ResponseStatus {
                    code: 401,
                    message: Some(audit::failed_authentication_message(req.headers(), !peer.certificates.is_empty())),
                    ..Default::default()
                });
                a.emit(Stage::ResponseStarted);
            }
            return refuse(request.req, &ApiError::unauthorized()).await;
        }
    };
    let mut audit = begin(Some(&user));
    let Some(a) = audit.as_mut() else {
        return authorized(state, request, user, None).await;
    };
    a.emit(Stage::RequestReceived);
    let long_running = audit::is_long_running(request.info);
    // A panic is recorded (upstream's `Panic` stage), then goes on as it would have.
    let served = AssertUnwindSafe(authorized(state, request, user, Some(&mut *a))).catch_unwind().await;
    let mut resp = match served {
        Ok(r) => r,
        Err(panic) => {
            a.panicked(&*panic);
            std::panic::resume_unwind(panic)
        }
    };
    a.response(&mut resp);
    let Some(a) = audit else { return resp };
    if !long_running {
        a.emit(Stage::ResponseComplete);
        return resp;
    }
    a.emit(Stage::ResponseStarted);
    let (parts, body) = resp.into_parts();
    Response::from_parts(parts, a.complete_with(body))
}

/// Impersonates, authorizes and serves one request by `user`.
async fn authorized(
    state: &Arc<State>,
    request: Incoming<'_>,
    user: UserInfo,
    mut audit: Option<&mut audit::InFlight>,
) -> Response<Body> {
    let Incoming { mut req, method, path, query, info, .. } = request;
    let impersonating = req.headers().contains_key("impersonate-user");
    let user = match crate::auth::impersonate(&*state.authz, user, req.headers()) {
        Ok(u) => u,
        Err(e) => return refuse(req, &e).await,
    };
    if let Some(a) = audit.as_deref_mut().filter(|_| impersonating) {
        a.event.impersonated_user = Some(user.clone());
    }
    tracing::Span::current().record("user", user.name.as_str());
    let decision = state.authz.authorize(&Attributes { user: &user, info });
    if let Some(a) = audit.as_deref_mut() {
        // Upstream's authorization annotations (k1s's authorizers give no reason for an allow).
        let (verdict, reason) = match &decision {
            Decision::Allow => ("allow", ""),
            Decision::Deny(reason) | Decision::NoOpinion(reason) => ("forbid", reason.as_str()),
        };
        a.event.annotate("authorization.k8s.io/decision", verdict);
        a.event.annotate("authorization.k8s.io/reason", reason);
    }
    match decision {
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
        if let Some(a) = audit.as_deref() {
            req.extensions_mut().insert(a.recorder());
        }
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
