//! postStart and preStop handlers, as upstream's `pkg/kubelet/lifecycle/handlers.go`: exec
//! (CRI ExecSync; a non-zero exit fails), httpGet (only a failed request fails, any status
//! code is fine; an HTTPS hook answered in plain HTTP is retried over HTTP) and sleep, each
//! bounded by the caller's timeout.

use super::probes::exec::{self, ExecRun};
use super::probes::{expand_command, go_duration, http_get, http_request, ProbeTarget};
use k1s_cri::RuntimeService;
use k8s_openapi::api::core::v1::LifecycleHandler;
use std::time::Duration;
use tokio::time::Instant;

/// The User-Agent of HTTP hooks.
pub const USER_AGENT: &str = "kube-lifecycle/1.35";

/// Which handler failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HookKind {
    Exec,
    HttpGet,
    Sleep,
    Invalid,
}

/// A failed hook. Displays the error; [`HookFailure::event_message`] gives upstream's
/// `FailedPostStartHook` / `FailedPreStopHook` event text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{error}")]
pub struct HookFailure {
    pub kind: HookKind,
    /// What the handler was: the command (`[sh -c exit 1]`), the path, or the seconds.
    pub handler: String,
    pub error: String,
    /// The exec command's output.
    pub output: String,
}

impl HookFailure {
    /// Upstream's event message; `pod` is `name_namespace(uid)` as upstream's `format.Pod`.
    pub fn event_message(&self, container: &str, pod: &str) -> String {
        match self.kind {
            HookKind::Exec => format!(
                "Exec lifecycle hook ({}) for Container {container:?} in Pod {pod:?} failed - error: {}, message: {:?}",
                self.handler, self.error, self.output
            ),
            HookKind::HttpGet => format!(
                "HTTP lifecycle hook ({}) for Container {container:?} in Pod {pod:?} failed - error: {}",
                self.handler, self.error
            ),
            HookKind::Sleep => format!(
                "Sleep lifecycle hook ({}) for Container {container:?} in Pod {pod:?} failed - error: {}",
                self.handler, self.error
            ),
            HookKind::Invalid => format!("Cannot run handler: {}", self.error),
        }
    }
}

/// Runs `handler` for the container of `target`, giving up after `timeout`.
pub async fn run_hook(
    runtime: &dyn RuntimeService,
    handler: &LifecycleHandler,
    target: &ProbeTarget,
    timeout: Duration,
) -> Result<(), HookFailure> {
    if let Some(action) = &handler.exec {
        let cmd = expand_command(action.command.as_deref().unwrap_or_default(), &target.container);
        let fail = |error: String, output: String| HookFailure {
            kind: HookKind::Exec,
            handler: format!("[{}]", cmd.join(" ")),
            error,
            output,
        };
        return match exec::run(runtime, &target.container_id, &cmd, timeout).await {
            ExecRun::Exited { exit_code: 0, .. } => Ok(()),
            ExecRun::Exited { exit_code, output, stderr } => {
                Err(fail(format!("command '{}' exited with {exit_code}: {stderr}", cmd.join(" ")), output))
            }
            ExecRun::TimedOut => Err(fail(format!("command {:?} timed out after {}", cmd.join(" "), go_duration(timeout)), String::new())),
            ExecRun::Failed(e) => Err(fail(exec::grpc_error_text(&e), String::new())),
        };
    }
    if let Some(action) = &handler.http_get {
        let path = action.path.clone().unwrap_or_default();
        let fail = |error: String| HookFailure { kind: HookKind::HttpGet, handler: path.clone(), error, output: String::new() };
        let mut req = http_request(action, target, USER_AGENT).map_err(fail)?;
        let deadline = Instant::now() + timeout;
        return match http_get::get(&req, deadline).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_http_response_to_https() => {
                tracing::warn!(url = %e.url, container = %target.container.name, "HTTPS lifecycle hook got an HTTP response; retrying with HTTP");
                req.target.scheme = http_get::Scheme::Http;
                req.headers.retain(|(k, _)| !k.eq_ignore_ascii_case("authorization"));
                http_get::get(&req, deadline).await.map(drop).map_err(|_| fail(e.to_string()))
            }
            Err(e) => Err(fail(e.to_string())),
        };
    }
    if let Some(action) = &handler.sleep {
        let want = Duration::from_secs(u64::try_from(action.seconds).unwrap_or(0));
        if want > timeout {
            tokio::time::sleep(timeout).await;
            return Err(HookFailure {
                kind: HookKind::Sleep,
                handler: action.seconds.to_string(),
                error: "container terminated before sleep hook finished".into(),
                output: String::new(),
            });
        }
        tokio::time::sleep(want).await;
        return Ok(());
    }
    let what = if handler.tcp_socket.is_some() { "tcpSocket is not supported in lifecycle hooks" } else { "no action set" };
    Err(HookFailure {
        kind: HookKind::Invalid,
        handler: String::new(),
        error: format!("invalid handler: {what}"),
        output: String::new(),
    })
}
