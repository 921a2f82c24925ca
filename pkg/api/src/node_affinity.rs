//! Node affinity and taints as upstream's `component-helpers/scheduling/corev1` has them: node
//! selector terms (label expressions and `metadata.name` fields, with `Gt`/`Lt`), a pod's
//! `nodeSelector` with its required node affinity, and tolerations against taints
//! (`ToleratesTaint`). The scheduler and the DaemonSet controller both decide with these.

use k8s_openapi::api::core::v1::{Node, NodeSelectorRequirement, NodeSelectorTerm, PodSpec, Taint, Toleration};
use std::collections::BTreeMap;

static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();

fn requirement_matches(op: &str, values: &[String], value: Option<&String>) -> bool {
    match op {
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), Some(want)) = (value, values.first()) else { return false };
            match (v.parse::<i64>(), want.parse::<i64>()) {
                (Ok(have), Ok(want)) if op == "Gt" => have > want,
                (Ok(have), Ok(want)) => have < want,
                _ => false,
            }
        }
        _ => false,
    }
}

fn node_requirement_matches(r: &NodeSelectorRequirement, value: Option<&String>) -> bool {
    requirement_matches(&r.operator, r.values.as_deref().unwrap_or_default(), value)
}

/// One node selector term: every expression on labels and every `metadata.name` field
/// requirement must hold; a term with neither matches nothing.
pub fn term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    let labels = node.metadata.labels.as_ref().unwrap_or(&NO_LABELS);
    let name = node.metadata.name.clone().unwrap_or_default();
    exprs.iter().all(|r| node_requirement_matches(r, labels.get(&r.key)))
        && fields.iter().all(|r| {
            r.key == "metadata.name"
                && matches!(r.operator.as_str(), "In" | "NotIn")
                && node_requirement_matches(r, Some(&name))
        })
}

/// `spec.nodeSelector` and the required node affinity terms (ORed) both hold for `node`.
pub fn node_matches_pod(spec: &PodSpec, node: &Node) -> bool {
    let labels = node.metadata.labels.as_ref().unwrap_or(&NO_LABELS);
    if let Some(sel) = &spec.node_selector {
        if sel.iter().any(|(k, v)| labels.get(k) != Some(v)) {
            return false;
        }
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| na.required_during_scheduling_ignored_during_execution.as_ref());
    match required {
        Some(sel) => sel.node_selector_terms.iter().any(|t| term_matches(t, node)),
        None => true,
    }
}

/// Upstream's `Toleration.ToleratesTaint`.
pub fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    if let Some(effect) = t.effect.as_deref().filter(|e| !e.is_empty()) {
        if effect != taint.effect {
            return false;
        }
    }
    if let Some(key) = t.key.as_deref().filter(|k| !k.is_empty()) {
        if key != taint.key {
            return false;
        }
    }
    match t.operator.as_deref().unwrap_or("") {
        "" | "Equal" => t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
        "Exists" => true,
        _ => false,
    }
}

pub fn tolerated(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| tolerates(t, taint))
}

/// The first NoSchedule/NoExecute taint none of `tolerations` tolerates.
pub fn first_untolerated<'a>(taints: &'a [Taint], tolerations: &[Toleration]) -> Option<&'a Taint> {
    taints.iter().filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute").find(|t| !tolerated(tolerations, t))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Affinity, NodeAffinity, NodeSelector};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn node(name: &str, l: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta { name: Some(name.into()), labels: Some(labels(l)), ..Default::default() },
            ..Default::default()
        }
    }

    fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|s| s.to_string()).collect()),
        }
    }

    #[test]
    fn node_selector_operators_follow_upstream() {
        let n = node("n1", &[("zone", "a"), ("cores", "8")]);
        let term =
            |r: NodeSelectorRequirement| NodeSelectorTerm { match_expressions: Some(vec![r]), match_fields: None };
        assert!(term_matches(&term(req("zone", "In", &["a", "b"])), &n));
        assert!(!term_matches(&term(req("zone", "NotIn", &["a"])), &n));
        assert!(term_matches(&term(req("gpu", "NotIn", &["x"])), &n));
        assert!(term_matches(&term(req("zone", "Exists", &[])), &n));
        assert!(term_matches(&term(req("gpu", "DoesNotExist", &[])), &n));
        assert!(term_matches(&term(req("cores", "Gt", &["4"])), &n));
        assert!(!term_matches(&term(req("cores", "Lt", &["4"])), &n));
        assert!(!term_matches(&term(req("zone", "Gt", &["4"])), &n));
        let by_name =
            NodeSelectorTerm { match_expressions: None, match_fields: Some(vec![req("metadata.name", "In", &["n1"])]) };
        assert!(term_matches(&by_name, &n));
        assert!(!term_matches(&NodeSelectorTerm::default(), &n));
    }

    #[test]
    fn node_selector_and_required_terms_must_both_hold() {
        let n = node("n1", &[("disk", "ssd"), ("zone", "a")]);
        let mut spec = PodSpec { node_selector: Some(labels(&[("disk", "ssd")])), ..Default::default() };
        assert!(node_matches_pod(&spec, &n));
        spec.affinity = Some(Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms: vec![
                        NodeSelectorTerm {
                            match_expressions: Some(vec![req("zone", "In", &["b"])]),
                            match_fields: None,
                        },
                        NodeSelectorTerm {
                            match_expressions: Some(vec![req("zone", "In", &["a"])]),
                            match_fields: None,
                        },
                    ],
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
        assert!(node_matches_pod(&spec, &n));
        spec.node_selector = Some(labels(&[("disk", "hdd")]));
        assert!(!node_matches_pod(&spec, &n));
    }

    #[test]
    fn tolerations_match_key_value_and_effect() {
        let taint =
            Taint { key: "dedicated".into(), value: Some("gpu".into()), effect: "NoSchedule".into(), time_added: None };
        let tol = |key: Option<&str>, op: Option<&str>, value: Option<&str>, effect: Option<&str>| Toleration {
            key: key.map(Into::into),
            operator: op.map(Into::into),
            value: value.map(Into::into),
            effect: effect.map(Into::into),
            toleration_seconds: None,
        };
        assert!(tolerates(&tol(Some("dedicated"), Some("Equal"), Some("gpu"), Some("NoSchedule")), &taint));
        assert!(tolerates(&tol(Some("dedicated"), None, Some("gpu"), None), &taint));
        assert!(!tolerates(&tol(Some("dedicated"), Some("Equal"), Some("cpu"), None), &taint));
        assert!(tolerates(&tol(Some("dedicated"), Some("Exists"), None, None), &taint));
        assert!(tolerates(&tol(None, Some("Exists"), None, None), &taint));
        assert!(!tolerates(&tol(Some("dedicated"), Some("Exists"), None, Some("NoExecute")), &taint));
        let prefer = Taint { effect: "PreferNoSchedule".into(), ..taint.clone() };
        assert!(first_untolerated(std::slice::from_ref(&prefer), &[]).is_none());
        assert_eq!(first_untolerated(&[prefer, taint.clone()], &[]), Some(&taint));
    }
}
