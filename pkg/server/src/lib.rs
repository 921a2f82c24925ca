//! k1s-server: the composition root. Turns a validated [`Config`] into a running node:
//! preflight ▶ data dir ▶ store ▶ PKI ▶ API server ▶ manifests deployer (first pass) ▶ kubeconfig
//! ▶ components ▶ readiness
//! (sd_notify `READY=1`: the API serves, and with the agent the node is Ready) ▶ certificate
//! renewal.
//!
//! It never parses command lines (that is the binary's job) and holds no global state.

pub mod addons;
mod agent;
mod certificates;
mod components;
pub mod cron;
pub mod host_cleanup;
pub mod images;
pub mod join;
pub mod preflight;
pub mod secrets_encrypt;
pub mod snapshot;
pub mod systemd;

pub use components::{Component, Disabled, UnknownComponent};
/// Authentication options (`--token-auth-file`, `--oidc-*`).
pub use k1s_apiserver::authn;
pub use k1s_kubelet::logs::rotation::{
    parse_max_size as parse_container_log_max_size, PolicyError as ContainerLogPolicyError,
    RotationPolicy as ContainerLogRotation,
};

pub use k1s_apiserver::audit::{log::LogMode as AuditLogMode, webhook::Batching as AuditBatching, AuditOptions};
pub use k1s_apiserver::version::{set_build, Build};
use k1s_apiserver::TlsMaterial;
use k1s_pki::Pki;
pub use k1s_store::EtcdConfig;
use k1s_store::{Store, StoreOptions};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Everything `k1s server` needs, validated once by the binary.
#[derive(Clone, Debug)]
pub struct Config {
    pub data_dir: PathBuf,
    pub write_kubeconfig: PathBuf,
    pub write_kubeconfig_mode: u32,
    pub bind_address: IpAddr,
    /// 0 picks a free port.
    pub https_listen_port: u16,
    pub advertise_address: Option<IpAddr>,
    pub tls_san: Vec<String>,
    pub node_name: String,
    pub cluster_cidr: String,
    pub service_cidr: String,
    pub cluster_dns: IpAddr,
    pub cluster_domain: String,
    pub disable_agent: bool,
    /// Components and single controllers `--disable` turned off.
    pub disable: Disabled,
    /// CRI endpoint of an existing containerd; `None` runs and supervises our own.
    pub container_runtime_endpoint: Option<String>,
    pub pause_image: String,
    /// `registries.yaml` (k3s format).
    pub registries_config: PathBuf,
    /// The node's own address (InternalIP).
    pub node_ip: IpAddr,
    /// Runtime state (containerd socket and state): `/run/k1s`.
    pub run_dir: PathBuf,
    /// Container logs: `/var/log/pods`.
    pub pod_log_dir: PathBuf,
    /// When the kubelet rotates container logs.
    pub container_logs: ContainerLogRotation,
    /// The kubelet's HTTPS port (logs/exec/port-forward); 0 picks one.
    pub kubelet_port: u16,
    /// Resolvers cluster DNS forwards other names to; `None` = the host's /etc/resolv.conf.
    pub dns_upstreams: Option<Vec<std::net::SocketAddr>>,
    /// How often the store's event log is compacted (everything older than one interval goes).
    pub compaction_interval: Duration,
    pub bookmark_interval: Duration,
    /// `PodSecurityConfiguration` (or an `AdmissionConfiguration` holding one); `None`: the
    /// defaults (privileged, `kube-system` exempt).
    pub pod_security_admission_config_file: Option<PathBuf>,
    /// The audit policy, log and webhook (`--audit-*`); without a policy nothing is recorded.
    pub audit: k1s_apiserver::audit::AuditOptions,
    /// Snapshot folder, schedule and retention.
    pub snapshots: snapshot::SnapshotConfig,
    /// Where the cluster state lives: the embedded RocksDB under the data dir, or etcd.
    pub datastore: Datastore,
    /// The cluster's join token (`--token`); `None`: the one kept in the data dir, or a new one.
    pub token: Option<join::Token>,
    /// Join the cluster of the server at this URL (`--server https://HOST:6443`).
    pub join_server: Option<String>,
    /// Encryption at rest: `--secrets-encryption` (k1s's own configuration) or
    /// `--encryption-provider-config FILE`; `None`: values are stored as they are.
    pub encryption: Option<secrets_encrypt::Source>,
    /// For tests only: leaf certificates last this long (and are renewed with a quarter of it
    /// left) instead of a year.
    pub test_cert_validity: Option<Duration>,
    /// Bearer token authentication besides ServiceAccount and bootstrap tokens: the static token
    /// file and OIDC.
    pub authentication: authn::Options,
    /// Whether requests without credentials reach authorization as `system:anonymous`
    /// (`--anonymous-auth`, default true) or are answered 401.
    pub anonymous_auth: bool,
}

/// The store behind the API server.
#[derive(Clone, Debug, Default)]
pub enum Datastore {
    /// RocksDB in `<data-dir>/server/db` (the default).
    #[default]
    Embedded,
    /// An external etcd v3 cluster (`--datastore-endpoint`).
    Etcd(k1s_store::EtcdConfig),
}

impl Config {
    /// What preflight checks for this configuration.
    pub fn preflight_options(&self) -> preflight::Options {
        preflight::Options {
            data_dir: self.data_dir.clone(),
            bind_address: self.bind_address,
            https_listen_port: self.https_listen_port,
            agent: !self.disable_agent,
            own_containerd: self.container_runtime_endpoint.is_none(),
            proxy: !self.disable.contains(Component::Proxy),
            kubelet_port: self.kubelet_port,
            cni_bin_dir: k1s_kubelet::containerd::DEFAULT_CNI_BIN_DIR.into(),
            node_port_range: None,
        }
    }

    fn cert_validity(&self) -> k1s_pki::Validity {
        self.test_cert_validity.map(k1s_pki::Validity::for_testing).unwrap_or_default()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Preflight(#[from] preflight::PreflightFailed),
    #[error("preparing data dir {path}")]
    DataDir { path: PathBuf, source: std::io::Error },
    #[error("opening the store")]
    Store(#[from] k1s_store::StoreError),
    /// The embedded store's files do not read back: say which, and how to recover, rather than
    /// only RocksDB's words.
    #[error(
        "the store in {dir} is corrupt: {message}\n\
         To recover, move the corrupt store aside (`mv {dir} {dir}.corrupt`; its snapshots/ folder goes \
         with it) and restore a snapshot: `k1s snapshot ls --dir {dir}.corrupt/snapshots` lists them, \
         `k1s server --data-dir {data_dir} --cluster-reset-restore-path {dir}.corrupt/snapshots/FILE` \
         restores one; or start again without it for an empty cluster"
    )]
    CorruptStore { dir: String, data_dir: String, message: String },
    #[error("setting up certificates")]
    Pki(#[from] k1s_pki::PkiError),
    #[error("starting the API server")]
    ApiServer(#[from] k1s_apiserver::ServeError),
    #[error("connecting a component to the API")]
    Connect(#[from] k1s_runtime::ConnectError),
    #[error("configuring the service proxy")]
    Proxy(#[source] k1s_proxy::ConfigError),
    #[error("starting the node agent")]
    Agent(#[from] agent::AgentError),
    #[error("loading the authentication configuration")]
    Authentication(#[source] k1s_apiserver::authn::ConfigError),
    #[error("loading the PodSecurity admission configuration: {0}")]
    PodSecurity(k1s_apiserver::pod_security::ConfigError),
    #[error("loading the audit configuration: {0}")]
    Audit(k1s_apiserver::audit::AuditError),
    #[error("loading the API serving certificate")]
    Serving(#[source] k1s_pki::ServingError),
    #[error("writing the built-in manifests")]
    Addons(#[from] addons::StageError),
    #[error("loading the API server's client certificate")]
    ClientCert(#[source] k1s_pki::ServingError),
    #[error("joining the cluster")]
    Join(#[from] join::JoinError),
    #[error("loading the encryption configuration")]
    Encryption(#[from] secrets_encrypt::EncryptionError),
    #[error("{component} stopped while the server was running; exiting rather than serving half-alive")]
    ComponentStopped { component: &'static str },
}

/// A running part of k1s that lasts until the server is cancelled: the API server, the controllers, the
/// scheduler, containerd's supervision, the kubelet, the proxy, the cluster DNS.
pub struct Running {
    pub name: &'static str,
    pub task: tokio::task::JoinHandle<()>,
}

impl Running {
    fn spawn(name: &'static str, f: impl std::future::Future<Output = ()> + Send + 'static) -> Running {
        Running { name, task: tokio::spawn(f) }
    }
}

/// Waits until `cancel` fires, then for every component to end (each for at most `grace`).
/// A component that ends first leaves the server half-alive (an API without a kubelet never
/// registers its node; pods stay Pending): the others are cancelled and its name is returned, so
/// the process exits non-zero and its supervisor (systemd's `Restart=always`) starts it again.
pub async fn supervise(
    components: Vec<Running>,
    cancel: &CancellationToken,
    grace: Duration,
    api_cancel: Option<&CancellationToken>,
) -> Result<(), ServerError> {
    let mut set = tokio::task::JoinSet::new();
    // What still runs, for the log when the grace period ends with some not stopped.
    let mut running: Vec<&'static str> = components.iter().map(|c| c.name).collect();
    for c in components {
        let (name, task) = (c.name, c.task);
        set.spawn(async move {
            let _ = task.await;
            name
        });
    }
    fn ended(running: &mut Vec<&'static str>, joined: Result<&'static str, tokio::task::JoinError>) {
        if let Ok(name) = joined {
            running.retain(|n| *n != name);
        }
    }
    let still = |running: &[&'static str], when: &str| {
        if !running.is_empty() {
            tracing::warn!(components = ?running, "{when}");
        }
    };
    let stopped = tokio::select! {
        biased;
        _ = cancel.cancelled() => None,
        Some(joined) = set.join_next(), if !cancel.is_cancelled() => {
            let component = joined.as_ref().map_or("a component", |n| *n);
            ended(&mut running, joined);
            tracing::error!(component, "a component stopped while the server was running; stopping the server");
            cancel.cancel();
            Some(component)
        }
    };
    // Everything but the API server first, so what the others write while stopping (releasing
    // their Leases, the node's last status) still reaches it; then the API server.
    if let Some(api) = api_cancel {
        let _ = tokio::time::timeout(grace / 2, async {
            while set.len() > 1 {
                match set.join_next().await {
                    Some(joined) => ended(&mut running, joined),
                    None => break,
                }
            }
        })
        .await;
        if set.len() > 1 {
            still(&running, "still stopping when the API server stops");
        }
        api.cancel();
    }
    let all = tokio::time::timeout(grace, async {
        while let Some(joined) = set.join_next().await {
            ended(&mut running, joined);
        }
    })
    .await;
    if all.is_err() {
        still(&running, "not stopped within the grace period; exiting without them");
    }
    match stopped {
        Some(component) => Err(ServerError::ComponentStopped { component }),
        None => Ok(()),
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

/// Default node name: the hostname, lower-cased.
pub fn default_node_name() -> String {
    hostname().to_lowercase()
}

/// Runs k1s until `cancel` fires.
pub async fn run(config: Config, cancel: CancellationToken) -> Result<(), ServerError> {
    // A token file or OIDC setting that does not hold stops the start before anything runs.
    let authentication = config.authentication.load().map_err(ServerError::Authentication)?;
    // Pings from the start: containerd and the node can take a while to come up.
    let watchdog = systemd::spawn_watchdog(cancel.clone());
    systemd::status("checking the host");
    let report = preflight::run(&config.preflight_options(), &preflight::System).into_result()?;
    for f in report.findings.iter().filter(|f| f.level == preflight::Level::Warn) {
        tracing::warn!(check = %f.name, fix = f.fix.as_deref().unwrap_or_default(), "preflight: {}", f.detail);
    }
    // A malformed audit policy or an audit log that cannot be written stops the server here.
    let audit = k1s_apiserver::audit::Auditor::new(&config.audit).map_err(ServerError::Audit)?;
    systemd::status("opening the store");
    let server_dir = config.data_dir.join("server");
    let mkdir =
        |p: &PathBuf| std::fs::create_dir_all(p).map_err(|source| ServerError::DataDir { path: p.clone(), source });
    mkdir(&server_dir)?;
    let tls_dir = server_dir.join("tls");
    mkdir(&tls_dir)?;
    let token = join::local_token(&config.data_dir, config.token.as_ref())?;
    // Joining through another server: its shared key material, and its datastore unless one was
    // given.
    let mut datastore = config.datastore.clone();
    if let Some(url) = &config.join_server {
        systemd::status(&format!("joining the cluster of {url}"));
        let token = token.as_ref().ok_or(join::JoinError::TokenNeededToJoin)?;
        let theirs = match join::fetch(url, token).await {
            Ok(bootstrap) => {
                let Some(theirs) = bootstrap.datastore else {
                    return Err(join::JoinError::EmbeddedStore(url.clone()).into());
                };
                join::install_shared(&tls_dir, &bootstrap.files)?;
                join::save_datastore(&server_dir, &theirs)?;
                tracing::info!(server = %url, "fetched the cluster's key material");
                theirs
            }
            // Joined before: the server it joined through may be the one that is down.
            Err(e) => match join::saved_datastore(&server_dir)? {
                Some(saved) => {
                    tracing::warn!(server = %url, error = %k1s_api::errors::chain(&e), "could not reach the server this one joined through; starting on the datastore and key material it handed out before");
                    saved
                }
                None => return Err(e.into()),
            },
        };
        if let Datastore::Embedded = datastore {
            datastore = Datastore::Etcd(theirs.install(&tls_dir)?);
        }
    }
    // Before the store: a bad encryption configuration stops the server here, naming the file.
    let encryption = secrets_encrypt::setup(&config.data_dir, config.encryption.as_ref())?;
    // NamespaceLifecycle admission reads the namespace on every namespaced create.
    let opts = StoreOptions {
        cached_prefixes: vec!["/registry/namespaces/".into()],
        transformer: encryption.as_ref().map(secrets_encrypt::Active::transformer),
        ..StoreOptions::default()
    };
    let store = match &datastore {
        Datastore::Embedded => {
            let dir = server_dir.join("db");
            Store::open(&dir, opts).map_err(|e| match e {
                k1s_store::StoreError::Storage { message, .. } if message.contains("Corruption") => {
                    ServerError::CorruptStore {
                        dir: dir.display().to_string(),
                        data_dir: config.data_dir.display().to_string(),
                        message,
                    }
                }
                k1s_store::StoreError::Corrupt(what) => ServerError::CorruptStore {
                    dir: dir.display().to_string(),
                    data_dir: config.data_dir.display().to_string(),
                    message: format!("corrupt record at {what}"),
                },
                e => e.into(),
            })?
        }
        Datastore::Etcd(etcd) => Store::connect_etcd(etcd, opts).await?,
    };
    // On a shared datastore the first server publishes the cluster's key material there; every
    // other server takes it from there (with the same token).
    let mut publish = false;
    if let Datastore::Etcd(etcd) = &datastore {
        match join::adopt_from_store(&store, &tls_dir, token.as_ref())? {
            join::InStore::Installed => {}
            join::InStore::Absent => {
                if let Some(url) = &config.join_server {
                    let endpoints = etcd.endpoints.join(",");
                    return Err(join::JoinError::OtherDatastore { url: url.clone(), endpoints }.into());
                }
                publish = true;
            }
        }
    }
    let token = token.unwrap_or_else(join::Token::generate);

    let mut sans = vec!["127.0.0.1".to_string(), "::1".to_string(), "localhost".to_string(), hostname()];
    sans.extend(config.tls_san.iter().cloned());
    // In-cluster clients reach the API as the `kubernetes` Service: its ClusterIP (the first
    // address of the Service CIDR) and DNS names.
    if let Some(ip) = k1s_apiserver::service_alloc::service_cidr(&config.service_cidr)
        .and_then(|c| k1s_apiserver::service_alloc::first_ip(&c))
    {
        sans.push(ip.to_string());
    }
    let domain = config.cluster_domain.trim_end_matches('.');
    for name in ["kubernetes", "kubernetes.default", "kubernetes.default.svc"] {
        sans.push(name.to_string());
    }
    sans.push(format!("kubernetes.default.svc.{domain}"));
    if let Some(a) = config.advertise_address {
        sans.push(a.to_string());
    }
    if !config.bind_address.is_unspecified() {
        sans.push(config.bind_address.to_string());
    }
    systemd::status(if tls_dir.join("server-ca.crt").exists() {
        "checking certificates"
    } else {
        "generating the cluster CA and certificates"
    });
    let validity = config.cert_validity();
    let mut pki = Pki::ensure_with(&tls_dir, &sans, validity)?;
    // Every shared file exists (the request-header CA and the ServiceAccount key are made on
    // first use) before it is published or handed out.
    pki.front_proxy()?;
    pki.service_account_key()?;
    if publish {
        if join::publish(&store, &tls_dir, &token).await? {
            tracing::info!("published the cluster's key material to the datastore");
        } else {
            // Another server set the cluster up at the same moment: take its CAs.
            join::adopt_from_store(&store, &tls_dir, Some(&token))?;
            pki = Pki::ensure_with(&tls_dir, &sans, validity)?;
        }
    }
    token.check_ca(&pki.ca.cert_pem)?;
    join::save_token(&config.data_dir, &token, &pki.ca.cert_pem)?;
    let join_endpoint = k1s_apiserver::JoinEndpoint {
        secret: token.secret.clone(),
        ca_pem: pki.ca.cert_pem.clone(),
        // On the embedded store no other server can join: the answer says so and hands out no
        // keys, only the (public) CA that the joining server checks the token against.
        bootstrap: serde_json::to_vec(&match &datastore {
            Datastore::Embedded => join::Bootstrap {
                files: [("server-ca.crt".to_string(), pki.ca.cert_pem.clone())].into(),
                datastore: None,
            },
            Datastore::Etcd(etcd) => {
                join::Bootstrap { files: join::read_shared(&tls_dir)?, datastore: Some(join::DatastoreInfo::of(etcd)?) }
            }
        })
        .unwrap_or_default(),
    };
    let serving =
        k1s_pki::ServingCert::new(&pki.serving.cert_pem, &pki.serving.key_pem).map_err(ServerError::Serving)?;
    let admin = pki.client("admin", "system:admin", &["system:masters"])?;
    let service_account =
        k1s_apiserver::serviceaccount::TokenConfig::for_cluster_domain(pki.service_account_key()?, domain);

    // Kubelets know the API server by this name; towards the API itself it is bound to
    // `system:kubelet-api-admin` only, not in `system:masters`.
    let kubelet_client = pki.client("kube-apiserver-kubelet-client", "kube-apiserver-kubelet-client", &[])?;
    let front_proxy = pki.front_proxy()?;
    // The API server's own client certificates, renewed without a restart like the serving ones.
    let client_slot = |pair: &k1s_pki::CertPair| {
        k1s_pki::ClientCert::new(&pair.cert_pem, &pair.key_pem).map_err(ServerError::ClientCert)
    };
    let kubelet_client_slot = client_slot(&kubelet_client)?;
    let front_proxy_slot = client_slot(&front_proxy.client)?;
    let pod_security = match &config.pod_security_admission_config_file {
        Some(path) => k1s_apiserver::pod_security::Config::load(path).map_err(ServerError::PodSecurity)?,
        None => k1s_apiserver::pod_security::Config::default(),
    };
    systemd::status("starting the API server");
    // One identity per server, kept across restarts: its endpoint lease and its leader election.
    let identity = leader_identity(&server_dir)?;
    // The API server stops last (see `supervise`).
    let api_cancel = CancellationToken::new();
    let api = k1s_apiserver::start(
        k1s_apiserver::Config {
            listen: SocketAddr::new(config.bind_address, config.https_listen_port),
            tls: TlsMaterial {
                ca_pem: pki.ca.cert_pem.clone(),
                cert_pem: pki.serving.cert_pem.clone(),
                key_pem: pki.serving.key_pem.clone(),
                reloadable: Some(serving.clone()),
            },
            store: store.clone(),
            advertise: config
                .advertise_address
                .map(|a| SocketAddr::new(a, 0).ip().to_string())
                .map(|ip| format!("{ip}:{}", config.https_listen_port)),
            bookmark_interval: config.bookmark_interval,
            service_cidr: config.service_cidr.clone(),
            endpoint_ip: config.advertise_address.unwrap_or(config.node_ip),
            server_identity: identity.clone(),
            service_account,
            kubelet_client: Some(k1s_apiserver::KubeletClientConfig {
                ca_pem: pki.ca.cert_pem.clone(),
                cert_pem: kubelet_client.cert_pem.clone(),
                key_pem: kubelet_client.key_pem.clone(),
                reloadable: Some(kubelet_client_slot.clone()),
            }),
            front_proxy: Some(k1s_apiserver::aggregator::FrontProxyConfig {
                ca_pem: front_proxy.ca.cert_pem.clone(),
                client_cert_pem: front_proxy.client.cert_pem.clone(),
                client_key_pem: front_proxy.client.key_pem.clone(),
                reloadable: Some(front_proxy_slot.clone()),
            }),
            pod_security,
            join: Some(join_endpoint),
            authentication,
            anonymous_auth: config.anonymous_auth,
            audit,
        },
        api_cancel.clone(),
    )
    .await?;
    let port = api.local_addr.port();
    let api_url = format!("https://127.0.0.1:{port}");
    let cred = server_dir.join("cred");
    mkdir(&cred)?;
    // The built-in add-ons (the kube-dns Service, the local-path class) are manifests like the
    // user's: they exist once the deployer's first pass is done, before the kubeconfig appears.
    systemd::status("applying the manifests folder");
    let deployer = start_deployer(&config, &pki, &server_dir, &api_url, cancel.clone()).await?;
    let kubeconfig = k1s_pki::kubeconfig(&format!("https://127.0.0.1:{port}"), &pki.ca.cert_pem, &admin);
    k1s_pki::write_kubeconfig(&config.write_kubeconfig, &kubeconfig, config.write_kubeconfig_mode)?;
    tracing::info!(path = %config.write_kubeconfig.display(), port, "wrote kubeconfig");
    if config.disable_agent {
        systemd::notify("READY=1");
        systemd::status("the API serves (no node agent)");
    }

    let mut reloadable = vec![(tls_dir.join("serving-kube-apiserver.crt"), serving)];
    // On etcd, snapshots hold etcd's own (its Maintenance API's), scheduled as well.
    let mut components = snapshot::start(&store, &config.data_dir, &config.node_name, &config.snapshots, &cancel)?;
    components.push(secrets_encrypt::start(&store, &config.data_dir, encryption, &cancel)?);
    // A SIGTERM while the components start (containerd not ready yet, say) is a shutdown like any
    // other: what did start stops in order below, and the server exits 0.
    match start_components(&config, &pki, &server_dir, &identity, &api_url, &mut reloadable, cancel.clone()).await {
        Ok(started) => components.extend(started),
        Err(e) if cancel.is_cancelled() => {
            tracing::info!(error = %k1s_api::errors::chain(&e), "stopped while starting the components")
        }
        Err(e) => return Err(e),
    }
    components.push(Running { name: "the API server", task: api.task });
    let compactor = tokio::spawn(compact_periodically(store.clone(), config.compaction_interval, cancel.clone()));
    components.push(Running { name: "store compaction", task: compactor });
    components.push(deployer);
    let ready = if config.disable_agent {
        None
    } else {
        systemd::status(&format!("waiting for node {} to be Ready", config.node_name));
        let client = component_client(&pki, &cred, &api_url, SUPERVISOR).await?;
        Some(tokio::spawn(supervise_node(client, config.node_name.clone(), cancel.clone())))
    };
    let mut kubeconfigs = vec![certificates::Kubeconfig {
        file: "admin".into(),
        path: config.write_kubeconfig.clone(),
        mode: config.write_kubeconfig_mode,
    }];
    for file in ["controller", "scheduler", "kubelet", "local-path-provisioner", "proxy", "dns", "deploy", "supervisor"]
    {
        let path = cred.join(format!("{file}.kubeconfig"));
        if path.exists() {
            kubeconfigs.push(certificates::Kubeconfig { file: file.into(), path, mode: 0o600 });
        }
    }
    let clients = vec![
        (tls_dir.join("client-kube-apiserver-kubelet-client.crt"), kubelet_client_slot),
        (tls_dir.join("client-front-proxy.crt"), front_proxy_slot),
    ];
    let renewal = certificates::Renewal::new(
        tls_dir,
        validity,
        pki.ca.cert_pem.clone(),
        api_url,
        reloadable,
        clients,
        kubeconfigs,
    );
    // Supervised like the components: if renewal ends, the server stops instead of running on
    // towards expired certificates.
    let renewer = tokio::spawn(certificates::renew_periodically(renewal, cancel.clone()));
    components.push(Running { name: "certificate renewal", task: renewer });
    let result = supervise(components, &cancel, Duration::from_secs(10), Some(&api_cancel)).await;
    systemd::notify("STOPPING=1");
    tracing::info!("shutting down");
    for t in [ready, watchdog].into_iter().flatten() {
        let _ = t.await;
    }
    result
}

/// `k1s server`'s own identity towards the API: it labels its node's roles and waits for the
/// node to be Ready (the `system:k1s-supervisor` role: nodes only).
const SUPERVISOR: Identity<'static> =
    Identity { file: "supervisor", cn: "system:k1s-supervisor", orgs: &[], agent: "k1s-server" };

/// The labels of a server's node, which the supervisor sets as k3s's server does: a kubelet may
/// not set `node-role.kubernetes.io/*` on its own Node (NodeRestriction).
const NODE_ROLE_LABELS: [&str; 2] = ["node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"];

/// Labels the node with its roles once it has registered, then sends `READY=1` once it reports
/// Ready.
async fn supervise_node(client: kube::Client, node: String, cancel: CancellationToken) {
    use k8s_openapi::api::core::v1::Node;
    let ready = |n: Option<&Node>| {
        n.and_then(|n| n.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "Ready"))
            .is_some_and(|c| c.status == "True")
    };
    let labelled = |n: Option<&Node>| {
        let labels = n.and_then(|n| n.metadata.labels.as_ref());
        NODE_ROLE_LABELS.iter().all(|l| labels.and_then(|m| m.get(*l)).is_some_and(|v| v == "true"))
    };
    loop {
        let attempt = async {
            let nodes = kube::Api::<Node>::all(client.clone());
            let registered = kube::runtime::wait::await_condition(nodes.clone(), &node, |n: Option<&Node>| n.is_some())
                .await
                .map_err(|e| e.to_string())?;
            if !labelled(registered.as_ref()) {
                let labels: serde_json::Map<String, serde_json::Value> =
                    NODE_ROLE_LABELS.iter().map(|l| (l.to_string(), serde_json::json!("true"))).collect();
                let patch = serde_json::json!({"metadata": {"labels": labels}});
                nodes
                    .patch(&node, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch))
                    .await
                    .map_err(|e| format!("labelling the node's roles: {e}"))?;
                tracing::info!(node = %node, "labelled the node's roles");
            }
            kube::runtime::wait::await_condition(nodes, &node, ready).await.map_err(|e| e.to_string())
        };
        tokio::select! {
            _ = cancel.cancelled() => return,
            r = attempt => match r {
                Ok(_) => {
                    tracing::info!(node = %node, "node Ready: notifying systemd");
                    systemd::notify("READY=1");
                    systemd::status(&format!("node {node} Ready"));
                    return;
                }
                Err(e) => tracing::warn!(error = %e, "watching the node for readiness; retrying"),
            },
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

/// A built-in component: the file its credentials are kept in, its user (CN and
/// organizations) and its upstream name, which its User-Agent (and so its field manager) starts with.
struct Identity<'a> {
    file: &'a str,
    cn: &'a str,
    orgs: &'a [&'a str],
    agent: &'a str,
}

/// Writes a kubeconfig for a built-in component's own identity and connects with it.
async fn component_client(
    pki: &Pki,
    cred_dir: &std::path::Path,
    api_url: &str,
    id: Identity<'_>,
) -> Result<kube::Client, ServerError> {
    let pair = pki.client(id.file, id.cn, id.orgs)?;
    let path = cred_dir.join(format!("{}.kubeconfig", id.file));
    k1s_pki::write_kubeconfig(&path, &k1s_pki::kubeconfig(api_url, &pki.ca.cert_pem, &pair), 0o600)?;
    Ok(k1s_runtime::connect(&path, &k1s_runtime::user_agent(id.agent)).await?)
}

/// How long the start waits for the deployer's first pass over the manifests folder.
const FIRST_DEPLOY_TIMEOUT: Duration = Duration::from_secs(30);

/// Writes the built-in manifests and starts the deployer of `<data-dir>/server/manifests` with
/// its own identity (not in `system:masters`: its `system:k1s-deploy` role has every verb on
/// every resource, as manifests may hold any kind, and goes through RBAC and admission like any
/// other); returns once it has applied the folder once (or [`FIRST_DEPLOY_TIMEOUT`] passed).
async fn start_deployer(
    config: &Config,
    pki: &Pki,
    server_dir: &std::path::Path,
    api_url: &str,
    cancel: CancellationToken,
) -> Result<Running, ServerError> {
    let dir = server_dir.join("manifests");
    let vars = addons::Variables {
        cluster_dns: config.cluster_dns.to_string(),
        cluster_domain: config.cluster_domain.trim_end_matches('.').to_string(),
    };
    addons::stage(&dir, &vars, |c| disabled(config, c))?;
    let client = component_client(
        pki,
        &server_dir.join("cred"),
        api_url,
        Identity { file: "deploy", cn: "system:k1s-deploy", orgs: &[], agent: "k1s-deploy" },
    )
    .await?;
    let (tx, first_pass) = tokio::sync::oneshot::channel();
    let deployer = k1s_controllers::deploy::Deployer::new(client, &dir);
    let running = Running::spawn("the manifests deployer", async move {
        if let Err(e) = deployer.run(Some(tx), cancel).await {
            tracing::error!(error = %k1s_api::errors::chain(&e), "manifests deployer stopped");
        }
    });
    if tokio::time::timeout(FIRST_DEPLOY_TIMEOUT, first_pass).await.is_err() {
        tracing::warn!(dir = %dir.display(), "the manifests folder is not applied yet; going on");
    }
    Ok(running)
}

fn disabled(config: &Config, c: Component) -> bool {
    config.disable.contains(c)
}

/// Starts the controllers and the scheduler, each as its own API client.
async fn start_components(
    config: &Config,
    pki: &Pki,
    server_dir: &std::path::Path,
    identity: &str,
    api_url: &str,
    reloadable: &mut Vec<(PathBuf, k1s_pki::ServingCert)>,
    cancel: CancellationToken,
) -> Result<Vec<Running>, ServerError> {
    let cred = server_dir.join("cred");
    std::fs::create_dir_all(&cred).map_err(|source| ServerError::DataDir { path: cred.clone(), source })?;
    let mut tasks = Vec::new();
    // Controllers and the scheduler run only while this server holds their Lease, as upstream's
    // kube-controller-manager and kube-scheduler do.
    if !disabled(config, Component::Controllers) {
        let client = component_client(
            pki,
            &cred,
            api_url,
            Identity {
                file: "controller",
                cn: "system:kube-controller-manager",
                orgs: &[],
                agent: "kube-controller-manager",
            },
        )
        .await?;
        let off = config.disable.controllers();
        let root_ca_pem = pki.ca.cert_pem.clone();
        // The API server trusts client certificates of this CA: it signs approved requests.
        let cluster_signing = pki.ca.clone();
        let election = k1s_runtime::leader::LeaderElection::new("kube-controller-manager", identity);
        let controllers = election.run(client.clone(), cancel.clone(), move |leading| {
            let ctx = std::sync::Arc::new(k1s_controllers::Context {
                recorder: k1s_runtime::events::Recorder::new(client.clone(), "controller-manager", None),
                client: client.clone(),
                cancel: leading,
                root_ca_pem: root_ca_pem.clone(),
                cluster_signing: Some(cluster_signing.clone()),
            });
            let off = off.clone();
            async move { k1s_controllers::run(ctx, &off).await }
        });
        tasks.push(Running::spawn("the controllers", controllers));
    }
    if !disabled(config, Component::Scheduler) {
        let client = component_client(
            pki,
            &cred,
            api_url,
            Identity { file: "scheduler", cn: "system:kube-scheduler", orgs: &[], agent: "kube-scheduler" },
        )
        .await?;
        let election = k1s_runtime::leader::LeaderElection::new("kube-scheduler", identity);
        let scheduler =
            election.run(client.clone(), cancel.clone(), move |leading| k1s_scheduler::run(client.clone(), leading));
        tasks.push(Running::spawn("the scheduler", scheduler));
    }
    if !config.disable_agent {
        match agent::start(config, pki, &cred, api_url, reloadable, cancel.clone()).await {
            Ok(agent) => tasks.extend(agent),
            // Stopped while containerd was starting: the controllers and the scheduler started
            // above still stop in order (releasing their Leases).
            Err(e) if cancel.is_cancelled() => {
                tracing::info!(error = %k1s_api::errors::chain(&e), "stopped while starting the node agent");
                return Ok(tasks);
            }
            Err(e) => return Err(e),
        }
        if !disabled(config, Component::Proxy) {
            let client = component_client(
                pki,
                &cred,
                api_url,
                Identity { file: "proxy", cn: "system:kube-proxy", orgs: &[], agent: "kube-proxy" },
            )
            .await?;
            let mut ips = vec![config.node_ip];
            if let Some(a) = config.advertise_address {
                if a != config.node_ip {
                    ips.push(a);
                }
            }
            let proxy =
                k1s_proxy::ProxyConfig::new(&config.node_name, &ips, &config.cluster_cidr, &config.service_cidr)
                    .map_err(ServerError::Proxy)?;
            tasks.push(Running::spawn("the service proxy", k1s_proxy::run(client, proxy, cancel.clone())));
        }
        if !disabled(config, Component::Dns) {
            let client = component_client(
                pki,
                &cred,
                api_url,
                Identity { file: "dns", cn: "system:k1s-dns", orgs: &[], agent: "k1s-dns" },
            )
            .await?;
            let mut dns = k1s_dns::DnsConfig::new(config.cluster_dns, &config.cluster_domain);
            if let Some(up) = &config.dns_upstreams {
                dns.upstream = up.clone();
            }
            let cancel = cancel.clone();
            tasks.push(Running::spawn("the cluster DNS", async move {
                if let Err(e) = k1s_dns::run(client, dns, cancel).await {
                    tracing::error!(error = %k1s_api::errors::chain(&e), "cluster DNS failed");
                }
            }));
        }
    }
    Ok(tasks)
}

/// This server's leader-election identity (upstream: `<hostname>_<uuid>`), made once and kept in
/// `server/identity`, so a restarted server holds its own Leases again at once instead of
/// waiting for them to expire.
fn leader_identity(server_dir: &std::path::Path) -> Result<String, ServerError> {
    let path = server_dir.join("identity");
    if let Ok(s) = std::fs::read_to_string(&path) {
        let s = s.trim();
        if !s.is_empty() && s.len() <= 253 && !s.contains(char::is_whitespace) {
            return Ok(s.to_string());
        }
    }
    let identity = format!("{}_{}", hostname(), uuid::Uuid::new_v4());
    std::fs::write(&path, format!("{identity}\n")).map_err(|source| ServerError::DataDir { path, source })?;
    Ok(identity)
}

/// Removes what the node agent leaves on the host after exit so that pods keep serving: the
/// proxy's nftables table and routing rules, and the cluster DNS interface. Each step is attempted;
/// the result of each is reported.
pub async fn uninstall_networking() -> Vec<(&'static str, Result<(), String>)> {
    let proxy = k1s_proxy::uninstall().await.map_err(|e| k1s_api::errors::chain(&e));
    let dns = k1s_dns::uninstall().await.map(|_| ()).map_err(|e| k1s_api::errors::chain(&e));
    vec![("nftables table ip k1s and service CIDR routing rules", proxy), ("cluster DNS interface", dns)]
}

/// Every interval, drops the event log older than the revision seen one interval ago.
async fn compact_periodically(store: Store, every: Duration, cancel: CancellationToken) {
    let mut previous = store.current_revision();
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        if let Err(e) = store.compact(previous).await {
            tracing::warn!(error = %e, revision = previous, "compaction failed");
        }
        previous = store.current_revision();
    }
}

/// The certificates under `data_dir` (`server/tls`), for `k1s certificate check`.
pub fn certificates(data_dir: &std::path::Path) -> Result<Vec<k1s_pki::CertInfo>, k1s_pki::PkiError> {
    k1s_pki::list(&data_dir.join("server").join("tls"))
}

/// `k1s certificate rotate`: re-issues the leaf certificates under `data_dir` (those of
/// `service` only, when given) for the usual validity.
pub fn rotate_certificates(
    data_dir: &std::path::Path,
    service: Option<&str>,
) -> Result<Vec<k1s_pki::Rotated>, k1s_pki::PkiError> {
    k1s_pki::rotate(&data_dir.join("server").join("tls"), service, k1s_pki::Validity::default())
}

/// The node's own address: the first global IPv4 address of a non-k1s interface.
pub fn detect_node_ip() -> Option<IpAddr> {
    k1s_kubelet::host::detect_node_ip()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn until_cancelled(cancel: &CancellationToken) -> impl std::future::Future<Output = ()> + Send + 'static {
        let c = cancel.clone();
        async move { c.cancelled().await }
    }

    /// Issue 16: the kubelet stopped and the API kept serving a node that never registered.
    #[tokio::test]
    async fn a_component_that_stops_stops_the_server_with_its_name() {
        let cancel = CancellationToken::new();
        let components =
            vec![Running::spawn("the API server", until_cancelled(&cancel)), Running::spawn("the kubelet", async {})];
        let r = supervise(components, &cancel, Duration::from_secs(5), None).await;
        assert!(matches!(r, Err(ServerError::ComponentStopped { component: "the kubelet" })), "{r:?}");
        assert!(cancel.is_cancelled(), "the other components are told to stop");
    }

    #[tokio::test]
    async fn cancelling_stops_every_component_without_an_error() {
        let cancel = CancellationToken::new();
        let components = vec![
            Running::spawn("the API server", until_cancelled(&cancel)),
            Running::spawn("the kubelet", until_cancelled(&cancel)),
        ];
        let c = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            c.cancel();
        });
        supervise(components, &cancel, Duration::from_secs(5), None).await.expect("a clean stop");
    }
}
