//! `ResourceQuota` admission, as upstream's plugin (validating, last in the chain): a create or
//! update that would take a quota's usage past its `hard` limits is refused with 403
//! (`exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2`), and an admitted
//! one is charged before the object is written, by writing the quota's new `status.used` with
//! compare-and-swap on its revision; the quota controller recounts usage and releases what
//! deleted objects held.
//!
//! As upstream's `resourcequota/controller.go`, the quotas are read from a watch-fed cache and
//! the charges of one namespace are batched: requests that arrive while a batch is being
//! written wait in the namespace's queue, and one worker checks them in arrival order against
//! the usage its predecessors in the batch added, then writes each changed quota once for the
//! whole batch (all in one transaction, compare-and-swap on every quota's revision). A lost
//! race re-checks the whole batch against the quotas read afresh from the store, so
//! concurrent creates never overshoot.
//!
//! A create's own write goes into its batch's transaction (the registry offers it to
//! admission, [`PendingWrite`](crate::admission::PendingWrite)): the charge and the object are
//! stored together or not at all, so no create waits for a quota write before its own, and no
//! charge is left for an object that was not stored (upstream leaves those to the controller's
//! next recount).

mod check;

pub use check::{check_request_with, QuotaDoc, Request};

use crate::admission::{Attributes, Operation, ValidatingPlugin};
use crate::admission_cache::Cache;
use crate::error::ApiError;
use crate::object;
use futures::future::BoxFuture;
use k1s_api::quota::usage::{Evaluator, Operation as QuotaOp};
use k1s_api::quota::{self, ResourceList};
use k1s_store::{KeyValue, Op, Store, StoreError};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// How often a batch is checked again after losing a compare-and-swap race on a quota.
const CHARGE_RETRIES: usize = 8;

/// The most creates written in one batch's transaction (etcd refuses transactions of more than
/// 128 operations by default); the others are written by the registry once charged.
const MAX_CARRIED_WRITES: usize = 64;

/// A quota as read from the store, with what a compare-and-swap write needs.
struct Stored {
    key: String,
    revision: u64,
    doc: QuotaDoc,
}

fn stored(kv: &KeyValue) -> Option<Stored> {
    let v = object::from_storage(&kv.value, kv.mod_revision)?;
    Some(Stored { key: kv.key.clone(), revision: kv.mod_revision, doc: QuotaDoc::new(v) })
}

/// One request waiting for its charge: what the check needs, owned.
struct Charge {
    op: QuotaOp,
    group: String,
    resource: String,
    name: String,
    object: Value,
    old_object: Option<Value>,
    status: bool,
    /// When the request was first checked: the batch checks it as of then.
    now: jiff::Timestamp,
    /// The request's usage, computed at its first check and reused by the batch's.
    usage: OnceLock<ResourceList>,
    /// A create's own write, made in the transaction that charges it.
    write: Option<Op>,
}

/// A charge's answer: refused, or admitted with the outcome of its create's write when the
/// batch made it (`None`: the registry makes it).
type Answer = Result<Option<Result<KeyValue, StoreError>>, ApiError>;

struct Waiter {
    charge: Charge,
    reply: oneshot::Sender<Answer>,
}

/// The key a create writes.
fn create_key(write: &Option<Op>) -> Option<&str> {
    match write {
        Some(Op::Create { key, .. }) => Some(key),
        _ => None,
    }
}

/// The charges waiting in one namespace, and whether a worker is draining them.
#[derive(Default)]
struct Queue {
    waiting: Vec<Waiter>,
    running: bool,
}

struct Inner {
    store: Store,
    quotas: Cache<Stored>,
    queues: Mutex<HashMap<String, Queue>>,
}

pub struct ResourceQuotaAdmission {
    inner: Arc<Inner>,
}

fn prefix() -> Result<String, ApiError> {
    Ok(crate::registry::builtin("", "v1", "resourcequotas")?.storage_prefix())
}

impl ResourceQuotaAdmission {
    pub fn new(store: Store) -> Result<ResourceQuotaAdmission, ApiError> {
        let quotas = Cache::new(store.clone(), &prefix()?, stored);
        Ok(ResourceQuotaAdmission { inner: Arc::new(Inner { store, quotas, queues: Mutex::default() }) })
    }

    async fn evaluate(&self, attrs: &Attributes<'_>) -> Result<(), ApiError> {
        let Some(namespace) = attrs.namespace.filter(|n| !n.is_empty()) else { return Ok(()) };
        let op = match attrs.operation {
            Operation::Create => QuotaOp::Create,
            Operation::Update => QuotaOp::Update,
            Operation::Delete | Operation::Connect => return Ok(()),
        };
        let r = attrs.resource;
        if r.resource == "events" {
            return Ok(());
        }
        let eval = Evaluator::new(r.group, r.resource);
        let Some(obj) = attrs.object.as_deref() else { return Ok(()) };
        if !eval.handles(op, attrs.subresource) {
            return Ok(());
        }
        let quotas = self.inner.cached(namespace)?;
        if quotas.is_empty() {
            return Ok(());
        }
        let docs: Vec<&QuotaDoc> = quotas.iter().map(|q| &q.doc).collect();
        let req = Request {
            operation: op,
            object: obj,
            old_object: attrs.old_object,
            status: attrs.subresource == Some("status"),
            now: jiff::Timestamp::now(),
        };
        let usage = OnceLock::new();
        // A create that a quota matches is charged: it goes straight to its batch, which checks
        // it. Anything else is checked against the cached usage first: a request no quota
        // charges (most updates), a refusal and a dry run need no write, so they never wait.
        let charged_create = op == QuotaOp::Create && !attrs.dry_run && docs.iter().any(|d| d.matches(&eval, obj));
        if !charged_create {
            let forbidden = |msg: String| ApiError::forbidden_message(r.group, r.resource, attrs.name, msg);
            let new_used = check_request_with(&docs, &eval, &req, &usage).map_err(forbidden)?;
            if attrs.dry_run || new_used.iter().all(Option::is_none) {
                return Ok(());
            }
        }
        let charge = Charge {
            op,
            group: r.group.to_string(),
            resource: r.resource.to_string(),
            name: attrs.name.to_string(),
            object: quota_view(obj),
            old_object: attrs.old_object.map(quota_view),
            status: req.status,
            now: req.now,
            usage,
            write: attrs.write.filter(|_| charged_create).map(|w| w.op.clone()),
        };
        let (reply, rx) = oneshot::channel();
        Inner::enqueue(&self.inner, namespace, Waiter { charge, reply });
        let answer = rx.await.unwrap_or_else(|_| Err(ApiError::internal("the quota charge was interrupted")))?;
        if let (Some(outcome), Some(write)) = (answer, attrs.write) {
            write.done(outcome);
        }
        Ok(())
    }
}

/// What quota checking reads of an object, for a charge waiting in its batch: the object
/// without the metadata no evaluator, scope or check reads (managed fields, labels, owner
/// references), so that it is not copied whole for every create.
fn quota_view(obj: &Value) -> Value {
    let Some(map) = obj.as_object() else { return obj.clone() };
    map.iter()
        .map(|(k, v)| {
            let v = match (k.as_str(), v.as_object()) {
                ("metadata", Some(meta)) => Value::Object(
                    ["resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "annotations"]
                        .into_iter()
                        .filter_map(|f| meta.get(f).map(|v| (f.to_string(), v.clone())))
                        .collect(),
                ),
                _ => v.clone(),
            };
            (k.clone(), v)
        })
        .collect::<serde_json::Map<_, _>>()
        .into()
}

impl Inner {
    fn cached(&self, namespace: &str) -> Result<Vec<Arc<Stored>>, ApiError> {
        self.quotas
            .list(namespace)
            .map_err(|e| ApiError::internal(format!("reading the quotas of namespace {namespace}: {e}")))
    }

    /// The namespace's quotas, straight from the store (after a lost race).
    fn live(&self, namespace: &str) -> Result<Vec<Arc<Stored>>, ApiError> {
        let page = self
            .store
            .list(&format!("{}{namespace}/", prefix()?), None, 0, None)
            .map_err(|e| ApiError::internal(format!("reading the quotas of namespace {namespace}: {e}")))?;
        Ok(page.items.iter().filter_map(stored).map(Arc::new).collect())
    }

    /// Queues a charge, starting the namespace's worker unless one runs.
    fn enqueue(this: &Arc<Inner>, namespace: &str, waiter: Waiter) {
        let mut queues = this.queues.lock().unwrap_or_else(|p| p.into_inner());
        let q = queues.entry(namespace.to_string()).or_default();
        q.waiting.push(waiter);
        if !q.running {
            q.running = true;
            let worker = Worker { inner: this.clone(), namespace: namespace.to_string(), done: false };
            tokio::spawn(worker.run());
        }
    }

    /// Checks and charges one batch, writing its admitted creates with the charge; each
    /// waiter's answer, in order.
    async fn charge_batch(&self, namespace: &str, batch: &[Charge]) -> Vec<Answer> {
        let mut refused: Vec<Option<ApiError>> = batch.iter().map(|_| None).collect();
        // Creates whose own write the store refused (the name is taken): neither charged nor
        // written again.
        let mut failed: Vec<Option<StoreError>> = batch.iter().map(|_| None).collect();
        let mut written: Vec<Option<KeyValue>> = batch.iter().map(|_| None).collect();
        let (mut races, mut fresh) = (0, false);
        loop {
            let quotas = match if fresh { self.live(namespace) } else { self.cached(namespace) } {
                Ok(q) => q,
                Err(e) => return batch.iter().map(|_| Err(e.clone())).collect(),
            };
            fresh = true;
            if quotas.is_empty() {
                break;
            }
            let mut docs: Vec<QuotaDoc> = quotas.iter().map(|q| q.doc.clone()).collect();
            // The names the admitted creates take, so far: a second create of one name (two
            // clients racing) is refused as the store would refuse it, and never charged.
            let mut taken: HashSet<&str> = HashSet::new();
            for (i, c) in batch.iter().enumerate() {
                if failed[i].is_some() {
                    continue;
                }
                if let Some(key) = create_key(&c.write).filter(|k| taken.contains(k)) {
                    refused[i] = None;
                    failed[i] = Some(StoreError::AlreadyExists(key.to_string()));
                    continue;
                }
                let verdict = &mut refused[i];
                let eval = Evaluator::new(&c.group, &c.resource);
                let req = Request {
                    operation: c.op,
                    object: &c.object,
                    old_object: c.old_object.as_ref(),
                    status: c.status,
                    now: c.now,
                };
                match check_request_with(&docs, &eval, &req, &c.usage) {
                    Ok(new_used) => {
                        *verdict = None;
                        taken.extend(create_key(&c.write));
                        for (d, used) in docs.iter_mut().zip(new_used) {
                            if let Some(used) = used {
                                d.used = used;
                            }
                        }
                    }
                    Err(msg) => *verdict = Some(ApiError::forbidden_message(&c.group, &c.resource, &c.name, msg)),
                }
            }
            let mut ops: Vec<Op> = quotas
                .iter()
                .zip(&docs)
                .filter(|(q, d)| !quota::equals(&d.used, &q.doc.used))
                .map(|(q, d)| {
                    let mut obj = Value::clone(&q.doc.object);
                    if let Some(map) = obj.as_object_mut() {
                        let status = map.entry("status").or_insert_with(|| Value::Object(Default::default()));
                        if let Some(s) = status.as_object_mut() {
                            s.insert("used".into(), quota::to_json(&d.used));
                        }
                    }
                    Op::Update { key: q.key.clone(), value: object::to_storage(&obj), expected: Some(q.revision) }
                })
                .collect();
            if ops.is_empty() {
                break;
            }
            let charged = ops.len();
            let carried: Vec<usize> = (0..batch.len())
                .filter(|&i| refused[i].is_none() && failed[i].is_none() && batch[i].write.is_some())
                .take(MAX_CARRIED_WRITES)
                .collect();
            ops.extend(carried.iter().filter_map(|&i| batch[i].write.clone()));
            match self.store.txn(ops).await {
                Ok(kvs) => {
                    for (&i, kv) in carried.iter().zip(kvs.into_iter().skip(charged)) {
                        written[i] = Some(kv);
                    }
                    break;
                }
                Err(StoreError::AlreadyExists(key)) => {
                    let Some(&i) = carried.iter().find(|&&i| create_key(&batch[i].write) == Some(key.as_str())) else {
                        let e =
                            ApiError::internal(format!("charging the quotas of namespace {namespace}: {key} exists"));
                        return batch.iter().map(|_| Err(e.clone())).collect();
                    };
                    tracing::debug!(
                        namespace,
                        key,
                        "a create in the quota batch is refused by the store; charging the others"
                    );
                    failed[i] = Some(StoreError::AlreadyExists(key));
                }
                Err(StoreError::Conflict { key, .. } | StoreError::NotFound(key)) => {
                    tracing::debug!(namespace, key, "quota changed while charging; checking the batch again");
                    races += 1;
                    if races == CHARGE_RETRIES {
                        let lost = key.rsplit('/').next().unwrap_or_default();
                        return batch.iter().map(|_| Err(ApiError::stale("", "resourcequotas", lost))).collect();
                    }
                }
                Err(e) => {
                    let e = ApiError::internal(format!("charging the quotas of namespace {namespace}: {e}"));
                    return batch.iter().map(|_| Err(e.clone())).collect();
                }
            }
        }
        refused
            .into_iter()
            .zip(failed)
            .zip(written)
            .map(|((r, f), w)| match (r, f, w) {
                (Some(e), _, _) => Err(e),
                (None, Some(e), _) => Ok(Some(Err(e))),
                (None, None, Some(kv)) => Ok(Some(Ok(kv))),
                (None, None, None) => Ok(None),
            })
            .collect()
    }
}

/// Drains one namespace's queue, batch after batch, until it is empty.
struct Worker {
    inner: Arc<Inner>,
    namespace: String,
    /// Set when the queue was found empty and the worker left it: nothing to hand over.
    done: bool,
}

impl Worker {
    async fn run(mut self) {
        loop {
            let batch = {
                let mut queues = self.inner.queues.lock().unwrap_or_else(|p| p.into_inner());
                let Some(q) = queues.get_mut(&self.namespace) else {
                    self.done = true;
                    return;
                };
                if q.waiting.is_empty() {
                    queues.remove(&self.namespace);
                    self.done = true;
                    return;
                }
                std::mem::take(&mut q.waiting)
            };
            let (charges, replies): (Vec<Charge>, Vec<_>) = batch.into_iter().map(|w| (w.charge, w.reply)).unzip();
            let answers = self.inner.charge_batch(&self.namespace, &charges).await;
            for (reply, answer) in replies.into_iter().zip(answers) {
                let _ = reply.send(answer);
            }
        }
    }
}

impl Drop for Worker {
    /// A worker that did not finish (its task panicked) hands the waiting charges to a new one.
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut queues = self.inner.queues.lock().unwrap_or_else(|p| p.into_inner());
        let Some(q) = queues.get_mut(&self.namespace) else { return };
        q.running = false;
        if !q.waiting.is_empty() {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                q.running = true;
                let worker = Worker { inner: self.inner.clone(), namespace: self.namespace.clone(), done: false };
                rt.spawn(worker.run());
            }
        }
    }
}

impl ValidatingPlugin for ResourceQuotaAdmission {
    fn name(&self) -> &'static str {
        "ResourceQuota"
    }

    fn validate<'a>(&'a self, attrs: &'a Attributes<'_>) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(self.evaluate(attrs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str) -> Charge {
        Charge {
            op: QuotaOp::Create,
            group: String::new(),
            resource: "pods".into(),
            name: name.into(),
            object: json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "c"}]}}),
            old_object: None,
            status: false,
            now: jiff::Timestamp::now(),
            usage: OnceLock::new(),
            write: None,
        }
    }

    /// A store holding quota `ns/q` of `pods` pods, none used: the store's directory, the store,
    /// the quota's key and its stored revision.
    async fn with_quota(pods: u32) -> (tempfile::TempDir, Store, String, KeyValue) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path(), k1s_store::StoreOptions::default()).expect("open");
        let key = format!("{}ns/q", prefix().expect("prefix"));
        let q = json!({"metadata": {"name": "q", "namespace": "ns"}, "spec": {"hard": {"pods": pods.to_string()}},
            "status": {"hard": {"pods": pods.to_string()}, "used": {"pods": "0"}}});
        let created = store.create(&key, object::to_storage(&q)).await.expect("write");
        (dir, store, key, created)
    }

    #[tokio::test]
    async fn a_batch_is_checked_in_order_and_charged_with_one_write() {
        let (_dir, store, key, created) = with_quota(2).await;
        let admission = ResourceQuotaAdmission::new(store.clone()).expect("plugin");
        let answers = admission.inner.charge_batch("ns", &[pod("a"), pod("b"), pod("c")]).await;
        assert!(answers[0].is_ok() && answers[1].is_ok(), "{answers:?}");
        let refused = answers[2].as_ref().expect_err("the third pod is over the quota");
        assert_eq!(refused.code, 403);
        assert!(refused.message.contains("exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2"));
        let kv = store.get(&key).expect("read").expect("quota");
        assert_eq!(kv.version, created.version + 1, "one write for the whole batch");
        let stored = stored(&kv).expect("quota");
        assert_eq!(quota::pretty_print(&stored.doc.used), "pods=2");
    }

    #[tokio::test]
    async fn a_batchs_creates_are_written_with_its_charge_and_a_taken_name_is_not_charged() {
        let (_dir, store, key, created) = with_quota(2).await;
        store.create("/registry/pods/ns/b", bytes::Bytes::from_static(b"{}")).await.expect("write");
        let with_write = |name: &str| Charge {
            write: Some(Op::Create {
                key: format!("/registry/pods/ns/{name}"),
                value: bytes::Bytes::from(format!("{{\"name\":\"{name}\"}}")),
            }),
            ..pod(name)
        };
        let admission = ResourceQuotaAdmission::new(store.clone()).expect("plugin");
        let batch = [with_write("a"), with_write("b"), with_write("c"), with_write("d")];
        let answers = admission.inner.charge_batch("ns", &batch).await;
        // `b` exists: refused by the store, not charged, so `c` fits and `d` is over the quota.
        for (i, name) in [(0, "a"), (2, "c")] {
            match &answers[i] {
                Ok(Some(Ok(kv))) => {
                    assert_eq!(kv.key, format!("/registry/pods/ns/{name}"));
                    let stored = store.get(&kv.key).expect("read").expect("written");
                    assert_eq!(stored.value, format!("{{\"name\":\"{name}\"}}"));
                }
                other => panic!("{name}: {other:?}"),
            }
        }
        assert!(matches!(&answers[1], Ok(Some(Err(StoreError::AlreadyExists(k)))) if k.ends_with("/b")), "{answers:?}");
        assert!(matches!(&answers[3], Err(e) if e.code == 403), "{answers:?}");
        assert!(store.get("/registry/pods/ns/d").expect("read").is_none());
        let kv = store.get(&key).expect("read").expect("quota");
        assert_eq!(kv.version, created.version + 1, "one charge for the batch");
        assert_eq!(quota::pretty_print(&stored(&kv).expect("quota").doc.used), "pods=2");
    }

    #[tokio::test]
    async fn two_creates_of_one_name_in_a_batch_are_one_write_and_one_charge() {
        let (_dir, store, key, _) = with_quota(5).await;
        let same = |value: &'static str| Charge {
            write: Some(Op::Create {
                key: "/registry/pods/ns/x".into(),
                value: bytes::Bytes::from_static(value.as_bytes()),
            }),
            ..pod("x")
        };
        let admission = ResourceQuotaAdmission::new(store.clone()).expect("plugin");
        let answers = admission.inner.charge_batch("ns", &[same("first"), same("second")]).await;
        assert!(matches!(&answers[0], Ok(Some(Ok(_)))), "{answers:?}");
        assert!(matches!(&answers[1], Ok(Some(Err(StoreError::AlreadyExists(_))))), "{answers:?}");
        let pod = store.get("/registry/pods/ns/x").expect("read").expect("written");
        assert_eq!(pod.value, "first");
        let kv = store.get(&key).expect("read").expect("quota");
        assert_eq!(quota::pretty_print(&stored(&kv).expect("quota").doc.used), "pods=1");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_charges_racing_other_quota_writes_never_overshoot() {
        let (_dir, store, key, _) = with_quota(5).await;
        let admission = ResourceQuotaAdmission::new(store.clone()).expect("plugin");
        // Another writer rewrites the quota as it is a few times (as the controller might), so
        // batches may lose compare-and-swap races and must check again (fewer losses than the
        // retries, so every request gets a quota answer).
        let racer = {
            let (store, key) = (store.clone(), key.clone());
            tokio::spawn(async move {
                let mut rewrites = 0;
                while rewrites < 5 {
                    let kv = store.get(&key).expect("read").expect("quota");
                    if store.update(&key, kv.value.clone(), Some(kv.mod_revision)).await.is_ok() {
                        rewrites += 1;
                    }
                    tokio::task::yield_now().await;
                }
            })
        };
        let mut tasks = Vec::new();
        for i in 0..20 {
            let inner = admission.inner.clone();
            tasks.push(tokio::spawn(async move {
                let (reply, rx) = oneshot::channel();
                Inner::enqueue(&inner, "ns", Waiter { charge: pod(&format!("p{i}")), reply });
                rx.await.expect("answer")
            }));
        }
        let mut admitted = 0;
        for t in tasks {
            match t.await.expect("join") {
                Ok(_) => admitted += 1,
                Err(e) => assert!(e.code == 403 && e.message.contains("exceeded quota: q"), "{e:?}"),
            }
        }
        racer.await.expect("join");
        assert_eq!(admitted, 5);
        let kv = store.get(&key).expect("read").expect("quota");
        assert_eq!(quota::pretty_print(&stored(&kv).expect("quota").doc.used), "pods=5");
    }

    #[test]
    fn the_quota_view_is_checked_as_the_whole_object() {
        let docs = [
            QuotaDoc::new(json!({"metadata": {"name": "all"},
                "status": {"hard": {"pods": "9", "requests.cpu": "4", "requests.storage": "10Gi",
                                    "gold.storageclass.storage.k8s.io/requests.storage": "1Gi"},
                           "used": {"pods": "1", "requests.cpu": "1", "requests.storage": "0",
                                    "gold.storageclass.storage.k8s.io/requests.storage": "0"}}})),
            QuotaDoc::new(json!({"metadata": {"name": "terminating"}, "spec": {"scopes": ["Terminating"]},
                "status": {"hard": {"pods": "1"}, "used": {"pods": "1"}}})),
            QuotaDoc::new(json!({"metadata": {"name": "high"},
                "spec": {"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}},
                "status": {"hard": {"pods": "5"}, "used": {"pods": "0"}}})),
        ];
        let meta = json!({"name": "x", "resourceVersion": "7", "labels": {"a": "b"},
                          "managedFields": [{"manager": "kubectl", "operation": "Apply"}]});
        let cases = [
            (
                "pods",
                json!({"metadata": meta, "spec": {"priorityClassName": "high", "activeDeadlineSeconds": 5,
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]}}),
            ),
            ("pods", json!({"metadata": meta, "spec": {"containers": [{"name": "c"}]}})),
            (
                "persistentvolumeclaims",
                json!({"metadata": {"name": "c", "resourceVersion": "3",
                "annotations": {"volume.beta.kubernetes.io/storage-class": "gold"}},
                "spec": {"resources": {"requests": {"storage": "2Gi"}}}}),
            ),
        ];
        for (resource, whole) in cases {
            let view = quota_view(&whole);
            assert!(view.pointer("/metadata/managedFields").is_none() && view.pointer("/metadata/labels").is_none());
            let eval = Evaluator::new("", resource);
            let check = |obj: &Value| {
                let req = Request {
                    operation: QuotaOp::Create,
                    object: obj,
                    old_object: None,
                    status: false,
                    now: jiff::Timestamp::UNIX_EPOCH,
                };
                check::check_request_with(&docs, &eval, &req, &OnceLock::new())
                    .map(|used| used.iter().map(|u| u.as_ref().map(quota::pretty_print)).collect::<Vec<_>>())
            };
            assert_eq!(check(&view), check(&whole), "{resource}");
        }
    }
}
