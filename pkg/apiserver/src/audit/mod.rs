//! The audit log, as upstream's `apiserver/pkg/audit`: a policy ([`policy`]) decides for each
//! authenticated request whether and how much of it is recorded; the request's [`Event`] is
//! filled in while it is handled (who, what, from where, the authorization decision,
//! admission's annotations, the objects at `Request`/`RequestResponse`) and written at each
//! stage to the backends: a JSON-lines file rotated as upstream's ([`log`]) and a batching
//! webhook ([`webhook`]).
//!
//! The request handler owns the event ([`InFlight`]). What deeper layers record travels with
//! the request: the resource handler takes a [`Recorded`] from the request's extensions, the
//! registry and admission add annotations to it (through `Ctx` and admission's `Attributes`,
//! as warnings travel), and it comes back in the response's extensions, with the
//! [`RefusalStatus`] of an error reply. Without a policy nothing is evaluated or recorded; at
//! `Metadata` no body is copied and no object encoded.

pub mod event;
pub mod log;
pub mod policy;
pub mod webhook;

pub use event::{Event, ObjectRef, ResponseStatus};
pub use policy::{Level, Policy, PolicyError, RequestConfig, Stage};

use crate::auth::UserInfo;
use crate::endpoints::Body;
use crate::request::RequestInfo;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use http_body_util::BodyExt as _;
use serde_json::Value;
use std::net::IpAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio_util::sync::CancellationToken;

/// The header carrying a request's audit ID, sent back with every reply (upstream's
/// `Audit-Id`); a client may choose the ID by sending it.
pub const AUDIT_ID_HEADER: &str = "audit-id";

/// The audit flags (upstream's and k3s's names).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuditOptions {
    /// `--audit-policy-file`; without it nothing is recorded.
    pub policy_file: Option<PathBuf>,
    /// `--audit-log-path`: a file, or `-` for standard output.
    pub log_path: Option<PathBuf>,
    /// `--audit-log-maxsize` (megabytes; 0 is 100).
    pub log_max_size_mb: u64,
    /// `--audit-log-maxbackup` (0 keeps all).
    pub log_max_backups: usize,
    /// `--audit-log-maxage` (days; 0 keeps all).
    pub log_max_age_days: u64,
    /// `--audit-log-mode`.
    pub log_mode: log::LogMode,
    /// `--audit-log-batch-buffer-size` (0 is upstream's 10,000): events queued in batch mode.
    pub log_batch_buffer_size: usize,
    /// `--audit-webhook-config-file`: a kubeconfig naming the webhook.
    pub webhook_config_file: Option<PathBuf>,
    /// `--audit-webhook-batch-max-size`, `-max-wait`, `--audit-webhook-initial-backoff`.
    pub webhook_batching: webhook::Batching,
}

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("{0}")]
    Policy(PolicyError),
    #[error("audit log {}: {source}", path.display())]
    Log { path: PathBuf, source: std::io::Error },
    #[error("{0}")]
    Webhook(webhook::WebhookConfigError),
}

/// The policy and where events go.
pub struct Auditor {
    policy: Policy,
    log: Option<log::LogBackend>,
    webhook: Option<Arc<webhook::WebhookBackend>>,
}

impl Auditor {
    /// Loads the policy and opens the backends. `None` when nothing is to be recorded: no
    /// policy (upstream's default), or a policy and no backend.
    pub fn new(opts: &AuditOptions) -> Result<Option<Arc<Auditor>>, AuditError> {
        let Some(policy_file) = &opts.policy_file else {
            if opts.log_path.is_some() || opts.webhook_config_file.is_some() {
                tracing::info!("no audit policy file: no audit events are recorded");
            }
            return Ok(None);
        };
        let policy = Policy::load(policy_file).map_err(AuditError::Policy)?;
        let log = match &opts.log_path {
            None => None,
            Some(p) => {
                let out = if p.as_os_str() == "-" {
                    log::Output::Stdout
                } else {
                    let rotation =
                        log::Rotation::from_flags(opts.log_max_size_mb, opts.log_max_backups, opts.log_max_age_days);
                    let file = log::RotatingFile::open(p, rotation)
                        .map_err(|source| AuditError::Log { path: p.clone(), source })?;
                    log::Output::File(file)
                };
                let buffer = match opts.log_batch_buffer_size {
                    0 => log::DEFAULT_BATCH_BUFFER,
                    n => n,
                };
                let backend = log::LogBackend::new(out, opts.log_mode, buffer)
                    .map_err(|source| AuditError::Log { path: p.clone(), source })?;
                Some(backend)
            }
        };
        let webhook = match &opts.webhook_config_file {
            None => None,
            Some(p) => {
                let endpoint = webhook::Endpoint::load(p).map_err(AuditError::Webhook)?;
                Some(Arc::new(webhook::WebhookBackend::new(endpoint, opts.webhook_batching.clone())))
            }
        };
        if log.is_none() && webhook.is_none() {
            tracing::info!(
                "an audit policy but neither --audit-log-path nor --audit-webhook-config-file: no audit events are recorded"
            );
            return Ok(None);
        }
        Ok(Some(Arc::new(Auditor { policy, log, webhook })))
    }

    /// Runs the webhook's sender until `cancel` fires, then writes out what the log's batch
    /// writer still holds.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        match self.webhook.clone() {
            Some(w) => w.run(cancel).await,
            None => cancel.cancelled().await,
        }
        let me = self.clone();
        let _ = tokio::task::spawn_blocking(move || {
            if let Some(log) = &me.log {
                log.flush();
            }
        })
        .await;
    }

    /// Starts the event of a request by `user` (`None`: authentication failed) when the policy
    /// records it.
    #[allow(clippy::too_many_arguments)]
    pub fn begin(
        self: &Arc<Self>,
        user: Option<&UserInfo>,
        info: &RequestInfo,
        uri: &http::Uri,
        headers: &HeaderMap,
        remote: Option<IpAddr>,
        audit_id: &str,
        received: jiff::Timestamp,
    ) -> Option<InFlight> {
        let config = self.policy.evaluate(user, info);
        if config.level == Level::None {
            return None;
        }
        let request_uri = uri.path_and_query().map_or_else(|| uri.path(), |pq| pq.as_str());
        let user_agent = headers.get(http::header::USER_AGENT).map(|v| String::from_utf8_lossy(v.as_bytes()));
        let event = Event::new(
            config,
            audit_id,
            request_uri,
            info,
            user,
            source_ips(headers, remote),
            user_agent.as_deref().unwrap_or(""),
            received,
        );
        Some(InFlight { auditor: self.clone(), event })
    }

    fn write(&self, ev: &Event, stage: Stage) {
        if ev.config.omit_stages.contains(stage) {
            return;
        }
        let line = ev.encode(stage, jiff::Timestamp::now());
        match (&self.log, &self.webhook) {
            (Some(log), Some(w)) => {
                log.write(&line);
                w.process(Bytes::from(line));
            }
            (Some(log), None) => log.write(&line),
            (None, Some(w)) => w.process(Bytes::from(line)),
            (None, None) => {}
        }
    }
}

/// The event of a request being handled.
pub struct InFlight {
    auditor: Arc<Auditor>,
    pub event: Event,
}

impl InFlight {
    /// Writes the event at `stage` (unless the policy omits it).
    pub fn emit(&self, stage: Stage) {
        self.auditor.write(&self.event, stage);
    }

    /// What the handlers below recorded, to put in a request's extensions.
    pub fn recorder(&self) -> Recorded {
        Recorded::new(self.event.config)
    }

    /// Takes in what the reply carries: the handlers' [`Recorded`], a refusal's status, the code.
    pub fn response<B>(&mut self, resp: &mut http::Response<B>) {
        let ev = &mut self.event;
        if let Some(rec) = resp.extensions_mut().remove::<Recorded>() {
            if let Some(r) = ev.object_ref.as_mut() {
                for (field, value) in
                    [(&mut r.name, rec.name), (&mut r.uid, rec.uid), (&mut r.resource_version, rec.resource_version)]
                {
                    if field.is_empty() {
                        *field = value;
                    }
                }
            }
            for (k, v) in rec.annotations {
                ev.annotate(k, v);
            }
            ev.request_object = rec.request_object;
            ev.response_object = rec.response_object;
        }
        let code = resp.status().as_u16();
        match resp.extensions_mut().remove::<RefusalStatus>() {
            Some(RefusalStatus(status)) if ev.response_status.is_none() => {
                ev.response_status = Some(ResponseStatus { code, status: Some(status), ..ResponseStatus::default() })
            }
            _ => ev.set_code(code),
        }
    }

    /// A reply whose end writes the `ResponseComplete` stage (long-running requests).
    pub fn complete_with(self, body: Body) -> Body {
        CompletingBody { inner: body, pending: Some(self) }.boxed_unsync()
    }

    /// Records a panic (upstream's `Panic` stage: code 500, `APIServer panic'd: …`) and writes it.
    pub fn panicked(&mut self, payload: &(dyn std::any::Any + Send)) {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        self.event.response_status = Some(ResponseStatus {
            code: 500,
            status: None,
            message: Some(format!("APIServer panic'd: {what}")),
            outcome: Some("Failure"),
            reason: Some("InternalError"),
        });
        self.emit(Stage::Panic);
    }
}

/// A reply body that writes the event's `ResponseComplete` stage when it ends, or when it is
/// dropped unfinished (the client went away).
struct CompletingBody {
    inner: Body,
    pending: Option<InFlight>,
}

impl CompletingBody {
    fn complete(&mut self) {
        if let Some(a) = self.pending.take() {
            a.emit(Stage::ResponseComplete);
        }
    }
}

impl http_body::Body for CompletingBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            self.complete();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for CompletingBody {
    fn drop(&mut self) {
        self.complete();
    }
}

/// What the resource handler records for the event: taken from the request's extensions,
/// carried in the registry's `Ctx`, handed back in the reply's extensions.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub level: Level,
    omit_managed_fields: bool,
    /// Admission's audit annotations.
    pub annotations: Vec<(String, String)>,
    request_object: Option<Bytes>,
    response_object: Option<Bytes>,
    /// From the request's object (a create's name).
    name: String,
    uid: String,
    resource_version: String,
}

impl Recorded {
    pub fn new(config: RequestConfig) -> Recorded {
        Recorded {
            level: config.level,
            omit_managed_fields: config.omit_managed_fields,
            annotations: Vec::new(),
            request_object: None,
            response_object: None,
            name: String::new(),
            uid: String::new(),
            resource_version: String::new(),
        }
    }

    /// A create's, update's or delete's decoded body `obj`, sent as `body` with `content_type`:
    /// the object's name, uid and resourceVersion for the object reference, and at `Request`
    /// and above the object itself (the bytes as sent when they are one line of JSON).
    pub fn request_object(&mut self, content_type: &str, body: &Bytes, obj: &Value) {
        let meta = &obj["metadata"];
        let text = |k: &str| meta.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        self.name = text("name");
        self.uid = text("uid");
        self.resource_version = text("resourceVersion");
        if self.level >= Level::Request {
            self.request_object = self.as_json(content_type, body, obj);
        }
    }

    /// A patch's body (at `Request` and above): the patch as sent (an apply's YAML as JSON).
    pub fn request_patch(&mut self, content_type: &str, body: &Bytes, patch: &Value) {
        if self.level >= Level::Request {
            self.request_object = self.as_json(content_type, body, patch);
        }
    }

    /// Keeps a copy of a finished reply's JSON body (at `RequestResponse`).
    pub async fn response_object(&mut self, resp: http::Response<Body>) -> http::Response<Body> {
        let json = resp
            .headers()
            .get(http::header::CONTENT_TYPE)
            .is_some_and(|ct| ct.as_bytes().starts_with(b"application/json"));
        if self.level < Level::RequestResponse || !json {
            return resp;
        }
        let (parts, body) = resp.into_parts();
        // The reply is in memory already: collecting it only takes it out of its wrapper.
        let bytes = match body.collect().await {
            Ok(c) => c.to_bytes(),
            Err(never) => match never {},
        };
        self.response_object = compact(&bytes, self.omit_managed_fields);
        http::Response::from_parts(parts, crate::endpoints::body::full(bytes))
    }

    fn as_json(&self, content_type: &str, body: &Bytes, decoded: &Value) -> Option<Bytes> {
        let is_json = matches!(content_type.split(';').next().unwrap_or("").trim(), "application/json" | "");
        if is_json {
            if let Some(b) = compact(body, self.omit_managed_fields) {
                return Some(b);
            }
        }
        let mut v = std::borrow::Cow::Borrowed(decoded);
        if self.omit_managed_fields {
            drop_managed_fields(v.to_mut());
        }
        serde_json::to_vec(&*v).ok().map(Bytes::from)
    }
}

/// JSON bytes as one line, without `managedFields` when `omit_managed_fields`: the bytes
/// themselves when they can be kept (no copy), re-encoded when they span lines; `None` when they
/// are not JSON.
fn compact(bytes: &Bytes, omit_managed_fields: bool) -> Option<Bytes> {
    let end = bytes.iter().rposition(|b| !b.is_ascii_whitespace()).map_or(0, |i| i + 1);
    let trimmed = bytes.slice(..end);
    let multiline = trimmed.iter().any(|b| *b == b'\n' || *b == b'\r');
    let managed = omit_managed_fields && trimmed.windows(15).any(|w| w == b"\"managedFields\"");
    if !multiline && !managed && matches!(trimmed.first(), Some(b'{' | b'[')) {
        return Some(trimmed);
    }
    let mut v: Value = serde_json::from_slice(&trimmed).ok()?;
    if managed {
        drop_managed_fields(&mut v);
    }
    serde_json::to_vec(&v).ok().map(Bytes::from)
}

/// Removes `metadata.managedFields` from an object, a list's items, a table's row objects.
fn drop_managed_fields(v: &mut Value) {
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
    for key in ["items", "rows"] {
        if let Some(items) = v.get_mut(key).and_then(Value::as_array_mut) {
            for item in items {
                let item = if key == "rows" { item.get_mut("object") } else { Some(item) };
                if let Some(i) = item {
                    drop_managed_fields(i);
                }
            }
        }
    }
}

/// The Status of an error reply, put in its extensions by the reply's writer.
#[derive(Clone, Debug)]
pub struct RefusalStatus(pub Bytes);

/// Upstream's long-running requests: watches and proxying, and the `attach`, `exec`, `log`,
/// `portforward` and `proxy` subresources. Their `ResponseStarted` stage is written when the
/// reply's head goes out, `ResponseComplete` when its body ends.
pub fn is_long_running(info: &RequestInfo) -> bool {
    matches!(info.verb.as_str(), "watch" | "proxy")
        || matches!(info.subresource_name(), Some("attach" | "exec" | "log" | "portforward" | "proxy"))
}

/// The request's audit ID: the one the client sent (as upstream keeps it), or a new UUID.
pub fn audit_id(headers: &HeaderMap) -> HeaderValue {
    match headers.get(AUDIT_ID_HEADER).filter(|v| !v.is_empty()) {
        Some(v) => v.clone(),
        None => {
            let mut buf = [0u8; uuid::fmt::Hyphenated::LENGTH];
            let s = uuid::Uuid::new_v4().hyphenated().encode_lower(&mut buf);
            HeaderValue::from_str(s).unwrap_or(HeaderValue::from_static(""))
        }
    }
}

/// Upstream's `SourceIPs`: the `X-Forwarded-For` addresses, then `X-Real-Ip` unless listed,
/// then the connection's address unless it is the last one listed.
pub fn source_ips(headers: &HeaderMap, remote: Option<IpAddr>) -> Vec<IpAddr> {
    let mut ips: Vec<IpAddr> = Vec::new();
    if let Some(fwd) = headers.get("x-forwarded-for").and_then(|v| v.to_str().ok()) {
        ips.extend(fwd.split(',').filter_map(|p| p.trim().parse::<IpAddr>().ok()));
    }
    if let Some(real) = headers.get("x-real-ip").and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse().ok()) {
        if !ips.contains(&real) {
            ips.push(real);
        }
    }
    if let Some(r) = remote {
        if ips.last() != Some(&r) {
            ips.push(r);
        }
    }
    ips
}

/// Upstream's message for a request whose credentials were refused.
pub fn failed_authentication_message(headers: &HeaderMap, certificates: bool) -> String {
    let mut methods = Vec::new();
    let auth = headers.get(http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or("").trim();
    if auth.len() > 6 && auth[..6].eq_ignore_ascii_case("basic ") {
        methods.push("basic");
    }
    if let Some((scheme, token)) = auth.split_once(' ') {
        if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() {
            methods.push("bearer");
        }
    }
    if certificates {
        methods.push("x509");
    }
    if methods.is_empty() {
        "Authentication failed, no credentials provided".into()
    } else {
        format!("Authentication failed, attempted: {}", methods.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Query;

    #[test]
    fn source_ips_are_upstreams() {
        let mut h = HeaderMap::new();
        let remote: IpAddr = "10.0.0.9".parse().expect("ip");
        assert_eq!(source_ips(&h, Some(remote)), vec![remote]);
        h.insert("x-forwarded-for", HeaderValue::from_static("1.1.1.1, bogus, 10.0.0.9"));
        h.insert("x-real-ip", HeaderValue::from_static("2.2.2.2"));
        let got: Vec<String> = source_ips(&h, Some(remote)).iter().map(|i| i.to_string()).collect();
        assert_eq!(got, ["1.1.1.1", "10.0.0.9", "2.2.2.2", "10.0.0.9"]);
    }

    #[test]
    fn audit_ids_are_the_clients_or_new_uuids() {
        let mut h = HeaderMap::new();
        let a = audit_id(&h);
        assert_eq!(a.len(), 36);
        assert_ne!(a, audit_id(&h));
        h.insert(AUDIT_ID_HEADER, HeaderValue::from_static("mine"));
        assert_eq!(audit_id(&h), "mine");
    }

    #[test]
    fn long_running_requests_are_upstreams() {
        let q = |p: &str, qs: &str| RequestInfo::parse(&http::Method::GET, p, &Query::parse(Some(qs)));
        assert!(is_long_running(&q("/api/v1/pods", "watch=1")));
        assert!(is_long_running(&q("/api/v1/namespaces/a/pods/p/log", "")));
        assert!(is_long_running(&q("/api/v1/namespaces/a/pods/p/exec", "")));
        assert!(is_long_running(&q("/api/v1/namespaces/a/services/s/proxy/x", "")));
        assert!(!is_long_running(&q("/api/v1/namespaces/a/pods/p", "")));
        assert!(!is_long_running(&q("/api/v1/pods", "")));
    }

    #[test]
    fn recorded_bodies_are_one_line_of_json_without_managed_fields_when_asked() {
        let config =
            |omit| RequestConfig { level: Level::Request, omit_stages: Default::default(), omit_managed_fields: omit };
        let obj =
            serde_json::json!({"metadata": {"name": "a", "managedFields": [{"manager": "m"}]}, "data": {"k": "v"}});
        let sent = Bytes::from(serde_json::to_vec(&obj).expect("json"));
        let mut r = Recorded::new(config(false));
        r.request_object("application/json", &sent, &obj);
        assert_eq!(r.request_object.as_ref().map(|b| b.as_ptr()), Some(sent.as_ptr()), "kept without a copy");
        assert_eq!(r.name, "a");
        let pretty = Bytes::from(serde_json::to_vec_pretty(&obj).expect("json"));
        r.request_object("application/json", &pretty, &obj);
        assert_eq!(r.request_object.as_deref(), Some(&sent[..]), "re-encoded on one line");
        let mut r = Recorded::new(config(true));
        r.request_object("application/yaml", &Bytes::from_static(b"whatever"), &obj);
        assert_eq!(r.request_object.as_deref(), Some(&br#"{"metadata":{"name":"a"},"data":{"k":"v"}}"#[..]));
        r.request_object("application/json", &sent, &obj);
        assert_eq!(r.request_object.as_deref(), Some(&br#"{"metadata":{"name":"a"},"data":{"k":"v"}}"#[..]));
        let mut m = Recorded::new(RequestConfig { level: Level::Metadata, ..config(false) });
        m.request_object("application/json", &sent, &obj);
        assert!(m.request_object.is_none(), "no body at Metadata");
        assert_eq!(m.name, "a");
    }

    #[test]
    fn failed_authentication_names_what_was_tried() {
        let mut h = HeaderMap::new();
        assert_eq!(failed_authentication_message(&h, false), "Authentication failed, no credentials provided");
        h.insert(http::header::AUTHORIZATION, HeaderValue::from_static("Bearer abc"));
        assert_eq!(failed_authentication_message(&h, true), "Authentication failed, attempted: bearer, x509");
    }
}
