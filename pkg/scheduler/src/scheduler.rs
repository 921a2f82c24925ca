//! The driver: watch events feed the cache and the queue; the scheduling loop pops one pod at
//! a time, decides against the in-memory snapshot (filter ▶ score, or preemption), assumes the
//! pod onto its node at once and binds it in the background, so decisions never wait for the API
//! (upstream's scheduling and binding cycles); a pod whose claims still need binding waits, in
//! its binding cycle, until the PersistentVolume binder has bound them (VolumeBinding's PreBind).
//! Failures patch `PodScheduled=False`, record a `FailedScheduling` event and park the pod until
//! a cluster event may help it.

use crate::api::{PodRef, SchedulerApi, COMPONENT};
use crate::cache::{Cache, ClusterEvent};
use crate::filters::CycleState;
use crate::node_info::PodInfo;
use crate::preemption::{preempt, Candidate, Preemption};
use crate::queue::SchedulingQueue;
use crate::schedule::{find_node, ScheduleError, ERR_NO_NODES};
use crate::volumes::{check_bindings, VolumePlan, Written};
use k1s_api::storage::{annotation, names, BOUND_BY_CONTROLLER, SELECTED_NODE};
use k1s_runtime::events::EventType;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::watcher::Event;
use kube::ResourceExt;
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinHandle;

/// Binding calls in flight at once.
const MAX_CONCURRENT_BINDINGS: usize = 16;
/// Status patches and events after bindings in flight at once: fewer, so bindings go first.
const MAX_CONCURRENT_REPORTS: usize = 4;
/// How long a binding cycle waits for the pod's claims to be bound (upstream's
/// `bindTimeoutSeconds`).
const VOLUME_BIND_TIMEOUT: Duration = Duration::from_secs(600);

/// Which watches have delivered their first complete listing.
#[derive(Debug, Default)]
struct Synced {
    pods: bool,
    nodes: bool,
    priority_classes: bool,
    pdbs: bool,
    namespaces: bool,
    claims: bool,
    volumes: bool,
    storage_classes: bool,
}

impl Synced {
    fn all(&self) -> bool {
        self.pods
            && self.nodes
            && self.priority_classes
            && self.pdbs
            && self.namespaces
            && self.claims
            && self.volumes
            && self.storage_classes
    }
}

/// Keys seen since a watch (re)started listing, to drop what the listing no longer has.
#[derive(Debug, Default)]
struct Relist {
    pods: Option<HashSet<String>>,
    nodes: Option<HashSet<String>>,
    priority_classes: Option<HashSet<String>>,
    pdbs: Option<HashSet<(String, String)>>,
    namespaces: Option<HashSet<String>>,
    claims: Option<Keys>,
    volumes: Option<Keys>,
    storage_classes: Option<Keys>,
}

/// (namespace, name) keys; the namespace is empty for cluster-scoped objects.
type Keys = HashSet<(String, String)>;

/// Where one storage watch keeps its state, and how its objects enter the cache.
struct StorageWatch<K> {
    relist: fn(&mut Relist) -> &mut Option<Keys>,
    synced: fn(&mut Synced) -> &mut bool,
    set: fn(&mut Cache, K) -> Option<ClusterEvent>,
    remove: fn(&mut Cache, &(String, String)),
    retain: fn(&mut Cache, &Keys),
}

#[derive(Debug, Default)]
struct State {
    cache: Cache,
    queue: SchedulingQueue,
    synced: Synced,
    relist: Relist,
}

/// How an unschedulable pod's `status.nominatedNodeName` changes.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Nomination {
    Keep,
    Set(String),
    Clear,
}

/// What to report (`PodScheduled=False`, reason `Unschedulable`) and do for a pod that found
/// no node.
#[derive(Debug)]
struct Failure {
    message: String,
    nomination: Nomination,
    preemption: Option<(Candidate, Vec<Arc<PodInfo>>)>,
    plugins: BTreeSet<crate::filters::Plugin>,
}

/// The scheduler: cache, queue and the API it acts through.
pub struct Scheduler<A: SchedulerApi> {
    state: Mutex<State>,
    wake: Notify,
    api: A,
    binding_slots: Semaphore,
    report_slots: Semaphore,
    /// Claims or volumes changed: binding cycles waiting for their claims look again.
    volumes_changed: Notify,
}

fn pod_ref(p: &PodInfo) -> PodRef {
    PodRef { namespace: p.namespace.clone(), name: p.name.clone(), uid: p.uid.clone() }
}

fn now_time() -> Time {
    Time(jiff::Timestamp::now())
}

fn is_terminal(pod: &Pod) -> bool {
    matches!(pod.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Succeeded" | "Failed"))
}

/// Pods this scheduler places: `spec.schedulerName` unset or `default-scheduler`.
fn responsible_for(pod: &Pod) -> bool {
    pod.spec.as_ref().and_then(|s| s.scheduler_name.as_deref()).is_none_or(|n| n.is_empty() || n == COMPONENT)
}

fn gated(pod: &Pod) -> bool {
    pod.spec.as_ref().and_then(|s| s.scheduling_gates.as_ref()).is_some_and(|g| !g.is_empty())
}

/// `PodScheduled=False` with `reason`/`message` and the nomination change; None when the pod
/// already shows exactly that.
fn unschedulable_patch(pod: &Pod, reason: &str, message: &str, nomination: &Nomination) -> Option<Value> {
    let status = pod.status.as_ref();
    let current =
        status.and_then(|s| s.conditions.as_ref()).and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"));
    let condition_changed = current.is_none_or(|c| {
        c.status != "False" || c.reason.as_deref() != Some(reason) || c.message.as_deref() != Some(message)
    });
    let nominated = status.and_then(|s| s.nominated_node_name.as_deref()).filter(|n| !n.is_empty());
    let nomination_change = match nomination {
        Nomination::Keep => None,
        Nomination::Set(n) => (nominated != Some(n.as_str())).then(|| json!(n)),
        Nomination::Clear => nominated.is_some().then_some(Value::Null),
    };
    if !condition_changed && nomination_change.is_none() {
        return None;
    }
    let mut patch = json!({});
    if condition_changed {
        let mut cond = json!({
            "type": "PodScheduled",
            "status": "False",
            "reason": reason,
            "message": message,
            "lastProbeTime": null,
        });
        if current.is_none_or(|c| c.status != "False") {
            cond["lastTransitionTime"] = json!(now_time());
        }
        if let Some(g) = pod.metadata.generation {
            cond["observedGeneration"] = json!(g);
        }
        patch["conditions"] = json!([cond]);
    }
    if let Some(n) = nomination_change {
        patch["nominatedNodeName"] = n;
    }
    Some(json!({ "status": patch }))
}

/// The condition upstream puts on a preemption victim before deleting it.
fn disruption_target_patch(victim: &Pod) -> Value {
    let mut cond = json!({
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": format!("{COMPONENT}: preempting to accommodate a higher priority pod"),
        "lastTransitionTime": now_time(),
    });
    if let Some(g) = victim.metadata.generation {
        cond["observedGeneration"] = json!(g);
    }
    json!({"status": {"conditions": [cond]}})
}

impl<A: SchedulerApi> Scheduler<A> {
    pub fn new(api: A) -> Scheduler<A> {
        Scheduler {
            state: Mutex::default(),
            wake: Notify::new(),
            api,
            binding_slots: Semaphore::new(MAX_CONCURRENT_BINDINGS),
            report_slots: Semaphore::new(MAX_CONCURRENT_REPORTS),
            volumes_changed: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn moved(&self, st: &mut State, event: Option<ClusterEvent>) {
        if let Some(e) = event {
            st.queue.on_event(e, Instant::now());
            self.wake.notify_one();
        }
    }

    // ---- watch events ----------------------------------------------------------------------

    fn apply_pod(&self, st: &mut State, pod: Pod) {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let assigned = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty());
        if assigned {
            st.queue.delete(&uid);
            let event = if is_terminal(&pod) {
                st.cache.remove_pod(&uid)
            } else {
                let info = st.cache.pod_info(pod);
                st.cache.set_assigned_pod(info)
            };
            self.moved(st, event);
            return;
        }
        if st.cache.is_assumed(&uid) {
            // A stale view of a pod being bound.
            return;
        }
        if is_terminal(&pod) || pod.metadata.deletion_timestamp.is_some() || !responsible_for(&pod) || gated(&pod) {
            st.queue.delete(&uid);
            st.cache.remove_pod(&uid);
            return;
        }
        let info = st.cache.pod_info(pod);
        st.cache.set_nominated(&info, info.nominated_node());
        st.queue.add(info, Instant::now());
        self.wake.notify_one();
    }

    fn delete_pod(&self, st: &mut State, pod: &Pod) {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        st.queue.delete(&uid);
        let event = st.cache.remove_pod(&uid);
        self.moved(st, event);
    }

    pub fn on_pod(&self, event: Event<Pod>) {
        let mut st = self.lock();
        match event {
            Event::Init => st.relist.pods = Some(HashSet::new()),
            Event::InitApply(pod) => {
                if let Some(seen) = st.relist.pods.as_mut() {
                    seen.insert(pod.metadata.uid.clone().unwrap_or_default());
                }
                self.apply_pod(&mut st, pod);
            }
            Event::InitDone => {
                let seen = st.relist.pods.take().unwrap_or_default();
                st.queue.retain(&seen);
                if st.cache.retain_pods(&seen) {
                    self.moved(&mut st, Some(ClusterEvent::AssignedPodDelete));
                }
                st.synced.pods = true;
                self.wake.notify_one();
            }
            Event::Apply(pod) => self.apply_pod(&mut st, pod),
            Event::Delete(pod) => self.delete_pod(&mut st, &pod),
        }
    }

    pub fn on_node(&self, event: Event<Node>) {
        let mut st = self.lock();
        match event {
            Event::Init => st.relist.nodes = Some(HashSet::new()),
            Event::InitApply(node) | Event::Apply(node) => {
                if let Some(seen) = st.relist.nodes.as_mut() {
                    seen.insert(node.metadata.name.clone().unwrap_or_default());
                }
                let event = st.cache.set_node(node);
                self.moved(&mut st, event);
            }
            Event::InitDone => {
                let seen = st.relist.nodes.take().unwrap_or_default();
                st.cache.retain_nodes(&seen);
                st.synced.nodes = true;
                self.wake.notify_one();
            }
            Event::Delete(node) => st.cache.remove_node(node.metadata.name.as_deref().unwrap_or_default()),
        }
    }

    /// Recomputes queued pods' priorities after a class changed.
    fn refresh_queue_priorities(&self, st: &mut State) {
        let now = Instant::now();
        for p in st.queue.pods() {
            if p.spec().priority.is_none() {
                let info = st.cache.pod_info(p.pod.clone());
                st.queue.add(info, now);
            }
        }
    }

    pub fn on_priority_class(&self, event: Event<PriorityClass>) {
        let mut st = self.lock();
        let changed = match event {
            Event::Init => {
                st.relist.priority_classes = Some(HashSet::new());
                false
            }
            Event::InitApply(pc) | Event::Apply(pc) => {
                if let Some(seen) = st.relist.priority_classes.as_mut() {
                    seen.insert(pc.metadata.name.clone().unwrap_or_default());
                }
                st.cache.set_priority_class(pc)
            }
            Event::InitDone => {
                let seen = st.relist.priority_classes.take().unwrap_or_default();
                st.cache.retain_priority_classes(&seen);
                st.synced.priority_classes = true;
                self.wake.notify_one();
                true
            }
            Event::Delete(pc) => st.cache.remove_priority_class(pc.metadata.name.as_deref().unwrap_or_default()),
        };
        if changed {
            self.refresh_queue_priorities(&mut st);
        }
    }

    pub fn on_pdb(&self, event: Event<PodDisruptionBudget>) {
        let mut st = self.lock();
        match event {
            Event::Init => st.relist.pdbs = Some(HashSet::new()),
            Event::InitApply(pdb) | Event::Apply(pdb) => {
                if let Some(seen) = st.relist.pdbs.as_mut() {
                    seen.insert((
                        pdb.metadata.namespace.clone().unwrap_or_default(),
                        pdb.metadata.name.clone().unwrap_or_default(),
                    ));
                }
                st.cache.set_pdb(pdb);
            }
            Event::InitDone => {
                let seen = st.relist.pdbs.take().unwrap_or_default();
                st.cache.retain_pdbs(&seen);
                st.synced.pdbs = true;
                self.wake.notify_one();
            }
            Event::Delete(pdb) => st.cache.remove_pdb(
                pdb.metadata.namespace.as_deref().unwrap_or_default(),
                pdb.metadata.name.as_deref().unwrap_or_default(),
            ),
        }
    }

    pub fn on_namespace(&self, event: Event<Namespace>) {
        let mut st = self.lock();
        match event {
            Event::Init => st.relist.namespaces = Some(HashSet::new()),
            Event::InitApply(ns) | Event::Apply(ns) => {
                let name = ns.metadata.name.clone().unwrap_or_default();
                if let Some(seen) = st.relist.namespaces.as_mut() {
                    seen.insert(name.clone());
                }
                st.cache.set_namespace(&name, ns.metadata.labels.unwrap_or_default());
            }
            Event::InitDone => {
                let seen = st.relist.namespaces.take().unwrap_or_default();
                st.cache.retain_namespaces(&seen);
                st.synced.namespaces = true;
                self.wake.notify_one();
            }
            Event::Delete(ns) => st.cache.remove_namespace(ns.metadata.name.as_deref().unwrap_or_default()),
        }
    }

    fn on_storage<K: kube::Resource>(&self, event: Event<K>, w: StorageWatch<K>) {
        let key = |o: &K| (o.namespace().unwrap_or_default(), o.name_any());
        let mut st = self.lock();
        match event {
            Event::Init => *(w.relist)(&mut st.relist) = Some(HashSet::new()),
            Event::InitApply(o) | Event::Apply(o) => {
                let k = key(&o);
                if let Some(seen) = (w.relist)(&mut st.relist).as_mut() {
                    seen.insert(k);
                }
                let event = (w.set)(&mut st.cache, o);
                self.moved(&mut st, event);
            }
            Event::InitDone => {
                let seen = (w.relist)(&mut st.relist).take().unwrap_or_default();
                (w.retain)(&mut st.cache, &seen);
                *(w.synced)(&mut st.synced) = true;
                self.wake.notify_one();
            }
            Event::Delete(o) => (w.remove)(&mut st.cache, &key(&o)),
        }
        drop(st);
        self.volumes_changed.notify_waiters();
    }

    pub fn on_claim(&self, event: Event<PersistentVolumeClaim>) {
        self.on_storage(
            event,
            StorageWatch {
                relist: |r| &mut r.claims,
                synced: |s| &mut s.claims,
                set: Cache::set_claim,
                remove: |c, (ns, name)| c.remove_claim(ns, name),
                retain: Cache::retain_claims,
            },
        );
    }

    pub fn on_volume(&self, event: Event<PersistentVolume>) {
        self.on_storage(
            event,
            StorageWatch {
                relist: |r| &mut r.volumes,
                synced: |s| &mut s.volumes,
                set: Cache::set_volume,
                remove: |c, (_, name)| c.remove_volume(name),
                retain: |c, seen| c.retain_volumes(&seen.iter().map(|(_, n)| n.clone()).collect()),
            },
        );
    }

    pub fn on_storage_class(&self, event: Event<StorageClass>) {
        self.on_storage(
            event,
            StorageWatch {
                relist: |r| &mut r.storage_classes,
                synced: |s| &mut s.storage_classes,
                set: Cache::set_class,
                remove: |c, (_, name)| c.remove_class(name),
                retain: |c, seen| c.retain_classes(&seen.iter().map(|(_, n)| n.clone()).collect()),
            },
        );
    }

    // ---- scheduling ------------------------------------------------------------------------

    /// Schedules the next queued pod, if any, once every watch has synced. The returned task
    /// performs the API calls (binding, or the failure's status, events and preemption).
    pub fn schedule_one(self: &Arc<Self>) -> Option<JoinHandle<()>> {
        let mut st = self.lock();
        if !st.synced.all() {
            return None;
        }
        let pod = st.queue.pop(Instant::now())?;
        let state = CycleState::new(&st.cache, pod.clone());
        let failure = match find_node(&st.cache, &state, |n| rand::random_range(0..n.max(1))) {
            Ok(node) => {
                let plan = match (&state.volumes, st.cache.node(&node)) {
                    (Ok(Some(claims)), Some(info)) => crate::volumes::filter(claims, info).unwrap_or_default(),
                    _ => VolumePlan::default(),
                };
                st.cache.assume(pod.clone(), &node);
                st.cache.assume_volumes(&plan, &node);
                drop(st);
                tracing::debug!(pod = %format!("{}/{}", pod.namespace, pod.name), node, "assumed");
                return Some(tokio::spawn(self.clone().bind(pod, node, plan)));
            }
            // Upstream counts this as unschedulable (unresolvable), not as an error: the pod
            // waits for a node to appear.
            Err(ScheduleError::NoNodes) => {
                st.cache.set_nominated(&pod, None);
                Failure {
                    message: ERR_NO_NODES.into(),
                    nomination: Nomination::Clear,
                    preemption: None,
                    plugins: BTreeSet::new(),
                }
            }
            Err(ScheduleError::Fit(fit)) => {
                let mut message = fit.message();
                let plugins = fit.plugins();
                let (nomination, preemption) = match preempt(&st.cache, &state, &fit) {
                    Preemption::Nominate { candidate, clear_nominations } => {
                        st.cache.set_nominated(&pod, Some(&candidate.node));
                        for p in &clear_nominations {
                            st.cache.set_nominated(p, None);
                        }
                        (Nomination::Set(candidate.node.clone()), Some((candidate, clear_nominations)))
                    }
                    Preemption::Fail { message: why, clear_nomination } => {
                        message = format!("{message} {why}");
                        if clear_nomination {
                            st.cache.set_nominated(&pod, None);
                            (Nomination::Clear, None)
                        } else {
                            (Nomination::Keep, None)
                        }
                    }
                };
                Failure { message, nomination, preemption, plugins }
            }
        };
        drop(st);
        Some(tokio::spawn(self.clone().fail(pod, failure)))
    }

    /// VolumeBinding's PreBind: gives the chosen volumes their claims and the claims to provision
    /// their node, then waits until the binder has bound them all.
    async fn pre_bind(&self, pod: &PodInfo, node: &str, plan: &VolumePlan) -> Result<(), String> {
        if plan.is_empty() {
            return Ok(());
        }
        let mut written = Written::default();
        for (v, c) in plan.bindings.iter().filter(|(v, c)| !names(v, c)) {
            let claim_ref = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "namespace": c.metadata.namespace, "name": c.metadata.name, "uid": c.metadata.uid,
                "resourceVersion": c.metadata.resource_version});
            let patch = json!({"metadata": {"resourceVersion": v.metadata.resource_version,
                                            "annotations": {BOUND_BY_CONTROLLER: "yes"}},
                               "spec": {"claimRef": claim_ref}});
            let rv = self.api.patch_volume(&v.name_any(), patch).await.map_err(|e| e.to_string())?;
            if let Some(rv) = rv.and_then(|rv| rv.parse().ok()) {
                written.volumes.insert(v.name_any(), rv);
            }
        }
        for c in plan.provisions.iter().filter(|c| annotation(&c.metadata, SELECTED_NODE) != Some(node)) {
            let patch = json!({"metadata": {"resourceVersion": c.metadata.resource_version,
                                            "annotations": {SELECTED_NODE: node}}});
            let namespace = c.metadata.namespace.as_deref().unwrap_or_default();
            let rv = self.api.patch_claim(namespace, &c.name_any(), patch).await.map_err(|e| e.to_string())?;
            if let Some(rv) = rv.and_then(|rv| rv.parse().ok()) {
                written.claims.insert((namespace.to_string(), c.name_any()), rv);
            }
        }
        let deadline = tokio::time::Instant::now() + VOLUME_BIND_TIMEOUT;
        loop {
            let changed = self.volumes_changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let st = self.lock();
                if !st.cache.is_assumed(&pod.uid) {
                    return Err("pod does not exist any more".into());
                }
                if check_bindings(&st.cache, plan, node, &written).map_err(|e| format!("binding volumes: {e}"))? {
                    return Ok(());
                }
            }
            // Upstream polls every second; the watches usually answer sooner.
            let poll = tokio::time::Instant::now() + Duration::from_secs(1);
            tokio::select! {
                _ = changed => {}
                _ = tokio::time::sleep_until(poll.min(deadline)) => {}
            }
            if tokio::time::Instant::now() >= deadline {
                return Err("binding volumes: context deadline exceeded".into());
            }
        }
    }

    async fn bind(self: Arc<Self>, pod: Arc<PodInfo>, node: String, plan: VolumePlan) {
        let r = pod_ref(&pod);
        let bound = match self.pre_bind(&pod, &node, &plan).await {
            Err(e) => Err(format!("running PreBind plugin \"VolumeBinding\": {e}")),
            Ok(()) => {
                let _slot = self.binding_slots.acquire().await;
                self.api.bind(&r, &node).await.map_err(|e| format!("Binding rejected: {e}"))
            }
        };
        self.lock().cache.forget_volumes(&plan);
        let report = match bound {
            Ok(()) => {
                {
                    let mut st = self.lock();
                    st.queue.done(&pod.uid);
                    st.cache.finish_binding(&pod.uid);
                }
                // The binding itself set PodScheduled=True (as upstream's binding storage does).
                let msg = format!("Successfully assigned {}/{} to {node}", r.namespace, r.name);
                Some((None, EventType::Normal, "Scheduled", msg))
            }
            Err(msg) => {
                tracing::warn!(error = %msg, "binding failed; retrying after back-off");
                let still_pending = {
                    let mut st = self.lock();
                    st.cache.forget(&pod.uid);
                    let pending = st.queue.place_of(&pod.uid).is_some();
                    st.queue.requeue_error(&pod.uid, Instant::now());
                    pending
                };
                self.wake.notify_one();
                // A pod someone else bound or deleted meanwhile needs no report.
                still_pending.then(|| {
                    let patch = unschedulable_patch(&pod.pod, "SchedulerError", &msg, &Nomination::Keep);
                    (patch, EventType::Warning, "FailedScheduling", msg)
                })
            }
        };
        let Some((patch, kind, reason, msg)) = report else { return };
        let _slot = self.report_slots.acquire().await;
        if let Some(patch) = patch {
            if let Err(e) = self.api.patch_status(&r, patch).await {
                tracing::debug!(error = %e, "updating PodScheduled failed");
            }
        }
        self.api.event(&r, kind, reason, &msg).await;
    }

    /// Evicts one victim as upstream does: mark it `DisruptionTarget`, delete it, tell it why.
    async fn evict(&self, preemptor: &PodInfo, node: &str, victim: &PodInfo) {
        let r = pod_ref(victim);
        if let Err(e) = self.api.patch_status(&r, disruption_target_patch(&victim.pod)).await {
            if e.is_not_found() {
                return;
            }
            tracing::warn!(error = %e, "marking a preemption victim failed");
        }
        match self.api.delete_pod(&r).await {
            Ok(()) => {}
            Err(e) if e.is_not_found() => return,
            Err(e) => {
                tracing::warn!(error = %e, "deleting a preemption victim failed");
                return;
            }
        }
        let msg = format!("Preempted by pod {} on node {node}", preemptor.uid);
        self.api.event(&r, EventType::Normal, "Preempted", &msg).await;
    }

    async fn fail(self: Arc<Self>, pod: Arc<PodInfo>, f: Failure) {
        let r = pod_ref(&pod);
        if let Some((candidate, clear)) = &f.preemption {
            tracing::info!(
                pod = %format!("{}/{}", r.namespace, r.name),
                node = %candidate.node,
                victims = candidate.victims.len(),
                "preempting"
            );
            let evictions =
                candidate.victims.iter().filter(|v| !v.is_terminating()).map(|v| self.evict(&pod, &candidate.node, v));
            futures::future::join_all(evictions).await;
            for p in clear {
                if let Err(e) = self.api.patch_status(&pod_ref(p), json!({"status": {"nominatedNodeName": null}})).await
                {
                    tracing::debug!(error = %e, "clearing a lower-priority nomination failed");
                }
            }
        }
        if let Some(patch) = unschedulable_patch(&pod.pod, "Unschedulable", &f.message, &f.nomination) {
            if let Err(e) = self.api.patch_status(&r, patch).await {
                if !e.is_not_found() {
                    tracing::warn!(error = %e, "updating PodScheduled failed");
                }
            }
        }
        self.api.event(&r, EventType::Warning, "FailedScheduling", &f.message).await;
        self.lock().queue.requeue_unschedulable(&pod.uid, f.plugins, Instant::now());
        self.wake.notify_one();
    }

    /// Pops and schedules pods until `cancel` fires.
    pub async fn run_loop(self: Arc<Self>, cancel: tokio_util::sync::CancellationToken) {
        loop {
            if self.schedule_one().is_some() {
                // Let watch events and bindings in between attempts.
                tokio::task::yield_now().await;
                continue;
            }
            let wakeup = self.lock().queue.next_wakeup();
            let sleep = async {
                match wakeup {
                    Some(t) => tokio::time::sleep_until(tokio::time::Instant::from_std(t)).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = self.wake.notified() => {}
                _ = sleep => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ApiError;
    use crate::testing::{node, pod};
    use std::sync::atomic::{AtomicBool, Ordering};

    #[derive(Clone, Debug, PartialEq)]
    enum Call {
        Bind(String, String),
        Patch(String, Value),
        Delete(String),
        Event(String, EventType, String, String),
        PatchVolume(String, Value),
        PatchClaim(String, Value),
    }

    #[derive(Default)]
    struct FakeApi {
        calls: Mutex<Vec<Call>>,
        fail_bind: AtomicBool,
    }

    impl FakeApi {
        fn push(&self, c: Call) {
            self.calls.lock().expect("calls").push(c);
        }
    }

    impl SchedulerApi for FakeApi {
        async fn bind(&self, pod: &PodRef, node: &str) -> Result<(), ApiError> {
            if self.fail_bind.load(Ordering::SeqCst) {
                return Err(ApiError::Bind {
                    namespace: pod.namespace.clone(),
                    name: pod.name.clone(),
                    node: node.into(),
                    message: "boom".into(),
                });
            }
            self.push(Call::Bind(pod.name.clone(), node.into()));
            Ok(())
        }
        async fn patch_status(&self, pod: &PodRef, patch: Value) -> Result<(), ApiError> {
            self.push(Call::Patch(pod.name.clone(), patch));
            Ok(())
        }
        async fn delete_pod(&self, pod: &PodRef) -> Result<(), ApiError> {
            self.push(Call::Delete(pod.name.clone()));
            Ok(())
        }
        async fn event(&self, pod: &PodRef, kind: EventType, reason: &str, message: &str) {
            self.push(Call::Event(pod.name.clone(), kind, reason.into(), message.into()));
        }
        async fn patch_volume(&self, name: &str, patch: Value) -> Result<Option<String>, ApiError> {
            let rv =
                patch.pointer("/metadata/resourceVersion").and_then(Value::as_str).and_then(|v| v.parse::<u64>().ok());
            self.push(Call::PatchVolume(name.into(), patch));
            Ok(rv.map(|v| (v + 1).to_string()))
        }
        async fn patch_claim(&self, _namespace: &str, name: &str, patch: Value) -> Result<Option<String>, ApiError> {
            let rv =
                patch.pointer("/metadata/resourceVersion").and_then(Value::as_str).and_then(|v| v.parse::<u64>().ok());
            self.push(Call::PatchClaim(name.into(), patch));
            Ok(rv.map(|v| (v + 1).to_string()))
        }
    }

    fn synced_scheduler() -> Arc<Scheduler<FakeApi>> {
        let s = Arc::new(Scheduler::new(FakeApi::default()));
        s.on_pod(Event::Init);
        s.on_pod(Event::InitDone);
        s.on_node(Event::Init);
        s.on_node(Event::InitDone);
        s.on_priority_class(Event::Init);
        s.on_priority_class(Event::InitDone);
        s.on_pdb(Event::Init);
        s.on_pdb(Event::InitDone);
        s.on_namespace(Event::Init);
        s.on_namespace(Event::InitDone);
        s.on_claim(Event::Init);
        s.on_claim(Event::InitDone);
        s.on_volume(Event::Init);
        s.on_volume(Event::InitDone);
        s.on_storage_class(Event::Init);
        s.on_storage_class(Event::InitDone);
        s
    }

    fn claim_pod(name: &str, claim: &str) -> Pod {
        let mut p = pod(name).build();
        p.spec.as_mut().expect("spec").volumes =
            Some(vec![serde_json::from_value(json!({"name": "data", "persistentVolumeClaim": {"claimName": claim}}))
                .expect("volume")]);
        p
    }

    fn claim(name: &str, extra: Value) -> PersistentVolumeClaim {
        let mut c = json!({"metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
                                        "resourceVersion": "7"},
                           "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local-path",
                                    "resources": {"requests": {"storage": "1Gi"}}}});
        merge(&mut c, extra);
        serde_json::from_value(c).expect("claim")
    }

    fn merge(into: &mut Value, from: Value) {
        match (into, from) {
            (Value::Object(a), Value::Object(b)) => {
                for (k, v) in b {
                    merge(a.entry(k).or_insert(Value::Null), v);
                }
            }
            (slot, v) => *slot = v,
        }
    }

    fn take_calls(s: &Scheduler<FakeApi>) -> Vec<Call> {
        std::mem::take(&mut *s.api.calls.lock().expect("calls"))
    }

    async fn schedule(s: &Arc<Scheduler<FakeApi>>) -> Vec<Call> {
        let task = s.schedule_one().expect("a pod to schedule");
        task.await.expect("task");
        take_calls(s)
    }

    fn condition(call: &Call) -> Option<(String, String, Option<String>, Option<String>)> {
        let Call::Patch(name, patch) = call else { return None };
        let c = patch.pointer("/status/conditions/0")?;
        Some((
            name.clone(),
            c["status"].as_str()?.to_string(),
            c["reason"].as_str().map(str::to_string),
            c["message"].as_str().map(str::to_string),
        ))
    }

    #[tokio::test]
    async fn nothing_is_scheduled_before_every_watch_has_synced() {
        let s = Arc::new(Scheduler::new(FakeApi::default()));
        s.on_node(Event::Apply(node("n1", "4", "4Gi").build()));
        s.on_pod(Event::Apply(pod("p").build()));
        assert!(s.schedule_one().is_none());
    }

    #[tokio::test]
    async fn binds_a_pending_pod_and_reports_it_scheduled() {
        let s = synced_scheduler();
        s.on_node(Event::Apply(node("n1", "4", "4Gi").build()));
        s.on_pod(Event::Apply(pod("p").cpu("1").build()));
        let calls = schedule(&s).await;
        assert_eq!(calls[0], Call::Bind("p".into(), "n1".into()));
        // The binding sets PodScheduled=True; the scheduler only reports the event.
        assert_eq!(calls.len(), 2, "{calls:?}");
        assert_eq!(
            calls[1],
            Call::Event(
                "p".into(),
                EventType::Normal,
                "Scheduled".into(),
                "Successfully assigned default/p to n1".into()
            )
        );
        // The pod counts on its node before the watch confirms the binding.
        s.on_pod(Event::Apply(pod("q").cpu("3500m").build()));
        let calls = schedule(&s).await;
        assert_eq!(
            condition(&calls[0]).and_then(|c| c.3),
            Some("0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.".into())
        );
    }

    #[tokio::test]
    async fn unschedulable_pod_waits_then_fits_on_a_new_node() {
        let s = synced_scheduler();
        s.on_node(Event::Apply(node("small", "1", "4Gi").build()));
        s.on_pod(Event::Apply(pod("big").cpu("2").build()));
        let calls = schedule(&s).await;
        let msg = "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.";
        assert_eq!(
            condition(&calls[0]),
            Some(("big".into(), "False".into(), Some("Unschedulable".into()), Some(msg.into())))
        );
        assert_eq!(calls[1], Call::Event("big".into(), EventType::Warning, "FailedScheduling".into(), msg.into()));
        // Parked: nothing to do until the cluster changes.
        assert!(s.schedule_one().is_none());
        s.on_node(Event::Apply(node("large", "8", "16Gi").build()));
        let calls = schedule(&s).await;
        assert_eq!(calls[0], Call::Bind("big".into(), "large".into()));
    }

    #[tokio::test]
    async fn with_no_nodes_the_pod_waits_for_the_first_one() {
        let s = synced_scheduler();
        s.on_pod(Event::Apply(pod("early").build()));
        let calls = schedule(&s).await;
        assert_eq!(
            condition(&calls[0]),
            Some(("early".into(), "False".into(), Some("Unschedulable".into()), Some(ERR_NO_NODES.into())))
        );
        assert!(s.schedule_one().is_none());
        s.on_node(Event::Apply(node("n1", "1", "1Gi").build()));
        let calls = schedule(&s).await;
        assert_eq!(calls[0], Call::Bind("early".into(), "n1".into()));
    }

    #[tokio::test]
    async fn preemption_evicts_the_victim_nominates_and_then_binds_the_preemptor() {
        let s = synced_scheduler();
        s.on_node(Event::Apply(node("n1", "1", "4Gi").build()));
        let victim = pod("low").cpu("1").priority(0).node("n1").build();
        s.on_pod(Event::Apply(victim.clone()));
        s.on_pod(Event::Apply(pod("high").cpu("1").priority(100).build()));
        let calls = schedule(&s).await;
        assert_eq!(
            condition(&calls[0]).map(|c| (c.0, c.2)),
            Some(("low".into(), Some("PreemptionByScheduler".into())))
        );
        assert_eq!(calls[1], Call::Delete("low".into()));
        assert_eq!(
            calls[2],
            Call::Event(
                "low".into(),
                EventType::Normal,
                "Preempted".into(),
                "Preempted by pod high-uid on node n1".into()
            )
        );
        let Call::Patch(name, patch) = &calls[3] else { panic!("expected the preemptor's status: {calls:?}") };
        assert_eq!(name, "high");
        assert_eq!(patch.pointer("/status/nominatedNodeName"), Some(&json!("n1")));
        assert_eq!(
            patch.pointer("/status/conditions/0/message"),
            Some(&json!("0/1 nodes are available: 1 Insufficient cpu."))
        );
        // The victim goes away; the preemptor is retried and lands on its nominated node.
        s.on_pod(Event::Delete(victim));
        let calls = schedule(&s).await;
        assert_eq!(calls[0], Call::Bind("high".into(), "n1".into()));
    }

    #[tokio::test]
    async fn a_lower_priority_pod_cannot_take_the_room_a_preemptor_was_nominated_for() {
        let s = synced_scheduler();
        s.on_node(Event::Apply(node("n1", "1", "4Gi").build()));
        let victim = pod("victim").cpu("1").priority(0).node("n1").build();
        s.on_pod(Event::Apply(victim.clone()));
        s.on_pod(Event::Apply(pod("high").cpu("1").priority(100).build()));
        schedule(&s).await;
        // A mid-priority pod arrives just before the victim is gone; it is popped first (the
        // preemptor is backing off) but must leave the freed room to the nominated preemptor.
        s.on_pod(Event::Apply(pod("mid").cpu("1").priority(50).build()));
        s.on_pod(Event::Delete(victim));
        let calls = schedule(&s).await;
        assert_eq!(condition(&calls[0]).map(|c| (c.0, c.1)), Some(("mid".into(), "False".into())));
        let calls = schedule(&s).await;
        assert_eq!(calls[0], Call::Bind("high".into(), "n1".into()));
    }

    #[tokio::test]
    async fn a_failed_binding_is_undone_and_retried_after_backoff() {
        let s = synced_scheduler();
        s.api.fail_bind.store(true, Ordering::SeqCst);
        s.on_node(Event::Apply(node("n1", "2", "4Gi").build()));
        s.on_pod(Event::Apply(pod("p").cpu("2").build()));
        let calls = schedule(&s).await;
        assert_eq!(condition(&calls[0]).and_then(|c| c.2), Some("SchedulerError".into()));
        // The assumption is gone: another pod could use the CPU; `p` itself waits out its back-off.
        assert!(s.schedule_one().is_none());
        assert!(!s.lock().cache.is_assumed("p-uid"));
        assert_eq!(s.lock().cache.node("n1").map(|n| n.requested.milli_cpu), Some(0));
    }

    #[tokio::test]
    async fn gated_terminating_and_foreign_pods_are_not_scheduled() {
        let s = synced_scheduler();
        s.on_node(Event::Apply(node("n1", "2", "4Gi").build()));
        let mut gated = pod("gated").build();
        if let Some(spec) = gated.spec.as_mut() {
            spec.scheduling_gates = Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate { name: "wait".into() }]);
        }
        s.on_pod(Event::Apply(gated));
        s.on_pod(Event::Apply(pod("dying").terminating().build()));
        let mut foreign = pod("foreign").build();
        if let Some(spec) = foreign.spec.as_mut() {
            spec.scheduler_name = Some("other-scheduler".into());
        }
        s.on_pod(Event::Apply(foreign));
        assert!(s.schedule_one().is_none());
    }

    #[test]
    fn unschedulable_patch_is_skipped_when_nothing_changes() {
        let mut p = pod("p").build();
        let patch = unschedulable_patch(&p, "Unschedulable", "m", &Nomination::Keep).expect("first patch");
        assert!(patch.pointer("/status/conditions/0/lastTransitionTime").is_some());
        assert!(patch.pointer("/status/nominatedNodeName").is_none());
        p.status.get_or_insert_with(Default::default).conditions =
            Some(vec![k8s_openapi::api::core::v1::PodCondition {
                type_: "PodScheduled".into(),
                status: "False".into(),
                reason: Some("Unschedulable".into()),
                message: Some("m".into()),
                ..Default::default()
            }]);
        assert_eq!(unschedulable_patch(&p, "Unschedulable", "m", &Nomination::Keep), None);
        let nominate = unschedulable_patch(&p, "Unschedulable", "m", &Nomination::Set("n1".into())).expect("patch");
        assert_eq!(nominate, json!({"status": {"nominatedNodeName": "n1"}}));
        let changed = unschedulable_patch(&p, "Unschedulable", "m2", &Nomination::Keep).expect("patch");
        // Same status: the transition time stays.
        assert!(changed.pointer("/status/conditions/0/lastTransitionTime").is_none());
    }
    #[tokio::test]
    async fn a_pod_waits_for_its_claim_with_upstreams_message_and_is_bound_once_the_claim_is() {
        let s = synced_scheduler();
        s.on_node(Event::Apply(node("n1", "4", "4Gi").build()));
        s.on_storage_class(Event::Apply(
            serde_json::from_value(json!({"metadata": {"name": "local-path"}, "provisioner": "k1s.io/local-path",
                                          "volumeBindingMode": "WaitForFirstConsumer"}))
            .expect("class"),
        ));
        s.on_pod(Event::Apply(claim_pod("p", "data")));
        let calls = schedule(&s).await;
        let msg = "0/1 nodes are available: persistentvolumeclaim \"data\" not found. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.";
        assert_eq!(
            condition(&calls[0]),
            Some(("p".into(), "False".into(), Some("Unschedulable".into()), Some(msg.into())))
        );
        assert!(s.schedule_one().is_none(), "parked until the storage changes");
        // The claim appears: the pod is retried, its node selected, and it waits for the binder.
        s.on_claim(Event::Apply(claim("data", json!({}))));
        let waiting = s.schedule_one().expect("retried on the claim's arrival");
        let patched = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                if let Some(c) = take_calls(&s).into_iter().next() {
                    return c;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("the claim is patched");
        assert_eq!(
            patched,
            Call::PatchClaim(
                "data".into(),
                json!({"metadata": {"resourceVersion": "7", "annotations": {SELECTED_NODE: "n1"}}})
            )
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(take_calls(&s).is_empty(), "the pod is not bound before its claim");
        let selected = json!({"metadata": {"resourceVersion": "8", "annotations": {SELECTED_NODE: "n1"}}});
        s.on_claim(Event::Apply(claim("data", selected)));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(take_calls(&s).is_empty(), "selected but not yet bound");
        let bound = json!({"metadata": {"resourceVersion": "9",
                                        "annotations": {SELECTED_NODE: "n1", "pv.kubernetes.io/bind-completed": "yes"}},
                           "spec": {"volumeName": "pvc-1"}});
        s.on_claim(Event::Apply(claim("data", bound)));
        tokio::time::timeout(Duration::from_secs(5), waiting).await.expect("bound in time").expect("task");
        assert_eq!(take_calls(&s)[0], Call::Bind("p".into(), "n1".into()));
    }

    #[tokio::test]
    async fn a_static_volume_is_given_its_claim_before_the_pod_is_bound() {
        let s = synced_scheduler();
        s.on_node(Event::Apply(node("n1", "4", "4Gi").build()));
        s.on_storage_class(Event::Apply(
            serde_json::from_value(
                json!({"metadata": {"name": "local-path"}, "provisioner": "kubernetes.io/no-provisioner",
                                          "volumeBindingMode": "WaitForFirstConsumer"}),
            )
            .expect("class"),
        ));
        s.on_claim(Event::Apply(claim("data", json!({}))));
        s.on_pod(Event::Apply(claim_pod("p", "data")));
        let calls = schedule(&s).await;
        let msg = "0/1 nodes are available: 1 node(s) didn't find available persistent volumes to bind. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.";
        assert_eq!(condition(&calls[0]).and_then(|c| c.3).as_deref(), Some(msg));
        let volume: PersistentVolume = serde_json::from_value(json!({"metadata": {"name": "pv1", "resourceVersion": "3"},
            "spec": {"capacity": {"storage": "2Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "local-path"},
            "status": {"phase": "Available"}}))
        .expect("volume");
        s.on_volume(Event::Apply(volume.clone()));
        let waiting = s.schedule_one().expect("retried on the volume's arrival");
        tokio::time::sleep(Duration::from_millis(50)).await;
        let calls = take_calls(&s);
        let Some(Call::PatchVolume(name, patch)) = calls.first() else { panic!("{calls:?}") };
        assert_eq!(name, "pv1");
        assert_eq!(patch["spec"]["claimRef"]["uid"], "uid-data");
        assert_eq!(patch["metadata"]["resourceVersion"], "3");
        let mut claimed = volume;
        claimed.spec.as_mut().expect("spec").claim_ref =
            serde_json::from_value(patch["spec"]["claimRef"].clone()).expect("claimRef");
        claimed.metadata.resource_version = Some("4".into());
        s.on_volume(Event::Apply(claimed));
        let bound = json!({"metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes"}}, "spec": {"volumeName": "pv1"}});
        s.on_claim(Event::Apply(claim("data", bound)));
        tokio::time::timeout(Duration::from_secs(5), waiting).await.expect("bound in time").expect("task");
        assert_eq!(take_calls(&s)[0], Call::Bind("p".into(), "n1".into()));
    }
}
