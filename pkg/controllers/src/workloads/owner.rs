//! Owner references and `ControllerRefManager` semantics: a controller owns the objects whose
//! controller reference carries its UID, adopts orphans its selector matches (after re-reading
//! itself from the API to make sure it is not being deleted), and releases owned objects its
//! selector no longer matches.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, Patch, PatchParams};
use kube::Resource;
use serde::de::DeserializeOwned;
use serde_json::json;
use std::fmt::Debug;
use std::sync::Arc;

pub use k1s_runtime::informer::controller_of;

/// Whether `meta`'s controller is the object with `uid`.
pub fn is_controlled_by(meta: &ObjectMeta, uid: &str) -> bool {
    controller_of(meta).is_some_and(|r| r.uid == uid)
}

/// A controller reference to `owner` (`controller` and `blockOwnerDeletion` set).
pub fn controller_ref<K: Resource<DynamicType = ()>>(owner: &K) -> OwnerReference {
    let meta = owner.meta();
    OwnerReference {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// What a controller does with an object it found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// Already ours and still selected.
    Owned,
    /// An orphan we select: take it.
    Adopt,
    /// Ours but no longer selected: let it go.
    Release,
    /// Someone else's, or not for us.
    Ignore,
}

/// `ClaimObject`: the decision for one object, given whether the owner selects it.
pub fn claim(owner: &ObjectMeta, obj: &ObjectMeta, selected: bool) -> Claim {
    let owner_uid = owner.uid.as_deref().unwrap_or_default();
    let owner_deleting = owner.deletion_timestamp.is_some();
    if let Some(r) = controller_of(obj) {
        if r.uid != owner_uid {
            return Claim::Ignore;
        }
        if selected {
            return Claim::Owned;
        }
        return if owner_deleting { Claim::Ignore } else { Claim::Release };
    }
    if owner_deleting || !selected || obj.deletion_timestamp.is_some() || owner.namespace != obj.namespace {
        return Claim::Ignore;
    }
    Claim::Adopt
}

/// Errors of adopting and releasing.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    #[error("re-reading {kind} {namespace}/{name} before adopting: {error}")]
    RecheckOwner { kind: String, namespace: String, name: String, error: kube::Error },
    #[error("{kind} {namespace}/{name} is gone or being deleted; not adopting")]
    OwnerGone { kind: String, namespace: String, name: String },
    #[error("adopting {child} {namespace}/{name}: {error}")]
    Adopt { child: String, namespace: String, name: String, error: kube::Error },
    #[error("releasing {child} {namespace}/{name}: {error}")]
    Release { child: String, namespace: String, name: String, error: kube::Error },
}

fn ignorable(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404 || s.code == 422)
}

/// `ClaimObjects`: adopts and releases as [`claim`] decides and returns the objects owned
/// afterwards (adopted ones with the new controller reference and `finalizer`, if given, as the
/// patch left them). Before the first adoption the owner is re-read from the API and must still
/// have the same UID and no deletion timestamp.
pub async fn claim_all<O, T>(
    owner: &O,
    owner_api: &Api<O>,
    child_api: &Api<T>,
    children: Vec<Arc<T>>,
    selected: impl Fn(&T) -> bool,
    finalizer: Option<&str>,
) -> Result<Vec<Arc<T>>, ClaimError>
where
    O: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    T: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let ometa = owner.meta();
    let (kind, namespace, name) = (
        O::kind(&()).into_owned(),
        ometa.namespace.clone().unwrap_or_default(),
        ometa.name.clone().unwrap_or_default(),
    );
    let child_kind = T::kind(&()).into_owned();
    let mut owned = Vec::with_capacity(children.len());
    let mut rechecked = false;
    for child in children {
        let cmeta = child.meta();
        let cname = cmeta.name.clone().unwrap_or_default();
        match claim(ometa, cmeta, selected(&child)) {
            Claim::Owned => owned.push(child),
            Claim::Ignore => {}
            Claim::Release => {
                let patch = json!({"metadata": {
                    "ownerReferences": [{"$patch": "delete", "uid": ometa.uid}],
                    "uid": cmeta.uid,
                }});
                if let Err(error) = child_api.patch(&cname, &PatchParams::default(), &Patch::Strategic(&patch)).await {
                    if !ignorable(&error) {
                        return Err(ClaimError::Release { child: child_kind, namespace, name: cname, error });
                    }
                }
            }
            Claim::Adopt => {
                if !rechecked {
                    let fresh = owner_api.get(&name).await.map_err(|error| ClaimError::RecheckOwner {
                        kind: kind.clone(),
                        namespace: namespace.clone(),
                        name: name.clone(),
                        error,
                    })?;
                    if fresh.meta().uid != ometa.uid || fresh.meta().deletion_timestamp.is_some() {
                        return Err(ClaimError::OwnerGone { kind, namespace, name });
                    }
                    rechecked = true;
                }
                let mut md = json!({
                    "ownerReferences": [controller_ref(owner)],
                    "uid": cmeta.uid,
                });
                if let Some(f) = finalizer {
                    md["finalizers"] = json!([f]);
                }
                let patch = json!({ "metadata": md });
                match child_api.patch(&cname, &PatchParams::default(), &Patch::Strategic(&patch)).await {
                    Ok(adopted) => owned.push(Arc::new(adopted)),
                    Err(error) if ignorable(&error) => {}
                    Err(error) => {
                        return Err(ClaimError::Adopt { child: child_kind, namespace, name: cname, error });
                    }
                }
            }
        }
    }
    Ok(owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn meta(uid: &str, controller: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            name: Some(uid.into()),
            namespace: Some("ns".into()),
            uid: Some(uid.into()),
            owner_references: controller
                .map(|c| vec![OwnerReference { uid: c.into(), controller: Some(true), ..Default::default() }]),
            ..Default::default()
        }
    }

    fn deleting(mut m: ObjectMeta) -> ObjectMeta {
        m.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        m
    }

    #[test]
    fn owned_and_selected_objects_stay_owned() {
        assert_eq!(claim(&meta("rs", None), &meta("p", Some("rs")), true), Claim::Owned);
    }

    #[test]
    fn orphans_that_match_are_adopted_unless_anyone_is_being_deleted() {
        assert_eq!(claim(&meta("rs", None), &meta("p", None), true), Claim::Adopt);
        assert_eq!(claim(&meta("rs", None), &meta("p", None), false), Claim::Ignore);
        assert_eq!(claim(&deleting(meta("rs", None)), &meta("p", None), true), Claim::Ignore);
        assert_eq!(claim(&meta("rs", None), &deleting(meta("p", None)), true), Claim::Ignore);
    }

    #[test]
    fn owned_objects_that_no_longer_match_are_released_unless_the_owner_is_being_deleted() {
        assert_eq!(claim(&meta("rs", None), &meta("p", Some("rs")), false), Claim::Release);
        assert_eq!(claim(&deleting(meta("rs", None)), &meta("p", Some("rs")), false), Claim::Ignore);
    }

    #[test]
    fn objects_of_other_controllers_and_namespaces_are_ignored() {
        assert_eq!(claim(&meta("rs", None), &meta("p", Some("other")), true), Claim::Ignore);
        let mut elsewhere = meta("p", None);
        elsewhere.namespace = Some("other".into());
        assert_eq!(claim(&meta("rs", None), &elsewhere, true), Claim::Ignore);
    }

    #[test]
    fn controller_ref_blocks_owner_deletion() {
        let rs = k8s_openapi::api::apps::v1::ReplicaSet { metadata: meta("rs", None), ..Default::default() };
        let r = controller_ref(&rs);
        assert_eq!((r.kind.as_str(), r.api_version.as_str()), ("ReplicaSet", "apps/v1"));
        assert_eq!((r.controller, r.block_owner_deletion), (Some(true), Some(true)));
    }
}
