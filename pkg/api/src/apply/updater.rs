//! The ownership algorithm of structured-merge-diff's `merge.Updater`: recording the fields a
//! write changed for its manager (taking them from the others), and applying a configuration —
//! merge, pruning of fields the applier dropped, conflict detection against other managers.

use super::fieldpath::FieldSet;
use super::managed::{strip_meta, Entry, ManagerId, Managers};
use super::typed::{Comparison, Typed};
use serde_json::Value;
use std::collections::BTreeMap;

/// Fields another manager owns that a write changes: per manager, its API version and the fields.
pub(crate) type ConflictSets = BTreeMap<ManagerId, (String, FieldSet)>;

/// Why an apply did not go through.
#[derive(Debug)]
pub(crate) enum Failure {
    Conflicts(ConflictSets),
    /// Validation errors of the applied configuration (duplicate or key-less list items).
    Invalid(Vec<String>),
}

/// Removes `null` map entries, as decoding into the typed object would.
pub(crate) fn strip_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, v| !v.is_null());
            m.values_mut().for_each(strip_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

pub(crate) struct Updater<'s> {
    pub(crate) typed: Typed<'s>,
    /// Fields left out of comparisons and never owned: the reset fields of the endpoint and
    /// `metadata.managedFields`.
    pub(crate) ignored: FieldSet,
    /// The API version of the request.
    pub(crate) api_version: &'s str,
}

impl Updater<'_> {
    /// Compares `old` and `new`; fields other managers own that changed are conflicts. Unless
    /// `force`, conflicts fail the update; otherwise they, and removed fields, leave the other
    /// managers' sets. Managers left with nothing are dropped.
    fn update(
        &self,
        old: &Value,
        new: &Value,
        managers: &mut Managers,
        workflow: Option<&ManagerId>,
        force: bool,
    ) -> Result<Comparison, ConflictSets> {
        let (old, new) = (self.typed.with_zero_structs(old), self.typed.with_zero_structs(new));
        let cmp = self.typed.compare(&old, &new).exclude(&self.ignored);
        let mut conflicts = ConflictSets::new();
        // Creates (no managers yet) skip building the changed set.
        if managers.keys().any(|id| Some(id) != workflow) {
            let changed = cmp.modified.union(&cmp.added);
            for (id, e) in managers.iter() {
                if Some(id) == workflow {
                    continue;
                }
                let c = e.set.intersection(&changed);
                if !c.is_empty() {
                    conflicts.insert(id.clone(), (e.api_version.clone(), c));
                }
            }
        }
        if !force && !conflicts.is_empty() {
            return Err(conflicts);
        }
        for (id, e) in managers.iter_mut() {
            if Some(id) == workflow {
                continue;
            }
            if let Some((_, c)) = conflicts.get(id) {
                e.set = e.set.difference(c);
            }
            if !cmp.removed.is_empty() {
                e.set = e.set.difference(&cmp.removed);
            }
        }
        managers.retain(|_, e| !e.set.is_empty());
        Ok(cmp)
    }

    /// Records a non-apply write from `old` to `new` for `id`: the fields it added or modified
    /// become its own (and nobody else's); fields it removed are nobody's.
    pub(crate) fn record_update(&self, old: &Value, new: &Value, managers: &mut Managers, id: &ManagerId, time: &str) {
        let Ok(cmp) = self.update(old, new, managers, None, true) else {
            return;
        };
        // `update` already excluded the ignored fields.
        let mut set = cmp.added;
        set.absorb(cmp.modified);
        strip_meta(&mut set);
        if set.is_empty() {
            return;
        }
        let set = match managers.get(id) {
            Some(prev) => set.union(&prev.set),
            None => set,
        };
        managers.insert(id.clone(), Entry { set, api_version: self.api_version.to_string(), time: Some(time.into()) });
    }

    /// Applies `applied` onto `live` for `id`. Returns the new object (nulls removed) and the
    /// managers; the caller decides whether anything changed and stamps the time.
    pub(crate) fn apply(
        &self,
        live: &Value,
        applied: &Value,
        mut managers: Managers,
        id: &ManagerId,
        force: bool,
    ) -> Result<(Value, Managers), Failure> {
        let (set, errors) = self.typed.field_set(applied);
        if !errors.is_empty() {
            return Err(Failure::Invalid(errors));
        }
        let merged = self.typed.merge(live, applied).map_err(Failure::Invalid)?;
        let last = managers.get(id).map(|e| e.set.clone());
        let time = managers.get(id).and_then(|e| e.time.clone());
        let set = set.recursive_difference(&self.ignored);
        managers.insert(id.clone(), Entry { set, api_version: self.api_version.to_string(), time });
        let mut new = self.prune(merged, &managers, last.as_ref());
        self.update(live, &new, &mut managers, Some(id), force).map_err(Failure::Conflicts)?;
        if let Some(e) = managers.get_mut(id) {
            strip_meta(&mut e.set);
            if e.set.is_empty() {
                managers.remove(id);
            }
        }
        strip_nulls(&mut new);
        Ok((new, managers))
    }

    /// Removes the fields the applier owned last time (`last`) but no longer applies, unless
    /// some manager (including the applier's new configuration) still owns them.
    fn prune(&self, merged: Value, managers: &Managers, last: Option<&FieldSet>) -> Value {
        let Some(last) = last.filter(|s| !s.is_empty()) else {
            return merged;
        };
        let t = &self.typed;
        let named = |s: &FieldSet| t.ensure_named(s);
        let last = named(last);
        let pruned = t.remove_items(&merged, &last);

        // Add back what some manager owns.
        let owned = managers.values().fold(FieldSet::new(), |acc, e| acc.union(&e.set));
        let merged_set = named(&t.field_set(&merged).0);
        let keep = named(&t.field_set(&pruned).0).union(&named(&owned));
        let pruned = t.remove_items(&merged, &merged_set.difference(&keep));

        // Only remove what the applier owned last time.
        let pruned_set = named(&t.field_set(&pruned).0);
        t.remove_items(&merged, &merged_set.difference(&pruned_set).intersection(&last))
    }
}
