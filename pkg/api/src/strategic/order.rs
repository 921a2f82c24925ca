//! List element identities and ordering: element kinds, partitioning merged lists into "in the
//! patch" and "server only", and upstream's order normalization, where a `$setElementOrder` list
//! (or the patch list) orders the patch's items, the live list orders the server-only items, and
//! the two are interleaved by their live positions.
//!
//! An element's identity is its merge-key value for lists of maps and the element itself for lists
//! of primitives; identities compare like Go interface values (`int64` 1 differs from `float64` 1).

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use serde_json::Value;

use super::errors;
use super::PatchError;

/// The Go dynamic type of a decoded JSON value, which upstream compares with `reflect.TypeOf`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Null,
    Bool,
    Int,
    Float,
    String,
    Array,
    Object,
}

pub(super) fn kind_of(value: &Value) -> Kind {
    match value {
        Value::Null => Kind::Null,
        Value::Bool(_) => Kind::Bool,
        Value::Number(n) if n.as_i64().is_some() => Kind::Int,
        Value::Number(_) => Kind::Float,
        Value::String(_) => Kind::String,
        Value::Array(_) => Kind::Array,
        Value::Object(_) => Kind::Object,
    }
}

/// The common element kind of `lists` (upstream `sliceElementType`).
pub(super) fn element_kind(lists: &[&[Value]]) -> Result<Kind, PatchError> {
    let mut kind = None;
    for item in lists.iter().flat_map(|list| list.iter()) {
        let current = kind_of(item);
        match kind {
            None if current == Kind::Array => return Err(PatchError::Invalid(errors::NO_LIST_OF_LISTS.into())),
            None => kind = Some(current),
            Some(previous) if previous != current => {
                let rendered: Vec<String> = lists.iter().map(|list| super::gofmt::v_list(list.iter())).collect();
                return Err(PatchError::Invalid(format!(
                    "list element types are not identical: [{}]",
                    rendered.join(" ")
                )));
            }
            Some(_) => {}
        }
    }
    kind.ok_or_else(|| PatchError::Invalid("no elements in any of the given slices".into()))
}

/// The identity of a list element seen as an item of a list of maps (`by_key`) or of primitives.
fn identity<'v>(item: &'v Value, merge_key: &str, by_key: bool) -> Option<&'v Value> {
    if by_key {
        item.as_object().and_then(|map| map.get(merge_key))
    } else {
        Some(item)
    }
}

/// First positions of identities, hashed so lookups stay linear on long lists.
#[derive(Default)]
struct Positions {
    ids: Vec<Option<Value>>,
    buckets: HashMap<u64, Vec<usize>>,
}

impl Positions {
    fn push(&mut self, id: Option<&Value>) {
        let index = self.ids.len();
        self.ids.push(id.cloned());
        self.buckets.entry(hash_id(id)).or_default().push(index);
    }

    /// Adds `id` unless an equal one is present; returns whether it was added.
    fn insert_new(&mut self, id: &Value) -> bool {
        if self.position(Some(id)).is_some() {
            return false;
        }
        self.push(Some(id));
        true
    }

    fn position(&self, id: Option<&Value>) -> Option<usize> {
        let bucket = self.buckets.get(&hash_id(id))?;
        bucket.iter().copied().find(|&i| self.ids.get(i).is_some_and(|stored| stored.as_ref() == id))
    }
}

fn hash_id(id: Option<&Value>) -> u64 {
    let mut hasher = DefaultHasher::new();
    match id {
        None => 0u8.hash(&mut hasher),
        Some(Value::Null) => 1u8.hash(&mut hasher),
        Some(Value::Bool(b)) => (2u8, b).hash(&mut hasher),
        Some(Value::Number(n)) => {
            if let Some(i) = n.as_i64() {
                (3u8, i).hash(&mut hasher);
            } else if let Some(u) = n.as_u64() {
                (4u8, u).hash(&mut hasher);
            } else {
                (5u8, n.as_f64().map(f64::to_bits)).hash(&mut hasher);
            }
        }
        Some(Value::String(s)) => (6u8, s).hash(&mut hasher),
        Some(Value::Array(items)) => (7u8, items.len()).hash(&mut hasher),
        Some(Value::Object(map)) => (8u8, map.len()).hash(&mut hasher),
    }
    hasher.finish()
}

/// An indexed list used as an ordering reference (a `$setElementOrder` list, the patch list or the
/// live list) and for membership tests.
pub(super) struct ListIndex {
    /// Identities as a list of maps would see them (merge-key values; `None` for non-maps).
    keyed: Positions,
    /// Identities as a list of primitives would see them (the elements themselves; `None`, which
    /// no probe matches, for maps).
    plain: Positions,
    /// Index of the first element that is not a map (upstream's lookups fail on it).
    first_non_map: Option<usize>,
    /// Why the list is unusable as an ordering of a list of maps (`validateMergeKeyInLists`).
    invalid_for_maps: Option<String>,
}

impl ListIndex {
    pub(super) fn new<'v>(items: impl IntoIterator<Item = &'v Value>, merge_key: &str) -> Self {
        let mut index = ListIndex {
            keyed: Positions::default(),
            plain: Positions::default(),
            first_non_map: None,
            invalid_for_maps: None,
        };
        for (i, item) in items.into_iter().enumerate() {
            index.keyed.push(identity(item, merge_key, true));
            // Maps never match as whole values (Go cannot compare them); skip cloning them.
            index.plain.push(if item.is_object() { None } else { Some(item) });
            if index.invalid_for_maps.is_none() {
                index.invalid_for_maps = validate_map_item(item, merge_key).err();
            }
            if index.first_non_map.is_none() && !item.is_object() {
                index.first_non_map = Some(i);
            }
        }
        index
    }

    /// The same index, with merge-key identities read from `window` instead.
    pub(super) fn with_window(mut self, window: LiveWindow) -> Self {
        let mut keyed = Positions::default();
        for id in &window.ids {
            keyed.push(id.as_ref());
        }
        self.keyed = keyed;
        self
    }

    fn position(&self, item: &Value, merge_key: &str, by_key: bool) -> Option<usize> {
        if by_key {
            self.keyed.position(identity(item, merge_key, true))
        } else {
            self.plain.position(Some(item))
        }
    }
}

/// The live list as upstream's `$setElementOrder` step sees it after merging. That step orders
/// server-only items by the live list through the slice it read before the merge, and Go's
/// in-place deletions and appends during the merge show through that slice: deletions shift the
/// items left (the last slot keeps its stale item) and the first appends fill the freed slots.
/// Only the slice's original length is visible, whatever its capacity.
pub(super) struct LiveWindow {
    ids: Vec<Option<Value>>,
    len: usize,
}

impl LiveWindow {
    pub(super) fn new(items: &[Value], merge_key: &str) -> Self {
        LiveWindow {
            ids: items.iter().map(|item| identity(item, merge_key, true).cloned()).collect(),
            len: items.len(),
        }
    }

    /// Records the removal of the item at `index` of the list being merged.
    pub(super) fn removed(&mut self, index: usize) {
        let end = self.len.min(self.ids.len());
        for i in index..end.saturating_sub(1) {
            let next = self.ids.get(i + 1).cloned().flatten();
            if let Some(slot) = self.ids.get_mut(i) {
                *slot = next;
            }
        }
        self.len = self.len.saturating_sub(1);
    }

    /// Records an item appended to the list being merged.
    pub(super) fn appended(&mut self, item: &Value, merge_key: &str) {
        if let Some(slot) = self.ids.get_mut(self.len) {
            *slot = identity(item, merge_key, true).cloned();
        }
        self.len += 1;
    }
}

/// Checks that `item` is a map holding `merge_key`, with upstream's messages.
fn validate_map_item(item: &Value, merge_key: &str) -> Result<(), String> {
    match item {
        Value::Object(map) if map.contains_key(merge_key) => Ok(()),
        Value::Object(map) => Err(errors::no_merge_key(map, merge_key)),
        other => Err(errors::bad_arg_type(errors::MAP_TYPE, other)),
    }
}

/// Splits `merged` into elements present in `by` and the others (primitives compared whole).
pub(super) fn partition_primitives(merged: Vec<Value>, by: &ListIndex) -> (Vec<Value>, Vec<Value>) {
    merged.into_iter().partition(|item| by.plain.position(Some(item)).is_some())
}

/// Splits a list of maps into elements whose merge-key value appears in `by` and the others.
pub(super) fn partition_maps(
    merged: Vec<Value>,
    by: &ListIndex,
    merge_key: &str,
) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
    let mut present = Vec::with_capacity(merged.len());
    let mut absent = Vec::with_capacity(merged.len());
    for item in merged {
        validate_map_item(&item, merge_key).map_err(PatchError::Invalid)?;
        let found = by.position(&item, merge_key, true);
        if let Some(bad) = by.first_non_map {
            if found.is_none_or(|f| f > bad) {
                return Err(PatchError::Invalid(format!("value for key {bad} is not a map")));
            }
        }
        if found.is_some() {
            present.push(item);
        } else {
            absent.push(item);
        }
    }
    Ok((present, absent))
}

/// Removes from a list of primitives every value listed in `to_delete`.
pub(super) fn delete_from_slice(mut current: Vec<Value>, to_delete: &[Value]) -> Vec<Value> {
    let index = ListIndex::new(to_delete, "");
    current.retain(|item| index.plain.position(Some(item)).is_none());
    current
}

/// `original` followed by `patch`, without repeated values.
pub(super) fn union(original: Vec<Value>, patch: &[Value]) -> Vec<Value> {
    let mut seen = Positions::default();
    let mut out = Vec::with_capacity(original.len() + patch.len());
    for item in original {
        if seen.insert_new(&item) {
            out.push(item);
        }
    }
    for item in patch {
        if seen.insert_new(item) {
            out.push(item.clone());
        }
    }
    out
}

/// Orders `patch_items` by `patch_order` and `server_only` by `server_order`, then interleaves
/// them (upstream `normalizeElementOrder`). `kind` is the lists' element kind.
pub(super) fn normalize(
    patch_items: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &ListIndex,
    server_order: &ListIndex,
    merge_key: &str,
    kind: Kind,
) -> Result<Vec<Value>, PatchError> {
    let by_key = kind == Kind::Object;
    let patch_items = sort_by(patch_items, patch_order, merge_key, by_key)?;
    let server_only = sort_by(server_only, server_order, merge_key, by_key)?;
    Ok(merge_sorted(server_only, patch_items, server_order, merge_key, by_key))
}

/// Sorts `items` by their positions in `order`, moving `$patch: delete` items last
/// (upstream `normalizeSliceOrder`).
fn sort_by(items: Vec<Value>, order: &ListIndex, merge_key: &str, by_key: bool) -> Result<Vec<Value>, PatchError> {
    let (items, deletions) = if by_key {
        for item in &items {
            validate_map_item(item, merge_key).map_err(PatchError::Invalid)?;
        }
        if let Some(message) = &order.invalid_for_maps {
            return Err(PatchError::Invalid(message.clone()));
        }
        items.into_iter().partition(|item| !super::merge::is_delete_item(item))
    } else {
        (items, Vec::new())
    };
    let positions: Vec<Option<usize>> = items.iter().map(|item| order.position(item, merge_key, by_key)).collect();
    let mut sorted = permute(items, &go_stable_order(&positions));
    sorted.extend(deletions);
    Ok(sorted)
}

/// The permutation Go's `sort.SliceStable` produces with upstream's comparator, under which an
/// element missing from the order compares "less" than anything.
fn go_stable_order(positions: &[Option<usize>]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..positions.len()).collect();
    if positions.iter().all(Option::is_some) {
        // A consistent comparator: every stable sort agrees.
        order.sort_by_key(|&i| positions[i]);
        return order;
    }
    let less = |a: usize, b: usize| match (positions[a], positions[b]) {
        (Some(x), Some(y)) => x < y,
        _ => true,
    };
    // Go sorts short runs by insertion; with this inconsistent comparator only that reproduces it.
    for i in 1..order.len() {
        let mut j = i;
        while j > 0 && less(order[j], order[j - 1]) {
            order.swap(j, j - 1);
            j -= 1;
        }
    }
    order
}

fn permute(items: Vec<Value>, order: &[usize]) -> Vec<Value> {
    let mut slots: Vec<Option<Value>> = items.into_iter().map(Some).collect();
    order.iter().filter_map(|&i| slots.get_mut(i).and_then(Option::take)).collect()
}

/// Inserts each of `left` (server-only items) into `right` (patch items) before the first right
/// item it precedes in the live list, keeping both relative orders (upstream `mergeSortedSlice`).
fn merge_sorted(
    left: Vec<Value>,
    right: Vec<Value>,
    server_order: &ListIndex,
    merge_key: &str,
    by_key: bool,
) -> Vec<Value> {
    let left_positions: Vec<Option<usize>> =
        left.iter().map(|item| server_order.position(item, merge_key, by_key)).collect();
    let right_positions: Vec<Option<usize>> =
        right.iter().map(|item| server_order.position(item, merge_key, by_key)).collect();
    let mut out = Vec::with_capacity(left.len() + right.len());
    let mut left = left.into_iter().zip(left_positions).peekable();
    let mut right = right.into_iter().zip(right_positions).peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some((_, l)), Some((_, r))) => matches!((l, r), (Some(l), Some(r)) if l < r),
        };
        let next = if take_left { left.next() } else { right.next() };
        if let Some((item, _)) = next {
            out.push(item);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn items(value: Value) -> Vec<Value> {
        match value {
            Value::Array(items) => items,
            _ => Vec::new(),
        }
    }

    #[test]
    fn identities_distinguish_int_and_float_like_go() {
        let index = ListIndex::new(&items(json!([1, 2.0])), "");
        assert_eq!(index.position(&json!(1), "", false), Some(0));
        assert_eq!(index.position(&json!(2), "", false), None);
        assert_eq!(index.position(&json!(2.0), "", false), Some(1));
    }

    #[test]
    fn element_kind_rejects_mixed_and_nested_lists() {
        let a = items(json!(["x"]));
        let b = items(json!([1]));
        assert_eq!(
            element_kind(&[&a, &b]),
            Err(PatchError::Invalid("list element types are not identical: [[x] [1]]".into()))
        );
        let nested = items(json!([[1]]));
        assert_eq!(element_kind(&[&nested]), Err(PatchError::Invalid(errors::NO_LIST_OF_LISTS.into())));
        assert_eq!(
            element_kind(&[&[], &[]]),
            Err(PatchError::Invalid("no elements in any of the given slices".into()))
        );
    }

    #[test]
    fn normalize_interleaves_server_only_items_by_live_position() {
        // live: a b c d; the patch orders d before b. Server-only items go before the first patch
        // item they precede live: a and c both precede d.
        let live = items(json!(["a", "b", "c", "d"]));
        let server_order = ListIndex::new(&live, "");
        let patch_order = ListIndex::new(&items(json!(["d", "b"])), "");
        let out = normalize(
            items(json!(["b", "d"])),
            items(json!(["c", "a"])),
            &patch_order,
            &server_order,
            "",
            Kind::String,
        )
        .expect("normalize");
        assert_eq!(out, items(json!(["a", "c", "d", "b"])));
    }

    #[test]
    fn union_keeps_first_occurrences_in_order() {
        assert_eq!(union(items(json!(["a", "b", "a"])), &items(json!(["c", "b"]))), items(json!(["a", "b", "c"])));
    }

    #[test]
    fn partition_maps_fails_on_a_non_map_reference_item_before_the_match() {
        let by = ListIndex::new(&items(json!(["x", {"name": "a"}])), "name");
        assert_eq!(
            partition_maps(items(json!([{"name": "a"}])), &by, "name"),
            Err(PatchError::Invalid("value for key 0 is not a map".into()))
        );
    }
}
