//! Cron schedules as CronJobs use them (upstream's `robfig/cron/v3` `ParseStandard`): five
//! fields (minute, hour, day of month, month, day of week) with names, ranges, steps and `?`, or
//! the `@hourly`-style descriptors and `@every <duration>`. Errors carry robfig's messages, which
//! upstream returns verbatim as the field error detail.

use jiff::civil::{Date, DateTime, Time};
use jiff::ToSpan;

/// A schedule that did not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CronError(pub String);

/// A parsed schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// Bit sets per field; bit `n` set means value `n` is allowed.
    Fields { minute: u64, hour: u64, dom: u64, month: u64, dow: u64, dom_star: bool, dow_star: bool },
    /// `@every <duration>`, in whole seconds.
    Every(u64),
}

struct Bounds {
    min: u32,
    max: u32,
    names: &'static [&'static str],
    names_from: u32,
}

const MINUTE: Bounds = Bounds { min: 0, max: 59, names: &[], names_from: 0 };
const HOUR: Bounds = Bounds { min: 0, max: 23, names: &[], names_from: 0 };
const DOM: Bounds = Bounds { min: 1, max: 31, names: &[], names_from: 0 };
const MONTH: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"],
    names_from: 1,
};
const DOW: Bounds = Bounds { min: 0, max: 6, names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"], names_from: 0 };

fn err(msg: String) -> CronError {
    CronError(msg)
}

fn must_parse_int(expr: &str) -> Result<u32, CronError> {
    let n: i64 = expr.parse().map_err(|_| {
        err(format!("failed to parse int from {expr}: strconv.Atoi: parsing \"{expr}\": invalid syntax"))
    })?;
    if n < 0 {
        return Err(err(format!("negative number ({n}) not allowed: {expr}")));
    }
    u32::try_from(n).map_err(|_| {
        err(format!("failed to parse int from {expr}: strconv.Atoi: parsing \"{expr}\": value out of range"))
    })
}

fn parse_int_or_name(expr: &str, b: &Bounds) -> Result<u32, CronError> {
    let lower = expr.to_lowercase();
    if let Some(i) = b.names.iter().position(|n| *n == lower) {
        return Ok(b.names_from + u32::try_from(i).unwrap_or_default());
    }
    must_parse_int(expr)
}

/// One comma-separated part of a field: `*`, `?`, `a`, `a-b`, `*/s`, `a/s`, `a-b/s`.
fn parse_range(expr: &str, b: &Bounds) -> Result<(u64, bool), CronError> {
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_and_high: Vec<&str> = range_and_step[0].split('-').collect();
    let single = low_and_high.len() == 1;
    let (start, mut end, mut star) = if low_and_high[0] == "*" || low_and_high[0] == "?" {
        (b.min, b.max, true)
    } else {
        let start = parse_int_or_name(low_and_high[0], b)?;
        let end = match low_and_high.len() {
            1 => start,
            2 => parse_int_or_name(low_and_high[1], b)?,
            _ => return Err(err(format!("too many hyphens: {expr}"))),
        };
        (start, end, false)
    };
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let step = must_parse_int(range_and_step[1])?;
            if single {
                end = b.max;
            }
            if step > 1 {
                star = false;
            }
            step
        }
        _ => return Err(err(format!("too many slashes: {expr}"))),
    };
    if start < b.min {
        return Err(err(format!("beginning of range ({start}) below minimum ({}): {expr}", b.min)));
    }
    if end > b.max {
        return Err(err(format!("end of range ({end}) above maximum ({}): {expr}", b.max)));
    }
    if start > end {
        return Err(err(format!("beginning of range ({start}) beyond end of range ({end}): {expr}")));
    }
    if step == 0 {
        return Err(err(format!("step of range should be a positive number: {expr}")));
    }
    let mut bits = 0u64;
    let mut v = start;
    while v <= end {
        bits |= 1 << v;
        v += step;
    }
    Ok((bits, star))
}

fn parse_field(field: &str, b: &Bounds) -> Result<(u64, bool), CronError> {
    let mut bits = 0;
    let mut star = false;
    for part in field.split(',') {
        let (b2, s) = parse_range(part, b)?;
        bits |= b2;
        star |= s;
    }
    Ok((bits, star))
}

/// Go's `time.ParseDuration` for the units a schedule would use (h, m, s, ms, us, ns).
fn parse_duration(s: &str) -> Option<u64> {
    let mut rest = s;
    let mut total_ns: u128 = 0;
    if rest.is_empty() {
        return None;
    }
    if rest == "0" {
        return Some(0);
    }
    while !rest.is_empty() {
        let num_len = rest.find(|c: char| !c.is_ascii_digit() && c != '.')?;
        let (num, tail) = rest.split_at(num_len);
        let unit_len = tail.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let scale: f64 = match unit {
            "h" => 3.6e12,
            "m" => 6e10,
            "s" => 1e9,
            "ms" => 1e6,
            "us" | "µs" => 1e3,
            "ns" => 1.0,
            _ => return None,
        };
        let n: f64 = num.parse().ok()?;
        total_ns += (n * scale) as u128;
        rest = tail;
    }
    u64::try_from(total_ns / 1_000_000_000).ok()
}

/// Parses a schedule as `cron.ParseStandard` does.
pub fn parse(spec: &str) -> Result<Schedule, CronError> {
    let mut spec = spec.trim();
    if spec.is_empty() {
        return Err(err("empty spec string".into()));
    }
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        let i = spec.find(' ').unwrap_or(spec.len());
        spec = spec[i..].trim();
    }
    if spec.starts_with('@') {
        let fields = match spec {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            _ => {
                if let Some(d) = spec.strip_prefix("@every ") {
                    return parse_duration(d).map(Schedule::Every).ok_or_else(|| {
                        err(format!("failed to parse duration {spec}: time: invalid duration \"{d}\""))
                    });
                }
                return Err(err(format!("unrecognized descriptor: {spec}")));
            }
        };
        return parse(fields);
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(err(format!("expected exactly 5 fields, found {}: [{}]", fields.len(), fields.join(" "))));
    }
    let (minute, _) = parse_field(fields[0], &MINUTE)?;
    let (hour, _) = parse_field(fields[1], &HOUR)?;
    let (dom, dom_star) = parse_field(fields[2], &DOM)?;
    let (month, _) = parse_field(fields[3], &MONTH)?;
    let (dow, dow_star) = parse_field(fields[4], &DOW)?;
    Ok(Schedule::Fields { minute, hour, dom, month, dow, dom_star, dow_star })
}

impl Schedule {
    /// Whether a field schedule fires at this minute (`Every` schedules never match a wall time).
    pub fn matches(&self, t: DateTime) -> bool {
        let Schedule::Fields { minute, hour, dom, month, dow, dom_star, dow_star } = self else { return false };
        let bit = |set: &u64, v: i8| v >= 0 && set & (1u64 << v) != 0;
        let day_ok = {
            let d = bit(dom, t.day());
            let w = bit(dow, t.weekday().to_sunday_zero_offset());
            if *dom_star || *dow_star {
                d && w
            } else {
                d || w
            }
        };
        bit(minute, t.minute()) && bit(hour, t.hour()) && bit(month, t.month()) && day_ok
    }

    /// The first activation strictly after `t`, searching up to five years ahead.
    pub fn next_after(&self, t: DateTime) -> Option<DateTime> {
        if let Schedule::Every(secs) = self {
            let secs = i64::try_from((*secs).max(1)).ok()?;
            return t.checked_add(secs.seconds()).ok();
        }
        let start = DateTime::from_parts(t.date(), Time::new(t.hour(), t.minute(), 0, 0).ok()?);
        let mut cur = start.checked_add(1.minute()).ok()?;
        let limit = Date::new(t.year().checked_add(5)?, 1, 1).ok()?;
        while cur.date() < limit {
            if self.matches(cur) {
                return Some(cur);
            }
            cur = cur.checked_add(1.minute()).ok()?;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::civil::date;

    #[test]
    fn standard_schedules_parse() {
        for s in [
            "*/5 * * * *",
            "0 0 * * 0",
            "15 3 1-15/2 jan,JUL mon-fri",
            "@hourly",
            "@daily",
            "0 0 ? * *",
            "@every 1h30m",
        ] {
            assert!(parse(s).is_ok(), "{s}");
        }
    }

    #[test]
    fn errors_carry_robfig_messages() {
        assert_eq!(parse("* * *").map_err(|e| e.0), Err("expected exactly 5 fields, found 3: [* * *]".to_string()));
        assert_eq!(parse("60 * * * *").map_err(|e| e.0), Err("end of range (60) above maximum (59): 60".to_string()));
        assert_eq!(parse("* * 0 * *").map_err(|e| e.0), Err("beginning of range (0) below minimum (1): 0".to_string()));
        assert_eq!(
            parse("5-1 * * * *").map_err(|e| e.0),
            Err("beginning of range (5) beyond end of range (1): 5-1".to_string())
        );
        assert_eq!(parse("@fortnightly").map_err(|e| e.0), Err("unrecognized descriptor: @fortnightly".to_string()));
        assert_eq!(
            parse("x * * * *").map_err(|e| e.0),
            Err("failed to parse int from x: strconv.Atoi: parsing \"x\": invalid syntax".to_string())
        );
        assert_eq!(parse("").map_err(|e| e.0), Err("empty spec string".to_string()));
    }

    #[test]
    fn next_activation_is_found() {
        let s = parse("30 2 * * *").expect("parses");
        let t = date(2024, 5, 1).at(3, 0, 0, 0);
        assert_eq!(s.next_after(t), Some(date(2024, 5, 2).at(2, 30, 0, 0)));
        let weekdays = parse("0 9 * * mon").expect("parses");
        // 2024-05-01 is a Wednesday; the next Monday is 2024-05-06.
        assert_eq!(weekdays.next_after(t), Some(date(2024, 5, 6).at(9, 0, 0, 0)));
        assert_eq!(
            parse("*/15 * * * *").expect("parses").next_after(date(2024, 1, 1).at(0, 7, 12, 0)),
            Some(date(2024, 1, 1).at(0, 15, 0, 0))
        );
    }
}
