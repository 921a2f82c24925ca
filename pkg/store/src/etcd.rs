//! The external backend: an etcd v3 cluster, spoken to over its gRPC API.
//!
//! - Keys are the store's keys (`/registry/<group>/<resource>/<namespace>/<name>`, laid out as
//!   kube-apiserver lays them out under its default `--etcd-prefix`) with [`EtcdConfig::root`]
//!   prepended; values are the same bytes (JSON) the RocksDB backend keeps.
//! - A key's revisions are etcd's: the object's resourceVersion is the etcd mod revision.
//!   Writes are one etcd transaction each (a create compares `create_revision == 0`, a
//!   compare-and-swap compares `mod_revision`); no leases.
//! - Reads and watches are served from a mirror in memory, as kube-apiserver serves them from its
//!   watch cache: one etcd watch over the whole root (with `prev_kv` and progress notifications)
//!   keeps the current values and the history etcd still retains. A write returns only once the
//!   mirror has applied it, so a server reads its own writes, exactly as with RocksDB; writes of
//!   other servers sharing the etcd appear within the watch latency.
//! - History: the mirror keeps the events it has seen since it started (the values are read at
//!   one revision, then the watch follows from there). A watch from before that, as after a
//!   restart of k1s, gets an etcd watch of its own ([`DirectWatcher`]): etcd replays what it
//!   retains and the watch follows on, or answers `Compacted` (410 Gone). A read at a revision
//!   before the mirror's start is `Compacted`. `compact` compacts etcd and the mirror.

use crate::store::{CommitTimes, KeyValue, ListResult, Op, Stats, StoreError};
use crate::watch::{Event, EventKind, Subscription, Subscriptions};
use bytes::Bytes;
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

#[allow(clippy::all, clippy::pedantic, missing_docs)]
mod pb {
    tonic::include_proto!("etcdserverpb");
}

use pb::compare::{CompareResult, CompareTarget, TargetUnion};
use pb::kv_client::KvClient;
use pb::maintenance_client::MaintenanceClient;
use pb::request_op::Request;
use pb::response_op::Response;
use pb::watch_client::WatchClient;

/// Keys per page when loading the mirror.
const LOAD_PAGE: i64 = 1000;
/// How long a write waits for the mirror to apply it before it is reported as failed.
const APPLY_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause before the mirror's watch is opened again after it broke.
const RETRY: Duration = Duration::from_secs(1);

/// Where the etcd cluster is and how to authenticate to it.
#[derive(Clone, Debug, Default)]
pub struct EtcdConfig {
    /// Client URLs, `https://HOST:2379` (or `http://` on loopback); requests are balanced over
    /// them.
    pub endpoints: Vec<String>,
    /// CA bundle that signed the etcd servers' certificates (https).
    pub ca_file: Option<PathBuf>,
    /// Client certificate and key (etcd's `--client-cert-auth`).
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// Prepended to every key; empty by default (keys are then `/registry/...`). Lets several
    /// clusters (or tests) share one etcd.
    pub root: String,
}

fn storage(op: &'static str) -> impl Fn(tonic::Status) -> StoreError {
    move |s| StoreError::Storage { op, message: format!("etcd: {}", s.message()) }
}

/// Whether a failed call never reached etcd: the connection to the member the balancer picked
/// could not be made (that member is down). Such a call is safe to send again, and the balancer
/// picks again; anything else may have been applied and is reported as it is.
fn not_sent(s: &tonic::Status) -> bool {
    s.code() == tonic::Code::Unavailable && {
        let m = s.message();
        m.contains("tcp connect error") || m.contains("error trying to connect") || m.contains("Connection refused")
    }
}

/// How often a call that never reached etcd is sent again (see [`not_sent`]).
const UNSENT_ATTEMPTS: u32 = 6;

/// Runs `call` until it reached etcd (at most [`UNSENT_ATTEMPTS`] times, backing off from 20 ms):
/// with one member of a cluster down, calls the balancer sends its way fail to connect, as
/// etcd's own client retries them on another member.
async fn until_sent<T, F, Fut>(mut call: F) -> Result<T, tonic::Status>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, tonic::Status>>,
{
    let mut pause = Duration::from_millis(20);
    let mut attempt = 1;
    loop {
        match call().await {
            Err(s) if not_sent(&s) && attempt < UNSENT_ATTEMPTS => {
                tracing::debug!(attempt, error = %s.message(), "an etcd member could not be reached; sending again");
                tokio::time::sleep(pause).await;
                pause *= 2;
                attempt += 1;
            }
            r => return r,
        }
    }
}

fn rev(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn irev(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The smallest key greater than every key that starts with `prefix` (etcd's range end for a
/// prefix); `\0` (to the end) when there is none.
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// The values and retained history, as of `current` (see the module doc).
#[derive(Default)]
struct Mirror {
    kvs: BTreeMap<String, KeyValue>,
    /// Every event after the history start (see `Inner::history_start`), in revision order.
    log: VecDeque<Arc<Event>>,
}

struct Inner {
    kv: KvClient<Channel>,
    watch: WatchClient<Channel>,
    maintenance: MaintenanceClient<Channel>,
    root: String,
    mirror: RwLock<Mirror>,
    current: AtomicU64,
    /// The revision compacted last (by this server; etcd may be compacted further by others).
    compacted: AtomicU64,
    /// The mirror's log holds every event after this revision (where its values were loaded,
    /// or compacted to since).
    history_start: AtomicU64,
    /// The revision the mirror has applied, for writers waiting to read their write.
    applied: tokio::sync::watch::Sender<u64>,
    subscriptions: Subscriptions,
    writes: AtomicU64,
    txns: AtomicU64,
    commit_times: CommitTimes,
    /// Stops the mirror task when the last handle goes.
    stop: CancellationToken,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Handle to the etcd backend; cheap to clone.
#[derive(Clone)]
pub(crate) struct EtcdStore {
    inner: Arc<Inner>,
}

impl EtcdStore {
    /// Connects to etcd, loads the mirror's values at one revision and follows etcd's watch from
    /// there.
    pub(crate) async fn connect(
        config: &EtcdConfig,
        fanout_capacity: usize,
        transformer: Option<Arc<dyn crate::transform::Transformer>>,
    ) -> Result<EtcdStore, StoreError> {
        let channel = channel(config).await?;
        let mut kv = KvClient::new(channel.clone()).max_decoding_message_size(usize::MAX);
        let watch = WatchClient::new(channel.clone()).max_decoding_message_size(usize::MAX);
        let maintenance = MaintenanceClient::new(channel).max_decoding_message_size(usize::MAX);
        let root = config.root.clone();
        let (kvs, at) = load(&mut kv, &root).await?;
        let (applied, _) = tokio::sync::watch::channel(at);
        let inner = Arc::new(Inner {
            kv,
            watch,
            maintenance,
            root,
            mirror: RwLock::new(Mirror { kvs, log: VecDeque::new() }),
            current: AtomicU64::new(at),
            compacted: AtomicU64::new(0),
            history_start: AtomicU64::new(at),
            applied,
            subscriptions: Subscriptions::new(fanout_capacity, transformer),
            writes: AtomicU64::new(0),
            txns: AtomicU64::new(0),
            commit_times: CommitTimes::default(),
            stop: CancellationToken::new(),
        });
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        tokio::spawn(follow(Arc::downgrade(&inner), inner.stop.clone(), at, ready_tx));
        match tokio::time::timeout(APPLY_TIMEOUT, ready_rx).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => return Err(e),
            Ok(Err(_)) | Err(_) => {
                return Err(StoreError::Storage { op: "open", message: "etcd watch did not start".into() })
            }
        }
        tracing::info!(revision = at, endpoints = ?config.endpoints, "store opened on etcd");
        Ok(EtcdStore { inner })
    }

    /// Streams etcd's own snapshot (what `etcdctl snapshot save` writes: the member's backend
    /// database followed by its sha256) into `out`; returns the revision it holds (at least).
    pub(crate) async fn snapshot(&self, out: &mut (impl tokio::io::AsyncWrite + Unpin)) -> Result<u64, StoreError> {
        use tokio::io::AsyncWriteExt as _;
        let err = storage("snapshot");
        // etcd's snapshot messages carry no revision: every write this server saw before it asks
        // is in the snapshot.
        let revision = self.current_revision();
        let mut stream = until_sent(|| {
            let mut c = self.inner.maintenance.clone();
            async move { c.snapshot(pb::SnapshotRequest {}).await }
        })
        .await
        .map_err(&err)?
        .into_inner();
        while let Some(msg) = stream.message().await.map_err(&err)? {
            out.write_all(&msg.blob)
                .await
                .map_err(|e| StoreError::Storage { op: "snapshot", message: format!("writing: {e}") })?;
        }
        Ok(revision)
    }

    fn etcd_key(&self, key: &str) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.inner.root.len() + key.len());
        k.extend_from_slice(self.inner.root.as_bytes());
        k.extend_from_slice(key.as_bytes());
        k
    }

    pub(crate) fn current_revision(&self) -> u64 {
        self.inner.current.load(Ordering::Acquire)
    }

    pub(crate) fn compacted_revision(&self) -> u64 {
        self.inner.compacted.load(Ordering::Acquire)
    }

    /// Watches from before this revision are served by etcd directly ([`DirectWatcher`]).
    pub(crate) fn history_start(&self) -> u64 {
        self.inner.history_start.load(Ordering::Acquire)
    }

    pub(crate) fn stats(&self) -> Stats {
        self.inner
            .commit_times
            .stats(self.inner.writes.load(Ordering::Relaxed), self.inner.txns.load(Ordering::Relaxed))
    }

    pub(crate) fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        Ok(self.inner.mirror.read().unwrap_or_else(|p| p.into_inner()).kvs.get(key).cloned())
    }

    pub(crate) fn list(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        limit: usize,
        at_revision: Option<u64>,
    ) -> Result<ListResult, StoreError> {
        let mirror = self.inner.mirror.read().unwrap_or_else(|p| p.into_inner());
        let now = self.current_revision();
        let (revision, past) = match at_revision {
            Some(r) if r < now => {
                let start = self.history_start();
                if r < start {
                    return Err(StoreError::Compacted { requested: r, compacted: start });
                }
                (r, Some(past_values(&mirror.log, prefix, r)))
            }
            Some(r) if r > now => return Err(StoreError::FutureRevision { requested: r, current: now }),
            _ => (now, None),
        };
        let from = match start_after {
            Some(s) if s >= prefix => std::ops::Bound::Excluded(s.to_string()),
            _ => std::ops::Bound::Included(prefix.to_string()),
        };
        let want = if limit == 0 { usize::MAX } else { limit.saturating_add(1) };
        let current = mirror
            .kvs
            .range((from, std::ops::Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(_, kv)| kv);
        let mut items: Vec<KeyValue> = match past {
            None => current.take(want).cloned().collect(),
            Some(mut past) => {
                let after = start_after.unwrap_or("");
                let mut merged: Vec<KeyValue> = current.filter(|kv| !past.contains_key(&kv.key)).cloned().collect();
                past.retain(|k, v| v.is_some() && k.as_str() > after);
                merged.extend(past.into_values().flatten());
                merged.sort_by(|a, b| a.key.cmp(&b.key));
                merged
            }
        };
        let more = limit != 0 && items.len() > limit;
        if more {
            items.truncate(limit);
        }
        Ok(ListResult { items, revision, more })
    }

    pub(crate) fn read_log(&self, after: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        let mirror = self.inner.mirror.read().unwrap_or_else(|p| p.into_inner());
        let history = self.history_start();
        if after < history {
            return Err(StoreError::Compacted { requested: after, compacted: history });
        }
        let start = mirror.log.partition_point(|ev| ev.revision <= after);
        Ok(mirror.log.iter().skip(start).take(limit).map(|ev| Event::clone(ev)).collect())
    }

    pub(crate) fn subscribe(&self, prefix: &str) -> Arc<Subscription> {
        self.inner.subscriptions.subscribe(prefix)
    }

    /// Waits until the mirror has applied revision `r`.
    async fn applied(&self, r: u64) -> Result<(), StoreError> {
        let mut rx = self.inner.applied.subscribe();
        let waited = tokio::time::timeout(APPLY_TIMEOUT, async { rx.wait_for(|a| *a >= r).await.map(|_| ()) }).await;
        match waited {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(StoreError::Closed),
            Err(_) => Err(StoreError::Storage {
                op: "wait for the watch",
                message: format!("etcd's watch did not deliver revision {r} within {APPLY_TIMEOUT:?}"),
            }),
        }
    }

    pub(crate) async fn txn(&self, ops: Vec<Op>) -> Result<Vec<KeyValue>, StoreError> {
        let mut req = pb::TxnRequest::default();
        for op in &ops {
            let key = self.etcd_key(op.key());
            let (target, union, result) = match op {
                Op::Create { .. } => (CompareTarget::Create, TargetUnion::CreateRevision(0), CompareResult::Equal),
                Op::Update { expected: Some(e), .. } | Op::Delete { expected: Some(e), .. } => {
                    (CompareTarget::Mod, TargetUnion::ModRevision(irev(*e)), CompareResult::Equal)
                }
                Op::Update { expected: None, .. } | Op::Delete { expected: None, .. } => {
                    (CompareTarget::Create, TargetUnion::CreateRevision(0), CompareResult::Greater)
                }
            };
            req.compare.push(pb::Compare {
                result: result as i32,
                target: target as i32,
                key: key.clone(),
                target_union: Some(union),
                range_end: Vec::new(),
            });
            let success = match op {
                Op::Create { value, .. } | Op::Update { value, .. } => Request::RequestPut(pb::PutRequest {
                    key: key.clone(),
                    value: value.to_vec(),
                    lease: 0,
                    prev_kv: matches!(op, Op::Update { .. }),
                }),
                Op::Delete { .. } => Request::RequestDeleteRange(pb::DeleteRangeRequest {
                    key: key.clone(),
                    range_end: Vec::new(),
                    prev_kv: true,
                }),
            };
            req.success.push(pb::RequestOp { request: Some(success) });
            req.failure.push(pb::RequestOp {
                request: Some(Request::RequestRange(pb::RangeRequest { key, ..Default::default() })),
            });
        }
        let started = Instant::now();
        let resp = until_sent(|| {
            let (mut c, req) = (self.inner.kv.clone(), req.clone());
            async move { c.txn(req).await }
        })
        .await
        .map_err(storage("txn"))?
        .into_inner();
        let at = rev(resp.header.as_ref().map_or(0, |h| h.revision));
        if !resp.succeeded {
            return Err(self.failure(&ops, resp.responses).await);
        }
        self.inner.commit_times.record(started.elapsed());
        self.inner.txns.fetch_add(1, Ordering::Relaxed);
        self.inner.writes.fetch_add(ops.len() as u64, Ordering::Relaxed);
        let mut out = Vec::with_capacity(ops.len());
        for (op, r) in ops.into_iter().zip(resp.responses) {
            let kv = match (op, r.response) {
                (Op::Create { key, value }, _) => {
                    KeyValue { key, value, create_revision: at, mod_revision: at, version: 1 }
                }
                (Op::Update { key, value, .. }, Some(Response::ResponsePut(p))) => {
                    let prev = p.prev_kv.unwrap_or_default();
                    KeyValue {
                        key,
                        value,
                        create_revision: rev(prev.create_revision),
                        mod_revision: at,
                        version: rev(prev.version) + 1,
                    }
                }
                (Op::Delete { key, .. }, Some(Response::ResponseDeleteRange(d))) => {
                    let prev = d.prev_kvs.into_iter().next().unwrap_or_default();
                    KeyValue {
                        key,
                        value: Bytes::from(prev.value),
                        create_revision: rev(prev.create_revision),
                        mod_revision: at,
                        version: rev(prev.version),
                    }
                }
                (op, _) => return Err(StoreError::Corrupt(format!("etcd txn response for {}", op.key()))),
            };
            out.push(kv);
        }
        self.applied(at).await?;
        Ok(out)
    }

    /// The error of a transaction whose comparisons failed, from the failure branch's reads:
    /// the first op whose condition does not hold, as the RocksDB backend reports it.
    async fn failure(&self, ops: &[Op], responses: Vec<pb::ResponseOp>) -> StoreError {
        let mut seen = 0;
        let mut error = None;
        for (op, r) in ops.iter().zip(responses) {
            let found = match r.response {
                Some(Response::ResponseRange(r)) => r.kvs.into_iter().next(),
                _ => None,
            };
            let current = found.as_ref().map(|kv| rev(kv.mod_revision));
            seen = seen.max(current.unwrap_or(0));
            let key = op.key().to_string();
            let e = match (op, current) {
                (Op::Create { .. }, Some(_)) => Some(StoreError::AlreadyExists(key)),
                (Op::Update { .. } | Op::Delete { .. }, None) => Some(StoreError::NotFound(key)),
                (Op::Update { expected: Some(e), .. } | Op::Delete { expected: Some(e), .. }, Some(c)) if *e != c => {
                    Some(StoreError::Conflict { key, expected: *e, current: c })
                }
                _ => None,
            };
            if error.is_none() {
                error = e;
            }
        }
        // What made it fail is then visible to this server's reads too.
        if let Err(e) = self.applied(seen).await {
            return e;
        }
        error.unwrap_or_else(|| StoreError::Storage {
            op: "txn",
            message: "etcd refused the transaction but its conditions hold (the same key twice in one txn?)".into(),
        })
    }

    pub(crate) async fn compact(&self, r: u64) -> Result<(), StoreError> {
        let r = r.min(self.current_revision());
        if r <= self.compacted_revision() {
            return Ok(());
        }
        let req = pb::CompactionRequest { revision: irev(r), physical: false };
        if let Err(s) = until_sent(|| {
            let (mut c, req) = (self.inner.kv.clone(), req);
            async move { c.compact(req).await }
        })
        .await
        {
            // Another server sharing the etcd compacted it first.
            if !s.message().contains("compacted") {
                return Err(storage("compact")(s));
            }
        }
        let mut mirror = self.inner.mirror.write().unwrap_or_else(|p| p.into_inner());
        let keep = mirror.log.partition_point(|ev| ev.revision <= r);
        mirror.log.drain(..keep);
        self.inner.history_start.fetch_max(r, Ordering::AcqRel);
        self.inner.compacted.fetch_max(r, Ordering::AcqRel);
        tracing::debug!(revision = r, "etcd compacted");
        Ok(())
    }
}

impl EtcdStore {
    /// A watch of its own on etcd from after `after` (see [`DirectWatcher`]).
    pub(crate) fn watch_direct(&self, prefix: &str, after: u64) -> Result<DirectWatcher, StoreError> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| StoreError::Storage { op: "watch", message: e.to_string() })?;
        let (tx, rx) = mpsc::channel(1024);
        let stop = CancellationToken::new();
        let mut key = self.etcd_key(prefix);
        let range_end = prefix_end(&key);
        if key.is_empty() {
            key.push(0);
        }
        let task =
            direct_watch(self.inner.watch.clone(), self.inner.root.clone(), key, range_end, after, tx, stop.clone());
        runtime.spawn(task);
        Ok(DirectWatcher { rx, revision: after, stop })
    }
}

/// A watch from a revision older than the mirror's history, served by an etcd watch of its own:
/// etcd replays the events it still retains, then follows on; if it has compacted them, the
/// first `next` is `Compacted`.
pub(crate) struct DirectWatcher {
    rx: mpsc::Receiver<Result<Arc<Event>, StoreError>>,
    /// The revision of the last event taken.
    revision: u64,
    stop: CancellationToken,
}

impl Drop for DirectWatcher {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl DirectWatcher {
    /// A revision this watch has fully observed (the events of one revision arrive together).
    pub(crate) fn revision(&self) -> u64 {
        self.revision
    }

    pub(crate) async fn next(&mut self) -> Result<Arc<Event>, StoreError> {
        let ev = self.rx.recv().await.unwrap_or(Err(StoreError::Closed))?;
        self.revision = self.revision.max(ev.revision);
        Ok(ev)
    }

    pub(crate) fn try_next(&mut self) -> Result<Option<Arc<Event>>, StoreError> {
        match self.rx.try_recv() {
            Ok(Ok(ev)) => {
                self.revision = self.revision.max(ev.revision);
                Ok(Some(ev))
            }
            Ok(Err(e)) => Err(e),
            Err(mpsc::error::TryRecvError::Empty) => Ok(None),
            Err(mpsc::error::TryRecvError::Disconnected) => Err(StoreError::Closed),
        }
    }
}

async fn direct_watch(
    mut client: WatchClient<Channel>,
    root: String,
    key: Vec<u8>,
    range_end: Vec<u8>,
    after: u64,
    tx: mpsc::Sender<Result<Arc<Event>, StoreError>>,
    stop: CancellationToken,
) {
    let (req_tx, req_rx) = mpsc::channel(1);
    let create = pb::WatchRequest {
        request_union: Some(pb::watch_request::RequestUnion::CreateRequest(pb::WatchCreateRequest {
            key,
            range_end,
            start_revision: irev(after + 1),
            progress_notify: false,
            prev_kv: true,
            watch_id: 0,
            fragment: false,
        })),
    };
    if req_tx.send(create).await.is_err() {
        return;
    }
    let failed = |message: String| Err(StoreError::Storage { op: "watch etcd", message });
    let mut stream = tokio::select! {
        _ = stop.cancelled() => return,
        r = client.watch(tokio_stream::wrappers::ReceiverStream::new(req_rx)) => match r {
            Ok(s) => s.into_inner(),
            Err(s) => {
                let _ = tx.send(failed(s.message().to_string())).await;
                return;
            }
        },
    };
    loop {
        let msg = tokio::select! {
            _ = stop.cancelled() => return,
            m = stream.message() => m,
        };
        let resp = match msg {
            Ok(Some(r)) => r,
            Ok(None) => {
                let _ = tx.send(failed("etcd closed the watch stream".into())).await;
                return;
            }
            Err(s) => {
                let _ = tx.send(failed(s.message().to_string())).await;
                return;
            }
        };
        if resp.canceled {
            let err = if resp.compact_revision > 0 {
                StoreError::Compacted { requested: after, compacted: rev(resp.compact_revision).saturating_sub(1) }
            } else {
                StoreError::Storage {
                    op: "watch etcd",
                    message: format!("etcd canceled the watch: {}", resp.cancel_reason),
                }
            };
            let _ = tx.send(Err(err)).await;
            return;
        }
        for ev in resp.events.into_iter().filter_map(|e| event(&root, e)) {
            if tx.send(Ok(Arc::new(ev))).await.is_err() {
                return;
            }
        }
    }
}

async fn channel(config: &EtcdConfig) -> Result<Channel, StoreError> {
    let err = |message: String| StoreError::Storage { op: "connect to etcd", message };
    if config.endpoints.is_empty() {
        return Err(err("no endpoint given".into()));
    }
    let read = |p: &PathBuf| std::fs::read(p).map_err(|e| err(format!("reading {}: {e}", p.display())));
    let mut tls = None;
    if config.endpoints.iter().any(|e| e.starts_with("https://")) {
        let mut t = ClientTlsConfig::new();
        if let Some(ca) = &config.ca_file {
            t = t.ca_certificate(Certificate::from_pem(read(ca)?));
        }
        match (&config.cert_file, &config.key_file) {
            (Some(c), Some(k)) => t = t.identity(Identity::from_pem(read(c)?, read(k)?)),
            (None, None) => {}
            _ => return Err(err("a client certificate needs its key and the key its certificate".into())),
        }
        tls = Some(t);
    }
    let mut endpoints = Vec::new();
    for url in &config.endpoints {
        if !(url.starts_with("https://") || url.starts_with("http://")) {
            return Err(err(format!("{url}: an endpoint is https://HOST:PORT (or http:// on loopback)")));
        }
        let mut e = Endpoint::from_shared(url.clone())
            .map_err(|e| err(format!("{url}: {e}")))?
            .connect_timeout(Duration::from_secs(5))
            .keep_alive_while_idle(true)
            .http2_keep_alive_interval(Duration::from_secs(30));
        if let (Some(t), true) = (&tls, url.starts_with("https://")) {
            e = e.tls_config(t.clone()).map_err(|e| err(format!("{url}: {e}")))?;
        }
        endpoints.push(e);
    }
    if endpoints.len() == 1 {
        let e = endpoints.remove(0);
        let url = e.uri().to_string();
        return e.connect().await.map_err(|e| err(format!("{url}: {e}")));
    }
    Ok(Channel::balance_list(endpoints.into_iter()))
}

/// Reads every key under `root` at one revision; the keys come back without `root`.
async fn load(kv: &mut KvClient<Channel>, root: &str) -> Result<(BTreeMap<String, KeyValue>, u64), StoreError> {
    let (mut key, end) =
        if root.is_empty() { (vec![0], vec![0]) } else { (root.as_bytes().to_vec(), prefix_end(root.as_bytes())) };
    let mut at = 0;
    let mut out = BTreeMap::new();
    loop {
        let req = pb::RangeRequest {
            key: key.clone(),
            range_end: end.clone(),
            limit: LOAD_PAGE,
            revision: irev(at),
            ..Default::default()
        };
        let resp = until_sent(|| {
            let (mut c, req) = (kv.clone(), req.clone());
            async move { c.range(req).await }
        })
        .await
        .map_err(storage("load"))?
        .into_inner();
        if at == 0 {
            at = rev(resp.header.as_ref().map_or(0, |h| h.revision));
        }
        let last = resp.kvs.last().map(|kv| kv.key.clone());
        for kv in resp.kvs {
            if let Some(kv) = from_etcd(root, kv) {
                out.insert(kv.key.clone(), kv);
            }
        }
        match last {
            Some(mut k) if resp.more => {
                k.push(0);
                key = k;
            }
            _ => return Ok((out, at)),
        }
    }
}

fn from_etcd(root: &str, kv: pb::KeyValue) -> Option<KeyValue> {
    let key = String::from_utf8(kv.key).ok()?.strip_prefix(root)?.to_string();
    Some(KeyValue {
        key,
        value: Bytes::from(kv.value),
        create_revision: rev(kv.create_revision),
        mod_revision: rev(kv.mod_revision),
        version: rev(kv.version),
    })
}

/// The store's event for an etcd event (`None` for keys outside the root).
fn event(root: &str, ev: pb::Event) -> Option<Event> {
    let kv = from_etcd(root, ev.kv?)?;
    let prev = ev.prev_kv.and_then(|p| from_etcd(root, p));
    let revision = kv.mod_revision;
    Some(if ev.r#type == pb::event::EventType::Delete as i32 {
        // etcd's delete carries only the key: the store's carries the deleted value.
        let deleted = match &prev {
            Some(p) => KeyValue { mod_revision: revision, ..p.clone() },
            None => kv,
        };
        Event::new(revision, EventKind::Delete, deleted, prev)
    } else if kv.version == 1 {
        Event::new(revision, EventKind::Create, kv, None)
    } else {
        Event::new(revision, EventKind::Update, kv, prev)
    })
}

/// For every key under `prefix` written after `r`, its value as of `r` (None = absent).
fn past_values(log: &VecDeque<Arc<Event>>, prefix: &str, r: u64) -> BTreeMap<String, Option<KeyValue>> {
    let mut out = BTreeMap::new();
    let start = log.partition_point(|ev| ev.revision <= r);
    for ev in log.iter().skip(start) {
        if !ev.kv.key.starts_with(prefix) || out.contains_key(&ev.kv.key) {
            continue;
        }
        let past = match ev.kind {
            EventKind::Create => None,
            EventKind::Update | EventKind::Delete => ev.prev.clone(),
        };
        out.insert(ev.kv.key.clone(), past);
    }
    out
}

/// What one watch stream ended with.
enum Ended {
    /// The store was dropped.
    Stopped,
    /// The stream broke (etcd unreachable, leader change...): open it again from where it was.
    Broken(String),
    /// etcd no longer has the revisions the watch needs: load everything again.
    Compacted(u64),
}

/// The mirror's follower: applies every event after `loaded` (the revision the values were read
/// at), for as long as the store lives; `ready` is told once the watch is established.
async fn follow(
    inner: std::sync::Weak<Inner>,
    stop: CancellationToken,
    loaded: u64,
    ready: tokio::sync::oneshot::Sender<Result<(), StoreError>>,
) {
    let mut ready = Some(ready);
    let mut from = loaded + 1;
    loop {
        let ended = watch_once(&inner, &stop, from, &mut ready).await;
        let Some(strong) = inner.upgrade() else { return };
        match ended {
            Ended::Stopped => return,
            Ended::Broken(message) if ready.is_some() => {
                if let Some(tx) = ready.take() {
                    let _ = tx.send(Err(StoreError::Storage { op: "watch etcd", message }));
                }
                return;
            }
            Ended::Compacted(c) => {
                tracing::warn!(compacted = c, "etcd compacted past the store's watch; loading everything again");
                match strong.reload().await {
                    Ok(at) => from = at + 1,
                    Err(e) => {
                        tracing::warn!(error = %e, "loading from etcd failed; retrying");
                        drop(strong);
                        tokio::select! {
                            _ = stop.cancelled() => return,
                            _ = tokio::time::sleep(RETRY) => {}
                        }
                    }
                }
            }
            Ended::Broken(message) => {
                tracing::warn!(error = %message, "etcd watch broke; opening it again");
                from = strong.current_revision() + 1;
                drop(strong);
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(RETRY) => {}
                }
            }
        }
    }
}

impl Inner {
    fn current_revision(&self) -> u64 {
        self.current.load(Ordering::Acquire)
    }

    /// Loads every value again after the watch lost history; live watchers learn through
    /// `Compacted` that they must list again.
    async fn reload(&self) -> Result<u64, StoreError> {
        let (kvs, at) = load(&mut self.kv.clone(), &self.root).await?;
        {
            let mut mirror = self.mirror.write().unwrap_or_else(|p| p.into_inner());
            mirror.kvs = kvs;
            mirror.log.clear();
            self.history_start.fetch_max(at, Ordering::AcqRel);
            self.current.fetch_max(at, Ordering::AcqRel);
        }
        self.subscriptions.lag_all();
        self.applied.send_replace(self.current_revision());
        Ok(at)
    }

    /// Applies the events of one watch response (revision order).
    fn apply(&self, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        let top = events.iter().map(|e| e.revision).max().unwrap_or(0);
        let events: Vec<Arc<Event>> = events.into_iter().map(Arc::new).collect();
        {
            let mut mirror = self.mirror.write().unwrap_or_else(|p| p.into_inner());
            for ev in &events {
                match ev.kind {
                    EventKind::Delete => mirror.kvs.remove(&ev.kv.key),
                    EventKind::Create | EventKind::Update => mirror.kvs.insert(ev.kv.key.clone(), ev.kv.clone()),
                };
                mirror.log.push_back(ev.clone());
            }
            self.subscriptions.fan_out(&events);
            self.current.fetch_max(top, Ordering::AcqRel);
        }
        self.applied.send_replace(self.current_revision());
    }

    /// A progress notification: every event up to `r` has been delivered.
    fn progress(&self, r: u64) {
        // Under the mirror's lock, as in `apply`: a watcher's `revision()` relies on every event
        // up to the current revision having been queued.
        let advanced = {
            let _mirror = self.mirror.write().unwrap_or_else(|p| p.into_inner());
            self.current.fetch_max(r, Ordering::AcqRel) < r
        };
        if advanced {
            self.applied.send_replace(r);
        }
    }
}

/// One watch stream from `from` on, until it ends.
async fn watch_once(
    inner: &std::sync::Weak<Inner>,
    stop: &CancellationToken,
    from: u64,
    ready: &mut Option<tokio::sync::oneshot::Sender<Result<(), StoreError>>>,
) -> Ended {
    let (mut client, root) = match inner.upgrade() {
        Some(i) => (i.watch.clone(), i.root.clone()),
        None => return Ended::Stopped,
    };
    let (key, range_end) =
        if root.is_empty() { (vec![0], vec![0]) } else { (root.as_bytes().to_vec(), prefix_end(root.as_bytes())) };
    let (tx, rx) = mpsc::channel(4);
    let create = pb::WatchRequest {
        request_union: Some(pb::watch_request::RequestUnion::CreateRequest(pb::WatchCreateRequest {
            key,
            range_end,
            start_revision: irev(from),
            progress_notify: true,
            prev_kv: true,
            watch_id: 0,
            fragment: false,
        })),
    };
    if tx.send(create).await.is_err() {
        return Ended::Stopped;
    }
    let mut stream = tokio::select! {
        _ = stop.cancelled() => return Ended::Stopped,
        r = client.watch(tokio_stream::wrappers::ReceiverStream::new(rx)) => match r {
            Ok(s) => s.into_inner(),
            Err(s) => return Ended::Broken(s.message().to_string()),
        },
    };
    // Keeps the request stream open (closing it ends the watch).
    let _requests = tx;
    loop {
        let msg = tokio::select! {
            _ = stop.cancelled() => return Ended::Stopped,
            m = stream.message() => m,
        };
        let resp = match msg {
            Ok(Some(r)) => r,
            Ok(None) => return Ended::Broken("etcd closed the watch stream".into()),
            Err(s) => return Ended::Broken(s.message().to_string()),
        };
        if resp.canceled {
            if resp.compact_revision > 0 {
                return Ended::Compacted(rev(resp.compact_revision));
            }
            return Ended::Broken(format!("etcd canceled the watch: {}", resp.cancel_reason));
        }
        if resp.created {
            if let Some(tx) = ready.take() {
                let _ = tx.send(Ok(()));
            }
            continue;
        }
        let Some(strong) = inner.upgrade() else { return Ended::Stopped };
        let header_rev = rev(resp.header.as_ref().map_or(0, |h| h.revision));
        if resp.events.is_empty() {
            // A progress notification.
            strong.progress(header_rev);
        } else {
            let events: Vec<Event> = resp.events.into_iter().filter_map(|e| event(&root, e)).collect();
            strong.apply(events);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_calls_that_never_reached_etcd_are_sent_again() {
        assert!(not_sent(&tonic::Status::unavailable("tcp connect error")));
        assert!(!not_sent(&tonic::Status::unavailable("etcdserver: leader changed")), "may have been applied");
        assert!(!not_sent(&tonic::Status::deadline_exceeded("tcp connect error")));
        let calls = std::sync::atomic::AtomicU32::new(0);
        let r: Result<u32, tonic::Status> = until_sent(|| {
            let n = calls.fetch_add(1, Ordering::Relaxed) + 1;
            async move {
                if n < 3 {
                    Err(tonic::Status::unavailable("tcp connect error"))
                } else {
                    Ok(n)
                }
            }
        })
        .await;
        assert_eq!(r.expect("sent on the third attempt"), 3);
        calls.store(0, Ordering::Relaxed);
        let r: Result<u32, tonic::Status> = until_sent(|| {
            calls.fetch_add(1, Ordering::Relaxed);
            async { Err(tonic::Status::unavailable("etcdserver: request timed out")) }
        })
        .await;
        assert!(r.is_err());
        assert_eq!(calls.load(Ordering::Relaxed), 1, "an ambiguous failure is not sent again");
    }
}
