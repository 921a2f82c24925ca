//! The node lifecycle controller: a node whose kubelet stops renewing its Lease in
//! `kube-node-lease` (and stops posting status) for longer than the node-monitor grace period
//! gets its Ready, MemoryPressure, DiskPressure and PIDPressure conditions set to `Unknown`
//! (reason NodeStatusUnknown), its pods marked not ready, and the
//! `node.kubernetes.io/unreachable` taints: `NoSchedule` at once, `NoExecute` through the
//! per-zone rate limiter unless every zone is fully disrupted (then upstream stops tainting, so
//! a single-node cluster whose only node goes silent keeps its pods). When the kubelet reports
//! Ready again, the taints go.
//!
//! Event-driven: node and lease changes trigger a pass; otherwise the controller sleeps until
//! the earliest moment a node could expire.

pub mod health;
pub mod taints;

use crate::Context;
use futures::{Stream, StreamExt};
use health::{condition, Health};
use jiff::{SignedDuration, Timestamp};
use k1s_api::errors::chain;
use k1s_runtime::api_error::{is_conflict, is_not_found};
use k1s_runtime::events::{reference, EventType};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use serde_json::json;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use taints::{TokenBucket, ZoneState};
use tokio::sync::Notify;
use tokio::time::Instant;

pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// The controller's knobs, with upstream's kube-controller-manager defaults.
#[derive(Clone, Debug)]
pub struct Config {
    /// `--node-monitor-grace-period` (50 s since v1.32).
    pub monitor_grace_period: Duration,
    /// `--node-startup-grace-period`.
    pub startup_grace_period: Duration,
    /// `--node-eviction-rate`: NoExecute taints per second in a healthy zone.
    pub eviction_qps: f64,
    /// `--secondary-node-eviction-rate`: in a partially disrupted large zone.
    pub secondary_eviction_qps: f64,
    /// `--large-cluster-size-threshold`.
    pub large_cluster_threshold: usize,
    /// `--unhealthy-zone-threshold`.
    pub unhealthy_zone_threshold: f32,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            monitor_grace_period: Duration::from_secs(50),
            startup_grace_period: Duration::from_secs(60),
            eviction_qps: 0.1,
            secondary_eviction_qps: 0.01,
            large_cluster_threshold: 50,
            unhealthy_zone_threshold: 0.55,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("updating the status of node {node}")]
    UpdateStatus { node: String, source: kube::Error },
    #[error("updating the taints of node {node}")]
    Taints { node: String, source: kube::Error },
    #[error("marking the pods of node {node} not ready")]
    MarkPods { node: String, source: kube::Error },
}

/// A zone's NoExecute tainting queue.
struct ZoneTainter {
    bucket: TokenBucket,
    queue: VecDeque<String>,
}

struct Controller {
    ctx: Arc<Context>,
    config: Config,
    nodes: Store<Node>,
    leases: Store<Lease>,
    health: HashMap<String, Health>,
    zone_states: HashMap<String, ZoneState>,
    tainters: HashMap<String, ZoneTainter>,
    retry_at: Option<Instant>,
}

fn signed(d: Duration) -> SignedDuration {
    SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX)
}

fn ready_status(node: &Node) -> Option<String> {
    condition(node, "Ready").map(|c| c.status.clone())
}

impl Controller {
    fn api(&self) -> Api<Node> {
        Api::all(self.ctx.client.clone())
    }

    /// Replaces the node's taints: `add` (stamped now) in, `remove` out. Re-reads on conflict.
    async fn swap_taints(&self, name: &str, add: &[Taint], remove: &[Taint]) -> Result<(), Error> {
        let api = self.api();
        let err = |source| Error::Taints { node: name.to_string(), source };
        for _ in 0..5 {
            let node = match api.get_opt(name).await.map_err(err)? {
                Some(n) => n,
                None => return Ok(()),
            };
            let current = node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
            let new = taints::swap(&current, add, remove, &Time(Timestamp::now()));
            if new == current {
                return Ok(());
            }
            let taints = if new.is_empty() { serde_json::Value::Null } else { json!(new) };
            let patch =
                json!({"metadata": {"resourceVersion": node.metadata.resource_version}, "spec": {"taints": taints}});
            match api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                Ok(_) => return Ok(()),
                Err(e) if is_conflict(&e) => continue,
                Err(e) if is_not_found(&e) => return Ok(()),
                Err(e) => return Err(err(e)),
            }
        }
        Ok(())
    }

    /// Sets the Ready condition of every pod on the node to False.
    async fn mark_pods_not_ready(&self, node: &str) -> Result<(), Error> {
        let err = |source| Error::MarkPods { node: node.to_string(), source };
        let pods: Api<Pod> = Api::all(self.ctx.client.clone());
        let list = pods.list(&ListParams::default().fields(&format!("spec.nodeName={node}"))).await.map_err(err)?;
        for mut pod in list.items {
            let ns = pod.metadata.namespace.clone().unwrap_or_default();
            let name = pod.metadata.name.clone().unwrap_or_default();
            let Some(cond) = pod
                .status
                .as_mut()
                .and_then(|s| s.conditions.as_mut())
                .and_then(|c| c.iter_mut().find(|c| c.type_ == "Ready"))
            else {
                continue;
            };
            if cond.status == "False" {
                continue;
            }
            cond.status = "False".into();
            cond.last_transition_time = Some(Time(Timestamp::now()));
            match Api::<Pod>::namespaced(self.ctx.client.clone(), &ns)
                .replace_status(&name, &PostParams::default(), &pod)
                .await
            {
                Ok(_) => {
                    let r = reference("v1", "Pod", Some(&ns), &name, pod.metadata.uid.as_deref());
                    self.ctx.recorder.record(&r, EventType::Warning, "NodeNotReady", "Node is not ready").await;
                }
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(err(e)),
            }
        }
        Ok(())
    }

    fn tainter(&mut self, zone: &str) -> &mut ZoneTainter {
        let qps = self.config.eviction_qps;
        if !self.tainters.contains_key(zone) {
            self.zone_states.insert(zone.to_string(), ZoneState::Initial);
        }
        self.tainters.entry(zone.to_string()).or_insert_with(|| ZoneTainter {
            bucket: TokenBucket::new(qps, 1, Instant::now().into_std()),
            queue: VecDeque::new(),
        })
    }

    fn mark_for_tainting(&mut self, node: &Node) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let t = self.tainter(&taints::zone_key(node));
        if !t.queue.contains(&name) {
            t.queue.push_back(name);
        }
    }

    /// Removes the NoExecute not-ready/unreachable taints and forgets queued tainting.
    async fn mark_reachable(&mut self, node: &Node) {
        let name = node.metadata.name.clone().unwrap_or_default();
        self.tainter(&taints::zone_key(node)).queue.retain(|n| *n != name);
        let both = [
            taints::taint(crate::core::tolerations::TAINT_NODE_UNREACHABLE, "NoExecute"),
            taints::taint(crate::core::tolerations::TAINT_NODE_NOT_READY, "NoExecute"),
        ];
        if both.iter().any(|t| taints::has_taint(node, t)) {
            if let Err(e) = self.swap_taints(&name, &[], &both).await {
                tracing::warn!(node = %name, error = %chain(&e), "removing NoExecute taints failed");
                self.retry_soon();
            }
        }
    }

    fn retry_soon(&mut self) {
        let at = Instant::now() + Duration::from_secs(1);
        self.retry_at = Some(self.retry_at.map_or(at, |r| r.min(at)));
    }

    /// Upstream's `processTaintBaseEviction`, on the Ready status observed before this pass.
    async fn taint_based_eviction(&mut self, node: &Node, observed: &str) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let unreachable = taints::taint(crate::core::tolerations::TAINT_NODE_UNREACHABLE, "NoExecute");
        let not_ready = taints::taint(crate::core::tolerations::TAINT_NODE_NOT_READY, "NoExecute");
        let swap = match observed {
            "False" if taints::has_taint(node, &unreachable) => Some((not_ready, unreachable)),
            "Unknown" if taints::has_taint(node, &not_ready) => Some((unreachable, not_ready)),
            "False" | "Unknown" => {
                self.mark_for_tainting(node);
                None
            }
            _ => {
                self.mark_reachable(node).await;
                None
            }
        };
        if let Some((add, remove)) = swap {
            if let Err(e) = self.swap_taints(&name, &[add], &[remove]).await {
                tracing::warn!(node = %name, error = %chain(&e), "swapping NoExecute taints failed");
                self.retry_soon();
            }
        }
    }

    fn zone_qps(&self, state: ZoneState, size: usize) -> f64 {
        match state {
            ZoneState::PartialDisruption if size > self.config.large_cluster_threshold => {
                self.config.secondary_eviction_qps
            }
            ZoneState::PartialDisruption => 0.0,
            _ => self.config.eviction_qps,
        }
    }

    /// Upstream's `handleDisruption`.
    async fn handle_disruption(
        &mut self,
        zones: &HashMap<String, Vec<Option<String>>>,
        nodes: &[Arc<Node>],
        now: Timestamp,
    ) {
        let mut new_states = HashMap::new();
        let mut all_fully = true;
        for (zone, ready) in zones {
            let statuses: Vec<Option<&str>> = ready.iter().map(|s| s.as_deref()).collect();
            let (_, state) = taints::zone_state(&statuses, self.config.unhealthy_zone_threshold);
            if state != ZoneState::FullDisruption {
                all_fully = false;
            }
            new_states.insert(zone.clone(), state);
            self.zone_states.entry(zone.clone()).or_insert(ZoneState::Initial);
        }
        self.zone_states.retain(|z, _| zones.contains_key(z));
        let all_were_fully = self.zone_states.values().all(|s| *s == ZoneState::FullDisruption);
        if all_fully && all_were_fully {
            return;
        }
        let t = Instant::now().into_std();
        if all_fully {
            tracing::info!("all nodes are not ready: entering master disruption mode (NoExecute tainting stops)");
            for n in nodes {
                self.mark_reachable(n).await;
            }
            for (zone, s) in self.zone_states.iter_mut() {
                *s = ZoneState::FullDisruption;
                if let Some(tn) = self.tainters.get_mut(zone) {
                    tn.bucket.set_qps(0.0, t);
                }
            }
            return;
        }
        if all_were_fully {
            tracing::info!("some nodes are ready: exiting master disruption mode");
            for h in self.health.values_mut() {
                h.probe = now;
                h.ready_transition = now;
            }
        }
        let zones_now: Vec<String> = self.zone_states.keys().cloned().collect();
        for zone in zones_now {
            let new = new_states.get(&zone).copied().unwrap_or(ZoneState::Normal);
            if !all_were_fully && self.zone_states.get(&zone) == Some(&new) {
                continue;
            }
            let qps = self.zone_qps(new, zones.get(&zone).map_or(0, Vec::len));
            if let Some(tn) = self.tainters.get_mut(&zone) {
                tn.bucket.set_qps(qps, t);
            }
            self.zone_states.insert(zone, new);
        }
    }

    /// Upstream's `doNoExecuteTaintingPass`; returns when a queued node may next be tainted.
    async fn no_execute_pass(&mut self) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        let zones: Vec<String> = self.tainters.keys().cloned().collect();
        for zone in zones {
            while let Some(name) = self.tainters.get(&zone).and_then(|t| t.queue.front().cloned()) {
                let Some(node) = self.nodes.get(&ObjectRef::new(&name)) else {
                    if let Some(t) = self.tainters.get_mut(&zone) {
                        t.queue.pop_front();
                    }
                    continue;
                };
                let now = Instant::now().into_std();
                let Some(t) = self.tainters.get_mut(&zone) else { break };
                if !t.bucket.try_take(now) {
                    if let Some(w) = t.bucket.wait(now) {
                        let at = Instant::now() + w;
                        next = Some(next.map_or(at, |n| n.min(at)));
                    }
                    break;
                }
                match taints::no_execute_for(&node) {
                    None => {
                        t.queue.pop_front();
                    }
                    Some((add, opposite)) => match self.swap_taints(&name, &[add], &[opposite]).await {
                        Ok(()) => {
                            if let Some(t) = self.tainters.get_mut(&zone) {
                                t.queue.pop_front();
                            }
                        }
                        Err(e) => {
                            tracing::warn!(node = %name, error = %chain(&e), "NoExecute tainting failed");
                            self.retry_soon();
                            break;
                        }
                    },
                }
            }
        }
        next
    }

    /// One monitoring pass over every node; returns when to look again.
    async fn pass(&mut self) -> Option<Instant> {
        self.retry_at = None;
        let now = Timestamp::now();
        let nodes = self.nodes.state();
        let names: HashSet<String> = nodes.iter().filter_map(|n| n.metadata.name.clone()).collect();
        self.health.retain(|n, _| names.contains(n));
        for t in self.tainters.values_mut() {
            t.queue.retain(|n| names.contains(n));
        }
        let startup = signed(self.config.startup_grace_period);
        let grace_monitor = signed(self.config.monitor_grace_period);
        let mut zones: HashMap<String, Vec<Option<String>>> = HashMap::new();
        let mut next_deadline: Option<Timestamp> = None;
        for node in &nodes {
            let name = node.metadata.name.clone().unwrap_or_default();
            let zone = taints::zone_key(node);
            self.tainter(&zone);
            let lease = self.leases.get(&ObjectRef::new(&name).within(NODE_LEASE_NAMESPACE));
            let renew = lease.as_ref().and_then(|l| l.spec.as_ref()).and_then(|s| s.renew_time.as_ref()).map(|t| t.0);
            let (mut h, grace) = health::observe(self.health.get(&name), node, renew, now, startup, grace_monitor);
            let observed = ready_status(node).unwrap_or_else(|| "Unknown".into());
            let mut current: Node = (**node).clone();
            if health::expired(&h, grace, now) {
                if let Some(conditions) = health::unknown_conditions(node, now) {
                    current.status.get_or_insert_with(Default::default).conditions = Some(conditions);
                    match self.api().replace_status(&name, &PostParams::default(), &current).await {
                        Ok(updated) => {
                            current = updated;
                            h.ready = condition(&current, "Ready").map(|c| {
                                (
                                    c.last_heartbeat_time.as_ref().map(|t| t.0),
                                    c.last_transition_time.as_ref().map(|t| t.0),
                                )
                            });
                            h.ready_transition = now;
                        }
                        Err(e) => {
                            if !is_conflict(&e) {
                                let e = Error::UpdateStatus { node: name.clone(), source: e };
                                tracing::warn!(node = %name, error = %chain(&e), "marking node unknown failed");
                            }
                            self.health.insert(name.clone(), h);
                            self.retry_soon();
                            continue;
                        }
                    }
                }
            } else {
                let d = health::deadline(&h, grace);
                next_deadline = Some(next_deadline.map_or(d, |n| n.min(d)));
            }
            self.health.insert(name.clone(), h);
            let current_ready = ready_status(&current);
            if !taints::excluded_from_disruption(&current) {
                zones.entry(zone).or_default().push(current_ready.clone());
            }
            if let Some(ready) = current_ready.as_deref() {
                self.taint_based_eviction(&current, &observed).await;
                if ready != "True" && observed == "True" {
                    let r = reference("v1", "Node", None, &name, current.metadata.uid.as_deref());
                    self.ctx
                        .recorder
                        .record(
                            &r,
                            EventType::Normal,
                            "NodeNotReady",
                            &format!("Node {name} status is now: NodeNotReady"),
                        )
                        .await;
                    if let Err(e) = self.mark_pods_not_ready(&name).await {
                        tracing::warn!(node = %name, error = %chain(&e), "marking pods not ready failed");
                        self.retry_soon();
                    }
                }
            }
            let (add, remove) = taints::no_schedule_diff(&current);
            if !add.is_empty() || !remove.is_empty() {
                if let Err(e) = self.swap_taints(&name, &add, &remove).await {
                    tracing::warn!(node = %name, error = %chain(&e), "updating NoSchedule taints failed");
                    self.retry_soon();
                }
            }
        }
        self.handle_disruption(&zones, &nodes, now).await;
        let token_wait = self.no_execute_pass().await;
        let deadline = next_deadline.map(|d| {
            let wait = d.duration_since(Timestamp::now()).unsigned_abs();
            // Strictly past the deadline when we wake.
            Instant::now() + wait + Duration::from_millis(10)
        });
        [deadline, token_wait, self.retry_at].into_iter().flatten().min()
    }
}

/// Reflects `api` into `writer`, notifying `changed` on every event, until the stream ends.
async fn reflect<K>(writer: reflector::store::Writer<K>, api: Api<K>, changed: Arc<Notify>)
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    let mut events: std::pin::Pin<Box<dyn Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send>> =
        reflector::reflector(writer, watcher(api, watcher::Config::default())).default_backoff().boxed();
    while let Some(ev) = events.next().await {
        match ev {
            Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => {}
            Ok(_) => changed.notify_one(),
            Err(e) => tracing::debug!(error = %chain(&e), "watch failed; retrying"),
        }
    }
}

pub async fn run(ctx: Arc<Context>) {
    run_with(ctx, Config::default()).await
}

/// Runs with explicit knobs (tests use short grace periods).
pub async fn run_with(ctx: Arc<Context>, config: Config) {
    let (nodes, node_w) = reflector::store::<Node>();
    let (leases, lease_w) = reflector::store::<Lease>();
    let changed = Arc::new(Notify::new());
    let cancel = ctx.cancel.clone();
    let watchers = [
        tokio::spawn(reflect(node_w, Api::all(ctx.client.clone()), changed.clone())),
        tokio::spawn(reflect(lease_w, Api::namespaced(ctx.client.clone(), NODE_LEASE_NAMESPACE), changed.clone())),
    ];
    let mut c = Controller {
        ctx,
        config,
        nodes: nodes.clone(),
        leases: leases.clone(),
        health: HashMap::new(),
        zone_states: HashMap::new(),
        tainters: HashMap::new(),
        retry_at: None,
    };
    tokio::select! {
        _ = cancel.cancelled() => {}
        _ = async { let _ = tokio::join!(nodes.wait_until_ready(), leases.wait_until_ready()); } => {
            loop {
                let next = c.pass().await;
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    _ = changed.notified() => {}
                    _ = async { match next { Some(at) => tokio::time::sleep_until(at).await, None => std::future::pending().await } } => {}
                }
            }
        }
    }
    for w in watchers {
        w.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_upstream() {
        let c = Config::default();
        assert_eq!(c.monitor_grace_period, Duration::from_secs(50));
        assert_eq!(c.startup_grace_period, Duration::from_secs(60));
        assert_eq!(c.eviction_qps, 0.1);
    }
}
