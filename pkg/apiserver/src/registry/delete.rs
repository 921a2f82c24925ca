//! Delete of one object or a collection: preconditions, propagation-policy finalizers, and
//! what the kind's strategy plans (graceful deletion, finalizers of its own, the phase it shows
//! while it waits); an object nothing holds goes at once.

use super::{Ctx, DeleteOptions, ListOptions, Registry, WriteOutcome, MAX_RETRIES};
use crate::admission::Operation;
use crate::error::{from_store, ApiError};
use crate::object::{self, meta_mut};
use k1s_api::deletion::Grace;
use k1s_api::field::FieldError;
use k1s_api::ResourceInfo;
use k1s_store::StoreError;
use serde_json::{json, Value};

impl Registry {
    /// Delete one object, honouring preconditions, finalizers, the kind's delete plan and
    /// propagation policy. Returns the object as it was deleted or as it now waits.
    /// The options' `dryRun` (the body's) joins the request's (the query's): either makes it a
    /// dry run that writes nothing.
    pub async fn delete(&self, ctx: &mut Ctx<'_>, name: &str, opts: &DeleteOptions) -> Result<Value, ApiError> {
        ctx.dry_run |= opts.is_dry_run();
        for _ in 0..MAX_RETRIES {
            if let WriteOutcome::Written(obj) = self.delete_once(ctx, name, opts).await? {
                return Ok(obj);
            }
        }
        Err(ApiError::stale(ctx.info.group, ctx.info.resource, name))
    }

    /// One attempt at [`Self::delete`] against the object as read now.
    async fn delete_once(&self, ctx: &mut Ctx<'_>, name: &str, opts: &DeleteOptions) -> Result<WriteOutcome, ApiError> {
        let info = ctx.info;
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
        self.validate_admission(ctx, Operation::Delete, name, ns.as_deref(), None, Some(&old), None).await?;
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
                    &[FieldError::not_supported("propagationPolicy", other, &["Foreground", "Background", "Orphan"])],
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
                return Ok(WriteOutcome::Written(old));
            }
            return match self.store.delete(&old_kv.key, Some(old_kv.mod_revision)).await {
                Ok(_) => {
                    if let Some(a) = self.allocator(info) {
                        a.release_object(&old).await;
                    }
                    Ok(WriteOutcome::Written(old))
                }
                Err(StoreError::Conflict { .. }) => Ok(WriteOutcome::Conflict),
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
            return Ok(WriteOutcome::Written(new));
        }
        match self.store.update(&old_kv.key, Self::storage_bytes(info, &new)?, Some(old_kv.mod_revision)).await {
            Ok(kv) => {
                object::set_resource_version(&mut new, kv.mod_revision);
                Ok(WriteOutcome::Written(new))
            }
            Err(StoreError::Conflict { .. }) => Ok(WriteOutcome::Conflict),
            Err(e) => Err(from_store(e, info, name)),
        }
    }

    /// Deletes every object matching the list options; returns those deleted or now deleting.
    pub async fn delete_collection(
        &self,
        ctx: &mut Ctx<'_>,
        list: &ListOptions,
        opts: &DeleteOptions,
    ) -> Result<Vec<Value>, ApiError> {
        ctx.dry_run |= opts.is_dry_run();
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
                // Each item's admission annotates the one request's audit event.
                audit: ctx.audit.take(),
            };
            let deleted = self.delete(&mut sub, &name, opts).await;
            ctx.audit = sub.audit.take();
            match deleted {
                Ok(v) => out.push(v),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
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
