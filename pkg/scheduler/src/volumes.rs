//! VolumeBinding, as upstream's plugin does it for `persistentVolumeClaim` volumes:
//!
//! - PreFilter: every claim the pod names must exist, not be `Lost` nor being deleted, and be
//!   either fully bound (its `volumeName` and `pv.kubernetes.io/bind-completed`) or unbound in a
//!   `WaitForFirstConsumer` class; a claim that should already be bound (an `Immediate` class, no
//!   class, a missing class, or pre-bound through its `volumeName`) keeps the pod waiting.
//! - Filter: a bound claim's volume must exist and its node affinity admit the node; an unbound
//!   waiting claim needs an `Available` volume that fits it on that node (chosen smallest claim
//!   first, each volume once), or a class whose provisioner can make one there (its
//!   `allowedTopologies`); a claim whose `selected-node` names another node rules the node out.
//! - PreBind (in the driver): the chosen volumes get their `claimRef`, the claims to provision
//!   their `volume.kubernetes.io/selected-node`, and the pod is bound only once the PersistentVolume
//!   binder has fully bound every claim.

use crate::cache::Cache;
use crate::matching::{labels_of, term_matches};
use crate::node_info::{NodeInfo, PodInfo};
use k1s_api::storage::{self as storage, annotation, SELECTED_NODE};
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

pub const ERR_UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";
pub const ERR_BIND_CONFLICT: &str = "node(s) didn't find available persistent volumes to bind";
pub const ERR_NODE_CONFLICT: &str = "node(s) had volume node affinity conflict";
pub const ERR_PV_NOT_EXIST: &str = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";

/// The pod's claims after PreFilter.
#[derive(Clone, Debug, Default)]
pub struct PodClaims {
    /// Fully bound claims, with their volume when it exists.
    bound: Vec<(Arc<PersistentVolumeClaim>, Option<Arc<PersistentVolume>>)>,
    /// Unbound claims of `WaitForFirstConsumer` classes, smallest request first, with their class
    /// and the volumes of that class no assumed pod has taken.
    waiting: Vec<Waiting>,
}

#[derive(Clone, Debug)]
struct Waiting {
    claim: Arc<PersistentVolumeClaim>,
    /// The node an earlier decision selected for the claim (its annotation, or an assumed pod's).
    selected: Option<String>,
    class: Option<Arc<StorageClass>>,
    volumes: Vec<Arc<PersistentVolume>>,
}

/// What the pod's volumes need on its node before the pod is bound.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VolumePlan {
    /// (volume, claim): volumes to give the claim (their `claimRef`).
    pub bindings: Vec<(Arc<PersistentVolume>, Arc<PersistentVolumeClaim>)>,
    /// Claims to have provisioned on the node (their selected node).
    pub provisions: Vec<Arc<PersistentVolumeClaim>>,
}

impl VolumePlan {
    pub fn is_empty(&self) -> bool {
        self.bindings.is_empty() && self.provisions.is_empty()
    }
}

fn key(c: &PersistentVolumeClaim) -> (&str, &str) {
    (c.metadata.namespace.as_deref().unwrap_or_default(), c.metadata.name.as_deref().unwrap_or_default())
}

/// The claim names of the pod's `persistentVolumeClaim` volumes.
pub fn claim_names(pod: &PodInfo) -> impl Iterator<Item = &str> {
    pod.spec()
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| c.claim_name.as_str())
}

/// PreFilter: `Ok(None)` when the pod uses no claim; `Err` is the reason no node can take it.
pub fn pre_filter(cache: &Cache, pod: &PodInfo) -> Result<Option<PodClaims>, String> {
    let names: Vec<&str> = claim_names(pod).collect();
    if names.is_empty() {
        return Ok(None);
    }
    let mut claims = Vec::with_capacity(names.len());
    for name in names {
        let Some(c) = cache.claim(&pod.namespace, name) else {
            return Err(format!("persistentvolumeclaim {name:?} not found"));
        };
        if storage::claim_phase(&c) == "Lost" {
            let volume = storage::volume_name(&c);
            return Err(format!("persistentvolumeclaim {name:?} bound to non-existent persistentvolume {volume:?}"));
        }
        if c.metadata.deletion_timestamp.is_some() {
            return Err(format!("persistentvolumeclaim {name:?} is being deleted"));
        }
        claims.push(c);
    }
    let mut out = PodClaims::default();
    for c in claims {
        if storage::fully_bound(&c) {
            let volume = cache.volume(storage::volume_name(&c));
            out.bound.push((c, volume));
            continue;
        }
        let class = cache.class(storage::claim_class(&c));
        let waits = class.as_deref().is_some_and(storage::waits_for_first_consumer);
        if !waits || !storage::volume_name(&c).is_empty() {
            return Err(ERR_UNBOUND_IMMEDIATE.into());
        }
        let mut volumes = cache.volumes_of_class(storage::claim_class(&c));
        volumes.retain(|v| !cache.volume_assumed(v.metadata.name.as_deref().unwrap_or_default()));
        let selected = annotation(&c.metadata, SELECTED_NODE).map(str::to_string).or_else(|| cache.assumed_node_of(&c));
        out.waiting.push(Waiting { claim: c, selected, class, volumes });
    }
    out.waiting.sort_by_key(|w| storage::requested(&w.claim));
    Ok(Some(out))
}

/// Whether a volume's required node affinity admits `node` (none admits every node).
fn volume_admits(volume: &PersistentVolume, node: &Node) -> bool {
    let required = volume.spec.as_ref().and_then(|s| s.node_affinity.as_ref()).and_then(|a| a.required.as_ref());
    match required {
        Some(sel) => sel.node_selector_terms.iter().any(|t| term_matches(t, node)),
        None => true,
    }
}

/// Whether a class may provision on `node`: no `allowedTopologies`, or a term all of whose label
/// requirements the node meets.
fn topology_admits(class: &StorageClass, node: &Node) -> bool {
    let terms = class.allowed_topologies.as_deref().unwrap_or_default();
    if terms.is_empty() {
        return true;
    }
    let labels = labels_of(node.metadata.labels.as_ref());
    terms.iter().any(|t| {
        t.match_label_expressions.iter().flatten().all(|e| labels.get(&e.key).is_some_and(|v| e.values.contains(v)))
    })
}

/// Filter on one node: the plan for the pod's waiting claims there, or upstream's reasons.
pub fn filter(claims: &PodClaims, node: &NodeInfo) -> Result<VolumePlan, Vec<&'static str>> {
    let Some(n) = node.node.as_deref() else { return Err(vec![ERR_BIND_CONFLICT]) };
    let (mut bound_ok, mut bound_found) = (true, true);
    for (_, volume) in &claims.bound {
        match volume {
            None => {
                bound_found = false;
                break;
            }
            Some(v) if !volume_admits(v, n) => {
                bound_ok = false;
                break;
            }
            Some(_) => {}
        }
    }
    let mut plan = VolumePlan::default();
    let mut unbound_ok = true;
    let mut chosen: HashSet<&str> = HashSet::new();
    for w in &claims.waiting {
        if let Some(selected) = &w.selected {
            if *selected != node.name {
                unbound_ok = false;
                break;
            }
        } else {
            let best = w
                .volumes
                .iter()
                .filter(|v| !chosen.contains(v.metadata.name.as_deref().unwrap_or_default()))
                .filter(|v| (storage::fits(v, &w.claim) || storage::names(v, &w.claim)) && volume_admits(v, n))
                .min_by_key(|v| (!storage::names(v, &w.claim), storage::capacity(v)));
            if let Some(v) = best {
                chosen.insert(v.metadata.name.as_deref().unwrap_or_default());
                plan.bindings.push((v.clone(), w.claim.clone()));
                continue;
            }
        }
        match w.class.as_deref() {
            Some(c) if storage::dynamic_provisioner(c).is_some() && topology_admits(c, n) => {
                plan.provisions.push(w.claim.clone())
            }
            _ => {
                unbound_ok = false;
                break;
            }
        }
    }
    let mut reasons = Vec::new();
    if !bound_ok {
        reasons.push(ERR_NODE_CONFLICT);
    }
    if !unbound_ok {
        reasons.push(ERR_BIND_CONFLICT);
    }
    if !bound_found {
        reasons.push(ERR_PV_NOT_EXIST);
    }
    if reasons.is_empty() {
        Ok(plan)
    } else {
        Err(reasons)
    }
}

/// The resourceVersions PreBind's own writes produced: until the cache holds an object at least
/// that new, what it shows predates the write (upstream compares them the same way).
#[derive(Clone, Debug, Default)]
pub struct Written {
    pub volumes: HashMap<String, u64>,
    pub claims: HashMap<(String, String), u64>,
}

/// Whether a cached object is older than the version `written` recorded.
fn stale(meta: &ObjectMeta, written: Option<&u64>) -> bool {
    let rv = meta.resource_version.as_deref().and_then(|v| v.parse::<u64>().ok());
    matches!((rv, written), (Some(have), Some(want)) if have < *want)
}

/// PreBind's wait: `Ok(true)` once every claim of the plan is fully bound on `node`, `Ok(false)`
/// while the binder works, `Err` when the binding was undone (upstream's `checkBindings`).
pub fn check_bindings(cache: &Cache, plan: &VolumePlan, node: &str, written: &Written) -> Result<bool, String> {
    let mut done = true;
    for (volume, claim) in &plan.bindings {
        let name = volume.metadata.name.as_deref().unwrap_or_default();
        let (namespace, claim_name) = key(claim);
        let Some(v) = cache.volume(name) else { return Err(format!("failed to check binding: pv {name:?} not found")) };
        let Some(c) = cache.claim(namespace, claim_name) else {
            return Err(format!("failed to check binding: pvc \"{namespace}/{claim_name}\" not found"));
        };
        if stale(&v.metadata, written.volumes.get(name)) {
            done = false;
            continue;
        }
        let uid = v.spec.as_ref().and_then(|s| s.claim_ref.as_ref()).and_then(|r| r.uid.as_deref());
        if uid.is_none_or(str::is_empty) {
            return Err(format!("ClaimRef got reset for pv {name:?}"));
        }
        done &= storage::fully_bound(&c);
    }
    for claim in &plan.provisions {
        let (namespace, claim_name) = key(claim);
        let Some(c) = cache.claim(namespace, claim_name) else {
            return Err(format!("failed to check provisioning pvc: pvc \"{namespace}/{claim_name}\" not found"));
        };
        if stale(&c.metadata, written.claims.get(&(namespace.to_string(), claim_name.to_string()))) {
            done = false;
            continue;
        }
        match annotation(&c.metadata, SELECTED_NODE) {
            None => return Err(format!("selectedNode annotation reset for PVC {claim_name:?}")),
            Some(n) if n != node => return Err(format!("provisioning failed for PVC {claim_name:?}")),
            Some(_) => done &= storage::fully_bound(&c),
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{node, pod};
    use serde_json::json;

    fn claim(name: &str, class: &str, size: &str) -> PersistentVolumeClaim {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                     "resources": {"requests": {"storage": size}}},
            "status": {"phase": "Pending"}}))
        .expect("claim")
    }

    fn bound(mut c: PersistentVolumeClaim, volume: &str) -> PersistentVolumeClaim {
        c.spec.as_mut().expect("spec").volume_name = Some(volume.into());
        c.metadata.annotations = Some([(storage::BIND_COMPLETED.to_string(), "yes".to_string())].into());
        c
    }

    fn volume(name: &str, class: &str, size: &str, host: Option<&str>) -> PersistentVolume {
        let mut v = json!({"metadata": {"name": name},
            "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "storageClassName": class},
            "status": {"phase": "Available"}});
        if let Some(h) = host {
            v["spec"]["nodeAffinity"] = json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [h]}]}]}});
        }
        serde_json::from_value(v).expect("volume")
    }

    fn class(name: &str, mode: &str, provisioner: &str) -> StorageClass {
        serde_json::from_value(json!({"metadata": {"name": name}, "provisioner": provisioner,
                                      "volumeBindingMode": mode}))
        .expect("class")
    }

    fn cache() -> Cache {
        let mut c = Cache::default();
        c.set_node(node("a", "4", "4Gi").label("kubernetes.io/hostname", "a").build());
        c.set_node(node("b", "4", "4Gi").label("kubernetes.io/hostname", "b").build());
        c.set_class(class("local-path", "WaitForFirstConsumer", "k1s.io/local-path"));
        c.set_class(class("manual", "WaitForFirstConsumer", "kubernetes.io/no-provisioner"));
        c.set_class(class("fast", "Immediate", "example.com/fast"));
        c
    }

    fn with_claims(names: &[&str]) -> Arc<PodInfo> {
        let mut p = pod("p").build();
        let volumes = names
            .iter()
            .map(|n| serde_json::from_value(json!({"name": n, "persistentVolumeClaim": {"claimName": n}})).expect("v"))
            .collect();
        p.spec.as_mut().expect("spec").volumes = Some(volumes);
        Arc::new(PodInfo::new(p, 0))
    }

    fn on(cache: &Cache, claims: &PodClaims, n: &str) -> Result<VolumePlan, Vec<&'static str>> {
        filter(claims, cache.node(n).expect("node"))
    }

    #[test]
    fn pre_filter_explains_claims_that_keep_a_pod_from_every_node() {
        let mut c = cache();
        assert!(pre_filter(&c, &with_claims(&[])).expect("no claims").is_none());
        assert_eq!(
            pre_filter(&c, &with_claims(&["data"])).err().as_deref(),
            Some("persistentvolumeclaim \"data\" not found")
        );
        c.set_claim(claim("fast", "fast", "1Gi"));
        assert_eq!(pre_filter(&c, &with_claims(&["fast"])).err().as_deref(), Some(ERR_UNBOUND_IMMEDIATE));
        c.set_claim(claim("orphan", "gone", "1Gi"));
        assert_eq!(pre_filter(&c, &with_claims(&["orphan"])).err().as_deref(), Some(ERR_UNBOUND_IMMEDIATE));
        let mut deleting = claim("old", "local-path", "1Gi");
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()));
        c.set_claim(deleting);
        assert_eq!(
            pre_filter(&c, &with_claims(&["old"])).err().as_deref(),
            Some("persistentvolumeclaim \"old\" is being deleted")
        );
        let mut lost = bound(claim("lost", "local-path", "1Gi"), "pv-x");
        lost.status.as_mut().expect("status").phase = Some("Lost".into());
        c.set_claim(lost);
        assert_eq!(
            pre_filter(&c, &with_claims(&["lost"])).err().as_deref(),
            Some("persistentvolumeclaim \"lost\" bound to non-existent persistentvolume \"pv-x\"")
        );
        c.set_claim(claim("data", "local-path", "1Gi"));
        let claims = pre_filter(&c, &with_claims(&["data"])).expect("ok").expect("claims");
        assert_eq!(claims.waiting.len(), 1);
    }

    #[test]
    fn bound_claims_need_their_volume_on_the_node() {
        let mut c = cache();
        c.set_claim(bound(claim("data", "manual", "1Gi"), "pv-a"));
        let claims = pre_filter(&c, &with_claims(&["data"])).expect("ok").expect("claims");
        assert_eq!(on(&c, &claims, "a"), Err(vec![ERR_PV_NOT_EXIST]));
        c.set_volume(volume("pv-a", "manual", "1Gi", Some("a")));
        let claims = pre_filter(&c, &with_claims(&["data"])).expect("ok").expect("claims");
        assert!(claims.waiting.is_empty());
        assert_eq!(on(&c, &claims, "a"), Ok(VolumePlan::default()));
        assert_eq!(on(&c, &claims, "b"), Err(vec![ERR_NODE_CONFLICT]));
    }

    #[test]
    fn waiting_claims_take_the_smallest_fitting_volume_on_the_node_or_are_provisioned() {
        let mut c = cache();
        c.set_volume(volume("big-a", "manual", "10Gi", Some("a")));
        c.set_volume(volume("small-a", "manual", "2Gi", Some("a")));
        c.set_volume(volume("tiny-a", "manual", "512Mi", Some("a")));
        c.set_claim(claim("data", "manual", "1Gi"));
        let claims = pre_filter(&c, &with_claims(&["data"])).expect("ok").expect("claims");
        let plan = on(&c, &claims, "a").expect("fits on a");
        assert_eq!(
            plan.bindings.iter().map(|(v, _)| v.metadata.name.as_deref()).collect::<Vec<_>>(),
            [Some("small-a")]
        );
        // No volume on b, and the class cannot provision.
        assert_eq!(on(&c, &claims, "b"), Err(vec![ERR_BIND_CONFLICT]));
        // Two claims never share a volume.
        c.set_claim(claim("more", "manual", "1Gi"));
        let claims = pre_filter(&c, &with_claims(&["data", "more"])).expect("ok").expect("claims");
        let plan = on(&c, &claims, "a").expect("fits on a");
        let mut got: Vec<_> = plan.bindings.iter().map(|(v, _)| v.metadata.name.clone().unwrap_or_default()).collect();
        got.sort();
        assert_eq!(got, ["big-a", "small-a"]);
        // A provisioning class works on any node.
        c.set_claim(claim("dyn", "local-path", "1Gi"));
        let claims = pre_filter(&c, &with_claims(&["dyn"])).expect("ok").expect("claims");
        let plan = on(&c, &claims, "b").expect("provisioned on b");
        assert_eq!(plan.provisions.len(), 1);
        assert!(plan.bindings.is_empty());
    }

    #[test]
    fn a_selected_node_or_allowed_topologies_restrict_provisioning() {
        let mut c = cache();
        let mut selected = claim("dyn", "local-path", "1Gi");
        selected.metadata.annotations = Some([(SELECTED_NODE.to_string(), "a".to_string())].into());
        c.set_claim(selected);
        let claims = pre_filter(&c, &with_claims(&["dyn"])).expect("ok").expect("claims");
        assert!(on(&c, &claims, "a").is_ok());
        assert_eq!(on(&c, &claims, "b"), Err(vec![ERR_BIND_CONFLICT]));
        let mut zoned = class("zoned", "WaitForFirstConsumer", "example.com/z");
        zoned.allowed_topologies = serde_json::from_value(json!([{"matchLabelExpressions": [
            {"key": "kubernetes.io/hostname", "values": ["b"]}]}]))
        .expect("topologies");
        c.set_class(zoned);
        c.set_claim(claim("z", "zoned", "1Gi"));
        let claims = pre_filter(&c, &with_claims(&["z"])).expect("ok").expect("claims");
        assert_eq!(on(&c, &claims, "a"), Err(vec![ERR_BIND_CONFLICT]));
        assert!(on(&c, &claims, "b").is_ok());
    }

    #[test]
    fn the_wait_ends_when_the_binder_has_bound_every_claim() {
        let mut c = cache();
        let at = |mut claim: PersistentVolumeClaim, rv: &str, selected: Option<&str>| {
            claim.metadata.resource_version = Some(rv.into());
            if let Some(n) = selected {
                claim.metadata.annotations.get_or_insert_default().insert(SELECTED_NODE.into(), n.into());
            }
            claim
        };
        c.set_claim(at(claim("dyn", "local-path", "1Gi"), "7", None));
        let claims = pre_filter(&c, &with_claims(&["dyn"])).expect("ok").expect("claims");
        let plan = on(&c, &claims, "a").expect("plan");
        // PreBind wrote the selected node at version 8: the cache's version 7 predates it.
        let written = Written { claims: [(("default".into(), "dyn".into()), 8)].into(), ..Default::default() };
        assert_eq!(check_bindings(&c, &plan, "a", &written), Ok(false));
        c.set_claim(at(claim("dyn", "local-path", "1Gi"), "8", Some("a")));
        assert_eq!(check_bindings(&c, &plan, "a", &written), Ok(false));
        c.set_claim(at(bound(claim("dyn", "local-path", "1Gi"), "pvc-1"), "9", Some("a")));
        assert_eq!(check_bindings(&c, &plan, "a", &written), Ok(true));
        // A provisioner that gives up clears or changes the selected node.
        c.set_claim(at(claim("dyn", "local-path", "1Gi"), "10", Some("b")));
        assert_eq!(check_bindings(&c, &plan, "a", &written), Err("provisioning failed for PVC \"dyn\"".to_string()));
        c.set_claim(at(claim("dyn", "local-path", "1Gi"), "11", None));
        assert_eq!(
            check_bindings(&c, &plan, "a", &written),
            Err("selectedNode annotation reset for PVC \"dyn\"".to_string())
        );
    }

    #[test]
    fn a_volume_whose_claim_ref_is_dropped_after_the_write_fails_the_wait() {
        let mut c = cache();
        let mut v = volume("pv", "manual", "1Gi", Some("a"));
        v.metadata.resource_version = Some("3".into());
        c.set_volume(v.clone());
        c.set_claim(claim("data", "manual", "1Gi"));
        let claims = pre_filter(&c, &with_claims(&["data"])).expect("ok").expect("claims");
        let plan = on(&c, &claims, "a").expect("plan");
        let written = Written { volumes: [("pv".into(), 4)].into(), ..Default::default() };
        assert_eq!(check_bindings(&c, &plan, "a", &written), Ok(false), "the write is not in the cache yet");
        v.metadata.resource_version = Some("5".into());
        c.set_volume(v);
        assert_eq!(check_bindings(&c, &plan, "a", &written), Err("ClaimRef got reset for pv \"pv\"".to_string()));
    }
}
