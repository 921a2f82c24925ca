//! The sync loop: reflectors on Services, EndpointSlices, Pods, Namespaces and NetworkPolicies
//! wake one loop that coalesces a burst of events (a quiet window of about a millisecond, never a
//! fixed delay), renders the whole desired table from the reflector caches and hands it to the
//! applier, which programs only what changed. Level-triggered: a failed sync is retried with
//! back-off from the latest state. On exit the rules stay in place (pods keep serving).

use crate::applier::{Applied, Applier, ApplyError};
use crate::lb_status::{desired_ingress, StatusWriter};
use crate::nft::Nft;
use crate::render::{render, ClusterState, NodeInfo};
use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Api;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("applying the ruleset")]
    Apply(#[from] ApplyError),
    #[error("applying the ruleset: the apply task panicked")]
    ApplyTask,
}

/// The reflector caches the ruleset is rendered from.
#[derive(Clone)]
pub struct Stores {
    pub services: Store<Service>,
    pub endpoint_slices: Store<EndpointSlice>,
    pub pods: Store<Pod>,
    pub namespaces: Store<Namespace>,
    pub network_policies: Store<NetworkPolicy>,
}

impl Stores {
    pub fn snapshot(&self) -> ClusterState {
        ClusterState {
            services: self.services.state(),
            endpoint_slices: self.endpoint_slices.state(),
            pods: self.pods.state(),
            namespaces: self.namespaces.state(),
            network_policies: self.network_policies.state(),
        }
    }

    async fn wait_until_ready(&self) -> bool {
        self.services.wait_until_ready().await.is_ok()
            && self.endpoint_slices.wait_until_ready().await.is_ok()
            && self.pods.wait_until_ready().await.is_ok()
            && self.namespaces.wait_until_ready().await.is_ok()
            && self.network_policies.wait_until_ready().await.is_ok()
    }
}

/// What one sync did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncReport {
    pub applied: Applied,
    pub render_time: Duration,
    pub apply_time: Duration,
    pub status_updates: usize,
}

/// Renders, applies and writes LoadBalancer status; one call per batch of changes.
pub struct Syncer<N: Nft + 'static, W: StatusWriter> {
    node: NodeInfo,
    applier: Arc<Mutex<Applier<N>>>,
    status: W,
    stores: Stores,
    /// Service → resourceVersion it had when its LoadBalancer status was last written, so a
    /// write is not repeated before the watch delivers its result.
    status_written: HashMap<(String, String), Option<String>>,
}

impl<N: Nft + 'static, W: StatusWriter> Syncer<N, W> {
    pub fn new(node: NodeInfo, applier: Applier<N>, status: W, stores: Stores) -> Self {
        Self { node, applier: Arc::new(Mutex::new(applier)), status, stores, status_written: HashMap::new() }
    }

    pub async fn sync_once(&mut self) -> Result<SyncReport, SyncError> {
        let t0 = Instant::now();
        let state = self.stores.snapshot();
        let desired = render(&state, &self.node);
        let render_time = t0.elapsed();
        let applier = self.applier.clone();
        let applied = tokio::task::spawn_blocking(move || match applier.lock() {
            Ok(mut a) => a.apply(&desired),
            Err(poisoned) => poisoned.into_inner().apply(&desired),
        })
        .await
        .map_err(|_| SyncError::ApplyTask)??;
        let apply_time = t0.elapsed() - render_time;
        let status_updates = self.write_load_balancer_status(&state).await;
        Ok(SyncReport { applied, render_time, apply_time, status_updates })
    }

    /// Next sync replaces the whole table (after errors).
    pub fn reset(&self) {
        if let Ok(mut a) = self.applier.lock() {
            a.reset();
        }
    }

    async fn write_load_balancer_status(&mut self, state: &ClusterState) -> usize {
        let Some(node_ip) = self.node.ips.first().copied() else { return 0 };
        let mut written = 0;
        let live: std::collections::HashSet<(String, String)> = state
            .services
            .iter()
            .map(|s| (s.metadata.namespace.clone().unwrap_or_default(), s.metadata.name.clone().unwrap_or_default()))
            .collect();
        self.status_written.retain(|k, _| live.contains(k));
        for svc in &state.services {
            let Some(ingress) = desired_ingress(svc, node_ip) else { continue };
            let key =
                (svc.metadata.namespace.clone().unwrap_or_default(), svc.metadata.name.clone().unwrap_or_default());
            if self.status_written.get(&key) == Some(&svc.metadata.resource_version) {
                continue;
            }
            match self.status.set_ingress(&key.0, &key.1, ingress).await {
                Ok(()) => {
                    written += 1;
                    self.status_written.insert(key, svc.metadata.resource_version.clone());
                }
                Err(e) => {
                    tracing::warn!(error = %k1s_api::errors::chain(&e), "LoadBalancer status not written; retrying on the next change")
                }
            }
        }
        written
    }
}

/// How long the loop waits for more events once one arrived (quiet window), and at most.
#[derive(Clone, Copy, Debug)]
pub struct Debounce {
    pub quiet: Duration,
    pub max: Duration,
}

impl Default for Debounce {
    fn default() -> Self {
        Self { quiet: Duration::from_millis(1), max: Duration::from_millis(2) }
    }
}

/// Runs `syncer` whenever `changes` fires, until `cancel`. Every finished sync is published on
/// `synced` (a counter: benchmarks and tests wait on it).
pub async fn sync_loop<N: Nft + 'static, W: StatusWriter>(
    mut syncer: Syncer<N, W>,
    changes: Arc<Notify>,
    debounce: Debounce,
    synced: tokio::sync::watch::Sender<u64>,
    cancel: CancellationToken,
) {
    let mut retry: Option<Duration> = None;
    let mut first = true;
    loop {
        if !first {
            let wait_retry = async {
                match retry {
                    Some(d) => tokio::time::sleep(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = changes.notified() => {}
                _ = wait_retry => {}
            }
            let start = Instant::now();
            loop {
                let left = debounce.max.saturating_sub(start.elapsed());
                if left.is_zero() {
                    break;
                }
                tokio::select! {
                    _ = changes.notified() => {}
                    _ = tokio::time::sleep(debounce.quiet.min(left)) => break,
                }
            }
        }
        first = false;
        match syncer.sync_once().await {
            Ok(r) => {
                retry = None;
                if r.applied != Applied::Unchanged {
                    tracing::debug!(applied = ?r.applied, render = ?r.render_time, apply = ?r.apply_time, "rules synced");
                }
                synced.send_modify(|n| *n += 1);
            }
            Err(e) => {
                let next = retry.map_or(Duration::from_millis(200), |d| (d * 2).min(Duration::from_secs(10)));
                tracing::error!(error = %k1s_api::errors::chain(&e), retry_in = ?next, "syncing service rules failed");
                syncer.reset();
                retry = Some(next);
            }
        }
    }
}

/// Starts a reflector for `api` that signals `changes` on every event; returns its store.
fn reflect<K>(
    api: Api<K>,
    what: &'static str,
    changes: Arc<Notify>,
    cancel: CancellationToken,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) -> Store<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
{
    use futures::StreamExt;
    let (reader, writer) = reflector::store();
    let stream = watcher(api, watcher::Config::default()).default_backoff().reflect(writer);
    tasks.push(tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                next = stream.next() => match next {
                    Some(Ok(_)) => changes.notify_one(),
                    Some(Err(e)) => tracing::warn!(error = %e, watch = what, "watch failed; retrying"),
                    None => return,
                },
            }
        }
    }));
    reader
}

/// Starts the five reflectors; returns their stores and tasks.
pub fn start_reflectors(
    client: &kube::Client,
    changes: Arc<Notify>,
    cancel: &CancellationToken,
) -> (Stores, Vec<tokio::task::JoinHandle<()>>) {
    let mut tasks = Vec::new();
    let c = || changes.clone();
    let stores = Stores {
        services: reflect(Api::all(client.clone()), "services", c(), cancel.clone(), &mut tasks),
        endpoint_slices: reflect(Api::all(client.clone()), "endpointslices", c(), cancel.clone(), &mut tasks),
        pods: reflect(Api::all(client.clone()), "pods", c(), cancel.clone(), &mut tasks),
        namespaces: reflect(Api::all(client.clone()), "namespaces", c(), cancel.clone(), &mut tasks),
        network_policies: reflect(Api::all(client.clone()), "networkpolicies", c(), cancel.clone(), &mut tasks),
    };
    (stores, tasks)
}

/// Waits for every store's initial list (or `cancel`); `false` when cancelled first.
pub async fn wait_for_caches(stores: &Stores, cancel: &CancellationToken) -> bool {
    tokio::select! {
        _ = cancel.cancelled() => false,
        ready = stores.wait_until_ready() => ready,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::endpoints::tests::slice;
    use crate::lb_status::StatusError;
    use crate::nft::FakeNft;
    use crate::render::tests::node;
    use crate::service::tests::svc;
    use k8s_openapi::api::core::v1::LoadBalancerIngress;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher::Event;

    /// One LoadBalancer status write: namespace, name, ingress.
    pub(crate) type StatusWrite = (String, String, Vec<LoadBalancerIngress>);

    #[derive(Clone, Default)]
    pub(crate) struct FakeStatus {
        pub writes: Arc<Mutex<Vec<StatusWrite>>>,
    }

    impl StatusWriter for FakeStatus {
        async fn set_ingress(
            &self,
            ns: &str,
            name: &str,
            ingress: Vec<LoadBalancerIngress>,
        ) -> Result<(), StatusError> {
            self.writes.lock().expect("lock").push((ns.into(), name.into(), ingress));
            Ok(())
        }
    }

    #[allow(dead_code)] // every store has a writer; not every test feeds every kind
    pub(crate) struct Writers {
        pub services: Writer<Service>,
        pub endpoint_slices: Writer<EndpointSlice>,
        pub pods: Writer<Pod>,
        pub namespaces: Writer<Namespace>,
        pub network_policies: Writer<NetworkPolicy>,
    }

    /// Stores fed by hand, each already through its initial (empty) list.
    pub(crate) fn fake_stores() -> (Stores, Writers) {
        fn pair<K>() -> (Store<K>, Writer<K>)
        where
            K: kube::Resource<DynamicType = ()> + Clone + 'static,
        {
            let (r, mut w) = reflector::store();
            w.apply_watcher_event(&Event::Init);
            w.apply_watcher_event(&Event::InitDone);
            (r, w)
        }
        let (services, ws) = pair();
        let (endpoint_slices, we) = pair();
        let (pods, wp) = pair();
        let (namespaces, wn) = pair();
        let (network_policies, wnp) = pair();
        (
            Stores { services, endpoint_slices, pods, namespaces, network_policies },
            Writers { services: ws, endpoint_slices: we, pods: wp, namespaces: wn, network_policies: wnp },
        )
    }

    #[tokio::test]
    async fn sync_programs_changes_incrementally_and_writes_load_balancer_status_once() {
        let (stores, mut w) = fake_stores();
        let nft = FakeNft::default();
        let status = FakeStatus::default();
        let mut s = Syncer::new(node(), Applier::new(nft.clone()), status.clone(), stores);
        assert_eq!(s.sync_once().await.expect("sync").applied, Applied::Full);

        let mut lb = svc("default", "web", "10.43.0.20", 80);
        lb.spec.as_mut().expect("spec").type_ = Some("LoadBalancer".into());
        lb.metadata.resource_version = Some("7".into());
        w.services.apply_watcher_event(&Event::Apply(lb));
        w.endpoint_slices.apply_watcher_event(&Event::Apply(slice(
            "default",
            "web",
            8080,
            &[("10.42.0.5", true, true, false, "node1")],
        )));
        let r = s.sync_once().await.expect("sync");
        assert!(matches!(r.applied, Applied::Incremental(_)), "{r:?}");
        assert_eq!(r.status_updates, 1);
        let last = nft.scripts().last().cloned().expect("script");
        assert!(last.contains("add rule ip k1s service-default/web/tcp/http"), "{last}");
        assert!(!last.contains("delete table"), "{last}");
        let writes = status.writes.lock().expect("lock").clone();
        assert_eq!(writes[0].2[0].ip.as_deref(), Some("192.0.2.2"));

        let r = s.sync_once().await.expect("sync");
        assert_eq!(r.applied, Applied::Unchanged);
        assert_eq!(r.status_updates, 0, "not rewritten before the watch shows the new status");
    }

    #[tokio::test]
    async fn loop_coalesces_a_burst_into_one_sync_and_leaves_rules_on_exit() {
        let (stores, mut w) = fake_stores();
        let nft = FakeNft::default();
        let syncer = Syncer::new(node(), Applier::new(nft.clone()), FakeStatus::default(), stores);
        let changes = Arc::new(Notify::new());
        let (tx, mut rx) = tokio::sync::watch::channel(0u64);
        let cancel = CancellationToken::new();
        let task = tokio::spawn(sync_loop(syncer, changes.clone(), Debounce::default(), tx, cancel.clone()));
        rx.wait_for(|n| *n == 1).await.expect("initial sync");
        for i in 0..20 {
            w.services.apply_watcher_event(&Event::Apply(svc(
                "default",
                &format!("s{i}"),
                &format!("10.43.1.{i}"),
                80,
            )));
            changes.notify_one();
        }
        rx.wait_for(|n| *n >= 2).await.expect("burst synced");
        cancel.cancel();
        task.await.expect("loop exits");
        let scripts = nft.scripts();
        assert_eq!(scripts.len(), 2, "one full replacement and one incremental update: {scripts:?}");
        assert!(scripts[1].contains("10.43.1.19"), "the burst's last event is in the one update");
        assert!(scripts.iter().all(|s| !s.starts_with("delete table")), "exit leaves the table");
    }

    #[tokio::test]
    async fn failed_sync_is_retried_from_a_full_replacement() {
        let (stores, _w) = fake_stores();
        let nft = FakeNft::default();
        *nft.fail_next.lock().expect("lock") = 1;
        let syncer = Syncer::new(node(), Applier::new(nft.clone()), FakeStatus::default(), stores);
        let (tx, mut rx) = tokio::sync::watch::channel(0u64);
        let cancel = CancellationToken::new();
        let task = tokio::spawn(sync_loop(syncer, Arc::new(Notify::new()), Debounce::default(), tx, cancel.clone()));
        tokio::time::timeout(Duration::from_secs(5), rx.wait_for(|n| *n == 1))
            .await
            .expect("retried within the back-off")
            .expect("synced");
        cancel.cancel();
        task.await.expect("loop exits");
        assert_eq!(nft.scripts().len(), 1);
        assert!(nft.scripts()[0].contains("delete table ip k1s"));
    }
}
