use super::*;
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapProjection, ConfigMapVolumeSource, DownwardAPIProjection, DownwardAPIVolumeFile,
    DownwardAPIVolumeSource, EmptyDirVolumeSource, HostPathVolumeSource, KeyToPath, ObjectFieldSelector,
    PersistentVolumeClaimVolumeSource, PodSecurityContext, PodSpec, ProjectedVolumeSource, ResourceRequirements,
    Secret, SecretProjection, SecretVolumeSource, ServiceAccountTokenProjection, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as Q;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;
use std::os::unix::fs::MetadataExt as _;

struct Env {
    _tmp: tempfile::TempDir,
    pods_dir: PathBuf,
    mounter: Arc<FakeMounter>,
    manager: VolumeManager,
    source: MemorySource,
}

fn env() -> Env {
    let tmp = tempfile::tempdir().expect("tmp");
    let pods_dir = tmp.path().join("pods");
    let mounter = Arc::new(FakeMounter::default());
    let manager = VolumeManager::new(pods_dir.clone())
        .with_mounter(mounter.clone())
        .with_node_allocatable(HashMap::from([("cpu".into(), "4".into()), ("memory".into(), "8Gi".into())]));
    let source = MemorySource::default();
    source.put_config_map(ConfigMap {
        metadata: ObjectMeta { name: Some("app-config".into()), namespace: Some("ns".into()), ..Default::default() },
        data: Some(BTreeMap::from([("app.conf".into(), "debug=true\n".into()), ("level".into(), "info".into())])),
        ..Default::default()
    });
    source.put_secret(Secret {
        metadata: ObjectMeta { name: Some("creds".into()), namespace: Some("ns".into()), ..Default::default() },
        data: Some(BTreeMap::from([("password".into(), ByteString(b"hunter2".to_vec()))])),
        ..Default::default()
    });
    Env { _tmp: tmp, pods_dir, mounter, manager, source }
}

fn vol(name: &str) -> Volume {
    Volume { name: name.into(), ..Default::default() }
}

fn pod_with(volumes: Vec<Volume>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("ns".into()),
            uid: Some("uid-1".into()),
            labels: Some(BTreeMap::from([("app".into(), "web".into())])),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "app".into(),
                resources: Some(ResourceRequirements {
                    limits: Some(BTreeMap::from([("memory".into(), Q("256Mi".into()))])),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            volumes: Some(volumes),
            ..Default::default()
        }),
        status: None,
    }
}

fn config_map_volume(name: &str, cm: &str, items: Option<Vec<KeyToPath>>, optional: Option<bool>) -> Volume {
    Volume {
        config_map: Some(ConfigMapVolumeSource { name: cm.into(), items, optional, default_mode: Some(0o644) }),
        ..vol(name)
    }
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).expect("meta").permissions().mode() & 0o7777
}

#[tokio::test]
async fn empty_dir_on_disk_is_a_world_writable_directory() {
    let e = env();
    let pod = pod_with(vec![Volume { empty_dir: Some(EmptyDirVolumeSource::default()), ..vol("scratch") }]);
    let prepared = e.manager.prepare_with(&e.source, &pod).await.expect("prepare");
    let dir = e.pods_dir.join("uid-1/volumes/kubernetes.io~empty-dir/scratch");
    assert_eq!(prepared.volumes["scratch"].path, dir);
    assert!(dir.is_dir());
    assert_eq!(mode(&dir), 0o777);
    assert!(e.mounter.mounts().is_empty());
}

#[tokio::test]
async fn a_volume_without_a_source_is_an_empty_dir() {
    let e = env();
    let prepared = e.manager.prepare_with(&e.source, &pod_with(vec![vol("bare")])).await.expect("prepare");
    assert_eq!(prepared.volumes["bare"].plugin, Plugin::EmptyDir);
    assert!(prepared.volumes["bare"].path.ends_with("kubernetes.io~empty-dir/bare"));
}

#[tokio::test]
async fn memory_empty_dir_is_a_tmpfs_sized_by_the_smallest_limit() {
    let e = env();
    let mem = |name: &str, limit: Option<&str>| Volume {
        empty_dir: Some(EmptyDirVolumeSource { medium: Some("Memory".into()), size_limit: limit.map(|l| Q(l.into())) }),
        ..vol(name)
    };
    let pod = pod_with(vec![mem("small", Some("64Mi")), mem("big", Some("1Gi")), mem("unbounded", None)]);
    e.manager.prepare_with(&e.source, &pod).await.expect("prepare");
    let sizes: HashMap<String, Option<u64>> = e
        .mounter
        .mounts()
        .into_iter()
        .map(|(p, s)| (p.file_name().expect("name").to_string_lossy().into_owned(), s))
        .collect();
    // sizeLimit when below the pod's 256Mi memory limit, else the pod limit.
    assert_eq!(sizes["small"], Some(64 << 20));
    assert_eq!(sizes["big"], Some(256 << 20));
    assert_eq!(sizes["unbounded"], Some(256 << 20));
    // Preparing again does not mount twice.
    e.manager.prepare_with(&e.source, &pod).await.expect("prepare again");
    assert_eq!(e.mounter.mounts().len(), 3);
}

#[tokio::test]
async fn host_path_is_used_in_place_after_its_type_check() {
    let e = env();
    let host = e.pods_dir.parent().expect("parent").join("host-data");
    let pod = pod_with(vec![Volume {
        host_path: Some(HostPathVolumeSource {
            path: host.display().to_string(),
            type_: Some("DirectoryOrCreate".into()),
        }),
        ..vol("data")
    }]);
    let prepared = e.manager.prepare_with(&e.source, &pod).await.expect("prepare");
    assert_eq!(prepared.volumes["data"].path, host);
    assert!(host.is_dir());

    let missing = pod_with(vec![Volume {
        host_path: Some(HostPathVolumeSource { path: "/nonexistent/k1s".into(), type_: Some("Directory".into()) }),
        ..vol("gone")
    }]);
    let err = e.manager.prepare_with(&e.source, &missing).await.expect_err("missing dir");
    assert_eq!(
        err.to_string(),
        "MountVolume.SetUp failed for volume \"gone\" : hostPath type check failed: /nonexistent/k1s is not a directory"
    );
}

#[tokio::test]
async fn config_map_volume_holds_keys_as_links_into_the_data_dir() {
    let e = env();
    let pod = pod_with(vec![config_map_volume("cfg", "app-config", None, None)]);
    let prepared = e.manager.prepare_with(&e.source, &pod).await.expect("prepare");
    let dir = &prepared.volumes["cfg"].path;
    assert!(dir.ends_with("kubernetes.io~configmap/cfg"));
    assert_eq!(std::fs::read_to_string(dir.join("app.conf")).expect("read"), "debug=true\n");
    assert_eq!(std::fs::read_link(dir.join("level")).expect("link"), Path::new("..data/level"));
    assert_eq!(mode(&dir.join("..data/level")), 0o644);
    // configMap volumes are plain directories, not tmpfs.
    assert!(e.mounter.mounts().is_empty());
}

#[tokio::test]
async fn items_and_modes_shape_the_config_map_volume() {
    let e = env();
    let items = vec![KeyToPath { key: "level".into(), path: "conf/level.txt".into(), mode: Some(0o400) }];
    let pod = pod_with(vec![config_map_volume("cfg", "app-config", Some(items), None)]);
    let prepared = e.manager.prepare_with(&e.source, &pod).await.expect("prepare");
    let dir = &prepared.volumes["cfg"].path;
    assert_eq!(std::fs::read_to_string(dir.join("conf/level.txt")).expect("read"), "info");
    assert!(!dir.join("app.conf").exists());
    assert_eq!(mode(&dir.join("conf/level.txt")), 0o400);
}

#[tokio::test]
async fn missing_config_map_fails_with_upstream_message_unless_optional() {
    let e = env();
    let pod = pod_with(vec![config_map_volume("cfg", "absent", None, None)]);
    let err = e.manager.prepare_with(&e.source, &pod).await.expect_err("missing");
    assert_eq!(err.to_string(), "MountVolume.SetUp failed for volume \"cfg\" : configmap \"absent\" not found");
    assert_eq!(err.failures().len(), 1);
    // Nothing was created for the failed volume.
    assert!(!e.pods_dir.join("uid-1/volumes/kubernetes.io~configmap/cfg").exists());

    let optional = pod_with(vec![config_map_volume("cfg", "absent", None, Some(true))]);
    let prepared = e.manager.prepare_with(&e.source, &optional).await.expect("optional");
    let dir = &prepared.volumes["cfg"].path;
    assert!(dir.is_dir());
    assert_eq!(
        std::fs::read_dir(dir)
            .expect("list")
            .filter(|e| !e.as_ref().expect("e").file_name().to_string_lossy().starts_with(".."))
            .count(),
        0
    );
}

#[tokio::test]
async fn every_failing_volume_is_reported() {
    let e = env();
    let pod = pod_with(vec![
        config_map_volume("a", "absent", None, None),
        Volume {
            secret: Some(SecretVolumeSource { secret_name: Some("nope".into()), ..Default::default() }),
            ..vol("b")
        },
        Volume {
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: "c".into(),
                read_only: None,
            }),
            ..vol("c")
        },
    ]);
    let err = e.manager.prepare_with(&e.source, &pod).await.expect_err("failures");
    let messages: Vec<String> = err.failures().iter().map(ToString::to_string).collect();
    assert_eq!(
        messages,
        vec![
            "MountVolume.SetUp failed for volume \"a\" : configmap \"absent\" not found".to_string(),
            "MountVolume.SetUp failed for volume \"b\" : secret \"nope\" not found".to_string(),
            "MountVolume.SetUp failed for volume \"c\" : persistentvolumeclaim \"c\" not found".to_string(),
        ]
    );
}

#[tokio::test]
async fn secret_volume_lives_on_tmpfs() {
    let e = env();
    let pod = pod_with(vec![Volume {
        secret: Some(SecretVolumeSource {
            secret_name: Some("creds".into()),
            default_mode: Some(0o400),
            ..Default::default()
        }),
        ..vol("creds")
    }]);
    let prepared = e.manager.prepare_with(&e.source, &pod).await.expect("prepare");
    let dir = prepared.volumes["creds"].path.clone();
    assert_eq!(std::fs::read_to_string(dir.join("password")).expect("read"), "hunter2");
    assert_eq!(mode(&dir.join("..data/password")), 0o400);
    assert_eq!(e.mounter.mounts(), vec![(dir.clone(), Some(256 << 20))]);

    e.manager.cleanup("uid-1").await;
    assert!(e.mounter.mounts().is_empty());
    assert!(!e.pods_dir.join("uid-1").exists());
}

#[tokio::test]
async fn resync_updates_contents_and_keeps_them_when_the_source_disappears() {
    let e = env();
    let pod = pod_with(vec![config_map_volume("cfg", "app-config", None, None)]);
    let prepared = e.manager.prepare_with(&e.source, &pod).await.expect("prepare");
    let dir = prepared.volumes["cfg"].path.clone();
    e.source.put_config_map(ConfigMap {
        metadata: ObjectMeta { name: Some("app-config".into()), namespace: Some("ns".into()), ..Default::default() },
        data: Some(BTreeMap::from([("level".into(), "warn".into())])),
        ..Default::default()
    });
    e.manager.resync_with(&e.source, &pod, &prepared).await.expect("resync");
    assert_eq!(std::fs::read_to_string(dir.join("level")).expect("read"), "warn");
    assert!(std::fs::symlink_metadata(dir.join("app.conf")).is_err(), "removed key pruned");

    e.source.remove_config_map("ns", "app-config");
    let err = e.manager.resync_with(&e.source, &pod, &prepared).await.expect_err("gone");
    assert_eq!(err.to_string(), "MountVolume.SetUp failed for volume \"cfg\" : configmap \"app-config\" not found");
    assert_eq!(std::fs::read_to_string(dir.join("level")).expect("read"), "warn");
}

#[tokio::test]
async fn downward_api_volume_follows_label_changes_on_resync() {
    let e = env();
    let item = |path: &str, fp: &str| DownwardAPIVolumeFile {
        field_ref: Some(ObjectFieldSelector { api_version: Some("v1".into()), field_path: fp.into() }),
        mode: None,
        path: path.into(),
        resource_field_ref: None,
    };
    let mut pod = pod_with(vec![Volume {
        downward_api: Some(DownwardAPIVolumeSource {
            default_mode: None,
            items: Some(vec![item("labels", "metadata.labels"), item("name", "metadata.name")]),
        }),
        ..vol("podinfo")
    }]);
    let prepared = e.manager.prepare_with(&e.source, &pod).await.expect("prepare");
    let dir = prepared.volumes["podinfo"].path.clone();
    assert!(dir.ends_with("kubernetes.io~downward-api/podinfo"));
    assert_eq!(std::fs::read_to_string(dir.join("labels")).expect("read"), "app=\"web\"");
    pod.metadata.labels = Some(BTreeMap::from([("app".into(), "web".into()), ("v".into(), "2".into())]));
    e.manager.resync_with(&e.source, &pod, &prepared).await.expect("resync");
    assert_eq!(std::fs::read_to_string(dir.join("labels")).expect("read"), "app=\"web\"\nv=\"2\"");
    assert_eq!(std::fs::read_to_string(dir.join("name")).expect("read"), "web");
}

#[tokio::test]
async fn projected_volume_merges_sources_and_requests_a_bound_token() {
    let e = env();
    let sources = vec![
        VolumeProjection {
            config_map: Some(ConfigMapProjection {
                name: "app-config".into(),
                items: Some(vec![KeyToPath { key: "level".into(), path: "level".into(), mode: None }]),
                optional: None,
            }),
            ..Default::default()
        },
        VolumeProjection {
            secret: Some(SecretProjection { name: "creds".into(), items: None, optional: None }),
            ..Default::default()
        },
        VolumeProjection {
            downward_api: Some(DownwardAPIProjection {
                items: Some(vec![DownwardAPIVolumeFile {
                    field_ref: Some(ObjectFieldSelector { api_version: None, field_path: "metadata.namespace".into() }),
                    mode: None,
                    path: "namespace".into(),
                    resource_field_ref: None,
                }]),
            }),
            ..Default::default()
        },
        VolumeProjection {
            service_account_token: Some(ServiceAccountTokenProjection {
                audience: Some("vault".into()),
                expiration_seconds: Some(7200),
                path: "token".into(),
            }),
            ..Default::default()
        },
    ];
    let mut pod = pod_with(vec![Volume {
        projected: Some(ProjectedVolumeSource { default_mode: Some(0o644), sources: Some(sources) }),
        ..vol("kube-api-access")
    }]);
    pod.spec.as_mut().expect("spec").service_account_name = Some("builder".into());
    let prepared = e.manager.prepare_with(&e.source, &pod).await.expect("prepare");
    let dir = prepared.volumes["kube-api-access"].path.clone();
    assert!(dir.ends_with("kubernetes.io~projected/kube-api-access"));
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).expect(f);
    assert_eq!(read("level"), "info");
    assert_eq!(read("password"), "hunter2");
    assert_eq!(read("namespace"), "ns");
    assert_eq!(read("token"), "token-1-ns-builder");
    let reqs = e.source.token_requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].spec.expiration_seconds, Some(7200));
    assert_eq!(reqs[0].spec.audiences, vec!["vault".to_string()]);
    // Projected volumes are tmpfs, and resync reuses the cached token.
    assert_eq!(e.mounter.mounts().len(), 1);
    e.manager.resync_with(&e.source, &pod, &prepared).await.expect("resync");
    assert_eq!(e.source.token_requests().len(), 1);
}

#[tokio::test]
async fn a_refused_token_request_is_a_volume_error() {
    let e = env();
    e.source.refuse_tokens(Some("the server could not find the requested resource"));
    let pod = pod_with(vec![Volume {
        projected: Some(ProjectedVolumeSource {
            default_mode: None,
            sources: Some(vec![VolumeProjection {
                service_account_token: Some(ServiceAccountTokenProjection {
                    audience: None,
                    expiration_seconds: None,
                    path: "token".into(),
                }),
                ..Default::default()
            }]),
        }),
        ..vol("tok")
    }]);
    let err = e.manager.prepare_with(&e.source, &pod).await.expect_err("refused");
    assert_eq!(
        err.to_string(),
        "MountVolume.SetUp failed for volume \"tok\" : the server could not find the requested resource"
    );
}

#[tokio::test]
async fn fs_group_owns_generated_files() {
    let e = env();
    let mut pod = pod_with(vec![config_map_volume("cfg", "app-config", None, None)]);
    pod.spec.as_mut().expect("spec").security_context =
        Some(PodSecurityContext { fs_group: Some(4321), ..Default::default() });
    let prepared = e.manager.prepare_with(&e.source, &pod).await.expect("prepare");
    let dir = &prepared.volumes["cfg"].path;
    let file = dir.join("..data/level");
    assert_eq!(std::fs::metadata(&file).expect("meta").gid(), 4321);
    assert_eq!(mode(&file), 0o644 | 0o440);
    assert_eq!(std::fs::metadata(dir).expect("meta").gid(), 4321);
    assert_eq!(mode(dir) & 0o2000, 0o2000);
}

fn mount(name: &str, path: &str) -> VolumeMount {
    VolumeMount { name: name.into(), mount_path: path.into(), ..Default::default() }
}

#[tokio::test]
async fn mounts_carry_read_only_propagation_and_sub_paths() {
    let e = env();
    let pod = pod_with(vec![
        Volume { empty_dir: Some(EmptyDirVolumeSource::default()), ..vol("scratch") },
        config_map_volume("cfg", "app-config", None, None),
    ]);
    let prepared = e.manager.prepare_with(&e.source, &pod).await.expect("prepare");
    let scratch = prepared.volumes["scratch"].path.clone();
    let c = Container {
        name: "app".into(),
        volume_mounts: Some(vec![
            VolumeMount { read_only: Some(true), ..mount("scratch", "/ro") },
            VolumeMount { mount_propagation: Some("HostToContainer".into()), ..mount("scratch", "/rw") },
            VolumeMount { sub_path: Some("logs/app".into()), ..mount("scratch", "/logs") },
            mount("cfg", "/etc/app"),
            VolumeMount { sub_path: Some("app.conf".into()), ..mount("cfg", "/etc/app.conf") },
        ]),
        ..Default::default()
    };
    let mounts = prepared.mounts_for(&c).expect("mounts");
    let by_path: HashMap<&str, &cri::Mount> = mounts.iter().map(|m| (m.container_path.as_str(), m)).collect();
    assert!(by_path["/ro"].readonly);
    assert!(!by_path["/rw"].readonly);
    assert_eq!(by_path["/rw"].propagation, cri::MountPropagation::PropagationHostToContainer as i32);
    assert_eq!(by_path["/ro"].propagation, cri::MountPropagation::PropagationPrivate as i32);
    // The sub path was created with the volume's mode.
    let logs = scratch.canonicalize().expect("canon").join("logs/app");
    assert_eq!(by_path["/logs"].host_path, logs.display().to_string());
    assert_eq!(mode(&logs), 0o777);
    // Generated volumes are read-only even when the mount does not say so.
    assert!(by_path["/etc/app"].readonly);
    // A configMap key as a sub path resolves to the real file.
    let conf = PathBuf::from(&by_path["/etc/app.conf"].host_path);
    assert_eq!(std::fs::read_to_string(&conf).expect("read"), "debug=true\n");
    assert!(!std::fs::symlink_metadata(&conf).expect("meta").file_type().is_symlink());
}

#[tokio::test]
async fn bad_mounts_fail_with_upstream_messages() {
    let e = env();
    let pod = pod_with(vec![Volume { empty_dir: Some(EmptyDirVolumeSource::default()), ..vol("scratch") }]);
    let prepared = e.manager.prepare_with(&e.source, &pod).await.expect("prepare");
    let err = |m: VolumeMount| {
        let c = Container { name: "app".into(), volume_mounts: Some(vec![m]), ..Default::default() };
        prepared.mounts_for(&c).expect_err("bad mount").to_string()
    };
    assert_eq!(err(mount("nope", "/x")), "cannot find volume \"nope\" to mount into container \"app\"");
    assert_eq!(
        err(VolumeMount { sub_path: Some("/abs".into()), ..mount("scratch", "/x") }),
        "error SubPath `/abs` must not be an absolute path"
    );
    assert_eq!(
        err(VolumeMount { sub_path: Some("a/../../b".into()), ..mount("scratch", "/x") }),
        "unable to provision SubPath `a/../../b`: must not contain '..'"
    );
    assert_eq!(
        err(VolumeMount { mount_propagation: Some("Sideways".into()), ..mount("scratch", "/x") }),
        "invalid MountPropagation mode: \"Sideways\""
    );
    assert_eq!(
        err(VolumeMount { read_only: Some(true), recursive_read_only: Some("Enabled".into()), ..mount("scratch", "/x") }),
        "failed to resolve recursive read-only mode: volume \"scratch\" requested recursive read-only mode, but it is not supported by the runtime"
    );
    // A symlink out of the volume is refused.
    std::os::unix::fs::symlink("/etc", prepared.volumes["scratch"].path.join("escape")).expect("symlink");
    assert_eq!(
        err(VolumeMount { sub_path: Some("escape/passwd".into()), ..mount("scratch", "/x") }),
        "failed to prepare subPath for volumeMount \"scratch\" of container \"app\""
    );
}

#[tokio::test]
async fn sub_path_expr_expands_the_container_environment() {
    let e = env();
    let pod = pod_with(vec![Volume { empty_dir: Some(EmptyDirVolumeSource::default()), ..vol("scratch") }]);
    let prepared = e.manager.prepare_with(&e.source, &pod).await.expect("prepare");
    let c = Container {
        name: "app".into(),
        volume_mounts: Some(vec![VolumeMount {
            sub_path_expr: Some("$(POD_NAME)/out".into()),
            ..mount("scratch", "/out")
        }]),
        ..Default::default()
    };
    let mounts = prepared.mounts_for_env(&c, &[("POD_NAME".into(), "web-0".into())]).expect("mounts");
    assert!(mounts[0].host_path.ends_with("scratch/web-0/out"), "{}", mounts[0].host_path);
    assert_eq!(prepared.mounts_for(&c).expect_err("no env").to_string(), "missing value for POD_NAME");
}

#[test]
fn pod_memory_limit_needs_every_container_limited() {
    let mut pod = pod_with(vec![]);
    assert_eq!(pod_memory_limit(&pod), Some(256 << 20));
    pod.spec.as_mut().expect("spec").containers.push(Container { name: "nolimit".into(), ..Default::default() });
    assert_eq!(pod_memory_limit(&pod), None);
}

#[tokio::test]
async fn a_claims_volume_is_its_bound_volumes_host_path_once_bound() {
    let e = env();
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("pvc-u1");
    let claim_volume = || Volume {
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource { claim_name: "data".into(), read_only: None }),
        ..vol("data")
    };
    let pod = pod_with(vec![claim_volume()]);
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let claim = |phase: &str, volume: &str| -> k8s_openapi::api::core::v1::PersistentVolumeClaim {
        serde_json::from_value(serde_json::json!({"metadata": {"name": "data", "namespace": ns},
            "spec": {"volumeName": volume}, "status": {"phase": phase}}))
        .expect("claim")
    };
    e.source.put_claim(claim("Pending", ""));
    let err = e.manager.prepare_with(&e.source, &pod).await.expect_err("unbound");
    assert_eq!(
        err.failures()[0].to_string(),
        format!("MountVolume.SetUp failed for volume \"data\" : PVC {ns}/data has non-bound phase (\"Pending\") or empty pvc.Spec.VolumeName (\"\")")
    );
    e.source.put_claim(claim("Bound", "pvc-u1"));
    e.source.put_volume(
        serde_json::from_value(serde_json::json!({"metadata": {"name": "pvc-u1"},
            "spec": {"hostPath": {"path": data.display().to_string(), "type": "DirectoryOrCreate"}}}))
        .expect("volume"),
    );
    let prepared = e.manager.prepare_with(&e.source, &pod).await.expect("bound");
    assert!(data.is_dir(), "DirectoryOrCreate made the directory");
    let container = k8s_openapi::api::core::v1::Container {
        name: "c".into(),
        volume_mounts: Some(vec![k8s_openapi::api::core::v1::VolumeMount {
            name: "data".into(),
            mount_path: "/data".into(),
            ..Default::default()
        }]),
        ..Default::default()
    };
    let mounts = prepared.mounts_for(&container).expect("mounts");
    assert!(
        mounts.iter().any(|m| m.container_path == "/data" && m.host_path == data.display().to_string() && !m.readonly),
        "{mounts:?}"
    );
    // A read-only claim source makes every mount of it read-only.
    let read_only = Volume {
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
            claim_name: "data".into(),
            read_only: Some(true),
        }),
        ..vol("data")
    };
    let prepared = e.manager.prepare_with(&e.source, &pod_with(vec![read_only])).await.expect("bound");
    let mounts = prepared.mounts_for(&container).expect("mounts");
    assert!(mounts.iter().all(|m| m.readonly), "{mounts:?}");
}
