//! Patch (PATCH) of every patch type: JSON, merge, strategic merge and server-side apply
//! (which creates a missing object), finished as an update.

use super::{kind_schema, reset_for, Ctx, PatchType, Registry, WriteOutcome, MAX_RETRIES};
use crate::error::ApiError;
use crate::object::{self, meta_mut};
use k1s_api::apply as ssa;
use k1s_api::FieldError;
use k1s_api::ResourceInfo;
use serde_json::Value;

impl Registry {
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
                Self::check_name(&applied, name)?;
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
            Self::check_name(&patched, name)?;
            let patch_rv = object::precondition_resource_version(&patched).map(str::to_string);
            if let Some(rv) = &patch_rv {
                if *rv != old_kv.mod_revision.to_string() {
                    return Err(ApiError::stale(info.group, info.resource, name));
                }
            }
            // A patch whose result no longer decodes is upstream's 422 on the field `patch`.
            let kept = (ptype != PatchType::Apply && info.custom.is_none()).then(|| patched.clone());
            let patched = match self.normalize(ctx, patched) {
                Err(e) if e.code == 400 => {
                    return Err(kept.and_then(|p| patch_invalid(info, ptype, &patch, &p)).unwrap_or(e))
                }
                r => r?,
            };
            let keep_fields = ptype == PatchType::Apply;
            let manager = if keep_fields { std::mem::take(&mut ctx.field_manager) } else { String::new() };
            let res = self.finish_update(ctx, &old, &old_kv, patched).await;
            if keep_fields {
                ctx.field_manager = manager;
            }
            match res? {
                WriteOutcome::Written(v) => return Ok((v, false)),
                // A lost race: the patch is applied again to the object now stored. A patch that
                // names a resourceVersion then carries the old one and is refused above, as
                // upstream's; one that names none (the patched object only inherited it) wins.
                WriteOutcome::Conflict => continue,
            }
        }
        Err(ApiError::stale(info.group, info.resource, name))
    }

    async fn create_applied(&self, ctx: &mut Ctx<'_>, obj: &mut Value) -> Result<(), ApiError> {
        self.create_normalized(ctx, obj).await.map(drop)
    }
}

/// Upstream's 422 for a patched object that does not decode: a strategic merge patch quoted as
/// Go prints it with the unstructured converter's words, a JSON or merge patch's result as JSON
/// with `encoding/json`'s.
fn patch_invalid(info: &ResourceInfo, ptype: PatchType, patch: &Value, patched: &Value) -> Option<ApiError> {
    let m = super::decode_mismatch(info, patched)?;
    let cause = match ptype {
        PatchType::Strategic => {
            FieldError::invalid("patch", k1s_api::go_decode::go_format(patch), m.unstructured_message())
        }
        _ => FieldError::invalid("patch", patched.to_string(), m.json_message()),
    };
    Some(ApiError::invalid("", "", "", &[cause]))
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
