//! The `kubernetes` Service's endpoints follow the live API servers, as upstream's lease
//! endpoint reconciler (`--endpoint-reconciler-type=lease`, the default) does: every server keeps
//! a lease of its own address renewed (here a `coordination.k8s.io/v1` Lease in `kube-system`,
//! labelled `k1s.io/apiserver-endpoint`, renewed every 10 s for 15 s), and each server sets the
//! `default/kubernetes` Endpoints and EndpointSlice to the addresses whose lease has not expired.
//! A server that stops gracefully removes its lease and its address at once; one that dies
//! drops out when its lease expires.
//!
//! Upstream requires every API server to listen on the same port. Here each lease records its
//! address and port; servers on different ports get one Endpoints subset and one EndpointSlice
//! (`kubernetes`, then `kubernetes-<port>`) per port.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::error::ApiError;
use crate::registry::{DeleteOptions, ListOptions, Registry};

const LABEL: &str = "k1s.io/apiserver-endpoint";
const TTL: Duration = Duration::from_secs(15);
const INTERVAL: Duration = Duration::from_secs(10);

/// This server's endpoint: its lease is named after the server's identity (kept across
/// restarts), so a restarted server on another port replaces its old address at once.
pub(crate) struct Endpoint {
    lease: String,
    ip: IpAddr,
    port: u16,
}

impl Endpoint {
    pub(crate) fn new(identity: &str, ip: IpAddr, port: u16) -> Endpoint {
        Endpoint { lease: lease_name(identity), ip, port }
    }
}

/// `apiserver-endpoint-<identity>` as a valid object name (lower case, `[a-z0-9-.]`).
fn lease_name(identity: &str) -> String {
    let mut name: String = identity
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '-' })
        .collect();
    name.truncate(200);
    let name = name.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    format!("apiserver-endpoint-{name}")
}

/// Renews this server's lease and reconciles the endpoints every interval; at `cancel`, removes
/// the lease and this server's address.
pub(crate) async fn run(registry: Arc<Registry>, me: Endpoint, cancel: CancellationToken) {
    let Endpoint { lease: name, ip, port } = me;
    loop {
        if let Err(e) = renew(&registry, &name, ip, port).await {
            tracing::warn!(error = %e, "renewing the API server's endpoint lease failed");
        }
        if let Err(e) = reconcile(&registry, None).await {
            tracing::warn!(error = %e, "reconciling the kubernetes Service's endpoints failed");
        }
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tokio::time::sleep(INTERVAL) => {}
        }
    }
    let Some(leases) = k1s_api::resources::find("coordination.k8s.io", "v1", "leases") else { return };
    let user = Registry::server_user();
    let mut ctx = Registry::server_ctx(&user, leases, Some("kube-system"));
    if let Err(e) = registry.delete(&mut ctx, &name, &DeleteOptions::default()).await {
        if e.code != 404 {
            tracing::warn!(error = %e, "removing the API server's endpoint lease failed");
        }
    }
    if let Err(e) = reconcile(&registry, Some((ip, port))).await {
        tracing::warn!(error = %e, "removing this server from the kubernetes Service's endpoints failed");
    }
}

async fn renew(registry: &Registry, name: &str, ip: IpAddr, port: u16) -> Result<(), ApiError> {
    let Some(leases) = k1s_api::resources::find("coordination.k8s.io", "v1", "leases") else { return Ok(()) };
    let now = jiff::Timestamp::now();
    let spec = json!({
        "holderIdentity": format!("{ip}:{port}"),
        "leaseDurationSeconds": TTL.as_secs(),
        "renewTime": micro_time(now),
    });
    let user = Registry::server_user();
    let mut ctx = Registry::server_ctx(&user, leases, Some("kube-system"));
    match registry.get(leases, Some("kube-system"), name) {
        Ok(mut lease) => {
            lease["spec"] = spec;
            registry.update(&mut ctx, name, lease).await.map(|_| ())
        }
        Err(e) if e.code == 404 => {
            let lease = json!({
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": name, "namespace": "kube-system", "labels": {LABEL: "true"}},
                "spec": spec,
            });
            registry.create(&mut ctx, lease).await.map(|_| ())
        }
        Err(e) => Err(e),
    }
}

fn micro_time(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S.%6fZ").to_string()
}

/// The live API servers' addresses by port, from the unexpired leases (without `leaving`).
fn live(leases: &[Value], now: jiff::Timestamp, leaving: Option<(IpAddr, u16)>) -> BTreeMap<u16, Vec<IpAddr>> {
    let mut by_port: BTreeMap<u16, Vec<IpAddr>> = BTreeMap::new();
    for l in leases {
        let spec = &l["spec"];
        let Some(Ok(addr)) = spec["holderIdentity"].as_str().map(str::parse::<std::net::SocketAddr>) else {
            continue;
        };
        if Some((addr.ip(), addr.port())) == leaving {
            continue;
        }
        let ttl = spec["leaseDurationSeconds"].as_i64().unwrap_or(0);
        let Some(Ok(renewed)) = spec["renewTime"].as_str().map(str::parse::<jiff::Timestamp>) else { continue };
        if renewed.as_second().saturating_add(ttl) < now.as_second() {
            continue;
        }
        by_port.entry(addr.port()).or_default().push(addr.ip());
    }
    for ips in by_port.values_mut() {
        ips.sort();
        ips.dedup();
    }
    by_port
}

fn slice_name(i: usize, port: u16) -> String {
    if i == 0 {
        "kubernetes".into()
    } else {
        format!("kubernetes-{port}")
    }
}

/// Sets the `kubernetes` Endpoints and EndpointSlices to the live servers (writing only what
/// differs). When no lease is live (e.g. the last server leaving), the objects are left as they
/// are, as upstream leaves the last address in place.
async fn reconcile(registry: &Registry, leaving: Option<(IpAddr, u16)>) -> Result<(), ApiError> {
    let find = |g: &str, r: &str| k1s_api::resources::find(g, "v1", r);
    let (Some(leases), Some(endpoints), Some(slices)) =
        (find("coordination.k8s.io", "leases"), find("", "endpoints"), find("discovery.k8s.io", "endpointslices"))
    else {
        return Ok(());
    };
    let selector = k1s_api::selectors::Selector::parse_labels(LABEL)
        .map_err(|e| ApiError::internal(format!("the endpoint lease selector: {e}")))?;
    let opts = ListOptions { label_selector: selector, ..ListOptions::default() };
    let items = registry.list(leases, Some("kube-system"), &opts)?.items;
    let by_port = live(&items, jiff::Timestamp::now(), leaving);
    if by_port.is_empty() {
        return Ok(());
    }
    let user = Registry::server_user();
    let subsets: Vec<Value> = by_port
        .iter()
        .map(|(port, ips)| {
            json!({"addresses": ips.iter().map(|ip| json!({"ip": ip.to_string()})).collect::<Vec<_>>(),
                   "ports": [{"name": "https", "port": port, "protocol": "TCP"}]})
        })
        .collect();
    let mut ctx = Registry::server_ctx(&user, endpoints, Some("default"));
    match registry.get(endpoints, Some("default"), "kubernetes") {
        Ok(mut current) if current["subsets"] != Value::Array(subsets.clone()) => {
            current["subsets"] = Value::Array(subsets);
            registry.update(&mut ctx, "kubernetes", current).await?;
        }
        Ok(_) => {}
        Err(e) if e.code == 404 => {}
        Err(e) => return Err(e),
    }
    let mut wanted = Vec::new();
    for (i, (port, ips)) in by_port.iter().enumerate() {
        let name = slice_name(i, *port);
        let family = if ips.first().is_some_and(IpAddr::is_ipv6) { "IPv6" } else { "IPv4" };
        let eps: Vec<Value> =
            ips.iter().map(|ip| json!({"addresses": [ip.to_string()], "conditions": {"ready": true}})).collect();
        let ports = json!([{"name": "https", "port": port, "protocol": "TCP"}]);
        let mut ctx = Registry::server_ctx(&user, slices, Some("default"));
        match registry.get(slices, Some("default"), &name) {
            Ok(mut current) => {
                if current["endpoints"] != Value::Array(eps.clone()) || current["ports"] != ports {
                    current["endpoints"] = Value::Array(eps);
                    current["ports"] = ports;
                    registry.update(&mut ctx, &name, current).await?;
                }
            }
            Err(e) if e.code == 404 => {
                let slice = json!({
                    "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                    "metadata": {"name": name, "namespace": "default",
                                 "labels": {"kubernetes.io/service-name": "kubernetes"}},
                    "addressType": family, "endpoints": eps, "ports": ports,
                });
                registry.create(&mut ctx, slice).await?;
            }
            Err(e) => return Err(e),
        }
        wanted.push(name);
    }
    // Slices of ports no live server uses any more.
    let selector = k1s_api::selectors::Selector::parse_labels("kubernetes.io/service-name=kubernetes")
        .map_err(|e| ApiError::internal(format!("the kubernetes slice selector: {e}")))?;
    let opts = ListOptions { label_selector: selector, ..ListOptions::default() };
    for s in registry.list(slices, Some("default"), &opts)?.items {
        let name = s["metadata"]["name"].as_str().unwrap_or_default().to_string();
        if name.starts_with("kubernetes-") && !wanted.contains(&name) {
            let mut ctx = Registry::server_ctx(&user, slices, Some("default"));
            registry.delete(&mut ctx, &name, &DeleteOptions::default()).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: &str, renewed: jiff::Timestamp, ttl: i64) -> Value {
        json!({"spec": {"holderIdentity": holder, "renewTime": micro_time(renewed), "leaseDurationSeconds": ttl}})
    }

    #[test]
    fn only_unexpired_leases_count_grouped_by_port() {
        let now = jiff::Timestamp::from_second(1_800_000_000).expect("time");
        let ago = |s: i64| now - jiff::SignedDuration::from_secs(s);
        let leases = vec![
            lease("10.0.0.2:6443", ago(3), 15),
            lease("10.0.0.1:6443", ago(14), 15),
            lease("10.0.0.3:6443", ago(16), 15),
            lease("10.0.0.4:7443", ago(1), 15),
            lease("not an address", ago(1), 15),
        ];
        let live = live(&leases, now, None);
        let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
        assert_eq!(live.get(&6443), Some(&vec![ip("10.0.0.1"), ip("10.0.0.2")]));
        assert_eq!(live.get(&7443), Some(&vec![ip("10.0.0.4")]));
        assert_eq!(live.len(), 2);
        let without = super::live(&leases, now, Some((ip("10.0.0.4"), 7443)));
        assert_eq!(without.len(), 1, "a leaving server drops out at once");
    }

    #[test]
    fn names_are_valid_object_names() {
        assert_eq!(
            lease_name("VM_4a6c661c-0f42-4b10-a3e2-8714d7ffd259"),
            "apiserver-endpoint-vm-4a6c661c-0f42-4b10-a3e2-8714d7ffd259"
        );
        assert_eq!(lease_name("_odd name!_"), "apiserver-endpoint-odd-name");
        assert_eq!((slice_name(0, 6443), slice_name(1, 7443)), ("kubernetes".into(), "kubernetes-7443".into()));
    }
}
