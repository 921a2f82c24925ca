//! The ResourceQuota controller, as upstream's `resourcequota` controller: every quota's
//! `status.hard` is its `spec.hard` and `status.used` what the namespace's objects use, counted
//! with the same evaluators the API server's quota admission charges with
//! ([`k1s_api::quota`]). A namespace's quotas are recounted when a quota is new or its spec
//! changes, when a counted object is deleted or its usage changes (a pod that finished, a
//! Service that lost its NodePorts: the admission only ever charges, this releases), and every
//! five minutes for all of them. Creates are not recounted: the admission charged them.

use crate::Context;
use futures::StreamExt;
use k1s_api::quota::usage::Evaluator;
use k1s_api::quota::{self, ResourceList};
use k1s_runtime::backoff::Backoff;
use k1s_runtime::workqueue::WorkQueue;
use k8s_openapi::api::core::v1::ResourceQuota;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use kube::runtime::{watcher, WatchStreamExt};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Upstream's `--resource-quota-sync-period`.
const RESYNC: Duration = Duration::from_secs(300);

#[derive(Debug, thiserror::Error)]
pub enum QuotaError {
    #[error("listing {what} in namespace {namespace}")]
    List { what: String, namespace: String, source: kube::Error },
    #[error("writing the status of quota {namespace}/{name}")]
    Status { namespace: String, name: String, source: kube::Error },
}

/// The served resource behind an evaluator, for listing and watching it: a built-in from the
/// resource table, else a custom resource found by discovery.
async fn api_resource(client: &kube::Client, group: &str, resource: &str) -> Option<ApiResource> {
    if let Some(info) = k1s_api::resources::all().iter().find(|r| r.group == group && r.resource == resource) {
        return Some(ApiResource {
            group: info.group.to_string(),
            version: info.version.to_string(),
            api_version: info.api_version(),
            kind: info.kind.to_string(),
            plural: info.resource.to_string(),
        });
    }
    if group.is_empty() {
        return None;
    }
    let served = kube::discovery::group(client, group).await.ok()?;
    served.recommended_resources().into_iter().map(|(ar, _)| ar).find(|ar| ar.plural == resource)
}

/// The evaluators of the resources `hard` names.
fn evaluators(hard: &ResourceList) -> Vec<Evaluator> {
    let mut out: Vec<Evaluator> = Vec::new();
    for name in hard.keys() {
        if let Some(e) = Evaluator::for_quota_resource(name) {
            if !out.contains(&e) {
                out.push(e);
            }
        }
    }
    out
}

/// What a quota's status should be, given the namespace's objects of each evaluated resource
/// (upstream's `CalculateUsage` merged into the previous observation, masked to `hard`).
pub fn status_of(quota_obj: &Value, objects: &BTreeMap<(String, String), Vec<Value>>, now: jiff::Timestamp) -> Value {
    let hard = quota::parse_list(quota_obj.pointer("/spec/hard"));
    let scopes = quota::scope_selectors(quota_obj);
    let mut used = quota::parse_list(quota_obj.pointer("/status/used"));
    for e in evaluators(&hard) {
        let matched = e.matching_resources(hard.keys());
        let Some(objs) = objects.get(&(e.group.clone(), e.resource.clone())) else { continue };
        let mut stats: ResourceList = matched.iter().map(|n| (n.clone(), quota::zero())).collect();
        for o in objs.iter().filter(|o| e.matches_scopes(&scopes, o)) {
            stats = quota::add(&stats, &quota::mask(&e.usage(o, now), &matched));
        }
        used.extend(stats);
    }
    let used = quota::mask(&used, hard.keys());
    serde_json::json!({"hard": quota_obj.pointer("/spec/hard").cloned().unwrap_or_else(|| serde_json::json!({})),
                       "used": quota::to_json(&used)})
}

struct Quotas {
    client: kube::Client,
    queue: WorkQueue<String>,
    /// The usage of each watched object (`group/resource/namespace/name`), to tell a change of
    /// usage from any other update.
    seen: Mutex<HashMap<String, ResourceList>>,
    /// The resources watched so far.
    watched: Mutex<HashSet<(String, String)>>,
}

impl Quotas {
    /// Recounts every quota of `namespace`.
    async fn sync(&self, namespace: &str) -> Result<(), QuotaError> {
        let api = Api::<ResourceQuota>::namespaced(self.client.clone(), namespace);
        let list = api.list(&ListParams::default()).await.map_err(|source| QuotaError::List {
            what: "resourcequotas".into(),
            namespace: namespace.into(),
            source,
        })?;
        if list.items.is_empty() {
            return Ok(());
        }
        let mut objects = BTreeMap::new();
        for q in &list.items {
            let hard: ResourceList =
                q.spec.as_ref().and_then(|s| s.hard.as_ref()).map(quota::from_api).unwrap_or_default();
            for e in evaluators(&hard) {
                let key = (e.group.clone(), e.resource.clone());
                if objects.contains_key(&key) {
                    continue;
                }
                let Some(ar) = api_resource(&self.client, &e.group, &e.resource).await else { continue };
                let dynamic = Api::<DynamicObject>::namespaced_with(self.client.clone(), namespace, &ar);
                let items = dynamic.list(&ListParams::default()).await.map_err(|source| QuotaError::List {
                    what: e.resource.clone(),
                    namespace: namespace.into(),
                    source,
                })?;
                let values = items.items.iter().filter_map(|o| serde_json::to_value(o).ok()).collect::<Vec<_>>();
                objects.insert(key, values);
            }
        }
        let now = jiff::Timestamp::now();
        for q in list.items {
            let Ok(obj) = serde_json::to_value(&q) else { continue };
            let status = status_of(&obj, &objects, now);
            let current = obj.get("status").cloned().unwrap_or(Value::Null);
            let same = |f: &str| {
                quota::equals(&quota::parse_list(current.get(f)), &quota::parse_list(status.get(f)))
                    && current.get(f).is_some()
            };
            if same("hard") && same("used") {
                continue;
            }
            let mut updated = q.clone();
            let Ok(new_status) = serde_json::from_value(status) else { continue };
            updated.status = Some(new_status);
            let name = q.metadata.name.clone().unwrap_or_default();
            let pp = PostParams { field_manager: Some("resourcequota-controller".into()), ..Default::default() };
            api.replace_status(&name, &pp, &updated).await.map_err(|source| QuotaError::Status {
                namespace: namespace.into(),
                name: name.clone(),
                source,
            })?;
            tracing::debug!(namespace, quota = %name, "quota status updated");
        }
        Ok(())
    }

    /// Starts watching the resources of `hard` not watched yet.
    fn watch_resources_of(self: &Arc<Self>, hard: &ResourceList, cancel: &tokio_util::sync::CancellationToken) {
        for e in evaluators(hard) {
            let key = (e.group.clone(), e.resource.clone());
            if !self.watched.lock().unwrap_or_else(|p| p.into_inner()).insert(key) {
                continue;
            }
            tokio::spawn(self.clone().watch_objects(e, cancel.clone()));
        }
    }

    /// Queues the namespace of a counted object that went away or whose usage changed.
    async fn watch_objects(self: Arc<Self>, eval: Evaluator, cancel: tokio_util::sync::CancellationToken) {
        let Some(ar) = api_resource(&self.client, &eval.group, &eval.resource).await else {
            // Not served (yet): a later quota event tries again.
            self.watched.lock().unwrap_or_else(|p| p.into_inner()).remove(&(eval.group.clone(), eval.resource.clone()));
            return;
        };
        let api = Api::<DynamicObject>::all_with(self.client.clone(), &ar);
        let mut events = watcher(api, watcher::Config::default()).default_backoff().boxed();
        loop {
            let event = tokio::select! {
                _ = cancel.cancelled() => return,
                e = events.next() => e,
            };
            let (obj, deleted) = match event {
                None => return,
                Some(Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o))) => (o, false),
                Some(Ok(watcher::Event::Delete(o))) => (o, true),
                Some(Ok(_)) => continue,
                Some(Err(e)) => {
                    tracing::debug!(resource = %ar.plural, error = %e, "watching counted objects failed; retrying");
                    continue;
                }
            };
            let ns = obj.metadata.namespace.clone().unwrap_or_default();
            let key = format!("{}/{}/{ns}/{}", ar.group, ar.plural, obj.metadata.name.as_deref().unwrap_or_default());
            if deleted {
                self.seen.lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
                self.queue.add(ns);
                continue;
            }
            let usage = eval.usage(&usage_view(obj), jiff::Timestamp::now());
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(before) = seen.insert(key, usage.clone()) {
                if !quota::equals(&before, &usage) {
                    self.queue.add(ns);
                }
            }
        }
    }
}

/// What the evaluators read of a watched object, taken from it without copying its spec and
/// status: those, and of its metadata only what usage depends on (a pod's deletion, a claim's
/// storage-class annotation), not its managed fields.
fn usage_view(obj: DynamicObject) -> Value {
    let DynamicObject { metadata, data, .. } = obj;
    let mut view = match data {
        Value::Object(map) => map,
        _ => serde_json::Map::new(),
    };
    let mut meta = serde_json::Map::new();
    if let Some(t) = metadata.deletion_timestamp.and_then(|t| serde_json::to_value(t).ok()) {
        meta.insert("deletionTimestamp".into(), t);
    }
    if let Some(grace) = metadata.deletion_grace_period_seconds {
        meta.insert("deletionGracePeriodSeconds".into(), grace.into());
    }
    if let Some(annotations) = metadata.annotations.and_then(|a| serde_json::to_value(a).ok()) {
        meta.insert("annotations".into(), annotations);
    }
    view.insert("metadata".into(), Value::Object(meta));
    Value::Object(view)
}

/// Whether a quota's status lacks what its spec asks for (new quota, changed spec).
fn needs_recount(q: &ResourceQuota) -> bool {
    let spec = q.spec.as_ref().and_then(|s| s.hard.clone()).unwrap_or_default();
    let status = q.status.as_ref();
    let hard = status.and_then(|s| s.hard.clone()).unwrap_or_default();
    let used = status.and_then(|s| s.used.clone()).unwrap_or_default();
    !quota::equals(&quota::from_api(&spec), &quota::from_api(&hard)) || spec.keys().any(|k| !used.contains_key(k))
}

pub async fn run(ctx: Arc<Context>) {
    let q = Arc::new(Quotas {
        client: ctx.client.clone(),
        queue: WorkQueue::new(Backoff::DEFAULT),
        seen: Mutex::default(),
        watched: Mutex::default(),
    });
    let worker = {
        let q = q.clone();
        tokio::spawn(async move {
            while let Some(ns) = q.queue.get().await {
                match q.sync(&ns).await {
                    Ok(()) => q.queue.forget(&ns),
                    Err(e) => {
                        tracing::debug!(namespace = %ns, error = %k1s_api::errors::chain(&e), "recounting quotas failed; retrying");
                        q.queue.add_rate_limited(ns.clone());
                    }
                }
                q.queue.done(&ns);
            }
        })
    };
    let api = Api::<ResourceQuota>::all(ctx.client.clone());
    let mut events = watcher(api, watcher::Config::default()).default_backoff().boxed();
    let mut namespaces: HashSet<String> = HashSet::new();
    let mut resync = tokio::time::interval(RESYNC);
    loop {
        let event = tokio::select! {
            _ = ctx.cancel.cancelled() => break,
            _ = resync.tick() => {
                for ns in &namespaces {
                    q.queue.add(ns.clone());
                }
                continue;
            }
            e = events.next() => e,
        };
        let quota = match event {
            None => break,
            Some(Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o))) => o,
            Some(Ok(_)) => continue,
            Some(Err(e)) => {
                tracing::debug!(error = %e, "watching ResourceQuotas failed; retrying");
                continue;
            }
        };
        let ns = quota.metadata.namespace.clone().unwrap_or_default();
        let hard: ResourceList =
            quota.spec.as_ref().and_then(|s| s.hard.as_ref()).map(quota::from_api).unwrap_or_default();
        q.watch_resources_of(&hard, &ctx.cancel);
        namespaces.insert(ns.clone());
        if needs_recount(&quota) {
            q.queue.add(ns);
        }
    }
    q.queue.shut_down();
    let _ = worker.await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn status_counts_matching_objects_and_keeps_only_hard_resources() {
        let quota = json!({"spec": {"hard": {"pods": "2", "requests.cpu": "1", "count/configmaps": "5"}},
                           "status": {"used": {"pods": "9", "services": "1"}}});
        let pods = vec![
            json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "250m"}}}]}}),
            json!({"spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Succeeded"}}),
        ];
        let objects = BTreeMap::from([(("".to_string(), "pods".to_string()), pods)]);
        let status = status_of(&quota, &objects, jiff::Timestamp::UNIX_EPOCH);
        assert_eq!(status["hard"], quota["spec"]["hard"]);
        // configmaps were not listed (no such objects map entry): absent, not guessed.
        assert_eq!(status["used"], json!({"pods": "1", "requests.cpu": "250m"}));
    }

    #[test]
    fn the_usage_view_measures_as_the_whole_object() {
        let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().expect("time");
        let objects = [
            (
                Evaluator::new("", "pods"),
                json!({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": "p", "namespace": "n", "deletionTimestamp": "2025-12-31T23:59:50Z",
                                    "deletionGracePeriodSeconds": 30, "labels": {"a": "b"},
                                    "managedFields": [{"manager": "m", "operation": "Update"}]},
                       "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "250m", "memory": "1Gi"},
                                                                          "limits": {"cpu": "1"}}}]},
                       "status": {"phase": "Running"}}),
            ),
            (
                Evaluator::new("", "persistentvolumeclaims"),
                json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                       "metadata": {"name": "c", "namespace": "n",
                                    "annotations": {"volume.beta.kubernetes.io/storage-class": "gold"}},
                       "spec": {"resources": {"requests": {"storage": "5Gi"}}}}),
            ),
        ];
        for (eval, whole) in objects {
            let dynamic: DynamicObject = serde_json::from_value(whole.clone()).expect("object");
            let view = usage_view(dynamic);
            assert!(view.pointer("/metadata/managedFields").is_none());
            let usage = eval.usage(&view, now);
            assert!(!usage.is_empty());
            assert!(quota::equals(&usage, &eval.usage(&whole, now)), "{usage:?}");
        }
    }
}
