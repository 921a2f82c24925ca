//! Snapshots: a consistent copy of the whole store at one revision, packed into one file, and
//! restoring such a file into a store directory.
//!
//! The copy is a RocksDB checkpoint (hard links of the immutable table files plus the WAL, taken
//! while the server keeps writing). The file is:
//!
//! ```text
//! "K1SSNAP\n" | payload | manifest (JSON) | manifest length (u32 BE) | "K1SSEND\n"
//! payload = { name length (u16 BE) | name | size (u64 BE) | bytes } per checkpoint file
//! ```
//!
//! The manifest carries the format version, the revision, the k1s version, the creation time and
//! the SHA-256 of the payload; restore checks the version and the checksum before it writes
//! anything. This module is the store's whole snapshot API ([`Store::save_snapshot`],
//! [`read_manifest`], [`verify`], [`restore`]), small enough to implement again for an etcd
//! backend (whose snapshots are etcd's own `snapshot save` files).

use crate::codec;
use crate::rocks::{open_db, RocksStore, CF_KV, CF_LOG, CF_META, META_COMPACTED, META_REV};
use crate::store::Store;
use rocksdb::WriteBatch;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// The snapshot file format this build writes; it restores this one and older ones.
pub const FORMAT_VERSION: u32 = 1;
const MAGIC: &[u8; 8] = b"K1SSNAP\n";
const END_MAGIC: &[u8; 8] = b"K1SSEND\n";
/// Trailer: manifest length (4) and end magic (8).
const TRAILER: u64 = 12;
/// Largest manifest accepted (it is a few hundred bytes).
const MAX_MANIFEST: u32 = 1 << 20;

/// What a snapshot file says about itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub format_version: u32,
    /// The store revision the snapshot holds (every write up to it, none after).
    pub revision: u64,
    /// The k1s version that wrote it.
    pub k1s_version: String,
    /// Creation time, seconds since the Unix epoch.
    pub created_unix: u64,
    /// Hex SHA-256 of the payload.
    pub payload_sha256: String,
    pub payload_bytes: u64,
    /// Number of checkpoint files in the payload.
    pub files: u32,
    /// The store the snapshot is of: `rocksdb` (the embedded store; `k1s server
    /// --cluster-reset-restore-path` restores it) or `etcd` (one payload file, [`ETCD_DB`]: etcd's
    /// own snapshot, restored with etcd's tools after [`extract`]).
    #[serde(default = "rocksdb")]
    pub backend: String,
}

fn rocksdb() -> String {
    BACKEND_ROCKSDB.to_string()
}

pub const BACKEND_ROCKSDB: &str = "rocksdb";
pub const BACKEND_ETCD: &str = "etcd";
/// The payload file of an etcd snapshot: what `etcdctl snapshot save` writes.
pub const ETCD_DB: &str = "etcd.db";

/// What [`restore`] did.
#[derive(Clone, Debug)]
pub struct Restored {
    pub manifest: Manifest,
    /// The revision the restored store continues from: above both the snapshot's and the
    /// replaced store's revision, and compacted, so every earlier resourceVersion gets 410.
    pub revision: u64,
    /// The replaced store's revision (0 when there was none).
    pub previous_revision: u64,
    /// Where the replaced store was kept (`db.old-<unix time>` next to it), if there was one.
    pub previous: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("snapshot {}: {op}: {error}", path.display())]
    Io { op: &'static str, path: PathBuf, error: io::Error },
    #[error("snapshot {}: already exists", .0.display())]
    Exists(PathBuf),
    #[error("checkpointing the store into {}: {message}", path.display())]
    Checkpoint { path: PathBuf, message: String },
    #[error("{} is not a k1s snapshot (bad magic or truncated)", .0.display())]
    NotASnapshot(PathBuf),
    #[error("snapshot {}: unreadable manifest: {message}", path.display())]
    BadManifest { path: PathBuf, message: String },
    #[error(
        "snapshot {} has format version {found}, newer than this k1s supports ({supported}); restore it with a newer k1s",
        path.display()
    )]
    NewerFormat { path: PathBuf, found: u32, supported: u32 },
    #[error("snapshot {} is corrupt: payload checksum {actual} does not match the manifest's {expected}", path.display())]
    Checksum { path: PathBuf, expected: String, actual: String },
    #[error("snapshot {} is corrupt: {message}", path.display())]
    Corrupt { path: PathBuf, message: String },
    #[error("opening the current store at {} to read its revision (is k1s server still running?): {message}", path.display())]
    CurrentStore { path: PathBuf, message: String },
    #[error(
        "snapshot {} is of etcd, not of the embedded store: write its database out with `k1s snapshot extract` and restore that with etcd's tools (`etcdctl snapshot restore`, `etcdutl snapshot restore`)",
        .0.display()
    )]
    OfEtcd(PathBuf),
    #[error("snapshot {} is of the embedded store, not of etcd: restore it with `k1s server --cluster-reset-restore-path`", .0.display())]
    NotOfEtcd(PathBuf),
    #[error("saving etcd's snapshot: {0}")]
    Etcd(String),
    #[error("restoring into {}: {op}: {message}", path.display())]
    Restore { op: &'static str, path: PathBuf, message: String },
}

fn io_err(op: &'static str, path: &Path) -> impl Fn(io::Error) -> SnapshotError {
    let path = path.to_path_buf();
    move |error| SnapshotError::Io { op, path: path.clone(), error }
}

fn now_unix() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Fsyncs a directory, so renames and new entries in it are durable.
fn sync_dir(dir: &Path) -> Result<(), SnapshotError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io_err("syncing the folder", dir))
}

/// Removes a directory tree when dropped (the checkpoint, a failed restore's staging copy).
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if self.0.exists() {
            if let Err(e) = std::fs::remove_dir_all(&self.0) {
                tracing::warn!(path = %self.0.display(), error = %e, "could not remove a temporary folder");
            }
        }
    }
}

/// Reads a checkpoint's revision by opening it read-only (this also proves it opens).
fn checkpoint_revision(dir: &Path) -> Result<u64, String> {
    let db = rocksdb::DB::open_cf_for_read_only(&rocksdb::Options::default(), dir, [CF_KV, CF_LOG, CF_META], false)
        .map_err(|e| e.to_string())?;
    let meta = db.cf_handle(CF_META).ok_or("no meta column family")?;
    Ok(db.get_cf(meta, META_REV).map_err(|e| e.to_string())?.and_then(|v| codec::decode_u64(&v)).unwrap_or(0))
}

impl Store {
    /// Writes a consistent snapshot of the store to `file` (which must not exist) while writes
    /// go on; returns its manifest. Only the embedded RocksDB store has snapshots of its own.
    /// Writes a snapshot of the store to `file` (which must not exist) while writes go on;
    /// returns its manifest. The embedded store checkpoints itself; etcd streams its own
    /// snapshot (the Maintenance API's), kept as the payload's one file.
    pub async fn save_snapshot(&self, file: &Path) -> Result<Manifest, SnapshotError> {
        if let Some(r) = self.rocks() {
            let (r, file) = (r.clone(), file.to_path_buf());
            return tokio::task::spawn_blocking(move || r.save_snapshot(&file))
                .await
                .map_err(|e| SnapshotError::Checkpoint { path: PathBuf::new(), message: e.to_string() })?;
        }
        let Some(etcd) = self.etcd() else { return Err(SnapshotError::Etcd("no backend".into())) };
        if file.exists() {
            return Err(SnapshotError::Exists(file.to_path_buf()));
        }
        let dir = file.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
        let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "snapshot".into());
        std::fs::create_dir_all(&dir).map_err(io_err("creating the folder", &dir))?;
        let staging = dir.join(format!(".{name}.etcd"));
        if staging.exists() {
            std::fs::remove_dir_all(&staging).map_err(io_err("removing a stale staging folder", &staging))?;
        }
        std::fs::create_dir(&staging).map_err(io_err("creating the staging folder", &staging))?;
        let _cleanup = RemoveOnDrop(staging.clone());
        let db = staging.join(ETCD_DB);
        let mut out = tokio::fs::File::create(&db).await.map_err(io_err("creating", &db))?;
        let revision = etcd.snapshot(&mut out).await.map_err(|e| SnapshotError::Etcd(e.to_string()))?;
        out.sync_all().await.map_err(io_err("syncing", &db))?;
        drop(out);
        let file = file.to_path_buf();
        tokio::task::spawn_blocking(move || pack(&file, &dir, &staging, &[ETCD_DB.to_string()], revision, BACKEND_ETCD))
            .await
            .map_err(|e| SnapshotError::Etcd(e.to_string()))?
    }
}

impl RocksStore {
    /// Writes a consistent snapshot of the store to `file` (which must not exist) while writes
    /// go on; returns its manifest. The file appears complete or not at all (written under a
    /// hidden temporary name, synced, then renamed).
    pub fn save_snapshot(&self, file: &Path) -> Result<Manifest, SnapshotError> {
        if file.exists() {
            return Err(SnapshotError::Exists(file.to_path_buf()));
        }
        let dir = file.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "snapshot".into());
        std::fs::create_dir_all(dir).map_err(io_err("creating the folder", dir))?;
        // Next to the file, so the checkpoint hard-links the table files when they share a disk.
        let cp_dir = dir.join(format!(".{name}.checkpoint"));
        if cp_dir.exists() {
            std::fs::remove_dir_all(&cp_dir).map_err(io_err("removing a stale checkpoint", &cp_dir))?;
        }
        let _cleanup = RemoveOnDrop(cp_dir.clone());
        let checkpoint_err = |message: String| SnapshotError::Checkpoint { path: cp_dir.clone(), message };
        let cp = rocksdb::checkpoint::Checkpoint::new(&self.inner.db).map_err(|e| checkpoint_err(e.to_string()))?;
        cp.create_checkpoint(&cp_dir).map_err(|e| checkpoint_err(e.to_string()))?;
        let revision = checkpoint_revision(&cp_dir).map_err(checkpoint_err)?;

        let mut names: Vec<String> = Vec::new();
        for entry in std::fs::read_dir(&cp_dir).map_err(io_err("reading the checkpoint", &cp_dir))? {
            let entry = entry.map_err(io_err("reading the checkpoint", &cp_dir))?;
            if entry.file_type().map_err(io_err("reading the checkpoint", &cp_dir))?.is_file() {
                names.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        names.sort();
        pack(file, dir, &cp_dir, &names, revision, BACKEND_ROCKSDB)
    }
}

/// Writes the files `names` of `src` into the snapshot `file` in `dir` with their manifest. The
/// file appears complete or not at all (written under a hidden temporary name, synced, then
/// renamed).
fn pack(
    file: &Path,
    dir: &Path,
    src: &Path,
    names: &[String],
    revision: u64,
    backend: &str,
) -> Result<Manifest, SnapshotError> {
    let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "snapshot".into());
    let checkpoint_err = |message: String| SnapshotError::Checkpoint { path: src.to_path_buf(), message };
    let tmp = dir.join(format!(".{name}.tmp"));
    let _tmp_cleanup = TmpFile(tmp.clone());
    let out = File::create(&tmp).map_err(io_err("creating", &tmp))?;
    let mut w = HashingWriter { inner: BufWriter::new(out), hasher: Sha256::new(), hashed: 0, hashing: false };
    w.write_all(MAGIC).map_err(io_err("writing", &tmp))?;
    w.hashing = true;
    for n in names {
        let path = src.join(n);
        let mut f = File::open(&path).map_err(io_err("reading", &path))?;
        let size = f.metadata().map_err(io_err("reading", &path))?.len();
        let name_len = u16::try_from(n.len()).map_err(|_| checkpoint_err(format!("file name {n} too long")))?;
        w.write_all(&name_len.to_be_bytes()).map_err(io_err("writing", &tmp))?;
        w.write_all(n.as_bytes()).map_err(io_err("writing", &tmp))?;
        w.write_all(&size.to_be_bytes()).map_err(io_err("writing", &tmp))?;
        let copied = io::copy(&mut (&mut f).take(size), &mut w).map_err(io_err("writing", &tmp))?;
        if copied != size {
            return Err(checkpoint_err(format!("{n} shrank while being read")));
        }
    }
    w.hashing = false;
    let manifest = Manifest {
        format_version: FORMAT_VERSION,
        revision,
        k1s_version: env!("CARGO_PKG_VERSION").to_string(),
        created_unix: now_unix(),
        payload_sha256: hex(&w.hasher.clone().finalize()),
        payload_bytes: w.hashed,
        files: u32::try_from(names.len()).unwrap_or(u32::MAX),
        backend: backend.to_string(),
    };
    let json = serde_json::to_vec(&manifest).map_err(|e| checkpoint_err(e.to_string()))?;
    let json_len = u32::try_from(json.len()).map_err(|_| checkpoint_err("manifest too large".into()))?;
    w.write_all(&json).map_err(io_err("writing", &tmp))?;
    w.write_all(&json_len.to_be_bytes()).map_err(io_err("writing", &tmp))?;
    w.write_all(END_MAGIC).map_err(io_err("writing", &tmp))?;
    let out = w.inner.into_inner().map_err(|e| SnapshotError::Io {
        op: "writing",
        path: tmp.clone(),
        error: e.into_error(),
    })?;
    out.sync_all().map_err(io_err("syncing", &tmp))?;
    drop(out);
    if file.exists() {
        return Err(SnapshotError::Exists(file.to_path_buf()));
    }
    std::fs::rename(&tmp, file).map_err(io_err("renaming into place", file))?;
    sync_dir(dir)?;
    tracing::info!(file = %file.display(), revision, bytes = manifest.payload_bytes, backend, "store snapshot saved");
    Ok(manifest)
}

/// Removes a temporary file when dropped, unless it was renamed away.
struct TmpFile(PathBuf);

impl Drop for TmpFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

struct HashingWriter<W: Write> {
    inner: W,
    hasher: Sha256,
    hashed: u64,
    hashing: bool,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        if self.hashing {
            self.hasher.update(&buf[..n]);
            self.hashed += n as u64;
        }
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Reads and checks a snapshot's manifest (magic, trailer, format version), without reading the
/// payload. Returns the manifest and the payload's length on disk.
fn open_manifest(file: &Path) -> Result<(Manifest, u64), SnapshotError> {
    let mut f = File::open(file).map_err(io_err("opening", file))?;
    let len = f.metadata().map_err(io_err("reading", file))?.len();
    let not_snapshot = || SnapshotError::NotASnapshot(file.to_path_buf());
    if len < MAGIC.len() as u64 + TRAILER {
        return Err(not_snapshot());
    }
    let mut magic = [0u8; 8];
    f.read_exact(&mut magic).map_err(io_err("reading", file))?;
    if &magic != MAGIC {
        return Err(not_snapshot());
    }
    f.seek(SeekFrom::Start(len - TRAILER)).map_err(io_err("reading", file))?;
    let mut trailer = [0u8; TRAILER as usize];
    f.read_exact(&mut trailer).map_err(io_err("reading", file))?;
    if &trailer[4..] != END_MAGIC {
        return Err(not_snapshot());
    }
    let json_len = u32::from_be_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]);
    if json_len > MAX_MANIFEST || u64::from(json_len) > len - TRAILER - MAGIC.len() as u64 {
        return Err(not_snapshot());
    }
    let manifest_at = len - TRAILER - u64::from(json_len);
    f.seek(SeekFrom::Start(manifest_at)).map_err(io_err("reading", file))?;
    let mut json = vec![0u8; json_len as usize];
    f.read_exact(&mut json).map_err(io_err("reading", file))?;
    let bad = |message: String| SnapshotError::BadManifest { path: file.to_path_buf(), message };
    // The version first: a newer format may have other fields.
    let value: serde_json::Value = serde_json::from_slice(&json).map_err(|e| bad(e.to_string()))?;
    let found =
        value.get("formatVersion").and_then(serde_json::Value::as_u64).ok_or_else(|| bad("no formatVersion".into()))?;
    if found > u64::from(FORMAT_VERSION) {
        return Err(SnapshotError::NewerFormat {
            path: file.to_path_buf(),
            found: u32::try_from(found).unwrap_or(u32::MAX),
            supported: FORMAT_VERSION,
        });
    }
    let manifest: Manifest = serde_json::from_value(value).map_err(|e| bad(e.to_string()))?;
    Ok((manifest, manifest_at - MAGIC.len() as u64))
}

/// A snapshot's manifest (checks the format, not the payload's checksum: see [`verify`]).
pub fn read_manifest(file: &Path) -> Result<Manifest, SnapshotError> {
    open_manifest(file).map(|(m, _)| m)
}

/// Reads the whole snapshot and checks its payload against the manifest's checksum.
pub fn verify(file: &Path) -> Result<Manifest, SnapshotError> {
    let (manifest, payload_len) = open_manifest(file)?;
    if payload_len != manifest.payload_bytes {
        return Err(SnapshotError::Corrupt {
            path: file.to_path_buf(),
            message: format!("payload is {payload_len} bytes, the manifest says {}", manifest.payload_bytes),
        });
    }
    let mut f = File::open(file).map_err(io_err("opening", file))?;
    f.seek(SeekFrom::Start(MAGIC.len() as u64)).map_err(io_err("reading", file))?;
    let mut hasher = Sha256::new();
    io::copy(&mut f.take(payload_len), &mut hasher).map_err(io_err("reading", file))?;
    let actual = hex(&hasher.finalize());
    if actual != manifest.payload_sha256 {
        return Err(SnapshotError::Checksum {
            path: file.to_path_buf(),
            expected: manifest.payload_sha256.clone(),
            actual,
        });
    }
    Ok(manifest)
}

/// Writes the payload's files into `into` (which exists and is empty).
fn unpack(file: &Path, payload_len: u64, into: &Path) -> Result<(), SnapshotError> {
    let mut f = File::open(file).map_err(io_err("opening", file))?;
    f.seek(SeekFrom::Start(MAGIC.len() as u64)).map_err(io_err("reading", file))?;
    let mut r = BufReader::new(f.take(payload_len));
    let corrupt = |message: String| SnapshotError::Corrupt { path: file.to_path_buf(), message };
    let mut left = payload_len;
    while left > 0 {
        let mut len2 = [0u8; 2];
        r.read_exact(&mut len2).map_err(io_err("reading", file))?;
        let mut name = vec![0u8; usize::from(u16::from_be_bytes(len2))];
        r.read_exact(&mut name).map_err(io_err("reading", file))?;
        let name = String::from_utf8(name).map_err(|_| corrupt("a file name is not UTF-8".into()))?;
        if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
            return Err(corrupt(format!("bad file name {name:?}")));
        }
        let mut len8 = [0u8; 8];
        r.read_exact(&mut len8).map_err(io_err("reading", file))?;
        let size = u64::from_be_bytes(len8);
        let header = 2 + name.len() as u64 + 8;
        if header + size > left {
            return Err(corrupt(format!("{name} runs past the payload")));
        }
        let path = into.join(&name);
        let mut out = File::create_new(&path).map_err(io_err("unpacking", &path))?;
        let copied = io::copy(&mut (&mut r).take(size), &mut out).map_err(io_err("unpacking", &path))?;
        if copied != size {
            return Err(corrupt(format!("{name} is truncated")));
        }
        out.sync_all().map_err(io_err("syncing", &path))?;
        left -= header + size;
    }
    Ok(())
}

/// Writes the etcd database of an etcd snapshot to `out` (which must not exist), after checking
/// the snapshot's checksum: the file `etcdctl snapshot restore` takes.
pub fn extract(file: &Path, out: &Path) -> Result<Manifest, SnapshotError> {
    let manifest = verify(file)?;
    if manifest.backend != BACKEND_ETCD {
        return Err(SnapshotError::NotOfEtcd(file.to_path_buf()));
    }
    if out.exists() {
        return Err(SnapshotError::Exists(out.to_path_buf()));
    }
    let dir = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "etcd.db".into());
    let staging = dir.join(format!(".{name}.extract"));
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(io_err("removing a stale staging folder", &staging))?;
    }
    std::fs::create_dir_all(&staging).map_err(io_err("creating the staging folder", &staging))?;
    let _cleanup = RemoveOnDrop(staging.clone());
    unpack(file, manifest.payload_bytes, &staging)?;
    std::fs::rename(staging.join(ETCD_DB), out).map_err(|_| SnapshotError::Corrupt {
        path: file.to_path_buf(),
        message: format!("no {ETCD_DB} in the payload"),
    })?;
    Ok(manifest)
}

/// The revision of the store in `db_dir` (0 if there is none). Opening it read-write takes
/// RocksDB's lock, so this fails while a server runs on it.
fn current_revision(db_dir: &Path) -> Result<u64, SnapshotError> {
    if !db_dir.join("CURRENT").exists() {
        return Ok(0);
    }
    let err = |message: String| SnapshotError::CurrentStore { path: db_dir.to_path_buf(), message };
    let db = open_db(db_dir).map_err(|e| err(e.to_string()))?;
    let meta = db.cf_handle(CF_META).ok_or_else(|| err("no meta column family".into()))?;
    Ok(db.get_cf(meta, META_REV).map_err(|e| err(e.to_string()))?.and_then(|v| codec::decode_u64(&v)).unwrap_or(0))
}

/// Restores `file` into the store directory `db_dir` (no server may run on it).
///
/// Checks the format and the checksum first: a refused snapshot leaves `db_dir` untouched. Then
/// unpacks into a sibling staging folder, moves the store's revision above both the snapshot's
/// and the replaced store's and compacts everything before it (so no resourceVersion a client
/// saw before goes backwards: watches from them get 410 and clients relist), syncs, and swaps
/// the folders by rename; the replaced store is kept as `db.old-<unix time>`. Sub-folders of the
/// replaced store (the snapshots folder) move into the restored one.
pub fn restore(file: &Path, db_dir: &Path) -> Result<Restored, SnapshotError> {
    let manifest = verify(file)?;
    if manifest.backend != BACKEND_ROCKSDB {
        return Err(SnapshotError::OfEtcd(file.to_path_buf()));
    }
    let payload_len = manifest.payload_bytes;
    let parent = db_dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
    let base = db_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "db".into());
    let previous_revision = current_revision(db_dir)?;
    std::fs::create_dir_all(&parent).map_err(io_err("creating the folder", &parent))?;
    let stamp = now_unix();
    let staging = parent.join(format!("{base}.restore-{stamp}"));
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(io_err("removing a stale staging folder", &staging))?;
    }
    std::fs::create_dir(&staging).map_err(io_err("creating the staging folder", &staging))?;
    let mut cleanup = RemoveOnDrop(staging.clone());
    unpack(file, payload_len, &staging)?;

    let revision = previous_revision.max(manifest.revision) + 1;
    {
        let rerr = |op: &'static str| {
            let staging = staging.clone();
            move |e: rocksdb::Error| SnapshotError::Restore { op, path: staging.clone(), message: e.to_string() }
        };
        let db = open_db(&staging).map_err(rerr("opening the restored store"))?;
        let missing = |cf: &str| SnapshotError::Restore {
            op: "opening the restored store",
            path: staging.clone(),
            message: format!("no {cf} column family"),
        };
        let meta = db.cf_handle(CF_META).ok_or_else(|| missing(CF_META))?;
        let log = db.cf_handle(CF_LOG).ok_or_else(|| missing(CF_LOG))?;
        let mut wb = WriteBatch::default();
        wb.put_cf(meta, META_REV, codec::encode_u64(revision));
        wb.put_cf(meta, META_COMPACTED, codec::encode_u64(revision));
        wb.delete_range_cf(log, codec::encode_u64(0), codec::encode_u64(u64::MAX));
        let mut wopts = rocksdb::WriteOptions::default();
        wopts.set_sync(true);
        db.write_opt(wb, &wopts).map_err(rerr("moving the revision"))?;
        for cf in [CF_KV, CF_LOG, CF_META] {
            if let Some(h) = db.cf_handle(cf) {
                db.flush_cf(h).map_err(rerr("flushing"))?;
            }
        }
    }
    sync_dir(&staging)?;

    let previous = if db_dir.exists() {
        let old = parent.join(format!("{base}.old-{stamp}"));
        std::fs::rename(db_dir, &old).map_err(io_err("moving the current store aside", db_dir))?;
        Some(old)
    } else {
        None
    };
    if let Err(error) = std::fs::rename(&staging, db_dir) {
        if let Some(old) = &previous {
            let _ = std::fs::rename(old, db_dir);
        }
        return Err(SnapshotError::Io {
            op: "moving the restored store into place",
            path: db_dir.to_path_buf(),
            error,
        });
    }
    // The staging folder is the store now.
    cleanup.0 = PathBuf::new();
    sync_dir(&parent)?;
    if let Some(old) = &previous {
        for entry in std::fs::read_dir(old).map_err(io_err("reading", old))?.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                let to = db_dir.join(entry.file_name());
                std::fs::rename(entry.path(), &to).map_err(io_err("moving into the restored store", &to))?;
            }
        }
        sync_dir(db_dir)?;
    }
    tracing::info!(
        file = %file.display(),
        snapshot_revision = manifest.revision,
        previous_revision,
        revision,
        "store restored from snapshot"
    );
    Ok(Restored { manifest, revision, previous_revision, previous })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[tokio::test]
    async fn snapshot_round_trip_continues_above_the_replaced_stores_revision() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("db");
        let store = Store::open(&db, crate::StoreOptions::default()).expect("open");
        store.create("/a", Bytes::from_static(b"1")).await.expect("create");
        store.create("/b", Bytes::from_static(b"2")).await.expect("create");
        let file = db.join("snapshots").join("one");
        let m = store.save_snapshot(&file).await.expect("save");
        assert_eq!(m.revision, 2);
        assert_eq!(verify(&file).expect("verify"), m);
        store.delete("/a", None).await.expect("delete");
        store.create("/c", Bytes::from_static(b"3")).await.expect("create");
        assert_eq!(store.current_revision(), 4);
        drop(store);

        let r = restore(&file, &db).expect("restore");
        assert_eq!((r.previous_revision, r.revision), (4, 5));
        assert!(r.previous.as_ref().is_some_and(|p| p.exists()));
        assert!(db.join("snapshots").join("one").exists(), "the snapshots folder moves along");
        let store = Store::open(&db, crate::StoreOptions::default()).expect("reopen");
        assert_eq!(store.current_revision(), 5);
        assert_eq!(store.get("/a").expect("get").map(|kv| kv.create_revision), Some(1));
        assert!(store.get("/c").expect("get").is_none());
        assert!(matches!(store.watch("", 4), Err(crate::StoreError::Compacted { .. })));
        assert!(store.watch("", 5).is_ok());
        let kv = store.create("/d", Bytes::from_static(b"4")).await.expect("create after restore");
        assert_eq!(kv.mod_revision, 6);
    }

    #[tokio::test]
    async fn a_flipped_byte_or_a_newer_format_is_refused_and_the_store_is_untouched() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("db");
        let store = Store::open(&db, crate::StoreOptions::default()).expect("open");
        store.create("/a", Bytes::from_static(b"1")).await.expect("create");
        let file = dir.path().join("snap");
        let m = store.save_snapshot(&file).await.expect("save");
        drop(store);
        let good = std::fs::read(&file).expect("read");

        let mut flipped = good.clone();
        let at = 8 + usize::try_from(m.payload_bytes / 2).expect("size");
        flipped[at] ^= 0x01;
        let bad = dir.path().join("flipped");
        std::fs::write(&bad, &flipped).expect("write");
        let before = listing(dir.path());
        assert!(matches!(restore(&bad, &db), Err(SnapshotError::Checksum { .. })));
        assert_eq!(listing(dir.path()), before);

        let mut newer = good.clone();
        let needle = b"\"formatVersion\":1";
        let at = newer.windows(needle.len()).position(|w| w == needle).expect("format version in the manifest");
        newer[at + needle.len() - 1] = b'2';
        let newer_file = dir.path().join("newer");
        std::fs::write(&newer_file, &newer).expect("write");
        let before = listing(dir.path());
        let err = restore(&newer_file, &db).expect_err("newer format");
        assert!(matches!(err, SnapshotError::NewerFormat { found: 2, supported: 1, .. }), "{err}");
        assert_eq!(listing(dir.path()), before);
    }

    fn listing(dir: &Path) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    out.push((p.display().to_string(), e.metadata().map(|m| m.len()).unwrap_or(0)));
                }
            }
        }
        out.sort();
        out
    }
}
