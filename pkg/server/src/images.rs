//! Image archives for nodes without a registry: the images folder `<data-dir>/agent/images/`
//! (imported at start, before the kubelet runs pods, and whenever files appear) and the
//! `k1s images import|save` commands. The work is in `k1s_kubelet::image_import` (import via
//! containerd's `ctr`) and `k1s_kubelet::image_save` (pull with oci-client).

use k1s_kubelet::image_archive::ArchiveSummary;
use k1s_kubelet::image_import::{self, CtrImporter, ImagesFolder, ImportError};
use k1s_kubelet::image_save::{SaveError, SaveSummary};
use k1s_kubelet::registries::{Registries, RegistriesError};
use std::path::{Path, PathBuf};
use tokio_util::sync::CancellationToken;

/// The file where the server records the containerd endpoint its kubelet uses, so that
/// `k1s images import --data-dir D` reaches the same containerd.
pub fn endpoint_file(data_dir: &Path) -> PathBuf {
    data_dir.join("agent").join("runtime-endpoint")
}

/// The containerd `k1s images import` talks to: `explicit` (`--container-runtime-endpoint`),
/// else the one the server on `data_dir` recorded, else k1s's own under `run_dir`.
pub fn runtime_endpoint(data_dir: &Path, run_dir: &Path, explicit: Option<&str>) -> String {
    if let Some(e) = explicit {
        return e.to_string();
    }
    if let Ok(recorded) = std::fs::read_to_string(endpoint_file(data_dir)) {
        let recorded = recorded.trim();
        if !recorded.is_empty() {
            return recorded.to_string();
        }
    }
    format!("unix://{}", run_dir.join("containerd").join("containerd.sock").display())
}

#[derive(Debug, thiserror::Error)]
pub enum ImagesError {
    #[error(transparent)]
    Registries(#[from] RegistriesError),
    #[error(transparent)]
    Save(#[from] SaveError),
    #[error("recording the container runtime endpoint in {}", path.display())]
    Endpoint {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Imports `files` into the containerd at `endpoint`, each on its own (a corrupt one imports
/// nothing and does not stop the others). Decompressed copies go to the system temp folder.
pub async fn import(files: &[PathBuf], endpoint: &str) -> Vec<(PathBuf, Result<ArchiveSummary, ImportError>)> {
    let importer = CtrImporter::for_endpoint(endpoint);
    let scratch = std::env::temp_dir();
    let mut out = Vec::new();
    for f in files {
        out.push((f.clone(), image_import::import_archive(&importer, f, &scratch).await));
    }
    out
}

/// Pulls `images` (through `registries_file`'s mirrors and credentials) into the archive `out`.
pub async fn save(images: &[String], registries_file: &Path, out: &Path) -> Result<SaveSummary, ImagesError> {
    let registries = Registries::load(registries_file)?;
    Ok(k1s_kubelet::image_save::save(images, &registries, out).await?)
}

/// At start: records `endpoint`, imports the folder's archives, and returns the folder watch
/// to run until `cancel`.
pub(crate) async fn start_folder(
    data_dir: &Path,
    endpoint: &str,
    cancel: CancellationToken,
) -> Result<impl std::future::Future<Output = ()> + Send + 'static, ImagesError> {
    let file = endpoint_file(data_dir);
    if let Some(parent) = file.parent() {
        std::fs::create_dir_all(parent).map_err(|source| ImagesError::Endpoint { path: parent.into(), source })?;
    }
    std::fs::write(&file, format!("{endpoint}\n")).map_err(|source| ImagesError::Endpoint { path: file, source })?;
    let folder = ImagesFolder::for_data_dir(data_dir);
    let importer = CtrImporter::for_endpoint(endpoint);
    let started = std::time::Instant::now();
    match folder.import_new(&importer, false).await {
        Ok(0) => {}
        Ok(n) => {
            tracing::info!(archives = n, took = ?started.elapsed(), dir = %folder.dir.display(), "imported the images folder")
        }
        Err(e) => {
            tracing::warn!(dir = %folder.dir.display(), error = %k1s_api::errors::chain(&e), "importing the images folder")
        }
    }
    Ok(async move { folder.watch(&importer, cancel).await })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn import_finds_containerd_by_flag_then_the_servers_record_then_the_run_dir() {
        let data = tempfile::tempdir().expect("tempdir");
        let run = Path::new("/run/k1s-test");
        assert_eq!(runtime_endpoint(data.path(), run, None), "unix:///run/k1s-test/containerd/containerd.sock");
        std::fs::create_dir_all(data.path().join("agent")).expect("agent");
        std::fs::write(endpoint_file(data.path()), "unix:///run/other/containerd.sock\n").expect("record");
        assert_eq!(runtime_endpoint(data.path(), run, None), "unix:///run/other/containerd.sock");
        assert_eq!(runtime_endpoint(data.path(), run, Some("unix:///x.sock")), "unix:///x.sock");
    }
}
