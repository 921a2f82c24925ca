//! Create-only kinds computed by the server: access reviews, self-subject reviews and
//! `bindings`.

use crate::auth::{Attributes, Authorizer, Decision, UserInfo};
use crate::endpoints::body::{decode_body, read_request_body};
use crate::endpoints::command::Verb;
use crate::endpoints::reply::respond_json;
use crate::endpoints::Body;
use crate::error::ApiError;
use crate::rbac::RbacAuthorizer;
use crate::registry::{Ctx, FieldValidation, Registry};
use crate::request::{RequestInfo, RequestSubresource, RequestVerb};
use http::{Method, Request, Response, StatusCode};
use k1s_api::ResourceInfo;
use serde_json::{json, Value};

fn review_info(attrs: &Value) -> RequestInfo {
    let ns = attrs.get("namespace").and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
    let s = |k: &str| attrs.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    RequestInfo {
        is_resource: true,
        path: String::new(),
        verb: RequestVerb::named(&s("verb")),
        api_prefix: "apis".into(),
        group: s("group"),
        version: s("version"),
        namespace: ns,
        resource: s("resource"),
        subresource: Some(s("subresource")).filter(|x| !x.is_empty()).map(|x| RequestSubresource::named(&x)),
        name: Some(s("name")).filter(|x| !x.is_empty()),
        rest: Vec::new(),
        field_selector: None,
    }
}

fn access(authz: &dyn Authorizer, user: &UserInfo, spec: &Value) -> Value {
    let info = if let Some(ra) = spec.get("resourceAttributes") {
        review_info(ra)
    } else if let Some(nra) = spec.get("nonResourceAttributes") {
        RequestInfo {
            is_resource: false,
            path: nra.get("path").and_then(Value::as_str).unwrap_or("").to_string(),
            verb: RequestVerb::named(nra.get("verb").and_then(Value::as_str).unwrap_or("")),
            ..Default::default()
        }
    } else {
        return json!({"allowed": false, "evaluationError": "neither resourceAttributes nor nonResourceAttributes given"});
    };
    match authz.authorize(&Attributes { user, info: &info }) {
        Decision::Allow => json!({"allowed": true}),
        Decision::Deny(reason) if !reason.is_empty() => json!({"allowed": false, "denied": true, "reason": reason}),
        Decision::Deny(_) => json!({"allowed": false, "denied": true}),
        Decision::NoOpinion(reason) if !reason.is_empty() => json!({"allowed": false, "reason": reason}),
        Decision::NoOpinion(_) => json!({"allowed": false}),
    }
}

fn user_from_spec(spec: &Value) -> UserInfo {
    UserInfo {
        name: spec.get("user").and_then(Value::as_str).unwrap_or("").to_string(),
        uid: spec.get("uid").and_then(Value::as_str).unwrap_or("").to_string(),
        groups: spec
            .get("groups")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default(),
        extra: spec
            .get("extra")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| {
                        let vals =
                            v.as_array().map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect());
                        (k.clone(), vals.unwrap_or_default())
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// `status.userInfo` of reviews: username, uid, groups and extra (omitted when empty).
fn user_info_json(user: &UserInfo) -> Value {
    let mut u = json!({"username": user.name, "groups": user.groups});
    if !user.uid.is_empty() {
        u["uid"] = json!(user.uid);
    }
    if !user.extra.is_empty() {
        u["extra"] = json!(user.extra);
    }
    u
}

/// What the computed kinds read: the store, the authorizers and the authenticators.
pub(crate) struct Deps<'a> {
    pub registry: &'a Registry,
    pub authz: &'a dyn Authorizer,
    pub rbac: &'a RbacAuthorizer,
    pub authn: &'a crate::authn::RequestAuthenticator,
}

pub(crate) async fn handle(
    deps: Deps<'_>,
    req: Request<hyper::body::Incoming>,
    res: &'static ResourceInfo,
    verb: Verb,
    namespace: Option<&str>,
    name: Option<&str>,
    user: &UserInfo,
) -> Result<Response<Body>, ApiError> {
    if res.resource == "componentstatuses" {
        let item = |n: &str| json!({"metadata": {"name": n}, "conditions": [{"type": "Healthy", "status": "True", "message": "ok"}]});
        return match (verb, name) {
            (Verb::List, _) => Ok(respond_json(
                StatusCode::OK,
                &json!({"kind": "ComponentStatusList", "apiVersion": "v1", "metadata": {}, "items": [item("controller-manager"), item("scheduler"), item("etcd-0")]}),
            )),
            (Verb::Get, Some(n)) if ["controller-manager", "scheduler", "etcd-0"].contains(&n) => {
                let mut i = item(n);
                i["kind"] = json!("ComponentStatus");
                i["apiVersion"] = json!("v1");
                Ok(respond_json(StatusCode::OK, &i))
            }
            (Verb::Get, Some(n)) => Err(ApiError::not_found("", "componentstatuses", n)),
            _ => Err(ApiError::method_not_allowed(verb.as_str(), "componentstatuses")),
        };
    }
    if req.method() != Method::POST {
        return Err(ApiError::method_not_allowed(req.method().as_str(), res.resource));
    }
    let (headers, body) = read_request_body(req).await?;
    let mut obj = decode_body(&headers, &body)?;
    if !obj.is_object() {
        return Err(ApiError::bad_request("the request body must be an object"));
    }
    obj["apiVersion"] = json!(res.api_version());
    obj["kind"] = json!(res.kind);
    let spec = obj.get("spec").cloned().unwrap_or_else(|| json!({}));
    match res.resource {
        "selfsubjectaccessreviews" => {
            obj["status"] = access(deps.authz, user, &spec);
        }
        "subjectaccessreviews" | "localsubjectaccessreviews" => {
            let subject = user_from_spec(&spec);
            if subject.name.is_empty() && subject.groups.is_empty() {
                return Err(ApiError::invalid(
                    res.group,
                    res.kind,
                    "",
                    &[k1s_api::FieldError::invalid("spec.user", "", "at least one of user or group must be specified")],
                ));
            }
            obj["status"] = access(deps.authz, &subject, &spec);
        }
        "selfsubjectrulesreviews" => {
            let masters = user.groups.iter().any(|g| g == "system:masters");
            obj["status"] = if masters {
                json!({
                    "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                    "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                    "incomplete": false,
                })
            } else {
                // What RBAC grants (every authenticated user's discovery and self-review rules
                // come from the default bindings).
                let mut resource_rules: Vec<Value> = Vec::new();
                let mut non_resource_rules: Vec<Value> = Vec::new();
                let namespace = spec.get("namespace").and_then(Value::as_str);
                let add = |list: &mut Vec<Value>, rule: Value| {
                    if !list.contains(&rule) {
                        list.push(rule);
                    }
                };
                for r in deps.rbac.rules_for(user, namespace) {
                    if !r.non_resource_urls.is_empty() {
                        add(&mut non_resource_rules, json!({"verbs": r.verbs, "nonResourceURLs": r.non_resource_urls}));
                    }
                    if !r.resources.is_empty() {
                        let mut rule = json!({"verbs": r.verbs, "apiGroups": r.api_groups, "resources": r.resources});
                        if !r.resource_names.is_empty() {
                            rule["resourceNames"] = json!(r.resource_names);
                        }
                        add(&mut resource_rules, rule);
                    }
                }
                // A kubelet's powers come from the Node authorizer, which is not a list of rules
                // (upstream's answers the same).
                if crate::auth::node_name(user).is_some() {
                    json!({"resourceRules": resource_rules, "nonResourceRules": non_resource_rules, "incomplete": true,
                           "evaluationError": "node authorizer does not support user rule resolution"})
                } else {
                    json!({"resourceRules": resource_rules, "nonResourceRules": non_resource_rules, "incomplete": false})
                }
            };
        }
        "selfsubjectreviews" => {
            obj["status"] = json!({"userInfo": user_info_json(user)});
        }
        "tokenreviews" => {
            let token = spec.get("token").and_then(Value::as_str).unwrap_or("");
            if token.is_empty() {
                return Err(ApiError::invalid(
                    res.group,
                    res.kind,
                    "",
                    &[k1s_api::FieldError::required("spec.token", "")],
                ));
            }
            let requested: Vec<String> = spec
                .get("audiences")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
                .unwrap_or_default();
            // Every bearer token authenticator answers, for the audiences asked for (the API
            // server's own when none are).
            let tokens = &deps.authn.tokens;
            let audiences = if requested.is_empty() { tokens.api_audiences.clone() } else { requested };
            obj["status"] = match tokens.review(token, &audiences).await {
                Ok(r) => json!({"authenticated": true, "user": user_info_json(&r.user), "audiences": r.audiences}),
                Err(refused) => {
                    tracing::debug!(error = %refused, "token review: invalid token");
                    json!({"authenticated": false, "error": refused.to_string()})
                }
            };
        }
        "bindings" => {
            let mut ctx = Ctx {
                user,
                info: res,
                namespace,
                subresource: None,
                dry_run: false,
                field_manager: "k1s-binding".into(),
                field_validation: FieldValidation::Ignore,
                warnings: Vec::new(),
                audit: None,
            };
            let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string();
            crate::subresources::bind(deps.registry, &mut ctx, namespace, &name, &obj).await?;
            return Ok(respond_json(
                StatusCode::CREATED,
                &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
            ));
        }
        other => return Err(ApiError::method_not_allowed("POST", other)),
    }
    Ok(respond_json(StatusCode::CREATED, &obj))
}
