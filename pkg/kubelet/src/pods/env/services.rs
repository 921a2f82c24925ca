//! Service environment variables, as upstream's `getServiceEnvVarMap` and
//! `envvars.FromServices`: every Service of the pod's namespace (when
//! `spec.enableServiceLinks` is not false) and, always, the `kubernetes` Service of the
//! `default` namespace; only Services with a ClusterIP (not headless, not ExternalName).
//!
//! The Services come from [`ServiceCache`], a reflector over all Services the kubelet keeps
//! from start-up, so building a container's environment is a store read.

use k8s_openapi::api::core::v1::Service;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Services whose variables every pod gets, whatever `enableServiceLinks` says, when they live
/// in the `default` namespace.
const MASTER_SERVICES: &[&str] = &["kubernetes"];
const MASTER_NAMESPACE: &str = "default";

/// How long a container start waits for the first list of Services before failing (upstream
/// fails at once; the reflector starts with the kubelet, so this only matters right after it).
const SYNC_WAIT: Duration = Duration::from_secs(5);

/// Upstream's `IsServiceIPSet`: a ClusterIP other than empty or `None`.
fn has_cluster_ip(s: &Service) -> bool {
    matches!(s.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()), Some(ip) if !ip.is_empty() && ip != "None")
}

/// Upstream's `makeEnvVariableName`: upper case, `-` becomes `_`.
fn env_name(s: &str) -> String {
    s.replace('-', "_").to_uppercase()
}

/// `net.JoinHostPort`: IPv6 addresses in brackets.
fn host_port(ip: &str, port: i32) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

/// Upstream's `FromServices`: the variables of `services`, in their order.
pub fn from_services<'a>(services: impl IntoIterator<Item = &'a Service>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for svc in services {
        if !has_cluster_ip(svc) {
            continue;
        }
        let Some(spec) = svc.spec.as_ref() else { continue };
        let ip = spec.cluster_ip.as_deref().unwrap_or_default();
        let prefix = env_name(svc.metadata.name.as_deref().unwrap_or_default());
        let ports = spec.ports.as_deref().unwrap_or_default();
        out.push((format!("{prefix}_SERVICE_HOST"), ip.to_string()));
        // Validation gives every Service with a ClusterIP at least one port; upstream would
        // panic on none, here such a Service only gets its host.
        let Some(first) = ports.first() else { continue };
        let port_var = format!("{prefix}_SERVICE_PORT");
        out.push((port_var.clone(), first.port.to_string()));
        // Named ports (only the first may be unnamed).
        for sp in ports {
            if let Some(name) = sp.name.as_deref().filter(|n| !n.is_empty()) {
                out.push((format!("{port_var}_{}", env_name(name)), sp.port.to_string()));
            }
        }
        // Docker link variables.
        for (i, sp) in ports.iter().enumerate() {
            let protocol = sp.protocol.as_deref().filter(|p| !p.is_empty()).unwrap_or("TCP");
            let lower = protocol.to_lowercase();
            let url = format!("{lower}://{}", host_port(ip, sp.port));
            if i == 0 {
                out.push((format!("{prefix}_PORT"), url.clone()));
            }
            let pp = format!("{prefix}_PORT_{}_{}", sp.port, protocol.to_uppercase());
            out.push((pp.clone(), url));
            out.push((format!("{pp}_PROTO"), lower));
            out.push((format!("{pp}_PORT"), sp.port.to_string()));
            out.push((format!("{pp}_ADDR"), ip.to_string()));
        }
    }
    out
}

/// Upstream's `getServiceEnvVarMap`: the Services of `namespace` when `enable_service_links`,
/// projected onto the master Services of `default` (a same-named Service of the pod's own
/// namespace wins). Sorted by Service name, each Service's variables in upstream's order.
pub fn service_env(services: &[Arc<Service>], namespace: &str, enable_service_links: bool) -> Vec<(String, String)> {
    let mut chosen: BTreeMap<&str, &Service> = BTreeMap::new();
    for svc in services {
        if !has_cluster_ip(svc) {
            continue;
        }
        let name = svc.metadata.name.as_deref().unwrap_or_default();
        let ns = svc.metadata.namespace.as_deref().unwrap_or_default();
        if ns == MASTER_NAMESPACE && MASTER_SERVICES.contains(&name) {
            chosen.entry(name).or_insert(svc);
        } else if ns == namespace && enable_service_links {
            chosen.insert(name, svc);
        }
    }
    let mut env: Vec<(String, String)> = Vec::new();
    for (k, v) in from_services(chosen.values().copied()) {
        // A map upstream: a later Service's variable replaces an earlier one of the same name.
        match env.iter_mut().find(|(name, _)| *name == k) {
            Some(slot) => slot.1 = v,
            None => env.push((k, v)),
        }
    }
    env
}

/// The Services have not been listed yet (upstream's message).
#[derive(Debug, thiserror::Error)]
#[error("services have not yet been read at least once, cannot construct envvars")]
pub struct NotSynced;

/// All Services in the cluster, kept by a reflector.
#[derive(Clone)]
pub struct ServiceCache {
    store: Store<Service>,
}

impl ServiceCache {
    /// Starts a reflector over all Services with `client`; it runs until `cancel` fires.
    pub fn spawn(client: kube::Client, cancel: tokio_util::sync::CancellationToken) -> Self {
        use futures::StreamExt;
        let (store, writer) = reflector::store::<Service>();
        let api: kube::Api<Service> = kube::Api::all(client);
        let stream = reflector::reflector(writer, watcher(api, watcher::Config::default()).default_backoff());
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    e = stream.next() => match e {
                        Some(Ok(_)) => {}
                        Some(Err(e)) => tracing::warn!(error = %e, "service watch failed; retrying"),
                        None => break,
                    },
                }
            }
        });
        ServiceCache { store }
    }

    /// A cache over a store filled by the caller (tests).
    pub fn from_store(store: Store<Service>) -> Self {
        ServiceCache { store }
    }

    /// The service variables of a pod in `namespace`; waits briefly for the first list.
    pub async fn env(&self, namespace: &str, enable_service_links: bool) -> Result<Vec<(String, String)>, NotSynced> {
        if tokio::time::timeout(SYNC_WAIT, self.store.wait_until_ready()).await.map(|r| r.is_ok()) != Ok(true) {
            return Err(NotSynced);
        }
        Ok(service_env(&self.store.state(), namespace, enable_service_links))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ServicePort, ServiceSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn port(name: Option<&str>, port: i32, protocol: Option<&str>) -> ServicePort {
        ServicePort {
            name: name.map(str::to_string),
            port,
            protocol: protocol.map(str::to_string),
            ..Default::default()
        }
    }

    fn svc(ns: &str, name: &str, ip: Option<&str>, ports: Vec<ServicePort>) -> Arc<Service> {
        Arc::new(Service {
            metadata: ObjectMeta { name: Some(name.into()), namespace: Some(ns.into()), ..Default::default() },
            spec: Some(ServiceSpec { cluster_ip: ip.map(str::to_string), ports: Some(ports), ..Default::default() }),
            status: None,
        })
    }

    fn kubernetes() -> Arc<Service> {
        svc("default", "kubernetes", Some("10.43.0.1"), vec![port(Some("https"), 443, Some("TCP"))])
    }

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter().map(|(k, val)| (k.to_string(), val.to_string())).collect()
    }

    #[test]
    fn master_service_variables_match_upstream() {
        let env = service_env(&[kubernetes()], "apps", true);
        assert_eq!(
            env,
            pairs(&[
                ("KUBERNETES_SERVICE_HOST", "10.43.0.1"),
                ("KUBERNETES_SERVICE_PORT", "443"),
                ("KUBERNETES_SERVICE_PORT_HTTPS", "443"),
                ("KUBERNETES_PORT", "tcp://10.43.0.1:443"),
                ("KUBERNETES_PORT_443_TCP", "tcp://10.43.0.1:443"),
                ("KUBERNETES_PORT_443_TCP_PROTO", "tcp"),
                ("KUBERNETES_PORT_443_TCP_PORT", "443"),
                ("KUBERNETES_PORT_443_TCP_ADDR", "10.43.0.1"),
            ])
        );
    }

    #[test]
    fn unnamed_named_and_udp_ports_and_name_mangling() {
        let s = svc(
            "apps",
            "my-dns-svc",
            Some("10.43.5.6"),
            vec![port(None, 53, Some("UDP")), port(Some("dns-tcp"), 5353, None)],
        );
        let env = from_services([s.as_ref()]);
        assert_eq!(
            env,
            pairs(&[
                ("MY_DNS_SVC_SERVICE_HOST", "10.43.5.6"),
                ("MY_DNS_SVC_SERVICE_PORT", "53"),
                ("MY_DNS_SVC_SERVICE_PORT_DNS_TCP", "5353"),
                ("MY_DNS_SVC_PORT", "udp://10.43.5.6:53"),
                ("MY_DNS_SVC_PORT_53_UDP", "udp://10.43.5.6:53"),
                ("MY_DNS_SVC_PORT_53_UDP_PROTO", "udp"),
                ("MY_DNS_SVC_PORT_53_UDP_PORT", "53"),
                ("MY_DNS_SVC_PORT_53_UDP_ADDR", "10.43.5.6"),
                ("MY_DNS_SVC_PORT_5353_TCP", "tcp://10.43.5.6:5353"),
                ("MY_DNS_SVC_PORT_5353_TCP_PROTO", "tcp"),
                ("MY_DNS_SVC_PORT_5353_TCP_PORT", "5353"),
                ("MY_DNS_SVC_PORT_5353_TCP_ADDR", "10.43.5.6"),
            ])
        );
    }

    #[test]
    fn ipv6_cluster_ips_are_bracketed_in_urls() {
        let s = svc("apps", "v6", Some("fd00::10"), vec![port(None, 80, Some("SCTP"))]);
        let env: BTreeMap<_, _> = from_services([s.as_ref()]).into_iter().collect();
        assert_eq!(env["V6_PORT"], "sctp://[fd00::10]:80");
        assert_eq!(env["V6_PORT_80_SCTP_ADDR"], "fd00::10");
    }

    #[test]
    fn headless_external_name_and_other_namespaces_are_skipped() {
        let services = vec![
            kubernetes(),
            svc("apps", "web", Some("10.43.0.20"), vec![port(Some("http"), 80, None)]),
            svc("apps", "headless", Some("None"), vec![port(None, 80, None)]),
            svc("apps", "external", None, vec![]),
            svc("apps", "empty-ip", Some(""), vec![port(None, 80, None)]),
            svc("other", "elsewhere", Some("10.43.0.30"), vec![port(None, 80, None)]),
            svc("default", "not-master", Some("10.43.0.40"), vec![port(None, 80, None)]),
        ];
        let env = service_env(&services, "apps", true);
        let prefixes: std::collections::BTreeSet<&str> =
            env.iter().filter_map(|(k, _)| k.strip_suffix("_SERVICE_HOST")).collect();
        assert_eq!(prefixes.into_iter().collect::<Vec<_>>(), vec!["KUBERNETES", "WEB"]);
        // Sorted by Service name.
        assert_eq!(env[0].0, "KUBERNETES_SERVICE_HOST");
        assert!(env.iter().any(|(k, v)| k == "WEB_SERVICE_PORT_HTTP" && v == "80"));
    }

    #[test]
    fn pods_of_default_see_all_its_services() {
        let services = vec![kubernetes(), svc("default", "web", Some("10.43.0.20"), vec![port(None, 80, None)])];
        let env: BTreeMap<_, _> = service_env(&services, "default", true).into_iter().collect();
        assert_eq!(env["WEB_SERVICE_HOST"], "10.43.0.20");
        assert_eq!(env["KUBERNETES_SERVICE_HOST"], "10.43.0.1");
    }

    #[test]
    fn disabled_service_links_keep_only_the_master_services() {
        let services = vec![
            svc("apps", "web", Some("10.43.0.20"), vec![port(None, 80, None)]),
            kubernetes(),
            svc("default", "web", Some("10.43.0.21"), vec![port(None, 80, None)]),
        ];
        for ns in ["apps", "default"] {
            let env = service_env(&services, ns, false);
            assert!(env.iter().all(|(k, _)| k.starts_with("KUBERNETES_")), "{ns}: {env:?}");
            assert_eq!(env.len(), 8, "{ns}: {env:?}");
        }
    }

    #[test]
    fn a_namespace_service_named_kubernetes_replaces_the_master_one() {
        let own = svc("apps", "kubernetes", Some("10.43.9.9"), vec![port(None, 8080, None)]);
        for services in [vec![kubernetes(), own.clone()], vec![own.clone(), kubernetes()]] {
            let env: BTreeMap<_, _> = service_env(&services, "apps", true).into_iter().collect();
            assert_eq!(env["KUBERNETES_SERVICE_HOST"], "10.43.9.9");
            assert_eq!(env["KUBERNETES_SERVICE_PORT"], "8080");
        }
        let env: BTreeMap<_, _> = service_env(&[own, kubernetes()], "apps", false).into_iter().collect();
        assert_eq!(env["KUBERNETES_SERVICE_HOST"], "10.43.0.1");
    }

    #[tokio::test]
    async fn the_cache_reads_its_store_and_fails_before_the_first_list() {
        let (store, mut writer) = reflector::store::<Service>();
        let cache = ServiceCache::from_store(store);
        tokio::time::pause();
        let err = cache.env("apps", true).await.expect_err("not synced");
        assert_eq!(err.to_string(), "services have not yet been read at least once, cannot construct envvars");
        writer.apply_watcher_event(&watcher::Event::Init);
        writer.apply_watcher_event(&watcher::Event::InitApply((*kubernetes()).clone()));
        writer.apply_watcher_event(&watcher::Event::InitDone);
        let env = cache.env("apps", false).await.expect("synced");
        assert_eq!(env.first().map(|(k, v)| (k.as_str(), v.as_str())), Some(("KUBERNETES_SERVICE_HOST", "10.43.0.1")));
    }
}
