//! The one error type of the CRI client: which call failed and the gRPC status code it failed
//! with, so callers branch on codes (NotFound, Unavailable, DeadlineExceeded), never on text.

use std::fmt;
use std::time::Duration;

pub use tonic::Code;

/// One CRI call (RuntimeService or ImageService RPC). Names an operation in errors, in the fake's
/// call log and in its failure injection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CriOp {
    Version,
    RunPodSandbox,
    StopPodSandbox,
    RemovePodSandbox,
    PodSandboxStatus,
    ListPodSandbox,
    CreateContainer,
    StartContainer,
    StopContainer,
    RemoveContainer,
    ListContainers,
    ContainerStatus,
    UpdateContainerResources,
    ReopenContainerLog,
    ExecSync,
    Exec,
    Attach,
    PortForward,
    ContainerStats,
    ListContainerStats,
    PodSandboxStats,
    ListPodSandboxStats,
    UpdateRuntimeConfig,
    Status,
    RuntimeConfig,
    UpdatePodSandboxResources,
    ListImages,
    ImageStatus,
    PullImage,
    RemoveImage,
    ImageFsInfo,
}

impl CriOp {
    /// The RPC name as it appears on the wire (`/runtime.v1.RuntimeService/<name>`).
    pub fn as_str(self) -> &'static str {
        match self {
            CriOp::Version => "Version",
            CriOp::RunPodSandbox => "RunPodSandbox",
            CriOp::StopPodSandbox => "StopPodSandbox",
            CriOp::RemovePodSandbox => "RemovePodSandbox",
            CriOp::PodSandboxStatus => "PodSandboxStatus",
            CriOp::ListPodSandbox => "ListPodSandbox",
            CriOp::CreateContainer => "CreateContainer",
            CriOp::StartContainer => "StartContainer",
            CriOp::StopContainer => "StopContainer",
            CriOp::RemoveContainer => "RemoveContainer",
            CriOp::ListContainers => "ListContainers",
            CriOp::ContainerStatus => "ContainerStatus",
            CriOp::UpdateContainerResources => "UpdateContainerResources",
            CriOp::ReopenContainerLog => "ReopenContainerLog",
            CriOp::ExecSync => "ExecSync",
            CriOp::Exec => "Exec",
            CriOp::Attach => "Attach",
            CriOp::PortForward => "PortForward",
            CriOp::ContainerStats => "ContainerStats",
            CriOp::ListContainerStats => "ListContainerStats",
            CriOp::PodSandboxStats => "PodSandboxStats",
            CriOp::ListPodSandboxStats => "ListPodSandboxStats",
            CriOp::UpdateRuntimeConfig => "UpdateRuntimeConfig",
            CriOp::Status => "Status",
            CriOp::RuntimeConfig => "RuntimeConfig",
            CriOp::UpdatePodSandboxResources => "UpdatePodSandboxResources",
            CriOp::ListImages => "ListImages",
            CriOp::ImageStatus => "ImageStatus",
            CriOp::PullImage => "PullImage",
            CriOp::RemoveImage => "RemoveImage",
            CriOp::ImageFsInfo => "ImageFsInfo",
        }
    }

    /// Calls that only read state: safe to send again after the connection broke.
    pub fn is_read_only(self) -> bool {
        matches!(
            self,
            CriOp::Version
                | CriOp::PodSandboxStatus
                | CriOp::ListPodSandbox
                | CriOp::ListContainers
                | CriOp::ContainerStatus
                | CriOp::ContainerStats
                | CriOp::ListContainerStats
                | CriOp::PodSandboxStats
                | CriOp::ListPodSandboxStats
                | CriOp::Status
                | CriOp::RuntimeConfig
                | CriOp::ListImages
                | CriOp::ImageStatus
                | CriOp::ImageFsInfo
        )
    }
}

impl fmt::Display for CriOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed CRI call or connection set-up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CriError {
    /// The endpoint is not a `unix://` socket address.
    #[error("invalid CRI endpoint {endpoint:?}: {reason}")]
    InvalidEndpoint { endpoint: String, reason: String },
    /// The runtime could not be reached when connecting eagerly.
    #[error("connecting to the CRI runtime at {endpoint}: {message}")]
    Connect { endpoint: String, message: String },
    /// The runtime answered the call with a non-OK gRPC status (or the transport failed, which
    /// tonic reports as `Unavailable`).
    #[error("CRI {op} failed with {code:?}: {message}")]
    Rpc { op: CriOp, code: Code, message: String },
    /// No answer within the call's deadline.
    #[error("CRI {op} timed out after {after:?}")]
    Timeout { op: CriOp, after: Duration },
    /// Serving a runtime implementation on a socket failed.
    #[error("serving CRI on {socket}: {message}")]
    Serve { socket: String, message: String },
}

impl CriError {
    /// An error as a runtime would answer it: `op` failed with `code` and `message`.
    pub fn rpc(op: CriOp, code: Code, message: impl Into<String>) -> Self {
        CriError::Rpc { op, code, message: message.into() }
    }

    /// The `NotFound` answer for `op` about `what` (a sandbox, container or image).
    pub fn not_found(op: CriOp, what: impl fmt::Display) -> Self {
        CriError::rpc(op, Code::NotFound, format!("{what}: not found"))
    }

    /// Keeps the code and message of a gRPC status answered to `op`.
    pub fn from_status(op: CriOp, status: &tonic::Status) -> Self {
        CriError::rpc(op, status.code(), status.message())
    }

    /// The gRPC code this error stands for: the runtime's answer, `DeadlineExceeded` for a local
    /// timeout, `Unavailable` when the socket cannot be reached.
    pub fn code(&self) -> Code {
        match self {
            CriError::InvalidEndpoint { .. } => Code::InvalidArgument,
            CriError::Connect { .. } => Code::Unavailable,
            CriError::Rpc { code, .. } => *code,
            CriError::Timeout { .. } => Code::DeadlineExceeded,
            CriError::Serve { .. } => Code::Internal,
        }
    }

    /// The call that failed, if the error came from a call.
    pub fn op(&self) -> Option<CriOp> {
        match self {
            CriError::Rpc { op, .. } | CriError::Timeout { op, .. } => Some(*op),
            _ => None,
        }
    }

    /// The sandbox, container or image does not exist.
    pub fn is_not_found(&self) -> bool {
        self.code() == Code::NotFound
    }

    /// The runtime is not reachable (not started yet, restarting): retry after a back-off.
    pub fn is_unavailable(&self) -> bool {
        self.code() == Code::Unavailable
    }

    /// The call ran out of time, locally or at the runtime.
    pub fn is_deadline_exceeded(&self) -> bool {
        self.code() == Code::DeadlineExceeded
    }

    /// The runtime does not implement the call (older runtimes lack newer RPCs).
    pub fn is_unimplemented(&self) -> bool {
        self.code() == Code::Unimplemented
    }

    /// This error as the gRPC status a server answers with.
    pub fn to_status(&self) -> tonic::Status {
        match self {
            CriError::Rpc { code, message, .. } => tonic::Status::new(*code, message.clone()),
            other => tonic::Status::new(other.code(), other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_code_survives_conversion_from_grpc() {
        let status = tonic::Status::not_found("container \"abc\": not found");
        let err = CriError::from_status(CriOp::ContainerStatus, &status);
        assert!(err.is_not_found());
        assert_eq!(err.op(), Some(CriOp::ContainerStatus));
        assert_eq!(err.to_string(), "CRI ContainerStatus failed with NotFound: container \"abc\": not found");
    }

    #[test]
    fn unavailable_and_timeout_are_distinguishable() {
        let down = CriError::from_status(CriOp::Version, &tonic::Status::unavailable("connection refused"));
        assert!(down.is_unavailable() && !down.is_not_found());
        let slow = CriError::Timeout { op: CriOp::PullImage, after: Duration::from_secs(120) };
        assert!(slow.is_deadline_exceeded() && !slow.is_unavailable());
        assert_eq!(slow.to_status().code(), Code::DeadlineExceeded);
    }

    #[test]
    fn rpc_error_round_trips_through_status_unchanged() {
        let err = CriError::rpc(CriOp::PullImage, Code::NotFound, "failed to resolve reference");
        let back = CriError::from_status(CriOp::PullImage, &err.to_status());
        assert_eq!(back, err);
    }

    #[test]
    fn only_reads_are_marked_read_only() {
        assert!(CriOp::ListContainers.is_read_only());
        assert!(!CriOp::RunPodSandbox.is_read_only());
        assert!(!CriOp::PullImage.is_read_only());
        assert_eq!(CriOp::UpdatePodSandboxResources.to_string(), "UpdatePodSandboxResources");
    }
}
