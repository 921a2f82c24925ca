//! OpenID Connect ID tokens (upstream's `--oidc-*` flags and
//! `plugin/pkg/authenticator/token/oidc`): a JWT whose `iss` is the configured issuer is
//! verified against the issuer's keys, found through its discovery document
//! (`<issuer>/.well-known/openid-configuration` ▶ `jwks_uri`) over HTTPS (verified with
//! `--oidc-ca-file`, else the system's roots), and then must:
//! - be signed with one of `--oidc-signing-algs` (default RS256; RS/PS 256/384/512, ES256 and
//!   ES384 are supported) by a key of the set (by `kid` when the header names one);
//! - name `--oidc-client-id` in `aud`, not be past `exp` and not before `nbf` (five minutes of
//!   skew allowed);
//! - hold the username claim as a string (`--oidc-username-claim`, default `sub`; when it is
//!   `email`, an `email_verified` claim, if present, must be true), the groups claim (if
//!   configured and present) as a string or a list of strings, and every `--oidc-required-claim`
//!   with its value.
//!
//! The user is the username claim after `--oidc-username-prefix` (by default the issuer URL and
//! `#`, except for the `email` claim; `-` for none), in the groups after
//! `--oidc-groups-prefix`. An issuer of `--authentication-config` ([`Settings`] from
//! [`super::authentication_config`]) may also map claims with CEL expressions, name several
//! audiences and check CEL rules on the claims and on the user.
//!
//! Keys are fetched in the background from the start (retried every 10 s until the issuer
//! answers, as upstream's authenticator initialises asynchronously), refreshed every
//! [`REFRESH_EVERY`], and refetched at once when a token names a key the set does not hold (at
//! most once per [`MIN_REFETCH`], so that tokens with made-up key ids cannot flood the issuer).

use super::UserToken;
use crate::auth::{AuthError, UserInfo};
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine as _;
use bytes::Bytes;
use futures::future::BoxFuture;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::rt::TokioIo;
use ring::signature;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How often the key set is refetched while all is well.
pub const REFRESH_EVERY: Duration = Duration::from_secs(15 * 60);
/// How often the discovery is retried until the issuer first answers.
pub const RETRY_EVERY: Duration = Duration::from_secs(10);
/// The least time between two fetches caused by unknown key ids.
pub const MIN_REFETCH: Duration = Duration::from_secs(10);
/// Allowed clock skew for `nbf` (go-oidc's).
const NBF_LEEWAY_SECONDS: i64 = 5 * 60;
/// A discovery document or key set larger than this is refused.
const MAX_DOCUMENT: usize = 1024 * 1024;
const FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// The signing algorithms upstream allows in `--oidc-signing-algs`, and whether k1s verifies
/// them (ES512, P-521, is not available in the crypto library k1s uses).
const ALGORITHMS: &[(&str, bool)] = &[
    ("RS256", true),
    ("RS384", true),
    ("RS512", true),
    ("ES256", true),
    ("ES384", true),
    ("ES512", false),
    ("PS256", true),
    ("PS384", true),
    ("PS512", true),
];

/// The `--oidc-*` flags as given.
#[derive(Clone, Debug, Default)]
pub struct Options {
    pub issuer_url: String,
    pub client_id: String,
    /// Default `sub`.
    pub username_claim: Option<String>,
    /// `None`: upstream's default (the issuer URL and `#`, except for `email`); `-`: none.
    pub username_prefix: Option<String>,
    pub groups_claim: Option<String>,
    pub groups_prefix: Option<String>,
    pub ca_file: Option<PathBuf>,
    /// `claim=value` pairs, already split.
    pub required_claims: Vec<(String, String)>,
    /// Default `RS256`.
    pub signing_algs: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("--oidc-issuer-url {0:?} is not a URL")]
    IssuerUrl(String),
    #[error("--oidc-issuer-url {url:?} has invalid scheme {scheme:?}, require 'https'")]
    IssuerScheme { url: String, scheme: String },
    #[error("--oidc-issuer-url and --oidc-client-id must be specified together")]
    ClientId,
    #[error("--oidc-username-claim must not be empty")]
    UsernameClaim,
    #[error("--oidc-signing-algs: unsupported signing alg {0:?} (supported: RS256, RS384, RS512, ES256, ES384, PS256, PS384, PS512)")]
    SigningAlg(String),
    #[error("--oidc-required-claim: {0:?} has an empty claim name (expected claim=value)")]
    RequiredClaim(String),
    #[error("--oidc-ca-file {path}: reading it")]
    CaRead { path: PathBuf, source: std::io::Error },
    #[error("--oidc-ca-file {path}: {message}")]
    Ca { path: PathBuf, message: String },
}

/// How a user attribute comes from the claims: a claim (with a prefix, for names), or a CEL
/// expression over `claims` (`--authentication-config`).
#[derive(Clone, Debug)]
pub enum Mapping {
    Claim { claim: String, prefix: String },
    Expression(k1s_cel::Program),
}

/// A check of the claims before they are mapped: a string claim's required value, or a CEL
/// expression over `claims` that must be true (its message when it is not).
#[derive(Clone, Debug)]
pub enum ClaimRule {
    Required { claim: String, value: String },
    Expression { program: k1s_cel::Program, message: String },
}

/// One JWT issuer, checked, defaults resolved: from the `--oidc-*` flags or one `jwt` entry of
/// `--authentication-config`.
#[derive(Clone, Debug)]
pub struct Settings {
    pub issuer_url: String,
    /// Where the discovery document is, when not under the issuer URL.
    pub discovery_url: Option<String>,
    /// A token must name one of these in `aud`.
    pub audiences: Vec<String>,
    pub username: Mapping,
    pub groups: Option<Mapping>,
    pub uid: Option<Mapping>,
    /// `extra` keys and the CEL expressions of their values.
    pub extra: Vec<(String, k1s_cel::Program)>,
    pub claim_rules: Vec<ClaimRule>,
    /// CEL expressions over `user` that must be true, with their messages.
    pub user_rules: Vec<(k1s_cel::Program, String)>,
    /// PEM roots the issuer's certificate must chain to; `None`: the system's.
    pub ca_pem: Option<String>,
    pub signing_algs: Vec<String>,
}

/// Every algorithm k1s verifies (what `--authentication-config` issuers may use).
pub fn supported_algorithms() -> Vec<String> {
    ALGORITHMS.iter().filter(|(_, ok)| *ok).map(|(a, _)| a.to_string()).collect()
}

/// PEM certificates, at least one, or why not.
pub fn check_ca(pem: &str) -> Result<(), String> {
    let certs: Vec<_> = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("not PEM certificates: {e}"))?;
    if certs.is_empty() {
        return Err("holds no PEM certificate".into());
    }
    Ok(())
}

impl Options {
    /// Checks the flags and reads the CA file.
    pub fn settings(&self) -> Result<Settings, ConfigError> {
        let uri: http::Uri = self.issuer_url.parse().map_err(|_| ConfigError::IssuerUrl(self.issuer_url.clone()))?;
        let scheme = uri.scheme_str().unwrap_or_default();
        if scheme != "https" {
            return Err(ConfigError::IssuerScheme { url: self.issuer_url.clone(), scheme: scheme.to_string() });
        }
        if uri.host().is_none_or(str::is_empty) {
            return Err(ConfigError::IssuerUrl(self.issuer_url.clone()));
        }
        if self.client_id.is_empty() {
            return Err(ConfigError::ClientId);
        }
        let username_claim = self.username_claim.clone().unwrap_or_else(|| "sub".into());
        if username_claim.is_empty() {
            return Err(ConfigError::UsernameClaim);
        }
        let username_prefix = match self.username_prefix.as_deref() {
            Some("-") => String::new(),
            None | Some("") if username_claim != "email" => format!("{}#", self.issuer_url),
            None => String::new(),
            Some(p) => p.to_string(),
        };
        let signing_algs =
            if self.signing_algs.is_empty() { vec!["RS256".to_string()] } else { self.signing_algs.clone() };
        for alg in &signing_algs {
            if !ALGORITHMS.iter().any(|(a, ok)| a == alg && *ok) {
                return Err(ConfigError::SigningAlg(alg.clone()));
            }
        }
        let mut claim_rules = Vec::new();
        for (k, v) in &self.required_claims {
            if k.is_empty() {
                return Err(ConfigError::RequiredClaim(format!("{k}={v}")));
            }
            claim_rules.push(ClaimRule::Required { claim: k.clone(), value: v.clone() });
        }
        let ca_pem = match &self.ca_file {
            None => None,
            Some(path) => {
                let pem = std::fs::read_to_string(path)
                    .map_err(|source| ConfigError::CaRead { path: path.clone(), source })?;
                check_ca(&pem).map_err(|message| ConfigError::Ca { path: path.clone(), message })?;
                Some(pem)
            }
        };
        let groups = self
            .groups_claim
            .clone()
            .filter(|c| !c.is_empty())
            .map(|claim| Mapping::Claim { claim, prefix: self.groups_prefix.clone().unwrap_or_default() });
        Ok(Settings {
            issuer_url: self.issuer_url.clone(),
            discovery_url: None,
            audiences: vec![self.client_id.clone()],
            username: Mapping::Claim { claim: username_claim, prefix: username_prefix },
            groups,
            uid: None,
            extra: Vec::new(),
            claim_rules,
            user_rules: Vec::new(),
            ca_pem,
            signing_algs,
        })
    }
}

/// One verification key of the issuer.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Key {
    kid: Option<String>,
    /// The JWK's `alg`, when it names one.
    alg: Option<String>,
    public: Public,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Public {
    Rsa {
        n: Vec<u8>,
        e: Vec<u8>,
    },
    /// An uncompressed point (`04 || x || y`).
    EcP256(Vec<u8>),
    EcP384(Vec<u8>),
}

fn b64_field(jwk: &Value, name: &str) -> Option<Vec<u8>> {
    B64.decode(jwk.get(name)?.as_str()?.trim_end_matches('=')).ok()
}

/// The signing keys of a JWKS document; keys of other kinds or uses are skipped.
fn parse_jwks(doc: &Value) -> Result<Vec<Key>, String> {
    let keys = doc.get("keys").and_then(Value::as_array).ok_or("the key set has no \"keys\" list")?;
    let mut out = Vec::new();
    for jwk in keys {
        if jwk.get("use").and_then(Value::as_str).is_some_and(|u| u != "sig") {
            continue;
        }
        let public = match jwk.get("kty").and_then(Value::as_str) {
            Some("RSA") => {
                let (Some(n), Some(e)) = (b64_field(jwk, "n"), b64_field(jwk, "e")) else { continue };
                let n = n.iter().position(|b| *b != 0).map(|i| n[i..].to_vec()).unwrap_or_default();
                Public::Rsa { n, e }
            }
            Some("EC") => {
                let (Some(x), Some(y)) = (b64_field(jwk, "x"), b64_field(jwk, "y")) else { continue };
                let mut point = vec![4];
                point.extend(&x);
                point.extend(&y);
                match (jwk.get("crv").and_then(Value::as_str), x.len(), y.len()) {
                    (Some("P-256"), 32, 32) => Public::EcP256(point),
                    (Some("P-384"), 48, 48) => Public::EcP384(point),
                    _ => continue,
                }
            }
            _ => continue,
        };
        out.push(Key {
            kid: jwk.get("kid").and_then(Value::as_str).map(str::to_string),
            alg: jwk.get("alg").and_then(Value::as_str).map(str::to_string),
            public,
        });
    }
    Ok(out)
}

/// Whether `key` verifies `signature` over `message` with `alg`.
fn verify_with(key: &Key, alg: &str, message: &[u8], sig: &[u8]) -> bool {
    if key.alg.as_deref().is_some_and(|a| a != alg) {
        return false;
    }
    let rsa = |params: &'static signature::RsaParameters| match &key.public {
        Public::Rsa { n, e } => signature::RsaPublicKeyComponents { n, e }.verify(params, message, sig).is_ok(),
        _ => false,
    };
    let ec = |params: &'static signature::EcdsaVerificationAlgorithm, p384: bool| match (&key.public, p384) {
        (Public::EcP256(point), false) | (Public::EcP384(point), true) => {
            signature::UnparsedPublicKey::new(params, point).verify(message, sig).is_ok()
        }
        _ => false,
    };
    match alg {
        "RS256" => rsa(&signature::RSA_PKCS1_2048_8192_SHA256),
        "RS384" => rsa(&signature::RSA_PKCS1_2048_8192_SHA384),
        "RS512" => rsa(&signature::RSA_PKCS1_2048_8192_SHA512),
        "PS256" => rsa(&signature::RSA_PSS_2048_8192_SHA256),
        "PS384" => rsa(&signature::RSA_PSS_2048_8192_SHA384),
        "PS512" => rsa(&signature::RSA_PSS_2048_8192_SHA512),
        "ES256" => ec(&signature::ECDSA_P256_SHA256_FIXED, false),
        "ES384" => ec(&signature::ECDSA_P384_SHA384_FIXED, true),
        _ => false,
    }
}

/// A compact JWS split and decoded, nothing verified yet.
struct Jws<'a> {
    header: Value,
    claims: Value,
    signed: &'a str,
    signature: Vec<u8>,
}

fn split(token: &str) -> Option<Jws<'_>> {
    let mut parts = token.split('.');
    let (Some(h), Some(p), Some(s), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return None;
    };
    let header: Value = serde_json::from_slice(&B64.decode(h).ok()?).ok()?;
    let claims: Value = serde_json::from_slice(&B64.decode(p).ok()?).ok()?;
    if !header.is_object() || !claims.is_object() {
        return None;
    }
    Some(Jws { header, claims, signed: &token[..h.len() + 1 + p.len()], signature: B64.decode(s).ok()? })
}

/// Verifies `token` at `now` against the key set document `jwks` as [`Oidc`] does, without
/// fetching anything: `Ok(None)` when another issuer made it. For checks of the token handling
/// alone (the fuzz targets); the server's authenticator fetches and refreshes the keys.
pub fn verify_offline(settings: &Settings, jwks: &Value, token: &str, now: i64) -> Result<Option<UserInfo>, String> {
    let Some((jws, user)) = read_token(settings, token, now)? else { return Ok(None) };
    let keys = parse_jwks(jwks)?;
    match signed_by(&keys, &jws) {
        Some(true) => Ok(Some(user)),
        _ => Err("oidc: verify token: failed to verify signature".into()),
    }
}

/// The token's user, once its issuer, claims and algorithm are checked (not yet its
/// signature): `Ok(None)` when another issuer made it.
fn read_token<'t>(settings: &Settings, token: &'t str, now: i64) -> Result<Option<(Jws<'t>, UserInfo)>, String> {
    let Some(jws) = split(token) else { return Ok(None) };
    if jws.claims.get("iss").and_then(Value::as_str) != Some(settings.issuer_url.as_str()) {
        return Ok(None);
    }
    let user = user_from_claims(settings, &jws.claims, now)?;
    let alg = jws.header.get("alg").and_then(Value::as_str).unwrap_or_default();
    if !settings.signing_algs.iter().any(|a| a == alg) {
        return Err(format!(
            "oidc: id token signed with unsupported algorithm, expected {:?} got {alg:?}",
            settings.signing_algs
        ));
    }
    Ok(Some((jws, user)))
}

/// Whether one of `keys` (those with the token's `kid`, when it names one) signed the token;
/// `None` when no key fits.
fn signed_by(keys: &[Key], jws: &Jws<'_>) -> Option<bool> {
    let alg = jws.header.get("alg").and_then(Value::as_str).unwrap_or_default();
    let kid = jws.header.get("kid").and_then(Value::as_str);
    let candidates: Vec<&Key> = keys.iter().filter(|k| kid.is_none() || k.kid.as_deref() == kid).collect();
    if candidates.is_empty() {
        return None;
    }
    Some(candidates.iter().any(|k| verify_with(k, alg, jws.signed.as_bytes(), &jws.signature)))
}

fn rfc3339(s: i64) -> String {
    jiff::Timestamp::from_second(s).map(|t| t.to_string()).unwrap_or_else(|_| s.to_string())
}

/// The JSON claim `name` as a whole number of seconds (JSON numbers may carry a fraction).
fn seconds(claims: &Value, name: &str) -> Option<i64> {
    claims.get(name).and_then(|v| v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)))
}

fn cel_claims(claims: &Value) -> k1s_cel::Activation {
    let mut vars = k1s_cel::Activation::new();
    vars.bind_json("claims", claims);
    vars
}

/// A string claim (`Ok(None)` when absent).
fn string_claim(claims: &Value, claim: &str, what: &str) -> Result<Option<String>, String> {
    match claims.get(claim) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(format!("oidc: parse {what} claims {claim:?}: {other} is not a string")),
    }
}

/// A string or a list of strings, from a claim or an expression's result.
fn strings(value: &Value, what: &str) -> Result<Vec<String>, String> {
    match value {
        Value::Null => Ok(Vec::new()),
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(a) => a
            .iter()
            .map(|g| g.as_str().map(str::to_string).ok_or_else(|| format!("oidc: parse {what}: {g} is not a string")))
            .collect(),
        other => Err(format!("oidc: parse {what}: {other} is neither a string nor a list of strings")),
    }
}

fn eval_json(program: &k1s_cel::Program, vars: &k1s_cel::Activation, what: &str) -> Result<Value, String> {
    program
        .eval_json(vars, &mut k1s_cel::CostBudget::default())
        .map_err(|e| format!("oidc: error evaluating {what} expression: {e}"))
}

/// The checks of the token's claims other than its signature, as go-oidc then upstream's
/// authenticator make them (validation rules, mappings, user validation); gives the user.
fn user_from_claims(s: &Settings, claims: &Value, now: i64) -> Result<UserInfo, String> {
    let iss = claims.get("iss").and_then(Value::as_str).unwrap_or_default();
    if iss != s.issuer_url {
        return Err(format!("oidc: id token issued by a different provider, expected {:?} got {iss:?}", s.issuer_url));
    }
    let audiences: Vec<&str> = match claims.get("aud") {
        Some(Value::String(a)) => vec![a.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !s.audiences.iter().any(|a| audiences.contains(&a.as_str())) {
        return Err(match &s.audiences[..] {
            [one] => format!("oidc: expected audience {one:?} got {audiences:?}"),
            many => format!("oidc: expected audience in {many:?} got {audiences:?}"),
        });
    }
    let exp = seconds(claims, "exp").unwrap_or(0);
    if exp < now {
        return Err(format!("oidc: token is expired (Token Expiry: {})", rfc3339(exp)));
    }
    if let Some(nbf) = seconds(claims, "nbf") {
        if now + NBF_LEEWAY_SECONDS < nbf {
            return Err(format!(
                "oidc: current time {} before the nbf (not before) time: {}",
                rfc3339(now),
                rfc3339(nbf)
            ));
        }
    }
    let uses_cel = matches!(s.username, Mapping::Expression(_))
        || matches!(s.groups, Some(Mapping::Expression(_)))
        || matches!(s.uid, Some(Mapping::Expression(_)))
        || !s.extra.is_empty()
        || s.claim_rules.iter().any(|r| matches!(r, ClaimRule::Expression { .. }));
    let vars = if uses_cel { cel_claims(claims) } else { k1s_cel::Activation::new() };
    for rule in &s.claim_rules {
        match rule {
            ClaimRule::Required { claim, value } => match claims.get(claim) {
                None => return Err(format!("oidc: required claim {claim} not present in ID token")),
                Some(Value::String(got)) if got == value => {}
                Some(Value::String(got)) => {
                    return Err(format!(
                        "oidc: required claim {claim} value does not match. Got = {got}, want = {value}"
                    ))
                }
                Some(other) => return Err(format!("oidc: parse claim {claim}: {other} is not a string")),
            },
            ClaimRule::Expression { program, message } => {
                let ok = program
                    .eval_bool(&vars, &mut k1s_cel::CostBudget::default())
                    .map_err(|e| format!("oidc: error evaluating claim validation expression: {e}"))?;
                if !ok {
                    return Err(format!("oidc: error evaluating claim validation expression: {message}"));
                }
            }
        }
    }
    let username = match &s.username {
        Mapping::Claim { claim, prefix } => {
            let Some(name) = string_claim(claims, claim, "username")? else {
                return Err(format!("oidc: parse username claims {claim:?}: claim not present"));
            };
            if claim == "email" {
                match claims.get("email_verified") {
                    None | Some(Value::Bool(true)) => {}
                    Some(Value::Bool(false)) => return Err("oidc: email not verified".into()),
                    Some(other) => return Err(format!("oidc: parse 'email_verified' claim: {other} is not a boolean")),
                }
            }
            format!("{prefix}{name}")
        }
        Mapping::Expression(p) => match eval_json(p, &vars, "username")? {
            Value::String(name) if !name.is_empty() => name,
            Value::String(_) => return Err("oidc: empty username via CEL expression is not allowed".into()),
            other => return Err(format!("oidc: error evaluating username expression: {other} is not a string")),
        },
    };
    if username.is_empty() {
        return Err("oidc: empty username is not allowed".into());
    }
    let groups = match &s.groups {
        None => Vec::new(),
        Some(Mapping::Claim { claim, prefix }) => {
            strings(claims.get(claim).unwrap_or(&Value::Null), &format!("groups claim {claim:?}"))?
                .into_iter()
                .map(|g| format!("{prefix}{g}"))
                .collect()
        }
        Some(Mapping::Expression(p)) => strings(&eval_json(p, &vars, "groups")?, "groups expression")?,
    };
    let uid = match &s.uid {
        None => String::new(),
        Some(Mapping::Claim { claim, .. }) => string_claim(claims, claim, "uid")?.unwrap_or_default(),
        Some(Mapping::Expression(p)) => match eval_json(p, &vars, "uid")? {
            Value::String(u) => u,
            other => return Err(format!("oidc: error evaluating uid expression: {other} is not a string")),
        },
    };
    let mut extra = std::collections::BTreeMap::new();
    for (key, p) in &s.extra {
        let values = strings(&eval_json(p, &vars, "extra")?, "extra mapping expression")?;
        if !values.is_empty() {
            extra.insert(key.clone(), values);
        }
    }
    let user = UserInfo { name: username, uid, groups, extra };
    if !s.user_rules.is_empty() {
        let mut vars = k1s_cel::Activation::new();
        vars.bind_json(
            "user",
            &serde_json::json!({"username": user.name, "uid": user.uid, "groups": user.groups, "extra": user.extra}),
        );
        for (p, message) in &s.user_rules {
            let ok = p
                .eval_bool(&vars, &mut k1s_cel::CostBudget::default())
                .map_err(|e| format!("oidc: error evaluating user info validation rule: {e}"))?;
            if !ok {
                return Err(format!("oidc: error evaluating user info validation rule: {message}"));
            }
        }
    }
    Ok(user)
}

/// The issuer's keys as last fetched.
#[derive(Debug, Default)]
struct KeySet {
    jwks_uri: Option<String>,
    keys: Vec<Key>,
}

/// The OIDC authenticator.
pub struct Oidc {
    settings: Settings,
    tls: Arc<rustls::ClientConfig>,
    /// `None` until the issuer first answered.
    keys: RwLock<Option<Arc<KeySet>>>,
    /// Serialises fetches; holds when the last one happened.
    fetching: tokio::sync::Mutex<Option<Instant>>,
}

impl Oidc {
    pub fn new(settings: Settings) -> Result<Oidc, String> {
        let trust = match &settings.ca_pem {
            Some(pem) => k1s_pki::client::Trust::Pem { pem: pem.as_bytes(), what: "certificateAuthority" },
            None => k1s_pki::client::Trust::System,
        };
        let tls = k1s_pki::client::client_config(trust, None, &[b"http/1.1"]).map_err(|e| e.message)?;
        Ok(Oidc { settings, tls: Arc::new(tls), keys: RwLock::new(None), fetching: tokio::sync::Mutex::new(None) })
    }

    pub fn issuer(&self) -> &str {
        &self.settings.issuer_url
    }

    fn current(&self) -> Option<Arc<KeySet>> {
        self.keys.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Fetches the discovery document (once) and the key set.
    async fn fetch(&self) -> Result<(), String> {
        let known_uri = self.current().and_then(|k| k.jwks_uri.clone());
        let jwks_uri = match known_uri {
            Some(u) => u,
            None => {
                let url =
                    format!("{}/.well-known/openid-configuration", self.settings.issuer_url.trim_end_matches('/'));
                let doc = get_json(&self.tls, &url).await?;
                let issuer = doc.get("issuer").and_then(Value::as_str).unwrap_or_default();
                if issuer != self.settings.issuer_url {
                    return Err(format!(
                        "oidc: issuer did not match the issuer returned by provider, expected {:?} got {issuer:?}",
                        self.settings.issuer_url
                    ));
                }
                doc.get("jwks_uri")
                    .and_then(Value::as_str)
                    .filter(|u| !u.is_empty())
                    .ok_or("oidc: the discovery document has no jwks_uri")?
                    .to_string()
            }
        };
        let jwks = get_json(&self.tls, &jwks_uri).await?;
        let keys = parse_jwks(&jwks).map_err(|e| format!("oidc: {jwks_uri}: {e}"))?;
        tracing::debug!(issuer = %self.settings.issuer_url, keys = keys.len(), "fetched the OIDC issuer's keys");
        *self.keys.write().unwrap_or_else(|p| p.into_inner()) =
            Some(Arc::new(KeySet { jwks_uri: Some(jwks_uri), keys }));
        Ok(())
    }

    /// Fetches the keys again unless that happened less than [`MIN_REFETCH`] ago (or is under way).
    async fn refetch(&self) {
        let mut last = self.fetching.lock().await;
        if last.is_some_and(|t| t.elapsed() < MIN_REFETCH) {
            return;
        }
        *last = Some(Instant::now());
        if let Err(e) = self.fetch().await {
            tracing::warn!(issuer = %self.settings.issuer_url, error = %e, "fetching the OIDC issuer's keys failed");
        }
    }

    /// Fetches the keys from the start, retrying until the issuer answers, then every
    /// [`REFRESH_EVERY`]; returns when `cancel` fires.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        loop {
            let result = {
                let mut last = self.fetching.lock().await;
                *last = Some(Instant::now());
                self.fetch().await
            };
            let wait = match result {
                Ok(()) => REFRESH_EVERY,
                Err(e) => {
                    tracing::error!(issuer = %self.settings.issuer_url, error = %e, "oidc authenticator: initializing or refreshing the issuer's keys failed; retrying");
                    if self.current().is_some() {
                        REFRESH_EVERY.min(Duration::from_secs(60))
                    } else {
                        RETRY_EVERY
                    }
                }
            };
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Verifies `token` at `now`: `Ok(None)` when another issuer made it.
    async fn verify(&self, token: &str, now: i64) -> Result<Option<UserInfo>, String> {
        let Some((jws, user)) = read_token(&self.settings, token, now)? else { return Ok(None) };
        let kid = jws.header.get("kid").and_then(Value::as_str);
        let verified = |set: &KeySet| signed_by(&set.keys, &jws);
        let mut outcome = self.current().as_deref().and_then(verified);
        // An unknown key (or none fitting and no kid): the issuer may have rotated its keys.
        if outcome != Some(true) && !(outcome == Some(false) && kid.is_some()) {
            self.refetch().await;
            outcome = self.current().as_deref().and_then(verified);
        }
        match outcome {
            Some(true) => Ok(Some(user)),
            Some(false) => {
                Err("oidc: verify token: failed to verify signature: failed to verify id token signature".into())
            }
            None if self.current().is_none() => Err("oidc: authenticator not initialized".into()),
            None => Err(format!(
                "oidc: verify token: failed to verify signature: no key with kid {:?}",
                kid.unwrap_or_default()
            )),
        }
    }
}

impl UserToken for Arc<Oidc> {
    fn user<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Option<UserInfo>, AuthError>> {
        Box::pin(async move {
            self.verify(token, jiff::Timestamp::now().as_second()).await.map_err(AuthError::InvalidToken)
        })
    }
}

/// GETs `url` (https only) and parses its JSON body.
async fn get_json(tls: &Arc<rustls::ClientConfig>, url: &str) -> Result<Value, String> {
    let call = async {
        let uri: http::Uri = url.parse().map_err(|_| format!("{url:?} is not a URL"))?;
        if uri.scheme_str() != Some("https") {
            return Err(format!("{url:?}: only https URLs are fetched"));
        }
        let host = uri.host().ok_or_else(|| format!("{url:?} has no host"))?;
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let port = uri.port_u16().unwrap_or(443);
        let name = match bare.parse::<std::net::IpAddr>() {
            Ok(ip) => ServerName::IpAddress(ip.into()),
            Err(_) => ServerName::try_from(bare.to_string()).map_err(|e| format!("invalid host {host:?}: {e}"))?,
        };
        let tcp = tokio::net::TcpStream::connect((bare, port))
            .await
            .map_err(|e| format!("Get {url:?}: dial tcp {host}:{port}: {e}"))?;
        let tls = tokio_rustls::TlsConnector::from(tls.clone())
            .connect(name, tcp)
            .await
            .map_err(|e| format!("Get {url:?}: tls: {e}"))?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.map_err(|e| format!("Get {url:?}: {e}"))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let authority = uri.authority().map(|a| a.as_str()).unwrap_or(host).to_string();
        let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/").to_string();
        let req = http::Request::get(path)
            .header(http::header::HOST, authority)
            .header(http::header::ACCEPT, "application/json")
            .header(http::header::USER_AGENT, "k1s-apiserver")
            .body(Empty::<Bytes>::new())
            .map_err(|e| e.to_string())?;
        let resp = sender.send_request(req).await.map_err(|e| format!("Get {url:?}: {e}"))?;
        let status = resp.status();
        let body = Limited::new(resp.into_body(), MAX_DOCUMENT)
            .collect()
            .await
            .map_err(|e| format!("Get {url:?}: reading the body: {e}"))?
            .to_bytes();
        if !status.is_success() {
            return Err(format!("{url}: {status}: {}", String::from_utf8_lossy(&body[..body.len().min(200)])));
        }
        serde_json::from_slice(&body).map_err(|e| format!("{url}: not JSON: {e}"))
    };
    tokio::time::timeout(FETCH_TIMEOUT, call).await.unwrap_or_else(|_| Err(format!("Get {url:?}: timed out")))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// The user the claims map to (for the structured configuration's tests).
    pub(crate) fn user(s: &Settings, claims: &Value, now: i64) -> Result<UserInfo, String> {
        user_from_claims(s, claims, now)
    }

    const ISSUER: &str = "https://issuer.example";

    fn options() -> Options {
        Options { issuer_url: ISSUER.into(), client_id: "k1s".into(), ..Options::default() }
    }

    #[test]
    fn upstreams_defaults_and_checks_of_the_flags() {
        let username = |o: Options| match o.settings().expect("valid").username {
            Mapping::Claim { claim, prefix } => (claim, prefix),
            Mapping::Expression(_) => panic!("a claim"),
        };
        let s = options().settings().expect("valid");
        assert_eq!(s.audiences, ["k1s"]);
        assert_eq!(s.signing_algs, ["RS256"]);
        assert_eq!(
            username(options()),
            ("sub".into(), "https://issuer.example#".into()),
            "non-email claims are prefixed with the issuer"
        );
        assert_eq!(
            username(Options { username_claim: Some("email".into()), ..options() }),
            ("email".into(), "".into())
        );
        assert_eq!(username(Options { username_prefix: Some("-".into()), ..options() }).1, "");
        assert_eq!(username(Options { username_prefix: Some("oidc:".into()), ..options() }).1, "oidc:");
        let err = |o: Options| o.settings().expect_err("invalid").to_string();
        assert_eq!(
            err(Options { issuer_url: "http://issuer.example".into(), ..options() }),
            "--oidc-issuer-url \"http://issuer.example\" has invalid scheme \"http\", require 'https'"
        );
        assert_eq!(
            err(Options { client_id: String::new(), ..options() }),
            "--oidc-issuer-url and --oidc-client-id must be specified together"
        );
        assert!(err(Options { signing_algs: vec!["HS256".into()], ..options() })
            .contains("unsupported signing alg \"HS256\""));
        assert!(err(Options { signing_algs: vec!["ES512".into()], ..options() }).contains("\"ES512\""));
        let dir = tempfile::tempdir().expect("tmp");
        let bad = dir.path().join("ca.pem");
        std::fs::write(&bad, "not a certificate").expect("write");
        assert!(err(Options { ca_file: Some(bad), ..options() }).ends_with("holds no PEM certificate"));
        assert!(err(Options { ca_file: Some(dir.path().join("missing")), ..options() }).contains("reading it"));
    }

    fn settings() -> Settings {
        Options {
            groups_claim: Some("groups".into()),
            groups_prefix: Some("oidc:".into()),
            username_prefix: Some("oidc:".into()),
            required_claims: vec![("hd".into(), "example.com".into())],
            ..options()
        }
        .settings()
        .expect("valid")
    }

    #[test]
    fn claims_give_the_prefixed_user_and_groups_within_their_validity() {
        let s = settings();
        let now = 1_700_000_000;
        let good = json!({"iss": ISSUER, "aud": ["other", "k1s"], "sub": "jane", "exp": now + 60, "nbf": now,
                          "groups": ["dev", "ops"], "hd": "example.com"});
        let u = user_from_claims(&s, &good, now).expect("valid");
        assert_eq!(u.name, "oidc:jane");
        assert_eq!(u.groups, ["oidc:dev", "oidc:ops"]);
        let with = |k: &str, v: Value| {
            let mut c = good.clone();
            c[k] = v;
            user_from_claims(&s, &c, now)
        };
        assert_eq!(with("groups", json!("dev")).expect("one group").groups, ["oidc:dev"]);
        assert!(with("aud", json!("someone-else")).expect_err("aud").starts_with("oidc: expected audience \"k1s\""));
        assert!(with("exp", json!(now - 1)).expect_err("expired").starts_with("oidc: token is expired"));
        assert!(with("nbf", json!(now + 3600)).expect_err("nbf").contains("before the nbf"));
        with("nbf", json!(now + 60)).expect("within the skew");
        assert!(with("hd", json!("evil.com")).expect_err("required claim").contains("does not match"));
        assert!(with("sub", json!(7)).expect_err("not a string").contains("parse username claims"));
        assert!(with("groups", json!({"a": 1})).is_err());
        let mut missing = good.clone();
        missing.as_object_mut().expect("object").remove("hd");
        assert_eq!(
            user_from_claims(&s, &missing, now).expect_err("missing"),
            "oidc: required claim hd not present in ID token"
        );
        // The email claim: email_verified, when present, must be true.
        let email = Options { username_claim: Some("email".into()), ..options() }.settings().expect("valid");
        let claims = json!({"iss": ISSUER, "aud": "k1s", "exp": now + 60, "email": "jane@example.com"});
        assert_eq!(user_from_claims(&email, &claims, now).expect("no email_verified").name, "jane@example.com");
        let mut unverified = claims.clone();
        unverified["email_verified"] = json!(false);
        assert_eq!(user_from_claims(&email, &unverified, now).expect_err("unverified"), "oidc: email not verified");
    }

    /// A test-only RSA key (PKCS#8), made with `openssl genpkey -algorithm RSA`.
    pub(crate) const RSA_KEY: &str = include_str!("testdata/oidc-rsa.pem");

    fn rsa() -> (signature::RsaKeyPair, Value) {
        let der = rustls::pki_types::PrivatePkcs8KeyDer::from_pem_slice(RSA_KEY.as_bytes()).expect("pem");
        let key = signature::RsaKeyPair::from_pkcs8(der.secret_pkcs8_der()).expect("rsa");
        let c: signature::RsaPublicKeyComponents<Vec<u8>> = key.public().into();
        let jwk = json!({"kty": "RSA", "kid": "r1", "use": "sig", "alg": "RS256", "n": B64.encode(&c.n), "e": B64.encode(&c.e)});
        (key, jwk)
    }

    fn ec() -> (signature::EcdsaKeyPair, Value) {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 =
            signature::EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng).expect("gen");
        let key =
            signature::EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
                .expect("ec");
        let point = signature::KeyPair::public_key(&key).as_ref().to_vec();
        let jwk = json!({"kty": "EC", "kid": "e1", "crv": "P-256", "x": B64.encode(&point[1..33]), "y": B64.encode(&point[33..])});
        (key, jwk)
    }

    fn jws(header: Value, claims: &Value, sign: impl Fn(&[u8]) -> Vec<u8>) -> String {
        let signed = format!("{}.{}", B64.encode(header.to_string()), B64.encode(claims.to_string()));
        let sig = sign(signed.as_bytes());
        format!("{signed}.{}", B64.encode(sig))
    }

    fn authenticator(keys: &[Value], algs: &[&str]) -> Oidc {
        let s = Options {
            signing_algs: algs.iter().map(|a| a.to_string()).collect(),
            username_prefix: Some("-".into()),
            ..options()
        }
        .settings()
        .expect("valid");
        let o = Oidc::new(s).expect("oidc");
        let keys = parse_jwks(&json!({"keys": keys})).expect("jwks");
        // A jwks_uri nobody answers at: refetches fail quickly and leave the keys as they are.
        *o.keys.write().expect("lock") =
            Some(Arc::new(KeySet { jwks_uri: Some("https://127.0.0.1:1/keys".into()), keys }));
        o
    }

    #[tokio::test]
    async fn rs256_and_es256_signatures_verify_and_others_do_not() {
        let rng = ring::rand::SystemRandom::new();
        let (rsa, rsa_jwk) = rsa();
        let (ec_key, ec_jwk) = ec();
        let now = jiff::Timestamp::now().as_second();
        let claims = json!({"iss": ISSUER, "aud": "k1s", "sub": "jane", "exp": now + 600});
        let rs256 = |m: &[u8]| {
            let mut sig = vec![0; rsa.public().modulus_len()];
            rsa.sign(&signature::RSA_PKCS1_SHA256, &rng, m, &mut sig).expect("sign");
            sig
        };
        let es256 = |m: &[u8]| ec_key.sign(&rng, m).expect("sign").as_ref().to_vec();
        let o = authenticator(&[rsa_jwk.clone(), ec_jwk.clone()], &["RS256", "ES256"]);
        let t = jws(json!({"alg": "RS256", "kid": "r1"}), &claims, rs256);
        assert_eq!(o.verify(&t, now).await.expect("rs256").map(|u| u.name), Some("jane".into()));
        let t = jws(json!({"alg": "ES256", "kid": "e1"}), &claims, es256);
        assert_eq!(o.verify(&t, now).await.expect("es256").map(|u| u.name), Some("jane".into()));
        let no_kid = jws(json!({"alg": "ES256"}), &claims, es256);
        assert!(o.verify(&no_kid, now).await.expect("any key").is_some());
        // Signed by a key the issuer does not publish.
        let (other, _) = ec();
        let forged = jws(json!({"alg": "ES256", "kid": "e1"}), &claims, |m| {
            other.sign(&rng, m).expect("sign").as_ref().to_vec()
        });
        assert!(o.verify(&forged, now).await.expect_err("forged").contains("failed to verify signature"));
        // A tampered payload.
        let parts: Vec<&str> = t.split('.').collect();
        let admin = json!({"iss": ISSUER, "aud": "k1s", "sub": "admin", "exp": now + 600});
        let tampered = format!("{}.{}.{}", parts[0], B64.encode(admin.to_string()), parts[2]);
        assert!(o.verify(&tampered, now).await.is_err());
        // Algorithms not allowed, `none` among them.
        let only_rs = authenticator(&[rsa_jwk, ec_jwk], &["RS256"]);
        assert!(only_rs.verify(&t, now).await.expect_err("es256 refused").contains("unsupported algorithm"));
        let none = format!("{}.{}.", B64.encode(r#"{"alg":"none"}"#), B64.encode(claims.to_string()));
        assert!(o.verify(&none, now).await.is_err());
        // An unknown kid.
        let unknown = jws(json!({"alg": "ES256", "kid": "zz"}), &claims, es256);
        assert!(o.verify(&unknown, now).await.expect_err("unknown kid").contains("no key with kid \"zz\""));
        // Another issuer's token is not ours.
        let theirs = json!({"iss": "https://elsewhere", "aud": "k1s", "sub": "x", "exp": now + 600});
        assert_eq!(o.verify(&jws(json!({"alg": "ES256"}), &theirs, es256), now).await, Ok(None));
    }
}
