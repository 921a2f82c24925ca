//! k1s-runtime: what every built-in component shares to reach the API like a separate process
//! would: a client built from the component's own kubeconfig (its own identity), and an event
//! recorder that deduplicates like upstream's. Reconcile loops use `kube::runtime` (watchers,
//! reflector caches, controllers with de-duplicating work queues and back-off).
//!
//! It must never depend on the API server or the store: everything goes over HTTPS.

pub mod changes;
pub mod events;

pub use kube;

use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("reading kubeconfig {path}: {message}")]
    Kubeconfig { path: String, message: String },
    #[error("building a client from {path}: {message}")]
    Client { path: String, message: String },
}

/// A client authenticated with the kubeconfig at `path`.
pub async fn connect(path: &Path) -> Result<kube::Client, ConnectError> {
    let p = path.display().to_string();
    let kc = kube::config::Kubeconfig::read_from(path)
        .map_err(|e| ConnectError::Kubeconfig { path: p.clone(), message: e.to_string() })?;
    let mut cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(|e| ConnectError::Kubeconfig { path: p.clone(), message: e.to_string() })?;
    cfg.read_timeout = None;
    kube::Client::try_from(cfg).map_err(|e| ConnectError::Client { path: p, message: e.to_string() })
}
