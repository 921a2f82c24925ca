//! The deployment controller's decisions as a pure function: [`plan`] takes a Deployment, the
//! ReplicaSets it owns, whether pods of old ReplicaSets still run, and `now`, and returns the
//! ordered [`Step`]s upstream's `syncDeployment` would perform (create/update/delete
//! ReplicaSets, events, the revision annotation, status writes) plus when to look again.
//! Later steps assume earlier ones succeeded; the executor stops at the first failure.

use super::util::*;
use crate::workloads::{hash, owner, time};
use jiff::Timestamp;
use k1s_api::selectors;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::time::Duration;

/// One thing to do.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Create this ReplicaSet; on success record "Scaled up replica set X from 0 to N" if N > 0.
    CreateReplicaSet(ReplicaSet),
    /// Replace this ReplicaSet; on success record `event` (`ScalingReplicaSet`).
    UpdateReplicaSet { rs: ReplicaSet, event: Option<String> },
    /// Delete the (old, empty) ReplicaSet.
    DeleteReplicaSet(String),
    /// Record an event about the deployment.
    Event { warning: bool, reason: String, message: String },
    /// Set the deployment's `deployment.kubernetes.io/revision` annotation.
    SetRevision(String),
    /// Write the deployment's status.
    UpdateStatus(DeploymentStatus),
}

/// The decisions of one sync.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    pub steps: Vec<Step>,
    /// Look again after this long (progress deadline checks).
    pub requeue_after: Option<Duration>,
}

struct Sim<'a> {
    d: Deployment,
    rss: Vec<ReplicaSet>,
    pods: &'a [&'a Pod],
    now: Timestamp,
    plan: Plan,
}

/// What one sync of `d` does, given the ReplicaSets it controls and the pods of those.
pub fn plan(d: &Deployment, owned: &[ReplicaSet], pods: &[&Pod], now: Timestamp) -> Plan {
    let mut s = Sim { d: d.clone(), rss: owned.to_vec(), pods, now, plan: Plan::default() };
    s.sync_deployment();
    s.plan
}

impl Sim<'_> {
    fn status(&self) -> DeploymentStatus {
        self.d.status.clone().unwrap_or_default()
    }

    fn push(&mut self, step: Step) {
        self.plan.steps.push(step);
    }

    fn sync_deployment(&mut self) {
        let sel = self.d.spec.as_ref().map(|s| s.selector.clone()).unwrap_or_default();
        if selectors::is_empty(&sel) {
            self.push(Step::Event {
                warning: true,
                reason: "SelectingAll".into(),
                message: "This deployment is selecting all pods. A non-empty selector is required.".into(),
            });
            let gen = self.d.metadata.generation.unwrap_or(0);
            let mut status = self.status();
            if status.observed_generation.unwrap_or(0) < gen {
                status.observed_generation = Some(gen);
                self.push(Step::UpdateStatus(status));
            }
            return;
        }
        if self.d.metadata.deletion_timestamp.is_some() {
            let (new, olds) = self.all_replica_sets(false);
            self.sync_status(new, &olds);
            return;
        }
        self.check_paused_conditions();
        let paused = self.d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false);
        if paused || self.is_scaling_event() {
            self.sync();
            return;
        }
        if is_rolling(&self.d) {
            self.rollout_rolling();
        } else {
            self.rollout_recreate();
        }
    }

    fn check_paused_conditions(&mut self) {
        if !has_progress_deadline(&self.d) {
            return;
        }
        let mut status = self.status();
        let reason = condition(&status, "Progressing").and_then(|c| c.reason.clone());
        if reason.as_deref() == Some(REASON_TIMED_OUT) {
            return;
        }
        let paused_cond = reason.as_deref() == Some(REASON_PAUSED);
        let paused = self.d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false);
        let cond = if paused && !paused_cond {
            new_condition("Progressing", "Unknown", REASON_PAUSED, "Deployment is paused", self.now)
        } else if !paused && paused_cond {
            new_condition("Progressing", "Unknown", REASON_RESUMED, "Deployment is resumed", self.now)
        } else {
            return;
        };
        set_condition(&mut status, cond);
        self.d.status = Some(status.clone());
        self.push(Step::UpdateStatus(status));
    }

    /// Indices of the new ReplicaSet (if any) and the old ones.
    fn split(&self) -> (Option<usize>, Vec<usize>) {
        let new = find_new(&self.d, &self.rss);
        let olds = (0..self.rss.len()).filter(|i| Some(*i) != new).collect();
        (new, olds)
    }

    /// `getAllReplicaSetsAndSyncRevision`.
    fn all_replica_sets(&mut self, create: bool) -> (Option<usize>, Vec<usize>) {
        let (new, olds) = self.split();
        let max_old = max_revision(olds.iter().map(|&i| &self.rss[i]));
        let new_revision = max_old + 1;
        if let Some(i) = new {
            let mut rs = self.rss[i].clone();
            let annotations_changed = set_new_rs_annotations(&self.d, &mut rs, new_revision, true);
            let min_ready = self.d.spec.as_ref().and_then(|s| s.min_ready_seconds);
            let rs_min_ready = rs.spec.as_ref().and_then(|s| s.min_ready_seconds);
            if annotations_changed || min_ready.unwrap_or(0) != rs_min_ready.unwrap_or(0) {
                rs.spec.get_or_insert_with(Default::default).min_ready_seconds = min_ready;
                self.rss[i] = rs.clone();
                self.push(Step::UpdateReplicaSet { rs, event: None });
                return (new, olds);
            }
            let rev = rs.metadata.annotations.as_ref().and_then(|a| a.get(REVISION)).cloned().unwrap_or_default();
            let mut needs_update = false;
            if set_deployment_revision(&mut self.d, &rev) {
                self.push(Step::SetRevision(rev));
                needs_update = true;
            }
            let mut status = self.status();
            if has_progress_deadline(&self.d) && condition(&status, "Progressing").is_none() {
                let msg = format!("Found new replica set {:?}", rs.metadata.name.clone().unwrap_or_default());
                set_condition(&mut status, new_condition("Progressing", "True", REASON_FOUND_NEW_RS, &msg, self.now));
                self.d.status = Some(status.clone());
                needs_update = true;
            }
            if needs_update {
                self.push(Step::UpdateStatus(status));
            }
            return (new, olds);
        }
        if !create {
            return (None, olds);
        }
        let rs = self.new_replica_set(new_revision, &olds);
        let name = rs.metadata.name.clone().unwrap_or_default();
        self.push(Step::CreateReplicaSet(rs.clone()));
        self.rss.push(rs);
        let idx = self.rss.len() - 1;
        let mut needs_update = false;
        if set_deployment_revision(&mut self.d, &new_revision.to_string()) {
            self.push(Step::SetRevision(new_revision.to_string()));
            needs_update = true;
        }
        let mut status = self.status();
        if has_progress_deadline(&self.d) {
            let msg = format!("Created new replica set {name:?}");
            set_condition(&mut status, new_condition("Progressing", "True", REASON_NEW_RS_CREATED, &msg, self.now));
            self.d.status = Some(status.clone());
            needs_update = true;
        }
        if needs_update {
            self.push(Step::UpdateStatus(status));
        }
        (Some(idx), olds)
    }

    fn new_replica_set(&self, revision: i64, olds: &[usize]) -> ReplicaSet {
        let spec = self.d.spec.clone().unwrap_or_default();
        let mut template = spec.template.clone();
        let collisions = self.d.status.as_ref().and_then(|s| s.collision_count);
        let pod_hash = hash::pod_template_hash(&template, collisions);
        template
            .metadata
            .get_or_insert_with(Default::default)
            .labels
            .get_or_insert_with(Default::default)
            .insert(POD_TEMPLATE_HASH.into(), pod_hash.clone());
        let mut sel = spec.selector.clone();
        sel.match_labels.get_or_insert_with(Default::default).insert(POD_TEMPLATE_HASH.into(), pod_hash.clone());
        let labels = template.metadata.as_ref().and_then(|m| m.labels.clone());
        let mut rs = ReplicaSet {
            metadata: ObjectMeta {
                name: Some(format!("{}-{}", self.d.metadata.name.clone().unwrap_or_default(), pod_hash)),
                namespace: self.d.metadata.namespace.clone(),
                owner_references: Some(vec![owner::controller_ref(&self.d)]),
                labels,
                ..Default::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(0),
                min_ready_seconds: spec.min_ready_seconds,
                selector: sel,
                template: Some(template),
            }),
            status: None,
        };
        let all: Vec<&ReplicaSet> = olds.iter().map(|&i| &self.rss[i]).chain(std::iter::once(&rs)).collect();
        let n = new_rs_new_replicas(&self.d, &all, &rs);
        set_rs_replicas(&mut rs, n);
        set_new_rs_annotations(&self.d, &mut rs, revision, false);
        rs
    }

    fn is_scaling_event(&mut self) -> bool {
        let (new, olds) = self.all_replica_sets(false);
        let replicas = d_replicas(&self.d);
        new.into_iter().chain(olds).filter(|&i| rs_replicas(&self.rss[i]) > 0).any(|i| {
            self.rss[i]
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(DESIRED_REPLICAS))
                .and_then(|v| v.parse::<i32>().ok())
                .is_some_and(|desired| desired != replicas)
        })
    }

    /// `sync`: scaling events and paused deployments.
    fn sync(&mut self) {
        let (new, olds) = self.all_replica_sets(false);
        self.scale(new, &olds);
        let paused = self.d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false);
        if paused {
            self.cleanup(&olds);
        }
        self.sync_status(new, &olds);
    }

    fn active(&self, idx: impl IntoIterator<Item = usize>) -> Vec<usize> {
        idx.into_iter().filter(|&i| rs_replicas(&self.rss[i]) > 0).collect()
    }

    fn scale(&mut self, new: Option<usize>, olds: &[usize]) {
        let replicas = d_replicas(&self.d);
        // FindActiveOrLatest.
        let mut by_newest = olds.to_vec();
        by_newest.sort_by(|&a, &b| by_creation(&self.rss[b], &self.rss[a]));
        let active = self.active(by_newest.iter().copied().chain(new));
        let active_or_latest = match active.len() {
            0 => new.or_else(|| by_newest.first().copied()),
            1 => Some(active[0]),
            _ => None,
        };
        if let Some(i) = active_or_latest {
            if rs_replicas(&self.rss[i]) != replicas {
                self.scale_and_record(i, replicas);
            }
            return;
        }
        if is_saturated(&self.d, new.map(|i| &self.rss[i])) {
            for i in self.active(olds.iter().copied()) {
                self.scale_and_record(i, 0);
            }
            return;
        }
        if !is_rolling(&self.d) {
            return;
        }
        let mut all = self.active(olds.iter().copied().chain(new));
        let all_replicas = replica_count(all.iter().map(|&i| &self.rss[i]));
        let allowed = if replicas > 0 { replicas + max_surge(&self.d) } else { 0 };
        let to_add = allowed - all_replicas;
        let op = match to_add.cmp(&0) {
            std::cmp::Ordering::Greater => {
                all.sort_by(|&a, &b| by_size_newer(&self.rss[a], &self.rss[b]));
                "up"
            }
            std::cmp::Ordering::Less => {
                all.sort_by(|&a, &b| by_size_older(&self.rss[a], &self.rss[b]));
                "down"
            }
            std::cmp::Ordering::Equal => "",
        };
        let mut added = 0;
        let mut sizes: Vec<i32> = Vec::with_capacity(all.len());
        for &i in &all {
            let rs = &self.rss[i];
            if to_add != 0 {
                let p = proportion(rs, &self.d, to_add, added);
                sizes.push(rs_replicas(rs) + p);
                added += p;
            } else {
                sizes.push(rs_replicas(rs));
            }
        }
        for (k, &i) in all.iter().enumerate() {
            let mut size = sizes[k];
            if k == 0 && to_add != 0 {
                size = (size + to_add - added).max(0);
            }
            self.scale_rs(i, size, op);
        }
    }

    fn scale_and_record(&mut self, i: usize, to: i32) -> bool {
        let from = rs_replicas(&self.rss[i]);
        if from == to {
            return false;
        }
        self.scale_rs(i, to, if from < to { "up" } else { "down" })
    }

    /// `scaleReplicaSet`: whether the size changed.
    fn scale_rs(&mut self, i: usize, to: i32, op: &str) -> bool {
        let replicas = d_replicas(&self.d);
        let max = replicas + max_surge(&self.d);
        let from = rs_replicas(&self.rss[i]);
        let size_changed = from != to;
        if !size_changed && !replicas_annotations_need_update(&self.rss[i], replicas, max) {
            return false;
        }
        let mut rs = self.rss[i].clone();
        set_rs_replicas(&mut rs, to);
        set_replicas_annotations(&mut rs, replicas, max);
        let event = size_changed.then(|| {
            format!("Scaled {op} replica set {} from {from} to {to}", rs.metadata.name.clone().unwrap_or_default())
        });
        self.rss[i] = rs.clone();
        self.push(Step::UpdateReplicaSet { rs, event });
        size_changed
    }

    /// `cleanupDeployment`: delete the oldest empty ReplicaSets beyond the history limit.
    fn cleanup(&mut self, olds: &[usize]) {
        let Some(limit) = history_limit(&self.d) else { return };
        let mut alive: Vec<usize> =
            olds.iter().copied().filter(|&i| self.rss[i].metadata.deletion_timestamp.is_none()).collect();
        let diff = i64::try_from(alive.len()).unwrap_or(0) - i64::from(limit);
        if diff <= 0 {
            return;
        }
        alive.sort_by(|&a, &b| by_revision(&self.rss[a], &self.rss[b]));
        for &i in alive.iter().take(usize::try_from(diff).unwrap_or(0)) {
            let rs = &self.rss[i];
            let st = rs.status.clone().unwrap_or_default();
            if st.replicas != 0
                || rs_replicas(rs) != 0
                || rs.metadata.generation.unwrap_or(0) > st.observed_generation.unwrap_or(0)
                || rs.metadata.deletion_timestamp.is_some()
            {
                continue;
            }
            let name = rs.metadata.name.clone().unwrap_or_default();
            self.push(Step::DeleteReplicaSet(name));
        }
    }

    fn calculate_status(&self, new: Option<usize>, olds: &[usize]) -> DeploymentStatus {
        let all: Vec<&ReplicaSet> = olds.iter().chain(new.iter()).map(|&i| &self.rss[i]).collect();
        let available = available_count(all.iter().copied());
        let total = replica_count(all.iter().copied());
        let current = self.status();
        let mut status = DeploymentStatus {
            observed_generation: self.d.metadata.generation,
            replicas: Some(actual_count(all.iter().copied())),
            updated_replicas: Some(actual_count(new.map(|i| &self.rss[i]))),
            ready_replicas: Some(ready_count(all.iter().copied())),
            available_replicas: Some(available),
            unavailable_replicas: Some((total - available).max(0)),
            terminating_replicas: terminating_count(all.iter().copied()),
            collision_count: current.collision_count,
            conditions: current.conditions.clone(),
        };
        let cond = if available >= d_replicas(&self.d) - max_unavailable(&self.d) {
            new_condition("Available", "True", REASON_MIN_AVAILABLE, "Deployment has minimum availability.", self.now)
        } else {
            new_condition(
                "Available",
                "False",
                REASON_MIN_UNAVAILABLE,
                "Deployment does not have minimum availability.",
                self.now,
            )
        };
        set_condition(&mut status, cond);
        status
    }

    fn sync_status(&mut self, new: Option<usize>, olds: &[usize]) {
        let status = self.calculate_status(new, olds);
        if status != self.status() {
            self.d.status = Some(status.clone());
            self.push(Step::UpdateStatus(status));
        }
    }

    /// `syncRolloutStatus`: status plus the `Progressing` condition and the deadline requeue.
    fn sync_rollout_status(&mut self, new: Option<usize>, olds: &[usize]) {
        let mut status = self.calculate_status(new, olds);
        let deadline = has_progress_deadline(&self.d);
        if !deadline {
            remove_condition(&mut status, "Progressing");
        }
        let current = condition(&self.status(), "Progressing").cloned();
        let new_name = new.map(|i| self.rss[i].metadata.name.clone().unwrap_or_default());
        let d_name = self.d.metadata.name.clone().unwrap_or_default();
        let is_complete = status.replicas == status.updated_replicas
            && current.as_ref().is_some_and(|c| c.reason.as_deref() == Some(REASON_NEW_RS_AVAILABLE));
        if deadline && !is_complete {
            if complete(&self.d, &status) {
                let msg = match &new_name {
                    Some(n) => format!("ReplicaSet {n:?} has successfully progressed."),
                    None => format!("Deployment {d_name:?} has successfully progressed."),
                };
                set_condition(
                    &mut status,
                    new_condition("Progressing", "True", REASON_NEW_RS_AVAILABLE, &msg, self.now),
                );
            } else if progressing(&self.d, &status) {
                let msg = match &new_name {
                    Some(n) => format!("ReplicaSet {n:?} is progressing."),
                    None => format!("Deployment {d_name:?} is progressing."),
                };
                let mut c = new_condition("Progressing", "True", REASON_RS_UPDATED, &msg, self.now);
                if let Some(cur) = &current {
                    if cur.status == "True" {
                        c.last_transition_time = cur.last_transition_time.clone();
                    }
                    remove_condition(&mut status, "Progressing");
                }
                set_condition(&mut status, c);
            } else if timed_out(&self.d, &status, self.now) {
                let msg = match &new_name {
                    Some(n) => format!("ReplicaSet {n:?} has timed out progressing."),
                    None => format!("Deployment {d_name:?} has timed out progressing."),
                };
                set_condition(&mut status, new_condition("Progressing", "False", REASON_TIMED_OUT, &msg, self.now));
            }
        }
        // ReplicaFailure conditions of the ReplicaSets (the new one's first).
        let failure = new.into_iter().chain(olds.iter().copied()).find_map(|i| {
            self.rss[i].status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "ReplicaFailure").cloned()
        });
        match failure {
            Some(c) => set_condition(
                &mut status,
                k8s_openapi::api::apps::v1::DeploymentCondition {
                    type_: c.type_,
                    status: c.status,
                    last_update_time: c.last_transition_time.clone(),
                    last_transition_time: c.last_transition_time,
                    reason: c.reason,
                    message: c.message,
                },
            ),
            None => remove_condition(&mut status, "ReplicaFailure"),
        }
        if status == self.status() {
            self.plan.requeue_after = self.requeue_stuck(&status);
            return;
        }
        self.d.status = Some(status.clone());
        self.push(Step::UpdateStatus(status));
    }

    /// `requeueStuckDeployment`: when to check the progress deadline again.
    fn requeue_stuck(&self, new_status: &DeploymentStatus) -> Option<Duration> {
        let current = condition(&self.status(), "Progressing")?.clone();
        if !has_progress_deadline(&self.d) {
            return None;
        }
        if complete(&self.d, new_status) || current.reason.as_deref() == Some(REASON_TIMED_OUT) {
            return None;
        }
        let deadline = i64::from(self.d.spec.as_ref().and_then(|s| s.progress_deadline_seconds).unwrap_or(0));
        let from = current.last_update_time?.0;
        let after = time::between(self.now, time::add_secs(from, deadline));
        if after < jiff::SignedDuration::from_secs(1) {
            return Some(Duration::from_secs(1));
        }
        Some(time::to_std(after) + Duration::from_secs(1))
    }

    fn rollout_rolling(&mut self) {
        let (new, olds) = self.all_replica_sets(true);
        let Some(new_i) = new else { return };
        if self.reconcile_new(new_i, &olds) {
            self.sync_rollout_status(new, &olds);
            return;
        }
        let active_olds = self.active(olds.iter().copied());
        if self.reconcile_olds(new_i, &olds, active_olds) {
            self.sync_rollout_status(new, &olds);
            return;
        }
        if complete(&self.d, &self.status()) {
            self.cleanup(&olds);
        }
        self.sync_rollout_status(new, &olds);
    }

    fn reconcile_new(&mut self, new_i: usize, olds: &[usize]) -> bool {
        let replicas = d_replicas(&self.d);
        let cur = rs_replicas(&self.rss[new_i]);
        if cur == replicas {
            return false;
        }
        if cur > replicas {
            return self.scale_and_record(new_i, replicas);
        }
        let all: Vec<&ReplicaSet> = olds.iter().chain(std::iter::once(&new_i)).map(|&i| &self.rss[i]).collect();
        let n = new_rs_new_replicas(&self.d, &all, &self.rss[new_i]);
        self.scale_and_record(new_i, n)
    }

    fn reconcile_olds(&mut self, new_i: usize, olds: &[usize], mut active_olds: Vec<usize>) -> bool {
        let old_count = replica_count(active_olds.iter().map(|&i| &self.rss[i]));
        if old_count == 0 {
            return false;
        }
        let all_count = replica_count(olds.iter().chain(std::iter::once(&new_i)).map(|&i| &self.rss[i]));
        let min_available = d_replicas(&self.d) - max_unavailable(&self.d);
        let new_rs = &self.rss[new_i];
        let new_unavailable =
            rs_replicas(new_rs) - new_rs.status.as_ref().and_then(|s| s.available_replicas).unwrap_or(0);
        let max_scaled_down = all_count - min_available - new_unavailable;
        if max_scaled_down <= 0 {
            return false;
        }
        // cleanupUnhealthyReplicas: scale down old ReplicaSets' unavailable pods first.
        active_olds.sort_by(|&a, &b| by_creation(&self.rss[a], &self.rss[b]));
        let mut cleaned = 0;
        for &i in &active_olds {
            if cleaned >= max_scaled_down {
                break;
            }
            let rs = &self.rss[i];
            let replicas = rs_replicas(rs);
            let available = rs.status.as_ref().and_then(|s| s.available_replicas).unwrap_or(0);
            if replicas == 0 || replicas == available {
                continue;
            }
            let n = (max_scaled_down - cleaned).min(replicas - available);
            self.scale_and_record(i, replicas - n);
            cleaned += n;
        }
        // scaleDownOldReplicaSetsForRollingUpdate.
        let all: Vec<usize> = active_olds.iter().copied().chain(std::iter::once(new_i)).collect();
        let available = available_count(all.iter().map(|&i| &self.rss[i]));
        let mut scaled = 0;
        if available > min_available {
            let total = available - min_available;
            for &i in &active_olds {
                if scaled >= total {
                    break;
                }
                let replicas = rs_replicas(&self.rss[i]);
                if replicas == 0 {
                    continue;
                }
                let n = replicas.min(total - scaled);
                self.scale_and_record(i, replicas - n);
                scaled += n;
            }
        }
        cleaned + scaled > 0
    }

    fn old_pods_running(&self, new: Option<usize>, olds: &[usize]) -> bool {
        if actual_count(olds.iter().map(|&i| &self.rss[i])) > 0 {
            return true;
        }
        let new_uid = new.and_then(|i| self.rss[i].metadata.uid.clone());
        let old_uids: Vec<String> = olds.iter().filter_map(|&i| self.rss[i].metadata.uid.clone()).collect();
        self.pods.iter().any(|p| {
            let Some(r) = owner::controller_of(&p.metadata) else { return false };
            Some(&r.uid) != new_uid.as_ref()
                && old_uids.contains(&r.uid)
                && !matches!(crate::workloads::pods::pod_phase(p), "Failed" | "Succeeded")
        })
    }

    fn rollout_recreate(&mut self) {
        let (mut new, mut olds) = self.all_replica_sets(false);
        let mut scaled_down = false;
        for i in self.active(olds.iter().copied()) {
            if self.scale_and_record(i, 0) {
                scaled_down = true;
            }
        }
        if scaled_down || self.old_pods_running(new, &olds) {
            self.sync_rollout_status(new, &olds);
            return;
        }
        if new.is_none() {
            (new, olds) = self.all_replica_sets(true);
        }
        if let Some(i) = new {
            let replicas = d_replicas(&self.d);
            self.scale_and_record(i, replicas);
        }
        if complete(&self.d, &self.status()) {
            self.cleanup(&olds);
        }
        self.sync_rollout_status(new, &olds);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{DeploymentSpec, DeploymentStrategy, ReplicaSetStatus, RollingUpdateDeployment};
    use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    const NOW: &str = "2024-05-01T12:00:00Z";

    fn now() -> Timestamp {
        NOW.parse().expect("ts")
    }

    fn template(image: &str) -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: Some(ObjectMeta { labels: Some([("app".into(), "web".into())].into()), ..Default::default() }),
            spec: Some(PodSpec {
                containers: vec![Container { name: "c".into(), image: Some(image.into()), ..Default::default() }],
                ..Default::default()
            }),
        }
    }

    fn deployment(replicas: i32, image: &str, strategy: &str) -> Deployment {
        Deployment {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("ns".into()),
                uid: Some("d-uid".into()),
                generation: Some(1),
                ..Default::default()
            },
            spec: Some(DeploymentSpec {
                replicas: Some(replicas),
                selector: LabelSelector {
                    match_labels: Some([("app".into(), "web".into())].into()),
                    ..Default::default()
                },
                template: template(image),
                strategy: Some(DeploymentStrategy {
                    type_: Some(strategy.into()),
                    rolling_update: (strategy == "RollingUpdate").then(|| RollingUpdateDeployment {
                        max_surge: Some(IntOrString::String("25%".into())),
                        max_unavailable: Some(IntOrString::String("25%".into())),
                    }),
                }),
                revision_history_limit: Some(10),
                progress_deadline_seconds: Some(600),
                ..Default::default()
            }),
            status: None,
        }
    }

    /// The ReplicaSet a plan created, as the API would return it, with `available` pods.
    fn materialize(rs: &ReplicaSet, uid: &str, created: &str, available: i32) -> ReplicaSet {
        let mut rs = rs.clone();
        rs.metadata.uid = Some(uid.into());
        rs.metadata.generation = Some(1);
        rs.metadata.creation_timestamp = Some(Time(created.parse().expect("ts")));
        rs.status = Some(ReplicaSetStatus {
            replicas: rs_replicas(&rs),
            ready_replicas: Some(available),
            available_replicas: Some(available),
            observed_generation: Some(1),
            terminating_replicas: Some(0),
            ..Default::default()
        });
        rs
    }

    fn created(plan: &Plan) -> Vec<&ReplicaSet> {
        plan.steps.iter().filter_map(|s| if let Step::CreateReplicaSet(rs) = s { Some(rs) } else { None }).collect()
    }

    fn events(plan: &Plan) -> Vec<String> {
        plan.steps
            .iter()
            .filter_map(|s| match s {
                Step::UpdateReplicaSet { event: Some(e), .. } => Some(e.clone()),
                _ => None,
            })
            .collect()
    }

    fn last_status(plan: &Plan) -> DeploymentStatus {
        plan.steps
            .iter()
            .rev()
            .find_map(|s| if let Step::UpdateStatus(st) = s { Some(st.clone()) } else { None })
            .expect("a status update")
    }

    #[test]
    fn a_new_deployment_creates_one_replica_set_named_by_template_hash() {
        let d = deployment(3, "nginx:1", "RollingUpdate");
        let plan = plan(&d, &[], &[], now());
        let rs = created(&plan);
        assert_eq!(rs.len(), 1);
        let rs = rs[0];
        let hash = hash::pod_template_hash(&template("nginx:1"), None);
        assert_eq!(rs.metadata.name.as_deref(), Some(format!("web-{hash}").as_str()));
        assert_eq!(rs_replicas(rs), 3);
        let sel = &rs.spec.as_ref().expect("spec").selector;
        assert_eq!(sel.match_labels.as_ref().and_then(|l| l.get(POD_TEMPLATE_HASH)), Some(&hash));
        let a = rs.metadata.annotations.as_ref().expect("annotations");
        assert_eq!(a.get(REVISION).map(String::as_str), Some("1"));
        assert_eq!(a.get(DESIRED_REPLICAS).map(String::as_str), Some("3"));
        assert_eq!(a.get(MAX_REPLICAS).map(String::as_str), Some("4"));
        assert!(plan.steps.contains(&Step::SetRevision("1".into())));
        let st = last_status(&plan);
        assert_eq!(condition(&st, "Progressing").and_then(|c| c.reason.as_deref()), Some(REASON_NEW_RS_CREATED));
    }

    #[test]
    fn a_settled_deployment_reports_complete_and_needs_nothing_else() {
        let d = deployment(3, "nginx:1", "RollingUpdate");
        let first = plan(&d, &[], &[], now());
        let rs = materialize(created(&first)[0], "rs1", "2024-05-01T11:00:00Z", 3);
        let mut d2 = d.clone();
        d2.metadata.annotations = Some([(REVISION.to_string(), "1".to_string())].into());
        let plan2 = plan(&d2, std::slice::from_ref(&rs), &[], now());
        let st = last_status(&plan2);
        assert_eq!((st.replicas, st.updated_replicas, st.available_replicas), (Some(3), Some(3), Some(3)));
        assert_eq!(st.unavailable_replicas, Some(0));
        assert_eq!(condition(&st, "Available").map(|c| c.status.as_str()), Some("True"));
        assert_eq!(condition(&st, "Progressing").and_then(|c| c.reason.as_deref()), Some(REASON_NEW_RS_AVAILABLE));
        // Feeding the written status back in: nothing more to do.
        d2.status = Some(st);
        let plan3 = plan(&d2, &[rs], &[], now());
        assert!(plan3.steps.is_empty(), "{:?}", plan3.steps);
    }

    #[test]
    fn changing_the_image_surges_a_new_replica_set_then_scales_the_old_one_down() {
        let d1 = deployment(4, "nginx:1", "RollingUpdate");
        let old = materialize(created(&plan(&d1, &[], &[], now()))[0], "rs1", "2024-05-01T11:00:00Z", 4);
        let d2 = deployment(4, "nginx:2", "RollingUpdate");
        // 25% of 4: surge 1, unavailable 1. The new ReplicaSet starts at 1 (4 + 1 - 4).
        let p = plan(&d2, std::slice::from_ref(&old), &[], now());
        let new = created(&p);
        assert_eq!(new.len(), 1);
        assert_eq!(rs_replicas(new[0]), 1);
        assert_eq!(new[0].metadata.annotations.as_ref().and_then(|a| a.get(REVISION)).map(String::as_str), Some("2"));
        // Next sync: nothing new is available yet; the old one may lose one (maxUnavailable).
        let new = materialize(new[0], "rs2", "2024-05-01T11:30:00Z", 0);
        let p = plan(&d2, &[old.clone(), new.clone()], &[], now());
        assert_eq!(
            events(&p),
            [format!("Scaled down replica set {} from 4 to 3", old.metadata.name.clone().unwrap_or_default())]
        );
    }

    #[test]
    fn max_unavailable_zero_waits_for_new_pods_before_scaling_down() {
        let mut d1 = deployment(2, "nginx:1", "RollingUpdate");
        let ru =
            d1.spec.as_mut().and_then(|s| s.strategy.as_mut()).and_then(|s| s.rolling_update.as_mut()).expect("ru");
        ru.max_unavailable = Some(IntOrString::Int(0));
        ru.max_surge = Some(IntOrString::Int(1));
        let old = materialize(created(&plan(&d1, &[], &[], now()))[0], "rs1", "2024-05-01T11:00:00Z", 2);
        let mut d2 = d1.clone();
        d2.spec.as_mut().expect("spec").template = template("nginx:2");
        let new = materialize(
            created(&plan(&d2, std::slice::from_ref(&old), &[], now()))[0],
            "rs2",
            "2024-05-01T11:30:00Z",
            0,
        );
        assert_eq!(rs_replicas(&new), 1);
        let p = plan(&d2, &[old.clone(), new.clone()], &[], now());
        assert!(events(&p).is_empty(), "{:?}", events(&p));
        // Once the new pod is available, one old pod goes.
        let new_ready = materialize(&new, "rs2", "2024-05-01T11:30:00Z", 1);
        let p = plan(&d2, &[old.clone(), new_ready], &[], now());
        assert_eq!(events(&p).len(), 1);
        assert!(events(&p)[0].contains("from 2 to 1"));
    }

    #[test]
    fn scaling_to_zero_and_back_scales_the_only_replica_set() {
        let d = deployment(3, "nginx:1", "RollingUpdate");
        let rs = materialize(created(&plan(&d, &[], &[], now()))[0], "rs1", "2024-05-01T11:00:00Z", 3);
        let mut zero = d.clone();
        zero.spec.as_mut().expect("spec").replicas = Some(0);
        let p = plan(&zero, std::slice::from_ref(&rs), &[], now());
        let name = rs.metadata.name.clone().unwrap_or_default();
        assert_eq!(events(&p), [format!("Scaled down replica set {name} from 3 to 0")]);
        let mut two = d.clone();
        two.spec.as_mut().expect("spec").replicas = Some(2);
        let mut empty = rs.clone();
        set_rs_replicas(&mut empty, 0);
        set_replicas_annotations(&mut empty, 0, 0);
        let p = plan(&two, &[empty], &[], now());
        assert_eq!(events(&p), [format!("Scaled up replica set {name} from 0 to 2")]);
    }

    #[test]
    fn recreate_scales_old_down_and_waits_for_old_pods_to_go() {
        let d1 = deployment(2, "nginx:1", "Recreate");
        let old = materialize(created(&plan(&d1, &[], &[], now()))[0], "rs1", "2024-05-01T11:00:00Z", 2);
        let d2 = deployment(2, "nginx:2", "Recreate");
        let p = plan(&d2, std::slice::from_ref(&old), &[], now());
        assert!(created(&p).is_empty());
        assert!(events(&p)[0].contains("from 2 to 0"));
        // Old ReplicaSet at zero but a pod still runs: wait.
        let mut drained = old.clone();
        set_rs_replicas(&mut drained, 0);
        if let Some(s) = drained.status.as_mut() {
            s.replicas = 0;
        }
        let mut running = crate::workloads::pods::tests::pod("p", "n", "Running", None, NOW);
        running.metadata.owner_references =
            Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                uid: "rs1".into(),
                controller: Some(true),
                ..Default::default()
            }]);
        let p = plan(&d2, std::slice::from_ref(&drained), &[&running], now());
        assert!(created(&p).is_empty());
        // Pods gone: the new ReplicaSet is created at full size.
        let p = plan(&d2, &[drained], &[], now());
        assert_eq!(created(&p).len(), 1);
        assert_eq!(rs_replicas(created(&p)[0]), 2);
    }

    #[test]
    fn history_beyond_the_limit_is_cleaned_up_oldest_first() {
        let mut d = deployment(1, "nginx:9", "RollingUpdate");
        d.spec.as_mut().expect("spec").revision_history_limit = Some(1);
        let mut all = Vec::new();
        for (i, image) in ["nginx:1", "nginx:2", "nginx:3"].iter().enumerate() {
            let mut rs = materialize(
                created(&plan(&deployment(1, image, "RollingUpdate"), &[], &[], now()))[0],
                &format!("old{i}"),
                &format!("2024-05-01T0{i}:00:00Z"),
                0,
            );
            set_rs_replicas(&mut rs, 0);
            if let Some(s) = rs.status.as_mut() {
                s.replicas = 0;
            }
            rs.metadata.annotations.get_or_insert_with(Default::default).insert(REVISION.into(), (i + 1).to_string());
            all.push(rs);
        }
        let mut cur = materialize(created(&plan(&d, &[], &[], now()))[0], "cur", "2024-05-01T10:00:00Z", 1);
        cur.metadata.annotations.get_or_insert_with(Default::default).insert(REVISION.into(), "4".into());
        all.push(cur);
        d.metadata.annotations = Some([(REVISION.to_string(), "4".to_string())].into());
        let mut status = DeploymentStatus {
            observed_generation: Some(1),
            replicas: Some(1),
            updated_replicas: Some(1),
            ready_replicas: Some(1),
            available_replicas: Some(1),
            unavailable_replicas: Some(0),
            terminating_replicas: Some(0),
            ..Default::default()
        };
        set_condition(&mut status, new_condition("Progressing", "True", REASON_NEW_RS_AVAILABLE, "done", now()));
        d.status = Some(status);
        let p = plan(&d, &all, &[], now());
        let deleted: Vec<&Step> = p.steps.iter().filter(|s| matches!(s, Step::DeleteReplicaSet(_))).collect();
        assert_eq!(
            deleted,
            [
                &Step::DeleteReplicaSet(all[0].metadata.name.clone().unwrap_or_default()),
                &Step::DeleteReplicaSet(all[1].metadata.name.clone().unwrap_or_default())
            ]
        );
    }

    #[test]
    fn rollout_undo_reuses_the_old_replica_set_with_a_new_revision() {
        let d1 = deployment(2, "nginx:1", "RollingUpdate");
        let mut rs1 = materialize(created(&plan(&d1, &[], &[], now()))[0], "rs1", "2024-05-01T10:00:00Z", 0);
        set_rs_replicas(&mut rs1, 0);
        let d2 = deployment(2, "nginx:2", "RollingUpdate");
        let mut rs2 = materialize(
            created(&plan(&d2, std::slice::from_ref(&rs1), &[], now()))[0],
            "rs2",
            "2024-05-01T11:00:00Z",
            2,
        );
        set_rs_replicas(&mut rs2, 2);
        // kubectl rollout undo writes nginx:1's template back.
        let p = plan(&d1, &[rs1.clone(), rs2], &[], now());
        assert!(created(&p).is_empty());
        let updated = p.steps.iter().find_map(|s| match s {
            Step::UpdateReplicaSet { rs, event: None } => Some(rs),
            _ => None,
        });
        let updated = updated.expect("revision bump of the old ReplicaSet");
        assert_eq!(updated.metadata.name, rs1.metadata.name);
        let a = updated.metadata.annotations.as_ref().expect("annotations");
        assert_eq!(a.get(REVISION).map(String::as_str), Some("3"));
        assert_eq!(a.get(REVISION_HISTORY).map(String::as_str), Some("1"));
    }

    #[test]
    fn a_stalled_rollout_times_out_after_the_progress_deadline() {
        let d1 = deployment(1, "nginx:1", "RollingUpdate");
        let rs = materialize(created(&plan(&d1, &[], &[], now()))[0], "rs1", "2024-05-01T10:00:00Z", 0);
        let mut d = d1.clone();
        d.metadata.annotations = Some([(REVISION.to_string(), "1".to_string())].into());
        let mut status = DeploymentStatus {
            observed_generation: Some(1),
            replicas: Some(1),
            updated_replicas: Some(1),
            ready_replicas: Some(0),
            available_replicas: Some(0),
            unavailable_replicas: Some(1),
            terminating_replicas: Some(0),
            ..Default::default()
        };
        let started = time::add_secs(now(), -700);
        set_condition(&mut status, new_condition("Progressing", "True", REASON_NEW_RS_CREATED, "x", started));
        set_condition(
            &mut status,
            new_condition(
                "Available",
                "False",
                REASON_MIN_UNAVAILABLE,
                "Deployment does not have minimum availability.",
                started,
            ),
        );
        d.status = Some(status.clone());
        let p = plan(&d, std::slice::from_ref(&rs), &[], now());
        let st = last_status(&p);
        assert_eq!(condition(&st, "Progressing").map(|c| c.status.as_str()), Some("False"));
        assert_eq!(condition(&st, "Progressing").and_then(|c| c.reason.as_deref()), Some(REASON_TIMED_OUT));
        // Within the deadline: no write, but a requeue for when it would expire.
        let recent = time::add_secs(now(), -100);
        let mut fresh = status.clone();
        fresh.conditions = None;
        set_condition(&mut fresh, new_condition("Progressing", "True", REASON_NEW_RS_CREATED, "x", recent));
        set_condition(
            &mut fresh,
            new_condition(
                "Available",
                "False",
                REASON_MIN_UNAVAILABLE,
                "Deployment does not have minimum availability.",
                recent,
            ),
        );
        d.status = Some(fresh);
        let p = plan(&d, &[rs], &[], now());
        assert!(p.steps.is_empty(), "{:?}", p.steps);
        assert_eq!(p.requeue_after, Some(Duration::from_secs(501)));
    }

    #[test]
    fn pausing_sets_an_unknown_progressing_condition_and_stops_rollouts() {
        let d1 = deployment(2, "nginx:1", "RollingUpdate");
        let rs = materialize(created(&plan(&d1, &[], &[], now()))[0], "rs1", "2024-05-01T10:00:00Z", 2);
        let mut d2 = deployment(2, "nginx:2", "RollingUpdate");
        d2.spec.as_mut().expect("spec").paused = Some(true);
        let p = plan(&d2, &[rs], &[], now());
        assert!(created(&p).is_empty());
        let st = last_status(&p);
        assert_eq!(condition(&st, "Progressing").and_then(|c| c.reason.as_deref()), Some(REASON_PAUSED));
    }

    #[test]
    fn an_empty_selector_is_refused_with_a_warning() {
        let mut d = deployment(1, "nginx:1", "RollingUpdate");
        d.spec.as_mut().expect("spec").selector = LabelSelector::default();
        let p = plan(&d, &[], &[], now());
        assert!(matches!(&p.steps[0], Step::Event { warning: true, reason, .. } if reason == "SelectingAll"));
        assert!(created(&p).is_empty());
    }
}
