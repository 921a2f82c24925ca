//! The local-path provisioner of the default `local-path` StorageClass, as k3s's
//! local-path-provisioner does it but inside the kubelet of the node that holds the volumes:
//!
//! - a claim the binder handed to `k1s.io/local-path` (its `volume.kubernetes.io/storage-provisioner`
//!   annotation) whose selected node is this one (or whose class binds `Immediate`) gets a
//!   PersistentVolume `pvc-<claim uid>`: a `DirectoryOrCreate` hostPath
//!   `<storage-dir>/pvc-<uid>_<namespace>_<name>`, the claim's size and access modes, the
//!   class's reclaim policy, node affinity to this node, and a `claimRef` to the claim, which
//!   the binder then completes;
//! - a volume it made that is `Released` under reclaim policy `Delete` has its directory
//!   removed, then is deleted.

use crate::Shared;
use k1s_api::storage::{
    annotation, LOCAL_PATH_PROVISIONER as PROVISIONER, PROVISIONED_BY, SELECTED_NODE, STORAGE_PROVISIONER,
};
use k1s_runtime::changes::{signal, sync_on_changes};
use k1s_runtime::events::EventType;
use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::{reflector, watcher, WatchStreamExt};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The directory of a claim's volume under `storage_dir`.
pub fn volume_dir(storage_dir: &Path, claim: &PersistentVolumeClaim) -> PathBuf {
    let m = &claim.metadata;
    storage_dir.join(format!(
        "pvc-{}_{}_{}",
        m.uid.as_deref().unwrap_or_default(),
        m.namespace.as_deref().unwrap_or_default(),
        m.name.as_deref().unwrap_or_default()
    ))
}

/// The PersistentVolume for `claim` of `class`, on `node`, at `dir`.
pub fn volume_for(claim: &PersistentVolumeClaim, class: &StorageClass, node: &str, dir: &Path) -> serde_json::Value {
    let spec = claim.spec.clone().unwrap_or_default();
    let size = spec.resources.as_ref().and_then(|r| r.requests.as_ref()).and_then(|r| r.get("storage")).cloned();
    json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": format!("pvc-{}", claim.metadata.uid.as_deref().unwrap_or_default()),
            "annotations": {PROVISIONED_BY: PROVISIONER},
        },
        "spec": {
            "capacity": {"storage": size.map_or_else(|| "0".to_string(), |q| q.0)},
            "accessModes": spec.access_modes.unwrap_or_else(|| vec!["ReadWriteOnce".into()]),
            "persistentVolumeReclaimPolicy": class.reclaim_policy.clone().unwrap_or_else(|| "Delete".into()),
            "storageClassName": class.metadata.name,
            "volumeMode": spec.volume_mode.unwrap_or_else(|| "Filesystem".into()),
            "hostPath": {"path": dir.display().to_string(), "type": "DirectoryOrCreate"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}},
            "claimRef": {
                "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "name": claim.metadata.name, "namespace": claim.metadata.namespace,
                "uid": claim.metadata.uid, "resourceVersion": claim.metadata.resource_version,
            },
        },
    })
}

fn claim_ref(c: &PersistentVolumeClaim) -> ObjectReference {
    k1s_runtime::events::reference_to("v1", "PersistentVolumeClaim", &c.metadata)
}

/// Whether a volume's node affinity names `node`.
fn on_node(v: &PersistentVolume, node: &str) -> bool {
    v.spec.as_ref().and_then(|s| s.node_affinity.as_ref()).and_then(|a| a.required.as_ref()).is_some_and(|r| {
        r.node_selector_terms.iter().any(|t| {
            t.match_expressions.iter().flatten().any(|e| {
                e.key == "kubernetes.io/hostname" && e.operator == "In" && e.values.iter().flatten().any(|v| v == node)
            })
        })
    })
}

struct Provisioner {
    shared: Arc<Shared>,
    /// The provisioner's own client (`system:k1s-local-path-provisioner`): a kubelet may not
    /// create or delete PersistentVolumes.
    client: kube::Client,
    claims: reflector::Store<PersistentVolumeClaim>,
    volumes: reflector::Store<PersistentVolume>,
}

impl Provisioner {
    fn node(&self) -> &str {
        &self.shared.config.node_name
    }

    async fn provision(&self, c: &PersistentVolumeClaim) {
        let class_name = c.spec.as_ref().and_then(|s| s.storage_class_name.clone()).unwrap_or_default();
        let classes: Api<StorageClass> = Api::all(self.client.clone());
        let class = match classes.get_opt(&class_name).await {
            Ok(Some(class)) if class.provisioner == PROVISIONER => class,
            Ok(_) => return,
            Err(e) => {
                tracing::debug!(class = %class_name, error = %e, "reading a storage class failed");
                return;
            }
        };
        let immediate = !k1s_api::storage::waits_for_first_consumer(&class);
        match annotation(&c.metadata, SELECTED_NODE) {
            Some(n) if n != self.node() => return,
            None if !immediate => return,
            _ => {}
        }
        let dir = volume_dir(&self.shared.config.storage_dir, c);
        let who = format!(
            "{}/{}",
            c.metadata.namespace.as_deref().unwrap_or_default(),
            c.metadata.name.as_deref().unwrap_or_default()
        );
        let made = tokio::fs::create_dir_all(&dir).await.and_then(|()| {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777))
        });
        let recorder = &self.shared.recorder;
        if let Err(e) = made {
            let msg =
                format!("failed to provision volume with StorageClass {class_name:?}: creating {}: {e}", dir.display());
            recorder.record(&claim_ref(c), EventType::Warning, "ProvisioningFailed", &msg).await;
            return;
        }
        let pv = volume_for(c, &class, self.node(), &dir);
        let name = pv["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let volumes: Api<PersistentVolume> = Api::all(self.client.clone());
        let pv: PersistentVolume = match serde_json::from_value(pv) {
            Ok(pv) => pv,
            Err(e) => {
                tracing::warn!(error = %e, "building a PersistentVolume failed");
                return;
            }
        };
        match volumes.create(&PostParams::default(), &pv).await {
            Ok(_) => {
                let msg = format!("Successfully provisioned volume {name}");
                recorder.record(&claim_ref(c), EventType::Normal, "ProvisioningSucceeded", &msg).await;
                tracing::info!(claim = %who, volume = %name, dir = %dir.display(), "provisioned a local-path volume");
            }
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => {
                let msg = format!("failed to provision volume with StorageClass {class_name:?}: {e}");
                recorder.record(&claim_ref(c), EventType::Warning, "ProvisioningFailed", &msg).await;
            }
        }
    }

    /// Removes a released volume's directory, then the volume.
    async fn reclaim(&self, v: &PersistentVolume) {
        let name = v.metadata.name.clone().unwrap_or_default();
        let Some(path) = v.spec.as_ref().and_then(|s| s.host_path.as_ref()).map(|h| PathBuf::from(&h.path)) else {
            return;
        };
        // Only what this provisioner made: a directory right under the storage directory.
        if path.parent() != Some(self.shared.config.storage_dir.as_path()) {
            tracing::warn!(volume = %name, path = %path.display(), "not deleting a volume outside the storage directory");
            return;
        }
        match tokio::fs::remove_dir_all(&path).await {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(volume = %name, error = %e, "removing a released volume's directory failed");
                return;
            }
        }
        let volumes: Api<PersistentVolume> = Api::all(self.client.clone());
        match volumes.delete(&name, &DeleteParams::default()).await {
            Ok(_) => tracing::info!(volume = %name, "deleted a released local-path volume"),
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => tracing::debug!(volume = %name, error = %e, "deleting a released volume failed"),
        }
    }

    async fn sync(&self) {
        let volumes = self.volumes.state();
        for c in self.claims.state() {
            let unbound = c.spec.as_ref().and_then(|s| s.volume_name.as_deref()).is_none_or(str::is_empty);
            if !unbound
                || c.metadata.deletion_timestamp.is_some()
                || annotation(&c.metadata, STORAGE_PROVISIONER) != Some(PROVISIONER)
            {
                continue;
            }
            let name = format!("pvc-{}", c.metadata.uid.as_deref().unwrap_or_default());
            if volumes.iter().any(|v| v.metadata.name.as_deref() == Some(name.as_str())) {
                continue;
            }
            self.provision(&c).await;
        }
        for v in &volumes {
            let released = v.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Released");
            let delete = v.spec.as_ref().and_then(|s| s.persistent_volume_reclaim_policy.as_deref()) == Some("Delete");
            if released
                && delete
                && v.metadata.deletion_timestamp.is_none()
                && annotation(&v.metadata, PROVISIONED_BY) == Some(PROVISIONER)
                && on_node(v, self.node())
            {
                self.reclaim(v).await;
            }
        }
    }
}

/// Provisions and reclaims local-path volumes with `client` until the kubelet stops.
pub async fn run(shared: Arc<Shared>, client: kube::Client) {
    let (claims, w1) = reflector::store::<PersistentVolumeClaim>();
    let (volumes, w2) = reflector::store::<PersistentVolume>();
    let watches = vec![
        signal(
            0,
            reflector::reflector(w1, watcher(Api::<PersistentVolumeClaim>::all(client.clone()), Default::default()))
                .default_backoff(),
        ),
        signal(
            1,
            reflector::reflector(w2, watcher(Api::<PersistentVolume>::all(client.clone()), Default::default()))
                .default_backoff(),
        ),
    ];
    let cancel = shared.cancel.clone();
    let p = Provisioner { shared, client, claims, volumes };
    sync_on_changes(watches, Duration::from_secs(15), &cancel, || p.sync()).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claims_volume_is_a_host_directory_on_this_node_bound_to_it() {
        let claim: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": "data", "namespace": "shop", "uid": "u1", "resourceVersion": "7"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                     "storageClassName": "local-path"}}))
        .expect("claim");
        let class: StorageClass = serde_json::from_value(json!({
            "metadata": {"name": "local-path"}, "provisioner": PROVISIONER, "reclaimPolicy": "Delete"}))
        .expect("class");
        let dir = volume_dir(Path::new("/var/lib/k1s/storage"), &claim);
        assert_eq!(dir, Path::new("/var/lib/k1s/storage/pvc-u1_shop_data"));
        let pv: PersistentVolume = serde_json::from_value(volume_for(&claim, &class, "vm", &dir)).expect("volume");
        assert_eq!(pv.metadata.name.as_deref(), Some("pvc-u1"));
        let spec = pv.spec.as_ref().expect("spec");
        assert_eq!(spec.host_path.as_ref().map(|h| h.path.as_str()), Some("/var/lib/k1s/storage/pvc-u1_shop_data"));
        assert_eq!(spec.capacity.as_ref().and_then(|c| c.get("storage")).map(|q| q.0.as_str()), Some("1Gi"));
        assert_eq!(spec.claim_ref.as_ref().and_then(|r| r.uid.as_deref()), Some("u1"));
        assert_eq!(spec.persistent_volume_reclaim_policy.as_deref(), Some("Delete"));
        assert!(on_node(&pv, "vm") && !on_node(&pv, "other"));
    }
}
