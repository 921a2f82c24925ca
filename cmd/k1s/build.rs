//! Stamps the build for `/version` and `k1s --version` (see `src/stamp.rs`): the git commit and
//! tree state of the checkout when there is one, and `SOURCE_DATE_EPOCH` or the build time.

#[path = "src/stamp.rs"]
mod stamp;

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let dir = std::env::var("CARGO_MANIFEST_DIR").ok()?;
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn main() {
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    println!("cargo:rerun-if-env-changed=K1S_GIT_COMMIT");
    // Stamped again when the checkout moves to another commit or its index changes (a build's
    // own edits to files that are not staged are not seen: the tree state is git's at that time).
    for path in ["HEAD", "index", "packed-refs"] {
        if let Some(p) = git(&["rev-parse", "--git-path", path]) {
            println!("cargo:rerun-if-changed={}", resolve(p.trim()));
        }
    }
    if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
        if let Some(p) = git(&["rev-parse", "--git-path", r.trim()]) {
            println!("cargo:rerun-if-changed={}", resolve(p.trim()));
        }
    }
    let commit = match std::env::var("K1S_GIT_COMMIT") {
        Ok(c) if !c.is_empty() => stamp::git_commit(Some(&c)),
        _ => stamp::git_commit(git(&["rev-parse", "HEAD"]).as_deref()),
    };
    let tree = stamp::git_tree_state(git(&["status", "--porcelain", "--untracked-files=no"]).as_deref());
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let date = stamp::build_date(std::env::var("SOURCE_DATE_EPOCH").ok().as_deref(), now);
    println!("cargo:rustc-env=K1S_GIT_COMMIT={commit}");
    println!("cargo:rustc-env=K1S_GIT_TREE_STATE={tree}");
    println!("cargo:rustc-env=K1S_BUILD_DATE={date}");
}

/// `git rev-parse --git-path` answers relative to the manifest's folder.
fn resolve(p: &str) -> String {
    let path = std::path::Path::new(p);
    if path.is_absolute() {
        return p.to_string();
    }
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    std::path::Path::new(&dir).join(path).display().to_string()
}
