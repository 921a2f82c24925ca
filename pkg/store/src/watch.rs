//! Watches: replay from the event log, then follow the live fan-out; a watcher that falls
//! behind the fan-out catches up from the log instead of losing events.

use crate::store::{KeyValue, Store, StoreError};
use crate::transform::{self, Transformer};
use bytes::Bytes;
use std::cell::OnceCell;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::Notify;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    Create,
    Update,
    Delete,
}

/// One committed change. For `Delete`, `kv` is the deleted value with the delete's revision
/// as `mod_revision`; `prev` is the value before the change (absent for `Create`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub revision: u64,
    pub kind: EventKind,
    pub kv: KeyValue,
    pub prev: Option<KeyValue>,
    /// What the watchers of this event encode of it in common, encoded once for all of them.
    pub encoded: Memo,
}

impl Event {
    pub fn new(revision: u64, kind: EventKind, kv: KeyValue, prev: Option<KeyValue>) -> Event {
        Event { revision, kind, kv, prev, encoded: Memo::default() }
    }
}

/// Bytes derived from an event by the first of its watchers that needs them (the API server's
/// wire encoding of the object) and shared with the others: the live fan-out hands every
/// watcher the same event. Not part of the event's value: any two memos compare equal.
#[derive(Clone, Debug, Default)]
pub struct Memo(std::sync::OnceLock<Option<Bytes>>);

impl Memo {
    /// The memo's bytes, computing them with `derive` when nobody has yet.
    pub fn get_or_init(&self, derive: impl FnOnce() -> Option<Bytes>) -> Option<Bytes> {
        self.0.get_or_init(derive).clone()
    }
}

impl PartialEq for Memo {
    fn eq(&self, _: &Memo) -> bool {
        true
    }
}

impl Eq for Memo {}

const LOG_PAGE: usize = 1024;

/// A watcher's live feed: the backend queues the committed events under `prefix` and wakes the
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

/// The live watchers of one backend, each with the prefix it wants.
pub(crate) struct Subscriptions {
    subs: Mutex<Vec<Weak<Subscription>>>,
    capacity: usize,
    /// Decrypts the committed events once for all their watchers.
    transformer: Option<Arc<dyn Transformer>>,
}

impl Subscriptions {
    pub(crate) fn new(capacity: usize, transformer: Option<Arc<dyn Transformer>>) -> Subscriptions {
        Subscriptions { subs: Mutex::new(Vec::new()), capacity: capacity.max(16), transformer }
    }

    /// Registers a live feed of the events under `prefix` committed from now on.
    pub(crate) fn subscribe(&self, prefix: &str) -> Arc<Subscription> {
        let sub = Arc::new(Subscription {
            prefix: prefix.to_string(),
            queue: Mutex::new(LiveQueue::default()),
            notify: Notify::new(),
        });
        self.subs.lock().unwrap_or_else(|p| p.into_inner()).push(Arc::downgrade(&sub));
        sub
    }

    /// Queues a committed batch for the watchers whose prefix it touches, and wakes them. Runs
    /// before the batch's revision becomes current (see `Watcher::revision`). Events are
    /// decrypted once, when a first watcher wants them; one that cannot be sends its watchers
    /// back to the log, where they meet the error themselves.
    pub(crate) fn fan_out(&self, events: &[Arc<Event>]) {
        // Without a transformer the events go out as committed (and nothing is allocated here).
        let plain: Vec<OnceCell<Option<Arc<Event>>>> = match self.transformer {
            Some(_) => events.iter().map(|_| OnceCell::new()).collect(),
            None => Vec::new(),
        };
        let plain_event = |i: usize| {
            let ev = &events[i];
            let Some(t) = &self.transformer else { return Some(ev.clone()) };
            plain[i]
                .get_or_init(|| match transform::plain_event(t.as_ref(), ev) {
                    Ok(Some(p)) => Some(Arc::new(p)),
                    Ok(None) => Some(ev.clone()),
                    Err(e) => {
                        tracing::error!(error = %e, revision = ev.revision, "an event cannot be decrypted for its watchers");
                        None
                    }
                })
                .clone()
        };
        let mut subs = self.subs.lock().unwrap_or_else(|p| p.into_inner());
        subs.retain(|w| w.strong_count() > 0);
        for sub in subs.iter().filter_map(Weak::upgrade) {
            let mut wanted =
                (0..events.len()).filter(|i| events[*i].kv.key.starts_with(sub.prefix.as_str())).peekable();
            if wanted.peek().is_none() {
                continue;
            }
            {
                let mut q = sub.queue.lock().unwrap_or_else(|p| p.into_inner());
                if !q.lagged {
                    for i in wanted {
                        match plain_event(i) {
                            Some(ev) => q.events.push(ev),
                            None => {
                                q.lagged = true;
                                break;
                            }
                        }
                    }
                    if q.lagged || q.events.len() > self.capacity {
                        q.events = Vec::new();
                        q.lagged = true;
                    }
                }
            }
            sub.notify.notify_one();
        }
    }
    /// Marks every live watcher as lagged and wakes it, so it reads the log again (where it
    /// learns if what it missed was compacted away).
    pub(crate) fn lag_all(&self) {
        let subs = self.subs.lock().unwrap_or_else(|p| p.into_inner());
        for sub in subs.iter().filter_map(Weak::upgrade) {
            {
                let mut q = sub.queue.lock().unwrap_or_else(|p| p.into_inner());
                q.events = Vec::new();
                q.lagged = true;
            }
            sub.notify.notify_one();
        }
    }
}

/// A stream of events under a key prefix, in revision order, without gaps.
pub struct Watcher {
    kind: Kind,
}

enum Kind {
    /// Reads the backend's retained log, then follows its live fan-out.
    Log(LogWatcher),
    /// An etcd watch of its own (from before the etcd backend's in-memory history), and what
    /// decrypts its events.
    Etcd(crate::etcd::DirectWatcher, Option<Arc<dyn Transformer>>),
}

impl Watcher {
    pub(crate) fn new(store: Store, prefix: String, after: u64) -> Watcher {
        Watcher { kind: Kind::Log(LogWatcher::new(store, prefix, after)) }
    }

    pub(crate) fn etcd(w: crate::etcd::DirectWatcher, transformer: Option<Arc<dyn Transformer>>) -> Watcher {
        Watcher { kind: Kind::Etcd(w, transformer) }
    }

    /// A revision this watch has fully observed: nothing at or below it remains undelivered.
    /// Suitable for bookmarks.
    pub fn revision(&self) -> u64 {
        match &self.kind {
            Kind::Log(w) => w.revision(),
            Kind::Etcd(w, _) => w.revision(),
        }
    }

    /// Next event; `Err(Compacted)` if the watcher fell behind a compaction.
    pub async fn next(&mut self) -> Result<Arc<Event>, StoreError> {
        match &mut self.kind {
            Kind::Log(w) => w.next().await,
            Kind::Etcd(w, t) => {
                let ev = w.next().await?;
                plain(t, ev)
            }
        }
    }

    /// The next event if one is there without waiting (`Ok(None)` otherwise): lets a consumer
    /// take the events of one commit together.
    pub fn try_next(&mut self) -> Result<Option<Arc<Event>>, StoreError> {
        match &mut self.kind {
            Kind::Log(w) => w.try_next(),
            Kind::Etcd(w, t) => match w.try_next()? {
                Some(ev) => plain(t, ev).map(Some),
                None => Ok(None),
            },
        }
    }
}

/// A directly watched event as watchers see it (decrypted).
fn plain(t: &Option<Arc<dyn Transformer>>, ev: Arc<Event>) -> Result<Arc<Event>, StoreError> {
    match t {
        Some(t) => Ok(transform::plain_event(t.as_ref(), &ev)?.map(Arc::new).unwrap_or(ev)),
        None => Ok(ev),
    }
}

struct LogWatcher {
    store: Store,
    /// Every event under the prefix with a revision up to here was delivered or queued.
    scanned: u64,
    live: Arc<Subscription>,
    backlog: VecDeque<Arc<Event>>,
    /// Whether events must come from the log (start-up replay, or after lagging).
    from_log: bool,
}

impl LogWatcher {
    fn new(store: Store, prefix: String, after: u64) -> LogWatcher {
        // Subscribe before reading the log so no event falls between the two.
        let live = store.subscribe(&prefix);
        LogWatcher { store, scanned: after, live, backlog: VecDeque::new(), from_log: true }
    }

    fn revision(&self) -> u64 {
        if let Some(ev) = self.backlog.front() {
            return ev.revision - 1;
        }
        if self.from_log {
            return self.scanned;
        }
        // The writer queues a batch's events before making its revision current: with nothing
        // queued, every event up to the current revision has been seen.
        let current = self.store.current_revision();
        let q = self.live.queue.lock().unwrap_or_else(|p| p.into_inner());
        // (Queued events the log already delivered do not count.)
        if q.lagged || q.events.iter().any(|ev| ev.revision > self.scanned) {
            self.scanned
        } else {
            self.scanned.max(current)
        }
    }

    async fn next(&mut self) -> Result<Arc<Event>, StoreError> {
        loop {
            if let Some(ev) = self.try_next()? {
                return Ok(ev);
            }
            self.live.notify.notified().await;
        }
    }

    fn try_next(&mut self) -> Result<Option<Arc<Event>>, StoreError> {
        loop {
            if let Some(ev) = self.ready()? {
                return Ok(Some(ev));
            }
            if !self.take_live() {
                return Ok(None);
            }
        }
    }

    /// A queued event, reading the log first while catching up.
    fn ready(&mut self) -> Result<Option<Arc<Event>>, StoreError> {
        loop {
            if let Some(ev) = self.backlog.pop_front() {
                return Ok(Some(ev));
            }
            if !self.from_log {
                return Ok(None);
            }
            let page = self.store.read_log(self.scanned, LOG_PAGE)?;
            if page.len() < LOG_PAGE {
                self.from_log = false;
            }
            if let Some(ev) = page.last() {
                self.scanned = ev.revision;
            }
            let prefix = &self.live.prefix;
            for ev in page.into_iter().filter(|e| e.kv.key.starts_with(prefix)) {
                self.backlog.push_back(Arc::new(self.store.plain_event(ev)?));
            }
        }
    }

    /// Moves the live events the log did not already deliver into the backlog (or, after a lag,
    /// switches back to the log). False when there was nothing to take.
    fn take_live(&mut self) -> bool {
        let (events, lagged) = {
            let mut q = self.live.queue.lock().unwrap_or_else(|p| p.into_inner());
            (std::mem::take(&mut q.events), std::mem::take(&mut q.lagged))
        };
        if lagged {
            self.from_log = true;
            return true;
        }
        let taken = !events.is_empty();
        for ev in events {
            if ev.revision > self.scanned {
                self.scanned = ev.revision;
                self.backlog.push_back(ev);
            }
        }
        taken
    }
}
