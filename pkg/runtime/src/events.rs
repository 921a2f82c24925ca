//! Events as users see them in `kubectl describe` and `kubectl events`: core/v1 Events about an
//! object, deduplicated by (object, type, reason, message) with a growing `count`.

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::{Api, Patch, PatchParams, PostParams};
use std::collections::HashMap;
use std::sync::Mutex;

/// Normal or Warning.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// (namespace, object uid, type, reason, message): what makes two events "the same".
type EventKey = (String, String, EventType, String, String);

/// Records events for one component (`source.component`, e.g. `kubelet`, `deployment-controller`).
pub struct Recorder {
    client: kube::Client,
    component: String,
    host: Option<String>,
    /// (namespace, uid, type, reason, message) ▶ (event name, count).
    seen: Mutex<HashMap<EventKey, (String, i32)>>,
}

fn now() -> jiff::Timestamp {
    jiff::Timestamp::now()
}

impl Recorder {
    pub fn new(client: kube::Client, component: &str, host: Option<&str>) -> Recorder {
        Recorder { client, component: component.to_string(), host: host.map(str::to_string), seen: Mutex::default() }
    }

    /// Records an event about `object`; failures are logged, never returned (events are best effort).
    pub async fn record(&self, object: &ObjectReference, kind: EventType, reason: &str, message: &str) {
        let ns = object.namespace.clone().unwrap_or_else(|| "default".to_string());
        let uid = object.uid.clone().unwrap_or_default();
        let key = (ns.clone(), uid, kind, reason.to_string(), message.to_string());
        let api: Api<Event> = Api::namespaced(self.client.clone(), &ns);
        let existing = self.seen.lock().ok().and_then(|m| m.get(&key).cloned());
        let t = now();
        if let Some((name, count)) = existing {
            let patch = serde_json::json!({"count": count + 1, "lastTimestamp": Time(t)});
            match api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                Ok(_) => {
                    if let Ok(mut m) = self.seen.lock() {
                        m.insert(key, (name, count + 1));
                    }
                    return;
                }
                Err(e) => tracing::debug!(error = %e, event = %name, "event update failed; creating a new one"),
            }
        }
        let obj_name = object.name.clone().unwrap_or_default();
        let name = format!("{}.{:x}", obj_name, t.as_nanosecond() as u64);
        let ev = Event {
            metadata: ObjectMeta { name: Some(name.clone()), namespace: Some(ns), ..Default::default() },
            involved_object: object.clone(),
            reason: Some(reason.to_string()),
            message: Some(message.to_string()),
            type_: Some(kind.as_str().to_string()),
            count: Some(1),
            first_timestamp: Some(Time(t)),
            last_timestamp: Some(Time(t)),
            event_time: None::<MicroTime>,
            source: Some(EventSource { component: Some(self.component.clone()), host: self.host.clone() }),
            reporting_component: Some(self.component.clone()),
            reporting_instance: Some(self.host.clone().unwrap_or_else(|| self.component.clone())),
            ..Default::default()
        };
        match api.create(&PostParams::default(), &ev).await {
            Ok(_) => {
                if let Ok(mut m) = self.seen.lock() {
                    if m.len() > 4096 {
                        m.clear();
                    }
                    m.insert(key, (name, 1));
                }
            }
            Err(e) => tracing::debug!(error = %e, reason, "recording event failed"),
        }
    }
}

/// The reference to `obj`, of its resource's apiVersion and kind.
pub fn object_reference<K: kube::Resource<DynamicType = ()>>(obj: &K) -> ObjectReference {
    reference_to(&K::api_version(&()), &K::kind(&()), obj.meta())
}

/// The reference to an object with `meta`, of `api_version` and `kind`.
pub fn reference_to(api_version: &str, kind: &str, meta: &ObjectMeta) -> ObjectReference {
    reference(
        api_version,
        kind,
        meta.namespace.as_deref(),
        meta.name.as_deref().unwrap_or_default(),
        meta.uid.as_deref(),
    )
}

/// The reference to the object `namespace/name` (with `uid`), of `api_version` and `kind`.
pub fn reference(
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
    uid: Option<&str>,
) -> ObjectReference {
    ObjectReference {
        api_version: Some(api_version.to_string()),
        kind: Some(kind.to_string()),
        namespace: namespace.map(str::to_string),
        name: Some(name.to_string()),
        uid: uid.map(str::to_string),
        ..Default::default()
    }
}
