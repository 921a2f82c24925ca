//! Informers: a list+watch of one resource kept in a reflector [`Store`], with a change handler
//! that sees the previous and the new version of every object (upstream's
//! `AddFunc`/`UpdateFunc`/`DeleteFunc`), including objects that vanished while the watch was
//! down (noticed when the re-list completes). Handlers map changes to the keys of the objects
//! a controller must reconcile and push them into a [`Queue`], which feeds the reconcile loop
//! of [`crate::controller`] (its scheduler de-duplicates keys).

use futures::channel::mpsc;
use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::Api;
use kube::runtime::reflector::{self, store::Writer, ObjectRef, Store};
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt;
use kube::Resource;
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Where handlers put the keys to reconcile.
pub struct Queue<K: Resource> {
    tx: mpsc::UnboundedSender<ObjectRef<K>>,
}

impl<K: Resource> Clone for Queue<K> {
    fn clone(&self) -> Self {
        Queue { tx: self.tx.clone() }
    }
}

impl<K> Queue<K>
where
    K: Resource<DynamicType = ()>,
{
    /// A queue and the stream to hand to `Controller::reconcile_on`.
    pub fn new() -> (Queue<K>, mpsc::UnboundedReceiver<ObjectRef<K>>) {
        let (tx, rx) = mpsc::unbounded();
        (Queue { tx }, rx)
    }

    /// Asks for `namespace/name` to be reconciled.
    pub fn add(&self, namespace: Option<&str>, name: &str) {
        let mut r = ObjectRef::<K>::new(name);
        if let Some(ns) = namespace {
            r = r.within(ns);
        }
        // The receiver only goes away at shutdown.
        let _ = self.tx.unbounded_send(r);
    }

    /// Asks for `obj` to be reconciled.
    pub fn add_obj(&self, obj: &K) {
        let meta = obj.meta();
        self.add(meta.namespace.as_deref(), meta.name.as_deref().unwrap_or_default());
    }
}

/// Lists and watches `api`, keeps the returned store current, and calls `on_change(old, new)`
/// after each change has been applied to the store (`new` is `None` for deletions). Returns
/// the store once the first list has completed, or `None` if `cancel` fired first. The watch
/// runs until `cancel` fires, retrying with back-off on errors.
pub async fn start<K, F>(
    what: &'static str,
    api: Api<K>,
    config: watcher::Config,
    on_change: F,
    cancel: CancellationToken,
) -> Option<Store<K>>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    F: FnMut(Option<&K>, Option<&K>) + Send + 'static,
{
    let (reader, writer) = reflector::store::<K>();
    start_into(what, api, config, (reader, writer), on_change, cancel).await
}

/// [`start`] into a store created beforehand (so other informers' handlers can hold it).
pub(crate) async fn start_into<K, F>(
    what: &'static str,
    api: Api<K>,
    config: watcher::Config,
    (reader, mut writer): (Store<K>, Writer<K>),
    mut on_change: F,
    cancel: CancellationToken,
) -> Option<Store<K>>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    F: FnMut(Option<&K>, Option<&K>) + Send + 'static,
{
    let store = reader.clone();
    let task_cancel = cancel.clone();
    tokio::spawn(async move {
        let mut events = watcher(api, config).default_backoff().boxed();
        // The store's content when a re-list started, to diff against when it completes.
        let mut before_relist: Option<HashMap<ObjectRef<K>, Arc<K>>> = None;
        loop {
            let event = tokio::select! {
                _ = task_cancel.cancelled() => return,
                e = events.next() => e,
            };
            let event = match event {
                Some(Ok(e)) => e,
                Some(Err(e)) => {
                    tracing::debug!(informer = what, error = %e, "watch failed; retrying");
                    continue;
                }
                None => return,
            };
            match &event {
                Event::Apply(obj) => {
                    let old = store.get(&ObjectRef::from_obj(obj));
                    writer.apply_watcher_event(&event);
                    on_change(old.as_deref(), Some(obj));
                }
                Event::Delete(obj) => {
                    let old = store.get(&ObjectRef::from_obj(obj));
                    writer.apply_watcher_event(&event);
                    on_change(Some(old.as_deref().unwrap_or(obj)), None);
                }
                Event::Init => {
                    before_relist = Some(store.state().into_iter().map(|o| (ObjectRef::from_obj(&*o), o)).collect());
                    writer.apply_watcher_event(&event);
                }
                Event::InitApply(_) => writer.apply_watcher_event(&event),
                Event::InitDone => {
                    writer.apply_watcher_event(&event);
                    let mut before = before_relist.take().unwrap_or_default();
                    for now in store.state() {
                        let old = before.remove(&ObjectRef::from_obj(&*now));
                        let unchanged = old.as_ref().is_some_and(|o| {
                            o.meta().resource_version.is_some()
                                && o.meta().resource_version == now.meta().resource_version
                        });
                        if !unchanged {
                            on_change(old.as_deref(), Some(&now));
                        }
                    }
                    for (_, gone) in before {
                        on_change(Some(&gone), None);
                    }
                }
            }
        }
    });
    tokio::select! {
        _ = cancel.cancelled() => None,
        r = reader.wait_until_ready() => r.ok().map(|_| reader),
    }
}

/// Every object in `store` within `namespace` for which `keep` holds.
pub fn list_in<K, P>(store: &Store<K>, namespace: &str, mut keep: P) -> Vec<Arc<K>>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
    P: FnMut(&K) -> bool,
{
    store.state().into_iter().filter(|o| o.meta().namespace.as_deref() == Some(namespace) && keep(o)).collect()
}

/// The controller reference (`controller: true`) of an object, if any.
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references.iter().flatten().find(|r| r.controller == Some(true))
}

/// The object of kind `K` in `store` that `meta`'s controller reference names (same namespace,
/// name and uid), if any.
pub fn controller_in<K>(store: &Store<K>, meta: &ObjectMeta) -> Option<Arc<K>>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    let r = controller_of(meta).filter(|r| r.kind == K::kind(&()))?;
    get(store, meta.namespace.as_deref(), &r.name).filter(|o| o.meta().uid.as_deref() == Some(r.uid.as_str()))
}

/// The object `namespace/name` in `store`.
pub fn get<K>(store: &Store<K>, namespace: Option<&str>, name: &str) -> Option<Arc<K>>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    let mut r = ObjectRef::<K>::new(name);
    if let Some(ns) = namespace {
        r = r.within(ns);
    }
    store.get(&r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn cm(ns: &str, name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta { name: Some(name.into()), namespace: Some(ns.into()), ..Default::default() },
            ..Default::default()
        }
    }

    #[test]
    fn queued_keys_carry_namespace_and_name() {
        let (q, mut rx) = Queue::<ConfigMap>::new();
        q.add_obj(&cm("a", "x"));
        let r = rx.try_recv().expect("queued");
        assert_eq!((r.namespace.as_deref(), r.name.as_str()), (Some("a"), "x"));
    }

    #[test]
    fn the_controller_is_found_by_kind_name_and_uid() {
        use k8s_openapi::api::apps::v1::ReplicaSet;
        let (reader, mut writer) = reflector::store::<ReplicaSet>();
        let rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("a".into()),
                uid: Some("u1".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        writer.apply_watcher_event(&Event::Apply(rs));
        let owned_by = |kind: &str, uid: &str, controller| ObjectMeta {
            namespace: Some("a".into()),
            owner_references: Some(vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: kind.into(),
                name: "web".into(),
                uid: uid.into(),
                controller: Some(controller),
                block_owner_deletion: None,
            }]),
            ..Default::default()
        };
        assert!(controller_in(&reader, &owned_by("ReplicaSet", "u1", true)).is_some());
        assert!(controller_in(&reader, &owned_by("ReplicaSet", "u2", true)).is_none(), "a recreated owner");
        assert!(controller_in(&reader, &owned_by("Deployment", "u1", true)).is_none());
        assert!(controller_in(&reader, &owned_by("ReplicaSet", "u1", false)).is_none(), "not the controller");
    }

    #[test]
    fn lookups_stay_within_the_namespace() {
        let (reader, mut writer) = reflector::store::<ConfigMap>();
        for (ns, name) in [("a", "x"), ("a", "y"), ("b", "x")] {
            writer.apply_watcher_event(&Event::Apply(cm(ns, name)));
        }
        assert_eq!(list_in(&reader, "a", |_| true).len(), 2);
        assert_eq!(list_in(&reader, "a", |c| c.metadata.name.as_deref() == Some("y")).len(), 1);
        assert!(get(&reader, Some("b"), "x").is_some());
        assert!(get(&reader, Some("b"), "y").is_none());
    }
}
