//! `/metrics`: the API server's own metrics in the Prometheus text format (0.0.4), under
//! kube-apiserver's names and labels where it has them, so that its dashboards and alerts read
//! k1s as they read a kube-apiserver:
//! - `apiserver_request_total` and `apiserver_request_duration_seconds` (upstream's buckets),
//!   labelled as upstream labels them (`verb` as reported: `LIST`, `WATCH`, `POST`, `APPLY`,
//!   `CONNECT`…; `scope` `resource`, `namespace` or `cluster`);
//! - `apiserver_longrunning_requests` (watches, logs, exec, attach, port-forward, proxy) and
//!   `apiserver_current_inflight_requests` (the others, by `request_kind`: the current count,
//!   where upstream reports the last second's maximum);
//! - the store, which takes etcd's place: `k1s_store_writes_total`,
//!   `k1s_store_commits_total` (synced batches: writes per fsync is the ratio),
//!   `k1s_store_commit_duration_seconds` (a batch's WAL write and sync, as etcd's
//!   `etcd_disk_wal_fsync_duration_seconds`), `k1s_store_revision` and
//!   `k1s_store_compacted_revision`;
//! - the process: `process_cpu_seconds_total`, `process_resident_memory_bytes`,
//!   `process_virtual_memory_bytes`, `process_open_fds`, `process_max_fds`,
//!   `process_start_time_seconds` (client_golang's process collector).
//!
//! Labels take their values from the resource table, never from the request as sent: a request
//! for a resource k1s does not serve, or a non-resource path that answers 404, is not counted,
//! so no client can grow the number of series.

use crate::endpoints::Body;
use crate::request::{RequestInfo, Verb};
use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};
use http_body_util::BodyExt;
use k1s_api::ResourceInfo;
use k1s_store::Store;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

/// The Content-Type of the reply.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// kube-apiserver's `apiserver_request_duration_seconds` buckets.
const DURATION_BUCKETS: [f64; 23] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0, 30.0,
    45.0, 60.0,
];

/// The `component` label: which server answered (upstream also has `aggregator` and
/// `apiextensions-apiserver`).
const COMPONENT: &str = "apiserver";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    verb: &'static str,
    dry_run: &'static str,
    group: &'static str,
    version: &'static str,
    resource: &'static str,
    subresource: String,
    scope: &'static str,
    component: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabels {
    #[prometheus(flatten)]
    request: RequestLabels,
    code: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    request_kind: &'static str,
}

fn duration_histogram() -> Histogram {
    Histogram::new(DURATION_BUCKETS)
}

/// The request metrics, and the registry `/metrics` renders.
pub struct Monitoring {
    registry: Registry,
    requests: Family<CodeLabels, Counter>,
    durations: Family<RequestLabels, Histogram, fn() -> Histogram>,
    long_running: Family<RequestLabels, Gauge>,
    inflight: Family<KindLabels, Gauge>,
}

impl std::fmt::Debug for Monitoring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Monitoring")
    }
}

/// A request being served, as it will be counted. Dropped unfinished (the client went away
/// first), it leaves the gauge it is in without being counted.
pub struct Tracked {
    labels: RequestLabels,
    /// Whether the subresource label is a path, kept only if the path answers.
    path_label: bool,
    long_running: bool,
    /// `apiserver_longrunning_requests` or `apiserver_current_inflight_requests`, whichever
    /// the request is in until it ends.
    gauge: Option<Gauge>,
    started: Instant,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if let Some(g) = self.gauge.take() {
            g.dec();
        }
    }
}

impl Monitoring {
    pub fn new(store: Store) -> Monitoring {
        let mut registry = Registry::default();
        let requests = Family::<CodeLabels, Counter>::default();
        registry.register(
            "apiserver_request",
            "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code",
            requests.clone(),
        );
        let durations = Family::<RequestLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            duration_histogram as fn() -> Histogram,
        );
        registry.register(
            "apiserver_request_duration_seconds",
            "Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component",
            durations.clone(),
        );
        let long_running = Family::<RequestLabels, Gauge>::default();
        registry.register(
            "apiserver_longrunning_requests",
            "Gauge of all active long-running apiserver requests broken out by verb, group, version, resource, scope and component",
            long_running.clone(),
        );
        let inflight = Family::<KindLabels, Gauge>::default();
        registry.register(
            "apiserver_current_inflight_requests",
            "Number of requests being served, by request kind (readOnly or mutating; long-running requests are not counted)",
            inflight.clone(),
        );
        registry.register_collector(Box::new(StoreCollector(store)));
        registry.register_collector(Box::new(ProcessCollector));
        Monitoring { registry, requests, durations, long_running, inflight }
    }

    /// Starts counting a request, unless its labels would come from the client rather than from
    /// what k1s serves (`None`).
    /// `res` is the served resource a resource request names.
    pub fn start(
        &self,
        method: &http::Method,
        info: &RequestInfo,
        res: Option<&'static ResourceInfo>,
        dry_run: bool,
        apply: bool,
    ) -> Option<Tracked> {
        let (group, version, resource, subresource, path_label) = if info.is_resource {
            let res = res?;
            let sub = match info.subresource_name() {
                None => "",
                Some(s) => res.subresources.iter().find(|x| x.name == s)?.name,
            };
            (res.group, res.version, res.resource, sub.to_string(), false)
        } else {
            ("", "", "", info.path.clone(), true)
        };
        let connect = matches!(subresource.as_str(), "exec" | "attach" | "portforward" | "proxy") && info.is_resource;
        let verb = reported_verb(method, info, connect, apply);
        let long_running = info.verb.is(Verb::Watch)
            || (info.is_resource
                && matches!(subresource.as_str(), "log" | "exec" | "attach" | "portforward" | "proxy"));
        let scope = if info.name.is_some() || info.verb.is(Verb::Create) {
            "resource"
        } else if info.namespace.is_some() {
            "namespace"
        } else if info.is_resource {
            "cluster"
        } else {
            ""
        };
        let labels = RequestLabels {
            verb,
            dry_run: if dry_run { "All" } else { "" },
            group,
            version,
            resource,
            subresource,
            scope,
            component: COMPONENT,
        };
        let kind =
            if matches!(info.verb.api(), Some(Verb::Get | Verb::List | Verb::Watch)) || method == http::Method::GET {
                "readOnly"
            } else {
                "mutating"
            };
        let gauge = if long_running {
            self.long_running.get_or_create(&labels).clone()
        } else {
            self.inflight.get_or_create(&KindLabels { request_kind: kind }).clone()
        };
        gauge.inc();
        Some(Tracked { labels, path_label, long_running, gauge: Some(gauge), started: Instant::now() })
    }

    /// Counts a served request: its code and, unless long-running, its duration. A long-running
    /// request stays in `apiserver_longrunning_requests` until its reply's body ends.
    pub fn finish(&self, mut t: Tracked, resp: http::Response<Body>) -> http::Response<Body> {
        let code = resp.status().as_u16();
        if t.path_label && code == 404 {
            // An unknown path: not counted, so that clients cannot add series.
            return resp;
        }
        self.requests.get_or_create(&CodeLabels { request: t.labels.clone(), code }).inc();
        if !t.long_running {
            self.durations.get_or_create(&t.labels).observe(t.started.elapsed().as_secs_f64());
            return resp;
        }
        let gauge = t.gauge.take();
        resp.map(|body| Guarded { inner: body, gauge }.boxed_unsync())
    }

    /// The metrics, in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry) {
            tracing::warn!(error = %e, "encoding metrics failed");
        }
        out
    }
}

/// The verb as upstream reports it: the route's verb (`GET`, `LIST`, `POST`, `PUT`, `PATCH`,
/// `DELETE`, `DELETECOLLECTION`, `CONNECT`), `WATCH` for watches, `APPLY` for server-side apply,
/// and the HTTP method for non-resource paths.
fn reported_verb(method: &http::Method, info: &RequestInfo, connect: bool, apply: bool) -> &'static str {
    if connect {
        return "CONNECT";
    }
    if !info.is_resource {
        return match *method {
            http::Method::GET => "GET",
            http::Method::HEAD => "HEAD",
            http::Method::POST => "POST",
            http::Method::PUT => "PUT",
            http::Method::PATCH => "PATCH",
            http::Method::DELETE => "DELETE",
            http::Method::OPTIONS => "OPTIONS",
            _ => "other",
        };
    }
    match info.verb.api() {
        Some(Verb::Get) => "GET",
        Some(Verb::List) => "LIST",
        Some(Verb::Watch) => "WATCH",
        Some(Verb::Create) => "POST",
        Some(Verb::Update) => "PUT",
        Some(Verb::Patch) if apply => "APPLY",
        Some(Verb::Patch) => "PATCH",
        Some(Verb::Delete) => "DELETE",
        Some(Verb::DeleteCollection) => "DELETECOLLECTION",
        Some(Verb::Proxy) | None => "other",
    }
}

/// A long-running reply's body: leaves `apiserver_longrunning_requests` when it ends (or the
/// client goes away).
struct Guarded {
    inner: Body,
    gauge: Option<Gauge>,
}

impl Drop for Guarded {
    fn drop(&mut self) {
        if let Some(g) = self.gauge.take() {
            g.dec();
        }
    }
}

impl HttpBody for Guarded {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            if let Some(g) = self.gauge.take() {
                g.dec();
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Writes one metric without labels.
fn encode_one(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    metric: &impl EncodeMetric,
) -> Result<(), std::fmt::Error> {
    let m = encoder.encode_descriptor(name, help, None, metric.metric_type())?;
    metric.encode(m)
}

/// The store's counters, read at scrape time.
#[derive(Clone)]
struct StoreCollector(Store);

impl std::fmt::Debug for StoreCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoreCollector")
    }
}

impl Collector for StoreCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let stats = self.0.stats();
        encode_one(
            &mut encoder,
            "k1s_store_writes",
            "Keys written (created, updated or deleted) by committed store transactions",
            &ConstCounter::new(stats.writes),
        )?;
        encode_one(
            &mut encoder,
            "k1s_store_commits",
            "Synced batches the store committed (group commit: concurrent writes share one)",
            &ConstCounter::new(stats.batches),
        )?;
        let mut m = encoder.encode_descriptor(
            "k1s_store_commit_duration_seconds",
            "Time a committed batch took to write and sync the write-ahead log",
            None,
            MetricType::Histogram,
        )?;
        // Counts per bucket, as the encoder takes them; it writes the `+Inf` bucket from the count.
        let buckets: Vec<(f64, u64)> =
            k1s_store::COMMIT_BUCKETS.iter().copied().zip(stats.commit_buckets.iter().copied()).collect();
        m.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
            stats.commit_seconds,
            stats.batches,
            &buckets,
            None,
        )?;
        encode_one(
            &mut encoder,
            "k1s_store_revision",
            "The store's current revision (the newest resourceVersion)",
            &ConstGauge::new(self.0.current_revision() as i64),
        )?;
        encode_one(
            &mut encoder,
            "k1s_store_compacted_revision",
            "Revisions up to this one are compacted: a watch from an older resourceVersion gets 410 Gone",
            &ConstGauge::new(self.0.compacted_revision() as i64),
        )?;
        Ok(())
    }
}

/// The process's CPU, memory and file descriptors from /proc/self, as client_golang's process
/// collector reports them.
#[derive(Debug)]
struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(p) = ProcessStats::read() else { return Ok(()) };
        encode_one(
            &mut encoder,
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds",
            &ConstCounter::new(p.cpu_seconds),
        )?;
        encode_one(
            &mut encoder,
            "process_resident_memory_bytes",
            "Resident memory size in bytes",
            &ConstGauge::new(p.resident_bytes as i64),
        )?;
        encode_one(
            &mut encoder,
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes",
            &ConstGauge::new(p.virtual_bytes as i64),
        )?;
        encode_one(&mut encoder, "process_open_fds", "Number of open file descriptors", &ConstGauge::new(p.open_fds))?;
        if let Some(max) = p.max_fds {
            encode_one(
                &mut encoder,
                "process_max_fds",
                "Maximum number of open file descriptors",
                &ConstGauge::new(max),
            )?;
        }
        if let Some(start) = p.start_time_seconds {
            encode_one(
                &mut encoder,
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds",
                &ConstGauge::new(start),
            )?;
        }
        // Tasks alive on the runtime serving the scrape (the whole server's): a number that must
        // not grow while the load does not (the soak, hack/soak.sh, watches it).
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let tasks = i64::try_from(rt.metrics().num_alive_tasks()).unwrap_or(i64::MAX);
            encode_one(
                &mut encoder,
                "k1s_runtime_alive_tasks",
                "Tasks alive on the server's async runtime",
                &ConstGauge::new(tasks),
            )?;
        }
        Ok(())
    }
}

#[derive(Debug, Default, PartialEq)]
struct ProcessStats {
    cpu_seconds: f64,
    resident_bytes: u64,
    virtual_bytes: u64,
    open_fds: i64,
    max_fds: Option<i64>,
    start_time_seconds: Option<f64>,
}

/// Linux's USER_HZ (clock ticks in /proc/*/stat) and page size on every architecture k1s runs on.
const TICKS_PER_SECOND: f64 = 100.0;
const PAGE_SIZE: u64 = 4096;

impl ProcessStats {
    fn read() -> Option<ProcessStats> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let boot_time = std::fs::read_to_string("/proc/stat").ok().and_then(|s| parse_boot_time(&s));
        let mut p = parse_stat(&stat, boot_time)?;
        p.open_fds = std::fs::read_dir("/proc/self/fd").map(|d| d.count() as i64).unwrap_or(0);
        p.max_fds = std::fs::read_to_string("/proc/self/limits").ok().and_then(|s| parse_max_fds(&s));
        Some(p)
    }
}

/// CPU time, memory and start time from `/proc/<pid>/stat` (fields after the command name,
/// which may itself hold spaces and parentheses).
fn parse_stat(stat: &str, boot_time: Option<u64>) -> Option<ProcessStats> {
    let rest = stat.rsplit_once(')')?.1;
    // `rest` starts at field 3 (state); utime is field 14, stime 15, starttime 22, vsize 23, rss 24.
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |field: usize| f.get(field - 3).and_then(|v| v.parse::<u64>().ok());
    let ticks = num(14)? + num(15)?;
    let start_time_seconds = boot_time.zip(num(22)).map(|(boot, t)| boot as f64 + t as f64 / TICKS_PER_SECOND);
    Some(ProcessStats {
        cpu_seconds: ticks as f64 / TICKS_PER_SECOND,
        resident_bytes: num(24)? * PAGE_SIZE,
        virtual_bytes: num(23)?,
        open_fds: 0,
        max_fds: None,
        start_time_seconds,
    })
}

fn parse_boot_time(proc_stat: &str) -> Option<u64> {
    proc_stat.lines().find_map(|l| l.strip_prefix("btime ")).and_then(|v| v.trim().parse().ok())
}

fn parse_max_fds(limits: &str) -> Option<i64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..].split_whitespace().next()?.parse().ok()
}

/// Seconds since the epoch, for tests comparing the start time.
#[cfg(test)]
fn now_seconds() -> f64 {
    use std::time::{SystemTime, UNIX_EPOCH};
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Query;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().expect("tmp");
        let s = Store::open(dir.path(), k1s_store::StoreOptions::default()).expect("open");
        (dir, s)
    }

    fn lookup(i: &RequestInfo) -> Option<&'static ResourceInfo> {
        k1s_api::resources::find(&i.group, &i.version, &i.resource)
    }

    fn info(method: &http::Method, path: &str, query: &str) -> RequestInfo {
        RequestInfo::parse(method, path, &Query::parse(Some(query)))
    }

    fn reply(code: u16) -> http::Response<Body> {
        let mut r = http::Response::new(http_body_util::Full::new(Bytes::new()).boxed_unsync());
        *r.status_mut() = http::StatusCode::from_u16(code).expect("code");
        r
    }

    fn serve(m: &Monitoring, method: http::Method, path: &str, query: &str, code: u16) -> http::Response<Body> {
        let i = info(&method, path, query);
        match m.start(&method, &i, lookup(&i), query.contains("dryRun=All"), false) {
            Some(t) => m.finish(t, reply(code)),
            None => reply(code),
        }
    }

    fn line<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
        text.lines().find(|l| l.starts_with(prefix))
    }

    #[test]
    fn requests_are_counted_with_upstreams_labels() {
        let (_d, s) = store();
        let m = Monitoring::new(s);
        serve(&m, http::Method::POST, "/api/v1/namespaces/default/configmaps", "", 201);
        serve(&m, http::Method::POST, "/api/v1/namespaces/default/configmaps", "dryRun=All", 201);
        serve(&m, http::Method::GET, "/api/v1/namespaces/default/configmaps", "", 200);
        serve(&m, http::Method::GET, "/apis/apps/v1/deployments", "", 200);
        serve(&m, http::Method::GET, "/api/v1/namespaces/default/pods/web", "", 404);
        serve(&m, http::Method::PUT, "/api/v1/namespaces/default/pods/web/status", "", 200);
        let text = m.render();
        assert!(text.contains("# TYPE apiserver_request_total counter"), "{text}");
        for want in [
            r#"apiserver_request_total{verb="POST",dry_run="",group="",version="v1",resource="configmaps",subresource="",scope="resource",component="apiserver",code="201"} 1"#,
            r#"apiserver_request_total{verb="POST",dry_run="All",group="",version="v1",resource="configmaps",subresource="",scope="resource",component="apiserver",code="201"} 1"#,
            r#"apiserver_request_total{verb="LIST",dry_run="",group="",version="v1",resource="configmaps",subresource="",scope="namespace",component="apiserver",code="200"} 1"#,
            r#"apiserver_request_total{verb="LIST",dry_run="",group="apps",version="v1",resource="deployments",subresource="",scope="cluster",component="apiserver",code="200"} 1"#,
            r#"apiserver_request_total{verb="GET",dry_run="",group="",version="v1",resource="pods",subresource="",scope="resource",component="apiserver",code="404"} 1"#,
            r#"apiserver_request_total{verb="PUT",dry_run="",group="",version="v1",resource="pods",subresource="status",scope="resource",component="apiserver",code="200"} 1"#,
            r#"apiserver_request_duration_seconds_count{verb="LIST",dry_run="",group="apps",version="v1",resource="deployments",subresource="",scope="cluster",component="apiserver"} 1"#,
            r#"apiserver_request_duration_seconds_bucket{verb="POST",dry_run="",group="",version="v1",resource="configmaps",subresource="",scope="resource",component="apiserver",le="60"} 1"#,
            r#"apiserver_current_inflight_requests{request_kind="mutating"} 0"#,
            r#"apiserver_current_inflight_requests{request_kind="readOnly"} 0"#,
        ] {
            assert!(text.contains(want), "missing {want} in\n{text}");
        }
    }

    #[test]
    fn clients_cannot_add_series_with_unknown_resources_subresources_or_paths() {
        let (_d, s) = store();
        let m = Monitoring::new(s);
        for path in ["/api/v1/namespaces/default/widgets", "/api/v1/namespaces/default/pods/web/bogus"] {
            let i = info(&http::Method::GET, path, "");
            assert!(m.start(&http::Method::GET, &i, lookup(&i), false, false).is_none(), "{path}");
        }
        serve(&m, http::Method::GET, "/no/such/path", "", 404);
        serve(&m, http::Method::GET, "/version", "", 200);
        let text = m.render();
        assert!(!text.contains("widgets") && !text.contains("bogus") && !text.contains("/no/such"), "{text}");
        assert!(
            text.contains(
                r#"apiserver_request_total{verb="GET",dry_run="",group="",version="",resource="",subresource="/version",scope="",component="apiserver",code="200"} 1"#
            ),
            "{text}"
        );
        assert!(text.contains(r#"apiserver_request_duration_seconds_count{verb="GET",dry_run="",group="",version="",resource="",subresource="/version",scope="",component="apiserver"} 1"#), "{text}");
        assert!(text.contains(r#"apiserver_current_inflight_requests{request_kind="readOnly"} 0"#), "{text}");
    }

    #[test]
    fn watches_and_connects_are_long_running_until_their_body_ends() {
        let (_d, s) = store();
        let m = Monitoring::new(s);
        let method = http::Method::GET;
        let watch = info(&method, "/api/v1/namespaces/default/pods", "watch=true");
        let t = m.start(&method, &watch, lookup(&watch), false, false).expect("tracked");
        let resp = m.finish(t, reply(200));
        let gauge = r#"apiserver_longrunning_requests{verb="WATCH",dry_run="",group="",version="v1",resource="pods",subresource="",scope="namespace",component="apiserver"}"#;
        assert_eq!(line(&m.render(), gauge), Some(format!("{gauge} 1").as_str()));
        drop(resp);
        assert_eq!(line(&m.render(), gauge), Some(format!("{gauge} 0").as_str()));
        let exec = info(&http::Method::POST, "/api/v1/namespaces/default/pods/web/exec", "command=ls");
        let t = m.start(&http::Method::POST, &exec, lookup(&exec), false, false).expect("tracked");
        drop(m.finish(t, reply(101)));
        let get = info(&method, "/api/v1/namespaces/default/pods/web", "");
        let unfinished = m.start(&method, &get, lookup(&get), false, false).expect("tracked");
        assert!(m.render().contains(r#"apiserver_current_inflight_requests{request_kind="readOnly"} 1"#));
        drop(unfinished);
        let text = m.render();
        assert!(text.contains(r#"apiserver_current_inflight_requests{request_kind="readOnly"} 0"#), "{text}");
        assert!(!text.contains(r#"verb="GET""#), "a request whose client went away is not counted: {text}");
        assert!(text.contains(r#"apiserver_request_total{verb="CONNECT",dry_run="",group="",version="v1",resource="pods",subresource="exec",scope="resource",component="apiserver",code="101"} 1"#), "{text}");
        assert!(line(&text, "apiserver_request_duration_seconds_count").is_none(), "watches are not timed: {text}");
    }

    #[test]
    fn apply_patches_are_reported_as_apply() {
        let method = http::Method::PATCH;
        let i = info(&method, "/apis/apps/v1/namespaces/default/deployments/web", "fieldManager=kubectl");
        assert_eq!(reported_verb(&method, &i, false, true), "APPLY");
        assert_eq!(reported_verb(&method, &i, false, false), "PATCH");
        let del = info(&http::Method::DELETE, "/api/v1/namespaces/default/configmaps", "");
        assert_eq!(reported_verb(&http::Method::DELETE, &del, false, false), "DELETECOLLECTION");
    }

    #[tokio::test]
    async fn store_commits_and_the_process_are_reported() {
        let (_d, s) = store();
        s.create("/registry/configmaps/default/a", Bytes::from_static(b"{}")).await.expect("create");
        s.create("/registry/configmaps/default/b", Bytes::from_static(b"{}")).await.expect("create");
        let text = Monitoring::new(s).render();
        assert_eq!(line(&text, "k1s_store_writes_total "), Some("k1s_store_writes_total 2"), "{text}");
        assert_eq!(line(&text, "k1s_store_revision "), Some("k1s_store_revision 2"), "{text}");
        let commits = line(&text, "k1s_store_commits_total ").expect("commits");
        let n: u64 = commits.rsplit(' ').next().and_then(|v| v.parse().ok()).expect("number");
        assert!((1..=2).contains(&n), "{commits}");
        assert_eq!(
            line(&text, "k1s_store_commit_duration_seconds_count"),
            Some(format!("k1s_store_commit_duration_seconds_count {n}").as_str()),
            "{text}"
        );
        assert!(text.contains(r#"k1s_store_commit_duration_seconds_bucket{le="+Inf"}"#), "{text}");
        let rss = line(&text, "process_resident_memory_bytes ").expect("rss");
        assert!(rss.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()).is_some_and(|v| v > 1e6), "{rss}");
        let start = line(&text, "process_start_time_seconds ").expect("start time");
        let start: f64 = start.rsplit(' ').next().and_then(|v| v.parse().ok()).expect("number");
        assert!(start <= now_seconds() + 1.0 && start > now_seconds() - 3600.0 * 24.0 * 365.0, "{start}");
        assert!(
            line(&text, "process_open_fds ").is_some() && line(&text, "process_cpu_seconds_total ").is_some(),
            "{text}"
        );
        let tasks = line(&text, "k1s_runtime_alive_tasks ").expect("tasks");
        assert!(tasks.rsplit(' ').next().and_then(|v| v.parse::<u64>().ok()).is_some(), "{tasks}");
    }

    #[test]
    fn proc_stat_fields_are_read_after_the_command_name() {
        let stat = "4242 (k1s (server) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 1000 104857600 2560 18446744073709551615";
        let p = parse_stat(stat, Some(1_700_000_000)).expect("parsed");
        assert_eq!(p.cpu_seconds, 3.0);
        assert_eq!(p.virtual_bytes, 104_857_600);
        assert_eq!(p.resident_bytes, 2560 * 4096);
        assert_eq!(p.start_time_seconds, Some(1_700_000_010.0));
        assert_eq!(parse_boot_time("cpu  1 2 3\nbtime 1700000000\nprocesses 5\n"), Some(1_700_000_000));
        assert_eq!(
            parse_max_fds("Limit                     Soft Limit           Hard Limit           Units\nMax open files            1048576              1048576              files\n"),
            Some(1_048_576)
        );
    }
}
