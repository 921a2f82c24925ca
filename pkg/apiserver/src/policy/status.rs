//! The policies' status, as upstream's ValidatingAdmissionPolicy status controller writes it
//! through the status subresource: `observedGeneration` once the generation is compiled, and
//! `typeChecking.expressionWarnings`. Upstream type-checks expressions against the matched
//! kinds' schemas (expressions that do not compile never get stored there); k1s reports each
//! expression that does not compile, with its field path, which is what would fail at runtime.

use super::Policies;
use crate::auth::UserInfo;
use crate::registry::{self, Registry};
use serde_json::{json, Value};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The status a policy's compiled generation deserves.
pub fn status_for(policy: &super::validate::Policy) -> Value {
    let warnings: Vec<Value> = policy
        .expressions()
        .into_iter()
        .filter_map(|(field, c)| c.program.as_ref().err().map(|e| json!({"fieldRef": field, "warning": e})))
        .collect();
    let mut status = json!({"observedGeneration": policy.generation, "typeChecking": {}});
    if !warnings.is_empty() {
        status["typeChecking"]["expressionWarnings"] = Value::Array(warnings);
    }
    status
}

/// Writes the status of every policy whose generation it does not yet show, after each
/// reload, until `cancel` fires.
pub async fn run(policies: Arc<Policies>, registry: Arc<Registry>, cancel: CancellationToken) {
    let Some(info) = k1s_api::resources::find("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies")
    else {
        return;
    };
    let user = UserInfo::new("system:apiserver", &["system:masters"]);
    loop {
        for hook in &policies.current().hooks {
            let p = &hook.policy;
            let Some(stored) = policies.get(&format!("{}{}", super::POLICIES, p.name)) else { continue };
            let meta = |k: &str| stored.pointer(&format!("/metadata/{k}")).cloned();
            let observed = stored.pointer("/status/observedGeneration").and_then(Value::as_i64);
            if meta("uid") != Some(json!(p.uid)) || meta("generation") != Some(json!(p.generation)) {
                continue;
            }
            if observed == Some(p.generation) {
                continue;
            }
            let mut ctx = registry::Ctx {
                user: &user,
                info,
                namespace: None,
                subresource: Some("status"),
                dry_run: false,
                field_manager: "validatingadmissionpolicy-status-controller".into(),
                field_validation: registry::FieldValidation::Ignore,
                warnings: Vec::new(),
                audit: None,
            };
            let mut patch = json!({"status": status_for(p)});
            // A merge patch keeps what it does not name: clear earlier warnings explicitly.
            if patch["status"]["typeChecking"].get("expressionWarnings").is_none() {
                patch["status"]["typeChecking"]["expressionWarnings"] = Value::Null;
            }
            if let Err(e) = registry.patch(&mut ctx, &p.name, registry::PatchType::Merge, patch, false).await {
                tracing::warn!(policy = %p.name, error = %e, "writing the policy status failed");
            }
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = policies.changed.notified() => {}
        }
    }
}
