//! The downward API's value extraction, shared by environment variables and downwardAPI
//! volumes: pod fields (`metadata.labels['k']`, `status.podIP`…) as upstream's
//! `pkg/fieldpath` and `podFieldSelectorRuntimeValue`, and container resources
//! (`limits.cpu` with a divisor, rounded up) as `ExtractContainerResourceValue`, with limits a
//! container does not set defaulted to the pod-level limit or else the node's allocatable.

use k1s_api::strategies::quantity::Quantity;
use k8s_openapi::api::core::v1::{Container, ObjectFieldSelector, Pod, ResourceFieldSelector};
use std::collections::{BTreeMap, HashMap};

/// Why a downward API value could not be produced (upstream's messages).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FieldPathError {
    #[error("unsupported pod version: {0}")]
    Version(String),
    #[error("field label not supported: {0}")]
    Label(String),
    #[error("invalid key subscript in {path}: {reason}")]
    Subscript { path: String, reason: String },
    #[error("fieldPath {0:?} does not support subscript")]
    NoSubscript(String),
    #[error("unsupported fieldPath: {0}")]
    Unsupported(String),
    #[error("unsupported container resource : {0}")]
    Resource(String),
    #[error("container {0} not found")]
    Container(String),
    #[error("invalid quantity {value:?} for {resource}")]
    Quantity { resource: String, value: String },
}

/// Runtime facts the pod object may not carry yet.
#[derive(Clone, Copy, Debug, Default)]
pub struct RuntimeFields<'a> {
    /// The sandbox IPs, primary first; empty means "use `status.podIPs`".
    pub pod_ips: &'a [String],
    /// The node's IPs; empty means "use `status.hostIPs`".
    pub host_ips: &'a [String],
}

/// Splits `metadata.labels['key']` into (`metadata.labels`, `key`).
fn split_subscript(path: &str) -> Option<(&str, &str)> {
    let s = path.strip_suffix("']")?;
    let (head, key) = s.split_once("['")?;
    if head.is_empty() {
        return None;
    }
    Some((head, key))
}

/// The pod fields the downward API may reference (upstream's `ConvertDownwardAPIFieldLabel`).
fn check_field_label(api_version: &str, path: &str) -> Result<(), FieldPathError> {
    if !api_version.is_empty() && api_version != "v1" {
        return Err(FieldPathError::Version(api_version.to_string()));
    }
    let supported = [
        "metadata.annotations",
        "metadata.labels",
        "metadata.name",
        "metadata.namespace",
        "metadata.uid",
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.serviceAccountName",
        "spec.schedulerName",
        "status.phase",
        "status.hostIP",
        "status.hostIPs",
        "status.podIP",
        "status.podIPs",
    ];
    if supported.contains(&path) {
        return Ok(());
    }
    if let Some((head, _)) = split_subscript(path) {
        if head == "metadata.annotations" || head == "metadata.labels" {
            return Ok(());
        }
    }
    Err(FieldPathError::Label(path.to_string()))
}

/// Validates a label/annotation key as upstream's `IsQualifiedName` (lower-cased first).
fn qualified_name_errors(key: &str) -> Vec<String> {
    const NAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    let mut errs = Vec::new();
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".to_string());
    }
    let alnum = |c: char| c.is_ascii_alphanumeric();
    if !name.is_empty()
        && (!name.chars().all(|c| alnum(c) || c == '-' || c == '_' || c == '.')
            || !name.starts_with(alnum)
            || !name.ends_with(alnum))
    {
        errs.push(NAME_MSG.to_string());
    }
    if let Some(p) = prefix {
        let ok = !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|l| {
                !l.is_empty()
                    && l.len() <= 63
                    && l.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && l.starts_with(|c: char| c.is_ascii_alphanumeric())
                    && l.ends_with(|c: char| c.is_ascii_alphanumeric())
            });
        if !ok {
            errs.push("prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".to_string());
        }
    }
    errs
}

/// Go's `%q` of a string (`strconv.Quote`).
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if c.is_ascii() && (c < ' ' || c == '\u{7f}') => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if !c.is_ascii() && (c.is_control() || c.is_whitespace()) => {
                let v = c as u32;
                if v < 0x10000 {
                    out.push_str(&format!("\\u{v:04x}"));
                } else {
                    out.push_str(&format!("\\U{v:08x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `key="value"` lines in key order, as upstream's `FormatMap`.
pub fn format_map(m: &BTreeMap<String, String>) -> String {
    m.iter().map(|(k, v)| format!("{k}={}", go_quote(v))).collect::<Vec<_>>().join("\n")
}

/// The value of a pod field (`fieldRef`), for env (which may use runtime fields) and volumes.
pub fn pod_field(pod: &Pod, sel: &ObjectFieldSelector, rt: RuntimeFields<'_>) -> Result<String, FieldPathError> {
    let path = sel.field_path.as_str();
    check_field_label(sel.api_version.as_deref().unwrap_or("v1"), path)?;
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let pod_ips: Vec<String> = if rt.pod_ips.is_empty() {
        let mut v: Vec<String> =
            status.and_then(|s| s.pod_ips.as_ref()).into_iter().flatten().map(|p| p.ip.clone()).collect();
        if v.is_empty() {
            v.extend(status.and_then(|s| s.pod_ip.clone()));
        }
        v
    } else {
        rt.pod_ips.to_vec()
    };
    let host_ips: Vec<String> = if rt.host_ips.is_empty() {
        let mut v: Vec<String> =
            status.and_then(|s| s.host_ips.as_ref()).into_iter().flatten().map(|p| p.ip.clone()).collect();
        if v.is_empty() {
            v.extend(status.and_then(|s| s.host_ip.clone()));
        }
        v
    } else {
        rt.host_ips.to_vec()
    };
    match path {
        "spec.nodeName" => return Ok(spec.and_then(|s| s.node_name.clone()).unwrap_or_default()),
        "spec.serviceAccountName" => return Ok(spec.and_then(|s| s.service_account_name.clone()).unwrap_or_default()),
        "status.hostIP" => return Ok(host_ips.first().cloned().unwrap_or_default()),
        "status.hostIPs" => return Ok(host_ips.join(",")),
        "status.podIP" => return Ok(pod_ips.first().cloned().unwrap_or_default()),
        "status.podIPs" => return Ok(pod_ips.join(",")),
        _ => {}
    }
    metadata_field(pod, path)
}

/// Upstream's `ExtractFieldPathAsString` over the pod's metadata (what downwardAPI volumes
/// may reference).
pub fn metadata_field(pod: &Pod, path: &str) -> Result<String, FieldPathError> {
    let md = &pod.metadata;
    if let Some((head, key)) = split_subscript(path) {
        let map = match head {
            "metadata.annotations" => &md.annotations,
            "metadata.labels" => &md.labels,
            _ => return Err(FieldPathError::NoSubscript(path.to_string())),
        };
        let errs = qualified_name_errors(&key.to_lowercase());
        if !errs.is_empty() {
            return Err(FieldPathError::Subscript { path: path.to_string(), reason: errs.join(";") });
        }
        return Ok(map.as_ref().and_then(|m| m.get(key)).cloned().unwrap_or_default());
    }
    match path {
        "metadata.annotations" => Ok(format_map(&md.annotations.clone().unwrap_or_default())),
        "metadata.labels" => Ok(format_map(&md.labels.clone().unwrap_or_default())),
        "metadata.name" => Ok(md.name.clone().unwrap_or_default()),
        "metadata.namespace" => Ok(md.namespace.clone().unwrap_or_default()),
        "metadata.uid" => Ok(md.uid.clone().unwrap_or_default()),
        _ => Err(FieldPathError::Unsupported(path.to_string())),
    }
}

fn parse(resource: &str, value: &str) -> Result<Quantity, FieldPathError> {
    Quantity::parse(value)
        .map_err(|_| FieldPathError::Quantity { resource: resource.to_string(), value: value.to_string() })
}

/// `ceil(a / b)` for non-negative `a` and positive `b`; a zero divisor counts as one.
fn ceil_div(a: i128, b: i128) -> i128 {
    let b = if b <= 0 { 1 } else { b };
    if a <= 0 {
        return a / b;
    }
    (a + b - 1) / b
}

/// Upstream's `Value()` (whole units, rounded up) and `MilliValue()`.
fn units(q: &Quantity) -> i128 {
    ceil_div(q.nanos(), 1_000_000_000)
}

fn millis(q: &Quantity) -> i128 {
    ceil_div(q.nanos(), 1_000_000)
}

/// The value of `limits.cpu`, `requests.memory`… for `container`, as upstream's
/// `ExtractContainerResourceValue` after `MergeContainerResourceLimits`: a limit the container
/// does not set (or sets to zero) is the pod-level limit, else the node's allocatable.
pub fn container_resource(
    sel: &ResourceFieldSelector,
    pod: &Pod,
    container: &Container,
    node_allocatable: &HashMap<String, String>,
) -> Result<String, FieldPathError> {
    let divisor = match sel.divisor.as_ref().map(|d| parse("divisor", &d.0)).transpose()? {
        Some(d) if !d.is_zero() => d,
        _ => Quantity::from_units(1),
    };
    let (kind, name) = sel.resource.split_once('.').ok_or_else(|| FieldPathError::Resource(sel.resource.clone()))?;
    let resources = container.resources.as_ref();
    let value = match kind {
        "limits" => {
            let own = resources.and_then(|r| r.limits.as_ref()).and_then(|l| l.get(name));
            let own = own.map(|q| parse(name, &q.0)).transpose()?.filter(|q| !q.is_zero());
            match own {
                Some(q) => Some(q),
                None if is_defaulted_limit(name) => {
                    let pod_level = pod
                        .spec
                        .as_ref()
                        .and_then(|s| s.resources.as_ref())
                        .and_then(|r| r.limits.as_ref())
                        .and_then(|l| l.get(name))
                        .map(|q| parse(name, &q.0))
                        .transpose()?
                        .filter(|q| !q.is_zero());
                    match pod_level {
                        Some(q) => Some(q),
                        None => node_allocatable.get(name).map(|v| parse(name, v)).transpose()?,
                    }
                }
                None => None,
            }
        }
        "requests" => resources
            .and_then(|r| r.requests.as_ref())
            .and_then(|l| l.get(name))
            .map(|q| parse(name, &q.0))
            .transpose()?,
        _ => return Err(FieldPathError::Resource(sel.resource.clone())),
    };
    let value = value.unwrap_or_else(|| Quantity::from_units(0));
    let out = match name {
        "cpu" => ceil_div(millis(&value), millis(&divisor)),
        "memory" | "ephemeral-storage" => ceil_div(units(&value), units(&divisor)),
        n if n.starts_with("hugepages-") => ceil_div(units(&value), units(&divisor)),
        _ => return Err(FieldPathError::Resource(sel.resource.clone())),
    };
    Ok(out.to_string())
}

fn is_defaulted_limit(name: &str) -> bool {
    matches!(name, "cpu" | "memory" | "ephemeral-storage")
}

/// Finds `name` among the pod's containers, then its init containers.
pub fn find_container<'a>(pod: &'a Pod, name: &str) -> Result<&'a Container, FieldPathError> {
    let spec = pod.spec.as_ref();
    spec.map(|s| s.containers.iter())
        .into_iter()
        .flatten()
        .chain(spec.and_then(|s| s.init_containers.as_ref()).into_iter().flatten())
        .find(|c| c.name == name)
        .ok_or_else(|| FieldPathError::Container(name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodIP, PodSpec, PodStatus, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity as Q;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod() -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("default".into()),
                uid: Some("u-1".into()),
                labels: Some(BTreeMap::from([("app".into(), "web".into()), ("tier".into(), "a\"b\nc".into())])),
                annotations: Some(BTreeMap::from([("example.com/note".into(), "hi".into())])),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some("node-1".into()),
                service_account_name: Some("default".into()),
                containers: vec![Container {
                    name: "app".into(),
                    resources: Some(ResourceRequirements {
                        limits: Some(BTreeMap::from([("memory".into(), Q("64Mi".into()))])),
                        requests: Some(BTreeMap::from([("cpu".into(), Q("250m".into()))])),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(PodStatus {
                pod_ip: Some("10.42.0.9".into()),
                pod_ips: Some(vec![PodIP { ip: "10.42.0.9".into() }]),
                host_ip: Some("192.168.1.5".into()),
                ..Default::default()
            }),
        }
    }

    fn field(path: &str) -> ObjectFieldSelector {
        ObjectFieldSelector { api_version: Some("v1".into()), field_path: path.into() }
    }

    #[test]
    fn metadata_fields_and_subscripts_resolve() {
        let p = pod();
        let rt = RuntimeFields::default();
        assert_eq!(pod_field(&p, &field("metadata.name"), rt).as_deref(), Ok("web"));
        assert_eq!(pod_field(&p, &field("metadata.namespace"), rt).as_deref(), Ok("default"));
        assert_eq!(pod_field(&p, &field("metadata.uid"), rt).as_deref(), Ok("u-1"));
        assert_eq!(pod_field(&p, &field("metadata.labels['app']"), rt).as_deref(), Ok("web"));
        assert_eq!(pod_field(&p, &field("metadata.labels['missing']"), rt).as_deref(), Ok(""));
        assert_eq!(pod_field(&p, &field("metadata.annotations['example.com/note']"), rt).as_deref(), Ok("hi"));
        assert_eq!(pod_field(&p, &field("metadata.labels"), rt).as_deref(), Ok("app=\"web\"\ntier=\"a\\\"b\\nc\""));
    }

    #[test]
    fn runtime_fields_prefer_the_sandbox_over_the_pod_status() {
        let p = pod();
        let rt = RuntimeFields::default();
        assert_eq!(pod_field(&p, &field("status.podIP"), rt).as_deref(), Ok("10.42.0.9"));
        assert_eq!(pod_field(&p, &field("status.hostIPs"), rt).as_deref(), Ok("192.168.1.5"));
        assert_eq!(pod_field(&p, &field("spec.nodeName"), rt).as_deref(), Ok("node-1"));
        assert_eq!(pod_field(&p, &field("spec.serviceAccountName"), rt).as_deref(), Ok("default"));
        let ips = vec!["10.42.0.7".to_string(), "fd00::7".to_string()];
        let rt = RuntimeFields { pod_ips: &ips, host_ips: &[] };
        assert_eq!(pod_field(&p, &field("status.podIP"), rt).as_deref(), Ok("10.42.0.7"));
        assert_eq!(pod_field(&p, &field("status.podIPs"), rt).as_deref(), Ok("10.42.0.7,fd00::7"));
    }

    #[test]
    fn unsupported_paths_and_bad_subscripts_are_rejected_with_upstream_messages() {
        let p = pod();
        let rt = RuntimeFields::default();
        assert_eq!(
            pod_field(&p, &field("spec.containers"), rt).map_err(|e| e.to_string()),
            Err("field label not supported: spec.containers".to_string())
        );
        assert_eq!(
            pod_field(
                &p,
                &ObjectFieldSelector { api_version: Some("v2".into()), field_path: "metadata.name".into() },
                rt
            )
            .map_err(|e| e.to_string()),
            Err("unsupported pod version: v2".to_string())
        );
        assert!(pod_field(&p, &field("metadata.labels['-bad-']"), rt)
            .is_err_and(|e| e.to_string().starts_with("invalid key subscript in metadata.labels['-bad-']: ")));
        assert_eq!(
            pod_field(&p, &field("status.phase"), rt).map_err(|e| e.to_string()),
            Err("unsupported fieldPath: status.phase".to_string())
        );
    }

    fn res(resource: &str, divisor: Option<&str>) -> ResourceFieldSelector {
        ResourceFieldSelector { container_name: None, divisor: divisor.map(|d| Q(d.into())), resource: resource.into() }
    }

    #[test]
    fn resources_round_up_by_divisor_and_default_limits_to_allocatable() {
        let p = pod();
        let c = &p.spec.as_ref().expect("spec").containers[0];
        let alloc = HashMap::from([("cpu".to_string(), "2".to_string()), ("memory".to_string(), "8Gi".to_string())]);
        let v = |r: &str, d: Option<&str>| container_resource(&res(r, d), &p, c, &alloc).expect("value");
        assert_eq!(v("limits.memory", None), "67108864");
        assert_eq!(v("limits.memory", Some("1Mi")), "64");
        assert_eq!(v("limits.memory", Some("1G")), "1");
        assert_eq!(v("requests.cpu", None), "1");
        assert_eq!(v("requests.cpu", Some("1m")), "250");
        // No cpu limit: the node's allocatable.
        assert_eq!(v("limits.cpu", None), "2");
        assert_eq!(v("limits.cpu", Some("1m")), "2000");
        assert_eq!(v("requests.memory", None), "0");
        assert_eq!(
            container_resource(&res("limits.gpu", None), &p, c, &alloc).map_err(|e| e.to_string()),
            Err("unsupported container resource : limits.gpu".to_string())
        );
    }

    #[test]
    fn pod_level_limits_come_before_allocatable() {
        let mut p = pod();
        p.spec.as_mut().expect("spec").resources = Some(ResourceRequirements {
            limits: Some(BTreeMap::from([("cpu".into(), Q("1500m".into()))])),
            ..Default::default()
        });
        let c = p.spec.as_ref().expect("spec").containers[0].clone();
        let alloc = HashMap::from([("cpu".to_string(), "4".to_string())]);
        assert_eq!(container_resource(&res("limits.cpu", None), &p, &c, &alloc).as_deref(), Ok("2"));
    }

    #[test]
    fn go_quote_escapes_like_strconv_quote() {
        assert_eq!(go_quote("plain"), "\"plain\"");
        assert_eq!(go_quote("tab\there"), "\"tab\\there\"");
        assert_eq!(go_quote("\u{1}"), "\"\\x01\"");
        assert_eq!(go_quote("é\u{a0}"), "\"é\\u00a0\"");
    }
}
