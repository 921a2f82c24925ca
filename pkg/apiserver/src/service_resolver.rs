//! Where the API server itself reaches a Service it calls out to (an admission webhook's, an
//! APIService's): a ready endpoint of the Service's port, else its ClusterIP, as read from the
//! store; an `ExternalName` Service is its external name, as upstream's resolver does.

use k1s_store::Store;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    #[error("service \"{name}\" not found")]
    ServiceNotFound { namespace: String, name: String },
    #[error("service \"{namespace}/{name}\" has no ready endpoints")]
    NoAddress { namespace: String, name: String },
}

fn prefix(group: &str, resource: &str) -> String {
    k1s_api::resources::find(group, "v1", resource).map(|r| r.storage_prefix()).unwrap_or_default()
}

/// The stored Service `namespace/name`, if there is one.
pub fn service(store: &Store, namespace: &str, name: &str) -> Option<Value> {
    store
        .get(&format!("{}{namespace}/{name}", prefix("", "services")))
        .ok()
        .flatten()
        .and_then(|kv| serde_json::from_slice(&kv.value).ok())
}

/// The stored EndpointSlices of the Service `namespace/name`.
pub fn endpoint_slices(store: &Store, namespace: &str, name: &str) -> Vec<Value> {
    store
        .list(&format!("{}{namespace}/", prefix("discovery.k8s.io", "endpointslices")), None, 0, None)
        .map(|p| p.items)
        .unwrap_or_default()
        .iter()
        .filter_map(|kv| serde_json::from_slice::<Value>(&kv.value).ok())
        .filter(|s| s.pointer("/metadata/labels/kubernetes.io~1service-name").and_then(Value::as_str) == Some(name))
        .collect()
}

/// The name of the Service's port numbered `port` (empty for an unnamed one), if it has it.
pub fn port_name(svc: &Value, port: u16) -> Option<&str> {
    svc.pointer("/spec/ports")
        .and_then(Value::as_array)?
        .iter()
        .find(|p| p.get("port").and_then(Value::as_u64) == Some(u64::from(port)))
        .map(|p| p.get("name").and_then(Value::as_str).unwrap_or(""))
}

/// `host:port` to connect to for the Service `namespace/name`'s `port`.
pub fn resolve(store: &Store, namespace: &str, name: &str, port: u16) -> Result<String, ResolveError> {
    let svc = service(store, namespace, name)
        .ok_or_else(|| ResolveError::ServiceNotFound { namespace: namespace.into(), name: name.into() })?;
    if svc.pointer("/spec/type").and_then(Value::as_str) == Some("ExternalName") {
        if let Some(host) = svc.pointer("/spec/externalName").and_then(Value::as_str).filter(|h| !h.is_empty()) {
            return Ok(crate::kubelet_proxy::host_port(host, port));
        }
    }
    let port_name = port_name(&svc, port).unwrap_or("");
    for slice in endpoint_slices(store, namespace, name) {
        let target_port = slice.get("ports").and_then(Value::as_array).and_then(|ps| {
            ps.iter()
                .find(|p| p.get("name").and_then(Value::as_str).unwrap_or("") == port_name)
                .and_then(|p| p.get("port").and_then(Value::as_u64))
        });
        let Some(target_port) = target_port else { continue };
        let ready = slice
            .get("endpoints")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|e| e.pointer("/conditions/ready").and_then(Value::as_bool) != Some(false));
        if let Some(ip) = ready.and_then(|e| e.pointer("/addresses/0")).and_then(Value::as_str) {
            return Ok(crate::kubelet_proxy::host_port(ip, target_port as u16));
        }
    }
    match svc.pointer("/spec/clusterIP").and_then(Value::as_str).filter(|ip| !ip.is_empty() && *ip != "None") {
        Some(ip) => Ok(crate::kubelet_proxy::host_port(ip, port)),
        None => Err(ResolveError::NoAddress { namespace: namespace.into(), name: name.into() }),
    }
}
