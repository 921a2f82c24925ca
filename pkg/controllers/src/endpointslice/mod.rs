//! The EndpointSlice and Endpoints controllers: for every Service with a selector, the pods it
//! selects become endpoints (ready, serving, terminating; ports resolved per pod) in
//! EndpointSlices labelled `kubernetes.io/service-name` and managed by
//! `endpointslice-controller.k8s.io` (upstream `endpointslice` controller), and in the legacy
//! Endpoints object of the same name (upstream `endpoint` controller).
//!
//! Both are fed by reflectors over Services, Pods, EndpointSlices, Endpoints and Nodes; a pod
//! change is mapped to the services selecting it (before and after the change) and queued at
//! once, so a readiness flip reaches the slices within one reconcile.

pub mod endpoints;
pub mod ports;
pub mod slices;
pub mod tracker;

use crate::Context;
use futures::{Stream, StreamExt};
use k1s_api::errors::chain;
use k1s_api::selectors;
use k1s_runtime::api_error::{is_already_exists, is_conflict, is_namespace_terminating, is_not_found};
use k1s_runtime::backoff::Backoff;
use k1s_runtime::events::{reference, EventType};
use k1s_runtime::workqueue::WorkQueue;
use k8s_openapi::api::core::v1::{Endpoints, Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Resource;
use serde::de::DeserializeOwned;
use slices::{NodeInfo, CONTROLLER_NAME, LABEL_MANAGED_BY, LABEL_SERVICE_NAME, LABEL_ZONE};
use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Debug;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracker::{format_trigger, SliceTracker, TriggerTimes};

/// Upstream's `--concurrent-service-endpoint-syncs` and `--concurrent-endpoint-slice-syncs`.
const WORKERS: usize = 5;
/// Upstream's EndpointSlice sync back-off: 1 s doubling up to 1000 s.
const SLICE_BACKOFF: Backoff = Backoff { base: Duration::from_secs(1), max: Duration::from_secs(1000) };
/// How long a sync waiting for the slice cache to catch up waits at most.
const STALE_RECHECK: Duration = Duration::from_secs(1);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the EndpointSlice cache of service {service} is behind this controller's writes")]
    StaleCache { service: String },
    #[error("creating an EndpointSlice for service {service}")]
    CreateSlice { service: String, source: kube::Error },
    #[error("updating EndpointSlice {slice} of service {service}")]
    UpdateSlice { service: String, slice: String, source: kube::Error },
    #[error("deleting EndpointSlice {slice} of service {service}")]
    DeleteSlice { service: String, slice: String, source: kube::Error },
    #[error("service {service}: {}", errors.join("; "))]
    PodsSkipped { service: String, errors: Vec<String> },
    #[error("writing Endpoints {service}")]
    WriteEndpoints { service: String, source: kube::Error },
    #[error("deleting Endpoints {service}")]
    DeleteEndpoints { service: String, source: kube::Error },
}

fn key_of(ns: &str, name: &str) -> String {
    format!("{ns}/{name}")
}

fn split_key(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("", key))
}

/// The services of `svcs` (all in `pod`'s namespace) whose selector selects `pod`.
pub fn selecting_services<'a>(svcs: impl IntoIterator<Item = &'a Service>, pod: &Pod) -> BTreeSet<String> {
    svcs.into_iter()
        .filter(|s| s.metadata.namespace == pod.metadata.namespace)
        .filter(|s| selectors::service_selects(service_selector(s), pod.metadata.labels.as_ref()))
        .map(|s| key_of(s.metadata.namespace.as_deref().unwrap_or(""), s.metadata.name.as_deref().unwrap_or("")))
        .collect()
}

/// A hash of what a pod contributes to endpoints; an update that leaves it unchanged (and the
/// services selecting the pod) triggers no sync.
pub fn endpoint_fingerprint(pod: &Pod) -> u64 {
    let mut h = DefaultHasher::new();
    let spec = pod.spec.as_ref();
    pod.metadata.labels.hash(&mut h);
    pod.metadata.deletion_timestamp.as_ref().map(|t| t.0.as_nanosecond()).hash(&mut h);
    crate::core::pod::ips(pod).hash(&mut h);
    crate::core::pod::is_ready(pod).hash(&mut h);
    crate::core::pod::is_terminal(pod).hash(&mut h);
    crate::core::pod::ready_condition(pod)
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0.as_nanosecond())
        .hash(&mut h);
    spec.and_then(|s| s.node_name.as_deref()).hash(&mut h);
    spec.and_then(|s| s.hostname.as_deref()).hash(&mut h);
    spec.and_then(|s| s.subdomain.as_deref()).hash(&mut h);
    for c in spec.iter().flat_map(|s| s.containers.iter().chain(s.init_containers.iter().flatten())) {
        for p in c.ports.iter().flatten() {
            (p.name.as_deref(), p.container_port, p.protocol.as_deref()).hash(&mut h);
        }
    }
    h.finish()
}

struct Shared {
    client: kube::Client,
    services: Store<Service>,
    pods: Store<Pod>,
    slices: Store<EndpointSlice>,
    endpoints: Store<Endpoints>,
    nodes: Store<Node>,
    slice_queue: WorkQueue<String>,
    endpoints_queue: WorkQueue<String>,
    tracker: Mutex<SliceTracker>,
    slice_triggers: Mutex<TriggerTimes>,
    endpoints_triggers: Mutex<TriggerTimes>,
    /// pod `namespace/name` ▶ (services selecting it, endpoint fingerprint) at its last event.
    pod_memberships: Mutex<HashMap<String, (BTreeSet<String>, u64)>>,
    /// node ▶ zone label, to notice zone changes.
    node_zones: Mutex<HashMap<String, Option<String>>>,
    /// Services whose sync waits for the slice cache.
    waiting_for_cache: Mutex<HashSet<String>>,
    recorder_ctx: Arc<Context>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    fn enqueue_service(&self, key: String) {
        self.endpoints_queue.add(key.clone());
        self.slice_queue.add(key);
    }

    fn enqueue_all_services(&self, slices_only: bool) {
        for s in self.services.state() {
            let key = key_of(s.metadata.namespace.as_deref().unwrap_or(""), s.metadata.name.as_deref().unwrap_or(""));
            if slices_only {
                self.slice_queue.add(key);
            } else {
                self.enqueue_service(key);
            }
        }
    }

    fn on_service(&self, svc: &Service) {
        self.enqueue_service(key_of(
            svc.metadata.namespace.as_deref().unwrap_or(""),
            svc.metadata.name.as_deref().unwrap_or(""),
        ));
    }

    fn on_pod(&self, pod: &Pod, deleted: bool) {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let pod_key = key_of(&ns, pod.metadata.name.as_deref().unwrap_or(""));
        let now = selecting_services(self.services.state().iter().map(|s| &**s), pod);
        let fingerprint = endpoint_fingerprint(pod);
        let before = {
            let mut m = lock(&self.pod_memberships);
            if deleted {
                m.remove(&pod_key)
            } else {
                m.insert(pod_key, (now.clone(), fingerprint))
            }
        };
        let changed = deleted || before.as_ref().is_none_or(|(svcs, fp)| *svcs != now || *fp != fingerprint);
        if !changed {
            return;
        }
        for key in now.into_iter().chain(before.into_iter().flat_map(|(s, _)| s)) {
            self.enqueue_service(key);
        }
    }

    fn slice_service(slice: &EndpointSlice) -> Option<String> {
        let labels = slice.metadata.labels.as_ref()?;
        if labels.get(LABEL_MANAGED_BY).map(String::as_str) != Some(CONTROLLER_NAME) {
            return None;
        }
        Some(key_of(slice.metadata.namespace.as_deref().unwrap_or(""), labels.get(LABEL_SERVICE_NAME)?))
    }

    fn on_slice(&self, slice: &EndpointSlice, deleted: bool) {
        let Some(key) = Self::slice_service(slice) else { return };
        let news = if deleted {
            !lock(&self.tracker).handle_deletion(&key, slice)
        } else {
            lock(&self.tracker).should_sync(&key, slice)
        };
        let waiting = lock(&self.waiting_for_cache).remove(&key);
        if news || waiting {
            self.slice_queue.add(key);
        }
    }

    fn on_node(&self, node: &Node, deleted: bool) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let zone = node.metadata.labels.as_ref().and_then(|l| l.get(LABEL_ZONE)).cloned();
        let changed = {
            let mut zones = lock(&self.node_zones);
            if deleted {
                zones.remove(&name).is_some()
            } else {
                zones.insert(name, zone.clone()) != Some(zone)
            }
        };
        if changed {
            self.enqueue_all_services(true);
        }
    }

    fn node_info(&self, name: &str) -> NodeInfo {
        match self.nodes.get(&ObjectRef::new(name)) {
            None => NodeInfo::Missing,
            Some(n) => NodeInfo::Zone(n.metadata.labels.as_ref().and_then(|l| l.get(LABEL_ZONE)).cloned()),
        }
    }

    fn selected_pods(&self, svc: &Service) -> Vec<Arc<Pod>> {
        let ns = svc.metadata.namespace.clone();
        let selector = service_selector(svc);
        self.pods.state_filter(|p| {
            p.metadata.namespace == ns && selectors::service_selects(selector, p.metadata.labels.as_ref())
        })
    }

    async fn warn(&self, svc: &Service, reason: &str, message: String) {
        let r = reference(
            "v1",
            "Service",
            svc.metadata.namespace.as_deref(),
            svc.metadata.name.as_deref().unwrap_or(""),
            svc.metadata.uid.as_deref(),
        );
        self.recorder_ctx.recorder.record(&r, EventType::Warning, reason, &message).await;
    }
}

fn service_selector(svc: &Service) -> Option<&BTreeMap<String, String>> {
    svc.spec.as_ref().and_then(|s| s.selector.as_ref())
}

/// Services that get no endpoints from these controllers: ExternalName ones and those without
/// a selector (missing or empty: upstream stores an empty map as none).
fn unmanaged(svc: &Service) -> bool {
    svc.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("ExternalName")
        || service_selector(svc).is_none_or(BTreeMap::is_empty)
}

async fn sync_slices(shared: &Shared, key: &str) -> Result<(), Error> {
    let (ns, name) = split_key(key);
    let Some(svc) = shared.services.get(&ObjectRef::new(name).within(ns)) else {
        lock(&shared.tracker).forget_service(key);
        lock(&shared.slice_triggers).forget_service(key);
        return Ok(());
    };
    if unmanaged(&svc) {
        return Ok(());
    }
    let pods = shared.selected_pods(&svc);
    let existing = shared.slices.state_filter(|s| {
        s.metadata.namespace.as_deref() == Some(ns)
            && s.metadata.labels.as_ref().is_some_and(|l| {
                l.get(LABEL_SERVICE_NAME).map(String::as_str) == Some(name)
                    && l.get(LABEL_MANAGED_BY).map(String::as_str) == Some(CONTROLLER_NAME)
            })
    });
    let existing_refs: Vec<&EndpointSlice> = existing.iter().map(|s| &**s).collect();
    if lock(&shared.tracker).stale(key, &existing_refs) {
        lock(&shared.waiting_for_cache).insert(key.to_string());
        return Err(Error::StaleCache { service: key.to_string() });
    }
    let pod_refs: Vec<&Pod> = pods.iter().map(|p| &**p).collect();
    let trigger = lock(&shared.slice_triggers).compute(key, &svc, &pod_refs).map(format_trigger);
    let plan = slices::reconcile(&svc, &pod_refs, &existing_refs, &|n| shared.node_info(n));
    let api: Api<EndpointSlice> = Api::namespaced(shared.client.clone(), ns);
    let pp = PostParams { field_manager: Some(CONTROLLER_NAME.into()), ..Default::default() };
    for mut s in plan.create {
        slices::set_trigger_time(&mut s.metadata, trigger.as_deref());
        match api.create(&pp, &s).await {
            Ok(created) => lock(&shared.tracker).written(key, &created),
            // Creates keep failing in a terminating namespace: drop the work.
            Err(e) if is_namespace_terminating(&e) => return Ok(()),
            Err(source) => return Err(Error::CreateSlice { service: key.to_string(), source }),
        }
    }
    for mut s in plan.update {
        slices::set_trigger_time(&mut s.metadata, trigger.as_deref());
        let slice = s.metadata.name.clone().unwrap_or_default();
        match api.replace(&slice, &pp, &s).await {
            Ok(updated) => lock(&shared.tracker).written(key, &updated),
            Err(source) => return Err(Error::UpdateSlice { service: key.to_string(), slice, source }),
        }
    }
    for s in plan.delete {
        let slice = s.metadata.name.clone().unwrap_or_default();
        match api.delete(&slice, &DeleteParams::default()).await {
            Ok(_) => lock(&shared.tracker).deleted(key, &s),
            Err(e) if is_not_found(&e) => {}
            Err(source) => return Err(Error::DeleteSlice { service: key.to_string(), slice, source }),
        }
    }
    if !plan.errors.is_empty() {
        return Err(Error::PodsSkipped { service: key.to_string(), errors: plan.errors });
    }
    Ok(())
}

async fn sync_endpoints(shared: &Shared, key: &str) -> Result<(), Error> {
    let (ns, name) = split_key(key);
    let api: Api<Endpoints> = Api::namespaced(shared.client.clone(), ns);
    let Some(svc) = shared.services.get(&ObjectRef::new(name).within(ns)) else {
        lock(&shared.endpoints_triggers).forget_service(key);
        if shared.endpoints.get(&ObjectRef::new(name).within(ns)).is_some() {
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(e) if is_not_found(&e) => {}
                Err(source) => return Err(Error::DeleteEndpoints { service: key.to_string(), source }),
            }
        }
        return Ok(());
    };
    if unmanaged(&svc) {
        return Ok(());
    }
    let pods = shared.selected_pods(&svc);
    let pod_refs: Vec<&Pod> = pods.iter().map(|p| &**p).collect();
    let current = shared.endpoints.get(&ObjectRef::new(name).within(ns));
    let trigger = lock(&shared.endpoints_triggers).compute(key, &svc, &pod_refs).map(format_trigger);
    let Some(ep) = endpoints::desired(&svc, &pod_refs, current.as_deref(), trigger.as_deref()) else { return Ok(()) };
    let pp = PostParams { field_manager: Some("endpoint-controller".into()), ..Default::default() };
    let res = if current.is_some() { api.replace(name, &pp, &ep).await } else { api.create(&pp, &ep).await };
    match res {
        Ok(_) => Ok(()),
        Err(e) if is_namespace_terminating(&e) => Ok(()),
        Err(source) => Err(Error::WriteEndpoints { service: key.to_string(), source }),
    }
}

async fn slice_worker(shared: Arc<Shared>) {
    while let Some(key) = shared.slice_queue.get().await {
        match sync_slices(&shared, &key).await {
            Ok(()) => shared.slice_queue.forget(&key),
            Err(Error::StaleCache { .. }) => shared.slice_queue.add_after(key.clone(), STALE_RECHECK),
            Err(e) => {
                tracing::warn!(service = %key, error = %chain(&e), "EndpointSlice sync failed; retrying");
                let (ns, name) = split_key(&key);
                if let Some(svc) = shared.services.get(&ObjectRef::new(name).within(ns)) {
                    if !matches!(e, Error::PodsSkipped { .. }) && !conflict(&e) {
                        shared
                            .warn(
                                &svc,
                                "FailedToUpdateEndpointSlices",
                                format!("Error updating Endpoint Slices for Service {key}: {}", chain(&e)),
                            )
                            .await;
                    }
                }
                shared.slice_queue.add_rate_limited(key.clone());
            }
        }
        shared.slice_queue.done(&key);
    }
}

fn conflict(e: &Error) -> bool {
    match e {
        Error::UpdateSlice { source, .. } | Error::WriteEndpoints { source, .. } => {
            is_conflict(source) || is_already_exists(source)
        }
        _ => false,
    }
}

async fn endpoints_worker(shared: Arc<Shared>) {
    while let Some(key) = shared.endpoints_queue.get().await {
        match sync_endpoints(&shared, &key).await {
            Ok(()) => shared.endpoints_queue.forget(&key),
            Err(e) => {
                if !conflict(&e) {
                    tracing::warn!(service = %key, error = %chain(&e), "Endpoints sync failed; retrying");
                    let (ns, name) = split_key(&key);
                    if let Some(svc) = shared.services.get(&ObjectRef::new(name).within(ns)) {
                        shared
                            .warn(
                                &svc,
                                "FailedToUpdateEndpoint",
                                format!("Failed to update endpoint {key}: {}", chain(&e)),
                            )
                            .await;
                    }
                }
                shared.endpoints_queue.add_rate_limited(key.clone());
            }
        }
        shared.endpoints_queue.done(&key);
    }
}

/// Runs a reflector over `api` and hands each event to `on_event` until `cancel` fires.
async fn inform<K, F>(
    writer: reflector::store::Writer<K>,
    api: Api<K>,
    config: watcher::Config,
    cancel: CancellationToken,
    mut on_event: F,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
    F: FnMut(watcher::Event<K>),
{
    let mut events: std::pin::Pin<Box<dyn Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send>> =
        reflector::reflector(writer, watcher(api, config)).default_backoff().boxed();
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            ev = events.next() => match ev {
                None => return,
                Some(Ok(ev)) => on_event(ev),
                Some(Err(e)) => tracing::debug!(error = %chain(&e), "watch failed; retrying"),
            },
        }
    }
}

pub async fn run(ctx: Arc<Context>) {
    let client = ctx.client.clone();
    let (services, svc_w) = reflector::store::<Service>();
    let (pods, pod_w) = reflector::store::<Pod>();
    let (slice_store, slice_w) = reflector::store::<EndpointSlice>();
    let (endpoint_store, ep_w) = reflector::store::<Endpoints>();
    let (nodes, node_w) = reflector::store::<Node>();
    let shared = Arc::new(Shared {
        client: client.clone(),
        services: services.clone(),
        pods: pods.clone(),
        slices: slice_store.clone(),
        endpoints: endpoint_store.clone(),
        nodes: nodes.clone(),
        slice_queue: WorkQueue::new(SLICE_BACKOFF),
        endpoints_queue: WorkQueue::new(Backoff::DEFAULT),
        tracker: Mutex::default(),
        slice_triggers: Mutex::default(),
        endpoints_triggers: Mutex::default(),
        pod_memberships: Mutex::default(),
        node_zones: Mutex::default(),
        waiting_for_cache: Mutex::default(),
        recorder_ctx: ctx.clone(),
    });
    let cancel = ctx.cancel.clone();
    let mut tasks = Vec::new();
    {
        let s = shared.clone();
        tasks.push(tokio::spawn(inform(
            svc_w,
            Api::all(client.clone()),
            watcher::Config::default(),
            cancel.clone(),
            move |ev| match ev {
                watcher::Event::Apply(o) | watcher::Event::InitApply(o) | watcher::Event::Delete(o) => s.on_service(&o),
                watcher::Event::Init | watcher::Event::InitDone => {}
            },
        )));
    }
    {
        let s = shared.clone();
        tasks.push(tokio::spawn(inform(
            pod_w,
            Api::all(client.clone()),
            watcher::Config::default(),
            cancel.clone(),
            move |ev| match ev {
                watcher::Event::Apply(o) | watcher::Event::InitApply(o) => s.on_pod(&o, false),
                watcher::Event::Delete(o) => s.on_pod(&o, true),
                // A relist may have dropped pods deleted while the watch was down.
                watcher::Event::InitDone => s.enqueue_all_services(false),
                watcher::Event::Init => {}
            },
        )));
    }
    {
        let s = shared.clone();
        let cfg = watcher::Config::default().labels(&format!("{LABEL_MANAGED_BY}={CONTROLLER_NAME}"));
        tasks.push(tokio::spawn(inform(slice_w, Api::all(client.clone()), cfg, cancel.clone(), move |ev| match ev {
            watcher::Event::Apply(o) | watcher::Event::InitApply(o) => s.on_slice(&o, false),
            watcher::Event::Delete(o) => s.on_slice(&o, true),
            watcher::Event::Init | watcher::Event::InitDone => {}
        })));
    }
    {
        let s = shared.clone();
        tasks.push(tokio::spawn(inform(
            ep_w,
            Api::all(client.clone()),
            watcher::Config::default(),
            cancel.clone(),
            move |ev| match ev {
                // Left-over Endpoints (no Service) are deleted; a deleted one is re-created.
                watcher::Event::InitApply(o) | watcher::Event::Delete(o) => s.endpoints_queue.add(key_of(
                    o.metadata.namespace.as_deref().unwrap_or(""),
                    o.metadata.name.as_deref().unwrap_or(""),
                )),
                _ => {}
            },
        )));
    }
    {
        let s = shared.clone();
        tasks.push(tokio::spawn(inform(
            node_w,
            Api::all(client.clone()),
            watcher::Config::default(),
            cancel.clone(),
            move |ev| match ev {
                watcher::Event::Apply(o) | watcher::Event::InitApply(o) => s.on_node(&o, false),
                watcher::Event::Delete(o) => s.on_node(&o, true),
                watcher::Event::Init | watcher::Event::InitDone => {}
            },
        )));
    }
    let ready = async {
        let _ = tokio::join!(
            services.wait_until_ready(),
            pods.wait_until_ready(),
            slice_store.wait_until_ready(),
            endpoint_store.wait_until_ready(),
            nodes.wait_until_ready()
        );
    };
    tokio::select! {
        _ = cancel.cancelled() => {}
        _ = ready => {
            tracing::debug!("endpoint caches synced");
            for _ in 0..WORKERS {
                tasks.push(tokio::spawn(slice_worker(shared.clone())));
                tasks.push(tokio::spawn(endpoints_worker(shared.clone())));
            }
            cancel.cancelled().await;
        }
    }
    shared.slice_queue.shut_down();
    shared.endpoints_queue.shut_down();
    for t in tasks {
        let _ = t.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ServiceSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use std::collections::BTreeMap;

    fn svc(name: &str, selector: Option<&[(&str, &str)]>) -> Service {
        Service {
            metadata: ObjectMeta { name: Some(name.into()), namespace: Some("ns".into()), ..Default::default() },
            spec: Some(ServiceSpec {
                selector: selector.map(|s| s.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn pod(labels: &[(&str, &str)]) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                labels: Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn a_pod_maps_to_the_services_whose_selector_it_satisfies() {
        let services = [
            svc("web", Some(&[("app", "web")])),
            svc("empty", Some(&[])),
            svc("none", None),
            svc("db", Some(&[("app", "db")])),
        ];
        let got = selecting_services(services.iter(), &pod(&[("app", "web"), ("tier", "front")]));
        assert_eq!(got, BTreeSet::from(["ns/web".to_string()]), "an empty selector selects nothing");
    }

    #[test]
    fn the_fingerprint_ignores_irrelevant_changes_and_sees_readiness() {
        let mut p = pod(&[("app", "web")]);
        let base = endpoint_fingerprint(&p);
        p.metadata.annotations = Some(BTreeMap::from([("x".to_string(), "y".to_string())]));
        assert_eq!(endpoint_fingerprint(&p), base);
        p.status = Some(k8s_openapi::api::core::v1::PodStatus {
            conditions: Some(vec![k8s_openapi::api::core::v1::PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..Default::default()
            }]),
            ..Default::default()
        });
        assert_ne!(endpoint_fingerprint(&p), base);
    }

    #[test]
    fn external_name_and_selectorless_services_are_unmanaged() {
        assert!(unmanaged(&svc("x", None)));
        assert!(unmanaged(&svc("e", Some(&[]))), "an empty selector is no selector");
        let mut ext = svc("y", Some(&[("a", "b")]));
        ext.spec.as_mut().expect("spec").type_ = Some("ExternalName".into());
        assert!(unmanaged(&ext));
        assert!(!unmanaged(&svc("z", Some(&[("a", "b")]))));
    }
}
