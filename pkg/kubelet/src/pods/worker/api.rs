//! The Kubernetes API as a pod worker sees it: its pod's status and final delete, events about
//! the pod, and the objects its volumes, environment and pull secrets read. [`KubePodApi`] goes
//! through the kubelet's client; [`FakePodApi`] records everything in memory for tests.

use crate::pods::volumes::{ApiSource, MemorySource, ObjectSource};
use k1s_runtime::events::{EventType, Recorder};
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use serde_json::Value;
use std::sync::{Arc, Mutex, MutexGuard};

/// Why a call on the pod failed.
#[derive(Debug, thiserror::Error)]
pub enum PodApiError {
    /// The pod (with this uid) is gone.
    #[error("{op} pod {namespace}/{name}: not found")]
    NotFound { op: &'static str, namespace: String, name: String },
    /// A precondition (the uid) did not hold: another pod now has the name.
    #[error("{op} pod {namespace}/{name}: conflict")]
    Conflict { op: &'static str, namespace: String, name: String },
    /// Anything else; the worker retries on its next sync.
    #[error("{op} pod {namespace}/{name}: {error}")]
    Request { op: &'static str, namespace: String, name: String, error: kube::Error },
}

/// The calls a pod worker makes to the API server.
#[async_trait::async_trait]
pub trait PodApi: Send + Sync {
    /// Merge-patches the pod's status with `patch` (`{"metadata": {"uid"}, "status": {..}}`).
    async fn patch_status(&self, namespace: &str, name: &str, patch: &Value) -> Result<(), PodApiError>;

    /// The kubelet's final delete of a terminated pod: grace period 0, only if the pod still
    /// has `uid`.
    async fn delete_terminated(&self, namespace: &str, name: &str, uid: &str) -> Result<(), PodApiError>;

    /// Records an event about `object` without waiting: events must never slow a pod down.
    fn event(&self, object: &ObjectReference, kind: EventType, reason: &str, message: &str);

    /// Where ConfigMaps, Secrets, claims and tokens come from.
    fn objects(&self) -> &dyn ObjectSource;
}

/// The API through the kubelet's client, with its event recorder.
pub struct KubePodApi {
    client: kube::Client,
    recorder: Arc<Recorder>,
    objects: ApiSource,
}

impl KubePodApi {
    pub fn new(client: kube::Client, recorder: Arc<Recorder>) -> KubePodApi {
        KubePodApi { objects: ApiSource::new(client.clone()), client, recorder }
    }
}

fn classify(op: &'static str, namespace: &str, name: &str, error: kube::Error) -> PodApiError {
    let (namespace, name) = (namespace.to_string(), name.to_string());
    match error {
        kube::Error::Api(e) if e.code == 404 => PodApiError::NotFound { op, namespace, name },
        kube::Error::Api(e) if e.code == 409 => PodApiError::Conflict { op, namespace, name },
        error => PodApiError::Request { op, namespace, name, error },
    }
}

#[async_trait::async_trait]
impl PodApi for KubePodApi {
    async fn patch_status(&self, namespace: &str, name: &str, patch: &Value) -> Result<(), PodApiError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        match api.patch_status(name, &PatchParams::default(), &Patch::Merge(patch)).await {
            Ok(_) => Ok(()),
            Err(e) => Err(classify("patching the status of", namespace, name, e)),
        }
    }

    async fn delete_terminated(&self, namespace: &str, name: &str, uid: &str) -> Result<(), PodApiError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions { uid: Some(uid.to_string()), resource_version: None }),
            ..Default::default()
        };
        match api.delete(name, &dp).await {
            Ok(_) => Ok(()),
            Err(e) => Err(classify("deleting", namespace, name, e)),
        }
    }

    fn event(&self, object: &ObjectReference, kind: EventType, reason: &str, message: &str) {
        let (recorder, object, reason, message) =
            (self.recorder.clone(), object.clone(), reason.to_string(), message.to_string());
        tokio::spawn(async move { recorder.record(&object, kind, &reason, &message).await });
    }

    fn objects(&self) -> &dyn ObjectSource {
        &self.objects
    }
}

/// An event the worker recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedEvent {
    /// `spec.containers{app}` for container events, empty for pod events.
    pub field_path: String,
    pub kind: EventType,
    pub reason: String,
    pub message: String,
}

/// A final delete the worker sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedDelete {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

#[derive(Default)]
struct FakeState {
    statuses: Vec<Value>,
    deletes: Vec<RecordedDelete>,
    events: Vec<RecordedEvent>,
    /// Status patches answer NotFound (the pod is gone).
    gone: bool,
}

/// An in-memory API: records status patches, deletes and events; objects come from a
/// [`MemorySource`].
#[derive(Default)]
pub struct FakePodApi {
    state: Mutex<FakeState>,
    pub objects: MemorySource,
}

impl FakePodApi {
    pub fn new() -> FakePodApi {
        FakePodApi::default()
    }

    fn lock(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Every status patch received, oldest first.
    pub fn statuses(&self) -> Vec<Value> {
        self.lock().statuses.clone()
    }

    /// The `status` of the newest patch (`Null` before the first).
    pub fn last_status(&self) -> Value {
        self.lock().statuses.last().and_then(|p| p.get("status").cloned()).unwrap_or_default()
    }

    /// Every final delete received.
    pub fn deletes(&self) -> Vec<RecordedDelete> {
        self.lock().deletes.clone()
    }

    /// Every event recorded, oldest first.
    pub fn events(&self) -> Vec<RecordedEvent> {
        self.lock().events.clone()
    }

    /// The events with this reason.
    pub fn events_with_reason(&self, reason: &str) -> Vec<RecordedEvent> {
        self.lock().events.iter().filter(|e| e.reason == reason).cloned().collect()
    }

    /// From now on the pod is gone: status patches and deletes answer NotFound.
    pub fn remove_pod(&self) {
        self.lock().gone = true;
    }
}

#[async_trait::async_trait]
impl PodApi for FakePodApi {
    async fn patch_status(&self, namespace: &str, name: &str, patch: &Value) -> Result<(), PodApiError> {
        let mut state = self.lock();
        if state.gone {
            let op = "patching the status of";
            return Err(PodApiError::NotFound { op, namespace: namespace.into(), name: name.into() });
        }
        state.statuses.push(patch.clone());
        Ok(())
    }

    async fn delete_terminated(&self, namespace: &str, name: &str, uid: &str) -> Result<(), PodApiError> {
        let mut state = self.lock();
        state.deletes.push(RecordedDelete { namespace: namespace.into(), name: name.into(), uid: uid.into() });
        if state.gone {
            return Err(PodApiError::NotFound { op: "deleting", namespace: namespace.into(), name: name.into() });
        }
        Ok(())
    }

    fn event(&self, object: &ObjectReference, kind: EventType, reason: &str, message: &str) {
        self.lock().events.push(RecordedEvent {
            field_path: object.field_path.clone().unwrap_or_default(),
            kind,
            reason: reason.into(),
            message: message.into(),
        });
    }

    fn objects(&self) -> &dyn ObjectSource {
        &self.objects
    }
}
