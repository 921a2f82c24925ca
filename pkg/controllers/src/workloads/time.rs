//! Time as the controllers use it: `now` is passed into every decision function (so tests pick
//! it), and API `Time` values carry whole seconds, like the API server stores them, so that a
//! freshly computed status compares equal to the stored one.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use std::time::Duration;

/// `t` without its sub-second part.
pub fn truncate(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

/// An API `Time` at second precision.
pub fn api_time(t: Timestamp) -> Time {
    Time(truncate(t))
}

/// `later - earlier` (negative when `later` is before `earlier`).
pub fn between(earlier: Timestamp, later: Timestamp) -> SignedDuration {
    later.duration_since(earlier)
}

/// `t + secs` seconds.
pub fn add_secs(t: Timestamp, secs: i64) -> Timestamp {
    t.checked_add(SignedDuration::from_secs(secs)).unwrap_or(t)
}

/// A non-negative std duration (negative durations become zero).
pub fn to_std(d: SignedDuration) -> Duration {
    Duration::try_from(d).unwrap_or(Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_time_drops_sub_seconds() {
        let t: Timestamp = "2024-05-01T10:00:00.75Z".parse().expect("timestamp");
        assert_eq!(api_time(t).0.to_string(), "2024-05-01T10:00:00Z");
    }

    #[test]
    fn negative_durations_become_zero() {
        let a: Timestamp = "2024-05-01T10:00:10Z".parse().expect("timestamp");
        let b: Timestamp = "2024-05-01T10:00:00Z".parse().expect("timestamp");
        assert_eq!(to_std(between(a, b)), Duration::ZERO);
        assert_eq!(to_std(between(b, a)), Duration::from_secs(10));
    }
}
