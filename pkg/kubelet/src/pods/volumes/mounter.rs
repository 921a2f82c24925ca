//! The one OS boundary of volumes beyond plain files: tmpfs mounts (memory-backed emptyDir,
//! secret and projected volumes). [`HostMounter`] runs the `mount`/`umount` binaries and reads
//! `/proc/self/mountinfo`; [`FakeMounter`] records calls for tests.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Why a mount operation failed.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    #[error("mount tmpfs at {path}: {message}")]
    Mount { path: PathBuf, message: String },
    #[error("unmount {path}: {message}")]
    Unmount { path: PathBuf, message: String },
    #[error("reading mount table: {0}")]
    Table(std::io::Error),
}

/// Mounts and unmounts tmpfs file systems.
#[async_trait::async_trait]
pub trait Mounter: Send + Sync {
    /// Mounts a tmpfs at `path` (an existing directory), `size` bytes large when given.
    async fn mount_tmpfs(&self, path: &Path, size: Option<u64>) -> Result<(), MountError>;
    async fn unmount(&self, path: &Path) -> Result<(), MountError>;
    /// The mount points at or below `dir`, deepest first.
    fn mounts_under(&self, dir: &Path) -> Result<Vec<PathBuf>, MountError>;
}

/// Mounts with the host's `mount` binary.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostMounter;

/// Undoes the octal escapes of `/proc/self/mountinfo` (`\040` for a space).
fn unescape_mountinfo(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 3 < bytes.len() && bytes[i + 1..i + 4].iter().all(|b| (b'0'..=b'7').contains(b)) {
            let v = (bytes[i + 1] - b'0') * 64 + (bytes[i + 2] - b'0') * 8 + (bytes[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The mount points listed in a mountinfo table that are `dir` or below it, deepest first.
pub fn mount_points_under(mountinfo: &str, dir: &Path) -> Vec<PathBuf> {
    let mut found: BTreeSet<PathBuf> = BTreeSet::new();
    for line in mountinfo.lines() {
        let Some(field) = line.split(' ').nth(4) else { continue };
        let p = PathBuf::from(unescape_mountinfo(field));
        if p.starts_with(dir) {
            found.insert(p);
        }
    }
    let mut v: Vec<PathBuf> = found.into_iter().collect();
    v.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    v
}

async fn run(cmd: &str, args: &[&std::ffi::OsStr]) -> Result<(), String> {
    let out = tokio::process::Command::new(cmd).args(args).output().await.map_err(|e| format!("running {cmd}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        Err(format!("{cmd} exited with {}: {stderr}", out.status))
    }
}

#[async_trait::async_trait]
impl Mounter for HostMounter {
    async fn mount_tmpfs(&self, path: &Path, size: Option<u64>) -> Result<(), MountError> {
        let mut args: Vec<std::ffi::OsString> = vec!["-t".into(), "tmpfs".into()];
        if let Some(size) = size {
            args.push("-o".into());
            args.push(format!("size={size}").into());
        }
        args.push("tmpfs".into());
        args.push(path.as_os_str().to_owned());
        let refs: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        run("mount", &refs).await.map_err(|message| MountError::Mount { path: path.to_path_buf(), message })
    }

    async fn unmount(&self, path: &Path) -> Result<(), MountError> {
        run("umount", &[path.as_os_str()])
            .await
            .map_err(|message| MountError::Unmount { path: path.to_path_buf(), message })
    }

    fn mounts_under(&self, dir: &Path) -> Result<Vec<PathBuf>, MountError> {
        let table = std::fs::read_to_string("/proc/self/mountinfo").map_err(MountError::Table)?;
        Ok(mount_points_under(&table, dir))
    }
}

/// Records tmpfs mounts in memory: what is "mounted" is only remembered.
#[derive(Debug, Default)]
pub struct FakeMounter {
    mounted: Mutex<Vec<(PathBuf, Option<u64>)>>,
    fail: Mutex<Option<String>>,
}

impl FakeMounter {
    /// The current mounts and their sizes.
    pub fn mounts(&self) -> Vec<(PathBuf, Option<u64>)> {
        self.mounted.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Makes the next mounts fail with `message`.
    pub fn fail_mounts(&self, message: Option<&str>) {
        *self.fail.lock().unwrap_or_else(|p| p.into_inner()) = message.map(str::to_string);
    }
}

#[async_trait::async_trait]
impl Mounter for FakeMounter {
    async fn mount_tmpfs(&self, path: &Path, size: Option<u64>) -> Result<(), MountError> {
        if let Some(message) = self.fail.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            return Err(MountError::Mount { path: path.to_path_buf(), message });
        }
        self.mounted.lock().unwrap_or_else(|p| p.into_inner()).push((path.to_path_buf(), size));
        Ok(())
    }

    async fn unmount(&self, path: &Path) -> Result<(), MountError> {
        let mut m = self.mounted.lock().unwrap_or_else(|p| p.into_inner());
        let before = m.len();
        m.retain(|(p, _)| p != path);
        if m.len() == before {
            return Err(MountError::Unmount { path: path.to_path_buf(), message: "not mounted".into() });
        }
        Ok(())
    }

    fn mounts_under(&self, dir: &Path) -> Result<Vec<PathBuf>, MountError> {
        let m = self.mounted.lock().unwrap_or_else(|p| p.into_inner());
        let mut v: Vec<PathBuf> = m.iter().map(|(p, _)| p.clone()).filter(|p| p.starts_with(dir)).collect();
        v.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lists_mounts_below_a_directory_deepest_first() {
        let table = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
90 22 0:50 / /var/lib/k1s/pods/u1/volumes/kubernetes.io~secret/tok rw - tmpfs tmpfs rw,size=1024k
91 22 0:51 / /var/lib/k1s/pods/u1/volumes/kubernetes.io~empty-dir/with\\040space rw - tmpfs tmpfs rw
92 90 0:52 / /var/lib/k1s/pods/u1/volumes/kubernetes.io~secret/tok/inner rw - tmpfs tmpfs rw
93 22 0:53 / /var/lib/k1s/pods/u2/volumes/kubernetes.io~secret/x rw - tmpfs tmpfs rw
";
        let found = mount_points_under(table, Path::new("/var/lib/k1s/pods/u1"));
        assert_eq!(
            found,
            vec![
                PathBuf::from("/var/lib/k1s/pods/u1/volumes/kubernetes.io~secret/tok/inner"),
                PathBuf::from("/var/lib/k1s/pods/u1/volumes/kubernetes.io~empty-dir/with space"),
                PathBuf::from("/var/lib/k1s/pods/u1/volumes/kubernetes.io~secret/tok"),
            ]
        );
    }

    #[tokio::test]
    #[ignore = "needs root: mounts a real tmpfs"]
    async fn host_mounter_mounts_lists_and_unmounts_a_sized_tmpfs() {
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = tmp.path().canonicalize().expect("canonical").join("vol");
        std::fs::create_dir(&dir).expect("mkdir");
        let m = HostMounter;
        m.mount_tmpfs(&dir, Some(1 << 20)).await.expect("mount");
        assert_eq!(m.mounts_under(tmp.path()).expect("table"), vec![dir.clone()]);
        let table = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
        let line = table.lines().find(|l| l.contains(dir.to_str().expect("utf8"))).expect("listed");
        assert!(line.contains("size=1024k"), "{line}");
        m.unmount(&dir).await.expect("unmount");
        assert!(m.mounts_under(tmp.path()).expect("table").is_empty());
    }
}
