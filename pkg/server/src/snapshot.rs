//! Snapshots of the store, as the server and the `k1s snapshot` commands use them.
//!
//! - On demand: `k1s snapshot save` asks the running server over a unix socket in the data dir
//!   (`server/snapshot.sock`, mode 0600: only who may read the store's files may ask for a copy
//!   of them), and the server checkpoints its open store, so the snapshot is of one revision
//!   while writes go on. One JSON line each way.
//! - Scheduled: [`Schedule`] (cron, UTC) fires `k1s-snapshot-<node>-<unix time>` files and keeps
//!   the newest `retention` of them.
//! - `ls` and `delete` read the snapshot folder directly; `restore` replaces the store of a
//!   stopped server (`k1s server --cluster-reset-restore-path`).

use crate::cron::Schedule;
use crate::{Running, ServerError};
use k1s_store::snapshot::{Manifest, Restored, SnapshotError};
use k1s_store::Store;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio_util::sync::CancellationToken;

/// Prefix of scheduled snapshots' names; retention prunes only these.
pub const SCHEDULED_PREFIX: &str = "k1s-snapshot";
/// Default name of on-demand snapshots.
pub const ON_DEMAND_PREFIX: &str = "on-demand";

#[derive(Clone, Debug)]
pub struct SnapshotConfig {
    /// Where snapshots are written: `<data-dir>/server/db/snapshots` by default.
    pub dir: PathBuf,
    /// `None`: no scheduled snapshots (`--disable-snapshots`).
    pub schedule: Option<Schedule>,
    /// Scheduled snapshots kept (older ones are deleted); 0 keeps all.
    pub retention: usize,
}

/// `<data-dir>/server/db/snapshots`.
pub fn default_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("server").join("db").join("snapshots")
}

/// The server's snapshot socket: `<data-dir>/server/snapshot.sock`.
pub fn socket_path(data_dir: &Path) -> PathBuf {
    data_dir.join("server").join("snapshot.sock")
}

/// The store directory of a data dir.
pub fn store_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("server").join("db")
}

fn now_unix() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// A saved snapshot.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Saved {
    pub path: PathBuf,
    pub manifest: Manifest,
}

#[derive(Serialize, Deserialize)]
struct SaveRequest {
    name: Option<String>,
    dir: Option<PathBuf>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
enum SaveReply {
    Saved(Saved),
    Error(String),
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("connecting to the server's snapshot socket {} (is k1s server running on this data dir?): {error}", path.display())]
    Connect { path: PathBuf, error: std::io::Error },
    #[error("talking to the server over {}: {error}", path.display())]
    Io { path: PathBuf, error: std::io::Error },
    #[error("unreadable answer from the server: {0}")]
    Protocol(String),
    #[error("the server could not save the snapshot: {0}")]
    Server(String),
}

/// Checks a snapshot name given by a user: one path component, no hidden files.
fn valid_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.starts_with('.') || name.contains('/') || name.contains('\0') {
        return Err(format!("bad snapshot name {name:?}: it must be a plain file name"));
    }
    Ok(())
}

/// Takes a snapshot named `<prefix>-<node>-<unix time>` in `dir`.
async fn save(store: &Store, dir: &Path, prefix: &str, node: &str) -> Result<Saved, String> {
    valid_name(prefix)?;
    let path = dir.join(format!("{prefix}-{node}-{}", now_unix()));
    let manifest = store.save_snapshot(&path).await.map_err(|e| e.to_string())?;
    Ok(Saved { path, manifest })
}

/// Starts the snapshot socket and, unless disabled, the schedule.
pub(crate) fn start(
    store: &Store,
    data_dir: &Path,
    node: &str,
    config: &SnapshotConfig,
    cancel: &CancellationToken,
) -> Result<Vec<Running>, ServerError> {
    let sock = socket_path(data_dir);
    let data_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ServerError::DataDir { path, source }
    };
    if sock.exists() {
        std::fs::remove_file(&sock).map_err(data_err(&sock))?;
    }
    let listener = tokio::net::UnixListener::bind(&sock).map_err(data_err(&sock))?;
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o600)).map_err(data_err(&sock))?;
    }
    let mut tasks = vec![Running::spawn(
        "the snapshot socket",
        serve(listener, store.clone(), config.dir.clone(), node.to_string(), cancel.clone()),
    )];
    if let Some(schedule) = config.schedule.clone() {
        tasks.push(Running::spawn(
            "the snapshot schedule",
            scheduled(store.clone(), schedule, config.clone(), node.to_string(), cancel.clone()),
        ));
    }
    Ok(tasks)
}

async fn serve(
    listener: tokio::net::UnixListener,
    store: Store,
    dir: PathBuf,
    node: String,
    cancel: CancellationToken,
) {
    loop {
        let conn = tokio::select! {
            _ = cancel.cancelled() => return,
            c = listener.accept() => c,
        };
        let (stream, _) = match conn {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "snapshot socket: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let (store, dir, node) = (store.clone(), dir.clone(), node.clone());
        tokio::spawn(async move {
            let (read, mut write) = stream.into_split();
            let mut line = String::new();
            if BufReader::new(read).read_line(&mut line).await.is_err() {
                return;
            }
            let reply = match serde_json::from_str::<SaveRequest>(&line) {
                Err(e) => SaveReply::Error(format!("bad request: {e}")),
                Ok(req) => {
                    let dir = req.dir.unwrap_or(dir);
                    let prefix = req.name.unwrap_or_else(|| ON_DEMAND_PREFIX.to_string());
                    match save(&store, &dir, &prefix, &node).await {
                        Ok(s) => SaveReply::Saved(s),
                        Err(e) => SaveReply::Error(e),
                    }
                }
            };
            if let SaveReply::Error(e) = &reply {
                tracing::warn!(error = %e, "on-demand snapshot failed");
            }
            let mut out = serde_json::to_vec(&reply).unwrap_or_default();
            out.push(b'\n');
            let _ = write.write_all(&out).await;
        });
    }
}

async fn scheduled(store: Store, schedule: Schedule, config: SnapshotConfig, node: String, cancel: CancellationToken) {
    loop {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let Some(next) = schedule.next_after(now.as_secs()) else {
            tracing::warn!(%schedule, "the snapshot schedule never fires again");
            cancel.cancelled().await;
            return;
        };
        let wait = Duration::from_secs(next).saturating_sub(now);
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
        match save(&store, &config.dir, SCHEDULED_PREFIX, &node).await {
            Ok(saved) => tracing::info!(
                path = %saved.path.display(),
                revision = saved.manifest.revision,
                "scheduled snapshot saved"
            ),
            Err(e) => tracing::error!(error = %e, "scheduled snapshot failed"),
        }
        if config.retention > 0 {
            if let Err(e) = prune(&config.dir, SCHEDULED_PREFIX, config.retention) {
                tracing::warn!(error = %e, dir = %config.dir.display(), "pruning old snapshots failed");
            }
        }
    }
}

/// One file of the snapshot folder.
#[derive(Debug)]
pub struct Listed {
    pub name: String,
    pub path: PathBuf,
    pub size: u64,
    /// The manifest, or why it could not be read.
    pub manifest: Result<Manifest, String>,
}

/// The snapshots in `dir`, oldest first (hidden temporary files and folders left out).
pub fn list(dir: &Path) -> std::io::Result<Vec<Listed>> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let meta = entry.metadata()?;
        if name.starts_with('.') || !meta.is_file() {
            continue;
        }
        let path = entry.path();
        let manifest = k1s_store::snapshot::read_manifest(&path).map_err(|e| e.to_string());
        out.push(Listed { name, path, size: meta.len(), manifest });
    }
    out.sort_by(|a, b| {
        let created = |l: &Listed| l.manifest.as_ref().map(|m| m.created_unix).unwrap_or(0);
        created(a).cmp(&created(b)).then_with(|| a.name.cmp(&b.name))
    });
    Ok(out)
}

/// Deletes the oldest snapshots named `<prefix>-…` beyond the newest `keep`.
pub fn prune(dir: &Path, prefix: &str, keep: usize) -> std::io::Result<Vec<PathBuf>> {
    let ours: Vec<Listed> =
        list(dir)?.into_iter().filter(|l| l.name.starts_with(&format!("{prefix}-")) && l.manifest.is_ok()).collect();
    let mut removed = Vec::new();
    for old in ours.iter().take(ours.len().saturating_sub(keep)) {
        std::fs::remove_file(&old.path)?;
        tracing::info!(path = %old.path.display(), "removed an old scheduled snapshot");
        removed.push(old.path.clone());
    }
    Ok(removed)
}

/// Deletes the snapshot `name` from `dir`.
pub fn delete(dir: &Path, name: &str) -> Result<PathBuf, String> {
    valid_name(name)?;
    let path = dir.join(name);
    if !path.is_file() {
        return Err(format!("no snapshot {name} in {}", dir.display()));
    }
    std::fs::remove_file(&path).map_err(|e| format!("deleting {}: {e}", path.display()))?;
    Ok(path)
}

/// Asks the server running on `data_dir` for a snapshot (`k1s snapshot save`).
pub async fn save_online(data_dir: &Path, name: Option<String>, dir: Option<PathBuf>) -> Result<Saved, ClientError> {
    if let Some(n) = &name {
        valid_name(n).map_err(ClientError::Server)?;
    }
    let path = socket_path(data_dir);
    let stream = tokio::net::UnixStream::connect(&path)
        .await
        .map_err(|error| ClientError::Connect { path: path.clone(), error })?;
    let io = |error| ClientError::Io { path: path.clone(), error };
    let (read, mut write) = stream.into_split();
    let mut req = serde_json::to_vec(&SaveRequest { name, dir }).map_err(|e| ClientError::Protocol(e.to_string()))?;
    req.push(b'\n');
    write.write_all(&req).await.map_err(io)?;
    let mut line = String::new();
    BufReader::new(read).read_line(&mut line).await.map_err(io)?;
    match serde_json::from_str::<SaveReply>(&line).map_err(|e| ClientError::Protocol(format!("{e}: {line:?}")))? {
        SaveReply::Saved(s) => Ok(s),
        SaveReply::Error(e) => Err(ClientError::Server(e)),
    }
}

/// Writes the etcd database of a snapshot taken on etcd to `out` (see
/// [`k1s_store::snapshot::extract`]).
pub fn extract(file: &Path, out: &Path) -> Result<Manifest, SnapshotError> {
    k1s_store::snapshot::extract(file, out)
}

/// Restores `file` into the store of `data_dir` (the server must be stopped).
pub fn restore(data_dir: &Path, file: &Path) -> Result<Restored, SnapshotError> {
    k1s_store::snapshot::restore(file, &store_dir(data_dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn retention_keeps_the_newest_scheduled_snapshots_and_spares_on_demand_ones() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(&dir.path().join("db"), k1s_store::StoreOptions::default()).expect("open");
        store.create("/a", bytes::Bytes::from_static(b"1")).await.expect("create");
        let snaps = dir.path().join("snaps");
        for name in ["k1s-snapshot-n-1", "k1s-snapshot-n-2", "k1s-snapshot-n-3", "on-demand-n-1"] {
            store.save_snapshot(&snaps.join(name)).await.expect("save");
        }
        let removed = prune(&snaps, SCHEDULED_PREFIX, 2).expect("prune");
        assert_eq!(removed, vec![snaps.join("k1s-snapshot-n-1")]);
        let names: Vec<String> = list(&snaps).expect("list").into_iter().map(|l| l.name).collect();
        assert_eq!(names, ["k1s-snapshot-n-2", "k1s-snapshot-n-3", "on-demand-n-1"]);
        assert!(delete(&snaps, "../db").is_err());
        assert_eq!(delete(&snaps, "on-demand-n-1").expect("delete"), snaps.join("on-demand-n-1"));
    }
}
