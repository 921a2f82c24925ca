//! Per-resource behaviour, as upstream's `rest.RESTCreateStrategy`/`RESTUpdateStrategy`.
//!
//! A [`Strategy`] works on the typed k8s-openapi object. The generic registry in the API server
//! works on JSON values, so every strategy is used through [`DynStrategy`], implemented for
//! [`Typed<S>`]. Decoding into the typed object is what drops (or, under strict field validation,
//! reports) unknown fields, exactly as upstream's decoding into Go structs does.

use crate::deletion::{DeleteOptions, DeletePlan};
use crate::field::FieldError;
use serde::{de::DeserializeOwned, Serialize};
use serde_json::Value;

/// Which rule `metadata.name` must follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameRule {
    /// RFC 1123 subdomain (most resources).
    Subdomain,
    /// RFC 1123 label (namespaces, services…).
    Label,
    /// Any string that is a valid path segment (RBAC objects, nodes allow more).
    PathSegment,
}

/// Kind-specific rules. Generic metadata (name, labels, annotations, owner references,
/// uid/resourceVersion/generation) is handled by the registry for every kind.
pub trait Strategy: ObjectHooks + 'static {
    type Object: Serialize + DeserializeOwned + Clone + Send + Sync + 'static;

    /// False only for strategies that keep the no-op `prepare_for_create` and
    /// `prepare_for_update`: the adapter then skips their decode/encode round trip.
    const PREPARES: bool = true;
    /// True only for strategies with a [`Strategy::prepare_for_subresource_update`]: the
    /// others' subresource writes (a pod's status) skip the decode/encode round trip.
    const PREPARES_SUBRESOURCES: bool = false;

    fn name_rule(&self) -> NameRule {
        NameRule::Subdomain
    }
    /// Defaulting, as upstream's `SetDefaults_*`: runs on every decoded request body.
    fn set_defaults(&self, _obj: &mut Self::Object) {}
    /// Create-time preparation (e.g. clear `status`), after defaulting and mutating admission.
    fn prepare_for_create(&self, _obj: &mut Self::Object) {}
    /// Create-time fields taken from the user making the request, after
    /// [`Self::prepare_for_create`] (upstream's strategies read the user from the request's
    /// context: a CertificateSigningRequest's `spec.username`, `uid`, `groups` and `extra`).
    fn set_requester(&self, _obj: &mut Self::Object, _requester: &Requester<'_>) {}
    /// Update-time preparation: `new` may take fields from `old` the user cannot change here.
    fn prepare_for_update(&self, _new: &mut Self::Object, _old: &Self::Object) {}
    /// Preparation of an update through `subresource`, after the registry kept only the field
    /// the subresource owns (upstream gives such endpoints strategies of their own, e.g. a
    /// CertificateSigningRequest's `status` and `approval`).
    fn prepare_for_subresource_update(&self, _subresource: &str, _new: &mut Self::Object, _old: &Self::Object) {}
    /// Kind-specific validation on create.
    fn validate(&self, _obj: &Self::Object) -> Vec<FieldError> {
        Vec::new()
    }
    /// Kind-specific validation on update (immutable fields and the like).
    fn validate_update(&self, new: &Self::Object, _old: &Self::Object) -> Vec<FieldError> {
        self.validate(new)
    }
    /// Validation of an update through `subresource` (upstream gives such endpoints their own
    /// strategy, e.g. `pods/ephemeralcontainers`); by default the same as [`Self::validate_update`].
    fn validate_subresource_update(
        &self,
        _subresource: &str,
        new: &Self::Object,
        old: &Self::Object,
    ) -> Vec<FieldError> {
        self.validate_update(new, old)
    }
    /// Adjusts the typed object's JSON encoding where serde's differs from Go's (e.g. a `f64`
    /// field holding a whole number, which Go writes as `10` and serde as `10.0`).
    fn encoded(&self, _obj: &mut Value) {}
}

/// The rules the registry asks of the stored JSON object, on every write and list item, where
/// decoding into the typed object would be waste. A [`Strategy`] states them for its kind; a
/// [`DynStrategy`] answers them (through [`Typed`], or directly for custom resources): each
/// default lives here once.
pub trait ObjectHooks: Send + Sync {
    /// Whether objects carry `metadata.generation`, set to 1 on create and bumped by every
    /// change [`Self::generation_changed`] counts (upstream's strategies bump it in
    /// `PrepareForUpdate`).
    fn tracks_generation(&self) -> bool {
        false
    }
    /// Whether an update changes what `metadata.generation` counts: by default the spec.
    fn generation_changed(&self, new: &Value, old: &Value) -> bool {
        new.get("spec") != old.get("spec")
    }
    /// Whether a `/status` update may also change the object's annotations (upstream's status
    /// strategies reset them, except where a controller writes one with the status).
    fn status_update_keeps_annotations(&self) -> bool {
        false
    }
    /// Field selector labels the kind supports besides `metadata.name` / `metadata.namespace`
    /// (upstream's `GetAttrs` / `SelectableFields`).
    fn selectable_fields(&self) -> &'static [&'static str] {
        &[]
    }
    /// The value of one of [`Self::selectable_fields`] that a field selector compares: by
    /// default the field as a string, empty when absent.
    fn field_value(&self, obj: &Value, field: &str) -> String {
        crate::selectors::field_string(obj, field).unwrap_or_default()
    }
    /// Whether an update (PUT) of a missing object creates it (upstream's
    /// `AllowCreateOnUpdate`).
    fn allow_create_on_update(&self) -> bool {
        false
    }
    /// What deleting `old` takes besides the generic rules: graceful deletion, finalizers the
    /// kind adds, the phase it shows while it waits.
    fn on_delete(&self, _old: &Value, _opts: &DeleteOptions) -> DeletePlan {
        DeletePlan::default()
    }
    /// Whether something of the kind's own, besides `metadata.finalizers`, keeps a deleting
    /// object stored (a namespace's `spec.finalizers`).
    fn deletion_held(&self, _obj: &Value) -> bool {
        false
    }
    /// The one field an update through `subresource` may change besides `status` through
    /// `/status` (which every kind has): e.g. `spec.ephemeralContainers` through
    /// `pods/ephemeralcontainers`. `None`: the subresource writes as the main resource does.
    fn subresource_field(&self, _subresource: &str) -> Option<&'static [&'static str]> {
        None
    }
}

/// The user a write is made by, as strategies that record it see it.
#[derive(Clone, Copy, Debug)]
pub struct Requester<'a> {
    pub name: &'a str,
    pub uid: &'a str,
    pub groups: &'a [String],
    pub extra: &'a std::collections::BTreeMap<String, Vec<String>>,
}

/// A body that did not decode into the kind's type: a 400 BadRequest.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DecodeError(pub String);

/// A body that did not decode, handed back with why.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct Undecodable {
    pub error: DecodeError,
    pub object: Value,
}

/// The result of decoding a request body into the kind's type and back.
#[derive(Debug)]
pub struct Normalized {
    pub object: Value,
    /// Dotted paths of fields the type does not know, e.g. `spec.foo`.
    pub unknown_fields: Vec<String>,
}

/// Object-safe face of a [`Strategy`], working on JSON values.
pub trait DynStrategy: ObjectHooks {
    fn name_rule(&self) -> NameRule;
    /// Decodes into the typed object (collecting unknown fields), defaults it, encodes it back;
    /// an object that does not decode is handed back with the error.
    fn normalize(&self, obj: Value) -> Result<Normalized, Undecodable>;
    fn prepare_for_create(&self, obj: &mut Value) -> Result<(), DecodeError>;
    /// [`DynStrategy::prepare_for_create`] for a create made by `requester`; by default the
    /// user does not matter.
    fn prepare_for_create_by(&self, obj: &mut Value, _requester: &Requester<'_>) -> Result<(), DecodeError> {
        self.prepare_for_create(obj)
    }
    fn prepare_for_update(&self, new: &mut Value, old: &Value) -> Result<(), DecodeError>;
    /// Prepares an update made through `subresource`; by default nothing to do.
    fn prepare_for_subresource_update(
        &self,
        _subresource: &str,
        _new: &mut Value,
        _old: &Value,
    ) -> Result<(), DecodeError> {
        Ok(())
    }
    fn validate(&self, obj: &Value, old: Option<&Value>) -> Result<Vec<FieldError>, DecodeError>;
    /// As [`DynStrategy::validate`], adding to `warnings` what is reported but not enforced
    /// (custom resources: the errors ratcheted on update); by default, nothing.
    fn validate_warning(
        &self,
        obj: &Value,
        old: Option<&Value>,
        _warnings: &mut Vec<String>,
    ) -> Result<Vec<FieldError>, DecodeError> {
        self.validate(obj, old)
    }
    /// Validates an update made through `subresource`; by default as any update.
    fn validate_subresource(
        &self,
        _subresource: &str,
        obj: &Value,
        old: &Value,
    ) -> Result<Vec<FieldError>, DecodeError> {
        self.validate(obj, Some(old))
    }
}

/// Adapter from a typed [`Strategy`] to [`DynStrategy`].
pub struct Typed<S>(pub S);

fn decode<T: DeserializeOwned>(v: &Value) -> Result<T, DecodeError> {
    T::deserialize(v).map_err(|e| DecodeError(e.to_string()))
}

fn encode<S: Strategy>(s: &S, t: &S::Object) -> Result<Value, DecodeError> {
    let mut v = serde_json::to_value(t).map_err(|e| DecodeError(e.to_string()))?;
    s.encoded(&mut v);
    crate::meta::order_top_level(&mut v);
    Ok(v)
}

/// Decodes `v` into `T`, returning the dotted paths of every field `T` ignored.
pub fn decode_reporting_unknown<T: DeserializeOwned>(v: &Value) -> Result<(T, Vec<String>), DecodeError> {
    let mut unknown = Vec::new();
    let t: T =
        serde_ignored::deserialize(v, |path| unknown.push(dotted(&path))).map_err(|e| DecodeError(e.to_string()))?;
    Ok((t, unknown))
}

fn dotted(path: &serde_ignored::Path<'_>) -> String {
    use serde_ignored::Path as P;
    match path {
        P::Root => String::new(),
        P::Seq { parent, index } => format!("{}[{}]", dotted(parent), index),
        P::Map { parent, key } => {
            let p = dotted(parent);
            if p.is_empty() {
                key.to_string()
            } else {
                format!("{p}.{key}")
            }
        }
        P::Some { parent } | P::NewtypeStruct { parent } | P::NewtypeVariant { parent } => dotted(parent),
    }
}

impl<S: Strategy> DynStrategy for Typed<S> {
    fn name_rule(&self) -> NameRule {
        self.0.name_rule()
    }

    fn normalize(&self, obj: Value) -> Result<Normalized, Undecodable> {
        let (mut typed, unknown_fields): (S::Object, _) = match decode_reporting_unknown(&obj) {
            Ok(t) => t,
            Err(error) => return Err(Undecodable { error, object: obj }),
        };
        self.0.set_defaults(&mut typed);
        let object = encode(&self.0, &typed).map_err(|error| Undecodable { error, object: obj })?;
        Ok(Normalized { object, unknown_fields })
    }

    fn prepare_for_create(&self, obj: &mut Value) -> Result<(), DecodeError> {
        if !S::PREPARES {
            return Ok(());
        }
        let mut typed: S::Object = decode(obj)?;
        self.0.prepare_for_create(&mut typed);
        *obj = encode(&self.0, &typed)?;
        Ok(())
    }

    fn prepare_for_create_by(&self, obj: &mut Value, requester: &Requester<'_>) -> Result<(), DecodeError> {
        if !S::PREPARES {
            return Ok(());
        }
        let mut typed: S::Object = decode(obj)?;
        self.0.prepare_for_create(&mut typed);
        self.0.set_requester(&mut typed, requester);
        *obj = encode(&self.0, &typed)?;
        Ok(())
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) -> Result<(), DecodeError> {
        if !S::PREPARES {
            return Ok(());
        }
        let mut typed: S::Object = decode(new)?;
        let old: S::Object = decode(old)?;
        self.0.prepare_for_update(&mut typed, &old);
        *new = encode(&self.0, &typed)?;
        Ok(())
    }

    fn prepare_for_subresource_update(
        &self,
        subresource: &str,
        new: &mut Value,
        old: &Value,
    ) -> Result<(), DecodeError> {
        if !S::PREPARES_SUBRESOURCES {
            return Ok(());
        }
        let mut typed: S::Object = decode(new)?;
        let old: S::Object = decode(old)?;
        self.0.prepare_for_subresource_update(subresource, &mut typed, &old);
        *new = encode(&self.0, &typed)?;
        Ok(())
    }

    fn validate(&self, obj: &Value, old: Option<&Value>) -> Result<Vec<FieldError>, DecodeError> {
        let typed: S::Object = decode(obj)?;
        Ok(match old {
            None => self.0.validate(&typed),
            Some(old) => self.0.validate_update(&typed, &decode(old)?),
        })
    }

    fn validate_subresource(
        &self,
        subresource: &str,
        obj: &Value,
        old: &Value,
    ) -> Result<Vec<FieldError>, DecodeError> {
        let typed: S::Object = decode(obj)?;
        Ok(self.0.validate_subresource_update(subresource, &typed, &decode(old)?))
    }
}

/// Typed strategies answer the JSON hooks themselves.
impl<S: Strategy> ObjectHooks for Typed<S> {
    fn tracks_generation(&self) -> bool {
        self.0.tracks_generation()
    }

    fn generation_changed(&self, new: &Value, old: &Value) -> bool {
        self.0.generation_changed(new, old)
    }

    fn status_update_keeps_annotations(&self) -> bool {
        self.0.status_update_keeps_annotations()
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        self.0.selectable_fields()
    }

    fn field_value(&self, obj: &Value, field: &str) -> String {
        self.0.field_value(obj, field)
    }

    fn allow_create_on_update(&self) -> bool {
        self.0.allow_create_on_update()
    }

    fn on_delete(&self, old: &Value, opts: &DeleteOptions) -> DeletePlan {
        self.0.on_delete(old, opts)
    }

    fn deletion_held(&self, obj: &Value) -> bool {
        self.0.deletion_held(obj)
    }

    fn subresource_field(&self, subresource: &str) -> Option<&'static [&'static str]> {
        self.0.subresource_field(subresource)
    }
}

/// A strategy with no kind-specific rules, for kinds whose only rules are the generic ones.
pub struct Generic<T>(std::marker::PhantomData<fn() -> T>);

impl<T> Default for Generic<T> {
    fn default() -> Self {
        Generic(std::marker::PhantomData)
    }
}

impl<T: Serialize + DeserializeOwned + Clone + Send + Sync + 'static> Strategy for Generic<T> {
    type Object = T;
    const PREPARES: bool = false;
}

impl<T> ObjectHooks for Generic<T> {}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    #[test]
    fn normalize_reports_unknown_fields_with_dotted_paths() {
        let s = Typed(Generic::<ConfigMap>::default());
        let n = s
            .normalize(serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "a", "bogus": 1},
                "data": {"k": "v"}, "spec": {"foo": 1}
            }))
            .expect("decodes");
        assert_eq!(n.unknown_fields, vec!["metadata.bogus".to_string(), "spec".to_string()]);
        assert_eq!(n.object["data"]["k"], "v");
        assert!(n.object.get("spec").is_none());
    }

    struct ClearsData;
    impl Strategy for ClearsData {
        type Object = ConfigMap;
        fn prepare_for_create(&self, obj: &mut ConfigMap) {
            obj.data = None;
        }
    }
    impl ObjectHooks for ClearsData {}

    #[test]
    fn preparation_runs_unless_the_strategy_has_none() {
        let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "uid": "u"}, "data": {"k": "v"}});
        let mut prepared = cm.clone();
        Typed(ClearsData).prepare_for_create(&mut prepared).expect("prepare");
        assert!(prepared.get("data").is_none(), "{prepared}");
        // Generic has nothing to prepare: the object is left exactly as it was (no round trip).
        let mut untouched = cm.clone();
        Typed(Generic::<ConfigMap>::default()).prepare_for_create(&mut untouched).expect("prepare");
        Typed(Generic::<ConfigMap>::default()).prepare_for_update(&mut untouched, &cm).expect("prepare");
        assert_eq!(serde_json::to_string(&untouched).ok(), serde_json::to_string(&cm).ok());
    }
}
