//! The catalog of custom resources served from the stored CustomResourceDefinitions: the
//! resource-table entries that request routing, discovery and printing consult after the
//! built-ins, rebuilt whole when a definition changes (by `custom_resources::run`).

use k1s_api::custom::resource_infos;
use k1s_api::openapi::V3Document;
use k1s_api::resources::ResourceInfo;
use k1s_store::Store;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

/// Where the definitions are stored.
pub(crate) const CRD_PREFIX: &str = "/registry/apiextensions.k8s.io/customresourcedefinitions/";

/// The entries of one stored definition, at the revision they were made from.
struct Definition {
    revision: u64,
    infos: Vec<&'static ResourceInfo>,
}

/// The served custom resources at one moment.
#[derive(Default)]
pub struct Catalog {
    by_crd: BTreeMap<String, Definition>,
    /// `/openapi/v3/apis/<group>/<version>` of each custom group-version.
    openapi: BTreeMap<String, V3Document>,
    /// The `/openapi/v3` index with the custom group-versions, when there are any.
    openapi_index: Option<Vec<u8>>,
}

impl Catalog {
    /// The OpenAPI v3 documents of the custom group-versions and the index listing them with
    /// the built-in ones.
    fn build_openapi(&mut self) {
        let mut by_gv: BTreeMap<(&str, &str), Vec<&'static ResourceInfo>> = BTreeMap::new();
        for r in self.all() {
            by_gv.entry((r.group, r.version)).or_default().push(r);
        }
        let api = k1s_api::openapi::get();
        // A custom resource of a built-in group-version is left out of its (built-in) document.
        let openapi: BTreeMap<String, V3Document> = by_gv
            .into_iter()
            .map(|((group, version), infos)| (format!("apis/{group}/{version}"), (group, version, infos)))
            .filter(|(path, _)| api.v3_document(path).is_none())
            .map(|(path, (group, version, infos))| (path, api.custom_v3_document(group, version, &infos)))
            .collect();
        self.openapi_index = (!openapi.is_empty())
            .then(|| {
                let mut index: Value = serde_json::from_slice(api.v3_index()).ok()?;
                let paths = index.get_mut("paths")?.as_object_mut()?;
                for (path, doc) in &openapi {
                    paths.insert(
                        path.clone(),
                        json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={}", doc.hash)}),
                    );
                }
                paths.sort_keys();
                serde_json::to_vec(&index).ok()
            })
            .flatten();
        self.openapi = openapi;
    }

    /// The `/openapi/v3` index: the built-in group-versions' and the custom ones'.
    pub fn openapi_index(&self) -> &[u8] {
        self.openapi_index.as_deref().unwrap_or_else(|| k1s_api::openapi::get().v3_index())
    }

    /// The document at `/openapi/v3/<path>`, built-in or custom.
    pub fn openapi_document(&self, path: &str) -> Option<&V3Document> {
        let path = path.trim_matches('/');
        k1s_api::openapi::get().v3_document(path).or_else(|| self.openapi.get(path))
    }

    pub fn find(&self, group: &str, version: &str, resource: &str) -> Option<&'static ResourceInfo> {
        self.all().find(|r| r.group == group && r.version == version && r.resource == resource)
    }

    pub fn all(&self) -> impl Iterator<Item = &'static ResourceInfo> + '_ {
        self.by_crd.values().flat_map(|d| d.infos.iter().copied())
    }

    /// The entries of the definition named `crd`.
    pub fn of(&self, crd: &str) -> &[&'static ResourceInfo] {
        self.by_crd.get(crd).map_or(&[], |d| &d.infos)
    }
}

/// The current catalog, replaced whole when a definition changes.
#[derive(Default)]
pub struct CustomResources {
    catalog: RwLock<Arc<Catalog>>,
}

impl CustomResources {
    pub fn current(&self) -> Arc<Catalog> {
        self.catalog.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Rebuilds the catalog from the stored definitions; the entries of a definition unchanged
    /// since the last rebuild are kept (they are made, and live on, once per revision).
    pub fn refresh(&self, store: &Store) {
        let page = match store.list(CRD_PREFIX, None, 0, None) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "listing CustomResourceDefinitions failed");
                return;
            }
        };
        let old = self.current();
        let mut next = Catalog::default();
        for kv in page.items {
            let Some(crd) = crate::object::from_storage(&kv.value, kv.mod_revision) else { continue };
            let name = crate::object::name(&crd).to_string();
            if let Some(d) = old.by_crd.get(&name).filter(|d| d.revision == kv.mod_revision) {
                next.by_crd.insert(name, Definition { revision: d.revision, infos: d.infos.clone() });
                continue;
            }
            let infos = resource_infos(&crd);
            for w in k1s_api::custom::take_definition_warnings() {
                tracing::warn!(warning = %w, "a CustomResourceDefinition validation rule that does not compile is left out");
            }
            match infos {
                Ok(infos) => {
                    let infos = infos
                        .into_iter()
                        // A definition never shadows a built-in resource.
                        .filter(|i| k1s_api::resources::find(i.group, i.version, i.resource).is_none())
                        .map(|i| &*Box::leak(Box::new(i)))
                        .collect();
                    next.by_crd.insert(name, Definition { revision: kv.mod_revision, infos });
                }
                Err(e) => tracing::warn!(error = %e, "a CustomResourceDefinition cannot be served"),
            }
        }
        next.build_openapi();
        *self.catalog.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(next);
    }
}
