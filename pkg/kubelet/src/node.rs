//! Node registration, node status and the heartbeat Lease in `kube-node-lease`.

use crate::host::HostInfo;
use crate::Shared;
use k1s_api::errors::chain;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// How often the Lease is renewed (upstream: leaseDuration / 4).
const LEASE_RENEW: Duration = Duration::from_secs(10);
pub const LEASE_DURATION_SECONDS: i32 = 40;
/// How often node status is posted when nothing changed.
const STATUS_REPORT: Duration = Duration::from_secs(60);
/// At start, until the node is Ready for the first time, the runtime is checked this often, so
/// that the node turns Ready as soon as it can (upstream: `fastStatusUpdateOnce`, 100 ms).
const FAST_CHECK: Duration = Duration::from_millis(100);
/// How long those fast checks go on at most (upstream: `nodeReadyGracePeriod`, 120 s).
const FAST_CHECK_FOR: Duration = Duration::from_secs(120);

fn now() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn micro_now() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// The node object as this kubelet registers it.
pub fn node_object(shared: &Shared, host: &HostInfo) -> Value {
    let c = &shared.config;
    // No `node-role.kubernetes.io/*` labels: a kubelet may not set them on its own Node
    // (NodeRestriction); the server labels its node's roles.
    let labels = json!({
        "kubernetes.io/hostname": c.node_name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": host.arch,
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": host.arch,
        "node.kubernetes.io/instance-type": "k1s",
    });
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": c.node_name, "labels": labels, "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
        "spec": {"podCIDR": c.pod_cidr, "podCIDRs": [c.pod_cidr]},
    })
}

/// The node's status: capacity, conditions, addresses, versions.
pub fn node_status(shared: &Shared, host: &HostInfo, runtime_version: &str, images: Value) -> Value {
    let c = &shared.config;
    let t = now();
    let cond = |type_: &str, status: &str, reason: &str, message: &str| {
        json!({"type": type_, "status": status, "reason": reason, "message": message,
               "lastHeartbeatTime": t, "lastTransitionTime": shared.started_at})
    };
    let (ready, ready_reason, ready_message) = ready_condition(shared);
    let mut ready_cond = cond("Ready", ready, ready_reason, &ready_message);
    if let Ok(mut last) = shared.ready_transition.lock() {
        if last.0 != ready {
            *last = (ready.to_string(), t.clone());
        }
        ready_cond["lastTransitionTime"] = json!(last.1);
    }
    let capacity = json!({
        "cpu": host.cpus.to_string(),
        "memory": format!("{}Ki", host.memory_kib),
        "pods": c.max_pods.to_string(),
        "ephemeral-storage": format!("{}Ki", host.ephemeral_storage_kib),
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
    });
    json!({
        "capacity": capacity,
        "allocatable": capacity,
        "conditions": [
            cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            ready_cond,
        ],
        "addresses": [
            {"type": "InternalIP", "address": c.node_ip.to_string()},
            {"type": "Hostname", "address": host.hostname},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": shared.kubelet_port.load(std::sync::atomic::Ordering::Acquire)}},
        "nodeInfo": {
            "machineID": host.machine_id,
            "systemUUID": host.system_uuid,
            "bootID": host.boot_id,
            "kernelVersion": host.kernel_version,
            "osImage": host.os_image,
            "containerRuntimeVersion": runtime_version,
            "kubeletVersion": crate::KUBELET_VERSION,
            "kubeProxyVersion": crate::KUBELET_VERSION,
            "operatingSystem": "linux",
            "architecture": host.arch,
        },
        "images": images,
    })
}

/// The node's Ready condition from the runtime's last checked health: (status, reason, message).
pub fn ready_condition(shared: &Shared) -> (&'static str, &'static str, String) {
    match shared.runtime_state.lock() {
        Ok(s) => s.ready_condition(std::time::Instant::now()),
        Err(_) => ("Unknown", "KubeletNotReady", "runtime state unavailable".to_string()),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("registering node {node}")]
    Register { node: String, source: kube::Error },
    #[error("updating status of node {node}")]
    Status { node: String, source: kube::Error },
    #[error("renewing lease of node {node}")]
    Lease { node: String, source: kube::Error },
}

/// Creates the Node (or refreshes its labels) and posts its first status.
pub async fn register(shared: &Arc<Shared>, host: &HostInfo) -> Result<(), NodeError> {
    let name = shared.config.node_name.clone();
    let api: Api<Node> = Api::all(shared.client.clone());
    let obj = node_object(shared, host);
    let node: Node = serde_json::from_value(obj.clone())
        .map_err(|e| NodeError::Register { node: name.clone(), source: kube::Error::SerdeError(e) })?;
    match api.create(&PostParams::default(), &node).await {
        Ok(_) => tracing::info!(node = %name, "registered node"),
        Err(kube::Error::Api(e)) if e.code == 409 => {
            let patch = json!({"metadata": {"labels": obj["metadata"]["labels"]}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|source| NodeError::Register { node: name.clone(), source })?;
        }
        Err(source) => return Err(NodeError::Register { node: name, source }),
    }
    post_status(shared, host).await
}

async fn post_status(shared: &Arc<Shared>, host: &HostInfo) -> Result<(), NodeError> {
    let name = shared.config.node_name.clone();
    let api: Api<Node> = Api::all(shared.client.clone());
    let images = crate::images::node_images(shared).await;
    let status = node_status(shared, host, &shared.runtime_version, images);
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&json!({"status": status})))
        .await
        .map_err(|source| NodeError::Status { node: name, source })?;
    Ok(())
}

/// Renews the Lease every 10 s, checks the runtime every 5 s (every 100 ms until the node is
/// first Ready; posting node status at once when the Ready condition changes) and posts node
/// status every minute until cancelled.
pub async fn heartbeat(shared: Arc<Shared>, host: HostInfo) {
    let name = shared.config.node_name.clone();
    let leases: Api<Lease> = Api::namespaced(shared.client.clone(), "kube-node-lease");
    let mut lease_tick = tokio::time::interval(LEASE_RENEW);
    let mut status_tick = tokio::time::interval(STATUS_REPORT);
    let mut reported = ready_condition(&shared);
    let mut fast_until = (reported.0 != "True").then(|| tokio::time::Instant::now() + FAST_CHECK_FOR);
    let mut runtime_tick = runtime_interval(fast_until.is_some());
    status_tick.tick().await;
    runtime_tick.tick().await;
    loop {
        tokio::select! {
            _ = shared.cancel.cancelled() => return,
            _ = runtime_tick.tick() => {
                crate::runtime_state::check(&*shared.runtime, &shared.runtime_state).await;
                let now = ready_condition(&shared);
                if now != reported {
                    tracing::info!(ready = now.0, reason = now.1, message = %now.2, "node readiness changed");
                    match post_status(&shared, &host).await {
                        Ok(()) => reported = now,
                        Err(e) => tracing::warn!(error = %chain(&e), "node status update failed"),
                    }
                }
                if fast_until.is_some_and(|t| reported.0 == "True" || tokio::time::Instant::now() >= t) {
                    fast_until = None;
                    runtime_tick = runtime_interval(false);
                    runtime_tick.tick().await;
                }
            }
            _ = lease_tick.tick() => {
                if let Err(e) = renew_lease(&shared, &leases, &name).await {
                    tracing::warn!(error = %chain(&e), "lease renewal failed");
                }
            }
            _ = status_tick.tick() => {
                if let Err(e) = post_status(&shared, &host).await {
                    tracing::warn!(error = %chain(&e), "node status update failed");
                }
            }
        }
    }
}

/// The runtime check's ticker: fast until the node is first Ready, then every 5 s.
fn runtime_interval(fast: bool) -> tokio::time::Interval {
    let every = if fast { FAST_CHECK } else { crate::runtime_state::CHECK_INTERVAL };
    let mut i = tokio::time::interval(every);
    i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    i
}

async fn renew_lease(shared: &Shared, leases: &Api<Lease>, name: &str) -> Result<(), NodeError> {
    let spec = json!({
        "holderIdentity": name,
        "leaseDurationSeconds": LEASE_DURATION_SECONDS,
        "renewTime": micro_now(),
    });
    let patch = json!({"spec": spec});
    match leases.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => {
            let node_uid = Api::<Node>::all(shared.client.clone())
                .get(name)
                .await
                .ok()
                .and_then(|n| n.metadata.uid)
                .unwrap_or_default();
            let lease: Lease = serde_json::from_value(json!({
                "metadata": {
                    "name": name,
                    "namespace": "kube-node-lease",
                    "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": node_uid}],
                },
                "spec": spec,
            }))
            .map_err(|e| NodeError::Lease { node: name.to_string(), source: kube::Error::SerdeError(e) })?;
            leases
                .create(&PostParams::default(), &lease)
                .await
                .map_err(|source| NodeError::Lease { node: name.to_string(), source })?;
            Ok(())
        }
        Err(source) => Err(NodeError::Lease { node: name.to_string(), source }),
    }
}
