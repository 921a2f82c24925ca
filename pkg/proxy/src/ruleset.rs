//! The typed model of the one nftables table k1s owns (`table ip k1s`): named sets and maps with
//! their elements, and chains with their rules. [`Ruleset`] prints itself as a complete nft
//! script (golden tests compare that text) and computes the incremental transaction that turns
//! one ruleset into another, touching only the chains and elements that differ.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

/// The nftables address family of the table.
pub const FAMILY: &str = "ip";
/// The name of the table; k1s never touches any other.
pub const TABLE: &str = "k1s";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetKind {
    Set,
    Map,
}

impl SetKind {
    fn keyword(self) -> &'static str {
        match self {
            SetKind::Set => "set",
            SetKind::Map => "map",
        }
    }
}

/// A named set or map. `decl` holds its declaration statements (`type …`, `flags …`,
/// `timeout …`). A `dynamic` set is filled by the packet path (`update @set …`): its elements are
/// never rendered nor diffed, so applying a new ruleset keeps them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Set {
    pub kind: SetKind,
    pub decl: Vec<String>,
    pub dynamic: bool,
    /// key → value (empty for plain sets).
    pub elements: BTreeMap<String, String>,
}

/// A chain: `hook` is the base-chain header (`type nat hook prerouting priority -100; policy
/// accept;`) or `None` for a regular chain.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Chain {
    pub hook: Option<String>,
    pub rules: Vec<String>,
}

/// Everything in `table ip k1s`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ruleset {
    pub sets: BTreeMap<String, Set>,
    pub chains: BTreeMap<String, Chain>,
}

impl Ruleset {
    /// Declares a set or map (idempotent: a second declaration keeps the first's elements).
    pub fn declare_set(&mut self, name: &str, kind: SetKind, decl: &[&str]) {
        self.sets.entry(name.to_string()).or_insert_with(|| Set {
            kind,
            decl: decl.iter().map(|s| s.to_string()).collect(),
            dynamic: false,
            elements: BTreeMap::new(),
        });
    }

    /// Declares a set whose elements the packet path owns.
    pub fn declare_dynamic_set(&mut self, name: &str, decl: &[&str]) {
        self.sets.insert(
            name.to_string(),
            Set {
                kind: SetKind::Set,
                decl: decl.iter().map(|s| s.to_string()).collect(),
                dynamic: true,
                elements: BTreeMap::new(),
            },
        );
    }

    /// Adds an element to a declared set (`value` empty) or map. Elements of undeclared sets are
    /// a programming error and are dropped with a debug assertion.
    pub fn element(&mut self, set: &str, key: impl Into<String>, value: impl Into<String>) {
        match self.sets.get_mut(set) {
            Some(s) => {
                s.elements.insert(key.into(), value.into());
            }
            None => debug_assert!(false, "element for undeclared set {set}"),
        }
    }

    /// The chain named `name`, created empty (regular) if absent.
    pub fn chain(&mut self, name: &str) -> &mut Chain {
        self.chains.entry(name.to_string()).or_default()
    }

    /// Declares a base chain with its header.
    pub fn base_chain(&mut self, name: &str, hook: &str) -> &mut Chain {
        let c = self.chain(name);
        c.hook = Some(hook.to_string());
        c
    }

    /// Appends a rule to `chain` (creating the chain if needed).
    pub fn rule(&mut self, chain: &str, rule: impl Into<String>) {
        self.chain(chain).rules.push(rule.into());
    }

    /// The script that replaces the table atomically: create-if-missing, delete, re-create.
    pub fn full_script(&self) -> String {
        format!("add table {FAMILY} {TABLE}\ndelete table {FAMILY} {TABLE}\n{self}")
    }

    /// The script that turns `current` (what the kernel holds) into `self`, or `None` when the
    /// change is structural (a base chain or a set declaration changed) and needs a full
    /// replacement. An empty string means nothing to do.
    pub fn diff_script(&self, current: &Ruleset) -> Option<String> {
        let t = format!("{FAMILY} {TABLE}");
        let mut out = String::new();
        // Structural checks first.
        for (name, set) in &self.sets {
            if let Some(old) = current.sets.get(name) {
                if old.kind != set.kind || old.decl != set.decl || old.dynamic != set.dynamic {
                    return None;
                }
            }
        }
        for (name, chain) in &self.chains {
            match current.chains.get(name) {
                Some(old) if old.hook != chain.hook => return None,
                None if chain.hook.is_some() => return None,
                _ => {}
            }
        }
        if current.chains.iter().any(|(n, c)| c.hook.is_some() && !self.chains.contains_key(n)) {
            return None;
        }
        // 1. New sets and chains.
        for (name, set) in &self.sets {
            if !current.sets.contains_key(name) {
                let _ = writeln!(out, "add {} {t} {name} {{ {}; }}", set.kind.keyword(), set.decl.join("; "));
            }
        }
        for name in self.chains.keys() {
            if !current.chains.contains_key(name) {
                let _ = writeln!(out, "add chain {t} {name}");
            }
        }
        // 2. Elements that go away or change value.
        for (name, set) in &self.sets {
            let Some(old) = current.sets.get(name) else { continue };
            if set.dynamic {
                continue;
            }
            let gone: Vec<&str> = old
                .elements
                .iter()
                .filter(|(k, v)| set.elements.get(*k) != Some(*v))
                .map(|(k, _)| k.as_str())
                .collect();
            if !gone.is_empty() {
                let _ = writeln!(out, "delete element {t} {name} {{ {} }}", gone.join(", "));
            }
        }
        // 3. Chains whose rules change, and chains that go away, are flushed.
        let mut refill = Vec::new();
        for (name, chain) in &self.chains {
            match current.chains.get(name) {
                Some(old) if old.rules != chain.rules => {
                    let _ = writeln!(out, "flush chain {t} {name}");
                    refill.push((name, chain));
                }
                Some(_) => {}
                None => refill.push((name, chain)),
            }
        }
        let removed_chains: Vec<&String> = current.chains.keys().filter(|n| !self.chains.contains_key(*n)).collect();
        for name in &removed_chains {
            let _ = writeln!(out, "flush chain {t} {name}");
        }
        // 4. Rules of new and changed chains.
        for (name, chain) in refill {
            for rule in &chain.rules {
                let _ = writeln!(out, "add rule {t} {name} {rule}");
            }
        }
        // 5. New elements and new values.
        for (name, set) in &self.sets {
            if set.dynamic {
                continue;
            }
            let old = current.sets.get(name);
            let added: Vec<String> = set
                .elements
                .iter()
                .filter(|(k, v)| old.and_then(|o| o.elements.get(*k)) != Some(*v))
                .map(|(k, v)| element_text(k, v))
                .collect();
            if !added.is_empty() {
                let _ = writeln!(out, "add element {t} {name} {{ {} }}", added.join(", "));
            }
        }
        // 6. Chains and sets that go away (nothing references them any more).
        for name in removed_chains {
            let _ = writeln!(out, "delete chain {t} {name}");
        }
        for (name, set) in &current.sets {
            if !self.sets.contains_key(name) {
                let _ = writeln!(out, "delete {} {t} {name}", set.kind.keyword());
            }
        }
        Some(out)
    }

    /// Number of rules in all chains (for logs and benchmarks).
    pub fn rule_count(&self) -> usize {
        self.chains.values().map(|c| c.rules.len()).sum()
    }
}

fn element_text(key: &str, value: &str) -> String {
    if value.is_empty() {
        key.to_string()
    } else {
        format!("{key} : {value}")
    }
}

/// The complete table as nft syntax: sets first, then chains, each in name order.
impl fmt::Display for Ruleset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "table {FAMILY} {TABLE} {{")?;
        let mut first = true;
        for (name, set) in &self.sets {
            if !first {
                writeln!(f)?;
            }
            first = false;
            writeln!(f, "\t{} {name} {{", set.kind.keyword())?;
            for d in &set.decl {
                writeln!(f, "\t\t{d}")?;
            }
            if !set.dynamic && !set.elements.is_empty() {
                writeln!(f, "\t\telements = {{")?;
                for (k, v) in &set.elements {
                    writeln!(f, "\t\t\t{},", element_text(k, v))?;
                }
                writeln!(f, "\t\t}}")?;
            }
            writeln!(f, "\t}}")?;
        }
        for (name, chain) in &self.chains {
            if !first {
                writeln!(f)?;
            }
            first = false;
            writeln!(f, "\tchain {name} {{")?;
            if let Some(h) = &chain.hook {
                writeln!(f, "\t\t{h}")?;
            }
            for r in &chain.rules {
                writeln!(f, "\t\t{r}")?;
            }
            writeln!(f, "\t}}")?;
        }
        writeln!(f, "}}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Ruleset {
        let mut r = Ruleset::default();
        r.declare_set("cluster-ips", SetKind::Set, &["type ipv4_addr"]);
        r.element("cluster-ips", "10.43.0.5", "");
        r.declare_set("service-ips", SetKind::Map, &["type ipv4_addr . inet_proto . inet_service : verdict"]);
        r.element("service-ips", "10.43.0.5 . tcp . 80", "goto service-a");
        r.base_chain("nat-prerouting", "type nat hook prerouting priority -100; policy accept;");
        r.rule("nat-prerouting", "jump services");
        r.rule("services", "ip daddr . meta l4proto . th dport vmap @service-ips");
        r.rule("service-a", "dnat to 10.42.0.2:8080");
        r
    }

    #[test]
    fn full_script_deletes_and_recreates_the_table_in_one_transaction() {
        let s = sample().full_script();
        assert!(s.starts_with("add table ip k1s\ndelete table ip k1s\ntable ip k1s {\n"), "{s}");
        assert!(s.contains("\tset cluster-ips {\n\t\ttype ipv4_addr\n\t\telements = {\n\t\t\t10.43.0.5,\n"), "{s}");
        assert!(s.contains("\t\t\t10.43.0.5 . tcp . 80 : goto service-a,\n"), "{s}");
        assert!(s.contains("\tchain nat-prerouting {\n\t\ttype nat hook prerouting"), "{s}");
    }

    #[test]
    fn identical_rulesets_diff_to_nothing() {
        assert_eq!(sample().diff_script(&sample()).as_deref(), Some(""));
    }

    #[test]
    fn changed_endpoint_flushes_only_its_chain() {
        let old = sample();
        let mut new = sample();
        new.chains.get_mut("service-a").expect("chain").rules = vec!["dnat to 10.42.0.3:8080".into()];
        let d = new.diff_script(&old).expect("incremental");
        assert_eq!(d, "flush chain ip k1s service-a\nadd rule ip k1s service-a dnat to 10.42.0.3:8080\n");
    }

    #[test]
    fn removed_service_deletes_elements_before_its_chain() {
        let old = sample();
        let mut new = sample();
        new.chains.remove("service-a");
        new.sets.get_mut("service-ips").expect("map").elements.clear();
        new.sets.get_mut("cluster-ips").expect("set").elements.clear();
        let d = new.diff_script(&old).expect("incremental");
        let del_el = d.find("delete element ip k1s service-ips { 10.43.0.5 . tcp . 80 }").expect("element deleted");
        let flush = d.find("flush chain ip k1s service-a").expect("flushed");
        let del_chain = d.find("delete chain ip k1s service-a").expect("chain deleted");
        assert!(del_el < del_chain && flush < del_chain, "{d}");
        assert!(d.contains("delete element ip k1s cluster-ips { 10.43.0.5 }"), "{d}");
    }

    #[test]
    fn new_service_declares_its_chain_before_the_element_that_jumps_to_it() {
        let old = sample();
        let mut new = sample();
        new.rule("service-b", "dnat to 10.42.0.9:80");
        new.element("service-ips", "10.43.0.6 . tcp . 80", "goto service-b");
        let d = new.diff_script(&old).expect("incremental");
        assert_eq!(
            d,
            "add chain ip k1s service-b\nadd rule ip k1s service-b dnat to 10.42.0.9:80\n\
             add element ip k1s service-ips { 10.43.0.6 . tcp . 80 : goto service-b }\n"
        );
    }

    #[test]
    fn changed_map_value_is_deleted_then_re_added() {
        let old = sample();
        let mut new = sample();
        new.rule("reject-chain", "reject");
        new.element("service-ips", "10.43.0.5 . tcp . 80", "goto reject-chain");
        let d = new.diff_script(&old).expect("incremental");
        let del = d.find("delete element ip k1s service-ips { 10.43.0.5 . tcp . 80 }").expect("delete");
        let add = d.find("add element ip k1s service-ips { 10.43.0.5 . tcp . 80 : goto reject-chain }").expect("add");
        assert!(del < add, "{d}");
    }

    #[test]
    fn base_chain_or_set_declaration_change_needs_a_full_replacement() {
        let old = sample();
        let mut new = sample();
        new.base_chain("filter-forward", "type filter hook forward priority 0; policy accept;");
        assert!(new.diff_script(&old).is_none());
        let mut new = sample();
        new.sets.get_mut("cluster-ips").expect("set").decl = vec!["type ipv4_addr".into(), "flags interval".into()];
        assert!(new.diff_script(&old).is_none());
    }

    #[test]
    fn dynamic_sets_are_created_once_and_never_flushed() {
        let mut old = sample();
        old.declare_dynamic_set("affinity-a", &["type ipv4_addr", "flags dynamic,timeout", "timeout 10800s"]);
        let new = old.clone();
        assert_eq!(new.diff_script(&old).as_deref(), Some(""));
        let d = old.diff_script(&sample()).expect("incremental");
        assert_eq!(d, "add set ip k1s affinity-a { type ipv4_addr; flags dynamic,timeout; timeout 10800s; }\n");
        assert!(old.to_string().contains("\t\ttimeout 10800s\n\t}"), "dynamic elements are not rendered");
    }
}
