//! A de-duplicating work queue with delayed and rate-limited re-queueing, with the semantics of
//! client-go's `workqueue.RateLimitingInterface`:
//!
//! - a key queued twice before a worker takes it is processed once;
//! - a key is never handed to two workers at once: added while being processed, it is queued
//!   again when the worker calls [`WorkQueue::done`];
//! - [`WorkQueue::add_after`] keeps only the earliest pending time per key;
//! - [`WorkQueue::add_rate_limited`] waits `base * 2^failures` (capped) per key until
//!   [`WorkQueue::forget`] resets the count.
//!
//! Controllers whose keys may outlive the object (a Service being deleted still needs its
//! Endpoints removed; a garbage-collector node is keyed by uid) use this instead of
//! [`crate::controller`], which only reconciles objects present in its store.

use crate::backoff::Backoff;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

struct State<K> {
    queue: VecDeque<K>,
    /// Keys queued (or to be queued once done) and not yet handed out.
    dirty: HashSet<K>,
    processing: HashSet<K>,
    /// Delayed keys: earliest due time per key, and the same ordered by time.
    waiting: HashMap<K, (Instant, u64)>,
    by_time: BTreeMap<(Instant, u64), K>,
    seq: u64,
    failures: HashMap<K, u32>,
    shut_down: bool,
}

/// See the module documentation.
pub struct WorkQueue<K> {
    state: Mutex<State<K>>,
    notify: Notify,
    backoff: Backoff,
}

impl<K: Clone + Eq + Hash + Send> WorkQueue<K> {
    pub fn new(backoff: Backoff) -> WorkQueue<K> {
        WorkQueue {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                dirty: HashSet::new(),
                processing: HashSet::new(),
                waiting: HashMap::new(),
                by_time: BTreeMap::new(),
                seq: 0,
                failures: HashMap::new(),
                shut_down: false,
            }),
            notify: Notify::new(),
            backoff,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<K>> {
        // A worker that panicked while holding the lock leaves consistent data behind: every
        // critical section below is a handful of collection operations.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn add_locked(st: &mut State<K>, key: K) -> bool {
        if st.shut_down || st.dirty.contains(&key) {
            return false;
        }
        st.dirty.insert(key.clone());
        if st.processing.contains(&key) {
            return false;
        }
        st.queue.push_back(key);
        true
    }

    /// Queues `key` now (a no-op if it is already queued).
    pub fn add(&self, key: K) {
        let woke = {
            let mut st = self.lock();
            Self::add_locked(&mut st, key)
        };
        if woke {
            self.notify.notify_waiters();
        }
    }

    /// Queues `key` after `delay`; an earlier pending time for the same key wins.
    pub fn add_after(&self, key: K, delay: Duration) {
        if delay.is_zero() {
            return self.add(key);
        }
        let due = Instant::now() + delay;
        {
            let mut st = self.lock();
            if st.shut_down {
                return;
            }
            if let Some(&(at, seq)) = st.waiting.get(&key) {
                if at <= due {
                    return;
                }
                st.by_time.remove(&(at, seq));
            }
            st.seq += 1;
            let seq = st.seq;
            st.waiting.insert(key.clone(), (due, seq));
            st.by_time.insert((due, seq), key);
        }
        // A worker may be sleeping until a later time.
        self.notify.notify_waiters();
    }

    /// Queues `key` after its back-off delay and counts one more failure.
    pub fn add_rate_limited(&self, key: K) {
        let failures = {
            let mut st = self.lock();
            let n = st.failures.entry(key.clone()).or_insert(0);
            let before = *n;
            *n = n.saturating_add(1);
            before
        };
        self.add_after(key, self.backoff.delay(failures));
    }

    /// Resets the failure count of `key`.
    pub fn forget(&self, key: &K) {
        self.lock().failures.remove(key);
    }

    /// How many times `key` failed since it was last forgotten.
    pub fn failures(&self, key: &K) -> u32 {
        self.lock().failures.get(key).copied().unwrap_or(0)
    }

    /// Waits for the next key; `None` once the queue is shut down.
    pub async fn get(&self) -> Option<K> {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let next_due = {
                let mut st = self.lock();
                let now = Instant::now();
                while let Some((&(at, seq), _)) = st.by_time.first_key_value() {
                    if at > now {
                        break;
                    }
                    if let Some(key) = st.by_time.remove(&(at, seq)) {
                        st.waiting.remove(&key);
                        Self::add_locked(&mut st, key);
                    }
                }
                if let Some(key) = st.queue.pop_front() {
                    st.dirty.remove(&key);
                    st.processing.insert(key.clone());
                    return Some(key);
                }
                if st.shut_down {
                    return None;
                }
                st.by_time.first_key_value().map(|(&(at, _), _)| at)
            };
            match next_due {
                Some(at) => {
                    tokio::select! {
                        _ = &mut notified => {}
                        _ = tokio::time::sleep_until(at) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// Marks `key` processed; if it was added meanwhile it is queued again.
    pub fn done(&self, key: &K) {
        let woke = {
            let mut st = self.lock();
            st.processing.remove(key);
            if st.dirty.contains(key) && !st.shut_down {
                st.queue.push_back(key.clone());
                true
            } else {
                false
            }
        };
        if woke {
            self.notify.notify_waiters();
        }
    }

    /// Stops handing out keys: every pending and future `get` returns `None`.
    pub fn shut_down(&self) {
        {
            let mut st = self.lock();
            st.shut_down = true;
            st.queue.clear();
            st.dirty.clear();
            st.waiting.clear();
            st.by_time.clear();
        }
        self.notify.notify_waiters();
    }

    /// Keys ready to be handed out now.
    pub fn len(&self) -> usize {
        self.lock().queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn queue() -> WorkQueue<&'static str> {
        WorkQueue::new(Backoff { base: Duration::from_millis(10), max: Duration::from_millis(80) })
    }

    #[tokio::test]
    async fn a_key_added_twice_is_handed_out_once() {
        let q = queue();
        q.add("a");
        q.add("a");
        q.add("b");
        assert_eq!(q.get().await, Some("a"));
        assert_eq!(q.get().await, Some("b"));
        assert!(q.is_empty());
    }

    #[tokio::test]
    async fn a_key_added_while_processing_comes_back_after_done() {
        let q = queue();
        q.add("a");
        let k = q.get().await.expect("key");
        q.add("a");
        assert!(q.is_empty(), "must not be handed to a second worker while processing");
        q.done(&k);
        assert_eq!(q.len(), 1);
        assert_eq!(q.get().await, Some("a"));
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_delivers_at_the_earliest_requested_time() {
        let q = Arc::new(queue());
        let start = Instant::now();
        q.add_after("a", Duration::from_secs(10));
        q.add_after("a", Duration::from_secs(2));
        q.add_after("a", Duration::from_secs(5));
        assert_eq!(q.get().await, Some("a"));
        let waited = start.elapsed();
        assert!(waited >= Duration::from_secs(2) && waited < Duration::from_secs(3), "{waited:?}");
        q.done(&"a");
        // The superseded later times were dropped: nothing else arrives.
        let more = tokio::time::timeout(Duration::from_secs(20), q.get()).await;
        assert!(more.is_err(), "unexpected second delivery");
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_worker_wakes_for_a_shorter_delay_added_later() {
        let q = Arc::new(queue());
        q.add_after("slow", Duration::from_secs(60));
        let q2 = q.clone();
        let worker = tokio::spawn(async move { q2.get().await });
        tokio::task::yield_now().await;
        let start = Instant::now();
        q.add_after("fast", Duration::from_secs(1));
        assert_eq!(worker.await.expect("join"), Some("fast"));
        assert!(start.elapsed() < Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn rate_limited_requeues_back_off_until_forgotten() {
        let q = queue();
        let start = Instant::now();
        q.add_rate_limited("a");
        assert_eq!(q.get().await, Some("a"));
        q.done(&"a");
        assert!(start.elapsed() >= Duration::from_millis(10));
        let second = Instant::now();
        q.add_rate_limited("a");
        assert_eq!(q.get().await, Some("a"));
        q.done(&"a");
        assert!(second.elapsed() >= Duration::from_millis(20));
        assert_eq!(q.failures(&"a"), 2);
        q.forget(&"a");
        assert_eq!(q.failures(&"a"), 0);
    }

    #[tokio::test]
    async fn shut_down_releases_waiting_workers() {
        let q = Arc::new(queue());
        let q2 = q.clone();
        let worker = tokio::spawn(async move { q2.get().await });
        tokio::task::yield_now().await;
        q.shut_down();
        assert_eq!(worker.await.expect("join"), None);
        q.add("late");
        assert_eq!(q.get().await, None);
    }
}
