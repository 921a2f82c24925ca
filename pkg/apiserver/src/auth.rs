//! Authentication (who is calling) and authorization (may they do this), each behind a trait:
//! authenticators are tried in turn, then authorizers in upstream's order: `system:masters`
//! ([`SystemMasters`]), the Node authorizer, RBAC.

use crate::request::{RequestInfo, RequestSubresource, RequestVerb};
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// An authenticated identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    /// Further attributes (`authentication.kubernetes.io/pod-name`, …).
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    pub fn anonymous() -> UserInfo {
        UserInfo::new("system:anonymous", &["system:unauthenticated"])
    }
    /// A user with no uid and no extras.
    pub fn new(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            name: name.to_string(),
            uid: String::new(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            extra: BTreeMap::new(),
        }
    }
    pub fn is_anonymous(&self) -> bool {
        self.name == "system:anonymous"
    }
}

/// The verified client certificates of one connection. They cannot change while the connection
/// lasts, so the identity read from them is kept here and read once, not once per request; only
/// their validity is checked on every request.
#[derive(Debug, Default)]
pub struct Peer {
    /// DER certificates the TLS layer verified against the cluster CA (leaf first).
    pub certificates: Vec<Vec<u8>>,
    /// The address the connection comes from (the audit log's source IP).
    pub remote: Option<std::net::IpAddr>,
    x509: OnceLock<Result<Option<X509Identity>, String>>,
}

/// The user a client certificate names and the time it is valid for (Unix seconds).
#[derive(Clone, Debug)]
struct X509Identity {
    user: UserInfo,
    not_before: i64,
    not_after: i64,
}

impl Peer {
    pub fn new(certificates: Vec<Vec<u8>>) -> Peer {
        Peer { certificates, remote: None, x509: OnceLock::new() }
    }

    /// The peer, connected from `remote`.
    pub fn with_remote(self, remote: std::net::IpAddr) -> Peer {
        Peer { remote: Some(remote), ..self }
    }
}

/// What the connection presented: verified client certificates and the request's headers.
pub struct Credentials<'a> {
    pub peer: &'a Peer,
    pub authorization_header: Option<&'a str>,
}

/// Authenticates a request; `Ok(None)` means "no credentials of my kind".
pub trait Authenticator: Send + Sync {
    fn authenticate(&self, creds: &Credentials<'_>) -> Result<Option<UserInfo>, AuthError>;
}

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("invalid client certificate: {0}")]
    BadCertificate(String),
    #[error("invalid bearer token: {0}")]
    InvalidToken(String),
}

/// x509 client certificates: user = CN, groups = O (plus `system:authenticated`). As upstream's
/// authenticator verifies the chain at the time of each request, a connection whose client
/// certificate expired since its handshake gets 401 for its next request (a request under way, a
/// watch, keeps going): clients must reconnect with a renewed certificate.
pub struct X509Authenticator;

impl Authenticator for X509Authenticator {
    fn authenticate(&self, creds: &Credentials<'_>) -> Result<Option<UserInfo>, AuthError> {
        let peer = creds.peer;
        let id = peer.x509.get_or_init(|| x509_identity(&peer.certificates));
        let Some(id) = id.as_ref().map_err(|e| AuthError::BadCertificate(e.clone()))? else { return Ok(None) };
        let now = jiff::Timestamp::now().as_second();
        if now < id.not_before || now > id.not_after {
            let at = |s: i64| jiff::Timestamp::from_second(s).map(|t| t.to_string()).unwrap_or_else(|_| s.to_string());
            return Err(AuthError::BadCertificate(format!(
                "x509: certificate has expired or is not yet valid: current time {} is outside {} to {}",
                at(now),
                at(id.not_before),
                at(id.not_after)
            )));
        }
        Ok(Some(id.user.clone()))
    }
}

/// The user a certificate chain names (`None` without certificates), or why it names none.
fn x509_identity(certificates: &[Vec<u8>]) -> Result<Option<X509Identity>, String> {
    let Some(leaf) = certificates.first() else { return Ok(None) };
    let (_, cert) = x509_parser::parse_x509_certificate(leaf).map_err(|e| e.to_string())?;
    let name = cert
        .subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .ok_or_else(|| "no common name".to_string())?
        .to_string();
    let mut groups: Vec<String> =
        cert.subject().iter_organization().filter_map(|o| o.as_str().ok()).map(str::to_string).collect();
    groups.push("system:authenticated".into());
    let user = UserInfo { name, uid: String::new(), groups, extra: BTreeMap::new() };
    let validity = cert.validity();
    Ok(Some(X509Identity {
        user,
        not_before: validity.not_before.timestamp(),
        not_after: validity.not_after.timestamp(),
    }))
}

/// Tries authenticators in order; the first that recognises the credentials wins.
pub struct UnionAuthenticator(pub Vec<Box<dyn Authenticator>>);

impl Authenticator for UnionAuthenticator {
    fn authenticate(&self, creds: &Credentials<'_>) -> Result<Option<UserInfo>, AuthError> {
        for a in &self.0 {
            if let Some(u) = a.authenticate(creds)? {
                return Ok(Some(u));
            }
        }
        Ok(None)
    }
}

/// Attributes of a request for authorization (upstream's `authorizer.Attributes`).
pub struct Attributes<'a> {
    pub user: &'a UserInfo,
    pub info: &'a RequestInfo,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Deny(String),
    /// No opinion, with why (empty when there is nothing to say): the next authorizer decides.
    /// A request no authorizer allows is refused with the reasons given on the way.
    NoOpinion(String),
}

impl Decision {
    /// No opinion and nothing to say about it.
    pub fn no_opinion() -> Decision {
        Decision::NoOpinion(String::new())
    }
}

pub trait Authorizer: Send + Sync {
    fn authorize(&self, attrs: &Attributes<'_>) -> Decision;
}

/// A shared authorizer (RBAC's is also asked by admission and the access reviews).
impl<T: Authorizer + ?Sized> Authorizer for std::sync::Arc<T> {
    fn authorize(&self, attrs: &Attributes<'_>) -> Decision {
        (**self).authorize(attrs)
    }
}

/// The group whose members may do anything: the only one that bypasses RBAC.
pub const MASTERS_GROUP: &str = "system:masters";

/// Asked first, as upstream's privileged-group authorizer: `system:masters` may do anything.
/// Everyone else, the built-in components included, is decided by the Node authorizer and
/// RBAC.
pub struct SystemMasters;

impl Authorizer for SystemMasters {
    fn authorize(&self, attrs: &Attributes<'_>) -> Decision {
        if attrs.user.groups.iter().any(|g| g == MASTERS_GROUP) {
            Decision::Allow
        } else {
            Decision::no_opinion()
        }
    }
}

/// The node a kubelet's user names (upstream's node identifier): `Some(name)` for a user
/// `system:node:<name>` in the group `system:nodes` (`Some("")` when the name is missing,
/// which nothing allows), `None` for any other user.
pub fn node_name(user: &UserInfo) -> Option<&str> {
    let name = user.name.strip_prefix("system:node:")?;
    user.groups.iter().any(|g| g == "system:nodes").then_some(name)
}

/// Tries authorizers in order until one allows or denies; when none does, there is no opinion
/// (which refuses the request) with the reasons they gave, one a line.
pub struct UnionAuthorizer(pub Vec<Box<dyn Authorizer>>);

impl Authorizer for UnionAuthorizer {
    fn authorize(&self, attrs: &Attributes<'_>) -> Decision {
        let mut reasons: Vec<String> = Vec::new();
        for a in &self.0 {
            match a.authorize(attrs) {
                Decision::NoOpinion(reason) => {
                    if !reason.is_empty() {
                        reasons.push(reason);
                    }
                }
                d => return d,
            }
        }
        Decision::NoOpinion(reasons.join("\n"))
    }
}

/// What the `Impersonate-*` headers ask for, decided as upstream's impersonation filter does:
/// the authenticated user must be allowed to `impersonate` the user (or the ServiceAccount), each
/// group, the UID and each extra; the request then runs as the impersonated user, with
/// `system:authenticated` added (unless a group says otherwise) and, for a ServiceAccount, its
/// ServiceAccount groups. Without the headers, the user is returned as it is.
pub fn impersonate(
    authz: &dyn Authorizer,
    user: UserInfo,
    headers: &http::HeaderMap,
) -> Result<UserInfo, crate::error::ApiError> {
    use crate::error::{ApiError, ResourceTarget};
    let values = |name: &str| -> Vec<String> {
        headers.get_all(name).iter().filter_map(|v| v.to_str().ok()).map(str::to_string).collect()
    };
    let name = values("impersonate-user").into_iter().next();
    let groups = values("impersonate-group");
    let uid = values("impersonate-uid").into_iter().next();
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (k, v) in headers {
        if let (Some(key), Ok(v)) = (k.as_str().strip_prefix("impersonate-extra-"), v.to_str()) {
            let key = percent_encoding::percent_decode_str(key).decode_utf8_lossy().to_lowercase();
            extra.entry(key).or_default().push(v.to_string());
        }
    }
    let Some(name) = name else {
        if groups.is_empty() && uid.is_none() && extra.is_empty() {
            return Ok(user);
        }
        return Err(ApiError::internal(
            "requested impersonation of groups, a UID or extras without impersonating a user",
        ));
    };
    /// One impersonation to allow: (group, resource, subresource, namespace, name).
    type Ask = (&'static str, &'static str, Option<String>, Option<String>, String);
    let mut asks: Vec<Ask> = Vec::new();
    let sa = name.strip_prefix("system:serviceaccount:").and_then(|r| r.split_once(':'));
    match sa {
        Some((ns, sa_name)) => asks.push(("", "serviceaccounts", None, Some(ns.to_string()), sa_name.to_string())),
        None => asks.push(("", "users", None, None, name.clone())),
    }
    for g in &groups {
        asks.push(("", "groups", None, None, g.clone()));
    }
    if let Some(u) = &uid {
        asks.push(("authentication.k8s.io", "uids", None, None, u.clone()));
    }
    for (k, vals) in &extra {
        for v in vals {
            asks.push(("authentication.k8s.io", "userextras", Some(k.clone()), None, v.clone()));
        }
    }
    for (group, resource, subresource, namespace, target) in &asks {
        let info = RequestInfo {
            is_resource: true,
            verb: RequestVerb::named("impersonate"),
            group: group.to_string(),
            resource: resource.to_string(),
            subresource: subresource.as_deref().map(RequestSubresource::named),
            namespace: namespace.clone(),
            name: Some(target.clone()),
            ..Default::default()
        };
        if authz.authorize(&Attributes { user: &user, info: &info }) != Decision::Allow {
            return Err(ApiError::forbidden(
                &user.name,
                "impersonate",
                &ResourceTarget::Resource {
                    group,
                    resource,
                    subresource: subresource.as_deref(),
                    namespace: namespace.as_deref(),
                    name: Some(target),
                },
            ));
        }
    }
    let mut all_groups = groups;
    if let Some((ns, _)) = sa {
        for g in ["system:serviceaccounts".to_string(), format!("system:serviceaccounts:{ns}")] {
            if !all_groups.contains(&g) {
                all_groups.push(g);
            }
        }
    }
    if !all_groups.iter().any(|g| g == "system:authenticated" || g == "system:unauthenticated") {
        let everyone = if name == "system:anonymous" { "system:unauthenticated" } else { "system:authenticated" };
        all_groups.push(everyone.into());
    }
    Ok(UserInfo { name, uid: uid.unwrap_or_default(), groups: all_groups, extra })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Query;

    fn info(verb: &str, path: &str) -> RequestInfo {
        let method = match verb {
            "create" => http::Method::POST,
            _ => http::Method::GET,
        };
        RequestInfo::parse(&method, path, &Query::default())
    }

    #[test]
    fn impersonation_needs_permission_for_each_part_and_sets_the_groups() {
        let headers = |pairs: &[(&str, &str)]| {
            let mut h = http::HeaderMap::new();
            for (k, v) in pairs {
                h.append(http::header::HeaderName::from_bytes(k.as_bytes()).expect("name"), v.parse().expect("value"));
            }
            h
        };
        let admin = UserInfo::new("admin", &["system:masters", "system:authenticated"]);
        let bob = UserInfo::new("bob", &["system:authenticated"]);
        // No headers: the user as authenticated.
        assert_eq!(impersonate(&SystemMasters, bob.clone(), &headers(&[])).expect("plain"), bob);
        let h = headers(&[
            ("impersonate-user", "alice"),
            ("impersonate-group", "devs"),
            ("impersonate-extra-scopes", "view"),
            ("impersonate-uid", "u-1"),
        ]);
        let alice = impersonate(&SystemMasters, admin.clone(), &h).expect("masters may impersonate");
        assert_eq!(alice.name, "alice");
        assert_eq!(alice.uid, "u-1");
        assert_eq!(alice.groups, vec!["devs".to_string(), "system:authenticated".to_string()]);
        assert_eq!(alice.extra.get("scopes"), Some(&vec!["view".to_string()]));
        let e = impersonate(&SystemMasters, bob, &h).expect_err("bob may not");
        assert_eq!(e.code, 403);
        let anon = impersonate(&SystemMasters, admin.clone(), &headers(&[("impersonate-user", "system:anonymous")]))
            .expect("anonymous");
        assert_eq!(anon.groups, vec!["system:unauthenticated".to_string()]);
        let e = impersonate(&SystemMasters, admin, &headers(&[("impersonate-group", "devs")]))
            .expect_err("groups without a user");
        assert_eq!(e.code, 500);
    }

    #[test]
    fn only_system_masters_bypass_the_other_authorizers() {
        let admin = UserInfo::new("admin", &["system:masters"]);
        let bob = UserInfo::new("bob", &["system:authenticated"]);
        let controllers = UserInfo::new("system:kube-controller-manager", &["system:authenticated"]);
        let pods = info("list", "/api/v1/pods");
        let decide = |u: &UserInfo, i: &RequestInfo| SystemMasters.authorize(&Attributes { user: u, info: i });
        assert_eq!(decide(&admin, &pods), Decision::Allow);
        assert_eq!(decide(&bob, &pods), Decision::no_opinion());
        assert_eq!(decide(&controllers, &pods), Decision::no_opinion(), "a built-in component goes through RBAC");
        assert_eq!(decide(&bob, &info("get", "/apis")), Decision::no_opinion(), "discovery comes from RBAC too");
    }

    #[test]
    fn a_union_refuses_with_the_reasons_of_those_without_an_opinion() {
        struct Says(Decision);
        impl Authorizer for Says {
            fn authorize(&self, _: &Attributes<'_>) -> Decision {
                self.0.clone()
            }
        }
        let bob = UserInfo::new("bob", &[]);
        let pods = info("list", "/api/v1/pods");
        let union = |d: Vec<Decision>| {
            UnionAuthorizer(d.into_iter().map(|d| Box::new(Says(d)) as Box<dyn Authorizer>).collect())
                .authorize(&Attributes { user: &bob, info: &pods })
        };
        let why = |s: &str| Decision::NoOpinion(s.to_string());
        assert_eq!(union(vec![why("first"), Decision::no_opinion(), why("second")]), why("first\nsecond"));
        assert_eq!(union(vec![why("first"), Decision::Allow, Decision::Deny("no".into())]), Decision::Allow);
        assert_eq!(union(vec![Decision::Deny("no".into()), Decision::Allow]), Decision::Deny("no".into()));
        assert_eq!(union(vec![]), Decision::no_opinion());
    }

    #[test]
    fn a_node_is_a_system_node_user_in_the_nodes_group() {
        let user = |name: &str, groups: &[&str]| UserInfo::new(name, groups);
        assert_eq!(node_name(&user("system:node:n1", &["system:nodes"])), Some("n1"));
        assert_eq!(node_name(&user("system:node:", &["system:nodes"])), Some(""), "a node without a name");
        assert_eq!(node_name(&user("system:node:n1", &["system:authenticated"])), None, "not in system:nodes");
        assert_eq!(node_name(&user("alice", &["system:nodes"])), None);
    }

    #[test]
    fn a_connections_certificate_names_its_user_on_every_request() {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::default();
        params.distinguished_name.push(rcgen::DnType::CommonName, "alice");
        params.distinguished_name.push(rcgen::DnType::OrganizationName, "team-a");
        let cert = params.self_signed(&key).expect("cert");
        let peer = Peer::new(vec![cert.der().to_vec()]);
        let creds = Credentials { peer: &peer, authorization_header: None };
        let want = UserInfo::new("alice", &["team-a", "system:authenticated"]);
        for _ in 0..2 {
            assert_eq!(X509Authenticator.authenticate(&creds).expect("valid"), Some(want.clone()));
        }
        let none = Peer::default();
        assert_eq!(
            X509Authenticator.authenticate(&Credentials { peer: &none, authorization_header: None }).ok(),
            Some(None)
        );
        let garbage = Peer::new(vec![b"not DER".to_vec()]);
        for _ in 0..2 {
            let err = X509Authenticator.authenticate(&Credentials { peer: &garbage, authorization_header: None });
            assert!(matches!(err, Err(AuthError::BadCertificate(_))), "{err:?}");
        }
    }

    /// Issue 19: a connection kept open past its client certificate's end went on authenticating
    /// as that user, so a renewed certificate never had to be used.
    #[test]
    fn a_client_certificate_that_expired_since_the_handshake_is_refused_on_the_next_request() {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::default();
        params.distinguished_name.push(rcgen::DnType::CommonName, "alice");
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        let expired = Peer::new(vec![params.self_signed(&key).expect("cert").der().to_vec()]);
        let err = X509Authenticator.authenticate(&Credentials { peer: &expired, authorization_header: None });
        match err {
            Err(AuthError::BadCertificate(m)) => assert!(m.contains("has expired"), "{m}"),
            other => panic!("an expired certificate authenticated: {other:?}"),
        }
        params.not_after = rcgen::date_time_ymd(4000, 1, 1);
        let valid = Peer::new(vec![params.self_signed(&key).expect("cert").der().to_vec()]);
        let user = X509Authenticator.authenticate(&Credentials { peer: &valid, authorization_header: None });
        assert_eq!(user.expect("valid").map(|u| u.name), Some("alice".to_string()));
    }
}
