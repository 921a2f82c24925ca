//! Field paths and field sets, as structured-merge-diff's `fieldpath` package: path elements
//! (`f:name`, `k:{"name":"web"}`, `v:"x"`, `i:0`), their total order, the `.spec.replicas` string
//! form used in conflicts, and the FieldsV1 encoding stored in `metadata.managedFields`.

use serde_json::{Map, Value};
use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Write as _};

/// A JSON value ordered the way structured-merge-diff orders values: numbers (ints and floats
/// compared numerically), then strings, booleans, lists, maps and null.
#[derive(Clone, Debug)]
pub(crate) struct Val(pub(crate) Value);

fn rank(v: &Value) -> u8 {
    match v {
        Value::Number(_) => 0,
        Value::String(_) => 1,
        Value::Bool(_) => 2,
        Value::Array(_) => 3,
        Value::Object(_) => 4,
        Value::Null => 5,
    }
}

fn cmp_numbers(a: &serde_json::Number, b: &serde_json::Number) -> Ordering {
    let int = |n: &serde_json::Number| n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from));
    match (int(a), int(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        _ => {
            let (x, y) = (a.as_f64().unwrap_or(0.0), b.as_f64().unwrap_or(0.0));
            x.partial_cmp(&y).unwrap_or(Ordering::Equal)
        }
    }
}

/// Total order over JSON values (structured-merge-diff's `value.Compare`).
pub(crate) fn cmp_values(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => cmp_numbers(x, y),
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            for (l, r) in x.iter().zip(y) {
                let c = cmp_values(l, r);
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                match (x.get(k), y.get(k)) {
                    (Some(l), Some(r)) => {
                        let c = cmp_values(l, r);
                        if c != Ordering::Equal {
                            return c;
                        }
                    }
                    (None, _) => return Ordering::Greater,
                    (_, None) => return Ordering::Less,
                }
            }
            Ordering::Equal
        }
        _ => rank(a).cmp(&rank(b)),
    }
}

/// Deep equality with numeric comparison of ints and floats (`value.Equals`).
pub(crate) fn values_equal(a: &Value, b: &Value) -> bool {
    cmp_values(a, b) == Ordering::Equal
}

impl PartialEq for Val {
    fn eq(&self, other: &Self) -> bool {
        values_equal(&self.0, &other.0)
    }
}
impl Eq for Val {}
impl PartialOrd for Val {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Val {
    fn cmp(&self, other: &Self) -> Ordering {
        cmp_values(&self.0, &other.0)
    }
}

/// One step of a field path. The variant order is the order structured-merge-diff sorts by.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum PathElement {
    /// A field of a map or struct: `f:name`.
    Field(String),
    /// An item of a map-list, by its key fields sorted by name: `k:{"name":"web"}`.
    Key(Vec<(String, Val)>),
    /// An item of a set-list, by value: `v:"x"`.
    Value(Val),
    /// An item of a list by position: `i:0`.
    Index(usize),
}

impl PathElement {
    pub(crate) fn field(name: &str) -> Self {
        PathElement::Field(name.to_string())
    }

    /// The FieldsV1 key of this element.
    pub(crate) fn to_key(&self) -> String {
        match self {
            PathElement::Field(name) => format!("f:{name}"),
            PathElement::Key(fields) => {
                let mut out = String::from("k:{");
                for (i, (name, val)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    go_json_string(&mut out, name);
                    out.push(':');
                    go_json(&mut out, &val.0);
                }
                out.push('}');
                out
            }
            PathElement::Value(val) => {
                let mut out = String::from("v:");
                go_json(&mut out, &val.0);
                out
            }
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    /// Parses a FieldsV1 key. `Ok(None)` for an element type this version does not know (skipped,
    /// as upstream does).
    pub(crate) fn from_key(key: &str) -> Result<Option<Self>, String> {
        let Some((kind, rest)) = key.split_at_checked(2) else {
            return Err(format!("key must be 2 characters long: {key}"));
        };
        if !kind.ends_with(':') {
            return Err(format!("missing colon: {key}"));
        }
        match kind {
            "f:" => Ok(Some(PathElement::Field(rest.to_string()))),
            "v:" => {
                let v: Value = serde_json::from_str(rest).map_err(|e| format!("parsing {key}: {e}"))?;
                Ok(Some(PathElement::Value(Val(v))))
            }
            "k:" => {
                let v: Map<String, Value> = serde_json::from_str(rest).map_err(|e| format!("parsing {key}: {e}"))?;
                let mut fields: Vec<(String, Val)> = v.into_iter().map(|(k, v)| (k, Val(v))).collect();
                fields.sort_by(|a, b| a.0.cmp(&b.0));
                Ok(Some(PathElement::Key(fields)))
            }
            "i:" => rest.parse().map(|i| Some(PathElement::Index(i))).map_err(|e| format!("parsing {key}: {e}")),
            _ => Ok(None),
        }
    }
}

/// The string form used in conflict messages and validation errors: `.spec`, `[name="web"]`,
/// `[="x"]`, `[0]`.
impl fmt::Display for PathElement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(fields) => {
                let parts: Vec<String> = fields.iter().map(|(n, v)| format!("{n}={}", go_to_string(&v.0))).collect();
                write!(f, "[{}]", parts.join(","))
            }
            PathElement::Value(v) => write!(f, "[={}]", go_to_string(&v.0)),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// A path from the object root.
pub(crate) type Path = Vec<PathElement>;

/// `.spec.template.spec.containers[name="web"].image`
pub(crate) fn path_string(path: &[PathElement]) -> String {
    path.iter().map(ToString::to_string).collect()
}

/// `value.ToString`: Go's `%v` of scalars, `%q` of strings.
fn go_to_string(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::String(s) => go_quote(s),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Array(items) => format!("[{}]", items.iter().map(go_to_string).collect::<Vec<_>>().join(",")),
        Value::Object(m) => m.iter().map(|(k, v)| format!("{k}={}", go_to_string(v))).collect(),
    }
}

/// Go's `strconv.Quote` for the characters that occur in practice.
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Appends `s` as a JSON string the way Go's encoder writes it (HTML characters escaped).
fn go_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Appends `v` as compact JSON the way Go's `encoding/json` writes an unstructured value: map
/// keys sorted, HTML characters escaped.
pub(crate) fn go_json(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => go_json_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                go_json(out, item);
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                go_json_string(out, k);
                out.push(':');
                go_json(out, &m[k]);
            }
            out.push('}');
        }
    }
}

/// A set of field paths (structured-merge-diff's `fieldpath.Set`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FieldSet(BTreeSet<Path>);

/// The trie form of a set: which elements are members at this level and which have children.
/// Built over a [`FieldSet`] it borrows the elements; built directly (a create's fields,
/// `Trie<'static>`) it owns them.
#[derive(Default, Debug)]
pub(crate) struct Trie<'a> {
    pub(crate) member: bool,
    pub(crate) children: BTreeMap<Cow<'a, PathElement>, Trie<'a>>,
}

impl<'a> Trie<'a> {
    fn build(set: &'a FieldSet) -> Self {
        let mut root = Trie::default();
        for path in &set.0 {
            let mut node = &mut root;
            for pe in path {
                node = node.children.entry(Cow::Borrowed(pe)).or_default();
            }
            node.member = true;
        }
        root
    }

    /// The FieldsV1 encoding of the set this trie holds.
    pub(crate) fn fields_v1(&self) -> Value {
        Value::Object(self.to_fields_v1(false))
    }

    fn to_fields_v1(&self, include_self: bool) -> Map<String, Value> {
        let mut out = Map::new();
        if include_self && self.member && !self.children.is_empty() {
            out.insert(".".to_string(), Value::Object(Map::new()));
        }
        for (pe, child) in &self.children {
            out.insert(pe.to_key(), Value::Object(child.to_fields_v1(true)));
        }
        out
    }

    /// Paths in upstream's iteration order: the members of a level first, then each child's subtree.
    fn iterate(&self, prefix: &mut Path, out: &mut Vec<Path>) {
        for (pe, child) in &self.children {
            if child.member {
                prefix.push(pe.as_ref().clone());
                out.push(prefix.clone());
                prefix.pop();
            }
        }
        for (pe, child) in &self.children {
            if !child.children.is_empty() {
                prefix.push(pe.as_ref().clone());
                child.iterate(prefix, out);
                prefix.pop();
            }
        }
    }
}

impl FieldSet {
    pub(crate) fn new() -> Self {
        FieldSet::default()
    }

    /// Inserts a path; the empty path is never a member.
    pub(crate) fn insert(&mut self, path: Path) {
        if !path.is_empty() {
            self.0.insert(path);
        }
    }

    pub(crate) fn contains(&self, path: &[PathElement]) -> bool {
        self.0.contains(path)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Path> {
        self.0.iter()
    }

    /// Moves every path of `other` into this set.
    pub(crate) fn absorb(&mut self, mut other: FieldSet) {
        if self.0.is_empty() {
            self.0 = other.0;
        } else {
            self.0.append(&mut other.0);
        }
    }

    /// In place: removes every path that equals, or lies under, a path of `other`.
    pub(crate) fn remove_under(&mut self, other: &FieldSet) {
        if !other.is_empty() {
            self.0.retain(|p| !(1..=p.len()).any(|n| other.0.contains(&p[..n])));
        }
    }

    /// Removes one path.
    pub(crate) fn remove(&mut self, path: &[PathElement]) {
        self.0.remove(path);
    }

    pub(crate) fn union(&self, other: &FieldSet) -> FieldSet {
        FieldSet(self.0.union(&other.0).cloned().collect())
    }

    pub(crate) fn intersection(&self, other: &FieldSet) -> FieldSet {
        FieldSet(self.0.intersection(&other.0).cloned().collect())
    }

    pub(crate) fn difference(&self, other: &FieldSet) -> FieldSet {
        FieldSet(self.0.difference(&other.0).cloned().collect())
    }

    /// Removes every path that equals, or lies under, a path of `other`.
    pub(crate) fn recursive_difference(&self, other: &FieldSet) -> FieldSet {
        if other.is_empty() {
            return self.clone();
        }
        FieldSet(self.0.iter().filter(|p| !(1..=p.len()).any(|n| other.0.contains(&p[..n]))).cloned().collect())
    }

    /// The paths under `pe`, with `pe` removed from their front (`pe` itself is not included).
    pub(crate) fn with_prefix(&self, pe: &PathElement) -> FieldSet {
        let start = vec![pe.clone()];
        FieldSet(
            self.0
                .range(start..)
                .take_while(|p| p.first() == Some(pe))
                .filter(|p| p.len() > 1)
                .map(|p| p[1..].to_vec())
                .collect(),
        )
    }

    /// Whether some path lies strictly under `pe`.
    pub(crate) fn has_prefix(&self, pe: &PathElement) -> bool {
        let start = vec![pe.clone()];
        self.0.range(start..).take_while(|p| p.first() == Some(pe)).any(|p| p.len() > 1)
    }

    /// Paths in upstream's iteration order (used to order conflicts).
    pub(crate) fn iterate(&self) -> Vec<Path> {
        let mut out = Vec::with_capacity(self.0.len());
        Trie::build(self).iterate(&mut Vec::new(), &mut out);
        out
    }

    /// The FieldsV1 encoding: nested objects keyed by path elements, `{}` for leaves and a `"."`
    /// entry for members that also have children.
    pub(crate) fn to_fields_v1(&self) -> Value {
        Trie::build(self).fields_v1()
    }

    /// Decodes FieldsV1.
    pub(crate) fn from_fields_v1(v: &Value) -> Result<FieldSet, String> {
        let Value::Object(m) = v else {
            return Err("FieldsV1 must be a JSON object".to_string());
        };
        let mut set = FieldSet::new();
        read_fields_v1(m, &mut Vec::new(), &mut set)?;
        Ok(set)
    }
}

/// Reads the children of one level; returns whether any child was found.
fn read_fields_v1(m: &Map<String, Value>, prefix: &mut Path, set: &mut FieldSet) -> Result<bool, String> {
    let mut any = false;
    for (key, child) in m {
        if key == "." {
            continue;
        }
        let Some(pe) = PathElement::from_key(key)? else {
            continue;
        };
        let Value::Object(child) = child else {
            return Err(format!("FieldsV1 entry {key} must be a JSON object"));
        };
        any = true;
        prefix.push(pe);
        let has_children = read_fields_v1(child, prefix, set)?;
        if child.contains_key(".") || !has_children {
            set.insert(prefix.clone());
        }
        prefix.pop();
    }
    Ok(any)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn f(name: &str) -> PathElement {
        PathElement::field(name)
    }

    fn key(name: &str, v: Value) -> PathElement {
        PathElement::Key(vec![(name.to_string(), Val(v))])
    }

    #[test]
    fn path_elements_order_fields_before_keys_before_values() {
        let mut pes =
            vec![PathElement::Index(0), PathElement::Value(Val(json!("x"))), key("name", json!("a")), f("z"), f("a")];
        pes.sort();
        assert_eq!(
            pes,
            vec![f("a"), f("z"), key("name", json!("a")), PathElement::Value(Val(json!("x"))), PathElement::Index(0)]
        );
    }

    #[test]
    fn values_order_numbers_strings_bools_and_compare_ints_with_floats() {
        assert_eq!(cmp_values(&json!(1), &json!(1.0)), Ordering::Equal);
        assert_eq!(cmp_values(&json!(2), &json!("1")), Ordering::Less);
        assert_eq!(cmp_values(&json!("z"), &json!(false)), Ordering::Less);
        assert_eq!(cmp_values(&json!(null), &json!({})), Ordering::Greater);
    }

    #[test]
    fn keys_encode_as_go_json_with_sorted_fields() {
        let pe = PathElement::Key(vec![
            ("containerPort".to_string(), Val(json!(80))),
            ("protocol".to_string(), Val(json!("TCP"))),
        ]);
        assert_eq!(pe.to_key(), r#"k:{"containerPort":80,"protocol":"TCP"}"#);
        assert_eq!(PathElement::Value(Val(json!("a<b"))).to_key(), r#"v:"a\u003cb""#);
        assert_eq!(PathElement::from_key(r#"k:{"protocol":"TCP","containerPort":80}"#), Ok(Some(pe)));
        assert_eq!(PathElement::from_key("x:whatever"), Ok(None));
        assert!(PathElement::from_key("f").is_err());
    }

    #[test]
    fn paths_print_like_upstream() {
        let p = vec![f("spec"), f("containers"), key("name", json!("web")), f("image")];
        assert_eq!(path_string(&p), r#".spec.containers[name="web"].image"#);
        assert_eq!(path_string(&[f("finalizers"), PathElement::Value(Val(json!("x")))]), r#".finalizers[="x"]"#);
    }

    #[test]
    fn fields_v1_round_trips_with_self_markers() {
        let mut set = FieldSet::new();
        let item = vec![f("spec"), f("containers"), key("name", json!("web"))];
        set.insert(item.clone());
        let mut image = item.clone();
        image.push(f("image"));
        set.insert(image);
        set.insert(vec![f("spec"), f("replicas")]);
        let v = set.to_fields_v1();
        assert_eq!(
            v,
            json!({"f:spec": {"f:containers": {r#"k:{"name":"web"}"#: {".": {}, "f:image": {}}}, "f:replicas": {}}})
        );
        assert_eq!(
            serde_json::to_string(&v).expect("json"),
            r#"{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{}}},"f:replicas":{}}}"#
        );
        assert_eq!(FieldSet::from_fields_v1(&v), Ok(set));
    }

    #[test]
    fn recursive_difference_removes_descendants() {
        let mut a = FieldSet::new();
        a.insert(vec![f("status"), f("replicas")]);
        a.insert(vec![f("spec"), f("replicas")]);
        let mut b = FieldSet::new();
        b.insert(vec![f("status")]);
        let d = a.recursive_difference(&b);
        assert_eq!(d.len(), 1);
        assert!(d.contains(&[f("spec"), f("replicas")]));
    }

    #[test]
    fn iteration_lists_members_of_a_level_before_subtrees() {
        let mut s = FieldSet::new();
        s.insert(vec![f("a"), f("b")]);
        s.insert(vec![f("c")]);
        assert_eq!(s.iterate(), vec![vec![f("c")], vec![f("a"), f("b")]]);
    }

    #[test]
    fn with_prefix_strips_the_first_element() {
        let mut s = FieldSet::new();
        s.insert(vec![f("a")]);
        s.insert(vec![f("a"), f("b")]);
        s.insert(vec![f("c"), f("d")]);
        let sub = s.with_prefix(&f("a"));
        assert_eq!(sub.len(), 1);
        assert!(sub.contains(&[f("b")]));
        assert!(s.has_prefix(&f("c")));
        assert!(!s.has_prefix(&f("x")));
    }
}
