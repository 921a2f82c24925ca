//! The server-side merge (upstream `mergeMap` / `mergeSlice` with `MergeParallelList` and
//! `IgnoreUnmatchedNulls` set): directive handling, schema navigation and list merging.
//!
//! The original is merged in place (it is the caller's private copy); the patch is only borrowed
//! and its parts are cloned where they land in the result.

use serde_json::{Map, Value};

use super::errors::{self, MAP_TYPE, SLICE_TYPE};
use super::order::{self, Kind, ListIndex, LiveWindow};
use super::{PatchError, SchemaLookup};

const DIRECTIVE: &str = "$patch";
const DELETE: &str = "delete";
const REPLACE: &str = "replace";
const MERGE: &str = "merge";
const RETAIN_KEYS_STRATEGY: &str = "retainKeys";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList";
const SET_ELEMENT_ORDER: &str = "$setElementOrder";

const MERGE_KEY_EXTENSION: &str = "x-kubernetes-patch-merge-key";
const STRATEGY_EXTENSION: &str = "x-kubernetes-patch-strategy";

fn invalid(message: impl Into<String>) -> PatchError {
    PatchError::Invalid(message.into())
}

/// Whether a list item is a `{"$patch": "delete", ...}` element.
pub(super) fn is_delete_item(item: &Value) -> bool {
    item.get(DIRECTIVE).and_then(Value::as_str) == Some(DELETE)
}

/// The patch metadata of one field, from its OpenAPI extensions.
#[derive(Clone, Copy, Default)]
struct PatchMeta<'a> {
    /// The strategy other than `retainKeys` (`merge`, `replace` or empty).
    strategy: &'a str,
    merge_key: &'a str,
}

impl<'a> PatchMeta<'a> {
    fn of(field: Option<&'a Value>) -> Result<Self, PatchError> {
        let Some(field) = field else {
            return Ok(PatchMeta::default());
        };
        let merge_key = field.get(MERGE_KEY_EXTENSION).and_then(Value::as_str).unwrap_or("");
        let strategy = match field.get(STRATEGY_EXTENSION).and_then(Value::as_str) {
            Some(spec) => other_strategy(spec)?,
            None => "",
        };
        Ok(PatchMeta { strategy, merge_key })
    }
}

/// Separates `retainKeys` from the other strategy (upstream `extractRetainKeysPatchStrategy`).
fn other_strategy(spec: &str) -> Result<&str, PatchError> {
    let parts: Vec<&str> = spec.split(',').collect();
    match parts.as_slice() {
        [single] if *single == RETAIN_KEYS_STRATEGY => Ok(""),
        [single] => Ok(single),
        [first, second] if *first == RETAIN_KEYS_STRATEGY => Ok(second),
        [first, second] if *second == RETAIN_KEYS_STRATEGY => Ok(first),
        _ => Err(invalid(format!("unexpected patch strategy: [{}]", parts.join(" ")))),
    }
}

/// Splits `$directive/field` into `field`.
fn extract_key<'k>(key: &'k str, prefix: &str) -> Result<&'k str, PatchError> {
    match key.split_once('/') {
        Some((head, rest)) if head == prefix => Ok(rest),
        _ if prefix == DELETE_FROM_PRIMITIVE_LIST => Err(invalid(errors::BAD_PRIMITIVE_LIST)),
        _ => Err(invalid(errors::BAD_SET_ELEMENT_ORDER)),
    }
}

/// A copy of a patch value fit to land in the result: maps carrying `$patch` vanish (also inside
/// lists), and with `drop_nulls` so do null map entries (upstream `removeDirectives` after
/// `discardNullValuesFromPatch`). `None` means the value itself vanishes.
fn without_directives(value: &Value, drop_nulls: bool) -> Option<Value> {
    match value {
        Value::Object(map) => {
            let directive = map.get(DIRECTIVE).is_some_and(|d| !(drop_nulls && d.is_null()));
            if directive {
                return None;
            }
            let mut out = Map::new();
            for (key, item) in map {
                if drop_nulls && item.is_null() {
                    continue;
                }
                if let Some(item) = without_directives(item, drop_nulls) {
                    out.insert(key.clone(), item);
                }
            }
            Some(Value::Object(out))
        }
        Value::Array(items) => {
            Some(Value::Array(items.iter().filter_map(|item| without_directives(item, drop_nulls)).collect()))
        }
        other => Some(other.clone()),
    }
}

fn has_directive(item: &Value) -> bool {
    item.as_object().is_some_and(|map| map.contains_key(DIRECTIVE))
}

fn as_list(value: Option<&Value>) -> Result<Option<&[Value]>, PatchError> {
    match value {
        None => Ok(None),
        Some(Value::Array(items)) => Ok(Some(items)),
        Some(other) => Err(invalid(errors::bad_arg_type(SLICE_TYPE, other))),
    }
}

/// Applies a `$retainKeys` directive: every patch field must be listed, and original fields that
/// are not listed are cleared.
fn apply_retain_keys(original: &mut Map<String, Value>, patch: &Map<String, Value>) -> Result<(), PatchError> {
    let Some(directive) = patch.get(RETAIN_KEYS) else {
        return Ok(());
    };
    let Some(retained) = directive.as_array() else {
        return Err(invalid(errors::BAD_RETAIN_KEYS));
    };
    let is_retained = |key: &str| retained.iter().any(|item| item.as_str() == Some(key));
    for (key, value) in patch {
        if key == RETAIN_KEYS
            || value.is_null()
            || key.starts_with(DELETE_FROM_PRIMITIVE_LIST)
            || key.starts_with(SET_ELEMENT_ORDER)
        {
            continue;
        }
        if !is_retained(key) {
            return Err(invalid(errors::BAD_RETAIN_KEYS));
        }
    }
    original.retain(|key, _| is_retained(key));
    Ok(())
}

/// Checks that the patch list's items appear in the `$setElementOrder` list in the same relative
/// order (upstream `validatePatchWithSetOrderList`).
fn validate_set_order(patch_list: &[Value], order: &[Value], merge_key: &str) -> Result<(), PatchError> {
    if order.is_empty() || patch_list.is_empty() {
        return Ok(());
    }
    let mut kept = Vec::with_capacity(patch_list.len());
    for item in patch_list {
        if merge_key.is_empty() {
            kept.push(item);
        } else if !item.is_object() {
            return Err(invalid(errors::bad_arg_type(MAP_TYPE, item)));
        } else if !is_delete_item(item) {
            kept.push(item);
        }
    }
    let (mut p, mut o) = (0, 0);
    while p < kept.len() && o < order.len() {
        if has_directive(kept[p]) {
            p += 1;
            continue;
        }
        if merge_key_values_equal(kept[p], &order[o], merge_key)? {
            p += 1;
        }
        o += 1;
    }
    if p < kept.len() && o >= order.len() {
        return Err(invalid(format!(
            "The order in patch list:\n{}\n doesn't match {SET_ELEMENT_ORDER} list:\n{}\n",
            super::gofmt::v_list(patch_list),
            super::gofmt::v_list(order)
        )));
    }
    Ok(())
}

fn merge_key_values_equal(left: &Value, right: &Value, merge_key: &str) -> Result<bool, PatchError> {
    if merge_key.is_empty() {
        return Ok(left == right);
    }
    let Value::Object(left) = left else {
        return Err(invalid(errors::bad_arg_type(MAP_TYPE, left)));
    };
    let Value::Object(right) = right else {
        return Err(invalid(errors::bad_arg_type(MAP_TYPE, right)));
    };
    let Some(l) = left.get(merge_key) else {
        return Err(invalid(errors::no_merge_key(left, merge_key)));
    };
    let Some(r) = right.get(merge_key) else {
        return Err(invalid(errors::no_merge_key(right, merge_key)));
    };
    Ok(l == r)
}

/// Upstream's `LookupPatchMeta` over OpenAPI schemas; `None` schemas carry no information.
pub(super) struct Merger<'a> {
    pub(super) lookup: &'a dyn SchemaLookup,
}

impl<'a> Merger<'a> {
    fn field(&self, schema: Option<&'a Value>, key: &str) -> Option<&'a Value> {
        let schema = schema?;
        if let Some(field) = schema.get("properties").and_then(|properties| properties.get(key)) {
            return Some(field);
        }
        schema.get("additionalProperties").filter(|extra| extra.is_object())
    }

    /// The schema and patch metadata of the map-valued field `key`.
    fn lookup_map(
        &self,
        schema: Option<&'a Value>,
        key: &str,
    ) -> Result<(Option<&'a Value>, PatchMeta<'a>), PatchError> {
        let field = self.field(schema, key);
        Ok((field.map(|field| self.lookup.resolve(field)), PatchMeta::of(field)?))
    }

    /// The element schema and patch metadata of the list-valued field `key`.
    fn lookup_list(
        &self,
        schema: Option<&'a Value>,
        key: &str,
    ) -> Result<(Option<&'a Value>, PatchMeta<'a>), PatchError> {
        let field = self.field(schema, key);
        // A field without `items` (a pointer to a struct upstream) describes its elements itself.
        let items = field.map(|field| self.lookup.resolve(field)).map(|list| match list.get("items") {
            Some(items) => self.lookup.resolve(items),
            None => list,
        });
        Ok((items, PatchMeta::of(field)?))
    }

    /// Merges `patch` into `original` (upstream `mergeMap`).
    pub(super) fn merge_map(
        &self,
        original: &mut Map<String, Value>,
        patch: &Map<String, Value>,
        schema: Option<&'a Value>,
    ) -> Result<(), PatchError> {
        if let Some(directive) = patch.get(DIRECTIVE) {
            return match directive.as_str() {
                Some(REPLACE) => {
                    *original = patch
                        .iter()
                        .filter(|(key, _)| key.as_str() != DIRECTIVE)
                        .map(|(key, value)| (key.clone(), value.clone()))
                        .collect();
                    Ok(())
                }
                Some(DELETE) => {
                    original.clear();
                    Ok(())
                }
                _ => Err(invalid(errors::bad_patch_type(directive, patch))),
            };
        }

        apply_retain_keys(original, patch)?;
        let ordered = self.merge_ordered_lists(original, patch, schema)?;

        for (key, patch_value) in patch {
            if key == RETAIN_KEYS || key.starts_with(SET_ELEMENT_ORDER) || ordered.contains(&key.as_str()) {
                continue;
            }
            let (key, is_delete_list) = if key.starts_with(DELETE_FROM_PRIMITIVE_LIST) {
                let field = extract_key(key, DELETE_FROM_PRIMITIVE_LIST)?;
                (if field.is_empty() { key.as_str() } else { field }, true)
            } else {
                (key.as_str(), false)
            };
            self.merge_field(original, key, patch_value, schema, is_delete_list)?;
        }
        Ok(())
    }

    /// Merges one patch entry into `original[key]`.
    fn merge_field(
        &self,
        original: &mut Map<String, Value>,
        key: &str,
        patch_value: &Value,
        schema: Option<&'a Value>,
        is_delete_list: bool,
    ) -> Result<(), PatchError> {
        if patch_value.is_null() {
            original.shift_remove(key);
            return Ok(());
        }
        let Some(current) = original.get_mut(key) else {
            if !is_delete_list {
                if let Some(value) = without_directives(patch_value, true) {
                    original.insert(key.to_owned(), value);
                }
            }
            return Ok(());
        };
        if order::kind_of(current) != order::kind_of(patch_value) {
            if !is_delete_list {
                match without_directives(patch_value, true) {
                    Some(value) => *current = value,
                    None => {
                        original.shift_remove(key);
                    }
                }
            }
            return Ok(());
        }
        match (current, patch_value) {
            (Value::Object(current_map), Value::Object(patch_map)) => {
                let (field_schema, meta) = self.lookup_map(schema, key)?;
                if meta.strategy == REPLACE {
                    *current_map = patch_map.clone();
                } else {
                    self.merge_map(current_map, patch_map, field_schema)?;
                }
            }
            (Value::Array(current_list), Value::Array(patch_list)) => {
                let (item_schema, meta) = self.lookup_list(schema, key)?;
                if meta.strategy == MERGE || is_delete_list {
                    let taken = std::mem::take(current_list);
                    *current_list =
                        self.merge_list(taken, patch_list, item_schema, meta.merge_key, is_delete_list, None)?;
                } else {
                    current_list.clone_from(patch_list);
                }
            }
            (current, _) => *current = patch_value.clone(),
        }
        Ok(())
    }

    /// Processes every `$setElementOrder/<field>` directive together with `<field>` (upstream
    /// `mergePatchIntoOriginal`), returning the fields whose patch lists it consumed.
    fn merge_ordered_lists<'p>(
        &self,
        original: &mut Map<String, Value>,
        patch: &'p Map<String, Value>,
        schema: Option<&'a Value>,
    ) -> Result<Vec<&'p str>, PatchError> {
        let mut consumed = Vec::new();
        for (directive_key, order_value) in patch {
            if !directive_key.starts_with(SET_ELEMENT_ORDER) {
                continue;
            }
            let Value::Array(order_list) = order_value else {
                return Err(invalid(errors::bad_arg_type(SLICE_TYPE, order_value)));
            };
            let key = extract_key(directive_key, SET_ELEMENT_ORDER)?;
            let original_list = as_list(original.get(key))?;
            let patch_list = as_list(patch.get(key))?;
            let (item_schema, meta) = self.lookup_list(schema, key)?;
            let merge_key = meta.merge_key;
            validate_set_order(patch_list.unwrap_or_default(), order_list, merge_key)?;
            if original_list.is_none() && patch_list.is_none() {
                continue;
            }

            // What the ordering needs from the live list, taken before it is merged.
            let live = original_list.unwrap_or_default();
            let kind = order::element_kind(&[live, patch_list.unwrap_or_default()]);
            let mut live_order = ListIndex::new(live, merge_key);

            let merged = match (original.get_mut(key), patch_list) {
                (Some(Value::Array(current)), None) => std::mem::take(current),
                (Some(Value::Array(current)), Some(patch_list)) => {
                    let taken = std::mem::take(current);
                    if meta.strategy == MERGE {
                        let mut window = LiveWindow::new(&taken, merge_key);
                        let merged =
                            self.merge_list(taken, patch_list, item_schema, merge_key, false, Some(&mut window))?;
                        live_order = live_order.with_window(window);
                        merged
                    } else {
                        patch_list.to_vec()
                    }
                }
                (_, Some(patch_list)) => patch_list.iter().filter_map(|item| without_directives(item, false)).collect(),
                (_, None) => continue,
            };

            let order_index = ListIndex::new(order_list, merge_key);
            let (patch_items, server_only) = if merge_key.is_empty() {
                order::partition_primitives(merged, &order_index)
            } else {
                order::partition_maps(merged, &order_index, merge_key)?
            };
            let ordered = order::normalize(patch_items, server_only, &order_index, &live_order, merge_key, kind?)?;
            original.insert(key.to_owned(), Value::Array(ordered));
            consumed.push(key);
        }
        Ok(consumed)
    }

    /// Merges a patch list into a list with merge semantics (upstream `mergeSlice`). `window`
    /// records the in-place changes upstream's callers can observe (see [`LiveWindow`]).
    fn merge_list(
        &self,
        original: Vec<Value>,
        patch: &[Value],
        item_schema: Option<&'a Value>,
        merge_key: &str,
        is_delete_list: bool,
        mut window: Option<&mut LiveWindow>,
    ) -> Result<Vec<Value>, PatchError> {
        if original.is_empty() && patch.is_empty() {
            return Ok(original);
        }
        let kind = order::element_kind(&[&original, patch])?;

        if kind != Kind::Object {
            if is_delete_list {
                return Ok(order::delete_from_slice(original, patch));
            }
            let live_order = ListIndex::new(&original, merge_key);
            let merged = order::union(original, patch);
            let patch_order = ListIndex::new(patch, merge_key);
            let (patch_items, server_only) = if merge_key.is_empty() {
                order::partition_primitives(merged, &patch_order)
            } else {
                order::partition_maps(merged, &patch_order, merge_key)?
            };
            return order::normalize(patch_items, server_only, &patch_order, &live_order, merge_key, kind);
        }

        if merge_key.is_empty() {
            return Err(invalid(format!("cannot merge lists without merge key for {}", type_word(item_schema))));
        }

        // Elements carrying `$patch`: deletions apply now, `replace` swaps the list for the patch.
        let mut original = original;
        let mut plain: Vec<&Value> = Vec::with_capacity(patch.len());
        let mut replace = false;
        for item in patch {
            let Value::Object(map) = item else {
                return Err(invalid(errors::bad_arg_type(MAP_TYPE, item)));
            };
            let Some(directive) = map.get(DIRECTIVE) else {
                plain.push(item);
                continue;
            };
            match directive.as_str() {
                Some(DELETE) => {
                    let Some(value) = map.get(merge_key) else {
                        return Err(invalid(errors::no_merge_key(map, merge_key)));
                    };
                    while let Some(index) = original.iter().position(|existing| existing.get(merge_key) == Some(value))
                    {
                        original.remove(index);
                        if let Some(window) = window.as_deref_mut() {
                            window.removed(index);
                        }
                    }
                }
                Some(REPLACE) => replace = true,
                Some(MERGE) => return Err(invalid("merging lists cannot yet be specified in the patch")),
                _ => return Err(invalid(errors::bad_patch_type(directive, map))),
            }
        }
        if replace {
            original = plain.iter().map(|item| (*item).clone()).collect();
            plain.clear();
            window = None;
        }

        let live_order = ListIndex::new(&original, merge_key);
        for item in &plain {
            let Value::Object(patch_map) = item else {
                return Err(invalid(errors::bad_arg_type(MAP_TYPE, item)));
            };
            let Some(value) = patch_map.get(merge_key) else {
                return Err(invalid(errors::no_merge_key(patch_map, merge_key)));
            };
            match original.iter().position(|existing| existing.get(merge_key) == Some(value)) {
                Some(index) => {
                    if let Some(Value::Object(existing)) = original.get_mut(index) {
                        self.merge_map(existing, patch_map, item_schema)?;
                    }
                }
                None => {
                    if let Some(window) = window.as_deref_mut() {
                        window.appended(item, merge_key);
                    }
                    original.push((*item).clone());
                }
            }
        }

        let patch_order = ListIndex::new(plain.iter().copied(), merge_key);
        let (patch_items, server_only) = order::partition_maps(original, &patch_order, merge_key)?;
        order::normalize(patch_items, server_only, &patch_order, &live_order, merge_key, Kind::Object)
    }
}

/// Go's `reflect.Kind` name of a list's element type, for upstream's "cannot merge lists" message.
fn type_word(item_schema: Option<&Value>) -> &'static str {
    let Some(schema) = item_schema else {
        return "struct";
    };
    if schema.get("properties").is_none() && schema.get("additionalProperties").is_some_and(Value::is_object) {
        "map"
    } else {
        "struct"
    }
}
