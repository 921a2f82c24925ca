//! The webhook backend (`--audit-webhook-config-file`): events are POSTed as an
//! `audit.k8s.io/v1` `EventList` to the server a kubeconfig names, in batches as upstream's
//! buffered backend sends them: a buffer of 10,000 events, a batch at 400 events or 30 seconds
//! after the last one, at most 10 batches a second (bursts of 15), each sent on its own task and
//! retried on any failure with exponential back-off (10 s, ×1.5, 5 tries). A request only puts
//! its event in the buffer: a slow or unreachable webhook never blocks or fails API requests;
//! when the buffer is full, events are dropped (and counted in the log).

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::TokioIo;
use k1s_pki::client::{Identity, Trust};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Events held while the webhook is slow or away.
const BUFFER: usize = 10_000;
/// A request to the webhook may take this long.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Batches sent per second, and the burst allowed above it.
const THROTTLE_QPS: f64 = 10.0;
const THROTTLE_BURST: f64 = 15.0;
/// Tries per batch.
const TRIES: u32 = 5;
/// How long a stopping server waits for the events still buffered to be sent.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// How batches are formed and retried (upstream's `--audit-webhook-batch-max-size`,
/// `--audit-webhook-batch-max-wait` and `--audit-webhook-initial-backoff`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batching {
    pub max_size: usize,
    pub max_wait: Duration,
    pub initial_backoff: Duration,
}

impl Default for Batching {
    fn default() -> Self {
        Batching { max_size: 400, max_wait: Duration::from_secs(30), initial_backoff: Duration::from_secs(10) }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WebhookConfigError {
    #[error("audit webhook config file {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("audit webhook config file {}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
}

/// Where and how events are sent.
pub struct Endpoint {
    /// The URL, for messages.
    url: String,
    /// `host:port` to connect to.
    connect: String,
    /// The name the server's certificate must hold.
    server_name: String,
    /// Path and query to POST to.
    path: String,
    /// `None`: plain HTTP.
    tls: Option<Arc<rustls::ClientConfig>>,
    token: Option<String>,
}

impl Endpoint {
    /// Reads a kubeconfig: its current context's (or only context's) cluster and user.
    pub fn load(path: &Path) -> Result<Endpoint, WebhookConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| WebhookConfigError::Read { path: path.to_path_buf(), source })?;
        let invalid = |message: String| WebhookConfigError::Invalid { path: path.to_path_buf(), message };
        let dir = path.parent().unwrap_or(Path::new("."));
        Self::parse(&text, dir).map_err(invalid)
    }

    fn parse(text: &str, dir: &Path) -> Result<Endpoint, String> {
        let doc: Value = serde_saphyr::from_str(text).map_err(|e| format!("not YAML or JSON: {e}"))?;
        let named = |list: &str, name: &str| -> Result<Value, String> {
            let items = match doc.get(list) {
                None | Some(Value::Null) => return Err(format!("{list}: Required value")),
                Some(Value::Array(a)) => a,
                Some(_) => return Err(format!("{list}: expected a list")),
            };
            items
                .iter()
                .find(|i| i.get("name").and_then(Value::as_str) == Some(name))
                .map(|i| i.get(list.trim_end_matches('s')).cloned().unwrap_or(Value::Null))
                .ok_or_else(|| format!("{list}: no entry named {name:?}"))
        };
        let context = match doc.get("current-context").and_then(Value::as_str).filter(|c| !c.is_empty()) {
            Some(name) => named("contexts", name)?,
            None => match doc.get("contexts").and_then(Value::as_array).map(Vec::as_slice) {
                Some([only]) => only.get("context").cloned().unwrap_or(Value::Null),
                _ => return Err("current-context: Required value (the file has more or fewer than one context)".into()),
            },
        };
        let cluster_name = context.get("cluster").and_then(Value::as_str).unwrap_or("");
        if cluster_name.is_empty() {
            return Err("contexts[].context.cluster: Required value".into());
        }
        let cluster = named("clusters", cluster_name)?;
        let user = match context.get("user").and_then(Value::as_str).filter(|u| !u.is_empty()) {
            Some(u) => named("users", u)?,
            None => Value::Null,
        };
        let text_of =
            |v: &Value, key: &str| v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
        let server = text_of(&cluster, "server").ok_or("clusters[].cluster.server: Required value")?;
        let (scheme, rest) = server.split_once("://").ok_or_else(|| {
            format!("clusters[].cluster.server: Invalid value: {server:?}: expected https://HOST[:PORT][/PATH]")
        })?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].to_string()),
            None => (rest, "/".to_string()),
        };
        let default_port = match scheme {
            "https" => 443,
            "http" => 80,
            other => {
                return Err(format!(
                    "clusters[].cluster.server: Invalid value: {server:?}: unsupported scheme {other:?}"
                ))
            }
        };
        let (host, connect) = split_host_port(authority, default_port)
            .ok_or_else(|| format!("clusters[].cluster.server: Invalid value: {server:?}: no host"))?;
        // File paths in a kubeconfig are relative to its folder.
        let file = |key: &str, v: &Value| -> Result<Option<Vec<u8>>, String> {
            if let Some(data) = text_of(v, &format!("{key}-data")) {
                use base64::Engine as _;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data.trim())
                    .map_err(|e| format!("{key}-data: not base64: {e}"))?;
                return Ok(Some(bytes));
            }
            match text_of(v, key) {
                Some(p) => {
                    let p = dir.join(p);
                    std::fs::read(&p).map(Some).map_err(|e| format!("{key}: reading {}: {e}", p.display()))
                }
                None => Ok(None),
            }
        };
        let token = match text_of(&user, "token") {
            Some(t) => Some(t),
            None => match text_of(&user, "tokenFile") {
                Some(p) => {
                    let p = dir.join(p);
                    let t =
                        std::fs::read_to_string(&p).map_err(|e| format!("tokenFile: reading {}: {e}", p.display()))?;
                    Some(t.trim().to_string())
                }
                None => None,
            },
        };
        let tls = if scheme == "https" {
            let insecure = cluster.get("insecure-skip-tls-verify").and_then(Value::as_bool).unwrap_or(false);
            let ca = file("certificate-authority", &cluster)?.unwrap_or_default();
            let trust = if insecure { Trust::Insecure } else { Trust::bundle_or_system(&ca, "certificate-authority") };
            let identity = match (file("client-certificate", &user)?, file("client-key", &user)?) {
                (Some(cert), Some(key)) => Some(
                    Identity::from_pem(
                        &String::from_utf8_lossy(&cert),
                        &String::from_utf8_lossy(&key),
                        ("client-certificate", "client-key"),
                    )
                    .map_err(|e| format!("{}: {}", e.what, e.message))?,
                ),
                (None, None) => None,
                _ => return Err("users[].user: client-certificate and client-key go together".into()),
            };
            let cfg = k1s_pki::client::client_config(trust, identity.as_ref(), &[b"http/1.1"])
                .map_err(|e| format!("{}: {}", e.what, e.message))?;
            Some(Arc::new(cfg))
        } else {
            None
        };
        let server_name = text_of(&cluster, "tls-server-name").unwrap_or(host);
        Ok(Endpoint { url: server.clone(), connect, server_name, path, tls, token })
    }

    /// POSTs one EventList; an error for anything but a 2xx answer.
    async fn post(&self, body: Bytes) -> Result<(), String> {
        let mut req = http::Request::post(&self.path)
            .header(http::header::HOST, &self.server_name)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json, */*")
            .header(http::header::USER_AGENT, "k1s-apiserver")
            .body(Full::new(body))
            .map_err(|e| e.to_string())?;
        if let Some(t) = &self.token {
            let v = http::HeaderValue::from_str(&format!("Bearer {t}")).map_err(|e| e.to_string())?;
            req.headers_mut().insert(http::header::AUTHORIZATION, v);
        }
        let call = async {
            let resp = match &self.tls {
                Some(tls) => crate::aggregator::client::send(&self.connect, &self.server_name, tls.clone(), req)
                    .await
                    .map_err(|e| e.to_string())?,
                None => {
                    let tcp = tokio::net::TcpStream::connect(&self.connect)
                        .await
                        .map_err(|e| format!("dial tcp {}: {e}", self.connect))?;
                    let (mut sender, conn) =
                        hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await.map_err(|e| e.to_string())?;
                    tokio::spawn(async move {
                        let _ = conn.await;
                    });
                    sender.send_request(req).await.map_err(|e| e.to_string())?
                }
            };
            let status = resp.status();
            // Read (a little of) the answer so the connection ends cleanly.
            let body = http_body_util::Limited::new(resp.into_body(), 64 * 1024).collect().await;
            if status.is_success() {
                Ok(())
            } else {
                let text = body.map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned()).unwrap_or_default();
                Err(format!("the server answered {status}: {}", text.trim()))
            }
        };
        match tokio::time::timeout(REQUEST_TIMEOUT, call).await {
            Ok(r) => r.map_err(|e| format!("Post {:?}: {e}", self.url)),
            Err(_) => Err(format!("Post {:?}: context deadline exceeded", self.url)),
        }
    }
}

/// `host` and `host:port` (the port added) from a URL's authority (`[::1]:8443` too).
fn split_host_port(authority: &str, default_port: u16) -> Option<(String, String)> {
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    if authority.is_empty() {
        return None;
    }
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = after.strip_prefix(':').unwrap_or("");
        let port = if port.is_empty() { default_port.to_string() } else { port.to_string() };
        return Some((host.to_string(), format!("[{host}]:{port}")));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) => Some((host.to_string(), authority.to_string())).filter(|_| port.parse::<u16>().is_ok()),
        None => Some((authority.to_string(), format!("{authority}:{default_port}"))),
    }
}

/// The batching sender.
pub struct WebhookBackend {
    endpoint: Arc<Endpoint>,
    batching: Batching,
    tx: mpsc::Sender<Bytes>,
    rx: Mutex<Option<mpsc::Receiver<Bytes>>>,
    dropped: AtomicU64,
}

impl WebhookBackend {
    pub fn new(endpoint: Endpoint, batching: Batching) -> WebhookBackend {
        let (tx, rx) = mpsc::channel(BUFFER);
        WebhookBackend {
            endpoint: Arc::new(endpoint),
            batching,
            tx,
            rx: Mutex::new(Some(rx)),
            dropped: AtomicU64::new(0),
        }
    }

    /// Buffers one event (its JSON, without the newline); drops it when the buffer is full.
    pub fn process(&self, event: Bytes) {
        if self.tx.try_send(event).is_err() {
            let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            // Logged on the first drop and then every thousandth: a burst must not flood the log.
            if n == 1 || n.is_multiple_of(1000) {
                tracing::error!(dropped = n, "the audit webhook buffer is full: audit events are dropped");
            }
        }
    }

    /// Sends batches until `cancel` fires, then what is left (for a few seconds at most).
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        let Some(mut rx) = self.rx.lock().unwrap_or_else(|p| p.into_inner()).take() else { return };
        let mut sending = tokio::task::JoinSet::new();
        let mut bucket = TokenBucket::new(THROTTLE_QPS, THROTTLE_BURST);
        loop {
            let deadline = Instant::now() + self.batching.max_wait;
            let mut batch = Vec::new();
            let stopping = loop {
                tokio::select! {
                    _ = cancel.cancelled() => break true,
                    _ = tokio::time::sleep_until(deadline) => break false,
                    ev = rx.recv() => match ev {
                        Some(ev) => {
                            batch.push(ev);
                            if batch.len() >= self.batching.max_size {
                                break false;
                            }
                        }
                        None => break true,
                    },
                }
            };
            while sending.try_join_next().is_some() {}
            if stopping {
                while let Ok(ev) = rx.try_recv() {
                    batch.push(ev);
                }
                let endpoint = self.endpoint.clone();
                let max = self.batching.max_size.max(1);
                let last = async move {
                    for chunk in batch.chunks(max) {
                        if let Err(e) = endpoint.post(event_list(chunk)).await {
                            tracing::error!(events = chunk.len(), error = %e, "sending audit events to the webhook failed");
                        }
                    }
                    while sending.join_next().await.is_some() {}
                };
                if tokio::time::timeout(SHUTDOWN_WAIT, last).await.is_err() {
                    tracing::warn!("stopped before every audit event reached the webhook");
                }
                return;
            }
            if batch.is_empty() {
                continue;
            }
            tokio::select! {
                _ = bucket.take() => {}
                _ = cancel.cancelled() => {}
            }
            let (endpoint, backoff, cancel) = (self.endpoint.clone(), self.batching.initial_backoff, cancel.clone());
            sending.spawn(async move { send_with_retries(&endpoint, &batch, backoff, &cancel).await });
        }
    }
}

/// The EventList of `events` (each a JSON line).
fn event_list(events: &[Bytes]) -> Bytes {
    let len: usize = events.iter().map(Bytes::len).sum();
    let mut b = Vec::with_capacity(len + 96);
    b.extend_from_slice(br#"{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":["#);
    for (i, e) in events.iter().enumerate() {
        if i > 0 {
            b.push(b',');
        }
        b.extend_from_slice(e.strip_suffix(b"\n").unwrap_or(e));
    }
    b.extend_from_slice(b"]}");
    Bytes::from(b)
}

/// Upstream's webhook retries: every failure is retried, after 10 s, 15 s, 22.5 s… (±20%).
async fn send_with_retries(endpoint: &Endpoint, events: &[Bytes], initial: Duration, cancel: &CancellationToken) {
    let body = event_list(events);
    let mut wait = initial;
    for attempt in 1..=TRIES {
        match endpoint.post(body.clone()).await {
            Ok(()) => return,
            Err(e) if attempt == TRIES => {
                tracing::error!(events = events.len(), error = %e, "sending audit events to the webhook failed; they are dropped");
                return;
            }
            Err(e) => {
                tracing::debug!(events = events.len(), attempt, error = %e, "sending audit events to the webhook failed; retrying")
            }
        }
        let jittered = wait.mul_f64(1.0 + rand::random_range(0.0..0.2));
        tokio::select! {
            _ = tokio::time::sleep(jittered) => {}
            // A stopping server tries once more, right away.
            _ = cancel.cancelled() => {}
        }
        wait = wait.mul_f64(1.5);
    }
}

/// At most `qps` a second on average, `burst` at once.
struct TokenBucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    at: Instant,
}

impl TokenBucket {
    fn new(qps: f64, burst: f64) -> TokenBucket {
        TokenBucket { qps, burst, tokens: burst, at: Instant::now() }
    }

    async fn take(&mut self) {
        let now = Instant::now();
        self.tokens = (self.tokens + now.duration_since(self.at).as_secs_f64() * self.qps).min(self.burst);
        self.at = now;
        if self.tokens < 1.0 {
            tokio::time::sleep(Duration::from_secs_f64((1.0 - self.tokens) / self.qps)).await;
            self.tokens = 1.0;
            self.at = Instant::now();
        }
        self.tokens -= 1.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kubeconfig_names_the_server_and_credentials() {
        let dir = tempfile::tempdir().expect("tmp");
        std::fs::write(dir.path().join("token"), "s3cret\n").expect("token");
        let cfg = r#"
apiVersion: v1
kind: Config
clusters:
- name: other
  cluster: {server: "https://other:1"}
- name: audit
  cluster:
    server: http://127.0.0.1:9000/events?x=1
users:
- name: api
  user: {tokenFile: token}
contexts:
- name: default
  context: {cluster: audit, user: api}
current-context: default
"#;
        let e = Endpoint::parse(cfg, dir.path()).expect("parse");
        assert_eq!(
            (e.connect.as_str(), e.path.as_str(), e.server_name.as_str()),
            ("127.0.0.1:9000", "/events?x=1", "127.0.0.1")
        );
        assert_eq!(e.token.as_deref(), Some("s3cret"));
        assert!(e.tls.is_none());
        let e = Endpoint::parse(
            "clusters: [{name: c, cluster: {server: 'https://[::1]', insecure-skip-tls-verify: true}}]\ncontexts: [{name: x, context: {cluster: c}}]",
            dir.path(),
        )
        .expect("only context");
        assert_eq!((e.connect.as_str(), e.path.as_str(), e.server_name.as_str()), ("[::1]:443", "/", "::1"));
        assert!(e.tls.is_some());
    }

    #[test]
    fn a_bad_kubeconfig_says_which_key() {
        let err = |s: &str| Endpoint::parse(s, Path::new(".")).err().expect("an error");
        assert_eq!(err("clusters: []\ncontexts: [{name: a, context: {cluster: c}}]"), "clusters: no entry named \"c\"");
        assert!(err("contexts: [{name: a, context: {cluster: c}}]\nclusters: [{name: c, cluster: {}}]")
            .starts_with("clusters[].cluster.server: Required value"));
        assert!(err("contexts: [{name: a, context: {cluster: c}}]\nclusters: [{name: c, cluster: {server: ftp://x}}]")
            .contains("unsupported scheme \"ftp\""));
        assert!(err("contexts: []").starts_with("current-context: Required value"));
        assert!(err("contexts: [{name: a, context: {cluster: c}}]\nclusters: [{name: c, cluster: {server: 'https://x', certificate-authority-data: '!!'}}]")
            .starts_with("certificate-authority-data: not base64"));
    }

    #[test]
    fn batches_are_event_lists() {
        let list = event_list(&[Bytes::from_static(b"{\"a\":1}\n"), Bytes::from_static(b"{\"b\":2}\n")]);
        let v: Value = serde_json::from_slice(&list).expect("json");
        assert_eq!(v["kind"], "EventList");
        assert_eq!(v["items"], serde_json::json!([{"a": 1}, {"b": 2}]));
    }

    #[tokio::test]
    async fn the_throttle_lets_a_burst_through_then_keeps_the_rate() {
        let mut b = TokenBucket::new(100.0, 5.0);
        let start = Instant::now();
        for _ in 0..5 {
            b.take().await;
        }
        assert!(start.elapsed() < Duration::from_millis(20), "the burst waits for nothing");
        for _ in 0..10 {
            b.take().await;
        }
        let waited = start.elapsed();
        assert!(waited >= Duration::from_millis(90), "{waited:?}");
    }
}
