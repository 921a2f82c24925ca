//! Facts about the host that change the containerd configuration: whether this process holds
//! CAP_SYS_RESOURCE (without it runc cannot lower a child's `oom_score_adj`, so every
//! RunPodSandbox fails with `can't get final child's PID from pipe: EOF` unless containerd
//! restricts `oom_score_adj`) and whether systemd is PID 1 (no systemd cgroup driver otherwise).
//!
//! The parsers take the text of `/proc/self/status` and `/proc/1/comm`, so they are tested on
//! sample strings; [`HostFacts::detect`] is the only function that reads `/proc`.

use std::path::Path;

/// Capability number of CAP_SYS_RESOURCE (linux/capability.h).
pub const CAP_SYS_RESOURCE: u32 = 24;

/// Why the host facts could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HostFactsError {
    #[error("reading {path}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("parsing /proc status: no CapEff line")]
    MissingCapEff,
    #[error("parsing /proc status: CapEff value {value:?} is not a hexadecimal mask")]
    InvalidCapEff { value: String },
}

/// What the containerd configuration needs to know about the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostFacts {
    /// This process's effective capability set includes CAP_SYS_RESOURCE.
    pub has_cap_sys_resource: bool,
    /// systemd is the init process (PID 1).
    pub systemd_is_init: bool,
}

impl HostFacts {
    /// Reads `/proc/self/status` and `/proc/1/comm`.
    pub fn detect() -> Result<Self, HostFactsError> {
        let status = read_proc(Path::new("/proc/self/status"))?;
        // /proc/1/comm is unreadable in some sandboxes: then systemd is not known to be init.
        let init_comm = std::fs::read_to_string("/proc/1/comm").unwrap_or_default();
        Self::from_proc(&status, &init_comm)
    }

    /// The facts from the text of `/proc/self/status` and `/proc/1/comm`.
    pub fn from_proc(self_status: &str, init_comm: &str) -> Result<Self, HostFactsError> {
        let effective = effective_capabilities(self_status)?;
        Ok(Self {
            has_cap_sys_resource: has_capability(effective, CAP_SYS_RESOURCE),
            systemd_is_init: init_comm.trim() == "systemd",
        })
    }
}

fn read_proc(path: &Path) -> Result<String, HostFactsError> {
    std::fs::read_to_string(path).map_err(|source| HostFactsError::Read { path: path.display().to_string(), source })
}

/// The effective capability mask (`CapEff:` line) of a `/proc/<pid>/status` text.
pub fn effective_capabilities(status: &str) -> Result<u64, HostFactsError> {
    let value = status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .map(str::trim)
        .ok_or(HostFactsError::MissingCapEff)?;
    u64::from_str_radix(value, 16).map_err(|_| HostFactsError::InvalidCapEff { value: value.to_string() })
}

/// Whether capability number `cap` is set in `mask`.
pub fn has_capability(mask: u64, cap: u32) -> bool {
    cap < 64 && mask & (1u64 << cap) != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    // This VM: root with every capability except CAP_SYS_RESOURCE (bit 24).
    const STATUS_WITHOUT_SYS_RESOURCE: &str = "Name:\tcat\nUmask:\t0022\nState:\tR (running)\n\
        CapInh:\t0000000000000000\nCapPrm:\t000001fffeffffff\nCapEff:\t000001fffeffffff\n\
        CapBnd:\t000001fffeffffff\nCapAmb:\t0000000000000000\nNoNewPrivs:\t0\n";
    const STATUS_FULL_ROOT: &str = "Name:\tcat\nCapInh:\t0000000000000000\n\
        CapPrm:\t000001ffffffffff\nCapEff:\t000001ffffffffff\nCapBnd:\t000001ffffffffff\n";
    const STATUS_UNPRIVILEGED: &str = "Name:\tcat\nCapEff:\t0000000000000000\n";

    #[test]
    fn root_without_cap_sys_resource_is_detected() {
        let facts = HostFacts::from_proc(STATUS_WITHOUT_SYS_RESOURCE, "process_api\n").expect("parse status");
        assert!(!facts.has_cap_sys_resource);
        assert!(!facts.systemd_is_init);
    }

    #[test]
    fn full_root_has_cap_sys_resource() {
        let facts = HostFacts::from_proc(STATUS_FULL_ROOT, "systemd\n").expect("parse status");
        assert!(facts.has_cap_sys_resource);
        assert!(facts.systemd_is_init);
    }

    #[test]
    fn unprivileged_process_has_no_capabilities() {
        let mask = effective_capabilities(STATUS_UNPRIVILEGED).expect("parse status");
        assert_eq!(mask, 0);
        assert!(!has_capability(mask, CAP_SYS_RESOURCE));
    }

    #[test]
    fn capeff_is_read_not_capprm() {
        let status = "CapPrm:\t000001ffffffffff\nCapEff:\t0000000000000000\n";
        assert_eq!(effective_capabilities(status).expect("parse status"), 0);
    }

    #[test]
    fn missing_capeff_is_an_error() {
        let err = effective_capabilities("Name:\tcat\n").expect_err("no CapEff");
        assert!(matches!(err, HostFactsError::MissingCapEff));
    }

    #[test]
    fn malformed_capeff_is_an_error() {
        let err = effective_capabilities("CapEff:\tzz\n").expect_err("bad CapEff");
        assert!(matches!(err, HostFactsError::InvalidCapEff { value } if value == "zz"));
    }

    #[test]
    fn capability_numbers_beyond_the_mask_are_absent() {
        assert!(!has_capability(u64::MAX, 64));
        assert!(has_capability(1 << 40, 40));
    }

    #[test]
    fn detect_reads_this_process() {
        // Whatever the host, detection must succeed on Linux.
        HostFacts::detect().expect("detect host facts");
    }
}
