//! Printers for the core group (Pod, Node, Service, Event, …) and EndpointSlice.

use super::{
    arr, at, bool_at, col, condition, containers_and_images, docs, format_labels, int_at, list_with_more, map_len,
    opt_int, quantity_at, str_at, str_or, time_at, wide, ColumnDefinition, Obj, Printer, AGE, CONTAINERS, IMAGES, NAME,
};
use serde_json::Value;
use std::collections::BTreeSet;

// ---- Pod ----

pub(super) static POD: Printer = Printer {
    columns: &[
        NAME,
        col("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
        col("Status", "string", "The aggregate status of the containers in this pod."),
        col(
            "Restarts",
            "string",
            "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
        ),
        AGE,
        wide("IP", "string", docs::POD_IP),
        wide("Node", "string", docs::POD_NODE_NAME),
        wide("Nominated Node", "string", docs::POD_NOMINATED_NODE_NAME),
        wide("Readiness Gates", "string", docs::POD_READINESS_GATES),
    ],
    cells: pod_cells,
};

/// A container status's `state` or `lastState` entry of the given kind (`waiting`, `running`, `terminated`).
fn state<'a>(status: &'a Value, which: &str, kind: &str) -> Option<&'a Value> {
    at(status, &[which, kind])
}

/// `Signal:N`/`ExitCode:N` (with `prefix`) for a terminated state without a reason.
fn terminated_code(term: &Value, prefix: &str) -> String {
    match int_at(term, &["signal"]) {
        0 => format!("{prefix}ExitCode:{}", int_at(term, &["exitCode"])),
        sig => format!("{prefix}Signal:{sig}"),
    }
}

fn pod_cells(o: &Obj) -> Vec<Value> {
    let v = o.v;
    let init_specs = arr(v, &["spec", "initContainers"]);
    let restartable: BTreeSet<&str> =
        init_specs.iter().filter(|c| str_at(c, &["restartPolicy"]) == "Always").map(|c| str_at(c, &["name"])).collect();
    let total = arr(v, &["spec", "containers"]).len()
        + init_specs.iter().filter(|c| str_at(c, &["restartPolicy"]) == "Always").count();
    let phase = str_at(v, &["status", "phase"]);
    let conditions = arr(v, &["status", "conditions"]);
    let mut reason = str_or(v, &["status", "reason"], phase).to_string();
    if conditions.iter().any(|c| str_at(c, &["type"]) == "PodScheduled" && str_at(c, &["reason"]) == "SchedulingGated")
    {
        reason = "SchedulingGated".to_string();
    }

    let mut restarts = 0i64;
    let mut restartable_restarts = 0i64;
    let mut last_restart = None;
    let mut last_restartable_restart = None;
    let mut ready = 0usize;
    let later = |cur: Option<jiff::Timestamp>, t: Option<jiff::Timestamp>| match (cur, t) {
        (Some(c), Some(t)) if c >= t => Some(c),
        (c, None) => c,
        (_, t) => t,
    };

    let init_statuses = arr(v, &["status", "initContainerStatuses"]);
    let mut initializing = false;
    for (i, c) in init_statuses.iter().enumerate() {
        let count = int_at(c, &["restartCount"]);
        let finished = state(c, "lastState", "terminated").and_then(|t| time_at(t, &["finishedAt"]));
        restarts += count;
        last_restart = later(last_restart, finished);
        let is_restartable = restartable.contains(str_at(c, &["name"]));
        if is_restartable {
            restartable_restarts += count;
            last_restartable_restart = later(last_restartable_restart, finished);
        }
        let terminated = state(c, "state", "terminated");
        let waiting_reason = state(c, "state", "waiting").map(|w| str_at(w, &["reason"]));
        if terminated.is_some_and(|t| int_at(t, &["exitCode"]) == 0) {
            continue;
        }
        if is_restartable && bool_at(c, &["started"]) == Some(true) {
            if bool_at(c, &["ready"]) == Some(true) {
                ready += 1;
            }
            continue;
        }
        reason = match (terminated, waiting_reason) {
            (Some(t), _) => match str_at(t, &["reason"]) {
                "" => terminated_code(t, "Init:"),
                r => format!("Init:{r}"),
            },
            (None, Some(w)) if !w.is_empty() && w != "PodInitializing" => format!("Init:{w}"),
            _ => format!("Init:{i}/{}", init_specs.len()),
        };
        initializing = true;
        break;
    }

    let initialized = condition(conditions, "Initialized").is_some_and(|c| str_at(c, &["status"]) == "True");
    if !initializing || initialized {
        restarts = restartable_restarts;
        last_restart = last_restartable_restart;
        let mut has_running = false;
        for c in arr(v, &["status", "containerStatuses"]).iter().rev() {
            restarts += int_at(c, &["restartCount"]);
            last_restart =
                later(last_restart, state(c, "lastState", "terminated").and_then(|t| time_at(t, &["finishedAt"])));
            let waiting_reason = state(c, "state", "waiting").map_or("", |w| str_at(w, &["reason"]));
            let terminated = state(c, "state", "terminated");
            if !waiting_reason.is_empty() {
                reason = waiting_reason.to_string();
            } else if let Some(t) = terminated {
                reason = match str_at(t, &["reason"]) {
                    "" => terminated_code(t, ""),
                    r => r.to_string(),
                };
            } else if bool_at(c, &["ready"]) == Some(true) && state(c, "state", "running").is_some() {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            let pod_ready =
                conditions.iter().any(|c| str_at(c, &["type"]) == "Ready" && str_at(c, &["status"]) == "True");
            reason = if pod_ready { "Running" } else { "NotReady" }.to_string();
        }
    }

    if o.deleting() && str_at(v, &["status", "reason"]) == "NodeLost" {
        reason = "Unknown".to_string();
    } else if o.deleting() && phase != "Succeeded" && phase != "Failed" {
        reason = "Terminating".to_string();
    }

    let restarts_cell = match last_restart {
        Some(t) if restarts != 0 => format!("{restarts} ({} ago)", o.since(Some(t))),
        _ => restarts.to_string(),
    };

    // Upstream's conversion makes status.podIP authoritative over podIPs.
    let ip = match str_at(v, &["status", "podIP"]) {
        "" => arr(v, &["status", "podIPs"]).first().map_or("", |p| str_at(p, &["ip"])),
        ip => ip,
    };
    let gates = arr(v, &["spec", "readinessGates"]);
    let readiness_gates = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let true_count = gates
            .iter()
            .filter(|g| {
                condition(conditions, str_at(g, &["conditionType"])).is_some_and(|c| str_at(c, &["status"]) == "True")
            })
            .count();
        format!("{true_count}/{}", gates.len())
    };
    vec![
        o.name().into(),
        format!("{ready}/{total}").into(),
        reason.into(),
        restarts_cell.into(),
        o.age().into(),
        or_none(ip).into(),
        or_none(str_at(v, &["spec", "nodeName"])).into(),
        or_none(str_at(v, &["status", "nominatedNodeName"])).into(),
        readiness_gates.into(),
    ]
}

fn or_none(s: &str) -> &str {
    if s.is_empty() {
        "<none>"
    } else {
        s
    }
}

// ---- PodTemplate ----

pub(super) static POD_TEMPLATE: Printer = Printer {
    columns: &[
        NAME,
        col("Containers", "string", "Names of each container in the template."),
        col("Images", "string", "Images referenced by each container in the template."),
        col("Pod Labels", "string", "The labels for the pod template."),
    ],
    cells: |o| {
        let (names, images) = containers_and_images(arr(o.v, &["template", "spec", "containers"]));
        vec![
            o.name().into(),
            names.into(),
            images.into(),
            format_labels(at(o.v, &["template", "metadata", "labels"])).into(),
        ]
    },
};

// ---- Namespace ----

pub(super) static NAMESPACE: Printer = Printer {
    columns: &[NAME, col("Status", "string", "The status of the namespace"), AGE],
    cells: |o| vec![o.name().into(), str_or(o.v, &["status", "phase"], "Active").into(), o.age().into()],
};

// ---- Node ----

pub(super) static NODE: Printer = Printer {
    columns: &[
        NAME,
        col("Status", "string", "The status of the node"),
        col("Roles", "string", "The roles of the node"),
        AGE,
        col("Version", "string", docs::NODE_KUBELET_VERSION),
        wide("Internal-IP", "string", docs::NODE_ADDRESSES),
        wide("External-IP", "string", docs::NODE_ADDRESSES),
        wide("OS-Image", "string", docs::NODE_OS_IMAGE),
        wide("Kernel-Version", "string", docs::NODE_KERNEL_VERSION),
        wide("Container-Runtime", "string", docs::NODE_CONTAINER_RUNTIME),
    ],
    cells: node_cells,
};

fn node_cells(o: &Obj) -> Vec<Value> {
    let v = o.v;
    // The last condition of a type wins, as upstream builds a map.
    let ready = arr(v, &["status", "conditions"]).iter().rev().find(|c| str_at(c, &["type"]) == "Ready");
    let mut status = vec![match ready {
        Some(c) if str_at(c, &["status"]) == "True" => "Ready",
        Some(_) => "NotReady",
        None => "Unknown",
    }];
    if bool_at(v, &["spec", "unschedulable"]) == Some(true) {
        status.push("SchedulingDisabled");
    }
    let mut roles = BTreeSet::new();
    if let Some(labels) = at(v, &["metadata", "labels"]).and_then(Value::as_object) {
        for (k, val) in labels {
            if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
                if !role.is_empty() {
                    roles.insert(role.to_string());
                }
            } else if k == "kubernetes.io/role" {
                if let Some(role) = val.as_str().filter(|r| !r.is_empty()) {
                    roles.insert(role.to_string());
                }
            }
        }
    }
    let roles = if roles.is_empty() { "<none>".to_string() } else { roles.into_iter().collect::<Vec<_>>().join(",") };
    let address = |ty: &str| {
        arr(v, &["status", "addresses"])
            .iter()
            .find(|a| str_at(a, &["type"]) == ty)
            .map_or("<none>", |a| str_at(a, &["address"]))
    };
    let info = |f: &str| str_or(v, &["status", "nodeInfo", f], "<unknown>");
    vec![
        o.name().into(),
        status.join(",").into(),
        roles.into(),
        o.age().into(),
        str_at(v, &["status", "nodeInfo", "kubeletVersion"]).into(),
        address("InternalIP").into(),
        address("ExternalIP").into(),
        info("osImage").into(),
        info("kernelVersion").into(),
        info("containerRuntimeVersion").into(),
    ]
}

// ---- Service ----

pub(super) static SERVICE: Printer = Printer {
    columns: &[
        NAME,
        col("Type", "string", docs::SVC_TYPE),
        col("Cluster-IP", "string", docs::SVC_CLUSTER_IP),
        col("External-IP", "string", docs::SVC_EXTERNAL_IPS),
        col("Port(s)", "string", docs::SVC_PORTS),
        AGE,
        wide("Selector", "string", docs::SVC_SELECTOR),
    ],
    cells: service_cells,
};

fn service_cells(o: &Obj) -> Vec<Value> {
    let v = o.v;
    let ty = str_or(v, &["spec", "type"], "ClusterIP");
    let cluster_ip = match arr(v, &["spec", "clusterIPs"]).first().and_then(Value::as_str) {
        Some(ip) => ip,
        None => or_none(str_at(v, &["spec", "clusterIP"])),
    };
    let ports: Vec<String> = arr(v, &["spec", "ports"])
        .iter()
        .map(|p| {
            let port = int_at(p, &["port"]);
            let proto = str_or(p, &["protocol"], "TCP");
            match int_at(p, &["nodePort"]) {
                np if np > 0 => format!("{port}:{np}/{proto}"),
                _ => format!("{port}/{proto}"),
            }
        })
        .collect();
    let ports = if ports.is_empty() { "<none>".to_string() } else { ports.join(",") };
    vec![
        o.name().into(),
        ty.into(),
        cluster_ip.into(),
        service_external_ip(v, ty).into(),
        ports.into(),
        o.age().into(),
        format_labels(at(v, &["spec", "selector"])).into(),
    ]
}

/// Upstream's `getServiceExternalIP` (wide: load-balancer addresses are not clipped).
fn service_external_ip(v: &Value, ty: &str) -> String {
    let external: Vec<&str> = arr(v, &["spec", "externalIPs"]).iter().filter_map(Value::as_str).collect();
    match ty {
        "ClusterIP" | "NodePort" if external.is_empty() => "<none>".to_string(),
        "ClusterIP" | "NodePort" => external.join(","),
        "LoadBalancer" => {
            let mut all = load_balancer_addresses(arr(v, &["status", "loadBalancer", "ingress"]));
            all.extend(external.iter().map(|s| s.to_string()));
            if all.is_empty() {
                "<pending>".to_string()
            } else {
                all.join(",")
            }
        }
        "ExternalName" => str_at(v, &["spec", "externalName"]).to_string(),
        _ => "<unknown>".to_string(),
    }
}

/// The IP (else hostname) of each load-balancer ingress point, sorted and de-duplicated.
pub(super) fn load_balancer_addresses(ingress: &[Value]) -> Vec<String> {
    let set: BTreeSet<&str> = ingress
        .iter()
        .filter_map(|i| match (str_at(i, &["ip"]), str_at(i, &["hostname"])) {
            ("", "") => None,
            ("", host) => Some(host),
            (ip, _) => Some(ip),
        })
        .collect();
    set.into_iter().map(str::to_string).collect()
}

// ---- Endpoints and EndpointSlice ----

pub(super) static ENDPOINTS: Printer = Printer {
    columns: &[NAME, col("Endpoints", "string", docs::ENDPOINTS_SUBSETS), AGE],
    cells: |o| vec![o.name().into(), format_endpoints(arr(o.v, &["subsets"])).into(), o.age().into()],
};

fn join_host_port(host: &str, port: i64) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Upstream's `formatEndpoints`: up to three `ip:port` entries, then ` + N more...`.
fn format_endpoints(subsets: &[Value]) -> String {
    if subsets.is_empty() {
        return "<none>".to_string();
    }
    const MAX: usize = 3;
    let mut list = Vec::new();
    let mut count = 0;
    for ss in subsets {
        let addresses = arr(ss, &["addresses"]);
        let ports = arr(ss, &["ports"]);
        if ports.is_empty() {
            count += addresses.len();
            list.extend(addresses.iter().map(|a| str_at(a, &["ip"]).to_string()).take(MAX - list.len().min(MAX)));
            continue;
        }
        for p in ports {
            count += addresses.len();
            let port = int_at(p, &["port"]);
            list.extend(
                addresses.iter().map(|a| join_host_port(str_at(a, &["ip"]), port)).take(MAX - list.len().min(MAX)),
            );
        }
    }
    let ret = list.join(",");
    if count > MAX {
        format!("{ret} + {} more...", count - MAX)
    } else {
        ret
    }
}

pub(super) static ENDPOINT_SLICE: Printer = Printer {
    columns: &[
        NAME,
        col("AddressType", "string", docs::ENDPOINTSLICE_ADDRESS_TYPE),
        col("Ports", "string", docs::ENDPOINTSLICE_PORTS),
        col("Endpoints", "string", docs::ENDPOINTSLICE_ENDPOINTS),
        AGE,
    ],
    cells: |o| {
        let ports = arr(o.v, &["ports"]);
        let port_list: Vec<String> = ports
            .iter()
            .map(|p| match (opt_int(p, &["port"]), at(p, &["name"]).and_then(Value::as_str)) {
                (Some(n), _) => n.to_string(),
                (None, Some(name)) => name.to_string(),
                (None, None) => "*".to_string(),
            })
            .collect();
        let addresses: Vec<String> = arr(o.v, &["endpoints"])
            .iter()
            .flat_map(|e| arr(e, &["addresses"]).iter().map(|a| a.as_str().unwrap_or_default().to_string()))
            .collect();
        vec![
            o.name().into(),
            str_at(o.v, &["addressType"]).into(),
            list_with_more(&port_list, port_list.len(), 3).into(),
            list_with_more(&addresses, addresses.len(), 3).into(),
            o.age().into(),
        ]
    },
};

// ---- Event (core and events.k8s.io) ----

const EVENT_COLUMNS: &[ColumnDefinition] = &[
    col("Last Seen", "string", docs::EVENT_LAST_TIMESTAMP),
    col("Type", "string", docs::EVENT_TYPE),
    col("Reason", "string", docs::EVENT_REASON),
    col("Object", "string", docs::EVENT_INVOLVED_OBJECT),
    wide("Subobject", "string", docs::EVENT_FIELD_PATH),
    wide("Source", "string", docs::EVENT_SOURCE),
    col("Message", "string", docs::EVENT_MESSAGE),
    wide("First Seen", "string", docs::EVENT_FIRST_TIMESTAMP),
    wide("Count", "string", docs::EVENT_COUNT),
    ColumnDefinition { name: "Name", type_: "string", format: "name", description: docs::META_NAME, priority: 1 },
];

pub(super) static EVENT: Printer = Printer {
    columns: EVENT_COLUMNS,
    cells: |o| event_cells(o, ["involvedObject", "message", "source", "firstTimestamp", "lastTimestamp", "count"]),
};

/// events.k8s.io/v1 Events print as the core Event they convert to (`regarding`, `note`, `deprecated*`).
pub(super) static EVENTS_V1_EVENT: Printer = Printer {
    columns: EVENT_COLUMNS,
    cells: |o| {
        event_cells(
            o,
            [
                "regarding",
                "note",
                "deprecatedSource",
                "deprecatedFirstTimestamp",
                "deprecatedLastTimestamp",
                "deprecatedCount",
            ],
        )
    },
};

/// The Event row; `fields` names the involved object, message, source, first/last timestamps and count.
fn event_cells(o: &Obj, fields: [&str; 6]) -> Vec<Value> {
    let v = o.v;
    let [involved, message, source, first, last, count] = fields;
    let first_seen = match time_at(v, &[first]) {
        Some(t) => o.since(Some(t)),
        None => o.since(time_at(v, &["eventTime"])),
    };
    let mut last_seen = match time_at(v, &[last]) {
        Some(t) => o.since(Some(t)),
        None => first_seen.clone(),
    };
    let mut count = int_at(v, &[count]);
    if let Some(series) = at(v, &["series"]) {
        last_seen = o.since(time_at(series, &["lastObservedTime"]));
        count = int_at(series, &["count"]);
    } else if count == 0 {
        count = 1;
    }
    let kind = str_at(v, &[involved, "kind"]).to_lowercase();
    let target = match str_at(v, &[involved, "name"]) {
        "" => kind,
        name => format!("{kind}/{name}"),
    };
    let component = str_or(v, &[source, "component"], str_at(v, &["reportingController"]));
    let instance = str_or(v, &[source, "host"], str_at(v, &["reportingInstance"]));
    let source = if instance.is_empty() { component.to_string() } else { format!("{component}, {instance}") };
    vec![
        last_seen.into(),
        str_at(v, &["type"]).into(),
        str_at(v, &["reason"]).into(),
        target.into(),
        str_at(v, &[involved, "fieldPath"]).into(),
        source.into(),
        str_at(v, &[message]).trim().into(),
        first_seen.into(),
        count.into(),
        o.name().into(),
    ]
}

// ---- ConfigMap, Secret, ServiceAccount ----

pub(super) static CONFIG_MAP: Printer = Printer {
    columns: &[NAME, col("Data", "string", docs::CONFIGMAP_DATA), AGE],
    cells: |o| {
        let n = map_len(o.v, &["data"]) + map_len(o.v, &["binaryData"]);
        vec![o.name().into(), n.into(), o.age().into()]
    },
};

pub(super) static SECRET: Printer = Printer {
    columns: &[NAME, col("Type", "string", docs::SECRET_TYPE), col("Data", "string", docs::SECRET_DATA), AGE],
    cells: |o| {
        vec![o.name().into(), str_or(o.v, &["type"], "Opaque").into(), map_len(o.v, &["data"]).into(), o.age().into()]
    },
};

/// Since v1.35 upstream no longer prints the count of the (legacy) `secrets` list.
pub(super) static SERVICE_ACCOUNT: Printer =
    Printer { columns: &[NAME, AGE], cells: |o| vec![o.name().into(), o.age().into()] };

// ---- PersistentVolume and PersistentVolumeClaim ----

const BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";

/// Upstream's `GetAccessModesAsString`: RWO, ROX, RWX, RWOP in that order, each once.
fn access_modes(modes: &[Value]) -> String {
    let has = |m: &str| modes.iter().any(|x| x.as_str() == Some(m));
    [("ReadWriteOnce", "RWO"), ("ReadOnlyMany", "ROX"), ("ReadWriteMany", "RWX"), ("ReadWriteOncePod", "RWOP")]
        .iter()
        .filter(|(m, _)| has(m))
        .map(|(_, s)| *s)
        .collect::<Vec<_>>()
        .join(",")
}

fn storage_class<'a>(v: &'a Value, spec_field: Option<&'a str>) -> &'a str {
    match at(v, &["metadata", "annotations", BETA_STORAGE_CLASS]).and_then(Value::as_str) {
        Some(class) => class,
        None => spec_field.unwrap_or_default(),
    }
}

pub(super) static PERSISTENT_VOLUME: Printer = Printer {
    columns: &[
        NAME,
        col("Capacity", "string", docs::PV_CAPACITY),
        col("Access Modes", "string", docs::PV_ACCESS_MODES),
        col("Reclaim Policy", "string", docs::PV_RECLAIM_POLICY),
        col("Status", "string", docs::PV_PHASE),
        col("Claim", "string", docs::PV_CLAIM_REF),
        col("StorageClass", "string", "StorageClass of the pv"),
        col("VolumeAttributesClass", "string", "VolumeAttributesClass of the pv"),
        col("Reason", "string", docs::PV_REASON),
        AGE,
        wide("VolumeMode", "string", docs::PV_VOLUME_MODE),
    ],
    cells: |o| {
        let v = o.v;
        let claim = match at(v, &["spec", "claimRef"]) {
            Some(r) => format!("{}/{}", str_at(r, &["namespace"]), str_at(r, &["name"])),
            None => String::new(),
        };
        let phase = if o.deleting() { "Terminating" } else { str_or(v, &["status", "phase"], "Pending") };
        vec![
            o.name().into(),
            quantity_at(v, &["spec", "capacity", "storage"]).into(),
            access_modes(arr(v, &["spec", "accessModes"])).into(),
            str_or(v, &["spec", "persistentVolumeReclaimPolicy"], "Retain").into(),
            phase.into(),
            claim.into(),
            storage_class(v, at(v, &["spec", "storageClassName"]).and_then(Value::as_str)).into(),
            str_or(v, &["spec", "volumeAttributesClassName"], "<unset>").into(),
            str_at(v, &["status", "reason"]).into(),
            o.age().into(),
            str_or(v, &["spec", "volumeMode"], "Filesystem").into(),
        ]
    },
};

pub(super) static PERSISTENT_VOLUME_CLAIM: Printer = Printer {
    columns: &[
        NAME,
        col("Status", "string", docs::PVC_PHASE),
        col("Volume", "string", docs::PVC_VOLUME_NAME),
        col("Capacity", "string", docs::PVC_CAPACITY),
        col("Access Modes", "string", docs::PVC_ACCESS_MODES),
        col("StorageClass", "string", "StorageClass of the pvc"),
        col("VolumeAttributesClass", "string", "VolumeAttributesClass of the pvc"),
        AGE,
        wide("VolumeMode", "string", docs::PVC_VOLUME_MODE),
    ],
    cells: |o| {
        let v = o.v;
        let phase = if o.deleting() { "Terminating" } else { str_or(v, &["status", "phase"], "Pending") };
        let volume = str_at(v, &["spec", "volumeName"]);
        let (capacity, modes) = if volume.is_empty() {
            (String::new(), String::new())
        } else {
            (quantity_at(v, &["status", "capacity", "storage"]), access_modes(arr(v, &["status", "accessModes"])))
        };
        vec![
            o.name().into(),
            phase.into(),
            volume.into(),
            capacity.into(),
            modes.into(),
            storage_class(v, at(v, &["spec", "storageClassName"]).and_then(Value::as_str)).into(),
            str_or(v, &["spec", "volumeAttributesClassName"], "<unset>").into(),
            o.age().into(),
            str_or(v, &["spec", "volumeMode"], "Filesystem").into(),
        ]
    },
};

// ---- ReplicationController ----

pub(super) static REPLICATION_CONTROLLER: Printer = Printer {
    columns: &[
        NAME,
        col("Desired", "integer", docs::RC_SPEC_REPLICAS),
        col("Current", "integer", docs::RC_STATUS_REPLICAS),
        col("Ready", "integer", docs::RC_READY_REPLICAS),
        AGE,
        CONTAINERS,
        IMAGES,
        wide("Selector", "string", docs::RC_SELECTOR),
    ],
    cells: |o| {
        let v = o.v;
        let (names, images) = containers_and_images(arr(v, &["spec", "template", "spec", "containers"]));
        // An empty selector defaults to the template's labels.
        let selector = match at(v, &["spec", "selector"]) {
            Some(s) if s.as_object().is_some_and(|m| !m.is_empty()) => Some(s),
            _ => at(v, &["spec", "template", "metadata", "labels"]),
        };
        vec![
            o.name().into(),
            opt_int(v, &["spec", "replicas"]).unwrap_or(1).into(),
            int_at(v, &["status", "replicas"]).into(),
            int_at(v, &["status", "readyReplicas"]).into(),
            o.age().into(),
            names.into(),
            images.into(),
            format_labels(selector).into(),
        ]
    },
};

// ---- ComponentStatus, ResourceQuota ----

pub(super) static COMPONENT_STATUS: Printer = Printer {
    columns: &[
        NAME,
        col("Status", "string", "Status of the component conditions"),
        col("Message", "string", "Message of the component conditions"),
        col("Error", "string", "Error of the component conditions"),
    ],
    cells: |o| {
        let healthy = condition(arr(o.v, &["conditions"]), "Healthy");
        let status = match healthy {
            Some(c) if str_at(c, &["status"]) == "True" => "Healthy",
            Some(_) => "Unhealthy",
            None => "Unknown",
        };
        let field = |f: &str| healthy.map_or("", |c| str_at(c, &[f]));
        vec![o.name().into(), status.into(), field("message").into(), field("error").into()]
    },
};

pub(super) static RESOURCE_QUOTA: Printer = Printer {
    columns: &[
        NAME,
        col("Request", "string", "Request represents a minimum amount of cpu/memory that a container may consume."),
        col(
            "Limit",
            "string",
            "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
        ),
        AGE,
    ],
    cells: |o| {
        let mut names: Vec<&String> =
            at(o.v, &["status", "hard"]).and_then(Value::as_object).map(|m| m.keys().collect()).unwrap_or_default();
        names.sort();
        let (mut requests, mut limits) = (Vec::new(), Vec::new());
        for name in names {
            let used = quantity_at(o.v, &["status", "used", name]);
            let hard = quantity_at(o.v, &["status", "hard", name]);
            let entry = format!("{name}: {used}/{hard}");
            let pieces: Vec<&str> = name.split('.').collect();
            if pieces.len() > 1 && pieces[0] == "limits" {
                limits.push(entry);
            } else {
                requests.push(entry);
            }
        }
        vec![o.name().into(), requests.join(", ").into(), limits.join(", ").into(), o.age().into()]
    },
};

#[cfg(test)]
mod tests {
    use super::super::{columns, row, tests::now};
    use serde_json::{json, Value};

    fn cells(group: &str, kind: &str, obj: Value) -> Vec<Value> {
        row(group, kind, &obj, now())
    }

    fn names(group: &str, kind: &str) -> Vec<(&'static str, i32)> {
        columns(group, kind).iter().map(|c| (c.name, c.priority)).collect()
    }

    fn meta(name: &str) -> Value {
        json!({"name": name, "namespace": "default", "creationTimestamp": "2026-11-29T20:55:00Z"})
    }

    #[test]
    fn pod_columns_are_upstreams() {
        assert_eq!(
            names("", "Pod"),
            [
                ("Name", 0),
                ("Ready", 0),
                ("Status", 0),
                ("Restarts", 0),
                ("Age", 0),
                ("IP", 1),
                ("Node", 1),
                ("Nominated Node", 1),
                ("Readiness Gates", 1)
            ]
        );
        assert_eq!(columns("", "Pod")[3].type_, "string");
    }

    #[test]
    fn running_pod_prints_ready_ip_and_node() {
        let pod = json!({
            "metadata": meta("web-7d4b9c5f6-abcde"),
            "spec": {"nodeName": "node-1", "containers": [{"name": "nginx", "image": "nginx:1.27"}]},
            "status": {
                "phase": "Running",
                "podIP": "10.42.0.7",
                "podIPs": [{"ip": "10.42.0.7"}],
                "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [{"name": "nginx", "ready": true, "restartCount": 0, "state": {"running": {"startedAt": "2026-11-29T20:55:03Z"}}}]
            }
        });
        assert_eq!(
            cells("", "Pod", pod),
            [
                json!("web-7d4b9c5f6-abcde"),
                json!("1/1"),
                json!("Running"),
                json!("0"),
                json!("5m"),
                json!("10.42.0.7"),
                json!("node-1"),
                json!("<none>"),
                json!("<none>")
            ]
        );
    }

    #[test]
    fn crash_looping_pod_shows_reason_and_last_restart() {
        let pod = json!({
            "metadata": meta("crasher"),
            "spec": {"containers": [{"name": "app", "image": "busybox"}, {"name": "sidecar", "image": "envoy"}]},
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "False"}],
                "containerStatuses": [
                    {"name": "app", "ready": false, "restartCount": 5,
                     "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 2m40s"}},
                     "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": "2026-11-29T20:57:00Z"}}},
                    {"name": "sidecar", "ready": true, "restartCount": 0, "state": {"running": {}}}
                ]
            }
        });
        let c = cells("", "Pod", pod);
        assert_eq!(c[1], json!("1/2"));
        assert_eq!(c[2], json!("CrashLoopBackOff"));
        assert_eq!(c[3], json!("5 (3m ago)"));
    }

    #[test]
    fn init_container_progress_is_shown() {
        let spec = json!({"initContainers": [{"name": "migrate", "image": "m"}, {"name": "warm", "image": "w"}], "containers": [{"name": "app", "image": "a"}]});
        let running_first = json!({
            "metadata": meta("init"), "spec": spec.clone(),
            "status": {"phase": "Pending", "initContainerStatuses": [
                {"name": "migrate", "ready": false, "restartCount": 0, "state": {"running": {}}},
                {"name": "warm", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "PodInitializing"}}}
            ], "containerStatuses": [{"name": "app", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "PodInitializing"}}}]}
        });
        assert_eq!(cells("", "Pod", running_first)[2], json!("Init:0/2"));
        let failed = json!({
            "metadata": meta("init"), "spec": spec.clone(),
            "status": {"phase": "Pending", "initContainerStatuses": [
                {"name": "migrate", "restartCount": 3, "state": {"terminated": {"exitCode": 2, "reason": "Error"}},
                 "lastState": {"terminated": {"exitCode": 2, "finishedAt": "2026-11-29T20:59:00Z"}}}
            ]}
        });
        let c = cells("", "Pod", failed);
        assert_eq!(c[2], json!("Init:Error"));
        assert_eq!(c[3], json!("3 (60s ago)"));
        let crash = json!({
            "metadata": meta("init"), "spec": spec.clone(),
            "status": {"phase": "Pending", "initContainerStatuses": [
                {"name": "migrate", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
                {"name": "warm", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
            ]}
        });
        assert_eq!(cells("", "Pod", crash)[2], json!("Init:CrashLoopBackOff"));
        let signal = json!({
            "metadata": meta("init"), "spec": spec.clone(),
            "status": {"initContainerStatuses": [{"name": "migrate", "state": {"terminated": {"exitCode": 137, "signal": 9}}}]}
        });
        assert_eq!(cells("", "Pod", signal)[2], json!("Init:Signal:9"));
        let done = json!({
            "metadata": meta("init"), "spec": spec,
            "status": {"phase": "Pending", "conditions": [{"type": "Initialized", "status": "True"}],
                "initContainerStatuses": [
                    {"name": "migrate", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
                    {"name": "warm", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
                ],
                "containerStatuses": [{"name": "app", "ready": false, "state": {"waiting": {"reason": "ContainerCreating"}}}]}
        });
        assert_eq!(cells("", "Pod", done)[2], json!("ContainerCreating"));
    }

    #[test]
    fn sidecar_init_containers_count_towards_ready_and_restarts() {
        let pod = json!({
            "metadata": meta("sidecar"),
            "spec": {
                "initContainers": [{"name": "proxy", "image": "envoy", "restartPolicy": "Always"}],
                "containers": [{"name": "app", "image": "a"}]
            },
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"}],
                "initContainerStatuses": [{"name": "proxy", "ready": true, "started": true, "restartCount": 2,
                    "state": {"running": {}}, "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2026-11-29T20:00:00Z"}}}],
                "containerStatuses": [{"name": "app", "ready": true, "restartCount": 0, "state": {"running": {}}}]
            }
        });
        let c = cells("", "Pod", pod);
        assert_eq!((c[1].clone(), c[2].clone(), c[3].clone()), (json!("2/2"), json!("Running"), json!("2 (60m ago)")));
    }

    #[test]
    fn completed_and_failed_containers() {
        let pod = |statuses: Value, phase: &str| {
            json!({"metadata": meta("job-x"), "spec": {"containers": [{"name": "a"}, {"name": "b"}]},
                   "status": {"phase": phase, "containerStatuses": statuses}})
        };
        let done = pod(
            json!([{"name": "a", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
                   {"name": "b", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]),
            "Succeeded",
        );
        assert_eq!(cells("", "Pod", done)[1..3], [json!("0/2"), json!("Completed")]);
        let err = pod(json!([{"name": "a", "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]), "Failed");
        assert_eq!(cells("", "Pod", err)[2], json!("Error"));
        let code = pod(json!([{"name": "a", "state": {"terminated": {"exitCode": 3}}}]), "Failed");
        assert_eq!(cells("", "Pod", code)[2], json!("ExitCode:3"));
        let not_ready = pod(
            json!([{"name": "a", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
                   {"name": "b", "ready": true, "state": {"running": {}}}]),
            "Running",
        );
        assert_eq!(cells("", "Pod", not_ready)[2], json!("NotReady"));
    }

    #[test]
    fn terminating_and_lost_pods() {
        let mut m = meta("going");
        m["deletionTimestamp"] = json!("2026-11-29T20:59:30Z");
        let pod = json!({"metadata": m.clone(), "spec": {"containers": [{"name": "a"}]},
            "status": {"phase": "Running", "containerStatuses": [{"name": "a", "ready": true, "state": {"running": {}}}]}});
        assert_eq!(cells("", "Pod", pod)[2], json!("Terminating"));
        let lost = json!({"metadata": m.clone(), "spec": {"containers": [{"name": "a"}]},
            "status": {"phase": "Running", "reason": "NodeLost"}});
        assert_eq!(cells("", "Pod", lost)[2], json!("Unknown"));
        let finished = json!({"metadata": m, "status": {"phase": "Succeeded"}});
        assert_eq!(cells("", "Pod", finished)[2], json!("Succeeded"));
        let gated = json!({"metadata": meta("g"), "spec": {"containers": [{"name": "a"}]},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}});
        assert_eq!(cells("", "Pod", gated)[2], json!("SchedulingGated"));
        let evicted = json!({"metadata": meta("e"), "status": {"phase": "Failed", "reason": "Evicted"}});
        assert_eq!(cells("", "Pod", evicted)[2], json!("Evicted"));
    }

    #[test]
    fn readiness_gates_and_nominated_node() {
        let pod = json!({"metadata": meta("gated"),
            "spec": {"containers": [{"name": "a"}], "readinessGates": [{"conditionType": "example.com/lb"}, {"conditionType": "example.com/dns"}]},
            "status": {"phase": "Pending", "nominatedNodeName": "node-2", "podIPs": [{"ip": "fd00::5"}],
                "conditions": [{"type": "example.com/lb", "status": "True"}, {"type": "example.com/dns", "status": "False"}]}});
        let c = cells("", "Pod", pod);
        assert_eq!(c[5..], [json!("fd00::5"), json!("<none>"), json!("node-2"), json!("1/2")]);
    }

    #[test]
    fn namespace_prints_phase() {
        let ns = json!({"metadata": {"name": "kube-system", "creationTimestamp": "2026-11-27T21:00:00Z"}, "status": {"phase": "Terminating"}});
        assert_eq!(cells("", "Namespace", ns), [json!("kube-system"), json!("Terminating"), json!("2d")]);
        assert_eq!(names("", "Namespace"), [("Name", 0), ("Status", 0), ("Age", 0)]);
    }

    #[test]
    fn node_status_roles_and_wide_columns() {
        let node = json!({
            "metadata": {"name": "k1s-0", "creationTimestamp": "2026-11-19T21:00:00Z", "labels": {
                "node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/master": "", "kubernetes.io/role": "edge", "kubernetes.io/hostname": "k1s-0"}},
            "spec": {"unschedulable": true},
            "status": {
                "conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "Unknown"}],
                "addresses": [{"type": "InternalIP", "address": "192.168.1.10"}, {"type": "Hostname", "address": "k1s-0"}],
                "nodeInfo": {"kubeletVersion": "v1.35.0", "osImage": "Debian GNU/Linux 13", "kernelVersion": "6.12.0", "containerRuntimeVersion": ""}
            }
        });
        assert_eq!(
            cells("", "Node", node),
            [
                json!("k1s-0"),
                json!("NotReady,SchedulingDisabled"),
                json!("control-plane,edge,master"),
                json!("10d"),
                json!("v1.35.0"),
                json!("192.168.1.10"),
                json!("<none>"),
                json!("Debian GNU/Linux 13"),
                json!("6.12.0"),
                json!("<unknown>")
            ]
        );
        let ready = json!({"metadata": {"name": "n"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        assert_eq!(cells("", "Node", ready)[1..3], [json!("Ready"), json!("<none>")]);
        assert_eq!(cells("", "Node", json!({"spec": {"unschedulable": true}}))[1], json!("Unknown,SchedulingDisabled"));
    }

    #[test]
    fn services_print_type_ips_and_ports() {
        let node_port = json!({
            "metadata": meta("web"),
            "spec": {"type": "NodePort", "clusterIP": "10.43.0.10", "clusterIPs": ["10.43.0.10"], "selector": {"app": "web", "tier": "fe"},
                "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP", "nodePort": 30053}]}
        });
        assert_eq!(
            cells("", "Service", node_port),
            [
                json!("web"),
                json!("NodePort"),
                json!("10.43.0.10"),
                json!("<none>"),
                json!("80:30080/TCP,53:30053/UDP"),
                json!("5m"),
                json!("app=web,tier=fe")
            ]
        );
        let cluster_ip = json!({"metadata": meta("k"), "spec": {"clusterIP": "10.43.0.1", "ports": [{"port": 443}]}});
        assert_eq!(
            cells("", "Service", cluster_ip)[1..7],
            [json!("ClusterIP"), json!("10.43.0.1"), json!("<none>"), json!("443/TCP"), json!("5m"), json!("<none>")]
        );
        let lb_pending = json!({"metadata": meta("lb"), "spec": {"type": "LoadBalancer", "clusterIPs": ["10.43.0.9"], "ports": [{"port": 80, "nodePort": 31000, "protocol": "TCP"}]}});
        assert_eq!(cells("", "Service", lb_pending)[3], json!("<pending>"));
        let lb = json!({"metadata": meta("lb"), "spec": {"type": "LoadBalancer", "externalIPs": ["1.2.3.4"]},
            "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.9"}, {"hostname": "a-very-long-hostname.example.com"}]}}});
        assert_eq!(cells("", "Service", lb)[3], json!("203.0.113.9,a-very-long-hostname.example.com,1.2.3.4"));
        let headless = json!({"metadata": meta("db"), "spec": {"clusterIP": "None", "clusterIPs": ["None"]}});
        assert_eq!(cells("", "Service", headless)[2..5], [json!("None"), json!("<none>"), json!("<none>")]);
        let ext = json!({"metadata": meta("ext"), "spec": {"type": "ExternalName", "externalName": "db.example.com"}});
        assert_eq!(cells("", "Service", ext)[2..4], [json!("<none>"), json!("db.example.com")]);
    }

    #[test]
    fn endpoints_and_slices_list_up_to_three() {
        let ep = json!({"metadata": meta("web"), "subsets": [
            {"addresses": [{"ip": "10.42.0.5"}, {"ip": "10.42.0.6"}], "ports": [{"port": 8080}, {"port": 9090}]},
            {"addresses": [{"ip": "fd00::1"}]}
        ]});
        assert_eq!(cells("", "Endpoints", ep)[1], json!("10.42.0.5:8080,10.42.0.6:8080,10.42.0.5:9090 + 2 more..."));
        let v6 = json!({"subsets": [{"addresses": [{"ip": "fd00::1"}], "ports": [{"port": 80}]}]});
        assert_eq!(cells("", "Endpoints", v6)[1], json!("[fd00::1]:80"));
        assert_eq!(cells("", "Endpoints", json!({}))[1], json!("<none>"));
        let slice = json!({"metadata": meta("web-abc"), "addressType": "IPv4",
            "ports": [{"name": "http", "port": 80}, {"name": "metrics"}, {}],
            "endpoints": [{"addresses": ["10.42.0.5"]}, {"addresses": ["10.42.0.6"]}, {"addresses": ["10.42.0.7"]}, {"addresses": ["10.42.0.8"]}]});
        assert_eq!(
            cells("discovery.k8s.io", "EndpointSlice", slice)[1..4],
            [json!("IPv4"), json!("80,metrics,*"), json!("10.42.0.5,10.42.0.6,10.42.0.7 + 1 more...")]
        );
        assert_eq!(cells("discovery.k8s.io", "EndpointSlice", json!({}))[2..4], [json!("<unset>"), json!("<unset>")]);
    }

    #[test]
    fn core_events_print_object_and_source() {
        let ev = json!({
            "metadata": {"name": "web.17a", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "web", "fieldPath": "spec.containers{nginx}"},
            "reason": "BackOff", "type": "Warning", "message": "Back-off restarting failed container\n",
            "source": {"component": "kubelet", "host": "node-1"},
            "firstTimestamp": "2026-11-29T20:00:00Z", "lastTimestamp": "2026-11-29T20:58:00Z", "count": 12
        });
        assert_eq!(
            cells("", "Event", ev),
            [
                json!("2m"),
                json!("Warning"),
                json!("BackOff"),
                json!("pod/web"),
                json!("spec.containers{nginx}"),
                json!("kubelet, node-1"),
                json!("Back-off restarting failed container"),
                json!("60m"),
                json!(12),
                json!("web.17a")
            ]
        );
        assert_eq!(
            names("", "Event"),
            [
                ("Last Seen", 0),
                ("Type", 0),
                ("Reason", 0),
                ("Object", 0),
                ("Subobject", 1),
                ("Source", 1),
                ("Message", 0),
                ("First Seen", 1),
                ("Count", 1),
                ("Name", 1)
            ]
        );
    }

    #[test]
    fn new_style_events_use_event_time_series_and_reporter() {
        let core = json!({
            "metadata": {"name": "e1"}, "involvedObject": {"kind": "Node"},
            "eventTime": "2026-11-29T20:50:00.000000Z", "reportingController": "k1s-scheduler", "reportingInstance": "k1s-0",
            "series": {"count": 4, "lastObservedTime": "2026-11-29T20:59:00.000000Z"}, "reason": "Scheduled", "type": "Normal"
        });
        let c = cells("", "Event", core);
        assert_eq!(
            (c[0].clone(), c[3].clone(), c[5].clone(), c[7].clone(), c[8].clone()),
            (json!("60s"), json!("node"), json!("k1s-scheduler, k1s-0"), json!("10m"), json!(4))
        );
        let v1 = json!({
            "metadata": {"name": "e2"},
            "regarding": {"kind": "Deployment", "name": "web"}, "note": "Scaled up replica set web-1 to 3",
            "eventTime": "2026-11-29T20:58:00.000000Z", "reportingController": "deployment-controller", "reason": "ScalingReplicaSet", "type": "Normal"
        });
        assert_eq!(
            cells("events.k8s.io", "Event", v1),
            [
                json!("2m"),
                json!("Normal"),
                json!("ScalingReplicaSet"),
                json!("deployment/web"),
                json!(""),
                json!("deployment-controller"),
                json!("Scaled up replica set web-1 to 3"),
                json!("2m"),
                json!(1),
                json!("e2")
            ]
        );
    }

    #[test]
    fn configmaps_secrets_and_service_accounts() {
        let cm = json!({"metadata": meta("cfg"), "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}});
        assert_eq!(cells("", "ConfigMap", cm), [json!("cfg"), json!(3), json!("5m")]);
        let secret =
            json!({"metadata": meta("tls"), "type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}});
        assert_eq!(cells("", "Secret", secret), [json!("tls"), json!("kubernetes.io/tls"), json!(2), json!("5m")]);
        assert_eq!(cells("", "Secret", json!({"metadata": meta("s")}))[1..3], [json!("Opaque"), json!(0)]);
        assert_eq!(names("", "ServiceAccount"), [("Name", 0), ("Age", 0)]);
        assert_eq!(
            cells("", "ServiceAccount", json!({"metadata": meta("default"), "secrets": [{"name": "x"}]})),
            [json!("default"), json!("5m")]
        );
    }

    #[test]
    fn volumes_and_claims() {
        let pv = json!({
            "metadata": {"name": "pv-1", "creationTimestamp": "2026-11-29T20:00:00Z"},
            "spec": {"capacity": {"storage": "1024Mi"}, "accessModes": ["ReadWriteMany", "ReadWriteOnce", "ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Delete", "claimRef": {"namespace": "default", "name": "data"},
                "storageClassName": "local-path"},
            "status": {"phase": "Bound"}
        });
        assert_eq!(
            cells("", "PersistentVolume", pv),
            [
                json!("pv-1"),
                json!("1Gi"),
                json!("RWO,RWX"),
                json!("Delete"),
                json!("Bound"),
                json!("default/data"),
                json!("local-path"),
                json!("<unset>"),
                json!(""),
                json!("60m"),
                json!("Filesystem")
            ]
        );
        let pending = json!({"metadata": {"name": "data", "annotations": {"volume.beta.kubernetes.io/storage-class": "fast"}},
            "spec": {"storageClassName": "slow", "resources": {"requests": {"storage": "5Gi"}}}, "status": {"phase": "Pending"}});
        assert_eq!(
            cells("", "PersistentVolumeClaim", pending)[1..6],
            [json!("Pending"), json!(""), json!(""), json!(""), json!("fast")]
        );
        let bound = json!({"metadata": meta("data"), "spec": {"volumeName": "pv-1", "storageClassName": "local-path", "volumeMode": "Block"},
            "status": {"phase": "Bound", "capacity": {"storage": "0.5Gi"}, "accessModes": ["ReadWriteOncePod"]}});
        assert_eq!(
            cells("", "PersistentVolumeClaim", bound),
            [
                json!("data"),
                json!("Bound"),
                json!("pv-1"),
                json!("512Mi"),
                json!("RWOP"),
                json!("local-path"),
                json!("<unset>"),
                json!("5m"),
                json!("Block")
            ]
        );
    }

    #[test]
    fn replication_controllers_templates_quotas_and_component_statuses() {
        let rc = json!({"metadata": meta("rc"), "spec": {"selector": {"app": "x"}, "template": {"spec": {"containers": [{"name": "a", "image": "i:1"}, {"name": "b", "image": "j:2"}]}}},
            "status": {"replicas": 2, "readyReplicas": 1}});
        assert_eq!(
            cells("", "ReplicationController", rc),
            [json!("rc"), json!(1), json!(2), json!(1), json!("5m"), json!("a,b"), json!("i:1,j:2"), json!("app=x")]
        );
        let pt = json!({"metadata": meta("pt"), "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "a", "image": "i"}]}}});
        assert_eq!(cells("", "PodTemplate", pt), [json!("pt"), json!("a"), json!("i"), json!("app=x")]);
        let quota = json!({"metadata": meta("q"), "status": {
            "hard": {"requests.cpu": "2", "limits.memory": "2Gi", "pods": "10", "limits.cpu": "4000m"},
            "used": {"requests.cpu": "500m", "limits.memory": "1024Mi", "pods": "3"}}});
        assert_eq!(
            cells("", "ResourceQuota", quota)[1..3],
            [json!("pods: 3/10, requests.cpu: 500m/2"), json!("limits.cpu: 0/4, limits.memory: 1Gi/2Gi")]
        );
        let cs = json!({"metadata": {"name": "etcd-0"}, "conditions": [{"type": "Healthy", "status": "True", "message": "ok"}]});
        assert_eq!(cells("", "ComponentStatus", cs), [json!("etcd-0"), json!("Healthy"), json!("ok"), json!("")]);
    }
}
