//! Update (PUT) of an object or its status/finalize subresource, and the tail update and patch
//! share: server-owned fields carried over, the subresource split, generation as the kind's
//! strategy counts it, admission, validation and the compare-and-swap write.

use super::{set_path, Ctx, Registry, WriteOutcome, MAX_RETRIES};
use crate::admission::{self, Operation};
use crate::error::{from_store, ApiError};
use crate::object::{self, meta_mut};
use k1s_api::field::FieldError;
use k1s_api::ResourceInfo;
use k1s_store::{KeyValue, StoreError};
use serde_json::{json, Value};

impl Registry {
    /// Carries server-owned fields from `old` into `new` and applies the subresource split.
    fn prepare_update(ctx: &Ctx<'_>, new: &mut Value, old: &Value) -> Result<(), ApiError> {
        let info = ctx.info;
        let old_meta = object::meta(old).cloned().unwrap_or_default();
        let status_update = ctx.subresource == Some("status");
        // The one field an update through this subresource may change.
        let owned: Option<&[&str]> = match ctx.subresource {
            Some("status") => Some(&["status"]),
            Some(sub) => info.strategy.subresource_field(sub),
            None => None,
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
        // Upstream's binding writes `spec.nodeName` straight to storage, around the strategy
        // that counts generations: a scheduled pod keeps the generation it was created with.
        let counted = !status_update && ctx.subresource != Some("binding");
        if info.strategy.tracks_generation() && spec_changed && counted {
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
    pub(super) async fn finish_update(
        &self,
        ctx: &mut Ctx<'_>,
        old: &Value,
        old_kv: &KeyValue,
        mut new: Value,
    ) -> Result<WriteOutcome, ApiError> {
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
            audit_annotations: ctx.admission_annotations(),
            write: None,
        };
        let admitted = self.admission.admit(&mut attrs).await;
        ctx.warnings.extend(attrs.take_warnings());
        ctx.keep_annotations(&attrs);
        admitted?;
        match ctx.subresource {
            None => info.strategy.prepare_for_update(&mut new, old),
            Some(sub) => info.strategy.prepare_for_subresource_update(sub, &mut new, old),
        }
        .map_err(|e| ApiError::bad_request(e.0))?;
        let alloc = if ctx.subresource.is_none() { self.allocator(info) } else { None };
        let reservation = match alloc {
            Some(a) => Some(a.reserve_for_update(&mut new, old, ctx.dry_run).await?),
            None => None,
        };
        let res = self.write_update(ctx, old, old_kv, new).await;
        if let (Some(a), Some(r)) = (alloc, reservation) {
            match (&res, ctx.dry_run) {
                (Ok(WriteOutcome::Written(written)), false) => {
                    r.commit().await;
                    // The last finalizer went: so did the object.
                    if object::is_deleting(written) && object::finalizers(written).is_empty() {
                        a.release_object(written).await;
                    }
                }
                _ => r.abort().await,
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
    ) -> Result<WriteOutcome, ApiError> {
        let info = ctx.info;
        let name = object::name(old).to_string();
        let ns = object::namespace(old).map(str::to_string);
        self.validate(ctx, &new, Some(old))?;
        self.validate_admission(ctx, Operation::Update, &name, ns.as_deref(), Some(&mut new), Some(old), None).await?;
        if object::same_content(&new, old) {
            return Ok(WriteOutcome::Written(old.clone()));
        }
        Self::record_fields(ctx, Some(old), &mut new);
        if ctx.dry_run {
            object::set_resource_version(&mut new, old_kv.mod_revision);
            return Ok(WriteOutcome::Written(new));
        }
        let key = old_kv.key.clone();
        // The last finalizer of a deleting object is gone: the object goes, unless a graceful
        // deletion is under way (upstream's `ShouldDeleteDuringUpdate`: the old object's grace
        // period is unset or 0). A pod being stopped keeps its status updates, the kubelet's
        // final one included, until the kubelet deletes it.
        let graceful = object::meta(old)
            .and_then(|m| m.get("deletionGracePeriodSeconds"))
            .and_then(Value::as_i64)
            .is_some_and(|g| g > 0);
        if object::is_deleting(&new)
            && object::finalizers(&new).is_empty()
            && !graceful
            && !info.strategy.deletion_held(&new)
        {
            return match self.store.delete(&key, Some(old_kv.mod_revision)).await {
                Ok(kv) => {
                    object::set_resource_version(&mut new, kv.mod_revision);
                    Ok(WriteOutcome::Written(new))
                }
                Err(StoreError::Conflict { .. }) => Ok(WriteOutcome::Conflict),
                Err(e) => Err(from_store(e, info, &name)),
            };
        }
        match self.store.update(&key, Self::storage_bytes(info, &new)?, Some(old_kv.mod_revision)).await {
            Ok(kv) => {
                object::set_resource_version(&mut new, kv.mod_revision);
                Ok(WriteOutcome::Written(new))
            }
            Err(StoreError::Conflict { .. }) => Ok(WriteOutcome::Conflict),
            Err(e) => Err(from_store(e, info, &name)),
        }
    }

    /// Update (PUT) of the object or its status/finalize subresource.
    pub async fn update(&self, ctx: &mut Ctx<'_>, name: &str, body: Value) -> Result<(Value, bool), ApiError> {
        let info = ctx.info;
        let mut obj = body;
        Self::check_type_and_namespace(ctx, &mut obj)?;
        Self::check_name(&obj, name)?;
        let obj = self.normalize(ctx, obj)?;
        let wanted_rv = object::precondition_resource_version(&obj).map(str::to_string);
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
            match self.finish_update(ctx, &old, &old_kv, new).await? {
                WriteOutcome::Written(v) => return Ok((v, false)),
                WriteOutcome::Conflict if wanted_rv.is_some() => {
                    return Err(ApiError::stale(info.group, info.resource, name))
                }
                WriteOutcome::Conflict => continue,
            }
        }
        Err(ApiError::stale(info.group, info.resource, name))
    }

    fn allow_unconditional_update(_info: &ResourceInfo) -> bool {
        true
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
}
