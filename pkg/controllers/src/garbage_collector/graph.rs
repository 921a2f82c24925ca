//! The dependency graph (upstream `garbagecollector/graph.go` and `graph_builder.go`): one node
//! per object uid seen by the monitors, plus "virtual" nodes for owners referenced but not (yet)
//! observed. Applying a change returns the work it calls for: items whose owners may be gone or
//! waiting (attempt-to-delete) and owners whose dependents must be orphaned.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

pub const FINALIZER_ORPHAN: &str = "orphan";
pub const FINALIZER_FOREGROUND: &str = "foregroundDeletion";

/// Where an object lives: its coordinates and uid.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Identity {
    pub api_version: String,
    pub kind: String,
    /// Empty for cluster-scoped objects.
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

fn group_of(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(g, _)| g)
}

impl Identity {
    /// The owner an ownerReference of an object in `namespace` points at.
    pub fn of_owner(r: &OwnerReference, namespace: &str) -> Identity {
        Identity {
            api_version: r.api_version.clone(),
            kind: r.kind.clone(),
            namespace: namespace.to_string(),
            name: r.name.clone(),
            uid: r.uid.clone(),
        }
    }

    /// Same object whatever the version the reference was written with.
    pub fn same_coordinates(&self, other: &Identity) -> bool {
        group_of(&self.api_version) == group_of(&other.api_version)
            && self.kind == other.kind
            && self.name == other.name
            && self.uid == other.uid
    }
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "[{}/{}, namespace: {}, name: {}, uid: {}]",
            self.api_version, self.kind, self.namespace, self.name, self.uid
        )
    }
}

/// What a monitor saw of an object.
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    pub identity: Identity,
    pub owners: Vec<OwnerReference>,
    pub deleting: bool,
    pub finalizers: Vec<String>,
}

#[derive(Clone, Debug)]
pub struct Node {
    pub identity: Identity,
    pub owners: Vec<OwnerReference>,
    pub dependents: BTreeSet<String>,
    /// Seen by a monitor (false: a virtual node standing for a referenced owner).
    pub observed: bool,
    pub being_deleted: bool,
    /// Being deleted in the foreground: it waits for its blocking dependents.
    pub deleting_dependents: bool,
    /// Being deleted with the orphan finalizer.
    pub orphaning: bool,
}

/// Work a change calls for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Work {
    /// Check whether this item (by uid) must be deleted, or, deleting its dependents, whether it
    /// may go.
    AttemptToDelete(String),
    /// Orphan the dependents of this owner (by uid), then drop its `orphan` finalizer.
    AttemptToOrphan(String),
}

/// Owners verified absent, so that the dependents of one deleted owner cost one lookup (an LRU
/// of upstream's size).
#[derive(Debug, Default)]
pub struct AbsentOwners {
    set: HashSet<Identity>,
    order: VecDeque<Identity>,
}

const ABSENT_CAPACITY: usize = 500;

impl AbsentOwners {
    pub fn add(&mut self, id: Identity) {
        if self.set.insert(id.clone()) {
            self.order.push_back(id);
            while self.order.len() > ABSENT_CAPACITY {
                if let Some(old) = self.order.pop_front() {
                    self.set.remove(&old);
                }
            }
        }
    }

    pub fn contains(&self, id: &Identity) -> bool {
        self.set.contains(id)
    }
}

#[derive(Debug, Default)]
pub struct Graph {
    nodes: HashMap<String, Node>,
    pub absent: AbsentOwners,
}

fn blocks(r: &OwnerReference) -> bool {
    r.block_owner_deletion == Some(true)
}

/// Owner references added, removed, and changed (same uid, different content).
fn reference_diffs(
    old: &[OwnerReference],
    new: &[OwnerReference],
) -> (Vec<OwnerReference>, Vec<OwnerReference>, Vec<(OwnerReference, OwnerReference)>) {
    let old_by_uid: HashMap<&str, &OwnerReference> = old.iter().map(|r| (r.uid.as_str(), r)).collect();
    let new_by_uid: HashMap<&str, &OwnerReference> = new.iter().map(|r| (r.uid.as_str(), r)).collect();
    let added = new.iter().filter(|r| !old_by_uid.contains_key(r.uid.as_str())).cloned().collect();
    let removed = old.iter().filter(|r| !new_by_uid.contains_key(r.uid.as_str())).cloned().collect();
    let changed = new
        .iter()
        .filter_map(|n| old_by_uid.get(n.uid.as_str()).filter(|o| **o != n).map(|o| ((*o).clone(), n.clone())))
        .collect();
    (added, removed, changed)
}

impl Graph {
    pub fn node(&self, uid: &str) -> Option<&Node> {
        self.nodes.get(uid)
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Dependents whose reference to `uid` has `blockOwnerDeletion: true`, with whether each is
    /// itself deleting its dependents.
    pub fn blocking_dependents(&self, uid: &str) -> Vec<(String, bool)> {
        let Some(n) = self.nodes.get(uid) else { return Vec::new() };
        n.dependents
            .iter()
            .filter_map(|d| self.nodes.get(d))
            .filter(|d| d.owners.iter().any(|o| o.uid == uid && blocks(o)))
            .map(|d| (d.identity.uid.clone(), d.deleting_dependents))
            .collect()
    }

    /// The dependents of `uid` (identities), and whether any is deleting its own dependents.
    pub fn dependents(&self, uid: &str) -> (Vec<Identity>, bool) {
        let Some(n) = self.nodes.get(uid) else { return (Vec::new(), false) };
        let deps: Vec<&Node> = n.dependents.iter().filter_map(|d| self.nodes.get(d)).collect();
        (deps.iter().map(|d| d.identity.clone()).collect(), deps.iter().any(|d| d.deleting_dependents))
    }

    fn add_dependent_to_owners(&mut self, dependent: &Identity, owners: &[OwnerReference], work: &mut Vec<Work>) {
        for owner in owners {
            match self.nodes.get_mut(&owner.uid) {
                Some(o) => {
                    o.dependents.insert(dependent.uid.clone());
                }
                None => {
                    // A virtual node: the attempt-to-delete worker asks the API whether it exists.
                    let mut node = Node {
                        identity: Identity::of_owner(owner, &dependent.namespace),
                        owners: Vec::new(),
                        dependents: BTreeSet::new(),
                        observed: false,
                        being_deleted: false,
                        deleting_dependents: false,
                        orphaning: false,
                    };
                    node.dependents.insert(dependent.uid.clone());
                    self.nodes.insert(owner.uid.clone(), node);
                    work.push(Work::AttemptToDelete(owner.uid.clone()));
                }
            }
        }
    }

    fn remove_dependent_from_owners(&mut self, dependent_uid: &str, owners: &[OwnerReference]) {
        for owner in owners {
            if let Some(o) = self.nodes.get_mut(&owner.uid) {
                o.dependents.remove(dependent_uid);
            }
        }
    }

    /// Owners waiting for their dependents whose blocking reference was removed or unblocked.
    fn unblocked_owners(
        &self,
        removed: &[OwnerReference],
        changed: &[(OwnerReference, OwnerReference)],
        work: &mut Vec<Work>,
    ) {
        let mut check = |uid: &str| {
            if self.nodes.get(uid).is_some_and(|o| o.deleting_dependents) {
                work.push(Work::AttemptToDelete(uid.to_string()));
            }
        };
        for r in removed.iter().filter(|r| blocks(r)) {
            check(&r.uid);
        }
        for (old, new) in changed {
            if blocks(old) && !blocks(new) {
                check(&new.uid);
            }
        }
    }

    /// A monitor saw `obj` added or updated.
    pub fn upsert(&mut self, obj: Observed) -> Vec<Work> {
        let mut work = Vec::new();
        let uid = obj.identity.uid.clone();
        let orphaning = obj.deleting && obj.finalizers.iter().any(|f| f == FINALIZER_ORPHAN);
        let foreground = obj.deleting && obj.finalizers.iter().any(|f| f == FINALIZER_FOREGROUND);
        let Some(existing) = self.nodes.get(&uid).cloned() else {
            let node = Node {
                identity: obj.identity.clone(),
                owners: obj.owners.clone(),
                dependents: BTreeSet::new(),
                observed: true,
                being_deleted: obj.deleting,
                deleting_dependents: foreground,
                orphaning,
            };
            self.nodes.insert(uid.clone(), node);
            self.add_dependent_to_owners(&obj.identity, &obj.owners, &mut work);
            if orphaning {
                work.push(Work::AttemptToOrphan(uid));
            } else if foreground {
                work.push(Work::AttemptToDelete(uid));
            }
            return work;
        };
        if !existing.observed && !existing.identity.same_coordinates(&obj.identity) {
            // Dependents that named this uid with other coordinates may hold a bad reference.
            for dep in &existing.dependents {
                let bad = self.nodes.get(dep).is_some_and(|d| {
                    d.owners.iter().any(|o| o.uid == uid && !Identity::of_owner(o, "").same_coordinates(&obj.identity))
                });
                if bad {
                    work.push(Work::AttemptToDelete(dep.clone()));
                }
            }
        }
        let (added, removed, changed) = reference_diffs(&existing.owners, &obj.owners);
        if !added.is_empty() || !removed.is_empty() || !changed.is_empty() {
            self.unblocked_owners(&removed, &changed, &mut work);
            self.add_dependent_to_owners(&obj.identity, &added, &mut work);
            self.remove_dependent_from_owners(&uid, &removed);
        }
        let Some(node) = self.nodes.get_mut(&uid) else { return work };
        node.identity = obj.identity.clone();
        node.observed = true;
        node.owners = obj.owners;
        if obj.deleting {
            node.being_deleted = true;
        }
        let starts_orphaning = orphaning && !node.orphaning;
        let starts_foreground = foreground && !node.deleting_dependents;
        node.orphaning = orphaning;
        if starts_orphaning {
            work.push(Work::AttemptToOrphan(uid));
        } else if starts_foreground {
            node.deleting_dependents = true;
            work.extend(node.dependents.iter().map(|d| Work::AttemptToDelete(d.clone())));
            work.push(Work::AttemptToDelete(uid));
        }
        work
    }

    fn remove(&mut self, uid: &str, work: &mut Vec<Work>) {
        let Some(node) = self.nodes.remove(uid) else { return };
        self.remove_dependent_from_owners(uid, &node.owners);
        if !node.dependents.is_empty() {
            self.absent.add(node.identity.clone());
        }
        work.extend(node.dependents.iter().map(|d| Work::AttemptToDelete(d.clone())));
        for owner in &node.owners {
            if self.nodes.get(&owner.uid).is_some_and(|o| o.deleting_dependents) {
                work.push(Work::AttemptToDelete(owner.uid.clone()));
            }
        }
    }

    /// A monitor saw the object with this uid deleted.
    pub fn delete(&mut self, uid: &str) -> Vec<Work> {
        let mut work = Vec::new();
        self.remove(uid, &mut work);
        work
    }

    /// The API says the object `id` does not exist (it was looked up for a virtual node or for
    /// an item that vanished).
    pub fn virtual_delete(&mut self, id: &Identity) -> Vec<Work> {
        let mut work = Vec::new();
        let Some(node) = self.nodes.get(&id.uid) else { return work };
        if node.observed && !node.identity.same_coordinates(id) {
            // A real object with this uid exists elsewhere: only dependents naming the absent
            // coordinates are affected.
            self.absent.add(id.clone());
            for dep in node.dependents.clone() {
                let matches = self.nodes.get(&dep).is_some_and(|d| {
                    d.owners.iter().any(|o| o.uid == id.uid && Identity::of_owner(o, "").same_coordinates(id))
                });
                if matches {
                    work.push(Work::AttemptToDelete(dep));
                }
            }
            return work;
        }
        self.remove(&id.uid, &mut work);
        work
    }

    /// A monitor listed every object of `group`/`kind` again: observed nodes of that type it did
    /// not list were deleted while the watch was down.
    pub fn resync(&mut self, group: &str, kind: &str, listed: &HashSet<String>) -> Vec<Work> {
        let gone: Vec<String> = self
            .nodes
            .values()
            .filter(|n| n.observed && n.identity.kind == kind && group_of(&n.identity.api_version) == group)
            .filter(|n| !listed.contains(&n.identity.uid))
            .map(|n| n.identity.uid.clone())
            .collect();
        let mut work = Vec::new();
        for uid in gone {
            self.remove(&uid, &mut work);
        }
        work
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(kind: &str, name: &str, uid: &str) -> Identity {
        let api_version = if kind == "Pod" { "v1" } else { "apps/v1" };
        Identity {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: "ns".into(),
            name: name.into(),
            uid: uid.into(),
        }
    }

    fn owner_ref(owner: &Identity, block: bool) -> OwnerReference {
        OwnerReference {
            api_version: owner.api_version.clone(),
            kind: owner.kind.clone(),
            name: owner.name.clone(),
            uid: owner.uid.clone(),
            block_owner_deletion: Some(block),
            controller: Some(true),
        }
    }

    fn obs(identity: Identity, owners: Vec<OwnerReference>) -> Observed {
        Observed { identity, owners, deleting: false, finalizers: Vec::new() }
    }

    #[test]
    fn an_unseen_owner_becomes_a_virtual_node_to_verify() {
        let mut g = Graph::default();
        let rs = id("ReplicaSet", "rs", "u-rs");
        let work = g.upsert(obs(id("Pod", "p", "u-p"), vec![owner_ref(&rs, true)]));
        assert_eq!(work, vec![Work::AttemptToDelete("u-rs".into())]);
        let v = g.node("u-rs").expect("virtual");
        assert!(!v.observed);
        assert!(v.dependents.contains("u-p"));
        // Observing the owner makes it real and queues nothing.
        assert!(g.upsert(obs(rs, vec![])).is_empty());
        assert!(g.node("u-rs").expect("node").observed);
    }

    #[test]
    fn deleting_an_owner_queues_its_dependents_and_records_it_absent() {
        let mut g = Graph::default();
        let rs = id("ReplicaSet", "rs", "u-rs");
        g.upsert(obs(rs.clone(), vec![]));
        g.upsert(obs(id("Pod", "a", "u-a"), vec![owner_ref(&rs, true)]));
        g.upsert(obs(id("Pod", "b", "u-b"), vec![owner_ref(&rs, true)]));
        let work = g.delete("u-rs");
        assert_eq!(work, vec![Work::AttemptToDelete("u-a".into()), Work::AttemptToDelete("u-b".into())]);
        assert!(g.absent.contains(&rs));
        assert!(g.node("u-rs").is_none());
    }

    #[test]
    fn foreground_deletion_starts_once_and_queues_owner_and_dependents() {
        let mut g = Graph::default();
        let d = id("Deployment", "d", "u-d");
        g.upsert(obs(d.clone(), vec![]));
        g.upsert(obs(id("ReplicaSet", "rs", "u-rs"), vec![owner_ref(&d, true)]));
        let deleting = Observed {
            identity: d.clone(),
            owners: vec![],
            deleting: true,
            finalizers: vec![FINALIZER_FOREGROUND.into()],
        };
        let work = g.upsert(deleting.clone());
        assert_eq!(work, vec![Work::AttemptToDelete("u-rs".into()), Work::AttemptToDelete("u-d".into())]);
        assert!(g.node("u-d").expect("node").deleting_dependents);
        assert!(g.upsert(deleting).is_empty(), "an unrelated update starts nothing again");
        // The blocking dependent going away re-checks the owner.
        assert_eq!(g.delete("u-rs"), vec![Work::AttemptToDelete("u-d".into())]);
    }

    #[test]
    fn the_orphan_finalizer_on_a_deleting_owner_queues_orphaning() {
        let mut g = Graph::default();
        let d = id("Deployment", "d", "u-d");
        g.upsert(obs(d.clone(), vec![]));
        let work = g.upsert(Observed {
            identity: d,
            owners: vec![],
            deleting: true,
            finalizers: vec![FINALIZER_ORPHAN.into()],
        });
        assert_eq!(work, vec![Work::AttemptToOrphan("u-d".into())]);
    }

    #[test]
    fn an_owner_first_seen_already_deleting_in_foreground_is_queued() {
        let mut g = Graph::default();
        let d = id("Deployment", "d", "u-d");
        let work = g.upsert(Observed {
            identity: d,
            owners: vec![],
            deleting: true,
            finalizers: vec![FINALIZER_FOREGROUND.into()],
        });
        assert_eq!(work, vec![Work::AttemptToDelete("u-d".into())]);
        assert_eq!(g.blocking_dependents("u-d"), vec![]);
    }

    #[test]
    fn unblocking_a_reference_rechecks_the_waiting_owner() {
        let mut g = Graph::default();
        let d = id("Deployment", "d", "u-d");
        g.upsert(Observed {
            identity: d.clone(),
            owners: vec![],
            deleting: true,
            finalizers: vec![FINALIZER_FOREGROUND.into()],
        });
        let rs = id("ReplicaSet", "rs", "u-rs");
        g.upsert(obs(rs.clone(), vec![owner_ref(&d, true)]));
        assert_eq!(g.blocking_dependents("u-d"), vec![("u-rs".to_string(), false)]);
        let work = g.upsert(obs(rs, vec![owner_ref(&d, false)]));
        assert_eq!(work, vec![Work::AttemptToDelete("u-d".into())]);
        assert!(g.blocking_dependents("u-d").is_empty());
    }

    #[test]
    fn removing_an_owner_reference_detaches_the_dependent() {
        let mut g = Graph::default();
        let rs = id("ReplicaSet", "rs", "u-rs");
        g.upsert(obs(rs.clone(), vec![]));
        let pod = id("Pod", "p", "u-p");
        g.upsert(obs(pod.clone(), vec![owner_ref(&rs, false)]));
        g.upsert(obs(pod, vec![]));
        assert!(g.node("u-rs").expect("rs").dependents.is_empty());
        assert!(g.delete("u-rs").is_empty());
    }

    #[test]
    fn a_virtual_delete_removes_the_virtual_owner_and_queues_dependents() {
        let mut g = Graph::default();
        let rs = id("ReplicaSet", "rs", "u-rs");
        g.upsert(obs(id("Pod", "p", "u-p"), vec![owner_ref(&rs, true)]));
        assert_eq!(g.virtual_delete(&rs), vec![Work::AttemptToDelete("u-p".into())]);
        assert!(g.node("u-rs").is_none());
    }

    #[test]
    fn a_virtual_delete_with_other_coordinates_keeps_the_real_node() {
        let mut g = Graph::default();
        let rs = id("ReplicaSet", "rs", "u-rs");
        g.upsert(obs(rs.clone(), vec![]));
        let wrong = Identity { name: "other".into(), ..rs.clone() };
        g.upsert(obs(id("Pod", "p", "u-p"), vec![owner_ref(&wrong, true)]));
        let work = g.virtual_delete(&wrong);
        assert_eq!(work, vec![Work::AttemptToDelete("u-p".into())]);
        assert!(g.node("u-rs").is_some());
    }

    #[test]
    fn a_relist_drops_objects_deleted_while_the_watch_was_down() {
        let mut g = Graph::default();
        let rs = id("ReplicaSet", "rs", "u-rs");
        g.upsert(obs(rs.clone(), vec![]));
        g.upsert(obs(id("Pod", "p", "u-p"), vec![owner_ref(&rs, true)]));
        let work = g.resync("apps", "ReplicaSet", &HashSet::new());
        assert_eq!(work, vec![Work::AttemptToDelete("u-p".into())]);
        assert!(g.resync("", "Pod", &HashSet::from(["u-p".to_string()])).is_empty());
    }

    #[test]
    fn the_absent_cache_forgets_the_oldest_beyond_capacity() {
        let mut a = AbsentOwners::default();
        for i in 0..=ABSENT_CAPACITY {
            a.add(id("ReplicaSet", "rs", &format!("u{i}")));
        }
        assert!(!a.contains(&id("ReplicaSet", "rs", "u0")));
        assert!(a.contains(&id("ReplicaSet", "rs", &format!("u{ABSENT_CAPACITY}"))));
    }
}
