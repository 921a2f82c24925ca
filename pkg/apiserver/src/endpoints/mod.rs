//! The HTTP layer between the listener and the registry: request bodies ([`body`]), replies
//! ([`reply`]), the non-resource paths ([`nonresource`]: version, health, discovery, OpenAPI),
//! resource requests parsed once into typed commands ([`command`]) and served ([`resource`]).
//! `crate::handler` authenticates, authorizes and routes to them; nothing here reaches back
//! into it.

pub(crate) mod body;
pub(crate) mod command;
pub(crate) mod nonresource;
pub(crate) mod reply;
pub(crate) mod resource;

pub use body::Body;

use crate::auth::Authorizer;
use crate::registry::Registry;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// What the server answers with.
pub struct State {
    pub registry: Arc<Registry>,
    /// Client certificates, then bearer tokens.
    pub authn: crate::authn::RequestAuthenticator,
    pub authz: Box<dyn Authorizer>,
    /// Whether requests without credentials are served as `system:anonymous` (and authorized
    /// like any other) rather than refused with 401.
    pub anonymous_auth: bool,
    /// `host:port` clients use, for discovery's serverAddressByClientCIDRs.
    pub server_address: String,
    pub cancel: CancellationToken,
    pub ready: AtomicBool,
    pub bookmark_interval: Duration,
    /// How the API server reaches kubelets (`pods/log`, `exec`, `attach`, `portforward`).
    pub kubelet: Option<Arc<crate::kubelet_proxy::KubeletClient>>,
    /// ServiceAccount token issuing and validation.
    pub tokens: Arc<crate::serviceaccount::Tokens>,
    /// RBAC, also for the rules a SelfSubjectRulesReview lists.
    pub rbac: Arc<crate::rbac::RbacAuthorizer>,
    /// The kubelet scrapes behind `metrics.k8s.io`.
    pub metrics_api: crate::metrics_api::Cache,
    /// The request counters `/metrics` serves.
    pub monitoring: crate::monitoring::Monitoring,
    /// APIServices: which group-versions other servers serve, and the proxy to them.
    pub aggregator: Arc<crate::aggregator::Aggregator>,
    /// What joining servers are handed (`/cacerts`, `/v1-k1s/server-bootstrap`).
    pub join: Option<crate::join::JoinEndpoint>,
    /// The audit policy and backends; `None`: nothing is recorded.
    pub audit: Option<Arc<crate::audit::Auditor>>,
}
