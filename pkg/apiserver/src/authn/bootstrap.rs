//! Bootstrap tokens (upstream's `plugin/pkg/auth/authenticator/token/bootstrap`): a token
//! `<id>.<secret>` (6 and 16 characters of `[a-z0-9]`) authenticates as `system:bootstrap:<id>`
//! in `system:bootstrappers` and the groups of its `auth-extra-groups`, when the Secret
//! `kube-system/bootstrap-token-<id>` of type `bootstrap.kubernetes.io/token` holds that
//! `token-id` and `token-secret`, says `usage-bootstrap-authentication: "true"`, has not
//! expired (`expiration`, RFC 3339) and is not being deleted. Anything else is "not a token of
//! mine", as upstream's authenticator answers.
//!
//! The Secrets come from a watch-fed cache of `kube-system`'s Secrets, which keeps the data of
//! bootstrap token Secrets only.

use super::UserToken;
use crate::admission_cache::Cache;
use crate::auth::{AuthError, UserInfo};
use base64::Engine as _;
use futures::future::BoxFuture;
use k1s_store::{KeyValue, Store};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

pub const SECRET_PREFIX: &str = "bootstrap-token-";
pub const SECRET_TYPE: &str = "bootstrap.kubernetes.io/token";
pub const USER_PREFIX: &str = "system:bootstrap:";
pub const DEFAULT_GROUP: &str = "system:bootstrappers";

/// A bootstrap token Secret as the authenticator reads it.
#[derive(Debug)]
struct Entry {
    deleting: bool,
    secret_type: String,
    data: BTreeMap<String, String>,
}

/// Decodes `kube-system` Secrets: `None` inside for those that are not bootstrap tokens.
fn parse(kv: &KeyValue) -> Option<Option<Entry>> {
    let obj = crate::object::from_storage(&kv.value, kv.mod_revision)?;
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    if !name.starts_with(SECRET_PREFIX) {
        return Some(None);
    }
    let data = obj
        .get("data")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| {
                    let bytes = base64::engine::general_purpose::STANDARD.decode(v.as_str()?).ok()?;
                    Some((k.clone(), String::from_utf8(bytes).ok()?))
                })
                .collect()
        })
        .unwrap_or_default();
    Some(Some(Entry {
        deleting: obj.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null()),
        secret_type: obj.get("type").and_then(Value::as_str).unwrap_or_default().to_string(),
        data,
    }))
}

/// `<id>.<secret>`, or `None` when `token` is not of that form.
pub fn parse_token(token: &str) -> Option<(&str, &str)> {
    let (id, secret) = token.split_once('.')?;
    let ok = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    (ok(id, 6) && ok(secret, 16)).then_some((id, secret))
}

/// `^system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]$`.
fn valid_group(g: &str) -> bool {
    let Some(rest) = g.strip_prefix("system:bootstrappers:") else { return false };
    let Some(last) = rest.bytes().last() else { return false };
    rest.len() <= 256
        && (last.is_ascii_lowercase() || last.is_ascii_digit())
        && rest.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b':' || b == b'-')
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The user a token names, checked against its Secret at `now` (Unix seconds).
fn user_of(entry: &Entry, id: &str, secret: &str, now: i64) -> Option<UserInfo> {
    let name = format!("{SECRET_PREFIX}{id}");
    let why = |what: &str| tracing::debug!(secret = %name, "bootstrap secret kube-system/{name} matching bearer token {what}");
    if entry.deleting {
        why("is deleted and awaiting removal");
        return None;
    }
    if entry.secret_type != SECRET_TYPE {
        why(&format!("has invalid type, expected {SECRET_TYPE}"));
        return None;
    }
    let get = |k: &str| entry.data.get(k).map(String::as_str).unwrap_or_default();
    if !constant_time_eq(get("token-secret").as_bytes(), secret.as_bytes()) {
        why("has invalid value for key token-secret");
        return None;
    }
    if get("token-id") != id {
        why("has invalid value for key token-id");
        return None;
    }
    let expiration = get("expiration");
    if !expiration.is_empty() {
        // An unreadable expiration counts as expired.
        match expiration.parse::<jiff::Timestamp>() {
            Ok(t) if t.as_second() > now => {}
            _ => {
                why("has expired");
                return None;
            }
        }
    }
    if get("usage-bootstrap-authentication") != "true" {
        why("not marked usage-bootstrap-authentication=true");
        return None;
    }
    let mut groups = BTreeSet::from([DEFAULT_GROUP.to_string()]);
    let extra = get("auth-extra-groups");
    if !extra.is_empty() {
        for g in extra.split(',') {
            if !valid_group(g) {
                why(&format!("has invalid value for key auth-extra-groups: {g:?} is not a valid bootstrap group name"));
                return None;
            }
            groups.insert(g.to_string());
        }
    }
    Some(UserInfo {
        name: format!("{USER_PREFIX}{id}"),
        uid: String::new(),
        groups: groups.into_iter().collect(),
        extra: Default::default(),
    })
}

/// Bootstrap tokens from the cache of `kube-system`'s Secrets.
pub struct BootstrapTokens {
    secrets: Cache<Option<Entry>>,
}

impl BootstrapTokens {
    pub fn new(store: Store) -> BootstrapTokens {
        BootstrapTokens { secrets: Cache::new(store, "/registry/secrets/kube-system/", parse) }
    }

    fn lookup(&self, token: &str, now: i64) -> Result<Option<UserInfo>, AuthError> {
        let Some((id, secret)) = parse_token(token) else { return Ok(None) };
        let entry = self
            .secrets
            .get("", &format!("{SECRET_PREFIX}{id}"))
            .map_err(|e| AuthError::InvalidToken(format!("reading bootstrap token secrets: {e}")))?;
        Ok(entry.as_deref().and_then(Option::as_ref).and_then(|e| user_of(e, id, secret, now)))
    }
}

impl UserToken for BootstrapTokens {
    fn user<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Option<UserInfo>, AuthError>> {
        Box::pin(std::future::ready(self.lookup(token, jiff::Timestamp::now().as_second())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use serde_json::json;

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    fn secret(name: &str, data: &[(&str, &str)]) -> Bytes {
        let data: serde_json::Map<String, Value> = data.iter().map(|(k, v)| (k.to_string(), json!(b64(v)))).collect();
        Bytes::from(
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "kube-system"},
                   "type": SECRET_TYPE, "data": data})
            .to_string(),
        )
    }

    const GOOD: &[(&str, &str)] = &[
        ("token-id", "abcdef"),
        ("token-secret", "0123456789abcdef"),
        ("usage-bootstrap-authentication", "true"),
        ("auth-extra-groups", "system:bootstrappers:worker,system:bootstrappers:a-b"),
    ];

    #[test]
    fn tokens_have_the_bootstrap_form() {
        assert_eq!(parse_token("abcdef.0123456789abcdef"), Some(("abcdef", "0123456789abcdef")));
        for bad in ["abcdef.0123456789abcde", "ABCDEF.0123456789abcdef", "abcdef0123456789abcdef", "abc.def"] {
            assert_eq!(parse_token(bad), None, "{bad}");
        }
    }

    #[tokio::test]
    async fn a_valid_secret_authenticates_its_token_and_nothing_else() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path(), k1s_store::StoreOptions::default()).expect("open");
        let key = "/registry/secrets/kube-system/bootstrap-token-abcdef";
        store.create(key, secret("bootstrap-token-abcdef", GOOD)).await.expect("write");
        let t = BootstrapTokens::new(store.clone());
        let now = 1_700_000_000;
        let user = t.lookup("abcdef.0123456789abcdef", now).expect("lookup").expect("a user");
        assert_eq!(user.name, "system:bootstrap:abcdef");
        assert_eq!(user.groups, ["system:bootstrappers", "system:bootstrappers:a-b", "system:bootstrappers:worker"]);
        assert_eq!(t.lookup("abcdef.0123456789abcdee", now).expect("lookup"), None, "wrong secret");
        assert_eq!(t.lookup("zzzzzz.0123456789abcdef", now).expect("lookup"), None, "no such secret");
        // Expired, not for authentication, bad groups: not authenticated.
        let mut expired = GOOD.to_vec();
        expired.push(("expiration", "2023-01-01T00:00:00Z"));
        store.update(key, secret("bootstrap-token-abcdef", &expired), None).await.expect("write");
        assert_eq!(t.lookup("abcdef.0123456789abcdef", now).expect("lookup"), None, "expired");
        let mut later = GOOD.to_vec();
        later.push(("expiration", "2099-01-01T00:00:00Z"));
        store.update(key, secret("bootstrap-token-abcdef", &later), None).await.expect("write");
        assert!(t.lookup("abcdef.0123456789abcdef", now).expect("lookup").is_some(), "not expired yet");
        let signing_only: Vec<_> =
            GOOD.iter().filter(|(k, _)| *k != "usage-bootstrap-authentication").copied().collect();
        store.update(key, secret("bootstrap-token-abcdef", &signing_only), None).await.expect("write");
        assert_eq!(t.lookup("abcdef.0123456789abcdef", now).expect("lookup"), None, "not for authentication");
        let mut bad_group = GOOD.to_vec();
        bad_group[3] = ("auth-extra-groups", "system:masters");
        store.update(key, secret("bootstrap-token-abcdef", &bad_group), None).await.expect("write");
        assert_eq!(
            t.lookup("abcdef.0123456789abcdef", now).expect("lookup"),
            None,
            "a group outside system:bootstrappers"
        );
        store.delete(key, None).await.expect("delete");
        assert_eq!(t.lookup("abcdef.0123456789abcdef", now).expect("lookup"), None, "deleted");
    }
}
