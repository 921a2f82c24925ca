//! The files of configMap, secret and downwardAPI volumes (and of the same sources inside a
//! projected volume), as upstream's `MakePayload` and `CollectData`: all keys or the listed
//! items, item modes over the volume's default mode, missing keys fatal unless optional.

use super::atomic_writer::{FileProjection, Payload};
use super::SetUpCause;
use crate::pods::env::fieldpath;
use k8s_openapi::api::core::v1::{ConfigMap, DownwardAPIVolumeFile, KeyToPath, Pod, Secret};
use std::collections::HashMap;

/// The API's default `defaultMode` (0644).
pub const DEFAULT_MODE: u32 = 0o644;

pub(super) fn mode_of(mode: Option<i32>, default: u32) -> u32 {
    mode.and_then(|m| u32::try_from(m).ok()).unwrap_or(default)
}

fn project(
    entries: Vec<(String, Vec<u8>)>,
    items: Option<&[KeyToPath]>,
    default_mode: u32,
    optional: bool,
    missing: impl Fn(&str) -> SetUpCause,
) -> Result<Payload, SetUpCause> {
    let mut payload = Payload::new();
    match items {
        None | Some([]) => {
            for (k, data) in entries {
                payload.insert(k, FileProjection { data, mode: default_mode });
            }
        }
        Some(items) => {
            for item in items {
                let Some((_, data)) = entries.iter().find(|(k, _)| k == &item.key) else {
                    if optional {
                        continue;
                    }
                    return Err(missing(&item.key));
                };
                payload.insert(
                    item.path.clone(),
                    FileProjection { data: data.clone(), mode: mode_of(item.mode, default_mode) },
                );
            }
        }
    }
    Ok(payload)
}

/// A configMap's files: `data` and `binaryData`.
pub fn config_map(
    cm: &ConfigMap,
    items: Option<&[KeyToPath]>,
    default_mode: u32,
    optional: bool,
) -> Result<Payload, SetUpCause> {
    let mut entries: Vec<(String, Vec<u8>)> =
        cm.data.iter().flatten().map(|(k, v)| (k.clone(), v.clone().into_bytes())).collect();
    entries.extend(cm.binary_data.iter().flatten().map(|(k, v)| (k.clone(), v.0.clone())));
    project(entries, items, default_mode, optional, |key| SetUpCause::MissingConfigMapKey { key: key.to_string() })
}

/// A secret's files.
pub fn secret(
    s: &Secret,
    items: Option<&[KeyToPath]>,
    default_mode: u32,
    optional: bool,
) -> Result<Payload, SetUpCause> {
    let entries: Vec<(String, Vec<u8>)> = s.data.iter().flatten().map(|(k, v)| (k.clone(), v.0.clone())).collect();
    project(entries, items, default_mode, optional, |key| SetUpCause::MissingSecretKey { key: key.to_string() })
}

/// A downwardAPI volume's files; every item that fails is reported, the others still listed.
pub fn downward_api(
    pod: &Pod,
    items: &[DownwardAPIVolumeFile],
    default_mode: u32,
    node_allocatable: &HashMap<String, String>,
) -> Result<Payload, SetUpCause> {
    let mut payload = Payload::new();
    let mut errors = Vec::new();
    for item in items {
        let mut data = Vec::new();
        if let Some(f) = &item.field_ref {
            match fieldpath::metadata_field(pod, &f.field_path) {
                Ok(v) => data = v.into_bytes(),
                Err(e) => errors.push(SetUpCause::Downward(e)),
            }
        } else if let Some(r) = &item.resource_field_ref {
            let name = r.container_name.as_deref().unwrap_or("");
            let value = fieldpath::find_container(pod, name)
                .and_then(|c| fieldpath::container_resource(r, pod, c, node_allocatable));
            match value {
                Ok(v) => data = v.into_bytes(),
                Err(e) => errors.push(SetUpCause::Downward(e)),
            }
        }
        payload.insert(item.path.clone(), FileProjection { data, mode: mode_of(item.mode, default_mode) });
    }
    match SetUpCause::aggregate(errors) {
        None => Ok(payload),
        Some(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        Container, ObjectFieldSelector, PodSpec, ResourceFieldSelector, ResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use k8s_openapi::ByteString;
    use std::collections::BTreeMap;

    fn cm() -> ConfigMap {
        ConfigMap {
            data: Some(BTreeMap::from([("a".into(), "A".into()), ("b".into(), "B".into())])),
            binary_data: Some(BTreeMap::from([("bin".into(), ByteString(vec![0, 1, 2]))])),
            ..Default::default()
        }
    }

    fn item(key: &str, path: &str, mode: Option<i32>) -> KeyToPath {
        KeyToPath { key: key.into(), path: path.into(), mode }
    }

    #[test]
    fn all_keys_with_the_default_mode_without_items() {
        let p = config_map(&cm(), None, 0o600, false).expect("payload");
        assert_eq!(p.len(), 3);
        assert_eq!(p["a"], FileProjection { data: b"A".to_vec(), mode: 0o600 });
        assert_eq!(p["bin"].data, vec![0, 1, 2]);
    }

    #[test]
    fn items_select_keys_paths_and_modes() {
        let items = [item("a", "dir/first", Some(0o400)), item("b", "second", None)];
        let p = config_map(&cm(), Some(&items), DEFAULT_MODE, false).expect("payload");
        assert_eq!(p.keys().cloned().collect::<Vec<_>>(), vec!["dir/first".to_string(), "second".to_string()]);
        assert_eq!(p["dir/first"].mode, 0o400);
        assert_eq!(p["second"].mode, DEFAULT_MODE);
    }

    #[test]
    fn a_missing_key_fails_unless_optional() {
        let items = [item("nope", "x", None)];
        let err = config_map(&cm(), Some(&items), DEFAULT_MODE, false).expect_err("missing");
        assert_eq!(err.to_string(), "configmap references non-existent config key: nope");
        assert!(config_map(&cm(), Some(&items), DEFAULT_MODE, true).expect("optional").is_empty());
        let s = Secret { data: Some(BTreeMap::new()), ..Default::default() };
        let err = secret(&s, Some(&items), DEFAULT_MODE, false).expect_err("missing");
        assert_eq!(err.to_string(), "references non-existent secret key: nope");
    }

    #[test]
    fn downward_api_files_render_fields_and_resources() {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                labels: Some(BTreeMap::from([("b".into(), "2".into()), ("a".into(), "1".into())])),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "app".into(),
                    resources: Some(ResourceRequirements {
                        limits: Some(BTreeMap::from([("cpu".into(), Quantity("500m".into()))])),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: None,
        };
        let field = |path: &str, fp: &str| DownwardAPIVolumeFile {
            field_ref: Some(ObjectFieldSelector { api_version: Some("v1".into()), field_path: fp.into() }),
            mode: None,
            path: path.into(),
            resource_field_ref: None,
        };
        let res = |path: &str, r: &str, d: &str| DownwardAPIVolumeFile {
            field_ref: None,
            mode: Some(0o400),
            path: path.into(),
            resource_field_ref: Some(ResourceFieldSelector {
                container_name: Some("app".into()),
                divisor: Some(Quantity(d.into())),
                resource: r.into(),
            }),
        };
        let items =
            [field("name", "metadata.name"), field("labels", "metadata.labels"), res("cpu", "limits.cpu", "1m")];
        let p = downward_api(&pod, &items, DEFAULT_MODE, &HashMap::new()).expect("payload");
        assert_eq!(p["name"].data, b"p");
        assert_eq!(p["labels"].data, b"a=\"1\"\nb=\"2\"");
        assert_eq!(p["cpu"], FileProjection { data: b"500".to_vec(), mode: 0o400 });

        let bad = [field("node", "spec.nodeName"), res("x", "limits.cpu", "1")];
        let mut bad = bad.to_vec();
        bad[1].resource_field_ref.as_mut().expect("ref").container_name = Some("ghost".into());
        let err = downward_api(&pod, &bad, DEFAULT_MODE, &HashMap::new()).expect_err("bad");
        assert_eq!(err.to_string(), "[unsupported fieldPath: spec.nodeName, container ghost not found]");
    }
}
