//! Value formats shared by every kind's validation (upstream's `apimachinery/pkg/util/validation`
//! and the small helpers of `pkg/apis/core/validation`): DNS names, config keys, environment
//! variable names, percentages, IP addresses and CIDRs, plus field-error builders for them.

use crate::field::{FieldError, Path};
use crate::meta;
use crate::net::Cidr;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::IpAddr;

const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const CONFIG_MAP_KEY_FMT: &str = "[-._a-zA-Z0-9]+";
pub const IS_NEGATIVE_ERROR: &str = "must be greater than or equal to 0";
pub const IS_NOT_POSITIVE_ERROR: &str = "must be greater than zero";
pub const FILE_MODE_ERROR: &str = "must be a number between 0 and 0777 (octal), both inclusive";

/// Upstream's `IsDNS1123Label`, including the "must not contain dots" hint for subdomains.
pub fn dns1123_label(s: &str) -> Vec<String> {
    let errs = meta::dns1123_label(s);
    if errs.is_empty() || s.len() > 63 {
        return errs;
    }
    if meta::dns1123_subdomain(s).is_empty() {
        return vec!["must not contain dots".to_string()];
    }
    errs
}

/// Upstream's `IsDNS1035Label` (service names).
pub fn dns1035_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    let ok = s.starts_with(|c: char| c.is_ascii_lowercase())
        && s.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !ok {
        errs.push(format!(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '{DNS1035_LABEL_FMT}')"
        ));
    }
    errs
}

fn ch_dir_prefix(s: &str) -> Vec<String> {
    match s {
        "." => vec!["must not be '.'".to_string()],
        ".." => vec!["must not be '..'".to_string()],
        _ if s.starts_with("..") => vec!["must not start with '..'".to_string()],
        _ => Vec::new(),
    }
}

/// Upstream's `IsConfigMapKey` (ConfigMap and Secret data keys, key selectors).
pub fn config_map_key(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    if s.is_empty() || !s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_')) {
        errs.push(format!(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '{CONFIG_MAP_KEY_FMT}')"
        ));
    }
    errs.extend(ch_dir_prefix(s));
    errs
}

/// Upstream's `IsRelaxedEnvVarName` (the rule since `RelaxedEnvironmentVariableValidation` is GA).
pub fn env_var_name(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.is_empty() {
        errs.push("environment variable name must be non-empty".to_string());
    }
    if s.chars().any(|c| !(' '..='~').contains(&c) || c == '=') {
        errs.push(
            "a valid environment variable name must consist only of printable ASCII characters other than '='".into(),
        );
    }
    errs
}

/// Upstream's `IsValidPercent`.
pub fn percent(s: &str) -> Vec<String> {
    match s.strip_suffix('%') {
        Some(n) if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) => Vec::new(),
        _ => vec!["a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')".to_string()],
    }
}

/// Upstream's `IsHTTPHeaderName`.
pub fn http_header_name(s: &str) -> Vec<String> {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Vec::new();
    }
    vec!["a valid HTTP header must consist of alphanumeric characters or '-' (e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')".to_string()]
}

/// Parses an IP address the way upstream's `ParseIPSloppy` does (IPv4 octets may carry leading zeros).
pub fn parse_ip(s: &str) -> Option<IpAddr> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip);
    }
    let octets: Vec<&str> = s.split('.').collect();
    if octets.len() != 4 {
        return None;
    }
    let mut out = [0u8; 4];
    for (o, part) in out.iter_mut().zip(&octets) {
        if part.is_empty() || part.len() > 3 || !part.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        *o = part.parse().ok()?;
    }
    Some(IpAddr::from(out))
}

/// Upstream's `IsValidIP` as a field error.
pub fn validate_ip(value: &str, path: &Path) -> Vec<FieldError> {
    if parse_ip(value).is_some() {
        return Vec::new();
    }
    vec![FieldError::invalid(path, value, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)")]
}

/// Parses `addr/prefix` with upstream's (legacy-tolerant) address rules.
pub fn parse_cidr(s: &str) -> Option<Cidr> {
    let (addr, len) = s.split_once('/')?;
    let ip = parse_ip(addr)?;
    if len.is_empty() || !len.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Cidr::new(ip, len.parse().ok()?)
}

/// Upstream's `IsValidCIDR` as a field error.
pub fn validate_cidr(value: &str, path: &Path) -> Vec<FieldError> {
    if parse_cidr(value).is_some() {
        return Vec::new();
    }
    vec![FieldError::invalid(path, value, "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)")]
}

/// Upstream's `ValidateNonSpecialIP` (endpoints, external IPs).
pub fn validate_non_special_ip(value: &str, path: &Path) -> Vec<FieldError> {
    let Some(ip) = parse_ip(value) else {
        return vec![FieldError::invalid(path, value, "must be a valid IP address")];
    };
    let mut errs = Vec::new();
    if ip.is_unspecified() {
        errs.push(FieldError::invalid(path, value, format!("may not be unspecified ({value})")));
    }
    if ip.is_loopback() {
        errs.push(FieldError::invalid(path, value, "may not be in the loopback range (127.0.0.0/8, ::1/128)"));
    }
    let link_local = match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
    };
    if link_local {
        errs.push(FieldError::invalid(path, value, "may not be in the link-local range (169.254.0.0/16, fe80::/10)"));
    }
    let link_local_multicast = match ip {
        IpAddr::V4(v4) => v4.octets()[..3] == [224, 0, 0],
        IpAddr::V6(v6) => (v6.segments()[0] & 0xff0f) == 0xff02,
    };
    if link_local_multicast {
        errs.push(FieldError::invalid(
            path,
            value,
            "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)",
        ));
    }
    errs
}

/// `Invalid` errors for each message of a string check.
pub fn each_invalid(path: &Path, value: &str, msgs: Vec<String>) -> Vec<FieldError> {
    msgs.into_iter().map(|m| FieldError::invalid(path, value, m)).collect()
}

/// Upstream's `ValidateDNS1123Label` field helper.
pub fn validate_dns_label(value: &str, path: &Path) -> Vec<FieldError> {
    each_invalid(path, value, dns1123_label(value))
}

/// Upstream's `ValidateDNS1123Subdomain` field helper.
pub fn validate_dns_subdomain(value: &str, path: &Path) -> Vec<FieldError> {
    each_invalid(path, value, meta::dns1123_subdomain(value))
}

/// Upstream's `ValidateQualifiedName` / `ValidateLabelName`.
pub fn validate_qualified_name(value: &str, path: &Path) -> Vec<FieldError> {
    each_invalid(path, value, meta::qualified_name(value))
}

/// Upstream's `ValidateNonnegativeField`.
pub fn validate_non_negative(value: i64, path: &Path) -> Vec<FieldError> {
    if value < 0 {
        vec![FieldError::invalid(path, value, IS_NEGATIVE_ERROR)]
    } else {
        Vec::new()
    }
}

/// Upstream's `ValidateImmutableField`: `Invalid` with the new value when it differs.
pub fn validate_immutable<T: Serialize + PartialEq>(new: &T, old: &T, path: &Path) -> Vec<FieldError> {
    if new == old {
        return Vec::new();
    }
    vec![FieldError::invalid(path, to_value(new), "field is immutable")]
}

/// Upstream's `ValidateLabels` on a typed map.
pub fn validate_labels(labels: Option<&BTreeMap<String, String>>, path: &Path) -> Vec<FieldError> {
    match labels {
        Some(l) if !l.is_empty() => meta::validate_labels(Some(&to_value(l)), path),
        _ => Vec::new(),
    }
}

/// Upstream's `ValidateAnnotations` on a typed map (keys and total size).
pub fn validate_annotations(annotations: Option<&BTreeMap<String, String>>, path: &Path) -> Vec<FieldError> {
    let Some(ann) = annotations else { return Vec::new() };
    let mut errs = Vec::new();
    let mut total = 0;
    for (k, v) in ann {
        for m in meta::qualified_name(&k.to_lowercase()) {
            errs.push(FieldError::invalid(path, k.as_str(), m));
        }
        total += k.len() + v.len();
    }
    if total > meta::TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(FieldError::too_long(path, meta::TOTAL_ANNOTATION_SIZE_LIMIT));
    }
    errs
}

/// Serializes a value for use as a field error's bad value.
pub fn to_value<T: Serialize + ?Sized>(t: &T) -> Value {
    serde_json::to_value(t).unwrap_or(Value::Null)
}

/// Upstream's `NotSupported` for a string enum: `Required` when empty.
pub fn validate_enum(value: Option<&str>, supported: &[&str], path: &Path) -> Vec<FieldError> {
    match value.unwrap_or_default() {
        "" => vec![FieldError::required(path, "")],
        v if supported.contains(&v) => Vec::new(),
        v => vec![FieldError::not_supported(path, v, supported)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_label_reports_dots_like_upstream() {
        assert_eq!(dns1123_label("a.b"), vec!["must not contain dots".to_string()]);
        assert!(dns1123_label("web-1").is_empty());
        assert!(dns1123_label("Web")[0].starts_with("a lowercase RFC 1123 label"));
        assert!(dns1035_label("1abc")[0].starts_with("a DNS-1035 label"));
        assert!(dns1035_label("abc-1").is_empty());
    }

    #[test]
    fn config_keys_and_env_names() {
        assert!(config_map_key("app.properties").is_empty());
        assert_eq!(config_map_key("..a"), vec!["must not start with '..'".to_string()]);
        assert!(config_map_key("a/b")[0].starts_with("a valid config key"));
        assert!(env_var_name("MY VAR.1").is_empty());
        assert_eq!(env_var_name("A=B").len(), 1);
        assert_eq!(env_var_name("")[0], "environment variable name must be non-empty");
    }

    #[test]
    fn ip_and_cidr_checks() {
        assert!(validate_ip("10.0.0.1", &Path::new("ip")).is_empty());
        assert!(validate_ip("010.000.0.1", &Path::new("ip")).is_empty());
        assert_eq!(validate_ip("10.0.0", &Path::new("ip")).len(), 1);
        assert!(validate_cidr("10.0.0.0/8", &Path::new("c")).is_empty());
        assert_eq!(validate_cidr("10.0.0.0/33", &Path::new("c")).len(), 1);
        let net = parse_cidr("10.0.0.0/8").expect("cidr");
        assert!(net.contains("10.2.3.4".parse().expect("ip")));
        assert!(!net.contains("11.2.3.4".parse().expect("ip")));
        let errs = validate_non_special_ip("127.0.0.1", &Path::new("ip"));
        assert_eq!(errs[0].detail, "may not be in the loopback range (127.0.0.0/8, ::1/128)");
        assert_eq!(validate_non_special_ip("169.254.1.1", &Path::new("ip")).len(), 1);
    }

    #[test]
    fn enum_and_immutable_helpers() {
        let p = Path::new("spec").child("x");
        assert_eq!(validate_enum(None, &["A"], &p)[0].to_string(), "spec.x: Required value");
        assert_eq!(
            validate_enum(Some("B"), &["A"], &p)[0].to_string(),
            "spec.x: Unsupported value: \"B\": supported values: \"A\""
        );
        assert_eq!(
            validate_immutable(&"b", &"a", &p)[0].to_string(),
            "spec.x: Invalid value: \"b\": field is immutable"
        );
        assert!(percent("25%").is_empty());
        assert_eq!(percent("25").len(), 1);
    }
}
