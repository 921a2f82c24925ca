//! A policy's parameters: the resource its `paramKind` names (a built-in kind or a served
//! custom resource) and the objects a binding's `paramRef` picks from it, read from the store
//! at each request, so that editing a parameter object changes what the policy allows without
//! touching the policy (upstream's `generic.CollectParams`).

use crate::object;
use k1s_store::Store;
use serde_json::Value;

const CRDS: &str = "/registry/apiextensions.k8s.io/customresourcedefinitions/";

/// Where a `paramKind`'s objects are stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamResource {
    /// Storage prefix, ending in `/`.
    pub prefix: String,
    pub namespaced: bool,
    pub api_version: String,
    pub kind: String,
}

/// The resource of `param_kind` (`{apiVersion, kind}`), or upstream's configuration error.
pub fn resolve_kind(store: &Store, param_kind: &Value) -> Result<ParamResource, String> {
    let api_version = param_kind.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = param_kind.get("kind").and_then(Value::as_str).unwrap_or("");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let found = |prefix: String, namespaced: bool| ParamResource {
        prefix,
        namespaced,
        api_version: api_version.to_string(),
        kind: kind.to_string(),
    };
    if let Some(info) = k1s_api::resources::find_kind(group, version, kind) {
        return Ok(found(info.storage_prefix(), info.namespaced()));
    }
    let crds = store.list(CRDS, None, 0, None).map_err(|e| format!("reading CustomResourceDefinitions: {e}"))?;
    for kv in &crds.items {
        let Ok(crd) = serde_json::from_slice::<Value>(&kv.value) else { continue };
        let spec = &crd["spec"];
        let served = spec["versions"]
            .as_array()
            .is_some_and(|vs| vs.iter().any(|v| v["name"] == version && v["served"] != false));
        if spec["group"] == group && spec["names"]["kind"] == kind && served {
            let plural = spec["names"]["plural"].as_str().unwrap_or_default();
            return Ok(found(format!("/registry/{group}/{plural}/"), spec["scope"] == "Namespaced"));
        }
    }
    let gvk =
        if group.is_empty() { format!("/{version}, Kind={kind}") } else { format!("{group}/{version}, Kind={kind}") };
    Err(format!("failed to find resource referenced by paramKind: '{gvk}'"))
}

fn stored(kv: &k1s_store::KeyValue, res: &ParamResource) -> Option<Value> {
    let mut obj = object::from_storage(&kv.value, kv.mod_revision)?;
    // Stored objects carry their type; make sure CEL sees it.
    if let Some(m) = obj.as_object_mut() {
        m.entry("apiVersion").or_insert_with(|| Value::String(res.api_version.clone()));
        m.entry("kind").or_insert_with(|| Value::String(res.kind.clone()));
    }
    Some(obj)
}

/// The parameter objects a binding's `paramRef` picks, for a request in `namespace`: `[None]`
/// when the policy or the binding has no parameters; empty when none were found and
/// `parameterNotFoundAction` is `Allow` (the binding then does not validate).
pub fn collect(
    store: &Store,
    kind: Option<&Result<ParamResource, String>>,
    param_ref: Option<&Value>,
    namespace: Option<&str>,
) -> Result<Vec<Option<Value>>, String> {
    let (Some(kind), Some(pref)) = (kind, param_ref.filter(|p| !p.is_null())) else { return Ok(vec![None]) };
    let res = kind.as_ref().map_err(Clone::clone)?;
    let text = |k: &str| pref.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
    let prefix = if res.namespaced {
        let ns = text("namespace").or(namespace).ok_or_else(|| {
            "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources".to_string()
        })?;
        format!("{}{ns}/", res.prefix)
    } else if text("namespace").is_some() {
        return Err("paramRef.namespace must not be provided for a cluster-scoped `paramKind`".into());
    } else {
        res.prefix.clone()
    };
    let mut params = Vec::new();
    if let Some(name) = text("name") {
        if pref.get("selector").is_some_and(|s| !s.is_null()) {
            return Err("paramRef.name and paramRef.selector are mutually exclusive".into());
        }
        let kv = store.get(&format!("{prefix}{name}")).map_err(|e| e.to_string())?;
        params.extend(kv.and_then(|kv| stored(&kv, res)).map(Some));
    } else if let Some(sel) = pref.get("selector").filter(|s| !s.is_null()) {
        let selector = k1s_api::selectors::Selector::from_label_selector(sel).map_err(|e| e.to_string())?;
        let page = store.list(&prefix, None, 0, None).map_err(|e| e.to_string())?;
        for kv in &page.items {
            // A cluster-wide prefix lists only names; a namespaced one only this namespace.
            let Some(obj) = stored(kv, res) else { continue };
            if selector.matches_labels(obj.pointer("/metadata/labels")) {
                params.push(Some(obj));
            }
        }
    }
    if params.is_empty() && text("parameterNotFoundAction") == Some("Deny") {
        return Err("no params found for policy binding with `Deny` parameterNotFoundAction".into());
    }
    Ok(params)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().expect("tmp");
        let store = Store::open(dir.path(), k1s_store::StoreOptions::default()).expect("store");
        (dir, store)
    }

    async fn put(store: &Store, key: &str, v: Value) {
        store.create(key, serde_json::to_vec(&v).expect("json").into()).await.expect("write");
    }

    #[tokio::test]
    async fn params_by_name_by_selector_and_not_found_actions() {
        let (_d, store) = store();
        let cm = |name: &str, l: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default", "labels": {"tier": l}}, "data": {"max": "3"}});
        put(&store, "/registry/configmaps/default/limits", cm("limits", "a")).await;
        put(&store, "/registry/configmaps/default/other", cm("other", "b")).await;
        let kind = resolve_kind(&store, &json!({"apiVersion": "v1", "kind": "ConfigMap"}));
        assert_eq!(kind.as_ref().map(|k| (k.prefix.as_str(), k.namespaced)), Ok(("/registry/configmaps/", true)));
        let got = collect(&store, Some(&kind), Some(&json!({"name": "limits"})), Some("default")).expect("params");
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].as_ref().map(|p| p["data"]["max"].clone()), Some(json!("3")));
        let sel = json!({"selector": {"matchLabels": {"tier": "b"}}});
        assert_eq!(collect(&store, Some(&kind), Some(&sel), Some("default")).expect("params").len(), 1);
        let all = json!({"selector": {}});
        assert_eq!(collect(&store, Some(&kind), Some(&all), Some("default")).expect("params").len(), 2);
        let missing = json!({"name": "nope", "parameterNotFoundAction": "Allow"});
        assert!(collect(&store, Some(&kind), Some(&missing), Some("default")).expect("params").is_empty());
        let deny = json!({"name": "nope", "parameterNotFoundAction": "Deny"});
        assert_eq!(
            collect(&store, Some(&kind), Some(&deny), Some("default")),
            Err("no params found for policy binding with `Deny` parameterNotFoundAction".into())
        );
        assert!(collect(&store, Some(&kind), Some(&json!({"name": "limits"})), None).is_err());
        assert_eq!(collect(&store, None, Some(&json!({"name": "x"})), None), Ok(vec![None]));
        let unknown = resolve_kind(&store, &json!({"apiVersion": "example.com/v1", "kind": "Limits"}));
        assert_eq!(
            unknown,
            Err("failed to find resource referenced by paramKind: 'example.com/v1, Kind=Limits'".into())
        );
    }
}
