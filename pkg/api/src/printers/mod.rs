//! Server-side printing: the columns and cells of a `meta.k8s.io/v1` Table for each kind, as upstream's
//! `pkg/printers/internalversion/printers.go` (v1.35) builds them for `kubectl get`.
//!
//! The API server always prints "wide" (every column, priority 1 included); kubectl hides the priority-1
//! columns unless `-o wide`. Objects are the stored JSON. Upstream prints the internal object after decoding
//! and defaulting, so where a printed field has a registered default (replicas 1, Service type `ClusterIP`,
//! protocol `TCP`, …) a missing field prints as its default here. Kinds without a printer (Role, ClusterRole,
//! CustomResourceDefinition, LimitRange, …) get upstream's default table: Name and Created At.

mod apps;
mod cluster;
mod core_api;
mod docs;
mod quantity;

use jiff::Timestamp;
use serde_json::Value;
use std::time::Duration;

/// One `meta.k8s.io/v1` `TableColumnDefinition`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColumnDefinition {
    pub name: &'static str,
    /// An OpenAPI type: `string`, `integer`, `boolean`, `date`, …
    pub type_: &'static str,
    /// `name` for the column holding the object's name, else empty.
    pub format: &'static str,
    pub description: &'static str,
    /// 0 for the default columns, 1 for the `-o wide` ones.
    pub priority: i32,
}

impl ColumnDefinition {
    /// The column's wire form (`{name,type,format,description,priority}`, every field always present).
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "name": self.name,
            "type": self.type_,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }
}

/// The columns for objects of `kind` in API group `group` (`""` for core). The first is the Name column
/// (format `name`) for every kind but Event, whose Name is a wide column, and Scale, whose Name column
/// lacks the format, both as upstream.
pub fn columns(group: &str, kind: &str) -> Vec<ColumnDefinition> {
    printer(group, kind).map_or(DEFAULT_COLUMNS, |p| p.columns).to_vec()
}

/// The cells of one object's row, one per entry of [`columns`]; ages are computed against `now`.
pub fn row(group: &str, kind: &str, obj: &Value, now: Timestamp) -> Vec<Value> {
    let o = Obj { v: obj, now };
    match printer(group, kind) {
        Some(p) => (p.cells)(&o),
        None => default_cells(&o),
    }
}

/// Upstream's `duration.HumanDuration`: about two significant figures (`45s`, `5m30s`, `3h10m`, `2d4h`, `1y`).
pub fn human_duration(d: Duration) -> String {
    human_nanos(i128::try_from(d.as_nanos()).unwrap_or(i128::MAX))
}

/// A kind's printer: its columns and the function computing a row's cells.
struct Printer {
    columns: &'static [ColumnDefinition],
    cells: fn(&Obj) -> Vec<Value>,
}

fn printer(group: &str, kind: &str) -> Option<&'static Printer> {
    let p = match (group, kind) {
        ("", "Pod") => &core_api::POD,
        ("", "PodTemplate") => &core_api::POD_TEMPLATE,
        ("", "Namespace") => &core_api::NAMESPACE,
        ("", "Node") => &core_api::NODE,
        ("", "Service") => &core_api::SERVICE,
        ("", "Endpoints") => &core_api::ENDPOINTS,
        ("", "Event") => &core_api::EVENT,
        ("events.k8s.io", "Event") => &core_api::EVENTS_V1_EVENT,
        ("", "ConfigMap") => &core_api::CONFIG_MAP,
        ("", "Secret") => &core_api::SECRET,
        ("", "ServiceAccount") => &core_api::SERVICE_ACCOUNT,
        ("", "PersistentVolume") => &core_api::PERSISTENT_VOLUME,
        ("", "PersistentVolumeClaim") => &core_api::PERSISTENT_VOLUME_CLAIM,
        ("", "ReplicationController") => &core_api::REPLICATION_CONTROLLER,
        ("", "ComponentStatus") => &core_api::COMPONENT_STATUS,
        ("", "ResourceQuota") => &core_api::RESOURCE_QUOTA,
        ("discovery.k8s.io", "EndpointSlice") => &core_api::ENDPOINT_SLICE,
        ("apps", "Deployment") => &apps::DEPLOYMENT,
        ("apps", "ReplicaSet") => &apps::REPLICA_SET,
        ("apps", "StatefulSet") => &apps::STATEFUL_SET,
        ("apps", "DaemonSet") => &apps::DAEMON_SET,
        ("apps", "ControllerRevision") => &apps::CONTROLLER_REVISION,
        ("batch", "Job") => &apps::JOB,
        ("batch", "CronJob") => &apps::CRON_JOB,
        ("autoscaling", "HorizontalPodAutoscaler") => &apps::HORIZONTAL_POD_AUTOSCALER,
        ("autoscaling", "Scale") => &apps::SCALE,
        ("policy", "PodDisruptionBudget") => &apps::POD_DISRUPTION_BUDGET,
        ("networking.k8s.io", "Ingress") => &cluster::INGRESS,
        ("networking.k8s.io", "IngressClass") => &cluster::INGRESS_CLASS,
        ("networking.k8s.io", "NetworkPolicy") => &cluster::NETWORK_POLICY,
        ("networking.k8s.io", "ServiceCIDR") => &cluster::SERVICE_CIDR,
        ("networking.k8s.io", "IPAddress") => &cluster::IP_ADDRESS,
        ("rbac.authorization.k8s.io", "RoleBinding") => &cluster::ROLE_BINDING,
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => &cluster::CLUSTER_ROLE_BINDING,
        ("storage.k8s.io", "StorageClass") => &cluster::STORAGE_CLASS,
        ("storage.k8s.io", "VolumeAttributesClass") => &cluster::VOLUME_ATTRIBUTES_CLASS,
        ("storage.k8s.io", "VolumeAttachment") => &cluster::VOLUME_ATTACHMENT,
        ("storage.k8s.io", "CSIDriver") => &cluster::CSI_DRIVER,
        ("storage.k8s.io", "CSINode") => &cluster::CSI_NODE,
        ("storage.k8s.io", "CSIStorageCapacity") => &cluster::CSI_STORAGE_CAPACITY,
        ("scheduling.k8s.io", "PriorityClass") => &cluster::PRIORITY_CLASS,
        ("node.k8s.io", "RuntimeClass") => &cluster::RUNTIME_CLASS,
        ("coordination.k8s.io", "Lease") => &cluster::LEASE,
        ("certificates.k8s.io", "CertificateSigningRequest") => &cluster::CERTIFICATE_SIGNING_REQUEST,
        ("apiregistration.k8s.io", "APIService") => &cluster::API_SERVICE,
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration")
        | ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration") => &cluster::WEBHOOK_CONFIGURATION,
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy") => &cluster::VALIDATING_ADMISSION_POLICY,
        ("admissionregistration.k8s.io", "MutatingAdmissionPolicy") => &cluster::MUTATING_ADMISSION_POLICY,
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding")
        | ("admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding") => &cluster::ADMISSION_POLICY_BINDING,
        _ => return None,
    };
    Some(p)
}

/// Upstream's default table (`rest.NewDefaultTableConvertor`): Name, and the creation time as RFC 3339.
const DEFAULT_COLUMNS: &[ColumnDefinition] = &[
    NAME,
    ColumnDefinition {
        name: "Created At",
        type_: "date",
        format: "",
        description: docs::META_CREATION_TIMESTAMP,
        priority: 0,
    },
];

fn default_cells(o: &Obj) -> Vec<Value> {
    let created = time_at(o.v, &["metadata", "creationTimestamp"]).unwrap_or(GO_ZERO_TIME);
    vec![o.name().into(), created.strftime("%Y-%m-%dT%H:%M:%SZ").to_string().into()]
}

// ---- column helpers ----

const fn col(name: &'static str, type_: &'static str, description: &'static str) -> ColumnDefinition {
    ColumnDefinition { name, type_, format: "", description, priority: 0 }
}

const fn wide(name: &'static str, type_: &'static str, description: &'static str) -> ColumnDefinition {
    ColumnDefinition { name, type_, format: "", description, priority: 1 }
}

const NAME: ColumnDefinition =
    ColumnDefinition { name: "Name", type_: "string", format: "name", description: docs::META_NAME, priority: 0 };
const AGE: ColumnDefinition = col("Age", "string", docs::META_CREATION_TIMESTAMP);
const CONTAINERS: ColumnDefinition = wide("Containers", "string", "Names of each container in the template.");
const IMAGES: ColumnDefinition = wide("Images", "string", "Images referenced by each container in the template.");

// ---- object access ----

/// The object being printed and the time ages are measured against.
struct Obj<'a> {
    v: &'a Value,
    now: Timestamp,
}

impl Obj<'_> {
    fn name(&self) -> &str {
        str_at(self.v, &["metadata", "name"])
    }

    /// The Age cell: time since `metadata.creationTimestamp`.
    fn age(&self) -> String {
        self.since(time_at(self.v, &["metadata", "creationTimestamp"]))
    }

    /// Upstream's `translateTimestampSince`: `<unknown>` for a zero time.
    fn since(&self, t: Option<Timestamp>) -> String {
        match t {
            Some(t) => human_nanos(self.now.as_nanosecond() - t.as_nanosecond()),
            None => "<unknown>".to_string(),
        }
    }

    fn deleting(&self) -> bool {
        present(self.v, &["metadata", "deletionTimestamp"])
    }
}

fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let mut cur = v;
    for key in path {
        cur = cur.get(key)?;
    }
    if cur.is_null() {
        None
    } else {
        Some(cur)
    }
}

/// Whether a field is set (a non-null value), as a Go pointer being non-nil.
fn present(v: &Value, path: &[&str]) -> bool {
    at(v, path).is_some()
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    at(v, path).and_then(Value::as_str).unwrap_or_default()
}

/// A string field, or `default` when it is missing or empty (upstream prints the defaulted object).
fn str_or<'a>(v: &'a Value, path: &[&str], default: &'a str) -> &'a str {
    match str_at(v, path) {
        "" => default,
        s => s,
    }
}

fn opt_int(v: &Value, path: &[&str]) -> Option<i64> {
    at(v, path).and_then(Value::as_i64)
}

fn int_at(v: &Value, path: &[&str]) -> i64 {
    opt_int(v, path).unwrap_or_default()
}

fn bool_at(v: &Value, path: &[&str]) -> Option<bool> {
    at(v, path).and_then(Value::as_bool)
}

fn arr<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
    at(v, path).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default()
}

fn map_len(v: &Value, path: &[&str]) -> usize {
    at(v, path).and_then(Value::as_object).map_or(0, |m| m.len())
}

/// The condition of type `ty` in a `conditions` list, first match.
fn condition<'a>(conditions: &'a [Value], ty: &str) -> Option<&'a Value> {
    conditions.iter().find(|c| str_at(c, &["type"]) == ty)
}

/// Upstream's `printBoolPtr`.
fn bool_ptr(b: Option<bool>) -> String {
    match b {
        Some(true) => "True".to_string(),
        Some(false) => "False".to_string(),
        None => "<unset>".to_string(),
    }
}

// ---- time ----

/// Go's zero `time.Time`, which `metav1.Time` uses for "unset".
const GO_ZERO_TIME: Timestamp = Timestamp::constant(-62_135_596_800, 0);

/// A `metav1.Time`/`MicroTime` field; `None` when missing, unparsable or Go's zero time.
fn time_at(v: &Value, path: &[&str]) -> Option<Timestamp> {
    let t: Timestamp = at(v, path)?.as_str()?.parse().ok()?;
    (t != GO_ZERO_TIME).then_some(t)
}

/// `duration.HumanDuration` on a signed span in nanoseconds (Go's `time.Duration`, saturating).
fn human_nanos(nanos: i128) -> String {
    let d = i64::try_from(nanos).unwrap_or(if nanos < 0 { i64::MIN } else { i64::MAX });
    const SEC: i64 = 1_000_000_000;
    let seconds = d / SEC;
    if seconds < -1 {
        return "<invalid>".to_string();
    } else if seconds < 0 {
        return "0s".to_string();
    } else if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = d / (60 * SEC);
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 { format!("{minutes}m") } else { format!("{minutes}m{s}s") };
    } else if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = d / (3600 * SEC);
    if hours < 8 {
        let m = minutes % 60;
        if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        }
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        let h = hours % 24;
        if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{}h", hours / 24, h)
        }
    } else if hours < 24 * 365 * 2 {
        format!("{}d", hours / 24)
    } else if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{}d", hours / 24 / 365, dy)
        }
    } else {
        format!("{}y", hours / 24 / 365)
    }
}

// ---- labels and selectors ----

/// `labels.FormatLabels`: `k=v` sorted by key, comma-joined; `<none>` when empty.
fn format_labels(map: Option<&Value>) -> String {
    let mut pairs: Vec<(&str, &str)> = map
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.as_str(), v.as_str().unwrap_or_default())).collect())
        .unwrap_or_default();
    if pairs.is_empty() {
        return "<none>".to_string();
    }
    pairs.sort_unstable();
    pairs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

/// `metav1.LabelSelectorAsSelector(sel).String()`; `Err` when the selector is invalid. A missing selector
/// (nothing) and an empty one (everything) both print as the empty string.
fn label_selector_string(sel: Option<&Value>) -> Result<String, ()> {
    let Some(sel) = sel else { return Ok(String::new()) };
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(ml) = sel.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in ml {
            let v = v.as_str().unwrap_or_default();
            valid_requirement(k, &[v])?;
            reqs.push((k.clone(), format!("{k}={v}")));
        }
    }
    for e in sel.get("matchExpressions").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default() {
        let key = str_at(e, &["key"]);
        let mut values: Vec<&str> = arr(e, &["values"]).iter().map(|v| v.as_str().unwrap_or_default()).collect();
        let op = str_at(e, &["operator"]);
        match op {
            "In" | "NotIn" if values.is_empty() => return Err(()),
            "Exists" | "DoesNotExist" if !values.is_empty() => return Err(()),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            _ => return Err(()),
        }
        valid_requirement(key, &values)?;
        values.sort_unstable();
        let text = match op {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            _ => format!("!{key}"),
        };
        reqs.push((key.to_string(), text));
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(reqs.into_iter().map(|(_, t)| t).collect::<Vec<_>>().join(","))
}

fn valid_requirement(key: &str, values: &[&str]) -> Result<(), ()> {
    if !crate::meta::qualified_name(key).is_empty() || values.iter().any(|v| !crate::meta::label_value(v).is_empty()) {
        return Err(());
    }
    Ok(())
}

/// `metav1.FormatLabelSelector`: `<error>` when invalid, `<none>` when it selects nothing or everything.
fn format_label_selector(sel: Option<&Value>) -> String {
    match label_selector_string(sel) {
        Err(()) => "<error>".to_string(),
        Ok(s) if s.is_empty() => "<none>".to_string(),
        Ok(s) => s,
    }
}

/// Upstream's `layoutContainerCells`: container names and images, comma-joined.
fn containers_and_images(containers: &[Value]) -> (String, String) {
    let names: Vec<&str> = containers.iter().map(|c| str_at(c, &["name"])).collect();
    let images: Vec<&str> = containers.iter().map(|c| str_at(c, &["image"])).collect();
    (names.join(","), images.join(","))
}

/// A `resource.Quantity` field as `Quantity.String()` prints it (canonical form); a missing value is the
/// zero quantity, `0`.
fn quantity_at(v: &Value, path: &[&str]) -> String {
    at(v, path).map_or_else(|| "0".to_string(), quantity::format_value)
}

/// A `*resource.Quantity` field: `<nil>` when missing, as Go prints a nil pointer's `String()`.
fn quantity_ptr(v: &Value, path: &[&str]) -> String {
    at(v, path).map_or_else(|| "<nil>".to_string(), quantity::format_value)
}

/// `intstr.IntOrString.String()`.
fn int_or_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    }
}

/// Joins at most `max` items with `sep`, adding ` + N more...` for the rest, as upstream's list printers.
fn list_with_more(list: &[String], count: usize, max: usize) -> String {
    let shown = &list[..list.len().min(max)];
    let ret = shown.join(",");
    if count > max {
        format!("{ret} + {} more...", count - max)
    } else if ret.is_empty() {
        "<unset>".to_string()
    } else {
        ret
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    pub(super) fn now() -> Timestamp {
        "2026-11-29T21:00:00Z".parse().expect("timestamp")
    }

    /// Every printer's rows are as long as its columns, for an empty object and for a minimal one.
    #[test]
    fn every_printer_row_matches_its_columns() {
        let kinds = [
            ("", "Pod"),
            ("", "PodTemplate"),
            ("", "Namespace"),
            ("", "Node"),
            ("", "Service"),
            ("", "Endpoints"),
            ("", "Event"),
            ("events.k8s.io", "Event"),
            ("", "ConfigMap"),
            ("", "Secret"),
            ("", "ServiceAccount"),
            ("", "PersistentVolume"),
            ("", "PersistentVolumeClaim"),
            ("", "ReplicationController"),
            ("", "ComponentStatus"),
            ("", "ResourceQuota"),
            ("discovery.k8s.io", "EndpointSlice"),
            ("apps", "Deployment"),
            ("apps", "ReplicaSet"),
            ("apps", "StatefulSet"),
            ("apps", "DaemonSet"),
            ("apps", "ControllerRevision"),
            ("batch", "Job"),
            ("batch", "CronJob"),
            ("autoscaling", "HorizontalPodAutoscaler"),
            ("autoscaling", "Scale"),
            ("policy", "PodDisruptionBudget"),
            ("networking.k8s.io", "Ingress"),
            ("networking.k8s.io", "IngressClass"),
            ("networking.k8s.io", "NetworkPolicy"),
            ("networking.k8s.io", "ServiceCIDR"),
            ("networking.k8s.io", "IPAddress"),
            ("rbac.authorization.k8s.io", "RoleBinding"),
            ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
            ("rbac.authorization.k8s.io", "Role"),
            ("storage.k8s.io", "StorageClass"),
            ("storage.k8s.io", "VolumeAttributesClass"),
            ("storage.k8s.io", "VolumeAttachment"),
            ("storage.k8s.io", "CSIDriver"),
            ("storage.k8s.io", "CSINode"),
            ("storage.k8s.io", "CSIStorageCapacity"),
            ("scheduling.k8s.io", "PriorityClass"),
            ("node.k8s.io", "RuntimeClass"),
            ("coordination.k8s.io", "Lease"),
            ("certificates.k8s.io", "CertificateSigningRequest"),
            ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
            ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
            ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
            ("apiextensions.k8s.io", "CustomResourceDefinition"),
        ];
        let minimal = json!({"metadata": {"name": "x", "creationTimestamp": "2026-11-29T20:00:00Z"}});
        for (g, k) in kinds {
            let cols = columns(g, k);
            // Upstream's Scale columns name the Name column without the `name` format.
            let want_format = if k == "Scale" { "" } else { "name" };
            assert!(cols.iter().any(|c| c.name == "Name" && c.format == want_format), "{g}/{k} has a Name column");
            if k != "Event" {
                assert_eq!(cols[0].name, "Name", "{g}/{k} starts with Name");
            }
            for obj in [json!({}), minimal.clone()] {
                assert_eq!(row(g, k, &obj, now()).len(), cols.len(), "{g}/{k} cells for {obj}");
            }
        }
    }

    #[test]
    fn unknown_kinds_get_name_and_created_at() {
        let cols = columns("rbac.authorization.k8s.io", "ClusterRole");
        assert_eq!(
            cols.iter().map(|c| (c.name, c.type_)).collect::<Vec<_>>(),
            [("Name", "string"), ("Created At", "date")]
        );
        assert!(cols[1].description.starts_with("CreationTimestamp is a timestamp"));
        let obj = json!({"metadata": {"name": "admin", "creationTimestamp": "2026-11-01T08:09:10Z"}});
        assert_eq!(
            row("apiextensions.k8s.io", "CustomResourceDefinition", &obj, now()),
            [json!("admin"), json!("2026-11-01T08:09:10Z")]
        );
        assert_eq!(row("example.com", "Widget", &json!({}), now()), [json!(""), json!("0001-01-01T00:00:00Z")]);
    }

    #[test]
    fn column_json_has_every_field() {
        assert_eq!(
            wide("IP", "string", "d").to_json(),
            json!({"name": "IP", "type": "string", "format": "", "description": "d", "priority": 1})
        );
    }

    #[test]
    fn human_duration_matches_upstream_table() {
        let s = |secs: u64| human_duration(Duration::from_secs(secs));
        assert_eq!(human_duration(Duration::from_millis(500)), "0s");
        assert_eq!(s(59), "59s");
        assert_eq!(s(119), "119s");
        assert_eq!(s(120), "2m");
        assert_eq!(s(5 * 60 + 30), "5m30s");
        assert_eq!(s(10 * 60 + 30), "10m");
        assert_eq!(s(179 * 60), "179m");
        assert_eq!(s(3 * 3600 + 10 * 60), "3h10m");
        assert_eq!(s(5 * 3600), "5h");
        assert_eq!(s(8 * 3600 + 59 * 60), "8h");
        assert_eq!(s(47 * 3600), "47h");
        assert_eq!(s(48 * 3600), "2d");
        assert_eq!(s(2 * 86400 + 4 * 3600), "2d4h");
        assert_eq!(s(8 * 86400 + 4 * 3600), "8d");
        assert_eq!(s(729 * 86400), "729d");
        assert_eq!(s(730 * 86400), "2y");
        assert_eq!(s(800 * 86400), "2y70d");
        assert_eq!(s(9 * 365 * 86400), "9y");
    }

    #[test]
    fn negative_ages_tolerate_clock_skew() {
        assert_eq!(human_nanos(-1_500_000_000), "0s");
        assert_eq!(human_nanos(-2_000_000_000), "<invalid>");
        let o = Obj { v: &json!({"metadata": {"creationTimestamp": "2026-11-29T21:00:05Z"}}), now: now() };
        assert_eq!(o.age(), "<invalid>");
        let o = Obj { v: &json!({"metadata": {"creationTimestamp": "0001-01-01T00:00:00Z"}}), now: now() };
        assert_eq!(o.age(), "<unknown>");
    }

    #[test]
    fn label_selectors_print_sorted_and_validated() {
        let sel = json!({
            "matchLabels": {"tier": "web", "app": "nginx"},
            "matchExpressions": [
                {"key": "env", "operator": "In", "values": ["prod", "dev"]},
                {"key": "legacy", "operator": "DoesNotExist"},
                {"key": "zone", "operator": "NotIn", "values": ["b"]},
                {"key": "canary", "operator": "Exists"}
            ]
        });
        assert_eq!(
            format_label_selector(Some(&sel)),
            "app=nginx,canary,env in (dev,prod),!legacy,tier=web,zone notin (b)"
        );
        assert_eq!(format_label_selector(Some(&json!({}))), "<none>");
        assert_eq!(format_label_selector(None), "<none>");
        assert_eq!(format_label_selector(Some(&json!({"matchLabels": {"bad key!": "x"}}))), "<error>");
        assert_eq!(
            format_label_selector(Some(&json!({"matchExpressions": [{"key": "a", "operator": "In"}]}))),
            "<error>"
        );
        assert_eq!(
            format_label_selector(Some(
                &json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]})
            )),
            "<error>"
        );
        assert_eq!(format_labels(Some(&json!({"b": "2", "a": "1"}))), "a=1,b=2");
        assert_eq!(format_labels(Some(&json!({}))), "<none>");
    }
}
