//! Schema-guided operations on JSON objects, as structured-merge-diff's `typed` package: the set
//! of fields an object sets (`ToFieldSet`), the fields added, modified and removed between two
//! objects (`Compare`), merging an applied configuration into an object (`Merge`), removing
//! fields and items (`RemoveItems`), and making named struct fields members of a set
//! (`EnsureNamedFieldsAreMembers`).

use super::fieldpath::{path_string, values_equal, FieldSet, Path, PathElement, Val};
use super::schema::{ListKind, ListType, MapType, Shape, Ty, Types};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Fields that differ between two objects.
#[derive(Debug, Default)]
pub(crate) struct Comparison {
    pub(crate) added: FieldSet,
    pub(crate) modified: FieldSet,
    pub(crate) removed: FieldSet,
}

impl Comparison {
    /// Drops the given fields (and everything under them) from all three sets.
    pub(crate) fn exclude(mut self, fields: &FieldSet) -> Comparison {
        self.added.remove_under(fields);
        self.modified.remove_under(fields);
        self.removed.remove_under(fields);
        self
    }
}

/// What a node is when walking two values at once.
enum Node<'s> {
    Leaf,
    Map(MapType<'s>),
    List(ListType<'s>),
}

/// A map's entries in key order (the order of a field set's elements).
fn sorted(obj: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut entries: Vec<_> = obj.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    entries
}

fn is_empty(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::Object(m)) => m.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(_) => false,
    }
}

fn is_scalar(v: &Value) -> bool {
    !matches!(v, Value::Null | Value::Object(_) | Value::Array(_))
}

/// A validation error at a path, printed as upstream's `ValidationError`.
fn error_at(path: &[PathElement], msg: &str) -> String {
    if path.is_empty() {
        msg.to_string()
    } else {
        format!("{}: {msg}", path_string(path))
    }
}

/// Operations on objects of one kind.
#[derive(Clone, Copy)]
pub(crate) struct Typed<'s> {
    types: Types<'s>,
    root: Ty<'s>,
}

impl<'s> Typed<'s> {
    pub(crate) fn new(types: Types<'s>, root: Ty<'s>) -> Self {
        Typed { types, root }
    }

    /// `v` with the top-level `spec` and `status` of built-in kinds present (as `{}` when
    /// missing), the way upstream's typed objects always carry them; used for comparisons so
    /// that an absent struct and an empty one do not differ.
    pub(crate) fn with_zero_structs<'v>(&self, v: &'v Value) -> Cow<'v, Value> {
        let missing: Vec<&str> = ["spec", "status"]
            .into_iter()
            .filter(|f| v.get(*f).is_none_or(Value::is_null) && self.types.is_named_struct(self.root, f))
            .collect();
        if missing.is_empty() || !v.is_object() {
            return Cow::Borrowed(v);
        }
        let mut out = v.clone();
        if let Value::Object(m) = &mut out {
            for f in missing {
                m.insert(f.to_string(), Value::Object(Map::new()));
            }
        }
        Cow::Owned(out)
    }

    /// The path element identifying a list item.
    fn item_pe(&self, list: &ListType<'s>, item: &Value) -> Result<PathElement, String> {
        match &list.kind {
            ListKind::Map(keys) => {
                let obj = match item {
                    Value::Object(o) => o,
                    Value::Null => return Err("associative list with keys may not have a null element".to_string()),
                    _ => return Err("associative list with keys may not have non-map elements".to_string()),
                };
                let mut fields: Vec<(String, Val)> = Vec::with_capacity(keys.len());
                for key in keys {
                    if let Some(v) = obj.get(*key) {
                        fields.push((key.to_string(), Val(v.clone())));
                    } else if let Some(d) = self.types.key_default(list.elem, key) {
                        fields.push((key.to_string(), Val(d)));
                    }
                }
                if fields.is_empty() {
                    let quoted: Vec<String> = keys.iter().map(|k| super::fieldpath::go_quote(k)).collect();
                    return Err(format!(
                        "associative list with keys has an element that omits all key fields [{}] (and doesn't have default values for any key fields)",
                        quoted.join(" ")
                    ));
                }
                fields.sort_by(|a, b| a.0.cmp(&b.0));
                Ok(PathElement::Key(fields))
            }
            _ => match item {
                Value::Object(_) => Err("associative list without keys has an element that's a map type".to_string()),
                Value::Array(_) => Err("not supported: associative list with lists as elements".to_string()),
                Value::Null => Err("associative list without keys has an element that's an explicit null".to_string()),
                v => Ok(PathElement::Value(Val(v.clone()))),
            },
        }
    }

    /// Decides how to walk `l` and `r` together: a null or missing side takes the other side's
    /// container type; both sides empty, or different types, make a leaf.
    fn node(&self, ty: Ty<'s>, l: Option<&Value>, r: Option<&Value>) -> Node<'s> {
        let shape = |v: Option<&Value>| match v {
            None | Some(Value::Null) => None,
            Some(v) => Some(self.types.shape(ty, v)),
        };
        let node = match (shape(l), shape(r)) {
            (Some(Shape::Map(m)), Some(Shape::Map(_)) | None) | (None, Some(Shape::Map(m))) => Node::Map(m),
            (Some(Shape::List(t)), Some(Shape::List(_)) | None) | (None, Some(Shape::List(t))) => Node::List(t),
            _ => Node::Leaf,
        };
        if !matches!(node, Node::Leaf) && is_empty(l) && is_empty(r) {
            return Node::Leaf;
        }
        node
    }

    // ---- ToFieldSet ----

    /// Every field and list item `v` sets, and the errors found (duplicate or key-less items).
    pub(crate) fn field_set(&self, v: &Value) -> (FieldSet, Vec<String>) {
        let mut set = FieldSet::new();
        let mut errors = Vec::new();
        self.set_walk(self.root, v, &mut Vec::new(), &mut set, &mut errors);
        (set, errors)
    }

    fn set_walk(&self, ty: Ty<'s>, v: &Value, path: &mut Path, set: &mut FieldSet, errors: &mut Vec<String>) {
        match self.types.shape(ty, v) {
            Shape::Leaf => set.insert(path.clone()),
            Shape::Map(m) => {
                let Value::Object(obj) = v else { return };
                for (k, child) in obj {
                    let (declared, cty) = m.field(k);
                    path.push(PathElement::Field(k.clone()));
                    self.set_walk(cty, child, path, set, errors);
                    let empty_map = matches!(child, Value::Object(o) if o.is_empty());
                    if child.is_null() || empty_map || !declared {
                        set.insert(path.clone());
                    }
                    path.pop();
                }
            }
            Shape::List(l) => {
                let Value::Array(items) = v else { return };
                let mut pes = Vec::with_capacity(items.len());
                let mut seen = BTreeSet::new();
                let mut duplicates = BTreeSet::new();
                for (i, item) in items.iter().enumerate() {
                    match self.item_pe(&l, item) {
                        Ok(pe) => {
                            if !seen.insert(pe.clone()) && duplicates.insert(pe.clone()) {
                                errors.push(error_at(path, &format!("duplicate entries for key {pe}")));
                            }
                            pes.push(Some(pe));
                        }
                        Err(e) => {
                            errors.push(error_at(path, &format!("element {i}: {e}")));
                            pes.push(None);
                        }
                    }
                }
                for (item, pe) in items.iter().zip(pes) {
                    let Some(pe) = pe else { continue };
                    path.push(pe);
                    let duplicate = path.last().is_some_and(|pe| duplicates.contains(pe));
                    if !duplicate {
                        self.set_walk(l.elem, item, path, set, errors);
                    }
                    set.insert(path.clone());
                    path.pop();
                }
            }
        }
    }

    // ---- Compare ----

    /// Fields added, modified and removed going from `l` to `r`.
    pub(crate) fn compare(&self, l: &Value, r: &Value) -> Comparison {
        let mut c = Comparison::default();
        self.cmp_walk(self.root, Some(l), Some(r), &mut Vec::new(), &mut c);
        c
    }

    fn cmp_walk(&self, ty: Ty<'s>, l: Option<&Value>, r: Option<&Value>, path: &mut Path, c: &mut Comparison) {
        match self.node(ty, l, r) {
            Node::Leaf => match (l, r) {
                (None, Some(_)) => c.added.insert(path.clone()),
                (Some(_), None) => c.removed.insert(path.clone()),
                (Some(a), Some(b)) if !values_equal(a, b) => c.modified.insert(path.clone()),
                _ => {}
            },
            Node::Map(m) => {
                let lm = l.and_then(Value::as_object);
                let rm = r.and_then(Value::as_object);
                let keys: BTreeSet<&String> = lm.into_iter().chain(rm).flat_map(|m| m.keys()).collect();
                for k in keys {
                    let (_, cty) = m.field(k);
                    path.push(PathElement::Field(k.clone()));
                    self.cmp_walk(cty, lm.and_then(|m| m.get(k)), rm.and_then(|m| m.get(k)), path, c);
                    path.pop();
                }
                self.cmp_container_presence(l, r, path, c);
            }
            Node::List(t) => {
                let empty = Vec::new();
                let la = l.and_then(Value::as_array).unwrap_or(&empty);
                let ra = r.and_then(Value::as_array).unwrap_or(&empty);
                self.cmp_list(&t, la, ra, path, c);
                self.cmp_container_presence(l, r, path, c);
            }
        }
    }

    fn cmp_container_presence(&self, l: Option<&Value>, r: Option<&Value>, path: &Path, c: &mut Comparison) {
        if l.is_none() {
            c.added.insert(path.clone());
        } else if r.is_none() {
            c.removed.insert(path.clone());
        }
    }

    /// Groups list items by path element, keeping first-seen order (left side first). Items whose
    /// element cannot be computed are identified by position.
    fn group_items<'v>(
        &self,
        t: &ListType<'s>,
        items: &'v [Value],
        order: &mut Vec<PathElement>,
        known: &BTreeMap<PathElement, Vec<&'v Value>>,
    ) -> BTreeMap<PathElement, Vec<&'v Value>> {
        let mut groups: BTreeMap<PathElement, Vec<&'v Value>> = BTreeMap::new();
        for (i, item) in items.iter().enumerate() {
            let pe = self.item_pe(t, item).unwrap_or(PathElement::Index(i));
            let group = groups.entry(pe.clone()).or_default();
            if group.is_empty() && !known.contains_key(&pe) {
                order.push(pe);
            }
            group.push(item);
        }
        groups
    }

    fn cmp_list(&self, t: &ListType<'s>, l: &[Value], r: &[Value], path: &mut Path, c: &mut Comparison) {
        let mut order = Vec::new();
        let lgroups = self.group_items(t, l, &mut order, &BTreeMap::new());
        let rgroups = self.group_items(t, r, &mut order, &lgroups);
        for pe in order {
            let ls = lgroups.get(&pe).map(Vec::as_slice).unwrap_or_default();
            let rs = rgroups.get(&pe).map(Vec::as_slice).unwrap_or_default();
            path.push(pe);
            match (ls.len(), rs.len()) {
                (0..=1, 0..=1) => self.cmp_walk(t.elem, ls.first().copied(), rs.first().copied(), path, c),
                (2.., 2..) => {
                    let same = ls.len() == rs.len() && ls.iter().zip(rs).all(|(a, b)| values_equal(a, b));
                    if !same {
                        c.modified.insert(path.clone());
                    }
                }
                (2.., _) => {
                    if let Some(first) = rs.first() {
                        self.cmp_walk(t.elem, None, Some(first), path, c);
                    }
                    c.removed.insert(path.clone());
                }
                (_, _) => {
                    if let Some(first) = ls.first() {
                        self.cmp_walk(t.elem, Some(first), None, path, c);
                    }
                    c.added.insert(path.clone());
                }
            }
            path.pop();
        }
    }

    // ---- Create ----

    /// The FieldsV1 document of everything a new object `r` sets (what comparing it with `{}`
    /// gives), less the top-level fields `reset` and what no manager owns (apiVersion, kind, and
    /// `STRIPPED_METADATA` and managedFields under metadata). None when `r` is not a map of fields.
    pub(crate) fn created_fields_v1(&self, r: &Value, reset: &[&str]) -> Option<Map<String, Value>> {
        let (Shape::Map(m), Value::Object(obj)) = (self.types.shape(self.root, r), r) else { return None };
        let empty = Value::Object(Map::new());
        let mut out = Map::new();
        for (k, child) in sorted(obj) {
            if reset.contains(&k.as_str()) {
                continue;
            }
            let (_, cty) = m.field(k);
            // (Whether the field itself is set, its node.)
            let (member, node) = match k.as_str() {
                // Owned by nobody; what is under them stays, without their own ".".
                "apiVersion" | "kind" => (false, self.added_v1(cty, child, false)),
                "metadata" => (false, self.metadata_v1(cty, child)),
                "spec" | "status" if self.types.is_named_struct(self.root, k) => {
                    // The empty struct stands on the left: only what differs from it is set.
                    match (child, self.node(cty, Some(&empty), Some(child))) {
                        (Value::Null, _) => (false, Map::new()),
                        (Value::Object(fields), Node::Map(cm)) => (false, self.map_v1(cm, fields, false)),
                        _ => (!values_equal(&empty, child), Map::new()),
                    }
                }
                _ => (true, self.added_v1(cty, child, true)),
            };
            if member || !node.is_empty() {
                out.insert(format!("f:{k}"), Value::Object(node));
            }
        }
        Some(out)
    }

    /// The metadata node of a created object: managedFields left out, and the fields no manager
    /// owns (`STRIPPED_METADATA`) kept only for what is under them.
    fn metadata_v1(&self, ty: Ty<'s>, r: &Value) -> Map<String, Value> {
        let (Node::Map(m), Value::Object(md)) = (self.node(ty, None, Some(r)), r) else { return Map::new() };
        let mut out = Map::new();
        for (f, v) in sorted(md) {
            if f == "managedFields" {
                continue;
            }
            let (_, fty) = m.field(f);
            let owned = !super::managed::STRIPPED_METADATA.contains(&f.as_str());
            let node = self.added_v1(fty, v, owned);
            if owned || !node.is_empty() {
                out.insert(format!("f:{f}"), Value::Object(node));
            }
        }
        out
    }

    /// The FieldsV1 node of `r` and everything under it (`r` itself set when `member`).
    fn added_v1(&self, ty: Ty<'s>, r: &Value, member: bool) -> Map<String, Value> {
        match (self.node(ty, None, Some(r)), r) {
            (Node::Map(m), Value::Object(obj)) => self.map_v1(m, obj, member),
            (Node::List(t), Value::Array(items)) => {
                let mut out = Map::new();
                if member {
                    out.insert(".".to_string(), Value::Object(Map::new()));
                }
                for (pe, group) in self.group_items(&t, items, &mut Vec::new(), &BTreeMap::new()) {
                    let node = match group.as_slice() {
                        [item] => self.added_v1(t.elem, item, true),
                        // Duplicates: the item is set, its fields are not told apart.
                        _ => Map::new(),
                    };
                    out.insert(pe.to_key(), Value::Object(node));
                }
                out
            }
            _ => Map::new(),
        }
    }

    fn map_v1(&self, m: MapType<'s>, obj: &Map<String, Value>, member: bool) -> Map<String, Value> {
        let mut out = Map::new();
        if member && !obj.is_empty() {
            out.insert(".".to_string(), Value::Object(Map::new()));
        }
        for (k, child) in sorted(obj) {
            let (_, cty) = m.field(k);
            out.insert(format!("f:{k}"), Value::Object(self.added_v1(cty, child, true)));
        }
        out
    }

    // ---- Merge ----

    /// Merges the applied configuration `r` into `l`: `r` wins on leaves, maps merge by key,
    /// map-lists by key fields, sets by value; atomic values are replaced.
    pub(crate) fn merge(&self, l: &Value, r: &Value) -> Result<Value, Vec<String>> {
        let mut errors = Vec::new();
        let out = self.merge_walk(self.root, Some(l), Some(r), &mut Vec::new(), &mut errors);
        if errors.is_empty() {
            Ok(out.unwrap_or_else(|| Value::Object(Map::new())))
        } else {
            Err(errors)
        }
    }

    fn merge_walk(
        &self,
        ty: Ty<'s>,
        l: Option<&Value>,
        r: Option<&Value>,
        path: &mut Path,
        errors: &mut Vec<String>,
    ) -> Option<Value> {
        match self.node(ty, l, r) {
            Node::Leaf => r.or(l).cloned(),
            Node::Map(m) => {
                let lm = l.and_then(Value::as_object);
                let rm = r.and_then(Value::as_object);
                let mut out = Map::new();
                let lkeys = lm.into_iter().flat_map(|m| m.keys());
                let rkeys = rm.into_iter().flat_map(|m| m.keys()).filter(|k| !lm.is_some_and(|lm| lm.contains_key(*k)));
                for k in lkeys.chain(rkeys) {
                    let (_, cty) = m.field(k);
                    path.push(PathElement::Field(k.clone()));
                    let merged =
                        self.merge_walk(cty, lm.and_then(|m| m.get(k)), rm.and_then(|m| m.get(k)), path, errors);
                    path.pop();
                    if let Some(v) = merged {
                        out.insert(k.clone(), v);
                    }
                }
                (!out.is_empty()).then_some(Value::Object(out))
            }
            Node::List(t) => {
                let empty = Vec::new();
                let la = l.and_then(Value::as_array).unwrap_or(&empty);
                let ra = r.and_then(Value::as_array).unwrap_or(&empty);
                self.merge_list(&t, la, ra, path, errors)
            }
        }
    }

    /// Merges list items. Items of `r` come in `r`'s order; items only in `l` keep their place
    /// relative to the items around them in `l` (upstream's `visitListItems` ordering).
    fn merge_list(
        &self,
        t: &ListType<'s>,
        l: &[Value],
        r: &[Value],
        path: &mut Path,
        errors: &mut Vec<String>,
    ) -> Option<Value> {
        let mut rpes = Vec::with_capacity(r.len());
        let mut robs: BTreeMap<PathElement, &Value> = BTreeMap::new();
        let mut failed = false;
        for (i, item) in r.iter().enumerate() {
            match self.item_pe(t, item) {
                Ok(pe) if robs.contains_key(&pe) => {
                    errors.push(error_at(path, &format!("duplicate entries for key {pe}")));
                    failed = true;
                }
                Ok(pe) => {
                    robs.insert(pe.clone(), item);
                    rpes.push(pe);
                }
                Err(e) => {
                    errors.push(error_at(path, &format!("element {i}: {e}")));
                    failed = true;
                }
            }
        }
        if failed {
            return None;
        }
        // Left items: duplicates are not merged with the right side.
        let mut lpes = Vec::with_capacity(l.len());
        let mut lobs: BTreeMap<PathElement, Option<&Value>> = BTreeMap::new();
        for (i, item) in l.iter().enumerate() {
            let pe = self.item_pe(t, item).unwrap_or(PathElement::Index(i));
            lobs.entry(pe.clone()).and_modify(|v| *v = None).or_insert(Some(item));
            lpes.push((pe, item));
        }

        let mut shared: VecDeque<&PathElement> = rpes.iter().filter(|pe| lobs.contains_key(*pe)).collect();
        let mut next_shared = shared.pop_front();
        let mut merged_r: BTreeSet<&PathElement> = BTreeSet::new();
        let mut out = Vec::with_capacity(l.len().max(r.len()));
        let (mut li, mut ri) = (0, 0);
        let mut emit =
            |this: &Self, pe: &PathElement, lv: Option<&Value>, rv: Option<&Value>, errors: &mut Vec<String>| {
                path.push(pe.clone());
                let merged = this.merge_walk(t.elem, lv, rv, path, errors);
                path.pop();
                if let Some(v) = merged {
                    out.push(v);
                }
            };
        while li < lpes.len() || ri < rpes.len() {
            if li < lpes.len() && ri < rpes.len() {
                let pe = &lpes[li].0;
                if *pe == rpes[ri] {
                    merged_r.insert(&rpes[ri]);
                    let lv = lobs.get(pe).copied().flatten();
                    emit(self, pe, lv, robs.get(pe).copied(), errors);
                    li += 1;
                    ri += 1;
                    next_shared = shared.pop_front();
                    continue;
                }
                if robs.contains_key(pe) && next_shared.is_some_and(|n| n != pe) {
                    // A shared item that the right side places later.
                    li += 1;
                    continue;
                }
            }
            if li < lpes.len() {
                let (pe, item) = &lpes[li];
                if !robs.contains_key(pe) {
                    emit(self, pe, Some(item), None, errors);
                    li += 1;
                    continue;
                } else if merged_r.contains(pe) {
                    li += 1;
                }
            }
            if ri < rpes.len() {
                let pe = &rpes[ri];
                merged_r.insert(pe);
                let lv = lobs.get(pe).copied().flatten();
                emit(self, pe, lv, robs.get(pe).copied(), errors);
                ri += 1;
                if next_shared == Some(pe) {
                    next_shared = shared.pop_front();
                }
            }
        }
        (!out.is_empty()).then_some(Value::Array(out))
    }

    // ---- RemoveItems ----

    /// `v` without the fields and items of `set`. Containers left empty disappear.
    pub(crate) fn remove_items(&self, v: &Value, set: &FieldSet) -> Value {
        self.remove_walk(self.root, v, set).unwrap_or_else(|| Value::Object(Map::new()))
    }

    fn remove_walk(&self, ty: Ty<'s>, v: &Value, set: &FieldSet) -> Option<Value> {
        match (self.types.shape(ty, v), v) {
            (Shape::Map(m), Value::Object(obj)) if !obj.is_empty() => {
                let mut out = Map::new();
                for (k, child) in obj {
                    let pe = PathElement::Field(k.clone());
                    if set.contains(std::slice::from_ref(&pe)) {
                        continue;
                    }
                    if set.has_prefix(&pe) {
                        let (_, cty) = m.field(k);
                        if let Some(c) = self.remove_walk(cty, child, &set.with_prefix(&pe)) {
                            out.insert(k.clone(), c);
                        }
                    } else {
                        out.insert(k.clone(), child.clone());
                    }
                }
                (!out.is_empty()).then_some(Value::Object(out))
            }
            (Shape::List(t), Value::Array(items)) if !items.is_empty() => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    let Ok(pe) = self.item_pe(&t, item) else {
                        out.push(item.clone());
                        continue;
                    };
                    if set.contains(std::slice::from_ref(&pe)) {
                        continue;
                    }
                    if set.has_prefix(&pe) {
                        if let Some(c) = self.remove_walk(t.elem, item, &set.with_prefix(&pe)) {
                            out.push(c);
                        }
                    } else {
                        out.push(item.clone());
                    }
                }
                (!out.is_empty()).then_some(Value::Array(out))
            }
            _ => is_scalar(v).then(|| v.clone()),
        }
    }

    // ---- EnsureNamedFieldsAreMembers ----

    /// `set` plus, for every path in it, each prefix ending in a declared struct field.
    pub(crate) fn ensure_named(&self, set: &FieldSet) -> FieldSet {
        let mut out = set.clone();
        for path in set.iter() {
            let mut ty = self.root;
            for i in 0..path.len().saturating_sub(1) {
                match &path[i] {
                    PathElement::Field(name) => {
                        let Some(m) = self.types.map_type(ty) else { break };
                        let (declared, cty) = m.field(name);
                        if declared {
                            out.insert(path[..=i].to_vec());
                        }
                        ty = cty;
                    }
                    PathElement::Key(_) => {
                        let Some(l) = self.types.list_type(ty) else { break };
                        ty = l.elem;
                    }
                    _ => break,
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::schema::tests::TestLookup;
    use super::*;
    use serde_json::json;

    fn schemas() -> TestLookup {
        TestLookup(json!({
            "Obj": {"type": "object", "properties": {
                "name": {"type": "string"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "items": {"type": "array", "items": {"$ref": "#/components/schemas/Item"},
                    "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
                "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                "args": {"type": "array", "items": {"type": "string"}},
            }},
            "Item": {"type": "object", "properties": {"name": {"type": "string"}, "v": {"type": "integer"}}},
        }))
    }

    fn with<R>(f: impl FnOnce(Typed<'_>) -> R) -> R {
        let lookup = schemas();
        let root = json!({"$ref": "#/components/schemas/Obj"});
        f(Typed::new(Types::new(&lookup), Ty::Schema(&root)))
    }

    fn fields(v: &Value) -> Value {
        with(|t| t.field_set(v).0.to_fields_v1())
    }

    #[test]
    fn field_set_marks_list_items_and_map_entries() {
        let obj = json!({"name": "x", "labels": {"a": "1"}, "items": [{"name": "a", "v": 1}],
            "tags": ["t"], "args": ["--x"]});
        assert_eq!(
            fields(&obj),
            json!({"f:args": {}, "f:items": {r#"k:{"name":"a"}"#: {".": {}, "f:name": {}, "f:v": {}}},
                "f:labels": {"f:a": {}}, "f:name": {}, "f:tags": {r#"v:"t""#: {}}})
        );
    }

    #[test]
    fn field_set_reports_duplicate_keys() {
        let (_, errors) = with(|t| t.field_set(&json!({"items": [{"name": "a"}, {"name": "a"}]})));
        assert_eq!(errors, vec![r#".items: duplicate entries for key [name="a"]"#.to_string()]);
    }

    #[test]
    fn compare_reports_added_modified_removed() {
        let c = with(|t| {
            t.compare(
                &json!({"name": "x", "items": [{"name": "a", "v": 1}, {"name": "b"}]}),
                &json!({"name": "y", "items": [{"name": "a", "v": 2}], "tags": ["t"]}),
            )
        });
        let s = |set: &FieldSet| set.iter().map(|p| path_string(p)).collect::<Vec<_>>();
        assert_eq!(s(&c.modified), vec![r#".items[name="a"].v"#, ".name"]);
        assert_eq!(s(&c.removed), vec![r#".items[name="b"]"#, r#".items[name="b"].name"#]);
        assert_eq!(s(&c.added), vec![".tags", r#".tags[="t"]"#]);
    }

    #[test]
    fn merge_orders_items_like_upstream() {
        let merged = with(|t| {
            t.merge(
                &json!({"items": [{"name": "a", "v": 1}, {"name": "x"}, {"name": "b"}], "args": ["1"]}),
                &json!({"items": [{"name": "b", "v": 2}, {"name": "c"}, {"name": "a"}], "args": ["2"]}),
            )
        })
        .expect("merge");
        assert_eq!(
            merged,
            json!({"items": [{"name": "x"}, {"name": "b", "v": 2}, {"name": "c"}, {"name": "a", "v": 1}], "args": ["2"]})
        );
    }

    #[test]
    fn merge_rejects_duplicate_applied_keys() {
        let err = with(|t| t.merge(&json!({}), &json!({"items": [{"name": "a"}, {"name": "a"}]})));
        assert_eq!(err, Err(vec![r#".items: duplicate entries for key [name="a"]"#.to_string()]));
    }

    #[test]
    fn remove_items_drops_fields_and_emptied_containers() {
        let mut set = FieldSet::new();
        set.insert(vec![PathElement::field("labels"), PathElement::field("a")]);
        set.insert(vec![PathElement::field("items"), PathElement::Key(vec![("name".into(), Val(json!("a")))])]);
        let out = with(|t| t.remove_items(&json!({"name": "x", "labels": {"a": "1"}, "items": [{"name": "a"}]}), &set));
        assert_eq!(out, json!({"name": "x"}));
    }

    #[test]
    fn ensure_named_adds_declared_struct_fields_only() {
        let mut set = FieldSet::new();
        set.insert(vec![PathElement::field("labels"), PathElement::field("a")]);
        let out = with(|t| t.ensure_named(&set));
        assert!(out.contains(&[PathElement::field("labels")]));
        assert_eq!(out.len(), 2);
    }
}
