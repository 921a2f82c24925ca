//! Who may use the kubelet's API: clients whose certificate the cluster CA signed
//! (authentication, done by TLS), and among them only the API server's kubelet client identity
//! or members of `system:masters` (authorization). Anything else gets upstream's 401 or 403.

use x509_parser::prelude::*;

/// The API server's identity towards kubelets (upstream's `kube-apiserver-kubelet-client`).
pub const APISERVER_KUBELET_CLIENT: &str = "kube-apiserver-kubelet-client";
/// The group that may do anything.
pub const MASTERS_GROUP: &str = "system:masters";

/// A verified client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub user: String,
    pub groups: Vec<String>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AuthError {
    /// No client certificate, or one that cannot be read: 401.
    #[error("Unauthorized")]
    Unauthenticated,
    /// A valid client that may not use the kubelet: 403 with upstream's text.
    #[error("Forbidden (user={user}, verb={verb}, resource=nodes, subresource={subresource})")]
    Forbidden { user: String, verb: &'static str, subresource: &'static str },
}

/// The identity in the verified leaf certificate: CN is the user, O the groups.
pub fn identify(peer_certificates: &[Vec<u8>]) -> Result<Identity, AuthError> {
    let leaf = peer_certificates.first().ok_or(AuthError::Unauthenticated)?;
    let (_, cert) = parse_x509_certificate(leaf).map_err(|_| AuthError::Unauthenticated)?;
    let user = cert
        .subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .ok_or(AuthError::Unauthenticated)?
        .to_string();
    let groups = cert.subject().iter_organization().filter_map(|o| o.as_str().ok()).map(str::to_string).collect();
    Ok(Identity { user, groups })
}

/// Whether `id` may make this request (`verb` and `subresource` name it as upstream's kubelet
/// authorizer does: `nodes/proxy` for logs and streaming).
pub fn authorize(id: &Identity, verb: &'static str, subresource: &'static str) -> Result<(), AuthError> {
    if id.user == APISERVER_KUBELET_CLIENT || id.groups.iter().any(|g| g == MASTERS_GROUP) {
        return Ok(());
    }
    Err(AuthError::Forbidden { user: id.user.clone(), verb, subresource })
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn only_the_apiserver_and_masters_are_allowed() {
        let api = identify(&[cert(APISERVER_KUBELET_CLIENT, &[MASTERS_GROUP])]).expect("identity");
        assert_eq!(api.user, APISERVER_KUBELET_CLIENT);
        assert_eq!(authorize(&api, "get", "proxy"), Ok(()));
        let admin = identify(&[cert("system:admin", &[MASTERS_GROUP])]).expect("identity");
        assert_eq!(authorize(&admin, "create", "proxy"), Ok(()));
        let bob = identify(&[cert("bob", &["devs"])]).expect("identity");
        let err = authorize(&bob, "create", "proxy").expect_err("bob is not allowed");
        assert_eq!(err.to_string(), "Forbidden (user=bob, verb=create, resource=nodes, subresource=proxy)");
    }

    #[test]
    fn no_certificate_is_unauthenticated() {
        assert_eq!(identify(&[]), Err(AuthError::Unauthenticated));
        assert_eq!(identify(&[b"junk".to_vec()]), Err(AuthError::Unauthenticated));
    }
}
