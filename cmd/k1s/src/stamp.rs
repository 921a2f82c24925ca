//! The build's stamp (`/version`'s `gitCommit`, `gitTreeState`, `buildDate`, and `k1s
//! --version`): worked out by `build.rs` from git and `SOURCE_DATE_EPOCH`, and included by the
//! binary's tests too. Pure functions of what the build script reads.

/// `buildDate`: `SOURCE_DATE_EPOCH` (reproducible builds) when it is set and valid, else the
/// time of the build, as RFC 3339 in UTC (Go's `2006-01-02T15:04:05Z`).
pub fn build_date(source_date_epoch: Option<&str>, now_unix: u64) -> String {
    let secs = source_date_epoch.and_then(|s| s.trim().parse::<u64>().ok()).unwrap_or(now_unix);
    rfc3339(secs)
}

/// `gitCommit`: a 40-hex-digit commit from `git rev-parse HEAD`, or "unknown".
pub fn git_commit(rev_parse_head: Option<&str>) -> String {
    match rev_parse_head.map(str::trim) {
        Some(c) if c.len() == 40 && c.bytes().all(|b| b.is_ascii_hexdigit()) => c.to_ascii_lowercase(),
        _ => "unknown".to_string(),
    }
}

/// `gitTreeState`: "clean" or "dirty" from `git status --porcelain`, "" when git could not say
/// (upstream's value for a build without it).
pub fn git_tree_state(porcelain: Option<&str>) -> &'static str {
    match porcelain {
        Some(s) if s.trim().is_empty() => "clean",
        Some(_) => "dirty",
        None => "",
    }
}

/// Unix seconds as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn rfc3339(secs: u64) -> String {
    let t = i64::try_from(secs)
        .ok()
        .and_then(|s| jiff::Timestamp::from_second(s).ok())
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_date_epoch_stamps_the_date_and_the_build_time_otherwise() {
        assert_eq!(build_date(Some("1796637600"), 0), "2026-12-07T10:00:00Z");
        assert_eq!(build_date(None, 1_796_637_600), "2026-12-07T10:00:00Z");
        assert_eq!(build_date(Some("not a number"), 0), "1970-01-01T00:00:00Z", "an invalid value is ignored");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z", "a leap day");
        assert_eq!(rfc3339(4_102_444_799), "2099-12-31T23:59:59Z");
    }

    #[test]
    fn commits_and_tree_states_come_from_git_or_say_unknown() {
        let c = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(git_commit(Some(&format!("{c}\n"))), c);
        assert_eq!(git_commit(Some("fatal: not a git repository")), "unknown");
        assert_eq!(git_commit(None), "unknown");
        assert_eq!(git_tree_state(Some("")), "clean");
        assert_eq!(git_tree_state(Some(" M README.md\n")), "dirty");
        assert_eq!(git_tree_state(None), "");
    }
}
