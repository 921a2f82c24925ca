//! The kubelet's HTTPS API, as upstream's (`pkg/kubelet/server/server.go`) for what the API
//! server asks of it:
//!
//! - `GET /containerLogs/{ns}/{pod}/{container}` (`follow`, `previous`, `tailLines`,
//!   `sinceSeconds`, `sinceTime`, `timestamps`, `limitBytes`): the container's CRI log file;
//! - `GET|POST /exec/{ns}/{pod}[/{uid}]/{container}?command=…&input=1&output=1&error=1&tty=1`,
//!   `/attach/…` and `/portForward/{ns}/{pod}[/{uid}]`: CRI `Exec`/`Attach`/`PortForward` give a
//!   URL on the runtime's streaming server, and the upgrade (SPDY/3.1 or WebSocket) is proxied
//!   there and spliced;
//! - `GET /metrics/resource`: CPU and memory of the node, its pods and containers, as
//!   metrics-server reads them (see [`metrics`]);
//! - `GET /healthz`.
//!
//! TLS with the kubelet's serving certificate; callers authenticate with a certificate the
//! cluster CA signed or a bearer token, and the API server authorizes them ([`auth`]), as
//! upstream's kubelet in webhook mode: an anonymous request gets 401.

pub mod auth;
pub mod metrics;
pub mod resolve;
pub mod upgrade;

use crate::logs::{LogOptions, LogReader, RunningProbe};
use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{combinators::UnsyncBoxBody, BodyExt, Full, StreamBody};
use hyper::body::Incoming;
use k1s_api::errors::chain;
use k1s_cri::v1 as cri;
use k1s_cri::RuntimeService;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// PEM material of the kubelet's listener.
#[derive(Clone, Debug)]
pub struct ServerTls {
    /// The cluster CA: client certificates must chain to it.
    pub ca_pem: String,
    /// The kubelet's serving certificate (signed by the cluster CA, with the node's IPs and
    /// hostname as SANs, since the API server dials the node's address).
    pub cert_pem: String,
    pub key_pem: String,
    /// When set, each new connection gets the certificate held here (the server's renewal
    /// replaces it) and `cert_pem`/`key_pem` are not used.
    pub reloadable: Option<k1s_pki::ServingCert>,
}

/// How to run the kubelet's server.
pub struct ServerConfig {
    /// Where to listen; port 0 picks a free one (see [`KubeletServer::local_addr`]).
    pub listen: SocketAddr,
    pub tls: ServerTls,
    pub runtime: Arc<dyn RuntimeService>,
    /// Who may call, and what they may do.
    pub auth: Arc<auth::Authorizer>,
    /// The node's name (what requests are authorized against: `nodes/<name>/<sub>`).
    pub node_name: String,
}

/// A running kubelet server.
pub struct KubeletServer {
    /// The bound address: its port is the Node's `daemonEndpoints.kubeletEndpoint.Port`.
    pub local_addr: SocketAddr,
    pub task: JoinHandle<()>,
}

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("invalid kubelet TLS material ({what}): {message}")]
    Tls { what: &'static str, message: String },
    #[error("binding the kubelet server to {addr}")]
    Bind { addr: SocketAddr, source: std::io::Error },
}

fn tls_config(m: &ServerTls) -> Result<rustls::ServerConfig, ServerError> {
    // Unauthenticated clients get through the handshake and a 401, as upstream.
    if let Some(cert) = &m.reloadable {
        return k1s_pki::server_config_reloadable(&m.ca_pem, cert)
            .map_err(|e| ServerError::Tls { what: e.what, message: e.message });
    }
    let material =
        k1s_pki::ServingMaterial { ca_pem: m.ca_pem.clone(), cert_pem: m.cert_pem.clone(), key_pem: m.key_pem.clone() };
    k1s_pki::server_config(&material).map_err(|e| ServerError::Tls { what: e.what, message: e.message })
}

/// Binds and serves until `cancel` fires.
pub async fn serve(config: ServerConfig, cancel: CancellationToken) -> Result<KubeletServer, ServerError> {
    let tls = tls_config(&config.tls)?;
    let listener =
        TcpListener::bind(config.listen).await.map_err(|source| ServerError::Bind { addr: config.listen, source })?;
    let local_addr = listener.local_addr().map_err(|source| ServerError::Bind { addr: config.listen, source })?;
    tracing::info!(%local_addr, "kubelet server listening");
    let guard = Arc::new(Guard { auth: config.auth, node: config.node_name });
    // The loop shared with the API server (`k1s_pki::serve`): 10 s for the TLS handshake,
    // 32 s for a request's head, so slow clients are cut off.
    let limits = k1s_pki::serve::Limits::default();
    let runtime = config.runtime;
    let task = tokio::spawn(k1s_pki::serve::serve(listener, Arc::new(tls), limits, "kubelet", cancel, move |conn| {
        let (rt, guard, peer) = (runtime.clone(), guard.clone(), Arc::new(conn.certificates));
        move |req| {
            let (rt, guard, peer) = (rt.clone(), guard.clone(), peer.clone());
            async move { handle(rt, &guard, &peer, req).await }
        }
    }));
    Ok(KubeletServer { local_addr, task })
}

/// What every request passes through before it is served.
struct Guard {
    auth: Arc<auth::Authorizer>,
    node: String,
}

pub(crate) fn full(code: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()).boxed_unsync());
    *r.status_mut() = code;
    r
}

/// A plain-text answer, as upstream's kubelet writes its errors.
pub(crate) fn text(code: StatusCode, msg: &str) -> Response<Body> {
    let mut r = full(code, format!("{msg}\n"));
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

/// What a request path addresses.
#[derive(Debug, PartialEq, Eq)]
enum Route {
    Healthz,
    ResourceMetrics,
    ContainerLogs { namespace: String, pod: String, container: String },
    Exec { namespace: String, pod: String, container: String },
    Attach { namespace: String, pod: String, container: String },
    PortForward { namespace: String, pod: String },
    NotFound,
}

fn route(path: &str) -> Route {
    let parts: Vec<String> = path
        .trim_matches('/')
        .split('/')
        .map(|s| percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned())
        .collect();
    let p: Vec<&str> = parts.iter().map(String::as_str).collect();
    let named = |ns: &str, pod: &str, c: &str| (ns.to_string(), pod.to_string(), c.to_string());
    match p.as_slice() {
        ["healthz"] => Route::Healthz,
        ["metrics", "resource"] => Route::ResourceMetrics,
        ["containerLogs", ns, pod, c] if ![ns, pod, c].iter().any(|s| s.is_empty()) => {
            let (namespace, pod, container) = named(ns, pod, c);
            Route::ContainerLogs { namespace, pod, container }
        }
        [verb @ ("exec" | "attach"), ns, pod, c] | [verb @ ("exec" | "attach"), ns, pod, _, c]
            if ![ns, pod, c].iter().any(|s| s.is_empty()) =>
        {
            let (namespace, pod, container) = named(ns, pod, c);
            if *verb == "exec" {
                Route::Exec { namespace, pod, container }
            } else {
                Route::Attach { namespace, pod, container }
            }
        }
        ["portForward", ns, pod] | ["portForward", ns, pod, _] if !ns.is_empty() && !pod.is_empty() => {
            Route::PortForward { namespace: ns.to_string(), pod: pod.to_string() }
        }
        _ => Route::NotFound,
    }
}

/// The answer to a refused request.
fn refused(e: &auth::AuthError) -> Response<Body> {
    let code = match e {
        auth::AuthError::Unauthenticated => StatusCode::UNAUTHORIZED,
        auth::AuthError::Forbidden { .. } => StatusCode::FORBIDDEN,
        auth::AuthError::Unavailable(_) => StatusCode::INTERNAL_SERVER_ERROR,
    };
    text(code, &e.to_string())
}

async fn handle(
    rt: Arc<dyn RuntimeService>,
    guard: &Guard,
    peer: &[Vec<u8>],
    req: Request<Incoming>,
) -> Response<Body> {
    let verb = match *req.method() {
        Method::GET | Method::HEAD => "get",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "unknown",
    };
    let authorization = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    let id = match guard.auth.authenticate(peer, authorization).await {
        Ok(id) => id,
        Err(e) => return refused(&e),
    };
    let attrs =
        auth::Attributes { verb, subresource: auth::subresource_of(req.uri().path()), node: guard.node.clone() };
    if let Err(e) = guard.auth.authorize(&id, &attrs).await {
        if matches!(e, auth::AuthError::Unavailable(_)) {
            tracing::warn!(error = %e, user = %id.user, "could not authorize a kubelet request");
        }
        return refused(&e);
    }
    let route = route(req.uri().path());
    if route == Route::Healthz {
        return text(StatusCode::OK, "ok");
    }
    tracing::debug!(method = %req.method(), path = %req.uri().path(), user = %id.user, "kubelet request");
    let is_get = req.method() == Method::GET;
    let is_get_or_post = is_get || req.method() == Method::POST;
    match route {
        Route::ResourceMetrics if is_get => match metrics::resource_metrics(rt.as_ref()).await {
            Ok(body) => {
                let mut r = full(StatusCode::OK, body);
                r.headers_mut()
                    .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
                r
            }
            Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, &format!("asking the container runtime for stats: {e}")),
        },
        Route::ContainerLogs { namespace, pod, container } if is_get => {
            container_logs(rt, &namespace, &pod, &container, req.uri().query().unwrap_or("")).await
        }
        Route::Exec { namespace, pod, container } if is_get_or_post => {
            stream(rt.as_ref(), req, &namespace, &pod, Some(&container), Verb::Exec).await
        }
        Route::Attach { namespace, pod, container } if is_get_or_post => {
            stream(rt.as_ref(), req, &namespace, &pod, Some(&container), Verb::Attach).await
        }
        Route::PortForward { namespace, pod } if is_get_or_post => {
            stream(rt.as_ref(), req, &namespace, &pod, None, Verb::PortForward).await
        }
        Route::NotFound => text(StatusCode::NOT_FOUND, "404 page not found"),
        _ => text(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed"),
    }
}

/// Follows a container's state for `logs -f`.
struct CriRunning {
    rt: Arc<dyn RuntimeService>,
    id: String,
}

impl RunningProbe for CriRunning {
    fn running(&self) -> Pin<Box<dyn Future<Output = bool> + Send + '_>> {
        Box::pin(async move {
            let req = cri::ContainerStatusRequest { container_id: self.id.clone(), verbose: false };
            match self.rt.container_status(req).await {
                Ok(r) => r.status.is_some_and(|s| s.state() == cri::ContainerState::ContainerRunning),
                Err(e) => {
                    tracing::debug!(container = %self.id, error = %e, "container status while following its log");
                    false
                }
            }
        })
    }
}

fn status_of(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

async fn container_logs(
    rt: Arc<dyn RuntimeService>,
    namespace: &str,
    pod: &str,
    container: &str,
    query: &str,
) -> Response<Body> {
    let pairs: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes()).into_owned().collect();
    let opts = match LogOptions::from_query(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())), jiff::Timestamp::now())
    {
        Ok(o) => o,
        Err(e) => return text(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    let c = match resolve::log_container(rt.as_ref(), namespace, pod, container, opts.previous).await {
        Ok(c) => c,
        Err(e) => return text(status_of(e.status()), &chain(&e)),
    };
    let status =
        match rt.container_status(cri::ContainerStatusRequest { container_id: c.id.clone(), verbose: false }).await {
            Ok(r) => r.status.unwrap_or_default(),
            Err(e) => return text(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        };
    if status.log_path.is_empty() {
        return text(StatusCode::BAD_REQUEST, &format!("container {container:?} in pod {pod:?} has no log file"));
    }
    let reader = match LogReader::open(std::path::Path::new(&status.log_path), opts).await {
        Ok(r) => r,
        Err(e) => return text(StatusCode::BAD_REQUEST, &chain(&e)),
    };
    let (tx, rx) = mpsc::channel::<Bytes>(16);
    let probe = CriRunning { rt, id: c.id };
    tokio::spawn(async move {
        if let Err(e) = reader.stream(&probe, tx).await {
            tracing::debug!(error = %chain(&e), "streaming a container log failed");
        }
    });
    let body = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(hyper::body::Frame::data(b)), rx))
    });
    let mut r = Response::new(StreamBody::new(body).boxed_unsync());
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    r
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verb {
    Exec,
    Attach,
    PortForward,
}

/// Upstream's stream options: `input`, `output`, `error`, `tty` set to `1` (`true` accepted).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct StreamOpts {
    stdin: bool,
    stdout: bool,
    stderr: bool,
    tty: bool,
}

fn stream_opts(pairs: &[(String, String)]) -> Result<StreamOpts, &'static str> {
    let on = |k: &str| pairs.iter().any(|(n, v)| n == k && (v == "1" || v == "true"));
    let mut o = StreamOpts { stdin: on("input"), stdout: on("output"), stderr: on("error"), tty: on("tty") };
    if o.tty && o.stderr {
        // Upstream warns and drops stderr: a terminal has one output.
        o.stderr = false;
    }
    if !o.stdin && !o.stdout && !o.stderr {
        return Err("you must specify at least 1 of stdin, stdout, stderr");
    }
    Ok(o)
}

async fn stream(
    rt: &dyn RuntimeService,
    req: Request<Incoming>,
    namespace: &str,
    pod: &str,
    container: Option<&str>,
    verb: Verb,
) -> Response<Body> {
    let pairs: Vec<(String, String)> =
        form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes()).into_owned().collect();
    let url = match (verb, container) {
        (Verb::Exec | Verb::Attach, Some(container)) => {
            let opts = match stream_opts(&pairs) {
                Ok(o) => o,
                Err(e) => return text(StatusCode::BAD_REQUEST, e),
            };
            let c = match resolve::running_container(rt, namespace, pod, container).await {
                Ok(c) => c,
                Err(e) => return text(status_of(e.status()), &chain(&e)),
            };
            if verb == Verb::Exec {
                let cmd: Vec<String> = pairs.iter().filter(|(k, _)| k == "command").map(|(_, v)| v.clone()).collect();
                if cmd.is_empty() {
                    return text(StatusCode::BAD_REQUEST, "missing command");
                }
                let r = cri::ExecRequest {
                    container_id: c.id,
                    cmd,
                    tty: opts.tty,
                    stdin: opts.stdin,
                    stdout: opts.stdout,
                    stderr: opts.stderr,
                };
                rt.exec(r).await.map(|r| r.url)
            } else {
                let r = cri::AttachRequest {
                    container_id: c.id,
                    stdin: opts.stdin,
                    tty: opts.tty,
                    stdout: opts.stdout,
                    stderr: opts.stderr,
                };
                rt.attach(r).await.map(|r| r.url)
            }
        }
        _ => {
            let sb = match resolve::ready_sandbox(rt, namespace, pod).await {
                Ok(s) => s,
                Err(e) => return text(status_of(e.status()), &chain(&e)),
            };
            let mut ports = Vec::new();
            for p in pairs.iter().filter(|(k, _)| k == "port").flat_map(|(_, v)| v.split(',')) {
                match p.trim().parse::<u16>() {
                    Ok(n) if n > 0 => ports.push(i32::from(n)),
                    _ => return text(StatusCode::BAD_REQUEST, &format!("invalid port {p:?}")),
                }
            }
            rt.port_forward(cri::PortForwardRequest { pod_sandbox_id: sb.id, port: ports }).await.map(|r| r.url)
        }
    };
    match url {
        Ok(url) => upgrade::proxy(req, &url).await,
        Err(e) => {
            let code = if e.is_not_found() { StatusCode::NOT_FOUND } else { StatusCode::INTERNAL_SERVER_ERROR };
            text(code, &e.to_string())
        }
    }
}

#[cfg(test)]
mod tests;
