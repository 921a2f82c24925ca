//! The resource metrics API (`metrics.k8s.io/v1beta1`) that `kubectl top` reads, served the way
//! metrics-server serves it: each node's kubelet is scraped at `/metrics/resource`, and CPU use
//! is the rate between two scrapes (the window), memory the newest working set.
//!
//! Scrapes happen on request and are reused for 15 s (metrics-server's resolution). When a node
//! has no earlier scrape to compare with (the first request, or one after a long pause), a
//! second scrape is taken a second after the first, so the first `kubectl top` answers at once
//! instead of "metrics not available yet".

use crate::endpoints::reply::respond_json;
use crate::endpoints::Body;
use crate::error::ApiError;
use crate::kubelet_proxy::KubeletClient;
use crate::registry::Registry;
use crate::registry::{builtin, ListOptions};
use http::{HeaderMap, Method, Response, StatusCode};
use http_body_util::BodyExt;
use k1s_api::resources::ResourceInfo;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

/// How long a scrape is reused.
const RESOLUTION: Duration = Duration::from_secs(15);
/// The shortest window a rate is computed over.
const MIN_WINDOW: Duration = Duration::from_secs(1);
/// An earlier scrape older than this is not compared with.
const STALE: Duration = Duration::from_secs(120);

/// Cumulative CPU seconds, working set bytes and the sample time (ms since the epoch).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Sample {
    cpu_seconds: f64,
    working_set: u64,
    timestamp_ms: i64,
}

/// One scrape of a kubelet.
#[derive(Clone, Debug, Default, PartialEq)]
struct Scrape {
    node: Option<Sample>,
    /// By (namespace, pod, container).
    containers: BTreeMap<(String, String, String), Sample>,
}

/// The label values of a Prometheus sample line's `{…}`.
fn parse_labels(s: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let mut rest = s;
    while let Some((name, after)) = rest.split_once("=\"") {
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, other)) => value.push(other),
                    None => {}
                },
                '"' => {
                    end = i + 1;
                    break;
                }
                c => value.push(c),
            }
        }
        out.insert(name.trim_start_matches(',').trim().to_string(), value);
        rest = &after[end..];
    }
    out
}

/// A container (namespace, pod, container), or the node (`None`).
type Subject = Option<(String, String, String)>;

/// Reads the kubelet's resource metrics (Prometheus text format).
fn parse(text: &str) -> Scrape {
    let mut cpu: BTreeMap<Subject, (f64, i64)> = BTreeMap::new();
    let mut mem: BTreeMap<Subject, (u64, i64)> = BTreeMap::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let (name, labels, rest) = match line.find('{') {
            Some(open) => match line[open..].rfind('}') {
                Some(close) => (&line[..open], parse_labels(&line[open + 1..open + close]), &line[open + close + 1..]),
                None => continue,
            },
            None => match line.split_once(' ') {
                Some((name, rest)) => (name, HashMap::new(), rest),
                None => continue,
            },
        };
        let mut fields = rest.split_whitespace();
        let Some(value) = fields.next().and_then(|v| v.parse::<f64>().ok()).filter(|v| v.is_finite()) else {
            continue;
        };
        let ts = fields.next().and_then(|t| t.parse::<i64>().ok()).unwrap_or(0);
        let key = match name {
            "node_cpu_usage_seconds_total" | "node_memory_working_set_bytes" => None,
            "container_cpu_usage_seconds_total" | "container_memory_working_set_bytes" => {
                match (labels.get("namespace"), labels.get("pod"), labels.get("container")) {
                    (Some(ns), Some(pod), Some(c)) => Some((ns.clone(), pod.clone(), c.clone())),
                    _ => continue,
                }
            }
            _ => continue,
        };
        if name.contains("_cpu_") {
            cpu.insert(key, (value, ts));
        } else {
            mem.insert(key, (value.max(0.0) as u64, ts));
        }
    }
    let mut scrape = Scrape::default();
    for (key, (cpu_seconds, timestamp_ms)) in cpu {
        let Some(&(working_set, _)) = mem.get(&key) else { continue };
        let sample = Sample { cpu_seconds, working_set, timestamp_ms };
        match key {
            None => scrape.node = Some(sample),
            Some(k) => {
                scrape.containers.insert(k, sample);
            }
        }
    }
    scrape
}

/// CPU in nanocores between two samples, and the window in milliseconds; `None` when the
/// counter went back (a restarted container) or no time passed.
fn rate(prev: &Sample, cur: &Sample) -> Option<(u64, i64)> {
    let window_ms = cur.timestamp_ms - prev.timestamp_ms;
    if window_ms <= 0 || cur.cpu_seconds < prev.cpu_seconds {
        return None;
    }
    let nanocores = (cur.cpu_seconds - prev.cpu_seconds) * 1e9 / (window_ms as f64 / 1000.0);
    Some((nanocores.round() as u64, window_ms))
}

fn cpu_quantity(nanocores: u64) -> String {
    format!("{nanocores}n")
}

/// Bytes as a binary-SI quantity, as upstream formats memory.
fn memory_quantity(bytes: u64) -> String {
    if bytes > 0 && bytes.is_multiple_of(1024) {
        format!("{}Ki", bytes / 1024)
    } else {
        bytes.to_string()
    }
}

/// A window as Go prints a `time.Duration` ("15.003s", "1s", "500ms").
fn go_duration(ms: i64) -> String {
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let (s, frac) = (ms / 1000, ms % 1000);
    if frac == 0 {
        format!("{s}s")
    } else {
        format!("{s}.{}s", format!("{frac:03}").trim_end_matches('0'))
    }
}

fn rfc3339(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms).map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()).unwrap_or_default()
}

/// The last two scrapes of each node.
#[derive(Default)]
pub struct Cache {
    nodes: tokio::sync::Mutex<HashMap<String, Vec<(Instant, Scrape)>>>,
}

async fn scrape(kubelet: Option<&KubeletClient>, node: &Value) -> Result<Scrape, ApiError> {
    let unavailable = |msg: String| ApiError::new(503, "ServiceUnavailable", msg);
    let client = kubelet.ok_or_else(|| unavailable("the API server has no kubelet client".into()))?;
    let target =
        crate::kubelet_proxy::target_of(node).ok_or_else(|| unavailable("the node has no usable address".into()))?;
    let resp = client
        .send(&target, Method::GET, "/metrics/resource", HeaderMap::new())
        .await
        .map_err(|e| unavailable(k1s_api::errors::chain(&e)))?;
    let status = resp.status();
    let body = resp.into_body().collect().await.map_err(|e| unavailable(e.to_string()))?.to_bytes();
    if status != StatusCode::OK {
        return Err(unavailable(format!("the kubelet answered {status}: {}", String::from_utf8_lossy(&body).trim())));
    }
    Ok(parse(&String::from_utf8_lossy(&body)))
}

/// The two scrapes of `node` to compute rates between, scraping when the newest is older than
/// [`RESOLUTION`].
async fn scrapes(kubelet: Option<&KubeletClient>, cache: &Cache, node: &Value) -> Result<(Scrape, Scrape), ApiError> {
    let name = node.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
    let mut nodes = cache.nodes.lock().await;
    let kept = nodes.entry(name).or_default();
    kept.retain(|(at, _)| at.elapsed() < STALE);
    if kept.last().is_none_or(|(at, _)| at.elapsed() >= RESOLUTION) {
        kept.push((Instant::now(), scrape(kubelet, node).await?));
    }
    if kept.len() < 2 {
        if let Some((at, _)) = kept.last() {
            tokio::time::sleep(MIN_WINDOW.saturating_sub(at.elapsed())).await;
        }
        kept.push((Instant::now(), scrape(kubelet, node).await?));
    }
    let n = kept.len();
    kept.drain(..n.saturating_sub(2));
    match kept.as_slice() {
        [(_, prev), (_, cur)] => Ok((prev.clone(), cur.clone())),
        _ => Err(ApiError::internal("metrics scrapes missing")),
    }
}

fn node_metrics(node: &Value, prev: &Scrape, cur: &Scrape) -> Option<Value> {
    let (p, c) = (prev.node.as_ref()?, cur.node.as_ref()?);
    let (nanocores, window) = rate(p, c)?;
    Some(json!({
        "metadata": {"name": node.pointer("/metadata/name"), "creationTimestamp": crate::object::now_rfc3339(),
                     "labels": node.pointer("/metadata/labels").cloned().unwrap_or_else(|| json!({}))},
        "timestamp": rfc3339(c.timestamp_ms),
        "window": go_duration(window),
        "usage": {"cpu": cpu_quantity(nanocores), "memory": memory_quantity(c.working_set)},
    }))
}

/// A pod's metrics: every container of its spec that has two samples (metrics-server leaves a
/// pod out while any of them lacks one).
fn pod_metrics(pod: &Value, prev: &Scrape, cur: &Scrape) -> Option<Value> {
    let ns = pod.pointer("/metadata/namespace").and_then(Value::as_str)?;
    let name = pod.pointer("/metadata/name").and_then(Value::as_str)?;
    let mut containers = Vec::new();
    let (mut window, mut timestamp) = (0, 0);
    for c in pod.pointer("/spec/containers").and_then(Value::as_array)? {
        let cname = c.get("name").and_then(Value::as_str)?;
        let key = (ns.to_string(), name.to_string(), cname.to_string());
        let (p, s) = (prev.containers.get(&key)?, cur.containers.get(&key)?);
        let (nanocores, w) = rate(p, s)?;
        window = window.max(w);
        timestamp = timestamp.max(s.timestamp_ms);
        containers.push(
            json!({"name": cname, "usage": {"cpu": cpu_quantity(nanocores), "memory": memory_quantity(s.working_set)}}),
        );
    }
    if containers.is_empty() {
        return None;
    }
    Some(json!({
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": crate::object::now_rfc3339(),
                     "labels": pod.pointer("/metadata/labels").cloned().unwrap_or_else(|| json!({}))},
        "timestamp": rfc3339(timestamp),
        "window": go_duration(window),
        "containers": containers,
    }))
}

/// `get` and `list` of `nodes` and `pods` in `metrics.k8s.io/v1beta1`; label and field
/// selectors select the nodes and pods as they would in core/v1: read from `registry`, scraped
/// through `kubelet` (none: 503), the scrapes kept in `cache`.
pub(crate) async fn handle(
    registry: &Registry,
    kubelet: Option<&KubeletClient>,
    cache: &Cache,
    res: &'static ResourceInfo,
    namespace: Option<&str>,
    name: Option<&str>,
    opts: &ListOptions,
) -> Result<Response<Body>, ApiError> {
    let pods = res.resource == "pods";
    let source = builtin("", "v1", if pods { "pods" } else { "nodes" })?;
    let kind = if pods { "podmetrics" } else { "nodemetrics" };
    let objects: Vec<Value> = match name {
        Some(name) => match registry.get(source, namespace, name) {
            Ok(o) => vec![o],
            // metrics-server names its own resource.
            Err(e) if e.code == 404 => return Err(ApiError::not_found(res.group, kind, name)),
            Err(e) => return Err(e),
        },
        None => {
            let all = ListOptions {
                label_selector: opts.label_selector.clone(),
                field_selector: opts.field_selector.clone(),
                ..Default::default()
            };
            registry.list(source, namespace, &all)?.items
        }
    };
    // Only the nodes asked about (or running the pods asked about) are scraped.
    let listed: Vec<Value>;
    let nodes: &[Value] = if pods {
        let wanted: HashSet<&str> =
            objects.iter().filter_map(|p| p.pointer("/spec/nodeName").and_then(Value::as_str)).collect();
        listed = registry
            .list(builtin("", "v1", "nodes")?, None, &ListOptions::default())?
            .items
            .into_iter()
            .filter(|n| n.pointer("/metadata/name").and_then(Value::as_str).is_some_and(|n| wanted.contains(n)))
            .collect();
        &listed
    } else {
        &objects
    };
    let mut by_node: HashMap<String, (Scrape, Scrape)> = HashMap::new();
    for node in nodes {
        let name = node.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        match scrapes(kubelet, cache, node).await {
            Ok(pair) => {
                by_node.insert(name.to_string(), pair);
            }
            Err(e) => tracing::warn!(node = name, error = %e.message, "scraping the kubelet's resource metrics failed"),
        }
    }
    let items: Vec<Value> = objects
        .iter()
        .filter_map(|o| {
            let node = if pods { o.pointer("/spec/nodeName") } else { o.pointer("/metadata/name") };
            let (prev, cur) = by_node.get(node.and_then(Value::as_str)?)?;
            if pods {
                pod_metrics(o, prev, cur)
            } else {
                node_metrics(o, prev, cur)
            }
        })
        .collect();
    let api_version = res.api_version();
    if let Some(name) = name {
        let mut item = items.into_iter().next().ok_or_else(|| ApiError::not_found(res.group, kind, name))?;
        item["kind"] = json!(res.kind);
        item["apiVersion"] = json!(api_version);
        return Ok(respond_json(StatusCode::OK, &item));
    }
    Ok(respond_json(
        StatusCode::OK,
        &json!({"kind": res.list_kind, "apiVersion": api_version, "metadata": {}, "items": items}),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="app",namespace="default",pod="web"} 1.5 5000
container_cpu_usage_seconds_total{container="odd \"name\"",namespace="default",pod="web"} 0.5 5000
container_memory_working_set_bytes{container="app",namespace="default",pod="web"} 2.097152e+06 5000
container_memory_working_set_bytes{container="odd \"name\"",namespace="default",pod="web"} 1000 5000
node_cpu_usage_seconds_total 100 4000
node_memory_working_set_bytes 1.073741824e+09 4000
pod_cpu_usage_seconds_total{namespace="default",pod="web"} 2 5000
scrape_error 0
"#;

    #[test]
    fn kubelet_metrics_are_read_by_name_and_labels() {
        let s = parse(TEXT);
        assert_eq!(s.node, Some(Sample { cpu_seconds: 100.0, working_set: 1 << 30, timestamp_ms: 4000 }));
        let key = |c: &str| ("default".to_string(), "web".to_string(), c.to_string());
        assert_eq!(s.containers[&key("app")], Sample { cpu_seconds: 1.5, working_set: 2 << 20, timestamp_ms: 5000 });
        assert_eq!(s.containers[&key("odd \"name\"")].working_set, 1000, "escaped label values");
        assert_eq!(s.containers.len(), 2, "pod sums are not containers");
        assert_eq!(parse("garbage\n{}\nnode_cpu_usage_seconds_total x\n"), Scrape::default());
    }

    #[test]
    fn usage_is_the_rate_between_two_scrapes_in_upstreams_formats() {
        let prev = Sample { cpu_seconds: 1.0, working_set: 0, timestamp_ms: 10_000 };
        let cur = Sample { cpu_seconds: 1.25, working_set: 0, timestamp_ms: 12_500 };
        assert_eq!(rate(&prev, &cur), Some((100_000_000, 2500)), "0.25 s of CPU in 2.5 s = 100m");
        assert_eq!(rate(&cur, &prev), None, "a counter that went back (restart) has no rate");
        assert_eq!(rate(&cur, &cur), None);
        assert_eq!(cpu_quantity(100_000_000), "100000000n");
        assert_eq!(memory_quantity(2 << 20), "2048Ki");
        assert_eq!(memory_quantity(1000), "1000");
        assert_eq!(go_duration(15_000), "15s");
        assert_eq!(go_duration(1_250), "1.25s");
        assert_eq!(go_duration(500), "500ms");
        assert_eq!(rfc3339(1_700_000_000_123), "2023-11-14T22:13:20Z");
    }

    #[test]
    fn pods_get_metrics_only_when_every_container_has_two_samples() {
        let key = |c: &str| ("default".to_string(), "web".to_string(), c.to_string());
        let sample = |cpu: f64, ts: i64| Sample { cpu_seconds: cpu, working_set: 4096, timestamp_ms: ts };
        let mut prev = Scrape::default();
        prev.containers.insert(key("app"), sample(1.0, 1000));
        let mut cur = Scrape::default();
        cur.containers.insert(key("app"), sample(1.5, 2000));
        let pod = json!({"metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
                         "spec": {"nodeName": "n", "containers": [{"name": "app"}]}});
        let m = pod_metrics(&pod, &prev, &cur).expect("metrics");
        assert_eq!(m["containers"], json!([{"name": "app", "usage": {"cpu": "500000000n", "memory": "4Ki"}}]));
        assert_eq!(m["window"], "1s");
        assert_eq!(m["metadata"]["labels"]["app"], "web");
        let two = json!({"metadata": {"name": "web", "namespace": "default"},
                         "spec": {"containers": [{"name": "app"}, {"name": "side"}]}});
        assert_eq!(pod_metrics(&two, &prev, &cur), None);
    }
}
