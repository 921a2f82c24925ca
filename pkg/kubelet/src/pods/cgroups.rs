//! Pod cgroups: containerd leaves them behind, so the kubelet removes `<root>/pod<uid>` from
//! every hierarchy once the sandbox is gone.

use std::path::{Path, PathBuf};

/// The cgroup parent of a pod's sandbox and containers.
pub fn pod_cgroup(root: &str, uid: &str) -> String {
    format!("{}/pod{}", root.trim_end_matches('/'), uid)
}

/// Every directory of `cgroup` under the mounted hierarchies (v1 controllers and the v2 root).
pub fn hierarchy_dirs(mount_root: &Path, cgroup: &str) -> Vec<PathBuf> {
    let rel = cgroup.trim_start_matches('/');
    let mut out = Vec::new();
    let is_v2 = mount_root.join("cgroup.controllers").exists();
    if is_v2 {
        out.push(mount_root.join(rel));
        return out;
    }
    if let Ok(entries) = std::fs::read_dir(mount_root) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() && !p.is_symlink() {
                out.push(p.join(rel));
            }
        }
    }
    out
}

/// Removes a pod cgroup (children first) from every hierarchy; leftovers are logged.
pub fn remove(mount_root: &Path, cgroup: &str) {
    for dir in hierarchy_dirs(mount_root, cgroup) {
        if !dir.exists() {
            continue;
        }
        remove_tree(&dir);
    }
}

fn remove_tree(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.path().is_dir() {
                remove_tree(&e.path());
            }
        }
    }
    if let Err(e) = std::fs::remove_dir(dir) {
        tracing::debug!(path = %dir.display(), error = %e, "could not remove cgroup");
    }
}

/// Whether the pod's cgroup still exists in any hierarchy (for tests and cleanup checks).
pub fn exists(mount_root: &Path, cgroup: &str) -> bool {
    hierarchy_dirs(mount_root, cgroup).iter().any(|d| d.exists())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_the_pod_cgroup_from_every_v1_hierarchy() {
        let root = tempfile::tempdir().expect("tmp");
        for c in ["memory", "cpu", "pids"] {
            std::fs::create_dir_all(root.path().join(c).join("k1s/podabc/ctr1")).expect("mkdir");
        }
        let cg = pod_cgroup("/k1s", "abc");
        assert!(exists(root.path(), &cg));
        remove(root.path(), &cg);
        assert!(!exists(root.path(), &cg));
        assert!(root.path().join("memory/k1s").exists());
    }
}
