//! Events recorded in batches: a controller that creates or deletes many pods in one sync
//! records their events concurrently instead of one API round trip after another.

use futures::future::join_all;
use k1s_runtime::events::{EventType, Recorder};
use k8s_openapi::api::core::v1::ObjectReference;

/// Events about one object, recorded together by [`Batch::record`].
#[derive(Default)]
pub struct Batch {
    events: Vec<(EventType, &'static str, String)>,
}

impl Batch {
    pub fn normal(&mut self, reason: &'static str, message: String) {
        self.events.push((EventType::Normal, reason, message));
    }

    pub fn warning(&mut self, reason: &'static str, message: String) {
        self.events.push((EventType::Warning, reason, message));
    }

    /// Records every event (best effort, like every event).
    pub async fn record(self, recorder: &Recorder, object: &ObjectReference) {
        join_all(self.events.iter().map(|(kind, reason, message)| recorder.record(object, *kind, reason, message)))
            .await;
    }
}
