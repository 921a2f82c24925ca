//! Pod volumes: defaulting (`SetDefaults_Volume` and the per-source defaults: file modes,
//! hostPath type, token expiry) and validation (`ValidateVolumes`, `validateVolumeSource`).

use super::containers::{self, validate_local_non_reserved_path, VOLUME_FIELD_PATHS};
use super::formats;
use super::persistent_volumes;
use super::quantity;
use crate::field::{FieldError, Path};
use k8s_openapi::api::core::v1::{DownwardAPIVolumeFile, EmptyDirVolumeSource, KeyToPath, Volume};
use serde_json::Value;
use std::collections::BTreeSet;

/// The default mode of configMap, secret, downwardAPI and projected volumes (0644).
pub const DEFAULT_MODE: i32 = 0o644;

/// Volume source fields in the order upstream's `validateVolumeSource` checks them.
const SOURCES: &[&str] = &[
    "hostPath",
    "emptyDir",
    "gitRepo",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "flocker",
    "persistentVolumeClaim",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "quobyte",
    "downwardAPI",
    "fc",
    "azureFile",
    "vsphereVolume",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "configMap",
    "storageos",
    "projected",
    "csi",
    "ephemeral",
    "image",
];

/// Which source fields a volume sets, in checking order.
fn sources_of(v: &Volume) -> Vec<&'static str> {
    let Ok(Value::Object(map)) = serde_json::to_value(v) else { return Vec::new() };
    SOURCES.iter().copied().filter(|s| map.get(*s).is_some_and(|v| !v.is_null())).collect()
}

fn set_items_defaults(items: Option<&mut Vec<DownwardAPIVolumeFile>>) {
    for item in items.into_iter().flatten() {
        if let Some(f) = item.field_ref.as_mut() {
            containers::set_field_selector_defaults(f);
        }
    }
}

/// `SetDefaults_Volume` and the generated defaults of each source.
pub fn set_volume_defaults(v: &mut Volume) {
    if sources_of(v).is_empty() {
        v.empty_dir = Some(EmptyDirVolumeSource::default());
    }
    if let Some(h) = v.host_path.as_mut() {
        h.type_.get_or_insert_with(String::new);
    }
    if let Some(s) = v.secret.as_mut() {
        s.default_mode.get_or_insert(DEFAULT_MODE);
    }
    if let Some(c) = v.config_map.as_mut() {
        c.default_mode.get_or_insert(DEFAULT_MODE);
    }
    if let Some(d) = v.downward_api.as_mut() {
        d.default_mode.get_or_insert(DEFAULT_MODE);
        set_items_defaults(d.items.as_mut());
    }
    if let Some(p) = v.projected.as_mut() {
        p.default_mode.get_or_insert(DEFAULT_MODE);
        for s in p.sources.iter_mut().flatten() {
            if let Some(d) = s.downward_api.as_mut() {
                set_items_defaults(d.items.as_mut());
            }
            if let Some(t) = s.service_account_token.as_mut() {
                t.expiration_seconds.get_or_insert(3600);
            }
        }
    }
    if let Some(q) = v.empty_dir.as_mut().and_then(|e| e.size_limit.as_mut()) {
        quantity::canonicalize(q);
    }
    if let Some(t) = v.ephemeral.as_mut().and_then(|e| e.volume_claim_template.as_mut()) {
        persistent_volumes::set_claim_spec_defaults(&mut t.spec);
    }
    if let Some(i) = v.image.as_mut() {
        if i.pull_policy.as_deref().unwrap_or_default().is_empty() {
            let tag = containers::image_tag(i.reference.as_deref().unwrap_or_default());
            i.pull_policy = Some(if tag.as_deref() == Some("latest") { "Always" } else { "IfNotPresent" }.into());
        }
    }
}

fn validate_mode(mode: Option<i32>, path: &Path) -> Vec<FieldError> {
    match mode {
        Some(m) if !(0..=0o777).contains(&m) => vec![FieldError::invalid(path, m, formats::FILE_MODE_ERROR)],
        _ => Vec::new(),
    }
}

fn validate_key_to_paths(items: Option<&Vec<KeyToPath>>, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, kp) in items.into_iter().flatten().enumerate() {
        let p = path.index(i);
        if kp.key.is_empty() {
            errs.push(FieldError::required(p.child("key"), ""));
        }
        if kp.path.is_empty() {
            errs.push(FieldError::required(p.child("path"), ""));
        }
        errs.extend(validate_local_non_reserved_path(&kp.path, &p.child("path")));
        errs.extend(validate_mode(kp.mode, &p.child("mode")));
    }
    errs
}

fn validate_downward_files(items: Option<&Vec<DownwardAPIVolumeFile>>, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, f) in items.into_iter().flatten().enumerate() {
        let p = path.index(i);
        if f.path.is_empty() {
            errs.push(FieldError::required(p.child("path"), ""));
        }
        errs.extend(validate_local_non_reserved_path(&f.path, &p.child("path")));
        errs.extend(validate_mode(f.mode, &p.child("mode")));
        match (&f.field_ref, &f.resource_field_ref) {
            (Some(fr), None) => {
                errs.extend(containers::validate_field_selector(fr, VOLUME_FIELD_PATHS, &p.child("fieldRef")))
            }
            (None, Some(r)) if r.resource.is_empty() => {
                errs.push(FieldError::required(p.child("resourceFieldRef").child("resource"), ""))
            }
            (None, Some(_)) => {}
            (Some(_), Some(_)) => errs.push(FieldError::invalid(
                &p,
                "resource",
                "fieldRef and resourceFieldRef can not be specified simultaneously",
            )),
            (None, None) => errs.push(FieldError::required(&p, "one of fieldRef and resourceFieldRef is required")),
        }
    }
    errs
}

fn validate_projected(v: &Volume, path: &Path) -> Vec<FieldError> {
    let Some(proj) = &v.projected else { return Vec::new() };
    let mut errs = validate_mode(proj.default_mode, &path.child("defaultMode"));
    for (i, s) in proj.sources.iter().flatten().enumerate() {
        let sp = path.child("sources").index(i);
        let mut count = 0;
        if let Some(sec) = &s.secret {
            count += 1;
            if sec.name.is_empty() {
                errs.push(FieldError::required(sp.child("secret").child("name"), ""));
            }
            errs.extend(validate_key_to_paths(sec.items.as_ref(), &sp.child("secret").child("items")));
        }
        if let Some(cm) = &s.config_map {
            count += 1;
            if cm.name.is_empty() {
                errs.push(FieldError::required(sp.child("configMap").child("name"), ""));
            }
            errs.extend(validate_key_to_paths(cm.items.as_ref(), &sp.child("configMap").child("items")));
        }
        if let Some(d) = &s.downward_api {
            count += 1;
            errs.extend(validate_downward_files(d.items.as_ref(), &sp.child("downwardAPI").child("items")));
        }
        if let Some(t) = &s.service_account_token {
            count += 1;
            let tp = sp.child("serviceAccountToken");
            let secs = t.expiration_seconds.unwrap_or(3600);
            if secs < 600 {
                errs.push(FieldError::invalid(
                    tp.child("expirationSeconds"),
                    secs,
                    "may not specify a duration less than 10 minutes",
                ));
            } else if secs > 1 << 32 {
                errs.push(FieldError::invalid(
                    tp.child("expirationSeconds"),
                    secs,
                    "may not specify a duration larger than 2^32 seconds",
                ));
            }
            if t.path.is_empty() {
                errs.push(FieldError::required(tp.child("path"), ""));
            }
        }
        count += usize::from(s.cluster_trust_bundle.is_some()) + usize::from(s.pod_certificate.is_some());
        if count > 1 {
            errs.push(FieldError::forbidden(&sp, "may not specify more than 1 volume type per source"));
        }
    }
    errs
}

/// `validateVolumeSource`: exactly one source, and that source's own rules.
fn validate_source(v: &Volume, path: &Path) -> Vec<FieldError> {
    let sources = sources_of(v);
    let mut errs = Vec::new();
    if sources.is_empty() {
        return vec![FieldError::required(path, "must specify a volume type")];
    }
    for extra in sources.iter().skip(1) {
        errs.push(FieldError::forbidden(path.child(extra), "may not specify more than 1 volume type"));
    }
    match sources[0] {
        "hostPath" => {
            if let Some(h) = &v.host_path {
                let p = path.child("hostPath");
                if h.path.is_empty() {
                    errs.push(FieldError::required(p.child("path"), ""));
                } else {
                    if h.path.split('/').any(|s| s == "..") {
                        errs.push(FieldError::invalid(p.child("path"), h.path.as_str(), "must not contain '..'"));
                    }
                    const TYPES: &[&str] = &[
                        "",
                        "BlockDevice",
                        "CharDevice",
                        "Directory",
                        "DirectoryOrCreate",
                        "File",
                        "FileOrCreate",
                        "Socket",
                    ];
                    if let Some(t) = h.type_.as_deref().filter(|t| !TYPES.contains(t)) {
                        errs.push(FieldError::not_supported(p.child("type"), t, TYPES));
                    }
                }
            }
        }
        "secret" => {
            if let Some(s) = &v.secret {
                let p = path.child("secret");
                if s.secret_name.as_deref().unwrap_or_default().is_empty() {
                    errs.push(FieldError::required(p.child("secretName"), ""));
                }
                errs.extend(validate_mode(s.default_mode, &p.child("defaultMode")));
                errs.extend(validate_key_to_paths(s.items.as_ref(), &p.child("items")));
            }
        }
        "configMap" => {
            if let Some(c) = &v.config_map {
                let p = path.child("configMap");
                if c.name.is_empty() {
                    errs.push(FieldError::required(p.child("name"), ""));
                }
                errs.extend(validate_mode(c.default_mode, &p.child("defaultMode")));
                errs.extend(validate_key_to_paths(c.items.as_ref(), &p.child("items")));
            }
        }
        "persistentVolumeClaim" if v.persistent_volume_claim.as_ref().is_some_and(|c| c.claim_name.is_empty()) => {
            errs.push(FieldError::required(path.child("persistentVolumeClaim").child("claimName"), ""));
        }
        "downwardAPI" => {
            if let Some(d) = &v.downward_api {
                let p = path.child("downwardAPI");
                errs.extend(validate_mode(d.default_mode, &p.child("defaultMode")));
                errs.extend(validate_downward_files(d.items.as_ref(), &p.child("items")));
            }
        }
        "projected" => errs.extend(validate_projected(v, &path.child("projected"))),
        "nfs" => {
            if let Some(n) = &v.nfs {
                let p = path.child("nfs");
                if n.server.is_empty() {
                    errs.push(FieldError::required(p.child("server"), ""));
                }
                if n.path.is_empty() {
                    errs.push(FieldError::required(p.child("path"), ""));
                } else if !n.path.starts_with('/') {
                    errs.push(FieldError::invalid(p.child("path"), n.path.as_str(), "must be an absolute path"));
                }
            }
        }
        "csi" if v.csi.as_ref().is_some_and(|c| c.driver.is_empty()) => {
            errs.push(FieldError::required(path.child("csi").child("driver"), ""));
        }
        "ephemeral" => {
            let p = path.child("ephemeral");
            match v.ephemeral.as_ref().and_then(|e| e.volume_claim_template.as_ref()) {
                None => errs.push(FieldError::required(p.child("volumeClaimTemplate"), "")),
                Some(t) => errs.extend(persistent_volumes::validate_claim_spec(
                    &t.spec,
                    &p.child("volumeClaimTemplate").child("spec"),
                )),
            }
        }
        "image" if v.image.as_ref().is_some_and(|i| i.reference.as_deref().unwrap_or_default().is_empty()) => {
            errs.push(FieldError::required(path.child("image").child("reference"), ""));
        }
        _ => {}
    }
    errs
}

/// `ValidateVolumes`: unique DNS-label names and valid sources. Returns the names of the
/// volumes that passed, which container volume mounts may refer to.
pub fn validate_volumes(volumes: &[Volume], path: &Path) -> (BTreeSet<String>, Vec<FieldError>) {
    let mut names = BTreeSet::new();
    let mut errs = Vec::new();
    for (i, v) in volumes.iter().enumerate() {
        let p = path.index(i);
        let mut el = validate_source(v, &p);
        if v.name.is_empty() {
            el.push(FieldError::required(p.child("name"), ""));
        } else {
            el.extend(formats::validate_dns_label(&v.name, &p.child("name")));
        }
        if names.contains(&v.name) {
            el.push(FieldError::duplicate(p.child("name"), v.name.as_str()));
        }
        if el.is_empty() {
            names.insert(v.name.clone());
        } else {
            errs.extend(el);
        }
    }
    (names, errs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMapVolumeSource, HostPathVolumeSource, SecretVolumeSource};

    fn vol(name: &str) -> Volume {
        Volume { name: name.into(), ..Default::default() }
    }

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn defaults_fill_source_and_modes() {
        let mut v = vol("scratch");
        set_volume_defaults(&mut v);
        assert!(v.empty_dir.is_some());
        let mut c = vol("cfg");
        c.config_map = Some(ConfigMapVolumeSource { name: "app".into(), ..Default::default() });
        set_volume_defaults(&mut c);
        assert_eq!(c.config_map.as_ref().and_then(|c| c.default_mode), Some(420));
        assert!(c.empty_dir.is_none());
        let mut h = vol("host");
        h.host_path = Some(HostPathVolumeSource { path: "/data".into(), type_: None });
        set_volume_defaults(&mut h);
        assert_eq!(h.host_path.and_then(|h| h.type_).as_deref(), Some(""));
    }

    #[test]
    fn names_must_be_unique_labels_with_one_source() {
        let mut a = vol("data");
        a.empty_dir = Some(Default::default());
        let mut b = vol("data");
        b.empty_dir = Some(Default::default());
        let mut c = vol("Bad.Name");
        c.empty_dir = Some(Default::default());
        c.secret = Some(SecretVolumeSource { secret_name: Some("s".into()), ..Default::default() });
        let (names, errs) = validate_volumes(&[a, b, c], &Path::new("spec").child("volumes"));
        assert_eq!(names.into_iter().collect::<Vec<_>>(), ["data"]);
        let m = messages(&errs);
        assert!(m.contains(&"spec.volumes[1].name: Duplicate value: \"data\"".to_string()));
        assert!(m.contains(&"spec.volumes[2].secret: Forbidden: may not specify more than 1 volume type".to_string()));
        assert!(m.iter().any(|s| s.starts_with("spec.volumes[2].name: Invalid value: \"Bad.Name\"")));
        let (_, errs) = validate_volumes(&[vol("none")], &Path::new("spec").child("volumes"));
        assert_eq!(messages(&errs), ["spec.volumes[0]: Required value: must specify a volume type"]);
    }

    #[test]
    fn source_specific_rules() {
        let mut s = vol("s");
        s.secret = Some(SecretVolumeSource { default_mode: Some(0o1777), ..Default::default() });
        let mut h = vol("h");
        h.host_path = Some(HostPathVolumeSource { path: "/x".into(), type_: Some("Dir".into()) });
        let (_, errs) = validate_volumes(&[s, h], &Path::new("spec").child("volumes"));
        let m = messages(&errs);
        assert!(m.contains(&"spec.volumes[0].secret.secretName: Required value".to_string()));
        assert!(m.contains(&"spec.volumes[0].secret.defaultMode: Invalid value: 1023: must be a number between 0 and 0777 (octal), both inclusive".to_string()));
        assert!(m.iter().any(|s| s.starts_with("spec.volumes[1].hostPath.type: Unsupported value: \"Dir\"")));
    }
}
