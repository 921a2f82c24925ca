//! k1s-apiserver: the Kubernetes API over HTTPS.
//!
//! Owns: TLS and client-certificate authentication, authorization, admission, discovery,
//! OpenAPI serving, the generic registry over the store, watch streaming, server-side
//! printing, and encryption at rest (`EncryptionConfiguration` as the store's transformer). Only this crate uses `k1s-store`; nothing here knows about controllers, the
//! kubelet or the proxy.

// `ApiError` carries a full Status (message, details, causes); errors are the cold path.
#![allow(clippy::result_large_err)]

pub mod admission;
mod admission_cache;
pub mod aggregator;
pub mod audit;
pub mod auth;
pub mod authn;
mod bootstrap_policy;
mod certificate_admission;
mod crd_catalog;
mod custom_resources;
mod discovery;
mod disruption;
pub mod encryption;
mod endpoint_leases;
mod endpoints;
pub mod error;
mod handler;
mod join;
mod kubelet_proxy;
mod lifecycle;
mod limit_ranger;
mod metrics_api;
mod monitoring;
mod node_authorizer;
mod node_restriction;
mod object;
mod pod_admission;
pub mod pod_security;
mod policy;
mod quota;
pub mod rbac;
pub mod registry;
pub mod request;
mod server;
pub mod service_alloc;
mod service_resolver;
pub mod serviceaccount;
mod storage_admission;
mod subresources;
mod table;
mod tasks;
pub mod version;
mod virtual_resources;
mod watch;
mod webhooks;

pub use endpoints::command::ResourceRequest;
pub use join::JoinEndpoint;
pub use kubelet_proxy::{KubeletClientConfig, KubeletTarget};
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
    /// The Service CIDR ClusterIPs come from (`10.43.0.0/16`).
    pub service_cidr: String,
    /// The node address the `kubernetes` Service's endpoints point at.
    pub endpoint_ip: std::net::IpAddr,
    /// This server's identity (stable across restarts): names its endpoint lease.
    pub server_identity: String,
    /// ServiceAccount token signing key, issuer and audiences.
    pub service_account: serviceaccount::TokenConfig,
    /// The front proxy's CA and client certificate, for aggregated API servers. `None` proxies
    /// to them without a client certificate (they then cannot trust the identity headers).
    pub front_proxy: Option<aggregator::FrontProxyConfig>,
    /// PodSecurity admission's defaults and exemptions.
    pub pod_security: pod_security::Config,
    /// What servers joining this one's cluster are handed; `None` refuses them.
    pub join: Option<JoinEndpoint>,
    /// Bearer token authentication besides ServiceAccount tokens: the token file and OIDC
    /// (bootstrap tokens are always on).
    pub authentication: authn::Loaded,
    /// Whether requests without credentials are served as `system:anonymous` (and authorized by
    /// RBAC like any other); `false` answers them 401 (`--anonymous-auth=false`).
    pub anonymous_auth: bool,
    /// The audit policy and backends; `None` records nothing.
    pub audit: Option<Arc<audit::Auditor>>,
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
            kubelet_proxy::KubeletClient::new(k)
                .map_err(|e| ServeError::Tls { what: "kubelet client", message: e.to_string() })?,
        )),
        None => None,
    };
    let listener = server::bind(config.listen).await?;
    let local_addr = listener.local_addr().map_err(|source| ServeError::Bind { addr: config.listen, source })?;
    let tokens = Arc::new(
        serviceaccount::Tokens::new(&config.service_account)
            .map_err(|e| ServeError::Config(format!("service account tokens: {e}")))?,
    );
    let objects: Arc<dyn serviceaccount::claims::ObjectGetter> =
        Arc::new(serviceaccount::StoreObjects(config.store.clone()));
    let rbac = Arc::new(rbac::RbacAuthorizer::new(config.store.clone()));
    // Upstream's order: system:masters, the Node authorizer, RBAC.
    let authz: Arc<dyn auth::Authorizer> = Arc::new(auth::UnionAuthorizer(vec![
        Box::new(auth::SystemMasters),
        Box::new(node_authorizer::NodeAuthorizer::new(config.store.clone())),
        Box::new(rbac.clone()),
    ]));
    let hooks = webhooks::Webhooks::new(config.store.clone());
    let policies = policy::Policies::new(config.store.clone());
    let limit_ranger = limit_ranger::LimitRanger::new(config.store.clone())
        .map_err(|e| ServeError::Config(format!("LimitRanger admission: {e}")))?;
    let quota = quota::ResourceQuotaAdmission::new(config.store.clone())
        .map_err(|e| ServeError::Config(format!("ResourceQuota admission: {e}")))?;
    policies.set_authorizer(authz.clone());
    let chain = admission::Chain {
        mutating: vec![
            Box::new(limit_ranger.clone()),
            Box::new(serviceaccount::admission::ServiceAccountAdmission { objects: objects.clone() }),
            Box::new(pod_admission::DefaultTolerationSeconds),
            Box::new(pod_admission::Priority { store: config.store.clone() }),
            Box::new(storage_admission::DefaultStorageClass { store: config.store.clone() }),
            Box::new(storage_admission::StorageObjectInUseProtection),
            Box::new(webhooks::MutatingWebhooks(hooks.clone())),
        ],
        validating: vec![
            Box::new(node_restriction::NodeRestriction),
            Box::new(lifecycle::NamespaceLifecycle { store: config.store.clone() }),
            Box::new(limit_ranger),
            Box::new(pod_security::PodSecurity::new(config.store.clone(), config.pod_security.clone())),
            Box::new(rbac::EscalationCheck { rbac: rbac.clone(), authz: authz.clone() }),
            Box::new(certificate_admission::CertificateAdmission { authz: authz.clone() }),
            Box::new(policy::ValidatingAdmissionPolicy(policies.clone())),
            Box::new(webhooks::ValidatingWebhooks(hooks.clone())),
            // Last, as upstream's: it writes the creates it admits with their charge.
            Box::new(quota),
        ],
    };
    let invalid_cidr = || ServeError::Config(format!("invalid service CIDR {:?}", config.service_cidr));
    let cidr = service_alloc::service_cidr(&config.service_cidr).ok_or_else(invalid_cidr)?;
    let allocator = service_alloc::ServiceAllocator::new(&cidr, config.store.clone()).ok_or_else(invalid_cidr)?;
    // Before serving: every stored Service's addresses are reserved (the first start after an
    // upgrade reserves them), and what a crash left reserved is freed.
    match allocator.repair().await {
        Ok(r) if r != service_alloc::Repaired::default() => {
            tracing::info!(added = r.added, removed = r.removed, "service address reservations repaired")
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "repairing the service address reservations failed"),
    }
    let registry = Arc::new(Registry {
        store: config.store.clone(),
        admission: Arc::new(chain),
        allocators: registry::Allocators::from([(
            service_alloc::SERVICES,
            Arc::new(allocator.clone()) as Arc<dyn registry::Allocator>,
        )]),
        custom: Arc::default(),
    });
    registry.custom.refresh(&registry.store);
    let aggregator = aggregator::Aggregator::new(config.store.clone(), config.front_proxy.as_ref())
        .map_err(|e| ServeError::Tls { what: "front proxy client", message: e.to_string() })?;
    // Bearer tokens in upstream's order: the token file, ServiceAccount tokens, bootstrap tokens,
    // OIDC. Only ServiceAccount tokens know audiences.
    let api_audiences = tokens.api_audiences.clone();
    let mut token_authenticators: Vec<Box<dyn authn::Token>> = Vec::new();
    if let Some(file) = &config.authentication.token_file {
        token_authenticators
            .push(Box::new(authn::AudienceAgnostic { api_audiences: api_audiences.clone(), inner: file.clone() }));
    }
    token_authenticators.push(Box::new(serviceaccount::TokenAuthenticator { tokens: tokens.clone(), objects }));
    token_authenticators.push(Box::new(authn::AudienceAgnostic {
        api_audiences: api_audiences.clone(),
        inner: authn::bootstrap::BootstrapTokens::new(config.store.clone()),
    }));
    let mut oidc = Vec::new();
    for settings in &config.authentication.oidc {
        let o = Arc::new(
            authn::oidc::Oidc::new(settings.clone())
                .map_err(|e| ServeError::Config(format!("OIDC issuer {}: {e}", settings.issuer_url)))?,
        );
        token_authenticators
            .push(Box::new(authn::AudienceAgnostic { api_audiences: api_audiences.clone(), inner: o.clone() }));
        oidc.push(o);
    }
    let token_authenticators = authn::Tokens { authenticators: token_authenticators, api_audiences };
    let state = Arc::new(endpoints::State {
        registry: registry.clone(),
        authn: authn::RequestAuthenticator { x509: auth::X509Authenticator, tokens: token_authenticators },
        authz: Box::new(authz),
        anonymous_auth: config.anonymous_auth,
        server_address: config.advertise.clone().unwrap_or_else(|| local_addr.to_string()),
        cancel: cancel.clone(),
        ready: AtomicBool::new(false),
        bookmark_interval: config.bookmark_interval,
        kubelet,
        tokens,
        rbac,
        metrics_api: metrics_api::Cache::default(),
        monitoring: monitoring::Monitoring::new(config.store.clone()),
        aggregator: aggregator.clone(),
        join: config.join.clone(),
        audit: config.audit.clone(),
    });
    // Warm the OpenAPI documents before the first client asks.
    tokio::task::spawn_blocking(|| {
        let _ = k1s_api::openapi::get();
    });
    let mut tasks = tasks::Tasks::default();
    tasks.spawn("serving", server::serve(listener, tls, state.clone(), cancel.clone()));
    if let Some(auditor) = &config.audit {
        tasks.spawn("the audit backends", auditor.clone().run(cancel.clone()));
    }
    tasks.spawn("the service address repair", allocator.run_repair(cancel.clone()));
    for o in oidc {
        tasks.spawn("an OIDC issuer's key refresher", o.run(cancel.clone()));
    }
    tasks.spawn("the admission webhook configuration watcher", hooks.run(cancel.clone()));
    tasks.spawn("the ValidatingAdmissionPolicy watcher", policies.clone().run(cancel.clone()));
    tasks.spawn(
        "the ValidatingAdmissionPolicy status controller",
        policy::status::run(policies, registry.clone(), cancel.clone()),
    );
    tasks.spawn("the CustomResourceDefinition reconciler", custom_resources::run(registry.clone(), cancel.clone()));
    bootstrap(&registry).await;
    bootstrap_services(&registry, cidr, config.endpoint_ip, local_addr.port()).await;
    tasks.spawn(
        "the kubernetes Service's endpoint reconciler",
        endpoint_leases::run(
            registry.clone(),
            endpoint_leases::Endpoint::new(&config.server_identity, config.endpoint_ip, local_addr.port()),
            cancel.clone(),
        ),
    );
    aggregator::autoregister::register_local(&registry).await;
    aggregator::autoregister::publish_authentication(&registry, &config.tls.ca_pem, config.front_proxy.as_ref()).await;
    tasks.spawn("the APIService reconciler", aggregator.run(registry.clone(), cancel.clone()));
    state.ready.store(true, Ordering::Release);
    tracing::info!(%local_addr, "API server ready");
    Ok(ApiServer { local_addr, task: tokio::spawn(tasks.run(cancel)) })
}

/// The `kubernetes` Service (first address of the Service CIDR) with endpoints at this node's
/// API server. (The `kube-dns` Service is an add-on manifest the server's deployer applies.)
async fn bootstrap_services(registry: &Registry, cidr: service_alloc::Cidr, endpoint_ip: std::net::IpAddr, port: u16) {
    let find = |g: &str, r: &str| k1s_api::resources::find(g, "v1", r);
    let (Some(svc), Some(eps), Some(slices)) =
        (find("", "services"), find("", "endpoints"), find("discovery.k8s.io", "endpointslices"))
    else {
        return;
    };
    let kubernetes = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kubernetes", "namespace": "default", "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"clusterIP": service_alloc::first_ip(&cidr).map(|ip| ip.to_string()), "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}],
                 "sessionAffinity": "None", "type": "ClusterIP"},
    });
    let endpoints = json!({
        "apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": "kubernetes", "namespace": "default", "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
        "subsets": [{"addresses": [{"ip": endpoint_ip.to_string()}], "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}],
    });
    let slice = json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "kubernetes", "namespace": "default", "labels": {"kubernetes.io/service-name": "kubernetes"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [endpoint_ip.to_string()], "conditions": {"ready": true}}],
        "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
    });
    let objects = [(svc, kubernetes), (eps, endpoints), (slices, slice)];
    for (info, obj) in objects {
        if let Err(e) = registry.ensure(info, obj).await {
            tracing::error!(resource = info.resource, error = %e, "creating a bootstrap object failed");
        }
    }
    // The API server's port changes between runs when it is picked at random: keep the
    // Service's targetPort current (its endpoints follow the servers' leases: `endpoint_leases`).
    refresh_target_port(registry, port).await;
}

async fn refresh_target_port(registry: &Registry, port: u16) {
    let Some(info) = k1s_api::resources::find("", "v1", "services") else { return };
    let user = Registry::server_user();
    let patch = json!({"spec": {"ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}]}});
    let mut ctx = Registry::server_ctx(&user, info, Some("default"));
    ctx.field_manager = "kube-apiserver".into();
    ctx.field_validation = registry::FieldValidation::Ignore;
    if let Err(e) = registry.patch(&mut ctx, "kubernetes", registry::PatchType::Merge, patch, false).await {
        tracing::warn!(error = %e, "refreshing the kubernetes Service's target port failed");
    }
}

async fn bootstrap(registry: &Registry) {
    rbac::bootstrap(registry).await;
    let Some(ns) = k1s_api::resources::find("", "v1", "namespaces") else { return };
    for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        if let Err(e) = registry.ensure(ns, obj).await {
            tracing::error!(namespace = name, error = %e, "creating default namespace failed");
        }
    }
    if let Some(pc) = k1s_api::resources::find("scheduling.k8s.io", "v1", "priorityclasses") {
        for (name, value, what) in [
            ("system-node-critical", 2000001000, "Used for system critical pods that must not be moved from their current node."),
            ("system-cluster-critical", 2000000000, "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary."),
        ] {
            let obj = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                             "value": value, "description": what, "preemptionPolicy": "PreemptLowerPriority"});
            if let Err(e) = registry.ensure(pc, obj).await {
                tracing::error!(class = name, error = %e, "creating a system priority class failed");
            }
        }
    }
}
