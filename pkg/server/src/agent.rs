//! The node half of `k1s server`: containerd (supervised, or an existing one), the CNI
//! config, registry hosts, and the kubelet with the node's own identity.

use crate::{component_client, Config, Identity, Running, ServerError};
use k1s_kubelet::containerd::{ensure_shared_mount, ContainerdConfig, HostFacts, Supervisor, SupervisorConfig};
use k1s_kubelet::registries::Registries;
use k1s_pki::Pki;
use std::path::Path;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Plain-HTTP registries k1s always knows (the local test registry).
const LOCAL_REGISTRY: &str = "127.0.0.1:5000";

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("reading registries config")]
    Registries(#[from] k1s_kubelet::registries::RegistriesError),
    #[error("detecting host facts")]
    Host(#[from] k1s_kubelet::containerd::HostFactsError),
    #[error("writing the containerd config")]
    ContainerdConfig(#[from] k1s_kubelet::containerd::ConfigError),
    #[error("writing the CNI config")]
    Cni(#[from] k1s_kubelet::cni::CniError),
    #[error("making the kubelet root a shared mount")]
    Mount(#[from] k1s_kubelet::containerd::MountError),
    #[error("starting containerd")]
    Supervisor(#[from] k1s_kubelet::containerd::SupervisorError),
    #[error("preparing the images folder")]
    Images(#[from] crate::images::ImagesError),
    #[error("connecting to the container runtime at {endpoint}")]
    Cri { endpoint: String, source: k1s_cri::CriError },
}

/// Starts containerd (unless an endpoint is given) and the kubelet. The kubelet's serving
/// certificate slot joins `reloadable` (file, slot) for the certificate renewal.
pub async fn start(
    config: &Config,
    pki: &Pki,
    cred_dir: &Path,
    api_url: &str,
    reloadable: &mut Vec<(std::path::PathBuf, k1s_pki::ServingCert)>,
    cancel: CancellationToken,
) -> Result<Vec<Running>, ServerError> {
    let mut tasks = Vec::new();
    let mut registries = Registries::load(&config.registries_config).map_err(AgentError::from)?;
    registries.add_plain_http_registry(LOCAL_REGISTRY);
    let kubelet_root = config.data_dir.join("agent").join("kubelet");
    std::fs::create_dir_all(&kubelet_root)
        .map_err(|source| ServerError::DataDir { path: kubelet_root.clone(), source })?;
    let mut containerd_status = None;
    let endpoint = match &config.container_runtime_endpoint {
        Some(ep) => ep.clone(),
        None => {
            let facts = HostFacts::detect().map_err(AgentError::from)?;
            let mut cc = ContainerdConfig::new(&config.data_dir, &config.run_dir, config.pause_image.clone(), facts);
            cc.registry_auths = registries.containerd_auths();
            // With the (IPv4) proxy running, pod egress is masqueraded by one rule in its table.
            let ip_masq = crate::disabled(config, crate::Component::Proxy) || config.cluster_cidr.contains(':');
            k1s_kubelet::cni::write_conflist(&cc.cni_conf_dir, &config.cluster_cidr, "cni0", None, ip_masq)
                .map_err(AgentError::from)?;
            registries.write_hosts_dir(&cc.registry_config_dir).map_err(AgentError::from)?;
            cc.write().map_err(AgentError::from)?;
            ensure_shared_mount(&kubelet_root).map_err(AgentError::from)?;
            crate::systemd::status("starting containerd");
            let handle = Supervisor::new(SupervisorConfig::for_config(&cc))
                .start(cancel.clone())
                .await
                .map_err(AgentError::from)?;
            let ep = format!("unix://{}", handle.socket().display());
            containerd_status = Some(handle.subscribe());
            tasks.push(Running::spawn("containerd's supervision", async move {
                if let Err(e) = handle.join().await {
                    tracing::error!(error = %e, "containerd supervision ended");
                }
            }));
            ep
        }
    };
    crate::systemd::status("connecting to the container runtime");
    let runtime = Arc::new(
        k1s_cri::RemoteRuntime::connect(&endpoint)
            .await
            .map_err(|source| AgentError::Cri { endpoint: endpoint.clone(), source })?,
    );
    // Image archives of the images folder are in containerd before the kubelet starts pods.
    crate::systemd::status("importing image archives");
    let watch =
        crate::images::start_folder(&config.data_dir, &endpoint, cancel.clone()).await.map_err(AgentError::from)?;
    tasks.push(Running::spawn("the images folder watch", watch));
    let node = config.node_name.clone();
    let cn = format!("system:node:{node}");
    let id = Identity { file: "kubelet", cn: &cn, orgs: &["system:nodes"], agent: "kubelet" };
    let client = component_client(pki, cred_dir, api_url, id).await?;
    if let Some(status) = containerd_status {
        let recorder = k1s_runtime::events::Recorder::new(client.clone(), "kubelet", Some(&config.node_name));
        let node = config.node_name.clone();
        tasks.push(Running::spawn("containerd's events", containerd_events(status, recorder, node)));
    }
    // The local-path provisioner creates and deletes PersistentVolumes, which no kubelet may:
    // it has an identity (and role) of its own, as k3s's runs under its own ServiceAccount.
    let id = Identity {
        file: "local-path-provisioner",
        cn: "system:k1s-local-path-provisioner",
        orgs: &[],
        agent: "local-path-provisioner",
    };
    let provisioner = component_client(pki, cred_dir, api_url, id).await?;
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_default();
    let mut sans =
        vec![config.node_ip.to_string(), "127.0.0.1".to_string(), "localhost".to_string(), config.node_name.clone()];
    if !host.is_empty() {
        sans.push(host);
    }
    let serving = pki.serving("kubelet", &format!("system:node:{}", config.node_name), &sans)?;
    let slot = k1s_pki::ServingCert::new(&serving.cert_pem, &serving.key_pem).map_err(ServerError::Serving)?;
    reloadable.push((pki.dir().join("serving-kubelet.crt"), slot.clone()));
    let kubelet_config = k1s_kubelet::Config {
        node_name: node,
        node_ip: config.node_ip,
        pod_cidr: config.cluster_cidr.clone(),
        root_dir: kubelet_root,
        storage_dir: config.data_dir.join("storage"),
        pod_log_dir: config.pod_log_dir.clone(),
        log_rotation: config.container_logs.clone(),
        cluster_dns: vec![config.cluster_dns],
        cluster_domain: config.cluster_domain.clone(),
        max_pods: 110,
        parallel_starts: k1s_kubelet::default_parallel_starts(),
        kubelet_port: config.kubelet_port,
        cgroup_root: "/k1s".into(),
        // With our own containerd, registries.yaml credentials live in its config: credentials in
        // a pull request would replace them for every mirror.
        registries: config.container_runtime_endpoint.is_some().then_some(registries),
        server_tls: k1s_kubelet::server::ServerTls {
            ca_pem: pki.ca.cert_pem.clone(),
            cert_pem: serving.cert_pem,
            key_pem: serving.key_pem,
            reloadable: Some(slot),
        },
    };
    crate::systemd::status("starting the kubelet");
    let cancel_k = cancel.clone();
    let images = runtime.clone();
    tasks.push(Running::spawn("the kubelet", async move {
        let clients = k1s_kubelet::Clients { node: client, provisioner };
        if let Err(e) = k1s_kubelet::run(kubelet_config, clients, runtime, images, cancel_k).await {
            tracing::error!(error = %k1s_api::errors::chain(&e), "kubelet stopped");
        }
    }));
    Ok(tasks)
}

/// Tells on the Node, as Events, each time the supervised containerd exits (with the back-off
/// before the next try) and each time it is back; ends when the supervision does.
async fn containerd_events(
    mut status: tokio::sync::watch::Receiver<k1s_kubelet::containerd::ContainerdStatus>,
    recorder: k1s_runtime::events::Recorder,
    node: String,
) {
    // As upstream's kubelet refers to its node in events: the node's name as its uid.
    let node_ref = k1s_runtime::events::reference("v1", "Node", None, &node, Some(&node));
    let mut seen = status.borrow().clone();
    while status.changed().await.is_ok() {
        let now = status.borrow_and_update().clone();
        for e in k1s_kubelet::containerd::status_events(&seen, &now) {
            let kind = if e.warning {
                k1s_runtime::events::EventType::Warning
            } else {
                k1s_runtime::events::EventType::Normal
            };
            recorder.record(&node_ref, kind, e.reason, &e.message).await;
        }
        seen = now;
    }
}
