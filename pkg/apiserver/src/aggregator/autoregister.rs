//! What the server registers for itself at start, as upstream's autoregister controller and
//! cluster-authentication-trust controller do:
//!
//! - a local APIService (label `kube-aggregator.kubernetes.io/automanaged: onstart`) for every
//!   built-in group-version, with upstream's `groupPriorityMinimum`/`versionPriority`,
//!   recreated when deleted, its spec put back when it drifted and the ones no longer served
//!   deleted; an APIService whose label
//!   was removed is the user's and left alone, and so is `v1beta1.metrics.k8s.io` once pointed
//!   at a Service (a metrics-server replacing the built-in metrics API);
//! - an APIService (label `automanaged: true`) for every served custom group-version, deleted
//!   with the last CustomResourceDefinition serving it, as upstream's CRD registration
//!   controller keeps them;
//! - the `kube-system/extension-apiserver-authentication` ConfigMap, which tells aggregated
//!   API servers which CAs to trust for client certificates and for the front proxy, and the
//!   `extension-apiserver-authentication-reader` Role that lets them read it.

use super::FrontProxyConfig;
use crate::registry::{ListOptions, Registry};
use k1s_api::strategies::apiregistration::AUTOMANAGED_LABEL;
use serde_json::{json, Value};

/// Upstream's `apiVersionPriorities` (kube-apiserver's and the generic control plane's) for
/// the group-versions k1s serves, and metrics-server's for `metrics.k8s.io`.
const PRIORITIES: &[(&str, &str, i64, i64)] = &[
    ("", "v1", 18000, 1),
    ("apps", "v1", 17800, 15),
    ("events.k8s.io", "v1", 17750, 15),
    ("authentication.k8s.io", "v1", 17700, 15),
    ("authorization.k8s.io", "v1", 17600, 15),
    ("autoscaling", "v1", 17500, 15),
    ("autoscaling", "v2", 17500, 30),
    ("batch", "v1", 17400, 15),
    ("certificates.k8s.io", "v1", 17300, 15),
    ("networking.k8s.io", "v1", 17200, 15),
    ("policy", "v1", 17100, 15),
    ("rbac.authorization.k8s.io", "v1", 17000, 15),
    ("storage.k8s.io", "v1", 16800, 15),
    ("apiextensions.k8s.io", "v1", 16700, 15),
    ("admissionregistration.k8s.io", "v1", 16700, 15),
    ("scheduling.k8s.io", "v1", 16600, 15),
    ("coordination.k8s.io", "v1", 16500, 15),
    ("node.k8s.io", "v1", 16300, 15),
    ("discovery.k8s.io", "v1", 16200, 15),
    ("flowcontrol.apiserver.k8s.io", "v1", 16100, 21),
    ("resource.k8s.io", "v1", 15900, 15),
    (k1s_api::metrics::GROUP, "v1beta1", 100, 100),
];

/// The local APIServices the server keeps: one per served built-in group-version that has a
/// priority (upstream skips the others).
pub fn desired() -> Vec<Value> {
    k1s_api::resources::group_versions()
        .into_iter()
        .filter_map(|(group, version)| {
            let (_, _, gp, vp) = PRIORITIES.iter().find(|(g, v, _, _)| *g == group && *v == version)?;
            let mut spec = json!({"version": version, "groupPriorityMinimum": gp, "versionPriority": vp});
            if !group.is_empty() {
                spec["group"] = json!(group);
            }
            Some(json!({
                "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                "metadata": {"name": format!("{version}.{group}"), "labels": {AUTOMANAGED_LABEL: "onstart"}},
                "spec": spec,
            }))
        })
        .collect()
}

/// Whether the stored APIService `existing` already is `wanted`'s, or is no longer ours.
fn leave_alone(existing: &Value, wanted: &Value) -> bool {
    if existing.pointer("/metadata/labels").and_then(|l| l.get(AUTOMANAGED_LABEL)).is_none() {
        return true;
    }
    let spec = &existing["spec"];
    if spec.get("group").and_then(Value::as_str) == Some(k1s_api::metrics::GROUP) && spec.get("service").is_some() {
        return true;
    }
    let field = |v: &Value, k: &str| v["spec"].get(k).cloned().filter(|x| !x.is_null() && x != "");
    ["group", "version", "groupPriorityMinimum", "versionPriority", "service", "caBundle", "insecureSkipTLSVerify"]
        .iter()
        .all(|k| {
            field(existing, k) == field(wanted, k)
                || (*k == "insecureSkipTLSVerify" && field(existing, k) == Some(json!(false)))
        })
}

/// Creates, repairs and prunes the server's own APIServices.
pub async fn register_local(registry: &Registry) {
    reconcile(registry, desired(), "onstart").await;
}

/// Creates the `wanted` APIServices, repairs their specs, and deletes the ones labelled
/// `automanaged: <managed>` that are no longer wanted (upstream's autoregister controller).
async fn reconcile(registry: &Registry, wanted: Vec<Value>, managed: &str) {
    let Some(info) = k1s_api::resources::find("apiregistration.k8s.io", "v1", "apiservices") else { return };
    for obj in &wanted {
        let name = crate::object::name(obj).to_string();
        let outcome = match registry.get(info, None, &name) {
            Err(e) if e.code == 404 => registry.ensure(info, obj.clone()).await,
            Err(e) => Err(e),
            Ok(existing) if leave_alone(&existing, obj) => Ok(()),
            Ok(mut existing) => {
                existing["spec"] = obj["spec"].clone();
                registry.server_update(info, existing).await
            }
        };
        match outcome {
            Ok(()) => {}
            // Written meanwhile: the change wakes the next round.
            Err(e) if e.code == 409 => {}
            Err(e) => tracing::error!(apiservice = %name, error = %e.message, "registering an APIService failed"),
        }
    }
    let names: Vec<&str> = wanted.iter().map(crate::object::name).collect();
    let Ok(page) = registry.list(info, None, &ListOptions::default()) else { return };
    for existing in page.items {
        let name = crate::object::name(&existing);
        let ours = existing.pointer("/metadata/labels").and_then(|l| l.get(AUTOMANAGED_LABEL)) == Some(&json!(managed));
        if ours && !names.contains(&name) {
            match registry.server_delete(info, name).await {
                Ok(()) => {}
                Err(e) if e.code == 404 => {}
                Err(e) => tracing::warn!(apiservice = %name, error = %e.message, "removing a stale APIService failed"),
            }
        }
    }
}

/// The APIServices of the served custom group-versions no built-in serves, as upstream's CRD
/// registration controller makes them (label `automanaged: true`, group priority 1000, version
/// priority 100).
pub fn desired_custom(registry: &Registry) -> Vec<Value> {
    let builtin = k1s_api::resources::group_versions();
    let mut gvs: Vec<(&str, &str)> = Vec::new();
    for r in registry.custom.current().all() {
        if !builtin.contains(&(r.group, r.version)) && !gvs.contains(&(r.group, r.version)) {
            gvs.push((r.group, r.version));
        }
    }
    gvs.into_iter()
        .map(|(group, version)| {
            json!({
                "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                "metadata": {"name": format!("{version}.{group}"), "labels": {AUTOMANAGED_LABEL: "true"}},
                "spec": {"group": group, "version": version, "groupPriorityMinimum": 1000, "versionPriority": 100},
            })
        })
        .collect()
}

/// Keeps the custom group-versions' APIServices: created, repaired, and deleted with the last
/// definition serving them.
pub async fn register_custom(registry: &Registry) {
    reconcile(registry, desired_custom(registry), "true").await;
}

/// The `extension-apiserver-authentication` ConfigMap's data, as kube-apiserver publishes it.
pub fn authentication_data(client_ca_pem: &str, front_proxy: Option<&FrontProxyConfig>) -> Value {
    let mut data = json!({"client-ca-file": client_ca_pem});
    if let Some(fp) = front_proxy {
        data["requestheader-client-ca-file"] = json!(fp.ca_pem);
        data["requestheader-allowed-names"] = json!(format!("[\"{}\"]", super::FRONT_PROXY_CLIENT_NAME));
        data["requestheader-extra-headers-prefix"] = json!("[\"X-Remote-Extra-\"]");
        data["requestheader-group-headers"] = json!("[\"X-Remote-Group\"]");
        data["requestheader-username-headers"] = json!("[\"X-Remote-User\"]");
    }
    data
}

/// Publishes the ConfigMap (created, or its data replaced when it differs) and the Role.
pub async fn publish_authentication(registry: &Registry, client_ca_pem: &str, front_proxy: Option<&FrontProxyConfig>) {
    let data = authentication_data(client_ca_pem, front_proxy);
    if let Some(cm) = k1s_api::resources::find("", "v1", "configmaps") {
        let name = "extension-apiserver-authentication";
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": name, "namespace": "kube-system"}, "data": data});
        let outcome = match registry.get(cm, Some("kube-system"), name) {
            Ok(existing) if existing.get("data") == Some(&data) => Ok(()),
            Ok(mut existing) => {
                existing["data"] = data.clone();
                registry.server_update(cm, existing).await
            }
            Err(_) => registry.ensure(cm, obj).await,
        };
        if let Err(e) = outcome {
            tracing::error!(error = %e.message, "publishing extension-apiserver-authentication failed");
        }
    }
    if let Some(role) = k1s_api::resources::find("rbac.authorization.k8s.io", "v1", "roles") {
        let obj = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "extension-apiserver-authentication-reader", "namespace": "kube-system",
                         "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
                         "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"],
                       "resourceNames": ["extension-apiserver-authentication"]}]});
        if let Err(e) = registry.ensure(role, obj).await {
            tracing::error!(error = %e.message, "creating extension-apiserver-authentication-reader failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_group_version_but_the_aggregators_own_is_registered_with_upstreams_priorities() {
        let names: Vec<String> = desired().iter().map(|o| crate::object::name(o).to_string()).collect();
        for want in ["v1.", "v1.apps", "v2.autoscaling", "v1.autoscaling", "v1.batch", "v1beta1.metrics.k8s.io"] {
            assert!(names.iter().any(|n| n == want), "{want} in {names:?}");
        }
        assert!(!names.iter().any(|n| n.ends_with("apiregistration.k8s.io")), "{names:?}");
        let apps = desired().into_iter().find(|o| crate::object::name(o) == "v1.apps").expect("apps");
        assert_eq!(
            apps["spec"],
            json!({"group": "apps", "version": "v1", "groupPriorityMinimum": 17800, "versionPriority": 15})
        );
        assert_eq!(apps["metadata"]["labels"][AUTOMANAGED_LABEL], "onstart");
        let core = desired().into_iter().find(|o| crate::object::name(o) == "v1.").expect("core");
        assert!(core["spec"].get("group").is_none());
    }

    #[test]
    fn a_users_apiservice_is_left_alone_and_a_drifted_one_repaired() {
        let wanted = desired().into_iter().find(|o| crate::object::name(o) == "v1beta1.metrics.k8s.io").expect("m");
        let mut stored = wanted.clone();
        stored["spec"]["insecureSkipTLSVerify"] = json!(false);
        assert!(leave_alone(&stored, &wanted), "the same spec, defaults written out");
        stored["spec"]["versionPriority"] = json!(5);
        assert!(!leave_alone(&stored, &wanted), "drifted");
        stored["spec"]["service"] = json!({"namespace": "kube-system", "name": "metrics-server", "port": 443});
        assert!(leave_alone(&stored, &wanted), "metrics-server took it over");
        let mut unlabelled = wanted.clone();
        unlabelled["metadata"]["labels"] = json!({});
        unlabelled["spec"]["versionPriority"] = json!(5);
        assert!(leave_alone(&unlabelled, &wanted));
    }
}
