//! Strategies for the core resources, as upstream's `pkg/apis/core/v1/defaults.go`,
//! `pkg/apis/core/validation` and `pkg/registry/core/*/strategy.go`. Pods, Services and
//! persistent volumes have their own modules; the smaller kinds live here.

use super::apps::validate_replicated_template;
use super::formats;
use super::limits::{LimitRangeStrategy, ResourceQuotaStrategy};
use super::persistent_volumes::{PersistentVolumeClaimStrategy, PersistentVolumeStrategy};
use super::pod::PodStrategy;
use super::pod_spec;
use super::ports;
use super::quantity::{self, Quantity};
use super::service::ServiceStrategy;
use crate::deletion::{DeleteOptions, DeletePlan};
use crate::field::{FieldError, Path};
use crate::meta;
use crate::strategy::{DynStrategy, NameRule, ObjectHooks, Strategy, Typed};
use k8s_openapi::api::core::v1::{
    ConfigMap, EndpointAddress, Endpoints, Event, Namespace, NamespaceStatus, Node, ObjectReference, PodTemplate,
    ReplicationController, ReplicationControllerStatus, Secret, ServiceAccount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

pub fn config_map() -> Box<dyn DynStrategy> {
    Box::new(Typed(ConfigMapStrategy))
}

pub fn endpoints() -> Box<dyn DynStrategy> {
    Box::new(Typed(EndpointsStrategy))
}

pub fn event() -> Box<dyn DynStrategy> {
    Box::new(Typed(EventStrategy))
}

pub fn limit_range() -> Box<dyn DynStrategy> {
    Box::new(Typed(LimitRangeStrategy))
}

pub fn namespace() -> Box<dyn DynStrategy> {
    Box::new(Typed(NamespaceStrategy))
}

pub fn node() -> Box<dyn DynStrategy> {
    Box::new(Typed(NodeStrategy))
}

pub fn persistent_volume_claim() -> Box<dyn DynStrategy> {
    Box::new(Typed(PersistentVolumeClaimStrategy))
}

pub fn persistent_volume() -> Box<dyn DynStrategy> {
    Box::new(Typed(PersistentVolumeStrategy))
}

pub fn pod() -> Box<dyn DynStrategy> {
    Box::new(Typed(PodStrategy))
}

pub fn pod_template() -> Box<dyn DynStrategy> {
    Box::new(Typed(PodTemplateStrategy))
}

pub fn replication_controller() -> Box<dyn DynStrategy> {
    Box::new(Typed(ReplicationControllerStrategy))
}

pub fn resource_quota() -> Box<dyn DynStrategy> {
    Box::new(Typed(ResourceQuotaStrategy))
}

pub fn secret() -> Box<dyn DynStrategy> {
    Box::new(Typed(SecretStrategy))
}

pub fn service_account() -> Box<dyn DynStrategy> {
    Box::new(Typed(ServiceAccountStrategy))
}

pub fn service() -> Box<dyn DynStrategy> {
    Box::new(Typed(ServiceStrategy))
}

/// Upstream's `MaxSecretSize`, also the ConfigMap limit.
pub const MAX_DATA_SIZE: usize = 1024 * 1024;
/// The label every namespace carries with its own name.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

fn immutable_data_errors(
    old_immutable: Option<bool>,
    new_immutable: Option<bool>,
    data_changed: &[(&str, bool)],
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if old_immutable != Some(true) {
        return errs;
    }
    if new_immutable != Some(true) {
        errs.push(FieldError::forbidden("immutable", "field is immutable when `immutable` is set"));
    }
    for (field, changed) in data_changed {
        if *changed {
            errs.push(FieldError::forbidden(*field, "field is immutable when `immutable` is set"));
        }
    }
    errs
}

/// ConfigMap: valid keys, no key in both `data` and `binaryData`, at most 1 MiB.
pub struct ConfigMapStrategy;

impl Strategy for ConfigMapStrategy {
    type Object = ConfigMap;
    // No create/update preparation (set back to true when adding one).
    const PREPARES: bool = false;

    fn validate(&self, cm: &ConfigMap) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let mut total = 0;
        let data = cm.data.clone().unwrap_or_default();
        let binary = cm.binary_data.clone().unwrap_or_default();
        for (k, v) in &data {
            let p = Path::new("data").key(k);
            errs.extend(formats::each_invalid(&p, k, formats::config_map_key(k)));
            if binary.contains_key(k) {
                errs.push(FieldError::invalid(&p, k.as_str(), "duplicate of key present in binaryData"));
            }
            total += v.len();
        }
        for (k, v) in &binary {
            let p = Path::new("binaryData").key(k);
            errs.extend(formats::each_invalid(&p, k, formats::config_map_key(k)));
            if data.contains_key(k) {
                errs.push(FieldError::invalid(&p, k.as_str(), "duplicate of key present in data"));
            }
            total += v.0.len();
        }
        if total > MAX_DATA_SIZE {
            errs.push(FieldError::too_long("", MAX_DATA_SIZE));
        }
        errs
    }

    fn validate_update(&self, new: &ConfigMap, old: &ConfigMap) -> Vec<FieldError> {
        let mut errs = immutable_data_errors(
            old.immutable,
            new.immutable,
            &[
                ("data", !super::semantic::equal(&new.data, &old.data)),
                ("binaryData", !super::semantic::equal(&new.binary_data, &old.binary_data)),
            ],
        );
        errs.extend(self.validate(new));
        errs
    }
}

impl ObjectHooks for ConfigMapStrategy {}

/// Secret: type `Opaque`, `stringData` folded into `data`, per-type required keys.
pub struct SecretStrategy;

impl Strategy for SecretStrategy {
    type Object = Secret;

    // No create/update preparation (set back to true when adding one).
    const PREPARES: bool = false;

    fn set_defaults(&self, s: &mut Secret) {
        if s.type_.as_deref().unwrap_or_default().is_empty() {
            s.type_ = Some("Opaque".into());
        }
        // v1 conversion: stringData is write-only and overrides data.
        if let Some(string_data) = s.string_data.take() {
            let data = s.data.get_or_insert_with(BTreeMap::new);
            for (k, v) in string_data {
                data.insert(k, ByteString(v.into_bytes()));
            }
        }
    }

    fn validate(&self, s: &Secret) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let data = s.data.clone().unwrap_or_default();
        let data_path = Path::new("data");
        let mut total = 0;
        for (k, v) in &data {
            errs.extend(formats::each_invalid(&data_path.key(k), k, formats::config_map_key(k)));
            total += v.0.len();
        }
        if total > MAX_DATA_SIZE {
            errs.push(FieldError::too_long(&data_path, MAX_DATA_SIZE));
        }
        let required = |key: &str, errs: &mut Vec<FieldError>| {
            if !data.contains_key(key) {
                errs.push(FieldError::required(data_path.key(key), ""));
                return false;
            }
            true
        };
        let json_ok = |key: &str, errs: &mut Vec<FieldError>| {
            if let Some(v) = data.get(key) {
                if let Err(e) = serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(&v.0) {
                    errs.push(FieldError::invalid(data_path.key(key), "<secret contents redacted>", e.to_string()));
                }
            }
        };
        match s.type_.as_deref().unwrap_or_default() {
            "kubernetes.io/service-account-token" => {
                let name = s.metadata.annotations.as_ref().and_then(|a| a.get("kubernetes.io/service-account.name"));
                if name.is_none_or(String::is_empty) {
                    errs.push(FieldError::required(
                        Path::new("metadata").child("annotations").key("kubernetes.io/service-account.name"),
                        "",
                    ));
                }
            }
            t @ ("kubernetes.io/dockercfg" | "kubernetes.io/dockerconfigjson") => {
                let key = if t == "kubernetes.io/dockercfg" { ".dockercfg" } else { ".dockerconfigjson" };
                if required(key, &mut errs) {
                    json_ok(key, &mut errs);
                }
            }
            "kubernetes.io/basic-auth" if !data.contains_key("username") && !data.contains_key("password") => {
                errs.push(FieldError::required(data_path.key("username"), ""));
                errs.push(FieldError::required(data_path.key("password"), ""));
            }
            "kubernetes.io/ssh-auth" if data.get("ssh-privatekey").is_none_or(|v| v.0.is_empty()) => {
                errs.push(FieldError::required(data_path.key("ssh-privatekey"), ""));
            }
            "kubernetes.io/tls" => {
                required("tls.crt", &mut errs);
                required("tls.key", &mut errs);
            }
            _ => {}
        }
        errs
    }

    fn validate_update(&self, new: &Secret, old: &Secret) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        if new.type_ != old.type_ {
            errs.push(FieldError::invalid("type", new.type_.clone().unwrap_or_default(), "field is immutable"));
        }
        errs.extend(immutable_data_errors(
            old.immutable,
            new.immutable,
            &[("data", !super::semantic::equal(&new.data, &old.data))],
        ));
        errs
    }
}

impl ObjectHooks for SecretStrategy {
    fn selectable_fields(&self) -> &'static [&'static str] {
        &["type"]
    }
}

/// Namespace: DNS-label names, the `kubernetes` finalizer, phase `Active`, the name label.
pub struct NamespaceStrategy;

fn set_namespace_label(meta: &mut ObjectMeta) {
    if let Some(name) = meta.name.clone().filter(|n| !n.is_empty()) {
        meta.labels.get_or_insert_with(BTreeMap::new).insert(NAMESPACE_NAME_LABEL.into(), name);
    }
}

impl Strategy for NamespaceStrategy {
    type Object = Namespace;

    fn name_rule(&self) -> NameRule {
        NameRule::Label
    }

    fn set_defaults(&self, ns: &mut Namespace) {
        set_namespace_label(&mut ns.metadata);
        let status = ns.status.get_or_insert_with(Default::default);
        if status.phase.as_deref().unwrap_or_default().is_empty() {
            status.phase = Some("Active".into());
        }
    }

    fn prepare_for_create(&self, ns: &mut Namespace) {
        ns.status = Some(NamespaceStatus { phase: Some("Active".into()), ..Default::default() });
        let finalizers = ns.spec.get_or_insert_with(Default::default).finalizers.get_or_insert_with(Vec::new);
        if !finalizers.iter().any(|f| f == "kubernetes") {
            finalizers.push("kubernetes".into());
        }
        set_namespace_label(&mut ns.metadata);
    }

    fn prepare_for_update(&self, new: &mut Namespace, old: &Namespace) {
        // Finalizers change only through the finalize subresource.
        let finalizers = old.spec.as_ref().and_then(|s| s.finalizers.clone());
        new.spec.get_or_insert_with(Default::default).finalizers = finalizers;
        set_namespace_label(&mut new.metadata);
    }

    fn validate(&self, ns: &Namespace) -> Vec<FieldError> {
        let path = Path::new("spec").child("finalizers");
        let mut errs = Vec::new();
        for f in ns.spec.iter().flat_map(|s| s.finalizers.iter().flatten()) {
            errs.extend(formats::validate_qualified_name(f, &path));
            if !f.contains('/') && !["kubernetes", "orphan", "foregroundDeletion"].contains(&f.as_str()) {
                errs.push(FieldError::invalid(
                    &path,
                    f.as_str(),
                    "name is neither a standard finalizer name nor is it fully qualified",
                ));
            }
        }
        errs
    }
}

impl ObjectHooks for NamespaceStrategy {
    fn selectable_fields(&self) -> &'static [&'static str] {
        &["status.phase"]
    }

    /// A namespace shows `Terminating` while its content goes (upstream's namespace REST Delete).
    fn on_delete(&self, _old: &Value, _opts: &DeleteOptions) -> DeletePlan {
        DeletePlan { status_phase: Some("Terminating"), ..DeletePlan::default() }
    }

    /// `spec.finalizers` (the namespace controller's `kubernetes`) keep a deleting namespace.
    fn deletion_held(&self, obj: &Value) -> bool {
        obj.pointer("/spec/finalizers").and_then(Value::as_array).is_some_and(|a| !a.is_empty())
    }
}

/// Node: allocatable defaults to capacity; podCIDRs and providerID are set once.
pub struct NodeStrategy;

const TAINT_EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

impl Strategy for NodeStrategy {
    type Object = Node;

    fn set_defaults(&self, node: &mut Node) {
        if let Some(status) = node.status.as_mut() {
            if status.allocatable.is_none() {
                status.allocatable = status.capacity.clone();
            }
            for list in [status.capacity.as_mut(), status.allocatable.as_mut()].into_iter().flatten() {
                quantity::canonicalize_resource_list(list);
            }
        }
    }

    fn validate(&self, node: &Node) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let spec = node.spec.clone().unwrap_or_default();
        // Upstream reports taint errors under `metadata.taints`.
        let taints_path = Path::new("metadata").child("taints");
        let mut seen = BTreeSet::new();
        for (i, t) in spec.taints.iter().flatten().enumerate() {
            let p = taints_path.index(i);
            errs.extend(formats::validate_qualified_name(&t.key, &p.child("key")));
            let value = t.value.as_deref().unwrap_or_default();
            let msgs = meta::label_value(value);
            if !msgs.is_empty() {
                errs.push(FieldError::invalid(p.child("value"), value, msgs.join(";")));
            }
            errs.extend(formats::validate_enum(Some(&t.effect), TAINT_EFFECTS, &p.child("effect")));
            if !seen.insert((t.effect.clone(), t.key.clone())) {
                let mut e = FieldError::duplicate(&p, formats::to_value(t));
                e.detail = "taints must be unique by key and effect pair".into();
                errs.push(e);
            }
        }
        let cidrs = spec.pod_cidrs.clone().unwrap_or_default();
        let cidrs_path = Path::new("spec").child("podCIDRs");
        for (i, c) in cidrs.iter().enumerate() {
            if formats::parse_cidr(c).is_none() {
                errs.push(FieldError::invalid(cidrs_path.index(i), formats::to_value(&cidrs), "must be valid CIDR"));
            }
        }
        if cidrs.len() > 1 {
            let v4 = cidrs.iter().filter(|c| formats::parse_cidr(c).is_some_and(|c| c.is_ipv4())).count();
            if cidrs.len() > 2 || v4 != 1 {
                errs.push(FieldError::invalid(
                    &cidrs_path,
                    formats::to_value(&cidrs),
                    "may specify no more than one CIDR for each IP family",
                ));
            }
        }
        if let Some(status) = &node.status {
            for (name, list) in [("capacity", &status.capacity), ("allocatable", &status.allocatable)] {
                for (k, q) in list.iter().flatten() {
                    let p = Path::new("status").child(name).child(k);
                    match Quantity::parse(&q.0) {
                        Err(e) => errs.push(FieldError::invalid(&p, q.0.as_str(), e.to_string())),
                        Ok(v) if v.is_negative() => {
                            errs.push(FieldError::invalid(&p, v.canonical(), formats::IS_NEGATIVE_ERROR))
                        }
                        Ok(_) => {}
                    }
                }
            }
        }
        errs
    }

    fn validate_update(&self, new: &Node, old: &Node) -> Vec<FieldError> {
        let mut errs = self.validate(new);
        let (n, o) = (new.spec.clone().unwrap_or_default(), old.spec.clone().unwrap_or_default());
        let old_cidrs = o.pod_cidrs.unwrap_or_default();
        if !old_cidrs.is_empty() && old_cidrs != n.pod_cidrs.unwrap_or_default() {
            errs.push(FieldError::forbidden(
                Path::new("spec").child("podCIDRs"),
                "node updates may not change podCIDR except from \"\" to valid",
            ));
        }
        let old_provider = o.provider_id.unwrap_or_default();
        if !old_provider.is_empty() && Some(old_provider) != n.provider_id {
            errs.push(FieldError::forbidden(
                Path::new("spec").child("providerID"),
                "node updates may not change providerID except from \"\" to valid",
            ));
        }
        if n.external_id != o.external_id {
            errs.push(FieldError::forbidden(Path::new("spec").child("externalID"), "may not be updated"));
        }
        errs
    }
}

impl ObjectHooks for NodeStrategy {
    fn selectable_fields(&self) -> &'static [&'static str] {
        &["spec.unschedulable"]
    }

    /// An unset `spec.unschedulable` is `false`.
    fn field_value(&self, obj: &Value, field: &str) -> String {
        let v = crate::selectors::field_string(obj, field).unwrap_or_default();
        if field == "spec.unschedulable" && v.is_empty() {
            return "false".into();
        }
        v
    }
}

/// ServiceAccount: secret references keep only their names.
pub struct ServiceAccountStrategy;

fn clean_secret_references(sa: &mut ServiceAccount) {
    for s in sa.secrets.iter_mut().flatten() {
        *s = ObjectReference { name: s.name.clone(), ..Default::default() };
    }
}

impl Strategy for ServiceAccountStrategy {
    type Object = ServiceAccount;

    fn prepare_for_create(&self, sa: &mut ServiceAccount) {
        clean_secret_references(sa);
    }

    fn prepare_for_update(&self, new: &mut ServiceAccount, _old: &ServiceAccount) {
        clean_secret_references(new);
    }
}

impl ObjectHooks for ServiceAccountStrategy {}

/// Endpoints: ports default to TCP; addresses are real, non-special IPs.
pub struct EndpointsStrategy;

fn validate_endpoint_address(a: &EndpointAddress, path: &Path) -> Vec<FieldError> {
    let ip_path = path.child("ip");
    let mut errs = formats::validate_ip(&a.ip, &ip_path);
    if let Some(h) = a.hostname.as_deref().filter(|h| !h.is_empty()) {
        errs.extend(formats::validate_dns_label(h, &path.child("hostname")));
    }
    if let Some(n) = a.node_name.as_deref() {
        errs.extend(formats::validate_dns_subdomain(n, &path.child("nodeName")));
    }
    if errs.is_empty() {
        errs.extend(formats::validate_non_special_ip(&a.ip, &ip_path));
    }
    errs
}

impl Strategy for EndpointsStrategy {
    type Object = Endpoints;

    fn set_defaults(&self, ep: &mut Endpoints) {
        for p in ep.subsets.iter_mut().flatten().flat_map(|s| s.ports.iter_mut().flatten()) {
            if p.protocol.as_deref().unwrap_or_default().is_empty() {
                p.protocol = Some("TCP".into());
            }
        }
    }

    fn validate(&self, ep: &Endpoints) -> Vec<FieldError> {
        let mut errs = Vec::new();
        for (i, ss) in ep.subsets.iter().flatten().enumerate() {
            let p = Path::new("subsets").index(i);
            let addrs = ss.addresses.as_deref().unwrap_or_default();
            let not_ready = ss.not_ready_addresses.as_deref().unwrap_or_default();
            if addrs.is_empty() && not_ready.is_empty() {
                errs.push(FieldError::required(&p, "must specify `addresses` or `notReadyAddresses`"));
            }
            for (j, a) in addrs.iter().enumerate() {
                errs.extend(validate_endpoint_address(a, &p.child("addresses").index(j)));
            }
            for (j, a) in not_ready.iter().enumerate() {
                errs.extend(validate_endpoint_address(a, &p.child("notReadyAddresses").index(j)));
            }
            let port_list = ss.ports.as_deref().unwrap_or_default();
            for (j, port) in port_list.iter().enumerate() {
                let pp = p.child("ports").index(j);
                let name = port.name.as_deref().unwrap_or_default();
                if port_list.len() > 1 && name.is_empty() {
                    errs.push(FieldError::required(pp.child("name"), ""));
                } else if !name.is_empty() {
                    errs.extend(formats::validate_dns_label(name, &pp.child("name")));
                }
                errs.extend(ports::validate_port_num(port.port, &pp.child("port")));
                errs.extend(ports::validate_protocol(port.protocol.as_deref(), &pp.child("protocol")));
                if let Some(ap) = port.app_protocol.as_deref() {
                    errs.extend(formats::validate_qualified_name(ap, &pp.child("appProtocol")));
                }
            }
        }
        errs
    }
}

impl ObjectHooks for EndpointsStrategy {
    fn allow_create_on_update(&self) -> bool {
        true
    }
}

/// Events (core/v1): the involved object's namespace matches the event's.
pub struct EventStrategy;

impl Strategy for EventStrategy {
    type Object = Event;

    fn validate(&self, e: &Event) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let ns = e.metadata.namespace.as_deref().unwrap_or_default();
        let involved_ns = e.involved_object.namespace.as_deref().unwrap_or_default();
        let ns_path = Path::new("involvedObject").child("namespace");
        let mismatch = || FieldError::invalid(&ns_path, involved_ns, "does not match event.namespace");
        if e.event_time.is_none() {
            if involved_ns.is_empty() {
                if !ns.is_empty() && ns != "default" {
                    errs.push(mismatch());
                }
            } else if ns != involved_ns {
                errs.push(mismatch());
            }
            return errs;
        }
        if involved_ns.is_empty() && ns != "default" && ns != "kube-system" {
            errs.push(mismatch());
        }
        let controller = e.reporting_component.as_deref().unwrap_or_default();
        if controller.is_empty() {
            errs.push(FieldError::required("reportingComponent", ""));
        }
        errs.extend(formats::validate_qualified_name(controller, &Path::new("reportingComponent")));
        for (name, value, limit, required) in [
            ("reportingInstance", e.reporting_instance.as_deref(), 128, true),
            ("action", e.action.as_deref(), 128, true),
            ("reason", e.reason.as_deref(), 128, true),
            ("message", e.message.as_deref(), 1024, false),
        ] {
            let v = value.unwrap_or_default();
            if required && v.is_empty() {
                errs.push(FieldError::required(name, ""));
            }
            if v.len() > limit {
                errs.push(FieldError::invalid(name, "", format!("can have at most {limit} characters")));
            }
        }
        errs
    }
}

impl ObjectHooks for EventStrategy {
    fn selectable_fields(&self) -> &'static [&'static str] {
        &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ]
    }

    /// `source` selects by `source.component`.
    fn field_value(&self, obj: &Value, field: &str) -> String {
        let field = if field == "source" { "source.component" } else { field };
        crate::selectors::field_string(obj, field).unwrap_or_default()
    }

    fn allow_create_on_update(&self) -> bool {
        true
    }
}

/// PodTemplate: the template is validated like a pod.
pub struct PodTemplateStrategy;

impl Strategy for PodTemplateStrategy {
    type Object = PodTemplate;

    fn set_defaults(&self, pt: &mut PodTemplate) {
        pod_spec::set_template_defaults(pt.template.get_or_insert_with(Default::default));
    }

    fn validate(&self, pt: &PodTemplate) -> Vec<FieldError> {
        pod_spec::validate_pod_template_spec(&pt.template.clone().unwrap_or_default(), &Path::new("template"))
    }
}

impl ObjectHooks for PodTemplateStrategy {}

/// ReplicationController: replicas 1, selector and labels from the template.
pub struct ReplicationControllerStrategy;

impl Strategy for ReplicationControllerStrategy {
    type Object = ReplicationController;

    fn set_defaults(&self, rc: &mut ReplicationController) {
        let spec = rc.spec.get_or_insert_with(Default::default);
        let labels = spec.template.as_ref().and_then(|t| t.metadata.as_ref()).and_then(|m| m.labels.clone());
        if let Some(labels) = labels {
            if spec.selector.as_ref().is_none_or(BTreeMap::is_empty) {
                spec.selector = Some(labels.clone());
            }
            if rc.metadata.labels.as_ref().is_none_or(BTreeMap::is_empty) {
                rc.metadata.labels = Some(labels);
            }
        }
        spec.replicas.get_or_insert(1);
        if let Some(t) = spec.template.as_mut() {
            pod_spec::set_template_defaults(t);
        }
    }

    fn prepare_for_create(&self, rc: &mut ReplicationController) {
        rc.status = Some(ReplicationControllerStatus::default());
    }

    fn validate(&self, rc: &ReplicationController) -> Vec<FieldError> {
        let spec = rc.spec.clone().unwrap_or_default();
        let path = Path::new("spec");
        let mut errs = formats::validate_non_negative(
            i64::from(spec.min_ready_seconds.unwrap_or_default()),
            &path.child("minReadySeconds"),
        );
        let selector = spec.selector.clone().unwrap_or_default();
        if selector.is_empty() {
            errs.push(FieldError::required(path.child("selector"), ""));
        }
        errs.extend(formats::validate_non_negative(
            i64::from(spec.replicas.unwrap_or_default()),
            &path.child("replicas"),
        ));
        let tp = path.child("template");
        match &spec.template {
            None => errs.push(FieldError::required(&tp, "")),
            Some(t) => {
                let labels = t.metadata.as_ref().and_then(|m| m.labels.clone()).unwrap_or_default();
                if !selector.is_empty() && !selector.iter().all(|(k, v)| labels.get(k) == Some(v)) {
                    errs.push(FieldError::invalid(
                        tp.child("metadata").child("labels"),
                        formats::to_value(&t.metadata.as_ref().and_then(|m| m.labels.as_ref())),
                        "`selector` does not match template `labels`",
                    ));
                }
                errs.extend(validate_replicated_template(t, "ReplicationController", &tp));
            }
        }
        errs
    }
}

impl ObjectHooks for ReplicationControllerStrategy {
    fn tracks_generation(&self) -> bool {
        true
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &["status.replicas"]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        Container, EndpointPort, EndpointSubset, NamespaceSpec, NodeSpec, PodSpec, PodTemplateSpec,
        ReplicationControllerSpec, Taint,
    };

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(|e| e.to_string()).collect()
    }

    fn named(name: &str) -> ObjectMeta {
        ObjectMeta { name: Some(name.into()), ..Default::default() }
    }

    #[test]
    fn config_map_keys_and_immutability() {
        let mut cm = ConfigMap {
            metadata: named("cfg"),
            data: Some(BTreeMap::from([("app.properties".to_string(), "a=b".to_string())])),
            ..Default::default()
        };
        assert!(ConfigMapStrategy.validate(&cm).is_empty());
        cm.data.as_mut().expect("data").insert("bad/key".into(), "x".into());
        let m = messages(&ConfigMapStrategy.validate(&cm));
        assert_eq!(m.len(), 1);
        assert!(m[0].starts_with(
            "data[bad/key]: Invalid value: \"bad/key\": a valid config key must consist of alphanumeric characters"
        ));
        let old = ConfigMap {
            metadata: named("cfg"),
            immutable: Some(true),
            data: Some(BTreeMap::new()),
            ..Default::default()
        };
        let new = ConfigMap {
            metadata: named("cfg"),
            immutable: Some(true),
            data: Some(BTreeMap::from([("k".to_string(), "v".to_string())])),
            ..Default::default()
        };
        assert_eq!(
            messages(&ConfigMapStrategy.validate_update(&new, &old)),
            ["data: Forbidden: field is immutable when `immutable` is set"]
        );
        let big = ConfigMap {
            metadata: named("big"),
            data: Some(BTreeMap::from([("k".to_string(), "x".repeat(MAX_DATA_SIZE + 1))])),
            ..Default::default()
        };
        assert_eq!(ConfigMapStrategy.validate(&big)[0].kind, crate::field::FieldErrorType::TooLong);
    }

    #[test]
    fn secret_defaults_string_data_and_type_rules() {
        let mut s = Secret {
            metadata: named("s"),
            string_data: Some(BTreeMap::from([("password".to_string(), "hunter2".to_string())])),
            ..Default::default()
        };
        SecretStrategy.set_defaults(&mut s);
        assert_eq!(s.type_.as_deref(), Some("Opaque"));
        assert!(s.string_data.is_none());
        assert_eq!(s.data.as_ref().map(|d| d["password"].0.clone()), Some(b"hunter2".to_vec()));
        assert!(SecretStrategy.validate(&s).is_empty());
        let mut tls = s.clone();
        tls.type_ = Some("kubernetes.io/tls".into());
        assert_eq!(
            messages(&SecretStrategy.validate(&tls)),
            ["data[tls.crt]: Required value", "data[tls.key]: Required value"]
        );
        let m = messages(&SecretStrategy.validate_update(&tls, &s));
        assert!(m.contains(&"type: Invalid value: \"kubernetes.io/tls\": field is immutable".to_string()));
    }

    #[test]
    fn namespace_defaults_and_finalizers() {
        let mut ns = Namespace { metadata: named("team-a"), ..Default::default() };
        NamespaceStrategy.set_defaults(&mut ns);
        NamespaceStrategy.prepare_for_create(&mut ns);
        assert_eq!(ns.metadata.labels.as_ref().map(|l| l[NAMESPACE_NAME_LABEL].as_str()), Some("team-a"));
        assert_eq!(ns.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Active"));
        assert_eq!(ns.spec.as_ref().and_then(|s| s.finalizers.clone()), Some(vec!["kubernetes".to_string()]));
        assert_eq!(NamespaceStrategy.name_rule(), NameRule::Label);
        assert!(NamespaceStrategy.validate(&ns).is_empty());
        let mut new = ns.clone();
        new.spec = Some(NamespaceSpec { finalizers: None });
        NamespaceStrategy.prepare_for_update(&mut new, &ns);
        assert_eq!(new.spec, ns.spec);
        let bad =
            Namespace { spec: Some(NamespaceSpec { finalizers: Some(vec!["custom".into()]) }), ..Default::default() };
        assert_eq!(
            messages(&NamespaceStrategy.validate(&bad)),
            ["spec.finalizers: Invalid value: \"custom\": name is neither a standard finalizer name nor is it fully qualified"]
        );
    }

    #[test]
    fn node_taints_and_cidrs() {
        let node = Node {
            metadata: named("n1"),
            spec: Some(NodeSpec {
                taints: Some(vec![
                    Taint { key: "k".into(), effect: "NoSchedule".into(), ..Default::default() },
                    Taint { key: "k".into(), effect: "NoSchedule".into(), ..Default::default() },
                    Taint { key: "j".into(), effect: "Sometimes".into(), ..Default::default() },
                ]),
                pod_cidrs: Some(vec!["10.42.0.0/24".into()]),
                ..Default::default()
            }),
            status: None,
        };
        let m = messages(&NodeStrategy.validate(&node));
        assert!(m.iter().any(|s| s.starts_with("metadata.taints[1]: Duplicate value")
            && s.ends_with("taints must be unique by key and effect pair")));
        assert!(m.iter().any(|s| s.starts_with("metadata.taints[2].effect: Unsupported value: \"Sometimes\"")));
        let mut moved = node.clone();
        moved.spec.as_mut().expect("spec").pod_cidrs = Some(vec!["10.43.0.0/24".into()]);
        let m = messages(&NodeStrategy.validate_update(&moved, &node));
        assert!(m.contains(
            &"spec.podCIDRs: Forbidden: node updates may not change podCIDR except from \"\" to valid".to_string()
        ));
    }

    #[test]
    fn service_account_secret_references_keep_names_only() {
        let mut sa = ServiceAccount {
            metadata: named("builder"),
            secrets: Some(vec![ObjectReference {
                name: Some("tok".into()),
                kind: Some("Secret".into()),
                ..Default::default()
            }]),
            ..Default::default()
        };
        ServiceAccountStrategy.prepare_for_create(&mut sa);
        assert_eq!(sa.secrets, Some(vec![ObjectReference { name: Some("tok".into()), ..Default::default() }]));
    }

    #[test]
    fn endpoints_defaults_and_addresses() {
        let mut ep = Endpoints {
            metadata: named("web"),
            subsets: Some(vec![EndpointSubset {
                addresses: Some(vec![EndpointAddress { ip: "10.42.0.5".into(), ..Default::default() }]),
                ports: Some(vec![EndpointPort { port: 80, ..Default::default() }]),
                ..Default::default()
            }]),
        };
        EndpointsStrategy.set_defaults(&mut ep);
        assert_eq!(
            ep.subsets.as_ref().and_then(|s| s[0].ports.as_ref()).and_then(|p| p[0].protocol.clone()).as_deref(),
            Some("TCP")
        );
        assert!(EndpointsStrategy.validate(&ep).is_empty());
        ep.subsets.as_mut().expect("subsets")[0].addresses =
            Some(vec![EndpointAddress { ip: "127.0.0.1".into(), ..Default::default() }]);
        assert_eq!(
            messages(&EndpointsStrategy.validate(&ep)),
            ["subsets[0].addresses[0].ip: Invalid value: \"127.0.0.1\": may not be in the loopback range (127.0.0.0/8, ::1/128)"]
        );
        let empty = Endpoints { metadata: named("e"), subsets: Some(vec![EndpointSubset::default()]) };
        assert_eq!(
            messages(&EndpointsStrategy.validate(&empty)),
            ["subsets[0]: Required value: must specify `addresses` or `notReadyAddresses`"]
        );
    }

    #[test]
    fn event_namespace_must_match() {
        let e = Event {
            metadata: ObjectMeta { name: Some("e".into()), namespace: Some("default".into()), ..Default::default() },
            involved_object: ObjectReference { namespace: Some("other".into()), ..Default::default() },
            ..Default::default()
        };
        assert_eq!(
            messages(&EventStrategy.validate(&e)),
            ["involvedObject.namespace: Invalid value: \"other\": does not match event.namespace"]
        );
    }

    fn template(labels: &[(&str, &str)]) -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
                ..Default::default()
            }),
            spec: Some(PodSpec {
                containers: vec![Container { name: "app".into(), image: Some("nginx".into()), ..Default::default() }],
                ..Default::default()
            }),
        }
    }

    #[test]
    fn pod_template_is_validated_like_a_pod() {
        let mut pt = PodTemplate { metadata: named("t"), template: Some(template(&[("app", "x")])) };
        PodTemplateStrategy.set_defaults(&mut pt);
        assert!(PodTemplateStrategy.validate(&pt).is_empty());
        pt.template.as_mut().and_then(|t| t.spec.as_mut()).expect("spec").containers.clear();
        assert_eq!(messages(&PodTemplateStrategy.validate(&pt)), ["template.spec.containers: Required value"]);
    }

    #[test]
    fn replication_controller_defaults_from_template() {
        let mut rc = ReplicationController {
            metadata: named("rc"),
            spec: Some(ReplicationControllerSpec { template: Some(template(&[("app", "x")])), ..Default::default() }),
            status: None,
        };
        ReplicationControllerStrategy.set_defaults(&mut rc);
        let spec = rc.spec.as_ref().expect("spec");
        assert_eq!(spec.replicas, Some(1));
        assert_eq!(spec.selector.as_ref().map(|s| s["app"].as_str()), Some("x"));
        assert_eq!(rc.metadata.labels.as_ref().map(|l| l["app"].as_str()), Some("x"));
        assert!(ReplicationControllerStrategy.validate(&rc).is_empty());
        rc.spec.as_mut().expect("spec").selector = Some(BTreeMap::from([("app".to_string(), "y".to_string())]));
        let errs = ReplicationControllerStrategy.validate(&rc);
        assert_eq!(errs.len(), 1);
        assert_eq!(
            (errs[0].field.as_str(), errs[0].detail.as_str()),
            ("spec.template.metadata.labels", "`selector` does not match template `labels`")
        );
    }
}
