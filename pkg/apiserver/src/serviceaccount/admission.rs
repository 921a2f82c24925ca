//! The `ServiceAccount` admission plugin for pod creation (upstream
//! `plugin/pkg/admission/serviceaccount/admission.go`): defaults `spec.serviceAccountName` to
//! `default`, rejects pods whose ServiceAccount does not exist, and mounts a projected
//! `kube-api-access-<suffix>` volume (token, cluster CA, namespace) into every container.

use super::claims::ObjectGetter;
use super::token_request::WARN_ONLY_EXPIRATION_SECONDS;
use crate::admission::{Attributes, MutatingPlugin, Operation};
use crate::error::ApiError;
use futures::future::BoxFuture;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";
pub const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
pub const VOLUME_NAME_PREFIX: &str = "kube-api-access-";
const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// Lookups of the `default` ServiceAccount are retried this often: the ServiceAccount
/// controller creates it right after its namespace, racing the first pods.
const DEFAULT_ACCOUNT_ATTEMPTS: u32 = 10;

pub struct ServiceAccountAdmission {
    pub objects: Arc<dyn ObjectGetter>,
}

/// Whether a token is mounted: the pod's `automountServiceAccountToken` wins, then the
/// ServiceAccount's, and by default it is.
pub fn should_automount(sa: &Value, pod: &Value) -> bool {
    if let Some(b) = pod.pointer("/spec/automountServiceAccountToken").and_then(Value::as_bool) {
        return b;
    }
    sa.get("automountServiceAccountToken").and_then(Value::as_bool).unwrap_or(true)
}

/// The projected volume upstream mounts (`TokenVolumeSource`), fully defaulted.
pub fn token_volume(name: &str) -> Value {
    json!({
        "name": name,
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": WARN_ONLY_EXPIRATION_SECONDS, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ],
        },
    })
}

/// Adds the token volume (named `generated` unless one is already there) and a read-only
/// mount of it to every init container and container without a mount at [`TOKEN_MOUNT_PATH`].
pub fn mount_service_account_token(pod: &mut Value, generated: &str) {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else { return };
    let existing = spec.get("volumes").and_then(Value::as_array).and_then(|vols| {
        vols.iter()
            .filter_map(|v| v.get("name").and_then(Value::as_str))
            .find(|n| n.starts_with(VOLUME_NAME_PREFIX))
            .map(str::to_string)
    });
    let volume_name = existing.clone().unwrap_or_else(|| generated.to_string());
    let mount = json!({"name": volume_name, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH});
    let mut needs_volume = false;
    for list in ["initContainers", "containers"] {
        let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else { continue };
        for c in containers {
            let Some(c) = c.as_object_mut() else { continue };
            let mounts = c.entry("volumeMounts").or_insert_with(|| json!([]));
            let Some(mounts) = mounts.as_array_mut() else { continue };
            if mounts.iter().any(|m| m.get("mountPath").and_then(Value::as_str) == Some(TOKEN_MOUNT_PATH)) {
                continue;
            }
            mounts.push(mount.clone());
            needs_volume = true;
        }
    }
    if existing.is_none() && needs_volume {
        let vols = spec.entry("volumes").or_insert_with(|| json!([]));
        if !vols.is_array() {
            *vols = json!([]);
        }
        if let Some(vols) = vols.as_array_mut() {
            vols.push(token_volume(&volume_name));
        }
    }
}

/// Image pull secrets of the ServiceAccount, when the pod names none.
fn copy_image_pull_secrets(sa: &Value, pod: &mut Value) {
    let pod_has = pod.pointer("/spec/imagePullSecrets").and_then(Value::as_array).is_some_and(|a| !a.is_empty());
    let Some(secrets) = sa.get("imagePullSecrets").and_then(Value::as_array).filter(|a| !a.is_empty()) else {
        return;
    };
    if pod_has {
        return;
    }
    let names: Vec<Value> = secrets.iter().filter_map(|s| s.get("name")).map(|n| json!({"name": n})).collect();
    if let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) {
        spec.insert("imagePullSecrets".into(), Value::Array(names));
    }
}

/// Mirror pods may not reference ServiceAccounts, secrets or projected tokens.
fn validate_mirror_pod(pod: &Value) -> Result<(), String> {
    if !pod.pointer("/spec/serviceAccountName").and_then(Value::as_str).unwrap_or("").is_empty() {
        return Err("a mirror pod may not reference service accounts".into());
    }
    for v in pod.pointer("/spec/volumes").and_then(Value::as_array).into_iter().flatten() {
        if v.get("secret").is_some_and(|s| !s.is_null()) {
            return Err("a mirror pod may not reference secrets".into());
        }
        for s in v.pointer("/projected/sources").and_then(Value::as_array).into_iter().flatten() {
            if s.get("secret").is_some_and(|s| !s.is_null()) {
                return Err("a mirror pod may not reference secrets".into());
            }
            if s.get("serviceAccountToken").is_some_and(|s| !s.is_null()) {
                return Err("a mirror pod may not use ServiceAccountToken volume projections".into());
            }
        }
    }
    Ok(())
}

impl ServiceAccountAdmission {
    /// The ServiceAccount, retrying `default` a few times (100–200 ms apart) as upstream does.
    async fn service_account(&self, namespace: &str, name: &str) -> Result<Option<Value>, String> {
        let attempts = if name == DEFAULT_SERVICE_ACCOUNT { DEFAULT_ACCOUNT_ATTEMPTS } else { 1 };
        let interval = Duration::from_millis(100 + rand::random_range(0..100));
        for i in 0..attempts {
            if i > 0 {
                tokio::time::sleep(interval).await;
            }
            if let Some(sa) = self.objects.get_object("serviceaccounts", Some(namespace), name)? {
                return Ok(Some(sa));
            }
        }
        Ok(None)
    }

    async fn admit_pod(&self, namespace: &str, pod_name: &str, pod: &mut Value) -> Result<(), ApiError> {
        let forbidden = |msg: String| ApiError::forbidden_message("", "pods", pod_name, msg);
        let mirror = pod.pointer("/metadata/annotations").and_then(|a| a.get(MIRROR_POD_ANNOTATION)).is_some();
        if mirror {
            return validate_mirror_pod(pod).map_err(forbidden);
        }
        // A pod in a namespace that does not exist is NamespaceLifecycle's to reject.
        let ns_exists = self.objects.get_object("namespaces", None, namespace).map_err(ApiError::internal)?.is_some();
        if !ns_exists {
            return Ok(());
        }
        let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else { return Ok(()) };
        let sa_name = match spec.get("serviceAccountName").and_then(Value::as_str).filter(|s| !s.is_empty()) {
            Some(n) => n.to_string(),
            None => {
                spec.insert("serviceAccountName".into(), json!(DEFAULT_SERVICE_ACCOUNT));
                spec.insert("serviceAccount".into(), json!(DEFAULT_SERVICE_ACCOUNT));
                DEFAULT_SERVICE_ACCOUNT.to_string()
            }
        };
        let looked_up = self.service_account(namespace, &sa_name).await;
        let sa = match looked_up {
            Ok(Some(sa)) => sa,
            Ok(None) => {
                return Err(forbidden(format!(
                    "error looking up service account {namespace}/{sa_name}: serviceaccount \"{sa_name}\" not found"
                )))
            }
            Err(e) => return Err(forbidden(format!("error looking up service account {namespace}/{sa_name}: {e}"))),
        };
        if should_automount(&sa, pod) {
            mount_service_account_token(pod, &crate::object::generate_name(VOLUME_NAME_PREFIX));
        }
        copy_image_pull_secrets(&sa, pod);
        Ok(())
    }
}

impl MutatingPlugin for ServiceAccountAdmission {
    fn name(&self) -> &'static str {
        "ServiceAccount"
    }
    fn admit<'a>(&'a self, attrs: &'a mut Attributes<'_>) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            let is_pod_create = attrs.operation == Operation::Create
                && attrs.subresource.is_none()
                && attrs.resource.group.is_empty()
                && attrs.resource.resource == "pods";
            if !is_pod_create {
                return Ok(());
            }
            let namespace = attrs.namespace.unwrap_or("").to_string();
            let name = attrs.name.to_string();
            let Some(pod) = attrs.object.as_deref_mut() else { return Ok(()) };
            self.admit_pod(&namespace, &name, pod).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Objects(Mutex<HashMap<String, Value>>);

    impl Objects {
        fn put(&self, resource: &str, ns: Option<&str>, name: &str, obj: Value) {
            let key = format!("{resource}/{}/{name}", ns.unwrap_or(""));
            self.0.lock().expect("lock").insert(key, obj);
        }
    }

    impl ObjectGetter for Objects {
        fn get_object(&self, resource: &str, ns: Option<&str>, name: &str) -> Result<Option<Value>, String> {
            Ok(self.0.lock().expect("lock").get(&format!("{resource}/{}/{name}", ns.unwrap_or(""))).cloned())
        }
    }

    fn plugin(sa: Option<Value>) -> ServiceAccountAdmission {
        let objects = Objects::default();
        objects.put("namespaces", None, "ns", json!({"metadata": {"name": "ns"}}));
        if let Some(sa) = sa {
            let name = sa["metadata"]["name"].as_str().expect("name").to_string();
            objects.put("serviceaccounts", Some("ns"), &name, sa);
        }
        ServiceAccountAdmission { objects: Arc::new(objects) }
    }

    fn pod() -> Value {
        json!({"metadata": {"name": "p", "namespace": "ns"},
               "spec": {"initContainers": [{"name": "init", "image": "i"}],
                        "containers": [{"name": "a", "image": "i"}, {"name": "b", "image": "i", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}})
    }

    fn sa(name: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "ns", "uid": "u"}})
    }

    #[tokio::test]
    async fn pods_get_the_default_account_and_a_kube_api_access_volume_in_every_container() {
        let p = plugin(Some(sa("default")));
        let mut pod = pod();
        p.admit_pod("ns", "p", &mut pod).await.expect("admitted");
        assert_eq!(pod["spec"]["serviceAccountName"], "default");
        assert_eq!(pod["spec"]["serviceAccount"], "default");
        let vols = pod["spec"]["volumes"].as_array().expect("volumes");
        assert_eq!(vols.len(), 1);
        let name = vols[0]["name"].as_str().expect("name");
        let suffix = name.strip_prefix("kube-api-access-").expect("prefix");
        assert_eq!(suffix.len(), 5);
        assert!(suffix.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()), "{suffix}");
        assert_eq!(vols[0], token_volume(name));
        assert_eq!(vols[0]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"], 3607);
        let mount = json!({"name": name, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH});
        assert_eq!(pod["spec"]["initContainers"][0]["volumeMounts"], json!([mount]));
        assert_eq!(pod["spec"]["containers"][0]["volumeMounts"], json!([mount]));
        assert_eq!(pod["spec"]["containers"][1]["volumeMounts"][1], mount);
    }

    #[tokio::test]
    async fn automount_false_on_the_pod_wins_over_the_account() {
        let mut account = sa("robot");
        account["automountServiceAccountToken"] = json!(true);
        let p = plugin(Some(account));
        let mut pod = pod();
        pod["spec"]["serviceAccountName"] = json!("robot");
        pod["spec"]["automountServiceAccountToken"] = json!(false);
        p.admit_pod("ns", "p", &mut pod).await.expect("admitted");
        assert!(pod["spec"].get("volumes").is_none());
        assert!(pod["spec"]["containers"][0].get("volumeMounts").is_none());
    }

    #[tokio::test]
    async fn automount_false_on_the_account_is_honoured_unless_the_pod_asks() {
        let mut account = sa("default");
        account["automountServiceAccountToken"] = json!(false);
        let p = plugin(Some(account));
        let mut pod = pod();
        p.admit_pod("ns", "p", &mut pod).await.expect("admitted");
        assert!(pod["spec"].get("volumes").is_none());
        let mut asks = self::pod();
        asks["spec"]["automountServiceAccountToken"] = json!(true);
        p.admit_pod("ns", "p", &mut asks).await.expect("admitted");
        assert_eq!(asks["spec"]["volumes"].as_array().map(Vec::len), Some(1));
    }

    #[tokio::test]
    async fn an_existing_mount_at_the_token_path_is_left_alone() {
        let p = plugin(Some(sa("default")));
        let mut pod = json!({"spec": {
            "containers": [{"name": "a", "volumeMounts": [{"name": "mine", "mountPath": TOKEN_MOUNT_PATH}]}],
            "volumes": [{"name": "mine", "emptyDir": {}}]}});
        let before = pod["spec"]["containers"].clone();
        p.admit_pod("ns", "p", &mut pod).await.expect("admitted");
        assert_eq!(pod["spec"]["containers"], before);
        assert_eq!(pod["spec"]["volumes"], json!([{"name": "mine", "emptyDir": {}}]));
        // An existing kube-api-access volume is reused rather than duplicated.
        let mut reuse =
            json!({"spec": {"containers": [{"name": "a"}], "volumes": [token_volume("kube-api-access-abcde")]}});
        mount_service_account_token(&mut reuse, "kube-api-access-zzzzz");
        assert_eq!(reuse["spec"]["volumes"].as_array().map(Vec::len), Some(1));
        assert_eq!(reuse["spec"]["containers"][0]["volumeMounts"][0]["name"], "kube-api-access-abcde");
    }

    #[tokio::test]
    async fn a_missing_account_is_forbidden_with_upstreams_message_and_mirror_pods_are_untouched() {
        let p = plugin(None);
        let mut pod = pod();
        pod["spec"]["serviceAccountName"] = json!("ghost");
        let err = p.admit_pod("ns", "p", &mut pod).await.expect_err("forbidden");
        assert_eq!(err.code, 403);
        assert_eq!(
            err.message,
            "pods \"p\" is forbidden: error looking up service account ns/ghost: serviceaccount \"ghost\" not found"
        );
        let mut mirror = self::pod();
        mirror["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "x"});
        let before = mirror.clone();
        p.admit_pod("ns", "p", &mut mirror).await.expect("mirror pods pass");
        assert_eq!(mirror, before);
        mirror["spec"]["serviceAccountName"] = json!("default");
        assert_eq!(p.admit_pod("ns", "p", &mut mirror).await.map_err(|e| e.code), Err(403));
    }

    #[tokio::test]
    async fn image_pull_secrets_come_from_the_account_when_the_pod_has_none() {
        let mut account = sa("default");
        account["imagePullSecrets"] = json!([{"name": "regcred"}]);
        let p = plugin(Some(account));
        let mut pod = pod();
        p.admit_pod("ns", "p", &mut pod).await.expect("admitted");
        assert_eq!(pod["spec"]["imagePullSecrets"], json!([{"name": "regcred"}]));
    }
}
