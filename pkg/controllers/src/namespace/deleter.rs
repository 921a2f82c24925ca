//! Empties a terminating namespace (upstream `namespace/deletion/namespaced_resources_deleter.go`
//! with OrderedNamespaceDeletion, GA since v1.34): pods go first and nothing else is deleted while
//! pods remain; then every other namespaced resource that supports `delete` is deleted with
//! background propagation (`deletecollection` where served, else item by item) and listed again
//! to see what remains.
//!
//! The API calls go through [`ContentApi`] so that the pass is unit-tested against a fake.

use crate::core::discovery::ServedResource;
use crate::namespace::conditions::{ConditionUpdater, Remaining};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use std::future::Future;

/// Seconds to wait for finalizers when items remain only because of them.
pub const FINALIZER_ESTIMATE_SECONDS: i64 = 15;

/// An item left in the namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    pub name: String,
    pub finalizers: Vec<String>,
}

/// What the grace-period estimate needs of a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodGrace {
    pub terminal: bool,
    pub grace_seconds: Option<i64>,
}

/// Why a content call failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ContentError {
    /// 404 or 405: the resource does not serve this verb after all.
    #[error("not supported")]
    NotSupported,
    #[error("{0}")]
    Failed(String),
}

/// The API calls a deletion pass makes.
pub trait ContentApi: Send + Sync {
    /// Every served resource (any scope); an error still may come with a partial list.
    fn discover(&self) -> impl Future<Output = (Vec<ServedResource>, Option<String>)> + Send;
    fn delete_collection(&self, r: &ServedResource, ns: &str) -> impl Future<Output = Result<(), ContentError>> + Send;
    fn list(&self, r: &ServedResource, ns: &str) -> impl Future<Output = Result<Vec<Item>, ContentError>> + Send;
    fn delete(&self, r: &ServedResource, ns: &str, name: &str)
        -> impl Future<Output = Result<(), ContentError>> + Send;
    fn pods(&self, ns: &str) -> impl Future<Output = Result<Vec<PodGrace>, ContentError>> + Send;
}

/// The result of one pass.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Seconds until remaining content is expected to be gone; 0 with no errors means empty.
    pub estimate: i64,
    pub errors: Vec<String>,
    pub conditions: ConditionUpdater,
}

struct ResourceOutcome {
    estimate: i64,
    remaining: usize,
    finalizers: Vec<(String, usize)>,
}

/// Go's `GroupVersionResource.String()`, as upstream's messages print it.
fn gvr_string(r: &ServedResource) -> String {
    format!("{}/{}, Resource={}", r.api.group, r.api.version, r.api.plural)
}

fn is_pods(r: &ServedResource) -> bool {
    r.api.group.is_empty() && r.api.plural == "pods"
}

/// The longest grace period of the namespace's non-terminal pods, or 0 once the namespace has
/// been terminating for longer than that.
fn pod_estimate(pods: &[PodGrace], elapsed_seconds: i64) -> i64 {
    let estimate = pods.iter().filter(|p| !p.terminal).filter_map(|p| p.grace_seconds).max().unwrap_or(0).max(0);
    if elapsed_seconds >= estimate {
        0
    } else {
        estimate
    }
}

async fn delete_resource<A: ContentApi>(
    api: &A,
    r: &ServedResource,
    ns: &str,
    elapsed_seconds: i64,
) -> (ResourceOutcome, Option<String>) {
    let mut out = ResourceOutcome { estimate: 0, remaining: 0, finalizers: Vec::new() };
    if is_pods(r) {
        match api.pods(ns).await {
            Ok(pods) => out.estimate = pod_estimate(&pods, elapsed_seconds),
            Err(e) => return (out, Some(e.to_string())),
        }
    }
    let mut collection_done = false;
    if r.supports("deletecollection") {
        match api.delete_collection(r, ns).await {
            Ok(()) => collection_done = true,
            Err(ContentError::NotSupported) => {}
            Err(e) => return (out, Some(e.to_string())),
        }
    }
    if !r.supports("list") {
        return (out, None);
    }
    if !collection_done {
        match api.list(r, ns).await {
            Ok(items) => {
                for item in items {
                    match api.delete(r, ns, &item.name).await {
                        Ok(()) | Err(ContentError::NotSupported) => {}
                        Err(e) => return (out, Some(e.to_string())),
                    }
                }
            }
            Err(ContentError::NotSupported) => return (out, None),
            Err(e) => return (out, Some(e.to_string())),
        }
    }
    let items = match api.list(r, ns).await {
        Ok(items) => items,
        Err(ContentError::NotSupported) => return (out, None),
        Err(e) => return (out, Some(e.to_string())),
    };
    if items.is_empty() {
        return (out, None);
    }
    out.remaining = items.len();
    let mut finalizers = std::collections::BTreeMap::<String, usize>::new();
    for item in &items {
        for f in &item.finalizers {
            *finalizers.entry(f.clone()).or_default() += 1;
        }
    }
    out.finalizers = finalizers.into_iter().collect();
    if out.estimate != 0 {
        return (out, None);
    }
    if !out.finalizers.is_empty() {
        out.estimate = FINALIZER_ESTIMATE_SECONDS;
        return (out, None);
    }
    (out, Some(format!("unexpected items still remain in namespace: {ns} for gvr: {}", gvr_string(r))))
}

/// One deletion pass over namespace `ns`, terminating for `elapsed_seconds`.
pub async fn delete_all_content<A: ContentApi>(api: &A, ns: &str, elapsed_seconds: i64, now: &Time) -> Outcome {
    let mut outcome = Outcome::default();
    let (served, discovery_error) = api.discover().await;
    if let Some(e) = discovery_error {
        outcome.conditions.discovery_failed(e.clone(), now);
        outcome.errors.push(e);
    }
    let deletable: Vec<&ServedResource> = served.iter().filter(|r| r.namespaced && r.supports("delete")).collect();
    let mut remaining = Remaining::default();
    let mut record = |outcome: &mut Outcome, r: &ServedResource, res: ResourceOutcome, err: Option<String>| {
        if let Some(e) = err {
            outcome.conditions.content_deletion_failed(e.clone());
            outcome.errors.push(e);
        }
        outcome.estimate = outcome.estimate.max(res.estimate);
        if res.remaining > 0 {
            remaining.by_resource.insert(r.group_resource(), res.remaining);
            for (f, n) in res.finalizers {
                *remaining.by_finalizer.entry(f).or_default() += n;
            }
        }
    };
    // Pods first: the rest waits until they are gone.
    if let Some(pods) = deletable.iter().find(|r| is_pods(r)) {
        let (res, err) = delete_resource(api, pods, ns, elapsed_seconds).await;
        let pods_left = res.remaining;
        record(&mut outcome, pods, res, err);
        if pods_left > 0 {
            outcome.conditions.content_totals(&remaining, now);
            return outcome;
        }
    }
    for r in deletable.iter().filter(|r| !is_pods(r)) {
        let (res, err) = delete_resource(api, r, ns, elapsed_seconds).await;
        record(&mut outcome, r, res, err);
    }
    outcome.conditions.content_totals(&remaining, now);
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    /// An in-memory namespace: resource plural ▶ items. Deleting an item with finalizers only
    /// marks it; pods with `grace` stay until the test removes them.
    #[derive(Default)]
    struct Fake {
        served: Vec<ServedResource>,
        items: Mutex<BTreeMap<String, Vec<Item>>>,
        pods: Vec<PodGrace>,
        calls: Mutex<Vec<String>>,
        discovery_error: Option<String>,
        sticky_pods: bool,
    }

    impl Fake {
        fn with(resources: &[(&str, &[&str])]) -> Fake {
            let mut f = Fake::default();
            for (plural, verbs) in resources {
                let group = if *plural == "deployments" { "apps" } else { "" };
                f.served.push(ServedResource::of(group, "v1", "Kind", plural, true, verbs));
            }
            f
        }
        fn put(&self, plural: &str, name: &str, finalizers: &[&str]) {
            let item = Item { name: name.into(), finalizers: finalizers.iter().map(|s| s.to_string()).collect() };
            self.items.lock().expect("lock").entry(plural.into()).or_default().push(item);
        }
        fn calls(&self) -> Vec<String> {
            self.calls.lock().expect("lock").clone()
        }
        fn remove_unfinalized(&self, plural: &str) {
            if plural == "pods" && self.sticky_pods {
                return;
            }
            if let Some(v) = self.items.lock().expect("lock").get_mut(plural) {
                v.retain(|i| !i.finalizers.is_empty());
            }
        }
    }

    const ALL: &[&str] = &["delete", "deletecollection", "list"];

    impl ContentApi for Fake {
        async fn discover(&self) -> (Vec<ServedResource>, Option<String>) {
            (self.served.clone(), self.discovery_error.clone())
        }
        async fn delete_collection(&self, r: &ServedResource, _ns: &str) -> Result<(), ContentError> {
            self.calls.lock().expect("lock").push(format!("deletecollection {}", r.api.plural));
            self.remove_unfinalized(&r.api.plural);
            Ok(())
        }
        async fn list(&self, r: &ServedResource, _ns: &str) -> Result<Vec<Item>, ContentError> {
            Ok(self.items.lock().expect("lock").get(&r.api.plural).cloned().unwrap_or_default())
        }
        async fn delete(&self, r: &ServedResource, _ns: &str, name: &str) -> Result<(), ContentError> {
            self.calls.lock().expect("lock").push(format!("delete {} {name}", r.api.plural));
            if let Some(v) = self.items.lock().expect("lock").get_mut(&r.api.plural) {
                v.retain(|i| i.name != name || !i.finalizers.is_empty());
            }
            Ok(())
        }
        async fn pods(&self, _ns: &str) -> Result<Vec<PodGrace>, ContentError> {
            Ok(self.pods.clone())
        }
    }

    fn now() -> Time {
        Time(jiff::Timestamp::from_second(1_000).expect("ts"))
    }

    #[tokio::test]
    async fn everything_deletable_is_deleted_and_an_empty_namespace_needs_no_wait() {
        let fake = Fake::with(&[("configmaps", ALL), ("deployments", ALL), ("bindings", &["create"])]);
        fake.put("configmaps", "a", &[]);
        fake.put("deployments", "d", &[]);
        let out = delete_all_content(&fake, "x", 0, &now()).await;
        assert_eq!(out.estimate, 0);
        assert!(out.errors.is_empty(), "{:?}", out.errors);
        assert_eq!(fake.calls(), vec!["deletecollection configmaps", "deletecollection deployments"]);
    }

    #[tokio::test]
    async fn nothing_else_is_deleted_while_pods_remain() {
        let mut fake = Fake::with(&[("pods", ALL), ("configmaps", ALL)]);
        fake.sticky_pods = true;
        fake.pods = vec![PodGrace { terminal: false, grace_seconds: Some(30) }];
        fake.put("pods", "p", &[]);
        fake.put("configmaps", "a", &[]);
        let out = delete_all_content(&fake, "x", 5, &now()).await;
        assert_eq!(out.estimate, 30, "the pods' grace period");
        assert!(out.errors.is_empty());
        assert_eq!(fake.calls(), vec!["deletecollection pods"]);
        let mut status = Default::default();
        out.conditions.update(&mut status, &now());
        let remaining = status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == crate::namespace::conditions::CONTENT_REMAINING)
            .and_then(|c| c.message.clone());
        assert_eq!(remaining.as_deref(), Some("Some resources are remaining: pods. has 1 resource instances"));
    }

    #[tokio::test]
    async fn the_grace_estimate_lapses_once_the_namespace_terminated_longer() {
        let pods = [
            PodGrace { terminal: false, grace_seconds: Some(30) },
            PodGrace { terminal: true, grace_seconds: Some(600) },
        ];
        assert_eq!(pod_estimate(&pods, 10), 30);
        assert_eq!(pod_estimate(&pods, 30), 0);
        assert_eq!(pod_estimate(&[], 0), 0);
    }

    #[tokio::test]
    async fn items_held_by_finalizers_wait_the_finalizer_estimate() {
        let fake = Fake::with(&[("configmaps", ALL)]);
        fake.put("configmaps", "held", &["example.com/hold"]);
        let out = delete_all_content(&fake, "x", 0, &now()).await;
        assert_eq!(out.estimate, FINALIZER_ESTIMATE_SECONDS);
        assert!(out.errors.is_empty());
    }

    #[tokio::test]
    async fn items_left_without_finalizers_are_an_error() {
        let mut fake = Fake::with(&[("pods", ALL)]);
        fake.sticky_pods = true;
        fake.put("pods", "p", &[]);
        let out = delete_all_content(&fake, "x", 100, &now()).await;
        assert_eq!(out.errors, vec!["unexpected items still remain in namespace: x for gvr: /v1, Resource=pods"]);
    }

    #[tokio::test]
    async fn without_deletecollection_items_are_deleted_one_by_one() {
        let fake = Fake::with(&[("widgets", &["delete", "list"])]);
        fake.put("widgets", "w1", &[]);
        fake.put("widgets", "w2", &[]);
        let out = delete_all_content(&fake, "x", 0, &now()).await;
        assert_eq!(out.estimate, 0);
        assert_eq!(fake.calls(), vec!["delete widgets w1", "delete widgets w2"]);
    }

    #[tokio::test]
    async fn a_discovery_failure_is_reported_and_the_partial_list_still_used() {
        let mut fake = Fake::with(&[("configmaps", ALL)]);
        fake.discovery_error = Some("group example.com failed".into());
        fake.put("configmaps", "a", &[]);
        let out = delete_all_content(&fake, "x", 0, &now()).await;
        assert_eq!(out.errors, vec!["group example.com failed"]);
        assert_eq!(fake.calls(), vec!["deletecollection configmaps"]);
    }
}
