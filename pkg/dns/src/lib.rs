//! k1s-dns: the cluster DNS that k1s serves itself (in place of CoreDNS) on the `--cluster-dns`
//! address, behind the `kube-system/kube-dns` Service.
//!
//! - [`records`]: the DNS view of Services, EndpointSlices and Namespaces (pure).
//! - [`resolve()`]: one question ▶ one answer, per the Kubernetes DNS specification (pure).
//! - [`watch`]: reflectors that rebuild the records on every API change.
//! - [`server`]: UDP and TCP listeners speaking DNS through `hickory-proto`.
//! - [`forward`]: names outside the cluster go to the host's resolvers.
//! - [`iface`]: the dummy interface `k1s-dns0` that makes the address local.
//!
//! It reaches the API only through the `kube::Client` it is given (its own identity) and must
//! never depend on the API server or the store.

pub mod forward;
pub mod iface;
pub mod records;
pub mod resolve;
pub mod server;
pub mod watch;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

pub use forward::{host_upstreams, Forwarder};
pub use iface::INTERFACE;
pub use records::Records;
pub use resolve::{resolve, Answer, Query, Response};

/// Where and what to serve.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnsConfig {
    /// The address to answer on (the `--cluster-dns` address, 10.43.0.10 by default).
    pub listen: IpAddr,
    /// UDP and TCP port (53); 0 picks one free for both.
    pub port: u16,
    /// `cluster.local` by default.
    pub cluster_domain: String,
    /// Resolvers for names outside the cluster (see [`host_upstreams`]).
    pub upstream: Vec<SocketAddr>,
    /// A dummy interface to create and put `listen` on; `None` when the address is already
    /// local (loopback in tests).
    pub interface: Option<String>,
}

impl DnsConfig {
    /// Serves `cluster_domain` on `listen`:53, made local on [`INTERFACE`], forwarding to the
    /// host's resolvers from `/etc/resolv.conf`.
    pub fn new(listen: IpAddr, cluster_domain: &str) -> DnsConfig {
        DnsConfig {
            listen,
            port: 53,
            cluster_domain: cluster_domain.to_string(),
            upstream: host_upstreams(std::path::Path::new("/etc/resolv.conf"), listen),
            interface: Some(INTERFACE.to_string()),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DnsError {
    #[error("making the cluster DNS address {ip} local")]
    LocalAddress { ip: IpAddr, source: iface::IfaceError },
    #[error("binding the DNS server to {addr}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("removing the cluster DNS interface")]
    Uninstall(#[source] iface::IfaceError),
}

/// A DNS server bound to its sockets, not serving yet.
pub struct DnsServer {
    config: DnsConfig,
    udp: tokio::net::UdpSocket,
    tcp: tokio::net::TcpListener,
    local_addr: SocketAddr,
}

impl DnsServer {
    /// Makes the address local (when an interface is configured) and binds UDP and TCP on it.
    pub async fn bind(config: DnsConfig) -> Result<DnsServer, DnsError> {
        if let Some(link) = &config.interface {
            let local = |source| DnsError::LocalAddress { ip: config.listen, source };
            let netlink = iface::RtNetlink::connect().map_err(local)?;
            iface::ensure_local_address(&netlink, link, config.listen).await.map_err(local)?;
        }
        let addr = SocketAddr::new(config.listen, config.port);
        let (udp, tcp) = server::bind(addr).await.map_err(|source| DnsError::Bind { addr, source })?;
        let local_addr = udp.local_addr().map_err(|source| DnsError::Bind { addr, source })?;
        Ok(DnsServer { config, udp, tcp, local_addr })
    }

    /// The bound address (UDP and TCP share the port).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Watches the API with `client` and answers until `cancel` fires. Names in the cluster
    /// domain get SERVFAIL until the first complete listing.
    pub async fn serve(self, client: kube::Client, cancel: CancellationToken) {
        let initial = Arc::new(Records::unsynced(&self.config.cluster_domain, self.config.listen));
        let (tx, rx) = tokio::sync::watch::channel(initial);
        let handler = Arc::new(server::Handler::new(rx, Forwarder::new(self.config.upstream.clone())));
        tracing::info!(
            addr = %self.local_addr,
            domain = %self.config.cluster_domain,
            upstream = ?self.config.upstream,
            "cluster DNS serving"
        );
        let watcher = tokio::spawn(watch::maintain(
            client,
            self.config.cluster_domain.clone(),
            self.config.listen,
            tx,
            cancel.clone(),
        ));
        let udp = tokio::spawn(server::serve_udp(Arc::new(self.udp), handler.clone(), cancel.clone()));
        let tcp = tokio::spawn(server::serve_tcp(self.tcp, handler, cancel.clone()));
        for task in [watcher, udp, tcp] {
            if let Err(error) = task.await {
                tracing::error!(%error, "a cluster DNS task panicked");
            }
        }
    }
}

/// Serves cluster DNS per `config` until `cancel` fires. The address stays on its interface
/// afterwards (see [`uninstall`]).
pub async fn run(client: kube::Client, config: DnsConfig, cancel: CancellationToken) -> Result<(), DnsError> {
    DnsServer::bind(config).await?.serve(client, cancel).await;
    Ok(())
}

/// Removes [`INTERFACE`] and the address on it; returns whether it existed.
pub async fn uninstall() -> Result<bool, DnsError> {
    let netlink = iface::RtNetlink::connect().map_err(DnsError::Uninstall)?;
    iface::remove_interface(&netlink, INTERFACE).await.map_err(DnsError::Uninstall)
}
