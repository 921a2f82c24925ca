//! From the replicas the metrics ask for to the replicas set: upstream's stabilization and rate
//! limits (`normalizeDesiredReplicas` and `normalizeDesiredReplicasWithBehaviors` in
//! `pkg/controller/podautoscaler/horizontal.go`).
//!
//! Without `spec.behavior`: a scale-down takes the highest recommendation of the last 5 minutes,
//! and a scale-up goes at most to twice the current count (at least 4). With it: each direction
//! has its stabilization window (the lowest recent recommendation for going up, the highest for
//! going down) and its policies, which bound the change within their periods by the scale
//! events already made there.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::autoscaling::v2::HPAScalingRules;

/// Upstream's `--horizontal-pod-autoscaler-downscale-stabilization`.
pub const DOWNSCALE_STABILIZATION: SignedDuration = SignedDuration::from_mins(5);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recommendation {
    pub at: Timestamp,
    pub replicas: i32,
}

/// A change the controller made to the target's scale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScaleEvent {
    pub at: Timestamp,
    pub change: i32,
}

/// A condition's status, reason and message, as the normalization sets it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub replicas: i32,
    pub reason: &'static str,
    pub message: &'static str,
}

/// What the HPA's `AbleToScale` and `ScalingLimited` conditions say after a normalization.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Normalized {
    pub replicas: i32,
    /// `AbleToScale` (True): why the stabilized recommendation is what it is.
    pub stabilized: (&'static str, &'static str),
    /// `ScalingLimited`: true when a limit changed the stabilized recommendation.
    pub limited: bool,
    pub limit: (&'static str, &'static str),
}

const READY: (&str, &str) = ("ReadyForNewScale", "recommended size matches current size");
const DOWN_STABILIZED: (&str, &str) = (
    "ScaleDownStabilized",
    "recent recommendations were higher than current one, applying the highest recent recommendation",
);
const UP_STABILIZED: (&str, &str) = (
    "ScaleUpStabilized",
    "recent recommendations were lower than current one, applying the lowest recent recommendation",
);
const WITHIN: (&str, &str) = ("DesiredWithinRange", "the desired count is within the acceptable range");
const UP_LIMIT: (&str, &str) =
    ("ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate");
const DOWN_LIMIT: (&str, &str) =
    ("ScaleDownLimit", "the desired replica count is decreasing faster than the maximum scale rate");
const TOO_MANY: (&str, &str) = ("TooManyReplicas", "the desired replica count is more than the maximum replica count");
const TOO_FEW: (&str, &str) = ("TooFewReplicas", "the desired replica count is less than the minimum replica count");

/// Keeps `recs` to the last `keep` and adds the new recommendation.
fn remember(recs: &mut Vec<Recommendation>, now: Timestamp, replicas: i32, keep: SignedDuration) {
    recs.retain(|r| r.at > now - keep);
    recs.push(Recommendation { at: now, replicas });
}

/// Without `spec.behavior`.
pub fn normalize(
    recs: &mut Vec<Recommendation>,
    now: Timestamp,
    current: i32,
    desired: i32,
    min: i32,
    max: i32,
) -> Normalized {
    let cutoff = now - DOWNSCALE_STABILIZATION;
    let stabilized = recs.iter().filter(|r| r.at > cutoff).map(|r| r.replicas).fold(desired, i32::max);
    remember(recs, now, desired, DOWNSCALE_STABILIZATION);
    let why = if stabilized != desired { DOWN_STABILIZED } else { READY };
    let scale_up_limit = (2 * current).max(4);
    let (upper, upper_why) = if max > scale_up_limit { (scale_up_limit, UP_LIMIT) } else { (max, TOO_MANY) };
    let (replicas, limit) = if stabilized < min {
        (min, TOO_FEW)
    } else if stabilized > upper {
        (upper, upper_why)
    } else {
        (stabilized, WITHIN)
    };
    Normalized { replicas, stabilized: why, limited: replicas != stabilized, limit }
}

/// The rules of a direction, with `spec.behavior` (defaulted by the API server).
pub struct Rules<'a> {
    pub up: &'a HPAScalingRules,
    pub down: &'a HPAScalingRules,
}

fn window(r: &HPAScalingRules, fallback: SignedDuration) -> SignedDuration {
    r.stabilization_window_seconds.map_or(fallback, |s| SignedDuration::from_secs(i64::from(s)))
}

/// Replicas changed within the last `period_seconds`.
fn changed_within(period_seconds: i32, events: &[ScaleEvent], now: Timestamp) -> i32 {
    let cutoff = now - SignedDuration::from_secs(i64::from(period_seconds));
    events.iter().filter(|e| e.at > cutoff).map(|e| e.change).sum()
}

fn select(r: &HPAScalingRules) -> &str {
    r.select_policy.as_deref().unwrap_or("Max")
}

/// The bound `r`'s policies put on a change of `current` (upstream's
/// `calculateScaleUpLimitWithScalingRules` going `up`, `calculateScaleDownLimitWithBehaviors`
/// going down): each policy proposes a count from the replicas at the start of its period (the
/// current count less what the events within it changed); `Max` takes the largest change,
/// `Min` the smallest, `Disabled` allows none.
fn policy_limit(
    current: i32,
    up: &[ScaleEvent],
    down: &[ScaleEvent],
    r: &HPAScalingRules,
    now: Timestamp,
    going_up: bool,
) -> i32 {
    let largest_change = match select(r) {
        "Disabled" => return current,
        "Min" => false,
        _ => true,
    };
    // The largest change is the highest count going up and the lowest going down.
    let highest = largest_change == going_up;
    let mut result = if highest { i32::MIN } else { i32::MAX };
    for p in r.policies.iter().flatten() {
        let start = current - changed_within(p.period_seconds, up, now) + changed_within(p.period_seconds, down, now);
        let (start_f, value) = (f64::from(start), f64::from(p.value));
        let proposed = match (p.type_.as_str(), going_up) {
            ("Pods", true) => start + p.value,
            ("Pods", false) => start - p.value,
            // Rounded up going up, or a small count would never grow.
            (_, true) => (start_f * (1.0 + value / 100.0)).ceil() as i32,
            (_, false) => (start_f * (1.0 - value / 100.0)) as i32,
        };
        result = if highest { result.max(proposed) } else { result.min(proposed) };
    }
    result
}

pub fn scale_up_limit(
    current: i32,
    up: &[ScaleEvent],
    down: &[ScaleEvent],
    r: &HPAScalingRules,
    now: Timestamp,
) -> i32 {
    policy_limit(current, up, down, r, now, true)
}

pub fn scale_down_limit(
    current: i32,
    up: &[ScaleEvent],
    down: &[ScaleEvent],
    r: &HPAScalingRules,
    now: Timestamp,
) -> i32 {
    policy_limit(current, up, down, r, now, false)
}

/// The longest policy period of `r`: how long its scale events matter.
pub fn longest_period(r: &HPAScalingRules) -> SignedDuration {
    let secs = r.policies.iter().flatten().map(|p| p.period_seconds).max().unwrap_or(0);
    SignedDuration::from_secs(i64::from(secs))
}

/// With `spec.behavior`.
#[allow(clippy::too_many_arguments)]
pub fn normalize_with_behavior(
    recs: &mut Vec<Recommendation>,
    up_events: &[ScaleEvent],
    down_events: &[ScaleEvent],
    rules: Rules<'_>,
    now: Timestamp,
    current: i32,
    desired: i32,
    min: i32,
    max: i32,
) -> Normalized {
    let (up_window, down_window) =
        (window(rules.up, SignedDuration::ZERO), window(rules.down, DOWNSCALE_STABILIZATION));
    let (mut up, mut down) = (desired, desired);
    for r in recs.iter() {
        if r.at > now - up_window {
            up = up.min(r.replicas);
        }
        if r.at > now - down_window {
            down = down.max(r.replicas);
        }
    }
    let stabilized = current.max(up).min(down);
    remember(recs, now, desired, up_window.max(down_window));
    let why = match stabilized.cmp(&desired) {
        std::cmp::Ordering::Equal => READY,
        std::cmp::Ordering::Greater => DOWN_STABILIZED,
        std::cmp::Ordering::Less => UP_STABILIZED,
    };
    let (replicas, limit) = if stabilized > current {
        let limit = scale_up_limit(current, up_events, down_events, rules.up, now).max(current);
        let (allowed, allowed_why) = if max > limit { (limit, UP_LIMIT) } else { (max, TOO_MANY) };
        if stabilized > allowed {
            (allowed, allowed_why)
        } else {
            (stabilized, WITHIN)
        }
    } else if stabilized < current {
        let limit = scale_down_limit(current, up_events, down_events, rules.down, now).min(current);
        let (allowed, allowed_why) = if min < limit { (limit, DOWN_LIMIT) } else { (min, TOO_FEW) };
        if stabilized < allowed {
            (allowed, allowed_why)
        } else {
            (stabilized, WITHIN)
        }
    } else {
        (stabilized, WITHIN)
    };
    Normalized { replicas, stabilized: why, limited: replicas != stabilized, limit }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::autoscaling::v2::HPAScalingPolicy;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).expect("time")
    }

    fn rules(window: Option<i32>, policies: &[(&str, i32, i32)], select: &str) -> HPAScalingRules {
        HPAScalingRules {
            stabilization_window_seconds: window,
            select_policy: Some(select.into()),
            policies: Some(
                policies
                    .iter()
                    .map(|(ty, value, period)| HPAScalingPolicy {
                        type_: ty.to_string(),
                        value: *value,
                        period_seconds: *period,
                    })
                    .collect(),
            ),
            tolerance: None,
        }
    }

    fn default_up() -> HPAScalingRules {
        rules(Some(0), &[("Pods", 4, 15), ("Percent", 100, 15)], "Max")
    }

    fn default_down() -> HPAScalingRules {
        rules(None, &[("Percent", 100, 15)], "Max")
    }

    #[test]
    fn without_behavior_scale_down_waits_for_the_highest_recent_recommendation() {
        let mut recs = vec![Recommendation { at: t(0), replicas: 5 }];
        let n = normalize(&mut recs, t(60), 5, 2, 1, 10);
        assert_eq!(n.replicas, 5);
        assert_eq!(n.stabilized.0, "ScaleDownStabilized");
        // Five minutes after the last high recommendation, the low ones win.
        let n = normalize(&mut recs, t(301), 5, 2, 1, 10);
        assert_eq!((n.replicas, n.stabilized.0, n.limited), (2, "ReadyForNewScale", false));
    }

    #[test]
    fn without_behavior_scale_up_is_at_most_double_or_four_and_within_max() {
        let mut recs = Vec::new();
        assert_eq!(normalize(&mut recs, t(0), 1, 20, 1, 10).replicas, 4);
        assert_eq!(normalize(&mut recs, t(0), 1, 20, 1, 10).limit.0, "ScaleUpLimit");
        let n = normalize(&mut recs, t(0), 3, 20, 1, 5);
        assert_eq!((n.replicas, n.limit.0, n.limited), (5, "TooManyReplicas", true));
        let n = normalize(&mut Vec::new(), t(0), 3, 0, 2, 5);
        assert_eq!((n.replicas, n.limit.0), (2, "TooFewReplicas"));
    }

    #[test]
    fn default_behavior_adds_four_pods_or_doubles_per_period() {
        let (up, down) = (default_up(), default_down());
        assert_eq!(scale_up_limit(1, &[], &[], &up, t(0)), 5);
        assert_eq!(scale_up_limit(10, &[], &[], &up, t(0)), 20);
        // Having gone 2 → 4 within the period, the period started at 2.
        let events = [ScaleEvent { at: t(-5), change: 2 }];
        assert_eq!(scale_up_limit(4, &events, &[], &up, t(0)), 6);
        let n = normalize_with_behavior(&mut Vec::new(), &[], &[], Rules { up: &up, down: &down }, t(0), 1, 9, 1, 20);
        assert_eq!((n.replicas, n.limit.0, n.limited), (5, "ScaleUpLimit", true));
    }

    #[test]
    fn a_zero_scale_down_window_scales_down_at_once_within_the_policies() {
        let up = default_up();
        let down = rules(Some(0), &[("Pods", 1, 60)], "Max");
        let mut recs = vec![Recommendation { at: t(-10), replicas: 5 }];
        let n = normalize_with_behavior(&mut recs, &[], &[], Rules { up: &up, down: &down }, t(0), 5, 1, 1, 5);
        assert_eq!((n.replicas, n.stabilized.0, n.limit.0), (4, "ReadyForNewScale", "ScaleDownLimit"));
        // One pod removed within the minute: the period started at 5, so 4 is the floor still.
        let down_events = [ScaleEvent { at: t(-10), change: 1 }];
        let n = normalize_with_behavior(&mut recs, &[], &down_events, Rules { up: &up, down: &down }, t(0), 4, 1, 1, 5);
        assert_eq!(n.replicas, 4);
        let disabled = rules(Some(0), &[("Pods", 1, 60)], "Disabled");
        assert_eq!(scale_down_limit(4, &[], &[], &disabled, t(0)), 4);
    }

    #[test]
    fn a_scale_up_window_takes_the_lowest_recent_recommendation() {
        let up = rules(Some(60), &[("Percent", 100, 15)], "Max");
        let down = default_down();
        let mut recs = vec![Recommendation { at: t(-30), replicas: 3 }];
        let n = normalize_with_behavior(&mut recs, &[], &[], Rules { up: &up, down: &down }, t(0), 2, 8, 1, 10);
        assert_eq!((n.replicas, n.stabilized.0), (3, "ScaleUpStabilized"));
    }

    #[test]
    fn the_longest_period_bounds_how_long_events_are_kept() {
        assert_eq!(
            longest_period(&rules(None, &[("Pods", 1, 60), ("Percent", 10, 600)], "Min")),
            SignedDuration::from_secs(600)
        );
    }
}
