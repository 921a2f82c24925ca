//! Watch-fed caches of the objects admission plugins read on every request (upstream's
//! informer listers): ResourceQuotas and LimitRanges by namespace, and the Namespaces whose
//! labels PodSecurity and the admission policies select on, each object decoded once when it
//! changes instead of read and decoded from the store on every create; and the Pods and
//! PersistentVolumes the Node authorizer follows.
//!
//! A cache lists its prefix once, then follows a store watch from the list's revision. It
//! has no task of its own: every read first takes the watch's pending events. The store
//! queues a commit's events before it makes that revision current, so a read sees every
//! write that had completed when it started, as a read from the store would; a cache that
//! falls behind a compaction lists again.

use k1s_store::{EventKind, KeyValue, Store, StoreError, Watcher};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// Objects under one store prefix, `<prefix><namespace>/<name>` (or `<prefix><name>` for
/// cluster-scoped ones, kept under the namespace `""`), decoded by `parse`.
pub struct Cache<T> {
    store: Store,
    prefix: String,
    parse: fn(&KeyValue) -> Option<T>,
    inner: Mutex<Inner<T>>,
}

struct Inner<T> {
    /// `None` until listed, and after the watch failed: the next read lists again.
    watcher: Option<Watcher>,
    by_namespace: HashMap<String, BTreeMap<String, Arc<T>>>,
}

/// The namespace and name a key under the prefix names.
fn split(rest: &str) -> (&str, &str) {
    rest.split_once('/').unwrap_or(("", rest))
}

impl<T> Cache<T> {
    pub fn new(store: Store, prefix: &str, parse: fn(&KeyValue) -> Option<T>) -> Cache<T> {
        Cache {
            store,
            prefix: prefix.to_string(),
            parse,
            inner: Mutex::new(Inner { watcher: None, by_namespace: HashMap::new() }),
        }
    }

    /// The objects in `namespace`, in name order.
    pub fn list(&self, namespace: &str) -> Result<Vec<Arc<T>>, StoreError> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        self.sync(&mut inner)?;
        Ok(inner.by_namespace.get(namespace).map(|m| m.values().cloned().collect()).unwrap_or_default())
    }

    /// One object: `namespace` is `""` for a cluster-scoped one.
    pub fn get(&self, namespace: &str, name: &str) -> Result<Option<Arc<T>>, StoreError> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        self.sync(&mut inner)?;
        Ok(inner.by_namespace.get(namespace).and_then(|m| m.get(name)).cloned())
    }

    /// Whether an object in `namespace` satisfies `f` (asked under the cache's lock: `f` must
    /// not read the cache).
    pub fn any(&self, namespace: &str, mut f: impl FnMut(&T) -> bool) -> Result<bool, StoreError> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        self.sync(&mut inner)?;
        Ok(inner.by_namespace.get(namespace).is_some_and(|m| m.values().any(|v| f(v))))
    }

    fn insert(&self, inner: &mut Inner<T>, kv: &KeyValue) {
        let Some(rest) = kv.key.strip_prefix(&self.prefix) else { return };
        let (ns, name) = split(rest);
        match (self.parse)(kv) {
            Some(v) => {
                inner.by_namespace.entry(ns.to_string()).or_default().insert(name.to_string(), Arc::new(v));
            }
            None => {
                tracing::warn!(key = kv.key, "admission cache: undecodable object left out");
                Self::remove(inner, ns, name);
            }
        }
    }

    fn remove(inner: &mut Inner<T>, ns: &str, name: &str) {
        if let Some(m) = inner.by_namespace.get_mut(ns) {
            m.remove(name);
            if m.is_empty() {
                inner.by_namespace.remove(ns);
            }
        }
    }

    fn relist(&self, inner: &mut Inner<T>) -> Result<(), StoreError> {
        let page = self.store.list(&self.prefix, None, 0, None)?;
        inner.by_namespace.clear();
        for kv in &page.items {
            self.insert(inner, kv);
        }
        // An empty store (revision 0) has nothing to follow yet: list again next time.
        inner.watcher = if page.revision == 0 { None } else { Some(self.store.watch(&self.prefix, page.revision)?) };
        Ok(())
    }

    /// Applies the watch's pending events (listing first when there is no watch).
    fn sync(&self, inner: &mut Inner<T>) -> Result<(), StoreError> {
        for _ in 0..2 {
            let Some(mut watcher) = inner.watcher.take() else {
                self.relist(inner)?;
                if inner.watcher.is_none() {
                    return Ok(());
                }
                continue;
            };
            let failed = loop {
                match watcher.try_next() {
                    Ok(Some(ev)) => {
                        let Some(rest) = ev.kv.key.strip_prefix(&self.prefix) else { continue };
                        match ev.kind {
                            EventKind::Create | EventKind::Update => self.insert(inner, &ev.kv),
                            EventKind::Delete => {
                                let (ns, name) = split(rest);
                                Self::remove(inner, ns, name);
                            }
                        }
                    }
                    Ok(None) => break None,
                    Err(e) => break Some(e),
                }
            };
            match failed {
                None => {
                    inner.watcher = Some(watcher);
                    return Ok(());
                }
                Some(e) => tracing::debug!(prefix = self.prefix, error = %e, "admission cache: listing again"),
            }
        }
        Err(StoreError::Corrupt(format!("admission cache of {}: the watch keeps failing", self.prefix)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn parse(kv: &KeyValue) -> Option<String> {
        String::from_utf8(kv.value.to_vec()).ok()
    }

    #[tokio::test]
    async fn reads_see_completed_writes_and_deletes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path(), k1s_store::StoreOptions::default()).expect("open");
        store.create("/r/q/a/one", Bytes::from("1")).await.expect("write");
        let cache = Cache::new(store.clone(), "/r/q/", parse);
        let names = |ns: &str| cache.list(ns).expect("list").iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(names("a"), ["1"]);
        store.create("/r/q/a/two", Bytes::from("2")).await.expect("write");
        store.create("/r/q/b/one", Bytes::from("3")).await.expect("write");
        store.create("/r/other/a/x", Bytes::from("4")).await.expect("write");
        assert_eq!(names("a"), ["1", "2"]);
        assert_eq!(names("b"), ["3"]);
        store.update("/r/q/a/one", Bytes::from("5"), None).await.expect("write");
        store.delete("/r/q/a/two", None).await.expect("delete");
        assert_eq!(names("a"), ["5"]);
        assert!(names("c").is_empty());
    }

    #[tokio::test]
    async fn cluster_scoped_objects_are_got_by_name() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path(), k1s_store::StoreOptions::default()).expect("open");
        store.create("/r/ns/dev", Bytes::from("1")).await.expect("write");
        let cache = Cache::new(store.clone(), "/r/ns/", parse);
        let get = |name: &str| cache.get("", name).expect("get").map(|s| s.to_string());
        assert_eq!(get("dev").as_deref(), Some("1"));
        assert_eq!(get("prod"), None);
        store.update("/r/ns/dev", Bytes::from("2"), None).await.expect("write");
        store.create("/r/ns/prod", Bytes::from("3")).await.expect("write");
        assert_eq!(get("dev").as_deref(), Some("2"));
        assert_eq!(get("prod").as_deref(), Some("3"));
        store.delete("/r/ns/dev", None).await.expect("delete");
        assert_eq!(get("dev"), None);
    }

    #[tokio::test]
    async fn an_empty_store_is_listed_until_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path(), k1s_store::StoreOptions::default()).expect("open");
        let cache = Cache::new(store.clone(), "/r/q/", parse);
        assert!(cache.list("a").expect("list").is_empty());
        store.create("/r/q/a/one", Bytes::from("1")).await.expect("write");
        assert_eq!(cache.list("a").expect("list").len(), 1);
    }
}
