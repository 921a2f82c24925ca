//! The storage hook for resources whose writes take part in stateful allocation, keyed by
//! group-resource (upstream wraps such a resource's generic store in its own REST: Services'
//! ClusterIP and NodePort allocators). The registry reserves before a write and commits or
//! aborts the reservation by how the write ended.

use crate::error::ApiError;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The allocators, by `(group, resource)`.
pub type Allocators = BTreeMap<(&'static str, &'static str), Arc<dyn Allocator>>;

/// Allocation a resource's objects hold (addresses, ports), kept in memory and in step with
/// every write of the resource.
pub trait Allocator: Send + Sync {
    /// Whether [`Self::seed`] has run.
    fn seeded(&self) -> bool;
    /// Takes what the stored objects hold; the registry calls it once, before the first write.
    fn seed(&self, stored: &[Value]);
    /// Allocates what a new object needs, filling it in.
    fn reserve_for_create<'a>(&'a self, obj: &mut Value) -> Result<Box<dyn Reservation + 'a>, ApiError>;
    /// Allocates what an update adds, filling it in; what it gives up is freed on commit.
    fn reserve_for_update<'a>(&'a self, new: &mut Value, old: &Value) -> Result<Box<dyn Reservation + 'a>, ApiError>;
    /// The object is gone: everything it held is free.
    fn release_object(&self, obj: &Value);
}

/// What one write reserved, settled once the write has ended.
pub trait Reservation: Send {
    /// The write is stored: what it gave up goes back.
    fn commit(self: Box<Self>);
    /// The write failed or was a dry run: what it took goes back.
    fn abort(self: Box<Self>);
}
