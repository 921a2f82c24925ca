//! Probes and lifecycle hooks of containers: defaulting (`SetDefaults_Probe`,
//! `SetDefaults_HTTPGetAction`) and validation (`validateProbe`, `validateHandler`,
//! `validateLifecycle`) as upstream.

use super::formats;
use super::ports;
use crate::field::{FieldError, Path};
use k8s_openapi::api::core::v1::{
    ExecAction, GRPCAction, HTTPGetAction, Lifecycle, LifecycleHandler, Probe, SleepAction, TCPSocketAction,
};

fn default_if_unset(v: &mut Option<i32>, default: i32) {
    if v.unwrap_or_default() == 0 {
        *v = Some(default);
    }
}

/// `SetDefaults_HTTPGetAction`: path `/`, scheme `HTTP`.
pub fn set_http_get_defaults(h: &mut HTTPGetAction) {
    if h.path.as_deref().unwrap_or_default().is_empty() {
        h.path = Some("/".into());
    }
    if h.scheme.as_deref().unwrap_or_default().is_empty() {
        h.scheme = Some("HTTP".into());
    }
}

/// `SetDefaults_Probe` plus the handler defaults.
pub fn set_probe_defaults(p: &mut Probe) {
    default_if_unset(&mut p.timeout_seconds, 1);
    default_if_unset(&mut p.period_seconds, 10);
    default_if_unset(&mut p.success_threshold, 1);
    default_if_unset(&mut p.failure_threshold, 3);
    if let Some(h) = p.http_get.as_mut() {
        set_http_get_defaults(h);
    }
    if let Some(g) = p.grpc.as_mut() {
        g.service.get_or_insert_with(String::new);
    }
}

/// Lifecycle hook defaults (HTTP actions only).
pub fn set_lifecycle_defaults(l: &mut Lifecycle) {
    for h in [l.post_start.as_mut(), l.pre_stop.as_mut()].into_iter().flatten() {
        if let Some(g) = h.http_get.as_mut() {
            set_http_get_defaults(g);
        }
    }
}

/// The handler of a probe or hook, in upstream's checking order.
struct Handler<'a> {
    exec: Option<&'a ExecAction>,
    http_get: Option<&'a HTTPGetAction>,
    tcp_socket: Option<&'a TCPSocketAction>,
    grpc: Option<&'a GRPCAction>,
    sleep: Option<&'a SleepAction>,
}

fn validate_http_get(h: &HTTPGetAction, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if h.path.as_deref().unwrap_or_default().is_empty() {
        errs.push(FieldError::required(path.child("path"), ""));
    }
    errs.extend(ports::validate_port_num_or_name(&h.port, &path.child("port")));
    let scheme = h.scheme.as_deref().unwrap_or_default();
    if !["HTTP", "HTTPS"].contains(&scheme) {
        errs.push(FieldError::not_supported(path.child("scheme"), scheme, &["HTTP", "HTTPS"]));
    }
    for header in h.http_headers.iter().flatten() {
        errs.extend(formats::each_invalid(
            &path.child("httpHeaders"),
            &header.name,
            formats::http_header_name(&header.name),
        ));
    }
    errs
}

fn validate_handler(h: &Handler<'_>, grace_period: Option<i64>, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut count = 0;
    let mut take = |name: &str, errs: &mut Vec<FieldError>| {
        count += 1;
        if count > 1 {
            errs.push(FieldError::forbidden(path.child(name), "may not specify more than 1 handler type"));
            false
        } else {
            true
        }
    };
    if let Some(e) = h.exec {
        if take("exec", &mut errs) && e.command.as_ref().is_none_or(Vec::is_empty) {
            errs.push(FieldError::required(path.child("exec").child("command"), ""));
        }
    }
    if let Some(g) = h.http_get {
        if take("httpGet", &mut errs) {
            errs.extend(validate_http_get(g, &path.child("httpGet")));
        }
    }
    if let Some(t) = h.tcp_socket {
        if take("tcpSocket", &mut errs) {
            errs.extend(ports::validate_port_num_or_name(&t.port, &path.child("tcpSocket").child("port")));
        }
    }
    if let Some(g) = h.grpc {
        if take("grpc", &mut errs) {
            errs.extend(ports::validate_port_num(g.port, &path.child("grpc").child("port")));
        }
    }
    if let Some(s) = h.sleep {
        if take("sleep", &mut errs) {
            if let Some(grace) = grace_period {
                if s.seconds < 0 || s.seconds > grace {
                    errs.push(FieldError::invalid(
                        path.child("sleep").child("seconds"),
                        s.seconds,
                        format!("must be non-negative and less than terminationGracePeriodSeconds ({grace})"),
                    ));
                }
            }
        }
    }
    if count == 0 {
        errs.push(FieldError::required(path, "must specify a handler type"));
    }
    errs
}

/// `validateProbe`: one handler, non-negative timings.
pub fn validate_probe(p: &Probe, path: &Path) -> Vec<FieldError> {
    let handler = Handler {
        exec: p.exec.as_ref(),
        http_get: p.http_get.as_ref(),
        tcp_socket: p.tcp_socket.as_ref(),
        grpc: p.grpc.as_ref(),
        sleep: None,
    };
    let mut errs = validate_handler(&handler, None, path);
    for (name, v) in [
        ("initialDelaySeconds", p.initial_delay_seconds),
        ("timeoutSeconds", p.timeout_seconds),
        ("periodSeconds", p.period_seconds),
        ("successThreshold", p.success_threshold),
        ("failureThreshold", p.failure_threshold),
    ] {
        errs.extend(formats::validate_non_negative(i64::from(v.unwrap_or_default()), &path.child(name)));
    }
    if let Some(t) = p.termination_grace_period_seconds {
        if t <= 0 {
            errs.push(FieldError::invalid(path.child("terminationGracePeriodSeconds"), t, "must be greater than 0"));
        }
    }
    errs
}

/// Liveness and startup probes: `successThreshold` must be 1.
pub fn validate_liveness_or_startup(p: &Probe, path: &Path) -> Vec<FieldError> {
    let mut errs = validate_probe(p, path);
    let st = p.success_threshold.unwrap_or_default();
    if st != 1 {
        errs.push(FieldError::invalid(path.child("successThreshold"), st, "must be 1"));
    }
    errs
}

/// Readiness probes may not carry a termination grace period.
pub fn validate_readiness(p: &Probe, path: &Path) -> Vec<FieldError> {
    let mut errs = validate_probe(p, path);
    if let Some(t) = p.termination_grace_period_seconds {
        errs.push(FieldError::invalid(
            path.child("terminationGracePeriodSeconds"),
            t,
            "must not be set for readinessProbes",
        ));
    }
    errs
}

fn lifecycle_handler(h: &LifecycleHandler) -> Handler<'_> {
    Handler {
        exec: h.exec.as_ref(),
        http_get: h.http_get.as_ref(),
        tcp_socket: h.tcp_socket.as_ref(),
        grpc: None,
        sleep: h.sleep.as_ref(),
    }
}

/// `validateLifecycle`: each hook has exactly one handler.
pub fn validate_lifecycle(l: &Lifecycle, grace_period: Option<i64>, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(h) = &l.post_start {
        errs.extend(validate_handler(&lifecycle_handler(h), grace_period, &path.child("postStart")));
    }
    if let Some(h) = &l.pre_stop {
        errs.extend(validate_handler(&lifecycle_handler(h), grace_period, &path.child("preStop")));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    fn http_probe() -> Probe {
        Probe {
            http_get: Some(HTTPGetAction { port: IntOrString::Int(8080), ..Default::default() }),
            ..Default::default()
        }
    }

    #[test]
    fn probe_defaults_match_upstream() {
        let mut p = http_probe();
        set_probe_defaults(&mut p);
        assert_eq!(
            (p.timeout_seconds, p.period_seconds, p.success_threshold, p.failure_threshold),
            (Some(1), Some(10), Some(1), Some(3))
        );
        let h = p.http_get.as_ref().expect("http");
        assert_eq!((h.path.as_deref(), h.scheme.as_deref()), (Some("/"), Some("HTTP")));
        assert!(validate_liveness_or_startup(&p, &Path::new("p")).is_empty());
    }

    #[test]
    fn probe_needs_exactly_one_handler() {
        let errs = validate_probe(&Probe::default(), &Path::new("spec").child("livenessProbe"));
        assert_eq!(errs[0].to_string(), "spec.livenessProbe: Required value: must specify a handler type");
        let mut two = http_probe();
        set_probe_defaults(&mut two);
        two.tcp_socket = Some(TCPSocketAction { port: IntOrString::Int(80), ..Default::default() });
        let errs = validate_probe(&two, &Path::new("p"));
        assert_eq!(errs[0].to_string(), "p.tcpSocket: Forbidden: may not specify more than 1 handler type");
    }

    #[test]
    fn liveness_success_threshold_must_be_one() {
        let mut p = http_probe();
        set_probe_defaults(&mut p);
        p.success_threshold = Some(2);
        let errs = validate_liveness_or_startup(&p, &Path::new("p"));
        assert_eq!(errs[0].to_string(), "p.successThreshold: Invalid value: 2: must be 1");
        assert!(validate_readiness(&p, &Path::new("p")).is_empty());
    }

    #[test]
    fn negative_timings_and_bad_ports_are_invalid() {
        let mut p = http_probe();
        set_probe_defaults(&mut p);
        p.period_seconds = Some(-1);
        p.http_get = Some(HTTPGetAction {
            port: IntOrString::Int(0),
            scheme: Some("FTP".into()),
            path: Some("/".into()),
            ..Default::default()
        });
        let msgs: Vec<String> = validate_probe(&p, &Path::new("p")).iter().map(|e| e.to_string()).collect();
        assert!(msgs.contains(&"p.httpGet.port: Invalid value: 0: must be between 1 and 65535, inclusive".to_string()));
        assert!(msgs.contains(
            &"p.httpGet.scheme: Unsupported value: \"FTP\": supported values: \"HTTP\", \"HTTPS\"".to_string()
        ));
        assert!(msgs.contains(&"p.periodSeconds: Invalid value: -1: must be greater than or equal to 0".to_string()));
    }
}
