//! containerd: its generated configuration, its supervision, and the host facts and mount
//! propagation that running pods through it needs on this kind of machine.
//!
//! Start-up order for the node: [`HostFacts::detect`] ▶ [`ContainerdConfig::new`] ▶
//! [`ContainerdConfig::write`] (after the CNI conflist and registry hosts are written) ▶
//! [`ensure_shared_mount`] on the kubelet root ▶ [`Supervisor::start`].

mod atomic_file;
mod config;
mod host;
mod mount;
mod supervisor;

pub(crate) use atomic_file::write_atomic;
pub(crate) use config::quote as toml_quote;
pub use config::{
    render, ConfigError, ContainerdConfig, DEFAULT_CNI_BIN_DIR, DEFAULT_SANDBOX_IMAGE, DEFAULT_SNAPSHOTTER,
};
pub use host::{effective_capabilities, has_capability, HostFacts, HostFactsError, CAP_SYS_RESOURCE};
pub use mount::{
    ensure_shared_mount, ensure_shared_mount_with, parse_mountinfo, MountEntry, MountError, MountOps,
    SharedMountChange, SystemMounts,
};
pub use supervisor::{
    status_events, Backoff, ChildProcess, ContainerdStatus, OsChild, OsProcessControl, ProcessControl, SpawnSpec,
    StatusEvent, StopSignal, Supervisor, SupervisorConfig, SupervisorError, SupervisorHandle,
};
