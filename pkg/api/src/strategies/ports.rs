//! Port numbers, port names and protocols, as upstream's `IsValidPortNum`, `IsValidPortName`,
//! `ValidatePortNumOrName` and the supported-protocol checks.

use crate::field::{FieldError, Path};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// Protocols a port may use, sorted as upstream lists them in errors.
pub const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];

/// Upstream's `IsValidPortNum`.
pub fn port_num(port: i32) -> Vec<String> {
    if (1..=65535).contains(&port) {
        Vec::new()
    } else {
        vec!["must be between 1 and 65535, inclusive".to_string()]
    }
}

/// Upstream's `IsValidPortName` (IANA service names).
pub fn port_name(name: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if name.len() > 15 {
        errs.push("must be no more than 15 characters".to_string());
    }
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".to_string());
    }
    if !name.chars().any(|c| c.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".to_string());
    }
    if name.contains("--") {
        errs.push("must not contain consecutive hyphens".to_string());
    }
    if name.starts_with('-') || name.ends_with('-') {
        errs.push("must not begin or end with a hyphen".to_string());
    }
    errs
}

/// Field errors for a port number.
pub fn validate_port_num(port: i32, path: &Path) -> Vec<FieldError> {
    port_num(port).into_iter().map(|m| FieldError::invalid(path, port, m)).collect()
}

/// Upstream's `ValidatePortNumOrName`.
pub fn validate_port_num_or_name(port: &IntOrString, path: &Path) -> Vec<FieldError> {
    match port {
        IntOrString::Int(n) => validate_port_num(*n, path),
        IntOrString::String(s) => port_name(s).into_iter().map(|m| FieldError::invalid(path, s.as_str(), m)).collect(),
    }
}

/// A port protocol: `Required` when unset, `NotSupported` unless TCP, UDP or SCTP.
pub fn validate_protocol(protocol: Option<&str>, path: &Path) -> Vec<FieldError> {
    match protocol.unwrap_or_default() {
        "" => vec![FieldError::required(path, "")],
        p if PROTOCOLS.contains(&p) => Vec::new(),
        p => vec![FieldError::not_supported(path, p, PROTOCOLS)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_numbers_and_names() {
        assert!(port_num(80).is_empty());
        assert_eq!(port_num(0), vec!["must be between 1 and 65535, inclusive".to_string()]);
        assert_eq!(port_num(70000).len(), 1);
        assert!(port_name("http-alt").is_empty());
        assert_eq!(port_name("8080"), vec!["must contain at least one letter (a-z)".to_string()]);
        assert_eq!(port_name("a--b"), vec!["must not contain consecutive hyphens".to_string()]);
        assert_eq!(port_name("this-name-is-too-long").len(), 1);
    }

    #[test]
    fn port_num_or_name_and_protocol_errors_carry_paths() {
        let p = Path::new("spec").child("port");
        assert_eq!(
            validate_port_num_or_name(&IntOrString::Int(0), &p)[0].to_string(),
            "spec.port: Invalid value: 0: must be between 1 and 65535, inclusive"
        );
        assert!(validate_port_num_or_name(&IntOrString::String("http".into()), &p).is_empty());
        assert_eq!(
            validate_protocol(Some("ICMP"), &p)[0].to_string(),
            "spec.port: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\""
        );
        assert_eq!(validate_protocol(None, &p)[0].to_string(), "spec.port: Required value");
    }
}
