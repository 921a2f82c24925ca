//! Pod volumes on this node, as upstream's volume plugins lay them out under
//! `<pods_dir>/<uid>/volumes/<plugin>/<name>` (`kubernetes.io~empty-dir`, `~configmap`,
//! `~secret`, `~downward-api`, `~projected`):
//!
//! - emptyDir: a 0777 directory, or a tmpfs (`medium: Memory`) sized by `sizeLimit`, the pod's
//!   memory limit or the node's allocatable memory, whichever is smallest;
//! - hostPath: the host path itself, after the `type` check;
//! - persistentVolumeClaim: the bound volume's hostPath or local path (as hostPath), once the
//!   claim is `Bound`;
//! - configMap, secret, downwardAPI, projected (configMap, secret, downwardAPI,
//!   serviceAccountToken): files written atomically (see [`atomic_writer`]); secret and
//!   projected volumes live on tmpfs so their contents never touch the disk;
//! - anything else (csi, nfs, ephemeral…) fails as unsupported.
//!
//! [`VolumeManager::resync`] rewrites the generated volumes when their sources change, and
//! [`PreparedVolumes::mounts_for`] turns a container's volumeMounts into CRI mounts
//! (readOnly, subPath/subPathExpr, mountPropagation), as upstream's `makeMounts`.

pub mod atomic_writer;
pub mod host_path;
pub mod mounter;
pub mod payload;
pub mod source;
pub mod tokens;

pub use mounter::{FakeMounter, HostMounter, MountError, Mounter};
pub use source::{ApiSource, MemorySource, ObjectSource, SourceError};

use crate::pods::env::expansion;
use crate::pods::env::fieldpath::FieldPathError;
use atomic_writer::{AtomicWriteError, Payload};
use k1s_api::strategies::quantity::Quantity;
use k1s_cri::v1 as cri;
use k8s_openapi::api::core::v1::{Container, Pod, Volume, VolumeProjection};
use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// Why one volume could not be set up; the texts are upstream's.
#[derive(Debug, thiserror::Error)]
pub enum SetUpCause {
    #[error("{0}")]
    Source(SourceError),
    #[error("configmap references non-existent config key: {key}")]
    MissingConfigMapKey { key: String },
    #[error("references non-existent secret key: {key}")]
    MissingSecretKey { key: String },
    #[error("{0}")]
    Downward(FieldPathError),
    #[error("{0}")]
    Write(AtomicWriteError),
    #[error("{0}")]
    Mount(MountError),
    #[error("{message}")]
    HostPathType { message: String },
    /// The I/O error is part of the text (upstream's), so it is not also a `source`.
    #[error("{op} {path}: {error}")]
    Io { op: &'static str, path: PathBuf, error: std::io::Error },
    #[error("{kind} volumes are not supported by k1s")]
    Unsupported { kind: &'static str },
    /// Upstream's volume manager text for a claim not yet bound.
    #[error("PVC {claim} has non-bound phase ({phase:?}) or empty pvc.Spec.VolumeName ({volume:?})")]
    Unbound { claim: String, phase: String, volume: String },
    /// Several sources of one projected/downwardAPI volume failed (upstream's aggregate).
    #[error("[{}]", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))]
    Several(Vec<SetUpCause>),
}

impl SetUpCause {
    /// Upstream's `NewAggregate`: nothing, the one error, or all of them.
    pub fn aggregate(mut errors: Vec<SetUpCause>) -> Option<SetUpCause> {
        match errors.len() {
            0 => None,
            1 => errors.pop(),
            _ => Some(SetUpCause::Several(errors)),
        }
    }
}

/// One volume that failed; displays as upstream's FailedMount event message.
#[derive(Debug, thiserror::Error)]
#[error("MountVolume.SetUp failed for volume \"{volume}\" : {cause}")]
pub struct VolumeFailure {
    pub volume: String,
    pub cause: SetUpCause,
}

/// Why volumes could not be prepared, or a container's mounts not be built.
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    /// Setting up (or resyncing) these volumes failed; each failure is one FailedMount event.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    SetUp(Vec<VolumeFailure>),
    #[error("pod {0} has no uid")]
    PodWithoutUid(String),
    #[error("cannot find volume {volume:?} to mount into container {container:?}")]
    UnknownVolume { volume: String, container: String },
    #[error("error SubPath `{0}` must not be an absolute path")]
    SubPathAbsolute(String),
    #[error("unable to provision SubPath `{0}`: must not contain '..'")]
    SubPathBacksteps(String),
    #[error("missing value for {0}")]
    SubPathExpr(String),
    #[error("failed to create subPath directory for volumeMount {mount:?} of container {container:?}")]
    SubPathCreate { mount: String, container: String },
    #[error("failed to prepare subPath for volumeMount {mount:?} of container {container:?}")]
    SubPathPrepare { mount: String, container: String },
    #[error("invalid MountPropagation mode: {0:?}")]
    Propagation(String),
    #[error("failed to resolve recursive read-only mode: {0}")]
    RecursiveReadOnly(String),
}

impl VolumeError {
    /// The per-volume failures (upstream emits one FailedMount event each).
    pub fn failures(&self) -> &[VolumeFailure] {
        match self {
            VolumeError::SetUp(f) => f,
            _ => &[],
        }
    }
}

/// The volume plugin, which names the directory a volume lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plugin {
    EmptyDir,
    HostPath,
    ConfigMap,
    Secret,
    DownwardApi,
    Projected,
}

impl Plugin {
    /// Upstream's escaped plugin name (`kubernetes.io/configmap` ▶ `kubernetes.io~configmap`).
    pub fn dir_name(self) -> &'static str {
        match self {
            Plugin::EmptyDir => "kubernetes.io~empty-dir",
            Plugin::HostPath => "kubernetes.io~host-path",
            Plugin::ConfigMap => "kubernetes.io~configmap",
            Plugin::Secret => "kubernetes.io~secret",
            Plugin::DownwardApi => "kubernetes.io~downward-api",
            Plugin::Projected => "kubernetes.io~projected",
        }
    }

    /// Generated volumes are always mounted read-only (upstream's `ReadOnly` attribute).
    fn read_only(self) -> bool {
        matches!(self, Plugin::ConfigMap | Plugin::Secret | Plugin::DownwardApi | Plugin::Projected)
    }
}

/// A volume ready to be mounted.
#[derive(Clone, Debug)]
pub struct PreparedVolume {
    pub plugin: Plugin,
    /// The host path containers mount.
    pub path: PathBuf,
    /// Every mount of it is read-only (a `persistentVolumeClaim` source's `readOnly`).
    pub read_only: bool,
}

/// The volumes of one pod, ready for containers.
#[derive(Clone, Debug)]
pub struct PreparedVolumes {
    pub pod_uid: String,
    pub volumes: BTreeMap<String, PreparedVolume>,
}

/// Materialises, refreshes and removes pod volumes.
pub struct VolumeManager {
    pods_dir: PathBuf,
    mounter: Arc<dyn Mounter>,
    node_allocatable: HashMap<String, String>,
    tokens: tokens::TokenCache,
}

fn pod_uid(pod: &Pod) -> Result<&str, VolumeError> {
    pod.metadata
        .uid
        .as_deref()
        .filter(|u| !u.is_empty())
        .ok_or_else(|| VolumeError::PodWithoutUid(pod.metadata.name.clone().unwrap_or_default()))
}

fn io_cause<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> SetUpCause + 'a {
    move |error| SetUpCause::Io { op, path: path.to_path_buf(), error }
}

/// The bytes of a quantity string, rounded up; `None` for zero, negative or unparsable.
fn bytes_of(q: &str) -> Option<u64> {
    let q = Quantity::parse(q).ok()?;
    let nanos = q.nanos();
    if nanos <= 0 {
        return None;
    }
    u64::try_from((nanos + 999_999_999) / 1_000_000_000).ok()
}

/// The pod's memory limit as its cgroup gets it (upstream's `ResourceConfigForPod`): the
/// pod-level limit, else the sum of the containers' limits (at least the largest init
/// container's), and none if any container has no memory limit.
pub fn pod_memory_limit(pod: &Pod) -> Option<u64> {
    let spec = pod.spec.as_ref()?;
    if let Some(v) = spec.resources.as_ref().and_then(|r| r.limits.as_ref()).and_then(|l| l.get("memory")) {
        return bytes_of(&v.0);
    }
    let limit = |c: &Container| {
        c.resources.as_ref().and_then(|r| r.limits.as_ref()).and_then(|l| l.get("memory")).and_then(|q| bytes_of(&q.0))
    };
    let mut sum: u64 = 0;
    for c in &spec.containers {
        sum = sum.saturating_add(limit(c)?);
    }
    let mut init_max: u64 = 0;
    let mut sidecars: u64 = 0;
    for c in spec.init_containers.iter().flatten() {
        let l = limit(c)?;
        if c.restart_policy.as_deref() == Some("Always") {
            sidecars = sidecars.saturating_add(l);
            init_max = init_max.max(sidecars);
        } else {
            init_max = init_max.max(sidecars.saturating_add(l));
        }
    }
    Some(sum.saturating_add(sidecars).max(init_max))
}

fn fs_group(pod: &Pod) -> Option<u32> {
    pod.spec
        .as_ref()
        .and_then(|s| s.security_context.as_ref())
        .and_then(|sc| sc.fs_group)
        .and_then(|g| u32::try_from(g).ok())
}

/// The source of a volume k1s cannot set up, if it has one.
fn unsupported_kind(v: &Volume) -> Option<&'static str> {
    let kinds: [(bool, &'static str); 23] = [
        (v.ephemeral.is_some(), "ephemeral"),
        (v.csi.is_some(), "csi"),
        (v.nfs.is_some(), "nfs"),
        (v.image.is_some(), "image"),
        (v.git_repo.is_some(), "gitRepo"),
        (v.iscsi.is_some(), "iscsi"),
        (v.aws_elastic_block_store.is_some(), "awsElasticBlockStore"),
        (v.azure_disk.is_some(), "azureDisk"),
        (v.azure_file.is_some(), "azureFile"),
        (v.cephfs.is_some(), "cephfs"),
        (v.cinder.is_some(), "cinder"),
        (v.fc.is_some(), "fc"),
        (v.flex_volume.is_some(), "flexVolume"),
        (v.flocker.is_some(), "flocker"),
        (v.gce_persistent_disk.is_some(), "gcePersistentDisk"),
        (v.glusterfs.is_some(), "glusterfs"),
        (v.photon_persistent_disk.is_some(), "photonPersistentDisk"),
        (v.portworx_volume.is_some(), "portworxVolume"),
        (v.quobyte.is_some(), "quobyte"),
        (v.rbd.is_some(), "rbd"),
        (v.scale_io.is_some(), "scaleIO"),
        (v.storageos.is_some(), "storageos"),
        (v.vsphere_volume.is_some(), "vsphereVolume"),
    ];
    kinds.into_iter().find(|(set, _)| *set).map(|(_, kind)| kind)
}

impl VolumeManager {
    /// Volumes under `pods_dir` (`<root>/pods`), mounted with the host's `mount`, sized
    /// against this machine's CPUs and memory.
    pub fn new(pods_dir: PathBuf) -> Self {
        let mut alloc = HashMap::new();
        alloc.insert("cpu".to_string(), std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).to_string());
        alloc.insert("memory".to_string(), crate::host::memory_capacity_bytes().to_string());
        VolumeManager { pods_dir, mounter: Arc::new(HostMounter), node_allocatable: alloc, tokens: Default::default() }
    }

    /// Replaces the mounter (tests use [`FakeMounter`]).
    pub fn with_mounter(mut self, mounter: Arc<dyn Mounter>) -> Self {
        self.mounter = mounter;
        self
    }

    /// Replaces the node allocatable used for memory-backed volume sizes and downwardAPI
    /// resource files (`cpu`, `memory`, `ephemeral-storage` quantity strings).
    pub fn with_node_allocatable(mut self, allocatable: HashMap<String, String>) -> Self {
        self.node_allocatable = allocatable;
        self
    }

    /// `<pods_dir>/<uid>/volumes/<plugin>/<name>`.
    pub fn volume_dir(&self, uid: &str, plugin: Plugin, name: &str) -> PathBuf {
        self.pods_dir.join(uid).join("volumes").join(plugin.dir_name()).join(name)
    }

    /// Sets up every volume of `pod`, reading sources through the API.
    pub async fn prepare(&self, client: &kube::Client, pod: &Pod) -> Result<PreparedVolumes, VolumeError> {
        self.prepare_with(&ApiSource::new(client.clone()), pod).await
    }

    /// Sets up every volume of `pod`; idempotent. Fails with every volume that failed.
    pub async fn prepare_with(&self, source: &dyn ObjectSource, pod: &Pod) -> Result<PreparedVolumes, VolumeError> {
        let uid = pod_uid(pod)?;
        let mut volumes = BTreeMap::new();
        let mut failures = Vec::new();
        for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
            match self.set_up(source, pod, uid, v).await {
                Ok(p) => {
                    volumes.insert(v.name.clone(), p);
                }
                Err(cause) => failures.push(VolumeFailure { volume: v.name.clone(), cause }),
            }
        }
        if !failures.is_empty() {
            return Err(VolumeError::SetUp(failures));
        }
        Ok(PreparedVolumes { pod_uid: uid.to_string(), volumes })
    }

    /// Rewrites configMap, secret, downwardAPI and projected volumes whose sources changed.
    /// A volume whose source is gone keeps its last contents.
    pub async fn resync(
        &self,
        client: &kube::Client,
        pod: &Pod,
        prepared: &PreparedVolumes,
    ) -> Result<(), VolumeError> {
        self.resync_with(&ApiSource::new(client.clone()), pod, prepared).await
    }

    pub async fn resync_with(
        &self,
        source: &dyn ObjectSource,
        pod: &Pod,
        prepared: &PreparedVolumes,
    ) -> Result<(), VolumeError> {
        let mut failures = Vec::new();
        for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
            let Some(p) = prepared.volumes.get(&v.name) else { continue };
            let result = match p.plugin {
                Plugin::ConfigMap | Plugin::Secret | Plugin::DownwardApi | Plugin::Projected => {
                    match self.payload_of(source, pod, v).await {
                        Ok(payload) => self.write(&p.path, payload, pod).await.map(|changed| {
                            if changed {
                                tracing::info!(volume = %v.name, pod = ?pod.metadata.name, "volume contents updated");
                            }
                        }),
                        Err(e) => Err(e),
                    }
                }
                Plugin::EmptyDir | Plugin::HostPath => Ok(()),
            };
            if let Err(cause) = result {
                failures.push(VolumeFailure { volume: v.name.clone(), cause });
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(VolumeError::SetUp(failures))
        }
    }

    /// Unmounts the pod's tmpfs volumes and removes its directory. Errors are logged; a
    /// directory with a mount that would not go is left in place.
    pub async fn cleanup(&self, pod_uid: &str) {
        self.tokens.forget_pod(pod_uid);
        if pod_uid.is_empty() || pod_uid.contains('/') {
            return;
        }
        let dir = self.pods_dir.join(pod_uid);
        let canonical = match tokio::fs::canonicalize(&dir).await {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) => {
                tracing::warn!(error = %e, path = %dir.display(), "cannot resolve the pod directory; leaving it");
                return;
            }
        };
        let mounts = match self.mounter.mounts_under(&canonical) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(error = %e, pod_uid, "cannot read the mount table; leaving the pod directory");
                return;
            }
        };
        let mut clean = true;
        for m in mounts {
            if let Err(e) = self.mounter.unmount(&m).await {
                tracing::warn!(error = %e, pod_uid, "unmounting a pod volume failed");
                clean = false;
            }
        }
        if !clean {
            return;
        }
        match tokio::fs::remove_dir_all(&dir).await {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(error = %e, path = %dir.display(), "removing the pod directory failed"),
        }
    }

    async fn set_up(
        &self,
        source: &dyn ObjectSource,
        pod: &Pod,
        uid: &str,
        v: &Volume,
    ) -> Result<PreparedVolume, SetUpCause> {
        if let Some(hp) = &v.host_path {
            let path = PathBuf::from(&hp.path);
            let type_ = hp.type_.clone();
            let check = path.clone();
            tokio::task::spawn_blocking(move || host_path::check_type(&check, type_.as_deref())).await.map_err(
                |e| SetUpCause::Io { op: "checking", path: path.clone(), error: std::io::Error::other(e) },
            )??;
            return Ok(PreparedVolume { plugin: Plugin::HostPath, path, read_only: false });
        }
        if let Some(claim) = &v.persistent_volume_claim {
            let mut prepared = self.claimed(source, pod, &claim.claim_name).await?;
            prepared.read_only = claim.read_only.unwrap_or(false);
            return Ok(prepared);
        }
        if let Some(kind) = unsupported_kind(v) {
            return Err(SetUpCause::Unsupported { kind });
        }
        let defaulted =
            v.config_map.is_none() && v.secret.is_none() && v.downward_api.is_none() && v.projected.is_none();
        // A volume without a source is an emptyDir (the API's defaulting).
        if let Some(ed) = v.empty_dir.clone().or_else(|| defaulted.then(Default::default)) {
            let dir = self.volume_dir(uid, Plugin::EmptyDir, &v.name);
            match ed.medium.as_deref().unwrap_or("") {
                "" => self.make_dir(&dir, pod, false).await?,
                "Memory" => {
                    let limit = ed.size_limit.as_ref().and_then(|q| bytes_of(&q.0));
                    self.make_tmpfs(&dir, pod, limit, false).await?;
                }
                _ => return Err(SetUpCause::Unsupported { kind: "hugePages-backed emptyDir" }),
            }
            return Ok(PreparedVolume { plugin: Plugin::EmptyDir, path: dir, read_only: false });
        }
        let plugin = if v.config_map.is_some() {
            Plugin::ConfigMap
        } else if v.secret.is_some() {
            Plugin::Secret
        } else if v.downward_api.is_some() {
            Plugin::DownwardApi
        } else {
            Plugin::Projected
        };
        let dir = self.volume_dir(uid, plugin, &v.name);
        // Compute the contents first: a missing source leaves nothing behind.
        let payload = self.payload_of(source, pod, v).await?;
        match plugin {
            Plugin::Secret | Plugin::Projected => self.make_tmpfs(&dir, pod, None, true).await?,
            _ => self.make_dir(&dir, pod, true).await?,
        }
        self.write(&dir, payload, pod).await?;
        Ok(PreparedVolume { plugin, path: dir, read_only: false })
    }

    /// The host directory of the volume bound to the claim `name` of `pod`'s namespace.
    async fn claimed(&self, source: &dyn ObjectSource, pod: &Pod, name: &str) -> Result<PreparedVolume, SetUpCause> {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let claim = source.persistent_volume_claim(ns, name).await.map_err(SetUpCause::Source)?;
        let phase = claim.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
        let volume = claim.spec.as_ref().and_then(|s| s.volume_name.clone()).unwrap_or_default();
        if phase != "Bound" || volume.is_empty() {
            return Err(SetUpCause::Unbound { claim: format!("{ns}/{name}"), phase, volume });
        }
        let pv = source.persistent_volume(&volume).await.map_err(SetUpCause::Source)?;
        let spec = pv.spec.unwrap_or_default();
        let (path, type_) = match (spec.host_path, spec.local) {
            (Some(hp), _) => (PathBuf::from(hp.path), hp.type_),
            (None, Some(local)) => (PathBuf::from(local.path), None),
            (None, None) => {
                return Err(SetUpCause::Unsupported { kind: "persistentVolume sources other than hostPath and local" })
            }
        };
        let check = path.clone();
        tokio::task::spawn_blocking(move || host_path::check_type(&check, type_.as_deref()))
            .await
            .map_err(|e| SetUpCause::Io { op: "checking", path: path.clone(), error: std::io::Error::other(e) })??;
        Ok(PreparedVolume { plugin: Plugin::HostPath, path, read_only: false })
    }

    /// A 0777 directory (upstream's emptyDir `setupDir`), group-owned by fsGroup if set.
    async fn make_dir(&self, dir: &Path, pod: &Pod, read_only: bool) -> Result<(), SetUpCause> {
        tokio::fs::create_dir_all(dir).await.map_err(io_cause("creating", dir))?;
        let mut mode = 0o777;
        if let Some(gid) = fs_group(pod) {
            std::os::unix::fs::lchown(dir, None, Some(gid)).map_err(io_cause("changing the group of", dir))?;
            mode |= 0o2000;
            if !read_only {
                mode |= 0o660;
            }
        }
        tokio::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode))
            .await
            .map_err(io_cause("setting the mode of", dir))
    }

    /// A tmpfs at `dir` (unless one is there already), sized by the smallest of `limit`, the
    /// pod's memory limit and the node's allocatable memory.
    async fn make_tmpfs(&self, dir: &Path, pod: &Pod, limit: Option<u64>, read_only: bool) -> Result<(), SetUpCause> {
        tokio::fs::create_dir_all(dir).await.map_err(io_cause("creating", dir))?;
        // The mount table lists canonical paths.
        let canonical = tokio::fs::canonicalize(dir).await.map_err(io_cause("resolving", dir))?;
        let mounted = self.mounter.mounts_under(&canonical).map_err(SetUpCause::Mount)?.contains(&canonical);
        if !mounted {
            let mut size = self.node_allocatable.get("memory").and_then(|m| bytes_of(m));
            for candidate in [pod_memory_limit(pod), limit].into_iter().flatten() {
                size = Some(size.map_or(candidate, |s| s.min(candidate)));
            }
            self.mounter.mount_tmpfs(dir, size).await.map_err(SetUpCause::Mount)?;
        }
        self.make_dir(dir, pod, read_only).await
    }

    async fn write(&self, dir: &Path, payload: Payload, pod: &Pod) -> Result<bool, SetUpCause> {
        let dir = dir.to_path_buf();
        let gid = fs_group(pod);
        let path = dir.clone();
        tokio::task::spawn_blocking(move || atomic_writer::write(&dir, &payload, gid))
            .await
            .map_err(|e| SetUpCause::Io { op: "writing", path, error: std::io::Error::other(e) })?
            .map_err(SetUpCause::Write)
    }

    /// The files a generated volume should hold now.
    async fn payload_of(&self, source: &dyn ObjectSource, pod: &Pod, v: &Volume) -> Result<Payload, SetUpCause> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        if let Some(c) = &v.config_map {
            let optional = c.optional.unwrap_or(false);
            let mode = payload::mode_of(c.default_mode, payload::DEFAULT_MODE);
            return match source.config_map(namespace, &c.name).await {
                Ok(cm) => payload::config_map(&cm, c.items.as_deref(), mode, optional),
                Err(e) if e.is_not_found() && optional => Ok(Payload::new()),
                Err(e) => Err(SetUpCause::Source(e)),
            };
        }
        if let Some(s) = &v.secret {
            let optional = s.optional.unwrap_or(false);
            let mode = payload::mode_of(s.default_mode, payload::DEFAULT_MODE);
            let name = s.secret_name.as_deref().unwrap_or("");
            return match source.secret(namespace, name).await {
                Ok(secret) => payload::secret(&secret, s.items.as_deref(), mode, optional),
                Err(e) if e.is_not_found() && optional => Ok(Payload::new()),
                Err(e) => Err(SetUpCause::Source(e)),
            };
        }
        if let Some(d) = &v.downward_api {
            let mode = payload::mode_of(d.default_mode, payload::DEFAULT_MODE);
            return payload::downward_api(pod, d.items.as_deref().unwrap_or_default(), mode, &self.node_allocatable);
        }
        if let Some(p) = &v.projected {
            let mode = payload::mode_of(p.default_mode, payload::DEFAULT_MODE);
            return self.projected_payload(source, pod, p.sources.as_deref().unwrap_or_default(), mode).await;
        }
        Ok(Payload::new())
    }

    /// Upstream's projected `collectData`: later sources win on the same path; every failing
    /// source is reported.
    async fn projected_payload(
        &self,
        source: &dyn ObjectSource,
        pod: &Pod,
        sources: &[VolumeProjection],
        default_mode: u32,
    ) -> Result<Payload, SetUpCause> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let mut out = Payload::new();
        let mut errors = Vec::new();
        for s in sources {
            let part = if let Some(c) = &s.config_map {
                let optional = c.optional.unwrap_or(false);
                match source.config_map(namespace, &c.name).await {
                    Ok(cm) => payload::config_map(&cm, c.items.as_deref(), default_mode, optional),
                    Err(e) if e.is_not_found() && optional => Ok(Payload::new()),
                    Err(e) => Err(SetUpCause::Source(e)),
                }
            } else if let Some(c) = &s.secret {
                let optional = c.optional.unwrap_or(false);
                match source.secret(namespace, &c.name).await {
                    Ok(secret) => payload::secret(&secret, c.items.as_deref(), default_mode, optional),
                    Err(e) if e.is_not_found() && optional => Ok(Payload::new()),
                    Err(e) => Err(SetUpCause::Source(e)),
                }
            } else if let Some(d) = &s.downward_api {
                payload::downward_api(pod, d.items.as_deref().unwrap_or_default(), default_mode, &self.node_allocatable)
            } else if let Some(t) = &s.service_account_token {
                // With an fsGroup, the token is 0600 and the group bits come from the ownership pass.
                let mode = if fs_group(pod).is_some() { 0o600 } else { default_mode };
                let spec = tokens::TokenSpec {
                    namespace,
                    service_account: pod
                        .spec
                        .as_ref()
                        .and_then(|s| s.service_account_name.as_deref())
                        .filter(|s| !s.is_empty())
                        .unwrap_or("default"),
                    pod_name: pod.metadata.name.as_deref().unwrap_or(""),
                    pod_uid: pod.metadata.uid.as_deref().unwrap_or(""),
                    audience: t.audience.as_deref().filter(|a| !a.is_empty()),
                    expiration_seconds: t.expiration_seconds.unwrap_or(3600),
                };
                match self.tokens.get(source, &spec).await {
                    Ok(token) => Ok(Payload::from([(
                        t.path.clone(),
                        atomic_writer::FileProjection { data: token.into_bytes(), mode },
                    )])),
                    Err(e) => Err(SetUpCause::Source(e)),
                }
            } else if s.cluster_trust_bundle.is_some() {
                Err(SetUpCause::Unsupported { kind: "clusterTrustBundle projected" })
            } else if s.pod_certificate.is_some() {
                Err(SetUpCause::Unsupported { kind: "podCertificate projected" })
            } else {
                Ok(Payload::new())
            };
            match part {
                Ok(p) => out.extend(p),
                Err(e) => errors.push(e),
            }
        }
        match SetUpCause::aggregate(errors) {
            None => Ok(out),
            Some(e) => Err(e),
        }
    }
}

/// Upstream's `translateMountPropagation`.
fn propagation(mode: Option<&str>) -> Result<cri::MountPropagation, VolumeError> {
    match mode {
        None | Some("None") => Ok(cri::MountPropagation::PropagationPrivate),
        Some("HostToContainer") => Ok(cri::MountPropagation::PropagationHostToContainer),
        Some("Bidirectional") => Ok(cri::MountPropagation::PropagationBidirectional),
        Some(other) => Err(VolumeError::Propagation(other.to_string())),
    }
}

/// Upstream's `resolveRecursiveReadOnly` for a runtime without recursive read-only support
/// (containerd 1.6): `IfPossible` degrades to a plain read-only mount, `Enabled` fails.
fn recursive_read_only(m: &k8s_openapi::api::core::v1::VolumeMount) -> Result<bool, VolumeError> {
    let mode = match m.recursive_read_only.as_deref() {
        None | Some("Disabled") => return Ok(false),
        Some(mode) => mode,
    };
    if !m.read_only.unwrap_or(false) {
        return Err(VolumeError::RecursiveReadOnly(format!(
            "volume {:?} requested recursive read-only mode, but it is not read-only",
            m.name
        )));
    }
    if let Some(p) = m.mount_propagation.as_deref().filter(|p| *p != "None") {
        return Err(VolumeError::RecursiveReadOnly(format!(
            "volume {:?} requested recursive read-only mode, but it is not compatible with propagation {p:?}",
            m.name
        )));
    }
    match mode {
        "IfPossible" => Ok(false),
        "Enabled" => Err(VolumeError::RecursiveReadOnly(format!(
            "volume {:?} requested recursive read-only mode, but it is not supported by the runtime",
            m.name
        ))),
        other => Err(VolumeError::RecursiveReadOnly(format!("unknown recursive read-only mode {other:?}"))),
    }
}

/// Resolves `sub` inside `volume`, creating missing directories with the volume's mode, and
/// refusing anything (a symlink on the way) that leads outside the volume.
fn resolve_sub_path(volume: &Path, sub: &str) -> Result<PathBuf, SubPathFailure> {
    let base = volume.canonicalize().map_err(|_| SubPathFailure::Prepare)?;
    let mode =
        std::fs::metadata(&base).map(|m| m.permissions().mode() & 0o7777).map_err(|_| SubPathFailure::Prepare)?;
    let mut cur = volume.to_path_buf();
    for comp in Path::new(sub).components() {
        let Component::Normal(c) = comp else { continue };
        cur.push(c);
        match std::fs::symlink_metadata(&cur) {
            Ok(meta) => {
                if meta.file_type().is_symlink() {
                    let target = cur.canonicalize().map_err(|_| SubPathFailure::Prepare)?;
                    if !target.starts_with(&base) {
                        return Err(SubPathFailure::Prepare);
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir(&cur).map_err(|_| SubPathFailure::Create)?;
                std::fs::set_permissions(&cur, std::fs::Permissions::from_mode(mode))
                    .map_err(|_| SubPathFailure::Create)?;
            }
            Err(_) => return Err(SubPathFailure::Prepare),
        }
    }
    let resolved = cur.canonicalize().map_err(|_| SubPathFailure::Prepare)?;
    if !resolved.starts_with(&base) {
        return Err(SubPathFailure::Prepare);
    }
    Ok(resolved)
}

enum SubPathFailure {
    Create,
    Prepare,
}

impl PreparedVolumes {
    /// The CRI mounts of `container`'s volumeMounts (subPathExpr sees no variables: use
    /// [`PreparedVolumes::mounts_for_env`] with the container's environment).
    pub fn mounts_for(&self, container: &Container) -> Result<Vec<cri::Mount>, VolumeError> {
        self.mounts_for_env(container, &[])
    }

    /// The CRI mounts of `container`'s volumeMounts, expanding `subPathExpr` with `env`.
    pub fn mounts_for_env(
        &self,
        container: &Container,
        env: &[(String, String)],
    ) -> Result<Vec<cri::Mount>, VolumeError> {
        let mut out = Vec::new();
        for m in container.volume_mounts.iter().flatten() {
            let vol = self.volumes.get(&m.name).ok_or_else(|| VolumeError::UnknownVolume {
                volume: m.name.clone(),
                container: container.name.clone(),
            })?;
            let mut sub = m.sub_path.clone().unwrap_or_default();
            if let Some(expr) = m.sub_path_expr.as_deref().filter(|e| !e.is_empty()) {
                let mut missing = std::collections::BTreeSet::new();
                sub = expansion::expand(expr, |k| match env.iter().find(|(name, _)| name == k) {
                    Some((_, v)) if !v.is_empty() => Some(v.clone()),
                    _ => {
                        missing.insert(k.to_string());
                        Some(String::new())
                    }
                });
                if !missing.is_empty() {
                    return Err(VolumeError::SubPathExpr(missing.into_iter().collect::<Vec<_>>().join(", ")));
                }
            }
            let mut host_path = vol.path.clone();
            if !sub.is_empty() {
                if sub.starts_with('/') {
                    return Err(VolumeError::SubPathAbsolute(sub));
                }
                if sub.split('/').any(|c| c == "..") {
                    return Err(VolumeError::SubPathBacksteps(sub));
                }
                host_path = resolve_sub_path(&vol.path, &sub).map_err(|f| match f {
                    SubPathFailure::Create => {
                        VolumeError::SubPathCreate { mount: m.name.clone(), container: container.name.clone() }
                    }
                    SubPathFailure::Prepare => {
                        VolumeError::SubPathPrepare { mount: m.name.clone(), container: container.name.clone() }
                    }
                })?;
            }
            let propagation = propagation(m.mount_propagation.as_deref())?;
            let rro = recursive_read_only(m)?;
            out.push(cri::Mount {
                container_path: m.mount_path.clone(),
                host_path: host_path.display().to_string(),
                readonly: m.read_only.unwrap_or(false) || vol.plugin.read_only() || vol.read_only,
                selinux_relabel: false,
                propagation: propagation as i32,
                recursive_read_only: rro,
                ..Default::default()
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
