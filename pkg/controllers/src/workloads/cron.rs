//! Cron schedules as CronJobs use them (`robfig/cron/v3` `ParseStandard`): five fields
//! (minute, hour, day of month, month, day of week) with lists, ranges, steps and month/day
//! names; the descriptors `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`,
//! `@midnight`, `@hourly` and `@every <duration>`; an optional `TZ=` or `CRON_TZ=` prefix.
//! When both day fields are restricted a day matches either; otherwise both must match.
//! Next times are computed in the schedule's zone, the same way the Go library walks the
//! calendar (including its DST corrections).

use jiff::civil::Date;
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp, ToSpan, Zoned};

/// Errors of parsing a schedule.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CronError {
    #[error("expected exactly 5 fields, found {found}: {spec}")]
    FieldCount { found: usize, spec: String },
    #[error("failed to parse {field} field {value:?}: {reason}")]
    Field { field: &'static str, value: String, reason: String },
    #[error("unrecognized descriptor: {0}")]
    Descriptor(String),
    #[error("provided bad location {name}: {reason}")]
    TimeZone { name: String, reason: String },
}

#[derive(Clone, Debug)]
enum Kind {
    Spec { minute: u64, hour: u64, dom: u64, month: u64, dow: u64, dom_star: bool, dow_star: bool },
    Every(SignedDuration),
}

/// A parsed schedule.
#[derive(Clone, Debug)]
pub struct Schedule {
    kind: Kind,
    /// `None`: the zone of the time passed to [`Schedule::next`].
    zone: Option<TimeZone>,
}

struct Bounds {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const MINUTES: Bounds = Bounds { name: "minute", min: 0, max: 59, names: &[] };
const HOURS: Bounds = Bounds { name: "hour", min: 0, max: 23, names: &[] };
const DOM: Bounds = Bounds { name: "day of month", min: 1, max: 31, names: &[] };
const MONTHS: Bounds = Bounds {
    name: "month",
    min: 1,
    max: 12,
    names: &["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"],
};
const DOW: Bounds =
    Bounds { name: "day of week", min: 0, max: 6, names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"] };

fn field_err(b: &Bounds, value: &str, reason: impl Into<String>) -> CronError {
    CronError::Field { field: b.name, value: value.to_string(), reason: reason.into() }
}

fn number_or_name(s: &str, b: &Bounds) -> Result<u32, CronError> {
    let lower = s.to_ascii_lowercase();
    if let Some(i) = b.names.iter().position(|n| *n == lower) {
        return Ok(u32::try_from(i).unwrap_or(0) + if b.min == 1 { 1 } else { 0 });
    }
    s.parse::<u32>().map_err(|_| field_err(b, s, "not a number"))
}

/// One comma-separated part: `*`, `?`, `N`, `N-M`, each optionally `/step`. Returns the bits
/// and whether it is an unrestricted star.
fn parse_range(expr: &str, b: &Bounds) -> Result<(u64, bool), CronError> {
    let (range, step) = match expr.split_once('/') {
        Some((r, s)) => (r, Some(s)),
        None => (expr, None),
    };
    let (mut start, mut end, mut star) = if range == "*" || range == "?" {
        (b.min, b.max, true)
    } else {
        match range.split_once('-') {
            Some((lo, hi)) => (number_or_name(lo, b)?, number_or_name(hi, b)?, false),
            None => {
                let v = number_or_name(range, b)?;
                (v, v, false)
            }
        }
    };
    let step = match step {
        None => 1,
        Some(s) => {
            let n: u32 = s.parse().map_err(|_| field_err(b, expr, "bad step"))?;
            if !range.contains('-') && !star {
                end = b.max;
            }
            if n > 1 {
                star = false;
            }
            n
        }
    };
    if range != "*" && range != "?" && start < b.min {
        return Err(field_err(b, expr, format!("beginning of range ({start}) below minimum ({})", b.min)));
    }
    if end > b.max {
        return Err(field_err(b, expr, format!("end of range ({end}) above maximum ({})", b.max)));
    }
    if start > end {
        return Err(field_err(b, expr, format!("beginning of range ({start}) beyond end of range ({end})")));
    }
    if step == 0 {
        return Err(field_err(b, expr, "step of range should be a positive number"));
    }
    let mut bits = 0u64;
    while start <= end {
        bits |= 1 << start;
        start += step;
    }
    Ok((bits, star))
}

fn parse_field(field: &str, b: &Bounds) -> Result<(u64, bool), CronError> {
    let mut bits = 0;
    let mut star = false;
    for part in field.split(',') {
        let (p, s) = parse_range(part, b)?;
        bits |= p;
        star |= s;
    }
    Ok((bits, star))
}

/// Go's `time.ParseDuration` for `@every`: a sequence of decimal numbers with units
/// `ns`, `us`/`µs`, `ms`, `s`, `m`, `h`.
fn parse_go_duration(s: &str) -> Option<SignedDuration> {
    let mut total = 0f64;
    let mut rest = s.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let num_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let value: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let nanos = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        total += value * nanos;
        rest = &rest[unit_len..];
    }
    Some(SignedDuration::from_nanos(total as i64))
}

/// Loads an IANA zone like Go's `time.LoadLocation` (`""` and `UTC` are UTC, `Local` the system zone).
pub fn load_zone(name: &str) -> Result<TimeZone, CronError> {
    match name {
        "" | "UTC" => Ok(TimeZone::UTC),
        "Local" => Ok(TimeZone::system()),
        _ => TimeZone::get(name).map_err(|e| CronError::TimeZone { name: name.to_string(), reason: e.to_string() }),
    }
}

/// Parses a standard cron spec.
pub fn parse(spec: &str) -> Result<Schedule, CronError> {
    let mut spec = spec.trim();
    let mut zone = None;
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        let (prefix, rest) = spec.split_once(char::is_whitespace).unwrap_or((spec, ""));
        let name = prefix.split_once('=').map(|(_, n)| n).unwrap_or_default();
        zone = Some(load_zone(name)?);
        spec = rest.trim();
    }
    let fields: String = if let Some(d) = spec.strip_prefix('@') {
        if let Some(every) = d.strip_prefix("every ") {
            let mut delay = parse_go_duration(every).ok_or_else(|| CronError::Descriptor(spec.to_string()))?;
            // robfig: at least one second, whole seconds.
            delay = SignedDuration::from_secs(delay.as_secs().max(1));
            return Ok(Schedule { kind: Kind::Every(delay), zone });
        }
        match d {
            "yearly" | "annually" => "0 0 1 1 *",
            "monthly" => "0 0 1 * *",
            "weekly" => "0 0 * * 0",
            "daily" | "midnight" => "0 0 * * *",
            "hourly" => "0 * * * *",
            _ => return Err(CronError::Descriptor(spec.to_string())),
        }
        .to_string()
    } else {
        spec.to_string()
    };
    let parts: Vec<&str> = fields.split_whitespace().collect();
    if parts.len() != 5 {
        return Err(CronError::FieldCount { found: parts.len(), spec: spec.to_string() });
    }
    let (minute, _) = parse_field(parts[0], &MINUTES)?;
    let (hour, _) = parse_field(parts[1], &HOURS)?;
    let (dom, dom_star) = parse_field(parts[2], &DOM)?;
    let (month, _) = parse_field(parts[3], &MONTHS)?;
    let (dow, dow_star) = parse_field(parts[4], &DOW)?;
    Ok(Schedule { kind: Kind::Spec { minute, hour, dom, month, dow, dom_star, dow_star }, zone })
}

fn bit(set: u64, v: impl Into<i64>) -> bool {
    let v = v.into();
    (0..64).contains(&v) && set & (1 << v) != 0
}

fn midnight(y: i16, m: i8, d: i8, tz: &TimeZone) -> Option<Zoned> {
    Date::new(y, m, d).ok()?.at(0, 0, 0, 0).to_zoned(tz.clone()).ok()
}

impl Schedule {
    /// The zone of the schedule, if it names one.
    pub fn zone(&self) -> Option<&TimeZone> {
        self.zone.as_ref()
    }

    /// The first activation strictly after `after`, evaluated in the schedule's zone or, if it
    /// has none, in `default_zone`. `None` if there is none within five years.
    pub fn next(&self, after: Timestamp, default_zone: &TimeZone) -> Option<Timestamp> {
        let tz = self.zone.clone().unwrap_or_else(|| default_zone.clone());
        let (minute, hour, dom, month, dow, dom_star, dow_star) = match &self.kind {
            Kind::Every(d) => {
                let sub = SignedDuration::from_nanos(i64::from(after.subsec_nanosecond()));
                return after.checked_add(*d - sub).ok();
            }
            Kind::Spec { minute, hour, dom, month, dow, dom_star, dow_star } => {
                (*minute, *hour, *dom, *month, *dow, *dom_star, *dow_star)
            }
        };
        let day_matches = |t: &Zoned| {
            let dm = bit(dom, t.day());
            let wm = bit(dow, t.weekday().to_sunday_zero_offset());
            if dom_star || dow_star {
                dm && wm
            } else {
                dm || wm
            }
        };
        // The upcoming whole second.
        let start = Timestamp::from_second(after.as_second().checked_add(1)?).ok()?;
        let mut t = start.to_zoned(tz.clone());
        let mut added = false;
        let year_limit = t.year() + 5;
        'wrap: loop {
            if t.year() > year_limit {
                return None;
            }
            while !bit(month, t.month()) {
                if !added {
                    added = true;
                    t = midnight(t.year(), t.month(), 1, &tz)?;
                }
                t = t.checked_add(1.month()).ok()?;
                if t.month() == 1 {
                    continue 'wrap;
                }
            }
            while !day_matches(&t) {
                if !added {
                    added = true;
                    t = midnight(t.year(), t.month(), t.day(), &tz)?;
                }
                t = t.checked_add(1.day()).ok()?;
                // DST: keep the walk at midnight.
                let h = i64::from(t.hour());
                if h != 0 {
                    let fix = if h > 12 { 24 - h } else { -h };
                    t = t.checked_add(SignedDuration::from_hours(fix)).ok()?;
                }
                if t.day() == 1 {
                    continue 'wrap;
                }
            }
            while !bit(hour, t.hour()) {
                if !added {
                    added = true;
                    t = t.with().minute(0).second(0).subsec_nanosecond(0).build().ok()?;
                }
                t = t.checked_add(SignedDuration::from_hours(1)).ok()?;
                if t.hour() == 0 {
                    continue 'wrap;
                }
            }
            while !bit(minute, t.minute()) {
                if !added {
                    added = true;
                    t = t.with().second(0).subsec_nanosecond(0).build().ok()?;
                }
                t = t.checked_add(SignedDuration::from_mins(1)).ok()?;
                if t.minute() == 0 {
                    continue 'wrap;
                }
            }
            // Seconds: the standard spec fires at second 0.
            while t.second() != 0 {
                if !added {
                    added = true;
                    t = t.with().subsec_nanosecond(0).build().ok()?;
                }
                t = t.checked_add(SignedDuration::from_secs(1)).ok()?;
                if t.second() == 0 {
                    continue 'wrap;
                }
            }
            return Some(t.timestamp());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    fn next(spec: &str, after: &str) -> String {
        parse(spec).expect("parse").next(ts(after), &TimeZone::UTC).expect("next").to_string()
    }

    #[test]
    fn every_minute_fires_at_the_next_whole_minute() {
        assert_eq!(next("* * * * *", "2024-05-01T10:00:00Z"), "2024-05-01T10:01:00Z");
        assert_eq!(next("* * * * *", "2024-05-01T10:00:30.5Z"), "2024-05-01T10:01:00Z");
    }

    #[test]
    fn steps_ranges_lists_and_names() {
        assert_eq!(next("*/15 * * * *", "2024-05-01T10:16:00Z"), "2024-05-01T10:30:00Z");
        assert_eq!(next("0 9-17/4 * * *", "2024-05-01T10:00:00Z"), "2024-05-01T13:00:00Z");
        assert_eq!(next("5,10 0 * * *", "2024-05-01T00:05:00Z"), "2024-05-01T00:10:00Z");
        assert_eq!(next("0 0 1 jan *", "2024-05-01T00:00:00Z"), "2025-01-01T00:00:00Z");
        // 2024-05-01 is a Wednesday.
        assert_eq!(next("0 12 * * MON", "2024-05-01T00:00:00Z"), "2024-05-06T12:00:00Z");
        assert_eq!(next("30 2/6 * * *", "2024-05-01T03:00:00Z"), "2024-05-01T08:30:00Z");
    }

    #[test]
    fn descriptors() {
        assert_eq!(next("@hourly", "2024-05-01T10:20:00Z"), "2024-05-01T11:00:00Z");
        assert_eq!(next("@daily", "2024-05-01T10:20:00Z"), "2024-05-02T00:00:00Z");
        assert_eq!(next("@weekly", "2024-05-01T10:20:00Z"), "2024-05-05T00:00:00Z");
        assert_eq!(next("@monthly", "2024-05-01T10:20:00Z"), "2024-06-01T00:00:00Z");
        assert_eq!(next("@yearly", "2024-05-01T10:20:00Z"), "2025-01-01T00:00:00Z");
        assert_eq!(next("@every 90s", "2024-05-01T10:20:00.25Z"), "2024-05-01T10:21:30Z");
    }

    #[test]
    fn restricted_day_of_month_and_week_match_either() {
        // The 13th, or any Friday: 2024-05-03 is a Friday.
        assert_eq!(next("0 0 13 * 5", "2024-05-01T00:00:00Z"), "2024-05-03T00:00:00Z");
        // With a star day-of-week, only the 13th.
        assert_eq!(next("0 0 13 * *", "2024-05-01T00:00:00Z"), "2024-05-13T00:00:00Z");
    }

    #[test]
    fn impossible_dates_have_no_next_time() {
        assert!(parse("0 0 31 2 *").expect("parse").next(ts("2024-01-01T00:00:00Z"), &TimeZone::UTC).is_none());
    }

    #[test]
    fn time_zones_from_prefix_shift_the_schedule() {
        // 09:00 in New York (EDT, UTC-4 in May).
        assert_eq!(next("CRON_TZ=America/New_York 0 9 * * *", "2024-05-01T00:00:00Z"), "2024-05-01T13:00:00Z");
        assert_eq!(next("TZ=UTC 0 9 * * *", "2024-05-01T00:00:00Z"), "2024-05-01T09:00:00Z");
        let s = parse("0 9 * * *").expect("parse");
        let ny = load_zone("America/New_York").expect("zone");
        assert_eq!(s.next(ts("2024-12-01T00:00:00Z"), &ny).expect("next").to_string(), "2024-12-01T14:00:00Z");
    }

    #[test]
    fn dst_gaps_are_skipped_like_robfig() {
        // 02:30 does not exist on 2024-03-10 in New York; the walk moves on to the next day.
        let s = parse("30 2 * * *").expect("parse");
        let ny = load_zone("America/New_York").expect("zone");
        let t = s.next(ts("2024-03-10T05:00:00Z"), &ny).expect("next");
        assert_eq!(t.to_string(), "2024-03-11T06:30:00Z");
    }

    #[test]
    fn bad_specs_are_rejected_with_the_field_named() {
        assert_eq!(parse("* * * *").map(|_| ()), Err(CronError::FieldCount { found: 4, spec: "* * * *".into() }));
        assert!(matches!(parse("61 * * * *"), Err(CronError::Field { field: "minute", .. })));
        assert!(matches!(parse("* * * * 7"), Err(CronError::Field { field: "day of week", .. })));
        assert!(matches!(parse("*/0 * * * *"), Err(CronError::Field { .. })));
        assert!(matches!(parse("@fortnightly"), Err(CronError::Descriptor(_))));
        assert!(matches!(parse("TZ=Mars/Olympus 0 * * * *"), Err(CronError::TimeZone { .. })));
    }
}
