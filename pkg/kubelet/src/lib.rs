//! k1s-kubelet: the node agent. Registers the Node and its Lease, runs the pods bound to it
//! through CRI (one worker per pod), probes them, mounts their volumes, reports their status,
//! and serves logs/exec/attach/port-forward.
//!
//! It reaches the API only through a client with the node's identity; it must never depend on
//! the API server or the store.

pub mod cni;
pub mod containerd;
pub mod host;
pub mod image_archive;
pub mod image_import;
pub mod image_save;
pub mod images;
pub mod local_path;
pub mod logs;
pub mod node;
pub mod pods;
pub mod registries;
pub mod runtime_state;
pub mod server;

use k1s_cri::{ImageService, RuntimeService};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The version the Node reports.
pub const KUBELET_VERSION: &str = concat!("v1.35.0+k1s-", env!("CARGO_PKG_VERSION"));

/// The kubelet's settings, validated by the caller.
#[derive(Clone, Debug)]
pub struct Config {
    pub node_name: String,
    pub node_ip: IpAddr,
    /// Pod CIDR of this node (the cluster CIDR on a single node).
    pub pod_cidr: String,
    /// Where pod volumes and state live (`<data-dir>/agent/kubelet`).
    pub root_dir: PathBuf,
    /// Where the local-path provisioner keeps volumes (`<data-dir>/storage`).
    pub storage_dir: PathBuf,
    /// Where container logs are written (`/var/log/pods`).
    pub pod_log_dir: PathBuf,
    /// When container logs are rotated (`--container-log-max-size`, `--container-log-max-files`).
    pub log_rotation: logs::rotation::RotationPolicy,
    pub cluster_dns: Vec<IpAddr>,
    pub cluster_domain: String,
    pub max_pods: u32,
    /// How many sandbox or container starts run at once (the node's parallelism). Starting
    /// runs shims, runc and CNI plugins, which are CPU-bound: on a small node a hundred at once
    /// take far longer in total than a few at a time, and starve the control plane.
    pub parallel_starts: usize,
    pub kubelet_port: u16,
    /// Parent cgroup of every pod (`/k1s` → `/k1s/pod<uid>` in each hierarchy).
    pub cgroup_root: String,
    /// `registries.yaml` credentials for pulls.
    pub registries: Option<registries::Registries>,
    /// TLS of the kubelet's own HTTPS server (logs, exec, attach, port-forward).
    pub server_tls: server::ServerTls,
}

/// The default `parallel_starts`: two per CPU.
pub fn default_parallel_starts() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1) * 2
}

/// What every part of the kubelet shares.
pub struct Shared {
    pub config: Config,
    pub client: kube::Client,
    pub runtime: Arc<dyn RuntimeService>,
    pub images: Arc<dyn ImageService>,
    pub recorder: Arc<k1s_runtime::events::Recorder>,
    pub cancel: CancellationToken,
    /// RFC 3339 start time, for node condition transitions.
    pub started_at: String,
    /// `containerd://1.6.20` as CRI reports it.
    pub runtime_version: String,
    pub pulls: images::PullCoordinator,
    /// Permits for sandbox and container starts (`Config::parallel_starts`).
    pub start_slots: tokio::sync::Semaphore,
    /// The port the kubelet server actually listens on.
    pub kubelet_port: std::sync::atomic::AtomicU16,
    /// All Services, for the containers' service environment variables.
    pub services: pods::env::services::ServiceCache,
    /// The runtime's health as last checked: the node's Ready condition.
    pub runtime_state: std::sync::Mutex<runtime_state::RuntimeState>,
    /// The Ready condition's status last reported and since when (its lastTransitionTime).
    pub ready_transition: std::sync::Mutex<(String, String)>,
}

impl Shared {
    /// Records an event without waiting for the API: events must never slow a pod down.
    pub fn event(
        &self,
        object: &k8s_openapi::api::core::v1::ObjectReference,
        kind: k1s_runtime::events::EventType,
        reason: &str,
        message: &str,
    ) {
        let (recorder, object, reason, message) =
            (self.recorder.clone(), object.clone(), reason.to_string(), message.to_string());
        tokio::spawn(async move { recorder.record(&object, kind, &reason, &message).await });
    }
}

#[derive(Debug, thiserror::Error)]
pub enum KubeletError {
    #[error(transparent)]
    Node(#[from] node::NodeError),
    #[error("starting the kubelet server")]
    Server(#[from] server::ServerError),
    #[error("preparing {path}")]
    Dir { path: PathBuf, source: std::io::Error },
}

/// The kubelet's API clients.
pub struct Clients {
    /// With the node's identity (`system:node:<name>`), which the Node authorizer and
    /// NodeRestriction narrow to this node's pods and what they reference.
    pub node: kube::Client,
    /// For the local-path provisioner, which creates and deletes PersistentVolumes.
    pub provisioner: kube::Client,
}

/// Runs the kubelet until `cancel` fires.
pub async fn run(
    config: Config,
    clients: Clients,
    runtime: Arc<dyn RuntimeService>,
    images: Arc<dyn ImageService>,
    cancel: CancellationToken,
) -> Result<(), KubeletError> {
    for d in [&config.root_dir, &config.pod_log_dir] {
        std::fs::create_dir_all(d).map_err(|source| KubeletError::Dir { path: d.clone(), source })?;
    }
    // containerd accepts connections before its CRI plugin answers: wait for it.
    let Some(version) = runtime_state::wait_for_version(&*runtime, &cancel).await else {
        return Ok(());
    };
    let runtime_version = format!("{}://{}", version.runtime_name, version.runtime_version);
    let host = host::gather(&config.root_dir);
    let parallel_starts = config.parallel_starts.max(1);
    let Clients { node: client, provisioner } = clients;
    let shared = Arc::new(Shared {
        recorder: Arc::new(k1s_runtime::events::Recorder::new(client.clone(), "kubelet", Some(&config.node_name))),
        services: pods::env::services::ServiceCache::spawn(client.clone(), cancel.clone()),
        config,
        client,
        runtime,
        images,
        cancel: cancel.clone(),
        started_at: jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        runtime_version,
        pulls: images::PullCoordinator::default(),
        start_slots: tokio::sync::Semaphore::new(parallel_starts),
        kubelet_port: std::sync::atomic::AtomicU16::new(0),
        runtime_state: std::sync::Mutex::new(runtime_state::RuntimeState::default()),
        ready_transition: std::sync::Mutex::new((String::new(), String::new())),
    });
    runtime_state::check(&*shared.runtime, &shared.runtime_state).await;
    let srv = server::serve(
        server::ServerConfig {
            listen: std::net::SocketAddr::new(std::net::IpAddr::from([0, 0, 0, 0]), shared.config.kubelet_port),
            tls: shared.config.server_tls.clone(),
            runtime: shared.runtime.clone(),
            auth: Arc::new(server::auth::Authorizer::new(Arc::new(server::auth::ApiDelegate::new(
                shared.client.clone(),
            )))),
            node_name: shared.config.node_name.clone(),
        },
        cancel.clone(),
    )
    .await?;
    // Port 0 picked a port: the Node must advertise the real one.
    shared.kubelet_port.store(srv.local_addr.port(), std::sync::atomic::Ordering::Release);
    node::register(&shared, &host).await?;
    let heartbeat = tokio::spawn(node::heartbeat(shared.clone(), host));
    tokio::spawn(local_path::run(shared.clone(), provisioner));
    let rotation = logs::rotation::LogRotator::new(shared.runtime.clone(), &shared.config.log_rotation)
        .map(|r| tokio::spawn(r.run(cancel.clone())));
    pods::run(shared.clone()).await;
    let _ = heartbeat.await;
    if let Some(r) = rotation {
        let _ = r.await;
    }
    let _ = srv.task.await;
    Ok(())
}
