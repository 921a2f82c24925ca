//! Preflight: what `k1s check` prints and what `k1s server` runs before anything else. Each
//! check names what it looked at, its result (PASS, WARN, FAIL) and, unless it passed, the fix.
//! A FAIL blocks a start: `k1s server` refuses with the FAIL lines instead of failing later
//! (containerd without runc, a CNI plugin missing when the first pod starts...).
//!
//! The host is read through [`Host`], so the rules are unit-tested on a fake machine.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Pass,
    Warn,
    Fail,
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Level::Pass => "PASS",
            Level::Warn => "WARN",
            Level::Fail => "FAIL",
        })
    }
}

/// One check's result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub level: Level,
    /// What was checked: `binary runc`, `kernel module overlay`, `port 6443`...
    pub name: String,
    pub detail: String,
    /// How to fix it (not for PASS).
    pub fix: Option<String>,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.level, self.name, self.detail)?;
        if let Some(fix) = &self.fix {
            write!(f, " (fix: {fix})")?;
        }
        Ok(())
    }
}

/// Every finding of one run.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub findings: Vec<Finding>,
}

impl Report {
    pub fn failures(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| f.level == Level::Fail)
    }

    /// No FAIL: the server may start.
    pub fn passed(&self) -> bool {
        self.failures().next().is_none()
    }

    /// One line per finding.
    pub fn render(&self) -> String {
        self.findings.iter().map(|f| format!("{f}\n")).collect()
    }
}

/// Why the server refuses to start: the FAIL lines, exactly as `k1s check` prints them.
#[derive(Debug, thiserror::Error)]
#[error("preflight failed, fix these first (run `k1s check` for every check):\n{}", .lines.join("\n"))]
pub struct PreflightFailed {
    pub lines: Vec<String>,
}

impl Report {
    pub fn into_result(self) -> Result<Report, PreflightFailed> {
        if self.passed() {
            Ok(self)
        } else {
            Err(PreflightFailed { lines: self.failures().map(|f| f.to_string()).collect() })
        }
    }
}

/// What to check, from the server's configuration.
#[derive(Clone, Debug)]
pub struct Options {
    pub data_dir: PathBuf,
    pub bind_address: IpAddr,
    /// 0: picked at start, nothing to check.
    pub https_listen_port: u16,
    /// The node agent runs: kernel modules, cgroups, root, binaries, kubelet port, forwarding.
    pub agent: bool,
    /// k1s runs its own containerd (no `--container-runtime-endpoint`): containerd, runc and the
    /// CNI plugins must be installed.
    pub own_containerd: bool,
    /// The service proxy runs: `nft` must be installed.
    pub proxy: bool,
    pub kubelet_port: u16,
    pub cni_bin_dir: PathBuf,
    /// Also check that no port of this range is taken (`k1s check --node-port-range`).
    pub node_port_range: Option<(u16, u16)>,
}

/// Free space below which the data dir gets a WARN, and a FAIL.
const WARN_FREE_BYTES: u64 = 5 << 30;
const FAIL_FREE_BYTES: u64 = 256 << 20;
/// The kernel k1s is tested with needs at least 4.15 (nftables sets and cgroup features the
/// kubelet uses); older ones are refused.
const MIN_KERNEL: (u32, u32) = (4, 15);
/// No clock shows a time before this release of k1s was written (2025-01-01): an earlier
/// time means an unset clock, and every certificate would look not yet valid.
const CLOCK_FLOOR_UNIX: i64 = 1_735_689_600;
pub const CNI_PLUGINS: [&str; 4] = ["bridge", "host-local", "loopback", "portmap"];
const MODULES: [(&str, &str); 3] =
    [("br_netfilter", "CONFIG_BRIDGE_NETFILTER"), ("overlay", "CONFIG_OVERLAY_FS"), ("nf_tables", "CONFIG_NF_TABLES")];

/// The machine as preflight sees it.
pub trait Host {
    /// A file's text (`None` when it cannot be read).
    fn read(&self, path: &Path) -> Option<String>;
    /// `/proc/config.gz`, decompressed.
    fn kernel_config(&self) -> Option<String>;
    fn exists(&self, path: &Path) -> bool;
    /// An executable file.
    fn is_executable(&self, path: &Path) -> bool;
    fn path_var(&self) -> Option<OsString>;
    fn euid(&self) -> u32;
    /// Whether something listens on (or holds) this TCP address.
    fn port_in_use(&self, addr: SocketAddr) -> bool;
    /// Whether this process may create files in the (existing) directory.
    fn writable(&self, dir: &Path) -> bool;
    fn free_bytes(&self, dir: &Path) -> Option<u64>;
    fn now_unix(&self) -> i64;
}

/// The real machine.
pub struct System;

impl Host for System {
    fn read(&self, path: &Path) -> Option<String> {
        std::fs::read_to_string(path).ok()
    }
    fn kernel_config(&self) -> Option<String> {
        use std::io::Read as _;
        let f = std::fs::File::open("/proc/config.gz").ok()?;
        let mut s = String::new();
        flate2::read::GzDecoder::new(f).read_to_string(&mut s).ok()?;
        Some(s)
    }
    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }
    fn is_executable(&self, path: &Path) -> bool {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    fn path_var(&self) -> Option<OsString> {
        std::env::var_os("PATH")
    }
    fn euid(&self) -> u32 {
        rustix::process::geteuid().as_raw()
    }
    fn port_in_use(&self, addr: SocketAddr) -> bool {
        match std::net::TcpListener::bind(addr) {
            Ok(_) => false,
            Err(e) => e.kind() == std::io::ErrorKind::AddrInUse,
        }
    }
    fn writable(&self, dir: &Path) -> bool {
        rustix::fs::access(dir, rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK).is_ok()
    }
    fn free_bytes(&self, dir: &Path) -> Option<u64> {
        let s = rustix::fs::statvfs(dir).ok()?;
        Some(s.f_bavail.saturating_mul(s.f_frsize))
    }
    fn now_unix(&self) -> i64 {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
    }
}

fn pass(name: impl Into<String>, detail: impl Into<String>) -> Finding {
    Finding { level: Level::Pass, name: name.into(), detail: detail.into(), fix: None }
}

fn bad(level: Level, name: impl Into<String>, detail: impl Into<String>, fix: impl Into<String>) -> Finding {
    Finding { level, name: name.into(), detail: detail.into(), fix: Some(fix.into()) }
}

/// Runs every check that applies to `opts`.
pub fn run(opts: &Options, host: &dyn Host) -> Report {
    let mut findings = vec![kernel_version(host)];
    if opts.agent {
        findings.push(root(host));
        findings.extend(modules(host));
        findings.extend(cgroups(host));
        findings.push(ip_forward(host));
        if opts.own_containerd {
            findings.push(binary(
                host,
                "containerd",
                "apt-get install containerd (or set --container-runtime-endpoint)",
            ));
            findings.push(binary(host, "runc", "apt-get install runc"));
            findings.extend(cni_plugins(host, &opts.cni_bin_dir));
        }
        if opts.proxy {
            findings.push(binary(host, "nft", "apt-get install nftables (or --disable=proxy)"));
        }
    }
    if opts.https_listen_port != 0 {
        findings.push(port(host, opts.bind_address, opts.https_listen_port, "the API server", "--https-listen-port"));
    }
    if opts.agent && opts.kubelet_port != 0 {
        findings.push(port(host, IpAddr::from([0, 0, 0, 0]), opts.kubelet_port, "the kubelet", "--kubelet-port"));
    }
    if let Some(range) = opts.node_port_range {
        findings.push(node_ports(host, range));
    }
    findings.extend(data_dir(host, &opts.data_dir));
    findings.push(clock(host, &opts.data_dir));
    Report { findings }
}

fn kernel_version(host: &dyn Host) -> Finding {
    let name = "kernel version";
    let Some(release) = host.read(Path::new("/proc/sys/kernel/osrelease")) else {
        return bad(Level::Warn, name, "cannot read /proc/sys/kernel/osrelease", "mount /proc");
    };
    let release = release.trim().to_string();
    let mut nums = release.split(|c: char| !c.is_ascii_digit()).filter_map(|n| n.parse::<u32>().ok());
    match (nums.next(), nums.next()) {
        (Some(major), Some(minor)) if (major, minor) >= MIN_KERNEL => pass(name, release),
        (Some(_), Some(_)) => bad(
            Level::Fail,
            name,
            format!("{release} is older than {}.{}", MIN_KERNEL.0, MIN_KERNEL.1),
            "upgrade the kernel",
        ),
        _ => bad(Level::Warn, name, format!("cannot parse {release:?}"), "check the kernel is 4.15 or later"),
    }
}

fn root(host: &dyn Host) -> Finding {
    match host.euid() {
        0 => pass("root", "running as root"),
        uid => bad(
            Level::Fail,
            "root",
            format!("running as uid {uid}: the node agent needs root (containerd, CNI, cgroups, nftables)"),
            "run as root, or only the control plane with --disable-agent",
        ),
    }
}

/// A module is usable when loaded, built in, or loadable (its `.ko` is installed).
fn modules(host: &dyn Host) -> Vec<Finding> {
    let loaded: BTreeSet<String> = host
        .read(Path::new("/proc/modules"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    let release = host.read(Path::new("/proc/sys/kernel/osrelease")).unwrap_or_default().trim().to_string();
    let mod_dir = Path::new("/lib/modules").join(&release);
    let builtin = host.read(&mod_dir.join("modules.builtin")).unwrap_or_default();
    let dep = host.read(&mod_dir.join("modules.dep")).unwrap_or_default();
    let config = host.kernel_config().unwrap_or_default();
    MODULES
        .iter()
        .map(|(m, option)| {
            let name = format!("kernel module {m}");
            let ko = format!("/{m}.ko");
            let in_list = |list: &str| list.lines().any(|l| l.split(':').next().is_some_and(|p| p.contains(&ko)));
            if loaded.contains(*m) {
                pass(name, "loaded")
            } else if host.exists(&Path::new("/sys/module").join(m)) {
                pass(name, "loaded (or built in)")
            } else if in_list(&builtin) || config.lines().any(|l| l == format!("{option}=y")) {
                pass(name, "built into the kernel")
            } else if in_list(&dep) {
                pass(name, format!("not loaded, loadable (modprobe {m})"))
            } else {
                bad(
                    Level::Fail,
                    name,
                    "neither loaded, built in nor installed",
                    format!("install the kernel's modules (linux-image-...) and run: modprobe {m}; echo {m} >> /etc/modules-load.d/k1s.conf"),
                )
            }
        })
        .collect()
}

fn cgroups(host: &dyn Host) -> Vec<Finding> {
    let fix_v2 = "enable it in the parent's cgroup.subtree_control, or boot with systemd.unified_cgroup_hierarchy=1";
    if let Some(controllers) = host.read(Path::new("/sys/fs/cgroup/cgroup.controllers")) {
        let have: BTreeSet<&str> = controllers.split_whitespace().collect();
        return ["cpu", "memory", "pids"]
            .iter()
            .map(|c| {
                let name = format!("cgroup v2 controller {c}");
                if have.contains(c) {
                    pass(name, "available")
                } else {
                    bad(Level::Fail, name, "missing from /sys/fs/cgroup/cgroup.controllers", fix_v2)
                }
            })
            .collect();
    }
    let Some(table) = host.read(Path::new("/proc/cgroups")) else {
        return vec![bad(
            Level::Fail,
            "cgroups",
            "neither cgroup v2 nor /proc/cgroups found",
            "mount cgroup2 on /sys/fs/cgroup",
        )];
    };
    // v1: `subsys_name hierarchy num_cgroups enabled`; a controller in hierarchy 0 is not mounted.
    let rows: Vec<(String, u32, bool)> = table
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some((f.first()?.to_string(), f.get(1)?.parse().ok()?, f.get(3)? == &"1"))
        })
        .collect();
    ["cpu", "cpuacct", "memory", "pids", "devices", "freezer"]
        .iter()
        .map(|c| {
            let name = format!("cgroup v1 controller {c}");
            match rows.iter().find(|(n, _, _)| n == c) {
                Some((_, h, true)) if *h != 0 || host.exists(&Path::new("/sys/fs/cgroup").join(c)) => {
                    pass(name, "enabled and mounted")
                }
                Some((_, _, true)) => bad(
                    Level::Fail,
                    name,
                    "enabled but not mounted",
                    format!("mount -t cgroup -o {c} cgroup /sys/fs/cgroup/{c}"),
                ),
                Some(_) => bad(Level::Fail, name, "disabled", format!("boot with cgroup_enable={c}")),
                None => bad(Level::Fail, name, "not in /proc/cgroups", "use a kernel with this cgroup controller"),
            }
        })
        .collect()
}

fn ip_forward(host: &dyn Host) -> Finding {
    let name = "IPv4 forwarding";
    match host.read(Path::new("/proc/sys/net/ipv4/ip_forward")).as_deref().map(str::trim) {
        Some("1") => pass(name, "net.ipv4.ip_forward=1"),
        _ => bad(
            Level::Warn,
            name,
            "net.ipv4.ip_forward is off: the CNI bridge plugin turns it on with the first pod",
            "sysctl -w net.ipv4.ip_forward=1 (and in /etc/sysctl.d/) so it stays on",
        ),
    }
}

/// `bin` in `$PATH`.
fn which(host: &dyn Host, bin: &str) -> Option<PathBuf> {
    let path = host.path_var()?;
    std::env::split_paths(&path).map(|d| d.join(bin)).find(|p| host.is_executable(p))
}

fn binary(host: &dyn Host, bin: &str, fix: &str) -> Finding {
    let name = format!("binary {bin}");
    match which(host, bin) {
        Some(p) => pass(name, p.display().to_string()),
        None => bad(Level::Fail, name, format!("{bin} not found in PATH"), fix),
    }
}

fn cni_plugins(host: &dyn Host, dir: &Path) -> Vec<Finding> {
    CNI_PLUGINS
        .iter()
        .map(|p| {
            let path = dir.join(p);
            let name = format!("CNI plugin {p}");
            if host.is_executable(&path) {
                pass(name, path.display().to_string())
            } else {
                bad(
                    Level::Fail,
                    name,
                    format!("{} not found", path.display()),
                    "apt-get install containernetworking-plugins",
                )
            }
        })
        .collect()
}

fn port(host: &dyn Host, ip: IpAddr, port: u16, who: &str, flag: &str) -> Finding {
    let name = format!("port {port}");
    if host.port_in_use(SocketAddr::new(ip, port)) {
        bad(
            Level::Fail,
            name,
            format!("in use, {who} cannot listen on it"),
            format!("stop what listens there (ss -ltnp 'sport = :{port}'), or choose another with {flag}"),
        )
    } else {
        pass(name, format!("free for {who}"))
    }
}

fn node_ports(host: &dyn Host, (lo, hi): (u16, u16)) -> Finding {
    let name = format!("NodePort range {lo}-{hi}");
    let taken: Vec<u16> =
        (lo..=hi).filter(|p| host.port_in_use(SocketAddr::new(IpAddr::from([0, 0, 0, 0]), *p))).collect();
    if taken.is_empty() {
        pass(name, "every port free")
    } else {
        let list: Vec<String> = taken.iter().take(10).map(u16::to_string).collect();
        bad(
            Level::Warn,
            name,
            format!("{} port(s) in use: {}", taken.len(), list.join(", ")),
            "a NodePort Service given one of these ports will not be reachable; stop those listeners",
        )
    }
}

/// The data dir, or its nearest existing parent when it does not exist yet.
fn existing_ancestor(host: &dyn Host, dir: &Path) -> Option<PathBuf> {
    dir.ancestors().find(|p| !p.as_os_str().is_empty() && host.exists(p)).map(Path::to_path_buf)
}

fn data_dir(host: &dyn Host, dir: &Path) -> Vec<Finding> {
    let name = format!("data dir {}", dir.display());
    let Some(existing) = existing_ancestor(host, dir) else {
        return vec![bad(Level::Fail, name, "no parent of it exists", "use an absolute --data-dir")];
    };
    let mut out = Vec::new();
    if host.writable(&existing) {
        out.push(pass(name.clone(), format!("writable ({})", existing.display())));
    } else {
        out.push(bad(
            Level::Fail,
            name.clone(),
            format!("{} is not writable", existing.display()),
            "run as root, or choose a writable --data-dir",
        ));
    }
    let disk = "free disk space";
    match host.free_bytes(&existing) {
        Some(b) if b < FAIL_FREE_BYTES => out.push(bad(
            Level::Fail,
            disk,
            format!("{} MiB free under {}", b >> 20, existing.display()),
            "free some space: the store, images and logs need at least a few GiB",
        )),
        Some(b) if b < WARN_FREE_BYTES => out.push(bad(
            Level::Warn,
            disk,
            format!("{} MiB free under {}", b >> 20, existing.display()),
            "keep at least 5 GiB free for the store, images and logs",
        )),
        Some(b) => out.push(pass(disk, format!("{} GiB free under {}", b >> 30, existing.display()))),
        None => out.push(bad(Level::Warn, disk, format!("cannot stat {}", existing.display()), "check the filesystem")),
    }
    out
}

/// The clock is set (not before this release) and has not gone back before the cluster CA
/// was made.
fn clock(host: &dyn Host, data_dir: &Path) -> Finding {
    let name = "clock";
    let now = host.now_unix();
    if now < CLOCK_FLOOR_UNIX {
        return bad(
            Level::Fail,
            name,
            format!("the time is {now} (Unix), before 2025: every certificate would look not yet valid"),
            "set the clock (timedatectl set-ntp true)",
        );
    }
    let ca = data_dir.join("server/tls/server-ca.crt");
    if let Some(created) = host.read(&ca).as_deref().and_then(not_before) {
        // The CA is made valid from an hour before its creation.
        if now + 3600 < created {
            return bad(
                Level::Fail,
                name,
                format!("the clock is {} s behind the creation of {}", created - now, ca.display()),
                "set the clock (timedatectl set-ntp true)",
            );
        }
    }
    pass(name, format!("{now} (Unix)"))
}

fn not_before(pem: &str) -> Option<i64> {
    k1s_pki::dates(pem).map(|(nb, _)| nb)
}

/// `--node-port-range` as `LOW-HIGH`.
pub fn parse_port_range(s: &str) -> Option<(u16, u16)> {
    let (lo, hi) = s.split_once('-')?;
    let (lo, hi) = (lo.trim().parse().ok()?, hi.trim().parse().ok()?);
    (lo <= hi && lo > 0).then_some((lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[derive(Default)]
    struct Fake {
        files: BTreeMap<PathBuf, String>,
        executables: BTreeSet<PathBuf>,
        used: BTreeSet<u16>,
        uid: u32,
        free: u64,
        read_only: bool,
    }

    impl Host for Fake {
        fn read(&self, path: &Path) -> Option<String> {
            self.files.get(path).cloned()
        }
        fn kernel_config(&self) -> Option<String> {
            None
        }
        fn exists(&self, path: &Path) -> bool {
            path == Path::new("/") || self.files.keys().any(|f| f.starts_with(path))
        }
        fn is_executable(&self, path: &Path) -> bool {
            self.executables.contains(path)
        }
        fn path_var(&self) -> Option<OsString> {
            Some("/usr/sbin:/usr/bin".into())
        }
        fn euid(&self) -> u32 {
            self.uid
        }
        fn port_in_use(&self, addr: SocketAddr) -> bool {
            self.used.contains(&addr.port())
        }
        fn writable(&self, _dir: &Path) -> bool {
            !self.read_only
        }
        fn free_bytes(&self, _dir: &Path) -> Option<u64> {
            Some(self.free)
        }
        fn now_unix(&self) -> i64 {
            1_800_000_000
        }
    }

    fn debian() -> Fake {
        let mut f = Fake { free: 40 << 30, ..Fake::default() };
        for (p, t) in [
            ("/proc/sys/kernel/osrelease", "6.1.0-18-amd64\n"),
            ("/proc/modules", "overlay 151552 0 - Live 0x0\nnf_tables 303104 0 - Live 0x0\n"),
            (
                "/lib/modules/6.1.0-18-amd64/modules.dep",
                "kernel/net/bridge/br_netfilter.ko: kernel/net/bridge/bridge.ko\n",
            ),
            ("/sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n"),
            ("/proc/sys/net/ipv4/ip_forward", "1\n"),
            ("/var/lib/.keep", ""),
        ] {
            f.files.insert(p.into(), t.into());
        }
        for b in ["/usr/bin/containerd", "/usr/sbin/runc", "/usr/sbin/nft"] {
            f.executables.insert(b.into());
        }
        for p in CNI_PLUGINS {
            f.executables.insert(Path::new("/usr/lib/cni").join(p));
        }
        f
    }

    fn opts() -> Options {
        Options {
            data_dir: "/var/lib/k1s".into(),
            bind_address: IpAddr::from([0, 0, 0, 0]),
            https_listen_port: 6443,
            agent: true,
            own_containerd: true,
            proxy: true,
            kubelet_port: 10250,
            cni_bin_dir: "/usr/lib/cni".into(),
            node_port_range: None,
        }
    }

    #[test]
    fn a_prepared_debian_host_passes_with_a_loadable_module() {
        let r = run(&opts(), &debian());
        assert!(r.passed(), "{}", r.render());
        assert!(r.render().contains("PASS kernel module br_netfilter: not loaded, loadable (modprobe br_netfilter)"));
        assert!(r.findings.iter().all(|f| f.level == Level::Pass), "{}", r.render());
    }

    #[test]
    fn a_missing_runc_and_cni_plugin_fail_with_their_fix() {
        let mut host = debian();
        host.executables.remove(Path::new("/usr/sbin/runc"));
        host.executables.remove(Path::new("/usr/lib/cni/portmap"));
        let err = run(&opts(), &host).into_result().expect_err("blocks a start");
        assert_eq!(
            err.lines,
            vec![
                "FAIL binary runc: runc not found in PATH (fix: apt-get install runc)".to_string(),
                "FAIL CNI plugin portmap: /usr/lib/cni/portmap not found (fix: apt-get install containernetworking-plugins)"
                    .to_string(),
            ]
        );
        let mut external = opts();
        external.own_containerd = false;
        assert!(run(&external, &host).passed(), "an existing containerd brings its own runtime and CNI");
    }

    #[test]
    fn the_control_plane_alone_needs_no_root_modules_or_binaries() {
        let mut host = Fake { free: 40 << 30, uid: 1000, ..Fake::default() };
        host.files.insert("/proc/sys/kernel/osrelease".into(), "6.1.0".into());
        host.files.insert("/var/lib/.keep".into(), String::new());
        let o = Options { agent: false, ..opts() };
        let r = run(&o, &host);
        assert!(r.passed(), "{}", r.render());
        assert!(!run(&opts(), &host).passed(), "the agent needs all of them");
    }

    #[test]
    fn taken_ports_low_disk_old_kernel_and_v1_cgroups_are_reported() {
        let mut host = debian();
        host.used.extend([6443, 30080]);
        host.free = 1 << 30;
        host.files.insert("/proc/sys/kernel/osrelease".into(), "4.9.0-3".into());
        host.files.insert("/proc/modules".into(), "overlay 1 0\nnf_tables 1 0\nbr_netfilter 1 0\n".into());
        host.files.remove(Path::new("/sys/fs/cgroup/cgroup.controllers"));
        host.files.insert(
            "/proc/cgroups".into(),
            "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t1\t1\t1\ncpuacct\t2\t1\t1\nmemory\t4\t1\t0\npids\t8\t1\t1\ndevices\t5\t1\t1\nfreezer\t6\t1\t1\n".into(),
        );
        let o = Options { node_port_range: Some((30000, 32767)), ..opts() };
        let r = run(&o, &host);
        let text = r.render();
        let failed: Vec<&str> = r.failures().map(|f| f.name.as_str()).collect();
        assert_eq!(failed, ["kernel version", "cgroup v1 controller memory", "port 6443"], "{text}");
        assert!(text.contains("WARN NodePort range 30000-32767: 1 port(s) in use: 30080"), "{text}");
        assert!(text.contains("WARN free disk space: 1024 MiB free under /var/lib"), "{text}");
        assert!(text.contains("(fix: boot with cgroup_enable=memory)"), "{text}");
    }

    #[test]
    fn node_port_ranges_parse() {
        assert_eq!(parse_port_range("30000-32767"), Some((30000, 32767)));
        assert_eq!(parse_port_range("32767-30000"), None);
        assert_eq!(parse_port_range("30000"), None);
    }
}
