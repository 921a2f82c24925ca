//! The embedded backend: RocksDB, one writer thread that assigns revisions and group-commits,
//! lock-free readers on RocksDB snapshots.

use crate::codec;
use crate::store::{CommitTimes, KeyValue, ListResult, Op, Stats, StoreError, StoreOptions};
use crate::watch::{Event, EventKind, Subscription, Subscriptions};
use rocksdb::{ColumnFamilyDescriptor, IteratorMode, Options, WriteBatch, WriteOptions, DB};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, RwLock};
use tokio::sync::oneshot;

pub(crate) const CF_KV: &str = "kv";
pub(crate) const CF_LOG: &str = "log";
pub(crate) const CF_META: &str = "meta";
pub(crate) const META_REV: &[u8] = b"rev";
pub(crate) const META_COMPACTED: &[u8] = b"compacted";
/// Most writes committed in one synced batch.
const MAX_BATCH: usize = 4096;

fn storage(op: &'static str) -> impl Fn(rocksdb::Error) -> StoreError {
    move |e| StoreError::Storage { op, message: e.to_string() }
}

struct WriteReq {
    ops: Vec<Op>,
    reply: oneshot::Sender<Result<Vec<KeyValue>, StoreError>>,
}

pub(crate) struct Inner {
    pub(crate) db: DB,
    pub(crate) current: AtomicU64,
    pub(crate) compacted: AtomicU64,
    /// Live watchers, each with the prefix it wants.
    subscriptions: Subscriptions,
    writes: AtomicU64,
    batches: AtomicU64,
    commit_times: CommitTimes,
    cache: HotCache,
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
pub struct RocksStore {
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

impl RocksStore {
    /// Opens (creating if needed) the store in `dir`.
    pub fn open(dir: &Path, opts: StoreOptions) -> Result<RocksStore, StoreError> {
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
            subscriptions: Subscriptions::new(opts.fanout_capacity, opts.transformer.clone()),
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
        Ok(RocksStore { inner, writer: tx, _writer_thread: Arc::new(WriterThread(Some(thread))) })
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
        self.inner
            .commit_times
            .stats(self.inner.writes.load(Ordering::Relaxed), self.inner.batches.load(Ordering::Relaxed))
    }

    /// Commits `ops` atomically (all succeed or none is applied); returns each op's resulting
    /// key-value (for deletes: the deleted value with the delete's revision as mod_revision).
    pub async fn txn(&self, ops: Vec<Op>) -> Result<Vec<KeyValue>, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.writer.send(WriteReq { ops, reply }).map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
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

    /// Registers a live feed of the events under `prefix` committed from now on.
    pub(crate) fn subscribe(&self, prefix: &str) -> Arc<Subscription> {
        self.inner.subscriptions.subscribe(prefix)
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
                        Ok((Some(kv.clone()), Event::new(rev, EventKind::Create, kv, None)))
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
                    (Some(kv.clone()), Event::new(rev, EventKind::Update, kv, Some(cur)))
                }),
                Op::Delete { expected, .. } => check(expected).map(|cur| {
                    rev += 1;
                    let kv = KeyValue { mod_revision: rev, ..cur.clone() };
                    (None, Event::new(rev, EventKind::Delete, kv, Some(cur)))
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
        inner.subscriptions.fan_out(&events);
        inner.current.store(rev, Ordering::Release);
        inner.batches.fetch_add(1, Ordering::Relaxed);
        inner.writes.fetch_add(events.len() as u64, Ordering::Relaxed);
    }
    for (reply, res) in outcomes {
        let _ = reply.send(res);
    }
}
