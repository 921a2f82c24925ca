//! Printers for workloads and their companions: apps, batch, autoscaling and policy kinds.

use super::{
    arr, at, bool_at, bool_ptr, col, condition, containers_and_images, docs, format_label_selector, format_labels,
    human_nanos, int_at, int_or_string, label_selector_string, opt_int, quantity_ptr, str_at, time_at, wide, Obj,
    Printer, AGE, CONTAINERS, IMAGES, NAME,
};
use serde_json::{json, Value};

/// `spec.replicas`, defaulted to 1 when unset as upstream's defaulting does.
fn replicas(v: &Value) -> i64 {
    opt_int(v, &["spec", "replicas"]).unwrap_or(1)
}

fn template_containers(v: &Value) -> (String, String) {
    containers_and_images(arr(v, &["spec", "template", "spec", "containers"]))
}

// ---- Deployment, ReplicaSet, StatefulSet, DaemonSet, ControllerRevision ----

pub(super) static DEPLOYMENT: Printer = Printer {
    columns: &[
        NAME,
        col("Ready", "string", "Number of the pod with ready state"),
        col("Up-to-date", "string", docs::DEPLOY_UPDATED),
        col("Available", "string", docs::DEPLOY_AVAILABLE),
        AGE,
        CONTAINERS,
        IMAGES,
        wide("Selector", "string", docs::DEPLOY_SELECTOR),
    ],
    cells: |o| {
        let v = o.v;
        let (names, images) = template_containers(v);
        let selector = label_selector_string(at(v, &["spec", "selector"])).unwrap_or_else(|()| "<invalid>".to_string());
        vec![
            o.name().into(),
            format!("{}/{}", int_at(v, &["status", "readyReplicas"]), replicas(v)).into(),
            int_at(v, &["status", "updatedReplicas"]).into(),
            int_at(v, &["status", "availableReplicas"]).into(),
            o.age().into(),
            names.into(),
            images.into(),
            selector.into(),
        ]
    },
};

pub(super) static REPLICA_SET: Printer = Printer {
    columns: &[
        NAME,
        col("Desired", "integer", docs::RS_SPEC_REPLICAS),
        col("Current", "integer", docs::RS_STATUS_REPLICAS),
        col("Ready", "integer", docs::RS_READY_REPLICAS),
        AGE,
        CONTAINERS,
        IMAGES,
        wide("Selector", "string", docs::RS_SELECTOR),
    ],
    cells: |o| {
        let v = o.v;
        let (names, images) = template_containers(v);
        vec![
            o.name().into(),
            replicas(v).into(),
            int_at(v, &["status", "replicas"]).into(),
            int_at(v, &["status", "readyReplicas"]).into(),
            o.age().into(),
            names.into(),
            images.into(),
            format_label_selector(at(v, &["spec", "selector"])).into(),
        ]
    },
};

pub(super) static STATEFUL_SET: Printer = Printer {
    columns: &[NAME, col("Ready", "string", "Number of the pod with ready state"), AGE, CONTAINERS, IMAGES],
    cells: |o| {
        let v = o.v;
        let (names, images) = template_containers(v);
        vec![
            o.name().into(),
            format!("{}/{}", int_at(v, &["status", "readyReplicas"]), replicas(v)).into(),
            o.age().into(),
            names.into(),
            images.into(),
        ]
    },
};

pub(super) static DAEMON_SET: Printer = Printer {
    columns: &[
        NAME,
        col("Desired", "integer", docs::DS_DESIRED),
        col("Current", "integer", docs::DS_CURRENT),
        col("Ready", "integer", docs::DS_READY),
        col("Up-to-date", "integer", docs::DS_UPDATED),
        col("Available", "integer", docs::DS_AVAILABLE),
        col("Node Selector", "string", docs::POD_NODE_SELECTOR),
        AGE,
        CONTAINERS,
        IMAGES,
        wide("Selector", "string", docs::DS_SELECTOR),
    ],
    cells: |o| {
        let v = o.v;
        let (names, images) = template_containers(v);
        let status = |f: &str| int_at(v, &["status", f]);
        vec![
            o.name().into(),
            status("desiredNumberScheduled").into(),
            status("currentNumberScheduled").into(),
            status("numberReady").into(),
            status("updatedNumberScheduled").into(),
            status("numberAvailable").into(),
            format_labels(at(v, &["spec", "template", "spec", "nodeSelector"])).into(),
            o.age().into(),
            names.into(),
            images.into(),
            format_label_selector(at(v, &["spec", "selector"])).into(),
        ]
    },
};

pub(super) static CONTROLLER_REVISION: Printer = Printer {
    columns: &[
        NAME,
        col("Controller", "string", "Controller of the object"),
        col("Revision", "string", docs::CONTROLLERREVISION_REVISION),
        AGE,
    ],
    cells: |o| {
        let owner =
            arr(o.v, &["metadata", "ownerReferences"]).iter().find(|r| bool_at(r, &["controller"]) == Some(true));
        let controller = match owner {
            None => "<none>".to_string(),
            Some(r) => {
                // GroupKind.String(): `kind.group`, or just the kind for the core group.
                let api_version = str_at(r, &["apiVersion"]);
                let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
                let kind = str_at(r, &["kind"]);
                let gk = if group.is_empty() { kind.to_string() } else { format!("{kind}.{group}") };
                if gk.is_empty() {
                    str_at(r, &["name"]).to_string()
                } else {
                    format!("{}/{}", gk.to_lowercase(), str_at(r, &["name"]))
                }
            }
        };
        vec![o.name().into(), controller.into(), int_at(o.v, &["revision"]).into(), o.age().into()]
    },
};

// ---- Job, CronJob ----

pub(super) static JOB: Printer = Printer {
    columns: &[
        NAME,
        col("Status", "string", "Status of the job."),
        col("Completions", "string", docs::JOB_SUCCEEDED),
        col("Duration", "string", "Time required to complete the job."),
        AGE,
        CONTAINERS,
        IMAGES,
        wide("Selector", "string", docs::JOB_SELECTOR),
    ],
    cells: job_cells,
};

fn job_cells(o: &Obj) -> Vec<Value> {
    let v = o.v;
    let succeeded = int_at(v, &["status", "succeeded"]);
    let completions = match opt_int(v, &["spec", "completions"]) {
        Some(c) => format!("{succeeded}/{c}"),
        None => match opt_int(v, &["spec", "parallelism"]).unwrap_or(0) {
            p if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let duration = match (time_at(v, &["status", "startTime"]), time_at(v, &["status", "completionTime"])) {
        (None, _) => String::new(),
        (Some(start), None) => o.since(Some(start)),
        (Some(start), Some(end)) => human_nanos(end.as_nanosecond() - start.as_nanosecond()),
    };
    let conditions = arr(v, &["status", "conditions"]);
    let has = |ty: &str| condition(conditions, ty).is_some_and(|c| str_at(c, &["status"]) == "True");
    let status = if has("Complete") {
        "Complete"
    } else if has("Failed") {
        "Failed"
    } else if o.deleting() {
        "Terminating"
    } else if has("Suspended") {
        "Suspended"
    } else if has("FailureTarget") {
        "FailureTarget"
    } else if has("SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else {
        "Running"
    };
    let (names, images) = template_containers(v);
    vec![
        o.name().into(),
        status.into(),
        completions.into(),
        duration.into(),
        o.age().into(),
        names.into(),
        images.into(),
        format_label_selector(at(v, &["spec", "selector"])).into(),
    ]
}

pub(super) static CRON_JOB: Printer = Printer {
    columns: &[
        NAME,
        col("Schedule", "string", docs::CRONJOB_SCHEDULE),
        col("Timezone", "string", docs::CRONJOB_TIMEZONE),
        col("Suspend", "boolean", docs::CRONJOB_SUSPEND),
        col("Active", "integer", docs::CRONJOB_ACTIVE),
        col("Last Schedule", "string", docs::CRONJOB_LAST_SCHEDULE),
        AGE,
        CONTAINERS,
        IMAGES,
        wide("Selector", "string", docs::JOB_SELECTOR),
    ],
    cells: |o| {
        let v = o.v;
        let last = match time_at(v, &["status", "lastScheduleTime"]) {
            Some(t) => o.since(Some(t)),
            None if at(v, &["status", "lastScheduleTime"]).is_some() => "<unknown>".to_string(),
            None => "<none>".to_string(),
        };
        let job = at(v, &["spec", "jobTemplate"]).unwrap_or(&Value::Null);
        let (names, images) = template_containers(job);
        vec![
            o.name().into(),
            str_at(v, &["spec", "schedule"]).into(),
            at(v, &["spec", "timeZone"]).and_then(Value::as_str).unwrap_or("<none>").into(),
            // suspend defaults to false.
            bool_ptr(Some(bool_at(v, &["spec", "suspend"]).unwrap_or(false))).into(),
            arr(v, &["status", "active"]).len().into(),
            last.into(),
            o.age().into(),
            names.into(),
            images.into(),
            format_label_selector(at(job, &["spec", "selector"])).into(),
        ]
    },
};

// ---- HorizontalPodAutoscaler, Scale, PodDisruptionBudget ----

pub(super) static HORIZONTAL_POD_AUTOSCALER: Printer = Printer {
    columns: &[
        NAME,
        col("Reference", "string", docs::HPA_SCALE_TARGET_REF),
        col("Targets", "string", docs::HPA_METRICS),
        col("MinPods", "string", docs::HPA_MIN_REPLICAS),
        col("MaxPods", "string", docs::HPA_MAX_REPLICAS),
        col("Replicas", "string", docs::HPA_CURRENT_REPLICAS),
        AGE,
    ],
    cells: |o| {
        let v = o.v;
        let reference = format!(
            "{}/{}",
            str_at(v, &["spec", "scaleTargetRef", "kind"]),
            str_at(v, &["spec", "scaleTargetRef", "name"])
        );
        let (specs, statuses) = hpa_metrics(v);
        vec![
            o.name().into(),
            reference.into(),
            format_hpa_metrics(&specs, &statuses).into(),
            opt_int(v, &["spec", "minReplicas"]).unwrap_or(1).to_string().into(),
            int_at(v, &["spec", "maxReplicas"]).into(),
            int_at(v, &["status", "currentReplicas"]).into(),
            o.age().into(),
        ]
    },
};

/// The metric specs and statuses in autoscaling/v2 form. An autoscaling/v1 object's CPU target converts to
/// one Resource metric; with no metrics at all upstream defaults to 80% CPU utilization.
fn hpa_metrics(v: &Value) -> (Vec<Value>, Vec<Value>) {
    let mut specs = arr(v, &["spec", "metrics"]).to_vec();
    let mut statuses = arr(v, &["status", "currentMetrics"]).to_vec();
    if specs.is_empty() {
        let target = opt_int(v, &["spec", "targetCPUUtilizationPercentage"]).unwrap_or(80);
        specs.push(json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": target}}}));
    }
    if let Some(current) = opt_int(v, &["status", "currentCPUUtilizationPercentage"]) {
        if statuses.is_empty() {
            statuses.push(
                json!({"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": current}}}),
            );
        }
    }
    (specs, statuses)
}

/// Upstream's `formatHPAMetrics`: at most two `current/target` entries, then ` + N more...`.
fn format_hpa_metrics(specs: &[Value], statuses: &[Value]) -> String {
    if specs.is_empty() {
        return "<none>".to_string();
    }
    let mut list = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let status = |source: &str| statuses.get(i).and_then(|s| at(s, &[source]));
        let entry = match str_at(spec, &["type"]) {
            "External" => value_or_average(spec, "external", status("external")),
            "Object" => value_or_average(spec, "object", status("object")),
            "Pods" => {
                let current = status("pods")
                    .map_or_else(|| "<unknown>".to_string(), |s| quantity_ptr(s, &["current", "averageValue"]));
                format!("{current}/{}", quantity_ptr(spec, &["pods", "target", "averageValue"]))
            }
            source @ ("Resource" | "ContainerResource") => {
                let key = if source == "Resource" { "resource" } else { "containerResource" };
                resource_metric(spec, key, status(key))
            }
            _ => "<unknown type>".to_string(),
        };
        list.push(entry);
    }
    let count = list.len();
    if count > 2 {
        format!("{} + {} more...", list[..2].join(", "), count - 2)
    } else {
        list.join(", ")
    }
}

/// External and Object metrics: an average-value target prints `(avg)`, else the value target.
fn value_or_average(spec: &Value, key: &str, status: Option<&Value>) -> String {
    if at(spec, &[key, "target", "averageValue"]).is_some() {
        let current = status
            .filter(|s| at(s, &["current", "averageValue"]).is_some())
            .map_or_else(|| "<unknown>".to_string(), |s| quantity_ptr(s, &["current", "averageValue"]));
        format!("{current}/{} (avg)", quantity_ptr(spec, &[key, "target", "averageValue"]))
    } else {
        let current = status.map_or_else(|| "<unknown>".to_string(), |s| quantity_ptr(s, &["current", "value"]));
        format!("{current}/{}", quantity_ptr(spec, &[key, "target", "value"]))
    }
}

/// Resource and ContainerResource metrics: `cpu: 40%/80%` or `memory: 100Mi/200Mi`.
fn resource_metric(spec: &Value, key: &str, status: Option<&Value>) -> String {
    let name = str_at(spec, &[key, "name"]);
    if at(spec, &[key, "target", "averageValue"]).is_some() {
        let current = status.map_or_else(|| "<unknown>".to_string(), |s| quantity_ptr(s, &["current", "averageValue"]));
        format!("{name}: {current}/{}", quantity_ptr(spec, &[key, "target", "averageValue"]))
    } else {
        let current = status
            .and_then(|s| opt_int(s, &["current", "averageUtilization"]))
            .map_or_else(|| "<unknown>".to_string(), |u| format!("{u}%"));
        let target = opt_int(spec, &[key, "target", "averageUtilization"])
            .map_or_else(|| "<auto>".to_string(), |u| format!("{u}%"));
        format!("{name}: {current}/{target}")
    }
}

pub(super) static SCALE: Printer = Printer {
    columns: &[
        super::ColumnDefinition {
            name: "Name",
            type_: "string",
            format: "",
            description: docs::META_NAME,
            priority: 0,
        },
        col("Desired", "integer", docs::SCALE_SPEC_REPLICAS),
        col("Available", "integer", docs::SCALE_STATUS_REPLICAS),
        AGE,
    ],
    cells: |o| {
        vec![
            o.name().into(),
            int_at(o.v, &["spec", "replicas"]).into(),
            int_at(o.v, &["status", "replicas"]).into(),
            o.age().into(),
        ]
    },
};

pub(super) static POD_DISRUPTION_BUDGET: Printer = Printer {
    columns: &[
        NAME,
        col("Min Available", "string", "The minimum number of pods that must be available."),
        col("Max Unavailable", "string", "The maximum number of pods that may be unavailable."),
        col("Allowed Disruptions", "integer", "Calculated number of pods that may be disrupted at this time."),
        AGE,
    ],
    cells: |o| {
        let v = o.v;
        let bound = |f: &str| at(v, &["spec", f]).map_or_else(|| "N/A".to_string(), int_or_string);
        vec![
            o.name().into(),
            bound("minAvailable").into(),
            bound("maxUnavailable").into(),
            int_at(v, &["status", "disruptionsAllowed"]).into(),
            o.age().into(),
        ]
    },
};

#[cfg(test)]
mod tests {
    use super::super::{columns, row, tests::now};
    use serde_json::{json, Value};

    fn cells(group: &str, kind: &str, obj: Value) -> Vec<Value> {
        row(group, kind, &obj, now())
    }

    fn meta(name: &str) -> Value {
        json!({"name": name, "namespace": "default", "creationTimestamp": "2026-11-28T21:00:00Z"})
    }

    fn template() -> Value {
        json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
            {"name": "nginx", "image": "nginx:1.27"}, {"name": "exporter", "image": "prom/nginx-exporter:1.3"}]}})
    }

    #[test]
    fn deployments_print_ready_over_desired() {
        let d = json!({
            "metadata": meta("web"),
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": template()},
            "status": {"replicas": 3, "readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}
        });
        assert_eq!(
            cells("apps", "Deployment", d),
            [
                json!("web"),
                json!("2/3"),
                json!(3),
                json!(2),
                json!("24h"),
                json!("nginx,exporter"),
                json!("nginx:1.27,prom/nginx-exporter:1.3"),
                json!("app=web")
            ]
        );
        let cols: Vec<_> = columns("apps", "Deployment").iter().map(|c| (c.name, c.priority)).collect();
        assert_eq!(
            cols,
            [
                ("Name", 0),
                ("Ready", 0),
                ("Up-to-date", 0),
                ("Available", 0),
                ("Age", 0),
                ("Containers", 1),
                ("Images", 1),
                ("Selector", 1)
            ]
        );
        let fresh = json!({"metadata": meta("new"), "spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "Bogus"}]}}});
        let c = cells("apps", "Deployment", fresh);
        assert_eq!((c[1].clone(), c[2].clone(), c[7].clone()), (json!("0/1"), json!(0), json!("<invalid>")));
    }

    #[test]
    fn replica_sets_stateful_sets_and_daemon_sets() {
        let rs = json!({"metadata": meta("web-5d8f"), "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web", "pod-template-hash": "5d8f"}}, "template": template()},
            "status": {"replicas": 2, "readyReplicas": 1}});
        assert_eq!(
            cells("apps", "ReplicaSet", rs),
            [
                json!("web-5d8f"),
                json!(2),
                json!(2),
                json!(1),
                json!("24h"),
                json!("nginx,exporter"),
                json!("nginx:1.27,prom/nginx-exporter:1.3"),
                json!("app=web,pod-template-hash=5d8f")
            ]
        );
        let sts = json!({"metadata": meta("db"), "spec": {"replicas": 3, "template": template()}, "status": {"readyReplicas": 3}});
        assert_eq!(cells("apps", "StatefulSet", sts)[..3], [json!("db"), json!("3/3"), json!("24h")]);
        let ds = json!({"metadata": meta("agent"), "spec": {"selector": {"matchLabels": {"app": "agent"}},
            "template": {"spec": {"nodeSelector": {"kubernetes.io/os": "linux"}, "containers": [{"name": "a", "image": "agent:1"}]}}},
            "status": {"desiredNumberScheduled": 1, "currentNumberScheduled": 1, "numberReady": 0, "updatedNumberScheduled": 1, "numberAvailable": 0}});
        assert_eq!(
            cells("apps", "DaemonSet", ds),
            [
                json!("agent"),
                json!(1),
                json!(1),
                json!(0),
                json!(1),
                json!(0),
                json!("kubernetes.io/os=linux"),
                json!("24h"),
                json!("a"),
                json!("agent:1"),
                json!("app=agent")
            ]
        );
        let cr = json!({"metadata": {"name": "agent-7f9", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "controller": true}]}, "revision": 4});
        assert_eq!(cells("apps", "ControllerRevision", cr)[1..3], [json!("daemonset.apps/agent"), json!(4)]);
        assert_eq!(cells("apps", "ControllerRevision", json!({"revision": 1}))[1], json!("<none>"));
    }

    #[test]
    fn job_status_completions_and_duration() {
        let complete = json!({
            "metadata": meta("pi"),
            "spec": {"completions": 1, "parallelism": 1, "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "abc"}}, "template": {"spec": {"containers": [{"name": "pi", "image": "perl:5.34"}]}}},
            "status": {"succeeded": 1, "startTime": "2026-11-29T20:00:00Z", "completionTime": "2026-11-29T20:00:42Z",
                "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}, {"type": "Complete", "status": "True"}]}
        });
        assert_eq!(
            cells("batch", "Job", complete),
            [
                json!("pi"),
                json!("Complete"),
                json!("1/1"),
                json!("42s"),
                json!("24h"),
                json!("pi"),
                json!("perl:5.34"),
                json!("batch.kubernetes.io/controller-uid=abc")
            ]
        );
        let running = json!({"metadata": meta("work"), "spec": {"parallelism": 3}, "status": {"succeeded": 1, "startTime": "2026-11-29T20:55:00Z"}});
        assert_eq!(cells("batch", "Job", running)[1..4], [json!("Running"), json!("1/1 of 3"), json!("5m")]);
        let failed = json!({"metadata": meta("f"), "spec": {"completions": 5}, "status": {"conditions": [
            {"type": "FailureTarget", "status": "True"}, {"type": "Failed", "status": "True"}]}});
        assert_eq!(cells("batch", "Job", failed)[1..4], [json!("Failed"), json!("0/5"), json!("")]);
        let suspended =
            json!({"metadata": meta("s"), "status": {"conditions": [{"type": "Suspended", "status": "True"}]}});
        assert_eq!(cells("batch", "Job", suspended)[1], json!("Suspended"));
        let mut m = meta("t");
        m["deletionTimestamp"] = json!("2026-11-29T20:59:00Z");
        assert_eq!(cells("batch", "Job", json!({"metadata": m}))[1], json!("Terminating"));
    }

    #[test]
    fn cron_jobs_print_schedule_and_last_run() {
        let cj = json!({
            "metadata": meta("backup"),
            "spec": {"schedule": "*/5 * * * *", "timeZone": "Etc/UTC", "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "b", "image": "backup:2"}]}}}}},
            "status": {"active": [{"name": "backup-1"}], "lastScheduleTime": "2026-11-29T20:55:00Z"}
        });
        assert_eq!(
            cells("batch", "CronJob", cj),
            [
                json!("backup"),
                json!("*/5 * * * *"),
                json!("Etc/UTC"),
                json!("False"),
                json!(1),
                json!("5m"),
                json!("24h"),
                json!("b"),
                json!("backup:2"),
                json!("<none>")
            ]
        );
        let never = json!({"metadata": meta("n"), "spec": {"schedule": "@daily", "suspend": true}});
        assert_eq!(cells("batch", "CronJob", never)[2..6], [json!("<none>"), json!("True"), json!(0), json!("<none>")]);
    }

    #[test]
    fn hpa_targets_in_v2_and_v1_shapes() {
        let v2 = json!({
            "metadata": meta("web"),
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "minReplicas": 2, "maxReplicas": 10, "metrics": [
                {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}},
                {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "1024Mi"}}},
                {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "100"}}}
            ]},
            "status": {"currentReplicas": 3, "currentMetrics": [
                {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 42, "averageValue": "210m"}}}
            ]}
        });
        assert_eq!(
            cells("autoscaling", "HorizontalPodAutoscaler", v2),
            [
                json!("web"),
                json!("Deployment/web"),
                json!("cpu: 42%/80%, memory: <unknown>/1Gi + 1 more..."),
                json!("2"),
                json!(10),
                json!(3),
                json!("24h")
            ]
        );
        let v1 = json!({"metadata": meta("api"), "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "api"}, "maxReplicas": 5, "targetCPUUtilizationPercentage": 60},
            "status": {"currentReplicas": 1, "currentCPUUtilizationPercentage": 12}});
        assert_eq!(cells("autoscaling", "HorizontalPodAutoscaler", v1)[2..4], [json!("cpu: 12%/60%"), json!("1")]);
        let bare = json!({"metadata": meta("b"), "spec": {"maxReplicas": 2}});
        assert_eq!(cells("autoscaling", "HorizontalPodAutoscaler", bare)[2], json!("cpu: <unknown>/80%"));
        let external = json!({"spec": {"metrics": [
            {"type": "External", "external": {"target": {"type": "AverageValue", "averageValue": "30"}}},
            {"type": "Object", "object": {"target": {"type": "Value", "value": "0.5"}}}
        ]}, "status": {"currentMetrics": [
            {"type": "External", "external": {"current": {"averageValue": "12"}}},
            {"type": "Object", "object": {"current": {"value": "250m"}}}
        ]}});
        assert_eq!(cells("autoscaling", "HorizontalPodAutoscaler", external)[2], json!("12/30 (avg), 250m/500m"));
    }

    #[test]
    fn scale_and_pod_disruption_budgets() {
        let scale = json!({"metadata": meta("web"), "spec": {"replicas": 3}, "status": {"replicas": 2}});
        assert_eq!(cells("autoscaling", "Scale", scale), [json!("web"), json!(3), json!(2), json!("24h")]);
        assert_eq!(columns("autoscaling", "Scale")[0].format, "");
        let pdb =
            json!({"metadata": meta("web"), "spec": {"minAvailable": "50%"}, "status": {"disruptionsAllowed": 1}});
        assert_eq!(
            cells("policy", "PodDisruptionBudget", pdb),
            [json!("web"), json!("50%"), json!("N/A"), json!(1), json!("24h")]
        );
        let pdb = json!({"metadata": meta("db"), "spec": {"maxUnavailable": 1}});
        assert_eq!(cells("policy", "PodDisruptionBudget", pdb)[1..4], [json!("N/A"), json!("1"), json!(0)]);
    }
}
