//! Per-key exponential back-off, client-go's default controller rate limiter: the delay after
//! `n` earlier failures of a key is `base * 2^n`, capped, until a success forgets the key.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

/// Exponential back-off: `base * 2^failures`, at most `max`.
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    pub base: Duration,
    pub max: Duration,
}

impl Backoff {
    /// client-go's default controller rate limiter: 5 ms doubling up to 1000 s.
    pub const DEFAULT: Backoff = Backoff { base: Duration::from_millis(5), max: Duration::from_secs(1000) };

    /// The delay after `failures` earlier failures.
    pub fn delay(&self, failures: u32) -> Duration {
        let factor = 2u32.checked_pow(failures.min(31)).unwrap_or(u32::MAX);
        self.base.checked_mul(factor).map_or(self.max, |d| d.min(self.max))
    }
}

/// Per-key failure counts turned into back-off delays, for reconcile loops whose error policy
/// gets no failure count of its own.
pub struct Failures<Q = String> {
    backoff: Backoff,
    counts: Mutex<HashMap<Q, u32>>,
}

impl<Q: Eq + Hash + Clone> Failures<Q> {
    pub fn new(backoff: Backoff) -> Failures<Q> {
        Failures { backoff, counts: Mutex::default() }
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, HashMap<Q, u32>> {
        // A panic while holding the lock leaves a consistent map behind (one insert or remove).
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts a failure of `key`; returns how many times it failed so far (this one included)
    /// and how long to wait before retrying it.
    pub fn failed_with_count(&self, key: &Q) -> (u32, Duration) {
        let mut counts = self.counts();
        let n = counts.entry(key.clone()).or_insert(0);
        let delay = self.backoff.delay(*n);
        *n = n.saturating_add(1);
        (*n, delay)
    }

    /// Counts a failure of `key`; returns how long to wait before retrying it.
    pub fn failed(&self, key: &Q) -> Duration {
        self.failed_with_count(key).1
    }

    /// Forgets the failures of `key`.
    pub fn succeeded(&self, key: &Q) {
        self.counts().remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let b = Backoff { base: Duration::from_millis(5), max: Duration::from_secs(1) };
        assert_eq!(b.delay(0), Duration::from_millis(5));
        assert_eq!(b.delay(1), Duration::from_millis(10));
        assert_eq!(b.delay(3), Duration::from_millis(40));
        assert_eq!(b.delay(20), Duration::from_secs(1));
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(1));
    }

    #[test]
    fn default_backoff_doubles_from_five_milliseconds_up_to_1000_seconds() {
        let b = Backoff::DEFAULT;
        assert_eq!(b.delay(0), Duration::from_millis(5));
        assert_eq!(b.delay(1), Duration::from_millis(10));
        assert_eq!(b.delay(4), Duration::from_millis(80));
        assert_eq!(b.delay(39), Duration::from_secs(1000));
    }

    #[test]
    fn failures_back_off_per_key_until_success() {
        let f = Failures::new(Backoff { base: Duration::from_millis(5), max: Duration::from_secs(1) });
        assert_eq!(f.failed(&"a".to_string()), Duration::from_millis(5));
        assert_eq!(f.failed_with_count(&"a".to_string()), (2, Duration::from_millis(10)));
        assert_eq!(f.failed(&"b".to_string()), Duration::from_millis(5));
        f.succeeded(&"a".to_string());
        assert_eq!(f.failed(&"a".to_string()), Duration::from_millis(5));
    }
}
