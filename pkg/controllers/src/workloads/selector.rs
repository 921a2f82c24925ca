//! Label selectors as `metav1.LabelSelectorAsSelector` evaluates them: `matchLabels` and
//! `matchExpressions` (In, NotIn, Exists, DoesNotExist) are ANDed; an empty selector selects
//! everything, a missing or invalid one selects nothing.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use std::collections::BTreeMap;

/// Whether `selector` selects an object with `labels`.
pub fn matches(selector: Option<&LabelSelector>, labels: Option<&BTreeMap<String, String>>) -> bool {
    let Some(selector) = selector else { return false };
    let empty = BTreeMap::new();
    let labels = labels.unwrap_or(&empty);
    for (k, v) in selector.match_labels.iter().flatten() {
        if labels.get(k) != Some(v) {
            return false;
        }
    }
    for req in selector.match_expressions.iter().flatten() {
        let values = req.values.as_deref().unwrap_or_default();
        let got = labels.get(&req.key);
        let ok = match req.operator.as_str() {
            "In" => !values.is_empty() && got.is_some_and(|g| values.contains(g)),
            "NotIn" => !values.is_empty() && got.is_none_or(|g| !values.contains(g)),
            "Exists" => values.is_empty() && got.is_some(),
            "DoesNotExist" => values.is_empty() && got.is_none(),
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    true
}

/// Whether the selector is `{}` (selects every object): controllers refuse to act on it.
pub fn is_empty(selector: &LabelSelector) -> bool {
    selector.match_labels.as_ref().is_none_or(BTreeMap::is_empty)
        && selector.match_expressions.as_ref().is_none_or(Vec::is_empty)
}

/// Whether every label in `subset` is present with the same value in `labels`
/// (`labels.SelectorFromSet(subset).Matches(labels)`).
pub fn set_matches(subset: Option<&BTreeMap<String, String>>, labels: Option<&BTreeMap<String, String>>) -> bool {
    let empty = BTreeMap::new();
    let labels = labels.unwrap_or(&empty);
    subset.into_iter().flatten().all(|(k, v)| labels.get(k) == Some(v))
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
            values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
        }
    }

    #[test]
    fn missing_selector_selects_nothing_and_empty_selects_everything() {
        let l = labels(&[("app", "web")]);
        assert!(!matches(None, Some(&l)));
        assert!(matches(Some(&LabelSelector::default()), Some(&l)));
        assert!(is_empty(&LabelSelector::default()));
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
    }

    #[test]
    fn not_in_matches_absent_keys_and_unknown_operators_match_nothing() {
        let not_in =
            LabelSelector { match_expressions: Some(vec![expr("env", "NotIn", &["prod"])]), ..Default::default() };
        assert!(matches(Some(&not_in), Some(&labels(&[]))));
        assert!(!matches(Some(&not_in), Some(&labels(&[("env", "prod")]))));
        let bogus = LabelSelector { match_expressions: Some(vec![expr("env", "Gt", &["1"])]), ..Default::default() };
        assert!(!matches(Some(&bogus), Some(&labels(&[("env", "2")]))));
    }

    #[test]
    fn set_matches_requires_every_pair() {
        let l = labels(&[("a", "1"), ("b", "2")]);
        assert!(set_matches(Some(&labels(&[("a", "1")])), Some(&l)));
        assert!(!set_matches(Some(&labels(&[("a", "2")])), Some(&l)));
        assert!(set_matches(None, Some(&l)));
    }
}
