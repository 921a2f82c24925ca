//! Kernel settings the proxy needs, behind [`Sysctl`] (the real one writes `/proc/sys`).
//!
//! - `net.ipv4.conf.all.route_localnet=1`: NodePorts on 127.0.0.1 are DNATed to pods and
//!   masqueraded; without it the kernel drops packets with a loopback source leaving a real
//!   interface. (The `filter-input` chain drops what this would otherwise let in from outside.)
//! - `net.bridge.bridge-nf-call-iptables=1`: pods on the same bridge talk at layer 2; without it
//!   their replies to a DNATed Service connection would bypass conntrack (no un-DNAT) and
//!   NetworkPolicy on the `forward` hook would never see pod-to-pod traffic. Needs `br_netfilter`.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum SysctlError {
    #[error("setting {key} = {value}")]
    Write { key: String, value: String, source: std::io::Error },
}

/// The settings `run` applies, in order.
pub const REQUIRED: &[(&str, &str)] =
    &[("net.ipv4.conf.all.route_localnet", "1"), ("net.bridge.bridge-nf-call-iptables", "1")];

pub trait Sysctl: Send + Sync {
    fn set(&self, key: &str, value: &str) -> Result<(), SysctlError>;
}

/// Writes `/proc/sys/<key with dots as slashes>` (of the caller's network namespace).
#[derive(Clone, Debug)]
pub struct ProcSysctl {
    root: PathBuf,
}

impl Default for ProcSysctl {
    fn default() -> Self {
        Self { root: PathBuf::from("/proc/sys") }
    }
}

impl ProcSysctl {
    /// A sysctl tree rooted elsewhere (tests).
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }
}

impl Sysctl for ProcSysctl {
    fn set(&self, key: &str, value: &str) -> Result<(), SysctlError> {
        let path = self.root.join(key.replace('.', "/"));
        std::fs::write(&path, value).map_err(|source| SysctlError::Write {
            key: key.to_string(),
            value: value.to_string(),
            source,
        })
    }
}

/// Applies [`REQUIRED`], logging (not failing on) settings the kernel lacks: the proxy still
/// serves ClusterIPs without them.
pub fn apply_required(sysctl: &dyn Sysctl) -> Vec<SysctlError> {
    let mut errors = Vec::new();
    for (k, v) in REQUIRED {
        match sysctl.set(k, v) {
            Ok(()) => tracing::debug!(key = k, value = v, "sysctl set"),
            Err(e) => {
                tracing::warn!(error = %k1s_api::errors::chain(&e), "sysctl not set; some Service traffic may fail");
                errors.push(e);
            }
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_dotted_keys_under_the_root_and_reports_missing_ones() {
        let dir = std::env::temp_dir().join(format!("k1s-proxy-sysctl-{}", std::process::id()));
        let conf = dir.join("net/ipv4/conf/all");
        std::fs::create_dir_all(&conf).expect("mkdir");
        std::fs::write(conf.join("route_localnet"), "0").expect("seed");
        let errors = apply_required(&ProcSysctl::at(&dir));
        assert_eq!(std::fs::read_to_string(conf.join("route_localnet")).expect("read"), "1");
        assert_eq!(errors.len(), 1, "no net/bridge directory: br_netfilter missing");
        assert!(errors[0].to_string().contains("net.bridge.bridge-nf-call-iptables"), "{}", errors[0]);
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
