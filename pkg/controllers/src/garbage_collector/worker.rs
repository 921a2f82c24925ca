//! The garbage collector's workers (upstream `garbagecollector.go`): attempt-to-delete decides,
//! from the live object and live lookups of its owners, whether an item is garbage (every owner
//! gone), must be deleted in the foreground for an owner that waits for it, only loses the
//! references to owners that are gone, or, deleting its own dependents in the foreground, may
//! drop its `foregroundDeletion` finalizer; attempt-to-orphan strips an owner's references from
//! its dependents and then drops its `orphan` finalizer.
//!
//! The API calls go through [`GcClient`] so the workers are unit-tested against a fake.

use super::graph::{Graph, Identity, Work, FINALIZER_FOREGROUND, FINALIZER_ORPHAN};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use std::future::Future;
use std::sync::Mutex;

/// The live state of an object.
#[derive(Clone, Debug, PartialEq)]
pub struct Live {
    pub uid: String,
    pub resource_version: String,
    pub owners: Vec<OwnerReference>,
    pub finalizers: Vec<String>,
    pub deleting: bool,
}

/// Deletion propagation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    Background,
    Foreground,
    Orphan,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GcError {
    #[error("no served resource for {api_version}, Kind={kind}")]
    Unmapped { api_version: String, kind: String },
    #[error("{0} is cluster-scoped but names a namespaced owner")]
    NamespacedOwnerOfClusterScoped(String),
    #[error("409 conflict on {0}")]
    Conflict(String),
    #[error("{0}")]
    Api(String),
}

/// Where to find an object of a kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub namespaced: bool,
}

/// The API calls the workers make.
pub trait GcClient: Send + Sync {
    fn mapping(&self, api_version: &str, kind: &str) -> Result<Mapping, GcError>;
    /// `None` when the object does not exist. `id.namespace` is ignored for cluster-scoped kinds.
    fn get(&self, id: &Identity) -> impl Future<Output = Result<Option<Live>, GcError>> + Send;
    /// Deletes with uid (and, if given, resourceVersion) preconditions; gone already is success.
    fn delete(
        &self,
        id: &Identity,
        rv: Option<&str>,
        policy: Policy,
    ) -> impl Future<Output = Result<(), GcError>> + Send;
    /// Replaces `metadata.ownerReferences`, guarded by resourceVersion `rv`.
    fn set_owners(
        &self,
        id: &Identity,
        rv: &str,
        owners: &[OwnerReference],
    ) -> impl Future<Output = Result<(), GcError>> + Send;
    /// Replaces `metadata.finalizers`, guarded by resourceVersion `rv`.
    fn set_finalizers(
        &self,
        id: &Identity,
        rv: &str,
        finalizers: &[String],
    ) -> impl Future<Output = Result<(), GcError>> + Send;
}

/// How an owner reference stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefState {
    /// The owner exists.
    Solid,
    /// The owner is gone (or another object took its name).
    Dangling,
    /// The owner exists and is deleting its dependents in the foreground.
    Waiting,
}

/// What to do with an item that has owner references.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Nothing,
    /// Some owner remains: drop only the references to owners gone or waiting.
    RemoveReferences(Vec<String>),
    /// An owner waits for this item, which has dependents of its own: delete it in the
    /// foreground (first unblocking its references if a dependent also waits, to break cycles).
    DeleteForeground {
        unblock_first: bool,
    },
    /// Every owner is gone: delete it, propagating as its own finalizers ask.
    Delete(Policy),
}

/// Upstream's decision in `attemptToDeleteItem` once the references are classified.
pub fn decide(
    live: &Live,
    refs: &[(OwnerReference, RefState)],
    has_dependents: bool,
    dependent_waits: bool,
) -> Decision {
    let uids = |state: RefState| refs.iter().filter(move |(_, s)| *s == state).map(|(r, _)| r.uid.clone());
    let solid = uids(RefState::Solid).count();
    let dangling: Vec<String> = uids(RefState::Dangling).collect();
    let waiting: Vec<String> = uids(RefState::Waiting).collect();
    if solid > 0 {
        if dangling.is_empty() && waiting.is_empty() {
            return Decision::Nothing;
        }
        return Decision::RemoveReferences(dangling.into_iter().chain(waiting).collect());
    }
    if !waiting.is_empty() && has_dependents {
        return Decision::DeleteForeground { unblock_first: dependent_waits };
    }
    let policy = if live.finalizers.iter().any(|f| f == FINALIZER_ORPHAN) {
        Policy::Orphan
    } else if live.finalizers.iter().any(|f| f == FINALIZER_FOREGROUND) {
        Policy::Foreground
    } else {
        Policy::Background
    };
    Decision::Delete(policy)
}

/// What the worker loop does with the key afterwards.
#[derive(Debug, PartialEq)]
pub enum Next {
    Forget,
    /// Retry with back-off (an error, or a virtual node whose object exists but was not yet
    /// observed by a monitor).
    Requeue,
}

fn lock(graph: &Mutex<Graph>) -> std::sync::MutexGuard<'_, Graph> {
    graph.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether `r` (held by `item`) points at an owner that exists; `Some(live owner)` if so.
async fn lookup_owner<C: GcClient>(
    graph: &Mutex<Graph>,
    client: &C,
    item: &Identity,
    r: &OwnerReference,
) -> Result<Option<Live>, GcError> {
    let cluster_key = Identity::of_owner(r, "");
    let namespaced_key = Identity::of_owner(r, &item.namespace);
    {
        let g = lock(graph);
        if g.absent.contains(&cluster_key) || g.absent.contains(&namespaced_key) {
            return Ok(None);
        }
    }
    let mapping = client.mapping(&r.api_version, &r.kind)?;
    if item.namespace.is_empty() && mapping.namespaced {
        return Err(GcError::NamespacedOwnerOfClusterScoped(item.to_string()));
    }
    let key = if mapping.namespaced { namespaced_key } else { cluster_key };
    match client.get(&key).await? {
        Some(owner) if owner.uid == r.uid => Ok(Some(owner)),
        _ => {
            lock(graph).absent.add(key);
            Ok(None)
        }
    }
}

/// Processes one attempt-to-delete key. `queue` receives follow-up work.
pub async fn attempt_to_delete<C: GcClient>(
    graph: &Mutex<Graph>,
    client: &C,
    uid: &str,
    queue: &mut Vec<Work>,
) -> Result<Next, GcError> {
    let Some(node) = lock(graph).node(uid).cloned() else { return Ok(Next::Forget) };
    if node.being_deleted && !node.deleting_dependents {
        // On its way out: its dependents are handled when it is gone.
        return Ok(Next::Forget);
    }
    // An unknown kind is an error (retried after the next discovery), never an absence: a
    // virtual owner of a kind not yet discovered must not be taken for deleted.
    let live = client.get(&node.identity).await?;
    let Some(live) = live.filter(|l| l.uid == node.identity.uid) else {
        queue.extend(lock(graph).virtual_delete(&node.identity));
        return Ok(Next::Forget);
    };
    if !node.observed {
        // The owner exists; its monitor has not reported it yet.
        return Ok(Next::Requeue);
    }
    if node.deleting_dependents {
        let blocking = lock(graph).blocking_dependents(uid);
        if blocking.is_empty() {
            remove_finalizer(client, &node.identity, FINALIZER_FOREGROUND).await?;
        } else {
            queue.extend(blocking.into_iter().filter(|(_, waits)| !waits).map(|(d, _)| Work::AttemptToDelete(d)));
        }
        return Ok(Next::Forget);
    }
    if live.owners.is_empty() {
        return Ok(Next::Forget);
    }
    let mut refs = Vec::with_capacity(live.owners.len());
    for r in &live.owners {
        let state = match lookup_owner(graph, client, &node.identity, r).await? {
            None => RefState::Dangling,
            Some(owner) if owner.deleting && owner.finalizers.iter().any(|f| f == FINALIZER_FOREGROUND) => {
                RefState::Waiting
            }
            Some(_) => RefState::Solid,
        };
        refs.push((r.clone(), state));
    }
    let (dependents, dependent_waits) = lock(graph).dependents(uid);
    match decide(&live, &refs, !dependents.is_empty(), dependent_waits) {
        Decision::Nothing => {}
        Decision::RemoveReferences(uids) => {
            let keep: Vec<OwnerReference> = live.owners.iter().filter(|r| !uids.contains(&r.uid)).cloned().collect();
            client.set_owners(&node.identity, &live.resource_version, &keep).await?;
        }
        Decision::DeleteForeground { unblock_first } => {
            let mut rv = live.resource_version.clone();
            if unblock_first {
                let unblocked: Vec<OwnerReference> = live
                    .owners
                    .iter()
                    .map(|r| {
                        let mut r = r.clone();
                        if r.block_owner_deletion == Some(true) {
                            r.block_owner_deletion = Some(false);
                        }
                        r
                    })
                    .collect();
                client.set_owners(&node.identity, &live.resource_version, &unblocked).await?;
                rv.clear();
            }
            delete_guarded(client, &node.identity, &live, (!rv.is_empty()).then_some(rv.as_str()), Policy::Foreground)
                .await?;
        }
        Decision::Delete(policy) => {
            tracing::debug!(item = %node.identity, ?policy, "deleting an object whose owners are gone");
            delete_guarded(client, &node.identity, &live, Some(&live.resource_version), policy).await?;
        }
    }
    Ok(Next::Forget)
}

/// Deletes `id` guarded by its resourceVersion; if that conflicts only because of changes that
/// left the owner references alone, deletes again without it (so that frequent unrelated
/// updates cannot starve the collector).
async fn delete_guarded<C: GcClient>(
    client: &C,
    id: &Identity,
    live: &Live,
    rv: Option<&str>,
    policy: Policy,
) -> Result<(), GcError> {
    match client.delete(id, rv, policy).await {
        Err(GcError::Conflict(_)) if rv.is_some() => match client.get(id).await? {
            None => Ok(()),
            Some(now) if now.uid == live.uid && now.owners == live.owners => client.delete(id, None, policy).await,
            Some(_) => Err(GcError::Conflict(id.to_string())),
        },
        other => other,
    }
}

/// Removes `finalizer` from `id`, re-reading on conflicts.
pub async fn remove_finalizer<C: GcClient>(client: &C, id: &Identity, finalizer: &str) -> Result<(), GcError> {
    for _ in 0..5 {
        let Some(live) = client.get(id).await? else { return Ok(()) };
        if live.uid != id.uid || !live.finalizers.iter().any(|f| f == finalizer) {
            return Ok(());
        }
        let rest: Vec<String> = live.finalizers.iter().filter(|f| *f != finalizer).cloned().collect();
        match client.set_finalizers(id, &live.resource_version, &rest).await {
            Err(GcError::Conflict(_)) => continue,
            other => return other,
        }
    }
    Err(GcError::Conflict(id.to_string()))
}

/// Processes one attempt-to-orphan key: the owner's dependents lose their references to it,
/// then the owner loses its `orphan` finalizer.
pub async fn attempt_to_orphan<C: GcClient>(graph: &Mutex<Graph>, client: &C, uid: &str) -> Result<Next, GcError> {
    let (owner, dependents) = {
        let g = lock(graph);
        let Some(owner) = g.node(uid).map(|n| n.identity.clone()) else { return Ok(Next::Forget) };
        (owner, g.dependents(uid).0)
    };
    for dep in &dependents {
        for _ in 0..5 {
            let Some(live) = client.get(dep).await? else { break };
            if live.uid != dep.uid || !live.owners.iter().any(|r| r.uid == owner.uid) {
                break;
            }
            let keep: Vec<OwnerReference> = live.owners.iter().filter(|r| r.uid != owner.uid).cloned().collect();
            match client.set_owners(dep, &live.resource_version, &keep).await {
                Err(GcError::Conflict(_)) => continue,
                other => {
                    other?;
                    break;
                }
            }
        }
    }
    remove_finalizer(client, &owner, FINALIZER_ORPHAN).await?;
    Ok(Next::Forget)
}

#[cfg(test)]
mod tests {
    use super::super::graph::Observed;
    use super::*;
    use std::collections::HashMap;

    /// Objects by uid, with a log of mutating calls.
    #[derive(Default)]
    struct Fake {
        objects: Mutex<HashMap<String, (Identity, Live)>>,
        calls: Mutex<Vec<String>>,
        rv: Mutex<u64>,
        conflict_once: Mutex<bool>,
    }

    impl Fake {
        fn put(&self, id: &Identity, owners: Vec<OwnerReference>, finalizers: &[&str], deleting: bool) {
            let live = Live {
                uid: id.uid.clone(),
                resource_version: "1".into(),
                owners,
                finalizers: finalizers.iter().map(|s| s.to_string()).collect(),
                deleting,
            };
            self.objects.lock().expect("lock").insert(id.uid.clone(), (id.clone(), live));
        }
        fn calls(&self) -> Vec<String> {
            self.calls.lock().expect("lock").clone()
        }
        fn live(&self, uid: &str) -> Option<Live> {
            self.objects.lock().expect("lock").get(uid).map(|(_, l)| l.clone())
        }
        fn bump(&self, uid: &str) {
            let mut rv = self.rv.lock().expect("lock");
            *rv += 1;
            if let Some((_, l)) = self.objects.lock().expect("lock").get_mut(uid) {
                l.resource_version = format!("{}", *rv + 1);
            }
        }
    }

    impl GcClient for Fake {
        fn mapping(&self, _api_version: &str, kind: &str) -> Result<Mapping, GcError> {
            match kind {
                "Namespace" | "Node" => Ok(Mapping { namespaced: false }),
                "Unknown" => Err(GcError::Unmapped { api_version: "x/v1".into(), kind: kind.into() }),
                _ => Ok(Mapping { namespaced: true }),
            }
        }
        async fn get(&self, id: &Identity) -> Result<Option<Live>, GcError> {
            self.mapping(&id.api_version, &id.kind)?;
            Ok(self
                .objects
                .lock()
                .expect("lock")
                .values()
                .find(|(i, _)| i.name == id.name && i.kind == id.kind && i.namespace == id.namespace)
                .map(|(_, l)| l.clone()))
        }
        async fn delete(&self, id: &Identity, rv: Option<&str>, policy: Policy) -> Result<(), GcError> {
            if rv.is_some() && std::mem::take(&mut *self.conflict_once.lock().expect("lock")) {
                self.calls.lock().expect("lock").push(format!("conflict {}", id.name));
                return Err(GcError::Conflict(id.name.clone()));
            }
            self.calls.lock().expect("lock").push(format!("delete {} {policy:?}", id.name));
            self.objects.lock().expect("lock").remove(&id.uid);
            Ok(())
        }
        async fn set_owners(&self, id: &Identity, _rv: &str, owners: &[OwnerReference]) -> Result<(), GcError> {
            let names: Vec<String> =
                owners.iter().map(|o| format!("{}:{}", o.name, o.block_owner_deletion.unwrap_or(false))).collect();
            self.calls.lock().expect("lock").push(format!("owners {} [{}]", id.name, names.join(",")));
            if let Some((_, l)) = self.objects.lock().expect("lock").get_mut(&id.uid) {
                l.owners = owners.to_vec();
            }
            self.bump(&id.uid);
            Ok(())
        }
        async fn set_finalizers(&self, id: &Identity, _rv: &str, finalizers: &[String]) -> Result<(), GcError> {
            self.calls.lock().expect("lock").push(format!("finalizers {} [{}]", id.name, finalizers.join(",")));
            if let Some((_, l)) = self.objects.lock().expect("lock").get_mut(&id.uid) {
                l.finalizers = finalizers.to_vec();
            }
            Ok(())
        }
    }

    fn id(kind: &str, name: &str) -> Identity {
        let api_version = if kind == "Pod" || kind == "ConfigMap" { "v1" } else { "apps/v1" };
        Identity {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: "ns".into(),
            name: name.into(),
            uid: format!("u-{name}"),
        }
    }

    fn r(owner: &Identity, block: bool) -> OwnerReference {
        OwnerReference {
            api_version: owner.api_version.clone(),
            kind: owner.kind.clone(),
            name: owner.name.clone(),
            uid: owner.uid.clone(),
            block_owner_deletion: Some(block),
            controller: Some(true),
        }
    }

    /// Records an object both in the fake API and in the graph (as a monitor would).
    fn seen(
        g: &Mutex<Graph>,
        fake: &Fake,
        id: &Identity,
        owners: Vec<OwnerReference>,
        finalizers: &[&str],
        deleting: bool,
    ) {
        fake.put(id, owners.clone(), finalizers, deleting);
        g.lock().expect("lock").upsert(Observed {
            identity: id.clone(),
            owners,
            deleting,
            finalizers: finalizers.iter().map(|s| s.to_string()).collect(),
        });
    }

    fn live(owners: Vec<OwnerReference>, finalizers: &[&str]) -> Live {
        Live {
            uid: "u".into(),
            resource_version: "1".into(),
            owners,
            finalizers: finalizers.iter().map(|s| s.to_string()).collect(),
            deleting: false,
        }
    }

    #[test]
    fn decisions_follow_the_owner_states() {
        let a = r(&id("ReplicaSet", "a"), true);
        let b = r(&id("ReplicaSet", "b"), true);
        let l = live(vec![a.clone(), b.clone()], &[]);
        assert_eq!(decide(&l, &[(a.clone(), RefState::Solid)], false, false), Decision::Nothing);
        assert_eq!(
            decide(&l, &[(a.clone(), RefState::Solid), (b.clone(), RefState::Dangling)], false, false),
            Decision::RemoveReferences(vec!["u-b".into()])
        );
        assert_eq!(decide(&l, &[(a.clone(), RefState::Dangling)], false, false), Decision::Delete(Policy::Background));
        assert_eq!(
            decide(&l, &[(a.clone(), RefState::Waiting)], true, true),
            Decision::DeleteForeground { unblock_first: true }
        );
        assert_eq!(decide(&l, &[(a.clone(), RefState::Waiting)], false, false), Decision::Delete(Policy::Background));
        let orphaning = live(vec![a.clone()], &["orphan"]);
        assert_eq!(decide(&orphaning, &[(a, RefState::Dangling)], false, false), Decision::Delete(Policy::Orphan));
    }

    #[tokio::test]
    async fn a_dependent_of_a_deleted_owner_is_deleted_in_the_background() {
        let (g, fake) = (Mutex::new(Graph::default()), Fake::default());
        let rs = id("ReplicaSet", "rs");
        let pod = id("Pod", "p");
        seen(&g, &fake, &pod, vec![r(&rs, true)], &[], false);
        // The owner was never created: the virtual node is verified absent first.
        let mut work = Vec::new();
        assert_eq!(attempt_to_delete(&g, &fake, &rs.uid, &mut work).await, Ok(Next::Forget));
        assert_eq!(work, vec![Work::AttemptToDelete(pod.uid.clone())]);
        let mut more = Vec::new();
        attempt_to_delete(&g, &fake, &pod.uid, &mut more).await.expect("attempt");
        assert_eq!(fake.calls(), vec!["delete p Background"]);
    }

    #[tokio::test]
    async fn a_dependent_with_a_living_owner_is_kept() {
        let (g, fake) = (Mutex::new(Graph::default()), Fake::default());
        let rs = id("ReplicaSet", "rs");
        seen(&g, &fake, &rs, vec![], &[], false);
        let pod = id("Pod", "p");
        seen(&g, &fake, &pod, vec![r(&rs, true)], &[], false);
        attempt_to_delete(&g, &fake, &pod.uid, &mut Vec::new()).await.expect("attempt");
        assert!(fake.calls().is_empty());
    }

    #[tokio::test]
    async fn an_owner_replaced_under_the_same_name_counts_as_gone() {
        let (g, fake) = (Mutex::new(Graph::default()), Fake::default());
        let old = id("ReplicaSet", "rs");
        let new = Identity { uid: "u-rs-2".into(), ..old.clone() };
        seen(&g, &fake, &new, vec![], &[], false);
        let pod = id("Pod", "p");
        seen(&g, &fake, &pod, vec![r(&old, true)], &[], false);
        attempt_to_delete(&g, &fake, &pod.uid, &mut Vec::new()).await.expect("attempt");
        assert_eq!(fake.calls(), vec!["delete p Background"]);
    }

    #[tokio::test]
    async fn only_the_gone_owner_reference_is_removed_when_another_owner_remains() {
        let (g, fake) = (Mutex::new(Graph::default()), Fake::default());
        let keep = id("ReplicaSet", "keep");
        let gone = id("ReplicaSet", "gone");
        seen(&g, &fake, &keep, vec![], &[], false);
        let cm = id("ConfigMap", "c");
        seen(&g, &fake, &cm, vec![r(&keep, false), r(&gone, false)], &[], false);
        attempt_to_delete(&g, &fake, &cm.uid, &mut Vec::new()).await.expect("attempt");
        assert_eq!(fake.calls(), vec!["owners c [keep:false]"]);
    }

    #[tokio::test]
    async fn foreground_deletion_deletes_dependents_then_drops_the_finalizer() {
        let (g, fake) = (Mutex::new(Graph::default()), Fake::default());
        let d = id("Deployment", "d");
        let rs = id("ReplicaSet", "rs");
        seen(&g, &fake, &d, vec![], &[], false);
        seen(&g, &fake, &rs, vec![r(&d, true)], &[], false);
        // kubectl delete --cascade=foreground: the API server sets the finalizer.
        fake.put(&d, vec![], &[FINALIZER_FOREGROUND], true);
        let work = g.lock().expect("lock").upsert(Observed {
            identity: d.clone(),
            owners: vec![],
            deleting: true,
            finalizers: vec![FINALIZER_FOREGROUND.into()],
        });
        assert_eq!(work, vec![Work::AttemptToDelete(rs.uid.clone()), Work::AttemptToDelete(d.uid.clone())]);
        // The owner waits: its blocking dependent is queued, no finalizer change yet.
        let mut queued = Vec::new();
        attempt_to_delete(&g, &fake, &d.uid, &mut queued).await.expect("owner");
        assert_eq!(queued, vec![Work::AttemptToDelete(rs.uid.clone())]);
        // The dependent (no dependents of its own) is deleted.
        attempt_to_delete(&g, &fake, &rs.uid, &mut Vec::new()).await.expect("dependent");
        assert_eq!(fake.calls(), vec!["delete rs Background"]);
        // Its deletion is observed; the owner is re-checked and released.
        let work = g.lock().expect("lock").delete(&rs.uid);
        assert_eq!(work, vec![Work::AttemptToDelete(d.uid.clone())]);
        attempt_to_delete(&g, &fake, &d.uid, &mut Vec::new()).await.expect("owner again");
        assert_eq!(fake.calls().last().map(String::as_str), Some("finalizers d []"));
    }

    #[tokio::test]
    async fn a_dependent_with_its_own_dependents_is_deleted_in_the_foreground() {
        let (g, fake) = (Mutex::new(Graph::default()), Fake::default());
        let d = id("Deployment", "d");
        let rs = id("ReplicaSet", "rs");
        let pod = id("Pod", "p");
        seen(&g, &fake, &d, vec![], &[FINALIZER_FOREGROUND], true);
        seen(&g, &fake, &rs, vec![r(&d, true)], &[], false);
        seen(&g, &fake, &pod, vec![r(&rs, true)], &[], false);
        attempt_to_delete(&g, &fake, &rs.uid, &mut Vec::new()).await.expect("attempt");
        assert_eq!(fake.calls(), vec!["delete rs Foreground"]);
    }

    #[tokio::test]
    async fn orphaning_strips_the_owner_reference_then_the_finalizer() {
        let (g, fake) = (Mutex::new(Graph::default()), Fake::default());
        let d = id("Deployment", "d");
        let other = id("Deployment", "other");
        let rs = id("ReplicaSet", "rs");
        seen(&g, &fake, &other, vec![], &[], false);
        seen(&g, &fake, &d, vec![], &[FINALIZER_ORPHAN], true);
        seen(&g, &fake, &rs, vec![r(&d, true), r(&other, false)], &[], false);
        assert_eq!(attempt_to_orphan(&g, &fake, &d.uid).await, Ok(Next::Forget));
        assert_eq!(fake.calls(), vec!["owners rs [other:false]", "finalizers d []"]);
        assert!(fake.live(&rs.uid).is_some(), "the dependent stays");
    }

    #[tokio::test]
    async fn a_conflict_unrelated_to_owner_references_does_not_starve_deletion() {
        let (g, fake) = (Mutex::new(Graph::default()), Fake::default());
        let pod = id("Pod", "p");
        seen(&g, &fake, &pod, vec![r(&id("ReplicaSet", "gone"), true)], &[], false);
        *fake.conflict_once.lock().expect("lock") = true;
        attempt_to_delete(&g, &fake, &pod.uid, &mut Vec::new()).await.expect("attempt");
        assert_eq!(fake.calls(), vec!["conflict p", "delete p Background"]);
    }

    #[tokio::test]
    async fn an_existing_but_unobserved_owner_is_retried_until_its_monitor_reports_it() {
        let (g, fake) = (Mutex::new(Graph::default()), Fake::default());
        let rs = id("ReplicaSet", "rs");
        fake.put(&rs, vec![], &[], false);
        seen(&g, &fake, &id("Pod", "p"), vec![r(&rs, true)], &[], false);
        assert_eq!(attempt_to_delete(&g, &fake, &rs.uid, &mut Vec::new()).await, Ok(Next::Requeue));
        assert!(fake.calls().is_empty());
    }

    #[tokio::test]
    async fn an_owner_of_an_undiscovered_kind_is_not_taken_for_absent() {
        let (g, fake) = (Mutex::new(Graph::default()), Fake::default());
        let owner = Identity { kind: "Unknown".into(), ..id("ReplicaSet", "w") };
        let cm = id("ConfigMap", "c");
        seen(&g, &fake, &cm, vec![r(&owner, false)], &[], false);
        let mut work = Vec::new();
        let res = attempt_to_delete(&g, &fake, &owner.uid, &mut work).await;
        assert!(matches!(res, Err(GcError::Unmapped { .. })), "{res:?}");
        assert!(work.is_empty());
        assert!(g.lock().expect("lock").node(&owner.uid).is_some(), "the virtual owner stays");
        assert!(matches!(attempt_to_delete(&g, &fake, &cm.uid, &mut work).await, Err(GcError::Unmapped { .. })));
        assert!(fake.calls().is_empty(), "nothing deleted");
    }

    #[tokio::test]
    async fn a_cluster_scoped_item_naming_a_namespaced_owner_is_an_error() {
        let (g, fake) = (Mutex::new(Graph::default()), Fake::default());
        let node = Identity {
            api_version: "v1".into(),
            kind: "Node".into(),
            namespace: String::new(),
            name: "n".into(),
            uid: "u-n".into(),
        };
        seen(&g, &fake, &node, vec![r(&id("ReplicaSet", "rs"), false)], &[], false);
        let res = attempt_to_delete(&g, &fake, &node.uid, &mut Vec::new()).await;
        assert!(matches!(res, Err(GcError::NamespacedOwnerOfClusterScoped(_))), "{res:?}");
    }
}
