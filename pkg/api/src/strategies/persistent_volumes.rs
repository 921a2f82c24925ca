//! PersistentVolumeClaims and PersistentVolumes: defaulting (`volumeMode: Filesystem`, reclaim
//! policy, phase `Pending`), claim-spec validation shared with ephemeral volumes and StatefulSet
//! claim templates, and the update rules of both kinds.

use super::formats;
use super::label_selector;
use super::quantity::{self, Quantity};
use super::semantic;
use crate::field::{FieldError, Path};
use crate::strategy::{ObjectHooks, Strategy};
use k8s_openapi::api::core::v1::{
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec, PersistentVolumeClaimStatus,
    PersistentVolumeSpec, PersistentVolumeStatus,
};
use serde_json::Value;

const ACCESS_MODES: &[&str] = &["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"];
const VOLUME_MODES: &[&str] = &["Block", "Filesystem"];
const RECLAIM_POLICIES: &[&str] = &["Delete", "Recycle", "Retain"];

/// `SetDefaults_PersistentVolumeClaimSpec` plus canonical quantities.
pub fn set_claim_spec_defaults(spec: &mut PersistentVolumeClaimSpec) {
    if spec.volume_mode.as_deref().unwrap_or_default().is_empty() {
        spec.volume_mode = Some("Filesystem".into());
    }
    if let Some(r) = spec.resources.as_mut() {
        for list in [r.limits.as_mut(), r.requests.as_mut()].into_iter().flatten() {
            quantity::canonicalize_resource_list(list);
        }
    }
}

fn validate_access_modes(modes: Option<&Vec<String>>, path: &Path, required_detail: &str) -> Vec<FieldError> {
    let modes = modes.map(Vec::as_slice).unwrap_or_default();
    let mut errs = Vec::new();
    if modes.is_empty() {
        errs.push(FieldError::required(path, required_detail));
    }
    for m in modes {
        if !ACCESS_MODES.contains(&m.as_str()) {
            errs.push(FieldError::not_supported(path, m.as_str(), ACCESS_MODES));
        }
    }
    let rwop = modes.iter().any(|m| m == "ReadWriteOncePod");
    if rwop && modes.len() > 1 {
        errs.push(FieldError::forbidden(path, "may not use ReadWriteOncePod with other access modes"));
    }
    errs
}

fn validate_positive_quantity(q: &str, path: &Path) -> Vec<FieldError> {
    match Quantity::parse(q) {
        Err(e) => vec![FieldError::invalid(path, q, e.to_string())],
        Ok(v) if v.nanos() <= 0 => vec![FieldError::invalid(path, v.canonical(), formats::IS_NOT_POSITIVE_ERROR)],
        Ok(_) => Vec::new(),
    }
}

/// `ValidatePersistentVolumeClaimSpec`.
pub fn validate_claim_spec(spec: &PersistentVolumeClaimSpec, path: &Path) -> Vec<FieldError> {
    let mut errs = validate_access_modes(
        spec.access_modes.as_ref(),
        &path.child("accessModes"),
        "at least 1 access mode is required",
    );
    if let Some(sel) = &spec.selector {
        errs.extend(label_selector::validate(sel, &path.child("selector")));
    }
    let storage_path = path.child("resources").key("storage");
    match spec.resources.as_ref().and_then(|r| r.requests.as_ref()).and_then(|r| r.get("storage")) {
        None => errs.push(FieldError::required(storage_path, "")),
        Some(q) => errs.extend(validate_positive_quantity(&q.0, &storage_path)),
    }
    if let Some(class) = spec.storage_class_name.as_deref().filter(|c| !c.is_empty()) {
        errs.extend(formats::validate_dns_subdomain(class, &path.child("storageClassName")));
    }
    if let Some(mode) = spec.volume_mode.as_deref() {
        if !VOLUME_MODES.contains(&mode) {
            errs.push(FieldError::not_supported(path.child("volumeMode"), mode, VOLUME_MODES));
        }
    }
    errs
}

/// PersistentVolumeClaim: phase `Pending`, status cleared on create, spec mostly immutable.
pub struct PersistentVolumeClaimStrategy;

fn storage_request(pvc: &PersistentVolumeClaim) -> Option<Quantity> {
    let spec = pvc.spec.as_ref()?;
    let q = spec.resources.as_ref()?.requests.as_ref()?.get("storage")?;
    Quantity::parse(&q.0).ok()
}

impl Strategy for PersistentVolumeClaimStrategy {
    type Object = PersistentVolumeClaim;

    fn set_defaults(&self, pvc: &mut PersistentVolumeClaim) {
        set_claim_spec_defaults(pvc.spec.get_or_insert_with(Default::default));
        let status = pvc.status.get_or_insert_with(Default::default);
        if status.phase.as_deref().unwrap_or_default().is_empty() {
            status.phase = Some("Pending".into());
        }
        for list in [status.capacity.as_mut(), status.allocated_resources.as_mut()].into_iter().flatten() {
            quantity::canonicalize_resource_list(list);
        }
    }

    fn prepare_for_create(&self, pvc: &mut PersistentVolumeClaim) {
        pvc.status = Some(PersistentVolumeClaimStatus { phase: Some("Pending".into()), ..Default::default() });
    }

    fn validate(&self, pvc: &PersistentVolumeClaim) -> Vec<FieldError> {
        validate_claim_spec(&pvc.spec.clone().unwrap_or_default(), &Path::new("spec"))
    }

    fn validate_update(&self, new: &PersistentVolumeClaim, old: &PersistentVolumeClaim) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let new_spec = new.spec.clone().unwrap_or_default();
        let old_spec = old.spec.clone().unwrap_or_default();
        let mut new_clone = new_spec.clone();
        let mut old_clone = old_spec.clone();
        if old_spec.volume_name.as_deref().unwrap_or_default().is_empty() {
            old_clone.volume_name = new_clone.volume_name.clone();
        }
        if old_spec.storage_class_name.is_none() {
            old_clone.storage_class_name = new_clone.storage_class_name.clone();
        }
        old_clone.volume_attributes_class_name = new_clone.volume_attributes_class_name.clone();
        let bound = new.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
        if bound {
            // A bound claim may change its storage request (expansion), checked below.
            let old_storage =
                old_clone.resources.as_ref().and_then(|r| r.requests.as_ref()).and_then(|r| r.get("storage")).cloned();
            if let Some(reqs) = new_clone.resources.as_mut().and_then(|r| r.requests.as_mut()) {
                match old_storage {
                    Some(q) => reqs.insert("storage".into(), q),
                    None => reqs.remove("storage"),
                };
            }
        }
        if !semantic::equal(&new_clone, &old_clone) {
            errs.push(FieldError::forbidden(
                "spec",
                format!(
                    "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n{}",
                    semantic::diff_text("core.PersistentVolumeClaimSpec", &old_clone, &new_clone)
                ),
            ));
        }
        if let (Some(n), Some(o)) = (storage_request(new), storage_request(old)) {
            if n < o {
                errs.push(FieldError::forbidden(
                    Path::new("spec").child("resources").child("requests").child("storage"),
                    "field can not be less than previous value",
                ));
            }
        }
        errs.extend(formats::validate_immutable(
            &new_spec.volume_mode,
            &old_spec.volume_mode,
            &Path::new("volumeMode"),
        ));
        errs
    }
}

impl ObjectHooks for PersistentVolumeClaimStrategy {}

/// PersistentVolume source fields (flattened into the spec), in upstream's checking order.
const PV_SOURCES: &[&str] = &[
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "glusterfs",
    "flocker",
    "nfs",
    "rbd",
    "quobyte",
    "cinder",
    "cephfs",
    "iscsi",
    "fc",
    "flexVolume",
    "azureFile",
    "vsphereVolume",
    "photonPersistentDisk",
    "portworxVolume",
    "azureDisk",
    "scaleIO",
    "local",
    "storageos",
    "csi",
];

fn pv_sources(spec: &PersistentVolumeSpec) -> serde_json::Map<String, Value> {
    let Ok(Value::Object(map)) = serde_json::to_value(spec) else { return Default::default() };
    map.into_iter().filter(|(k, v)| PV_SOURCES.contains(&k.as_str()) && !v.is_null()).collect()
}

/// PersistentVolume: reclaim policy `Retain`, phase `Pending`, source immutable.
pub struct PersistentVolumeStrategy;

impl Strategy for PersistentVolumeStrategy {
    type Object = PersistentVolume;

    fn set_defaults(&self, pv: &mut PersistentVolume) {
        let spec = pv.spec.get_or_insert_with(Default::default);
        if spec.persistent_volume_reclaim_policy.as_deref().unwrap_or_default().is_empty() {
            spec.persistent_volume_reclaim_policy = Some("Retain".into());
        }
        if spec.volume_mode.as_deref().unwrap_or_default().is_empty() {
            spec.volume_mode = Some("Filesystem".into());
        }
        if let Some(h) = spec.host_path.as_mut() {
            h.type_.get_or_insert_with(String::new);
        }
        if let Some(c) = spec.capacity.as_mut() {
            quantity::canonicalize_resource_list(c);
        }
        let status = pv.status.get_or_insert_with(Default::default);
        if status.phase.as_deref().unwrap_or_default().is_empty() {
            status.phase = Some("Pending".into());
        }
    }

    fn prepare_for_create(&self, pv: &mut PersistentVolume) {
        pv.status = Some(PersistentVolumeStatus { phase: Some("Pending".into()), ..Default::default() });
    }

    fn validate(&self, pv: &PersistentVolume) -> Vec<FieldError> {
        let spec = pv.spec.clone().unwrap_or_default();
        let path = Path::new("spec");
        let mut errs = validate_access_modes(spec.access_modes.as_ref(), &path.child("accessModes"), "");
        let capacity = spec.capacity.clone().unwrap_or_default();
        if capacity.is_empty() {
            errs.push(FieldError::required(path.child("capacity"), ""));
        }
        if !capacity.contains_key("storage") || capacity.len() > 1 {
            errs.push(FieldError::not_supported(path.child("capacity"), formats::to_value(&capacity), &["storage"]));
        }
        for (k, q) in &capacity {
            errs.extend(validate_positive_quantity(&q.0, &path.child("capacity").key(k)));
        }
        if let Some(p) = spec.persistent_volume_reclaim_policy.as_deref().filter(|p| !p.is_empty()) {
            if !RECLAIM_POLICIES.contains(&p) {
                errs.push(FieldError::not_supported(path.child("persistentVolumeReclaimPolicy"), p, RECLAIM_POLICIES));
            }
        }
        let sources = pv_sources(&spec);
        let ordered: Vec<&&str> = PV_SOURCES.iter().filter(|s| sources.contains_key(**s)).collect();
        if ordered.is_empty() {
            errs.push(FieldError::required(&path, "must specify a volume type"));
        }
        for extra in ordered.iter().skip(1) {
            errs.push(FieldError::forbidden(path.child(extra), "may not specify more than 1 volume type"));
        }
        if let Some(h) = &spec.host_path {
            if h.path.is_empty() {
                errs.push(FieldError::required(path.child("hostPath").child("path"), ""));
            } else if h.path.trim_end_matches('/').is_empty()
                && spec.persistent_volume_reclaim_policy.as_deref() == Some("Recycle")
            {
                errs.push(FieldError::forbidden(
                    path.child("persistentVolumeReclaimPolicy"),
                    "may not be 'recycle' for a hostPath mount of '/'",
                ));
            }
        }
        if let Some(l) = &spec.local {
            if l.path.is_empty() {
                errs.push(FieldError::required(path.child("local").child("path"), ""));
            }
            if spec.node_affinity.is_none() {
                errs.push(FieldError::required(path.child("nodeAffinity"), "Local volume requires node affinity"));
            }
        }
        if let Some(n) = &spec.nfs {
            if n.server.is_empty() {
                errs.push(FieldError::required(path.child("nfs").child("server"), ""));
            }
            if n.path.is_empty() {
                errs.push(FieldError::required(path.child("nfs").child("path"), ""));
            } else if !n.path.starts_with('/') {
                errs.push(FieldError::invalid(
                    path.child("nfs").child("path"),
                    n.path.as_str(),
                    "must be an absolute path",
                ));
            }
        }
        if let Some(c) = &spec.csi {
            if c.driver.is_empty() {
                errs.push(FieldError::required(path.child("csi").child("driver"), ""));
            }
            if c.volume_handle.is_empty() {
                errs.push(FieldError::required(path.child("csi").child("volumeHandle"), ""));
            }
        }
        if let Some(class) = spec.storage_class_name.as_deref().filter(|c| !c.is_empty()) {
            errs.extend(formats::validate_dns_subdomain(class, &path.child("storageClassName")));
        }
        if let Some(mode) = spec.volume_mode.as_deref() {
            if !VOLUME_MODES.contains(&mode) {
                errs.push(FieldError::not_supported(path.child("volumeMode"), mode, VOLUME_MODES));
            }
        }
        errs
    }

    fn validate_update(&self, new: &PersistentVolume, old: &PersistentVolume) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let (n, o) = (new.spec.clone().unwrap_or_default(), old.spec.clone().unwrap_or_default());
        let (ns, os) = (pv_sources(&n), pv_sources(&o));
        if !semantic::equal(&ns, &os) {
            errs.push(FieldError::forbidden(
                Path::new("spec").child("persistentvolumesource"),
                format!(
                    "spec.persistentvolumesource is immutable after creation\n{}",
                    semantic::diff_text("core.PersistentVolumeSource", &os, &ns)
                ),
            ));
        }
        errs.extend(formats::validate_immutable(&n.volume_mode, &o.volume_mode, &Path::new("volumeMode")));
        if o.node_affinity.is_some() && n.node_affinity != o.node_affinity {
            errs.extend(formats::validate_immutable(&n.node_affinity, &o.node_affinity, &Path::new("nodeAffinity")));
        }
        errs
    }
}

impl ObjectHooks for PersistentVolumeStrategy {}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{HostPathVolumeSource, VolumeResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity as Q;
    use std::collections::BTreeMap;

    fn pvc(storage: &str) -> PersistentVolumeClaim {
        let mut p = PersistentVolumeClaim {
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(BTreeMap::from([("storage".to_string(), Q(storage.into()))])),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        PersistentVolumeClaimStrategy.set_defaults(&mut p);
        p
    }

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn claim_defaults_and_valid_claim() {
        let mut p = pvc("1024Mi");
        let spec = p.spec.as_ref().expect("spec");
        assert_eq!(spec.volume_mode.as_deref(), Some("Filesystem"));
        assert_eq!(
            spec.resources.as_ref().and_then(|r| r.requests.as_ref()).map(|r| r["storage"].0.as_str()),
            Some("1Gi")
        );
        PersistentVolumeClaimStrategy.prepare_for_create(&mut p);
        assert_eq!(p.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Pending"));
        assert!(PersistentVolumeClaimStrategy.validate(&p).is_empty());
    }

    #[test]
    fn claim_spec_errors() {
        let mut p = pvc("0");
        if let Some(s) = p.spec.as_mut() {
            s.access_modes = None;
            s.volume_mode = Some("Raw".into());
        }
        let m = messages(&PersistentVolumeClaimStrategy.validate(&p));
        assert!(m.contains(&"spec.accessModes: Required value: at least 1 access mode is required".to_string()));
        assert!(m.contains(&"spec.resources[storage]: Invalid value: \"0\": must be greater than zero".to_string()));
        assert!(m.contains(
            &"spec.volumeMode: Unsupported value: \"Raw\": supported values: \"Block\", \"Filesystem\"".to_string()
        ));
    }

    #[test]
    fn claim_spec_is_immutable_but_may_grow_when_bound() {
        let old = pvc("1Gi");
        let mut changed = old.clone();
        if let Some(s) = changed.spec.as_mut() {
            s.access_modes = Some(vec!["ReadWriteMany".into()]);
        }
        let m = messages(&PersistentVolumeClaimStrategy.validate_update(&changed, &old));
        assert!(m[0].starts_with("spec: Forbidden: spec is immutable after creation"));
        let mut grown = pvc("2Gi");
        grown.status = Some(PersistentVolumeClaimStatus { phase: Some("Bound".into()), ..Default::default() });
        assert!(PersistentVolumeClaimStrategy.validate_update(&grown, &old).is_empty());
        let mut shrunk = pvc("512Mi");
        shrunk.status = grown.status.clone();
        let m = messages(&PersistentVolumeClaimStrategy.validate_update(&shrunk, &old));
        assert_eq!(m, ["spec.resources.requests.storage: Forbidden: field can not be less than previous value"]);
    }

    #[test]
    fn volume_defaults_and_validation() {
        let mut pv = PersistentVolume {
            spec: Some(PersistentVolumeSpec {
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                capacity: Some(BTreeMap::from([("storage".to_string(), Q("5Gi".into()))])),
                host_path: Some(HostPathVolumeSource { path: "/data".into(), type_: None }),
                ..Default::default()
            }),
            ..Default::default()
        };
        PersistentVolumeStrategy.set_defaults(&mut pv);
        let spec = pv.spec.as_ref().expect("spec");
        assert_eq!(spec.persistent_volume_reclaim_policy.as_deref(), Some("Retain"));
        assert_eq!(pv.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Pending"));
        assert!(PersistentVolumeStrategy.validate(&pv).is_empty());
        let mut none = pv.clone();
        if let Some(s) = none.spec.as_mut() {
            s.host_path = None;
        }
        assert_eq!(
            messages(&PersistentVolumeStrategy.validate(&none)),
            ["spec: Required value: must specify a volume type"]
        );
        let mut moved = pv.clone();
        if let Some(h) = moved.spec.as_mut().and_then(|s| s.host_path.as_mut()) {
            h.path = "/other".into();
        }
        let m = messages(&PersistentVolumeStrategy.validate_update(&moved, &pv));
        assert!(m[0].starts_with(
            "spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation"
        ));
    }
}
