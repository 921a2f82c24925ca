//! A resource request parsed once into what it asks for: the resource, its namespace, name and
//! subresource, the verb with its typed options, and who serves it (upstream's `RequestInfo`
//! plus the options each of its `endpoints/handlers` decodes). Every refusal that needs no
//! body and no stored object is decided here, as the Status upstream answers with.

use super::body::{content_type, header_str};
use crate::error::ApiError;
use crate::registry::{FieldValidation, ListOptions, PatchType};
use crate::request::{Query, RequestInfo, RequestSubresource};
pub use crate::request::{Subresource, Verb};
use crate::table::{self, Conversion, IncludeObject};
use http::{header, HeaderMap, Method};
use k1s_api::resources::Backing;
use k1s_api::selectors::{Op, Requirement, Selector};
use k1s_api::ResourceInfo;

/// The options of a watch.
#[derive(Clone, Debug)]
pub struct WatchOptions {
    /// Selectors and the resourceVersion to start from; a watch of one name selects
    /// `metadata.name`.
    pub list: ListOptions,
    /// `timeoutSeconds` when positive; otherwise the server picks one.
    pub timeout_seconds: Option<u64>,
    pub allow_bookmarks: bool,
    /// `sendInitialEvents`, when given.
    pub send_initial_events: Option<bool>,
}

/// The query's part of a delete's options (the body's `DeleteOptions` are read when served).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeleteQuery {
    pub grace_period_seconds: Option<i64>,
    pub propagation_policy: Option<String>,
    pub orphan_dependents: Option<bool>,
}

impl DeleteQuery {
    fn parse(query: &Query) -> DeleteQuery {
        DeleteQuery {
            grace_period_seconds: query.get("gracePeriodSeconds").and_then(|s| s.parse::<i64>().ok()),
            propagation_policy: query.get("propagationPolicy").map(str::to_string),
            orphan_dependents: query.get("orphanDependents").and_then(|s| s.parse::<bool>().ok()),
        }
    }
}

/// A verb the registry serves on a resource (or on a subresource stored with it: `status`,
/// `finalize`, `ephemeralcontainers`, `resize`, `approval`), with its typed options.
#[derive(Clone, Debug)]
pub enum ResourceCommand {
    Get,
    List(ListOptions),
    Watch(WatchOptions),
    Create,
    Update,
    Patch { patch_type: PatchType, force: bool },
    Delete(DeleteQuery),
    DeleteCollection { list: ListOptions, delete: DeleteQuery },
}

/// Who serves a resource request.
#[derive(Clone, Debug)]
pub enum Route {
    /// The registry's generic verbs.
    Registry(ResourceCommand),
    /// `metrics.k8s.io`: node and pod metrics scraped from kubelets.
    MetricsApi(ListOptions),
    /// Kinds computed by the server (access reviews, TokenReviews, componentstatuses).
    Virtual(Verb),
    /// `…/scale` (get, update or patch).
    Scale(Verb),
    /// `pods/binding` (create).
    Binding,
    /// `pods/eviction` (create).
    Eviction,
    /// `serviceaccounts/token` (create).
    ServiceAccountToken,
    /// `pods/{log,exec,attach,portforward}`: the kubelet serves them (the HTTP method is checked
    /// there: exec may be a GET or a POST upgrade).
    Kubelet(Subresource),
    /// `pods/proxy`, `services/proxy`, `nodes/proxy`: any method is passed on.
    Proxy,
}

/// How writes are made: `dryRun`, `fieldManager`, `fieldValidation`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteOptions {
    pub dry_run: bool,
    /// The `fieldManager` parameter, else the User-Agent's product.
    pub field_manager: String,
    pub field_validation: FieldValidation,
}

/// What the reply is turned into: the Accept header's conversion and `includeObject`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplyShape {
    pub conversion: Option<Conversion>,
    pub include: IncludeObject,
}

impl ReplyShape {
    /// The Table apiVersion, when a Table was asked for.
    pub fn table(&self) -> Option<&'static str> {
        match self.conversion {
            Some(Conversion::Table(av)) => Some(av),
            _ => None,
        }
    }
}

/// One parsed resource request.
#[derive(Clone, Debug)]
pub struct ResourceRequest {
    pub res: &'static ResourceInfo,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<Subresource>,
    pub write: WriteOptions,
    pub shape: ReplyShape,
    pub route: Route,
}

impl ResourceRequest {
    /// Parses a request `info` addresses as a resource. `lookup` finds a group, version and
    /// resource among those served. The checks run in upstream's order: unknown path (404),
    /// unacceptable Accept (406), verb not served (405), then the options (400), then the
    /// verb's own requirements.
    pub fn parse(
        lookup: impl FnOnce(&str, &str, &str) -> Option<&'static ResourceInfo>,
        method: &Method,
        info: &RequestInfo,
        query: &Query,
        headers: &HeaderMap,
    ) -> Result<ResourceRequest, ApiError> {
        let res = lookup(&info.group, &info.version, &info.resource).ok_or_else(ApiError::not_found_path)?;
        if !res.namespaced() && info.namespace.is_some() {
            return Err(ApiError::not_found_path());
        }
        if let Some(sub) = info.subresource_name() {
            if !res.has_subresource(sub) {
                return Err(ApiError::not_found_path());
            }
        }
        if !accepts_json(headers) {
            return Err(ApiError::not_acceptable(
                "only the following media types are accepted: application/json, application/yaml",
            ));
        }
        let verb = info.verb.api();
        if info.subresource.is_none() && !verb.is_some_and(|v| res.verbs.contains(&v.as_str())) {
            return Err(ApiError::method_not_allowed(
                method.as_str(),
                &format!("{}{}", info.resource, if info.name.is_some() { "/name" } else { "" }),
            ));
        }
        let mut request = ResourceRequest {
            res,
            namespace: info.namespace.clone(),
            name: info.name.clone(),
            subresource: info.subresource.as_ref().and_then(RequestSubresource::known),
            write: WriteOptions {
                dry_run: false,
                field_manager: String::new(),
                field_validation: FieldValidation::Warn,
            },
            shape: ReplyShape { conversion: None, include: IncludeObject::Metadata },
            route: Route::Proxy,
        };
        let not_allowed = |what: &str| ApiError::method_not_allowed(info.verb.as_str(), what);
        if res.backing == Backing::Virtual {
            request.route = if res.group == k1s_api::metrics::GROUP {
                Route::MetricsApi(list_options(query)?)
            } else {
                Route::Virtual(verb.ok_or_else(|| not_allowed(res.resource))?)
            };
            return Ok(request);
        }
        let dry_run = match query.all("dryRun") {
            [] => false,
            [v] if v == "All" => true,
            [v, ..] => return Err(ApiError::bad_request(format!("Invalid dryRun parameter: {v}"))),
        };
        let field_manager = query.get("fieldManager").filter(|s| !s.is_empty());
        request.write = WriteOptions {
            dry_run,
            field_manager: field_manager.map_or_else(|| default_field_manager(headers), str::to_string),
            field_validation: field_validation(query)?,
        };
        if res.namespaced() && info.namespace.is_none() && !matches!(verb, Some(Verb::List | Verb::Watch)) {
            return Err(ApiError::not_found_path());
        }
        request.shape = ReplyShape {
            conversion: table::negotiate(header_str(headers, header::ACCEPT))?,
            include: IncludeObject::parse(query.get("includeObject")),
        };
        request.route = match (info.subresource_name(), request.subresource) {
            (None, _)
            | (
                Some(_),
                Some(
                    Subresource::Status
                    | Subresource::Finalize
                    | Subresource::EphemeralContainers
                    | Subresource::Resize
                    | Subresource::Approval,
                ),
            ) => Route::Registry(command(verb, info, query, headers, res, field_manager.is_some())?),
            (Some(_), Some(Subresource::Scale)) => match verb {
                Some(v @ (Verb::Get | Verb::Update | Verb::Patch)) => Route::Scale(v),
                _ => return Err(not_allowed("scale")),
            },
            (Some(_), Some(Subresource::Binding)) => match verb {
                Some(Verb::Create) => Route::Binding,
                _ => return Err(not_allowed("pods/binding")),
            },
            (Some(_), Some(Subresource::Eviction)) => match verb {
                Some(Verb::Create) => Route::Eviction,
                _ => return Err(not_allowed("pods/eviction")),
            },
            (Some(_), Some(Subresource::Token)) if res.group.is_empty() && res.resource == "serviceaccounts" => {
                match verb {
                    Some(Verb::Create) => Route::ServiceAccountToken,
                    _ => return Err(ApiError::method_not_allowed(method.as_str(), "serviceaccounts/token")),
                }
            }
            (
                Some(_),
                Some(s @ (Subresource::Log | Subresource::Exec | Subresource::Attach | Subresource::PortForward)),
            ) => Route::Kubelet(s),
            (Some(_), Some(Subresource::Proxy)) => Route::Proxy,
            (Some(other), _) => {
                return Err(ApiError::service_unavailable(format!(
                    "the {other} subresource is served by the node agent, which is not running"
                )))
            }
        };
        Ok(request)
    }
}

/// The registry verb with its options.
fn command(
    verb: Option<Verb>,
    info: &RequestInfo,
    query: &Query,
    headers: &HeaderMap,
    res: &'static ResourceInfo,
    field_manager_given: bool,
) -> Result<ResourceCommand, ApiError> {
    let Some(verb) = verb else {
        return Err(ApiError::method_not_allowed(info.verb.as_str(), &info.resource));
    };
    Ok(match verb {
        Verb::Get => ResourceCommand::Get,
        Verb::List => ResourceCommand::List(list_options(query)?),
        Verb::Watch => {
            let mut list = list_options(query)?;
            if let Some(n) = &info.name {
                list.field_selector.requirements.push(Requirement {
                    key: "metadata.name".into(),
                    op: Op::Equals,
                    values: vec![n.clone()],
                });
            }
            ResourceCommand::Watch(WatchOptions {
                list,
                timeout_seconds: query.get("timeoutSeconds").and_then(|s| s.parse::<u64>().ok()).filter(|t| *t > 0),
                allow_bookmarks: query.bool("allowWatchBookmarks"),
                send_initial_events: match query.get("sendInitialEvents") {
                    Some(v) if !v.is_empty() => Some(query.bool("sendInitialEvents")),
                    _ => None,
                },
            })
        }
        Verb::Create => {
            if info.name.is_some() && info.subresource.is_none() {
                return Err(ApiError::method_not_allowed("POST", &format!("{}/name", info.resource)));
            }
            ResourceCommand::Create
        }
        Verb::Update => ResourceCommand::Update,
        Verb::Patch => {
            let ct = content_type(headers);
            let Some(patch_type) = PatchType::from_content_type(&ct) else {
                return Err(ApiError::unsupported_media_type(&ct));
            };
            if patch_type == PatchType::Apply && !field_manager_given {
                return Err(ApiError::invalid(
                    res.group,
                    res.kind,
                    info.name.as_deref().unwrap_or_default(),
                    &[k1s_api::FieldError::required("fieldManager", "is required for apply patch")],
                ));
            }
            if patch_type != PatchType::Apply && query.has("force") {
                return Err(ApiError::bad_request("force flag can only be used with apply patch"));
            }
            ResourceCommand::Patch { patch_type, force: query.bool("force") }
        }
        Verb::Delete => ResourceCommand::Delete(DeleteQuery::parse(query)),
        // Only authorization names `proxy`; no request parses into it.
        Verb::Proxy => return Err(ApiError::method_not_allowed(verb.as_str(), &info.resource)),
        Verb::DeleteCollection => {
            ResourceCommand::DeleteCollection { list: list_options(query)?, delete: DeleteQuery::parse(query) }
        }
    })
}

fn accepts_json(headers: &HeaderMap) -> bool {
    let accept = header_str(headers, header::ACCEPT);
    accept.is_empty()
        || accept.split(',').any(|p| {
            let t = p.split(';').next().unwrap_or("").trim();
            matches!(t, "application/json" | "application/*" | "*/*" | "application/yaml" | "")
        })
}

/// `labelSelector`, `fieldSelector`, `limit`, `continue`, `resourceVersion`,
/// `resourceVersionMatch`.
pub(crate) fn list_options(query: &Query) -> Result<ListOptions, ApiError> {
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

/// The field manager of a write without `fieldManager`: the User-Agent's product, as upstream.
fn default_field_manager(headers: &HeaderMap) -> String {
    let ua = header_str(headers, header::USER_AGENT);
    let m: String = ua.split('/').next().unwrap_or("").chars().filter(|c| !c.is_control()).take(128).collect();
    if m.is_empty() {
        "unknown".into()
    } else {
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{HeaderName, HeaderValue};

    fn parse_with(
        method: Method,
        path: &str,
        query: &str,
        headers: &[(&str, &str)],
    ) -> Result<ResourceRequest, ApiError> {
        let q = Query::parse(Some(query));
        let info = RequestInfo::parse(&method, path, &q);
        assert!(info.is_resource, "{path} addresses a resource");
        let mut h = HeaderMap::new();
        for (k, v) in headers {
            h.insert(
                HeaderName::from_bytes(k.as_bytes()).expect("header name"),
                HeaderValue::from_str(v).expect("header value"),
            );
        }
        ResourceRequest::parse(k1s_api::resources::find, &method, &info, &q, &h)
    }

    fn parse(method: Method, path: &str, query: &str) -> ResourceRequest {
        parse_with(method.clone(), path, query, &[])
            .unwrap_or_else(|e| panic!("{method} {path}?{query}: {} {}: {}", e.code, e.reason, e.message))
    }

    /// The Status code and reason a request is refused with.
    fn refusal(method: Method, path: &str, query: &str, headers: &[(&str, &str)]) -> (u16, &'static str) {
        match parse_with(method.clone(), path, query, headers) {
            Ok(r) => panic!("{method} {path}?{query} was accepted as {:?}", r.route),
            Err(e) => (e.code, e.reason),
        }
    }

    const PODS: &str = "/api/v1/namespaces/ns1/pods";
    const POD: &str = "/api/v1/namespaces/ns1/pods/web";

    #[test]
    fn every_verb_parses_into_its_command() {
        let cases: [(Method, &str, &str, Verb); 9] = [
            (Method::GET, POD, "", Verb::Get),
            (Method::HEAD, POD, "", Verb::Get),
            (Method::GET, PODS, "", Verb::List),
            (Method::GET, PODS, "watch=true", Verb::Watch),
            (Method::POST, PODS, "", Verb::Create),
            (Method::PUT, POD, "", Verb::Update),
            (Method::PATCH, POD, "", Verb::Patch),
            (Method::DELETE, POD, "", Verb::Delete),
            (Method::DELETE, PODS, "", Verb::DeleteCollection),
        ];
        // A patch names its type (a PATCH without one is a 415, below).
        let merge = [("content-type", "application/merge-patch+json")];
        for (method, path, query, verb) in cases {
            let r = parse_with(method.clone(), path, query, &merge).expect("parsed");
            let Route::Registry(command) = &r.route else { panic!("{method} {path}: {:?}", r.route) };
            let parsed = match command {
                ResourceCommand::Get => Verb::Get,
                ResourceCommand::List(_) => Verb::List,
                ResourceCommand::Watch(_) => Verb::Watch,
                ResourceCommand::Create => Verb::Create,
                ResourceCommand::Update => Verb::Update,
                ResourceCommand::Patch { .. } => Verb::Patch,
                ResourceCommand::Delete(_) => Verb::Delete,
                ResourceCommand::DeleteCollection { .. } => Verb::DeleteCollection,
            };
            assert_eq!(parsed, verb, "{method} {path}?{query}");
            assert_eq!((r.res.resource, r.namespace.as_deref(), r.subresource), ("pods", Some("ns1"), None));
            assert_eq!(Verb::parse(verb.as_str()), Some(verb));
        }
    }

    #[test]
    fn list_and_watch_carry_their_typed_options() {
        let r = parse(
            Method::GET,
            "/apis/apps/v1/deployments",
            "labelSelector=app%3Dweb&fieldSelector=metadata.name%3Dx&limit=500&continue=tok&resourceVersion=0",
        );
        let Route::Registry(ResourceCommand::List(opts)) = r.route else { panic!("{:?}", r.route) };
        assert_eq!((opts.limit, opts.continue_token.as_deref()), (500, Some("tok")));
        assert_eq!(opts.resource_version.as_deref(), Some("0"));
        assert_eq!(
            (opts.label_selector.to_string(), opts.field_selector.to_string()),
            ("app=web".into(), "metadata.name=x".into())
        );
        assert_eq!(r.namespace, None, "all namespaces");

        let r = parse(
            Method::GET,
            "/api/v1/watch/namespaces/ns1/pods/web",
            "timeoutSeconds=30&allowWatchBookmarks=true&sendInitialEvents=false",
        );
        let Route::Registry(ResourceCommand::Watch(w)) = r.route else { panic!("{:?}", r.route) };
        assert_eq!((w.timeout_seconds, w.allow_bookmarks, w.send_initial_events), (Some(30), true, Some(false)));
        assert_eq!(w.list.field_selector.to_string(), "metadata.name=web", "a watch of one name selects it");

        let r = parse(Method::GET, PODS, "watch=1&timeoutSeconds=0");
        let Route::Registry(ResourceCommand::Watch(w)) = r.route else { panic!("{:?}", r.route) };
        assert_eq!((w.timeout_seconds, w.send_initial_events), (None, None), "0 leaves the timeout to the server");
    }

    #[test]
    fn writes_carry_patch_type_delete_query_and_write_options() {
        let r = parse_with(
            Method::PATCH,
            POD,
            "fieldManager=kubectl&force=true&dryRun=All&fieldValidation=Strict",
            &[("content-type", "application/apply-patch+yaml")],
        )
        .expect("apply");
        assert!(matches!(
            r.route,
            Route::Registry(ResourceCommand::Patch { patch_type: PatchType::Apply, force: true })
        ));
        assert_eq!(
            r.write,
            WriteOptions { dry_run: true, field_manager: "kubectl".into(), field_validation: FieldValidation::Strict }
        );
        for (ct, want) in [
            ("application/merge-patch+json", PatchType::Merge),
            ("application/json-patch+json", PatchType::Json),
            ("application/strategic-merge-patch+json; charset=utf-8", PatchType::Strategic),
        ] {
            let r = parse_with(Method::PATCH, POD, "", &[("content-type", ct)]).expect(ct);
            let Route::Registry(ResourceCommand::Patch { patch_type, force: false }) = r.route else { panic!("{ct}") };
            assert_eq!(patch_type, want);
        }

        let r = parse(Method::DELETE, POD, "gracePeriodSeconds=0&propagationPolicy=Foreground");
        let Route::Registry(ResourceCommand::Delete(q)) = r.route else { panic!("{:?}", r.route) };
        assert_eq!(
            q,
            DeleteQuery {
                grace_period_seconds: Some(0),
                propagation_policy: Some("Foreground".into()),
                orphan_dependents: None
            }
        );

        let r = parse(Method::DELETE, PODS, "labelSelector=a%3Db&propagationPolicy=Orphan");
        let Route::Registry(ResourceCommand::DeleteCollection { list, delete }) = r.route else {
            panic!("{:?}", r.route)
        };
        assert_eq!(
            (list.label_selector.to_string(), delete.propagation_policy.as_deref()),
            ("a=b".into(), Some("Orphan"))
        );

        // Without fieldManager, the User-Agent's product manages the fields.
        let r = parse_with(Method::POST, PODS, "", &[("user-agent", "kubectl/v1.32.4 (linux/amd64)")]).expect("create");
        assert_eq!((r.write.field_manager.as_str(), r.write.dry_run), ("kubectl", false));
        assert_eq!(r.write.field_validation, FieldValidation::Warn);
        assert_eq!(parse(Method::POST, PODS, "").write.field_manager, "unknown");
    }

    #[test]
    fn subresources_route_to_their_handlers() {
        let r = parse(Method::PUT, "/api/v1/namespaces/ns1/pods/web/status", "");
        assert!(matches!(r.route, Route::Registry(ResourceCommand::Update)));
        assert_eq!(r.subresource, Some(Subresource::Status));
        let r = parse(Method::PUT, "/api/v1/namespaces/ns1/finalize", "");
        assert!(matches!(r.route, Route::Registry(ResourceCommand::Update)));
        assert_eq!(
            (r.res.resource, r.name.as_deref(), r.subresource),
            ("namespaces", Some("ns1"), Some(Subresource::Finalize))
        );

        let scale = "/apis/apps/v1/namespaces/ns1/deployments/web/scale";
        assert!(matches!(parse(Method::GET, scale, "").route, Route::Scale(Verb::Get)));
        assert!(matches!(parse(Method::PATCH, scale, "").route, Route::Scale(Verb::Patch)));
        assert!(matches!(parse(Method::PUT, scale, "").route, Route::Scale(Verb::Update)));
        assert!(matches!(parse(Method::POST, &format!("{POD}/binding"), "").route, Route::Binding));
        assert!(matches!(parse(Method::POST, &format!("{POD}/eviction"), "").route, Route::Eviction));
        let token = "/api/v1/namespaces/ns1/serviceaccounts/default/token";
        assert!(matches!(parse(Method::POST, token, "").route, Route::ServiceAccountToken));
        for (sub, want) in [
            ("log", Subresource::Log),
            ("exec", Subresource::Exec),
            ("attach", Subresource::Attach),
            ("portforward", Subresource::PortForward),
        ] {
            let r = parse(Method::GET, &format!("{POD}/{sub}"), "");
            assert!(matches!(r.route, Route::Kubelet(s) if s == want), "{sub}: {:?}", r.route);
            assert_eq!(Subresource::parse(sub), Some(want));
        }
        // Proxies pass any method on, OPTIONS too.
        for method in [Method::GET, Method::POST, Method::OPTIONS] {
            let r = parse(method, "/api/v1/namespaces/ns1/services/web:80/proxy/healthz", "");
            assert!(matches!(r.route, Route::Proxy));
        }
        assert!(matches!(parse(Method::GET, "/api/v1/nodes/n1/proxy/metrics", "").route, Route::Proxy));
    }

    #[test]
    fn virtual_kinds_and_the_metrics_api_route_past_the_write_options() {
        let r = parse(Method::POST, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "dryRun=bogus");
        assert!(matches!(r.route, Route::Virtual(Verb::Create)));
        let r = parse(Method::GET, "/apis/metrics.k8s.io/v1beta1/namespaces/ns1/pods", "labelSelector=app%3Dweb");
        let Route::MetricsApi(opts) = r.route else { panic!("{:?}", r.route) };
        assert_eq!(opts.label_selector.to_string(), "app=web");
    }

    #[test]
    fn accept_headers_shape_the_reply() {
        let table = [("accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json")];
        let r = parse_with(Method::GET, PODS, "includeObject=Object", &table).expect("table");
        assert_eq!((r.shape.table(), r.shape.include), (Some("meta.k8s.io/v1"), IncludeObject::Object));
        assert_eq!(parse(Method::GET, PODS, "").shape.table(), None);
    }

    #[test]
    fn unknown_paths_are_not_found() {
        let not_found = (404, "NotFound");
        for path in [
            "/api/v1/namespaces/ns1/widgets",
            "/apis/apps/v2/deployments",
            "/apis/nope.example.com/v1/things",
            "/api/v1/namespaces/ns1/pods/web/nope",
            // A cluster-scoped resource under a namespace.
            "/api/v1/namespaces/ns1/nodes/n1",
            // A namespaced object without its namespace.
            "/api/v1/pods/web",
        ] {
            assert_eq!(refusal(Method::GET, path, "", &[]), not_found, "{path}");
        }
        assert_eq!(refusal(Method::POST, "/api/v1/configmaps", "", &[]), not_found, "create needs a namespace");
    }

    #[test]
    fn methods_a_resource_does_not_serve_are_not_allowed() {
        let not_allowed = (405, "MethodNotAllowed");
        assert_eq!(refusal(Method::OPTIONS, POD, "", &[]), not_allowed);
        assert_eq!(refusal(Method::POST, POD, "", &[]), not_allowed, "create names no object");
        assert_eq!(refusal(Method::OPTIONS, &format!("{POD}/status"), "", &[]), not_allowed);
        let ssar = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
        assert_eq!(refusal(Method::GET, ssar, "", &[]), not_allowed, "reviews are create-only");
        assert_eq!(refusal(Method::DELETE, "/api/v1/componentstatuses/etcd-0", "", &[]), not_allowed);
        let scale = "/apis/apps/v1/namespaces/ns1/deployments/web/scale";
        assert_eq!(refusal(Method::POST, scale, "", &[]), not_allowed);
        assert_eq!(refusal(Method::GET, &format!("{POD}/binding"), "", &[]), not_allowed);
        assert_eq!(refusal(Method::PUT, &format!("{POD}/eviction"), "", &[]), not_allowed);
        let token = "/api/v1/namespaces/ns1/serviceaccounts/default/token";
        let e = parse_with(Method::GET, token, "", &[]).expect_err("token is create-only");
        assert_eq!((e.code, e.message.as_str()), (405, "GET is not supported on serviceaccounts/token"));
        let e = parse_with(Method::OPTIONS, POD, "", &[]).expect_err("OPTIONS");
        assert_eq!(e.message, "OPTIONS is not supported on pods/name");
    }

    #[test]
    fn bad_options_are_bad_requests() {
        let bad = (400, "BadRequest");
        for query in [
            "labelSelector=a%20in%20(",
            "fieldSelector=metadata.name",
            "limit=ten",
            "dryRun=Bogus",
            "dryRun=All&dryRun=All",
            "fieldValidation=Loud",
        ] {
            assert_eq!(refusal(Method::GET, PODS, query, &[]), bad, "{query}");
        }
        let merge = [("content-type", "application/merge-patch+json")];
        assert_eq!(refusal(Method::PATCH, POD, "force=true", &merge), bad, "force is for apply only");
        assert_eq!(refusal(Method::PATCH, POD, "", &[("content-type", "text/plain")]), (415, "UnsupportedMediaType"));
        let apply = [("content-type", "application/apply-patch+yaml")];
        assert_eq!(refusal(Method::PATCH, POD, "", &apply), (422, "Invalid"), "apply needs a fieldManager");
        assert_eq!(refusal(Method::GET, POD, "", &[("accept", "text/html")]), (406, "NotAcceptable"));
    }
}
