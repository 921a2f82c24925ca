//! Facts about this machine the Node reports: CPUs, memory, disk, kernel, OS, identifiers,
//! and the node's own IP address.

use std::net::IpAddr;
use std::path::Path;

#[derive(Clone, Debug)]
pub struct HostInfo {
    pub hostname: String,
    pub cpus: u32,
    pub memory_kib: u64,
    pub ephemeral_storage_kib: u64,
    pub kernel_version: String,
    pub os_image: String,
    pub machine_id: String,
    pub system_uuid: String,
    pub boot_id: String,
    pub arch: &'static str,
}

fn read_trim(p: &str) -> String {
    std::fs::read_to_string(p).map(|s| s.trim().to_string()).unwrap_or_default()
}

/// `MemTotal` from /proc/meminfo, in KiB.
pub fn parse_meminfo(text: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// `PRETTY_NAME` from os-release.
pub fn parse_os_release(text: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_string())
        .unwrap_or_else(|| "Linux".into())
}

/// Size of the filesystem holding `path`, in KiB (via `df`, to avoid unsafe statvfs).
fn disk_kib(path: &Path) -> u64 {
    let out = std::process::Command::new("df").arg("-k").arg("--output=size").arg(path).output();
    out.ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().nth(1).and_then(|l| l.trim().parse().ok()))
        .unwrap_or(0)
}

pub fn gather(root_dir: &Path) -> HostInfo {
    let machine_id = read_trim("/etc/machine-id");
    let uuid = read_trim("/sys/class/dmi/id/product_uuid");
    HostInfo {
        hostname: read_trim("/proc/sys/kernel/hostname"),
        cpus: std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1),
        memory_kib: parse_meminfo(&std::fs::read_to_string("/proc/meminfo").unwrap_or_default()),
        ephemeral_storage_kib: disk_kib(root_dir),
        kernel_version: read_trim("/proc/sys/kernel/osrelease"),
        os_image: parse_os_release(&std::fs::read_to_string("/etc/os-release").unwrap_or_default()),
        system_uuid: if uuid.is_empty() { machine_id.clone() } else { uuid },
        machine_id,
        boot_id: read_trim("/proc/sys/kernel/random/boot_id"),
        arch: match std::env::consts::ARCH {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            other => other,
        },
    }
}

/// The first global IPv4 address of an interface that is not one of k1s's own (cni0, veths).
pub fn detect_node_ip() -> Option<IpAddr> {
    let out = std::process::Command::new("ip").args(["-j", "-4", "addr", "show", "scope", "global"]).output().ok()?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    pick_node_ip(&v)
}

/// Picks the node address from `ip -j addr` output.
pub fn pick_node_ip(v: &serde_json::Value) -> Option<IpAddr> {
    for link in v.as_array()? {
        let name = link.get("ifname").and_then(|n| n.as_str()).unwrap_or("");
        if name == "lo" || name.starts_with("cni") || name.starts_with("veth") || name.starts_with("k1s") {
            continue;
        }
        for a in link.get("addr_info").and_then(|a| a.as_array()).into_iter().flatten() {
            if let Some(ip) = a.get("local").and_then(|l| l.as_str()).and_then(|s| s.parse::<IpAddr>().ok()) {
                if !ip.is_loopback() {
                    return Some(ip);
                }
            }
        }
    }
    None
}

/// Total memory in bytes (for resource env vars and OOM score adjustment).
pub fn memory_capacity_bytes() -> i64 {
    (parse_meminfo(&std::fs::read_to_string("/proc/meminfo").unwrap_or_default()) * 1024) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_meminfo_os_release_and_picks_node_ip() {
        assert_eq!(parse_meminfo("MemTotal:       24563716 kB\nMemFree: 1 kB\n"), 24563716);
        assert_eq!(
            parse_os_release("NAME=x\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n"),
            "Debian GNU/Linux 12 (bookworm)"
        );
        let v = serde_json::json!([
            {"ifname": "lo", "addr_info": [{"local": "127.0.0.1"}]},
            {"ifname": "cni0", "addr_info": [{"local": "10.42.0.1"}]},
            {"ifname": "eth0", "addr_info": [{"local": "192.168.1.5"}]},
        ]);
        assert_eq!(pick_node_ip(&v), "192.168.1.5".parse().ok());
    }
}
