//! Label selector matching (`matchLabels` and `matchExpressions`), as NetworkPolicy uses it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use std::collections::BTreeMap;

/// Whether `labels` satisfy `selector`. An empty selector matches everything; an expression
/// with an unknown operator matches nothing (upstream rejects such selectors at validation).
pub fn matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let labels_ok = selector.match_labels.iter().flatten().all(|(k, v)| labels.get(k).is_some_and(|have| have == v));
    labels_ok
        && selector.match_expressions.iter().flatten().all(|e| {
            let have = labels.get(&e.key);
            let values = e.values.as_deref().unwrap_or_default();
            match e.operator.as_str() {
                "In" => have.is_some_and(|h| values.contains(h)),
                "NotIn" => have.is_none_or(|h| !values.contains(h)),
                "Exists" => have.is_some(),
                "DoesNotExist" => have.is_none(),
                _ => false,
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        }
    }

    #[test]
    fn empty_selector_matches_everything() {
        assert!(matches(&LabelSelector::default(), &labels(&[])));
        assert!(matches(&LabelSelector::default(), &labels(&[("a", "b")])));
    }

    #[test]
    fn match_labels_need_every_pair() {
        let sel = LabelSelector { match_labels: Some(labels(&[("app", "web"), ("tier", "fe")])), ..Default::default() };
        assert!(matches(&sel, &labels(&[("app", "web"), ("tier", "fe"), ("x", "y")])));
        assert!(!matches(&sel, &labels(&[("app", "web")])));
        assert!(!matches(&sel, &labels(&[("app", "db"), ("tier", "fe")])));
    }

    #[test]
    fn expressions_follow_upstream_operators() {
        let l = labels(&[("env", "prod")]);
        let one = |e| LabelSelector { match_expressions: Some(vec![e]), ..Default::default() };
        assert!(matches(&one(expr("env", "In", &["prod", "qa"])), &l));
        assert!(!matches(&one(expr("env", "In", &["qa"])), &l));
        assert!(matches(&one(expr("env", "NotIn", &["qa"])), &l));
        assert!(matches(&one(expr("tier", "NotIn", &["qa"])), &l), "NotIn matches a missing key");
        assert!(matches(&one(expr("env", "Exists", &[])), &l));
        assert!(!matches(&one(expr("env", "DoesNotExist", &[])), &l));
        assert!(!matches(&one(expr("env", "Bogus", &[])), &l));
    }
}
