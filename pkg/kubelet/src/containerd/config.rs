//! The containerd 1.6 configuration (`version = 2`) k1s generates: where containerd keeps its
//! state, the CRI plugin's sandbox image, CNI directories, registry hosts directory, stream
//! server and runc options (design.md §8).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::host::HostFacts;
use crate::registries::RegistryAuth;

/// Where Debian's `containernetworking-plugins` installs the CNI plugins.
pub const DEFAULT_CNI_BIN_DIR: &str = "/usr/lib/cni";
/// The sandbox (pause) image upstream Kubernetes v1.35 uses; override with `--pause-image`.
pub const DEFAULT_SANDBOX_IMAGE: &str = "registry.k8s.io/pause:3.10";
/// containerd's default snapshotter.
pub const DEFAULT_SNAPSHOTTER: &str = "overlayfs";
/// Longest path a unix socket address can hold (`sun_path` is 108 bytes with the NUL).
const MAX_SOCKET_PATH: usize = 107;

/// Why a containerd configuration is unusable or could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("containerd config: {field} must be an absolute path, got {path}")]
    RelativePath { field: &'static str, path: PathBuf },
    #[error(
        "containerd config: socket path {path} is {len} bytes, more than a unix socket allows \
         ({MAX_SOCKET_PATH}); use a shorter run directory"
    )]
    SocketPathTooLong { path: PathBuf, len: usize },
    #[error("containerd config: {field} is empty")]
    Empty { field: &'static str },
    #[error("writing containerd config {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Everything the generated containerd config depends on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerdConfig {
    /// The k1s data directory (`--data-dir`); the config file and log live under it.
    pub data_dir: PathBuf,
    /// containerd's state directory (`state`): sockets, task bundles. Best on tmpfs.
    pub state_dir: PathBuf,
    /// containerd's root directory (`root`): content store, snapshots, metadata.
    pub root_dir: PathBuf,
    /// The gRPC socket (`grpc.address`), also the CRI endpoint.
    pub socket: PathBuf,
    /// Directory holding the CNI plugin binaries.
    pub cni_bin_dir: PathBuf,
    /// Directory holding the CNI network configuration (k1s writes one conflist there).
    pub cni_conf_dir: PathBuf,
    /// The pause image every pod sandbox runs.
    pub sandbox_image: String,
    /// The `certs.d`-style directory of per-registry `hosts.toml` files.
    pub registry_config_dir: PathBuf,
    /// Address of the CRI streaming server (exec/attach/port-forward).
    pub stream_server_address: String,
    /// Port of the CRI streaming server; `"0"` picks a free one.
    pub stream_server_port: String,
    /// Set when this process lacks CAP_SYS_RESOURCE (see [`HostFacts`]).
    pub restrict_oom_score_adj: bool,
    /// runc's `SystemdCgroup` option: only where systemd is PID 1 and the kubelet uses it.
    pub systemd_cgroup: bool,
    /// The snapshotter the CRI plugin unpacks images with.
    pub snapshotter: String,
    /// Registry credentials by registry host (from `registries.yaml`), so containerd uses them
    /// for every pull it makes itself (the sandbox image) and for mirrors.
    pub registry_auths: BTreeMap<String, RegistryAuth>,
}

impl ContainerdConfig {
    /// The k1s layout (that of k3s): persistent data under `<data_dir>/agent`, state and socket
    /// under `<run_dir>/containerd` (`/run/k1s` in production), CNI plugins from
    /// [`DEFAULT_CNI_BIN_DIR`], and the host-dependent settings from `host`.
    pub fn new(data_dir: &Path, run_dir: &Path, sandbox_image: impl Into<String>, host: HostFacts) -> Self {
        let agent = data_dir.join("agent");
        let state_dir = run_dir.join("containerd");
        Self {
            data_dir: data_dir.to_path_buf(),
            socket: state_dir.join("containerd.sock"),
            state_dir,
            root_dir: agent.join("containerd"),
            cni_bin_dir: PathBuf::from(DEFAULT_CNI_BIN_DIR),
            cni_conf_dir: agent.join("etc/cni/net.d"),
            sandbox_image: sandbox_image.into(),
            registry_config_dir: agent.join("etc/containerd/certs.d"),
            stream_server_address: "127.0.0.1".to_string(),
            stream_server_port: "0".to_string(),
            restrict_oom_score_adj: !host.has_cap_sys_resource,
            systemd_cgroup: false,
            snapshotter: DEFAULT_SNAPSHOTTER.to_string(),
            registry_auths: BTreeMap::new(),
        }
    }

    /// Where k1s writes the config: `<data_dir>/agent/etc/containerd/config.toml`.
    pub fn config_file(&self) -> PathBuf {
        self.data_dir.join("agent/etc/containerd/config.toml")
    }

    /// Where containerd's output goes: `<data_dir>/agent/containerd/containerd.log`.
    pub fn log_file(&self) -> PathBuf {
        self.data_dir.join("agent/containerd/containerd.log")
    }

    /// Checks what containerd would otherwise reject with a less helpful message.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (field, path) in [
            ("data_dir", &self.data_dir),
            ("state_dir", &self.state_dir),
            ("root_dir", &self.root_dir),
            ("socket", &self.socket),
            ("cni_bin_dir", &self.cni_bin_dir),
            ("cni_conf_dir", &self.cni_conf_dir),
            ("registry_config_dir", &self.registry_config_dir),
        ] {
            if !path.is_absolute() {
                return Err(ConfigError::RelativePath { field, path: path.clone() });
            }
        }
        let len = self.socket.as_os_str().len();
        if len > MAX_SOCKET_PATH {
            return Err(ConfigError::SocketPathTooLong { path: self.socket.clone(), len });
        }
        for (field, value) in [
            ("sandbox_image", &self.sandbox_image),
            ("snapshotter", &self.snapshotter),
            ("stream_server_address", &self.stream_server_address),
            ("stream_server_port", &self.stream_server_port),
        ] {
            if value.is_empty() {
                return Err(ConfigError::Empty { field });
            }
        }
        Ok(())
    }

    /// Validates, renders and writes the config to [`Self::config_file`] (mode 0600: it may
    /// hold registry credentials), creating the directories containerd and CNI expect.
    pub fn write(&self) -> Result<PathBuf, ConfigError> {
        self.validate()?;
        let path = self.config_file();
        for dir in [&self.root_dir, &self.state_dir, &self.cni_conf_dir, &self.registry_config_dir] {
            std::fs::create_dir_all(dir).map_err(|source| ConfigError::Write { path: dir.clone(), source })?;
        }
        super::atomic_file::write_atomic(&path, render(self).as_bytes(), 0o600)
            .map_err(|source| ConfigError::Write { path: path.clone(), source })?;
        Ok(path)
    }
}

/// Renders the containerd 1.6 `config.toml` (`version = 2`).
pub fn render(cfg: &ContainerdConfig) -> String {
    const CRI: &str = "plugins.\"io.containerd.grpc.v1.cri\"";
    let mut out = String::new();
    // Writing into a String cannot fail.
    let mut line = |s: String| {
        out.push_str(&s);
        out.push('\n');
    };
    line("# Generated by k1s: rewritten on every start, do not edit.".into());
    line("version = 2".into());
    line(format!("root = {}", quote_path(&cfg.root_dir)));
    line(format!("state = {}", quote_path(&cfg.state_dir)));
    line(String::new());
    line("[grpc]".into());
    line(format!("  address = {}", quote_path(&cfg.socket)));
    line(String::new());
    // The opt plugin installs into /opt/containerd by default: keep it under the root instead.
    line("[plugins.\"io.containerd.internal.v1.opt\"]".into());
    line(format!("  path = {}", quote_path(&cfg.root_dir.join("opt"))));
    line(String::new());
    line(format!("[{CRI}]"));
    line(format!("  sandbox_image = {}", quote(&cfg.sandbox_image)));
    line(format!("  stream_server_address = {}", quote(&cfg.stream_server_address)));
    line(format!("  stream_server_port = {}", quote(&cfg.stream_server_port)));
    line("  enable_unprivileged_ports = true".into());
    line("  enable_unprivileged_icmp = true".into());
    line(format!("  restrict_oom_score_adj = {}", cfg.restrict_oom_score_adj));
    line(String::new());
    line(format!("[{CRI}.containerd]"));
    line(format!("  snapshotter = {}", quote(&cfg.snapshotter)));
    line("  default_runtime_name = \"runc\"".into());
    line(String::new());
    line(format!("[{CRI}.containerd.runtimes.runc]"));
    line("  runtime_type = \"io.containerd.runc.v2\"".into());
    line(String::new());
    line(format!("[{CRI}.containerd.runtimes.runc.options]"));
    line(format!("  SystemdCgroup = {}", cfg.systemd_cgroup));
    line(String::new());
    line(format!("[{CRI}.cni]"));
    line(format!("  bin_dir = {}", quote_path(&cfg.cni_bin_dir)));
    line(format!("  conf_dir = {}", quote_path(&cfg.cni_conf_dir)));
    line("  max_conf_num = 1".into());
    line(String::new());
    line(format!("[{CRI}.registry]"));
    line(format!("  config_path = {}", quote_path(&cfg.registry_config_dir)));
    for (host, auth) in &cfg.registry_auths {
        line(String::new());
        line(format!("[{CRI}.registry.configs.{}.auth]", quote(host)));
        for (key, value) in [
            ("username", &auth.username),
            ("password", &auth.password),
            ("auth", &auth.auth),
            ("identitytoken", &auth.identity_token),
        ] {
            if let Some(value) = value.as_deref().filter(|v| !v.is_empty()) {
                line(format!("  {key} = {}", quote(value)));
            }
        }
    }
    out
}

fn quote_path(path: &Path) -> String {
    quote(&path.to_string_lossy())
}

/// A TOML basic string.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO_SYS_RESOURCE: HostFacts = HostFacts { has_cap_sys_resource: false, systemd_is_init: false };

    fn sample() -> ContainerdConfig {
        ContainerdConfig::new(
            Path::new("/var/lib/k1s"),
            Path::new("/run/k1s"),
            "127.0.0.1:5000/pause:3.10",
            NO_SYS_RESOURCE,
        )
    }

    #[test]
    fn rendered_config_matches_golden_file() {
        let golden = include_str!("testdata/config.toml");
        assert_eq!(render(&sample()), golden);
    }

    #[test]
    fn layout_follows_data_and_run_dirs() {
        let cfg = sample();
        assert_eq!(cfg.socket, Path::new("/run/k1s/containerd/containerd.sock"));
        assert_eq!(cfg.root_dir, Path::new("/var/lib/k1s/agent/containerd"));
        assert_eq!(cfg.config_file(), Path::new("/var/lib/k1s/agent/etc/containerd/config.toml"));
        assert_eq!(cfg.log_file(), Path::new("/var/lib/k1s/agent/containerd/containerd.log"));
    }

    #[test]
    fn oom_score_adj_is_restricted_only_without_cap_sys_resource() {
        assert!(sample().restrict_oom_score_adj);
        let full = ContainerdConfig::new(
            Path::new("/d"),
            Path::new("/r"),
            DEFAULT_SANDBOX_IMAGE,
            HostFacts { has_cap_sys_resource: true, systemd_is_init: true },
        );
        assert!(!full.restrict_oom_score_adj);
        assert!(render(&full).contains("restrict_oom_score_adj = false"));
    }

    #[test]
    fn registry_auth_is_rendered_per_host_without_empty_fields() {
        let mut cfg = sample();
        cfg.registry_auths.insert(
            "registry.example.com".into(),
            RegistryAuth {
                username: Some("user".into()),
                password: Some("p\"w".into()),
                auth: None,
                identity_token: Some(String::new()),
            },
        );
        let rendered = render(&cfg);
        let expected = "\n[plugins.\"io.containerd.grpc.v1.cri\".registry.configs.\"registry.example.com\".auth]\n  username = \"user\"\n  password = \"p\\\"w\"\n";
        assert!(rendered.ends_with(expected), "{rendered}");
    }

    #[test]
    fn strings_are_toml_escaped() {
        assert_eq!(quote("a\"b\\c\nd\u{1}"), "\"a\\\"b\\\\c\\nd\\u0001\"");
    }

    #[test]
    fn long_socket_paths_are_rejected() {
        let mut cfg = sample();
        cfg.socket = PathBuf::from(format!("/{}/containerd.sock", "x".repeat(100)));
        assert!(matches!(cfg.validate(), Err(ConfigError::SocketPathTooLong { .. })));
    }

    #[test]
    fn relative_paths_are_rejected() {
        let mut cfg = sample();
        cfg.cni_conf_dir = PathBuf::from("net.d");
        assert!(matches!(cfg.validate(), Err(ConfigError::RelativePath { field: "cni_conf_dir", .. })));
    }

    #[test]
    fn write_creates_directories_and_a_private_file() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg = ContainerdConfig::new(&dir.path().join("data"), &dir.path().join("run"), "pause:1", NO_SYS_RESOURCE);
        let path = cfg.write().expect("write config");
        assert_eq!(std::fs::read_to_string(&path).expect("read config"), render(&cfg));
        let mode = std::fs::metadata(&path).expect("stat").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(cfg.cni_conf_dir.is_dir());
        assert!(cfg.registry_config_dir.is_dir());
        assert!(cfg.state_dir.is_dir());
    }
}
