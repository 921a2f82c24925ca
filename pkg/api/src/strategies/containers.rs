//! Containers of a pod spec: defaulting (`SetDefaults_Container` and the generated defaults of
//! its ports, env and resources) and validation (`validateContainerCommon`, `validateContainers`,
//! `validateInitContainers`): names, images, ports, env, volume mounts, resources, probes.

use super::formats;
use super::ports;
use super::probes;
use super::quantity::{self, Quantity};
use crate::field::{FieldError, Path};
use k8s_openapi::api::core::v1::{Container, EnvVar, EphemeralContainer, ObjectFieldSelector, ResourceRequirements};
use std::collections::{BTreeMap, BTreeSet};

/// What container validation needs to know about the pod around it.
pub struct PodContext<'a> {
    /// Names of the pod's valid volumes.
    pub volumes: &'a BTreeSet<String>,
    pub grace_period: Option<i64>,
    pub host_network: bool,
}

/// The tag of an image reference as upstream's `ParseImageName` sees it: `latest` when neither
/// tag nor digest is given, `None` when the reference does not parse.
pub fn image_tag(image: &str) -> Option<String> {
    if image.is_empty() || image.trim() != image {
        return None;
    }
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    let (repo_last, tag) = match last.split_once(':') {
        Some((r, t)) => (r, Some(t)),
        None => (last, None),
    };
    let repo_path = &name[..name.len() - last.len()];
    let repo_ok = |s: &str| s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-/:".contains(c));
    let first = repo_path.split('/').next().unwrap_or_default();
    let looks_like_host = first.contains('.') || first.contains(':') || first == "localhost";
    let rest = if looks_like_host { &repo_path[first.len()..] } else { repo_path };
    if repo_last.is_empty() || !repo_ok(repo_last) || !repo_ok(rest) {
        return None;
    }
    match (tag, digest) {
        (Some(t), _) => Some(t.to_string()),
        (None, Some(_)) => Some(String::new()),
        (None, None) => Some("latest".into()),
    }
}

/// `SetDefaults_Container` and the generated defaults under it.
pub fn set_container_defaults(c: &mut Container) {
    if c.image_pull_policy.as_deref().unwrap_or_default().is_empty() {
        let tag = image_tag(c.image.as_deref().unwrap_or_default());
        let policy = if tag.as_deref() == Some("latest") { "Always" } else { "IfNotPresent" };
        c.image_pull_policy = Some(policy.into());
    }
    if c.termination_message_path.as_deref().unwrap_or_default().is_empty() {
        c.termination_message_path = Some("/dev/termination-log".into());
    }
    if c.termination_message_policy.as_deref().unwrap_or_default().is_empty() {
        c.termination_message_policy = Some("File".into());
    }
    for p in c.ports.iter_mut().flatten() {
        if p.protocol.as_deref().unwrap_or_default().is_empty() {
            p.protocol = Some("TCP".into());
        }
    }
    for e in c.env.iter_mut().flatten() {
        if let Some(f) = e.value_from.as_mut().and_then(|v| v.field_ref.as_mut()) {
            set_field_selector_defaults(f);
        }
        if let Some(r) = e.value_from.as_mut().and_then(|v| v.resource_field_ref.as_mut()) {
            if let Some(d) = r.divisor.as_mut() {
                quantity::canonicalize(d);
            }
        }
    }
    if let Some(r) = c.resources.as_mut() {
        set_resource_defaults(r);
    }
    for p in [c.liveness_probe.as_mut(), c.readiness_probe.as_mut(), c.startup_probe.as_mut()].into_iter().flatten() {
        probes::set_probe_defaults(p);
    }
    if let Some(l) = c.lifecycle.as_mut() {
        probes::set_lifecycle_defaults(l);
    }
}

/// `SetDefaults_ObjectFieldSelector`: `apiVersion: v1`.
pub fn set_field_selector_defaults(f: &mut ObjectFieldSelector) {
    if f.api_version.as_deref().unwrap_or_default().is_empty() {
        f.api_version = Some("v1".into());
    }
}

/// Canonical quantities in requests and limits.
pub fn set_resource_defaults(r: &mut ResourceRequirements) {
    for list in [r.limits.as_mut(), r.requests.as_mut()].into_iter().flatten() {
        quantity::canonicalize_resource_list(list);
    }
}

/// `SetDefaults_Pod`'s part for containers: requests default to limits.
pub fn default_requests_to_limits(c: &mut Container) {
    let Some(r) = c.resources.as_mut() else { return };
    let Some(limits) = r.limits.as_ref() else { return };
    let requests = r.requests.get_or_insert_with(BTreeMap::new);
    for (k, v) in limits {
        requests.entry(k.clone()).or_insert_with(|| v.clone());
    }
}

const ENV_FIELD_PATHS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

/// Field paths a downward API volume file may use.
pub const VOLUME_FIELD_PATHS: &[&str] =
    &["metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace", "metadata.uid"];

/// `validateObjectFieldSelector`.
pub fn validate_field_selector(f: &ObjectFieldSelector, allowed: &[&str], path: &Path) -> Vec<FieldError> {
    let version = f.api_version.as_deref().unwrap_or_default();
    if version.is_empty() {
        return vec![FieldError::required(path.child("apiVersion"), "")];
    }
    if f.field_path.is_empty() {
        return vec![FieldError::required(path.child("fieldPath"), "")];
    }
    if version != "v1" {
        return vec![FieldError::invalid(
            path.child("fieldPath"),
            f.field_path.as_str(),
            format!("error converting fieldPath: unsupported pod version: {version}"),
        )];
    }
    if let Some((base, rest)) = f.field_path.split_once('[') {
        let subscript = rest.strip_suffix(']').unwrap_or(rest).trim_matches(|c| c == '\'' || c == '"');
        return match base {
            "metadata.annotations" => formats::validate_qualified_name(&subscript.to_lowercase(), path),
            "metadata.labels" => formats::validate_qualified_name(subscript, path),
            _ => vec![FieldError::invalid(path, base, "does not support subscript")],
        };
    }
    if !allowed.contains(&f.field_path.as_str()) {
        return vec![FieldError::not_supported(path.child("fieldPath"), f.field_path.as_str(), allowed)];
    }
    Vec::new()
}

fn validate_key_ref(name: &str, key: &str, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if name.is_empty() {
        errs.push(FieldError::required(path.child("name"), ""));
    } else {
        errs.extend(formats::validate_dns_subdomain(name, &path.child("name")));
    }
    if key.is_empty() {
        errs.push(FieldError::required(path.child("key"), ""));
    } else {
        errs.extend(formats::each_invalid(&path.child("key"), key, formats::config_map_key(key)));
    }
    errs
}

fn validate_env_var(ev: &EnvVar, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if ev.name.is_empty() {
        errs.push(FieldError::required(path.child("name"), ""));
    } else {
        errs.extend(formats::each_invalid(&path.child("name"), &ev.name, formats::env_var_name(&ev.name)));
    }
    let Some(from) = &ev.value_from else { return errs };
    let vp = path.child("valueFrom");
    let mut sources = 0;
    if let Some(f) = &from.field_ref {
        sources += 1;
        errs.extend(validate_field_selector(f, ENV_FIELD_PATHS, &vp.child("fieldRef")));
    }
    if let Some(r) = &from.resource_field_ref {
        sources += 1;
        if r.resource.is_empty() {
            errs.push(FieldError::required(vp.child("resourceFieldRef").child("resource"), ""));
        }
    }
    if let Some(c) = &from.config_map_key_ref {
        sources += 1;
        errs.extend(validate_key_ref(&c.name, &c.key, &vp.child("configMapKeyRef")));
    }
    if let Some(s) = &from.secret_key_ref {
        sources += 1;
        errs.extend(validate_key_ref(&s.name, &s.key, &vp.child("secretKeyRef")));
    }
    if let Some(f) = &from.file_key_ref {
        sources += 1;
        let fp = vp.child("fileKeyRef");
        for (name, v) in [("volumeName", &f.volume_name), ("path", &f.path), ("key", &f.key)] {
            if v.is_empty() {
                errs.push(FieldError::required(fp.child(name), ""));
            }
        }
    }
    if sources == 0 {
        errs.push(FieldError::invalid(
            &vp,
            "",
            "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
        ));
    } else if !ev.value.as_deref().unwrap_or_default().is_empty() {
        errs.push(FieldError::invalid(&vp, "", "may not be specified when `value` is not empty"));
    } else if sources > 1 {
        errs.push(FieldError::invalid(&vp, "", "may not have more than one field specified at a time"));
    }
    errs
}

fn validate_env_from(c: &Container, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, ef) in c.env_from.iter().flatten().enumerate() {
        let p = path.index(i);
        if let Some(prefix) = ef.prefix.as_deref().filter(|s| !s.is_empty()) {
            errs.extend(formats::each_invalid(&p.child("prefix"), prefix, formats::env_var_name(prefix)));
        }
        let mut sources = 0;
        for (name, r) in [
            ("configMapRef", ef.config_map_ref.as_ref().map(|r| r.name.as_str())),
            ("secretRef", ef.secret_ref.as_ref().map(|r| r.name.as_str())),
        ] {
            let Some(n) = r else { continue };
            sources += 1;
            if n.is_empty() {
                errs.push(FieldError::required(p.child(name).child("name"), ""));
            } else {
                errs.extend(formats::validate_dns_subdomain(n, &p.child(name).child("name")));
            }
        }
        if sources == 0 {
            errs.push(FieldError::invalid(path, "", "must specify one of: `configMapRef` or `secretRef`"));
        } else if sources > 1 {
            errs.push(FieldError::invalid(path, "", "may not have more than one field specified at a time"));
        }
    }
    errs
}

fn validate_container_ports(c: &Container, host_network: bool, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut names = BTreeSet::new();
    for (i, port) in c.ports.iter().flatten().enumerate() {
        let p = path.index(i);
        if let Some(name) = port.name.as_deref().filter(|n| !n.is_empty()) {
            let msgs = ports::port_name(name);
            if !msgs.is_empty() {
                errs.extend(formats::each_invalid(&p.child("name"), name, msgs));
            } else if !names.insert(name) {
                errs.push(FieldError::duplicate(p.child("name"), name));
            }
        }
        if port.container_port == 0 {
            errs.push(FieldError::required(p.child("containerPort"), ""));
        } else {
            errs.extend(ports::validate_port_num(port.container_port, &p.child("containerPort")));
        }
        let host_port = port.host_port.unwrap_or_default();
        if host_port != 0 {
            errs.extend(ports::validate_port_num(host_port, &p.child("hostPort")));
        }
        errs.extend(ports::validate_protocol(port.protocol.as_deref(), &p.child("protocol")));
        if host_network && host_port != 0 && host_port != port.container_port {
            errs.push(FieldError::invalid(
                p.child("containerPort"),
                port.container_port,
                "must match `hostPort` when `hostNetwork` is true",
            ));
        }
    }
    errs
}

fn validate_relative_path(target: &str, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if target.starts_with('/') {
        errs.push(FieldError::invalid(path, target, "must be a relative path"));
    }
    if target.split('/').any(|s| s == "..") {
        errs.push(FieldError::invalid(path, target, "must not contain '..'"));
    }
    errs
}

/// `ValidateLocalNonReservedPath` (volume item paths).
pub fn validate_local_non_reserved_path(target: &str, path: &Path) -> Vec<FieldError> {
    let mut errs = validate_relative_path(target, path);
    if target.starts_with("..") && !target.starts_with("../") {
        errs.push(FieldError::invalid(path, target, "must not start with '..'"));
    }
    errs
}

fn validate_volume_mounts(c: &Container, volumes: &BTreeSet<String>, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut mount_points = BTreeSet::new();
    for (i, m) in c.volume_mounts.iter().flatten().enumerate() {
        let p = path.index(i);
        if m.name.is_empty() {
            errs.push(FieldError::required(p.child("name"), ""));
        }
        if !volumes.contains(&m.name) {
            errs.push(FieldError::not_found(p.child("name"), m.name.as_str()));
        }
        if m.mount_path.is_empty() {
            errs.push(FieldError::required(p.child("mountPath"), ""));
        }
        if !mount_points.insert(m.mount_path.as_str()) {
            errs.push(FieldError::invalid(p.child("mountPath"), m.mount_path.as_str(), "must be unique"));
        }
        if let Some(sub) = m.sub_path.as_deref().filter(|s| !s.is_empty()) {
            errs.extend(validate_relative_path(sub, &path.child("subPath")));
        }
        if let Some(mp) = m.mount_propagation.as_deref() {
            const MODES: &[&str] = &["Bidirectional", "HostToContainer", "None"];
            if !MODES.contains(&mp) {
                errs.push(FieldError::not_supported(p.child("mountPropagation"), mp, MODES));
            }
        }
    }
    errs
}

fn is_standard_container_resource(name: &str) -> bool {
    matches!(name, "cpu" | "memory" | "ephemeral-storage") || name.starts_with("hugepages-")
}

fn is_native_resource(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

fn validate_resource_name(name: &str, path: &Path) -> Vec<FieldError> {
    let errs = formats::validate_qualified_name(name, path);
    if !errs.is_empty() {
        return errs;
    }
    if !name.contains('/') {
        if !is_standard_container_resource(name) {
            return vec![FieldError::invalid(path, name, "must be a standard resource for containers")];
        }
    } else if !is_native_resource(name) && name.starts_with("requests.") {
        return vec![FieldError::invalid(path, name, "doesn't follow extended resource name standard")];
    }
    Vec::new()
}

fn parse_quantity(q: &str, path: &Path, errs: &mut Vec<FieldError>) -> Option<Quantity> {
    match Quantity::parse(q) {
        Ok(v) => Some(v),
        Err(e) => {
            errs.push(FieldError::invalid(path, q, e.to_string()));
            None
        }
    }
}

fn validate_quantity_value(name: &str, q: &Quantity, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if q.is_negative() {
        errs.push(FieldError::invalid(path, q.canonical(), formats::IS_NEGATIVE_ERROR));
    }
    if !is_native_resource(name) && !q.is_integer() {
        errs.push(FieldError::invalid(path, q.canonical(), "must be an integer"));
    }
    errs
}

fn overcommit_allowed(name: &str) -> bool {
    is_native_resource(name) && !name.starts_with("hugepages-")
}

/// `ValidateContainerResourceRequirements`: names, quantities, requests ≤ limits.
pub fn validate_resources(r: &ResourceRequirements, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let lim_path = path.child("limits");
    let req_path = path.child("requests");
    let mut limits = BTreeMap::new();
    for (name, q) in r.limits.iter().flatten() {
        let p = lim_path.key(name);
        errs.extend(validate_resource_name(name, &p));
        if let Some(v) = parse_quantity(&q.0, &p, &mut errs) {
            errs.extend(validate_quantity_value(name, &v, &p));
            limits.insert(name.as_str(), v);
        }
    }
    for (name, q) in r.requests.iter().flatten() {
        let p = req_path.key(name);
        errs.extend(validate_resource_name(name, &p));
        let Some(v) = parse_quantity(&q.0, &p, &mut errs) else { continue };
        errs.extend(validate_quantity_value(name, &v, &p));
        match limits.get(name.as_str()) {
            Some(limit) if v != *limit && !overcommit_allowed(name) => errs.push(FieldError::invalid(
                &req_path,
                v.canonical(),
                format!("must be equal to {name} limit of {limit}"),
            )),
            Some(limit) if v > *limit => errs.push(FieldError::invalid(
                &req_path,
                v.canonical(),
                format!("must be less than or equal to {name} limit of {limit}"),
            )),
            Some(_) => {}
            None if !overcommit_allowed(name) => {
                errs.push(FieldError::required(&lim_path, "Limit must be set for non overcommitable resources"))
            }
            None => {}
        }
    }
    errs
}

/// `validateContainerCommon`: what every kind of container must satisfy.
fn validate_common(c: &Container, ctx: &PodContext<'_>, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if c.name.is_empty() {
        errs.push(FieldError::required(path.child("name"), ""));
    } else {
        errs.extend(formats::validate_dns_label(&c.name, &path.child("name")));
    }
    let image = c.image.as_deref().unwrap_or_default();
    if image.is_empty() {
        errs.push(FieldError::required(path.child("image"), ""));
    } else if image.trim() != image {
        errs.push(FieldError::invalid(path.child("image"), image, "must not have leading or trailing whitespace"));
    }
    match c.termination_message_policy.as_deref().unwrap_or_default() {
        "File" | "FallbackToLogsOnError" => {}
        "" => errs.push(FieldError::required(path.child("terminationMessagePolicy"), "")),
        other => errs.push(FieldError::not_supported(
            path.child("terminationMessagePolicy"),
            other,
            &["File", "FallbackToLogsOnError"],
        )),
    }
    errs.extend(validate_container_ports(c, ctx.host_network, &path.child("ports")));
    for (i, ev) in c.env.iter().flatten().enumerate() {
        errs.extend(validate_env_var(ev, &path.child("env").index(i)));
    }
    errs.extend(validate_env_from(c, &path.child("envFrom")));
    errs.extend(validate_volume_mounts(c, ctx.volumes, &path.child("volumeMounts")));
    errs.extend(formats::validate_enum(
        c.image_pull_policy.as_deref(),
        &["Always", "IfNotPresent", "Never"],
        &path.child("imagePullPolicy"),
    ));
    if let Some(r) = &c.resources {
        errs.extend(validate_resources(r, &path.child("resources")));
    }
    errs
}

fn validate_probes_and_hooks(c: &Container, ctx: &PodContext<'_>, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(l) = &c.lifecycle {
        errs.extend(probes::validate_lifecycle(l, ctx.grace_period, &path.child("lifecycle")));
    }
    if let Some(p) = &c.liveness_probe {
        errs.extend(probes::validate_liveness_or_startup(p, &path.child("livenessProbe")));
    }
    if let Some(p) = &c.readiness_probe {
        errs.extend(probes::validate_readiness(p, &path.child("readinessProbe")));
    }
    if let Some(p) = &c.startup_probe {
        errs.extend(probes::validate_liveness_or_startup(p, &path.child("startupProbe")));
    }
    errs
}

fn host_port_conflicts(containers: &[Container], path: &Path) -> Vec<FieldError> {
    let mut seen = BTreeSet::new();
    let mut errs = Vec::new();
    for (ci, c) in containers.iter().enumerate() {
        for (pi, p) in c.ports.iter().flatten().enumerate() {
            let hp = p.host_port.unwrap_or_default();
            if hp == 0 {
                continue;
            }
            let key = format!(
                "{}/{}/{}",
                p.protocol.as_deref().unwrap_or_default(),
                p.host_ip.as_deref().unwrap_or_default(),
                hp
            );
            if !seen.insert(key.clone()) {
                errs.push(FieldError::duplicate(path.index(ci).child("ports").index(pi).child("hostPort"), key));
            }
        }
    }
    errs
}

/// `validateContainers`: at least one, unique names, probes and hooks.
pub fn validate_containers(containers: &[Container], ctx: &PodContext<'_>, path: &Path) -> Vec<FieldError> {
    if containers.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let mut errs = Vec::new();
    let mut names = BTreeSet::new();
    for (i, c) in containers.iter().enumerate() {
        let p = path.index(i);
        errs.extend(validate_common(c, ctx, &p));
        if !names.insert(c.name.as_str()) {
            errs.push(FieldError::duplicate(p.child("name"), c.name.as_str()));
        }
        errs.extend(validate_probes_and_hooks(c, ctx, &p));
        if c.restart_policy.is_some() {
            errs.push(FieldError::forbidden(p.child("restartPolicy"), "may not be set for non-init containers"));
        }
    }
    errs.extend(host_port_conflicts(containers, path));
    errs
}

/// `validateInitContainers`: names unique across init and regular containers; probes and hooks
/// only for restartable (sidecar) init containers.
pub fn validate_init_containers(
    inits: &[Container],
    regular: &[Container],
    ctx: &PodContext<'_>,
    path: &Path,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut names: BTreeSet<&str> = regular.iter().map(|c| c.name.as_str()).collect();
    for (i, c) in inits.iter().enumerate() {
        let p = path.index(i);
        errs.extend(validate_common(c, ctx, &p));
        let mut sidecar = false;
        if let Some(rp) = c.restart_policy.as_deref() {
            if rp == "Always" {
                sidecar = true;
            } else {
                errs.push(FieldError::not_supported(p.child("restartPolicy"), rp, &["Always"]));
            }
        }
        if names.contains(c.name.as_str()) {
            errs.push(FieldError::duplicate(p.child("name"), c.name.as_str()));
        } else if !c.name.is_empty() {
            names.insert(c.name.as_str());
        }
        if sidecar {
            errs.extend(validate_probes_and_hooks(c, ctx, &p));
        } else {
            for (name, set) in [
                ("lifecycle", c.lifecycle.is_some()),
                ("livenessProbe", c.liveness_probe.is_some()),
                ("readinessProbe", c.readiness_probe.is_some()),
                ("startupProbe", c.startup_probe.is_some()),
            ] {
                if set {
                    errs.push(FieldError::forbidden(
                        p.child(name),
                        "may not be set for init containers without restartPolicy=Always",
                    ));
                }
            }
        }
    }
    errs.extend(host_port_conflicts(inits, path));
    errs
}

/// The container an ephemeral container runs as: every field the two share
/// (`EphemeralContainerCommon` is `Container` upstream).
pub fn ephemeral_as_container(e: &EphemeralContainer) -> Container {
    Container {
        name: e.name.clone(),
        image: e.image.clone(),
        command: e.command.clone(),
        args: e.args.clone(),
        working_dir: e.working_dir.clone(),
        ports: e.ports.clone(),
        env_from: e.env_from.clone(),
        env: e.env.clone(),
        resources: e.resources.clone(),
        resize_policy: e.resize_policy.clone(),
        restart_policy: e.restart_policy.clone(),
        restart_policy_rules: e.restart_policy_rules.clone(),
        volume_mounts: e.volume_mounts.clone(),
        volume_devices: e.volume_devices.clone(),
        liveness_probe: e.liveness_probe.clone(),
        readiness_probe: e.readiness_probe.clone(),
        startup_probe: e.startup_probe.clone(),
        lifecycle: e.lifecycle.clone(),
        termination_message_path: e.termination_message_path.clone(),
        termination_message_policy: e.termination_message_policy.clone(),
        image_pull_policy: e.image_pull_policy.clone(),
        security_context: e.security_context.clone(),
        stdin: e.stdin,
        stdin_once: e.stdin_once,
        tty: e.tty,
    }
}

/// `validateEphemeralContainers`: the common container rules, names unique across every kind of
/// container, a target that is a regular or init container, and none of the fields upstream
/// keeps off ephemeral containers (ports, resources, probes, lifecycle, restart policy, subpaths).
pub fn validate_ephemeral_containers(
    ephemeral: &[EphemeralContainer],
    regular: &[Container],
    inits: &[Container],
    ctx: &PodContext<'_>,
    path: &Path,
) -> Vec<FieldError> {
    const FORBIDDEN: &str = "cannot be set for an Ephemeral Container";
    let mut errs = Vec::new();
    let others: BTreeSet<&str> = regular.iter().chain(inits).map(|c| c.name.as_str()).collect();
    let mut names = others.clone();
    for (i, e) in ephemeral.iter().enumerate() {
        let p = path.index(i);
        let c = ephemeral_as_container(e);
        errs.extend(validate_common(&c, ctx, &p));
        if !names.insert(e.name.as_str()) {
            errs.push(FieldError::duplicate(p.child("name"), e.name.as_str()));
        }
        if let Some(t) = e.target_container_name.as_deref().filter(|t| !t.is_empty()) {
            if !others.contains(t) {
                errs.push(FieldError::not_found(p.child("targetContainerName"), t));
            }
        }
        // Upstream's allow-list, in the order of the struct's fields.
        for (field, set) in [
            ("ports", e.ports.as_ref().is_some_and(|v| !v.is_empty())),
            ("resources", e.resources.as_ref().is_some_and(|r| r != &ResourceRequirements::default())),
            ("resizePolicy", e.resize_policy.as_ref().is_some_and(|v| !v.is_empty())),
            ("restartPolicy", e.restart_policy.is_some()),
            ("restartPolicyRules", e.restart_policy_rules.as_ref().is_some_and(|v| !v.is_empty())),
            ("livenessProbe", e.liveness_probe.is_some()),
            ("readinessProbe", e.readiness_probe.is_some()),
            ("startupProbe", e.startup_probe.is_some()),
            ("lifecycle", e.lifecycle.is_some()),
        ] {
            if set {
                errs.push(FieldError::forbidden(p.child(field), FORBIDDEN));
            }
        }
        for (j, m) in e.volume_mounts.iter().flatten().enumerate() {
            let mp = p.child("volumeMounts").index(j);
            if m.sub_path.as_deref().is_some_and(|s| !s.is_empty()) {
                errs.push(FieldError::forbidden(mp.child("subPath"), FORBIDDEN));
            }
            if m.sub_path_expr.as_deref().is_some_and(|s| !s.is_empty()) {
                errs.push(FieldError::forbidden(mp.child("subPathExpr"), FORBIDDEN));
            }
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ContainerPort, EnvVarSource, SecretKeySelector, VolumeMount};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity as Q;

    fn ctr(name: &str, image: &str) -> Container {
        let mut c = Container { name: name.into(), image: Some(image.into()), ..Default::default() };
        set_container_defaults(&mut c);
        c
    }

    fn ctx(volumes: &BTreeSet<String>) -> PodContext<'_> {
        PodContext { volumes, grace_period: Some(30), host_network: false }
    }

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn pull_policy_follows_the_tag() {
        assert_eq!(ctr("a", "nginx").image_pull_policy.as_deref(), Some("Always"));
        assert_eq!(ctr("a", "nginx:latest").image_pull_policy.as_deref(), Some("Always"));
        assert_eq!(ctr("a", "nginx:1.25").image_pull_policy.as_deref(), Some("IfNotPresent"));
        assert_eq!(ctr("a", "localhost:5000/app").image_pull_policy.as_deref(), Some("Always"));
        assert_eq!(ctr("a", "127.0.0.1:5000/app:v1").image_pull_policy.as_deref(), Some("IfNotPresent"));
        assert_eq!(ctr("a", "app@sha256:abcd").image_pull_policy.as_deref(), Some("IfNotPresent"));
        let c = ctr("a", "nginx");
        assert_eq!(c.termination_message_path.as_deref(), Some("/dev/termination-log"));
        assert_eq!(c.termination_message_policy.as_deref(), Some("File"));
    }

    #[test]
    fn names_images_and_duplicates() {
        let vols = BTreeSet::new();
        let errs = validate_containers(
            &[ctr("web", ""), ctr("web", "x"), ctr("Bad_Name", "x")],
            &ctx(&vols),
            &Path::new("spec").child("containers"),
        );
        let m = messages(&errs);
        assert!(m.contains(&"spec.containers[0].image: Required value".to_string()));
        assert!(m.contains(&"spec.containers[1].name: Duplicate value: \"web\"".to_string()));
        assert!(m.iter().any(|s| s.starts_with("spec.containers[2].name: Invalid value: \"Bad_Name\"")));
        assert_eq!(
            messages(&validate_containers(&[], &ctx(&vols), &Path::new("spec").child("containers"))),
            ["spec.containers: Required value"]
        );
        let errs = validate_init_containers(
            &[ctr("web", "x")],
            &[ctr("web", "y")],
            &ctx(&vols),
            &Path::new("spec").child("initContainers"),
        );
        assert_eq!(messages(&errs), ["spec.initContainers[0].name: Duplicate value: \"web\""]);
    }

    #[test]
    fn ports_are_checked() {
        let mut c = ctr("web", "nginx");
        c.ports = Some(vec![
            ContainerPort {
                container_port: 0,
                name: Some("http".into()),
                protocol: Some("TCP".into()),
                ..Default::default()
            },
            ContainerPort {
                container_port: 70000,
                name: Some("http".into()),
                protocol: Some("ICMP".into()),
                ..Default::default()
            },
        ]);
        let vols = BTreeSet::new();
        let m = messages(&validate_containers(&[c], &ctx(&vols), &Path::new("spec").child("containers")));
        assert!(m.contains(&"spec.containers[0].ports[0].containerPort: Required value".to_string()));
        assert!(m.contains(&"spec.containers[0].ports[1].name: Duplicate value: \"http\"".to_string()));
        assert!(m.contains(
            &"spec.containers[0].ports[1].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive"
                .to_string()
        ));
        assert!(m.contains(&"spec.containers[0].ports[1].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\"".to_string()));
    }

    #[test]
    fn env_and_mounts_are_checked() {
        let mut c = ctr("web", "nginx");
        c.env = Some(vec![
            EnvVar { name: "A=B".into(), ..Default::default() },
            EnvVar {
                name: "S".into(),
                value: Some("x".into()),
                value_from: Some(EnvVarSource {
                    secret_key_ref: Some(SecretKeySelector { name: "s".into(), key: "k".into(), optional: None }),
                    ..Default::default()
                }),
            },
            EnvVar { name: "E".into(), value_from: Some(EnvVarSource::default()), ..Default::default() },
        ]);
        c.volume_mounts =
            Some(vec![VolumeMount { name: "data".into(), mount_path: "/d".into(), ..Default::default() }]);
        let vols = BTreeSet::new();
        let m = messages(&validate_containers(&[c], &ctx(&vols), &Path::new("spec").child("containers")));
        assert!(m.contains(&"spec.containers[0].env[0].name: Invalid value: \"A=B\": a valid environment variable name must consist only of printable ASCII characters other than '='".to_string()));
        assert!(m.contains(
            &"spec.containers[0].env[1].valueFrom: Invalid value: \"\": may not be specified when `value` is not empty"
                .to_string()
        ));
        assert!(m
            .iter()
            .any(|s| s.starts_with("spec.containers[0].env[2].valueFrom: Invalid value: \"\": must specify one of")));
        assert!(m.contains(&"spec.containers[0].volumeMounts[0].name: Not found: \"data\"".to_string()));
    }

    #[test]
    fn requests_may_not_exceed_limits() {
        let mut c = ctr("web", "nginx");
        c.resources = Some(ResourceRequirements {
            limits: Some(BTreeMap::from([("cpu".to_string(), Q("500m".into()))])),
            requests: Some(BTreeMap::from([
                ("cpu".to_string(), Q("1".into())),
                ("memory".to_string(), Q("-1".into())),
            ])),
            ..Default::default()
        });
        let vols = BTreeSet::new();
        let m = messages(&validate_containers(&[c], &ctx(&vols), &Path::new("spec").child("containers")));
        assert!(m.contains(&"spec.containers[0].resources.requests: Invalid value: \"1\": must be less than or equal to cpu limit of 500m".to_string()));
        assert!(m.contains(
            &"spec.containers[0].resources.requests[memory]: Invalid value: \"-1\": must be greater than or equal to 0"
                .to_string()
        ));
        let mut d = ctr("web", "nginx");
        d.resources = Some(ResourceRequirements {
            limits: Some(BTreeMap::from([("memory".to_string(), Q("1Gi".into()))])),
            ..Default::default()
        });
        default_requests_to_limits(&mut d);
        assert_eq!(d.resources.and_then(|r| r.requests).map(|r| r["memory"].0.clone()).as_deref(), Some("1Gi"));
    }

    #[test]
    fn init_container_probes_need_sidecar_restart_policy() {
        let mut c = ctr("init", "busybox");
        c.liveness_probe = Some(Default::default());
        let vols = BTreeSet::new();
        let m = messages(&validate_init_containers(&[c], &[], &ctx(&vols), &Path::new("spec").child("initContainers")));
        assert_eq!(m, ["spec.initContainers[0].livenessProbe: Forbidden: may not be set for init containers without restartPolicy=Always"]);
    }
}
