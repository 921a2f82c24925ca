//! The generic registry: create, get, list, update, patch and delete for every stored kind, on
//! JSON values (upstream's `registry/generic/registry.Store`), one verb per module. What differs
//! by kind is asked of the kind's strategy (`k1s_api::Strategy`: defaulting, validation,
//! generation, field selectors, create-on-update, deletion) and, for the few kinds whose writes
//! take part in allocation (Services' ClusterIPs and NodePorts), of the [`Allocator`] registered
//! for its group-resource. It knows no resource by name.

mod allocator;
mod create;
mod delete;
mod list;
mod patch;
mod update;

pub use allocator::{Allocator, Allocators, Reservation};
pub use list::{check_field_selector, matches, matches_fields, parse_continue, ListOptions, ListPage};

use crate::admission::{self, Chain, Operation};
use crate::auth::UserInfo;
use crate::error::{from_store, ApiError};
use crate::object::{self, meta_mut};
use bytes::Bytes;
use k1s_api::apply as ssa;
use k1s_api::conversion;
use k1s_api::field::FieldError;
use k1s_api::{meta as metav, ResourceInfo};
use k1s_store::{KeyValue, Store};
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// How often a write retries after losing a compare-and-swap race.
const MAX_RETRIES: usize = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

/// Per-request context for registry operations.
pub struct Ctx<'a> {
    pub user: &'a UserInfo,
    pub info: &'static ResourceInfo,
    pub namespace: Option<&'a str>,
    pub subresource: Option<&'a str>,
    pub dry_run: bool,
    pub field_manager: String,
    pub field_validation: FieldValidation,
    pub warnings: Vec<String>,
    /// What the request's audit event records (admission's annotations among it); `None` when
    /// the request is not audited.
    pub audit: Option<crate::audit::Recorded>,
}

impl Ctx<'_> {
    /// The audit annotations admission may add to, when the request is audited.
    pub(crate) fn admission_annotations(&self) -> Option<std::sync::Mutex<Vec<(String, String)>>> {
        self.audit.as_ref().map(|_| Default::default())
    }

    /// Keeps the audit annotations admission added.
    pub(crate) fn keep_annotations(&mut self, attrs: &admission::Attributes<'_>) {
        if let Some(rec) = self.audit.as_mut() {
            rec.annotations.extend(attrs.take_audit_annotations());
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply,
}

impl PatchType {
    pub fn from_content_type(ct: &str) -> Option<PatchType> {
        let ct = ct.split(';').next().unwrap_or("").trim();
        match ct {
            "application/json-patch+json" => Some(PatchType::Json),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => Some(PatchType::Apply),
            _ => None,
        }
    }
}

/// A built-in resource the server's own code works with; missing only if the resource table is.
pub(crate) fn builtin(group: &str, version: &str, resource: &str) -> Result<&'static ResourceInfo, ApiError> {
    k1s_api::resources::find(group, version, resource)
        .ok_or_else(|| ApiError::internal(format!("{resource} resource missing")))
}

pub use k1s_api::deletion::DeleteOptions;

pub struct Registry {
    pub store: Store,
    pub admission: Arc<Chain>,
    /// Stateful allocation by group-resource (`("", "services")`: ClusterIPs and NodePorts);
    /// a resource without an allocator is stored as written.
    pub allocators: Allocators,
    /// The custom resources of the stored CustomResourceDefinitions.
    pub custom: Arc<crate::crd_catalog::CustomResources>,
}

/// How one compare-and-swap write attempt ended.
enum WriteOutcome {
    /// Written (or, under dry-run or when nothing changed, what would be): the object now.
    Written(Value),
    /// Another write got there first; the caller may read again and retry.
    Conflict,
}

fn strict_error(unknown: &[String]) -> ApiError {
    let msgs: Vec<String> = unknown.iter().map(|f| format!("unknown field \"{f}\"")).collect();
    ApiError::bad_request(format!("strict decoding error: {}", msgs.join(", ")))
}

impl Registry {
    /// The served resource at `group`/`version`/`resource`: a built-in, else a custom resource.
    pub fn resource(&self, group: &str, version: &str, resource: &str) -> Option<&'static ResourceInfo> {
        k1s_api::resources::find(group, version, resource)
            .or_else(|| self.custom.current().find(group, version, resource))
    }

    /// Every served resource, built-ins first (what discovery lists).
    pub fn served(&self) -> Vec<&'static ResourceInfo> {
        k1s_api::resources::all().iter().chain(self.custom.current().all()).collect()
    }

    pub fn key(info: &ResourceInfo, namespace: Option<&str>, name: &str) -> String {
        match (info.namespaced(), namespace) {
            (true, Some(ns)) => format!("{}{}/{}", info.storage_prefix(), ns, name),
            _ => format!("{}{}", info.storage_prefix(), name),
        }
    }

    /// A stored object as `info`'s version shows it.
    fn decode_kv(info: &ResourceInfo, kv: &KeyValue) -> Result<Value, ApiError> {
        let obj = object::from_storage(&kv.value, kv.mod_revision)
            .ok_or_else(|| ApiError::internal(format!("stored {} {} is not valid JSON", info.resource, kv.key)))?;
        if conversion::storage_version(info).is_none() {
            return Ok(obj);
        }
        conversion::convert(obj, info, info.version).map_err(|e| ApiError::internal(format!("reading {}: {e}", kv.key)))
    }

    /// What the store keeps of `obj`, written through `info`: the object in the storage version.
    fn storage_bytes(info: &ResourceInfo, obj: &Value) -> Result<Bytes, ApiError> {
        let to_storage = if info.custom.is_some() { object::to_storage_as_sent } else { object::to_storage };
        match conversion::storage_version(info) {
            Some(to) if to != info.version => {
                let stored =
                    conversion::convert(obj.clone(), info, to).map_err(|e| ApiError::internal(e.to_string()))?;
                Ok(to_storage(&stored))
            }
            _ => Ok(to_storage(obj)),
        }
    }

    pub fn get(&self, info: &'static ResourceInfo, namespace: Option<&str>, name: &str) -> Result<Value, ApiError> {
        self.get_kv(info, namespace, name).map(|(v, _)| v)
    }

    fn get_kv(
        &self,
        info: &'static ResourceInfo,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<(Value, KeyValue), ApiError> {
        let key = Self::key(info, namespace, name);
        match self.store.get(&key).map_err(|e| from_store(e, info, name))? {
            Some(kv) => Ok((Self::decode_kv(info, &kv)?, kv)),
            None => Err(ApiError::not_found(info.group, info.resource, name)),
        }
    }

    /// Decodes a request body into the kind's type: unknown fields handled per `fieldValidation`,
    /// defaults applied.
    fn normalize(&self, ctx: &mut Ctx<'_>, mut obj: Value) -> Result<Value, ApiError> {
        let info = ctx.info;
        // Upstream's decode error: `Secret in version "v1" cannot be handled as a Secret: …`.
        let undecodable = |e: &dyn std::fmt::Display| {
            ApiError::bad_request(format!(
                "{0} in version \"{1}\" cannot be handled as a {0}: {e}",
                info.kind, info.version
            ))
        };
        if info.custom.is_none() {
            let paths = k1s_api::openapi::get().byte_fields(info.group, info.version, info.kind);
            k1s_api::byte_fields::canonicalize(&mut obj, &paths).map_err(|e| undecodable(&e.error))?;
        }
        let n = match info.strategy.normalize(obj) {
            Ok(n) => n,
            Err(e) if info.custom.is_some() => return Err(ApiError::bad_request(e.error.0)),
            Err(e) => {
                return Err(match decode_mismatch(info, &e.object) {
                    Some(m) => undecodable(&m.json_message()),
                    None => undecodable(&e.error.0),
                })
            }
        };
        if !n.unknown_fields.is_empty() {
            match ctx.field_validation {
                FieldValidation::Strict => return Err(strict_error(&n.unknown_fields)),
                FieldValidation::Warn => {
                    ctx.warnings.extend(n.unknown_fields.iter().map(|f| format!("unknown field \"{f}\"")))
                }
                FieldValidation::Ignore => {}
            }
        }
        Ok(n.object)
    }

    /// Upstream's `checkName`: the object's name must be the URL's.
    fn check_name(obj: &Value, name: &str) -> Result<(), ApiError> {
        match object::name(obj) {
            "" => Err(ApiError::bad_request(format!(
                "the name of the object ({name} based on URL) was undeterminable: name must be provided"
            ))),
            n if n != name => Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            ))),
            _ => Ok(()),
        }
    }

    /// Checks the body's apiVersion/kind (filling them when absent) and namespace.
    fn check_type_and_namespace(ctx: &Ctx<'_>, obj: &mut Value) -> Result<(), ApiError> {
        let info = ctx.info;
        let Some(map) = obj.as_object_mut() else {
            return Err(ApiError::bad_request("the request body must be a JSON or YAML object"));
        };
        let want_av = info.api_version();
        match map.get("apiVersion").and_then(Value::as_str) {
            None | Some("") => {
                map.insert("apiVersion".into(), Value::String(want_av.clone()));
            }
            Some(av) if av != want_av => {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({av}) does not match the expected API version ({want_av})"
                )));
            }
            _ => {}
        }
        match map.get("kind").and_then(Value::as_str) {
            None | Some("") => {
                map.insert("kind".into(), Value::String(info.kind.to_string()));
            }
            Some(k) if k != info.kind => {
                return Err(ApiError::bad_request(format!(
                    "the kind in the data ({k}) does not match the expected kind ({})",
                    info.kind
                )));
            }
            _ => {}
        }
        let md = meta_mut(obj);
        if info.namespaced() {
            let body_ns = md.get("namespace").and_then(Value::as_str).unwrap_or("").to_string();
            match ctx.namespace {
                Some(ns) if body_ns.is_empty() => {
                    md.insert("namespace".into(), Value::String(ns.to_string()));
                }
                Some(ns) if body_ns != ns => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                _ => {}
            }
        } else {
            md.remove("namespace");
        }
        Ok(())
    }

    fn validate(&self, ctx: &mut Ctx<'_>, obj: &Value, old: Option<&Value>) -> Result<(), ApiError> {
        let info = ctx.info;
        let mut errs: Vec<FieldError> = metav::validate_object_meta(
            obj.get("metadata").unwrap_or(&Value::Null),
            info.strategy.name_rule(),
            info.namespaced(),
        );
        if let Some(old) = old {
            for f in ["name", "namespace", "uid", "creationTimestamp"] {
                let (a, b) = (object::meta_str(obj, f), object::meta_str(old, f));
                if a != b && !(f == "uid" && a.is_none()) {
                    errs.push(FieldError::invalid(format!("metadata.{f}"), a.unwrap_or(""), "field is immutable"));
                }
            }
        }
        let kind_errs = match (ctx.subresource, old) {
            (Some(sub), Some(old)) => info.strategy.validate_subresource(sub, obj, old),
            _ => info.strategy.validate_warning(obj, old, &mut ctx.warnings),
        };
        errs.extend(kind_errs.map_err(|e| ApiError::bad_request(e.0))?);
        if errs.is_empty() {
            Ok(())
        } else {
            let name = object::name(obj);
            let name = if name.is_empty() { object::meta_str(obj, "generateName").unwrap_or("") } else { name };
            Err(ApiError::invalid(info.group, info.kind, name, &errs))
        }
    }

    /// Records the fields this write changed for its manager (operation Update). Apply writes
    /// clear `field_manager` because `ssa::apply` already recorded them.
    fn record_fields(ctx: &Ctx<'_>, old: Option<&Value>, new: &mut Value) {
        if ctx.field_manager.is_empty() {
            return;
        }
        let Some(schema) = kind_schema(ctx.info) else {
            return;
        };
        let time = object::now_rfc3339();
        let av = ctx.info.api_version();
        let m = ssa::Manager {
            name: &ctx.field_manager,
            operation: ssa::Operation::Update,
            api_version: &av,
            subresource: ctx.subresource,
            time: &time,
        };
        ssa::track_update(old, new, &m, schema, k1s_api::openapi::get(), reset_for(ctx));
    }

    #[allow(clippy::too_many_arguments)]
    async fn validate_admission(
        &self,
        ctx: &mut Ctx<'_>,
        op: Operation,
        name: &str,
        namespace: Option<&str>,
        obj: Option<&mut Value>,
        old: Option<&Value>,
        write: Option<&admission::PendingWrite>,
    ) -> Result<(), ApiError> {
        let attrs = admission::Attributes {
            operation: op,
            resource: ctx.info,
            subresource: ctx.subresource,
            namespace,
            name,
            user: ctx.user,
            object: obj,
            old_object: old,
            dry_run: ctx.dry_run,
            warnings: Default::default(),
            audit_annotations: ctx.admission_annotations(),
            write,
        };
        let validated = self.admission.validate(&attrs).await;
        ctx.warnings.extend(attrs.take_warnings());
        ctx.keep_annotations(&attrs);
        validated
    }

    /// The allocator of `info`'s resource, if its writes take part in allocation.
    fn allocator(&self, info: &ResourceInfo) -> Option<&dyn Allocator> {
        self.allocators.get(&(info.group, info.resource)).map(|a| a.as_ref())
    }

    /// The context of a write the server makes as itself (bootstrap objects).
    pub(crate) fn server_ctx<'a>(
        user: &'a UserInfo,
        info: &'static ResourceInfo,
        namespace: Option<&'a str>,
    ) -> Ctx<'a> {
        Ctx {
            user,
            info,
            namespace,
            subresource: None,
            dry_run: false,
            field_manager: "k1s".into(),
            field_validation: FieldValidation::Strict,
            warnings: Vec::new(),
            audit: None,
        }
    }

    pub(crate) fn server_user() -> UserInfo {
        UserInfo::new("system:apiserver", &["system:masters"])
    }
}

/// Sets (or with `None` removes) the field at `path`, creating objects on the way to it.
fn set_path(obj: &mut Value, path: &[&str], value: Option<Value>) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut cur = obj;
    for k in parents {
        if value.is_none() && cur.get(*k).is_none() {
            return;
        }
        let Some(m) = cur.as_object_mut() else { return };
        cur = m.entry(k.to_string()).or_insert_with(|| json!({}));
    }
    let Some(m) = cur.as_object_mut() else { return };
    match value {
        Some(v) => {
            m.insert(last.to_string(), v);
        }
        None => {
            m.remove(*last);
        }
    }
}

/// The object schema merges and managedFields follow: the built-in kind's, or the custom
/// resource's (see `CustomInfo::object_schema`).
fn kind_schema(info: &'static ResourceInfo) -> Option<&'static Value> {
    match &info.custom {
        Some(c) => Some(&c.object_schema),
        None => k1s_api::openapi::get().kind_schema(info.group, info.version, info.kind),
    }
}

/// The first value of `obj` that the kind's Go types could not hold (upstream's decode error
/// names it).
fn decode_mismatch(info: &ResourceInfo, obj: &Value) -> Option<k1s_api::go_decode::Mismatch> {
    let openapi = k1s_api::openapi::get();
    let name = openapi.kind_schema_name(info.group, info.version, info.kind)?;
    let root = name.rsplit('.').take(2).collect::<Vec<_>>();
    let root = format!("{}.{}", root.get(1)?, root.first()?);
    k1s_api::go_decode::first_mismatch(obj, openapi.schema(name)?, &root, openapi)
}

/// Fields a write through this endpoint cannot change, so never owned by its manager.
fn reset_for(ctx: &Ctx<'_>) -> &'static [&'static [&'static str]] {
    if ctx.subresource.is_none() && ctx.info.has_subresource("status") {
        ssa::RESET_STATUS
    } else {
        ssa::RESET_NONE
    }
}

/// `Map` re-export for handlers building objects.
pub type Object = Map<String, Value>;

/// How deeply a YAML body may nest (sequences and mappings): as deep as serde_json reads (its
/// recursion limit of 128 allows 127 levels), so that what was decoded can be read back as JSON.
/// Past it the body is a 400, not a stack overflow in the decoder or in what walks the value.
const MAX_YAML_DEPTH: usize = 127;

/// Parses a body that may be JSON or YAML into a value.
pub fn parse_body(bytes: &Bytes, content_type: &str) -> Result<Value, ApiError> {
    let ct = content_type.split(';').next().unwrap_or("").trim();
    match ct {
        "application/yaml" | "application/apply-patch+yaml" | "text/yaml" => {
            let s = std::str::from_utf8(bytes).map_err(|_| ApiError::bad_request("body is not valid UTF-8"))?;
            // JSON is YAML; parse it as JSON first for exact numbers.
            if let Ok(v) = serde_json::from_str::<Value>(s) {
                return Ok(v);
            }
            let budget = serde_saphyr::Budget { max_depth: MAX_YAML_DEPTH, ..Default::default() };
            let options = serde_saphyr::Options { budget: Some(budget), ..Default::default() };
            serde_saphyr::from_str_with_options::<Value>(s, options)
                .map_err(|e| ApiError::bad_request(format!("error converting YAML to JSON: {e}")))
        }
        "application/vnd.kubernetes.protobuf" => {
            k1s_api::protobuf::decode_body(bytes).map_err(|e| ApiError::bad_request(e.to_string()))
        }
        _ => serde_json::from_slice::<Value>(bytes)
            .map_err(|e| ApiError::bad_request(format!("error decoding request body: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(open: &str, close: &str, depth: usize) -> Bytes {
        Bytes::from(format!("{}1{}", open.repeat(depth), close.repeat(depth)))
    }

    #[test]
    fn a_number_past_64_bits_reads_back_as_the_same_float() {
        // Found by the body_json fuzz target: serde_json's fast float parsing rounded
        // 19543965056251146981 to a neighbour of the nearest double, so the stored object read
        // back different from what was acknowledged. Go's decoder rounds correctly; so does
        // serde_json with `float_roundtrip`.
        for text in ["19543965056251146981", "-19543965056251146981", "{\"a\":-1.9543965056251146e19}"] {
            for ct in ["application/json", "application/yaml"] {
                let v = parse_body(&Bytes::from(text), ct).expect("decodes");
                let again: Value = serde_json::from_slice(&serde_json::to_vec(&v).expect("encodes")).expect("reads");
                assert_eq!(again, v, "{text} as {ct}");
            }
        }
        let v = parse_body(&Bytes::from("19543965056251146981"), "application/json").expect("decodes");
        assert_eq!(v.as_f64(), Some(19543965056251146981.0));
    }

    #[test]
    fn deeply_nested_yaml_body_is_a_400_not_a_stack_overflow() {
        // Found by the body_yaml fuzz target: 10 000 nested sequences (`- - - ... 1`) overflowed
        // the request thread's stack while decoding them into a value, aborting the server.
        for (open, close) in [("- ", ""), ("[", "]"), ("{a: ", "}")] {
            let err = parse_body(&nested(open, close, 10_000), "application/yaml").expect_err("too deep");
            assert_eq!((err.code, err.reason), (400, "BadRequest"), "{open:?}");
        }
    }

    #[test]
    fn yaml_body_decodes_exactly_when_its_json_would() {
        // Found by the body_yaml fuzz target: 128 nested YAML sequences decoded, but the object
        // they made was then too deep for serde_json to read back (from the store, say).
        for depth in 120..135 {
            let json = serde_json::from_slice::<Value>(&nested("[", "]", depth)).is_ok();
            let yaml = parse_body(&nested("- ", "", depth), "application/yaml").is_ok();
            assert_eq!(yaml, json, "depth {depth}");
        }
    }

    #[test]
    fn deeply_nested_json_body_is_a_400() {
        let err = parse_body(&nested("[", "]", 10_000), "application/json").expect_err("too deep");
        assert_eq!((err.code, err.reason), (400, "BadRequest"));
    }
}
