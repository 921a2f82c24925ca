//! Exponential back-off for restarts and image pulls, as upstream's kubelet keys it: the first
//! retry is immediate, then 10 s doubling to 5 min, measured from when the thing last failed;
//! an entry idle for twice the maximum starts over.

use std::collections::HashMap;
use std::time::Duration;
use tokio::time::Instant;

pub const INITIAL: Duration = Duration::from_secs(10);
pub const MAX: Duration = Duration::from_secs(300);

#[derive(Default, Debug)]
pub struct Backoff {
    entries: HashMap<String, (Duration, Instant)>,
}

impl Backoff {
    /// Whether `key`, which last failed at `failed_at`, must still wait at `now`.
    pub fn in_backoff_since(&self, key: &str, failed_at: Instant, now: Instant) -> bool {
        self.entries.get(key).is_some_and(|(d, _)| now.duration_since(failed_at) < *d)
    }

    /// The current delay of `key` (zero when it has none).
    pub fn delay(&self, key: &str) -> Duration {
        self.entries.get(key).map(|(d, _)| *d).unwrap_or_default()
    }

    /// Records an attempt: the next failure will have to wait longer.
    pub fn next(&mut self, key: &str, now: Instant) {
        let d = match self.entries.get(key) {
            Some((d, last)) if now.duration_since(*last) <= MAX * 2 => (*d * 2).min(MAX),
            _ => INITIAL,
        };
        self.entries.insert(key.to_string(), (d, now));
    }

    pub fn forget(&mut self, key: &str) {
        self.entries.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_retry_is_immediate_then_doubles_to_five_minutes() {
        let mut b = Backoff::default();
        let t0 = Instant::now();
        assert!(!b.in_backoff_since("c", t0, t0));
        b.next("c", t0);
        assert_eq!(b.delay("c"), INITIAL);
        assert!(b.in_backoff_since("c", t0, t0 + Duration::from_secs(5)));
        assert!(!b.in_backoff_since("c", t0, t0 + Duration::from_secs(11)));
        let mut t = t0;
        for _ in 0..10 {
            t += Duration::from_secs(1);
            b.next("c", t);
        }
        assert_eq!(b.delay("c"), MAX);
        b.next("c", t + MAX * 3);
        assert_eq!(b.delay("c"), INITIAL);
    }
}
