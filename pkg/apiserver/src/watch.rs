//! Watch: newline-delimited `WatchEvent` JSON streamed over a chunked response, from a
//! resourceVersion, with initial events, selectors (with match transitions), bookmarks and
//! 410 Expired.

use crate::error::ApiError;
use crate::object;
use crate::registry::{self, ListOptions, Registry};
use crate::table::{self, IncludeObject};
use bytes::Bytes;
use k1s_api::ResourceInfo;
use k1s_store::{EventKind, StoreError};
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
    pub bookmark_interval: Duration,
}

struct Encoder {
    info: &'static ResourceInfo,
    table: Option<(&'static str, IncludeObject)>,
    columns_sent: bool,
}

impl Encoder {
    fn frame(&mut self, kind: &str, obj: Value) -> Bytes {
        let obj = match (self.table, kind) {
            (Some((av, inc)), "ADDED" | "MODIFIED" | "DELETED") => {
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
            _ => obj,
        };
        let mut line = serde_json::to_vec(&json!({"type": kind, "object": obj})).unwrap_or_default();
        line.push(b'\n');
        Bytes::from(line)
    }

    /// A frame for a stored object, without decoding more of it than its metadata.
    fn raw_frame(&self, kind: &str, stored: &[u8], revision: u64) -> Option<Bytes> {
        let obj = object::storage_json_with_rv(stored, revision)?;
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
    #[error("{0}")]
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
    let mut enc = Encoder { info, table: params.table, columns_sent: false };
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
    let filtering = !params.list.label_selector.is_empty() || !params.list.field_selector.is_empty();
    // The top-level fields the selectors read.
    let mut selected = vec!["metadata".to_string()];
    for r in &params.list.field_selector.requirements {
        let top = r.key.split('.').next().unwrap_or_default().to_string();
        if !selected.contains(&top) {
            selected.push(top);
        }
    }
    loop {
        tokio::select! {
            _ = &mut deadline => return Ok(()),
            _ = cancel.cancelled() => return Ok(()),
            _ = tx.closed() => return Err(WatchEnd::Gone),
            _ = bookmarks.tick(), if params.allow_bookmarks => {
                send(enc.bookmark(watcher.revision(), false)).await?;
            }
            ev = watcher.next() => {
                let ev = match ev {
                    Ok(ev) => ev,
                    Err(StoreError::Compacted { requested, compacted }) => {
                        send(enc.frame("ERROR", expired(requested, compacted))).await?;
                        return Ok(());
                    }
                    Err(e) => return Err(WatchEnd::Api(crate::error::from_store(e, info, ""))),
                };
                if enc.table.is_none() {
                    // Most watches: plain objects, framed from the stored bytes. Selectors are
                    // matched on the top-level fields they read, decoded alone.
                    let m = |stored: &[u8]| {
                        !filtering
                            || object::partial_from_storage(stored, &selected)
                                .is_some_and(|o| registry::matches(info, &params.list, &o))
                    };
                    let kind = match ev.kind {
                        EventKind::Create => m(&ev.kv.value).then_some("ADDED"),
                        EventKind::Update => {
                            let was = !filtering || ev.prev.as_ref().is_some_and(|p| m(&p.value));
                            transition(was, m(&ev.kv.value))
                        }
                        EventKind::Delete => m(&ev.kv.value).then_some("DELETED"),
                    };
                    if let Some(frame) = kind.and_then(|k| enc.raw_frame(k, &ev.kv.value, ev.revision)) {
                        send(frame).await?;
                    }
                    continue;
                }
                let cur = object::from_storage(&ev.kv.value, ev.revision);
                // The previous state matters only for selector transitions.
                let prev = match ev.kind {
                    EventKind::Update if filtering => ev.prev.as_ref().and_then(|p| object::from_storage(&p.value, ev.revision)),
                    _ => None,
                };
                let m = |o: &Option<Value>| !filtering || o.as_ref().is_some_and(|o| registry::matches(info, &params.list, o));
                let kind = match ev.kind {
                    EventKind::Create => m(&cur).then_some("ADDED"),
                    EventKind::Update => transition(m(&prev), m(&cur)),
                    EventKind::Delete => m(&cur).then_some("DELETED"),
                };
                if let (Some(kind), Some(obj)) = (kind, cur) {
                    send(enc.frame(kind, obj)).await?;
                }
            }
        }
    }
}
