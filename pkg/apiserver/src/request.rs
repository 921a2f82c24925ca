//! Turning a request path and method into what it addresses (upstream's `RequestInfoFactory`).

use std::collections::HashMap;

/// A Kubernetes API verb on a resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
    DeleteCollection,
    /// Upstream's verb for the legacy `/api/v1/proxy/…` paths; k1s serves none, but RBAC rules
    /// and access reviews name it.
    Proxy,
}

impl Verb {
    /// The verb named `s`; `None` for any other name.
    pub fn parse(s: &str) -> Option<Verb> {
        Some(match s {
            "get" => Verb::Get,
            "list" => Verb::List,
            "watch" => Verb::Watch,
            "create" => Verb::Create,
            "update" => Verb::Update,
            "patch" => Verb::Patch,
            "delete" => Verb::Delete,
            "deletecollection" => Verb::DeleteCollection,
            "proxy" => Verb::Proxy,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
            Verb::Proxy => "proxy",
        }
    }
}

/// The subresources k1s knows, the connect ones (`log`, `exec`, `attach`, `portforward`,
/// `proxy`) among them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subresource {
    Status,
    Finalize,
    EphemeralContainers,
    Resize,
    Approval,
    Scale,
    Binding,
    Eviction,
    Token,
    Log,
    Exec,
    Attach,
    PortForward,
    Proxy,
}

impl Subresource {
    pub fn parse(s: &str) -> Option<Subresource> {
        Some(match s {
            "status" => Subresource::Status,
            "finalize" => Subresource::Finalize,
            "ephemeralcontainers" => Subresource::EphemeralContainers,
            "resize" => Subresource::Resize,
            "approval" => Subresource::Approval,
            "scale" => Subresource::Scale,
            "binding" => Subresource::Binding,
            "eviction" => Subresource::Eviction,
            "token" => Subresource::Token,
            "log" => Subresource::Log,
            "exec" => Subresource::Exec,
            "attach" => Subresource::Attach,
            "portforward" => Subresource::PortForward,
            "proxy" => Subresource::Proxy,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Subresource::Status => "status",
            Subresource::Finalize => "finalize",
            Subresource::EphemeralContainers => "ephemeralcontainers",
            Subresource::Resize => "resize",
            Subresource::Approval => "approval",
            Subresource::Scale => "scale",
            Subresource::Binding => "binding",
            Subresource::Eviction => "eviction",
            Subresource::Token => "token",
            Subresource::Log => "log",
            Subresource::Exec => "exec",
            Subresource::Attach => "attach",
            Subresource::PortForward => "portforward",
            Subresource::Proxy => "proxy",
        }
    }
}

/// What a request does, as authorization and logs see it: an API [`Verb`], or a name that is
/// none (a non-resource request's lower-cased HTTP method such as `post`, a resource request's
/// method no verb maps to, and the verbs only authorization names: `impersonate`, `bind`,
/// `escalate`, `use`, custom verbs, `*` in a rule being compared).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestVerb {
    Api(Verb),
    Other(String),
}

impl Default for RequestVerb {
    fn default() -> Self {
        RequestVerb::Other(String::new())
    }
}

impl RequestVerb {
    /// The verb named `s` (an API verb when it is one).
    pub fn named(s: &str) -> RequestVerb {
        Verb::parse(s).map_or_else(|| RequestVerb::Other(s.to_string()), RequestVerb::Api)
    }

    pub fn as_str(&self) -> &str {
        match self {
            RequestVerb::Api(v) => v.as_str(),
            RequestVerb::Other(s) => s,
        }
    }

    /// The API verb, if it is one.
    pub fn api(&self) -> Option<Verb> {
        match self {
            RequestVerb::Api(v) => Some(*v),
            RequestVerb::Other(_) => None,
        }
    }

    pub fn is(&self, verb: Verb) -> bool {
        self.api() == Some(verb)
    }
}

impl std::fmt::Display for RequestVerb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The subresource a request addresses: one k1s knows, or another name (which the resource
/// request answers 404, and which an RBAC rule or an access review may name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestSubresource {
    Known(Subresource),
    Other(String),
}

impl RequestSubresource {
    pub fn named(s: &str) -> RequestSubresource {
        Subresource::parse(s).map_or_else(|| RequestSubresource::Other(s.to_string()), RequestSubresource::Known)
    }

    pub fn as_str(&self) -> &str {
        match self {
            RequestSubresource::Known(s) => s.as_str(),
            RequestSubresource::Other(s) => s,
        }
    }

    /// The subresource, if k1s knows it.
    pub fn known(&self) -> Option<Subresource> {
        match self {
            RequestSubresource::Known(s) => Some(*s),
            RequestSubresource::Other(_) => None,
        }
    }
}

/// What a request addresses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestInfo {
    pub is_resource: bool,
    pub path: String,
    /// Kubernetes verb: get, list, watch, create, update, patch, delete, deletecollection;
    /// for non-resource paths, the lower-cased HTTP method.
    pub verb: RequestVerb,
    pub api_prefix: String,
    pub group: String,
    pub version: String,
    pub namespace: Option<String>,
    pub resource: String,
    pub subresource: Option<RequestSubresource>,
    pub name: Option<String>,
    /// Path segments after the subresource (e.g. proxy paths).
    pub rest: Vec<String>,
    /// The `fieldSelector` of a list or watch, as sent (the Node authorizer lets a kubelet list
    /// only the pods `spec.nodeName=<its node>` selects).
    pub field_selector: Option<String>,
}

fn decode_segment(s: &str) -> String {
    percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned()
}

impl RequestInfo {
    pub fn parse(method: &http::Method, path: &str, query: &Query) -> RequestInfo {
        let mut info = RequestInfo { path: path.to_string(), verb: method_verb(method), ..Default::default() };
        let parts: Vec<String> =
            path.trim_matches('/').split('/').filter(|s| !s.is_empty()).map(decode_segment).collect();
        let mut cur: &[String] = &parts;
        match cur.first().map(String::as_str) {
            Some("api") if cur.len() >= 2 => {
                info.api_prefix = "api".into();
                info.version = cur[1].clone();
                cur = &cur[2..];
            }
            Some("apis") if cur.len() >= 3 => {
                info.api_prefix = "apis".into();
                info.group = cur[1].clone();
                info.version = cur[2].clone();
                cur = &cur[3..];
            }
            _ => return info,
        }
        if cur.is_empty() {
            return info;
        }
        info.is_resource = true;
        let mut legacy_watch = false;
        if cur[0] == "watch" {
            legacy_watch = true;
            cur = &cur[1..];
        }
        if cur.first().map(String::as_str) == Some("namespaces") && cur.len() > 1 {
            info.namespace = Some(cur[1].clone());
            if cur.len() > 2 && !matches!(cur[2].as_str(), "status" | "finalize") {
                cur = &cur[2..];
            }
        }
        if let Some(r) = cur.first() {
            info.resource = r.clone();
        }
        if let Some(n) = cur.get(1) {
            info.name = Some(n.clone());
        }
        if let Some(s) = cur.get(2) {
            info.subresource = Some(RequestSubresource::named(s));
        }
        if cur.len() > 3 {
            info.rest = cur[3..].to_vec();
        }
        // `/api/v1/namespaces/foo` names the namespace itself.
        if info.resource == "namespaces" {
            info.namespace = None;
        }
        let watch = legacy_watch || query.bool("watch");
        info.field_selector = query.get("fieldSelector").map(str::to_string);
        let verb = match *method {
            http::Method::GET | http::Method::HEAD => {
                if watch {
                    Verb::Watch
                } else if info.name.is_none() {
                    Verb::List
                } else {
                    Verb::Get
                }
            }
            http::Method::POST => Verb::Create,
            http::Method::PUT => Verb::Update,
            http::Method::PATCH => Verb::Patch,
            http::Method::DELETE => {
                if info.name.is_none() {
                    Verb::DeleteCollection
                } else {
                    Verb::Delete
                }
            }
            _ => return info,
        };
        info.verb = RequestVerb::Api(verb);
        info
    }

    /// The object a request names: its name, or for a list or watch the name its field selector
    /// requires (`metadata.name=<name>`), as upstream's request info gives it to authorizers.
    pub fn selected_name(&self) -> Option<&str> {
        if let Some(n) = &self.name {
            return Some(n);
        }
        if !matches!(self.verb.api(), Some(Verb::List | Verb::Watch)) {
            return None;
        }
        self.field_requirement("metadata.name")
    }

    /// The value a list or watch's field selector requires `field` to equal (`field=value` or
    /// `field==value`), if it does.
    pub fn field_requirement(&self, field: &str) -> Option<&str> {
        self.field_selector.as_deref()?.split(',').find_map(|term| {
            let (k, v) = term.split_once("==").or_else(|| term.split_once('=').filter(|(k, _)| !k.ends_with('!')))?;
            (k.trim() == field).then(|| v.trim())
        })
    }

    /// The subresource's name, if the request has one.
    pub fn subresource_name(&self) -> Option<&str> {
        self.subresource.as_ref().map(RequestSubresource::as_str)
    }
}

/// A non-resource request's verb: its lower-cased HTTP method (`get`, `post`, `head`, …).
fn method_verb(method: &http::Method) -> RequestVerb {
    RequestVerb::named(&method.as_str().to_lowercase())
}

/// Decoded query parameters (repeated keys keep every value).
#[derive(Clone, Debug, Default)]
pub struct Query(HashMap<String, Vec<String>>);

impl Query {
    pub fn parse(q: Option<&str>) -> Query {
        let mut m: HashMap<String, Vec<String>> = HashMap::new();
        if let Some(q) = q {
            for (k, v) in form_urlencoded::parse(q.as_bytes()) {
                m.entry(k.into_owned()).or_default().push(v.into_owned());
            }
        }
        Query(m)
    }
    pub fn get(&self, k: &str) -> Option<&str> {
        self.0.get(k).and_then(|v| v.first()).map(String::as_str)
    }
    pub fn all(&self, k: &str) -> &[String] {
        self.0.get(k).map(Vec::as_slice).unwrap_or(&[])
    }
    /// A boolean parameter as Go's `strconv.ParseBool` reads it; absent or unparseable is false.
    pub fn bool(&self, k: &str) -> bool {
        matches!(self.get(k), Some("1" | "t" | "T" | "true" | "TRUE" | "True"))
    }
    pub fn has(&self, k: &str) -> bool {
        self.0.contains_key(k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(m: http::Method, p: &str, q: &str) -> RequestInfo {
        RequestInfo::parse(&m, p, &Query::parse(Some(q)))
    }

    #[test]
    fn resource_paths_parse_like_upstream() {
        let i = parse(http::Method::GET, "/apis/apps/v1/namespaces/ns1/deployments/web/scale", "");
        assert_eq!(
            (
                i.group.as_str(),
                i.namespace.as_deref(),
                i.resource.as_str(),
                i.name.as_deref(),
                i.subresource_name(),
                i.verb.as_str()
            ),
            ("apps", Some("ns1"), "deployments", Some("web"), Some("scale"), "get")
        );
        let i = parse(http::Method::GET, "/api/v1/namespaces/ns1", "");
        assert_eq!((i.resource.as_str(), i.name.as_deref(), i.namespace.as_deref()), ("namespaces", Some("ns1"), None));
        let i = parse(http::Method::PUT, "/api/v1/namespaces/ns1/finalize", "");
        assert_eq!(
            (i.resource.as_str(), i.name.as_deref(), i.subresource_name()),
            ("namespaces", Some("ns1"), Some("finalize"))
        );
        let i = parse(http::Method::GET, "/api/v1/pods", "watch=true");
        assert_eq!((i.verb.as_str(), i.namespace.as_deref()), ("watch", None));
        let i = parse(http::Method::DELETE, "/api/v1/namespaces/a/configmaps", "");
        assert_eq!(i.verb, RequestVerb::Api(Verb::DeleteCollection));
        assert!(!parse(http::Method::GET, "/apis", "").is_resource);
        assert!(!parse(http::Method::GET, "/apis/apps/v1", "").is_resource);
    }

    #[test]
    fn every_method_parses_into_its_verb() {
        use http::Method as M;
        let one = "/api/v1/namespaces/ns1/configmaps/a";
        let all = "/api/v1/namespaces/ns1/configmaps";
        for (method, path, query, want) in [
            (M::GET, one, "", Verb::Get),
            (M::HEAD, one, "", Verb::Get),
            (M::GET, all, "", Verb::List),
            (M::GET, all, "watch=1", Verb::Watch),
            (M::GET, one, "watch=true", Verb::Watch),
            (M::GET, "/api/v1/watch/namespaces/ns1/configmaps", "", Verb::Watch),
            (M::GET, "/api/v1/watch/namespaces/ns1/configmaps/a", "", Verb::Watch),
            (M::POST, all, "", Verb::Create),
            (M::PUT, one, "", Verb::Update),
            (M::PATCH, one, "", Verb::Patch),
            (M::DELETE, one, "", Verb::Delete),
            (M::DELETE, all, "", Verb::DeleteCollection),
        ] {
            let i = parse(method.clone(), path, query);
            assert!(i.is_resource, "{method} {path}");
            assert_eq!(i.verb, RequestVerb::Api(want), "{method} {path}?{query}");
            assert!(i.verb.is(want));
            assert_eq!(RequestVerb::named(want.as_str()), i.verb, "names round-trip");
        }
        // A method no verb maps to keeps its lower-cased name (command parsing answers 405).
        let i = parse(M::OPTIONS, one, "");
        assert_eq!((i.verb.as_str(), i.verb.api()), ("options", None));
        // Non-resource paths: the lower-cased method, an API verb when it is named as one.
        let i = parse(M::GET, "/healthz", "");
        assert_eq!((i.is_resource, i.verb.clone()), (false, RequestVerb::Api(Verb::Get)));
        let i = parse(M::POST, "/apis", "");
        assert_eq!((i.is_resource, i.verb.clone()), (false, RequestVerb::Other("post".into())));
        // Names only authorization uses are kept as they are.
        assert_eq!(RequestVerb::named("impersonate"), RequestVerb::Other("impersonate".into()));
        assert_eq!(RequestVerb::named("proxy"), RequestVerb::Api(Verb::Proxy));
        assert_eq!(RequestVerb::named("*").as_str(), "*");
    }

    #[test]
    fn every_subresource_parses_and_unknown_ones_keep_their_name() {
        for name in [
            "status",
            "finalize",
            "ephemeralcontainers",
            "resize",
            "approval",
            "scale",
            "binding",
            "eviction",
            "token",
            "log",
            "exec",
            "attach",
            "portforward",
            "proxy",
        ] {
            let i = parse(http::Method::GET, &format!("/api/v1/namespaces/ns1/pods/p/{name}"), "");
            let sub = i.subresource.clone().expect("a subresource");
            assert_eq!(sub.known().map(Subresource::as_str), Some(name));
            assert_eq!((i.resource.as_str(), i.name.as_deref(), i.verb.api()), ("pods", Some("p"), Some(Verb::Get)));
        }
        let i = parse(http::Method::GET, "/api/v1/namespaces/ns1/pods/p/bogus", "");
        assert_eq!(i.subresource, Some(RequestSubresource::Other("bogus".into())));
        // Path segments after the subresource (a proxy path) are kept, decoded.
        let i = parse(http::Method::GET, "/api/v1/namespaces/ns1/pods/p/proxy/a%20b/c", "");
        assert_eq!(
            (i.subresource_name(), i.rest.as_slice()),
            (Some("proxy"), &["a b".to_string(), "c".to_string()][..])
        );
    }

    #[test]
    fn paths_that_name_no_resource_are_not_resource_requests() {
        for p in ["/", "/api", "/api/v1", "/apis/apps", "/apis/apps/v1", "/version", "/healthz/ping", "/openapi/v3"] {
            let i = parse(http::Method::GET, p, "");
            assert!(!i.is_resource, "{p}");
            assert_eq!((i.resource.as_str(), i.subresource.as_ref()), ("", None), "{p}");
        }
    }

    #[test]
    fn query_bools() {
        let q = Query::parse(Some("watch=true&a=false&b=1"));
        assert!(q.bool("watch") && q.bool("b") && !q.bool("a") && !q.bool("c"));
    }
}
