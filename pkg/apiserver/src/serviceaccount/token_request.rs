//! `POST /api/v1/namespaces/<ns>/serviceaccounts/<name>/token`: the TokenRequest subresource
//! (upstream `pkg/registry/core/serviceaccount/storage/token.go`).

use super::claims::{Binding, NewToken, ObjectRef};
use super::{unix_now, Tokens};
use crate::endpoints::body::{decode_body, read_request_body};
use crate::endpoints::reply::respond_json;
use crate::endpoints::Body;
use crate::error::ApiError;
use http::{Request, Response, StatusCode};
use k1s_api::FieldError;
use serde_json::{json, Value};

/// Shortest lifetime a token may be asked for.
pub const MIN_EXPIRATION_SECONDS: i64 = 600;
/// Longest lifetime (2^32 s, upstream's validation bound).
pub const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// The lifetime the ServiceAccount admission plugin asks for in `kube-api-access-*` volumes:
/// such pod-bound tokens are extended to a year and only warn after this.
pub const WARN_ONLY_EXPIRATION_SECONDS: i64 = 3607;
pub const EXTENDED_EXPIRATION_SECONDS: i64 = 365 * 24 * 3600;

const GROUP: &str = "authentication.k8s.io";
const KIND: &str = "TokenRequest";

fn str_at<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

fn object_ref(obj: &Value) -> ObjectRef {
    ObjectRef { name: str_at(obj, "/metadata/name").to_string(), uid: str_at(obj, "/metadata/uid").to_string() }
}

/// Serves the create (the verb was checked when the request was parsed) for `user`: a
/// kubelet's is narrowed to its own pods (NodeRestriction).
pub(crate) async fn create(
    registry: &crate::registry::Registry,
    tokens: &Tokens,
    req: Request<hyper::body::Incoming>,
    user: &crate::auth::UserInfo,
    namespace: Option<&str>,
    name: &str,
) -> Result<Response<Body>, ApiError> {
    let (headers, body) = read_request_body(req).await?;
    let body = decode_body(&headers, &body)?;
    crate::node_restriction::check_token_request(registry, user, namespace.unwrap_or_default(), name, &body)?;
    let answer = issue(registry, tokens, namespace.unwrap_or_default(), name, body)?;
    Ok(respond_json(StatusCode::CREATED, &answer))
}

/// Validates the request, looks up the ServiceAccount and the bound object, signs the token
/// and returns the answered TokenRequest.
pub fn issue(
    registry: &crate::registry::Registry,
    tokens: &Tokens,
    namespace: &str,
    name: &str,
    mut req: Value,
) -> Result<Value, ApiError> {
    if !req.is_object() {
        return Err(ApiError::bad_request("the request body must be a TokenRequest object"));
    }
    let body_name = str_at(&req, "/metadata/name").to_string();
    if !body_name.is_empty() && body_name != name {
        let e = FieldError::invalid(
            "metadata.name",
            body_name.as_str(),
            "must match the service account name if specified",
        );
        return Err(ApiError::invalid(GROUP, KIND, name, &[e]));
    }
    let body_ns = str_at(&req, "/metadata/namespace").to_string();
    if !body_ns.is_empty() && body_ns != namespace {
        let e = FieldError::invalid(
            "metadata.namespace",
            body_ns.as_str(),
            "must match the service account namespace if specified",
        );
        return Err(ApiError::invalid(GROUP, KIND, name, &[e]));
    }
    let find = |r: &str| k1s_api::resources::find("", "v1", r).ok_or_else(|| ApiError::internal(format!("no {r}")));
    let sa = registry.get(find("serviceaccounts")?, Some(namespace), name)?;

    let spec = req.get("spec").cloned().unwrap_or_else(|| json!({}));
    let mut audiences: Vec<String> = spec
        .get("audiences")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default();
    if audiences.is_empty() {
        audiences = tokens.api_audiences.clone();
    }
    let expiration = match spec.get("expirationSeconds") {
        None | Some(Value::Null) => DEFAULT_EXPIRATION_SECONDS,
        Some(v) => v
            .as_i64()
            .ok_or_else(|| ApiError::bad_request(format!("spec.expirationSeconds: expected an integer, got {v}")))?,
    };
    let mut errs = Vec::new();
    if expiration < MIN_EXPIRATION_SECONDS {
        errs.push(FieldError::invalid(
            "spec.expirationSeconds",
            expiration,
            "may not specify a duration less than 10 minutes",
        ));
    }
    if expiration > MAX_EXPIRATION_SECONDS {
        errs.push(FieldError::invalid(
            "spec.expirationSeconds",
            expiration,
            "may not specify a duration larger than 2^32 seconds",
        ));
    }
    if !errs.is_empty() {
        return Err(ApiError::invalid(GROUP, KIND, "", &errs));
    }

    let mut binding = Binding::default();
    let bound_ref = spec.get("boundObjectRef").filter(|r| !r.is_null()).cloned();
    if let Some(r) = &bound_ref {
        let api_version = str_at(r, "/apiVersion");
        let kind = str_at(r, "/kind");
        let ref_name = str_at(r, "/name");
        let ref_uid = str_at(r, "/uid");
        let group = match api_version.rsplit_once('/') {
            Some((g, _)) => g,
            None => "",
        };
        let uid = match (group, kind) {
            ("", "Pod") => {
                let pod = registry.get(find("pods")?, Some(namespace), ref_name)?;
                if str_at(&pod, "/spec/serviceAccountName") != name {
                    return Err(ApiError::bad_request(format!(
                        "cannot bind token for serviceaccount {name:?} to pod running with different serviceaccount name."
                    )));
                }
                let node_name = str_at(&pod, "/spec/nodeName");
                if !node_name.is_empty() {
                    // A missing node is left out of the token rather than failing it.
                    binding.node = registry.get(find("nodes")?, None, node_name).ok().map(|n| object_ref(&n));
                }
                let r = object_ref(&pod);
                binding.pod = Some(r.clone());
                r.uid
            }
            ("", "Secret") => {
                let secret = registry.get(find("secrets")?, Some(namespace), ref_name)?;
                let r = object_ref(&secret);
                binding.secret = Some(r.clone());
                r.uid
            }
            ("", "Node") => {
                let node = registry.get(find("nodes")?, None, ref_name)?;
                let r = object_ref(&node);
                binding.node = Some(r.clone());
                r.uid
            }
            _ => {
                let gvk = if group.is_empty() {
                    format!("/{api_version}, Kind={kind}")
                } else {
                    format!("{api_version}, Kind={kind}")
                };
                return Err(ApiError::bad_request(format!("cannot bind token to object of type {gvk}")));
            }
        };
        if !ref_uid.is_empty() && ref_uid != uid {
            return Err(ApiError::conflict(
                group,
                kind,
                ref_name,
                &format!("the UID in the bound object reference ({ref_uid}) does not match the UID in record. The object might have been deleted and then recreated"),
            ));
        }
    }

    // Pod-bound tokens of `kube-api-access-*` volumes live a year but warn after the requested
    // lifetime, so that clients which never re-read their token keep working.
    let (lifetime, warn_after) = if binding.pod.is_some()
        && expiration == WARN_ONLY_EXPIRATION_SECONDS
        && audiences.iter().any(|a| tokens.api_audiences.contains(a))
    {
        (EXTENDED_EXPIRATION_SECONDS, Some(expiration))
    } else {
        (expiration, None)
    };
    let now = unix_now();
    let claims = NewToken {
        issuer: &tokens.issuer,
        namespace,
        service_account: object_ref(&sa),
        binding,
        audiences: audiences.clone(),
        now,
        expiration_seconds: lifetime,
        warn_after_seconds: warn_after,
        jti: uuid::Uuid::new_v4().to_string(),
    }
    .claims();
    let claims = serde_json::to_value(&claims).map_err(|e| ApiError::internal(e.to_string()))?;
    let token =
        tokens.signer.sign(&claims).map_err(|e| ApiError::internal(format!("failed to generate token: {e}")))?;
    let expires = jiff::Timestamp::from_second(now + expiration)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let created = jiff::Timestamp::from_second(now)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .map_err(|e| ApiError::internal(e.to_string()))?;
    req["apiVersion"] = json!("authentication.k8s.io/v1");
    req["kind"] = json!(KIND);
    let md = crate::object::meta_mut(&mut req);
    md.insert("name".into(), json!(name));
    md.insert("namespace".into(), json!(namespace));
    md.insert("creationTimestamp".into(), json!(created));
    req["spec"] = json!({"audiences": audiences, "expirationSeconds": expiration, "boundObjectRef": bound_ref});
    req["status"] = json!({"token": token, "expirationTimestamp": expires});
    Ok(req)
}
