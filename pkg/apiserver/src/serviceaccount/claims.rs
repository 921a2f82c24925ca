//! ServiceAccount token claims (upstream `pkg/serviceaccount/claims.go`): building them for
//! a TokenRequest and validating presented ones against the time, issuer, audiences and the
//! objects they are bound to.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// Clock skew tolerated on `exp`, `nbf` and `iat` (go-jose's default leeway), and how long an
/// object being deleted keeps its tokens valid.
pub const LEEWAY_SECONDS: i64 = 60;

pub const EXTRA_POD_NAME: &str = "authentication.kubernetes.io/pod-name";
pub const EXTRA_POD_UID: &str = "authentication.kubernetes.io/pod-uid";
pub const EXTRA_NODE_NAME: &str = "authentication.kubernetes.io/node-name";
pub const EXTRA_NODE_UID: &str = "authentication.kubernetes.io/node-uid";
pub const EXTRA_CREDENTIAL_ID: &str = "authentication.kubernetes.io/credential-id";

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRef {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub uid: String,
}

/// The `kubernetes.io` private claims (keys in upstream's serialized order).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubernetesClaims {
    #[serde(default)]
    pub namespace: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<ObjectRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<ObjectRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<ObjectRef>,
    #[serde(default)]
    pub serviceaccount: ObjectRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warnafter: Option<i64>,
}

/// All claims of a ServiceAccount token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    #[serde(default, deserialize_with = "one_or_many")]
    pub aud: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exp: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iat: Option<i64>,
    #[serde(default)]
    pub iss: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jti: Option<String>,
    #[serde(rename = "kubernetes.io")]
    pub kubernetes: KubernetesClaims,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<i64>,
    #[serde(default)]
    pub sub: String,
}

fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Aud {
        One(String),
        Many(Vec<String>),
    }
    Ok(match Aud::deserialize(d)? {
        Aud::One(s) => vec![s],
        Aud::Many(v) => v,
    })
}

/// `system:serviceaccount:<namespace>:<name>`.
pub fn username(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// What a token is bound to besides its ServiceAccount.
#[derive(Clone, Debug, Default)]
pub struct Binding {
    pub pod: Option<ObjectRef>,
    pub secret: Option<ObjectRef>,
    pub node: Option<ObjectRef>,
}

/// The claims of a new token issued at `now` (unix seconds) valid for `expiration_seconds`.
pub struct NewToken<'a> {
    pub issuer: &'a str,
    pub namespace: &'a str,
    pub service_account: ObjectRef,
    pub binding: Binding,
    pub audiences: Vec<String>,
    pub now: i64,
    pub expiration_seconds: i64,
    /// For pod-bound tokens whose lifetime was extended: when their requested lifetime ends.
    pub warn_after_seconds: Option<i64>,
    pub jti: String,
}

impl NewToken<'_> {
    pub fn claims(self) -> Claims {
        Claims {
            aud: self.audiences,
            exp: Some(self.now.saturating_add(self.expiration_seconds)),
            iat: Some(self.now),
            iss: self.issuer.to_string(),
            jti: Some(self.jti),
            kubernetes: KubernetesClaims {
                namespace: self.namespace.to_string(),
                node: self.binding.node,
                pod: self.binding.pod,
                secret: self.binding.secret,
                warnafter: self.warn_after_seconds.map(|w| self.now.saturating_add(w)),
                serviceaccount: self.service_account.clone(),
            },
            nbf: Some(self.now),
            sub: username(self.namespace, &self.service_account.name),
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ClaimsError {
    #[error("token claims are malformed: {0}")]
    Malformed(String),
    #[error("token issuer {0:?} is not this API server")]
    Issuer(String),
    #[error("service account token has expired")]
    Expired,
    #[error("service account token is not valid yet")]
    NotValidYet,
    #[error("service account token is issued in the future")]
    IssuedInTheFuture,
    #[error("token audiences {token:?} is invalid for the target audiences {wanted:?}")]
    Audience { token: Vec<String>, wanted: Vec<String> },
    #[error("{kind} {name:?} the token is bound to does not exist or has been deleted")]
    Deleted { kind: &'static str, name: String },
    #[error("{kind} UID ({actual}) does not match claim ({claimed})")]
    Uid { kind: &'static str, actual: String, claimed: String },
    #[error("looking up {kind} {name:?}: {message}")]
    Lookup { kind: &'static str, name: String, message: String },
}

/// Parses verified claims.
pub fn parse(value: Value) -> Result<Claims, ClaimsError> {
    let c: Claims = serde_json::from_value(value).map_err(|e| ClaimsError::Malformed(e.to_string()))?;
    if c.kubernetes.namespace.is_empty() || c.kubernetes.serviceaccount.name.is_empty() {
        return Err(ClaimsError::Malformed("namespace and service account name are required".into()));
    }
    Ok(c)
}

/// The issuer, the validity window (with [`LEEWAY_SECONDS`]) and the audiences: at least one
/// of the token's must be one of `wanted`.
pub fn check_public(c: &Claims, issuer: &str, wanted: &[String], now: i64) -> Result<(), ClaimsError> {
    if c.iss != issuer {
        return Err(ClaimsError::Issuer(c.iss.clone()));
    }
    if c.exp.is_some_and(|exp| now - LEEWAY_SECONDS >= exp) {
        return Err(ClaimsError::Expired);
    }
    if c.nbf.is_some_and(|nbf| now + LEEWAY_SECONDS < nbf) {
        return Err(ClaimsError::NotValidYet);
    }
    if c.iat.is_some_and(|iat| now + LEEWAY_SECONDS < iat) {
        return Err(ClaimsError::IssuedInTheFuture);
    }
    if !c.aud.iter().any(|a| wanted.contains(a)) {
        return Err(ClaimsError::Audience { token: c.aud.clone(), wanted: wanted.to_vec() });
    }
    Ok(())
}

/// Reads objects tokens are bound to; `Ok(None)` when absent.
pub trait ObjectGetter: Send + Sync {
    /// `resource` is a core/v1 resource (`serviceaccounts`, `pods`, `secrets`, `nodes`).
    fn get_object(&self, resource: &str, namespace: Option<&str>, name: &str) -> Result<Option<Value>, String>;
}

/// Who a valid token speaks for (upstream's `ServiceAccountInfo`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServiceAccountInfo {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub pod_name: String,
    pub pod_uid: String,
    pub node_name: String,
    pub node_uid: String,
    pub credential_id: String,
}

impl ServiceAccountInfo {
    /// The user: `system:serviceaccount:<ns>:<name>` in `system:serviceaccounts`,
    /// `system:serviceaccounts:<ns>` and `system:authenticated`, with the binding as extras.
    pub fn user_info(&self) -> crate::auth::UserInfo {
        let mut extra = BTreeMap::new();
        if !self.pod_name.is_empty() && !self.pod_uid.is_empty() {
            extra.insert(EXTRA_POD_NAME.to_string(), vec![self.pod_name.clone()]);
            extra.insert(EXTRA_POD_UID.to_string(), vec![self.pod_uid.clone()]);
        }
        if !self.credential_id.is_empty() {
            extra.insert(EXTRA_CREDENTIAL_ID.to_string(), vec![self.credential_id.clone()]);
        }
        if !self.node_name.is_empty() {
            extra.insert(EXTRA_NODE_NAME.to_string(), vec![self.node_name.clone()]);
            if !self.node_uid.is_empty() {
                extra.insert(EXTRA_NODE_UID.to_string(), vec![self.node_uid.clone()]);
            }
        }
        crate::auth::UserInfo {
            name: username(&self.namespace, &self.name),
            uid: self.uid.clone(),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{}", self.namespace),
                "system:authenticated".into(),
            ],
            extra,
        }
    }
}

/// Seconds since the epoch of an RFC 3339 `metadata.deletionTimestamp`.
fn deletion_time(obj: &Value) -> Option<i64> {
    let ts = obj.pointer("/metadata/deletionTimestamp")?.as_str()?;
    ts.parse::<jiff::Timestamp>().ok().map(|t| t.as_second())
}

/// The bound object must exist with the claimed UID and not have been deleted more than
/// [`LEEWAY_SECONDS`] ago.
fn check_object(
    getter: &dyn ObjectGetter,
    kind: &'static str,
    resource: &str,
    namespace: Option<&str>,
    r: &ObjectRef,
    now: i64,
) -> Result<(), ClaimsError> {
    let obj = getter
        .get_object(resource, namespace, &r.name)
        .map_err(|message| ClaimsError::Lookup { kind, name: r.name.clone(), message })?
        .ok_or_else(|| ClaimsError::Deleted { kind, name: r.name.clone() })?;
    if deletion_time(&obj).is_some_and(|t| t < now - LEEWAY_SECONDS) {
        return Err(ClaimsError::Deleted { kind, name: r.name.clone() });
    }
    let uid = obj.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("");
    if uid != r.uid {
        return Err(ClaimsError::Uid { kind, actual: uid.to_string(), claimed: r.uid.clone() });
    }
    Ok(())
}

/// The private claims against the store: the ServiceAccount and the bound pod, secret or node
/// must still exist with the same UIDs.
pub fn check_objects(c: &Claims, getter: &dyn ObjectGetter, now: i64) -> Result<ServiceAccountInfo, ClaimsError> {
    let k = &c.kubernetes;
    let ns = Some(k.namespace.as_str());
    check_object(getter, "service account", "serviceaccounts", ns, &k.serviceaccount, now)?;
    if let Some(secret) = &k.secret {
        check_object(getter, "secret", "secrets", ns, secret, now)?;
    }
    let mut info = ServiceAccountInfo {
        namespace: k.namespace.clone(),
        name: k.serviceaccount.name.clone(),
        uid: k.serviceaccount.uid.clone(),
        credential_id: c.jti.as_deref().filter(|j| !j.is_empty()).map(|j| format!("JTI={j}")).unwrap_or_default(),
        ..Default::default()
    };
    if let Some(pod) = &k.pod {
        check_object(getter, "pod", "pods", ns, pod, now)?;
        info.pod_name = pod.name.clone();
        info.pod_uid = pod.uid.clone();
    }
    if let Some(node) = &k.node {
        // A pod-bound token only reports the pod's node; a node-bound one needs the node.
        if k.pod.is_none() {
            check_object(getter, "node", "nodes", None, node, now)?;
        }
        info.node_name = node.name.clone();
        info.node_uid = node.uid.clone();
    }
    if let Some(w) = k.warnafter.filter(|w| now > *w) {
        tracing::debug!(user = %username(&info.namespace, &info.name), seconds_after_warning = now - w,
            "a service account token past its requested lifetime was used");
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::HashMap;

    const ISS: &str = "https://kubernetes.default.svc.cluster.local";

    #[derive(Default)]
    struct Objects(HashMap<String, Value>);

    impl Objects {
        fn put(&mut self, resource: &str, ns: Option<&str>, name: &str, uid: &str) {
            let key = format!("{resource}/{}/{name}", ns.unwrap_or(""));
            self.0.insert(key, json!({"metadata": {"name": name, "uid": uid}}));
        }
    }

    impl ObjectGetter for Objects {
        fn get_object(&self, resource: &str, ns: Option<&str>, name: &str) -> Result<Option<Value>, String> {
            Ok(self.0.get(&format!("{resource}/{}/{name}", ns.unwrap_or(""))).cloned())
        }
    }

    fn token(now: i64, binding: Binding) -> Claims {
        NewToken {
            issuer: ISS,
            namespace: "ns",
            service_account: ObjectRef { name: "sa".into(), uid: "sa-uid".into() },
            binding,
            audiences: vec![ISS.into()],
            now,
            expiration_seconds: 3600,
            warn_after_seconds: None,
            jti: "j1".into(),
        }
        .claims()
    }

    #[test]
    fn claims_serialize_like_upstream_and_parse_back() {
        let pod = ObjectRef { name: "p".into(), uid: "p-uid".into() };
        let node = ObjectRef { name: "n".into(), uid: "n-uid".into() };
        let c = token(1000, Binding { pod: Some(pod), node: Some(node), secret: None });
        let v = serde_json::to_value(&c).expect("json");
        assert_eq!(
            v,
            json!({"aud": [ISS], "exp": 4600, "iat": 1000, "iss": ISS, "jti": "j1", "nbf": 1000,
                   "sub": "system:serviceaccount:ns:sa",
                   "kubernetes.io": {"namespace": "ns", "serviceaccount": {"name": "sa", "uid": "sa-uid"},
                                     "pod": {"name": "p", "uid": "p-uid"}, "node": {"name": "n", "uid": "n-uid"}}})
        );
        assert_eq!(parse(v).expect("parse"), c);
        let mut single = serde_json::to_value(&c).expect("json");
        single["aud"] = json!(ISS);
        assert_eq!(parse(single).expect("parse").aud, vec![ISS.to_string()]);
    }

    #[test]
    fn expired_early_and_foreign_tokens_are_rejected_with_leeway() {
        let aud = vec![ISS.to_string()];
        let c = token(1000, Binding::default());
        assert_eq!(check_public(&c, ISS, &aud, 1000), Ok(()));
        assert_eq!(check_public(&c, ISS, &aud, 4600 + 59), Ok(()), "within the leeway");
        assert_eq!(check_public(&c, ISS, &aud, 4600 + 60), Err(ClaimsError::Expired));
        assert_eq!(check_public(&c, ISS, &aud, 1000 - 61), Err(ClaimsError::NotValidYet));
        assert_eq!(check_public(&c, "https://other", &aud, 1000), Err(ClaimsError::Issuer(ISS.into())));
        let wanted = vec!["vault".to_string()];
        assert!(matches!(check_public(&c, ISS, &wanted, 1000), Err(ClaimsError::Audience { .. })));
    }

    #[test]
    fn bound_objects_must_exist_with_the_same_uid() {
        let mut objs = Objects::default();
        objs.put("serviceaccounts", Some("ns"), "sa", "sa-uid");
        objs.put("pods", Some("ns"), "p", "p-uid");
        let pod = Some(ObjectRef { name: "p".into(), uid: "p-uid".into() });
        let node = Some(ObjectRef { name: "n".into(), uid: "n-uid".into() });
        let c = token(1000, Binding { pod, node, secret: None });
        let info = check_objects(&c, &objs, 1000).expect("valid");
        let user = info.user_info();
        assert_eq!(user.name, "system:serviceaccount:ns:sa");
        assert_eq!(user.uid, "sa-uid");
        assert_eq!(user.groups, ["system:serviceaccounts", "system:serviceaccounts:ns", "system:authenticated"]);
        assert_eq!(user.extra[EXTRA_POD_NAME], ["p"]);
        assert_eq!(user.extra[EXTRA_POD_UID], ["p-uid"]);
        assert_eq!(user.extra[EXTRA_NODE_NAME], ["n"], "the pod's node is reported without a lookup");
        assert_eq!(user.extra[EXTRA_CREDENTIAL_ID], ["JTI=j1"]);

        objs.put("pods", Some("ns"), "p", "recreated");
        assert!(matches!(check_objects(&c, &objs, 1000), Err(ClaimsError::Uid { kind: "pod", .. })));
        objs.0.clear();
        assert!(matches!(check_objects(&c, &objs, 1000), Err(ClaimsError::Deleted { kind: "service account", .. })));
    }

    #[test]
    fn objects_being_deleted_keep_tokens_valid_for_the_leeway_only() {
        let mut objs = Objects::default();
        objs.put("serviceaccounts", Some("ns"), "sa", "sa-uid");
        let c = token(1_700_000_000, Binding::default());
        let sa = objs.0.get_mut("serviceaccounts/ns/sa").expect("sa");
        sa["metadata"]["deletionTimestamp"] = json!("2023-11-14T22:13:20Z"); // 1_700_000_000
        assert!(check_objects(&c, &objs, 1_700_000_030).is_ok());
        assert!(check_objects(&c, &objs, 1_700_000_061).is_err());
    }
}
