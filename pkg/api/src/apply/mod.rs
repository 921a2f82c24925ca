//! Server-side apply (`application/apply-patch+yaml`) and field ownership in
//! `metadata.managedFields`, with the observable behaviour of upstream's structured-merge-diff
//! and apimachinery's field manager, working on JSON objects guided by the kind's OpenAPI v3
//! schema.
//!
//! - [`apply`] merges an applied configuration into the live object (or creates it): the applier
//!   owns exactly the fields of its configuration; fields it owned before and no longer applies
//!   are removed unless another manager owns them; changing a field another manager owns is a
//!   conflict unless `force`, which moves ownership; applying the same value shares it.
//! - [`track_update`] records, for any other write, the fields it changed as owned by its
//!   manager (operation `Update`), taking them from the other managers.
//! - [`fields_v1`] is the FieldsV1 form of an object's fields.
//!
//! Never tracked: `apiVersion`, `kind`, `metadata.{name,namespace,uid,resourceVersion,generation,
//! creationTimestamp,managedFields,selfLink}`, and the endpoint's reset fields (`reset`: e.g.
//! [`RESET_STATUS`] for the main resource of a kind with a status subresource, `&[&["spec"],
//! &["metadata", "labels"]]` for a Deployment's `/status`), which upstream's strategies
//! overwrite with the stored values.
//!
//! Caller duties (as upstream's handlers): for an apply PATCH, call [`apply`], then default,
//! prepare (`prepare_for_create`/`prepare_for_update`, which reset the status) and validate the
//! result — do not call [`track_update`] on it; for other writes, call [`track_update`] on the
//! decoded and defaulted new object. The URL's name/namespace must match the applied config's.

mod fieldpath;
mod managed;
mod schema;
mod typed;
mod updater;

#[cfg(test)]
mod tests;

pub use managed::Operation;

use crate::strategic::SchemaLookup;
use fieldpath::{go_json, go_quote, path_string, values_equal, FieldSet, PathElement};
use managed::{ManagerId, MAX_UPDATE_MANAGERS};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use updater::{ConflictSets, Failure, Updater};

/// The writer of a request.
#[derive(Clone, Copy, Debug)]
pub struct Manager<'a> {
    /// The `fieldManager` query parameter (`"unknown"` when empty).
    pub name: &'a str,
    /// Informational: [`apply`] always records `Apply`, [`track_update`] always `Update`.
    pub operation: Operation,
    /// The API version of the request, e.g. `apps/v1` or `v1`.
    pub api_version: &'a str,
    /// `Some("status")`, `Some("scale")`… for subresource writes.
    pub subresource: Option<&'a str>,
    /// Now, RFC 3339 (`2024-05-01T10:00:00Z`).
    pub time: &'a str,
}

/// No reset fields.
pub const RESET_NONE: &[&[&str]] = &[];
/// The reset fields of the main resource of a kind with a status subresource.
pub const RESET_STATUS: &[&[&str]] = &[&["status"]];

/// A field owned by another manager that an apply would change.
#[derive(Clone, Debug, PartialEq)]
pub struct Conflict {
    /// The other manager's name.
    pub manager: String,
    pub operation: Operation,
    /// The API version of the other manager's entry.
    pub api_version: String,
    pub subresource: Option<String>,
    /// Upstream path format: `.spec.replicas`, `.spec.containers[name="web"].image`.
    pub field: String,
}

impl Conflict {
    /// The manager as upstream prints it: `"kubectl-client-side-apply" using apps/v1` for an
    /// update manager, `"kubectl"` for an applier, with ` with subresource "status"` when set.
    pub fn manager_description(&self) -> String {
        let mut s = go_quote(&self.manager);
        if let Some(sub) = &self.subresource {
            s.push_str(&format!(" with subresource {}", go_quote(sub)));
        }
        if self.operation == Operation::Update {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }

    /// The `StatusCause` message (cause type `FieldManagerConflict`, field [`Conflict::field`]).
    pub fn message(&self) -> String {
        format!("conflict with {}", self.manager_description())
    }

    fn manager_key(&self) -> String {
        ManagerId::new(&self.manager, self.operation, &self.api_version, self.subresource.as_deref()).key()
    }
}

fn conflicts_message(conflicts: &[Conflict]) -> String {
    if let [c] = conflicts {
        return format!("Apply failed with 1 conflict: conflict with {}: {}", c.manager_description(), c.field);
    }
    let mut by_manager: BTreeMap<String, (String, Vec<&str>)> = BTreeMap::new();
    for c in conflicts {
        by_manager.entry(c.manager_key()).or_insert_with(|| (c.manager_description(), Vec::new())).1.push(&c.field);
    }
    let mut lines = Vec::new();
    for (desc, fields) in by_manager.into_values() {
        lines.push(format!("conflicts with {desc}:"));
        lines.extend(fields.into_iter().map(|f| format!("- {f}")));
    }
    format!("Apply failed with {} conflicts: {}", conflicts.len(), lines.join("\n"))
}

/// Why an apply failed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ApplyError {
    /// 409 Conflict, one `FieldManagerConflict` cause per conflict.
    #[error("{}", conflicts_message(.0))]
    Conflicts(Vec<Conflict>),
    /// 400 Bad Request: the applied configuration is not acceptable.
    #[error("{0}")]
    Invalid(String),
}

impl ApplyError {
    /// The `Status` message, worded as upstream.
    pub fn message(&self) -> String {
        self.to_string()
    }
}

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// Upstream's limit on the total size of an object's annotations.
const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

fn str_at<'v>(v: &'v Value, path: &[&str]) -> Option<&'v str> {
    path.iter().try_fold(v, |v, k| v.get(k))?.as_str()
}

fn reset_set(reset: &[&[&str]]) -> FieldSet {
    let mut set = FieldSet::new();
    for path in reset {
        set.insert(path.iter().map(|f| PathElement::field(f)).collect());
    }
    set.insert(vec![PathElement::field("metadata"), PathElement::field("managedFields")]);
    set
}

fn manager_name<'a>(manager: &Manager<'a>) -> &'a str {
    if manager.name.is_empty() {
        "unknown"
    } else {
        manager.name
    }
}

fn subresource<'a>(manager: &Manager<'a>) -> Option<&'a str> {
    manager.subresource.filter(|s| !s.is_empty())
}

/// Go's `GroupVersionKind.String()`.
fn gvk_string(api_version: &str, kind: &str) -> String {
    if api_version.contains('/') {
        format!("{api_version}, Kind={kind}")
    } else {
        format!("/{api_version}, Kind={kind}")
    }
}

/// Checks the applied configuration the way upstream's decoding and field manager do.
fn validate_applied(live: Option<&Value>, applied: &Value, manager: &Manager) -> Result<(), ApplyError> {
    let invalid = |m: String| Err(ApplyError::Invalid(m));
    if !applied.is_object() {
        return invalid("the applied configuration must be a JSON object".into());
    }
    let Some(api_version) = str_at(applied, &["apiVersion"]).filter(|s| !s.is_empty()) else {
        return invalid("Object 'apiVersion' is missing in the applied configuration".into());
    };
    let Some(kind) = str_at(applied, &["kind"]).filter(|s| !s.is_empty()) else {
        return invalid("Object 'Kind' is missing in the applied configuration".into());
    };
    if api_version != manager.api_version {
        return invalid(format!(
            "Incorrect version specified in apply patch. Specified patch version: {api_version}, expected: {}",
            manager.api_version
        ));
    }
    if let Some(live_kind) = live.and_then(|l| str_at(l, &["kind"])).filter(|k| !k.is_empty()) {
        if live_kind != kind {
            return invalid(format!("invalid object type: {}", gvk_string(api_version, kind)));
        }
    }
    if applied.get("metadata").and_then(|m| m.get("managedFields")).is_some_and(|m| !m.is_null()) {
        return invalid("metadata.managedFields must be nil".into());
    }
    Ok(())
}

fn typed_errors(applied: &Value, errors: &[String]) -> ApplyError {
    let ns = str_at(applied, &["metadata", "namespace"]).unwrap_or_default();
    let name = str_at(applied, &["metadata", "name"]).unwrap_or_default();
    let gvk = gvk_string(
        str_at(applied, &["apiVersion"]).unwrap_or_default(),
        str_at(applied, &["kind"]).unwrap_or_default(),
    );
    let detail = match errors {
        [one] => one.clone(),
        many => format!("errors:\n{}", many.iter().map(|e| format!("  {e}")).collect::<Vec<_>>().join("\n")),
    };
    ApplyError::Invalid(format!("failed to create typed patch object ({ns}/{name}; {gvk}): {detail}"))
}

fn to_conflicts(sets: ConflictSets) -> Vec<Conflict> {
    let mut out = Vec::new();
    for (id, (api_version, set)) in sets {
        for path in set.iterate() {
            out.push(Conflict {
                manager: id.manager.clone(),
                operation: id.operation,
                api_version: api_version.clone(),
                subresource: id.subresource.clone(),
                field: path_string(&path),
            });
        }
    }
    out
}

/// The fields a `kubectl` applier may take over without conflict when moving from client-side
/// apply: those of the last-applied annotation whose live value still matches it.
fn allowed_from_last_applied(updater: &Updater, live: &Value) -> Option<FieldSet> {
    let annotation = str_at(live, &["metadata", "annotations", LAST_APPLIED]).filter(|s| !s.is_empty())?;
    let last: Value = serde_json::from_str(annotation).ok()?;
    if str_at(&last, &["apiVersion"]) != Some(updater.api_version) {
        return None;
    }
    let (set, errors) = updater.typed.field_set(&last);
    if !errors.is_empty() {
        return None;
    }
    let cmp = updater.typed.compare(&last, live);
    Some(set.difference(&cmp.modified).difference(&cmp.added).difference(&cmp.removed))
}

fn has_last_applied(obj: &Value) -> bool {
    str_at(obj, &["metadata", "annotations", LAST_APPLIED]).is_some_and(|s| !s.is_empty())
}

/// The applied configuration without the annotation, as Go encodes it (sorted keys, newline).
fn build_last_applied(applied: &Value) -> String {
    let mut obj = applied.clone();
    if let Some(Value::Object(ann)) = obj.get_mut("metadata").and_then(|m| m.get_mut("annotations")) {
        ann.shift_remove(LAST_APPLIED);
    }
    let mut out = String::new();
    go_json(&mut out, &obj);
    out.push('\n');
    out
}

fn set_last_applied(obj: &mut Value, value: String) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else { return };
    let ann = meta.entry("annotations").or_insert_with(|| Value::Object(Map::new()));
    if !ann.is_object() {
        *ann = Value::Object(Map::new());
    }
    let Value::Object(ann) = ann else { return };
    ann.insert(LAST_APPLIED.to_string(), Value::String(value));
    let size: usize = ann.iter().map(|(k, v)| k.len() + v.as_str().map_or(0, str::len)).sum();
    if size > TOTAL_ANNOTATION_SIZE_LIMIT {
        ann.shift_remove(LAST_APPLIED);
    }
}

/// Upstream's `skipNonAppliedManager`: fields of an object nobody tracks yet are first recorded
/// as owned by `before-first-apply`, then the configuration is applied.
fn apply_tracked(
    updater: &Updater,
    live: &Value,
    applied: &Value,
    mut managers: managed::Managers,
    id: &ManagerId,
    manager: &Manager,
    force: bool,
) -> Result<(Value, managed::Managers), ApplyError> {
    if managers.is_empty() {
        let before = ManagerId::new("before-first-apply", Operation::Update, manager.api_version, subresource(manager));
        updater.record_update(&Value::Object(Map::new()), live, &mut managers, &before, manager.time);
        managed::cap_update_managers(&mut managers, MAX_UPDATE_MANAGERS);
    }
    updater.apply(live, applied, managers, id, force).map_err(|f| match f {
        Failure::Conflicts(sets) => ApplyError::Conflicts(to_conflicts(sets)),
        Failure::Invalid(errors) => typed_errors(applied, &errors),
    })
}

/// Server-side apply of `applied` onto `live` (`None`: the object does not exist yet). Returns
/// the object to store, with `metadata.managedFields` updated. When the configuration changes
/// nothing, the live object is returned unchanged (its managedFields may still change when
/// ownership does). `schema` is the kind's root OpenAPI v3 schema; `reset` lists the fields the
/// endpoint's strategy resets (see [`RESET_STATUS`]).
pub fn apply(
    live: Option<&Value>,
    applied: &Value,
    manager: &Manager,
    force: bool,
    schema: &Value,
    lookup: &dyn SchemaLookup,
    reset: &[&[&str]],
) -> Result<Value, ApplyError> {
    validate_applied(live, applied, manager)?;
    let empty = Value::Object(Map::new());
    let live = live.unwrap_or(&empty);
    let managers =
        managed::decode(live).map_err(|e| ApplyError::Invalid(format!("failed to decode managed fields: {e}")))?;
    let updater = Updater {
        typed: typed::Typed::new(schema::Types::new(lookup), schema::Ty::Schema(schema)),
        ignored: reset_set(reset),
        api_version: manager.api_version,
    };
    let name = manager_name(manager);
    let id = ManagerId::new(name, Operation::Apply, manager.api_version, subresource(manager));

    let result = match apply_tracked(&updater, live, applied, managers.clone(), &id, manager, force) {
        // A `kubectl` applier moving from client-side apply takes over the fields of its
        // last-applied configuration that still hold their applied values.
        Err(ApplyError::Conflicts(conflicts)) if name == "kubectl" => match allowed_from_last_applied(&updater, live) {
            Some(allowed) => {
                let allowed: Vec<String> = allowed.iter().map(|p| path_string(p)).collect();
                let remaining: Vec<Conflict> = conflicts.into_iter().filter(|c| !allowed.contains(&c.field)).collect();
                if remaining.is_empty() {
                    apply_tracked(&updater, live, applied, managers, &id, manager, true)
                } else {
                    Err(ApplyError::Conflicts(remaining))
                }
            }
            None => Err(ApplyError::Conflicts(conflicts)),
        },
        other => other,
    };
    let (new, mut managers) = result?;

    let changed = !values_equal(live, &new);
    let mut obj = if changed { new } else { live.clone() };
    if let Some(entry) = managers.get_mut(&id) {
        if changed || entry.time.is_none() {
            entry.time = Some(manager.time.to_string());
        }
    }
    managed::store(&mut obj, &managers);
    if name == "kubectl" && has_last_applied(&obj) {
        set_last_applied(&mut obj, build_last_applied(applied));
    }
    Ok(obj)
}

/// Upstream's `decodeLiveOrNew`: managedFields sent with the new object replace the live ones
/// (`[]` or `[{}]` clears them), except on subresources.
fn managers_for_update(old: Option<&Value>, new: &Value, is_subresource: bool) -> managed::Managers {
    let live = || old.and_then(|o| managed::decode(o).ok()).unwrap_or_default();
    if is_subresource {
        return live();
    }
    if managed::is_reset(new) {
        return managed::Managers::new();
    }
    match managed::decode(new) {
        Ok(m) if !m.is_empty() => m,
        _ => live(),
    }
}

/// Records a non-apply write (create: `old` is `None`; update; patch) in
/// `new.metadata.managedFields`: the fields changed between `old` and `new` become owned by
/// `manager` (operation Update) and leave the other managers' sets. Objects that exist without
/// managedFields stay untracked, as upstream.
pub fn track_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &Manager,
    schema: &Value,
    lookup: &dyn SchemaLookup,
    reset: &[&[&str]],
) {
    if !new.is_object() {
        return;
    }
    let mut managers = managers_for_update(old, new, subresource(manager).is_some());
    managed::clear(new);
    let untracked_existing = old.and_then(|o| str_at(o, &["metadata", "uid"])).is_some_and(|uid| !uid.is_empty());
    if managers.is_empty() && untracked_existing {
        return;
    }
    let typed = typed::Typed::new(schema::Types::new(lookup), schema::Ty::Schema(schema));
    let id = ManagerId::new(manager_name(manager), Operation::Update, manager.api_version, subresource(manager));
    if old.is_none() && managers.is_empty() && record_create(&typed, new, reset, &id, manager) {
        return;
    }
    let updater = Updater { typed, ignored: reset_set(reset), api_version: manager.api_version };
    let empty = Value::Object(Map::new());
    updater.record_update(old.unwrap_or(&empty), new, &mut managers, &id, manager.time);
    managed::cap_update_managers(&mut managers, MAX_UPDATE_MANAGERS);
    managed::store(new, &managers);
}

/// A create with no managers yet: the fields it sets become the manager's, with nobody to take
/// them from, recorded without the general comparison. False when `new` is not a map of fields.
fn record_create(typed: &typed::Typed, new: &mut Value, reset: &[&[&str]], id: &ManagerId, m: &Manager) -> bool {
    let top: Vec<&str> = reset.iter().filter_map(|p| if let [f] = p { Some(*f) } else { None }).collect();
    let Some(mut fields) = typed.created_fields_v1(new, &top) else { return false };
    for path in reset.iter().filter(|p| p.len() > 1) {
        managed::remove_fields_v1(&mut fields, path);
    }
    if !fields.is_empty() {
        managed::store_one(new, id, m.api_version, m.time, Value::Object(fields));
    }
    true
}

/// The fields `obj` sets, in FieldsV1 form (`{"f:spec":{"f:replicas":{}}}`).
pub fn fields_v1(obj: &Value, schema: &Value, lookup: &dyn SchemaLookup) -> Value {
    let typed = typed::Typed::new(schema::Types::new(lookup), schema::Ty::Schema(schema));
    typed.field_set(obj).0.to_fields_v1()
}
