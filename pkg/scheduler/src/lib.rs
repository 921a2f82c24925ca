//! k1s-scheduler: places pods without a node: filter ▶ score ▶ bind through `pods/binding`,
//! with upstream's default plugins (resources, node name, unschedulable, taints, node affinity,
//! host ports, volume binding, inter-pod affinity; least allocated, balanced allocation, image locality,
//! affinity and taint preferences), a priority queue with back-off whose unschedulable pods are
//! retried on cluster events, and preemption of lower-priority pods.
//!
//! It must never depend on the API server, the store or the kubelet: it watches and writes
//! through its own HTTPS client like a separate kube-scheduler would.

mod api;
mod cache;
mod filters;
mod interpod;
mod matching;
mod node_info;
mod preemption;
mod queue;
mod resources;
mod schedule;
mod scheduler;
mod scores;
#[cfg(test)]
mod testing;
mod volumes;

pub use api::{ApiError, KubeApi, PodRef, SchedulerApi, COMPONENT};
pub use scheduler::Scheduler;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt;
use kube::Api;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Feeds one watch into `apply` until `cancel` fires; errors are retried with back-off.
async fn feed<K>(
    what: &'static str,
    stream: impl Stream<Item = Result<Event<K>, watcher::Error>>,
    cancel: CancellationToken,
    apply: impl Fn(Event<K>),
) {
    let mut stream = std::pin::pin!(stream);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            next = stream.next() => match next {
                Some(Ok(event)) => apply(event),
                Some(Err(e)) => tracing::warn!(error = %e, watch = what, "watch failed; retrying"),
                None => return,
            },
        }
    }
}

/// Runs the scheduler until `cancel` fires.
pub async fn run(client: kube::Client, cancel: CancellationToken) {
    let sched = Arc::new(Scheduler::new(KubeApi::new(client.clone())));
    let cfg = watcher::Config::default;
    let pods = watcher(Api::<Pod>::all(client.clone()), cfg()).default_backoff();
    let nodes = watcher(Api::<Node>::all(client.clone()), cfg()).default_backoff();
    let classes = watcher(Api::<PriorityClass>::all(client.clone()), cfg()).default_backoff();
    let pdbs = watcher(Api::<PodDisruptionBudget>::all(client.clone()), cfg()).default_backoff();
    let namespaces = watcher(Api::<Namespace>::all(client.clone()), cfg()).default_backoff();
    let claims = watcher(Api::<PersistentVolumeClaim>::all(client.clone()), cfg()).default_backoff();
    let volumes = watcher(Api::<PersistentVolume>::all(client.clone()), cfg()).default_backoff();
    let storage_classes = watcher(Api::<StorageClass>::all(client), cfg()).default_backoff();
    tracing::info!("scheduler started");
    let c = || cancel.clone();
    let (s1, s2, s3, s4, s5) = (sched.clone(), sched.clone(), sched.clone(), sched.clone(), sched.clone());
    let (s6, s7, s8) = (sched.clone(), sched.clone(), sched.clone());
    let tasks = [
        tokio::spawn(feed("pods", pods, c(), move |e| s1.on_pod(e))),
        tokio::spawn(feed("nodes", nodes, c(), move |e| s2.on_node(e))),
        tokio::spawn(feed("priorityclasses", classes, c(), move |e| s3.on_priority_class(e))),
        tokio::spawn(feed("poddisruptionbudgets", pdbs, c(), move |e| s4.on_pdb(e))),
        tokio::spawn(feed("namespaces", namespaces, c(), move |e| s5.on_namespace(e))),
        tokio::spawn(feed("persistentvolumeclaims", claims, c(), move |e| s6.on_claim(e))),
        tokio::spawn(feed("persistentvolumes", volumes, c(), move |e| s7.on_volume(e))),
        tokio::spawn(feed("storageclasses", storage_classes, c(), move |e| s8.on_storage_class(e))),
        tokio::spawn(sched.run_loop(c())),
    ];
    for t in futures::future::join_all(tasks).await {
        if let Err(e) = t {
            tracing::error!(error = %e, "scheduler task failed");
        }
    }
    tracing::info!("scheduler stopped");
}
