//! List (and the selectors a watch shares): paging with `limit`/`continue` at one consistent
//! revision, label and field selectors, the kind's selectable fields from its strategy.

use super::Registry;
use crate::error::{from_store, ApiError};
use crate::object;
use k1s_api::selectors::Selector;
use k1s_api::ResourceInfo;
use k1s_store::StoreError;
use serde_json::{json, Value};

/// Options of a list or watch.
#[derive(Clone, Debug, Default)]
pub struct ListOptions {
    pub label_selector: Selector,
    pub field_selector: Selector,
    pub limit: usize,
    pub continue_token: Option<String>,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
}

pub struct ListPage {
    pub items: Vec<Value>,
    pub resource_version: u64,
    pub continue_token: Option<String>,
    pub remaining: Option<i64>,
}

/// Checks a field selector only uses supported labels.
pub fn check_field_selector(info: &ResourceInfo, sel: &Selector) -> Result<(), ApiError> {
    for r in &sel.requirements {
        if r.key != "metadata.name"
            && r.key != "metadata.namespace"
            && !info.strategy.selectable_fields().contains(&r.key.as_str())
        {
            return Err(ApiError::bad_request(format!("field label not supported: {}", r.key)));
        }
    }
    Ok(())
}

/// Whether `obj` matches a field selector.
pub fn matches_fields(info: &ResourceInfo, sel: &Selector, obj: &Value) -> bool {
    if sel.is_empty() {
        return true;
    }
    let get = |k: &str| -> Option<String> {
        match k {
            "metadata.name" => Some(object::name(obj).to_string()),
            "metadata.namespace" => Some(object::namespace(obj).unwrap_or("").to_string()),
            _ => Some(info.strategy.field_value(obj, k)),
        }
    };
    sel.requirements.iter().all(|r| r.matches(&get))
}

pub fn matches(info: &ResourceInfo, opts: &ListOptions, obj: &Value) -> bool {
    opts.label_selector.matches_labels(object::meta(obj).and_then(|m| m.get("labels")))
        && matches_fields(info, &opts.field_selector, obj)
}

fn continue_token(rv: u64, start: &str) -> String {
    use base64::Engine as _;
    let raw = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": start}).to_string();
    base64::engine::general_purpose::URL_SAFE.encode(raw)
}

/// The revision and start key of a `continue` token; 400 for one this server did not make.
pub fn parse_continue(token: &str) -> Result<(u64, String), ApiError> {
    use base64::Engine as _;
    let bad = || {
        ApiError::bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        )
    };
    let raw = base64::engine::general_purpose::URL_SAFE.decode(token).map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    let rv = v.get("rv").and_then(Value::as_u64).ok_or_else(bad)?;
    let start = v.get("start").and_then(Value::as_str).ok_or_else(bad)?.to_string();
    if start.contains("..") || start.starts_with('/') {
        return Err(bad());
    }
    Ok((rv, start))
}

impl Registry {
    /// Lists objects, paging with `limit`/`continue` at one consistent revision.
    pub fn list(
        &self,
        info: &'static ResourceInfo,
        namespace: Option<&str>,
        opts: &ListOptions,
    ) -> Result<ListPage, ApiError> {
        check_field_selector(info, &opts.field_selector)?;
        let prefix = match (info.namespaced(), namespace) {
            (true, Some(ns)) => format!("{}{}/", info.storage_prefix(), ns),
            _ => info.storage_prefix(),
        };
        let mut limit = opts.limit;
        let (mut at, mut start_after) = (None, None);
        if let Some(tok) = opts.continue_token.as_deref().filter(|t| !t.is_empty()) {
            let (rv, start) = parse_continue(tok)?;
            at = Some(rv);
            start_after = Some(format!("{prefix}{start}"));
        } else {
            match (opts.resource_version.as_deref(), opts.resource_version_match.as_deref()) {
                (Some("0"), _) => limit = 0,
                (Some(rv), Some("Exact")) => {
                    at = Some(
                        rv.parse::<u64>()
                            .map_err(|_| ApiError::bad_request(format!("invalid resource version \"{rv}\"")))?,
                    )
                }
                (Some(rv), _) if !rv.is_empty() => {
                    let want = rv
                        .parse::<u64>()
                        .map_err(|_| ApiError::bad_request(format!("invalid resource version \"{rv}\"")))?;
                    let cur = self.store.current_revision();
                    if want > cur {
                        return Err(ApiError::timeout(format!("Too large resource version: {want}, current: {cur}")));
                    }
                }
                _ => {}
            }
        }
        let filtering = !opts.label_selector.is_empty() || !opts.field_selector.is_empty();
        let mut items = Vec::new();
        let mut revision;
        let mut more;
        let mut last_key: Option<String> = None;
        loop {
            let chunk = if limit == 0 {
                0
            } else if filtering {
                (limit - items.len()).max(64)
            } else {
                limit - items.len()
            };
            let page = self.store.list(&prefix, start_after.as_deref(), chunk, at).map_err(|e| match e {
                StoreError::Compacted { .. } if opts.continue_token.is_some() => ApiError::gone(
                    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
                ),
                other => from_store(other, info, ""),
            })?;
            revision = page.revision;
            at = Some(revision);
            more = page.more;
            for (i, kv) in page.items.iter().enumerate() {
                let obj = Self::decode_kv(info, kv)?;
                if !filtering || matches(info, opts, &obj) {
                    items.push(obj);
                }
                last_key = Some(kv.key.clone());
                if limit != 0 && items.len() >= limit {
                    if i + 1 < page.items.len() {
                        more = true;
                    }
                    break;
                }
            }
            if limit == 0 || items.len() >= limit || !more {
                break;
            }
            start_after = last_key.clone();
        }
        let continue_token = match (more, &last_key) {
            (true, Some(k)) => Some(continue_token(revision, k.strip_prefix(&prefix).unwrap_or(k))),
            _ => None,
        };
        Ok(ListPage { items, resource_version: revision, continue_token, remaining: None })
    }
}
