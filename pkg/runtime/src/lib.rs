//! k1s-runtime: what every built-in component shares to reach the API like a separate process
//! would: a client built from the component's own kubeconfig (its own identity), an event
//! recorder that deduplicates like upstream's, and the controller runtime: informers
//! ([`informer`]), a controller declared by what it reconciles, owns and watches and run with a
//! de-duplicating queue and per-object back-off ([`controller`]), a client-go style work queue
//! for keys that outlive their objects ([`workqueue`]), one [`backoff`], and API errors
//! classified by status code and cause ([`api_error`]).
//!
//! It must never depend on the API server or the store: everything goes over HTTPS.

pub mod api_error;
pub mod backoff;
pub mod changes;
pub mod controller;
pub mod events;
pub mod informer;
pub mod leader;
pub mod workqueue;

pub use kube;

use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("reading kubeconfig {path}: {message}")]
    Kubeconfig { path: String, message: String },
    #[error("building a client from {path}: {message}")]
    Client { path: String, message: String },
}

/// The User-Agent upstream's components send (`kube-controller-manager/v1.35.0 (linux/amd64)
/// kubernetes/<commit>`): the API server names a request's default field manager after its
/// first segment, so managedFields and server-side apply conflicts name the component.
pub fn user_agent(component: &str) -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    format!("{component}/v1.35.0+k1s-{} (linux/{arch}) kubernetes/k1s", env!("CARGO_PKG_VERSION"))
}

/// A client authenticated with the kubeconfig at `path`, sending `user_agent`.
pub async fn connect(path: &Path, user_agent: &str) -> Result<kube::Client, ConnectError> {
    let p = path.display().to_string();
    let kc = kube::config::Kubeconfig::read_from(path)
        .map_err(|e| ConnectError::Kubeconfig { path: p.clone(), message: e.to_string() })?;
    let mut cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(|e| ConnectError::Kubeconfig { path: p.clone(), message: e.to_string() })?;
    cfg.read_timeout = None;
    let ua = http::HeaderValue::from_str(user_agent)
        .map_err(|e| ConnectError::Client { path: p.clone(), message: format!("user agent {user_agent:?}: {e}") })?;
    cfg.headers.push((http::header::USER_AGENT, ua));
    kube::Client::try_from(cfg).map_err(|e| ConnectError::Client { path: p, message: e.to_string() })
}

#[cfg(test)]
mod tests {
    #[test]
    fn user_agent_starts_with_the_component_as_upstreams_do() {
        let ua = super::user_agent("kube-controller-manager");
        assert!(ua.starts_with("kube-controller-manager/v1.35.0"), "{ua}");
        assert!(ua.contains(" (linux/"), "{ua}");
    }
}
