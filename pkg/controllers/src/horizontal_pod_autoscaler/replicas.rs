//! How many replicas a metric asks for: upstream's replica calculator
//! (`pkg/controller/podautoscaler/replica_calculator.go`) for resource metrics, as utilization
//! of the pods' requests or as an average value per pod.
//!
//! Pods are grouped first: deleted and failed pods are ignored, pending ones are unready, pods
//! without a sample are missing, and for CPU a pod is unready while it starts up (its first
//! sample after turning Ready, or never Ready in its first 30 s). When pods are missing or
//! unready, the ratio is computed again with them counted so as to damp the change (missing
//! pods at 100% of their request on a scale-down, at 0 on a scale-up; unready ones at 0 on a
//! scale-up), and nothing changes if that flips the direction or lands within the tolerance.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use std::collections::{BTreeMap, BTreeSet};

/// One pod's sample of a resource, in thousandths of its unit (millicores, millibytes).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PodMetric {
    pub value: i64,
    pub timestamp: Timestamp,
    pub window: SignedDuration,
}

/// Samples by pod name.
pub type PodMetrics = BTreeMap<String, PodMetric>;

/// How far the usage ratio may stray from 1 without a change (upstream's
/// `--horizontal-pod-autoscaler-tolerance`, 0.1 each way).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerances {
    pub scale_down: f64,
    pub scale_up: f64,
}

impl Default for Tolerances {
    fn default() -> Self {
        Tolerances { scale_down: 0.1, scale_up: 0.1 }
    }
}

impl Tolerances {
    fn within(&self, ratio: f64) -> bool {
        (1.0 - self.scale_down) <= ratio && ratio <= (1.0 + self.scale_up)
    }
}

/// Upstream's `--horizontal-pod-autoscaler-cpu-initialization-period` and
/// `--horizontal-pod-autoscaler-initial-readiness-delay`.
#[derive(Clone, Copy, Debug)]
pub struct Startup {
    pub cpu_initialization: SignedDuration,
    pub initial_readiness_delay: SignedDuration,
}

impl Default for Startup {
    fn default() -> Self {
        Startup {
            cpu_initialization: SignedDuration::from_mins(5),
            initial_readiness_delay: SignedDuration::from_secs(30),
        }
    }
}

#[derive(Debug, Default, PartialEq)]
struct Groups {
    ready: usize,
    unready: BTreeSet<String>,
    missing: BTreeSet<String>,
    ignored: BTreeSet<String>,
}

fn name(p: &Pod) -> String {
    p.metadata.name.clone().unwrap_or_default()
}

fn group_pods(pods: &[&Pod], metrics: &PodMetrics, resource: &str, now: Timestamp, startup: Startup) -> Groups {
    let mut g = Groups::default();
    for pod in pods {
        let status = pod.status.as_ref();
        let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("");
        if pod.metadata.deletion_timestamp.is_some() || phase == "Failed" {
            g.ignored.insert(name(pod));
            continue;
        }
        if phase == "Pending" {
            g.unready.insert(name(pod));
            continue;
        }
        let Some(metric) = metrics.get(&name(pod)) else {
            g.missing.insert(name(pod));
            continue;
        };
        if resource == "cpu" {
            let ready = crate::core::pod::ready_condition(pod);
            let start = status.and_then(|s| s.start_time.as_ref()).map(|t| t.0);
            let unready = match (ready, start) {
                (Some(c), Some(start)) => {
                    let transition = c.last_transition_time.as_ref().map_or(start, |t| t.0);
                    if start + startup.cpu_initialization > now {
                        // Starting: the sample must postdate a whole window after turning Ready.
                        c.status == "False" || metric.timestamp < transition + metric.window
                    } else {
                        // Never ready within its first moments: ignored while unready.
                        c.status == "False" && start + startup.initial_readiness_delay > transition
                    }
                }
                _ => true,
            };
            if unready {
                g.unready.insert(name(pod));
                continue;
            }
        }
        g.ready += 1;
    }
    g
}

/// Each pod's request of `resource` in thousandths, summed over its containers (and sidecar
/// init containers), or over the one `container`; every container counted must request it.
pub fn requests(pods: &[&Pod], container: Option<&str>, resource: &str) -> Result<BTreeMap<String, i64>, String> {
    let mut out = BTreeMap::new();
    for pod in pods {
        let Some(spec) = pod.spec.as_ref() else { continue };
        let sidecars = spec.init_containers.iter().flatten().filter(|c| c.restart_policy.as_deref() == Some("Always"));
        let mut sum = 0i64;
        for c in spec.containers.iter().chain(sidecars) {
            if container.is_some_and(|want| want != c.name) {
                continue;
            }
            match c.resources.as_ref().and_then(|r| r.requests.as_ref()).and_then(|r| r.get(resource)) {
                Some(q) => sum += milli_value(&q.0),
                None => {
                    return Err(format!("missing request for {resource} in container {} of Pod {}", c.name, name(pod)))
                }
            }
        }
        out.insert(name(pod), sum);
    }
    Ok(out)
}

/// A quantity in thousandths of its unit, rounded up (upstream's `MilliValue`); 0 if invalid.
pub fn milli_value(q: &str) -> i64 {
    let Ok(p) = k1s_api::strategies::quantity::Quantity::parse(q) else { return 0 };
    let (n, d) = (p.nanos(), 1_000_000i128);
    let m = n.div_euclid(d) + i128::from(n.rem_euclid(d) != 0);
    i64::try_from(m).unwrap_or(if m > 0 { i64::MAX } else { i64::MIN })
}

/// Usage over requests of the pods with both: the ratio to `target` percent, the utilization in
/// percent and the mean raw usage.
fn utilization_ratio(
    metrics: &PodMetrics,
    requests: &BTreeMap<String, i64>,
    target: i32,
) -> Result<(f64, i32, i64), String> {
    let (mut used, mut requested, mut n) = (0i64, 0i64, 0i64);
    for (pod, m) in metrics {
        if let Some(r) = requests.get(pod) {
            used += m.value;
            requested += r;
            n += 1;
        }
    }
    if requested == 0 {
        return Err("no metrics returned matched known pods".into());
    }
    let utilization = i32::try_from(used * 100 / requested).unwrap_or(i32::MAX);
    Ok((f64::from(utilization) / f64::from(target), utilization, used / n))
}

/// What a resource-utilization metric asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Utilization {
    pub replicas: i32,
    /// Percent of the requests in use.
    pub utilization: i32,
    /// Mean usage per pod, in thousandths.
    pub raw: i64,
}

fn ceil_replicas(ratio: f64, pods: usize) -> i32 {
    (ratio * pods as f64).ceil() as i32
}

/// Upstream's `GetResourceReplicas`: replicas for `target` percent utilization of `resource`
/// across `pods` (the target's selected pods), given their samples.
#[allow(clippy::too_many_arguments)]
pub fn resource_replicas(
    current: i32,
    target: i32,
    resource: &str,
    container: Option<&str>,
    pods: &[&Pod],
    mut metrics: PodMetrics,
    tolerances: Tolerances,
    now: Timestamp,
    startup: Startup,
) -> Result<Utilization, String> {
    if pods.is_empty() {
        return Err("no pods returned by selector while calculating replica count".into());
    }
    let g = group_pods(pods, &metrics, resource, now, startup);
    metrics.retain(|p, _| !g.ignored.contains(p) && !g.unready.contains(p));
    let requests = requests(pods, container, resource)?;
    if metrics.is_empty() {
        return Err("did not receive metrics for targeted pods (pods might be unready)".into());
    }
    let (ratio, utilization, raw) = utilization_ratio(&metrics, &requests, target)?;
    let done = |replicas| Ok(Utilization { replicas, utilization, raw });
    let up_with_unready = !g.unready.is_empty() && ratio > 1.0;
    if !up_with_unready && g.missing.is_empty() {
        if tolerances.within(ratio) {
            return done(current);
        }
        return done(ceil_replicas(ratio, g.ready));
    }
    let fill = |metrics: &mut PodMetrics, pods: &BTreeSet<String>, value: &dyn Fn(&str) -> i64| {
        for p in pods {
            metrics.insert(p.clone(), PodMetric { value: value(p), timestamp: now, window: SignedDuration::ZERO });
        }
    };
    if ratio < 1.0 {
        let fallback = i64::from(target.max(100));
        fill(&mut metrics, &g.missing, &|p| requests.get(p).copied().unwrap_or(0) * fallback / 100);
    } else if ratio > 1.0 {
        fill(&mut metrics, &g.missing, &|_| 0);
    }
    if up_with_unready {
        fill(&mut metrics, &g.unready, &|_| 0);
    }
    let (new_ratio, _, _) = utilization_ratio(&metrics, &requests, target)?;
    done(damped(current, ratio, new_ratio, metrics.len(), tolerances))
}

/// The replicas for the ratio recomputed with missing and unready pods filled in: the current
/// count when that lands within the tolerance or turns the direction around.
fn damped(current: i32, ratio: f64, new_ratio: f64, pods: usize, tolerances: Tolerances) -> i32 {
    if tolerances.within(new_ratio) || (ratio < 1.0 && new_ratio > 1.0) || (ratio > 1.0 && new_ratio < 1.0) {
        return current;
    }
    let replicas = ceil_replicas(new_ratio, pods);
    if (new_ratio < 1.0 && replicas > current) || (new_ratio > 1.0 && replicas < current) {
        return current;
    }
    replicas
}

/// Upstream's `GetRawResourceReplicas` (`calcPlainMetricReplicas`): replicas for a mean usage
/// per pod of `target` thousandths; gives the replicas and the current mean.
#[allow(clippy::too_many_arguments)]
pub fn average_value_replicas(
    current: i32,
    target: i64,
    resource: &str,
    pods: &[&Pod],
    mut metrics: PodMetrics,
    tolerances: Tolerances,
    now: Timestamp,
    startup: Startup,
) -> Result<(i32, i64), String> {
    if pods.is_empty() {
        return Err("no pods returned by selector while calculating replica count".into());
    }
    let g = group_pods(pods, &metrics, resource, now, startup);
    metrics.retain(|p, _| !g.ignored.contains(p) && !g.unready.contains(p));
    if metrics.is_empty() {
        return Err("did not receive metrics for targeted pods (pods might be unready)".into());
    }
    let mean = |m: &PodMetrics| m.values().map(|v| v.value).sum::<i64>() / m.len() as i64;
    let ratio_of = |m: &PodMetrics| mean(m) as f64 / target as f64;
    let (ratio, usage) = (ratio_of(&metrics), mean(&metrics));
    let up_with_unready = !g.unready.is_empty() && ratio > 1.0;
    if !up_with_unready && g.missing.is_empty() {
        if tolerances.within(ratio) {
            return Ok((current, usage));
        }
        return Ok((ceil_replicas(ratio, g.ready), usage));
    }
    let sample = |value| PodMetric { value, timestamp: now, window: SignedDuration::ZERO };
    if ratio != 1.0 {
        let fallback = if ratio < 1.0 { target } else { 0 };
        for p in &g.missing {
            metrics.insert(p.clone(), sample(fallback));
        }
    }
    if up_with_unready {
        for p in &g.unready {
            metrics.insert(p.clone(), sample(0));
        }
    }
    Ok((damped(current, ratio, ratio_of(&metrics), metrics.len(), tolerances), usage))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, PodCondition, PodSpec, PodStatus, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn now() -> Timestamp {
        "2026-12-01T12:00:00Z".parse().expect("time")
    }

    /// A running, Ready pod started `age` ago, requesting `cpu`.
    fn pod(name: &str, cpu: &str, age: i64) -> Pod {
        let started = now() - SignedDuration::from_secs(age);
        let mut p = Pod {
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "app".into(),
                    resources: Some(ResourceRequirements {
                        requests: Some([("cpu".to_string(), Quantity(cpu.into()))].into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                start_time: Some(Time(started)),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    last_transition_time: Some(Time(started)),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        p.metadata.name = Some(name.into());
        p
    }

    fn sample(value: i64) -> PodMetric {
        PodMetric { value, timestamp: now(), window: SignedDuration::from_secs(15) }
    }

    fn metrics(values: &[(&str, i64)]) -> PodMetrics {
        values.iter().map(|(n, v)| (n.to_string(), sample(*v))).collect()
    }

    fn cpu(current: i32, target: i32, pods: &[Pod], m: PodMetrics) -> Result<Utilization, String> {
        let refs: Vec<&Pod> = pods.iter().collect();
        resource_replicas(current, target, "cpu", None, &refs, m, Tolerances::default(), now(), Startup::default())
    }

    #[test]
    fn utilization_above_target_scales_up_in_proportion() {
        let pods = [pod("a", "100m", 600), pod("b", "100m", 600)];
        let u = cpu(2, 50, &pods, metrics(&[("a", 100), ("b", 100)])).expect("replicas");
        assert_eq!(u, Utilization { replicas: 4, utilization: 100, raw: 100 });
    }

    #[test]
    fn a_ratio_within_the_tolerance_keeps_the_count() {
        let pods = [pod("a", "100m", 600), pod("b", "100m", 600)];
        let u = cpu(2, 50, &pods, metrics(&[("a", 54), ("b", 54)])).expect("replicas");
        assert_eq!((u.replicas, u.utilization), (2, 54));
    }

    #[test]
    fn missing_pods_damp_a_scale_down_as_if_at_their_full_request() {
        // Two idle pods and one without a sample: counted at 100%, the ratio is 0.7 over 3.
        let pods = [pod("a", "100m", 600), pod("b", "100m", 600), pod("c", "100m", 600)];
        let u = cpu(3, 50, &pods, metrics(&[("a", 5), ("b", 5)])).expect("replicas");
        assert_eq!(u.utilization, 5);
        // (5 + 5 + 100) / 300 = 36% → ratio 0.72 → ceil(0.72 × 3) = 3: no scale-down.
        assert_eq!(u.replicas, 3);
    }

    #[test]
    fn starting_pods_do_not_count_towards_a_cpu_scale_up() {
        // "new" turned Ready 5 s ago: its sample (15 s window) predates a full window, so it is
        // unready and counts as 0 on the way up.
        let mut fresh = pod("new", "100m", 5);
        fresh.status.as_mut().expect("status").start_time = Some(Time(now() - SignedDuration::from_secs(5)));
        let pods = [pod("a", "100m", 600), fresh];
        let u = cpu(2, 50, &pods, metrics(&[("a", 200), ("new", 200)])).expect("replicas");
        assert_eq!(u.utilization, 200, "only the ready pod's sample: {u:?}");
        // Recomputed with the unready pod at 0: 200 / 200 = 100% → ratio 2 over 2 pods = 4.
        assert_eq!(u.replicas, 4);
    }

    #[test]
    fn deleted_failed_and_pending_pods_do_not_count() {
        let mut deleting = pod("gone", "100m", 600);
        deleting.metadata.deletion_timestamp = Some(Time(now()));
        let mut failed = pod("failed", "100m", 600);
        failed.status.as_mut().expect("status").phase = Some("Failed".into());
        let pods = [pod("a", "100m", 600), deleting, failed];
        let u = cpu(1, 50, &pods, metrics(&[("a", 100), ("gone", 900), ("failed", 900)])).expect("replicas");
        assert_eq!(u, Utilization { replicas: 2, utilization: 100, raw: 100 });
    }

    #[test]
    fn errors_say_what_is_missing() {
        let mut no_request = pod("a", "100m", 600);
        no_request.spec.as_mut().expect("spec").containers[0].resources = None;
        assert_eq!(
            cpu(1, 50, &[no_request], metrics(&[("a", 10)])),
            Err("missing request for cpu in container app of Pod a".into())
        );
        assert_eq!(
            cpu(1, 50, &[], PodMetrics::new()),
            Err("no pods returned by selector while calculating replica count".into())
        );
        assert_eq!(
            cpu(1, 50, &[pod("a", "100m", 600)], PodMetrics::new()),
            Err("did not receive metrics for targeted pods (pods might be unready)".into())
        );
    }

    #[test]
    fn average_values_scale_to_the_target_per_pod() {
        let pods = [pod("a", "100m", 600), pod("b", "100m", 600)];
        let refs: Vec<&Pod> = pods.iter().collect();
        let mib = 1024 * 1024 * 1000;
        let m = metrics(&[("a", 150 * mib), ("b", 250 * mib)]);
        let (replicas, usage) =
            average_value_replicas(2, 100 * mib, "memory", &refs, m, Tolerances::default(), now(), Startup::default())
                .expect("replicas");
        assert_eq!((replicas, usage), (4, 200 * mib));
    }

    #[test]
    fn quantities_are_thousandths_rounded_up() {
        assert_eq!(milli_value("250m"), 250);
        assert_eq!(milli_value("1"), 1000);
        assert_eq!(milli_value("1500u"), 2);
        assert_eq!(milli_value("64Mi"), 64 * 1024 * 1024 * 1000);
        assert_eq!(milli_value("bogus"), 0);
    }
}
