//! Watch: newline-delimited `WatchEvent` JSON streamed over a chunked response, from a
//! resourceVersion, with initial events, selectors (with match transitions), bookmarks and
//! 410 Expired.

use crate::error::ApiError;
use crate::object;
use crate::registry::{self, ListOptions, Registry};
use crate::table::{self, IncludeObject};
use bytes::Bytes;
use k1s_api::{conversion, ResourceInfo};
use k1s_store::{Event, EventKind, StoreError};
use serde_json::{json, Value};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub struct WatchParams {
    pub namespace: Option<String>,
    pub list: ListOptions,
    pub allow_bookmarks: bool,
    /// `Some(true)`: send ADDED for current state then an initial-events-end bookmark.
    pub send_initial_events: Option<bool>,
    pub timeout: Duration,
    /// Answer with one-row Tables instead of objects.
    pub table: Option<(&'static str, IncludeObject)>,
    /// Send each object as a PartialObjectMetadata of this apiVersion.
    pub metadata: Option<&'static str>,
    pub bookmark_interval: Duration,
}

struct Encoder {
    info: &'static ResourceInfo,
    table: Option<(&'static str, IncludeObject)>,
    /// PartialObjectMetadata's apiVersion, for a metadata-only watch.
    metadata: Option<&'static str>,
    columns_sent: bool,
}

impl Encoder {
    fn frame(&mut self, kind: &str, obj: Value) -> Bytes {
        let obj = match (self.table, self.metadata, kind) {
            (Some((av, inc)), _, "ADDED" | "MODIFIED" | "DELETED") => {
                let with_columns = !self.columns_sent;
                self.columns_sent = true;
                table::build(
                    self.info,
                    std::slice::from_ref(&obj),
                    inc,
                    av,
                    with_columns,
                    json!({
                        "resourceVersion": object::resource_version(&obj).unwrap_or("")
                    }),
                )
            }
            (None, Some(av), "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK") => object::partial_metadata(&obj, av),
            _ => obj,
        };
        let mut line = serde_json::to_vec(&json!({"type": kind, "object": obj})).unwrap_or_default();
        line.push(b'\n');
        Bytes::from(line)
    }

    /// A frame for an event's stored object, without decoding more of it than its metadata.
    /// The object with its resourceVersion is the same for every watcher of the event: the
    /// first one to frame it encodes it for all (the event's memo).
    fn raw_frame(&self, kind: &str, ev: &Event) -> Option<Bytes> {
        let obj: Bytes = match self.metadata {
            Some(av) => object::stored_partial_metadata(&ev.kv.value, ev.revision, av)?.into(),
            None => {
                ev.encoded.get_or_init(|| object::storage_json_with_rv(&ev.kv.value, ev.revision).map(Bytes::from))?
            }
        };
        let mut line = Vec::with_capacity(obj.len() + kind.len() + 24);
        line.extend_from_slice(b"{\"type\":\"");
        line.extend_from_slice(kind.as_bytes());
        line.extend_from_slice(b"\",\"object\":");
        line.extend_from_slice(&obj);
        line.extend_from_slice(b"}\n");
        Some(Bytes::from(line))
    }

    fn bookmark(&mut self, rv: u64, initial_end: bool) -> Bytes {
        let mut md = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            md["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj = json!({"kind": self.info.kind, "apiVersion": self.info.api_version(), "metadata": md});
        self.frame("BOOKMARK", obj)
    }
}

/// The event an update is for a watcher with selectors, from whether the object matched
/// before and whether it matches now.
fn transition(was: bool, is: bool) -> Option<&'static str> {
    match (was, is) {
        (true, true) => Some("MODIFIED"),
        (false, true) => Some("ADDED"),
        (true, false) => Some("DELETED"),
        (false, false) => None,
    }
}

fn expired(requested: u64, compacted: u64) -> Value {
    ApiError::gone(format!("too old resource version: {requested} ({compacted})")).status()
}

/// Validates the request and starts streaming; the returned receiver yields the body chunks.
pub fn start(
    registry: std::sync::Arc<Registry>,
    info: &'static ResourceInfo,
    params: WatchParams,
    cancel: CancellationToken,
) -> Result<mpsc::Receiver<Bytes>, ApiError> {
    registry::check_field_selector(info, &params.list.field_selector)?;
    if params.send_initial_events == Some(true) {
        if !params.allow_bookmarks {
            return Err(ApiError::invalid(
                "meta.k8s.io",
                "ListOptions",
                "",
                &[k1s_api::FieldError::forbidden(
                    "allowWatchBookmarks",
                    "allowWatchBookmarks required when sendInitialEvents is true",
                )],
            ));
        }
        if params.list.resource_version_match.as_deref() != Some("NotOlderThan") {
            return Err(ApiError::invalid(
                "meta.k8s.io",
                "ListOptions",
                "",
                &[k1s_api::FieldError::forbidden(
                    "resourceVersionMatch",
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                )],
            ));
        }
    }
    let start_rv = match params.list.resource_version.as_deref() {
        None | Some("") | Some("0") => None,
        Some(s) => {
            Some(s.parse::<u64>().map_err(|_| ApiError::bad_request(format!("invalid resource version \"{s}\"")))?)
        }
    };
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    tokio::spawn(async move {
        if let Err(e) = run(registry, info, params, start_rv, tx, cancel).await {
            tracing::debug!(error = %e, resource = info.resource, "watch ended");
        }
    });
    Ok(rx)
}

#[derive(Debug, thiserror::Error)]
enum WatchEnd {
    #[error("client went away")]
    Gone,
    #[error(transparent)]
    Api(#[from] ApiError),
}

async fn run(
    registry: std::sync::Arc<Registry>,
    info: &'static ResourceInfo,
    params: WatchParams,
    start_rv: Option<u64>,
    tx: mpsc::Sender<Bytes>,
    cancel: CancellationToken,
) -> Result<(), WatchEnd> {
    let mut enc = Encoder { info, table: params.table, metadata: params.metadata, columns_sent: false };
    let send = |b: Bytes| {
        let tx = tx.clone();
        async move { tx.send(b).await.map_err(|_| WatchEnd::Gone) }
    };
    let ns = params.namespace.as_deref();
    let prefix = match (info.namespaced(), ns) {
        (true, Some(ns)) => format!("{}{}/", info.storage_prefix(), ns),
        _ => info.storage_prefix(),
    };
    // Initial state: for sendInitialEvents=true, or a watch without a resourceVersion
    // (unless sendInitialEvents=false), ADDED events for what exists now.
    let initial = match (params.send_initial_events, start_rv) {
        (Some(true), _) => true,
        (Some(false), _) => false,
        (None, None) => true,
        (None, Some(_)) => false,
    };
    let from = if initial {
        let page = registry.list(
            info,
            ns,
            &ListOptions { limit: 0, continue_token: None, resource_version: None, ..params.list.clone() },
        )?;
        for obj in page.items {
            send(enc.frame("ADDED", obj)).await?;
        }
        if params.send_initial_events == Some(true) {
            send(enc.bookmark(page.resource_version, true)).await?;
        }
        page.resource_version
    } else {
        match start_rv {
            Some(rv) => rv,
            None => registry.store.current_revision(),
        }
    };
    let mut watcher = match registry.store.watch(&prefix, from) {
        Ok(w) => w,
        Err(StoreError::Compacted { requested, compacted }) => {
            send(enc.frame("ERROR", expired(requested, compacted))).await?;
            return Ok(());
        }
        Err(e) => return Err(WatchEnd::Api(crate::error::from_store(e, info, ""))),
    };
    let deadline = tokio::time::sleep(params.timeout);
    tokio::pin!(deadline);
    let mut bookmarks = tokio::time::interval(params.bookmark_interval);
    bookmarks.tick().await;
    let filter = Filter::new(info, &params.list);
    loop {
        tokio::select! {
            _ = &mut deadline => return Ok(()),
            _ = cancel.cancelled() => return Ok(()),
            _ = tx.closed() => return Err(WatchEnd::Gone),
            _ = bookmarks.tick(), if params.allow_bookmarks => {
                send(enc.bookmark(watcher.revision(), false)).await?;
            }
            ev = watcher.next() => {
                // The events of one commit arrive together: they go out as one chunk (one
                // frame and one write) instead of one each.
                let mut frames: Vec<Bytes> = Vec::new();
                let mut size = 0;
                let mut ev = ev;
                let failed = loop {
                    match ev {
                        Ok(e) => {
                            if let Some(frame) = enc.event(&e, &filter) {
                                size += frame.len();
                                frames.push(frame);
                            }
                        }
                        Err(e) => break Some(e),
                    }
                    if size >= MAX_CHUNK {
                        break None;
                    }
                    ev = match watcher.try_next() {
                        Ok(Some(e)) => Ok(e),
                        Ok(None) => break None,
                        Err(e) => Err(e),
                    };
                };
                match frames.len() {
                    0 => {}
                    1 => send(frames.swap_remove(0)).await?,
                    _ => send(Bytes::from(frames.concat())).await?,
                }
                match failed {
                    None => {}
                    Some(StoreError::Compacted { requested, compacted }) => {
                        send(enc.frame("ERROR", expired(requested, compacted))).await?;
                        return Ok(());
                    }
                    Some(e) => return Err(WatchEnd::Api(crate::error::from_store(e, info, ""))),
                }
            }
        }
    }
}

/// Up to this many bytes of events that are ready together go out in one chunk.
const MAX_CHUNK: usize = 256 * 1024;

/// Which events a watch with selectors sends.
struct Filter<'a> {
    info: &'static ResourceInfo,
    list: &'a ListOptions,
    filtering: bool,
    /// The top-level fields the selectors read.
    selected: Vec<String>,
    /// Only a field selector on `metadata.name`/`metadata.namespace` (the root-CA publisher's
    /// watch of every ConfigMap): those two strings are all that is read, and the store key
    /// holds both, after this prefix.
    names_only: Option<String>,
}

impl<'a> Filter<'a> {
    fn new(info: &'static ResourceInfo, list: &'a ListOptions) -> Self {
        let mut selected = vec!["metadata".to_string()];
        for r in &list.field_selector.requirements {
            let top = r.key.split('.').next().unwrap_or_default().to_string();
            if !selected.contains(&top) {
                selected.push(top);
            }
        }
        let filtering = !list.label_selector.is_empty() || !list.field_selector.is_empty();
        let names_only = (list.label_selector.is_empty()
            && list
                .field_selector
                .requirements
                .iter()
                .all(|r| matches!(r.key.as_str(), "metadata.name" | "metadata.namespace")))
        .then(|| info.storage_prefix());
        Filter { info, list, filtering, selected, names_only }
    }

    /// Whether the object stored under `key` matches, decoding only the fields the selectors
    /// read (none when they read only the name and namespace, which the key holds).
    fn stored_matches(&self, key: &str, stored: &[u8]) -> bool {
        if !self.filtering {
            return true;
        }
        let obj = match &self.names_only {
            Some(prefix) => self.key_names(prefix, key).or_else(|| object::stored_names(stored)),
            None => object::partial_from_storage(stored, &self.selected),
        };
        obj.is_some_and(|o| registry::matches(self.info, self.list, &o))
    }

    /// `{"metadata":{"name":…,"namespace":…}}` from a key of [`Registry::key`](registry::Registry::key)'s
    /// form: the prefix, then the namespace and `/` for a namespaced resource, then the name.
    fn key_names(&self, prefix: &str, key: &str) -> Option<Value> {
        let rest = key.strip_prefix(prefix)?;
        let (namespace, name) = if self.info.namespaced() {
            let (ns, name) = rest.split_once('/')?;
            (Some(ns), name)
        } else {
            (None, rest)
        };
        if name.is_empty() || name.contains('/') {
            return None;
        }
        Some(object::names_object(Some(name), namespace))
    }

    fn matches(&self, obj: &Option<Value>) -> bool {
        !self.filtering || obj.as_ref().is_some_and(|o| registry::matches(self.info, self.list, o))
    }
}

impl Encoder {
    /// The frame a store event makes for this watch, if the watch is to see it.
    fn event(&mut self, ev: &Event, f: &Filter) -> Option<Bytes> {
        // Stored bytes are framed as they are unless they must be converted to the version
        // watched (a metadata-only watch sends no version-specific fields).
        let convert = conversion::converts(self.info) && self.metadata.is_none();
        if self.table.is_none() && !convert {
            // Most watches: plain objects, framed from the stored bytes.
            let kind = match ev.kind {
                EventKind::Create => f.stored_matches(&ev.kv.key, &ev.kv.value).then_some("ADDED"),
                EventKind::Update => {
                    let was = !f.filtering || ev.prev.as_ref().is_some_and(|p| f.stored_matches(&p.key, &p.value));
                    transition(was, f.stored_matches(&ev.kv.key, &ev.kv.value))
                }
                EventKind::Delete => f.stored_matches(&ev.kv.key, &ev.kv.value).then_some("DELETED"),
            };
            return kind.and_then(|k| self.raw_frame(k, ev));
        }
        let cur = object::from_storage(&ev.kv.value, ev.revision).and_then(|o| {
            if !convert {
                return Some(o);
            }
            conversion::convert(o, self.info, self.info.version)
                .map_err(|e| tracing::warn!(key = %ev.kv.key, error = %e, "converting a watched object failed"))
                .ok()
        });
        // The previous state matters only for selector transitions.
        let prev = match ev.kind {
            EventKind::Update if f.filtering => {
                ev.prev.as_ref().and_then(|p| object::from_storage(&p.value, ev.revision))
            }
            _ => None,
        };
        let kind = match ev.kind {
            EventKind::Create => f.matches(&cur).then_some("ADDED"),
            EventKind::Update => transition(f.matches(&prev), f.matches(&cur)),
            EventKind::Delete => f.matches(&cur).then_some("DELETED"),
        };
        Some(self.frame(kind?, cur?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k1s_api::selectors::Selector;

    fn opts(fields: &str) -> ListOptions {
        ListOptions { field_selector: Selector::parse_fields(fields).expect("selector"), ..Default::default() }
    }

    #[test]
    fn watchers_of_one_event_share_its_encoding() {
        let configmaps = k1s_api::resources::find("", "v1", "configmaps").expect("configmaps");
        let stored = bytes::Bytes::from_static(
            br#"{"kind":"ConfigMap","metadata":{"name":"a","namespace":"d"},"data":{"k":"v"}}"#,
        );
        let kv = k1s_store::KeyValue {
            key: "/registry/configmaps/d/a".into(),
            value: stored.clone(),
            create_revision: 7,
            mod_revision: 7,
            version: 1,
        };
        let ev = k1s_store::Event::new(7, EventKind::Create, kv, None);
        let list = ListOptions::default();
        let filter = Filter::new(configmaps, &list);
        let mut plain = Encoder { info: configmaps, table: None, metadata: None, columns_sent: false };
        let mut other = Encoder { info: configmaps, table: None, metadata: None, columns_sent: false };
        let first = plain.event(&ev, &filter).expect("frame");
        let shared = ev.encoded.get_or_init(|| None).expect("the first watcher encoded the object for all");
        let second = other.event(&ev, &filter).expect("frame");
        assert_eq!(first, second);
        let want = object::storage_json_with_rv(&stored, 7).expect("stamped");
        assert_eq!(shared.as_ref(), want.as_slice());
        assert_eq!(first.as_ref(), [br#"{"type":"ADDED","object":"#.as_slice(), &want, b"}\n"].concat().as_slice());
        // A metadata-only watcher frames its own, smaller object.
        let mut meta = Encoder { info: configmaps, table: None, metadata: Some("meta.k8s.io/v1"), columns_sent: false };
        let partial = meta.event(&ev, &filter).expect("frame");
        assert!(!String::from_utf8_lossy(&partial).contains("\"data\""));
    }

    #[test]
    fn name_and_namespace_selectors_read_the_key_as_the_stored_object_would_answer() {
        let configmaps = k1s_api::resources::find("", "v1", "configmaps").expect("configmaps");
        let namespaces = k1s_api::resources::find("", "v1", "namespaces").expect("namespaces");
        let cm = |ns: &str, name: &str| {
            let key = format!("/registry/configmaps/{ns}/{name}");
            let stored = format!(r#"{{"kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"{ns}"}}}}"#);
            (key, stored)
        };
        let cases = [
            ("metadata.name=kube-root-ca.crt", "default", "kube-root-ca.crt", true),
            ("metadata.name=kube-root-ca.crt", "default", "kube-root-ca.crt-2", false),
            ("metadata.name!=a,metadata.namespace=dev", "dev", "b", true),
            ("metadata.name!=a,metadata.namespace=dev", "dev", "a", false),
            ("metadata.namespace=dev", "default", "b", false),
        ];
        for (sel, ns, name, want) in cases {
            let list = opts(sel);
            let f = Filter::new(configmaps, &list);
            assert!(f.names_only.is_some(), "{sel}");
            let (key, stored) = cm(ns, name);
            assert_eq!(f.stored_matches(&key, stored.as_bytes()), want, "{sel} {key}");
            // The same answer as decoding the stored object.
            let decoded = object::stored_names(stored.as_bytes()).expect("names");
            assert_eq!(registry::matches(configmaps, &list, &decoded), want, "{sel} {key}");
        }
        // A key of another form falls back to the stored bytes.
        let list = opts("metadata.name=x");
        let f = Filter::new(configmaps, &list);
        assert!(f.stored_matches("/elsewhere", br#"{"metadata":{"name":"x","namespace":"d"}}"#));
        assert!(!f.stored_matches("/elsewhere", br#"{"metadata":{"name":"y","namespace":"d"}}"#));
        // Cluster-scoped: the name is all of the key after the prefix.
        let list = opts("metadata.name=dev");
        let f = Filter::new(namespaces, &list);
        assert!(f.stored_matches("/registry/namespaces/dev", b"{}"));
        assert!(!f.stored_matches("/registry/namespaces/prod", b"{}"));
        // Other fields still decode the object.
        let list = opts("data.key=v");
        assert!(Filter::new(configmaps, &list).names_only.is_none());
    }
}
