//! `GET /metrics/resource`: the kubelet's resource metrics endpoint, in the Prometheus text
//! format and with the metric names of upstream's (`pkg/kubelet/metrics/collectors/
//! resource_metrics.go`), which is what metrics-server scrapes: cumulative CPU seconds and the
//! memory working set of the node and of every running container, and of their pods.
//!
//! Containers are measured by the runtime (CRI `ListContainerStats`); the node from
//! `/proc/stat` and `/proc/meminfo`.

use k1s_cri::v1 as cri;
use k1s_cri::RuntimeService;
use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::pods::spec::{LABEL_CONTAINER_NAME, LABEL_POD_NAME, LABEL_POD_NAMESPACE};

/// CPU time and memory working set at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Usage {
    pub cpu_seconds: f64,
    pub working_set_bytes: u64,
    /// Milliseconds since the Unix epoch.
    pub timestamp_ms: i64,
}

/// The node's usage: all CPUs' busy time from the first line of `/proc/stat` (in `USER_HZ`
/// ticks, 100 per second on Linux), and memory in use less the inactive page cache, as the
/// kubelet's root-cgroup working set is.
pub fn node_usage(proc_stat: &str, meminfo: &str, timestamp_ms: i64) -> Option<Usage> {
    let cpu = proc_stat.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: Vec<u64> = cpu.split_whitespace().skip(1).filter_map(|v| v.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal: idle and iowait are not usage.
    let busy: u64 = ticks.iter().enumerate().filter(|(i, _)| *i != 3 && *i != 4).take(6).map(|(_, v)| v).sum();
    let kib = |name: &str| -> Option<u64> {
        meminfo.lines().find_map(|l| {
            let rest = l.strip_prefix(name)?.strip_prefix(':')?;
            rest.split_whitespace().next()?.parse().ok()
        })
    };
    let usage = kib("MemTotal")?.saturating_sub(kib("MemFree")?);
    let working_set = usage.saturating_sub(kib("Inactive(file)").unwrap_or(0));
    Some(Usage { cpu_seconds: busy as f64 / 100.0, working_set_bytes: working_set * 1024, timestamp_ms })
}

/// A container's usage from the runtime, by (namespace, pod, container); `None` for stats
/// without the kubelet's labels or without CPU and memory figures.
fn container_usage(s: &cri::ContainerStats) -> Option<((String, String, String), Usage)> {
    let labels = &s.attributes.as_ref()?.labels;
    let key = (
        labels.get(LABEL_POD_NAMESPACE)?.clone(),
        labels.get(LABEL_POD_NAME)?.clone(),
        labels.get(LABEL_CONTAINER_NAME)?.clone(),
    );
    let cpu = s.cpu.as_ref()?;
    let mem = s.memory.as_ref()?;
    Some((
        key,
        Usage {
            cpu_seconds: cpu.usage_core_nano_seconds.as_ref()?.value as f64 / 1e9,
            working_set_bytes: mem.working_set_bytes.as_ref()?.value,
            timestamp_ms: cpu.timestamp / 1_000_000,
        },
    ))
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The metrics document for the node's usage and the runtime's container stats.
pub fn render(node: Option<Usage>, stats: &[cri::ContainerStats]) -> String {
    let mut containers: BTreeMap<(String, String, String), Usage> = BTreeMap::new();
    for (key, usage) in stats.iter().filter_map(container_usage) {
        containers.insert(key, usage);
    }
    let mut pods: BTreeMap<(String, String), Usage> = BTreeMap::new();
    for ((ns, pod, _), u) in &containers {
        let p = pods.entry((ns.clone(), pod.clone())).or_default();
        p.cpu_seconds += u.cpu_seconds;
        p.working_set_bytes += u.working_set_bytes;
        p.timestamp_ms = p.timestamp_ms.max(u.timestamp_ms);
    }
    let mut out = String::new();
    let mut family = |name: &str, kind: &str, help: &str, rows: Vec<(String, String, i64)>| {
        let _ = writeln!(out, "# HELP {name} [STABLE] {help}\n# TYPE {name} {kind}");
        for (labels, value, ts) in rows {
            let _ = writeln!(out, "{name}{labels} {value} {ts}");
        }
    };
    let c_labels = |(ns, pod, c): &(String, String, String)| {
        format!("{{container=\"{}\",namespace=\"{}\",pod=\"{}\"}}", escape(c), escape(ns), escape(pod))
    };
    let p_labels = |(ns, pod): &(String, String)| format!("{{namespace=\"{}\",pod=\"{}\"}}", escape(ns), escape(pod));
    family(
        "container_cpu_usage_seconds_total",
        "counter",
        "Cumulative cpu time consumed by the container in core-seconds",
        containers.iter().map(|(k, u)| (c_labels(k), format!("{}", u.cpu_seconds), u.timestamp_ms)).collect(),
    );
    family(
        "container_memory_working_set_bytes",
        "gauge",
        "Current working set of the container in bytes",
        containers.iter().map(|(k, u)| (c_labels(k), u.working_set_bytes.to_string(), u.timestamp_ms)).collect(),
    );
    family(
        "node_cpu_usage_seconds_total",
        "counter",
        "Cumulative cpu time consumed by the node in core-seconds",
        node.iter().map(|u| (String::new(), format!("{}", u.cpu_seconds), u.timestamp_ms)).collect(),
    );
    family(
        "node_memory_working_set_bytes",
        "gauge",
        "Current working set of the node in bytes",
        node.iter().map(|u| (String::new(), u.working_set_bytes.to_string(), u.timestamp_ms)).collect(),
    );
    family(
        "pod_cpu_usage_seconds_total",
        "counter",
        "Cumulative cpu time consumed by the pod in core-seconds",
        pods.iter().map(|(k, u)| (p_labels(k), format!("{}", u.cpu_seconds), u.timestamp_ms)).collect(),
    );
    family(
        "pod_memory_working_set_bytes",
        "gauge",
        "Current working set of the pod in bytes",
        pods.iter().map(|(k, u)| (p_labels(k), u.working_set_bytes.to_string(), u.timestamp_ms)).collect(),
    );
    out
}

/// Measures the node and asks the runtime for its containers' stats.
pub async fn resource_metrics(rt: &dyn RuntimeService) -> Result<String, k1s_cri::CriError> {
    // Running containers only: an exited instance of a restarted container is not its usage.
    let running = cri::ContainerFilter {
        state: Some(cri::ContainerStateValue { state: cri::ContainerState::ContainerRunning as i32 }),
        ..Default::default()
    };
    let ids: std::collections::HashSet<String> = rt
        .list_containers(cri::ListContainersRequest { filter: Some(running) })
        .await?
        .containers
        .into_iter()
        .map(|c| c.id)
        .collect();
    let mut stats = rt.list_container_stats(cri::ListContainerStatsRequest { filter: None }).await?.stats;
    stats.retain(|s| s.attributes.as_ref().is_some_and(|a| ids.contains(&a.id)));
    let now_ms = jiff::Timestamp::now().as_millisecond();
    let node = match (std::fs::read_to_string("/proc/stat"), std::fs::read_to_string("/proc/meminfo")) {
        (Ok(stat), Ok(mem)) => node_usage(&stat, &mem, now_ms),
        _ => None,
    };
    Ok(render(node, &stats))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_usage_counts_busy_ticks_and_memory_less_inactive_page_cache() {
        let stat = "cpu  100 20 30 5000 40 5 6 7 0 0\ncpu0 50 10 15 2500 20 2 3 3 0 0\n";
        let mem =
            "MemTotal:       1000 kB\nMemFree:         300 kB\nMemAvailable:    600 kB\nInactive(file):  100 kB\n";
        let u = node_usage(stat, mem, 42).expect("usage");
        assert_eq!(u.cpu_seconds, 1.68, "user+nice+system+irq+softirq+steal = 168 ticks");
        assert_eq!(u.working_set_bytes, 600 * 1024);
        assert_eq!(u.timestamp_ms, 42);
        assert_eq!(node_usage("", mem, 0), None);
    }

    #[test]
    fn containers_and_their_pods_are_rendered_with_upstreams_metric_names() {
        let stats = |ns: &str, pod: &str, c: &str, cpu_ns: u64, ws: u64| cri::ContainerStats {
            attributes: Some(cri::ContainerAttributes {
                labels: [(LABEL_POD_NAMESPACE, ns), (LABEL_POD_NAME, pod), (LABEL_CONTAINER_NAME, c)]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                ..Default::default()
            }),
            cpu: Some(cri::CpuUsage {
                timestamp: 5_000_000_000,
                usage_core_nano_seconds: Some(cri::UInt64Value { value: cpu_ns }),
                ..Default::default()
            }),
            memory: Some(cri::MemoryUsage {
                timestamp: 5_000_000_000,
                working_set_bytes: Some(cri::UInt64Value { value: ws }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let all = [
            stats("default", "web", "app", 1_500_000_000, 1024),
            stats("default", "web", "side", 500_000_000, 2048),
            stats("kube-system", "dns", "dns", 250_000_000, 4096),
            cri::ContainerStats::default(),
        ];
        let node = Usage { cpu_seconds: 12.5, working_set_bytes: 999, timestamp_ms: 7 };
        let text = render(Some(node), &all);
        for line in [
            "# TYPE container_cpu_usage_seconds_total counter",
            "container_cpu_usage_seconds_total{container=\"app\",namespace=\"default\",pod=\"web\"} 1.5 5000",
            "container_memory_working_set_bytes{container=\"side\",namespace=\"default\",pod=\"web\"} 2048 5000",
            "node_cpu_usage_seconds_total 12.5 7",
            "node_memory_working_set_bytes 999 7",
            "pod_cpu_usage_seconds_total{namespace=\"default\",pod=\"web\"} 2 5000",
            "pod_memory_working_set_bytes{namespace=\"default\",pod=\"web\"} 3072 5000",
            "pod_memory_working_set_bytes{namespace=\"kube-system\",pod=\"dns\"} 4096 5000",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing from\n{text}");
        }
        assert_eq!(text.lines().filter(|l| l.starts_with("container_cpu")).count(), 3, "unlabelled stats are left out");
    }
}
