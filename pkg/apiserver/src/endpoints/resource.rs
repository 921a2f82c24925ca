//! Serves a parsed [`ResourceRequest`]: the registry verbs (get, list, watch, create, update,
//! patch, delete, deletecollection) here, other routes by the handlers that own them.

use super::body::{decode_body, header_str, read_request_body, Body};
use super::command::{DeleteQuery, ReplyShape, ResourceCommand, ResourceRequest, Route, WatchOptions};
use super::reply::{error_response, respond_bytes, respond_json, with_warnings};
use super::State;
use crate::audit;
use crate::auth::UserInfo;
use crate::error::ApiError;
use crate::object;
use crate::registry::{self, Ctx, DeleteOptions, PatchType, Registry};
use crate::request::{Query, RequestInfo, Verb};
use crate::table::{self, Conversion};
use crate::watch;
use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Incoming;
use k1s_api::ResourceInfo;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Parses and serves a request for a resource. An audited request brings its
/// [`audit::Recorded`] in its extensions; it goes back in the reply's, with what the request
/// and admission recorded in it.
pub(crate) async fn serve(
    state: &Arc<State>,
    mut req: Request<Incoming>,
    info: &RequestInfo,
    query: &Query,
    user: &UserInfo,
) -> Result<Response<Body>, ApiError> {
    let recorded = req.extensions_mut().remove::<audit::Recorded>();
    let Some(recorded) = recorded else { return serve_recorded(state, req, info, query, user, &mut None).await };
    let mut recorded = Some(recorded);
    let resp = serve_recorded(state, req, info, query, user, &mut recorded).await;
    // A refusal is recorded too (with the annotations admission gave before refusing).
    let mut resp = resp.unwrap_or_else(|e| error_response(&e));
    if let Some(mut rec) = recorded {
        if !matches!(info.verb.api(), Some(Verb::Watch)) && !audit::is_long_running(info) {
            resp = rec.response_object(resp).await;
        }
        resp.extensions_mut().insert(rec);
    }
    Ok(resp)
}

async fn serve_recorded(
    state: &Arc<State>,
    req: Request<Incoming>,
    info: &RequestInfo,
    query: &Query,
    user: &UserInfo,
    recorded: &mut Option<audit::Recorded>,
) -> Result<Response<Body>, ApiError> {
    let request =
        ResourceRequest::parse(|g, v, r| state.registry.resource(g, v, r), req.method(), info, query, req.headers())?;
    let ResourceRequest { res, namespace, name, subresource, write, shape, route } = request;
    let (namespace, name) = (namespace.as_deref(), name.as_deref());
    let reg = &state.registry;
    let mut ctx = Ctx {
        user,
        info: res,
        namespace,
        subresource: subresource.map(|s| s.as_str()),
        dry_run: write.dry_run,
        field_manager: write.field_manager,
        field_validation: write.field_validation,
        warnings: Vec::new(),
        audit: recorded.take(),
    };
    let name_or_empty = name.unwrap_or_default();
    let command = match route {
        Route::Registry(command) => command,
        Route::MetricsApi(opts) => {
            *recorded = ctx.audit.take();
            let kubelet = state.kubelet.as_deref();
            return crate::metrics_api::handle(reg, kubelet, &state.metrics_api, res, namespace, name, &opts).await;
        }
        Route::Virtual(verb) => {
            *recorded = ctx.audit.take();
            let deps = crate::virtual_resources::Deps {
                registry: reg,
                authz: &*state.authz,
                rbac: &state.rbac,
                authn: &state.authn,
            };
            return crate::virtual_resources::handle(deps, req, res, verb, namespace, name, user).await;
        }
        Route::Scale(verb) => {
            let r = crate::subresources::scale(reg, req, &mut ctx, verb, name_or_empty).await;
            *recorded = ctx.audit.take();
            return r;
        }
        Route::Binding => {
            let r = crate::subresources::binding(reg, req, &mut ctx, name).await;
            *recorded = ctx.audit.take();
            return r;
        }
        Route::Eviction => {
            let r = crate::subresources::eviction(reg, req, &mut ctx, name_or_empty).await;
            *recorded = ctx.audit.take();
            return r;
        }
        Route::ServiceAccountToken => {
            *recorded = ctx.audit.take();
            return crate::serviceaccount::token_request::create(
                reg,
                &state.tokens,
                req,
                user,
                namespace,
                name_or_empty,
            )
            .await;
        }
        Route::Kubelet(sub) => {
            *recorded = ctx.audit.take();
            return crate::kubelet_proxy::handle(reg, state.kubelet.as_deref(), req, info, query, sub).await;
        }
        Route::Proxy => {
            *recorded = ctx.audit.take();
            return crate::kubelet_proxy::proxy(reg, state.kubelet.as_deref(), req, info).await;
        }
    };
    let target = Target { reg, res, namespace, name: name_or_empty, shape };
    // Every reply, a refusal too, carries the warnings admission gave (upstream writes them with
    // any reply).
    let result = target.run(command, req, &mut ctx, state.bookmark_interval, &state.cancel).await;
    *recorded = ctx.audit.take();
    match result {
        Ok(r) => Ok(with_warnings(r, &ctx.warnings)),
        Err(e) if !ctx.warnings.is_empty() => Ok(with_warnings(error_response(&e), &ctx.warnings)),
        Err(e) => Err(e),
    }
}

/// What a registry verb acts on, and how its reply is shaped.
struct Target<'a> {
    reg: &'a Arc<Registry>,
    res: &'static ResourceInfo,
    namespace: Option<&'a str>,
    name: &'a str,
    shape: ReplyShape,
}

impl Target<'_> {
    async fn run(
        &self,
        command: ResourceCommand,
        req: Request<Incoming>,
        ctx: &mut Ctx<'_>,
        bookmark_interval: Duration,
        cancel: &CancellationToken,
    ) -> Result<Response<Body>, ApiError> {
        let (reg, res, conversion) = (self.reg, self.res, self.shape.conversion);
        match command {
            ResourceCommand::Get => {
                let obj = reg.get(res, self.namespace, self.name)?;
                if let Some(av) = self.shape.table() {
                    let rv = object::resource_version(&obj).unwrap_or("").to_string();
                    return Ok(respond_json(
                        StatusCode::OK,
                        &table::build(res, &[obj], self.shape.include, av, true, json!({"resourceVersion": rv})),
                    ));
                }
                Ok(respond_json(StatusCode::OK, &convert_object(obj, conversion, res)?))
            }
            ResourceCommand::List(opts) => {
                let page = reg.list(res, self.namespace, &opts)?;
                let mut list_meta = json!({"resourceVersion": page.resource_version.to_string()});
                if let Some(c) = &page.continue_token {
                    list_meta["continue"] = json!(c);
                }
                if let Some(av) = self.shape.table() {
                    return Ok(respond_json(
                        StatusCode::OK,
                        &table::build(res, &page.items, self.shape.include, av, true, list_meta),
                    ));
                }
                Ok(respond_json(StatusCode::OK, &convert_list(page.items, list_meta, conversion, res)?))
            }
            ResourceCommand::Watch(opts) => self.watch(opts, bookmark_interval, cancel),
            ResourceCommand::Create => {
                let (headers, body) = read_request_body(req).await?;
                let obj = decode_object(&headers, &body, res)?;
                if let Some(rec) = ctx.audit.as_mut() {
                    rec.request_object(header_str(&headers, header::CONTENT_TYPE), &body, &obj);
                }
                let (created, json) = reg.create_with_json(ctx, obj).await?;
                let reply = match (json, &conversion) {
                    (Some(json), None) => respond_bytes(StatusCode::CREATED, json),
                    _ => respond_json(StatusCode::CREATED, &convert_object(created, conversion, res)?),
                };
                Ok(reply)
            }
            ResourceCommand::Update => {
                let (headers, body) = read_request_body(req).await?;
                let obj = decode_object(&headers, &body, res)?;
                if let Some(rec) = ctx.audit.as_mut() {
                    rec.request_object(header_str(&headers, header::CONTENT_TYPE), &body, &obj);
                }
                let (obj, created) = reg.update(ctx, self.name, obj).await?;
                let code = if created { StatusCode::CREATED } else { StatusCode::OK };
                Ok(respond_json(code, &convert_object(obj, conversion, res)?))
            }
            ResourceCommand::Patch { patch_type, force } => {
                let (_, body) = read_request_body(req).await?;
                let patch = if patch_type == PatchType::Apply {
                    registry::parse_body(&body, "application/apply-patch+yaml")?
                } else {
                    serde_json::from_slice::<Value>(&body)
                        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?
                };
                if let Some(rec) = ctx.audit.as_mut() {
                    // A JSON patch is kept as sent; an apply's YAML is recorded as JSON.
                    let ct = if patch_type == PatchType::Apply { "application/yaml" } else { "application/json" };
                    rec.request_patch(ct, &body, &patch);
                }
                let (obj, created) = reg.patch(ctx, self.name, patch_type, patch, force).await?;
                let code = if created { StatusCode::CREATED } else { StatusCode::OK };
                Ok(respond_json(code, &convert_object(obj, conversion, res)?))
            }
            ResourceCommand::Delete(query) => {
                let (headers, body) = read_request_body(req).await?;
                record_delete_options(ctx, &headers, &body);
                let opts = delete_options(&headers, &body, query)?;
                let obj = reg.delete(ctx, self.name, &opts).await?;
                // As upstream: 202 only for an object left waiting when the request said
                // `orphanDependents: false`; 200 otherwise (a graceful pod delete too).
                let waits = object::is_deleting(&obj) && opts.orphan_dependents == Some(false);
                let code = if waits { StatusCode::ACCEPTED } else { StatusCode::OK };
                Ok(respond_json(code, &convert_object(obj, conversion, res)?))
            }
            ResourceCommand::DeleteCollection { list, delete } => {
                let (headers, body) = read_request_body(req).await?;
                record_delete_options(ctx, &headers, &body);
                let opts = delete_options(&headers, &body, delete)?;
                let deleted = reg.delete_collection(ctx, &list, &opts).await?;
                Ok(respond_json(StatusCode::OK, &convert_list(deleted, json!({}), conversion, res)?))
            }
        }
    }

    /// Streams watch events, newline-delimited, until the timeout or the server stops.
    fn watch(
        &self,
        opts: WatchOptions,
        bookmark_interval: Duration,
        cancel: &CancellationToken,
    ) -> Result<Response<Body>, ApiError> {
        let timeout = match opts.timeout_seconds {
            Some(t) => Duration::from_secs(t),
            None => Duration::from_secs(1800 + rand::random_range(0..1800)),
        };
        let params = watch::WatchParams {
            namespace: self.namespace.map(str::to_string),
            list: opts.list,
            allow_bookmarks: opts.allow_bookmarks,
            send_initial_events: opts.send_initial_events,
            timeout,
            table: self.shape.table().map(|av| (av, self.shape.include)),
            // Upstream sends whole objects when a watch asks for PartialObjectMetadataList.
            metadata: match self.shape.conversion {
                Some(Conversion::Metadata(av)) => Some(av),
                _ => None,
            },
            bookmark_interval,
        };
        let rx = watch::start(self.reg.clone(), self.res, params, cancel.clone())?;
        let stream = futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|b| (Ok::<_, Infallible>(hyper::body::Frame::data(b)), rx))
        });
        let mut r = Response::new(StreamBody::new(stream).boxed_unsync());
        r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
        Ok(r)
    }
}

/// A delete's body (its `DeleteOptions`) in the audit event, at `Request` and above.
fn record_delete_options(ctx: &mut Ctx<'_>, headers: &HeaderMap, body: &Bytes) {
    let Some(rec) = ctx.audit.as_mut().filter(|r| r.level >= audit::Level::Request && !body.is_empty()) else {
        return;
    };
    if let Ok(v) = decode_body(headers, body) {
        rec.request_patch(header_str(headers, header::CONTENT_TYPE), body, &v);
    }
}

/// A create's or update's body; JSON that does not parse gets upstream's 400 (`the object
/// provided is unrecognized (must be of type Namespace): couldn't get version/kind; json parse
/// error: invalid character 'a' looking for beginning of value (6170…)`).
fn decode_object(headers: &HeaderMap, body: &Bytes, res: &ResourceInfo) -> Result<Value, ApiError> {
    let err = match decode_body(headers, body) {
        Ok(v) => return Ok(v),
        Err(e) => e,
    };
    let ct = super::body::content_type(headers);
    let json = matches!(ct.split(';').next().unwrap_or("").trim(), "" | "application/json" | "*/*");
    match k1s_api::go_decode::json_syntax_error(body).filter(|_| json && err.code == 400) {
        Some(syntax) => Err(ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): couldn't get version/kind; json parse error: {syntax} ({})",
            res.kind,
            summarize(body)
        ))),
        None => Err(err),
    }
}

/// Upstream's `summarizeData(body, 30)`: JSON text as it is, anything else in hex.
fn summarize(body: &[u8]) -> String {
    const MAX: usize = 30;
    let head = &body[..body.len().min(MAX)];
    let more = if body.len() > MAX { " ..." } else { "" };
    match body.first() {
        None => "<empty>".into(),
        Some(b'{') => format!("{}{more}", String::from_utf8_lossy(head)),
        Some(_) => format!("{}{more}", head.iter().map(|b| format!("{b:02x}")).collect::<String>()),
    }
}

/// A delete's options: the body's `DeleteOptions`, then the query's parameters over them (the
/// query's `dryRun` is the request's; the registry joins the body's to it).
fn delete_options(headers: &HeaderMap, body: &Bytes, query: DeleteQuery) -> Result<DeleteOptions, ApiError> {
    let (mut opts, body_policy) = if body.is_empty() {
        (DeleteOptions::default(), None)
    } else {
        let v = decode_body(headers, body)?;
        let policy = v.get("propagationPolicy").and_then(Value::as_str).map(str::to_string);
        (DeleteOptions::from_value(&v), policy)
    };
    let given_policy = query.propagation_policy.clone().or(body_policy);
    if let Some(g) = query.grace_period_seconds {
        opts.grace_period_seconds = Some(g);
    }
    if let Some(o) = query.orphan_dependents {
        opts.orphan_dependents = Some(o);
        opts.propagation_policy = Some(if o { "Orphan" } else { "Background" }.into());
    }
    if let Some(p) = query.propagation_policy {
        opts.propagation_policy = Some(p);
    }
    let errs = opts.validate(given_policy.as_deref());
    if !errs.is_empty() {
        return Err(ApiError::invalid("meta.k8s.io", "DeleteOptions", "", &errs));
    }
    Ok(opts)
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
