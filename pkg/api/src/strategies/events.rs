//! Strategies for events.k8s.io: Events, which an update may create (upstream's
//! `pkg/registry/core/event/strategy.go`, which serves both groups).

use crate::strategy::{DynStrategy, ObjectHooks, Strategy, Typed};
use k8s_openapi::api::events::v1::Event;

pub fn event() -> Box<dyn DynStrategy> {
    Box::new(Typed(EventStrategy))
}

pub struct EventStrategy;

impl Strategy for EventStrategy {
    type Object = Event;
    const PREPARES: bool = false;
}

impl ObjectHooks for EventStrategy {
    fn allow_create_on_update(&self) -> bool {
        true
    }
}
