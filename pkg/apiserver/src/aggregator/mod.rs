//! The API aggregation layer, as upstream's kube-aggregator: APIServices
//! (`apiregistration.k8s.io/v1`) say which server serves each group-version.
//!
//! - A *local* APIService (no `service`) is served by k1s itself; the server keeps one for each
//!   built-in and each custom group-version ([`autoregister`]).
//! - A request under `/apis/<group>/<version>` whose APIService names a Service is, once
//!   authenticated and authorized here, proxied to the Service over HTTPS ([`proxy`]) with the
//!   caller's identity in the front proxy's headers (`X-Remote-User`, `X-Remote-Group`,
//!   `X-Remote-Extra-*`) and the front proxy's client certificate ([`client`]).
//! - The availability controller ([`availability`]) sets each APIService's `Available`
//!   condition from its Service, endpoints and a discovery request to the backend, whenever an
//!   APIService, a Service or an EndpointSlice changes and every 30 seconds; the backend's
//!   `APIResourceList` it reads is what `/apis` and aggregated discovery show of the
//!   group-version ([`discovery`]).

pub mod autoregister;
pub mod availability;
pub mod client;
pub mod discovery;

use crate::auth::UserInfo;
use crate::endpoints::Body;
use crate::error::ApiError;
use crate::registry::Registry;
use bytes::Bytes;
use http::{header, HeaderMap, HeaderName, HeaderValue, Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

pub const APISERVICES_PREFIX: &str = "/registry/apiregistration.k8s.io/apiservices/";
/// The front proxy client certificate's common name aggregated API servers are told to accept
/// (`requestheader-allowed-names`), kubeadm's.
pub const FRONT_PROXY_CLIENT_NAME: &str = "front-proxy-client";
/// How often every APIService is checked again, changes or not (upstream's resync).
const RESYNC: Duration = Duration::from_secs(30);

/// The front proxy's PKI: what aggregated API servers trust and what k1s presents to them.
#[derive(Clone, Debug)]
pub struct FrontProxyConfig {
    /// The request-header CA (`requestheader-client-ca-file`), PEM.
    pub ca_pem: String,
    /// The API server's client certificate under it, PEM.
    pub client_cert_pem: String,
    pub client_key_pem: String,
    /// When set, the client certificate is taken from this slot at every handshake instead
    /// (so that a renewed one is used without a restart).
    pub reloadable: Option<k1s_pki::ClientCert>,
}

/// An APIService that names a Service: where its group-version is served.
#[derive(Clone, Debug, PartialEq)]
pub struct Remote {
    pub name: String,
    pub group: String,
    pub version: String,
    pub group_priority: i64,
    pub version_priority: i64,
    pub namespace: String,
    pub service: String,
    pub port: u16,
    pub ca_bundle: Vec<u8>,
    pub insecure: bool,
    /// Whether its `Available` condition is `True`.
    pub available: bool,
}

impl Remote {
    /// The APIService's remote part; `None` for a local one.
    pub fn from_object(obj: &Value) -> Option<Remote> {
        use base64::Engine as _;
        let spec = obj.get("spec")?;
        let svc = spec.get("service").filter(|s| s.is_object())?;
        let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let ca_bundle = spec
            .get("caBundle")
            .and_then(Value::as_str)
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .unwrap_or_default();
        let available = obj
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|c| c.get("type").and_then(Value::as_str) == Some("Available") && c["status"] == "True");
        Some(Remote {
            name: crate::object::name(obj).to_string(),
            group: s(spec, "group"),
            version: s(spec, "version"),
            group_priority: spec.get("groupPriorityMinimum").and_then(Value::as_i64).unwrap_or(0),
            version_priority: spec.get("versionPriority").and_then(Value::as_i64).unwrap_or(0),
            namespace: s(svc, "namespace"),
            service: s(svc, "name"),
            port: svc.get("port").and_then(Value::as_u64).and_then(|p| u16::try_from(p).ok()).unwrap_or(443),
            ca_bundle,
            insecure: spec.get("insecureSkipTLSVerify").and_then(Value::as_bool).unwrap_or(false),
            available,
        })
    }

    /// The DNS name the backend's certificate must hold.
    pub fn server_name(&self) -> String {
        format!("{}.{}.svc", self.service, self.namespace)
    }

    /// The discovery path of the group-version (`/api/v1` for the legacy core API).
    pub fn discovery_path(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        }
    }
}

/// The aggregation layer's state: the remote APIServices and what their backends serve.
pub struct Aggregator {
    store: k1s_store::Store,
    identity: Option<client::Identity>,
    /// TLS client configurations per CA bundle.
    tls: k1s_pki::client::ConfigCache,
    remotes: RwLock<Arc<Vec<Remote>>>,
    /// Each available remote group-version's `APIResourceList`, by APIService name.
    discovery: RwLock<BTreeMap<String, Value>>,
    changed: Notify,
}

impl Aggregator {
    pub fn new(
        store: k1s_store::Store,
        front_proxy: Option<&FrontProxyConfig>,
    ) -> Result<Arc<Aggregator>, client::ClientError> {
        let identity = match front_proxy {
            Some(f) => Some(match &f.reloadable {
                Some(slot) => client::Identity::Reloadable(slot.clone()),
                None => client::identity_from_pem(&f.client_cert_pem, &f.client_key_pem)?,
            }),
            None => None,
        };
        let a = Arc::new(Aggregator {
            store,
            identity,
            tls: k1s_pki::client::ConfigCache::new(64),
            remotes: RwLock::default(),
            discovery: RwLock::default(),
            changed: Notify::new(),
        });
        a.load();
        Ok(a)
    }

    /// Reads the remote APIServices from the store.
    fn load(&self) {
        let remotes: Vec<Remote> = self
            .store
            .list(APISERVICES_PREFIX, None, 0, None)
            .map(|p| p.items)
            .unwrap_or_default()
            .iter()
            .filter_map(|kv| serde_json::from_slice::<Value>(&kv.value).ok())
            .filter_map(|o| Remote::from_object(&o))
            .collect();
        let names: Vec<&str> = remotes.iter().map(|r| r.name.as_str()).collect();
        self.discovery.write().unwrap_or_else(|p| p.into_inner()).retain(|k, _| names.contains(&k.as_str()));
        *self.remotes.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(remotes);
    }

    pub fn remotes(&self) -> Arc<Vec<Remote>> {
        self.remotes.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The remote APIService serving `path`, if the path is under one's `/apis/<group>/<version>`.
    pub fn route(&self, path: &str) -> Option<Remote> {
        let mut segs = path.trim_start_matches('/').split('/');
        if segs.next() != Some("apis") {
            return None;
        }
        let (group, version) = (segs.next()?, segs.next()?);
        if group.is_empty() || version.is_empty() {
            return None;
        }
        self.remotes().iter().find(|r| r.group == group && r.version == version).cloned()
    }

    /// Whether a remote APIService has taken over this (otherwise local) group-version.
    pub fn is_remote(&self, group: &str, version: &str) -> bool {
        self.remotes().iter().any(|r| r.group == group && r.version == version)
    }

    fn set_discovery(&self, name: &str, doc: Option<Value>) {
        let mut d = self.discovery.write().unwrap_or_else(|p| p.into_inner());
        match doc {
            Some(doc) => {
                d.insert(name.to_string(), doc);
            }
            None => {
                d.remove(name);
            }
        }
    }

    fn discovery_docs(&self) -> BTreeMap<String, Value> {
        self.discovery.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Keeps the APIServices' status and the proxy's view of them current until `cancel`
    /// fires: on every change of an APIService, a Service or an EndpointSlice, and every
    /// [`RESYNC`].
    pub async fn run(self: Arc<Self>, registry: Arc<Registry>, cancel: CancellationToken) {
        for prefix in [
            APISERVICES_PREFIX,
            "/registry/services/",
            "/registry/discovery.k8s.io/endpointslices/",
            "/registry/apiextensions.k8s.io/customresourcedefinitions/",
        ] {
            tokio::spawn(self.clone().watch(prefix, cancel.clone()));
        }
        loop {
            // A deleted local APIService comes back (upstream's autoregister recreates them).
            autoregister::register_local(&registry).await;
            autoregister::register_custom(&registry).await;
            self.load();
            availability::sync(&self, &registry).await;
            self.load();
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = self.changed.notified() => {
                    // Let a burst of changes (an APIService with its Service) settle.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                _ = tokio::time::sleep(RESYNC) => {}
            }
        }
    }

    /// Wakes [`run`](Self::run) on every change under `prefix`.
    async fn watch(self: Arc<Self>, prefix: &'static str, cancel: CancellationToken) {
        loop {
            let mut watcher = match self.store.watch(prefix, 0) {
                Ok(w) => w,
                Err(e) => {
                    tracing::warn!(prefix, error = %e, "watching for the aggregator failed");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    ev = watcher.next() => match ev {
                        Ok(ev) if self.concerns(&ev) => self.changed.notify_one(),
                        Ok(_) => {}
                        Err(_) => break,
                    },
                }
            }
        }
    }

    /// Whether a change can matter to an APIService: any APIService or definition, and only
    /// the Services (and their EndpointSlices) remote APIServices name.
    fn concerns(&self, ev: &k1s_store::Event) -> bool {
        let key = ev.kv.key.as_str();
        let named = |ns: &str, name: &str| self.remotes().iter().any(|r| r.namespace == ns && r.service == name);
        if let Some(rest) = key.strip_prefix("/registry/services/") {
            return rest.split_once('/').is_some_and(|(ns, name)| named(ns, name));
        }
        if let Some(rest) = key.strip_prefix("/registry/discovery.k8s.io/endpointslices/") {
            let Some((ns, _)) = rest.split_once('/') else { return false };
            if !self.remotes().iter().any(|r| r.namespace == ns) {
                return false;
            }
            return [Some(&ev.kv), ev.prev.as_ref()].into_iter().flatten().any(|kv| {
                serde_json::from_slice::<Value>(&kv.value).ok().is_some_and(|slice| {
                    slice
                        .pointer("/metadata/labels/kubernetes.io~1service-name")
                        .and_then(Value::as_str)
                        .is_some_and(|name| named(ns, name))
                })
            });
        }
        true
    }

    /// Proxies an authorized request to the remote APIService serving it.
    pub async fn proxy(&self, req: Request<Incoming>, user: &UserInfo, remote: &Remote) -> Response<Body> {
        match self.forward(req, user, remote).await {
            Ok(r) => r,
            Err(e) => crate::endpoints::reply::error_response(&e),
        }
    }

    async fn forward(
        &self,
        req: Request<Incoming>,
        user: &UserInfo,
        remote: &Remote,
    ) -> Result<Response<Body>, ApiError> {
        if !remote.available {
            return Err(ApiError::service_unavailable("service unavailable"));
        }
        let addr = crate::service_resolver::resolve(&self.store, &remote.namespace, &remote.service, remote.port)
            .map_err(|e| ApiError::service_unavailable(e.to_string()))?;
        let method = req.method().clone();
        let uri = req.uri().path_and_query().map_or_else(|| req.uri().path().to_string(), |pq| pq.as_str().to_string());
        let mut headers = crate::kubelet_proxy::forwarded_headers(req.headers());
        let (_, body) = crate::endpoints::body::read_request_body(req).await?;
        set_identity_headers(&mut headers, user);
        let trust = if remote.insecure {
            client::Trust::Insecure
        } else {
            client::Trust::bundle_or_system(&remote.ca_bundle, "caBundle")
        };
        let tls = client::tls_config(&self.tls, self.identity.as_ref(), trust)
            .map_err(|e| ApiError::service_unavailable(e.to_string()))?;
        let mut out = Request::builder()
            .method(method)
            .uri(&uri)
            .body(Full::new(body))
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        *out.headers_mut() = headers;
        if let Ok(host) = HeaderValue::from_str(&format!("{}:{}", remote.server_name(), remote.port)) {
            out.headers_mut().insert(header::HOST, host);
        }
        let resp = client::send(&addr, &remote.server_name(), tls, out).await.map_err(|e| {
            tracing::debug!(apiservice = %remote.name, error = %e, "proxying to an aggregated API failed");
            ApiError::service_unavailable(format!("error trying to reach service: {e}"))
        })?;
        Ok(crate::kubelet_proxy::relay_response(resp))
    }

    /// `GET <discovery path>` as the aggregator itself (upstream's availability check and
    /// discovery fetch): the status, and the body when it is a success.
    async fn fetch_discovery(&self, remote: &Remote, addr: &str) -> Result<Value, String> {
        let url = format!("https://{addr}{}", remote.discovery_path());
        let failing = |e: String| format!("failing or missing response from {url}: {e}");
        let tls = client::tls_config(&self.tls, self.identity.as_ref(), client::Trust::Insecure)
            .map_err(|e| failing(e.to_string()))?;
        let mut req = Request::get(remote.discovery_path())
            .header(header::ACCEPT, "application/json")
            .body(Full::new(Bytes::new()))
            .map_err(|e| failing(e.to_string()))?;
        let system = UserInfo::new("system:kube-aggregator", &["system:masters"]);
        set_identity_headers(req.headers_mut(), &system);
        if let Ok(host) = HeaderValue::from_str(addr) {
            req.headers_mut().insert(header::HOST, host);
        }
        let call = async {
            let resp = client::send(addr, &remote.server_name(), tls, req).await.map_err(|e| failing(e.to_string()))?;
            let status = resp.status().as_u16();
            if !(200..300).contains(&status) {
                return Err(failing(format!("bad status from {url}: {status}")));
            }
            let body = http_body_util::BodyExt::collect(http_body_util::Limited::new(
                resp.into_body(),
                crate::endpoints::body::MAX_BODY,
            ))
            .await
            .map_err(|e| failing(e.to_string()))?
            .to_bytes();
            Ok(serde_json::from_slice(&body).unwrap_or(Value::Null))
        };
        match tokio::time::timeout(Duration::from_secs(5), call).await {
            Ok(r) => r,
            Err(_) => Err(format!("timed out waiting for {url}")),
        }
    }
}

/// The front proxy's identity headers (upstream's `transport.SetAuthProxyHeaders`), after
/// removing any the caller sent, and the caller's impersonation headers (already applied here).
pub fn set_identity_headers(headers: &mut HeaderMap, user: &UserInfo) {
    let ours: Vec<HeaderName> = headers
        .keys()
        .filter(|k| {
            let k = k.as_str();
            k == "x-remote-user"
                || k == "x-remote-uid"
                || k == "x-remote-group"
                || k.starts_with("x-remote-extra-")
                || k.starts_with("impersonate-")
        })
        .cloned()
        .collect();
    for k in ours {
        headers.remove(&k);
    }
    let add = |headers: &mut HeaderMap, name: &str, value: &str| {
        if let (Ok(n), Ok(v)) = (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_str(value)) {
            headers.append(n, v);
        }
    };
    add(headers, "X-Remote-User", &user.name);
    if !user.uid.is_empty() {
        add(headers, "X-Remote-Uid", &user.uid);
    }
    for g in &user.groups {
        add(headers, "X-Remote-Group", g);
    }
    for (key, values) in &user.extra {
        let name = format!("X-Remote-Extra-{}", path_escape(key));
        for v in values {
            add(headers, &name, v);
        }
    }
}

/// Go's `url.PathEscape`: every byte but the unreserved ones and `$&+,:;=@` percent-encoded.
fn path_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~$&+,:;=@".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn identity_headers_replace_the_callers_and_escape_extra_keys() {
        let mut headers = HeaderMap::new();
        headers.insert("x-remote-user", HeaderValue::from_static("mallory"));
        headers.insert("x-remote-extra-scopes", HeaderValue::from_static("all"));
        headers.insert("impersonate-extra-scopes", HeaderValue::from_static("all"));
        headers.insert("accept", HeaderValue::from_static("application/json"));
        let mut user = UserInfo::new("alice", &["devs", "system:authenticated"]);
        user.extra.insert("authentication.kubernetes.io/pod-name".into(), vec!["web-1".into()]);
        set_identity_headers(&mut headers, &user);
        let all = |k: &str| headers.get_all(k).iter().filter_map(|v| v.to_str().ok()).collect::<Vec<_>>();
        assert_eq!(all("x-remote-user"), ["alice"]);
        assert_eq!(all("x-remote-group"), ["devs", "system:authenticated"]);
        assert!(all("x-remote-extra-scopes").is_empty());
        assert!(all("impersonate-extra-scopes").is_empty());
        assert_eq!(all("x-remote-extra-authentication.kubernetes.io%2Fpod-name"), ["web-1"]);
        assert_eq!(all("accept"), ["application/json"]);
    }

    #[test]
    fn remotes_are_read_from_apiservices_naming_a_service() {
        let obj = json!({"metadata": {"name": "v1alpha1.test.k1s.io"},
            "spec": {"group": "test.k1s.io", "version": "v1alpha1", "groupPriorityMinimum": 1000, "versionPriority": 15,
                     "caBundle": "YWJj", "service": {"namespace": "default", "name": "api", "port": 8443}},
            "status": {"conditions": [{"type": "Available", "status": "True"}]}});
        let r = Remote::from_object(&obj).expect("remote");
        assert_eq!(
            (r.group.as_str(), r.version.as_str(), r.port, r.available),
            ("test.k1s.io", "v1alpha1", 8443, true)
        );
        assert_eq!(r.ca_bundle, b"abc");
        assert_eq!(r.server_name(), "api.default.svc");
        assert_eq!(r.discovery_path(), "/apis/test.k1s.io/v1alpha1");
        let local = json!({"metadata": {"name": "v1.apps"}, "spec": {"group": "apps", "version": "v1"}});
        assert!(Remote::from_object(&local).is_none());
    }
}
