//! Label and field selectors: the query-string syntax (`app=web,tier!=db,env in (a,b),!legacy`)
//! and the `LabelSelector` object form (`matchLabels`/`matchExpressions`).

use serde_json::Value;
use std::collections::BTreeMap;

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

    /// Builds a selector from a `LabelSelector` object. `None` (no selector) matches nothing upstream
    /// for controllers; callers decide. An empty object matches everything.
    pub fn from_label_selector(sel: &Value) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        if let Some(Value::Object(ml)) = sel.get("matchLabels") {
            for (k, v) in ml {
                requirements.push(Requirement {
                    key: k.clone(),
                    op: Op::Equals,
                    values: vec![v.as_str().unwrap_or_default().to_string()],
                });
            }
        }
        if let Some(Value::Array(exprs)) = sel.get("matchExpressions") {
            for e in exprs {
                let key = e.get("key").and_then(Value::as_str).unwrap_or_default().to_string();
                let values: Vec<String> = e
                    .get("values")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
                    .unwrap_or_default();
                let op = match e.get("operator").and_then(Value::as_str).unwrap_or_default() {
                    "In" => Op::In,
                    "NotIn" => Op::NotIn,
                    "Exists" => Op::Exists,
                    "DoesNotExist" => Op::DoesNotExist,
                    "Gt" => Op::Gt,
                    "Lt" => Op::Lt,
                    other => return Err(SelectorError(format!("\"{other}\" is not a valid label selector operator"))),
                };
                requirements.push(Requirement { key, op, values });
            }
        }
        Ok(Selector { requirements })
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
