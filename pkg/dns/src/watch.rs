//! Keeps the [`Records`] snapshot in step with the API: reflectors over Services,
//! EndpointSlices (those that name a Service) and Namespaces; every change wakes one rebuild
//! task that publishes a fresh snapshot on a `watch` channel. Bursts coalesce: a rebuild reads
//! the stores as they are when it runs, however many events woke it.

use std::fmt::Debug;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::{watch, Notify};
use tokio_util::sync::CancellationToken;

use crate::records::{Records, SERVICE_NAME_LABEL};

/// Watches the API with `client` and publishes snapshots on `tx` until `cancel` fires.
pub async fn maintain(
    client: kube::Client,
    cluster_domain: String,
    dns_ip: IpAddr,
    tx: watch::Sender<Arc<Records>>,
    cancel: CancellationToken,
) {
    let changed = Arc::new(Notify::new());
    let (services, svc_w) = reflector::store::<Service>();
    let (slices, slice_w) = reflector::store::<EndpointSlice>();
    let (namespaces, ns_w) = reflector::store::<Namespace>();
    let listed: [Arc<AtomicBool>; 3] = Default::default();
    let informers = [
        tokio::spawn(inform(
            svc_w,
            Api::all(client.clone()),
            watcher::Config::default(),
            listed[0].clone(),
            changed.clone(),
            cancel.clone(),
        )),
        tokio::spawn(inform(
            slice_w,
            Api::all(client.clone()),
            watcher::Config::default().labels(SERVICE_NAME_LABEL),
            listed[1].clone(),
            changed.clone(),
            cancel.clone(),
        )),
        tokio::spawn(inform(
            ns_w,
            Api::all(client),
            watcher::Config::default(),
            listed[2].clone(),
            changed.clone(),
            cancel.clone(),
        )),
    ];
    let stores = Stores { services, slices, namespaces };
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = changed.notified() => {}
        }
        if !listed.iter().all(|l| l.load(Ordering::Acquire)) {
            continue;
        }
        let started = Instant::now();
        let records = stores.build(&cluster_domain, dns_ip);
        let count = records.service_count();
        let first = !tx.borrow().is_synced();
        tx.send_replace(Arc::new(records));
        if first {
            tracing::info!(services = count, took = ?started.elapsed(), "cluster DNS records synced");
        } else {
            tracing::trace!(services = count, took = ?started.elapsed(), "cluster DNS records rebuilt");
        }
    }
    for task in informers {
        let _ = task.await;
    }
}

struct Stores {
    services: Store<Service>,
    slices: Store<EndpointSlice>,
    namespaces: Store<Namespace>,
}

impl Stores {
    fn build(&self, cluster_domain: &str, dns_ip: IpAddr) -> Records {
        let (services, slices, namespaces) = (self.services.state(), self.slices.state(), self.namespaces.state());
        Records::build(
            cluster_domain,
            dns_ip,
            serial(),
            services.iter().map(|s| &**s),
            slices.iter().map(|s| &**s),
            namespaces.iter().map(|n| &**n),
        )
    }
}

/// Seconds since the epoch, as CoreDNS stamps its SOA serial.
fn serial() -> u32 {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    u32::try_from(secs % (1 << 32)).unwrap_or(0)
}

/// Mirrors `api` into `writer`'s store (without managedFields, which DNS never reads), sets
/// `listed` after the first complete listing and wakes `changed` after every change.
async fn inform<K>(
    writer: reflector::store::Writer<K>,
    api: Api<K>,
    config: watcher::Config,
    listed: Arc<AtomicBool>,
    changed: Arc<Notify>,
    cancel: CancellationToken,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    let kind = K::kind(&K::DynamicType::default()).to_string();
    let mut events = reflector::reflector(
        writer,
        watcher(api, config).modify(|o: &mut K| o.managed_fields_mut().clear()).default_backoff(),
    )
    .boxed();
    loop {
        let event = tokio::select! {
            _ = cancel.cancelled() => return,
            e = events.next() => e,
        };
        match event {
            None => return,
            Some(Ok(watcher::Event::InitDone)) => {
                listed.store(true, Ordering::Release);
                changed.notify_one();
            }
            Some(Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_))) => changed.notify_one(),
            Some(Ok(watcher::Event::Init | watcher::Event::InitApply(_))) => {}
            Some(Err(error)) => tracing::debug!(%kind, %error, "watch failed; retrying"),
        }
    }
}
