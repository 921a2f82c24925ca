//! k1s-apiserver: the Kubernetes API over HTTPS.
//!
//! Owns: TLS and client-certificate authentication, authorization, admission, discovery,
//! OpenAPI serving, the generic registry over the store, watch streaming and server-side
//! printing. Only this crate uses `k1s-store`; nothing here knows about controllers, the
//! kubelet or the proxy.

// `ApiError` carries a full Status (message, details, causes); errors are the cold path.
#![allow(clippy::result_large_err)]

pub mod admission;
pub mod auth;
mod discovery;
mod disruption;
pub mod error;
mod handler;
mod lifecycle;
mod object;
mod proxy;
pub mod registry;
mod request;
mod server;
mod subresources;
mod table;
mod virtual_resources;
mod watch;

pub use proxy::{KubeletClientConfig, KubeletTarget};
pub use server::{ServeError, TlsMaterial};

use k1s_store::Store;
use registry::Registry;
use serde_json::json;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub struct Config {
    pub listen: SocketAddr,
    pub tls: TlsMaterial,
    pub store: Store,
    /// Address clients are told to use (`host:port`).
    pub advertise: Option<String>,
    /// Interval of watch bookmarks.
    pub bookmark_interval: Duration,
    /// The API server's client certificate towards kubelets (CN `kube-apiserver-kubelet-client`,
    /// O `system:masters`) and the CA their serving certificates chain to. `None` answers
    /// `pods/log`, `exec`, `attach` and `portforward` with 503 (no node agent).
    pub kubelet_client: Option<KubeletClientConfig>,
}

/// A running API server.
pub struct ApiServer {
    pub local_addr: SocketAddr,
    pub task: JoinHandle<()>,
}

/// Binds, bootstraps the default namespaces and serves until `cancel` fires.
pub async fn start(config: Config, cancel: CancellationToken) -> Result<ApiServer, ServeError> {
    let tls = server::tls_config(&config.tls)?;
    let kubelet = match &config.kubelet_client {
        Some(k) => Some(Arc::new(
            proxy::KubeletClient::new(k)
                .map_err(|e| ServeError::Tls { what: "kubelet client", message: e.to_string() })?,
        )),
        None => None,
    };
    let listener = server::bind(config.listen).await?;
    let local_addr = listener.local_addr().map_err(|source| ServeError::Bind { addr: config.listen, source })?;
    let chain = admission::Chain {
        mutating: Vec::new(),
        validating: vec![Box::new(lifecycle::NamespaceLifecycle { store: config.store.clone() })],
    };
    let registry = Arc::new(Registry { store: config.store.clone(), admission: Arc::new(chain) });
    let state = Arc::new(handler::State {
        registry: registry.clone(),
        authn: Box::new(auth::UnionAuthenticator(vec![Box::new(auth::X509Authenticator)])),
        authz: Box::new(auth::UnionAuthorizer(vec![Box::new(auth::BuiltinAuthorizer)])),
        server_address: config.advertise.clone().unwrap_or_else(|| local_addr.to_string()),
        cancel: cancel.clone(),
        ready: AtomicBool::new(false),
        bookmark_interval: config.bookmark_interval,
        kubelet,
    });
    // Warm the OpenAPI documents before the first client asks.
    tokio::task::spawn_blocking(|| {
        let _ = k1s_api::openapi::get();
    });
    let task = tokio::spawn(server::serve(listener, tls, state.clone(), cancel.clone()));
    bootstrap(&registry).await;
    state.ready.store(true, Ordering::Release);
    tracing::info!(%local_addr, "API server ready");
    Ok(ApiServer { local_addr, task })
}

async fn bootstrap(registry: &Registry) {
    let Some(ns) = k1s_api::resources::find("", "v1", "namespaces") else { return };
    for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        if let Err(e) = registry.ensure(ns, obj).await {
            tracing::error!(namespace = name, error = %e, "creating default namespace failed");
        }
    }
}
