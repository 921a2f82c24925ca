//! Who may use the kubelet's API, decided as upstream's kubelet does in webhook mode: the
//! caller is a client certificate the cluster CA signed (CN the user, O the groups) or a bearer
//! token the API server vouches for (`TokenReview`); what it asks is a verb on `nodes/<sub>` of
//! this node (`proxy` for logs and streaming, `metrics`, `stats`, `log`, `spec`), which the API
//! server authorizes (`SubjectAccessReview`). Answers are cached as upstream's defaults (tokens
//! 2 min, allowed 5 min, denied 30 s). Anything else gets upstream's 401 or 403.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use x509_parser::prelude::*;

/// The API server's identity towards kubelets (upstream's `kube-apiserver-kubelet-client`).
pub const APISERVER_KUBELET_CLIENT: &str = "kube-apiserver-kubelet-client";

/// A verified client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub user: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// What a request asks of the node (upstream's kubelet request attributes).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Attributes {
    pub verb: &'static str,
    pub subresource: &'static str,
    /// The node's name.
    pub node: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AuthError {
    /// No credentials, or ones the cluster does not vouch for: 401.
    #[error("Unauthorized")]
    Unauthenticated,
    /// A valid client that may not do this: 403 with upstream's text.
    #[error("Forbidden (user={user}, verb={verb}, resource=nodes, subresource={subresource})")]
    Forbidden { user: String, verb: &'static str, subresource: &'static str },
    /// The API server could not be asked: 500 (never allowed by default).
    #[error("{0}")]
    Unavailable(String),
}

/// The identity in the verified leaf certificate (`None` without one).
pub fn identify(peer_certificates: &[Vec<u8>]) -> Result<Option<Identity>, AuthError> {
    let Some(leaf) = peer_certificates.first() else { return Ok(None) };
    let (_, cert) = parse_x509_certificate(leaf).map_err(|_| AuthError::Unauthenticated)?;
    let user = cert
        .subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .ok_or(AuthError::Unauthenticated)?
        .to_string();
    let mut groups: Vec<String> =
        cert.subject().iter_organization().filter_map(|o| o.as_str().ok()).map(str::to_string).collect();
    groups.push("system:authenticated".into());
    Ok(Some(Identity { user, uid: String::new(), groups, extra: BTreeMap::new() }))
}

/// What the kubelet asks the API server about its callers.
#[async_trait::async_trait]
pub trait Delegate: Send + Sync {
    /// The user a bearer token names, `None` when the API server does not vouch for it.
    async fn review_token(&self, token: &str) -> Result<Option<Identity>, AuthError>;
    /// Whether `id` may do `attrs`.
    async fn allowed(&self, id: &Identity, attrs: &Attributes) -> Result<bool, AuthError>;
}

/// Authenticates and authorizes callers through a [`Delegate`], with upstream's cache lifetimes.
pub struct Authorizer {
    delegate: Arc<dyn Delegate>,
    tokens: Mutex<HashMap<String, (Option<Identity>, Instant)>>,
    decisions: Mutex<HashMap<DecisionKey, (bool, Instant)>>,
}

/// Who asked what: a cached decision's key (user, groups, attributes).
type DecisionKey = (String, Vec<String>, Attributes);

const TOKEN_TTL: Duration = Duration::from_secs(120);
const ALLOWED_TTL: Duration = Duration::from_secs(300);
const DENIED_TTL: Duration = Duration::from_secs(30);
/// Entries kept before a cache is emptied (callers are few: the API server and admins).
const CACHE_LIMIT: usize = 1024;

impl Authorizer {
    pub fn new(delegate: Arc<dyn Delegate>) -> Authorizer {
        Authorizer { delegate, tokens: Mutex::default(), decisions: Mutex::default() }
    }

    /// The caller: its client certificate, else its bearer token (`Authorization` header value).
    pub async fn authenticate(
        &self,
        peer_certificates: &[Vec<u8>],
        authorization: Option<&str>,
    ) -> Result<Identity, AuthError> {
        if let Some(id) = identify(peer_certificates)? {
            return Ok(id);
        }
        let token = authorization
            .and_then(|h| h.strip_prefix("Bearer ").or_else(|| h.strip_prefix("bearer ")))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or(AuthError::Unauthenticated)?;
        let cached = lock(&self.tokens).get(token).filter(|(_, at)| at.elapsed() < TOKEN_TTL).map(|(id, _)| id.clone());
        let id = match cached {
            Some(id) => id,
            None => {
                let id = self.delegate.review_token(token).await?;
                let mut cache = lock(&self.tokens);
                if cache.len() >= CACHE_LIMIT {
                    cache.clear();
                }
                cache.insert(token.to_string(), (id.clone(), Instant::now()));
                id
            }
        };
        id.ok_or(AuthError::Unauthenticated)
    }

    /// Whether `id` may do `attrs` (403 otherwise).
    pub async fn authorize(&self, id: &Identity, attrs: &Attributes) -> Result<(), AuthError> {
        let key = (id.user.clone(), id.groups.clone(), attrs.clone());
        let cached = lock(&self.decisions)
            .get(&key)
            .filter(|(ok, at)| at.elapsed() < if *ok { ALLOWED_TTL } else { DENIED_TTL })
            .map(|(ok, _)| *ok);
        let ok = match cached {
            Some(ok) => ok,
            None => {
                let ok = self.delegate.allowed(id, attrs).await?;
                let mut cache = lock(&self.decisions);
                if cache.len() >= CACHE_LIMIT {
                    cache.clear();
                }
                cache.insert(key, (ok, Instant::now()));
                ok
            }
        };
        if ok {
            Ok(())
        } else {
            Err(AuthError::Forbidden { user: id.user.clone(), verb: attrs.verb, subresource: attrs.subresource })
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The subresource of `nodes` a kubelet path is authorized as (upstream's
/// `GetRequestAttributes`): `stats`, `metrics`, `log`, `spec`, and `proxy` for the rest.
pub fn subresource_of(path: &str) -> &'static str {
    let first = path.trim_start_matches('/').split('/').next().unwrap_or("");
    match first {
        "stats" => "stats",
        "metrics" => "metrics",
        "logs" => "log",
        "spec" => "spec",
        _ => "proxy",
    }
}

/// The API server as the kubelet reaches it with its own identity: `TokenReview` and
/// `SubjectAccessReview` (the `system:node` role may create both).
pub struct ApiDelegate {
    client: kube::Client,
}

impl ApiDelegate {
    pub fn new(client: kube::Client) -> ApiDelegate {
        ApiDelegate { client }
    }
}

#[async_trait::async_trait]
impl Delegate for ApiDelegate {
    async fn review_token(&self, token: &str) -> Result<Option<Identity>, AuthError> {
        use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
        let api: kube::Api<TokenReview> = kube::Api::all(self.client.clone());
        let review = TokenReview {
            spec: TokenReviewSpec { token: Some(token.to_string()), audiences: None },
            ..Default::default()
        };
        let done = api
            .create(&kube::api::PostParams::default(), &review)
            .await
            .map_err(|e| AuthError::Unavailable(format!("reviewing a bearer token: {e}")))?;
        let status = done.status.unwrap_or_default();
        if status.authenticated != Some(true) {
            return Ok(None);
        }
        let u = status.user.unwrap_or_default();
        Ok(Some(Identity {
            user: u.username.unwrap_or_default(),
            uid: u.uid.unwrap_or_default(),
            groups: u.groups.unwrap_or_default(),
            extra: u.extra.unwrap_or_default().into_iter().collect(),
        }))
    }

    async fn allowed(&self, id: &Identity, attrs: &Attributes) -> Result<bool, AuthError> {
        use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
        let api: kube::Api<SubjectAccessReview> = kube::Api::all(self.client.clone());
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(id.user.clone()),
                uid: Some(id.uid.clone()).filter(|u| !u.is_empty()),
                groups: Some(id.groups.clone()),
                extra: Some(id.extra.clone().into_iter().collect()).filter(|e: &BTreeMap<_, _>| !e.is_empty()),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(attrs.verb.to_string()),
                    resource: Some("nodes".into()),
                    subresource: Some(attrs.subresource.to_string()),
                    name: Some(attrs.node.clone()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let done = api
            .create(&kube::api::PostParams::default(), &review)
            .await
            .map_err(|e| AuthError::Unavailable(format!("authorizing a kubelet request: {e}")))?;
        Ok(done.status.is_some_and(|s| s.allowed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn cert(cn: &str, orgs: &[&str]) -> Vec<u8> {
        let mut p = rcgen::CertificateParams::default();
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name.push(rcgen::DnType::CommonName, cn);
        for o in orgs {
            p.distinguished_name.push(rcgen::DnType::OrganizationName, *o);
        }
        let key = rcgen::KeyPair::generate().expect("key");
        p.self_signed(&key).expect("cert").der().to_vec()
    }

    /// A stand-in API server: `alice-token` is alice; alice and the API server's client may use
    /// `nodes/proxy`; everyone may read `nodes/metrics`.
    #[derive(Default)]
    struct Fake {
        reviews: AtomicUsize,
        checks: AtomicUsize,
    }

    #[async_trait::async_trait]
    impl Delegate for Fake {
        async fn review_token(&self, token: &str) -> Result<Option<Identity>, AuthError> {
            self.reviews.fetch_add(1, Ordering::SeqCst);
            Ok((token == "alice-token").then(|| Identity {
                user: "alice".into(),
                uid: "u1".into(),
                groups: vec!["system:authenticated".into()],
                extra: BTreeMap::new(),
            }))
        }
        async fn allowed(&self, id: &Identity, attrs: &Attributes) -> Result<bool, AuthError> {
            self.checks.fetch_add(1, Ordering::SeqCst);
            Ok(attrs.subresource == "metrics" || id.user == "alice" || id.user == APISERVER_KUBELET_CLIENT)
        }
    }

    fn attrs(verb: &'static str, subresource: &'static str) -> Attributes {
        Attributes { verb, subresource, node: "n1".into() }
    }

    #[tokio::test]
    async fn certificates_and_reviewed_tokens_authenticate_and_the_api_server_authorizes() {
        let fake = Arc::new(Fake::default());
        let a = Authorizer::new(fake.clone());
        let api = a.authenticate(&[cert(APISERVER_KUBELET_CLIENT, &[])], None).await.expect("certificate");
        assert_eq!(api.user, APISERVER_KUBELET_CLIENT);
        assert!(api.groups.contains(&"system:authenticated".to_string()));
        assert_eq!(a.authorize(&api, &attrs("get", "proxy")).await, Ok(()));
        let alice = a.authenticate(&[], Some("Bearer alice-token")).await.expect("token");
        assert_eq!((alice.user.as_str(), alice.uid.as_str()), ("alice", "u1"));
        assert_eq!(a.authorize(&alice, &attrs("create", "proxy")).await, Ok(()));
        let bob = a.authenticate(&[cert("bob", &["devs"])], None).await.expect("bob");
        let err = a.authorize(&bob, &attrs("create", "proxy")).await.expect_err("bob is not allowed");
        assert_eq!(err.to_string(), "Forbidden (user=bob, verb=create, resource=nodes, subresource=proxy)");
        assert_eq!(a.authorize(&bob, &attrs("get", "metrics")).await, Ok(()));
        // Anonymous and unknown tokens: 401.
        assert_eq!(a.authenticate(&[], None).await, Err(AuthError::Unauthenticated));
        assert_eq!(a.authenticate(&[], Some("Bearer nope")).await, Err(AuthError::Unauthenticated));
        assert_eq!(a.authenticate(&[b"junk".to_vec()], None).await, Err(AuthError::Unauthenticated));
        // Answers are cached: asking again asks the API server nothing.
        let (reviews, checks) = (fake.reviews.load(Ordering::SeqCst), fake.checks.load(Ordering::SeqCst));
        a.authenticate(&[], Some("Bearer alice-token")).await.expect("cached");
        a.authenticate(&[], Some("Bearer nope")).await.expect_err("cached");
        a.authorize(&bob, &attrs("create", "proxy")).await.expect_err("cached");
        assert_eq!((fake.reviews.load(Ordering::SeqCst), fake.checks.load(Ordering::SeqCst)), (reviews, checks));
    }

    #[test]
    fn paths_map_to_upstreams_subresources() {
        for (path, sub) in [
            ("/stats/summary", "stats"),
            ("/metrics/resource", "metrics"),
            ("/metrics", "metrics"),
            ("/logs/syslog", "log"),
            ("/spec/", "spec"),
            ("/containerLogs/ns/p/c", "proxy"),
            ("/exec/ns/p/c", "proxy"),
            ("/pods", "proxy"),
        ] {
            assert_eq!(subresource_of(path), sub, "{path}");
        }
    }
}
