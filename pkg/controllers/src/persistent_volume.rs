//! The PersistentVolume binder, as upstream's persistentvolume controller binds and releases:
//!
//! - a claim is bound to the volume whose `claimRef` names it (a volume a provisioner made for
//!   it, or one an administrator pre-bound), else to the smallest `Available` volume that fits
//!   (storage class, access modes, volume mode, capacity, selector): the volume's `claimRef`
//!   first, then the claim's `volumeName`, then both statuses `Bound`;
//! - a claim of a `WaitForFirstConsumer` class waits (event `WaitForFirstConsumer`) until the
//!   scheduler, placing a pod that uses it, gives it a volume (the volume's `claimRef`) or its
//!   `volume.kubernetes.io/selected-node`; a pod placed without the scheduler (`spec.nodeName`)
//!   gets its node selected here once it is bound;
//! - a claim no volume fits, whose class has a provisioner, is handed to that provisioner with
//!   the `volume.kubernetes.io/storage-provisioner` annotation (event `ExternalProvisioning`);
//! - a volume whose claim is gone is `Released`; `Retain` keeps it so, `Delete` leaves the
//!   deletion to the volume's provisioner (a volume no provisioner made fails: k1s has no
//!   in-tree deleter);
//! - a claim whose volume is gone is `Lost`;
//! - a deleted claim keeps its `kubernetes.io/pvc-protection` finalizer while a pod that has not
//!   terminated uses it, a deleted volume its `kubernetes.io/pv-protection` while it is bound
//!   (upstream's pvc-protection and pv-protection controllers).

use crate::Context;
use futures::StreamExt as _;
use k1s_api::storage::{
    annotation, capacity, claim_class as class_of_claim, claim_phase as phase_of_claim, dynamic_provisioner, fits,
    names, volume_phase as phase_of_volume, waits_for_first_consumer, BETA_STORAGE_PROVISIONER, BIND_COMPLETED,
    BOUND_BY_CONTROLLER, PROVISIONED_BY, PVC_PROTECTION, PV_PROTECTION, SELECTED_NODE, STORAGE_PROVISIONER,
};
use k1s_runtime::changes::{signal, sync_on_changes};
use k1s_runtime::events::EventType;
use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{reflector, watcher, WatchStreamExt};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

const MANAGER: &str = "persistentvolume-binder-controller";

/// The finalizers of `meta` but `finalizer`, if it holds that one.
fn without(meta: &kube::api::ObjectMeta, finalizer: &str) -> Option<Vec<String>> {
    let all = meta.finalizers.as_ref()?;
    all.iter().any(|f| f == finalizer).then(|| all.iter().filter(|f| *f != finalizer).cloned().collect())
}

/// Whether a pod that has not terminated uses `claim`.
fn in_use(claim: &PersistentVolumeClaim, pods: &[Arc<Pod>]) -> bool {
    let Some(name) = claim.metadata.name.as_deref() else { return false };
    pods.iter().any(|p| {
        let terminated = matches!(p.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Succeeded" | "Failed"));
        p.metadata.namespace == claim.metadata.namespace
            && !terminated
            && p.spec.as_ref().is_some_and(|s| {
                s.volumes
                    .iter()
                    .flatten()
                    .any(|v| v.persistent_volume_claim.as_ref().is_some_and(|c| c.claim_name == name))
            })
    })
}

fn claim_ref(c: &PersistentVolumeClaim) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("PersistentVolumeClaim".into()),
        name: c.metadata.name.clone(),
        namespace: c.metadata.namespace.clone(),
        uid: c.metadata.uid.clone(),
        resource_version: c.metadata.resource_version.clone(),
        ..Default::default()
    }
}

fn claim_event_ref(c: &PersistentVolumeClaim) -> ObjectReference {
    k1s_runtime::events::reference_to("v1", "PersistentVolumeClaim", &c.metadata)
}

/// The node of a pod that uses `claim`, once it is bound to one.
fn consumer_node<'a>(claim: &PersistentVolumeClaim, pods: &'a [Arc<Pod>]) -> Option<&'a str> {
    let name = claim.metadata.name.as_deref()?;
    pods.iter().find_map(|p| {
        let spec = p.spec.as_ref()?;
        if p.metadata.namespace != claim.metadata.namespace || p.metadata.deletion_timestamp.is_some() {
            return None;
        }
        let uses = spec
            .volumes
            .iter()
            .flatten()
            .any(|v| v.persistent_volume_claim.as_ref().is_some_and(|c| c.claim_name == name));
        uses.then_some(spec.node_name.as_deref()).flatten()
    })
}

/// A merge patch of the object (or its status) with `meta`; failures are retried on the next sync.
async fn patch_object<K>(api: &Api<K>, meta: &kube::api::ObjectMeta, patch: serde_json::Value, status: bool) -> bool
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let name = meta.name.clone().unwrap_or_default();
    let pp = PatchParams { field_manager: Some(MANAGER.into()), ..Default::default() };
    let r = if status {
        api.patch_status(&name, &pp, &Patch::Merge(&patch)).await.map(|_| ())
    } else {
        api.patch(&name, &pp, &Patch::Merge(&patch)).await.map(|_| ())
    };
    match r {
        Ok(()) => true,
        Err(e) => {
            tracing::debug!(object = %name, error = %e, "updating failed; retried on the next sync");
            false
        }
    }
}

struct Binder {
    ctx: Arc<Context>,
    claims: reflector::Store<PersistentVolumeClaim>,
    volumes: reflector::Store<PersistentVolume>,
    classes: reflector::Store<StorageClass>,
    pods: reflector::Store<Pod>,
    /// (claim uid, reason) of the events already recorded: each is told once, not every sync.
    told: std::sync::Mutex<std::collections::HashSet<(String, &'static str)>>,
}

impl Binder {
    async fn tell(&self, c: &PersistentVolumeClaim, kind: EventType, reason: &'static str, message: &str) {
        let key = (c.metadata.uid.clone().unwrap_or_default(), reason);
        if !self.told.lock().unwrap_or_else(|p| p.into_inner()).insert(key) {
            return;
        }
        self.ctx.recorder.record(&claim_event_ref(c), kind, reason, message).await;
    }

    fn claims_api(&self, c: &PersistentVolumeClaim) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.ctx.client.clone(), c.metadata.namespace.as_deref().unwrap_or("default"))
    }

    fn volumes_api(&self) -> Api<PersistentVolume> {
        Api::all(self.ctx.client.clone())
    }

    async fn patch_claim(&self, c: &PersistentVolumeClaim, patch: serde_json::Value, status: bool) -> bool {
        patch_object(&self.claims_api(c), &c.metadata, patch, status).await
    }

    async fn patch_volume(&self, v: &PersistentVolume, patch: serde_json::Value, status: bool) -> bool {
        patch_object(&self.volumes_api(), &v.metadata, patch, status).await
    }

    async fn set_volume_phase(&self, v: &PersistentVolume, phase: &str, message: Option<&str>) {
        if phase_of_volume(v) != phase {
            self.patch_volume(v, json!({"status": {"phase": phase, "message": message}}), true).await;
        }
    }

    /// The claim is bound to `v` (whose claimRef names it): its volumeName, then both statuses.
    async fn complete(&self, c: &PersistentVolumeClaim, v: &PersistentVolume) {
        let volume_name = v.metadata.name.clone().unwrap_or_default();
        let spec_volume = c.spec.as_ref().and_then(|s| s.volume_name.as_deref()).unwrap_or("");
        if spec_volume.is_empty() {
            let patch = json!({"metadata": {"annotations": {BIND_COMPLETED: "yes", BOUND_BY_CONTROLLER: "yes"}},
                               "spec": {"volumeName": volume_name}});
            self.patch_claim(c, patch, false).await;
            return; // the claim's next version completes the binding
        }
        if annotation(&c.metadata, BIND_COMPLETED).is_none() {
            self.patch_claim(c, json!({"metadata": {"annotations": {BIND_COMPLETED: "yes"}}}), false).await;
        }
        if v.spec.as_ref().and_then(|s| s.claim_ref.as_ref()).and_then(|r| r.uid.as_deref()).is_none() {
            self.patch_volume(v, json!({"spec": {"claimRef": claim_ref(c)}}), false).await;
        }
        self.set_volume_phase(v, "Bound", None).await;
        let vs = v.spec.as_ref();
        let status = json!({"status": {
            "phase": "Bound",
            "accessModes": vs.and_then(|s| s.access_modes.clone()),
            "capacity": vs.and_then(|s| s.capacity.clone()),
        }});
        let current = c.status.as_ref();
        let same = phase_of_claim(c) == "Bound"
            && current.and_then(|s| s.capacity.as_ref()) == vs.and_then(|s| s.capacity.as_ref())
            && current.and_then(|s| s.access_modes.as_ref()) == vs.and_then(|s| s.access_modes.as_ref());
        if !same {
            self.patch_claim(c, status, true).await;
        }
    }

    async fn sync_claim(&self, c: &PersistentVolumeClaim, volumes: &[Arc<PersistentVolume>], pods: &[Arc<Pod>]) {
        if c.metadata.deletion_timestamp.is_some() {
            if let Some(rest) = without(&c.metadata, PVC_PROTECTION).filter(|_| !in_use(c, pods)) {
                let patch = json!({"metadata": {"finalizers": rest, "resourceVersion": c.metadata.resource_version}});
                self.patch_claim(c, patch, false).await;
            }
            return;
        }
        let spec_volume = c.spec.as_ref().and_then(|s| s.volume_name.as_deref()).unwrap_or("");
        if !spec_volume.is_empty() {
            match volumes.iter().find(|v| v.metadata.name.as_deref() == Some(spec_volume)) {
                None => {
                    if phase_of_claim(c) == "Bound" {
                        self.patch_claim(c, json!({"status": {"phase": "Lost"}}), true).await;
                        let msg = "Bound claim has lost its PersistentVolume. Data on the volume is lost!";
                        self.tell(c, EventType::Warning, "ClaimLost", msg).await;
                    }
                }
                Some(v) if v.spec.as_ref().and_then(|s| s.claim_ref.as_ref()).is_none() => {
                    // Bound by the user through the claim: the volume takes the claim.
                    if self.patch_volume(v, json!({"spec": {"claimRef": claim_ref(c)}}), false).await {
                        self.set_volume_phase(v, "Bound", None).await;
                    }
                }
                Some(v) if names(v, c) => self.complete(c, v).await,
                Some(_) => {
                    let msg = format!("Two claims are bound to the same volume, this one is bound incorrectly: volume {spec_volume:?} is bound to another claim");
                    self.tell(c, EventType::Warning, "FailedBinding", &msg).await;
                }
            }
            return;
        }
        if let Some(v) = volumes.iter().find(|v| names(v, c)) {
            self.complete(c, v).await;
            return;
        }
        let class_name = class_of_claim(c);
        let class = self.classes.state().into_iter().find(|s| s.metadata.name.as_deref() == Some(class_name));
        let wait_for_consumer = class.as_deref().is_some_and(waits_for_first_consumer);
        let selected = annotation(&c.metadata, SELECTED_NODE);
        if wait_for_consumer && selected.is_none() {
            if let Some(node) = consumer_node(c, pods) {
                self.patch_claim(c, json!({"metadata": {"annotations": {SELECTED_NODE: node}}}), false).await;
            } else {
                let msg = "waiting for first consumer to be created before binding";
                self.tell(c, EventType::Normal, "WaitForFirstConsumer", msg).await;
            }
            return;
        }
        let best = volumes
            .iter()
            .filter(|v| fits(v, c))
            .filter(|v| {
                // A node-bound volume serves a waiting claim only on its selected node.
                !wait_for_consumer || selected.is_some_and(|n| node_allows(v, n))
            })
            .min_by_key(|v| capacity(v));
        if let Some(v) = best {
            // The volume first, as upstream binds: a claim is never bound to a volume that is not.
            self.patch_volume(v, json!({"spec": {"claimRef": claim_ref(c)}}), false).await;
            return;
        }
        match class.as_deref().and_then(dynamic_provisioner) {
            Some(provisioner) => {
                if annotation(&c.metadata, STORAGE_PROVISIONER) != Some(provisioner) {
                    let patch = json!({"metadata": {"annotations": {STORAGE_PROVISIONER: provisioner, BETA_STORAGE_PROVISIONER: provisioner}}});
                    self.patch_claim(c, patch, false).await;
                    let msg = format!("Waiting for a volume to be created either by the external provisioner '{provisioner}' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered.");
                    self.tell(c, EventType::Normal, "ExternalProvisioning", &msg).await;
                }
            }
            None => {
                let msg = if class_name.is_empty() || class.is_some() {
                    "no persistent volumes available for this claim and no storage class is set".to_string()
                } else {
                    format!("storageclass.storage.k8s.io {class_name:?} not found")
                };
                let reason =
                    if class.is_none() && !class_name.is_empty() { "ProvisioningFailed" } else { "FailedBinding" };
                self.tell(c, EventType::Warning, reason, &msg).await;
            }
        }
    }

    async fn sync_volume(&self, v: &PersistentVolume, claims: &[Arc<PersistentVolumeClaim>]) {
        // A deleted volume goes once it is not bound; until then it is synced as any other
        // (its claim's deletion releases it).
        if v.metadata.deletion_timestamp.is_some() {
            if let Some(rest) = without(&v.metadata, PV_PROTECTION).filter(|_| phase_of_volume(v) != "Bound") {
                let patch = json!({"metadata": {"finalizers": rest, "resourceVersion": v.metadata.resource_version}});
                self.patch_volume(v, patch, false).await;
                return;
            }
        }
        let Some(r) = v.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
            self.set_volume_phase(v, "Available", None).await;
            return;
        };
        let claim = claims.iter().find(|c| {
            c.metadata.name.as_deref() == r.name.as_deref() && c.metadata.namespace.as_deref() == r.namespace.as_deref()
        });
        let uid = r.uid.as_deref().filter(|u| !u.is_empty());
        match claim {
            // Not yet bound from the claim's side: the claim's sync finishes it.
            Some(c) if uid.is_none() || uid == c.metadata.uid.as_deref() => {}
            // The claim is gone (or is another claim of the same name).
            _ if uid.is_some() => self.release(v).await,
            // Pre-bound to a claim that does not exist yet.
            _ => self.set_volume_phase(v, "Available", None).await,
        }
    }

    async fn release(&self, v: &PersistentVolume) {
        let policy = v.spec.as_ref().and_then(|s| s.persistent_volume_reclaim_policy.as_deref()).unwrap_or("Retain");
        match (policy, annotation(&v.metadata, PROVISIONED_BY)) {
            ("Delete", None) => {
                let msg = "error getting deleter volume plugin for volume: no deletable volume plugin matched";
                self.set_volume_phase(v, "Failed", Some(msg)).await;
            }
            _ => self.set_volume_phase(v, "Released", None).await,
        }
    }

    async fn sync(&self) {
        let (claims, volumes, pods) = (self.claims.state(), self.volumes.state(), self.pods.state());
        // Forget what was told of claims that are gone.
        let uids: std::collections::HashSet<&str> = claims.iter().filter_map(|c| c.metadata.uid.as_deref()).collect();
        self.told.lock().unwrap_or_else(|p| p.into_inner()).retain(|(uid, _)| uids.contains(uid.as_str()));
        for c in &claims {
            self.sync_claim(c, &volumes, &pods).await;
        }
        for v in &volumes {
            self.sync_volume(v, &claims).await;
        }
    }
}

/// Whether a pod watch event can concern the binder: not one of a pod that mounts no claim.
fn matters(e: &Result<watcher::Event<Pod>, watcher::Error>) -> bool {
    match e {
        Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p) | watcher::Event::Delete(p)) => mounts_a_claim(p),
        _ => true,
    }
}

fn mounts_a_claim(p: &Pod) -> bool {
    p.spec.as_ref().is_some_and(|s| s.volumes.iter().flatten().any(|v| v.persistent_volume_claim.is_some()))
}

/// Whether `v`'s required node affinity admits the node named `node` (by hostname label, the
/// only label a volume's affinity is checked against here).
fn node_allows(v: &PersistentVolume, node: &str) -> bool {
    let Some(terms) = v.spec.as_ref().and_then(|s| s.node_affinity.as_ref()).and_then(|a| a.required.as_ref()) else {
        return true;
    };
    terms.node_selector_terms.iter().any(|t| {
        t.match_expressions.iter().flatten().all(|e| match (e.key.as_str(), e.operator.as_str()) {
            ("kubernetes.io/hostname", "In") => e.values.iter().flatten().any(|v| v == node),
            ("kubernetes.io/hostname", "NotIn") => !e.values.iter().flatten().any(|v| v == node),
            _ => true,
        })
    })
}

pub async fn run(ctx: Arc<Context>) {
    let client = ctx.client.clone();
    let (claims, w1) = reflector::store::<PersistentVolumeClaim>();
    let (volumes, w2) = reflector::store::<PersistentVolume>();
    let (classes, w3) = reflector::store::<StorageClass>();
    let (pods, w4) = reflector::store::<Pod>();
    let cfg = watcher::Config::default;
    let watches = vec![
        signal(
            0,
            reflector::reflector(w1, watcher(Api::<PersistentVolumeClaim>::all(client.clone()), cfg()))
                .default_backoff(),
        ),
        signal(
            1,
            reflector::reflector(w2, watcher(Api::<PersistentVolume>::all(client.clone()), cfg())).default_backoff(),
        ),
        signal(2, reflector::reflector(w3, watcher(Api::<StorageClass>::all(client.clone()), cfg())).default_backoff()),
        // Only the pods that mount a claim: the binder never looks at the others, and a pod's
        // volumes never change, so filtering the events keeps the cache exact. (Caching every pod
        // made each pod create cost a scan of all of them.)
        signal(
            3,
            reflector::reflector(
                w4,
                watcher(Api::<Pod>::all(client), cfg()).filter(|e| std::future::ready(matters(e))),
            )
            .default_backoff(),
        ),
    ];
    let binder = Binder { ctx: ctx.clone(), claims, volumes, classes, pods, told: Default::default() };
    sync_on_changes(watches, Duration::from_secs(15), &ctx.cancel, || binder.sync()).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use k1s_api::storage::bytes;
    use k8s_openapi::api::core::v1::{
        PersistentVolumeClaimSpec, PersistentVolumeSpec, PersistentVolumeStatus, VolumeResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use std::collections::BTreeMap;

    #[test]
    fn only_pods_that_mount_a_claim_reach_the_binders_cache() {
        use k8s_openapi::api::core::v1::{PersistentVolumeClaimVolumeSource, PodSpec, Volume};
        let pod = |claim: Option<&str>| Pod {
            spec: Some(PodSpec {
                volumes: Some(vec![Volume {
                    name: "v".into(),
                    persistent_volume_claim: claim
                        .map(|c| PersistentVolumeClaimVolumeSource { claim_name: c.into(), ..Default::default() }),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(matters(&Ok(watcher::Event::Apply(pod(Some("data"))))));
        assert!(matters(&Ok(watcher::Event::Delete(pod(Some("data"))))));
        assert!(!matters(&Ok(watcher::Event::Apply(pod(None)))));
        assert!(!matters(&Ok(watcher::Event::InitApply(Pod::default()))));
        assert!(matters(&Ok(watcher::Event::Init)) && matters(&Ok(watcher::Event::InitDone)));
    }

    fn volume(name: &str, class: &str, size: &str, modes: &[&str]) -> PersistentVolume {
        PersistentVolume {
            metadata: kube::api::ObjectMeta { name: Some(name.into()), ..Default::default() },
            spec: Some(PersistentVolumeSpec {
                capacity: Some(BTreeMap::from([("storage".to_string(), Quantity(size.into()))])),
                access_modes: Some(modes.iter().map(|m| m.to_string()).collect()),
                storage_class_name: Some(class.into()),
                ..Default::default()
            }),
            status: Some(PersistentVolumeStatus { phase: Some("Available".into()), ..Default::default() }),
        }
    }

    fn claim(class: &str, size: &str, modes: &[&str]) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: kube::api::ObjectMeta {
                name: Some("data".into()),
                namespace: Some("default".into()),
                uid: Some("u1".into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(modes.iter().map(|m| m.to_string()).collect()),
                storage_class_name: Some(class.into()),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(BTreeMap::from([("storage".to_string(), Quantity(size.into()))])),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            status: None,
        }
    }

    #[test]
    fn a_claim_is_in_use_while_a_pod_that_has_not_terminated_mounts_it() {
        let c = claim("manual", "1Gi", &["ReadWriteOnce"]);
        let pod = |phase: &str, claim_name: &str| -> Arc<Pod> {
            Arc::new(
                serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "default"},
                    "spec": {"containers": [], "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": claim_name}}]},
                    "status": {"phase": phase}}))
                .expect("pod"),
            )
        };
        assert!(in_use(&c, &[pod("Running", "data")]));
        assert!(in_use(&c, &[pod("Pending", "data")]));
        assert!(!in_use(&c, &[pod("Succeeded", "data")]), "terminated");
        assert!(!in_use(&c, &[pod("Running", "other")]));
        let mut meta = c.metadata.clone();
        meta.finalizers = Some(vec!["a".into(), PVC_PROTECTION.into()]);
        assert_eq!(without(&meta, PVC_PROTECTION), Some(vec!["a".to_string()]));
        assert_eq!(without(&meta, PV_PROTECTION), None);
    }

    #[test]
    fn quantities_are_bytes() {
        assert_eq!(bytes(&Quantity("1Gi".into())), Some(1 << 30));
        assert_eq!(bytes(&Quantity("500M".into())), Some(500_000_000));
        assert_eq!(bytes(&Quantity("1.5Ki".into())), Some(1536));
        assert_eq!(bytes(&Quantity("10".into())), Some(10));
        assert_eq!(bytes(&Quantity("1Xi".into())), None);
    }

    #[test]
    fn a_volume_fits_a_claim_by_class_modes_capacity_and_selector() {
        let c = claim("manual", "1Gi", &["ReadWriteOnce"]);
        assert!(fits(&volume("a", "manual", "2Gi", &["ReadWriteOnce", "ReadOnlyMany"]), &c));
        assert!(!fits(&volume("b", "other", "2Gi", &["ReadWriteOnce"]), &c), "class");
        assert!(!fits(&volume("c", "manual", "512Mi", &["ReadWriteOnce"]), &c), "capacity");
        assert!(!fits(&volume("d", "manual", "2Gi", &["ReadOnlyMany"]), &c), "modes");
        let mut taken = volume("e", "manual", "2Gi", &["ReadWriteOnce"]);
        taken.spec.as_mut().expect("spec").claim_ref = Some(ObjectReference::default());
        assert!(!fits(&taken, &c), "claimed");
        let mut labelled = c.clone();
        labelled.spec.as_mut().expect("spec").selector =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                match_labels: Some(BTreeMap::from([("tier".to_string(), "db".to_string())])),
                ..Default::default()
            });
        assert!(!fits(&volume("f", "manual", "2Gi", &["ReadWriteOnce"]), &labelled), "selector");
    }

    #[test]
    fn a_claim_ref_names_a_claim_by_namespace_name_and_uid() {
        let c = claim("manual", "1Gi", &["ReadWriteOnce"]);
        let mut v = volume("a", "manual", "1Gi", &["ReadWriteOnce"]);
        v.spec.as_mut().expect("spec").claim_ref = Some(ObjectReference {
            name: Some("data".into()),
            namespace: Some("default".into()),
            ..Default::default()
        });
        assert!(names(&v, &c), "pre-bound without uid");
        v.spec.as_mut().expect("spec").claim_ref.as_mut().expect("ref").uid = Some("other".into());
        assert!(!names(&v, &c), "another claim of that name");
    }
}
