//! The HTTP GET client of probes and lifecycle hooks, as upstream's prober transport: one
//! connection per request (`Connection: close`), HTTPS without certificate verification,
//! redirects followed only to the same host (at most 10), the body read up to 10 KiB, and
//! Go's error texts (`Get "http://10.42.0.5:80/": dial tcp …: connect: connection refused`).

use super::dial::{self, DialError};
use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty};
use hyper_util::rt::TokioIo;
use std::sync::Arc;
use tokio::time::Instant;

/// Upstream reads at most this much of a probe response body.
pub const MAX_BODY: usize = 10 * 1024;
const MAX_REDIRECTS: usize = 10;

/// `http` or `https`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

/// Where a request goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub scheme: Scheme,
    /// An IP or a DNS name, without brackets.
    pub host: String,
    pub port: u16,
    /// The escaped path and query as written in the URL (`/healthz?x=1`); may be empty.
    pub path: String,
}

/// Percent-encodes what may not appear raw in a URL path or query (Go's `EscapedPath`).
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        let keep = b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/%?".contains(&b);
        if keep {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl Target {
    /// The probe URL for `path` as upstream's `formatURL` builds it: the fragment dropped, a
    /// relative path given a leading `/`.
    pub fn new(scheme: Scheme, host: &str, port: u16, path: &str) -> Target {
        let path = path.split('#').next().unwrap_or("");
        let mut p = escape(path);
        if !p.is_empty() && !p.starts_with('/') {
            p.insert(0, '/');
        }
        Target { scheme, host: host.to_string(), port, path: p }
    }

    pub fn url(&self) -> String {
        format!("{}://{}{}", self.scheme.as_str(), dial::join_host_port(&self.host, self.port), self.path)
    }

    fn request_target(&self) -> String {
        if self.path.is_empty() {
            "/".to_string()
        } else if self.path.starts_with('?') {
            format!("/{}", self.path)
        } else {
            self.path.clone()
        }
    }

    /// Resolves a `Location` header against this URL.
    fn resolve(&self, location: &str) -> Result<Target, GetFailure> {
        let location = location.split('#').next().unwrap_or("").trim();
        let lower = location.to_ascii_lowercase();
        let (scheme, rest) = if let Some(r) = lower.strip_prefix("http://") {
            (Scheme::Http, &location[location.len() - r.len()..])
        } else if let Some(r) = lower.strip_prefix("https://") {
            (Scheme::Https, &location[location.len() - r.len()..])
        } else if let Some(r) = location.strip_prefix("//") {
            (self.scheme, r)
        } else if let Some((s, _)) = location.split_once("://") {
            return Err(GetFailure::Scheme(s.to_string()));
        } else {
            // Same scheme and authority.
            let path = if location.starts_with('/') {
                location.to_string()
            } else if location.starts_with('?') {
                let base = self.path.split('?').next().unwrap_or("");
                format!("{base}{location}")
            } else {
                let base = self.path.split('?').next().unwrap_or("");
                let dir = match base.rfind('/') {
                    Some(i) => &base[..=i],
                    None => "/",
                };
                format!("{dir}{location}")
            };
            return Ok(Target { path: normalize(&escape(&path)), ..self.clone() });
        };
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let (host, port) = split_authority(authority, scheme.default_port())?;
        Ok(Target { scheme, host, port, path: normalize(&escape(path)) })
    }
}

/// Removes `.` and `..` segments from a path (RFC 3986 section 5.2.4).
fn normalize(path: &str) -> String {
    let (p, q) = match path.find('?') {
        Some(i) => (&path[..i], &path[i..]),
        None => (path, ""),
    };
    if !p.contains("/.") {
        return path.to_string();
    }
    let mut out: Vec<&str> = Vec::new();
    let segments: Vec<&str> = p.split('/').collect();
    let last = segments.len().saturating_sub(1);
    for (i, seg) in segments.iter().enumerate() {
        match *seg {
            "." => {
                if i == last {
                    out.push("");
                }
            }
            ".." => {
                if out.len() > 1 {
                    out.pop();
                }
                if i == last {
                    out.push("");
                }
            }
            s => out.push(s),
        }
    }
    format!("{}{q}", out.join("/"))
}

fn split_authority(authority: &str, default_port: u16) -> Result<(String, u16), GetFailure> {
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or_else(|| GetFailure::Url(authority.to_string()))?;
        let port = match after.strip_prefix(':') {
            Some(p) if !p.is_empty() => p.parse().map_err(|_| GetFailure::Url(authority.to_string()))?,
            _ => default_port,
        };
        return Ok((host.to_string(), port));
    }
    match authority.rsplit_once(':') {
        Some((h, p)) if !p.is_empty() => {
            Ok((h.to_string(), p.parse().map_err(|_| GetFailure::Url(authority.to_string()))?))
        }
        Some((h, _)) => Ok((h.to_string(), default_port)),
        None => Ok((authority.to_string(), default_port)),
    }
}

/// A GET to send.
#[derive(Clone, Debug)]
pub struct GetRequest {
    pub target: Target,
    /// The user's headers in order; `Host` sets the request's host.
    pub headers: Vec<(String, String)>,
    /// Sent when the headers carry no `User-Agent` (`kube-probe/1.35`, `kube-lifecycle/1.35`).
    pub user_agent: String,
}

/// What came back.
#[derive(Clone, Debug)]
pub struct GetResponse {
    pub status: u16,
    /// At most [`MAX_BODY`] bytes.
    pub body: Vec<u8>,
    /// The URL that answered (after redirects).
    pub url: String,
}

/// Why a GET failed, after the URL it was for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GetFailure {
    #[error("{0}")]
    Dial(DialError),
    #[error("context deadline exceeded (Client.Timeout exceeded while awaiting headers)")]
    Timeout,
    #[error("{0} (Client.Timeout exceeded while awaiting headers)")]
    DialTimeout(DialError),
    #[error("context deadline exceeded (Client.Timeout or context cancellation while reading body)")]
    BodyTimeout,
    #[error("http: server gave HTTP response to HTTPS client")]
    NotTls,
    #[error("{0}")]
    Tls(String),
    #[error("net/http: invalid header field name {0:?}")]
    HeaderName(String),
    #[error("net/http: invalid header field value for {0:?}")]
    HeaderValue(String),
    #[error("EOF")]
    Eof,
    #[error("{0}")]
    Protocol(String),
    #[error("stopped after 10 redirects")]
    TooManyRedirects,
    #[error("unsupported protocol scheme {0:?}")]
    Scheme(String),
    #[error("invalid URL {0:?}")]
    Url(String),
}

/// A failed GET: `Get "<url>": <failure>` as Go's `url.Error` prints it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Get {url:?}: {failure}")]
pub struct GetError {
    pub url: String,
    pub failure: GetFailure,
}

impl GetError {
    /// The HTTPS request was answered in plain HTTP (upstream's `isHTTPResponseError`).
    pub fn is_http_response_to_https(&self) -> bool {
        self.failure == GetFailure::NotTls
    }
}

/// The probes' TLS configuration, built once: certificates are not checked, as upstream's
/// prober sets `InsecureSkipVerify` (the handshake's signature still is).
fn tls_config() -> Result<Arc<rustls::ClientConfig>, GetFailure> {
    static CONFIG: std::sync::OnceLock<Result<Arc<rustls::ClientConfig>, GetFailure>> = std::sync::OnceLock::new();
    CONFIG
        .get_or_init(|| {
            k1s_pki::client::client_config(k1s_pki::client::Trust::Insecure, None, &[b"http/1.1"])
                .map(Arc::new)
                .map_err(|e| GetFailure::Tls(e.message))
        })
        .clone()
}

/// Go-like text of a TLS failure.
fn tls_failure(e: &std::io::Error) -> GetFailure {
    let inner = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>());
    match inner {
        Some(rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType)) => GetFailure::NotTls,
        Some(other) => GetFailure::Tls(format!("tls: {other}")),
        None if e.kind() == std::io::ErrorKind::UnexpectedEof => GetFailure::Eof,
        None => GetFailure::Tls(dial::go_errno_text(e)),
    }
}

fn hyper_failure(e: &hyper::Error) -> GetFailure {
    if e.is_incomplete_message() {
        return GetFailure::Eof;
    }
    let mut src: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(s) = src {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return GetFailure::Protocol(format!("read: {}", dial::go_errno_text(io)));
        }
        src = s.source();
    }
    GetFailure::Protocol(e.to_string())
}

/// One request on a fresh connection: the status and up to [`MAX_BODY`] bytes of body, plus
/// the `Location` header.
async fn once(
    req: &GetRequest,
    target: &Target,
    host_header: &str,
    deadline: Instant,
) -> Result<(u16, Option<String>, Vec<u8>), GetFailure> {
    let timed_out = |r| match r {
        DialError::Timeout { .. } => GetFailure::DialTimeout(r),
        other => GetFailure::Dial(other),
    };
    let tcp = dial::dial(&target.host, target.port, deadline).await.map_err(timed_out)?;
    let mut builder = http::Request::builder().method(http::Method::GET).uri(target.request_target());
    let mut has_ua = false;
    let mut accept: Option<String> = None;
    for (name, value) in &req.headers {
        let hn = http::HeaderName::from_bytes(name.as_bytes()).map_err(|_| GetFailure::HeaderName(name.clone()))?;
        let hv = http::HeaderValue::from_str(value).map_err(|_| GetFailure::HeaderValue(name.clone()))?;
        if hn == http::header::HOST {
            continue;
        }
        if hn == http::header::USER_AGENT {
            has_ua = true;
        }
        if hn == http::header::ACCEPT {
            // An explicitly empty Accept removes the header.
            if accept.is_none() {
                accept = Some(value.clone());
            }
            continue;
        }
        builder = builder.header(hn, hv);
    }
    if !has_ua {
        builder = builder.header(http::header::USER_AGENT, req.user_agent.as_str());
    }
    match accept.as_deref() {
        None => builder = builder.header(http::header::ACCEPT, "*/*"),
        Some("") => {}
        Some(v) => builder = builder.header(http::header::ACCEPT, v),
    }
    let request = builder
        .header(http::header::HOST, host_header)
        .header(http::header::CONNECTION, "close")
        .body(Empty::<Bytes>::new())
        .map_err(|e| GetFailure::Protocol(e.to_string()))?;

    let exchange = async {
        let (status, location, body) = match target.scheme {
            Scheme::Http => send(TokioIo::new(tcp), request).await?,
            Scheme::Https => {
                let connector = tokio_rustls::TlsConnector::from(tls_config()?);
                let name = match target.host.parse::<std::net::IpAddr>() {
                    Ok(ip) => rustls_pki_types::ServerName::IpAddress(ip.into()),
                    Err(_) => rustls_pki_types::ServerName::try_from(target.host.clone())
                        .map_err(|_| GetFailure::Url(target.host.clone()))?,
                };
                let tls = connector.connect(name, tcp).await.map_err(|e| tls_failure(&e))?;
                send(TokioIo::new(tls), request).await?
            }
        };
        Ok::<_, GetFailure>((status, location, body))
    };
    match tokio::time::timeout_at(deadline, exchange).await {
        Ok(r) => r,
        Err(_) => Err(GetFailure::Timeout),
    }
}

async fn send<T>(
    io: TokioIo<T>,
    request: http::Request<Empty<Bytes>>,
) -> Result<(u16, Option<String>, Vec<u8>), GetFailure>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.map_err(|e| hyper_failure(&e))?;
    let driver = tokio::spawn(async move {
        let _ = conn.await;
    });
    let result = async {
        let resp = sender.send_request(request).await.map_err(|e| hyper_failure(&e))?;
        let status = resp.status().as_u16();
        let location = resp.headers().get(http::header::LOCATION).and_then(|v| v.to_str().ok()).map(str::to_string);
        let mut body = resp.into_body();
        let mut buf = Vec::new();
        while buf.len() < MAX_BODY {
            match body.frame().await {
                Some(Ok(frame)) => {
                    if let Some(data) = frame.data_ref() {
                        let room = MAX_BODY - buf.len();
                        buf.extend_from_slice(&data[..data.len().min(room)]);
                    }
                }
                Some(Err(e)) => return Err(hyper_failure(&e)),
                None => break,
            }
        }
        Ok((status, location, buf))
    }
    .await;
    driver.abort();
    result
}

/// Sends `req` and follows same-host redirects, all by `deadline`.
pub async fn get(req: &GetRequest, deadline: Instant) -> Result<GetResponse, GetError> {
    let first_host = req.target.host.clone();
    let explicit_host = req.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case("host")).map(|(_, v)| v.clone());
    let mut target = req.target.clone();
    let mut host_header = explicit_host.clone().unwrap_or_else(|| dial::join_host_port(&target.host, target.port));
    let mut redirects = 0;
    loop {
        let (status, location, body) = once(req, &target, &host_header, deadline)
            .await
            .map_err(|failure| GetError { url: target.url(), failure })?;
        let follow = matches!(status, 301 | 302 | 303 | 307 | 308);
        let Some(location) = location.filter(|_| follow) else {
            return Ok(GetResponse { status, body, url: target.url() });
        };
        let next = target.resolve(&location).map_err(|failure| GetError { url: location.clone(), failure })?;
        // Upstream's RedirectChecker(false): a redirect to another host ends the chain with
        // the redirect response itself.
        if next.host != first_host {
            return Ok(GetResponse { status, body, url: target.url() });
        }
        redirects += 1;
        if redirects > MAX_REDIRECTS {
            // Go reports the Location as written.
            return Err(GetError { url: location, failure: GetFailure::TooManyRedirects });
        }
        let relative = !location.contains("://") && !location.starts_with("//");
        host_header = match (&explicit_host, relative) {
            (Some(h), true) => h.clone(),
            _ => dial::join_host_port(&next.host, next.port),
        };
        target = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_formatted_like_upstream() {
        assert_eq!(Target::new(Scheme::Http, "10.42.0.5", 80, "/").url(), "http://10.42.0.5:80/");
        assert_eq!(Target::new(Scheme::Http, "10.42.0.5", 80, "").url(), "http://10.42.0.5:80");
        assert_eq!(Target::new(Scheme::Https, "fd00::5", 8443, "healthz").url(), "https://[fd00::5]:8443/healthz");
        assert_eq!(Target::new(Scheme::Http, "h", 1, "/a b?x=1#frag").url(), "http://h:1/a%20b?x=1");
        assert_eq!(Target::new(Scheme::Http, "h", 1, "").request_target(), "/");
    }

    #[test]
    fn locations_resolve_against_the_current_url() {
        let base = Target::new(Scheme::Http, "10.0.0.1", 8080, "/a/b?q=1");
        let r = |l: &str| base.resolve(l).expect(l).url();
        assert_eq!(r("/c"), "http://10.0.0.1:8080/c");
        assert_eq!(r("c"), "http://10.0.0.1:8080/a/c");
        assert_eq!(r("../c"), "http://10.0.0.1:8080/c");
        assert_eq!(r("?z=2"), "http://10.0.0.1:8080/a/b?z=2");
        assert_eq!(r("https://10.0.0.1/x"), "https://10.0.0.1:443/x");
        assert_eq!(r("//other:81/y"), "http://other:81/y");
        assert_eq!(r("http://[fd00::1]:90"), "http://[fd00::1]:90");
        assert_eq!(base.resolve("ftp://x/").expect_err("scheme").to_string(), "unsupported protocol scheme \"ftp\"");
    }
}
