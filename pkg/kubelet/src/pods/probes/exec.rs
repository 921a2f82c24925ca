//! The exec probe (and exec hooks): CRI ExecSync with the probe's timeout; exit 0 is success,
//! the output is stdout then stderr, at most 10 KiB, as upstream's `pkg/probe/exec`.

use super::ProbeResult;
use crate::pods::env::fieldpath::go_quote;
use k1s_cri::v1::ExecSyncRequest;
use k1s_cri::{CriError, RuntimeService};
use std::time::Duration;

/// Upstream keeps at most this much of an exec probe's output.
pub const MAX_OUTPUT: usize = 10 * 1024;

/// Grace for a runtime that does not enforce the ExecSync timeout itself.
const LOCAL_GRACE: Duration = Duration::from_secs(2);

/// A CRI error as grpc-go prints a status error.
pub fn grpc_error_text(e: &CriError) -> String {
    match e {
        CriError::Rpc { code, message, .. } => format!("rpc error: code = {} desc = {message}", go_code_name(*code)),
        other => other.to_string(),
    }
}

fn go_code_name(code: k1s_cri::Code) -> String {
    use k1s_cri::Code;
    match code {
        Code::Ok => "OK".into(),
        Code::Cancelled => "Canceled".into(),
        other => format!("{other:?}"),
    }
}

/// What an ExecSync run produced.
pub enum ExecRun {
    /// The command ran: its exit code, its combined (truncated) output and its stderr.
    Exited { exit_code: i32, output: String, stderr: String },
    /// The command did not finish within the timeout.
    TimedOut,
    /// The runtime could not run it.
    Failed(CriError),
}

/// Runs `cmd` in the container through ExecSync, bounded by `timeout` (whole seconds, at
/// least one, are sent to the runtime).
pub async fn run(runtime: &dyn RuntimeService, container_id: &str, cmd: &[String], timeout: Duration) -> ExecRun {
    let seconds = i64::try_from(timeout.as_secs().max(1) + u64::from(timeout.subsec_nanos() > 0)).unwrap_or(i64::MAX);
    let req = ExecSyncRequest { container_id: container_id.to_string(), cmd: cmd.to_vec(), timeout: seconds };
    match tokio::time::timeout(timeout + LOCAL_GRACE, runtime.exec_sync(req)).await {
        Err(_) => ExecRun::TimedOut,
        Ok(Err(e)) if e.is_deadline_exceeded() => ExecRun::TimedOut,
        Ok(Err(e)) => ExecRun::Failed(e),
        Ok(Ok(resp)) => {
            let stderr = String::from_utf8_lossy(&resp.stderr).into_owned();
            let mut data = resp.stdout;
            data.extend_from_slice(&resp.stderr);
            data.truncate(MAX_OUTPUT);
            ExecRun::Exited { exit_code: resp.exit_code, output: String::from_utf8_lossy(&data).into_owned(), stderr }
        }
    }
}

/// The probe's verdict on an ExecSync run.
pub async fn probe(
    runtime: &dyn RuntimeService,
    container_id: &str,
    cmd: &[String],
    timeout: Duration,
) -> (ProbeResult, String) {
    match run(runtime, container_id, cmd, timeout).await {
        ExecRun::Exited { exit_code: 0, output, .. } => (ProbeResult::Success, output),
        ExecRun::Exited { output, .. } => (ProbeResult::Failure, output),
        ExecRun::TimedOut => (ProbeResult::Failure, format!("command {} timed out", go_quote(&cmd.join(" ")))),
        ExecRun::Failed(e) => (ProbeResult::Unknown, grpc_error_text(&e)),
    }
}
