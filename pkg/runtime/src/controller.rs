//! A controller declared in one place: the resource it reconciles, the resources it owns or
//! watches (each an informer whose changes map to keys of the reconciled resource), and a
//! reconcile function. [`Controller::run`] starts the informers in the order they were declared
//! (the reconciled resource first, each listed before the next starts), then runs
//! [`reconcile_loop`]: one reconcile at a time per object, a tracing span per reconcile naming
//! the controller and the object, and on failure a per-object [`Backoff::DEFAULT`] retry reset
//! by the next success.
//!
//! ```ignore
//! let mut c = Controller::<DaemonSet>::new("daemonset-controller", client);
//! let revisions = c.owns::<ControllerRevision>();
//! let nodes = c.watches::<Node>(|_old, _new, scope| scope.enqueue_all());
//! c.run(Arc::new(Ctx { nodes, revisions }), reconcile, cancel).await;
//! ```

use crate::backoff::{Backoff, Failures};
use crate::informer::{self, Queue};
use futures::channel::mpsc;
use futures::future::BoxFuture;
use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller as KubeController};
use kube::runtime::reflector::{self, store::Writer, ObjectRef, Store};
use kube::runtime::watcher;
use kube::Resource;
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// What informer handlers get: the reconciled resource's cache and its queue.
pub struct Scope<K: Resource<DynamicType = ()> + 'static> {
    pub store: Store<K>,
    pub queue: Queue<K>,
}

impl<K: Resource<DynamicType = ()> + 'static> Clone for Scope<K> {
    fn clone(&self) -> Self {
        Scope { store: self.store.clone(), queue: self.queue.clone() }
    }
}

impl<K> Scope<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    /// The cached object `meta`'s controller reference names, if any.
    pub fn controller_of(&self, meta: &ObjectMeta) -> Option<Arc<K>> {
        informer::controller_in(&self.store, meta)
    }

    /// Queues every cached object.
    pub fn enqueue_all(&self) {
        for o in self.store.state() {
            self.queue.add_obj(&o);
        }
    }

    /// Queues the controller of an object (`meta`) if cached; for an object without a
    /// controller, every cached object in its namespace that `selects` it (one may adopt it).
    pub fn enqueue_controller_or_adopters(&self, meta: &ObjectMeta, mut selects: impl FnMut(&K) -> bool) {
        if let Some(o) = self.controller_of(meta) {
            self.queue.add_obj(&o);
        } else if informer::controller_of(meta).is_none() {
            for o in informer::list_in(&self.store, meta.namespace.as_deref().unwrap_or_default(), |o| selects(o)) {
                self.queue.add_obj(&o);
            }
        }
    }
}

type Start = Box<dyn FnOnce(CancellationToken) -> BoxFuture<'static, bool> + Send>;
type OnDelete<K> = Box<dyn FnMut(&K) + Send>;

/// See the module documentation.
pub struct Controller<K: Resource<DynamicType = ()> + Clone + 'static> {
    name: &'static str,
    client: kube::Client,
    scope: Scope<K>,
    writer: Writer<K>,
    triggers: mpsc::UnboundedReceiver<ObjectRef<K>>,
    on_delete: Option<OnDelete<K>>,
    /// The informers of owned and watched resources, in declaration order.
    informers: Vec<Start>,
}

impl<K> Controller<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// A controller named `name` (its logs, spans and events) reconciling every `K`, queued
    /// whenever it is added or changes.
    pub fn new(name: &'static str, client: kube::Client) -> Controller<K> {
        let (store, writer) = reflector::store::<K>();
        let (queue, triggers) = Queue::new();
        Controller { name, client, scope: Scope { store, queue }, writer, triggers, on_delete: None, informers: vec![] }
    }

    /// The cache and queue of the reconciled resource, for handlers declared elsewhere.
    pub fn scope(&self) -> Scope<K> {
        self.scope.clone()
    }

    /// Calls `f` when a reconciled object is deleted (to drop what the controller remembers
    /// about it).
    pub fn on_delete(mut self, f: impl FnMut(&K) + Send + 'static) -> Self {
        self.on_delete = Some(Box::new(f));
        self
    }

    /// Watches every `C`, calling `on_change(old, new, scope)` after each change (`new` is
    /// `None` for deletions) to queue what it concerns; returns its cache.
    pub fn watches<C>(&mut self, on_change: impl FnMut(Option<&C>, Option<&C>, &Scope<K>) + Send + 'static) -> Store<C>
    where
        C: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        self.watches_with(watcher::Config::default(), on_change)
    }

    /// As [`Self::watches`], for the `C` that `config` selects (e.g. by a field selector).
    pub fn watches_with<C>(
        &mut self,
        config: watcher::Config,
        mut on_change: impl FnMut(Option<&C>, Option<&C>, &Scope<K>) + Send + 'static,
    ) -> Store<C>
    where
        C: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        let (store, writer) = reflector::store::<C>();
        let (api, scope, reader) = (Api::<C>::all(self.client.clone()), self.scope.clone(), store.clone());
        let what = self.name;
        self.informers.push(Box::new(move |cancel| {
            Box::pin(async move {
                let handler = move |old: Option<&C>, new: Option<&C>| on_change(old, new, &scope);
                informer::start_into(what, api, config, (reader, writer), handler, cancel).await.is_some()
            })
        }));
        store
    }

    /// Watches every `C`, queueing the `K` that controls a changed one; returns its cache.
    pub fn owns<C>(&mut self) -> Store<C>
    where
        C: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        self.watches(|old: Option<&C>, new: Option<&C>, scope: &Scope<K>| {
            for c in old.into_iter().chain(new) {
                if let Some(o) = scope.controller_of(c.meta()) {
                    scope.queue.add_obj(&o);
                }
            }
        })
    }

    /// Caches every `C` without queueing anything on its changes.
    pub fn caches<C>(&mut self) -> Store<C>
    where
        C: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        self.watches(|_: Option<&C>, _: Option<&C>, _: &Scope<K>| {})
    }

    /// Starts the informers in declaration order, each listed before the next starts, then
    /// reconciles until `cancel` fires. Returns early if `cancel` fires while listing.
    pub async fn run<C, F, Fut, E>(self, ctx: Arc<C>, reconcile: F, cancel: CancellationToken)
    where
        C: Send + Sync + 'static,
        F: Fn(Arc<K>, Arc<C>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: std::error::Error + Send + Sync + 'static,
    {
        let Controller { name, client, scope, writer, triggers, mut on_delete, informers } = self;
        let queue = scope.queue.clone();
        let primary = move |old: Option<&K>, new: Option<&K>| match (old, new) {
            (_, Some(o)) => queue.add_obj(o),
            (Some(o), None) => {
                if let Some(f) = on_delete.as_mut() {
                    f(o)
                }
            }
            (None, None) => {}
        };
        let api = Api::<K>::all(client);
        let listed = informer::start_into(
            name,
            api,
            watcher::Config::default(),
            (scope.store.clone(), writer),
            primary,
            cancel.clone(),
        )
        .await;
        if listed.is_none() {
            return;
        }
        for start in informers {
            if !start(cancel.clone()).await {
                return;
            }
        }
        reconcile_loop(name, scope.store, triggers, ctx, reconcile, cancel).await;
    }
}

/// How long running reconciles get to finish once shutdown began; then the controller stops
/// without them (they are aborted).
pub const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Resolves [`SHUTDOWN_GRACE`] after `cancel` fires: end a kube-runtime controller's stream with
/// it (`take_until`) next to `graceful_shutdown_on(cancel)`. Graceful shutdown alone never ends
/// when it begins before the controller's own store is ready: its runner waits for that store,
/// whose watch the shutdown has already stopped.
pub async fn shutdown_grace_over(cancel: CancellationToken) {
    cancel.cancelled().await;
    tokio::time::sleep(SHUTDOWN_GRACE).await;
}

struct Wrapped<C, K: Resource<DynamicType = ()>> {
    inner: Arc<C>,
    failures: Failures<ObjectRef<K>>,
    name: &'static str,
}

/// Runs `reconcile` for every key pushed into `triggers` (keys of objects missing from `store`
/// are dropped) until `cancel` fires and running reconciles finish: one reconcile at a time per
/// object, each in a `reconcile` span with `controller` and `object` (namespace/name) fields,
/// and failures retried after a per-object [`Backoff::DEFAULT`] delay.
pub async fn reconcile_loop<K, C, F, Fut, E>(
    name: &'static str,
    store: Store<K>,
    triggers: mpsc::UnboundedReceiver<ObjectRef<K>>,
    ctx: Arc<C>,
    reconcile: F,
    cancel: CancellationToken,
) where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    C: Send + Sync + 'static,
    F: Fn(Arc<K>, Arc<C>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    let wrapped = Arc::new(Wrapped { inner: ctx, failures: Failures::new(Backoff::DEFAULT), name });
    let reconcile = Arc::new(reconcile);
    let shutdown = cancel.clone();
    let grace_over = shutdown_grace_over(cancel.clone());
    KubeController::for_stream(futures::stream::pending(), store)
        .reconcile_on(triggers)
        .graceful_shutdown_on(async move { shutdown.cancelled().await })
        .run(
            move |obj: Arc<K>, w: Arc<Wrapped<C, K>>| {
                let key = ObjectRef::from_obj(&*obj);
                let span = tracing::info_span!("reconcile", controller = w.name, object = %key);
                let fut = reconcile(obj, w.inner.clone());
                async move {
                    let result = fut.await;
                    if result.is_ok() {
                        w.failures.succeeded(&key);
                    }
                    result
                }
                .instrument(span)
            },
            |obj: Arc<K>, error: &E, w: Arc<Wrapped<C, K>>| {
                let key = ObjectRef::from_obj(&*obj);
                let (failures, delay) = w.failures.failed_with_count(&key);
                // As a `dyn Error`, so that the log line carries its sources.
                let error = error as &(dyn std::error::Error + 'static);
                tracing::warn!(controller = w.name, object = %key, error, failures, retry_in = ?delay, "reconcile failed");
                Action::requeue(delay)
            },
            wrapped,
        )
        .take_until(grace_over)
        .for_each(|result| {
            if let Err(e) = result {
                tracing::debug!(controller = name, error = %e, "controller event");
            }
            std::future::ready(())
        })
        .await;
}
