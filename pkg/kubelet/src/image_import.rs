//! Importing image archives into containerd's `k8s.io` namespace (the one its CRI plugin
//! serves), from `k1s images import` and from the images folder `<data-dir>/agent/images/`.
//!
//! An archive is first validated as a whole ([`crate::image_archive`]), then decompressed when
//! needed and handed to containerd's `ctr images import`, which writes the content, creates the
//! image records and unpacks them for the default (overlayfs) snapshotter, so CRI's
//! ImageStatus sees them at once. The folder is scanned at start, before the kubelet starts
//! pods, and then every few seconds; what was imported (file name, size, modification time and
//! the result) is remembered in `<data-dir>/agent/images-imported.json`, so an unchanged file
//! is not imported again after a restart, and a file that failed is retried only once it
//! changes.

use crate::image_archive::{self, ArchiveError, ArchiveSummary};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};
use tokio_util::sync::CancellationToken;

/// containerd's namespace for Kubernetes (CRI) images.
pub const K8S_NAMESPACE: &str = "k8s.io";
/// How often the images folder is scanned for new or changed archives.
pub const POLL_INTERVAL: Duration = Duration::from_secs(3);
/// A file changed this recently may still be being written: it waits for the next scan.
const SETTLE: Duration = Duration::from_secs(2);

/// File name suffixes of archives (as k3s accepts, without bzip2 and lz4).
const SUFFIXES: &[&str] = &[".tar", ".tar.gz", ".tgz", ".tar.zst", ".tar.zstd", ".tzst"];

/// Why an import failed.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("checking {}", path.display())]
    Archive {
        path: PathBuf,
        #[source]
        source: ArchiveError,
    },
    #[error("running {program} (is containerd's ctr installed?)")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("ctr images import of {} failed: {stderr}", path.display())]
    Ctr { path: PathBuf, stderr: String },
    #[error("preparing {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("checking an archive: the blocking task failed: {0}")]
    Join(String),
}

/// Something that can import a plain image tar into containerd's `k8s.io` namespace.
#[async_trait::async_trait]
pub trait ImageImporter: Send + Sync {
    async fn import_tar(&self, plain_tar: &Path) -> Result<(), ImportError>;
}

/// Imports with containerd's `ctr` against one containerd socket.
#[derive(Clone, Debug)]
pub struct CtrImporter {
    /// containerd's socket path (no `unix://`).
    pub address: PathBuf,
    /// The `ctr` binary.
    pub program: PathBuf,
}

impl CtrImporter {
    /// An importer for the containerd serving `endpoint` (`unix:///…/containerd.sock` or a path).
    pub fn for_endpoint(endpoint: &str) -> Self {
        let address = endpoint.strip_prefix("unix://").unwrap_or(endpoint);
        Self { address: PathBuf::from(address), program: PathBuf::from("ctr") }
    }
}

#[async_trait::async_trait]
impl ImageImporter for CtrImporter {
    async fn import_tar(&self, plain_tar: &Path) -> Result<(), ImportError> {
        let out = tokio::process::Command::new(&self.program)
            .arg("--address")
            .arg(&self.address)
            .args(["--namespace", K8S_NAMESPACE, "images", "import"])
            .arg(plain_tar)
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .map_err(|source| ImportError::Spawn { program: self.program.display().to_string(), source })?;
        if !out.status.success() {
            return Err(ImportError::Ctr {
                path: plain_tar.to_path_buf(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(())
    }
}

/// Validates `archive`, decompresses it under `scratch` when needed and imports it. Nothing is
/// imported when the archive is not valid.
pub async fn import_archive(
    importer: &dyn ImageImporter,
    archive: &Path,
    scratch: &Path,
) -> Result<ArchiveSummary, ImportError> {
    let path = archive.to_path_buf();
    let scratch_file =
        scratch.join(format!(".k1s-import-{}-{}.tar", std::process::id(), file_name(archive).replace('/', "_")));
    let scratch_dir = scratch.to_path_buf();
    let sf = scratch_file.clone();
    let (summary, plain) = tokio::task::spawn_blocking(move || {
        let summary = image_archive::validate_file(&path)
            .map_err(|source| ImportError::Archive { path: path.clone(), source })?;
        std::fs::create_dir_all(&scratch_dir)
            .map_err(|source| ImportError::Io { path: scratch_dir.clone(), source })?;
        let plain = image_archive::decompress_to(&path, &sf)
            .map_err(|source| ImportError::Archive { path: path.clone(), source })?;
        Ok::<_, ImportError>((summary, plain))
    })
    .await
    .map_err(|e| ImportError::Join(e.to_string()))??;
    let result = importer.import_tar(&plain).await;
    if plain == scratch_file {
        let _ = std::fs::remove_file(&scratch_file);
    }
    result.map(|()| summary)
}

fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Whether `name` looks like an image archive k1s imports from the folder.
pub fn is_archive_name(name: &str) -> bool {
    !name.starts_with('.') && SUFFIXES.iter().any(|s| name.ends_with(s))
}

/// What the folder held at the last import of one file.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ImportedFile {
    pub size: u64,
    /// Modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: u128,
    /// Image names imported (empty when it failed).
    #[serde(default)]
    pub images: Vec<String>,
    /// Why the import failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The record of imports: file name ▶ what was imported.
pub type ImportState = BTreeMap<String, ImportedFile>;

/// A file seen in the folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FolderFile {
    pub name: String,
    pub size: u64,
    pub mtime_ns: u128,
}

/// The files to import: archives that are new or changed since the state recorded them and
/// that have not changed for [`SETTLE`] (unless `now` is `None`: at start everything counts).
pub fn pending(files: &[FolderFile], state: &ImportState, now: Option<SystemTime>) -> Vec<FolderFile> {
    let now_ns = now.map(|n| n.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_nanos());
    files
        .iter()
        .filter(|f| is_archive_name(&f.name))
        .filter(|f| state.get(&f.name).is_none_or(|s| s.size != f.size || s.mtime_ns != f.mtime_ns))
        .filter(|f| now_ns.is_none_or(|now| now.saturating_sub(f.mtime_ns) >= SETTLE.as_nanos()))
        .cloned()
        .collect()
}

/// The archives-to-be of a folder (a missing folder has none).
pub fn list_folder(dir: &Path) -> std::io::Result<Vec<FolderFile>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry?;
        let meta = entry.metadata()?;
        if !meta.is_file() {
            continue;
        }
        let mtime_ns =
            meta.modified()?.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default();
        out.push(FolderFile { name: entry.file_name().to_string_lossy().into_owned(), size: meta.len(), mtime_ns });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The images folder and its import record.
#[derive(Clone, Debug)]
pub struct ImagesFolder {
    /// `<data-dir>/agent/images`.
    pub dir: PathBuf,
    /// `<data-dir>/agent/images-imported.json`.
    pub state_file: PathBuf,
    /// Decompressed copies live here while they are imported.
    pub scratch: PathBuf,
}

impl ImagesFolder {
    pub fn for_data_dir(data_dir: &Path) -> Self {
        let agent = data_dir.join("agent");
        Self {
            dir: agent.join("images"),
            state_file: agent.join("images-imported.json"),
            scratch: agent.join("image-import"),
        }
    }

    fn load_state(&self) -> ImportState {
        match std::fs::read(&self.state_file) {
            Ok(data) => serde_json::from_slice(&data).unwrap_or_else(|e| {
                tracing::warn!(file = %self.state_file.display(), error = %e, "unreadable import record: importing the images folder again");
                ImportState::new()
            }),
            Err(_) => ImportState::new(),
        }
    }

    fn save_state(&self, state: &ImportState) -> Result<(), ImportError> {
        let data = serde_json::to_vec_pretty(state).unwrap_or_default();
        crate::containerd::write_atomic(&self.state_file, &data, 0o600)
            .map_err(|source| ImportError::Io { path: self.state_file.clone(), source })
    }

    /// Imports every new or changed archive; each failure is logged (once per file version) and
    /// recorded. `settle`: skip files modified in the last seconds (for scans while running).
    /// Returns the number of files imported.
    pub async fn import_new(&self, importer: &dyn ImageImporter, settle: bool) -> Result<usize, ImportError> {
        std::fs::create_dir_all(&self.dir).map_err(|source| ImportError::Io { path: self.dir.clone(), source })?;
        let files = list_folder(&self.dir).map_err(|source| ImportError::Io { path: self.dir.clone(), source })?;
        let mut state = self.load_state();
        // Forget files that are gone, so a file put back is imported again.
        let before = state.len();
        state.retain(|name, _| files.iter().any(|f| &f.name == name));
        let todo = pending(&files, &state, settle.then(SystemTime::now));
        if todo.is_empty() {
            if state.len() != before {
                self.save_state(&state)?;
            }
            return Ok(0);
        }
        let mut imported = 0;
        for f in todo {
            let path = self.dir.join(&f.name);
            let started = std::time::Instant::now();
            let record = match import_archive(importer, &path, &self.scratch).await {
                Ok(summary) => {
                    imported += 1;
                    tracing::info!(file = %path.display(), images = ?summary.images, took = ?started.elapsed(), "imported image archive");
                    ImportedFile { size: f.size, mtime_ns: f.mtime_ns, images: summary.images, error: None }
                }
                Err(e) => {
                    let msg = k1s_api::errors::chain(&e);
                    tracing::error!(file = %path.display(), error = %msg, "image archive not imported");
                    ImportedFile { size: f.size, mtime_ns: f.mtime_ns, images: Vec::new(), error: Some(msg) }
                }
            };
            state.insert(f.name.clone(), record);
        }
        self.save_state(&state)?;
        Ok(imported)
    }

    /// Scans the folder every [`POLL_INTERVAL`] until cancelled.
    pub async fn watch(&self, importer: &dyn ImageImporter, cancel: CancellationToken) {
        let mut tick = tokio::time::interval(POLL_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tick.tick() => {}
            }
            if let Err(e) = self.import_new(importer, true).await {
                tracing::warn!(dir = %self.dir.display(), error = %k1s_api::errors::chain(&e), "scanning the images folder");
            }
        }
    }
}

#[cfg(test)]
#[path = "image_import/tests.rs"]
mod tests;
