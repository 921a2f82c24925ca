//! k1s-store: the RocksDB-backed MVCC key-value store that is k1s's single source of truth.
//!
//! Owns: the global revision, compare-and-swap writes, range reads (also at a past revision),
//! the retained event log that lets a watch start at any retained revision, compaction, and
//! group commit (one writer thread; concurrent writes share one synced WAL write), and
//! snapshots of one revision packed in one file, and their restore ([`snapshot`]).
//! Values are opaque bytes. It must never depend on API types or the network.

mod codec;
pub mod snapshot;
mod store;
mod watch;

pub use store::{KeyValue, ListResult, Op, Stats, Store, StoreError, StoreOptions, COMMIT_BUCKETS};
pub use watch::{Event, EventKind, Watcher};
