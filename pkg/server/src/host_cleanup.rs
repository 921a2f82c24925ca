//! `k1s killall` and `k1s uninstall`: take k1s off the host, touching only what k1s created.
//!
//! killall: the server process of one data dir, its supervised containerd, every pod of that
//! node (through CRI, so the CNI plugins release addresses, veths and network namespaces; then
//! whatever survives in the pods' cgroups), the mounts under the data and run dirs. The data
//! dir is kept: a later start runs the pods again from the API.
//!
//! uninstall: killall, then the nftables table, the Service CIDR routing rules, `k1s-dns0`,
//! `cni0`, the CNI state of the `k1s` network, the pods' log folders, the data and run dirs, the
//! config dir (unless kept) and, for the host's own node (`/etc/k1s`), the unit and files a
//! tarball `install.sh` recorded in its manifest.
//!
//! Processes are found by what they hold, never by name alone: the server by the store it has
//! open under the data dir, containerd by its config file under the data dir, shims by their
//! containerd socket under the run dir, pods by their cgroup `k1s/pod<uid>` for the uids of this
//! data dir.

use k1s_cri::v1::{ListPodSandboxRequest, RemovePodSandboxRequest, StopPodSandboxRequest};
use k1s_cri::RuntimeService as _;
use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The pods' cgroup parent (the kubelet's `cgroup_root`).
const CGROUP_ROOT: &str = "/k1s";
/// Where a tarball's `install.sh` lists the files it installed (one absolute path a line).
pub const INSTALL_MANIFEST: &str = "/usr/local/lib/k1s/installed-files";
/// The first line `install.sh` writes into the unit it installs.
pub const INSTALLED_UNIT_MARKER: &str = "# Installed by k1s install.sh";
/// The unit `install.sh` installs (a package's unit is the package manager's to remove).
const INSTALLED_UNIT: &str = "/etc/systemd/system/k1s.service";
/// The configuration folder of the host's own node (the one `install.sh` and the package set up).
pub const DEFAULT_CONFIG_DIR: &str = "/etc/k1s";
/// host-local IPAM state and the CNI result cache of the `k1s` network.
const CNI_STATE: &str = "/var/lib/cni";

/// What to clean: the same folders `k1s server` was started with.
#[derive(Clone, Debug)]
pub struct HostPaths {
    pub data_dir: PathBuf,
    pub run_dir: PathBuf,
    pub pod_log_dir: PathBuf,
    pub config_dir: PathBuf,
}

/// One cleanup step and how it went; every step is attempted.
#[derive(Debug)]
pub struct Step {
    pub what: String,
    pub result: Result<(), String>,
}

impl Step {
    fn new(what: impl Into<String>, result: Result<(), String>) -> Step {
        Step { what: what.into(), result }
    }
}

/// A process as `/proc` shows it.
#[derive(Clone, Debug)]
struct Proc {
    pid: u32,
    argv: Vec<String>,
}

impl Proc {
    fn name(&self) -> &str {
        self.argv.first().and_then(|a| Path::new(a).file_name()).and_then(|n| n.to_str()).unwrap_or("")
    }
}

fn processes() -> Vec<Proc> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let me = std::process::id();
    let mut out = Vec::new();
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        if pid == me {
            continue;
        }
        let Ok(raw) = std::fs::read(e.path().join("cmdline")) else { continue };
        let argv: Vec<String> =
            raw.split(|b| *b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
        if !argv.is_empty() {
            out.push(Proc { pid, argv });
        }
    }
    out
}

fn alive(pid: u32) -> bool {
    // A zombie has no cmdline: it is dead for our purposes.
    std::fs::read(format!("/proc/{pid}/cmdline")).map(|c| !c.is_empty()).unwrap_or(false)
}

fn signal(pid: u32, sig: rustix::process::Signal) {
    let Some(pid) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) else { return };
    let _ = rustix::process::kill_process(pid, sig);
}

/// SIGTERM, up to `grace`, then SIGKILL; waits until every one is gone (at most 5 s more).
async fn stop_processes(pids: &[u32], grace: Duration) {
    for &p in pids {
        signal(p, rustix::process::Signal::TERM);
    }
    let deadline = Instant::now() + grace;
    while pids.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    kill_now(pids).await;
}

async fn kill_now(pids: &[u32]) {
    for &p in pids.iter().filter(|&&p| alive(p)) {
        signal(p, rustix::process::Signal::KILL);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while pids.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `path` made absolute and free of symlinks when it exists (so prefixes compare).
fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

fn under(path: &Path, dir: &Path) -> bool {
    path.starts_with(dir)
}

/// `k1s server` processes with a file open under `data_dir` (the store's LOCK and WAL).
fn server_pids(data_dir: &Path) -> Vec<u32> {
    let store = data_dir.join("server");
    processes()
        .into_iter()
        .filter(|p| p.name().starts_with("k1s") && p.argv.get(1).map(String::as_str) == Some("server"))
        .filter(|p| {
            std::fs::read_dir(format!("/proc/{}/fd", p.pid))
                .map(|fds| fds.flatten().any(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| under(&t, &store))))
                .unwrap_or(false)
        })
        .map(|p| p.pid)
        .collect()
}

fn containerd_config(data_dir: &Path) -> PathBuf {
    data_dir.join("agent/etc/containerd/config.toml")
}

fn containerd_socket(run_dir: &Path) -> PathBuf {
    run_dir.join("containerd/containerd.sock")
}

/// The containerd k1s started for this data dir (by its config file).
fn containerd_pids(data_dir: &Path) -> Vec<u32> {
    let config = containerd_config(data_dir).to_string_lossy().into_owned();
    processes().into_iter().filter(|p| p.name() == "containerd" && p.argv.contains(&config)).map(|p| p.pid).collect()
}

/// The shims of this node's containerd (by the socket they report to).
fn shim_pids(run_dir: &Path) -> Vec<u32> {
    let socket = containerd_socket(run_dir).to_string_lossy().into_owned();
    processes()
        .into_iter()
        .filter(|p| p.name().starts_with("containerd-shim") && p.argv.contains(&socket))
        .map(|p| p.pid)
        .collect()
}

/// The pod uids this data dir's kubelet knows (its pod folders).
fn pod_uids(data_dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(data_dir.join("agent/kubelet/pods")) else { return Vec::new() };
    entries.flatten().filter_map(|e| e.file_name().to_str().map(str::to_string)).collect()
}

/// Every process in the pods' cgroups (all hierarchies, children included).
fn pod_processes(uids: &[String]) -> Vec<u32> {
    let mut pids = BTreeSet::new();
    for uid in uids {
        let cgroup = k1s_kubelet::pods::cgroups::pod_cgroup(CGROUP_ROOT, uid);
        for dir in k1s_kubelet::pods::cgroups::hierarchy_dirs(Path::new("/sys/fs/cgroup"), &cgroup) {
            collect_cgroup_procs(&dir, &mut pids);
        }
    }
    pids.into_iter().collect()
}

fn collect_cgroup_procs(dir: &Path, pids: &mut BTreeSet<u32>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        if e.path().is_dir() {
            collect_cgroup_procs(&e.path(), pids);
        }
    }
    let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    pids.extend(procs.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
}

/// The network namespaces (nsfs inode numbers) `pids` live in.
fn net_namespaces(pids: &[u32]) -> BTreeSet<u64> {
    pids.iter().filter_map(|p| std::fs::metadata(format!("/proc/{p}/ns/net")).ok()).map(|m| m.ino()).collect()
}

/// Mount points under any of `dirs`, deepest first.
fn mounts_under(dirs: &[PathBuf]) -> Vec<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut points: Vec<PathBuf> = k1s_kubelet::containerd::parse_mountinfo(&info)
        .into_iter()
        .map(|m| m.mount_point)
        .filter(|p| dirs.iter().any(|d| under(p, d)))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    points.dedup();
    points
}

/// Detaches every mount under `dirs` (stacked mounts included).
fn unmount_under(dirs: &[PathBuf]) -> Result<(), String> {
    for _ in 0..8 {
        let points = mounts_under(dirs);
        if points.is_empty() {
            return Ok(());
        }
        for p in points {
            if let Err(e) = rustix::mount::unmount(&p, rustix::mount::UnmountFlags::DETACH) {
                tracing::debug!(path = %p.display(), error = %e, "unmount");
            }
        }
    }
    let left = mounts_under(dirs);
    if left.is_empty() {
        Ok(())
    } else {
        Err(format!("still mounted: {left:?}"))
    }
}

/// Stops and removes every sandbox of this node's containerd, starting it for the purpose if
/// shims outlived it (the server stops it on exit; the shims and pods keep running).
async fn remove_sandboxes(paths: &HostPaths) -> Result<usize, String> {
    let socket = containerd_socket(&paths.run_dir);
    let config = containerd_config(&paths.data_dir);
    let mut started: Option<tokio::process::Child> = None;
    if containerd_pids(&paths.data_dir).is_empty() {
        if !config.exists() {
            return Err(format!("shims are running but {} is gone", config.display()));
        }
        let child = tokio::process::Command::new("containerd")
            .arg("--config")
            .arg(&config)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("starting containerd to stop the pods: {e}"))?;
        started = Some(child);
    }
    let endpoint = format!("unix://{}", socket.display());
    let deadline = Instant::now() + Duration::from_secs(20);
    let runtime = loop {
        if socket.exists() {
            if let Ok(rt) = k1s_cri::RemoteRuntime::connect(&endpoint).await {
                if rt.list_pod_sandbox(ListPodSandboxRequest::default()).await.is_ok() {
                    break rt;
                }
            }
        }
        if Instant::now() > deadline {
            return Err(format!("containerd at {endpoint} did not answer"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let sandboxes = runtime
        .list_pod_sandbox(ListPodSandboxRequest::default())
        .await
        .map_err(|e| format!("listing sandboxes: {e}"))?
        .items;
    let mut errors = Vec::new();
    for sb in &sandboxes {
        let id = sb.id.clone();
        if let Err(e) = runtime.stop_pod_sandbox(StopPodSandboxRequest { pod_sandbox_id: id.clone() }).await {
            errors.push(format!("stopping sandbox {id}: {e}"));
        }
        if let Err(e) = runtime.remove_pod_sandbox(RemovePodSandboxRequest { pod_sandbox_id: id.clone() }).await {
            errors.push(format!("removing sandbox {id}: {e}"));
        }
    }
    drop(runtime);
    let pids: Vec<u32> = containerd_pids(&paths.data_dir);
    stop_processes(&pids, Duration::from_secs(10)).await;
    if let Some(mut c) = started {
        let _ = c.wait().await;
    }
    if errors.is_empty() {
        Ok(sandboxes.len())
    } else {
        Err(errors.join("; "))
    }
}

/// Removes the network namespace files in `/run/netns` whose namespace is one of `inodes`.
fn remove_netns(inodes: &BTreeSet<u64>) -> Result<usize, String> {
    let Ok(entries) = std::fs::read_dir("/run/netns") else { return Ok(0) };
    let mut removed = 0;
    for e in entries.flatten() {
        let path = e.path();
        let Ok(meta) = std::fs::metadata(&path) else { continue };
        if !inodes.contains(&meta.ino()) {
            continue;
        }
        let _ = rustix::mount::unmount(&path, rustix::mount::UnmountFlags::DETACH);
        std::fs::remove_file(&path).map_err(|err| format!("removing {}: {err}", path.display()))?;
        removed += 1;
    }
    Ok(removed)
}

/// Whether systemd manages this host (PID 1), as `sd_booted()` decides.
fn systemd_booted() -> bool {
    Path::new("/run/systemd/system").is_dir()
}

fn systemctl(args: &[&str]) -> Result<(), String> {
    let out = std::process::Command::new("systemctl").args(args).output().map_err(|e| format!("systemctl: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("systemctl {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

/// Stops the server of `paths.data_dir`, its containerd and every pod; unmounts what is
/// mounted under the data and run dirs. Keeps the data dir.
pub async fn killall(paths: &HostPaths) -> Vec<Step> {
    let paths = &HostPaths {
        data_dir: canonical(&paths.data_dir),
        run_dir: canonical(&paths.run_dir),
        pod_log_dir: canonical(&paths.pod_log_dir),
        config_dir: paths.config_dir.clone(),
    };
    let mut steps = Vec::new();
    // Remember the pods' namespaces while their processes still hold them.
    let uids = pod_uids(&paths.data_dir);
    let namespaces = net_namespaces(&pod_processes(&uids));

    if systemd_booted() && systemctl(&["is-active", "--quiet", "k1s.service"]).is_ok() {
        steps.push(Step::new("stopped k1s.service", systemctl(&["stop", "k1s.service"])));
    }
    let servers = server_pids(&paths.data_dir);
    stop_processes(&servers, Duration::from_secs(20)).await;
    steps.push(Step::new(format!("stopped the k1s server ({} process(es))", servers.len()), Ok(())));

    if !shim_pids(&paths.run_dir).is_empty() || !containerd_pids(&paths.data_dir).is_empty() {
        let r = remove_sandboxes(paths).await;
        let what = match &r {
            Ok(n) => format!("stopped and removed {n} pod sandbox(es) through CRI"),
            Err(_) => "stopped the pod sandboxes through CRI".to_string(),
        };
        steps.push(Step::new(what, r.map(|_| ())));
    }
    let containerd = containerd_pids(&paths.data_dir);
    stop_processes(&containerd, Duration::from_secs(10)).await;

    // Whatever CRI could not stop: shims first (they restart nothing), then the pods' processes.
    let shims = shim_pids(&paths.run_dir);
    kill_now(&shims).await;
    let leftovers = pod_processes(&uids);
    kill_now(&leftovers).await;
    for uid in &uids {
        k1s_kubelet::pods::cgroups::remove(
            Path::new("/sys/fs/cgroup"),
            &k1s_kubelet::pods::cgroups::pod_cgroup(CGROUP_ROOT, uid),
        );
    }
    steps.push(Step::new(
        format!(
            "killed {} leftover shim(s) and {} pod process(es); removed the pod cgroups",
            shims.len(),
            leftovers.len()
        ),
        Ok(()),
    ));
    steps.push(Step::new("removed the pods' network namespaces", remove_netns(&namespaces).map(|_| ())));
    steps.push(Step::new(
        format!("unmounted everything under {} and {}", paths.data_dir.display(), paths.run_dir.display()),
        unmount_under(&[paths.data_dir.clone(), paths.run_dir.clone()]),
    ));
    steps
}

fn remove_path(path: &Path) -> Result<(), String> {
    let r = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => Err(e),
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
    };
    r.map_err(|e| format!("removing {}: {e}", path.display()))
}

/// The CNI state of the `k1s` network: host-local's address leases and the result cache.
fn remove_cni_state() -> Result<(), String> {
    let root = Path::new(CNI_STATE);
    let network = k1s_kubelet::cni::NETWORK_NAME;
    remove_path(&root.join("networks").join(network))?;
    if let Ok(entries) = std::fs::read_dir(root.join("results")) {
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with(&format!("{network}-")) {
                remove_path(&e.path())?;
            }
        }
    }
    Ok(())
}

/// `/var/log/pods/<namespace>_<name>_<uid>` of this node's pods.
fn remove_pod_logs(log_dir: &Path, uids: &[String]) -> Result<usize, String> {
    let Ok(entries) = std::fs::read_dir(log_dir) else { return Ok(0) };
    let mut n = 0;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if uids.iter().any(|u| name.ends_with(&format!("_{u}"))) {
            remove_path(&e.path())?;
            n += 1;
        }
    }
    Ok(n)
}

/// The unit and files a tarball's `install.sh` installed (its manifest), never a package's.
fn remove_installed_files() -> Vec<Step> {
    let mut steps = Vec::new();
    let unit = Path::new(INSTALLED_UNIT);
    let ours = std::fs::read_to_string(unit).is_ok_and(|t| t.starts_with(INSTALLED_UNIT_MARKER));
    if ours {
        if systemd_booted() {
            let _ = systemctl(&["disable", "k1s.service"]);
        }
        steps.push(Step::new(format!("removed {}", unit.display()), remove_path(unit)));
        if systemd_booted() {
            steps.push(Step::new("systemctl daemon-reload", systemctl(&["daemon-reload"])));
        }
    }
    if let Ok(list) = std::fs::read_to_string(INSTALL_MANIFEST) {
        let files: Vec<&str> = list.lines().map(str::trim).filter(|l| l.starts_with('/')).collect();
        let r = files.iter().try_for_each(|f| remove_path(Path::new(f)));
        steps.push(Step::new(format!("removed the {} files install.sh installed", files.len()), r));
        let manifest = Path::new(INSTALL_MANIFEST);
        steps.push(Step::new(format!("removed {}", manifest.display()), remove_path(manifest)));
        if let Some(dir) = manifest.parent() {
            let _ = std::fs::remove_dir(dir);
        }
    }
    steps
}

/// killall, then removes what k1s created on the host and nothing else.
pub async fn uninstall(paths: &HostPaths, keep_config: bool) -> Vec<Step> {
    let uids = pod_uids(&canonical(&paths.data_dir));
    let mut steps = killall(paths).await;
    for (what, r) in crate::uninstall_networking().await {
        steps.push(Step::new(format!("removed {what}"), r));
    }
    let bridge = async {
        let netlink = k1s_dns::iface::RtNetlink::connect().map_err(|e| e.to_string())?;
        k1s_dns::iface::remove_interface(&netlink, k1s_kubelet::cni::DEFAULT_BRIDGE).await.map_err(|e| e.to_string())
    };
    steps.push(Step::new(format!("removed the {} bridge", k1s_kubelet::cni::DEFAULT_BRIDGE), bridge.await.map(|_| ())));
    steps.push(Step::new("removed the CNI state of the k1s network", remove_cni_state()));
    // The pods' parent cgroup, once no node's pod is left in it (rmdir fails on a non-empty one).
    for dir in k1s_kubelet::pods::cgroups::hierarchy_dirs(Path::new("/sys/fs/cgroup"), CGROUP_ROOT) {
        let _ = std::fs::remove_dir(dir);
    }
    steps.push(Step::new(
        format!("removed the pods' logs in {}", paths.pod_log_dir.display()),
        remove_pod_logs(&paths.pod_log_dir, &uids).map(|_| ()),
    ));
    steps.push(Step::new(format!("removed {}", paths.data_dir.display()), remove_path(&paths.data_dir)));
    steps.push(Step::new(format!("removed {}", paths.run_dir.display()), remove_path(&paths.run_dir)));
    if !keep_config {
        steps.push(Step::new(format!("removed {}", paths.config_dir.display()), remove_path(&paths.config_dir)));
    }
    // The unit and files of a tarball install belong to the node configured in /etc/k1s.
    if paths.config_dir == Path::new(DEFAULT_CONFIG_DIR) {
        steps.extend(remove_installed_files());
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_logs_of_other_pods_are_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        for name in ["default_web_u1", "default_db_u2", "kube-system_x_u3"] {
            std::fs::create_dir(dir.path().join(name)).expect("mkdir");
        }
        let n = remove_pod_logs(dir.path(), &["u1".into(), "u3".into()]).expect("remove");
        assert_eq!(n, 2);
        let left: Vec<_> = std::fs::read_dir(dir.path()).expect("read").flatten().map(|e| e.file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from("default_db_u2")]);
    }

    #[test]
    fn nothing_outside_the_given_dirs_is_unmounted() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(mounts_under(&[dir.path().to_path_buf()]).is_empty());
        assert!(mounts_under(&[PathBuf::from("/")]).iter().any(|p| p == Path::new("/")));
    }
}
