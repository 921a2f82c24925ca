//! The `authorizer` CEL variable of admission policies, backed by the server's authorizer
//! (built-in rules, then RBAC), as upstream's `library.Authz`.

use crate::admission::Attributes;
use crate::auth::{self, Authorizer};
use crate::request::{RequestInfo, RequestSubresource, RequestVerb};
use std::sync::Arc;

/// The server's authorizer as the CEL library asks it.
pub struct ServerAuthorizer(pub Arc<dyn Authorizer>);

impl k1s_cel::Authorize for ServerAuthorizer {
    fn authorize(&self, r: &k1s_cel::AuthzRequest) -> k1s_cel::AuthzDecision {
        let user = auth::UserInfo {
            name: r.user.name.clone(),
            uid: r.user.uid.clone(),
            groups: r.user.groups.clone(),
            extra: Default::default(),
        };
        let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        let info = match &r.path {
            Some(path) => RequestInfo {
                path: path.clone(),
                verb: RequestVerb::named(&r.verb.to_lowercase()),
                ..RequestInfo::default()
            },
            None => RequestInfo {
                is_resource: true,
                verb: RequestVerb::named(&r.verb),
                api_prefix: if r.group.is_empty() { "api" } else { "apis" }.to_owned(),
                group: r.group.clone(),
                namespace: some(&r.namespace),
                resource: r.resource.clone(),
                subresource: some(&r.subresource).map(|s| RequestSubresource::named(&s)),
                name: some(&r.name),
                ..RequestInfo::default()
            },
        };
        match self.0.authorize(&auth::Attributes { user: &user, info: &info }) {
            auth::Decision::Allow => k1s_cel::AuthzDecision { allowed: true, ..Default::default() },
            auth::Decision::Deny(reason) => k1s_cel::AuthzDecision { allowed: false, reason, error: None },
            auth::Decision::NoOpinion(reason) => k1s_cel::AuthzDecision { allowed: false, reason, error: None },
        }
    }
}

/// `authorizer` and `authorizer.requestResource` for the user and resource of `attrs`.
pub fn variables(
    authorize: &Arc<dyn k1s_cel::Authorize>,
    attrs: &Attributes<'_>,
) -> [(&'static str, k1s_cel::Value); 2] {
    let u = attrs.user;
    let user = k1s_cel::AuthzUser { name: u.name.clone(), uid: u.uid.clone(), groups: u.groups.clone() };
    let r = attrs.resource;
    let request_resource = k1s_cel::request_resource(
        Arc::clone(authorize),
        user.clone(),
        r.group,
        r.resource,
        attrs.subresource.unwrap_or_default(),
        attrs.namespace.unwrap_or_default(),
        attrs.name,
    );
    [("authorizer", k1s_cel::authorizer(Arc::clone(authorize), user)), ("authorizer.requestResource", request_resource)]
}
