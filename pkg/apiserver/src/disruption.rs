//! Eviction admission against PodDisruptionBudgets (upstream's eviction REST checks).

use crate::error::ApiError;
use crate::object;
use crate::registry::{ListOptions, Registry};
use k1s_api::resources;
use k1s_api::selectors::Selector;
use serde_json::Value;

/// Refuses (429) an eviction of `pod` in `ns` when a matching budget allows no disruption,
/// and records the disruption in the budget's status when it does.
pub async fn check_eviction(reg: &Registry, ns: Option<&str>, pod: &str) -> Result<(), ApiError> {
    let (Some(pods), Some(pdbs)) =
        (resources::find("", "v1", "pods"), resources::find("policy", "v1", "poddisruptionbudgets"))
    else {
        return Ok(());
    };
    let p = reg.get(pods, ns, pod)?;
    // Terminal or not-yet-running pods may always go.
    if matches!(p.pointer("/status/phase").and_then(Value::as_str), Some("Succeeded" | "Failed" | "Pending")) {
        return Ok(());
    }
    let labels = object::meta(&p).and_then(|m| m.get("labels")).cloned();
    let budgets = reg.list(pdbs, ns, &ListOptions::default())?;
    let matching: Vec<&Value> = budgets
        .items
        .iter()
        .filter(|b| {
            b.pointer("/spec/selector")
                .and_then(|s| Selector::from_label_selector(s).ok())
                .is_some_and(|s| !s.is_empty() && s.matches_labels(labels.as_ref()))
        })
        .collect();
    if matching.len() > 1 {
        return Err(ApiError::internal(
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        ));
    }
    let Some(b) = matching.first() else { return Ok(()) };
    let name = object::name(b);
    let generation = object::meta(b).and_then(|m| m.get("generation")).and_then(Value::as_i64).unwrap_or(0);
    let observed = b.pointer("/status/observedGeneration").and_then(Value::as_i64).unwrap_or(0);
    let mut e = if observed < generation {
        ApiError::too_many_requests(format!("Cannot evict pod as it would violate the pod's disruption budget. The disruption budget {name} is still being processed by the server."), 10)
    } else if b.pointer("/status/disruptionsAllowed").and_then(Value::as_i64).unwrap_or(0) < 1 {
        ApiError::too_many_requests(
            format!("Cannot evict pod as it would violate the pod's disruption budget. The disruption budget {name} needs {} healthy pods and has {} currently", b.pointer("/status/desiredHealthy").and_then(Value::as_i64).unwrap_or(0), b.pointer("/status/currentHealthy").and_then(Value::as_i64).unwrap_or(0)),
            10,
        )
    } else {
        return Ok(());
    };
    e.causes.push(crate::error::Cause {
        reason: "DisruptionBudget".into(),
        message: e.message.clone(),
        field: String::new(),
    });
    Err(e)
}
