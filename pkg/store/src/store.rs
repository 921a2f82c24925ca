//! The store as the API server sees it: one cheap-to-clone handle, [`Store`], over one of the
//! backends, with the same operations, revisions and errors whichever it is. Nothing above this
//! crate knows which backend it has.
//!
//! - revisioned reads: [`Store::get`], [`Store::list`] (range with limit and continue, also at a
//!   past revision), [`Store::current_revision`], [`Store::compacted_revision`];
//! - conditional writes: [`Store::create`], [`Store::update`] and [`Store::delete`] with
//!   compare-and-swap on the mod revision, [`Store::txn`] for several at once;
//! - [`Store::watch`] from a revision (`Compacted` when it is no longer retained), and
//!   [`Store::compact`];
//! - [`Store::stats`] for `/metrics`;
//! - encryption at rest: with a [`Transformer`] in the options, values are transformed on their
//!   way into the backend and back on their way out (see [`crate::transform`]).
//!
//! Dispatch is a `match` on an enum, not a trait object: the embedded RocksDB backend's reads
//! stay direct calls.

use crate::etcd::{EtcdConfig, EtcdStore};
use crate::rocks::RocksStore;
use crate::transform::{self, Transformer};
use crate::watch::{Event, Subscription, Watcher};
use bytes::Bytes;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// One stored key with its revisions (etcd's `mvccpb.KeyValue`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyValue {
    pub key: String,
    pub value: Bytes,
    /// Revision of the write that created the key.
    pub create_revision: u64,
    /// Revision of the last write to the key (for a delete event: the delete's revision).
    pub mod_revision: u64,
    /// Number of writes since creation (1 on create).
    pub version: u64,
}

/// A conditional write.
#[derive(Clone, Debug)]
pub enum Op {
    /// Fails with `AlreadyExists` if the key exists.
    Create { key: String, value: Bytes },
    /// Fails with `NotFound` if missing, `Conflict` if `expected` is given and differs from the
    /// key's mod revision.
    Update { key: String, value: Bytes, expected: Option<u64> },
    /// Same conditions as `Update`.
    Delete { key: String, expected: Option<u64> },
}

impl Op {
    pub(crate) fn key(&self) -> &str {
        match self {
            Op::Create { key, .. } | Op::Update { key, .. } | Op::Delete { key, .. } => key,
        }
    }
}

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum StoreError {
    #[error("key {0} already exists")]
    AlreadyExists(String),
    #[error("key {0} not found")]
    NotFound(String),
    #[error("conflict on {key}: expected revision {expected}, current {current}")]
    Conflict { key: String, expected: u64, current: u64 },
    #[error("revision {requested} has been compacted (oldest retained: {compacted})")]
    Compacted { requested: u64, compacted: u64 },
    #[error("revision {requested} is in the future (current: {current})")]
    FutureRevision { requested: u64, current: u64 },
    #[error("storage failure during {op}: {message}")]
    Storage { op: &'static str, message: String },
    #[error("corrupt record at {0}")]
    Corrupt(String),
    /// A value could not be encrypted or decrypted (upstream's words: the API server answers
    /// 500 with them).
    #[error("unable to transform key {key:?}: {message}")]
    Transform { key: String, message: String },
    #[error("the store is shut down")]
    Closed,
}

#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// Sync the WAL on every batch (on in production; acknowledged writes survive `kill -9`).
    pub sync: bool,
    /// Capacity of the in-memory event fan-out; slow watchers catch up from the log.
    pub fanout_capacity: usize,
    /// Key prefixes whose current values are also kept in memory, so that `get` under them is a
    /// map lookup. For small sets read on every request (namespaces); the cache is updated by the
    /// writer before it acknowledges a write, so reads through it are as current as RocksDB's.
    pub cached_prefixes: Vec<String>,
    /// Encrypts values at rest (see [`crate::transform`]); `None` stores them as given.
    pub transformer: Option<Arc<dyn Transformer>>,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions { sync: true, fanout_capacity: 16 * 1024, cached_prefixes: Vec::new(), transformer: None }
    }
}

/// Upper bounds, in seconds, of the commit-latency buckets: 100 µs doubling up to 3.3 s (a
/// synced batch on an SSD takes 0.1–1 ms; etcd's WAL fsync histogram starts at 1 ms, too coarse
/// for that).
pub const COMMIT_BUCKETS: [f64; 16] = [
    0.0001, 0.0002, 0.0004, 0.0008, 0.0016, 0.0032, 0.0064, 0.0128, 0.0256, 0.0512, 0.1024, 0.2048, 0.4096, 0.8192,
    1.6384, 3.2768,
];

/// Counters for benchmarks and `/metrics`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stats {
    /// Writes committed (one per created, updated or deleted key).
    pub writes: u64,
    /// Synced batches committed: `writes / batches` is the writes per fsync.
    pub batches: u64,
    /// How many batch commits (WAL write and sync) fell in each [`COMMIT_BUCKETS`] bucket: at
    /// most its bound and more than the one before (not cumulative). Slower ones count only in
    /// `batches`.
    pub commit_buckets: [u64; COMMIT_BUCKETS.len()],
    /// Total time the committed batches took to write and sync.
    pub commit_seconds: f64,
}

/// A page of a range read.
#[derive(Clone, Debug)]
pub struct ListResult {
    pub items: Vec<KeyValue>,
    /// The revision the page was read at.
    pub revision: u64,
    /// Whether more keys follow the last item.
    pub more: bool,
}

/// Commit timings of a backend (see [`Stats`]).
#[derive(Default)]
pub(crate) struct CommitTimes {
    buckets: [AtomicU64; COMMIT_BUCKETS.len()],
    nanos: AtomicU64,
}

impl CommitTimes {
    pub(crate) fn record(&self, took: std::time::Duration) {
        let secs = took.as_secs_f64();
        if let Some(i) = COMMIT_BUCKETS.iter().position(|b| secs <= *b) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.nanos.fetch_add(u64::try_from(took.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    pub(crate) fn stats(&self, writes: u64, batches: u64) -> Stats {
        Stats {
            writes,
            batches,
            commit_buckets: std::array::from_fn(|i| self.buckets[i].load(Ordering::Relaxed)),
            commit_seconds: self.nanos.load(Ordering::Relaxed) as f64 / 1e9,
        }
    }
}

/// Handle to the store; cheap to clone. Dropping the last handle closes the backend.
#[derive(Clone)]
pub struct Store {
    backend: Backend,
    transformer: Option<Arc<dyn Transformer>>,
}

#[derive(Clone)]
enum Backend {
    Rocks(RocksStore),
    Etcd(EtcdStore),
}

impl Store {
    /// Opens (creating if needed) the embedded RocksDB store in `dir`.
    pub fn open(dir: &Path, opts: StoreOptions) -> Result<Store, StoreError> {
        let transformer = opts.transformer.clone();
        Ok(Store { backend: Backend::Rocks(RocksStore::open(dir, opts)?), transformer })
    }

    /// Connects to an etcd v3 cluster (see [`EtcdConfig`]); `opts.fanout_capacity` bounds each
    /// watcher's live queue as with RocksDB (the other options are RocksDB's).
    pub async fn connect_etcd(config: &EtcdConfig, opts: StoreOptions) -> Result<Store, StoreError> {
        let etcd = EtcdStore::connect(config, opts.fanout_capacity, opts.transformer.clone()).await?;
        Ok(Store { backend: Backend::Etcd(etcd), transformer: opts.transformer })
    }

    /// The embedded RocksDB backend, for what only it has (snapshots of its files).
    /// The etcd backend, for what only it has (etcd's own snapshots).
    pub(crate) fn etcd(&self) -> Option<&EtcdStore> {
        match &self.backend {
            Backend::Etcd(e) => Some(e),
            Backend::Rocks(_) => None,
        }
    }

    pub(crate) fn rocks(&self) -> Option<&RocksStore> {
        match &self.backend {
            Backend::Rocks(r) => Some(r),
            Backend::Etcd(_) => None,
        }
    }

    /// The revision of the last committed write.
    pub fn current_revision(&self) -> u64 {
        match &self.backend {
            Backend::Rocks(r) => r.current_revision(),
            Backend::Etcd(e) => e.current_revision(),
        }
    }

    /// The oldest revision a watch or a past-revision read may still start from is `compacted + 1`.
    pub fn compacted_revision(&self) -> u64 {
        match &self.backend {
            Backend::Rocks(r) => r.compacted_revision(),
            Backend::Etcd(e) => e.compacted_revision(),
        }
    }

    pub fn stats(&self) -> Stats {
        match &self.backend {
            Backend::Rocks(r) => r.stats(),
            Backend::Etcd(e) => e.stats(),
        }
    }

    /// Commits `ops` atomically (all succeed or none is applied); returns each op's resulting
    /// key-value (for deletes: the deleted value with the delete's revision as mod_revision).
    /// The ops of one txn must name different keys.
    pub async fn txn(&self, ops: Vec<Op>) -> Result<Vec<KeyValue>, StoreError> {
        let Some(t) = &self.transformer else { return self.backend_txn(ops).await };
        // The results carry the values as written, not as stored.
        let mut plain = Vec::with_capacity(ops.len());
        let mut stored = Vec::with_capacity(ops.len());
        for op in ops {
            stored.push(match op {
                Op::Create { key, value } => {
                    let v = transform::to_storage(t.as_ref(), &key, &value)?;
                    plain.push(Some(value));
                    Op::Create { key, value: v }
                }
                Op::Update { key, value, expected } => {
                    let v = transform::to_storage(t.as_ref(), &key, &value)?;
                    plain.push(Some(value));
                    Op::Update { key, value: v, expected }
                }
                Op::Delete { key, expected } => {
                    plain.push(None);
                    Op::Delete { key, expected }
                }
            });
        }
        let results = self.backend_txn(stored).await?;
        results
            .into_iter()
            .zip(plain)
            .map(|(kv, value)| match value {
                Some(value) => Ok(KeyValue { value, ..kv }),
                None => transform::plain_kv(t.as_ref(), kv),
            })
            .collect()
    }

    async fn backend_txn(&self, ops: Vec<Op>) -> Result<Vec<KeyValue>, StoreError> {
        match &self.backend {
            Backend::Rocks(r) => r.txn(ops).await,
            Backend::Etcd(e) => e.txn(ops).await,
        }
    }

    /// `kv` as readers see it (decrypted).
    fn plain(&self, kv: KeyValue) -> Result<KeyValue, StoreError> {
        match &self.transformer {
            Some(t) => transform::plain_kv(t.as_ref(), kv),
            None => Ok(kv),
        }
    }

    /// An event as watchers see it (decrypted).
    pub(crate) fn plain_event(&self, ev: Event) -> Result<Event, StoreError> {
        match &self.transformer {
            Some(t) => Ok(transform::plain_event(t.as_ref(), &ev)?.unwrap_or(ev)),
            None => Ok(ev),
        }
    }

    async fn one(&self, op: Op) -> Result<KeyValue, StoreError> {
        self.txn(vec![op]).await?.pop().ok_or(StoreError::Closed)
    }

    /// Fails with `AlreadyExists` if the key exists.
    pub async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue, StoreError> {
        self.one(Op::Create { key: key.to_string(), value }).await
    }

    /// Fails with `NotFound` if missing, `Conflict` if `expected` is given and differs from the
    /// key's mod revision.
    pub async fn update(&self, key: &str, value: Bytes, expected: Option<u64>) -> Result<KeyValue, StoreError> {
        self.one(Op::Update { key: key.to_string(), value, expected }).await
    }

    /// Same conditions as `update`; returns the deleted value with the delete's revision.
    pub async fn delete(&self, key: &str, expected: Option<u64>) -> Result<KeyValue, StoreError> {
        self.one(Op::Delete { key: key.to_string(), expected }).await
    }

    /// Reads one key at the current revision.
    pub fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        let kv = match &self.backend {
            Backend::Rocks(r) => r.get(key),
            Backend::Etcd(e) => e.get(key),
        }?;
        kv.map(|kv| self.plain(kv)).transpose()
    }

    /// Lists keys under `prefix` in key order, strictly after `start_after`, at most `limit`
    /// (0 = unlimited). With `at_revision`, reads the state as of that past revision
    /// (`Compacted` if it is no longer retained, `FutureRevision` if not reached yet).
    pub fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
        at_revision: Option<u64>,
    ) -> Result<ListResult, StoreError> {
        let mut page = match &self.backend {
            Backend::Rocks(r) => r.list(prefix, start_after, limit, at_revision),
            Backend::Etcd(e) => e.list(prefix, start_after, limit, at_revision),
        }?;
        if self.transformer.is_some() {
            page.items = page.items.into_iter().map(|kv| self.plain(kv)).collect::<Result<_, _>>()?;
        }
        Ok(page)
    }

    /// Watches keys under `prefix` for events after revision `after` (0 = from now);
    /// `Compacted` if events after `after` are no longer retained.
    pub fn watch(&self, prefix: &str, after: u64) -> Result<Watcher, StoreError> {
        let after = if after == 0 { self.current_revision() } else { after };
        let compacted = self.compacted_revision();
        if after < compacted {
            return Err(StoreError::Compacted { requested: after, compacted });
        }
        if let Backend::Etcd(e) = &self.backend {
            if after < e.history_start() {
                return e.watch_direct(prefix, after).map(|w| Watcher::etcd(w, self.transformer.clone()));
            }
        }
        Ok(Watcher::new(self.clone(), prefix.to_string(), after))
    }

    /// Drops history up to and including `rev`; watches and reads at earlier revisions then get
    /// `Compacted`.
    pub async fn compact(&self, rev: u64) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Rocks(r) => r.compact(rev),
            Backend::Etcd(e) => e.compact(rev).await,
        }
    }

    /// Events with revision greater than `after`, up to `limit` (`Compacted` if no longer
    /// retained).
    pub(crate) fn read_log(&self, after: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        match &self.backend {
            Backend::Rocks(r) => r.read_log(after, limit),
            Backend::Etcd(e) => e.read_log(after, limit),
        }
    }

    /// Registers a live feed of the events under `prefix` committed from now on.
    pub(crate) fn subscribe(&self, prefix: &str) -> Arc<Subscription> {
        match &self.backend {
            Backend::Rocks(r) => r.subscribe(prefix),
            Backend::Etcd(e) => e.subscribe(prefix),
        }
    }
}
