//! k1s-proxy: Service networking in nftables, the last hop of a manifest's path ("kube-proxy's
//! rules route matching Service traffic to it"), and NetworkPolicy enforcement.
//!
//! It owns one nftables table, `ip k1s`, and two policy-routing rules for the Service CIDR, and
//! never touches anything else. [`render`] turns Services, EndpointSlices, Pods, Namespaces and
//! NetworkPolicies into the desired table with no I/O (golden-tested); the [`Applier`] programs it
//! incrementally through `nft -f -`, one atomic transaction per change; [`run`] is the sync loop
//! that keeps it current from the API server and writes LoadBalancer status.
//!
//! Like kube-proxy it reaches the API only through its own client and must never depend on the
//! API server or the store.

pub mod applier;
pub mod cidr;
pub mod endpoints;
pub mod lb_status;
pub mod nft;
pub mod policy;
pub mod render;
pub mod route;
pub mod ruleset;
pub mod service;
pub mod sync;
pub mod sysctl;

pub use applier::{Applied, Applier, ApplyError};
pub use cidr::Cidr;
pub use nft::{Nft, NftCommand, NftError};
pub use render::{render, ClusterState, NodeInfo};
pub use route::{NetlinkRoutes, RouteError, Routes};
pub use ruleset::Ruleset;

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid cluster CIDR")]
    ClusterCidr(#[source] cidr::CidrError),
    #[error("invalid service CIDR")]
    ServiceCidr(#[source] cidr::CidrError),
}

/// The proxy's configuration, validated once.
#[derive(Clone, Debug)]
pub struct ProxyConfig {
    pub node_name: String,
    /// The node's IPv4 addresses (NodePorts and LoadBalancer VIPs; the first one is written to
    /// LoadBalancer status). IPv6 Services are not programmed.
    pub node_ips: Vec<Ipv4Addr>,
    pub cluster_cidr: Cidr,
    pub service_cidr: Cidr,
    /// The nft binary (default `nft` from `PATH`).
    pub nft_program: PathBuf,
    pub debounce: sync::Debounce,
}

impl ProxyConfig {
    /// Validates the CIDRs (`10.42.0.0/16`); IPv6 node addresses are ignored.
    pub fn new(
        node_name: impl Into<String>,
        node_ips: &[IpAddr],
        cluster_cidr: &str,
        service_cidr: &str,
    ) -> Result<Self, ConfigError> {
        Ok(Self {
            node_name: node_name.into(),
            node_ips: node_ips
                .iter()
                .filter_map(|ip| match ip {
                    IpAddr::V4(v4) => Some(*v4),
                    IpAddr::V6(_) => None,
                })
                .collect(),
            cluster_cidr: cluster_cidr.parse().map_err(ConfigError::ClusterCidr)?,
            service_cidr: service_cidr.parse().map_err(ConfigError::ServiceCidr)?,
            nft_program: PathBuf::from("nft"),
            debounce: sync::Debounce::default(),
        })
    }

    pub fn node_info(&self) -> NodeInfo {
        NodeInfo {
            name: self.node_name.clone(),
            ips: self.node_ips.clone(),
            cluster_cidr: self.cluster_cidr,
            service_cidr: self.service_cidr,
        }
    }
}

/// Runs the proxy until `cancel`: sets the sysctls it needs, blackholes the Service CIDR for
/// forwarded traffic, watches the API and keeps `table ip k1s` and LoadBalancer status current.
/// Failures are logged and retried; on exit the rules stay in place.
pub async fn run(client: kube::Client, config: ProxyConfig, cancel: CancellationToken) {
    sysctl::apply_required(&sysctl::ProcSysctl::default());
    if let Err(e) = NetlinkRoutes.ensure(config.service_cidr).await {
        tracing::warn!(error = %k1s_api::errors::chain(&e), "service CIDR blackhole not installed; unmatched ClusterIP traffic is still dropped by nftables");
    }
    let changes = Arc::new(tokio::sync::Notify::new());
    let (stores, tasks) = sync::start_reflectors(&client, changes.clone(), &cancel);
    if sync::wait_for_caches(&stores, &cancel).await {
        tracing::info!(node = %config.node_name, "proxy started");
        let syncer = sync::Syncer::new(
            config.node_info(),
            Applier::new(NftCommand::new(&config.nft_program)),
            lb_status::KubeStatusWriter::new(client),
            stores,
        );
        let (synced, _) = tokio::sync::watch::channel(0);
        sync::sync_loop(syncer, changes, config.debounce, synced, cancel.clone()).await;
    }
    for t in tasks {
        t.abort();
        let _ = t.await;
    }
    tracing::info!("proxy stopped; service rules left in place");
}

#[derive(Debug, thiserror::Error)]
pub enum UninstallError {
    #[error(transparent)]
    Table(#[from] ApplyError),
    #[error(transparent)]
    Routes(#[from] RouteError),
}

/// Removes `table ip k1s` and the Service CIDR routing rules, and nothing else. Both are
/// attempted; the first error is returned.
pub async fn uninstall() -> Result<(), UninstallError> {
    let table = Applier::new(NftCommand::default()).delete_table();
    let routes = NetlinkRoutes.remove().await;
    table?;
    routes?;
    Ok(())
}
