//! k1s-runtime: what every built-in component shares to reach the API like a separate process
//! would: a client built from the component's own kubeconfig (its own identity), an event
//! recorder that deduplicates like upstream's, and the controller runtime: informers
//! ([`informer`]), a controller declared by what it reconciles, owns and watches and run with a
//! de-duplicating queue and per-object back-off ([`controller`]), a client-go style work queue
//! for keys that outlive their objects ([`workqueue`]), one [`backoff`], and API errors
//! classified by status code and cause ([`api_error`]). [`connect`]ed clients follow their
//! kubeconfig, so a renewed client certificate is used without a restart.
//!
//! It must never depend on the API server or the store: everything goes over HTTPS.

pub mod api_error;
pub mod backoff;
pub mod changes;
mod connect;
pub mod controller;
pub mod events;
pub mod informer;
pub mod leader;
pub mod workqueue;

pub use connect::{connect, ConnectError, FOLLOW_EVERY};
pub use kube;

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

#[cfg(test)]
mod tests {
    #[test]
    fn user_agent_starts_with_the_component_as_upstreams_do() {
        let ua = super::user_agent("kube-controller-manager");
        assert!(ua.starts_with("kube-controller-manager/v1.35.0"), "{ua}");
        assert!(ua.contains(" (linux/"), "{ua}");
    }
}
