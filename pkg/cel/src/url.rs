//! The Kubernetes URL library (k8s.io/apiserver/pkg/cel/library/urls.go): `url`, `isURL` and the
//! URL accessors. A URL must be what Go's `url.ParseRequestURI` accepts (an absolute URI or an
//! absolute path); its parts are then those of Go's `url.Parse` (so a `#fragment` is cut off).

use std::collections::BTreeMap;
use std::sync::Arc;

use cel::objects::Opaque;
use cel::{ExecutionError, Value};

use crate::library::{arg, string};

/// The CEL type name of a URL.
pub(crate) const URL_TYPE: &str = "kubernetes.URL";

/// A parsed URL: its raw parts as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Url {
    scheme: String,
    /// The `host[:port]` of the authority, as written; empty without an authority.
    host: String,
    /// The path, as written (still escaped).
    raw_path: String,
    /// The text after the first `?`, if any.
    raw_query: Option<String>,
}

impl Opaque for Url {
    fn runtime_type_name(&self) -> &str {
        URL_TYPE
    }
}

/// Go's `getScheme`: a scheme is `[A-Za-z][A-Za-z0-9+.-]*` before the first `:`.
fn split_scheme(raw: &str) -> Result<(&str, &str), &'static str> {
    for (i, c) in raw.char_indices() {
        match c {
            'a'..='z' | 'A'..='Z' => {}
            '0'..='9' | '+' | '-' | '.' if i > 0 => {}
            ':' if i == 0 => return Err("missing protocol scheme"),
            ':' => return Ok((&raw[..i], &raw[i + 1..])),
            // Not a scheme: the whole text is the rest.
            _ => return Ok(("", raw)),
        }
    }
    Ok(("", raw))
}

fn unhex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Percent-decodes `s` (and `+` as a space for a query); `None` for a malformed escape.
fn unescape(s: &str, query: bool) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hi = unhex(*bytes.get(i + 1)?)?;
                let lo = unhex(*bytes.get(i + 2)?)?;
                out.push(hi << 4 | lo);
                i += 3;
            }
            b'+' if query => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// Whether Go's `url.PathEscape`-like encoding of a path leaves `b` alone.
fn path_safe(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-_.~$&+,/:;=@".contains(&b)
}

/// Go's `validOptionalPort`: empty, or `:` and digits.
fn valid_port(port: &str) -> bool {
    port.is_empty() || port.strip_prefix(':').is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))
}

/// Go's `parseAuthority` and `parseHost`, reduced to the checks that refuse a URL.
fn check_authority(authority: &str) -> Result<(), String> {
    let host = match authority.rfind('@') {
        Some(i) => {
            let userinfo = &authority[..i];
            if !userinfo.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._:~!$&'()*+,;=%@".contains(&b)) {
                return Err("net/url: invalid userinfo".into());
            }
            &authority[i + 1..]
        }
        None => authority,
    };
    if let Some(rest) = host.strip_prefix('[') {
        let Some(end) = rest.find(']') else { return Err("missing ']' in host".into()) };
        let port = &rest[end + 1..];
        if !valid_port(port) {
            return Err(format!("invalid port {port:?} after host"));
        }
    } else if let Some(i) = host.rfind(':') {
        let port = &host[i..];
        if !valid_port(port) {
            return Err(format!("invalid port {port:?} after host"));
        }
    }
    if host.contains('%') && unescape(host, false).is_none() {
        return Err(format!("invalid URL escape {host:?}"));
    }
    Ok(())
}

/// Go's `url.ParseRequestURI`, keeping what the accessors need; the error is Go's text.
fn parse(raw: &str) -> Result<Url, String> {
    let fail = |reason: &str| format!("parse {raw:?}: {reason}");
    if raw.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err(fail("net/url: invalid control character in URL"));
    }
    if raw.is_empty() {
        return Err(fail("empty url"));
    }
    if raw == "*" {
        return Ok(Url { scheme: String::new(), host: String::new(), raw_path: "*".into(), raw_query: None });
    }
    let (scheme, rest) = split_scheme(raw).map_err(fail)?;
    // `url.Parse` cuts the fragment off; `ParseRequestURI` keeps it in the path or query, which
    // then decides nothing more than the fragment would.
    let rest = rest.split_once('#').map_or(rest, |(r, _)| r);
    let (rest, raw_query) = match rest.split_once('?') {
        Some((r, q)) => (r, Some(q.to_owned())),
        None => (rest, None),
    };
    if !rest.starts_with('/') {
        if !scheme.is_empty() {
            // An opaque URI (`mailto:x`): valid, with neither host nor path.
            return Ok(Url {
                scheme: scheme.to_ascii_lowercase(),
                host: String::new(),
                raw_path: String::new(),
                raw_query,
            });
        }
        return Err(fail("invalid URI for request"));
    }
    let (host, path) = match rest.strip_prefix("//") {
        Some(after) if !scheme.is_empty() => {
            let end = after.find('/').unwrap_or(after.len());
            let authority = &after[..end];
            check_authority(authority).map_err(|e| fail(&e))?;
            let host = authority.rfind('@').map_or(authority, |i| &authority[i + 1..]);
            (host.to_owned(), &after[end..])
        }
        _ => (String::new(), rest),
    };
    if unescape(path, false).is_none() {
        let bad = path.find('%').map_or(path, |i| &path[i..path.len().min(i + 3)]);
        return Err(fail(&format!("invalid URL escape {bad:?}")));
    }
    Ok(Url { scheme: scheme.to_ascii_lowercase(), host, raw_path: path.to_owned(), raw_query })
}

impl Url {
    /// Go's `URL.Hostname`: the host without the port, IPv6 brackets removed.
    fn hostname(&self) -> &str {
        let host = &self.host;
        if let Some(rest) = host.strip_prefix('[') {
            return rest.find(']').map_or(rest, |end| &rest[..end]);
        }
        host.rfind(':').map_or(host, |i| &host[..i])
    }

    /// Go's `URL.Port`: the digits after the host's last colon, or empty.
    fn port(&self) -> &str {
        let after = match self.host.rfind(']') {
            Some(i) => &self.host[i + 1..],
            None => &self.host,
        };
        match after.rfind(':') {
            Some(i) if after[i + 1..].bytes().all(|b| b.is_ascii_digit()) => &after[i + 1..],
            _ => "",
        }
    }

    /// Go's `URL.EscapedPath`: the path as written when that is a valid escaping, else the
    /// decoded path escaped again.
    fn escaped_path(&self) -> String {
        let raw = &self.raw_path;
        if raw.bytes().all(|b| path_safe(b) || b"!'()*[]%".contains(&b)) {
            return raw.clone();
        }
        let decoded = unescape(raw, false).unwrap_or_else(|| raw.clone());
        let mut out = String::with_capacity(decoded.len());
        for b in decoded.bytes() {
            if path_safe(b) {
                out.push(char::from(b));
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
        out
    }

    /// Go's `URL.Query`: `k=v` pairs split on `&`, unescaped, repeated keys collected; malformed
    /// pairs (a `;`, a bad escape) left out.
    fn query(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let Some(query) = &self.raw_query else { return out };
        for pair in query.split('&') {
            if pair.is_empty() || pair.contains(';') {
                continue;
            }
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            if let (Some(k), Some(v)) = (unescape(k, true), unescape(v, true)) {
                out.entry(k).or_default().push(v);
            }
        }
        out
    }
}

fn url_of<'a>(args: &'a [Value], function: &str) -> Result<&'a Url, ExecutionError> {
    match arg(args, 0, function)? {
        Value::Opaque(o) => o.downcast_ref::<Url>(),
        _ => None,
    }
    .ok_or_else(|| ExecutionError::function_error(function, "expected a URL"))
}

fn text(s: &str) -> Value {
    Value::String(Arc::new(s.to_owned()))
}

/// Go's `url.ParseRequestURI` as upstream's `format.uri()` reports it: `None` when valid.
pub(crate) fn uri_error(s: &str) -> Option<String> {
    parse(s).err()
}

pub(crate) fn url(args: &[Value]) -> Result<Value, ExecutionError> {
    parse(string(args, 0, "url")?).map(|u| Value::Opaque(Arc::new(u))).map_err(|e| {
        ExecutionError::function_error("url", format!("URL parse error during conversion from string: {e}"))
    })
}

pub(crate) fn is_url(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(parse(string(args, 0, "isURL")?).is_ok()))
}

pub(crate) fn get_scheme(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(text(&url_of(args, "getScheme")?.scheme))
}

pub(crate) fn get_host(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(text(&url_of(args, "getHost")?.host))
}

pub(crate) fn get_hostname(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(text(url_of(args, "getHostname")?.hostname()))
}

pub(crate) fn get_port(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(text(url_of(args, "getPort")?.port()))
}

pub(crate) fn get_escaped_path(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(text(&url_of(args, "getEscapedPath")?.escaped_path()))
}

pub(crate) fn get_query(args: &[Value]) -> Result<Value, ExecutionError> {
    let query = url_of(args, "getQuery")?.query();
    Ok(crate::map(query.into_iter().map(|(k, vs)| (k, Value::List(Arc::new(vs.iter().map(|v| text(v)).collect()))))))
}
