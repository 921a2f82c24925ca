//! Turning a request path and method into what it addresses (upstream's `RequestInfoFactory`).

use std::collections::HashMap;

/// What a request addresses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestInfo {
    pub is_resource: bool,
    pub path: String,
    /// Kubernetes verb: get, list, watch, create, update, patch, delete, deletecollection;
    /// for non-resource paths, the lower-cased HTTP method.
    pub verb: String,
    pub api_prefix: String,
    pub group: String,
    pub version: String,
    pub namespace: Option<String>,
    pub resource: String,
    pub subresource: Option<String>,
    pub name: Option<String>,
    /// Path segments after the subresource (e.g. proxy paths).
    pub rest: Vec<String>,
}

fn decode_segment(s: &str) -> String {
    percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned()
}

impl RequestInfo {
    pub fn parse(method: &http::Method, path: &str, query: &Query) -> RequestInfo {
        let mut info =
            RequestInfo { path: path.to_string(), verb: method.as_str().to_lowercase(), ..Default::default() };
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
            info.subresource = Some(s.clone());
        }
        if cur.len() > 3 {
            info.rest = cur[3..].to_vec();
        }
        // `/api/v1/namespaces/foo` names the namespace itself.
        if info.resource == "namespaces" {
            info.namespace = None;
        }
        let watch = legacy_watch || query.bool("watch");
        info.verb = match *method {
            http::Method::GET | http::Method::HEAD => {
                if watch {
                    "watch".into()
                } else if info.name.is_none() {
                    "list".into()
                } else {
                    "get".into()
                }
            }
            http::Method::POST => "create".into(),
            http::Method::PUT => "update".into(),
            http::Method::PATCH => "patch".into(),
            http::Method::DELETE => {
                if info.name.is_none() {
                    "deletecollection".into()
                } else {
                    "delete".into()
                }
            }
            _ => method.as_str().to_lowercase(),
        };
        info
    }
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
                i.subresource.as_deref(),
                i.verb.as_str()
            ),
            ("apps", Some("ns1"), "deployments", Some("web"), Some("scale"), "get")
        );
        let i = parse(http::Method::GET, "/api/v1/namespaces/ns1", "");
        assert_eq!((i.resource.as_str(), i.name.as_deref(), i.namespace.as_deref()), ("namespaces", Some("ns1"), None));
        let i = parse(http::Method::PUT, "/api/v1/namespaces/ns1/finalize", "");
        assert_eq!(
            (i.resource.as_str(), i.name.as_deref(), i.subresource.as_deref()),
            ("namespaces", Some("ns1"), Some("finalize"))
        );
        let i = parse(http::Method::GET, "/api/v1/pods", "watch=true");
        assert_eq!((i.verb.as_str(), i.namespace.as_deref()), ("watch", None));
        let i = parse(http::Method::DELETE, "/api/v1/namespaces/a/configmaps", "");
        assert_eq!(i.verb, "deletecollection");
        assert!(!parse(http::Method::GET, "/apis", "").is_resource);
        assert!(!parse(http::Method::GET, "/apis/apps/v1", "").is_resource);
    }

    #[test]
    fn query_bools() {
        let q = Query::parse(Some("watch=true&a=false&b=1"));
        assert!(q.bool("watch") && q.bool("b") && !q.bool("a") && !q.bool("c"));
    }
}
