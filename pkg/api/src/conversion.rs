//! Resources served in more than one version: their versions share one storage prefix, objects
//! are kept in one of them (upstream's storage version) and converted on the way in and out, so
//! that every version reads every object, whichever version wrote it.
//!
//! Among the built-ins only `horizontalpodautoscalers` has two versions (`autoscaling/v2`,
//! stored, and `autoscaling/v1`); custom resources have as many as their definition serves.

use crate::resources::ResourceInfo;
use crate::strategies::autoscaling;
use serde_json::Value;

#[derive(Debug, thiserror::Error)]
pub enum ConversionError {
    #[error("no conversion from {from} to {to}")]
    Unsupported { from: String, to: String },
    #[error(transparent)]
    Autoscaling(#[from] autoscaling::ConversionError),
}

/// The version objects of `info`'s resource are stored in, when it is served in more than one.
pub fn storage_version(info: &ResourceInfo) -> Option<&'static str> {
    if let Some(c) = &info.custom {
        return Some(c.storage_version);
    }
    match (info.group, info.resource) {
        ("autoscaling", "horizontalpodautoscalers") => Some("v2"),
        _ => None,
    }
}

/// Discovery's `storageVersionHash` of a stored resource (upstream's `StorageVersionHash`: the
/// first 8 bytes of the SHA-256 of `<group>/<version>/<Kind>` of the version kept in the store,
/// base64): it changes when the storage version does. Kinds the server computes have none.
pub fn storage_version_hash(info: &ResourceInfo) -> Option<String> {
    use base64::Engine as _;
    use sha2::Digest as _;
    if info.backing == crate::resources::Backing::Virtual || info.group == crate::metrics::GROUP {
        return None;
    }
    // events.k8s.io's Events are the core group's, kept as v1 Events.
    let (group, version) = match (info.group, info.resource) {
        ("events.k8s.io", "events") => ("", "v1"),
        _ => (info.group, storage_version(info).unwrap_or(info.version)),
    };
    let digest = sha2::Sha256::digest(format!("{group}/{version}/{}", info.kind));
    Some(base64::engine::general_purpose::STANDARD.encode(&digest[..8]))
}

/// Whether objects read or written through `info` are in another version in the store.
pub fn converts(info: &ResourceInfo) -> bool {
    storage_version(info).is_some_and(|s| s != info.version)
}

/// `obj` (of any version of `info`'s resource) in version `to`; unchanged when already in it.
pub fn convert(obj: Value, info: &ResourceInfo, to: &str) -> Result<Value, ConversionError> {
    let from = obj.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_string();
    let want = if info.group.is_empty() { to.to_string() } else { format!("{}/{to}", info.group) };
    if from == want {
        return Ok(obj);
    }
    if info.custom.is_some() {
        // Custom resources convert by their apiVersion alone (upstream's `None` strategy).
        let mut obj = obj;
        if let Some(m) = obj.as_object_mut() {
            m.insert("apiVersion".into(), Value::String(want));
        }
        return Ok(obj);
    }
    match (info.group, info.resource, from.as_str(), to) {
        ("autoscaling", "horizontalpodautoscalers", "autoscaling/v2", "v1") => Ok(autoscaling::v2_to_v1(obj)?),
        ("autoscaling", "horizontalpodautoscalers", "autoscaling/v1", "v2") => Ok(autoscaling::v1_to_v2(obj)?),
        _ => Err(ConversionError::Unsupported { from, to: want }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources;
    use serde_json::json;

    #[test]
    fn storage_version_hashes_are_upstreams() {
        let hash = |g, v, r| storage_version_hash(resources::find(g, v, r).expect("resource"));
        // The values a v1.35 kube-apiserver's discovery shows.
        assert_eq!(hash("", "v1", "configmaps").as_deref(), Some("qFsyl6wFWjQ="));
        assert_eq!(hash("", "v1", "pods").as_deref(), Some("xPOwRZ+Yhw8="));
        assert_eq!(hash("apps", "v1", "deployments").as_deref(), Some("8aSe+NMegvE="));
        assert_eq!(hash("", "v1", "events"), hash("events.k8s.io", "v1", "events"));
        assert_eq!(
            hash("autoscaling", "v1", "horizontalpodautoscalers"),
            hash("autoscaling", "v2", "horizontalpodautoscalers")
        );
        assert_eq!(hash("authorization.k8s.io", "v1", "selfsubjectaccessreviews"), None);
    }

    #[test]
    fn hpas_are_stored_in_v2_and_read_in_either_version() {
        let v1 = resources::find("autoscaling", "v1", "horizontalpodautoscalers").expect("v1");
        let v2 = resources::find("autoscaling", "v2", "horizontalpodautoscalers").expect("v2");
        assert_eq!(storage_version(v1), Some("v2"));
        assert!(converts(v1) && !converts(v2));
        let cm = resources::find("", "v1", "configmaps").expect("configmaps");
        assert!(storage_version(cm).is_none() && !converts(cm));
        let obj = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "a"},
                         "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "a"}, "maxReplicas": 2}});
        let stored = convert(obj.clone(), v1, "v2").expect("to v2");
        assert_eq!(stored["apiVersion"], "autoscaling/v2");
        assert_eq!(convert(stored.clone(), v2, "v2").expect("same version"), stored);
        let back = convert(stored, v2, "v1").expect("to v1");
        assert_eq!(back["spec"]["maxReplicas"], 2);
        assert_eq!(back["apiVersion"], "autoscaling/v1");
        assert!(matches!(
            convert(json!({"apiVersion": "autoscaling/v2beta9"}), v1, "v1"),
            Err(ConversionError::Unsupported { .. })
        ));
    }
}
