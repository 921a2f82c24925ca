//! NodeRestriction admission (upstream's `plugin/pkg/admission/noderestriction`): what a
//! kubelet (`system:node:<name>` in `system:nodes`) writes, narrowed to its own node. It may
//! create and update only its own Node, without touching its taints or labels under
//! `node-restriction.kubernetes.io/` or other `kubernetes.io`/`k8s.io` labels a kubelet does not
//! own; delete, evict and update the status of only the pods bound to it; create only mirror
//! pods bound to itself that reference no ServiceAccount, Secret, ConfigMap or claim; update
//! only the status of claims; use only its own Lease and CSINode; and ask tokens only for pods
//! bound to it ([`check_token_request`]).

use crate::admission::{Attributes, Operation, ValidatingPlugin};
use crate::auth::{node_name, UserInfo};
use crate::error::ApiError;
use crate::registry::Registry;
use futures::future::BoxFuture;
use serde_json::Value;
use std::collections::BTreeSet;

const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";
const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// The kubelet's own labels (upstream's `kubeletapis.IsKubeletLabel`).
const KUBELET_LABELS: &[&str] = &[
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
];
const KUBELET_LABEL_NAMESPACES: &[&str] = &["kubelet.kubernetes.io", "node.kubernetes.io"];
const NODE_RESTRICTION_NAMESPACE: &str = "node-restriction.kubernetes.io";

fn label_namespace(key: &str) -> &str {
    key.split_once('/').map_or("", |(ns, _)| ns)
}

fn in_namespace(ns: &str, domain: &str) -> bool {
    ns == domain || ns.strip_suffix(domain).is_some_and(|rest| rest.ends_with('.'))
}

fn is_kubelet_label(key: &str) -> bool {
    KUBELET_LABELS.contains(&key) || KUBELET_LABEL_NAMESPACES.iter().any(|d| in_namespace(label_namespace(key), d))
}

fn is_kubernetes_label(key: &str) -> bool {
    let ns = label_namespace(key);
    in_namespace(ns, "kubernetes.io") || in_namespace(ns, "k8s.io")
}

/// The labels a node may not add, remove or change on its own Node: those under
/// `node-restriction.kubernetes.io/`, and `kubernetes.io`/`k8s.io` ones that are not the
/// kubelet's (`node-role.kubernetes.io/…` among them).
pub fn forbidden_labels(new: Option<&Value>, old: Option<&Value>) -> Vec<String> {
    let labels = |o: Option<&Value>| -> Vec<(String, String)> {
        o.and_then(|o| o.pointer("/metadata/labels"))
            .and_then(Value::as_object)
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect())
            .unwrap_or_default()
    };
    let (new, old) = (labels(new), labels(old));
    let modified: BTreeSet<&str> = new
        .iter()
        .filter(|kv| !old.contains(kv))
        .chain(old.iter().filter(|kv| !new.contains(kv)))
        .map(|(k, _)| k.as_str())
        .collect();
    modified
        .into_iter()
        .filter(|k| {
            in_namespace(label_namespace(k), NODE_RESTRICTION_NAMESPACE)
                || (is_kubernetes_label(k) && !is_kubelet_label(k))
        })
        .map(str::to_string)
        .collect()
}

/// The NodeRestriction admission plugin.
pub struct NodeRestriction;

fn forbidden(attrs: &Attributes<'_>, message: impl Into<String>) -> ApiError {
    let name = if attrs.name.is_empty() {
        attrs.object.as_deref().and_then(|o| o.pointer("/metadata/name")).and_then(Value::as_str).unwrap_or_default()
    } else {
        attrs.name
    };
    ApiError::forbidden_message(attrs.resource.group, attrs.resource.resource, name, message)
}

fn node_of(pod: Option<&Value>) -> &str {
    pod.and_then(|p| p.pointer("/spec/nodeName")).and_then(Value::as_str).unwrap_or_default()
}

fn check(node: &str, attrs: &Attributes<'_>) -> Result<(), ApiError> {
    let new = attrs.object.as_deref();
    let old = attrs.old_object;
    match (attrs.resource.group, attrs.resource.resource) {
        ("", "pods") => match (attrs.subresource, attrs.operation) {
            (None, Operation::Create) => check_mirror_pod(node, attrs),
            (None, Operation::Delete) if node_of(old) != node => {
                Err(forbidden(attrs, format!("node {node:?} can only delete pods with spec.nodeName set to itself")))
            }
            (None, Operation::Delete) => Ok(()),
            (None, op) => Err(forbidden(
                attrs,
                format!("unexpected operation {:?}, node {node:?} can only create and delete mirror pods", op.as_str()),
            )),
            (Some("status"), Operation::Update) => {
                if node_of(old) != node {
                    return Err(forbidden(
                        attrs,
                        format!("node {node:?} can only update pod status for pods with spec.nodeName set to itself"),
                    ));
                }
                let labels = |o: Option<&Value>| o.and_then(|o| o.pointer("/metadata/labels")).cloned();
                if labels(new) != labels(old) {
                    return Err(forbidden(attrs, format!("node {node:?} cannot update labels through pod status")));
                }
                Ok(())
            }
            (Some("status"), op) => Err(forbidden(attrs, format!("unexpected operation {:?}", op.as_str()))),
            (Some(other), _) => Err(forbidden(
                attrs,
                format!("unexpected pod subresource {other:?}, only 'status' and 'eviction' are allowed"),
            )),
        },
        ("", "nodes") => check_node(node, attrs),
        ("", "persistentvolumeclaims") => match (attrs.subresource, attrs.operation) {
            (Some("status"), Operation::Update) => {
                // Only status.capacity and status.conditions may change.
                let strip = |o: Option<&Value>| {
                    let mut o = o.cloned().unwrap_or(Value::Null);
                    if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
                        m.remove("resourceVersion");
                        m.remove("managedFields");
                    }
                    if let Some(s) = o.get_mut("status").and_then(Value::as_object_mut) {
                        for f in ["capacity", "conditions", "allocatedResourceStatuses", "allocatedResources"] {
                            s.remove(f);
                        }
                    }
                    o
                };
                if strip(new) != strip(old) {
                    return Err(forbidden(
                        attrs,
                        format!("node {node:?} is not allowed to update fields other than status.capacity and status.conditions"),
                    ));
                }
                Ok(())
            }
            (Some("status"), op) => Err(forbidden(attrs, format!("unexpected operation {:?}", op.as_str()))),
            _ => Err(forbidden(attrs, "may only update PVC status")),
        },
        ("coordination.k8s.io", "leases") => {
            if attrs.namespace != Some(NODE_LEASE_NAMESPACE) {
                return Err(forbidden(
                    attrs,
                    format!("can only access leases in the {NODE_LEASE_NAMESPACE:?} system namespace"),
                ));
            }
            own_name(node, attrs, "can only access node lease with the same name as the requesting node")
        }
        ("storage.k8s.io", "csinodes") => {
            own_name(node, attrs, "can only access CSINode with the same name as the requesting node")
        }
        _ => Ok(()),
    }
}

/// The object a create makes, or any other request names, must be named after the node.
fn own_name(node: &str, attrs: &Attributes<'_>, message: &str) -> Result<(), ApiError> {
    let name = match attrs.operation {
        Operation::Create => attrs
            .object
            .as_deref()
            .and_then(|o| o.pointer("/metadata/name"))
            .and_then(Value::as_str)
            .unwrap_or_default(),
        _ => attrs.name,
    };
    if name == node {
        Ok(())
    } else {
        Err(forbidden(attrs, message))
    }
}

fn check_node(node: &str, attrs: &Attributes<'_>) -> Result<(), ApiError> {
    let requested = match attrs.operation {
        Operation::Create if attrs.name.is_empty() => attrs
            .object
            .as_deref()
            .and_then(|o| o.pointer("/metadata/name"))
            .and_then(Value::as_str)
            .unwrap_or_default(),
        _ => attrs.name,
    };
    if requested != node {
        return Err(forbidden(attrs, format!("node {node:?} is not allowed to modify node {requested:?}")));
    }
    let new = attrs.object.as_deref();
    let old = attrs.old_object;
    let config_source =
        |o: Option<&Value>| o.and_then(|o| o.pointer("/spec/configSource")).filter(|v| !v.is_null()).cloned();
    match attrs.operation {
        Operation::Create => {
            if config_source(new).is_some() {
                return Err(forbidden(
                    attrs,
                    format!("node {node:?} is not allowed to create pods with a non-nil configSource"),
                ));
            }
            let labels = forbidden_labels(new, None);
            if !labels.is_empty() {
                return Err(forbidden(
                    attrs,
                    format!("node {node:?} is not allowed to set the following labels: {}", labels.join(", ")),
                ));
            }
        }
        Operation::Update => {
            if config_source(new).is_some() && config_source(new) != config_source(old) {
                return Err(forbidden(
                    attrs,
                    format!("node {node:?} is not allowed to update configSource to a new non-nil configSource"),
                ));
            }
            let taints = |o: Option<&Value>| {
                o.and_then(|o| o.pointer("/spec/taints"))
                    .filter(|t| t.as_array().is_some_and(|a| !a.is_empty()))
                    .cloned()
            };
            if taints(new) != taints(old) {
                return Err(forbidden(attrs, format!("node {node:?} is not allowed to modify taints")));
            }
            let labels = forbidden_labels(new, old);
            if !labels.is_empty() {
                return Err(forbidden(attrs, format!("is not allowed to modify labels: {}", labels.join(", "))));
            }
        }
        Operation::Delete | Operation::Connect => {}
    }
    Ok(())
}

/// A node creates only mirror pods of its own static pods: bound to itself, owned by its Node
/// alone, referencing no other API object.
fn check_mirror_pod(node: &str, attrs: &Attributes<'_>) -> Result<(), ApiError> {
    let pod = attrs.object.as_deref().cloned().unwrap_or(Value::Null);
    let is_mirror = pod.pointer("/metadata/annotations").and_then(|a| a.get(MIRROR_POD_ANNOTATION)).is_some();
    if !is_mirror {
        return Err(forbidden(
            attrs,
            format!(
                "pod does not have {MIRROR_POD_ANNOTATION:?} annotation, node {node:?} can only create mirror pods"
            ),
        ));
    }
    if node_of(Some(&pod)) != node {
        return Err(forbidden(attrs, format!("node {node:?} can only create pods with spec.nodeName set to itself")));
    }
    let owners = pod.pointer("/metadata/ownerReferences").and_then(Value::as_array).cloned().unwrap_or_default();
    match owners.as_slice() {
        [] => {
            return Err(forbidden(
                attrs,
                format!("node {node:?} can only create pods with an owner reference set to itself"),
            ))
        }
        [owner] => {
            let s = |k: &str| owner.get(k).and_then(Value::as_str).unwrap_or_default();
            if s("apiVersion") != "v1" || s("kind") != "Node" || s("name") != node {
                return Err(forbidden(
                    attrs,
                    format!("node {node:?} can only create pods with an owner reference set to itself"),
                ));
            }
            if owner.get("controller").and_then(Value::as_bool) != Some(true) {
                return Err(forbidden(
                    attrs,
                    format!("node {node:?} can only create pods with a controller owner reference set to itself"),
                ));
            }
            if owner.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true) {
                return Err(forbidden(
                    attrs,
                    format!("node {node:?} must not set blockOwnerDeletion on an owner reference"),
                ));
            }
        }
        _ => {
            return Err(forbidden(
                attrs,
                format!("node {node:?} can only create pods with a single owner reference set to itself"),
            ))
        }
    }
    let spec = |k: &str| pod.pointer(&format!("/spec/{k}")).and_then(Value::as_str).unwrap_or_default().to_string();
    if !spec("serviceAccountName").is_empty() {
        return Err(forbidden(attrs, format!("node {node:?} can not create pods that reference a service account")));
    }
    let refs = crate::node_authorizer::pod_object_refs(&pod).unwrap_or_default();
    if !refs.secrets.is_empty() {
        return Err(forbidden(attrs, format!("node {node:?} can not create pods that reference secrets")));
    }
    if !refs.config_maps.is_empty() {
        return Err(forbidden(attrs, format!("node {node:?} can not create pods that reference configmaps")));
    }
    let volumes = pod.pointer("/spec/volumes").and_then(Value::as_array).cloned().unwrap_or_default();
    let trust_bundles = volumes.iter().any(|v| {
        v.pointer("/projected/sources")
            .and_then(Value::as_array)
            .is_some_and(|s| s.iter().any(|s| s.get("clusterTrustBundle").is_some_and(|b| !b.is_null())))
    });
    if trust_bundles {
        return Err(forbidden(attrs, format!("node {node:?} can not create pods that reference clustertrustbundles")));
    }
    if volumes.iter().any(|v| v.get("persistentVolumeClaim").is_some_and(|c| !c.is_null())) {
        return Err(forbidden(
            attrs,
            format!("node {node:?} can not create pods that reference persistentvolumeclaims"),
        ));
    }
    Ok(())
}

impl ValidatingPlugin for NodeRestriction {
    fn name(&self) -> &'static str {
        "NodeRestriction"
    }

    fn validate<'a>(&'a self, attrs: &'a Attributes<'_>) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            let Some(node) = node_name(attrs.user) else { return Ok(()) };
            if node.is_empty() {
                return Err(forbidden(attrs, format!("could not determine node from user {:?}", attrs.user.name)));
            }
            if attrs.operation == Operation::Connect {
                return Ok(());
            }
            check(node, attrs)
        })
    }
}

/// A kubelet's TokenRequest (`serviceaccounts/<name>/token`, which is no admission-checked
/// write here) must be bound to a pod (by name and uid) that runs on its node.
pub fn check_token_request(
    registry: &Registry,
    user: &UserInfo,
    namespace: &str,
    name: &str,
    request: &Value,
) -> Result<(), ApiError> {
    let Some(node) = node_name(user) else { return Ok(()) };
    let forbidden = |message: &str| ApiError::forbidden_message("", "serviceaccounts", name, message);
    if node.is_empty() {
        return Err(forbidden(&format!("could not determine node from user {:?}", user.name)));
    }
    let bound = request.pointer("/spec/boundObjectRef").filter(|r| !r.is_null());
    let s = |k: &str| bound.and_then(|b| b.get(k)).and_then(Value::as_str).unwrap_or_default();
    if bound.is_none() || s("apiVersion") != "v1" || s("kind") != "Pod" || s("name").is_empty() {
        return Err(forbidden("node requested token not bound to a pod"));
    }
    if s("uid").is_empty() {
        return Err(forbidden("node requested token with a pod binding without a uid"));
    }
    let pods = k1s_api::resources::find("", "v1", "pods").ok_or_else(|| ApiError::internal("no pods resource"))?;
    let pod = registry.get(pods, Some(namespace), s("name"))?;
    if pod.pointer("/metadata/uid").and_then(Value::as_str) != Some(s("uid")) {
        return Err(forbidden(&format!(
            "the UID in the bound object reference ({}) does not match the UID in record. The object might have been deleted and then recreated",
            s("uid")
        )));
    }
    if node_of(Some(&pod)) != node {
        return Err(forbidden("node requested token bound to a pod scheduled on a different node"));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
