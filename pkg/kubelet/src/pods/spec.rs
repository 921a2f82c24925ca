//! Translating a Pod into CRI configs: the sandbox (hostname, DNS, ports, namespaces, cgroup
//! parent) and each container (command, env, mounts, resources, security context).

use crate::Config;
use k1s_api::strategies::containers;
use k1s_cri::v1 as cri;
use k8s_openapi::api::core::v1::{Container, Pod};
use std::collections::HashMap;

pub const LABEL_POD_NAME: &str = "io.kubernetes.pod.name";
pub const LABEL_POD_NAMESPACE: &str = "io.kubernetes.pod.namespace";
pub const LABEL_POD_UID: &str = "io.kubernetes.pod.uid";
pub const LABEL_CONTAINER_NAME: &str = "io.kubernetes.container.name";
pub const ANNOTATION_RESTART_COUNT: &str = "io.kubernetes.container.restartCount";
pub const ANNOTATION_TERMINATION_PATH: &str = "io.kubernetes.container.terminationMessagePath";

pub fn pod_name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or("")
}
pub fn pod_namespace(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or("default")
}
pub fn pod_uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or("")
}

pub fn host_network(pod: &Pod) -> bool {
    pod.spec.as_ref().and_then(|s| s.host_network).unwrap_or(false)
}

/// `/var/log/pods/<ns>_<name>_<uid>`.
pub fn log_directory(cfg: &Config, pod: &Pod) -> std::path::PathBuf {
    cfg.pod_log_dir.join(format!("{}_{}_{}", pod_namespace(pod), pod_name(pod), pod_uid(pod)))
}

/// The resolver configuration for the pod's `dnsPolicy`, as upstream's kubelet builds it.
pub fn dns_config(cfg: &Config, pod: &Pod, host_resolv: &str) -> Option<cri::DnsConfig> {
    let spec = pod.spec.as_ref()?;
    let policy = spec.dns_policy.as_deref().unwrap_or("ClusterFirst");
    let hostnet = host_network(pod);
    let (host_servers, host_searches, host_options) = parse_resolv(host_resolv);
    let mut dns = match policy {
        "None" => cri::DnsConfig::default(),
        "Default" => cri::DnsConfig { servers: host_servers, searches: host_searches, options: host_options },
        "ClusterFirst" if hostnet => {
            cri::DnsConfig { servers: host_servers, searches: host_searches, options: host_options }
        }
        _ => {
            let ns = pod_namespace(pod);
            let d = &cfg.cluster_domain;
            let mut searches = vec![format!("{ns}.svc.{d}"), format!("svc.{d}"), d.clone()];
            searches.extend(host_searches);
            searches.truncate(32);
            cri::DnsConfig {
                servers: cfg.cluster_dns.iter().map(|ip| ip.to_string()).collect(),
                searches,
                options: vec!["ndots:5".into()],
            }
        }
    };
    if let Some(pc) = &spec.dns_config {
        dns.servers.extend(pc.nameservers.clone().unwrap_or_default());
        dns.searches.extend(pc.searches.clone().unwrap_or_default());
        for o in pc.options.clone().unwrap_or_default() {
            let name = o.name.unwrap_or_default();
            dns.options.retain(|x| x.split(':').next() != Some(name.as_str()));
            dns.options.push(match o.value {
                Some(v) => format!("{name}:{v}"),
                None => name,
            });
        }
    }
    Some(dns)
}

fn parse_resolv(text: &str) -> (Vec<String>, Vec<String>, Vec<String>) {
    let (mut s, mut d, mut o) = (Vec::new(), Vec::new(), Vec::new());
    for l in text.lines() {
        let mut f = l.split_whitespace();
        match f.next() {
            Some("nameserver") => s.extend(f.next().map(str::to_string)),
            Some("search") | Some("domain") => d = f.map(str::to_string).collect(),
            Some("options") => o.extend(f.map(str::to_string)),
            _ => {}
        }
    }
    (s, d, o)
}

pub fn pod_labels(pod: &Pod) -> HashMap<String, String> {
    let mut l: HashMap<String, String> = pod.metadata.labels.clone().unwrap_or_default().into_iter().collect();
    l.insert(LABEL_POD_NAME.into(), pod_name(pod).into());
    l.insert(LABEL_POD_NAMESPACE.into(), pod_namespace(pod).into());
    l.insert(LABEL_POD_UID.into(), pod_uid(pod).into());
    l
}

fn namespace_options(pod: &Pod) -> cri::NamespaceOption {
    let spec = pod.spec.as_ref();
    let node = cri::NamespaceMode::Node as i32;
    let podm = cri::NamespaceMode::Pod as i32;
    let containerm = cri::NamespaceMode::Container as i32;
    cri::NamespaceOption {
        network: if host_network(pod) { node } else { podm },
        pid: if spec.and_then(|s| s.host_pid).unwrap_or(false) {
            node
        } else if spec.and_then(|s| s.share_process_namespace).unwrap_or(false) {
            podm
        } else {
            containerm
        },
        ipc: if spec.and_then(|s| s.host_ipc).unwrap_or(false) { node } else { podm },
        ..Default::default()
    }
}

/// The pod's ephemeral containers, in spec order, each with its `targetContainerName`.
pub fn ephemeral_containers(pod: &Pod) -> Vec<(Container, Option<String>)> {
    pod.spec
        .iter()
        .flat_map(|s| s.ephemeral_containers.iter().flatten())
        .map(|e| (containers::ephemeral_as_container(e), e.target_container_name.clone().filter(|t| !t.is_empty())))
        .collect()
}

/// Whether `name` is one of the pod's ephemeral containers.
pub fn is_ephemeral(pod: &Pod, name: &str) -> bool {
    pod.spec.iter().flat_map(|s| s.ephemeral_containers.iter().flatten()).any(|e| e.name == name)
}

/// Puts a container into the process namespace of the container `target_id` (an ephemeral
/// container with `targetContainerName`), as upstream's kubelet does: only where the container
/// would otherwise get its own PID namespace; a pod sharing one namespace (or the host's) keeps it.
pub fn target_pid_namespace(config: &mut cri::ContainerConfig, target_id: &str) {
    let Some(ns) =
        config.linux.as_mut().and_then(|l| l.security_context.as_mut()).and_then(|s| s.namespace_options.as_mut())
    else {
        return;
    };
    if ns.pid == cri::NamespaceMode::Container as i32 {
        ns.pid = cri::NamespaceMode::Target as i32;
        ns.target_id = target_id.to_string();
    }
}

/// The sandbox config of `pod` at `attempt`.
pub fn sandbox_config(cfg: &Config, pod: &Pod, attempt: u32, host_resolv: &str) -> cri::PodSandboxConfig {
    let spec = pod.spec.clone().unwrap_or_default();
    let hostname = if host_network(pod) {
        String::new()
    } else {
        let h = spec.hostname.clone().unwrap_or_else(|| pod_name(pod).to_string());
        h.chars().take(63).collect::<String>().trim_end_matches(['-', '.']).to_string()
    };
    let mut port_mappings = Vec::new();
    for c in &spec.containers {
        for p in c.ports.clone().unwrap_or_default() {
            if let Some(hp) = p.host_port.filter(|h| *h > 0) {
                port_mappings.push(cri::PortMapping {
                    protocol: match p.protocol.as_deref() {
                        Some("UDP") => cri::Protocol::Udp as i32,
                        Some("SCTP") => cri::Protocol::Sctp as i32,
                        _ => cri::Protocol::Tcp as i32,
                    },
                    container_port: p.container_port,
                    host_port: hp,
                    host_ip: p.host_ip.clone().unwrap_or_default(),
                });
            }
        }
    }
    let privileged = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .any(|c| c.security_context.as_ref().and_then(|s| s.privileged).unwrap_or(false));
    let psc = spec.security_context.clone().unwrap_or_default();
    let sysctls: HashMap<String, String> =
        psc.sysctls.clone().unwrap_or_default().into_iter().map(|s| (s.name, s.value)).collect();
    cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: pod_name(pod).into(),
            uid: pod_uid(pod).into(),
            namespace: pod_namespace(pod).into(),
            attempt,
        }),
        hostname,
        log_directory: log_directory(cfg, pod).display().to_string(),
        dns_config: dns_config(cfg, pod, host_resolv),
        port_mappings,
        labels: pod_labels(pod),
        annotations: pod.metadata.annotations.clone().unwrap_or_default().into_iter().collect(),
        linux: Some(cri::LinuxPodSandboxConfig {
            cgroup_parent: super::cgroups::pod_cgroup(&cfg.cgroup_root, pod_uid(pod)),
            security_context: Some(cri::LinuxSandboxSecurityContext {
                namespace_options: Some(namespace_options(pod)),
                run_as_user: psc.run_as_user.map(|v| cri::Int64Value { value: v }),
                run_as_group: psc.run_as_group.map(|v| cri::Int64Value { value: v }),
                supplemental_groups: psc.supplemental_groups.clone().unwrap_or_default(),
                privileged,
                ..Default::default()
            }),
            sysctls,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Milli-units of a CPU quantity (`500m`, `1`, `0.25`).
pub fn cpu_millis(q: &str) -> Option<i64> {
    if let Some(m) = q.strip_suffix('m') {
        return m.parse::<f64>().ok().map(|v| v.ceil() as i64);
    }
    q.parse::<f64>().ok().map(|v| (v * 1000.0).ceil() as i64)
}

/// Bytes of a memory quantity (`64Mi`, `1G`, `1e6`, `128974848`).
pub fn memory_bytes(q: &str) -> Option<i64> {
    const SUFFIXES: &[(&str, f64)] = &[
        ("Ki", 1024.0),
        ("Mi", 1048576.0),
        ("Gi", 1073741824.0),
        ("Ti", 1099511627776.0),
        ("Pi", 1125899906842624.0),
        ("Ei", 1152921504606846976.0),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("E", 1e18),
        ("m", 1e-3),
    ];
    for (s, mul) in SUFFIXES {
        if let Some(n) = q.strip_suffix(s) {
            return n.parse::<f64>().ok().map(|v| (v * mul).ceil() as i64);
        }
    }
    q.parse::<f64>().ok().map(|v| v.ceil() as i64)
}

fn qos_oom_score_adj(pod: &Pod, c: &Container, memory_capacity: i64) -> i64 {
    match pod.status.as_ref().and_then(|s| s.qos_class.as_deref()) {
        Some("Guaranteed") => -997,
        Some("BestEffort") => 1000,
        _ => {
            let req = c
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .and_then(|r| r.get("memory"))
                .and_then(|q| memory_bytes(&q.0))
                .unwrap_or(0);
            if memory_capacity <= 0 {
                return 1000;
            }
            let adj = 1000 - (1000 * req) / memory_capacity;
            adj.clamp(3, 999)
        }
    }
}

/// Inputs to a container config besides the pod and the container.
pub struct ContainerInputs {
    pub image_ref: String,
    pub attempt: u32,
    pub envs: Vec<(String, String)>,
    pub mounts: Vec<cri::Mount>,
    pub memory_capacity: i64,
}

/// Upstream's `ExpandContainerCommandAndArgs`: `$(VAR)` in the command and args expands with
/// the container's final environment (service variables included).
fn expand_all(items: Option<&[String]>, envs: &[(String, String)]) -> Vec<String> {
    let lookup = |name: &str| envs.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    items.unwrap_or_default().iter().map(|s| super::env::expansion::expand(s, lookup)).collect()
}

pub fn container_config(pod: &Pod, c: &Container, inputs: ContainerInputs) -> cri::ContainerConfig {
    let res = c.resources.clone().unwrap_or_default();
    let get =
        |m: &Option<std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
         k: &str| { m.as_ref().and_then(|m| m.get(k)).map(|q| q.0.clone()) };
    let cpu_req = get(&res.requests, "cpu").or_else(|| get(&res.limits, "cpu")).and_then(|q| cpu_millis(&q));
    let cpu_lim = get(&res.limits, "cpu").and_then(|q| cpu_millis(&q));
    let mem_lim = get(&res.limits, "memory").and_then(|q| memory_bytes(&q));
    let resources = cri::LinuxContainerResources {
        cpu_shares: cpu_req.map(|m| (m * 1024 / 1000).max(2)).unwrap_or(2),
        cpu_period: if cpu_lim.is_some() { 100_000 } else { 0 },
        cpu_quota: cpu_lim.map(|m| (m * 100_000 / 1000).max(1000)).unwrap_or(0),
        memory_limit_in_bytes: mem_lim.unwrap_or(0),
        oom_score_adj: qos_oom_score_adj(pod, c, inputs.memory_capacity),
        ..Default::default()
    };
    let sc = c.security_context.clone().unwrap_or_default();
    let psc = pod.spec.as_ref().and_then(|s| s.security_context.clone()).unwrap_or_default();
    let caps = sc.capabilities.clone().unwrap_or_default();
    let security = cri::LinuxContainerSecurityContext {
        capabilities: Some(cri::Capability {
            add_capabilities: caps.add.unwrap_or_default(),
            drop_capabilities: caps.drop.unwrap_or_default(),
            ..Default::default()
        }),
        privileged: sc.privileged.unwrap_or(false),
        namespace_options: Some(namespace_options(pod)),
        run_as_user: sc.run_as_user.or(psc.run_as_user).map(|v| cri::Int64Value { value: v }),
        run_as_group: sc.run_as_group.or(psc.run_as_group).map(|v| cri::Int64Value { value: v }),
        readonly_rootfs: sc.read_only_root_filesystem.unwrap_or(false),
        supplemental_groups: psc.supplemental_groups.clone().unwrap_or_default(),
        no_new_privs: sc.allow_privilege_escalation == Some(false),
        ..Default::default()
    };
    let mut labels: HashMap<String, String> = HashMap::new();
    labels.insert(LABEL_CONTAINER_NAME.into(), c.name.clone());
    labels.insert(LABEL_POD_NAME.into(), pod_name(pod).into());
    labels.insert(LABEL_POD_NAMESPACE.into(), pod_namespace(pod).into());
    labels.insert(LABEL_POD_UID.into(), pod_uid(pod).into());
    let mut annotations: HashMap<String, String> = HashMap::new();
    annotations.insert(ANNOTATION_RESTART_COUNT.into(), inputs.attempt.to_string());
    annotations.insert(
        ANNOTATION_TERMINATION_PATH.into(),
        c.termination_message_path.clone().unwrap_or_else(|| "/dev/termination-log".into()),
    );
    cri::ContainerConfig {
        metadata: Some(cri::ContainerMetadata { name: c.name.clone(), attempt: inputs.attempt }),
        image: Some(cri::ImageSpec { image: inputs.image_ref, ..Default::default() }),
        command: expand_all(c.command.as_deref(), &inputs.envs),
        args: expand_all(c.args.as_deref(), &inputs.envs),
        working_dir: c.working_dir.clone().unwrap_or_default(),
        envs: inputs.envs.into_iter().map(|(key, value)| cri::KeyValue { key, value: value.into_bytes() }).collect(),
        mounts: inputs.mounts,
        labels,
        annotations,
        log_path: format!("{}/{}.log", c.name, inputs.attempt),
        stdin: c.stdin.unwrap_or(false),
        stdin_once: c.stdin_once.unwrap_or(false),
        tty: c.tty.unwrap_or(false),
        linux: Some(cri::LinuxContainerConfig { resources: Some(resources), security_context: Some(security) }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_convert_to_cgroup_units() {
        assert_eq!(cpu_millis("500m"), Some(500));
        assert_eq!(cpu_millis("2"), Some(2000));
        assert_eq!(cpu_millis("0.25"), Some(250));
        assert_eq!(memory_bytes("64Mi"), Some(64 * 1024 * 1024));
        assert_eq!(memory_bytes("1G"), Some(1_000_000_000));
        assert_eq!(memory_bytes("128974848"), Some(128974848));
    }

    #[test]
    fn command_and_args_expand_with_the_final_environment() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "shop", "uid": "u"},
            "spec": {"containers": [{
                "name": "c", "image": "i",
                "command": ["sh", "-c", "echo $(GREETING)"],
                "args": ["$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)", "$$(GREETING)", "$(UNSET)"]
            }]}
        }))
        .expect("pod");
        let c = pod.spec.as_ref().expect("spec").containers[0].clone();
        let envs = vec![
            ("GREETING".to_string(), "hi".to_string()),
            ("KUBERNETES_SERVICE_HOST".into(), "10.43.0.1".into()),
            ("KUBERNETES_SERVICE_PORT".into(), "443".into()),
        ];
        let inputs = ContainerInputs { image_ref: "i".into(), attempt: 0, envs, mounts: vec![], memory_capacity: 0 };
        let cfg = container_config(&pod, &c, inputs);
        assert_eq!(cfg.command, vec!["sh", "-c", "echo hi"]);
        assert_eq!(cfg.args, vec!["10.43.0.1:443", "$(GREETING)", "$(UNSET)"]);
    }

    #[test]
    fn cluster_first_dns_uses_cluster_dns_and_search_paths() {
        let cfg = Config {
            node_name: "n".into(),
            node_ip: "192.0.2.2".parse().expect("ip"),
            pod_cidr: "10.42.0.0/16".into(),
            root_dir: "/tmp/k".into(),
            storage_dir: "/tmp/s".into(),
            pod_log_dir: "/tmp/l".into(),
            log_rotation: Default::default(),
            cluster_dns: vec!["10.43.0.10".parse().expect("ip")],
            cluster_domain: "cluster.local".into(),
            max_pods: 110,
            parallel_starts: 4,
            kubelet_port: 10250,
            cgroup_root: "/k1s".into(),
            registries: None,
            server_tls: crate::server::ServerTls {
                ca_pem: String::new(),
                cert_pem: String::new(),
                key_pem: String::new(),
                reloadable: None,
            },
        };
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "shop", "uid": "u"},
            "spec": {"containers": [{"name": "c", "image": "i"}]}
        }))
        .expect("pod");
        let d = dns_config(&cfg, &pod, "nameserver 1.1.1.1\nsearch example.com\n").expect("dns");
        assert_eq!(d.servers, vec!["10.43.0.10"]);
        assert_eq!(d.searches, vec!["shop.svc.cluster.local", "svc.cluster.local", "cluster.local", "example.com"]);
        assert_eq!(d.options, vec!["ndots:5"]);
    }
}
