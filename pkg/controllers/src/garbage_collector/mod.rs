//! The garbage collector: deletes objects whose owners are all gone, and carries out the
//! foreground (`foregroundDeletion` finalizer: dependents first, blockOwnerDeletion ones block)
//! and orphan (`orphan` finalizer: dependents lose the reference) propagation policies that the
//! API server records on a deleted owner.
//!
//! One metadata-only monitor (a watcher) per served resource that can be listed, watched and
//! deleted, found by discovery and re-discovered every 30 s, so custom resources are covered
//! once served. The monitors feed the dependency [`graph`]; its changes queue keys for the
//! attempt-to-delete and attempt-to-orphan [`worker`]s, which check the live objects before
//! acting.

pub mod graph;
pub mod worker;

use crate::core::discovery::{self, Served, ServedResource};
use crate::Context;
use futures::StreamExt;
use graph::{Graph, Identity, Observed, Work};
use k1s_api::errors::chain;
use k1s_runtime::api_error::{is_conflict, is_not_found};
use k1s_runtime::backoff::Backoff;
use k1s_runtime::workqueue::WorkQueue;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions, PropagationPolicy};
use kube::core::PartialObjectMeta;
use kube::runtime::{watcher, WatchStreamExt};
use serde_json::json;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use worker::{GcClient, GcError, Live, Mapping, Next, Policy};

/// Upstream's `--concurrent-gc-syncs`.
const DELETE_WORKERS: usize = 20;
const ORPHAN_WORKERS: usize = 2;
/// How often discovery runs again to pick up new or removed resources.
const RESYNC_PERIOD: Duration = Duration::from_secs(30);
/// How long workers wait for the monitors' first lists before starting anyway.
const SYNC_TIMEOUT: Duration = Duration::from_secs(60);

/// Resources the collector never watches (upstream's default ignored resources).
fn ignored(r: &ServedResource) -> bool {
    r.api.plural == "events" && (r.api.group.is_empty() || r.api.group == "events.k8s.io")
}

/// The resources to monitor: listable, watchable, deletable, not ignored.
pub fn monitored(served: &Served) -> Vec<ServedResource> {
    served
        .preferred
        .iter()
        .filter(|r| r.supports("list") && r.supports("watch") && r.supports("delete") && !ignored(r))
        .cloned()
        .collect()
}

/// The API over the controller's client, resolving kinds through the latest discovery.
pub struct KubeGc {
    client: kube::Client,
    served: Arc<RwLock<Served>>,
}

fn gc_error(e: kube::Error, id: &Identity) -> GcError {
    if is_conflict(&e) {
        GcError::Conflict(id.to_string())
    } else {
        GcError::Api(chain(&e))
    }
}

impl KubeGc {
    fn api(&self, id: &Identity) -> Result<Api<DynamicObject>, GcError> {
        let r = {
            let served = self.served.read().unwrap_or_else(|p| p.into_inner());
            served.resolve(&id.api_version, &id.kind).cloned()
        };
        let r = r.ok_or_else(|| GcError::Unmapped { api_version: id.api_version.clone(), kind: id.kind.clone() })?;
        Ok(if r.namespaced {
            Api::namespaced_with(self.client.clone(), &id.namespace, &r.api)
        } else {
            Api::all_with(self.client.clone(), &r.api)
        })
    }

    async fn patch_meta(&self, id: &Identity, patch: serde_json::Value) -> Result<(), GcError> {
        match self.api(id)?.patch_metadata(&id.name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(gc_error(e, id)),
        }
    }
}

fn live(meta: PartialObjectMeta<DynamicObject>) -> Live {
    let m = meta.metadata;
    Live {
        uid: m.uid.unwrap_or_default(),
        resource_version: m.resource_version.unwrap_or_default(),
        owners: m.owner_references.unwrap_or_default(),
        finalizers: m.finalizers.unwrap_or_default(),
        deleting: m.deletion_timestamp.is_some(),
    }
}

impl GcClient for KubeGc {
    fn mapping(&self, api_version: &str, kind: &str) -> Result<Mapping, GcError> {
        let served = self.served.read().unwrap_or_else(|p| p.into_inner());
        served
            .resolve(api_version, kind)
            .map(|r| Mapping { namespaced: r.namespaced })
            .ok_or_else(|| GcError::Unmapped { api_version: api_version.into(), kind: kind.into() })
    }

    async fn get(&self, id: &Identity) -> Result<Option<Live>, GcError> {
        match self.api(id)?.get_metadata_opt(&id.name).await {
            Ok(m) => Ok(m.map(live)),
            Err(e) => Err(gc_error(e, id)),
        }
    }

    async fn delete(&self, id: &Identity, rv: Option<&str>, policy: Policy) -> Result<(), GcError> {
        let dp = DeleteParams {
            preconditions: Some(Preconditions { uid: Some(id.uid.clone()), resource_version: rv.map(str::to_string) }),
            propagation_policy: Some(match policy {
                Policy::Background => PropagationPolicy::Background,
                Policy::Foreground => PropagationPolicy::Foreground,
                Policy::Orphan => PropagationPolicy::Orphan,
            }),
            ..Default::default()
        };
        match self.api(id)?.delete(&id.name, &dp).await {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(gc_error(e, id)),
        }
    }

    async fn set_owners(&self, id: &Identity, rv: &str, owners: &[OwnerReference]) -> Result<(), GcError> {
        let owners = if owners.is_empty() { serde_json::Value::Null } else { json!(owners) };
        self.patch_meta(id, json!({"metadata": {"resourceVersion": rv, "ownerReferences": owners}})).await
    }

    async fn set_finalizers(&self, id: &Identity, rv: &str, finalizers: &[String]) -> Result<(), GcError> {
        let finalizers = if finalizers.is_empty() { serde_json::Value::Null } else { json!(finalizers) };
        self.patch_meta(id, json!({"metadata": {"resourceVersion": rv, "finalizers": finalizers}})).await
    }
}

struct Shared {
    graph: Mutex<Graph>,
    delete_queue: WorkQueue<String>,
    orphan_queue: WorkQueue<String>,
    gc: KubeGc,
    /// Monitors that have not finished their first list yet.
    unsynced: AtomicUsize,
    synced: Notify,
    rediscover: Notify,
}

impl Shared {
    fn dispatch(&self, work: Vec<Work>) {
        for w in work {
            match w {
                Work::AttemptToDelete(uid) => self.delete_queue.add(uid),
                Work::AttemptToOrphan(uid) => self.orphan_queue.add(uid),
            }
        }
    }

    fn apply(&self, f: impl FnOnce(&mut Graph) -> Vec<Work>) {
        let work = {
            let mut g = self.graph.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut g)
        };
        self.dispatch(work);
    }

    async fn wait_synced(&self) {
        let wait = async {
            loop {
                let notified = self.synced.notified();
                if self.unsynced.load(Ordering::SeqCst) == 0 {
                    return;
                }
                notified.await;
            }
        };
        if tokio::time::timeout(SYNC_TIMEOUT, wait).await.is_err() {
            tracing::warn!("garbage collector monitors not synced; starting the workers anyway");
        }
    }
}

/// The part of an object's metadata the graph uses, as a monitor receives it. The API server sends
/// PartialObjectMetadata (`metadata_api`); decoding leaves out what the graph never reads (labels,
/// annotations, managedFields), which is most of the metadata and is decoded once per write of
/// any object in the cluster.
#[derive(Clone, Debug, Default)]
struct MonitoredMeta {
    metadata: kube::core::ObjectMeta,
}

impl<'de> serde::Deserialize<'de> for MonitoredMeta {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        #[derive(serde::Deserialize)]
        struct Wire {
            #[serde(default)]
            metadata: WireMeta,
        }
        #[derive(serde::Deserialize, Default)]
        #[serde(rename_all = "camelCase")]
        struct WireMeta {
            name: Option<String>,
            namespace: Option<String>,
            uid: Option<String>,
            resource_version: Option<String>,
            owner_references: Option<Vec<OwnerReference>>,
            finalizers: Option<Vec<String>>,
            deletion_timestamp: Option<Time>,
        }
        let m = Wire::deserialize(d)?.metadata;
        Ok(MonitoredMeta {
            metadata: kube::core::ObjectMeta {
                name: m.name,
                namespace: m.namespace,
                uid: m.uid,
                resource_version: m.resource_version,
                owner_references: m.owner_references,
                finalizers: m.finalizers,
                deletion_timestamp: m.deletion_timestamp,
                ..Default::default()
            },
        })
    }
}

impl kube::Resource for MonitoredMeta {
    type DynamicType = kube::core::ApiResource;
    type Scope = kube::core::DynamicResourceScope;

    /// Lists and watches ask for PartialObjectMetadata, as for `PartialObjectMeta<K>`.
    fn metadata_api() -> bool {
        true
    }

    fn kind(dt: &Self::DynamicType) -> std::borrow::Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn group(dt: &Self::DynamicType) -> std::borrow::Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &Self::DynamicType) -> std::borrow::Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn api_version(dt: &Self::DynamicType) -> std::borrow::Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &Self::DynamicType) -> std::borrow::Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &kube::core::ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut kube::core::ObjectMeta {
        &mut self.metadata
    }
}

fn observed(r: &ServedResource, meta: &MonitoredMeta) -> Observed {
    let m = &meta.metadata;
    Observed {
        identity: Identity {
            api_version: r.api.api_version.clone(),
            kind: r.api.kind.clone(),
            namespace: m.namespace.clone().unwrap_or_default(),
            name: m.name.clone().unwrap_or_default(),
            uid: m.uid.clone().unwrap_or_default(),
        },
        owners: m.owner_references.clone().unwrap_or_default(),
        deleting: m.deletion_timestamp.is_some(),
        finalizers: m.finalizers.clone().unwrap_or_default(),
    }
}

/// Watches one resource's metadata into the graph until `cancel` fires.
async fn monitor(shared: Arc<Shared>, r: ServedResource, cancel: CancellationToken, mut counts_for_sync: bool) {
    let api = Api::<MonitoredMeta>::all_with(shared.gc.client.clone(), &r.api);
    let mut events = watcher(api, watcher::Config::default()).default_backoff().boxed();
    let mut listing: Option<HashSet<String>> = None;
    loop {
        let ev = tokio::select! {
            _ = cancel.cancelled() => break,
            ev = events.next() => ev,
        };
        match ev {
            None => break,
            Some(Ok(watcher::Event::Init)) => listing = Some(HashSet::new()),
            Some(Ok(watcher::Event::InitApply(meta))) => {
                let obj = observed(&r, &meta);
                if let Some(l) = listing.as_mut() {
                    l.insert(obj.identity.uid.clone());
                }
                shared.apply(|g| g.upsert(obj));
            }
            Some(Ok(watcher::Event::InitDone)) => {
                if let Some(listed) = listing.take() {
                    shared.apply(|g| g.resync(&r.api.group, &r.api.kind, &listed));
                }
                if std::mem::take(&mut counts_for_sync) {
                    shared.unsynced.fetch_sub(1, Ordering::SeqCst);
                    shared.synced.notify_waiters();
                }
            }
            Some(Ok(watcher::Event::Apply(meta))) => {
                let obj = observed(&r, &meta);
                shared.apply(|g| g.upsert(obj));
            }
            Some(Ok(watcher::Event::Delete(meta))) => {
                let uid = meta.metadata.uid.clone().unwrap_or_default();
                shared.apply(|g| g.delete(&uid));
            }
            Some(Err(e)) => tracing::debug!(resource = %r.group_resource(), error = %chain(&e), "monitor watch failed"),
        }
    }
    if counts_for_sync {
        shared.unsynced.fetch_sub(1, Ordering::SeqCst);
        shared.synced.notify_waiters();
    }
}

async fn delete_worker(shared: Arc<Shared>) {
    while let Some(uid) = shared.delete_queue.get().await {
        let mut follow = Vec::new();
        let res = worker::attempt_to_delete(&shared.graph, &shared.gc, &uid, &mut follow).await;
        shared.dispatch(follow);
        match res {
            Ok(Next::Forget) => shared.delete_queue.forget(&uid),
            Ok(Next::Requeue) => shared.delete_queue.add_rate_limited(uid.clone()),
            Err(e @ GcError::NamespacedOwnerOfClusterScoped(_)) => {
                tracing::warn!(uid = %uid, error = %e, "invalid owner reference; not retrying");
                shared.delete_queue.forget(&uid);
            }
            Err(e) => {
                if matches!(e, GcError::Unmapped { .. }) {
                    shared.rediscover.notify_one();
                    tracing::debug!(uid = %uid, error = %e, "garbage collection waits for discovery");
                } else {
                    tracing::warn!(uid = %uid, error = %e, "garbage collection failed; retrying");
                }
                shared.delete_queue.add_rate_limited(uid.clone());
            }
        }
        shared.delete_queue.done(&uid);
    }
}

async fn orphan_worker(shared: Arc<Shared>) {
    while let Some(uid) = shared.orphan_queue.get().await {
        match worker::attempt_to_orphan(&shared.graph, &shared.gc, &uid).await {
            Ok(_) => shared.orphan_queue.forget(&uid),
            Err(e) => {
                tracing::warn!(uid = %uid, error = %e, "orphaning dependents failed; retrying");
                shared.orphan_queue.add_rate_limited(uid.clone());
            }
        }
        shared.orphan_queue.done(&uid);
    }
}

/// Starts monitors for newly served resources and stops those no longer served.
fn sync_monitors(
    shared: &Arc<Shared>,
    running: &mut HashMap<(String, String), (ServedResource, CancellationToken)>,
    wanted: Vec<ServedResource>,
    parent: &CancellationToken,
    initial: bool,
) -> Vec<tokio::task::JoinHandle<()>> {
    let keys: HashSet<(String, String)> = wanted.iter().map(|r| (r.api.group.clone(), r.api.kind.clone())).collect();
    running.retain(|k, (r, token)| {
        let keep = keys.contains(k);
        if !keep {
            tracing::info!(resource = %r.group_resource(), "garbage collector stops monitoring");
            token.cancel();
        }
        keep
    });
    let mut tasks = Vec::new();
    for r in wanted {
        let key = (r.api.group.clone(), r.api.kind.clone());
        if let Some((old, token)) = running.get(&key) {
            if old.api.version == r.api.version {
                continue;
            }
            token.cancel();
        }
        let token = parent.child_token();
        if initial {
            shared.unsynced.fetch_add(1, Ordering::SeqCst);
        }
        tasks.push(tokio::spawn(monitor(shared.clone(), r.clone(), token.clone(), initial)));
        running.insert(key, (r, token));
    }
    tasks
}

pub async fn run(ctx: Arc<Context>) {
    let served = Arc::new(RwLock::new(Served::default()));
    let shared = Arc::new(Shared {
        graph: Mutex::default(),
        delete_queue: WorkQueue::new(Backoff::DEFAULT),
        orphan_queue: WorkQueue::new(Backoff::DEFAULT),
        gc: KubeGc { client: ctx.client.clone(), served: served.clone() },
        unsynced: AtomicUsize::new(0),
        synced: Notify::new(),
        rediscover: Notify::new(),
    });
    let cancel = ctx.cancel.clone();
    let mut running = HashMap::new();
    let mut tasks = Vec::new();
    let mut failures = 0u32;
    let mut workers_started = false;
    loop {
        match discovery::served(&ctx.client).await {
            Ok(found) => {
                failures = 0;
                let wanted = monitored(&found);
                *served.write().unwrap_or_else(|p| p.into_inner()) = found;
                tasks.extend(sync_monitors(&shared, &mut running, wanted, &cancel, !workers_started));
                if !workers_started {
                    workers_started = true;
                    let s = shared.clone();
                    let stop = cancel.clone();
                    tasks.push(tokio::spawn(async move {
                        tokio::select! {
                            _ = stop.cancelled() => return,
                            _ = s.wait_synced() => {}
                        }
                        tracing::info!(
                            objects = s.graph.lock().map(|g| g.len()).unwrap_or(0),
                            "garbage collector synced"
                        );
                        let mut workers = Vec::new();
                        for _ in 0..DELETE_WORKERS {
                            workers.push(tokio::spawn(delete_worker(s.clone())));
                        }
                        for _ in 0..ORPHAN_WORKERS {
                            workers.push(tokio::spawn(orphan_worker(s.clone())));
                        }
                        for w in workers {
                            let _ = w.await;
                        }
                    }));
                }
            }
            Err(e) => {
                failures += 1;
                tracing::warn!(error = %chain(&e), "garbage collector discovery failed");
            }
        }
        let wait = if failures > 0 {
            Backoff { base: Duration::from_secs(1), max: RESYNC_PERIOD }.delay(failures)
        } else {
            RESYNC_PERIOD
        };
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tokio::time::sleep(wait) => {}
            _ = shared.rediscover.notified() => {}
        }
    }
    shared.delete_queue.shut_down();
    shared.orphan_queue.shut_down();
    for (_, (_, token)) in running {
        token.cancel();
    }
    for t in tasks {
        let _ = t.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monitors_decode_the_metadata_the_graph_uses_and_ask_for_metadata_only() {
        use kube::Resource;
        assert!(MonitoredMeta::metadata_api(), "lists and watches must ask for PartialObjectMetadata");
        let event = json!({
            "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": {
                "name": "rs-1", "namespace": "d", "uid": "u1", "resourceVersion": "42",
                "labels": {"app": "web"}, "annotations": {"a": "b"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                    "uid": "u0", "controller": true, "blockOwnerDeletion": true}],
                "finalizers": ["foregroundDeletion"],
                "deletionTimestamp": "2026-11-30T12:00:00Z",
                "managedFields": [{"manager": "m", "operation": "Update", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}}]
            }
        });
        let m: MonitoredMeta = serde_json::from_value(event).expect("decodes");
        let ar = kube::core::ApiResource::erase::<k8s_openapi::api::apps::v1::ReplicaSet>(&());
        let o =
            observed(&ServedResource { api: ar, namespaced: true, verbs: Vec::new(), subresources: Vec::new() }, &m);
        assert_eq!(
            (o.identity.name.as_str(), o.identity.namespace.as_str(), o.identity.uid.as_str()),
            ("rs-1", "d", "u1")
        );
        assert_eq!((o.identity.kind.as_str(), o.identity.api_version.as_str()), ("ReplicaSet", "apps/v1"));
        assert_eq!(o.owners.len(), 1);
        assert_eq!((o.owners[0].uid.as_str(), o.owners[0].block_owner_deletion), ("u0", Some(true)));
        assert!(o.deleting);
        assert_eq!(o.finalizers, vec!["foregroundDeletion".to_string()]);
        assert_eq!(m.metadata.resource_version.as_deref(), Some("42"));
        // What the graph does not read is not kept.
        assert!(m.metadata.labels.is_none() && m.metadata.managed_fields.is_none());
        // A bare object (no metadata at all) still decodes.
        let bare: MonitoredMeta = serde_json::from_value(json!({"kind": "X"})).expect("decodes");
        assert!(bare.metadata.name.is_none());
    }

    #[test]
    fn events_and_unwatchable_resources_are_not_monitored() {
        let all = &["create", "delete", "get", "list", "watch"];
        let served = Served {
            preferred: vec![
                ServedResource::of("", "v1", "Pod", "pods", true, all),
                ServedResource::of("", "v1", "Event", "events", true, all),
                ServedResource::of("events.k8s.io", "v1", "Event", "events", true, all),
                ServedResource::of("", "v1", "Binding", "bindings", true, &["create"]),
                ServedResource::of("example.com", "v1", "Widget", "widgets", true, all),
            ],
            all: Vec::new(),
        };
        let kinds: Vec<String> = monitored(&served).into_iter().map(|r| r.api.kind).collect();
        assert_eq!(kinds, vec!["Pod", "Widget"]);
    }
}
