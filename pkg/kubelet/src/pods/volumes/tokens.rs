//! ServiceAccount tokens for projected volumes, cached per (pod, account, audience, lifetime)
//! and refreshed as upstream's token manager does: when 80% of the lifetime has passed or
//! the token is older than 24 hours. A refresh that fails keeps serving the cached token
//! while it is still valid.

use super::source::{ObjectSource, SourceError};
use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use std::collections::HashMap;
use std::sync::Mutex;

const MAX_TTL: SignedDuration = SignedDuration::from_hours(24);

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct TokenKey {
    namespace: String,
    service_account: String,
    audience: Option<String>,
    expiration_seconds: i64,
    pod_uid: String,
}

#[derive(Clone, Debug)]
struct CachedToken {
    token: String,
    expires: Timestamp,
    ttl_seconds: i64,
}

/// Whether a token expiring at `expires` with a lifetime of `ttl_seconds` should be renewed.
pub fn needs_refresh(now: Timestamp, expires: Timestamp, ttl_seconds: i64) -> bool {
    let ttl = SignedDuration::from_secs(ttl_seconds);
    let issued = expires.checked_sub(ttl).unwrap_or(Timestamp::MIN);
    if issued.checked_add(MAX_TTL).is_ok_and(|t| now > t) {
        return true;
    }
    let margin = SignedDuration::from_secs(ttl_seconds * 20 / 100);
    expires.checked_sub(margin).is_ok_and(|t| now > t)
}

/// What a projected `serviceAccountToken` source asks for.
pub struct TokenSpec<'a> {
    pub namespace: &'a str,
    pub service_account: &'a str,
    pub pod_name: &'a str,
    pub pod_uid: &'a str,
    pub audience: Option<&'a str>,
    pub expiration_seconds: i64,
}

/// Tokens already issued to pods on this node.
#[derive(Default)]
pub struct TokenCache {
    entries: Mutex<HashMap<TokenKey, CachedToken>>,
}

impl TokenCache {
    /// A valid token for `spec`, from the cache or a new TokenRequest.
    pub async fn get(&self, source: &dyn ObjectSource, spec: &TokenSpec<'_>) -> Result<String, SourceError> {
        let key = TokenKey {
            namespace: spec.namespace.to_string(),
            service_account: spec.service_account.to_string(),
            audience: spec.audience.map(str::to_string),
            expiration_seconds: spec.expiration_seconds,
            pod_uid: spec.pod_uid.to_string(),
        };
        let now = Timestamp::now();
        let cached = self.entries.lock().unwrap_or_else(|p| p.into_inner()).get(&key).cloned();
        if let Some(c) = &cached {
            if !needs_refresh(now, c.expires, c.ttl_seconds) {
                return Ok(c.token.clone());
            }
        }
        let request = TokenRequest {
            spec: TokenRequestSpec {
                audiences: spec.audience.map(|a| vec![a.to_string()]).unwrap_or_default(),
                expiration_seconds: Some(spec.expiration_seconds),
                bound_object_ref: Some(BoundObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Pod".into()),
                    name: Some(spec.pod_name.to_string()),
                    uid: Some(spec.pod_uid.to_string()),
                }),
            },
            ..Default::default()
        };
        match source.service_account_token(spec.namespace, spec.service_account, &request).await {
            Ok(answer) => {
                let Some(status) = answer.status else {
                    return Err(SourceError::Api { message: "the token request was answered without a token".into() });
                };
                let ttl_seconds = answer.spec.expiration_seconds.unwrap_or(spec.expiration_seconds);
                let entry =
                    CachedToken { token: status.token.clone(), expires: status.expiration_timestamp.0, ttl_seconds };
                self.entries.lock().unwrap_or_else(|p| p.into_inner()).insert(key, entry);
                Ok(status.token)
            }
            Err(e) => match cached {
                Some(c) if now < c.expires => {
                    tracing::warn!(error = %e, namespace = spec.namespace, serviceaccount = spec.service_account, "token refresh failed; keeping the current token");
                    Ok(c.token)
                }
                _ => Err(e),
            },
        }
    }

    /// Forgets the tokens of a pod.
    pub fn forget_pod(&self, pod_uid: &str) {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).retain(|k, _| k.pod_uid != pod_uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::volumes::MemorySource;

    fn at(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    #[test]
    fn refresh_after_eighty_percent_of_the_lifetime_or_a_day() {
        let exp = at("2025-01-01T01:00:00Z");
        assert!(!needs_refresh(at("2025-01-01T00:00:01Z"), exp, 3600));
        assert!(!needs_refresh(at("2025-01-01T00:47:59Z"), exp, 3600));
        assert!(needs_refresh(at("2025-01-01T00:48:01Z"), exp, 3600));
        // A two-day token is renewed after a day.
        let long = at("2025-01-03T00:00:00Z");
        assert!(!needs_refresh(at("2025-01-01T23:00:00Z"), long, 2 * 86400));
        assert!(needs_refresh(at("2025-01-02T00:00:01Z"), long, 2 * 86400));
    }

    #[tokio::test]
    async fn cached_tokens_are_reused_and_kept_when_refresh_fails() {
        let src = MemorySource::default();
        let cache = TokenCache::default();
        let spec = TokenSpec {
            namespace: "ns",
            service_account: "default",
            pod_name: "p",
            pod_uid: "u1",
            audience: Some("api"),
            expiration_seconds: 3600,
        };
        let first = cache.get(&src, &spec).await.expect("token");
        assert_eq!(cache.get(&src, &spec).await.expect("token"), first);
        let reqs = src.token_requests();
        assert_eq!(reqs.len(), 1);
        assert_eq!(reqs[0].spec.audiences, vec!["api".to_string()]);
        let bound = reqs[0].spec.bound_object_ref.as_ref().expect("bound");
        assert_eq!(
            (bound.kind.as_deref(), bound.name.as_deref(), bound.uid.as_deref()),
            (Some("Pod"), Some("p"), Some("u1"))
        );

        cache.forget_pod("u1");
        src.refuse_tokens(Some("serviceaccounts \"default\" is forbidden"));
        let err = cache.get(&src, &spec).await.expect_err("refused");
        assert_eq!(err.to_string(), "serviceaccounts \"default\" is forbidden");
    }
}
