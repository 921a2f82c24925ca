//! A container's environment, as upstream's `makeEnvironmentVariables`: `envFrom` sources
//! (with prefix), then `env` in declaration order (`$(VAR)` expansion of values against the
//! variables so far and the service variables; `valueFrom` configMapKeyRef, secretKeyRef,
//! fieldRef, resourceFieldRef), then the service variables the container did not set.
//!
//! Errors carry upstream's messages (`configmap "x" not found`,
//! `couldn't find key k in ConfigMap ns/x`): the worker shows them as
//! `CreateContainerConfigError`.

pub mod expansion;
pub mod fieldpath;
pub mod services;

use super::volumes::{ObjectSource, SourceError};
use fieldpath::{FieldPathError, RuntimeFields};
use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, Secret};
use std::collections::{BTreeMap, HashMap};

/// Why a container's environment could not be built.
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    /// Reading a referenced ConfigMap or Secret failed (`configmap "x" not found`).
    #[error("{0}")]
    Lookup(SourceError),
    /// A referenced key is missing and the reference is not optional.
    #[error("couldn't find key {key} in {kind} {namespace}/{name}")]
    MissingKey { kind: &'static str, namespace: String, name: String, key: String },
    /// A fieldRef or resourceFieldRef could not be resolved.
    #[error("{0}")]
    Downward(FieldPathError),
    /// The Services have not been listed yet.
    #[error(transparent)]
    Services(#[from] services::NotSynced),
}

/// Facts about the node and the sandbox the environment may reference.
#[derive(Clone, Debug, Default)]
pub struct EnvContext {
    /// The node's allocatable resources (`cpu`, `memory`, `ephemeral-storage`) as quantity
    /// strings: the value of `limits.*` for a container without that limit.
    pub node_allocatable: HashMap<String, String>,
    /// The sandbox's IPs, primary first (`status.podIP`, `status.podIPs`); when empty, the
    /// pod's status is used.
    pub pod_ips: Vec<String>,
    /// The node's IPs (`status.hostIP`, `status.hostIPs`); when empty, the pod's status is used.
    pub host_ips: Vec<String>,
}

/// Upstream's relaxed environment variable name rule (GA since v1.34): printable ASCII
/// other than `=`.
fn is_env_var_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| (0x20..0x7f).contains(&b) && b != b'=')
}

/// An insertion-ordered map: later assignments replace the value in place.
#[derive(Default)]
struct OrderedEnv {
    order: Vec<String>,
    values: HashMap<String, String>,
}

impl OrderedEnv {
    fn set(&mut self, k: String, v: String) {
        if self.values.insert(k.clone(), v).is_none() {
            self.order.push(k);
        }
    }

    fn get(&self, k: &str) -> Option<&String> {
        self.values.get(k)
    }
}

/// Memoises the ConfigMaps and Secrets one container references.
struct Lookups<'a> {
    source: &'a dyn ObjectSource,
    namespace: &'a str,
    config_maps: HashMap<String, Option<ConfigMap>>,
    secrets: HashMap<String, Option<Secret>>,
}

impl Lookups<'_> {
    /// `Ok(None)` when the object is missing and `optional`.
    async fn config_map(&mut self, name: &str, optional: bool) -> Result<Option<&ConfigMap>, EnvError> {
        if !self.config_maps.contains_key(name) {
            let got = match self.source.config_map(self.namespace, name).await {
                Ok(cm) => Some(cm),
                Err(e) if e.is_not_found() && optional => None,
                Err(e) => return Err(EnvError::Lookup(e)),
            };
            self.config_maps.insert(name.to_string(), got);
        }
        match self.config_maps.get(name) {
            Some(Some(cm)) => Ok(Some(cm)),
            // Remembered as missing: only an optional reference gets here without an error.
            _ if optional => Ok(None),
            _ => Err(EnvError::Lookup(SourceError::NotFound { resource: "configmap", name: name.to_string() })),
        }
    }

    async fn secret(&mut self, name: &str, optional: bool) -> Result<Option<&Secret>, EnvError> {
        if !self.secrets.contains_key(name) {
            let got = match self.source.secret(self.namespace, name).await {
                Ok(s) => Some(s),
                Err(e) if e.is_not_found() && optional => None,
                Err(e) => return Err(EnvError::Lookup(e)),
            };
            self.secrets.insert(name.to_string(), got);
        }
        match self.secrets.get(name) {
            Some(Some(s)) => Ok(Some(s)),
            _ if optional => Ok(None),
            _ => Err(EnvError::Lookup(SourceError::NotFound { resource: "secret", name: name.to_string() })),
        }
    }
}

/// Builds `container`'s environment, in the order the runtime receives it.
pub async fn container_env(
    source: &dyn ObjectSource,
    pod: &Pod,
    container: &Container,
    service_env: &[(String, String)],
    ctx: &EnvContext,
) -> Result<Vec<(String, String)>, EnvError> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut lookups = Lookups { source, namespace, config_maps: HashMap::new(), secrets: HashMap::new() };
    let mut env = OrderedEnv::default();
    let mut services: Vec<(String, String)> = service_env.to_vec();

    // envFrom first: `env` entries override what it sets.
    for from in container.env_from.iter().flatten() {
        let prefix = from.prefix.as_deref().unwrap_or("");
        let mut skipped = Vec::new();
        let mut add = |k: &str, v: String, env: &mut OrderedEnv| {
            let name = format!("{prefix}{k}");
            if is_env_var_name(&name) {
                env.set(name, v);
            } else {
                skipped.push(name);
            }
        };
        if let Some(r) = &from.config_map_ref {
            if let Some(cm) = lookups.config_map(&r.name, r.optional.unwrap_or(false)).await? {
                let data: BTreeMap<String, String> = cm.data.clone().unwrap_or_default();
                for (k, v) in data {
                    add(&k, v, &mut env);
                }
            }
        } else if let Some(r) = &from.secret_ref {
            if let Some(s) = lookups.secret(&r.name, r.optional.unwrap_or(false)).await? {
                for (k, v) in s.data.clone().unwrap_or_default() {
                    add(&k, String::from_utf8_lossy(&v.0).into_owned(), &mut env);
                }
            }
        }
        if !skipped.is_empty() {
            tracing::warn!(keys = ?skipped, container = %container.name, "envFrom keys skipped: not valid environment variable names");
        }
    }

    let rt = RuntimeFields { pod_ips: &ctx.pod_ips, host_ips: &ctx.host_ips };
    for var in container.env.iter().flatten() {
        let literal = var.value.as_deref().unwrap_or("");
        let value = if !literal.is_empty() {
            expansion::expand(literal, |name| {
                env.get(name).cloned().or_else(|| services.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
            })
        } else if let Some(from) = &var.value_from {
            if let Some(f) = &from.field_ref {
                fieldpath::pod_field(pod, f, rt).map_err(EnvError::Downward)?
            } else if let Some(r) = &from.resource_field_ref {
                fieldpath::container_resource(r, pod, container, &ctx.node_allocatable).map_err(EnvError::Downward)?
            } else if let Some(r) = &from.config_map_key_ref {
                let optional = r.optional.unwrap_or(false);
                let Some(cm) = lookups.config_map(&r.name, optional).await? else { continue };
                match cm.data.as_ref().and_then(|d| d.get(&r.key)) {
                    Some(v) => v.clone(),
                    None if optional => continue,
                    None => {
                        return Err(EnvError::MissingKey {
                            kind: "ConfigMap",
                            namespace: namespace.to_string(),
                            name: r.name.clone(),
                            key: r.key.clone(),
                        })
                    }
                }
            } else if let Some(r) = &from.secret_key_ref {
                let optional = r.optional.unwrap_or(false);
                let Some(s) = lookups.secret(&r.name, optional).await? else { continue };
                match s.data.as_ref().and_then(|d| d.get(&r.key)) {
                    Some(v) => String::from_utf8_lossy(&v.0).into_owned(),
                    None if optional => continue,
                    None => {
                        return Err(EnvError::MissingKey {
                            kind: "Secret",
                            namespace: namespace.to_string(),
                            name: r.name.clone(),
                            key: r.key.clone(),
                        })
                    }
                }
            } else {
                String::new()
            }
        } else {
            String::new()
        };
        // A variable the container sets replaces the service variable of the same name.
        services.retain(|(k, _)| k != &var.name);
        env.set(var.name.clone(), value);
    }

    let mut out: Vec<(String, String)> = Vec::with_capacity(env.order.len() + services.len());
    for k in env.order {
        if let Some(v) = env.values.remove(&k) {
            out.push((k, v));
        }
    }
    for (k, v) in services {
        if !out.iter().any(|(name, _)| name == &k) {
            out.push((k, v));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::volumes::MemorySource;
    use k8s_openapi::api::core::v1::{
        ConfigMapEnvSource, ConfigMapKeySelector, EnvFromSource, EnvVar, EnvVarSource, ObjectFieldSelector, PodSpec,
        PodStatus, ResourceFieldSelector, ResourceRequirements, SecretEnvSource, SecretKeySelector,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use k8s_openapi::ByteString;

    fn source() -> MemorySource {
        let src = MemorySource::default();
        src.put_config_map(ConfigMap {
            metadata: ObjectMeta { name: Some("cfg".into()), namespace: Some("ns".into()), ..Default::default() },
            data: Some(BTreeMap::from([
                ("color".into(), "blue".into()),
                ("size".into(), "L".into()),
                ("1st".into(), "one".into()),
            ])),
            ..Default::default()
        });
        src.put_secret(Secret {
            metadata: ObjectMeta { name: Some("creds".into()), namespace: Some("ns".into()), ..Default::default() },
            data: Some(BTreeMap::from([("password".into(), ByteString(b"s3cr3t".to_vec()))])),
            ..Default::default()
        });
        src
    }

    fn pod() -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                uid: Some("uid-1".into()),
                labels: Some(BTreeMap::from([("app".into(), "web".into())])),
                ..Default::default()
            },
            spec: Some(PodSpec { node_name: Some("n1".into()), ..Default::default() }),
            status: Some(PodStatus::default()),
        }
    }

    fn var(name: &str, value: &str) -> EnvVar {
        EnvVar { name: name.into(), value: Some(value.into()), value_from: None }
    }

    fn from(name: &str, src: EnvVarSource) -> EnvVar {
        EnvVar { name: name.into(), value: None, value_from: Some(src) }
    }

    async fn run(c: &Container, services: &[(String, String)]) -> Result<Vec<(String, String)>, EnvError> {
        let ctx = EnvContext {
            node_allocatable: HashMap::from([("cpu".into(), "2".into()), ("memory".into(), "1Gi".into())]),
            pod_ips: vec!["10.42.0.5".into()],
            host_ips: vec!["192.168.1.5".into()],
        };
        container_env(&source(), &pod(), c, services, &ctx).await
    }

    #[tokio::test]
    async fn values_expand_earlier_variables_and_service_variables() {
        let c = Container {
            name: "c".into(),
            env: Some(vec![
                var("A", "a"),
                var("B", "$(A)-b"),
                var("C", "$$(A) $(MISSING) $(SVC_HOST)"),
                var("D", "$(E)"),
                var("E", "e"),
            ]),
            ..Default::default()
        };
        let services = vec![("SVC_HOST".to_string(), "10.43.0.1".to_string())];
        let env = run(&c, &services).await.expect("env");
        assert_eq!(
            env,
            vec![
                ("A".to_string(), "a".to_string()),
                ("B".into(), "a-b".into()),
                ("C".into(), "$(A) $(MISSING) 10.43.0.1".into()),
                ("D".into(), "$(E)".into()),
                ("E".into(), "e".into()),
                ("SVC_HOST".into(), "10.43.0.1".into()),
            ]
        );
    }

    #[tokio::test]
    async fn env_overrides_env_from_and_service_variables() {
        let c = Container {
            name: "c".into(),
            env_from: Some(vec![
                EnvFromSource {
                    config_map_ref: Some(ConfigMapEnvSource { name: "cfg".into(), optional: None }),
                    prefix: Some("CFG_".into()),
                    secret_ref: None,
                },
                EnvFromSource {
                    config_map_ref: None,
                    prefix: None,
                    secret_ref: Some(SecretEnvSource { name: "creds".into(), optional: None }),
                },
                EnvFromSource {
                    config_map_ref: Some(ConfigMapEnvSource { name: "absent".into(), optional: Some(true) }),
                    prefix: None,
                    secret_ref: None,
                },
            ]),
            env: Some(vec![var("CFG_color", "red"), var("SVC", "mine")]),
            ..Default::default()
        };
        let services = vec![("SVC".to_string(), "svc".to_string())];
        let env = run(&c, &services).await.expect("env");
        let map: HashMap<_, _> = env.iter().cloned().collect();
        assert_eq!(map.get("CFG_color").map(String::as_str), Some("red"));
        assert_eq!(map.get("CFG_size").map(String::as_str), Some("L"));
        assert_eq!(map.get("CFG_1st").map(String::as_str), Some("one"));
        assert_eq!(map.get("password").map(String::as_str), Some("s3cr3t"));
        assert_eq!(map.get("SVC").map(String::as_str), Some("mine"));
        assert_eq!(env.iter().filter(|(k, _)| k == "SVC").count(), 1);
    }

    #[tokio::test]
    async fn key_refs_resolve_and_missing_ones_fail_with_upstream_messages() {
        let cm_ref = |name: &str, key: &str, optional: Option<bool>| EnvVarSource {
            config_map_key_ref: Some(ConfigMapKeySelector { key: key.into(), name: name.into(), optional }),
            ..Default::default()
        };
        let secret_ref = |name: &str, key: &str, optional: Option<bool>| EnvVarSource {
            secret_key_ref: Some(SecretKeySelector { key: key.into(), name: name.into(), optional }),
            ..Default::default()
        };
        let c = Container {
            name: "c".into(),
            env: Some(vec![
                from("COLOR", cm_ref("cfg", "color", None)),
                from("PW", secret_ref("creds", "password", None)),
                from("OPT_KEY", cm_ref("cfg", "nope", Some(true))),
                from("OPT_CM", cm_ref("gone", "x", Some(true))),
            ]),
            ..Default::default()
        };
        let env = run(&c, &[]).await.expect("env");
        assert_eq!(env, vec![("COLOR".to_string(), "blue".to_string()), ("PW".into(), "s3cr3t".into())]);

        let err =
            |src: EnvVarSource| Container { name: "c".into(), env: Some(vec![from("X", src)]), ..Default::default() };
        let msg = |r: Result<Vec<(String, String)>, EnvError>| r.map_err(|e| e.to_string()).err();
        assert_eq!(
            msg(run(&err(cm_ref("gone", "x", None)), &[]).await).as_deref(),
            Some("configmap \"gone\" not found")
        );
        assert_eq!(
            msg(run(&err(secret_ref("gone", "x", None)), &[]).await).as_deref(),
            Some("secret \"gone\" not found")
        );
        assert_eq!(
            msg(run(&err(cm_ref("cfg", "nope", None)), &[]).await).as_deref(),
            Some("couldn't find key nope in ConfigMap ns/cfg")
        );
        assert_eq!(
            msg(run(&err(secret_ref("creds", "nope", None)), &[]).await).as_deref(),
            Some("couldn't find key nope in Secret ns/creds")
        );
    }

    #[tokio::test]
    async fn field_and_resource_refs_use_the_sandbox_and_allocatable() {
        let field = |p: &str| EnvVarSource {
            field_ref: Some(ObjectFieldSelector { api_version: Some("v1".into()), field_path: p.into() }),
            ..Default::default()
        };
        let resource = |r: &str, d: Option<&str>| EnvVarSource {
            resource_field_ref: Some(ResourceFieldSelector {
                container_name: None,
                divisor: d.map(|d| Quantity(d.into())),
                resource: r.into(),
            }),
            ..Default::default()
        };
        let c = Container {
            name: "c".into(),
            env: Some(vec![
                from("POD_NAME", field("metadata.name")),
                from("POD_IP", field("status.podIP")),
                from("HOST_IP", field("status.hostIP")),
                from("NODE", field("spec.nodeName")),
                from("APP", field("metadata.labels['app']")),
                from("CPU_LIMIT", resource("limits.cpu", None)),
                from("MEM_LIMIT_MI", resource("limits.memory", Some("1Mi"))),
                from("MEM_REQUEST", resource("requests.memory", None)),
            ]),
            resources: Some(ResourceRequirements {
                limits: Some(BTreeMap::from([("memory".into(), Quantity("100M".into()))])),
                ..Default::default()
            }),
            ..Default::default()
        };
        let env: HashMap<_, _> = run(&c, &[]).await.expect("env").into_iter().collect();
        assert_eq!(env["POD_NAME"], "p");
        assert_eq!(env["POD_IP"], "10.42.0.5");
        assert_eq!(env["HOST_IP"], "192.168.1.5");
        assert_eq!(env["NODE"], "n1");
        assert_eq!(env["APP"], "web");
        assert_eq!(env["CPU_LIMIT"], "2");
        // 100M / 1Mi = 95.37 → 96.
        assert_eq!(env["MEM_LIMIT_MI"], "96");
        assert_eq!(env["MEM_REQUEST"], "0");
    }

    #[tokio::test]
    async fn service_variables_follow_user_env_and_env_from_wins() {
        use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
        let svc = |ns: &str, name: &str, ip: &str| {
            std::sync::Arc::new(Service {
                metadata: ObjectMeta { name: Some(name.into()), namespace: Some(ns.into()), ..Default::default() },
                spec: Some(ServiceSpec {
                    cluster_ip: Some(ip.into()),
                    ports: Some(vec![ServicePort { name: Some("http".into()), port: 80, ..Default::default() }]),
                    ..Default::default()
                }),
                status: None,
            })
        };
        let all = vec![svc("default", "kubernetes", "10.43.0.1"), svc("ns", "web", "10.43.0.7")];
        let services = services::service_env(&all, "ns", true);
        let c = Container {
            name: "c".into(),
            env_from: Some(vec![EnvFromSource {
                config_map_ref: Some(ConfigMapEnvSource { name: "cfg".into(), optional: None }),
                prefix: Some("WEB_SERVICE_".into()),
                secret_ref: None,
            }]),
            env: Some(vec![
                var("WEB_SERVICE_HOST", "mine"),
                var("URL", "http://$(WEB_SERVICE_HOST):$(WEB_SERVICE_PORT)/$(KUBERNETES_PORT_80_TCP_PROTO)"),
            ]),
            ..Default::default()
        };
        let env = run(&c, &services).await.expect("env");
        let map: HashMap<_, _> = env.iter().cloned().collect();
        assert_eq!(map.len(), env.len(), "no duplicate names: {env:?}");
        // User env overrides the service variable; envFrom keys shadow service variables too.
        assert_eq!(map["WEB_SERVICE_HOST"], "mine");
        assert_eq!(map["WEB_SERVICE_color"], "blue");
        assert_eq!(map["URL"], "http://mine:80/tcp");
        assert_eq!(map["WEB_SERVICE_PORT_HTTP"], "80");
        assert_eq!(map["WEB_PORT"], "tcp://10.43.0.7:80");
        assert_eq!(map["KUBERNETES_SERVICE_HOST"], "10.43.0.1");
        // Declared variables first, then the remaining service variables.
        let first_service = env.iter().position(|(k, _)| k == "KUBERNETES_SERVICE_HOST").expect("kubernetes");
        assert!(env.iter().position(|(k, _)| k == "URL").expect("url") < first_service);
    }

    #[tokio::test]
    async fn a_variable_without_value_or_source_is_empty() {
        let c = Container {
            name: "c".into(),
            env: Some(vec![EnvVar { name: "EMPTY".into(), value: None, value_from: None }]),
            ..Default::default()
        };
        assert_eq!(run(&c, &[]).await.expect("env"), vec![("EMPTY".to_string(), String::new())]);
    }
}
