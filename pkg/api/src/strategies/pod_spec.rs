//! Pod specs and pod templates, shared by Pods, PodTemplates and every workload's template:
//! `SetDefaults_PodSpec` (and the generated defaults below it), the Pod-only defaults of
//! `SetDefaults_Pod`, and `ValidatePodSpec` / `ValidatePodTemplateSpec`.

use super::containers::{self, PodContext};
use super::formats;
use super::volumes;
use crate::field::{FieldError, Path};
use crate::meta;
use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec, Toleration};

/// Restart policies, in upstream's error order.
pub const RESTART_POLICIES: &[&str] = &["Always", "OnFailure", "Never"];
const DNS_POLICIES: &[&str] = &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"];
const TAINT_EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

fn set_if_empty(field: &mut Option<String>, value: &str) {
    if field.as_deref().unwrap_or_default().is_empty() {
        *field = Some(value.to_string());
    }
}

/// `SetDefaults_PodSpec` plus container, volume and resource defaults: what every pod spec,
/// including templates, gets.
pub fn set_pod_spec_defaults(spec: &mut PodSpec) {
    set_if_empty(&mut spec.dns_policy, "ClusterFirst");
    set_if_empty(&mut spec.restart_policy, "Always");
    spec.security_context.get_or_insert_with(Default::default);
    spec.termination_grace_period_seconds.get_or_insert(30);
    set_if_empty(&mut spec.scheduler_name, "default-scheduler");
    // The deprecated `serviceAccount` mirrors `serviceAccountName` (v1 conversion).
    match (
        spec.service_account_name.as_deref().unwrap_or_default(),
        spec.service_account.as_deref().unwrap_or_default(),
    ) {
        ("", "") => {}
        ("", old) => spec.service_account_name = Some(old.to_string()),
        (name, _) => spec.service_account = Some(name.to_string()),
    }
    for v in spec.volumes.iter_mut().flatten() {
        volumes::set_volume_defaults(v);
    }
    for c in spec.init_containers.iter_mut().flatten().chain(spec.containers.iter_mut()) {
        containers::set_container_defaults(c);
    }
    for e in spec.ephemeral_containers.iter_mut().flatten() {
        let mut c = containers::ephemeral_as_container(e);
        containers::set_container_defaults(&mut c);
        e.image_pull_policy = c.image_pull_policy;
        e.termination_message_path = c.termination_message_path;
        e.termination_message_policy = c.termination_message_policy;
        e.ports = c.ports;
        e.env = c.env;
        e.resources = c.resources;
    }
    if let Some(o) = spec.overhead.as_mut() {
        super::quantity::canonicalize_resource_list(o);
    }
}

/// `SetDefaults_Pod`: defaults that only Pods (not templates) get.
pub fn set_pod_only_defaults(spec: &mut PodSpec) {
    for c in spec.containers.iter_mut().chain(spec.init_containers.iter_mut().flatten()) {
        containers::default_requests_to_limits(c);
    }
    spec.enable_service_links.get_or_insert(true);
    if spec.host_network.unwrap_or_default() {
        for c in spec.containers.iter_mut().chain(spec.init_containers.iter_mut().flatten()) {
            for p in c.ports.iter_mut().flatten() {
                if p.host_port.unwrap_or_default() == 0 {
                    p.host_port = Some(p.container_port);
                }
            }
        }
    }
}

/// Template defaults: the spec always exists and gets [`set_pod_spec_defaults`].
pub fn set_template_defaults(t: &mut PodTemplateSpec) {
    set_pod_spec_defaults(t.spec.get_or_insert_with(Default::default));
}

/// `ValidateTolerations`.
pub fn validate_tolerations(tolerations: &[Toleration], path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, t) in tolerations.iter().enumerate() {
        let p = path.index(i);
        let key = t.key.as_deref().unwrap_or_default();
        let op = t.operator.as_deref().unwrap_or_default();
        let effect = t.effect.as_deref().unwrap_or_default();
        let value = t.value.as_deref().unwrap_or_default();
        if !key.is_empty() {
            errs.extend(formats::validate_qualified_name(key, &p.child("key")));
        }
        if key.is_empty() && op != "Exists" {
            errs.push(FieldError::invalid(
                p.child("operator"),
                op,
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        if t.toleration_seconds.is_some() && effect != "NoExecute" {
            errs.push(FieldError::invalid(
                p.child("effect"),
                effect,
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        match op {
            "" | "Equal" => {
                let msgs = meta::label_value(value);
                if !msgs.is_empty() {
                    errs.push(FieldError::invalid(p.child("operator"), value, msgs.join(";")));
                }
            }
            "Exists" => {
                if !value.is_empty() {
                    errs.push(FieldError::invalid(
                        p.child("operator"),
                        formats::to_value(t),
                        "value must be empty when `operator` is 'Exists'",
                    ));
                }
            }
            other => errs.push(FieldError::not_supported(p.child("operator"), other, &["Equal", "Exists"])),
        }
        if !effect.is_empty() && !TAINT_EFFECTS.contains(&effect) {
            errs.push(FieldError::not_supported(p.child("effect"), effect, TAINT_EFFECTS));
        }
    }
    errs
}

fn validate_dns(spec: &PodSpec, path: &Path) -> Vec<FieldError> {
    let policy = spec.dns_policy.as_deref().unwrap_or_default();
    let mut errs = formats::validate_enum(Some(policy), DNS_POLICIES, &path.child("dnsPolicy"));
    if policy == "None" {
        match &spec.dns_config {
            None => errs.push(FieldError::required(
                path.child("dnsConfig"),
                "must provide `dnsConfig` when `dnsPolicy` is None",
            )),
            Some(c) if c.nameservers.as_ref().is_none_or(Vec::is_empty) => errs.push(FieldError::required(
                path.child("dnsConfig").child("nameservers"),
                "must provide at least one DNS nameserver when `dnsPolicy` is None",
            )),
            Some(_) => {}
        }
    }
    if let Some(c) = &spec.dns_config {
        let np = path.child("dnsConfig").child("nameservers");
        let ns = c.nameservers.as_deref().unwrap_or_default();
        if ns.len() > 3 {
            errs.push(FieldError::invalid(&np, formats::to_value(ns), "must not have more than 3 nameservers"));
        }
        for (i, n) in ns.iter().enumerate() {
            errs.extend(formats::validate_ip(n, &np.index(i)));
        }
    }
    errs
}

/// `ValidatePodSpec`.
pub fn validate_pod_spec(spec: &PodSpec, path: &Path) -> Vec<FieldError> {
    let (volume_names, mut errs) =
        volumes::validate_volumes(spec.volumes.as_deref().unwrap_or_default(), &path.child("volumes"));
    let ctx = PodContext {
        volumes: &volume_names,
        grace_period: spec.termination_grace_period_seconds,
        host_network: spec.host_network.unwrap_or_default(),
    };
    errs.extend(containers::validate_containers(&spec.containers, &ctx, &path.child("containers")));
    errs.extend(containers::validate_init_containers(
        spec.init_containers.as_deref().unwrap_or_default(),
        &spec.containers,
        &ctx,
        &path.child("initContainers"),
    ));
    errs.extend(containers::validate_ephemeral_containers(
        spec.ephemeral_containers.as_deref().unwrap_or_default(),
        &spec.containers,
        spec.init_containers.as_deref().unwrap_or_default(),
        &ctx,
        &path.child("ephemeralContainers"),
    ));
    errs.extend(formats::validate_enum(spec.restart_policy.as_deref(), RESTART_POLICIES, &path.child("restartPolicy")));
    errs.extend(validate_dns(spec, path));
    errs.extend(formats::validate_labels(spec.node_selector.as_ref(), &path.child("nodeSelector")));
    for (name, value) in [
        ("serviceAccountName", spec.service_account_name.as_deref()),
        ("nodeName", spec.node_name.as_deref()),
        ("priorityClassName", spec.priority_class_name.as_deref()),
    ] {
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            errs.extend(formats::validate_dns_subdomain(v, &path.child(name)));
        }
    }
    if let Some(ads) = spec.active_deadline_seconds {
        if !(1..=i64::from(i32::MAX)).contains(&ads) {
            errs.push(FieldError::invalid(
                path.child("activeDeadlineSeconds"),
                ads,
                format!("must be between 1 and {}, inclusive", i32::MAX),
            ));
        }
    }
    for (name, value) in [("hostname", spec.hostname.as_deref()), ("subdomain", spec.subdomain.as_deref())] {
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            errs.extend(formats::validate_dns_label(v, &path.child(name)));
        }
    }
    errs.extend(validate_tolerations(spec.tolerations.as_deref().unwrap_or_default(), &path.child("tolerations")));
    if let Some(p) = spec.preemption_policy.as_deref() {
        const POLICIES: &[&str] = &["PreemptLowerPriority", "Never"];
        if !POLICIES.contains(&p) {
            errs.push(FieldError::not_supported(path.child("preemptionPolicy"), p, POLICIES));
        }
    }
    for (i, g) in spec.scheduling_gates.iter().flatten().enumerate() {
        errs.extend(formats::validate_qualified_name(&g.name, &path.child("schedulingGates").index(i)));
    }
    if let Some(rc) = spec.runtime_class_name.as_deref() {
        errs.extend(formats::validate_dns_subdomain(rc, &path.child("runtimeClassName")));
    }
    errs
}

/// `ValidatePodTemplateSpec`: template labels and annotations (at `<path>.labels`, as upstream),
/// the pod spec, and no ephemeral containers.
pub fn validate_pod_template_spec(t: &PodTemplateSpec, path: &Path) -> Vec<FieldError> {
    let meta = t.metadata.clone().unwrap_or_default();
    let mut errs = formats::validate_labels(meta.labels.as_ref(), &path.child("labels"));
    errs.extend(formats::validate_annotations(meta.annotations.as_ref(), &path.child("annotations")));
    let spec = t.spec.clone().unwrap_or_default();
    errs.extend(validate_pod_spec(&spec, &path.child("spec")));
    if spec.ephemeral_containers.as_ref().is_some_and(|e| !e.is_empty()) {
        errs.push(FieldError::forbidden(
            path.child("spec").child("ephemeralContainers"),
            "ephemeral containers not allowed in pod template",
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Container;

    pub(crate) fn spec(image: &str) -> PodSpec {
        PodSpec {
            containers: vec![Container { name: "app".into(), image: Some(image.into()), ..Default::default() }],
            ..Default::default()
        }
    }

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn spec_defaults_match_upstream() {
        let mut s = spec("nginx");
        s.service_account_name = Some("builder".into());
        set_pod_spec_defaults(&mut s);
        assert_eq!(s.restart_policy.as_deref(), Some("Always"));
        assert_eq!(s.dns_policy.as_deref(), Some("ClusterFirst"));
        assert_eq!(s.termination_grace_period_seconds, Some(30));
        assert_eq!(s.scheduler_name.as_deref(), Some("default-scheduler"));
        assert!(s.security_context.is_some());
        assert_eq!(s.service_account.as_deref(), Some("builder"));
        assert!(s.enable_service_links.is_none());
        set_pod_only_defaults(&mut s);
        assert_eq!(s.enable_service_links, Some(true));
        assert!(validate_pod_spec(&s, &Path::new("spec")).is_empty());
    }

    #[test]
    fn enums_are_checked_with_not_supported() {
        let mut s = spec("nginx");
        set_pod_spec_defaults(&mut s);
        s.restart_policy = Some("Sometimes".into());
        s.dns_policy = Some("Magic".into());
        s.containers[0].image_pull_policy = Some("Maybe".into());
        let m = messages(&validate_pod_spec(&s, &Path::new("spec")));
        assert!(m.contains(&"spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"".to_string()));
        assert!(m.contains(&"spec.dnsPolicy: Unsupported value: \"Magic\": supported values: \"ClusterFirstWithHostNet\", \"ClusterFirst\", \"Default\", \"None\"".to_string()));
        assert!(m.contains(&"spec.containers[0].imagePullPolicy: Unsupported value: \"Maybe\": supported values: \"Always\", \"IfNotPresent\", \"Never\"".to_string()));
    }

    #[test]
    fn tolerations_follow_upstream_rules() {
        let t = vec![
            Toleration { operator: Some("Equal".into()), value: Some("x".into()), ..Default::default() },
            Toleration {
                key: Some("k".into()),
                operator: Some("Exists".into()),
                value: Some("v".into()),
                ..Default::default()
            },
            Toleration {
                key: Some("k".into()),
                toleration_seconds: Some(5),
                effect: Some("NoSchedule".into()),
                ..Default::default()
            },
        ];
        let m = messages(&validate_tolerations(&t, &Path::new("spec").child("tolerations")));
        assert!(m[0].starts_with(
            "spec.tolerations[0].operator: Invalid value: \"Equal\": operator must be Exists when `key` is empty"
        ));
        assert!(m.iter().any(|s| s.starts_with("spec.tolerations[1].operator: Invalid value")
            && s.ends_with("value must be empty when `operator` is 'Exists'")));
        assert!(m.contains(&"spec.tolerations[2].effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set".to_string()));
    }

    #[test]
    fn template_labels_are_checked_at_template_labels() {
        let mut t = PodTemplateSpec {
            metadata: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                labels: Some([("app".to_string(), "-bad-".to_string())].into()),
                ..Default::default()
            }),
            spec: Some(spec("nginx")),
        };
        set_template_defaults(&mut t);
        let m = messages(&validate_pod_template_spec(&t, &Path::new("spec").child("template")));
        assert_eq!(m.len(), 1);
        assert!(m[0].starts_with("spec.template.labels[app]: Invalid value: \"-bad-\""));
    }
}
