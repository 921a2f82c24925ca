//! Label and field selectors, the one implementation every component uses: the query-string
//! syntax (`app=web,tier!=db,env in (a,b),!legacy`), the `LabelSelector` object form
//! (`matchLabels`/`matchExpressions`) as `metav1.LabelSelectorAsSelector` reads it, label sets
//! (`labels.SelectorFromSet`) and Service selectors.
//!
//! Upstream semantics: a `LabelSelector` ANDs its `matchLabels` and `matchExpressions`; an empty
//! one selects everything, a missing one nothing, and an invalid one (an unknown operator, `In`
//! or `NotIn` without values, `Exists` or `DoesNotExist` with values, a malformed key or value)
//! nothing. A set selects what carries every pair (the empty set everything); a Service's
//! `spec.selector` selects nothing when missing or empty.

use crate::meta::{label_value, qualified_name};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;
use std::collections::BTreeMap;

type Labels = BTreeMap<String, String>;

/// Whether `selector` selects an object with `labels` (`LabelSelectorAsSelector(selector)
/// .Matches(labels)`): a missing or invalid selector selects nothing, an empty one everything.
pub fn matches(selector: Option<&LabelSelector>, labels: Option<&Labels>) -> bool {
    let Some(Ok(sel)) = selector.map(Selector::from_object) else { return false };
    sel.matches_map(labels.unwrap_or(&Labels::new()))
}

/// Whether the selector is `{}` (selects every object): workload controllers refuse to act on it.
pub fn is_empty(selector: &LabelSelector) -> bool {
    selector.match_labels.as_ref().is_none_or(BTreeMap::is_empty)
        && selector.match_expressions.as_ref().is_none_or(Vec::is_empty)
}

/// Whether every label in `set` is present with the same value in `labels`
/// (`labels.SelectorFromSet(set).Matches(labels)`): a missing or empty set selects everything.
pub fn set_matches(set: Option<&Labels>, labels: Option<&Labels>) -> bool {
    let empty = Labels::new();
    let labels = labels.unwrap_or(&empty);
    set.into_iter().flatten().all(|(k, v)| labels.get(k) == Some(v))
}

/// Whether a Service's `spec.selector` selects an object with `labels`: a missing or empty
/// selector selects nothing (such a Service gets no endpoints from the controllers).
pub fn service_selects(selector: Option<&Labels>, labels: Option<&Labels>) -> bool {
    selector.is_some_and(|s| !s.is_empty()) && set_matches(selector, labels)
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Equals,
    NotEquals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
    /// Only in LabelSelector objects (node affinity): `Gt`/`Lt` compare integers.
    Gt,
    Lt,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirement {
    pub key: String,
    pub op: Op,
    pub values: Vec<String>,
}

impl Requirement {
    pub fn matches(&self, get: &dyn Fn(&str) -> Option<String>) -> bool {
        let v = get(&self.key);
        match self.op {
            Op::Equals | Op::In => v.is_some_and(|v| self.values.contains(&v)),
            Op::NotEquals | Op::NotIn => v.is_none_or(|v| !self.values.contains(&v)),
            Op::Exists => v.is_some(),
            Op::DoesNotExist => v.is_none(),
            Op::Gt | Op::Lt => {
                let (Some(v), Some(want)) = (v, self.values.first()) else { return false };
                match (v.parse::<i64>(), want.parse::<i64>()) {
                    (Ok(a), Ok(b)) => {
                        if self.op == Op::Gt {
                            a > b
                        } else {
                            a < b
                        }
                    }
                    _ => false,
                }
            }
        }
    }
}

/// A conjunction of requirements; the empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector {
    pub requirements: Vec<Requirement>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct SelectorError(pub String);

impl Selector {
    pub fn everything() -> Self {
        Selector::default()
    }

    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Matches a labels map (`metadata.labels`); `None` is the empty map.
    pub fn matches_labels(&self, labels: Option<&Value>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str).map(str::to_string);
        self.requirements.iter().all(|r| r.matches(&get))
    }

    pub fn matches_map(&self, fields: &BTreeMap<String, String>) -> bool {
        let get = |k: &str| fields.get(k).cloned();
        self.requirements.iter().all(|r| r.matches(&get))
    }

    /// Parses the label selector query syntax.
    pub fn parse_labels(s: &str) -> Result<Self, SelectorError> {
        let mut p = Parser { s: s.as_bytes(), pos: 0 };
        let mut requirements = Vec::new();
        p.skip_ws();
        if p.eof() {
            return Ok(Selector::default());
        }
        loop {
            requirements.push(p.requirement()?);
            p.skip_ws();
            if p.eof() {
                break;
            }
            p.expect(b',')?;
        }
        Ok(Selector { requirements })
    }

    /// Parses the field selector syntax: only `=`, `==` and `!=`.
    pub fn parse_fields(s: &str) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        for term in split_unescaped(s) {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            let (key, op, value) = if let Some((k, v)) = term.split_once("!=") {
                (k, Op::NotEquals, v)
            } else if let Some((k, v)) = term.split_once("==") {
                (k, Op::Equals, v)
            } else if let Some((k, v)) = term.split_once('=') {
                (k, Op::Equals, v)
            } else {
                return Err(SelectorError(format!("invalid selector: '{s}'; can't understand '{term}'")));
            };
            requirements.push(Requirement { key: key.trim().to_string(), op, values: vec![unescape(value.trim())] });
        }
        Ok(Selector { requirements })
    }

    /// Builds a selector from a `LabelSelector` object in JSON form (see [`Selector::from_object`]).
    /// `None` (no selector) matches nothing upstream for controllers; callers decide.
    pub fn from_label_selector(sel: &Value) -> Result<Self, SelectorError> {
        let sel: LabelSelector =
            serde_json::from_value(sel.clone()).map_err(|e| SelectorError(format!("invalid label selector: {e}")))?;
        Selector::from_object(&sel)
    }

    /// `metav1.LabelSelectorAsSelector`: `matchLabels` become `key=value` requirements and
    /// `matchExpressions` `In`/`NotIn`/`Exists`/`DoesNotExist` ones, each validated like
    /// upstream's `labels.NewRequirement`. An empty object matches everything.
    pub fn from_object(sel: &LabelSelector) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        for (k, v) in sel.match_labels.iter().flatten() {
            requirements.push(Requirement::new(k, Op::Equals, vec![v.clone()])?);
        }
        for e in sel.match_expressions.iter().flatten() {
            let op = match e.operator.as_str() {
                "In" => Op::In,
                "NotIn" => Op::NotIn,
                "Exists" => Op::Exists,
                "DoesNotExist" => Op::DoesNotExist,
                other => return Err(SelectorError(format!("\"{other}\" is not a valid label selector operator"))),
            };
            requirements.push(Requirement::new(&e.key, op, e.values.clone().unwrap_or_default())?);
        }
        Ok(Selector { requirements })
    }
}

impl Requirement {
    /// A validated requirement (upstream's `labels.NewRequirement`): a qualified-name key, the
    /// number of values the operator takes, and valid label values.
    pub fn new(key: &str, op: Op, values: Vec<String>) -> Result<Requirement, SelectorError> {
        if let Some(m) = qualified_name(key).into_iter().next() {
            return Err(SelectorError(format!("key: Invalid value: {key:?}: {m}")));
        }
        let count_ok = match op {
            Op::In | Op::NotIn => !values.is_empty(),
            Op::Equals | Op::NotEquals => values.len() == 1,
            Op::Exists | Op::DoesNotExist => values.is_empty(),
            Op::Gt | Op::Lt => values.len() == 1 && values[0].parse::<i64>().is_ok(),
        };
        if !count_ok {
            return Err(SelectorError(format!("values: Invalid value: {values:?}: wrong values for operator {op:?}")));
        }
        for v in &values {
            if let Some(m) = label_value(v).into_iter().next() {
                return Err(SelectorError(format!("values[]: Invalid value: {v:?}: {m}")));
            }
        }
        Ok(Requirement { key: key.to_string(), op, values })
    }
}

impl std::fmt::Display for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .requirements
            .iter()
            .map(|r| match r.op {
                Op::Equals => format!("{}={}", r.key, r.values.join(",")),
                Op::NotEquals => format!("{}!={}", r.key, r.values.join(",")),
                Op::In => format!("{} in ({})", r.key, r.values.join(",")),
                Op::NotIn => format!("{} notin ({})", r.key, r.values.join(",")),
                Op::Exists => r.key.clone(),
                Op::DoesNotExist => format!("!{}", r.key),
                Op::Gt => format!("{}>{}", r.key, r.values.join(",")),
                Op::Lt => format!("{}<{}", r.key, r.values.join(",")),
            })
            .collect();
        f.write_str(&parts.join(","))
    }
}

fn split_unescaped(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut esc = false;
    for c in s.chars() {
        if esc {
            cur.push('\\');
            cur.push(c);
            esc = false;
        } else if c == '\\' {
            esc = true;
        } else if c == ',' {
            out.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    out.push(cur);
    out
}

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut esc = false;
    for c in s.chars() {
        if esc {
            out.push(c);
            esc = false;
        } else if c == '\\' {
            esc = true;
        } else {
            out.push(c);
        }
    }
    out
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn eof(&self) -> bool {
        self.pos >= self.s.len()
    }
    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }
    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
    }
    fn err(&self, what: &str) -> SelectorError {
        SelectorError(format!(
            "unable to parse requirement: {what} at position {} in '{}'",
            self.pos,
            String::from_utf8_lossy(self.s)
        ))
    }
    fn expect(&mut self, c: u8) -> Result<(), SelectorError> {
        self.skip_ws();
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.err(&format!("expected '{}'", c as char)))
        }
    }
    fn word(&mut self) -> String {
        self.skip_ws();
        let start = self.pos;
        while let Some(c) = self.peek() {
            if c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.' | b'/') {
                self.pos += 1;
            } else {
                break;
            }
        }
        String::from_utf8_lossy(&self.s[start..self.pos]).into_owned()
    }
    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        self.skip_ws();
        if self.peek() == Some(b'!') {
            self.pos += 1;
            let key = self.word();
            if key.is_empty() {
                return Err(self.err("expected a key after '!'"));
            }
            return Ok(Requirement { key, op: Op::DoesNotExist, values: vec![] });
        }
        let key = self.word();
        if key.is_empty() {
            return Err(self.err("found '', expected: identifier"));
        }
        self.skip_ws();
        let rest = &self.s[self.pos..];
        let (op, adv) = if rest.starts_with(b"==") {
            (Op::Equals, 2)
        } else if rest.starts_with(b"!=") {
            (Op::NotEquals, 2)
        } else if rest.starts_with(b"=") {
            (Op::Equals, 1)
        } else if rest.starts_with(b"notin") && !rest.get(5).is_some_and(|c| c.is_ascii_alphanumeric()) {
            (Op::NotIn, 5)
        } else if rest.starts_with(b"in") && !rest.get(2).is_some_and(|c| c.is_ascii_alphanumeric()) {
            (Op::In, 2)
        } else if rest.is_empty() || rest.starts_with(b",") {
            return Ok(Requirement { key, op: Op::Exists, values: vec![] });
        } else {
            return Err(self.err("expected one of '=', '==', '!=', 'in', 'notin'"));
        };
        self.pos += adv;
        let values = match op {
            Op::In | Op::NotIn => {
                self.expect(b'(')?;
                let mut vals = Vec::new();
                loop {
                    let v = self.word();
                    self.skip_ws();
                    match self.peek() {
                        Some(b',') => {
                            self.pos += 1;
                            vals.push(v);
                        }
                        Some(b')') => {
                            self.pos += 1;
                            if !v.is_empty() || !vals.is_empty() {
                                vals.push(v);
                            }
                            break;
                        }
                        _ => return Err(self.err("expected ',' or ')'")),
                    }
                }
                vals
            }
            _ => vec![self.word()],
        };
        Ok(Requirement { key, op, values })
    }
}

/// The value at a dotted `path` of `obj` as a field selector compares it: strings as they are,
/// numbers and booleans as written, `null` as the empty string.
pub fn field_string(obj: &Value, path: &str) -> Option<String> {
    let mut cur = obj;
    for p in path.split('.') {
        cur = cur.get(p)?;
    }
    Some(match cur {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Null => String::new(),
        other => other.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
    use serde_json::json;

    #[test]
    fn label_selector_syntax_round_trips_and_matches() {
        let s = Selector::parse_labels("app=web, tier!=db,env in (prod, staging),!legacy,team").expect("parses");
        assert_eq!(s.requirements.len(), 5);
        assert!(s.matches_labels(Some(&json!({"app":"web","env":"prod","team":"x"}))));
        assert!(!s.matches_labels(Some(&json!({"app":"web","env":"dev","team":"x"}))));
        assert!(!s.matches_labels(Some(&json!({"app":"web","env":"prod","team":"x","legacy":"1"}))));
        assert!(Selector::parse_labels("app in (a").is_err());
        assert!(Selector::parse_labels("").expect("empty").is_empty());
    }

    #[test]
    fn field_selector_supports_equality_only() {
        let s = Selector::parse_fields("metadata.name=a,status.phase!=Running").expect("parses");
        let mut f = BTreeMap::new();
        f.insert("metadata.name".into(), "a".into());
        f.insert("status.phase".into(), "Pending".into());
        assert!(s.matches_map(&f));
        assert!(Selector::parse_fields("foo").is_err());
    }

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
        }
    }

    fn one(e: LabelSelectorRequirement) -> LabelSelector {
        LabelSelector { match_expressions: Some(vec![e]), ..Default::default() }
    }

    #[test]
    fn missing_selector_selects_nothing_and_empty_selects_everything() {
        let l = labels(&[("app", "web")]);
        assert!(!matches(None, Some(&l)));
        assert!(matches(Some(&LabelSelector::default()), Some(&l)));
        assert!(matches(Some(&LabelSelector::default()), None));
        assert!(is_empty(&LabelSelector::default()));
        let empty_parts = LabelSelector { match_labels: Some(Labels::new()), match_expressions: Some(vec![]) };
        assert!(is_empty(&empty_parts));
        assert!(matches(Some(&empty_parts), None));
    }

    #[test]
    fn match_labels_and_expressions_are_anded() {
        let sel = LabelSelector {
            match_labels: Some(labels(&[("app", "web")])),
            match_expressions: Some(vec![expr("tier", "In", &["front", "back"]), expr("canary", "DoesNotExist", &[])]),
        };
        assert!(matches(Some(&sel), Some(&labels(&[("app", "web"), ("tier", "front")]))));
        assert!(!matches(Some(&sel), Some(&labels(&[("app", "web"), ("tier", "db")]))));
        assert!(!matches(Some(&sel), Some(&labels(&[("app", "web"), ("tier", "front"), ("canary", "1")]))));
        assert!(!matches(Some(&sel), Some(&labels(&[("tier", "front")]))));
        assert!(!is_empty(&sel));
    }

    #[test]
    fn expressions_follow_upstream_operators() {
        let l = labels(&[("env", "prod")]);
        assert!(matches(Some(&one(expr("env", "In", &["prod", "qa"]))), Some(&l)));
        assert!(!matches(Some(&one(expr("env", "In", &["qa"]))), Some(&l)));
        assert!(!matches(Some(&one(expr("tier", "In", &["qa"]))), Some(&l)), "In needs the key");
        assert!(!matches(Some(&one(expr("env", "NotIn", &["prod"]))), Some(&l)));
        assert!(matches(Some(&one(expr("env", "NotIn", &["qa"]))), Some(&l)));
        assert!(matches(Some(&one(expr("tier", "NotIn", &["qa"]))), Some(&l)), "NotIn matches a missing key");
        assert!(matches(Some(&one(expr("env", "Exists", &[]))), Some(&l)));
        assert!(!matches(Some(&one(expr("tier", "Exists", &[]))), Some(&l)));
        assert!(!matches(Some(&one(expr("env", "DoesNotExist", &[]))), Some(&l)));
        assert!(matches(Some(&one(expr("tier", "DoesNotExist", &[]))), Some(&l)));
    }

    #[test]
    fn invalid_selectors_select_nothing() {
        let l = labels(&[("env", "2")]);
        for (what, bad) in [
            ("unknown operator", expr("env", "Bogus", &[])),
            ("Gt is for node selectors only", expr("env", "Gt", &["1"])),
            ("In without values", expr("env", "In", &[])),
            ("NotIn without values", expr("other", "NotIn", &[])),
            ("Exists with values", expr("env", "Exists", &["2"])),
            ("DoesNotExist with values", expr("other", "DoesNotExist", &["x"])),
            ("malformed key", expr("bad key", "DoesNotExist", &[])),
            ("malformed value", expr("other", "NotIn", &["not a value"])),
        ] {
            assert!(Selector::from_object(&one(bad.clone())).is_err(), "{what}");
            assert!(!matches(Some(&one(bad)), Some(&l)), "{what}");
        }
        let bad_label = LabelSelector { match_labels: Some(labels(&[("env", "-x-")])), ..Default::default() };
        assert!(!matches(Some(&bad_label), Some(&labels(&[("env", "-x-")]))));
        assert!(Selector::from_label_selector(&json!({"matchLabels": {"a": 1}})).is_err(), "a non-string value");
    }

    #[test]
    fn set_matches_requires_every_pair() {
        let l = labels(&[("a", "1"), ("b", "2")]);
        assert!(set_matches(Some(&labels(&[("a", "1")])), Some(&l)));
        assert!(!set_matches(Some(&labels(&[("a", "2")])), Some(&l)));
        assert!(!set_matches(Some(&labels(&[("c", "1")])), None));
        assert!(set_matches(None, Some(&l)));
        assert!(set_matches(Some(&Labels::new()), None));
    }

    #[test]
    fn a_missing_or_empty_service_selector_selects_nothing() {
        let l = labels(&[("app", "web"), ("tier", "fe")]);
        assert!(service_selects(Some(&labels(&[("app", "web")])), Some(&l)));
        assert!(!service_selects(Some(&labels(&[("app", "db")])), Some(&l)));
        assert!(!service_selects(None, Some(&l)));
        assert!(!service_selects(Some(&Labels::new()), Some(&l)));
    }

    #[test]
    fn label_selector_object_form() {
        let s = Selector::from_label_selector(
            &json!({"matchLabels":{"a":"1"},"matchExpressions":[{"key":"b","operator":"Exists"}]}),
        )
        .expect("ok");
        assert!(s.matches_labels(Some(&json!({"a":"1","b":""}))));
        assert!(!s.matches_labels(Some(&json!({"a":"1"}))));
    }
}
