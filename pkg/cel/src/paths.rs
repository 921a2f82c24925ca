//! Which parts of a variable an expression can read, so that only those are converted to CEL
//! values: `object.spec.containers.all(c, ...)` reads `object` only through `.spec.containers`,
//! and a pod bound for it needs nothing else of the pod converted.
//!
//! A variable is read either whole (named on its own, passed to a function, indexed, compared)
//! or through a chain of field selections (`object.spec.containers`, `has(object.spec.x)`),
//! whose last field's value is then read whole. The intermediate maps of a chain are only
//! selected from, and a selection's outcome (the field's value, `no such key`, `has()`'s answer)
//! depends only on that one field, so a map that holds just the selected fields answers every
//! selection as the whole map does. Selections cost one unit whatever the map's size, so the
//! cost of an evaluation is unchanged too.
//!
//! The analysis ignores scopes: a comprehension variable that shadows the variable adds the
//! fields it selects (or, used whole, the whole variable), which only converts more.

use std::collections::BTreeMap;

use cel::common::ast::{EntryExpr, Expr, IdedExpr};

/// The parts of one variable that expressions read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Paths {
    /// The whole value.
    All,
    /// Only these fields of a map (each as far as its own paths say); nothing when empty.
    Fields(BTreeMap<String, Paths>),
}

impl Default for Paths {
    /// Nothing read.
    fn default() -> Self {
        Paths::Fields(BTreeMap::new())
    }
}

impl Paths {
    /// What `self` or `other` reads.
    pub fn union(&mut self, other: &Paths) {
        match (&mut *self, other) {
            (Paths::All, _) => {}
            (_, Paths::All) => *self = Paths::All,
            (Paths::Fields(mine), Paths::Fields(theirs)) => {
                for (k, p) in theirs {
                    mine.entry(k.clone()).or_default().union(p);
                }
            }
        }
    }

    /// Adds the selection chain `fields` (outermost first), read whole at its end.
    fn add(&mut self, fields: &[&str]) {
        let Some((first, rest)) = fields.split_first() else {
            *self = Paths::All;
            return;
        };
        match self {
            Paths::All => {}
            Paths::Fields(map) => map.entry((*first).to_owned()).or_default().add(rest),
        }
    }

    /// The parts of `value` these paths read, as JSON: the value itself when read whole or
    /// not an object, else an object of the read fields it has.
    pub fn prune<'v>(&self, value: &'v serde_json::Value) -> Pruned<'v> {
        match (self, value) {
            (Paths::Fields(fields), serde_json::Value::Object(map)) => Pruned::Fields(
                fields
                    .iter()
                    .filter_map(|(k, p)| map.get_key_value(k).map(|(k, v)| (k.as_str(), p.prune(v))))
                    .collect(),
            ),
            _ => Pruned::Whole(value),
        }
    }
}

/// A JSON value cut down to what [`Paths`] read.
#[derive(Debug)]
pub enum Pruned<'v> {
    Whole(&'v serde_json::Value),
    Fields(Vec<(&'v str, Pruned<'v>)>),
}

/// The parts of each of `vars` that `e` reads (a variable it does not name reads nothing).
pub(crate) fn read_paths(e: &IdedExpr, vars: &[&str]) -> BTreeMap<String, Paths> {
    let mut out: BTreeMap<String, Paths> = vars.iter().map(|v| ((*v).to_owned(), Paths::default())).collect();
    walk(e, &mut out);
    out
}

/// The identifier a chain of selections starts from, and the fields selected, outermost first.
fn chain(e: &IdedExpr) -> Option<(&str, Vec<&str>)> {
    let mut fields = Vec::new();
    let mut cur = e;
    loop {
        match &cur.expr {
            Expr::Select(s) => {
                fields.push(s.field.as_str());
                cur = &s.operand;
            }
            Expr::Ident(name) => {
                fields.reverse();
                return Some((name, fields));
            }
            _ => return None,
        }
    }
}

fn walk(e: &IdedExpr, out: &mut BTreeMap<String, Paths>) {
    if let Some((name, fields)) = chain(e) {
        if let Some(p) = out.get_mut(name) {
            p.add(&fields);
        }
        return;
    }
    match &e.expr {
        Expr::Call(call) => {
            if let Some(t) = &call.target {
                walk(t, out);
            }
            call.args.iter().for_each(|a| walk(a, out));
        }
        Expr::Comprehension(c) => {
            for x in [&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result] {
                walk(x, out);
            }
        }
        Expr::List(l) => l.elements.iter().for_each(|x| walk(x, out)),
        Expr::Map(m) => {
            for entry in &m.entries {
                if let EntryExpr::MapEntry(me) = &entry.expr {
                    walk(&me.key, out);
                    walk(&me.value, out);
                }
            }
        }
        Expr::Struct(s) => {
            for entry in &s.entries {
                if let EntryExpr::StructField(f) = &entry.expr {
                    walk(&f.value, out);
                }
            }
        }
        // A selection from something other than an identifier (a call's result, a literal).
        Expr::Select(s) => walk(&s.operand, out),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}
