//! Pods bound to this node: a watch on `spec.nodeName=<node>` feeds one worker per pod UID;
//! the latest update replaces a pending one, and a removal is never lost.

pub mod backoff;
pub mod cgroups;
pub mod env;
pub mod hooks;
pub mod probes;
pub mod spec;
pub mod status;
pub mod volumes;
pub mod worker;

use crate::Shared;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher;
use kube::runtime::WatchStreamExt;
use kube::Api;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use tokio::sync::watch;

/// The newest desired state of one pod.
#[derive(Clone, Debug)]
pub struct Update {
    pub pod: Arc<Pod>,
    /// The pod object is gone from the API.
    pub removed: bool,
}

struct Handle {
    tx: watch::Sender<Update>,
    task: tokio::task::JoinHandle<()>,
}

/// Watches this node's pods and runs a worker per pod until the kubelet stops.
pub async fn run(shared: Arc<Shared>) {
    let api: Api<Pod> = Api::all(shared.client.clone());
    let cfg = watcher::Config::default().fields(&format!("spec.nodeName={}", shared.config.node_name));
    let mut stream = watcher(api, cfg).default_backoff().boxed();
    let mut workers: HashMap<String, Handle> = HashMap::new();
    let mut listed: Option<HashSet<String>> = None;
    let volumes = Arc::new(volumes::VolumeManager::new(shared.config.root_dir.join("pods")));
    let api: Arc<dyn worker::api::PodApi> =
        Arc::new(worker::api::KubePodApi::new(shared.client.clone(), shared.recorder.clone()));
    loop {
        let event = tokio::select! {
            _ = shared.cancel.cancelled() => break,
            e = stream.next() => match e {
                Some(Ok(e)) => e,
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "pod watch failed; retrying");
                    continue;
                }
                None => break,
            },
        };
        workers.retain(|_, h| !h.task.is_finished());
        match event {
            watcher::Event::Init => listed = Some(HashSet::new()),
            watcher::Event::InitApply(pod) => {
                if let (Some(l), Some(uid)) = (listed.as_mut(), pod.metadata.uid.clone()) {
                    l.insert(uid);
                }
                dispatch(&shared, &api, &volumes, &mut workers, pod, false);
            }
            watcher::Event::InitDone => {
                if let Some(seen) = listed.take() {
                    // Pods deleted while we were not watching.
                    for (uid, h) in workers.iter() {
                        if !seen.contains(uid) {
                            let mut u = h.tx.borrow().clone();
                            u.removed = true;
                            let _ = h.tx.send(u);
                        }
                    }
                    let known: HashSet<String> = seen.union(&workers.keys().cloned().collect()).cloned().collect();
                    tokio::spawn(worker::remove_orphans(shared.clone(), volumes.clone(), known));
                }
            }
            watcher::Event::Apply(pod) => dispatch(&shared, &api, &volumes, &mut workers, pod, false),
            watcher::Event::Delete(pod) => dispatch(&shared, &api, &volumes, &mut workers, pod, true),
        }
    }
    // Leave containers running: a restarted kubelet adopts them.
    for (_, h) in workers {
        let _ = h.task.await;
    }
}

fn dispatch(
    shared: &Arc<Shared>,
    api: &Arc<dyn worker::api::PodApi>,
    volumes: &Arc<volumes::VolumeManager>,
    workers: &mut HashMap<String, Handle>,
    pod: Pod,
    removed: bool,
) {
    let Some(uid) = pod.metadata.uid.clone() else { return };
    let update = Update { pod: Arc::new(pod), removed };
    if let Some(h) = workers.get(&uid) {
        // A removal sticks even if an older apply arrives later.
        let was_removed = h.tx.borrow().removed;
        let mut update = update;
        update.removed |= was_removed;
        let _ = h.tx.send(update);
        return;
    }
    if removed {
        // Never seen alive by this kubelet: clean up whatever the runtime still has.
        let (tx, rx) = watch::channel(update);
        let task = tokio::spawn(worker::run(shared.clone(), api.clone(), volumes.clone(), uid.clone(), rx));
        workers.insert(uid, Handle { tx, task });
        return;
    }
    let (tx, rx) = watch::channel(update);
    let task = tokio::spawn(worker::run(shared.clone(), api.clone(), volumes.clone(), uid.clone(), rx));
    workers.insert(uid, Handle { tx, task });
}
