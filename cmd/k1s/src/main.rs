//! `k1s`: a single-node Kubernetes distribution. This binary only parses the command line and
//! config file into `k1s_server::Config` and runs it.

mod certificate;
mod check;
mod config_file;
mod images;

use anyhow::{bail, Context, Result};
use clap::{Args, CommandFactory as _, Parser, Subcommand};
use std::io::IsTerminal;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

mod secrets_encrypt;
mod snapshot;
#[cfg(test)]
mod stamp;
mod token;
mod uninstall;

const DEFAULT_CONFIG: &str = "/etc/k1s/config.yaml";

/// mimalloc: the server allocates many short-lived JSON trees per request; glibc malloc spent
/// ~10% of the create path's CPU (see the `api` bench).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `k1s version` and `k1s --version`: the release, the Kubernetes API it serves, and the build's
/// stamp (`build.rs`), as `/version` reports it.
const VERSION: &str = concat!(
    "v",
    env!("CARGO_PKG_VERSION"),
    " (Kubernetes v1.35 API)\ngit commit: ",
    env!("K1S_GIT_COMMIT"),
    " (tree state: ",
    env!("K1S_GIT_TREE_STATE"),
    ")\nbuild date: ",
    env!("K1S_BUILD_DATE"),
);

#[derive(Parser, Debug)]
#[command(name = "k1s", version = VERSION, about = "k1s: a small, fast, single-node Kubernetes", args_override_self = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the control plane and node agent.
    Server(Box<ServerArgs>),
    /// Print version information.
    Version,
    /// Stop k1s, its containerd and every pod (shims, mounts, network namespaces); keep the data dir.
    Killall(uninstall::KillallArgs),
    /// killall, then remove what k1s created on this host: nftables table, routing rules,
    /// k1s-dns0, cni0 and the CNI state, pod logs, the data dir, /etc/k1s, the installed unit.
    Uninstall(uninstall::UninstallArgs),
    /// Check that this host can run `k1s server` (same flags and config file); non-zero exit
    /// when something blocks a start.
    Check(Box<check::CheckArgs>),
    /// Inspect and renew the cluster's certificates.
    Certificate(certificate::CertificateArgs),
    /// Save, list and delete snapshots of the store.
    Snapshot(snapshot::SnapshotArgs),
    /// Control secrets encryption at rest on the running server: status, enable, disable, and
    /// key rotation (prepare, rotate, reencrypt, rotate-keys).
    SecretsEncrypt(secrets_encrypt::SecretsEncryptArgs),
    /// Import image archives into the node's containerd, or save images from registries into one.
    Images(images::ImagesArgs),
    /// Print the token other servers join this cluster with.
    Token(token::TokenArgs),
}

#[derive(Args, Debug)]
struct ServerArgs {
    /// (config) Load configuration from FILE (same keys as the flags).
    #[arg(long, short = 'c', env = "K1S_CONFIG_FILE", default_value = DEFAULT_CONFIG)]
    config: PathBuf,
    /// (data) Folder to hold state.
    #[arg(long, short = 'd', env = "K1S_DATA_DIR", default_value = "/var/lib/k1s")]
    data_dir: PathBuf,
    /// (client) Write the admin kubeconfig to this file.
    #[arg(long, short = 'o', env = "K1S_KUBECONFIG_OUTPUT", default_value = "/etc/k1s/k1s.yaml")]
    write_kubeconfig: PathBuf,
    /// (client) File mode of the written kubeconfig, octal.
    #[arg(long, env = "K1S_KUBECONFIG_MODE", default_value = "0600")]
    write_kubeconfig_mode: String,
    /// (listener) Address the API server binds to.
    #[arg(long, env = "K1S_BIND_ADDRESS", default_value = "0.0.0.0")]
    bind_address: IpAddr,
    /// (listener) HTTPS port of the API server; 0 picks a free port.
    #[arg(long, env = "K1S_HTTPS_LISTEN_PORT", default_value_t = 6443)]
    https_listen_port: u16,
    /// (listener) Address the API server advertises to clients.
    #[arg(long, env = "K1S_ADVERTISE_ADDRESS")]
    advertise_address: Option<IpAddr>,
    /// (listener) Extra hostnames or IPs for the serving certificate.
    #[arg(long, env = "K1S_TLS_SAN", value_delimiter = ',')]
    tls_san: Vec<String>,
    /// (agent/node) Node name (default: the hostname).
    #[arg(long, env = "K1S_NODE_NAME")]
    node_name: Option<String>,
    /// (networking) Pod network CIDR.
    #[arg(long, env = "K1S_CLUSTER_CIDR", default_value = "10.42.0.0/16")]
    cluster_cidr: String,
    /// (networking) Service network CIDR.
    #[arg(long, env = "K1S_SERVICE_CIDR", default_value = "10.43.0.0/16")]
    service_cidr: String,
    /// (networking) Cluster DNS address.
    #[arg(long, env = "K1S_CLUSTER_DNS", default_value = "10.43.0.10")]
    cluster_dns: IpAddr,
    /// (networking) Cluster domain.
    #[arg(long, env = "K1S_CLUSTER_DOMAIN", default_value = "cluster.local")]
    cluster_domain: String,
    /// (agent/node) IP address the node advertises (default: its first global IPv4 address).
    #[arg(long, env = "K1S_NODE_IP")]
    node_ip: Option<IpAddr>,
    /// (agent/runtime) CRI endpoint of an existing containerd (default: run our own).
    #[arg(long, env = "K1S_CONTAINER_RUNTIME_ENDPOINT")]
    container_runtime_endpoint: Option<String>,
    /// (agent/runtime) The pod sandbox ("pause") image.
    #[arg(long, env = "K1S_PAUSE_IMAGE", default_value = "registry.k8s.io/pause:3.10")]
    pause_image: String,
    /// (agent/runtime) Registry mirrors and credentials (k3s registries.yaml format).
    #[arg(long, env = "K1S_REGISTRIES_CONFIG", default_value = "/etc/k1s/registries.yaml")]
    registries_config: PathBuf,
    /// (agent/runtime) Runtime state directory (containerd socket and state).
    #[arg(long, env = "K1S_RUN_DIR", default_value = "/run/k1s", hide = true)]
    run_dir: PathBuf,
    /// (agent/node) Directory of container logs.
    #[arg(long, env = "K1S_POD_LOG_DIR", default_value = "/var/log/pods", hide = true)]
    pod_log_dir: PathBuf,
    /// (agent/node) Rotate a container's log file once it reaches this size (a quantity such as
    /// 10Mi; negative: never rotate).
    #[arg(long, env = "K1S_CONTAINER_LOG_MAX_SIZE", default_value = "10Mi", allow_hyphen_values = true, value_parser = parse_log_max_size)]
    container_log_max_size: String,
    /// (agent/node) Most log files (the current one and rotated ones) kept per container; at
    /// least 2.
    #[arg(long, env = "K1S_CONTAINER_LOG_MAX_FILES", default_value_t = 5)]
    container_log_max_files: usize,
    /// (agent/node) How many containers' logs are checked for rotation at once.
    #[arg(long, env = "K1S_CONTAINER_LOG_MAX_WORKERS", default_value_t = 1)]
    container_log_max_workers: usize,
    /// (agent/node) How often container logs are checked for rotation (upstream's minimum is
    /// 3s; shorter intervals, down to 100ms, are meant for tests).
    #[arg(long, env = "K1S_CONTAINER_LOG_MONITOR_INTERVAL", default_value = "10s", value_parser = humantime::parse_duration)]
    container_log_monitor_interval: Duration,
    /// (agent/node) The kubelet's HTTPS port; 0 picks a free one.
    #[arg(long, env = "K1S_KUBELET_PORT", default_value_t = 10250, hide = true)]
    kubelet_port: u16,
    /// (networking) Resolvers cluster DNS forwards other names to (`none`: answer only cluster
    /// names); default: the host's /etc/resolv.conf.
    #[arg(long, env = "K1S_CLUSTER_DNS_UPSTREAM", value_delimiter = ',', hide = true)]
    cluster_dns_upstream: Vec<String>,
    /// (components) Run only the control plane: no kubelet, no containerd.
    #[arg(long, env = "K1S_DISABLE_AGENT")]
    disable_agent: bool,
    /// (components) Do not run these components: controllers, scheduler, proxy, dns (the DNS
    /// server and its kube-dns Service), local-storage (the local-path StorageClass), or single
    /// controllers; disabled add-ons' manifests and objects are removed.
    #[arg(long, env = "K1S_DISABLE", value_delimiter = ',')]
    disable: Vec<String>,
    /// (data) How often the store's event log is compacted.
    #[arg(long, env = "K1S_COMPACTION_INTERVAL", default_value = "5m", value_parser = humantime::parse_duration, hide = true)]
    compaction_interval: Duration,
    /// (listener) Interval of watch bookmarks.
    #[arg(long, env = "K1S_BOOKMARK_INTERVAL", default_value = "60s", value_parser = humantime::parse_duration, hide = true)]
    bookmark_interval: Duration,
    /// (cluster) Serve requests without credentials as user system:anonymous (group
    /// system:unauthenticated), which RBAC authorizes like any other (`system:public-info-viewer`
    /// lets it read /version and the health checks); false answers them 401.
    #[arg(long, env = "K1S_ANONYMOUS_AUTH", default_value_t = true, action = clap::ArgAction::Set,
          num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    anonymous_auth: bool,
    /// (cluster) Path to the PodSecurity admission configuration file (defaults and exemptions).
    #[arg(long, env = "K1S_POD_SECURITY_ADMISSION_CONFIG_FILE")]
    pod_security_admission_config_file: Option<PathBuf>,
    /// (audit) Audit policy (an audit.k8s.io/v1 Policy); without one no request is audited.
    #[arg(long, env = "K1S_AUDIT_POLICY_FILE")]
    audit_policy_file: Option<PathBuf>,
    /// (audit) Write audit events to this file as JSON lines; `-` is standard output.
    #[arg(long, env = "K1S_AUDIT_LOG_PATH")]
    audit_log_path: Option<PathBuf>,
    /// (audit) Rotate the audit log file before it grows past this many megabytes (0: 100).
    #[arg(long, env = "K1S_AUDIT_LOG_MAXSIZE", default_value_t = 0)]
    audit_log_maxsize: u64,
    /// (audit) Most rotated audit log files kept (0: all).
    #[arg(long, env = "K1S_AUDIT_LOG_MAXBACKUP", default_value_t = 0)]
    audit_log_maxbackup: usize,
    /// (audit) Days rotated audit log files are kept, by the time in their name (0: forever).
    #[arg(long, env = "K1S_AUDIT_LOG_MAXAGE", default_value_t = 0)]
    audit_log_maxage: u64,
    /// (audit) How the audit log is written: `blocking` (each event before its request goes on)
    /// or `batch` (queued, written by a thread of its own; cheaper, dropped when the buffer is full).
    #[arg(long, env = "K1S_AUDIT_LOG_MODE", default_value = "blocking")]
    audit_log_mode: k1s_server::AuditLogMode,
    /// (audit) Events the audit log's batch mode queues before it drops them.
    #[arg(long, env = "K1S_AUDIT_LOG_BATCH_BUFFER_SIZE", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    audit_log_batch_buffer_size: u64,
    /// (audit) Send audit events to the webhook this kubeconfig names (batched EventList POSTs).
    #[arg(long, env = "K1S_AUDIT_WEBHOOK_CONFIG_FILE")]
    audit_webhook_config_file: Option<PathBuf>,
    /// (audit) Most events in one POST to the audit webhook.
    #[arg(long, env = "K1S_AUDIT_WEBHOOK_BATCH_MAX_SIZE", default_value_t = 400, value_parser = clap::value_parser!(u64).range(1..))]
    audit_webhook_batch_max_size: u64,
    /// (audit) Longest wait before a batch smaller than the maximum is sent to the audit webhook.
    #[arg(long, env = "K1S_AUDIT_WEBHOOK_BATCH_MAX_WAIT", default_value = "30s", value_parser = humantime::parse_duration)]
    audit_webhook_batch_max_wait: Duration,
    /// (audit) Wait before the first retry of a failed audit webhook POST (then 1.5 times longer each try).
    #[arg(long, env = "K1S_AUDIT_WEBHOOK_INITIAL_BACKOFF", default_value = "10s", value_parser = humantime::parse_duration)]
    audit_webhook_initial_backoff: Duration,
    /// (db) etcd v3 client URLs, comma-separated (https://HOST:2379[,https://HOST2:2379], or
    /// http:// on loopback; etcd://HOST:PORT is https:// with --datastore-cafile or
    /// --datastore-certfile, http:// without); default: the embedded RocksDB store under the data dir.
    #[arg(long, env = "K1S_DATASTORE_ENDPOINT")]
    datastore_endpoint: Option<String>,
    /// (db) CA bundle to verify the etcd servers' certificates.
    #[arg(long, env = "K1S_DATASTORE_CAFILE")]
    datastore_cafile: Option<PathBuf>,
    /// (db) Client certificate to authenticate to etcd.
    #[arg(long, env = "K1S_DATASTORE_CERTFILE")]
    datastore_certfile: Option<PathBuf>,
    /// (db) Key of the client certificate.
    #[arg(long, env = "K1S_DATASTORE_KEYFILE")]
    datastore_keyfile: Option<PathBuf>,
    /// (db) Prepended to every key in etcd (default none: keys are /registry/..., as
    /// kube-apiserver's); lets several clusters share one etcd.
    #[arg(long, env = "K1S_DATASTORE_PREFIX", default_value = "")]
    datastore_prefix: String,
    /// (cluster) Shared secret that joins servers to this cluster: `K10<ca-hash>::server:<secret>`
    /// as `k1s token create` prints it, or a bare secret; default: the one kept in the data dir,
    /// or a new one.
    #[arg(long, env = "K1S_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// (cluster) Read the token from this file.
    #[arg(long, env = "K1S_TOKEN_FILE", conflicts_with = "token")]
    token_file: Option<PathBuf>,
    /// (cluster) Join the cluster of the server at this URL (https://HOST:6443); needs --token.
    /// The key material and the datastore come from that server.
    #[arg(long, env = "K1S_URL")]
    server: Option<String>,
    /// (db) Cron schedule of store snapshots (5 fields, UTC).
    #[arg(long, env = "K1S_SNAPSHOT_SCHEDULE_CRON", default_value = "0 */12 * * *")]
    snapshot_schedule_cron: String,
    /// (db) Number of scheduled snapshots to keep (0 keeps all).
    #[arg(long, env = "K1S_SNAPSHOT_RETENTION", default_value_t = 5)]
    snapshot_retention: usize,
    /// (db) Do not take scheduled snapshots.
    #[arg(long, env = "K1S_DISABLE_SNAPSHOTS")]
    disable_snapshots: bool,
    /// (db) Folder of snapshots (default: <data-dir>/server/db/snapshots).
    #[arg(long, env = "K1S_SNAPSHOT_DIR")]
    snapshot_dir: Option<PathBuf>,
    /// (db) Restore the store from this snapshot file, then exit (start k1s again afterwards).
    #[arg(long, env = "K1S_CLUSTER_RESET_RESTORE_PATH")]
    cluster_reset_restore_path: Option<PathBuf>,
    /// (db) k3s's cluster reset, then exit: with --cluster-reset-restore-path it restores that
    /// snapshot; alone it changes nothing (the embedded store has one member) and says so.
    #[arg(long, env = "K1S_CLUSTER_RESET")]
    cluster_reset: bool,
    /// (auth) Static bearer tokens: a CSV file of token,user,uid and optionally
    /// "group1,group2" per line (kube-apiserver's format), read at start.
    #[arg(long, env = "K1S_TOKEN_AUTH_FILE")]
    token_auth_file: Option<PathBuf>,
    /// (auth) An AuthenticationConfiguration file (apiserver.config.k8s.io/v1): JWT issuers with
    /// claim mappings and validation rules; not with the --oidc-* flags.
    #[arg(long, env = "K1S_AUTHENTICATION_CONFIG")]
    authentication_config: Option<PathBuf>,
    /// (auth) Accept OpenID Connect ID tokens of this issuer (https); its discovery document
    /// names the keys.
    #[arg(long, env = "K1S_OIDC_ISSUER_URL")]
    oidc_issuer_url: Option<String>,
    /// (auth) The client ID ID tokens must be issued for (their `aud`); required with
    /// --oidc-issuer-url.
    #[arg(long, env = "K1S_OIDC_CLIENT_ID")]
    oidc_client_id: Option<String>,
    /// (auth) The ID token claim naming the user.
    #[arg(long, env = "K1S_OIDC_USERNAME_CLAIM", default_value = "sub")]
    oidc_username_claim: String,
    /// (auth) Prepended to OIDC usernames; default: the issuer URL and '#' (none for the email
    /// claim); '-' for none.
    #[arg(long, env = "K1S_OIDC_USERNAME_PREFIX", allow_hyphen_values = true)]
    oidc_username_prefix: Option<String>,
    /// (auth) The ID token claim listing the user's groups (a string or a list of strings).
    #[arg(long, env = "K1S_OIDC_GROUPS_CLAIM")]
    oidc_groups_claim: Option<String>,
    /// (auth) Prepended to OIDC group names.
    #[arg(long, env = "K1S_OIDC_GROUPS_PREFIX")]
    oidc_groups_prefix: Option<String>,
    /// (auth) CA bundle the OIDC issuer's certificate must chain to (default: the system's).
    #[arg(long, env = "K1S_OIDC_CA_FILE")]
    oidc_ca_file: Option<PathBuf>,
    /// (auth) A claim=value every ID token must hold (repeatable, or comma-separated).
    #[arg(long, env = "K1S_OIDC_REQUIRED_CLAIM", value_delimiter = ',')]
    oidc_required_claim: Vec<String>,
    /// (auth) Signing algorithms ID tokens may use (RS256, RS384, RS512, ES256, ES384, PS256,
    /// PS384, PS512).
    #[arg(long, env = "K1S_OIDC_SIGNING_ALGS", value_delimiter = ',', default_value = "RS256")]
    oidc_signing_algs: Vec<String>,
    /// (security) Encrypt Secrets at rest with a key k1s generates and keeps in
    /// <data-dir>/server/cred/encryption-config.json; manage it with `k1s secrets-encrypt`.
    #[arg(long, env = "K1S_SECRETS_ENCRYPTION")]
    secrets_encryption: bool,
    /// (security) Encrypt at rest what this EncryptionConfiguration file
    /// (apiserver.config.k8s.io/v1) lists, with its providers (aescbc, aesgcm, secretbox,
    /// identity), as kube-apiserver's flag does.
    #[arg(long, env = "K1S_ENCRYPTION_PROVIDER_CONFIG", conflicts_with = "secrets_encryption")]
    encryption_provider_config: Option<PathBuf>,
    /// (logging) Turn on debug logs.
    #[arg(long, env = "K1S_DEBUG")]
    debug: bool,
    /// (testing only) Leaf certificates last this long instead of a year, renewed with a quarter
    /// of it left, so tests see the background renewal. Never use it in production.
    #[arg(long, env = "K1S_TEST_CERT_VALIDITY", value_parser = humantime::parse_duration, hide = true)]
    test_cert_validity: Option<Duration>,
}

fn parse_cli() -> Result<Cli> {
    let argv: Vec<String> = std::env::args().collect();
    let cli = Cli::parse_from(&argv);
    let (config, sub) = match &cli.command {
        Command::Server(args) => (&args.config, "server"),
        Command::Check(args) => (&args.server.config, "check"),
        _ => return Ok(cli),
    };
    let explicit = argv.iter().any(|a| a == "--config" || a == "-c" || a.starts_with("--config="))
        || std::env::var_os("K1S_CONFIG_FILE").is_some();
    let cmd = Cli::command().find_subcommand(sub).cloned().context("the subcommand's flags")?;
    let extra = config_file::args(config, explicit, &cmd)?;
    if extra.is_empty() {
        return Ok(cli);
    }
    let pos = argv.iter().position(|a| a == sub).map_or(argv.len(), |p| p + 1);
    let mut merged = argv[..pos].to_vec();
    merged.extend(extra);
    merged.extend(argv[pos..].iter().cloned());
    Cli::try_parse_from(&merged).map_err(|e| anyhow::anyhow!("config file {}: {e}", config.display()))
}

/// `--container-log-max-size`: a quantity (checked here so that a config file's bad value is
/// reported with its key).
fn parse_log_max_size(s: &str) -> std::result::Result<String, String> {
    k1s_server::parse_container_log_max_size(s).map(|_| s.to_string()).map_err(|e| e.to_string())
}

fn server_config(a: ServerArgs) -> Result<k1s_server::Config> {
    let authentication = authentication_options(&a)?;
    let mode = u32::from_str_radix(a.write_kubeconfig_mode.trim_start_matches("0o"), 8)
        .with_context(|| format!("--write-kubeconfig-mode {:?} is not an octal file mode", a.write_kubeconfig_mode))?;
    if mode > 0o777 {
        bail!("--write-kubeconfig-mode {:o} is not a file mode", mode);
    }
    let snapshots = k1s_server::snapshot::SnapshotConfig {
        dir: a.snapshot_dir.unwrap_or_else(|| k1s_server::snapshot::default_dir(&a.data_dir)),
        schedule: if a.disable_snapshots {
            None
        } else {
            Some(a.snapshot_schedule_cron.parse().context("--snapshot-schedule-cron")?)
        },
        retention: a.snapshot_retention,
    };
    let datastore = match &a.datastore_endpoint {
        None => {
            if a.datastore_cafile.is_some() || a.datastore_certfile.is_some() || a.datastore_keyfile.is_some() {
                bail!("--datastore-cafile, --datastore-certfile and --datastore-keyfile need --datastore-endpoint");
            }
            k1s_server::Datastore::Embedded
        }
        Some(list) => {
            let tls = a.datastore_cafile.is_some() || a.datastore_certfile.is_some();
            let endpoints = datastore_endpoints(list, tls)?;
            k1s_server::Datastore::Etcd(k1s_server::EtcdConfig {
                endpoints,
                ca_file: a.datastore_cafile.clone(),
                cert_file: a.datastore_certfile.clone(),
                key_file: a.datastore_keyfile.clone(),
                root: a.datastore_prefix.clone(),
            })
        }
    };
    let token = match (&a.token, &a.token_file) {
        (Some(t), _) => Some(t.clone()),
        (None, Some(f)) => Some(std::fs::read_to_string(f).with_context(|| format!("--token-file {}", f.display()))?),
        (None, None) => None,
    };
    let token = token.map(|t| t.parse::<k1s_server::join::Token>()).transpose().context("--token")?;
    if let Some(url) = &a.server {
        if !url.starts_with("https://") {
            bail!("--server {url:?}: expected https://HOST:PORT");
        }
        if token.is_none() {
            bail!("--server needs --token (`k1s token create` on that server prints it)");
        }
    }
    let container_logs = k1s_server::ContainerLogRotation::new(
        &a.container_log_max_size,
        a.container_log_max_files,
        a.container_log_max_workers,
        a.container_log_monitor_interval,
    )
    .map_err(|e| match e {
        k1s_server::ContainerLogPolicyError::MaxSize { .. } => anyhow::anyhow!("--container-log-max-size: {e}"),
        k1s_server::ContainerLogPolicyError::MaxFiles(_) => anyhow::anyhow!("--container-log-max-files: {e}"),
        k1s_server::ContainerLogPolicyError::Workers(_) => anyhow::anyhow!("--container-log-max-workers: {e}"),
        k1s_server::ContainerLogPolicyError::MonitorInterval(_) => {
            anyhow::anyhow!("--container-log-monitor-interval: {e}")
        }
    })?;
    Ok(k1s_server::Config {
        authentication,
        data_dir: a.data_dir,
        write_kubeconfig: a.write_kubeconfig,
        write_kubeconfig_mode: mode,
        bind_address: a.bind_address,
        https_listen_port: a.https_listen_port,
        advertise_address: a.advertise_address,
        tls_san: a.tls_san,
        node_name: a.node_name.unwrap_or_else(k1s_server::default_node_name),
        cluster_cidr: a.cluster_cidr,
        service_cidr: a.service_cidr,
        cluster_dns: a.cluster_dns,
        cluster_domain: a.cluster_domain,
        disable_agent: a.disable_agent,
        disable: k1s_server::Disabled::parse(&a.disable)?,
        node_ip: match a.node_ip {
            Some(ip) => ip,
            None => k1s_server::detect_node_ip().unwrap_or(IpAddr::from([127, 0, 0, 1])),
        },
        container_runtime_endpoint: a.container_runtime_endpoint,
        pause_image: a.pause_image,
        registries_config: a.registries_config,
        run_dir: a.run_dir,
        pod_log_dir: a.pod_log_dir,
        container_logs,
        kubelet_port: a.kubelet_port,
        dns_upstreams: if a.cluster_dns_upstream.is_empty() {
            None
        } else {
            Some(
                a.cluster_dns_upstream
                    .iter()
                    .filter(|u| u.as_str() != "none")
                    .map(|u| u.parse().or_else(|_| format!("{u}:53").parse()))
                    .collect::<Result<Vec<std::net::SocketAddr>, _>>()
                    .map_err(|e| anyhow::anyhow!("--cluster-dns-upstream: {e}"))?,
            )
        },
        compaction_interval: a.compaction_interval,
        bookmark_interval: a.bookmark_interval,
        pod_security_admission_config_file: a.pod_security_admission_config_file,
        anonymous_auth: a.anonymous_auth,
        audit: k1s_server::AuditOptions {
            policy_file: a.audit_policy_file,
            log_path: a.audit_log_path,
            log_max_size_mb: a.audit_log_maxsize,
            log_max_backups: a.audit_log_maxbackup,
            log_max_age_days: a.audit_log_maxage,
            log_mode: a.audit_log_mode,
            log_batch_buffer_size: usize::try_from(a.audit_log_batch_buffer_size).unwrap_or(usize::MAX),
            webhook_config_file: a.audit_webhook_config_file,
            webhook_batching: k1s_server::AuditBatching {
                max_size: usize::try_from(a.audit_webhook_batch_max_size).unwrap_or(usize::MAX),
                max_wait: a.audit_webhook_batch_max_wait,
                initial_backoff: a.audit_webhook_initial_backoff,
            },
        },
        test_cert_validity: a.test_cert_validity,
        snapshots,
        datastore,
        token,
        join_server: a.server,
        encryption: match (a.secrets_encryption, a.encryption_provider_config) {
            (true, _) => Some(k1s_server::secrets_encrypt::Source::Managed),
            (false, Some(file)) => Some(k1s_server::secrets_encrypt::Source::File(file)),
            (false, None) => None,
        },
    })
}

/// `--token-auth-file` and `--oidc-*`: OIDC flags without an issuer, or a required claim that is
/// not `claim=value`, are refused here; the rest is checked when the server starts.
fn authentication_options(a: &ServerArgs) -> Result<k1s_server::authn::Options> {
    if a.authentication_config.is_some() && a.oidc_issuer_url.is_some() {
        bail!("--authentication-config and the --oidc-* flags are mutually exclusive");
    }
    let oidc = match &a.oidc_issuer_url {
        None => {
            let given = [
                ("--oidc-client-id", a.oidc_client_id.is_some()),
                ("--oidc-username-prefix", a.oidc_username_prefix.is_some()),
                ("--oidc-groups-claim", a.oidc_groups_claim.is_some()),
                ("--oidc-groups-prefix", a.oidc_groups_prefix.is_some()),
                ("--oidc-ca-file", a.oidc_ca_file.is_some()),
                ("--oidc-required-claim", !a.oidc_required_claim.is_empty()),
            ];
            if let Some((flag, _)) = given.iter().find(|(_, set)| *set) {
                bail!("{flag} needs --oidc-issuer-url");
            }
            None
        }
        Some(issuer) => {
            let mut required_claims = Vec::new();
            for c in a.oidc_required_claim.iter().filter(|c| !c.is_empty()) {
                let Some((k, v)) = c.split_once('=') else {
                    bail!("--oidc-required-claim {c:?}: expected claim=value");
                };
                required_claims.push((k.to_string(), v.to_string()));
            }
            Some(k1s_server::authn::oidc::Options {
                issuer_url: issuer.clone(),
                client_id: a.oidc_client_id.clone().unwrap_or_default(),
                username_claim: Some(a.oidc_username_claim.clone()),
                username_prefix: a.oidc_username_prefix.clone(),
                groups_claim: a.oidc_groups_claim.clone(),
                groups_prefix: a.oidc_groups_prefix.clone(),
                ca_file: a.oidc_ca_file.clone(),
                required_claims,
                signing_algs: a.oidc_signing_algs.iter().filter(|s| !s.is_empty()).cloned().collect(),
            })
        }
    };
    Ok(k1s_server::authn::Options {
        token_auth_file: a.token_auth_file.clone(),
        oidc,
        authentication_config: a.authentication_config.clone(),
    })
}

/// Whether log lines get ANSI colours: only on a terminal, and never when `NO_COLOR` is set to
/// anything non-empty (no-color.org). systemd's journal and log files get plain text.
fn log_colour(stderr_is_terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    stderr_is_terminal && no_color.is_none_or(|v| v.is_empty())
}

fn main() -> Result<()> {
    k1s_server::set_build(k1s_server::Build {
        git_commit: env!("K1S_GIT_COMMIT"),
        git_tree_state: env!("K1S_GIT_TREE_STATE"),
        build_date: env!("K1S_BUILD_DATE"),
    });
    let cli = parse_cli()?;
    match cli.command {
        Command::Version => {
            println!("k1s version {VERSION}");
            Ok(())
        }
        Command::Killall(args) => uninstall::killall(args),
        Command::Uninstall(args) => uninstall::uninstall(args),
        Command::Check(args) => check::run(*args),
        Command::Certificate(args) => certificate::run(args),
        Command::Snapshot(args) => snapshot::run(args),
        Command::SecretsEncrypt(args) => secrets_encrypt::run(args),
        Command::Images(args) => images::run(args),
        Command::Token(args) => token::run(args),
        Command::Server(args) => {
            if let Some(file) = &args.cluster_reset_restore_path {
                if args.datastore_endpoint.is_some() {
                    bail!("--cluster-reset-restore-path restores the embedded store; with --datastore-endpoint restore etcd with its own tools (etcdctl snapshot restore)");
                }
                return snapshot::restore(&args.data_dir, file);
            }
            if args.cluster_reset {
                if args.datastore_endpoint.is_some() {
                    bail!("--cluster-reset resets the embedded store; with --datastore-endpoint manage etcd's members with its own tools (etcdctl member)");
                }
                println!("{}", snapshot::CLUSTER_RESET_ALONE);
                return Ok(());
            }
            let filter = if args.debug { "debug" } else { "info" };
            tracing_subscriber::fmt()
                .with_env_filter(
                    tracing_subscriber::EnvFilter::try_from_default_env()
                        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(filter)),
                )
                .with_writer(std::io::stderr)
                .with_ansi(log_colour(std::io::stderr().is_terminal(), std::env::var_os("NO_COLOR")))
                .init();
            let config = server_config(*args)?;
            let rt =
                tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
            rt.block_on(async move {
                let cancel = CancellationToken::new();
                let c = cancel.clone();
                tokio::spawn(async move {
                    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                        Ok(s) => s,
                        Err(_) => return,
                    };
                    tokio::select! {
                        _ = tokio::signal::ctrl_c() => {}
                        _ = term.recv() => {}
                    }
                    c.cancel();
                });
                k1s_server::run(config, cancel).await.context("k1s server")
            })
        }
    }
}

/// `--datastore-endpoint`'s list as client URLs. `etcd://HOST:PORT` (design.md's form) is
/// `https://` when the datastore TLS files are given, `http://` when not.
fn datastore_endpoints(list: &str, tls: bool) -> Result<Vec<String>> {
    let mut endpoints = Vec::new();
    for e in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let url = match e.strip_prefix("etcd://") {
            Some(rest) if tls => format!("https://{rest}"),
            Some(rest) => format!("http://{rest}"),
            None if e.starts_with("https://") || e.starts_with("http://") => e.to_string(),
            None => {
                bail!("--datastore-endpoint {e:?}: expected https://HOST:PORT (or http:// on loopback, or etcd://)")
            }
        };
        endpoints.push(url);
    }
    if endpoints.is_empty() {
        bail!("--datastore-endpoint is empty");
    }
    Ok(endpoints)
}

#[cfg(test)]
mod tests {
    use super::{datastore_endpoints, log_colour, server_config, Cli, Command};
    use clap::Parser as _;

    #[test]
    fn datastore_endpoints_take_urls_and_design_mds_etcd_form() {
        let plain = datastore_endpoints("etcd://127.0.0.1:2379, http://127.0.0.1:2380", false).expect("urls");
        assert_eq!(plain, ["http://127.0.0.1:2379", "http://127.0.0.1:2380"]);
        let tls = datastore_endpoints("etcd://e1:2379,https://e2:2379", true).expect("urls");
        assert_eq!(tls, ["https://e1:2379", "https://e2:2379"]);
        let err = datastore_endpoints("e1:2379", false).expect_err("no scheme").to_string();
        assert!(err.contains("expected https://HOST:PORT"), "{err}");
        assert!(datastore_endpoints(" , ", false).is_err());
    }

    #[test]
    fn logs_are_coloured_only_on_a_terminal_without_no_color() {
        assert!(log_colour(true, None));
        assert!(log_colour(true, Some("".into())));
        assert!(!log_colour(true, Some("1".into())));
        assert!(!log_colour(false, None), "the journal and log files get no escape codes");
    }

    #[test]
    fn disable_takes_components_and_controllers_and_refuses_unknown_names() {
        let args = |disable: &str| {
            let cli = Cli::try_parse_from(["k1s", "server", disable]).expect("parse");
            let Command::Server(a) = cli.command else { panic!("not server") };
            server_config(*a)
        };
        let cfg = args("--disable=dns,cronjob").expect("known names");
        assert!(cfg.disable.contains(k1s_server::Component::Dns));
        assert_eq!(cfg.disable.controllers(), vec!["cronjob".to_owned()]);
        let err = args("--disable=traefik").expect_err("unknown name").to_string();
        assert!(err.starts_with("--disable: unknown component \"traefik\""), "{err}");
    }

    #[test]
    fn oidc_flags_need_the_issuer_and_required_claims_are_claim_value_pairs() {
        let args = |flags: &[&str]| {
            let argv = ["k1s", "server"].iter().chain(flags).copied();
            let cli = Cli::try_parse_from(argv).map_err(|e| anyhow::anyhow!("{e}"))?;
            let Command::Server(a) = cli.command else { panic!("not server") };
            server_config(*a)
        };
        let cfg = args(&[]).expect("defaults");
        assert!(cfg.authentication.oidc.is_none() && cfg.authentication.token_auth_file.is_none());
        let cfg = args(&[
            "--oidc-issuer-url=https://issuer.example",
            "--oidc-client-id=k1s",
            "--oidc-required-claim=hd=example.com,team=a=b",
            "--oidc-username-prefix=-",
            "--token-auth-file=/etc/k1s/tokens.csv",
        ])
        .expect("valid");
        let oidc = cfg.authentication.oidc.expect("oidc");
        assert_eq!(oidc.username_claim.as_deref(), Some("sub"));
        assert_eq!(oidc.username_prefix.as_deref(), Some("-"));
        assert_eq!(oidc.signing_algs, ["RS256"]);
        assert_eq!(
            oidc.required_claims,
            [("hd".to_string(), "example.com".to_string()), ("team".to_string(), "a=b".to_string())]
        );
        assert_eq!(cfg.authentication.token_auth_file.as_deref(), Some(std::path::Path::new("/etc/k1s/tokens.csv")));
        let err = args(&["--oidc-groups-claim=groups"]).expect_err("no issuer").to_string();
        assert_eq!(err, "--oidc-groups-claim needs --oidc-issuer-url");
        let err = args(&["--oidc-issuer-url=https://i", "--oidc-required-claim=hd"]).expect_err("no value").to_string();
        assert_eq!(err, "--oidc-required-claim \"hd\": expected claim=value");
    }

    #[test]
    fn audit_flags_default_to_upstreams_and_reach_the_server_config() {
        let args = |flags: &[&str]| {
            let argv = ["k1s", "server"].iter().chain(flags).copied();
            let cli = Cli::try_parse_from(argv).map_err(|e| anyhow::anyhow!("{e}"))?;
            let Command::Server(a) = cli.command else { panic!("not server") };
            server_config(*a)
        };
        let cfg = args(&[]).expect("defaults");
        assert_eq!(cfg.audit, k1s_server::AuditOptions { log_batch_buffer_size: 10_000, ..Default::default() });
        assert_eq!(cfg.audit.log_mode, k1s_server::AuditLogMode::Blocking, "upstream's default");
        assert_eq!(cfg.audit.policy_file, None, "no policy: nothing is audited, as upstream");
        assert_eq!(cfg.audit.webhook_batching.max_size, 400);
        assert_eq!(cfg.audit.webhook_batching.max_wait, std::time::Duration::from_secs(30));
        let cfg = args(&[
            "--audit-policy-file=/etc/k1s/audit.yaml",
            "--audit-log-path=-",
            "--audit-log-maxsize=5",
            "--audit-log-maxbackup=3",
            "--audit-log-maxage=7",
            "--audit-log-mode=batch",
            "--audit-log-batch-buffer-size=50",
            "--audit-webhook-config-file=/etc/k1s/audit-webhook.yaml",
            "--audit-webhook-batch-max-size=10",
            "--audit-webhook-batch-max-wait=2s",
            "--audit-webhook-initial-backoff=500ms",
        ])
        .expect("valid");
        let a = cfg.audit;
        assert_eq!(a.policy_file.as_deref(), Some(std::path::Path::new("/etc/k1s/audit.yaml")));
        assert_eq!(a.log_path.as_deref(), Some(std::path::Path::new("-")));
        assert_eq!((a.log_max_size_mb, a.log_max_backups, a.log_max_age_days), (5, 3, 7));
        assert_eq!((a.log_mode, a.log_batch_buffer_size), (k1s_server::AuditLogMode::Batch, 50));
        assert_eq!(a.webhook_config_file.as_deref(), Some(std::path::Path::new("/etc/k1s/audit-webhook.yaml")));
        assert_eq!(a.webhook_batching.max_size, 10);
        assert_eq!(a.webhook_batching.max_wait, std::time::Duration::from_secs(2));
        assert_eq!(a.webhook_batching.initial_backoff, std::time::Duration::from_millis(500));
        assert!(args(&["--audit-log-maxsize=-1"]).is_err(), "negative sizes are refused");
        assert!(args(&["--audit-webhook-batch-max-size=0"]).is_err());
        let strict = args(&["--audit-log-mode=blocking-strict"]).expect_err("not supported");
        assert!(strict.to_string().contains("blocking-strict is not supported"), "{strict}");
        assert!(args(&["--audit-log-mode=fast"]).is_err());
    }

    #[test]
    fn container_log_rotation_flags_default_to_upstreams_and_are_checked() {
        let args = |flags: &[&str]| {
            let argv = ["k1s", "server"].iter().chain(flags).copied();
            let cli = Cli::try_parse_from(argv).map_err(|e| anyhow::anyhow!("{e}"))?;
            let Command::Server(a) = cli.command else { panic!("not server") };
            server_config(*a)
        };
        let cfg = args(&[]).expect("defaults");
        assert_eq!(cfg.container_logs, k1s_server::ContainerLogRotation::default());
        assert_eq!(cfg.container_logs.max_size, Some(10 * 1024 * 1024));
        assert_eq!(cfg.container_logs.max_files, 5);
        assert_eq!(cfg.container_logs.monitor_interval, std::time::Duration::from_secs(10));
        let cfg = args(&["--container-log-max-size", "-1"]).expect("negative size");
        assert_eq!(cfg.container_logs.max_size, None, "a negative size turns rotation off");
        let cfg = args(&[
            "--container-log-max-size=1Gi",
            "--container-log-max-files=2",
            "--container-log-monitor-interval=500ms",
        ])
        .expect("valid");
        assert_eq!(cfg.container_logs.max_size, Some(1 << 30));
        assert_eq!(cfg.container_logs.max_files, 2);
        assert_eq!(cfg.container_logs.monitor_interval, std::time::Duration::from_millis(500));
        let err = args(&["--container-log-max-files=1"]).expect_err("one file").to_string();
        assert!(err.starts_with("--container-log-max-files: invalid container log max files 1"), "{err}");
        let err = args(&["--container-log-max-size=lots"]).expect_err("not a quantity").to_string();
        assert!(err.contains("invalid container log max size \"lots\""), "{err}");
        let err = args(&["--container-log-monitor-interval=10ms"]).expect_err("too short").to_string();
        assert!(err.starts_with("--container-log-monitor-interval: "), "{err}");
    }

    #[test]
    fn anonymous_auth_defaults_to_true_and_takes_false_as_upstreams_flag_does() {
        let anonymous = |flags: &[&str]| {
            let argv = ["k1s", "server"].iter().chain(flags).copied();
            let cli = Cli::try_parse_from(argv).map_err(|e| anyhow::anyhow!("{e}"))?;
            let Command::Server(a) = cli.command else { panic!("not server") };
            server_config(*a).map(|c| c.anonymous_auth)
        };
        assert!(anonymous(&[]).expect("default"));
        assert!(anonymous(&["--anonymous-auth"]).expect("bare flag"));
        assert!(!anonymous(&["--anonymous-auth=false"]).expect("false"));
        assert!(anonymous(&["--anonymous-auth=true"]).expect("true"));
        assert!(anonymous(&["--anonymous-auth=no"]).is_err());
    }
}
