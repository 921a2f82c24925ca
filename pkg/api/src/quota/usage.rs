//! What an object of each resource counts against quota (upstream's evaluator registry): pods
//! (compute resources, see [`super::pod`]), Services (count, NodePorts, LoadBalancers),
//! PersistentVolumeClaims (count and storage, also per StorageClass) and every other resource
//! by object count (`count/<resource>.<group>`, plus the legacy names of ConfigMaps, Secrets,
//! ReplicationControllers and ResourceQuotas).

use super::{object_count_name, one, parse_list, pod, zero, ResourceList, ScopeSelector};
use serde_json::Value;

/// The suffix of per-StorageClass quota resources (`gold.storageclass.storage.k8s.io/…`).
pub const STORAGE_CLASS_SUFFIX: &str = ".storageclass.storage.k8s.io/";

/// The operation being admitted, as far as quota cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Pods,
    Services,
    Claims,
    /// Object count only; `legacy` is the resource's pre-`count/` quota name, if any.
    Count {
        legacy: bool,
    },
}

/// Measures the quota usage of one group-resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Evaluator {
    pub group: String,
    pub resource: String,
    kind: Kind,
}

/// Core resources whose bare name is also a quota resource counting their objects.
const LEGACY_COUNTS: &[&str] = &["configmaps", "secrets", "replicationcontrollers", "resourcequotas"];

impl Evaluator {
    pub fn new(group: &str, resource: &str) -> Evaluator {
        let kind = match (group, resource) {
            ("", "pods") => Kind::Pods,
            ("", "services") => Kind::Services,
            ("", "persistentvolumeclaims") => Kind::Claims,
            ("", r) => Kind::Count { legacy: LEGACY_COUNTS.contains(&r) },
            _ => Kind::Count { legacy: false },
        };
        Evaluator { group: group.to_string(), resource: resource.to_string(), kind }
    }

    /// The evaluator a quota resource name belongs to (`requests.cpu` ▶ pods,
    /// `services.nodeports` ▶ services, `count/deployments.apps` ▶ deployments.apps); `None`
    /// for names no evaluator measures.
    pub fn for_quota_resource(name: &str) -> Option<Evaluator> {
        let core = |r: &str| Some(Evaluator::new("", r));
        if let Some(rest) = name.strip_prefix("count/") {
            return Some(match rest.split_once('.') {
                Some((r, g)) => Evaluator::new(g, r),
                None => Evaluator::new("", rest),
            });
        }
        match name {
            "services" | "services.nodeports" | "services.loadbalancers" => core("services"),
            "persistentvolumeclaims" | "requests.storage" => core("persistentvolumeclaims"),
            n if n.contains(STORAGE_CLASS_SUFFIX) => core("persistentvolumeclaims"),
            n if LEGACY_COUNTS.contains(&n) => core(n),
            n if pod::POD_RESOURCES.contains(&n)
                || n.starts_with("hugepages-")
                || n.starts_with("requests.hugepages-")
                || pod::is_extended_quota_name(n) =>
            {
                core("pods")
            }
            _ => None,
        }
    }

    /// Whether a write through `subresource` with `op` can change this resource's usage.
    pub fn handles(&self, op: Operation, subresource: Option<&str>) -> bool {
        match self.kind {
            Kind::Pods => subresource.is_none() && op == Operation::Create,
            // A type change or a resize is charged; through `/status` it is never refused.
            Kind::Services | Kind::Claims => subresource.is_none() || subresource == Some("status"),
            Kind::Count { .. } => subresource.is_none() && op == Operation::Create,
        }
    }

    /// Whether a quota resource name is one this evaluator measures.
    pub fn measures(&self, name: &str) -> bool {
        match self.kind {
            Kind::Pods => {
                pod::POD_RESOURCES.contains(&name)
                    || name.starts_with("hugepages-")
                    || name.starts_with("requests.hugepages-")
                    || pod::is_extended_quota_name(name)
            }
            Kind::Services => {
                matches!(name, "services" | "count/services" | "services.nodeports" | "services.loadbalancers")
            }
            Kind::Claims => {
                matches!(name, "persistentvolumeclaims" | "count/persistentvolumeclaims" | "requests.storage")
                    || name.ends_with(&format!("{STORAGE_CLASS_SUFFIX}requests.storage"))
                    || name.ends_with(&format!("{STORAGE_CLASS_SUFFIX}persistentvolumeclaims"))
            }
            Kind::Count { legacy } => {
                name == object_count_name(&self.group, &self.resource) || (legacy && name == self.resource)
            }
        }
    }

    /// The names among `hard` this evaluator measures (upstream's `MatchingResources`).
    pub fn matching_resources<'a>(&self, hard: impl IntoIterator<Item = &'a String>) -> Vec<String> {
        hard.into_iter().filter(|n| self.measures(n)).cloned().collect()
    }

    /// Whether `obj` falls in one scope requirement; only pods have scopes.
    pub fn matches_scope(&self, sel: &ScopeSelector, obj: &Value) -> bool {
        match self.kind {
            Kind::Pods => pod::matches_scope(sel, obj),
            _ => false,
        }
    }

    /// Whether `obj` falls in every scope requirement of a quota (an unscoped quota takes all).
    pub fn matches_scopes(&self, scopes: &[ScopeSelector], obj: &Value) -> bool {
        scopes.iter().all(|s| self.matches_scope(s, obj))
    }

    /// Checks a new object against what the quota's `required` resources demand of it.
    pub fn constraints(&self, required: &[String], obj: &Value) -> Result<(), String> {
        match self.kind {
            Kind::Pods => pod::constraints(required, obj),
            _ => Ok(()),
        }
    }

    /// What `obj` counts against quota.
    pub fn usage(&self, obj: &Value, now: jiff::Timestamp) -> ResourceList {
        match self.kind {
            Kind::Pods => pod::usage(obj, now),
            Kind::Services => service_usage(obj),
            Kind::Claims => claim_usage(obj),
            Kind::Count { legacy } => {
                let mut out = ResourceList::from([(object_count_name(&self.group, &self.resource), one())]);
                if legacy {
                    out.insert(self.resource.clone(), one());
                }
                out
            }
        }
    }
}

fn service_usage(svc: &Value) -> ResourceList {
    let mut out = ResourceList::from([
        ("count/services".to_string(), one()),
        ("services".to_string(), one()),
        ("services.loadbalancers".to_string(), zero()),
        ("services.nodeports".to_string(), zero()),
    ]);
    let ports = svc.pointer("/spec/ports").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let count = |n: usize| super::Quantity::from_units(i64::try_from(n).unwrap_or(i64::MAX));
    match svc.pointer("/spec/type").and_then(Value::as_str) {
        Some("NodePort") => {
            out.insert("services.nodeports".into(), count(ports.len()));
        }
        Some("LoadBalancer") => {
            let allocate = svc.pointer("/spec/allocateLoadBalancerNodePorts").and_then(Value::as_bool) != Some(false);
            let n = if allocate {
                ports.len()
            } else {
                ports.iter().filter(|p| p.get("nodePort").and_then(Value::as_i64).is_some_and(|n| n != 0)).count()
            };
            out.insert("services.nodeports".into(), count(n));
            out.insert("services.loadbalancers".into(), one());
        }
        _ => {}
    }
    out
}

/// The claim's StorageClass: `spec.storageClassName`, else the beta annotation.
fn claim_class(pvc: &Value) -> String {
    pvc.pointer("/metadata/annotations/volume.beta.kubernetes.io~1storage-class")
        .and_then(Value::as_str)
        .or_else(|| pvc.pointer("/spec/storageClassName").and_then(Value::as_str))
        .unwrap_or_default()
        .to_string()
}

fn claim_usage(pvc: &Value) -> ResourceList {
    let mut out = ResourceList::from([
        ("persistentvolumeclaims".to_string(), one()),
        ("count/persistentvolumeclaims".into(), one()),
    ]);
    let class = claim_class(pvc);
    if !class.is_empty() {
        out.insert(format!("{class}{STORAGE_CLASS_SUFFIX}persistentvolumeclaims"), one());
    }
    let requested = parse_list(pvc.pointer("/spec/resources/requests")).get("storage").copied();
    let allocated = parse_list(pvc.pointer("/status/allocatedResources")).get("storage").copied();
    let bill = match (requested, allocated) {
        (Some(r), Some(a)) => Some(r.max(a)),
        (r, a) => r.or(a),
    };
    if let Some(q) = bill {
        out.insert("requests.storage".into(), q);
        if !class.is_empty() {
            out.insert(format!("{class}{STORAGE_CLASS_SUFFIX}requests.storage"), q);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quota::pretty_print;
    use serde_json::json;

    fn now() -> jiff::Timestamp {
        jiff::Timestamp::UNIX_EPOCH
    }

    #[test]
    fn quota_resource_names_find_their_evaluator() {
        let r = |n: &str| Evaluator::for_quota_resource(n).map(|e| format!("{}/{}", e.group, e.resource));
        assert_eq!(r("requests.cpu").as_deref(), Some("/pods"));
        assert_eq!(r("pods").as_deref(), Some("/pods"));
        assert_eq!(r("services.nodeports").as_deref(), Some("/services"));
        assert_eq!(r("gold.storageclass.storage.k8s.io/requests.storage").as_deref(), Some("/persistentvolumeclaims"));
        assert_eq!(r("count/deployments.apps").as_deref(), Some("apps/deployments"));
        assert_eq!(r("configmaps").as_deref(), Some("/configmaps"));
        assert_eq!(r("requests.example.com/gpu").as_deref(), Some("/pods"));
        assert_eq!(r("bogus"), None);
    }

    #[test]
    fn services_count_node_ports_and_load_balancers() {
        let e = Evaluator::new("", "services");
        let lb = json!({"spec": {"type": "LoadBalancer", "ports": [{"port": 80}, {"port": 443}]}});
        assert_eq!(
            pretty_print(&e.usage(&lb, now())),
            "count/services=1,services=1,services.loadbalancers=1,services.nodeports=2"
        );
    }

    #[test]
    fn claims_count_storage_per_class() {
        let e = Evaluator::new("", "persistentvolumeclaims");
        let pvc = json!({"spec": {"storageClassName": "gold", "resources": {"requests": {"storage": "1Gi"}}}});
        assert_eq!(
            pretty_print(&e.usage(&pvc, now())),
            "count/persistentvolumeclaims=1,gold.storageclass.storage.k8s.io/persistentvolumeclaims=1,\
             gold.storageclass.storage.k8s.io/requests.storage=1Gi,persistentvolumeclaims=1,requests.storage=1Gi"
        );
        assert!(e.measures("gold.storageclass.storage.k8s.io/requests.storage"));
    }

    #[test]
    fn legacy_counts_and_object_counts() {
        let cm = Evaluator::new("", "configmaps");
        assert_eq!(pretty_print(&cm.usage(&json!({}), now())), "configmaps=1,count/configmaps=1");
        let d = Evaluator::new("apps", "deployments");
        assert!(d.measures("count/deployments.apps"));
        assert!(!d.measures("deployments"));
        assert!(!d.handles(Operation::Update, None));
    }
}
