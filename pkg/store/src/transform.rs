//! The hook for encryption at rest: with a [`Transformer`] in [`crate::StoreOptions`], the
//! store hands every value it writes to it and every value it reads back through it. What the
//! backends keep (RocksDB's files, WAL and event log; etcd and the etcd backend's mirror) is the
//! transformed bytes; whoever reads the store (`get`, `list`, watches, the results of writes) gets
//! plain ones. Which keys are transformed, and how, is the transformer's business: the store
//! only passes bytes and keys.
//!
//! Reads decode on the way out: a live event is decoded once for all its watchers, a watcher
//! catching up from the log decodes what it reads. A value that cannot be decoded fails the read
//! (`StoreError::Transform`), never reaches a reader as garbage.

use crate::store::{KeyValue, StoreError};
use crate::watch::Event;
use bytes::Bytes;

/// Turns values into what the store keeps and back (see the module doc).
pub trait Transformer: Send + Sync + 'static {
    /// The bytes to store for `value` under `key`; `None` stores `value` as it is.
    fn transform_to_storage(&self, key: &str, value: &[u8]) -> Result<Option<Vec<u8>>, TransformError>;
    /// The plain bytes of `stored`, kept under `key`; `None` when `stored` is plain already.
    fn transform_from_storage(&self, key: &str, stored: &[u8]) -> Result<Option<Vec<u8>>, TransformError>;
}

impl std::fmt::Debug for dyn Transformer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Transformer")
    }
}

/// Why a value could not be transformed: said in full, for the reader's error (the key is added
/// by the store).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TransformError(pub String);

fn failed(key: &str, e: TransformError) -> StoreError {
    StoreError::Transform { key: key.to_string(), message: e.0 }
}

/// The stored form of `value` under `key`.
pub(crate) fn to_storage(t: &dyn Transformer, key: &str, value: &Bytes) -> Result<Bytes, StoreError> {
    match t.transform_to_storage(key, value) {
        Ok(Some(stored)) => Ok(Bytes::from(stored)),
        Ok(None) => Ok(value.clone()),
        Err(e) => Err(failed(key, e)),
    }
}

/// `kv` with its value plain.
pub(crate) fn plain_kv(t: &dyn Transformer, mut kv: KeyValue) -> Result<KeyValue, StoreError> {
    match t.transform_from_storage(&kv.key, &kv.value) {
        Ok(Some(plain)) => kv.value = Bytes::from(plain),
        Ok(None) => {}
        Err(e) => return Err(failed(&kv.key, e)),
    }
    Ok(kv)
}

/// `ev` with its values (current and previous) plain; `None` when they are plain already.
pub(crate) fn plain_event(t: &dyn Transformer, ev: &Event) -> Result<Option<Event>, StoreError> {
    let plain = |kv: &KeyValue| t.transform_from_storage(&kv.key, &kv.value).map_err(|e| failed(&kv.key, e));
    let value = plain(&ev.kv)?;
    let prev = match &ev.prev {
        Some(p) => plain(p)?,
        None => None,
    };
    if value.is_none() && prev.is_none() {
        return Ok(None);
    }
    let mut kv = ev.kv.clone();
    if let Some(v) = value {
        kv.value = Bytes::from(v);
    }
    let prev = match (ev.prev.clone(), prev) {
        (Some(mut p), Some(v)) => {
            p.value = Bytes::from(v);
            Some(p)
        }
        (p, _) => p,
    };
    Ok(Some(Event::new(ev.revision, ev.kind, kv, prev)))
}
