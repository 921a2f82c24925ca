//! The `Available` condition of every APIService, as upstream's local and remote availability
//! controllers set it: a local APIService is always available (`Local`); a remote one is
//! available once its Service exists, a ClusterIP Service listens on the APIService's port and
//! has a ready endpoint for it, and a `GET` of the group-version's discovery document answers
//! with a success (`Passed`). Otherwise the first check that failed gives the reason
//! (`ServiceNotFound`, `ServicePortError`, `EndpointsNotFound`, `MissingEndpoints`,
//! `FailedDiscoveryCheck`) and upstream's message. The condition's `lastTransitionTime` moves
//! only when its status changes, and an unchanged status is not written.

use super::{Aggregator, Remote};
use crate::registry::{ListOptions, Registry};
use crate::service_resolver;
use k1s_api::strategies::apiregistration::{LOCAL_MESSAGE, LOCAL_REASON};
use serde_json::{json, Value};

/// An `Available` condition without its time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    pub status: &'static str,
    pub reason: &'static str,
    pub message: String,
}

impl Condition {
    fn local() -> Condition {
        Condition { status: "True", reason: LOCAL_REASON, message: LOCAL_MESSAGE.into() }
    }
    fn unavailable(reason: &'static str, message: String) -> Condition {
        Condition { status: "False", reason, message }
    }
}

/// Checks every APIService once and writes the conditions that changed.
pub async fn sync(agg: &Aggregator, registry: &Registry) {
    let Some(info) = k1s_api::resources::find("apiregistration.k8s.io", "v1", "apiservices") else { return };
    let items = match registry.list(info, None, &ListOptions::default()) {
        Ok(page) => page.items,
        Err(e) => {
            tracing::warn!(error = %e.message, "listing APIServices failed");
            return;
        }
    };
    let checks = items.into_iter().map(|obj| async move {
        let wanted = match Remote::from_object(&obj) {
            None => Condition::local(),
            Some(remote) => check(agg, &remote).await,
        };
        let Some(updated) = with_condition(&obj, &wanted, &crate::object::now_rfc3339()) else { return };
        let name = crate::object::name(&obj).to_string();
        if wanted.status == "True" {
            tracing::debug!(apiservice = %name, reason = wanted.reason, "APIService available");
        } else {
            tracing::info!(apiservice = %name, reason = wanted.reason, message = %wanted.message, "APIService not available");
        }
        match registry.server_update_status(info, updated).await {
            Ok(()) => {}
            // Changed meanwhile: the change wakes the next round.
            Err(e) if e.code == 409 || e.code == 404 => {}
            Err(e) => tracing::warn!(apiservice = %name, error = %e.message, "writing an APIService's status failed"),
        }
    });
    futures::future::join_all(checks).await;
}

/// Whether `remote` is available, and why not; keeps the backend's discovery document of a
/// passing check for discovery.
async fn check(agg: &Aggregator, remote: &Remote) -> Condition {
    let condition = reachability(agg, remote).await;
    match condition {
        Ok((c, doc)) => {
            agg.set_discovery(&remote.name, Some(doc));
            c
        }
        Err(c) => {
            agg.set_discovery(&remote.name, None);
            c
        }
    }
}

async fn reachability(agg: &Aggregator, remote: &Remote) -> Result<(Condition, Value), Condition> {
    let (ns, name) = (remote.namespace.as_str(), remote.service.as_str());
    let Some(svc) = service_resolver::service(&agg.store, ns, name) else {
        return Err(Condition::unavailable("ServiceNotFound", format!("service/{name} in {ns:?} is not present")));
    };
    let cluster_ip = svc.pointer("/spec/type").and_then(Value::as_str).unwrap_or("ClusterIP") == "ClusterIP";
    if cluster_ip {
        let Some(port_name) = service_resolver::port_name(&svc, remote.port) else {
            return Err(Condition::unavailable(
                "ServicePortError",
                format!("service/{name} in {ns:?} is not listening on port {}", remote.port),
            ));
        };
        let slices = service_resolver::endpoint_slices(&agg.store, ns, name);
        if slices.is_empty() {
            return Err(Condition::unavailable(
                "EndpointsNotFound",
                format!("cannot find endpointslices for service/{name} in {ns:?}"),
            ));
        }
        if !slices.iter().any(|s| has_available_endpoint(s, port_name)) {
            return Err(Condition::unavailable(
                "MissingEndpoints",
                format!("endpointslices for service/{name} in {ns:?} have no addresses with port name {port_name:?}"),
            ));
        }
    }
    let addr = service_resolver::resolve(&agg.store, ns, name, remote.port)
        .map_err(|e| Condition::unavailable("FailedDiscoveryCheck", e.to_string()))?;
    let doc =
        agg.fetch_discovery(remote, &addr).await.map_err(|m| Condition::unavailable("FailedDiscoveryCheck", m))?;
    Ok((Condition { status: "True", reason: "Passed", message: "all checks passed".into() }, doc))
}

/// Upstream's `hasAvailableEndpoint`: a ready (or not-unready) endpoint and a port of that name.
fn has_available_endpoint(slice: &Value, port_name: &str) -> bool {
    let ready = slice
        .get("endpoints")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|e| e.pointer("/conditions/ready").and_then(Value::as_bool) != Some(false));
    let port = slice.get("ports").and_then(Value::as_array).into_iter().flatten().any(|p| {
        p.get("name").and_then(Value::as_str).unwrap_or("") == port_name && p.get("port").is_some_and(|n| !n.is_null())
    });
    ready && port
}

/// `obj` with its `Available` condition set to `wanted`, or `None` when it already says that.
/// The transition time is `now` when the status changes, else the condition's own.
pub fn with_condition(obj: &Value, wanted: &Condition, now: &str) -> Option<Value> {
    let conditions: Vec<Value> =
        obj.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    let existing = conditions.iter().find(|c| c.get("type").and_then(Value::as_str) == Some("Available"));
    let text = |c: &Value, k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    if let Some(c) = existing {
        if text(c, "status") == wanted.status
            && text(c, "reason") == wanted.reason
            && text(c, "message") == wanted.message
        {
            return None;
        }
    }
    let since = match existing {
        Some(c) if text(c, "status") == wanted.status => c.get("lastTransitionTime").cloned().unwrap_or(json!(now)),
        _ => json!(now),
    };
    let condition = json!({"type": "Available", "status": wanted.status, "lastTransitionTime": since,
                           "reason": wanted.reason, "message": wanted.message});
    let mut out: Vec<Value> = Vec::new();
    let mut placed = false;
    for c in conditions {
        if c.get("type").and_then(Value::as_str) == Some("Available") {
            out.push(condition.clone());
            placed = true;
        } else {
            out.push(c);
        }
    }
    if !placed {
        out.push(condition);
    }
    let mut updated = obj.clone();
    updated["status"] = json!({"conditions": out});
    Some(updated)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transition_time_moves_only_with_the_status() {
        let obj = json!({"metadata": {"name": "v1.x.io"}, "status": {"conditions": [
            {"type": "Available", "status": "False", "reason": "MissingEndpoints", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
        let failed = Condition::unavailable("FailedDiscoveryCheck", "f".into());
        let next = with_condition(&obj, &failed, "2026-02-02T00:00:00Z").expect("changed");
        assert_eq!(next["status"]["conditions"][0]["lastTransitionTime"], "2026-01-01T00:00:00Z");
        assert_eq!(next["status"]["conditions"][0]["reason"], "FailedDiscoveryCheck");
        assert!(with_condition(&next, &failed, "2026-03-03T00:00:00Z").is_none(), "unchanged: nothing to write");
        let passed = Condition { status: "True", reason: "Passed", message: "all checks passed".into() };
        let up = with_condition(&next, &passed, "2026-02-02T00:00:00Z").expect("changed");
        assert_eq!(up["status"]["conditions"][0]["lastTransitionTime"], "2026-02-02T00:00:00Z");
        assert_eq!(up["status"]["conditions"][0]["status"], "True");
    }

    #[test]
    fn an_endpoint_counts_when_ready_and_serving_the_port_name() {
        let slice = |ready: Value, port: &str| {
            json!({"endpoints": [{"addresses": ["localhost"], "conditions": {"ready": ready}}],
                   "ports": [{"name": port, "port": 8443}]})
        };
        assert!(has_available_endpoint(&slice(json!(true), "https"), "https"));
        assert!(has_available_endpoint(&slice(Value::Null, "https"), "https"));
        assert!(!has_available_endpoint(&slice(json!(false), "https"), "https"));
        assert!(!has_available_endpoint(&slice(json!(true), "metrics"), "https"));
    }
}
