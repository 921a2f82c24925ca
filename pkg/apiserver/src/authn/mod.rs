//! Request authentication beyond client certificates: bearer tokens, tried in upstream's order
//! by every [`Token`] authenticator until one recognises the token: the static token file
//! ([`token_file`], `--token-auth-file`), ServiceAccount tokens, bootstrap tokens
//! ([`bootstrap`]) and OpenID Connect ID tokens ([`oidc`], from the `--oidc-*` flags or the
//! issuers of `--authentication-config`, [`authentication_config`]). `TokenReview` asks the same
//! authenticators, with the audiences the review names.
//!
//! As upstream, a bearer token that no authenticator recognises is refused (401), not treated as
//! anonymous; every authenticated token user is in `system:authenticated`; and authenticators
//! that know nothing of audiences (all but ServiceAccount tokens) answer only when the audiences
//! asked for include one of the API server's own, which they then report.

pub mod authentication_config;
pub mod bootstrap;
pub mod oidc;
pub mod token_file;

use crate::auth::{AuthError, Authenticator, Credentials, UserInfo, X509Authenticator};
use futures::future::BoxFuture;
use std::path::PathBuf;
use std::sync::Arc;

/// What a token authenticator recognised: the user and the audiences the token is good for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenResponse {
    pub user: UserInfo,
    pub audiences: Vec<String>,
}

/// Authenticates bearer tokens (upstream's `authenticator.Token`): `Ok(None)` is "not a token
/// of mine"; an error is "mine, but invalid".
pub trait Token: Send + Sync {
    /// `audiences`: the audiences the caller asks for (the API server's own for requests).
    fn authenticate_token<'a>(
        &'a self,
        token: &'a str,
        audiences: &'a [String],
    ) -> BoxFuture<'a, Result<Option<TokenResponse>, AuthError>>;
}

/// A token authenticator that knows nothing of audiences (upstream's
/// `WrapAudienceAgnosticToken`): it answers only for the API server's own audiences.
pub struct AudienceAgnostic<T> {
    pub api_audiences: Vec<String>,
    pub inner: T,
}

/// Authenticators whose users do not depend on audiences.
pub trait UserToken: Send + Sync {
    fn user<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Option<UserInfo>, AuthError>>;
}

impl<T: UserToken> Token for AudienceAgnostic<T> {
    fn authenticate_token<'a>(
        &'a self,
        token: &'a str,
        audiences: &'a [String],
    ) -> BoxFuture<'a, Result<Option<TokenResponse>, AuthError>> {
        Box::pin(async move {
            let shared: Vec<String> = self.api_audiences.iter().filter(|a| audiences.contains(a)).cloned().collect();
            if shared.is_empty() {
                return Ok(None);
            }
            Ok(self.inner.user(token).await?.map(|user| TokenResponse { user, audiences: shared }))
        })
    }
}

/// ServiceAccount tokens of this API server (audience-aware: a token is good for the audiences
/// it was issued for).
impl Token for crate::serviceaccount::TokenAuthenticator {
    fn authenticate_token<'a>(
        &'a self,
        token: &'a str,
        audiences: &'a [String],
    ) -> BoxFuture<'a, Result<Option<TokenResponse>, AuthError>> {
        Box::pin(async move {
            if !self.tokens.is_ours(token) {
                return Ok(None);
            }
            let user = self.review(token, audiences)?;
            let token_audiences: Vec<String> = crate::serviceaccount::jwt::unverified_claims(token)
                .and_then(|c| serde_json::from_value::<crate::serviceaccount::claims::Claims>(c).ok())
                .map(|c| c.aud.into_iter().filter(|a| audiences.contains(a)).collect())
                .unwrap_or_default();
            Ok(Some(TokenResponse { user, audiences: token_audiences }))
        })
    }
}

/// The bearer token authenticators in order, and the API server's audiences.
pub struct Tokens {
    pub authenticators: Vec<Box<dyn Token>>,
    pub api_audiences: Vec<String>,
}

/// Why a bearer token was refused (upstream's aggregate: `invalid bearer token`, then what the
/// authenticators that recognised it said).
#[derive(Debug)]
pub struct Refused(pub Vec<AuthError>);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = vec!["invalid bearer token".to_string()];
        parts.extend(self.0.iter().map(|e| match e {
            AuthError::InvalidToken(m) => m.clone(),
            other => other.to_string(),
        }));
        if parts.len() == 1 {
            f.write_str(&parts[0])
        } else {
            write!(f, "[{}]", parts.join(", "))
        }
    }
}

/// Adds `system:authenticated` unless the user is already in it (or in
/// `system:unauthenticated`), as upstream's `AuthenticatedGroupAdder`.
pub fn with_authenticated_group(mut user: UserInfo) -> UserInfo {
    if !user.groups.iter().any(|g| g == "system:authenticated" || g == "system:unauthenticated") {
        user.groups.push("system:authenticated".into());
    }
    user
}

impl Tokens {
    /// The first authenticator that recognises `token` for `audiences`; `Err` when none does.
    pub async fn review(&self, token: &str, audiences: &[String]) -> Result<TokenResponse, Refused> {
        let mut errors = Vec::new();
        for a in &self.authenticators {
            match a.authenticate_token(token, audiences).await {
                Ok(Some(mut r)) => {
                    r.user = with_authenticated_group(r.user);
                    return Ok(r);
                }
                Ok(None) => {}
                Err(e) => errors.push(e),
            }
        }
        Err(Refused(errors))
    }
}

/// Who a request is: its verified client certificate, else its bearer token.
pub struct RequestAuthenticator {
    pub x509: X509Authenticator,
    pub tokens: Tokens,
}

/// The token of an `Authorization: Bearer <token>` header; `None` for other schemes.
pub fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

impl RequestAuthenticator {
    /// `Ok(None)`: no credentials at all (anonymous).
    pub async fn authenticate(&self, creds: &Credentials<'_>) -> Result<Option<UserInfo>, AuthError> {
        if let Some(u) = self.x509.authenticate(creds)? {
            return Ok(Some(u));
        }
        let Some(token) = creds.authorization_header.and_then(bearer_token) else { return Ok(None) };
        match self.tokens.review(token, &self.tokens.api_audiences).await {
            Ok(r) => Ok(Some(r.user)),
            Err(refused) => Err(AuthError::InvalidToken(refused.to_string())),
        }
    }
}

/// How `k1s server` authenticates besides client certificates and ServiceAccount tokens, as
/// flags give it; [`Options::load`] reads and checks it once, at start.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `--token-auth-file`.
    pub token_auth_file: Option<PathBuf>,
    /// `--oidc-*`; `None` without `--oidc-issuer-url`.
    pub oidc: Option<oidc::Options>,
    /// `--authentication-config`: JWT issuers (not with `--oidc-*`).
    pub authentication_config: Option<PathBuf>,
}

/// [`Options`] read and checked.
#[derive(Clone, Debug, Default)]
pub struct Loaded {
    pub token_file: Option<Arc<token_file::TokenFile>>,
    /// One per JWT issuer.
    pub oidc: Vec<oidc::Settings>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(transparent)]
    TokenFile(#[from] token_file::TokenFileError),
    #[error(transparent)]
    Oidc(#[from] oidc::ConfigError),
    #[error(transparent)]
    AuthenticationConfig(#[from] authentication_config::AuthenticationConfigError),
    #[error("--authentication-config and the --oidc-* flags are mutually exclusive")]
    Exclusive,
}

impl Options {
    /// Reads the token file and the OIDC CA, and checks every setting.
    pub fn load(&self) -> Result<Loaded, ConfigError> {
        let token_file = match &self.token_auth_file {
            Some(path) => Some(Arc::new(token_file::TokenFile::load(path)?)),
            None => None,
        };
        let oidc = match (&self.oidc, &self.authentication_config) {
            (Some(_), Some(_)) => return Err(ConfigError::Exclusive),
            (Some(o), None) => vec![o.settings()?],
            (None, Some(path)) => authentication_config::load(path)?,
            (None, None) => Vec::new(),
        };
        Ok(Loaded { token_file, oidc })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(Option<UserInfo>, bool);

    impl UserToken for Fixed {
        fn user<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Option<UserInfo>, AuthError>> {
            Box::pin(async move {
                match (&self.0, token) {
                    (Some(u), "good") => Ok(Some(u.clone())),
                    (_, "bad") if self.1 => Err(AuthError::InvalidToken("expired".into())),
                    _ => Ok(None),
                }
            })
        }
    }

    fn tokens() -> Tokens {
        let api = vec!["https://kubernetes.default.svc.cluster.local".to_string()];
        Tokens {
            authenticators: vec![
                Box::new(AudienceAgnostic { api_audiences: api.clone(), inner: Fixed(None, true) }),
                Box::new(AudienceAgnostic {
                    api_audiences: api.clone(),
                    inner: Fixed(Some(UserInfo::new("alice", &["devs"])), false),
                }),
            ],
            api_audiences: api,
        }
    }

    #[test]
    fn the_first_authenticator_that_knows_a_token_answers_with_the_api_audiences() {
        let t = tokens();
        let r = futures::executor::block_on(t.review("good", &t.api_audiences)).expect("alice");
        assert_eq!(r.user.groups, ["devs", "system:authenticated"]);
        assert_eq!(r.audiences, t.api_audiences);
        // Audiences the API server is not: audience-agnostic tokens are not good for them.
        let vault = vec!["vault".to_string()];
        let e = futures::executor::block_on(t.review("good", &vault)).expect_err("not for vault");
        assert_eq!(e.to_string(), "invalid bearer token");
        let e = futures::executor::block_on(t.review("bad", &t.api_audiences)).expect_err("bad");
        assert_eq!(e.to_string(), "[invalid bearer token, expired]");
    }

    #[test]
    fn only_bearer_schemes_carry_tokens() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer  abc "), Some("abc"));
        assert_eq!(bearer_token("Basic YTpi"), None);
        assert_eq!(bearer_token("Bearer "), None);
    }
}
