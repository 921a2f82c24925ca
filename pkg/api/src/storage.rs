//! The well-known names persistent storage is coordinated by: annotations and finalizers the
//! admission plugins, the PersistentVolume binder and the kubelet's local-path provisioner
//! write and read, and the default class's provisioner.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

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
