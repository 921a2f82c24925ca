//! What `/version` says of the build: the binary stamps it at start ([`set_build`]) with what its
//! build script found (git commit and tree state, `SOURCE_DATE_EPOCH` or the build time).

use std::sync::OnceLock;

/// The build's stamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Build {
    pub git_commit: &'static str,
    /// "clean", "dirty", or "" when unknown.
    pub git_tree_state: &'static str,
    /// RFC 3339, UTC.
    pub build_date: &'static str,
}

/// When nothing stamped the build (a library test, say).
const UNKNOWN: Build = Build { git_commit: "unknown", git_tree_state: "", build_date: "unknown" };

static BUILD: OnceLock<Build> = OnceLock::new();

/// Stamps the build, once per process (later calls are ignored).
pub fn set_build(build: Build) {
    let _ = BUILD.set(build);
}

/// The stamp, or "unknown" for what was not stamped.
pub fn build() -> Build {
    BUILD.get().copied().unwrap_or(UNKNOWN)
}
