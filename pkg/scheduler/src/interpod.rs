//! InterPodAffinity: required pod affinity and anti-affinity (the incoming pod's, and existing
//! pods' anti-affinity against it) counted per topology pair, and the preferred terms' score.

use crate::cache::Cache;
use crate::matching::Labels;
use crate::node_info::{NodeInfo, PodInfo};
use k1s_api::selectors;
use k8s_openapi::api::core::v1::PodAffinityTerm;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use std::collections::{HashMap, HashSet};

pub const ERR_AFFINITY: &str = "node(s) didn't match pod affinity rules";
pub const ERR_ANTI_AFFINITY: &str = "node(s) didn't match pod anti-affinity rules";
pub const ERR_EXISTING_ANTI_AFFINITY: &str = "node(s) didn't satisfy existing pods anti-affinity rules";

/// Weight of an existing pod's required affinity term towards the incoming pod when scoring
/// (upstream's default `hardPodAffinityWeight`).
const HARD_POD_AFFINITY_WEIGHT: i64 = 1;

type Pair = (String, String);

/// A pod affinity term with its namespaces resolved against the pod that owns it.
#[derive(Clone, Debug)]
pub struct Term {
    namespaces: HashSet<String>,
    namespace_selector: Option<LabelSelector>,
    selector: Option<LabelSelector>,
    pub topology_key: String,
}

impl Term {
    pub fn new(owner: &PodInfo, t: &PodAffinityTerm) -> Term {
        let listed = t.namespaces.clone().unwrap_or_default();
        let namespaces = if listed.is_empty() && t.namespace_selector.is_none() {
            HashSet::from([owner.namespace.clone()])
        } else {
            listed.into_iter().collect()
        };
        Term {
            namespaces,
            namespace_selector: t.namespace_selector.clone(),
            selector: t.label_selector.clone(),
            topology_key: t.topology_key.clone(),
        }
    }

    /// Whether `pod` (in a namespace labelled `ns_labels`) is one of the pods the term selects.
    pub fn matches(&self, pod: &PodInfo, ns_labels: &Labels) -> bool {
        self.matches_parts(&pod.namespace, pod.labels(), ns_labels)
    }

    fn matches_parts(&self, namespace: &str, labels: &Labels, ns_labels: &Labels) -> bool {
        (self.namespaces.contains(namespace) || selectors::matches(self.namespace_selector.as_ref(), Some(ns_labels)))
            && selectors::matches(self.selector.as_ref(), Some(labels))
    }
}

fn terms(owner: &PodInfo, list: &[PodAffinityTerm]) -> Vec<Term> {
    list.iter().map(|t| Term::new(owner, t)).collect()
}

fn bump(map: &mut HashMap<Pair, i64>, pair: Pair, by: i64) {
    let e = map.entry(pair.clone()).or_default();
    *e += by;
    if *e == 0 {
        map.remove(&pair);
    }
}

/// The incoming pod's PreFilter state: counts per (topology key, value).
#[derive(Clone, Debug, Default)]
pub struct InterPodState {
    affinity_terms: Vec<Term>,
    anti_affinity_terms: Vec<Term>,
    own_namespace: String,
    own_labels: Labels,
    own_ns_labels: Labels,
    /// Pairs where an existing pod's required anti-affinity rejects the incoming pod.
    existing_anti: HashMap<Pair, i64>,
    /// Pairs holding pods that match all of the incoming pod's affinity terms.
    affinity: HashMap<Pair, i64>,
    /// Pairs holding pods the incoming pod's anti-affinity terms select.
    anti_affinity: HashMap<Pair, i64>,
}

impl InterPodState {
    /// Counts over every pod in the cache.
    pub fn compute(cache: &Cache, pod: &PodInfo) -> InterPodState {
        let mut s = InterPodState {
            affinity_terms: terms(pod, pod.required_affinity()),
            anti_affinity_terms: terms(pod, pod.required_anti_affinity()),
            own_namespace: pod.namespace.clone(),
            own_labels: pod.labels().clone(),
            own_ns_labels: cache.namespace_labels(&pod.namespace).clone(),
            ..Default::default()
        };
        let own_terms = !s.affinity_terms.is_empty() || !s.anti_affinity_terms.is_empty();
        for node in cache.nodes() {
            if !own_terms && node.pods_with_required_anti_affinity == 0 {
                continue;
            }
            for existing in &node.pods {
                s.update(cache, existing, node, 1);
            }
        }
        s
    }

    /// Whether any rule applies at all (no state means the filter always passes).
    pub fn is_empty(&self) -> bool {
        self.affinity_terms.is_empty() && self.anti_affinity_terms.is_empty() && self.existing_anti.is_empty()
    }

    /// Accounts for `existing` appearing on (multiplier 1) or leaving (-1) `node`.
    pub fn update(&mut self, cache: &Cache, existing: &PodInfo, node: &NodeInfo, multiplier: i64) {
        let node_labels = node.labels();
        for t in existing.required_anti_affinity() {
            let term = Term::new(existing, t);
            if let Some(v) = node_labels.get(&term.topology_key) {
                if term.matches_parts(&self.own_namespace, &self.own_labels, &self.own_ns_labels) {
                    bump(&mut self.existing_anti, (term.topology_key.clone(), v.clone()), multiplier);
                }
            }
        }
        if self.affinity_terms.is_empty() && self.anti_affinity_terms.is_empty() {
            return;
        }
        let ns_labels = cache.namespace_labels(&existing.namespace);
        if !self.affinity_terms.is_empty() && self.affinity_terms.iter().all(|t| t.matches(existing, ns_labels)) {
            for t in &self.affinity_terms {
                if let Some(v) = node_labels.get(&t.topology_key) {
                    bump(&mut self.affinity, (t.topology_key.clone(), v.clone()), multiplier);
                }
            }
        }
        for t in &self.anti_affinity_terms {
            if let Some(v) = node_labels.get(&t.topology_key) {
                if t.matches(existing, ns_labels) {
                    bump(&mut self.anti_affinity, (t.topology_key.clone(), v.clone()), multiplier);
                }
            }
        }
    }

    /// The filter's verdict for `node`: `Ok`, or (reason, resolvable by preemption).
    pub fn check(&self, pod: &PodInfo, node: &NodeInfo) -> Result<(), (&'static str, bool)> {
        let labels = node.labels();
        if !self.affinity_terms.is_empty() {
            let mut pods_exist = true;
            for t in &self.affinity_terms {
                match labels.get(&t.topology_key) {
                    Some(v) => {
                        if self.affinity.get(&(t.topology_key.clone(), v.clone())).copied().unwrap_or(0) <= 0 {
                            pods_exist = false;
                        }
                    }
                    None => return Err((ERR_AFFINITY, false)),
                }
            }
            // The first pod of a group with affinity to itself may go anywhere the topology exists.
            let first_of_group =
                self.affinity.is_empty() && self.affinity_terms.iter().all(|t| t.matches(pod, &self.own_ns_labels));
            if !pods_exist && !first_of_group {
                return Err((ERR_AFFINITY, false));
            }
        }
        for t in &self.anti_affinity_terms {
            if let Some(v) = labels.get(&t.topology_key) {
                if self.anti_affinity.get(&(t.topology_key.clone(), v.clone())).copied().unwrap_or(0) > 0 {
                    return Err((ERR_ANTI_AFFINITY, true));
                }
            }
        }
        if !self.existing_anti.is_empty()
            && labels.iter().any(|(k, v)| self.existing_anti.get(&(k.clone(), v.clone())).copied().unwrap_or(0) > 0)
        {
            return Err((ERR_EXISTING_ANTI_AFFINITY, true));
        }
        Ok(())
    }
}

/// Raw preferred-affinity scores per node (before normalization), in `nodes` order.
pub fn preferred_scores(cache: &Cache, pod: &PodInfo, nodes: &[&NodeInfo]) -> Vec<i64> {
    let pref_affinity: Vec<(Term, i64)> =
        pod.preferred_affinity().iter().map(|w| (Term::new(pod, &w.pod_affinity_term), i64::from(w.weight))).collect();
    let pref_anti: Vec<(Term, i64)> = pod
        .preferred_anti_affinity()
        .iter()
        .map(|w| (Term::new(pod, &w.pod_affinity_term), i64::from(w.weight)))
        .collect();
    let own_terms = !pref_affinity.is_empty() || !pref_anti.is_empty();
    let own_ns = cache.namespace_labels(&pod.namespace);
    let mut topo: HashMap<String, HashMap<String, i64>> = HashMap::new();
    let mut add = |labels: &Labels, key: &str, by: i64| {
        if let Some(v) = labels.get(key) {
            *topo.entry(key.to_string()).or_default().entry(v.clone()).or_default() += by;
        }
    };
    for node in cache.nodes() {
        if !own_terms && node.pods_with_affinity == 0 {
            continue;
        }
        let labels = node.labels();
        if labels.is_empty() {
            continue;
        }
        for existing in &node.pods {
            if !own_terms && !existing.has_pod_affinity() {
                continue;
            }
            let existing_ns = cache.namespace_labels(&existing.namespace);
            for (t, w) in &pref_affinity {
                if t.matches(existing, existing_ns) {
                    add(labels, &t.topology_key, *w);
                }
            }
            for (t, w) in &pref_anti {
                if t.matches(existing, existing_ns) {
                    add(labels, &t.topology_key, -*w);
                }
            }
            for t in existing.required_affinity() {
                let t = Term::new(existing, t);
                if t.matches(pod, own_ns) {
                    add(labels, &t.topology_key, HARD_POD_AFFINITY_WEIGHT);
                }
            }
            for w in existing.preferred_affinity() {
                let t = Term::new(existing, &w.pod_affinity_term);
                if t.matches(pod, own_ns) {
                    add(labels, &t.topology_key, i64::from(w.weight));
                }
            }
            for w in existing.preferred_anti_affinity() {
                let t = Term::new(existing, &w.pod_affinity_term);
                if t.matches(pod, own_ns) {
                    add(labels, &t.topology_key, -i64::from(w.weight));
                }
            }
        }
    }
    nodes
        .iter()
        .map(|n| {
            let labels = n.labels();
            topo.iter().filter_map(|(key, values)| labels.get(key).and_then(|v| values.get(v))).sum()
        })
        .collect()
}
