//! k1s-store: the MVCC key-value store that is k1s's single source of truth.
//!
//! Owns: the global revision, compare-and-swap writes, range reads (also at a past revision),
//! the retained event log that lets a watch start at any retained revision, and compaction,
//! behind one handle ([`Store`]) whatever the backend. The embedded backend is RocksDB, with
//! group commit (one writer thread; concurrent writes share one synced WAL write), snapshots of
//! one revision packed in one file, and their restore ([`snapshot`]). The other backend is an
//! external etcd v3 cluster ([`EtcdConfig`], spoken to over its gRPC API).
//! Values are opaque bytes, optionally encrypted at rest by a [`Transformer`] the API server
//! provides ([`transform`]). It must never depend on API types.

mod codec;
mod etcd;
mod rocks;
pub mod snapshot;
mod store;
pub mod transform;
mod watch;

pub use etcd::EtcdConfig;
pub use store::{KeyValue, ListResult, Op, Stats, Store, StoreError, StoreOptions, COMMIT_BUCKETS};
pub use transform::{TransformError, Transformer};
pub use watch::{Event, EventKind, Memo, Watcher};
