//! Proxying an upgrade request (SPDY/3.1 or WebSocket) to the runtime's streaming server at the
//! URL CRI `Exec`/`Attach`/`PortForward` returned, and splicing the two upgraded connections
//! (upstream's `UpgradeAwareHandler` with `upgradeRequired`).

use super::{full, text, Body};
use bytes::Bytes;
use http::{header, HeaderMap, HeaderName, Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use std::time::Duration;
use tokio::net::TcpStream;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Request headers the streaming server needs to negotiate.
const FORWARDED: &[&str] = &[
    "connection",
    "upgrade",
    "x-stream-protocol-version",
    "sec-websocket-key",
    "sec-websocket-version",
    "sec-websocket-protocol",
    "user-agent",
];
/// Response headers of the streaming server's `101` the client needs.
const RETURNED: &[&str] =
    &["connection", "upgrade", "x-stream-protocol-version", "sec-websocket-accept", "sec-websocket-protocol"];

fn copy(from: &HeaderMap, names: &[&'static str]) -> HeaderMap {
    let mut to = HeaderMap::new();
    for n in names {
        let name = HeaderName::from_static(n);
        for v in from.get_all(&name) {
            to.append(name.clone(), v.clone());
        }
    }
    to
}

/// Whether the request asks for a protocol upgrade.
pub fn is_upgrade(headers: &HeaderMap) -> bool {
    let conn_upgrade = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("upgrade"));
    conn_upgrade && headers.contains_key(header::UPGRADE)
}

/// Forwards `req` to the streaming server at `url` and, once it switches protocols, splices
/// the client's connection to it. Any other answer is relayed as it is.
pub async fn proxy(mut req: Request<Incoming>, url: &str) -> Response<Body> {
    if !is_upgrade(req.headers()) {
        return text(StatusCode::BAD_REQUEST, "Upgrade request required");
    }
    let uri: Uri = match url.parse() {
        Ok(u) => u,
        Err(e) => return text(StatusCode::INTERNAL_SERVER_ERROR, &format!("invalid streaming URL {url:?}: {e}")),
    };
    let Some(authority) = uri.authority().map(|a| a.to_string()) else {
        return text(StatusCode::INTERNAL_SERVER_ERROR, &format!("invalid streaming URL {url:?}"));
    };
    if uri.scheme_str() != Some("http") {
        return text(StatusCode::INTERNAL_SERVER_ERROR, &format!("unsupported streaming URL scheme in {url:?}"));
    }
    let mut path = uri.path().to_string();
    // Upstream passes the client's query on (WebSocket port-forward reads its ports there).
    if let Some(q) = req.uri().query().filter(|q| !q.is_empty()) {
        path.push('?');
        path.push_str(q);
    }
    let method = req.method().clone();
    let mut headers = copy(req.headers(), FORWARDED);
    if let Ok(v) = authority.parse() {
        headers.insert(header::HOST, v);
    }
    let client_upgrade = hyper::upgrade::on(&mut req);
    drop(req);

    let tcp = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&authority)).await {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => return text(StatusCode::INTERNAL_SERVER_ERROR, &format!("error dialing {authority}: {e}")),
        Err(_) => return text(StatusCode::INTERNAL_SERVER_ERROR, &format!("error dialing {authority}: timeout")),
    };
    let _ = tcp.set_nodelay(true);
    let (mut sender, conn) = match hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await {
        Ok(x) => x,
        Err(e) => return text(StatusCode::INTERNAL_SERVER_ERROR, &format!("error talking to {authority}: {e}")),
    };
    tokio::spawn(async move {
        if let Err(e) = conn.with_upgrades().await {
            tracing::debug!(error = %e, "streaming server connection ended");
        }
    });
    let mut backend_req = Request::new(Empty::<Bytes>::new());
    *backend_req.method_mut() = method;
    *backend_req.uri_mut() = match path.parse() {
        Ok(u) => u,
        Err(e) => return text(StatusCode::INTERNAL_SERVER_ERROR, &format!("invalid streaming path: {e}")),
    };
    *backend_req.headers_mut() = headers;
    let resp = match sender.send_request(backend_req).await {
        Ok(r) => r,
        Err(e) => return text(StatusCode::INTERNAL_SERVER_ERROR, &format!("error talking to {authority}: {e}")),
    };
    if resp.status() != StatusCode::SWITCHING_PROTOCOLS {
        let code = resp.status();
        let ct = resp.headers().get(header::CONTENT_TYPE).cloned();
        let mut body = resp.into_body();
        let mut out = Vec::new();
        while let Some(Ok(frame)) = body.frame().await {
            if let Ok(d) = frame.into_data() {
                out.extend_from_slice(&d);
                if out.len() > MAX_ERROR_BODY {
                    out.truncate(MAX_ERROR_BODY);
                    break;
                }
            }
        }
        let mut r = full(code, out);
        if let Some(ct) = ct {
            r.headers_mut().insert(header::CONTENT_TYPE, ct);
        }
        return r;
    }
    let mut answer = full(StatusCode::SWITCHING_PROTOCOLS, Vec::new());
    *answer.headers_mut() = copy(resp.headers(), RETURNED);
    let backend_upgrade = hyper::upgrade::on(resp);
    tokio::spawn(async move {
        let (client, backend) = match (client_upgrade.await, backend_upgrade.await) {
            (Ok(c), Ok(b)) => (c, b),
            (Err(e), _) | (_, Err(e)) => {
                tracing::debug!(error = %e, "stream upgrade failed");
                return;
            }
        };
        let (mut client, mut backend) = (TokioIo::new(client), TokioIo::new(backend));
        match tokio::io::copy_bidirectional(&mut client, &mut backend).await {
            Ok((up, down)) => tracing::debug!(up, down, "stream finished"),
            Err(e) => tracing::debug!(error = %e, "stream ended"),
        }
    });
    answer
}
