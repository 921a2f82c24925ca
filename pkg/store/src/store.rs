//! The store: one writer thread that assigns revisions and group-commits, lock-free readers
//! on RocksDB snapshots.

use crate::codec;
use crate::watch::{Event, EventKind, Watcher};
use bytes::Bytes;
use rocksdb::{ColumnFamilyDescriptor, IteratorMode, Options, WriteBatch, WriteOptions, DB};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, RwLock, Weak};
use tokio::sync::{oneshot, Notify};

pub(crate) const CF_KV: &str = "kv";
pub(crate) const CF_LOG: &str = "log";
pub(crate) const CF_META: &str = "meta";
pub(crate) const META_REV: &[u8] = b"rev";
pub(crate) const META_COMPACTED: &[u8] = b"compacted";
/// Most writes committed in one synced batch.
const MAX_BATCH: usize = 4096;

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
    fn key(&self) -> &str {
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
    #[error("the store is shut down")]
    Closed,
}

fn storage(op: &'static str) -> impl Fn(rocksdb::Error) -> StoreError {
    move |e| StoreError::Storage { op, message: e.to_string() }
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
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions { sync: true, fanout_capacity: 16 * 1024, cached_prefixes: Vec::new() }
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

/// The writer's commit timings (see [`Stats`]).
#[derive(Default)]
struct CommitTimes {
    buckets: [AtomicU64; COMMIT_BUCKETS.len()],
    nanos: AtomicU64,
}

impl CommitTimes {
    fn record(&self, took: std::time::Duration) {
        let secs = took.as_secs_f64();
        if let Some(i) = COMMIT_BUCKETS.iter().position(|b| secs <= *b) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.nanos.fetch_add(u64::try_from(took.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }
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

struct WriteReq {
    ops: Vec<Op>,
    reply: oneshot::Sender<Result<Vec<KeyValue>, StoreError>>,
}

pub(crate) struct Inner {
    pub(crate) db: DB,
    pub(crate) current: AtomicU64,
    pub(crate) compacted: AtomicU64,
    /// Live watchers, each with the prefix it wants (see [`Subscription`]).
    subscriptions: Mutex<Vec<Weak<Subscription>>>,
    fanout_capacity: usize,
    writes: AtomicU64,
    batches: AtomicU64,
    commit_times: CommitTimes,
    cache: HotCache,
}

/// A watcher's live feed: the writer queues the committed events under `prefix` and wakes the
/// watcher, so a write wakes only the watchers that want it (not every watch of every resource).
pub(crate) struct Subscription {
    pub(crate) prefix: String,
    pub(crate) queue: Mutex<LiveQueue>,
    pub(crate) notify: Notify,
}

#[derive(Default)]
pub(crate) struct LiveQueue {
    pub(crate) events: Vec<Arc<Event>>,
    /// More than the fan-out capacity piled up: the queue was dropped and the watcher must catch
    /// up from the log.
    pub(crate) lagged: bool,
}

impl Inner {
    /// Queues a committed batch for the watchers whose prefix it touches, and wakes them. Runs
    /// before the batch's revision becomes current (see `Watcher::revision`).
    fn fan_out(&self, events: &[Arc<Event>]) {
        let mut subs = self.subscriptions.lock().unwrap_or_else(|p| p.into_inner());
        subs.retain(|w| w.strong_count() > 0);
        for sub in subs.iter().filter_map(Weak::upgrade) {
            let mut wanted = events.iter().filter(|ev| ev.kv.key.starts_with(sub.prefix.as_str())).peekable();
            if wanted.peek().is_none() {
                continue;
            }
            {
                let mut q = sub.queue.lock().unwrap_or_else(|p| p.into_inner());
                if !q.lagged {
                    q.events.extend(wanted.cloned());
                    if q.events.len() > self.fanout_capacity {
                        q.events = Vec::new();
                        q.lagged = true;
                    }
                }
            }
            sub.notify.notify_one();
        }
    }
}

/// The current values of every key under `prefixes` (see `StoreOptions::cached_prefixes`).
struct HotCache {
    prefixes: Vec<String>,
    values: RwLock<HashMap<String, KeyValue>>,
}

impl HotCache {
    fn covers(&self, key: &str) -> bool {
        self.prefixes.iter().any(|p| key.starts_with(p.as_str()))
    }

    fn get(&self, key: &str) -> Option<KeyValue> {
        self.values.read().unwrap_or_else(|p| p.into_inner()).get(key).cloned()
    }

    /// Applies a committed batch's events, in revision order.
    fn apply(&self, events: &[Event]) {
        let mut hits = events.iter().filter(|ev| self.covers(&ev.kv.key)).peekable();
        if hits.peek().is_none() {
            return;
        }
        let mut values = self.values.write().unwrap_or_else(|p| p.into_inner());
        for ev in hits {
            match ev.kind {
                EventKind::Delete => values.remove(&ev.kv.key),
                EventKind::Create | EventKind::Update => values.insert(ev.kv.key.clone(), ev.kv.clone()),
            };
        }
    }
}

/// Opens (creating if needed) the RocksDB database in `dir` with the store's column families and
/// options (also used by snapshot restore to rewrite the restored copy's metadata).
pub(crate) fn open_db(dir: &Path) -> Result<DB, rocksdb::Error> {
    let mut db_opts = Options::default();
    db_opts.create_if_missing(true);
    db_opts.create_missing_column_families(true);
    db_opts.set_compression_type(rocksdb::DBCompressionType::Lz4);
    db_opts.set_max_background_jobs(2);
    db_opts.set_bytes_per_sync(1 << 20);
    // Every create reads its key, which is almost always absent: a whole-key Bloom filter on
    // the memtable answers that without searching its skiplist.
    let mut kv_opts = Options::default();
    kv_opts.set_memtable_prefix_bloom_ratio(0.02);
    kv_opts.set_memtable_whole_key_filtering(true);
    let cfs = [(CF_KV, kv_opts), (CF_LOG, Options::default()), (CF_META, Options::default())]
        .map(|(n, o)| ColumnFamilyDescriptor::new(n, o));
    DB::open_cf_descriptors(&db_opts, dir, cfs)
}

/// Handle to the store; cheap to clone. Dropping the last handle closes the store before it
/// returns: the writer finishes what was queued and the database is closed, so a process may
/// exit (or open the directory again) right after.
#[derive(Clone)]
pub struct Store {
    pub(crate) inner: Arc<Inner>,
    // Field order matters: the last sender goes before the thread is waited for.
    writer: mpsc::Sender<WriteReq>,
    _writer_thread: Arc<WriterThread>,
}

/// Waits for the writer thread when the last handle goes (it holds the database until then).
struct WriterThread(Option<std::thread::JoinHandle<()>>);

impl Drop for WriterThread {
    fn drop(&mut self) {
        if let Some(t) = self.0.take() {
            let _ = t.join();
        }
    }
}

impl Store {
    /// Opens (creating if needed) the store in `dir`.
    pub fn open(dir: &Path, opts: StoreOptions) -> Result<Store, StoreError> {
        let db = open_db(dir).map_err(storage("open"))?;
        let meta = db.cf_handle(CF_META).ok_or_else(|| StoreError::Corrupt("meta column family".into()))?;
        let read_u64 = |k: &[u8]| -> Result<u64, StoreError> {
            Ok(db.get_cf(meta, k).map_err(storage("open"))?.and_then(|v| codec::decode_u64(&v)).unwrap_or(0))
        };
        let current = read_u64(META_REV)?;
        let compacted = read_u64(META_COMPACTED)?;
        let mut cached = HashMap::new();
        if let Some(kv_cf) = db.cf_handle(CF_KV) {
            for prefix in &opts.cached_prefixes {
                let start = IteratorMode::From(prefix.as_bytes(), rocksdb::Direction::Forward);
                for item in db.iterator_cf(kv_cf, start) {
                    let (k, v) = item.map_err(storage("open"))?;
                    if !k.starts_with(prefix.as_bytes()) {
                        break;
                    }
                    let key = String::from_utf8(k.to_vec()).map_err(|_| StoreError::Corrupt("key".into()))?;
                    let kv = codec::decode_kv(key.as_bytes(), &v).ok_or_else(|| StoreError::Corrupt(key.clone()))?;
                    cached.insert(key, kv);
                }
            }
        }
        let cache = HotCache { prefixes: opts.cached_prefixes.clone(), values: RwLock::new(cached) };
        let inner = Arc::new(Inner {
            db,
            current: AtomicU64::new(current),
            compacted: AtomicU64::new(compacted),
            subscriptions: Mutex::new(Vec::new()),
            fanout_capacity: opts.fanout_capacity.max(16),
            writes: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            commit_times: CommitTimes::default(),
            cache,
        });
        let (tx, rx) = mpsc::channel();
        let w = inner.clone();
        let thread = std::thread::Builder::new()
            .name("k1s-store-writer".into())
            .spawn(move || writer_loop(w, rx, opts.sync))
            .map_err(|e| StoreError::Storage { op: "spawn writer", message: e.to_string() })?;
        tracing::info!(revision = current, compacted, dir = %dir.display(), "store opened");
        Ok(Store { inner, writer: tx, _writer_thread: Arc::new(WriterThread(Some(thread))) })
    }

    /// The revision of the last committed write.
    pub fn current_revision(&self) -> u64 {
        self.inner.current.load(Ordering::Acquire)
    }

    /// The oldest revision a watch or a past-revision read may still start from is `compacted + 1`.
    pub fn compacted_revision(&self) -> u64 {
        self.inner.compacted.load(Ordering::Acquire)
    }

    pub fn stats(&self) -> Stats {
        let times = &self.inner.commit_times;
        Stats {
            writes: self.inner.writes.load(Ordering::Relaxed),
            batches: self.inner.batches.load(Ordering::Relaxed),
            commit_buckets: std::array::from_fn(|i| times.buckets[i].load(Ordering::Relaxed)),
            commit_seconds: times.nanos.load(Ordering::Relaxed) as f64 / 1e9,
        }
    }

    /// Commits `ops` atomically (all succeed or none is applied); returns each op's resulting
    /// key-value (for deletes: the deleted value with the delete's revision as mod_revision).
    pub async fn txn(&self, ops: Vec<Op>) -> Result<Vec<KeyValue>, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.writer.send(WriteReq { ops, reply }).map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    async fn one(&self, op: Op) -> Result<KeyValue, StoreError> {
        self.txn(vec![op]).await?.pop().ok_or(StoreError::Closed)
    }

    pub async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue, StoreError> {
        self.one(Op::Create { key: key.to_string(), value }).await
    }

    pub async fn update(&self, key: &str, value: Bytes, expected: Option<u64>) -> Result<KeyValue, StoreError> {
        self.one(Op::Update { key: key.to_string(), value, expected }).await
    }

    pub async fn delete(&self, key: &str, expected: Option<u64>) -> Result<KeyValue, StoreError> {
        self.one(Op::Delete { key: key.to_string(), expected }).await
    }

    fn cf(&self, name: &str) -> Result<&rocksdb::ColumnFamily, StoreError> {
        self.inner.db.cf_handle(name).ok_or_else(|| StoreError::Corrupt(format!("{name} column family")))
    }

    /// Reads one key at the current revision.
    pub fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        if self.inner.cache.covers(key) {
            return Ok(self.inner.cache.get(key));
        }
        let raw = self.inner.db.get_pinned_cf(self.cf(CF_KV)?, key.as_bytes()).map_err(storage("get"))?;
        match raw {
            None => Ok(None),
            Some(raw) => {
                codec::decode_kv(key.as_bytes(), &raw).map(Some).ok_or_else(|| StoreError::Corrupt(key.into()))
            }
        }
    }

    /// Lists keys under `prefix` in key order, strictly after `start_after`, at most `limit`
    /// (0 = unlimited). With `at_revision`, reads the state as of that past revision
    /// (reconstructed from the event log; `Compacted` if it is no longer retained).
    pub fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
        at_revision: Option<u64>,
    ) -> Result<ListResult, StoreError> {
        let kv = self.cf(CF_KV)?;
        let snap = self.inner.db.snapshot();
        let meta = self.cf(CF_META)?;
        let snap_rev =
            snap.get_cf(meta, META_REV).map_err(storage("list"))?.and_then(|v| codec::decode_u64(&v)).unwrap_or(0);
        let overrides = match at_revision {
            Some(rev) if rev < snap_rev => {
                let compacted = self.compacted_revision();
                if rev < compacted {
                    return Err(StoreError::Compacted { requested: rev, compacted });
                }
                Some((rev, self.past_values(&snap, prefix, rev, snap_rev)?))
            }
            Some(rev) if rev > snap_rev => {
                return Err(StoreError::FutureRevision { requested: rev, current: snap_rev });
            }
            _ => None,
        };
        let from = match start_after {
            Some(s) if s.as_bytes() >= prefix.as_bytes() => {
                let mut k = s.as_bytes().to_vec();
                k.push(0);
                k
            }
            _ => prefix.as_bytes().to_vec(),
        };
        let iter = snap.iterator_cf(kv, IteratorMode::From(&from, rocksdb::Direction::Forward));
        let mut current = Vec::new();
        let want = if limit == 0 { usize::MAX } else { limit + 1 };
        let (revision, mut override_map) = match overrides {
            Some((rev, map)) => (rev, map),
            None => (snap_rev, BTreeMap::new()),
        };
        // Keys changed after the requested revision are taken from `override_map` instead.
        let overridden: Vec<String> = override_map.keys().cloned().collect();
        for item in iter {
            let (k, v) = item.map_err(storage("list"))?;
            if !k.starts_with(prefix.as_bytes()) {
                break;
            }
            let key = std::str::from_utf8(&k).map_err(|_| StoreError::Corrupt("non-utf8 key".into()))?;
            if overridden.binary_search_by(|o| o.as_str().cmp(key)).is_ok() {
                continue;
            }
            current.push(codec::decode_kv(&k, &v).ok_or_else(|| StoreError::Corrupt(key.into()))?);
            // Past-revision reads merge with overrides below; stop early only without them.
            if override_map.is_empty() && current.len() >= want {
                break;
            }
        }
        let mut items: Vec<KeyValue> = if override_map.is_empty() {
            current
        } else {
            let after = start_after.unwrap_or("");
            override_map.retain(|k, v| v.is_some() && k.as_str() > after);
            let mut merged: Vec<KeyValue> = current.into_iter().chain(override_map.into_values().flatten()).collect();
            merged.sort_by(|a, b| a.key.cmp(&b.key));
            merged
        };
        let more = items.len() > limit && limit != 0;
        if more {
            items.truncate(limit);
        }
        Ok(ListResult { items, revision, more })
    }

    /// For every key under `prefix` written after `rev`, its value as of `rev` (None = absent).
    fn past_values(
        &self,
        snap: &rocksdb::SnapshotWithThreadMode<'_, DB>,
        prefix: &str,
        rev: u64,
        upto: u64,
    ) -> Result<BTreeMap<String, Option<KeyValue>>, StoreError> {
        let log = self.cf(CF_LOG)?;
        let mut out = BTreeMap::new();
        let start = codec::encode_u64(rev + 1);
        for item in snap.iterator_cf(log, IteratorMode::From(&start, rocksdb::Direction::Forward)) {
            let (k, v) = item.map_err(storage("list"))?;
            let r = codec::decode_u64(&k).ok_or_else(|| StoreError::Corrupt("log key".into()))?;
            if r > upto {
                break;
            }
            let ev = codec::decode_event(r, &v).ok_or_else(|| StoreError::Corrupt(format!("log entry {r}")))?;
            if !ev.kv.key.starts_with(prefix) || out.contains_key(&ev.kv.key) {
                continue;
            }
            let past = match ev.kind {
                EventKind::Create => None,
                EventKind::Update | EventKind::Delete => ev.prev,
            };
            out.insert(ev.kv.key, past);
        }
        Ok(out)
    }

    /// Reads events with revision greater than `after`, up to `limit`, from the log.
    pub(crate) fn read_log(&self, after: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        let compacted = self.compacted_revision();
        if after < compacted {
            return Err(StoreError::Compacted { requested: after, compacted });
        }
        let log = self.cf(CF_LOG)?;
        let start = codec::encode_u64(after + 1);
        let mut out = Vec::new();
        for item in self.inner.db.iterator_cf(log, IteratorMode::From(&start, rocksdb::Direction::Forward)) {
            let (k, v) = item.map_err(storage("read log"))?;
            let r = codec::decode_u64(&k).ok_or_else(|| StoreError::Corrupt("log key".into()))?;
            out.push(codec::decode_event(r, &v).ok_or_else(|| StoreError::Corrupt(format!("log entry {r}")))?);
            if out.len() >= limit {
                break;
            }
        }
        Ok(out)
    }

    /// Watches keys under `prefix` for events after revision `after` (0 = from now).
    pub fn watch(&self, prefix: &str, after: u64) -> Result<Watcher, StoreError> {
        let after = if after == 0 { self.current_revision() } else { after };
        let compacted = self.compacted_revision();
        if after < compacted {
            return Err(StoreError::Compacted { requested: after, compacted });
        }
        Ok(Watcher::new(self.clone(), prefix.to_string(), after))
    }

    /// Registers a live feed of the events under `prefix` committed from now on.
    pub(crate) fn subscribe(&self, prefix: &str) -> Arc<Subscription> {
        let sub = Arc::new(Subscription {
            prefix: prefix.to_string(),
            queue: Mutex::new(LiveQueue::default()),
            notify: Notify::new(),
        });
        self.inner.subscriptions.lock().unwrap_or_else(|p| p.into_inner()).push(Arc::downgrade(&sub));
        sub
    }

    /// Drops event-log entries up to and including `rev`; watches from earlier revisions then
    /// get `Compacted`.
    pub fn compact(&self, rev: u64) -> Result<(), StoreError> {
        let rev = rev.min(self.current_revision());
        if rev <= self.compacted_revision() {
            return Ok(());
        }
        let (log, meta) = (self.cf(CF_LOG)?, self.cf(CF_META)?);
        let mut wb = WriteBatch::default();
        wb.put_cf(meta, META_COMPACTED, codec::encode_u64(rev));
        wb.delete_range_cf(log, codec::encode_u64(0), codec::encode_u64(rev + 1));
        self.inner.db.write(wb).map_err(storage("compact"))?;
        self.inner.compacted.store(rev, Ordering::Release);
        tracing::debug!(revision = rev, "store compacted");
        Ok(())
    }
}

/// The single writer: drains every queued request into one batch, checks conditions against
/// committed state plus earlier ops of the same batch, commits with one synced write.
fn writer_loop(inner: Arc<Inner>, rx: mpsc::Receiver<WriteReq>, sync: bool) {
    let mut wopts = WriteOptions::default();
    wopts.set_sync(sync);
    while let Ok(first) = rx.recv() {
        let mut reqs = vec![first];
        let mut n_ops = reqs[0].ops.len();
        while n_ops < MAX_BATCH {
            match rx.try_recv() {
                Ok(r) => {
                    n_ops += r.ops.len();
                    reqs.push(r);
                }
                Err(_) => break,
            }
        }
        commit(&inner, reqs, &wopts);
    }
    tracing::debug!("store writer stopped");
}

type Outcome = (oneshot::Sender<Result<Vec<KeyValue>, StoreError>>, Result<Vec<KeyValue>, StoreError>);

fn commit(inner: &Inner, reqs: Vec<WriteReq>, wopts: &WriteOptions) {
    let (Some(kv_cf), Some(log_cf), Some(meta_cf)) =
        (inner.db.cf_handle(CF_KV), inner.db.cf_handle(CF_LOG), inner.db.cf_handle(CF_META))
    else {
        for r in reqs {
            let _ = r.reply.send(Err(StoreError::Corrupt("column families".into())));
        }
        return;
    };
    let mut rev = inner.current.load(Ordering::Acquire);
    let mut wb = WriteBatch::default();
    // State as seen by this batch: committed values overlaid with earlier ops of the batch.
    let mut overlay: HashMap<String, Option<KeyValue>> = HashMap::new();
    let mut outcomes: Vec<Outcome> = Vec::with_capacity(reqs.len());
    let mut events: Vec<Event> = Vec::new();
    for req in reqs {
        let start_rev = rev;
        let mut staged: Vec<(String, Option<KeyValue>)> = Vec::new();
        let mut req_events = Vec::new();
        let mut results = Vec::new();
        let mut failure = None;
        for op in &req.ops {
            let key = op.key().to_string();
            let existing = match staged.iter().rev().find(|(k, _)| *k == key) {
                Some((_, v)) => Ok(v.clone()),
                None => match overlay.get(&key) {
                    Some(v) => Ok(v.clone()),
                    None => inner.db.get_pinned_cf(kv_cf, key.as_bytes()).map_err(storage("read for write")).and_then(
                        |raw| match raw {
                            None => Ok(None),
                            Some(raw) => codec::decode_kv(key.as_bytes(), &raw)
                                .map(Some)
                                .ok_or_else(|| StoreError::Corrupt(key.clone())),
                        },
                    ),
                },
            };
            let existing = match existing {
                Ok(e) => e,
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            };
            let check = |expected: &Option<u64>| -> Result<KeyValue, StoreError> {
                let cur = existing.clone().ok_or_else(|| StoreError::NotFound(key.clone()))?;
                match expected {
                    Some(exp) if *exp != cur.mod_revision => {
                        Err(StoreError::Conflict { key: key.clone(), expected: *exp, current: cur.mod_revision })
                    }
                    _ => Ok(cur),
                }
            };
            let step = match op {
                Op::Create { value, .. } => match &existing {
                    Some(_) => Err(StoreError::AlreadyExists(key.clone())),
                    None => {
                        rev += 1;
                        let kv = KeyValue {
                            key: key.clone(),
                            value: value.clone(),
                            create_revision: rev,
                            mod_revision: rev,
                            version: 1,
                        };
                        Ok((Some(kv.clone()), Event { revision: rev, kind: EventKind::Create, kv, prev: None }))
                    }
                },
                Op::Update { value, expected, .. } => check(expected).map(|cur| {
                    rev += 1;
                    let kv = KeyValue {
                        key: key.clone(),
                        value: value.clone(),
                        create_revision: cur.create_revision,
                        mod_revision: rev,
                        version: cur.version + 1,
                    };
                    (Some(kv.clone()), Event { revision: rev, kind: EventKind::Update, kv, prev: Some(cur) })
                }),
                Op::Delete { expected, .. } => check(expected).map(|cur| {
                    rev += 1;
                    let kv = KeyValue { mod_revision: rev, ..cur.clone() };
                    (None, Event { revision: rev, kind: EventKind::Delete, kv, prev: Some(cur) })
                }),
            };
            match step {
                Ok((new_state, ev)) => {
                    results.push(ev.kv.clone());
                    staged.push((key, new_state));
                    req_events.push(ev);
                }
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        if let Some(e) = failure {
            rev = start_rev;
            outcomes.push((req.reply, Err(e)));
            continue;
        }
        // Renumber is unnecessary: revisions were assigned in order and nothing failed.
        for (key, state) in staged {
            match &state {
                Some(kv) => wb.put_cf(
                    kv_cf,
                    key.as_bytes(),
                    codec::encode_kv(kv.create_revision, kv.mod_revision, kv.version, &kv.value),
                ),
                None => wb.delete_cf(kv_cf, key.as_bytes()),
            }
            overlay.insert(key, state);
        }
        for ev in &req_events {
            wb.put_cf(log_cf, codec::encode_u64(ev.revision), codec::encode_event(ev));
        }
        events.extend(req_events);
        outcomes.push((req.reply, Ok(results)));
    }
    if !events.is_empty() {
        wb.put_cf(meta_cf, META_REV, codec::encode_u64(rev));
        let started = std::time::Instant::now();
        if let Err(e) = inner.db.write_opt(wb, wopts) {
            tracing::error!(error = %e, "store batch write failed");
            let err = StoreError::Storage { op: "commit", message: e.to_string() };
            for (reply, res) in outcomes {
                let _ = reply.send(res.and(Err(err.clone())));
            }
            return;
        }
        inner.commit_times.record(started.elapsed());
        inner.cache.apply(&events);
        let events: Vec<Arc<Event>> = events.into_iter().map(Arc::new).collect();
        inner.fan_out(&events);
        inner.current.store(rev, Ordering::Release);
        inner.batches.fetch_add(1, Ordering::Relaxed);
        inner.writes.fetch_add(events.len() as u64, Ordering::Relaxed);
    }
    for (reply, res) in outcomes {
        let _ = reply.send(res);
    }
}
