//! `ResourceQuota` admission, as upstream's plugin (validating, last in the chain): a create or
//! update that would take a quota's usage past its `hard` limits is refused with 403
//! (`exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2`), and an admitted
//! one is charged before the object is written, by writing the quota's new `status.used` with
//! compare-and-swap on its revision (retried with the fresh quota on conflict). Charges in one
//! namespace are serialized in the process, so concurrent creates never overshoot; the quota
//! controller recounts usage and releases what deleted objects held.

mod check;

pub use check::{check_request, QuotaDoc, Request};

use crate::admission::{Attributes, Operation, ValidatingPlugin};
use crate::error::ApiError;
use crate::object;
use futures::future::BoxFuture;
use k1s_api::quota::usage::{Evaluator, Operation as QuotaOp};
use k1s_api::quota::{self, ResourceList};
use k1s_store::{Store, StoreError};
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

/// How often a charge is retried after losing a compare-and-swap race on a quota.
const CHARGE_RETRIES: usize = 8;

pub struct ResourceQuotaAdmission {
    store: Store,
    /// One lock per namespace: charges in a namespace happen one at a time.
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// A quota as read from the store, with what a compare-and-swap write needs.
struct Stored {
    key: String,
    revision: u64,
    doc: QuotaDoc,
}

impl ResourceQuotaAdmission {
    pub fn new(store: Store) -> ResourceQuotaAdmission {
        ResourceQuotaAdmission { store, locks: Mutex::default() }
    }

    fn lock_of(&self, namespace: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        locks.entry(namespace.to_string()).or_default().clone()
    }

    /// The namespace's quotas, straight from the store.
    fn quotas(&self, namespace: &str) -> Result<Vec<Stored>, ApiError> {
        let info = crate::registry::builtin("", "v1", "resourcequotas")?;
        let page = self
            .store
            .list(&format!("{}{namespace}/", info.storage_prefix()), None, 0, None)
            .map_err(|e| ApiError::internal(format!("reading the quotas of namespace {namespace}: {e}")))?;
        Ok(page
            .items
            .iter()
            .filter_map(|kv| {
                let v = object::from_storage(&kv.value, kv.mod_revision)?;
                Some(Stored { key: kv.key.clone(), revision: kv.mod_revision, doc: QuotaDoc::new(v) })
            })
            .collect())
    }

    /// Writes `used` into the quota's status if the quota is still at the revision read.
    /// `Ok(false)`: it changed meanwhile.
    async fn charge(&self, q: &Stored, used: &ResourceList) -> Result<bool, ApiError> {
        let mut obj = q.doc.object.clone();
        let Some(map) = obj.as_object_mut() else { return Ok(true) };
        let status = map.entry("status").or_insert_with(|| Value::Object(Default::default()));
        if let Some(s) = status.as_object_mut() {
            s.insert("used".into(), quota::to_json(used));
        }
        match self.store.update(&q.key, object::to_storage(&obj), Some(q.revision)).await {
            Ok(_) => Ok(true),
            Err(StoreError::Conflict { .. } | StoreError::NotFound(_)) => Ok(false),
            Err(e) => Err(ApiError::internal(format!("charging quota {}: {e}", q.doc.name))),
        }
    }

    async fn evaluate(&self, attrs: &Attributes<'_>) -> Result<(), ApiError> {
        let Some(namespace) = attrs.namespace.filter(|n| !n.is_empty()) else { return Ok(()) };
        let op = match attrs.operation {
            Operation::Create => QuotaOp::Create,
            Operation::Update => QuotaOp::Update,
            Operation::Delete | Operation::Connect => return Ok(()),
        };
        let r = attrs.resource;
        if r.resource == "events" {
            return Ok(());
        }
        let eval = Evaluator::new(r.group, r.resource);
        let Some(obj) = attrs.object.as_deref() else { return Ok(()) };
        if !eval.handles(op, attrs.subresource) || self.quotas(namespace)?.is_empty() {
            return Ok(());
        }
        let forbidden = |msg: String| ApiError::forbidden_message(r.group, r.resource, attrs.name, msg);
        let lock = self.lock_of(namespace);
        let _held = lock.lock().await;
        let mut pending: Option<BTreeSet<String>> = None;
        let mut lost = String::new();
        for _ in 0..CHARGE_RETRIES {
            let quotas: Vec<Stored> = self
                .quotas(namespace)?
                .into_iter()
                .filter(|q| pending.as_ref().is_none_or(|p| p.contains(&q.doc.name)))
                .collect();
            if quotas.is_empty() {
                return Ok(());
            }
            let docs: Vec<QuotaDoc> = quotas.iter().map(|q| q.doc.clone()).collect();
            let req = Request {
                operation: op,
                object: obj,
                old_object: attrs.old_object,
                status: attrs.subresource == Some("status"),
                now: jiff::Timestamp::now(),
            };
            let new_used = check_request(&docs, &eval, &req).map_err(forbidden)?;
            if attrs.dry_run {
                return Ok(());
            }
            let mut failed = BTreeSet::new();
            for (q, used) in quotas.iter().zip(new_used) {
                let Some(used) = used.filter(|u| !quota::equals(u, &q.doc.used)) else { continue };
                if !self.charge(q, &used).await? {
                    failed.insert(q.doc.name.clone());
                }
            }
            if failed.is_empty() {
                return Ok(());
            }
            tracing::debug!(namespace, quotas = ?failed, "quota changed while charging; retrying");
            lost = failed.iter().next().cloned().unwrap_or_default();
            pending = Some(failed);
        }
        Err(ApiError::stale("", "resourcequotas", &lost))
    }
}

impl ValidatingPlugin for ResourceQuotaAdmission {
    fn name(&self) -> &'static str {
        "ResourceQuota"
    }

    fn validate<'a>(&'a self, attrs: &'a Attributes<'_>) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(self.evaluate(attrs))
    }
}
