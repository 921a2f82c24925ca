//! The well-known names persistent storage is coordinated by: annotations and finalizers the
//! admission plugins, the PersistentVolume binder and the kubelet's local-path provisioner
//! write and read, and the default class's provisioner.

use crate::selectors::Selector;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::BTreeMap;

/// The provisioner of the default `local-path` StorageClass (the kubelet's).
pub const LOCAL_PATH_PROVISIONER: &str = "k1s.io/local-path";
pub const IS_DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";
pub const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
pub const STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
pub const BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
pub const PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
pub const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
pub const BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
pub const PVC_PROTECTION: &str = "kubernetes.io/pvc-protection";
pub const PV_PROTECTION: &str = "kubernetes.io/pv-protection";

/// The annotation `key` of an object.
pub fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref().and_then(|a| a.get(key)).map(String::as_str)
}

/// Whether a class binds its claims only once a pod uses them (`WaitForFirstConsumer`).
pub fn waits_for_first_consumer(class: &StorageClass) -> bool {
    class.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer")
}

/// The provisioner that makes volumes for a class, if it has one (not empty, not
/// `kubernetes.io/no-provisioner`).
pub fn dynamic_provisioner(class: &StorageClass) -> Option<&str> {
    Some(class.provisioner.as_str()).filter(|p| !p.is_empty() && *p != "kubernetes.io/no-provisioner")
}

/// Bytes of a quantity such as `1Gi` or `500M` (`None` when it does not parse).
pub fn bytes(q: &Quantity) -> Option<u128> {
    let s = q.0.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    let num: f64 = num.parse().ok()?;
    let mult: f64 = match suffix {
        "" => 1.0,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        "m" => 1e-3,
        _ => return None,
    };
    Some((num * mult).ceil() as u128)
}

/// A claim's storage class name (`""` for none).
pub fn claim_class(c: &PersistentVolumeClaim) -> &str {
    c.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()).unwrap_or("")
}

/// A volume's storage class name (`""` for none).
pub fn volume_class(v: &PersistentVolume) -> &str {
    v.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()).unwrap_or("")
}

/// The storage a claim requests, in bytes.
pub fn requested(c: &PersistentVolumeClaim) -> u128 {
    c.spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .and_then(bytes)
        .unwrap_or(0)
}

/// The storage a volume holds, in bytes.
pub fn capacity(v: &PersistentVolume) -> u128 {
    v.spec.as_ref().and_then(|s| s.capacity.as_ref()).and_then(|c| c.get("storage")).and_then(bytes).unwrap_or(0)
}

fn volume_mode(mode: Option<&String>) -> &str {
    mode.map_or("Filesystem", String::as_str)
}

pub fn volume_phase(v: &PersistentVolume) -> &str {
    v.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("Pending")
}

pub fn claim_phase(c: &PersistentVolumeClaim) -> &str {
    c.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("Pending")
}

/// The volume a claim's `spec.volumeName` names (`""` for none).
pub fn volume_name(c: &PersistentVolumeClaim) -> &str {
    c.spec.as_ref().and_then(|s| s.volume_name.as_deref()).unwrap_or("")
}

/// Whether the binding of a claim is complete (upstream's `isPVCFullyBound`): it names its
/// volume and the binder has marked it `bind-completed`.
pub fn fully_bound(c: &PersistentVolumeClaim) -> bool {
    !volume_name(c).is_empty() && annotation(&c.metadata, BIND_COMPLETED).is_some()
}

/// Whether `volume`'s claimRef names `claim` (by namespace and name, and uid when it has one).
pub fn names(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    let Some(r) = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else { return false };
    r.name.as_deref() == claim.metadata.name.as_deref()
        && r.namespace.as_deref() == claim.metadata.namespace.as_deref()
        && r.uid.as_deref().is_none_or(|u| u.is_empty() || Some(u) == claim.metadata.uid.as_deref())
}

/// Whether an unclaimed `volume` can hold `claim` (upstream's `findMatchingVolume` rules:
/// `Available`, not being deleted, same class and volume mode, the claim's access modes, enough
/// capacity, the claim's selector).
pub fn fits(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    let (Some(vs), Some(cs)) = (volume.spec.as_ref(), claim.spec.as_ref()) else { return false };
    if vs.claim_ref.is_some() || volume.metadata.deletion_timestamp.is_some() || volume_phase(volume) != "Available" {
        return false;
    }
    if volume_class(volume) != claim_class(claim) {
        return false;
    }
    if volume_mode(vs.volume_mode.as_ref()) != volume_mode(cs.volume_mode.as_ref()) {
        return false;
    }
    let modes = vs.access_modes.as_deref().unwrap_or_default();
    if !cs.access_modes.iter().flatten().all(|m| modes.contains(m)) {
        return false;
    }
    if capacity(volume) < requested(claim) {
        return false;
    }
    if let Some(sel) = &cs.selector {
        let parsed = serde_json::to_value(sel).ok().and_then(|v| Selector::from_label_selector(&v).ok());
        let no_labels = BTreeMap::new();
        if !parsed.is_some_and(|s| s.matches_map(volume.metadata.labels.as_ref().unwrap_or(&no_labels))) {
            return false;
        }
    }
    true
}
