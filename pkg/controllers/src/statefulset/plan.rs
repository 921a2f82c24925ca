//! The StatefulSet controller's decisions as a pure function (upstream
//! `stateful_set_control.go` and `stateful_set_utils.go`): revisions, the pods and claims to
//! create, the pods to delete (failed, condemned by a scale-down, or outdated in a rolling
//! update above the partition) and the status, in the order the controller carries them out.

use crate::workloads::{hash, history, owner, pods};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use std::collections::{BTreeMap, HashMap};

pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";
pub const REVISION_LABEL: &str = "controller-revision-hash";

/// One thing to do, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    CreateRevision(Box<ControllerRevision>),
    /// Re-number an existing revision (the template went back to it).
    UpdateRevision(Box<ControllerRevision>),
    DeleteRevision(String),
    /// Create a claim for `pod`.
    CreateClaim {
        claim: Box<PersistentVolumeClaim>,
        pod: String,
    },
    /// Make `owner` an owner of the claim (retention policy `whenScaled: Delete`).
    OwnClaim {
        claim: String,
        owner: OwnerReference,
    },
    CreatePod(Box<Pod>),
    DeletePod(String),
    UpdateStatus(Box<StatefulSetStatus>),
}

/// The decisions of one sync.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    pub steps: Vec<Step>,
    /// Pods are waiting for `minReadySeconds`: look again then.
    pub requeue_after: Option<std::time::Duration>,
}

/// The ordinal of a pod named `<set>-<n>`.
pub fn ordinal(set_name: &str, pod: &Pod) -> Option<i32> {
    let name = pod.metadata.name.as_deref()?;
    let rest = name.strip_prefix(set_name)?.strip_prefix('-')?;
    rest.parse::<i32>().ok().filter(|o| *o >= 0 && !rest.starts_with('+'))
}

fn start_ordinal(set: &StatefulSet) -> i32 {
    set.spec.as_ref().and_then(|s| s.ordinals.as_ref()).and_then(|o| o.start).unwrap_or(0)
}

fn replicas(set: &StatefulSet) -> i32 {
    set.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

fn is_parallel(set: &StatefulSet) -> bool {
    set.spec.as_ref().and_then(|s| s.pod_management_policy.as_deref()) == Some("Parallel")
}

fn is_rolling(set: &StatefulSet) -> bool {
    set.spec.as_ref().and_then(|s| s.update_strategy.as_ref()).and_then(|u| u.type_.as_deref()) != Some("OnDelete")
}

fn partition(set: &StatefulSet) -> Option<i32> {
    set.spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.rolling_update.as_ref())
        .map(|r| r.partition.unwrap_or(0))
}

fn min_ready(set: &StatefulSet) -> i32 {
    set.spec.as_ref().and_then(|s| s.min_ready_seconds).unwrap_or(0)
}

fn set_name(set: &StatefulSet) -> String {
    set.metadata.name.clone().unwrap_or_default()
}

/// A pod exists with a phase.
fn is_created(p: &Pod) -> bool {
    !pods::pod_phase(p).is_empty()
}

fn is_running_and_ready(p: &Pod) -> bool {
    pods::pod_phase(p) == "Running" && pods::is_ready(p)
}

fn is_healthy(p: &Pod, min_ready: i32, now: Timestamp) -> bool {
    is_running_and_ready(p) && pods::is_available(p, min_ready, now) && p.metadata.deletion_timestamp.is_none()
}

fn revision_of(p: &Pod) -> Option<&str> {
    p.metadata.labels.as_ref()?.get(REVISION_LABEL).map(String::as_str)
}

/// `getPersistentVolumeClaimName`.
pub fn claim_name(set: &StatefulSet, claim: &PersistentVolumeClaim, ordinal: i32) -> String {
    format!("{}-{}-{}", claim.metadata.name.clone().unwrap_or_default(), set_name(set), ordinal)
}

/// `newStatefulSetPod` with `template` (of the revision `revision`).
pub fn new_pod(set: &StatefulSet, template: &PodTemplateSpec, revision: &str, ordinal: i32) -> Pod {
    let name = format!("{}-{ordinal}", set_name(set));
    let ns = set.metadata.namespace.clone().unwrap_or_default();
    let mut pod = pods::from_template(template, &ns, Some(name.clone()), None, owner::controller_ref(set));
    let labels = pod.metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(POD_NAME_LABEL.into(), name.clone());
    labels.insert(POD_INDEX_LABEL.into(), ordinal.to_string());
    labels.insert(REVISION_LABEL.into(), revision.into());
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.hostname = Some(name);
    if let Some(service) = set.spec.as_ref().and_then(|s| s.service_name.clone()).filter(|s| !s.is_empty()) {
        spec.subdomain = Some(service);
    }
    // updateStorage: one volume per claim template, replacing same-named template volumes.
    let claims = set.spec.as_ref().and_then(|s| s.volume_claim_templates.clone()).unwrap_or_default();
    if !claims.is_empty() {
        let mut volumes: Vec<Volume> = spec.volumes.take().unwrap_or_default();
        for c in &claims {
            let vname = c.metadata.name.clone().unwrap_or_default();
            volumes.retain(|v| v.name != vname);
            volumes.push(Volume {
                name: vname,
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: claim_name(set, c, ordinal),
                    read_only: None,
                }),
                ..Default::default()
            });
        }
        spec.volumes = Some(volumes);
    }
    pod
}

/// The claims a pod at `ordinal` needs (`getPersistentVolumeClaims`).
pub fn claims_for(set: &StatefulSet, ordinal: i32) -> Vec<PersistentVolumeClaim> {
    let spec = set.spec.clone().unwrap_or_default();
    let when_deleted_delete =
        spec.persistent_volume_claim_retention_policy.as_ref().and_then(|p| p.when_deleted.as_deref())
            == Some("Delete");
    spec.volume_claim_templates
        .unwrap_or_default()
        .into_iter()
        .map(|t| {
            let mut claim = t.clone();
            let mut labels = claim.metadata.labels.take().unwrap_or_default();
            labels.extend(spec.selector.match_labels.clone().unwrap_or_default());
            claim.metadata = ObjectMeta {
                name: Some(claim_name(set, &t, ordinal)),
                namespace: set.metadata.namespace.clone(),
                labels: Some(labels),
                annotations: t.metadata.annotations.clone(),
                owner_references: when_deleted_delete.then(|| vec![owner::controller_ref(set)]),
                ..Default::default()
            };
            claim.status = None;
            claim
        })
        .collect()
}

/// The inputs of one sync.
pub struct Observed<'a> {
    pub set: &'a StatefulSet,
    /// Pods the set controls.
    pub pods: Vec<&'a Pod>,
    /// ControllerRevisions the set controls.
    pub revisions: Vec<ControllerRevision>,
    /// Names of the claims that exist in the namespace.
    pub claims: Vec<String>,
    pub now: Timestamp,
}

/// What one sync of a StatefulSet does.
pub fn plan(o: &Observed<'_>) -> Plan {
    let set = o.set;
    let mut steps = Vec::new();
    let name = set_name(set);
    let template = set.spec.as_ref().map(|s| s.template.clone()).unwrap_or_default();
    let status = set.status.clone().unwrap_or_default();
    let collisions = status.collision_count;

    // Revisions: the update revision is the one recording the current template.
    let mut revisions = o.revisions.clone();
    revisions.sort_by_key(|r| r.revision);
    let data = history::template_patch(&template);
    let rev_hash = hash::controller_revision_hash(&history::canonical_json(&data), collisions);
    let mut candidate = history::new_revision(
        owner::controller_ref(set),
        set.metadata.namespace.clone(),
        history::revision_name(&name, &rev_hash),
        template.metadata.as_ref().and_then(|m| m.labels.clone()),
        &rev_hash,
        data,
        history::max_revision(&revisions) + 1,
    );
    // As upstream's newRevision: the set's annotations (`kubernetes.io/change-cause`…).
    candidate.metadata.annotations = set.metadata.annotations.clone();
    let update_revision = match revisions.iter().position(|r| history::same_data(r, &candidate)) {
        Some(i) if i + 1 == revisions.len() => revisions[i].clone(),
        Some(i) => {
            let mut r = revisions[i].clone();
            r.revision = history::max_revision(&revisions) + 1;
            steps.push(Step::UpdateRevision(Box::new(r.clone())));
            revisions[i] = r.clone();
            r
        }
        None => {
            steps.push(Step::CreateRevision(Box::new(candidate.clone())));
            revisions.push(candidate.clone());
            candidate
        }
    };
    let update_name = update_revision.metadata.name.clone().unwrap_or_default();
    let current_revision = status
        .current_revision
        .as_ref()
        .and_then(|c| revisions.iter().find(|r| r.metadata.name.as_ref() == Some(c)))
        .cloned()
        .unwrap_or_else(|| update_revision.clone());
    let current_name = current_revision.metadata.name.clone().unwrap_or_default();
    let current_template = history::template_of(&current_revision).unwrap_or_else(|| template.clone());

    // Partition pods into the replicas range and the condemned.
    let start = start_ordinal(set);
    let count = replicas(set);
    let end = start + count;
    let mut by_ordinal: BTreeMap<i32, &Pod> = BTreeMap::new();
    let mut condemned: Vec<(i32, &Pod)> = Vec::new();
    for p in &o.pods {
        match ordinal(&name, p) {
            Some(ord) if ord >= start && ord < end => {
                by_ordinal.insert(ord, p);
            }
            Some(ord) => condemned.push((ord, p)),
            None => {}
        }
    }
    condemned.sort_by_key(|c| std::cmp::Reverse(c.0));
    let min_ready = min_ready(set);
    let monotonic = !is_parallel(set);

    // Status from what exists now.
    let mut st = StatefulSetStatus {
        observed_generation: set.metadata.generation,
        collision_count: status.collision_count,
        current_revision: Some(current_name.clone()),
        update_revision: Some(update_name.clone()),
        conditions: status.conditions.clone(),
        ..Default::default()
    };
    let (mut ready, mut available, mut current, mut updated, mut created) = (0, 0, 0, 0, 0);
    for p in by_ordinal.values().copied().chain(condemned.iter().map(|(_, p)| *p)) {
        if is_created(p) {
            created += 1;
        }
        if is_running_and_ready(p) {
            ready += 1;
            if pods::is_available(p, min_ready, o.now) {
                available += 1;
            }
        }
        if is_created(p) && p.metadata.deletion_timestamp.is_none() {
            if revision_of(p) == Some(current_name.as_str()) {
                current += 1;
            }
            if revision_of(p) == Some(update_name.as_str()) {
                updated += 1;
            }
        }
    }
    st.replicas = created;
    st.ready_replicas = Some(ready);
    st.available_replicas = Some(available);
    st.current_replicas = Some(current);
    st.updated_replicas = Some(updated);

    // Pods to create, recreate or wait for, in ordinal order.
    let part = partition(set);
    let use_current = |ord: i32| {
        is_rolling(set)
            && match part {
                None => ord < start + status.current_replicas.unwrap_or(0),
                Some(p) => ord < start + p,
            }
    };
    let when_scaled_delete = set
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_claim_retention_policy.as_ref())
        .and_then(|p| p.when_scaled.as_deref())
        == Some("Delete");
    let mut blocked = false;
    let mut requeue = None;
    for ord in start..end {
        match by_ordinal.get(&ord) {
            None => {
                let (tmpl, rev) = if use_current(ord) {
                    (&current_template, current_name.as_str())
                } else {
                    (&template, update_name.as_str())
                };
                let pod = new_pod(set, tmpl, rev, ord);
                let pod_name = pod.metadata.name.clone().unwrap_or_default();
                for claim in claims_for(set, ord) {
                    if !o.claims.contains(claim.metadata.name.as_ref().unwrap_or(&String::new())) {
                        steps.push(Step::CreateClaim { claim: Box::new(claim), pod: pod_name.clone() });
                    }
                }
                steps.push(Step::CreatePod(Box::new(pod)));
                if monotonic {
                    blocked = true;
                    break;
                }
            }
            Some(p) => {
                let phase = pods::pod_phase(p);
                if (phase == "Failed" || phase == "Succeeded") && p.metadata.deletion_timestamp.is_none() {
                    steps.push(Step::DeletePod(p.metadata.name.clone().unwrap_or_default()));
                    if monotonic {
                        blocked = true;
                        break;
                    }
                    continue;
                }
                // A pod that lost its claims (deleted underneath it) gets them back.
                for claim in claims_for(set, ord) {
                    if !o.claims.contains(claim.metadata.name.as_ref().unwrap_or(&String::new())) {
                        let pod_name = p.metadata.name.clone().unwrap_or_default();
                        steps.push(Step::CreateClaim { claim: Box::new(claim), pod: pod_name });
                    }
                }
                if !is_healthy(p, min_ready, o.now) {
                    if let Some(d) = pods::until_available(p, min_ready, o.now) {
                        requeue = Some(requeue.map_or(d, |r: std::time::Duration| r.min(d)));
                    }
                    if monotonic {
                        blocked = true;
                        break;
                    }
                }
            }
        }
    }

    // Scale down: highest ordinal first; one at a time in OrderedReady.
    if !blocked {
        for (_, p) in &condemned {
            if p.metadata.deletion_timestamp.is_some() {
                if monotonic {
                    blocked = true;
                    break;
                }
                continue;
            }
            // In order: an unhealthy pod blocks unless it is the lowest unhealthy ordinal.
            let first_unhealthy = condemned.iter().rev().find(|(_, c)| !is_running_and_ready(c)).map(|(o, _)| *o);
            if monotonic && !is_running_and_ready(p) && ordinal(&name, p) != first_unhealthy {
                blocked = true;
                break;
            }
            let pod_name = p.metadata.name.clone().unwrap_or_default();
            if when_scaled_delete {
                let ord = ordinal(&name, p).unwrap_or(0);
                for claim in claims_for(set, ord) {
                    let cname = claim.metadata.name.clone().unwrap_or_default();
                    if o.claims.contains(&cname) {
                        let pod_ref = OwnerReference {
                            api_version: "v1".into(),
                            kind: "Pod".into(),
                            name: pod_name.clone(),
                            uid: p.metadata.uid.clone().unwrap_or_default(),
                            controller: None,
                            block_owner_deletion: None,
                        };
                        steps.push(Step::OwnClaim { claim: cname, owner: pod_ref });
                    }
                }
            }
            steps.push(Step::DeletePod(pod_name));
            if monotonic {
                blocked = true;
                break;
            }
        }
    }

    // Rolling update: replace the highest outdated pod at or above the partition, one at a time.
    if !blocked && is_rolling(set) {
        let floor = start + part.unwrap_or(0).max(0);
        for ord in (floor..end).rev() {
            let Some(p) = by_ordinal.get(&ord) else { continue };
            if revision_of(p) != Some(update_name.as_str()) && p.metadata.deletion_timestamp.is_none() {
                steps.push(Step::DeletePod(p.metadata.name.clone().unwrap_or_default()));
                break;
            }
            if !is_healthy(p, min_ready, o.now) {
                break;
            }
        }
    }

    // completeRollingUpdate: everything is updated and ready.
    if is_rolling(set)
        && st.updated_replicas == Some(st.replicas)
        && st.ready_replicas == Some(st.replicas)
        && st.replicas == count
    {
        st.current_revision = st.update_revision.clone();
        st.current_replicas = st.updated_replicas;
    }

    // Revision history: keep `revisionHistoryLimit` revisions besides the live ones.
    let live: Vec<String> = o
        .pods
        .iter()
        .filter_map(|p| revision_of(p).map(str::to_string))
        .chain([current_name.clone(), update_name.clone(), st.current_revision.clone().unwrap_or_default()])
        .collect();
    let limit = usize::try_from(set.spec.as_ref().and_then(|s| s.revision_history_limit).unwrap_or(10)).unwrap_or(10);
    let history: Vec<&ControllerRevision> =
        revisions.iter().filter(|r| !live.contains(r.metadata.name.as_ref().unwrap_or(&String::new()))).collect();
    let excess = history.len().saturating_sub(limit);
    for r in history.into_iter().take(excess) {
        steps.push(Step::DeleteRevision(r.metadata.name.clone().unwrap_or_default()));
    }

    if Some(&st) != set.status.as_ref() {
        steps.push(Step::UpdateStatus(Box::new(st)));
    }
    Plan { steps, requeue_after: requeue }
}

/// Keys of claims that exist, for [`Observed::claims`].
pub fn claim_names(claims: &[&PersistentVolumeClaim]) -> Vec<String> {
    claims.iter().filter_map(|c| c.metadata.name.clone()).collect()
}

/// Revision by name, for the executor.
pub fn by_name(revs: &[ControllerRevision]) -> HashMap<String, ControllerRevision> {
    revs.iter().filter_map(|r| Some((r.metadata.name.clone()?, r.clone()))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::pods::tests::{pod, ts};
    use k8s_openapi::api::apps::v1::{RollingUpdateStatefulSetStrategy, StatefulSetSpec, StatefulSetUpdateStrategy};
    use k8s_openapi::api::core::v1::{Container, PodSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    const NOW: &str = "2024-05-01T12:00:00Z";

    fn set(replicas: i32, image: &str, parallel: bool) -> StatefulSet {
        StatefulSet {
            metadata: ObjectMeta {
                name: Some("db".into()),
                namespace: Some("ns".into()),
                uid: Some("sts-uid".into()),
                generation: Some(1),
                ..Default::default()
            },
            spec: Some(StatefulSetSpec {
                replicas: Some(replicas),
                service_name: Some("db".into()),
                pod_management_policy: Some(if parallel { "Parallel" } else { "OrderedReady" }.into()),
                selector: LabelSelector {
                    match_labels: Some([("app".into(), "db".into())].into()),
                    ..Default::default()
                },
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some([("app".into(), "db".into())].into()),
                        ..Default::default()
                    }),
                    spec: Some(PodSpec {
                        containers: vec![Container {
                            name: "db".into(),
                            image: Some(image.into()),
                            ..Default::default()
                        }],
                        ..Default::default()
                    }),
                },
                volume_claim_templates: Some(vec![PersistentVolumeClaim {
                    metadata: ObjectMeta { name: Some("data".into()), ..Default::default() },
                    ..Default::default()
                }]),
                update_strategy: Some(StatefulSetUpdateStrategy {
                    type_: Some("RollingUpdate".into()),
                    rolling_update: Some(RollingUpdateStatefulSetStrategy {
                        partition: Some(0),
                        max_unavailable: None,
                    }),
                }),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn first_revision(s: &StatefulSet) -> ControllerRevision {
        let p = plan(&Observed { set: s, pods: vec![], revisions: vec![], claims: vec![], now: ts(NOW) });
        match &p.steps[0] {
            Step::CreateRevision(r) => (**r).clone(),
            other => panic!("expected a revision first, got {other:?}"),
        }
    }

    fn running(s: &StatefulSet, rev: &str, ord: i32) -> Pod {
        let mut p = new_pod(s, &s.spec.as_ref().expect("spec").template, rev, ord);
        let ready = pod("x", "n", "Running", Some("2024-05-01T11:00:00Z"), "2024-05-01T10:00:00Z");
        p.status = ready.status;
        p.metadata.uid = Some(format!("uid-{ord}"));
        p
    }

    fn kinds(p: &Plan) -> Vec<String> {
        p.steps
            .iter()
            .map(|s| match s {
                Step::CreateRevision(_) => "rev+".to_string(),
                Step::UpdateRevision(_) => "rev~".to_string(),
                Step::DeleteRevision(n) => format!("rev-{n}"),
                Step::CreateClaim { claim, .. } => format!("claim+{}", claim.metadata.name.clone().unwrap_or_default()),
                Step::OwnClaim { claim, .. } => format!("own {claim}"),
                Step::CreatePod(p) => format!("pod+{}", p.metadata.name.clone().unwrap_or_default()),
                Step::DeletePod(n) => format!("pod-{n}"),
                Step::UpdateStatus(_) => "status".to_string(),
            })
            .collect()
    }

    #[test]
    fn ordered_ready_creates_one_pod_at_a_time_with_its_claim() {
        let s = set(3, "pg:1", false);
        let p = plan(&Observed { set: &s, pods: vec![], revisions: vec![], claims: vec![], now: ts(NOW) });
        assert_eq!(kinds(&p), ["rev+", "claim+data-db-0", "pod+db-0", "status"]);
        let rev = first_revision(&s);
        let p0 = running(&s, rev.metadata.name.as_deref().unwrap_or_default(), 0);
        let p = plan(&Observed {
            set: &s,
            pods: vec![&p0],
            revisions: vec![rev.clone()],
            claims: vec!["data-db-0".into()],
            now: ts(NOW),
        });
        assert_eq!(kinds(&p), ["claim+data-db-1", "pod+db-1", "status"]);
        // While db-0 is not ready, nothing else happens.
        let mut not_ready = p0.clone();
        not_ready.status = pod("x", "n", "Pending", None, NOW).status;
        let p = plan(&Observed {
            set: &s,
            pods: vec![&not_ready],
            revisions: vec![rev],
            claims: vec!["data-db-0".into()],
            now: ts(NOW),
        });
        assert_eq!(kinds(&p), ["status"]);
    }

    #[test]
    fn parallel_creates_every_missing_pod_at_once() {
        let s = set(3, "pg:1", true);
        let p = plan(&Observed { set: &s, pods: vec![], revisions: vec![], claims: vec![], now: ts(NOW) });
        assert_eq!(
            kinds(&p),
            [
                "rev+",
                "claim+data-db-0",
                "pod+db-0",
                "claim+data-db-1",
                "pod+db-1",
                "claim+data-db-2",
                "pod+db-2",
                "status"
            ]
        );
    }

    #[test]
    fn pods_have_stable_identity_and_storage() {
        let s = set(1, "pg:1", false);
        let p = new_pod(&s, &s.spec.as_ref().expect("spec").template, "db-abc", 0);
        assert_eq!(p.metadata.name.as_deref(), Some("db-0"));
        let l = p.metadata.labels.as_ref().expect("labels");
        assert_eq!(l.get(POD_NAME_LABEL).map(String::as_str), Some("db-0"));
        assert_eq!(l.get(POD_INDEX_LABEL).map(String::as_str), Some("0"));
        assert_eq!(l.get(REVISION_LABEL).map(String::as_str), Some("db-abc"));
        let spec = p.spec.as_ref().expect("spec");
        assert_eq!((spec.hostname.as_deref(), spec.subdomain.as_deref()), (Some("db-0"), Some("db")));
        let v = &spec.volumes.as_ref().expect("volumes")[0];
        assert_eq!(v.persistent_volume_claim.as_ref().map(|c| c.claim_name.as_str()), Some("data-db-0"));
        let claim = &claims_for(&s, 0)[0];
        assert_eq!(claim.metadata.labels.as_ref().and_then(|l| l.get("app")).map(String::as_str), Some("db"));
    }

    #[test]
    fn scale_down_removes_the_highest_ordinal_first() {
        let s3 = set(3, "pg:1", false);
        let rev = first_revision(&s3);
        let rn = rev.metadata.name.clone().unwrap_or_default();
        let pods: Vec<Pod> = (0..3).map(|i| running(&s3, &rn, i)).collect();
        let s1 = set(1, "pg:1", false);
        let p = plan(&Observed {
            set: &s1,
            pods: pods.iter().collect(),
            revisions: vec![rev],
            claims: vec!["data-db-0".into(), "data-db-1".into(), "data-db-2".into()],
            now: ts(NOW),
        });
        assert_eq!(kinds(&p).first().map(String::as_str), Some("pod-db-2"));
        assert!(!kinds(&p).contains(&"pod-db-1".to_string()));
    }

    #[test]
    fn rolling_update_replaces_from_the_highest_ordinal_down_to_the_partition() {
        let s = set(3, "pg:1", false);
        let old = first_revision(&s);
        let on = old.metadata.name.clone().unwrap_or_default();
        let pods: Vec<Pod> = (0..3).map(|i| running(&s, &on, i)).collect();
        let mut s2 = set(3, "pg:2", false);
        s2.status = Some(StatefulSetStatus {
            current_revision: Some(on.clone()),
            current_replicas: Some(3),
            replicas: 3,
            ..Default::default()
        });
        let claims: Vec<String> = (0..3).map(|i| format!("data-db-{i}")).collect();
        let p = plan(&Observed {
            set: &s2,
            pods: pods.iter().collect(),
            revisions: vec![old.clone()],
            claims: claims.clone(),
            now: ts(NOW),
        });
        assert_eq!(kinds(&p)[..2], ["rev+".to_string(), "pod-db-2".to_string()]);
        // With partition 2, only db-2 is updated; once it runs the new revision nothing more.
        if let Some(ru) =
            s2.spec.as_mut().and_then(|s| s.update_strategy.as_mut()).and_then(|u| u.rolling_update.as_mut())
        {
            ru.partition = Some(2);
        }
        let new_rev = match &p.steps[0] {
            Step::CreateRevision(r) => (**r).clone(),
            _ => unreachable!(),
        };
        let nn = new_rev.metadata.name.clone().unwrap_or_default();
        let updated = [running(&s, &on, 0), running(&s, &on, 1), running(&s2, &nn, 2)];
        let p = plan(&Observed {
            set: &s2,
            pods: updated.iter().collect(),
            revisions: vec![old, new_rev],
            claims,
            now: ts(NOW),
        });
        assert!(!kinds(&p).iter().any(|k| k.starts_with("pod-")), "{:?}", kinds(&p));
        let st = match p.steps.last() {
            Some(Step::UpdateStatus(st)) => (**st).clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!((st.current_replicas, st.updated_replicas), (Some(2), Some(1)));
        assert_eq!(st.update_revision.as_deref(), Some(nn.as_str()));
    }

    #[test]
    fn a_settled_set_completes_its_rollout_and_then_needs_nothing() {
        let s = set(2, "pg:1", false);
        let rev = first_revision(&s);
        let rn = rev.metadata.name.clone().unwrap_or_default();
        let pods: Vec<Pod> = (0..2).map(|i| running(&s, &rn, i)).collect();
        let claims = vec!["data-db-0".to_string(), "data-db-1".to_string()];
        let p = plan(&Observed {
            set: &s,
            pods: pods.iter().collect(),
            revisions: vec![rev.clone()],
            claims: claims.clone(),
            now: ts(NOW),
        });
        let st = match p.steps.as_slice() {
            [Step::UpdateStatus(st)] => (**st).clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!((st.replicas, st.ready_replicas, st.current_replicas), (2, Some(2), Some(2)));
        let mut settled = s.clone();
        settled.status = Some(st);
        let p =
            plan(&Observed { set: &settled, pods: pods.iter().collect(), revisions: vec![rev], claims, now: ts(NOW) });
        assert!(p.steps.is_empty(), "{:?}", kinds(&p));
    }

    #[test]
    fn failed_pods_are_deleted_to_be_recreated() {
        let s = set(1, "pg:1", false);
        let rev = first_revision(&s);
        let mut failed = running(&s, rev.metadata.name.as_deref().unwrap_or_default(), 0);
        failed.status = pod("x", "n", "Failed", None, NOW).status;
        let p = plan(&Observed {
            set: &s,
            pods: vec![&failed],
            revisions: vec![rev],
            claims: vec!["data-db-0".into()],
            now: ts(NOW),
        });
        assert_eq!(kinds(&p)[0], "pod-db-0");
    }

    #[test]
    fn ordinals_parse_only_exact_names() {
        let mut p = pod("db-3", "n", "Running", None, NOW);
        assert_eq!(ordinal("db", &p), Some(3));
        p.metadata.name = Some("db-x".into());
        assert_eq!(ordinal("db", &p), None);
        p.metadata.name = Some("dbx-1".into());
        assert_eq!(ordinal("db", &p), None);
    }
}
