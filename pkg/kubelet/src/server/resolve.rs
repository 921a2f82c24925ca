//! Finding a pod's sandbox and containers in the runtime by the labels the kubelet puts on them
//! (`io.kubernetes.pod.namespace`, `io.kubernetes.pod.name`, `io.kubernetes.pod.uid`,
//! `io.kubernetes.container.name`): the newest sandbox of that name is the pod (an older one
//! belongs to a deleted pod of the same name), the newest container instance is the current
//! one, and `previous` is the instance before a running one (or the last one, while the
//! container waits to restart).

use crate::pods::spec::{LABEL_CONTAINER_NAME, LABEL_POD_NAME, LABEL_POD_NAMESPACE, LABEL_POD_UID};
use k1s_cri::v1 as cri;
use k1s_cri::{CriError, RuntimeService};
use std::collections::HashMap;

#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("pod {pod:?} does not exist")]
    NoPod { pod: String },
    #[error("container {container:?} in pod {pod:?} is not available")]
    NoContainer { pod: String, container: String },
    #[error("previous terminated container {container:?} in pod {pod:?} not found")]
    NoPrevious { pod: String, container: String },
    #[error("container not found ({container:?})")]
    NotRunning { container: String },
    #[error("pod {pod:?} is not running")]
    SandboxNotReady { pod: String },
    #[error("asking the container runtime about pod {pod:?}")]
    Runtime { pod: String, source: CriError },
}

impl ResolveError {
    /// The HTTP status the kubelet answers with.
    pub fn status(&self) -> u16 {
        match self {
            ResolveError::NoPod { .. } => 404,
            ResolveError::Runtime { .. } => 500,
            _ => 400,
        }
    }
}

fn selector(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// The pod's newest sandbox.
pub async fn sandbox(rt: &dyn RuntimeService, namespace: &str, pod: &str) -> Result<cri::PodSandbox, ResolveError> {
    let filter = cri::PodSandboxFilter {
        label_selector: selector(&[(LABEL_POD_NAMESPACE, namespace), (LABEL_POD_NAME, pod)]),
        ..Default::default()
    };
    let list = rt
        .list_pod_sandbox(cri::ListPodSandboxRequest { filter: Some(filter) })
        .await
        .map_err(|source| ResolveError::Runtime { pod: pod.to_string(), source })?;
    list.items.into_iter().max_by_key(|s| s.created_at).ok_or_else(|| ResolveError::NoPod { pod: pod.to_string() })
}

/// The instances of `container` in the pod's newest sandbox generation, newest first.
async fn instances(
    rt: &dyn RuntimeService,
    namespace: &str,
    pod: &str,
    container: &str,
) -> Result<Vec<cri::Container>, ResolveError> {
    let sb = sandbox(rt, namespace, pod).await?;
    let mut labels = vec![(LABEL_POD_NAMESPACE, namespace), (LABEL_POD_NAME, pod), (LABEL_CONTAINER_NAME, container)];
    if let Some(uid) = sb.labels.get(LABEL_POD_UID) {
        labels.push((LABEL_POD_UID, uid.as_str()));
    }
    let filter = cri::ContainerFilter { label_selector: selector(&labels), ..Default::default() };
    let list = rt
        .list_containers(cri::ListContainersRequest { filter: Some(filter) })
        .await
        .map_err(|source| ResolveError::Runtime { pod: pod.to_string(), source })?;
    let mut cs = list.containers;
    cs.sort_by_key(|c| std::cmp::Reverse(c.created_at));
    Ok(cs)
}

fn is_live(c: &cri::Container) -> bool {
    matches!(c.state(), cri::ContainerState::ContainerRunning | cri::ContainerState::ContainerCreated)
}

/// The container instance whose log `kubectl logs` (with `previous` or not) shows.
pub async fn log_container(
    rt: &dyn RuntimeService,
    namespace: &str,
    pod: &str,
    container: &str,
    previous: bool,
) -> Result<cri::Container, ResolveError> {
    let cs = instances(rt, namespace, pod, container).await?;
    let chosen = if !previous {
        cs.into_iter().next()
    } else {
        let live_first = cs.first().is_some_and(is_live);
        cs.into_iter().nth(if live_first { 1 } else { 0 })
    };
    chosen.ok_or_else(|| {
        let (pod, container) = (pod.to_string(), container.to_string());
        if previous {
            ResolveError::NoPrevious { pod, container }
        } else {
            ResolveError::NoContainer { pod, container }
        }
    })
}

/// The running instance of `container`, for exec and attach.
pub async fn running_container(
    rt: &dyn RuntimeService,
    namespace: &str,
    pod: &str,
    container: &str,
) -> Result<cri::Container, ResolveError> {
    let cs = instances(rt, namespace, pod, container).await?;
    cs.into_iter()
        .find(|c| c.state() == cri::ContainerState::ContainerRunning)
        .ok_or_else(|| ResolveError::NotRunning { container: container.to_string() })
}

/// The pod's ready sandbox, for port-forward.
pub async fn ready_sandbox(
    rt: &dyn RuntimeService,
    namespace: &str,
    pod: &str,
) -> Result<cri::PodSandbox, ResolveError> {
    let sb = sandbox(rt, namespace, pod).await?;
    if sb.state() != cri::PodSandboxState::SandboxReady {
        return Err(ResolveError::SandboxNotReady { pod: pod.to_string() });
    }
    Ok(sb)
}
