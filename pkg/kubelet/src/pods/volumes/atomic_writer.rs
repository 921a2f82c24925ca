//! Atomic projection of a set of files into a volume directory, with upstream's scheme
//! (`pkg/volume/util/atomic_writer.go`) so that readers never see a half-updated volume:
//!
//! ```text
//! <dir>/..2024_05_01_10_00_00.123456789/   the real files of one version
//! <dir>/..data -> ..2024_05_01_10_00_00.123456789
//! <dir>/key    -> ..data/key               one link per top-level payload entry
//! ```
//!
//! An update writes a new timestamped directory, points `..data_tmp` at it and renames that
//! over `..data` (one atomic step), then prunes links to entries that are gone and the old
//! directory. Nothing is written when the payload is unchanged.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Component, Path, PathBuf};

const DATA_DIR: &str = "..data";
const NEW_DATA_DIR: &str = "..data_tmp";
const MAX_FILE_NAME_LENGTH: usize = 255;
const MAX_PATH_LENGTH: usize = 4096;

/// One file of a payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileProjection {
    pub data: Vec<u8>,
    /// Permission bits (`0o644`…).
    pub mode: u32,
}

/// Relative path ▶ content.
pub type Payload = BTreeMap<String, FileProjection>;

/// Why a payload could not be written.
#[derive(Debug, thiserror::Error)]
pub enum AtomicWriteError {
    /// A payload path breaks upstream's rules; the message is upstream's.
    #[error("invalid path: {0}")]
    InvalidPath(String),
    /// The I/O error is part of the text (upstream's), so it is not also a `source`.
    #[error("{op} {path}: {error}")]
    Io { op: &'static str, path: PathBuf, error: std::io::Error },
}

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> AtomicWriteError + 'a {
    move |error| AtomicWriteError::Io { op, path: path.to_path_buf(), error }
}

/// Checks a payload path as upstream's `validatePath` and returns it cleaned.
fn clean_path(target: &str) -> Result<String, AtomicWriteError> {
    if target.is_empty() {
        return Err(AtomicWriteError::InvalidPath(format!("must not be empty: {target:?}")));
    }
    if target.starts_with('/') {
        return Err(AtomicWriteError::InvalidPath(format!("must be relative path: {target}")));
    }
    if target.len() > MAX_PATH_LENGTH {
        return Err(AtomicWriteError::InvalidPath(format!(
            "must be less than or equal to {MAX_PATH_LENGTH} characters"
        )));
    }
    let items: Vec<&str> = target.split('/').collect();
    for item in &items {
        if *item == ".." {
            return Err(AtomicWriteError::InvalidPath(format!("must not contain '..': {target}")));
        }
        if item.len() > MAX_FILE_NAME_LENGTH {
            return Err(AtomicWriteError::InvalidPath(format!(
                "filenames must be less than or equal to {MAX_FILE_NAME_LENGTH} characters"
            )));
        }
    }
    if items[0].starts_with("..") && items[0].len() > 2 {
        return Err(AtomicWriteError::InvalidPath(format!("must not start with '..': {target}")));
    }
    let cleaned: Vec<&str> = Path::new(target)
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => s.to_str(),
            _ => None,
        })
        .collect();
    if cleaned.is_empty() {
        return Err(AtomicWriteError::InvalidPath(format!("must not be empty: {target:?}")));
    }
    Ok(cleaned.join("/"))
}

/// Every file below `dir`, relative, with directories too (upstream's `pathsToRemove` walk).
fn walk(dir: &Path, rel: &str, out: &mut BTreeSet<String>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let rel_path = if rel.is_empty() { name.clone() } else { format!("{rel}/{name}") };
        out.insert(rel_path.clone());
        if entry.file_type()?.is_dir() {
            walk(&entry.path(), &rel_path, out)?;
        }
    }
    Ok(())
}

/// Whether the file at `path` differs from `want` (content or mode).
fn differs(path: &Path, want: &FileProjection) -> Result<bool, AtomicWriteError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(true),
        Err(e) => return Err(io("inspecting", path)(e)),
    };
    if !meta.is_file() || meta.permissions().mode() & 0o7777 != want.mode & 0o7777 {
        return Ok(true);
    }
    let have = std::fs::read(path).map_err(io("reading", path))?;
    Ok(have != want.data)
}

/// A new `..<UTC timestamp>.<nanos>` directory inside `target`, mode 0755.
fn new_timestamp_dir(target: &Path) -> Result<PathBuf, AtomicWriteError> {
    let now = jiff::Timestamp::now();
    let stamp = now.strftime("..%Y_%m_%d_%H_%M_%S.").to_string();
    let mut suffix = u64::from(now.subsec_nanosecond().unsigned_abs());
    for _ in 0..100 {
        let dir = target.join(format!("{stamp}{suffix}"));
        match std::fs::create_dir(&dir) {
            Ok(()) => {
                std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))
                    .map_err(io("setting the mode of", &dir))?;
                return Ok(dir);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => suffix += 1,
            Err(e) => return Err(io("creating", &dir)(e)),
        }
    }
    Err(io("creating a timestamped directory in", target)(std::io::Error::from(std::io::ErrorKind::AlreadyExists)))
}

/// Gives `gid` ownership of everything below `dir` and the group read bits of upstream's
/// `SetVolumeOwnership` for read-only volumes (files `|0440`, directories `|02550`).
pub fn apply_fs_group(dir: &Path, gid: u32) -> Result<(), AtomicWriteError> {
    let meta = std::fs::symlink_metadata(dir).map_err(io("inspecting", dir))?;
    if meta.file_type().is_symlink() {
        return Ok(());
    }
    std::os::unix::fs::lchown(dir, None, Some(gid)).map_err(io("changing the group of", dir))?;
    let mode = meta.permissions().mode() & 0o7777;
    let extra = if meta.is_dir() { 0o2550 } else { 0o440 };
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode | extra))
        .map_err(io("setting the mode of", dir))?;
    if meta.is_dir() {
        for entry in std::fs::read_dir(dir).map_err(io("listing", dir))? {
            let entry = entry.map_err(io("listing", dir))?;
            apply_fs_group(&entry.path(), gid)?;
        }
    }
    Ok(())
}

fn write_payload_to(dir: &Path, payload: &Payload) -> Result<(), AtomicWriteError> {
    for (rel, file) in payload {
        let full = dir.join(rel);
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent).map_err(io("creating", parent))?;
        }
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(file.mode & 0o7777)
            .open(&full)
            .map_err(io("creating", &full))?;
        f.write_all(&file.data).map_err(io("writing", &full))?;
        // The umask applied at creation: set the exact mode.
        std::fs::set_permissions(&full, std::fs::Permissions::from_mode(file.mode & 0o7777))
            .map_err(io("setting the mode of", &full))?;
    }
    Ok(())
}

/// Links each top-level payload entry `<dir>/<first>` to `..data/<first>` if missing.
fn create_visible_links(target: &Path, payload: &Payload) -> Result<(), AtomicWriteError> {
    let firsts: BTreeSet<&str> = payload.keys().map(|k| k.split('/').next().unwrap_or(k)).collect();
    for first in firsts {
        let link = target.join(first);
        match std::fs::symlink_metadata(&link) {
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io("inspecting", &link)(e)),
        }
        std::os::unix::fs::symlink(Path::new(DATA_DIR).join(first), &link).map_err(io("linking", &link))?;
    }
    Ok(())
}

/// Projects `payload` into `target` (an existing directory). Returns whether anything was
/// written. With `fs_group`, the new files belong to that group.
pub fn write(target: &Path, payload: &Payload, fs_group: Option<u32>) -> Result<bool, AtomicWriteError> {
    let mut clean = Payload::new();
    for (k, v) in payload {
        clean.insert(clean_path(k)?, v.clone());
    }
    let data_link = target.join(DATA_DIR);
    let old_ts = match std::fs::read_link(&data_link) {
        Ok(p) => Some(p),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io("reading", &data_link)(e)),
    };
    let mut to_remove = BTreeSet::new();
    if let Some(old) = &old_ts {
        let old_dir = target.join(old);
        let mut present = BTreeSet::new();
        match walk(&old_dir, "", &mut present) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io("listing", &old_dir)(e)),
        }
        let mut wanted = BTreeSet::new();
        for k in clean.keys() {
            let mut p = k.as_str();
            loop {
                wanted.insert(p.to_string());
                match p.rfind('/') {
                    Some(i) => p = &p[..i],
                    None => break,
                }
            }
        }
        to_remove = present.difference(&wanted).cloned().collect();
        let mut changed = false;
        for (k, v) in &clean {
            if differs(&old_dir.join(k), v)? {
                changed = true;
                break;
            }
        }
        if !changed && to_remove.is_empty() {
            create_visible_links(target, &clean)?;
            return Ok(false);
        }
    }

    let ts_dir = new_timestamp_dir(target)?;
    let written = write_payload_to(&ts_dir, &clean).and_then(|()| match fs_group {
        Some(gid) => apply_fs_group(&ts_dir, gid),
        None => Ok(()),
    });
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(&ts_dir);
        return Err(e);
    }
    let ts_name = ts_dir.file_name().map(PathBuf::from).unwrap_or_default();
    let tmp_link = target.join(NEW_DATA_DIR);
    let _ = std::fs::remove_file(&tmp_link);
    if let Err(e) = std::os::unix::fs::symlink(&ts_name, &tmp_link) {
        let _ = std::fs::remove_dir_all(&ts_dir);
        return Err(io("linking", &tmp_link)(e));
    }
    if let Err(e) = std::fs::rename(&tmp_link, &data_link) {
        let _ = std::fs::remove_file(&tmp_link);
        let _ = std::fs::remove_dir_all(&ts_dir);
        return Err(io("renaming", &tmp_link)(e));
    }
    create_visible_links(target, &clean)?;
    // Only links in the volume root are user-visible; deeper paths went with the old directory.
    for p in to_remove.iter().filter(|p| !p.contains('/')) {
        let link = target.join(p);
        if let Err(e) = std::fs::remove_file(&link) {
            if e.kind() != std::io::ErrorKind::NotFound {
                return Err(io("removing", &link)(e));
            }
        }
    }
    if let Some(old) = old_ts {
        let old_dir = target.join(old);
        if old_dir != ts_dir {
            std::fs::remove_dir_all(&old_dir).map_err(io("removing", &old_dir))?;
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(data: &str, mode: u32) -> FileProjection {
        FileProjection { data: data.as_bytes().to_vec(), mode }
    }

    fn read(dir: &Path, rel: &str) -> String {
        std::fs::read_to_string(dir.join(rel)).expect("read")
    }

    fn entries(dir: &Path) -> BTreeSet<String> {
        std::fs::read_dir(dir)
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with("..") || n == DATA_DIR)
            .collect()
    }

    #[test]
    fn first_write_creates_data_link_and_visible_links() {
        let tmp = tempfile::tempdir().expect("tmp");
        let p = Payload::from([("a".into(), file("A", 0o644)), ("nested/deep/b".into(), file("B", 0o400))]);
        assert!(write(tmp.path(), &p, None).expect("write"));
        assert_eq!(read(tmp.path(), "a"), "A");
        assert_eq!(read(tmp.path(), "nested/deep/b"), "B");
        let link = std::fs::read_link(tmp.path().join("a")).expect("link");
        assert_eq!(link, Path::new("..data/a"));
        let data = std::fs::read_link(tmp.path().join(DATA_DIR)).expect("data link");
        assert!(data.to_string_lossy().starts_with(".."), "{data:?}");
        let mode = std::fs::metadata(tmp.path().join("nested/deep/b")).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o400);
        assert_eq!(entries(tmp.path()), BTreeSet::from(["..data".into(), "a".into(), "nested".into()]));
    }

    #[test]
    fn unchanged_payload_writes_nothing() {
        let tmp = tempfile::tempdir().expect("tmp");
        let p = Payload::from([("a".into(), file("A", 0o644))]);
        assert!(write(tmp.path(), &p, None).expect("write"));
        let before = std::fs::read_link(tmp.path().join(DATA_DIR)).expect("data link");
        assert!(!write(tmp.path(), &p, None).expect("rewrite"));
        assert_eq!(std::fs::read_link(tmp.path().join(DATA_DIR)).expect("data link"), before);
    }

    #[test]
    fn update_swaps_the_data_dir_and_prunes_removed_entries() {
        let tmp = tempfile::tempdir().expect("tmp");
        let first = Payload::from([("a".into(), file("A", 0o644)), ("gone".into(), file("G", 0o644))]);
        write(tmp.path(), &first, None).expect("write");
        let old = std::fs::read_link(tmp.path().join(DATA_DIR)).expect("data link");
        let second = Payload::from([("a".into(), file("A2", 0o644)), ("new".into(), file("N", 0o644))]);
        assert!(write(tmp.path(), &second, None).expect("update"));
        assert_eq!(read(tmp.path(), "a"), "A2");
        assert_eq!(read(tmp.path(), "new"), "N");
        assert!(std::fs::symlink_metadata(tmp.path().join("gone")).is_err());
        assert!(!tmp.path().join(&old).exists(), "old timestamped dir removed");
        assert_eq!(entries(tmp.path()), BTreeSet::from(["..data".into(), "a".into(), "new".into()]));
        // Exactly one timestamped directory remains.
        let ts_dirs = std::fs::read_dir(tmp.path())
            .expect("list")
            .filter(|e| {
                let n = e.as_ref().expect("entry").file_name().to_string_lossy().into_owned();
                n.starts_with("..") && n != DATA_DIR
            })
            .count();
        assert_eq!(ts_dirs, 1);
    }

    #[test]
    fn removing_a_missing_visible_link_recreates_it_without_rewriting() {
        let tmp = tempfile::tempdir().expect("tmp");
        let p = Payload::from([("a".into(), file("A", 0o644))]);
        write(tmp.path(), &p, None).expect("write");
        std::fs::remove_file(tmp.path().join("a")).expect("rm");
        assert!(!write(tmp.path(), &p, None).expect("rewrite"));
        assert_eq!(read(tmp.path(), "a"), "A");
    }

    #[test]
    fn invalid_paths_are_rejected_with_upstream_messages() {
        let tmp = tempfile::tempdir().expect("tmp");
        for (path, msg) in [
            ("/abs", "invalid path: must be relative path: /abs"),
            ("a/../b", "invalid path: must not contain '..': a/../b"),
            ("..hidden", "invalid path: must not start with '..': ..hidden"),
            ("", "invalid path: must not be empty: \"\""),
        ] {
            let p = Payload::from([(path.to_string(), file("x", 0o644))]);
            let err = write(tmp.path(), &p, None).expect_err(path);
            assert_eq!(err.to_string(), msg);
        }
    }

    #[test]
    fn paths_are_cleaned() {
        let tmp = tempfile::tempdir().expect("tmp");
        let p = Payload::from([("./x//y".into(), file("Y", 0o644))]);
        write(tmp.path(), &p, None).expect("write");
        assert_eq!(read(tmp.path(), "x/y"), "Y");
    }
}
