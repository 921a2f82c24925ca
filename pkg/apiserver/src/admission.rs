//! Admission: mutating plugins run before validation, validating plugins after it; any error
//! rejects the request before anything is written. Webhooks plug in as further plugins.

use crate::auth::UserInfo;
use crate::error::ApiError;
use futures::future::BoxFuture;
use k1s_api::ResourceInfo;
use k1s_store::{KeyValue, Op, StoreError};
use serde_json::Value;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

/// Everything a plugin may look at; mutating plugins may change `object`.
pub struct Attributes<'a> {
    pub operation: Operation,
    pub resource: &'a ResourceInfo,
    pub subresource: Option<&'a str>,
    pub namespace: Option<&'a str>,
    pub name: &'a str,
    pub user: &'a UserInfo,
    pub object: Option<&'a mut Value>,
    pub old_object: Option<&'a Value>,
    pub dry_run: bool,
    /// Warnings for the client (webhooks' `warnings`), sent back as `Warning` headers.
    pub warnings: std::sync::Mutex<Vec<String>>,
    /// Annotations for the request's audit event (PodSecurity's, a policy's); `None` when the
    /// request is not audited.
    pub audit_annotations: Option<std::sync::Mutex<Vec<(String, String)>>>,
    /// The store write an admitted create makes (validating admission only): a plugin that
    /// writes something the object must not be stored without (the quota's charge) may make
    /// this write in the same transaction, and then leaves its outcome for the registry. Only
    /// the chain's last plugin (the quota) may: a later refusal could not undo the write.
    pub write: Option<&'a PendingWrite>,
}

/// The store write of an object being created, offered to validating plugins. Unless one takes
/// it ([`PendingWrite::done`]), the registry makes it after admission.
pub struct PendingWrite {
    /// The create: its key and the object's stored bytes.
    pub op: Op,
    outcome: std::sync::Mutex<Option<Result<KeyValue, StoreError>>>,
}

impl PendingWrite {
    pub fn new(op: Op) -> PendingWrite {
        PendingWrite { op, outcome: Default::default() }
    }

    /// Records that a plugin made the write, with its outcome (the created key, or why the store
    /// refused it).
    pub fn done(&self, outcome: Result<KeyValue, StoreError>) {
        *self.outcome.lock().unwrap_or_else(|p| p.into_inner()) = Some(outcome);
    }

    /// The outcome, if a plugin made the write.
    pub fn take_outcome(&self) -> Option<Result<KeyValue, StoreError>> {
        self.outcome.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

impl Attributes<'_> {
    /// Adds a warning for the client.
    pub fn warn(&self, warning: &str) {
        self.warnings.lock().unwrap_or_else(|p| p.into_inner()).push(warning.to_string());
    }

    /// The warnings added, leaving none.
    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut *self.warnings.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Whether the request is audited: annotations are only worth making then.
    pub fn audited(&self) -> bool {
        self.audit_annotations.is_some()
    }

    /// Adds an annotation to the request's audit event (nothing when it is not audited).
    pub fn annotate(&self, key: String, value: String) {
        if let Some(a) = &self.audit_annotations {
            a.lock().unwrap_or_else(|p| p.into_inner()).push((key, value));
        }
    }

    /// The audit annotations added, leaving none.
    pub fn take_audit_annotations(&self) -> Vec<(String, String)> {
        match &self.audit_annotations {
            Some(a) => std::mem::take(&mut *a.lock().unwrap_or_else(|p| p.into_inner())),
            None => Vec::new(),
        }
    }
}

pub trait MutatingPlugin: Send + Sync {
    fn name(&self) -> &'static str;
    fn admit<'a>(&'a self, attrs: &'a mut Attributes<'_>) -> BoxFuture<'a, Result<(), ApiError>>;
}

pub trait ValidatingPlugin: Send + Sync {
    fn name(&self) -> &'static str;
    fn validate<'a>(&'a self, attrs: &'a Attributes<'_>) -> BoxFuture<'a, Result<(), ApiError>>;
}

/// The ordered plugin chains.
#[derive(Default)]
pub struct Chain {
    pub mutating: Vec<Box<dyn MutatingPlugin>>,
    pub validating: Vec<Box<dyn ValidatingPlugin>>,
}

impl Chain {
    pub async fn admit(&self, attrs: &mut Attributes<'_>) -> Result<(), ApiError> {
        for p in &self.mutating {
            p.admit(attrs).await.inspect_err(|e| tracing::debug!(plugin = p.name(), error = %e, "admission denied"))?;
        }
        Ok(())
    }

    pub async fn validate(&self, attrs: &Attributes<'_>) -> Result<(), ApiError> {
        for p in &self.validating {
            p.validate(attrs)
                .await
                .inspect_err(|e| tracing::debug!(plugin = p.name(), error = %e, "admission denied"))?;
        }
        Ok(())
    }
}
