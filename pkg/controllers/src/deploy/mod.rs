//! The manifests deployer (k3s's deploy controller): every `*.yaml`, `*.yml` and `*.json` in a
//! folder (`<data-dir>/server/manifests`) is applied at start and whenever the folder changes,
//! by server-side apply with the field manager `k1s-deploy`.
//!
//! - Namespaces, then CustomResourceDefinitions, then everything else; objects of a CRD wait
//!   until it is Established.
//! - Each file is tracked by a `k1s.io/v1 Addon` in kube-system (named after the file, like
//!   k3s's Addons): `spec.source`, `spec.checksum` and `status.objects`, the objects it applied.
//!   An object no file asks for any more (its file deleted, or the object taken out of it) is
//!   deleted. A file that fails keeps what it applied before.
//! - `NAME.yaml.skip` disables `NAME.yaml`: it is neither applied nor pruned.
//! - An invalid file (or an object the API refuses) is a Warning Event on its Addon and a log
//!   line naming the file and the error; the other files still apply, and a failed apply is
//!   retried with back-off.
//!
//! It reaches the API only through its client, as any controller.

mod folder;
mod watch;

pub use folder::{addon_name, checksum, parse, scan, File, Scan, ScanError};
pub use watch::{FolderWatch, WatchError};

use k1s_runtime::events::{EventType, Recorder};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams};
use kube::discovery::Scope;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The field manager of everything the deployer applies.
pub const FIELD_MANAGER: &str = "k1s-deploy";
/// Where the Addons live.
pub const ADDON_NAMESPACE: &str = "kube-system";
const ADDON_GROUP: &str = "k1s.io";
const ADDON_VERSION: &str = "v1";
const ADDON_KIND: &str = "Addon";
const ADDON_PLURAL: &str = "addons";
/// How long one pass waits for the CRDs it applied to be Established.
const ESTABLISHED_TIMEOUT: Duration = Duration::from_secs(10);
/// Changes closer together than this are taken in one pass (an editor writes, renames, chmods).
const QUIET: Duration = Duration::from_millis(100);
/// Retrying a pass in which something failed.
const RETRY: k1s_runtime::backoff::Backoff =
    k1s_runtime::backoff::Backoff { base: Duration::from_secs(1), max: Duration::from_secs(60) };

#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    #[error("watching the manifests folder")]
    Watch(#[from] WatchError),
}

/// Why one pass could not run at all (single files failing do not stop it).
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error(transparent)]
    Scan(#[from] ScanError),
    #[error("listing the Addons in {ADDON_NAMESPACE}")]
    ListAddons(#[source] kube::Error),
}

/// An object a file applied, as its Addon records it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Applied {
    pub api_version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}

/// Identity of an object across versions of its kind: group, kind, namespace, name.
type Key = (String, String, Option<String>, String);

impl Applied {
    fn group(&self) -> &str {
        group_of(&self.api_version)
    }
    fn key(&self) -> Key {
        (self.group().to_owned(), self.kind.clone(), self.namespace.clone(), self.name.clone())
    }
    fn priority(&self) -> u8 {
        priority(&self.api_version, &self.kind)
    }
    fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}

fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

/// Namespaces first, then CRDs, then the rest (deletion runs the other way).
fn priority(api_version: &str, kind: &str) -> u8 {
    match (group_of(api_version), kind) {
        ("", "Namespace") => 0,
        ("apiextensions.k8s.io", "CustomResourceDefinition") => 1,
        _ => 2,
    }
}

fn priority_of(obj: &Value) -> u8 {
    let s = |k: &str| obj.get(k).and_then(Value::as_str).unwrap_or_default();
    priority(s("apiVersion"), s("kind"))
}

/// An Addon as read back: what its file applied last time.
#[derive(Debug, Default)]
struct AddonState {
    checksum: String,
    objects: Vec<Applied>,
}

fn addon_state(obj: &DynamicObject) -> AddonState {
    let checksum = obj.data.pointer("/spec/checksum").and_then(Value::as_str).unwrap_or_default().to_owned();
    let objects = obj
        .data
        .pointer("/status/objects")
        .and_then(|o| serde_json::from_value::<Vec<Applied>>(o.clone()).ok())
        .unwrap_or_default();
    AddonState { checksum, objects }
}

/// The `k1s.io/v1 Addon` definition.
fn addon_crd() -> Value {
    let string = json!({"type": "string"});
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{ADDON_PLURAL}.{ADDON_GROUP}")},
        "spec": {
            "group": ADDON_GROUP,
            "names": {"kind": ADDON_KIND, "listKind": "AddonList", "plural": ADDON_PLURAL, "singular": "addon"},
            "scope": "Namespaced",
            "versions": [{
                "name": ADDON_VERSION, "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "description": "A manifest file of the manifests folder and the objects it applied (k1s's deployer).",
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object", "properties": {
                            "source": {"description": "The manifest file.", "type": "string"},
                            "checksum": {"description": "sha256 of the file as last applied.", "type": "string"},
                        }},
                        "status": {"type": "object", "properties": {
                            "objects": {"description": "The objects the file applied.", "type": "array", "items": {
                                "type": "object",
                                "properties": {"apiVersion": string, "kind": string, "namespace": string, "name": string},
                            }},
                        }},
                    },
                }},
                "additionalPrinterColumns": [
                    {"name": "Source", "type": "string", "jsonPath": ".spec.source"},
                    {"name": "Checksum", "type": "string", "jsonPath": ".spec.checksum", "priority": 1},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ],
            }],
        },
    })
}

fn addon_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(ADDON_GROUP, ADDON_VERSION, ADDON_KIND), ADDON_PLURAL)
}

/// A failed request, in words: the API's own message when it answered.
fn message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) if !s.message.is_empty() => s.message.clone(),
        e => k1s_api::errors::chain(e),
    }
}

/// The server has no such kind (its group/version or the kind is not served).
fn is_missing_kind(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Discovery(kube::error::DiscoveryError::MissingKind(_)))
        || k1s_runtime::api_error::is_not_found(e)
}

/// What one file came to in a pass.
struct Outcome {
    applied: Vec<Applied>,
    errors: Vec<String>,
}

/// Per-pass discovery cache: (apiVersion, kind) ▶ resource and scope.
#[derive(Default)]
struct Kinds(HashMap<(String, String), (ApiResource, Scope)>);

/// The deployer of one folder.
pub struct Deployer {
    client: kube::Client,
    recorder: Recorder,
    dir: PathBuf,
}

impl Deployer {
    pub fn new(client: kube::Client, dir: &Path) -> Deployer {
        let recorder = Recorder::new(client.clone(), "k1s-deploy", None);
        Deployer { client, recorder, dir: dir.to_path_buf() }
    }

    fn addons(&self) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), ADDON_NAMESPACE, &addon_resource())
    }

    /// Watches the folder and applies it until `cancel` fires; `first_pass` is told when the
    /// folder has been applied once (successfully or not).
    pub async fn run(
        self,
        first_pass: Option<tokio::sync::oneshot::Sender<()>>,
        cancel: CancellationToken,
    ) -> Result<(), DeployError> {
        // Watching starts before the first read, so no change falls in between.
        let mut watch = FolderWatch::new(&self.dir)?;
        let mut first_pass = first_pass;
        let mut failures = 0u32;
        let mut addon_crd = false;
        loop {
            let failed = match self.prepare_and_sync(&mut addon_crd).await {
                Ok(0) => false,
                Ok(files) => {
                    tracing::debug!(files, "manifests not (fully) applied; retrying");
                    true
                }
                Err(e) => {
                    tracing::warn!(dir = %self.dir.display(), error = %k1s_api::errors::chain(&*e), "applying the manifests folder failed; retrying");
                    true
                }
            };
            if let Some(tx) = first_pass.take() {
                let _ = tx.send(());
            }
            let retry = if failed {
                failures = failures.saturating_add(1);
                RETRY.delay(failures - 1)
            } else {
                failures = 0;
                Duration::from_secs(3600)
            };
            tokio::select! {
                _ = cancel.cancelled() => return Ok(()),
                changed = watch.changed() => {
                    changed?;
                    // Take the burst of events one write makes as one change.
                    loop {
                        tokio::select! {
                            _ = cancel.cancelled() => return Ok(()),
                            more = watch.changed() => more?,
                            _ = tokio::time::sleep(QUIET) => break,
                        }
                    }
                }
                _ = tokio::time::sleep(retry), if failed => {}
            }
        }
    }

    /// Makes sure the Addon resource exists (once per run, and again after a pass failed), then
    /// applies the folder.
    async fn prepare_and_sync(&self, addon_crd: &mut bool) -> Result<usize, Box<dyn std::error::Error + Send + Sync>> {
        if !*addon_crd {
            self.ensure_addon_crd().await?;
            *addon_crd = true;
        }
        match self.sync().await {
            Ok(failed) => Ok(failed),
            Err(e) => {
                *addon_crd = false;
                Err(e.into())
            }
        }
    }

    /// Applies the Addon definition and waits until it is Established.
    async fn ensure_addon_crd(&self) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let crd = addon_crd();
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let name = format!("{ADDON_PLURAL}.{ADDON_GROUP}");
        api.patch(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&crd)).await?;
        self.established(&name).await.map_err(|e| format!("the Addon resource: {e}"))?;
        Ok(())
    }

    /// Waits (a bounded time) until the CRD `name` is Established.
    async fn established(&self, name: &str) -> Result<(), String> {
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let cond = kube::runtime::wait::conditions::is_crd_established();
        match tokio::time::timeout(ESTABLISHED_TIMEOUT, kube::runtime::wait::await_condition(api, name, cond)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(format!("waiting for CustomResourceDefinition {name} to be Established: {e}")),
            Err(_) => Err(format!(
                "CustomResourceDefinition {name} is not Established after {}s",
                ESTABLISHED_TIMEOUT.as_secs()
            )),
        }
    }

    /// One pass over the folder. Returns how many files (or deletions) failed in a way worth
    /// retrying: objects the API refused, not files that do not parse.
    pub async fn sync(&self) -> Result<usize, SyncError> {
        let scan = folder::scan(&self.dir)?;
        let existing: BTreeMap<String, AddonState> = self
            .addons()
            .list(&ListParams::default())
            .await
            .map_err(SyncError::ListAddons)?
            .items
            .iter()
            .filter_map(|a| Some((a.metadata.name.clone()?, addon_state(a))))
            .collect();
        let mut outcomes: Vec<Outcome> = scan
            .files
            .iter()
            .map(|f| Outcome { applied: Vec::new(), errors: f.objects.as_ref().err().cloned().into_iter().collect() })
            .collect();

        // Everything the valid files ask for, in apply order.
        let mut queue: Vec<(usize, &Value)> = Vec::new();
        for (i, f) in scan.files.iter().enumerate() {
            if let Ok(objects) = &f.objects {
                queue.extend(objects.iter().map(|o| (i, o)));
            }
        }
        queue.sort_by_key(|(_, o)| priority_of(o));
        let split = queue.partition_point(|(_, o)| priority_of(o) < 2);
        let (first, rest) = queue.split_at(split);
        let mut kinds = Kinds::default();
        let mut crds = Vec::new();
        for &(i, obj) in first {
            match self.apply(obj, &mut kinds).await {
                Ok((a, live)) => {
                    if a.priority() == 1 && !established(&live) {
                        crds.push((i, a.name.clone(), obj));
                    }
                    outcomes[i].applied.push(a);
                }
                Err(e) => outcomes[i].errors.push(e),
            }
        }
        // (group, kind) of CRDs that did not become Established: their objects wait.
        let mut unready = BTreeSet::new();
        for (i, name, obj) in crds {
            if let Err(e) = self.established(&name).await {
                outcomes[i].errors.push(e);
                let s = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or_default().to_owned();
                unready.insert((s("/spec/group"), s("/spec/names/kind")));
            }
        }
        for &(i, obj) in rest {
            let s = |k: &str| obj.get(k).and_then(Value::as_str).unwrap_or_default();
            if unready.contains(&(group_of(s("apiVersion")).to_owned(), s("kind").to_owned())) {
                outcomes[i].errors.push(format!(
                    "{} {}: its CustomResourceDefinition is not Established",
                    s("kind"),
                    name_of(obj)
                ));
                continue;
            }
            match self.apply(obj, &mut kinds).await {
                Ok((a, _)) => outcomes[i].applied.push(a),
                Err(e) => outcomes[i].errors.push(e),
            }
        }

        // What each Addon tracks now: a file that failed keeps what it had.
        let mut tracked: BTreeMap<String, Vec<Applied>> = BTreeMap::new();
        for (f, o) in scan.files.iter().zip(&outcomes) {
            let mut objects = o.applied.clone();
            if !o.errors.is_empty() {
                objects.extend(existing.get(&f.addon).map(|a| a.objects.clone()).unwrap_or_default());
            }
            tracked.insert(f.addon.clone(), objects);
        }
        for name in &scan.skipped {
            if let Some(a) = existing.get(name) {
                tracked.insert(name.clone(), a.objects.clone());
            }
        }
        let stale = stale(&existing, &tracked);
        let mut failed_deletes = 0;
        for (obj, owners) in stale {
            match self.delete(&obj, &mut kinds).await {
                Ok(()) => {
                    tracing::info!(object = %obj.describe(), addons = ?owners, "deleted an object no manifest asks for any more")
                }
                Err(e) => {
                    failed_deletes += 1;
                    tracing::warn!(object = %obj.describe(), error = %e, "deleting an object no manifest asks for failed; retrying");
                    // Still tracked, so that a later pass deletes it.
                    for owner in owners {
                        tracked.entry(owner).or_default().push(obj.clone());
                    }
                }
            }
        }

        // Record the Addons, then what happened to each file.
        let mut failed_files = 0;
        for (f, o) in scan.files.iter().zip(&outcomes) {
            let objects = tracked.remove(&f.addon).unwrap_or_default();
            let addon = self.write_addon(&f.addon, &f.path, &f.checksum, objects).await;
            let reference = addon.as_ref().ok().map(|a| {
                k1s_runtime::events::reference_to(&format!("{ADDON_GROUP}/{ADDON_VERSION}"), ADDON_KIND, &a.metadata)
            });
            if let Err(e) = &addon {
                failed_files += 1;
                tracing::warn!(file = %f.path.display(), addon = %f.addon, error = %message(e), "recording the manifest's Addon failed");
            }
            if !o.errors.is_empty() {
                // An unparsable file waits for its next change; a refused object is retried.
                if f.objects.is_ok() {
                    failed_files += 1;
                }
                let error = o.errors.join("; ");
                let reason = if f.objects.is_err() { "InvalidManifest" } else { "ApplyManifestFailed" };
                tracing::warn!(file = %f.path.display(), error = %error, "manifest not (fully) applied");
                if let Some(r) = &reference {
                    self.recorder.record(r, EventType::Warning, reason, &format!("{}: {error}", f.name)).await;
                }
            } else if existing.get(&f.addon).is_none_or(|a| a.checksum != f.checksum) {
                tracing::info!(file = %f.path.display(), objects = o.applied.len(), "applied manifest");
                if let Some(r) = &reference {
                    let msg = format!("applied {} object(s) from {}", o.applied.len(), f.name);
                    self.recorder.record(r, EventType::Normal, "AppliedManifest", &msg).await;
                }
            }
        }
        // Addons of skipped files stay; those whose file is gone go once their objects are gone.
        for name in existing.keys().filter(|n| !scan.files.iter().any(|f| &&f.addon == n) && !scan.skipped.contains(*n))
        {
            match tracked.remove(name) {
                Some(left) if !left.is_empty() => {
                    let path = self.dir.join("(removed)");
                    if let Err(e) = self.write_addon(name, &path, "", left).await {
                        tracing::warn!(addon = %name, error = %message(&e), "recording a removed manifest's Addon failed");
                    }
                }
                _ => match self.addons().delete(name, &DeleteParams::default()).await {
                    Ok(_) => tracing::info!(addon = %name, "manifest removed: deleted its Addon"),
                    Err(e) if k1s_runtime::api_error::is_not_found(&e) => {}
                    Err(e) => {
                        failed_deletes += 1;
                        tracing::warn!(addon = %name, error = %message(&e), "deleting the Addon of a removed manifest failed");
                    }
                },
            }
        }
        Ok(failed_files + failed_deletes)
    }

    async fn kind(
        &self,
        api_version: &str,
        kind: &str,
        kinds: &mut Kinds,
    ) -> Result<(ApiResource, Scope), kube::Error> {
        let key = (api_version.to_owned(), kind.to_owned());
        if let Some(found) = kinds.0.get(&key) {
            return Ok(found.clone());
        }
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (ar, caps) = kube::discovery::pinned_kind(&self.client, &gvk).await?;
        kinds.0.insert(key, (ar.clone(), caps.scope.clone()));
        Ok((ar, caps.scope))
    }

    /// Server-side applies one object (forcing conflicts: the file is the source of truth).
    async fn apply(&self, obj: &Value, kinds: &mut Kinds) -> Result<(Applied, DynamicObject), String> {
        let s = |k: &str| obj.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
        let (api_version, kind, name) = (s("apiVersion"), s("kind"), name_of(obj));
        let what = |e: String| format!("{kind} {name}: {e}");
        let (ar, scope) = self.kind(&api_version, &kind, kinds).await.map_err(|e| {
            if is_missing_kind(&e) {
                what(format!("the server has no resource of kind {kind} in {api_version}"))
            } else {
                what(message(&e))
            }
        })?;
        let mut obj = obj.clone();
        let namespace = match scope {
            Scope::Namespaced => {
                let ns = obj.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("default").to_owned();
                if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.insert("namespace".into(), Value::String(ns.clone()));
                }
                Some(ns)
            }
            Scope::Cluster => {
                if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.remove("namespace");
                }
                None
            }
        };
        let api: Api<DynamicObject> = match &namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &ar),
            None => Api::all_with(self.client.clone(), &ar),
        };
        let live =
            api.patch(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&obj)).await.map_err(|e| {
                match &namespace {
                    Some(ns) => format!("{kind} {ns}/{name}: {}", message(&e)),
                    None => what(message(&e)),
                }
            })?;
        Ok((Applied { api_version, kind, namespace, name }, live))
    }

    /// Deletes one object a file no longer asks for; an object (or kind) already gone is fine.
    async fn delete(&self, obj: &Applied, kinds: &mut Kinds) -> Result<(), String> {
        let (ar, _) = match self.kind(&obj.api_version, &obj.kind, kinds).await {
            Ok(found) => found,
            Err(e) if is_missing_kind(&e) => return Ok(()),
            Err(e) => return Err(message(&e)),
        };
        let api: Api<DynamicObject> = match &obj.namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &ar),
            None => Api::all_with(self.client.clone(), &ar),
        };
        match api.delete(&obj.name, &DeleteParams::background()).await {
            Ok(_) => Ok(()),
            Err(e) if k1s_runtime::api_error::is_not_found(&e) => Ok(()),
            Err(e) => Err(message(&e)),
        }
    }

    async fn write_addon(
        &self,
        name: &str,
        source: &Path,
        checksum: &str,
        mut objects: Vec<Applied>,
    ) -> Result<DynamicObject, kube::Error> {
        objects.sort();
        objects.dedup_by_key(|o| o.key());
        let addon = json!({
            "apiVersion": format!("{ADDON_GROUP}/{ADDON_VERSION}"),
            "kind": ADDON_KIND,
            "metadata": {"name": name, "namespace": ADDON_NAMESPACE,
                         "labels": {"app.kubernetes.io/managed-by": FIELD_MANAGER}},
            "spec": {"source": source.display().to_string(), "checksum": checksum},
            "status": {"objects": objects},
        });
        self.addons().patch(name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&addon)).await
    }
}

/// The objects Addons recorded that no file asks for now (`tracked`), each with the Addons that
/// had it, in deletion order: custom objects and the like first, CRDs next, Namespaces last.
fn stale(
    existing: &BTreeMap<String, AddonState>,
    tracked: &BTreeMap<String, Vec<Applied>>,
) -> Vec<(Applied, Vec<String>)> {
    let wanted: BTreeSet<Key> = tracked.values().flatten().map(Applied::key).collect();
    let mut stale: BTreeMap<Key, (Applied, Vec<String>)> = BTreeMap::new();
    for (addon, state) in existing {
        for obj in state.objects.iter().filter(|o| !wanted.contains(&o.key())) {
            stale.entry(obj.key()).or_insert_with(|| (obj.clone(), Vec::new())).1.push(addon.clone());
        }
    }
    let mut stale: Vec<_> = stale.into_values().collect();
    stale.sort_by_key(|(a, _)| std::cmp::Reverse(a.priority()));
    stale
}

/// A CRD (as the API returned it) that is Established already.
fn established(crd: &DynamicObject) -> bool {
    crd.data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Established" && c["status"] == "True"))
}

fn name_of(obj: &Value) -> String {
    obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_come_first_then_crds_then_the_rest() {
        let obj = |v: &str, k: &str| json!({"apiVersion": v, "kind": k, "metadata": {"name": "x"}});
        let mut objs = [
            obj("example.com/v1", "Widget"),
            obj("v1", "ConfigMap"),
            obj("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
            obj("v1", "Namespace"),
        ];
        objs.sort_by_key(priority_of);
        let kinds: Vec<_> = objs.iter().map(|o| o["kind"].as_str().unwrap_or_default()).collect();
        assert_eq!(kinds, ["Namespace", "CustomResourceDefinition", "Widget", "ConfigMap"]);
    }

    #[test]
    fn an_object_is_the_same_across_versions_of_its_kind() {
        let a = |v: &str| Applied { api_version: v.into(), kind: "Widget".into(), namespace: None, name: "w".into() };
        assert_eq!(a("example.com/v1").key(), a("example.com/v1beta1").key());
        assert_ne!(a("example.com/v1").key(), a("other.com/v1").key());
    }

    fn applied(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> Applied {
        Applied {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.map(Into::into),
            name: name.into(),
        }
    }

    #[test]
    fn objects_no_file_asks_for_are_stale_but_one_moved_to_another_file_is_not() {
        let ns = applied("v1", "Namespace", None, "app");
        let crd = applied("apiextensions.k8s.io/v1", "CustomResourceDefinition", None, "widgets.example.com");
        let widget = applied("example.com/v1", "Widget", Some("app"), "w");
        let moved = applied("v1", "ConfigMap", Some("default"), "moved");
        let kept = applied("v1", "ConfigMap", Some("default"), "kept");
        let existing = BTreeMap::from([
            (
                "a".to_owned(),
                AddonState {
                    checksum: String::new(),
                    objects: vec![ns.clone(), crd.clone(), moved.clone(), kept.clone()],
                },
            ),
            ("gone".to_owned(), AddonState { checksum: String::new(), objects: vec![widget.clone(), moved.clone()] }),
        ]);
        // File a now holds only `kept`; file b took `moved` (at another version of its kind);
        // the file of Addon `gone` was removed.
        let mut moved_v2 = moved.clone();
        moved_v2.api_version = "v2".into();
        let tracked = BTreeMap::from([("a".to_owned(), vec![kept]), ("b".to_owned(), vec![moved_v2])]);
        let stale = stale(&existing, &tracked);
        let order: Vec<_> = stale.iter().map(|(a, owners)| (a.describe(), owners.clone())).collect();
        assert_eq!(
            order,
            [
                ("Widget app/w".to_owned(), vec!["gone".to_owned()]),
                ("CustomResourceDefinition widgets.example.com".to_owned(), vec!["a".to_owned()]),
                ("Namespace app".to_owned(), vec!["a".to_owned()]),
            ]
        );
    }

    #[test]
    fn addons_read_back_what_they_recorded() {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "k1s.io/v1", "kind": "Addon", "metadata": {"name": "dns", "namespace": "kube-system"},
            "spec": {"source": "/x/dns.yaml", "checksum": "sha256:ab"},
            "status": {"objects": [{"apiVersion": "v1", "kind": "Service", "namespace": "kube-system", "name": "kube-dns"}]},
        }))
        .expect("addon");
        let state = addon_state(&obj);
        assert_eq!(state.checksum, "sha256:ab");
        assert_eq!(state.objects[0].describe(), "Service kube-system/kube-dns");
    }
}
