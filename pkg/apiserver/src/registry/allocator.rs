//! The storage hook for resources whose writes take part in stateful allocation, keyed by
//! group-resource (upstream wraps such a resource's generic store in its own REST: Services'
//! ClusterIP and NodePort allocators). The registry reserves before a write and commits or
//! aborts the reservation by how the write ended.

use crate::error::ApiError;
use futures::future::BoxFuture;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The allocators, by `(group, resource)`.
pub type Allocators = BTreeMap<(&'static str, &'static str), Arc<dyn Allocator>>;

/// Allocation a resource's objects hold (addresses, ports). What is allocated is recorded in
/// the store, so that every API server sharing it sees the same allocations.
pub trait Allocator: Send + Sync {
    /// Allocates what a new object needs, filling it in; under `dry_run` nothing is recorded.
    fn reserve_for_create<'a>(
        &'a self,
        obj: &'a mut Value,
        dry_run: bool,
    ) -> BoxFuture<'a, Result<Box<dyn Reservation>, ApiError>>;
    /// Allocates what an update adds, filling it in; what it gives up is freed on commit.
    fn reserve_for_update<'a>(
        &'a self,
        new: &'a mut Value,
        old: &'a Value,
        dry_run: bool,
    ) -> BoxFuture<'a, Result<Box<dyn Reservation>, ApiError>>;
    /// The object is gone: everything it held is free.
    fn release_object<'a>(&'a self, obj: &'a Value) -> BoxFuture<'a, ()>;
}

/// What one write reserved, settled once the write has ended.
pub trait Reservation: Send {
    /// The write is stored: what it gave up goes back.
    fn commit(self: Box<Self>) -> BoxFuture<'static, ()>;
    /// The write failed or was a dry run: what it took goes back.
    fn abort(self: Box<Self>) -> BoxFuture<'static, ()>;
}
