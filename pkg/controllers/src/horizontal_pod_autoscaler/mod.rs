//! The horizontal pod autoscaler controller, as upstream's (`pkg/controller/podautoscaler`):
//! every 15 s, for each HorizontalPodAutoscaler, it reads its target's `scale` subresource, the
//! pods the scale's selector picks and their usage from the resource metrics API
//! (`metrics.k8s.io`, which k1s serves itself), computes the replicas each metric asks for
//! ([`replicas`]), takes the largest, stabilizes and rate-limits it ([`behavior`]), writes the
//! new count to the scale subresource and reports in the HPA's status: current and desired
//! replicas, current metrics, `lastScaleTime`, and the `AbleToScale`, `ScalingActive` and
//! `ScalingLimited` conditions, with upstream's reasons and events (`SuccessfulRescale`,
//! `FailedGetScale`, `FailedGetResourceMetric`, `FailedComputeMetricsReplicas`…).
//!
//! Resource and ContainerResource metrics are computed; Pods, Object and External metrics need
//! a custom or external metrics API, which k1s does not serve: they are reported as failed
//! metrics, as upstream reports them without one.

pub mod behavior;
pub mod replicas;

use crate::core::discovery::{self, ServedCache};
use crate::Context;
use behavior::{Recommendation, Rules, ScaleEvent};
use futures::StreamExt;
use jiff::{SignedDuration, Timestamp};
use k1s_api::errors::chain;
use k1s_api::strategies::autoscaling::{default_scale_down, default_scale_up};
use k1s_runtime::events::{reference, EventType, Recorder};
use k8s_openapi::api::autoscaling::v2::{
    HPAScalingRules, HorizontalPodAutoscaler, HorizontalPodAutoscalerBehavior, HorizontalPodAutoscalerCondition,
    HorizontalPodAutoscalerStatus, MetricSpec, MetricStatus, MetricTarget, MetricValueStatus,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use replicas::{PodMetric, PodMetrics, Startup, Tolerances};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Upstream's `--horizontal-pod-autoscaler-sync-period`.
pub const SYNC_PERIOD: Duration = Duration::from_secs(15);
const COMPONENT: &str = "horizontal-pod-autoscaler";

#[derive(Debug, thiserror::Error)]
#[error("autoscaler {hpa}: {message}")]
pub struct Error {
    hpa: String,
    message: String,
}

/// What the controller remembers of an HPA between syncs.
#[derive(Default)]
struct History {
    recommendations: Vec<Recommendation>,
    up: Vec<ScaleEvent>,
    down: Vec<ScaleEvent>,
}

struct State {
    client: kube::Client,
    recorder: Recorder,
    pods: Store<Pod>,
    served: ServedCache,
    history: Mutex<HashMap<String, History>>,
}

fn key(hpa: &HorizontalPodAutoscaler) -> String {
    format!("{}/{}", hpa.metadata.namespace.as_deref().unwrap_or(""), hpa.metadata.name.as_deref().unwrap_or(""))
}

/// Sets condition `type_`, keeping its transition time when the status stays the same.
fn set_condition(status: &mut HorizontalPodAutoscalerStatus, type_: &str, value: bool, reason: &str, message: String) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let value = if value { "True" } else { "False" };
    let now = Time(Timestamp::now());
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != value {
                c.last_transition_time = Some(now);
            }
            c.status = value.into();
            c.reason = Some(reason.into());
            c.message = Some(message);
        }
        None => conditions.push(HorizontalPodAutoscalerCondition {
            type_: type_.into(),
            status: value.into(),
            reason: Some(reason.into()),
            message: Some(message),
            last_transition_time: Some(now),
        }),
    }
}

/// A quantity of `milli` thousandths, written as upstream's `NewMilliQuantity(…, DecimalSI)`.
fn milli_quantity(milli: i64) -> Quantity {
    let text = format!("{milli}m");
    Quantity(k1s_api::strategies::quantity::Quantity::parse(&text).map(|q| q.canonical()).unwrap_or(text))
}

/// What one metric asks for.
struct Proposal {
    replicas: i32,
    /// How upstream names the metric in conditions and events.
    name: String,
    status: MetricStatus,
}

/// A failed metric: the condition reason and the error.
struct Failure {
    reason: &'static str,
    message: String,
}

/// A Go duration as the metrics API writes windows (`15.003s`, `1m0s`, `500ms`).
fn parse_go_duration(s: &str) -> Option<SignedDuration> {
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let (number, tail) = rest.split_at(digits);
        let number: f64 = number.parse().ok()?;
        let unit_len = tail.find(|c: char| c.is_ascii_digit()).unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let seconds = match unit {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        total += number * seconds;
        rest = tail;
    }
    SignedDuration::try_from_secs_f64(total).ok()
}

impl State {
    async fn event(&self, hpa: &HorizontalPodAutoscaler, kind: EventType, reason: &str, message: &str) {
        let r = reference(
            "autoscaling/v2",
            "HorizontalPodAutoscaler",
            hpa.metadata.namespace.as_deref(),
            hpa.metadata.name.as_deref().unwrap_or(""),
            hpa.metadata.uid.as_deref(),
        );
        self.recorder.record(&r, kind, reason, message).await;
    }

    /// The target's `scale` subresource, through whatever resource serves its kind.
    async fn scale(
        &self,
        ns: &str,
        api_version: &str,
        kind: &str,
        name: &str,
    ) -> Result<(Api<DynamicObject>, DynamicObject), String> {
        let served = self.served.get(&self.client).await?;
        let res = served.resolve(api_version, kind).cloned().ok_or_else(|| {
            format!("no matches for kind \"{kind}\" in group \"{}\"", discovery::split_api_version(api_version).0)
        })?;
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), ns, &res.api);
        let scale = api.get_subresource("scale", name).await.map_err(|e| chain(&e))?;
        Ok((api, scale))
    }

    /// Samples of `resource` per pod the selector picks (of `container` only, if given); a pod
    /// any counted container of which lacks the resource has no sample.
    async fn pod_metrics(
        &self,
        ns: &str,
        selector: &str,
        resource: &str,
        container: Option<&str>,
    ) -> Result<PodMetrics, String> {
        let ar = ApiResource {
            group: k1s_api::metrics::GROUP.into(),
            version: k1s_api::metrics::VERSION.into(),
            api_version: format!("{}/{}", k1s_api::metrics::GROUP, k1s_api::metrics::VERSION),
            kind: "PodMetrics".into(),
            plural: "pods".into(),
        };
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), ns, &ar);
        let list = api.list(&ListParams::default().labels(selector)).await.map_err(|e| chain(&e))?;
        let mut out = PodMetrics::new();
        for item in list.items {
            let Ok(m) = serde_json::to_value(&item).and_then(serde_json::from_value::<k1s_api::metrics::PodMetrics>)
            else {
                continue;
            };
            let mut sum = 0i64;
            let mut complete = true;
            let mut counted = 0;
            for c in m.containers.iter().filter(|c| container.is_none_or(|want| want == c.name)) {
                match c.usage.get(resource) {
                    Some(q) => sum += replicas::milli_value(&q.0),
                    None => complete = false,
                }
                counted += 1;
            }
            if !complete || counted == 0 {
                continue;
            }
            let (Some(name), Some(timestamp)) = (m.metadata.name, m.timestamp) else { continue };
            let window = parse_go_duration(&m.window).unwrap_or(SignedDuration::from_secs(15));
            out.insert(name, PodMetric { value: sum, timestamp: timestamp.0, window });
        }
        if out.is_empty() {
            return Err("no metrics returned from resource metrics API".into());
        }
        Ok(out)
    }

    fn pods(&self, ns: &str, selector: &k1s_api::selectors::Selector) -> Vec<Arc<Pod>> {
        self.pods.state_filter(|p| {
            p.metadata.namespace.as_deref() == Some(ns)
                && selector.matches_map(p.metadata.labels.as_ref().unwrap_or(&Default::default()))
        })
    }

    /// Upstream's `computeStatusForResourceMetric`, for a Resource or ContainerResource metric.
    #[allow(clippy::too_many_arguments)]
    async fn resource_metric(
        &self,
        ns: &str,
        selector_text: &str,
        selector: &k1s_api::selectors::Selector,
        current: i32,
        resource: &str,
        container: Option<&str>,
        target: &MetricTarget,
    ) -> Result<Proposal, Failure> {
        let what = if container.is_some() { "container resource" } else { "resource" };
        let failed = |e: String| Failure {
            reason: if container.is_some() { "FailedGetContainerResourceMetric" } else { "FailedGetResourceMetric" },
            message: e,
        };
        let metrics = self
            .pod_metrics(ns, selector_text, resource, container)
            .await
            .map_err(|e| format!("unable to get metrics for resource {resource}: {e}"));
        let pods = self.pods(ns, selector);
        let refs: Vec<&Pod> = pods.iter().map(|p| &**p).collect();
        let now = Timestamp::now();
        let mk_status = |current: MetricValueStatus| {
            let mut s = MetricStatus {
                type_: if container.is_some() { "ContainerResource" } else { "Resource" }.into(),
                ..Default::default()
            };
            match container {
                Some(c) => {
                    s.container_resource = Some(k8s_openapi::api::autoscaling::v2::ContainerResourceMetricStatus {
                        name: resource.into(),
                        container: c.into(),
                        current,
                    })
                }
                None => {
                    s.resource =
                        Some(k8s_openapi::api::autoscaling::v2::ResourceMetricStatus { name: resource.into(), current })
                }
            }
            s
        };
        if let Some(v) = &target.average_value {
            let metrics = metrics.map_err(|e| failed(format!("failed to get {resource} usage: {e}")))?;
            let target_milli = replicas::milli_value(&v.0);
            let (replicas, usage) = replicas::average_value_replicas(
                current,
                target_milli,
                resource,
                &refs,
                metrics,
                Tolerances::default(),
                now,
                Startup::default(),
            )
            .map_err(|e| failed(format!("failed to get {resource} usage: {e}")))?;
            return Ok(Proposal {
                replicas,
                name: format!("{resource} {what}"),
                status: mk_status(MetricValueStatus {
                    average_value: Some(milli_quantity(usage)),
                    ..Default::default()
                }),
            });
        }
        let Some(target_utilization) = target.average_utilization else {
            return Err(failed(format!(
                "invalid {what} metric source: neither a utilization target nor a value target was set"
            )));
        };
        let metrics = metrics.map_err(|e| failed(format!("failed to get {resource} utilization: {e}")))?;
        let u = replicas::resource_replicas(
            current,
            target_utilization,
            resource,
            container,
            &refs,
            metrics,
            Tolerances::default(),
            now,
            Startup::default(),
        )
        .map_err(|e| failed(format!("failed to get {resource} utilization: {e}")))?;
        Ok(Proposal {
            replicas: u.replicas,
            name: format!("{resource} {what} utilization (percentage of request)"),
            status: mk_status(MetricValueStatus {
                average_utilization: Some(u.utilization),
                average_value: Some(milli_quantity(u.raw)),
                value: None,
            }),
        })
    }

    async fn metric(
        &self,
        ns: &str,
        selector_text: &str,
        selector: &k1s_api::selectors::Selector,
        current: i32,
        spec: &MetricSpec,
    ) -> Result<Proposal, Failure> {
        let unsupported = |reason: &'static str, api: &str| {
            Failure {
            reason,
            message: format!("unable to get metric: no {api} API is served (k1s serves only the resource metrics API, metrics.k8s.io)"),
        }
        };
        match spec.type_.as_str() {
            "Resource" => match &spec.resource {
                Some(r) => self.resource_metric(ns, selector_text, selector, current, &r.name, None, &r.target).await,
                None => {
                    Err(Failure { reason: "FailedGetResourceMetric", message: "missing resource metric source".into() })
                }
            },
            "ContainerResource" => match &spec.container_resource {
                Some(r) => {
                    self.resource_metric(ns, selector_text, selector, current, &r.name, Some(&r.container), &r.target)
                        .await
                }
                None => Err(Failure {
                    reason: "FailedGetContainerResourceMetric",
                    message: "missing container resource metric source".into(),
                }),
            },
            "Pods" => Err(unsupported("FailedGetPodsMetric", "custom metrics (custom.metrics.k8s.io)")),
            "Object" => Err(unsupported("FailedGetObjectMetric", "custom metrics (custom.metrics.k8s.io)")),
            "External" => Err(unsupported("FailedGetExternalMetric", "external metrics (external.metrics.k8s.io)")),
            other => Err(Failure {
                reason: "InvalidMetricSourceType",
                message: format!("unknown metric source type {other:?}"),
            }),
        }
    }

    async fn write_status(
        &self,
        hpa: &HorizontalPodAutoscaler,
        status: HorizontalPodAutoscalerStatus,
    ) -> Result<(), String> {
        if hpa.status.as_ref() == Some(&status) {
            return Ok(());
        }
        let mut updated = hpa.clone();
        updated.status = Some(status);
        let api: Api<HorizontalPodAutoscaler> =
            Api::namespaced(self.client.clone(), hpa.metadata.namespace.as_deref().unwrap_or(""));
        api.replace_status(hpa.metadata.name.as_deref().unwrap_or(""), &PostParams::default(), &updated)
            .await
            .map(|_| ())
            .map_err(|e| format!("failed to update status: {}", chain(&e)))
    }
}

/// Upstream's `reconcileAutoscaler`.
async fn sync(hpa: &HorizontalPodAutoscaler, state: &State) -> Result<(), String> {
    let key = key(hpa);
    let ns = hpa.metadata.namespace.clone().unwrap_or_default();
    let spec = hpa.spec.clone().unwrap_or_default();
    let target = &spec.scale_target_ref;
    let reference = format!("{}/{}", target.kind, target.name);
    let mut status = hpa.status.clone().unwrap_or_default();
    status.observed_generation = hpa.metadata.generation;
    let (api, mut scale) =
        match state.scale(&ns, target.api_version.as_deref().unwrap_or(""), &target.kind, &target.name).await {
            Ok(x) => x,
            Err(e) => {
                let message = format!("the HPA controller was unable to get the target's current scale: {e}");
                set_condition(&mut status, "AbleToScale", false, "FailedGetScale", message);
                state.event(hpa, EventType::Warning, "FailedGetScale", &e).await;
                state.write_status(hpa, status).await?;
                return Err(format!("failed to query scale subresource for {reference}: {e}"));
            }
        };
    set_condition(
        &mut status,
        "AbleToScale",
        true,
        "SucceededGetScale",
        "the HPA controller was able to get the target's current scale".into(),
    );
    let current = scale.data.pointer("/spec/replicas").and_then(serde_json::Value::as_i64).unwrap_or(0) as i32;
    let selector_text =
        scale.data.pointer("/status/selector").and_then(serde_json::Value::as_str).unwrap_or("").to_string();
    let now = Timestamp::now();
    {
        let mut history = state.history.lock().unwrap_or_else(|p| p.into_inner());
        let h = history.entry(key.clone()).or_default();
        if h.recommendations.is_empty() {
            h.recommendations.push(Recommendation { at: now, replicas: current });
        }
    }
    let min = spec.min_replicas.unwrap_or(1);
    // The rules in force: the HPA's (defaulted by the API server), else upstream's defaults.
    let rules = |pick: fn(&HorizontalPodAutoscalerBehavior) -> Option<&HPAScalingRules>,
                 default: fn() -> HPAScalingRules| {
        spec.behavior.as_ref().and_then(pick).cloned().unwrap_or_else(default)
    };
    let up_rules = rules(|b| b.scale_up.as_ref(), default_scale_up);
    let down_rules = rules(|b| b.scale_down.as_ref(), default_scale_down);
    let (desired, rescale_reason) = if current == 0 && min != 0 {
        set_condition(
            &mut status,
            "ScalingActive",
            false,
            "ScalingDisabled",
            "scaling is disabled since the replica count of the target is zero".into(),
        );
        (0, String::new())
    } else if current > spec.max_replicas {
        (spec.max_replicas, "Current number of replicas above Spec.MaxReplicas".to_string())
    } else if current < min {
        (min, "Current number of replicas below Spec.MinReplicas".to_string())
    } else {
        let selector = if selector_text.is_empty() {
            Err((
                "SelectorRequired",
                "selector is required".to_string(),
                "the HPA target's scale is missing a selector".to_string(),
            ))
        } else {
            k1s_api::selectors::Selector::parse_labels(&selector_text).map_err(|e| {
                (
                    "InvalidSelector",
                    format!("couldn't convert selector into a corresponding internal selector object: {e}"),
                    format!("the HPA target's scale has an invalid selector: {e}"),
                )
            })
        };
        let selector = match selector {
            Ok(s) => s,
            Err((event, message, condition)) => {
                state.event(hpa, EventType::Warning, event, &message).await;
                set_condition(&mut status, "ScalingActive", false, "InvalidSelector", condition);
                status.current_replicas = Some(current);
                state.write_status(hpa, status).await?;
                return Err(message);
            }
        };
        let metric_specs = spec.metrics.clone().unwrap_or_default();
        let (mut proposed, mut proposed_by) = (0i32, String::new());
        let mut statuses = Vec::new();
        let mut failures: Vec<Failure> = Vec::new();
        for m in &metric_specs {
            match state.metric(&ns, &selector_text, &selector, current, m).await {
                Ok(p) => {
                    if proposed == 0 || p.replicas > proposed {
                        proposed = p.replicas;
                        proposed_by = p.name;
                    }
                    statuses.push(p.status);
                }
                Err(f) => {
                    state.event(hpa, EventType::Warning, f.reason, &f.message).await;
                    failures.push(f);
                }
            }
        }
        if !failures.is_empty() && (failures.len() >= metric_specs.len() || proposed < current) {
            let first = &failures[0];
            let message = format!(
                "invalid metrics ({} invalid out of {}), first error is: {}",
                failures.len(),
                metric_specs.len(),
                first.message
            );
            set_condition(
                &mut status,
                "ScalingActive",
                false,
                first.reason,
                format!("the HPA was unable to compute the replica count: {}", first.message),
            );
            state.event(hpa, EventType::Warning, "FailedComputeMetricsReplicas", &message).await;
            status.current_replicas = Some(current);
            status.current_metrics = (!statuses.is_empty()).then_some(statuses);
            state.write_status(hpa, status).await?;
            return Err(message);
        }
        set_condition(
            &mut status,
            "ScalingActive",
            true,
            "ValidMetricFound",
            format!("the HPA was able to successfully calculate a replica count from {proposed_by}"),
        );
        status.current_metrics = (!statuses.is_empty()).then_some(statuses);
        let reason = match proposed.cmp(&current) {
            std::cmp::Ordering::Greater => format!("{proposed_by} above target"),
            std::cmp::Ordering::Less => "All metrics below target".to_string(),
            std::cmp::Ordering::Equal => String::new(),
        };
        let normalized = {
            let mut history = state.history.lock().unwrap_or_else(|p| p.into_inner());
            let h = history.entry(key.clone()).or_default();
            match &spec.behavior {
                None => behavior::normalize(&mut h.recommendations, now, current, proposed, min, spec.max_replicas),
                Some(_) => behavior::normalize_with_behavior(
                    &mut h.recommendations,
                    &h.up,
                    &h.down,
                    Rules { up: &up_rules, down: &down_rules },
                    now,
                    current,
                    proposed,
                    min,
                    spec.max_replicas,
                ),
            }
        };
        set_condition(&mut status, "AbleToScale", true, normalized.stabilized.0, normalized.stabilized.1.into());
        set_condition(&mut status, "ScalingLimited", normalized.limited, normalized.limit.0, normalized.limit.1.into());
        (normalized.replicas, reason)
    };
    if desired != current {
        scale.data["spec"]["replicas"] = serde_json::json!(desired);
        if let Err(e) = api.replace_subresource("scale", &target.name, &PostParams::default(), &scale).await {
            let e = chain(&e);
            let message = format!("the HPA controller was unable to update the target scale: {e}");
            set_condition(&mut status, "AbleToScale", false, "FailedUpdateScale", message);
            state
                .event(
                    hpa,
                    EventType::Warning,
                    "FailedRescale",
                    &format!("New size: {desired}; reason: {rescale_reason}; error: {e}"),
                )
                .await;
            status.current_replicas = Some(current);
            state.write_status(hpa, status).await?;
            return Err(format!("failed to rescale {reference}: {e}"));
        }
        set_condition(
            &mut status,
            "AbleToScale",
            true,
            "SucceededRescale",
            format!("the HPA controller was able to update the target scale to {desired}"),
        );
        state
            .event(
                hpa,
                EventType::Normal,
                "SuccessfulRescale",
                &format!("New size: {desired}; reason: {rescale_reason}"),
            )
            .await;
        tracing::info!(hpa = %key, %reference, from = current, to = desired, reason = %rescale_reason, "rescaled");
        let mut history = state.history.lock().unwrap_or_else(|p| p.into_inner());
        let h = history.entry(key.clone()).or_default();
        let (up_keep, down_keep) = (behavior::longest_period(&up_rules), behavior::longest_period(&down_rules));
        h.up.retain(|e| e.at > now - up_keep);
        h.down.retain(|e| e.at > now - down_keep);
        if desired > current {
            h.up.push(ScaleEvent { at: now, change: desired - current });
        } else {
            h.down.push(ScaleEvent { at: now, change: current - desired });
        }
        status.last_scale_time = Some(Time(now));
    }
    status.current_replicas = Some(current);
    status.desired_replicas = desired;
    state.write_status(hpa, status).await
}

async fn reconcile(hpa: Arc<HorizontalPodAutoscaler>, state: Arc<State>) -> Result<Action, Error> {
    match sync(&hpa, &state).await {
        Ok(()) => Ok(Action::requeue(SYNC_PERIOD)),
        Err(message) => Err(Error { hpa: key(&hpa), message }),
    }
}

fn error_policy(_hpa: Arc<HorizontalPodAutoscaler>, err: &Error, _state: Arc<State>) -> Action {
    tracing::debug!(error = %err, "autoscaler sync failed; retrying");
    Action::requeue(SYNC_PERIOD)
}

pub async fn run(ctx: Arc<Context>) {
    let client = ctx.client.clone();
    let (pods, pod_writer) = reflector::store::<Pod>();
    let cache = tokio::spawn(async move {
        let mut s = reflector::reflector(pod_writer, watcher(Api::<Pod>::all(client), watcher::Config::default()))
            .default_backoff()
            .boxed();
        while let Some(ev) = s.next().await {
            if let Err(e) = ev {
                tracing::debug!(error = %chain(&e), "pod watch failed; retrying");
            }
        }
    });
    let state = Arc::new(State {
        client: ctx.client.clone(),
        recorder: Recorder::new(ctx.client.clone(), COMPONENT, None),
        pods: pods.clone(),
        served: ServedCache::default(),
        history: Mutex::new(HashMap::new()),
    });
    let cancel = ctx.cancel.clone();
    let grace = cancel.clone();
    let controller =
        Controller::new(Api::<HorizontalPodAutoscaler>::all(ctx.client.clone()), watcher::Config::default());
    let hpas = controller.store();
    let forget = {
        // Forget the history of deleted autoscalers (upstream clears it on delete).
        let state = state.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(60)).await;
                let live: std::collections::HashSet<String> = hpas.state().iter().map(|h| key(h)).collect();
                state.history.lock().unwrap_or_else(|p| p.into_inner()).retain(|k, _| live.contains(k));
            }
        })
    };
    tokio::select! {
        _ = cancel.cancelled() => {}
        _ = pods.wait_until_ready() => {
            controller
                .graceful_shutdown_on(async move { cancel.cancelled().await })
                .run(reconcile, error_policy, state)
                .take_until(k1s_runtime::controller::shutdown_grace_over(grace))
                .for_each(|_| futures::future::ready(()))
                .await;
        }
    }
    cache.abort();
    forget.abort();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse_as_the_metrics_api_writes_them() {
        assert_eq!(parse_go_duration("15.003s"), Some(SignedDuration::from_millis(15_003)));
        assert_eq!(parse_go_duration("1m0s"), Some(SignedDuration::from_secs(60)));
        assert_eq!(parse_go_duration("500ms"), Some(SignedDuration::from_millis(500)));
        assert_eq!(parse_go_duration("1h2m3s"), Some(SignedDuration::from_secs(3723)));
        assert_eq!(parse_go_duration("5x"), None);
    }

    #[test]
    fn milli_quantities_print_as_upstream_prints_them() {
        assert_eq!(milli_quantity(250).0, "250m");
        assert_eq!(milli_quantity(2000).0, "2");
        assert_eq!(milli_quantity(104_857_600_000).0, "104857600");
    }

    #[test]
    fn conditions_keep_their_transition_time_while_their_status_holds() {
        let mut s = HorizontalPodAutoscalerStatus::default();
        set_condition(&mut s, "AbleToScale", true, "A", "a".into());
        let first = s.conditions.as_ref().and_then(|c| c[0].last_transition_time.clone());
        set_condition(&mut s, "AbleToScale", true, "B", "b".into());
        set_condition(&mut s, "ScalingActive", false, "C", "c".into());
        let c = s.conditions.as_ref().expect("conditions");
        assert_eq!(c.len(), 2);
        assert_eq!((c[0].reason.as_deref(), c[0].last_transition_time.clone()), (Some("B"), first));
        assert_eq!(c[1].type_, "ScalingActive");
    }
}
