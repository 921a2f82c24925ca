//! The resource verbs: get, list, watch, create, update, patch, delete and deletecollection
//! through the registry, and the routing of subresources with their own handlers.

use super::body::{content_type, decode_body, header_str, read_request_body, Body};
use super::reply::{error_response, respond_bytes, respond_json, with_warnings};
use super::State;
use crate::auth::UserInfo;
use crate::error::ApiError;
use crate::object;
use crate::registry::{self, Ctx, DeleteOptions, FieldValidation, ListOptions, PatchType};
use crate::request::{Query, RequestInfo};
use crate::table::{self, Conversion, IncludeObject};
use crate::watch;
use http::{header, HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use k1s_api::resources::Backing;
use k1s_api::selectors::Selector;
use k1s_api::ResourceInfo;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

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

/// Serves a request for a resource.
pub(crate) async fn serve(
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
