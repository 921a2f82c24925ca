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
            ExecRun::TimedOut => Err(fail(
                format!("command {:?} timed out after {}", cmd.join(" "), go_duration(timeout)),
                String::new(),
            )),
            ExecRun::Failed(e) => Err(fail(exec::grpc_error_text(&e), String::new())),
        };
    }
    if let Some(action) = &handler.http_get {
        let path = action.path.clone().unwrap_or_default();
        let fail = |error: String| HookFailure {
            kind: HookKind::HttpGet,
            handler: path.clone(),
            error,
            output: String::new(),
        };
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
    let what =
        if handler.tcp_socket.is_some() { "tcpSocket is not supported in lifecycle hooks" } else { "no action set" };
    Err(HookFailure {
        kind: HookKind::Invalid,
        handler: String::new(),
        error: format!("invalid handler: {what}"),
        output: String::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::probes::tests::{running_container, serve, status, target};
    use k1s_cri::{ExecScript, FakeRuntime};
    use k8s_openapi::api::core::v1::{ExecAction, HTTPGetAction, HTTPHeader, SleepAction, TCPSocketAction};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    fn exec(cmd: &[&str]) -> LifecycleHandler {
        LifecycleHandler {
            exec: Some(ExecAction { command: Some(cmd.iter().map(|s| s.to_string()).collect()) }),
            ..Default::default()
        }
    }

    fn http_get(port: u16, path: &str) -> LifecycleHandler {
        LifecycleHandler {
            http_get: Some(HTTPGetAction {
                path: Some(path.into()),
                port: IntOrString::Int(i32::from(port)),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn exec_hooks_fail_on_a_non_zero_exit_with_upstream_messages() {
        let rt = FakeRuntime::new();
        let id = running_container(&rt).await;
        run_hook(&rt, &exec(&["sh", "-c", "exit 0"]), &target(&id), Duration::from_secs(5)).await.expect("ok");
        rt.script_exec(
            ExecScript::responds(k1s_cri::v1::ExecSyncResponse {
                stdout: b"partial\n".to_vec(),
                stderr: b"boom\n".to_vec(),
                exit_code: 2,
            })
            .for_command(["/bin/hook"]),
        );
        let err = run_hook(&rt, &exec(&["/bin/hook"]), &target(&id), Duration::from_secs(5)).await.expect_err("fails");
        assert_eq!(err.to_string(), "command '/bin/hook' exited with 2: boom\n");
        assert_eq!(
            err.event_message("app", "web_default(uid-1)"),
            "Exec lifecycle hook ([/bin/hook]) for Container \"app\" in Pod \"web_default(uid-1)\" failed - error: command '/bin/hook' exited with 2: boom\n, message: \"partial\\nboom\\n\""
        );
    }

    #[tokio::test]
    async fn http_hooks_succeed_on_any_status_and_fail_on_connection_errors() {
        let rt = FakeRuntime::new();
        let (port, seen) = serve(status(500), Duration::ZERO).await;
        run_hook(&rt, &http_get(port, "/shutdown"), &target("c"), Duration::from_secs(2))
            .await
            .expect("any status is fine");
        let (path, headers) = seen.lock().expect("seen")[0].clone();
        assert_eq!(path, "/shutdown");
        assert_eq!(headers["user-agent"], "kube-lifecycle/1.35");

        let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        let err =
            run_hook(&rt, &http_get(closed, "/x"), &target("c"), Duration::from_secs(2)).await.expect_err("refused");
        assert_eq!(
            err.event_message("app", "web_default(u)"),
            format!("HTTP lifecycle hook (/x) for Container \"app\" in Pod \"web_default(u)\" failed - error: Get \"http://127.0.0.1:{closed}/x\": dial tcp 127.0.0.1:{closed}: connect: connection refused")
        );
    }

    #[tokio::test]
    async fn https_hook_answered_in_plain_http_is_retried_over_http() {
        let rt = FakeRuntime::new();
        let (port, seen) = serve(status(200), Duration::ZERO).await;
        let mut h = http_get(port, "/hook");
        let action = h.http_get.as_mut().expect("http");
        action.scheme = Some("HTTPS".into());
        action.http_headers = Some(vec![HTTPHeader { name: "Authorization".into(), value: "Bearer x".into() }]);
        run_hook(&rt, &h, &target("c"), Duration::from_secs(2)).await.expect("fallback");
        let seen = seen.lock().expect("seen");
        let (_, headers) = seen.last().expect("a plain request");
        assert!(headers.get("authorization").is_none(), "credentials are not resent over HTTP");
    }

    #[tokio::test(start_paused = true)]
    async fn sleep_hooks_sleep_and_fail_when_cut_short() {
        let rt = FakeRuntime::new();
        let sleep = |s: i64| LifecycleHandler { sleep: Some(SleepAction { seconds: s }), ..Default::default() };
        let started = Instant::now();
        run_hook(&rt, &sleep(5), &target("c"), Duration::from_secs(30)).await.expect("slept");
        assert_eq!(started.elapsed().as_secs(), 5);
        let err = run_hook(&rt, &sleep(60), &target("c"), Duration::from_secs(10)).await.expect_err("cut short");
        assert_eq!(
            err.event_message("app", "p_ns(u)"),
            "Sleep lifecycle hook (60) for Container \"app\" in Pod \"p_ns(u)\" failed - error: container terminated before sleep hook finished"
        );
    }

    #[tokio::test]
    async fn tcp_socket_handlers_are_invalid() {
        let rt = FakeRuntime::new();
        let h = LifecycleHandler {
            tcp_socket: Some(TCPSocketAction { host: None, port: IntOrString::Int(80) }),
            ..Default::default()
        };
        let err = run_hook(&rt, &h, &target("c"), Duration::from_secs(1)).await.expect_err("invalid");
        assert_eq!(
            err.event_message("app", "p"),
            "Cannot run handler: invalid handler: tcpSocket is not supported in lifecycle hooks"
        );
    }
}
