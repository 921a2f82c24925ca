//! What a server answers a server that joins the cluster (see `k1s_server::join`): `/cacerts`,
//! the cluster CA (public; the joining server checks it against its token's hash), and
//! `/v1-k1s/server-bootstrap`, the cluster's shared key material, for `server:<secret>` only
//! (HTTP basic authentication, as k3s's `/v1-k3s/server-bootstrap`).

use crate::endpoints::reply::{error_response, respond_bytes, text};
use crate::endpoints::Body;
use crate::error::ApiError;
use base64::Engine as _;
use http::{header, HeaderMap, Method, Response, StatusCode};

/// The join secret and what is handed out with it.
#[derive(Clone)]
pub struct JoinEndpoint {
    /// The token's secret.
    pub secret: String,
    /// The cluster CA certificate (PEM), served at `/cacerts`.
    pub ca_pem: String,
    /// The bootstrap document (JSON).
    pub bootstrap: Vec<u8>,
}

impl std::fmt::Debug for JoinEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinEndpoint").finish_non_exhaustive()
    }
}

pub(crate) const CACERTS: &str = "/cacerts";
pub(crate) const BOOTSTRAP: &str = "/v1-k1s/server-bootstrap";

/// Equal in time independent of where `a` and `b` differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether the `Authorization` header is `Basic base64(server:<secret>)`.
fn authorized(join: &JoinEndpoint, headers: &HeaderMap) -> bool {
    let Some(v) = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) else { return false };
    let Some(b64) = v.strip_prefix("Basic ").or_else(|| v.strip_prefix("basic ")) else { return false };
    let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(b64.trim()) else { return false };
    same(&decoded, format!("server:{}", join.secret).as_bytes())
}

/// Answers the join paths; `None` for every other path.
pub(crate) fn serve(join: &JoinEndpoint, method: &Method, path: &str, headers: &HeaderMap) -> Option<Response<Body>> {
    if path != CACERTS && path != BOOTSTRAP {
        return None;
    }
    if method != Method::GET {
        return Some(error_response(&ApiError::method_not_allowed(method.as_str(), path)));
    }
    Some(match path {
        CACERTS => text(StatusCode::OK, &join.ca_pem),
        _ if authorized(join, headers) => {
            tracing::info!("handed the cluster's bootstrap data to a joining server");
            respond_bytes(StatusCode::OK, join.bootstrap.clone())
        }
        _ => {
            tracing::warn!("refused a server bootstrap request with a wrong or missing token");
            error_response(&ApiError::unauthorized())
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn endpoint() -> JoinEndpoint {
        JoinEndpoint { secret: "s3cret".into(), ca_pem: "CA PEM".into(), bootstrap: b"{\"files\":{}}".to_vec() }
    }

    fn basic(user_pass: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        let v = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(user_pass));
        h.insert(header::AUTHORIZATION, HeaderValue::from_str(&v).expect("header"));
        h
    }

    #[test]
    fn the_bootstrap_needs_the_secret_and_the_ca_is_public() {
        let j = endpoint();
        assert!(serve(&j, &Method::GET, "/version", &HeaderMap::new()).is_none());
        let ca = serve(&j, &Method::GET, CACERTS, &HeaderMap::new()).expect("served");
        assert_eq!(ca.status(), StatusCode::OK);
        for h in [HeaderMap::new(), basic("server:wrong"), basic("admin:s3cret"), basic("server:s3cret2")] {
            let r = serve(&j, &Method::GET, BOOTSTRAP, &h).expect("served");
            assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        }
        let r = serve(&j, &Method::GET, BOOTSTRAP, &basic("server:s3cret")).expect("served");
        assert_eq!(r.status(), StatusCode::OK);
        let r = serve(&j, &Method::POST, BOOTSTRAP, &basic("server:s3cret")).expect("served");
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    }
}
