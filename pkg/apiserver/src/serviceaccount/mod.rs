//! ServiceAccount tokens end to end: the signing key and JWTs ([`jwt`]), their claims
//! ([`claims`]), the `serviceaccounts/<name>/token` subresource ([`token_request`]), bearer
//! token authentication ([`TokenAuthenticator`]), the `ServiceAccount` admission plugin
//! ([`admission`]) and the OpenID discovery documents.

pub mod admission;
pub mod claims;
pub mod jwt;
pub mod token_request;

use crate::auth::{AuthError, Authenticator, Credentials, UserInfo};
use crate::registry::Registry;
use claims::{ClaimsError, ObjectGetter, ServiceAccountInfo};
use jwt::{JwtError, Signer};
use k1s_store::Store;
use serde_json::{json, Value};
use std::sync::Arc;

/// How tokens are issued: the key, the issuer (`iss`) and the API server's own audiences.
pub struct TokenConfig {
    /// PKCS#8 PEM ECDSA P-256 private key.
    pub signing_key_pem: String,
    /// `https://kubernetes.default.svc.<cluster-domain>`.
    pub issuer: String,
    /// Audiences that identify this API server; the first is the default of TokenRequests.
    pub api_audiences: Vec<String>,
}

impl TokenConfig {
    /// Upstream's defaults for a cluster domain: issuer and audience
    /// `https://kubernetes.default.svc.<domain>`.
    pub fn for_cluster_domain(signing_key_pem: String, cluster_domain: &str) -> TokenConfig {
        let issuer = format!("https://kubernetes.default.svc.{}", cluster_domain.trim_end_matches('.'));
        TokenConfig { signing_key_pem, api_audiences: vec![issuer.clone()], issuer }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error(transparent)]
    Jwt(#[from] JwtError),
    #[error(transparent)]
    Claims(#[from] ClaimsError),
}

/// Issues and validates ServiceAccount tokens.
pub struct Tokens {
    pub signer: Signer,
    pub issuer: String,
    pub api_audiences: Vec<String>,
}

impl Tokens {
    pub fn new(config: &TokenConfig) -> Result<Tokens, JwtError> {
        Ok(Tokens {
            signer: Signer::from_pem(&config.signing_key_pem)?,
            issuer: config.issuer.clone(),
            api_audiences: config.api_audiences.clone(),
        })
    }

    /// Whether `token` claims to come from this issuer (unverified): other JWTs are not ours.
    pub fn is_ours(&self, token: &str) -> bool {
        jwt::unverified_claims(token).and_then(|c| c.get("iss").and_then(Value::as_str).map(|i| i == self.issuer))
            == Some(true)
    }

    /// Verifies `token` for `audiences` at `now` (unix seconds) against the objects it names.
    pub fn validate(
        &self,
        token: &str,
        audiences: &[String],
        getter: &dyn ObjectGetter,
        now: i64,
    ) -> Result<ServiceAccountInfo, TokenError> {
        let claims = claims::parse(self.signer.verify(token)?)?;
        claims::check_public(&claims, &self.issuer, audiences, now)?;
        Ok(claims::check_objects(&claims, getter, now)?)
    }

    /// `/.well-known/openid-configuration`; `jwks_uri` is served at `external` (`host:port`).
    pub fn openid_configuration(&self, external: &str) -> Value {
        json!({
            "issuer": self.issuer,
            "jwks_uri": format!("https://{external}/openid/v1/jwks"),
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["ES256"],
        })
    }

    /// `/openid/v1/jwks`.
    pub fn jwks(&self) -> Value {
        json!({"keys": [self.signer.jwk()]})
    }
}

pub fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

/// Objects straight from the store (core/v1 resources).
pub struct StoreObjects(pub Store);

impl ObjectGetter for StoreObjects {
    fn get_object(&self, resource: &str, namespace: Option<&str>, name: &str) -> Result<Option<Value>, String> {
        let info =
            k1s_api::resources::find("", "v1", resource).ok_or_else(|| format!("unknown resource {resource}"))?;
        let key = Registry::key(info, namespace, name);
        match self.0.get(&key).map_err(|e| e.to_string())? {
            Some(kv) => crate::object::from_storage(&kv.value, kv.mod_revision)
                .map(Some)
                .ok_or_else(|| format!("undecodable {resource} {name}")),
            None => Ok(None),
        }
    }
}

/// `Authorization: Bearer <jwt>` with a ServiceAccount token of this API server.
pub struct TokenAuthenticator {
    pub tokens: Arc<Tokens>,
    pub objects: Arc<dyn ObjectGetter>,
}

impl TokenAuthenticator {
    /// The identity a token grants (TokenReview and request authentication share this).
    pub fn review(&self, token: &str, audiences: &[String]) -> Result<UserInfo, AuthError> {
        if !self.tokens.is_ours(token) {
            return Err(AuthError::InvalidToken("not a service account token of this issuer".into()));
        }
        self.tokens
            .validate(token, audiences, self.objects.as_ref(), unix_now())
            .map(|info| info.user_info())
            .map_err(|e| AuthError::InvalidToken(e.to_string()))
    }
}

impl Authenticator for TokenAuthenticator {
    fn authenticate(&self, creds: &Credentials<'_>) -> Result<Option<UserInfo>, AuthError> {
        let Some(header) = creds.authorization_header else { return Ok(None) };
        let mut parts = header.trim().splitn(2, ' ');
        let (Some(scheme), Some(token)) = (parts.next(), parts.next()) else { return Ok(None) };
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Ok(None);
        }
        let token = token.trim();
        if token.is_empty() {
            return Ok(None);
        }
        self.review(token, &self.tokens.api_audiences).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::claims::{Binding, NewToken, ObjectRef};
    use super::*;

    struct OneAccount;

    impl ObjectGetter for OneAccount {
        fn get_object(&self, resource: &str, ns: Option<&str>, name: &str) -> Result<Option<Value>, String> {
            Ok((resource == "serviceaccounts" && ns == Some("ns") && name == "sa")
                .then(|| json!({"metadata": {"name": "sa", "uid": "sa-uid"}})))
        }
    }

    fn tokens() -> Tokens {
        let config = TokenConfig::for_cluster_domain(jwt::tests::test_key_pem(), "cluster.local");
        Tokens::new(&config).expect("tokens")
    }

    fn issue(t: &Tokens, now: i64, audiences: Vec<String>) -> String {
        let claims = NewToken {
            issuer: &t.issuer,
            namespace: "ns",
            service_account: ObjectRef { name: "sa".into(), uid: "sa-uid".into() },
            binding: Binding::default(),
            audiences,
            now,
            expiration_seconds: 600,
            warn_after_seconds: None,
            jti: "j".into(),
        }
        .claims();
        t.signer.sign(&serde_json::to_value(claims).expect("json")).expect("sign")
    }

    #[test]
    fn issued_tokens_validate_until_they_expire_and_only_for_their_audience() {
        let t = tokens();
        assert_eq!(t.issuer, "https://kubernetes.default.svc.cluster.local");
        let now = 1_000_000;
        let token = issue(&t, now, t.api_audiences.clone());
        assert!(t.is_ours(&token));
        let info = t.validate(&token, &t.api_audiences, &OneAccount, now + 1).expect("valid");
        assert_eq!(info.user_info().name, "system:serviceaccount:ns:sa");
        assert!(matches!(
            t.validate(&token, &t.api_audiences, &OneAccount, now + 600 + claims::LEEWAY_SECONDS),
            Err(TokenError::Claims(ClaimsError::Expired))
        ));
        let other = issue(&t, now, vec!["vault".into()]);
        assert!(matches!(
            t.validate(&other, &t.api_audiences, &OneAccount, now),
            Err(TokenError::Claims(ClaimsError::Audience { .. }))
        ));
        let tampered = format!("{}x", &token[..token.len() - 1]);
        assert!(t.validate(&tampered, &t.api_audiences, &OneAccount, now).is_err());
        // Another API server's key: same issuer, wrong signature.
        let stranger = tokens();
        assert!(matches!(
            stranger.validate(&token, &stranger.api_audiences, &OneAccount, now),
            Err(TokenError::Jwt(JwtError::Signature))
        ));
    }

    #[test]
    fn the_authenticator_rejects_foreign_and_garbage_bearer_tokens_and_ignores_other_schemes() {
        let t = Arc::new(tokens());
        let auth = TokenAuthenticator { tokens: t.clone(), objects: Arc::new(OneAccount) };
        static NO_CERTIFICATES: std::sync::LazyLock<crate::auth::Peer> = std::sync::LazyLock::new(Default::default);
        fn creds(h: &str) -> Credentials<'_> {
            Credentials { peer: &NO_CERTIFICATES, authorization_header: Some(h) }
        }
        assert!(auth.authenticate(&creds("Basic YTpi")).expect("not mine").is_none());
        assert!(auth.authenticate(&creds("Bearer garbage")).is_err());
        let token = issue(&t, unix_now(), t.api_audiences.clone());
        let header = format!("Bearer {token}");
        let user = auth.authenticate(&creds(&header)).expect("valid").expect("a user");
        assert_eq!(user.groups[1], "system:serviceaccounts:ns");
    }
}
