//! What the scheduler asks of the API server: bind a pod, patch a pod's status, delete a
//! preemption victim, record an event, give a volume its claim or a claim its node. A trait, so the scheduling driver runs against a fake in
//! unit tests; [`KubeApi`] is the real one over the component's HTTPS client.

use k1s_runtime::events::{reference, EventType, Recorder};
use k8s_openapi::api::core::v1::{Binding, ObjectReference, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::Value;
use std::future::Future;

/// The component name events and field managers carry.
pub const COMPONENT: &str = "default-scheduler";

/// Identifies a pod in API calls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl PodRef {
    fn object_reference(&self) -> ObjectReference {
        reference("v1", "Pod", Some(&self.namespace), &self.name, Some(&self.uid))
    }
}

/// A failed API call; `not_found` tells a vanished pod from other failures.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("binding pod {namespace}/{name} to node {node}: {message}")]
    Bind { namespace: String, name: String, node: String, message: String },
    #[error("patching the status of pod {namespace}/{name}: {message}")]
    PatchStatus { namespace: String, name: String, message: String, not_found: bool },
    #[error("deleting pod {namespace}/{name}: {message}")]
    Delete { namespace: String, name: String, message: String, not_found: bool },
    #[error("updating {what}: {message}")]
    Storage { what: String, message: String },
}

impl ApiError {
    pub fn is_not_found(&self) -> bool {
        match self {
            ApiError::Bind { .. } | ApiError::Storage { .. } => false,
            ApiError::PatchStatus { not_found, .. } | ApiError::Delete { not_found, .. } => *not_found,
        }
    }
}

/// The scheduler's API calls.
pub trait SchedulerApi: Send + Sync + 'static {
    /// `POST pods/<name>/binding` with the pod's uid as precondition.
    fn bind(&self, pod: &PodRef, node: &str) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// A strategic merge patch of `pods/<name>/status`.
    fn patch_status(&self, pod: &PodRef, patch: Value) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// A graceful delete.
    fn delete_pod(&self, pod: &PodRef) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Records an event about the pod; best effort.
    fn event(&self, pod: &PodRef, kind: EventType, reason: &str, message: &str) -> impl Future<Output = ()> + Send;
    /// A merge patch of a PersistentVolume; the patched object's resourceVersion.
    fn patch_volume(&self, name: &str, patch: Value) -> impl Future<Output = Result<Option<String>, ApiError>> + Send;
    /// A merge patch of a PersistentVolumeClaim; the patched object's resourceVersion.
    fn patch_claim(
        &self,
        namespace: &str,
        name: &str,
        patch: Value,
    ) -> impl Future<Output = Result<Option<String>, ApiError>> + Send;
}

/// [`SchedulerApi`] over a `kube::Client`.
pub struct KubeApi {
    client: kube::Client,
    recorder: Recorder,
}

impl KubeApi {
    pub fn new(client: kube::Client) -> KubeApi {
        KubeApi { recorder: Recorder::new(client.clone(), COMPONENT, None), client }
    }

    fn pods(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), namespace)
    }
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

impl SchedulerApi for KubeApi {
    async fn bind(&self, pod: &PodRef, node: &str) -> Result<(), ApiError> {
        let binding = Binding {
            metadata: ObjectMeta {
                name: Some(pod.name.clone()),
                namespace: Some(pod.namespace.clone()),
                uid: Some(pod.uid.clone()),
                ..Default::default()
            },
            target: ObjectReference { kind: Some("Node".into()), name: Some(node.into()), ..Default::default() },
        };
        self.pods(&pod.namespace)
            .create_subresource::<_, Value>("binding", &pod.name, &PostParams::default(), &binding)
            .await
            .map(|_| ())
            .map_err(|e| ApiError::Bind {
                namespace: pod.namespace.clone(),
                name: pod.name.clone(),
                node: node.into(),
                message: e.to_string(),
            })
    }

    async fn patch_status(&self, pod: &PodRef, patch: Value) -> Result<(), ApiError> {
        let pp = PatchParams { field_manager: Some(COMPONENT.into()), ..Default::default() };
        self.pods(&pod.namespace).patch_status(&pod.name, &pp, &Patch::Strategic(patch)).await.map(|_| ()).map_err(
            |e| ApiError::PatchStatus {
                namespace: pod.namespace.clone(),
                name: pod.name.clone(),
                not_found: is_not_found(&e),
                message: e.to_string(),
            },
        )
    }

    async fn delete_pod(&self, pod: &PodRef) -> Result<(), ApiError> {
        let dp = DeleteParams {
            preconditions: Some(kube::api::Preconditions { uid: Some(pod.uid.clone()), resource_version: None }),
            ..Default::default()
        };
        self.pods(&pod.namespace).delete(&pod.name, &dp).await.map(|_| ()).map_err(|e| ApiError::Delete {
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            not_found: is_not_found(&e),
            message: e.to_string(),
        })
    }

    async fn event(&self, pod: &PodRef, kind: EventType, reason: &str, message: &str) {
        self.recorder.record(&pod.object_reference(), kind, reason, message).await;
    }

    async fn patch_volume(&self, name: &str, patch: Value) -> Result<Option<String>, ApiError> {
        let pp = PatchParams { field_manager: Some(COMPONENT.into()), ..Default::default() };
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        api.patch(name, &pp, &Patch::Merge(patch))
            .await
            .map(|v| v.metadata.resource_version)
            .map_err(|e| ApiError::Storage { what: format!("persistentvolume {name:?}"), message: e.to_string() })
    }

    async fn patch_claim(&self, namespace: &str, name: &str, patch: Value) -> Result<Option<String>, ApiError> {
        let pp = PatchParams { field_manager: Some(COMPONENT.into()), ..Default::default() };
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), namespace);
        api.patch(name, &pp, &Patch::Merge(patch)).await.map(|c| c.metadata.resource_version).map_err(|e| {
            ApiError::Storage { what: format!("persistentvolumeclaim \"{namespace}/{name}\""), message: e.to_string() }
        })
    }
}
