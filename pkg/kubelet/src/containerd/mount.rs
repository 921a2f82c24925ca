//! Mount propagation for the kubelet root directory. Where systemd is not PID 1, `/` is a
//! private mount, so volume mounts with HostToContainer/Bidirectional propagation need the
//! kubelet root to be a shared mount: bind-mount it onto itself when it is not a mount point,
//! then `mount --make-rshared` it (what upstream's kubelet does with `MakeRShared`).
//!
//! The mount table and the `mount` binary sit behind [`MountOps`]; [`ensure_shared_mount`]
//! uses the real ones.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Why the mount could not be made shared.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    #[error("creating mount directory {path}")]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("reading the mount table")]
    ReadMountInfo(#[source] std::io::Error),
    #[error("running mount {args:?}")]
    Spawn {
        args: Vec<String>,
        #[source]
        source: std::io::Error,
    },
    #[error("mount {args:?} failed ({status}): {stderr}")]
    Failed { args: Vec<String>, status: String, stderr: String },
    #[error("{path} is still not a shared mount after mount --make-rshared")]
    NotShared { path: PathBuf },
}

/// What [`ensure_shared_mount`] changed, so that a caller (a test) can undo it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharedMountChange {
    /// The path was not a mount point and was bind-mounted onto itself.
    pub bind_mounted: bool,
    /// Its propagation was changed to rshared.
    pub made_shared: bool,
}

/// The OS side: the mount table and the `mount` binary.
pub trait MountOps {
    /// The text of `/proc/self/mountinfo`.
    fn mountinfo(&self) -> std::io::Result<String>;
    /// Runs `mount` with `args`.
    fn mount(&self, args: &[&str]) -> Result<(), MountError>;
}

/// The real mount table and `mount` from PATH.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemMounts;

impl MountOps for SystemMounts {
    fn mountinfo(&self) -> std::io::Result<String> {
        std::fs::read_to_string("/proc/self/mountinfo")
    }

    fn mount(&self, args: &[&str]) -> Result<(), MountError> {
        let owned = || args.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        let output =
            Command::new("mount").args(args).output().map_err(|source| MountError::Spawn { args: owned(), source })?;
        if output.status.success() {
            Ok(())
        } else {
            Err(MountError::Failed {
                args: owned(),
                status: output.status.to_string(),
                stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
            })
        }
    }
}

/// Makes `path` (created if missing) a shared mount with the real OS.
pub fn ensure_shared_mount(path: &Path) -> Result<SharedMountChange, MountError> {
    ensure_shared_mount_with(&SystemMounts, path)
}

/// Makes `path` a shared mount through `ops`: bind it onto itself when it is not a mount point,
/// then `--make-rshared` unless it already is shared. Idempotent.
pub fn ensure_shared_mount_with(ops: &impl MountOps, path: &Path) -> Result<SharedMountChange, MountError> {
    std::fs::create_dir_all(path).map_err(|source| MountError::CreateDir { path: path.to_path_buf(), source })?;
    let path =
        std::fs::canonicalize(path).map_err(|source| MountError::CreateDir { path: path.to_path_buf(), source })?;
    let path_str = path.to_string_lossy().into_owned();
    let mut change = SharedMountChange { bind_mounted: false, made_shared: false };
    let table = ops.mountinfo().map_err(MountError::ReadMountInfo)?;
    let entry = find_mount(&table, &path);
    if entry.as_ref().is_some_and(|e| e.shared) {
        return Ok(change);
    }
    if entry.is_none() {
        ops.mount(&["--bind", &path_str, &path_str])?;
        change.bind_mounted = true;
        tracing::info!(path = %path.display(), "bind-mounted onto itself to make it a mount point");
    }
    ops.mount(&["--make-rshared", &path_str])?;
    change.made_shared = true;
    let table = ops.mountinfo().map_err(MountError::ReadMountInfo)?;
    if !find_mount(&table, &path).is_some_and(|e| e.shared) {
        return Err(MountError::NotShared { path });
    }
    tracing::info!(path = %path.display(), "made a shared mount");
    Ok(change)
}

/// One line of `/proc/self/mountinfo`, the parts this module needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountEntry {
    pub mount_point: PathBuf,
    /// The optional fields carry `shared:N`.
    pub shared: bool,
}

/// Parses `/proc/self/mountinfo` text (proc(5)); malformed lines are skipped.
pub fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            // id parent major:minor root mount-point options [optional...] - fstype source opts
            let separator = fields.iter().position(|f| *f == "-")?;
            if separator < 6 {
                return None;
            }
            Some(MountEntry {
                mount_point: PathBuf::from(unescape_octal(fields[4])),
                shared: fields[6..separator].iter().any(|f| f.starts_with("shared:")),
            })
        })
        .collect()
}

/// The mount at exactly `path`; the last one wins when mounts are stacked.
fn find_mount(table: &str, path: &Path) -> Option<MountEntry> {
    parse_mountinfo(table).into_iter().rfind(|e| e.mount_point == path)
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape_octal(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if let Some(digits) = bytes.get(i + 1..i + 4).filter(|_| bytes[i] == b'\\') {
            if digits.iter().all(|d| (b'0'..=b'7').contains(d)) {
                let value = digits.iter().fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
                if let Ok(value) = u8::try_from(value) {
                    out.push(value);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    const TABLE: &str = "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n\
        31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
        90 27 254:0 /var/lib/kubelet /var/lib/kubelet rw,relatime shared:5 - ext4 /dev/vda rw\n\
        91 27 254:0 /srv/a\\040b /srv/a\\040b rw master:3 - ext4 /dev/vda rw\n";

    #[test]
    fn mountinfo_optional_fields_give_the_propagation() {
        let entries = parse_mountinfo(TABLE);
        assert_eq!(entries.len(), 4);
        assert!(!entries[0].shared);
        assert_eq!(entries[2].mount_point, Path::new("/var/lib/kubelet"));
        assert!(entries[2].shared);
        assert_eq!(entries[3].mount_point, Path::new("/srv/a b"));
        assert!(!entries[3].shared);
    }

    #[test]
    fn malformed_mountinfo_lines_are_skipped() {
        assert!(parse_mountinfo("garbage\n1 2 3\n").is_empty());
    }

    /// A mount table in memory that `mount` edits the way the kernel would.
    struct FakeMounts {
        table: RefCell<Vec<(String, bool)>>,
        calls: RefCell<Vec<Vec<String>>>,
    }

    impl FakeMounts {
        fn new(mounts: &[(&str, bool)]) -> Self {
            Self {
                table: RefCell::new(mounts.iter().map(|(p, s)| (p.to_string(), *s)).collect()),
                calls: RefCell::new(Vec::new()),
            }
        }
    }

    impl MountOps for FakeMounts {
        fn mountinfo(&self) -> std::io::Result<String> {
            Ok(self
                .table
                .borrow()
                .iter()
                .enumerate()
                .map(|(i, (p, shared))| {
                    let opt = if *shared { " shared:1" } else { "" };
                    format!("{i} 1 8:1 / {p} rw{opt} - ext4 /dev/sda rw\n")
                })
                .collect())
        }

        fn mount(&self, args: &[&str]) -> Result<(), MountError> {
            self.calls.borrow_mut().push(args.iter().map(|a| a.to_string()).collect());
            let mut table = self.table.borrow_mut();
            match args {
                ["--bind", _, target] => table.push((target.to_string(), false)),
                ["--make-rshared", target] => {
                    for entry in table.iter_mut().filter(|(p, _)| p == target) {
                        entry.1 = true;
                    }
                }
                _ => panic!("unexpected mount {args:?}"),
            }
            Ok(())
        }
    }

    #[test]
    fn a_plain_directory_is_bind_mounted_then_made_shared() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = std::fs::canonicalize(dir.path()).expect("canonicalize");
        let p = path.to_string_lossy().into_owned();
        let fake = FakeMounts::new(&[("/", false)]);
        let change = ensure_shared_mount_with(&fake, &path).expect("make shared");
        assert_eq!(change, SharedMountChange { bind_mounted: true, made_shared: true });
        assert_eq!(
            *fake.calls.borrow(),
            vec![vec!["--bind".to_string(), p.clone(), p.clone()], vec!["--make-rshared".to_string(), p]]
        );
    }

    #[test]
    fn a_private_mount_point_is_only_made_shared() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = std::fs::canonicalize(dir.path()).expect("canonicalize");
        let p = path.to_string_lossy().into_owned();
        let fake = FakeMounts::new(&[("/", false), (p.as_str(), false)]);
        let change = ensure_shared_mount_with(&fake, &path).expect("make shared");
        assert!(!change.bind_mounted);
        assert!(change.made_shared);
        assert_eq!(fake.calls.borrow().len(), 1);
    }

    #[test]
    fn an_already_shared_mount_is_left_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = std::fs::canonicalize(dir.path()).expect("canonicalize");
        let p = path.to_string_lossy().into_owned();
        let fake = FakeMounts::new(&[("/", false), (p.as_str(), true)]);
        let change = ensure_shared_mount_with(&fake, &path).expect("make shared");
        assert!(!change.bind_mounted && !change.made_shared);
        assert!(fake.calls.borrow().is_empty());
    }

    #[test]
    fn a_missing_directory_is_created() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("kubelet");
        let fake = FakeMounts::new(&[("/", false)]);
        ensure_shared_mount_with(&fake, &path).expect("make shared");
        assert!(path.is_dir());
    }
}
