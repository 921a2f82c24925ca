//! The generic registry: create, get, list, update, patch and delete for every stored kind, on
//! JSON values, with the kind's strategy for defaulting and validation (upstream's
//! `registry/generic/registry.Store`).

use crate::admission::{self, Chain, Operation};
use crate::auth::UserInfo;
use crate::error::{from_store, ApiError};
use crate::object::{self, meta_mut};
use bytes::Bytes;
use k1s_api::apply as ssa;
use k1s_api::conversion;
use k1s_api::deletion::Grace;
use k1s_api::field::FieldError;
use k1s_api::selectors::Selector;
use k1s_api::{meta as metav, ResourceInfo};
use k1s_store::{KeyValue, Store, StoreError};
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// Namespaces that always exist and may not be deleted.
pub const IMMORTAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public"];
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

/// Options of a list or watch.
#[derive(Clone, Debug, Default)]
pub struct ListOptions {
    pub label_selector: Selector,
    pub field_selector: Selector,
    pub limit: usize,
    pub continue_token: Option<String>,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
}

pub struct ListPage {
    pub items: Vec<Value>,
    pub resource_version: u64,
    pub continue_token: Option<String>,
    pub remaining: Option<i64>,
}

/// Checks a field selector only uses supported labels.
pub fn check_field_selector(info: &ResourceInfo, sel: &Selector) -> Result<(), ApiError> {
    for r in &sel.requirements {
        if r.key != "metadata.name"
            && r.key != "metadata.namespace"
            && !info.strategy.selectable_fields().contains(&r.key.as_str())
        {
            return Err(ApiError::bad_request(format!("field label not supported: {}", r.key)));
        }
    }
    Ok(())
}

/// Whether `obj` matches a field selector.
pub fn matches_fields(info: &ResourceInfo, sel: &Selector, obj: &Value) -> bool {
    if sel.is_empty() {
        return true;
    }
    let get = |k: &str| -> Option<String> {
        match k {
            "metadata.name" => Some(object::name(obj).to_string()),
            "metadata.namespace" => Some(object::namespace(obj).unwrap_or("").to_string()),
            _ => Some(info.strategy.field_value(obj, k)),
        }
    };
    sel.requirements.iter().all(|r| r.matches(&get))
}

pub fn matches(info: &ResourceInfo, opts: &ListOptions, obj: &Value) -> bool {
    opts.label_selector.matches_labels(object::meta(obj).and_then(|m| m.get("labels")))
        && matches_fields(info, &opts.field_selector, obj)
}

pub struct Registry {
    pub store: Store,
    pub admission: Arc<Chain>,
    /// ClusterIP and NodePort allocation; `None` leaves Services as written.
    pub services: Option<Arc<crate::service_alloc::ServiceAllocator>>,
    /// The custom resources of the stored CustomResourceDefinitions.
    pub custom: Arc<crate::custom_resources::CustomResources>,
}

fn is_services(info: &ResourceInfo) -> bool {
    info.group.is_empty() && info.resource == "services"
}

fn strict_error(unknown: &[String]) -> ApiError {
    let msgs: Vec<String> = unknown.iter().map(|f| format!("unknown field \"{f}\"")).collect();
    ApiError::bad_request(format!("strict decoding error: {}", msgs.join(", ")))
}

fn continue_token(rv: u64, start: &str) -> String {
    use base64::Engine as _;
    let raw = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": start}).to_string();
    base64::engine::general_purpose::URL_SAFE.encode(raw)
}

fn parse_continue(token: &str) -> Result<(u64, String), ApiError> {
    use base64::Engine as _;
    let bad = || {
        ApiError::bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        )
    };
    let raw = base64::engine::general_purpose::URL_SAFE.decode(token).map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    let rv = v.get("rv").and_then(Value::as_u64).ok_or_else(bad)?;
    let start = v.get("start").and_then(Value::as_str).ok_or_else(bad)?.to_string();
    if start.contains("..") || start.starts_with('/') {
        return Err(bad());
    }
    Ok((rv, start))
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
        match conversion::storage_version(info) {
            Some(to) if to != info.version => {
                let stored =
                    conversion::convert(obj.clone(), info, to).map_err(|e| ApiError::internal(e.to_string()))?;
                Ok(object::to_storage(&stored))
            }
            _ => Ok(object::to_storage(obj)),
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

    /// Lists objects, paging with `limit`/`continue` at one consistent revision.
    pub fn list(
        &self,
        info: &'static ResourceInfo,
        namespace: Option<&str>,
        opts: &ListOptions,
    ) -> Result<ListPage, ApiError> {
        check_field_selector(info, &opts.field_selector)?;
        let prefix = match (info.namespaced(), namespace) {
            (true, Some(ns)) => format!("{}{}/", info.storage_prefix(), ns),
            _ => info.storage_prefix(),
        };
        let mut limit = opts.limit;
        let (mut at, mut start_after) = (None, None);
        if let Some(tok) = opts.continue_token.as_deref().filter(|t| !t.is_empty()) {
            let (rv, start) = parse_continue(tok)?;
            at = Some(rv);
            start_after = Some(format!("{prefix}{start}"));
        } else {
            match (opts.resource_version.as_deref(), opts.resource_version_match.as_deref()) {
                (Some("0"), _) => limit = 0,
                (Some(rv), Some("Exact")) => {
                    at = Some(
                        rv.parse::<u64>()
                            .map_err(|_| ApiError::bad_request(format!("invalid resource version \"{rv}\"")))?,
                    )
                }
                (Some(rv), _) if !rv.is_empty() => {
                    let want = rv
                        .parse::<u64>()
                        .map_err(|_| ApiError::bad_request(format!("invalid resource version \"{rv}\"")))?;
                    let cur = self.store.current_revision();
                    if want > cur {
                        return Err(ApiError::timeout(format!("Too large resource version: {want}, current: {cur}")));
                    }
                }
                _ => {}
            }
        }
        let filtering = !opts.label_selector.is_empty() || !opts.field_selector.is_empty();
        let mut items = Vec::new();
        let mut revision;
        let mut more;
        let mut last_key: Option<String> = None;
        loop {
            let chunk = if limit == 0 {
                0
            } else if filtering {
                (limit - items.len()).max(64)
            } else {
                limit - items.len()
            };
            let page = self.store.list(&prefix, start_after.as_deref(), chunk, at).map_err(|e| match e {
                StoreError::Compacted { .. } if opts.continue_token.is_some() => ApiError::gone(
                    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
                ),
                other => from_store(other, info, ""),
            })?;
            revision = page.revision;
            at = Some(revision);
            more = page.more;
            for (i, kv) in page.items.iter().enumerate() {
                let obj = Self::decode_kv(info, kv)?;
                if !filtering || matches(info, opts, &obj) {
                    items.push(obj);
                }
                last_key = Some(kv.key.clone());
                if limit != 0 && items.len() >= limit {
                    if i + 1 < page.items.len() {
                        more = true;
                    }
                    break;
                }
            }
            if limit == 0 || items.len() >= limit || !more {
                break;
            }
            start_after = last_key.clone();
        }
        let continue_token = match (more, &last_key) {
            (true, Some(k)) => Some(continue_token(revision, k.strip_prefix(&prefix).unwrap_or(k))),
            _ => None,
        };
        Ok(ListPage { items, resource_version: revision, continue_token, remaining: None })
    }

    /// Decodes a request body into the kind's type: unknown fields handled per `fieldValidation`,
    /// defaults applied.
    fn normalize(&self, ctx: &mut Ctx<'_>, obj: Value) -> Result<Value, ApiError> {
        let n = ctx.info.strategy.normalize(obj).map_err(|e| ApiError::bad_request(e.0))?;
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

    fn validate(&self, ctx: &Ctx<'_>, obj: &Value, old: Option<&Value>) -> Result<(), ApiError> {
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
            _ => info.strategy.validate(obj, old),
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

    /// Create (POST).
    pub async fn create(&self, ctx: &mut Ctx<'_>, body: Value) -> Result<Value, ApiError> {
        self.create_with_json(ctx, body).await.map(|(obj, _)| obj)
    }

    /// [`create`](Self::create), with the created object's JSON as well when it was stored (not
    /// under dry-run): the stored bytes with `resourceVersion` spliced in, byte for byte what
    /// encoding the returned object gives, without encoding it a second time.
    pub async fn create_with_json(&self, ctx: &mut Ctx<'_>, body: Value) -> Result<(Value, Option<Vec<u8>>), ApiError> {
        let mut obj = body;
        Self::check_type_and_namespace(ctx, &mut obj)?;
        if object::resource_version(&obj).is_some() {
            return Err(ApiError::bad_request("resourceVersion should not be set on objects to be created"));
        }
        let mut obj = self.normalize(ctx, obj)?;
        let stored = self.create_normalized(ctx, &mut obj).await?;
        // The stored bytes are the reply only when they are in the version asked for.
        let json = stored
            .filter(|_| !conversion::converts(ctx.info))
            .and_then(|(bytes, rev)| object::storage_json_with_rv(&bytes, rev));
        Ok((obj, json))
    }

    /// The Service allocator, seeded from the stored Services on first use.
    fn service_allocator(
        &self,
        info: &ResourceInfo,
    ) -> Result<Option<&crate::service_alloc::ServiceAllocator>, ApiError> {
        let Some(a) = self.services.as_deref().filter(|_| is_services(info)) else { return Ok(None) };
        if !a.seeded() {
            let page = self.store.list(&info.storage_prefix(), None, 0, None).map_err(|e| from_store(e, info, ""))?;
            let stored: Vec<Value> =
                page.items.iter().filter_map(|kv| serde_json::from_slice(&kv.value).ok()).collect();
            a.seed_with(&stored);
        }
        Ok(Some(a))
    }

    /// Create of an already decoded and defaulted object (also used by apply-creates). Gives
    /// the stored bytes and their revision, unless under dry-run.
    async fn create_normalized(&self, ctx: &mut Ctx<'_>, obj: &mut Value) -> Result<Option<(Bytes, u64)>, ApiError> {
        let alloc = self.service_allocator(ctx.info)?;
        let taken = match alloc {
            Some(a) => Some(a.allocate_create(obj)?),
            None => None,
        };
        let res = self.create_allocated(ctx, obj).await;
        if let (Some(a), Some(t)) = (alloc, &taken) {
            if res.is_err() || ctx.dry_run {
                a.release(t);
            }
        }
        res
    }

    async fn create_allocated(&self, ctx: &mut Ctx<'_>, obj: &mut Value) -> Result<Option<(Bytes, u64)>, ApiError> {
        let info = ctx.info;
        {
            let md = meta_mut(obj);
            let name = md.get("name").and_then(Value::as_str).unwrap_or("").to_string();
            if name.is_empty() {
                if let Some(g) = md.get("generateName").and_then(Value::as_str).filter(|g| !g.is_empty()) {
                    md.insert("name".into(), Value::String(object::generate_name(g)));
                }
            }
            md.insert("uid".into(), Value::String(uuid::Uuid::new_v4().to_string()));
            md.insert("creationTimestamp".into(), Value::String(object::now_rfc3339()));
            md.remove("deletionTimestamp");
            md.remove("deletionGracePeriodSeconds");
            md.remove("resourceVersion");
            md.remove("selfLink");
            if info.strategy.tracks_generation() {
                md.insert("generation".into(), json!(1));
            } else {
                md.remove("generation");
            }
        }
        let name = object::name(obj).to_string();
        let ns = object::namespace(obj).map(str::to_string);
        let mut attrs = admission::Attributes {
            operation: Operation::Create,
            resource: info,
            subresource: None,
            namespace: ns.as_deref(),
            name: &name,
            user: ctx.user,
            object: Some(obj),
            old_object: None,
            dry_run: ctx.dry_run,
            warnings: Default::default(),
        };
        let admitted = self.admission.admit(&mut attrs).await;
        ctx.warnings.extend(attrs.take_warnings());
        admitted?;
        info.strategy.prepare_for_create(obj).map_err(|e| ApiError::bad_request(e.0))?;
        self.validate(ctx, obj, None)?;
        let name = object::name(obj).to_string();
        self.validate_admission(ctx, Operation::Create, &name, ns.as_deref(), Some(obj), None).await?;
        Self::record_fields(ctx, None, obj);
        if ctx.dry_run {
            return Ok(None);
        }
        let key = Self::key(info, ns.as_deref(), &name);
        let kv =
            self.store.create(&key, Self::storage_bytes(info, obj)?).await.map_err(|e| from_store(e, info, &name))?;
        object::set_resource_version(obj, kv.mod_revision);
        Ok(Some((kv.value, kv.mod_revision)))
    }

    async fn validate_admission(
        &self,
        ctx: &mut Ctx<'_>,
        op: Operation,
        name: &str,
        namespace: Option<&str>,
        obj: Option<&mut Value>,
        old: Option<&Value>,
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
        };
        let validated = self.admission.validate(&attrs).await;
        ctx.warnings.extend(attrs.take_warnings());
        validated
    }

    /// Carries server-owned fields from `old` into `new` and applies the subresource split.
    fn prepare_update(ctx: &Ctx<'_>, new: &mut Value, old: &Value) -> Result<(), ApiError> {
        let info = ctx.info;
        let old_meta = object::meta(old).cloned().unwrap_or_default();
        let status_update = ctx.subresource == Some("status");
        // The one field an update through this subresource may change.
        let owned: Option<&[&str]> = match ctx.subresource {
            Some("status") => Some(&["status"]),
            // pods/ephemeralcontainers (upstream's dropNonEphemeralContainerUpdates).
            Some("ephemeralcontainers") => Some(&["spec", "ephemeralContainers"]),
            _ => None,
        };
        if let Some(owned) = owned {
            // Only that field (and managedFields) may change through the subresource.
            let value = owned.iter().try_fold(&*new, |v, k| v.get(*k)).cloned();
            let managed = object::meta(new).and_then(|m| m.get("managedFields")).cloned();
            let rv = object::meta(new).and_then(|m| m.get("resourceVersion")).cloned();
            let annotations = info
                .strategy
                .status_update_keeps_annotations()
                .then(|| object::meta(new).and_then(|m| m.get("annotations")).cloned());
            *new = old.clone();
            set_path(new, owned, value);
            let md = meta_mut(new);
            match managed {
                Some(m) => md.insert("managedFields".into(), m),
                None => md.remove("managedFields"),
            };
            match rv {
                Some(rv) => md.insert("resourceVersion".into(), rv),
                None => md.remove("resourceVersion"),
            };
            match annotations {
                Some(Some(a)) => md.insert("annotations".into(), a),
                Some(None) => md.remove("annotations"),
                None => None,
            };
        } else if info.has_subresource("status") && ctx.subresource.is_none() {
            match old.get("status") {
                Some(s) => new["status"] = s.clone(),
                None => {
                    if let Some(m) = new.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
        }
        let spec_changed = info.strategy.generation_changed(new, old);
        let md = meta_mut(new);
        for f in ["uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"] {
            match old_meta.get(f) {
                Some(v) => md.insert(f.into(), v.clone()),
                None => md.remove(f),
            };
        }
        md.remove("selfLink");
        if info.strategy.tracks_generation() && spec_changed && !status_update {
            let g = old_meta.get("generation").and_then(Value::as_i64).unwrap_or(0);
            md.insert("generation".into(), json!(g + 1));
        }
        // Once deleting, finalizers may only be removed.
        if object::is_deleting(old) {
            let old_f = object::finalizers(old);
            let new_f = object::finalizers(new);
            if let Some(added) = new_f.iter().find(|f| !old_f.contains(f)) {
                return Err(ApiError::invalid(
                    info.group,
                    info.kind,
                    object::name(old),
                    &[FieldError::forbidden(
                        "metadata.finalizers",
                        format!("no new finalizers can be added if the object is being deleted, found new finalizers []string{{\"{added}\"}}"),
                    )],
                ));
            }
        }
        Ok(())
    }

    /// The shared tail of update and patch: prepare, admit, validate, write with CAS.
    /// `Err(None)` signals a lost race the caller may retry.
    async fn finish_update(
        &self,
        ctx: &mut Ctx<'_>,
        old: &Value,
        old_kv: &KeyValue,
        mut new: Value,
    ) -> Result<Value, Option<ApiError>> {
        let info = ctx.info;
        Self::prepare_update(ctx, &mut new, old)?;
        let name = object::name(old).to_string();
        let ns = object::namespace(old).map(str::to_string);
        let mut attrs = admission::Attributes {
            operation: Operation::Update,
            resource: info,
            subresource: ctx.subresource,
            namespace: ns.as_deref(),
            name: &name,
            user: ctx.user,
            object: Some(&mut new),
            old_object: Some(old),
            dry_run: ctx.dry_run,
            warnings: Default::default(),
        };
        let admitted = self.admission.admit(&mut attrs).await;
        ctx.warnings.extend(attrs.take_warnings());
        admitted?;
        if ctx.subresource.is_none() {
            info.strategy.prepare_for_update(&mut new, old).map_err(|e| ApiError::bad_request(e.0))?;
        }
        let alloc = if ctx.subresource.is_none() { self.service_allocator(info)? } else { None };
        let (taken, freed) = match alloc {
            Some(a) => {
                let (t, f) = a.allocate_update(&mut new, old)?;
                (Some(t), Some(f))
            }
            None => (None, None),
        };
        let res = self.write_update(ctx, old, old_kv, new).await;
        if let Some(a) = alloc {
            match (&res, ctx.dry_run) {
                (Ok(written), false) => {
                    if let Some(f) = &freed {
                        a.release(f);
                    }
                    if object::is_deleting(written) && object::finalizers(written).is_empty() {
                        a.release_service(written);
                    }
                }
                _ => {
                    if let Some(t) = &taken {
                        a.release(t);
                    }
                }
            }
        }
        res
    }

    /// Validates and writes an update prepared by `finish_update`.
    async fn write_update(
        &self,
        ctx: &mut Ctx<'_>,
        old: &Value,
        old_kv: &KeyValue,
        mut new: Value,
    ) -> Result<Value, Option<ApiError>> {
        let info = ctx.info;
        let name = object::name(old).to_string();
        let ns = object::namespace(old).map(str::to_string);
        self.validate(ctx, &new, Some(old))?;
        self.validate_admission(ctx, Operation::Update, &name, ns.as_deref(), Some(&mut new), Some(old)).await?;
        if object::same_content(&new, old) {
            return Ok(old.clone());
        }
        Self::record_fields(ctx, Some(old), &mut new);
        if ctx.dry_run {
            object::set_resource_version(&mut new, old_kv.mod_revision);
            return Ok(new);
        }
        let key = old_kv.key.clone();
        // The last finalizer of a deleting object is gone: the object goes.
        if object::is_deleting(&new) && object::finalizers(&new).is_empty() && !info.strategy.deletion_held(&new) {
            return match self.store.delete(&key, Some(old_kv.mod_revision)).await {
                Ok(kv) => {
                    object::set_resource_version(&mut new, kv.mod_revision);
                    Ok(new)
                }
                Err(StoreError::Conflict { .. }) => Err(None),
                Err(e) => Err(Some(from_store(e, info, &name))),
            };
        }
        match self.store.update(&key, Self::storage_bytes(info, &new)?, Some(old_kv.mod_revision)).await {
            Ok(kv) => {
                object::set_resource_version(&mut new, kv.mod_revision);
                Ok(new)
            }
            Err(StoreError::Conflict { .. }) => Err(None),
            Err(e) => Err(Some(from_store(e, info, &name))),
        }
    }

    /// Update (PUT) of the object or its status/finalize subresource.
    pub async fn update(&self, ctx: &mut Ctx<'_>, name: &str, body: Value) -> Result<(Value, bool), ApiError> {
        let info = ctx.info;
        let mut obj = body;
        Self::check_type_and_namespace(ctx, &mut obj)?;
        let body_name = object::name(&obj);
        if body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let obj = self.normalize(ctx, obj)?;
        let wanted_rv = object::resource_version(&obj).map(str::to_string);
        for _ in 0..MAX_RETRIES {
            let (old, old_kv) = match self.get_kv(info, ctx.namespace, name) {
                Ok(x) => x,
                Err(e) if e.code == 404 && ctx.subresource.is_none() && info.strategy.allow_create_on_update() => {
                    let mut o = obj.clone();
                    meta_mut(&mut o).remove("resourceVersion");
                    self.create_normalized(ctx, &mut o).await?;
                    return Ok((o, true));
                }
                Err(e) => return Err(e),
            };
            match &wanted_rv {
                Some(rv) if *rv != old_kv.mod_revision.to_string() => {
                    return Err(ApiError::stale(info.group, info.resource, name));
                }
                None if !Self::allow_unconditional_update(info) => {
                    return Err(ApiError::invalid(
                        info.group,
                        info.kind,
                        name,
                        &[FieldError::invalid("metadata.resourceVersion", "", "must be specified for an update")],
                    ));
                }
                _ => {}
            }
            let mut new = obj.clone();
            if ctx.subresource == Some("finalize") {
                // Only spec.finalizers change through /finalize.
                let fin = new.pointer("/spec/finalizers").cloned();
                new = old.clone();
                match fin {
                    Some(f) => new["spec"]["finalizers"] = f,
                    None => {
                        if let Some(s) = new.get_mut("spec").and_then(Value::as_object_mut) {
                            s.remove("finalizers");
                        }
                    }
                }
            }
            match self.finish_update(ctx, &old, &old_kv, new).await {
                Ok(v) => return Ok((v, false)),
                Err(Some(e)) => return Err(e),
                Err(None) if wanted_rv.is_some() => return Err(ApiError::stale(info.group, info.resource, name)),
                Err(None) => continue,
            }
        }
        Err(ApiError::stale(info.group, info.resource, name))
    }

    fn allow_unconditional_update(_info: &ResourceInfo) -> bool {
        true
    }

    /// Patch (PATCH) of the object or a subresource, of any patch type.
    pub async fn patch(
        &self,
        ctx: &mut Ctx<'_>,
        name: &str,
        ptype: PatchType,
        patch: Value,
        force: bool,
    ) -> Result<(Value, bool), ApiError> {
        let info = ctx.info;
        let openapi = k1s_api::openapi::get();
        let schema = kind_schema(info);
        if info.custom.is_some() && ptype == PatchType::Strategic {
            // Custom resources have no patch strategies to merge by (upstream answers 415).
            return Err(ApiError::new(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
            ));
        }
        for _ in 0..MAX_RETRIES {
            let existing = match self.get_kv(info, ctx.namespace, name) {
                Ok(x) => Some(x),
                Err(e) if e.code == 404 && ptype == PatchType::Apply && ctx.subresource.is_none() => None,
                Err(e) => return Err(e),
            };
            let Some((old, old_kv)) = existing else {
                // Server-side apply creates.
                let mut applied = patch.clone();
                Self::check_type_and_namespace(ctx, &mut applied)?;
                if object::name(&applied) != name {
                    return Err(ApiError::bad_request(format!(
                        "the name of the object ({}) does not match the name on the URL ({name})",
                        object::name(&applied)
                    )));
                }
                let mut obj = self.normalize(ctx, applied.clone())?;
                let schema = schema.ok_or_else(|| ApiError::internal(format!("no schema for {}", info.kind)))?;
                let time = object::now_rfc3339();
                let av = info.api_version();
                let m = ssa::Manager {
                    name: &ctx.field_manager,
                    operation: ssa::Operation::Apply,
                    api_version: &av,
                    subresource: None,
                    time: &time,
                };
                let with_fields = ssa::apply(None, &applied, &m, force, schema, openapi, reset_for(ctx))
                    .map_err(|e| apply_error(info, name, e))?;
                if let Some(mf) = object::meta(&with_fields).and_then(|m| m.get("managedFields")).cloned() {
                    meta_mut(&mut obj).insert("managedFields".into(), mf);
                }
                // Fields set by create itself (uid, timestamps) are not tracked.
                let ctx_manager = std::mem::take(&mut ctx.field_manager);
                let res = self.create_applied(ctx, &mut obj).await;
                ctx.field_manager = ctx_manager;
                res?;
                return Ok((obj, true));
            };
            let patched = match &ptype {
                PatchType::Json => {
                    let p: json_patch::Patch = serde_json::from_value(patch.clone())
                        .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
                    let mut doc = old.clone();
                    json_patch::patch(&mut doc, &p).map_err(|e| ApiError::new(422, "Invalid", e.to_string()))?;
                    doc
                }
                PatchType::Merge => {
                    if !patch.is_object() {
                        return Err(ApiError::bad_request("merge patch must be a JSON object"));
                    }
                    let mut doc = old.clone();
                    json_patch::merge(&mut doc, &patch);
                    doc
                }
                PatchType::Strategic => {
                    if !patch.is_object() {
                        return Err(ApiError::bad_request("strategic merge patch must be a JSON object"));
                    }
                    k1s_api::strategic::apply(&old, &patch, schema, openapi).map_err(|e| match e.status_code() {
                        400 => ApiError::bad_request(e.to_string()),
                        422 => ApiError::new(422, "Invalid", e.to_string()),
                        _ => ApiError::internal(e.to_string()),
                    })?
                }
                PatchType::Apply => {
                    let schema = schema.ok_or_else(|| ApiError::internal(format!("no schema for {}", info.kind)))?;
                    let mut applied = patch.clone();
                    Self::check_type_and_namespace(ctx, &mut applied)?;
                    // Unknown fields in the applied config follow fieldValidation.
                    self.normalize(ctx, applied.clone())?;
                    let time = object::now_rfc3339();
                    let av = info.api_version();
                    let m = ssa::Manager {
                        name: &ctx.field_manager,
                        operation: ssa::Operation::Apply,
                        api_version: &av,
                        subresource: ctx.subresource,
                        time: &time,
                    };
                    ssa::apply(Some(&old), &applied, &m, force, schema, openapi, reset_for(ctx))
                        .map_err(|e| apply_error(info, name, e))?
                }
            };
            let mut patched = patched;
            // A patch may not change identity.
            Self::check_type_and_namespace(ctx, &mut patched)?;
            if object::name(&patched) != name {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({}) does not match the name on the URL ({name})",
                    object::name(&patched)
                )));
            }
            let patch_rv = object::resource_version(&patched).map(str::to_string);
            if let Some(rv) = &patch_rv {
                if *rv != old_kv.mod_revision.to_string() {
                    return Err(ApiError::stale(info.group, info.resource, name));
                }
            }
            let patched = self.normalize(ctx, patched)?;
            let keep_fields = ptype == PatchType::Apply;
            let manager = if keep_fields { std::mem::take(&mut ctx.field_manager) } else { String::new() };
            let res = self.finish_update(ctx, &old, &old_kv, patched).await;
            if keep_fields {
                ctx.field_manager = manager;
            }
            match res {
                Ok(v) => return Ok((v, false)),
                Err(Some(e)) => return Err(e),
                // A lost race: the patch is applied again to the object now stored. A patch that
                // names a resourceVersion then carries the old one and is refused above, as
                // upstream's; one that names none (the patched object only inherited it) wins.
                Err(None) => continue,
            }
        }
        Err(ApiError::stale(info.group, info.resource, name))
    }

    async fn create_applied(&self, ctx: &mut Ctx<'_>, obj: &mut Value) -> Result<(), ApiError> {
        self.create_normalized(ctx, obj).await.map(drop)
    }

    /// Delete one object, honouring preconditions, finalizers, graceful pod deletion and
    /// propagation policy. Returns the object as it was deleted or as it now waits.
    pub async fn delete(&self, ctx: &mut Ctx<'_>, name: &str, opts: &DeleteOptions) -> Result<Value, ApiError> {
        let info = ctx.info;
        if info.resource == "namespaces" && info.group.is_empty() && IMMORTAL_NAMESPACES.contains(&name) {
            return Err(ApiError::forbidden_message("", "namespaces", name, "this namespace may not be deleted"));
        }
        for _ in 0..MAX_RETRIES {
            let (old, old_kv) = self.get_kv(info, ctx.namespace, name)?;
            if let Some(uid) = &opts.precondition_uid {
                if object::meta_str(&old, "uid") != Some(uid.as_str()) {
                    return Err(ApiError::conflict(
                        info.group,
                        info.resource,
                        name,
                        &format!(
                            "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                            object::meta_str(&old, "uid").unwrap_or("")
                        ),
                    ));
                }
            }
            if let Some(rv) = &opts.precondition_rv {
                if *rv != old_kv.mod_revision.to_string() {
                    return Err(ApiError::conflict(
                        info.group,
                        info.resource,
                        name,
                        &format!(
                            "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                            old_kv.mod_revision
                        ),
                    ));
                }
            }
            let ns = object::namespace(&old).map(str::to_string);
            self.validate_admission(ctx, Operation::Delete, name, ns.as_deref(), None, Some(&old)).await?;
            let mut new = old.clone();
            let mut finalizers = object::finalizers(&old);
            match opts.propagation_policy.as_deref() {
                Some("Foreground") if !finalizers.iter().any(|f| f == "foregroundDeletion") => {
                    finalizers.retain(|f| f != "orphan");
                    finalizers.push("foregroundDeletion".into())
                }
                Some("Orphan") if !finalizers.iter().any(|f| f == "orphan") => {
                    finalizers.retain(|f| f != "foregroundDeletion");
                    finalizers.push("orphan".into())
                }
                Some("Background") => finalizers.retain(|f| f != "orphan" && f != "foregroundDeletion"),
                Some("Foreground") | Some("Orphan") | None => {}
                Some(other) => {
                    return Err(ApiError::invalid(
                        "meta.k8s.io",
                        "DeleteOptions",
                        "",
                        &[FieldError::not_supported(
                            "propagationPolicy",
                            other,
                            &["Foreground", "Background", "Orphan"],
                        )],
                    ))
                }
            }
            let plan = info.strategy.on_delete(&old, opts);
            for f in &plan.finalizers {
                if !finalizers.iter().any(|have| have == f) {
                    finalizers.push(f.to_string());
                }
            }
            if let Some(Grace::Start(grace)) = plan.grace {
                let md = meta_mut(&mut new);
                md.insert("deletionTimestamp".into(), json!(object::timestamp_after(grace)));
                md.insert("deletionGracePeriodSeconds".into(), json!(grace));
            }
            let graceful = plan.grace.is_some();
            if let Some(phase) = plan.status_phase {
                new["status"]["phase"] = json!(phase);
            }
            let must_wait = graceful || !finalizers.is_empty() || info.strategy.deletion_held(&new);
            if !must_wait {
                if ctx.dry_run {
                    return Ok(old);
                }
                return match self.store.delete(&old_kv.key, Some(old_kv.mod_revision)).await {
                    Ok(_) => {
                        if let Some(a) = self.services.as_deref().filter(|_| is_services(info)) {
                            a.release_service(&old);
                        }
                        Ok(old)
                    }
                    Err(StoreError::Conflict { .. }) => continue,
                    Err(e) => Err(from_store(e, info, name)),
                };
            }
            {
                let md = meta_mut(&mut new);
                if !object::is_deleting(&old) {
                    if !graceful {
                        md.insert("deletionTimestamp".into(), json!(object::now_rfc3339()));
                        md.insert("deletionGracePeriodSeconds".into(), json!(0));
                    }
                    if info.strategy.tracks_generation() {
                        let g = md.get("generation").and_then(Value::as_i64).unwrap_or(0);
                        md.insert("generation".into(), json!(g + 1));
                    }
                }
                if finalizers.is_empty() {
                    md.remove("finalizers");
                } else {
                    md.insert("finalizers".into(), json!(finalizers));
                }
            }
            if object::same_content(&new, &old) || ctx.dry_run {
                return Ok(new);
            }
            match self.store.update(&old_kv.key, Self::storage_bytes(info, &new)?, Some(old_kv.mod_revision)).await {
                Ok(kv) => {
                    object::set_resource_version(&mut new, kv.mod_revision);
                    return Ok(new);
                }
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(from_store(e, info, name)),
            }
        }
        Err(ApiError::stale(info.group, info.resource, name))
    }

    /// Deletes every object matching the list options; returns those deleted or now deleting.
    pub async fn delete_collection(
        &self,
        ctx: &mut Ctx<'_>,
        list: &ListOptions,
        opts: &DeleteOptions,
    ) -> Result<Vec<Value>, ApiError> {
        let page =
            self.list(ctx.info, ctx.namespace, &ListOptions { limit: 0, continue_token: None, ..list.clone() })?;
        let mut out = Vec::new();
        for obj in page.items {
            let name = object::name(&obj).to_string();
            let ns = object::namespace(&obj).map(str::to_string);
            let mut sub = Ctx {
                user: ctx.user,
                info: ctx.info,
                namespace: ns.as_deref(),
                subresource: None,
                dry_run: ctx.dry_run,
                field_manager: ctx.field_manager.clone(),
                field_validation: ctx.field_validation,
                warnings: Vec::new(),
            };
            match self.delete(&mut sub, &name, opts).await {
                Ok(v) => out.push(v),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// The context of a write the server makes as itself (bootstrap objects).
    fn server_ctx<'a>(user: &'a UserInfo, info: &'static ResourceInfo, namespace: Option<&'a str>) -> Ctx<'a> {
        Ctx {
            user,
            info,
            namespace,
            subresource: None,
            dry_run: false,
            field_manager: "k1s".into(),
            field_validation: FieldValidation::Strict,
            warnings: Vec::new(),
        }
    }

    fn server_user() -> UserInfo {
        UserInfo::new("system:apiserver", &["system:masters"])
    }

    /// Writes an object as the server itself (bootstrap objects), creating it if missing.
    pub async fn ensure(&self, info: &'static ResourceInfo, obj: Value) -> Result<(), ApiError> {
        let name = object::name(&obj).to_string();
        let ns = object::namespace(&obj).map(str::to_string);
        if self.get(info, ns.as_deref(), &name).is_ok() {
            return Ok(());
        }
        let user = Self::server_user();
        match self.create(&mut Self::server_ctx(&user, info, ns.as_deref()), obj).await {
            Ok(_) => Ok(()),
            Err(e) if e.code == 409 => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Updates an object as the server itself; `obj` carries the resourceVersion it was read at.
    pub async fn server_update(&self, info: &'static ResourceInfo, obj: Value) -> Result<(), ApiError> {
        let name = object::name(&obj).to_string();
        let ns = object::namespace(&obj).map(str::to_string);
        let user = Self::server_user();
        self.update(&mut Self::server_ctx(&user, info, ns.as_deref()), &name, obj).await.map(|_| ())
    }

    /// Writes an object's status as the server itself; `obj` carries its resourceVersion.
    pub async fn server_update_status(&self, info: &'static ResourceInfo, obj: Value) -> Result<(), ApiError> {
        let name = object::name(&obj).to_string();
        let ns = object::namespace(&obj).map(str::to_string);
        let user = Self::server_user();
        let mut ctx = Self::server_ctx(&user, info, ns.as_deref());
        ctx.subresource = Some("status");
        self.update(&mut ctx, &name, obj).await.map(|_| ())
    }

    /// Deletes every object of `info`'s resource as the server itself; gives how many are
    /// left (objects whose finalizers hold them).
    pub async fn server_delete_all(&self, info: &'static ResourceInfo) -> Result<usize, ApiError> {
        let user = Self::server_user();
        let page = self.store.list(&info.storage_prefix(), None, 0, None).map_err(|e| from_store(e, info, ""))?;
        for kv in &page.items {
            let Some(obj) = object::from_storage(&kv.value, kv.mod_revision) else { continue };
            if object::is_deleting(&obj) {
                continue;
            }
            let (name, ns) = (object::name(&obj).to_string(), object::namespace(&obj).map(str::to_string));
            let opts = DeleteOptions { propagation_policy: Some("Background".into()), ..DeleteOptions::default() };
            match self.delete(&mut Self::server_ctx(&user, info, ns.as_deref()), &name, &opts).await {
                Ok(_) => {}
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        let left = self.store.list(&info.storage_prefix(), None, 0, None).map_err(|e| from_store(e, info, ""))?;
        Ok(left.items.len())
    }

    /// Deletes a cluster-scoped object as the server itself.
    pub async fn server_delete(&self, info: &'static ResourceInfo, name: &str) -> Result<(), ApiError> {
        let user = Self::server_user();
        let opts = DeleteOptions::default();
        self.delete(&mut Self::server_ctx(&user, info, None), name, &opts).await.map(|_| ())
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

/// Fields a write through this endpoint cannot change, so never owned by its manager.
fn reset_for(ctx: &Ctx<'_>) -> &'static [&'static [&'static str]] {
    if ctx.subresource.is_none() && ctx.info.has_subresource("status") {
        ssa::RESET_STATUS
    } else {
        ssa::RESET_NONE
    }
}

fn apply_error(info: &ResourceInfo, name: &str, e: ssa::ApplyError) -> ApiError {
    match &e {
        ssa::ApplyError::Conflicts(conflicts) => {
            let mut err = ApiError::new(409, "Conflict", e.message());
            err.group = Some(info.group.to_string());
            err.kind = Some(info.resource.to_string());
            err.name = Some(name.to_string());
            err.causes = conflicts
                .iter()
                .map(|c| crate::error::Cause {
                    reason: "FieldManagerConflict".into(),
                    message: format!("conflict with \"{}\" using {}", c.manager, c.api_version),
                    field: c.field.clone(),
                })
                .collect();
            err
        }
        ssa::ApplyError::Invalid(m) => ApiError::bad_request(m.clone()),
    }
}

/// `Map` re-export for handlers building objects.
pub type Object = Map<String, Value>;

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
            serde_saphyr::from_str::<Value>(s)
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

    #[tokio::test]
    async fn a_created_objects_json_is_what_encoding_the_created_object_gives() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = Store::open(dir.path(), k1s_store::StoreOptions::default()).expect("store");
        let reg = Registry {
            store,
            admission: Arc::new(Chain { mutating: Vec::new(), validating: Vec::new() }),
            services: None,
            custom: Arc::default(),
        };
        let user = UserInfo::new("admin", &["system:masters"]);
        let info = k1s_api::resources::find("", "v1", "configmaps").expect("configmaps");
        let bodies = [
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plain", "labels": {"app": "x"}},
                   "data": {"k": "v \" \\ é \u{1}"}}),
            // Metadata that mentions "resourceVersion" takes the decoding path.
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "mentions", "annotations": {"resourceVersion": "\"resourceVersion\""}}}),
        ];
        for (i, body) in bodies.into_iter().enumerate() {
            for dry_run in [false, true] {
                let mut ctx = Ctx {
                    user: &user,
                    info,
                    namespace: Some("default"),
                    subresource: None,
                    dry_run,
                    field_manager: "test".into(),
                    field_validation: FieldValidation::Strict,
                    warnings: Vec::new(),
                };
                let mut body = body.clone();
                if dry_run {
                    meta_mut(&mut body).insert("name".into(), json!(format!("dry-{i}")));
                }
                let (obj, json) = reg.create_with_json(&mut ctx, body).await.expect("create");
                assert!(object::resource_version(&obj).is_some_and(|rv| !rv.is_empty()) != dry_run);
                match json {
                    Some(json) => {
                        assert!(!dry_run);
                        assert_eq!(
                            String::from_utf8(json).expect("utf-8"),
                            serde_json::to_string(&obj).expect("encode"),
                            "{}",
                            object::name(&obj)
                        );
                    }
                    None => assert!(dry_run, "a stored create gives its JSON"),
                }
            }
        }
    }
}
