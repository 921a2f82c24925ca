//! The Pod strategy (upstream's `pkg/registry/core/pod/strategy.go` with `ValidatePodCreate` and
//! `ValidatePodUpdate`): Pod-only defaults, `status.phase: Pending` and `qosClass` on create, the
//! default priority, and the narrow set of spec fields an update may change.

use super::pod_spec;
use super::quantity::Quantity;
use super::semantic;
use crate::deletion::{DeleteOptions, DeletePlan, Grace};
use crate::field::{FieldError, Path};
use crate::strategy::{ObjectHooks, Strategy};
use k8s_openapi::api::core::v1::{Container, Pod, PodCondition, PodSpec, PodStatus, Toleration};
use serde_json::Value;
use std::collections::BTreeMap;

const UPDATABLE_FIELDS: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// Upstream's `ComputePodQOS`: `Guaranteed`, `Burstable` or `BestEffort`.
pub fn qos_class(spec: &PodSpec) -> &'static str {
    let mut requests: BTreeMap<&str, Quantity> = BTreeMap::new();
    let mut limits: BTreeMap<&str, Quantity> = BTreeMap::new();
    let mut guaranteed = true;
    let all: Vec<&Container> = spec.containers.iter().chain(spec.init_containers.iter().flatten()).collect();
    for c in all {
        let res = c.resources.as_ref();
        for (name, q) in res.and_then(|r| r.requests.as_ref()).into_iter().flatten() {
            let name = name.as_str();
            if !matches!(name, "cpu" | "memory") {
                continue;
            }
            if let Ok(v) = Quantity::parse(&q.0) {
                if v.nanos() > 0 {
                    let sum = requests.get(name).map_or(v, |acc| acc.add(&v));
                    requests.insert(name, sum);
                }
            }
        }
        let mut found = (false, false);
        for (name, q) in res.and_then(|r| r.limits.as_ref()).into_iter().flatten() {
            let name = name.as_str();
            if !matches!(name, "cpu" | "memory") {
                continue;
            }
            if let Ok(v) = Quantity::parse(&q.0) {
                if v.nanos() > 0 {
                    if name == "cpu" {
                        found.0 = true;
                    } else {
                        found.1 = true;
                    }
                    let sum = limits.get(name).map_or(v, |acc| acc.add(&v));
                    limits.insert(name, sum);
                }
            }
        }
        if !(found.0 && found.1) {
            guaranteed = false;
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return "BestEffort";
    }
    if guaranteed && requests.iter().all(|(k, v)| limits.get(k) == Some(v)) && requests.len() == limits.len() {
        return "Guaranteed";
    }
    "Burstable"
}

/// Built-in priority classes the Priority admission plugin knows without a lookup.
fn builtin_priority(class: &str) -> Option<i32> {
    match class {
        "system-node-critical" => Some(2_000_001_000),
        "system-cluster-critical" => Some(2_000_000_000),
        _ => None,
    }
}

/// The Pod strategy.
pub struct PodStrategy;

fn only_added_tolerations(new: &[Toleration], old: &[Toleration], path: &Path) -> Vec<FieldError> {
    for o in old {
        let found = new.iter().any(|n| {
            let mut o = o.clone();
            o.toleration_seconds = n.toleration_seconds;
            semantic::equal(&o, n)
        });
        if !found {
            return vec![FieldError::forbidden(
                path,
                "existing toleration can not be modified except its tolerationSeconds",
            )];
        }
    }
    Vec::new()
}

fn container_updates(new: &[Container], old: &[Container], path: &Path) -> (Vec<FieldError>, bool) {
    if new.len() != old.len() {
        return (vec![FieldError::forbidden(path, "pod updates may not add or remove containers")], true);
    }
    let mut errs = Vec::new();
    for (i, c) in new.iter().enumerate() {
        let image = c.image.as_deref().unwrap_or_default();
        if image.is_empty() {
            errs.push(FieldError::required(path.index(i).child("image"), ""));
        }
        if image.trim() != image {
            errs.push(FieldError::invalid(
                path.index(i).child("image"),
                image,
                "must not have leading or trailing whitespace",
            ));
        }
    }
    (errs, false)
}

/// The second half of upstream's `ValidatePodEphemeralContainersUpdate`: ephemeral containers
/// may only be added; existing ones are never removed or changed (matched by name, since a patch
/// need not keep their order).
fn ephemeral_changes(new: &PodSpec, old: &PodSpec, path: &Path) -> Vec<FieldError> {
    let p = path.child("ephemeralContainers");
    let new_e = new.ephemeral_containers.as_deref().unwrap_or_default();
    let mut errs = Vec::new();
    for o in old.ephemeral_containers.iter().flatten() {
        match new_e.iter().find(|n| n.name == o.name) {
            None => errs.push(FieldError::forbidden(
                &p,
                format!("existing ephemeral containers {:?} may not be removed\n", o.name),
            )),
            Some(n) if !semantic::equal(n, o) => errs.push(FieldError::forbidden(
                &p,
                format!(
                    "existing ephemeral containers {:?} may not be changed\n{}",
                    o.name,
                    semantic::diff_text("core.EphemeralContainer", o, n)
                ),
            )),
            Some(_) => {}
        }
    }
    errs
}

/// Upstream's `CheckGracefulDelete` for pods: a pod bound to a node and not finished waits
/// `requested` seconds (else its `terminationGracePeriodSeconds`, else 30) for the kubelet to
/// stop it; a shorter period than one under way starts again. Unbound or finished pods, and a
/// zero period, go at once.
pub fn graceful_deletion(pod: &Value, requested: Option<i64>) -> Option<Grace> {
    let grace =
        requested.or_else(|| pod.pointer("/spec/terminationGracePeriodSeconds").and_then(Value::as_i64)).unwrap_or(30);
    let bound = pod.pointer("/spec/nodeName").and_then(Value::as_str).is_some_and(|n| !n.is_empty());
    let terminal = matches!(pod.pointer("/status/phase").and_then(Value::as_str), Some("Succeeded" | "Failed"));
    if !bound || terminal || grace <= 0 {
        return None;
    }
    match pod.pointer("/metadata/deletionGracePeriodSeconds").and_then(Value::as_i64) {
        Some(current) if grace >= current => Some(Grace::Continue),
        _ => Some(Grace::Start(grace)),
    }
}

/// Annotation of a static pod's mirror in the API.
const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";

impl Strategy for PodStrategy {
    type Object = Pod;

    fn set_defaults(&self, pod: &mut Pod) {
        let spec = pod.spec.get_or_insert_with(Default::default);
        pod_spec::set_pod_only_defaults(spec);
        pod_spec::set_pod_spec_defaults(spec);
    }

    fn prepare_for_create(&self, pod: &mut Pod) {
        let spec = pod.spec.get_or_insert_with(Default::default);
        if spec.priority.is_none() {
            let class = spec.priority_class_name.as_deref().unwrap_or_default();
            if class.is_empty() {
                spec.priority = Some(0);
            } else {
                spec.priority = builtin_priority(class);
            }
        }
        if spec.priority.is_some() && spec.preemption_policy.is_none() {
            spec.preemption_policy = Some("PreemptLowerPriority".into());
        }
        let mut status =
            PodStatus { phase: Some("Pending".into()), qos_class: Some(qos_class(spec).into()), ..Default::default() };
        if spec.scheduling_gates.as_ref().is_some_and(|g| !g.is_empty()) {
            status.conditions = Some(vec![PodCondition {
                type_: "PodScheduled".into(),
                status: "False".into(),
                reason: Some("SchedulingGated".into()),
                message: Some("Scheduling is blocked due to non-empty scheduling gates".into()),
                ..Default::default()
            }]);
        }
        pod.status = Some(status);
    }

    fn prepare_for_update(&self, new: &mut Pod, old: &Pod) {
        // The Priority admission plugin resolves these on create and keeps them on update.
        let Some(old_spec) = &old.spec else { return };
        let spec = new.spec.get_or_insert_with(Default::default);
        if old_spec.priority.is_some() {
            spec.priority = old_spec.priority;
        }
        if old_spec.preemption_policy.is_some() {
            spec.preemption_policy = old_spec.preemption_policy.clone();
        }
    }

    fn validate(&self, pod: &Pod) -> Vec<FieldError> {
        let spec = pod.spec.clone().unwrap_or_default();
        let path = Path::new("spec");
        let mut errs = pod_spec::validate_pod_spec(&spec, &path);
        if spec.ephemeral_containers.as_ref().is_some_and(|e| !e.is_empty()) {
            errs.push(FieldError::forbidden(path.child("ephemeralContainers"), "cannot be set on create"));
        }
        errs
    }

    fn validate_update(&self, new: &Pod, old: &Pod) -> Vec<FieldError> {
        let new_spec = new.spec.clone().unwrap_or_default();
        let old_spec = old.spec.clone().unwrap_or_default();
        let path = Path::new("spec");
        let mut errs = pod_spec::validate_pod_spec(&new_spec, &path);
        let (e, stop) = container_updates(&new_spec.containers, &old_spec.containers, &path.child("containers"));
        errs.extend(e);
        if stop {
            return errs;
        }
        let (e, stop) = container_updates(
            new_spec.init_containers.as_deref().unwrap_or_default(),
            old_spec.init_containers.as_deref().unwrap_or_default(),
            &path.child("initContainers"),
        );
        errs.extend(e);
        if stop {
            return errs;
        }
        let ads_path = path.child("activeDeadlineSeconds");
        match (new_spec.active_deadline_seconds, old_spec.active_deadline_seconds) {
            (Some(n), _) if !(0..=i64::from(i32::MAX)).contains(&n) => {
                errs.push(FieldError::invalid(&ads_path, n, format!("must be between 0 and {}, inclusive", i32::MAX)));
                return errs;
            }
            (Some(n), Some(o)) if o < n => {
                errs.push(FieldError::invalid(&ads_path, n, "must be less than or equal to previous value"));
                return errs;
            }
            (None, Some(_)) => errs.push(FieldError::invalid(
                &ads_path,
                serde_json::Value::Null,
                "must not update from a positive integer to nil value",
            )),
            _ => {}
        }
        errs.extend(only_added_tolerations(
            new_spec.tolerations.as_deref().unwrap_or_default(),
            old_spec.tolerations.as_deref().unwrap_or_default(),
            &path.child("tolerations"),
        ));
        let old_gates = old_spec.scheduling_gates.clone().unwrap_or_default();
        for g in new_spec.scheduling_gates.iter().flatten() {
            if !old_gates.iter().any(|o| o.name == g.name) {
                errs.push(FieldError::forbidden(
                    path.child("schedulingGates"),
                    "only deletion is allowed, but found new scheduling gate '".to_string() + &g.name + "'",
                ));
            }
        }
        if semantic::equal(&new_spec, &old_spec) {
            return errs;
        }
        let mut munged = new_spec.clone();
        for (c, o) in munged.containers.iter_mut().zip(&old_spec.containers) {
            c.image = o.image.clone();
        }
        for (c, o) in munged.init_containers.iter_mut().flatten().zip(old_spec.init_containers.iter().flatten()) {
            c.image = o.image.clone();
        }
        munged.active_deadline_seconds = old_spec.active_deadline_seconds;
        munged.scheduling_gates = old_spec.scheduling_gates.clone();
        munged.tolerations = old_spec.tolerations.clone();
        if old_spec.termination_grace_period_seconds.is_some_and(|g| g < 0)
            && munged.termination_grace_period_seconds == Some(1)
        {
            munged.termination_grace_period_seconds = old_spec.termination_grace_period_seconds;
        }
        // Binding sets the node name once; after that it may not change.
        if old_spec.node_name.as_deref().unwrap_or_default().is_empty() {
            munged.node_name = old_spec.node_name.clone();
        }
        if !semantic::equal(&munged, &old_spec) {
            errs.push(FieldError::forbidden(
                &path,
                format!("{UPDATABLE_FIELDS}\n{}", semantic::diff_text("core.PodSpec", &old_spec, &munged)),
            ));
        }
        errs
    }

    /// `pods/ephemeralcontainers` (upstream's `ValidatePodEphemeralContainersUpdate`): the
    /// registry kept every other field of the old pod, so the spec is valid as before and the
    /// only change left to judge is that of the ephemeral containers.
    fn validate_subresource_update(&self, subresource: &str, new: &Pod, old: &Pod) -> Vec<FieldError> {
        if subresource != "ephemeralcontainers" {
            return self.validate_update(new, old);
        }
        let new_spec = new.spec.clone().unwrap_or_default();
        let old_spec = old.spec.clone().unwrap_or_default();
        let path = Path::new("spec");
        let mut errs = pod_spec::validate_pod_spec(&new_spec, &path);
        if old.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(MIRROR_POD_ANNOTATION)) {
            return vec![FieldError::forbidden(Path::new(""), "static pods do not support ephemeral containers")];
        }
        errs.extend(ephemeral_changes(&new_spec, &old_spec, &path));
        errs
    }
}

impl ObjectHooks for PodStrategy {
    fn tracks_generation(&self) -> bool {
        true
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ]
    }

    /// An unset `spec.hostNetwork` is `false`.
    fn field_value(&self, obj: &Value, field: &str) -> String {
        let v = crate::selectors::field_string(obj, field).unwrap_or_default();
        if field == "spec.hostNetwork" && v.is_empty() {
            return "false".into();
        }
        v
    }

    /// `pods/ephemeralcontainers` changes only the ephemeral containers (upstream's
    /// `dropNonEphemeralContainerUpdates`).
    fn subresource_field(&self, subresource: &str) -> Option<&'static [&'static str]> {
        (subresource == "ephemeralcontainers").then_some(&["spec", "ephemeralContainers"][..])
    }

    fn on_delete(&self, old: &Value, opts: &DeleteOptions) -> DeletePlan {
        DeletePlan { grace: graceful_deletion(old, opts.grace_period_seconds), ..DeletePlan::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ResourceRequirements;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity as Q;

    fn test_pod(name: &str, image: &str) -> Pod {
        Pod {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container { name: "app".into(), image: Some(image.into()), ..Default::default() }],
                ..Default::default()
            }),
            status: None,
        }
    }

    fn created(image: &str) -> Pod {
        let mut p = test_pod("web", image);
        PodStrategy.set_defaults(&mut p);
        PodStrategy.prepare_for_create(&mut p);
        p
    }

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn create_defaults_status_and_priority() {
        let p = created("nginx");
        let spec = p.spec.as_ref().expect("spec");
        assert_eq!(spec.enable_service_links, Some(true));
        assert_eq!(spec.priority, Some(0));
        assert_eq!(spec.preemption_policy.as_deref(), Some("PreemptLowerPriority"));
        let status = p.status.as_ref().expect("status");
        assert_eq!(status.phase.as_deref(), Some("Pending"));
        assert_eq!(status.qos_class.as_deref(), Some("BestEffort"));
        assert!(PodStrategy.validate(&p).is_empty());
    }

    #[test]
    fn qos_follows_requests_and_limits() {
        let mut p = test_pod("web", "nginx");
        p.spec.as_mut().expect("spec").containers[0].resources = Some(ResourceRequirements {
            limits: Some(BTreeMap::from([("cpu".to_string(), Q("1".into())), ("memory".to_string(), Q("1Gi".into()))])),
            ..Default::default()
        });
        PodStrategy.set_defaults(&mut p);
        assert_eq!(qos_class(p.spec.as_ref().expect("spec")), "Guaranteed");
        if let Some(r) = p.spec.as_mut().and_then(|s| s.containers[0].resources.as_mut()) {
            r.requests = Some(BTreeMap::from([("cpu".to_string(), Q("500m".into()))]));
        }
        assert_eq!(qos_class(p.spec.as_ref().expect("spec")), "Burstable");
    }

    #[test]
    fn update_may_change_image_but_not_other_fields() {
        let old = created("nginx:1");
        let mut new = old.clone();
        new.spec.as_mut().expect("spec").containers[0].image = Some("nginx:2".into());
        assert!(PodStrategy.validate_update(&new, &old).is_empty());
        new.spec.as_mut().expect("spec").restart_policy = Some("Never".into());
        let m = messages(&PodStrategy.validate_update(&new, &old));
        assert_eq!(m.len(), 1);
        assert!(m[0]
            .starts_with("spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`"));
        assert!(m[0].contains("restartPolicy"));
    }

    #[test]
    fn replace_without_priority_keeps_the_resolved_priority() {
        let old = created("nginx");
        let mut replaced = test_pod("web", "nginx");
        PodStrategy.set_defaults(&mut replaced);
        PodStrategy.prepare_for_update(&mut replaced, &old);
        assert_eq!(replaced.spec.as_ref().and_then(|s| s.priority), Some(0));
        assert!(PodStrategy.validate_update(&replaced, &old).is_empty());
    }

    #[test]
    fn node_name_is_set_once() {
        let old = created("nginx");
        let mut bound = old.clone();
        bound.spec.as_mut().expect("spec").node_name = Some("node-1".into());
        assert!(PodStrategy.validate_update(&bound, &old).is_empty());
        let mut moved = bound.clone();
        moved.spec.as_mut().expect("spec").node_name = Some("node-2".into());
        let m = messages(&PodStrategy.validate_update(&moved, &bound));
        assert!(m[0].starts_with("spec: Forbidden: pod updates may not change fields other than"));
    }

    #[test]
    fn containers_may_not_be_added_and_tolerations_only_added() {
        let old = created("nginx");
        let mut more = old.clone();
        let extra = more.spec.as_ref().expect("spec").containers[0].clone();
        more.spec.as_mut().expect("spec").containers.push(Container { name: "two".into(), ..extra });
        assert_eq!(
            messages(&PodStrategy.validate_update(&more, &old)),
            ["spec.containers: Forbidden: pod updates may not add or remove containers"]
        );
        let mut tol = old.clone();
        tol.spec.as_mut().expect("spec").tolerations =
            Some(vec![Toleration { operator: Some("Exists".into()), ..Default::default() }]);
        assert!(PodStrategy.validate_update(&tol, &old).is_empty());
        let removed = old.clone();
        let m = messages(&PodStrategy.validate_update(&removed, &tol));
        assert_eq!(
            m,
            ["spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"]
        );
    }

    #[test]
    fn ephemeral_containers_may_only_be_added_through_their_subresource() {
        use k8s_openapi::api::core::v1::{ContainerPort, EphemeralContainer, Probe, VolumeMount};
        const SUB: &str = "ephemeralcontainers";
        let old = created("nginx");
        let mut debugged = old.clone();
        debugged.spec.as_mut().expect("spec").ephemeral_containers = Some(vec![EphemeralContainer {
            name: "debugger".into(),
            image: Some("busybox".into()),
            target_container_name: Some("app".into()),
            ..Default::default()
        }]);
        PodStrategy.set_defaults(&mut debugged);
        assert!(PodStrategy.validate_subresource_update(SUB, &debugged, &old).is_empty());
        // The pod itself may not add them (upstream's ValidatePodUpdate compares the whole spec).
        let m = messages(&PodStrategy.validate_update(&debugged, &old));
        assert_eq!(m.len(), 1, "{m:?}");
        assert!(m[0].starts_with("spec: Forbidden: pod updates may not change fields other than"), "{m:?}");
        let mut bad = old.clone();
        bad.spec.as_mut().expect("spec").ephemeral_containers = Some(vec![EphemeralContainer {
            name: "app".into(),
            image: Some("busybox".into()),
            ports: Some(vec![ContainerPort { container_port: 80, ..Default::default() }]),
            readiness_probe: Some(Probe::default()),
            volume_mounts: Some(vec![VolumeMount {
                name: "v".into(),
                mount_path: "/v".into(),
                sub_path: Some("x".into()),
                ..Default::default()
            }]),
            target_container_name: Some("nope".into()),
            ..Default::default()
        }]);
        PodStrategy.set_defaults(&mut bad);
        assert_eq!(
            messages(&PodStrategy.validate_subresource_update(SUB, &bad, &old)),
            [
                "spec.ephemeralContainers[0].volumeMounts[0].name: Not found: \"v\"",
                "spec.ephemeralContainers[0].name: Duplicate value: \"app\"",
                "spec.ephemeralContainers[0].targetContainerName: Not found: \"nope\"",
                "spec.ephemeralContainers[0].ports: Forbidden: cannot be set for an Ephemeral Container",
                "spec.ephemeralContainers[0].readinessProbe: Forbidden: cannot be set for an Ephemeral Container",
                "spec.ephemeralContainers[0].volumeMounts[0].subPath: Forbidden: cannot be set for an Ephemeral Container",
            ]
        );
        let m = messages(&PodStrategy.validate_subresource_update(SUB, &old, &debugged));
        assert_eq!(
            m,
            ["spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debugger\" may not be removed\n"]
        );
        let mut changed = debugged.clone();
        if let Some(e) = changed.spec.as_mut().and_then(|s| s.ephemeral_containers.as_mut()) {
            e[0].image = Some("busybox:2".into());
        }
        let m = messages(&PodStrategy.validate_subresource_update(SUB, &changed, &debugged));
        assert_eq!(m.len(), 1, "{m:?}");
        assert!(
            m[0].starts_with(
                "spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debugger\" may not be changed\n"
            ),
            "{m:?}"
        );
    }

    #[test]
    fn active_deadline_may_only_shrink() {
        let mut old = created("nginx");
        old.spec.as_mut().expect("spec").active_deadline_seconds = Some(100);
        let mut new = old.clone();
        new.spec.as_mut().expect("spec").active_deadline_seconds = Some(50);
        assert!(PodStrategy.validate_update(&new, &old).is_empty());
        new.spec.as_mut().expect("spec").active_deadline_seconds = Some(200);
        assert_eq!(
            messages(&PodStrategy.validate_update(&new, &old)),
            ["spec.activeDeadlineSeconds: Invalid value: 200: must be less than or equal to previous value"]
        );
    }

    fn pod(node: &str, phase: &str, grace: Option<i64>, deleting_with: Option<i64>) -> Value {
        let mut p =
            serde_json::json!({"metadata": {"name": "web"}, "spec": {"nodeName": node}, "status": {"phase": phase}});
        if let Some(g) = grace {
            p["spec"]["terminationGracePeriodSeconds"] = g.into();
        }
        if let Some(g) = deleting_with {
            p["metadata"]["deletionGracePeriodSeconds"] = g.into();
            p["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z".into();
        }
        p
    }

    #[test]
    fn a_running_bound_pod_is_deleted_gracefully_with_its_own_period_unless_one_is_asked() {
        assert_eq!(graceful_deletion(&pod("n1", "Running", None, None), None), Some(Grace::Start(30)));
        assert_eq!(graceful_deletion(&pod("n1", "Running", Some(5), None), None), Some(Grace::Start(5)));
        assert_eq!(graceful_deletion(&pod("n1", "Running", Some(5), None), Some(2)), Some(Grace::Start(2)));
    }

    #[test]
    fn unbound_finished_or_zero_grace_pods_go_at_once() {
        assert_eq!(graceful_deletion(&pod("", "Pending", None, None), None), None);
        assert_eq!(graceful_deletion(&pod("n1", "Succeeded", None, None), None), None);
        assert_eq!(graceful_deletion(&pod("n1", "Failed", None, None), None), None);
        assert_eq!(graceful_deletion(&pod("n1", "Running", None, None), Some(0)), None);
        assert_eq!(graceful_deletion(&pod("n1", "Running", None, Some(30)), Some(0)), None);
    }

    #[test]
    fn a_second_delete_only_shortens_a_grace_period_under_way() {
        let deleting = pod("n1", "Running", None, Some(30));
        assert_eq!(graceful_deletion(&deleting, Some(10)), Some(Grace::Start(10)));
        assert_eq!(graceful_deletion(&deleting, Some(30)), Some(Grace::Continue));
        assert_eq!(graceful_deletion(&deleting, None), Some(Grace::Continue));
    }

    #[test]
    fn only_the_ephemeral_containers_change_through_their_subresource() {
        let s = &crate::resources::find("", "v1", "pods").expect("pods").strategy;
        assert_eq!(s.subresource_field("ephemeralcontainers"), Some(&["spec", "ephemeralContainers"][..]));
        assert_eq!(s.subresource_field("resize"), None);
    }

    #[test]
    fn the_pod_strategy_plans_graceful_deletion_through_the_table() {
        let s = &crate::resources::find("", "v1", "pods").expect("pods").strategy;
        let opts = DeleteOptions { grace_period_seconds: Some(7), ..DeleteOptions::default() };
        let plan = s.on_delete(&pod("n1", "Running", None, None), &opts);
        assert_eq!(plan, DeletePlan { grace: Some(Grace::Start(7)), ..DeletePlan::default() });
    }
}
