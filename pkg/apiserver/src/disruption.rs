//! Eviction admission against PodDisruptionBudgets (upstream's eviction REST checks).

use crate::error::ApiError;
use crate::object;
use crate::registry::{ListOptions, Registry};
use k1s_api::resources;
use k1s_api::selectors::Selector;
use serde_json::{json, Value};

/// Refuses (429) an eviction of `pod` in `ns` when a matching budget allows no disruption,
/// and records the disruption in the budget's status when it does (upstream's
/// `checkAndDecrement`: `disruptionsAllowed` goes down by one and the pod joins `disruptedPods`,
/// compare-and-swap on the budget, so two evictions cannot both take its last disruption). A
/// dry run checks and records nothing.
pub async fn check_eviction(reg: &Registry, ns: Option<&str>, pod: &str, dry_run: bool) -> Result<(), ApiError> {
    let (Some(pods), Some(pdbs)) =
        (resources::find("", "v1", "pods"), resources::find("policy", "v1", "poddisruptionbudgets"))
    else {
        return Ok(());
    };
    for _ in 0..MAX_ATTEMPTS {
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
        let allowed = refuse_unless_allowed(b)?;
        if dry_run {
            return Ok(());
        }
        let mut budget = (*b).clone();
        budget["status"]["disruptionsAllowed"] = json!(allowed - 1);
        if !budget["status"]["disruptedPods"].is_object() {
            budget["status"]["disruptedPods"] = json!({});
        }
        budget["status"]["disruptedPods"][pod] = json!(object::now_rfc3339());
        match reg.server_update_status(pdbs, budget).await {
            Ok(()) => return Ok(()),
            // Another eviction or the disruption controller wrote the budget: look again.
            Err(e) if e.code == 409 => continue,
            Err(e) => return Err(e),
        }
    }
    Err(ApiError::too_many_requests("Cannot evict pod as the disruption budget is being updated too often.", 1))
}

/// How often an eviction reads a budget again after losing the race to write it.
const MAX_ATTEMPTS: usize = 8;

/// The budget's `disruptionsAllowed` when it allows this eviction; upstream's refusal otherwise.
fn refuse_unless_allowed(b: &Value) -> Result<i64, ApiError> {
    let name = object::name(b);
    let generation = object::meta(b).and_then(|m| m.get("generation")).and_then(Value::as_i64).unwrap_or(0);
    let observed = b.pointer("/status/observedGeneration").and_then(Value::as_i64).unwrap_or(0);
    let allowed = b.pointer("/status/disruptionsAllowed").and_then(Value::as_i64).unwrap_or(0);
    let disrupted = b.pointer("/status/disruptedPods").and_then(Value::as_object).map_or(0, |m| m.len());
    let mut e = if observed < generation {
        ApiError::too_many_requests(format!("Cannot evict pod as it would violate the pod's disruption budget. The disruption budget {name} is still being processed by the server."), 10)
    } else if allowed < 0 {
        return Err(ApiError::new(403, "Forbidden", "pdb disruptions allowed is negative"));
    } else if disrupted >= MAX_DISRUPTED_PODS {
        return Err(ApiError::new(
            403,
            "Forbidden",
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        ));
    } else if allowed == 0 {
        ApiError::too_many_requests(
            format!("Cannot evict pod as it would violate the pod's disruption budget. The disruption budget {name} needs {} healthy pods and has {} currently", b.pointer("/status/desiredHealthy").and_then(Value::as_i64).unwrap_or(0), b.pointer("/status/currentHealthy").and_then(Value::as_i64).unwrap_or(0)),
            10,
        )
    } else {
        return Ok(allowed);
    };
    e.causes.push(crate::error::Cause {
        reason: "DisruptionBudget".into(),
        message: e.message.clone(),
        field: String::new(),
    });
    Err(e)
}

/// Upstream's `MaxDisruptedPodSize`: evictions the disruption controller has not yet seen.
const MAX_DISRUPTED_PODS: usize = 2000;
