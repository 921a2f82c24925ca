//! Container probes as upstream's `pkg/kubelet/prober` and `pkg/probe/*`:
//!
//! - [`probe_once`] runs one HTTP GET, TCP, exec or gRPC check bounded by `timeoutSeconds`,
//!   with upstream's results and messages (`HTTP probe failed with statuscode: 500`,
//!   `dial tcp 10.42.0.5:80: connect: connection refused`, the command's output…);
//! - [`ProbeWorker`] runs one probe of one container periodically with initialDelaySeconds,
//!   periodSeconds and the success/failure thresholds, and reports to the pod worker through a
//!   channel (see [`ProbeUpdate`] for what is sent when).

pub mod dial;
pub mod exec;
pub mod grpc;
pub mod http_get;
mod worker;

pub use worker::{ProbeHandle, ProbeUpdate, ProbeWorker};

use k1s_cri::RuntimeService;
use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::net::IpAddr;
use std::time::Duration;
use tokio::time::Instant;

/// The User-Agent of probes (`kube-probe/<major>.<minor>`).
pub const USER_AGENT: &str = "kube-probe/1.35";

/// Which probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProbeKind {
    Startup,
    Liveness,
    Readiness,
}

impl ProbeKind {
    /// `Startup`, `Liveness`, `Readiness` (as events name them).
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeKind::Startup => "Startup",
            ProbeKind::Liveness => "Liveness",
            ProbeKind::Readiness => "Readiness",
        }
    }

    /// The thresholded result before any probe ran: readiness is Failure (not ready),
    /// liveness is Success, startup is Unknown (not started).
    pub fn initial_result(self) -> ProbeResult {
        match self {
            ProbeKind::Startup => ProbeResult::Unknown,
            ProbeKind::Liveness => ProbeResult::Success,
            ProbeKind::Readiness => ProbeResult::Failure,
        }
    }
}

/// A probe's verdict (upstream's `probe.Result`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProbeResult {
    Success,
    /// Succeeded with a warning (an HTTP redirect that was not followed); counts as success.
    Warning,
    Failure,
    /// The probe could not be run (a named port that does not exist, a runtime error); it does
    /// not count towards the thresholds.
    Unknown,
}

/// One probe run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeOutcome {
    pub result: ProbeResult,
    /// The failure message, the command output, or the HTTP body (successes).
    pub output: String,
}

impl ProbeOutcome {
    fn new(result: ProbeResult, output: impl Into<String>) -> Self {
        ProbeOutcome { result, output: output.into() }
    }
}

/// What a probe (or a lifecycle hook) runs against.
#[derive(Clone, Debug)]
pub struct ProbeTarget {
    /// The pod's primary IP: the default host of HTTP, TCP and gRPC checks.
    pub pod_ip: Option<IpAddr>,
    /// The CRI container id (exec).
    pub container_id: String,
    /// The container spec (named ports, env for exec command expansion).
    pub container: Container,
}

/// Go's `time.Duration.String()` for the durations probes use (`1s`, `500ms`, `1m30s`).
pub fn go_duration(d: Duration) -> String {
    if d.is_zero() {
        return "0s".into();
    }
    if d < Duration::from_secs(1) {
        let ms = d.as_secs_f64() * 1000.0;
        return if ms.fract() == 0.0 { format!("{ms:.0}ms") } else { format!("{ms}ms") };
    }
    let total = d.as_secs();
    let (h, m, s) = (total / 3600, (total % 3600) / 60, total % 60);
    let frac = d.subsec_nanos();
    let secs = if frac == 0 {
        format!("{s}s")
    } else {
        let f = format!("{:09}", frac);
        format!("{s}.{}s", f.trim_end_matches('0'))
    };
    if h > 0 {
        format!("{h}h{m}m{secs}")
    } else if m > 0 {
        format!("{m}m{secs}")
    } else {
        secs
    }
}

/// Resolves a probe port, as upstream's `ResolveContainerPort`: a number, or the name of one
/// of the container's ports, or a number written as a string.
pub fn resolve_port(port: &IntOrString, container: &Container) -> Result<u16, String> {
    let n: i64 = match port {
        IntOrString::Int(n) => i64::from(*n),
        IntOrString::String(name) => {
            match container.ports.iter().flatten().find(|p| p.name.as_deref() == Some(name.as_str())) {
                Some(p) => i64::from(p.container_port),
                None => name.parse::<i64>().map_err(|_| format!("strconv.Atoi: parsing {name:?}: invalid syntax"))?,
            }
        }
    };
    match u16::try_from(n) {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(format!("invalid port number: {n}")),
    }
}

/// The probe's timeout (`timeoutSeconds`, default and minimum 1 s).
pub fn timeout_of(probe: &Probe) -> Duration {
    Duration::from_secs(u64::try_from(probe.timeout_seconds.unwrap_or(1)).unwrap_or(1).max(1))
}

fn host_or_pod_ip(host: Option<&str>, target: &ProbeTarget) -> Result<String, String> {
    match host.filter(|h| !h.is_empty()) {
        Some(h) => Ok(h.to_string()),
        None => target.pod_ip.map(|ip| ip.to_string()).ok_or_else(|| "the pod has no IP address yet".to_string()),
    }
}

/// Expands `$(VAR)` in an exec command with the container's literal env values (upstream's
/// `ExpandContainerCommandOnlyStatic`).
pub fn expand_command(cmd: &[String], container: &Container) -> Vec<String> {
    let vars: Vec<(&str, &str)> = container
        .env
        .iter()
        .flatten()
        .filter(|e| e.value_from.is_none())
        .map(|e| (e.name.as_str(), e.value.as_deref().unwrap_or("")))
        .collect();
    cmd.iter()
        .map(|c| {
            crate::pods::env::expansion::expand(c, |k| {
                vars.iter().rev().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
            })
        })
        .collect()
}

/// Builds the HTTP GET a probe or hook sends.
pub(crate) fn http_request(
    action: &k8s_openapi::api::core::v1::HTTPGetAction,
    target: &ProbeTarget,
    user_agent: &str,
) -> Result<http_get::GetRequest, String> {
    let scheme = match action.scheme.as_deref().map(str::to_ascii_lowercase).as_deref() {
        None | Some("") | Some("http") => http_get::Scheme::Http,
        Some("https") => http_get::Scheme::Https,
        Some(other) => return Err(format!("unsupported scheme: {other:?}")),
    };
    let host = host_or_pod_ip(action.host.as_deref(), target)?;
    let port = resolve_port(&action.port, &target.container)?;
    Ok(http_get::GetRequest {
        target: http_get::Target::new(scheme, &host, port, action.path.as_deref().unwrap_or("")),
        headers: action.http_headers.iter().flatten().map(|h| (h.name.clone(), h.value.clone())).collect(),
        user_agent: user_agent.to_string(),
    })
}

async fn run_once(runtime: &dyn RuntimeService, probe: &Probe, target: &ProbeTarget) -> ProbeOutcome {
    let timeout = timeout_of(probe);
    if let Some(action) = &probe.http_get {
        let req = match http_request(action, target, USER_AGENT) {
            Ok(r) => r,
            Err(e) => return ProbeOutcome::new(ProbeResult::Unknown, e),
        };
        return match http_get::get(&req, Instant::now() + timeout).await {
            Ok(resp) => {
                let body = String::from_utf8_lossy(&resp.body).into_owned();
                match resp.status {
                    200..=299 => ProbeOutcome::new(ProbeResult::Success, body),
                    300..=399 => ProbeOutcome::new(
                        ProbeResult::Warning,
                        format!("Probe terminated redirects, Response body: {body}"),
                    ),
                    status => {
                        ProbeOutcome::new(ProbeResult::Failure, format!("HTTP probe failed with statuscode: {status}"))
                    }
                }
            }
            Err(e) => ProbeOutcome::new(ProbeResult::Failure, e.to_string()),
        };
    }
    if let Some(action) = &probe.tcp_socket {
        let port = match resolve_port(&action.port, &target.container) {
            Ok(p) => p,
            Err(e) => return ProbeOutcome::new(ProbeResult::Unknown, e),
        };
        let host = match host_or_pod_ip(action.host.as_deref(), target) {
            Ok(h) => h,
            Err(e) => return ProbeOutcome::new(ProbeResult::Unknown, e),
        };
        return match dial::dial(&host, port, Instant::now() + timeout).await {
            Ok(stream) => {
                drop(stream);
                ProbeOutcome::new(ProbeResult::Success, "")
            }
            Err(e) => ProbeOutcome::new(ProbeResult::Failure, e.to_string()),
        };
    }
    if let Some(action) = &probe.exec {
        let cmd = expand_command(action.command.as_deref().unwrap_or_default(), &target.container);
        let (result, output) = exec::probe(runtime, &target.container_id, &cmd, timeout).await;
        return ProbeOutcome::new(result, output);
    }
    if let Some(action) = &probe.grpc {
        let Some(ip) = target.pod_ip else {
            return ProbeOutcome::new(ProbeResult::Unknown, "the pod has no IP address yet");
        };
        let port = match u16::try_from(action.port) {
            Ok(p) if p > 0 => p,
            _ => return ProbeOutcome::new(ProbeResult::Unknown, format!("invalid port number: {}", action.port)),
        };
        let (result, output) =
            grpc::check(&ip.to_string(), port, action.service.as_deref().unwrap_or(""), timeout).await;
        return ProbeOutcome::new(result, output);
    }
    ProbeOutcome::new(ProbeResult::Unknown, format!("missing probe handler for container {}", target.container.name))
}

/// Runs `probe` once against `target`. A probe that cannot be run (Unknown) is retried up to
/// three times, as upstream's `runProbeWithRetries`.
pub async fn probe_once(runtime: &dyn RuntimeService, probe: &Probe, target: &ProbeTarget) -> ProbeOutcome {
    let mut outcome = run_once(runtime, probe, target).await;
    for _ in 1..3 {
        if outcome.result != ProbeResult::Unknown {
            break;
        }
        outcome = run_once(runtime, probe, target).await;
    }
    outcome
}

#[cfg(test)]
pub(crate) mod tests;
