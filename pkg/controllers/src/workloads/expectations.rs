//! Controller expectations (upstream `ControllerExpectations` / `UIDTrackingControllerExpectations`):
//! after a controller creates or deletes pods it must not act on its (possibly stale) cache
//! until the informer has observed those changes, or it would create or delete twice.
//! Creations are counted; deletions are tracked by pod key. Expectations older than five
//! minutes are treated as satisfied, so a lost watch event cannot wedge an owner forever.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long expectations hold before they are considered satisfied anyway.
pub const EXPECTATIONS_TIMEOUT: Duration = Duration::from_secs(5 * 60);

#[derive(Debug, Default)]
struct Entry {
    adds: i64,
    deletes: HashSet<String>,
    /// Deletions counted without a key (Job counts both ways).
    delete_count: i64,
    set_at: Option<Instant>,
}

/// Expectations of every owner, keyed by `namespace/name`.
#[derive(Debug, Default)]
pub struct Expectations {
    entries: Mutex<HashMap<String, Entry>>,
}

impl Expectations {
    fn with<T>(&self, key: &str, f: impl FnOnce(&mut Entry) -> T) -> T {
        let mut m = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        f(m.entry(key.to_string()).or_default())
    }

    /// Whether the owner may act on its cache at `now`.
    pub fn satisfied_at(&self, key: &str, now: Instant) -> bool {
        let m = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        match m.get(key) {
            None => true,
            Some(e) => {
                (e.adds <= 0 && e.deletes.is_empty() && e.delete_count <= 0)
                    || e.set_at.is_some_and(|t| now.saturating_duration_since(t) > EXPECTATIONS_TIMEOUT)
            }
        }
    }

    /// Whether the owner may act on its cache now.
    pub fn satisfied(&self, key: &str) -> bool {
        self.satisfied_at(key, Instant::now())
    }

    /// Expects `n` pod creations to be observed (replaces earlier expectations, like upstream).
    pub fn expect_creations(&self, key: &str, n: usize) {
        self.with(key, |e| {
            e.adds = i64::try_from(n).unwrap_or(i64::MAX);
            e.delete_count = 0;
            e.deletes.clear();
            e.set_at = Some(Instant::now());
        });
    }

    /// Expects the deletion of these pods (by `namespace/name`) to be observed.
    pub fn expect_deletions(&self, key: &str, pod_keys: impl IntoIterator<Item = String>) {
        self.with(key, |e| {
            e.adds = 0;
            e.delete_count = 0;
            e.deletes = pod_keys.into_iter().collect();
            e.set_at = Some(Instant::now());
        });
    }

    /// Expects `n` deletions without tracking which pods.
    pub fn expect_deletion_count(&self, key: &str, n: usize) {
        self.with(key, |e| {
            e.adds = 0;
            e.deletes.clear();
            e.delete_count = i64::try_from(n).unwrap_or(i64::MAX);
            e.set_at = Some(Instant::now());
        });
    }

    /// A pod of this owner appeared (or a creation failed and will never appear).
    pub fn creation_observed(&self, key: &str) {
        self.with(key, |e| e.adds -= 1);
    }

    /// A pod of this owner went away or got a deletion timestamp (or its deletion failed).
    pub fn deletion_observed(&self, key: &str, pod_key: &str) {
        self.with(key, |e| {
            if !e.deletes.remove(pod_key) {
                e.delete_count -= 1;
            }
        });
    }

    /// Forgets the owner (it was deleted).
    pub fn forget(&self, key: &str) {
        let mut m = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        m.remove(key);
    }
}

/// `namespace/name`.
pub fn key(namespace: Option<&str>, name: &str) -> String {
    format!("{}/{}", namespace.unwrap_or_default(), name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_owner_is_satisfied() {
        assert!(Expectations::default().satisfied("ns/a"));
    }

    #[test]
    fn creations_must_all_be_observed() {
        let e = Expectations::default();
        e.expect_creations("ns/a", 2);
        assert!(!e.satisfied("ns/a"));
        e.creation_observed("ns/a");
        assert!(!e.satisfied("ns/a"));
        e.creation_observed("ns/a");
        assert!(e.satisfied("ns/a"));
    }

    #[test]
    fn deletions_are_tracked_by_pod_key_and_repeats_do_not_count_twice() {
        let e = Expectations::default();
        e.expect_deletions("ns/a", ["ns/p1".to_string(), "ns/p2".to_string()]);
        e.deletion_observed("ns/a", "ns/p1");
        e.deletion_observed("ns/a", "ns/p1");
        assert!(!e.satisfied("ns/a"));
        e.deletion_observed("ns/a", "ns/p2");
        assert!(e.satisfied("ns/a"));
    }

    #[test]
    fn expectations_expire_after_five_minutes() {
        let e = Expectations::default();
        e.expect_creations("ns/a", 1);
        let later = Instant::now() + EXPECTATIONS_TIMEOUT + Duration::from_secs(1);
        assert!(!e.satisfied_at("ns/a", Instant::now()));
        assert!(e.satisfied_at("ns/a", later));
    }

    #[test]
    fn forgetting_an_owner_clears_its_expectations() {
        let e = Expectations::default();
        e.expect_creations("ns/a", 3);
        e.forget("ns/a");
        assert!(e.satisfied("ns/a"));
    }
}
