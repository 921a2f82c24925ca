//! Watches: replay from the event log, then follow the live fan-out; a watcher that falls
//! behind the fan-out catches up from the log instead of losing events.

use crate::store::{KeyValue, Store, StoreError};
use std::collections::VecDeque;
use std::sync::Arc;
use tokio::sync::broadcast::{self, error::RecvError, error::TryRecvError};

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
}

const LOG_PAGE: usize = 1024;

/// A stream of events under a key prefix, in revision order, without gaps.
pub struct Watcher {
    store: Store,
    prefix: String,
    /// Every event with a revision up to here was delivered, queued or filtered out.
    scanned: u64,
    rx: broadcast::Receiver<Arc<Event>>,
    backlog: VecDeque<Arc<Event>>,
    /// Whether events must come from the log (start-up replay, or after lagging).
    from_log: bool,
}

impl Watcher {
    pub(crate) fn new(store: Store, prefix: String, after: u64) -> Watcher {
        // Subscribe before reading the log so no event falls between the two.
        let rx = store.subscribe();
        Watcher { store, prefix, scanned: after, rx, backlog: VecDeque::new(), from_log: true }
    }

    /// A revision this watch has fully observed: nothing at or below it remains undelivered.
    /// Suitable for bookmarks.
    pub fn revision(&self) -> u64 {
        match self.backlog.front() {
            Some(ev) => ev.revision - 1,
            None => self.scanned,
        }
    }

    /// Next event; `Err(Compacted)` if the watcher fell behind a compaction, `Err(Closed)` at shutdown.
    pub async fn next(&mut self) -> Result<Arc<Event>, StoreError> {
        loop {
            if let Some(ev) = self.ready()? {
                return Ok(ev);
            }
            match self.rx.recv().await {
                Ok(ev) => {
                    if let Some(ev) = self.accept(ev) {
                        return Ok(ev);
                    }
                }
                Err(RecvError::Lagged(_)) => self.from_log = true,
                Err(RecvError::Closed) => return Err(StoreError::Closed),
            }
        }
    }

    /// The next event if one is there without waiting (`Ok(None)` otherwise): lets a consumer
    /// take the events of one commit together.
    pub fn try_next(&mut self) -> Result<Option<Arc<Event>>, StoreError> {
        loop {
            if let Some(ev) = self.ready()? {
                return Ok(Some(ev));
            }
            match self.rx.try_recv() {
                Ok(ev) => {
                    if let Some(ev) = self.accept(ev) {
                        return Ok(Some(ev));
                    }
                }
                Err(TryRecvError::Lagged(_)) => self.from_log = true,
                Err(TryRecvError::Empty) => return Ok(None),
                Err(TryRecvError::Closed) => return Err(StoreError::Closed),
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
            let prefix = &self.prefix;
            self.backlog.extend(page.into_iter().filter(|e| e.kv.key.starts_with(prefix)).map(Arc::new));
        }
    }

    /// A live event, unless the log already delivered it or it is outside the prefix.
    fn accept(&mut self, ev: Arc<Event>) -> Option<Arc<Event>> {
        if ev.revision <= self.scanned {
            return None;
        }
        self.scanned = ev.revision;
        ev.kv.key.starts_with(&self.prefix).then_some(ev)
    }
}
