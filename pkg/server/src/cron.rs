//! Five-field cron schedules (`minute hour day-of-month month day-of-week`), evaluated in UTC,
//! for scheduled snapshots.
//!
//! Fields take `*`, numbers, ranges `a-b`, steps `*/n` `a-b/n` `a/n`, and comma lists; day of
//! week is 0–7 (0 and 7 are Sunday). As in Vixie cron, when both day fields are restricted a day
//! matching either one fires. The `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`,
//! `@midnight` and `@hourly` shorthands are accepted. Month and weekday names are not.

use std::fmt;
use std::str::FromStr;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    text: String,
    minutes: u64,
    hours: u64,
    days: u64,
    months: u64,
    weekdays: u64,
    any_day: bool,
    any_weekday: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cron schedule {schedule:?}: {message}")]
pub struct CronError {
    pub schedule: String,
    pub message: String,
}

/// Parses one field into a bit set of the values in `min..=max`.
fn field(text: &str, min: u32, max: u32) -> Result<u64, String> {
    let mut bits = 0u64;
    for item in text.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((r, s)) => {
                let step: u32 = s.parse().map_err(|_| format!("bad step {s:?}"))?;
                if step == 0 {
                    return Err("a step of 0".into());
                }
                (r, step)
            }
            None => (item, 1),
        };
        let num = |s: &str| -> Result<u32, String> {
            let n: u32 = s.parse().map_err(|_| format!("bad value {s:?}"))?;
            if n < min || n > max {
                return Err(format!("{n} is outside {min}-{max}"));
            }
            Ok(n)
        };
        let (lo, hi) = if range == "*" {
            (min, max)
        } else if let Some((a, b)) = range.split_once('-') {
            let (a, b) = (num(a)?, num(b)?);
            if a > b {
                return Err(format!("range {range:?} goes backwards"));
            }
            (a, b)
        } else {
            let a = num(range)?;
            (a, if item.contains('/') { max } else { a })
        };
        let mut v = lo;
        while v <= hi {
            bits |= 1 << v;
            v += step;
        }
    }
    Ok(bits)
}

impl FromStr for Schedule {
    type Err = CronError;

    fn from_str(s: &str) -> Result<Schedule, CronError> {
        let err = |message: String| CronError { schedule: s.to_string(), message };
        let expanded = match s.trim() {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            other => other,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        let [minute, hour, day, month, weekday] = fields[..] else {
            return Err(err(format!("want 5 fields (minute hour day month weekday), got {}", fields.len())));
        };
        let mut weekdays = field(weekday, 0, 7).map_err(|m| err(format!("day of week: {m}")))?;
        if weekdays & (1 << 7) != 0 {
            weekdays = (weekdays & !(1 << 7)) | 1;
        }
        Ok(Schedule {
            text: s.to_string(),
            minutes: field(minute, 0, 59).map_err(|m| err(format!("minute: {m}")))?,
            hours: field(hour, 0, 23).map_err(|m| err(format!("hour: {m}")))?,
            days: field(day, 1, 31).map_err(|m| err(format!("day of month: {m}")))?,
            months: field(month, 1, 12).map_err(|m| err(format!("month: {m}")))?,
            weekdays,
            any_day: day == "*",
            any_weekday: weekday == "*",
        })
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Year, month (1–12) and day (1–31) of a day counted from 1970-01-01 (H. Hinnant's algorithm).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let month = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// `seconds` since the epoch as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn format_utc(seconds: u64) -> String {
    let secs = i64::try_from(seconds).unwrap_or(i64::MAX);
    let (y, mo, d) = civil(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!("{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}Z", s / 3600, s / 60 % 60, s % 60)
}

impl Schedule {
    fn day_matches(&self, days: i64) -> bool {
        let (_, month, day) = civil(days);
        // 1970-01-01 was a Thursday (4; Sunday is 0).
        let weekday = (days + 4).rem_euclid(7);
        if self.months & (1 << month) == 0 {
            return false;
        }
        let by_day = self.days & (1 << day) != 0;
        let by_weekday = self.weekdays & (1 << weekday) != 0;
        if self.any_day || self.any_weekday {
            by_day && by_weekday
        } else {
            by_day || by_weekday
        }
    }

    /// The first time the schedule fires strictly after `after` (seconds since the epoch), or
    /// `None` if it never does within five years (`0 0 31 2 *`).
    pub fn next_after(&self, after: u64) -> Option<u64> {
        let after = i64::try_from(after).ok()?;
        let start = (after.div_euclid(60) + 1) * 60;
        let first_day = start.div_euclid(86_400);
        for day in first_day..first_day + 5 * 366 {
            if !self.day_matches(day) {
                continue;
            }
            for hour in 0..24 {
                if self.hours & (1 << hour) == 0 {
                    continue;
                }
                for minute in 0..60 {
                    let t = day * 86_400 + hour * 3600 + minute * 60;
                    if self.minutes & (1 << minute) != 0 && t >= start {
                        return u64::try_from(t).ok();
                    }
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> u64 {
        // Seconds of a `YYYY-MM-DDTHH:MM` time, by search (the inverse of `format_utc`).
        let (mut lo, mut hi) = (0u64, 4_102_444_800u64);
        let want = format!("{s}:00Z");
        while lo < hi {
            let mid = (lo + hi) / 2;
            if format_utc(mid) < want {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    fn next(schedule: &str, from: &str) -> String {
        let s: Schedule = schedule.parse().expect("parse");
        format_utc(s.next_after(at(from)).expect("fires"))
    }

    #[test]
    fn default_schedule_fires_every_twelve_hours_on_the_hour() {
        assert_eq!(next("0 */12 * * *", "2026-12-03T22:31"), "2026-12-04T00:00:00Z");
        assert_eq!(next("0 */12 * * *", "2026-12-04T00:00"), "2026-12-04T12:00:00Z");
        assert_eq!(next("* * * * *", "2026-12-31T23:59"), "2027-01-01T00:00:00Z");
    }

    #[test]
    fn ranges_steps_lists_weekdays_and_shorthands() {
        // 2026-12-03 is a Thursday.
        assert_eq!(next("30 9 * * 1-5", "2026-12-04T10:00"), "2026-12-07T09:30:00Z");
        assert_eq!(next("0 0 * * 7", "2026-12-03T00:00"), "2026-12-06T00:00:00Z");
        assert_eq!(next("5,10 1 1 * *", "2026-12-03T00:00"), "2027-01-01T01:05:00Z");
        assert_eq!(next("0 0 29 2 *", "2026-12-03T00:00"), "2028-02-29T00:00:00Z");
        // Both day fields restricted: either fires (the 13th, or a Friday).
        assert_eq!(next("0 0 13 * 5", "2026-12-03T00:00"), "2026-12-04T00:00:00Z");
        assert_eq!(next("@daily", "2026-12-03T05:00"), "2026-12-04T00:00:00Z");
        assert_eq!(next("10/20 * * * *", "2026-12-03T05:31"), "2026-12-03T05:50:00Z");
    }

    #[test]
    fn bad_schedules_are_refused_with_the_field_named() {
        for (bad, want) in [
            ("* * * *", "want 5 fields"),
            ("60 * * * *", "minute: 60 is outside 0-59"),
            ("*/0 * * * *", "minute: a step of 0"),
            ("* * * * mon", "day of week: bad value"),
            ("* 5-2 * * *", "hour: range"),
        ] {
            let err = bad.parse::<Schedule>().expect_err(bad).to_string();
            assert!(err.contains(want), "{bad}: {err}");
        }
        assert_eq!("0 0 31 2 *".parse::<Schedule>().expect("parse").next_after(0), None);
    }
}
