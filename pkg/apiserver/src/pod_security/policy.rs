//! Levels, versions and the namespace policy: upstream's `pod-security-admission/api` helpers
//! (`ParseLevel`, `ParseVersion`, `PolicyToEvaluate`).

use k1s_api::field::FieldError;
use serde_json::{Map, Value};
use std::fmt;

pub const ENFORCE_LEVEL_LABEL: &str = "pod-security.kubernetes.io/enforce";
pub const ENFORCE_VERSION_LABEL: &str = "pod-security.kubernetes.io/enforce-version";
pub const AUDIT_LEVEL_LABEL: &str = "pod-security.kubernetes.io/audit";
pub const AUDIT_VERSION_LABEL: &str = "pod-security.kubernetes.io/audit-version";
pub const WARN_LEVEL_LABEL: &str = "pod-security.kubernetes.io/warn";
pub const WARN_VERSION_LABEL: &str = "pod-security.kubernetes.io/warn-version";

/// A Pod Security Standards level, ordered by strictness.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    Privileged,
    Baseline,
    Restricted,
}

const LEVEL_ERROR: &str = "must be one of privileged, baseline, restricted";
const VERSION_ERROR: &str = r#"must be "latest" or "v1.x""#;

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }

    /// Upstream's `ParseLevel`: an unknown level is an error, and evaluates as `restricted`.
    pub fn parse(s: &str) -> Result<Level, &'static str> {
        match s {
            "privileged" => Ok(Level::Privileged),
            "baseline" => Ok(Level::Baseline),
            "restricted" => Ok(Level::Restricted),
            _ => Err(LEVEL_ERROR),
        }
    }
}

/// A policy version: `latest` or `v1.<minor>` (upstream only knows major version 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Version {
    Latest,
    V1(u32),
}

impl Version {
    /// Upstream's `ParseVersion`: `latest` or `v1.x` (no leading zeros); anything else is an
    /// error, and evaluates as `latest`.
    pub fn parse(s: &str) -> Result<Version, &'static str> {
        if s == "latest" {
            return Ok(Version::Latest);
        }
        let minor = s.strip_prefix("v1.").filter(|m| {
            !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit()) && (m.len() == 1 || !m.starts_with('0'))
        });
        match minor.and_then(|m| m.parse().ok()) {
            Some(m) => Ok(Version::V1(m)),
            None => Err(VERSION_ERROR),
        }
    }

    /// Whether `self` is older than `other`; `latest` is newer than any version.
    pub fn older(self, other: Version) -> bool {
        match (self, other) {
            (Version::Latest, _) => false,
            (_, Version::Latest) => true,
            (Version::V1(a), Version::V1(b)) => a < b,
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Version::Latest => f.write_str("latest"),
            Version::V1(m) => write!(f, "v1.{m}"),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LevelVersion {
    pub level: Level,
    pub version: Version,
}

impl LevelVersion {
    pub const PRIVILEGED_LATEST: LevelVersion = LevelVersion { level: Level::Privileged, version: Version::Latest };

    /// Both privileged, or the same level and version.
    pub fn equivalent(&self, other: &LevelVersion) -> bool {
        (self.level == Level::Privileged && other.level == Level::Privileged) || self == other
    }
}

impl fmt::Display for LevelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.level.as_str(), self.version)
    }
}

/// The three modes' level and version for one namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    pub enforce: LevelVersion,
    pub audit: LevelVersion,
    pub warn: LevelVersion,
}

impl Default for Policy {
    /// Upstream's defaulted `PodSecurityConfiguration`: privileged:latest for every mode.
    fn default() -> Self {
        let p = LevelVersion::PRIVILEGED_LATEST;
        Policy { enforce: p, audit: p, warn: p }
    }
}

impl Policy {
    pub fn fully_privileged(&self) -> bool {
        [self.enforce, self.audit, self.warn].iter().all(|lv| lv.level == Level::Privileged)
    }

    pub fn equivalent(&self, other: &Policy) -> bool {
        self.enforce.equivalent(&other.enforce)
            && self.audit.equivalent(&other.audit)
            && self.warn.equivalent(&other.warn)
    }
}

/// Upstream's `PolicyToEvaluate`: the namespace's labels over `defaults`. A usable policy is
/// always returned, with one error per label that does not parse: an invalid enforce level
/// evaluates as `restricted`, invalid audit and warn levels as `privileged` (fail open), an
/// invalid version as `latest`. Without a warn label, warn follows a stricter enforce level.
pub fn policy_to_evaluate(labels: Option<&Map<String, Value>>, defaults: &Policy) -> (Policy, Vec<FieldError>) {
    let mut p = *defaults;
    let mut errs = Vec::new();
    let Some(labels) = labels.filter(|l| !l.is_empty()) else { return (p, errs) };
    let e = &mut errs;
    let enforce_level =
        apply_label(labels, ENFORCE_LEVEL_LABEL, Level::parse, Level::Restricted, &mut p.enforce.level, e);
    apply_label(labels, ENFORCE_VERSION_LABEL, Version::parse, Version::Latest, &mut p.enforce.version, e);
    apply_label(labels, AUDIT_LEVEL_LABEL, Level::parse, Level::Privileged, &mut p.audit.level, e);
    apply_label(labels, AUDIT_VERSION_LABEL, Version::parse, Version::Latest, &mut p.audit.version, e);
    let warn_level = apply_label(labels, WARN_LEVEL_LABEL, Level::parse, Level::Privileged, &mut p.warn.level, e);
    let warn_version = apply_label(labels, WARN_VERSION_LABEL, Version::parse, Version::Latest, &mut p.warn.version, e);
    if warn_level.is_none() && enforce_level == Some(true) && p.enforce.level > p.warn.level {
        p.warn.level = p.enforce.level;
        if warn_version.is_none() {
            p.warn.version = p.enforce.version;
        }
    }
    (p, errs)
}

/// Sets `into` from the label `key` if present: its value, or `fallback` and an error when it
/// does not parse. `None`: no such label; `Some(valid)` otherwise.
fn apply_label<T>(
    labels: &Map<String, Value>,
    key: &str,
    parse: fn(&str) -> Result<T, &'static str>,
    fallback: T,
    into: &mut T,
    errs: &mut Vec<FieldError>,
) -> Option<bool> {
    let value = labels.get(key)?.as_str().unwrap_or("");
    match parse(value) {
        Ok(v) => {
            *into = v;
            Some(true)
        }
        Err(msg) => {
            errs.push(FieldError::invalid(format!("metadata.labels[{key}]"), value, msg));
            *into = fallback;
            Some(false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn eval(labels: Value) -> (Policy, Vec<String>) {
        let (p, errs) = policy_to_evaluate(labels.as_object(), &Policy::default());
        (p, errs.iter().map(|e| e.to_string()).collect())
    }

    #[test]
    fn versions_parse_as_upstream() {
        assert_eq!(Version::parse("latest"), Ok(Version::Latest));
        assert_eq!(Version::parse("v1.0"), Ok(Version::V1(0)));
        assert_eq!(Version::parse("v1.35"), Ok(Version::V1(35)));
        for bad in ["v1.035", "v2.1", "1.25", "v1.", "v1.x", "Latest", ""] {
            assert_eq!(Version::parse(bad), Err(VERSION_ERROR), "{bad}");
        }
        assert!(Version::V1(34).older(Version::V1(35)));
        assert!(Version::V1(99).older(Version::Latest));
        assert!(!Version::Latest.older(Version::V1(99)));
        assert_eq!(Version::V1(35).to_string(), "v1.35");
    }

    #[test]
    fn enforce_sets_warn_when_stricter_and_warn_is_unset() {
        let (p, errs) = eval(json!({ENFORCE_LEVEL_LABEL: "restricted", ENFORCE_VERSION_LABEL: "v1.30"}));
        assert!(errs.is_empty());
        assert_eq!(p.enforce.to_string(), "restricted:v1.30");
        assert_eq!(p.warn.to_string(), "restricted:v1.30");
        assert_eq!(p.audit.to_string(), "privileged:latest");
        let (p, _) = eval(json!({ENFORCE_LEVEL_LABEL: "baseline", WARN_LEVEL_LABEL: "privileged"}));
        assert_eq!(p.warn.level, Level::Privileged);
    }

    #[test]
    fn invalid_labels_are_errors_enforce_fails_closed_and_warn_audit_fail_open() {
        let (p, errs) = eval(json!({ENFORCE_LEVEL_LABEL: "strict", WARN_LEVEL_LABEL: "x", AUDIT_VERSION_LABEL: "v2"}));
        assert_eq!(p.enforce.level, Level::Restricted);
        assert_eq!(p.warn.level, Level::Privileged);
        assert_eq!(
            errs,
            [
                r#"metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, baseline, restricted"#,
                r#"metadata.labels[pod-security.kubernetes.io/audit-version]: Invalid value: "v2": must be "latest" or "v1.x""#,
                r#"metadata.labels[pod-security.kubernetes.io/warn]: Invalid value: "x": must be one of privileged, baseline, restricted"#,
            ]
        );
    }
}
