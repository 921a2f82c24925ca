//! k1s-controllers: the built-in controllers, one module each, as watch-and-reconcile loops that
//! reach the API only through a client with the controller manager's identity.
//!
//! It must never depend on the API server, the store, the kubelet or the scheduler.

use std::sync::Arc;
use tokio_util::sync::CancellationToken;

pub mod certificates;
pub mod clusterrole_aggregation;
pub mod core;
pub mod cronjob;
pub mod daemonset;
pub mod deploy;
pub mod deployment;
pub mod disruption;
pub mod endpointslice;
pub mod garbage_collector;
pub mod horizontal_pod_autoscaler;
pub mod job;
pub mod namespace;
pub mod node_lifecycle;
pub mod persistent_volume;
pub mod replicaset;
pub mod resource_quota;
pub mod service_account;
pub mod statefulset;
pub mod workloads;

/// What every controller gets.
pub struct Context {
    pub client: kube::Client,
    pub recorder: k1s_runtime::events::Recorder,
    pub cancel: CancellationToken,
    /// PEM of the cluster CA, published as `kube-root-ca.crt` in every namespace.
    pub root_ca_pem: String,
    /// The CA the CSR signers sign approved requests with (upstream's
    /// `--cluster-signing-cert-file` and key); `None`: no signing.
    pub cluster_signing: Option<k1s_pki::CertPair>,
}

type Start = fn(Arc<Context>) -> futures::future::BoxFuture<'static, ()>;

/// Every controller by the name `--disable` knows it by (upstream's `--controllers` names).
fn all() -> [(&'static str, Start); 18] {
    [
        ("namespace", |c| Box::pin(namespace::run(c))),
        ("serviceaccount", |c| Box::pin(service_account::run(c))),
        ("garbagecollector", |c| Box::pin(garbage_collector::run(c))),
        ("deployment", |c| Box::pin(deployment::run(c))),
        ("replicaset", |c| Box::pin(replicaset::run(c))),
        ("statefulset", |c| Box::pin(statefulset::run(c))),
        ("daemonset", |c| Box::pin(daemonset::run(c))),
        ("job", |c| Box::pin(job::run(c))),
        ("cronjob", |c| Box::pin(cronjob::run(c))),
        ("horizontalpodautoscaling", |c| Box::pin(horizontal_pod_autoscaler::run(c))),
        ("endpointslice", |c| Box::pin(endpointslice::run(c))),
        ("nodelifecycle", |c| Box::pin(node_lifecycle::run(c))),
        ("disruption", |c| Box::pin(disruption::run(c))),
        ("clusterrole-aggregation", |c| Box::pin(clusterrole_aggregation::run(c))),
        ("persistentvolume-binder", |c| Box::pin(persistent_volume::run(c))),
        ("resourcequota", |c| Box::pin(resource_quota::run(c))),
        ("csrsigning", |c| Box::pin(certificates::signer::run(c))),
        ("csrcleaner", |c| Box::pin(certificates::cleaner::run(c))),
    ]
}

/// The names of all controllers, for validating `--disable`.
pub fn names() -> impl Iterator<Item = &'static str> {
    all().into_iter().map(|(name, _)| name)
}

/// How long the controllers may take to stop before the ones left are named in the log.
const STOP_WARNING: std::time::Duration = std::time::Duration::from_secs(2);

/// Resolves `STOP_WARNING` after `cancel` fires.
async fn slow_to_stop(cancel: &tokio_util::sync::CancellationToken) {
    cancel.cancelled().await;
    tokio::time::sleep(STOP_WARNING).await;
}

/// Starts every controller not listed in `disabled`; returns when `cancel` fires.
pub async fn run(ctx: Arc<Context>, disabled: &[String]) {
    let mut running = tokio::task::JoinSet::new();
    let mut names = Vec::new();
    for (name, start) in all() {
        if disabled.iter().any(|d| d == name) {
            continue;
        }
        tracing::info!(controller = name, "starting controller");
        let task = start(ctx.clone());
        names.push(name);
        running.spawn(async move {
            task.await;
            name
        });
    }
    let mut warned = false;
    let slow = slow_to_stop(&ctx.cancel);
    tokio::pin!(slow);
    // A controller that ends before shutdown (or panics) ends them all: the server's supervisor
    // then stops the process rather than run with a controller missing.
    loop {
        let done = tokio::select! {
            done = running.join_next() => done,
            () = &mut slow, if !warned => {
                warned = true;
                tracing::warn!(controllers = ?names, "controllers still stopping {STOP_WARNING:?} after shutdown began");
                continue;
            }
        };
        let Some(done) = done else { break };
        if let Ok(name) = &done {
            names.retain(|n| n != name);
        }
        if ctx.cancel.is_cancelled() {
            continue;
        }
        match done {
            Ok(name) => tracing::error!(controller = name, "controller stopped before shutdown"),
            Err(e) => tracing::error!(error = %e, "controller failed"),
        }
        return;
    }
}
