//! Create (POST): server-owned metadata, admission, the kind's preparation and validation, and
//! the allocation its resource takes part in, undone when the write does not happen.

use super::{Ctx, Registry};
use crate::admission::{self, Operation};
use crate::error::{from_store, ApiError};
use crate::object::{self, meta_mut};
use bytes::Bytes;
use k1s_api::conversion;
use k1s_api::ResourceInfo;
use k1s_store::Op;
use serde_json::{json, Value};

impl Registry {
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

    /// Create of an already decoded and defaulted object (also used by apply-creates). Gives
    /// the stored bytes and their revision, unless under dry-run.
    pub(super) async fn create_normalized(
        &self,
        ctx: &mut Ctx<'_>,
        obj: &mut Value,
    ) -> Result<Option<(Bytes, u64)>, ApiError> {
        {
            // Named before allocation: what it allocates is recorded under the object's name.
            let md = meta_mut(obj);
            let name = md.get("name").and_then(Value::as_str).unwrap_or("").to_string();
            if name.is_empty() {
                if let Some(g) = md.get("generateName").and_then(Value::as_str).filter(|g| !g.is_empty()) {
                    md.insert("name".into(), Value::String(object::generate_name(g)));
                }
            }
        }
        let reservation = match self.allocator(ctx.info) {
            Some(a) => Some(a.reserve_for_create(obj, ctx.dry_run).await?),
            None => None,
        };
        let res = self.create_allocated(ctx, obj).await;
        if let Some(r) = reservation {
            if res.is_err() || ctx.dry_run {
                r.abort().await;
            } else {
                r.commit().await;
            }
        }
        res
    }

    async fn create_allocated(&self, ctx: &mut Ctx<'_>, obj: &mut Value) -> Result<Option<(Bytes, u64)>, ApiError> {
        let info = ctx.info;
        {
            let md = meta_mut(obj);
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
        // As upstream's create handler, the request's fields are recorded before mutating
        // admission: what admission adds (a LimitRange's defaults, the service account's token
        // volume, a webhook's patch) is managed by no one.
        Self::record_fields(ctx, None, obj);
        let recorded = object::meta(obj).and_then(|m| m.get("managedFields")).cloned();
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
            audit_annotations: ctx.admission_annotations(),
            write: None,
        };
        let admitted = self.admission.admit(&mut attrs).await;
        ctx.warnings.extend(attrs.take_warnings());
        ctx.keep_annotations(&attrs);
        admitted?;
        keep_valid_managed_fields(obj, recorded);
        let requester = k1s_api::strategy::Requester {
            name: &ctx.user.name,
            uid: &ctx.user.uid,
            groups: &ctx.user.groups,
            extra: &ctx.user.extra,
        };
        info.strategy.prepare_for_create_by(obj, &requester).map_err(|e| ApiError::bad_request(e.0))?;
        self.validate(ctx, obj, None)?;
        let name = object::name(obj).to_string();
        if ctx.dry_run {
            self.validate_admission(ctx, Operation::Create, &name, ns.as_deref(), Some(obj), None, None).await?;
            return Ok(None);
        }
        // Validating admission cannot change the object: its stored bytes are known now, and
        // are offered to the plugins (the quota commits its charge with them, in one
        // transaction). An object the store refuses is refused after admission, as upstream.
        let key = Self::key(info, ns.as_deref(), &name);
        let pending = Self::storage_bytes(info, obj)
            .map(|value| admission::PendingWrite::new(Op::Create { key: key.clone(), value }));
        self.validate_admission(ctx, Operation::Create, &name, ns.as_deref(), Some(obj), None, pending.as_ref().ok())
            .await?;
        let pending = pending?;
        let written = match pending.take_outcome() {
            Some(outcome) => outcome,
            None => {
                let Op::Create { key, value } = pending.op else {
                    return Err(ApiError::internal("a create's pending write is not a create"));
                };
                self.store.create(&key, value).await
            }
        };
        let kv = written.map_err(|e| from_store(e, info, &name))?;
        object::set_resource_version(obj, kv.mod_revision);
        Ok(Some((kv.value, kv.mod_revision)))
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
            // Another API server on the same store created it first (a Service's address is
            // then already allocated rather than the name taken, when it reserved first).
            Err(_) if self.get(info, ns.as_deref(), &name).is_ok() => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// Upstream's managed-fields validating admission: managed fields that mutating admission left
/// undecodable are put back as they were recorded before it.
fn keep_valid_managed_fields(obj: &mut Value, recorded: Option<Value>) {
    let now = object::meta(obj).and_then(|m| m.get("managedFields"));
    if now == recorded.as_ref() || now.is_none_or(valid_managed_fields) {
        return;
    }
    tracing::debug!(name = object::name(obj), "admission left managedFields undecodable; restored");
    let md = meta_mut(obj);
    match recorded {
        Some(mf) => md.insert("managedFields".into(), mf),
        None => md.remove("managedFields"),
    };
}

/// Whether `managedFields` decodes as upstream's `DecodeManagedFields` requires: entries with
/// an `Apply` or `Update` operation, `FieldsV1` field sets that are objects.
fn valid_managed_fields(mf: &Value) -> bool {
    let Some(entries) = mf.as_array() else { return mf.is_null() };
    entries.iter().all(|e| {
        let Some(e) = e.as_object() else { return false };
        let text = |k: &str| e.get(k).is_none_or(|v| v.is_string() || v.is_null());
        text("manager")
            && text("apiVersion")
            && text("time")
            && text("subresource")
            && matches!(e.get("operation").and_then(Value::as_str), Some("Apply" | "Update"))
            && e.get("fieldsType").is_none_or(|t| t == "FieldsV1")
            && e.get("fieldsV1").is_none_or(Value::is_object)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::Chain;
    use crate::auth::UserInfo;
    use crate::registry::FieldValidation;
    use k1s_store::Store;
    use std::sync::Arc;

    #[tokio::test]
    async fn a_created_objects_json_is_what_encoding_the_created_object_gives() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = Store::open(dir.path(), k1s_store::StoreOptions::default()).expect("store");
        let reg = Registry {
            store,
            admission: Arc::new(Chain { mutating: Vec::new(), validating: Vec::new() }),
            allocators: Default::default(),
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
                    audit: None,
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

    /// Adds a data key, as a mutating webhook might, and with `break_fields`
    /// leaves `managedFields` undecodable.
    struct Mutator {
        break_fields: bool,
    }

    impl admission::MutatingPlugin for Mutator {
        fn name(&self) -> &'static str {
            "Mutator"
        }
        fn admit<'a>(
            &'a self,
            attrs: &'a mut admission::Attributes<'_>,
        ) -> futures::future::BoxFuture<'a, Result<(), ApiError>> {
            Box::pin(async move {
                if let Some(obj) = attrs.object.as_deref_mut() {
                    obj["data"]["added"] = json!("by admission");
                    if self.break_fields {
                        obj["metadata"]["managedFields"] = json!([{"manager": "x", "operation": "Sideways"}]);
                    }
                }
                Ok(())
            })
        }
    }

    #[tokio::test]
    async fn fields_are_recorded_before_mutating_admission_as_upstream() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = Store::open(dir.path(), k1s_store::StoreOptions::default()).expect("store");
        let user = UserInfo::new("admin", &["system:masters"]);
        let info = k1s_api::resources::find("", "v1", "configmaps").expect("configmaps");
        for break_fields in [false, true] {
            let reg = Registry {
                store: store.clone(),
                admission: Arc::new(Chain {
                    mutating: vec![Box::new(Mutator { break_fields })],
                    validating: Vec::new(),
                }),
                allocators: Default::default(),
                custom: Arc::default(),
            };
            let mut ctx = Ctx {
                user: &user,
                info,
                namespace: Some("default"),
                subresource: None,
                dry_run: false,
                field_manager: "kubectl-create".into(),
                field_validation: FieldValidation::Strict,
                warnings: Vec::new(),
                audit: None,
            };
            let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": format!("cm-{break_fields}")}, "data": {"mine": "x"}});
            let (obj, _) = reg.create_with_json(&mut ctx, body).await.expect("create");
            assert_eq!(obj["data"]["added"], "by admission");
            let mf = &obj["metadata"]["managedFields"];
            assert_eq!(mf.as_array().map(Vec::len), Some(1), "{mf}");
            assert_eq!(mf[0]["manager"], "kubectl-create");
            assert_eq!(mf[0]["operation"], "Update");
            assert!(mf[0]["fieldsV1"]["f:data"].get("f:mine").is_some(), "{mf}");
            assert!(mf[0]["fieldsV1"]["f:data"].get("f:added").is_none(), "admission's field is no one's: {mf}");
        }
    }
}
